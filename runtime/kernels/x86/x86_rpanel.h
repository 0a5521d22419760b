/* x86_rpanel.h — reading the repacked blocks of panel.c in 256-bit
 * vectors: the E8M0 scales of lmq_rpanelmx, the codes of lmq_rpanelq6,
 * lmq_rpanelq5, lmq_rpanelq3 and lmq_rpanelq2, and q2_K's mins step, shared
 * by panel_avx2.c and panel_avxvnni.c (their kernels differ in the
 * products, not in how they read the layouts). Included only by files
 * compiled with at least -mavx2. */
#ifndef LMQ_X86_RPANEL_H
#define LMQ_X86_RPANEL_H

#include "kernels.h"
#include "x86_simd.h"

#ifdef LMQ_SANITIZED
#define KR_INLINE static inline
#else
#define KR_INLINE static inline __attribute__((always_inline))
#endif

/* lmq_mxfp4_scale of 8 E8M0 bytes: (e - 1) << 23 as float bits for e >= 2,
 * the subnormals 2^-128 (e = 0) and 2^-127 (e = 1) as 0x00200000 << e; the
 * larger of the two words is the right one for every e. */
KR_INLINE __m256 kr_e8m0_half(const uint8_t *e)
{
    const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)e));
    const __m256i hi = _mm256_slli_epi32(_mm256_sub_epi32(v, _mm256_set1_epi32(1)), 23);
    const __m256i lo = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), _mm256_min_epu32(v, _mm256_set1_epi32(1)));
    return _mm256_castsi256_ps(_mm256_max_epi32(hi, lo));
}

/* Codes 0..63 of the four 4-quant groups of a q6_K 16-quant sub-block, 8
 * rows (q = plane 0 at the half's rows): three ands, the fourth group
 * gathered from the three bytes' top 2 bits. */
KR_INLINE void kr_q6_codes(const uint8_t *q, __m256i c[4])
{
    const __m256i m6 = _mm256_set1_epi8(0x3F);
    const __m256i b0 = _mm256_loadu_si256((const __m256i *)q);
    const __m256i b1 = _mm256_loadu_si256((const __m256i *)(q + 64));
    const __m256i b2 = _mm256_loadu_si256((const __m256i *)(q + 128));
    c[0] = _mm256_and_si256(b0, m6);
    c[1] = _mm256_and_si256(b1, m6);
    c[2] = _mm256_and_si256(b2, m6);
    /* the top 2 bits of each byte, shifted within 16-bit lanes: the low 6
     * bits are cleared first, so nothing crosses into the next byte (one
     * constant for all four groups: fewer live registers) */
    c[3] = _mm256_or_si256(_mm256_or_si256(_mm256_srli_epi16(_mm256_andnot_si256(m6, b0), 2),
                                           _mm256_srli_epi16(_mm256_andnot_si256(m6, b1), 4)),
                           _mm256_srli_epi16(_mm256_andnot_si256(m6, b2), 6));
}

/* Codes 0..31 of groups 4n..4n + 3 of a q5_K 32-quant sub-block, 8 rows (q
 * = plane 0 at the half's rows): groups 0..4 one and each, 5..7 from the
 * planes' top 3 bits. The halves one after the other keep four code
 * registers live, not eight (the 4-token pass spilled with eight). */
KR_INLINE void kr_q5_codes(const uint8_t *q, int n, __m256i c[4])
{
    const __m256i m5 = _mm256_set1_epi8(0x1F);
    const __m256i b0 = _mm256_loadu_si256((const __m256i *)q), b1 = _mm256_loadu_si256((const __m256i *)(q + 64));
    const __m256i b2 = _mm256_loadu_si256((const __m256i *)(q + 128));
    const __m256i b3 = _mm256_loadu_si256((const __m256i *)(q + 192));
    const __m256i b4 = _mm256_loadu_si256((const __m256i *)(q + 256));
    if (n == 0) {
        c[0] = _mm256_and_si256(b0, m5);
        c[1] = _mm256_and_si256(b1, m5);
        c[2] = _mm256_and_si256(b2, m5);
        c[3] = _mm256_and_si256(b3, m5);
        return;
    }
    const __m256i m60 = _mm256_set1_epi8(0x60), m80 = _mm256_set1_epi8((char)0x80);
    c[0] = _mm256_and_si256(b4, m5);
    c[1] = _mm256_or_si256(_mm256_srli_epi16(_mm256_andnot_si256(m5, b0), 5),
                           _mm256_srli_epi16(_mm256_and_si256(b3, m60), 2));
    c[2] = _mm256_or_si256(_mm256_srli_epi16(_mm256_andnot_si256(m5, b1), 5),
                           _mm256_srli_epi16(_mm256_and_si256(b4, m60), 2));
    c[3] = _mm256_or_si256(_mm256_or_si256(_mm256_srli_epi16(_mm256_andnot_si256(m5, b2), 5),
                                           _mm256_srli_epi16(_mm256_and_si256(b3, m80), 4)),
                           _mm256_srli_epi16(_mm256_and_si256(b4, m80), 3));
}

/* Codes 0..3 of the four 4-quant groups of a q2_K 16-quant sub-block, 8
 * rows (q = the sub-block's plane at the half's rows): a shift and an and
 * each. */
KR_INLINE void kr_q2_codes(const uint8_t *q, __m256i c[4])
{
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m256i v = _mm256_loadu_si256((const __m256i *)q);
    c[0] = _mm256_and_si256(v, m3);
    c[1] = _mm256_and_si256(_mm256_srli_epi16(v, 2), m3);
    c[2] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m3);
    c[3] = _mm256_and_si256(_mm256_srli_epi16(v, 6), m3);
}

/* Codes 0..7 of groups 4n..4n + 3 of a q3_K 32-quant sub-block pair, 8 rows
 * (q = plane 0 at the half's rows): groups 0..5 a shift and an and each
 * (the bits a 16-bit shift brings in from the next byte masked off), 6 and
 * 7 from the planes' top bits, masked before the shift. */
KR_INLINE void kr_q3_codes(const uint8_t *q, int n, __m256i c[4])
{
    const __m256i m7 = _mm256_set1_epi8(7);
    const __m256i b0 = _mm256_loadu_si256((const __m256i *)q), b1 = _mm256_loadu_si256((const __m256i *)(q + 64));
    if (n == 0) {
        c[0] = _mm256_and_si256(b0, m7);
        c[1] = _mm256_and_si256(_mm256_srli_epi16(b0, 3), m7);
        c[2] = _mm256_and_si256(b1, m7);
        c[3] = _mm256_and_si256(_mm256_srli_epi16(b1, 3), m7);
        return;
    }
    const __m256i b2 = _mm256_loadu_si256((const __m256i *)(q + 128));
    const __m256i m3f = _mm256_set1_epi8(0x3F), m40 = _mm256_set1_epi8(0x40), m80 = _mm256_set1_epi8((char)0x80);
    c[0] = _mm256_and_si256(b2, m7);
    c[1] = _mm256_and_si256(_mm256_srli_epi16(b2, 3), m7);
    c[2] = _mm256_or_si256(_mm256_srli_epi16(_mm256_andnot_si256(m3f, b0), 6),
                           _mm256_srli_epi16(_mm256_and_si256(b2, m40), 4));
    c[3] = _mm256_or_si256(_mm256_srli_epi16(_mm256_andnot_si256(m3f, b1), 6),
                           _mm256_srli_epi16(_mm256_and_si256(b2, m80), 5));
}

/* q2_K's mins for rows r0..r0 + 7 and T tokens: acc[t] -= dmin dy x
 * sum_j m_j bsum_j, the mins (high nibbles of the scale bytes) in int16
 * pairs against pairs of the q8_K row's bsums (vpmaddwd). Applied after
 * the d x isum step, as the reference orders them. */
KR_INLINE void kr_q2_min_acc(const int T, const lmq_rpanelq2 *p2, int r0, const lmq_block_q8_K *const *yb, __m256 *acc)
{
    __m256i bias[8];
    for (int t = 0; t < T; t++) bias[t] = _mm256_setzero_si256();
    for (int pp = 0; pp < 8; pp++) {
        const __m256i m = _mm256_srli_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)p2->sc[pp][r0])), 4);
        for (int t = 0; t < T; t++) {
            int32_t b;
            memcpy(&b, yb[t]->bsums + 2 * pp, 4);
            bias[t] = _mm256_add_epi32(bias[t], _mm256_madd_epi16(m, _mm256_set1_epi32(b)));
        }
    }
    const __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p2->dmin + r0)));
    for (int t = 0; t < T; t++)
        acc[t] = _mm256_fnmadd_ps(_mm256_mul_ps(dm, _mm256_set1_ps(yb[t]->d)), _mm256_cvtepi32_ps(bias[t]), acc[t]);
}

#endif
