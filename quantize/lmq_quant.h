/* lmq_quant.h — the quantize module: block layouts (byte-for-byte ggml's for
 * the ggml types), scalar reference quantize/dequantize for every type, and
 * the per-layer mixes used by `lmq quantize`.
 *
 * Layouts follow ggml-common.h (the de-facto GGUF spec); see docs/QUANT.md.
 * All multi-byte fields are little-endian; f16 fields are IEEE binary16 bits.
 */
#ifndef LMQ_QUANT_H
#define LMQ_QUANT_H

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

/* The 16-value non-linear grid of iq4_nl / iq4_xs. */
extern const int8_t lmq_iq4nl_values[16];

#ifdef __cplusplus
}
#endif
#endif /* LMQ_QUANT_H */
