/* The float types and the 32-element block types: q4_0, q4_1, q5_0, q5_1,
 * q8_0, q8_1, iq4_nl; and the activation quantizers q8_0/q8_1/q8_K.
 *
 * Without importance weights q4_0..q5_1 and q8_* are ggml's round-to-nearest
 * reference quantizers (same float operations, so the bytes match
 * llama-quantize); with weights, q4_0/q5_0 use the symmetric weighted search
 * and q4_1/q5_1 the scale+min search, with ggml's weighting
 * w = imatrix * sqrt(sigma^2 + x^2), sigma^2 = mean of x^2 over the row. */
#include "quant_internal.h"

const int8_t lmq_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                     1,    13,   25,  38,  53,  69,  89,  113};

/* ======================================================================
 * Float types
 * ====================================================================== */

void lmq_q_f32_to_float(const void *x, float *y, int64_t n)
{
    memcpy(y, x, (size_t)n * sizeof(float));
}

void lmq_q_f32_from_float(const float *x, void *y, int64_t n, const float *qw)
{
    (void)qw;
    memcpy(y, x, (size_t)n * sizeof(float));
}

void lmq_q_f16_to_float(const void *x, float *y, int64_t n)
{
    lmq_fp16_to_fp32_row(x, y, n);
}

void lmq_q_f16_from_float(const float *x, void *y, int64_t n, const float *qw)
{
    (void)qw;
    lmq_fp32_to_fp16_row(x, y, n);
}

void lmq_q_bf16_to_float(const void *x, float *y, int64_t n)
{
    lmq_bf16_to_fp32_row(x, y, n);
}

void lmq_q_bf16_from_float(const float *x, void *y, int64_t n, const float *qw)
{
    (void)qw;
    lmq_fp32_to_bf16_row(x, y, n);
}

/* ======================================================================
 * Helpers
 * ====================================================================== */

/* Truncating conversion of ggml's `(int8_t)(v)` for v already offset to be
 * non-negative, clamped so that out-of-range values cannot overflow. */
static inline int trunc_clamp(float v, int hi)
{
    v = v < 0.0f ? 0.0f : v > (float)hi ? (float)hi : v;
    return (int)v;
}

/* Per-row sigma^2 (mean square) used by the importance weighting. */
static inline float row_sigma2(const float *x, int64_t n)
{
    return n > 0 ? lmq_sum_sq(x, n) / (float)n : 0.0f;
}

static inline void imatrix_weights(const float *x, const float *qw, float sigma2, float *w,
                                   int n)
{
    for (int j = 0; j < n; j++) w[j] = qw[j] * sqrtf(sigma2 + x[j] * x[j]);
}

static void pack_nibbles32(const uint8_t *L, uint8_t *qs)
{
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
}

static void pack_5bit32(const uint8_t *L, uint8_t *qs, uint8_t qh_out[4])
{
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((L[j] & 0x0F) | ((L[j + 16] & 0x0F) << 4));
        qh |= (uint32_t)((L[j] >> 4) & 1) << j;
        qh |= (uint32_t)((L[j + 16] >> 4) & 1) << (j + 16);
    }
    for (int k = 0; k < 4; k++) qh_out[k] = (uint8_t)(qh >> (8 * k));
}

static inline uint32_t load_qh(const uint8_t qh[4])
{
    return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 |
           (uint32_t)qh[3] << 24;
}

/* Largest-magnitude element (first one on ties), with its sign. */
static inline float signed_absmax(const float *x, int n, float *amax_out)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    *amax_out = amax;
    return max;
}

/* ======================================================================
 * q4_0: x = (q - 8) * d
 * ====================================================================== */

void lmq_q_q4_0_to_float(const void *vx, float *y, int64_t n)
{
    const lmq_block_q4_0 *x = vx;
    for (int64_t i = 0; i < n / LMQ_QK4_0; i++, y += LMQ_QK4_0) {
        const float d = lmq_fp16_to_fp32(x[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)((x[i].qs[j] & 0x0F) - 8) * d;
            y[j + 16] = (float)((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void lmq_q_q4_0_rtn_ref(const float *x, void *vy, int64_t n)
{
    lmq_block_q4_0 *y = vy;
    for (int64_t i = 0; i < n / LMQ_QK4_0; i++, x += LMQ_QK4_0) {
        float amax;
        const float max = signed_absmax(x, LMQ_QK4_0, &amax);
        const float id = lmq_store_scale(&y[i].d, max / -8.0f);
        for (int j = 0; j < 16; j++) {
            const float x0 = x[j] * id, x1 = x[j + 16] * id;
            const int q0 = trunc_clamp(x0 + 8.5f, 15), q1 = trunc_clamp(x1 + 8.5f, 15);
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void lmq_q_q4_0_from_float(const float *x, void *vy, int64_t n, const float *qw)
{
    lmq_block_q4_0 *y = vy;
    const int64_t nb = n / LMQ_QK4_0;
    if (!qw) {
        lmq_q_simd()->q4_0_rtn(x, vy, n);
        return;
    }
    const float sigma2 = row_sigma2(x, n);
    float w[LMQ_QK4_0];
    uint8_t L[LMQ_QK4_0];
    for (int64_t i = 0; i < nb; i++, x += LMQ_QK4_0, qw += LMQ_QK4_0) {
        imatrix_weights(x, qw, sigma2, w, LMQ_QK4_0);
        y[i].d = lmq_f16_sat(lmq_qx_search(LMQ_QK4_0, 8, x, L, w));
        pack_nibbles32(L, y[i].qs);
    }
}

/* ======================================================================
 * q4_1: x = q * d + m
 * ====================================================================== */

void lmq_q_q4_1_to_float(const void *vx, float *y, int64_t n)
{
    const lmq_block_q4_1 *x = vx;
    for (int64_t i = 0; i < n / LMQ_QK4_1; i++, y += LMQ_QK4_1) {
        const float d = lmq_fp16_to_fp32(x[i].d), m = lmq_fp16_to_fp32(x[i].m);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)(x[i].qs[j] & 0x0F) * d + m;
            y[j + 16] = (float)(x[i].qs[j] >> 4) * d + m;
        }
    }
}

static void minmax(const float *x, int n, float *mn, float *mx)
{
    float lo = x[0], hi = x[0];
    for (int j = 1; j < n; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo;
    *mx = hi;
}

void lmq_q_q4_1_from_float(const float *x, void *vy, int64_t n, const float *qw)
{
    lmq_block_q4_1 *y = vy;
    const int64_t nb = n / LMQ_QK4_1;
    if (!qw) {
        for (int64_t i = 0; i < nb; i++, x += LMQ_QK4_1) {
            float min, max;
            minmax(x, LMQ_QK4_1, &min, &max);
            const float id = lmq_store_scale(&y[i].d, (max - min) / 15.0f);
            y[i].m = lmq_f16_sat(min);
            for (int j = 0; j < 16; j++) {
                const float x0 = (x[j] - min) * id, x1 = (x[j + 16] - min) * id;
                const int q0 = trunc_clamp(x0 + 0.5f, 15), q1 = trunc_clamp(x1 + 0.5f, 15);
                y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
            }
        }
        return;
    }
    const float sigma2 = row_sigma2(x, n);
    float w[LMQ_QK4_1], neg_min;
    uint8_t L[LMQ_QK4_1];
    for (int64_t i = 0; i < nb; i++, x += LMQ_QK4_1, qw += LMQ_QK4_1) {
        imatrix_weights(x, qw, sigma2, w, LMQ_QK4_1);
        const float d = lmq_qkx_search(LMQ_QK4_1, 15, x, w, L, &neg_min, -0.9f, 0.05f, 36);
        y[i].d = lmq_f16_sat(d);
        y[i].m = lmq_f16_sat(-neg_min);
        pack_nibbles32(L, y[i].qs);
    }
}

/* ======================================================================
 * q5_0: x = (q - 16) * d, 5th bits in qh
 * ====================================================================== */

void lmq_q_q5_0_to_float(const void *vx, float *y, int64_t n)
{
    const lmq_block_q5_0 *x = vx;
    for (int64_t i = 0; i < n / LMQ_QK5_0; i++, y += LMQ_QK5_0) {
        const float d = lmq_fp16_to_fp32(x[i].d);
        const uint32_t qh = load_qh(x[i].qh);
        for (int j = 0; j < 16; j++) {
            const int h0 = (int)((qh >> j) & 1) << 4, h1 = (int)((qh >> (j + 16)) & 1) << 4;
            y[j] = (float)(((x[i].qs[j] & 0x0F) | h0) - 16) * d;
            y[j + 16] = (float)(((x[i].qs[j] >> 4) | h1) - 16) * d;
        }
    }
}

void lmq_q_q5_0_from_float(const float *x, void *vy, int64_t n, const float *qw)
{
    lmq_block_q5_0 *y = vy;
    const int64_t nb = n / LMQ_QK5_0;
    uint8_t L[LMQ_QK5_0];
    if (!qw) {
        for (int64_t i = 0; i < nb; i++, x += LMQ_QK5_0) {
            float amax;
            const float max = signed_absmax(x, LMQ_QK5_0, &amax);
            const float id = lmq_store_scale(&y[i].d, max / -16.0f);
            for (int j = 0; j < LMQ_QK5_0; j++) L[j] = (uint8_t)trunc_clamp(x[j] * id + 16.5f, 31);
            pack_5bit32(L, y[i].qs, y[i].qh);
        }
        return;
    }
    const float sigma2 = row_sigma2(x, n);
    float w[LMQ_QK5_0];
    for (int64_t i = 0; i < nb; i++, x += LMQ_QK5_0, qw += LMQ_QK5_0) {
        imatrix_weights(x, qw, sigma2, w, LMQ_QK5_0);
        y[i].d = lmq_f16_sat(lmq_qx_search(LMQ_QK5_0, 16, x, L, w));
        pack_5bit32(L, y[i].qs, y[i].qh);
    }
}

/* ======================================================================
 * q5_1: x = q * d + m
 * ====================================================================== */

void lmq_q_q5_1_to_float(const void *vx, float *y, int64_t n)
{
    const lmq_block_q5_1 *x = vx;
    for (int64_t i = 0; i < n / LMQ_QK5_1; i++, y += LMQ_QK5_1) {
        const float d = lmq_fp16_to_fp32(x[i].d), m = lmq_fp16_to_fp32(x[i].m);
        const uint32_t qh = load_qh(x[i].qh);
        for (int j = 0; j < 16; j++) {
            const int h0 = (int)((qh >> j) & 1) << 4, h1 = (int)((qh >> (j + 16)) & 1) << 4;
            y[j] = (float)((x[i].qs[j] & 0x0F) | h0) * d + m;
            y[j + 16] = (float)((x[i].qs[j] >> 4) | h1) * d + m;
        }
    }
}

void lmq_q_q5_1_from_float(const float *x, void *vy, int64_t n, const float *qw)
{
    lmq_block_q5_1 *y = vy;
    const int64_t nb = n / LMQ_QK5_1;
    uint8_t L[LMQ_QK5_1];
    if (!qw) {
        for (int64_t i = 0; i < nb; i++, x += LMQ_QK5_1) {
            float min, max;
            minmax(x, LMQ_QK5_1, &min, &max);
            const float id = lmq_store_scale(&y[i].d, (max - min) / 31.0f);
            y[i].m = lmq_f16_sat(min);
            for (int j = 0; j < LMQ_QK5_1; j++)
                L[j] = (uint8_t)trunc_clamp((x[j] - min) * id + 0.5f, 31);
            pack_5bit32(L, y[i].qs, y[i].qh);
        }
        return;
    }
    const float sigma2 = row_sigma2(x, n);
    float w[LMQ_QK5_1], neg_min;
    for (int64_t i = 0; i < nb; i++, x += LMQ_QK5_1, qw += LMQ_QK5_1) {
        imatrix_weights(x, qw, sigma2, w, LMQ_QK5_1);
        const float d = lmq_qkx_search(LMQ_QK5_1, 31, x, w, L, &neg_min, -0.9f, 0.05f, 36);
        y[i].d = lmq_f16_sat(d);
        y[i].m = lmq_f16_sat(-neg_min);
        pack_5bit32(L, y[i].qs, y[i].qh);
    }
}

/* ======================================================================
 * q8_0 / q8_1 / q8_K (also the activation quantizers)
 * ====================================================================== */

static inline int8_t round_q8(float v)
{
    v = roundf(v);
    return (int8_t)(v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v);
}

void lmq_quantize_row_q8_0_ref(const float *x, lmq_block_q8_0 *y, int64_t n)
{
    for (int64_t i = 0; i < n / LMQ_QK8_0; i++, x += LMQ_QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < LMQ_QK8_0; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float id = lmq_store_scale(&y[i].d, amax / 127.0f);
        for (int j = 0; j < LMQ_QK8_0; j++) y[i].qs[j] = round_q8(x[j] * id);
    }
}

void lmq_quantize_row_q8_1_ref(const float *x, lmq_block_q8_1 *y, int64_t n)
{
    for (int64_t i = 0; i < n / LMQ_QK8_1; i++, x += LMQ_QK8_1) {
        float amax = 0.0f;
        for (int j = 0; j < LMQ_QK8_1; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127.0f;
        const float id = lmq_store_scale(&y[i].d, d);
        int sum = 0;
        for (int j = 0; j < LMQ_QK8_1; j++) {
            y[i].qs[j] = round_q8(x[j] * id);
            sum += y[i].qs[j];
        }
        const float ds = fabsf(d) > 65504.0f ? lmq_fp16_to_fp32(y[i].d) : d;
        y[i].s = lmq_f16_sat((float)sum * ds);
    }
}

void lmq_quantize_row_q8_K_ref(const float *x, lmq_block_q8_K *y, int64_t n)
{
    for (int64_t i = 0; i < n / LMQ_QK_K; i++, x += LMQ_QK_K) {
        float amax;
        const float max = signed_absmax(x, LMQ_QK_K, &amax);
        memset(y[i].bsums, 0, sizeof y[i].bsums);
        const float iscale = amax != 0.0f ? -127.0f / max : 0.0f;
        if (amax == 0.0f || !isfinite(iscale)) {
            y[i].d = 0.0f;
            memset(y[i].qs, 0, sizeof y[i].qs);
            continue;
        }
        for (int j = 0; j < LMQ_QK_K; j++) {
            const int v = lmq_nearest_int(iscale * x[j]);
            y[i].qs[j] = (int8_t)(v > 127 ? 127 : v < -128 ? -128 : v);
        }
        for (int g = 0; g < LMQ_QK_K / 16; g++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) sum += y[i].qs[16 * g + j];
            y[i].bsums[g] = (int16_t)sum;
        }
        y[i].d = 1.0f / iscale;
    }
}

void lmq_q_q8_0_to_float(const void *vx, float *y, int64_t n)
{
    const lmq_block_q8_0 *x = vx;
    for (int64_t i = 0; i < n / LMQ_QK8_0; i++, y += LMQ_QK8_0) {
        const float d = lmq_fp16_to_fp32(x[i].d);
        for (int j = 0; j < LMQ_QK8_0; j++) y[j] = (float)x[i].qs[j] * d;
    }
}

void lmq_q_q8_0_from_float(const float *x, void *y, int64_t n, const float *qw)
{
    (void)qw; /* 8 bits: round-to-nearest is within noise of any search */
    lmq_quantize_row_q8_0_ref(x, y, n);
}

void lmq_q_q8_1_to_float(const void *vx, float *y, int64_t n)
{
    const lmq_block_q8_1 *x = vx;
    for (int64_t i = 0; i < n / LMQ_QK8_1; i++, y += LMQ_QK8_1) {
        const float d = lmq_fp16_to_fp32(x[i].d);
        for (int j = 0; j < LMQ_QK8_1; j++) y[j] = (float)x[i].qs[j] * d;
    }
}

void lmq_q_q8_1_from_float(const float *x, void *y, int64_t n, const float *qw)
{
    (void)qw;
    lmq_quantize_row_q8_1_ref(x, y, n);
}

void lmq_q_q8_K_to_float(const void *vx, float *y, int64_t n)
{
    const lmq_block_q8_K *x = vx;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++, y += LMQ_QK_K)
        for (int j = 0; j < LMQ_QK_K; j++) y[j] = x[i].d * (float)x[i].qs[j];
}

void lmq_q_q8_K_from_float(const float *x, void *y, int64_t n, const float *qw)
{
    (void)qw;
    lmq_quantize_row_q8_K_ref(x, y, n);
}

/* ======================================================================
 * iq4_nl: x = d * grid[q], one f16 scale per 32
 * ====================================================================== */

void lmq_q_iq4_nl_to_float(const void *vx, float *y, int64_t n)
{
    const lmq_block_iq4_nl *x = vx;
    for (int64_t i = 0; i < n / LMQ_QK4_NL; i++, y += LMQ_QK4_NL) {
        const float d = lmq_fp16_to_fp32(x[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)lmq_iq4nl_values[x[i].qs[j] & 0x0F];
            y[j + 16] = d * (float)lmq_iq4nl_values[x[i].qs[j] >> 4];
        }
    }
}

void lmq_q_iq4_nl_from_float(const float *x, void *vy, int64_t n, const float *qw)
{
    lmq_block_iq4_nl *y = vy;
    float w[LMQ_QK4_NL];
    uint8_t L[LMQ_QK4_NL];
    for (int64_t i = 0; i < n / LMQ_QK4_NL; i++, x += LMQ_QK4_NL) {
        /* ggml's weighting (sigma^2 over the block), unit importance by default */
        const float sigma2 = 2.0f * lmq_sum_sq(x, LMQ_QK4_NL) / LMQ_QK4_NL;
        for (int j = 0; j < LMQ_QK4_NL; j++)
            w[j] = (qw ? qw[i * LMQ_QK4_NL + j] : 1.0f) * sqrtf(sigma2 + x[j] * x[j]);
        const float d = lmq_iq4_search(LMQ_QK4_NL, x, w, L);
        y[i].d = lmq_f16_sat(d);
        /* re-pick the quants for the scale actually stored */
        const float id = lmq_inv(lmq_fp16_to_fp32(y[i].d));
        for (int j = 0; j < LMQ_QK4_NL; j++)
            L[j] = (uint8_t)lmq_iq4_best_index(lmq_iq4nl_values, id * x[j]);
        pack_nibbles32(L, y[i].qs);
    }
}

/* ======================================================================
 * Grids of stored blocks (error feedback, quantize/gptq.c)
 * ====================================================================== */

static void grid_affine(lmq_qgrid *g, int n, int nq, int voff, float a, float b);

void lmq_q_q4_0_grid(const void *vx, lmq_qgrid *g)
{
    grid_affine(g, LMQ_QK4_0, 16, -8, lmq_fp16_to_fp32(((const lmq_block_q4_0 *)vx)->d), 0.0f);
}

void lmq_q_q4_0_codes(void *vy, const uint8_t *L)
{
    pack_nibbles32(L, ((lmq_block_q4_0 *)vy)->qs);
}

void lmq_q_q8_0_grid(const void *vx, lmq_qgrid *g)
{
    /* codes 0..254 for the int8 values -127..127 the quantizer uses */
    grid_affine(g, LMQ_QK8_0, 255, -127, lmq_fp16_to_fp32(((const lmq_block_q8_0 *)vx)->d), 0.0f);
}

void lmq_q_q8_0_codes(void *vy, const uint8_t *L)
{
    lmq_block_q8_0 *y = vy;
    for (int l = 0; l < LMQ_QK8_0; l++) y->qs[l] = (int8_t)((int)L[l] - 127);
}

static void grid_affine(lmq_qgrid *g, int n, int nq, int voff, float a, float b)
{
    *g = (lmq_qgrid){.n = n, .nq = nq, .voff = voff};
    for (int l = 0; l < n; l++) {
        g->a[l] = a;
        g->b[l] = b;
    }
}

void lmq_q_q4_1_grid(const void *vx, lmq_qgrid *g)
{
    const lmq_block_q4_1 *x = vx;
    grid_affine(g, LMQ_QK4_1, 16, 0, lmq_fp16_to_fp32(x->d), lmq_fp16_to_fp32(x->m));
}

void lmq_q_q4_1_codes(void *vy, const uint8_t *L)
{
    pack_nibbles32(L, ((lmq_block_q4_1 *)vy)->qs);
}

void lmq_q_q5_0_grid(const void *vx, lmq_qgrid *g)
{
    grid_affine(g, LMQ_QK5_0, 32, -16, lmq_fp16_to_fp32(((const lmq_block_q5_0 *)vx)->d), 0.0f);
}

void lmq_q_q5_0_codes(void *vy, const uint8_t *L)
{
    lmq_block_q5_0 *y = vy;
    pack_5bit32(L, y->qs, y->qh);
}

void lmq_q_q5_1_grid(const void *vx, lmq_qgrid *g)
{
    const lmq_block_q5_1 *x = vx;
    grid_affine(g, LMQ_QK5_1, 32, 0, lmq_fp16_to_fp32(x->d), lmq_fp16_to_fp32(x->m));
}

void lmq_q_q5_1_codes(void *vy, const uint8_t *L)
{
    lmq_block_q5_1 *y = vy;
    pack_5bit32(L, y->qs, y->qh);
}

void lmq_q_iq4_nl_grid(const void *vx, lmq_qgrid *g)
{
    grid_affine(g, LMQ_QK4_NL, 16, 0, lmq_fp16_to_fp32(((const lmq_block_iq4_nl *)vx)->d), 0.0f);
    g->table = lmq_iq4nl_values;
}

void lmq_q_iq4_nl_codes(void *vy, const uint8_t *L)
{
    pack_nibbles32(L, ((lmq_block_iq4_nl *)vy)->qs);
}
