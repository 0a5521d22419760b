/* panel_neon.c — the batched and repacked product kernels for aarch64:
 * sdot (dotprod, the "neon" level) and smmla / usmmla (the "i8mm" level),
 * on the ARM order of the 16-row interleave (lmq_panel_off, kernels.h).
 *
 * A 16-byte line holds 8 quants of two rows (r, r + 1): line (o, p) of a
 * 32-quant span = quants 8o..8o+7 of rows 2p and 2p + 1, o < 4, p < 8.
 *   - sdot (generation, and batches on CPUs without i8mm): the
 *     activation's 8 bytes of octet o in both halves of a register; one
 *     sdot of line (o, p) gives 4 lanes (row 2p: two halves, row 2p + 1:
 *     two halves); addp of the lanes of lines p = 2q and 2q + 1 gives the
 *     rows 4q..4q+3 as one vector.
 *   - smmla (batches with i8mm): the activations of two tokens zipped as a
 *     2 x 8 matrix; smmla of line (o, p) with it gives the 2 x 2 products
 *     [r t0, r t1, r+1 t0, r+1 t1]; uzp1/uzp2 of two row pairs gives rows
 *     4q..4q+3 of each token. One smmla does 32 multiply-adds, sdot 16.
 * The integer sums are exact and equal the reference's (the reference adds
 * offsets: -128 * sum for biased activations, -o * sum for unsigned codes,
 * here the quants are dotted as signed values instead, which gives the same
 * integer); the float operations are the reference's, in its order, lane
 * per row: acc = fma(dw * dy, float(isum), acc) block after block. So every
 * kernel here equals lmq_panel_gemm_ref / lmq_rpanel_gemm_ref bit for bit.
 *
 * The file is compiled with -march=armv8.2-a+dotprod+fp16; the i8mm
 * functions carry their own target attribute and are only reached through
 * the i8mm table (dispatch.c checks HWCAP2_I8MM). */
#include <arm_neon.h>
#include <stddef.h>

#include "arm_panel.h"
#include "kernels.h"

#define I8MM __attribute__((target("arch=armv8.2-a+dotprod+fp16+i8mm")))

/* ================================================================
 * Shared helpers
 * ================================================================ */

ALWAYS int8x16_t dup_lo(int8x16_t a)
{
    return vreinterpretq_s8_s64(vdupq_laneq_s64(vreinterpretq_s64_s8(a), 0));
}

ALWAYS int8x16_t dup_hi(int8x16_t a)
{
    return vreinterpretq_s8_s64(vdupq_laneq_s64(vreinterpretq_s64_s8(a), 1));
}

/* sdot operands of 32 activation quants: octet o in both halves. flip:
 * the quants are stored biased by +128 (panels). */
ALWAYS void act_dot(const int8_t *qs, bool flip, int8x16_t d[4])
{
    int8x16_t a0 = vld1q_s8(qs), a1 = vld1q_s8(qs + 16);
    if (flip) {
        a0 = veorq_s8(a0, vdupq_n_s8(-128));
        a1 = veorq_s8(a1, vdupq_n_s8(-128));
    }
    d[0] = dup_lo(a0);
    d[1] = dup_hi(a0);
    d[2] = dup_lo(a1);
    d[3] = dup_hi(a1);
}

/* smmla operands of 32 activation quants of two tokens: octet o of token 0
 * in the low half, of token 1 in the high half. */
ALWAYS void act_mm(const int8_t *qs0, const int8_t *qs1, bool flip, int8x16_t x[4])
{
    int8x16_t a[2][2];
    a[0][0] = vld1q_s8(qs0);
    a[0][1] = vld1q_s8(qs0 + 16);
    a[1][0] = vld1q_s8(qs1);
    a[1][1] = vld1q_s8(qs1 + 16);
    for (int t = 0; t < 2; t++)
        for (int h = 0; h < 2; h++)
            if (flip) a[t][h] = veorq_s8(a[t][h], vdupq_n_s8(-128));
    for (int h = 0; h < 2; h++) {
        const int64x2_t u = vreinterpretq_s64_s8(a[0][h]), v = vreinterpretq_s64_s8(a[1][h]);
        x[2 * h] = vreinterpretq_s8_s64(vzip1q_s64(u, v));
        x[2 * h + 1] = vreinterpretq_s8_s64(vzip2q_s64(u, v));
    }
}

/* Rows 4q..4q+3 from the sdot lanes of row pairs 2q, 2q + 1. */
ALWAYS int32x4_t rows_dot(int32x4_t e, int32x4_t f)
{
    return vpaddq_s32(e, f);
}

/* ================================================================
 * Signed lines (panels): s[q] = rows 4q..4q+3 . activations over n octets
 * starting at line block w (lines (o, p) at w + (o * 8 + p) * 16).
 * ================================================================ */

ALWAYS void lines_dot(const int8_t *w, int n, const int8x16_t *d, int32x4_t s[4])
{
    for (int q = 0; q < 4; q++) {
        int32x4_t e = vdupq_n_s32(0), f = e;
        for (int o = 0; o < n; o++) {
            e = vdotq_s32(e, vld1q_s8(w + (o * 8 + 2 * q) * 16), d[o]);
            f = vdotq_s32(f, vld1q_s8(w + (o * 8 + 2 * q + 1) * 16), d[o]);
        }
        s[q] = rows_dot(e, f);
    }
}

/* The same for two tokens (weights loaded once). */
ALWAYS void lines_dot2(const int8_t *w, int n, const int8x16_t *d0, const int8x16_t *d1, int32x4_t s0[4],
                       int32x4_t s1[4])
{
    for (int q = 0; q < 4; q++) {
        int32x4_t e0 = vdupq_n_s32(0), f0 = e0, e1 = e0, f1 = e0;
        for (int o = 0; o < n; o++) {
            const int8x16_t we = vld1q_s8(w + (o * 8 + 2 * q) * 16), wf = vld1q_s8(w + (o * 8 + 2 * q + 1) * 16);
            e0 = vdotq_s32(e0, we, d0[o]);
            f0 = vdotq_s32(f0, wf, d0[o]);
            e1 = vdotq_s32(e1, we, d1[o]);
            f1 = vdotq_s32(f1, wf, d1[o]);
        }
        s0[q] = rows_dot(e0, f0);
        s1[q] = rows_dot(e1, f1);
    }
}

/* ================================================================
 * lmq_panel32 (q4_0, q5_0, q8_0, iq4_nl; biased q8_0 activations)
 * ================================================================ */

static void panel32_gemm_neon(int64_t n_in, const void *panel, const void *act, int64_t a_stride, int nt, float *y,
                              int64_t y_stride, int nr)
{
    const int64_t nb = n_in / 32;
    int t = 0;
    for (; t + 2 <= nt; t += 2) {
        const lmq_block_q8_0 *a0 = (const void *)((const uint8_t *)act + t * a_stride);
        const lmq_block_q8_0 *a1 = (const void *)((const uint8_t *)act + (t + 1) * a_stride);
        acc16 c0, c1;
        acc_zero(&c0);
        acc_zero(&c1);
        const lmq_panel32 *p = panel;
        for (int64_t ib = 0; ib < nb; ib++, p++) {
            int8x16_t d0[4], d1[4];
            int32x4_t s0[4], s1[4];
            float32x4_t dw[4];
            act_dot(a0[ib].qs, true, d0);
            act_dot(a1[ib].qs, true, d1);
            lines_dot2((const int8_t *)p->q, 4, d0, d1, s0, s1);
            f32x16(p->d, dw);
            acc_fma(&c0, dw, h2f(a0[ib].d), s0);
            acc_fma(&c1, dw, h2f(a1[ib].d), s1);
        }
        acc_store(&c0, y + t * y_stride, nr);
        acc_store(&c1, y + (t + 1) * y_stride, nr);
    }
    for (; t < nt; t++) {
        const lmq_block_q8_0 *a0 = (const void *)((const uint8_t *)act + t * a_stride);
        acc16 c0;
        acc_zero(&c0);
        const lmq_panel32 *p = panel;
        for (int64_t ib = 0; ib < nb; ib++, p++) {
            int8x16_t d0[4];
            int32x4_t s0[4];
            float32x4_t dw[4];
            act_dot(a0[ib].qs, true, d0);
            lines_dot((const int8_t *)p->q, 4, d0, s0);
            f32x16(p->d, dw);
            acc_fma(&c0, dw, h2f(a0[ib].d), s0);
        }
        acc_store(&c0, y + t * y_stride, nr);
    }
}

/* ================================================================
 * lmq_panel256 (q2_K..q6_K, iq4_xs; biased q8_K activations)
 * ================================================================ */

/* The mins term of one token, rows 4q..4q+3: sum_g m[g][r][0..1] . bsums[2g..2g+1]. */
ALWAYS void panel256_mins(const lmq_panel256 *p, const int16_t *bsums, int32x4_t mn[4])
{
    for (int q = 0; q < 4; q++) {
        int32x4_t lo = vdupq_n_s32(0), hi = lo;
        for (int g = 0; g < 8; g++) {
            int32_t pair;
            memcpy(&pair, bsums + 2 * g, 4);
            mins_step(&lo, &hi, vld1q_s16(&p->m[g][4 * q][0]), pair);
        }
        mn[q] = vpaddq_s32(lo, hi);
    }
}

/* isum of one token over one super-block (sdot). */
ALWAYS void panel256_isum(const lmq_panel256 *p, const int8_t *qs, int sub, int32x4_t is[4])
{
    const int nso = sub / 8; /* octets per sub-block */
    for (int q = 0; q < 4; q++) is[q] = vdupq_n_s32(0);
    for (int k = 0; k < 8; k++) { /* 32-quant spans */
        int8x16_t d[4];
        act_dot(qs + 32 * k, true, d);
        for (int h = 0; h < 4 / nso; h++) {
            const int j = k * 4 / nso + h;
            int32x4_t s[4];
            lines_dot((const int8_t *)p->q + (4 * k + h * nso) * 128, nso, d + h * nso, s);
            for (int q = 0; q < 4; q++) is[q] = vmlaq_s32(is[q], s[q], vld1q_s32(&p->sc[j][4 * q]));
        }
    }
}

ALWAYS void panel256_gemm(int64_t n_in, const void *panel, const void *act, int64_t a_stride, int nt, float *y,
                          int64_t y_stride, int nr, int sub, bool has_min)
{
    const int64_t nb = n_in / 256;
    for (int t = 0; t < nt; t++) {
        const lmq_block_q8_K *a = (const void *)((const uint8_t *)act + t * a_stride);
        acc16 c;
        acc_zero(&c);
        const lmq_panel256 *p = panel;
        for (int64_t ib = 0; ib < nb; ib++, p++) {
            int32x4_t is[4];
            float32x4_t dw[4];
            panel256_isum(p, a[ib].qs, sub, is);
            f32x16(p->d, dw);
            acc_fma(&c, dw, a[ib].d, is);
            if (has_min) {
                int32x4_t mn[4];
                panel256_mins(p, a[ib].bsums, mn);
                f32x16(p->dmin, dw);
                acc_fms(&c, dw, a[ib].d, mn);
            }
        }
        acc_store(&c, y + t * y_stride, nr);
    }
}

#define PANEL256(name, sub, has_min)                                                                                 \
    static void name(int64_t n_in, const void *panel, const void *act, int64_t a_stride, int nt, float *y,          \
                     int64_t y_stride, int nr)                                                                       \
    {                                                                                                                \
        panel256_gemm(n_in, panel, act, a_stride, nt, y, y_stride, nr, sub, has_min);                                \
    }
PANEL256(panel_q2_K_neon, 16, true)
PANEL256(panel_q3_K_neon, 16, false)
PANEL256(panel_q4_K_neon, 32, true)
PANEL256(panel_q5_K_neon, 32, true)
PANEL256(panel_q6_K_neon, 16, false)
PANEL256(panel_iq4_xs_neon, 32, false)

/* ================================================================
 * Repacked q4_0 / iq4_nl / q8_0 / mxfp4 (lmq_rpanel4 / lmq_rpanel8 /
 * lmq_rpanelmx)
 * ================================================================ */

/* The 4 signed octet lines (o = 0..3) of row pair p of a repacked block,
 * as the quants' values in the dot: q8_0 q (code - 128), q4_0 the code
 * (the -8 goes into the activation sum), iq4_nl the grid value, MXFP4 the
 * doubled E2M1 value. */
ALWAYS void rp_lines(lmq_type t, const void *blk, int p, int8x16_t w[4])
{
    if (t == LMQ_TYPE_Q8_0) {
        const uint8_t *u = (const uint8_t *)((const lmq_rpanel8 *)blk)->u;
        for (int o = 0; o < 4; o++) w[o] = veorq_s8(vld1q_s8((const int8_t *)u + (o * 8 + p) * 16), vdupq_n_s8(-128));
        return;
    }
    const uint8_t *u = t == LMQ_TYPE_MXFP4 ? (const uint8_t *)((const lmq_rpanelmx *)blk)->u
                                           : (const uint8_t *)((const lmq_rpanel4 *)blk)->u;
    for (int o = 0; o < 2; o++) {
        const uint8x16_t v = vld1q_u8(u + (o * 8 + p) * 16);
        uint8x16_t lo = vandq_u8(v, vdupq_n_u8(0x0F)), hi = vshrq_n_u8(v, 4);
        if (t == LMQ_TYPE_IQ4_NL || t == LMQ_TYPE_MXFP4) {
            const int8x16_t grid = vld1q_s8(t == LMQ_TYPE_MXFP4 ? lmq_mxfp4_values : lmq_iq4nl_values);
            w[o] = vqtbl1q_s8(grid, lo);
            w[o + 2] = vqtbl1q_s8(grid, hi);
        } else {
            w[o] = vreinterpretq_s8_u8(lo);
            w[o + 2] = vreinterpretq_s8_u8(hi);
        }
    }
}

ALWAYS int64_t rp_block_bytes(lmq_type t)
{
    return t == LMQ_TYPE_Q8_0    ? (int64_t)sizeof(lmq_rpanel8)
           : t == LMQ_TYPE_MXFP4 ? (int64_t)sizeof(lmq_rpanelmx)
                                 : (int64_t)sizeof(lmq_rpanel4);
}

/* The 16 rows' weight scales: f16 (d[16] leads lmq_rpanel4 / 8) or, for
 * MXFP4, lmq_mxfp4_scale of the E8M0 bytes: max((e - 1) << 23, 0x00200000
 * << min(e, 1)) as float bits (2^-128 and 2^-127 for e = 0 and 1). */
ALWAYS void rp_scales(lmq_type t, const void *blk, float32x4_t dw[4])
{
    if (t != LMQ_TYPE_MXFP4) {
        f16x16((const uint16_t *)blk, dw);
        return;
    }
    const uint8x16_t e8 = vld1q_u8(((const lmq_rpanelmx *)blk)->e);
    const uint16x8_t e16[2] = {vmovl_u8(vget_low_u8(e8)), vmovl_u8(vget_high_u8(e8))};
    for (int q = 0; q < 4; q++) {
        const uint32x4_t v = vmovl_u16(q & 1 ? vget_high_u16(e16[q >> 1]) : vget_low_u16(e16[q >> 1]));
        const int32x4_t hi = vreinterpretq_s32_u32(vshlq_n_u32(vsubq_u32(v, vdupq_n_u32(1)), 23));
        const int32x4_t lo = vreinterpretq_s32_u32(
            vshlq_u32(vdupq_n_u32(0x00200000), vreinterpretq_s32_u32(vminq_u32(v, vdupq_n_u32(1)))));
        dw[q] = vreinterpretq_f32_s32(vmaxq_s32(hi, lo));
    }
}

/* -8 * sum(activations) for q4_0, 0 for the others (signed values). */
ALWAYS int32x4_t rp_offset(lmq_type t, int32_t asum)
{
    return vdupq_n_s32(t == LMQ_TYPE_Q4_0 ? -8 * asum : 0);
}

ALWAYS void rp_isum_dot(lmq_type t, const void *blk, const int8x16_t d[4], int32_t asum, int32x4_t s[4])
{
    for (int q = 0; q < 4; q++) {
        int8x16_t we[4], wf[4];
        rp_lines(t, blk, 2 * q, we);
        rp_lines(t, blk, 2 * q + 1, wf);
        int32x4_t e = vdupq_n_s32(0), f = e;
        for (int o = 0; o < 4; o++) {
            e = vdotq_s32(e, we[o], d[o]);
            f = vdotq_s32(f, wf[o], d[o]);
        }
        s[q] = vaddq_s32(rows_dot(e, f), rp_offset(t, asum));
    }
}

/* The same for two tokens: the weight lines unpacked once. */
ALWAYS void rp_isum_dot2(lmq_type t, const void *blk, const int8x16_t d0[4], const int8x16_t d1[4], int32_t asum0,
                         int32_t asum1, int32x4_t s0[4], int32x4_t s1[4])
{
    for (int q = 0; q < 4; q++) {
        int8x16_t we[4], wf[4];
        rp_lines(t, blk, 2 * q, we);
        rp_lines(t, blk, 2 * q + 1, wf);
        int32x4_t e0 = vdupq_n_s32(0), f0 = e0, e1 = e0, f1 = e0;
        for (int o = 0; o < 4; o++) {
            e0 = vdotq_s32(e0, we[o], d0[o]);
            f0 = vdotq_s32(f0, wf[o], d0[o]);
            e1 = vdotq_s32(e1, we[o], d1[o]);
            f1 = vdotq_s32(f1, wf[o], d1[o]);
        }
        s0[q] = vaddq_s32(rows_dot(e0, f0), rp_offset(t, asum0));
        s1[q] = vaddq_s32(rows_dot(e1, f1), rp_offset(t, asum1));
    }
}

ALWAYS void rp32_gemm_dot(lmq_type t, int64_t nb, const void *chunk, const void *act, int64_t a_stride,
                          const int32_t *asum, int t0, int nt, float *y, int64_t y_stride, int nr)
{
    int tk = t0;
    for (; tk + 2 <= nt; tk += 2) {
        const lmq_block_q8_0 *a0 = (const void *)((const uint8_t *)act + tk * a_stride);
        const lmq_block_q8_0 *a1 = (const void *)((const uint8_t *)act + (tk + 1) * a_stride);
        acc16 c0, c1;
        acc_zero(&c0);
        acc_zero(&c1);
        const uint8_t *blk = chunk;
        for (int64_t ib = 0; ib < nb; ib++, blk += rp_block_bytes(t)) {
            int8x16_t d0[4], d1[4];
            int32x4_t s0[4], s1[4];
            float32x4_t dw[4];
            act_dot(a0[ib].qs, false, d0);
            act_dot(a1[ib].qs, false, d1);
            rp_isum_dot2(t, blk, d0, d1, asum[tk * nb + ib], asum[(tk + 1) * nb + ib], s0, s1);
            rp_scales(t, blk, dw);
            acc_fma(&c0, dw, h2f(a0[ib].d), s0);
            acc_fma(&c1, dw, h2f(a1[ib].d), s1);
        }
        acc_store(&c0, y + tk * y_stride, nr);
        acc_store(&c1, y + (tk + 1) * y_stride, nr);
    }
    for (; tk < nt; tk++) {
        const lmq_block_q8_0 *a = (const void *)((const uint8_t *)act + tk * a_stride);
        acc16 c;
        acc_zero(&c);
        const uint8_t *blk = chunk;
        for (int64_t ib = 0; ib < nb; ib++, blk += rp_block_bytes(t)) {
            int8x16_t d[4];
            int32x4_t s[4];
            float32x4_t dw[4];
            act_dot(a[ib].qs, false, d);
            rp_isum_dot(t, blk, d, asum[tk * nb + ib], s);
            rp_scales(t, blk, dw);
            acc_fma(&c, dw, h2f(a[ib].d), s);
        }
        acc_store(&c, y + tk * y_stride, nr);
    }
}

#define RP32_DOT(name, type)                                                                                         \
    static void name(int64_t nb, const void *chunk, const void *act, int64_t a_stride, const int32_t *asum, int nt,  \
                     float *y, int64_t y_stride, int nr)                                                             \
    {                                                                                                                \
        rp32_gemm_dot(type, nb, chunk, act, a_stride, asum, 0, nt, y, y_stride, nr);                                 \
    }
RP32_DOT(rp_q4_0_neon, LMQ_TYPE_Q4_0)
RP32_DOT(rp_q8_0_neon, LMQ_TYPE_Q8_0)
RP32_DOT(rp_iq4_nl_neon, LMQ_TYPE_IQ4_NL)
RP32_DOT(rp_mxfp4_neon, LMQ_TYPE_MXFP4)

/* ---- i8mm: two tokens per pass ---------------------------------------- */

/* Rows 4q..4q+3 of token 0 and token 1 from the smmla results of row pairs
 * 2q ([r t0, r t1, r+1 t0, r+1 t1]) and 2q + 1. */
ALWAYS void rows_mm(int32x4_t e, int32x4_t f, int32x4_t *s0, int32x4_t *s1)
{
    *s0 = vuzp1q_s32(e, f);
    *s1 = vuzp2q_s32(e, f);
}

/* q8_0 at the i8mm level: the codes stay unsigned (usdot / usmmla, no eor),
 * each block starting from -128 * sum(activation quants) as in the
 * reference. */
ALWAYS uint8x16_t q8u_line(const void *blk, int o, int p)
{
    return vld1q_u8((const uint8_t *)((const lmq_rpanel8 *)blk)->u + (o * 8 + p) * 16);
}

I8MM ALWAYS void q8u_gemv(int64_t nb, const void *chunk, const void *act, int64_t a_stride, const int32_t *asum,
                          int t0, int nt, float *y, int64_t y_stride, int nr)
{
    for (int tk = t0; tk < nt; tk++) {
        const lmq_block_q8_0 *a = (const void *)((const uint8_t *)act + tk * a_stride);
        acc16 c;
        acc_zero(&c);
        const lmq_rpanel8 *blk = chunk;
        for (int64_t ib = 0; ib < nb; ib++, blk++) {
            int8x16_t d[4];
            int32x4_t s[4];
            float32x4_t dw[4];
            act_dot(a[ib].qs, false, d);
            const int32x4_t off = vdupq_n_s32(-128 * asum[tk * nb + ib]);
            for (int q = 0; q < 4; q++) {
                int32x4_t e = vdupq_n_s32(0), f = e;
                for (int o = 0; o < 4; o++) {
                    e = vusdotq_s32(e, q8u_line(blk, o, 2 * q), d[o]);
                    f = vusdotq_s32(f, q8u_line(blk, o, 2 * q + 1), d[o]);
                }
                s[q] = vaddq_s32(rows_dot(e, f), off);
            }
            f16x16(blk->d, dw);
            acc_fma(&c, dw, h2f(a[ib].d), s);
        }
        acc_store(&c, y + tk * y_stride, nr);
    }
}

I8MM ALWAYS void rp_isum_mm(lmq_type t, const void *blk, const int8x16_t x[4], int32_t asum0, int32_t asum1,
                            int32x4_t s0[4], int32x4_t s1[4])
{
    if (t == LMQ_TYPE_Q8_0) {
        const int32x4_t off0 = vdupq_n_s32(-128 * asum0), off1 = vdupq_n_s32(-128 * asum1);
        for (int q = 0; q < 4; q++) {
            int32x4_t e = vdupq_n_s32(0), f = e;
            for (int o = 0; o < 4; o++) {
                e = vusmmlaq_s32(e, q8u_line(blk, o, 2 * q), x[o]);
                f = vusmmlaq_s32(f, q8u_line(blk, o, 2 * q + 1), x[o]);
            }
            rows_mm(e, f, &s0[q], &s1[q]);
            s0[q] = vaddq_s32(s0[q], off0);
            s1[q] = vaddq_s32(s1[q], off1);
        }
        return;
    }
    for (int q = 0; q < 4; q++) {
        int8x16_t we[4], wf[4];
        rp_lines(t, blk, 2 * q, we);
        rp_lines(t, blk, 2 * q + 1, wf);
        int32x4_t e = vdupq_n_s32(0), f = e;
        for (int o = 0; o < 4; o++) {
            e = vmmlaq_s32(e, we[o], x[o]);
            f = vmmlaq_s32(f, wf[o], x[o]);
        }
        rows_mm(e, f, &s0[q], &s1[q]);
        s0[q] = vaddq_s32(s0[q], rp_offset(t, asum0));
        s1[q] = vaddq_s32(s1[q], rp_offset(t, asum1));
    }
}

I8MM ALWAYS void rp32_gemm_mm(lmq_type t, int64_t nb, const void *chunk, const void *act, int64_t a_stride,
                              const int32_t *asum, int nt, float *y, int64_t y_stride, int nr)
{
    int tk = 0;
    for (; tk + 2 <= nt; tk += 2) {
        const lmq_block_q8_0 *a0 = (const void *)((const uint8_t *)act + tk * a_stride);
        const lmq_block_q8_0 *a1 = (const void *)((const uint8_t *)act + (tk + 1) * a_stride);
        acc16 c0, c1;
        acc_zero(&c0);
        acc_zero(&c1);
        const uint8_t *blk = chunk;
        for (int64_t ib = 0; ib < nb; ib++, blk += rp_block_bytes(t)) {
            int8x16_t x[4];
            int32x4_t s0[4], s1[4];
            float32x4_t dw[4];
            act_mm(a0[ib].qs, a1[ib].qs, false, x);
            rp_isum_mm(t, blk, x, asum[tk * nb + ib], asum[(tk + 1) * nb + ib], s0, s1);
            rp_scales(t, blk, dw);
            acc_fma(&c0, dw, h2f(a0[ib].d), s0);
            acc_fma(&c1, dw, h2f(a1[ib].d), s1);
        }
        acc_store(&c0, y + tk * y_stride, nr);
        acc_store(&c1, y + (tk + 1) * y_stride, nr);
    }
    if (tk < nt && t == LMQ_TYPE_Q8_0)
        q8u_gemv(nb, chunk, act, a_stride, asum, tk, nt, y, y_stride, nr);
    else if (tk < nt)
        rp32_gemm_dot(t, nb, chunk, act, a_stride, asum, tk, nt, y, y_stride, nr);
}

#define RP32_MM(name, type)                                                                                          \
    I8MM static void name(int64_t nb, const void *chunk, const void *act, int64_t a_stride, const int32_t *asum,     \
                          int nt, float *y, int64_t y_stride, int nr)                                                \
    {                                                                                                                \
        rp32_gemm_mm(type, nb, chunk, act, a_stride, asum, nt, y, y_stride, nr);                                     \
    }
RP32_MM(rp_q4_0_i8mm, LMQ_TYPE_Q4_0)
RP32_MM(rp_q8_0_i8mm, LMQ_TYPE_Q8_0)
RP32_MM(rp_iq4_nl_i8mm, LMQ_TYPE_IQ4_NL)
RP32_MM(rp_mxfp4_i8mm, LMQ_TYPE_MXFP4)

/* ================================================================
 * Repacked q4_K / iq4_xs (lmq_rpanelk4 / lmq_rpanelx4; q8_K activations)
 * ================================================================ */

/* The fields both layouts have, for type t (a constant where inlined). */
#define K4_D(t, b) ((t) == LMQ_TYPE_IQ4_XS ? ((const lmq_rpanelx4 *)(b))->d : ((const lmq_rpanelk4 *)(b))->d)
#define K4_SC(t, b, j) ((t) == LMQ_TYPE_IQ4_XS ? ((const lmq_rpanelx4 *)(b))->sc[j] : ((const lmq_rpanelk4 *)(b))->sc[j])
#define K4_U(t, b, c)                                                                                                \
    ((t) == LMQ_TYPE_IQ4_XS ? (const uint8_t *)((const lmq_rpanelx4 *)(b))->u[c]                                    \
                            : (const uint8_t *)((const lmq_rpanelk4 *)(b))->u[c])
#define K4_SIZE(t) ((t) == LMQ_TYPE_IQ4_XS ? sizeof(lmq_rpanelx4) : sizeof(lmq_rpanelk4))

/* Row pair p of 64-quant chunk c as signed octet lines: lo[o] quants
 * 64c + 8o.. (sub-block 2c), hi[o] quants 64c + 32 + 8o.. (sub-block
 * 2c + 1); q4_K codes, iq4_xs grid values. */
ALWAYS void k4_lines(lmq_type t, const void *b, int c, int p, int8x16_t lo[4], int8x16_t hi[4])
{
    const uint8_t *u = K4_U(t, b, c);
    for (int o = 0; o < 4; o++) {
        const uint8x16_t v = vld1q_u8(u + (o * 8 + p) * 16);
        const uint8x16_t l = vandq_u8(v, vdupq_n_u8(0x0F)), h = vshrq_n_u8(v, 4);
        if (t == LMQ_TYPE_IQ4_XS) {
            const int8x16_t grid = vld1q_s8(lmq_iq4nl_values);
            lo[o] = vqtbl1q_s8(grid, l);
            hi[o] = vqtbl1q_s8(grid, h);
        } else {
            lo[o] = vreinterpretq_s8_u8(l);
            hi[o] = vreinterpretq_s8_u8(h);
        }
    }
}

ALWAYS void k4_isum_dot(lmq_type t, const void *b, const int8_t *qs, int32x4_t is[4])
{
    for (int q = 0; q < 4; q++) is[q] = vdupq_n_s32(0);
    for (int c = 0; c < 4; c++) {
        int8x16_t dl[4], dh[4];
        int32x4_t scl[4], sch[4];
        act_dot(qs + 64 * c, false, dl);
        act_dot(qs + 64 * c + 32, false, dh);
        widen16(K4_SC(t, b, 2 * c), scl);
        widen16(K4_SC(t, b, 2 * c + 1), sch);
        for (int q = 0; q < 4; q++) {
            int8x16_t el[4], eh[4], fl[4], fh[4];
            k4_lines(t, b, c, 2 * q, el, eh);
            k4_lines(t, b, c, 2 * q + 1, fl, fh);
            int32x4_t e0 = vdupq_n_s32(0), f0 = e0, e1 = e0, f1 = e0;
            for (int o = 0; o < 4; o++) {
                e0 = vdotq_s32(e0, el[o], dl[o]);
                f0 = vdotq_s32(f0, fl[o], dl[o]);
                e1 = vdotq_s32(e1, eh[o], dh[o]);
                f1 = vdotq_s32(f1, fh[o], dh[o]);
            }
            is[q] = vmlaq_s32(vmlaq_s32(is[q], rows_dot(e0, f0), scl[q]), rows_dot(e1, f1), sch[q]);
        }
    }
}

/* acc of one token and one super-block from its isum (and mins term). */
ALWAYS void k4_acc(lmq_type t, acc16 *c, const void *b, float dy, const int32x4_t is[4], const int32_t *ps)
{
    float32x4_t dw[4];
    f16x16(K4_D(t, b), dw);
    acc_fma(c, dw, dy, is);
    if (t == LMQ_TYPE_Q4_K) {
        const lmq_rpanelk4 *k = b;
        int32x4_t mn[4];
        mins_pairs(&k->m[0][0][0], ps, mn);
        f16x16(k->dmin, dw);
        acc_fms(c, dw, dy, mn);
    }
}

/* The same for two tokens: the weight lines unpacked once. */
ALWAYS void k4_isum_dot2(lmq_type t, const void *b, const int8_t *qs0, const int8_t *qs1, int32x4_t is0[4],
                         int32x4_t is1[4])
{
    for (int q = 0; q < 4; q++) is0[q] = is1[q] = vdupq_n_s32(0);
    for (int c = 0; c < 4; c++) {
        int8x16_t dl0[4], dh0[4], dl1[4], dh1[4];
        int32x4_t scl[4], sch[4];
        act_dot(qs0 + 64 * c, false, dl0);
        act_dot(qs0 + 64 * c + 32, false, dh0);
        act_dot(qs1 + 64 * c, false, dl1);
        act_dot(qs1 + 64 * c + 32, false, dh1);
        widen16(K4_SC(t, b, 2 * c), scl);
        widen16(K4_SC(t, b, 2 * c + 1), sch);
        for (int q = 0; q < 4; q++) {
            int8x16_t el[4], eh[4], fl[4], fh[4];
            k4_lines(t, b, c, 2 * q, el, eh);
            k4_lines(t, b, c, 2 * q + 1, fl, fh);
            int32x4_t a0 = vdupq_n_s32(0), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
            for (int o = 0; o < 4; o++) {
                a0 = vdotq_s32(a0, el[o], dl0[o]);
                a1 = vdotq_s32(a1, fl[o], dl0[o]);
                a2 = vdotq_s32(a2, eh[o], dh0[o]);
                a3 = vdotq_s32(a3, fh[o], dh0[o]);
                b0 = vdotq_s32(b0, el[o], dl1[o]);
                b1 = vdotq_s32(b1, fl[o], dl1[o]);
                b2 = vdotq_s32(b2, eh[o], dh1[o]);
                b3 = vdotq_s32(b3, fh[o], dh1[o]);
            }
            is0[q] = vmlaq_s32(vmlaq_s32(is0[q], rows_dot(a0, a1), scl[q]), rows_dot(a2, a3), sch[q]);
            is1[q] = vmlaq_s32(vmlaq_s32(is1[q], rows_dot(b0, b1), scl[q]), rows_dot(b2, b3), sch[q]);
        }
    }
}

ALWAYS void k4_gemm_dot(lmq_type t, int64_t nb, const void *chunk, const void *act, int64_t a_stride,
                        const int32_t *psum, int t0, int nt, float *y, int64_t y_stride, int nr)
{
    int tk = t0;
    for (; tk + 2 <= nt; tk += 2) {
        const lmq_block_q8_K *a0 = (const void *)((const uint8_t *)act + tk * a_stride);
        const lmq_block_q8_K *a1 = (const void *)((const uint8_t *)act + (tk + 1) * a_stride);
        acc16 c0, c1;
        acc_zero(&c0);
        acc_zero(&c1);
        const uint8_t *b = chunk;
        for (int64_t ib = 0; ib < nb; ib++, b += K4_SIZE(t)) {
            int32x4_t is0[4], is1[4];
            k4_isum_dot2(t, b, a0[ib].qs, a1[ib].qs, is0, is1);
            k4_acc(t, &c0, b, a0[ib].d, is0, psum + (tk * nb + ib) * 4);
            k4_acc(t, &c1, b, a1[ib].d, is1, psum + ((tk + 1) * nb + ib) * 4);
        }
        acc_store(&c0, y + tk * y_stride, nr);
        acc_store(&c1, y + (tk + 1) * y_stride, nr);
    }
    for (; tk < nt; tk++) {
        const lmq_block_q8_K *a = (const void *)((const uint8_t *)act + tk * a_stride);
        acc16 c;
        acc_zero(&c);
        const uint8_t *b = chunk;
        for (int64_t ib = 0; ib < nb; ib++, b += K4_SIZE(t)) {
            int32x4_t is[4];
            k4_isum_dot(t, b, a[ib].qs, is);
            k4_acc(t, &c, b, a[ib].d, is, psum + (tk * nb + ib) * 4);
        }
        acc_store(&c, y + tk * y_stride, nr);
    }
}

I8MM ALWAYS void k4_isum_mm(lmq_type t, const void *b, const int8_t *qs0, const int8_t *qs1, int32x4_t is0[4],
                            int32x4_t is1[4])
{
    for (int q = 0; q < 4; q++) is0[q] = is1[q] = vdupq_n_s32(0);
    for (int c = 0; c < 4; c++) {
        int8x16_t xl[4], xh[4];
        int32x4_t scl[4], sch[4];
        act_mm(qs0 + 64 * c, qs1 + 64 * c, false, xl);
        act_mm(qs0 + 64 * c + 32, qs1 + 64 * c + 32, false, xh);
        widen16(K4_SC(t, b, 2 * c), scl);
        widen16(K4_SC(t, b, 2 * c + 1), sch);
        for (int q = 0; q < 4; q++) {
            int8x16_t el[4], eh[4], fl[4], fh[4];
            k4_lines(t, b, c, 2 * q, el, eh);
            k4_lines(t, b, c, 2 * q + 1, fl, fh);
            int32x4_t e0 = vdupq_n_s32(0), f0 = e0, e1 = e0, f1 = e0;
            for (int o = 0; o < 4; o++) {
                e0 = vmmlaq_s32(e0, el[o], xl[o]);
                f0 = vmmlaq_s32(f0, fl[o], xl[o]);
                e1 = vmmlaq_s32(e1, eh[o], xh[o]);
                f1 = vmmlaq_s32(f1, fh[o], xh[o]);
            }
            int32x4_t l0, l1, h0, h1;
            rows_mm(e0, f0, &l0, &l1);
            rows_mm(e1, f1, &h0, &h1);
            is0[q] = vmlaq_s32(vmlaq_s32(is0[q], l0, scl[q]), h0, sch[q]);
            is1[q] = vmlaq_s32(vmlaq_s32(is1[q], l1, scl[q]), h1, sch[q]);
        }
    }
}

I8MM ALWAYS void k4_gemm_mm(lmq_type t, int64_t nb, const void *chunk, const void *act, int64_t a_stride,
                            const int32_t *psum, int nt, float *y, int64_t y_stride, int nr)
{
    int tk = 0;
    for (; tk + 2 <= nt; tk += 2) {
        const lmq_block_q8_K *a0 = (const void *)((const uint8_t *)act + tk * a_stride);
        const lmq_block_q8_K *a1 = (const void *)((const uint8_t *)act + (tk + 1) * a_stride);
        acc16 c0, c1;
        acc_zero(&c0);
        acc_zero(&c1);
        const uint8_t *b = chunk;
        for (int64_t ib = 0; ib < nb; ib++, b += K4_SIZE(t)) {
            int32x4_t is0[4], is1[4];
            k4_isum_mm(t, b, a0[ib].qs, a1[ib].qs, is0, is1);
            k4_acc(t, &c0, b, a0[ib].d, is0, psum + (tk * nb + ib) * 4);
            k4_acc(t, &c1, b, a1[ib].d, is1, psum + ((tk + 1) * nb + ib) * 4);
        }
        acc_store(&c0, y + tk * y_stride, nr);
        acc_store(&c1, y + (tk + 1) * y_stride, nr);
    }
    if (tk < nt) k4_gemm_dot(t, nb, chunk, act, a_stride, psum, tk, nt, y, y_stride, nr);
}

#define K4_GEMM(name, type, attr, impl, ...)                                                                         \
    attr static void name(int64_t nb, const void *chunk, const void *act, int64_t a_stride, const int32_t *psum,     \
                          int nt, float *y, int64_t y_stride, int nr)                                                \
    {                                                                                                                \
        impl(type, nb, chunk, act, a_stride, psum, __VA_ARGS__ nt, y, y_stride, nr);                                 \
    }
K4_GEMM(rp_q4_K_neon, LMQ_TYPE_Q4_K, , k4_gemm_dot, 0, )
K4_GEMM(rp_iq4_xs_neon, LMQ_TYPE_IQ4_XS, , k4_gemm_dot, 0, )
K4_GEMM(rp_q4_K_i8mm, LMQ_TYPE_Q4_K, I8MM, k4_gemm_mm, )
K4_GEMM(rp_iq4_xs_i8mm, LMQ_TYPE_IQ4_XS, I8MM, k4_gemm_mm, )

/* ================================================================
 * Panels with smmla (two tokens per pass; an odd last token takes sdot)
 * ================================================================ */

I8MM ALWAYS void lines_mm(const int8_t *w, int n, const int8x16_t *x, int32x4_t s0[4], int32x4_t s1[4])
{
    for (int q = 0; q < 4; q++) {
        int32x4_t e = vdupq_n_s32(0), f = e;
        for (int o = 0; o < n; o++) {
            e = vmmlaq_s32(e, vld1q_s8(w + (o * 8 + 2 * q) * 16), x[o]);
            f = vmmlaq_s32(f, vld1q_s8(w + (o * 8 + 2 * q + 1) * 16), x[o]);
        }
        rows_mm(e, f, &s0[q], &s1[q]);
    }
}

I8MM static void panel32_gemm_i8mm(int64_t n_in, const void *panel, const void *act, int64_t a_stride, int nt,
                                   float *y, int64_t y_stride, int nr)
{
    const int64_t nb = n_in / 32;
    int t = 0;
    for (; t + 2 <= nt; t += 2) {
        const lmq_block_q8_0 *a0 = (const void *)((const uint8_t *)act + t * a_stride);
        const lmq_block_q8_0 *a1 = (const void *)((const uint8_t *)act + (t + 1) * a_stride);
        acc16 c0, c1;
        acc_zero(&c0);
        acc_zero(&c1);
        const lmq_panel32 *p = panel;
        for (int64_t ib = 0; ib < nb; ib++, p++) {
            int8x16_t x[4];
            int32x4_t s0[4], s1[4];
            float32x4_t dw[4];
            act_mm(a0[ib].qs, a1[ib].qs, true, x);
            lines_mm((const int8_t *)p->q, 4, x, s0, s1);
            f32x16(p->d, dw);
            acc_fma(&c0, dw, h2f(a0[ib].d), s0);
            acc_fma(&c1, dw, h2f(a1[ib].d), s1);
        }
        acc_store(&c0, y + t * y_stride, nr);
        acc_store(&c1, y + (t + 1) * y_stride, nr);
    }
    if (t < nt) panel32_gemm_neon(n_in, panel, (const uint8_t *)act + t * a_stride, a_stride, nt - t, y + t * y_stride,
                                  y_stride, nr);
}

I8MM ALWAYS void panel256_isum_mm(const lmq_panel256 *p, const int8_t *qs0, const int8_t *qs1, int sub,
                                  int32x4_t is0[4], int32x4_t is1[4])
{
    const int nso = sub / 8;
    for (int q = 0; q < 4; q++) is0[q] = is1[q] = vdupq_n_s32(0);
    for (int k = 0; k < 8; k++) {
        int8x16_t x[4];
        act_mm(qs0 + 32 * k, qs1 + 32 * k, true, x);
        for (int h = 0; h < 4 / nso; h++) {
            const int j = k * 4 / nso + h;
            int32x4_t s0[4], s1[4];
            lines_mm((const int8_t *)p->q + (4 * k + h * nso) * 128, nso, x + h * nso, s0, s1);
            for (int q = 0; q < 4; q++) {
                const int32x4_t sc = vld1q_s32(&p->sc[j][4 * q]);
                is0[q] = vmlaq_s32(is0[q], s0[q], sc);
                is1[q] = vmlaq_s32(is1[q], s1[q], sc);
            }
        }
    }
}

I8MM ALWAYS void panel256_gemm_mm(int64_t n_in, const void *panel, const void *act, int64_t a_stride, int nt,
                                  float *y, int64_t y_stride, int nr, int sub, bool has_min)
{
    const int64_t nb = n_in / 256;
    int t = 0;
    for (; t + 2 <= nt; t += 2) {
        const lmq_block_q8_K *a0 = (const void *)((const uint8_t *)act + t * a_stride);
        const lmq_block_q8_K *a1 = (const void *)((const uint8_t *)act + (t + 1) * a_stride);
        acc16 c0, c1;
        acc_zero(&c0);
        acc_zero(&c1);
        const lmq_panel256 *p = panel;
        for (int64_t ib = 0; ib < nb; ib++, p++) {
            int32x4_t is0[4], is1[4];
            float32x4_t dw[4];
            panel256_isum_mm(p, a0[ib].qs, a1[ib].qs, sub, is0, is1);
            f32x16(p->d, dw);
            acc_fma(&c0, dw, a0[ib].d, is0);
            acc_fma(&c1, dw, a1[ib].d, is1);
            if (has_min) {
                int32x4_t mn[4];
                f32x16(p->dmin, dw);
                panel256_mins(p, a0[ib].bsums, mn);
                acc_fms(&c0, dw, a0[ib].d, mn);
                panel256_mins(p, a1[ib].bsums, mn);
                acc_fms(&c1, dw, a1[ib].d, mn);
            }
        }
        acc_store(&c0, y + t * y_stride, nr);
        acc_store(&c1, y + (t + 1) * y_stride, nr);
    }
    if (t < nt)
        panel256_gemm(n_in, panel, (const uint8_t *)act + t * a_stride, a_stride, nt - t,
                      y + t * y_stride, y_stride, nr, sub, has_min);
}

#define PANEL256_MM(name, sub, has_min)                                                                              \
    I8MM static void name(int64_t n_in, const void *panel, const void *act, int64_t a_stride, int nt, float *y,     \
                          int64_t y_stride, int nr)                                                                  \
    {                                                                                                                \
        panel256_gemm_mm(n_in, panel, act, a_stride, nt, y, y_stride, nr, sub, has_min);                             \
    }
PANEL256_MM(panel_q2_K_i8mm, 16, true)
PANEL256_MM(panel_q3_K_i8mm, 16, false)
PANEL256_MM(panel_q4_K_i8mm, 32, true)
PANEL256_MM(panel_q5_K_i8mm, 32, true)
PANEL256_MM(panel_q6_K_i8mm, 16, false)
PANEL256_MM(panel_iq4_xs_i8mm, 32, false)

/* ================================================================
 * Tables
 * ================================================================ */

void lmq_kernels_fill_neon_panel(lmq_kernel_table *t)
{
    t->panel_gemm[LMQ_TYPE_Q4_0] = panel32_gemm_neon;
    t->panel_gemm[LMQ_TYPE_Q5_0] = panel32_gemm_neon;
    t->panel_gemm[LMQ_TYPE_Q8_0] = panel32_gemm_neon;
    t->panel_gemm[LMQ_TYPE_IQ4_NL] = panel32_gemm_neon;
    t->panel_gemm[LMQ_TYPE_MXFP4] = panel32_gemm_neon;
    t->panel_gemm[LMQ_TYPE_Q2_K] = panel_q2_K_neon;
    t->panel_gemm[LMQ_TYPE_Q3_K] = panel_q3_K_neon;
    t->panel_gemm[LMQ_TYPE_Q4_K] = panel_q4_K_neon;
    t->panel_gemm[LMQ_TYPE_Q5_K] = panel_q5_K_neon;
    t->panel_gemm[LMQ_TYPE_Q6_K] = panel_q6_K_neon;
    t->panel_gemm[LMQ_TYPE_IQ4_XS] = panel_iq4_xs_neon;
    t->rpanel_gemm[LMQ_TYPE_Q4_0] = rp_q4_0_neon;
    t->rpanel_gemm[LMQ_TYPE_Q8_0] = rp_q8_0_neon;
    t->rpanel_gemm[LMQ_TYPE_IQ4_NL] = rp_iq4_nl_neon;
    t->rpanel_gemm[LMQ_TYPE_MXFP4] = rp_mxfp4_neon;
    t->rpanel_gemm[LMQ_TYPE_Q4_K] = rp_q4_K_neon;
    t->rpanel_gemm[LMQ_TYPE_IQ4_XS] = rp_iq4_xs_neon;
}

void lmq_kernels_fill_i8mm(lmq_kernel_table *t)
{
    t->isa = LMQ_ISA_I8MM;
    t->rpanel_gemm[LMQ_TYPE_Q4_0] = rp_q4_0_i8mm;
    t->rpanel_gemm[LMQ_TYPE_Q8_0] = rp_q8_0_i8mm;
    t->rpanel_gemm[LMQ_TYPE_IQ4_NL] = rp_iq4_nl_i8mm;
    t->rpanel_gemm[LMQ_TYPE_MXFP4] = rp_mxfp4_i8mm;
    t->rpanel_gemm[LMQ_TYPE_Q4_K] = rp_q4_K_i8mm;
    t->rpanel_gemm[LMQ_TYPE_IQ4_XS] = rp_iq4_xs_i8mm;
    t->panel_gemm[LMQ_TYPE_Q4_0] = panel32_gemm_i8mm;
    t->panel_gemm[LMQ_TYPE_Q5_0] = panel32_gemm_i8mm;
    t->panel_gemm[LMQ_TYPE_Q8_0] = panel32_gemm_i8mm;
    t->panel_gemm[LMQ_TYPE_IQ4_NL] = panel32_gemm_i8mm;
    t->panel_gemm[LMQ_TYPE_MXFP4] = panel32_gemm_i8mm;
    t->panel_gemm[LMQ_TYPE_Q2_K] = panel_q2_K_i8mm;
    t->panel_gemm[LMQ_TYPE_Q3_K] = panel_q3_K_i8mm;
    t->panel_gemm[LMQ_TYPE_Q4_K] = panel_q4_K_i8mm;
    t->panel_gemm[LMQ_TYPE_Q5_K] = panel_q5_K_i8mm;
    t->panel_gemm[LMQ_TYPE_Q6_K] = panel_q6_K_i8mm;
    t->panel_gemm[LMQ_TYPE_IQ4_XS] = panel_iq4_xs_i8mm;
}
