/* arm_panel.h — the 16-row helpers shared by the aarch64 product kernels
 * (panel_neon.c, rpanel_neon.c): a token's float state of 16 rows as 4
 * vectors of 4 rows, updated with the reference's float operations, and the
 * scale and mins unpacking of the repacked super-blocks. Compiled with
 * -march=armv8.2-a+dotprod+fp16. */
#ifndef LMQ_ARM_PANEL_H
#define LMQ_ARM_PANEL_H

#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#define ALWAYS static inline __attribute__((always_inline))

/* 16-row float state of one token: 4 vectors of 4 rows. */
typedef struct acc16 {
    float32x4_t v[4];
} acc16;

ALWAYS void acc_zero(acc16 *a)
{
    for (int q = 0; q < 4; q++) a->v[q] = vdupq_n_f32(0);
}

/* acc = fma(dw * dy, float(isum), acc), 16 rows. */
ALWAYS void acc_fma(acc16 *a, const float32x4_t dw[4], float dy, const int32x4_t s[4])
{
    for (int q = 0; q < 4; q++) a->v[q] = vfmaq_f32(a->v[q], vmulq_n_f32(dw[q], dy), vcvtq_f32_s32(s[q]));
}

/* acc = fma(-(dm * dy), float(m), acc), 16 rows. */
ALWAYS void acc_fms(acc16 *a, const float32x4_t dm[4], float dy, const int32x4_t m[4])
{
    for (int q = 0; q < 4; q++) a->v[q] = vfmsq_f32(a->v[q], vmulq_n_f32(dm[q], dy), vcvtq_f32_s32(m[q]));
}

ALWAYS void acc_store(const acc16 *a, float *y, int nr)
{
    float tmp[16];
    for (int q = 0; q < 4; q++) vst1q_f32(tmp + 4 * q, a->v[q]);
    memcpy(y, tmp, (size_t)nr * sizeof(float));
}

ALWAYS void f16x16(const uint16_t *h, float32x4_t d[4])
{
    for (int q = 0; q < 4; q++) d[q] = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h + 4 * q)));
}

ALWAYS void f32x16(const float *f, float32x4_t d[4])
{
    for (int q = 0; q < 4; q++) d[q] = vld1q_f32(f + 4 * q);
}

static inline float h2f(uint16_t h)
{
    __fp16 f;
    memcpy(&f, &h, 2);
    return (float)f;
}

/* 16 int8 values (a register) as 4 int32 vectors. */
ALWAYS void widen_s8(int8x16_t b, int32x4_t out[4])
{
    const int16x8_t l = vmovl_s8(vget_low_s8(b)), h = vmovl_high_s8(b);
    out[0] = vmovl_s16(vget_low_s16(l));
    out[1] = vmovl_high_s16(l);
    out[2] = vmovl_s16(vget_low_s16(h));
    out[3] = vmovl_high_s16(h);
}

/* 16 int8 values in memory as 4 int32 vectors. */
ALWAYS void widen16(const int8_t *v, int32x4_t out[4])
{
    widen_s8(vld1q_s8(v), out);
}

/* One step of a mins term: lo, hi += m x the two int16 sums packed in
 * pair, m holding rows r..r+3 x 2 sub-blocks (lo rows r, r + 1; vpaddq of
 * lo and hi at the end gives the 4 rows). */
ALWAYS void mins_step(int32x4_t *lo, int32x4_t *hi, int16x8_t m, int32_t pair)
{
    const int16x8_t pat = vreinterpretq_s16_s32(vdupq_n_s32(pair));
    *lo = vmlal_s16(*lo, vget_low_s16(m), vget_low_s16(pat));
    *hi = vmlal_high_s16(*hi, m, pat);
}

/* The mins term of one token over a super-block of 8 sub-blocks of 32
 * (q4_K, q5_K): sum_c m[c][r][0..1] . (pair sums of chunk c), m as
 * lmq_rpanelk4's m[4][16][2]. */
ALWAYS void mins_pairs(const int8_t *m, const int32_t *ps, int32x4_t mn[4])
{
    for (int q = 0; q < 4; q++) {
        int32x4_t lo = vdupq_n_s32(0), hi = lo;
        for (int c = 0; c < 4; c++) mins_step(&lo, &hi, vmovl_s8(vld1_s8(m + (c * 16 + 4 * q) * 2)), ps[c]);
        mn[q] = vpaddq_s32(lo, hi);
    }
}

#endif /* LMQ_ARM_PANEL_H */
