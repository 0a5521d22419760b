/* Error-feedback quantization (GPTQ, Frantar et al. 2022) over lmq's block
 * types.
 *
 * Plain quantization rounds every weight to its block's grid on its own,
 * which minimises the (importance-weighted) weight error. What the model
 * sees is the output error e^T x of each row, summed over the calibration
 * activations x: E = sum_x (e^T x)^2 = e^T H e with H = sum x x^T. Its
 * diagonal is the importance matrix; the off-diagonal part (inputs that
 * move together) is what plain rounding cannot use. GPTQ walks a row from
 * left to right and, after rounding element i, moves its error onto the
 * elements not yet rounded so that e^T H e stays minimal given the choices
 * made:  w[j] -= (w_i - q_i) / U_ii * U_ij  for j > i, with U the upper
 * Cholesky factor of H^-1 (H^-1 = U^T U).
 *
 * The block types fix a grid per block (scales, mins), so each block's
 * grid is chosen when the walk reaches it: lmq_quantize_row() on the
 * error-corrected weights of that block (the usual search, imatrix
 * weighted), then the block's codes are re-picked one element at a time
 * with the feedback, and written back with the block's scales unchanged
 * (quant_internal.h, lmq_qgrid).
 *
 * Rows are independent: threads take groups of rows, so the result does not
 * depend on the thread count. Updates are applied lazily (GPTQ's "lazy
 * batch"): within a window of 256 columns element by element, to the
 * columns after the window once per window, a group of 64 rows at a time
 * (one sgemm with BLAS: the errors of the window times U's rows of the
 * window; the C loop is the reference without BLAS). The groups do not
 * depend on the thread count, so neither do the bytes. */
#include <stdlib.h>

#include "quant_internal.h"

#if !defined(LMQ_NO_BLAS) && defined(__has_include)
#if __has_include(<cblas.h>)
#include <cblas.h>
#define LMQ_HAVE_BLAS 1
#endif
#endif
#ifndef LMQ_HAVE_BLAS
#define LMQ_HAVE_BLAS 0
#endif
#if defined(LMQ_NO_BLAS) || !defined(LMQ_HAVE_LAPACK)
#undef LMQ_HAVE_LAPACK
#define LMQ_HAVE_LAPACK 0
#endif

#if LMQ_HAVE_LAPACK
/* LAPACK (column-major; the trailing lengths of the character arguments) */
void spotrf_(const char *uplo, const int *n, float *a, const int *lda, int *info, size_t uplo_len);
void strtri_(const char *uplo, const char *diag, const int *n, float *a, const int *lda, int *info, size_t uplo_len,
             size_t diag_len);
#endif

#define GPTQ_WINDOW 256 /* columns updated element by element */
#define GPTQ_GROUP 64   /* rows sharing each pass over U */

typedef void (*grid_fn)(const void *blk, lmq_qgrid *g);
typedef void (*codes_fn)(void *blk, const uint8_t *L);

typedef struct gptq_type {
    lmq_type t;
    grid_fn grid;
    codes_fn codes;
} gptq_type;

static const gptq_type k_types[] = {
    {LMQ_TYPE_Q4_0, lmq_q_q4_0_grid, lmq_q_q4_0_codes},
    {LMQ_TYPE_Q4_1, lmq_q_q4_1_grid, lmq_q_q4_1_codes},
    {LMQ_TYPE_Q5_0, lmq_q_q5_0_grid, lmq_q_q5_0_codes},
    {LMQ_TYPE_Q5_1, lmq_q_q5_1_grid, lmq_q_q5_1_codes},
    {LMQ_TYPE_Q8_0, lmq_q_q8_0_grid, lmq_q_q8_0_codes},
    {LMQ_TYPE_IQ4_NL, lmq_q_iq4_nl_grid, lmq_q_iq4_nl_codes},
    {LMQ_TYPE_Q2_K, lmq_q_q2_K_grid, lmq_q_q2_K_codes},
    {LMQ_TYPE_Q3_K, lmq_q_q3_K_grid, lmq_q_q3_K_codes},
    {LMQ_TYPE_Q4_K, lmq_q_q4_K_grid, lmq_q_q4_K_codes},
    {LMQ_TYPE_Q5_K, lmq_q_q5_K_grid, lmq_q_q5_K_codes},
    {LMQ_TYPE_Q6_K, lmq_q_q6_K_grid, lmq_q_q6_K_codes},
    {LMQ_TYPE_IQ4_XS, lmq_q_iq4_xs_grid, lmq_q_iq4_xs_codes},
    {LMQ_TYPE_MXFP4, lmq_q_mxfp4_grid, lmq_q_mxfp4_codes},
};

static const gptq_type *find_type(lmq_type t)
{
    for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++)
        if (k_types[i].t == t) return &k_types[i];
    return NULL;
}

bool lmq_gptq_supported(lmq_type t)
{
    return find_type(t) != NULL;
}

/* ======================================================================
 * H and its factor
 * ====================================================================== */

#if LMQ_HAVE_BLAS
/* x^T x in fixed stripes of H's rows, each its own BLAS call (ssyrk on the
 * diagonal block, sgemm to its right), so that threads can share the work
 * and the sums do not depend on how many there are. Stripe k ends where
 * the upper triangle's area reaches k / ACC_STRIPES of the whole. */
#define ACC_STRIPES 8
typedef struct acc_job {
    float *h;
    const float *x;
    int64_t n_tok, n;
} acc_job;

static int64_t acc_bound(int64_t n, int k)
{
    if (k >= ACC_STRIPES) return n;
    const int64_t b = (int64_t)((double)n * (1.0 - sqrt(1.0 - (double)k / ACC_STRIPES)));
    return b / 16 * 16;
}

static void acc_stripes(void *ctx, int ith, int nth)
{
    const acc_job *a = ctx;
    const int64_t n = a->n;
    for (int k = ith; k < ACC_STRIPES; k += nth) {
        const int64_t b0 = acc_bound(n, k), b1 = acc_bound(n, k + 1);
        if (b1 <= b0) continue;
        cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)(b1 - b0), (int)a->n_tok, 1.0f, a->x + b0, (int)n, 1.0f,
                    a->h + b0 * n + b0, (int)n);
        if (b1 < n)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)(b1 - b0), (int)(n - b1), (int)a->n_tok, 1.0f,
                        a->x + b0, (int)n, a->x + b1, (int)n, 1.0f, a->h + b0 * n + b1, (int)n);
    }
}
#endif

void lmq_gptq_accumulate_mt(float *h, const float *x, int64_t n_tok, int64_t n, int n_threads)
{
#if LMQ_HAVE_BLAS
    if (n_tok > 0 && n <= INT32_MAX && n_tok <= INT32_MAX) {
        if (n < 512) {
            cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)n, (int)n_tok, 1.0f, x, (int)n, 1.0f, h, (int)n);
            return;
        }
        if (n_threads <= 0) n_threads = lmq_n_cpus();
        if (n_threads > ACC_STRIPES) n_threads = ACC_STRIPES;
        acc_job a = {h, x, n_tok, n};
        if (n_threads == 1 || lmq_pool_for(n_threads, acc_stripes, &a)) acc_stripes(&a, 0, 1);
        return;
    }
#endif
    (void)n_threads;
    /* upper triangle, a few tokens at a time so a row of h is loaded once
     * per group */
    enum { TB = 8 };
    for (int64_t t0 = 0; t0 < n_tok; t0 += TB) {
        const int64_t nt = n_tok - t0 < TB ? n_tok - t0 : TB;
        const float *xs = x + t0 * n;
        for (int64_t i = 0; i < n; i++) {
            float *hi = h + i * n;
            for (int64_t t = 0; t < nt; t++) {
                const float *xt = xs + t * n;
                const float xi = xt[i];
                if (xi == 0.0f) continue;
                for (int64_t j = i; j < n; j++) hi[j] += xi * xt[j];
            }
        }
    }
}

void lmq_gptq_accumulate(float *h, const float *x, int64_t n_tok, int64_t n)
{
    lmq_gptq_accumulate_mt(h, x, n_tok, n, 1);
}

/* Reverses the element order of the n x n matrix a: a -> J a J. */
static void reverse_both(float *a, int64_t n)
{
    for (int64_t i = 0, k = n * n - 1; i < k; i++, k--) {
        const float t = a[i];
        a[i] = a[k];
        a[k] = t;
    }
}

/* Transposes the n x n matrix a in place (swap) or copies its upper
 * triangle onto the lower one, in 32 x 32 tiles so that the column reads
 * stay in the cache. */
static void transpose_tiles(float *a, int64_t n, bool swap)
{
    enum { TS = 32 };
    for (int64_t i0 = 0; i0 < n; i0 += TS)
        for (int64_t j0 = i0; j0 < n; j0 += TS) {
            const int64_t i1 = i0 + TS < n ? i0 + TS : n, j1 = j0 + TS < n ? j0 + TS : n;
            for (int64_t i = i0; i < i1; i++)
                for (int64_t j = j0 > i + 1 ? j0 : i + 1; j < j1; j++) {
                    const float t = a[i * n + j];
                    if (swap) a[i * n + j] = a[j * n + i];
                    a[j * n + i] = t;
                }
        }
}

#if LMQ_HAVE_LAPACK
/* The same factor as the C code below, with LAPACK: J H J = L L^T
 * (spotrf), M = L^-1 (strtri), U = J M J. A symmetric row-major matrix is
 * its own column-major image; the column-major lower triangle read back
 * row-major is the transpose, which the final copy undoes. */
static lmq_status factor_lapack(float *h, int64_t n)
{
    const int ni = (int)n;
    int info = 0;
    reverse_both(h, n);
    spotrf_("L", &ni, h, &ni, &info, 1);
    if (info == 0) {
        strtri_("L", "N", &ni, h, &ni, &info, 1, 1);
        info = -info; /* < 0: a singular factor */
    }
    if (info > 0)
        return lmq_error(LMQ_ERR_INVALID_ARG, "gptq factor: the %lld x %lld input covariance is not positive definite (pivot %d)",
                         (long long)n, (long long)n, info - 1);
    if (info < 0) return lmq_error(LMQ_ERR_INVALID_ARG, "gptq factor: singular factor (element %d)", -info - 1);
    /* column-major M(r, c) sits at h[r + c n]; U(i, j) = M(n-1-i, n-1-j)
     * for j >= i: transpose in place (h[i n + j] <-> h[j n + i]) turns the
     * array into row-major M, then the reversal gives row-major U */
    transpose_tiles(h, n, true);
    reverse_both(h, n);
    for (int64_t i = 0; i < n; i++) {
        memset(h + i * n, 0, (size_t)i * sizeof *h);
        for (int64_t j = i; j < n; j++)
            if (!isfinite(h[i * n + j])) return lmq_error(LMQ_ERR_INVALID_ARG, "gptq factor: the inverse is not finite");
    }
    return LMQ_OK;
}
#endif

lmq_status lmq_gptq_factor(float *h, int64_t n, float damp)
{
    if (!h || n <= 0 || !(damp >= 0.0f) || !isfinite(damp))
        return lmq_error(LMQ_ERR_INVALID_ARG, "gptq factor: bad arguments");
    /* symmetric from the upper triangle; dead inputs (never active) get a
     * unit diagonal, which makes their weights plain-rounded */
    transpose_tiles(h, n, false);
    double mean = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(h[i * n + i]) || h[i * n + i] < 0.0f)
            return lmq_error(LMQ_ERR_INVALID_ARG, "gptq factor: diagonal element %lld is %g", (long long)i,
                             (double)h[i * n + i]);
        if (h[i * n + i] == 0.0f) h[i * n + i] = 1.0f;
        mean += h[i * n + i];
    }
    const float add = (float)(damp * mean / (double)n);
    for (int64_t i = 0; i < n; i++) h[i * n + i] += add;

#if LMQ_HAVE_LAPACK
    /* narrow matrices stay on the C code: fast enough, and it keeps both
     * paths tested (test_gptq factors 256- and 768-wide matrices) */
    if (n >= 512 && n <= INT32_MAX / n) return factor_lapack(h, n);
#endif
    /* H = R R^T with R upper triangular: the Cholesky factor of H with rows
     * and columns reversed. Then H^-1 = (R^-1)^T R^-1, so the factor wanted
     * is U = R^-1. Work on B = J H J (J the reversal) in place: B = L L^T,
     * L lower (row-major, inner products over contiguous row prefixes). */
    reverse_both(h, n);
    for (int64_t j = 0; j < n; j++) {
        float *lj = h + j * n;
        double s = lj[j];
        for (int64_t k = 0; k < j; k++) s -= (double)lj[k] * lj[k];
        if (!(s > 0.0) || !isfinite(s))
            return lmq_error(LMQ_ERR_INVALID_ARG, "gptq factor: the %lld x %lld input covariance is not positive definite (pivot %lld)",
                             (long long)n, (long long)n, (long long)j);
        const float djj = (float)sqrt(s), inv = 1.0f / djj;
        lj[j] = djj;
        for (int64_t i = j + 1; i < n; i++) {
            const float *li = h + i * n;
            float acc = 0.0f;
            for (int64_t k = 0; k < j; k++) acc += li[k] * lj[k];
            h[i * n + j] = (h[i * n + j] - acc) * inv;
        }
    }
    /* M = L^-1 in place, row by row: M_i = (e_i - sum_{k<i} L_ik M_k) / L_ii.
     * Row i's L entries are read before they are overwritten: keep them in
     * a copy. */
    float *row = malloc((size_t)n * sizeof *row);
    if (!row) return lmq_error(LMQ_ERR_NOMEM, "gptq factor: out of memory");
    for (int64_t i = 0; i < n; i++) {
        float *mi = h + i * n;
        memcpy(row, mi, (size_t)(i + 1) * sizeof *row);
        memset(mi, 0, (size_t)n * sizeof *mi);
        for (int64_t k = 0; k < i; k++) {
            const float c = row[k];
            const float *mk = h + k * n;
            for (int64_t j = 0; j <= k; j++) mi[j] -= c * mk[j];
        }
        mi[i] += 1.0f;
        const float inv = 1.0f / row[i];
        for (int64_t j = 0; j <= i; j++) mi[j] *= inv;
    }
    free(row);
    reverse_both(h, n); /* U = J M J: upper triangular */
    for (int64_t i = 0; i < n * n; i++)
        if (!isfinite(h[i])) return lmq_error(LMQ_ERR_INVALID_ARG, "gptq factor: the inverse is not finite");
    return LMQ_OK;
}

/* ======================================================================
 * Quantization
 * ====================================================================== */

typedef struct gptq_job {
    const gptq_type *gt;
    lmq_type t;
    float *x;
    uint8_t *dst;
    const float *imatrix, *u;
    int64_t n, row_bytes, blk_bytes, gb; /* gb: elements per grid block */
    int64_t g0, g1;                      /* row groups [g0, g1) */
    int64_t nrows;
    int64_t bad_row;                     /* a row whose corrected weights left the floats; -1 */
} gptq_job;

static inline int grid_code(const lmq_qgrid *g, int l, float x)
{
    const float a = g->a[l];
    if (a == 0.0f) return g->table ? lmq_iq4_best_index(g->table, 0.0f) : lmq_clampi(-g->voff, 0, g->nq - 1);
    const float v = (x - g->b[l]) / a;
    if (g->table) return lmq_iq4_best_index(g->table, v);
    return lmq_clampi(lmq_nearest_int(v) - g->voff, 0, g->nq - 1);
}

static inline float grid_value(const lmq_qgrid *g, int l, int c)
{
    return g->a[l] * (float)(g->table ? g->table[c] : c + g->voff) + g->b[l];
}

static void *gptq_worker(void *arg)
{
    gptq_job *j = arg;
    const int64_t n = j->n;
    const int64_t win = n % GPTQ_WINDOW == 0 ? GPTQ_WINDOW : j->gb;
    float err[GPTQ_GROUP][GPTQ_WINDOW];
    uint8_t L[LMQ_QK_K];
    lmq_qgrid g;
    for (int64_t grp = j->g0; grp < j->g1; grp++) {
        const int64_t r0 = grp * GPTQ_GROUP;
        const int64_t nr = j->nrows - r0 < GPTQ_GROUP ? j->nrows - r0 : GPTQ_GROUP;
        for (int64_t w0 = 0; w0 < n; w0 += win) {
            for (int64_t r = 0; r < nr; r++) {
                float *x = j->x + (r0 + r) * n;
                uint8_t *out = j->dst + (r0 + r) * j->row_bytes;
                for (int64_t b0 = w0; b0 < w0 + win; b0 += j->gb) {
                    uint8_t *blk = out + (b0 / j->gb) * j->blk_bytes;
                    /* the block's grid from the corrected weights */
                    if (lmq_quantize_row(j->t, x + b0, blk, j->gb, j->imatrix ? j->imatrix + b0 : NULL)) {
                        j->bad_row = r0 + r;
                        return NULL;
                    }
                    j->gt->grid(blk, &g);
                    for (int64_t l = 0; l < j->gb; l++) {
                        const int64_t i = b0 + l;
                        const int c = grid_code(&g, (int)l, x[i]);
                        L[l] = (uint8_t)c;
                        const float e = (x[i] - grid_value(&g, (int)l, c)) / j->u[i * n + i];
                        err[r][i - w0] = e;
                        const float *ui = j->u + i * n;
                        for (int64_t k = i + 1; k < w0 + win; k++) x[k] -= e * ui[k];
                    }
                    j->gt->codes(blk, L);
                }
            }
            /* the columns after the window: X[rows, c0:] -= E U[window, c0:] */
            if (w0 + win < n) {
                const int64_t c0 = w0 + win, len = n - c0;
#if LMQ_HAVE_BLAS
                if (n <= INT32_MAX) {
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nr, (int)len, (int)win, -1.0f, &err[0][0],
                                GPTQ_WINDOW, j->u + w0 * n + c0, (int)n, 1.0f, j->x + r0 * n + c0, (int)n);
                    continue;
                }
#endif
                for (int64_t i = 0; i < win; i++) {
                    const float *ui = j->u + (w0 + i) * n + c0;
                    for (int64_t r = 0; r < nr; r++) {
                        const float e = err[r][i];
                        if (e == 0.0f) continue;
                        float *x = j->x + (r0 + r) * n + c0;
                        for (int64_t k = 0; k < len; k++) x[k] -= e * ui[k];
                    }
                }
            }
        }
    }
    return NULL;
}

lmq_status lmq_quantize_rows_gptq(lmq_type t, float *src, void *dst, int64_t nrows, int64_t n,
                                  const float *imatrix, const float *u, int n_threads)
{
    const gptq_type *gt = find_type(t);
    if (!gt) return lmq_error(LMQ_ERR_UNSUPPORTED, "gptq: type %s has no error-feedback quantizer", lmq_type_name(t));
    if (!src || !dst || !u || nrows < 0 || n <= 0)
        return lmq_error(LMQ_ERR_INVALID_ARG, "gptq: bad arguments");
    const lmq_type_traits *ti = lmq_type_get(t);
    const int64_t gb = ti->block_size;
    if (n % gb) return lmq_error(LMQ_ERR_INVALID_ARG, "gptq %s: row length %lld is not a multiple of %lld", lmq_type_name(t), (long long)n, (long long)gb);
    if (nrows == 0) return LMQ_OK;
    for (int64_t i = 0; i < nrows * n; i++)
        if (!isfinite(src[i]))
            return lmq_error(LMQ_ERR_INVALID_ARG, "quantize %s: input row %lld element %lld is %s", lmq_type_name(t),
                             (long long)(i / n), (long long)(i % n), isnan(src[i]) ? "NaN" : "infinite");
    for (int64_t i = 0; imatrix && i < n; i++)
        if (!(imatrix[i] >= 0.0f) || !isfinite(imatrix[i]))
            return lmq_error(LMQ_ERR_INVALID_ARG, "quantize %s: importance weight %lld is negative or not finite (%g)",
                             lmq_type_name(t), (long long)i, (double)imatrix[i]);
    for (int64_t i = 0; i < n; i++)
        if (!(u[i * n + i] > 0.0f)) return lmq_error(LMQ_ERR_INVALID_ARG, "gptq: factor diagonal %lld is not positive", (long long)i);

    if (n_threads <= 0) n_threads = lmq_n_cpus();
    if (n_threads > LMQ_MAX_THREADS) n_threads = LMQ_MAX_THREADS;
    const int64_t n_groups = (nrows + GPTQ_GROUP - 1) / GPTQ_GROUP;
    if (n_threads > n_groups) n_threads = (int)n_groups;
    gptq_job jobs[LMQ_MAX_THREADS];
    for (int k = 0; k < n_threads; k++)
        jobs[k] = (gptq_job){gt, t, src, dst, imatrix, u, n, lmq_row_size(t, n), (int64_t)ti->type_size, gb,
                             n_groups * k / n_threads, n_groups * (k + 1) / n_threads, nrows, -1};
    lmq_q_run_jobs(gptq_worker, jobs, sizeof jobs[0], n_threads);
    for (int k = 0; k < n_threads; k++)
        if (jobs[k].bad_row >= 0)
            return lmq_error(LMQ_ERR_INVALID_ARG, "gptq %s: row %lld diverged (the corrected weights are not finite)",
                             lmq_type_name(t), (long long)jobs[k].bad_row);
    return LMQ_OK;
}
