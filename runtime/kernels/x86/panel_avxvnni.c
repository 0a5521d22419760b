/* panel_avxvnni.c — the avxvnni level's kernels for repacked weights
 * (lmq_rpanel4 / lmq_rpanel8 / lmq_rpanelmx, lmq_rpanelk4, lmq_rpanelx4,
 * lmq_rpanelq6, lmq_rpanelq5, lmq_rpanelq2, lmq_rpanelq3 of panel.c): the
 * layouts, activations and sums of panel_avx2.c's repacked
 * kernels, 16 rows as two halves of 8 int32 lanes, up to 4 tokens per pass,
 * with the 256-bit vpdpbusd (u8 x s8, four products added into an int32
 * lane, no int16 step) in place of vpmaddubsw + vpmaddwd.
 *
 * Built twice from this one source (CMakeLists.txt): with -mavxvnni, the
 * VEX encoding that AVX-VNNI CPUs without AVX-512 run (Intel since Alder
 * Lake, AMD Zen 5), exporting lmq_kernels_fill_avxvnni; and, through
 * panel_avxvnni_evex.c (LMQ_AVXVNNI_EVEX), with -mavx512vnni -mavx512vl, the
 * EVEX encoding of the same instruction, exporting
 * lmq_kernels_fill_avxvnni_evex, which dispatch.c uses for the avxvnni level
 * on CPUs with AVX-512 VNNI + VL and no AVX-VNNI. Both compute the same
 * integers; the EVEX build is what runs the tests on AVX-512 machines.
 *
 * Without the int16 step the operand-range limits of panel_avx2.c go: every
 * weight is an unsigned code against the signed q8_0 / q8_K activations
 * (q8_0: u = q + 128 as stored; iq4_nl / iq4_xs / MXFP4: grid or value
 * + 128 through vpshufb; q4_0 / q4_K: the 4-bit codes), and each (token,
 * block) starts from -o x sum(activation quants) as in the reference
 * (iq4_xs: 128 x the scaled sums, from the pair sums, at the end). The
 * sub-block scales of q4_K / iq4_xs multiply the sub-block's int32 sum
 * (vpmulld; q2_K / q3_K, whose 16-quant sums fit int16, by vpdpwssd). All
 * integer sums are exact, so they equal the reference's; the float
 * operations per (row, token, block) are lmq_rpanel_gemm_ref's in the same
 * order: the results equal the scalar reference bit for bit
 * (tests/test_kernels.c, every ISA, odd shapes). */
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "kernels.h"
#include "x86_rpanel.h"
#include "x86_simd.h"

#if defined(LMQ_AVXVNNI_EVEX)
#if !defined(__AVX512VNNI__) || !defined(__AVX512VL__)
#error "the EVEX build of panel_avxvnni.c needs -mavx512vnni -mavx512vl"
#endif
#define KV_DPBUSD(acc, u, s) _mm256_dpbusd_epi32(acc, u, s)
#define KV_DPWSSD(acc, a, b) _mm256_dpwssd_epi32(acc, a, b)
#define KV_FILL lmq_kernels_fill_avxvnni_evex
#else
#if !defined(__AVXVNNI__)
#error "panel_avxvnni.c needs -mavxvnni"
#endif
#define KV_DPBUSD(acc, u, s) _mm256_dpbusd_avx_epi32(acc, u, s)
#define KV_DPWSSD(acc, a, b) _mm256_dpwssd_avx_epi32(acc, a, b)
#define KV_FILL lmq_kernels_fill_avxvnni
#endif

#ifdef LMQ_SANITIZED
#define KV_INLINE static inline
#define KV_UNROLL(n)
#else
#define KV_INLINE static inline __attribute__((always_inline))
#define KV_UNROLL(n) _Pragma(KV_STR(GCC unroll n))
#endif
#define KV_STR(x) #x
#define KV_TOK 4 /* tokens per pass (registers: accumulators, sums, codes) */
#define KV_TAIL(n, fn, ...)                \
    switch (n) {                           \
    case 1: fn(1, __VA_ARGS__); break;     \
    case 2: fn(2, __VA_ARGS__); break;     \
    case 3: fn(3, __VA_ARGS__); break;     \
    default: break;                        \
    }

KV_INLINE __m256i kv_bcast32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* Stores rows 8 hf .. 8 hf + 7 of y that are < nr. */
KV_INLINE void kv_store(float *y, __m256 v, int hf, int nr)
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
 * Repacked 32-element blocks: q4_0, iq4_nl, q8_0, MXFP4
 * ================================================================ */

enum { KV_Q4_0, KV_IQ4_NL, KV_Q8_0, KV_MXFP4 };

KV_INLINE int64_t kv_rblock_bytes(const int KIND)
{
    return KIND == KV_Q8_0 ? (int64_t)sizeof(lmq_rpanel8)
           : KIND == KV_MXFP4 ? (int64_t)sizeof(lmq_rpanelmx)
                              : (int64_t)sizeof(lmq_rpanel4);
}

/* The grid (iq4_nl) or the values (MXFP4) + 128, for vpshufb. */
KV_INLINE __m256i kv_lut(const int KIND)
{
    const int8_t *v = KIND == KV_MXFP4 ? lmq_mxfp4_values : lmq_iq4nl_values;
    return _mm256_broadcastsi128_si256(_mm_xor_si128(_mm_loadu_si128((const __m128i *)v), _mm_set1_epi8((char)0x80)));
}

/* The 4-quant groups kv_rgroups gives for step g < 4: q8_0 reads its
 * groups in memory order (2g, 2g + 1), the 4-bit kinds both nibbles of one
 * load (g, g + 4). */
#define KV_GA(KIND, g) ((KIND) == KV_Q8_0 ? 2 * (g) : (g))
#define KV_GB(KIND, g) ((KIND) == KV_Q8_0 ? 2 * (g) + 1 : (g) + 4)

/* The unsigned codes of groups KV_GA(g) and KV_GB(g) (quants 4 KV_GA..,
 * 4 KV_GB..) of rows 8 hf .. 8 hf + 7 of a repacked block. */
KV_INLINE void kv_rgroups(const int KIND, const uint8_t *p, int g, int hf, __m256i lut, __m256i *lo, __m256i *hi)
{
    if (KIND == KV_Q8_0) {
        *lo = _mm256_loadu_si256((const __m256i *)((const lmq_rpanel8 *)p)->u[KV_GA(KIND, g)][8 * hf]);
        *hi = _mm256_loadu_si256((const __m256i *)((const lmq_rpanel8 *)p)->u[KV_GB(KIND, g)][8 * hf]);
        return;
    }
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i v = KIND == KV_MXFP4 ? _mm256_loadu_si256((const __m256i *)((const lmq_rpanelmx *)p)->u[g][8 * hf])
                                       : _mm256_loadu_si256((const __m256i *)((const lmq_rpanel4 *)p)->u[g][8 * hf]);
    *lo = _mm256_and_si256(v, m4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    if (KIND != KV_Q4_0) {
        *lo = _mm256_shuffle_epi8(lut, *lo);
        *hi = _mm256_shuffle_epi8(lut, *hi);
    }
}


KV_INLINE __m256 kv_rscale(const int KIND, const uint8_t *p, int hf)
{
    if (KIND == KV_MXFP4) return kr_e8m0_half(((const lmq_rpanelmx *)p)->e + 8 * hf);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + 8 * hf)));
}

/* T tokens, NH halves per pass over a block (2: one token, both halves from
 * each block; 1: the halves one after the other). The tokens' activation
 * scales (f16 -> f32) and -o x block sums are taken once per slice of
 * KV_SLICE blocks into small arrays (as panel_avx2.c's k2_rtile_tok). With
 * fewer than 4 (half, token) sums in flight each gets two chains (groups
 * 0..3 and 4..7), so one token is not bound by vpdpbusd's latency. */
#define KV_SLICE 64
KV_INLINE void kv_rtile32(const int T, const int NH, const int KIND, int64_t nb, const uint8_t *chunk,
                          const uint8_t *act, int64_t a_stride, const int32_t *asum, float *y, int64_t y_stride, int nr)
{
    const int C = T * NH >= 4 ? 1 : 2;
    const int64_t cb = kv_rblock_bytes(KIND), ab_size = (int64_t)sizeof(lmq_block_q8_0);
    const int nh = nr > 8 ? 2 : 1, off0 = KIND == KV_Q4_0 ? -8 : -128;
    const __m256i lut = KIND == KV_IQ4_NL || KIND == KV_MXFP4 ? kv_lut(KIND) : _mm256_setzero_si256();
    _Alignas(32) float dy[KV_TOK][KV_SLICE];
    _Alignas(32) int32_t off[KV_TOK][KV_SLICE];
    _Alignas(32) uint16_t dh[KV_SLICE];
    __m256 accm[2][KV_TOK];
KV_UNROLL(4)
    for (int t = 0; t < T; t++) accm[0][t] = accm[1][t] = _mm256_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += KV_SLICE) {
        const int n = nb - b0 < KV_SLICE ? (int)(nb - b0) : KV_SLICE;
        for (int t = 0; t < T; t++) {
            const uint8_t *ab = act + t * a_stride + b0 * ab_size;
            for (int b = 0; b < n; b++) memcpy(&dh[b], ab + b * ab_size, 2);
            for (int b = n; b < ((n + 7) & ~7); b++) dh[b] = 0;
            for (int b = 0; b < n; b += 8)
                _mm256_store_ps(dy[t] + b, _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(dh + b))));
            for (int b = 0; b < n; b++) off[t][b] = off0 * asum[t * nb + b0 + b];
        }
        for (int h0 = 0; h0 < nh; h0 += NH) {
            __m256 acc[2][KV_TOK];
KV_UNROLL(2)
            for (int h = 0; h < NH; h++)
KV_UNROLL(4)
                for (int t = 0; t < T; t++) acc[h][t] = accm[h0 + h][t];
            for (int b = 0; b < n; b++) {
                const uint8_t *p = chunk + (b0 + b) * cb;
                const uint8_t *ab = act + (b0 + b) * ab_size + 2;
                __m256i is[2][KV_TOK][2];
KV_UNROLL(2)
                for (int h = 0; h < NH; h++)
KV_UNROLL(4)
                    for (int t = 0; t < T; t++) {
                        is[h][t][0] = _mm256_set1_epi32(off[t][b]);
                        if (C == 2) is[h][t][1] = _mm256_setzero_si256();
                    }
KV_UNROLL(4)
                for (int g = 0; g < 4; g++)
KV_UNROLL(2)
                    for (int h = 0; h < NH; h++) {
                        __m256i lo, hi;
                        kv_rgroups(KIND, p, g, h0 + h, lut, &lo, &hi);
KV_UNROLL(4)
                        for (int t = 0; t < T; t++) {
                            is[h][t][0] = KV_DPBUSD(is[h][t][0], lo, kv_bcast32(ab + t * a_stride + 4 * KV_GA(KIND, g)));
                            is[h][t][C - 1] =
                                KV_DPBUSD(is[h][t][C - 1], hi, kv_bcast32(ab + t * a_stride + 4 * KV_GB(KIND, g)));
                        }
                    }
KV_UNROLL(2)
                for (int h = 0; h < NH; h++) {
                    const __m256 dw = kv_rscale(KIND, p, h0 + h);
KV_UNROLL(4)
                    for (int t = 0; t < T; t++) {
                        const __m256i s = C == 2 ? _mm256_add_epi32(is[h][t][0], is[h][t][1]) : is[h][t][0];
                        acc[h][t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(dy[t][b])), _mm256_cvtepi32_ps(s),
                                                    acc[h][t]);
                    }
                }
            }
KV_UNROLL(2)
            for (int h = 0; h < NH; h++)
KV_UNROLL(4)
                for (int t = 0; t < T; t++) accm[h0 + h][t] = acc[h][t];
        }
    }
    for (int h = 0; h < nh; h++)
KV_UNROLL(4)
        for (int t = 0; t < T; t++) kv_store(y + t * y_stride, accm[h][t], h, nr);
}

KV_INLINE void kv_rtile(const int T, const int KIND, int64_t nb, const uint8_t *chunk, const uint8_t *act,
                        int64_t a_stride, const int32_t *asum, float *y, int64_t y_stride, int nr)
{
    /* both halves per pass share each activation broadcast; 16 registers
     * hold that for 2 tokens (64 tokens: 3-8% faster than 4 tokens with
     * the halves one after the other) */
    if (nr <= 8) {
        kv_rtile32(T, 1, KIND, nb, chunk, act, a_stride, asum, y, y_stride, nr);
    } else if (T <= 2) {
        kv_rtile32(T, 2, KIND, nb, chunk, act, a_stride, asum, y, y_stride, nr);
    } else {
        kv_rtile32(2, 2, KIND, nb, chunk, act, a_stride, asum, y, y_stride, nr);
        kv_rtile32(T - 2, 2, KIND, nb, chunk, act + 2 * a_stride, a_stride, asum + 2 * nb, y + 2 * y_stride, y_stride,
                   nr);
    }
}

#define KV_RGEMM(name, KIND)                                                                                         \
    static void name(int64_t nb, const void *chunk, const void *act, int64_t a_stride, const int32_t *asum, int nt,  \
                     float *y, int64_t y_stride, int nr)                                                             \
    {                                                                                                                \
        const uint8_t *a = act;                                                                                      \
        int t = 0;                                                                                                   \
        for (; t + KV_TOK <= nt; t += KV_TOK)                                                                        \
            kv_rtile(KV_TOK, KIND, nb, chunk, a + t * a_stride, a_stride, asum + t * nb, y + t * y_stride, y_stride, \
                     nr);                                                                                            \
        a += t * a_stride;                                                                                           \
        y += t * y_stride;                                                                                           \
        asum += t * nb;                                                                                              \
        KV_TAIL(nt - t, kv_rtile, KIND, nb, chunk, a, a_stride, asum, y, y_stride, nr)                               \
    }

KV_RGEMM(kv_rgemm_q4_0, KV_Q4_0)
KV_RGEMM(kv_rgemm_iq4_nl, KV_IQ4_NL)
KV_RGEMM(kv_rgemm_q8_0, KV_Q8_0)
KV_RGEMM(kv_rgemm_mxfp4, KV_MXFP4)

/* ================================================================
 * Repacked q4_K / iq4_xs super-blocks (lmq_rpanelk4 / lmq_rpanelx4)
 * ================================================================ */

/* The float step of a super-block for rows r0 .. r0 + 7 and T tokens. mm[q]:
 * per row the int16 pair (q4_K: the mins of sub-blocks 2q, 2q + 1; iq4_xs:
 * their scales) against the token's pair sums ps[t * ps_stride + q]
 * (vpdpwssd). q4_K: acc += d dy x tot - dmin dy x bias; iq4_xs: acc += d dy
 * x (tot - 128 bias), the grid's + 128 taken off. */
KV_INLINE void kv_k4_acc(const int T, const bool IQ, const uint16_t *d, const uint16_t *dmin, const __m256i mm[4],
                         int r0, const int32_t *ps, int64_t ps_stride, const lmq_block_q8_K *const *yb,
                         const __m256i *tot, __m256 *acc)
{
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(d + r0)));
    const __m256 dm = IQ ? dw : _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(dmin + r0)));
KV_UNROLL(4)
    for (int t = 0; t < T; t++) {
        __m256i bias = _mm256_setzero_si256();
KV_UNROLL(4)
        for (int q = 0; q < 4; q++) bias = KV_DPWSSD(bias, mm[q], _mm256_set1_epi32(ps[t * ps_stride + q]));
        const __m256 dy = _mm256_set1_ps(yb[t]->d);
        if (IQ) {
            acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dy),
                                     _mm256_cvtepi32_ps(_mm256_sub_epi32(tot[t], _mm256_slli_epi32(bias, 7))), acc[t]);
        } else {
            acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dy), _mm256_cvtepi32_ps(tot[t]), acc[t]);
            acc[t] = _mm256_fnmadd_ps(_mm256_mul_ps(dm, dy), _mm256_cvtepi32_ps(bias), acc[t]);
        }
    }
}

/* The int16 pairs of kv_k4_acc for rows r0 .. r0 + 7. */
KV_INLINE void kv_k4_pairs(const bool IQ, const int8_t (*sc)[LMQ_PANEL_ROWS], const int8_t (*m)[LMQ_PANEL_ROWS][2],
                           int r0, __m256i mm[4])
{
KV_UNROLL(4)
    for (int q = 0; q < 4; q++) {
        if (IQ) {
            const __m256i s0 = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(sc[2 * q] + r0)));
            const __m256i s1 = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(sc[2 * q + 1] + r0)));
            mm[q] = _mm256_or_si256(_mm256_and_si256(s0, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(s1, 16));
        } else {
            mm[q] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)m[q][r0]));
        }
    }
}

/* Per 64 quants (chunk c: sub-block 2c in the low nibbles, 2c + 1 in the
 * high ones) and 8 rows, eight loads; per token 8 vpdpbusd per sub-block
 * into its own sum, then the sub-block's scale (vpmulld) into the total.
 * NH halves per pass (2: one token, both halves and both nibbles from each
 * load, prefetching 2 KiB ahead as panel_avx2.c's one-token kernels do). */
KV_INLINE void kv_rtile_k4_h(const int T, const int NH, const bool IQ, int64_t nb, const uint8_t *chunk,
                             const uint8_t *act, int64_t a_stride, const int32_t *psum, float *y, int64_t y_stride,
                             int nr, int hf0)
{
    const int NN = T == 1 ? 2 : 1; /* nibbles per load */
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i lut = IQ ? kv_lut(KV_IQ4_NL) : _mm256_setzero_si256();
    const int64_t cb = IQ ? (int64_t)sizeof(lmq_rpanelx4) : (int64_t)sizeof(lmq_rpanelk4);
    __m256 acc[2][KV_TOK];
KV_UNROLL(2)
    for (int h = 0; h < NH; h++)
KV_UNROLL(4)
        for (int t = 0; t < T; t++) acc[h][t] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        const uint8_t *blk = chunk + ib * cb;
        const lmq_rpanelk4 *p = IQ ? NULL : (const lmq_rpanelk4 *)blk;
        const lmq_rpanelx4 *x4 = IQ ? (const lmq_rpanelx4 *)blk : NULL;
        const uint16_t *pd = IQ ? x4->d : p->d;
        const int8_t(*psc)[LMQ_PANEL_ROWS] = IQ ? x4->sc : p->sc;
        const uint8_t(*pu)[8][LMQ_PANEL_ROWS][4] = IQ ? x4->u : p->u;
        const lmq_block_q8_K *yb[KV_TOK];
KV_UNROLL(4)
        for (int t = 0; t < T; t++) yb[t] = (const lmq_block_q8_K *)(act + t * a_stride) + ib;
        if (NH == 2) /* the scales of the block 2 KiB ahead (the codes' lines are prefetched below) */
            for (int o = 0; o < (int)((const uint8_t *)pu - blk); o += 64) _mm_prefetch((const char *)blk + 2048 + o, _MM_HINT_T0);
        __m256i tot[2][KV_TOK];
KV_UNROLL(2)
        for (int h = 0; h < NH; h++)
KV_UNROLL(4)
            for (int t = 0; t < T; t++) tot[h][t] = _mm256_setzero_si256();
KV_UNROLL(1)
        for (int c = 0; c < 4; c++)
KV_UNROLL(2)
            for (int n0 = 0; n0 < 2; n0 += NN) {
                __m256i s[2][2][KV_TOK]; /* [nibble - n0][half][token] */
KV_UNROLL(2)
                for (int n = 0; n < NN; n++)
KV_UNROLL(2)
                    for (int h = 0; h < NH; h++)
KV_UNROLL(4)
                        for (int t = 0; t < T; t++) s[n][h][t] = _mm256_setzero_si256();
KV_UNROLL(8)
                for (int g = 0; g < 8; g++)
KV_UNROLL(2)
                    for (int h = 0; h < NH; h++) {
                        if (NH == 2 && n0 == 0 && h == 0) _mm_prefetch((const char *)pu[c][g] + 2048, _MM_HINT_T0);
                        const __m256i v = _mm256_loadu_si256((const __m256i *)pu[c][g][8 * (hf0 + h)]);
KV_UNROLL(2)
                        for (int n = 0; n < NN; n++) {
                            __m256i u = _mm256_and_si256(n0 + n ? _mm256_srli_epi16(v, 4) : v, m4);
                            if (IQ) u = _mm256_shuffle_epi8(lut, u);
KV_UNROLL(4)
                            for (int t = 0; t < T; t++)
                                s[n][h][t] = KV_DPBUSD(s[n][h][t], u,
                                                       kv_bcast32(yb[t]->qs + 64 * c + 32 * (n0 + n) + 4 * g));
                        }
                    }
KV_UNROLL(2)
                for (int h = 0; h < NH; h++)
KV_UNROLL(2)
                    for (int n = 0; n < NN; n++) {
                        const __m256i sc = _mm256_cvtepi8_epi32(
                            _mm_loadl_epi64((const __m128i *)(psc[2 * c + n0 + n] + 8 * (hf0 + h))));
KV_UNROLL(4)
                        for (int t = 0; t < T; t++)
                            tot[h][t] = _mm256_add_epi32(tot[h][t], _mm256_mullo_epi32(s[n][h][t], sc));
                    }
            }
KV_UNROLL(2)
        for (int h = 0; h < NH; h++) {
            __m256i mm[4];
            kv_k4_pairs(IQ, psc, IQ ? NULL : p->m, 8 * (hf0 + h), mm);
            kv_k4_acc(T, IQ, pd, IQ ? NULL : p->dmin, mm, 8 * (hf0 + h), psum + ib * 4, nb * 4, yb, tot[h], acc[h]);
        }
    }
KV_UNROLL(2)
    for (int h = 0; h < NH; h++)
KV_UNROLL(4)
        for (int t = 0; t < T; t++) kv_store(y + t * y_stride, acc[h][t], hf0 + h, nr);
}

KV_INLINE void kv_rtile_k4(const int T, const bool IQ, int64_t nb, const uint8_t *chunk, const uint8_t *act,
                           int64_t a_stride, const int32_t *psum, float *y, int64_t y_stride, int nr)
{
    if (T == 1 && nr > 8) {
        kv_rtile_k4_h(1, 2, IQ, nb, chunk, act, a_stride, psum, y, y_stride, nr, 0);
        return;
    }
    /* q4_K: both halves per pass share the activation broadcasts, two
     * tokens at a time (64 tokens: +5%; iq4_xs, with its table lookups,
     * -4%: it keeps the halves one after the other) */
    if (!IQ && nr > 8) {
        if (T <= 2) {
            kv_rtile_k4_h(T, 2, IQ, nb, chunk, act, a_stride, psum, y, y_stride, nr, 0);
        } else {
            kv_rtile_k4_h(2, 2, IQ, nb, chunk, act, a_stride, psum, y, y_stride, nr, 0);
            kv_rtile_k4_h(T - 2, 2, IQ, nb, chunk, act + 2 * a_stride, a_stride, psum + 2 * nb * 4, y + 2 * y_stride,
                          y_stride, nr, 0);
        }
        return;
    }
    for (int hf = 0; hf < 2 && 8 * hf < nr; hf++)
        kv_rtile_k4_h(T, 1, IQ, nb, chunk, act, a_stride, psum, y, y_stride, nr, hf);
}

#define KV_RGEMM_K4(name, IQ)                                                                                        \
    static void name(int64_t nb, const void *chunk, const void *act, int64_t a_stride, const int32_t *psum, int nt,  \
                     float *y, int64_t y_stride, int nr)                                                             \
    {                                                                                                                \
        const uint8_t *a = act;                                                                                      \
        int t = 0;                                                                                                   \
        for (; t + KV_TOK <= nt; t += KV_TOK)                                                                        \
            kv_rtile_k4(KV_TOK, IQ, nb, chunk, a + t * a_stride, a_stride, psum + t * nb * 4, y + t * y_stride,      \
                        y_stride, nr);                                                                               \
        a += t * a_stride;                                                                                           \
        y += t * y_stride;                                                                                           \
        psum += t * nb * 4;                                                                                          \
        KV_TAIL(nt - t, kv_rtile_k4, IQ, nb, chunk, a, a_stride, psum, y, y_stride, nr)                              \
    }

KV_RGEMM_K4(kv_rgemm_q4_K, false)
KV_RGEMM_K4(kv_rgemm_iq4_xs, true)

/* ================================================================
 * Repacked q6_K super-blocks (lmq_rpanelq6)
 * ================================================================ */


/* Per 16-quant sub-block, 8 rows and token: 4 vpdpbusd of the codes with
 * the signed activations into the sub-block's sum, times its scale
 * (vpmulld) into the total; the codes' -32 comes off per pair of
 * sub-blocks as vpdpwssd of -32 x the scale pairs with the q8_K row's
 * bsums. NH halves x T tokens per pass as kv_rtile_k4_h. */
KV_INLINE void kv_rtile_q6_h(const int T, const int NH, int64_t nb, const uint8_t *chunk, const uint8_t *act,
                             int64_t a_stride, float *y, int64_t y_stride, int nr, int hf0)
{
    __m256 acc[2][KV_TOK];
KV_UNROLL(2)
    for (int h = 0; h < NH; h++)
KV_UNROLL(4)
        for (int t = 0; t < T; t++) acc[h][t] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        const lmq_rpanelq6 *p = (const lmq_rpanelq6 *)chunk + ib;
        const lmq_block_q8_K *yb[KV_TOK];
KV_UNROLL(4)
        for (int t = 0; t < T; t++) yb[t] = (const lmq_block_q8_K *)(act + t * a_stride) + ib;
        if (NH == 2) /* the scales of the block 2 KiB ahead (the codes' lines are prefetched below) */
            for (int o = 0; o < (int)offsetof(lmq_rpanelq6, q); o += 64) _mm_prefetch((const char *)p + 2048 + o, _MM_HINT_T0);
        __m256i tot[2][KV_TOK];
KV_UNROLL(2)
        for (int h = 0; h < NH; h++)
KV_UNROLL(4)
            for (int t = 0; t < T; t++) tot[h][t] = _mm256_setzero_si256();
KV_UNROLL(1)
        for (int pp = 0; pp < 8; pp++) {
            __m256i sv[2];
KV_UNROLL(2)
            for (int h = 0; h < NH; h++) {
                sv[h] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p->sc[pp][8 * (hf0 + h)]));
                const __m256i m32 = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sv[h], 5));
KV_UNROLL(4)
                for (int t = 0; t < T; t++) tot[h][t] = KV_DPWSSD(tot[h][t], m32, kv_bcast32(yb[t]->bsums + 2 * pp));
            }
KV_UNROLL(2)
            for (int n = 0; n < 2; n++) {
                const int sb = 2 * pp + n;
KV_UNROLL(2)
                for (int h = 0; h < NH; h++) {
                    if (NH == 2 && h == 0)
                        for (int b = 0; b < 3; b++) _mm_prefetch((const char *)p->q[sb][b] + 2048, _MM_HINT_T0);
                    /* the scale of sub-block sb: int16 n of each row's pair, as int32 */
                    const __m256i sc = n ? _mm256_srai_epi32(sv[h], 16) : _mm256_srai_epi32(_mm256_slli_epi32(sv[h], 16), 16);
                    __m256i c[4];
                    kr_q6_codes(p->q[sb][0][8 * (hf0 + h)], c);
KV_UNROLL(4)
                    for (int t = 0; t < T; t++) {
                        const int8_t *a = yb[t]->qs + 16 * sb;
                        __m256i sum = KV_DPBUSD(_mm256_setzero_si256(), c[0], kv_bcast32(a));
KV_UNROLL(3)
                        for (int g = 1; g < 4; g++) sum = KV_DPBUSD(sum, c[g], kv_bcast32(a + 4 * g));
                        tot[h][t] = _mm256_add_epi32(tot[h][t], _mm256_mullo_epi32(sum, sc));
                    }
                }
            }
        }
KV_UNROLL(2)
        for (int h = 0; h < NH; h++) {
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p->d + 8 * (hf0 + h))));
KV_UNROLL(4)
            for (int t = 0; t < T; t++)
                acc[h][t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(yb[t]->d)), _mm256_cvtepi32_ps(tot[h][t]),
                                            acc[h][t]);
        }
    }
KV_UNROLL(2)
    for (int h = 0; h < NH; h++)
KV_UNROLL(4)
        for (int t = 0; t < T; t++) kv_store(y + t * y_stride, acc[h][t], hf0 + h, nr);
}

KV_INLINE void kv_rtile_q6(const int T, int64_t nb, const uint8_t *chunk, const uint8_t *act, int64_t a_stride,
                           const int32_t *psum, float *y, int64_t y_stride, int nr)
{
    (void)psum; /* the q8_K rows' own bsums serve */
    if (T == 1 && nr > 8) {
        kv_rtile_q6_h(1, 2, nb, chunk, act, a_stride, y, y_stride, nr, 0);
        return;
    }
    for (int hf = 0; hf < 2 && 8 * hf < nr; hf++) kv_rtile_q6_h(T, 1, nb, chunk, act, a_stride, y, y_stride, nr, hf);
}

static void kv_rgemm_q6_K(int64_t nb, const void *chunk, const void *act, int64_t a_stride, const int32_t *psum, int nt,
                          float *y, int64_t y_stride, int nr)
{
    const uint8_t *a = act;
    int t = 0;
    for (; t + KV_TOK <= nt; t += KV_TOK)
        kv_rtile_q6(KV_TOK, nb, chunk, a + t * a_stride, a_stride, psum, y + t * y_stride, y_stride, nr);
    a += t * a_stride;
    y += t * y_stride;
    KV_TAIL(nt - t, kv_rtile_q6, nb, chunk, a, a_stride, psum, y, y_stride, nr)
}

/* ================================================================
 * Repacked q5_K super-blocks (lmq_rpanelq5)
 * ================================================================ */


/* Per 32-quant sub-block, 8 rows and token: 8 vpdpbusd of the codes with
 * the signed activations into the sub-block's sum, times its scale
 * (vpmulld) into the total; the mins as q4_K's (kv_k4_acc). NH halves x T
 * tokens per pass as kv_rtile_k4_h. */
KV_INLINE void kv_rtile_q5_h(const int T, const int NH, int64_t nb, const uint8_t *chunk, const uint8_t *act,
                             int64_t a_stride, const int32_t *psum, float *y, int64_t y_stride, int nr, int hf0)
{
    __m256 acc[2][KV_TOK];
KV_UNROLL(2)
    for (int h = 0; h < NH; h++)
KV_UNROLL(4)
        for (int t = 0; t < T; t++) acc[h][t] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        const lmq_rpanelq5 *p = (const lmq_rpanelq5 *)chunk + ib;
        const lmq_block_q8_K *yb[KV_TOK];
KV_UNROLL(4)
        for (int t = 0; t < T; t++) yb[t] = (const lmq_block_q8_K *)(act + t * a_stride) + ib;
        if (NH == 2) /* the scales of the block 2 KiB ahead (the codes' lines are prefetched below) */
            for (int o = 0; o < (int)offsetof(lmq_rpanelq5, q); o += 64) _mm_prefetch((const char *)p + 2048 + o, _MM_HINT_T0);
        __m256i tot[2][KV_TOK];
KV_UNROLL(2)
        for (int h = 0; h < NH; h++)
KV_UNROLL(4)
            for (int t = 0; t < T; t++) tot[h][t] = _mm256_setzero_si256();
KV_UNROLL(1)
        for (int j = 0; j < 8; j++) {
KV_UNROLL(2)
            for (int h = 0; h < NH; h++) {
                if (NH == 2 && h == 0)
                    for (int b = 0; b < 5; b++) _mm_prefetch((const char *)p->q[j][b] + 2048, _MM_HINT_T0);
                /* one token: a chain per half sub-block (8 dependent vpdpbusd
                 * bound the one-token kernel by their latency) */
                const int CH = T == 1 ? 2 : 1;
                __m256i s[KV_TOK][2];
KV_UNROLL(4)
                for (int t = 0; t < T; t++) s[t][0] = s[t][CH - 1] = _mm256_setzero_si256();
KV_UNROLL(2)
                for (int n = 0; n < 2; n++) {
                    __m256i c[4];
                    kr_q5_codes(p->q[j][0][8 * (hf0 + h)], n, c);
KV_UNROLL(4)
                    for (int t = 0; t < T; t++) {
                        const int8_t *a = yb[t]->qs + 32 * j + 16 * n;
KV_UNROLL(4)
                        for (int g = 0; g < 4; g++)
                            s[t][n * (CH - 1)] = KV_DPBUSD(s[t][n * (CH - 1)], c[g], kv_bcast32(a + 4 * g));
                    }
                }
                const __m256i sc = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p->sc[j] + 8 * (hf0 + h))));
KV_UNROLL(4)
                for (int t = 0; t < T; t++) {
                    const __m256i st = CH == 2 ? _mm256_add_epi32(s[t][0], s[t][1]) : s[t][0];
                    tot[h][t] = _mm256_add_epi32(tot[h][t], _mm256_mullo_epi32(st, sc));
                }
            }
        }
KV_UNROLL(2)
        for (int h = 0; h < NH; h++) {
            __m256i mm[4];
            kv_k4_pairs(false, p->sc, p->m, 8 * (hf0 + h), mm);
            kv_k4_acc(T, false, p->d, p->dmin, mm, 8 * (hf0 + h), psum + ib * 4, nb * 4, yb, tot[h], acc[h]);
        }
    }
KV_UNROLL(2)
    for (int h = 0; h < NH; h++)
KV_UNROLL(4)
        for (int t = 0; t < T; t++) kv_store(y + t * y_stride, acc[h][t], hf0 + h, nr);
}

KV_INLINE void kv_rtile_q5(const int T, int64_t nb, const uint8_t *chunk, const uint8_t *act, int64_t a_stride,
                           const int32_t *psum, float *y, int64_t y_stride, int nr)
{
    if (T == 1 && nr > 8) {
        kv_rtile_q5_h(1, 2, nb, chunk, act, a_stride, psum, y, y_stride, nr, 0);
        return;
    }
    for (int hf = 0; hf < 2 && 8 * hf < nr; hf++)
        kv_rtile_q5_h(T, 1, nb, chunk, act, a_stride, psum, y, y_stride, nr, hf);
}

/* One token (generation) stays with the AVX2 table's q5_K kernel: its
 * codes' extraction bounds both, and the whole 1.1B q5_k_m generated at
 * 0.94x with this one (tg64, three alternations); batches gain (4 tokens
 * 1.31x, 64 tokens 1.09x). Set by KV_FILL from the table it overrides. */
static lmq_rpanel_gemm_fn kv_q5_one;

static void kv_rgemm_q5_K(int64_t nb, const void *chunk, const void *act, int64_t a_stride, const int32_t *psum, int nt,
                          float *y, int64_t y_stride, int nr)
{
    if (nt == 1 && kv_q5_one) {
        kv_q5_one(nb, chunk, act, a_stride, psum, nt, y, y_stride, nr);
        return;
    }
    const uint8_t *a = act;
    int t = 0;
    for (; t + KV_TOK <= nt; t += KV_TOK)
        kv_rtile_q5(KV_TOK, nb, chunk, a + t * a_stride, a_stride, psum + t * nb * 4, y + t * y_stride, y_stride, nr);
    a += t * a_stride;
    y += t * y_stride;
    psum += t * nb * 4;
    KV_TAIL(nt - t, kv_rtile_q5, nb, chunk, a, a_stride, psum, y, y_stride, nr)
}

/* ================================================================
 * Repacked q2_K / q3_K super-blocks (lmq_rpanelq2 / lmq_rpanelq3)
 * ================================================================ */

/* Per 16-quant sub-block, 8 rows and token: 4 vpdpbusd of the codes with
 * the signed activations into the sub-block's sum (|sum| <= 16 x 7 x 128 <
 * 2^15), then one vpdpwssd of that sum against the scale in the low int16
 * of the lane (the high one zero), which multiplies it into the total in
 * one instruction. q3_K's -4 comes off as vpdpwssd of -4 x the scale pairs
 * with the q8_K row's bsums; q2_K's mins are dotted with the bsums after
 * the codes (as panel_avx2.c's k2_rtile_q23_h). NH halves x T tokens. */
KV_INLINE void kv_rtile_q23_h(const int Q2, const int T, const int NH, int64_t nb, const uint8_t *chunk,
                              const uint8_t *act, int64_t a_stride, float *y, int64_t y_stride, int nr, int hf0)
{
    const size_t bytes = Q2 ? sizeof(lmq_rpanelq2) : sizeof(lmq_rpanelq3);
    const size_t head = Q2 ? offsetof(lmq_rpanelq2, q) : offsetof(lmq_rpanelq3, q);
    const __m256i lo16 = _mm256_set1_epi32(0xFFFF);
    __m256 acc[2][KV_TOK];
KV_UNROLL(2)
    for (int h = 0; h < NH; h++)
KV_UNROLL(4)
        for (int t = 0; t < T; t++) acc[h][t] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        const uint8_t *blk = chunk + ib * bytes;
        const lmq_rpanelq2 *p2 = (const lmq_rpanelq2 *)blk;
        const lmq_rpanelq3 *p3 = (const lmq_rpanelq3 *)blk;
        const lmq_block_q8_K *yb[KV_TOK];
KV_UNROLL(4)
        for (int t = 0; t < T; t++) yb[t] = (const lmq_block_q8_K *)(act + t * a_stride) + ib;
        if (NH == 2) /* the scales of the block 2 KiB ahead (the codes' lines are prefetched below) */
            for (size_t o = 0; o < head; o += 64) _mm_prefetch((const char *)blk + 2048 + o, _MM_HINT_T0);
        __m256i tot[2][KV_TOK];
KV_UNROLL(2)
        for (int h = 0; h < NH; h++)
KV_UNROLL(4)
            for (int t = 0; t < T; t++) tot[h][t] = _mm256_setzero_si256();
KV_UNROLL(1)
        for (int pp = 0; pp < 8; pp++) {
            __m256i sv[2];
KV_UNROLL(2)
            for (int h = 0; h < NH; h++) {
                const int r0 = 8 * (hf0 + h);
                if (Q2) {
                    sv[h] = _mm256_and_si256(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)p2->sc[pp][r0])),
                                             _mm256_set1_epi16(0x0F));
                } else {
                    sv[h] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p3->sc[pp][r0]));
                    const __m256i m4 = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sv[h], 2));
KV_UNROLL(4)
                    for (int t = 0; t < T; t++) tot[h][t] = KV_DPWSSD(tot[h][t], m4, kv_bcast32(yb[t]->bsums + 2 * pp));
                }
            }
KV_UNROLL(2)
            for (int n = 0; n < 2; n++) {
                const int sb = 2 * pp + n;
KV_UNROLL(2)
                for (int h = 0; h < NH; h++) {
                    const int r0 = 8 * (hf0 + h);
                    const uint8_t *plane = Q2 ? p2->q[sb][r0] : p3->q[pp][0][r0];
                    if (NH == 2 && h == 0) {
                        if (Q2)
                            _mm_prefetch((const char *)plane + 2048, _MM_HINT_T0);
                        else if (n == 0)
                            for (int b = 0; b < 3; b++) _mm_prefetch((const char *)plane + 64 * b + 2048, _MM_HINT_T0);
                    }
                    /* the scale of sub-block sb: int16 n of each row's pair, in the low int16 */
                    const __m256i sc = n ? _mm256_srli_epi32(sv[h], 16) : _mm256_and_si256(sv[h], lo16);
                    __m256i c[4];
                    if (Q2)
                        kr_q2_codes(plane, c);
                    else
                        kr_q3_codes(plane, n, c);
KV_UNROLL(4)
                    for (int t = 0; t < T; t++) {
                        const int8_t *a = yb[t]->qs + 16 * sb;
                        __m256i sum = KV_DPBUSD(_mm256_setzero_si256(), c[0], kv_bcast32(a));
KV_UNROLL(3)
                        for (int g = 1; g < 4; g++) sum = KV_DPBUSD(sum, c[g], kv_bcast32(a + 4 * g));
                        tot[h][t] = KV_DPWSSD(tot[h][t], sum, sc);
                    }
                }
            }
        }
KV_UNROLL(2)
        for (int h = 0; h < NH; h++) {
            const int r0 = 8 * (hf0 + h);
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((Q2 ? p2->d : p3->d) + r0)));
KV_UNROLL(4)
            for (int t = 0; t < T; t++)
                acc[h][t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(yb[t]->d)), _mm256_cvtepi32_ps(tot[h][t]),
                                            acc[h][t]);
            if (Q2) kr_q2_min_acc(T, p2, r0, yb, acc[h]);
        }
    }
KV_UNROLL(2)
    for (int h = 0; h < NH; h++)
KV_UNROLL(4)
        for (int t = 0; t < T; t++) kv_store(y + t * y_stride, acc[h][t], hf0 + h, nr);
}

KV_INLINE void kv_rtile_q2(const int T, int64_t nb, const uint8_t *chunk, const uint8_t *act, int64_t a_stride,
                           float *y, int64_t y_stride, int nr)
{
    if (T == 1 && nr > 8) {
        kv_rtile_q23_h(1, 1, 2, nb, chunk, act, a_stride, y, y_stride, nr, 0);
        return;
    }
    for (int hf = 0; hf < 2 && 8 * hf < nr; hf++) kv_rtile_q23_h(1, T, 1, nb, chunk, act, a_stride, y, y_stride, nr, hf);
}

KV_INLINE void kv_rtile_q3(const int T, int64_t nb, const uint8_t *chunk, const uint8_t *act, int64_t a_stride,
                           float *y, int64_t y_stride, int nr)
{
    if (T == 1 && nr > 8) {
        kv_rtile_q23_h(0, 1, 2, nb, chunk, act, a_stride, y, y_stride, nr, 0);
        return;
    }
    for (int hf = 0; hf < 2 && 8 * hf < nr; hf++) kv_rtile_q23_h(0, T, 1, nb, chunk, act, a_stride, y, y_stride, nr, hf);
}

#define KV_RGEMM_Q23(name, tile)                                                                                     \
    static void name(int64_t nb, const void *chunk, const void *act, int64_t a_stride, const int32_t *psum, int nt,  \
                     float *y, int64_t y_stride, int nr)                                                             \
    {                                                                                                                \
        (void)psum; /* the q8_K rows' own bsums serve */                                                             \
        const uint8_t *a = act;                                                                                      \
        int t = 0;                                                                                                   \
        for (; t + KV_TOK <= nt; t += KV_TOK)                                                                        \
            tile(KV_TOK, nb, chunk, a + t * a_stride, a_stride, y + t * y_stride, y_stride, nr);                     \
        a += t * a_stride;                                                                                           \
        y += t * y_stride;                                                                                           \
        KV_TAIL(nt - t, tile, nb, chunk, a, a_stride, y, y_stride, nr)                                               \
    }

KV_RGEMM_Q23(kv_rgemm_q2_K, kv_rtile_q2)
KV_RGEMM_Q23(kv_rgemm_q3_K, kv_rtile_q3)

/* Over the AVX2 table (dispatch.c): the repacked kernels that vpdpbusd
 * serves (every type AVX2 repacks; q5_K for batches only); vec_dot and
 * the panels stay AVX2's. */
void KV_FILL(lmq_kernel_table *t)
{
    t->isa = LMQ_ISA_AVXVNNI;
    t->rpanel_gemm[LMQ_TYPE_Q4_0] = kv_rgemm_q4_0;
    t->rpanel_gemm[LMQ_TYPE_IQ4_NL] = kv_rgemm_iq4_nl;
    t->rpanel_gemm[LMQ_TYPE_Q8_0] = kv_rgemm_q8_0;
    t->rpanel_gemm[LMQ_TYPE_MXFP4] = kv_rgemm_mxfp4;
    t->rpanel_gemm[LMQ_TYPE_Q4_K] = kv_rgemm_q4_K;
    t->rpanel_gemm[LMQ_TYPE_IQ4_XS] = kv_rgemm_iq4_xs;
    t->rpanel_gemm[LMQ_TYPE_Q6_K] = kv_rgemm_q6_K;
    t->rpanel_gemm[LMQ_TYPE_Q2_K] = kv_rgemm_q2_K;
    t->rpanel_gemm[LMQ_TYPE_Q3_K] = kv_rgemm_q3_K;
    kv_q5_one = t->rpanel_gemm[LMQ_TYPE_Q5_K] != kv_rgemm_q5_K ? t->rpanel_gemm[LMQ_TYPE_Q5_K] : kv_q5_one;
    t->rpanel_gemm[LMQ_TYPE_Q5_K] = kv_rgemm_q5_K;
}

