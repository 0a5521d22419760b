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
#include <stddef.h>
#include <string.h>

#include "kernels.h"
#include "x86_simd.h"
#include "x86_unpack.h"

/* The kernels are written once with the token count T (and the type's
 * traits) as parameters, inlined into a copy per value, loops unrolled.
 * Sanitizer builds (clang's take many minutes on the unrolled copies) keep
 * the loops and calls: the same operations, only slower. */
#ifdef LMQ_SANITIZED
#define KP_INLINE static inline
#define KP_UNROLL(n)
#else
#define KP_INLINE static inline __attribute__((always_inline))
#define KP_UNROLL(n) _Pragma(KP_STR(GCC unroll n))
#endif
#define KP_STR(x) #x
#define KP_TOK 8 /* tokens per step */
/* The last n < KP_TOK tokens: fn(T, ...) with T = n as a constant. */
#define KP_TAIL(n, fn, ...)                \
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
KP_UNROLL(8)
    for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++, p++) {
        const uint8_t *ab = act + ib * (int64_t)sizeof(lmq_block_q8_0);
        __m512i is[KP_TOK];
        const __m512i corr = _mm512_loadu_si512(p->corr);
KP_UNROLL(8)
        for (int t = 0; t < T; t++) is[t] = corr;
KP_UNROLL(8)
        for (int g = 0; g < 8; g++) {
            const __m512i w = _mm512_loadu_si512(p->q[g]);
KP_UNROLL(8)
            for (int t = 0; t < T; t++) is[t] = _mm512_dpbusd_epi32(is[t], kp_bcast32(ab + t * a_stride + 2 + 4 * g), w);
        }
        const __m512 dw = _mm512_loadu_ps(p->d);
KP_UNROLL(8)
        for (int t = 0; t < T; t++) {
            uint16_t dh;
            memcpy(&dh, ab + t * a_stride, 2);
            acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(x86_h2f(dh))), _mm512_cvtepi32_ps(is[t]), acc[t]);
        }
    }
KP_UNROLL(8)
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
    KP_TAIL(nt - t, kp_tile32, nb, panel, a + t * a_stride, a_stride, y + t * y_stride, y_stride, nr)
}

/* ---- 256-element super-blocks, q8_K activations --------------------- */

KP_INLINE void kp_tile256(const int T, const int SUB, const bool MIN, int64_t nb, const lmq_panel256 *p,
                          const uint8_t *act, int64_t a_stride, float *y, int64_t y_stride, int nr)
{
    __m512 acc[KP_TOK];
KP_UNROLL(8)
    for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++, p++) {
        const lmq_block_q8_K *yb[KP_TOK];
KP_UNROLL(8)
        for (int t = 0; t < T; t++) yb[t] = (const lmq_block_q8_K *)(act + t * a_stride) + ib;
        __m512i tot[KP_TOK];
        const __m512i corr = _mm512_loadu_si512(p->corr);
KP_UNROLL(8)
        for (int t = 0; t < T; t++) tot[t] = corr;
        for (int j = 0; j < 256 / SUB; j++) {
            __m512i s[KP_TOK];
KP_UNROLL(8)
            for (int t = 0; t < T; t++) s[t] = _mm512_setzero_si512();
KP_UNROLL(8)
            for (int g = j * SUB / 4; g < (j + 1) * SUB / 4; g++) {
                const __m512i w = _mm512_loadu_si512(p->q[g]);
KP_UNROLL(8)
                for (int t = 0; t < T; t++) s[t] = _mm512_dpbusd_epi32(s[t], kp_bcast32(yb[t]->qs + 4 * g), w);
            }
            const __m512i sc = _mm512_loadu_si512(p->sc[j]);
KP_UNROLL(8)
            for (int t = 0; t < T; t++) tot[t] = _mm512_add_epi32(tot[t], _mm512_mullo_epi32(s[t], sc));
        }
        const __m512 dw = _mm512_loadu_ps(p->d);
KP_UNROLL(8)
        for (int t = 0; t < T; t++)
            acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(yb[t]->d)), _mm512_cvtepi32_ps(tot[t]), acc[t]);
        if (MIN) {
            const __m512 dm = _mm512_loadu_ps(p->dmin);
KP_UNROLL(8)
            for (int t = 0; t < T; t++) {
                __m512i mn = _mm512_setzero_si512();
KP_UNROLL(8)
                for (int g = 0; g < 8; g++)
                    mn = _mm512_dpwssd_epi32(mn, kp_bcast32(yb[t]->bsums + 2 * g), _mm512_loadu_si512(p->m[g]));
                acc[t] = _mm512_fnmadd_ps(_mm512_mul_ps(dm, _mm512_set1_ps(yb[t]->d)), _mm512_cvtepi32_ps(mn), acc[t]);
            }
        }
    }
KP_UNROLL(8)
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
        KP_TAIL(nt - t, kp_tile256, SUB, MIN, nb, panel, a, a_stride, y, y_stride, nr) \
    }

KP_GEMM256(kp_gemm256_s32_min, 32, true)  /* q4_K, q5_K */
KP_GEMM256(kp_gemm256_s32, 32, false)     /* iq4_xs */
KP_GEMM256(kp_gemm256_s16_min, 16, true)  /* q2_K */
KP_GEMM256(kp_gemm256_s16, 16, false)     /* q3_K, q6_K */


/* ================================================================
 * Packing: SIMD unpackers for the common types (quants in vectors, scales
 * as the scalar ones do them), a 16 x 16 dword transpose per 64 quants of
 * 16 rows, and corr from the transposed quants (vpdpbusd with bytes 1).
 * The panel's bytes equal lmq_panel_pack's (tested).
 * ================================================================ */

/* out[c] = dword c of each of the 16 rows in[0..15] (a 16 x 16 transpose). */
KP_INLINE void kp_transpose16(const __m512i in[16], __m512i out[16])
{
    __m512i t[16], v[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(in[2 * i], in[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(in[2 * i], in[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) { /* v[4i + k], lane L: dword 4L + k of rows 4i..4i+3 */
        v[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        v[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        v[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        v[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int k = 0; k < 4; k++) { /* a 4 x 4 transpose of 128-bit lanes */
        const __m512i x0 = _mm512_shuffle_i32x4(v[k], v[4 + k], _MM_SHUFFLE(1, 0, 1, 0));
        const __m512i x1 = _mm512_shuffle_i32x4(v[k], v[4 + k], _MM_SHUFFLE(3, 2, 3, 2));
        const __m512i x2 = _mm512_shuffle_i32x4(v[8 + k], v[12 + k], _MM_SHUFFLE(1, 0, 1, 0));
        const __m512i x3 = _mm512_shuffle_i32x4(v[8 + k], v[12 + k], _MM_SHUFFLE(3, 2, 3, 2));
        out[k] = _mm512_shuffle_i32x4(x0, x2, _MM_SHUFFLE(2, 0, 2, 0));
        out[4 + k] = _mm512_shuffle_i32x4(x0, x2, _MM_SHUFFLE(3, 1, 3, 1));
        out[8 + k] = _mm512_shuffle_i32x4(x1, x3, _MM_SHUFFLE(2, 0, 2, 0));
        out[12 + k] = _mm512_shuffle_i32x4(x1, x3, _MM_SHUFFLE(3, 1, 3, 1));
    }
}

/* Transposes 64 quants (from byte off of each row's unpacked block) into
 * 16 groups at dst. */
KP_INLINE void kp_transpose_quants(const lmq_unpacked *u, int off, int8_t (*dst)[LMQ_PANEL_ROWS][4])
{
    __m512i in[16], out[16];
    for (int r = 0; r < 16; r++) in[r] = _mm512_loadu_si512(u[r].q + off);
    kp_transpose16(in, out);
    for (int c = 0; c < 16; c++) _mm512_storeu_si512(dst[c], out[c]);
}

/* Per-row sums of the quants of groups g0..g1-1 (16 int32 lanes). */
KP_INLINE __m512i kp_group_sums(const int8_t (*q)[LMQ_PANEL_ROWS][4], int g0, int g1)
{
    __m512i s = _mm512_setzero_si512();
    for (int g = g0; g < g1; g++) s = _mm512_dpbusd_epi32(s, _mm512_set1_epi8(1), _mm512_loadu_si512(q[g]));
    return s;
}

static void kp_pack(lmq_type t, lmq_unpack_fn unpack, const void *w, int64_t w_row, int nr, int64_t n_in, void *panel)
{
    const lmq_panel_traits *pt = lmq_panel_traits_of(t);
    _Alignas(64) lmq_unpacked u[LMQ_PANEL_ROWS];
    memset(u, 0, sizeof u); /* mins, dmin and unused scales stay 0, as in lmq_panel_pack */
    const __m512i m128 = _mm512_set1_epi32(-128);
    if (pt->block == 32) {
        const int64_t nb = n_in / 32;
        lmq_panel32 *p = panel;
        for (int64_t ib = 0; ib < nb; ib += 2, p += 2) {
            const bool two = ib + 1 < nb;
            for (int r = 0; r < nr; r++) {
                lmq_unpacked b;
                unpack((const uint8_t *)w + r * w_row, ib, &b);
                memcpy(u[r].q, b.q, 32);
                p[0].d[r] = b.d;
                if (two) {
                    unpack((const uint8_t *)w + r * w_row, ib + 1, &b);
                    memcpy(u[r].q + 32, b.q, 32);
                    p[1].d[r] = b.d;
                } else {
                    memset(u[r].q + 32, 0, 32);
                }
            }
            for (int r = nr; r < LMQ_PANEL_ROWS; r++) {
                p[0].d[r] = 0;
                if (two) p[1].d[r] = 0;
            }
            __m512i in[16], out[16];
            for (int r = 0; r < 16; r++) in[r] = _mm512_loadu_si512(u[r].q);
            kp_transpose16(in, out);
            for (int c = 0; c < 8; c++) _mm512_storeu_si512(p[0].q[c], out[c]);
            _mm512_storeu_si512(p[0].corr, _mm512_mullo_epi32(kp_group_sums(p[0].q, 0, 8), m128));
            if (two) {
                for (int c = 0; c < 8; c++) _mm512_storeu_si512(p[1].q[c], out[8 + c]);
                _mm512_storeu_si512(p[1].corr, _mm512_mullo_epi32(kp_group_sums(p[1].q, 0, 8), m128));
            }
        }
        return;
    }
    const int nsub = 256 / pt->sub, gs = pt->sub / 4;
    lmq_panel256 *p = panel;
    for (int64_t ib = 0; ib < n_in / 256; ib++, p++) {
        for (int r = 0; r < nr; r++) unpack((const uint8_t *)w + r * w_row, ib, &u[r]);
        for (int c = 0; c < 4; c++) kp_transpose_quants(u, 64 * c, p->q + 16 * c);
        __m512i tot = _mm512_setzero_si512();
        for (int j = nsub; j < 16; j++) _mm512_storeu_si512(p->sc[j], _mm512_setzero_si512());
        for (int j = 0; j < nsub; j++) {
            for (int r = 0; r < 16; r++) p->sc[j][r] = u[r].sc[j];
            tot = _mm512_add_epi32(tot, _mm512_mullo_epi32(kp_group_sums(p->q, j * gs, (j + 1) * gs),
                                                           _mm512_loadu_si512(p->sc[j])));
        }
        _mm512_storeu_si512(p->corr, _mm512_mullo_epi32(tot, m128));
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


/* ================================================================
 * Repacked 32-element blocks (lmq_rpanel4 / lmq_rpanel8 / lmq_rpanelmx / lmq_rpanel5, kept for the
 * model's life): unsigned weight codes, signed activations, each (token,
 * block) starting from -o * sum(activation quants). The 4-bit codes of 16
 * rows x 8 quants come out of one load with an and and a shift (q5_0's
 * five planes: kp_q5_codes; iq4_nl
 * and MXFP4: then a vpshufb into the grid or values + 128; MXFP4's E8M0
 * scales become floats by shifts, kp_e8m0_half). Same float operations as
 * lmq_panel_gemm_ref, so the same bits.
 * ================================================================ */

/* Codes 0..31 of groups 4n..4n + 3 of 32 quants in five byte planes (a
 * q5_K sub-block, a q5_0 block) for the 16 rows (kr_q5_codes's bits, one
 * zmm per 64-byte plane). */
KP_INLINE void kp_q5_codes(const uint8_t *q, int n, __m512i c[4])
{
    const __m512i m5 = _mm512_set1_epi8(0x1F);
    const __m512i b0 = _mm512_loadu_si512(q), b1 = _mm512_loadu_si512(q + 64), b2 = _mm512_loadu_si512(q + 128);
    const __m512i b3 = _mm512_loadu_si512(q + 192), b4 = _mm512_loadu_si512(q + 256);
    if (n == 0) {
        c[0] = _mm512_and_si512(b0, m5);
        c[1] = _mm512_and_si512(b1, m5);
        c[2] = _mm512_and_si512(b2, m5);
        c[3] = _mm512_and_si512(b3, m5);
        return;
    }
    const __m512i m60 = _mm512_set1_epi8(0x60), m80 = _mm512_set1_epi8((char)0x80);
    c[0] = _mm512_and_si512(b4, m5);
    c[1] = _mm512_or_si512(_mm512_srli_epi16(_mm512_andnot_si512(m5, b0), 5),
                           _mm512_srli_epi16(_mm512_and_si512(b3, m60), 2));
    c[2] = _mm512_or_si512(_mm512_srli_epi16(_mm512_andnot_si512(m5, b1), 5),
                           _mm512_srli_epi16(_mm512_and_si512(b4, m60), 2));
    c[3] = _mm512_or_si512(_mm512_or_si512(_mm512_srli_epi16(_mm512_andnot_si512(m5, b2), 5),
                                           _mm512_srli_epi16(_mm512_and_si512(b3, m80), 4)),
                           _mm512_srli_epi16(_mm512_and_si512(b4, m80), 3));
}

enum { KR_Q4_0, KR_IQ4_NL, KR_Q8_0, KR_MXFP4, KR_Q5_0 };

/* lmq_mxfp4_scale of 16 E8M0 bytes (as kr_e8m0_half in x86_rpanel.h):
 * max((e - 1) << 23, 0x00200000 << min(e, 1)) as float bits. */
KP_INLINE __m512 kp_e8m0_half(const uint8_t *e)
{
    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)e));
    const __m512i hi = _mm512_slli_epi32(_mm512_sub_epi32(v, _mm512_set1_epi32(1)), 23);
    const __m512i lo = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), _mm512_min_epu32(v, _mm512_set1_epi32(1)));
    return _mm512_castsi512_ps(_mm512_max_epi32(hi, lo));
}

KP_INLINE void kp_rtile(const int T, const int KIND, int64_t nb, const uint8_t *chunk, const uint8_t *act,
                        int64_t a_stride, const int32_t *asum, float *y, int64_t y_stride, int nr)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    /* iq4_nl's grid or the MXFP4 values, + 128 */
    const __m512i lut = _mm512_broadcast_i32x4(
        _mm_xor_si128(_mm_loadu_si128((const __m128i *)(KIND == KR_MXFP4 ? lmq_mxfp4_values : lmq_iq4nl_values)),
                      _mm_set1_epi8((char)0x80)));
    const int off = KIND == KR_Q4_0 ? -8 : KIND == KR_Q5_0 ? -16 : -128;
    const int64_t cb = KIND == KR_Q8_0    ? (int64_t)sizeof(lmq_rpanel8)
                       : KIND == KR_MXFP4 ? (int64_t)sizeof(lmq_rpanelmx)
                       : KIND == KR_Q5_0  ? (int64_t)sizeof(lmq_rpanel5)
                                          : (int64_t)sizeof(lmq_rpanel4);
    __m512 acc[KP_TOK];
KP_UNROLL(8)
    for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        const uint8_t *p = chunk + ib * cb;
        __m512i u[8];
        if (KIND == KR_Q8_0) {
KP_UNROLL(8)
            for (int g = 0; g < 8; g++) u[g] = _mm512_loadu_si512(((const lmq_rpanel8 *)p)->u[g]);
        } else if (KIND == KR_Q5_0) {
            kp_q5_codes((const uint8_t *)((const lmq_rpanel5 *)p)->q, 0, u);
            kp_q5_codes((const uint8_t *)((const lmq_rpanel5 *)p)->q, 1, u + 4);
        } else {
KP_UNROLL(4)
            for (int g = 0; g < 4; g++) {
                const __m512i v = KIND == KR_MXFP4 ? _mm512_loadu_si512(((const lmq_rpanelmx *)p)->u[g])
                                                   : _mm512_loadu_si512(((const lmq_rpanel4 *)p)->u[g]);
                u[g] = _mm512_and_si512(v, m4);
                u[g + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                if (KIND == KR_IQ4_NL || KIND == KR_MXFP4) {
                    u[g] = _mm512_shuffle_epi8(lut, u[g]);
                    u[g + 4] = _mm512_shuffle_epi8(lut, u[g + 4]);
                }
            }
        }
        const __m512 dw = KIND == KR_MXFP4 ? kp_e8m0_half(p) : _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
KP_UNROLL(8)
        for (int t = 0; t < T; t++) {
            const uint8_t *ab = act + t * a_stride + ib * (int64_t)sizeof(lmq_block_q8_0);
            __m512i is0 = _mm512_set1_epi32(off * asum[t * nb + ib]), is1 = _mm512_setzero_si512();
KP_UNROLL(4)
            for (int g = 0; g < 4; g++) { /* two chains: one token alone is latency-bound otherwise */
                is0 = _mm512_dpbusd_epi32(is0, u[g], kp_bcast32(ab + 2 + 4 * g));
                is1 = _mm512_dpbusd_epi32(is1, u[g + 4], kp_bcast32(ab + 18 + 4 * g));
            }
            uint16_t dh;
            memcpy(&dh, ab, 2);
            acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(x86_h2f(dh))),
                                     _mm512_cvtepi32_ps(_mm512_add_epi32(is0, is1)), acc[t]);
        }
    }
KP_UNROLL(8)
    for (int t = 0; t < T; t++) kp_store(y + t * y_stride, acc[t], nr);
}

#define KP_RGEMM(name, KIND)                                                                                         \
    static void name(int64_t nb, const void *chunk, const void *act, int64_t a_stride, const int32_t *asum, int nt,  \
                     float *y, int64_t y_stride, int nr)                                                             \
    {                                                                                                                \
        const uint8_t *a = act;                                                                                      \
        int t = 0;                                                                                                   \
        for (; t + KP_TOK <= nt; t += KP_TOK)                                                                        \
            kp_rtile(KP_TOK, KIND, nb, chunk, a + t * a_stride, a_stride, asum + t * nb, y + t * y_stride, y_stride, \
                     nr);                                                                                            \
        a += t * a_stride;                                                                                           \
        y += t * y_stride;                                                                                           \
        asum += t * nb;                                                                                              \
        KP_TAIL(nt - t, kp_rtile, KIND, nb, chunk, a, a_stride, asum, y, y_stride, nr) \
    }

KP_RGEMM(kp_rgemm_q4_0, KR_Q4_0)
KP_RGEMM(kp_rgemm_iq4_nl, KR_IQ4_NL)
KP_RGEMM(kp_rgemm_q8_0, KR_Q8_0)
KP_RGEMM(kp_rgemm_mxfp4, KR_MXFP4)
KP_RGEMM(kp_rgemm_q5_0, KR_Q5_0)


/* Repacked q4_K / iq4_xs super-blocks (lmq_rpanelk4): per 64 quants of 16
 * rows, eight loads give the low-nibble groups (one sub-block) and, shifted,
 * the high-nibble ones (the next); per token, 8 vpdpbusd per sub-block,
 * then its scale (vpmulld); the mins (q4_K) or the grid offset (iq4_xs)
 * from the pairs of 32-quant sums with vpdpwssd. */
KP_INLINE void kp_rtile_k4(const int T, const bool IQ, int64_t nb, const uint8_t *chunk, const uint8_t *act,
                           int64_t a_stride, const int32_t *psum, float *y, int64_t y_stride, int nr)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i lut = _mm512_broadcast_i32x4(_mm_xor_si128(_mm_loadu_si128((const __m128i *)lmq_iq4nl_values),
                                                             _mm_set1_epi8((char)0x80)));
    __m512 acc[KP_TOK];
KP_UNROLL(8)
    for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        const lmq_rpanelk4 *p = IQ ? NULL : (const lmq_rpanelk4 *)chunk + ib;
        const lmq_rpanelx4 *x4 = IQ ? (const lmq_rpanelx4 *)chunk + ib : NULL;
        const uint16_t *pd = IQ ? x4->d : p->d;
        const int8_t(*psc)[LMQ_PANEL_ROWS] = IQ ? x4->sc : p->sc;
        const uint8_t(*pu)[8][LMQ_PANEL_ROWS][4] = IQ ? x4->u : p->u;
        const lmq_block_q8_K *yb[KP_TOK];
KP_UNROLL(8)
        for (int t = 0; t < T; t++) yb[t] = (const lmq_block_q8_K *)(act + t * a_stride) + ib;
        __m512i tot[KP_TOK];
KP_UNROLL(8)
        for (int t = 0; t < T; t++) tot[t] = _mm512_setzero_si512();
KP_UNROLL(1)
        for (int j = 0; j < 8; j++) {
            const int c = j / 2, hi = j % 2;
            __m512i sacc[KP_TOK];
KP_UNROLL(8)
            for (int t = 0; t < T; t++) sacc[t] = _mm512_setzero_si512();
KP_UNROLL(8)
            for (int h = 0; h < 8; h++) {
                const __m512i v = _mm512_loadu_si512(pu[c][h]);
                __m512i u = _mm512_and_si512(hi ? _mm512_srli_epi16(v, 4) : v, m4);
                if (IQ) u = _mm512_shuffle_epi8(lut, u);
KP_UNROLL(8)
                for (int t = 0; t < T; t++)
                    sacc[t] = _mm512_dpbusd_epi32(sacc[t], u, kp_bcast32(yb[t]->qs + 64 * c + 32 * hi + 4 * h));
            }
            const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)psc[j]));
KP_UNROLL(8)
            for (int t = 0; t < T; t++) tot[t] = _mm512_add_epi32(tot[t], _mm512_mullo_epi32(sacc[t], sc));
        }
        /* per row, the int16 pairs (min or scale of sub-block 2q, of 2q + 1) */
        __m512i mm[4];
KP_UNROLL(4)
        for (int q = 0; q < 4; q++)
            mm[q] = IQ ? _mm512_or_si512(
                             _mm512_and_si512(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)psc[2 * q])),
                                              _mm512_set1_epi32(0xFFFF)),
                             _mm512_slli_epi32(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)psc[2 * q + 1])), 16))
                       : _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)p->m[q]));
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)pd));
        const __m512 dm = IQ ? dw : _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p->dmin));
KP_UNROLL(8)
        for (int t = 0; t < T; t++) {
            const int32_t *ps = psum + (t * nb + ib) * 4;
            __m512i bias = _mm512_setzero_si512();
KP_UNROLL(4)
            for (int q = 0; q < 4; q++) bias = _mm512_dpwssd_epi32(bias, mm[q], _mm512_set1_epi32(ps[q]));
            const __m512 dy = _mm512_set1_ps(yb[t]->d);
            if (IQ) {
                acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dy),
                                         _mm512_cvtepi32_ps(_mm512_sub_epi32(tot[t], _mm512_slli_epi32(bias, 7))),
                                         acc[t]);
            } else {
                acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dy), _mm512_cvtepi32_ps(tot[t]), acc[t]);
                acc[t] = _mm512_fnmadd_ps(_mm512_mul_ps(dm, dy), _mm512_cvtepi32_ps(bias), acc[t]);
            }
        }
    }
KP_UNROLL(8)
    for (int t = 0; t < T; t++) kp_store(y + t * y_stride, acc[t], nr);
}

#define KP_RGEMM_K4(name, IQ)                                                                                        \
    static void name(int64_t nb, const void *chunk, const void *act, int64_t a_stride, const int32_t *psum, int nt,  \
                     float *y, int64_t y_stride, int nr)                                                             \
    {                                                                                                                \
        const uint8_t *a = act;                                                                                      \
        int t = 0;                                                                                                   \
        for (; t + KP_TOK <= nt; t += KP_TOK)                                                                        \
            kp_rtile_k4(KP_TOK, IQ, nb, chunk, a + t * a_stride, a_stride, psum + t * nb * 4, y + t * y_stride,      \
                        y_stride, nr);                                                                               \
        a += t * a_stride;                                                                                           \
        y += t * y_stride;                                                                                           \
        psum += t * nb * 4;                                                                                          \
        KP_TAIL(nt - t, kp_rtile_k4, IQ, nb, chunk, a, a_stride, psum, y, y_stride, nr) \
    }

KP_RGEMM_K4(kp_rgemm_q4_K, false)
KP_RGEMM_K4(kp_rgemm_iq4_xs, true)

/* ---- repacked q2_K / q3_K (lmq_rpanelq2 / lmq_rpanelq3) --------------- */

/* Codes of sub-block 2 pp + n for the 16 rows: q2_K one 64-byte plane, a
 * shift and an and per group; q3_K three planes (kr_q3_codes's bits). */
KP_INLINE void kp_q23_codes(const int Q2, const uint8_t *plane, int n, __m512i c[4])
{
    if (Q2) {
        const __m512i m3 = _mm512_set1_epi8(3), v = _mm512_loadu_si512(plane);
        c[0] = _mm512_and_si512(v, m3);
        c[1] = _mm512_and_si512(_mm512_srli_epi16(v, 2), m3);
        c[2] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m3);
        c[3] = _mm512_and_si512(_mm512_srli_epi16(v, 6), m3);
        return;
    }
    const __m512i m7 = _mm512_set1_epi8(7);
    const __m512i b0 = _mm512_loadu_si512(plane), b1 = _mm512_loadu_si512(plane + 64);
    if (n == 0) {
        c[0] = _mm512_and_si512(b0, m7);
        c[1] = _mm512_and_si512(_mm512_srli_epi16(b0, 3), m7);
        c[2] = _mm512_and_si512(b1, m7);
        c[3] = _mm512_and_si512(_mm512_srli_epi16(b1, 3), m7);
        return;
    }
    const __m512i b2 = _mm512_loadu_si512(plane + 128);
    const __m512i m3f = _mm512_set1_epi8(0x3F), m40 = _mm512_set1_epi8(0x40), m80 = _mm512_set1_epi8((char)0x80);
    c[0] = _mm512_and_si512(b2, m7);
    c[1] = _mm512_and_si512(_mm512_srli_epi16(b2, 3), m7);
    c[2] = _mm512_or_si512(_mm512_srli_epi16(_mm512_andnot_si512(m3f, b0), 6),
                           _mm512_srli_epi16(_mm512_and_si512(b2, m40), 4));
    c[3] = _mm512_or_si512(_mm512_srli_epi16(_mm512_andnot_si512(m3f, b1), 6),
                           _mm512_srli_epi16(_mm512_and_si512(b2, m80), 5));
}

/* 16 rows x T tokens: per sub-block and token 4 vpdpbusd into the
 * sub-block's sum (|sum| < 2^15), one vpdpwssd against the scale in the low
 * int16 of the lane; q3_K's -4 and q2_K's mins through the q8_K bsums, as
 * panel_avxvnni.c's kv_rtile_q23_h (the same integers and float steps). */
KP_INLINE void kp_rtile_q23(const int Q2, const int T, int64_t nb, const uint8_t *chunk, const uint8_t *act,
                            int64_t a_stride, float *y, int64_t y_stride, int nr)
{
    const size_t bytes = Q2 ? sizeof(lmq_rpanelq2) : sizeof(lmq_rpanelq3);
    const size_t head = Q2 ? offsetof(lmq_rpanelq2, q) : offsetof(lmq_rpanelq3, q);
    const __m512i lo16 = _mm512_set1_epi32(0xFFFF);
    __m512 acc[KP_TOK];
KP_UNROLL(8)
    for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        const uint8_t *blk = chunk + ib * bytes;
        const lmq_rpanelq2 *p2 = (const lmq_rpanelq2 *)blk;
        const lmq_rpanelq3 *p3 = (const lmq_rpanelq3 *)blk;
        const lmq_block_q8_K *yb[KP_TOK];
KP_UNROLL(8)
        for (int t = 0; t < T; t++) yb[t] = (const lmq_block_q8_K *)(act + t * a_stride) + ib;
        if (T == 1)
            for (size_t o = 0; o < head; o += 64) _mm_prefetch((const char *)blk + 2048 + o, _MM_HINT_T0);
        __m512i tot[KP_TOK];
KP_UNROLL(8)
        for (int t = 0; t < T; t++) tot[t] = _mm512_setzero_si512();
KP_UNROLL(1)
        for (int pp = 0; pp < 8; pp++) {
            __m512i sv;
            if (Q2) {
                sv = _mm512_and_si512(_mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)p2->sc[pp])),
                                      _mm512_set1_epi16(0x0F));
            } else {
                sv = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)p3->sc[pp]));
                const __m512i m4 = _mm512_sub_epi16(_mm512_setzero_si512(), _mm512_slli_epi16(sv, 2));
KP_UNROLL(8)
                for (int t = 0; t < T; t++) tot[t] = _mm512_dpwssd_epi32(tot[t], m4, kp_bcast32(yb[t]->bsums + 2 * pp));
            }
KP_UNROLL(2)
            for (int n = 0; n < 2; n++) {
                const int sb = 2 * pp + n;
                const uint8_t *plane = Q2 ? (const uint8_t *)p2->q[sb] : (const uint8_t *)p3->q[pp];
                if (T == 1) {
                    if (Q2)
                        _mm_prefetch((const char *)plane + 2048, _MM_HINT_T0);
                    else if (n == 0)
                        for (int b = 0; b < 3; b++) _mm_prefetch((const char *)plane + 64 * b + 2048, _MM_HINT_T0);
                }
                const __m512i sc = n ? _mm512_srli_epi32(sv, 16) : _mm512_and_si512(sv, lo16);
                __m512i c[4];
                kp_q23_codes(Q2, plane, n, c);
KP_UNROLL(8)
                for (int t = 0; t < T; t++) {
                    const int8_t *a = yb[t]->qs + 16 * sb;
                    __m512i sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), c[0], kp_bcast32(a));
KP_UNROLL(3)
                    for (int g = 1; g < 4; g++) sum = _mm512_dpbusd_epi32(sum, c[g], kp_bcast32(a + 4 * g));
                    tot[t] = _mm512_dpwssd_epi32(tot[t], sum, sc);
                }
            }
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(Q2 ? p2->d : p3->d)));
KP_UNROLL(8)
        for (int t = 0; t < T; t++)
            acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(yb[t]->d)), _mm512_cvtepi32_ps(tot[t]), acc[t]);
        if (Q2) { /* the mins: acc -= dmin dy x sum_j m_j bsum_j */
            __m512i bias[KP_TOK];
KP_UNROLL(8)
            for (int t = 0; t < T; t++) bias[t] = _mm512_setzero_si512();
KP_UNROLL(8)
            for (int pp = 0; pp < 8; pp++) {
                const __m512i m =
                    _mm512_srli_epi16(_mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)p2->sc[pp])), 4);
KP_UNROLL(8)
                for (int t = 0; t < T; t++) bias[t] = _mm512_dpwssd_epi32(bias[t], m, kp_bcast32(yb[t]->bsums + 2 * pp));
            }
            const __m512 dm = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p2->dmin));
KP_UNROLL(8)
            for (int t = 0; t < T; t++)
                acc[t] = _mm512_fnmadd_ps(_mm512_mul_ps(dm, _mm512_set1_ps(yb[t]->d)), _mm512_cvtepi32_ps(bias[t]),
                                          acc[t]);
        }
    }
KP_UNROLL(8)
    for (int t = 0; t < T; t++) kp_store(y + t * y_stride, acc[t], nr);
}

KP_INLINE void kp_rtile_q2(const int T, int64_t nb, const uint8_t *chunk, const uint8_t *act, int64_t a_stride,
                           float *y, int64_t y_stride, int nr)
{
    kp_rtile_q23(1, T, nb, chunk, act, a_stride, y, y_stride, nr);
}

KP_INLINE void kp_rtile_q3(const int T, int64_t nb, const uint8_t *chunk, const uint8_t *act, int64_t a_stride,
                           float *y, int64_t y_stride, int nr)
{
    kp_rtile_q23(0, T, nb, chunk, act, a_stride, y, y_stride, nr);
}

#define KP_RGEMM_Q23(name, tile)                                                                                     \
    static void name(int64_t nb, const void *chunk, const void *act, int64_t a_stride, const int32_t *psum, int nt,  \
                     float *y, int64_t y_stride, int nr)                                                             \
    {                                                                                                                \
        (void)psum; /* the q8_K rows' own bsums serve */                                                             \
        const uint8_t *a = act;                                                                                      \
        int t = 0;                                                                                                   \
        for (; t + KP_TOK <= nt; t += KP_TOK)                                                                        \
            tile(KP_TOK, nb, chunk, a + t * a_stride, a_stride, y + t * y_stride, y_stride, nr);                     \
        KP_TAIL(nt - t, tile, nb, chunk, a + t * a_stride, a_stride, y + t * y_stride, y_stride, nr)                 \
    }

KP_RGEMM_Q23(kp_rgemm_q2_K, kp_rtile_q2)
KP_RGEMM_Q23(kp_rgemm_q3_K, kp_rtile_q3)

/* ---- repacked q5_K (lmq_rpanelq5) -------------------------------------
 * (q6_K stays on vec_dot and the panels here: a repacked 512-bit kernel
 * measured no faster for one token and 4% slower for 512, docs/PERF.md) */

/* 16 rows x T tokens: per 32-quant sub-block and token 8 vpdpbusd of the
 * codes with the signed activations into the sub-block's sum, times its
 * scale (vpmulld) into the total; the mins through the pair sums of 32
 * activation quants (psum), after the d step as the reference orders them. */
KP_INLINE void kp_rtile_q5(const int T, int64_t nb, const uint8_t *chunk, const uint8_t *act, int64_t a_stride,
                           const int32_t *psum, float *y, int64_t y_stride, int nr)
{
    __m512 acc[KP_TOK];
KP_UNROLL(8)
    for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        const lmq_rpanelq5 *p = (const lmq_rpanelq5 *)chunk + ib;
        const lmq_block_q8_K *yb[KP_TOK];
KP_UNROLL(8)
        for (int t = 0; t < T; t++) yb[t] = (const lmq_block_q8_K *)(act + t * a_stride) + ib;
        if (T == 1)
            for (size_t o = 0; o < offsetof(lmq_rpanelq5, q); o += 64)
                _mm_prefetch((const char *)p + 2048 + o, _MM_HINT_T0);
        __m512i tot[KP_TOK];
KP_UNROLL(8)
        for (int t = 0; t < T; t++) tot[t] = _mm512_setzero_si512();
KP_UNROLL(1)
        for (int j = 0; j < 8; j++) {
            const uint8_t *plane = (const uint8_t *)p->q[j];
            if (T == 1)
                for (int b = 0; b < 5; b++) _mm_prefetch((const char *)plane + 64 * b + 2048, _MM_HINT_T0);
            __m512i s[KP_TOK];
KP_UNROLL(2)
            for (int n = 0; n < 2; n++) {
                __m512i c[4];
                kp_q5_codes(plane, n, c);
KP_UNROLL(8)
                for (int t = 0; t < T; t++) {
                    const int8_t *a = yb[t]->qs + 32 * j + 16 * n;
                    __m512i sum = n == 0 ? _mm512_setzero_si512() : s[t];
KP_UNROLL(4)
                    for (int g = 0; g < 4; g++) sum = _mm512_dpbusd_epi32(sum, c[g], kp_bcast32(a + 4 * g));
                    s[t] = sum;
                }
            }
            const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p->sc[j]));
KP_UNROLL(8)
            for (int t = 0; t < T; t++) tot[t] = _mm512_add_epi32(tot[t], _mm512_mullo_epi32(s[t], sc));
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p->d));
KP_UNROLL(8)
        for (int t = 0; t < T; t++)
            acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(yb[t]->d)), _mm512_cvtepi32_ps(tot[t]), acc[t]);
        __m512i mm[4]; /* the mins: acc -= dmin dy x (mins . pair sums) */
KP_UNROLL(4)
        for (int q = 0; q < 4; q++) mm[q] = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)p->m[q]));
        const __m512 dm = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p->dmin));
KP_UNROLL(8)
        for (int t = 0; t < T; t++) {
            __m512i bias = _mm512_setzero_si512();
KP_UNROLL(4)
            for (int q = 0; q < 4; q++)
                bias = _mm512_dpwssd_epi32(bias, mm[q], _mm512_set1_epi32(psum[(t * nb + ib) * 4 + q]));
            acc[t] = _mm512_fnmadd_ps(_mm512_mul_ps(dm, _mm512_set1_ps(yb[t]->d)), _mm512_cvtepi32_ps(bias), acc[t]);
        }
    }
KP_UNROLL(8)
    for (int t = 0; t < T; t++) kp_store(y + t * y_stride, acc[t], nr);
}

static void kp_rgemm_q5_K(int64_t nb, const void *chunk, const void *act, int64_t a_stride, const int32_t *psum, int nt,
                          float *y, int64_t y_stride, int nr)
{
    const uint8_t *a = act;
    int t = 0;
    for (; t + KP_TOK <= nt; t += KP_TOK)
        kp_rtile_q5(KP_TOK, nb, chunk, a + t * a_stride, a_stride, psum + t * nb * 4, y + t * y_stride, y_stride, nr);
    KP_TAIL(nt - t, kp_rtile_q5, nb, chunk, a + t * a_stride, a_stride, psum + t * nb * 4, y + t * y_stride, y_stride, nr)
}

void lmq_kernels_fill_avx512_panel(lmq_kernel_table *t)
{
    /* the float types' batches: the AVX2 f32 panel kernel (a 512-bit one,
     * 12 tokens x 32 rows, ran at 99 GFLOP/s on Zen 4 against its 110) */
    t->fpanel_pack = lmq_fpanel_pack_avx2;
    t->fpanel_gemm = lmq_fpanel_gemm_avx2;
    t->rpanel_gemm[LMQ_TYPE_Q4_K] = kp_rgemm_q4_K;
    t->rpanel_gemm[LMQ_TYPE_IQ4_XS] = kp_rgemm_iq4_xs;
    t->rpanel_gemm[LMQ_TYPE_Q4_0] = kp_rgemm_q4_0;
    t->rpanel_gemm[LMQ_TYPE_IQ4_NL] = kp_rgemm_iq4_nl;
    t->rpanel_gemm[LMQ_TYPE_Q8_0] = kp_rgemm_q8_0;
    t->rpanel_gemm[LMQ_TYPE_MXFP4] = kp_rgemm_mxfp4;
    t->rpanel_gemm[LMQ_TYPE_Q2_K] = kp_rgemm_q2_K;
    t->rpanel_gemm[LMQ_TYPE_Q3_K] = kp_rgemm_q3_K;
    t->rpanel_gemm[LMQ_TYPE_Q5_K] = kp_rgemm_q5_K;
    t->rpanel_gemm[LMQ_TYPE_Q5_0] = kp_rgemm_q5_0;
    t->panel_pack = kp_pack;
    t->panel_unpack[LMQ_TYPE_Q4_0] = kp_unpack_q4_0;
    t->panel_unpack[LMQ_TYPE_Q8_0] = kp_unpack_q8_0;
    t->panel_unpack[LMQ_TYPE_IQ4_NL] = kp_unpack_iq4_nl;
    t->panel_unpack[LMQ_TYPE_MXFP4] = kp_unpack_mxfp4;
    t->panel_unpack[LMQ_TYPE_IQ4_XS] = kp_unpack_iq4_xs;
    t->panel_unpack[LMQ_TYPE_Q4_K] = kp_unpack_q4_K;
    t->panel_unpack[LMQ_TYPE_Q5_K] = kp_unpack_q5_K;
    t->panel_unpack[LMQ_TYPE_Q6_K] = kp_unpack_q6_K;
    t->panel_gemm[LMQ_TYPE_Q4_0] = kp_gemm32;
    t->panel_gemm[LMQ_TYPE_Q5_0] = kp_gemm32;
    t->panel_gemm[LMQ_TYPE_Q8_0] = kp_gemm32;
    t->panel_gemm[LMQ_TYPE_IQ4_NL] = kp_gemm32;
    t->panel_gemm[LMQ_TYPE_MXFP4] = kp_gemm32;
    t->panel_gemm[LMQ_TYPE_Q4_K] = kp_gemm256_s32_min;
    t->panel_gemm[LMQ_TYPE_Q5_K] = kp_gemm256_s32_min;
    t->panel_gemm[LMQ_TYPE_IQ4_XS] = kp_gemm256_s32;
    t->panel_gemm[LMQ_TYPE_Q2_K] = kp_gemm256_s16_min;
    t->panel_gemm[LMQ_TYPE_Q3_K] = kp_gemm256_s16;
    t->panel_gemm[LMQ_TYPE_Q6_K] = kp_gemm256_s16;
}
