/* x86_attn.h — the body of lmq_attn for x86 (8-lane vectors), shared by
 * attn_avx2.c (16 registers: 4 keys per block) and attn_avx512.c (32
 * registers: 8 keys per block). Included only by files compiled with at
 * least -mavx2 -mfma -mf16c.
 *
 * Layout: the tile's rows (query tokens x heads, at most 16) run across the
 * lanes of one or two vectors, so that a block of keys costs one broadcast
 * of each key element per FMA and no horizontal sums, and the softmax state
 * (running maximum m and sum l per row) is a vector too:
 *   qt[d][r]  the queries, transposed (f16-rounded for an f16 cache)
 *   S[j][r]   = sum_d k_j[d] qt[d][r]            (a block of KB keys)
 *   m' = max(m, max_j S), P = exp(S - m'), l = l exp(m - m') + sum_j P
 *   ot[d][r]  = ot[d][r] exp(m - m') + sum_j v_j[d] P[j][r]
 * starting from m = -inf, l = 0, or with a sink logit z from m = z, l = 1.
 * The keys of a block are converted to f32 once (f16: vcvtph2ps; q8_0:
 * bytes times the block scale) and serve every row. Masked keys (causal,
 * window, padding of a short block) get S = -inf, whose exp is 0. */
#ifndef LMQ_X86_ATTN_H
#define LMQ_X86_ATTN_H

#include <assert.h>
#include <limits.h>
#include <math.h>

#include "x86_simd.h"

#define KX_ATTN_MAX_KB 8

static inline size_t kx_attn_pad16(int32_t n)
{
    return ((size_t)n + 15) & ~(size_t)15;
}

/* tanh for 8 lanes: odd Taylor polynomial below |x| = 0.2 (where
 * 1 - 2 / (e^2x + 1) would cancel), sign(x) (1 - e) / (1 + e), e =
 * exp(-2|x|), above; relative error a few ulp. */
static inline __m256 kx_tanh_ps(__m256 x)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 ax = _mm256_andnot_ps(sign, x);
    const __m256 e = x86_exp_ps(_mm256_mul_ps(ax, _mm256_set1_ps(-2.0f)));
    const __m256 big = _mm256_div_ps(_mm256_sub_ps(_mm256_set1_ps(1.0f), e), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
    const __m256 x2 = _mm256_mul_ps(x, x);
    __m256 p = _mm256_set1_ps(62.0f / 2835);
    p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(-17.0f / 315));
    p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(2.0f / 15));
    p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(-1.0f / 3));
    const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, x2), x, x);
    const __m256 is_small = _mm256_cmp_ps(ax, _mm256_set1_ps(0.2f), _CMP_LT_OQ);
    return _mm256_blendv_ps(_mm256_or_ps(big, _mm256_and_ps(sign, x)), small, is_small);
}

/* Cache row `slot` as floats: the row itself for an f32 cache, else
 * converted into `buf`. */
static inline const float *kx_attn_row(const lmq_attn_args *a, const void *base, int32_t slot, float *buf)
{
    const uint8_t *src = (const uint8_t *)base + (size_t)slot * a->kv_stride;
    const int32_t hd = a->head_dim;
    if (a->kv_type == LMQ_TYPE_F32) return (const float *)(const void *)src;
    if (a->kv_type == LMQ_TYPE_F16) {
        const uint16_t *h = (const uint16_t *)(const void *)src;
        int32_t i = 0;
        for (; i + 8 <= hd; i += 8) _mm256_store_ps(buf + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
        for (; i < hd; i++) buf[i] = x86_h2f(h[i]);
        return buf;
    }
    const lmq_block_q8_0 *b = (const lmq_block_q8_0 *)(const void *)src;
    for (int32_t ib = 0; ib < hd / 32; ib++) {
        const __m256 d = _mm256_set1_ps(x86_h2f(b[ib].d));
        for (int k = 0; k < 4; k++) {
            const __m128i q8 = _mm_loadl_epi64((const __m128i *)(const void *)(b[ib].qs + 8 * k));
            _mm256_store_ps(buf + 32 * ib + 8 * k, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8))));
        }
    }
    return buf;
}

/* The tile's 16 rows (query tokens x heads; rows past n_tok * n_grp are
 * padding that copies the last row's mask): each row's position and window
 * start, the queries transposed into qt (f16-rounded for an f16 cache),
 * and the softmax state the row starts from: m = -inf, l = 0, or with
 * sinks m = the head's sink logit, l = 1 (its exp(z - m)). Shared by the
 * 8-lane body below and the 16-lane one of attn_avx512.c. */
static inline void kx_attn_rows(const lmq_attn_args *a, float *qt, int32_t qpos[16], int32_t qlo[16], float m0[16],
                                float l0[16])
{
    const int32_t hd = a->head_dim, nr = a->n_tok * a->n_grp;
    for (int r = 0; r < 16; r++) {
        const int rr = r < nr ? r : nr - 1;
        const int32_t t = rr / a->n_grp, g = rr % a->n_grp, pos = a->pos0 + t;
        qpos[r] = pos;
        qlo[r] = a->window > 0 && pos - a->window + 1 > 0 ? pos - a->window + 1 : 0;
        m0[r] = a->sinks ? a->sinks[g] : -INFINITY;
        l0[r] = a->sinks ? 1.0f : 0.0f;
        const float *q = a->q + (size_t)t * (size_t)a->q_stride + (size_t)g * (size_t)hd;
        for (int32_t d = 0; d < hd; d++) {
            float x = r < nr ? q[d] : 0.0f;
            if (a->kv_type == LMQ_TYPE_F16) x = x86_h2f(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
            qt[(size_t)d * 16 + (size_t)r] = x;
        }
    }
}

/* The tile with NV (1 or 2) vectors of rows and KB keys per block; both
 * are constants at each call site, so the loops over them unroll and the
 * accumulators stay in registers. */
static inline __attribute__((always_inline)) void kx_attn_tile(const lmq_attn_args *a, const int NV, const int KB)
{
    const int32_t hd = a->head_dim, nr = a->n_tok * a->n_grp;
    const size_t hp = kx_attn_pad16(hd);
    float *qt = a->scratch, *ot = qt + hp * 16, *kf = ot + hp * 16, *vf = kf + hp * KX_ATTN_MAX_KB;
    float *zero = vf + hp * KX_ATTN_MAX_KB;
    assert(nr <= 8 * NV && KB <= KX_ATTN_MAX_KB && hp * (2 * 16 + 2 * KX_ATTN_MAX_KB + 1) <= lmq_attn_scratch_floats(hd));
    int32_t qpos[16], qlo[16];
    float m0[16], l0[16];
    kx_attn_rows(a, qt, qpos, qlo, m0, l0);
    memset(ot, 0, (size_t)hd * 16 * sizeof(float));
    memset(zero, 0, (size_t)hd * sizeof(float));
    __m256i vpos[2], vlo[2];
    __m256 m[2], l[2];
    for (int v = 0; v < NV; v++) {
        vpos[v] = _mm256_loadu_si256((const __m256i *)(qpos + 8 * v));
        vlo[v] = _mm256_loadu_si256((const __m256i *)(qlo + 8 * v));
        m[v] = _mm256_loadu_ps(m0 + 8 * v);
        l[v] = _mm256_loadu_ps(l0 + 8 * v);
    }
    const __m256 scale = _mm256_set1_ps(a->scale), ninf = _mm256_set1_ps(-INFINITY);
    const float cap = a->softcap;
    const int32_t kmax = a->pos0 + a->n_tok - 1;
    /* blocks start at multiples of KB and of n_slots, whatever the tile:
     * a row's arithmetic is then the same in any tile (a block that is
     * masked for a row leaves its m, l and ot unchanged bit for bit) */
    for (int32_t p = qlo[0] - qlo[0] % KB; p <= kmax;) {
        const int32_t slot = p % a->n_slots;
        int32_t nb = KB - p % KB;
        if (nb > kmax + 1 - p) nb = kmax + 1 - p;
        if (nb > a->n_slots - slot) nb = a->n_slots - slot; /* a block never wraps */
        const float *kr[KX_ATTN_MAX_KB], *vr[KX_ATTN_MAX_KB];
        for (int j = 0; j < KB; j++) {
            const bool in = j < nb && p + j >= qlo[0]; /* keys below every row's window are not read */
            kr[j] = in ? kx_attn_row(a, a->k, slot + j, kf + hp * (size_t)j) : zero;
            vr[j] = in ? kx_attn_row(a, a->v, slot + j, vf + hp * (size_t)j) : zero;
        }
        __m256 S[KX_ATTN_MAX_KB][2];
#pragma GCC unroll 8
        for (int j = 0; j < KB; j++)
            for (int v = 0; v < NV; v++) S[j][v] = _mm256_setzero_ps();
        for (int32_t d = 0; d < hd; d++) {
            __m256 qv[2];
            for (int v = 0; v < NV; v++) qv[v] = _mm256_load_ps(qt + (size_t)d * 16 + 8 * v);
#pragma GCC unroll 8
            for (int j = 0; j < KB; j++) {
                const __m256 b = _mm256_broadcast_ss(kr[j] + d);
                for (int v = 0; v < NV; v++) S[j][v] = _mm256_fmadd_ps(b, qv[v], S[j][v]);
            }
        }
        __m256 alpha[2];
        for (int v = 0; v < NV; v++) {
            __m256 mx = m[v];
#pragma GCC unroll 8
            for (int j = 0; j < KB; j++) {
                __m256 s = _mm256_mul_ps(S[j][v], scale);
                if (cap > 0) s = _mm256_mul_ps(_mm256_set1_ps(cap), kx_tanh_ps(_mm256_mul_ps(s, _mm256_set1_ps(1.0f / cap))));
                const __m256i kp = _mm256_set1_epi32(j < nb ? p + j : INT_MAX);
                const __m256i bad = _mm256_or_si256(_mm256_cmpgt_epi32(kp, vpos[v]), _mm256_cmpgt_epi32(vlo[v], kp));
                S[j][v] = _mm256_blendv_ps(s, ninf, _mm256_castsi256_ps(bad));
                mx = _mm256_max_ps(mx, S[j][v]);
            }
            /* rows with every key so far masked keep m = -inf: subtract 0 instead */
            const __m256 ms = _mm256_blendv_ps(mx, _mm256_setzero_ps(), _mm256_cmp_ps(mx, ninf, _CMP_EQ_OQ));
            alpha[v] = x86_exp_ps(_mm256_sub_ps(m[v], ms));
            __m256 sum = _mm256_setzero_ps();
#pragma GCC unroll 8
            for (int j = 0; j < KB; j++) {
                S[j][v] = x86_exp_ps(_mm256_sub_ps(S[j][v], ms));
                sum = _mm256_add_ps(sum, S[j][v]);
            }
            l[v] = _mm256_fmadd_ps(l[v], alpha[v], sum);
            m[v] = mx;
        }
        for (int32_t d = 0; d < hd; d++) {
            float *op = ot + (size_t)d * 16;
            __m256 o[2];
            for (int v = 0; v < NV; v++) o[v] = _mm256_mul_ps(_mm256_load_ps(op + 8 * v), alpha[v]);
#pragma GCC unroll 8
            for (int j = 0; j < KB; j++) {
                const __m256 b = _mm256_broadcast_ss(vr[j] + d);
                for (int v = 0; v < NV; v++) o[v] = _mm256_fmadd_ps(b, S[j][v], o[v]);
            }
            for (int v = 0; v < NV; v++) _mm256_store_ps(op + 8 * v, o[v]);
        }
        p += nb;
    }
    float lr[16];
    for (int v = 0; v < NV; v++) _mm256_storeu_ps(lr + 8 * v, l[v]);
    for (int r = 0; r < nr; r++) {
        const int32_t t = r / a->n_grp, g = r % a->n_grp;
        float *o = a->out + (size_t)t * (size_t)a->out_stride + (size_t)g * (size_t)hd;
        for (int32_t d = 0; d < hd; d++) o[d] = ot[(size_t)d * 16 + (size_t)r] / lr[r];
    }
}

#endif /* LMQ_X86_ATTN_H */
