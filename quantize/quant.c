/* The quantize module's type table and public row API: argument checks, the
 * NaN/Inf guard, and multi-threaded quantization of whole tensors. */
#include <pthread.h>
#include <stdlib.h>

#include "quant_internal.h"

/* ======================================================================
 * The table: one row per lmq_type (no switch on the type anywhere else)
 * ====================================================================== */

typedef struct quant_row {
    lmq_to_float_fn to_float;
    lmq_from_float_fn from_float;
} quant_row;

#define ROW(T, name) [LMQ_TYPE_##T] = {lmq_q_##name##_to_float, lmq_q_##name##_from_float}

static const quant_row quant_table[LMQ_TYPE_COUNT] = {
    ROW(F32, f32),       ROW(F16, f16),         ROW(BF16, bf16),       ROW(Q4_0, q4_0),
    ROW(Q4_1, q4_1),     ROW(Q5_0, q5_0),       ROW(Q5_1, q5_1),       ROW(Q8_0, q8_0),
    ROW(Q8_1, q8_1),     ROW(Q2_K, q2_K),       ROW(Q3_K, q3_K),       ROW(Q4_K, q4_K),
    ROW(Q5_K, q5_K),     ROW(Q6_K, q6_K),       ROW(Q8_K, q8_K),       ROW(IQ4_NL, iq4_nl),
    ROW(IQ4_XS, iq4_xs), ROW(F8_E4M3, f8_e4m3), ROW(F8_E5M2, f8_e5m2), ROW(MXFP4, mxfp4),
    ROW(TQ1_0, tq1_0),   ROW(TQ2_0, tq2_0),
    /* read only: lmq decodes these and has no quantizer for them (yet) */
    [LMQ_TYPE_IQ2_XXS] = {lmq_q_iq2_xxs_to_float, NULL}, [LMQ_TYPE_IQ2_XS] = {lmq_q_iq2_xs_to_float, NULL},
    [LMQ_TYPE_IQ2_S] = {lmq_q_iq2_s_to_float, NULL},     [LMQ_TYPE_IQ3_XXS] = {lmq_q_iq3_xxs_to_float, NULL},
    [LMQ_TYPE_IQ3_S] = {lmq_q_iq3_s_to_float, NULL},     [LMQ_TYPE_IQ1_S] = {lmq_q_iq1_s_to_float, NULL},
    [LMQ_TYPE_IQ1_M] = {lmq_q_iq1_m_to_float, NULL},
};
#undef ROW

/* The row of a type lmq can decode (to_float always set). */
static const quant_row *row_of(lmq_type t)
{
    if ((int)t < 0 || t >= LMQ_TYPE_COUNT) return NULL;
    const quant_row *r = &quant_table[t];
    return r->to_float ? r : NULL;
}

bool lmq_type_can_quantize(lmq_type t)
{
    const quant_row *r = row_of(t);
    return r && r->from_float;
}

lmq_to_float_fn lmq_dequantize_fn(lmq_type t)
{
    const quant_row *r = row_of(t);
    return r ? r->to_float : NULL;
}

/* The one message for a type lmq reads but cannot write. */
static lmq_status no_quantizer(const char *fn, lmq_type t)
{
    return lmq_error(LMQ_ERR_UNSUPPORTED,
                     "%s: lmq reads %s (ggml's files run) but cannot write it yet; choose another type", fn,
                     lmq_type_name(t));
}

/* ======================================================================
 * Checks
 * ====================================================================== */

static lmq_status check_args(const char *fn, lmq_type t, const void *a, const void *b,
                             int64_t n, const quant_row **row)
{
    *row = row_of(t);
    if (!*row) return lmq_error(LMQ_ERR_INVALID_ARG, "%s: invalid type id %d", fn, (int)t);
    const int64_t bs = lmq_type_get(t)->block_size;
    if (n < 0 || n % bs != 0)
        return lmq_error(LMQ_ERR_INVALID_ARG,
                         "%s: row length %lld is not a multiple of the %s block size %lld", fn,
                         (long long)n, lmq_type_name(t), (long long)bs);
    if (n > 0 && (!a || !b)) return lmq_error(LMQ_ERR_INVALID_ARG, "%s: NULL buffer", fn);
    return LMQ_OK;
}

/* Index of the first NaN/Inf in x, or -1. Scans 64 values at a time with
 * an exponent-bits test the compiler can vectorise. */
static int64_t first_nonfinite(const float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        uint32_t u[64], bad = 0;
        memcpy(u, x + i, sizeof u);
        for (int k = 0; k < 64; k++) bad |= (u[k] & 0x7f800000u) == 0x7f800000u;
        if (bad) break;
    }
    for (; i < n; i++)
        if (!isfinite(x[i])) return i;
    return -1;
}

/* Index of the first negative or non-finite importance weight, or -1. */
static int64_t first_bad_weight(const float *w, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!(w[i] >= 0.0f) || !isfinite(w[i])) return i;
    return -1;
}

/* ======================================================================
 * Rows
 * ====================================================================== */

lmq_status lmq_quantize_row(lmq_type t, const float *src, void *dst, int64_t n,
                            const float *imatrix)
{
    const quant_row *row;
    lmq_status s = check_args("quantize", t, src, dst, n, &row);
    if (s) return s;
    if (!row->from_float) return no_quantizer("quantize", t);
    int64_t bad = first_nonfinite(src, n);
    if (bad >= 0)
        return lmq_error(LMQ_ERR_INVALID_ARG, "quantize %s: input element %lld is %s",
                         lmq_type_name(t), (long long)bad, isnan(src[bad]) ? "NaN" : "infinite");
    if (imatrix && (bad = first_bad_weight(imatrix, n)) >= 0)
        return lmq_error(LMQ_ERR_INVALID_ARG,
                         "quantize %s: importance weight %lld is negative or not finite (%g)",
                         lmq_type_name(t), (long long)bad, (double)imatrix[bad]);
    row->from_float(src, dst, n, imatrix);
    return LMQ_OK;
}

lmq_status lmq_dequantize_row(lmq_type t, const void *src, float *dst, int64_t n)
{
    const quant_row *row;
    lmq_status s = check_args("dequantize", t, src, dst, n, &row);
    if (s) return s;
    row->to_float(src, dst, n);
    return LMQ_OK;
}

/* ======================================================================
 * Tensors: rows split into contiguous ranges, one per thread; each row is
 * quantized independently, so the bytes do not depend on the split.
 * ====================================================================== */

typedef struct rows_job {
    const quant_row *row;
    const uint8_t *src;    /* row r at src + r * src_row_bytes */
    lmq_type src_type;     /* f32, f16 or bf16 */
    int64_t src_row_bytes;
    uint8_t *dst;
    const float *imatrix;
    int64_t n_per_row, row_bytes;
    int64_t r0, r1;        /* rows [r0, r1) */
    int64_t bad_row, bad_col; /* first non-finite input, -1 if none */
    bool nomem;
} rows_job;

/* bf16 -> f32 is a shift of the bits (written so the compiler vectorises it). */
static void bf16_row_to_f32(const uint8_t *src, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        uint16_t b;
        memcpy(&b, src + 2 * i, 2);
        const uint32_t u = (uint32_t)b << 16;
        memcpy(y + i, &u, 4);
    }
}

/* Each worker converts its rows to f32 in one scratch row of its own
 * (allocated once per call) and quantizes them: the conversion runs on
 * every thread and no f32 copy of the rows is made. */
static void *rows_worker(void *arg)
{
    rows_job *j = arg;
    float *tmp = NULL;
    if (j->src_type != LMQ_TYPE_F32 && !(tmp = malloc((size_t)j->n_per_row * sizeof(float)))) {
        j->nomem = true;
        return NULL;
    }
    for (int64_t r = j->r0; r < j->r1; r++) {
        const uint8_t *s = j->src + r * j->src_row_bytes;
        const float *x = tmp;
        if (j->src_type == LMQ_TYPE_F32) x = (const float *)(const void *)s;
        else if (j->src_type == LMQ_TYPE_BF16) bf16_row_to_f32(s, tmp, j->n_per_row);
        else lmq_fp16_to_fp32_row((const uint16_t *)(const void *)s, tmp, j->n_per_row);
        const int64_t bad = first_nonfinite(x, j->n_per_row);
        if (bad >= 0) {
            j->bad_row = r;
            j->bad_col = bad;
            break;
        }
        j->row->from_float(x, j->dst + r * j->row_bytes, j->n_per_row, j->imatrix);
    }
    free(tmp);
    return NULL;
}


typedef struct run_jobs {
    void *(*fn)(void *);
    uint8_t *jobs;
    size_t job_size;
} run_jobs;

static void run_job(void *ctx, int ith, int nth)
{
    (void)nth;
    const run_jobs *r = ctx;
    r->fn(r->jobs + (size_t)ith * r->job_size);
}

void lmq_q_run_jobs(void *(*fn)(void *), void *jobs, size_t job_size, int n)
{
    run_jobs r = {fn, jobs, job_size};
    lmq_pool_for(n > 0 ? n : 1, run_job, &r);
}

/* lmq_quantize_rows and lmq_quantize_rows_src: src rows of src_type. */
static lmq_status quantize_rows_any(lmq_type t, lmq_type src_type, const void *src, void *dst, int64_t nrows,
                                    int64_t n_per_row, const float *imatrix, int n_threads)
{
    const quant_row *row;
    lmq_status s = check_args("quantize", t, src, dst, n_per_row, &row);
    if (s) return s;
    if (!row->from_float) return no_quantizer("quantize", t);
    if (src_type != LMQ_TYPE_F32 && src_type != LMQ_TYPE_F16 && src_type != LMQ_TYPE_BF16)
        return lmq_error(LMQ_ERR_INVALID_ARG, "quantize: source rows of %s (f32, f16 or bf16 expected)",
                         lmq_type_name(src_type));
    if (nrows < 0) return lmq_error(LMQ_ERR_INVALID_ARG, "quantize: negative row count");
    if (nrows == 0 || n_per_row == 0) return LMQ_OK;
    const int64_t row_bytes = lmq_row_size(t, n_per_row);
    const int64_t src_row_bytes = n_per_row * (src_type == LMQ_TYPE_F32 ? 4 : 2);
    if (row_bytes <= 0 || nrows > INT64_MAX / n_per_row || nrows > INT64_MAX / row_bytes ||
        nrows > INT64_MAX / src_row_bytes)
        return lmq_error(LMQ_ERR_LIMIT, "quantize: %lld rows of %lld elements overflow",
                         (long long)nrows, (long long)n_per_row);
    int64_t bad;
    if (imatrix && (bad = first_bad_weight(imatrix, n_per_row)) >= 0)
        return lmq_error(LMQ_ERR_INVALID_ARG,
                         "quantize %s: importance weight %lld is negative or not finite (%g)",
                         lmq_type_name(t), (long long)bad, (double)imatrix[bad]);

    if (n_threads > LMQ_MAX_THREADS)
        return lmq_error(LMQ_ERR_INVALID_ARG, "quantize: %d threads requested, at most %d", n_threads, LMQ_MAX_THREADS);
    if (n_threads <= 0) n_threads = lmq_n_cpus();
    if (n_threads > LMQ_MAX_THREADS) n_threads = LMQ_MAX_THREADS; /* a machine with more CPUs */
    if (n_threads > nrows) n_threads = (int)nrows;

    rows_job jobs[LMQ_MAX_THREADS];
    for (int k = 0; k < n_threads; k++) {
        jobs[k] = (rows_job){row, src, src_type, src_row_bytes, dst, imatrix, n_per_row, row_bytes,
                             nrows * k / n_threads, nrows * (k + 1) / n_threads, -1, -1, false};
    }
    lmq_q_run_jobs(rows_worker, jobs, sizeof jobs[0], n_threads);
    for (int k = 0; k < n_threads; k++) {
        if (jobs[k].nomem)
            return lmq_error(LMQ_ERR_NOMEM, "quantize: out of memory (a row of %lld floats)", (long long)n_per_row);
        if (jobs[k].bad_row >= 0) {
            const int64_t r = jobs[k].bad_row, c = jobs[k].bad_col;
            const uint8_t *p = (const uint8_t *)src + r * src_row_bytes;
            float v;
            if (src_type == LMQ_TYPE_F32) memcpy(&v, p + 4 * c, 4);
            else {
                uint16_t h;
                memcpy(&h, p + 2 * c, 2);
                v = src_type == LMQ_TYPE_BF16 ? lmq_bf16_to_fp32(h) : lmq_fp16_to_fp32(h);
            }
            return lmq_error(LMQ_ERR_INVALID_ARG, "quantize %s: input row %lld element %lld is %s (a non-finite weight)",
                             lmq_type_name(t), (long long)r, (long long)c, isnan(v) ? "NaN" : "infinite");
        }
    }
    return LMQ_OK;
}

lmq_status lmq_quantize_rows(lmq_type t, const float *src, void *dst, int64_t nrows,
                             int64_t n_per_row, const float *imatrix, int n_threads)
{
    return quantize_rows_any(t, LMQ_TYPE_F32, src, dst, nrows, n_per_row, imatrix, n_threads);
}

lmq_status lmq_quantize_rows_src(lmq_type t, lmq_type src_type, const void *src, void *dst, int64_t nrows,
                                 int64_t n_per_row, const float *imatrix, int n_threads)
{
    return quantize_rows_any(t, src_type, src, dst, nrows, n_per_row, imatrix, n_threads);
}
