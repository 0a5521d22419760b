/* Scalar reference kernels: the oracle every SIMD variant is tested against.
 *
 * Quantized dot products follow ggml's integer scheme exactly: within a block
 * the products of integer quants are summed in int32 (exact), then scaled by
 * the block's float scales; blocks are summed in float in row order. The
 * float-weight dots (f32/f16/bf16/fp8) accumulate in double. */
#include <math.h>
#include <string.h>

#include "kernels.h"
#include "lmq_format.h"

static inline float h2f(uint16_t h) { return lmq_fp16_to_fp32(h); }

/* ================================================================
 * Activation quantizers: the quantize module's references
 * ================================================================ */

/* q8_0 activations as ggml's x86 code quantizes them (its quantize_row_q8_0
 * for AVX): scale d = amax / 127 stored in f16, quants x * (127 / amax)
 * rounded half to even. ggml's scalar reference (the weight quantizer,
 * lmq_quantize_row_q8_0_ref) multiplies by 1 / d and rounds half away from
 * zero; on these models the x86 form matches llama.cpp's perplexities more
 * closely (docs/MODELS.md), and x86 is where llama.cpp is compared. */
void lmq_quantize_q8_0_ref(const float *x, void *vy, int64_t n)
{
    lmq_block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / LMQ_QK8_0; i++, x += LMQ_QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < LMQ_QK8_0; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        y[i].d = lmq_fp32_to_fp16(amax / 127.0f);
        for (int j = 0; j < LMQ_QK8_0; j++) {
            float v = nearbyintf(x[j] * id); /* the default rounding mode: half to even */
            y[i].qs[j] = (int8_t)(v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v);
        }
    }
}

void lmq_quantize_q8_1_ref(const float *x, void *y, int64_t n)
{
    lmq_quantize_row_q8_1_ref(x, y, n);
}

void lmq_quantize_q8_K_ref(const float *x, void *y, int64_t n)
{
    lmq_quantize_row_q8_K_ref(x, y, n);
}

/* ================================================================
 * Float weights (f32 activations)
 * ================================================================ */

void lmq_vec_dot_f32_ref(int64_t n, float *s, const void *vw, const void *va)
{
    const float *w = vw, *a = va;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (double)w[i] * a[i];
    *s = (float)sum;
}

/* f16 weights take f16 activations and bf16 weights bf16 ones (as
 * llama.cpp and a Hugging Face model in that dtype do): half the bytes of
 * f32 activations, so that a wide row's activations stay in L1 beside the
 * weights streaming past (docs/PERF.md). */
void lmq_vec_dot_f16_ref(int64_t n, float *s, const void *vw, const void *va)
{
    const uint16_t *w = vw, *a = va;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (double)h2f(w[i]) * h2f(a[i]);
    *s = (float)sum;
}

void lmq_vec_dot_bf16_ref(int64_t n, float *s, const void *vw, const void *va)
{
    const uint16_t *w = vw, *a = va;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (double)lmq_bf16_to_fp32(w[i]) * lmq_bf16_to_fp32(a[i]);
    *s = (float)sum;
}

/* Saturating: an activation beyond f16's range (Gemma's can be) becomes
 * +-65504 rather than an infinity that would turn the dot into NaN. */
static void from_float_f16(const float *x, void *y, int64_t n)
{
    uint16_t *h = y;
    for (int64_t i = 0; i < n; i++) h[i] = lmq_fp32_to_fp16(x[i] > 65504.0f ? 65504.0f : x[i] < -65504.0f ? -65504.0f : x[i]);
}

static void from_float_bf16(const float *x, void *y, int64_t n)
{
    lmq_fp32_to_bf16_row(x, y, n);
}

static void dot_f8(int64_t n, float *s, const void *vw, const float *a, bool e4m3)
{
    const lmq_block_f8 *w = vw;
    double sum = 0;
    for (int64_t i = 0; i < n / LMQ_QK_F8; i++, a += LMQ_QK_F8) {
        double bs = 0;
        for (int j = 0; j < LMQ_QK_F8; j++) {
            uint8_t c = w[i].qs[j];
            bs += (double)(e4m3 ? lmq_fp8_e4m3_table[c] : lmq_fp8_e5m2_table[c]) * a[j];
        }
        sum += bs * lmq_e8m0_to_fp32(w[i].e);
    }
    *s = (float)sum;
}

void lmq_vec_dot_f8_e4m3_ref(int64_t n, float *s, const void *w, const void *a)
{
    dot_f8(n, s, w, a, true);
}

void lmq_vec_dot_f8_e5m2_ref(int64_t n, float *s, const void *w, const void *a)
{
    dot_f8(n, s, w, a, false);
}

/* ================================================================
 * 32-element blocks against q8_0 / q8_1
 * ================================================================ */

void lmq_vec_dot_q4_0_ref(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q4_0 *x = vw;
    const lmq_block_q8_0 *y = va;
    float sumf = 0;
    for (int64_t i = 0; i < n / LMQ_QK4_0; i++) {
        int sumi = 0;
        for (int j = 0; j < LMQ_QK4_0 / 2; j++) {
            sumi += ((x[i].qs[j] & 0xF) - 8) * y[i].qs[j];
            sumi += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + 16];
        }
        sumf += (float)sumi * (h2f(x[i].d) * h2f(y[i].d));
    }
    *s = sumf;
}

void lmq_vec_dot_q4_1_ref(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q4_1 *x = vw;
    const lmq_block_q8_1 *y = va;
    float sumf = 0;
    for (int64_t i = 0; i < n / LMQ_QK4_1; i++) {
        int sumi = 0;
        for (int j = 0; j < LMQ_QK4_1 / 2; j++) {
            sumi += (x[i].qs[j] & 0xF) * y[i].qs[j];
            sumi += (x[i].qs[j] >> 4) * y[i].qs[j + 16];
        }
        sumf += (h2f(x[i].d) * h2f(y[i].d)) * (float)sumi + h2f(x[i].m) * h2f(y[i].s);
    }
    *s = sumf;
}

static inline uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void lmq_vec_dot_q5_0_ref(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q5_0 *x = vw;
    const lmq_block_q8_0 *y = va;
    float sumf = 0;
    for (int64_t i = 0; i < n / LMQ_QK5_0; i++) {
        const uint32_t qh = le32(x[i].qh);
        int sumi = 0;
        for (int j = 0; j < LMQ_QK5_0 / 2; j++) {
            int h0 = (int)((qh >> j) & 1) << 4, h1 = (int)((qh >> (j + 16)) & 1) << 4;
            sumi += (((x[i].qs[j] & 0xF) | h0) - 16) * y[i].qs[j];
            sumi += (((x[i].qs[j] >> 4) | h1) - 16) * y[i].qs[j + 16];
        }
        sumf += (float)sumi * (h2f(x[i].d) * h2f(y[i].d));
    }
    *s = sumf;
}

void lmq_vec_dot_q5_1_ref(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q5_1 *x = vw;
    const lmq_block_q8_1 *y = va;
    float sumf = 0;
    for (int64_t i = 0; i < n / LMQ_QK5_1; i++) {
        const uint32_t qh = le32(x[i].qh);
        int sumi = 0;
        for (int j = 0; j < LMQ_QK5_1 / 2; j++) {
            int h0 = (int)((qh >> j) & 1) << 4, h1 = (int)((qh >> (j + 16)) & 1) << 4;
            sumi += ((x[i].qs[j] & 0xF) | h0) * y[i].qs[j];
            sumi += ((x[i].qs[j] >> 4) | h1) * y[i].qs[j + 16];
        }
        sumf += (h2f(x[i].d) * h2f(y[i].d)) * (float)sumi + h2f(x[i].m) * h2f(y[i].s);
    }
    *s = sumf;
}

void lmq_vec_dot_q8_0_ref(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q8_0 *x = vw;
    const lmq_block_q8_0 *y = va;
    float sumf = 0;
    for (int64_t i = 0; i < n / LMQ_QK8_0; i++) {
        int sumi = 0;
        for (int j = 0; j < LMQ_QK8_0; j++) sumi += x[i].qs[j] * y[i].qs[j];
        sumf += (float)sumi * (h2f(x[i].d) * h2f(y[i].d));
    }
    *s = sumf;
}

void lmq_vec_dot_iq4_nl_ref(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_iq4_nl *x = vw;
    const lmq_block_q8_0 *y = va;
    float sumf = 0;
    for (int64_t i = 0; i < n / LMQ_QK4_NL; i++) {
        int sumi = 0;
        for (int j = 0; j < LMQ_QK4_NL / 2; j++) {
            sumi += lmq_iq4nl_values[x[i].qs[j] & 0xF] * y[i].qs[j];
            sumi += lmq_iq4nl_values[x[i].qs[j] >> 4] * y[i].qs[j + 16];
        }
        sumf += (float)sumi * (h2f(x[i].d) * h2f(y[i].d));
    }
    *s = sumf;
}

/* MXFP4 (ggml's ggml_vec_dot_mxfp4_q8_0): the codes' doubled E2M1 values
 * times the q8 quants, summed exactly, scaled by d_w = 2^(e - 128) times
 * the activation block's d. */
void lmq_vec_dot_mxfp4_ref(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_mxfp4 *x = vw;
    const lmq_block_q8_0 *y = va;
    float sumf = 0;
    for (int64_t i = 0; i < n / LMQ_QK_MXFP4; i++) {
        int sumi = 0;
        for (int j = 0; j < LMQ_QK_MXFP4 / 2; j++) {
            sumi += lmq_mxfp4_values[x[i].qs[j] & 0xF] * y[i].qs[j];
            sumi += lmq_mxfp4_values[x[i].qs[j] >> 4] * y[i].qs[j + 16];
        }
        sumf += (float)sumi * (lmq_mxfp4_scale(x[i].e) * h2f(y[i].d));
    }
    *s = sumf;
}

/* ================================================================
 * K-quants against q8_K
 * ================================================================ */

void lmq_vec_dot_q2_K_ref(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q2_K *x = vw;
    const lmq_block_q8_K *y = va;
    float sumf = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        const uint8_t *q2 = x[i].qs, *sc = x[i].scales;
        const int8_t *q8 = y[i].qs;
        int summs = 0, isum = 0, is = 0;
        for (int g = 0; g < 16; g++) summs += y[i].bsums[g] * (sc[g] >> 4);
        for (int k = 0; k < LMQ_QK_K / 128; k++, q2 += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; half++, q8 += 16) {
                    int sub = 0;
                    for (int l = 0; l < 16; l++) sub += q8[l] * ((q2[l + 16 * half] >> shift) & 3);
                    isum += (sc[is++] & 0xF) * sub;
                }
            }
        }
        const float dall = y[i].d * h2f(x[i].d), dmin = y[i].d * h2f(x[i].dmin);
        sumf += dall * (float)isum - dmin * (float)summs;
    }
    *s = sumf;
}

void lmq_vec_dot_q3_K_ref(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q3_K *x = vw;
    const lmq_block_q8_K *y = va;
    float sumf = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        int8_t sc[16];
        lmq_q3k_scales(x[i].scales, sc);
        const uint8_t *q = x[i].qs, *hm = x[i].hmask;
        const int8_t *q8 = y[i].qs;
        int isum = 0, is = 0;
        uint8_t m = 1;
        for (int k = 0; k < LMQ_QK_K / 128; k++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m = (uint8_t)(m << 1)) {
                for (int half = 0; half < 2; half++, q8 += 16) {
                    int sub = 0;
                    for (int l = 16 * half; l < 16 * half + 16; l++) {
                        int v = ((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4);
                        sub += q8[l - 16 * half] * v;
                    }
                    isum += sc[is++] * sub;
                }
            }
        }
        sumf += (h2f(x[i].d) * y[i].d) * (float)isum;
    }
    *s = sumf;
}

void lmq_vec_dot_q4_K_ref(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q4_K *x = vw;
    const lmq_block_q8_K *y = va;
    float sumf = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        const uint8_t *q4 = x[i].qs;
        const int8_t *q8 = y[i].qs;
        int isum = 0, summs = 0;
        for (int j = 0; j < LMQ_QK_K / 64; j++, q4 += 32) {
            uint8_t sc0, m0, sc1, m1;
            lmq_k4_scale_min(2 * j, x[i].scales, &sc0, &m0);
            lmq_k4_scale_min(2 * j + 1, x[i].scales, &sc1, &m1);
            int lo = 0, hi = 0;
            for (int l = 0; l < 32; l++) {
                lo += (q4[l] & 0xF) * q8[l];
                hi += (q4[l] >> 4) * q8[l + 32];
            }
            q8 += 64;
            isum += sc0 * lo + sc1 * hi;
            summs += m0 * (y[i].bsums[4 * j] + y[i].bsums[4 * j + 1]) +
                     m1 * (y[i].bsums[4 * j + 2] + y[i].bsums[4 * j + 3]);
        }
        sumf += y[i].d * h2f(x[i].d) * (float)isum - y[i].d * h2f(x[i].dmin) * (float)summs;
    }
    *s = sumf;
}

void lmq_vec_dot_q5_K_ref(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q5_K *x = vw;
    const lmq_block_q8_K *y = va;
    float sumf = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        const uint8_t *q5 = x[i].qs, *qh = x[i].qh;
        const int8_t *q8 = y[i].qs;
        int isum = 0, summs = 0;
        for (int j = 0; j < LMQ_QK_K / 64; j++, q5 += 32) {
            uint8_t sc0, m0, sc1, m1;
            lmq_k4_scale_min(2 * j, x[i].scales, &sc0, &m0);
            lmq_k4_scale_min(2 * j + 1, x[i].scales, &sc1, &m1);
            int lo = 0, hi = 0;
            for (int l = 0; l < 32; l++) {
                int h0 = ((qh[l] >> (2 * j)) & 1) << 4, h1 = ((qh[l] >> (2 * j + 1)) & 1) << 4;
                lo += ((q5[l] & 0xF) | h0) * q8[l];
                hi += ((q5[l] >> 4) | h1) * q8[l + 32];
            }
            q8 += 64;
            isum += sc0 * lo + sc1 * hi;
            summs += m0 * (y[i].bsums[4 * j] + y[i].bsums[4 * j + 1]) +
                     m1 * (y[i].bsums[4 * j + 2] + y[i].bsums[4 * j + 3]);
        }
        sumf += y[i].d * h2f(x[i].d) * (float)isum - y[i].d * h2f(x[i].dmin) * (float)summs;
    }
    *s = sumf;
}

void lmq_vec_dot_q6_K_ref(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q6_K *x = vw;
    const lmq_block_q8_K *y = va;
    float sumf = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *sc = x[i].scales, *q8 = y[i].qs;
        int isum = 0;
        for (int k = 0; k < LMQ_QK_K / 128; k++, ql += 64, qh += 32, sc += 8, q8 += 128) {
            int sub[8] = {0};
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                int v1 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32;
                int v2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                int v3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                int v4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                sub[is + 0] += v1 * q8[l];
                sub[is + 2] += v2 * q8[l + 32];
                sub[is + 4] += v3 * q8[l + 64];
                sub[is + 6] += v4 * q8[l + 96];
            }
            for (int g = 0; g < 8; g++) isum += sc[g] * sub[g];
        }
        sumf += (h2f(x[i].d) * y[i].d) * (float)isum;
    }
    *s = sumf;
}

void lmq_vec_dot_iq4_xs_ref(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_iq4_xs *x = vw;
    const lmq_block_q8_K *y = va;
    float sumf = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        const uint8_t *qs = x[i].qs;
        const int8_t *q8 = y[i].qs;
        int isum = 0;
        for (int ib = 0; ib < LMQ_QK_K / 32; ib++, qs += 16, q8 += 32) {
            int ls = ((x[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) |
                     (((x[i].scales_h >> (2 * ib)) & 3) << 4);
            int sub = 0;
            for (int j = 0; j < 16; j++) {
                sub += lmq_iq4nl_values[qs[j] & 0xF] * q8[j];
                sub += lmq_iq4nl_values[qs[j] >> 4] * q8[j + 16];
            }
            isum += (ls - 32) * sub;
        }
        sumf += (h2f(x[i].d) * y[i].d) * (float)isum;
    }
    *s = sumf;
}

/* ================================================================
 * Attention helpers
 * ================================================================ */

float lmq_dot_f32_ref(const float *a, const float *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return (float)s;
}

float lmq_dot_f16_f32_ref(const uint16_t *a, const float *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)h2f(a[i]) * b[i];
    return (float)s;
}

void lmq_axpy_f32_ref(float *y, float alpha, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] += alpha * x[i];
}

void lmq_axpy_f16_ref(float *y, float alpha, const uint16_t *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] += alpha * h2f(x[i]);
}

float lmq_softmax_ref(float *x, int64_t n)
{
    if (n <= 0) return 0;
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = fmaxf(mx, x[i]);
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
    return (float)sum;
}

/* ================================================================
 * The codebook and ternary types: one dot over lmq_iq_unpack
 * ================================================================ */

/* Integer dot of one unpacked super-block with a q8_K block: sum over
 * sub-blocks of sc * sum(q * a). */
static int32_t iq_block_dot(const int8_t *q, const int8_t *sc, int sub, const int8_t *a)
{
    int32_t tot = 0;
    for (int j = 0; j < LMQ_QK_K / sub; j++) {
        int32_t s = 0;
        for (int k = 0; k < sub; k++) s += (int32_t)q[sub * j + k] * a[sub * j + k];
        tot += s * sc[j];
    }
    return tot;
}

void lmq_vec_dot_iq_ref(lmq_type t, int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q8_K *y = va;
    const int64_t bytes = lmq_type_get(t)->type_size;
    const int sub = lmq_iq_sub(t);
    int8_t q[LMQ_QK_K], sc[16];
    float d, sum = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        lmq_iq_unpack(t, (const uint8_t *)vw + i * bytes, q, sc, &d);
        sum += d * y[i].d * (float)iq_block_dot(q, sc, sub, y[i].qs);
    }
    *s = sum;
}

#define IQ_REF(name, T)                                                                                              \
    void lmq_vec_dot_##name##_ref(int64_t n, float *s, const void *w, const void *a)                                 \
    {                                                                                                                \
        lmq_vec_dot_iq_ref(LMQ_TYPE_##T, n, s, w, a);                                                                \
    }
IQ_REF(iq2_xxs, IQ2_XXS)
IQ_REF(iq2_xs, IQ2_XS)
IQ_REF(iq2_s, IQ2_S)
IQ_REF(iq3_xxs, IQ3_XXS)
IQ_REF(iq3_s, IQ3_S)
IQ_REF(iq1_s, IQ1_S)
IQ_REF(iq1_m, IQ1_M)
IQ_REF(tq1_0, TQ1_0)
IQ_REF(tq2_0, TQ2_0)
#undef IQ_REF

/* ================================================================
 * The scalar table
 * ================================================================ */

void lmq_kernels_fill_ref(lmq_kernel_table *t)
{
    memset(t, 0, sizeof *t);
    t->isa = LMQ_ISA_SCALAR;
    t->vec_dot[LMQ_TYPE_F32] = lmq_vec_dot_f32_ref;
    t->vec_dot[LMQ_TYPE_F16] = lmq_vec_dot_f16_ref;
    t->vec_dot[LMQ_TYPE_BF16] = lmq_vec_dot_bf16_ref;
    t->vec_dot[LMQ_TYPE_Q4_0] = lmq_vec_dot_q4_0_ref;
    t->vec_dot[LMQ_TYPE_Q4_1] = lmq_vec_dot_q4_1_ref;
    t->vec_dot[LMQ_TYPE_Q5_0] = lmq_vec_dot_q5_0_ref;
    t->vec_dot[LMQ_TYPE_Q5_1] = lmq_vec_dot_q5_1_ref;
    t->vec_dot[LMQ_TYPE_Q8_0] = lmq_vec_dot_q8_0_ref;
    t->vec_dot[LMQ_TYPE_Q2_K] = lmq_vec_dot_q2_K_ref;
    t->vec_dot[LMQ_TYPE_Q3_K] = lmq_vec_dot_q3_K_ref;
    t->vec_dot[LMQ_TYPE_Q4_K] = lmq_vec_dot_q4_K_ref;
    t->vec_dot[LMQ_TYPE_Q5_K] = lmq_vec_dot_q5_K_ref;
    t->vec_dot[LMQ_TYPE_Q6_K] = lmq_vec_dot_q6_K_ref;
    t->vec_dot[LMQ_TYPE_IQ4_NL] = lmq_vec_dot_iq4_nl_ref;
    t->vec_dot[LMQ_TYPE_IQ4_XS] = lmq_vec_dot_iq4_xs_ref;
    t->vec_dot[LMQ_TYPE_F8_E4M3] = lmq_vec_dot_f8_e4m3_ref;
    t->vec_dot[LMQ_TYPE_F8_E5M2] = lmq_vec_dot_f8_e5m2_ref;
    t->vec_dot[LMQ_TYPE_MXFP4] = lmq_vec_dot_mxfp4_ref;
    t->vec_dot[LMQ_TYPE_IQ2_XXS] = lmq_vec_dot_iq2_xxs_ref;
    t->vec_dot[LMQ_TYPE_IQ2_XS] = lmq_vec_dot_iq2_xs_ref;
    t->vec_dot[LMQ_TYPE_IQ2_S] = lmq_vec_dot_iq2_s_ref;
    t->vec_dot[LMQ_TYPE_IQ3_XXS] = lmq_vec_dot_iq3_xxs_ref;
    t->vec_dot[LMQ_TYPE_IQ3_S] = lmq_vec_dot_iq3_s_ref;
    t->vec_dot[LMQ_TYPE_IQ1_S] = lmq_vec_dot_iq1_s_ref;
    t->vec_dot[LMQ_TYPE_IQ1_M] = lmq_vec_dot_iq1_m_ref;
    t->vec_dot[LMQ_TYPE_TQ1_0] = lmq_vec_dot_tq1_0_ref;
    t->vec_dot[LMQ_TYPE_TQ2_0] = lmq_vec_dot_tq2_0_ref;
    for (int i = 0; i < LMQ_TYPE_COUNT; i++) t->to_float[i] = lmq_dequantize_fn((lmq_type)i);
    t->from_float[LMQ_TYPE_Q8_0] = lmq_quantize_q8_0_ref;
    t->from_float[LMQ_TYPE_Q8_1] = lmq_quantize_q8_1_ref;
    t->from_float[LMQ_TYPE_Q8_K] = lmq_quantize_q8_K_ref;
    t->from_float[LMQ_TYPE_F16] = from_float_f16; /* every table: the conversion is not where time goes */
    t->from_float[LMQ_TYPE_BF16] = from_float_bf16;
    t->dot_f32 = lmq_dot_f32_ref;
    t->dot_f16_f32 = lmq_dot_f16_f32_ref;
    t->axpy_f32 = lmq_axpy_f32_ref;
    t->axpy_f16 = lmq_axpy_f16_ref;
    t->softmax = lmq_softmax_ref;
    lmq_panel_fill_ref(t);
}
