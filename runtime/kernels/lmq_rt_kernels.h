/* lmq_rt_kernels.h — section of lmq_runtime.h: CPU kernels with run-time ISA
 * dispatch, the thread pool, the matmul entry point used by the model, small
 * attention helpers, and kernel micro-benchmarks.
 *
 * ISA dispatch (xxHash style): the best variant the CPU and OS support is
 * chosen once, on first use, from cpuid/xgetbv (x86) or hwcaps (aarch64) and
 * kept in a table of function pointers. The environment variable
 * LMQ_ISA=scalar|avx2|avxvnni|avx512|neon|i8mm forces a variant; when the forced variant
 * is not compiled in or not supported, a one-line message goes to stderr and
 * the best available one is used. Every kernel has a scalar `_ref` twin that
 * the SIMD variants are tested against.
 *
 * Activations: each weight type is dotted against activations quantized once
 * per row to its "activation type" (ggml's vec_dot_type):
 *   q2_K..q6_K, iq4_xs                  -> q8_K
 *   q4_0, q5_0, q8_0, iq4_nl, mxfp4     -> q8_0
 *   q4_1, q5_1                          -> q8_1 (the min term uses q8_1's d*sum)
 *   f16 -> f16, bf16 -> bf16 (as llama.cpp, and as a Hugging Face model
 *   in that dtype computes; half the bytes of f32 keep a wide row's
 *   activations in L1 beside the streaming weights, docs/PERF.md)
 *   f32, f8_e4m3/e5m2                   -> f32 (no quantization)
 * Batches (docs/PERF.md: from 12 tokens for the float types) take the f32
 * activations themselves. See docs/PERF.md for the measured speed.
 */
#ifndef LMQ_RT_KERNELS_H
#define LMQ_RT_KERNELS_H
/* liblmq exports what its public headers declare, nothing else (docs/API.md) */
#pragma GCC visibility push(default)

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmq_format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================
 * ISA selection
 * ====================================================================== */

typedef enum lmq_isa {
    LMQ_ISA_SCALAR = 0, /* portable C, always present */
    LMQ_ISA_AVX2 = 1,   /* x86-64: AVX2 + FMA + F16C */
    LMQ_ISA_AVX512 = 2, /* x86-64: AVX-512 F/BW/VL/DQ + VNNI (vpdpbusd) */
    LMQ_ISA_NEON = 3,   /* aarch64: ASIMD + dotprod (sdot) + fp16 */
    LMQ_ISA_I8MM = 4,   /* aarch64: neon + i8mm (smmla, usdot) */
    LMQ_ISA_AVXVNNI = 5, /* x86-64: avx2 + AVX-VNNI (256-bit vpdpbusd, no AVX-512: Alder Lake and
                          * later laptops, Zen 5); on CPUs with AVX-512 VNNI + VL but no AVX-VNNI
                          * the same kernels built with the EVEX vpdpbusd (lmq_cpu_features says so) */
    LMQ_ISA_COUNT
} lmq_isa;

/* The variant in use on the calling thread: a context's own (its `isa`
 * parameter) while lmq_eval runs it, else the process-wide one (the best
 * this build and CPU support, or lmq_isa_force's; the library reads no
 * environment: the CLI applies LMQ_ISA with lmq_isa_force). */
lmq_isa lmq_isa_active(void);
/* "scalar", "avx2", "avx512", "neon", "i8mm", "avxvnni"; "?" for an invalid id. */
const char *lmq_isa_name(lmq_isa isa);
/* Case-insensitive name lookup. */
lmq_status lmq_isa_from_name(const char *name, lmq_isa *out);
/* True when `isa` is compiled into this build and this CPU/OS supports it. */
bool lmq_isa_supported(lmq_isa isa);
/* Fills out[0..] with the supported variants in increasing order of
 * preference (scalar first, the default last: avx2 < avxvnni < avx512,
 * neon < i8mm); returns how many (at most cap are written). */
int lmq_isa_list(lmq_isa *out, int cap);
/* Switches the process-wide kernels to `isa` (tests, benchmarks, --isa);
 * contexts made with their own `isa` (lmq_context_params) keep theirs.
 * LMQ_ERR_UNSUPPORTED (message names the ISA) when it is not supported; the
 * active variant is then unchanged. Not safe while kernels run on other
 * threads. */
lmq_status lmq_isa_force(lmq_isa isa);
/* One line describing the CPU features detected, e.g.
 * "x86-64: avx2 fma f16c avx512f avx512bw avx512vl avx512dq avx512vnni". */
const char *lmq_cpu_features(void);

/* The thread pool (lmq_pool_new, lmq_pool_run, ...) is declared in
 * lmq_format.h: one pool for the kernels, quantize, convert and verify. */

/* ======================================================================
 * Dot products of one weight row with one activation row
 * ====================================================================== */

/* The activation type for weights of type `wtype` (LMQ_TYPE_F32, F16, BF16,
 * Q8_0, Q8_1 or Q8_K), or LMQ_TYPE_COUNT when `wtype` has no kernels. */
lmq_type lmq_act_type(lmq_type wtype);
/* True when lmq_matmul handles weights of this type. */
bool lmq_matmul_supported(lmq_type wtype);
/* Bytes of one activation row of n elements for weights of type wtype, or
 * -1 when n is not a multiple of the weight's block size. */
int64_t lmq_act_row_size(lmq_type wtype, int64_t n);
/* Converts one row of n floats to the activation type of `wtype` (a copy for
 * f32 activations). `out` holds lmq_act_row_size(wtype, n) bytes. */
lmq_status lmq_act_quantize(lmq_type wtype, const float *x, void *out, int64_t n);
/* sum_i w[i] * a[i] with the active ISA: `w` is one row of n weights of type
 * `wtype`, `a` one activation row from lmq_act_quantize. Pointers need the C
 * alignment of their block struct (2 bytes; 4 for f32 and q8_K) only. */
lmq_status lmq_vec_dot(lmq_type wtype, int64_t n, const void *w, const void *a, float *out);

/* ======================================================================
 * Matmul: y[n_tok][n_out] = x[n_tok][n_in] . W^T, W row-major [n_out][n_in]
 * (ggml order: ne[0] = n_in is the row length).
 * ====================================================================== */

/* Scratch for lmq_matmul: activations quantized once per call (shared by the
 * threads) and, for the batched path, per-thread weight tiles. Size it once
 * per context with lmq_workspace_reserve(); lmq_matmul grows it (once) only
 * if a call needs more than was reserved. */
typedef struct lmq_workspace lmq_workspace;

lmq_status lmq_workspace_new(lmq_workspace **out);
void lmq_workspace_free(lmq_workspace *ws); /* accepts NULL */
/* Makes room for products with weights of type wtype, rows of n_in and up to
 * max_tok tokens, run by pools of up to max(lmq_n_cpus(), 4) threads, with
 * the ISA active at the time of the call. */
lmq_status lmq_workspace_reserve(lmq_workspace *ws, lmq_type wtype, int64_t n_in,
                                 int64_t max_tok);
/* Bytes lmq_workspace_reserve would hold for one such product with
 * n_threads threads; -1 on bad arguments. */
int64_t lmq_matmul_wsize(lmq_type wtype, int64_t n_in, int64_t max_tok, int n_threads);

/* Computes y = x W^T with the pool's threads (pool may be NULL: one thread).
 * Results do not depend on the number of threads (bit for bit). x and y must
 * not overlap. LMQ_ERR_INVALID_ARG for bad sizes (n_in not a multiple of
 * the block size, non-positive counts), LMQ_ERR_UNSUPPORTED for a type without
 * kernels, LMQ_ERR_NOMEM if the workspace had to grow and could not. */
lmq_status lmq_matmul(lmq_pool *pool, lmq_type wtype, const void *w, int64_t n_out,
                      int64_t n_in, const float *x, int64_t n_tok, float *y,
                      lmq_workspace *ws);

/* Repacked weights (q4_0, q8_0, iq4_nl, q4_K, iq4_xs, mxfp4, q2_K, q3_K,
 * q5_K, q5_0 with the AVX2, AVX-VNNI, AVX-512 and NEON kernels; q6_K with
 * all but AVX-512's): the rows rearranged once, 16 at a time, so that one
 * vpdpbusd (sdot: 4) serves 16 rows (runtime/kernels/panel.c).
 * lmq_repack_bytes: the size (the weights' own for the 32-element types,
 * q2_K and q6_K; more for the types whose scales are unpacked: q4_K 2.8%,
 * q5_K 2.3%, q3_K 3.6%, iq4_xs 1.5%), or -1 when the active ISA has no
 * kernel for the type or n_out is not a multiple of 16. lmq_repack fills `out` (64-byte aligned)
 * with the pool's threads; lmq_matmul_repacked is lmq_matmul on it (same
 * errors; the results agree with lmq_matmul's to float rounding). */
int64_t lmq_repack_bytes(lmq_type wtype, int64_t n_out, int64_t n_in);
lmq_status lmq_repack(lmq_pool *pool, lmq_type wtype, const void *w, int64_t n_out, int64_t n_in, void *out);
lmq_status lmq_matmul_repacked(lmq_pool *pool, lmq_type wtype, const void *packed, int64_t n_out, int64_t n_in,
                               const float *x, int64_t n_tok, float *y, lmq_workspace *ws);

/* One product of lmq_matmul_multi: y (n_tok rows of n_out) = x (n_tok rows
 * of n_in) times the n_out weight rows at w. packed, when not NULL, is
 * the same rows repacked (lmq_repack with the ISA in force) and is used
 * instead of w (which may then be NULL). */
typedef struct lmq_matmul_part {
    const void *w;
    int64_t n_out;
    const float *x;
    int64_t n_tok;
    float *y;
    const void *packed;
} lmq_matmul_part;

/* Several products sharing the weight type and row length (a mixture of
 * experts' selected experts) in one pass over the pool: the activations of
 * every part are quantized once, then the threads share all parts' rows, so
 * k small products cost one hand-out instead of k. Each part's result is the
 * bits lmq_matmul gives (vec_dot or panel path), or lmq_matmul_repacked for
 * a part with repacked rows; parts whose batch would take the BLAS path are
 * computed by lmq_matmul. Same errors as lmq_matmul and lmq_matmul_repacked. */
lmq_status lmq_matmul_multi(lmq_pool *pool, lmq_type wtype, int64_t n_in, const lmq_matmul_part *parts, int n_parts,
                            lmq_workspace *ws);

/* Batched-path selection (for benchmarks and tests). LMQ_GEMM_AUTO picks per
 * type and batch size from measured crossovers (docs/PERF.md). */
typedef enum lmq_gemm_mode {
    LMQ_GEMM_AUTO = 0,
    LMQ_GEMM_VECDOT = 1, /* tiled loop of vec_dot kernels on quantized activations */
    LMQ_GEMM_BLAS = 2,   /* dequantize weight tiles to f32 + cblas_sgemm (f32 activations) */
    LMQ_GEMM_PANEL = 3,  /* row-interleaved panels of 16 rows (AVX-512 VNNI; elsewhere VECDOT) */
    LMQ_GEMM_MODE_COUNT
} lmq_gemm_mode;
/* Process-wide (contexts made with their own `gemm`, lmq_context_params,
 * keep theirs); returns the previous mode. BLAS falls back to VECDOT when the
 * build has no BLAS. Not safe while matmuls run. The library reads no
 * environment: the CLI applies LMQ_GEMM=auto|vecdot|blas|panel with it. */
lmq_gemm_mode lmq_gemm_mode_set(lmq_gemm_mode mode);
/* "auto", "vecdot", "blas", "panel" (case-insensitive); LMQ_ERR_INVALID_ARG
 * naming the string otherwise. */
lmq_status lmq_gemm_mode_from_name(const char *name, lmq_gemm_mode *out);
/* True when the build links a BLAS (cblas_sgemm). */
bool lmq_have_blas(void);
/* Sets the BLAS library's own thread count (OpenBLAS: openblas_set_num_threads;
 * process-wide, shared with every other user of the library; a no-op for
 * other BLAS builds). lmq never calls it by itself: LMQ_GEMM_AUTO takes the
 * BLAS path (large batches of float weights) only while the BLAS runs each
 * call on one thread, since lmq runs one sgemm per pool thread. `lmq`
 * calls lmq_blas_set_threads(1) at start. LMQ_ERR_INVALID_ARG outside
 * [1, LMQ_MAX_THREADS]. */
lmq_status lmq_blas_set_threads(int n_threads);

/* ======================================================================
 * Attention helpers (dispatched; `_ref` twins in the internal header)
 * ====================================================================== */

float lmq_dot_f32(const float *a, const float *b, int64_t n);
/* a: n IEEE binary16 values (one row of an f16 KV cache). */
float lmq_dot_f16_f32(const uint16_t *a, const float *b, int64_t n);
/* y[i] += alpha * x[i] */
void lmq_axpy_f32(float *y, float alpha, const float *x, int64_t n);
void lmq_axpy_f16(float *y, float alpha, const uint16_t *x, int64_t n);
/* x[i] = exp(x[i] - max) / sum in place; returns the sum of exp(x - max)
 * (0 for n <= 0). -INFINITY entries (masked) become 0; at least one entry
 * must be finite. */
float lmq_softmax(float *x, int64_t n);

/* ======================================================================
 * Attention over a KV cache (flash-style: tiled, online softmax)
 * ====================================================================== */

/* Rows of one call: queries x heads of one KV head group (see lmq_attn). */
#define LMQ_ATTN_ROWS 16

/* One tile of attention: n_tok consecutive query tokens x n_grp heads that
 * share one KV head (n_tok * n_grp <= LMQ_ATTN_ROWS), against that KV
 * head's cached keys and values. Token t is at position pos0 + t and sees
 * the keys at positions lo(t) .. pos0 + t, lo(t) = 0 or, with a window,
 * max(0, pos0 + t - window + 1) (causal mask, sliding window). Position p
 * lives in cache slot p % n_slots (a ring when n_slots is smaller than the
 * context). For each row:
 *   s_j = softcap(scale * q . k_j),  out = sum_j softmax(s)_j v_j
 * (softcap 0: none; else cap * tanh(s / cap)). With sinks (gpt-oss), head
 * g's learned logit z = sinks[g] joins the softmax's denominator only:
 *   out = sum_j exp(s_j - M) v_j / (sum_j exp(s_j - M) + exp(z - M)),
 *   M = max(max_j s_j, z)
 * (the online softmax starts from m = z, l = 1 instead of m = -inf, l = 0;
 * no soft-cap on z). With an f16 cache the query is rounded to f16 first,
 * as ggml does. Every key and value row is read once for the whole tile.
 * The result does not depend on how a caller splits its work into tiles
 * (each row's arithmetic is the same); sinks == NULL gives the bits of a
 * kernel without sinks. */
typedef struct lmq_attn_args {
    lmq_type kv_type;      /* LMQ_TYPE_F32, LMQ_TYPE_F16 or LMQ_TYPE_Q8_0 (head_dim % 32 == 0) */
    int32_t head_dim;
    const void *k, *v;     /* slot 0 of this KV head's key / value rows */
    size_t kv_stride;      /* bytes from one slot to the next */
    int32_t n_slots;       /* slots in the cache (ring length) */
    const float *q;        /* query of (t, g) at q + t * q_stride + g * head_dim */
    int64_t q_stride;
    float *out;            /* output of (t, g) at out + t * out_stride + g * head_dim */
    int64_t out_stride;
    int32_t n_tok, n_grp;
    int32_t pos0;
    int32_t window;        /* 0: every earlier key */
    float scale, softcap;
    float *scratch;        /* lmq_attn_scratch_floats(head_dim) floats, 64-byte aligned, one per thread */
    const float *sinks;    /* per head of the tile (n_grp finite values, the tile's first head first), or NULL */
} lmq_attn_args;

/* Floats of per-thread scratch one lmq_attn call needs. */
size_t lmq_attn_scratch_floats(int32_t head_dim);
/* Attention of one tile with the active ISA (args are not checked beyond
 * asserts: the caller builds them from a validated context). */
void lmq_attn(const lmq_attn_args *a);

/* ======================================================================
 * Recurrent (Gated DeltaNet) layers: the gated delta rule and the causal
 * depthwise convolution, each with a scalar oracle (lmq_*_ref in
 * kernels.h). Both work on one head or one channel range per call, so a
 * caller spreads heads/channels over threads and the result does not
 * depend on the thread count.
 * ====================================================================== */

/* The gated delta rule, sequential form, for one value head over n_tok
 * tokens (Qwen3.5; transformers' torch_recurrent_gated_delta_rule):
 *   S <- decay_t S;  d = beta_t (v_t - S^T k_t);  S <- S + k_t d^T;  o_t = S^T q_t
 * S is the head's state, dk rows of dv floats (row i: key dimension i),
 * updated in place. q, k: token t's dk floats at q + t*qk_stride (already
 * L2-normalised; q already scaled by 1/sqrt(dk)); v: dv floats at
 * v + t*v_stride; beta[t*g_stride], decay[t*g_stride] (decay = exp(g) in
 * (0, 1]); o: dv floats at o + t*o_stride. dk, dv >= 1, any size. */
typedef struct lmq_delta_args {
    float *S;
    int32_t dk, dv, n_tok;
    const float *q, *k;
    int64_t qk_stride;
    const float *v;
    int64_t v_stride;
    const float *beta, *decay;
    int64_t g_stride;
    float *o;
    int64_t o_stride;
} lmq_delta_args;
void lmq_delta_rule(const lmq_delta_args *a);

/* Causal depthwise convolution with state, channels [c0, c1) of C, kernel K
 * (SiLU applied to the result when `silu`):
 *   y_t[c] = sum_{j<K} w[c*K + j] * in_{t-K+1+j}[c]
 * where in_s = x[s*x_stride + c] for s >= 0 and, for s < 0, the state:
 * state[(K-1+s)*C + c] (the last K-1 inputs before this batch, oldest
 * first). Afterwards the state holds the last K-1 inputs (from the state
 * and x). y may not alias x. y_t[c] at y[t*y_stride + c]. */
typedef struct lmq_conv_args {
    const float *w;      /* C rows of K taps */
    float *state;        /* (K-1) rows of C */
    const float *x;
    int64_t x_stride;
    float *y;
    int64_t y_stride;
    int32_t C, K, c0, c1, n_tok;
    bool silu;
} lmq_conv_args;
void lmq_ssm_conv(const lmq_conv_args *a);

/* ======================================================================
 * Kernel micro-benchmarks (used by `lmq bench --kernels`)
 * ====================================================================== */

typedef struct lmq_kbench {
    lmq_type type;
    lmq_isa isa;
    int64_t n_out, n_in, n_tok;
    int n_threads;
    int n_runs;
    double seconds;     /* best time of one product (1 thread: CPU time) */
    double gbytes_s;    /* weight bytes streamed per second (best run) */
    double gflops;      /* 2 * n_out * n_in * n_tok / best time, in 1e9/s */
} lmq_kbench;

/* Times lmq_matmul of random weights of `type` (n_out x n_in) against n_tok
 * random tokens with `isa` forced (restored afterwards), `n_threads`
 * threads, for at least min_seconds (and at least 3 runs). The weights are
 * replicated so that successive runs stream at least 128 MiB of distinct
 * weights, so small matrices measure memory rather than cache bandwidth.
 * repacked: time lmq_matmul_repacked on lmq_repack'ed copies instead
 * (LMQ_ERR_UNSUPPORTED when the type has no repacked layout with `isa`). */
lmq_status lmq_kernel_bench(lmq_type type, lmq_isa isa, int64_t n_out, int64_t n_in,
                            int64_t n_tok, int n_threads, double min_seconds, bool repacked,
                            lmq_kbench *out);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif /* LMQ_RT_KERNELS_H */
