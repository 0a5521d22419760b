/* panel_avx2.c — AVX2 kernels for the row-interleaved panels and the
 * repacked blocks of panel.c (batched products and, for repacked weights,
 * generation; and the f32 panels of the float types' batches, at the
 * end): 16 weight rows as two halves of 8 int32 lanes, up to 4 tokens
 * per pass over the weights (8 for the signed-weight repacked types q8_0,
 * iq4_nl and iq4_xs).
 *
 * Plain AVX2 has no vpdpbusd. vpmaddubsw multiplies u8 x s8 and adds
 * adjacent pairs into int16 with signed saturation, so each kernel keeps its
 * operands in ranges where no pair (and no int16 sum of pairs) can reach
 * 2^15, and only then widens with vpmaddwd, either against 1 or against the
 * sub-block scale duplicated in both halves of the lane (which multiplies
 * and widens in one instruction):
 *   - panels (activations biased, u = q + 128 in 0..255): weights of at most
 *     5 bits (q2_K..q6_K, q4_0, q5_0): |pair| <= 255 * 32 * 2 = 16320, two
 *     pairs summed in int16 before widening (four when |w| <= 16);
 *   - repacked q4_0 / q4_K (codes 0..15, activations signed): |pair| <=
 *     15 * 128 * 2 = 3840, the 8 pairs of a 32-quant sub-block summed in
 *     int16 (30720);
 *   - repacked q5_K and q5_0 (codes 0..31): |pair| <= 31 * 128 * 2, four
 *     pairs summed in int16 (31744); repacked q2_K / q3_K (codes 0..3 /
 *     0..7): four pairs (7168); repacked q6_K (codes 0..63, the -32 through
 *     q8_K's bsums): |pair| <= 63 * 128 * 2, two pairs (32256);
 *   - repacked q8_0 / iq4_nl (signed 8-bit weights, q8_0 activations in
 *     -127..127): |w| x sign(a, w), |pair| <= 128 * 127 * 2, widened per
 *     group;
 *   - repacked iq4_xs (grid values -127..113; q8_K activations in
 *     -127..127: lmq_quantize_row_q8_K_ref scales the largest magnitude to
 *     -127 and rounds the rest within it, so -128 never occurs): as q8_0,
 *     |w| x sign(a, w), |pair| <= 127 * 127 * 2, widened per group by
 *     vpmaddwd against the sub-block's scale, which needs neither grid + 128
 *     nor the 128 x scale x sum(activations) correction.
 * The 8-bit panels (q8_0, iq4_nl) have no AVX2 kernel here (repacked
 * weights take them).
 * The integer sums are exact, so they equal the reference's; the float
 * operations per (row, token, block) are lmq_panel_gemm_ref's and
 * lmq_rpanel_gemm_ref's in the same order, so the results equal the scalar
 * reference bit for bit (tests/test_kernels.c, every ISA, odd shapes). */
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "kernels.h"
#include "x86_simd.h"
#include "x86_rpanel.h"
#include "x86_unpack.h"

#ifdef LMQ_SANITIZED
#define K2_INLINE static inline
#define K2_UNROLL(n)
#else
#define K2_INLINE static inline __attribute__((always_inline))
#define K2_UNROLL(n) _Pragma(K2_STR(GCC unroll n))
#endif
#define K2_STR(x) #x
/* Keeps v in a register at this point: GCC otherwise reassociates a chain of
 * integer adds into a tree after computing all its terms, which needs more
 * than 16 registers and spills (the 4-token q4_0 kernel did). */
#define K2_KEEP(v) __asm__("" : "+x"(v))
#define K2_TOK 4 /* tokens per pass: 3 x 4 accumulators + weights + activations fit the 16 registers */
/* The last n < K2_TOK tokens: fn(T, ...) with T = n as a constant. */
#define K2_TAIL(n, fn, ...)                \
    switch (n) {                           \
    case 1: fn(1, __VA_ARGS__); break;     \
    case 2: fn(2, __VA_ARGS__); break;     \
    case 3: fn(3, __VA_ARGS__); break;     \
    default: break;                        \
    }
/* The last n < 8 tokens (the 8-token kernels). */
#define K2_TAIL8(n, fn, ...)               \
    switch (n) {                           \
    case 1: fn(1, __VA_ARGS__); break;     \
    case 2: fn(2, __VA_ARGS__); break;     \
    case 3: fn(3, __VA_ARGS__); break;     \
    case 4: fn(4, __VA_ARGS__); break;     \
    case 5: fn(5, __VA_ARGS__); break;     \
    case 6: fn(6, __VA_ARGS__); break;     \
    case 7: fn(7, __VA_ARGS__); break;     \
    default: break;                        \
    }

K2_INLINE __m256i k2_bcast32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* Each lane's low int16 copied into its high int16 (a scale for vpmaddwd). */
K2_INLINE __m256i k2_dup16(__m256i v)
{
    return _mm256_shuffle_epi8(v, _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 0, 1, 0, 1, 4,
                                                   5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13));
}

/* Stores rows 8 hf .. 8 hf + 7 of y (row index within the panel) that are < nr. */
K2_INLINE void k2_store(float *y, __m256 v, int hf, int nr)
{
    const int live = nr - 8 * hf;
    if (live >= 8) {
        _mm256_storeu_ps(y + 8 * hf, v);
    } else if (live > 0) {
        const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        _mm256_maskstore_ps(y + 8 * hf, _mm256_cmpgt_epi32(_mm256_set1_epi32(live), idx), v);
    }
}

/* ================================================================
 * Panels (lmq_panel32 / lmq_panel256; activations biased by +128)
 * ================================================================ */

/* 32-element blocks of weights with |w| <= 16 (q4_0, q5_0): four pairs per
 * int16 sum. */
K2_INLINE void k2_tile32(const int T, int64_t nb, const lmq_panel32 *p0, const uint8_t *act, int64_t a_stride,
                         float *y, int64_t y_stride, int nr)
{
    const __m256i one = _mm256_set1_epi16(1);
    for (int hf = 0; hf < 2 && 8 * hf < nr; hf++) {
        __m256 acc[K2_TOK];
K2_UNROLL(4)
        for (int t = 0; t < T; t++) acc[t] = _mm256_setzero_ps();
        const lmq_panel32 *p = p0;
        for (int64_t ib = 0; ib < nb; ib++, p++) {
            const uint8_t *ab = act + ib * (int64_t)sizeof(lmq_block_q8_0);
            const __m256i corr = _mm256_loadu_si256((const __m256i *)(p->corr + 8 * hf));
            __m256i is[K2_TOK];
K2_UNROLL(4)
            for (int t = 0; t < T; t++) is[t] = corr;
K2_UNROLL(2)
            for (int g0 = 0; g0 < 8; g0 += 4) {
                __m256i s[K2_TOK];
K2_UNROLL(4)
                for (int t = 0; t < T; t++) s[t] = _mm256_setzero_si256();
K2_UNROLL(4)
                for (int g = g0; g < g0 + 4; g++) {
                    const __m256i w = _mm256_loadu_si256((const __m256i *)(p->q[g][8 * hf]));
K2_UNROLL(4)
                    for (int t = 0; t < T; t++)
                        s[t] = _mm256_add_epi16(s[t], _mm256_maddubs_epi16(k2_bcast32(ab + t * a_stride + 2 + 4 * g), w));
                }
K2_UNROLL(4)
                for (int t = 0; t < T; t++) is[t] = _mm256_add_epi32(is[t], _mm256_madd_epi16(s[t], one));
            }
            const __m256 dw = _mm256_loadu_ps(p->d + 8 * hf);
K2_UNROLL(4)
            for (int t = 0; t < T; t++) {
                uint16_t dh;
                memcpy(&dh, ab + t * a_stride, 2);
                acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(x86_h2f(dh))), _mm256_cvtepi32_ps(is[t]),
                                         acc[t]);
            }
        }
K2_UNROLL(4)
        for (int t = 0; t < T; t++) k2_store(y + t * y_stride, acc[t], hf, nr);
    }
}

static void k2_gemm32(int64_t n_in, const void *panel, const void *act, int64_t a_stride, int nt, float *y,
                      int64_t y_stride, int nr)
{
    const int64_t nb = n_in / 32;
    const uint8_t *a = act;
    int t = 0;
    for (; t + K2_TOK <= nt; t += K2_TOK)
        k2_tile32(K2_TOK, nb, panel, a + t * a_stride, a_stride, y + t * y_stride, y_stride, nr);
    K2_TAIL(nt - t, k2_tile32, nb, panel, a + t * a_stride, a_stride, y + t * y_stride, y_stride, nr)
}

/* 256-element super-blocks: SUB quants per scale, PAIRS groups of 4 quants
 * summed in int16 before the scale multiplies them in (see the top). */
K2_INLINE void k2_tile256(const int T, const int SUB, const bool MIN, const int PAIRS, int64_t nb,
                          const lmq_panel256 *p0, const uint8_t *act, int64_t a_stride, float *y, int64_t y_stride,
                          int nr)
{
    for (int hf = 0; hf < 2 && 8 * hf < nr; hf++) {
        __m256 acc[K2_TOK];
K2_UNROLL(4)
        for (int t = 0; t < T; t++) acc[t] = _mm256_setzero_ps();
        const lmq_panel256 *p = p0;
        for (int64_t ib = 0; ib < nb; ib++, p++) {
            const lmq_block_q8_K *yb[K2_TOK];
K2_UNROLL(4)
            for (int t = 0; t < T; t++) yb[t] = (const lmq_block_q8_K *)(act + t * a_stride) + ib;
            __m256i tot[K2_TOK];
            const __m256i corr = _mm256_loadu_si256((const __m256i *)(p->corr + 8 * hf));
K2_UNROLL(4)
            for (int t = 0; t < T; t++) tot[t] = corr;
            for (int j = 0; j < 256 / SUB; j++) {
                const __m256i sc = k2_dup16(_mm256_loadu_si256((const __m256i *)(p->sc[j] + 8 * hf)));
K2_UNROLL(4)
                for (int g0 = j * SUB / 4; g0 < (j + 1) * SUB / 4; g0 += PAIRS) {
                    __m256i s[K2_TOK];
K2_UNROLL(4)
                    for (int t = 0; t < T; t++) s[t] = _mm256_setzero_si256();
K2_UNROLL(4)
                    for (int g = g0; g < g0 + PAIRS; g++) {
                        const __m256i w = _mm256_loadu_si256((const __m256i *)(p->q[g][8 * hf]));
K2_UNROLL(4)
                        for (int t = 0; t < T; t++)
                            s[t] = _mm256_add_epi16(s[t], _mm256_maddubs_epi16(k2_bcast32(yb[t]->qs + 4 * g), w));
                    }
K2_UNROLL(4)
                    for (int t = 0; t < T; t++) tot[t] = _mm256_add_epi32(tot[t], _mm256_madd_epi16(s[t], sc));
                }
            }
            const __m256 dw = _mm256_loadu_ps(p->d + 8 * hf);
K2_UNROLL(4)
            for (int t = 0; t < T; t++)
                acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(yb[t]->d)), _mm256_cvtepi32_ps(tot[t]),
                                         acc[t]);
            if (MIN) {
                const __m256 dm = _mm256_loadu_ps(p->dmin + 8 * hf);
K2_UNROLL(4)
                for (int t = 0; t < T; t++) {
                    __m256i mn = _mm256_setzero_si256();
K2_UNROLL(8)
                    for (int g = 0; g < 8; g++)
                        mn = _mm256_add_epi32(mn, _mm256_madd_epi16(k2_bcast32(yb[t]->bsums + 2 * g),
                                                                    _mm256_loadu_si256((const __m256i *)p->m[g][8 * hf])));
                    acc[t] = _mm256_fnmadd_ps(_mm256_mul_ps(dm, _mm256_set1_ps(yb[t]->d)), _mm256_cvtepi32_ps(mn),
                                              acc[t]);
                }
            }
        }
K2_UNROLL(4)
        for (int t = 0; t < T; t++) k2_store(y + t * y_stride, acc[t], hf, nr);
    }
}

#define K2_GEMM256(name, SUB, MIN, PAIRS)                                                                            \
    static void name(int64_t n_in, const void *panel, const void *act, int64_t a_stride, int nt, float *y,           \
                     int64_t y_stride, int nr)                                                                       \
    {                                                                                                                \
        const int64_t nb = n_in / 256;                                                                               \
        const uint8_t *a = act;                                                                                      \
        int t = 0;                                                                                                   \
        for (; t + K2_TOK <= nt; t += K2_TOK)                                                                        \
            k2_tile256(K2_TOK, SUB, MIN, PAIRS, nb, panel, a + t * a_stride, a_stride, y + t * y_stride, y_stride,   \
                       nr);                                                                                          \
        a += t * a_stride;                                                                                           \
        y += t * y_stride;                                                                                           \
        K2_TAIL(nt - t, k2_tile256, SUB, MIN, PAIRS, nb, panel, a, a_stride, y, y_stride, nr)                        \
    }

K2_GEMM256(k2_gemm_q4_K, 32, true, 4)  /* 0..15 */
K2_GEMM256(k2_gemm_q5_K, 32, true, 2)  /* 0..31 */
K2_GEMM256(k2_gemm_q2_K, 16, true, 4)  /* 0..3 */
K2_GEMM256(k2_gemm_q3_K, 16, false, 4) /* -4..3 */
K2_GEMM256(k2_gemm_q6_K, 16, false, 2) /* -32..31 */
/* the codebook and ternary types (lmq_iq_unpack's codes): int16 pair sums
 * of 255 x |q| x 2 must fit, so one group at a time up to |q| = 62 */
K2_GEMM256(k2_gemm_iq_s32p1, 32, false, 1) /* iq2_xxs +-43, iq3_xxs +-62 */
K2_GEMM256(k2_gemm_iq_s16p1, 16, false, 1) /* iq2_xs, iq2_s +-43 */
K2_GEMM256(k2_gemm_iq_s32p4, 32, false, 4) /* iq3_s +-15, iq1_s +-9, tq -1..2 */

/* ================================================================
 * Repacked 32-element blocks (lmq_rpanel4 / lmq_rpanel8; activations
 * signed, each (token, block) starting from -o * sum(activation quants))
 * ================================================================ */

/* MXFP4 (lmq_rpanelmx) goes the way of q4_0: its values + 12 (0..24) are
 * unsigned codes against the signed activations, each (token, block)
 * starting from -12 x sum(activation quants); |pair| <= 24 x 128 x 2, so
 * four groups' pairs are summed in int16 (24576) before each widening. */
/* q5_0 (lmq_rpanel5) likewise: codes q + 16 (0..31), from -16 x
 * sum(activation quants), |pair| <= 31 x 128 x 2, four groups' pairs in
 * int16 (31744). */
enum { K2R_Q4_0, K2R_IQ4_NL, K2R_Q8_0, K2R_MXFP4, K2R_Q5_0 };

/* The unsigned-code kinds: codes x signed activations summed in int16. */
#define K2R_CODES(KIND) ((KIND) == K2R_Q4_0 || (KIND) == K2R_MXFP4 || (KIND) == K2R_Q5_0)
/* Their offset o: each (token, block) starts from -o x sum(activations). */
#define K2R_OFF(KIND) ((KIND) == K2R_MXFP4 ? 12 : (KIND) == K2R_Q5_0 ? 16 : 8)
/* The kinds whose int16 sums take four groups, not eight: widened after
 * group 3. */
#define K2R_HALVES(KIND) ((KIND) == K2R_MXFP4 || (KIND) == K2R_Q5_0)

K2_INLINE int64_t k2_rblock_bytes(const int KIND)
{
    return KIND == K2R_Q8_0    ? (int64_t)sizeof(lmq_rpanel8)
           : KIND == K2R_MXFP4 ? (int64_t)sizeof(lmq_rpanelmx)
           : KIND == K2R_Q5_0  ? (int64_t)sizeof(lmq_rpanel5)
                               : (int64_t)sizeof(lmq_rpanel4);
}

/* The 8 rows' quants of group g (4g..4g+3 for g < 4, else 16 + 4(g - 4)..)
 * of a repacked block, half hf: q4_0 codes 0..15, MXFP4 values + 12,
 * iq4_nl and q8_0 signed values. */
K2_INLINE __m256i k2_rgroup(const int KIND, const uint8_t *p, int g, int hf)
{
    if (KIND == K2R_Q5_0) { /* kr_q5_codes's bits, one group */
        const uint8_t(*q)[LMQ_PANEL_ROWS][4] = ((const lmq_rpanel5 *)p)->q;
        const __m256i m5 = _mm256_set1_epi8(0x1F);
        if (g < 5) return _mm256_and_si256(_mm256_loadu_si256((const __m256i *)q[g][8 * hf]), m5);
        const __m256i b3 = _mm256_loadu_si256((const __m256i *)q[3][8 * hf]);
        const __m256i b4 = _mm256_loadu_si256((const __m256i *)q[4][8 * hf]);
        const __m256i bg = _mm256_loadu_si256((const __m256i *)q[g - 5][8 * hf]);
        const __m256i lo = _mm256_srli_epi16(_mm256_andnot_si256(m5, bg), 5);
        if (g == 5) return _mm256_or_si256(lo, _mm256_srli_epi16(_mm256_and_si256(b3, _mm256_set1_epi8(0x60)), 2));
        if (g == 6) return _mm256_or_si256(lo, _mm256_srli_epi16(_mm256_and_si256(b4, _mm256_set1_epi8(0x60)), 2));
        const __m256i m80 = _mm256_set1_epi8((char)0x80);
        return _mm256_or_si256(_mm256_or_si256(lo, _mm256_srli_epi16(_mm256_and_si256(b3, m80), 4)),
                               _mm256_srli_epi16(_mm256_and_si256(b4, m80), 3));
    }
    if (KIND == K2R_Q8_0)
        return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)((const lmq_rpanel8 *)p)->u[g][8 * hf]),
                                _mm256_set1_epi8((char)0x80));
    const __m256i v = KIND == K2R_MXFP4
                          ? _mm256_loadu_si256((const __m256i *)((const lmq_rpanelmx *)p)->u[g & 3][8 * hf])
                          : _mm256_loadu_si256((const __m256i *)((const lmq_rpanel4 *)p)->u[g & 3][8 * hf]);
    const __m256i c = _mm256_and_si256(g < 4 ? v : _mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F));
    if (KIND == K2R_MXFP4)
        return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_add_epi8(
                                       _mm_loadu_si128((const __m128i *)lmq_mxfp4_values), _mm_set1_epi8(12))),
                                   c);
    if (KIND != K2R_IQ4_NL) return c;
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)lmq_iq4nl_values)), c);
}


/* The weight scales of rows 8 hf .. 8 hf + 7 of a repacked block. */
K2_INLINE __m256 k2_rscale(const int KIND, const uint8_t *p, int hf)
{
    if (KIND == K2R_MXFP4) return kr_e8m0_half(((const lmq_rpanelmx *)p)->e + 8 * hf);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + 8 * hf)));
}

/* NH halves (2: both in one pass over the weights, for one token; 1: the
 * halves one after the other, for 4 tokens without spilling) x T tokens. */
K2_INLINE void k2_rtile_h(const int NH, const int T, const int KIND, int64_t nb, const uint8_t *chunk,
                          const uint8_t *act, int64_t a_stride, const int32_t *asum, float *y, int64_t y_stride, int nr,
                          int hf0)
{
    const __m256i one = _mm256_set1_epi16(1);
    const int64_t cb = k2_rblock_bytes(KIND);
    __m256 acc[2][K2_TOK];
K2_UNROLL(2)
    for (int h = 0; h < NH; h++)
K2_UNROLL(4)
        for (int t = 0; t < T; t++) acc[h][t] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        const uint8_t *p = chunk + ib * cb;
        const uint8_t *ab[K2_TOK];
K2_UNROLL(4)
        for (int t = 0; t < T; t++) ab[t] = act + t * a_stride + ib * (int64_t)sizeof(lmq_block_q8_0);
        __m256i is[2][K2_TOK];
        if (K2R_CODES(KIND)) {
            /* codes x signed activations: q4_0's 8 groups of pairs fit one int16 sum, MXFP4's 4 */
            __m256i s[2][K2_TOK];
K2_UNROLL(2)
            for (int h = 0; h < NH; h++)
K2_UNROLL(4)
                for (int t = 0; t < T; t++) {
                    s[h][t] = _mm256_setzero_si256();
                    is[h][t] = _mm256_set1_epi32(-K2R_OFF(KIND) * asum[t * nb + ib]);
                }
K2_UNROLL(8)
            for (int g = 0; g < 8; g++) {
                if (K2R_HALVES(KIND) && g == 4)
K2_UNROLL(2)
                    for (int h = 0; h < NH; h++)
K2_UNROLL(4)
                        for (int t = 0; t < T; t++) {
                            is[h][t] = _mm256_add_epi32(is[h][t], _mm256_madd_epi16(s[h][t], one));
                            s[h][t] = _mm256_setzero_si256();
                        }
K2_UNROLL(2)
                for (int h = 0; h < NH; h++) {
                    const __m256i w = k2_rgroup(KIND, p, g, hf0 + h);
K2_UNROLL(4)
                    for (int t = 0; t < T; t++) {
                        s[h][t] = _mm256_add_epi16(s[h][t], _mm256_maddubs_epi16(w, k2_bcast32(ab[t] + 2 + 4 * g)));
                        K2_KEEP(s[h][t]);
                    }
                }
            }
K2_UNROLL(2)
            for (int h = 0; h < NH; h++)
K2_UNROLL(4)
                for (int t = 0; t < T; t++) is[h][t] = _mm256_add_epi32(is[h][t], _mm256_madd_epi16(s[h][t], one));
        } else {
            /* signed weights: |w| x sign(a, w), widened per group */
K2_UNROLL(2)
            for (int h = 0; h < NH; h++)
K2_UNROLL(4)
                for (int t = 0; t < T; t++) is[h][t] = _mm256_setzero_si256();
K2_UNROLL(8)
            for (int g = 0; g < 8; g++)
K2_UNROLL(2)
                for (int h = 0; h < NH; h++) {
                    const __m256i w = k2_rgroup(KIND, p, g, hf0 + h), wa = _mm256_sign_epi8(w, w);
K2_UNROLL(4)
                    for (int t = 0; t < T; t++) {
                        const __m256i a = _mm256_sign_epi8(k2_bcast32(ab[t] + 2 + 4 * g), w);
                        is[h][t] = _mm256_add_epi32(is[h][t], _mm256_madd_epi16(_mm256_maddubs_epi16(wa, a), one));
                        K2_KEEP(is[h][t]);
                    }
                }
        }
K2_UNROLL(2)
        for (int h = 0; h < NH; h++) {
            const __m256 dw = k2_rscale(KIND, p, hf0 + h);
K2_UNROLL(4)
            for (int t = 0; t < T; t++) {
                uint16_t dh;
                memcpy(&dh, ab[t], 2);
                acc[h][t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(x86_h2f(dh))), _mm256_cvtepi32_ps(is[h][t]),
                                            acc[h][t]);
            }
        }
    }
K2_UNROLL(2)
    for (int h = 0; h < NH; h++)
K2_UNROLL(4)
        for (int t = 0; t < T; t++) k2_store(y + t * y_stride, acc[h][t], hf0 + h, nr);
}

/* Several tokens (T <= 4), the halves one after the other: the tokens'
 * activation scales (f16 -> f32) and q4_0's -8 x block sums are taken once
 * per slice of K2_SLICE blocks for both halves into small arrays, so the
 * block loop broadcasts them from memory instead of converting them per
 * half and block (these float and integer operations per block, not the
 * products, bounded the 32-element types; see docs/PERF.md), and each
 * token's sum of the block lives in one register. The float operations per
 * (row, token, block) stay the reference's. */
#define K2_SLICE 64
K2_INLINE void k2_rtile_tok(const int T, const int KIND, int64_t nb, const uint8_t *chunk, const uint8_t *act,
                            int64_t a_stride, const int32_t *asum, float *y, int64_t y_stride, int nr)
{
    const __m256i one = _mm256_set1_epi16(1);
    const int64_t cb = k2_rblock_bytes(KIND);
    const int64_t ab_size = (int64_t)sizeof(lmq_block_q8_0);
    const int nh = nr > 8 ? 2 : 1;
    _Alignas(32) float dy[K2_TOK][K2_SLICE];
    _Alignas(32) int32_t off[K2_TOK][K2_SLICE];
    _Alignas(32) uint16_t dh[K2_SLICE];
    __m256 accm[2][K2_TOK];
K2_UNROLL(4)
    for (int t = 0; t < T; t++) accm[0][t] = accm[1][t] = _mm256_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += K2_SLICE) {
        const int n = nb - b0 < K2_SLICE ? (int)(nb - b0) : K2_SLICE;
        for (int t = 0; t < T; t++) {
            const uint8_t *ab = act + t * a_stride + b0 * ab_size;
            for (int b = 0; b < n; b++) memcpy(&dh[b], ab + b * ab_size, 2);
            for (int b = n; b < ((n + 7) & ~7); b++) dh[b] = 0;
            for (int b = 0; b < n; b += 8)
                _mm256_store_ps(dy[t] + b, _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(dh + b))));
            if (K2R_CODES(KIND))
                for (int b = 0; b < n; b++) off[t][b] = -K2R_OFF(KIND) * asum[t * nb + b0 + b];
        }
        for (int h = 0; h < nh; h++) {
            __m256 acc[K2_TOK];
K2_UNROLL(4)
            for (int t = 0; t < T; t++) acc[t] = accm[h][t];
            for (int b = 0; b < n; b++) {
                const uint8_t *p = chunk + (b0 + b) * cb;
                const uint8_t *ab = act + (b0 + b) * ab_size + 2;
                __m256i is[K2_TOK];
                if (K2R_CODES(KIND)) {
                    /* codes x signed activations: q4_0's 8 groups of pairs fit one int16 sum, MXFP4's 4
                     * (the first four groups' sum, widened, waits in lo) */
                    __m256i lo[K2_TOK];
K2_UNROLL(8)
                    for (int g = 0; g < 8; g++) {
                        const __m256i w = k2_rgroup(KIND, p, g, h);
K2_UNROLL(4)
                        for (int t = 0; t < T; t++) {
                            if (K2R_HALVES(KIND) && g == 4)
                                lo[t] = _mm256_add_epi32(_mm256_madd_epi16(is[t], one), _mm256_set1_epi32(off[t][b]));
                            const __m256i m = _mm256_maddubs_epi16(w, k2_bcast32(ab + t * a_stride + 4 * g));
                            is[t] = g && !(K2R_HALVES(KIND) && g == 4) ? _mm256_add_epi16(is[t], m) : m;
                            K2_KEEP(is[t]);
                        }
                    }
K2_UNROLL(4)
                    for (int t = 0; t < T; t++)
                        is[t] = _mm256_add_epi32(_mm256_madd_epi16(is[t], one),
                                                 K2R_HALVES(KIND) ? lo[t] : _mm256_set1_epi32(off[t][b]));
                } else {
                    /* signed weights: |w| x sign(a, w), widened per group */
K2_UNROLL(8)
                    for (int g = 0; g < 8; g++) {
                        const __m256i w = k2_rgroup(KIND, p, g, h), wa = _mm256_sign_epi8(w, w);
K2_UNROLL(4)
                        for (int t = 0; t < T; t++) {
                            const __m256i a = _mm256_sign_epi8(k2_bcast32(ab + t * a_stride + 4 * g), w);
                            const __m256i m = _mm256_madd_epi16(_mm256_maddubs_epi16(wa, a), one);
                            is[t] = g ? _mm256_add_epi32(is[t], m) : m;
                            K2_KEEP(is[t]);
                        }
                    }
                }
                const __m256 dw = k2_rscale(KIND, p, h);
K2_UNROLL(4)
                for (int t = 0; t < T; t++)
                    acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(dy[t][b])), _mm256_cvtepi32_ps(is[t]),
                                             acc[t]);
            }
K2_UNROLL(4)
            for (int t = 0; t < T; t++) accm[h][t] = acc[t];
        }
    }
K2_UNROLL(2)
    for (int h = 0; h < nh; h++)
K2_UNROLL(4)
        for (int t = 0; t < T; t++) k2_store(y + t * y_stride, accm[h][t], h, nr);
}

K2_INLINE void k2_rtile(const int T, const int KIND, int64_t nb, const uint8_t *chunk, const uint8_t *act,
                        int64_t a_stride, const int32_t *asum, float *y, int64_t y_stride, int nr)
{
    if (T == 1 && nr > 8) {
        k2_rtile_h(2, 1, KIND, nb, chunk, act, a_stride, asum, y, y_stride, nr, 0);
        return;
    }
    k2_rtile_tok(T, KIND, nb, chunk, act, a_stride, asum, y, y_stride, nr);
}

#define K2_RGEMM(name, KIND)                                                                                         \
    static void name(int64_t nb, const void *chunk, const void *act, int64_t a_stride, const int32_t *asum, int nt,  \
                     float *y, int64_t y_stride, int nr)                                                             \
    {                                                                                                                \
        const uint8_t *a = act;                                                                                      \
        int t = 0;                                                                                                   \
        for (; t + K2_TOK <= nt; t += K2_TOK)                                                                        \
            k2_rtile(K2_TOK, KIND, nb, chunk, a + t * a_stride, a_stride, asum + t * nb, y + t * y_stride, y_stride, \
                     nr);                                                                                            \
        a += t * a_stride;                                                                                           \
        y += t * y_stride;                                                                                           \
        asum += t * nb;                                                                                              \
        K2_TAIL(nt - t, k2_rtile, KIND, nb, chunk, a, a_stride, asum, y, y_stride, nr)                               \
    }

/* Signed 8-bit weights (q8_0, iq4_nl), up to K2_TOK_S8 tokens per pass: the
 * weight work per group (load, xor or lookup, vpsignb) is shared by more
 * tokens than k2_rtile_tok's four, and the float accumulators, touched once
 * per block and token, live in memory. Same float operations per (row,
 * token, block) as the reference, in the same order. */
#define K2_TOK_S8 8
K2_INLINE void k2_rtile_s8(const int T, const int KIND, int64_t nb, const uint8_t *chunk, const uint8_t *act,
                           int64_t a_stride, float *y, int64_t y_stride, int nr)
{
    const __m256i one = _mm256_set1_epi16(1);
    const int64_t cb = k2_rblock_bytes(KIND);
    const int64_t ab_size = (int64_t)sizeof(lmq_block_q8_0);
    const int nh = nr > 8 ? 2 : 1;
    _Alignas(32) float dy[K2_TOK_S8][K2_SLICE];
    _Alignas(32) uint16_t dh[K2_SLICE];
    _Alignas(32) float acc[2][K2_TOK_S8][8];
    memset(acc, 0, sizeof acc);
    for (int64_t b0 = 0; b0 < nb; b0 += K2_SLICE) {
        const int n = nb - b0 < K2_SLICE ? (int)(nb - b0) : K2_SLICE;
        for (int t = 0; t < T; t++) {
            const uint8_t *ab = act + t * a_stride + b0 * ab_size;
            for (int b = 0; b < n; b++) memcpy(&dh[b], ab + b * ab_size, 2);
            for (int b = n; b < ((n + 7) & ~7); b++) dh[b] = 0;
            for (int b = 0; b < n; b += 8)
                _mm256_store_ps(dy[t] + b, _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(dh + b))));
        }
        for (int h = 0; h < nh; h++)
            for (int b = 0; b < n; b++) {
                const uint8_t *p = chunk + (b0 + b) * cb;
                const uint8_t *ab = act + (b0 + b) * ab_size + 2;
                __m256i is[K2_TOK_S8];
K2_UNROLL(8)
                for (int g = 0; g < 8; g++) {
                    const __m256i w = k2_rgroup(KIND, p, g, h), wa = _mm256_sign_epi8(w, w);
K2_UNROLL(8)
                    for (int t = 0; t < T; t++) {
                        const __m256i a = _mm256_sign_epi8(k2_bcast32(ab + t * a_stride + 4 * g), w);
                        const __m256i m = _mm256_madd_epi16(_mm256_maddubs_epi16(wa, a), one);
                        is[t] = g ? _mm256_add_epi32(is[t], m) : m;
                        K2_KEEP(is[t]);
                    }
                }
                const __m256 dw = k2_rscale(KIND, p, h);
K2_UNROLL(8)
                for (int t = 0; t < T; t++)
                    _mm256_store_ps(acc[h][t], _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(dy[t][b])),
                                                               _mm256_cvtepi32_ps(is[t]), _mm256_load_ps(acc[h][t])));
            }
    }
    for (int h = 0; h < nh; h++)
K2_UNROLL(8)
        for (int t = 0; t < T; t++) k2_store(y + t * y_stride, _mm256_load_ps(acc[h][t]), h, nr);
}

/* q8_0 / iq4_nl: one token as before, else up to K2_TOK_S8 tokens per pass. */
K2_INLINE void k2_rtile_s8x(const int T, const int KIND, int64_t nb, const uint8_t *chunk, const uint8_t *act,
                            int64_t a_stride, const int32_t *asum, float *y, int64_t y_stride, int nr)
{
    if (T == 1) {
        k2_rtile(1, KIND, nb, chunk, act, a_stride, asum, y, y_stride, nr);
        return;
    }
    k2_rtile_s8(T, KIND, nb, chunk, act, a_stride, y, y_stride, nr);
}

#define K2_RGEMM_S8(name, KIND)                                                                                      \
    static void name(int64_t nb, const void *chunk, const void *act, int64_t a_stride, const int32_t *asum, int nt,  \
                     float *y, int64_t y_stride, int nr)                                                             \
    {                                                                                                                \
        const uint8_t *a = act;                                                                                      \
        int t = 0;                                                                                                   \
        for (; t + K2_TOK_S8 <= nt; t += K2_TOK_S8)                                                                  \
            k2_rtile_s8x(K2_TOK_S8, KIND, nb, chunk, a + t * a_stride, a_stride, asum, y + t * y_stride, y_stride,   \
                         nr);                                                                                        \
        a += t * a_stride;                                                                                           \
        y += t * y_stride;                                                                                           \
        K2_TAIL8(nt - t, k2_rtile_s8x, KIND, nb, chunk, a, a_stride, asum, y, y_stride, nr)                         \
    }

K2_RGEMM(k2_rgemm_q4_0, K2R_Q4_0)
K2_RGEMM_S8(k2_rgemm_iq4_nl, K2R_IQ4_NL)
K2_RGEMM_S8(k2_rgemm_q8_0, K2R_Q8_0)
K2_RGEMM(k2_rgemm_mxfp4, K2R_MXFP4)
K2_RGEMM(k2_rgemm_q5_0, K2R_Q5_0)

/* The float step of a q4_K / q5_K super-block for rows r0..r0 + 7 and T
 * tokens: acc += d dy x tot - dmin dy x (mins . pair sums), the mins pairs
 * m[q][r] against the token's four pair sums at ps + t * ps_stride. */
K2_INLINE void k2_kmin_acc(const int T, const uint16_t *d, const uint16_t *dmin, const int8_t (*m)[LMQ_PANEL_ROWS][2],
                           int r0, const int32_t *ps, int64_t ps_stride, const lmq_block_q8_K *const *yb,
                           const __m256i *tot, __m256 *acc)
{
    __m256i mm[4];
K2_UNROLL(4)
    for (int q = 0; q < 4; q++) mm[q] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)m[q][r0]));
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(d + r0)));
    const __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(dmin + r0)));
K2_UNROLL(4)
    for (int t = 0; t < T; t++) {
        __m256i bias = _mm256_setzero_si256();
K2_UNROLL(4)
        for (int q = 0; q < 4; q++)
            bias = _mm256_add_epi32(bias, _mm256_madd_epi16(mm[q], _mm256_set1_epi32(ps[t * ps_stride + q])));
        const __m256 dy = _mm256_set1_ps(yb[t]->d);
        acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dy), _mm256_cvtepi32_ps(tot[t]), acc[t]);
        acc[t] = _mm256_fnmadd_ps(_mm256_mul_ps(dm, dy), _mm256_cvtepi32_ps(bias), acc[t]);
    }
}

/* Repacked q4_K super-blocks (lmq_rpanelk4): per sub-block and token, 8
 * vpmaddubsw of codes 0..15 with the signed activations summed in int16,
 * one vpmaddwd with the sub-block's scale; the mins from the pairs of
 * 32-quant activation sums with vpmaddwd. NH halves x T tokens per pass as
 * in k2_rtile_h. */
K2_INLINE void k2_rtile_k4_h(const int NH, const int T, int64_t nb, const uint8_t *chunk, const uint8_t *act,
                             int64_t a_stride, const int32_t *psum, float *y, int64_t y_stride, int nr, int hf0)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc[2][K2_TOK];
K2_UNROLL(2)
    for (int h = 0; h < NH; h++)
K2_UNROLL(4)
        for (int t = 0; t < T; t++) acc[h][t] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        const lmq_rpanelk4 *p = (const lmq_rpanelk4 *)chunk + ib;
        const lmq_block_q8_K *yb[K2_TOK];
K2_UNROLL(4)
        for (int t = 0; t < T; t++) yb[t] = (const lmq_block_q8_K *)(act + t * a_stride) + ib;
        __m256i tot[2][K2_TOK];
K2_UNROLL(2)
        for (int h = 0; h < NH; h++)
K2_UNROLL(4)
            for (int t = 0; t < T; t++) tot[h][t] = _mm256_setzero_si256();
        /* chunk c: sub-block 2c in the low nibbles, 2c + 1 in the high ones;
         * one token takes both from the same loads (NN = 2), four tokens
         * one after the other (registers) */
        const int NN = NH == 2 ? 2 : 1;
K2_UNROLL(1)
        for (int c = 0; c < 4; c++)
K2_UNROLL(2)
            for (int n0 = 0; n0 < 2; n0 += NN) {
                __m256i s[2][2][K2_TOK]; /* [nibble - n0][half][token] */
K2_UNROLL(2)
                for (int n = 0; n < NN; n++)
K2_UNROLL(2)
                    for (int h = 0; h < NH; h++)
K2_UNROLL(4)
                        for (int t = 0; t < T; t++) s[n][h][t] = _mm256_setzero_si256();
K2_UNROLL(8)
                for (int g = 0; g < 8; g++)
K2_UNROLL(2)
                    for (int h = 0; h < NH; h++) {
                        if (NH == 2 && n0 == 0 && h == 0) /* one token streams: the line 2 KiB ahead */
                            _mm_prefetch((const char *)p->u[c][g] + 2048, _MM_HINT_T0);
                        const __m256i v = _mm256_loadu_si256((const __m256i *)p->u[c][g][8 * (hf0 + h)]);
K2_UNROLL(2)
                        for (int n = 0; n < NN; n++) {
                            const __m256i u = _mm256_and_si256(n0 + n ? _mm256_srli_epi16(v, 4) : v, m4);
K2_UNROLL(4)
                            for (int t = 0; t < T; t++)
                                s[n][h][t] = _mm256_add_epi16(
                                    s[n][h][t],
                                    _mm256_maddubs_epi16(u, k2_bcast32(yb[t]->qs + 64 * c + 32 * (n0 + n) + 4 * g)));
K2_UNROLL(4)
                            for (int t = 0; t < T; t++) K2_KEEP(s[n][h][t]);
                        }
                    }
K2_UNROLL(2)
                for (int h = 0; h < NH; h++)
K2_UNROLL(2)
                    for (int n = 0; n < NN; n++) {
                        const __m256i sc = k2_dup16(_mm256_cvtepi8_epi32(
                            _mm_loadl_epi64((const __m128i *)(p->sc[2 * c + n0 + n] + 8 * (hf0 + h)))));
K2_UNROLL(4)
                        for (int t = 0; t < T; t++)
                            tot[h][t] = _mm256_add_epi32(tot[h][t], _mm256_madd_epi16(s[n][h][t], sc));
                    }
            }
K2_UNROLL(2)
        for (int h = 0; h < NH; h++)
            k2_kmin_acc(T, p->d, p->dmin, p->m, 8 * (hf0 + h), psum + ib * 4, nb * 4, yb, tot[h], acc[h]);
    }
K2_UNROLL(2)
    for (int h = 0; h < NH; h++)
K2_UNROLL(4)
        for (int t = 0; t < T; t++) k2_store(y + t * y_stride, acc[h][t], hf0 + h, nr);
}

/* Several tokens: the halves one after the other, one sub-block at a time
 * (fewer live registers than k2_rtile_k4_h; measured faster for 4 tokens). */
K2_INLINE void k2_rtile_k4_tok(const int T, int64_t nb, const uint8_t *chunk, const uint8_t *act, int64_t a_stride,
                           const int32_t *psum, float *y, int64_t y_stride, int nr)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int hf = 0; hf < 2 && 8 * hf < nr; hf++) {
        __m256 acc[K2_TOK];
K2_UNROLL(4)
        for (int t = 0; t < T; t++) acc[t] = _mm256_setzero_ps();
        for (int64_t ib = 0; ib < nb; ib++) {
            const lmq_rpanelk4 *p = (const lmq_rpanelk4 *)chunk + ib;
            const lmq_block_q8_K *yb[K2_TOK];
K2_UNROLL(4)
            for (int t = 0; t < T; t++) yb[t] = (const lmq_block_q8_K *)(act + t * a_stride) + ib;
            __m256i tot[K2_TOK];
K2_UNROLL(4)
            for (int t = 0; t < T; t++) tot[t] = _mm256_setzero_si256();
            for (int j = 0; j < 8; j++) {
                const int c = j / 2, hi = j % 2;
                __m256i s[K2_TOK];
K2_UNROLL(4)
                for (int t = 0; t < T; t++) s[t] = _mm256_setzero_si256();
K2_UNROLL(8)
                for (int h = 0; h < 8; h++) {
                    const __m256i v = _mm256_loadu_si256((const __m256i *)p->u[c][h][8 * hf]);
                    const __m256i u = _mm256_and_si256(hi ? _mm256_srli_epi16(v, 4) : v, m4);
K2_UNROLL(4)
                    for (int t = 0; t < T; t++) {
                        const __m256i a = k2_bcast32(yb[t]->qs + 64 * c + 32 * hi + 4 * h);
                        s[t] = _mm256_add_epi16(s[t], _mm256_maddubs_epi16(u, a));
                    }
                }
                const __m256i sc = k2_dup16(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p->sc[j] + 8 * hf))));
K2_UNROLL(4)
                for (int t = 0; t < T; t++) tot[t] = _mm256_add_epi32(tot[t], _mm256_madd_epi16(s[t], sc));
            }
            k2_kmin_acc(T, p->d, p->dmin, p->m, 8 * hf, psum + ib * 4, nb * 4, yb, tot, acc);
        }
K2_UNROLL(4)
        for (int t = 0; t < T; t++) k2_store(y + t * y_stride, acc[t], hf, nr);
    }
}

K2_INLINE void k2_rtile_k4(const int T, int64_t nb, const uint8_t *chunk, const uint8_t *act, int64_t a_stride,
                           const int32_t *psum, float *y, int64_t y_stride, int nr)
{
    if (T == 1 && nr > 8) {
        k2_rtile_k4_h(2, 1, nb, chunk, act, a_stride, psum, y, y_stride, nr, 0);
        return;
    }
    k2_rtile_k4_tok(T, nb, chunk, act, a_stride, psum, y, y_stride, nr);
}

static void k2_rgemm_q4_K(int64_t nb, const void *chunk, const void *act, int64_t a_stride, const int32_t *psum,
                          int nt, float *y, int64_t y_stride, int nr)
{
    const uint8_t *a = act;
    int t = 0;
    for (; t + K2_TOK <= nt; t += K2_TOK)
        k2_rtile_k4(K2_TOK, nb, chunk, a + t * a_stride, a_stride, psum + t * nb * 4, y + t * y_stride, y_stride, nr);
    a += t * a_stride;
    y += t * y_stride;
    psum += t * nb * 4;
    K2_TAIL(nt - t, k2_rtile_k4, nb, chunk, a, a_stride, psum, y, y_stride, nr)
}

/* Repacked q6_K super-blocks (lmq_rpanelq6): per 16-quant sub-block and 8
 * rows, three loads give the four 4-quant groups' codes 0..63 (three ands;
 * the fourth group's code gathered from the three bytes' top 2 bits: three
 * and-nots, three shifts, two ors). Per token, four vpmaddubsw of the codes with
 * the signed activations, summed two by two in int16 (|pair| <= 63 x 128 x 2,
 * two pairs 32256), each sum widened by vpmaddwd against the sub-block's
 * scale duplicated in both halves of the lane; the -32 of the codes comes
 * off as vpmaddwd of 32 x the scale pairs with the q8_K row's bsums. NH
 * halves x T tokens per pass as in k2_rtile_h; one token streams the chunk
 * in order and prefetches 2 KiB ahead. */

K2_INLINE void k2_rtile_q6_h(const int NH, const int T, int64_t nb, const uint8_t *chunk, const uint8_t *act,
                             int64_t a_stride, float *y, int64_t y_stride, int nr, int hf0)
{
    const __m256i duplo = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 0, 1, 0, 1, 4, 5, 4, 5,
                                           8, 9, 8, 9, 12, 13, 12, 13);
    const __m256i duphi = _mm256_setr_epi8(2, 3, 2, 3, 6, 7, 6, 7, 10, 11, 10, 11, 14, 15, 14, 15, 2, 3, 2, 3, 6, 7,
                                           6, 7, 10, 11, 10, 11, 14, 15, 14, 15);
    __m256 acc[2][K2_TOK];
K2_UNROLL(2)
    for (int h = 0; h < NH; h++)
K2_UNROLL(4)
        for (int t = 0; t < T; t++) acc[h][t] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        const lmq_rpanelq6 *p = (const lmq_rpanelq6 *)chunk + ib;
        const lmq_block_q8_K *yb[K2_TOK];
K2_UNROLL(4)
        for (int t = 0; t < T; t++) yb[t] = (const lmq_block_q8_K *)(act + t * a_stride) + ib;
        if (NH == 2) /* the scales of the block 2 KiB ahead (the codes' lines are prefetched below) */
            for (int o = 0; o < (int)offsetof(lmq_rpanelq6, q); o += 64) _mm_prefetch((const char *)p + 2048 + o, _MM_HINT_T0);
        __m256i tot[2][K2_TOK];
K2_UNROLL(2)
        for (int h = 0; h < NH; h++)
K2_UNROLL(4)
            for (int t = 0; t < T; t++) tot[h][t] = _mm256_setzero_si256();
K2_UNROLL(1)
        for (int pp = 0; pp < 8; pp++) {
            __m256i sv[2];
K2_UNROLL(2)
            for (int h = 0; h < NH; h++) {
                sv[h] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p->sc[pp][8 * (hf0 + h)]));
                const __m256i s32 = _mm256_slli_epi16(sv[h], 5);
K2_UNROLL(4)
                for (int t = 0; t < T; t++)
                    tot[h][t] = _mm256_sub_epi32(tot[h][t], _mm256_madd_epi16(s32, k2_bcast32(yb[t]->bsums + 2 * pp)));
            }
K2_UNROLL(2)
            for (int n = 0; n < 2; n++) {
                const int sb = 2 * pp + n;
K2_UNROLL(2)
                for (int h = 0; h < NH; h++) {
                    if (NH == 2 && h == 0)
                        for (int b = 0; b < 3; b++) _mm_prefetch((const char *)p->q[sb][b] + 2048, _MM_HINT_T0);
                    const __m256i sc = _mm256_shuffle_epi8(sv[h], n ? duphi : duplo);
                    __m256i c[4];
                    kr_q6_codes(p->q[sb][0][8 * (hf0 + h)], c);
K2_UNROLL(4)
                    for (int t = 0; t < T; t++) {
                        const int8_t *a = yb[t]->qs + 16 * sb;
                        const __m256i s01 = _mm256_add_epi16(_mm256_maddubs_epi16(c[0], k2_bcast32(a)),
                                                             _mm256_maddubs_epi16(c[1], k2_bcast32(a + 4)));
                        const __m256i s23 = _mm256_add_epi16(_mm256_maddubs_epi16(c[2], k2_bcast32(a + 8)),
                                                             _mm256_maddubs_epi16(c[3], k2_bcast32(a + 12)));
                        tot[h][t] = _mm256_add_epi32(
                            tot[h][t], _mm256_add_epi32(_mm256_madd_epi16(s01, sc), _mm256_madd_epi16(s23, sc)));
                        K2_KEEP(tot[h][t]);
                    }
                }
            }
        }
K2_UNROLL(2)
        for (int h = 0; h < NH; h++) {
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p->d + 8 * (hf0 + h))));
K2_UNROLL(4)
            for (int t = 0; t < T; t++)
                acc[h][t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(yb[t]->d)), _mm256_cvtepi32_ps(tot[h][t]),
                                            acc[h][t]);
        }
    }
K2_UNROLL(2)
    for (int h = 0; h < NH; h++)
K2_UNROLL(4)
        for (int t = 0; t < T; t++) k2_store(y + t * y_stride, acc[h][t], hf0 + h, nr);
}

K2_INLINE void k2_rtile_q6(const int T, int64_t nb, const uint8_t *chunk, const uint8_t *act, int64_t a_stride,
                           const int32_t *psum, float *y, int64_t y_stride, int nr)
{
    (void)psum; /* the q8_K rows' own bsums serve */
    if (T == 1 && nr > 8) {
        k2_rtile_q6_h(2, 1, nb, chunk, act, a_stride, y, y_stride, nr, 0);
        return;
    }
    for (int hf = 0; hf < 2 && 8 * hf < nr; hf++) k2_rtile_q6_h(1, T, nb, chunk, act, a_stride, y, y_stride, nr, hf);
}

static void k2_rgemm_q6_K(int64_t nb, const void *chunk, const void *act, int64_t a_stride, const int32_t *psum, int nt,
                          float *y, int64_t y_stride, int nr)
{
    const uint8_t *a = act;
    int t = 0;
    for (; t + K2_TOK <= nt; t += K2_TOK)
        k2_rtile_q6(K2_TOK, nb, chunk, a + t * a_stride, a_stride, psum, y + t * y_stride, y_stride, nr);
    a += t * a_stride;
    y += t * y_stride;
    K2_TAIL(nt - t, k2_rtile_q6, nb, chunk, a, a_stride, psum, y, y_stride, nr)
}

/* Repacked q5_K super-blocks (lmq_rpanelq5): per 32-quant sub-block and 8
 * rows, five loads give the eight 4-quant groups' codes 0..31 (groups 0..4:
 * one and each; 5..7 from the planes' top 3 bits: and-nots, ands, shifts
 * within 16-bit lanes after masking, ors). Per token, eight vpmaddubsw of
 * the codes with the signed activations summed four by four in int16
 * (|pair| <= 31 x 128 x 2, four pairs 31744), each sum widened by vpmaddwd
 * against the sub-block scale; the mins as q4_K's (pairs of 32-quant
 * activation sums). NH halves x T tokens per pass as in k2_rtile_h; one
 * token streams the chunk in order and prefetches 2 KiB ahead. */

K2_INLINE void k2_rtile_q5_h(const int NH, const int T, int64_t nb, const uint8_t *chunk, const uint8_t *act,
                             int64_t a_stride, const int32_t *psum, float *y, int64_t y_stride, int nr, int hf0)
{
    __m256 acc[2][K2_TOK];
K2_UNROLL(2)
    for (int h = 0; h < NH; h++)
K2_UNROLL(4)
        for (int t = 0; t < T; t++) acc[h][t] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        const lmq_rpanelq5 *p = (const lmq_rpanelq5 *)chunk + ib;
        const lmq_block_q8_K *yb[K2_TOK];
K2_UNROLL(4)
        for (int t = 0; t < T; t++) yb[t] = (const lmq_block_q8_K *)(act + t * a_stride) + ib;
        if (NH == 2) /* the scales of the block 2 KiB ahead (the codes' lines are prefetched below) */
            for (int o = 0; o < (int)offsetof(lmq_rpanelq5, q); o += 64) _mm_prefetch((const char *)p + 2048 + o, _MM_HINT_T0);
        __m256i tot[2][K2_TOK];
K2_UNROLL(2)
        for (int h = 0; h < NH; h++)
K2_UNROLL(4)
            for (int t = 0; t < T; t++) tot[h][t] = _mm256_setzero_si256();
K2_UNROLL(1)
        for (int j = 0; j < 8; j++) {
K2_UNROLL(2)
            for (int h = 0; h < NH; h++) {
                if (NH == 2 && h == 0)
                    for (int b = 0; b < 5; b++) _mm_prefetch((const char *)p->q[j][b] + 2048, _MM_HINT_T0);
                const __m256i sc =
                    k2_dup16(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p->sc[j] + 8 * (hf0 + h)))));
K2_UNROLL(2)
                for (int n = 0; n < 2; n++) {
                    __m256i c[4];
                    kr_q5_codes(p->q[j][0][8 * (hf0 + h)], n, c);
K2_UNROLL(4)
                    for (int t = 0; t < T; t++) {
                        const int8_t *a = yb[t]->qs + 32 * j + 16 * n;
                        __m256i s4 = _mm256_maddubs_epi16(c[0], k2_bcast32(a));
K2_UNROLL(3)
                        for (int g = 1; g < 4; g++) s4 = _mm256_add_epi16(s4, _mm256_maddubs_epi16(c[g], k2_bcast32(a + 4 * g)));
                        tot[h][t] = _mm256_add_epi32(tot[h][t], _mm256_madd_epi16(s4, sc));
                        K2_KEEP(tot[h][t]);
                    }
                }
            }
        }
K2_UNROLL(2)
        for (int h = 0; h < NH; h++)
            k2_kmin_acc(T, p->d, p->dmin, p->m, 8 * (hf0 + h), psum + ib * 4, nb * 4, yb, tot[h], acc[h]);
    }
K2_UNROLL(2)
    for (int h = 0; h < NH; h++)
K2_UNROLL(4)
        for (int t = 0; t < T; t++) k2_store(y + t * y_stride, acc[h][t], hf0 + h, nr);
}

K2_INLINE void k2_rtile_q5(const int T, int64_t nb, const uint8_t *chunk, const uint8_t *act, int64_t a_stride,
                           const int32_t *psum, float *y, int64_t y_stride, int nr)
{
    if (T == 1 && nr > 8) {
        k2_rtile_q5_h(2, 1, nb, chunk, act, a_stride, psum, y, y_stride, nr, 0);
        return;
    }
    for (int hf = 0; hf < 2 && 8 * hf < nr; hf++)
        k2_rtile_q5_h(1, T, nb, chunk, act, a_stride, psum, y, y_stride, nr, hf);
}

static void k2_rgemm_q5_K(int64_t nb, const void *chunk, const void *act, int64_t a_stride, const int32_t *psum, int nt,
                          float *y, int64_t y_stride, int nr)
{
    const uint8_t *a = act;
    int t = 0;
    for (; t + K2_TOK <= nt; t += K2_TOK)
        k2_rtile_q5(K2_TOK, nb, chunk, a + t * a_stride, a_stride, psum + t * nb * 4, y + t * y_stride, y_stride, nr);
    a += t * a_stride;
    y += t * y_stride;
    psum += t * nb * 4;
    K2_TAIL(nt - t, k2_rtile_q5, nb, chunk, a, a_stride, psum, y, y_stride, nr)
}

/* Repacked q2_K / q3_K super-blocks (lmq_rpanelq2 / lmq_rpanelq3): per
 * 16-quant sub-block and 8 rows, four code vectors (q2_K: one load, a shift
 * and an and each; q3_K: kr_q3_codes). Per token, four vpmaddubsw of the
 * codes with the signed activations summed in int16 (|pair| <= 7 x 128 x 2,
 * four pairs 7168), widened by vpmaddwd against the sub-block's scale
 * duplicated in both halves of the lane. q3_K's -4 comes off as vpmaddwd of
 * 4 x the scale pairs with the q8_K row's bsums; q2_K's mins (the high
 * nibbles of its scale bytes) are dotted with the bsums after the codes, so
 * they need no registers while the codes are live. NH halves x T tokens per
 * pass as in k2_rtile_h; one token streams the chunk in order and
 * prefetches 2 KiB ahead. */
K2_INLINE void k2_rtile_q23_h(const int Q2, const int NH, const int T, int64_t nb, const uint8_t *chunk,
                              const uint8_t *act, int64_t a_stride, float *y, int64_t y_stride, int nr, int hf0)
{
    const __m256i duplo = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 0, 1, 0, 1, 4, 5, 4, 5,
                                           8, 9, 8, 9, 12, 13, 12, 13);
    const __m256i duphi = _mm256_setr_epi8(2, 3, 2, 3, 6, 7, 6, 7, 10, 11, 10, 11, 14, 15, 14, 15, 2, 3, 2, 3, 6, 7,
                                           6, 7, 10, 11, 10, 11, 14, 15, 14, 15);
    const size_t bytes = Q2 ? sizeof(lmq_rpanelq2) : sizeof(lmq_rpanelq3);
    const size_t head = Q2 ? offsetof(lmq_rpanelq2, q) : offsetof(lmq_rpanelq3, q);
    __m256 acc[2][K2_TOK];
K2_UNROLL(2)
    for (int h = 0; h < NH; h++)
K2_UNROLL(4)
        for (int t = 0; t < T; t++) acc[h][t] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        const uint8_t *blk = chunk + ib * bytes;
        const lmq_rpanelq2 *p2 = (const lmq_rpanelq2 *)blk;
        const lmq_rpanelq3 *p3 = (const lmq_rpanelq3 *)blk;
        const lmq_block_q8_K *yb[K2_TOK];
K2_UNROLL(4)
        for (int t = 0; t < T; t++) yb[t] = (const lmq_block_q8_K *)(act + t * a_stride) + ib;
        if (NH == 2) /* the scales of the block 2 KiB ahead (the codes' lines are prefetched below) */
            for (size_t o = 0; o < head; o += 64) _mm_prefetch((const char *)blk + 2048 + o, _MM_HINT_T0);
        __m256i tot[2][K2_TOK];
K2_UNROLL(2)
        for (int h = 0; h < NH; h++)
K2_UNROLL(4)
            for (int t = 0; t < T; t++) tot[h][t] = _mm256_setzero_si256();
K2_UNROLL(1)
        for (int pp = 0; pp < 8; pp++) {
            __m256i sv[2];
K2_UNROLL(2)
            for (int h = 0; h < NH; h++) {
                const int r0 = 8 * (hf0 + h);
                if (Q2) {
                    sv[h] = _mm256_and_si256(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)p2->sc[pp][r0])),
                                             _mm256_set1_epi16(0x0F));
                } else {
                    sv[h] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p3->sc[pp][r0]));
                    const __m256i s4 = _mm256_slli_epi16(sv[h], 2);
K2_UNROLL(4)
                    for (int t = 0; t < T; t++)
                        tot[h][t] = _mm256_sub_epi32(tot[h][t], _mm256_madd_epi16(s4, k2_bcast32(yb[t]->bsums + 2 * pp)));
                }
            }
K2_UNROLL(2)
            for (int n = 0; n < 2; n++) {
                const int sb = 2 * pp + n;
K2_UNROLL(2)
                for (int h = 0; h < NH; h++) {
                    const int r0 = 8 * (hf0 + h);
                    const uint8_t *plane = Q2 ? p2->q[sb][r0] : p3->q[pp][0][r0];
                    if (NH == 2 && h == 0) {
                        if (Q2)
                            _mm_prefetch((const char *)plane + 2048, _MM_HINT_T0);
                        else if (n == 0)
                            for (int b = 0; b < 3; b++) _mm_prefetch((const char *)plane + 64 * b + 2048, _MM_HINT_T0);
                    }
                    const __m256i sc = _mm256_shuffle_epi8(sv[h], n ? duphi : duplo);
                    __m256i c[4];
                    if (Q2)
                        kr_q2_codes(plane, c);
                    else
                        kr_q3_codes(plane, n, c);
K2_UNROLL(4)
                    for (int t = 0; t < T; t++) {
                        const int8_t *a = yb[t]->qs + 16 * sb;
                        __m256i s4 = _mm256_maddubs_epi16(c[0], k2_bcast32(a));
K2_UNROLL(3)
                        for (int g = 1; g < 4; g++)
                            s4 = _mm256_add_epi16(s4, _mm256_maddubs_epi16(c[g], k2_bcast32(a + 4 * g)));
                        tot[h][t] = _mm256_add_epi32(tot[h][t], _mm256_madd_epi16(s4, sc));
                        K2_KEEP(tot[h][t]);
                    }
                }
            }
        }
K2_UNROLL(2)
        for (int h = 0; h < NH; h++) {
            const int r0 = 8 * (hf0 + h);
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((Q2 ? p2->d : p3->d) + r0)));
K2_UNROLL(4)
            for (int t = 0; t < T; t++)
                acc[h][t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(yb[t]->d)), _mm256_cvtepi32_ps(tot[h][t]),
                                            acc[h][t]);
            if (Q2) kr_q2_min_acc(T, p2, r0, yb, acc[h]);
        }
    }
K2_UNROLL(2)
    for (int h = 0; h < NH; h++)
K2_UNROLL(4)
        for (int t = 0; t < T; t++) k2_store(y + t * y_stride, acc[h][t], hf0 + h, nr);
}

K2_INLINE void k2_rtile_q2(const int T, int64_t nb, const uint8_t *chunk, const uint8_t *act, int64_t a_stride,
                           float *y, int64_t y_stride, int nr)
{
    if (T == 1 && nr > 8) {
        k2_rtile_q23_h(1, 2, 1, nb, chunk, act, a_stride, y, y_stride, nr, 0);
        return;
    }
    for (int hf = 0; hf < 2 && 8 * hf < nr; hf++) k2_rtile_q23_h(1, 1, T, nb, chunk, act, a_stride, y, y_stride, nr, hf);
}

K2_INLINE void k2_rtile_q3(const int T, int64_t nb, const uint8_t *chunk, const uint8_t *act, int64_t a_stride,
                           float *y, int64_t y_stride, int nr)
{
    if (T == 1 && nr > 8) {
        k2_rtile_q23_h(0, 2, 1, nb, chunk, act, a_stride, y, y_stride, nr, 0);
        return;
    }
    for (int hf = 0; hf < 2 && 8 * hf < nr; hf++) k2_rtile_q23_h(0, 1, T, nb, chunk, act, a_stride, y, y_stride, nr, hf);
}

#define K2_RGEMM_Q23(name, tile)                                                                                     \
    static void name(int64_t nb, const void *chunk, const void *act, int64_t a_stride, const int32_t *psum, int nt,  \
                     float *y, int64_t y_stride, int nr)                                                             \
    {                                                                                                                \
        (void)psum; /* the q8_K rows' own bsums serve */                                                             \
        const uint8_t *a = act;                                                                                      \
        int t = 0;                                                                                                   \
        for (; t + K2_TOK <= nt; t += K2_TOK)                                                                        \
            tile(K2_TOK, nb, chunk, a + t * a_stride, a_stride, y + t * y_stride, y_stride, nr);                     \
        a += t * a_stride;                                                                                           \
        y += t * y_stride;                                                                                           \
        K2_TAIL(nt - t, tile, nb, chunk, a, a_stride, y, y_stride, nr)                                               \
    }

K2_RGEMM_Q23(k2_rgemm_q2_K, k2_rtile_q2)
K2_RGEMM_Q23(k2_rgemm_q3_K, k2_rtile_q3)

/* ================================================================
 * Packing: the SIMD unpackers of x86_unpack.h, an 8 x 8 dword transpose
 * per 32 quants of 8 rows, corr from the transposed quants. The panel's
 * bytes equal lmq_panel_pack's (tested for every type).
 * ================================================================ */

/* out[k] = dword k of each of the 8 rows in[0..7]. */
K2_INLINE void k2_transpose8(const __m256i in[8], __m256i out[8])
{
    __m256i t[8], v[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(in[2 * i], in[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(in[2 * i], in[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) { /* v[4i + k], 128-bit lane L: dword 4L + k of rows 4i..4i+3 */
        v[4 * i] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        v[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        v[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        v[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int k = 0; k < 4; k++) {
        out[k] = _mm256_permute2x128_si256(v[k], v[4 + k], 0x20);
        out[4 + k] = _mm256_permute2x128_si256(v[k], v[4 + k], 0x31);
    }
}

/* Transposes quants off..off+31 of the 16 unpacked rows into 8 groups at dst. */
K2_INLINE void k2_transpose_quants(const lmq_unpacked *u, int off, int8_t (*dst)[LMQ_PANEL_ROWS][4])
{
    for (int hf = 0; hf < 2; hf++) {
        __m256i in[8], out[8];
        for (int r = 0; r < 8; r++) in[r] = _mm256_loadu_si256((const __m256i *)(u[8 * hf + r].q + off));
        k2_transpose8(in, out);
        for (int k = 0; k < 8; k++) _mm256_storeu_si256((__m256i *)dst[k][8 * hf], out[k]);
    }
}

/* Per-row sums of the quants of groups g0..g1-1, rows 8 hf..8 hf + 7. */
K2_INLINE __m256i k2_group_sums(const int8_t (*q)[LMQ_PANEL_ROWS][4], int g0, int g1, int hf)
{
    __m256i s = _mm256_setzero_si256();
    for (int g = g0; g < g1; g++)
        s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1),
                                                                         _mm256_loadu_si256((const __m256i *)q[g][8 * hf])),
                                                  _mm256_set1_epi16(1)));
    return s;
}

#define K2_PACK_AHEAD 2 /* super-blocks */
static void k2_pack(lmq_type t, lmq_unpack_fn unpack, const void *w, int64_t w_row, int nr, int64_t n_in, void *panel)
{
    const lmq_panel_traits *pt = lmq_panel_traits_of(t);
    _Alignas(64) lmq_unpacked u[LMQ_PANEL_ROWS];
    memset(u, 0, sizeof u); /* rows nr.., mins, dmin and unused scales stay 0, as in lmq_panel_pack */
    const __m256i m128 = _mm256_set1_epi32(-128);
    if (pt->block == 32) {
        lmq_panel32 *p = panel;
        for (int64_t ib = 0; ib < n_in / 32; ib++, p++) {
            for (int r = 0; r < nr; r++) {
                unpack((const uint8_t *)w + r * w_row, ib, &u[r]);
                p->d[r] = u[r].d;
            }
            for (int r = nr; r < LMQ_PANEL_ROWS; r++) p->d[r] = 0;
            k2_transpose_quants(u, 0, p->q);
            for (int hf = 0; hf < 2; hf++)
                _mm256_storeu_si256((__m256i *)(p->corr + 8 * hf), _mm256_mullo_epi32(k2_group_sums(p->q, 0, 8, hf), m128));
        }
        return;
    }
    const int nsub = 256 / pt->sub, gs = pt->sub / 4;
    const int64_t nb = n_in / 256, bs = lmq_type_get(t)->type_size;
    lmq_panel256 *p = panel;
    for (int64_t ib = 0; ib < nb; ib++, p++) {
        /* the weights come from memory once per product, 16 rows apart:
         * without prefetching, the unpacker waited on each block's first
         * load (q6_K: 13% of a 512-token prompt) */
        if (ib + K2_PACK_AHEAD < nb)
            for (int r = 0; r < nr; r++) {
                const char *b = (const char *)w + r * w_row + (ib + K2_PACK_AHEAD) * bs;
                for (int64_t o = 0; o < bs; o += 64) _mm_prefetch(b + o, _MM_HINT_T0);
                _mm_prefetch(b + bs - 1, _MM_HINT_T0);
            }
        for (int r = 0; r < nr; r++) unpack((const uint8_t *)w + r * w_row, ib, &u[r]);
        for (int c = 0; c < 8; c++) k2_transpose_quants(u, 32 * c, p->q + 8 * c);
        for (int j = nsub; j < 16; j++) memset(p->sc[j], 0, sizeof p->sc[j]);
        for (int j = 0; j < nsub; j++)
            for (int r = 0; r < 16; r++) p->sc[j][r] = u[r].sc[j];
        for (int hf = 0; hf < 2; hf++) {
            __m256i tot = _mm256_setzero_si256();
            for (int j = 0; j < nsub; j++)
                tot = _mm256_add_epi32(tot, _mm256_mullo_epi32(k2_group_sums(p->q, j * gs, (j + 1) * gs, hf),
                                                               _mm256_loadu_si256((const __m256i *)(p->sc[j] + 8 * hf))));
            _mm256_storeu_si256((__m256i *)(p->corr + 8 * hf), _mm256_mullo_epi32(tot, m128));
        }
        for (int r = 0; r < 16; r++) {
            for (int g = 0; g < 8; g++) {
                p->m[g][r][0] = u[r].m[2 * g];
                p->m[g][r][1] = u[r].m[2 * g + 1];
            }
            p->d[r] = u[r].d;
            p->dmin[r] = u[r].dmin;
        }
    }
}

/* Repacked iq4_xs super-blocks (lmq_rpanelx4): per 4-quant
 * group, one table lookup gives the signed grid values w of 8 rows, one
 * vpabsb |w|; per token the activations take the sign of w (vpsignb; exact
 * because they stop at -127, see the top), one vpmaddubsw and one vpmaddwd
 * against the sub-block scale duplicated in both int16 halves of the lane
 * (the int32 sums are sc x sum(w x a), those of the reference's
 * isum - 128 x bias). NH halves x T tokens per pass as in k2_rtile_h; one
 * token takes both nibbles (sub-blocks 2c and 2c + 1) from the same loads. */
K2_INLINE void k2_rtile_iq4_h(const int NH, const int T, int64_t nb, const uint8_t *chunk, const uint8_t *act,
                              int64_t a_stride, float *y, int64_t y_stride, int nr, int hf0)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)lmq_iq4nl_values));
    __m256 acc[2][K2_TOK];
K2_UNROLL(2)
    for (int h = 0; h < NH; h++)
K2_UNROLL(4)
        for (int t = 0; t < T; t++) acc[h][t] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        const lmq_rpanelx4 *p = (const lmq_rpanelx4 *)chunk + ib;
        const lmq_block_q8_K *yb[K2_TOK];
K2_UNROLL(4)
        for (int t = 0; t < T; t++) yb[t] = (const lmq_block_q8_K *)(act + t * a_stride) + ib;
        __m256i tot[2][2][K2_TOK]; /* [nibble][half][token]: two chains per (half, token) */
K2_UNROLL(2)
        for (int n = 0; n < 2; n++)
K2_UNROLL(2)
            for (int h = 0; h < NH; h++)
K2_UNROLL(4)
                for (int t = 0; t < T; t++) tot[n][h][t] = _mm256_setzero_si256();
K2_UNROLL(1)
        for (int c = 0; c < 4; c++) {
            __m256i sc[2][2];
K2_UNROLL(2)
            for (int n = 0; n < 2; n++)
K2_UNROLL(2)
                for (int h = 0; h < NH; h++)
                    sc[n][h] = k2_dup16(
                        _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p->sc[2 * c + n] + 8 * (hf0 + h)))));
K2_UNROLL(8)
            for (int g = 0; g < 8; g++)
K2_UNROLL(2)
                for (int h = 0; h < NH; h++) {
                    if (NH == 2 && h == 0) /* one token streams: the line 2 KiB ahead */
                        _mm_prefetch((const char *)p->u[c][g] + 2048, _MM_HINT_T0);
                    const __m256i v = _mm256_loadu_si256((const __m256i *)p->u[c][g][8 * (hf0 + h)]);
K2_UNROLL(2)
                    for (int n = 0; n < 2; n++) {
                        const __m256i w = _mm256_shuffle_epi8(lut, _mm256_and_si256(n ? _mm256_srli_epi16(v, 4) : v, m4));
                        const __m256i wa = _mm256_abs_epi8(w);
K2_UNROLL(4)
                        for (int t = 0; t < T; t++) {
                            const __m256i a = _mm256_sign_epi8(k2_bcast32(yb[t]->qs + 64 * c + 32 * n + 4 * g), w);
                            tot[n][h][t] = _mm256_add_epi32(tot[n][h][t],
                                                            _mm256_madd_epi16(_mm256_maddubs_epi16(wa, a), sc[n][h]));
                            K2_KEEP(tot[n][h][t]);
                        }
                    }
                }
        }
K2_UNROLL(2)
        for (int h = 0; h < NH; h++) {
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p->d + 8 * (hf0 + h))));
K2_UNROLL(4)
            for (int t = 0; t < T; t++)
                acc[h][t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(yb[t]->d)),
                                            _mm256_cvtepi32_ps(_mm256_add_epi32(tot[0][h][t], tot[1][h][t])), acc[h][t]);
        }
    }
K2_UNROLL(2)
    for (int h = 0; h < NH; h++)
K2_UNROLL(4)
        for (int t = 0; t < T; t++) k2_store(y + t * y_stride, acc[h][t], hf0 + h, nr);
}

/* Several tokens: the halves one after the other, one sub-block at a time,
 * each token's sums of the super-block in one int32 chain (both nibbles
 * together: the scale is applied per group by vpmaddwd, so the chains need
 * no per-sub-block split). Up to K2_TOK_X4 tokens per pass: the weight work
 * per group (mask, lookup, vpabsb) is shared by more tokens, and the float
 * accumulators, touched once per super-block, live in memory. */
#define K2_TOK_X4 8
K2_INLINE void k2_rtile_iq4_tok(const int T, int64_t nb, const uint8_t *chunk, const uint8_t *act, int64_t a_stride,
                                float *y, int64_t y_stride, int nr)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)lmq_iq4nl_values));
    for (int hf = 0; hf < 2 && 8 * hf < nr; hf++) {
        _Alignas(32) float acc[K2_TOK_X4][8];
        memset(acc, 0, sizeof acc);
        for (int64_t ib = 0; ib < nb; ib++) {
            const lmq_rpanelx4 *p = (const lmq_rpanelx4 *)chunk + ib;
            const uint8_t *yq = act + ib * (int64_t)sizeof(lmq_block_q8_K) + offsetof(lmq_block_q8_K, qs);
            __m256i tot[K2_TOK_X4];
K2_UNROLL(8)
            for (int t = 0; t < T; t++) tot[t] = _mm256_setzero_si256();
K2_UNROLL(1)
            for (int j = 0; j < 8; j++) {
                const int c = j / 2, n = j % 2;
                const __m256i sc =
                    k2_dup16(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p->sc[j] + 8 * hf))));
K2_UNROLL(8)
                for (int g = 0; g < 8; g++) {
                    const __m256i v = _mm256_loadu_si256((const __m256i *)p->u[c][g][8 * hf]);
                    const __m256i w = _mm256_shuffle_epi8(lut, _mm256_and_si256(n ? _mm256_srli_epi16(v, 4) : v, m4));
                    const __m256i wa = _mm256_abs_epi8(w);
K2_UNROLL(8)
                    for (int t = 0; t < T; t++) {
                        const __m256i a = _mm256_sign_epi8(k2_bcast32(yq + t * a_stride + 32 * j + 4 * g), w);
                        tot[t] = _mm256_add_epi32(tot[t], _mm256_madd_epi16(_mm256_maddubs_epi16(wa, a), sc));
                        K2_KEEP(tot[t]);
                    }
                }
            }
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p->d + 8 * hf)));
K2_UNROLL(8)
            for (int t = 0; t < T; t++) {
                const lmq_block_q8_K *yb = (const lmq_block_q8_K *)(act + t * a_stride) + ib;
                _mm256_store_ps(acc[t], _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(yb->d)),
                                                        _mm256_cvtepi32_ps(tot[t]), _mm256_load_ps(acc[t])));
            }
        }
K2_UNROLL(8)
        for (int t = 0; t < T; t++) k2_store(y + t * y_stride, _mm256_load_ps(acc[t]), hf, nr);
    }
}

K2_INLINE void k2_rtile_iq4_xs(const int T, int64_t nb, const uint8_t *chunk, const uint8_t *act, int64_t a_stride,
                               float *y, int64_t y_stride, int nr)
{
    if (T == 1) {
        if (nr > 8)
            k2_rtile_iq4_h(2, 1, nb, chunk, act, a_stride, y, y_stride, nr, 0);
        else
            k2_rtile_iq4_h(1, 1, nb, chunk, act, a_stride, y, y_stride, nr, 0);
        return;
    }
    k2_rtile_iq4_tok(T, nb, chunk, act, a_stride, y, y_stride, nr);
}

_Static_assert(K2_TOK_X4 == 8 && K2_TOK_S8 == 8, "K2_TAIL8 covers the last 7 tokens");

static void k2_rgemm_iq4_xs(int64_t nb, const void *chunk, const void *act, int64_t a_stride, const int32_t *psum,
                            int nt, float *y, int64_t y_stride, int nr)
{
    (void)psum; /* no grid + 128 bias to take off */
    const uint8_t *a = act;
    int t = 0;
    for (; t + K2_TOK_X4 <= nt; t += K2_TOK_X4)
        k2_rtile_iq4_xs(K2_TOK_X4, nb, chunk, a + t * a_stride, a_stride, y + t * y_stride, y_stride, nr);
    a += t * a_stride;
    y += t * y_stride;
    K2_TAIL8(nt - t, k2_rtile_iq4_xs, nb, chunk, a, a_stride, y, y_stride, nr)
}

/* ================================================================
 * f32 panels (kernels.h): the batched path of f16, bf16, f32, fp8, q4_1
 * and q5_1 weights, in place of dequantize + cblas_sgemm
 * ================================================================ */

/* One 8 x 8 float transpose: out[k] = element k of each of in[0..7]. */
K2_INLINE void k2_transpose8_ps(const __m256 in[8], __m256 out[8])
{
    __m256 t[8], v[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(in[2 * i], in[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(in[2 * i], in[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {
        v[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        v[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        v[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        v[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int k = 0; k < 4; k++) {
        out[k] = _mm256_permute2f128_ps(v[k], v[4 + k], 0x20);
        out[4 + k] = _mm256_permute2f128_ps(v[k], v[4 + k], 0x31);
    }
}

/* Eight floats of each of 8 rows at k, transposed into the panel; absent
 * rows (r >= nr) read as zero. */
void lmq_fpanel_pack_avx2(const float *rows, int64_t row_stride, int nr, int64_t n_in, float *panel)
{
    for (int hf = 0; hf < 2; hf++) {
        const int live = nr - 8 * hf;
        if (live <= 0) { /* no rows: zeros (and no pointer past the caller's rows) */
            for (int64_t k = 0; k < n_in; k++) _mm256_storeu_ps(panel + k * 16 + 8 * hf, _mm256_setzero_ps());
            continue;
        }
        const float *src = rows + 8 * hf * row_stride;
        int64_t k = 0;
        if (live >= 8)
            for (; k + 8 <= n_in; k += 8) {
                __m256 in[8], out[8];
                for (int r = 0; r < 8; r++) in[r] = _mm256_loadu_ps(src + r * row_stride + k);
                k2_transpose8_ps(in, out);
                for (int j = 0; j < 8; j++) _mm256_storeu_ps(panel + (k + j) * 16 + 8 * hf, out[j]);
            }
        for (; k < n_in; k++)
            for (int r = 0; r < 8; r++) panel[k * 16 + 8 * hf + r] = r < live ? src[r * row_stride + k] : 0.0f;
    }
}

#define K2_FTOK 6 /* tokens per pass: 6 x 2 accumulators + 2 weight vectors + a broadcast */

/* Rows 0..8 NH - 1 of one panel x T tokens: one fma per (row, token, k),
 * k in order from 0 (no blocking of k: blocks of 256 and 4096, which
 * store and reload the sums, measured 6-20% slower in docs/PERF.md). */
K2_INLINE void k2_ftile(const int T, const int NH, int64_t n_in, const float *wp, const float *x, int64_t x_stride,
                        float *y, int64_t y_stride, int nr)
{
    __m256 acc[K2_FTOK][2];
K2_UNROLL(6)
    for (int t = 0; t < T; t++) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    for (int64_t k = 0; k < n_in; k++) {
        const __m256 w0 = _mm256_loadu_ps(wp + k * 16);
        const __m256 w1 = NH == 2 ? _mm256_loadu_ps(wp + k * 16 + 8) : w0;
K2_UNROLL(6)
        for (int t = 0; t < T; t++) {
            const __m256 b = _mm256_broadcast_ss(x + t * x_stride + k);
            acc[t][0] = _mm256_fmadd_ps(w0, b, acc[t][0]);
            if (NH == 2) acc[t][1] = _mm256_fmadd_ps(w1, b, acc[t][1]);
        }
    }
K2_UNROLL(6)
    for (int t = 0; t < T; t++)
K2_UNROLL(2)
        for (int h = 0; h < NH; h++) k2_store(y + t * y_stride, acc[t][h], h, nr);
}

K2_INLINE void k2_ftile_nh(const int T, int64_t n_in, const float *wp, const float *x, int64_t x_stride, float *y,
                           int64_t y_stride, int nr)
{
    if (nr > 8)
        k2_ftile(T, 2, n_in, wp, x, x_stride, y, y_stride, nr);
    else
        k2_ftile(T, 1, n_in, wp, x, x_stride, y, y_stride, nr);
}

/* Groups of K2_FTOK tokens, in them the panels: a group's activations are
 * read from L2 once per panel, a panel from L2 or L3 once per group. */
void lmq_fpanel_gemm_avx2(int64_t n_in, int np, const float *panels, const float *x, int64_t x_stride, int nt,
                          float *y, int64_t y_stride, int nr)
{
    for (int t0 = 0; t0 < nt; t0 += K2_FTOK) {
        const float *xt = x + t0 * x_stride;
        float *yt = y + t0 * y_stride;
        for (int p = 0; p < np && 16 * p < nr; p++) {
            const float *wp = panels + (int64_t)p * 16 * n_in;
            const int live = nr - 16 * p < 16 ? nr - 16 * p : 16;
            switch (nt - t0 < K2_FTOK ? nt - t0 : K2_FTOK) {
            case 1: k2_ftile_nh(1, n_in, wp, xt, x_stride, yt + 16 * p, y_stride, live); break;
            case 2: k2_ftile_nh(2, n_in, wp, xt, x_stride, yt + 16 * p, y_stride, live); break;
            case 3: k2_ftile_nh(3, n_in, wp, xt, x_stride, yt + 16 * p, y_stride, live); break;
            case 4: k2_ftile_nh(4, n_in, wp, xt, x_stride, yt + 16 * p, y_stride, live); break;
            case 5: k2_ftile_nh(5, n_in, wp, xt, x_stride, yt + 16 * p, y_stride, live); break;
            default: k2_ftile_nh(6, n_in, wp, xt, x_stride, yt + 16 * p, y_stride, live); break;
            }
        }
    }
}

/* Fills the AVX2 table only: the AVX-512 table keeps its own kernels (and
 * no repacking for the types it does not repack). */
void lmq_kernels_fill_avx2_panel(lmq_kernel_table *t)
{
    t->panel_pack = k2_pack;
    t->fpanel_pack = lmq_fpanel_pack_avx2;
    t->fpanel_gemm = lmq_fpanel_gemm_avx2;
    t->panel_unpack[LMQ_TYPE_Q4_0] = kp_unpack_q4_0;
    t->panel_unpack[LMQ_TYPE_Q8_0] = kp_unpack_q8_0;
    t->panel_unpack[LMQ_TYPE_IQ4_NL] = kp_unpack_iq4_nl;
    t->panel_unpack[LMQ_TYPE_MXFP4] = kp_unpack_mxfp4;
    t->panel_unpack[LMQ_TYPE_IQ4_XS] = kp_unpack_iq4_xs;
    t->panel_unpack[LMQ_TYPE_Q4_K] = kp_unpack_q4_K;
    t->panel_unpack[LMQ_TYPE_Q5_K] = kp_unpack_q5_K;
    t->panel_unpack[LMQ_TYPE_Q6_K] = kp_unpack_q6_K;
    t->rpanel_gemm[LMQ_TYPE_Q4_K] = k2_rgemm_q4_K;
    t->rpanel_gemm[LMQ_TYPE_IQ4_XS] = k2_rgemm_iq4_xs;
    t->rpanel_gemm[LMQ_TYPE_Q4_0] = k2_rgemm_q4_0;
    t->rpanel_gemm[LMQ_TYPE_IQ4_NL] = k2_rgemm_iq4_nl;
    t->rpanel_gemm[LMQ_TYPE_Q8_0] = k2_rgemm_q8_0;
    t->rpanel_gemm[LMQ_TYPE_MXFP4] = k2_rgemm_mxfp4;
    t->rpanel_gemm[LMQ_TYPE_Q6_K] = k2_rgemm_q6_K;
    t->rpanel_gemm[LMQ_TYPE_Q5_K] = k2_rgemm_q5_K;
    t->rpanel_gemm[LMQ_TYPE_Q5_0] = k2_rgemm_q5_0;
    t->rpanel_gemm[LMQ_TYPE_Q2_K] = k2_rgemm_q2_K;
    t->rpanel_gemm[LMQ_TYPE_Q3_K] = k2_rgemm_q3_K;
    t->panel_gemm[LMQ_TYPE_Q4_0] = k2_gemm32;
    t->panel_gemm[LMQ_TYPE_Q5_0] = k2_gemm32;
    t->panel_gemm[LMQ_TYPE_MXFP4] = k2_gemm32; /* |q| <= 12: 8 x 255 x 12 fits int16 */
    t->panel_gemm[LMQ_TYPE_Q4_K] = k2_gemm_q4_K;
    t->panel_gemm[LMQ_TYPE_Q5_K] = k2_gemm_q5_K;
    t->panel_gemm[LMQ_TYPE_Q2_K] = k2_gemm_q2_K;
    t->panel_gemm[LMQ_TYPE_Q3_K] = k2_gemm_q3_K;
    t->panel_gemm[LMQ_TYPE_Q6_K] = k2_gemm_q6_K;
    t->panel_gemm[LMQ_TYPE_IQ2_XXS] = k2_gemm_iq_s32p1;
    t->panel_gemm[LMQ_TYPE_IQ3_XXS] = k2_gemm_iq_s32p1;
    t->panel_gemm[LMQ_TYPE_IQ2_XS] = k2_gemm_iq_s16p1;
    t->panel_gemm[LMQ_TYPE_IQ2_S] = k2_gemm_iq_s16p1;
    t->panel_gemm[LMQ_TYPE_IQ3_S] = k2_gemm_iq_s32p4;
    t->panel_gemm[LMQ_TYPE_IQ1_S] = k2_gemm_iq_s32p4;
    t->panel_gemm[LMQ_TYPE_TQ1_0] = k2_gemm_iq_s32p4;
    t->panel_gemm[LMQ_TYPE_TQ2_0] = k2_gemm_iq_s32p4;
    t->panel_gemm[LMQ_TYPE_IQ1_M] = k2_gemm_q3_K; /* sub 16, 4 groups: +-9 */
    /* the 2- and 3-bit panels beat the vec_dot kernels from 32 tokens (docs/PERF.md) */
    t->panel_min_tok[LMQ_TYPE_Q2_K] = 32;
    t->panel_min_tok[LMQ_TYPE_Q3_K] = 32;
}
