/* Kernel micro-benchmarks for `lmq bench --kernels`: the time of one
 * lmq_matmul of random weights with a given ISA forced. Weights are real
 * quantized rows (16 distinct rows of random values, repeated), replicated
 * so that consecutive runs stream different memory. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels.h"

#define BENCH_DISTINCT_ROWS 16
#define BENCH_MIN_STREAM ((int64_t)128 << 20)
#define BENCH_MAX_COPIES 64

/* With one thread the product runs on the caller, and its CPU time is a
 * better measure than wall time on a loaded machine. */
static double bench_now(int n_threads)
{
    if (n_threads == 1) {
        struct timespec ts;
        if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    }
    return lmq_time_s();
}

static uint32_t bench_rnd(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*s >> 33);
}

static float bench_frand(uint64_t *s)
{
    return (float)(bench_rnd(s) & 0xFFFFFF) / 8388608.0f - 1.0f;
}

lmq_status lmq_kernel_bench(lmq_type type, lmq_isa isa, int64_t n_out, int64_t n_in, int64_t n_tok,
                            int n_threads, double min_seconds, bool repacked, lmq_kbench *out)
{
    memset(out, 0, sizeof *out);
    if (!lmq_matmul_supported(type))
        return lmq_error(LMQ_ERR_UNSUPPORTED, "kernel bench: no kernels for %s", lmq_type_name(type));
    const int64_t row = lmq_row_size(type, n_in);
    if (row <= 0 || n_out <= 0 || n_tok <= 0 || n_out > (1 << 20) || n_tok > (1 << 16) || n_in > (1 << 20))
        return lmq_error(LMQ_ERR_INVALID_ARG, "kernel bench: bad shape %lld x %lld, %lld tokens for %s",
                         (long long)n_out, (long long)n_in, (long long)n_tok, lmq_type_name(type));
    if (!lmq_isa_supported(isa))
        return lmq_error(LMQ_ERR_UNSUPPORTED, "kernel bench: ISA %s is not supported here", lmq_isa_name(isa));
    if (n_threads <= 0) n_threads = lmq_n_cpus();

    const int64_t mat = row * n_out;
    int64_t copies = (BENCH_MIN_STREAM + mat - 1) / mat;
    if (copies > BENCH_MAX_COPIES) copies = BENCH_MAX_COPIES;
    if (copies < 1) copies = 1;
    lmq_status s = LMQ_OK;
    uint8_t *w = aligned_alloc(64, (size_t)((mat * copies + 63) & ~(int64_t)63)), *packed = NULL;
    int64_t pmat = 0;
    uint8_t *rows = malloc((size_t)(row * BENCH_DISTINCT_ROWS));
    float *src = malloc((size_t)n_in * sizeof(float));
    float *x = malloc((size_t)(n_in * n_tok) * sizeof(float));
    float *y = malloc((size_t)(n_out * n_tok) * sizeof(float));
    lmq_pool *pool = NULL;
    lmq_workspace *ws = NULL;
    const lmq_isa prev = lmq_isa_active();
    if (!w || !rows || !src || !x || !y) {
        s = lmq_error(LMQ_ERR_NOMEM, "kernel bench: %lld bytes of weights", (long long)(mat * copies));
        goto out_free;
    }
    uint64_t seed = 0x1234567ull + (uint64_t)type;
    for (int r = 0; r < BENCH_DISTINCT_ROWS && !s; r++) {
        for (int64_t i = 0; i < n_in; i++) src[i] = 0.02f * (bench_frand(&seed) + bench_frand(&seed));
        s = lmq_quantize_row(type, src, rows + r * row, n_in, NULL);
    }
    if (s) goto out_free;
    for (int64_t r = 0; r < n_out; r++) memcpy(w + r * row, rows + (r % BENCH_DISTINCT_ROWS) * row, (size_t)row);
    for (int64_t c = 1; c < copies; c++) memcpy(w + c * mat, w, (size_t)mat);
    for (int64_t i = 0; i < n_in * n_tok; i++) x[i] = bench_frand(&seed);
    if ((s = lmq_pool_new(n_threads, &pool)) || (s = lmq_workspace_new(&ws)) ||
        (s = lmq_workspace_reserve(ws, type, n_in, n_tok)) || (s = lmq_isa_force(isa)))
        goto out_free;

    if (repacked) {
        pmat = lmq_repack_bytes(type, n_out, n_in);
        if (pmat <= 0) {
            s = lmq_error(LMQ_ERR_UNSUPPORTED, "kernel bench: %s has no repacked layout with %s", lmq_type_name(type),
                          lmq_isa_name(isa));
            goto out_restore;
        }
        pmat = (pmat + 63) & ~(int64_t)63;
        packed = aligned_alloc(64, (size_t)(pmat * copies));
        if (!packed) {
            s = lmq_error(LMQ_ERR_NOMEM, "kernel bench: %lld bytes of repacked weights", (long long)(pmat * copies));
            goto out_restore;
        }
        for (int64_t c = 0; c < copies && !s; c++) s = lmq_repack(pool, type, w + c * mat, n_out, n_in, packed + c * pmat);
        if (s) goto out_restore;
    }
    /* one untimed run (first-touch of the workspace, BLAS set-up) */
    s = repacked ? lmq_matmul_repacked(pool, type, packed, n_out, n_in, x, n_tok, y, ws)
                 : lmq_matmul(pool, type, w, n_out, n_in, x, n_tok, y, ws);
    if (s) goto out_restore;
    double best = 1e30, t_start = lmq_time_s();
    int runs = 0;
    while (runs < 3 || lmq_time_s() - t_start < min_seconds) {
        const double t0 = bench_now(n_threads);
        s = repacked ? lmq_matmul_repacked(pool, type, packed + (runs % copies) * pmat, n_out, n_in, x, n_tok, y, ws)
                     : lmq_matmul(pool, type, w + (runs % copies) * mat, n_out, n_in, x, n_tok, y, ws);
        const double dt = bench_now(n_threads) - t0;
        if (s) goto out_restore;
        if (dt < best) best = dt;
        runs++;
    }
    out->type = type;
    out->isa = isa;
    out->n_out = n_out;
    out->n_in = n_in;
    out->n_tok = n_tok;
    out->n_threads = n_threads;
    out->n_runs = runs;
    out->seconds = best;
    out->gbytes_s = (double)(repacked ? pmat : mat) / best / 1e9;
    out->gflops = 2.0 * (double)n_out * (double)n_in * (double)n_tok / best / 1e9;

out_restore:
    lmq_isa_force(prev);
out_free:
    lmq_workspace_free(ws);
    lmq_pool_free(pool);
    free(w);
    free(packed);
    free(rows);
    free(src);
    free(x);
    free(y);
    return s;
}
