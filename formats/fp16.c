/* IEEE binary16 and bfloat16 conversions (round-to-nearest-even). */
#include <string.h>

#include "lmq_format.h"

static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t lmq_fp32_to_fp16(float f)
{
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* Inf or NaN (NaN kept quiet, non-zero mantissa) */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0));
    if (ax >= 0x477ff000u) /* rounds to >= 65520: overflow to Inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
        if (ax < 0x33000000u) return (uint16_t)sign; /* < half of the smallest subnormal */
        uint32_t e = ax >> 23;
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e; /* 14 + (112 - (e - 1)) ... keeps 10-bit subnormal */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    /* normal: rebias exponent, round mantissa from 23 to 10 bits */
    uint32_t h = ((ax >> 13) - (112u << 10));
    uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
    return (uint16_t)(sign | h);
}

float lmq_fp16_to_fp32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1f;
    uint32_t m = h & 0x3ffu;
    if (e == 0) {
        if (m == 0) return bits_f32(sign);
        /* subnormal: m * 2^-24 exactly */
        float v = (float)m * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    if (e == 31) return bits_f32(sign | 0x7f800000u | (m << 13));
    return bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

uint16_t lmq_fp32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    uint32_t lsb = (x >> 16) & 1u;
    x += 0x7fffu + lsb;
    return (uint16_t)(x >> 16);
}

float lmq_bf16_to_fp32(uint16_t b)
{
    return bits_f32((uint32_t)b << 16);
}

void lmq_fp16_to_fp32_row(const uint16_t *src, float *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++) dst[i] = lmq_fp16_to_fp32(src[i]);
}

void lmq_fp32_to_fp16_row(const float *src, uint16_t *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++) dst[i] = lmq_fp32_to_fp16(src[i]);
}

void lmq_bf16_to_fp32_row(const uint16_t *src, float *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++) dst[i] = lmq_bf16_to_fp32(src[i]);
}

void lmq_fp32_to_bf16_row(const float *src, uint16_t *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++) dst[i] = lmq_fp32_to_bf16(src[i]);
}

lmq_status lmq_convert_float_row(lmq_type st, const void *src, lmq_type dt, void *dst, int64_t n)
{
    if (n < 0) return lmq_error(LMQ_ERR_INVALID_ARG, "negative row length");
    bool sf = st == LMQ_TYPE_F32 || st == LMQ_TYPE_F16 || st == LMQ_TYPE_BF16;
    bool df = dt == LMQ_TYPE_F32 || dt == LMQ_TYPE_F16 || dt == LMQ_TYPE_BF16;
    if (!sf || !df)
        return lmq_error(LMQ_ERR_INVALID_ARG, "float conversion from %s to %s: not float types",
                         lmq_type_name(st), lmq_type_name(dt));
    if (st == dt) {
        memmove(dst, src, (size_t)n * (st == LMQ_TYPE_F32 ? 4 : 2));
        return LMQ_OK;
    }
    if (st == LMQ_TYPE_F32) {
        if (dt == LMQ_TYPE_F16) lmq_fp32_to_fp16_row(src, dst, n);
        else lmq_fp32_to_bf16_row(src, dst, n);
        return LMQ_OK;
    }
    if (dt == LMQ_TYPE_F32) {
        if (st == LMQ_TYPE_F16) lmq_fp16_to_fp32_row(src, dst, n);
        else lmq_bf16_to_fp32_row(src, dst, n);
        return LMQ_OK;
    }
    /* f16 <-> bf16 through f32, element by element (exact widening, one rounding) */
    const uint16_t *s = src;
    uint16_t *d = dst;
    for (int64_t i = 0; i < n; i++) {
        float v = st == LMQ_TYPE_F16 ? lmq_fp16_to_fp32(s[i]) : lmq_bf16_to_fp32(s[i]);
        d[i] = dt == LMQ_TYPE_F16 ? lmq_fp32_to_fp16(v) : lmq_fp32_to_bf16(v);
    }
    return LMQ_OK;
}
