/* NEON kernels for aarch64 (ASIMD + dotprod + fp16), built with
 * -march=armv8.2-a+dotprod+fp16.
 *
 * sdot (vdotq_s32) multiplies signed bytes, so unlike x86 no sign tricks
 * are needed: every quant is turned into its signed value and dotted with
 * the q8 activations; integer parts are exact as in the reference kernels.
 * The activation quantizers round with fcvtas (ties away, as roundf) for
 * q8_0/q8_1 and fcvtns (ties even, as ggml's nearest_int) for q8_K, and so
 * produce the reference bytes. */
#include <arm_neon.h>
#include <math.h>

#include "kernels.h"

static inline float h2f(uint16_t h)
{
    __fp16 f;
    memcpy(&f, &h, 2);
    return (float)f;
}

static inline uint16_t f2h(float x)
{
    __fp16 f = (__fp16)x; /* round to nearest even */
    uint16_t h;
    memcpy(&h, &f, 2);
    return h;
}

static inline float32x4_t load_f16x4(const uint16_t *p)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}

static inline float32x4_t load_bf16x4(const uint16_t *p)
{
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}

/* sum of 32 signed byte products, as 4 int32 lanes */
static inline int32x4_t dot32(int8x16_t a0, int8x16_t a1, const int8_t *y)
{
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), a0, vld1q_s8(y)), a1, vld1q_s8(y + 16));
}

/* 16 bytes, 0xFF in lane i when bit i of the 16-bit value h is set. */
static inline uint8x16_t bits16(uint32_t h)
{
    static const uint8_t sel[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t b = vcombine_u8(vdup_n_u8((uint8_t)(h & 0xFF)), vdup_n_u8((uint8_t)((h >> 8) & 0xFF)));
    return vtstq_u8(b, vld1q_u8(sel));
}

static inline uint32_t le32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* ================================================================
 * Float weights
 * ================================================================ */

static float dot_f32_neon(const float *a, const float *b, int64_t n)
{
    float32x4_t s0 = vdupq_n_f32(0), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
        s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
        s2 = vfmaq_f32(s2, vld1q_f32(a + i + 8), vld1q_f32(b + i + 8));
        s3 = vfmaq_f32(s3, vld1q_f32(a + i + 12), vld1q_f32(b + i + 12));
    }
    for (; i + 4 <= n; i += 4) s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* The 16-bit weight rows' dots: weights f16 or bf16 (WB), activations
 * f32, f16 or bf16 (AK: 0, 1, 2): four 4-lane sums over 16 at a time, one
 * over the last multiples of 4, the lanes reduced, then the tail. */
static inline __attribute__((always_inline)) float32x4_t load_act4(const int AK, const void *b, int64_t i)
{
    return AK == 0 ? vld1q_f32((const float *)b + i)
           : AK == 1 ? load_f16x4((const uint16_t *)b + i)
                     : load_bf16x4((const uint16_t *)b + i);
}

static inline __attribute__((always_inline)) float dot16_neon(const bool WB, const int AK, const uint16_t *a,
                                                              const void *b, int64_t n)
{
    float32x4_t s0 = vdupq_n_f32(0), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
#define NW(j) (WB ? load_bf16x4(a + (j)) : load_f16x4(a + (j)))
    for (; i + 16 <= n; i += 16) {
        s0 = vfmaq_f32(s0, NW(i), load_act4(AK, b, i));
        s1 = vfmaq_f32(s1, NW(i + 4), load_act4(AK, b, i + 4));
        s2 = vfmaq_f32(s2, NW(i + 8), load_act4(AK, b, i + 8));
        s3 = vfmaq_f32(s3, NW(i + 12), load_act4(AK, b, i + 12));
    }
    for (; i + 4 <= n; i += 4) s0 = vfmaq_f32(s0, NW(i), load_act4(AK, b, i));
#undef NW
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
    for (; i < n; i++) {
        const float w = WB ? lmq_bf16_to_fp32(a[i]) : h2f(a[i]);
        const float x = AK == 0   ? ((const float *)b)[i]
                        : AK == 1 ? h2f(((const uint16_t *)b)[i])
                                  : lmq_bf16_to_fp32(((const uint16_t *)b)[i]);
        s += w * x;
    }
    return s;
}

/* f16 weights against f32 (the attention's f16 keys) or f16 activations,
 * bf16 weights against bf16 activations (matmul.c's ktraits). */
static float dot_f16_f32_neon(const uint16_t *a, const float *b, int64_t n)
{
    return dot16_neon(false, 0, a, b, n);
}

static float dot_f16_f16_neon(const uint16_t *a, const uint16_t *b, int64_t n)
{
    return dot16_neon(false, 1, a, b, n);
}

static float dot_bf16_bf16_neon(const uint16_t *a, const uint16_t *b, int64_t n)
{
    return dot16_neon(true, 2, a, b, n);
}

static void vec_dot_f32_neon(int64_t n, float *s, const void *w, const void *a)
{
    *s = dot_f32_neon(w, a, n);
}

static void vec_dot_f16_neon(int64_t n, float *s, const void *w, const void *a)
{
    *s = dot_f16_f16_neon(w, a, n);
}

static void vec_dot_bf16_neon(int64_t n, float *s, const void *w, const void *a)
{
    *s = dot_bf16_bf16_neon(w, a, n);
}

/* 8 fp8 codes as binary16 bits (e4m3: value * 2^-8, see x86_dots.h). */
static inline float16x8_t f8_to_f16(uint8x8_t c, int e4m3)
{
    const uint16x8_t w = vmovl_u8(c);
    uint16x8_t h;
    if (e4m3)
        h = vorrq_u16(vshlq_n_u16(vandq_u16(w, vdupq_n_u16(0x80)), 8), vshlq_n_u16(vandq_u16(w, vdupq_n_u16(0x7F)), 7));
    else
        h = vshlq_n_u16(w, 8);
    return vreinterpretq_f16_u16(h);
}

static void vec_dot_f8(int64_t n, float *s, const void *vw, const float *a, int e4m3)
{
    const lmq_block_f8 *w = vw;
    float32x4_t acc = vdupq_n_f32(0);
    const float adj = e4m3 ? 256.0f : 1.0f;
    for (int64_t i = 0; i < n / LMQ_QK_F8; i++, a += LMQ_QK_F8) {
        float32x4_t b = vdupq_n_f32(0);
        for (int k = 0; k < 4; k++) {
            const float16x8_t h = f8_to_f16(vld1_u8(w[i].qs + 8 * k), e4m3);
            b = vfmaq_f32(b, vcvt_f32_f16(vget_low_f16(h)), vld1q_f32(a + 8 * k));
            b = vfmaq_f32(b, vcvt_high_f32_f16(h), vld1q_f32(a + 8 * k + 4));
        }
        acc = vfmaq_n_f32(acc, b, lmq_e8m0_to_fp32(w[i].e) * adj);
    }
    *s = vaddvq_f32(acc);
}

static void vec_dot_f8_e4m3_neon(int64_t n, float *s, const void *w, const void *a)
{
    vec_dot_f8(n, s, w, a, 1);
}

static void vec_dot_f8_e5m2_neon(int64_t n, float *s, const void *w, const void *a)
{
    vec_dot_f8(n, s, w, a, 0);
}

/* ================================================================
 * 32-element blocks
 * ================================================================ */

static void vec_dot_q8_0_neon(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q8_0 *x = vw, *y = va;
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / LMQ_QK8_0; i++) {
        const int32x4_t p = dot32(vld1q_s8(x[i].qs), vld1q_s8(x[i].qs + 16), y[i].qs);
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(p), h2f(x[i].d) * h2f(y[i].d));
    }
    *s = vaddvq_f32(acc);
}

static void vec_dot_q4_0_neon(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q4_0 *x = vw;
    const lmq_block_q8_0 *y = va;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    const int8x16_t s8 = vdupq_n_s8(8);
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / LMQ_QK4_0; i++) {
        const uint8x16_t v = vld1q_u8(x[i].qs);
        const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, m4)), s8);
        const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), s8);
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(dot32(lo, hi, y[i].qs)), h2f(x[i].d) * h2f(y[i].d));
    }
    *s = vaddvq_f32(acc);
}

static void vec_dot_q4_1_neon(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q4_1 *x = vw;
    const lmq_block_q8_1 *y = va;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float32x4_t acc = vdupq_n_f32(0);
    float summs = 0;
    for (int64_t i = 0; i < n / LMQ_QK4_1; i++) {
        const uint8x16_t v = vld1q_u8(x[i].qs);
        const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(v, m4)), hi = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(dot32(lo, hi, y[i].qs)), h2f(x[i].d) * h2f(y[i].d));
        summs += h2f(x[i].m) * h2f(y[i].s);
    }
    *s = vaddvq_f32(acc) + summs;
}

/* q5 quants 0..31 (nibble | 5th bit << 4) of elements 0..15 and 16..31. */
static inline void q5_bytes(const uint8_t *qs, const uint8_t *qh4, uint8x16_t *lo, uint8x16_t *hi)
{
    const uint32_t qh = le32(qh4);
    const uint8x16_t v = vld1q_u8(qs), b16 = vdupq_n_u8(0x10);
    *lo = vorrq_u8(vandq_u8(v, vdupq_n_u8(0x0F)), vandq_u8(bits16(qh), b16));
    *hi = vorrq_u8(vshrq_n_u8(v, 4), vandq_u8(bits16(qh >> 16), b16));
}

static void vec_dot_q5_0_neon(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q5_0 *x = vw;
    const lmq_block_q8_0 *y = va;
    const int8x16_t s16 = vdupq_n_s8(16);
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / LMQ_QK5_0; i++) {
        uint8x16_t lo, hi;
        q5_bytes(x[i].qs, x[i].qh, &lo, &hi);
        const int32x4_t p = dot32(vsubq_s8(vreinterpretq_s8_u8(lo), s16), vsubq_s8(vreinterpretq_s8_u8(hi), s16), y[i].qs);
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(p), h2f(x[i].d) * h2f(y[i].d));
    }
    *s = vaddvq_f32(acc);
}

static void vec_dot_q5_1_neon(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q5_1 *x = vw;
    const lmq_block_q8_1 *y = va;
    float32x4_t acc = vdupq_n_f32(0);
    float summs = 0;
    for (int64_t i = 0; i < n / LMQ_QK5_1; i++) {
        uint8x16_t lo, hi;
        q5_bytes(x[i].qs, x[i].qh, &lo, &hi);
        const int32x4_t p = dot32(vreinterpretq_s8_u8(lo), vreinterpretq_s8_u8(hi), y[i].qs);
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(p), h2f(x[i].d) * h2f(y[i].d));
        summs += h2f(x[i].m) * h2f(y[i].s);
    }
    *s = vaddvq_f32(acc) + summs;
}

static void vec_dot_iq4_nl_neon(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_iq4_nl *x = vw;
    const lmq_block_q8_0 *y = va;
    const int8x16_t grid = vld1q_s8(lmq_iq4nl_values);
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / LMQ_QK4_NL; i++) {
        const uint8x16_t v = vld1q_u8(x[i].qs);
        const int8x16_t lo = vqtbl1q_s8(grid, vandq_u8(v, m4)), hi = vqtbl1q_s8(grid, vshrq_n_u8(v, 4));
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(dot32(lo, hi, y[i].qs)), h2f(x[i].d) * h2f(y[i].d));
    }
    *s = vaddvq_f32(acc);
}

/* MXFP4: the codes through the doubled E2M1 values (tbl), as iq4_nl; the
 * block scale d_w = 2^(e - 128) times the activation's d. */
static void vec_dot_mxfp4_neon(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_mxfp4 *x = vw;
    const lmq_block_q8_0 *y = va;
    const int8x16_t table = vld1q_s8(lmq_mxfp4_values);
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / LMQ_QK_MXFP4; i++) {
        const uint8x16_t v = vld1q_u8(x[i].qs);
        const int8x16_t lo = vqtbl1q_s8(table, vandq_u8(v, m4)), hi = vqtbl1q_s8(table, vshrq_n_u8(v, 4));
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(dot32(lo, hi, y[i].qs)), lmq_mxfp4_scale(x[i].e) * h2f(y[i].d));
    }
    *s = vaddvq_f32(acc);
}

/* ================================================================
 * K-quants against q8_K
 * ================================================================ */

static inline int32x4_t dot16(int8x16_t a, const int8_t *y)
{
    return vdotq_s32(vdupq_n_s32(0), a, vld1q_s8(y));
}

static void vec_dot_q2_K_neon(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q2_K *x = vw;
    const lmq_block_q8_K *y = va;
    const uint8x16_t m3 = vdupq_n_u8(3);
    float sumf = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        const uint8_t *sc = x[i].scales;
        const int8_t *q8 = y[i].qs;
        const uint8x16_t scv = vld1q_u8(sc);
        const int16x8_t mlo = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(vshrq_n_u8(scv, 4))));
        const int16x8_t mhi = vreinterpretq_s16_u16(vmovl_u8(vget_high_u8(vshrq_n_u8(scv, 4))));
        int32x4_t m = vmull_s16(vget_low_s16(mlo), vld1_s16(y[i].bsums));
        m = vmlal_s16(m, vget_high_s16(mlo), vld1_s16(y[i].bsums + 4));
        m = vmlal_s16(m, vget_low_s16(mhi), vld1_s16(y[i].bsums + 8));
        m = vmlal_s16(m, vget_high_s16(mhi), vld1_s16(y[i].bsums + 12));
        const int summs = vaddvq_s32(m);
        int32x4_t isum = vdupq_n_s32(0);
        for (int k = 0; k < 2; k++) {
            const uint8x16_t q0 = vld1q_u8(x[i].qs + 32 * k), q1 = vld1q_u8(x[i].qs + 32 * k + 16);
            for (int j = 0; j < 4; j++, q8 += 32) {
                const int c = 4 * k + j;
                const int8x16_t shift = vdupq_n_s8((int8_t)(-2 * j));
                const int8x16_t a0 = vreinterpretq_s8_u8(vandq_u8(vshlq_u8(q0, shift), m3));
                const int8x16_t a1 = vreinterpretq_s8_u8(vandq_u8(vshlq_u8(q1, shift), m3));
                isum = vmlaq_n_s32(isum, dot16(a0, q8), sc[2 * c] & 0xF);
                isum = vmlaq_n_s32(isum, dot16(a1, q8 + 16), sc[2 * c + 1] & 0xF);
            }
        }
        const float dall = y[i].d * h2f(x[i].d), dmin = y[i].d * h2f(x[i].dmin);
        sumf += dall * (float)vaddvq_s32(isum) - dmin * (float)summs;
    }
    *s = sumf;
}

static void vec_dot_q3_K_neon(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q3_K *x = vw;
    const lmq_block_q8_K *y = va;
    const uint8x16_t m3 = vdupq_n_u8(3), one = vdupq_n_u8(1);
    const int8x16_t four = vdupq_n_s8(4);
    float sumf = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        int8_t sc[16];
        lmq_q3k_scales(x[i].scales, sc);
        const int8_t *q8 = y[i].qs;
        const uint8x16_t h0 = vld1q_u8(x[i].hmask), h1 = vld1q_u8(x[i].hmask + 16);
        int32x4_t isum = vdupq_n_s32(0);
        for (int k = 0; k < 2; k++) {
            const uint8x16_t q0 = vld1q_u8(x[i].qs + 32 * k), q1 = vld1q_u8(x[i].qs + 32 * k + 16);
            for (int j = 0; j < 4; j++, q8 += 32) {
                const int c = 4 * k + j;
                const int8x16_t sh = vdupq_n_s8((int8_t)(-2 * j)), hs = vdupq_n_s8((int8_t)-c);
                /* value = (low 2 bits | high bit << 2) - 4 */
                const uint8x16_t u0 = vorrq_u8(vandq_u8(vshlq_u8(q0, sh), m3), vshlq_n_u8(vandq_u8(vshlq_u8(h0, hs), one), 2));
                const uint8x16_t u1 = vorrq_u8(vandq_u8(vshlq_u8(q1, sh), m3), vshlq_n_u8(vandq_u8(vshlq_u8(h1, hs), one), 2));
                isum = vmlaq_n_s32(isum, dot16(vsubq_s8(vreinterpretq_s8_u8(u0), four), q8), sc[2 * c]);
                isum = vmlaq_n_s32(isum, dot16(vsubq_s8(vreinterpretq_s8_u8(u1), four), q8 + 16), sc[2 * c + 1]);
            }
        }
        sumf += (h2f(x[i].d) * y[i].d) * (float)vaddvq_s32(isum);
    }
    *s = sumf;
}

/* sum_j min[j] * (bsums[2j] + bsums[2j+1]), the 8 mins in u[2], u[3]
 * (built from registers: see lmq_k4_unpack_u32) */
static inline int k4_mins(const uint32_t u[4], const int16_t *bsums)
{
    const int16x8_t b = vpaddq_s16(vld1q_s16(bsums), vld1q_s16(bsums + 8));
    const uint8x8_t m8 = vcreate_u8((uint64_t)u[2] | (uint64_t)u[3] << 32);
    const int16x8_t m = vreinterpretq_s16_u16(vmovl_u8(m8));
    const int32x4_t p = vmlal_s16(vmull_s16(vget_low_s16(m), vget_low_s16(b)), vget_high_s16(m), vget_high_s16(b));
    return vaddvq_s32(p);
}

/* scale k (0..7) of a q4_K/q5_K block from the unpacked words */
static inline int k4_scale(const uint32_t u[4], int k)
{
    return (int)((u[k >> 2] >> (8 * (k & 3))) & 0xFF);
}

static void vec_dot_q4_K_neon(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q4_K *x = vw;
    const lmq_block_q8_K *y = va;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float sumf = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        uint32_t sm[4];
        lmq_k4_unpack_u32(x[i].scales, sm);
        const int8_t *q8 = y[i].qs;
        const uint8_t *q4 = x[i].qs;
        int32x4_t isum = vdupq_n_s32(0);
        for (int j = 0; j < 4; j++, q4 += 32, q8 += 64) {
            const uint8x16_t b0 = vld1q_u8(q4), b1 = vld1q_u8(q4 + 16);
            const int32x4_t lo = dot32(vreinterpretq_s8_u8(vandq_u8(b0, m4)), vreinterpretq_s8_u8(vandq_u8(b1, m4)), q8);
            const int32x4_t hi = dot32(vreinterpretq_s8_u8(vshrq_n_u8(b0, 4)), vreinterpretq_s8_u8(vshrq_n_u8(b1, 4)), q8 + 32);
            isum = vmlaq_n_s32(isum, lo, k4_scale(sm, 2 * j));
            isum = vmlaq_n_s32(isum, hi, k4_scale(sm, 2 * j + 1));
        }
        sumf += y[i].d * h2f(x[i].d) * (float)vaddvq_s32(isum) -
                y[i].d * h2f(x[i].dmin) * (float)k4_mins(sm, y[i].bsums);
    }
    *s = sumf;
}

static void vec_dot_q5_K_neon(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q5_K *x = vw;
    const lmq_block_q8_K *y = va;
    const uint8x16_t m4 = vdupq_n_u8(0x0F), b16 = vdupq_n_u8(0x10);
    float sumf = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        uint32_t sm[4];
        lmq_k4_unpack_u32(x[i].scales, sm);
        const int8_t *q8 = y[i].qs;
        const uint8_t *q5 = x[i].qs;
        const uint8x16_t h0 = vld1q_u8(x[i].qh), h1 = vld1q_u8(x[i].qh + 16);
        int32x4_t isum = vdupq_n_s32(0);
        for (int j = 0; j < 4; j++, q5 += 32, q8 += 64) {
            const uint8x16_t b0 = vld1q_u8(q5), b1 = vld1q_u8(q5 + 16);
            const uint8x16_t ml = vdupq_n_u8((uint8_t)(1u << (2 * j))), mh = vdupq_n_u8((uint8_t)(2u << (2 * j)));
            const uint8x16_t l0 = vorrq_u8(vandq_u8(b0, m4), vandq_u8(vtstq_u8(h0, ml), b16));
            const uint8x16_t l1 = vorrq_u8(vandq_u8(b1, m4), vandq_u8(vtstq_u8(h1, ml), b16));
            const uint8x16_t u0 = vorrq_u8(vshrq_n_u8(b0, 4), vandq_u8(vtstq_u8(h0, mh), b16));
            const uint8x16_t u1 = vorrq_u8(vshrq_n_u8(b1, 4), vandq_u8(vtstq_u8(h1, mh), b16));
            isum = vmlaq_n_s32(isum, dot32(vreinterpretq_s8_u8(l0), vreinterpretq_s8_u8(l1), q8), k4_scale(sm, 2 * j));
            isum = vmlaq_n_s32(isum, dot32(vreinterpretq_s8_u8(u0), vreinterpretq_s8_u8(u1), q8 + 32), k4_scale(sm, 2 * j + 1));
        }
        sumf += y[i].d * h2f(x[i].d) * (float)vaddvq_s32(isum) -
                y[i].d * h2f(x[i].dmin) * (float)k4_mins(sm, y[i].bsums);
    }
    *s = sumf;
}

static void vec_dot_q6_K_neon(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_q6_K *x = vw;
    const lmq_block_q8_K *y = va;
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m2 = vdupq_n_u8(0x30);
    const int8x16_t s32 = vdupq_n_s8(32);
    float sumf = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        const int8_t *sc = x[i].scales, *q8 = y[i].qs;
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        int32x4_t isum = vdupq_n_s32(0);
        for (int k = 0; k < 2; k++, ql += 64, qh += 32, sc += 8, q8 += 128) {
            for (int h = 0; h < 2; h++) { /* elements l = 16h .. 16h+15 of each quarter */
                const uint8x16_t la = vld1q_u8(ql + 16 * h), lb = vld1q_u8(ql + 32 + 16 * h);
                const uint8x16_t hb = vld1q_u8(qh + 16 * h);
                const uint8x16_t v1 = vorrq_u8(vandq_u8(la, m4), vandq_u8(vshlq_n_u8(hb, 4), m2));
                const uint8x16_t v2 = vorrq_u8(vandq_u8(lb, m4), vandq_u8(vshlq_n_u8(hb, 2), m2));
                const uint8x16_t v3 = vorrq_u8(vshrq_n_u8(la, 4), vandq_u8(hb, m2));
                const uint8x16_t v4 = vorrq_u8(vshrq_n_u8(lb, 4), vandq_u8(vshrq_n_u8(hb, 2), m2));
                isum = vmlaq_n_s32(isum, dot16(vsubq_s8(vreinterpretq_s8_u8(v1), s32), q8 + 16 * h), sc[h]);
                isum = vmlaq_n_s32(isum, dot16(vsubq_s8(vreinterpretq_s8_u8(v2), s32), q8 + 32 + 16 * h), sc[2 + h]);
                isum = vmlaq_n_s32(isum, dot16(vsubq_s8(vreinterpretq_s8_u8(v3), s32), q8 + 64 + 16 * h), sc[4 + h]);
                isum = vmlaq_n_s32(isum, dot16(vsubq_s8(vreinterpretq_s8_u8(v4), s32), q8 + 96 + 16 * h), sc[6 + h]);
            }
        }
        sumf += (h2f(x[i].d) * y[i].d) * (float)vaddvq_s32(isum);
    }
    *s = sumf;
}

static void vec_dot_iq4_xs_neon(int64_t n, float *s, const void *vw, const void *va)
{
    const lmq_block_iq4_xs *x = vw;
    const lmq_block_q8_K *y = va;
    const int8x16_t grid = vld1q_s8(lmq_iq4nl_values);
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float sumf = 0;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++) {
        const int8_t *q8 = y[i].qs;
        const uint8_t *qs = x[i].qs;
        int32x4_t isum = vdupq_n_s32(0);
        for (int ib = 0; ib < 8; ib++, qs += 16, q8 += 32) {
            const int ls = ((x[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((x[i].scales_h >> (2 * ib)) & 3) << 4);
            const uint8x16_t v = vld1q_u8(qs);
            const int32x4_t p = dot32(vqtbl1q_s8(grid, vandq_u8(v, m4)), vqtbl1q_s8(grid, vshrq_n_u8(v, 4)), q8);
            isum = vmlaq_n_s32(isum, p, ls - 32);
        }
        sumf += (h2f(x[i].d) * y[i].d) * (float)vaddvq_s32(isum);
    }
    *s = sumf;
}

/* ================================================================
 * Activation quantizers
 * ================================================================ */

static inline float amax_n(const float *x, int n)
{
    float32x4_t m = vdupq_n_f32(0);
    for (int j = 0; j < n; j += 4) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(x + j)));
    return vmaxvq_f32(m);
}

/* 8 int32 -> 8 int8 */
static inline int8x8_t narrow8(int32x4_t a, int32x4_t b)
{
    return vmovn_s16(vcombine_s16(vmovn_s32(a), vmovn_s32(b)));
}

static inline int q8_round32(const float *x, float id, int8_t *q)
{
    int32x4_t sum = vdupq_n_s32(0);
    for (int j = 0; j < 32; j += 8) {
        const int32x4_t a = vcvtaq_s32_f32(vmulq_n_f32(vld1q_f32(x + j), id));
        const int32x4_t b = vcvtaq_s32_f32(vmulq_n_f32(vld1q_f32(x + j + 4), id));
        vst1_s8(q + j, narrow8(a, b));
        sum = vaddq_s32(sum, vaddq_s32(a, b));
    }
    return vaddvq_s32(sum);
}

/* q8_0 activations as ggml's x86 code makes them (lmq_quantize_q8_0_ref):
 * x * (127 / amax), rounded half to even. */
static void quantize_q8_0_neon(const float *x, void *vy, int64_t n)
{
    lmq_block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / LMQ_QK8_0; i++, x += LMQ_QK8_0) {
        const float amax = amax_n(x, LMQ_QK8_0), id = amax != 0.0f ? 127.0f / amax : 0.0f;
        y[i].d = f2h(amax / 127.0f);
        for (int j = 0; j < 32; j += 8) {
            const int32x4_t a = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + j), id));
            const int32x4_t b = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + j + 4), id));
            vst1_s8(y[i].qs + j, narrow8(a, b));
        }
    }
}

static void quantize_q8_1_neon(const float *x, void *vy, int64_t n)
{
    lmq_block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / LMQ_QK8_1; i++, x += LMQ_QK8_1) {
        const float d = amax_n(x, LMQ_QK8_1) / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = f2h(d);
        const int sum = q8_round32(x, id, y[i].qs);
        y[i].s = f2h((float)sum * d);
    }
}

static void quantize_q8_K_neon(const float *x, void *vy, int64_t n)
{
    lmq_block_q8_K *y = vy;
    for (int64_t i = 0; i < n / LMQ_QK_K; i++, x += LMQ_QK_K) {
        const float amax = amax_n(x, LMQ_QK_K);
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float max = 0;
        for (int j = 0; j < LMQ_QK_K; j++) {
            if (fabsf(x[j]) == amax) {
                max = x[j];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const int32x4_t top = vdupq_n_s32(127);
        for (int j = 0; j < LMQ_QK_K; j += 8) {
            const int32x4_t a = vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + j), iscale)), top);
            const int32x4_t b = vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + j + 4), iscale)), top);
            vst1_s8(y[i].qs + j, narrow8(a, b));
        }
        for (int g = 0; g < LMQ_QK_K / 16; g++) y[i].bsums[g] = vaddlvq_s8(vld1q_s8(y[i].qs + 16 * g));
        y[i].d = 1.0f / iscale;
    }
}

/* ================================================================
 * Attention helpers and dequantization of float-like weights
 * ================================================================ */

static void axpy_f32_neon(float *y, float alpha, const float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), vld1q_f32(x + i), alpha));
    for (; i < n; i++) y[i] += alpha * x[i];
}

static void axpy_f16_neon(float *y, float alpha, const uint16_t *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), load_f16x4(x + i), alpha));
    for (; i < n; i++) y[i] += alpha * h2f(x[i]);
}

static float softmax_neon(float *x, int64_t n)
{
    if (n <= 0) return 0;
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = fmaxf(mx, x[i]);
    float sum = 0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    const float inv = 1.0f / sum;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(x + i, vmulq_n_f32(vld1q_f32(x + i), inv));
    for (; i < n; i++) x[i] *= inv;
    return sum;
}

/* 16 codes to floats, (float)q * d + m: a product and a sum rounded apart,
 * as the reference (built without contraction). */
static inline void store_u8x16_affine(float *y, uint8x16_t q, float d, float m)
{
    const uint16x8_t h[2] = {vmovl_u8(vget_low_u8(q)), vmovl_high_u8(q)};
    for (int k = 0; k < 4; k++) {
        const uint32x4_t u = k & 1 ? vmovl_high_u16(h[k >> 1]) : vmovl_u16(vget_low_u16(h[k >> 1]));
        vst1q_f32(y + 4 * k, vaddq_f32(vmulq_n_f32(vcvtq_f32_u32(u), d), vdupq_n_f32(m)));
    }
}

/* q4_1 / q5_1 rows for the BLAS path's weight tiles (no integer panel kernel). */
static void to_float_q4_1_neon(const void *vx, float *y, int64_t n)
{
    const lmq_block_q4_1 *x = vx;
    for (int64_t i = 0; i < n / LMQ_QK4_1; i++, y += LMQ_QK4_1) {
        const uint8x16_t v = vld1q_u8(x[i].qs);
        const float d = h2f(x[i].d), m = h2f(x[i].m);
        store_u8x16_affine(y, vandq_u8(v, vdupq_n_u8(0x0F)), d, m);
        store_u8x16_affine(y + 16, vshrq_n_u8(v, 4), d, m);
    }
}

static void to_float_q5_1_neon(const void *vx, float *y, int64_t n)
{
    const lmq_block_q5_1 *x = vx;
    for (int64_t i = 0; i < n / LMQ_QK5_1; i++, y += LMQ_QK5_1) {
        uint8x16_t lo, hi;
        q5_bytes(x[i].qs, x[i].qh, &lo, &hi);
        const float d = h2f(x[i].d), m = h2f(x[i].m);
        store_u8x16_affine(y, lo, d, m);
        store_u8x16_affine(y + 16, hi, d, m);
    }
}

static void to_float_f16_neon(const void *vx, float *y, int64_t n)
{
    const uint16_t *x = vx;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, load_f16x4(x + i));
    for (; i < n; i++) y[i] = h2f(x[i]);
}

static void to_float_bf16_neon(const void *vx, float *y, int64_t n)
{
    const uint16_t *x = vx;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, load_bf16x4(x + i));
    for (; i < n; i++) y[i] = lmq_bf16_to_fp32(x[i]);
}

void lmq_kernels_fill_neon(lmq_kernel_table *t)
{
    t->isa = LMQ_ISA_NEON;
    t->vec_dot[LMQ_TYPE_F32] = vec_dot_f32_neon;
    t->vec_dot[LMQ_TYPE_F16] = vec_dot_f16_neon;
    t->vec_dot[LMQ_TYPE_BF16] = vec_dot_bf16_neon;
    t->vec_dot[LMQ_TYPE_Q4_0] = vec_dot_q4_0_neon;
    t->vec_dot[LMQ_TYPE_Q4_1] = vec_dot_q4_1_neon;
    t->vec_dot[LMQ_TYPE_Q5_0] = vec_dot_q5_0_neon;
    t->vec_dot[LMQ_TYPE_Q5_1] = vec_dot_q5_1_neon;
    t->vec_dot[LMQ_TYPE_Q8_0] = vec_dot_q8_0_neon;
    t->vec_dot[LMQ_TYPE_Q2_K] = vec_dot_q2_K_neon;
    t->vec_dot[LMQ_TYPE_Q3_K] = vec_dot_q3_K_neon;
    t->vec_dot[LMQ_TYPE_Q4_K] = vec_dot_q4_K_neon;
    t->vec_dot[LMQ_TYPE_Q5_K] = vec_dot_q5_K_neon;
    t->vec_dot[LMQ_TYPE_Q6_K] = vec_dot_q6_K_neon;
    t->vec_dot[LMQ_TYPE_IQ4_NL] = vec_dot_iq4_nl_neon;
    t->vec_dot[LMQ_TYPE_IQ4_XS] = vec_dot_iq4_xs_neon;
    t->vec_dot[LMQ_TYPE_F8_E4M3] = vec_dot_f8_e4m3_neon;
    t->vec_dot[LMQ_TYPE_F8_E5M2] = vec_dot_f8_e5m2_neon;
    t->vec_dot[LMQ_TYPE_MXFP4] = vec_dot_mxfp4_neon;
    t->to_float[LMQ_TYPE_F16] = to_float_f16_neon;
    t->to_float[LMQ_TYPE_Q4_1] = to_float_q4_1_neon;
    t->to_float[LMQ_TYPE_Q5_1] = to_float_q5_1_neon;
    t->to_float[LMQ_TYPE_BF16] = to_float_bf16_neon;
    t->from_float[LMQ_TYPE_Q8_0] = quantize_q8_0_neon;
    t->from_float[LMQ_TYPE_Q8_1] = quantize_q8_1_neon;
    t->from_float[LMQ_TYPE_Q8_K] = quantize_q8_K_neon;
    t->dot_f32 = dot_f32_neon;
    t->dot_f16_f32 = dot_f16_f32_neon;
    t->axpy_f32 = axpy_f32_neon;
    t->axpy_f16 = axpy_f16_neon;
    t->softmax = softmax_neon;
    lmq_kernels_fill_neon_panel(t);
    lmq_kernels_fill_neon_rpanel(t);
}
