/* lmq_quant.h — the quantize module: block layouts (byte-for-byte ggml's for
 * the ggml types), scalar reference quantize/dequantize for every type, and
 * the per-layer mixes used by `lmq quantize`.
 *
 * Layouts follow ggml-common.h (the de-facto GGUF spec); see docs/QUANT.md.
 * All multi-byte fields are little-endian; f16 fields are IEEE binary16 bits.
 */
#ifndef LMQ_QUANT_H
#define LMQ_QUANT_H
/* liblmq exports what its public headers declare, nothing else (docs/API.md) */
#pragma GCC visibility push(default)

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmq_format.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LMQ_QK4_0 32
#define LMQ_QK4_1 32
#define LMQ_QK5_0 32
#define LMQ_QK5_1 32
#define LMQ_QK8_0 32
#define LMQ_QK8_1 32
#define LMQ_QK_K 256
#define LMQ_K_SCALE_SIZE 12
#define LMQ_QK4_NL 32
#define LMQ_QK_F8 32
#define LMQ_QK_MXFP4 32

/* ---- 32-element blocks ---------------------------------------------- */

typedef struct {
    uint16_t d;                 /* f16 scale */
    uint8_t qs[LMQ_QK4_0 / 2];  /* nibbles: low = element j, high = element j+16 */
} lmq_block_q4_0;               /* x = (q - 8) * d */

typedef struct {
    uint16_t d, m;              /* f16 scale, f16 min */
    uint8_t qs[LMQ_QK4_1 / 2];
} lmq_block_q4_1;               /* x = q * d + m */

typedef struct {
    uint16_t d;
    uint8_t qh[4];              /* 5th bit of each of the 32 quants (bit j of LE u32) */
    uint8_t qs[LMQ_QK5_0 / 2];
} lmq_block_q5_0;               /* x = (q - 16) * d */

typedef struct {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[LMQ_QK5_1 / 2];
} lmq_block_q5_1;               /* x = q * d + m */

typedef struct {
    uint16_t d;
    int8_t qs[LMQ_QK8_0];
} lmq_block_q8_0;               /* x = q * d */

typedef struct {
    uint16_t d;                 /* f16 scale */
    uint16_t s;                 /* f16 of d * sum(qs) */
    int8_t qs[LMQ_QK8_1];
} lmq_block_q8_1;

typedef struct {
    uint16_t d;
    uint8_t qs[LMQ_QK4_NL / 2]; /* indices into the 16-value non-linear grid */
} lmq_block_iq4_nl;

/* ---- 256-element super-blocks (K-quants) ----------------------------- */

typedef struct {
    uint8_t scales[LMQ_QK_K / 16]; /* 4-bit scale (low) and 4-bit min (high) per 16 */
    uint8_t qs[LMQ_QK_K / 4];      /* 2-bit quants */
    uint16_t d;                    /* f16 super-scale for the scales */
    uint16_t dmin;                 /* f16 super-scale for the mins */
} lmq_block_q2_K;

typedef struct {
    uint8_t hmask[LMQ_QK_K / 8];       /* high bit of each 3-bit quant */
    uint8_t qs[LMQ_QK_K / 4];          /* low 2 bits */
    uint8_t scales[LMQ_K_SCALE_SIZE];  /* 16 6-bit scales, packed */
    uint16_t d;
} lmq_block_q3_K;

typedef struct {
    uint16_t d, dmin;
    uint8_t scales[LMQ_K_SCALE_SIZE];  /* 8 6-bit scales and 8 6-bit mins, packed */
    uint8_t qs[LMQ_QK_K / 2];
} lmq_block_q4_K;

typedef struct {
    uint16_t d, dmin;
    uint8_t scales[LMQ_K_SCALE_SIZE];
    uint8_t qh[LMQ_QK_K / 8];
    uint8_t qs[LMQ_QK_K / 2];
} lmq_block_q5_K;

typedef struct {
    uint8_t ql[LMQ_QK_K / 2];      /* low 4 bits */
    uint8_t qh[LMQ_QK_K / 4];      /* high 2 bits */
    int8_t scales[LMQ_QK_K / 16];  /* 8-bit scales */
    uint16_t d;
} lmq_block_q6_K;

typedef struct {
    float d;                       /* f32 scale */
    int8_t qs[LMQ_QK_K];
    int16_t bsums[LMQ_QK_K / 16];  /* sum of qs in each group of 16 */
} lmq_block_q8_K;                  /* activations for K-quant dot products */

typedef struct {
    uint16_t d;
    uint16_t scales_h;             /* high 2 bits of the 8 6-bit scales */
    uint8_t scales_l[LMQ_QK_K / 64]; /* low 4 bits of the scales */
    uint8_t qs[LMQ_QK_K / 2];
} lmq_block_iq4_xs;

/* ---- fp8 (OCP Microscaling MXFP8 style) ------------------------------- */

typedef struct {
    uint8_t e;                     /* E8M0 scale: 2^(e - 127); 0xFF = NaN */
    uint8_t qs[LMQ_QK_F8];         /* e4m3 or e5m2 codes */
} lmq_block_f8;

/* ---- MXFP4 (OCP Microscaling; gpt-oss's expert weights) --------------- */

typedef struct {
    uint8_t e;                     /* E8M0 scale: d = 2^(e - 128) (no NaN code) */
    uint8_t qs[LMQ_QK_MXFP4 / 2];  /* codes into lmq_mxfp4_values: low nibble = element j, high = j + 16 */
} lmq_block_mxfp4;                 /* x = lmq_mxfp4_values[code] * d: ggml's block_mxfp4, byte for byte */

/* ---- ggml's codebook (IQ1..IQ3) and ternary (TQ) types ---------------
 * 256-element super-blocks whose 8- or 4-element groups are points of a
 * fixed grid (lmq_iq_grids), signs from a 7-bit index with even parity
 * (ksigns) or free. Every element is d * sc[sub-block] * q with integer q
 * (lmq_iq_unpack: the one decoder behind dequantizing, the reference dots
 * and the panels). Field order as ggml-common.h. */

typedef struct {
    uint16_t d;
    uint16_t qs[LMQ_QK_K / 8];     /* per 32: 4 grid bytes, then 4 x 7 sign bits + 4-bit scale (LE u32) */
} lmq_block_iq2_xxs;

typedef struct {
    uint16_t d;
    uint16_t qs[LMQ_QK_K / 8];     /* per 8: 9-bit grid index | 7-bit sign index << 9 */
    uint8_t scales[LMQ_QK_K / 32]; /* two 4-bit scales per 32 (low: first 16) */
} lmq_block_iq2_xs;

typedef struct {
    uint16_t d;
    uint8_t qs[LMQ_QK_K / 4];      /* 32 low bytes of the 10-bit grid indices, then 32 sign bytes */
    uint8_t qh[LMQ_QK_K / 32];     /* high 2 bits of the indices, 4 groups a byte */
    uint8_t scales[LMQ_QK_K / 32];
} lmq_block_iq2_s;

typedef struct {
    uint16_t d;
    uint8_t qs[3 * LMQ_QK_K / 8];  /* 64 grid bytes (4 elements each), then 8 x (4 x 7 sign bits + 4-bit scale) */
} lmq_block_iq3_xxs;

typedef struct {
    uint16_t d;
    uint8_t qs[LMQ_QK_K / 4];      /* low 8 bits of the 9-bit grid indices */
    uint8_t qh[LMQ_QK_K / 32];     /* their 9th bits */
    uint8_t signs[LMQ_QK_K / 8];   /* one bit an element */
    uint8_t scales[LMQ_QK_K / 64]; /* two 4-bit scales a byte, one per 32 */
} lmq_block_iq3_s;

typedef struct {
    uint16_t d;
    uint8_t qs[LMQ_QK_K / 8];      /* low 8 bits of the 11-bit grid indices */
    uint16_t qh[LMQ_QK_K / 32];    /* per 32: 4 x 3 high index bits, 3-bit scale, shift sign (bit 15) */
} lmq_block_iq1_s;

typedef struct {
    uint8_t qs[LMQ_QK_K / 8];      /* low 8 bits of the 11-bit grid indices */
    uint8_t qh[LMQ_QK_K / 16];     /* per two groups: 3 high bits + shift sign, each */
    uint8_t scales[LMQ_QK_K / 32]; /* 3-bit scales per 16; the f16 d in the top nibbles of the 4 LE u16 */
} lmq_block_iq1_m;

typedef struct {
    uint8_t qs[(LMQ_QK_K - 4 * LMQ_QK_K / 64) / 5]; /* 240 trits, 5 a byte (base 3, scaled to 0..255) */
    uint8_t qh[LMQ_QK_K / 64];                      /* 16 trits, 4 a byte */
    uint16_t d;
} lmq_block_tq1_0;

typedef struct {
    uint8_t qs[LMQ_QK_K / 4];      /* 2 bits an element: q in 0..2, x = (q - 1) d */
    uint16_t d;
} lmq_block_tq2_0;

_Static_assert(sizeof(lmq_block_iq2_xxs) == 66, "iq2_xxs size");
_Static_assert(sizeof(lmq_block_iq2_xs) == 74, "iq2_xs size");
_Static_assert(sizeof(lmq_block_iq2_s) == 82, "iq2_s size");
_Static_assert(sizeof(lmq_block_iq3_xxs) == 98, "iq3_xxs size");
_Static_assert(sizeof(lmq_block_iq3_s) == 110, "iq3_s size");
_Static_assert(sizeof(lmq_block_iq1_s) == 50, "iq1_s size");
_Static_assert(sizeof(lmq_block_iq1_m) == 56, "iq1_m size");
_Static_assert(sizeof(lmq_block_tq1_0) == 54, "tq1_0 size");
_Static_assert(sizeof(lmq_block_tq2_0) == 66, "tq2_0 size");

/* The grids of the codebook types, expanded once (thread-safe) from lmq's
 * packed copy: each entry's bytes are the magnitudes of its elements
 * (iq2: 8, 25, 43; iq3_xxs: 4..62; iq3_s: 1..15; iq1: -1, 0, 1 as int8),
 * element 0 in the lowest byte, as ggml's iq*_grid tables hold them.
 * signs[k]: the 8-bit sign mask of 7-bit index k (bit 7 = odd parity), as
 * bytes 0x00 / 0xFF in sign64[k]. */
typedef struct lmq_iq_grids {
    uint64_t iq2xxs[256], iq2xs[512], iq2s[1024], iq1s[2048];
    uint32_t iq3xxs[256], iq3s[512];
    uint8_t signs[128];
    uint64_t sign64[128];
} lmq_iq_grids;
const lmq_iq_grids *lmq_iq_grids_get(void);

/* One super-block of a codebook or ternary type as integers: element i is
 * d * sc[i / sub] * q[i], sub = lmq_iq_sub(t) (16 or 32); |q| <= 62 and
 * 1 <= sc <= 31. Returns false for a type that is not one of them. */
bool lmq_iq_unpack(lmq_type t, const void *blk, int8_t q[LMQ_QK_K], int8_t sc[16], float *d);
/* Elements per scale of a codebook / ternary type (0 for other types). */
int lmq_iq_sub(lmq_type t);

_Static_assert(sizeof(lmq_block_q4_0) == 18, "q4_0 size");
_Static_assert(sizeof(lmq_block_q4_1) == 20, "q4_1 size");
_Static_assert(sizeof(lmq_block_q5_0) == 22, "q5_0 size");
_Static_assert(sizeof(lmq_block_q5_1) == 24, "q5_1 size");
_Static_assert(sizeof(lmq_block_q8_0) == 34, "q8_0 size");
_Static_assert(sizeof(lmq_block_q8_1) == 36, "q8_1 size");
_Static_assert(sizeof(lmq_block_iq4_nl) == 18, "iq4_nl size");
_Static_assert(sizeof(lmq_block_q2_K) == 84, "q2_K size");
_Static_assert(sizeof(lmq_block_q3_K) == 110, "q3_K size");
_Static_assert(sizeof(lmq_block_q4_K) == 144, "q4_K size");
_Static_assert(sizeof(lmq_block_q5_K) == 176, "q5_K size");
_Static_assert(sizeof(lmq_block_q6_K) == 210, "q6_K size");
_Static_assert(sizeof(lmq_block_q8_K) == 292, "q8_K size");
_Static_assert(sizeof(lmq_block_iq4_xs) == 136, "iq4_xs size");
_Static_assert(sizeof(lmq_block_f8) == 33, "f8 size");
_Static_assert(sizeof(lmq_block_mxfp4) == 17, "mxfp4 size");

/* The 16-value non-linear grid of iq4_nl / iq4_xs. */
extern const int8_t lmq_iq4nl_values[16];

/* The E2M1 values of the MXFP4 codes, doubled (ggml's kvalues_mxfp4):
 * {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}; with the
 * block's d = 2^(e - 128) this is E2M1(code) * 2^(e - 127), the OCP value. */
extern const int8_t lmq_mxfp4_values[16];

/* d = 2^(e - 128) of an MXFP4 block (ggml_e8m0_to_fp32_half): exact for
 * every e, subnormal for e = 0 and 1. */
static inline float lmq_mxfp4_scale(uint8_t e)
{
    union { uint32_t u; float f; } v;
    v.u = e >= 2 ? (uint32_t)(e - 1) << 23 : 0x00200000u << e;
    return v.f;
}

/* ======================================================================
 * Row quantize / dequantize (scalar reference; quantize/quant_*.c)
 *
 * Every type of lmq_type has a row in one internal table of
 * { dequantize, quantize }; nothing outside that table switches on the type.
 * n must be a multiple of the type's block size (lmq_type_get()->block_size);
 * dst/src hold lmq_row_size(t, n) bytes. Float types (f32/f16/bf16) are
 * plain conversions (RNE).
 * ====================================================================== */

/* True when lmq_quantize_row() supports `t` (every valid type, q8_K included:
 * it is an activation format, but rows of it still round-trip). */
bool lmq_type_can_quantize(lmq_type t);

/* Quantizes one row of n floats into dst (lmq_row_size(t, n) bytes).
 * imatrix: optional per-column importance weights (length n, >= 0); NULL
 * uses ggml's default weighting. The K-quants and iq4 search scales/mins to
 * minimise the (importance-)weighted squared error; q4_0..q5_1 without an
 * imatrix are ggml's round-to-nearest reference (byte-identical to
 * llama-quantize), with one a weighted search. mxfp4 without an imatrix is
 * ggml's quantize_row_mxfp4_ref byte for byte: e = floor(log2f(amax)) + 125
 * (so amax / d is in [8, 16) and the largest values may saturate at 12 d),
 * each element the nearest value (ties to the smaller magnitude), an
 * all-zero block e = 0; with one, the exponents e - 1, e, e + 1 are tried
 * per block and the lowest weighted error kept. Blocks whose amax is below
 * 2^-125, where ggml's conversion to uint8 is undefined, get e = 0.
 * Errors: LMQ_ERR_INVALID_ARG for an invalid type, n < 0, n not a multiple
 * of the block size, a NULL pointer with n > 0, a NaN/Inf input (message
 * names the element index) or a negative/non-finite imatrix entry. */
lmq_status lmq_quantize_row(lmq_type t, const float *src, void *dst, int64_t n,
                            const float *imatrix);

/* Dequantizes one row of n elements to f32. Errors as above (no NaN check:
 * stored NaN codes decode to NaN). */
lmq_status lmq_dequantize_row(lmq_type t, const void *src, float *dst, int64_t n);

/* Quantizes nrows rows of n_per_row floats (src row-major, dst rows packed
 * back to back, each lmq_row_size(t, n_per_row) bytes). imatrix (length
 * n_per_row) applies to every row. n_threads <= 0: all CPUs; more than LMQ_MAX_THREADS is refused. The output is
 * byte-identical for any thread count. On failure (first bad row by index)
 * dst contents are unspecified. */
lmq_status lmq_quantize_rows(lmq_type t, const float *src, void *dst, int64_t nrows,
                             int64_t n_per_row, const float *imatrix, int n_threads);

/* The same with the source rows in src_type (f32, f16 or bf16, rows packed
 * back to back): each thread converts its rows to f32 in a scratch row of
 * its own and quantizes them, so the conversion is spread over the threads
 * and no f32 copy of the rows is made. Same bytes as converting first and
 * calling lmq_quantize_rows(). Errors as lmq_quantize_rows() (a NaN/Inf is
 * "input row R element C ... (a non-finite weight)"), LMQ_ERR_INVALID_ARG
 * for another src_type, LMQ_ERR_NOMEM when a scratch row cannot be had. */
lmq_status lmq_quantize_rows_src(lmq_type t, lmq_type src_type, const void *src, void *dst, int64_t nrows,
                                 int64_t n_per_row, const float *imatrix, int n_threads);

/* Whether the quantizers use their SIMD variants (default true: the widest
 * the CPU has, detected at run time; quantize/quant_dispatch.c). Every
 * variant gives the reference's bytes, so this changes the speed only;
 * false runs the scalar references (the CLI applies LMQ_ISA=scalar with it;
 * the library reads no environment). Process-wide; safe to call at any time. */
void lmq_quantize_use_simd(bool on);

/* The quantizer's version: recorded as lmq.quantize.version and part of
 * every cache key of quantized results (target plans). Bump the number
 * whenever the bytes any quantizer produces can change (a search, a
 * rounding, a grid); tests/test_quant_version.c holds a hash of the bytes
 * of a fixed tensor per type and fails until it is bumped. */
#define LMQ_QUANTIZE_VERSION "0.1.0-q4"

/* ---- Error-feedback quantization (GPTQ; quantize/gptq.c) ----------------
 * Quantizes rows so that the output error over calibration activations x,
 * e^T H e with H = sum x x^T, is small rather than each weight's error: the
 * rounding error of each element is moved onto the elements of the row not
 * yet rounded. Each block's scales are lmq_quantize_row()'s on the
 * corrected weights, so the blocks are ordinary blocks of the type. */

/* True for the types with an error-feedback quantizer: q4_0, q4_1, q5_0,
 * q5_1, q8_0, iq4_nl, q2_K..q6_K, iq4_xs, mxfp4. */
bool lmq_gptq_supported(lmq_type t);

/* h (n x n, row-major; only the upper triangle is read or written) +=
 * sum over n_tok rows of x (n_tok x n) of x x^T. */
void lmq_gptq_accumulate(float *h, const float *x, int64_t n_tok, int64_t n);
/* The same on n_threads threads (<= 0: every CPU); the sums are the same
 * for every thread count (fixed stripes of H, one BLAS call each). */
void lmq_gptq_accumulate_mt(float *h, const float *x, int64_t n_tok, int64_t n, int n_threads);

/* Turns the upper triangle of H in place into U, the upper Cholesky factor
 * of (H + damp * mean(diag H) * I)^-1 (row-major, lower triangle zeroed);
 * inputs that were never active get a unit diagonal first. damp 0.01 is
 * GPTQ's. LMQ_ERR_INVALID_ARG for a negative or non-finite diagonal or a
 * matrix that is not positive definite after damping. */
lmq_status lmq_gptq_factor(float *h, int64_t n, float damp);

/* Quantizes nrows rows of n floats with the factor u of lmq_gptq_factor()
 * (src is used as scratch and left modified). imatrix: as
 * lmq_quantize_rows() (the blocks' scale search). Rows are independent, so
 * the bytes do not depend on n_threads. Errors: LMQ_ERR_UNSUPPORTED for a
 * type without a grid, LMQ_ERR_INVALID_ARG as lmq_quantize_rows(). */
lmq_status lmq_quantize_rows_gptq(lmq_type t, float *src, void *dst, int64_t nrows, int64_t n,
                                  const float *imatrix, const float *u, int n_threads);

/* Unchecked fast path for kernels: the table's dequantizer for `t` (NULL for
 * an invalid type). Caller guarantees n is a multiple of the block size. */
typedef void (*lmq_to_float_fn)(const void *src, float *dst, int64_t n);
lmq_to_float_fn lmq_dequantize_fn(lmq_type t);

/* ======================================================================
 * Activation quantizers for the dot-product kernels (ggml's
 * quantize_row_q8_{0,1,K}_ref semantics, bit-exact). n multiple of the
 * block size (32 or 256); no checks, no allocation, finite input assumed.
 * q8_0: d = amax/127, q = round(x/d) (roundf: ties away from zero).
 * q8_1: as q8_0 plus s = f16(d * sum(q)).
 * q8_K: f32 d = max/-127 of the signed absmax element, q = nearest-even of
 *       x/d clamped to <= 127, bsums[g] = sum of q[16g..16g+15].
 * ====================================================================== */

void lmq_quantize_row_q8_0_ref(const float *x, lmq_block_q8_0 *y, int64_t n);
void lmq_quantize_row_q8_1_ref(const float *x, lmq_block_q8_1 *y, int64_t n);
void lmq_quantize_row_q8_K_ref(const float *x, lmq_block_q8_K *y, int64_t n);

/* ======================================================================
 * fp8 (OCP 8-bit floating point spec, v1.0)
 * e4m3 ("E4M3FN"): bias 7, no infinities, 0x7F/0xFF are NaN, max 448,
 *   min subnormal 2^-9.
 * e5m2: bias 15, IEEE-like (0x7C = +Inf, 0x7D..0x7F NaN), max 57344,
 *   min subnormal 2^-16.
 * Encoders round to nearest, ties to even, and saturate finite values
 * (and +-Inf) to the largest finite magnitude; NaN -> 0x7F (e4m3) /
 * 0x7E (e5m2) with the input's sign.
 * Blocks (lmq_block_f8): x = decode(qs[j]) * 2^(e - 127); the quantizer
 * picks the smallest e with amax * 2^-(e-127) <= format max and also tries
 * e - 1 (saturating the block max), keeping the lower squared error.
 * ====================================================================== */

#define LMQ_FP8_E4M3_MAX 448.0f
#define LMQ_FP8_E5M2_MAX 57344.0f

uint8_t lmq_fp8_e4m3_from_f32(float x);
float lmq_fp8_e4m3_to_f32(uint8_t c);
uint8_t lmq_fp8_e5m2_from_f32(float x);
float lmq_fp8_e5m2_to_f32(uint8_t c);

/* Exact decode tables (static, no initialisation needed). */
extern const float lmq_fp8_e4m3_table[256];
extern const float lmq_fp8_e5m2_table[256];

/* ======================================================================
 * Mixes (quantize/mix.c) — the type of every tensor under a mix name
 *
 * A mix names a base type plus the rules that give some tensors more bits
 * (output head, attn_v, ffn_down, ...). The rules reproduce llama.cpp's
 * llama_tensor_get_type() for Llama models (commit c392e509, 2025-02-20) so
 * that sizes and quality compare one to one with llama-quantize; they live
 * in tables in mix.c and are listed in docs/QUANT.md, "Mixes".
 * ====================================================================== */

typedef struct lmq_mix_info {
    const char *name;    /* "q4_k_m" (lower case) */
    lmq_type base;       /* type of every quantizable tensor no rule promotes */
    int32_t llama_ftype; /* llama.cpp's LLAMA_FTYPE number, -1 when it has none */
    const char *desc;    /* one line for help texts */
} lmq_mix_info;

size_t lmq_mix_count(void);
const lmq_mix_info *lmq_mix_at(size_t i); /* NULL when i >= lmq_mix_count() */
/* Case-insensitive lookup; LMQ_ERR_INVALID_ARG with every valid name listed. */
lmq_status lmq_mix_from_name(const char *name, const lmq_mix_info **out);
/* "q2_k, q3_k_s, ..." (static storage). */
const char *lmq_mix_names(void);

/* Model facts the rules read. */
typedef struct lmq_mix_model {
    int32_t n_layer;   /* <arch>.block_count; 0 = 1 + the largest blk.N */
    int32_t n_head;    /* attention heads (0 = unknown) */
    int32_t n_head_kv; /* KV heads; n_gqa = n_head / n_head_kv */
    int32_t n_expert;  /* <arch>.expert_count (0: dense); llama.cpp has rules for 8 experts */
} lmq_mix_model;

/* Fills *out from <general.architecture>.block_count,
 * .attention.head_count(_kv) and .expert_count; missing keys give 0
 * (n_head_kv: n_head). */
void lmq_mix_model_from_meta(const lmq_meta *m, lmq_mix_model *out);

typedef struct lmq_mix_override {
    const char *pattern; /* POSIX extended regex, searched anywhere in the name */
    lmq_type type;
} lmq_mix_override;

typedef struct lmq_mix_opts {
    const lmq_mix_info *mix;
    bool pure;                /* no promotions: quantizable tensors get mix->base */
    lmq_type output_type;     /* output.weight (or tied token_embd); LMQ_TYPE_COUNT = mix */
    lmq_type token_embd_type; /* token_embd.weight; LMQ_TYPE_COUNT = mix */
    const lmq_mix_override *overrides; /* first match wins; after the two above */
    size_t n_overrides;
} lmq_mix_opts;

typedef struct lmq_mix_tensor { /* one source tensor, as the planner sees it */
    const char *name;           /* GGUF-style: "blk.3.attn_v.weight" */
    lmq_type type;              /* source type */
    uint32_t n_dims;            /* 1..LMQ_MAX_DIMS */
    int64_t ne[LMQ_MAX_DIMS];   /* ne[0] = row length */
} lmq_mix_tensor;

typedef enum lmq_mix_why {
    LMQ_MIX_WHY_KEEP = 0,   /* not quantizable (1-D, norm): float type kept, else f32 */
    LMQ_MIX_WHY_BASE,       /* the mix's base type */
    LMQ_MIX_WHY_RULE,       /* promoted by a mix rule */
    LMQ_MIX_WHY_OUTPUT,     /* opts.output_type */
    LMQ_MIX_WHY_TOKEN_EMBD, /* opts.token_embd_type */
    LMQ_MIX_WHY_OVERRIDE,   /* opts.overrides[override_index] */
    LMQ_MIX_WHY_COUNT
} lmq_mix_why;

typedef struct lmq_mix_entry { /* the plan for one tensor */
    lmq_type type;             /* type to store */
    lmq_type wanted;           /* choice before the row-length fallback */
    lmq_mix_why why;
    int32_t override_index;    /* -1 unless why == LMQ_MIX_WHY_OVERRIDE */
    int64_t n_elements;
    int64_t bytes;             /* stored size in `type` */
} lmq_mix_entry;

/* Plans n tensors: out[i] is the choice for tensors[i]. override_hits (may
 * be NULL; opts->n_overrides entries) receives how many tensors each
 * override matched. A type whose block does not divide a row falls back
 * (q2_K/q3_K/iq4_xs -> iq4_nl, q4_K -> q5_0, q5_K -> q5_1, q6_K -> q8_0),
 * and to f16 when that does not fit either (also for 32-block types, which
 * llama.cpp refuses there). Errors (LMQ_ERR_INVALID_ARG, message naming
 * it): a pattern that does not compile, a type that cannot be stored, a
 * tensor without a name or with a bad rank/shape. */
lmq_status lmq_mix_plan(const lmq_mix_opts *opts, const lmq_mix_model *model,
                        const lmq_mix_tensor *tensors, size_t n, lmq_mix_entry *out,
                        size_t *override_hits);

/* llama.cpp's test: name ends in "weight", >= 2 dims, not a norm/gate-inp. */
bool lmq_mix_is_quantizable(const char *name, uint32_t n_dims);
/* Type a row of ne0 elements falls back to (t itself when it fits). */
lmq_type lmq_mix_fallback(lmq_type t, int64_t ne0);
/* False for invalid ids, the activation-only formats q8_1 and q8_K and the
 * types lmq reads but does not write (the codebook types). */
bool lmq_mix_type_storable(lmq_type t);
const char *lmq_mix_why_name(lmq_mix_why w);


/* ======================================================================
 * Importance matrices (quantize/imatrix.c): per input column of every
 * weight matrix, the sum of squared activations and the number of tokens
 * seen, as llama.cpp's imatrix tool collects them. The quantizers take
 * in_sum2 / count (the mean square activation) as `imatrix`.
 *
 * File formats (read; GGUF is written):
 * - GGUF (llama.cpp's current format): general.type = "imatrix",
 *   imatrix.datasets (string array), imatrix.chunk_count (u32),
 *   imatrix.chunk_size (u32); per weight `<name>.in_sum2` f32 [n_cols, n_mat]
 *   and `<name>.counts` f32 [1, n_mat] (tokens per matrix; n_mat = experts).
 * - llama.cpp's legacy imatrix.dat: i32 n_entries; per entry i32 name length,
 *   name, i32 ncall, i32 nval, f32[nval] (= mean square * ncall); then
 *   optionally i32 last_call, i32 length, dataset name. Read as sums =
 *   values, counts = ncall (so sums/counts is the per-token mean square);
 *   chunk_count = last_call, chunk_size = 0 (unknown).
 * Every size is bounded against the file; a truncated or corrupt file gives
 * LMQ_ERR_FORMAT naming the file (and the entry), never a crash.
 * ====================================================================== */

typedef struct lmq_imatrix lmq_imatrix;

typedef struct lmq_imatrix_entry {
    const char *name;  /* weight name, e.g. "blk.0.attn_q.weight" */
    int64_t n_cols;    /* input columns (the weight's ne[0]) */
    int32_t n_mat;     /* matrices: 1 dense, n_expert for MoE tensors */
    double *sum2;      /* [n_mat][n_cols] sum of squared activations */
    double *counts;    /* [n_mat] tokens seen */
} lmq_imatrix_entry;

lmq_imatrix *lmq_imatrix_new(void); /* NULL when out of memory */
void lmq_imatrix_free(lmq_imatrix *im);

/* Adds n_tok rows of n_cols activations (row-major) to `name`'s matrix
 * `mat` (0 for dense weights, the expert index for MoE; the entry grows to
 * mat + 1 matrices). LMQ_ERR_INVALID_ARG when n_cols differs from earlier
 * calls for the same name. */
lmq_status lmq_imatrix_accumulate(lmq_imatrix *im, const char *name, int32_t mat, const float *x, int64_t n_tok,
                                  int64_t n_cols);

size_t lmq_imatrix_count(const lmq_imatrix *im);
const lmq_imatrix_entry *lmq_imatrix_at(const lmq_imatrix *im, size_t i);
const lmq_imatrix_entry *lmq_imatrix_find(const lmq_imatrix *im, const char *name);

/* Provenance: the calibration data set names, chunks and chunk size. */
lmq_status lmq_imatrix_add_dataset(lmq_imatrix *im, const char *name);
size_t lmq_imatrix_n_datasets(const lmq_imatrix *im);
const char *lmq_imatrix_dataset(const lmq_imatrix *im, size_t i);
void lmq_imatrix_set_chunks(lmq_imatrix *im, uint32_t chunk_count, uint32_t chunk_size);
uint32_t lmq_imatrix_chunk_count(const lmq_imatrix *im);
uint32_t lmq_imatrix_chunk_size(const lmq_imatrix *im);

/* The importance weights of `name`'s matrix `mat` (n_cols floats: the mean
 * square activation of each column). LMQ_ERR_NOT_FOUND when the entry is
 * missing, LMQ_ERR_INVALID_ARG when n_cols or mat do not fit it. A matrix
 * that saw no token gets weights of 1 (as llama.cpp). */
lmq_status lmq_imatrix_weights(const lmq_imatrix *im, const char *name, int32_t mat, float *out, int64_t n_cols);

/* Adds src's sums and counts to dst (entries of the same name must have the
 * same n_cols; n_mat grows to the larger), appends its data sets and adds
 * its chunk count. Exact: sums are kept in double. */
lmq_status lmq_imatrix_merge(lmq_imatrix *dst, const lmq_imatrix *src);

/* Writes llama.cpp's GGUF imatrix format (atomically; entries in name
 * order, so the bytes are deterministic). */
lmq_status lmq_imatrix_save(const lmq_imatrix *im, const char *path);
/* Reads a GGUF or legacy .dat imatrix (chosen by the magic). */
lmq_status lmq_imatrix_load(const char *path, lmq_imatrix **out);
/* The same from memory (tests, fuzzing); `name` is used in messages. */
lmq_status lmq_imatrix_load_memory(const void *buf, size_t len, const char *name, lmq_imatrix **out);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif /* LMQ_QUANT_H */
