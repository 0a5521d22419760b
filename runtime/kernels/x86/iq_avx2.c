/* AVX2 dots of the codebook (IQ1..IQ3) and ternary (TQ) types with q8_K
 * activations (generation's matrix-vector products).
 *
 * Each type builds the 32 signed weight codes of one sub-block group in a
 * register (grid entries gathered by index, signs applied as byte masks:
 * (g ^ m) - m, |code| <= 62, so no overflow), then one shared step takes
 * the dot with 32 activations: vpmaddubsw wants an unsigned operand, and
 * the activations reach -128 (q8_K's scale maps the largest magnitude
 * there), so it runs on a ^ 0x80 = a + 128 and takes 128 x the code sums
 * off in the same int16 lanes. The integer sums are the scalar
 * reference's (lmq_vec_dot_iq_ref), and so is the float order (one
 * multiply-add per super-block, which FMA may fuse). */
#include <immintrin.h>

#include "kernels.h"
#include "x86_simd.h"

#define IQ_INLINE static inline __attribute__((always_inline))

/* 16 int16 lanes: pairs of code x activation products over 32 elements */
IQ_INLINE __m256i pair_dots(__m256i w, const int8_t *a)
{
    const __m256i k80 = _mm256_set1_epi8((char)0x80);
    const __m256i av = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)a), k80);
    return _mm256_sub_epi16(_mm256_maddubs_epi16(av, w), _mm256_maddubs_epi16(k80, w));
}

IQ_INLINE __m256i apply_signs(__m256i g, __m256i m)
{
    return _mm256_sub_epi8(_mm256_xor_si256(g, m), m);
}

/* Byte masks (0xFF = negative) of 32 elements from 4 sign bytes, byte l
 * for elements 8l..8l+7, bit j for element 8l + j. */
IQ_INLINE __m256i sign_bytes(const uint8_t *s)
{
    uint32_t v;
    memcpy(&v, s, 4);
    const __m256i rep = _mm256_shuffle_epi8(_mm256_set1_epi32((int)v),
                                            _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                                              0x0101010101010101, 0x0000000000000000));
    const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    return _mm256_cmpeq_epi8(_mm256_and_si256(rep, bits), bits);
}

/* Scales of one 32-element group as int16 lanes: one scale, or the first
 * 16 elements' and the last 16's (128-bit halves). */
IQ_INLINE __m256i scale1(int sc)
{
    return _mm256_set1_epi16((short)sc);
}
IQ_INLINE __m256i scale2(int lo, int hi)
{
    return _mm256_set_m128i(_mm_set1_epi16((short)hi), _mm_set1_epi16((short)lo));
}

IQ_INLINE float finish(float sum, float d, const lmq_block_q8_K *y, __m256i acc)
{
    return sum + d * y->d * (float)x86_hsum_epi32(acc);
}

/* ---- per type --------------------------------------------------------- */

static void dot_iq2_xxs(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_iq_grids *g = lmq_iq_grids_get();
    const lmq_block_iq2_xxs *x = vw;
    const lmq_block_q8_K *y = va;
    float sum = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        __m256i acc = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *p = (const uint8_t *)x[i].qs + 8 * ib;
            uint32_t sg;
            memcpy(&sg, p + 4, 4);
            const __m256i gv = _mm256_set_epi64x((long long)g->iq2xxs[p[3]], (long long)g->iq2xxs[p[2]],
                                                 (long long)g->iq2xxs[p[1]], (long long)g->iq2xxs[p[0]]);
            const __m256i m = _mm256_set_epi64x((long long)g->sign64[(sg >> 21) & 127], (long long)g->sign64[(sg >> 14) & 127],
                                                (long long)g->sign64[(sg >> 7) & 127], (long long)g->sign64[sg & 127]);
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pair_dots(apply_signs(gv, m), y[i].qs + 32 * ib),
                                                          scale1(2 * (int)(sg >> 28) + 1)));
        }
        sum = finish(sum, lmq_fp16_to_fp32(x[i].d) * 0.125f, &y[i], acc);
    }
    *s = sum;
}

static void dot_iq2_xs(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_iq_grids *g = lmq_iq_grids_get();
    const lmq_block_iq2_xs *x = vw;
    const lmq_block_q8_K *y = va;
    float sum = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        __m256i acc = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            const uint16_t *q = x[i].qs + 4 * ib;
            const __m256i gv = _mm256_set_epi64x((long long)g->iq2xs[q[3] & 511], (long long)g->iq2xs[q[2] & 511],
                                                 (long long)g->iq2xs[q[1] & 511], (long long)g->iq2xs[q[0] & 511]);
            const __m256i m = _mm256_set_epi64x((long long)g->sign64[q[3] >> 9], (long long)g->sign64[q[2] >> 9],
                                                (long long)g->sign64[q[1] >> 9], (long long)g->sign64[q[0] >> 9]);
            const int sc = x[i].scales[ib];
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pair_dots(apply_signs(gv, m), y[i].qs + 32 * ib),
                                                          scale2(2 * (sc & 15) + 1, 2 * (sc >> 4) + 1)));
        }
        sum = finish(sum, lmq_fp16_to_fp32(x[i].d) * 0.125f, &y[i], acc);
    }
    *s = sum;
}

static void dot_iq2_s(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_iq_grids *g = lmq_iq_grids_get();
    const lmq_block_iq2_s *x = vw;
    const lmq_block_q8_K *y = va;
    float sum = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        __m256i acc = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = x[i].qs + 4 * ib;
            const unsigned h = x[i].qh[ib];
            const __m256i gv = _mm256_set_epi64x(
                (long long)g->iq2s[q[3] | (h >> 6 & 3) << 8], (long long)g->iq2s[q[2] | (h >> 4 & 3) << 8],
                (long long)g->iq2s[q[1] | (h >> 2 & 3) << 8], (long long)g->iq2s[q[0] | (h & 3) << 8]);
            const int sc = x[i].scales[ib];
            acc = _mm256_add_epi32(
                acc, _mm256_madd_epi16(pair_dots(apply_signs(gv, sign_bytes(x[i].qs + 32 + 4 * ib)), y[i].qs + 32 * ib),
                                       scale2(2 * (sc & 15) + 1, 2 * (sc >> 4) + 1)));
        }
        sum = finish(sum, lmq_fp16_to_fp32(x[i].d) * 0.125f, &y[i], acc);
    }
    *s = sum;
}

static void dot_iq3_xxs(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_iq_grids *g = lmq_iq_grids_get();
    const lmq_block_iq3_xxs *x = vw;
    const lmq_block_q8_K *y = va;
    float sum = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        __m256i acc = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = x[i].qs + 8 * ib;
            uint32_t sg;
            memcpy(&sg, x[i].qs + 64 + 4 * ib, 4);
            const __m256i gv =
                _mm256_set_epi32((int)g->iq3xxs[q[7]], (int)g->iq3xxs[q[6]], (int)g->iq3xxs[q[5]], (int)g->iq3xxs[q[4]],
                                 (int)g->iq3xxs[q[3]], (int)g->iq3xxs[q[2]], (int)g->iq3xxs[q[1]], (int)g->iq3xxs[q[0]]);
            const __m256i m = _mm256_set_epi64x((long long)g->sign64[(sg >> 21) & 127], (long long)g->sign64[(sg >> 14) & 127],
                                                (long long)g->sign64[(sg >> 7) & 127], (long long)g->sign64[sg & 127]);
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pair_dots(apply_signs(gv, m), y[i].qs + 32 * ib),
                                                          scale1(2 * (int)(sg >> 28) + 1)));
        }
        sum = finish(sum, lmq_fp16_to_fp32(x[i].d) * 0.25f, &y[i], acc);
    }
    *s = sum;
}

static void dot_iq3_s(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_iq_grids *g = lmq_iq_grids_get();
    const lmq_block_iq3_s *x = vw;
    const lmq_block_q8_K *y = va;
    float sum = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        __m256i acc = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = x[i].qs + 8 * ib;
            const unsigned h = x[i].qh[ib];
#define I3(k) (int)g->iq3s[q[k] | (h >> (k) & 1) << 8]
            const __m256i gv = _mm256_set_epi32(I3(7), I3(6), I3(5), I3(4), I3(3), I3(2), I3(1), I3(0));
#undef I3
            const int sc = 2 * ((x[i].scales[ib / 2] >> (4 * (ib % 2))) & 15) + 1;
            acc = _mm256_add_epi32(
                acc, _mm256_madd_epi16(pair_dots(apply_signs(gv, sign_bytes(x[i].signs + 4 * ib)), y[i].qs + 32 * ib),
                                       scale1(sc)));
        }
        sum = finish(sum, lmq_fp16_to_fp32(x[i].d), &y[i], acc);
    }
    *s = sum;
}

/* 8 x the ternary grid values plus the per-8 shifts (+-1) */
IQ_INLINE __m256i iq1_codes(__m256i gv, __m256i shift)
{
    const __m256i g2 = _mm256_add_epi8(gv, gv), g4 = _mm256_add_epi8(g2, g2);
    return _mm256_add_epi8(_mm256_add_epi8(g4, g4), shift);
}

static void dot_iq1_s(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_iq_grids *g = lmq_iq_grids_get();
    const lmq_block_iq1_s *x = vw;
    const lmq_block_q8_K *y = va;
    float sum = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        __m256i acc = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = x[i].qs + 4 * ib;
            const unsigned h = x[i].qh[ib];
            const __m256i gv = _mm256_set_epi64x(
                (long long)g->iq1s[q[3] | (h >> 9 & 7) << 8], (long long)g->iq1s[q[2] | (h >> 6 & 7) << 8],
                (long long)g->iq1s[q[1] | (h >> 3 & 7) << 8], (long long)g->iq1s[q[0] | (h & 7) << 8]);
            const __m256i w = iq1_codes(gv, _mm256_set1_epi8(h & 0x8000 ? -1 : 1));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pair_dots(w, y[i].qs + 32 * ib), scale1(2 * (int)(h >> 12 & 7) + 1)));
        }
        sum = finish(sum, lmq_fp16_to_fp32(x[i].d) * 0.125f, &y[i], acc);
    }
    *s = sum;
}

static void dot_iq1_m(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_iq_grids *g = lmq_iq_grids_get();
    const lmq_block_iq1_m *x = vw;
    const lmq_block_q8_K *y = va;
    float sum = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        uint16_t sc[4];
        memcpy(sc, x[i].scales, 8);
        const uint16_t dh = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
        __m256i acc = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = x[i].qs + 4 * ib, *qh = x[i].qh + 2 * ib;
            const __m256i gv = _mm256_set_epi64x(
                (long long)g->iq1s[q[3] | (qh[1] >> 4 & 7) << 8], (long long)g->iq1s[q[2] | (qh[1] & 7) << 8],
                (long long)g->iq1s[q[1] | (qh[0] >> 4 & 7) << 8], (long long)g->iq1s[q[0] | (qh[0] & 7) << 8]);
#define SH(b) (long long)((b) ? 0xFFFFFFFFFFFFFFFFull : 0x0101010101010101ull)
            const __m256i shift = _mm256_set_epi64x(SH(qh[1] & 0x80), SH(qh[1] & 0x08), SH(qh[0] & 0x80), SH(qh[0] & 0x08));
#undef SH
            const unsigned s6 = sc[ib / 2] >> (6 * (ib % 2));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pair_dots(iq1_codes(gv, shift), y[i].qs + 32 * ib),
                                                          scale2(2 * (int)(s6 & 7) + 1, 2 * (int)(s6 >> 3 & 7) + 1)));
        }
        sum = finish(sum, lmq_fp16_to_fp32(dh) * 0.125f, &y[i], acc);
    }
    *s = sum;
}

static void dot_tq2_0(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_tq2_0 *x = vw;
    const lmq_block_q8_K *y = va;
    const __m256i k3 = _mm256_set1_epi8(3), k1 = _mm256_set1_epi8(1);
    float sum = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        __m256i acc = _mm256_setzero_si256();
        for (int j = 0; j < 2; j++) {
            const __m256i b = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * j));
            for (int l = 0; l < 4; l++) {
                const __m256i w = _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(b, 2 * l), k3), k1);
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pair_dots(w, y[i].qs + 128 * j + 32 * l), scale1(1)));
            }
        }
        sum = finish(sum, lmq_fp16_to_fp32(x[i].d), &y[i], acc);
    }
    *s = sum;
}

/* TQ1_0's trits (5 a byte in base 3) are decoded by the shared scalar
 * decoder; the dot is the vector one */
static void dot_tq1_0(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_tq1_0 *x = vw;
    const lmq_block_q8_K *y = va;
    float sum = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        int8_t q[LMQ_QK_K], sc[16];
        float d;
        lmq_iq_unpack(LMQ_TYPE_TQ1_0, &x[i], q, sc, &d);
        __m256i acc = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++)
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pair_dots(_mm256_loadu_si256((const __m256i *)(q + 32 * ib)),
                                                                    y[i].qs + 32 * ib),
                                                          scale1(1)));
        sum = finish(sum, d, &y[i], acc);
    }
    *s = sum;
}

void lmq_kernels_fill_iq_avx2(lmq_kernel_table *t)
{
    t->vec_dot[LMQ_TYPE_IQ2_XXS] = dot_iq2_xxs;
    t->vec_dot[LMQ_TYPE_IQ2_XS] = dot_iq2_xs;
    t->vec_dot[LMQ_TYPE_IQ2_S] = dot_iq2_s;
    t->vec_dot[LMQ_TYPE_IQ3_XXS] = dot_iq3_xxs;
    t->vec_dot[LMQ_TYPE_IQ3_S] = dot_iq3_s;
    t->vec_dot[LMQ_TYPE_IQ1_S] = dot_iq1_s;
    t->vec_dot[LMQ_TYPE_IQ1_M] = dot_iq1_m;
    t->vec_dot[LMQ_TYPE_TQ1_0] = dot_tq1_0;
    t->vec_dot[LMQ_TYPE_TQ2_0] = dot_tq2_0;
}
