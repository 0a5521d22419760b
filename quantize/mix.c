/* Mixes: which type each tensor of a model gets under `lmq quantize --type MIX`.
 *
 * The rules reproduce llama.cpp's llama_tensor_get_type() for Llama models as
 * of commit c392e509 (2025-02-20), written here as data: a table of tensor
 * categories (name patterns), a table of rule rows (category, mixes, layer
 * predicate, type), and a table of row-length fallbacks. docs/QUANT.md,
 * "Mixes", lists the same rules in prose.
 *
 * Facts of llama.cpp's implementation that the plan reproduces:
 *   - only tensors whose name ends in "weight", with >= 2 dimensions and not
 *     a norm, the router or an ssm_conv1d kernel are quantized; the rest keep
 *     their (float) type;
 *   - tensors are visited ordered by layer number ("blk.N.", non-layer
 *     tensors first) then by name, and the layer index the attn_v rules use
 *     is a running count of attn_v tensors in that order (i_attention_wv);
 *     ffn_down likewise (i_ffn_down), against n_layer from the metadata;
 *   - a model without output.weight (tied embeddings) treats token_embd as
 *     the output head;
 *   - a type whose block does not divide the row length falls back to a
 *     32-block type, and to f16 when even that does not fit.
 *
 * One rule is lmq's: a tensor that is MXFP4 already (gpt-oss's experts, as
 * released) stays MXFP4 in every mix, the float ones included, unless an
 * override (--tensor-type, or the output / token-embedding type) names
 * another type. llama.cpp refuses to requantize MXFP4 (its q8_0 GGUFs of
 * gpt-oss keep the experts with --tensor-type ...=mxfp4); lmq keeps them
 * without being told.
 */
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lmq_quant.h"

/* ====================================================================
 * The mixes
 * ==================================================================== */

enum {
    MIX_Q2_K, MIX_Q3_K_S, MIX_Q3_K_M, MIX_Q3_K_L, MIX_Q4_K_S, MIX_Q4_K_M, MIX_Q5_K_S,
    MIX_Q5_K_M, MIX_Q6_K, MIX_Q8_0, MIX_Q4_0, MIX_Q4_1, MIX_Q5_0, MIX_Q5_1, MIX_IQ4_NL,
    MIX_IQ4_XS, MIX_TQ1_0, MIX_TQ2_0, MIX_F8_E4M3, MIX_F8_E5M2, MIX_F16, MIX_BF16, MIX_F32, MIX_COUNT
};

typedef struct mix_row {
    lmq_mix_info info;
    bool llama_rules; /* llama.cpp's promotions apply (its quantized ftypes) */
} mix_row;

static const mix_row k_mixes[MIX_COUNT] = {
    [MIX_Q2_K] = {{"q2_k", LMQ_TYPE_Q2_K, 10, "2.6 bpw base, q3_K/q4_K attn_v, q3_K ffn_down/attn_output"}, true},
    [MIX_Q3_K_S] = {{"q3_k_s", LMQ_TYPE_Q3_K, 11, "q3_K everywhere but the output head"}, true},
    [MIX_Q3_K_M] = {{"q3_k_m", LMQ_TYPE_Q3_K, 12, "q3_K, attn_v q5_K/q4_K, ffn_down and attn_output q4_K+"}, true},
    [MIX_Q3_K_L] = {{"q3_k_l", LMQ_TYPE_Q3_K, 13, "q3_K, attn_v/ffn_down/attn_output q5_K"}, true},
    [MIX_Q4_K_S] = {{"q4_k_s", LMQ_TYPE_Q4_K, 14, "q4_K, first attn_v/ffn_down layers q5_K"}, true},
    [MIX_Q4_K_M] = {{"q4_k_m", LMQ_TYPE_Q4_K, 15, "q4_K, half of attn_v/ffn_down q6_K (recommended)"}, true},
    [MIX_Q5_K_S] = {{"q5_k_s", LMQ_TYPE_Q5_K, 16, "q5_K everywhere but the output head"}, true},
    [MIX_Q5_K_M] = {{"q5_k_m", LMQ_TYPE_Q5_K, 17, "q5_K, half of attn_v/ffn_down q6_K"}, true},
    [MIX_Q6_K] = {{"q6_k", LMQ_TYPE_Q6_K, 18, "q6_K everywhere"}, true},
    [MIX_Q8_0] = {{"q8_0", LMQ_TYPE_Q8_0, 7, "q8_0 everywhere"}, true},
    [MIX_Q4_0] = {{"q4_0", LMQ_TYPE_Q4_0, 2, "q4_0, output head q6_K"}, true},
    [MIX_Q4_1] = {{"q4_1", LMQ_TYPE_Q4_1, 3, "q4_1, output head q6_K"}, true},
    [MIX_Q5_0] = {{"q5_0", LMQ_TYPE_Q5_0, 8, "q5_0, output head q6_K"}, true},
    [MIX_Q5_1] = {{"q5_1", LMQ_TYPE_Q5_1, 9, "q5_1, output head q6_K"}, true},
    [MIX_IQ4_NL] = {{"iq4_nl", LMQ_TYPE_IQ4_NL, 25, "non-linear 4-bit, 32-blocks"}, true},
    [MIX_IQ4_XS] = {{"iq4_xs", LMQ_TYPE_IQ4_XS, 30, "non-linear 4-bit, 256-blocks, 4.25 bpw"}, true},
    [MIX_TQ1_0] = {{"tq1_0", LMQ_TYPE_TQ1_0, 36, "ternary, 1.69 bpw (for ternary-trained models), token_embd q4_K"}, true},
    [MIX_TQ2_0] = {{"tq2_0", LMQ_TYPE_TQ2_0, 37, "ternary, 2.06 bpw (for ternary-trained models), token_embd q4_K"}, true},
    [MIX_F8_E4M3] = {{"f8_e4m3", LMQ_TYPE_F8_E4M3, -1, "fp8 e4m3 with a power-of-two scale per 32 (lmq only)"}, false},
    [MIX_F8_E5M2] = {{"f8_e5m2", LMQ_TYPE_F8_E5M2, -1, "fp8 e5m2 with a power-of-two scale per 32 (lmq only)"}, false},
    [MIX_F16] = {{"f16", LMQ_TYPE_F16, 1, "IEEE half precision"}, false},
    [MIX_BF16] = {{"bf16", LMQ_TYPE_BF16, 32, "bfloat16"}, false},
    [MIX_F32] = {{"f32", LMQ_TYPE_F32, 0, "single precision (no loss)"}, false},
};

size_t lmq_mix_count(void)
{
    return MIX_COUNT;
}

const lmq_mix_info *lmq_mix_at(size_t i)
{
    return i < MIX_COUNT ? &k_mixes[i].info : NULL;
}

static char g_names[256];
static pthread_once_t g_names_once = PTHREAD_ONCE_INIT;

static void build_names(void)
{
    size_t len = 0;
    for (size_t i = 0; i < MIX_COUNT && len < sizeof g_names; i++)
        len += (size_t)snprintf(g_names + len, sizeof g_names - len, "%s%s", i ? ", " : "",
                                k_mixes[i].info.name);
}

const char *lmq_mix_names(void)
{
    pthread_once(&g_names_once, build_names);
    return g_names;
}

lmq_status lmq_mix_from_name(const char *name, const lmq_mix_info **out)
{
    for (size_t i = 0; name && i < MIX_COUNT; i++) {
        if (!strcasecmp(name, k_mixes[i].info.name)) {
            *out = &k_mixes[i].info;
            return LMQ_OK;
        }
    }
    /* llama-quantize's codebook mixes: files of them run, lmq writes none yet */
    static const char *const k_read_only[] = {"iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq2_m",
                                              "iq3_xxs", "iq3_xs", "iq3_s", "iq3_m"};
    for (size_t i = 0; name && i < sizeof k_read_only / sizeof k_read_only[0]; i++)
        if (!strcasecmp(name, k_read_only[i]))
            return lmq_error(LMQ_ERR_UNSUPPORTED,
                             "'%s' is llama.cpp's %s mix: lmq runs such files but cannot write its codebook types "
                             "yet; at that size use --target-bpw or --target-size (K-quants, with --imatrix), or --type "
                             "q2_k / q3_k_s",
                             name, name);
    return lmq_error(LMQ_ERR_INVALID_ARG, "unknown quantization type '%s' (valid: %s)",
                     name ? name : "(null)", lmq_mix_names());
}

static size_t mix_index(const lmq_mix_info *m)
{
    return (size_t)((const mix_row *)(const void *)m - k_mixes);
}

static bool mix_is_known(const lmq_mix_info *m)
{
    for (size_t i = 0; i < MIX_COUNT; i++)
        if (m == &k_mixes[i].info) return true;
    return false;
}

/* ====================================================================
 * Tensor categories (llama.cpp's name tests, in its order)
 * ==================================================================== */

enum {
    CAT_OUTPUT, CAT_TOKEN_EMBD, CAT_ATTN_V, CAT_ATTN_K, CAT_ATTN_Q, CAT_FFN_DOWN,
    CAT_ATTN_OUTPUT, CAT_ATTN_QKV, CAT_FFN_GATE, CAT_FFN_UP, CAT_OTHER,
    CAT_PLE_EMBD /* Gemma 4's per-layer token table: a token table (ik_llama.cpp's llama-quantize.cpp) */
};

static const struct {
    const char *pattern;
    bool exact; /* whole name, else substring */
    int cat;
} k_categories[] = {
    {"output.weight", true, CAT_OUTPUT},
    {"token_embd.weight", true, CAT_TOKEN_EMBD},
    {"per_layer_token_embd.weight", true, CAT_PLE_EMBD},
    {"attn_v.weight", false, CAT_ATTN_V},
    {"attn_k.weight", false, CAT_ATTN_K},
    {"attn_q.weight", false, CAT_ATTN_Q},
    {"ffn_down", false, CAT_FFN_DOWN},
    {"attn_output.weight", false, CAT_ATTN_OUTPUT},
    {"attn_qkv.weight", false, CAT_ATTN_QKV},
    {"ffn_gate", false, CAT_FFN_GATE},
    {"ffn_up", false, CAT_FFN_UP},
};

static int category_of(const char *name, bool tied)
{
    for (size_t i = 0; i < sizeof k_categories / sizeof k_categories[0]; i++) {
        bool hit = k_categories[i].exact ? !strcmp(name, k_categories[i].pattern)
                                         : strstr(name, k_categories[i].pattern) != NULL;
        if (hit) {
            /* tied embeddings: the token table doubles as the output head */
            if (k_categories[i].cat == CAT_TOKEN_EMBD && tied) return CAT_OUTPUT;
            return k_categories[i].cat;
        }
    }
    return CAT_OTHER;
}

/* Names llama.cpp never quantizes even when 2-D: norms, the router, and the
 * small conv1d kernels of recurrent layers (ggml's ssm_conv is f32 only).
 * The other Gated DeltaNet matrices (attn_qkv, attn_gate, ssm_alpha,
 * ssm_beta, ssm_out) follow the base type and the attn_qkv rules. */
static const char *const k_never_quantized[] = {"_norm.weight", "ffn_gate_inp.weight", "ssm_conv1d"};

bool lmq_mix_is_quantizable(const char *name, uint32_t n_dims)
{
    if (n_dims < 2 || !name) return false;
    size_t len = strlen(name);
    if (len < 6 || strcmp(name + len - 6, "weight") != 0) return false;
    for (size_t i = 0; i < sizeof k_never_quantized / sizeof k_never_quantized[0]; i++)
        if (strstr(name, k_never_quantized[i])) return false;
    return true;
}

/* ====================================================================
 * The rules
 * ==================================================================== */

/* Layer predicates. i = the tensor's running index within its category
 * (see the header comment), n = its count, as llama.cpp uses them. */
enum {
    P_ALL,
    P_GQA4,         /* n_head / n_head_kv >= 4 */
    P_I_LT_2,       /* i < 2 */
    P_I_LT_4,       /* i < 4 */
    P_FIRST_8TH,    /* i < n/8 */
    P_FIRST_16TH,   /* i < n/16 */
    P_MORE_BITS,    /* use_more_bits(i, n) */
    P_ROW_NOT_256,  /* row length not a multiple of 256 */
    P_70B,          /* llama.cpp's LLM_TYPE_70B: 80 layers with GQA */
    P_EXPERT8,      /* exactly 8 experts (llama.cpp's Mixtral-8x rules) */
    P_NOT_EXPERT8,
};

#define M(x) (1u << MIX_##x)
#define M_LLAMA_QUANT                                                                    \
    (M(Q2_K) | M(Q3_K_S) | M(Q3_K_M) | M(Q3_K_L) | M(Q4_K_S) | M(Q4_K_M) | M(Q5_K_S) |   \
     M(Q5_K_M) | M(Q6_K) | M(Q8_0) | M(Q4_0) | M(Q4_1) | M(Q5_0) | M(Q5_1) | M(IQ4_NL) | \
     M(IQ4_XS) | M(TQ1_0) | M(TQ2_0))

typedef struct rule_row {
    int cat;
    uint32_t mixes;  /* bit MIX_x set: the row applies to mix x */
    int pred;
    int stage;       /* 0: first matching row of the category wins; 1: applied after, in order */
    lmq_type from;   /* stage 1: only when the stage-0 result is this type */
    lmq_type type;
} rule_row;

#define ANY LMQ_TYPE_COUNT
static const rule_row k_rules[] = {
    /* output head (and token_embd when tied) */
    {CAT_OUTPUT, M_LLAMA_QUANT, P_ROW_NOT_256, 0, ANY, LMQ_TYPE_Q8_0},
    {CAT_OUTPUT, M_LLAMA_QUANT & ~M(Q8_0), P_ALL, 0, ANY, LMQ_TYPE_Q6_K},
    /* the ternary mixes' embedding (llama.cpp: q4_K) */
    {CAT_TOKEN_EMBD, M(TQ1_0) | M(TQ2_0), P_ALL, 0, ANY, LMQ_TYPE_Q4_K},

    /* attn_v */
    {CAT_ATTN_V, M(Q2_K), P_GQA4, 0, ANY, LMQ_TYPE_Q4_K},
    {CAT_ATTN_V, M(Q2_K), P_ALL, 0, ANY, LMQ_TYPE_Q3_K},
    {CAT_ATTN_V, M(Q3_K_M), P_I_LT_2, 0, ANY, LMQ_TYPE_Q5_K},
    {CAT_ATTN_V, M(Q3_K_M), P_ALL, 0, ANY, LMQ_TYPE_Q4_K},
    {CAT_ATTN_V, M(Q3_K_L), P_ALL, 0, ANY, LMQ_TYPE_Q5_K},
    {CAT_ATTN_V, M(IQ4_NL) | M(IQ4_XS), P_GQA4, 0, ANY, LMQ_TYPE_Q5_K},
    {CAT_ATTN_V, M(Q4_K_M) | M(Q5_K_M), P_MORE_BITS, 0, ANY, LMQ_TYPE_Q6_K},
    {CAT_ATTN_V, M(Q4_K_S), P_I_LT_4, 0, ANY, LMQ_TYPE_Q5_K},
    {CAT_ATTN_V, M_LLAMA_QUANT, P_70B, 1, LMQ_TYPE_Q3_K, LMQ_TYPE_Q5_K},
    {CAT_ATTN_V, M_LLAMA_QUANT, P_70B, 1, LMQ_TYPE_Q4_K, LMQ_TYPE_Q5_K},
    {CAT_ATTN_V, M_LLAMA_QUANT, P_EXPERT8, 1, ANY, LMQ_TYPE_Q8_0}, /* after every other attn_v rule */

    /* attn_k: 8-expert models */
    {CAT_ATTN_K, M_LLAMA_QUANT, P_EXPERT8, 0, ANY, LMQ_TYPE_Q8_0},

    /* ffn_down (imatrix-only rules of llama.cpp omitted: lmq passes none) */
    {CAT_FFN_DOWN, M(Q2_K), P_ALL, 0, ANY, LMQ_TYPE_Q3_K},
    {CAT_FFN_DOWN, M(Q3_K_M), P_FIRST_16TH, 0, ANY, LMQ_TYPE_Q5_K},
    {CAT_FFN_DOWN, M(Q3_K_M), P_ALL, 0, ANY, LMQ_TYPE_Q4_K},
    {CAT_FFN_DOWN, M(Q3_K_L), P_ALL, 0, ANY, LMQ_TYPE_Q5_K},
    {CAT_FFN_DOWN, M(Q4_K_M), P_MORE_BITS, 0, ANY, LMQ_TYPE_Q6_K},
    {CAT_FFN_DOWN, M(IQ4_NL) | M(IQ4_XS), P_FIRST_8TH, 0, ANY, LMQ_TYPE_Q5_K},
    {CAT_FFN_DOWN, M(Q5_K_M), P_MORE_BITS, 0, ANY, LMQ_TYPE_Q6_K},
    {CAT_FFN_DOWN, M(Q4_K_S), P_FIRST_8TH, 0, ANY, LMQ_TYPE_Q5_K},

    /* attn_output (8-expert models: their own rule instead of the dense ones) */
    {CAT_ATTN_OUTPUT, M(Q2_K) | M(Q3_K_S) | M(Q3_K_M) | M(IQ4_NL) | M(Q4_K_S) | M(Q4_K_M) | M(IQ4_XS), P_EXPERT8, 0,
     ANY, LMQ_TYPE_Q5_K},
    {CAT_ATTN_OUTPUT, M(Q2_K), P_NOT_EXPERT8, 0, ANY, LMQ_TYPE_Q3_K},
    {CAT_ATTN_OUTPUT, M(Q3_K_M), P_NOT_EXPERT8, 0, ANY, LMQ_TYPE_Q4_K},
    {CAT_ATTN_OUTPUT, M(Q3_K_L), P_NOT_EXPERT8, 0, ANY, LMQ_TYPE_Q5_K},

    /* fused qkv (Phi-3; Qwen3.5's recurrent layers); counted with attn_v in n, not in i */
    {CAT_ATTN_QKV, M(Q3_K_M) | M(Q3_K_L), P_ALL, 0, ANY, LMQ_TYPE_Q4_K},
    {CAT_ATTN_QKV, M(Q4_K_M), P_ALL, 0, ANY, LMQ_TYPE_Q5_K},
    {CAT_ATTN_QKV, M(Q5_K_M), P_ALL, 0, ANY, LMQ_TYPE_Q6_K},
};
#undef ANY

/* Row-length fallbacks: a type whose block does not divide the row length. */
static const struct {
    lmq_type from, to;
} k_fallbacks[] = {
    {LMQ_TYPE_Q2_K, LMQ_TYPE_IQ4_NL}, {LMQ_TYPE_Q3_K, LMQ_TYPE_IQ4_NL},
    {LMQ_TYPE_IQ4_XS, LMQ_TYPE_IQ4_NL}, {LMQ_TYPE_Q4_K, LMQ_TYPE_Q5_0},
    {LMQ_TYPE_Q5_K, LMQ_TYPE_Q5_1},   {LMQ_TYPE_Q6_K, LMQ_TYPE_Q8_0},
    {LMQ_TYPE_TQ1_0, LMQ_TYPE_Q4_0},  {LMQ_TYPE_TQ2_0, LMQ_TYPE_Q4_0}, /* llama.cpp's choice too */
};

static bool fits(lmq_type t, int64_t ne0)
{
    return lmq_row_size(t, ne0) >= 0;
}

lmq_type lmq_mix_fallback(lmq_type t, int64_t ne0)
{
    if (fits(t, ne0)) return t;
    for (size_t i = 0; i < sizeof k_fallbacks / sizeof k_fallbacks[0]; i++)
        if (k_fallbacks[i].from == t && fits(k_fallbacks[i].to, ne0)) return k_fallbacks[i].to;
    /* llama.cpp's last resort; also where it has no fallback (32-block types
     * on rows that are not a multiple of 32, which it refuses) */
    return LMQ_TYPE_F16;
}

typedef struct rule_ctx {
    int i, n;          /* running index within the category and its count */
    int64_t ne0;
    const lmq_mix_model *model;
} rule_ctx;

static bool use_more_bits(int i, int n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

static bool pred_holds(int pred, const rule_ctx *c)
{
    const lmq_mix_model *m = c->model;
    int n_gqa = m->n_head_kv > 0 ? m->n_head / m->n_head_kv : 0;
    switch (pred) {
    case P_ALL: return true;
    case P_GQA4: return n_gqa >= 4;
    case P_I_LT_2: return c->i < 2;
    case P_I_LT_4: return c->i < 4;
    case P_FIRST_8TH: return c->i < c->n / 8;
    case P_FIRST_16TH: return c->i < c->n / 16;
    case P_MORE_BITS: return use_more_bits(c->i, c->n);
    case P_ROW_NOT_256: return c->ne0 % 256 != 0;
    case P_70B: return m->n_layer == 80 && m->n_head_kv > 0 && m->n_head != m->n_head_kv;
    case P_EXPERT8: return m->n_expert == 8;
    case P_NOT_EXPERT8: return m->n_expert != 8;
    default: return false;
    }
}

static lmq_type apply_rules(size_t mix, int cat, lmq_type base, const rule_ctx *c)
{
    lmq_type t = base;
    uint32_t bit = 1u << mix;
    for (size_t r = 0; r < sizeof k_rules / sizeof k_rules[0]; r++) {
        const rule_row *row = &k_rules[r];
        if (row->stage != 0 || row->cat != cat || !(row->mixes & bit) || !pred_holds(row->pred, c))
            continue;
        t = row->type;
        break;
    }
    for (size_t r = 0; r < sizeof k_rules / sizeof k_rules[0]; r++) {
        const rule_row *row = &k_rules[r];
        if (row->stage != 1 || row->cat != cat || !(row->mixes & bit) || (row->from != LMQ_TYPE_COUNT && row->from != t) ||
            !pred_holds(row->pred, c))
            continue;
        t = row->type;
    }
    return t;
}

/* ====================================================================
 * Planning
 * ==================================================================== */

void lmq_mix_model_from_meta(const lmq_meta *m, lmq_mix_model *out)
{
    memset(out, 0, sizeof *out);
    const char *arch = "llama";
    const char *a;
    uint64_t alen;
    if (lmq_meta_get_str(m, "general.architecture", &a, &alen) == LMQ_OK && alen > 0 && alen < 64) arch = a;
    struct {
        const char *suffix;
        int32_t *dst;
    } keys[] = {{"block_count", &out->n_layer},
                {"attention.head_count", &out->n_head},
                {"attention.head_count_kv", &out->n_head_kv},
                {"expert_count", &out->n_expert}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char key[128];
        uint64_t v;
        snprintf(key, sizeof key, "%s.%s", arch, keys[i].suffix);
        if (lmq_meta_get_u64(m, key, &v) == LMQ_OK && v <= 1000000) *keys[i].dst = (int32_t)v;
    }
    /* GGUF allows a per-layer head_count_kv array; absent or odd -> n_head */
    if (out->n_head_kv == 0) out->n_head_kv = out->n_head;
    lmq_error_clear();
}

const char *lmq_mix_why_name(lmq_mix_why w)
{
    static const char *const names[LMQ_MIX_WHY_COUNT] = {
        [LMQ_MIX_WHY_KEEP] = "kept",
        [LMQ_MIX_WHY_BASE] = "base",
        [LMQ_MIX_WHY_RULE] = "rule",
        [LMQ_MIX_WHY_OUTPUT] = "--output-tensor-type",
        [LMQ_MIX_WHY_TOKEN_EMBD] = "--token-embedding-type",
        [LMQ_MIX_WHY_OVERRIDE] = "--tensor-type",
    };
    return (unsigned)w < LMQ_MIX_WHY_COUNT ? names[w] : "?";
}

bool lmq_mix_type_storable(lmq_type t)
{
    /* q8_1 and q8_K are activation formats of the dot-product kernels; the
     * codebook types are read, not written */
    return lmq_type_get(t) != NULL && t != LMQ_TYPE_Q8_1 && t != LMQ_TYPE_Q8_K && lmq_type_can_quantize(t);
}

/* Layer number of "blk.N.xxx", -1 for other names (llama.cpp's order key). */
static long layer_of(const char *name)
{
    if (strncmp(name, "blk.", 4) != 0) return -1;
    char *end;
    long v = strtol(name + 4, &end, 10);
    if (end == name + 4 || v < 0) return -1;
    return v;
}

typedef struct order_key {
    long layer;
    const char *name;
    size_t idx;
} order_key;

static int cmp_order(const void *pa, const void *pb)
{
    const order_key *a = pa, *b = pb;
    if (a->layer != b->layer) return a->layer < b->layer ? -1 : 1;
    return strcmp(a->name, b->name);
}

static bool is_float_type(lmq_type t)
{
    const lmq_type_traits *tt = lmq_type_get(t);
    return tt && !tt->quantized;
}

lmq_status lmq_mix_plan(const lmq_mix_opts *opts, const lmq_mix_model *model_in,
                        const lmq_mix_tensor *tensors, size_t n, lmq_mix_entry *out,
                        size_t *override_hits)
{
    if (!opts || !opts->mix || !mix_is_known(opts->mix) || (n && (!tensors || !out)) ||
        (opts->n_overrides && !opts->overrides))
        return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_mix_plan: bad arguments");
    const size_t mix = mix_index(opts->mix);
    const lmq_type base = opts->mix->base;
    const lmq_type user_types[2] = {opts->output_type, opts->token_embd_type};
    for (int k = 0; k < 2; k++)
        if (user_types[k] != LMQ_TYPE_COUNT && !lmq_mix_type_storable(user_types[k]))
            return lmq_error(LMQ_ERR_INVALID_ARG, "%s: type %s cannot be stored",
                             k ? "--token-embedding-type" : "--output-tensor-type",
                             lmq_type_name(user_types[k]));

    lmq_status s = LMQ_OK;
    regex_t *re = NULL;
    size_t n_re = 0;
    order_key *order = NULL;
    int *running = NULL;
    if (opts->n_overrides) {
        re = calloc(opts->n_overrides, sizeof *re);
        if (!re) return lmq_error(LMQ_ERR_NOMEM, "lmq_mix_plan: out of memory");
    }
    for (; n_re < opts->n_overrides; n_re++) {
        const lmq_mix_override *o = &opts->overrides[n_re];
        if (!o->pattern) {
            s = lmq_error(LMQ_ERR_INVALID_ARG, "--tensor-type: missing pattern");
            goto out;
        }
        if (!lmq_mix_type_storable(o->type)) {
            s = lmq_error(LMQ_ERR_INVALID_ARG, "--tensor-type %s: type %s cannot be stored", o->pattern,
                          lmq_type_name(o->type));
            goto out;
        }
        int rc = regcomp(&re[n_re], o->pattern, REG_EXTENDED | REG_NOSUB);
        if (rc != 0) {
            char msg[160];
            regerror(rc, &re[n_re], msg, sizeof msg);
            s = lmq_error(LMQ_ERR_INVALID_ARG, "--tensor-type: bad regular expression '%s': %s", o->pattern, msg);
            goto out;
        }
    }
    if (override_hits) memset(override_hits, 0, opts->n_overrides * sizeof *override_hits);

    /* model facts the tensor list supplies */
    lmq_mix_model model = *model_in;
    bool tied = true;
    long max_layer = -1;
    int n_attn_v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!tensors[i].name || tensors[i].n_dims < 1 || tensors[i].n_dims > LMQ_MAX_DIMS) {
            s = lmq_error(LMQ_ERR_INVALID_ARG, "lmq_mix_plan: tensor %zu has no name or a bad rank", i);
            goto out;
        }
        if (!strcmp(tensors[i].name, "output.weight")) tied = false;
        long l = layer_of(tensors[i].name);
        if (l > max_layer) max_layer = l;
    }
    if (model.n_layer <= 0) model.n_layer = max_layer >= 0 && max_layer < 1000000 ? (int32_t)(max_layer + 1) : 0;

    /* running category indices in llama.cpp's visiting order */
    order = malloc((n ? n : 1) * sizeof *order);
    running = malloc((n ? n : 1) * sizeof *running);
    if (!order || !running) {
        s = lmq_error(LMQ_ERR_NOMEM, "lmq_mix_plan: out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) order[i] = (order_key){layer_of(tensors[i].name), tensors[i].name, i};
    qsort(order, n, sizeof *order, cmp_order);
    {
        int count_v = 0, count_down = 0;
        for (size_t k = 0; k < n; k++) {
            size_t i = order[k].idx;
            int cat = category_of(tensors[i].name, tied);
            running[i] = cat == CAT_ATTN_V ? count_v++ : cat == CAT_FFN_DOWN ? count_down++ : 0;
            /* with experts llama.cpp takes ffn_down's layer from the name (a layer may hold
             * ffn_down_exps and ffn_down_shexp) */
            if (cat == CAT_FFN_DOWN && model.n_expert > 1 && order[k].layer >= 0) running[i] = (int)order[k].layer;
            if (cat == CAT_ATTN_V || cat == CAT_ATTN_QKV) n_attn_v++;
        }
    }

    for (size_t i = 0; i < n; i++) {
        const lmq_mix_tensor *t = &tensors[i];
        lmq_mix_entry *e = &out[i];
        memset(e, 0, sizeof *e);
        e->override_index = -1;
        int64_t nel = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            if (t->ne[d] < 0 || (t->ne[d] > 0 && nel > INT64_MAX / t->ne[d])) {
                s = lmq_error(LMQ_ERR_INVALID_ARG, "%s: bad shape", t->name);
                goto out;
            }
            nel *= t->ne[d];
        }
        e->n_elements = nel;

        int cat = category_of(t->name, tied);
        lmq_type want;
        if (!lmq_mix_is_quantizable(t->name, t->n_dims)) {
            want = is_float_type(t->type) ? t->type : LMQ_TYPE_F32;
            e->why = LMQ_MIX_WHY_KEEP;
        } else if (cat == CAT_TOKEN_EMBD || cat == CAT_PLE_EMBD || (cat == CAT_OUTPUT && strcmp(t->name, "output.weight") != 0 &&
                                             opts->token_embd_type != LMQ_TYPE_COUNT)) {
            /* the token table (tied or not) under --token-embedding-type */
            if (opts->token_embd_type != LMQ_TYPE_COUNT) {
                want = opts->token_embd_type;
                e->why = LMQ_MIX_WHY_TOKEN_EMBD;
            } else {
                want = LMQ_TYPE_COUNT;
            }
        } else if (cat == CAT_OUTPUT && opts->output_type != LMQ_TYPE_COUNT) {
            want = opts->output_type;
            e->why = LMQ_MIX_WHY_OUTPUT;
        } else {
            want = LMQ_TYPE_COUNT;
        }
        if (want == LMQ_TYPE_COUNT) {
            for (size_t k = 0; k < n_re; k++) {
                if (regexec(&re[k], t->name, 0, NULL, 0) == 0) {
                    want = opts->overrides[k].type;
                    e->why = LMQ_MIX_WHY_OVERRIDE;
                    e->override_index = (int32_t)k;
                    if (override_hits) override_hits[k]++;
                    break;
                }
            }
        }
        if (want == LMQ_TYPE_COUNT && t->type == LMQ_TYPE_MXFP4) {
            want = LMQ_TYPE_MXFP4; /* kept: see the header */
            e->why = LMQ_MIX_WHY_KEEP;
        }
        if (want == LMQ_TYPE_COUNT) {
            want = base;
            e->why = LMQ_MIX_WHY_BASE;
            if (!opts->pure && k_mixes[mix].llama_rules) {
                rule_ctx c = {running[i], cat == CAT_FFN_DOWN ? model.n_layer : n_attn_v, t->ne[0], &model};
                want = apply_rules(mix, cat, base, &c);
                if (want != base) e->why = LMQ_MIX_WHY_RULE;
            }
        }
        e->wanted = want;
        e->type = lmq_mix_fallback(want, t->ne[0]);
        int64_t bytes = lmq_tensor_nbytes(e->type, t->n_dims, t->ne);
        if (bytes < 0) {
            s = lmq_error(LMQ_ERR_INVALID_ARG, "%s: size overflows", t->name);
            goto out;
        }
        e->bytes = bytes;
    }

out:
    for (size_t k = 0; k < n_re; k++) regfree(&re[k]);
    free(re);
    free(order);
    free(running);
    return s;
}
