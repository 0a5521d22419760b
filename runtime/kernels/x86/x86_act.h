/* x86_act.h — 256-bit activation quantizers and attention helpers, shared
 * by the avx2 and avx512 builds.
 *
 * The quantizers produce the same bytes as the reference ones: the same
 * float operations in the same order per element (q8_0: x * (127 / amax),
 * round half to even; q8_1: x * (1 / d), roundf; q8_K: round half to even),
 * and the scale computed in scalar. */
#ifndef LMQ_X86_ACT_H
#define LMQ_X86_ACT_H

#include <math.h>

#include "kernels.h"
#include "x86_dots.h"
#include "x86_simd.h"

static inline float kx_amax32(const float *x)
{
    __m256 m = x86_abs_ps(_mm256_loadu_ps(x));
    m = _mm256_max_ps(m, x86_abs_ps(_mm256_loadu_ps(x + 8)));
    m = _mm256_max_ps(m, x86_abs_ps(_mm256_loadu_ps(x + 16)));
    m = _mm256_max_ps(m, x86_abs_ps(_mm256_loadu_ps(x + 24)));
    return x86_hmax_ps(m);
}

/* 32 floats times id, rounded half away from zero, to int8 (stored at q);
 * returns the sum of the quants. */
static inline int kx_q8_round32(const float *x, float id, int8_t *q)
{
    const __m256 vid = _mm256_set1_ps(id);
    __m256i v[4];
    for (int k = 0; k < 4; k++)
        v[k] = _mm256_cvttps_epi32(x86_round_away(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), vid)));
    const __m256i packed = x86_pack_i8(v[0], v[1], v[2], v[3]);
    _mm256_storeu_si256((__m256i *)q, packed);
    return x86_hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(v[0], v[1]), _mm256_add_epi32(v[2], v[3])));
}

/* lmq_quantize_q8_0_ref's form (ggml's x86 quantize_row_q8_0): x * (127 /
 * amax), rounded half to even, packed with saturation. */
static inline void kx_quantize_q8_0(const float *x, void *vy, int64_t n)
{
    lmq_block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / LMQ_QK8_0; i++, x += LMQ_QK8_0) {
        const float amax = kx_amax32(x);
        const float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
        y[i].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        const __m256 vid = _mm256_set1_ps(id);
        __m256i v[4];
        for (int k = 0; k < 4; k++)
            v[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        _mm256_storeu_si256((__m256i *)y[i].qs, x86_pack_i8(v[0], v[1], v[2], v[3]));
    }
}

static inline void kx_quantize_q8_1(const float *x, void *vy, int64_t n)
{
    lmq_block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / LMQ_QK8_1; i++, x += LMQ_QK8_1) {
        const float d = kx_amax32(x) / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        const int sum = kx_q8_round32(x, id, y[i].qs);
        y[i].s = _cvtss_sh((float)sum * d, _MM_FROUND_TO_NEAREST_INT);
    }
}

static inline void kx_quantize_q8_K(const float *x, void *vy, int64_t n)
{
    lmq_block_q8_K *y = vy;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++, x += LMQ_QK_K) {
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < LMQ_QK_K; j += 8) m = _mm256_max_ps(m, x86_abs_ps(_mm256_loadu_ps(x + j)));
        const float amax = x86_hmax_ps(m);
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        /* the signed value of the first element of largest magnitude */
        float max = 0;
        for (int j = 0; j < LMQ_QK_K; j++) {
            if (fabsf(x[j]) == amax) {
                max = x[j];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m256 vs = _mm256_set1_ps(iscale);
        const __m256i top = _mm256_set1_epi32(127);
        for (int j = 0; j < LMQ_QK_K; j += 32) {
            __m256i v[4];
            for (int k = 0; k < 4; k++) {
                const __m256 r = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * k), vs),
                                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                v[k] = _mm256_min_epi32(_mm256_cvttps_epi32(r), top);
            }
            _mm256_storeu_si256((__m256i *)(y[i].qs + j), x86_pack_i8(v[0], v[1], v[2], v[3]));
        }
        /* group sums of 16 int8: vpsadbw on the bytes offset by 128 */
        for (int g = 0; g < LMQ_QK_K / 16; g++) {
            const __m128i q = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(y[i].qs + 16 * g)), _mm_set1_epi8(-128));
            const __m128i sad = _mm_sad_epu8(q, _mm_setzero_si128());
            y[i].bsums[g] = (int16_t)(_mm_cvtsi128_si32(sad) + _mm_extract_epi16(sad, 4) - 16 * 128);
        }
        y[i].d = 1.0f / iscale;
    }
}

static inline void kx_f16_to_f32(const void *vx, float *y, int64_t n)
{
    const uint16_t *x = vx;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, kx_load_f16(x + i));
    for (; i < n; i++) y[i] = x86_h2f(x[i]);
}

/* q8_0 / q4_0 rows to floats for the BLAS path's weight tiles: the same
 * products as the reference ((float)q * d, one rounding), so the bytes are
 * identical to lmq_dequantize_row's. */
static inline void kx_store_i8x32_scaled(float *y, __m256i q, __m256 d)
{
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    _mm256_storeu_ps(y, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), d));
    _mm256_storeu_ps(y + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))), d));
    _mm256_storeu_ps(y + 16, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), d));
    _mm256_storeu_ps(y + 24, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))), d));
}

static inline void kx_q8_0_to_f32(const void *vx, float *y, int64_t n)
{
    const lmq_block_q8_0 *x = vx;
    for (int64_t i = 0; i < n / LMQ_QK8_0; i++, y += LMQ_QK8_0)
        kx_store_i8x32_scaled(y, _mm256_loadu_si256((const __m256i *)x[i].qs), _mm256_set1_ps(x86_h2f(x[i].d)));
}

static inline void kx_q4_0_to_f32(const void *vx, float *y, int64_t n)
{
    const lmq_block_q4_0 *x = vx;
    for (int64_t i = 0; i < n / LMQ_QK4_0; i++, y += LMQ_QK4_0)
        kx_store_i8x32_scaled(y, _mm256_sub_epi8(x86_nibbles32(x[i].qs), _mm256_set1_epi8(8)),
                              _mm256_set1_ps(x86_h2f(x[i].d)));
}

/* q4_1 / q5_1 rows: (float)q * d + m, a product and a sum rounded apart,
 * as the reference (built without contraction). */
static inline void kx_store_u8x32_affine(float *y, __m256i q, __m256 d, __m256 m)
{
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    const __m128i part[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int k = 0; k < 4; k++)
        _mm256_storeu_ps(y + 8 * k,
                         _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(part[k])), d), m));
}

static inline void kx_q4_1_to_f32(const void *vx, float *y, int64_t n)
{
    const lmq_block_q4_1 *x = vx;
    for (int64_t i = 0; i < n / LMQ_QK4_1; i++, y += LMQ_QK4_1)
        kx_store_u8x32_affine(y, x86_nibbles32(x[i].qs), _mm256_set1_ps(x86_h2f(x[i].d)),
                              _mm256_set1_ps(x86_h2f(x[i].m)));
}

static inline void kx_q5_1_to_f32(const void *vx, float *y, int64_t n)
{
    const lmq_block_q5_1 *x = vx;
    for (int64_t i = 0; i < n / LMQ_QK5_1; i++, y += LMQ_QK5_1) {
        const __m256i q = _mm256_or_si256(x86_nibbles32(x[i].qs),
                                          _mm256_and_si256(x86_bits32(x[i].qh), _mm256_set1_epi8(0x10)));
        kx_store_u8x32_affine(y, q, _mm256_set1_ps(x86_h2f(x[i].d)), _mm256_set1_ps(x86_h2f(x[i].m)));
    }
}

static inline void kx_mxfp4_to_f32(const void *vx, float *y, int64_t n)
{
    const lmq_block_mxfp4 *x = vx;
    const __m256i table = kx_mxfp4_table();
    for (int64_t i = 0; i < n / LMQ_QK_MXFP4; i++, y += LMQ_QK_MXFP4)
        kx_store_i8x32_scaled(y, kx_mxfp4_bytes(&x[i], table), _mm256_set1_ps(lmq_mxfp4_scale(x[i].e)));
}

static inline void kx_bf16_to_f32(const void *vx, float *y, int64_t n)
{
    const uint16_t *x = vx;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, kx_load_bf16(x + i));
    for (; i < n; i++) y[i] = lmq_bf16_to_fp32(x[i]);
}

static inline void kx_f8_to_f32(const void *vx, float *y, int64_t n, int e4m3)
{
    const lmq_block_f8 *x = vx;
    for (int64_t i = 0; i < n / LMQ_QK_F8; i++, y += LMQ_QK_F8) {
        const __m256 d = _mm256_set1_ps(lmq_e8m0_to_fp32(x[i].e) * (e4m3 ? 256.0f : 1.0f));
        for (int k = 0; k < 4; k++) _mm256_storeu_ps(y + 8 * k, _mm256_mul_ps(d, kx_load_f8(x[i].qs + 8 * k, e4m3)));
    }
}

static inline void kx_axpy_f32(float *y, float alpha, const float *x, int64_t n)
{
    const __m256 a = _mm256_set1_ps(alpha);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(a, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += alpha * x[i];
}

static inline void kx_axpy_f16(float *y, float alpha, const uint16_t *x, int64_t n)
{
    const __m256 a = _mm256_set1_ps(alpha);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(a, kx_load_f16(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += alpha * x86_h2f(x[i]);
}

static inline float kx_softmax(float *x, int64_t n)
{
    if (n <= 0) return 0;
    float mx = -INFINITY;
    int64_t i = 0;
    if (n >= 8) {
        __m256 m = _mm256_set1_ps(-INFINITY);
        for (; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
        mx = x86_hmax_ps(m);
    }
    for (; i < n; i++) mx = fmaxf(mx, x[i]);
    const __m256 vmx = _mm256_set1_ps(mx);
    __m256 vs = _mm256_setzero_ps();
    float sum = 0;
    for (i = 0; i + 8 <= n; i += 8) {
        const __m256 e = x86_exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmx));
        _mm256_storeu_ps(x + i, e);
        vs = _mm256_add_ps(vs, e);
    }
    for (; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    sum += x86_hsum_ps(vs);
    const __m256 inv = _mm256_set1_ps(1.0f / sum);
    for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
    for (; i < n; i++) x[i] *= 1.0f / sum;
    return sum;
}

#endif /* LMQ_X86_ACT_H */
