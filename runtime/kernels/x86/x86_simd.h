/* x86_simd.h — static inline AVX2 helpers shared by the x86 kernel files.
 *
 * Included only by files compiled with at least -mavx2 -mfma -mf16c. When
 * the includer is compiled with AVX-512 VL + VNNI, the u8 x s8 dot helper
 * uses vpdpbusd (one instruction instead of vpmaddubsw + vpmaddwd), which is
 * the only difference between the avx2 and the avx512 builds of the shared
 * 256-bit kernel bodies. */
#ifndef LMQ_X86_SIMD_H
#define LMQ_X86_SIMD_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define LMQ_X86_VNNI 1
#else
#define LMQ_X86_VNNI 0
#endif

static inline float x86_hsum_ps(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float x86_hsum_ps128(__m128 s)
{
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline int x86_hsum_epi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

static inline float x86_h2f(uint16_t h)
{
    return _cvtsh_ss(h);
}

/* 32 x 4-bit values from 16 bytes: lanes 0..15 the low nibbles, lanes
 * 16..31 the high nibbles (the q4_0 / q4_K element order). */
static inline __m256i x86_nibbles32(const uint8_t *p)
{
    const __m128i t = _mm_loadu_si128((const __m128i *)p);
    const __m256i b = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
    return _mm256_and_si256(b, _mm256_set1_epi8(0x0F));
}

/* 32 bytes, 0xFF where bit i of the little-endian 32-bit word at p is set. */
static inline __m256i x86_bits32(const uint8_t *p)
{
    uint32_t w;
    memcpy(&w, p, 4);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL,
                                           0x0101010101010101LL, 0x0000000000000000LL);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)w), shuf);
    b = _mm256_or_si256(b, _mm256_set1_epi64x(0x7FBFDFEFF7FBFDFELL));
    return _mm256_cmpeq_epi8(b, _mm256_set1_epi8(-1));
}

/* Sums of 4 adjacent products u8 x s8 as 8 int32 (u8 <= 128, |s8| <= 127:
 * the vpmaddubsw pairs cannot saturate). */
static inline __m256i x86_dot_us8(__m256i u, __m256i s)
{
#if LMQ_X86_VNNI
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

/* Same for s8 x s8 (|y| <= 127), via |x| and sign(y, x). */
static inline __m256i x86_dot_ss8(__m256i x, __m256i y)
{
    return x86_dot_us8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

/* 16 pair sums u8 x s8 (int16), weighted by 16-bit scales and summed in
 * pairs to 8 int32: sum over lanes of scale[k] * (u[2k]s[2k] + u[2k+1]s[2k+1]). */
static inline __m256i x86_dot_us8_scaled(__m256i u, __m256i s, __m256i scale16)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), scale16);
}

/* Scales of a 32-quant chunk made of two 16-quant groups, for
 * x86_dot_us8_scaled: from 16 int16 scales in sc16, lanes 0..7 take
 * sc[2c] and lanes 8..15 sc[2c + 1]. */
static inline __m256i x86_scale_pair_v(__m256i sc16, int c)
{
    const __m256i d = _mm256_permutevar8x32_epi32(sc16, _mm256_set1_epi32(c));
    return _mm256_shuffle_epi8(d, _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3,
                                                   2, 3, 2, 3, 2, 3, 2, 3, 2, 3));
}

/* q4_K/q5_K scales (bytes 0..7) and mins (bytes 8..15) in a vector. */
static inline __m128i x86_k4_scales(const uint8_t *q)
{
    uint32_t u[4];
    lmq_k4_unpack_u32(q, u);
    return _mm_set_epi32((int)u[3], (int)u[2], (int)u[1], (int)u[0]);
}

/* The 16 signed q3_K scales as int8 in a vector. */
static inline __m128i x86_q3k_scales(const uint8_t *s12)
{
    uint32_t a[4];
    lmq_q3k_scales_u32(s12, a);
    return _mm_sub_epi8(_mm_set_epi32((int)a[3], (int)a[2], (int)a[1], (int)a[0]), _mm_set1_epi8(32));
}

/* exp(x) for x <= 88.3, 8 lanes: n = round(x / ln2), r = x - n ln2 (two-part
 * ln2), degree-6 polynomial, 2^n by exponent bits. Below -87.3 the result is
 * flushed to 0 (as is exp(-inf)); relative error about 2 ulp. */
static inline __m256 x86_exp_ps(__m256 x)
{
    const __m256 lo = _mm256_set1_ps(-87.3f), hi = _mm256_set1_ps(88.3f);
    const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 720);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    /* 2^n, split in two factors so that n = 128 does not overflow the exponent */
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
    p = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    return _mm256_andnot_ps(under, p);
}

/* roundf() semantics (halves away from zero) for |v| < 2^23. */
static inline __m256 x86_round_away(__m256 v)
{
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 sign = _mm256_and_ps(v, _mm256_set1_ps(-0.0f));
    const __m256 frac = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_sub_ps(v, t));
    const __m256 ge = _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    return _mm256_add_ps(t, _mm256_and_ps(ge, _mm256_or_ps(sign, _mm256_set1_ps(1.0f))));
}

/* Packs 4 x 8 int32 (each in [-128, 127]) into 32 int8 in order. */
static inline __m256i x86_pack_i8(__m256i a, __m256i b, __m256i c, __m256i d)
{
    const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    const __m256i v = _mm256_packs_epi16(ab, cd);
    /* packs works within 128-bit lanes: restore the element order */
    return _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

static inline __m256 x86_abs_ps(__m256 v)
{
    return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}

static inline float x86_hmax_ps(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

#endif /* LMQ_X86_SIMD_H */
