/* MXFP4 (OCP Microscaling, 4-bit E2M1 elements): ggml's block_mxfp4, the
 * format of gpt-oss's expert weights. A block of 32 is one E8M0 byte e and
 * 16 bytes of codes; element j is lmq_mxfp4_values[code] * 2^(e - 128)
 * (the doubled E2M1 values times half the E8M0 scale, as ggml stores it).
 *
 * Without importance weights the quantizer is ggml's quantize_row_mxfp4_ref
 * (ik_llama.cpp iqk_quantize.cpp, quantize_row_mxfp4_impl): the exponent
 * from floorf(log2f(amax)), each element the first of the 16 values at the
 * smallest |x - d v| in code order, so the bytes equal llama-quantize's.
 * With weights the exponent is searched (one step either side). */
#include "quant_internal.h"

const int8_t lmq_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

void lmq_q_mxfp4_to_float(const void *vx, float *y, int64_t n)
{
    const lmq_block_mxfp4 *x = vx;
    for (int64_t i = 0; i < n / LMQ_QK_MXFP4; i++, y += LMQ_QK_MXFP4) {
        const float d = lmq_mxfp4_scale(x[i].e);
        for (int j = 0; j < LMQ_QK_MXFP4 / 2; j++) {
            y[j] = d * (float)lmq_mxfp4_values[x[i].qs[j] & 0x0F];
            y[j + 16] = d * (float)lmq_mxfp4_values[x[i].qs[j] >> 4];
        }
    }
}

/* ggml's best_index_mxfp4, as written there: of the 16 codes in order,
 * the first with the smallest float |x - d v| (d v is exact; on a tie,
 * also one the subtraction's rounding makes, the earlier code: the smaller
 * magnitude, never code 8). A search of the two values bracketing |x|
 * picks the same codes for |x| < 32 d and measured only 25% quicker, so
 * the literal scan stays. */
static inline int best_code(float d, float x)
{
    float best = fabsf(x - d * (float)lmq_mxfp4_values[0]);
    int code = 0;
    for (int k = 1; k < 16; k++) {
        const float diff = fabsf(x - d * (float)lmq_mxfp4_values[k]);
        if (diff < best) {
            best = diff;
            code = k;
        }
    }
    return code;
}

/* ggml's exponent: (uint8_t)(floorf(log2f(amax)) - 2 + 127), which puts
 * amax / d in [8, 16). log2f as ggml calls it (its rounding decides amax
 * just below a power of two). ggml's conversion is undefined below 2^-125
 * (a negative value to uint8_t); lmq clamps to 0 there. */
static int ggml_exponent(float amax)
{
    const float e = floorf(log2f(amax)) - 2.0f + 127.0f;
    return e < 0.0f ? 0 : e > 255.0f ? 255 : (int)e;
}

/* Codes of one block at exponent e; returns sum w (x - x')^2 (w NULL: not
 * computed). */
static float encode_block(const float *x, const float *w, int e, uint8_t *qs)
{
    const float d = lmq_mxfp4_scale((uint8_t)e);
    float err = 0.0f;
    for (int j = 0; j < LMQ_QK_MXFP4 / 2; j++) {
        const int c0 = best_code(d, x[j]), c1 = best_code(d, x[j + 16]);
        qs[j] = (uint8_t)(c0 | c1 << 4);
        if (w) {
            const float e0 = x[j] - d * (float)lmq_mxfp4_values[c0];
            const float e1 = x[j + 16] - d * (float)lmq_mxfp4_values[c1];
            err += w[j] * e0 * e0 + w[j + 16] * e1 * e1;
        }
    }
    return err;
}

void lmq_q_mxfp4_from_float(const float *x, void *vy, int64_t n, const float *qw)
{
    lmq_block_mxfp4 *y = vy;
    float w[LMQ_QK_MXFP4];
    for (int64_t i = 0; i < n / LMQ_QK_MXFP4; i++, x += LMQ_QK_MXFP4) {
        float amax = 0.0f;
        for (int j = 0; j < LMQ_QK_MXFP4; j++) amax = fmaxf(amax, fabsf(x[j]));
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const int e = ggml_exponent(amax);
        if (!qw) {
            y[i].e = (uint8_t)e;
            encode_block(x, NULL, e, y[i].qs);
            continue;
        }
        /* weighted: ggml's weighting as for iq4_nl, w = imatrix * sqrt(sigma^2
         * + x^2); of e - 1 (finer, the largest values saturate), e and e + 1
         * (no saturation) the lowest weighted error, ggml's e on a tie */
        const float sigma2 = 2.0f * lmq_sum_sq(x, LMQ_QK_MXFP4) / LMQ_QK_MXFP4;
        for (int j = 0; j < LMQ_QK_MXFP4; j++) w[j] = qw[i * LMQ_QK_MXFP4 + j] * sqrtf(sigma2 + x[j] * x[j]);
        y[i].e = (uint8_t)e;
        float best = encode_block(x, w, e, y[i].qs);
        for (int k = -1; k <= 1; k += 2) {
            if (e + k < 0 || e + k > 254) continue;
            uint8_t qs[LMQ_QK_MXFP4 / 2];
            const float err = encode_block(x, w, e + k, qs);
            if (err < best) {
                best = err;
                y[i].e = (uint8_t)(e + k);
                memcpy(y[i].qs, qs, sizeof qs);
            }
        }
    }
}

/* ======================================================================
 * Grid of a stored block (error feedback, gptq.c): the values in
 * ascending order (zero twice, as the grid search wants 16) and the code
 * of each; the stored codes never use 8 (-0), as ggml's quantizer.
 * ====================================================================== */

static const int8_t mxfp4_sorted[16] = {-12, -8, -6, -4, -3, -2, -1, 0, 0, 1, 2, 3, 4, 6, 8, 12};
static const uint8_t mxfp4_sorted_code[16] = {15, 14, 13, 12, 11, 10, 9, 0, 0, 1, 2, 3, 4, 5, 6, 7};

void lmq_q_mxfp4_grid(const void *vx, lmq_qgrid *g)
{
    const float d = lmq_mxfp4_scale(((const lmq_block_mxfp4 *)vx)->e);
    *g = (lmq_qgrid){.n = LMQ_QK_MXFP4, .nq = 16, .voff = 0, .table = mxfp4_sorted};
    for (int l = 0; l < LMQ_QK_MXFP4; l++) {
        g->a[l] = d;
        g->b[l] = 0.0f;
    }
}

void lmq_q_mxfp4_codes(void *vy, const uint8_t *L)
{
    lmq_block_mxfp4 *y = vy;
    for (int j = 0; j < LMQ_QK_MXFP4 / 2; j++)
        y->qs[j] = (uint8_t)(mxfp4_sorted_code[L[j]] | mxfp4_sorted_code[L[j + 16]] << 4);
}
