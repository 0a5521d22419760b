/* Unit tests of the kernels: every weight type x every ISA compiled and
 * supported here against the scalar reference, the reference against
 * dequantize-then-dot, activation quantizers byte for byte against the
 * quantize module, matmul against a naive product, thread-count
 * independence, attention helpers, the thread pool and error paths.
 * Self-contained (no files): also built for aarch64 by scripts/test-arm.sh. */
#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "lmq_format.h"
#include "testutil.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* uniform in [-1, 1) */
static float frand(void)
{
    return (float)(rnd() & 0xFFFFFF) / 8388608.0f - 1.0f;
}

/* roughly normal, with a few outliers as real weights have */
static float grand(void)
{
    float s = 0;
    for (int i = 0; i < 4; i++) s += frand();
    if ((rnd() & 255) == 0) s *= 8;
    return s;
}

static int n_isas;
static lmq_isa start_isa; /* active at start (LMQ_ISA=avx2 for test_kernels_avx2): restored after forcing others */
static lmq_isa isas[LMQ_ISA_COUNT];

static int64_t bsize(lmq_type t)
{
    return lmq_type_get(t)->block_size;
}

/* Offset that misaligns a row for SIMD (not 16/32/64-byte aligned) while
 * keeping the alignment C requires of the block struct: 4 for types with
 * float fields (f32, q8_K), 2 otherwise. */
static size_t misalign(lmq_type t)
{
    return t == LMQ_TYPE_F32 || t == LMQ_TYPE_Q8_K ? 4 : 2;
}

/* Tested lengths: 1, 2, 3, 7 and 33 blocks (float types: 32-element units
 * plus an odd tail, so the SIMD remainders run). */
static int64_t test_len(lmq_type t, int k)
{
    static const int blocks[5] = {1, 2, 3, 7, 33};
    return bsize(t) == 1 ? (int64_t)blocks[k] * 32 + (k * 3) % 8 : (int64_t)blocks[k] * bsize(t);
}

static bool all_finite(const float *v, int64_t n, float lim)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i]) || fabsf(v[i]) > lim) return false;
    return true;
}

/* Random bytes, one block at a time, re-drawn until the block decodes to
 * finite values of moderate size: exercises every bit pattern of the quants
 * and scales (q8_0's -128, 6-bit scales at 63, fp8 subnormals, ...). */
static void random_blocks(lmq_type t, uint8_t *dst, int64_t n)
{
    const int64_t bs = bsize(t), ts = lmq_type_get(t)->type_size;
    float tmp[256];
    for (int64_t b = 0; b < n / bs; b++) {
        uint8_t *p = dst + b * ts;
        for (int tries = 0; tries < 1000; tries++) {
            for (int64_t i = 0; i < ts; i++) p[i] = (uint8_t)rnd();
            if (lmq_dequantize_row(t, p, tmp, bs) == LMQ_OK && all_finite(tmp, bs, 1e4f)) break;
        }
    }
}

/* A quantized row of x; for the types lmq reads but does not write (the
 * codebook types: tests/test_quant_iq.c holds ggml's own blocks of them),
 * random blocks. */
static void quantized_row(lmq_type t, const float *x, uint8_t *dst, int64_t n)
{
    if (!lmq_type_can_quantize(t)) {
        random_blocks(t, dst, n);
        return;
    }
    lmq_status s = lmq_quantize_row(t, x, dst, n, NULL);
    T_CHECK(s == LMQ_OK, "quantize %s n=%lld: %s", lmq_type_name(t), (long long)n, lmq_last_error());
}

/* Dequantized activation row (f32 activations: the floats themselves). */
static void act_floats(lmq_type wt, const void *act, float *out, int64_t n)
{
    lmq_type at = lmq_act_type(wt);
    if (at == LMQ_TYPE_F32)
        memcpy(out, act, (size_t)n * 4);
    else
        T_CHECK(lmq_dequantize_row(at, act, out, n) == LMQ_OK, "dequantize %s", lmq_type_name(at));
}

/* sum |w_i a_i| in double: the scale of the rounding error of any order of
 * summation. */
static double abs_dot(const float *w, const float *a, int64_t n, double *exact)
{
    double s = 0, e = 0;
    for (int64_t i = 0; i < n; i++) {
        s += fabs((double)w[i] * a[i]);
        e += (double)w[i] * a[i];
    }
    if (exact) *exact = e;
    return s;
}

/* ================================================================
 * ISA selection
 * ================================================================ */

static void test_isa_api(void)
{
    n_isas = lmq_isa_list(isas, LMQ_ISA_COUNT);
    start_isa = lmq_isa_active();
    T_CHECK(n_isas >= 1 && isas[0] == LMQ_ISA_SCALAR, "scalar first, %d ISAs", n_isas);
    fprintf(stderr, "cpu: %s; ISAs:", lmq_cpu_features());
    for (int i = 0; i < n_isas; i++) fprintf(stderr, " %s", lmq_isa_name(isas[i]));
    fprintf(stderr, " (active %s)\n", lmq_isa_name(lmq_isa_active()));
    lmq_isa best = isas[n_isas - 1], chosen = lmq_isa_active();
    if (!getenv("LMQ_ISA")) T_CHECK(lmq_isa_active() == best, "best ISA active by default");
    /* scripts/test-arm.sh: the ISA that detection (or LMQ_ISA) must pick on the emulated CPU */
    const char *expect = getenv("LMQ_TEST_EXPECT_ISA");
    if (expect && *expect)
        T_CHECK(strcmp(lmq_isa_name(chosen), expect) == 0, "active ISA %s, expected %s", lmq_isa_name(chosen), expect);
    for (int i = 0; i < LMQ_ISA_COUNT; i++) {
        lmq_isa back;
        T_CHECK(lmq_isa_from_name(lmq_isa_name((lmq_isa)i), &back) == LMQ_OK && back == (lmq_isa)i, "name %d", i);
        bool listed = false;
        for (int k = 0; k < n_isas; k++) listed |= isas[k] == (lmq_isa)i;
        T_CHECK(lmq_isa_supported((lmq_isa)i) == listed, "supported(%s)", lmq_isa_name((lmq_isa)i));
        lmq_status s = lmq_isa_force((lmq_isa)i);
        T_CHECK(listed ? s == LMQ_OK && lmq_isa_active() == (lmq_isa)i : s == LMQ_ERR_UNSUPPORTED, "force %s",
                lmq_isa_name((lmq_isa)i));
        T_CHECK(listed == (lmq_kernels_for((lmq_isa)i) != NULL), "table of %s", lmq_isa_name((lmq_isa)i));
    }
    /* the default: avx512 wherever it runs, else avxvnni, else avx2 */
    if (!getenv("LMQ_ISA") && lmq_isa_supported(LMQ_ISA_AVX512))
        T_CHECK(chosen == LMQ_ISA_AVX512, "avx512 is the default where supported (active %s)", lmq_isa_name(chosen));
    else if (!getenv("LMQ_ISA") && lmq_isa_supported(LMQ_ISA_AVXVNNI))
        T_CHECK(chosen == LMQ_ISA_AVXVNNI, "avxvnni is the default without avx512 (active %s)", lmq_isa_name(chosen));
    /* the avxvnni table is the AVX2 one with its own repacked kernels: the
     * loops over every ISA below then test them, not AVX2's twice */
    if (lmq_isa_supported(LMQ_ISA_AVXVNNI)) {
        const lmq_kernel_table *kv = lmq_kernels_for(LMQ_ISA_AVXVNNI), *k2 = lmq_kernels_for(LMQ_ISA_AVX2);
        T_CHECK(k2 != NULL, "avxvnni implies avx2");
        const lmq_type own[10] = {LMQ_TYPE_Q4_0,  LMQ_TYPE_Q8_0, LMQ_TYPE_IQ4_NL, LMQ_TYPE_Q4_K, LMQ_TYPE_IQ4_XS,
                                  LMQ_TYPE_MXFP4, LMQ_TYPE_Q6_K, LMQ_TYPE_Q5_K,  LMQ_TYPE_Q2_K, LMQ_TYPE_Q3_K};
        for (int i = 0; k2 && i < 10; i++)
            T_CHECK(kv->rpanel_gemm[own[i]] && kv->rpanel_gemm[own[i]] != k2->rpanel_gemm[own[i]],
                    "avxvnni has its own repacked %s kernel", lmq_type_name(own[i]));
    }
    /* aarch64: both levels repack every type that x86 repacks (arm/panel_neon.c, arm/rpanel_neon.c) */
    for (int i = 0; i < n_isas; i++) {
        if (isas[i] != LMQ_ISA_NEON && isas[i] != LMQ_ISA_I8MM) continue;
        const lmq_type rp[11] = {LMQ_TYPE_Q4_0,  LMQ_TYPE_Q8_0, LMQ_TYPE_IQ4_NL, LMQ_TYPE_Q4_K,
                                 LMQ_TYPE_IQ4_XS, LMQ_TYPE_MXFP4, LMQ_TYPE_Q6_K,  LMQ_TYPE_Q5_K,
                                 LMQ_TYPE_Q2_K,  LMQ_TYPE_Q3_K, LMQ_TYPE_Q5_0};
        for (int j = 0; j < 11; j++)
            T_CHECK(lmq_kernels_for(isas[i])->rpanel_gemm[rp[j]], "%s repacks %s", lmq_isa_name(isas[i]),
                    lmq_type_name(rp[j]));
    }
    lmq_isa x;
    T_CHECK(lmq_isa_from_name("sse9", &x) == LMQ_ERR_INVALID_ARG, "unknown ISA name");
    T_CHECK(lmq_isa_force(LMQ_ISA_COUNT) == LMQ_ERR_UNSUPPORTED, "invalid id");
    T_CHECK(strcmp(lmq_isa_name(LMQ_ISA_COUNT), "?") == 0, "invalid name");
    lmq_isa_force(start_isa); /* the rest runs on the selected ISA (LMQ_ISA forces one) */
    /* every table is complete */
    for (int i = 0; i < n_isas; i++) {
        const lmq_kernel_table *k = lmq_kernels_for(isas[i]);
        T_CHECK(k->isa == isas[i], "table isa");
        for (int t = 0; t < LMQ_TYPE_COUNT; t++) {
            if (!lmq_matmul_supported((lmq_type)t)) continue;
            T_CHECK(k->vec_dot[t] && k->to_float[t], "%s %s kernels", lmq_isa_name(isas[i]), lmq_type_name((lmq_type)t));
        }
        T_CHECK(k->from_float[LMQ_TYPE_Q8_0] && k->from_float[LMQ_TYPE_Q8_1] && k->from_float[LMQ_TYPE_Q8_K] &&
                    k->dot_f32 && k->dot_f16_f32 && k->axpy_f32 && k->axpy_f16 && k->softmax,
                "%s helpers", lmq_isa_name(isas[i]));
    }
}

/* ================================================================
 * Activation quantizers: byte-identical to the quantize module
 * ================================================================ */

static void check_act_bytes(lmq_type at, const float *x, int64_t n, const char *what)
{
    const int64_t bytes = lmq_row_size(at, n);
    const size_t off = misalign(at);
    uint8_t *want = malloc((size_t)bytes), *got = malloc((size_t)bytes + off + 1);
    lmq_kernels_for(LMQ_ISA_SCALAR)->from_float[at](x, want, n);
    for (int i = 0; i < n_isas; i++) {
        memset(got, 0xA5, (size_t)bytes + off + 1);
        lmq_kernels_for(isas[i])->from_float[at](x, got + off, n); /* SIMD-unaligned output */
        T_CHECK(memcmp(want, got + off, (size_t)bytes) == 0 && got[0] == 0xA5 && got[bytes + off] == 0xA5,
                "%s %s: %s bytes differ", lmq_isa_name(isas[i]), lmq_type_name(at), what);
    }
    /* and the scalar table uses the quantize module's reference; q8_0 activations
     * are ggml's x86 form instead, restated here: x * (127 / amax) rounded half to even */
    uint8_t *mod = malloc((size_t)bytes);
    if (at == LMQ_TYPE_Q8_0) {
        lmq_block_q8_0 *b = (lmq_block_q8_0 *)mod;
        for (int64_t i = 0; i < n / 32; i++) {
            float amax = 0;
            for (int j = 0; j < 32; j++) amax = fabsf(x[i * 32 + j]) > amax ? fabsf(x[i * 32 + j]) : amax;
            b[i].d = lmq_fp32_to_fp16(amax / 127.0f);
            for (int j = 0; j < 32; j++) {
                float v = amax ? x[i * 32 + j] * (127.0f / amax) : 0.0f, r = floorf(v + 0.5f);
                if (r - v == 0.5f && fmodf(r, 2.0f) != 0.0f) r -= 1.0f; /* a tie goes to the even neighbour */
                b[i].qs[j] = (int8_t)(r > 127 ? 127 : r < -127 ? -127 : r);
            }
        }
    }
    if (at == LMQ_TYPE_Q8_1) lmq_quantize_row_q8_1_ref(x, (lmq_block_q8_1 *)mod, n);
    if (at == LMQ_TYPE_Q8_K) lmq_quantize_row_q8_K_ref(x, (lmq_block_q8_K *)mod, n);
    T_CHECK(memcmp(want, mod, (size_t)bytes) == 0, "%s ref == the form it is specified as", lmq_type_name(at));
    free(mod);
    free(want);
    free(got);
}

static void test_act_quantizers(void)
{
    const lmq_type acts[3] = {LMQ_TYPE_Q8_0, LMQ_TYPE_Q8_1, LMQ_TYPE_Q8_K};
    const int64_t n = 1024;
    float *x = malloc((size_t)n * 4);
    for (int a = 0; a < 3; a++) {
        for (int64_t i = 0; i < n; i++) x[i] = grand();
        check_act_bytes(acts[a], x, n, "random");
        /* ties: amax 127 gives d = 1 (q8_0/q8_1) and a max of -127 gives
         * iscale = 1 (q8_K), so x.5 values hit the rounding rule exactly */
        for (int64_t i = 0; i < n; i++) x[i] = (float)((int)(rnd() % 250) - 125) + 0.5f;
        for (int64_t b = 0; b < n; b += 32) x[b] = acts[a] == LMQ_TYPE_Q8_K ? -127.0f : 127.0f;
        check_act_bytes(acts[a], x, n, "ties");
        /* zero blocks, equal magnitudes of both signs, tiny values */
        for (int64_t i = 0; i < n; i++) x[i] = i < 256 ? 0.0f : (i < 512 ? ((i & 1) ? 3.0f : -3.0f) : frand() * 1e-30f);
        check_act_bytes(acts[a], x, n, "special");
    }
    free(x);
}

/* ================================================================
 * Dot products
 * ================================================================ */

/* The per-type tolerance of SIMD vs ref (relative to sum |w a|): only the
 * order of float sums differs. Against the dequantized dot, q8_1's f16 sum
 * term (s = f16(d * sum q)) adds up to 2^-11 of the min term. */
static double tol_simd(lmq_type t)
{
    (void)t;
    return 2e-6;
}

static double tol_deq(lmq_type t)
{
    return lmq_act_type(t) == LMQ_TYPE_Q8_1 ? 2e-3 : 2e-6;
}

/* The tile kernels (nr rows x nt tokens): every result bit for bit the
 * ISA's 1 x 1 kernel, for every shape up to 4 x 4, with row and token
 * strides that are not multiples of the SIMD width and unaligned rows. */
static void check_tiles(lmq_type t, const uint8_t *w, const uint8_t *act, int64_t n, int64_t abytes)
{
    const lmq_type at = lmq_act_type(t);
    const int64_t wbytes = lmq_row_size(t, n);
    const int64_t wst = (wbytes + 7) & ~(int64_t)3, ast = (abytes + 15) & ~(int64_t)3;
    uint8_t *ws = malloc((size_t)(4 * wst + 4)), *as = malloc((size_t)(4 * ast + 4));
    uint8_t *w0 = ws + misalign(t), *a0 = as + misalign(at);
    for (int r = 0; r < 4; r++) {
        memcpy(w0 + r * wst, w, (size_t)wbytes);
        memcpy(a0 + r * ast, act, (size_t)abytes);
        /* perturb rows 1..3 (quant bytes, away from the first scale) so that a
         * mix-up of rows or tokens shows */
        if (r > 0) {
            w0[r * wst + wbytes / 2 + r] ^= 0x21;
            a0[r * ast + (at == LMQ_TYPE_Q8_K ? 4 : 2) + r] ^= 0x21;
        }
    }
    for (int i = 0; i < n_isas; i++) {
        const lmq_kernel_table *k = lmq_kernels_for(isas[i]);
        if (!k->vec_dot_tile[t]) continue;
        float want[4][4];
        for (int r = 0; r < 4; r++)
            for (int tk = 0; tk < 4; tk++) k->vec_dot[t](n, &want[r][tk], w0 + r * wst, a0 + tk * ast);
        bool ok = true;
        for (int nr = 1; nr <= 4; nr++) {
            for (int nt = 1; nt <= 4; nt++) {
                float got[4 * 5];
                for (int e = 0; e < 20; e++) got[e] = NAN;
                k->vec_dot_tile[t](n, nr, nt, got, 5, w0, wst, a0, ast);
                for (int r = 0; r < 4; r++)
                    for (int tk = 0; tk < 4; tk++) {
                        const float *g = &got[tk * 5 + r];
                        if (r < nr && tk < nt)
                            ok &= memcmp(g, &want[r][tk], 4) == 0;
                        else
                            ok &= isnan(*g); /* untouched */
                    }
            }
        }
        T_CHECK(ok, "%s %s vec_dot_tile n=%lld: every shape equals vec_dot bit for bit", lmq_type_name(t),
                lmq_isa_name(isas[i]), (long long)n);
    }
    free(ws);
    free(as);
}

static void check_dots(lmq_type t, const uint8_t *w, const float *x, int64_t n, const char *what)
{
    const lmq_type at = lmq_act_type(t);
    const int64_t abytes = at == LMQ_TYPE_F32 ? n * 4 : lmq_row_size(at, n);
    uint8_t *abuf = malloc((size_t)abytes + 4), *act = abuf + misalign(at); /* not SIMD-aligned */
    float *wf = malloc((size_t)n * 4), *af = malloc((size_t)n * 4);
    if (at == LMQ_TYPE_F32)
        memcpy(act, x, (size_t)n * 4);
    else
        lmq_kernels_for(LMQ_ISA_SCALAR)->from_float[at](x, act, n);
    T_CHECK(lmq_dequantize_row(t, w, wf, n) == LMQ_OK, "dequantize %s", lmq_type_name(t));
    act_floats(t, act, af, n);
    double exact;
    const double scale = abs_dot(wf, af, n, &exact) + 1e-30;
    float ref;
    lmq_kernels_for(LMQ_ISA_SCALAR)->vec_dot[t](n, &ref, w, act);
    T_CHECK(fabs(ref - exact) <= tol_deq(t) * scale, "%s %s n=%lld: ref %.9g vs dequantized %.9g (scale %g)",
            lmq_type_name(t), what, (long long)n, ref, exact, scale);
    /* the 4-token kernels: bit for bit the 1-token results, any strides */
    for (int i = 0; i < n_isas; i++) {
        const lmq_kernel_table *k = lmq_kernels_for(isas[i]);
        if (!k->vec_dot4[t]) continue;
        const int64_t stride = (abytes + 15) & ~(int64_t)3;
        uint8_t *acts = malloc((size_t)(4 * stride + 4));
        float got[4 * 3], want;
        for (int r = 0; r < 4; r++) memcpy(acts + misalign(at) + r * stride, act, (size_t)abytes);
        /* perturb rows 1..3 so that a mix-up of rows shows */
        for (int r = 1; r < 4; r++) {
            if (at == LMQ_TYPE_F32)
                ((float *)(acts + misalign(at) + r * stride))[r] += 1.0f;
            else
                acts[misalign(at) + r * stride + (at == LMQ_TYPE_Q8_K ? 4 : 2) + r] ^= 0x21;
        }
        k->vec_dot4[t](n, got, 3, w, acts + misalign(at), stride);
        for (int r = 0; r < 4; r++) {
            k->vec_dot[t](n, &want, w, acts + misalign(at) + r * stride);
            T_CHECK(memcmp(&want, &got[3 * r], 4) == 0, "%s %s vec_dot4 row %d: %.9g vs %.9g", lmq_type_name(t),
                    lmq_isa_name(isas[i]), r, got[3 * r], want);
        }
        free(acts);
    }
    check_tiles(t, w, act, n, abytes);
    for (int i = 1; i < n_isas; i++) {
        float v = NAN;
        lmq_kernels_for(isas[i])->vec_dot[t](n, &v, w, act);
        T_CHECK(fabs(v - ref) <= tol_simd(t) * scale, "%s %s %s n=%lld: %.9g vs ref %.9g (scale %g)",
                lmq_type_name(t), lmq_isa_name(isas[i]), what, (long long)n, v, ref, scale);
    }
    free(abuf);
    free(wf);
    free(af);
}

static void test_vec_dot(void)
{
    for (int t = 0; t < LMQ_TYPE_COUNT; t++) {
        if (!lmq_matmul_supported((lmq_type)t)) continue;
        for (int k = 0; k < 5; k++) {
            const int64_t n = test_len((lmq_type)t, k);
            const int64_t wbytes = lmq_row_size((lmq_type)t, n);
            uint8_t *wbuf = malloc((size_t)wbytes + 4), *w = wbuf + misalign((lmq_type)t); /* not SIMD-aligned */
            float *x = malloc((size_t)n * 4), *src = malloc((size_t)n * 4);
            for (int64_t i = 0; i < n; i++) x[i] = grand();
            for (int64_t i = 0; i < n; i++) src[i] = grand() * 0.05f;
            quantized_row((lmq_type)t, src, w, n);
            check_dots((lmq_type)t, w, x, n, "quantized");
            random_blocks((lmq_type)t, w, n);
            check_dots((lmq_type)t, w, x, n, "random bytes");
            free(wbuf);
            free(x);
            free(src);
        }
    }
}

/* lmq_vec_dot / lmq_act_quantize: the checked public entry points. */
static void test_public_dot(void)
{
    float x[256], out = 0;
    uint8_t w[sizeof(lmq_block_q4_K)], a[sizeof(lmq_block_q8_K)];
    for (int i = 0; i < 256; i++) x[i] = frand();
    T_CHECK(lmq_quantize_row(LMQ_TYPE_Q4_K, x, w, 256, NULL) == LMQ_OK, "quantize");
    T_CHECK(lmq_act_row_size(LMQ_TYPE_Q4_K, 256) == (int64_t)sizeof(lmq_block_q8_K), "act row size");
    T_CHECK(lmq_act_row_size(LMQ_TYPE_Q4_K, 100) == -1, "act row size of a partial block");
    T_CHECK(lmq_act_row_size(LMQ_TYPE_Q8_K, 256) == -1, "q8_K is not a weight type");
    T_CHECK(lmq_act_quantize(LMQ_TYPE_Q4_K, x, a, 256) == LMQ_OK, "act quantize");
    T_CHECK(lmq_vec_dot(LMQ_TYPE_Q4_K, 256, w, a, &out) == LMQ_OK, "vec_dot");
    float ref;
    lmq_kernels_for(LMQ_ISA_SCALAR)->vec_dot[LMQ_TYPE_Q4_K](256, &ref, w, a);
    T_NEAR(out, ref, 1e-4 * (fabs(ref) + 1), "public vec_dot");
    T_CHECK(lmq_vec_dot(LMQ_TYPE_Q4_K, 100, w, a, &out) == LMQ_ERR_INVALID_ARG, "partial block");
    T_CHECK(lmq_vec_dot(LMQ_TYPE_Q8_K, 256, w, a, &out) == LMQ_ERR_UNSUPPORTED, "q8_K weights");
    T_CHECK(lmq_vec_dot(LMQ_TYPE_COUNT, 256, w, a, &out) == LMQ_ERR_UNSUPPORTED, "invalid type");
    T_CHECK(lmq_act_type(LMQ_TYPE_Q8_1) == LMQ_TYPE_COUNT && lmq_act_type(LMQ_TYPE_Q6_K) == LMQ_TYPE_Q8_K &&
                lmq_act_type(LMQ_TYPE_Q5_1) == LMQ_TYPE_Q8_1 && lmq_act_type(LMQ_TYPE_IQ4_NL) == LMQ_TYPE_Q8_0 &&
                lmq_act_type(LMQ_TYPE_F8_E5M2) == LMQ_TYPE_F32 && lmq_act_type(LMQ_TYPE_MXFP4) == LMQ_TYPE_Q8_0 &&
                lmq_matmul_supported(LMQ_TYPE_MXFP4) && lmq_act_type(LMQ_TYPE_F16) == LMQ_TYPE_F16 &&
                lmq_act_type(LMQ_TYPE_BF16) == LMQ_TYPE_BF16,
            "activation types");
    /* f16 activations saturate at +-65504 (an infinity would make the dot NaN); bf16 ones keep the range */
    const float big[8] = {1e6f, -1e6f, 65504.0f, 70000.0f, 1.0f, -2.5f, 3e38f, 0.0f};
    uint16_t h[8], wh[8], bh[8];
    T_CHECK(lmq_act_quantize(LMQ_TYPE_F16, big, h, 8) == LMQ_OK, "f16 act quantize");
    T_CHECK(h[0] == 0x7BFF && h[1] == 0xFBFF && h[2] == 0x7BFF && h[3] == 0x7BFF && h[4] == 0x3C00 && h[5] == 0xC100 &&
                h[6] == 0x7BFF && h[7] == 0,
            "f16 activations saturate: %04x %04x %04x %04x %04x %04x %04x %04x", h[0], h[1], h[2], h[3], h[4], h[5],
            h[6], h[7]);
    for (int i = 0; i < 8; i++) wh[i] = 0x3C00; /* 1.0 */
    for (int i = 0; i < n_isas; i++) {
        float d = NAN;
        lmq_kernels_for(isas[i])->vec_dot[LMQ_TYPE_F16](8, &d, wh, h);
        T_CHECK(isfinite(d) && fabsf(d - (65504.0f * 3 - 1.5f)) <= 1.0f, "%s f16 dot of saturated activations: %g",
                lmq_isa_name(isas[i]), d);
    }
    T_CHECK(lmq_act_quantize(LMQ_TYPE_BF16, big, bh, 8) == LMQ_OK && bh[0] == lmq_fp32_to_bf16(1e6f) &&
                bh[6] == lmq_fp32_to_bf16(3e38f),
            "bf16 activations: RNE, full range");
}

/* ================================================================
 * Attention helpers
 * ================================================================ */

static void test_attention_helpers(void)
{
    enum { N = 203 };
    float a[N + 1], b[N + 1], y0[N], y1[N], s0[N], s1[N];
    uint16_t h[N + 1];
    for (int i = 0; i <= N; i++) {
        a[i] = grand();
        b[i] = grand();
        h[i] = lmq_fp32_to_fp16(grand());
    }
    const lmq_kernel_table *ref = lmq_kernels_for(LMQ_ISA_SCALAR);
    for (int i = 1; i < n_isas; i++) {
        const lmq_kernel_table *k = lmq_kernels_for(isas[i]);
        for (int n = 0; n <= N; n += (n < 20 ? 1 : 37)) {
            double sc = 0, sch = 0;
            for (int j = 0; j < n; j++) {
                sc += fabs((double)a[j + 1] * b[j]);
                sch += fabs((double)lmq_fp16_to_fp32(h[j + 1]) * b[j]);
            }
            /* +1: misaligned first operand */
            T_NEAR(k->dot_f32(a + 1, b, n), ref->dot_f32(a + 1, b, n), 2e-6 * sc + 1e-30, "dot_f32");
            T_NEAR(k->dot_f16_f32(h + 1, b, n), ref->dot_f16_f32(h + 1, b, n), 2e-6 * sch + 1e-30, "dot_f16_f32");
            memcpy(y0, b, sizeof y0);
            memcpy(y1, b, sizeof y1);
            ref->axpy_f32(y0, 0.37f, a + 1, n);
            k->axpy_f32(y1, 0.37f, a + 1, n);
            bool ok = true;
            for (int j = 0; j < n; j++) ok &= fabsf(y0[j] - y1[j]) <= 1e-6f * (fabsf(b[j]) + fabsf(a[j + 1]));
            T_CHECK(ok, "%s axpy_f32 n=%d", lmq_isa_name(isas[i]), n);
            memcpy(y0, b, sizeof y0);
            memcpy(y1, b, sizeof y1);
            ref->axpy_f16(y0, -1.5f, h + 1, n);
            k->axpy_f16(y1, -1.5f, h + 1, n);
            ok = true;
            for (int j = 0; j < n; j++) ok &= fabsf(y0[j] - y1[j]) <= 1e-6f * (fabsf(b[j]) + 2 * fabsf(lmq_fp16_to_fp32(h[j + 1])));
            T_CHECK(ok, "%s axpy_f16 n=%d", lmq_isa_name(isas[i]), n);
            for (int j = 0; j < n; j++) s0[j] = s1[j] = a[j] * 9.0f - (j % 7 == 0 ? 80.0f : 0.0f);
            if (n > 3) s0[3] = s1[3] = -INFINITY; /* a masked score */
            const float sum0 = ref->softmax(s0, n), sum1 = k->softmax(s1, n);
            T_NEAR(sum1, sum0, 1e-5 * sum0, "softmax sum");
            ok = true;
            double total = 0;
            for (int j = 0; j < n; j++) {
                ok &= fabsf(s0[j] - s1[j]) <= 1e-6f * s0[j] + 1e-12f;
                total += s1[j];
            }
            T_CHECK(ok && (n == 0 || fabs(total - 1) < 1e-5), "%s softmax n=%d (sum %g)", lmq_isa_name(isas[i]), n, total);
            if (n > 3) T_CHECK(s1[3] == 0.0f, "masked score -> 0");
        }
    }
    /* the reference itself */
    float e[3] = {0.0f, logf(2.0f), logf(5.0f)};
    T_NEAR(lmq_softmax_ref(e, 3), 8.0f / 5.0f, 1e-6, "softmax ref sum");
    T_NEAR(e[2], 5.0 / 8.0, 1e-6, "softmax ref value");
    T_NEAR(lmq_dot_f16_f32_ref(h, a, 1), lmq_fp16_to_fp32(h[0]) * a[0], 1e-7, "dot_f16 ref");
    /* the public wrappers use the active table */
    T_NEAR(lmq_dot_f32(a, b, N), ref->dot_f32(a, b, N), 1e-4 * (1 + fabs(ref->dot_f32(a, b, N))), "lmq_dot_f32");
}

/* ================================================================
 * Thread pool
 * ================================================================ */

typedef struct count_job {
    atomic_int calls[8];
    atomic_int bad;
    int expect_nth;
} count_job;

static void count_fn(void *arg, int ith, int nth)
{
    count_job *j = arg;
    if (nth != j->expect_nth || ith < 0 || ith >= nth || ith >= 8)
        atomic_fetch_add(&j->bad, 1);
    else
        atomic_fetch_add(&j->calls[ith], 1);
}

static void test_pool(void)
{
    for (int nt = 1; nt <= 4; nt++) {
        lmq_pool *p = NULL;
        T_CHECK(lmq_pool_new(nt, &p) == LMQ_OK && p, "pool %d", nt);
        if (!p) continue;
        T_CHECK(lmq_pool_n_threads(p) == nt, "n_threads");
        count_job j;
        memset(&j, 0, sizeof j);
        j.expect_nth = nt;
        const int runs = 2000;
        for (int r = 0; r < runs; r++) lmq_pool_run(p, count_fn, &j);
        bool ok = atomic_load(&j.bad) == 0;
        for (int i = 0; i < nt; i++) ok &= atomic_load(&j.calls[i]) == runs;
        T_CHECK(ok, "pool %d: every thread ran every job once", nt);
        lmq_pool_free(p);
    }
    count_job j;
    memset(&j, 0, sizeof j);
    j.expect_nth = 1;
    lmq_pool_run(NULL, count_fn, &j);
    T_CHECK(atomic_load(&j.calls[0]) == 1 && lmq_pool_n_threads(NULL) == 1, "NULL pool runs on the caller");
    lmq_pool *p = NULL;
    T_CHECK(lmq_pool_new(0, &p) == LMQ_OK && lmq_pool_n_threads(p) == lmq_n_cpus(), "0 threads = all CPUs");
    lmq_pool_free(p);
    T_CHECK(lmq_pool_new(100000, &p) == LMQ_ERR_INVALID_ARG && !p, "too many threads");
    lmq_pool_free(NULL);
}

/* ================================================================
 * Matmul
 * ================================================================ */

/* Checks y (n_tok x n_out) against the double-precision product of the
 * dequantized weights with the activations the path uses (quantized for
 * vec_dot, as given for blas), and bit for bit against the ISA's vec_dot
 * kernel in vec_dot mode. */
static void check_matmul(lmq_type t, const uint8_t *w, int64_t n_out, int64_t n_in, const float *x, int64_t n_tok,
                         const float *y, lmq_gemm_mode mode, const char *what)
{
    const lmq_type at = lmq_act_type(t);
    const int64_t wrow = lmq_row_size(t, n_in);
    const int64_t abytes = at == LMQ_TYPE_F32 ? n_in * 4 : lmq_row_size(at, n_in);
    uint8_t *act = malloc((size_t)abytes);
    float *wf = malloc((size_t)n_in * 4), *af = malloc((size_t)n_in * 4);
    bool ok = true;
    double worst = 0;
    for (int64_t tk = 0; tk < n_tok && ok; tk++) {
        const float *xt = x + tk * n_in;
        if (at == LMQ_TYPE_F32)
            memcpy(act, xt, (size_t)n_in * 4);
        else
            lmq_kernels()->from_float[at](xt, act, n_in);
        act_floats(t, act, af, n_in);
        for (int64_t r = 0; r < n_out && ok; r++) {
            const uint8_t *wr = w + r * wrow;
            lmq_dequantize_row(t, wr, wf, n_in);
            const float got = y[tk * n_out + r];
            double exact_x, exact_a;
            const double scale_x = abs_dot(wf, xt, n_in, &exact_x) + 1e-30;
            const double scale_a = abs_dot(wf, af, n_in, &exact_a) + 1e-30;
            /* vec_dot path: the product with the quantized activations;
             * blas path: with the activations as given */
            const bool ok_vec = fabs(got - exact_a) <= tol_deq(t) * scale_a;
            const bool ok_blas = fabs(got - exact_x) <= 2e-5 * scale_x;
            if (mode == LMQ_GEMM_VECDOT) {
                float want;
                lmq_kernels()->vec_dot[t](n_in, &want, wr, act);
                ok &= got == want && ok_vec; /* the same kernel on the same bytes */
            } else if (mode == LMQ_GEMM_BLAS) {
                ok &= ok_blas;
            } else if (mode == LMQ_GEMM_PANEL) {
                ok &= ok_vec; /* quantized activations (vec_dot where the ISA has no panel kernel) */
            } else {
                ok &= ok_vec || ok_blas;
            }
            if (!ok) worst = got - exact_x;
        }
    }
    T_CHECK(ok, "matmul %s %s %lldx%lld x %lld tok (%s): off by %g", lmq_type_name(t), lmq_isa_name(lmq_isa_active()),
            (long long)n_out, (long long)n_in, (long long)n_tok, what, worst);
    free(act);
    free(wf);
    free(af);
}

/* lmq_matmul_multi: each part gives exactly lmq_matmul's bits (vec_dot
 * path), for parts of different heights and token counts, on 1 and 3
 * threads; error paths. */
static void test_matmul_multi(void)
{
    lmq_pool *p1 = NULL, *p3 = NULL;
    lmq_pool_new(1, &p1);
    lmq_pool_new(3, &p3);
    lmq_workspace *ws = NULL;
    T_CHECK(lmq_workspace_new(&ws) == LMQ_OK, "workspace");
    lmq_gemm_mode_set(LMQ_GEMM_VECDOT);
    const lmq_type types[] = {LMQ_TYPE_F32,  LMQ_TYPE_F16,  LMQ_TYPE_Q4_0, LMQ_TYPE_Q8_0,
                              LMQ_TYPE_Q4_K, LMQ_TYPE_Q6_K, LMQ_TYPE_MXFP4}; /* mxfp4: gpt-oss's experts */
    const int64_t outs[3] = {19, 1, 40}, toks[3] = {1, 21, 2}; /* 21: the panel path in auto mode */
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const lmq_type t = types[ti];
        const int64_t n_in = bsize(t) == 256 ? 512 : 224, wrow = lmq_row_size(t, n_in);
        uint8_t *w[3];
        float *x[3], *ya[3], *yb[3], *src = malloc((size_t)n_in * 4);
        lmq_matmul_part parts[3];
        for (int p = 0; p < 3; p++) {
            w[p] = malloc((size_t)(wrow * outs[p]));
            for (int64_t r = 0; r < outs[p]; r++) {
                for (int64_t i = 0; i < n_in; i++) src[i] = grand() * 0.05f;
                quantized_row(t, src, w[p] + r * wrow, n_in);
            }
            x[p] = malloc((size_t)(toks[p] * n_in * 4));
            for (int64_t i = 0; i < toks[p] * n_in; i++) x[p][i] = grand();
            ya[p] = malloc((size_t)(toks[p] * outs[p] * 4));
            yb[p] = malloc((size_t)(toks[p] * outs[p] * 4));
            parts[p] = (lmq_matmul_part){w[p], outs[p], x[p], toks[p], yb[p], NULL};
        }
        const lmq_gemm_mode modes[3] = {LMQ_GEMM_VECDOT, LMQ_GEMM_AUTO, LMQ_GEMM_PANEL};
        for (int mi = 0; mi < 3; mi++)
            for (int th = 0; th < 2; th++) {
                lmq_gemm_mode_set(modes[mi]);
                lmq_pool *pool = th ? p3 : p1;
                bool ok = true;
                for (int p = 0; p < 3; p++)
                    ok &= lmq_matmul(pool, t, w[p], outs[p], n_in, x[p], toks[p], ya[p], ws) == LMQ_OK;
                ok &= lmq_matmul_multi(pool, t, n_in, parts, 3, ws) == LMQ_OK;
                for (int p = 0; p < 3; p++) ok &= !memcmp(ya[p], yb[p], (size_t)(toks[p] * outs[p] * 4));
                T_CHECK(ok, "%s matmul_multi (mode %d, %d threads) equals lmq_matmul per part bit for bit",
                        lmq_type_name(t), (int)modes[mi], th ? 3 : 1);
            }
        lmq_gemm_mode_set(LMQ_GEMM_VECDOT);
        lmq_matmul_part bad = parts[0];
        bad.n_tok = 0;
        T_CHECK(lmq_matmul_multi(p3, t, n_in, &bad, 1, ws) == LMQ_ERR_INVALID_ARG, "%s: a part without tokens is refused",
                lmq_type_name(t));
        for (int p = 0; p < 3; p++) free(w[p]), free(x[p]), free(ya[p]), free(yb[p]);
        free(src);
    }
    T_CHECK(lmq_matmul_multi(p1, LMQ_TYPE_Q4_0, 224, NULL, 0, ws) == LMQ_OK, "no parts: nothing to do");
    lmq_gemm_mode_set(LMQ_GEMM_AUTO);
    lmq_workspace_free(ws);
    lmq_pool_free(p1);
    lmq_pool_free(p3);
}

/* lmq_matmul_multi with repacked parts (MoE experts repacked at load):
 * each repacked part gives lmq_matmul_repacked's bits, the others
 * lmq_matmul's, in one call, for 1 and 3 threads and 1, 21 and 2 tokens;
 * a repacked part whose rows are not a multiple of 16 is refused. */
static void test_matmul_multi_repacked(void)
{
    lmq_pool *p1 = NULL, *p3 = NULL;
    lmq_pool_new(1, &p1);
    lmq_pool_new(3, &p3);
    lmq_workspace *ws = NULL;
    T_CHECK(lmq_workspace_new(&ws) == LMQ_OK, "workspace");
    const lmq_type types[] = {LMQ_TYPE_Q4_0, LMQ_TYPE_Q8_0, LMQ_TYPE_IQ4_NL, LMQ_TYPE_Q4_K, LMQ_TYPE_MXFP4};
    const int64_t outs[4] = {32, 16, 48, 19}, toks[4] = {1, 21, 2, 3}; /* part 3: not repackable, plain rows */
    int n_checked = 0;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const lmq_type t = types[ti];
        if (lmq_repack_bytes(t, 16, bsize(t) == 256 ? 512 : 224) < 0) continue; /* no kernel with this ISA */
        const int64_t n_in = bsize(t) == 256 ? 512 : 224, wrow = lmq_row_size(t, n_in);
        uint8_t *w[4], *pk[4] = {NULL, NULL, NULL, NULL};
        float *x[4], *ya[4], *yb[4];
        lmq_matmul_part parts[4];
        for (int p = 0; p < 4; p++) {
            w[p] = malloc((size_t)(wrow * outs[p]));
            for (int64_t r = 0; r < outs[p]; r++) random_blocks(t, w[p] + r * wrow, n_in);
            if (p < 3) {
                pk[p] = aligned_alloc(64, (size_t)((lmq_repack_bytes(t, outs[p], n_in) + 63) & ~63));
                T_CHECK(lmq_repack(p3, t, w[p], outs[p], n_in, pk[p]) == LMQ_OK, "repack");
            }
            x[p] = malloc((size_t)(toks[p] * n_in * 4));
            for (int64_t i = 0; i < toks[p] * n_in; i++) x[p][i] = grand();
            ya[p] = malloc((size_t)(toks[p] * outs[p] * 4));
            yb[p] = malloc((size_t)(toks[p] * outs[p] * 4));
            /* a repacked part needs no plain rows */
            parts[p] = (lmq_matmul_part){p == 1 ? NULL : w[p], outs[p], x[p], toks[p], yb[p], pk[p]};
        }
        for (int th = 0; th < 2; th++) {
            lmq_pool *pool = th ? p3 : p1;
            bool ok = true;
            for (int p = 0; p < 4; p++)
                ok &= (pk[p] ? lmq_matmul_repacked(pool, t, pk[p], outs[p], n_in, x[p], toks[p], ya[p], ws)
                             : lmq_matmul(pool, t, w[p], outs[p], n_in, x[p], toks[p], ya[p], ws)) == LMQ_OK;
            for (int p = 0; p < 4; p++) memset(yb[p], 0xFF, (size_t)(toks[p] * outs[p] * 4));
            ok &= lmq_matmul_multi(pool, t, n_in, parts, 4, ws) == LMQ_OK;
            for (int p = 0; p < 4; p++) ok &= !memcmp(ya[p], yb[p], (size_t)(toks[p] * outs[p] * 4));
            T_CHECK(ok, "%s matmul_multi with repacked parts (%d threads) equals lmq_matmul_repacked / lmq_matmul",
                    lmq_type_name(t), th ? 3 : 1);
            n_checked++;
        }
        lmq_matmul_part bad = parts[3];
        bad.packed = w[3]; /* 19 rows cannot be repacked */
        T_CHECK(lmq_matmul_multi(p1, t, n_in, &bad, 1, ws) == LMQ_ERR_INVALID_ARG,
                "%s: a repacked part of 19 rows is refused", lmq_type_name(t));
        for (int p = 0; p < 4; p++) free(w[p]), free(pk[p]), free(x[p]), free(ya[p]), free(yb[p]);
    }
    printf("matmul_multi with repacked parts: %d checks\n", n_checked);
    lmq_workspace_free(ws);
    lmq_pool_free(p1);
    lmq_pool_free(p3);
}

static void test_matmul(void)
{
    lmq_pool *p1 = NULL, *p2 = NULL, *p3 = NULL;
    lmq_pool_new(1, &p1);
    lmq_pool_new(2, &p2);
    lmq_pool_new(3, &p3);
    lmq_workspace *ws = NULL;
    T_CHECK(lmq_workspace_new(&ws) == LMQ_OK, "workspace");
    const int64_t toks[4] = {1, 3, 17, 33};
    const int64_t n_out = 37;
    const lmq_gemm_mode modes[4] = {LMQ_GEMM_AUTO, LMQ_GEMM_VECDOT, LMQ_GEMM_BLAS, LMQ_GEMM_PANEL};
    const char *mode_names[4] = {"auto", "vecdot", "blas", "panel"};
    for (int t = 0; t < LMQ_TYPE_COUNT; t++) {
        if (!lmq_matmul_supported((lmq_type)t)) continue;
        const int64_t n_in = bsize((lmq_type)t) == 256 ? 512 : 224; /* 7 blocks of 32: a full group of 4 and a tail */
        const int64_t wrow = lmq_row_size((lmq_type)t, n_in);
        uint8_t *w = malloc((size_t)(wrow * n_out));
        float *src = malloc((size_t)n_in * 4), *x = malloc((size_t)(33 * n_in * 4));
        float *y1 = malloc((size_t)(33 * n_out * 4)), *y2 = malloc((size_t)(33 * n_out * 4)),
              *y3 = malloc((size_t)(33 * n_out * 4));
        for (int64_t r = 0; r < n_out; r++) {
            for (int64_t i = 0; i < n_in; i++) src[i] = grand() * 0.05f;
            quantized_row((lmq_type)t, src, w + r * wrow, n_in);
        }
        for (int64_t i = 0; i < 33 * n_in; i++) x[i] = grand();
        T_CHECK(lmq_workspace_reserve(ws, (lmq_type)t, n_in, 33) == LMQ_OK, "reserve");
        for (int ii = 0; ii < n_isas; ii++) {
            lmq_isa_force(isas[ii]);
            for (int m = 0; m < 4; m++) {
                if (modes[m] == LMQ_GEMM_BLAS && !lmq_have_blas()) continue;
                lmq_gemm_mode_set(modes[m]);
                for (int k = 0; k < 4; k++) {
                    const int64_t nt = toks[k];
                    lmq_status s1 = lmq_matmul(p1, (lmq_type)t, w, n_out, n_in, x, nt, y1, ws);
                    lmq_status s2 = lmq_matmul(p2, (lmq_type)t, w, n_out, n_in, x, nt, y2, ws);
                    lmq_status s3 = lmq_matmul(p3, (lmq_type)t, w, n_out, n_in, x, nt, y3, ws);
                    T_CHECK(!s1 && !s2 && !s3, "matmul status: %s", lmq_last_error());
                    T_CHECK(memcmp(y1, y2, (size_t)(nt * n_out * 4)) == 0 && memcmp(y1, y3, (size_t)(nt * n_out * 4)) == 0,
                            "%s %s %s %lld tok: 1, 2 and 3 threads agree bit for bit", lmq_type_name((lmq_type)t),
                            lmq_isa_name(isas[ii]), mode_names[m], (long long)nt);
                    check_matmul((lmq_type)t, w, n_out, n_in, x, nt, y2, modes[m], mode_names[m]);
                }
            }
        }
        lmq_gemm_mode_set(LMQ_GEMM_AUTO);
        lmq_isa_force(start_isa);
        free(w);
        free(src);
        free(x);
        free(y1);
        free(y2);
        free(y3);
    }
    /* errors */
    float x[64] = {0}, y[64];
    uint8_t w[sizeof(lmq_block_q4_0) * 2] = {0};
    T_CHECK(lmq_matmul(p2, LMQ_TYPE_Q8_K, w, 1, 256, x, 1, y, ws) == LMQ_ERR_UNSUPPORTED, "q8_K weights");
    T_CHECK(lmq_matmul(p2, LMQ_TYPE_Q4_0, w, 1, 48, x, 1, y, ws) == LMQ_ERR_INVALID_ARG, "partial block");
    T_CHECK(lmq_matmul(p2, LMQ_TYPE_Q4_0, w, 0, 64, x, 1, y, ws) == LMQ_ERR_INVALID_ARG, "no rows");
    T_CHECK(lmq_matmul(p2, LMQ_TYPE_Q4_0, w, 1, 64, x, 0, y, ws) == LMQ_ERR_INVALID_ARG, "no tokens");
    T_CHECK(lmq_matmul(p2, LMQ_TYPE_Q4_0, w, 1, 64, x, 1, y, NULL) == LMQ_ERR_INVALID_ARG, "no workspace");
    T_CHECK(lmq_matmul(NULL, LMQ_TYPE_Q4_0, w, 1, 64, x, 1, y, ws) == LMQ_OK, "NULL pool");
    T_CHECK(lmq_workspace_reserve(ws, LMQ_TYPE_Q4_K, 100, 4) == LMQ_ERR_INVALID_ARG, "reserve partial block");
    T_CHECK(lmq_workspace_reserve(ws, LMQ_TYPE_Q4_K, 256, 0) == LMQ_ERR_INVALID_ARG, "reserve 0 tokens");
    T_CHECK(lmq_matmul_wsize(LMQ_TYPE_Q4_K, 4096, 8, 1) >= 8 * 16 * (int64_t)sizeof(lmq_block_q8_K), "wsize");
    T_CHECK(lmq_matmul_wsize(LMQ_TYPE_Q4_K, 4095, 8, 1) == -1, "wsize of a bad row");
    T_CHECK(lmq_matmul_wsize(LMQ_TYPE_Q4_K, (int64_t)1 << 56, (int64_t)1 << 20, 1) == -1, "wsize overflow");
    lmq_workspace_free(ws);
    lmq_workspace_free(NULL);
    lmq_pool_free(p1);
    lmq_pool_free(p2);
    lmq_pool_free(p3);
}

/* Every ISA's row dequantizer (used for the BLAS path's weight tiles) gives
 * the reference floats bit for bit, at odd lengths and unaligned outputs. */
static void test_to_float(void)
{
    for (int t = 0; t < LMQ_TYPE_COUNT; t++) {
        if (!lmq_matmul_supported((lmq_type)t)) continue;
        for (int k = 0; k < 5; k++) {
            const int64_t n = test_len((lmq_type)t, k);
            float *x = malloc(sizeof(float) * (size_t)n), *want = malloc(sizeof(float) * (size_t)n),
                  *got = malloc(sizeof(float) * (size_t)(n + 1));
            uint8_t *w = malloc((size_t)lmq_row_size((lmq_type)t, n));
            for (int64_t i = 0; i < n; i++) x[i] = grand() * (k == 4 ? 1e3f : 1.0f);
            quantized_row((lmq_type)t, x, w, n);
            T_CHECK(lmq_dequantize_row((lmq_type)t, w, want, n) == LMQ_OK, "dequantize %s", lmq_type_name((lmq_type)t));
            for (int i = 0; i < n_isas; i++) {
                lmq_kernels_for(isas[i])->to_float[t](w, got + 1, n); /* unaligned output */
                T_CHECK(memcmp(want, got + 1, sizeof(float) * (size_t)n) == 0, "%s %s to_float, %lld values",
                        lmq_isa_name(isas[i]), lmq_type_name((lmq_type)t), (long long)n);
            }
            free(x);
            free(want);
            free(got);
            free(w);
        }
    }
}


/* ================================================================
 * Panels (row-interleaved batched path, runtime/kernels/panel.c)
 * ================================================================ */

/* For every type with a panel: pack 16-row panels of random blocks (every
 * quant and scale pattern) with nr = 16, 5, 1 live rows; the reference
 * kernel must agree with the scalar vec_dot of each (row, token) to float
 * rounding (the integer sums are the same, the float sums run in another
 * order), and every ISA's panel kernel and unpacker must equal the
 * reference bit for bit, for token counts around the kernels' tile of 8. */
static void test_panels(void)
{
    const lmq_kernel_table *ref = lmq_kernels_for(LMQ_ISA_SCALAR);
    int n_checked = 0;
    double worst_all = 0;
    for (int ti = 0; ti < LMQ_TYPE_COUNT; ti++) {
        const lmq_type t = (lmq_type)ti;
        if (!lmq_panel_traits_of(t)) continue;
        const int64_t n_in = bsize(t) == 256 ? 3 * 256 : 7 * 32, wrow = lmq_row_size(t, n_in);
        const lmq_type at = lmq_act_type(t);
        const int64_t arow = lmq_row_size(at, n_in), astride = arow + 8; /* 4-byte aligned, not 64 */
        const int max_tok = 19;
        uint8_t *w = malloc((size_t)(wrow * 16)), *act = malloc((size_t)(astride * max_tok));
        uint8_t *biased = malloc((size_t)(astride * max_tok));
        const int64_t pbytes = lmq_panel_bytes(t, n_in);
        void *panel = aligned_alloc(64, (size_t)((pbytes + 63) & ~63)), *panel2 = aligned_alloc(64, (size_t)((pbytes + 63) & ~63));
        float x[3 * 256], want[19 * 16], got[19 * 16];
        T_CHECK(pbytes > 0 && lmq_panel_bytes(t, n_in + 1) == -1, "%s panel bytes", lmq_type_name(t));
        for (int r = 0; r < 16; r++) random_blocks(t, w + r * wrow, n_in);
        for (int tk = 0; tk < max_tok; tk++) {
            for (int64_t i = 0; i < n_in; i++) x[i] = grand() * (tk % 3 == 0 ? 0.01f : 1.0f);
            ref->from_float[at](x, act + tk * astride, n_in);
        }
        memcpy(biased, act, (size_t)(astride * max_tok));
        for (int tk = 0; tk < max_tok; tk++) lmq_panel_bias_act(t, biased + tk * astride, n_in);
        const int nrs[3] = {16, 5, 1};
        for (int k = 0; k < 3; k++) {
            const int nr = nrs[k];
            lmq_panel_pack(t, ref->panel_unpack[t], w, wrow, nr, n_in, panel);
            lmq_panel_gemm_ref(t, n_in, panel, biased, astride, max_tok, want, 16, nr);
            bool ok = true;
            double worst = 0;
            for (int tk = 0; tk < max_tok; tk++)
                for (int r = 0; r < nr; r++) {
                    float d;
                    ref->vec_dot[t](n_in, &d, w + r * wrow, act + tk * astride);
                    float wf[3 * 256], af[3 * 256];
                    lmq_dequantize_row(t, w + r * wrow, wf, n_in);
                    act_floats(t, act + tk * astride, af, n_in);
                    const double scale = abs_dot(wf, af, n_in, NULL) + 1e-30;
                    const double err = fabs((double)want[tk * 16 + r] - d) / scale;
                    if (err > worst) worst = err;
                    ok &= err <= 3e-7; /* measured worst 6.5e-8: float sums in another order */
                }
            T_CHECK(ok, "%s panel reference vs vec_dot, %d rows: relative error %g", lmq_type_name(t), nr, worst);
            if (worst > worst_all) worst_all = worst;
            for (int i = 0; i < n_isas; i++) {
                const lmq_kernel_table *kt = lmq_kernels_for(isas[i]);
                kt->panel_pack(t, kt->panel_unpack[t], w, wrow, nr, n_in, panel2);
                T_CHECK(memcmp(panel, panel2, (size_t)pbytes) == 0, "%s %s packing == reference", lmq_isa_name(isas[i]),
                        lmq_type_name(t));
                if (!kt->panel_gemm[t]) continue;
                const int nts[6] = {1, 3, 7, 8, 9, 19};
                for (int q = 0; q < 6; q++) {
                    memset(got, 0x7F, sizeof got);
                    kt->panel_gemm[t](n_in, panel, biased, astride, nts[q], got, 16, nr);
                    bool same = true, untouched = true;
                    for (int tk = 0; tk < 19; tk++)
                        for (int r = 0; r < 16; r++) {
                            if (tk < nts[q] && r < nr)
                                same &= memcmp(&got[tk * 16 + r], &want[tk * 16 + r], 4) == 0;
                            else
                                untouched &= got[tk * 16 + r] != got[tk * 16 + r] || got[tk * 16 + r] > 1e38f;
                        }
                    T_CHECK(same && untouched, "%s %s panel kernel, %d rows x %d tokens: %s", lmq_isa_name(isas[i]),
                            lmq_type_name(t), nr, nts[q], same ? "wrote outside its rows" : "differs from the reference");
                    n_checked++;
                }
            }
        }
        free(w);
        free(act);
        free(biased);
        free(panel);
        free(panel2);
    }
    T_CHECK(lmq_panel_traits_of(LMQ_TYPE_F32) == NULL && lmq_panel_traits_of(LMQ_TYPE_Q4_1) == NULL &&
                lmq_panel_traits_of(LMQ_TYPE_COUNT) == NULL,
            "types without panels");
    printf("panels: %d kernel shapes checked; reference vs vec_dot: worst %.3g of the product's scale\n", n_checked,
           worst_all);
}

/* Repacked 32-element types on rows long enough that the AVX2 batch kernel
 * takes its activation scales in several slices of blocks (71 blocks: one
 * slice of 64 and a partial one), and the super-block types on 5
 * super-blocks: every ISA's kernel equals the reference for 1..7 tokens, 16
 * and 5 rows. */
static void test_repacked_long(void)
{
    const lmq_type types[11] = {LMQ_TYPE_Q4_0, LMQ_TYPE_Q8_0, LMQ_TYPE_IQ4_NL, LMQ_TYPE_Q4_K,
                                LMQ_TYPE_IQ4_XS, LMQ_TYPE_Q6_K, LMQ_TYPE_Q5_K,  LMQ_TYPE_MXFP4,
                                LMQ_TYPE_Q2_K,  LMQ_TYPE_Q3_K, LMQ_TYPE_Q5_0};
    int n_kernels = 0;
    for (int ti = 0; ti < 11; ti++) {
        const lmq_type t = types[ti], at = lmq_act_type(t);
        const bool k = at == LMQ_TYPE_Q8_K;
        enum { NT = 7 };
        const int NB = k ? 5 : 71;
        const int64_t n_in = NB * bsize(t), wrow = lmq_row_size(t, n_in), astride = lmq_row_size(at, n_in) + 4;
        uint8_t *w = malloc((size_t)(wrow * 16)), *act = malloc((size_t)(astride * NT));
        uint8_t *rp = aligned_alloc(64, (size_t)(wrow * 32 + 64) & ~(size_t)63); /* q4_K / iq4_xs grow */
        static int32_t asum[NT * 71];
        static float x[NT * 71 * 32], want[NT * 16], got[NT * 16];
        for (int r = 0; r < 16; r++) random_blocks(t, w + r * wrow, n_in);
        for (int i = 0; i < NT * n_in; i++) x[i] = grand();
        for (int tk = 0; tk < NT; tk++) {
            lmq_kernels_for(LMQ_ISA_SCALAR)->from_float[at](x + tk * n_in, act + tk * astride, n_in);
            if (k)
                lmq_q8_K_pair_sums(act + tk * astride, NB, asum + tk * NB * 4);
            else
                lmq_q8_0_block_sums(act + tk * astride, NB, asum + tk * NB);
        }
        lmq_rpanel_pack(t, w, wrow, n_in, rp);
        lmq_rpanel_gemm_ref(t, NB, rp, act, astride, asum, NT, want, 16, 16);
        for (int i = 0; i < n_isas; i++) {
            const lmq_kernel_table *kt = lmq_kernels_for(isas[i]);
            if (!kt->rpanel_gemm[t]) continue;
            for (int nt = 1; nt <= NT; nt++)
                for (int nr = 16; nr >= 5; nr -= 11) {
                    memset(got, 0, sizeof got);
                    kt->rpanel_gemm[t](NB, rp, act, astride, asum, nt, got, 16, nr);
                    bool same = true;
                    for (int tk = 0; tk < nt; tk++)
                        for (int r = 0; r < 16; r++)
                            same &= r < nr ? memcmp(&got[tk * 16 + r], &want[tk * 16 + r], 4) == 0 : got[tk * 16 + r] == 0;
                    T_CHECK(same, "%s %s repacked kernel, %d blocks, %d tokens, %d rows == reference",
                            lmq_isa_name(isas[i]), lmq_type_name(t), NB, nt, nr);
                    n_kernels++;
                }
        }
        free(w);
        free(act);
        free(rp);
    }
    printf("repacked, long rows: %d kernel shapes checked\n", n_kernels);
}

/* Repacked weights (q4_0, q8_0, iq4_nl, q4_K, iq4_xs, mxfp4, q6_K, q5_K, q2_K, q3_K, q5_0): the repacked reference equals the
 * panel reference bit for bit (same integers, same float operations), each
 * ISA's kernel equals it, and lmq_matmul_repacked equals lmq_matmul on the
 * panel path for any token count and 1 or 3 threads; error paths. */
/* The 32-element panel kernels at their int16 limits: every weight at one
 * code (all bits clear, all set, and 0x77: q5_0's -16 and 15, MXFP4's 12 and
 * -12, iq4_nl's -127 and 113), every activation at -127 or 127 (biased 1 or
 * 255), so the AVX2 kernel's four vpmaddubsw pairs summed in int16 reach
 * 8 x 255 x |q|; every ISA's kernel must still equal the reference. */
static void test_panel_limits(void)
{
    const lmq_kernel_table *ref = lmq_kernels_for(LMQ_ISA_SCALAR);
    const lmq_type types[5] = {LMQ_TYPE_Q4_0, LMQ_TYPE_Q5_0, LMQ_TYPE_Q8_0, LMQ_TYPE_IQ4_NL, LMQ_TYPE_MXFP4};
    const uint8_t fills[3] = {0x00, 0xFF, 0x77};
    const int64_t n_in = 3 * 32, nb = n_in / 32;
    int n_checked = 0;
    for (int ti = 0; ti < 5; ti++)
        for (int fi = 0; fi < 3; fi++) {
            const lmq_type t = types[ti];
            const int64_t wrow = lmq_row_size(t, n_in), bs = lmq_type_get(t)->type_size;
            const int64_t arow = lmq_row_size(LMQ_TYPE_Q8_0, n_in), pbytes = lmq_panel_bytes(t, n_in);
            _Alignas(64) uint8_t w[16 * 3 * 34], act[2 * 3 * 34];
            void *panel = aligned_alloc(64, (size_t)((pbytes + 63) & ~63));
            float want[2 * 16], got[2 * 16];
            memset(w, fills[fi], sizeof w);
            for (int64_t b = 0; b < 16 * nb; b++) {
                const uint16_t one = 0x3C00; /* d = 1 */
                if (t == LMQ_TYPE_MXFP4) w[b * bs] = 127; /* e: a scale of 0.5 */
                else memcpy(w + b * bs, &one, 2);
            }
            for (int tk = 0; tk < 2; tk++)
                for (int64_t b = 0; b < nb; b++) {
                    lmq_block_q8_0 *yb = (lmq_block_q8_0 *)(act + tk * arow) + b;
                    yb->d = 0x3C00;
                    memset(yb->qs, tk ? 127 : -127, 32);
                }
            for (int tk = 0; tk < 2; tk++) lmq_panel_bias_act(t, act + tk * arow, n_in);
            lmq_panel_pack(t, ref->panel_unpack[t], w, wrow, 16, n_in, panel);
            lmq_panel_gemm_ref(t, n_in, panel, act, arow, 2, want, 16, 16);
            for (int i = 0; i < n_isas; i++) {
                const lmq_kernel_table *kt = lmq_kernels_for(isas[i]);
                if (!kt->panel_gemm[t]) continue;
                for (int nt = 1; nt <= 2; nt++) {
                    memset(got, 0, sizeof got);
                    kt->panel_gemm[t](n_in, panel, act, arow, nt, got, 16, 16);
                    T_CHECK(memcmp(got, want, (size_t)nt * 16 * 4) == 0,
                            "%s %s panel kernel at the int16 limits (quant bytes 0x%02X), %d tokens",
                            lmq_isa_name(isas[i]), lmq_type_name(t), fills[fi], nt);
                    n_checked++;
                }
            }
            free(panel);
        }
    printf("panels at the int16 limits: %d kernels checked\n", n_checked);
}

static void test_repacked(void)
{
    const lmq_kernel_table *ref = lmq_kernels_for(LMQ_ISA_SCALAR);
    const lmq_type types[11] = {LMQ_TYPE_Q4_0, LMQ_TYPE_Q8_0, LMQ_TYPE_IQ4_NL, LMQ_TYPE_Q4_K,
                                LMQ_TYPE_IQ4_XS, LMQ_TYPE_Q6_K, LMQ_TYPE_Q5_K,  LMQ_TYPE_MXFP4,
                                LMQ_TYPE_Q2_K,  LMQ_TYPE_Q3_K, LMQ_TYPE_Q5_0};
    lmq_pool *p1 = NULL, *p3 = NULL;
    lmq_pool_new(1, &p1);
    lmq_pool_new(3, &p3);
    lmq_workspace *ws = NULL;
    T_CHECK(lmq_workspace_new(&ws) == LMQ_OK, "workspace");
    int n_kernels = 0;
    for (int ti = 0; ti < 11; ti++) {
        const lmq_type t = types[ti], at = lmq_act_type(t);
        const bool k = at == LMQ_TYPE_Q8_K;
        const int64_t n_in = k ? 3 * 256 : 7 * 32, wrow = lmq_row_size(t, n_in), nb = n_in / bsize(t), n_out = 48;
        const int64_t arow = lmq_row_size(at, n_in), astride = arow + 4;
        enum { NT = 19 };
        uint8_t *w = malloc((size_t)(wrow * n_out)), *act = malloc((size_t)(astride * NT));
        uint8_t *biased = malloc((size_t)(astride * NT));
        uint8_t *rp = aligned_alloc(64, 64 * 1024), *rp2 = aligned_alloc(64, 64 * 1024);
        void *panel = aligned_alloc(64, 64 * 1024);
        int32_t asum[NT * 12];
        static float x[NT * 768], want[NT * 16], got[NT * 16], y1[NT * 48], y2[NT * 48];
        for (int r = 0; r < n_out; r++) random_blocks(t, w + r * wrow, n_in);
        for (int i = 0; i < NT * n_in; i++) x[i] = grand();
        const int64_t sw = k ? 4 : 1; /* sum words per block */
        for (int tk = 0; tk < NT; tk++) {
            ref->from_float[at](x + tk * n_in, act + tk * astride, n_in);
            if (k)
                lmq_q8_K_pair_sums(act + tk * astride, nb, asum + tk * nb * sw);
            else
                lmq_q8_0_block_sums(act + tk * astride, nb, asum + tk * nb);
        }
        memcpy(biased, act, (size_t)(astride * NT));
        for (int tk = 0; tk < NT; tk++) lmq_panel_bias_act(t, biased + tk * astride, n_in);
        lmq_panel_pack(t, ref->panel_unpack[t], w, wrow, 16, n_in, panel);
        lmq_panel_gemm_ref(t, n_in, panel, biased, astride, NT, want, 16, 16);
        lmq_rpanel_pack(t, w, wrow, n_in, rp);
        lmq_rpanel_gemm_ref(t, nb, rp, act, astride, asum, NT, got, 16, 16);
        T_CHECK(memcmp(want, got, sizeof want) == 0, "%s repacked reference == panel reference", lmq_type_name(t));
        for (int i = 0; i < n_isas; i++) {
            const lmq_kernel_table *kt = lmq_kernels_for(isas[i]);
            if (!kt->rpanel_gemm[t]) continue;
            const int nts[9] = {1, 2, 3, 4, 5, 7, 8, 9, 19};
            for (int q = 0; q < 9; q++) {
                for (int nr = 16; nr >= 3; nr -= 13) {
                    memset(got, 0, sizeof got);
                    kt->rpanel_gemm[t](nb, rp, act, astride, asum, nts[q], got, 16, nr);
                    bool same = true;
                    for (int tk = 0; tk < nts[q]; tk++)
                        for (int r = 0; r < 16; r++)
                            same &= r < nr ? memcmp(&got[tk * 16 + r], &want[tk * 16 + r], 4) == 0 : got[tk * 16 + r] == 0;
                    T_CHECK(same, "%s %s repacked kernel, %d tokens, %d rows == reference", lmq_isa_name(isas[i]),
                            lmq_type_name(t), nts[q], nr);
                    n_kernels++;
                }
            }
        }
        /* the public entry points, with the active ISA */
        const int64_t bytes = lmq_repack_bytes(t, n_out, n_in);
        if (lmq_kernels()->rpanel_gemm[t]) {
            /* iq4_xs: its own 136 bytes per row and super-block plus a byte per sub-block scale and row */
            /* q3_K: its own 110 bytes plus the 16 scales as bytes in place of 12 */
            const int64_t want_bytes = t == LMQ_TYPE_Q5_K           ? n_out / 16 * nb * (int64_t)sizeof(lmq_rpanelq5)
                                       : t == LMQ_TYPE_IQ4_XS        ? n_out / 16 * nb * 16 * (136 + 2)
                                       : t == LMQ_TYPE_Q3_K          ? n_out / 16 * nb * 16 * (110 + 4)
                                       : t == LMQ_TYPE_Q4_K          ? n_out / 16 * nb * (int64_t)sizeof(lmq_rpanelk4)
                                                                     : wrow * n_out;
            T_CHECK(bytes == want_bytes, "%s repacked size %lld, want %lld (the weights: %lld)", lmq_type_name(t),
                    (long long)bytes, (long long)want_bytes, (long long)(wrow * n_out));
            T_CHECK(lmq_repack(p3, t, w, n_out, n_in, rp2) == LMQ_OK, "repack");
            for (int c = 0; c < 3; c++) lmq_rpanel_pack(t, w + c * 16 * wrow, wrow, n_in, rp + c * (bytes / 3));
            T_CHECK(memcmp(rp, rp2, (size_t)bytes) == 0, "%s lmq_repack == lmq_rpanel_pack per chunk", lmq_type_name(t));
            lmq_gemm_mode_set(LMQ_GEMM_PANEL);
            /* without a panel kernel for the type (AVX2: q8_0, iq4_nl) the want is the
             * repacked reference per chunk on the same activation bytes */
            const bool have_panel = lmq_kernels()->panel_gemm[t] != NULL;
            for (int nt = 1; nt <= NT; nt += 6)
                for (int th = 0; th < 2; th++) {
                    lmq_pool *pool = th ? p3 : p1;
                    bool ok_mm = true;
                    if (have_panel)
                        ok_mm = lmq_matmul(pool, t, w, n_out, n_in, x, nt, y1, ws) == LMQ_OK;
                    else
                        for (int c = 0; c < n_out / 16; c++)
                            lmq_rpanel_gemm_ref(t, nb, rp2 + c * (bytes / (n_out / 16)), act, astride, asum, nt,
                                                y1 + c * 16, n_out, 16);
                    T_CHECK(ok_mm && lmq_matmul_repacked(pool, t, rp2, n_out, n_in, x, nt, y2, ws) == LMQ_OK,
                            "matmul status");
                    T_CHECK(memcmp(y1, y2, (size_t)(nt * n_out * 4)) == 0,
                            "%s lmq_matmul_repacked == lmq_matmul (panel path), %d tokens, %d threads", lmq_type_name(t),
                            nt, th ? 3 : 1);
                }
            lmq_gemm_mode_set(LMQ_GEMM_AUTO);
        } else {
            T_CHECK(bytes == -1, "no repacking without the kernel");
        }
        T_CHECK(lmq_repack_bytes(t, 40, n_in) == -1 && lmq_repack_bytes(t, 48, n_in + bsize(t) / 2) == -1, "%s: rows not a multiple of 16, "
                "a partial block", lmq_type_name(t));
        T_CHECK(lmq_repack(p1, t, w, 40, n_in, rp2) == LMQ_ERR_INVALID_ARG, "repack of 40 rows refused");
        free(w);
        free(act);
        free(biased);
        free(rp);
        free(rp2);
        free(panel);
    }
    /* the int16 sums at their limits: every quant at its largest code (all
     * bits set), every activation quant at -128 (q8_K; q8_0 activations
     * stop at -127, as the quantizer makes them) or 127. iq4_xs twice: all
     * bits set (code 15, grid 113, scale 31), then all clear (code 0, grid
     * -127, scale -32, the largest |w| x |a| of the AVX2 sign trick), with
     * q8_K activations at -127 too: the AVX2 kernel applies the weight's
     * sign to the activation (vpsignb), exact only because the q8_K
     * quantizer never makes -128 (it scales the largest magnitude to -127;
     * lmq_quantize_row_q8_K_ref). MXFP4 at code 15 (-12), 7 (12, the AVX2
     * kernel's largest unsigned code 24: four groups of pairs summed in
     * int16) and 8 (-0), with the scale byte 127. q6_K: all set (code 63,
     * scale -1), then 0x80 (scale -128, codes 8 and 56 in the low 6 bits,
     * top bits of the fourth group 0b101010 = 42). q2_K all set (code 3,
     * scale and min 15). q3_K all set (code 7, scale 31) and all clear (code
     * 0, scale -32). q5_0 all set (code 31) and all clear (code 0, -16). */
    const struct { lmq_type t; uint8_t fill; } lims[17] = {
        {LMQ_TYPE_Q4_0, 0xFF},  {LMQ_TYPE_Q8_0, 0xFF},  {LMQ_TYPE_IQ4_NL, 0xFF}, {LMQ_TYPE_Q4_K, 0xFF},
        {LMQ_TYPE_IQ4_XS, 0xFF}, {LMQ_TYPE_IQ4_XS, 0x00}, {LMQ_TYPE_MXFP4, 0xFF},  {LMQ_TYPE_MXFP4, 0x77},
        {LMQ_TYPE_MXFP4, 0x88}, {LMQ_TYPE_Q6_K, 0xFF},  {LMQ_TYPE_Q6_K, 0x80},   {LMQ_TYPE_Q5_K, 0xFF},
        {LMQ_TYPE_Q2_K, 0xFF},  {LMQ_TYPE_Q3_K, 0xFF},  {LMQ_TYPE_Q3_K, 0x00},   {LMQ_TYPE_Q5_0, 0xFF},
        {LMQ_TYPE_Q5_0, 0x00}};
    for (int ti = 0; ti < 17; ti++) {
        const lmq_type t = lims[ti].t, at = lmq_act_type(t);
        const bool iq = t == LMQ_TYPE_IQ4_XS;
        const bool k = at == LMQ_TYPE_Q8_K;
        const int64_t n_in = k ? 2 * 256 : 3 * 32, wrow = lmq_row_size(t, n_in), nb = n_in / bsize(t);
        const int64_t arow = lmq_row_size(at, n_in), bs = lmq_type_get(t)->type_size;
        uint8_t *w = malloc((size_t)(wrow * 16)), *act = malloc((size_t)(arow * 2));
        uint8_t *rp = aligned_alloc(64, 16 * 1024);
        int32_t asum[2 * 8];
        static float x[2 * 512];
        float want[2 * 16], got[2 * 16];
        memset(w, lims[ti].fill, (size_t)(wrow * 16));
        for (int64_t b = 0; b < 16 * nb; b++) {
            const uint16_t one = 0x3C00; /* d (and dmin) = 1 */
            if (t == LMQ_TYPE_MXFP4) {
                w[b * bs] = 127;
                continue;
            }
            const size_t doff = t == LMQ_TYPE_Q6_K   ? offsetof(lmq_block_q6_K, d)
                                : t == LMQ_TYPE_Q2_K ? offsetof(lmq_block_q2_K, d)
                                : t == LMQ_TYPE_Q3_K ? offsetof(lmq_block_q3_K, d)
                                                     : 0;
            memcpy(w + b * bs + doff, &one, 2);
            if (t == LMQ_TYPE_Q4_K || t == LMQ_TYPE_Q5_K || t == LMQ_TYPE_Q2_K) memcpy(w + b * bs + doff + 2, &one, 2);
        }
        for (int i = 0; i < 2 * n_in; i++) x[i] = 1.0f;
        for (int tk = 0; tk < 2; tk++) {
            ref->from_float[at](x + tk * n_in, act + tk * arow, n_in);
            const int8_t v = tk ? 127 : k && !iq ? -128 : -127;
            for (int64_t b = 0; b < n_in / bsize(at); b++) {
                if (k) {
                    lmq_block_q8_K *yb = (lmq_block_q8_K *)(act + tk * arow) + b;
                    memset(yb->qs, (uint8_t)v, sizeof yb->qs);
                    for (int g = 0; g < 16; g++) yb->bsums[g] = (int16_t)(16 * v);
                } else {
                    memset(((lmq_block_q8_0 *)(act + tk * arow) + b)->qs, (uint8_t)v, 32);
                }
            }
            if (k)
                lmq_q8_K_pair_sums(act + tk * arow, nb, asum + tk * nb * 4);
            else
                lmq_q8_0_block_sums(act + tk * arow, nb, asum + tk * nb);
        }
        lmq_rpanel_pack(t, w, wrow, n_in, rp);
        lmq_rpanel_gemm_ref(t, nb, rp, act, arow, asum, 2, want, 16, 16);
        for (int i = 0; i < n_isas; i++) {
            const lmq_kernel_table *kt = lmq_kernels_for(isas[i]);
            if (!kt->rpanel_gemm[t]) continue;
            for (int nt = 1; nt <= 2; nt++) {
                memset(got, 0, sizeof got);
                kt->rpanel_gemm[t](nb, rp, act, arow, asum, nt, got, 16, 16);
                T_CHECK(memcmp(got, want, (size_t)nt * 16 * 4) == 0,
                        "%s %s repacked kernel at the int16 limits (quant bytes 0x%02X), %d tokens", lmq_isa_name(isas[i]),
                        lmq_type_name(t), lims[ti].fill, nt);
                n_kernels++;
            }
        }
        free(w);
        free(act);
        free(rp);
    }
    T_CHECK(lmq_repack_bytes(LMQ_TYPE_Q4_1, 16, 256) == -1 && lmq_repack_bytes(LMQ_TYPE_COUNT, 16, 256) == -1,
            "types without repacking");
    T_CHECK(lmq_matmul_repacked(p1, LMQ_TYPE_Q4_1, NULL, 16, 256, NULL, 1, NULL, ws) == LMQ_ERR_INVALID_ARG,
            "matmul_repacked of an unrepackable type");
    printf("repacked: %d kernel shapes checked\n", n_kernels);
    lmq_workspace_free(ws);
    lmq_pool_free(p1);
    lmq_pool_free(p3);
}

/* Repacked MXFP4 at every E8M0 scale: the kernels build the float scale
 * from the byte (2^(e - 128), subnormal for e = 0 and 1, 2^127 for 255),
 * so each of the 256 bytes appears in some row and block, with random codes
 * and activations; every ISA's kernel equals the reference bit for bit
 * (infinities included), and the reference equals the panel reference,
 * whose scale is lmq_mxfp4_scale. 16 rows x 17 blocks x 1 = 272 scales. */
static void test_repacked_mxfp4_scales(void)
{
    const lmq_kernel_table *ref = lmq_kernels_for(LMQ_ISA_SCALAR);
    const lmq_type t = LMQ_TYPE_MXFP4;
    enum { NB = 17, NT = 5 };
    const int64_t n_in = NB * 32, wrow = lmq_row_size(t, n_in), arow = lmq_row_size(LMQ_TYPE_Q8_0, n_in);
    uint8_t *w = malloc((size_t)(wrow * 16)), *act = malloc((size_t)(arow * NT)), *biased = malloc((size_t)(arow * NT));
    uint8_t *rp = aligned_alloc(64, (size_t)(wrow * 16 + 63) & ~(size_t)63);
    void *panel = aligned_alloc(64, (size_t)((lmq_panel_bytes(t, n_in) + 63) & ~63));
    static float x[NT * NB * 32];
    float want[NT * 16], got[NT * 16];
    int32_t asum[NT * NB];
    for (int r = 0; r < 16; r++)
        for (int b = 0; b < NB; b++) {
            lmq_block_mxfp4 *blk = (lmq_block_mxfp4 *)(w + r * wrow) + b;
            blk->e = (uint8_t)((r * NB + b) * 15 % 256 + ((r * NB + b) >= 256 ? 1 : 0)); /* every byte, 15 coprime to 256 */
            for (int j = 0; j < 16; j++) blk->qs[j] = (uint8_t)rnd();
        }
    for (int i = 0; i < NT * n_in; i++) x[i] = grand() * 1e-3f;
    for (int tk = 0; tk < NT; tk++) {
        ref->from_float[LMQ_TYPE_Q8_0](x + tk * n_in, act + tk * arow, n_in);
        lmq_q8_0_block_sums(act + tk * arow, NB, asum + tk * NB);
    }
    memcpy(biased, act, (size_t)(arow * NT));
    for (int tk = 0; tk < NT; tk++) lmq_panel_bias_act(t, biased + tk * arow, n_in);
    lmq_panel_pack(t, ref->panel_unpack[t], w, wrow, 16, n_in, panel);
    lmq_panel_gemm_ref(t, n_in, panel, biased, arow, NT, want, 16, 16);
    lmq_rpanel_pack(t, w, wrow, n_in, rp);
    lmq_rpanel_gemm_ref(t, NB, rp, act, arow, asum, NT, got, 16, 16);
    T_CHECK(memcmp(want, got, sizeof want) == 0, "mxfp4 repacked reference == panel reference at every scale byte");
    bool seen[256] = {false}, all = true;
    for (int r = 0; r < 16; r++)
        for (int b = 0; b < NB; b++) seen[((const lmq_block_mxfp4 *)(w + r * wrow) + b)->e] = true;
    for (int e = 0; e < 256; e++) all &= seen[e];
    T_CHECK(all, "every E8M0 byte is in the test matrix");
    int n = 0;
    for (int i = 0; i < n_isas; i++) {
        const lmq_kernel_table *kt = lmq_kernels_for(isas[i]);
        if (!kt->rpanel_gemm[t]) continue;
        for (int nt = 1; nt <= NT; nt++) {
            memset(got, 0, sizeof got);
            kt->rpanel_gemm[t](NB, rp, act, arow, asum, nt, got, 16, 16);
            T_CHECK(memcmp(got, want, (size_t)nt * 16 * 4) == 0, "%s mxfp4 repacked kernel at every scale byte, %d tokens",
                    lmq_isa_name(isas[i]), nt);
            n++;
        }
    }
    printf("repacked mxfp4 scales: %d kernels checked\n", n);
    free(w);
    free(act);
    free(biased);
    free(rp);
    free(panel);
}

/* The f32 panels of the batched f16 / bf16 / f32 / fp8 / q4_1 / q5_1 path:
 * every ISA's fpanel_pack and fpanel_gemm equal the scalar references bit
 * for bit (the sums are one fmaf chain over k), at odd widths, 1..16 live
 * rows of the last panel, 1..4 panels and token counts around the kernels'
 * group of 6; nothing beyond row nr of y is written. */
static void test_fpanels(void)
{
    const int64_t widths[4] = {1, 7, 64, 259};
    const int shapes[6][2] = {{1, 16}, {1, 9}, {1, 5}, {1, 1}, {3, 37}, {4, 64}}; /* panels, rows */
    const int toks[9] = {1, 2, 3, 5, 6, 7, 11, 12, 13};
    int n_checked = 0;
    for (int wi = 0; wi < 4; wi++) {
        const int64_t n_in = widths[wi], rs = n_in + 3, xs = n_in + 1;
        float *rows = malloc(sizeof(float) * (size_t)(64 * rs)), *x = malloc(sizeof(float) * (size_t)(13 * xs));
        float *pw = malloc(sizeof(float) * (size_t)(4 * 16 * n_in)), *pg = malloc(sizeof(float) * (size_t)(4 * 16 * n_in));
        for (int64_t i = 0; i < 64 * rs; i++) rows[i] = grand() * (i % 5 == 0 ? 100.0f : 0.01f);
        for (int64_t i = 0; i < 13 * xs; i++) x[i] = grand();
        for (int si = 0; si < 6; si++) {
            const int np = shapes[si][0], nr = shapes[si][1], ys = nr + 2;
            for (int p = 0; p < np; p++) {
                const int live = nr - 16 * p < 16 ? nr - 16 * p : 16;
                lmq_fpanel_pack_ref(rows + 16 * p * rs, rs, live, n_in, pw + p * 16 * n_in);
            }
            for (int ii = 0; ii < n_isas; ii++) {
                const lmq_kernel_table *k = lmq_kernels_for(isas[ii]);
                if (!k->fpanel_gemm) continue;
                memset(pg, 0xA5, sizeof(float) * (size_t)(np * 16 * n_in));
                for (int p = 0; p < np; p++) {
                    const int live = nr - 16 * p < 16 ? nr - 16 * p : 16;
                    k->fpanel_pack(rows + 16 * p * rs, rs, live, n_in, pg + p * 16 * n_in);
                }
                T_CHECK(memcmp(pw, pg, sizeof(float) * (size_t)(np * 16 * n_in)) == 0, "%s fpanel_pack, %lld wide, %d rows",
                        lmq_isa_name(isas[ii]), (long long)n_in, nr);
                for (int ti = 0; ti < 9; ti++) {
                    const int nt = toks[ti];
                    float want[13 * 66], got[13 * 66];
                    for (int i = 0; i < nt * ys; i++) want[i] = got[i] = -7.5f;
                    lmq_fpanel_gemm_ref(n_in, np, pw, x, xs, nt, want, ys, nr);
                    k->fpanel_gemm(n_in, np, pw, x, xs, nt, got, ys, nr);
                    T_CHECK(memcmp(want, got, sizeof(float) * (size_t)(nt * ys)) == 0,
                            "%s fpanel_gemm, %lld wide, %d panels, %d rows, %d tokens: equal to the reference, rows >= %d untouched",
                            lmq_isa_name(isas[ii]), (long long)n_in, np, nr, nt, nr);
                    n_checked++;
                }
            }
        }
        /* the reference against a double-precision sum (it is what the kernels must equal) */
        float y1[16];
        lmq_fpanel_gemm_ref(n_in, 1, pw, x, xs, 1, y1, 16, 16);
        for (int r = 0; r < 16; r++) {
            double d = 0, mag = 0;
            for (int64_t kk = 0; kk < n_in; kk++) {
                d += (double)rows[r * rs + kk] * x[kk];
                mag += fabs((double)rows[r * rs + kk] * x[kk]);
            }
            T_CHECK(fabs(d - y1[r]) <= 1e-6 * (double)n_in * mag + 1e-30, "fpanel reference row %d: %g vs %g", r, y1[r], d);
        }
        free(rows);
        free(x);
        free(pw);
        free(pg);
    }
    T_CHECK(n_checked > 0 || !lmq_kernels_for(start_isa)->fpanel_gemm, "some ISA checked");
}

int main(void)
{
    /* test_kernels_avxvnni: the run is about one ISA; without it, a skip (77) */
    const char *need = getenv("LMQ_TEST_NEED_ISA");
    lmq_isa need_isa;
    if (need && *need && (lmq_isa_from_name(need, &need_isa) != LMQ_OK || !lmq_isa_supported(need_isa))) {
        printf("SKIP: ISA %s is not supported here (%s)\n", need, lmq_cpu_features());
        return 77;
    }
    test_isa_api();
    test_to_float();
    test_act_quantizers();
    test_vec_dot();
    test_public_dot();
    test_attention_helpers();
    test_pool();
    test_matmul();
    test_matmul_multi();
    test_matmul_multi_repacked();
    test_panels();
    test_fpanels();
    test_panel_limits();
    test_repacked();
    test_repacked_long();
    test_repacked_mxfp4_scales();
    return t_finish();
}
