/* quant_internal.h — private to the quantize module: the per-type function
 * table rows, and the scale-search helpers shared by the quantizers. */
#ifndef LMQ_QUANT_INTERNAL_H
#define LMQ_QUANT_INTERNAL_H

#include <math.h>
#include <string.h>

#include "lmq_quant.h"

/* Row quantizer: n is a multiple of the block size, x is finite, qw is NULL
 * or n non-negative finite importance weights. Must not allocate. */
typedef void (*lmq_from_float_fn)(const float *x, void *y, int64_t n, const float *qw);

/* ---- per-type rows (quant_legacy.c, quant_k.c, quant_fp8.c, quant_mxfp4.c) */

void lmq_q_f32_to_float(const void *x, float *y, int64_t n);
void lmq_q_f16_to_float(const void *x, float *y, int64_t n);
void lmq_q_bf16_to_float(const void *x, float *y, int64_t n);
void lmq_q_f32_from_float(const float *x, void *y, int64_t n, const float *qw);
void lmq_q_f16_from_float(const float *x, void *y, int64_t n, const float *qw);
void lmq_q_bf16_from_float(const float *x, void *y, int64_t n, const float *qw);

#define LMQ_Q_ROW(name)                                                            \
    void lmq_q_##name##_to_float(const void *x, float *y, int64_t n);              \
    void lmq_q_##name##_from_float(const float *x, void *y, int64_t n, const float *qw);
LMQ_Q_ROW(q4_0)
LMQ_Q_ROW(q4_1)
LMQ_Q_ROW(q5_0)
LMQ_Q_ROW(q5_1)
LMQ_Q_ROW(q8_0)
LMQ_Q_ROW(q8_1)
LMQ_Q_ROW(iq4_nl)
LMQ_Q_ROW(q2_K)
LMQ_Q_ROW(q3_K)
LMQ_Q_ROW(q4_K)
LMQ_Q_ROW(q5_K)
LMQ_Q_ROW(q6_K)
LMQ_Q_ROW(q8_K)
LMQ_Q_ROW(iq4_xs)
LMQ_Q_ROW(f8_e4m3)
LMQ_Q_ROW(f8_e5m2)
LMQ_Q_ROW(mxfp4)
LMQ_Q_ROW(tq1_0)
LMQ_Q_ROW(tq2_0)
#undef LMQ_Q_ROW
/* the read-only codebook types (quant_iq.c) */
void lmq_q_iq2_xxs_to_float(const void *x, float *y, int64_t n);
void lmq_q_iq2_xs_to_float(const void *x, float *y, int64_t n);
void lmq_q_iq2_s_to_float(const void *x, float *y, int64_t n);
void lmq_q_iq3_xxs_to_float(const void *x, float *y, int64_t n);
void lmq_q_iq3_s_to_float(const void *x, float *y, int64_t n);
void lmq_q_iq1_s_to_float(const void *x, float *y, int64_t n);
void lmq_q_iq1_m_to_float(const void *x, float *y, int64_t n);

/* Runs fn on n jobs (job k at jobs + k * job_size) over lmq's thread pool
 * (lmq_pool_for: job 0 on the calling thread; all inline when threads
 * cannot be started); returns when all are done. n <= LMQ_MAX_THREADS. */
void lmq_q_run_jobs(void *(*fn)(void *), void *jobs, size_t job_size, int n);

/* ---- grids of stored blocks (error-feedback quantization, gptq.c) ------ */

/* For one stored block of n elements (256, or 32 for the legacy types):
 * element l can take the values a[l] * v(c) + b[l] for codes c in
 * [0, nq), v(c) = c + voff, or table[c] when table is set (16 values in
 * ascending order, for lmq_iq4_best_index; _codes() maps an index to the
 * type's code). The block's scales fix the grid; _codes() writes new codes
 * (n bytes) into the block and keeps its scales. */
typedef struct lmq_qgrid {
    float a[LMQ_QK_K], b[LMQ_QK_K];
    int n, nq, voff;
    const int8_t *table;
} lmq_qgrid;

#define LMQ_Q_GRID(name)                                          \
    void lmq_q_##name##_grid(const void *blk, lmq_qgrid *g);      \
    void lmq_q_##name##_codes(void *blk, const uint8_t *L);
LMQ_Q_GRID(q4_0)
LMQ_Q_GRID(q4_1)
LMQ_Q_GRID(q5_0)
LMQ_Q_GRID(q5_1)
LMQ_Q_GRID(q8_0)
LMQ_Q_GRID(iq4_nl)
LMQ_Q_GRID(q2_K)
LMQ_Q_GRID(q3_K)
LMQ_Q_GRID(q4_K)
LMQ_Q_GRID(q5_K)
LMQ_Q_GRID(q6_K)
LMQ_Q_GRID(iq4_xs)
LMQ_Q_GRID(mxfp4)
#undef LMQ_Q_GRID

/* ---- shared math (quant_search.c) -------------------------------------- */

/* Groups whose largest magnitude is below this quantize to zero. */
#define LMQ_GROUP_MAX_EPS 1e-15f

/* Round to nearest, ties to even (ggml's nearest_int), for |v| < 2^22;
 * larger magnitudes are clamped first so the result is always defined. */
static inline int lmq_nearest_int(float v)
{
    v = v > 4194303.0f ? 4194303.0f : v < -4194303.0f ? -4194303.0f : v;
    float t = v + 12582912.0f;
    int32_t i;
    memcpy(&i, &t, 4);
    return (i & 0x007fffff) - 0x00400000;
}

static inline int lmq_clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* f32 -> f16 bits, saturating to +-65504 instead of overflowing to Inf (a
 * scale must stay finite; the quants then saturate). */
static inline uint16_t lmq_f16_sat(float d)
{
    if (d > 65504.0f) d = 65504.0f;
    if (d < -65504.0f) d = -65504.0f;
    return lmq_fp32_to_fp16(d);
}

/* 1/d, or 0 when d is zero or 1/d is not finite. */
static inline float lmq_inv(float d)
{
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    return isfinite(id) ? id : 0.0f;
}

/* Symmetric scale search (make_qx_quants): L[i] in [0, 2*nmax-1] with
 * x ~ scale * (L - nmax); minimises sum w*(x - scale*(L-nmax))^2 over a set
 * of candidate inverse scales, w = qw or x^2. Returns the scale. */
float lmq_qx_search(int n, int nmax, const float *x, uint8_t *L, const float *qw);

/* Asymmetric scale/min search (make_qkx-style): L[i] in [0, nmax] with
 * x ~ scale * L - *neg_min (*neg_min >= 0, i.e. min <= 0), minimising
 * sum w*(x - (scale*L + min))^2 by least squares over nstep candidate
 * inverse scales (rmin + rdelta*k + nmax) / (max - min). Returns the scale. */
float lmq_qkx_search(int n, int nmax, const float *x, const float *w, uint8_t *L,
                     float *neg_min, float rmin, float rdelta, int nstep);

/* Non-negative value quantization (make_qp_quants): L[i] in [0, nmax] with
 * x ~ scale * L, weighted by w; used for the sub-block scales and mins of
 * K-quant super-blocks. Returns the scale (0 when all x are 0). */
float lmq_qp_search(int n, int nmax, const float *x, uint8_t *L, const float *w);

/* Weighted squared error sum w*(x - x')^2 of n values on the linear grid
 * x' = dl * q - ml, q = round(clamp((x + ml) / dl, lo, hi)) (dl == 0: q = 0). */
float lmq_grid_err(int n, const float *x, const float *w, float dl, float ml, float lo,
                   float hi);

/* Same for the iq4 grid: x' = dl * grid[nearest index of x / dl]. */
float lmq_iq4_err(int n, const float *x, const float *w, float dl);

/* iq4 block search (quantize_row_iq4_nl_impl's, ntry 7): the scale d of
 * one block of n (<= 256) values on the iq4_nl grid, x ~ d * grid[L],
 * minimising sum w*(x - d*grid[L])^2 (w NULL: x^2). L gets grid indices. */
float lmq_iq4_search(int n, const float *x, const float *w, uint8_t *L);

/* Index of the grid value nearest to x (grid sorted ascending, 16 values). */
int lmq_iq4_best_index(const int8_t *grid, float x);

/* Sum of squares of a row (for the per-row sigma^2 of importance weights). */
float lmq_sum_sq(const float *x, int64_t n);

/* Stores scale d as f16 and returns the multiplier to apply to x: ggml's
 * 1/d in the normal case (keeps its bytes), or the inverse of the stored
 * value when d had to saturate (the quants then clamp). */
static inline float lmq_store_scale(uint16_t *dst, float d)
{
    *dst = lmq_f16_sat(d);
    if (fabsf(d) > 65504.0f) return lmq_inv(lmq_fp16_to_fp32(*dst));
    return lmq_inv(d);
}

/* ---- SIMD variants of the hot loops (quant_dispatch.c) -----------------
 * Each entry has a scalar reference (_ref) and variants that give the same
 * bytes: the same float operations per lane in the same order (no FMA
 * contraction, the 8 partial sums of the reference reduced in its order),
 * so the quantized bytes do not depend on the CPU. Chosen once at run time
 * from cpuid/xgetbv; lmq_quantize_use_simd(false) forces the references
 * (the CLI and the tests call it for LMQ_ISA=scalar; other ISAs keep AVX2). tests/test_quant_simd.c checks every variant
 * against the reference on odd sizes and whole rows of every type. */

typedef float lmq_csum3[3];

typedef struct lmq_qsimd {
    const char *name;
    /* For each candidate c < nc and l_i = round(clamp(isc[c] * xm_i, lo,
     * hi)): S[c] = {sum w l, sum w l^2, sum wx l}; n a multiple of 8, <= 256. */
    void (*csums)(int n, const float *xm, const float *w, const float *wx, int nc, const float *isc, float lo,
                  float hi, lmq_csum3 *S);
    /* e[c] = lmq_grid_err(n, x, w, dl[c], ml[c], lo, hi) for c < nc. */
    void (*grid_errs)(int n, const float *x, const float *w, int nc, const float *dl, const float *ml, float lo,
                      float hi, float *e);
    /* For sub-blocks j < nsub (<= 16) of len values (x + len * j, w + len
     * * j) and q = clamp(round((x + ml[j]) * idl[j]), 0, nmax): the float
     * products w q^2 = (w*q)*q, w q, w, (w*q)*x, w x summed in double in
     * element order into S[j][0..4]. */
    void (*asym_sums)(int nsub, int len, const float *x, const float *w, const float *ml, const float *idl,
                      int nmax, double S[][5]);
    /* iq4 candidate sums: for c < nc, q_i the iq4 grid value nearest to
     * id[c] * x_i: S[c] = {sum wx q, sum w q^2}; n a multiple of 8. */
    void (*iq4_sums)(int n, const float *x, const float *w, const float *wx, int nc, const float *id, float S[][2]);
    float (*iq4_err)(int n, const float *x, const float *w, float dl); /* lmq_iq4_err */
    /* q4_0 without importance weights (ggml's round to nearest). */
    void (*q4_0_rtn)(const float *x, void *y, int64_t n);
} lmq_qsimd;

enum { LMQ_QSIMD_REF, LMQ_QSIMD_AVX2, LMQ_QSIMD_COUNT };

const lmq_qsimd *lmq_q_simd(void);          /* the active table */
const lmq_qsimd *lmq_q_simd_for(int which); /* NULL when the CPU lacks it */
/* Makes `which` the active table (tests); false when the CPU lacks it. */
bool lmq_q_simd_force(int which);

void lmq_q_csums_ref(int n, const float *xm, const float *w, const float *wx, int nc, const float *isc, float lo,
                     float hi, lmq_csum3 *S);
void lmq_q_grid_errs_ref(int n, const float *x, const float *w, int nc, const float *dl, const float *ml, float lo,
                         float hi, float *e);
void lmq_q_q4_0_rtn_ref(const float *x, void *y, int64_t n);
void lmq_q_iq4_sums_ref(int n, const float *x, const float *w, const float *wx, int nc, const float *id, float S[][2]);
float lmq_q_iq4_err_ref(int n, const float *x, const float *w, float dl);
/* midpoints between consecutive lmq_iq4nl_values and the steps between them */
extern const float lmq_iq4_mid[15], lmq_iq4_step[15];
void lmq_q_asym_sums_ref(int nsub, int len, const float *x, const float *w, const float *ml, const float *idl,
                         int nmax, double S[][5]);
#if defined(__x86_64__) || defined(__i386__)
void lmq_q_fill_avx2(lmq_qsimd *t); /* quant_avx2.c */
#endif

#endif /* LMQ_QUANT_INTERNAL_H */
