/* The type table: one row per lmq_type, block geometry matching ggml. */
#include <string.h>
#include <strings.h>

#include "lmq_format.h"

static const lmq_type_traits type_table[LMQ_TYPE_COUNT] = {
    [LMQ_TYPE_F32] = {"f32", 1, 4, false, 0},
    [LMQ_TYPE_F16] = {"f16", 1, 2, false, 1},
    [LMQ_TYPE_BF16] = {"bf16", 1, 2, false, 30},
    [LMQ_TYPE_Q4_0] = {"q4_0", 32, 18, true, 2},
    [LMQ_TYPE_Q4_1] = {"q4_1", 32, 20, true, 3},
    [LMQ_TYPE_Q5_0] = {"q5_0", 32, 22, true, 6},
    [LMQ_TYPE_Q5_1] = {"q5_1", 32, 24, true, 7},
    [LMQ_TYPE_Q8_0] = {"q8_0", 32, 34, true, 8},
    [LMQ_TYPE_Q8_1] = {"q8_1", 32, 36, true, 9},
    [LMQ_TYPE_Q2_K] = {"q2_K", 256, 84, true, 10},
    [LMQ_TYPE_Q3_K] = {"q3_K", 256, 110, true, 11},
    [LMQ_TYPE_Q4_K] = {"q4_K", 256, 144, true, 12},
    [LMQ_TYPE_Q5_K] = {"q5_K", 256, 176, true, 13},
    [LMQ_TYPE_Q6_K] = {"q6_K", 256, 210, true, 14},
    [LMQ_TYPE_Q8_K] = {"q8_K", 256, 292, true, 15},
    [LMQ_TYPE_IQ4_NL] = {"iq4_nl", 32, 18, true, 20},
    [LMQ_TYPE_IQ4_XS] = {"iq4_xs", 256, 136, true, 23},
    [LMQ_TYPE_F8_E4M3] = {"f8_e4m3", 32, 33, true, -1},
    [LMQ_TYPE_F8_E5M2] = {"f8_e5m2", 32, 33, true, -1},
    [LMQ_TYPE_MXFP4] = {"mxfp4", 32, 17, true, 39},
    [LMQ_TYPE_IQ2_XXS] = {"iq2_xxs", 256, 66, true, 16},
    [LMQ_TYPE_IQ2_XS] = {"iq2_xs", 256, 74, true, 17},
    [LMQ_TYPE_IQ2_S] = {"iq2_s", 256, 82, true, 22},
    [LMQ_TYPE_IQ3_XXS] = {"iq3_xxs", 256, 98, true, 18},
    [LMQ_TYPE_IQ3_S] = {"iq3_s", 256, 110, true, 21},
    [LMQ_TYPE_IQ1_S] = {"iq1_s", 256, 50, true, 19},
    [LMQ_TYPE_IQ1_M] = {"iq1_m", 256, 56, true, 29},
    [LMQ_TYPE_TQ1_0] = {"tq1_0", 256, 54, true, 34},
    [LMQ_TYPE_TQ2_0] = {"tq2_0", 256, 66, true, 35},
};

const lmq_type_traits *lmq_type_get(lmq_type t)
{
    if ((unsigned)t >= LMQ_TYPE_COUNT) return NULL;
    return &type_table[t];
}

const char *lmq_type_name(lmq_type t)
{
    const lmq_type_traits *tt = lmq_type_get(t);
    return tt ? tt->name : "?";
}

lmq_status lmq_type_from_name(const char *name, lmq_type *out)
{
    for (int t = 0; name && t < LMQ_TYPE_COUNT; t++) {
        if (!strcasecmp(name, type_table[t].name)) {
            *out = (lmq_type)t;
            return LMQ_OK;
        }
    }
    return lmq_error(LMQ_ERR_NOT_FOUND, "unknown tensor type '%s'", name ? name : "(null)");
}

lmq_status lmq_type_from_ggml(uint32_t ggml_type, lmq_type *out)
{
    for (int t = 0; t < LMQ_TYPE_COUNT; t++) {
        if (type_table[t].ggml_type >= 0 && (uint32_t)type_table[t].ggml_type == ggml_type) {
            *out = (lmq_type)t;
            return LMQ_OK;
        }
    }
    return lmq_error(LMQ_ERR_UNSUPPORTED, "ggml tensor type %u is not supported by lmq",
                     ggml_type);
}

int64_t lmq_row_size(lmq_type t, int64_t n)
{
    const lmq_type_traits *tt = lmq_type_get(t);
    if (!tt || n < 0 || n % tt->block_size) return -1;
    int64_t blocks = n / tt->block_size;
    if (blocks > INT64_MAX / tt->type_size) return -1;
    return blocks * tt->type_size;
}

double lmq_type_bpw(lmq_type t)
{
    const lmq_type_traits *tt = lmq_type_get(t);
    return tt ? 8.0 * tt->type_size / tt->block_size : 0.0;
}

int64_t lmq_tensor_nbytes(lmq_type type, uint32_t n_dims, const int64_t *ne)
{
    if (n_dims < 1 || n_dims > LMQ_MAX_DIMS) return -1;
    int64_t row = lmq_row_size(type, ne[0]);
    if (row < 0) return -1;
    int64_t total = row;
    for (uint32_t i = 1; i < n_dims; i++) {
        if (ne[i] < 0) return -1;
        if (ne[i] != 0 && total > INT64_MAX / ne[i]) return -1;
        total *= ne[i];
    }
    return total;
}
