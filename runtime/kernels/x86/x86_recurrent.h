/* x86_recurrent.h — the bodies of lmq_delta_rule and lmq_ssm_conv for x86
 * (8-lane vectors), shared by recurrent_avx2.c (16 registers: blocks of 4
 * vectors) and recurrent_avx512.c (32 registers: blocks of 8 vectors).
 * Included only by files compiled with at least -mavx2 -mfma -mf16c.
 *
 * Columns (delta rule) and channels (convolution) run across the lanes; a
 * range whose length is not a multiple of 8 ends in one vector read and
 * written with vmaskmovps, so every column or channel gets the same
 * operations in every block width and at every offset: results do not
 * depend on the block size (avx2 and avx512 agree bit for bit) nor on how a
 * caller splits the channels. */
#ifndef LMQ_X86_RECURRENT_H
#define LMQ_X86_RECURRENT_H

#include <assert.h>
#include <stdbool.h>

#include "x86_simd.h"

#define KX_DELTA_MAX_NV 8
/* Convolution: channels per tile, and the longest kernel the SIMD code
 * takes (longer ones, which no model uses, go to the scalar oracle). */
#define KX_CONV_TILE 128
#define KX_CONV_MAX_K 16

/* Lanes 0 .. n-1 set (1 <= n <= 8). */
static inline __m256i kx_lanes(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* One vector at p; only the lanes in `mask` when `part` (the last vector
 * of a range: vmaskmovps neither reads nor faults beyond them). */
static inline __attribute__((always_inline)) __m256 kx_ld(const float *p, bool part, __m256i mask)
{
    return part ? _mm256_maskload_ps(p, mask) : _mm256_loadu_ps(p);
}

static inline __attribute__((always_inline)) void kx_st(float *p, __m256 x, bool part, __m256i mask)
{
    if (part)
        _mm256_maskstore_ps(p, mask, x);
    else
        _mm256_storeu_ps(p, x);
}

/* ---- gated delta rule ------------------------------------------------ */

/* One token's pass over the rows of a block of columns (S at the block's
 * first column): S = decay S + k d^T, o = S^T q and, when `next`, the next
 * token's m = S^T kn from the same updated values (one pass over S per
 * token). */
static inline __attribute__((always_inline)) void kx_delta_pass(float *S, int32_t dk, int32_t dv, const float *q,
                                                                const float *k, const float *kn, __m256 decay,
                                                                const __m256 *d, __m256 *o, __m256 *m, const int NV,
                                                                const bool part, __m256i mask, const bool next)
{
    for (int v = 0; v < NV; v++) o[v] = m[v] = _mm256_setzero_ps();
    for (int32_t i = 0; i < dk; i++) {
        float *row = S + (size_t)i * (size_t)dv;
        const __m256 bk = _mm256_broadcast_ss(k + i), bq = _mm256_broadcast_ss(q + i);
        const __m256 bn = _mm256_broadcast_ss(kn + i);
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) {
            const bool pv = part && v == NV - 1;
            const __m256 s = _mm256_fmadd_ps(bk, d[v], _mm256_mul_ps(kx_ld(row + 8 * v, pv, mask), decay));
            kx_st(row + 8 * v, s, pv, mask);
            o[v] = _mm256_fmadd_ps(s, bq, o[v]);
            if (next) m[v] = _mm256_fmadd_ps(s, bn, m[v]);
        }
    }
}

/* Columns j0 .. j0 + 8 NV - 1 (the last vector partial when `part`) over
 * every token. The block's columns of S stay in L1 across the tokens.
 * Per token and column, as the oracle but fused: m = S^T k (sum over rows
 * in order, FMA), d = beta (v - decay m), then kx_delta_pass. The m of
 * token t + 1 is summed in the pass of token t with the same operations as
 * the first token's m is summed here, so splitting a batch of tokens over
 * calls gives the same bits. */
static inline __attribute__((always_inline)) void kx_delta_cols(const lmq_delta_args *a, int32_t j0, const int NV,
                                                                const bool part, __m256i mask)
{
    const int32_t dk = a->dk, dv = a->dv;
    float *S = a->S + j0;
    __m256 m[KX_DELTA_MAX_NV], d[KX_DELTA_MAX_NV], o[KX_DELTA_MAX_NV];
    for (int v = 0; v < NV; v++) m[v] = _mm256_setzero_ps();
    for (int32_t i = 0; i < dk; i++) {
        const float *row = S + (size_t)i * (size_t)dv;
        const __m256 bk = _mm256_broadcast_ss(a->k + i);
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) m[v] = _mm256_fmadd_ps(kx_ld(row + 8 * v, part && v == NV - 1, mask), bk, m[v]);
    }
    for (int32_t t = 0; t < a->n_tok; t++) {
        const float *q = a->q + (size_t)t * (size_t)a->qk_stride, *k = a->k + (size_t)t * (size_t)a->qk_stride;
        const float *v_t = a->v + (size_t)t * (size_t)a->v_stride + j0;
        float *o_t = a->o + (size_t)t * (size_t)a->o_stride + j0;
        const size_t g = (size_t)t * (size_t)a->g_stride;
        const __m256 decay = _mm256_set1_ps(a->decay[g]), beta = _mm256_set1_ps(a->beta[g]);
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++)
            d[v] = _mm256_mul_ps(beta, _mm256_fnmadd_ps(decay, m[v], kx_ld(v_t + 8 * v, part && v == NV - 1, mask)));
        if (t + 1 < a->n_tok)
            kx_delta_pass(S, dk, dv, q, k, k + a->qk_stride, decay, d, o, m, NV, part, mask, true);
        else
            kx_delta_pass(S, dk, dv, q, k, k, decay, d, o, m, NV, part, mask, false);
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) kx_st(o_t + 8 * v, o[v], part && v == NV - 1, mask);
    }
}

/* The delta rule with blocks of NV vectors (a constant at each call site),
 * then single vectors, then the partial one. */
static inline __attribute__((always_inline)) void kx_delta_rule(const lmq_delta_args *a, const int NV)
{
    assert(a->dk >= 1 && a->dv >= 1 && NV <= KX_DELTA_MAX_NV);
    const int32_t dv = a->dv;
    const __m256i all = _mm256_set1_epi32(-1);
    int32_t j = 0;
    for (; j + 8 * NV <= dv; j += 8 * NV) kx_delta_cols(a, j, NV, false, all);
    for (; j + 8 <= dv; j += 8) kx_delta_cols(a, j, 1, false, all);
    if (j < dv) kx_delta_cols(a, j, 1, true, kx_lanes(dv - j));
}

/* ---- causal depthwise convolution ------------------------------------ */

/* x / (1 + exp(-x)), as the oracle (x86_exp_ps: about 2 ulp). */
static inline __m256 kx_silu_ps(__m256 x)
{
    const __m256 e = x86_exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

/* Input s (s >= -(K-1)) from channel c on: x or the state. */
static inline const float *kx_conv_in(const lmq_conv_args *a, int32_t s, int32_t c)
{
    return s >= 0 ? a->x + (size_t)s * (size_t)a->x_stride + (size_t)c
                  : a->state + (size_t)(a->K - 1 + s) * (size_t)a->C + (size_t)c;
}

/* One vector of channels of one token: the taps in order, acc = fma(w_j,
 * in_j, acc) from 0, then SiLU. wt: the tile's weights, tap-major. */
static inline __attribute__((always_inline)) void kx_conv_vec(const lmq_conv_args *a, int32_t K, const float *wt,
                                                              const float *const *in, float *y, int32_t o,
                                                              const bool part, __m256i mask)
{
    __m256 acc = _mm256_setzero_ps();
    for (int32_t j = 0; j < K; j++)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(wt + (size_t)j * KX_CONV_TILE + (size_t)o), kx_ld(in[j] + o, part, mask),
                              acc);
    if (a->silu) acc = kx_silu_ps(acc);
    kx_st(y + o, acc, part, mask);
}

/* The 4 taps of 8 channels (32 floats at w) as 4 vectors of 8 channels at
 * wt + j * KX_CONV_TILE: a 4x4 transpose within each 128-bit half gives
 * the channels in the order 0 2 4 6 1 3 5 7, which one permute restores. */
static inline void kx_conv_wt4(const float *w, float *wt)
{
    const __m256 r0 = _mm256_loadu_ps(w), r1 = _mm256_loadu_ps(w + 8), r2 = _mm256_loadu_ps(w + 16),
                 r3 = _mm256_loadu_ps(w + 24);
    const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    const __m256 c[4] = {_mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(t0), _mm256_castps_pd(t2))),
                         _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(t0), _mm256_castps_pd(t2))),
                         _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(t1), _mm256_castps_pd(t3))),
                         _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(t1), _mm256_castps_pd(t3)))};
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int j = 0; j < 4; j++) _mm256_storeu_ps(wt + (size_t)j * KX_CONV_TILE, _mm256_permutevar8x32_ps(c[j], order));
}

/* Channels c .. c + nc - 1 (nc <= KX_CONV_TILE) over every token, then
 * their state, with K taps (a constant at the call site for K = 4). The
 * tile's weights are transposed once into wt, so that a token's inputs
 * and outputs are read and written as contiguous rows. */
static inline __attribute__((always_inline)) void kx_conv_tile(const lmq_conv_args *a, const int32_t K, int32_t c,
                                                               int32_t nc, float *wt)
{
    const int32_t n = a->n_tok, nfull = nc / 8;
    const bool part = nc % 8 != 0;
    const __m256i mask = part ? kx_lanes(nc % 8) : _mm256_set1_epi32(-1);
    int32_t l = 0;
    if (K == 4)
        for (; l + 8 <= nc; l += 8) kx_conv_wt4(a->w + (size_t)(c + l) * 4, wt + l);
    for (; l < nc; l++)
        for (int32_t j = 0; j < K; j++) wt[(size_t)j * KX_CONV_TILE + (size_t)l] = a->w[(size_t)(c + l) * (size_t)K + (size_t)j];
    for (int32_t t = 0; t < n; t++) {
        const float *in[KX_CONV_MAX_K];
        for (int32_t j = 0; j < K; j++) in[j] = kx_conv_in(a, t - K + 1 + j, c);
        float *y = a->y + (size_t)t * (size_t)a->y_stride + (size_t)c;
        for (int32_t v = 0; v < nfull; v++) kx_conv_vec(a, K, wt, in, y, 8 * v, false, mask);
        if (part) kx_conv_vec(a, K, wt, in, y, 8 * nfull, true, mask);
    }
    /* row r takes input n - (K-1) + r: x, or a later row of the old state */
    for (int32_t r = 0; r < K - 1; r++) {
        const float *src = kx_conv_in(a, n - (K - 1) + r, c);
        float *dst = a->state + (size_t)r * (size_t)a->C + (size_t)c;
        for (int32_t v = 0; v < nfull; v++) _mm256_storeu_ps(dst + 8 * v, _mm256_loadu_ps(src + 8 * v));
        if (part) kx_st(dst + 8 * nfull, kx_ld(src + 8 * nfull, true, mask), true, mask);
    }
}

static inline void kx_ssm_conv(const lmq_conv_args *a)
{
    assert(a->K >= 1 && 0 <= a->c0 && a->c0 <= a->c1 && a->c1 <= a->C && a->n_tok >= 0);
    if (a->K > KX_CONV_MAX_K) {
        lmq_ssm_conv_ref(a);
        return;
    }
    float wt[KX_CONV_MAX_K * KX_CONV_TILE];
    for (int32_t c = a->c0; c < a->c1; c += KX_CONV_TILE) {
        const int32_t nc = a->c1 - c < KX_CONV_TILE ? a->c1 - c : KX_CONV_TILE;
        if (a->K == 4) /* the common kernel: the tap loop unrolled */
            kx_conv_tile(a, 4, c, nc, wt);
        else
            kx_conv_tile(a, a->K, c, nc, wt);
    }
}

#endif /* LMQ_X86_RECURRENT_H */
