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

static inline float kx_dot_f16_f32(const uint16_t *a, const float *b, int64_t n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(kx_load_f16(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(kx_load_f16(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(kx_load_f16(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(kx_load_f16(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(kx_load_f16(a + i), _mm256_loadu_ps(b + i), s0);
    float s = x86_hsum_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; i++) s += x86_h2f(a[i]) * b[i];
    return s;
}

static inline float kx_dot_bf16_f32(const uint16_t *a, const float *b, int64_t n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(kx_load_bf16(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(kx_load_bf16(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(kx_load_bf16(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(kx_load_bf16(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(kx_load_bf16(a + i), _mm256_loadu_ps(b + i), s0);
    float s = x86_hsum_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; i++) s += lmq_bf16_to_fp32(a[i]) * b[i];
    return s;
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

/* ================================================================
 * K-quants (256-element super-blocks) against q8_K
 * ================================================================ */

/* sum_g scale[g] * bsums[g] over the 16 groups of 16 (int, exact). */
static inline int kx_scaled_bsums(const int8_t *sc16, const int16_t *bsums)
{
    const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc16));
    return x86_hsum_epi32(_mm256_madd_epi16(sc, _mm256_loadu_si256((const __m256i *)bsums)));
}

static inline void kx_vec_dot_q2_K(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q2_K *x = vw;
    const lmq_block_q8_K *y = va;
    const __m256i m3 = _mm256_set1_epi8(3);
    float sumf = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        const uint8_t *sc = x[i].scales;
        const int8_t *q8 = y[i].qs;
        /* mins: high nibbles against the group sums */
        const __m128i scv = _mm_loadu_si128((const __m128i *)sc);
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(scv, 4), _mm_set1_epi8(0x0F)));
        const int summs = x86_hsum_epi32(_mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)y[i].bsums)));
        __m256i isum = _mm256_setzero_si256();
        for (int k = 0; k < 2; k++) {
            const __m256i q2 = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * k));
            for (int j = 0; j < 4; j++, q8 += 32) {
                const int c = 4 * k + j;
                const __m256i q = _mm256_and_si256(_mm256_srli_epi16(q2, 2 * j), m3);
                const __m256i scale = x86_scale_pair(sc[2 * c] & 0xF, sc[2 * c + 1] & 0xF);
                isum = _mm256_add_epi32(isum,
                                        x86_dot_us8_scaled(q, _mm256_loadu_si256((const __m256i *)q8), scale));
            }
        }
        const float dall = y[i].d * x86_h2f(x[i].d), dmin = y[i].d * x86_h2f(x[i].dmin);
        sumf += dall * (float)x86_hsum_epi32(isum) - dmin * (float)summs;
    }
    *s = sumf;
}

static inline void kx_vec_dot_q3_K(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q3_K *x = vw;
    const lmq_block_q8_K *y = va;
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    float sumf = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        int8_t sc[16];
        lmq_q3k_scales(x[i].scales, sc);
        const int8_t *q8 = y[i].qs;
        const __m256i hm = _mm256_loadu_si256((const __m256i *)x[i].hmask);
        __m256i isum = _mm256_setzero_si256();
        for (int k = 0; k < 2; k++) {
            const __m256i q2 = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * k));
            for (int j = 0; j < 4; j++, q8 += 32) {
                const int c = 4 * k + j;
                /* u = q + 4 = low 2 bits | high bit << 2, in 0..7 */
                const __m256i h = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm, c), one), 2);
                const __m256i u = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q2, 2 * j), m3), h);
                const __m256i scale = x86_scale_pair(sc[2 * c], sc[2 * c + 1]);
                isum = _mm256_add_epi32(isum,
                                        x86_dot_us8_scaled(u, _mm256_loadu_si256((const __m256i *)q8), scale));
            }
        }
        const int total = x86_hsum_epi32(isum) - 4 * kx_scaled_bsums(sc, y[i].bsums);
        sumf += (x86_h2f(x[i].d) * y[i].d) * (float)total;
    }
    *s = sumf;
}

/* sum over the 8 sub-blocks of 32 of min[j] * (bsums[2j] + bsums[2j+1]). */
static inline int kx_k4_mins(const uint8_t *mins8, const int16_t *bsums)
{
    const __m128i m = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)mins8));
    const __m128i b = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bsums),
                                     _mm_loadu_si128((const __m128i *)(bsums + 8)));
    __m128i p = _mm_madd_epi16(m, b);
    p = _mm_add_epi32(p, _mm_shuffle_epi32(p, 0x4E));
    p = _mm_add_epi32(p, _mm_shuffle_epi32(p, 0xB1));
    return _mm_cvtsi128_si32(p);
}

static inline void kx_vec_dot_q4_K(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q4_K *x = vw;
    const lmq_block_q8_K *y = va;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    float summ = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        uint8_t sm[16];
        lmq_k4_unpack(x[i].scales, sm);
        const int8_t *q8 = y[i].qs;
        const uint8_t *q4 = x[i].qs;
        __m256i isum = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++, q4 += 32, q8 += 64) {
            const __m256i b = _mm256_loadu_si256((const __m256i *)q4);
            const __m256i lo = _mm256_and_si256(b, m4), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), m4);
            const __m256i plo = x86_dot_us8_scaled(lo, _mm256_loadu_si256((const __m256i *)q8),
                                                   _mm256_set1_epi16(sm[2 * j]));
            const __m256i phi = x86_dot_us8_scaled(hi, _mm256_loadu_si256((const __m256i *)(q8 + 32)),
                                                   _mm256_set1_epi16(sm[2 * j + 1]));
            isum = _mm256_add_epi32(isum, _mm256_add_epi32(plo, phi));
        }
        const float d = y[i].d * x86_h2f(x[i].d);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc);
        summ += y[i].d * x86_h2f(x[i].dmin) * (float)kx_k4_mins(sm + 8, y[i].bsums);
    }
    *s = x86_hsum_ps(acc) - summ;
}

static inline void kx_vec_dot_q5_K(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q5_K *x = vw;
    const lmq_block_q8_K *y = va;
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    __m256 acc = _mm256_setzero_ps();
    float summ = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        uint8_t sm[16];
        lmq_k4_unpack(x[i].scales, sm);
        const int8_t *q8 = y[i].qs;
        const uint8_t *q5 = x[i].qs;
        const __m256i hb = _mm256_loadu_si256((const __m256i *)x[i].qh);
        __m256i isum = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++, q5 += 32, q8 += 64) {
            const __m256i b = _mm256_loadu_si256((const __m256i *)q5);
            const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * j), one), 4);
            const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * j + 1), one), 4);
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(b, m4), h0);
            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), m4), h1);
            const __m256i plo = x86_dot_us8_scaled(lo, _mm256_loadu_si256((const __m256i *)q8),
                                                   _mm256_set1_epi16(sm[2 * j]));
            const __m256i phi = x86_dot_us8_scaled(hi, _mm256_loadu_si256((const __m256i *)(q8 + 32)),
                                                   _mm256_set1_epi16(sm[2 * j + 1]));
            isum = _mm256_add_epi32(isum, _mm256_add_epi32(plo, phi));
        }
        const float d = y[i].d * x86_h2f(x[i].d);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc);
        summ += y[i].d * x86_h2f(x[i].dmin) * (float)kx_k4_mins(sm + 8, y[i].bsums);
    }
    *s = x86_hsum_ps(acc) - summ;
}

static inline void kx_vec_dot_q6_K(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q6_K *x = vw;
    const lmq_block_q8_K *y = va;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x30);
    float sumf = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        const int8_t *sc = x[i].scales, *q8 = y[i].qs;
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        __m256i isum = _mm256_setzero_si256();
        for (int k = 0; k < 2; k++, ql += 64, qh += 32, sc += 8, q8 += 128) {
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            const __m256i h = _mm256_loadu_si256((const __m256i *)qh);
            /* u = q + 32 in 0..63: 4 low bits | 2 high bits << 4 */
            const __m256i u0 = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m2));
            const __m256i u1 = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m2));
            const __m256i u2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(h, m2));
            const __m256i u3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                               _mm256_and_si256(_mm256_srli_epi16(h, 2), m2));
            __m256i p = x86_dot_us8_scaled(u0, _mm256_loadu_si256((const __m256i *)q8), x86_scale_pair(sc[0], sc[1]));
            p = _mm256_add_epi32(p, x86_dot_us8_scaled(u1, _mm256_loadu_si256((const __m256i *)(q8 + 32)),
                                                       x86_scale_pair(sc[2], sc[3])));
            p = _mm256_add_epi32(p, x86_dot_us8_scaled(u2, _mm256_loadu_si256((const __m256i *)(q8 + 64)),
                                                       x86_scale_pair(sc[4], sc[5])));
            p = _mm256_add_epi32(p, x86_dot_us8_scaled(u3, _mm256_loadu_si256((const __m256i *)(q8 + 96)),
                                                       x86_scale_pair(sc[6], sc[7])));
            isum = _mm256_add_epi32(isum, p);
        }
        const int total = x86_hsum_epi32(isum) - 32 * kx_scaled_bsums(x[i].scales, y[i].bsums);
        sumf += (x86_h2f(x[i].d) * y[i].d) * (float)total;
    }
    *s = sumf;
}

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
