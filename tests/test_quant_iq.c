/* ggml's codebook (IQ1..IQ3) and ternary (TQ) types against ggml itself.
 *
 * tests/data/iq_ggml_vectors.bin holds, per type, blocks that ggml made
 * (ggml_quantize_chunk with an importance matrix, then random bytes with a
 * modest f16 scale: every index, sign and scale pattern), the floats ggml's
 * to_float gave for them, a q8_K activation row from ggml's quantizer and
 * ggml's vec_dot of each block and of the whole row with it. Layout:
 * "LMQIQV1\0", u32 n_types; per type u32 ggml_type, u32 n_blocks, u32
 * block bytes, the blocks, n_blocks * 256 f32, n_blocks q8_K blocks (292
 * bytes), n_blocks + 1 f32 dots (the last over the whole row).
 *
 * Checked: the expanded grids equal ggml's tables (position-weighted sums
 * of their entries, computed from ggml-common.h), lmq's dequantized floats
 * equal ggml's bit for bit, every ISA's dot equals ggml's to float
 * rounding, the ternary quantizers beat ggml's round-to-nearest and keep
 * zeros, and the read-only types refuse to be written with one line. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "lmq_format.h"
#include "lmq_quant.h"
#include "testutil.h"

static uint64_t wsum64(const uint64_t *v, int n)
{
    uint64_t s = 0;
    for (int i = 0; i < n; i++) s += (uint64_t)(i + 1) * v[i];
    return s;
}

static uint64_t wsum32(const uint32_t *v, int n)
{
    uint64_t s = 0;
    for (int i = 0; i < n; i++) s += (uint64_t)(i + 1) * v[i];
    return s;
}

static void test_grids(void)
{
    const lmq_iq_grids *g = lmq_iq_grids_get();
    /* sum over entries of (index + 1) * entry, mod 2^64, of ggml's tables */
    T_CHECK(wsum64(g->iq2xxs, 256) == 0xcb9ca27f96a681f5ull, "iq2xxs grid as ggml's");
    T_CHECK(wsum64(g->iq2xs, 512) == 0xa3bb3aa0abccb48cull, "iq2xs grid as ggml's");
    T_CHECK(wsum64(g->iq2s, 1024) == 0x20f0afd18f24c859ull, "iq2s grid as ggml's");
    T_CHECK(wsum64(g->iq1s, 2048) == 0x05749c55a8776663ull, "iq1s grid as ggml's");
    T_CHECK(wsum32(g->iq3xxs, 256) == 0x11be6d9a520eull, "iq3xxs grid as ggml's");
    T_CHECK(wsum32(g->iq3s, 512) == 0x114b10ed9fb0ull, "iq3s grid as ggml's");
    /* ksigns_iq2xs: the 7 bits and the parity bit */
    const uint8_t first[8] = {0, 129, 130, 3, 132, 5, 6, 135};
    T_CHECK(!memcmp(g->signs, first, 8) && g->signs[127] == 255 && g->signs[64] == 192, "sign table");
    T_CHECK(g->sign64[1] == 0xff000000000000ffull && g->sign64[127] == ~0ull, "sign masks");
    T_CHECK(lmq_iq_grids_get() == g, "one table");
}

typedef struct rec {
    lmq_type t;
    uint32_t nb, ts;
    const uint8_t *blocks, *act;
    const float *deq, *dots;
} rec;

static size_t parse(const uint8_t *p, size_t len, rec *out, size_t max)
{
    if (len < 12 || memcmp(p, "LMQIQV1", 8)) return 0;
    uint32_t n;
    memcpy(&n, p + 8, 4);
    size_t at = 12, k = 0;
    for (; k < n && k < max; k++) {
        uint32_t h[3];
        if (at + 12 > len) return 0;
        memcpy(h, p + at, 12);
        at += 12;
        rec *r = &out[k];
        r->nb = h[1];
        r->ts = h[2];
        const size_t need = (size_t)r->nb * (r->ts + 256 * 4 + 292) + 4 * ((size_t)r->nb + 1);
        if (at + need > len || lmq_type_from_ggml(h[0], &r->t) != LMQ_OK) return 0;
        r->blocks = p + at;
        r->deq = (const float *)(p + at + (size_t)r->nb * r->ts); /* read with memcpy only */
        r->act = p + at + (size_t)r->nb * (r->ts + 1024);
        r->dots = (const float *)(r->act + (size_t)r->nb * 292);
        at += need;
    }
    return k == n ? k : 0;
}

/* sum |w_i a_i| over one block run: the scale of any summation order's
 * rounding error */
static double abs_dot(const rec *r, const uint8_t *wb, const uint8_t *ab, int b0, int nb)
{
    float *w = malloc(sizeof(float) * 256 * (size_t)nb), *a = malloc(sizeof(float) * 256 * (size_t)nb);
    lmq_dequantize_row(r->t, wb + (size_t)b0 * r->ts, w, 256 * nb);
    lmq_dequantize_row(LMQ_TYPE_Q8_K, ab + (size_t)b0 * 292, a, 256 * nb);
    double s = 0;
    for (int i = 0; i < 256 * nb; i++) s += fabs((double)w[i] * a[i]);
    free(w);
    free(a);
    return s;
}

static void test_against_ggml(void)
{
    size_t len = 0;
    uint8_t *bytes = (uint8_t *)t_read_all(t_data("iq_ggml_vectors.bin"), &len);
    T_CHECK(bytes != NULL, "read tests/data/iq_ggml_vectors.bin");
    if (!bytes) return;
    rec recs[16];
    const size_t n = parse(bytes, len, recs, 16);
    T_CHECK(n == 9, "9 types in the vector file (%zu)", n);
    lmq_isa isas[LMQ_ISA_COUNT];
    const int n_isas = lmq_isa_list(isas, LMQ_ISA_COUNT);
    for (size_t k = 0; k < n; k++) {
        const rec *r = &recs[k];
        const char *nm = lmq_type_name(r->t);
        T_CHECK((uint32_t)lmq_type_get(r->t)->type_size == r->ts && lmq_type_get(r->t)->block_size == 256, "%s geometry", nm);
        const int64_t ne = 256 * (int64_t)r->nb;
        float *y = malloc(sizeof(float) * (size_t)ne), *want = malloc(sizeof(float) * (size_t)ne);
        /* aligned copies: the file's records sit at any offset */
        uint8_t *w = malloc((size_t)r->nb * r->ts + 2), *act = malloc((size_t)r->nb * 292 + 4);
        memcpy(w + 2, r->blocks, (size_t)r->nb * r->ts); /* 2-byte aligned, as block structs are */
        memcpy(act, r->act, (size_t)r->nb * 292);
        memcpy(want, r->deq, sizeof(float) * (size_t)ne);
        T_CHECK(lmq_dequantize_row(r->t, w + 2, y, ne) == LMQ_OK, "%s dequantize", nm);
        int bad = 0, first = -1;
        for (int64_t i = 0; i < ne; i++)
            if (memcmp(&y[i], &want[i], 4)) {
                if (first < 0) first = (int)i;
                bad++;
            }
        T_CHECK(bad == 0, "%s: %d of %lld dequantized values differ from ggml's (first at %d: %g vs %g)", nm, bad,
                (long long)ne, first, first >= 0 ? (double)y[first] : 0.0, first >= 0 ? (double)want[first] : 0.0);
        float dots[17];
        memcpy(dots, r->dots, sizeof(float) * (r->nb + 1));
        for (int ii = 0; ii < n_isas; ii++) {
            const lmq_kernel_table *kt = lmq_kernels_for(isas[ii]);
            T_CHECK(kt->vec_dot[r->t] && kt->to_float[r->t], "%s: %s kernels", lmq_isa_name(isas[ii]), nm);
            if (!kt->vec_dot[r->t]) continue;
            double worst = 0;
            for (uint32_t b = 0; b <= r->nb; b++) {
                const bool all = b == r->nb;
                const int b0 = all ? 0 : (int)b, nb = all ? (int)r->nb : 1;
                float s = 0;
                kt->vec_dot[r->t](256 * nb, &s, w + 2 + (size_t)b0 * r->ts, act + (size_t)b0 * 292);
                const double scale = abs_dot(r, w + 2, act, b0, nb) + 1e-30, err = fabs((double)s - dots[b]) / scale;
                worst = err > worst ? err : worst;
            }
            /* integer sums equal; the float products in another order */
            T_CHECK(worst < 1e-6, "%s %s: vec_dot within %.2g of ggml's (relative to sum |w a|)",
                    lmq_isa_name(isas[ii]), nm, worst);
            float *f2 = malloc(sizeof(float) * (size_t)ne + 4);
            kt->to_float[r->t](w + 2, f2 + 1, ne);
            T_CHECK(!memcmp(f2 + 1, want, sizeof(float) * (size_t)ne), "%s %s to_float as ggml's", lmq_isa_name(isas[ii]),
                    nm);
            free(f2);
        }
        printf("%-8s %2u blocks: dequantized as ggml, dots within float rounding on %d ISAs\n", nm, r->nb, n_isas);
        free(y);
        free(want);
        free(w);
        free(act);
    }
    free(bytes);
}

static uint32_t rng = 12345;
static float gauss(void)
{
    float s = 0;
    for (int i = 0; i < 12; i++) {
        rng = rng * 1664525u + 1013904223u;
        s += (float)(rng >> 8) / 16777216.0f;
    }
    return s - 6.0f;
}

/* ggml's reference ternary rounding: d = amax, t = round(x / d) */
static double rtn_ternary_err(const float *x, int64_t n)
{
    double e = 0;
    for (int64_t b = 0; b < n / 256; b++) {
        float amax = 0;
        for (int i = 0; i < 256; i++) amax = fmaxf(amax, fabsf(x[256 * b + i]));
        for (int i = 0; i < 256; i++) {
            const float v = x[256 * b + i], q = amax > 0 ? roundf(v / amax) * amax : 0;
            e += (double)(v - q) * (v - q);
        }
    }
    return e;
}

static void test_ternary(void)
{
    enum { N = 4096 };
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
    uint8_t *q = malloc((size_t)lmq_row_size(LMQ_TYPE_TQ1_0, N) + (size_t)lmq_row_size(LMQ_TYPE_TQ2_0, N));
    for (int i = 0; i < N; i++) x[i] = gauss();
    const lmq_type tt[2] = {LMQ_TYPE_TQ1_0, LMQ_TYPE_TQ2_0};
    double e[2];
    for (int k = 0; k < 2; k++) {
        T_CHECK(lmq_type_can_quantize(tt[k]), "%s can be written", lmq_type_name(tt[k]));
        T_CHECK(lmq_quantize_row(tt[k], x, q, N, NULL) == LMQ_OK, "quantize %s: %s", lmq_type_name(tt[k]),
                lmq_last_error());
        T_CHECK(lmq_dequantize_row(tt[k], q, y, N) == LMQ_OK, "dequantize %s", lmq_type_name(tt[k]));
        e[k] = 0;
        int off = 0;
        for (int i = 0; i < N; i++) {
            e[k] += (double)(x[i] - y[i]) * (x[i] - y[i]);
            /* every value is 0 or +-d of its block */
            float d = 0;
            for (int j = 256 * (i / 256); j < 256 * (i / 256 + 1); j++) d = fmaxf(d, fabsf(y[j]));
            off += !(y[i] == 0 || fabsf(y[i]) == d);
        }
        T_CHECK(off == 0, "%s: %d values are not 0 or +-d", lmq_type_name(tt[k]), off);
    }
    const double rtn = rtn_ternary_err(x, N);
    printf("ternary on N(0,1): squared error tq1_0 %.1f, tq2_0 %.1f, ggml's round-to-nearest %.1f\n", e[0], e[1], rtn);
    T_CHECK(e[0] == e[1], "tq1_0 and tq2_0 hold the same trits (%g vs %g)", e[0], e[1]);
    /* measured: about 0.58x; the best threshold is never worse than amax */
    T_CHECK(e[0] < 0.8 * rtn, "the threshold search beats round-to-nearest (%.1f vs %.1f)", e[0], rtn);
    /* an imatrix moves the error onto the unweighted columns */
    float *w = malloc(sizeof(float) * N);
    for (int i = 0; i < N; i++) w[i] = i % 5 == 0 ? 100.0f : 1.0f;
    double ew[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        lmq_quantize_row(LMQ_TYPE_TQ2_0, x, q, N, k ? w : NULL);
        lmq_dequantize_row(LMQ_TYPE_TQ2_0, q, y, N);
        for (int i = 0; i < N; i++) ew[k] += (double)w[i] * (x[i] - y[i]) * (x[i] - y[i]);
    }
    T_CHECK(ew[1] < ew[0], "tq2_0 with an imatrix: weighted error %.1f below %.1f", ew[1], ew[0]);
    /* zeros stay zeros */
    memset(x, 0, sizeof(float) * 256);
    T_CHECK(lmq_quantize_row(LMQ_TYPE_TQ1_0, x, q, 256, NULL) == LMQ_OK && lmq_dequantize_row(LMQ_TYPE_TQ1_0, q, y, 256) == LMQ_OK,
            "zero block");
    int nz = 0;
    for (int i = 0; i < 256; i++) nz += y[i] != 0;
    T_CHECK(nz == 0, "zeros decode to zeros (%d not)", nz);
    free(w);
    free(x);
    free(y);
    free(q);
}

static void test_read_only(void)
{
    const lmq_type ro[7] = {LMQ_TYPE_IQ2_XXS, LMQ_TYPE_IQ2_XS, LMQ_TYPE_IQ2_S, LMQ_TYPE_IQ3_XXS,
                            LMQ_TYPE_IQ3_S,   LMQ_TYPE_IQ1_S,  LMQ_TYPE_IQ1_M};
    float x[256] = {0.5f};
    uint8_t q[128];
    for (int k = 0; k < 7; k++) {
        T_CHECK(!lmq_type_can_quantize(ro[k]) && lmq_dequantize_fn(ro[k]), "%s: read only", lmq_type_name(ro[k]));
        lmq_status s = lmq_quantize_row(ro[k], x, q, 256, NULL);
        const char *e = lmq_last_error();
        T_CHECK(s == LMQ_ERR_UNSUPPORTED && strstr(e, lmq_type_name(ro[k])) && strstr(e, "cannot write") && !strchr(e, '\n'),
                "%s: refused with one line: %s", lmq_type_name(ro[k]), e);
        s = lmq_quantize_rows(ro[k], x, q, 1, 256, NULL, 1);
        T_CHECK(s == LMQ_ERR_UNSUPPORTED, "%s: rows refused too", lmq_type_name(ro[k]));
    }
}

int main(void)
{
    test_grids();
    test_against_ggml();
    test_ternary();
    test_read_only();
    return t_finish();
}
