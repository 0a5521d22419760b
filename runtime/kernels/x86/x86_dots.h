/* x86_dots.h — the 256-bit dot-product kernel bodies, as static inline
 * functions shared by quants_avx2.c and quants_avx512.c (see x86_simd.h for
 * what differs between the two builds).
 *
 * Integer parts are exact, as in the reference kernels; only the order of
 * the float sums differs (8 lanes, reduced at the end). The ggml identities
 * used to avoid signed x signed products:
 *   sum (q - 8) y  = sum |q - 8| * sign(y, q - 8)          (q4_0, q8_0 ...)
 *   sum (u - o) y  = sum u y - o * sum y, with sum y from the q8_K bsums
 *                    (q3_K: u = q + 4, o = 4; q6_K: u = q + 32, o = 32). */
#ifndef LMQ_X86_DOTS_H
#define LMQ_X86_DOTS_H

#include "kernels.h"
#include "x86_simd.h"

/* ================================================================
 * Float weights
 * ================================================================ */

static inline float kx_dot_f32(const float *a, const float *b, int64_t n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float s = x86_hsum_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

static inline __m256 kx_load_f16(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

static inline __m256 kx_load_bf16(const uint16_t *p)
{
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

/* The 16-bit weight rows' dots: weights f16 or bf16 (WB), activations
 * f32, f16 or bf16 (AK: 0, 1, 2): four 8-lane sums over 32 at a time, one
 * over the last multiples of 8, the lanes reduced, then the tail. */
static inline __attribute__((always_inline)) __m256 kx_load_act(const int AK, const void *b, int64_t i)
{
    return AK == 0 ? _mm256_loadu_ps((const float *)b + i)
           : AK == 1 ? kx_load_f16((const uint16_t *)b + i)
                     : kx_load_bf16((const uint16_t *)b + i);
}

static inline __attribute__((always_inline)) float kx_dot16(const bool WB, const int AK, const uint16_t *a,
                                                            const void *b, int64_t n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
#define KX_W(j) (WB ? kx_load_bf16(a + (j)) : kx_load_f16(a + (j)))
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(KX_W(i), kx_load_act(AK, b, i), s0);
        s1 = _mm256_fmadd_ps(KX_W(i + 8), kx_load_act(AK, b, i + 8), s1);
        s2 = _mm256_fmadd_ps(KX_W(i + 16), kx_load_act(AK, b, i + 16), s2);
        s3 = _mm256_fmadd_ps(KX_W(i + 24), kx_load_act(AK, b, i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(KX_W(i), kx_load_act(AK, b, i), s0);
#undef KX_W
    float s = x86_hsum_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; i++) {
        const float w = WB ? lmq_bf16_to_fp32(a[i]) : x86_h2f(a[i]);
        const float x = AK == 0   ? ((const float *)b)[i]
                        : AK == 1 ? x86_h2f(((const uint16_t *)b)[i])
                                  : lmq_bf16_to_fp32(((const uint16_t *)b)[i]);
        s += w * x;
    }
    return s;
}

/* f16 weights against f32 (the attention's f16 keys) or f16 activations,
 * bf16 weights against bf16 activations (matmul.c's ktraits). */
static inline float kx_dot_f16_f32(const uint16_t *a, const float *b, int64_t n)
{
    return kx_dot16(false, 0, a, b, n);
}

static inline float kx_dot_f16_f16(const uint16_t *a, const uint16_t *b, int64_t n)
{
    return kx_dot16(false, 1, a, b, n);
}

static inline float kx_dot_bf16_bf16(const uint16_t *a, const uint16_t *b, int64_t n)
{
    return kx_dot16(true, 2, a, b, n);
}

/* 8 fp8 codes as floats. e5m2 is the top byte of a binary16; e4m3 placed
 * at bit 7 of a binary16 reads as its value times 2^-8 (subnormals too),
 * which the caller folds into the block scale. The e4m3 NaN codes
 * (0x7F, 0xFF) are not produced by lmq's quantizer and read as 480. */
static inline __m256 kx_load_f8(const uint8_t *p, int e4m3)
{
    const __m128i c = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)p));
    __m128i h;
    if (e4m3)
        h = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(c, _mm_set1_epi16(0x80)), 8),
                         _mm_slli_epi16(_mm_and_si128(c, _mm_set1_epi16(0x7F)), 7));
    else
        h = _mm_slli_epi16(c, 8);
    return _mm256_cvtph_ps(h);
}

static inline void kx_vec_dot_f8(int64_t n, float *s, const void *vw, const float *a, int e4m3)
{
    const lmq_block_f8 *w = vw;
    __m256 acc = _mm256_setzero_ps();
    const float adj = e4m3 ? 256.0f : 1.0f;
    for (int64_t i = 0; i < n / LMQ_QK_F8; i++, a += LMQ_QK_F8) {
        __m256 b = _mm256_mul_ps(kx_load_f8(w[i].qs, e4m3), _mm256_loadu_ps(a));
        b = _mm256_fmadd_ps(kx_load_f8(w[i].qs + 8, e4m3), _mm256_loadu_ps(a + 8), b);
        b = _mm256_fmadd_ps(kx_load_f8(w[i].qs + 16, e4m3), _mm256_loadu_ps(a + 16), b);
        b = _mm256_fmadd_ps(kx_load_f8(w[i].qs + 24, e4m3), _mm256_loadu_ps(a + 24), b);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(lmq_e8m0_to_fp32(w[i].e) * adj), b, acc);
    }
    *s = x86_hsum_ps(acc);
}

/* ================================================================
 * 32-element blocks
 * ================================================================ */

static inline void kx_vec_dot_q8_0(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q8_0 *x = vw, *y = va;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
    const int64_t nb = n / LMQ_QK8_0;
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        const __m256i p0 = x86_dot_ss8(_mm256_loadu_si256((const __m256i *)x[i].qs),
                                       _mm256_loadu_si256((const __m256i *)y[i].qs));
        const __m256i p1 = x86_dot_ss8(_mm256_loadu_si256((const __m256i *)x[i + 1].qs),
                                       _mm256_loadu_si256((const __m256i *)y[i + 1].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(x86_h2f(x[i].d) * x86_h2f(y[i].d)), _mm256_cvtepi32_ps(p0), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(x86_h2f(x[i + 1].d) * x86_h2f(y[i + 1].d)), _mm256_cvtepi32_ps(p1),
                               acc1);
    }
    for (; i < nb; i++) {
        const __m256i p = x86_dot_ss8(_mm256_loadu_si256((const __m256i *)x[i].qs),
                                      _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(x86_h2f(x[i].d) * x86_h2f(y[i].d)), _mm256_cvtepi32_ps(p), acc0);
    }
    *s = x86_hsum_ps(_mm256_add_ps(acc0, acc1));
}

static inline __m256i kx_q4_0_bytes(const lmq_block_q4_0 *b)
{
    return _mm256_sub_epi8(x86_nibbles32(b->qs), _mm256_set1_epi8(8));
}

static inline void kx_vec_dot_q4_0(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q4_0 *x = vw;
    const lmq_block_q8_0 *y = va;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
    const int64_t nb = n / LMQ_QK4_0;
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        const __m256i p0 = x86_dot_ss8(kx_q4_0_bytes(&x[i]), _mm256_loadu_si256((const __m256i *)y[i].qs));
        const __m256i p1 = x86_dot_ss8(kx_q4_0_bytes(&x[i + 1]), _mm256_loadu_si256((const __m256i *)y[i + 1].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(x86_h2f(x[i].d) * x86_h2f(y[i].d)), _mm256_cvtepi32_ps(p0), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(x86_h2f(x[i + 1].d) * x86_h2f(y[i + 1].d)), _mm256_cvtepi32_ps(p1),
                               acc1);
    }
    for (; i < nb; i++) {
        const __m256i p = x86_dot_ss8(kx_q4_0_bytes(&x[i]), _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(x86_h2f(x[i].d) * x86_h2f(y[i].d)), _mm256_cvtepi32_ps(p), acc0);
    }
    *s = x86_hsum_ps(_mm256_add_ps(acc0, acc1));
}

/* 4-token versions (vec_dot4): the weight block is unpacked once; per token
 * the float operations are those of the 1-token kernels above, so the
 * results are identical. */
#define KX_Y(type, k) ((const type *)((const uint8_t *)va + (k) * a_stride))

static inline void kx_vec_dot4_q8_0(int64_t n, float *s, int64_t s_stride, const void *vw, const void *va,
                                    int64_t a_stride)
{
    const lmq_block_q8_0 *x = vw;
    __m256 acc0[4], acc1[4];
    for (int k = 0; k < 4; k++) acc0[k] = acc1[k] = _mm256_setzero_ps();
    const int64_t nb = n / LMQ_QK8_0;
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        const __m256i q0 = _mm256_loadu_si256((const __m256i *)x[i].qs), q1 = _mm256_loadu_si256((const __m256i *)x[i + 1].qs);
        const __m256i a0 = _mm256_sign_epi8(q0, q0), a1 = _mm256_sign_epi8(q1, q1);
        const float d0 = x86_h2f(x[i].d), d1 = x86_h2f(x[i + 1].d);
        for (int k = 0; k < 4; k++) {
            const lmq_block_q8_0 *y = KX_Y(lmq_block_q8_0, k);
            const __m256i p0 = x86_dot_us8(a0, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)y[i].qs), q0));
            const __m256i p1 = x86_dot_us8(a1, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)y[i + 1].qs), q1));
            acc0[k] = _mm256_fmadd_ps(_mm256_set1_ps(d0 * x86_h2f(y[i].d)), _mm256_cvtepi32_ps(p0), acc0[k]);
            acc1[k] = _mm256_fmadd_ps(_mm256_set1_ps(d1 * x86_h2f(y[i + 1].d)), _mm256_cvtepi32_ps(p1), acc1[k]);
        }
    }
    for (; i < nb; i++) {
        const __m256i q0 = _mm256_loadu_si256((const __m256i *)x[i].qs), a0 = _mm256_sign_epi8(q0, q0);
        const float d0 = x86_h2f(x[i].d);
        for (int k = 0; k < 4; k++) {
            const lmq_block_q8_0 *y = KX_Y(lmq_block_q8_0, k);
            const __m256i p0 = x86_dot_us8(a0, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)y[i].qs), q0));
            acc0[k] = _mm256_fmadd_ps(_mm256_set1_ps(d0 * x86_h2f(y[i].d)), _mm256_cvtepi32_ps(p0), acc0[k]);
        }
    }
    for (int k = 0; k < 4; k++) s[k * s_stride] = x86_hsum_ps(_mm256_add_ps(acc0[k], acc1[k]));
}

static inline void kx_vec_dot4_q4_0(int64_t n, float *s, int64_t s_stride, const void *vw, const void *va,
                                    int64_t a_stride)
{
    const lmq_block_q4_0 *x = vw;
    __m256 acc0[4], acc1[4];
    for (int k = 0; k < 4; k++) acc0[k] = acc1[k] = _mm256_setzero_ps();
    const int64_t nb = n / LMQ_QK4_0;
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        const __m256i q0 = kx_q4_0_bytes(&x[i]), q1 = kx_q4_0_bytes(&x[i + 1]);
        const __m256i a0 = _mm256_sign_epi8(q0, q0), a1 = _mm256_sign_epi8(q1, q1);
        const float d0 = x86_h2f(x[i].d), d1 = x86_h2f(x[i + 1].d);
        for (int k = 0; k < 4; k++) {
            const lmq_block_q8_0 *y = KX_Y(lmq_block_q8_0, k);
            const __m256i p0 = x86_dot_us8(a0, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)y[i].qs), q0));
            const __m256i p1 = x86_dot_us8(a1, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)y[i + 1].qs), q1));
            acc0[k] = _mm256_fmadd_ps(_mm256_set1_ps(d0 * x86_h2f(y[i].d)), _mm256_cvtepi32_ps(p0), acc0[k]);
            acc1[k] = _mm256_fmadd_ps(_mm256_set1_ps(d1 * x86_h2f(y[i + 1].d)), _mm256_cvtepi32_ps(p1), acc1[k]);
        }
    }
    for (; i < nb; i++) {
        const __m256i q0 = kx_q4_0_bytes(&x[i]), a0 = _mm256_sign_epi8(q0, q0);
        const float d0 = x86_h2f(x[i].d);
        for (int k = 0; k < 4; k++) {
            const lmq_block_q8_0 *y = KX_Y(lmq_block_q8_0, k);
            const __m256i p0 = x86_dot_us8(a0, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)y[i].qs), q0));
            acc0[k] = _mm256_fmadd_ps(_mm256_set1_ps(d0 * x86_h2f(y[i].d)), _mm256_cvtepi32_ps(p0), acc0[k]);
        }
    }
    for (int k = 0; k < 4; k++) s[k * s_stride] = x86_hsum_ps(_mm256_add_ps(acc0[k], acc1[k]));
}

#undef KX_Y


static inline void kx_vec_dot_q4_1(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q4_1 *x = vw;
    const lmq_block_q8_1 *y = va;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0;
    for (int64_t i = 0; i < n / LMQ_QK4_1; i++) {
        const __m256i p = x86_dot_us8(x86_nibbles32(x[i].qs), _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(x86_h2f(x[i].d) * x86_h2f(y[i].d)), _mm256_cvtepi32_ps(p), acc);
        summs += x86_h2f(x[i].m) * x86_h2f(y[i].s);
    }
    *s = x86_hsum_ps(acc) + summs;
}

/* q5_0 values minus 16 as int8: the nibble, or'd with 0xF0 where the 5th
 * bit is clear ((q | 0xF0) as int8 == q - 16). */
static inline __m256i kx_q5_0_bytes(const lmq_block_q5_0 *b)
{
    const __m256i hi = _mm256_andnot_si256(x86_bits32(b->qh), _mm256_set1_epi8((char)0xF0));
    return _mm256_or_si256(x86_nibbles32(b->qs), hi);
}

static inline void kx_vec_dot_q5_0(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q5_0 *x = vw;
    const lmq_block_q8_0 *y = va;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LMQ_QK5_0; i++) {
        const __m256i p = x86_dot_ss8(kx_q5_0_bytes(&x[i]), _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(x86_h2f(x[i].d) * x86_h2f(y[i].d)), _mm256_cvtepi32_ps(p), acc);
    }
    *s = x86_hsum_ps(acc);
}

static inline void kx_vec_dot_q5_1(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q5_1 *x = vw;
    const lmq_block_q8_1 *y = va;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0;
    for (int64_t i = 0; i < n / LMQ_QK5_1; i++) {
        const __m256i hi = _mm256_and_si256(x86_bits32(x[i].qh), _mm256_set1_epi8(0x10));
        const __m256i q = _mm256_or_si256(x86_nibbles32(x[i].qs), hi);
        const __m256i p = x86_dot_us8(q, _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(x86_h2f(x[i].d) * x86_h2f(y[i].d)), _mm256_cvtepi32_ps(p), acc);
        summs += x86_h2f(x[i].m) * x86_h2f(y[i].s);
    }
    *s = x86_hsum_ps(acc) + summs;
}

/* The iq4_nl grid, broadcast to both 128-bit lanes for vpshufb. */
static inline __m256i kx_iq4nl_table(void)
{
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)lmq_iq4nl_values));
}

static inline void kx_vec_dot_iq4_nl(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_iq4_nl *x = vw;
    const lmq_block_q8_0 *y = va;
    const __m256i grid = kx_iq4nl_table();
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LMQ_QK4_NL; i++) {
        const __m256i q = _mm256_shuffle_epi8(grid, x86_nibbles32(x[i].qs));
        const __m256i p = x86_dot_ss8(q, _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(x86_h2f(x[i].d) * x86_h2f(y[i].d)), _mm256_cvtepi32_ps(p), acc);
    }
    *s = x86_hsum_ps(acc);
}

/* MXFP4: the codes through the doubled E2M1 values (vpshufb, as iq4_nl),
 * dotted with the q8_0 quants; the block scale d_w = 2^(e - 128) times the
 * activation's d. Two accumulators (even and odd blocks), as q8_0; the
 * 4-token version below does per token the same float operations. */
static inline __m256i kx_mxfp4_table(void)
{
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)lmq_mxfp4_values));
}

static inline __m256i kx_mxfp4_bytes(const lmq_block_mxfp4 *b, __m256i table)
{
    return _mm256_shuffle_epi8(table, x86_nibbles32(b->qs));
}

static inline void kx_vec_dot_mxfp4(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_mxfp4 *x = vw;
    const lmq_block_q8_0 *y = va;
    const __m256i table = kx_mxfp4_table();
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
    const int64_t nb = n / LMQ_QK_MXFP4;
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        const __m256i p0 = x86_dot_ss8(kx_mxfp4_bytes(&x[i], table), _mm256_loadu_si256((const __m256i *)y[i].qs));
        const __m256i p1 = x86_dot_ss8(kx_mxfp4_bytes(&x[i + 1], table), _mm256_loadu_si256((const __m256i *)y[i + 1].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(lmq_mxfp4_scale(x[i].e) * x86_h2f(y[i].d)), _mm256_cvtepi32_ps(p0), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(lmq_mxfp4_scale(x[i + 1].e) * x86_h2f(y[i + 1].d)),
                               _mm256_cvtepi32_ps(p1), acc1);
    }
    for (; i < nb; i++) {
        const __m256i p = x86_dot_ss8(kx_mxfp4_bytes(&x[i], table), _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(lmq_mxfp4_scale(x[i].e) * x86_h2f(y[i].d)), _mm256_cvtepi32_ps(p), acc0);
    }
    *s = x86_hsum_ps(_mm256_add_ps(acc0, acc1));
}

#define KX_Y(type, k) ((const type *)((const uint8_t *)va + (k) * a_stride))

static inline void kx_vec_dot4_mxfp4(int64_t n, float *s, int64_t s_stride, const void *vw, const void *va,
                                     int64_t a_stride)
{
    const lmq_block_mxfp4 *x = vw;
    const __m256i table = kx_mxfp4_table();
    __m256 acc0[4], acc1[4];
    for (int k = 0; k < 4; k++) acc0[k] = acc1[k] = _mm256_setzero_ps();
    const int64_t nb = n / LMQ_QK_MXFP4;
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        const __m256i q0 = kx_mxfp4_bytes(&x[i], table), q1 = kx_mxfp4_bytes(&x[i + 1], table);
        const __m256i a0 = _mm256_sign_epi8(q0, q0), a1 = _mm256_sign_epi8(q1, q1);
        const float d0 = lmq_mxfp4_scale(x[i].e), d1 = lmq_mxfp4_scale(x[i + 1].e);
        for (int k = 0; k < 4; k++) {
            const lmq_block_q8_0 *y = KX_Y(lmq_block_q8_0, k);
            const __m256i p0 = x86_dot_us8(a0, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)y[i].qs), q0));
            const __m256i p1 = x86_dot_us8(a1, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)y[i + 1].qs), q1));
            acc0[k] = _mm256_fmadd_ps(_mm256_set1_ps(d0 * x86_h2f(y[i].d)), _mm256_cvtepi32_ps(p0), acc0[k]);
            acc1[k] = _mm256_fmadd_ps(_mm256_set1_ps(d1 * x86_h2f(y[i + 1].d)), _mm256_cvtepi32_ps(p1), acc1[k]);
        }
    }
    for (; i < nb; i++) {
        const __m256i q0 = kx_mxfp4_bytes(&x[i], table), a0 = _mm256_sign_epi8(q0, q0);
        const float d0 = lmq_mxfp4_scale(x[i].e);
        for (int k = 0; k < 4; k++) {
            const lmq_block_q8_0 *y = KX_Y(lmq_block_q8_0, k);
            const __m256i p0 = x86_dot_us8(a0, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)y[i].qs), q0));
            acc0[k] = _mm256_fmadd_ps(_mm256_set1_ps(d0 * x86_h2f(y[i].d)), _mm256_cvtepi32_ps(p0), acc0[k]);
        }
    }
    for (int k = 0; k < 4; k++) s[k * s_stride] = x86_hsum_ps(_mm256_add_ps(acc0[k], acc1[k]));
}

#undef KX_Y

/* ================================================================
 * K-quants (256-element super-blocks) against q8_K
 * ================================================================ */

/* sum_g scale[g] * bsums[g] over the 16 groups of 16 (int, exact). */
static inline int kx_scaled_bsums(const int8_t *sc16, const int16_t *bsums)
{
    const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc16));
    return x86_hsum_epi32(_mm256_madd_epi16(sc, _mm256_loadu_si256((const __m256i *)bsums)));
}

/* Every K-quant block is read as 8 chunks of 32 unsigned quants (chunk c
 * against q8[32c .. 32c+31]) with int16 scale lanes (one scale per 16
 * quants), produced one at a time from a little per-block state so that
 * few registers stay live. The 4-token kernels dot each chunk with four
 * activation rows and do per token exactly the float operations of the
 * 1-token kernels (integer parts are exact in any order). */
typedef struct kx_kstate {
    __m256i a, b, c; /* type-specific: quant bytes, high bits, scales */
    const uint8_t *p, *h;
} kx_kstate;

static inline __m256i kx_chunk_dot(__m256i q, __m256i s, const int8_t *q8)
{
    return x86_dot_us8_scaled(q, _mm256_loadu_si256((const __m256i *)q8), s);
}

static inline int kx_madd_bsums(__m256i sc16, const lmq_block_q8_K *y)
{
    return x86_hsum_epi32(_mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)y->bsums)));
}

/* sum over the 8 sub-blocks of 32 of min[j] * (bsums[2j] + bsums[2j+1]),
 * with the 8 mins in the low 8 bytes of `mins`. */
static inline int kx_k4_mins(__m128i mins, const int16_t *bsums)
{
    const __m128i m = _mm_cvtepu8_epi16(mins);
    const __m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bsums),
                                      _mm_loadu_si128((const __m128i *)(bsums + 8)));
    __m128i p = _mm_madd_epi16(m, bs);
    p = _mm_add_epi32(p, _mm_shuffle_epi32(p, 0x4E));
    p = _mm_add_epi32(p, _mm_shuffle_epi32(p, 0xB1));
    return _mm_cvtsi128_si32(p);
}

/* Every int16 lane = lane k of the 8 int16 in each 128-bit half of s. */
static inline __m256i kx_bcast16(__m256i s, int k)
{
    return _mm256_shuffle_epi8(s, _mm256_set1_epi16((int16_t)((2 * k) | ((2 * k + 1) << 8))));
}

/* q2_K: chunk c = 4k + j holds (qs[32k + l] >> 2j) & 3; scales are the low
 * nibbles of scales[16] (state c), mins the high nibbles. */
static inline void kx_q2k_state(const lmq_block_q2_K *x, kx_kstate *st, __m256i *mins)
{
    const __m128i scv = _mm_loadu_si128((const __m128i *)x->scales);
    st->a = _mm256_loadu_si256((const __m256i *)x->qs);
    st->b = _mm256_loadu_si256((const __m256i *)(x->qs + 32));
    st->c = _mm256_cvtepu8_epi16(_mm_and_si128(scv, _mm_set1_epi8(0x0F)));
    *mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(scv, 4), _mm_set1_epi8(0x0F)));
}

static inline __m256i kx_q2k_chunk(const kx_kstate *st, int c, __m256i *s)
{
    *s = x86_scale_pair_v(st->c, c);
    return _mm256_and_si256(_mm256_srli_epi16(c < 4 ? st->a : st->b, 2 * (c % 4)), _mm256_set1_epi8(3));
}

/* q3_K: u = q + 4 = low 2 bits | high bit c of hmask << 2, in 0..7; the -4
 * comes back through the group sums. */
static inline void kx_q3k_state(const lmq_block_q3_K *x, kx_kstate *st)
{
    st->a = _mm256_loadu_si256((const __m256i *)x->qs);
    st->b = _mm256_loadu_si256((const __m256i *)(x->qs + 32));
    st->c = _mm256_cvtepi8_epi16(x86_q3k_scales(x->scales));
    st->h = x->hmask;
}

static inline __m256i kx_q3k_chunk(const kx_kstate *st, int c, __m256i *s)
{
    const __m256i hm = _mm256_loadu_si256((const __m256i *)st->h);
    const __m256i h = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm, c), _mm256_set1_epi8(1)), 2);
    *s = x86_scale_pair_v(st->c, c);
    return _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c < 4 ? st->a : st->b, 2 * (c % 4)), _mm256_set1_epi8(3)), h);
}

/* q4_K / q5_K: chunk 2j = low nibbles of qs[32j ..], 2j + 1 = high nibbles;
 * q5_K adds bit c of qh[l] as the 5th bit. One scale per chunk. */
static inline void kx_q45k_state(const uint8_t *scales, const uint8_t *qs, const uint8_t *qh, kx_kstate *st,
                                 __m128i *sm)
{
    *sm = x86_k4_scales(scales);
    st->c = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(*sm));
    st->p = qs;
    st->h = qh;
}

static inline __m256i kx_q45k_chunk(const kx_kstate *st, int c, __m256i *s)
{
    const __m256i v = _mm256_loadu_si256((const __m256i *)(st->p + 32 * (c / 2)));
    __m256i q = _mm256_and_si256(c % 2 ? _mm256_srli_epi16(v, 4) : v, _mm256_set1_epi8(0x0F));
    if (st->h) {
        const __m256i hb = _mm256_loadu_si256((const __m256i *)st->h);
        q = _mm256_or_si256(q, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, c), _mm256_set1_epi8(1)), 4));
    }
    *s = kx_bcast16(st->c, c);
    return q;
}

/* q6_K: u = q + 32 in 0..63 (4 low bits | 2 high bits << 4); chunk 4k + m
 * takes ql[64k + 32 (m % 2)] (low nibbles for m < 2) and qh[32k] bits
 * 2m, 2m + 1. The -32 comes back through the group sums. */
static inline void kx_q6k_state(const lmq_block_q6_K *x, kx_kstate *st)
{
    st->c = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales));
    st->p = x->ql;
    st->h = x->qh;
}

static inline __m256i kx_q6k_chunk(const kx_kstate *st, int c, __m256i *s)
{
    const int k = c / 4, m = c % 4;
    const __m256i l = _mm256_loadu_si256((const __m256i *)(st->p + 64 * k + 32 * (m % 2)));
    const __m256i h = _mm256_loadu_si256((const __m256i *)(st->h + 32 * k));
    const __m256i lo = _mm256_and_si256(m < 2 ? l : _mm256_srli_epi16(l, 4), _mm256_set1_epi8(0x0F));
    const __m256i hs = m == 0 ? _mm256_slli_epi16(h, 4) : m == 1 ? _mm256_slli_epi16(h, 2) : m == 2 ? h : _mm256_srli_epi16(h, 2);
    *s = x86_scale_pair_v(st->c, c);
    return _mm256_or_si256(lo, _mm256_and_si256(hs, _mm256_set1_epi8(0x30)));
}

#define KX_YK(k) ((const lmq_block_q8_K *)((const uint8_t *)va + (k) * a_stride))

typedef __m256i (*kx_chunk_fn)(const kx_kstate *st, int c, __m256i *s);

/* The int part of one block against one activation row, and against four
 * (q8[k] = the block of row k). Always inlined so that `chunk` is a direct,
 * inlined call. */
static inline __attribute__((always_inline)) __m256i kx_isum(kx_chunk_fn chunk, const kx_kstate *st,
                                                             const int8_t *q8)
{
    __m256i isum = _mm256_setzero_si256();
    for (int c = 0; c < 8; c++) {
        __m256i sc;
        const __m256i q = chunk(st, c, &sc);
        isum = _mm256_add_epi32(isum, kx_chunk_dot(q, sc, q8 + 32 * c));
    }
    return isum;
}

static inline __attribute__((always_inline)) void kx_isum4(kx_chunk_fn chunk, const kx_kstate *st,
                                                           const int8_t *const q8[4], __m256i isum[4])
{
    for (int k = 0; k < 4; k++) isum[k] = _mm256_setzero_si256();
    for (int c = 0; c < 8; c++) {
        __m256i sc;
        const __m256i q = chunk(st, c, &sc);
        for (int k = 0; k < 4; k++) isum[k] = _mm256_add_epi32(isum[k], kx_chunk_dot(q, sc, q8[k] + 32 * c));
    }
}

static inline float kx_q2k_term(__m256i isum, __m256i mins, const lmq_block_q2_K *x, const lmq_block_q8_K *y)
{
    const float dall = y->d * x86_h2f(x->d), dmin = y->d * x86_h2f(x->dmin);
    return dall * (float)x86_hsum_epi32(isum) - dmin * (float)kx_madd_bsums(mins, y);
}

static inline float kx_q36k_term(__m256i isum, __m256i sc16, int offset, uint16_t d, const lmq_block_q8_K *y)
{
    const int total = x86_hsum_epi32(isum) - offset * kx_madd_bsums(sc16, y);
    return (x86_h2f(d) * y->d) * (float)total;
}

static inline void kx_k45_step(__m256 *acc, float *summ, __m256i isum, __m128i sm, float d, float dmin,
                               const lmq_block_q8_K *y)
{
    *acc = _mm256_fmadd_ps(_mm256_set1_ps(y->d * d), _mm256_cvtepi32_ps(isum), *acc);
    *summ += y->d * dmin * (float)kx_k4_mins(_mm_srli_si128(sm, 8), y->bsums);
}

static inline void kx_vec_dot_q2_K(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q2_K *x = vw;
    const lmq_block_q8_K *y = va;
    float sumf = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        kx_kstate st;
        __m256i mins;
        kx_q2k_state(&x[i], &st, &mins);
        sumf += kx_q2k_term(kx_isum(kx_q2k_chunk, &st, y[i].qs), mins, &x[i], &y[i]);
    }
    *s = sumf;
}

static inline void kx_vec_dot4_q2_K(int64_t n, float *s, int64_t s_stride, const void *vw, const void *va,
                                    int64_t a_stride)
{
    const lmq_block_q2_K *x = vw;
    float sumf[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        kx_kstate st;
        __m256i mins, isum[4];
        kx_q2k_state(&x[i], &st, &mins);
        const int8_t *q8[4] = {KX_YK(0)[i].qs, KX_YK(1)[i].qs, KX_YK(2)[i].qs, KX_YK(3)[i].qs};
        kx_isum4(kx_q2k_chunk, &st, q8, isum);
        for (int k = 0; k < 4; k++) sumf[k] += kx_q2k_term(isum[k], mins, &x[i], &KX_YK(k)[i]);
    }
    for (int k = 0; k < 4; k++) s[k * s_stride] = sumf[k];
}

static inline void kx_vec_dot_q3_K(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q3_K *x = vw;
    const lmq_block_q8_K *y = va;
    float sumf = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        kx_kstate st;
        kx_q3k_state(&x[i], &st);
        sumf += kx_q36k_term(kx_isum(kx_q3k_chunk, &st, y[i].qs), st.c, 4, x[i].d, &y[i]);
    }
    *s = sumf;
}

static inline void kx_vec_dot4_q3_K(int64_t n, float *s, int64_t s_stride, const void *vw, const void *va,
                                    int64_t a_stride)
{
    const lmq_block_q3_K *x = vw;
    float sumf[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        kx_kstate st;
        __m256i isum[4];
        kx_q3k_state(&x[i], &st);
        const int8_t *q8[4] = {KX_YK(0)[i].qs, KX_YK(1)[i].qs, KX_YK(2)[i].qs, KX_YK(3)[i].qs};
        kx_isum4(kx_q3k_chunk, &st, q8, isum);
        for (int k = 0; k < 4; k++) sumf[k] += kx_q36k_term(isum[k], st.c, 4, x[i].d, &KX_YK(k)[i]);
    }
    for (int k = 0; k < 4; k++) s[k * s_stride] = sumf[k];
}

static inline void kx_vec_dot_q6_K(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q6_K *x = vw;
    const lmq_block_q8_K *y = va;
    float sumf = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        kx_kstate st;
        kx_q6k_state(&x[i], &st);
        sumf += kx_q36k_term(kx_isum(kx_q6k_chunk, &st, y[i].qs), st.c, 32, x[i].d, &y[i]);
    }
    *s = sumf;
}

static inline void kx_vec_dot4_q6_K(int64_t n, float *s, int64_t s_stride, const void *vw, const void *va,
                                    int64_t a_stride)
{
    const lmq_block_q6_K *x = vw;
    float sumf[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        kx_kstate st;
        __m256i isum[4];
        kx_q6k_state(&x[i], &st);
        const int8_t *q8[4] = {KX_YK(0)[i].qs, KX_YK(1)[i].qs, KX_YK(2)[i].qs, KX_YK(3)[i].qs};
        kx_isum4(kx_q6k_chunk, &st, q8, isum);
        for (int k = 0; k < 4; k++) sumf[k] += kx_q36k_term(isum[k], st.c, 32, x[i].d, &KX_YK(k)[i]);
    }
    for (int k = 0; k < 4; k++) s[k * s_stride] = sumf[k];
}

/* q4_K (qh == NULL) and q5_K */
static inline void kx_vec_dot_q45_K(int64_t n, float *s, const void *vw, const void *va, int five)
{
    const lmq_block_q8_K *y = va;
    const size_t bs = five ? sizeof(lmq_block_q5_K) : sizeof(lmq_block_q4_K);
    __m256 acc = _mm256_setzero_ps();
    float summ = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        const uint8_t *blk = (const uint8_t *)vw + (size_t)i * bs;
        const lmq_block_q4_K *x4 = (const lmq_block_q4_K *)blk;
        const lmq_block_q5_K *x5 = (const lmq_block_q5_K *)blk;
        kx_kstate st;
        __m128i sm;
        if (five)
            kx_q45k_state(x5->scales, x5->qs, x5->qh, &st, &sm);
        else
            kx_q45k_state(x4->scales, x4->qs, NULL, &st, &sm);
        const float d = x86_h2f(five ? x5->d : x4->d), dmin = x86_h2f(five ? x5->dmin : x4->dmin);
        kx_k45_step(&acc, &summ, kx_isum(kx_q45k_chunk, &st, y[i].qs), sm, d, dmin, &y[i]);
    }
    *s = x86_hsum_ps(acc) - summ;
}

static inline void kx_vec_dot4_q45_K(int64_t n, float *s, int64_t s_stride, const void *vw, const void *va,
                                     int64_t a_stride, int five)
{
    const size_t bs = five ? sizeof(lmq_block_q5_K) : sizeof(lmq_block_q4_K);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    float summ[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        const uint8_t *blk = (const uint8_t *)vw + (size_t)i * bs;
        const lmq_block_q4_K *x4 = (const lmq_block_q4_K *)blk;
        const lmq_block_q5_K *x5 = (const lmq_block_q5_K *)blk;
        kx_kstate st;
        __m128i sm;
        __m256i isum[4];
        if (five)
            kx_q45k_state(x5->scales, x5->qs, x5->qh, &st, &sm);
        else
            kx_q45k_state(x4->scales, x4->qs, NULL, &st, &sm);
        const int8_t *q8[4] = {KX_YK(0)[i].qs, KX_YK(1)[i].qs, KX_YK(2)[i].qs, KX_YK(3)[i].qs};
        kx_isum4(kx_q45k_chunk, &st, q8, isum);
        const float d = x86_h2f(five ? x5->d : x4->d), dmin = x86_h2f(five ? x5->dmin : x4->dmin);
        for (int k = 0; k < 4; k++) kx_k45_step(&acc[k], &summ[k], isum[k], sm, d, dmin, &KX_YK(k)[i]);
    }
    for (int k = 0; k < 4; k++) s[k * s_stride] = x86_hsum_ps(acc[k]) - summ[k];
}

static inline void kx_vec_dot_q4_K(int64_t n, float *s, const void *vw, const void *va)
{
    kx_vec_dot_q45_K(n, s, vw, va, 0);
}

static inline void kx_vec_dot4_q4_K(int64_t n, float *s, int64_t s_stride, const void *vw, const void *va,
                                    int64_t a_stride)
{
    kx_vec_dot4_q45_K(n, s, s_stride, vw, va, a_stride, 0);
}

static inline void kx_vec_dot_q5_K(int64_t n, float *s, const void *vw, const void *va)
{
    kx_vec_dot_q45_K(n, s, vw, va, 1);
}

static inline void kx_vec_dot4_q5_K(int64_t n, float *s, int64_t s_stride, const void *vw, const void *va,
                                    int64_t a_stride)
{
    kx_vec_dot4_q45_K(n, s, s_stride, vw, va, a_stride, 1);
}

#undef KX_YK

static inline void kx_vec_dot_iq4_xs(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_iq4_xs *x = vw;
    const lmq_block_q8_K *y = va;
    const __m256i grid = kx_iq4nl_table();
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        const int8_t *q8 = y[i].qs;
        const uint8_t *qs = x[i].qs;
        __m256i isum = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++, qs += 16, q8 += 32) {
            const int ls = ((x[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((x[i].scales_h >> (2 * ib)) & 3) << 4);
            const __m256i q = _mm256_shuffle_epi8(grid, x86_nibbles32(qs));
            const __m256i yv = _mm256_loadu_si256((const __m256i *)q8);
            const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(yv, q));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p16, _mm256_set1_epi16((int16_t)(ls - 32))));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(x86_h2f(x[i].d) * y[i].d), _mm256_cvtepi32_ps(isum), acc);
    }
    *s = x86_hsum_ps(acc);
}

#endif /* LMQ_X86_DOTS_H */
