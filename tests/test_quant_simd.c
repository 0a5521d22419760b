/* The quantizers' SIMD variants (quantize/quant_internal.h, "SIMD
 * variants") against their scalar references: every entry bit for bit on
 * odd sizes and awkward values (ties of magnitude, zeros, saturating
 * scales, tails past the last multiple of 8), then whole rows of every
 * quantizable type, with and without importance weights, quantized with
 * the reference table and with each variant forced: the bytes must match. */
#include <stdlib.h>
#include <string.h>

#include "lmq_quant.h"
#include "quant_internal.h"
#include "testutil.h"

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static double uni(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
}
static float gauss(void) { return (float)(sqrt(-2.0 * log(uni())) * cos(6.283185307179586 * uni())); }

/* values with repeats, exact ties, zeros and a heavy tail */
static void fill(float *x, int n, float scale)
{
    for (int i = 0; i < n; i++) {
        const double u = uni();
        x[i] = u < 0.05 ? 0.0f : u < 0.1 ? (i > 0 ? -x[i - 1] : 1.0f) : scale * gauss() * (u > 0.98 ? 8.0f : 1.0f);
    }
}

static void check_csums(const lmq_qsimd *ref, const lmq_qsimd *v)
{
    float xm[264], w[264], wx[264], isc[40];
    lmq_csum3 a[40], b[40];
    int bad = 0, runs = 0;
    for (int n = 8; n <= 256; n += 8) {
        for (int rep = 0; rep < 6; rep++, runs++) {
            fill(xm, n, 1.0f);
            for (int i = 0; i < n; i++) {
                xm[i] = fabsf(xm[i]);
                w[i] = rep == 5 ? 0.0f : (float)uni();
                wx[i] = w[i] * xm[i];
            }
            const int nc = 1 + (int)(uni() * 39);
            for (int c = 0; c < nc; c++) isc[c] = (float)(uni() * 40.0 - 5.0);
            const float hi = (float)(1 + (int)(uni() * 63));
            ref->csums(n, xm, w, wx, nc, isc, 0.0f, hi, a);
            v->csums(n, xm, w, wx, nc, isc, 0.0f, hi, b);
            bad += memcmp(a, b, sizeof a[0] * (size_t)nc) != 0;
        }
    }
    T_CHECK(bad == 0, "%s csums: %d of %d cases differ from the reference", v->name, bad, runs);
}

static void check_grid_errs(const lmq_qsimd *ref, const lmq_qsimd *v)
{
    float x[300], w[300], dl[12], ml[12], a[12], b[12];
    int bad = 0, runs = 0;
    for (int n = 1; n <= 300; n += (n < 40 ? 1 : 13)) {
        for (int rep = 0; rep < 4; rep++, runs++) {
            fill(x, n, 0.5f);
            for (int i = 0; i < n; i++) w[i] = (float)uni();
            const int nc = 1 + (int)(uni() * 11);
            for (int c = 0; c < nc; c++) {
                dl[c] = c == 0 && rep == 1 ? 0.0f : (float)(uni() * 0.3);
                ml[c] = rep & 1 ? (float)(uni() * 0.5) : 0.0f;
            }
            const float lo = rep & 1 ? 0.0f : -8.0f, hi = rep & 1 ? 15.0f : 7.0f;
            ref->grid_errs(n, x, w, nc, dl, ml, lo, hi, a);
            v->grid_errs(n, x, w, nc, dl, ml, lo, hi, b);
            bad += memcmp(a, b, sizeof a[0] * (size_t)nc) != 0;
        }
    }
    T_CHECK(bad == 0, "%s grid_errs: %d of %d cases differ from the reference", v->name, bad, runs);
}

static void check_asym_sums(const lmq_qsimd *ref, const lmq_qsimd *v)
{
    static const int nsubs[] = {1, 3, 8, 16}, lens[] = {7, 16, 32};
    float x[16 * 32], w[16 * 32], ml[16], idl[16];
    double a[16][5], b[16][5];
    int bad = 0, runs = 0;
    for (size_t i = 0; i < sizeof nsubs / sizeof nsubs[0]; i++) {
        for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
            for (int rep = 0; rep < 8; rep++, runs++) {
                const int ns = nsubs[i], len = lens[k];
                fill(x, ns * len, 1.0f);
                for (int l = 0; l < ns * len; l++) w[l] = (float)uni();
                for (int j = 0; j < ns; j++) {
                    ml[j] = (float)(uni() * 2.0);
                    idl[j] = rep == 0 && j == 0 ? 0.0f : (float)(uni() * 10.0);
                }
                const int nmax = rep & 1 ? 31 : 15;
                ref->asym_sums(ns, len, x, w, ml, idl, nmax, a);
                v->asym_sums(ns, len, x, w, ml, idl, nmax, b);
                bad += memcmp(a, b, sizeof a[0] * (size_t)ns) != 0;
            }
        }
    }
    T_CHECK(bad == 0, "%s asym_sums: %d of %d cases differ from the reference", v->name, bad, runs);
}

static void check_iq4(const lmq_qsimd *ref, const lmq_qsimd *v)
{
    float x[264], w[264], wx[264], id[30], a[30][2], b[30][2];
    int bad = 0, runs = 0;
    for (int n = 1; n <= 264; n += (n < 40 ? 1 : 7)) {
        for (int rep = 0; rep < 3; rep++, runs++) {
            fill(x, n, 1.0f);
            float amax = 0.0f;
            for (int i = 0; i < n; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
            for (int i = 0; i < n; i++) {
                x[i] = amax > 0.0f ? x[i] / amax : 0.0f;
                w[i] = rep == 2 ? 1.0f : (float)uni();
                wx[i] = w[i] * x[i];
            }
            for (int c = 0; c < 30; c++) id[c] = (float)((c % 15) - 7 + (c < 15 ? -127 : 113)) * (rep ? -1.0f : 1.0f);
            const float dl = rep == 1 && n == 5 ? 0.0f : (float)(0.002 + uni() * 0.02);
            bad += ref->iq4_err(n, x, w, dl) != v->iq4_err(n, x, w, dl);
            if (n % 8) continue;
            ref->iq4_sums(n, x, w, wx, 30, id, a);
            v->iq4_sums(n, x, w, wx, 30, id, b);
            bad += memcmp(a, b, sizeof a) != 0;
        }
    }
    T_CHECK(bad == 0, "%s iq4 sums/err: %d of %d cases differ from the reference", v->name, bad, runs);
}

static void check_q4_0(const lmq_qsimd *ref, const lmq_qsimd *v)
{
    enum { NB = 9 };
    float x[32 * NB];
    lmq_block_q4_0 a[NB], b[NB];
    int bad = 0, runs = 0;
    for (int rep = 0; rep < 200; rep++, runs++) {
        const float scale = rep % 7 == 6 ? 1e6f : rep % 7 == 5 ? 1e-30f : 1.0f; /* saturating, tiny scales */
        fill(x, 32 * NB, scale);
        if (rep % 5 == 0) memset(x + 32, 0, 32 * sizeof(float));  /* an all-zero block */
        if (rep % 3 == 0) { x[70] = 3.0f; x[71] = -3.0f; x[100] = -3.0f; } /* ties of magnitude */
        const int nb = 1 + rep % NB;
        memset(a, 0xAA, sizeof a);
        memset(b, 0xAA, sizeof b);
        ref->q4_0_rtn(x, a, 32 * nb);
        v->q4_0_rtn(x, b, 32 * nb);
        bad += memcmp(a, b, sizeof a) != 0;
    }
    T_CHECK(bad == 0, "%s q4_0: %d of %d cases differ from the reference", v->name, bad, runs);
}

/* Whole rows of every type: the bytes with the reference table forced and
 * with the variant forced. */
static void check_rows(int which, const char *name)
{
    enum { ROWS = 5, COLS = 768 };
    float *x = malloc(ROWS * COLS * sizeof *x), *imw = malloc(COLS * sizeof *imw);
    fill(x, ROWS * COLS, 0.02f);
    for (int j = 0; j < COLS; j++) imw[j] = (float)(0.05 + uni() * uni() * 4.0);
    int types = 0;
    for (int t = 0; t < LMQ_TYPE_COUNT; t++) {
        const lmq_type_traits *tt = lmq_type_get((lmq_type)t);
        if (!tt || !tt->quantized || !lmq_type_can_quantize((lmq_type)t) || COLS % tt->block_size) continue;
        const int64_t rb = lmq_row_size((lmq_type)t, COLS);
        uint8_t *a = malloc((size_t)(rb * ROWS)), *b = malloc((size_t)(rb * ROWS));
        for (int wi = 0; wi < 2; wi++) {
            const float *w = wi ? imw : NULL;
            lmq_q_simd_force(LMQ_QSIMD_REF);
            lmq_status s1 = lmq_quantize_rows((lmq_type)t, x, a, ROWS, COLS, w, 2);
            lmq_q_simd_force(which);
            lmq_status s2 = lmq_quantize_rows((lmq_type)t, x, b, ROWS, COLS, w, 2);
            T_CHECK(s1 == LMQ_OK && s2 == LMQ_OK, "%s %s: %s", name, tt->name, lmq_last_error());
            T_CHECK(!memcmp(a, b, (size_t)(rb * ROWS)), "%s: %s rows (%s importance weights) differ from the reference",
                    name, tt->name, wi ? "with" : "without");
        }
        types++;
        free(a);
        free(b);
    }
    T_CHECK(types >= 15, "only %d types quantized", types);
    free(x);
    free(imw);
}

/* lmq_quantize_rows_src: bf16/f16/f32 source rows give the bytes of the
 * converted rows; a NaN is refused naming its row and element. */
static void check_src_rows(void)
{
    enum { ROWS = 7, COLS = 512 };
    float *x = malloc(ROWS * COLS * sizeof *x);
    uint16_t *h = malloc(ROWS * COLS * sizeof *h), *bf = malloc(ROWS * COLS * sizeof *bf);
    fill(x, ROWS * COLS, 0.05f);
    for (int i = 0; i < ROWS * COLS; i++) {
        bf[i] = lmq_fp32_to_bf16(x[i]);
        h[i] = lmq_fp32_to_fp16(x[i]);
    }
    const lmq_type t = LMQ_TYPE_Q4_K;
    const int64_t rb = lmq_row_size(t, COLS);
    uint8_t *a = malloc((size_t)(rb * ROWS)), *b = malloc((size_t)(rb * ROWS));
    float *y = malloc(ROWS * COLS * sizeof *y);
    for (int k = 0; k < 3; k++) {
        const lmq_type st = k == 0 ? LMQ_TYPE_F32 : k == 1 ? LMQ_TYPE_F16 : LMQ_TYPE_BF16;
        const void *src = k == 0 ? (const void *)x : k == 1 ? (const void *)h : (const void *)bf;
        T_CHECK(lmq_convert_float_row(st, src, LMQ_TYPE_F32, y, ROWS * COLS) == LMQ_OK, "convert");
        for (int thr = 1; thr <= 3; thr++) {
            T_CHECK(lmq_quantize_rows(t, y, a, ROWS, COLS, NULL, 1) == LMQ_OK, "%s", lmq_last_error());
            T_CHECK(lmq_quantize_rows_src(t, st, src, b, ROWS, COLS, NULL, thr) == LMQ_OK, "%s", lmq_last_error());
            T_CHECK(!memcmp(a, b, (size_t)(rb * ROWS)), "%s source, %d threads: bytes differ", lmq_type_name(st),
                    thr);
        }
    }
    bf[3 * COLS + 17] = 0x7FC0; /* NaN */
    lmq_status s = lmq_quantize_rows_src(t, LMQ_TYPE_BF16, bf, b, ROWS, COLS, NULL, 2);
    T_CHECK(s == LMQ_ERR_INVALID_ARG && strstr(lmq_last_error(), "row 3 element 17") &&
                strstr(lmq_last_error(), "NaN"),
            "NaN source: %d %s", (int)s, lmq_last_error());
    s = lmq_quantize_rows_src(t, LMQ_TYPE_Q8_0, bf, b, ROWS, COLS, NULL, 2);
    T_CHECK(s == LMQ_ERR_INVALID_ARG, "a quantized source type is refused (%d)", (int)s);
    free(x);
    free(h);
    free(bf);
    free(a);
    free(b);
    free(y);
}

int main(void)
{
    const lmq_qsimd *ref = lmq_q_simd_for(LMQ_QSIMD_REF);
    T_CHECK(ref != NULL && lmq_q_simd() != NULL, "no reference table");
    int variants = 0;
    for (int which = 1; which < LMQ_QSIMD_COUNT; which++) {
        const lmq_qsimd *v = lmq_q_simd_for(which);
        if (!v) {
            printf("variant %d: not supported by this CPU\n", which);
            continue;
        }
        variants++;
        check_csums(ref, v);
        check_grid_errs(ref, v);
        check_asym_sums(ref, v);
        check_q4_0(ref, v);
        check_iq4(ref, v);
        check_rows(which, v->name);
    }
#if defined(__x86_64__)
    T_CHECK(variants >= 1, "an x86-64 CPU without AVX2 ran the tests: nothing checked the AVX2 variants");
#endif
    check_src_rows();
    printf("%d SIMD variant(s) checked\n", variants);
    return t_finish();
}
