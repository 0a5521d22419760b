/* fp8 (OCP 8-bit floating point v1.0) scalar codecs and the MX-style block
 * types f8_e4m3 / f8_e5m2: 32 codes sharing one E8M0 power-of-two scale.
 *
 * Encoding rounds to nearest, ties to even, and saturates: magnitudes that
 * would round past the largest finite value (and +-Inf) become that value;
 * NaN keeps its sign and becomes the format's NaN code. */
#include "quant_internal.h"

typedef struct fp8_fmt {
    int mbits;       /* mantissa bits */
    int bias;        /* exponent bias */
    uint8_t max_code; /* largest finite magnitude code */
    uint8_t nan_code;
    float max;       /* its value */
    const float *table;
} fp8_fmt;

static const fp8_fmt FMT_E4M3 = {3, 7, 0x7E, 0x7F, LMQ_FP8_E4M3_MAX, lmq_fp8_e4m3_table};
static const fp8_fmt FMT_E5M2 = {2, 15, 0x7B, 0x7E, LMQ_FP8_E5M2_MAX, lmq_fp8_e5m2_table};

static inline uint8_t fp8_encode(const fp8_fmt *f, float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    const uint8_t sign = (uint8_t)((u >> 24) & 0x80);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint8_t)(sign | f->nan_code);
    const float ax = fabsf(x);
    if (ax >= f->max) return (uint8_t)(sign | f->max_code);
    /* smallest normal: 2^(1-bias), i.e. f32 exponent field 128 - bias */
    const uint32_t min_normal_bits = (uint32_t)(128 - f->bias) << 23;
    uint32_t code;
    if (a < min_normal_bits) {
        /* subnormal range: multiples of 2^(1-bias-mbits); k = 2^mbits is the
         * smallest normal, whose code is exactly k */
        const float k = nearbyintf(ldexpf(ax, f->bias - 1 + f->mbits));
        code = (uint32_t)k;
    } else {
        /* drop 23-mbits mantissa bits with ties to even, then rebias */
        const int shift = 23 - f->mbits;
        const uint32_t r = (a + (1u << (shift - 1)) - 1u + ((a >> shift) & 1u)) >> shift;
        code = r - ((uint32_t)(127 - f->bias) << f->mbits);
    }
    if (code > f->max_code) code = f->max_code;
    return (uint8_t)(sign | code);
}

uint8_t lmq_fp8_e4m3_from_f32(float x)
{
    return fp8_encode(&FMT_E4M3, x);
}

float lmq_fp8_e4m3_to_f32(uint8_t c)
{
    return lmq_fp8_e4m3_table[c];
}

uint8_t lmq_fp8_e5m2_from_f32(float x)
{
    return fp8_encode(&FMT_E5M2, x);
}

float lmq_fp8_e5m2_to_f32(uint8_t c)
{
    return lmq_fp8_e5m2_table[c];
}

/* ======================================================================
 * Blocks
 * ====================================================================== */

/* 2^(e - 127) for an E8M0 code (e = 255 is NaN). */
static inline float e8m0_value(uint8_t e)
{
    if (e == 0xFF) return NAN;
    uint32_t bits = e ? (uint32_t)e << 23 : 0x00400000u; /* 2^-127 is subnormal */
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static void f8_to_float(const fp8_fmt *f, const void *vx, float *y, int64_t n)
{
    const lmq_block_f8 *x = vx;
    for (int64_t i = 0; i < n / LMQ_QK_F8; i++, y += LMQ_QK_F8) {
        const float s = e8m0_value(x[i].e);
        for (int j = 0; j < LMQ_QK_F8; j++) y[j] = f->table[x[i].qs[j]] * s;
    }
}

/* Encodes a block at exponent e; returns its weighted squared error. */
static float f8_try(const fp8_fmt *f, const float *x, const float *qw, int e, uint8_t *qs)
{
    const float s = e8m0_value((uint8_t)e);
    const float inv = e8m0_value((uint8_t)(254 - e)); /* 2^(127 - e) */
    float err = 0.0f;
    for (int j = 0; j < LMQ_QK_F8; j++) {
        qs[j] = fp8_encode(f, x[j] * inv);
        const float d = f->table[qs[j]] * s - x[j];
        err += (qw ? qw[j] : 1.0f) * d * d;
    }
    return err;
}

static void f8_from_float(const fp8_fmt *f, const float *x, void *vy, int64_t n, const float *qw)
{
    lmq_block_f8 *y = vy;
    for (int64_t i = 0; i < n / LMQ_QK_F8; i++, x += LMQ_QK_F8, qw = qw ? qw + LMQ_QK_F8 : NULL) {
        float amax = 0.0f;
        for (int j = 0; j < LMQ_QK_F8; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
        if (amax == 0.0f) {
            y[i].e = 127;
            memset(y[i].qs, 0, LMQ_QK_F8);
            continue;
        }
        /* smallest k with amax * 2^-k <= max, then e = k + 127 in [0, 254] */
        int k = ilogbf(amax) - ilogbf(f->max);
        while (ldexpf(amax, -k) > f->max) k++;
        while (ldexpf(amax, -(k - 1)) <= f->max) k--;
        int e = k + 127;
        e = e < 0 ? 0 : e > 254 ? 254 : e;
        uint8_t alt[LMQ_QK_F8];
        const float err = f8_try(f, x, qw, e, y[i].qs);
        y[i].e = (uint8_t)e;
        /* one step finer: the block max saturates, everything else gains a bit */
        if (e > 0 && f8_try(f, x, qw, e - 1, alt) < err) {
            y[i].e = (uint8_t)(e - 1);
            memcpy(y[i].qs, alt, LMQ_QK_F8);
        }
    }
}

void lmq_q_f8_e4m3_to_float(const void *x, float *y, int64_t n)
{
    f8_to_float(&FMT_E4M3, x, y, n);
}

void lmq_q_f8_e4m3_from_float(const float *x, void *y, int64_t n, const float *qw)
{
    f8_from_float(&FMT_E4M3, x, y, n, qw);
}

void lmq_q_f8_e5m2_to_float(const void *x, float *y, int64_t n)
{
    f8_to_float(&FMT_E5M2, x, y, n);
}

void lmq_q_f8_e5m2_from_float(const float *x, void *y, int64_t n, const float *qw)
{
    f8_from_float(&FMT_E5M2, x, y, n, qw);
}
