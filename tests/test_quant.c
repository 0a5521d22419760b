/* Unit tests of the quantize module: block layouts (hand-built blocks and an
 * independent per-element decoder written from ggml-common.h's layout
 * description), round trips on crafted rows, error paths, thread
 * independence, the fp8 codecs and the activation quantizers. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_quant.h"
#include "testutil.h"

/* ======================================================================
 * Helpers
 * ====================================================================== */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng_u64(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static float rng_uniform(void) /* [0, 1) */
{
    return (float)(rng_u64() >> 40) / 16777216.0f;
}

static float rng_gauss(void)
{
    float u1 = rng_uniform(), u2 = rng_uniform();
    if (u1 < 1e-7f) u1 = 1e-7f;
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

static void fill_gauss(float *x, int64_t n, float sigma)
{
    for (int64_t i = 0; i < n; i++) x[i] = sigma * rng_gauss();
}

static int bs_of(lmq_type t)
{
    return lmq_type_get(t)->block_size;
}

static int ts_of(lmq_type t)
{
    return lmq_type_get(t)->type_size;
}

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static float h16(const uint8_t *p)
{
    return lmq_fp16_to_fp32(get16(p));
}

/* Relative RMSE of y vs x: sqrt(sum (y-x)^2 / sum x^2). */
static double rel_rmse(const float *x, const float *y, int64_t n)
{
    double se = 0, ss = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)y[i] - x[i];
        se += d * d;
        ss += (double)x[i] * x[i];
    }
    return ss > 0 ? sqrt(se / ss) : sqrt(se);
}

static bool same_float(float a, float b)
{
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return a == b || fabsf(a - b) <= 1e-6f * fmaxf(fabsf(a), fabsf(b));
}

/* ======================================================================
 * An independent decoder: element i of one block, from the layout as
 * ggml-common.h describes it (byte offsets, not the module's structs).
 * ====================================================================== */

static float spec_q4_0(const uint8_t *b, int i)
{
    const uint8_t q = b[2 + i % 16];
    return (float)((i < 16 ? q & 15 : q >> 4) - 8) * h16(b);
}

static float spec_q4_1(const uint8_t *b, int i)
{
    const uint8_t q = b[4 + i % 16];
    return (float)(i < 16 ? q & 15 : q >> 4) * h16(b) + h16(b + 2);
}

static int q5_quant(const uint8_t *qh4, const uint8_t *qs, int i)
{
    const uint32_t qh = (uint32_t)qh4[0] | (uint32_t)qh4[1] << 8 | (uint32_t)qh4[2] << 16 |
                        (uint32_t)qh4[3] << 24;
    const uint8_t q = qs[i % 16];
    return (i < 16 ? q & 15 : q >> 4) | (int)((qh >> i) & 1) << 4;
}

static float spec_q5_0(const uint8_t *b, int i)
{
    return (float)(q5_quant(b + 2, b + 6, i) - 16) * h16(b);
}

static float spec_q5_1(const uint8_t *b, int i)
{
    return (float)q5_quant(b + 4, b + 8, i) * h16(b) + h16(b + 2);
}

static float spec_q8_0(const uint8_t *b, int i)
{
    return (float)(int8_t)b[2 + i] * h16(b);
}

static float spec_q8_1(const uint8_t *b, int i)
{
    return (float)(int8_t)b[4 + i] * h16(b);
}

static const int8_t grid_nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                   1,    13,   25,  38,  53,  69,  89,  113};

static float spec_iq4_nl(const uint8_t *b, int i)
{
    const uint8_t q = b[2 + i % 16];
    return h16(b) * (float)grid_nl[i < 16 ? q & 15 : q >> 4];
}

/* q2_K: scales[16] @0, qs[64] @16, d @80, dmin @82 */
static float spec_q2_K(const uint8_t *b, int i)
{
    const int half = i / 128, j = i % 128, shift = 2 * (j / 32), l = j % 32;
    const int q = (b[16 + 32 * half + l] >> shift) & 3;
    const uint8_t sc = b[i / 16];
    return h16(b + 80) * (float)(sc & 15) * (float)q - h16(b + 82) * (float)(sc >> 4);
}

/* q3_K: hmask[32] @0, qs[64] @32, scales[12] @96, d @108 */
static int q3_scale(const uint8_t *s, int t)
{
    const int lo = t < 8 ? s[t] & 15 : s[t - 8] >> 4;
    const int hi = (s[8 + t % 4] >> (2 * (t / 4))) & 3;
    return (lo | hi << 4) - 32;
}

static float spec_q3_K(const uint8_t *b, int i)
{
    const int half = i / 128, j = i % 128, shift = 2 * (j / 32), l = j % 32;
    const int q = (b[32 + 32 * half + l] >> shift) & 3;
    const int h = (b[i % 32] >> (i / 32)) & 1;
    return h16(b + 108) * (float)q3_scale(b + 96, i / 16) * (float)(q - (h ? 0 : 4));
}

/* q4_K: d @0, dmin @2, scales[12] @4, qs[128] @16; q5_K: qh[32] @16, qs @48 */
static void k4_scale(const uint8_t *s, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
        *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

static int k4_nibble(const uint8_t *qs, int i)
{
    const int chunk = i / 64, within = i % 64;
    const uint8_t q = qs[32 * chunk + within % 32];
    return within < 32 ? q & 15 : q >> 4;
}

static float spec_q4_K(const uint8_t *b, int i)
{
    int sc, m;
    k4_scale(b + 4, i / 32, &sc, &m);
    return h16(b) * (float)sc * (float)k4_nibble(b + 16, i) - h16(b + 2) * (float)m;
}

static float spec_q5_K(const uint8_t *b, int i)
{
    int sc, m;
    k4_scale(b + 4, i / 32, &sc, &m);
    const int q = k4_nibble(b + 48, i) + (((b[16 + i % 32] >> (i / 32)) & 1) ? 16 : 0);
    return h16(b) * (float)sc * (float)q - h16(b + 2) * (float)m;
}

/* q6_K: ql[128] @0, qh[64] @128, scales[16] @192, d @208 */
static float spec_q6_K(const uint8_t *b, int i)
{
    const int half = i / 128, j = i % 128, quarter = j / 32, l = j % 32;
    const uint8_t qlb = b[64 * half + 32 * (quarter & 1) + l];
    const int lo = quarter < 2 ? qlb & 15 : qlb >> 4;
    const int hi = (b[128 + 32 * half + l] >> (2 * quarter)) & 3;
    return h16(b + 208) * (float)(int8_t)b[192 + i / 16] * (float)((lo | hi << 4) - 32);
}

/* q8_K: f32 d @0, qs[256] @4, bsums[16] @260 */
static float spec_q8_K(const uint8_t *b, int i)
{
    float d;
    memcpy(&d, b, 4);
    return d * (float)(int8_t)b[4 + i];
}

/* iq4_xs: d @0, scales_h @2, scales_l[4] @4, qs[128] @8 */
static float spec_iq4_xs(const uint8_t *b, int i)
{
    const int sub = i / 32, within = i % 32;
    const uint8_t q = b[8 + 16 * sub + within % 16];
    const int nib = within < 16 ? q & 15 : q >> 4;
    const int ls = ((b[4 + sub / 2] >> (4 * (sub % 2))) & 15) | ((get16(b + 2) >> (2 * sub)) & 3) << 4;
    return h16(b) * (float)(ls - 32) * (float)grid_nl[nib];
}

/* fp8 values from the OCP definitions, computed arithmetically. */
static float e4m3_def(uint8_t c)
{
    const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
    if (e == 15 && m == 7) return NAN;
    const float v = e == 0 ? ldexpf((float)m / 8.0f, -6) : ldexpf(1.0f + (float)m / 8.0f, e - 7);
    return s ? -v : v;
}

static float e5m2_def(uint8_t c)
{
    const int s = c >> 7, e = (c >> 2) & 31, m = c & 3;
    float v;
    if (e == 31)
        v = m == 0 ? INFINITY : NAN;
    else
        v = e == 0 ? ldexpf((float)m / 4.0f, -14) : ldexpf(1.0f + (float)m / 4.0f, e - 15);
    return s ? -v : v;
}

static float spec_f8(const uint8_t *b, int i, float (*def)(uint8_t))
{
    if (b[0] == 0xFF) return NAN;
    return def(b[1 + i]) * ldexpf(1.0f, (int)b[0] - 127);
}

static float spec_f8_e4m3(const uint8_t *b, int i)
{
    return spec_f8(b, i, e4m3_def);
}

static float spec_f8_e5m2(const uint8_t *b, int i)
{
    return spec_f8(b, i, e5m2_def);
}

/* MXFP4 (OCP MX: E2M1 elements, E8M0 scale 2^(e - 127)); byte 1 + j holds
 * element j (low nibble) and j + 16 (high nibble), as ggml packs it. */
static float e2m1_def(int c)
{
    const int s = c >> 3, e = (c >> 1) & 3, m = c & 1;
    const float v = e == 0 ? 0.5f * (float)m : ldexpf(1.0f + 0.5f * (float)m, e - 1);
    return s ? -v : v;
}

static float spec_mxfp4(const uint8_t *b, int i)
{
    const uint8_t q = b[1 + i % 16];
    return e2m1_def(i < 16 ? q & 15 : q >> 4) * ldexpf(1.0f, (int)b[0] - 127);
}

static float spec_f32(const uint8_t *b, int i)
{
    float f;
    memcpy(&f, b + 4 * i, 4);
    return f;
}

static float spec_f16(const uint8_t *b, int i)
{
    return h16(b + 2 * i);
}

static float spec_bf16(const uint8_t *b, int i)
{
    uint32_t u = (uint32_t)get16(b + 2 * i) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

typedef float (*spec_fn)(const uint8_t *block, int i);

static const spec_fn spec_table[LMQ_TYPE_COUNT] = {
    [LMQ_TYPE_F32] = spec_f32,        [LMQ_TYPE_F16] = spec_f16,
    [LMQ_TYPE_BF16] = spec_bf16,      [LMQ_TYPE_Q4_0] = spec_q4_0,
    [LMQ_TYPE_Q4_1] = spec_q4_1,      [LMQ_TYPE_Q5_0] = spec_q5_0,
    [LMQ_TYPE_Q5_1] = spec_q5_1,      [LMQ_TYPE_Q8_0] = spec_q8_0,
    [LMQ_TYPE_Q8_1] = spec_q8_1,      [LMQ_TYPE_Q2_K] = spec_q2_K,
    [LMQ_TYPE_Q3_K] = spec_q3_K,      [LMQ_TYPE_Q4_K] = spec_q4_K,
    [LMQ_TYPE_Q5_K] = spec_q5_K,      [LMQ_TYPE_Q6_K] = spec_q6_K,
    [LMQ_TYPE_Q8_K] = spec_q8_K,      [LMQ_TYPE_IQ4_NL] = spec_iq4_nl,
    [LMQ_TYPE_IQ4_XS] = spec_iq4_xs,  [LMQ_TYPE_F8_E4M3] = spec_f8_e4m3,
    [LMQ_TYPE_F8_E5M2] = spec_f8_e5m2,  [LMQ_TYPE_MXFP4] = spec_mxfp4,
};

/* Decodes `nblk` blocks with the module and with the spec decoder; returns
 * the number of mismatching elements. */
static int spec_mismatches(lmq_type t, const uint8_t *blocks, int nblk, int *first_bad)
{
    const int bs = bs_of(t), ts = ts_of(t);
    float *y = malloc(sizeof(float) * (size_t)bs * (size_t)nblk);
    int bad = 0;
    *first_bad = -1;
    T_CHECK(lmq_dequantize_row(t, blocks, y, (int64_t)bs * nblk) == LMQ_OK, "%s", lmq_last_error());
    for (int b = 0; b < nblk; b++) {
        for (int i = 0; i < bs; i++) {
            const float want = spec_table[t](blocks + (size_t)b * ts, i);
            if (!same_float(y[b * bs + i], want)) {
                if (*first_bad < 0) *first_bad = b * bs + i;
                bad++;
            }
        }
    }
    free(y);
    return bad;
}

/* ======================================================================
 * Layouts
 * ====================================================================== */

/* Every type: random block bytes (f16 scale fields kept finite and modest)
 * decode to what the independent decoder says, element by element. */
static void test_layout_random(void)
{
    for (int ti = 0; ti < LMQ_TYPE_COUNT; ti++) {
        const lmq_type t = (lmq_type)ti;
        /* the codebook and ternary types are checked against ggml's own
         * decoder on ggml's blocks and random ones (test_quant_iq.c) */
        if (!spec_table[t]) continue;
        const int ts = ts_of(t), nblk = 64;
        uint8_t *blocks = malloc((size_t)ts * nblk);
        for (int k = 0; k < ts * nblk; k++) blocks[k] = (uint8_t)rng_u64();
        /* scale fields: f16 in [-4, 4] (sign random), f32 for q8_K, E8M0 near 127 */
        for (int b = 0; b < nblk; b++) {
            uint8_t *p = blocks + (size_t)b * ts;
            const uint16_t h = lmq_fp32_to_fp16((rng_uniform() * 8.0f - 4.0f));
            const uint16_t h2 = lmq_fp32_to_fp16((rng_uniform() * 8.0f - 4.0f));
            if (t == LMQ_TYPE_Q4_0 || t == LMQ_TYPE_Q5_0 || t == LMQ_TYPE_Q8_0 ||
                t == LMQ_TYPE_IQ4_NL || t == LMQ_TYPE_IQ4_XS || t == LMQ_TYPE_Q4_K ||
                t == LMQ_TYPE_Q5_K)
                put16(p, h);
            if (t == LMQ_TYPE_Q4_1 || t == LMQ_TYPE_Q5_1 || t == LMQ_TYPE_Q8_1 ||
                t == LMQ_TYPE_Q4_K || t == LMQ_TYPE_Q5_K)
                put16(p + 2, h2);
            if (t == LMQ_TYPE_Q2_K) {
                put16(p + 80, h);
                put16(p + 82, h2);
            }
            if (t == LMQ_TYPE_Q3_K) put16(p + 108, h);
            if (t == LMQ_TYPE_Q6_K) put16(p + 208, h);
            if (t == LMQ_TYPE_Q8_K) {
                const float d = rng_uniform() - 0.5f;
                memcpy(p, &d, 4);
            }
            if (t == LMQ_TYPE_F8_E4M3 || t == LMQ_TYPE_F8_E5M2) p[0] = (uint8_t)(120 + rng_u64() % 16);
            if (t == LMQ_TYPE_F32)
                for (int k = 0; k < ts; k += 4) {
                    const float f = rng_gauss();
                    memcpy(p + k, &f, 4);
                }
        }
        int first;
        const int bad = spec_mismatches(t, blocks, nblk, &first);
        T_CHECK(bad == 0, "%s: %d elements decode differently from the layout spec (first %d)",
                lmq_type_name(t), bad, first);
        free(blocks);
    }
}

/* Hand-built blocks with a few known values each (expected values worked
 * out by hand from the layout description, written as literals). */
static void expect_elems(lmq_type t, const void *block, const int *idx, const float *want, int n,
                         float rest)
{
    const int bs = bs_of(t);
    float y[256];
    T_CHECK(lmq_dequantize_row(t, block, y, bs) == LMQ_OK, "%s", lmq_last_error());
    for (int k = 0; k < n; k++)
        T_CHECK(y[idx[k]] == want[k], "%s: element %d = %g, want %g", lmq_type_name(t), idx[k],
                (double)y[idx[k]], (double)want[k]);
    if (!isnan(rest)) {
        int odd = 0;
        for (int i = 0; i < bs; i++) {
            bool listed = false;
            for (int k = 0; k < n; k++) listed |= idx[k] == i;
            if (!listed && y[i] != rest) odd++;
        }
        T_CHECK(odd == 0, "%s: %d other elements differ from %g", lmq_type_name(t), odd, (double)rest);
    }
}

static void test_layout_known(void)
{
    { /* f32 / f16 / bf16 */
        const float f = 1.5f;
        expect_elems(LMQ_TYPE_F32, &f, (int[]){0}, (float[]){1.5f}, 1, NAN);
        const uint16_t h = 0x3E00, b = 0x3FC0;
        expect_elems(LMQ_TYPE_F16, &h, (int[]){0}, (float[]){1.5f}, 1, NAN);
        expect_elems(LMQ_TYPE_BF16, &b, (int[]){0}, (float[]){1.5f}, 1, NAN);
    }
    { /* q4_0: d = 1; low nibble = element j, high = j + 16 */
        lmq_block_q4_0 b;
        b.d = 0x3C00;
        memset(b.qs, 0x88, sizeof b.qs);
        b.qs[0] = 0x1F;
        b.qs[3] = 0x80;
        expect_elems(LMQ_TYPE_Q4_0, &b, (int[]){0, 16, 3, 19}, (float[]){7, -7, -8, 0}, 4, 0.0f);
    }
    { /* q4_1: d = 2, m = -1 */
        lmq_block_q4_1 b;
        b.d = 0x4000;
        b.m = 0xBC00;
        memset(b.qs, 0, sizeof b.qs);
        b.qs[1] = 0x3A;
        expect_elems(LMQ_TYPE_Q4_1, &b, (int[]){1, 17}, (float[]){19, 5}, 2, -1.0f);
    }
    { /* q5_0: qh bit j is element j's 5th bit (bits 16-31: elements 16-31) */
        lmq_block_q5_0 b;
        b.d = 0x3C00;
        memset(b.qs, 0, sizeof b.qs);
        memset(b.qh, 0, sizeof b.qh);
        b.qh[0] = 0x20; /* element 5 */
        b.qh[2] = 0x10; /* element 20 */
        b.qs[4] = 0x50; /* element 4: 0, element 20: 5 */
        expect_elems(LMQ_TYPE_Q5_0, &b, (int[]){5, 20, 4}, (float[]){0, 5, -16}, 3, -16.0f);
    }
    { /* q5_1: d = 1, m = 0.5 */
        lmq_block_q5_1 b;
        b.d = 0x3C00;
        b.m = 0x3800;
        memset(b.qs, 0, sizeof b.qs);
        memset(b.qh, 0, sizeof b.qh);
        b.qh[3] = 0x80;  /* element 31 */
        b.qs[15] = 0x21; /* element 15: 1, element 31: 2 + 16 */
        expect_elems(LMQ_TYPE_Q5_1, &b, (int[]){15, 31}, (float[]){1.5f, 18.5f}, 2, 0.5f);
    }
    { /* q8_0 / q8_1 */
        lmq_block_q8_0 b;
        b.d = 0x3800;
        memset(b.qs, 0, sizeof b.qs);
        b.qs[7] = -3;
        b.qs[31] = 127;
        expect_elems(LMQ_TYPE_Q8_0, &b, (int[]){7, 31}, (float[]){-1.5f, 63.5f}, 2, 0.0f);
        lmq_block_q8_1 c;
        c.d = 0x3400;
        c.s = 0x7C00; /* s is not used by the dequantizer */
        memset(c.qs, 0, sizeof c.qs);
        c.qs[0] = -128;
        expect_elems(LMQ_TYPE_Q8_1, &c, (int[]){0}, (float[]){-32}, 1, 0.0f);
    }
    { /* iq4_nl: nibbles index the grid */
        lmq_block_iq4_nl b;
        b.d = 0x3C00;
        memset(b.qs, 0x88, sizeof b.qs);
        b.qs[0] = 0xF0;
        b.qs[15] = 0x78;
        expect_elems(LMQ_TYPE_IQ4_NL, &b, (int[]){0, 16, 15, 31}, (float[]){-127, 113, 1, -10}, 4,
                     1.0f);
    }
    { /* q2_K: element 50 = qs[18] bits 2-3 with scales[3]; element 200 =
       * qs[32 + 8] bits 4-5 with scales[12] */
        lmq_block_q2_K b;
        memset(&b, 0, sizeof b);
        b.d = 0x3C00;
        b.dmin = 0x3800;
        b.scales[3] = 0x25;  /* sc 5, m 2 */
        b.scales[12] = 0x17; /* sc 7, m 1 */
        b.qs[18] = 0x0C;
        b.qs[40] = 0x20;
        expect_elems(LMQ_TYPE_Q2_K, &b, (int[]){50, 49, 200, 199}, (float[]){14, -1, 13.5f, -0.5f}, 4,
                     NAN);
    }
    { /* q3_K: scale 5 = low nibble of scales[5] | bits 2-3 of scales[9]
       * (value - 32); element 80 = qs[16] bits 4-5, high bit hmask[16] bit 2 */
        lmq_block_q3_K b;
        memset(&b, 0, sizeof b);
        b.d = 0x3C00;
        memset(b.scales, 0, sizeof b.scales);
        for (int t = 0; t < 16; t++) /* every scale 0 | 2 << 4 = 32, i.e. value 0 */
            b.scales[8 + t % 4] |= (uint8_t)(2 << (2 * (t / 4)));
        b.scales[5] = 0x03;                        /* scale 5 low nibble 3 */
        b.scales[9] = (uint8_t)((b.scales[9] & ~0x0C) | (3 << 2)); /* scale 5 high 3 */
        /* scale 5 = 3 | 3 << 4 = 51 -> 19 */
        b.qs[16] = 0x30;       /* element 80: q = 3 */
        b.hmask[16] = 0x04;    /* element 80 high bit set: q - 0 */
        /* element 81: qs[17] = 0 with high bit clear: 0 - 4 */
        expect_elems(LMQ_TYPE_Q3_K, &b, (int[]){80, 81}, (float[]){57, -76}, 2, NAN);
    }
    { /* q4_K: scale/min 5 = low nibbles of scales[9] | top bits of scales[1]/[5] */
        lmq_block_q4_K b;
        memset(&b, 0, sizeof b);
        b.d = 0x3C00;
        b.dmin = 0x3800;
        b.scales[9] = 0x21;             /* sc5 low 1, m5 low 2 */
        b.scales[1] = (uint8_t)(1 << 6); /* sc5 high 1 -> sc5 = 17 */
        b.scales[5] = (uint8_t)(2 << 6); /* m5 high 2 -> m5 = 34 */
        /* element 170 = chunk 2, within 42 -> qs[64 + 10] high nibble */
        b.qs[74] = 0x90;
        /* element 186: chunk 2, within 58 -> qs[90] high nibble (0), sub-block 5 */
        expect_elems(LMQ_TYPE_Q4_K, &b, (int[]){170, 186}, (float[]){17 * 9 - 17, -17}, 2, NAN);
    }
    { /* q5_K: as q4_K, 5th bit of element i in qh[i % 32] bit i / 32 */
        lmq_block_q5_K b;
        memset(&b, 0, sizeof b);
        b.d = 0x3C00;
        b.dmin = 0x0000;
        b.scales[2] = 3; /* sc2 = 3 */
        /* element 70 = chunk 1, within 6: qs[32 + 6] low nibble; sub-block 2 */
        b.qs[38] = 0x04;
        b.qh[6] = 0x04; /* bit 2 = element 70 / 32 */
        expect_elems(LMQ_TYPE_Q5_K, &b, (int[]){70, 102}, (float[]){3 * 20, 0}, 2, 0.0f);
    }
    { /* q6_K: element 200 = half 1, quarter 2, l = 8: ql[64 + 8] high nibble,
       * qh[32 + 8] bits 4-5, scale 12 */
        lmq_block_q6_K b;
        memset(&b, 0, sizeof b);
        b.d = 0x3C00;
        memset(b.ql, 0, sizeof b.ql);
        for (int k = 0; k < 64; k++) b.qh[k] = 0xAA; /* high 2 bits = 2 -> q = 32 (zero) */
        for (int k = 0; k < 16; k++) b.scales[k] = 1;
        b.scales[12] = -3;
        b.ql[72] = 0x50;                /* low 4 bits of element 200 = 5 */
        b.qh[40] = (uint8_t)0x9A;       /* bits 4-5 = 1 for element 200 */
        /* q = 5 | 1 << 4 = 21 - 32 = -11 -> -3 * -11 = 33 */
        expect_elems(LMQ_TYPE_Q6_K, &b, (int[]){200}, (float[]){33}, 1, 0.0f);
    }
    { /* q8_K */
        lmq_block_q8_K b;
        memset(&b, 0, sizeof b);
        b.d = 0.5f;
        b.qs[255] = -7;
        expect_elems(LMQ_TYPE_Q8_K, &b, (int[]){255}, (float[]){-3.5f}, 1, 0.0f);
    }
    { /* iq4_xs: scale of sub-block 5 = low nibble of scales_l[2] high half |
       * bits 10-11 of scales_h */
        lmq_block_iq4_xs b;
        memset(&b, 0, sizeof b);
        b.d = 0x3C00;
        b.scales_h = (uint16_t)(2 << 10); /* sub-block 5 high bits 2 */
        b.scales_l[2] = 0x30;             /* sub-block 5 low nibble 3 -> 35 - 32 = 3 */
        memset(b.qs, 0x88, sizeof b.qs);  /* grid[8] = 1 */
        b.qs[16 * 5 + 2] = 0xF8;          /* element 162: grid[8], element 178: grid[15] */
        /* the other sub-blocks' scale is -32 */
        expect_elems(LMQ_TYPE_IQ4_XS, &b, (int[]){162, 178, 0}, (float[]){3, 339, -32}, 3, NAN);
    }
    { /* fp8 blocks: scale 2^(e-127) */
        lmq_block_f8 b;
        memset(&b, 0, sizeof b);
        b.e = 125;      /* 1/4 */
        b.qs[3] = 0x38; /* e4m3 1.0 / e5m2 0.5 */
        b.qs[4] = 0xC4; /* e4m3: -, e 8, m 4: -3; e5m2: -, e 17, m 0: -4 */
        expect_elems(LMQ_TYPE_F8_E4M3, &b, (int[]){3, 4}, (float[]){0.25f, -0.75f}, 2, 0.0f);
        expect_elems(LMQ_TYPE_F8_E5M2, &b, (int[]){3, 4}, (float[]){0.125f, -1.0f}, 2, 0.0f);
    }
    { /* mxfp4: E2M1 codes, scale 2^(e-127); low nibble = element j, high = j + 16 */
        lmq_block_mxfp4 b;
        memset(&b, 0, sizeof b);
        b.e = 126;      /* 1/2 */
        b.qs[0] = 0xF7; /* element 0: +6 * 1/2, element 16: -6 * 1/2 */
        b.qs[2] = 0x91; /* element 2: +0.5 * 1/2, element 18: -0.5 * 1/2 */
        b.qs[5] = 0x08; /* element 5: -0 */
        expect_elems(LMQ_TYPE_MXFP4, &b, (int[]){0, 16, 2, 18, 5}, (float[]){3, -3, 0.25f, -0.25f, 0}, 5, 0.0f);
        b.e = 0;        /* 2^-127: element 0 is 6 * 2^-127, a subnormal */
        expect_elems(LMQ_TYPE_MXFP4, &b, (int[]){0, 16}, (float[]){0x1.8p-125f, -0x1.8p-125f}, 2, NAN);
        b.e = 254;      /* 2^127: element 2 is 0.5 * 2^127; 6 * 2^127 is beyond f32 (as in ggml) */
        expect_elems(LMQ_TYPE_MXFP4, &b, (int[]){0, 2}, (float[]){INFINITY, 0x1p+126f}, 2, NAN);
    }
}

/* ======================================================================
 * Round trips
 * ====================================================================== */

/* Relative RMSE bounds on N(0,1) rows of 4096 (fixed seed), measured with
 * this implementation (value in the comment) and set 5% above. */
static const struct {
    lmq_type t;
    double bound;
} rt_bounds[] = {
    {LMQ_TYPE_F32, 0.0},       /* exact */
    {LMQ_TYPE_F16, 0.00023},   /* 0.000210 */
    {LMQ_TYPE_BF16, 0.0018},   /* 0.001672 */
    {LMQ_TYPE_Q4_0, 0.0915},   /* 0.087123 */
    {LMQ_TYPE_Q4_1, 0.082},    /* 0.078113 */
    {LMQ_TYPE_Q5_0, 0.045},    /* 0.042885 */
    {LMQ_TYPE_Q5_1, 0.040},    /* 0.038057 */
    {LMQ_TYPE_Q8_0, 0.0057},   /* 0.005351 */
    {LMQ_TYPE_Q8_1, 0.0057},   /* 0.005351 */
    {LMQ_TYPE_Q2_K, 0.279},    /* 0.265677 */
    {LMQ_TYPE_Q3_K, 0.154},    /* 0.146413 */
    {LMQ_TYPE_Q4_K, 0.0746},   /* 0.071073 */
    {LMQ_TYPE_Q5_K, 0.0367},   /* 0.034946 */
    {LMQ_TYPE_Q6_K, 0.0182},   /* 0.017288 */
    {LMQ_TYPE_Q8_K, 0.0072},   /* 0.006848 */
    {LMQ_TYPE_IQ4_NL, 0.0774}, /* 0.073680 */
    {LMQ_TYPE_TQ1_0, 0.46},    /* 0.438742 */
    {LMQ_TYPE_TQ2_0, 0.46},    /* 0.438742 */
    {LMQ_TYPE_IQ4_XS, 0.0778}, /* 0.074061 */
    {LMQ_TYPE_F8_E4M3, 0.028}, /* 0.026687 */
    {LMQ_TYPE_F8_E5M2, 0.055}, /* 0.052393 */
    {LMQ_TYPE_MXFP4, 0.1212},  /* 0.115399 */
};

/* How far a lone outlier may move (relative; 0.1 for the types not listed):
 * mxfp4's exponent (ggml's) puts amax / d in [8, 16), so the block maximum
 * saturates at 12 d, up to 25% low. */
static const struct {
    lmq_type t;
    double tol;
} k_outlier_tol[] = {{LMQ_TYPE_MXFP4, 0.25}};

/* Types whose quantizer takes importance weights (ggml's, the same set,
 * and mxfp4, whose exponent lmq searches; ggml's ignores them); the others
 * must ignore them. With 1 column in 5 weighted 100x on
 * Gaussian data the weighted error of these drops by at least this factor
 * (measured: see the "imatrix:" lines this test prints). */
static const lmq_type k_uses_imatrix[] = {
    LMQ_TYPE_Q4_0, LMQ_TYPE_Q4_1, LMQ_TYPE_Q5_0, LMQ_TYPE_Q5_1, LMQ_TYPE_Q2_K, LMQ_TYPE_Q3_K,
    LMQ_TYPE_Q4_K, LMQ_TYPE_Q5_K, LMQ_TYPE_Q6_K, LMQ_TYPE_IQ4_NL, LMQ_TYPE_IQ4_XS, LMQ_TYPE_MXFP4,
    LMQ_TYPE_TQ1_0, LMQ_TYPE_TQ2_0,
};
#define IMATRIX_GAIN 0.85

static float *quant_roundtrip(lmq_type t, const float *x, int64_t n, const float *imatrix)
{
    uint8_t *q = malloc((size_t)lmq_row_size(t, n));
    float *y = malloc(sizeof(float) * (size_t)n);
    lmq_status s = lmq_quantize_row(t, x, q, n, imatrix);
    T_CHECK(s == LMQ_OK, "%s: %s", lmq_type_name(t), lmq_last_error());
    s = lmq_dequantize_row(t, q, y, n);
    T_CHECK(s == LMQ_OK, "%s: %s", lmq_type_name(t), lmq_last_error());
    free(q);
    return y;
}

static void test_roundtrip_gauss(void)
{
    enum { N = 4096 };
    float *x = malloc(sizeof(float) * N);
    fill_gauss(x, N, 1.0f);
    printf("round trip on N(0,1), rows of %d: relative RMSE\n", N);
    int n_writable = 0;
    for (int t = 0; t < LMQ_TYPE_COUNT; t++) n_writable += lmq_type_can_quantize((lmq_type)t);
    T_CHECK(sizeof rt_bounds / sizeof rt_bounds[0] == (size_t)n_writable, "a bound for every type lmq writes");
    for (size_t k = 0; k < sizeof rt_bounds / sizeof rt_bounds[0]; k++) {
        const lmq_type t = rt_bounds[k].t;
        float *y = quant_roundtrip(t, x, N, NULL);
        const double e = rel_rmse(x, y, N);
        printf("  %-8s %.6f (bound %.4f)\n", lmq_type_name(t), e, rt_bounds[k].bound);
        T_CHECK(e <= rt_bounds[k].bound, "%s: relative RMSE %.6f above %.4f", lmq_type_name(t), e,
                rt_bounds[k].bound);
        /* scale invariance: x * 2^-20 and x * 2^20 quantize the same way */
        float *xs = malloc(sizeof(float) * N);
        for (int i = 0; i < N; i++) xs[i] = x[i] * 0x1p-10f;
        float *ys = quant_roundtrip(t, xs, N, NULL);
        const double es = rel_rmse(xs, ys, N);
        T_CHECK(es <= rt_bounds[k].bound * 1.05 + 1e-9, "%s: scaled by 2^-10: %.6f", lmq_type_name(t),
                es);
        free(xs);
        free(ys);
        free(y);
    }
    free(x);
}

static void test_roundtrip_special(void)
{
    enum { N = 512 };
    float x[N], imat[N];
    for (int ti = 0; ti < LMQ_TYPE_COUNT; ti++) {
        const lmq_type t = (lmq_type)ti;
        const char *nm = lmq_type_name(t);
        if (!lmq_type_can_quantize(t)) continue; /* read only: test_quant_iq.c */
        /* zeros decode to exact zeros */
        memset(x, 0, sizeof x);
        float *y = quant_roundtrip(t, x, N, NULL);
        int nz = 0;
        for (int i = 0; i < N; i++) nz += y[i] != 0.0f;
        T_CHECK(nz == 0, "%s: %d non-zero values from an all-zero row", nm, nz);
        free(y);

        /* one huge outlier: it survives (relative error bounded by the
         * format's own resolution) and other blocks are unaffected */
        fill_gauss(x, N, 0.02f);
        x[77] = 1000.0f;
        y = quant_roundtrip(t, x, N, NULL);
        double bound = 0, outlier = 0.1;
        for (size_t k = 0; k < sizeof rt_bounds / sizeof rt_bounds[0]; k++)
            if (rt_bounds[k].t == t) bound = rt_bounds[k].bound;
        for (size_t k = 0; k < sizeof k_outlier_tol / sizeof k_outlier_tol[0]; k++)
            if (k_outlier_tol[k].t == t) outlier = k_outlier_tol[k].tol;
        T_CHECK(fabs(y[77] - 1000.0) <= outlier * 1000.0, "%s: outlier 1000 -> %g", nm, (double)y[77]);
        const int bs = bs_of(t);
        const int ob = 77 / bs; /* outlier's block */
        double se = 0, ss = 0;
        for (int i = 0; i < N; i++) {
            if (i / bs == ob) continue;
            se += (double)(y[i] - x[i]) * (y[i] - x[i]);
            ss += (double)x[i] * x[i];
        }
        T_CHECK(sqrt(se / ss) <= bound * 1.6 + 1e-9, "%s: other blocks' relative RMSE %.4f", nm,
                sqrt(se / ss));
        free(y);

        /* subnormal inputs: finite output, error no larger than the input */
        for (int i = 0; i < N; i++) x[i] = (float)((i % 7) - 3) * 1e-40f;
        y = quant_roundtrip(t, x, N, NULL);
        int bad = 0;
        for (int i = 0; i < N; i++) bad += !isfinite(y[i]) || fabsf(y[i] - x[i]) > 4e-40f;
        T_CHECK(bad == 0, "%s: %d bad values from subnormal input", nm, bad);
        free(y);

        /* huge magnitudes: never NaN or Inf (f16 scales saturate) */
        fill_gauss(x, N, 1e30f);
        y = quant_roundtrip(t, x, N, NULL);
        bad = 0;
        for (int i = 0; i < N; i++) bad += !isfinite(y[i]) && t != LMQ_TYPE_F16;
        T_CHECK(bad == 0, "%s: %d non-finite values from |x| ~ 1e30", nm, bad);
        free(y);

        /* importance weights: weighted error on the emphasised columns is
         * not worse than without them (types that use them) */
        fill_gauss(x, N, 1.0f);
        for (int i = 0; i < N; i++) imat[i] = (i % 5 == 0) ? 100.0f : 1.0f;
        float *y0 = quant_roundtrip(t, x, N, NULL), *y1 = quant_roundtrip(t, x, N, imat);
        double e0 = 0, e1 = 0;
        for (int i = 0; i < N; i++) {
            e0 += imat[i] * (double)(y0[i] - x[i]) * (y0[i] - x[i]);
            e1 += imat[i] * (double)(y1[i] - x[i]) * (y1[i] - x[i]);
        }
        bool uses = false;
        for (size_t k = 0; k < sizeof k_uses_imatrix / sizeof k_uses_imatrix[0]; k++)
            uses |= k_uses_imatrix[k] == t;
        /* the ternary types have one scale and one threshold per 256: the
         * weights can only choose among a few (measured x0.97-1.0) */
        const double gain = t == LMQ_TYPE_TQ1_0 || t == LMQ_TYPE_TQ2_0 ? 1.0 : IMATRIX_GAIN;
        if (uses)
            /* the weights change the result in the direction they ask for */
            T_CHECK(e1 <= e0 * gain, "%s: weighted error with imatrix %.5g, without %.5g (want <= x%.2f)",
                    nm, e1, e0, gain);
        else
            T_CHECK(!memcmp(y0, y1, sizeof(float) * N), "%s: ignores the imatrix, yet the result changed", nm);
        printf("%-8s imatrix: weighted error x%.3f\n", nm, e0 > 0 ? e1 / e0 : 1.0);
        free(y0);
        free(y1);
    }
}

/* ======================================================================
 * Errors, threads
 * ====================================================================== */

static void test_errors(void)
{
    float x[256] = {0};
    uint8_t q[1024];
    float y[256];
    x[10] = NAN;
    T_CHECK(lmq_quantize_row(LMQ_TYPE_Q4_K, x, q, 256, NULL) == LMQ_ERR_INVALID_ARG, "NaN rejected");
    T_CHECK(strstr(lmq_last_error(), "NaN") && strstr(lmq_last_error(), "10"),
            "message names NaN and the index: %s", lmq_last_error());
    x[10] = -INFINITY;
    T_CHECK(lmq_quantize_row(LMQ_TYPE_Q8_0, x, q, 256, NULL) == LMQ_ERR_INVALID_ARG, "Inf rejected");
    T_CHECK(strstr(lmq_last_error(), "infinite") != NULL, "message: %s", lmq_last_error());
    x[10] = 0;
    /* one thread limit everywhere: more is refused, not silently reduced */
    T_CHECK(lmq_quantize_rows(LMQ_TYPE_Q8_0, x, q, 1, 256, NULL, LMQ_MAX_THREADS + 1) == LMQ_ERR_INVALID_ARG &&
                strstr(lmq_last_error(), "at most 512"),
            "more than LMQ_MAX_THREADS refused: %s", lmq_last_error());
    T_CHECK(lmq_quantize_rows(LMQ_TYPE_Q8_0, x, q, 1, 256, NULL, LMQ_MAX_THREADS) == LMQ_OK, "LMQ_MAX_THREADS accepted");
    T_CHECK(lmq_quantize_row(LMQ_TYPE_Q4_K, x, q, 100, NULL) == LMQ_ERR_INVALID_ARG, "n not a multiple of 256");
    T_CHECK(strstr(lmq_last_error(), "q4_K") && strstr(lmq_last_error(), "256"), "message: %s",
            lmq_last_error());
    T_CHECK(lmq_dequantize_row(LMQ_TYPE_Q4_0, q, y, 33) == LMQ_ERR_INVALID_ARG, "dequantize n not a multiple of 32");
    T_CHECK(lmq_quantize_row((lmq_type)99, x, q, 32, NULL) == LMQ_ERR_INVALID_ARG, "bad type");
    T_CHECK(lmq_quantize_row((lmq_type)-1, x, q, 32, NULL) == LMQ_ERR_INVALID_ARG, "negative type");
    T_CHECK(lmq_dequantize_row(LMQ_TYPE_COUNT, q, y, 32) == LMQ_ERR_INVALID_ARG, "COUNT type");
    T_CHECK(lmq_quantize_row(LMQ_TYPE_Q4_0, NULL, q, 32, NULL) == LMQ_ERR_INVALID_ARG, "NULL src");
    T_CHECK(lmq_quantize_row(LMQ_TYPE_Q4_0, x, q, 0, NULL) == LMQ_OK, "empty row");
    float w[256];
    for (int i = 0; i < 256; i++) w[i] = 1.0f;
    w[5] = -1.0f;
    T_CHECK(lmq_quantize_row(LMQ_TYPE_Q4_K, x, q, 256, w) == LMQ_ERR_INVALID_ARG, "negative weight");
    w[5] = NAN;
    T_CHECK(lmq_quantize_row(LMQ_TYPE_Q4_K, x, q, 256, w) == LMQ_ERR_INVALID_ARG, "NaN weight");
    T_CHECK(strstr(lmq_last_error(), "weight 5") != NULL, "message: %s", lmq_last_error());
    T_CHECK(!lmq_type_can_quantize((lmq_type)99) && lmq_dequantize_fn((lmq_type)99) == NULL,
            "invalid type has no row");
    /* every type decodes; all but the seven codebook types (read only)
     * are written too */
    for (int t = 0; t < LMQ_TYPE_COUNT; t++) {
        const bool ro = t >= LMQ_TYPE_IQ2_XXS && t <= LMQ_TYPE_IQ1_M;
        T_CHECK(lmq_type_can_quantize((lmq_type)t) == !ro && lmq_dequantize_fn((lmq_type)t) != NULL,
                "%s has a row", lmq_type_name((lmq_type)t));
    }

    /* tensors: the bad row and element are named */
    enum { R = 6, C = 256 };
    float *m = malloc(sizeof(float) * R * C);
    fill_gauss(m, R * C, 1.0f);
    m[4 * C + 17] = NAN;
    uint8_t *qq = malloc((size_t)lmq_row_size(LMQ_TYPE_Q4_K, C) * R);
    T_CHECK(lmq_quantize_rows(LMQ_TYPE_Q4_K, m, qq, R, C, NULL, 2) == LMQ_ERR_INVALID_ARG,
            "NaN in a tensor");
    T_CHECK(strstr(lmq_last_error(), "row 4") && strstr(lmq_last_error(), "element 17"),
            "message: %s", lmq_last_error());
    T_CHECK(lmq_quantize_rows(LMQ_TYPE_Q4_K, m, qq, -1, C, NULL, 1) == LMQ_ERR_INVALID_ARG,
            "negative rows");
    free(m);
    free(qq);
}

static void test_threads(void)
{
    enum { R = 37, C = 512 };
    float *m = malloc(sizeof(float) * R * C), imat[C];
    fill_gauss(m, R * C, 0.5f);
    for (int i = 0; i < C; i++) imat[i] = 0.5f + rng_uniform();
    for (int ti = 0; ti < LMQ_TYPE_COUNT; ti++) {
        const lmq_type t = (lmq_type)ti;
        if (!lmq_type_can_quantize(t)) continue;
        const size_t sz = (size_t)lmq_row_size(t, C) * R;
        uint8_t *a = malloc(sz), *b = malloc(sz), *c = malloc(sz), *rowwise = malloc(sz);
        T_CHECK(lmq_quantize_rows(t, m, a, R, C, imat, 1) == LMQ_OK, "%s", lmq_last_error());
        T_CHECK(lmq_quantize_rows(t, m, b, R, C, imat, 2) == LMQ_OK, "%s", lmq_last_error());
        T_CHECK(lmq_quantize_rows(t, m, c, R, C, imat, 5) == LMQ_OK, "%s", lmq_last_error());
        for (int r = 0; r < R; r++)
            lmq_quantize_row(t, m + (size_t)r * C, rowwise + (size_t)r * lmq_row_size(t, C), C, imat);
        T_CHECK(memcmp(a, b, sz) == 0 && memcmp(a, c, sz) == 0, "%s: 1/2/5 threads differ",
                lmq_type_name(t));
        T_CHECK(memcmp(a, rowwise, sz) == 0, "%s: rows differ from row-by-row", lmq_type_name(t));
        free(a);
        free(b);
        free(c);
        free(rowwise);
    }
    free(m);
}

/* ======================================================================
 * fp8
 * ====================================================================== */

typedef struct {
    const char *name;
    float (*def)(uint8_t);
    const float *table;
    float (*to)(uint8_t);
    uint8_t (*from)(float);
    float max;
    uint8_t max_code;
} fp8_case;

/* Nearest code to x by exhaustive search (ties to the even code), saturating. */
static uint8_t brute_encode(const fp8_case *c, float x)
{
    if (isnan(x)) return 0;
    const float a = fabsf(x);
    int best = 0;
    float bd = INFINITY;
    for (int k = 0; k <= c->max_code; k++) {
        const float d = fabsf(c->def((uint8_t)k) - a);
        if (d < bd || (d == bd && (k & 1) == 0)) {
            bd = d;
            best = k;
        }
    }
    return (uint8_t)(best | (signbit(x) ? 0x80 : 0));
}

static void test_fp8(void)
{
    const fp8_case cases[2] = {
        {"e4m3", e4m3_def, lmq_fp8_e4m3_table, lmq_fp8_e4m3_to_f32, lmq_fp8_e4m3_from_f32, 448.0f, 0x7E},
        {"e5m2", e5m2_def, lmq_fp8_e5m2_table, lmq_fp8_e5m2_to_f32, lmq_fp8_e5m2_from_f32, 57344.0f,
         0x7B},
    };
    for (int ci = 0; ci < 2; ci++) {
        const fp8_case *c = &cases[ci];
        int bad_dec = 0, bad_rt = 0;
        for (int k = 0; k < 256; k++) {
            const float want = c->def((uint8_t)k);
            const float got = c->to((uint8_t)k), tab = c->table[k];
            const bool eq = (isnan(want) && isnan(got) && isnan(tab)) ||
                            (memcmp(&want, &got, 4) == 0 && memcmp(&want, &tab, 4) == 0);
            bad_dec += !eq;
            if (isfinite(want)) bad_rt += c->from(want) != (uint8_t)k;
        }
        T_CHECK(bad_dec == 0, "%s: %d codes decode wrongly", c->name, bad_dec);
        T_CHECK(bad_rt == 0, "%s: %d finite codes do not round-trip", c->name, bad_rt);
        T_CHECK(c->def(c->max_code) == c->max, "%s: max", c->name);
        /* ties: the midpoint of neighbouring codes goes to the even one,
         * a hair above it to the upper, below to the lower */
        int bad_tie = 0;
        for (int k = 0; k < c->max_code; k++) {
            const float lo = c->def((uint8_t)k), hi = c->def((uint8_t)(k + 1));
            const float mid = 0.5f * (lo + hi);
            const uint8_t even = (uint8_t)((k & 1) ? k + 1 : k);
            bad_tie += c->from(mid) != even;
            bad_tie += c->from(-mid) != (uint8_t)(even | 0x80);
            bad_tie += c->from(nextafterf(mid, INFINITY)) != (uint8_t)(k + 1);
            bad_tie += c->from(nextafterf(mid, 0.0f)) != (uint8_t)k;
        }
        T_CHECK(bad_tie == 0, "%s: %d tie/neighbour roundings wrong", c->name, bad_tie);
        /* saturation and specials */
        T_CHECK(c->from(c->max * 1.07f) == c->max_code, "%s: just above max saturates", c->name);
        T_CHECK(c->from(1e30f) == c->max_code && c->from(INFINITY) == c->max_code, "%s: big", c->name);
        T_CHECK(c->from(-INFINITY) == (uint8_t)(0x80 | c->max_code), "%s: -Inf", c->name);
        T_CHECK(isnan(c->to(c->from(NAN))), "%s: NaN stays NaN", c->name);
        T_CHECK(c->from(-0.0f) == 0x80 && c->from(0.0f) == 0x00, "%s: signed zero", c->name);
        T_CHECK(c->from(c->def(1) * 0.49f) == 0 && c->from(c->def(1) * 0.51f) == 1,
                "%s: below half the smallest subnormal", c->name);
        /* random values against exhaustive nearest-even search */
        int bad_rand = 0;
        for (int k = 0; k < 20000; k++) {
            const float v = ldexpf(rng_uniform() * 2.0f - 1.0f, (int)(rng_u64() % 40) - 20);
            bad_rand += c->from(v) != brute_encode(c, v);
        }
        T_CHECK(bad_rand == 0, "%s: %d random values encode off-nearest", c->name, bad_rand);
    }
    /* e4m3 has no infinity: 0x7F is NaN, 0x7E is 448; e5m2 0x7C is Inf */
    T_CHECK(isnan(lmq_fp8_e4m3_to_f32(0x7F)) && isnan(lmq_fp8_e4m3_to_f32(0xFF)), "e4m3 NaN codes");
    T_CHECK(lmq_fp8_e4m3_to_f32(0x7E) == 448.0f, "e4m3 max");
    T_CHECK(isinf(lmq_fp8_e5m2_to_f32(0x7C)) && lmq_fp8_e5m2_to_f32(0xFB) == -57344.0f, "e5m2 Inf/max");

    /* blocks: the scale is the power of two that fits the block max, or
     * one below it when that has lower error; never above */
    const lmq_type ft[2] = {LMQ_TYPE_F8_E4M3, LMQ_TYPE_F8_E5M2};
    for (int ci = 0; ci < 2; ci++) {
        const fp8_case *c = &cases[ci];
        for (int trial = 0; trial < 200; trial++) {
            float x[32];
            fill_gauss(x, 32, ldexpf(1.0f, (int)(rng_u64() % 60) - 30));
            lmq_block_f8 b;
            T_CHECK(lmq_quantize_row(ft[ci], x, &b, 32, NULL) == LMQ_OK, "%s", lmq_last_error());
            float amax = 0;
            for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
            int e_fit = 0; /* smallest e with amax * 2^(127-e) <= max */
            while (ldexpf(amax, 127 - e_fit) > c->max) e_fit++;
            if (!(b.e == e_fit || b.e == e_fit - 1)) {
                T_CHECK(false, "%s: block scale e %d, fitting e %d", c->name, b.e, e_fit);
                break;
            }
            /* error not above the fitting scale's error */
            double err = 0, err_fit = 0;
            for (int j = 0; j < 32; j++) {
                const float v = c->to(b.qs[j]) * ldexpf(1.0f, b.e - 127);
                const float vf = c->to(c->from(ldexpf(x[j], 127 - e_fit))) * ldexpf(1.0f, e_fit - 127);
                err += (double)(v - x[j]) * (v - x[j]);
                err_fit += (double)(vf - x[j]) * (vf - x[j]);
            }
            if (!(err <= err_fit)) {
                T_CHECK(false, "%s: block error %g above the fitting scale's %g", c->name, err,
                        err_fit);
                break;
            }
        }
    }
}

/* ======================================================================
 * MXFP4: ggml's quantizer, restated
 * ====================================================================== */

/* ggml's quantize_row_mxfp4_ref as ik_llama.cpp and llama.cpp write it
 * (iqk_quantize.cpp quantize_row_mxfp4_impl, best_index_mxfp4), statement
 * by statement: amax, e = (uint8_t)(floorf(log2f(amax)) - 2 + 127) (the
 * inputs here keep it in range), d = e8m0 "half" (2^(e - 128)), each
 * element the first of the 16 kvalues minimising |x - d kvalue|. */
static const int8_t ggml_kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static float ggml_e8m0_to_fp32_half(uint8_t x)
{
    static const uint32_t val[2] = {0x00200000, 0x00400000};
    union { float f; uint32_t u; } helper;
    helper.u = x >= 2 ? (uint32_t)(x - 1) << 23u : val[x];
    return helper.f;
}

static int ggml_best_index_mxfp4(float d, const int8_t *values, float x)
{
    float best = fabsf(x - d * values[0]);
    int index = 0;
    for (int j = 1; j < 16; ++j) {
        float diff = fabsf(x - d * values[j]);
        if (diff < best) {
            best = diff;
            index = j;
        }
    }
    return index;
}

static void ggml_quantize_row_mxfp4(const float *x, uint8_t *out, int64_t n)
{
    for (int64_t ib = 0; ib < n / 32; ++ib) {
        uint8_t *y = out + 17 * ib;
        memset(y, 0, 17);
        const float *xb = x + ib * 32;
        float amax = 0;
        for (int j = 0; j < 32; ++j) {
            float ax = fabsf(xb[j]);
            amax = amax > ax ? amax : ax;
        }
        if (!amax) continue;
        const uint8_t e = (uint8_t)(floorf(log2f(amax)) - 2 + 127);
        const float d = ggml_e8m0_to_fp32_half(e);
        y[0] = e;
        for (int j = 0; j < 16; ++j) {
            uint8_t v0 = (uint8_t)ggml_best_index_mxfp4(d, ggml_kvalues_mxfp4, xb[j]);
            uint8_t v1 = (uint8_t)ggml_best_index_mxfp4(d, ggml_kvalues_mxfp4, xb[j + 16]);
            y[1 + j] = (uint8_t)(v0 | (v1 << 4));
        }
    }
}

/* lmq's mxfp4 without importance weights gives ggml's bytes on rows that
 * probe every branch: Gaussian rows at many scales (subnormal d included),
 * values at exact ties between two grid values and at the grid values
 * themselves, amax just below and at powers of two (where log2f's rounding
 * decides e), zero blocks and lone non-zeros; and ties resolved as ggml
 * does, worked out by hand. The real blocks of a gpt-oss GGUF are checked
 * in golden_quant.c. */
static void test_mxfp4_ggml(void)
{
    enum { N = 32 * 64 };
    float *x = malloc(sizeof(float) * N);
    uint8_t want[17 * (N / 32)], got[17 * (N / 32)];
    int rows = 0, bad_rows = 0;
    for (int r = 0; r < 400; r++) {
        const int kind = r % 5;
        const float scale = ldexpf(1.0f, (r * 37) % 220 - 118); /* 2^-118 .. 2^101 */
        fill_gauss(x, N, scale);
        for (int b = 0; b < N / 32; b++) {
            float *xb = x + 32 * b;
            const float d = ldexpf(1.0f, (int)(rng_u64() % 40) - 20);
            if (kind == 1) /* ties: halfway between neighbours of the grid, and one ulp either side */
                for (int j = 0; j < 32; j++) {
                    static const float mid[] = {0.5f, 1.5f, 2.5f, 3.5f, 5.0f, 7.0f, 10.0f, 14.0f, 15.9f};
                    const float v = mid[rng_u64() % 9] * d * (rng_u64() & 1 ? -1.0f : 1.0f);
                    const int nudge = (int)(rng_u64() % 3);
                    xb[j] = nudge == 0 ? v : nextafterf(v, nudge == 1 ? INFINITY : -INFINITY);
                }
            if (kind == 2) /* on the grid (the largest at 8 or 12 d) */
                for (int j = 0; j < 32; j++) xb[j] = (float)ggml_kvalues_mxfp4[rng_u64() % 16] * d;
            if (kind == 3) { /* amax at, just below or just above a power of two */
                const float p2 = ldexpf(1.0f, (int)(rng_u64() % 60) - 30);
                const int w = (int)(rng_u64() % 3);
                xb[rng_u64() % 32] = w == 0 ? p2 : w == 1 ? nextafterf(p2, 0.0f) : nextafterf(p2, INFINITY);
                for (int j = 0; j < 32; j++) xb[j] = fminf(fmaxf(xb[j], -p2 * 0.999f), p2 * 1.001f);
            }
            if (kind == 4 && b % 3 == 0) memset(xb, 0, 32 * sizeof(float)); /* zero blocks ... */
            if (kind == 4 && b % 3 == 1) { /* ... and a lone value */
                memset(xb, 0, 32 * sizeof(float));
                xb[b % 32] = -scale;
            }
        }
        ggml_quantize_row_mxfp4(x, want, N);
        T_CHECK(lmq_quantize_row(LMQ_TYPE_MXFP4, x, got, N, NULL) == LMQ_OK, "%s", lmq_last_error());
        bad_rows += memcmp(want, got, sizeof got) != 0;
        rows++;
    }
    T_CHECK(bad_rows == 0, "mxfp4: %d of %d rows differ from ggml's quantizer", bad_rows, rows);

    /* d = 1 (amax 12: e = 128); values between grid points round to the
     * nearest, ties to the smaller magnitude, beyond 12 saturate */
    float xb[32] = {12, 5, -5, 0.5f, -0.5f, 10, -10, 14, 2.4f, -6.9f, 1.5f, -2.5f, 0.25f, -0.75f};
    uint8_t blk[17];
    T_CHECK(lmq_quantize_row(LMQ_TYPE_MXFP4, xb, blk, 32, NULL) == LMQ_OK, "quantize");
    static const int codes[14] = {7, 4, 12, 0, 0, 6, 14, 7, 2, 13, 1, 10, 0, 9};
    int bad = blk[0] != 128;
    for (int j = 0; j < 14; j++) bad += (blk[1 + j] & 15) != codes[j];
    T_CHECK(bad == 0, "mxfp4 hand-worked block: e %d, %d codes differ", blk[0], bad);
    /* all zero: e = 0, codes 0 (not the -0 code 8) */
    memset(xb, 0, sizeof xb);
    memset(blk, 0xAB, sizeof blk);
    T_CHECK(lmq_quantize_row(LMQ_TYPE_MXFP4, xb, blk, 32, NULL) == LMQ_OK && blk[0] == 0 && blk[1] == 0 && blk[16] == 0,
            "mxfp4 zero block");
    /* idempotent: blocks of ggml's quantizer decode to values it quantizes
     * back to the same bytes */
    fill_gauss(x, N, 0.3f);
    ggml_quantize_row_mxfp4(x, want, N);
    T_CHECK(lmq_dequantize_row(LMQ_TYPE_MXFP4, want, x, N) == LMQ_OK, "dequantize");
    T_CHECK(lmq_quantize_row(LMQ_TYPE_MXFP4, x, got, N, NULL) == LMQ_OK && !memcmp(want, got, sizeof got),
            "mxfp4: re-quantizing decoded blocks gives the same bytes");
    free(x);
}

/* ======================================================================
 * Activation quantizers
 * ====================================================================== */

static void test_activation_quantizers(void)
{
    enum { N = 512 };
    float x[N];
    fill_gauss(x, N, 3.0f);
    x[100] = -20.0f; /* largest magnitude, negative */
    lmq_block_q8_K k[N / 256];
    lmq_quantize_row_q8_K_ref(x, k, N);
    int bad_sum = 0, bad_val = 0;
    for (int b = 0; b < N / 256; b++) {
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += k[b].qs[16 * g + j];
            bad_sum += s != k[b].bsums[g];
        }
        for (int j = 0; j < 256; j++) bad_val += fabsf(k[b].d * (float)k[b].qs[j] - x[256 * b + j]) > 0.5001f * fabsf(k[b].d);
    }
    T_CHECK(bad_sum == 0, "q8_K: %d bsums wrong", bad_sum);
    T_CHECK(bad_val == 0, "q8_K: %d values off by more than half a step", bad_val);
    /* ggml: the signed absmax maps to -127, so d = max / -127 */
    T_CHECK(k[0].qs[100] == -127 && k[0].d == 1.0f / (-127.0f / -20.0f), "q8_K max -> %d, d %g",
            k[0].qs[100], (double)k[0].d);

    lmq_block_q8_0 a[N / 32];
    lmq_block_q8_1 c[N / 32];
    lmq_quantize_row_q8_0_ref(x, a, N);
    lmq_quantize_row_q8_1_ref(x, c, N);
    int bad0 = 0, bad1 = 0;
    for (int b = 0; b < N / 32; b++) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[32 * b + j]));
        const float d = amax / 127.0f;
        bad0 += a[b].d != lmq_fp32_to_fp16(d) || memcmp(a[b].qs, c[b].qs, 32) != 0 || a[b].d != c[b].d;
        int s = 0;
        const float id = 1.0f / d;
        for (int j = 0; j < 32; j++) {
            s += c[b].qs[j];
            bad0 += a[b].qs[j] != (int8_t)roundf(x[32 * b + j] * id);
        }
        bad1 += c[b].s != lmq_fp32_to_fp16((float)s * d);
    }
    T_CHECK(bad0 == 0, "q8_0: %d mismatches", bad0);
    T_CHECK(bad1 == 0, "q8_1: %d sums wrong", bad1);
}

int main(void)
{
    test_layout_known();
    test_layout_random();
    test_roundtrip_gauss();
    test_roundtrip_special();
    test_errors();
    test_threads();
    test_fp8();
    test_mxfp4_ggml();
    test_activation_quantizers();
    return t_finish();
}
