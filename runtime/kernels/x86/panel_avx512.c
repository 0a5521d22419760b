/* panel_avx512.c — AVX-512 VNNI kernels for the row-interleaved panels of
 * panel.c (batched products): 16 weight rows x up to 8 tokens per step.
 *
 * One vpdpbusd multiplies four activation bytes (u = q + 128, broadcast to
 * every lane) with four quants of each of the 16 rows and adds the four
 * products into the row's int32 lane, so a 256-element super-block of 16
 * rows and one token costs 64 vpdpbusd, and the weights loaded for it serve
 * 8 tokens. The float operations per (row, token, block) are those of
 * lmq_panel_gemm_ref in the same order, so the results equal it bit for
 * bit (tests/test_kernels.c checks every type on odd shapes). */
#include <stdbool.h>
#include <string.h>

#include "kernels.h"
#include "x86_simd.h"

#define KP_INLINE static inline __attribute__((always_inline))
#define KP_TOK 8 /* tokens per step */

KP_INLINE __m512i kp_bcast32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

KP_INLINE void kp_store(float *y, __m512 v, int nr)
{
    if (nr == LMQ_PANEL_ROWS)
        _mm512_storeu_ps(y, v);
    else
        _mm512_mask_storeu_ps(y, (__mmask16)((1u << nr) - 1), v);
}

/* ---- 32-element blocks, q8_0 activations ---------------------------- */

KP_INLINE void kp_tile32(const int T, int64_t nb, const lmq_panel32 *p, const uint8_t *act, int64_t a_stride,
                         float *y, int64_t y_stride, int nr)
{
    __m512 acc[KP_TOK];
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++, p++) {
        const uint8_t *ab = act + ib * (int64_t)sizeof(lmq_block_q8_0);
        __m512i is[KP_TOK];
        const __m512i corr = _mm512_loadu_si512(p->corr);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) is[t] = corr;
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) {
            const __m512i w = _mm512_loadu_si512(p->q[g]);
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) is[t] = _mm512_dpbusd_epi32(is[t], kp_bcast32(ab + t * a_stride + 2 + 4 * g), w);
        }
        const __m512 dw = _mm512_loadu_ps(p->d);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            uint16_t dh;
            memcpy(&dh, ab + t * a_stride, 2);
            acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(x86_h2f(dh))), _mm512_cvtepi32_ps(is[t]), acc[t]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) kp_store(y + t * y_stride, acc[t], nr);
}

static void kp_gemm32(int64_t n_in, const void *panel, const void *act, int64_t a_stride, int nt, float *y,
                      int64_t y_stride, int nr)
{
    const int64_t nb = n_in / 32;
    const uint8_t *a = act;
    int t = 0;
    for (; t + KP_TOK <= nt; t += KP_TOK)
        kp_tile32(KP_TOK, nb, panel, a + t * a_stride, a_stride, y + t * y_stride, y_stride, nr);
    switch (nt - t) {
    case 1: kp_tile32(1, nb, panel, a + t * a_stride, a_stride, y + t * y_stride, y_stride, nr); break;
    case 2: kp_tile32(2, nb, panel, a + t * a_stride, a_stride, y + t * y_stride, y_stride, nr); break;
    case 3: kp_tile32(3, nb, panel, a + t * a_stride, a_stride, y + t * y_stride, y_stride, nr); break;
    case 4: kp_tile32(4, nb, panel, a + t * a_stride, a_stride, y + t * y_stride, y_stride, nr); break;
    case 5: kp_tile32(5, nb, panel, a + t * a_stride, a_stride, y + t * y_stride, y_stride, nr); break;
    case 6: kp_tile32(6, nb, panel, a + t * a_stride, a_stride, y + t * y_stride, y_stride, nr); break;
    case 7: kp_tile32(7, nb, panel, a + t * a_stride, a_stride, y + t * y_stride, y_stride, nr); break;
    default: break;
    }
}

/* ---- 256-element super-blocks, q8_K activations --------------------- */

KP_INLINE void kp_tile256(const int T, const int SUB, const bool MIN, int64_t nb, const lmq_panel256 *p,
                          const uint8_t *act, int64_t a_stride, float *y, int64_t y_stride, int nr)
{
    __m512 acc[KP_TOK];
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++, p++) {
        const lmq_block_q8_K *yb[KP_TOK];
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) yb[t] = (const lmq_block_q8_K *)(act + t * a_stride) + ib;
        __m512i tot[KP_TOK];
        const __m512i corr = _mm512_loadu_si512(p->corr);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) tot[t] = corr;
        for (int j = 0; j < 256 / SUB; j++) {
            __m512i s[KP_TOK];
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) s[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int g = j * SUB / 4; g < (j + 1) * SUB / 4; g++) {
                const __m512i w = _mm512_loadu_si512(p->q[g]);
#pragma GCC unroll 8
                for (int t = 0; t < T; t++) s[t] = _mm512_dpbusd_epi32(s[t], kp_bcast32(yb[t]->qs + 4 * g), w);
            }
            const __m512i sc = _mm512_loadu_si512(p->sc[j]);
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) tot[t] = _mm512_add_epi32(tot[t], _mm512_mullo_epi32(s[t], sc));
        }
        const __m512 dw = _mm512_loadu_ps(p->d);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++)
            acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(yb[t]->d)), _mm512_cvtepi32_ps(tot[t]), acc[t]);
        if (MIN) {
            const __m512 dm = _mm512_loadu_ps(p->dmin);
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                __m512i mn = _mm512_setzero_si512();
#pragma GCC unroll 8
                for (int g = 0; g < 8; g++)
                    mn = _mm512_dpwssd_epi32(mn, kp_bcast32(yb[t]->bsums + 2 * g), _mm512_loadu_si512(p->m[g]));
                acc[t] = _mm512_fnmadd_ps(_mm512_mul_ps(dm, _mm512_set1_ps(yb[t]->d)), _mm512_cvtepi32_ps(mn), acc[t]);
            }
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) kp_store(y + t * y_stride, acc[t], nr);
}

#define KP_GEMM256(name, SUB, MIN)                                                                                   \
    static void name(int64_t n_in, const void *panel, const void *act, int64_t a_stride, int nt, float *y,           \
                     int64_t y_stride, int nr)                                                                       \
    {                                                                                                                \
        const int64_t nb = n_in / 256;                                                                               \
        const uint8_t *a = act;                                                                                      \
        int t = 0;                                                                                                   \
        for (; t + KP_TOK <= nt; t += KP_TOK)                                                                        \
            kp_tile256(KP_TOK, SUB, MIN, nb, panel, a + t * a_stride, a_stride, y + t * y_stride, y_stride, nr);     \
        a += t * a_stride;                                                                                           \
        y += t * y_stride;                                                                                           \
        switch (nt - t) {                                                                                            \
        case 1: kp_tile256(1, SUB, MIN, nb, panel, a, a_stride, y, y_stride, nr); break;                             \
        case 2: kp_tile256(2, SUB, MIN, nb, panel, a, a_stride, y, y_stride, nr); break;                             \
        case 3: kp_tile256(3, SUB, MIN, nb, panel, a, a_stride, y, y_stride, nr); break;                             \
        case 4: kp_tile256(4, SUB, MIN, nb, panel, a, a_stride, y, y_stride, nr); break;                             \
        case 5: kp_tile256(5, SUB, MIN, nb, panel, a, a_stride, y, y_stride, nr); break;                             \
        case 6: kp_tile256(6, SUB, MIN, nb, panel, a, a_stride, y, y_stride, nr); break;                             \
        case 7: kp_tile256(7, SUB, MIN, nb, panel, a, a_stride, y, y_stride, nr); break;                             \
        default: break;                                                                                              \
        }                                                                                                            \
    }

KP_GEMM256(kp_gemm256_s32_min, 32, true)  /* q4_K, q5_K */
KP_GEMM256(kp_gemm256_s32, 32, false)     /* iq4_xs */
KP_GEMM256(kp_gemm256_s16_min, 16, true)  /* q2_K */
KP_GEMM256(kp_gemm256_s16, 16, false)     /* q3_K, q6_K */

void lmq_kernels_fill_avx512_panel(lmq_kernel_table *t)
{
    t->panel_gemm[LMQ_TYPE_Q4_0] = kp_gemm32;
    t->panel_gemm[LMQ_TYPE_Q5_0] = kp_gemm32;
    t->panel_gemm[LMQ_TYPE_Q8_0] = kp_gemm32;
    t->panel_gemm[LMQ_TYPE_IQ4_NL] = kp_gemm32;
    t->panel_gemm[LMQ_TYPE_Q4_K] = kp_gemm256_s32_min;
    t->panel_gemm[LMQ_TYPE_Q5_K] = kp_gemm256_s32_min;
    t->panel_gemm[LMQ_TYPE_IQ4_XS] = kp_gemm256_s32;
    t->panel_gemm[LMQ_TYPE_Q2_K] = kp_gemm256_s16_min;
    t->panel_gemm[LMQ_TYPE_Q3_K] = kp_gemm256_s16;
    t->panel_gemm[LMQ_TYPE_Q6_K] = kp_gemm256_s16;
}
