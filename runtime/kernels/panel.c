/* panel.c — the row-interleaved "panel" layout of the batched product path
 * and its scalar reference kernels.
 *
 * For a batch of tokens, matmul packs 16 weight rows at a time into a panel
 * (in the thread's workspace, once per product) and runs a kernel that
 * computes those 16 rows for every token. In a panel the integer weights of
 * the 16 rows are interleaved four at a time: group g holds, for each row r,
 * the quants 4g..4g+3 of that row, so one 512-bit vpdpbusd multiplies four
 * activation bytes (broadcast) with four quants of each of the 16 rows and
 * adds them into 16 int32 lanes, one per row. The activations are the
 * weight type's usual ones (q8_0 or q8_K, the bytes ggml computes) with
 * their quants stored biased, u = q + 128 (unsigned, for vpdpbusd's u8 x
 * s8); the bias costs -128 * sum(weights), a per-row constant of the panel
 * ("corr").
 *
 * Two layouts:
 *   - lmq_panel32, per 32-element block (q4_0, q5_0, q8_0, iq4_nl; q8_0
 *     activations): signed quants, corr, d. Per (row, token, block):
 *       isum = corr + sum_k w_k * u_k        exact int32 (= sum w_k q_k)
 *       acc  = fma(dw * dy, float(isum), acc)
 *     the operations of ggml's q8_0-activation dot, block after block.
 *   - lmq_panel256, per 256-element super-block (q2_K..q6_K, iq4_xs; q8_K
 *     activations): quants (q4_K/q5_K/q2_K unsigned 0..31, q6_K/q3_K and
 *     iq4_xs signed), the sub-block scales as int32 lanes, for the types
 *     with mins the mins per 16 quants as int16 pairs (dotted with q8_K's
 *     bsums), corr = -128 * sum_j sc_j * sum(w in sub-block j), d and dmin:
 *       isum = corr + sum_j sc_j * sum_{k in j} w_k * u_k        exact
 *       mins = sum_g m_g * bsum_g                               exact
 *       acc  = fma(dw * dy, float(isum), acc); acc -= (dminw * dy) * float(mins)
 *     ggml's integer sums per super-block, then its float operations.
 *
 * The integer part equals the vec_dot kernels'; the floats are summed block
 * by block per row, where the vec_dot kernels sum SIMD lanes, so the two
 * paths agree to float rounding (like llama.cpp's, whose result also
 * depends on the batch size). The SIMD kernels (x86/panel_avx512.c) do the
 * float operations of the reference below in the same order, so they equal
 * it bit for bit. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "kernels.h"

static inline float p_h2f(uint16_t h)
{
    return lmq_fp16_to_fp32(h);
}

/* ================================================================
 * Per-type traits and scalar unpackers
 * ================================================================ */

const lmq_panel_traits *lmq_panel_traits_of(lmq_type t)
{
    static const lmq_panel_traits tr[LMQ_TYPE_COUNT] = {
        [LMQ_TYPE_Q4_0] = {32, 32, false},   [LMQ_TYPE_Q5_0] = {32, 32, false},
        [LMQ_TYPE_Q8_0] = {32, 32, false},   [LMQ_TYPE_IQ4_NL] = {32, 32, false},
        [LMQ_TYPE_Q2_K] = {256, 16, true},   [LMQ_TYPE_Q3_K] = {256, 16, false},
        [LMQ_TYPE_Q4_K] = {256, 32, true},   [LMQ_TYPE_Q5_K] = {256, 32, true},
        [LMQ_TYPE_Q6_K] = {256, 16, false},  [LMQ_TYPE_IQ4_XS] = {256, 32, false},
        [LMQ_TYPE_MXFP4] = {32, 32, false},
        [LMQ_TYPE_IQ2_XXS] = {256, 32, false}, [LMQ_TYPE_IQ2_XS] = {256, 16, false},
        [LMQ_TYPE_IQ2_S] = {256, 16, false},   [LMQ_TYPE_IQ3_XXS] = {256, 32, false},
        [LMQ_TYPE_IQ3_S] = {256, 32, false},   [LMQ_TYPE_IQ1_S] = {256, 32, false},
        [LMQ_TYPE_IQ1_M] = {256, 16, false},   [LMQ_TYPE_TQ1_0] = {256, 32, false},
        [LMQ_TYPE_TQ2_0] = {256, 32, false},
    };
    if ((unsigned)t >= LMQ_TYPE_COUNT || tr[t].block == 0) return NULL;
    return &tr[t];
}

static void unpack_q4_0(const void *row, int64_t ib, lmq_unpacked *u)
{
    const lmq_block_q4_0 *x = (const lmq_block_q4_0 *)row + ib;
    for (int j = 0; j < 16; j++) {
        u->q[j] = (int8_t)((x->qs[j] & 0xF) - 8);
        u->q[j + 16] = (int8_t)((x->qs[j] >> 4) - 8);
    }
    u->d = p_h2f(x->d);
}

static void unpack_q5_0(const void *row, int64_t ib, lmq_unpacked *u)
{
    const lmq_block_q5_0 *x = (const lmq_block_q5_0 *)row + ib;
    uint32_t qh;
    memcpy(&qh, x->qh, 4);
    for (int j = 0; j < 16; j++) {
        u->q[j] = (int8_t)(((x->qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - 16);
        u->q[j + 16] = (int8_t)(((x->qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16);
    }
    u->d = p_h2f(x->d);
}

static void unpack_q8_0(const void *row, int64_t ib, lmq_unpacked *u)
{
    const lmq_block_q8_0 *x = (const lmq_block_q8_0 *)row + ib;
    memcpy(u->q, x->qs, 32);
    u->d = p_h2f(x->d);
}

static void unpack_iq4_nl(const void *row, int64_t ib, lmq_unpacked *u)
{
    const lmq_block_iq4_nl *x = (const lmq_block_iq4_nl *)row + ib;
    for (int j = 0; j < 16; j++) {
        u->q[j] = lmq_iq4nl_values[x->qs[j] & 0xF];
        u->q[j + 16] = lmq_iq4nl_values[x->qs[j] >> 4];
    }
    u->d = p_h2f(x->d);
}

/* MXFP4: the doubled E2M1 values (|q| <= 12) and the halved power-of-two
 * scale, exact in a float: the products of ggml_vec_dot_mxfp4_q8_0. */
static void unpack_mxfp4(const void *row, int64_t ib, lmq_unpacked *u)
{
    const lmq_block_mxfp4 *x = (const lmq_block_mxfp4 *)row + ib;
    for (int j = 0; j < 16; j++) {
        u->q[j] = lmq_mxfp4_values[x->qs[j] & 0xF];
        u->q[j + 16] = lmq_mxfp4_values[x->qs[j] >> 4];
    }
    u->d = lmq_mxfp4_scale(x->e);
}

static void unpack_q2_K(const void *row, int64_t ib, lmq_unpacked *u)
{
    const lmq_block_q2_K *x = (const lmq_block_q2_K *)row + ib;
    int k = 0;
    for (int c = 0; c < 2; c++)
        for (int shift = 0; shift < 8; shift += 2)
            for (int l = 0; l < 32; l++) u->q[k++] = (int8_t)((x->qs[32 * c + l] >> shift) & 3);
    for (int g = 0; g < 16; g++) {
        u->sc[g] = x->scales[g] & 0xF;
        u->m[g] = (int16_t)(x->scales[g] >> 4);
    }
    u->d = p_h2f(x->d);
    u->dmin = p_h2f(x->dmin);
}

static void unpack_q3_K(const void *row, int64_t ib, lmq_unpacked *u)
{
    const lmq_block_q3_K *x = (const lmq_block_q3_K *)row + ib;
    int8_t sc[16];
    lmq_q3k_scales(x->scales, sc);
    int k = 0;
    uint8_t m = 1;
    for (int c = 0; c < 2; c++)
        for (int shift = 0; shift < 8; shift += 2, m = (uint8_t)(m << 1))
            for (int l = 0; l < 32; l++)
                u->q[k++] = (int8_t)(((x->qs[32 * c + l] >> shift) & 3) - ((x->hmask[l] & m) ? 0 : 4));
    for (int g = 0; g < 16; g++) u->sc[g] = sc[g];
    u->d = p_h2f(x->d);
}

/* The 8 scales and mins of a q4_K / q5_K block (each min for both of its
 * 16-quant groups) and its d, dmin. */
static void k4_scales(const uint8_t *scales, uint16_t d, uint16_t dmin, lmq_unpacked *u)
{
    for (int j = 0; j < 8; j++) {
        uint8_t sc, mn;
        lmq_k4_scale_min(j, scales, &sc, &mn);
        u->sc[j] = sc;
        u->m[2 * j] = u->m[2 * j + 1] = mn;
    }
    u->d = p_h2f(d);
    u->dmin = p_h2f(dmin);
}

static void unpack_q4_K(const void *row, int64_t ib, lmq_unpacked *u)
{
    const lmq_block_q4_K *x = (const lmq_block_q4_K *)row + ib;
    for (int j = 0; j < 4; j++)
        for (int l = 0; l < 32; l++) {
            u->q[64 * j + l] = (int8_t)(x->qs[32 * j + l] & 0xF);
            u->q[64 * j + 32 + l] = (int8_t)(x->qs[32 * j + l] >> 4);
        }
    k4_scales(x->scales, x->d, x->dmin, u);
}

static void unpack_q5_K(const void *row, int64_t ib, lmq_unpacked *u)
{
    const lmq_block_q5_K *x = (const lmq_block_q5_K *)row + ib;
    for (int j = 0; j < 4; j++)
        for (int l = 0; l < 32; l++) {
            u->q[64 * j + l] = (int8_t)((x->qs[32 * j + l] & 0xF) | (((x->qh[l] >> (2 * j)) & 1) << 4));
            u->q[64 * j + 32 + l] = (int8_t)((x->qs[32 * j + l] >> 4) | (((x->qh[l] >> (2 * j + 1)) & 1) << 4));
        }
    k4_scales(x->scales, x->d, x->dmin, u);
}

static void unpack_q6_K(const void *row, int64_t ib, lmq_unpacked *u)
{
    const lmq_block_q6_K *x = (const lmq_block_q6_K *)row + ib;
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = x->ql + 64 * h, *qh = x->qh + 32 * h;
        int8_t *q = u->q + 128 * h;
        for (int l = 0; l < 32; l++) {
            q[l] = (int8_t)(((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32);
            q[l + 32] = (int8_t)(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
            q[l + 64] = (int8_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            q[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
    }
    for (int g = 0; g < 16; g++) u->sc[g] = x->scales[g];
    u->d = p_h2f(x->d);
}

static void unpack_iq4_xs(const void *row, int64_t ib, lmq_unpacked *u)
{
    const lmq_block_iq4_xs *x = (const lmq_block_iq4_xs *)row + ib;
    for (int j = 0; j < 8; j++) {
        const uint8_t *qs = x->qs + 16 * j;
        for (int l = 0; l < 16; l++) {
            u->q[32 * j + l] = lmq_iq4nl_values[qs[l] & 0xF];
            u->q[32 * j + 16 + l] = lmq_iq4nl_values[qs[l] >> 4];
        }
        u->sc[j] = (((x->scales_l[j / 2] >> (4 * (j % 2))) & 0xF) | (((x->scales_h >> (2 * j)) & 3) << 4)) - 32;
    }
    u->d = p_h2f(x->d);
}

/* The codebook and ternary types: lmq_iq_unpack's integers as they are. */
static void unpack_iq(lmq_type t, const void *row, int64_t ib, lmq_unpacked *u)
{
    int8_t sc[16];
    lmq_iq_unpack(t, (const uint8_t *)row + ib * lmq_type_get(t)->type_size, u->q, sc, &u->d);
    for (int j = 0; j < 16; j++) u->sc[j] = j < LMQ_QK_K / lmq_iq_sub(t) ? sc[j] : 0;
}

#define UNPACK_IQ(name, T)                                                                                           \
    static void unpack_##name(const void *row, int64_t ib, lmq_unpacked *u) { unpack_iq(LMQ_TYPE_##T, row, ib, u); }
UNPACK_IQ(iq2_xxs, IQ2_XXS)
UNPACK_IQ(iq2_xs, IQ2_XS)
UNPACK_IQ(iq2_s, IQ2_S)
UNPACK_IQ(iq3_xxs, IQ3_XXS)
UNPACK_IQ(iq3_s, IQ3_S)
UNPACK_IQ(iq1_s, IQ1_S)
UNPACK_IQ(iq1_m, IQ1_M)
UNPACK_IQ(tq1_0, TQ1_0)
UNPACK_IQ(tq2_0, TQ2_0)
#undef UNPACK_IQ

void lmq_panel_fill_ref(lmq_kernel_table *t)
{
    t->panel_pack = lmq_panel_pack;
    t->panel_unpack[LMQ_TYPE_Q4_0] = unpack_q4_0;
    t->panel_unpack[LMQ_TYPE_Q5_0] = unpack_q5_0;
    t->panel_unpack[LMQ_TYPE_Q8_0] = unpack_q8_0;
    t->panel_unpack[LMQ_TYPE_IQ4_NL] = unpack_iq4_nl;
    t->panel_unpack[LMQ_TYPE_MXFP4] = unpack_mxfp4;
    t->panel_unpack[LMQ_TYPE_Q2_K] = unpack_q2_K;
    t->panel_unpack[LMQ_TYPE_Q3_K] = unpack_q3_K;
    t->panel_unpack[LMQ_TYPE_Q4_K] = unpack_q4_K;
    t->panel_unpack[LMQ_TYPE_Q5_K] = unpack_q5_K;
    t->panel_unpack[LMQ_TYPE_Q6_K] = unpack_q6_K;
    t->panel_unpack[LMQ_TYPE_IQ4_XS] = unpack_iq4_xs;
    t->panel_unpack[LMQ_TYPE_IQ2_XXS] = unpack_iq2_xxs;
    t->panel_unpack[LMQ_TYPE_IQ2_XS] = unpack_iq2_xs;
    t->panel_unpack[LMQ_TYPE_IQ2_S] = unpack_iq2_s;
    t->panel_unpack[LMQ_TYPE_IQ3_XXS] = unpack_iq3_xxs;
    t->panel_unpack[LMQ_TYPE_IQ3_S] = unpack_iq3_s;
    t->panel_unpack[LMQ_TYPE_IQ1_S] = unpack_iq1_s;
    t->panel_unpack[LMQ_TYPE_IQ1_M] = unpack_iq1_m;
    t->panel_unpack[LMQ_TYPE_TQ1_0] = unpack_tq1_0;
    t->panel_unpack[LMQ_TYPE_TQ2_0] = unpack_tq2_0;
}

/* ================================================================
 * Packing
 * ================================================================ */

int64_t lmq_panel_bytes(lmq_type t, int64_t n_in)
{
    const lmq_panel_traits *pt = lmq_panel_traits_of(t);
    if (!pt || n_in <= 0 || n_in % pt->block) return -1;
    return n_in / pt->block * (int64_t)(pt->block == 32 ? sizeof(lmq_panel32) : sizeof(lmq_panel256));
}

void lmq_panel_pack(lmq_type t, lmq_unpack_fn unpack, const void *w, int64_t w_row, int nr, int64_t n_in, void *panel)
{
    const lmq_panel_traits *pt = lmq_panel_traits_of(t);
    const int64_t nb = n_in / pt->block;
    lmq_unpacked u;
    if (pt->block == 32) {
        lmq_panel32 *p = panel;
        for (int64_t ib = 0; ib < nb; ib++, p++) {
            for (int r = 0; r < LMQ_PANEL_ROWS; r++) {
                if (r < nr) {
                    unpack((const uint8_t *)w + r * w_row, ib, &u);
                } else {
                    memset(u.q, 0, 32);
                    u.d = 0;
                }
                int32_t s = 0;
                for (int k = 0; k < 32; k++) s += u.q[k];
                for (int g = 0; g < 8; g++) memcpy((int8_t *)p->q + lmq_panel_off(g, r, 0), u.q + 4 * g, 4);
                p->corr[r] = -128 * s;
                p->d[r] = u.d;
            }
        }
        return;
    }
    const int nsub = 256 / pt->sub;
    lmq_panel256 *p = panel;
    for (int64_t ib = 0; ib < nb; ib++, p++) {
        for (int r = 0; r < LMQ_PANEL_ROWS; r++) {
            memset(&u, 0, sizeof u);
            if (r < nr) unpack((const uint8_t *)w + r * w_row, ib, &u);
            int32_t corr = 0;
            for (int j = 0; j < nsub; j++) {
                int32_t s = 0;
                for (int k = 0; k < pt->sub; k++) s += u.q[pt->sub * j + k];
                corr += u.sc[j] * s;
            }
            for (int j = 0; j < 16; j++) p->sc[j][r] = u.sc[j]; /* 0 past the last sub-block */
            for (int g = 0; g < 64; g++) memcpy((int8_t *)p->q + lmq_panel_off(g, r, 0), u.q + 4 * g, 4);
            for (int g = 0; g < 8; g++) {
                p->m[g][r][0] = u.m[2 * g];
                p->m[g][r][1] = u.m[2 * g + 1];
            }
            p->corr[r] = -128 * corr;
            p->d[r] = u.d;
            p->dmin[r] = u.dmin;
        }
    }
}

/* ================================================================
 * Reference kernels (activations biased by +128, see lmq_panel_bias_act)
 * ================================================================ */

void lmq_panel_bias_act(lmq_type wtype, void *act, int64_t n_in)
{
    uint8_t *p = act;
    if (lmq_panel_traits_of(wtype)->block == 32) {
        for (int64_t b = 0; b < n_in / 32; b++, p += sizeof(lmq_block_q8_0))
            for (int k = 2; k < 34; k++) p[k] ^= 0x80;
    } else {
        for (int64_t b = 0; b < n_in / 256; b++, p += sizeof(lmq_block_q8_K))
            for (int k = 0; k < 256; k++) p[offsetof(lmq_block_q8_K, qs) + k] ^= 0x80;
    }
}

void lmq_panel_gemm_ref(lmq_type wtype, int64_t n_in, const void *panel, const void *act, int64_t a_stride, int nt,
                        float *y, int64_t y_stride, int nr)
{
    const lmq_panel_traits *pt = lmq_panel_traits_of(wtype);
    for (int t = 0; t < nt; t++) {
        const uint8_t *a = (const uint8_t *)act + t * a_stride;
        float acc[LMQ_PANEL_ROWS] = {0};
        if (pt->block == 32) {
            const lmq_panel32 *p = panel;
            const lmq_block_q8_0 *yb = (const lmq_block_q8_0 *)a;
            for (int64_t ib = 0; ib < n_in / 32; ib++, p++) {
                const uint8_t *ua = (const uint8_t *)yb[ib].qs;
                const float dy = p_h2f(yb[ib].d);
                for (int r = 0; r < LMQ_PANEL_ROWS; r++) {
                    int32_t isum = p->corr[r];
                    for (int g = 0; g < 8; g++)
                        for (int k = 0; k < 4; k++) isum += ((const int8_t *)p->q)[lmq_panel_off(g, r, k)] * ua[4 * g + k];
                    acc[r] = fmaf(p->d[r] * dy, (float)isum, acc[r]);
                }
            }
        } else {
            const lmq_panel256 *p = panel;
            const lmq_block_q8_K *yb = (const lmq_block_q8_K *)a;
            const int gs = pt->sub / 4, nsub = 256 / pt->sub;
            for (int64_t ib = 0; ib < n_in / 256; ib++, p++) {
                const uint8_t *ua = (const uint8_t *)yb[ib].qs;
                const float dy = yb[ib].d;
                for (int r = 0; r < LMQ_PANEL_ROWS; r++) {
                    int32_t isum = p->corr[r];
                    for (int j = 0; j < nsub; j++) {
                        int32_t s = 0;
                        for (int g = j * gs; g < (j + 1) * gs; g++)
                            for (int k = 0; k < 4; k++) s += ((const int8_t *)p->q)[lmq_panel_off(g, r, k)] * ua[4 * g + k];
                        isum += s * p->sc[j][r];
                    }
                    acc[r] = fmaf(p->d[r] * dy, (float)isum, acc[r]);
                    if (pt->has_min) {
                        int32_t mins = 0;
                        for (int g = 0; g < 8; g++)
                            mins += p->m[g][r][0] * yb[ib].bsums[2 * g] + p->m[g][r][1] * yb[ib].bsums[2 * g + 1];
                        acc[r] = fmaf(-(p->dmin[r] * dy), (float)mins, acc[r]);
                    }
                }
            }
        }
        for (int r = 0; r < nr; r++) y[t * y_stride + r] = acc[r];
    }
}

/* ================================================================
 * Repacked 32-element blocks (lmq_rpanel4 / lmq_rpanel8 / lmq_rpanelmx)
 * ================================================================ */

/* The unsigned code of quant k of a q4_0 / iq4_nl block (its nibble) or a
 * q8_0 block (q + 128). */
static uint8_t rp_code(lmq_type t, const uint8_t *blk, int k)
{
    if (t == LMQ_TYPE_Q8_0) return (uint8_t)(((const lmq_block_q8_0 *)blk)->qs[k] ^ 0x80);
    const uint8_t *qs = t == LMQ_TYPE_Q4_0   ? ((const lmq_block_q4_0 *)blk)->qs
                        : t == LMQ_TYPE_MXFP4 ? ((const lmq_block_mxfp4 *)blk)->qs
                                              : ((const lmq_block_iq4_nl *)blk)->qs;
    return k < 16 ? qs[k] & 0xF : qs[k - 16] >> 4;
}

int64_t lmq_rpanel_block_bytes(lmq_type t)
{
    return t == LMQ_TYPE_Q8_0     ? (int64_t)sizeof(lmq_rpanel8)
           : t == LMQ_TYPE_Q4_K   ? (int64_t)sizeof(lmq_rpanelk4)
           : t == LMQ_TYPE_IQ4_XS ? (int64_t)sizeof(lmq_rpanelx4)
           : t == LMQ_TYPE_MXFP4  ? (int64_t)sizeof(lmq_rpanelmx)
           : t == LMQ_TYPE_Q6_K   ? (int64_t)sizeof(lmq_rpanelq6)
           : t == LMQ_TYPE_Q5_K   ? (int64_t)sizeof(lmq_rpanelq5)
           : t == LMQ_TYPE_Q2_K   ? (int64_t)sizeof(lmq_rpanelq2)
           : t == LMQ_TYPE_Q3_K   ? (int64_t)sizeof(lmq_rpanelq3)
           : t == LMQ_TYPE_Q5_0   ? (int64_t)sizeof(lmq_rpanel5)
                                  : (int64_t)sizeof(lmq_rpanel4);
}

static void rpanel_pack_k4(lmq_type t, const void *w, int64_t w_row, int64_t n_in, void *out)
{
    /* the scalar unpackers (every table's give the same bytes): repacking
     * runs on pool threads, which do not see a context's kernel settings */
    const lmq_kernel_table *ref = lmq_kernels_for(LMQ_ISA_SCALAR);
    for (int64_t ib = 0; ib < n_in / 256; ib++) {
        lmq_rpanelk4 *p = t == LMQ_TYPE_Q4_K ? (lmq_rpanelk4 *)out + ib : NULL;
        lmq_rpanelx4 *x4 = t == LMQ_TYPE_IQ4_XS ? (lmq_rpanelx4 *)out + ib : NULL;
        uint16_t *d = p ? p->d : x4->d;
        int8_t(*sc)[LMQ_PANEL_ROWS] = p ? p->sc : x4->sc;
        uint8_t(*pu)[8][LMQ_PANEL_ROWS][4] = p ? p->u : x4->u;
        for (int r = 0; r < LMQ_PANEL_ROWS; r++) {
            const uint8_t *row = (const uint8_t *)w + r * w_row;
            lmq_unpacked u;
            memset(&u, 0, sizeof u);
            uint8_t code[256];
            ref->panel_unpack[t](row, ib, &u);
            if (p) {
                for (int k = 0; k < 256; k++) code[k] = (uint8_t)u.q[k];
                const lmq_block_q4_K *x = (const lmq_block_q4_K *)row + ib;
                d[r] = x->d;
                p->dmin[r] = x->dmin;
                for (int j = 0; j < 8; j++) p->m[j / 2][r][j % 2] = (int8_t)u.m[2 * j];
            } else {
                const lmq_block_iq4_xs *x = (const lmq_block_iq4_xs *)row + ib;
                for (int j = 0; j < 8; j++)
                    for (int l = 0; l < 16; l++) {
                        code[32 * j + l] = x->qs[16 * j + l] & 0xF;
                        code[32 * j + 16 + l] = x->qs[16 * j + l] >> 4;
                    }
                d[r] = x->d;
            }
            for (int j = 0; j < 8; j++) sc[j][r] = (int8_t)u.sc[j];
            for (int c = 0; c < 4; c++)
                for (int h = 0; h < 8; h++)
                    for (int k = 0; k < 4; k++)
                        ((uint8_t *)pu[c])[lmq_panel_off(h, r, k)] = (uint8_t)(code[64 * c + 4 * h + k] | code[64 * c + 32 + 4 * h + k] << 4);
        }
    }
}

/* q6_K: the codes (q + 32) of each 16-quant sub-block, quants 0..11 in
 * the low 6 bits of three 4-quant groups, the code of quant 12 + k spread
 * over their top 2 bits (lmq_rpanelq6). */
static void rpanel_pack_q6(const void *w, int64_t w_row, int64_t n_in, void *out)
{
    const lmq_kernel_table *ref = lmq_kernels_for(LMQ_ISA_SCALAR);
    for (int64_t ib = 0; ib < n_in / 256; ib++) {
        lmq_rpanelq6 *p = (lmq_rpanelq6 *)out + ib;
        for (int r = 0; r < LMQ_PANEL_ROWS; r++) {
            const uint8_t *row = (const uint8_t *)w + r * w_row;
            const lmq_block_q6_K *x = (const lmq_block_q6_K *)row + ib;
            lmq_unpacked u;
            ref->panel_unpack[LMQ_TYPE_Q6_K](row, ib, &u);
            p->d[r] = x->d;
            for (int j = 0; j < 16; j++) p->sc[j / 2][r][j % 2] = x->scales[j];
            for (int sb = 0; sb < 16; sb++)
                for (int b = 0; b < 3; b++)
                    for (int k = 0; k < 4; k++) {
                        const int code = u.q[16 * sb + 4 * b + k] + 32, top = u.q[16 * sb + 12 + k] + 32;
                        p->q[sb][b][r][k] = (uint8_t)(code | ((top >> (4 - 2 * b)) & 3) << 6);
                    }
        }
    }
}

/* The codes (q + off, 0..31) of 32 quants of row r in five byte planes
 * (lmq_rpanelq5's sub-block, lmq_rpanel5). */
static void rp_q5_planes(uint8_t (*q)[LMQ_PANEL_ROWS][4], int r, const int8_t *quants, int off)
{
    for (int k = 0; k < 4; k++) {
        int c[8];
        for (int g = 0; g < 8; g++) c[g] = quants[4 * g + k] + off;
        q[0][r][k] = (uint8_t)(c[0] | (c[5] & 7) << 5);
        q[1][r][k] = (uint8_t)(c[1] | (c[6] & 7) << 5);
        q[2][r][k] = (uint8_t)(c[2] | (c[7] & 7) << 5);
        q[3][r][k] = (uint8_t)(c[3] | (c[5] >> 3 & 3) << 5 | (c[7] >> 3 & 1) << 7);
        q[4][r][k] = (uint8_t)(c[4] | (c[6] >> 3 & 3) << 5 | (c[7] >> 4 & 1) << 7);
    }
}

/* q5_0: d, the codes (q + 16) in five byte planes (lmq_rpanel5). */
static void rpanel_pack_q5_0(const void *w, int64_t w_row, int64_t n_in, void *out)
{
    const lmq_kernel_table *ref = lmq_kernels_for(LMQ_ISA_SCALAR);
    for (int64_t ib = 0; ib < n_in / 32; ib++) {
        lmq_rpanel5 *p = (lmq_rpanel5 *)out + ib;
        for (int r = 0; r < LMQ_PANEL_ROWS; r++) {
            const uint8_t *row = (const uint8_t *)w + r * w_row;
            lmq_unpacked u;
            ref->panel_unpack[LMQ_TYPE_Q5_0](row, ib, &u);
            p->d[r] = ((const lmq_block_q5_0 *)row + ib)->d;
            rp_q5_planes(p->q, r, u.q, 16);
        }
    }
}

/* q5_K: q4_K's scales and mins, the codes (0..31) in five byte planes per
 * 32-quant sub-block (lmq_rpanelq5). */
static void rpanel_pack_q5(const void *w, int64_t w_row, int64_t n_in, void *out)
{
    const lmq_kernel_table *ref = lmq_kernels_for(LMQ_ISA_SCALAR);
    for (int64_t ib = 0; ib < n_in / 256; ib++) {
        lmq_rpanelq5 *p = (lmq_rpanelq5 *)out + ib;
        for (int r = 0; r < LMQ_PANEL_ROWS; r++) {
            const uint8_t *row = (const uint8_t *)w + r * w_row;
            const lmq_block_q5_K *x = (const lmq_block_q5_K *)row + ib;
            lmq_unpacked u;
            ref->panel_unpack[LMQ_TYPE_Q5_K](row, ib, &u);
            p->d[r] = x->d;
            p->dmin[r] = x->dmin;
            for (int j = 0; j < 8; j++) {
                p->sc[j][r] = (int8_t)u.sc[j];
                p->m[j / 2][r][j % 2] = (int8_t)u.m[2 * j];
                rp_q5_planes(p->q[j], r, u.q + 32 * j, 0);
            }
        }
    }
}

/* q2_K: the rows' scale bytes in pairs, the codes of each 16-quant
 * sub-block in one byte plane (lmq_rpanelq2). */
static void rpanel_pack_q2(const void *w, int64_t w_row, int64_t n_in, void *out)
{
    const lmq_kernel_table *ref = lmq_kernels_for(LMQ_ISA_SCALAR);
    for (int64_t ib = 0; ib < n_in / 256; ib++) {
        lmq_rpanelq2 *p = (lmq_rpanelq2 *)out + ib;
        for (int r = 0; r < LMQ_PANEL_ROWS; r++) {
            const uint8_t *row = (const uint8_t *)w + r * w_row;
            const lmq_block_q2_K *x = (const lmq_block_q2_K *)row + ib;
            lmq_unpacked u;
            ref->panel_unpack[LMQ_TYPE_Q2_K](row, ib, &u);
            p->d[r] = x->d;
            p->dmin[r] = x->dmin;
            for (int j = 0; j < 16; j++) {
                p->sc[j / 2][r][j % 2] = x->scales[j];
                for (int k = 0; k < 4; k++) {
                    int b = 0;
                    for (int g = 0; g < 4; g++) b |= u.q[16 * j + 4 * g + k] << 2 * g;
                    p->q[j][r][k] = (uint8_t)b;
                }
            }
        }
    }
}

/* q3_K: the scales as bytes, the codes (q + 4) of each 32 quants in three
 * byte planes (lmq_rpanelq3). */
static void rpanel_pack_q3(const void *w, int64_t w_row, int64_t n_in, void *out)
{
    const lmq_kernel_table *ref = lmq_kernels_for(LMQ_ISA_SCALAR);
    for (int64_t ib = 0; ib < n_in / 256; ib++) {
        lmq_rpanelq3 *p = (lmq_rpanelq3 *)out + ib;
        for (int r = 0; r < LMQ_PANEL_ROWS; r++) {
            const uint8_t *row = (const uint8_t *)w + r * w_row;
            const lmq_block_q3_K *x = (const lmq_block_q3_K *)row + ib;
            lmq_unpacked u;
            ref->panel_unpack[LMQ_TYPE_Q3_K](row, ib, &u);
            p->d[r] = x->d;
            for (int j = 0; j < 16; j++) p->sc[j / 2][r][j % 2] = (int8_t)u.sc[j];
            for (int pp = 0; pp < 8; pp++)
                for (int k = 0; k < 4; k++) {
                    int c[8];
                    for (int g = 0; g < 8; g++) c[g] = u.q[32 * pp + 4 * g + k] + 4;
                    p->q[pp][0][r][k] = (uint8_t)(c[0] | c[1] << 3 | (c[6] & 3) << 6);
                    p->q[pp][1][r][k] = (uint8_t)(c[2] | c[3] << 3 | (c[7] & 3) << 6);
                    p->q[pp][2][r][k] = (uint8_t)(c[4] | c[5] << 3 | (c[6] >> 2) << 6 | (c[7] >> 2) << 7);
                }
        }
    }
}

void lmq_rpanel_pack(lmq_type t, const void *w, int64_t w_row, int64_t n_in, void *out)
{
    if (t == LMQ_TYPE_Q2_K) {
        rpanel_pack_q2(w, w_row, n_in, out);
        return;
    }
    if (t == LMQ_TYPE_Q5_0) {
        rpanel_pack_q5_0(w, w_row, n_in, out);
        return;
    }
    if (t == LMQ_TYPE_Q3_K) {
        rpanel_pack_q3(w, w_row, n_in, out);
        return;
    }
    if (t == LMQ_TYPE_Q5_K) {
        rpanel_pack_q5(w, w_row, n_in, out);
        return;
    }
    if (t == LMQ_TYPE_Q6_K) {
        rpanel_pack_q6(w, w_row, n_in, out);
        return;
    }
    if (t == LMQ_TYPE_Q4_K || t == LMQ_TYPE_IQ4_XS) {
        rpanel_pack_k4(t, w, w_row, n_in, out);
        return;
    }
    const int64_t nb = n_in / 32, bs = lmq_type_get(t)->type_size;
    for (int64_t ib = 0; ib < nb; ib++)
        for (int r = 0; r < LMQ_PANEL_ROWS; r++) {
            const uint8_t *blk = (const uint8_t *)w + r * w_row + ib * bs;
            /* the 4-bit types: byte 4g + k of the repacked row holds codes 4g + k and 4g + 16 + k
             * (rp_code), which are the nibbles of the block's byte 4g + k: the bytes themselves */
            if (t == LMQ_TYPE_MXFP4) {
                lmq_rpanelmx *p = (lmq_rpanelmx *)out + ib;
                p->e[r] = ((const lmq_block_mxfp4 *)blk)->e;
                for (int g = 0; g < 4; g++)
                    memcpy((uint8_t *)p->u + lmq_panel_off(g, r, 0), ((const lmq_block_mxfp4 *)blk)->qs + 4 * g, 4);
                continue;
            }
            uint16_t d;
            memcpy(&d, blk, 2); /* every other type here starts with its f16 scale */
            if (t == LMQ_TYPE_Q8_0) {
                lmq_rpanel8 *p = (lmq_rpanel8 *)out + ib;
                p->d[r] = d;
                for (int g = 0; g < 8; g++)
                    for (int k = 0; k < 4; k++) ((uint8_t *)p->u)[lmq_panel_off(g, r, k)] = rp_code(t, blk, 4 * g + k);
            } else {
                lmq_rpanel4 *p = (lmq_rpanel4 *)out + ib;
                p->d[r] = d;
                for (int g = 0; g < 4; g++) memcpy((uint8_t *)p->u + lmq_panel_off(g, r, 0), blk + 2 + 4 * g, 4);
            }
        }
}

void lmq_q8_0_block_sums(const void *act, int64_t nb, int32_t *sums)
{
    const lmq_block_q8_0 *a = act;
    for (int64_t ib = 0; ib < nb; ib++) {
        int32_t s = 0;
        for (int k = 0; k < 32; k++) s += a[ib].qs[k];
        sums[ib] = s;
    }
}

void lmq_q8_K_pair_sums(const void *act, int64_t nb, int32_t *sums)
{
    const lmq_block_q8_K *a = act;
    for (int64_t ib = 0; ib < nb; ib++)
        for (int p = 0; p < 4; p++) {
            const int lo = a[ib].bsums[4 * p] + a[ib].bsums[4 * p + 1];
            const int hi = a[ib].bsums[4 * p + 2] + a[ib].bsums[4 * p + 3];
            sums[4 * ib + p] = (int32_t)(((uint32_t)(uint16_t)hi << 16) | (uint16_t)lo);
        }
}

static void rpanel_gemm_k4_ref(lmq_type t, int64_t nb, const void *chunk, const void *act, int64_t a_stride,
                               const int32_t *psum, int nt, float *y, int64_t y_stride, int nr)
{
    const bool iq = t == LMQ_TYPE_IQ4_XS;
    for (int tk = 0; tk < nt; tk++) {
        const lmq_block_q8_K *a = (const lmq_block_q8_K *)((const uint8_t *)act + tk * a_stride);
        float acc[LMQ_PANEL_ROWS] = {0};
        for (int64_t ib = 0; ib < nb; ib++) {
            const lmq_rpanelk4 *p = iq ? NULL : (const lmq_rpanelk4 *)chunk + ib;
            const lmq_rpanelx4 *x4 = iq ? (const lmq_rpanelx4 *)chunk + ib : NULL;
            const uint16_t *d = iq ? x4->d : p->d;
            const int8_t(*sc)[LMQ_PANEL_ROWS] = iq ? x4->sc : p->sc;
            const uint8_t(*pu)[8][LMQ_PANEL_ROWS][4] = iq ? x4->u : p->u;
            const int32_t *ps = psum + (tk * nb + ib) * 4;
            for (int r = 0; r < LMQ_PANEL_ROWS; r++) {
                int32_t isum = 0, bias = 0;
                for (int j = 0; j < 8; j++) {
                    const int c = j / 2, hi = j % 2;
                    int32_t s = 0;
                    for (int h = 0; h < 8; h++)
                        for (int k = 0; k < 4; k++) {
                            const int byte = ((const uint8_t *)pu[c])[lmq_panel_off(h, r, k)], code = hi ? byte >> 4 : byte & 0xF;
                            const int u = iq ? lmq_iq4nl_values[code] + 128 : code;
                            s += u * a[ib].qs[64 * c + 32 * hi + 4 * h + k];
                        }
                    isum += sc[j][r] * s;
                    /* q4_K: the mins; iq4_xs: the grid offset, from the scales */
                    const int16_t bs = (int16_t)(hi ? (uint32_t)ps[c] >> 16 : (uint32_t)ps[c] & 0xFFFF);
                    bias += (iq ? sc[j][r] : p->m[c][r][hi]) * bs;
                }
                const float dy = a[ib].d;
                if (!iq) {
                    acc[r] = fmaf(p_h2f(d[r]) * dy, (float)isum, acc[r]);
                    acc[r] = fmaf(-(p_h2f(p->dmin[r]) * dy), (float)bias, acc[r]);
                } else {
                    acc[r] = fmaf(p_h2f(d[r]) * dy, (float)(isum - 128 * bias), acc[r]);
                }
            }
        }
        for (int r = 0; r < nr; r++) y[tk * y_stride + r] = acc[r];
    }
}

/* Code of quant 16 sb + k (0..63) of row r of a repacked q6_K block. */
static int rp_q6_code(const lmq_rpanelq6 *p, int sb, int r, int k)
{
    if (k < 12) return p->q[sb][k / 4][r][k % 4] & 63;
    k -= 12;
    return (p->q[sb][0][r][k] >> 6) << 4 | (p->q[sb][1][r][k] >> 6) << 2 | p->q[sb][2][r][k] >> 6;
}

/* Per (row, token, super-block): isum = sum_sb sc_sb * (sum_k code_k a_k
 * - 32 * bsum_sb), exactly q6_K's sum_sb sc_sb * sum_k q_k a_k; then the
 * float operation of lmq_panel_gemm_ref. */
static void rpanel_gemm_q6_ref(int64_t nb, const void *chunk, const void *act, int64_t a_stride, int nt, float *y,
                               int64_t y_stride, int nr)
{
    for (int tk = 0; tk < nt; tk++) {
        const lmq_block_q8_K *a = (const lmq_block_q8_K *)((const uint8_t *)act + tk * a_stride);
        float acc[LMQ_PANEL_ROWS] = {0};
        for (int64_t ib = 0; ib < nb; ib++) {
            const lmq_rpanelq6 *p = (const lmq_rpanelq6 *)chunk + ib;
            for (int r = 0; r < LMQ_PANEL_ROWS; r++) {
                int32_t isum = 0;
                for (int sb = 0; sb < 16; sb++) {
                    int32_t s = 0;
                    for (int k = 0; k < 16; k++) s += rp_q6_code(p, sb, r, k) * a[ib].qs[16 * sb + k];
                    isum += p->sc[sb / 2][r][sb % 2] * (s - 32 * a[ib].bsums[sb]);
                }
                acc[r] = fmaf(p_h2f(p->d[r]) * a[ib].d, (float)isum, acc[r]);
            }
        }
        for (int r = 0; r < nr; r++) y[tk * y_stride + r] = acc[r];
    }
}

/* Code of quant 4 g + k (0..31) of row r in five byte planes (a q5_K
 * sub-block, a q5_0 block). */
static int rp_q5_code(const uint8_t (*q)[LMQ_PANEL_ROWS][4], int g, int r, int k)
{
    const uint8_t *b[5];
    for (int i = 0; i < 5; i++) b[i] = &q[i][r][k];
    switch (g) {
    case 5: return *b[0] >> 5 | (*b[3] >> 5 & 3) << 3;
    case 6: return *b[1] >> 5 | (*b[4] >> 5 & 3) << 3;
    case 7: return *b[2] >> 5 | (*b[3] >> 7) << 3 | (*b[4] >> 7) << 4;
    default: return *b[g] & 31;
    }
}

/* As q4_K's: isum = sum_j sc_j * sum code x a, bias = sum_j m_j x (the
 * sub-block's activation sum), then lmq_panel_gemm_ref's float operations. */
static void rpanel_gemm_q5_ref(int64_t nb, const void *chunk, const void *act, int64_t a_stride, const int32_t *psum,
                               int nt, float *y, int64_t y_stride, int nr)
{
    for (int tk = 0; tk < nt; tk++) {
        const lmq_block_q8_K *a = (const lmq_block_q8_K *)((const uint8_t *)act + tk * a_stride);
        float acc[LMQ_PANEL_ROWS] = {0};
        for (int64_t ib = 0; ib < nb; ib++) {
            const lmq_rpanelq5 *p = (const lmq_rpanelq5 *)chunk + ib;
            const int32_t *ps = psum + (tk * nb + ib) * 4;
            for (int r = 0; r < LMQ_PANEL_ROWS; r++) {
                int32_t isum = 0, bias = 0;
                for (int j = 0; j < 8; j++) {
                    int32_t s = 0;
                    for (int g = 0; g < 8; g++)
                        for (int k = 0; k < 4; k++) s += rp_q5_code(p->q[j], g, r, k) * a[ib].qs[32 * j + 4 * g + k];
                    isum += p->sc[j][r] * s;
                    const int16_t bs = (int16_t)(j % 2 ? (uint32_t)ps[j / 2] >> 16 : (uint32_t)ps[j / 2] & 0xFFFF);
                    bias += p->m[j / 2][r][j % 2] * bs;
                }
                const float dy = a[ib].d;
                acc[r] = fmaf(p_h2f(p->d[r]) * dy, (float)isum, acc[r]);
                acc[r] = fmaf(-(p_h2f(p->dmin[r]) * dy), (float)bias, acc[r]);
            }
        }
        for (int r = 0; r < nr; r++) y[tk * y_stride + r] = acc[r];
    }
}

/* Code of quant 32 p + 4 g + k (0..7) of row r of a repacked q3_K block. */
static int rp_q3_code(const lmq_rpanelq3 *p, int pp, int g, int r, int k)
{
    const int b0 = p->q[pp][0][r][k], b1 = p->q[pp][1][r][k], b2 = p->q[pp][2][r][k];
    switch (g) {
    case 0: return b0 & 7;
    case 1: return b0 >> 3 & 7;
    case 2: return b1 & 7;
    case 3: return b1 >> 3 & 7;
    case 4: return b2 & 7;
    case 5: return b2 >> 3 & 7;
    case 6: return b0 >> 6 | (b2 >> 6 & 1) << 2;
    default: return b1 >> 6 | (b2 >> 7) << 2;
    }
}

/* q2_K and q3_K, per (row, token, super-block): isum = sum_j sc_j * sum_k
 * code_k a_k (q3_K: the scales signed, minus 4 x bsum_j per sub-block),
 * q2_K's bias = sum_j min_j x bsum_j; then lmq_panel_gemm_ref's float
 * operations. */
static void rpanel_gemm_q23_ref(lmq_type t, int64_t nb, const void *chunk, const void *act, int64_t a_stride, int nt,
                                float *y, int64_t y_stride, int nr)
{
    const bool q2 = t == LMQ_TYPE_Q2_K;
    for (int tk = 0; tk < nt; tk++) {
        const lmq_block_q8_K *a = (const lmq_block_q8_K *)((const uint8_t *)act + tk * a_stride);
        float acc[LMQ_PANEL_ROWS] = {0};
        for (int64_t ib = 0; ib < nb; ib++) {
            const lmq_rpanelq2 *p2 = (const lmq_rpanelq2 *)chunk + ib;
            const lmq_rpanelq3 *p3 = (const lmq_rpanelq3 *)chunk + ib;
            const float dy = a[ib].d;
            for (int r = 0; r < LMQ_PANEL_ROWS; r++) {
                int32_t isum = 0, bias = 0;
                for (int j = 0; j < 16; j++) {
                    int32_t s = 0;
                    for (int i = 0; i < 16; i++) {
                        const int g = i / 4, k = i % 4;
                        const int code = q2 ? p2->q[j][r][k] >> 2 * g & 3 : rp_q3_code(p3, j / 2, 4 * (j % 2) + g, r, k);
                        s += code * a[ib].qs[16 * j + i];
                    }
                    if (q2) {
                        const int byte = p2->sc[j / 2][r][j % 2];
                        isum += (byte & 0xF) * s;
                        bias += (byte >> 4) * a[ib].bsums[j];
                    } else {
                        isum += p3->sc[j / 2][r][j % 2] * (s - 4 * a[ib].bsums[j]);
                    }
                }
                acc[r] = fmaf(p_h2f(q2 ? p2->d[r] : p3->d[r]) * dy, (float)isum, acc[r]);
                if (q2) acc[r] = fmaf(-(p_h2f(p2->dmin[r]) * dy), (float)bias, acc[r]);
            }
        }
        for (int r = 0; r < nr; r++) y[tk * y_stride + r] = acc[r];
    }
}

void lmq_rpanel_gemm_ref(lmq_type t, int64_t nb, const void *chunk, const void *act, int64_t a_stride,
                         const int32_t *asum, int nt, float *y, int64_t y_stride, int nr)
{
    if (t == LMQ_TYPE_Q2_K || t == LMQ_TYPE_Q3_K) {
        (void)asum; /* the q8_K rows' own bsums serve */
        rpanel_gemm_q23_ref(t, nb, chunk, act, a_stride, nt, y, y_stride, nr);
        return;
    }
    if (t == LMQ_TYPE_Q5_K) {
        rpanel_gemm_q5_ref(nb, chunk, act, a_stride, asum, nt, y, y_stride, nr);
        return;
    }
    if (t == LMQ_TYPE_Q6_K) {
        (void)asum; /* the q8_K row's own bsums serve */
        rpanel_gemm_q6_ref(nb, chunk, act, a_stride, nt, y, y_stride, nr);
        return;
    }
    if (t == LMQ_TYPE_Q4_K || t == LMQ_TYPE_IQ4_XS) {
        rpanel_gemm_k4_ref(t, nb, chunk, act, a_stride, asum, nt, y, y_stride, nr);
        return;
    }
    const int off = t == LMQ_TYPE_Q4_0 ? 8 : t == LMQ_TYPE_Q5_0 ? 16 : 128;
    for (int tk = 0; tk < nt; tk++) {
        const lmq_block_q8_0 *a = (const lmq_block_q8_0 *)((const uint8_t *)act + tk * a_stride);
        float acc[LMQ_PANEL_ROWS] = {0};
        for (int64_t ib = 0; ib < nb; ib++) {
            const float dy = p_h2f(a[ib].d);
            for (int r = 0; r < LMQ_PANEL_ROWS; r++) {
                int32_t isum = -off * asum[tk * nb + ib];
                float dw;
                for (int k = 0; k < 32; k++) {
                    int u;
                    if (t == LMQ_TYPE_Q5_0) {
                        const lmq_rpanel5 *p = (const lmq_rpanel5 *)chunk + ib;
                        u = rp_q5_code(p->q, k / 4, r, k % 4);
                        dw = p_h2f(p->d[r]);
                    } else if (t == LMQ_TYPE_Q8_0) {
                        const lmq_rpanel8 *p = (const lmq_rpanel8 *)chunk + ib;
                        u = ((const uint8_t *)p->u)[lmq_panel_off(k / 4, r, k % 4)];
                        dw = p_h2f(p->d[r]);
                    } else if (t == LMQ_TYPE_MXFP4) { /* the code's value + 128, as iq4_nl's grid */
                        const lmq_rpanelmx *p = (const lmq_rpanelmx *)chunk + ib;
                        const int g = (k % 16) / 4, byte = ((const uint8_t *)p->u)[lmq_panel_off(g, r, k % 4)];
                        u = lmq_mxfp4_values[k < 16 ? byte & 0xF : byte >> 4] + 128;
                        dw = lmq_mxfp4_scale(p->e[r]);
                    } else {
                        const lmq_rpanel4 *p = (const lmq_rpanel4 *)chunk + ib;
                        const int g = (k % 16) / 4, byte = ((const uint8_t *)p->u)[lmq_panel_off(g, r, k % 4)];
                        const int code = k < 16 ? byte & 0xF : byte >> 4;
                        u = t == LMQ_TYPE_Q4_0 ? code : lmq_iq4nl_values[code] + 128;
                        dw = p_h2f(p->d[r]);
                    }
                    isum += u * a[ib].qs[k];
                }
                acc[r] = fmaf(dw * dy, (float)isum, acc[r]);
            }
        }
        for (int r = 0; r < nr; r++) y[tk * y_stride + r] = acc[r];
    }
}

_Static_assert(sizeof(lmq_rpanel4) == 16 * sizeof(lmq_block_q4_0), "a repacked q4_0 / iq4_nl chunk keeps the bytes");
_Static_assert(sizeof(lmq_rpanel8) == 16 * sizeof(lmq_block_q8_0), "a repacked q8_0 chunk keeps the bytes");
_Static_assert(sizeof(lmq_rpanel5) == 16 * sizeof(lmq_block_q5_0), "a repacked q5_0 chunk keeps the bytes");
_Static_assert(sizeof(lmq_rpanelmx) == 16 * sizeof(lmq_block_mxfp4), "a repacked MXFP4 chunk keeps the bytes");
_Static_assert(sizeof(lmq_rpanelk4) == 2368, "a repacked q4_K chunk: 2368 bytes");
_Static_assert(sizeof(lmq_rpanelx4) == 2208, "a repacked iq4_xs chunk: 2208 bytes");
_Static_assert(sizeof(lmq_rpanelq6) == 16 * sizeof(lmq_block_q6_K), "a repacked q6_K chunk keeps the bytes");
_Static_assert(sizeof(lmq_rpanelq5) == 2880, "a repacked q5_K chunk: 2880 bytes");

/* ================================================================
 * f32 panels (kernels.h: fpanel_pack / fpanel_gemm)
 * ================================================================ */

void lmq_fpanel_pack_ref(const float *rows, int64_t row_stride, int nr, int64_t n_in, float *panel)
{
    for (int64_t k = 0; k < n_in; k++)
        for (int r = 0; r < LMQ_PANEL_ROWS; r++) panel[k * LMQ_PANEL_ROWS + r] = r < nr ? rows[r * row_stride + k] : 0.0f;
}

void lmq_fpanel_gemm_ref(int64_t n_in, int np, const float *panels, const float *x, int64_t x_stride, int nt, float *y,
                         int64_t y_stride, int nr)
{
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < nr && r < np * LMQ_PANEL_ROWS; r++) {
            const float *p = panels + (r / LMQ_PANEL_ROWS) * LMQ_PANEL_ROWS * n_in + r % LMQ_PANEL_ROWS;
            float s = 0.0f;
            for (int64_t k = 0; k < n_in; k++) s = fmaf(p[k * LMQ_PANEL_ROWS], x[t * x_stride + k], s);
            y[t * y_stride + r] = s;
        }
}
