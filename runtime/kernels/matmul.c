/* The matmul entry point used by the model, its workspace, and the public
 * wrappers of the dispatched kernels.
 *
 * y[n_tok][n_out] = x[n_tok][n_in] . W^T runs one of two paths:
 *   - vec_dot: the activations are quantized once (to the weight type's
 *     activation type, shared by all threads), then threads take chunks of
 *     output rows and compute each (row, token) dot with the ISA's kernel:
 *     4 rows x 4 tokens per call where the ISA has a tile kernel (weights
 *     unpacked once per four tokens, activations loaded once per four
 *     rows), else four tokens per call where it has a 4-token kernel;
 *   - panel (batches of at least LMQ_PANEL_MIN_TOK32/256 tokens, where the ISA
 *     has a panel kernel for the type): activations quantized as for
 *     vec_dot (then biased, panel.c), threads take 16-row chunks, pack each
 *     into a row-interleaved panel in their own scratch and run the panel
 *     kernel over every token;
 *   - f32 panels (the same batches, where the ISA has fpanel_gemm: AVX2,
 *     avxvnni, AVX-512): threads take chunks of 64 rows, dequantize them to f32
 *     and transpose them into 16-row panels in their own scratch, and run
 *     the panel kernel over every token with the f32 activations in place;
 *   - blas (batches of at least ktraits[type].blas_min/blas_min4 tokens, in
 *     a build with a BLAS, where the ISA has no fpanel_gemm or the BLAS
 *     path is forced): threads take fixed tiles of rows, dequantize the
 *     tile to f32 in their own scratch, and call cblas_sgemm on it with f32
 *     activations.
 * Both split work in units that do not depend on the thread count, so the
 * result is the same bit for bit with any number of threads. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kernels.h"

#if !defined(LMQ_NO_BLAS) && defined(__has_include)
#if __has_include(<cblas.h>)
#include <cblas.h>
#define LMQ_HAVE_BLAS 1
#endif
#endif
#ifndef LMQ_HAVE_BLAS
#define LMQ_HAVE_BLAS 0
#endif

/* Rows per tile of the BLAS path: about LMQ_GEMM_TILE_BYTES of f32 weights
 * (rows x n_in), 64 to 256 rows, a multiple of 16, halved (down to 64)
 * while the matrix would have fewer than LMQ_GEMM_MIN_TILES tiles, so that
 * many threads still share it. Each sgemm call packs all the activations
 * again, so tiles of 64 rows of a 2048-wide bf16 matrix spent 13.6% of a
 * pp512 in OpenBLAS's packing (sgemm_oncopy); 256 rows, 5.4%
 * (docs/PERF.md). The size follows the shape only, never the thread count
 * (results must not depend on it). */
#define LMQ_GEMM_TILE_BYTES ((int64_t)2 << 20)
#define LMQ_GEMM_TILE_MIN 64
#define LMQ_GEMM_TILE_MAX 256
#define LMQ_GEMM_MIN_TILES 8

static int64_t gemm_tile_rows(int64_t n_in, int64_t n_out)
{
    int64_t r = n_in > 0 ? LMQ_GEMM_TILE_BYTES / 4 / n_in / 16 * 16 : LMQ_GEMM_TILE_MIN;
    r = r < LMQ_GEMM_TILE_MIN ? LMQ_GEMM_TILE_MIN : r > LMQ_GEMM_TILE_MAX ? LMQ_GEMM_TILE_MAX : r;
    while (r > LMQ_GEMM_TILE_MIN && n_out < LMQ_GEMM_MIN_TILES * r) r = r / 2 / 16 * 16;
    return r < LMQ_GEMM_TILE_MIN ? LMQ_GEMM_TILE_MIN : r;
}
/* Rows per work item of the vec_dot path (a scheduling unit only). */
#define LMQ_VEC_CHUNK_ROWS 16
_Static_assert(LMQ_VEC_CHUNK_ROWS == LMQ_PANEL_ROWS, "lmq_matmul_multi hands out chunks of both paths");
/* Tokens per pass of the vec_dot path, so that the quantized activations a
 * pass touches stay in L2 while a chunk of weight rows is reused. */
#define LMQ_VEC_TOK_BLOCK 32
/* Smallest batch that takes the panel path (LMQ_GEMM=auto), for 32- and
 * 256-element blocks: packing a panel costs about what the kernel spends on
 * a few tokens (crossovers measured in docs/PERF.md). */
#define LMQ_PANEL_MIN_TOK32 16
#define LMQ_PANEL_MIN_TOK256 8
/* Up to this many tokens, threads start on contiguous row ranges (see
 * vecdot_worker), for pools of at most LMQ_VEC_MAX_RANGES threads. */
#define LMQ_VEC_STATIC_MAX_TOK 2
#define LMQ_VEC_MAX_RANGES 64

/* ================================================================
 * Types
 * ================================================================ */

/* Per weight type: whether matmul handles it, the activation type its
 * dot kernels take, and the smallest batch that takes the BLAS path when
 * the active ISA has no 4-token kernel for the type (blas_min), when it has
 * one (blas_min4) and when it has a 4 x 4 tile kernel (blas_min_tile);
 * 0 = never. From the single-thread crossovers measured in docs/PERF.md. */
typedef struct kernel_traits {
    bool ok;
    lmq_type act;
    int16_t blas_min, blas_min4, blas_min_tile;
} kernel_traits;

static const kernel_traits ktraits[LMQ_TYPE_COUNT] = {
    [LMQ_TYPE_F32] = {true, LMQ_TYPE_F32, 8, 8, 8},         [LMQ_TYPE_F16] = {true, LMQ_TYPE_F16, 12, 12, 12},
    [LMQ_TYPE_BF16] = {true, LMQ_TYPE_BF16, 12, 12, 12},     [LMQ_TYPE_Q4_0] = {true, LMQ_TYPE_Q8_0, 32, 128, 0},
    [LMQ_TYPE_Q4_1] = {true, LMQ_TYPE_Q8_1, 32, 32, 0},     [LMQ_TYPE_Q5_0] = {true, LMQ_TYPE_Q8_0, 32, 32, 0},
    [LMQ_TYPE_Q5_1] = {true, LMQ_TYPE_Q8_1, 32, 32, 0},     [LMQ_TYPE_Q8_0] = {true, LMQ_TYPE_Q8_0, 32, 128, 0},
    [LMQ_TYPE_Q2_K] = {true, LMQ_TYPE_Q8_K, 64, 0, 0},      [LMQ_TYPE_Q3_K] = {true, LMQ_TYPE_Q8_K, 48, 0, 0},
    [LMQ_TYPE_Q4_K] = {true, LMQ_TYPE_Q8_K, 64, 0, 0},      [LMQ_TYPE_Q5_K] = {true, LMQ_TYPE_Q8_K, 48, 0, 0},
    [LMQ_TYPE_Q6_K] = {true, LMQ_TYPE_Q8_K, 128, 0, 0},     [LMQ_TYPE_IQ4_NL] = {true, LMQ_TYPE_Q8_0, 32, 32, 0},
    [LMQ_TYPE_IQ4_XS] = {true, LMQ_TYPE_Q8_K, 48, 48, 0},   [LMQ_TYPE_F8_E4M3] = {true, LMQ_TYPE_F32, 12, 12, 12},
    [LMQ_TYPE_F8_E5M2] = {true, LMQ_TYPE_F32, 12, 12, 12},   [LMQ_TYPE_MXFP4] = {true, LMQ_TYPE_Q8_0, 32, 32, 0},
    /* the codebook and ternary types: q8_K dots over lmq_iq_unpack, panels on x86 */
    [LMQ_TYPE_IQ2_XXS] = {true, LMQ_TYPE_Q8_K, 48, 0, 0},    [LMQ_TYPE_IQ2_XS] = {true, LMQ_TYPE_Q8_K, 48, 0, 0},
    [LMQ_TYPE_IQ2_S] = {true, LMQ_TYPE_Q8_K, 48, 0, 0},      [LMQ_TYPE_IQ3_XXS] = {true, LMQ_TYPE_Q8_K, 48, 0, 0},
    [LMQ_TYPE_IQ3_S] = {true, LMQ_TYPE_Q8_K, 48, 0, 0},      [LMQ_TYPE_IQ1_S] = {true, LMQ_TYPE_Q8_K, 48, 0, 0},
    [LMQ_TYPE_IQ1_M] = {true, LMQ_TYPE_Q8_K, 48, 0, 0},      [LMQ_TYPE_TQ1_0] = {true, LMQ_TYPE_Q8_K, 48, 0, 0},
    [LMQ_TYPE_TQ2_0] = {true, LMQ_TYPE_Q8_K, 48, 0, 0},
};

lmq_type lmq_act_type(lmq_type t)
{
    if ((unsigned)t >= LMQ_TYPE_COUNT || !ktraits[t].ok) return LMQ_TYPE_COUNT;
    return ktraits[t].act;
}

bool lmq_matmul_supported(lmq_type t)
{
    return lmq_act_type(t) != LMQ_TYPE_COUNT;
}

static int64_t block_size(lmq_type t)
{
    const lmq_type_traits *tr = lmq_type_get(t);
    return tr ? tr->block_size : 0;
}

int64_t lmq_act_row_size(lmq_type wtype, int64_t n)
{
    lmq_type at = lmq_act_type(wtype);
    if (at == LMQ_TYPE_COUNT || n < 0 || n % block_size(wtype) != 0) return -1;
    return lmq_row_size(at, n);
}

/* Row stride of the quantized activations in the workspace (64-byte aligned). */
static int64_t act_stride(lmq_type wtype, int64_t n)
{
    int64_t s = lmq_act_row_size(wtype, n);
    return s < 0 ? -1 : (s + 63) & ~(int64_t)63;
}

static lmq_status check_row(const char *what, lmq_type wtype, int64_t n)
{
    if (!lmq_matmul_supported(wtype))
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: no kernels for weight type %s", what, lmq_type_name(wtype));
    if (n <= 0 || n % block_size(wtype) != 0)
        return lmq_error(LMQ_ERR_INVALID_ARG, "%s: row length %lld is not a positive multiple of %s's block size %lld",
                         what, (long long)n, lmq_type_name(wtype), (long long)block_size(wtype));
    return LMQ_OK;
}

lmq_status lmq_act_quantize(lmq_type wtype, const float *x, void *out, int64_t n)
{
    lmq_status s = check_row("act_quantize", wtype, n);
    if (s) return s;
    lmq_type at = lmq_act_type(wtype);
    if (at == LMQ_TYPE_F32)
        memcpy(out, x, (size_t)n * sizeof(float));
    else
        lmq_kernels()->from_float[at](x, out, n);
    return LMQ_OK;
}

lmq_status lmq_vec_dot(lmq_type wtype, int64_t n, const void *w, const void *a, float *out)
{
    lmq_status s = check_row("vec_dot", wtype, n);
    if (s) return s;
    lmq_kernels()->vec_dot[wtype](n, out, w, a);
    return LMQ_OK;
}

/* ================================================================
 * BLAS configuration
 * ================================================================ */

static _Atomic int gemm_mode = LMQ_GEMM_AUTO; /* process-wide (the CLI applies LMQ_GEMM) */

lmq_status lmq_gemm_mode_from_name(const char *name, lmq_gemm_mode *out)
{
    static const char *names[LMQ_GEMM_MODE_COUNT] = {"auto", "vecdot", "blas", "panel"};
    for (int i = 0; name && i < LMQ_GEMM_MODE_COUNT; i++)
        if (!strcasecmp(name, names[i])) {
            *out = (lmq_gemm_mode)i;
            return LMQ_OK;
        }
    return lmq_error(LMQ_ERR_INVALID_ARG, "GEMM mode '%s' is not auto, vecdot, blas or panel", name ? name : "");
}

/* The mode in force on this thread: its scope's (a context's), else the
 * process-wide one. */
static int gemm_mode_now(void)
{
    const int m = lmq_kernel_scope_gemm();
    return m >= 0 ? m : atomic_load_explicit(&gemm_mode, memory_order_relaxed);
}

bool lmq_have_blas(void)
{
    return LMQ_HAVE_BLAS;
}

lmq_gemm_mode lmq_gemm_mode_set(lmq_gemm_mode mode)
{
    if ((unsigned)mode >= LMQ_GEMM_MODE_COUNT) mode = LMQ_GEMM_AUTO;
    return (lmq_gemm_mode)atomic_exchange(&gemm_mode, (int)mode);
}

/* Smallest batch that takes the BLAS path with the active ISA (0 = never). */
static int blas_min_tok(lmq_type t)
{
    if (!LMQ_HAVE_BLAS) return 0;
    const lmq_kernel_table *k = lmq_kernels();
    if (k->panel_gemm[t]) return 0; /* the panel path takes the batches */
    return k->vec_dot_tile[t] ? ktraits[t].blas_min_tile : k->vec_dot4[t] ? ktraits[t].blas_min4 : ktraits[t].blas_min;
}

/* Smallest batch for the f32 panel path (0 = never): the ISA has the
 * kernel and the type no integer panel; the BLAS path's crossovers serve
 * (f16 / bf16 on AVX2, 2048 x 2048, one thread: the vec_dot tiles ahead at
 * 8 tokens, 38-43 against 34-40 GFLOP/s, the panels from 12; docs/PERF.md). */
static int fpanel_min_tok(lmq_type t)
{
    const lmq_kernel_table *k = lmq_kernels();
    if (!k->fpanel_gemm || k->panel_gemm[t] || !k->to_float[t]) return 0;
    return k->vec_dot_tile[t] ? ktraits[t].blas_min_tile : k->vec_dot4[t] ? ktraits[t].blas_min4 : ktraits[t].blas_min;
}

static bool use_fpanel(lmq_type t, int64_t n_tok)
{
    const int min = fpanel_min_tok(t);
    return gemm_mode_now() == LMQ_GEMM_AUTO && min > 0 && n_tok >= min;
}

/* The panel path: where the ISA has the kernel, from LMQ_PANEL_MIN_TOK*
 * tokens (any batch when forced), never when another path is forced. */
static bool use_panel(lmq_type t, int64_t n_tok)
{
    if (!lmq_kernels()->panel_gemm[t]) return false;
    const int mode = gemm_mode_now();
    if (mode == LMQ_GEMM_PANEL) return true;
    const int isa_min = lmq_kernels()->panel_min_tok[t]; /* an ISA's own crossover (docs/PERF.md) */
    const int min = isa_min ? isa_min : lmq_panel_traits_of(t)->block == 32 ? LMQ_PANEL_MIN_TOK32 : LMQ_PANEL_MIN_TOK256;
    return mode == LMQ_GEMM_AUTO && n_tok >= min;
}

/* lmq never changes the BLAS library's own thread count behind a caller's
 * back (it is process-wide: other users of OpenBLAS in the process share
 * it). The BLAS path runs one sgemm per pool thread, so the automatic
 * choice takes it only while the BLAS runs each call on one thread: the
 * CLI says so at start (lmq_blas_set_threads(1)), an embedder may do the
 * same or set OPENBLAS_NUM_THREADS=1; otherwise the vec_dot/panel paths
 * serve (docs/API.md, "Threads"). */
lmq_status lmq_blas_set_threads(int n_threads)
{
    if (n_threads < 1 || n_threads > LMQ_MAX_THREADS)
        return lmq_error(LMQ_ERR_INVALID_ARG, "BLAS threads: %d (1 to %d)", n_threads, LMQ_MAX_THREADS);
#if LMQ_HAVE_BLAS && defined(OPENBLAS_VERSION)
    openblas_set_num_threads(n_threads);
#endif
    return LMQ_OK;
}

#if LMQ_HAVE_BLAS
static bool blas_single_threaded(void)
{
#if defined(OPENBLAS_VERSION)
    return openblas_get_num_threads() == 1;
#else
    return true; /* a reference BLAS has no threads of its own */
#endif
}

static bool use_blas(lmq_type t, int64_t n_tok)
{
    const int mode = gemm_mode_now();
    if (mode == LMQ_GEMM_VECDOT || mode == LMQ_GEMM_PANEL) return false;
    if (mode == LMQ_GEMM_BLAS) return true;
    if (use_panel(t, n_tok) || use_fpanel(t, n_tok) || !blas_single_threaded()) return false;
    const int min = blas_min_tok(t);
    return min > 0 && n_tok >= min;
}
#endif



/* ================================================================
 * Workspace
 * ================================================================ */

struct lmq_workspace {
    void *act;        /* quantized activations, n_tok rows of act_stride bytes */
    size_t act_cap;
    float *tiles;     /* BLAS path: one (TILE_ROWS x n_in) f32 tile per thread */
    size_t tiles_cap; /* bytes */
    void *panels;     /* panel path: one panel per thread */
    size_t panels_cap;
    int32_t *asum;    /* repacked path: per-block sums of the activation quants */
    size_t asum_cap;
};

lmq_status lmq_workspace_new(lmq_workspace **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? LMQ_OK : lmq_error(LMQ_ERR_NOMEM, "matmul workspace");
}

void lmq_workspace_free(lmq_workspace *ws)
{
    if (!ws) return;
    free(ws->act);
    free(ws->tiles);
    free(ws->panels);
    free(ws->asum);
    free(ws);
}

static bool grow(void **p, size_t *cap, size_t need)
{
    if (need <= *cap) return true;
    size_t sz = (need + 63) & ~(size_t)63;
    void *q = aligned_alloc(64, sz);
    if (!q) return false;
    free(*p);
    *p = q;
    *cap = sz;
    return true;
}

static int64_t act_bytes(lmq_type wtype, int64_t n_in, int64_t n_tok)
{
    if (lmq_act_type(wtype) == LMQ_TYPE_F32) return 0; /* x is used in place */
    int64_t st = act_stride(wtype, n_in);
    if (st < 0 || n_tok < 0 || (n_tok > 0 && st > INT64_MAX / n_tok)) return -1;
    return st * n_tok;
}

static int64_t tile_bytes(lmq_type wtype, int64_t n_in, int n_threads)
{
    if (!LMQ_HAVE_BLAS || wtype == LMQ_TYPE_F32) return 0; /* f32 weights are used in place */
    if (n_in <= 0 || n_in > INT64_MAX / 4 / LMQ_GEMM_TILE_MAX / (n_threads > 0 ? n_threads : 1)) return -1;
    return (int64_t)n_threads * gemm_tile_rows(n_in, INT64_MAX) * n_in * 4; /* the largest for this width */
}

/* The f32 panel path's scratch per thread: LMQ_FPANEL_CHUNK rows as f32
 * panels and 16 rows dequantized before their transposition. */
#define LMQ_FPANEL_CHUNK 64
static int64_t fpanel_bytes(int64_t n_in, int n_threads)
{
    if (n_in <= 0 || n_in > INT64_MAX / 4 / (LMQ_FPANEL_CHUNK + 16) / (n_threads > 0 ? n_threads : 1)) return -1;
    return (int64_t)(n_threads > 0 ? n_threads : 1) * (LMQ_FPANEL_CHUNK + 16) * n_in * 4;
}

int64_t lmq_matmul_wsize(lmq_type wtype, int64_t n_in, int64_t max_tok, int n_threads)
{
    if (check_row("matmul", wtype, n_in) || max_tok <= 0 || n_threads <= 0) {
        lmq_error_clear();
        return -1;
    }
    int64_t a = act_bytes(wtype, n_in, max_tok);
    int64_t t = tile_bytes(wtype, n_in, n_threads);
    const int fmin = fpanel_min_tok(wtype);
    if (t >= 0 && fmin > 0 && max_tok >= fmin) {
        const int64_t f = fpanel_bytes(n_in, n_threads);
        t = f < 0 ? -1 : f > t ? f : t;
    }
    if (a < 0 || t < 0 || a > INT64_MAX - t) return -1;
    return a + t;
}

static int64_t rpanel_sum_words(lmq_type t);

lmq_status lmq_workspace_reserve(lmq_workspace *ws, lmq_type wtype, int64_t n_in, int64_t max_tok)
{
    return lmq_workspace_reserve_threads(ws, wtype, n_in, max_tok, 0);
}

/* Room for every path a product of up to max_tok tokens can take with the
 * ISA and GEMM mode now in force: quantized activations, BLAS weight tiles
 * (when the automatic choice or a forced mode takes BLAS), a panel per
 * thread (panel kernels) and the activation sums of repacked weights, so
 * that lmq_matmul* allocate nothing afterwards (lmq_eval's contract). */
lmq_status lmq_workspace_reserve_threads(lmq_workspace *ws, lmq_type wtype, int64_t n_in, int64_t max_tok,
                                         int n_threads)
{
    lmq_status s = check_row("workspace", wtype, n_in);
    if (s) return s;
    if (max_tok <= 0)
        return lmq_error(LMQ_ERR_INVALID_ARG, "workspace: %lld tokens", (long long)max_tok);
    int nth = lmq_n_cpus() > 4 ? lmq_n_cpus() : 4;
    if (n_threads > nth) nth = n_threads;
    int64_t a = act_bytes(wtype, n_in, max_tok), t = tile_bytes(wtype, n_in, nth);
    const int mode = gemm_mode_now();
    /* no tiles when neither the automatic choice nor a forced mode takes
     * the BLAS path here */
    const int bmin = blas_min_tok(wtype);
    if (mode != LMQ_GEMM_BLAS && (mode != LMQ_GEMM_AUTO || bmin == 0 || max_tok < bmin)) t = 0;
    const int fmin = fpanel_min_tok(wtype);
    if (mode == LMQ_GEMM_AUTO && fmin > 0 && max_tok >= fmin) {
        const int64_t f = fpanel_bytes(n_in, nth);
        if (f < 0) t = -1;
        else if (t >= 0 && f > t) t = f;
    }
    if (a < 0 || t < 0 || (uint64_t)a > SIZE_MAX || (uint64_t)t > SIZE_MAX)
        return lmq_error(LMQ_ERR_LIMIT, "workspace: %lld x %lld %s product is too large", (long long)max_tok,
                         (long long)n_in, lmq_type_name(wtype));
    if (!grow(&ws->act, &ws->act_cap, (size_t)a))
        return lmq_error(LMQ_ERR_NOMEM, "workspace: %lld bytes of activations", (long long)a);
    if (!grow((void **)&ws->tiles, &ws->tiles_cap, (size_t)t))
        return lmq_error(LMQ_ERR_NOMEM, "workspace: %lld bytes of weight tiles", (long long)t);
    const lmq_kernel_table *k = lmq_kernels();
    if (k->panel_gemm[wtype] && mode != LMQ_GEMM_VECDOT && mode != LMQ_GEMM_BLAS) {
        int64_t pb = (lmq_panel_bytes(wtype, n_in) + 63) & ~(int64_t)63;
        if (pb <= 0 || pb > INT64_MAX / nth || !grow(&ws->panels, &ws->panels_cap, (size_t)(pb * nth)))
            return lmq_error(LMQ_ERR_NOMEM, "workspace: %d panels of %lld bytes", nth, (long long)pb);
    }
    if (k->rpanel_gemm[wtype]) {
        const int64_t words = max_tok * (n_in / block_size(wtype)) * rpanel_sum_words(wtype);
        if (!grow((void **)&ws->asum, &ws->asum_cap, (size_t)words * sizeof(int32_t)))
            return lmq_error(LMQ_ERR_NOMEM, "workspace: %lld activation sums", (long long)words);
    }
    return LMQ_OK;
}

/* ================================================================
 * The vec_dot path
 * ================================================================ */

/* A per-thread work counter alone on its cache line. */
typedef struct mm_range {
    _Alignas(64) atomic_llong next;
} mm_range;

typedef struct mm_job {
    const lmq_kernel_table *k;
    lmq_type wtype, atype;
    const uint8_t *w;
    int64_t w_row;      /* bytes per weight row */
    const float *x;
    uint8_t *act;       /* quantized activations (or x itself for f32) */
    int64_t act_row;    /* stride in bytes */
    int64_t n_out, n_in, n_tok;
    float *y;
    float *tiles;       /* BLAS path scratch */
    uint8_t *panels;    /* panel path scratch: panel_bytes per thread */
    int64_t panel_bytes;
    bool panel;         /* activations are biased for the panel kernels */
    const uint8_t *packed; /* lmq_matmul_multi: repacked rows (rpanel_gemm), or NULL */
    int64_t chunk_bytes;   /* of 16 repacked rows */
    int32_t *asum;         /* the repacked kernels' activation sums (n_tok rows) */
    atomic_llong next;  /* next work item */
    struct mm_range *ranges; /* matvec: one counter per thread's range, or NULL */
} mm_job;

/* Quantizes the activations: all (token, block) pairs split evenly. Each
 * block is quantized on its own, so the split does not change the bytes. */
static void quantize_worker(void *arg, int ith, int nth)
{
    mm_job *j = arg;
    const int64_t bs = lmq_type_get(j->atype)->block_size, bbytes = lmq_type_get(j->atype)->type_size;
    const int64_t nb = j->n_in / bs, total = nb * j->n_tok;
    int64_t b0 = total * ith / nth, b1 = total * (ith + 1) / nth;
    while (b0 < b1) {
        int64_t t = b0 / nb, ib = b0 % nb;
        int64_t cnt = nb - ib < b1 - b0 ? nb - ib : b1 - b0;
        uint8_t *dst = j->act + t * j->act_row + ib * bbytes;
        j->k->from_float[j->atype](j->x + t * j->n_in + ib * bs, dst, cnt * bs);
        if (j->panel) lmq_panel_bias_act(j->wtype, dst, cnt * bs);
        b0 += cnt;
    }
}

/* Rows r0..r1 of the product for every token. */
static void vecdot_rows(const mm_job *j, int64_t r0, int64_t r1)
{
    const lmq_vec_dot_fn dot = j->k->vec_dot[j->wtype];
    const lmq_vec_dot4_fn dot4 = j->k->vec_dot4[j->wtype];
    const lmq_vec_dot_tile_fn tile = j->k->vec_dot_tile[j->wtype];
    for (int64_t t0 = 0; t0 < j->n_tok; t0 += LMQ_VEC_TOK_BLOCK) {
        int64_t t1 = t0 + LMQ_VEC_TOK_BLOCK < j->n_tok ? t0 + LMQ_VEC_TOK_BLOCK : j->n_tok;
        if (tile && t1 - t0 > 1) {
            /* 4 rows x 4 tokens per call; the 4 weight rows stay in L1 (a single token, the
             * matrix-vector case, is quicker with the 1 x 1 kernel: measured in docs/PERF.md) */
            for (int64_t r = r0; r < r1; r += 4) {
                const int nr = r1 - r < 4 ? (int)(r1 - r) : 4;
                for (int64_t t = t0; t < t1; t += 4)
                    tile(j->n_in, nr, t1 - t < 4 ? (int)(t1 - t) : 4, &j->y[t * j->n_out + r], j->n_out,
                         j->w + r * j->w_row, j->w_row, j->act + t * j->act_row, j->act_row);
            }
            continue;
        }
        for (int64_t r = r0; r < r1; r++) {
            const uint8_t *wr = j->w + r * j->w_row;
            int64_t t = t0;
            if (dot4)
                for (; t + 4 <= t1; t += 4)
                    dot4(j->n_in, &j->y[t * j->n_out + r], j->n_out, wr, j->act + t * j->act_row, j->act_row);
            for (; t < t1; t++) dot(j->n_in, &j->y[t * j->n_out + r], wr, j->act + t * j->act_row);
        }
    }
}

/* Matrix-vector products (memory-bound) give each thread one contiguous range
 * of chunks so that it streams through memory in order; a thread that
 * finishes its range then helps the others, taking chunks from the front of
 * their ranges (each range has its own counter on its own cache line, so the
 * owner's increments stay local until someone helps). Batches take chunks
 * from one shared counter. Either way each row's result is the same. */
/* Hands out chunks 0..n_chunks-1 to thread ith of nth: from the ranges
 * (one per thread, then the others' fronts) when given, else from the
 * shared counter. */
static void run_chunks(mm_range *ranges, atomic_llong *next, int64_t n_chunks, int ith, int nth,
                       void (*fn)(const void *job, int64_t c), const void *job)
{
    if (ranges) {
        for (int k = 0; k < nth; k++) {
            const int v = (ith + k) % nth;
            const int64_t end = n_chunks * (v + 1) / nth;
            for (;;) {
                const int64_t c = atomic_fetch_add_explicit(&ranges[v].next, 1, memory_order_relaxed);
                if (c >= end) break;
                fn(job, c);
            }
        }
        return;
    }
    for (;;) {
        const int64_t c = atomic_fetch_add_explicit(next, 1, memory_order_relaxed);
        if (c >= n_chunks) break;
        fn(job, c);
    }
}

static void vecdot_chunk(const void *job, int64_t c)
{
    const mm_job *j = job;
    const int64_t r0 = c * LMQ_VEC_CHUNK_ROWS;
    vecdot_rows(j, r0, r0 + LMQ_VEC_CHUNK_ROWS < j->n_out ? r0 + LMQ_VEC_CHUNK_ROWS : j->n_out);
}

static void vecdot_worker(void *arg, int ith, int nth)
{
    mm_job *j = arg;
    run_chunks(j->ranges, &j->next, (j->n_out + LMQ_VEC_CHUNK_ROWS - 1) / LMQ_VEC_CHUNK_ROWS, ith, nth, vecdot_chunk, j);
}

/* ================================================================
 * The panel path
 * ================================================================ */

/* Rows r0 .. r0 + 15 of the product for every token, through thread ith's panel. */
static void panel_chunk(const mm_job *j, int ith, int64_t r0)
{
    uint8_t *panel = j->panels + ith * j->panel_bytes;
    const int nr = j->n_out - r0 < LMQ_PANEL_ROWS ? (int)(j->n_out - r0) : LMQ_PANEL_ROWS;
    j->k->panel_pack(j->wtype, j->k->panel_unpack[j->wtype], j->w + r0 * j->w_row, j->w_row, nr, j->n_in, panel);
    j->k->panel_gemm[j->wtype](j->n_in, panel, j->act, j->act_row, (int)j->n_tok, j->y + r0, j->n_out, nr);
}

static void panel_worker(void *arg, int ith, int nth)
{
    mm_job *j = arg;
    (void)nth;
    const int64_t n_chunks = (j->n_out + LMQ_PANEL_ROWS - 1) / LMQ_PANEL_ROWS;
    for (;;) {
        const int64_t c = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (c >= n_chunks) break;
        panel_chunk(j, ith, c * LMQ_PANEL_ROWS);
    }
}

/* Panel scratch for nth threads (j->panel_bytes each). */
static lmq_status panel_scratch(mm_job *j, lmq_workspace *ws, int nth)
{
    j->panel_bytes = (lmq_panel_bytes(j->wtype, j->n_in) + 63) & ~(int64_t)63;
    if (j->panel_bytes <= 0 || j->panel_bytes > INT64_MAX / nth ||
        !grow(&ws->panels, &ws->panels_cap, (size_t)(j->panel_bytes * nth)))
        return lmq_error(LMQ_ERR_NOMEM, "matmul: %d panels of %lld bytes", nth, (long long)j->panel_bytes);
    j->panels = ws->panels;
    return LMQ_OK;
}

/* ================================================================
 * The BLAS path
 * ================================================================ */

#if LMQ_HAVE_BLAS
static void blas_worker(void *arg, int ith, int nth)
{
    mm_job *j = arg;
    (void)nth;
    const int64_t tr = gemm_tile_rows(j->n_in, j->n_out), n_tiles = (j->n_out + tr - 1) / tr;
    float *tile = j->tiles ? j->tiles + (size_t)ith * (size_t)tr * (size_t)j->n_in : NULL;
    for (;;) {
        int64_t c = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (c >= n_tiles) break;
        int64_t r0 = c * tr, rows = j->n_out - r0;
        if (rows > tr) rows = tr;
        const float *b;
        if (j->wtype == LMQ_TYPE_F32) {
            b = (const float *)(j->w + r0 * j->w_row);
        } else {
            for (int64_t r = 0; r < rows; r++)
                j->k->to_float[j->wtype](j->w + (r0 + r) * j->w_row, tile + r * j->n_in, j->n_in);
            b = tile;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)j->n_tok, (int)rows, (int)j->n_in, 1.0f, j->x,
                    (int)j->n_in, b, (int)j->n_in, 0.0f, j->y + r0, (int)j->n_out);
    }
}
#endif

/* The f32 panel path: chunk c = rows 64c..64c+63, dequantized 16 rows at
 * a time and transposed into panels, then the kernel over every token. */
static void fpanel_worker(void *arg, int ith, int nth)
{
    mm_job *j = arg;
    (void)nth;
    const int64_t n_in = j->n_in, n_chunks = (j->n_out + LMQ_FPANEL_CHUNK - 1) / LMQ_FPANEL_CHUNK;
    float *rows = j->tiles + (size_t)ith * (LMQ_FPANEL_CHUNK + 16) * (size_t)n_in;
    float *panels = rows + 16 * n_in;
    for (;;) {
        const int64_t c = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (c >= n_chunks) break;
        const int64_t r0 = c * LMQ_FPANEL_CHUNK;
        const int nr = j->n_out - r0 < LMQ_FPANEL_CHUNK ? (int)(j->n_out - r0) : LMQ_FPANEL_CHUNK;
        const int np = (nr + 15) / 16;
        for (int p = 0; p < np; p++) {
            const int live = nr - 16 * p < 16 ? nr - 16 * p : 16;
            const uint8_t *w = j->w + (r0 + 16 * p) * j->w_row;
            const float *src = (const float *)w;
            if (j->wtype != LMQ_TYPE_F32) {
                for (int r = 0; r < live; r++) j->k->to_float[j->wtype](w + r * j->w_row, rows + r * n_in, n_in);
                src = rows;
            }
            j->k->fpanel_pack(src, n_in, live, n_in, panels + (size_t)p * 16 * (size_t)n_in);
        }
        j->k->fpanel_gemm(n_in, np, panels, j->x, n_in, (int)j->n_tok, j->y + r0, j->n_out, nr);
    }
}

/* ================================================================
 * Entry point
 * ================================================================ */

lmq_status lmq_matmul(lmq_pool *pool, lmq_type wtype, const void *w, int64_t n_out, int64_t n_in, const float *x,
                      int64_t n_tok, float *y, lmq_workspace *ws)
{
    lmq_status s = check_row("matmul", wtype, n_in);
    if (s) return s;
    if (n_out <= 0 || n_tok <= 0 || !w || !x || !y || !ws)
        return lmq_error(LMQ_ERR_INVALID_ARG, "matmul: %lld x %lld weights, %lld tokens, null pointer %s",
                         (long long)n_out, (long long)n_in, (long long)n_tok, (!w || !x || !y || !ws) ? "yes" : "no");
    if (n_out > INT32_MAX || n_in > INT32_MAX || n_tok > INT32_MAX)
        return lmq_error(LMQ_ERR_LIMIT, "matmul: %lld x %lld x %lld exceeds the 2^31 limit per dimension",
                         (long long)n_out, (long long)n_in, (long long)n_tok);
    mm_job j;
    memset(&j, 0, sizeof j);
    j.k = lmq_kernels();
    j.wtype = wtype;
    j.atype = lmq_act_type(wtype);
    j.w = w;
    j.w_row = lmq_row_size(wtype, n_in);
    j.x = x;
    j.n_out = n_out;
    j.n_in = n_in;
    j.n_tok = n_tok;
    j.y = y;
    atomic_init(&j.next, 0);

    if (use_fpanel(wtype, n_tok)) {
        const int64_t need = fpanel_bytes(n_in, lmq_pool_n_threads(pool));
        if (need < 0 || !grow((void **)&ws->tiles, &ws->tiles_cap, (size_t)need))
            return lmq_error(LMQ_ERR_NOMEM, "matmul: %lld bytes of f32 panels", (long long)need);
        j.tiles = ws->tiles;
        lmq_pool_run(pool, fpanel_worker, &j);
        return LMQ_OK;
    }
#if LMQ_HAVE_BLAS
    if (use_blas(wtype, n_tok)) {
        int64_t need = tile_bytes(wtype, n_in, lmq_pool_n_threads(pool));
        if (need < 0 || !grow((void **)&ws->tiles, &ws->tiles_cap, (size_t)need))
            return lmq_error(LMQ_ERR_NOMEM, "matmul: %lld bytes of weight tiles", (long long)need);
        j.tiles = ws->tiles;
        lmq_pool_run(pool, blas_worker, &j);
        return LMQ_OK;
    }
#endif

    const int nth = lmq_pool_n_threads(pool);
    if (use_panel(wtype, n_tok)) {
        j.panel = true;
        if ((s = panel_scratch(&j, ws, nth))) return s;
    }
    if (j.atype == LMQ_TYPE_F32) {
        j.act = (uint8_t *)(uintptr_t)x;
        j.act_row = n_in * (int64_t)sizeof(float);
    } else {
        int64_t need = act_bytes(wtype, n_in, n_tok);
        if (need < 0 || !grow(&ws->act, &ws->act_cap, (size_t)need))
            return lmq_error(LMQ_ERR_NOMEM, "matmul: %lld bytes of activations", (long long)need);
        j.act = ws->act;
        j.act_row = act_stride(wtype, n_in);
        /* a single short row is quicker to quantize than to hand out */
        if (n_tok * n_in < 8192)
            quantize_worker(&j, 0, 1);
        else
            lmq_pool_run(pool, quantize_worker, &j);
    }
    if (j.panel) {
        lmq_pool_run(pool, panel_worker, &j);
        return LMQ_OK;
    }
    mm_range ranges[LMQ_VEC_MAX_RANGES];
    if (n_tok <= LMQ_VEC_STATIC_MAX_TOK && nth > 1 && nth <= LMQ_VEC_MAX_RANGES) {
        const int64_t n_chunks = (n_out + LMQ_VEC_CHUNK_ROWS - 1) / LMQ_VEC_CHUNK_ROWS;
        for (int i = 0; i < nth; i++) atomic_init(&ranges[i].next, n_chunks * i / nth);
        j.ranges = ranges;
    }
    lmq_pool_run(pool, vecdot_worker, &j);
    return LMQ_OK;
}

/* ================================================================
 * Repacked weights
 * ================================================================ */

/* Bytes of one repacked block (32 or 256 elements) of 16 rows. */
static int64_t rpanel_block_bytes(lmq_type t)
{
    return lmq_rpanel_block_bytes(t);
}

/* Words of activation sums per block: 1 (q8_0: the block's sum) or 4 (q8_K:
 * pairs of 32-quant sums). */
static int64_t rpanel_sum_words(lmq_type t)
{
    return lmq_act_type(t) == LMQ_TYPE_Q8_K ? 4 : 1;
}

int64_t lmq_repack_bytes(lmq_type wtype, int64_t n_out, int64_t n_in)
{
    if ((unsigned)wtype >= LMQ_TYPE_COUNT || !lmq_kernels()->rpanel_gemm[wtype]) return -1;
    const int64_t bs = block_size(wtype);
    if (n_out <= 0 || n_in <= 0 || n_out % LMQ_PANEL_ROWS || n_in % bs || n_out > INT32_MAX || n_in > INT32_MAX)
        return -1;
    return n_out / LMQ_PANEL_ROWS * (n_in / bs) * rpanel_block_bytes(wtype);
}

typedef struct repack_job {
    lmq_type t;
    const uint8_t *w;
    uint8_t *out;
    int64_t n_out, n_in, w_row, chunk_bytes;
} repack_job;

static void repack_worker(void *arg, int ith, int nth)
{
    repack_job *r = arg;
    const int64_t n_chunks = r->n_out / LMQ_PANEL_ROWS;
    for (int64_t c = n_chunks * ith / nth; c < n_chunks * (ith + 1) / nth; c++)
        lmq_rpanel_pack(r->t, r->w + c * LMQ_PANEL_ROWS * r->w_row, r->w_row, r->n_in, r->out + c * r->chunk_bytes);
}

lmq_status lmq_repack(lmq_pool *pool, lmq_type wtype, const void *w, int64_t n_out, int64_t n_in, void *out)
{
    if (lmq_repack_bytes(wtype, n_out, n_in) < 0 || !w || !out)
        return lmq_error(LMQ_ERR_INVALID_ARG, "repack: %s %lld x %lld cannot be repacked here",
                         lmq_type_name(wtype), (long long)n_out, (long long)n_in);
    repack_job r = {wtype, w, out, n_out, n_in, lmq_row_size(wtype, n_in),
                    n_in / block_size(wtype) * rpanel_block_bytes(wtype)};
    lmq_pool_run(pool, repack_worker, &r);
    return LMQ_OK;
}

typedef struct rp_job {
    const lmq_kernel_table *k;
    lmq_type wtype;
    const uint8_t *w;
    int64_t chunk_bytes, nb;
    const float *x;
    uint8_t *act;
    int64_t act_row;
    int32_t *asum;
    int64_t n_out, n_in, n_tok;
    float *y;
    atomic_llong next;
    mm_range *ranges;
} rp_job;

static void rp_quantize_worker(void *arg, int ith, int nth)
{
    rp_job *j = arg;
    const bool k = lmq_act_type(j->wtype) == LMQ_TYPE_Q8_K;
    for (int64_t t = j->n_tok * ith / nth; t < j->n_tok * (ith + 1) / nth; t++) {
        j->k->from_float[k ? LMQ_TYPE_Q8_K : LMQ_TYPE_Q8_0](j->x + t * j->n_in, j->act + t * j->act_row, j->n_in);
        if (k)
            lmq_q8_K_pair_sums(j->act + t * j->act_row, j->nb, j->asum + t * j->nb * 4);
        else
            lmq_q8_0_block_sums(j->act + t * j->act_row, j->nb, j->asum + t * j->nb);
    }
}

static void rp_chunk(const void *job, int64_t c)
{
    const rp_job *j = job;
    j->k->rpanel_gemm[j->wtype](j->nb, j->w + c * j->chunk_bytes, j->act, j->act_row, j->asum, (int)j->n_tok,
                                j->y + c * LMQ_PANEL_ROWS, j->n_out, LMQ_PANEL_ROWS);
}

/* As vecdot_worker: contiguous ranges for one or two tokens, else a shared counter. */
static void rp_worker(void *arg, int ith, int nth)
{
    rp_job *j = arg;
    run_chunks(j->ranges, &j->next, j->n_out / LMQ_PANEL_ROWS, ith, nth, rp_chunk, j);
}

lmq_status lmq_matmul_repacked(lmq_pool *pool, lmq_type wtype, const void *packed, int64_t n_out, int64_t n_in,
                               const float *x, int64_t n_tok, float *y, lmq_workspace *ws)
{
    if (lmq_repack_bytes(wtype, n_out, n_in) < 0)
        return lmq_error(LMQ_ERR_INVALID_ARG, "matmul: %s %lld x %lld weights are not repackable here",
                         lmq_type_name(wtype), (long long)n_out, (long long)n_in);
    if (n_tok <= 0 || n_tok > INT32_MAX || !packed || !x || !y || !ws)
        return lmq_error(LMQ_ERR_INVALID_ARG, "matmul: %lld tokens, null pointer %s", (long long)n_tok,
                         (!packed || !x || !y || !ws) ? "yes" : "no");
    rp_job j;
    memset(&j, 0, sizeof j);
    j.k = lmq_kernels();
    j.wtype = wtype;
    j.w = packed;
    j.nb = n_in / block_size(wtype);
    j.chunk_bytes = j.nb * rpanel_block_bytes(wtype);
    j.x = x;
    j.n_out = n_out;
    j.n_in = n_in;
    j.n_tok = n_tok;
    j.y = y;
    j.act_row = act_stride(wtype, n_in);
    const int64_t need = act_bytes(wtype, n_in, n_tok);
    if (need < 0 || !grow(&ws->act, &ws->act_cap, (size_t)need) ||
        !grow((void **)&ws->asum, &ws->asum_cap, (size_t)(n_tok * j.nb * rpanel_sum_words(wtype)) * sizeof(int32_t)))
        return lmq_error(LMQ_ERR_NOMEM, "matmul: %lld bytes of activations", (long long)need);
    j.act = ws->act;
    j.asum = ws->asum;
    atomic_init(&j.next, 0);
    if (n_tok == 1 || n_tok * n_in < 8192) /* one row: quicker than a hand-out */
        rp_quantize_worker(&j, 0, 1);
    else
        lmq_pool_run(pool, rp_quantize_worker, &j);
    mm_range ranges[LMQ_VEC_MAX_RANGES];
    const int nth = lmq_pool_n_threads(pool);
    if (n_tok <= LMQ_VEC_STATIC_MAX_TOK && nth > 1 && nth <= LMQ_VEC_MAX_RANGES) {
        const int64_t n_chunks = n_out / LMQ_PANEL_ROWS;
        for (int i = 0; i < nth; i++) atomic_init(&ranges[i].next, n_chunks * i / nth);
        j.ranges = ranges;
    }
    lmq_pool_run(pool, rp_worker, &j);
    return LMQ_OK;
}

/* ================================================================
 * Several products in one pass (MoE experts)
 * ================================================================ */

#define LMQ_MULTI_MAX_PARTS 512

typedef struct multi_job {
    mm_job *parts;
    int n_parts;
    const int64_t *first_chunk; /* [n_parts + 1] global chunk index where each part starts */
    int64_t n_act_rows;         /* activation rows of all parts */
    atomic_llong next;
} multi_job;

/* Quantizes every part's rows: rows split evenly over the threads. */
static void multi_quantize_worker(void *arg, int ith, int nth)
{
    multi_job *m = arg;
    const int64_t r0 = m->n_act_rows * ith / nth, r1 = m->n_act_rows * (ith + 1) / nth;
    int64_t base = 0;
    for (int p = 0; p < m->n_parts && base < r1; p++) {
        mm_job *j = &m->parts[p];
        const int64_t lo = r0 > base ? r0 - base : 0, hi = r1 - base < j->n_tok ? r1 - base : j->n_tok;
        for (int64_t t = lo; t < hi; t++) {
            uint8_t *a = j->act + t * j->act_row;
            j->k->from_float[j->atype](j->x + t * j->n_in, a, j->n_in);
            if (j->panel) lmq_panel_bias_act(j->wtype, a, j->n_in);
            if (j->packed) {
                const int64_t nb = j->n_in / block_size(j->wtype);
                if (j->atype == LMQ_TYPE_Q8_K)
                    lmq_q8_K_pair_sums(a, nb, j->asum + t * nb * 4);
                else
                    lmq_q8_0_block_sums(a, nb, j->asum + t * nb);
            }
        }
        base += j->n_tok;
    }
}

static void multi_worker(void *arg, int ith, int nth)
{
    multi_job *m = arg;
    (void)nth;
    const int64_t total = m->first_chunk[m->n_parts];
    int p = 0;
    for (;;) {
        const int64_t c = atomic_fetch_add_explicit(&m->next, 1, memory_order_relaxed);
        if (c >= total) break;
        while (m->first_chunk[p + 1] <= c) p++;
        const mm_job *j = &m->parts[p];
        const int64_t r0 = (c - m->first_chunk[p]) * LMQ_VEC_CHUNK_ROWS;
        if (j->packed)
            j->k->rpanel_gemm[j->wtype](j->n_in / block_size(j->wtype), j->packed + (r0 / LMQ_PANEL_ROWS) * j->chunk_bytes,
                                        j->act, j->act_row, j->asum, (int)j->n_tok, j->y + r0, j->n_out, LMQ_PANEL_ROWS);
        else if (j->panel)
            panel_chunk(j, ith, r0);
        else
            vecdot_rows(j, r0, r0 + LMQ_VEC_CHUNK_ROWS < j->n_out ? r0 + LMQ_VEC_CHUNK_ROWS : j->n_out);
    }
}

lmq_status lmq_matmul_multi(lmq_pool *pool, lmq_type wtype, int64_t n_in, const lmq_matmul_part *parts, int n_parts,
                            lmq_workspace *ws)
{
    lmq_status s = check_row("matmul", wtype, n_in);
    if (s) return s;
    if (n_parts < 0 || (n_parts > 0 && !parts) || !ws)
        return lmq_error(LMQ_ERR_INVALID_ARG, "matmul_multi: %d parts, null pointer", n_parts);
    bool simple = n_parts <= LMQ_MULTI_MAX_PARTS && n_in <= INT32_MAX;
    int64_t act_total = 0, sum_words = 0;
    for (int p = 0; p < n_parts; p++) {
        const lmq_matmul_part *q = &parts[p];
        if (q->n_tok <= 0 || q->n_out <= 0 || q->n_out > INT32_MAX || q->n_tok > INT32_MAX || (!q->w && !q->packed) ||
            !q->x || !q->y)
            return lmq_error(LMQ_ERR_INVALID_ARG, "matmul_multi: part %d: %lld x %lld weights, %lld tokens", p,
                             (long long)q->n_out, (long long)n_in, (long long)q->n_tok);
        if (q->packed && lmq_repack_bytes(wtype, q->n_out, n_in) < 0)
            return lmq_error(LMQ_ERR_INVALID_ARG, "matmul_multi: part %d: %s %lld x %lld weights are not repackable here",
                             p, lmq_type_name(wtype), (long long)q->n_out, (long long)n_in);
        if (q->packed) sum_words += q->n_tok * (n_in / block_size(wtype)) * rpanel_sum_words(wtype);
        if (!q->packed && use_fpanel(wtype, q->n_tok)) simple = false;
#if LMQ_HAVE_BLAS
        if (!q->packed && use_blas(wtype, q->n_tok)) simple = false;
#endif
        const int64_t a = act_bytes(wtype, n_in, q->n_tok);
        if (a < 0) simple = false;
        act_total += a;
    }
    if (!simple) { /* large batches (BLAS) or too many parts: one product at a time */
        for (int p = 0; p < n_parts; p++) {
            const lmq_matmul_part *q = &parts[p];
            s = q->packed ? lmq_matmul_repacked(pool, wtype, q->packed, q->n_out, n_in, q->x, q->n_tok, q->y, ws)
                          : lmq_matmul(pool, wtype, q->w, q->n_out, n_in, q->x, q->n_tok, q->y, ws);
            if (s) return s;
        }
        return LMQ_OK;
    }
    if (n_parts == 0) return LMQ_OK;
    mm_job jobs[LMQ_MULTI_MAX_PARTS];
    int64_t first[LMQ_MULTI_MAX_PARTS + 1];
    const lmq_type atype = lmq_act_type(wtype);
    const bool f32_act = atype == LMQ_TYPE_F32;
    if (!f32_act && !grow(&ws->act, &ws->act_cap, (size_t)act_total))
        return lmq_error(LMQ_ERR_NOMEM, "matmul: %lld bytes of activations", (long long)act_total);
    if (sum_words && !grow((void **)&ws->asum, &ws->asum_cap, (size_t)sum_words * sizeof(int32_t)))
        return lmq_error(LMQ_ERR_NOMEM, "matmul: %lld activation sums", (long long)sum_words);
    int64_t sum_off = 0;
    multi_job m = {jobs, n_parts, first, 0, 0};
    atomic_init(&m.next, 0);
    int64_t off = 0, panel_bytes = 0;
    uint8_t *panels = NULL;
    first[0] = 0;
    for (int p = 0; p < n_parts; p++) {
        mm_job *j = &jobs[p];
        memset(j, 0, sizeof *j);
        j->k = lmq_kernels();
        j->wtype = wtype;
        j->atype = atype;
        j->w = parts[p].w;
        j->w_row = lmq_row_size(wtype, n_in);
        j->x = parts[p].x;
        j->n_out = parts[p].n_out;
        j->n_in = n_in;
        j->n_tok = parts[p].n_tok;
        j->y = parts[p].y;
        if (f32_act) {
            j->act = (uint8_t *)(uintptr_t)j->x;
            j->act_row = n_in * (int64_t)sizeof(float);
        } else {
            j->act = ws->act + off;
            j->act_row = act_stride(wtype, n_in);
            off += act_bytes(wtype, n_in, j->n_tok);
        }
        if (!parts[p].packed && use_panel(wtype, j->n_tok)) {
            j->panel = true;
            if (!panels) {
                if ((s = panel_scratch(j, ws, lmq_pool_n_threads(pool)))) return s;
                panels = j->panels;
                panel_bytes = j->panel_bytes;
            }
            j->panels = panels;
            j->panel_bytes = panel_bytes;
        }
        if (parts[p].packed) {
            j->packed = parts[p].packed;
            j->chunk_bytes = n_in / block_size(wtype) * rpanel_block_bytes(wtype);
            j->asum = ws->asum + sum_off;
            sum_off += j->n_tok * (n_in / block_size(wtype)) * rpanel_sum_words(wtype);
        }
        m.n_act_rows += j->n_tok;
        first[p + 1] = first[p] + (j->n_out + LMQ_VEC_CHUNK_ROWS - 1) / LMQ_VEC_CHUNK_ROWS;
    }
    if (!f32_act) {
        if (m.n_act_rows * n_in < 8192) multi_quantize_worker(&m, 0, 1);
        else lmq_pool_run(pool, multi_quantize_worker, &m);
    }
    lmq_pool_run(pool, multi_worker, &m);
    return LMQ_OK;
}

/* ================================================================
 * Attention helpers
 * ================================================================ */

float lmq_dot_f32(const float *a, const float *b, int64_t n)
{
    return lmq_kernels()->dot_f32(a, b, n);
}

float lmq_dot_f16_f32(const uint16_t *a, const float *b, int64_t n)
{
    return lmq_kernels()->dot_f16_f32(a, b, n);
}

void lmq_axpy_f32(float *y, float alpha, const float *x, int64_t n)
{
    lmq_kernels()->axpy_f32(y, alpha, x, n);
}

void lmq_axpy_f16(float *y, float alpha, const uint16_t *x, int64_t n)
{
    lmq_kernels()->axpy_f16(y, alpha, x, n);
}

float lmq_softmax(float *x, int64_t n)
{
    return lmq_kernels()->softmax(x, n);
}
