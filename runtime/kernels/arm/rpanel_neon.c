/* rpanel_neon.c — the repacked q2_K, q3_K, q5_K, q6_K and q5_0 kernels for
 * aarch64 (the "neon" level; the i8mm table keeps them), for one token
 * (generation) and for batches.
 *
 * These five layouts (kernels.h: lmq_rpanelq2, lmq_rpanelq3, lmq_rpanelq5,
 * lmq_rpanelq6, lmq_rpanel5) keep the x86 order on every machine: a
 * 16-byte vector holds 4 quants of 4 rows, which is the operand of sdot by
 * element (vdotq_laneq_s32): one token's 4 activation quants (a 32-bit
 * lane) against each row's 4, 4 rows per instruction and nothing to fold.
 * The codes come out of the byte planes with and / ushr / sri; they are
 * unsigned (0..63), so valid signed operands. The code offsets (q6_K -32,
 * q3_K -4, q5_0 -16) start each sum at -offset x the activation sum, the
 * sub-block scales multiply the sums in int32, the mins go through the
 * q8_K sums (bsums, pair sums): the integers equal the reference's, and the
 * float operations are its own, in its order, lane per row. Every kernel
 * equals lmq_rpanel_gemm_ref bit for bit (tests/test_kernels.c, under qemu).
 *
 * Batches take two tokens per pass through the same bodies, the weights
 * unpacked once. smmla is not used: its row-pair lines would take a zip
 * per 16 bytes, as many instructions as the halved multiplies save. */
#include <arm_neon.h>
#include <stddef.h>

#include "arm_panel.h"
#include "kernels.h"

/* ================================================================
 * Dots and code unpacking
 * ================================================================ */

/* s + the dot of rows 4q..4q+3 over 16 quants: w[g] holds their quants
 * 4g..4g+3, a one token's 16 activation quants. */
ALWAYS int32x4_t dot16(int32x4_t s, const int8x16_t w[4], int8x16_t a)
{
    s = vdotq_laneq_s32(s, w[0], a, 0);
    s = vdotq_laneq_s32(s, w[1], a, 1);
    s = vdotq_laneq_s32(s, w[2], a, 2);
    return vdotq_laneq_s32(s, w[3], a, 3);
}

/* Ends a sub-block (q2_K, q3_K, q6_K) or a q5_0 block: the compiler may
 * not hoist the next one's loads above it. Unfenced, GCC 12 loads both sub-blocks of a pair up front and spills
 * (169 instructions per pair of q6_K sub-blocks for one token, 134 with
 * the fence; scripts/arm_loops.py). */
ALWAYS void kq_fence(void)
{
    __asm__ volatile("" ::: "memory");
}

ALWAYS int8x16_t s8(uint8x16_t v)
{
    return vreinterpretq_s8_u8(v);
}

/* The code vectors of rows 4q..4q+3 (w[g]: quants 4g..4g+3) from byte
 * planes of 64 bytes at pl, one function per layout (kernels.h). The bit
 * fields that span planes are gathered by chains of sri (shift right and
 * insert, which keeps the destination's top bits) that start from a
 * shifted copy, so no plane is overwritten and none needs a move. */

/* q2_K, one plane per 16-quant sub-block: code g at bits 2g, 2g + 1. */
ALWAYS void q2_codes(const uint8_t *pl, int q, int8x16_t w[4])
{
    const uint8x16_t b = vld1q_u8(pl + 16 * q), m = vdupq_n_u8(3);
    w[0] = s8(vandq_u8(b, m));
    w[1] = s8(vandq_u8(vshrq_n_u8(b, 2), m));
    w[2] = s8(vandq_u8(vshrq_n_u8(b, 4), m));
    w[3] = s8(vshrq_n_u8(b, 6));
}

/* q3_K, three planes per 32 quants: the first sub-block's codes from b0
 * and b1 (h = 0), the second's from b2 and the top bits of b0, b1 (h = 1):
 * c6 = b0 >> 6 | (b2 >> 6 & 1) << 2, c7 = b1 >> 6 | (b2 >> 7) << 2. */
ALWAYS void q3_codes(const uint8_t *pl, int q, int h, int8x16_t w[4])
{
    const uint8x16_t b0 = vld1q_u8(pl + 16 * q), b1 = vld1q_u8(pl + 64 + 16 * q), m = vdupq_n_u8(7);
    if (h == 0) {
        w[0] = s8(vandq_u8(b0, m));
        w[1] = s8(vandq_u8(vshrq_n_u8(b0, 3), m));
        w[2] = s8(vandq_u8(b1, m));
        w[3] = s8(vandq_u8(vshrq_n_u8(b1, 3), m));
        return;
    }
    const uint8x16_t b2 = vld1q_u8(pl + 128 + 16 * q);
    w[0] = s8(vandq_u8(b2, m));
    w[1] = s8(vandq_u8(vshrq_n_u8(b2, 3), m));
    w[2] = s8(vandq_u8(vsriq_n_u8(vshrq_n_u8(b2, 4), b0, 6), m));
    w[3] = s8(vsriq_n_u8(vshrq_n_u8(b2, 5), b1, 6));
}

/* q5_K / q5_0, five planes per 32 quants: codes 0..4 in the low 5 bits,
 * c5 = b0 >> 5 | (b3 >> 5 & 3) << 3, c6 = b1 >> 5 | (b4 >> 5 & 3) << 3,
 * c7 = b2 >> 5 | (b3 >> 7) << 3 | (b4 >> 7) << 4. */
ALWAYS void q5_codes(const uint8_t *pl, int q, int8x16_t w[8])
{
    uint8x16_t b[5];
    for (int i = 0; i < 5; i++) b[i] = vld1q_u8(pl + 64 * i + 16 * q);
    const uint8x16_t m = vdupq_n_u8(31);
    for (int i = 0; i < 5; i++) w[i] = s8(vandq_u8(b[i], m));
    w[5] = s8(vandq_u8(vsriq_n_u8(vshrq_n_u8(b[3], 2), b[0], 5), m));
    w[6] = s8(vandq_u8(vsriq_n_u8(vshrq_n_u8(b[4], 2), b[1], 5), m));
    w[7] = s8(vsriq_n_u8(vsriq_n_u8(vshrq_n_u8(b[4], 3), b[3], 4), b[2], 5));
}

/* q6_K, three planes per 16-quant sub-block: codes 0..2 in the low 6 bits,
 * c3 = (b0 >> 6) << 4 | (b1 >> 6) << 2 | b2 >> 6. */
ALWAYS void q6_codes(const uint8_t *pl, int q, int8x16_t w[4])
{
    const uint8x16_t b0 = vld1q_u8(pl + 16 * q), b1 = vld1q_u8(pl + 64 + 16 * q), b2 = vld1q_u8(pl + 128 + 16 * q);
    const uint8x16_t m = vdupq_n_u8(63);
    w[0] = s8(vandq_u8(b0, m));
    w[1] = s8(vandq_u8(b1, m));
    w[2] = s8(vandq_u8(b2, m));
    w[3] = s8(vsriq_n_u8(vsriq_n_u8(vshrq_n_u8(b0, 2), b1, 4), b2, 6));
}

/* ================================================================
 * Super-blocks of 256 (q8_K activations)
 * ================================================================ */

/* is[k][q] += sc_j x (the codes' dot - off x bsum_j) over 16-quant
 * sub-block j of q2_K, q3_K or q6_K: planes pl (q3_K: the pair's, half h),
 * scales sb (rows 0..15). */
ALWAYS void kq_sub(lmq_type t, const uint8_t *pl, int h, int8x16_t sb, const lmq_block_q8_K *const *a, int T, int j,
                   int off, int32x4_t is[4][4])
{
    int32x4_t sc[4];
    int8x16_t av[4];
    widen_s8(sb, sc);
    for (int k = 0; k < T; k++) av[k] = vld1q_s8(a[k]->qs + 16 * j);
    for (int q = 0; q < 4; q++) {
        int8x16_t w[4];
        if (t == LMQ_TYPE_Q2_K)
            q2_codes(pl, q, w);
        else if (t == LMQ_TYPE_Q3_K)
            q3_codes(pl, q, h, w);
        else
            q6_codes(pl, q, w);
        for (int k = 0; k < T; k++)
            is[k][q] = vmlaq_s32(is[k][q], dot16(vdupq_n_s32(off * a[k]->bsums[j]), w, av[k]), sc[q]);
    }
    kq_fence();
}

/* isum[k][q] of T tokens (blocks a[k]) over one super-block: sum_j sc_j x
 * (sum of codes x activations - offset x bsum_j), rows 4q..4q+3. */
ALWAYS void kq_isum(lmq_type t, const void *blk, const lmq_block_q8_K *const *a, int T, int32x4_t is[4][4])
{
    for (int k = 0; k < T; k++)
        for (int q = 0; q < 4; q++) is[k][q] = vdupq_n_s32(0);
    if (t == LMQ_TYPE_Q5_K) {
        const lmq_rpanelq5 *p = blk;
        for (int j = 0; j < 8; j++) {
            int32x4_t sc[4];
            int8x16_t av[4][2];
            widen16(p->sc[j], sc);
            for (int k = 0; k < T; k++)
                for (int h = 0; h < 2; h++) av[k][h] = vld1q_s8(a[k]->qs + 32 * j + 16 * h);
            for (int q = 0; q < 4; q++) {
                int8x16_t w[8];
                q5_codes(&p->q[j][0][0][0], q, w);
                for (int k = 0; k < T; k++)
                    is[k][q] = vmlaq_s32(is[k][q], dot16(dot16(vdupq_n_s32(0), w, av[k][0]), w + 4, av[k][1]), sc[q]);
            }
        }
        return;
    }
    const int off = t == LMQ_TYPE_Q6_K ? -32 : t == LMQ_TYPE_Q3_K ? -4 : 0;
    for (int pp = 0; pp < 8; pp++) { /* sub-blocks 2pp, 2pp + 1 */
        int8x16x2_t sb; /* their scales, rows 0..15 */
        if (t == LMQ_TYPE_Q2_K) { /* the low nibbles of the rows' own scale bytes */
            const uint8x16x2_t v = vld2q_u8(&((const lmq_rpanelq2 *)blk)->sc[pp][0][0]);
            for (int h = 0; h < 2; h++) sb.val[h] = s8(vandq_u8(v.val[h], vdupq_n_u8(15)));
        } else {
            sb = vld2q_s8(t == LMQ_TYPE_Q3_K ? &((const lmq_rpanelq3 *)blk)->sc[pp][0][0]
                                             : &((const lmq_rpanelq6 *)blk)->sc[pp][0][0]);
        }
        for (int h = 0; h < 2; h++) {
            const int j = 2 * pp + h;
            const uint8_t *pl = t == LMQ_TYPE_Q2_K   ? ((const lmq_rpanelq2 *)blk)->q[j][0]
                                : t == LMQ_TYPE_Q3_K ? ((const lmq_rpanelq3 *)blk)->q[pp][0][0]
                                                     : ((const lmq_rpanelq6 *)blk)->q[j][0][0];
            kq_sub(t, pl, h, sb.val[h], a, T, j, off, is);
        }
    }
}

/* q2_K's mins term of one token: sum_j min_j x bsum_j (the high nibbles of
 * the scale bytes, in sub-block pairs as the bsums). */
ALWAYS void q2_mins(const lmq_rpanelq2 *p, const int16_t *bsums, int32x4_t mn[4])
{
    for (int q = 0; q < 4; q++) {
        int32x4_t lo = vdupq_n_s32(0), hi = lo;
        for (int pp = 0; pp < 8; pp++) {
            int32_t pair;
            memcpy(&pair, bsums + 2 * pp, 4);
            mins_step(&lo, &hi, vreinterpretq_s16_u16(vmovl_u8(vshr_n_u8(vld1_u8(&p->sc[pp][4 * q][0]), 4))), pair);
        }
        mn[q] = vpaddq_s32(lo, hi);
    }
}

ALWAYS int64_t kq_block_bytes(lmq_type t)
{
    return t == LMQ_TYPE_Q2_K   ? (int64_t)sizeof(lmq_rpanelq2)
           : t == LMQ_TYPE_Q3_K ? (int64_t)sizeof(lmq_rpanelq3)
           : t == LMQ_TYPE_Q5_K ? (int64_t)sizeof(lmq_rpanelq5)
                                : (int64_t)sizeof(lmq_rpanelq6);
}

/* Tokens tk..tk+T-1 (T = 1, 2 or 4) over the nb super-blocks of a chunk. */
ALWAYS void kq_pass(lmq_type t, int T, int64_t nb, const void *chunk, const void *act, int64_t a_stride,
                    const int32_t *psum, int tk, float *y, int64_t y_stride, int nr)
{
    acc16 c[4];
    for (int k = 0; k < T; k++) acc_zero(&c[k]);
    const uint8_t *b = chunk;
    for (int64_t ib = 0; ib < nb; ib++, b += kq_block_bytes(t)) {
        const lmq_block_q8_K *a[4];
        for (int k = 0; k < T; k++) a[k] = (const lmq_block_q8_K *)((const uint8_t *)act + (tk + k) * a_stride) + ib;
        int32x4_t is[4][4];
        float32x4_t dw[4];
        kq_isum(t, b, a, T, is);
        f16x16((const uint16_t *)b, dw); /* d[16] leads every one of the four layouts */
        for (int k = 0; k < T; k++) acc_fma(&c[k], dw, a[k]->d, is[k]);
        if (t == LMQ_TYPE_Q2_K || t == LMQ_TYPE_Q5_K) { /* dmin[16] follows it in these two */
            f16x16((const uint16_t *)b + LMQ_PANEL_ROWS, dw);
            for (int k = 0; k < T; k++) {
                int32x4_t mn[4];
                if (t == LMQ_TYPE_Q2_K)
                    q2_mins((const lmq_rpanelq2 *)b, a[k]->bsums, mn);
                else
                    mins_pairs(&((const lmq_rpanelq5 *)b)->m[0][0][0], psum + ((tk + k) * nb + ib) * 4, mn);
                acc_fms(&c[k], dw, a[k]->d, mn);
            }
        }
    }
    for (int k = 0; k < T; k++) acc_store(&c[k], y + (tk + k) * y_stride, nr);
}

ALWAYS void kq_gemm(lmq_type t, int64_t nb, const void *chunk, const void *act, int64_t a_stride,
                    const int32_t *psum, int nt, float *y, int64_t y_stride, int nr)
{
    int tk = 0;
    for (; tk + 4 <= nt; tk += 4) kq_pass(t, 4, nb, chunk, act, a_stride, psum, tk, y, y_stride, nr);
    for (; tk + 2 <= nt; tk += 2) kq_pass(t, 2, nb, chunk, act, a_stride, psum, tk, y, y_stride, nr);
    if (tk < nt) kq_pass(t, 1, nb, chunk, act, a_stride, psum, tk, y, y_stride, nr);
}

#define KQ_GEMM(name, type)                                                                                          \
    static void name(int64_t nb, const void *chunk, const void *act, int64_t a_stride, const int32_t *psum, int nt,  \
                     float *y, int64_t y_stride, int nr)                                                             \
    {                                                                                                                \
        kq_gemm(type, nb, chunk, act, a_stride, psum, nt, y, y_stride, nr);                                          \
    }
KQ_GEMM(rp_q2_K_neon, LMQ_TYPE_Q2_K)
KQ_GEMM(rp_q3_K_neon, LMQ_TYPE_Q3_K)
KQ_GEMM(rp_q5_K_neon, LMQ_TYPE_Q5_K)
KQ_GEMM(rp_q6_K_neon, LMQ_TYPE_Q6_K)

/* ================================================================
 * q5_0 (lmq_rpanel5; q8_0 activations)
 * ================================================================ */

/* Tokens tk..tk+T-1 (T = 1 or 2): per block, -16 x the activation sum plus
 * the codes' dot, then the reference's float step. */
ALWAYS void q50_pass(int T, int64_t nb, const void *chunk, const void *act, int64_t a_stride, const int32_t *asum,
                     int tk, float *y, int64_t y_stride, int nr)
{
    acc16 c[4];
    for (int k = 0; k < T; k++) acc_zero(&c[k]);
    const lmq_rpanel5 *p = chunk;
    for (int64_t ib = 0; ib < nb; ib++, p++) {
        const lmq_block_q8_0 *a[2];
        int8x16_t av[2][2];
        int32x4_t o[2], s[2][4];
        for (int k = 0; k < T; k++) {
            a[k] = (const lmq_block_q8_0 *)((const uint8_t *)act + (tk + k) * a_stride) + ib;
            av[k][0] = vld1q_s8(a[k]->qs);
            av[k][1] = vld1q_s8(a[k]->qs + 16);
            o[k] = vdupq_n_s32(-16 * asum[(tk + k) * nb + ib]);
        }
        for (int q = 0; q < 4; q++) {
            int8x16_t w[8];
            q5_codes(&p->q[0][0][0], q, w);
            for (int k = 0; k < T; k++) s[k][q] = dot16(dot16(o[k], w, av[k][0]), w + 4, av[k][1]);
        }
        kq_fence();
        float32x4_t dw[4];
        f16x16(p->d, dw);
        for (int k = 0; k < T; k++) acc_fma(&c[k], dw, h2f(a[k]->d), s[k]);
    }
    for (int k = 0; k < T; k++) acc_store(&c[k], y + (tk + k) * y_stride, nr);
}

static void rp_q5_0_neon(int64_t nb, const void *chunk, const void *act, int64_t a_stride, const int32_t *asum, int nt,
                         float *y, int64_t y_stride, int nr)
{
    int tk = 0;
    for (; tk + 2 <= nt; tk += 2) q50_pass(2, nb, chunk, act, a_stride, asum, tk, y, y_stride, nr);
    if (tk < nt) q50_pass(1, nb, chunk, act, a_stride, asum, tk, y, y_stride, nr);
}

/* ================================================================
 * Table
 * ================================================================ */

void lmq_kernels_fill_neon_rpanel(lmq_kernel_table *t)
{
    t->rpanel_gemm[LMQ_TYPE_Q2_K] = rp_q2_K_neon;
    t->rpanel_gemm[LMQ_TYPE_Q3_K] = rp_q3_K_neon;
    t->rpanel_gemm[LMQ_TYPE_Q5_K] = rp_q5_K_neon;
    t->rpanel_gemm[LMQ_TYPE_Q6_K] = rp_q6_K_neon;
    t->rpanel_gemm[LMQ_TYPE_Q5_0] = rp_q5_0_neon;
}
