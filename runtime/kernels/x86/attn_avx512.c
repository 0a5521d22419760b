/* attn_avx512.c — lmq_attn for AVX-512: the scheme of x86_attn.h with the
 * tile's 16 rows in one 512-bit vector and 8 keys per block (8 score
 * accumulators, then 8 probabilities, in registers); masks in k registers.
 * Tiles of at most 8 rows (one token of a group of up to 8 heads) use the
 * 256-bit body of x86_attn.h, which wastes no lanes on them. */
#include "x86_attn.h"

#define KB 8

/* exp(x) for 16 lanes, as x86_exp_ps: below -87.3 flushed to 0. */
static inline __m512 exp16(__m512 x)
{
    const __m512 lo = _mm512_set1_ps(-87.3f);
    const __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    x = _mm512_min_ps(_mm512_max_ps(x, lo), _mm512_set1_ps(88.3f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    const __m512i ni = _mm512_cvtps_epi32(n);
    const __m512i n1 = _mm512_srai_epi32(ni, 1), n2 = _mm512_sub_epi32(ni, n1);
    const __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, _mm512_set1_epi32(127)), 23));
    const __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, _mm512_set1_epi32(127)), 23));
    p = _mm512_mul_ps(_mm512_mul_ps(p, s1), s2);
    return _mm512_maskz_mov_ps((__mmask16)~under, p);
}

/* tanh for 16 lanes, as kx_tanh_ps. */
static inline __m512 tanh16(__m512 x)
{
    const __m512 ax = _mm512_abs_ps(x);
    const __m512 e = exp16(_mm512_mul_ps(ax, _mm512_set1_ps(-2.0f)));
    __m512 big = _mm512_div_ps(_mm512_sub_ps(_mm512_set1_ps(1.0f), e), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    big = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(big),
                                              _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT_MIN))));
    const __m512 x2 = _mm512_mul_ps(x, x);
    __m512 p = _mm512_set1_ps(62.0f / 2835);
    p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(-17.0f / 315));
    p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(2.0f / 15));
    p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(-1.0f / 3));
    const __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(p, x2), x, x);
    return _mm512_mask_mov_ps(big, _mm512_cmp_ps_mask(ax, _mm512_set1_ps(0.2f), _CMP_LT_OQ), small);
}

/* kx_attn_row with 512-bit conversions of f16 rows whose length is a
 * multiple of 16 (same values). */
static inline const float *row16(const lmq_attn_args *a, const void *base, int32_t slot, float *buf)
{
    if (a->kv_type != LMQ_TYPE_F16 || a->head_dim % 16) return kx_attn_row(a, base, slot, buf);
    const uint16_t *h = (const uint16_t *)(const void *)((const uint8_t *)base + (size_t)slot * a->kv_stride);
    for (int32_t i = 0; i < a->head_dim; i += 16)
        _mm512_store_ps(buf + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(h + i))));
    return buf;
}

static void attn_tile16(const lmq_attn_args *a)
{
    const int32_t hd = a->head_dim, nr = a->n_tok * a->n_grp;
    const size_t hp = kx_attn_pad16(hd);
    float *qt = a->scratch, *ot = qt + hp * 16, *kf = ot + hp * 16, *vf = kf + hp * KX_ATTN_MAX_KB;
    float *zero = vf + hp * KX_ATTN_MAX_KB;
    assert(nr <= 16 && hp * (2 * 16 + 2 * KX_ATTN_MAX_KB + 1) <= lmq_attn_scratch_floats(hd));
    int32_t qpos[16], qlo[16];
    float m0[16], l0[16];
    kx_attn_rows(a, qt, qpos, qlo, m0, l0); /* the rows and their softmax start (sinks) as in x86_attn.h */
    memset(ot, 0, (size_t)hd * 16 * sizeof(float));
    memset(zero, 0, (size_t)hd * sizeof(float));
    const __m512i vpos = _mm512_loadu_si512(qpos), vlo = _mm512_loadu_si512(qlo);
    __m512 m = _mm512_loadu_ps(m0), l = _mm512_loadu_ps(l0);
    const __m512 scale = _mm512_set1_ps(a->scale), ninf = _mm512_set1_ps(-INFINITY);
    const float cap = a->softcap;
    const int32_t kmax = a->pos0 + a->n_tok - 1;
    /* block boundaries as in x86_attn.h (multiples of KB and of n_slots) */
    for (int32_t p = qlo[0] - qlo[0] % KB; p <= kmax;) {
        const int32_t slot = p % a->n_slots;
        int32_t nb = KB - p % KB;
        if (nb > kmax + 1 - p) nb = kmax + 1 - p;
        if (nb > a->n_slots - slot) nb = a->n_slots - slot;
        const float *kr[KB], *vr[KB];
        for (int j = 0; j < KB; j++) {
            const bool in = j < nb && p + j >= qlo[0];
            kr[j] = in ? row16(a, a->k, slot + j, kf + hp * (size_t)j) : zero;
            vr[j] = in ? row16(a, a->v, slot + j, vf + hp * (size_t)j) : zero;
        }
        __m512 S[KB];
#pragma GCC unroll 8
        for (int j = 0; j < KB; j++) S[j] = _mm512_setzero_ps();
        for (int32_t d = 0; d < hd; d++) {
            const __m512 qv = _mm512_load_ps(qt + (size_t)d * 16);
#pragma GCC unroll 8
            for (int j = 0; j < KB; j++) S[j] = _mm512_fmadd_ps(_mm512_set1_ps(kr[j][d]), qv, S[j]);
        }
        __m512 mx = m;
#pragma GCC unroll 8
        for (int j = 0; j < KB; j++) {
            __m512 s = _mm512_mul_ps(S[j], scale);
            if (cap > 0) s = _mm512_mul_ps(_mm512_set1_ps(cap), tanh16(_mm512_mul_ps(s, _mm512_set1_ps(1.0f / cap))));
            const __m512i kp = _mm512_set1_epi32(j < nb ? p + j : INT_MAX);
            const __mmask16 bad = _mm512_cmpgt_epi32_mask(kp, vpos) | _mm512_cmpgt_epi32_mask(vlo, kp);
            S[j] = _mm512_mask_mov_ps(s, bad, ninf);
            mx = _mm512_max_ps(mx, S[j]);
        }
        const __m512 ms = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(mx, ninf, _CMP_NEQ_UQ), mx);
        const __m512 alpha = exp16(_mm512_sub_ps(m, ms));
        __m512 sum = _mm512_setzero_ps();
#pragma GCC unroll 8
        for (int j = 0; j < KB; j++) {
            S[j] = exp16(_mm512_sub_ps(S[j], ms));
            sum = _mm512_add_ps(sum, S[j]);
        }
        l = _mm512_fmadd_ps(l, alpha, sum);
        m = mx;
        for (int32_t d = 0; d < hd; d++) {
            float *op = ot + (size_t)d * 16;
            __m512 o = _mm512_mul_ps(_mm512_load_ps(op), alpha);
#pragma GCC unroll 8
            for (int j = 0; j < KB; j++) o = _mm512_fmadd_ps(_mm512_set1_ps(vr[j][d]), S[j], o);
            _mm512_store_ps(op, o);
        }
        p += nb;
    }
    float lr[16];
    _mm512_storeu_ps(lr, l);
    for (int r = 0; r < nr; r++) {
        const int32_t t = r / a->n_grp, g = r % a->n_grp;
        float *o = a->out + (size_t)t * (size_t)a->out_stride + (size_t)g * (size_t)hd;
        for (int32_t d = 0; d < hd; d++) o[d] = ot[(size_t)d * 16 + (size_t)r] / lr[r];
    }
}

static void attn_avx512(const lmq_attn_args *a)
{
    if (a->n_tok * a->n_grp <= 8)
        kx_attn_tile(a, 1, KB);
    else
        attn_tile16(a);
}

void lmq_kernels_fill_attn_avx512(lmq_kernel_table *t)
{
    t->attn = attn_avx512;
}
