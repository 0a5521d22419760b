/* recurrent_neon.c — lmq_delta_rule and lmq_ssm_conv for NEON: the scheme
 * of x86/x86_recurrent.h with 4-lane vectors, blocks of 4 vectors (16
 * columns of the state) for the delta rule. A range whose length is not a
 * multiple of 4 ends in one vector read and written through a small buffer
 * (NEON has no masked loads), so every column or channel gets the same
 * operations wherever it falls: results do not depend on how a caller
 * splits the channels. */
#include <arm_neon.h>
#include <assert.h>
#include <stdbool.h>
#include <string.h>

#include "arm_simd.h"
#include "kernels.h"

#define NV_MAX 4
#define CONV_TILE 128 /* channels per tile of the convolution */
#define CONV_MAX_K 16 /* longer kernels (no model uses one) go to the oracle */

/* n (1..4) floats at p; the last vector of a range is partial when n < 4. */
static inline __attribute__((always_inline)) float32x4_t ld(const float *p, int n)
{
    if (n == 4) return vld1q_f32(p);
    float b[4] = {0};
    memcpy(b, p, (size_t)n * sizeof(float));
    return vld1q_f32(b);
}

static inline __attribute__((always_inline)) void st(float *p, float32x4_t x, int n)
{
    if (n == 4) {
        vst1q_f32(p, x);
        return;
    }
    float b[4];
    vst1q_f32(b, x);
    memcpy(p, b, (size_t)n * sizeof(float));
}

/* ---- gated delta rule ------------------------------------------------ */

/* One token's pass over the rows of a block (as kx_delta_pass): S = decay S
 * + k d^T, o = S^T q and, when `next`, the next token's m = S^T kn. The
 * block's last vector holds nl columns. */
static inline __attribute__((always_inline)) void delta_pass(float *S, int32_t dk, int32_t dv, const float *q,
                                                             const float *k, const float *kn, float decay,
                                                             const float32x4_t *d, float32x4_t *o, float32x4_t *m,
                                                             const int NV, int nl, const bool next)
{
    for (int v = 0; v < NV; v++) o[v] = m[v] = vdupq_n_f32(0);
    for (int32_t i = 0; i < dk; i++) {
        float *row = S + (size_t)i * (size_t)dv;
        const float bk = k[i], bq = q[i], bn = kn[i];
        for (int v = 0; v < NV; v++) {
            const int n = v == NV - 1 ? nl : 4;
            const float32x4_t s = vfmaq_n_f32(vmulq_n_f32(ld(row + 4 * v, n), decay), d[v], bk);
            st(row + 4 * v, s, n);
            o[v] = vfmaq_n_f32(o[v], s, bq);
            if (next) m[v] = vfmaq_n_f32(m[v], s, bn);
        }
    }
}

/* Columns j0 .. j0 + 4 NV - 1, the last vector holding nl of them, over
 * every token (as kx_delta_cols). */
static inline __attribute__((always_inline)) void delta_cols(const lmq_delta_args *a, int32_t j0, const int NV, int nl)
{
    const int32_t dk = a->dk, dv = a->dv;
    float *S = a->S + j0;
    float32x4_t m[NV_MAX], d[NV_MAX], o[NV_MAX];
    for (int v = 0; v < NV; v++) m[v] = vdupq_n_f32(0);
    for (int32_t i = 0; i < dk; i++) {
        const float *row = S + (size_t)i * (size_t)dv;
        for (int v = 0; v < NV; v++) m[v] = vfmaq_n_f32(m[v], ld(row + 4 * v, v == NV - 1 ? nl : 4), a->k[i]);
    }
    for (int32_t t = 0; t < a->n_tok; t++) {
        const float *q = a->q + (size_t)t * (size_t)a->qk_stride, *k = a->k + (size_t)t * (size_t)a->qk_stride;
        const float *v_t = a->v + (size_t)t * (size_t)a->v_stride + j0;
        float *o_t = a->o + (size_t)t * (size_t)a->o_stride + j0;
        const size_t g = (size_t)t * (size_t)a->g_stride;
        const float decay = a->decay[g], beta = a->beta[g];
        for (int v = 0; v < NV; v++)
            d[v] = vmulq_n_f32(vfmsq_n_f32(ld(v_t + 4 * v, v == NV - 1 ? nl : 4), m[v], decay), beta);
        if (t + 1 < a->n_tok)
            delta_pass(S, dk, dv, q, k, k + a->qk_stride, decay, d, o, m, NV, nl, true);
        else
            delta_pass(S, dk, dv, q, k, k, decay, d, o, m, NV, nl, false);
        for (int v = 0; v < NV; v++) st(o_t + 4 * v, o[v], v == NV - 1 ? nl : 4);
    }
}

static void delta_rule_neon(const lmq_delta_args *a)
{
    assert(a->dk >= 1 && a->dv >= 1);
    const int32_t dv = a->dv;
    int32_t j = 0;
    for (; j + 4 * NV_MAX <= dv; j += 4 * NV_MAX) delta_cols(a, j, NV_MAX, 4);
    for (; j + 4 <= dv; j += 4) delta_cols(a, j, 1, 4);
    if (j < dv) delta_cols(a, j, 1, dv - j);
}

/* ---- causal depthwise convolution ------------------------------------ */

static inline float32x4_t silu_ps(float32x4_t x)
{
    return vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0f), arm_exp_ps(vnegq_f32(x))));
}

static inline const float *conv_in(const lmq_conv_args *a, int32_t s, int32_t c)
{
    return s >= 0 ? a->x + (size_t)s * (size_t)a->x_stride + (size_t)c
                  : a->state + (size_t)(a->K - 1 + s) * (size_t)a->C + (size_t)c;
}

/* One vector of nl (1..4) channels of one token, as kx_conv_vec. */
static inline __attribute__((always_inline)) void conv_vec(const lmq_conv_args *a, int32_t K, const float *wt,
                                                           const float *const *in, float *y, int32_t o, int nl)
{
    float32x4_t acc = vdupq_n_f32(0);
    for (int32_t j = 0; j < K; j++) acc = vfmaq_f32(acc, vld1q_f32(wt + (size_t)j * CONV_TILE + (size_t)o), ld(in[j] + o, nl));
    if (a->silu) acc = silu_ps(acc);
    st(y + o, acc, nl);
}

/* Channels c .. c + nc - 1 (nc <= CONV_TILE), as kx_conv_tile; 4 taps of 4
 * channels are transposed by one vld4q. */
static inline __attribute__((always_inline)) void conv_tile(const lmq_conv_args *a, const int32_t K, int32_t c,
                                                            int32_t nc, float *wt)
{
    const int32_t n = a->n_tok, nfull = nc / 4, nl = nc % 4;
    int32_t l = 0;
    if (K == 4)
        for (; l + 4 <= nc; l += 4) {
            const float32x4x4_t w4 = vld4q_f32(a->w + (size_t)(c + l) * 4);
            for (int j = 0; j < 4; j++) vst1q_f32(wt + (size_t)j * CONV_TILE + (size_t)l, w4.val[j]);
        }
    for (; l < nc; l++)
        for (int32_t j = 0; j < K; j++) wt[(size_t)j * CONV_TILE + (size_t)l] = a->w[(size_t)(c + l) * (size_t)K + (size_t)j];
    for (int32_t t = 0; t < n; t++) {
        const float *in[CONV_MAX_K];
        for (int32_t j = 0; j < K; j++) in[j] = conv_in(a, t - K + 1 + j, c);
        float *y = a->y + (size_t)t * (size_t)a->y_stride + (size_t)c;
        for (int32_t v = 0; v < nfull; v++) conv_vec(a, K, wt, in, y, 4 * v, 4);
        if (nl) conv_vec(a, K, wt, in, y, 4 * nfull, nl);
    }
    for (int32_t r = 0; r < K - 1; r++) {
        const float *src = conv_in(a, n - (K - 1) + r, c);
        float *dst = a->state + (size_t)r * (size_t)a->C + (size_t)c;
        for (int32_t v = 0; v < nfull; v++) vst1q_f32(dst + 4 * v, vld1q_f32(src + 4 * v));
        if (nl) st(dst + 4 * nfull, ld(src + 4 * nfull, nl), nl);
    }
}

static void ssm_conv_neon(const lmq_conv_args *a)
{
    assert(a->K >= 1 && 0 <= a->c0 && a->c0 <= a->c1 && a->c1 <= a->C && a->n_tok >= 0);
    if (a->K > CONV_MAX_K) {
        lmq_ssm_conv_ref(a);
        return;
    }
    float wt[CONV_MAX_K * CONV_TILE];
    for (int32_t c = a->c0; c < a->c1; c += CONV_TILE) {
        const int32_t nc = a->c1 - c < CONV_TILE ? a->c1 - c : CONV_TILE;
        if (a->K == 4)
            conv_tile(a, 4, c, nc, wt);
        else
            conv_tile(a, a->K, c, nc, wt);
    }
}

void lmq_kernels_fill_recurrent_neon(lmq_kernel_table *t)
{
    t->delta_rule = delta_rule_neon;
    t->ssm_conv = ssm_conv_neon;
}
