/* Unit tests of the recurrent-layer kernels (lmq_delta_rule, lmq_ssm_conv):
 * every ISA compiled and supported here, through the public entry points
 * with lmq_isa_force, on odd sizes, against the scalar oracles and against
 * double-precision versions written here from the recurrences themselves;
 * a batch split over two calls gives the same bits as one call (the state
 * carries); channel ranges split unevenly give the same bits as one range
 * and leave the other channels alone; a zero conv state is a fresh
 * sequence. Self-contained (no files): also built for aarch64 by
 * scripts/test-arm.sh. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "testutil.h"

static uint64_t rng = 0x853C49E6748FEA9Bull;

static float frand(void) /* uniform in [-1, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 16) & 0xFFFFFF) / 8388608.0f - 1.0f;
}

static int n_isas;
static lmq_isa isas[LMQ_ISA_COUNT];

/* Largest error per ISA: [0] against the scalar oracle, [1] against the
 * double-precision recurrence (both relative to the case's largest |value|). */
static double worst_delta[LMQ_ISA_COUNT][2], worst_conv[LMQ_ISA_COUNT][2];

/* Delta rule, relative to the largest |o| and |S| of the case: measured
 * 2026-11-25 at most 6.1e-7, both vs the oracle (avx2) and vs double (scalar and
 * avx2), over the cases below; the bound leaves a factor of about 5 (f32
 * sums of up to 128 terms per token, carried through up to 300 tokens of
 * state, FMA against separate rounding). */
#define DELTA_TOL 3e-6
/* Convolution, relative to the largest |y|: measured 2026-11-25 at most 1.8e-7
 * (vs the oracle and vs double; up to 5 taps, a polynomial exp for SiLU);
 * the bound leaves a factor of about 5. */
#define CONV_TOL 1e-6

/* ======================================================================
 * Gated delta rule
 * ====================================================================== */

typedef struct delta_case {
    int32_t dk, dv, n_tok;
    int64_t qk_stride, v_stride, g_stride, o_stride;
    float *S0;             /* the state before the batch */
    float *q, *k, *v, *beta, *decay;
    double *S_d, *o_d;     /* the double-precision result */
} delta_case;

/* x scaled to unit L2 norm, times `scale` (q: 1/sqrt(dk), as the model does). */
static void unit_vec(float *x, int32_t n, float scale)
{
    double s = 0;
    for (int32_t i = 0; i < n; i++) {
        x[i] = frand();
        s += (double)x[i] * x[i];
    }
    const double f = scale / sqrt(s > 0 ? s : 1);
    for (int32_t i = 0; i < n; i++) x[i] = (float)(x[i] * f);
}

/* The recurrence as written, in double, rows outermost:
 *   S <- decay S;  m = S^T k;  d = beta (v - m);  S <- S + k d^T;  o = S^T q */
static void delta_double(delta_case *c)
{
    const int32_t dk = c->dk, dv = c->dv;
    double *S = c->S_d, *m = malloc((size_t)dv * sizeof(double));
    for (size_t i = 0; i < (size_t)dk * (size_t)dv; i++) S[i] = c->S0[i];
    for (int32_t t = 0; t < c->n_tok; t++) {
        const float *q = c->q + (size_t)t * (size_t)c->qk_stride, *k = c->k + (size_t)t * (size_t)c->qk_stride;
        const float *v = c->v + (size_t)t * (size_t)c->v_stride;
        const double beta = c->beta[(size_t)t * (size_t)c->g_stride], decay = c->decay[(size_t)t * (size_t)c->g_stride];
        double *o = c->o_d + (size_t)t * (size_t)dv;
        for (size_t i = 0; i < (size_t)dk * (size_t)dv; i++) S[i] *= decay;
        for (int32_t j = 0; j < dv; j++) m[j] = 0;
        for (int32_t i = 0; i < dk; i++)
            for (int32_t j = 0; j < dv; j++) m[j] += S[(size_t)i * (size_t)dv + (size_t)j] * k[i];
        for (int32_t j = 0; j < dv; j++) m[j] = beta * (v[j] - m[j]); /* d */
        for (int32_t i = 0; i < dk; i++)
            for (int32_t j = 0; j < dv; j++) S[(size_t)i * (size_t)dv + (size_t)j] += (double)k[i] * m[j];
        for (int32_t j = 0; j < dv; j++) o[j] = 0;
        for (int32_t i = 0; i < dk; i++)
            for (int32_t j = 0; j < dv; j++) o[j] += S[(size_t)i * (size_t)dv + (size_t)j] * q[i];
    }
    free(m);
}

static void delta_case_new(delta_case *c, int32_t dk, int32_t dv, int32_t n_tok)
{
    c->dk = dk;
    c->dv = dv;
    c->n_tok = n_tok;
    c->qk_stride = dk + 3; /* rows of a batch are not packed */
    c->v_stride = dv + 5;
    c->g_stride = 2;
    c->o_stride = dv + 7;
    const size_t ns = (size_t)dk * (size_t)dv, nt = (size_t)n_tok;
    c->S0 = malloc(ns * sizeof(float));
    c->q = calloc(nt * (size_t)c->qk_stride, sizeof(float));
    c->k = calloc(nt * (size_t)c->qk_stride, sizeof(float));
    c->v = calloc(nt * (size_t)c->v_stride, sizeof(float));
    c->beta = calloc(nt * (size_t)c->g_stride, sizeof(float));
    c->decay = calloc(nt * (size_t)c->g_stride, sizeof(float));
    c->S_d = malloc(ns * sizeof(double));
    c->o_d = malloc(nt * (size_t)dv * sizeof(double));
    for (size_t i = 0; i < ns; i++) c->S0[i] = 0.5f * frand(); /* a state left by earlier tokens */
    for (size_t t = 0; t < nt; t++) {
        unit_vec(c->q + t * (size_t)c->qk_stride, dk, 1.0f / sqrtf((float)dk));
        unit_vec(c->k + t * (size_t)c->qk_stride, dk, 1.0f);
        for (int32_t j = 0; j < dv; j++) c->v[t * (size_t)c->v_stride + (size_t)j] = 2.0f * frand();
        c->beta[t * (size_t)c->g_stride] = 1.0f / (1.0f + expf(-3.0f * frand())); /* sigmoid */
        /* decay = exp(g), g <= 0: sometimes exactly 1 (g = 0), else in [e^-2, 1) */
        c->decay[t * (size_t)c->g_stride] = t % 4 == 3 ? 1.0f : expf(-(frand() + 1.0f));
    }
    delta_double(c);
}

static void delta_case_free(delta_case *c)
{
    free(c->S0);
    free(c->q);
    free(c->k);
    free(c->v);
    free(c->beta);
    free(c->decay);
    free(c->S_d);
    free(c->o_d);
}

/* Args for tokens t0 .. t0 + n - 1 of the case, on state S and outputs o. */
static lmq_delta_args delta_args(const delta_case *c, float *S, float *o, int32_t t0, int32_t n)
{
    const lmq_delta_args a = {
        .S = S,
        .dk = c->dk,
        .dv = c->dv,
        .n_tok = n,
        .q = c->q + (size_t)t0 * (size_t)c->qk_stride,
        .k = c->k + (size_t)t0 * (size_t)c->qk_stride,
        .qk_stride = c->qk_stride,
        .v = c->v + (size_t)t0 * (size_t)c->v_stride,
        .v_stride = c->v_stride,
        .beta = c->beta + (size_t)t0 * (size_t)c->g_stride,
        .decay = c->decay + (size_t)t0 * (size_t)c->g_stride,
        .g_stride = c->g_stride,
        .o = o + (size_t)t0 * (size_t)c->o_stride,
        .o_stride = c->o_stride,
    };
    return a;
}

#define CANARY 12345.0f

/* The batch with the active ISA: state S (copied from S0), outputs o (the
 * padding between rows filled with CANARY). Returns false if the padding
 * was written. */
static bool delta_run(const delta_case *c, float *S, float *o, int32_t split)
{
    const size_t no = (size_t)c->n_tok * (size_t)c->o_stride;
    memcpy(S, c->S0, (size_t)c->dk * (size_t)c->dv * sizeof(float));
    for (size_t i = 0; i < no; i++) o[i] = CANARY;
    if (split > 0 && split < c->n_tok) {
        lmq_delta_args a = delta_args(c, S, o, 0, split);
        lmq_delta_rule(&a);
        a = delta_args(c, S, o, split, c->n_tok - split);
        lmq_delta_rule(&a);
    } else {
        const lmq_delta_args a = delta_args(c, S, o, 0, c->n_tok);
        lmq_delta_rule(&a);
    }
    bool pad_ok = true;
    for (size_t t = 0; t < (size_t)c->n_tok; t++)
        for (int64_t j = c->dv; j < c->o_stride; j++) pad_ok &= o[t * (size_t)c->o_stride + (size_t)j] == CANARY;
    return pad_ok;
}

/* Largest |a - b| over the case's outputs and state, each relative to the
 * largest |value| of the double result. */
static double delta_err_f(const delta_case *c, const float *S, const float *o, const float *S_ref, const float *o_ref)
{
    const size_t ns = (size_t)c->dk * (size_t)c->dv;
    double os = 0, ss = 0, eo = 0, es = 0;
    for (size_t i = 0; i < ns; i++) ss = fmax(ss, fabs(c->S_d[i]));
    for (size_t i = 0; i < (size_t)c->n_tok * (size_t)c->dv; i++) os = fmax(os, fabs(c->o_d[i]));
    for (size_t i = 0; i < ns; i++) es = fmax(es, fabs((double)S[i] - (S_ref ? (double)S_ref[i] : c->S_d[i])));
    for (size_t t = 0; t < (size_t)c->n_tok; t++)
        for (size_t j = 0; j < (size_t)c->dv; j++) {
            const size_t at = t * (size_t)c->o_stride + j;
            const double r = o_ref ? (double)o_ref[at] : c->o_d[t * (size_t)c->dv + j];
            eo = fmax(eo, isfinite(o[at]) ? fabs((double)o[at] - r) : INFINITY);
        }
    return fmax(eo / fmax(os, 1e-30), es / fmax(ss, 1e-30));
}

static void delta_check_case(delta_case *c)
{
    const size_t ns = (size_t)c->dk * (size_t)c->dv, no = (size_t)c->n_tok * (size_t)c->o_stride;
    float *S_ref = malloc(ns * sizeof(float)), *o_ref = malloc(no * sizeof(float));
    float *S = malloc(ns * sizeof(float)), *o = malloc(no * sizeof(float));
    float *S2 = malloc(ns * sizeof(float)), *o2 = malloc(no * sizeof(float));
    memcpy(S_ref, c->S0, ns * sizeof(float));
    const lmq_delta_args ar = delta_args(c, S_ref, o_ref, 0, c->n_tok);
    lmq_delta_rule_ref(&ar);
    for (int ii = 0; ii < n_isas; ii++) {
        const lmq_isa isa = isas[ii];
        lmq_isa_force(isa);
        const bool pad_ok = delta_run(c, S, o, 0);
        T_CHECK(pad_ok, "%s delta dk %d dv %d tok %d: only o's rows written", lmq_isa_name(isa), c->dk, c->dv,
                c->n_tok);
        const double e_ref = delta_err_f(c, S, o, S_ref, o_ref), e_dbl = delta_err_f(c, S, o, NULL, NULL);
        worst_delta[isa][0] = fmax(worst_delta[isa][0], e_ref);
        worst_delta[isa][1] = fmax(worst_delta[isa][1], e_dbl);
        T_CHECK(e_ref <= DELTA_TOL && e_dbl <= DELTA_TOL,
                "%s delta dk %d dv %d tok %d: error %.3g vs the oracle, %.3g vs double (tol %g)", lmq_isa_name(isa),
                c->dk, c->dv, c->n_tok, e_ref, e_dbl, DELTA_TOL);
        /* the state carried over two calls, split at a few places */
        const int32_t splits[3] = {1, c->n_tok / 2, c->n_tok - 1};
        for (int si = 0; si < 3 && c->n_tok > 1; si++) {
            delta_run(c, S2, o2, splits[si]);
            T_CHECK(!memcmp(S, S2, ns * sizeof(float)) && !memcmp(o, o2, no * sizeof(float)),
                    "%s delta dk %d dv %d: %d + %d tokens give the bits of %d", lmq_isa_name(isa), c->dk, c->dv,
                    splits[si], c->n_tok - splits[si], c->n_tok);
        }
        /* o written over v (same stride): v is read before o is written */
        {
            memcpy(S2, c->S0, ns * sizeof(float));
            float *vo = malloc((size_t)c->n_tok * (size_t)c->v_stride * sizeof(float));
            memcpy(vo, c->v, (size_t)c->n_tok * (size_t)c->v_stride * sizeof(float));
            lmq_delta_args a = delta_args(c, S2, o2, 0, c->n_tok);
            a.v = vo;
            a.o = vo;
            a.o_stride = a.v_stride;
            lmq_delta_rule(&a);
            bool same = !memcmp(S, S2, ns * sizeof(float));
            for (size_t t = 0; t < (size_t)c->n_tok; t++)
                same &= !memcmp(vo + t * (size_t)c->v_stride, o + t * (size_t)c->o_stride,
                                (size_t)c->dv * sizeof(float));
            T_CHECK(same, "%s delta dk %d dv %d tok %d: o over v gives the same bits", lmq_isa_name(isa), c->dk,
                    c->dv, c->n_tok);
            free(vo);
        }
    }
    free(S_ref);
    free(o_ref);
    free(S);
    free(o);
    free(S2);
    free(o2);
}

static void test_delta_rule(void)
{
    static const int32_t dims[] = {1, 3, 17, 64, 67, 128};
    static const int32_t toks[] = {1, 2, 5, 33};
    int n_cases = 0;
    for (size_t ki = 0; ki < sizeof dims / sizeof dims[0]; ki++)
        for (size_t vi = 0; vi < sizeof dims / sizeof dims[0]; vi++)
            for (size_t ti = 0; ti < sizeof toks / sizeof toks[0]; ti++) {
                delta_case c;
                delta_case_new(&c, dims[ki], dims[vi], toks[ti]);
                delta_check_case(&c);
                delta_case_free(&c);
                n_cases++;
            }
    /* a long batch: the state is carried through many updates */
    delta_case c;
    delta_case_new(&c, 128, 128, 300);
    delta_check_case(&c);
    delta_case_free(&c);
    n_cases++;
    for (int ii = 0; ii < n_isas; ii++)
        fprintf(stderr, "delta rule %-6s worst error / max|value|: %.3g vs the oracle, %.3g vs double\n",
                lmq_isa_name(isas[ii]), worst_delta[isas[ii]][0], worst_delta[isas[ii]][1]);
    T_CHECK(n_cases == 145, "%d delta rule cases", n_cases);
}

/* ======================================================================
 * Causal depthwise convolution
 * ====================================================================== */

typedef struct conv_case {
    int32_t C, K, n_tok;
    bool silu;
    int64_t x_stride, y_stride;
    float *w, *state0, *x;
} conv_case;

static void conv_case_new(conv_case *c, int32_t C, int32_t K, int32_t n_tok, bool silu)
{
    c->C = C;
    c->K = K;
    c->n_tok = n_tok;
    c->silu = silu;
    c->x_stride = C + 3;
    c->y_stride = C + 9;
    c->w = malloc((size_t)C * (size_t)K * sizeof(float));
    c->state0 = malloc(((size_t)(K - 1) * (size_t)C + 1) * sizeof(float));
    c->x = malloc((size_t)n_tok * (size_t)c->x_stride * sizeof(float));
    for (size_t i = 0; i < (size_t)C * (size_t)K; i++) c->w[i] = frand();
    for (size_t i = 0; i < (size_t)(K - 1) * (size_t)C; i++) c->state0[i] = 2.0f * frand();
    for (size_t i = 0; i < (size_t)n_tok * (size_t)c->x_stride; i++) c->x[i] = 2.0f * frand();
}

static void conv_case_free(conv_case *c)
{
    free(c->w);
    free(c->state0);
    free(c->x);
}

/* y_t[c] = sum_j w[c][j] in_{t-K+1+j}[c] in double, in_s for s < 0 from
 * state0 or, for a fresh sequence, 0; then SiLU. */
static void conv_double(const conv_case *c, bool fresh, double *y)
{
    for (int32_t t = 0; t < c->n_tok; t++)
        for (int32_t ch = 0; ch < c->C; ch++) {
            double acc = 0;
            for (int32_t j = 0; j < c->K; j++) {
                const int32_t s = t - c->K + 1 + j;
                const double in = s >= 0   ? c->x[(size_t)s * (size_t)c->x_stride + (size_t)ch]
                                  : fresh ? 0
                                          : c->state0[(size_t)(c->K - 1 + s) * (size_t)c->C + (size_t)ch];
                acc += (double)c->w[(size_t)ch * (size_t)c->K + (size_t)j] * in;
            }
            y[(size_t)t * (size_t)c->C + (size_t)ch] = c->silu ? acc / (1 + exp(-acc)) : acc;
        }
}

/* Args for channels [c0, c1) and tokens t0 .. t0 + n - 1. */
static lmq_conv_args conv_args(const conv_case *c, float *state, float *y, int32_t c0, int32_t c1, int32_t t0,
                               int32_t n)
{
    const lmq_conv_args a = {
        .w = c->w,
        .state = c->K > 1 ? state : NULL,
        .x = c->x + (size_t)t0 * (size_t)c->x_stride,
        .x_stride = c->x_stride,
        .y = y + (size_t)t0 * (size_t)c->y_stride,
        .y_stride = c->y_stride,
        .C = c->C,
        .K = c->K,
        .c0 = c0,
        .c1 = c1,
        .n_tok = n,
        .silu = c->silu,
    };
    return a;
}

/* Runs channels [c0, c1) for tokens t0 .. t0 + n - 1 with the active ISA. */
static void conv_run(const conv_case *c, float *state, float *y, int32_t c0, int32_t c1, int32_t t0, int32_t n)
{
    const lmq_conv_args a = conv_args(c, state, y, c0, c1, t0, n);
    lmq_ssm_conv(&a);
}

/* The largest |y - ref| relative to the largest |ref| (ref in double, or
 * the floats yr when given). */
static double conv_err(const conv_case *c, const float *y, const double *yd, const float *yr)
{
    double m = 0, e = 0;
    for (int32_t t = 0; t < c->n_tok; t++)
        for (int32_t ch = 0; ch < c->C; ch++) {
            const size_t at = (size_t)t * (size_t)c->y_stride + (size_t)ch;
            const double r = yr ? (double)yr[at] : yd[(size_t)t * (size_t)c->C + (size_t)ch];
            m = fmax(m, fabs(r));
            e = fmax(e, isfinite(y[at]) ? fabs((double)y[at] - r) : INFINITY);
        }
    return e / fmax(m, 1e-30);
}

/* The state the batch leaves: the last K-1 inputs, from state0 and x. */
static bool conv_state_ok(const conv_case *c, const float *state)
{
    bool ok = true;
    for (int32_t r = 0; r < c->K - 1; r++)
        for (int32_t ch = 0; ch < c->C; ch++) {
            const int32_t s = c->n_tok - (c->K - 1) + r;
            const float want = s >= 0 ? c->x[(size_t)s * (size_t)c->x_stride + (size_t)ch]
                                      : c->state0[(size_t)(c->n_tok + r) * (size_t)c->C + (size_t)ch];
            ok &= state[(size_t)r * (size_t)c->C + (size_t)ch] == want;
        }
    return ok;
}

static void conv_check_case(const conv_case *c)
{
    const size_t ny = (size_t)c->n_tok * (size_t)c->y_stride, nst = (size_t)(c->K - 1) * (size_t)c->C + 1;
    const size_t bst = nst * sizeof(float), by = ny * sizeof(float);
    float *y = malloc(by), *y2 = malloc(by), *y_ref = malloc(by), *st = malloc(bst), *st2 = malloc(bst);
    double *yd = malloc((size_t)c->n_tok * (size_t)c->C * sizeof(double));
    /* the oracle on the whole range */
    memcpy(st, c->state0, bst);
    for (size_t i = 0; i < ny; i++) y_ref[i] = CANARY;
    const lmq_conv_args ar = conv_args(c, st, y_ref, 0, c->C, 0, c->n_tok);
    lmq_ssm_conv_ref(&ar);
    T_CHECK(conv_state_ok(c, st), "oracle conv C %d K %d tok %d: state = the last K-1 inputs", c->C, c->K, c->n_tok);
    conv_double(c, false, yd);
    const double e_oracle = conv_err(c, y_ref, yd, NULL);
    worst_conv[LMQ_ISA_SCALAR][1] = fmax(worst_conv[LMQ_ISA_SCALAR][1], e_oracle);
    T_CHECK(e_oracle <= CONV_TOL, "oracle conv C %d K %d tok %d silu %d: error %.3g vs double", c->C, c->K,
            c->n_tok, c->silu, e_oracle);
    /* uneven channel ranges: [0, a), [a, b), [b, C) */
    const int32_t cut1 = c->C / 7 + 1 < c->C ? c->C / 7 + 1 : c->C, cut2 = cut1 + (c->C - cut1) * 5 / 9;
    for (int ii = 0; ii < n_isas; ii++) {
        const lmq_isa isa = isas[ii];
        lmq_isa_force(isa);
        memcpy(st, c->state0, bst);
        for (size_t i = 0; i < ny; i++) y[i] = CANARY;
        conv_run(c, st, y, 0, c->C, 0, c->n_tok);
        bool pad_ok = true;
        for (size_t t = 0; t < (size_t)c->n_tok; t++)
            for (int64_t j = c->C; j < c->y_stride; j++) pad_ok &= y[t * (size_t)c->y_stride + (size_t)j] == CANARY;
        T_CHECK(pad_ok && conv_state_ok(c, st), "%s conv C %d K %d tok %d: state = the last K-1 inputs, y padding kept",
                lmq_isa_name(isa), c->C, c->K, c->n_tok);
        const double e_ref = conv_err(c, y, NULL, y_ref), e_dbl = conv_err(c, y, yd, NULL);
        worst_conv[isa][0] = fmax(worst_conv[isa][0], e_ref);
        worst_conv[isa][1] = fmax(worst_conv[isa][1], e_dbl);
        T_CHECK(e_ref <= CONV_TOL && e_dbl <= CONV_TOL,
                "%s conv C %d K %d tok %d silu %d: error %.3g vs the oracle, %.3g vs double (tol %g)",
                lmq_isa_name(isa), c->C, c->K, c->n_tok, c->silu, e_ref, e_dbl, CONV_TOL);
        /* the channels in three uneven pieces, the middle one first: same
         * bits; a piece leaves the other channels' y and state alone */
        memcpy(st2, c->state0, bst);
        for (size_t i = 0; i < ny; i++) y2[i] = CANARY;
        conv_run(c, st2, y2, cut1, cut2, 0, c->n_tok);
        bool alone = true;
        for (size_t t = 0; t < (size_t)c->n_tok; t++)
            for (int32_t ch = 0; ch < c->C; ch++)
                alone &= (ch >= cut1 && ch < cut2) || y2[t * (size_t)c->y_stride + (size_t)ch] == CANARY;
        for (int32_t r = 0; r < c->K - 1; r++)
            for (int32_t ch = 0; ch < c->C; ch++) {
                const size_t at = (size_t)r * (size_t)c->C + (size_t)ch;
                alone &= (ch >= cut1 && ch < cut2) || st2[at] == c->state0[at];
            }
        T_CHECK(alone, "%s conv C %d K %d: channels [%d, %d) touch nothing else", lmq_isa_name(isa), c->C, c->K,
                cut1, cut2);
        conv_run(c, st2, y2, cut2, c->C, 0, c->n_tok);
        conv_run(c, st2, y2, 0, cut1, 0, c->n_tok);
        T_CHECK(!memcmp(y, y2, by) && !memcmp(st, st2, bst), "%s conv C %d K %d tok %d: [0,%d) [%d,%d) [%d,%d) = one call",
                lmq_isa_name(isa), c->C, c->K, c->n_tok, cut1, cut1, cut2, cut2, c->C);
        /* the tokens in two calls: the state carries */
        for (int32_t split = 1; split < c->n_tok; split += c->n_tok / 2 > 1 ? c->n_tok / 2 : 1) {
            memcpy(st2, c->state0, bst);
            for (size_t i = 0; i < ny; i++) y2[i] = CANARY;
            conv_run(c, st2, y2, 0, c->C, 0, split);
            conv_run(c, st2, y2, 0, c->C, split, c->n_tok - split);
            T_CHECK(!memcmp(y, y2, by) && !memcmp(st, st2, bst), "%s conv C %d K %d: %d + %d tokens = one call",
                    lmq_isa_name(isa), c->C, c->K, split, c->n_tok - split);
        }
    }
    /* a fresh sequence: a zero state is zero inputs before the first token */
    double *yf = malloc((size_t)c->n_tok * (size_t)c->C * sizeof(double));
    conv_double(c, true, yf);
    for (int ii = 0; ii < n_isas; ii++) {
        lmq_isa_force(isas[ii]);
        memset(st, 0, bst);
        conv_run(c, st, y, 0, c->C, 0, c->n_tok);
        const double e = conv_err(c, y, yf, NULL);
        worst_conv[isas[ii]][1] = fmax(worst_conv[isas[ii]][1], e);
        T_CHECK(e <= CONV_TOL, "%s conv C %d K %d tok %d, zero state: error %.3g vs a fresh sequence",
                lmq_isa_name(isas[ii]), c->C, c->K, c->n_tok, e);
    }
    free(yf);
    free(y);
    free(y2);
    free(y_ref);
    free(st);
    free(st2);
    free(yd);
}

static void test_ssm_conv(void)
{
    static const int32_t Cs[] = {1, 5, 37, 64, 515};
    static const int32_t Ks[] = {1, 2, 3, 4, 5};
    static const int32_t toks[] = {1, 2, 5, 33};
    int n_cases = 0;
    for (size_t ci = 0; ci < sizeof Cs / sizeof Cs[0]; ci++)
        for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++)
            for (size_t ti = 0; ti < sizeof toks / sizeof toks[0]; ti++) {
                conv_case c;
                conv_case_new(&c, Cs[ci], Ks[ki], toks[ti], (ci + ki + ti) % 2 == 0);
                conv_check_case(&c);
                conv_case_free(&c);
                n_cases++;
            }
    for (int ii = 0; ii < n_isas; ii++)
        fprintf(stderr, "ssm conv   %-6s worst error / max|y|: %.3g vs the oracle, %.3g vs double\n",
                lmq_isa_name(isas[ii]), worst_conv[isas[ii]][0], worst_conv[isas[ii]][1]);
    T_CHECK(n_cases == 100, "%d conv cases", n_cases);
}

int main(void)
{
    const lmq_isa active = lmq_isa_active();
    n_isas = lmq_isa_list(isas, LMQ_ISA_COUNT);
    for (int ii = 0; ii < n_isas; ii++) {
        const lmq_kernel_table *kt = lmq_kernels_for(isas[ii]);
        T_CHECK(kt->delta_rule && kt->ssm_conv, "%s has the recurrent kernels", lmq_isa_name(isas[ii]));
    }
    test_delta_rule();
    test_ssm_conv();
    lmq_isa_force(active);
    return t_finish();
}
