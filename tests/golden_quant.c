/* Golden tests of the quantize module on real weights (llama-8m-debtext):
 *
 * 1. llama.cpp cross-check: the tensors llama-quantize wrote into
 *    ../shared/reference/llama-8m-debtext-*.gguf decode with lmq's
 *    dequantizers to errors of the expected size against the f32 GGUF (this
 *    proves the block layouts); q4_0/q8_0 (ggml's round-to-nearest) are
 *    re-quantized byte for byte; lmq's own quantization of each tensor has a
 *    relative RMSE not above llama.cpp's (the ratio per type is printed).
 *    The f32 GGUF is the reference because llama.cpp permutes attn_q/attn_k
 *    rows.
 * 2. every type on the safetensors weights: relative RMSE under a measured
 *    bound; K-quants, iq4_xs, iq4_nl, fp8 and mxfp4 (MX scale), q4_1, q5_0
 *    and q5_1 not worse than a plain round-to-nearest
 *    quantizer of the same format; 1 and 2 threads byte-identical.
 * 3. MXFP4 on gpt-oss expert weights (the zoo's gptoss): the MXFP4 blocks
 *    of reference/zoo/gptoss-q8_0.gguf (the checkpoint's blocks repacked by
 *    the converter, kept by llama-quantize) decode to exactly the values of
 *    the checkpoint's own MXFP4 tensors (OpenAI's packing, decoded here from
 *    the OCP definition); lmq's quantizer turns the decoded values back into
 *    the same values, and into the same bytes wherever the block is one
 *    ggml's quantizer can produce (largest |value| 8 d or 12 d). The others
 *    (OpenAI's scale 2^ceil(log2(amax / 6)) leaves some blocks with 3.0 as
 *    their largest E2M1 value, 6 d) come back one exponent lower with every
 *    code's value doubled, as ggml would write them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_quant.h"
#include "testutil.h"

typedef struct {
    double se, ss; /* sum of squared errors, of squared values */
} acc;

static void acc_add(acc *a, const float *x, const float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const double d = (double)y[i] - x[i];
        a->se += d * d;
        a->ss += (double)x[i] * x[i];
    }
}

static double acc_rel(const acc *a)
{
    return a->ss > 0 ? sqrt(a->se / a->ss) : 0.0;
}

/* ======================================================================
 * 1. llama.cpp's files
 * ====================================================================== */

/* Relative RMSE of llama.cpp's tensors decoded by lmq, measured, with the
 * bound a little above; a layout mistake gives errors near 1. */
static const struct {
    lmq_type t;
    double llama_max;
} ref_bounds[] = {
    {LMQ_TYPE_Q4_0, 0.090},   /* 0.085752 */
    {LMQ_TYPE_Q8_0, 0.0055},  /* 0.005216 */
    {LMQ_TYPE_Q2_K, 0.31},    /* 0.296252 */
    {LMQ_TYPE_Q3_K, 0.158},   /* 0.150681 */
    {LMQ_TYPE_Q4_K, 0.075},   /* 0.071221 */
    {LMQ_TYPE_Q5_K, 0.038},   /* 0.036131 */
    {LMQ_TYPE_Q6_K, 0.0177},  /* 0.016836 */
    {LMQ_TYPE_IQ4_XS, 0.081}, /* 0.076636 */
};

static void test_llamacpp(void)
{
    static const char *refs[] = {"q4_0", "q8_0", "q2_k", "q3_k_m", "q4_k_m", "q6_k", "iq4_xs"};
    const char *f32_path = t_shared("reference/llama-8m-debtext-f32.gguf");
    t_require(f32_path);
    lmq_file *f32 = NULL;
    lmq_status s = lmq_file_open(f32_path, &f32);
    T_CHECK(s == LMQ_OK, "%s", lmq_last_error());
    if (s) return;
    acc theirs[LMQ_TYPE_COUNT] = {{0}}, ours[LMQ_TYPE_COUNT] = {{0}};
    int64_t blocks[LMQ_TYPE_COUNT] = {0}, same[LMQ_TYPE_COUNT] = {0}, ntensors = 0;
    for (size_t r = 0; r < sizeof refs / sizeof refs[0]; r++) {
        char rel[128];
        snprintf(rel, sizeof rel, "reference/llama-8m-debtext-%s.gguf", refs[r]);
        lmq_file *q = NULL;
        s = lmq_file_open(t_shared(rel), &q);
        T_CHECK(s == LMQ_OK, "%s", lmq_last_error());
        if (s) continue;
        for (size_t i = 0; i < lmq_file_n_tensors(q); i++) {
            const lmq_tensor_info *tq = lmq_file_tensor(q, i);
            const lmq_tensor_info *tf = lmq_file_find_tensor(f32, tq->name);
            const lmq_type t = tq->type;
            if (!lmq_type_get(t)->quantized) continue;
            T_CHECK(tf && tf->type == LMQ_TYPE_F32, "%s: %s missing from the f32 GGUF", rel, tq->name);
            if (!tf || tf->type != LMQ_TYPE_F32) continue;
            const int64_t ne0 = tf->ne[0], n = (int64_t)(tf->nbytes / 4), nrows = n / ne0;
            const int64_t rb = lmq_row_size(t, ne0);
            T_CHECK(rb > 0 && (uint64_t)(rb * nrows) == tq->nbytes, "%s: size", tq->name);
            float *y = malloc(sizeof(float) * (size_t)n);
            uint8_t *mine = malloc((size_t)(rb * nrows));
            T_CHECK(lmq_dequantize_row(t, tq->data, y, n) == LMQ_OK, "%s", lmq_last_error());
            acc_add(&theirs[t], tf->data, y, n);
            T_CHECK(lmq_quantize_rows(t, tf->data, mine, nrows, ne0, NULL, 2) == LMQ_OK, "%s: %s",
                    tq->name, lmq_last_error());
            const int ts = lmq_type_get(t)->type_size;
            for (int64_t b = 0; b < rb * nrows / ts; b++) {
                blocks[t]++;
                same[t] += memcmp(mine + b * ts, (const uint8_t *)tq->data + b * ts, (size_t)ts) == 0;
            }
            T_CHECK(lmq_dequantize_row(t, mine, y, n) == LMQ_OK, "%s", lmq_last_error());
            acc_add(&ours[t], tf->data, y, n);
            ntensors++;
            free(y);
            free(mine);
        }
        lmq_file_close(q);
    }
    lmq_file_close(f32);
    T_CHECK(ntensors > 50, "%lld quantized tensors compared", (long long)ntensors);

    printf("llama.cpp cross-check (relative RMSE vs the f32 GGUF, all tensors of each type):\n");
    printf("  %-7s %10s %10s %8s %10s\n", "type", "llama.cpp", "lmq", "ratio", "same bytes");
    for (size_t k = 0; k < sizeof ref_bounds / sizeof ref_bounds[0]; k++) {
        const lmq_type t = ref_bounds[k].t;
        const double el = acc_rel(&theirs[t]), em = acc_rel(&ours[t]);
        T_CHECK(blocks[t] > 0, "%s: no tensors of this type in the reference files", lmq_type_name(t));
        if (!blocks[t]) continue;
        printf("  %-7s %10.6f %10.6f %8.4f %9.2f%%\n", lmq_type_name(t), el, em, em / el,
               100.0 * (double)same[t] / (double)blocks[t]);
        T_CHECK(el <= ref_bounds[k].llama_max, "%s: llama.cpp's tensors decode with error %.6f > %.4f",
                lmq_type_name(t), el, ref_bounds[k].llama_max);
        T_CHECK(em <= el * (1.0 + 1e-9), "%s: lmq's RMSE %.6f above llama.cpp's %.6f", lmq_type_name(t),
                em, el);
    }
    /* ggml's round-to-nearest reference: same bytes */
    const lmq_type rtn[2] = {LMQ_TYPE_Q4_0, LMQ_TYPE_Q8_0};
    for (int k = 0; k < 2; k++)
        T_CHECK(blocks[rtn[k]] > 0 && same[rtn[k]] * 1000 >= blocks[rtn[k]] * 999,
                "%s: only %lld of %lld blocks equal llama.cpp's", lmq_type_name(rtn[k]),
                (long long)same[rtn[k]], (long long)blocks[rtn[k]]);
}

/* ======================================================================
 * 2. Round-to-nearest baselines of the K formats (decoded values only; the
 *    value sets of the formats, computed here without lmq's packing)
 * ====================================================================== */

static float f16r(float v)
{
    return lmq_fp16_to_fp32(lmq_fp32_to_fp16(v));
}

static float clampf(float v, float lo, float hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* q2_K (sub 16, q 0..3, 4-bit scale/min), q4_K (sub 32, q 0..15, 6-bit),
 * q5_K (sub 32, q 0..31, 6-bit): x = d*ls*q - dmin*lm. */
static void rtn_asym(const float *x, float *y, int sub, int nmax, int smax)
{
    const int nsub = 256 / sub;
    float sc[16], mn[16], maxs = 0, maxm = 0;
    for (int j = 0; j < nsub; j++) {
        float lo = 0, hi = x[j * sub];
        for (int l = 0; l < sub; l++) {
            lo = fminf(lo, x[j * sub + l]);
            hi = fmaxf(hi, x[j * sub + l]);
        }
        sc[j] = (hi - lo) / (float)nmax;
        mn[j] = -lo;
        maxs = fmaxf(maxs, sc[j]);
        maxm = fmaxf(maxm, mn[j]);
    }
    const float d = f16r(maxs / (float)smax), dm = f16r(maxm / (float)smax);
    for (int j = 0; j < nsub; j++) {
        const float ls = d > 0 ? clampf(roundf(sc[j] / d), 0, (float)smax) : 0;
        const float lm = dm > 0 ? clampf(roundf(mn[j] / dm), 0, (float)smax) : 0;
        const float dl = d * ls, ml = dm * lm;
        for (int l = 0; l < sub; l++) {
            const float q = dl > 0 ? clampf(roundf((x[j * sub + l] + ml) / dl), 0, (float)nmax) : 0;
            y[j * sub + l] = dl * q - ml;
        }
    }
}

/* q3_K (q -4..3, 6-bit signed scales), q6_K (q -32..31, int8 scales):
 * sub-blocks of 16, x = d*ls*q, the largest magnitude mapped to the grid's
 * negative end (as ggml's round-to-nearest does). */
static void rtn_sym(const float *x, float *y, int qlo, int qhi, int slo, int shi)
{
    float sc[16], maxs = 0;
    for (int j = 0; j < 16; j++) {
        float m = 0;
        for (int l = 0; l < 16; l++)
            if (fabsf(x[16 * j + l]) > fabsf(m)) m = x[16 * j + l];
        sc[j] = m / (float)qlo;
        if (fabsf(sc[j]) > fabsf(maxs)) maxs = sc[j];
    }
    const float d = f16r(maxs / (float)slo);
    for (int j = 0; j < 16; j++) {
        const float ls = d != 0 ? clampf(roundf(sc[j] / d), (float)slo, (float)shi) : 0;
        const float dl = d * ls;
        for (int l = 0; l < 16; l++) {
            const float q = dl != 0 ? clampf(roundf(x[16 * j + l] / dl), (float)qlo, (float)qhi) : 0;
            y[16 * j + l] = dl * q;
        }
    }
}

/* iq4_xs: sub-blocks of 32 on the iq4 grid, 6-bit signed scales. */
static void rtn_iq4xs(const float *x, float *y)
{
    float sc[8], maxs = 0;
    for (int j = 0; j < 8; j++) {
        float m = 0;
        for (int l = 0; l < 32; l++)
            if (fabsf(x[32 * j + l]) > fabsf(m)) m = x[32 * j + l];
        sc[j] = m / (float)lmq_iq4nl_values[0];
        if (fabsf(sc[j]) > fabsf(maxs)) maxs = sc[j];
    }
    const float d = f16r(maxs / -32.0f);
    for (int j = 0; j < 8; j++) {
        const float ls = d != 0 ? clampf(roundf(sc[j] / d), -32, 31) : 0;
        const float dl = d * ls;
        for (int l = 0; l < 32; l++) {
            float best = 0, bd = INFINITY;
            for (int k = 0; k < 16; k++) {
                const float v = dl * (float)lmq_iq4nl_values[k];
                if (fabsf(v - x[32 * j + l]) < bd) {
                    bd = fabsf(v - x[32 * j + l]);
                    best = v;
                }
            }
            y[32 * j + l] = best;
        }
    }
}

/* ---- 32-element formats: ggml's legacy blocks, iq4_nl, fp8 with an MX scale */

/* q4_1 (q 0..15), q5_1 (q 0..31): x = d*q + m over the block's min..max,
 * d and m stored as f16. */
static void rtn_minmax32(const float *x, float *y, int nmax)
{
    float lo = x[0], hi = x[0];
    for (int l = 1; l < 32; l++) {
        lo = fminf(lo, x[l]);
        hi = fmaxf(hi, x[l]);
    }
    const float d = f16r((hi - lo) / (float)nmax), m = f16r(lo);
    for (int l = 0; l < 32; l++) {
        const float q = d > 0 ? clampf(roundf((x[l] - m) / d), 0, (float)nmax) : 0;
        y[l] = d * q + m;
    }
}

/* q5_0: x = d*(q - 16), q 0..31, the largest magnitude mapped to -16. */
static void rtn_q5_0(const float *x, float *y)
{
    float m = 0;
    for (int l = 0; l < 32; l++)
        if (fabsf(x[l]) > fabsf(m)) m = x[l];
    const float d = f16r(m / -16.0f);
    for (int l = 0; l < 32; l++) {
        const float q = d != 0 ? clampf(roundf(x[l] / d), -16, 15) : 0;
        y[l] = d * q;
    }
}

/* iq4_nl: one f16 scale per 32, the largest magnitude on the grid's first
 * value, each element to the nearest grid point. */
static void rtn_iq4nl(const float *x, float *y)
{
    float m = 0;
    for (int l = 0; l < 32; l++)
        if (fabsf(x[l]) > fabsf(m)) m = x[l];
    const float d = f16r(m / (float)lmq_iq4nl_values[0]);
    for (int l = 0; l < 32; l++) {
        float best = 0, bd = INFINITY;
        for (int k = 0; k < 16; k++) {
            const float v = d * (float)lmq_iq4nl_values[k];
            if (fabsf(v - x[l]) < bd) {
                bd = fabsf(v - x[l]);
                best = v;
            }
        }
        y[l] = best;
    }
}

/* The finite non-negative values of an fp8 format, decoded here from the bit
 * layout (OCP OFP8: e4m3 bias 7 without infinities, 0x7F NaN; e5m2 bias 15,
 * exponent 31 inf/NaN), independent of lmq's tables. */
static int fp8_values(int mbits, int bias, bool e4m3, float *v)
{
    int n = 0;
    for (int c = 0; c < 128; c++) {
        const int e = c >> mbits, m = c & ((1 << mbits) - 1);
        if (e4m3 && c == 0x7F) continue;
        if (!e4m3 && e == 31) continue;
        v[n++] = e ? ldexpf(1.0f + (float)m / (float)(1 << mbits), e - bias)
                   : ldexpf((float)m / (float)(1 << mbits), 1 - bias);
    }
    return n;
}

/* MX (OCP Microscaling) round-to-nearest: shared scale 2^(floor(log2 amax)
 * - emax), each element to the nearest value, saturating at the largest. */
static void rtn_fp8_mx(const float *x, float *y, const float *vals, int nv, int emax)
{
    float amax = 0;
    for (int l = 0; l < 32; l++) amax = fmaxf(amax, fabsf(x[l]));
    if (amax == 0) {
        memset(y, 0, 32 * sizeof(float));
        return;
    }
    const float s = ldexpf(1.0f, ilogbf(amax) - emax);
    for (int l = 0; l < 32; l++) {
        const float a = fabsf(x[l]) / s;
        float best = 0, bd = INFINITY;
        for (int k = 0; k < nv; k++)
            if (fabsf(vals[k] - a) < bd) {
                bd = fabsf(vals[k] - a);
                best = vals[k];
            }
        y[l] = copysignf(best * s, x[l]);
    }
}

/* The non-negative E2M1 values (OCP MX: 1 sign, 2 exponent, 1 mantissa bit). */
static const float k_e2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

static void rtn_row(lmq_type t, const float *x, float *y, int64_t n)
{
    static float e4m3[128], e5m2[128];
    static int n43, n52;
    if (!n43) {
        n43 = fp8_values(3, 7, true, e4m3);
        n52 = fp8_values(2, 15, false, e5m2);
    }
    for (int64_t b = 0; b < n; b += 32) {
        if (t == LMQ_TYPE_Q4_1) rtn_minmax32(x + b, y + b, 15);
        if (t == LMQ_TYPE_Q5_1) rtn_minmax32(x + b, y + b, 31);
        if (t == LMQ_TYPE_Q5_0) rtn_q5_0(x + b, y + b);
        if (t == LMQ_TYPE_IQ4_NL) rtn_iq4nl(x + b, y + b);
        if (t == LMQ_TYPE_F8_E4M3) rtn_fp8_mx(x + b, y + b, e4m3, n43, 8);
        if (t == LMQ_TYPE_F8_E5M2) rtn_fp8_mx(x + b, y + b, e5m2, n52, 15);
        if (t == LMQ_TYPE_MXFP4) rtn_fp8_mx(x + b, y + b, k_e2m1, 8, 2);
    }
    for (int64_t b = 0; b < n; b += 256) {
        if (t == LMQ_TYPE_Q2_K) rtn_asym(x + b, y + b, 16, 3, 15);
        if (t == LMQ_TYPE_Q4_K) rtn_asym(x + b, y + b, 32, 15, 63);
        if (t == LMQ_TYPE_Q5_K) rtn_asym(x + b, y + b, 32, 31, 63);
        if (t == LMQ_TYPE_Q3_K) rtn_sym(x + b, y + b, -4, 3, -32, 31);
        if (t == LMQ_TYPE_Q6_K) rtn_sym(x + b, y + b, -32, 31, -128, 127);
        if (t == LMQ_TYPE_IQ4_XS) rtn_iq4xs(x + b, y + b);
    }
}

/* Relative RMSE over the 2-D weights of the safetensors file, measured
 * (comment) with the bound 5% above (a regression pin), and for the types
 * with has_rtn an independent check: not worse than the plain
 * round-to-nearest quantizer written above. q4_1, q5_0 and q5_1 are ggml's
 * own round-to-nearest, which scales with the unrounded f32 d where the
 * baseline uses the stored f16 d: within 0.1% of it (measured 0.00-0.02%). */
#define LEGACY_RTN_SLACK 1.001
static const struct {
    lmq_type t;
    double bound;
    bool has_rtn;
} st_bounds[] = {
    {LMQ_TYPE_F32, 0.0, false},        /* exact */
    {LMQ_TYPE_F16, 0.000218, false},   /* 0.000207 */
    {LMQ_TYPE_BF16, 0.00175, false},   /* 0.001660 */
    {LMQ_TYPE_Q4_0, 0.0880, false},    /* 0.083808 */
    {LMQ_TYPE_Q4_1, 0.0804, true},    /* 0.076525; round-to-nearest 0.076523 */
    {LMQ_TYPE_Q5_0, 0.0437, true},    /* 0.041594; 0.041594 */
    {LMQ_TYPE_Q5_1, 0.0389, true},    /* 0.037020; 0.037015 */
    {LMQ_TYPE_Q8_0, 0.00548, false},   /* 0.005216 */
    {LMQ_TYPE_Q8_1, 0.00548, false},   /* 0.005216 */
    {LMQ_TYPE_Q2_K, 0.2746, true},     /* 0.261470; round-to-nearest 0.323905 */
    {LMQ_TYPE_Q3_K, 0.1487, true},     /* 0.141585; 0.152184 */
    {LMQ_TYPE_Q4_K, 0.0722, true},     /* 0.068794; 0.076689 */
    {LMQ_TYPE_Q5_K, 0.0357, true},     /* 0.033949; 0.037327 */
    {LMQ_TYPE_Q6_K, 0.0176, true},     /* 0.016782; 0.018413 */
    {LMQ_TYPE_Q8_K, 0.00708, false},   /* 0.006735 */
    {LMQ_TYPE_IQ4_NL, 0.0765, true},  /* 0.072823; 0.078896 */
    {LMQ_TYPE_IQ4_XS, 0.0769, true},   /* 0.073241; 0.079055 */
    {LMQ_TYPE_F8_E4M3, 0.0278, true}, /* 0.026495; MX round-to-nearest 0.029426 */
    {LMQ_TYPE_F8_E5M2, 0.0555, true}, /* 0.052815; 0.053969 */
    {LMQ_TYPE_MXFP4, 0.1201, true},   /* 0.114373; 0.114373 */
    {LMQ_TYPE_TQ1_0, 0.4463, false},  /* 0.425045 (ternary: for ternary-trained models) */
    {LMQ_TYPE_TQ2_0, 0.4463, false},  /* 0.425045 */
};

static void test_safetensors(void)
{
    const char *path = t_shared("models/llama-8m-debtext/model.safetensors");
    t_require(path);
    lmq_safetensors *st = NULL;
    lmq_status s = lmq_safetensors_open(path, &st);
    T_CHECK(s == LMQ_OK, "%s", lmq_last_error());
    if (s) return;
    int n_writable = 0;
    for (int t = 0; t < LMQ_TYPE_COUNT; t++) n_writable += lmq_type_can_quantize((lmq_type)t);
    T_CHECK(sizeof st_bounds / sizeof st_bounds[0] == (size_t)n_writable, "a bound for every type lmq writes");
    printf("safetensors weights (all 2-D tensors): relative RMSE\n");
    printf("  %-8s %10s %10s %10s\n", "type", "lmq", "bound", "RTN");
    for (size_t k = 0; k < sizeof st_bounds / sizeof st_bounds[0]; k++) {
        const lmq_type t = st_bounds[k].t;
        acc mine = {0}, base = {0};
        int checked_threads = 0;
        for (size_t i = 0; i < lmq_safetensors_count(st); i++) {
            const lmq_st_tensor *ti = lmq_safetensors_tensor(st, i);
            if (ti->n_dims != 2 || !ti->supported || ti->type != LMQ_TYPE_F32) continue;
            const int64_t ne0 = ti->shape[1], nrows = ti->shape[0], n = ne0 * nrows;
            const int64_t rb = lmq_row_size(t, ne0);
            if (rb < 0) continue;
            const float *x = ti->data;
            uint8_t *q = malloc((size_t)(rb * nrows));
            float *y = malloc(sizeof(float) * (size_t)n);
            T_CHECK(lmq_quantize_rows(t, x, q, nrows, ne0, NULL, 2) == LMQ_OK, "%s %s: %s",
                    lmq_type_name(t), ti->name, lmq_last_error());
            T_CHECK(lmq_dequantize_row(t, q, y, n) == LMQ_OK, "%s", lmq_last_error());
            acc_add(&mine, x, y, n);
            if (st_bounds[k].has_rtn) {
                rtn_row(t, x, y, n);
                acc_add(&base, x, y, n);
            }
            if (!checked_threads && nrows >= 64) { /* thread count does not change the bytes */
                uint8_t *q1 = malloc((size_t)(rb * nrows));
                T_CHECK(lmq_quantize_rows(t, x, q1, nrows, ne0, NULL, 1) == LMQ_OK, "%s",
                        lmq_last_error());
                T_CHECK(memcmp(q, q1, (size_t)(rb * nrows)) == 0, "%s %s: 1 and 2 threads differ",
                        lmq_type_name(t), ti->name);
                free(q1);
                checked_threads = 1;
            }
            free(q);
            free(y);
        }
        const double e = acc_rel(&mine);
        if (st_bounds[k].has_rtn)
            printf("  %-8s %10.6f %10.6f %10.6f\n", lmq_type_name(t), e, st_bounds[k].bound,
                   acc_rel(&base));
        else
            printf("  %-8s %10.6f %10.6f\n", lmq_type_name(t), e, st_bounds[k].bound);
        T_CHECK(mine.ss > 0, "%s: no tensors", lmq_type_name(t));
        T_CHECK(e <= st_bounds[k].bound, "%s: relative RMSE %.6f above %.6f", lmq_type_name(t), e,
                st_bounds[k].bound);
        if (st_bounds[k].has_rtn) {
            const bool legacy = t == LMQ_TYPE_Q4_1 || t == LMQ_TYPE_Q5_0 || t == LMQ_TYPE_Q5_1;
            const double slack = legacy ? LEGACY_RTN_SLACK : 1.0;
            T_CHECK(e <= acc_rel(&base) * slack, "%s: %.6f worse than round-to-nearest %.6f (x%.3f)",
                    lmq_type_name(t), e, acc_rel(&base), slack);
        }
    }
    lmq_safetensors_close(st);
}

/* ======================================================================
 * 3. MXFP4: gpt-oss's expert weights
 * ====================================================================== */

/* Element i of row r (of `cols` elements) of one expert in the checkpoint's
 * MXFP4 form: blocks [rows][cols/32][16], scales [rows][cols/32]; byte j of
 * a block holds element 2j (low nibble) and 2j + 1 (high nibble), value
 * E2M1(code) * 2^(scale - 127) (HF's integrations/mxfp4). */
static float hf_mxfp4(const uint8_t *blocks, const uint8_t *scales, int64_t r, int64_t cols, int64_t i)
{
    const int64_t nb = cols / 32, b = i / 32, k = i % 32;
    const uint8_t byte = blocks[(r * nb + b) * 16 + k / 2];
    const int code = k % 2 ? byte >> 4 : byte & 15;
    const float v = k_e2m1[code & 7];
    return (code & 8 ? -v : v) * ldexpf(1.0f, (int)scales[r * nb + b] - 127);
}

static void test_gptoss_mxfp4(void)
{
    const char *gguf = t_shared("reference/zoo/gptoss-q8_0.gguf");
    const char *hf = t_shared("models/zoo/gptoss/model.safetensors");
    lmq_file *f = NULL;
    lmq_safetensors *st = NULL;
    T_CHECK(lmq_file_open(gguf, &f) == LMQ_OK, "%s", lmq_last_error());
    T_CHECK(lmq_safetensors_open(hf, &st) == LMQ_OK, "%s", lmq_last_error());
    if (!f || !st) goto out;
    static const char *const kinds[3] = {"gate", "up", "down"};
    int64_t n_tensors = 0, n_blocks = 0, n_canonical = 0, same_blocks = 0, lowered = 0, bad_values = 0;
    int changed_values = 0;
    for (int il = 0;; il++) {
        char name[96], hname[3][96];
        snprintf(name, sizeof name, "blk.%d.ffn_gate_exps.weight", il);
        if (!lmq_file_find_tensor(f, name)) break;
        for (int k = 0; k < 3; k++) {
            snprintf(name, sizeof name, "blk.%d.ffn_%s_exps.weight", il, kinds[k]);
            const lmq_tensor_info *ti = lmq_file_find_tensor(f, name);
            T_CHECK(ti && ti->type == LMQ_TYPE_MXFP4 && ti->n_dims == 3, "%s is an MXFP4 3-D tensor", name);
            if (!ti || ti->type != LMQ_TYPE_MXFP4 || ti->n_dims != 3) continue;
            const char *hk = k == 2 ? "down_proj" : "gate_up_proj";
            snprintf(hname[0], sizeof hname[0], "model.layers.%d.mlp.experts.%s_blocks", il, hk);
            snprintf(hname[1], sizeof hname[1], "model.layers.%d.mlp.experts.%s_scales", il, hk);
            const lmq_st_tensor *hb = lmq_safetensors_find(st, hname[0]), *hs = lmq_safetensors_find(st, hname[1]);
            const int64_t cols = ti->ne[0], rows = ti->ne[1], n_exp = ti->ne[2], n = cols * rows * n_exp;
            /* gate_up's rows interleave gate (even) and up (odd) */
            const int64_t hrows = k == 2 ? rows : 2 * rows;
            T_CHECK(hb && hs && hb->nbytes == (uint64_t)(n_exp * hrows * cols / 2) &&
                        hs->nbytes == (uint64_t)(n_exp * hrows * cols / 32),
                    "%s / _scales in the checkpoint fit %s", hname[0], name);
            if (!hb || !hs || hb->nbytes != (uint64_t)(n_exp * hrows * cols / 2)) continue;
            float *y = malloc(sizeof(float) * (size_t)n);
            uint8_t *q = malloc((size_t)ti->nbytes);
            T_CHECK(lmq_dequantize_row(LMQ_TYPE_MXFP4, ti->data, y, n) == LMQ_OK, "%s", lmq_last_error());
            for (int64_t e = 0; e < n_exp; e++)
                for (int64_t r = 0; r < rows; r++) {
                    const int64_t hr = e * hrows + (k == 2 ? r : 2 * r + k);
                    for (int64_t i = 0; i < cols; i++) {
                        const float v = hf_mxfp4(hb->data, hs->data, hr, cols, i);
                        bad_values += memcmp(&v, &y[(e * rows + r) * cols + i], 4) != 0 && v != y[(e * rows + r) * cols + i];
                    }
                }
            T_CHECK(lmq_quantize_rows(LMQ_TYPE_MXFP4, y, q, rows * n_exp, cols, NULL, 2) == LMQ_OK, "%s",
                    lmq_last_error());
            float *y2 = malloc(sizeof(float) * (size_t)n);
            T_CHECK(lmq_dequantize_row(LMQ_TYPE_MXFP4, q, y2, n) == LMQ_OK, "%s", lmq_last_error());
            changed_values += memcmp(y, y2, sizeof(float) * (size_t)n) != 0;
            for (int64_t b = 0; b < n / 32; b++) {
                const uint8_t *g = (const uint8_t *)ti->data + 17 * b;
                float amax = 0.0f; /* in units of the block's d */
                for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(y[32 * b + j]));
                amax /= ldexpf(1.0f, g[0] - 128);
                const bool canonical = amax == 8.0f || amax == 12.0f || (amax == 0.0f && g[0] == 0);
                n_blocks++;
                n_canonical += canonical;
                if (canonical)
                    same_blocks += memcmp(q + 17 * b, g, 17) == 0;
                else
                    lowered += q[17 * b] == g[0] - 1;
            }
            n_tensors++;
            free(y);
            free(y2);
            free(q);
        }
    }
    printf("gpt-oss experts: %lld MXFP4 tensors, %lld blocks; decoded values equal the checkpoint's: %s; "
           "re-quantized: values %s, bytes equal in %lld of the %lld blocks in ggml's form, "
           "the other %lld one exponent lower: %lld\n",
           (long long)n_tensors, (long long)n_blocks, bad_values ? "NO" : "all", changed_values ? "CHANGED" : "equal",
           (long long)same_blocks, (long long)n_canonical, (long long)(n_blocks - n_canonical), (long long)lowered);
    T_CHECK(n_tensors >= 12, "%lld MXFP4 expert tensors checked", (long long)n_tensors);
    T_CHECK(bad_values == 0, "%lld decoded values differ from the checkpoint's MXFP4 values", (long long)bad_values);
    T_CHECK(changed_values == 0, "%d tensors' values changed by the round trip", changed_values);
    T_CHECK(n_canonical > n_blocks / 2 && same_blocks == n_canonical,
            "blocks in ggml's form re-quantize to the same bytes: %lld of %lld", (long long)same_blocks,
            (long long)n_canonical);
    T_CHECK(lowered == n_blocks - n_canonical, "the other blocks come back one exponent lower: %lld of %lld",
            (long long)lowered, (long long)(n_blocks - n_canonical));
out:
    lmq_safetensors_close(st);
    lmq_file_close(f);
}

int main(void)
{
    t_require(t_shared("reference/zoo/gptoss-q8_0.gguf"));
    t_require(t_shared("models/zoo/gptoss/model.safetensors"));
    test_llamacpp();
    test_safetensors();
    test_gptoss_mxfp4();
    return t_finish();
}
