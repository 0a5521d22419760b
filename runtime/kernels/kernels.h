/* kernels.h — private interface of the kernel files: the table of function
 * pointers one ISA fills, and the prototypes of every variant. Tests include
 * it to compare each variant with its `_ref` twin.
 *
 * Naming: lmq_vec_dot_<type>_<isa>, lmq_to_float_<type>_<isa>, ...; each
 * ISA's file(s) export lmq_kernels_fill_<isa>(table), which overwrites the
 * entries that ISA implements (so a table starts as the scalar one and each
 * level adds what it has). */
#ifndef LMQ_KERNELS_H
#define LMQ_KERNELS_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "lmq_quant.h"
#include "lmq_rt_kernels.h"

/* *s = dot(w[0..n), a[0..n)): w one weight row, a one activation row of the
 * weight type's activation type (lmq_act_type). n is a multiple of the
 * weight block size. The pointers need only the C alignment of their
 * block struct (2 bytes; 4 for f32 and q8_K), none for SIMD. */
typedef void (*lmq_vec_dot_fn)(int64_t n, float *s, const void *w, const void *a);
/* Four dots of one weight row with four activation rows at a, a + a_stride,
 * a + 2 a_stride, a + 3 a_stride (bytes): s[k * s_stride] for k = 0..3.
 * Each result equals the 1-token kernel's bit for bit; the weights are
 * unpacked once for the four (batched matmul). */
typedef void (*lmq_vec_dot4_fn)(int64_t n, float *s, int64_t s_stride, const void *w, const void *a,
                                int64_t a_stride);
/* Dots of nr weight rows (w + r * w_stride bytes, r < nr) with nt
 * activation rows (a + t * a_stride bytes, t < nt), 1 <= nr, nt <= 4:
 * s[t * s_stride + r]. Each result equals the 1-token kernel's bit for bit;
 * activation loads are shared by the rows and weight unpacking by the
 * tokens (matrix-vector products and batched matmul). */
typedef void (*lmq_vec_dot_tile_fn)(int64_t n, int nr, int nt, float *s, int64_t s_stride, const void *w,
                                    int64_t w_stride, const void *a, int64_t a_stride);
/* ---- panels (row-interleaved weights for batched products; panel.c) --- */

#define LMQ_PANEL_ROWS 16

/* One 32-element block of 16 rows: q[g][r][k] = quant 4g + k of row r. */
typedef struct lmq_panel32 {
    int8_t q[8][LMQ_PANEL_ROWS][4];
    int32_t corr[LMQ_PANEL_ROWS]; /* -128 * sum of the row's quants */
    float d[LMQ_PANEL_ROWS];
} lmq_panel32;

/* One 256-element super-block of 16 rows. */
typedef struct lmq_panel256 {
    int8_t q[64][LMQ_PANEL_ROWS][4];
    int32_t sc[16][LMQ_PANEL_ROWS];   /* sub-block scales (256 / sub of them) */
    int16_t m[8][LMQ_PANEL_ROWS][2];  /* mins of the 16-quant groups 2g, 2g + 1 */
    int32_t corr[LMQ_PANEL_ROWS];     /* -128 * sum_j sc_j * sum of sub-block j's quants */
    float d[LMQ_PANEL_ROWS], dmin[LMQ_PANEL_ROWS];
} lmq_panel256;

/* A repacked 32-element block of 16 rows, kept for the model's life
 * (lmq_repack): the weights' own bytes rearranged, same size. u[g][r][k]
 * is quant 4g + k of row r as an unsigned byte (q8_0: q + 128; q4_0 and
 * iq4_nl: two 4-bit codes per byte, groups g and g + 4 in the low and high
 * nibble; iq4_nl codes index its grid). The activations stay signed, and
 * each (token, block) starts from -o * sum(activation quants), o = 128 or 8. */
typedef struct lmq_rpanel8 {
    uint16_t d[LMQ_PANEL_ROWS];
    uint8_t u[8][LMQ_PANEL_ROWS][4];
} lmq_rpanel8;
typedef struct lmq_rpanel4 {
    uint16_t d[LMQ_PANEL_ROWS];
    uint8_t u[4][LMQ_PANEL_ROWS][4];
} lmq_rpanel4;
/* A repacked MXFP4 block of 16 rows: the rows' E8M0 bytes as the blocks
 * hold them (d = lmq_mxfp4_scale(e), built in the kernels by shifting e
 * into a float's exponent), then the codes into lmq_mxfp4_values as in
 * lmq_rpanel4. 16 x 17 bytes: the weights' own size. */
typedef struct lmq_rpanelmx {
    uint8_t e[LMQ_PANEL_ROWS];
    uint8_t u[4][LMQ_PANEL_ROWS][4];
} lmq_rpanelmx;

/* A repacked q4_K super-block of 16 rows: u[c][h][r][k] holds quant
 * 64c + 4h + k of row r in its low nibble and quant 64c + 32 + 4h + k in
 * its high nibble; sc[j][r] the 8 sub-block scales; m[p][r] the mins of
 * sub-blocks 2p, 2p + 1. The activation side is the q8_K row with, per
 * super-block, its four pairs of 32-quant sums (lmq_q8_K_pair_sums). */
typedef struct lmq_rpanelk4 {
    uint16_t d[LMQ_PANEL_ROWS], dmin[LMQ_PANEL_ROWS];
    int8_t sc[8][LMQ_PANEL_ROWS];
    int8_t m[4][LMQ_PANEL_ROWS][2];
    uint8_t u[4][8][LMQ_PANEL_ROWS][4];
} lmq_rpanelk4;

/* A repacked iq4_xs super-block of 16 rows: d, sc and u as lmq_rpanelk4's
 * (u holds codes into the grid), nothing else: 138 bytes per row and
 * super-block against iq4_xs's own 136 (generation reads every byte once
 * per token). A kernel that needs unsigned quants (vpdpbusd: grid + 128)
 * takes 128 * sum_j sc[j] * (activation sum of sub-block j) off from sc
 * and the pair sums. */
typedef struct lmq_rpanelx4 {
    uint16_t d[LMQ_PANEL_ROWS];
    int8_t sc[8][LMQ_PANEL_ROWS];
    uint8_t u[4][8][LMQ_PANEL_ROWS][4];
} lmq_rpanelx4;

/* A repacked q6_K super-block of 16 rows (the same 3360 bytes; AVX2,
 * AVX-VNNI and NEON; like the four layouts below, in the x86 order on
 * every machine, not lmq_panel_off's: NEON reads a 16-byte line of 4 rows
 * x 4 quants with sdot by element): q[s][b][r][k] (sub-block s of 16
 * quants, b < 3, row r, k < 4) holds in its low 6 bits the code (q + 32,
 * 0..63) of quant 16s + 4b + k of row r and in its top 2 bits bits
 * 4 - 2b, 5 - 2b of the code of quant 16s + 12 + k; sc[p][r] the scales
 * of sub-blocks 2p, 2p + 1. Codes are unsigned against the signed q8_K
 * activations; the -32 comes back through the q8_K row's 16-quant sums
 * (bsums), -32 x sc x bsum per sub-block. */
typedef struct lmq_rpanelq6 {
    uint16_t d[LMQ_PANEL_ROWS];
    int8_t sc[8][LMQ_PANEL_ROWS][2];
    uint8_t q[16][3][LMQ_PANEL_ROWS][4];
} lmq_rpanelq6;

/* A repacked q5_K super-block of 16 rows (2880 bytes, the rows' 2816 +
 * 2.3%; x86 and NEON): d, dmin, sc and m as in lmq_rpanelk4, then per
 * 32-quant sub-block j five byte planes q[j][b][r][k], b < 5: the low 5
 * bits hold the code (0..31) of quant 32j + 4b + k (groups 0..4), the top
 * 3 bits the codes of groups 5..7 of the same k: c5 = b0 >> 5 | (b3 >> 5
 * & 3) << 3, c6 = b1 >> 5 | (b4 >> 5 & 3) << 3, c7 = b2 >> 5 | (b3 >> 7)
 * << 3 | (b4 >> 7) << 4. */
typedef struct lmq_rpanelq5 {
    uint16_t d[LMQ_PANEL_ROWS], dmin[LMQ_PANEL_ROWS];
    int8_t sc[8][LMQ_PANEL_ROWS];
    int8_t m[4][LMQ_PANEL_ROWS][2];
    uint8_t q[8][5][LMQ_PANEL_ROWS][4];
} lmq_rpanelq5;

/* A repacked q5_0 block of 16 rows (the same 352 bytes; x86 and NEON): d,
 * then the codes (q + 16, 0..31) of the 32 quants in five byte planes laid
 * out as one sub-block of lmq_rpanelq5 (groups 0..4 in the low 5 bits,
 * 5..7 in the top 3). Codes are unsigned against the signed q8_0
 * activations; each (token, block) starts from -16 x sum(activation
 * quants). */
typedef struct lmq_rpanel5 {
    uint16_t d[LMQ_PANEL_ROWS];
    uint8_t q[5][LMQ_PANEL_ROWS][4];
} lmq_rpanel5;

/* A repacked q2_K super-block of 16 rows (the same 1344 bytes; x86 and
 * NEON, in the x86 order on every machine, not lmq_panel_off's): sc[p][r] the rows'
 * own scale bytes of sub-blocks 2p, 2p + 1 (scale in the low nibble, min in
 * the high one); q[j][r][k] holds the codes (0..3) of quants 16j + 4g + k,
 * g < 4, at bits 2g, 2g + 1: one byte plane per 16-quant sub-block. */
typedef struct lmq_rpanelq2 {
    uint16_t d[LMQ_PANEL_ROWS], dmin[LMQ_PANEL_ROWS];
    uint8_t sc[8][LMQ_PANEL_ROWS][2];
    uint8_t q[16][LMQ_PANEL_ROWS][4];
} lmq_rpanelq2;

/* A repacked q3_K super-block of 16 rows (1824 bytes, the rows' 1760 +
 * 3.6%: the 6-bit scales as bytes; x86 and NEON): sc[p][r]
 * the signed scales (-32..31) of sub-blocks 2p, 2p + 1; per 32-quant
 * sub-block pair p three byte planes q[p][b][r][k] hold the codes (q + 4,
 * 0..7) c_g of quants 32p + 4g + k, g < 8: b0 = c0 | c1 << 3 | (c6 & 3) << 6,
 * b1 = c2 | c3 << 3 | (c7 & 3) << 6, b2 = c4 | c5 << 3 | (c6 >> 2) << 6 |
 * (c7 >> 2) << 7. Codes are unsigned against the signed q8_K activations;
 * the -4 comes back through the q8_K row's bsums, -4 x sc x bsum per
 * sub-block. */
typedef struct lmq_rpanelq3 {
    uint16_t d[LMQ_PANEL_ROWS];
    int8_t sc[8][LMQ_PANEL_ROWS][2];
    uint8_t q[8][3][LMQ_PANEL_ROWS][4];
} lmq_rpanelq3;

/* Where quant 4g + k (k < 4) of row r sits in the 16-row interleave of a
 * panel or repacked block (the q / u arrays above, as bytes; g counts
 * 4-quant groups within the array). x86: q[g][r][k], as the arrays are
 * declared (vpdpbusd takes 4 quants of 16 rows). aarch64: 16-byte lines of
 * 8 quants of a row pair, [g / 2][r / 2][r % 2][g % 2][k], the operand of
 * smmla (2 rows x 8 quants); sdot takes it with the activations' 8 bytes
 * in both halves (docs/PERF.md, "ARM"). The same bytes, another order. */
static inline int lmq_panel_off(int g, int r, int k)
{
#if defined(__aarch64__)
    return ((g >> 1) * (LMQ_PANEL_ROWS / 2) + (r >> 1)) * 16 + (r & 1) * 8 + (g & 1) * 4 + k;
#else
    return (g * LMQ_PANEL_ROWS + r) * 4 + k;
#endif
}

/* y[t * y_stride + r] for the 16 rows of a repacked chunk (nb blocks) and nt
 * tokens (q8_0 activation rows at act + t * a_stride, their per-block sums
 * of quants at asum + t * nb), r < nr. */
typedef void (*lmq_rpanel_gemm_fn)(int64_t nb, const void *chunk, const void *act, int64_t a_stride,
                                   const int32_t *asum, int nt, float *y, int64_t y_stride, int nr);

typedef struct lmq_panel_traits {
    int16_t block;  /* 32 (lmq_panel32, q8_0 activations) or 256 (lmq_panel256, q8_K) */
    int16_t sub;    /* quants per sub-block scale (256 only): 16 or 32 */
    bool has_min;   /* d * sc * q - dmin * m (q2_K, q4_K, q5_K) */
} lmq_panel_traits;

/* One block of one weight row as integers: the block's quants (the value
 * is d * sc[j] * q - dmin * m[g], j = sub-block, g = 16-quant group; for
 * 32-element blocks d * q), scales and mins. */
typedef struct lmq_unpacked {
    int8_t q[256];
    int32_t sc[16];
    int16_t m[16];
    float d, dmin;
} lmq_unpacked;

/* Unpacks block ib of a weight row. */
typedef void (*lmq_unpack_fn)(const void *row, int64_t ib, lmq_unpacked *u);
/* y[t * y_stride + r] = row r of the panel . activation row t, for t < nt
 * (activation rows at act + t * a_stride bytes, biased by
 * lmq_panel_bias_act), r < nr. */
typedef void (*lmq_panel_gemm_fn)(int64_t n_in, const void *panel, const void *act, int64_t a_stride, int nt,
                                  float *y, int64_t y_stride, int nr);

/* Converts n floats to one activation row (q8_0 / q8_1 / q8_K). */
typedef void (*lmq_from_float_fn)(const float *x, void *y, int64_t n);
/* f32 panels (the batched path of the types without integer kernels: f16,
 * bf16, f32, fp8, q4_1, q5_1): a panel holds 16 weight rows as floats
 * k-major, panel[k * 16 + r], rows nr..15 zero. fpanel_pack transposes nr
 * <= 16 rows (rows + r * row_stride floats) into one; fpanel_gemm computes,
 * for the np panels at panels (panel p = rows 16p..16p+15, each
 * 16 * n_in floats) and nt tokens (x + t * x_stride), every
 * y[t * y_stride + r] for r < nr as one fused multiply-add chain over k in
 * order from 0 (fmaf), so the result does not depend on how rows or tokens
 * are grouped; lmq_fpanel_gemm_ref is the scalar reference. */
typedef void (*lmq_fpanel_pack_fn)(const float *rows, int64_t row_stride, int nr, int64_t n_in, float *panel);
typedef void (*lmq_fpanel_gemm_fn)(int64_t n_in, int np, const float *panels, const float *x, int64_t x_stride,
                                   int nt, float *y, int64_t y_stride, int nr);
/* Dequantizing one row of n weights to floats: lmq_to_float_fn of
 * lmq_quant.h. */

typedef struct lmq_kernel_table {
    lmq_isa isa;
    lmq_vec_dot_fn vec_dot[LMQ_TYPE_COUNT];     /* indexed by weight type */
    lmq_vec_dot4_fn vec_dot4[LMQ_TYPE_COUNT];   /* optional (NULL: 4 x vec_dot) */
    lmq_vec_dot_tile_fn vec_dot_tile[LMQ_TYPE_COUNT]; /* optional (NULL: vec_dot4 / vec_dot) */
    lmq_to_float_fn to_float[LMQ_TYPE_COUNT];   /* indexed by weight type */
    lmq_from_float_fn from_float[LMQ_TYPE_COUNT]; /* indexed by activation type */
    float (*dot_f32)(const float *a, const float *b, int64_t n);
    float (*dot_f16_f32)(const uint16_t *a, const float *b, int64_t n);
    void (*axpy_f32)(float *y, float alpha, const float *x, int64_t n);
    void (*axpy_f16)(float *y, float alpha, const uint16_t *x, int64_t n);
    float (*softmax)(float *x, int64_t n);
    lmq_unpack_fn panel_unpack[LMQ_TYPE_COUNT];   /* every ISA: scalar or SIMD */
    void (*panel_pack)(lmq_type t, lmq_unpack_fn unpack, const void *w, int64_t w_row, int nr, int64_t n_in,
                       void *panel);              /* lmq_panel_pack or a SIMD twin (same bytes) */
    lmq_panel_gemm_fn panel_gemm[LMQ_TYPE_COUNT]; /* optional: NULL = no panel path */
    int16_t panel_min_tok[LMQ_TYPE_COUNT];      /* smallest batch for the panel path; 0 = matmul.c's default */
    lmq_rpanel_gemm_fn rpanel_gemm[LMQ_TYPE_COUNT]; /* optional: NULL = no repacking (q4_0, q8_0, iq4_nl,
                                                     * q4_K, iq4_xs, mxfp4, q2_K, q3_K, q5_K,
                                                     * q5_0; all but AVX-512 also q6_K) */
    lmq_fpanel_pack_fn fpanel_pack;       /* optional (with fpanel_gemm): the f32 panel path replaces */
    lmq_fpanel_gemm_fn fpanel_gemm;       /* the BLAS one (matmul.c; AVX2, avxvnni and AVX-512 tables) */
    void (*attn)(const lmq_attn_args *a); /* lmq_attn (attn.c, x86/attn_*.c, arm/attn_neon.c) */
    void (*delta_rule)(const lmq_delta_args *a); /* lmq_delta_rule (recurrent.c, x86/recurrent_*.c, */
    void (*ssm_conv)(const lmq_conv_args *a);    /* lmq_ssm_conv    arm/recurrent_neon.c) */
} lmq_kernel_table;

/* The active table (selected once; see lmq_isa_force). */
const lmq_kernel_table *lmq_kernels(void);
/* The table of a given ISA, or NULL when it is not supported here. */
const lmq_kernel_table *lmq_kernels_for(lmq_isa isa);

/* Settings of the calling thread (a context's ISA and GEMM mode, a model's
 * repacking ISA): lmq_eval, lmq_context_new and lmq_model_load_params apply
 * their object's settings for their duration. Every table lookup
 * (lmq_kernels, lmq_isa_active) and GEMM-mode read on this thread then sees
 * them; all lookups happen on the calling thread (pool jobs get the table
 * in their job struct), so the pool's workers follow. isa LMQ_ISA_COUNT
 * (or unsupported), gemm LMQ_GEMM_MODE_COUNT: the process-wide one. Enter
 * returns what was in force, for leave to restore (scopes nest). */
typedef struct lmq_kernel_scope {
    const lmq_kernel_table *k; /* NULL: the process-wide table */
    int gemm;                  /* < 0: the process-wide mode */
} lmq_kernel_scope;
lmq_kernel_scope lmq_kernel_scope_enter(lmq_isa isa, lmq_gemm_mode gemm);
void lmq_kernel_scope_leave(lmq_kernel_scope prev);
/* The calling thread's GEMM mode, or -1 for the process-wide one. */
int lmq_kernel_scope_gemm(void);

void lmq_kernels_fill_ref(lmq_kernel_table *t);
void lmq_kernels_fill_avx2(lmq_kernel_table *t);
void lmq_kernels_fill_iq_avx2(lmq_kernel_table *t); /* x86/iq_avx2.c, called by the above */
void lmq_kernels_fill_avx512(lmq_kernel_table *t);
void lmq_kernels_fill_avx512_q32(lmq_kernel_table *t); /* x86/q32_avx512.c, called by the above */
void lmq_kernels_fill_neon(lmq_kernel_table *t);
void lmq_kernels_fill_neon_panel(lmq_kernel_table *t); /* arm/panel_neon.c, called by the above */
void lmq_kernels_fill_neon_rpanel(lmq_kernel_table *t); /* arm/rpanel_neon.c: q2_K, q3_K, q5_K, q6_K, q5_0 */
void lmq_kernels_fill_i8mm(lmq_kernel_table *t);       /* arm/panel_neon.c: smmla for batches */
void lmq_kernels_fill_avx512_panel(lmq_kernel_table *t); /* x86/panel_avx512.c */
void lmq_kernels_fill_avx2_panel(lmq_kernel_table *t);   /* x86/panel_avx2.c (AVX2 table only) */
/* x86/panel_avxvnni.c over the AVX2 table: the VEX build (AVX-VNNI) and the
 * EVEX one (AVX-512 VNNI + VL: the same source, x86/panel_avxvnni_evex.c) */
void lmq_kernels_fill_avxvnni(lmq_kernel_table *t);
void lmq_kernels_fill_avxvnni_evex(lmq_kernel_table *t);

/* ---- panels: packing and the scalar reference (panel.c) ---------------- */

/* Traits of a weight type's panel, NULL when it has none. */
const lmq_panel_traits *lmq_panel_traits_of(lmq_type t);
/* The scalar unpackers (also in every table's panel_unpack). */
void lmq_panel_fill_ref(lmq_kernel_table *t);
/* Bytes of one panel of rows of n_in weights, -1 when the type has none. */
int64_t lmq_panel_bytes(lmq_type t, int64_t n_in);
/* lmq_workspace_reserve for pools of up to max(n_threads, lmq_n_cpus(), 4)
 * threads, with every scratch the ISA and GEMM mode in force can use
 * (panels, repacked sums, BLAS tiles): lmq_matmul* then allocate nothing. */
lmq_status lmq_workspace_reserve_threads(lmq_workspace *ws, lmq_type wtype, int64_t n_in, int64_t max_tok,
                                         int n_threads);
/* Packs nr <= 16 rows (w + r * w_row bytes) into a panel; rows nr..15 are
 * zero. */
void lmq_panel_pack(lmq_type t, lmq_unpack_fn unpack, const void *w, int64_t w_row, int nr, int64_t n_in,
                    void *panel);
/* Biases one activation row's quants by +128 in place (flips their sign bits). */
void lmq_panel_bias_act(lmq_type wtype, void *act, int64_t n_in);
/* Repacks 16 rows (w + r * w_row bytes) of q4_0, q8_0, iq4_nl or MXFP4 into
 * n_in / 32 repacked blocks at out (lmq_rpanel4 / lmq_rpanel8 /
 * lmq_rpanelmx), of q4_K into n_in / 256 lmq_rpanelk4, iq4_xs into
 * lmq_rpanelx4, q5_K into lmq_rpanelq5, q6_K into lmq_rpanelq6, q2_K into
 * lmq_rpanelq2, q3_K into lmq_rpanelq3, q5_0 into lmq_rpanel5. */
void lmq_rpanel_pack(lmq_type t, const void *w, int64_t w_row, int64_t n_in, void *out);
/* Bytes of one repacked block (32 or 256 elements) of 16 rows of type t. */
int64_t lmq_rpanel_block_bytes(lmq_type t);
/* The scalar reference of rpanel_gemm. */
void lmq_rpanel_gemm_ref(lmq_type t, int64_t nb, const void *chunk, const void *act, int64_t a_stride,
                         const int32_t *asum, int nt, float *y, int64_t y_stride, int nr);
/* fpanel_pack and fpanel_gemm with AVX2 (x86/panel_avx2.c; the AVX-512
 * table's too: measured faster on Zen 4 than a 512-bit kernel, PERF.md). */
void lmq_fpanel_pack_avx2(const float *rows, int64_t row_stride, int nr, int64_t n_in, float *panel);
void lmq_fpanel_gemm_avx2(int64_t n_in, int np, const float *panels, const float *x, int64_t x_stride, int nt,
                          float *y, int64_t y_stride, int nr);
/* The scalar references of fpanel_pack and fpanel_gemm. */
void lmq_fpanel_pack_ref(const float *rows, int64_t row_stride, int nr, int64_t n_in, float *panel);
void lmq_fpanel_gemm_ref(int64_t n_in, int np, const float *panels, const float *x, int64_t x_stride, int nt, float *y,
                         int64_t y_stride, int nr);
/* Per-block sums of the quants of one q8_0 activation row. */
void lmq_q8_0_block_sums(const void *act, int64_t nb, int32_t *sums);
/* Per super-block of one q8_K row, 4 words: the sums of quants 64p..64p+31
 * (low int16) and 64p+32..64p+63 (high int16), p = 0..3. */
void lmq_q8_K_pair_sums(const void *act, int64_t nb, int32_t *sums);
/* The scalar reference of panel_gemm. */
void lmq_panel_gemm_ref(lmq_type wtype, int64_t n_in, const void *panel, const void *act, int64_t a_stride, int nt,
                        float *y, int64_t y_stride, int nr);
void lmq_kernels_fill_attn_avx2(lmq_kernel_table *t);   /* x86/attn_avx2.c */
void lmq_kernels_fill_attn_avx512(lmq_kernel_table *t); /* x86/attn_avx512.c */
void lmq_kernels_fill_attn_neon(lmq_kernel_table *t);   /* arm/attn_neon.c */
void lmq_kernels_fill_recurrent_avx2(lmq_kernel_table *t);   /* x86/recurrent_avx2.c */
void lmq_kernels_fill_recurrent_avx512(lmq_kernel_table *t); /* x86/recurrent_avx512.c */
void lmq_kernels_fill_recurrent_neon(lmq_kernel_table *t);   /* arm/recurrent_neon.c */

/* ---- shared scalar helpers ------------------------------------------- */

/* The E8M0 block scale of the fp8 types: 2^(e - 127), 0xFF = NaN. */
static inline float lmq_e8m0_to_fp32(uint8_t e)
{
    uint32_t bits;
    float f;
    if (e == 0xFF) {
        bits = 0x7FC00000u;
    } else if (e == 0) {
        bits = 0x00400000u; /* 2^-127, a subnormal */
    } else {
        bits = (uint32_t)e << 23;
    }
    memcpy(&f, &bits, 4);
    return f;
}

/* 6-bit scale j and min j of a q4_K / q5_K block (K_SCALE_SIZE packing). */
static inline void lmq_k4_scale_min(int j, const uint8_t *q, uint8_t *d, uint8_t *m)
{
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* All 8 scales (bytes 0..7 of u) and 8 mins (bytes 8..15) of a q4_K / q5_K
 * block, unpacked with 32-bit operations (same values as
 * lmq_k4_scale_min). SIMD code builds vectors from the four words in
 * registers: storing them and reloading as one vector would stall on
 * store-to-load forwarding. */
static inline void lmq_k4_unpack_u32(const uint8_t *q, uint32_t u[4])
{
    uint32_t a0, a1, a2;
    memcpy(&a0, q, 4);
    memcpy(&a1, q + 4, 4);
    memcpy(&a2, q + 8, 4);
    const uint32_t k1 = 0x3f3f3f3fu, k2 = 0x0f0f0f0fu, k3 = 0x03030303u;
    u[0] = a0 & k1;
    u[1] = (a2 & k2) | (((a0 >> 6) & k3) << 4);
    u[2] = a1 & k1;
    u[3] = ((a2 >> 4) & k2) | (((a1 >> 6) & k3) << 4);
}

/* The 16 6-bit scales of a q3_K block as bytes 0..15 of a[], biased by
 * +32 (subtract 32 for the signed scale). */
static inline void lmq_q3k_scales_u32(const uint8_t *s12, uint32_t a[4])
{
    uint32_t a0, a1, a2;
    memcpy(&a0, s12, 4);
    memcpy(&a1, s12 + 4, 4);
    memcpy(&a2, s12 + 8, 4);
    const uint32_t k1 = 0x03030303u, k2 = 0x0f0f0f0fu;
    a[0] = (a0 & k2) | ((a2 & k1) << 4);
    a[1] = (a1 & k2) | (((a2 >> 2) & k1) << 4);
    a[2] = ((a0 >> 4) & k2) | (((a2 >> 4) & k1) << 4);
    a[3] = ((a1 >> 4) & k2) | (((a2 >> 6) & k1) << 4);
}

/* The 16 signed 6-bit scales of a q3_K block (values -32..31). */
static inline void lmq_q3k_scales(const uint8_t *s12, int8_t out[16])
{
    uint32_t a[4];
    lmq_q3k_scales_u32(s12, a);
    memcpy(out, a, 16);
    for (int i = 0; i < 16; i++) out[i] = (int8_t)(out[i] - 32);
}

/* ---- the scalar reference kernels (kernels/ref.c) --------------------- */

void lmq_vec_dot_f32_ref(int64_t n, float *s, const void *w, const void *a);
void lmq_vec_dot_f16_ref(int64_t n, float *s, const void *w, const void *a);
void lmq_vec_dot_bf16_ref(int64_t n, float *s, const void *w, const void *a);
void lmq_vec_dot_q4_0_ref(int64_t n, float *s, const void *w, const void *a);
void lmq_vec_dot_q4_1_ref(int64_t n, float *s, const void *w, const void *a);
void lmq_vec_dot_q5_0_ref(int64_t n, float *s, const void *w, const void *a);
void lmq_vec_dot_q5_1_ref(int64_t n, float *s, const void *w, const void *a);
void lmq_vec_dot_q8_0_ref(int64_t n, float *s, const void *w, const void *a);
void lmq_vec_dot_q2_K_ref(int64_t n, float *s, const void *w, const void *a);
void lmq_vec_dot_q3_K_ref(int64_t n, float *s, const void *w, const void *a);
void lmq_vec_dot_q4_K_ref(int64_t n, float *s, const void *w, const void *a);
void lmq_vec_dot_q5_K_ref(int64_t n, float *s, const void *w, const void *a);
void lmq_vec_dot_q6_K_ref(int64_t n, float *s, const void *w, const void *a);
void lmq_vec_dot_iq4_nl_ref(int64_t n, float *s, const void *w, const void *a);
void lmq_vec_dot_iq4_xs_ref(int64_t n, float *s, const void *w, const void *a);
void lmq_vec_dot_f8_e4m3_ref(int64_t n, float *s, const void *w, const void *a);
void lmq_vec_dot_f8_e5m2_ref(int64_t n, float *s, const void *w, const void *a);
void lmq_vec_dot_mxfp4_ref(int64_t n, float *s, const void *w, const void *a);
/* The codebook and ternary types (lmq_iq_unpack, q8_K activations). */
void lmq_vec_dot_iq_ref(lmq_type t, int64_t n, float *s, const void *w, const void *a);
void lmq_vec_dot_iq2_xxs_ref(int64_t n, float *s, const void *w, const void *a);
void lmq_vec_dot_iq2_xs_ref(int64_t n, float *s, const void *w, const void *a);
void lmq_vec_dot_iq2_s_ref(int64_t n, float *s, const void *w, const void *a);
void lmq_vec_dot_iq3_xxs_ref(int64_t n, float *s, const void *w, const void *a);
void lmq_vec_dot_iq3_s_ref(int64_t n, float *s, const void *w, const void *a);
void lmq_vec_dot_iq1_s_ref(int64_t n, float *s, const void *w, const void *a);
void lmq_vec_dot_iq1_m_ref(int64_t n, float *s, const void *w, const void *a);
void lmq_vec_dot_tq1_0_ref(int64_t n, float *s, const void *w, const void *a);
void lmq_vec_dot_tq2_0_ref(int64_t n, float *s, const void *w, const void *a);

void lmq_quantize_q8_0_ref(const float *x, void *y, int64_t n);
void lmq_quantize_q8_1_ref(const float *x, void *y, int64_t n);
void lmq_quantize_q8_K_ref(const float *x, void *y, int64_t n);

float lmq_dot_f32_ref(const float *a, const float *b, int64_t n);
float lmq_dot_f16_f32_ref(const uint16_t *a, const float *b, int64_t n);
void lmq_axpy_f32_ref(float *y, float alpha, const float *x, int64_t n);
void lmq_axpy_f16_ref(float *y, float alpha, const uint16_t *x, int64_t n);
float lmq_softmax_ref(float *x, int64_t n);
/* Scalar oracle of lmq_attn (attn.c): double-precision dots and softmax. */
void lmq_attn_ref(const lmq_attn_args *a);
/* Scalar oracles of lmq_delta_rule and lmq_ssm_conv (recurrent.c): float
 * arithmetic in the order the comments there give. */
void lmq_delta_rule_ref(const lmq_delta_args *a);
void lmq_ssm_conv_ref(const lmq_conv_args *a);

#endif /* LMQ_KERNELS_H */
