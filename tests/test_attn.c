/* Unit tests of the attention kernel (lmq_attn): every ISA compiled and
 * supported here against the scalar oracle lmq_attn_ref on odd sizes (head
 * size, keys, queries, group), f32 / f16 / q8_0 caches, causal masks with a
 * past, sliding windows over ring caches, soft-caps, attention sinks; a
 * tile's rows give the same bits whatever tiles the work is split into; the
 * oracle's sinks against the softmax with a sink written out directly; a
 * sink too small to matter changes no bit; the q8_0 cache's round trip
 * error. Self-contained (no files): also built for aarch64 by
 * scripts/test-arm.sh. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "testutil.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;

static float frand(void) /* uniform in [-1, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 16) & 0xFFFFFF) / 8388608.0f - 1.0f;
}

/* Largest error of the SIMD kernels against the oracle, relative to the
 * largest |v| of the cache: measured 2026-11-24 at most 2.1e-7 (f32),
 * 1.8e-7 (f16), 2.7e-7 (q8_0) on AVX2 and AVX-512 over the cases below; the
 * bound leaves a factor of about 4 (f32 sums of up to 600 terms in another
 * order, a polynomial exp of 2 ulp). */
#define ATTN_TOL 1e-6

typedef struct cache {
    lmq_type type;
    int32_t hd, n_slots;
    size_t stride;
    uint8_t *k, *v;
} cache;

/* Random keys and values in every slot (scaled so that scores spread over
 * a few units, as real attention logits do). */
static void cache_fill(cache *c, lmq_type type, int32_t hd, int32_t n_slots)
{
    c->type = type;
    c->hd = hd;
    c->n_slots = n_slots;
    c->stride = (size_t)lmq_row_size(type, hd) + (type == LMQ_TYPE_F32 ? 4 : 2); /* rows not SIMD-aligned */
    c->k = malloc(c->stride * (size_t)n_slots + 64);
    c->v = malloc(c->stride * (size_t)n_slots + 64);
    float *row = malloc((size_t)hd * sizeof(float));
    for (int32_t s = 0; s < n_slots; s++) {
        for (int w = 0; w < 2; w++) {
            for (int32_t i = 0; i < hd; i++) row[i] = frand() * (w ? 2.0f : 0.5f);
            uint8_t *dst = (w ? c->v : c->k) + (size_t)s * c->stride;
            T_CHECK(lmq_quantize_row(type, row, dst, hd, NULL) == LMQ_OK, "quantize %s row", lmq_type_name(type));
        }
    }
    free(row);
}

static void cache_free(cache *c)
{
    free(c->k);
    free(c->v);
}

typedef struct shape {
    int32_t n_tok, n_grp, pos0, window;
    float softcap;
    bool sinks; /* one logit per head (gpt-oss) */
} shape;

/* Sink logits for n heads: around the scores' range, one far above them
 * (its head's outputs shrink towards 0) and one far below (no effect). */
static float *sinks_new(int32_t n)
{
    float *z = malloc((size_t)n * sizeof *z);
    for (int32_t g = 0; g < n; g++) z[g] = g % 5 == 3 ? 9.0f : g % 5 == 4 ? -30.0f : frand() * 5.0f + 1.0f;
    return z;
}

static lmq_attn_args args_for(const cache *c, const shape *s, const float *q, float *out, float *scratch)
{
    lmq_attn_args a = {
        .kv_type = c->type,
        .head_dim = c->hd,
        .k = c->k,
        .v = c->v,
        .kv_stride = c->stride,
        .n_slots = c->n_slots,
        .q = q,
        .q_stride = (int64_t)s->n_grp * c->hd + 3, /* rows of a batch are not packed */
        .out = out,
        .out_stride = (int64_t)s->n_grp * c->hd + 5,
        .n_tok = s->n_tok,
        .n_grp = s->n_grp,
        .pos0 = s->pos0,
        .window = s->window,
        .scale = 1.0f / sqrtf((float)c->hd),
        .softcap = s->softcap,
        .scratch = scratch,
    };
    return a;
}

static float vmax(const cache *c)
{
    float mx = 0, *row = malloc((size_t)c->hd * sizeof(float));
    for (int32_t s = 0; s < c->n_slots; s++) {
        lmq_dequantize_row(c->type, c->v + (size_t)s * c->stride, row, c->hd);
        for (int32_t i = 0; i < c->hd; i++) mx = fmaxf(mx, fabsf(row[i]));
    }
    free(row);
    return mx;
}

static double worst[LMQ_ISA_COUNT][3];

static int type_index(lmq_type t)
{
    return t == LMQ_TYPE_F32 ? 0 : t == LMQ_TYPE_F16 ? 1 : 2;
}

/* One case: every ISA against the oracle, then the ISA's rows computed one
 * token and one head per call against the whole tile, bit for bit. */
static void check_case(const cache *c, const shape *s)
{
    const int32_t hd = c->hd;
    const size_t qn = (size_t)s->n_tok * (size_t)(s->n_grp * hd + 5) + 8;
    float *q = malloc(qn * sizeof(float)), *ref = calloc(qn, sizeof(float)), *got = calloc(qn, sizeof(float));
    float *one = calloc(qn, sizeof(float));
    float *scratch = aligned_alloc(64, (lmq_attn_scratch_floats(hd) * sizeof(float) + 63) & ~(size_t)63);
    for (size_t i = 0; i < qn; i++) q[i] = frand() * 3.0f;
    lmq_attn_args a = args_for(c, s, q, ref, scratch);
    float *sinks = s->sinks ? sinks_new(s->n_grp) : NULL;
    a.sinks = sinks;
    lmq_attn_ref(&a);
    const float vm = vmax(c);
    int n_isas;
    lmq_isa isas[LMQ_ISA_COUNT];
    n_isas = lmq_isa_list(isas, LMQ_ISA_COUNT);
    for (int ii = 0; ii < n_isas; ii++) {
        const lmq_kernel_table *kt = lmq_kernels_for(isas[ii]);
        T_CHECK(kt->attn != NULL, "%s has an attention kernel", lmq_isa_name(isas[ii]));
        if (!kt->attn) continue;
        memset(got, 0, qn * sizeof(float));
        a.out = got;
        kt->attn(&a);
        double err = 0;
        bool finite = true;
        for (int32_t t = 0; t < s->n_tok; t++)
            for (int32_t i = 0; i < s->n_grp * hd; i++) {
                const size_t at = (size_t)t * (size_t)a.out_stride + (size_t)i;
                finite &= isfinite(got[at]) != 0;
                err = fmax(err, fabs((double)got[at] - ref[at]) / vm);
            }
        double *w = &worst[isas[ii]][type_index(c->type)];
        *w = fmax(*w, err);
        T_CHECK(finite && err <= ATTN_TOL,
                "%s %s hd %d tok %d grp %d pos0 %d window %d slots %d cap %g sinks %d: error %.3g (tol %g)",
                lmq_isa_name(isas[ii]), lmq_type_name(c->type), hd, s->n_tok, s->n_grp, s->pos0, s->window,
                c->n_slots, s->softcap, s->sinks, err, ATTN_TOL);
        /* the same rows one (token, head) at a time */
        for (int32_t t = 0; t < s->n_tok; t++)
            for (int32_t g = 0; g < s->n_grp; g++) {
                lmq_attn_args b = a;
                b.n_tok = 1;
                b.n_grp = 1;
                b.pos0 = s->pos0 + t;
                b.q = q + (size_t)t * (size_t)a.q_stride + (size_t)g * hd;
                b.out = one + (size_t)t * (size_t)a.out_stride + (size_t)g * hd;
                b.sinks = sinks ? sinks + g : NULL;
                kt->attn(&b);
            }
        bool same = true;
        for (int32_t t = 0; t < s->n_tok; t++)
            same &= memcmp(one + (size_t)t * (size_t)a.out_stride, got + (size_t)t * (size_t)a.out_stride,
                           (size_t)(s->n_grp * hd) * sizeof(float)) == 0;
        T_CHECK(same, "%s %s hd %d tok %d grp %d window %d sinks %d: rows alone equal the tile bit for bit",
                lmq_isa_name(isas[ii]), lmq_type_name(c->type), hd, s->n_tok, s->n_grp, s->window, s->sinks);
    }
    free(sinks);
    free(q);
    free(ref);
    free(got);
    free(one);
    free(scratch);
}

static void test_kernels_vs_ref(void)
{
    static const lmq_type types[3] = {LMQ_TYPE_F32, LMQ_TYPE_F16, LMQ_TYPE_Q8_0};
    static const int32_t hds[] = {1, 7, 33, 64, 96, 128, 40, 256};
    static const int32_t toks_grps[][2] = {{1, 1}, {1, 4}, {1, 8}, {3, 5}, {2, 8}, {5, 3}, {16, 1}, {1, 16}, {7, 2}};
    int n_cases = 0;
    for (int ti = 0; ti < 3; ti++) {
        for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++) {
            const int32_t hd = hds[hi];
            if (types[ti] == LMQ_TYPE_Q8_0 && hd % 32) continue;
            for (size_t gi = 0; gi < sizeof toks_grps / sizeof toks_grps[0]; gi++) {
                if ((gi + hi + (size_t)ti) % 2 && hd > 64) continue; /* fewer cases for the big heads */
                const int32_t nt = toks_grps[gi][0], ng = toks_grps[gi][1];
                /* a plain cache with a past, from an empty one; a ring with a
                 * window that has wrapped; a soft-cap; sinks from an empty
                 * cache, with a past and over a wrapped ring (gpt-oss) */
                const shape shapes[7] = {
                    {nt, ng, 0, 0, 0, false},
                    {nt, ng, 37 + (int32_t)gi, 0, 0, false},
                    {nt, ng, 300 + 11 * (int32_t)gi, 13 + (int32_t)gi, 0, false},
                    {nt, ng, 45, 0, 30.0f, false},
                    {nt, ng, 0, 0, 0, true},
                    {nt, ng, 29 + (int32_t)gi, 0, 0, true},
                    {nt, ng, 200 + 7 * (int32_t)gi, 9 + (int32_t)gi, 0, true},
                };
                for (int si = 0; si < 7; si++) {
                    const shape *s = &shapes[si];
                    const int32_t end = s->pos0 + nt; /* positions 0 .. end - 1 are cached */
                    const int32_t slots = s->window ? s->window + nt - 1 + (int32_t)(gi % 3) : end + 2;
                    cache c;
                    cache_fill(&c, types[ti], hd, slots);
                    check_case(&c, s);
                    cache_free(&c);
                    n_cases++;
                }
            }
        }
    }
    for (int i = 0; i < LMQ_ISA_COUNT; i++)
        if (lmq_isa_supported((lmq_isa)i))
            fprintf(stderr, "attention %-6s worst error / max|v|: f32 %.3g f16 %.3g q8_0 %.3g\n", lmq_isa_name((lmq_isa)i),
                    worst[i][0], worst[i][1], worst[i][2]);
    fprintf(stderr, "%d attention cases\n", n_cases);
    T_CHECK(n_cases > 500, "%d attention cases", n_cases);
}

/* The oracle's sinks against the definition written out (two passes, in
 * double): p_j = exp(s_j - M) / (sum_j exp(s_j - M) + exp(z - M)),
 * M = max(max_j s_j, z), on an f32 cache with a window over a ring. */
static void test_sink_definition(void)
{
    const int32_t hd = 40, ng = 3, nt = 4, pos0 = 50, window = 17, slots = window + nt - 1 + 2;
    cache c;
    cache_fill(&c, LMQ_TYPE_F32, hd, slots);
    const shape s = {nt, ng, pos0, window, 0, true};
    const size_t qn = (size_t)nt * (size_t)(ng * hd + 5) + 8;
    float *q = malloc(qn * sizeof(float)), *out = calloc(qn, sizeof(float));
    float *scratch = aligned_alloc(64, (lmq_attn_scratch_floats(hd) * sizeof(float) + 63) & ~(size_t)63);
    for (size_t i = 0; i < qn; i++) q[i] = frand() * 3.0f;
    float *z = sinks_new(ng);
    lmq_attn_args a = args_for(&c, &s, q, out, scratch);
    a.sinks = z;
    lmq_attn_ref(&a);
    double err = 0, shrink = 1;
    for (int32_t t = 0; t < nt; t++)
        for (int32_t g = 0; g < ng; g++) {
            const float *qr = q + (size_t)t * (size_t)a.q_stride + (size_t)g * hd;
            const int32_t pos = pos0 + t, lo = pos - window + 1;
            double sc[64], M = z[g], den = 0, num[40] = {0};
            for (int32_t p = lo; p <= pos; p++) {
                const float *k = (const float *)(const void *)(c.k + (size_t)(p % slots) * c.stride);
                double d = 0;
                for (int32_t i = 0; i < hd; i++) d += (double)qr[i] * k[i];
                sc[p - lo] = d * a.scale;
                if (sc[p - lo] > M) M = sc[p - lo];
            }
            for (int32_t p = lo; p <= pos; p++) {
                const float *v = (const float *)(const void *)(c.v + (size_t)(p % slots) * c.stride);
                const double w = exp(sc[p - lo] - M);
                den += w;
                for (int32_t i = 0; i < hd; i++) num[i] += w * v[i];
            }
            den += exp(z[g] - M);
            shrink = fmin(shrink, (den - exp(z[g] - M)) / den); /* the mass the sink takes away */
            for (int32_t i = 0; i < hd; i++) {
                const double e = fabs(num[i] / den - out[(size_t)t * (size_t)a.out_stride + (size_t)(g * hd + i)]);
                if (e > err) err = e;
            }
        }
    T_CHECK(err <= 1e-6 * vmax(&c), "oracle with sinks vs the definition: %.3g", err);
    T_CHECK(shrink < 0.5, "a sink took more than half the mass somewhere (least kept %.3g)", shrink);
    free(z);
    free(q);
    free(out);
    free(scratch);
    cache_free(&c);
}

/* sinks == NULL is the kernel without sinks, and a sink far below every
 * score (exp(z - m) underflows to 0) changes no bit of any ISA's result. */
static void test_sink_negligible(void)
{
    const int32_t hd = 64, ng = 8, nt = 2;
    cache c;
    cache_fill(&c, LMQ_TYPE_F16, hd, 300);
    const shape s = {nt, ng, 120, 0, 0, false};
    const size_t qn = (size_t)nt * (size_t)(ng * hd + 5) + 8;
    float *q = malloc(qn * sizeof(float)), *o1 = calloc(qn, sizeof(float)), *o2 = calloc(qn, sizeof(float));
    float *scratch = aligned_alloc(64, (lmq_attn_scratch_floats(hd) * sizeof(float) + 63) & ~(size_t)63);
    for (size_t i = 0; i < qn; i++) q[i] = frand() * 3.0f;
    float z[8];
    for (int g = 0; g < ng; g++) z[g] = -1e30f;
    lmq_isa isas[LMQ_ISA_COUNT];
    const int n_isas = lmq_isa_list(isas, LMQ_ISA_COUNT);
    for (int ii = 0; ii < n_isas; ii++) {
        const lmq_kernel_table *kt = lmq_kernels_for(isas[ii]);
        lmq_attn_args a = args_for(&c, &s, q, o1, scratch);
        kt->attn(&a);
        a.out = o2;
        a.sinks = z;
        kt->attn(&a);
        T_CHECK(!memcmp(o1, o2, qn * sizeof(float)), "%s: a negligible sink changes the result",
                lmq_isa_name(isas[ii]));
    }
    free(q);
    free(o1);
    free(o2);
    free(scratch);
    cache_free(&c);
}

/* The q8_0 cache stores each 32 values as bytes times one f16 scale: the
 * round trip is within half a step (max|x| / 127 / 2 per block, plus the
 * f16 rounding of the scale). */
static void test_q8_0_round_trip(void)
{
    enum { N = 32 * 37 };
    float x[N], y[N];
    uint8_t buf[37 * 34];
    for (int i = 0; i < N; i++) x[i] = frand() * (i % 64 < 32 ? 0.01f : 40.0f);
    x[5] = 0; /* an exact zero stays zero */
    T_CHECK(lmq_act_quantize(LMQ_TYPE_Q8_0, x, buf, N) == LMQ_OK, "q8_0 quantize");
    T_CHECK(lmq_dequantize_row(LMQ_TYPE_Q8_0, buf, y, N) == LMQ_OK, "q8_0 dequantize");
    double worst_rel = 0;
    bool ok = true;
    for (int b = 0; b < N / 32; b++) {
        float amax = 0;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[32 * b + i]));
        const double bound = amax / 127.0 * (0.5 + 1e-3) + amax * 1e-3; /* half a step; the scale's f16 rounding */
        for (int i = 0; i < 32; i++) {
            const double e = fabs((double)y[32 * b + i] - x[32 * b + i]);
            ok &= e <= bound;
            worst_rel = fmax(worst_rel, e / (amax / 127.0));
        }
    }
    T_CHECK(ok, "q8_0 round trip within half a step (worst %.3f steps)", worst_rel);
    T_CHECK(y[5] == 0, "zero stays zero");
}

int main(void)
{
    test_kernels_vs_ref();
    test_sink_definition();
    test_sink_negligible();
    test_q8_0_round_trip();
    return t_finish();
}
