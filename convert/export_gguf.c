/* .lmq -> GGUF v3 for llama.cpp (docs/GGUF.md).
 *
 * Metadata: every key except lmq's own (lmq.*) is carried over in container
 * order, with the value types llama.cpp's loader insists on (it rejects a
 * u64 where it expects u32); keys llama.cpp needs but the container may
 * lack are derived; general.file_type and general.quantization_version are
 * set. Tensors: copied in container order, quantized blocks unchanged;
 * attn_q/attn_k rows are permuted into llama.cpp's RoPE order for "neox"
 * containers; fp8 tensors are refused or widened to f16/bf16. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "lmq_convert.h"
#include "lmq_quant.h"

/* ====================================================================
 * LLAMA_FTYPE (llama.h) for lmq's type and mix names
 * ==================================================================== */

static const struct {
    const char *name;
    int32_t ftype;
} k_ftypes[] = {
    {"f32", 0},     {"f16", 1},     {"q4_0", 2},    {"q4_1", 3},     {"q8_0", 7},     {"q5_0", 8},
    {"q5_1", 9},    {"q2_k", 10},   {"q3_k_s", 11}, {"q3_k_m", 12},  {"q3_k_l", 13},  {"q4_k_s", 14},
    {"q4_k_m", 15}, {"q5_k_s", 16}, {"q5_k_m", 17}, {"q6_k", 18},    {"q2_k_s", 21},  {"iq4_nl", 25},
    {"iq4_xs", 30}, {"bf16", 32},   {"iq2_xxs", 19}, {"iq2_xs", 20},  {"iq3_xs", 22},  {"iq3_xxs", 23},
    {"iq1_s", 24},  {"iq3_s", 26},  {"iq3_m", 27},  {"iq2_s", 28},   {"iq2_m", 29},   {"iq1_m", 31},
    {"tq1_0", 36},  {"tq2_0", 37},
    /* a bare K type names its _M mix, as llama.cpp's loader guesses it */
    {"q3_k", 12},   {"q4_k", 15},   {"q5_k", 17},
};

int32_t lmq_llama_ftype_from_name(const char *name)
{
    if (!name) return -1;
    for (size_t i = 0; i < sizeof k_ftypes / sizeof k_ftypes[0]; i++)
        if (!strcasecmp(name, k_ftypes[i].name)) return k_ftypes[i].ftype;
    return -1;
}

#define LLAMA_FTYPE_GUESSED 1024

/* general.file_type: the quantizer's mix when it names a llama.cpp ftype;
 * otherwise the container's own value (GGUF imports keep llama.cpp's; lmq
 * quantize sets or removes it with the mix); otherwise the most frequent
 * type among the (output) matrices, as llama.cpp's loader guesses it. */
static uint32_t file_type_of(const lmq_meta *m, const lmq_type *out_types, const lmq_tensor_info *const *ts,
                             size_t n)
{
    const char *mix;
    if (lmq_meta_get_str(m, "lmq.quantize.mix", &mix, NULL) == LMQ_OK) {
        int32_t ft = lmq_llama_ftype_from_name(mix);
        if (ft >= 0) return (uint32_t)ft;
    }
    uint64_t ft;
    if (lmq_meta_get_u64(m, "general.file_type", &ft) == LMQ_OK && ft <= LLAMA_FTYPE_GUESSED)
        return (uint32_t)ft;
    size_t count[LMQ_TYPE_COUNT] = {0};
    for (size_t i = 0; i < n; i++)
        if (ts[i]->n_dims >= 2) count[out_types[i]]++;
    lmq_type best = LMQ_TYPE_F32;
    for (int t = 0; t < LMQ_TYPE_COUNT; t++)
        if (count[t] > count[best]) best = (lmq_type)t;
    int32_t g = lmq_llama_ftype_from_name(lmq_type_name(best));
    return g >= 0 ? (uint32_t)g : LLAMA_FTYPE_GUESSED;
}

/* ====================================================================
 * Metadata
 * ==================================================================== */

typedef enum { K_U32, K_F32, K_BOOL, K_STR, K_ARR_STR, K_ARR_F32, K_ARR_I32 } key_kind;

/* Value types as llama.cpp's converter (gguf-py) writes them. */
static const struct {
    const char *key;
    key_kind kind;
} k_keys[] = {
    {"general.architecture", K_STR},
    {"general.name", K_STR},
    {"general.file_type", K_U32},
    {"general.quantization_version", K_U32},
    {"general.alignment", K_U32},
    {"tokenizer.ggml.model", K_STR},
    {"tokenizer.ggml.pre", K_STR},
    {"tokenizer.ggml.tokens", K_ARR_STR},
    {"tokenizer.ggml.scores", K_ARR_F32},
    {"tokenizer.ggml.token_type", K_ARR_I32},
    {"tokenizer.ggml.merges", K_ARR_STR},
    {"tokenizer.ggml.add_bos_token", K_BOOL},
    {"tokenizer.ggml.add_eos_token", K_BOOL},
    {"tokenizer.ggml.add_space_prefix", K_BOOL},
    {"tokenizer.ggml.remove_extra_whitespaces", K_BOOL},
    {"tokenizer.chat_template", K_STR},
};

/* Keys llama.cpp cannot load a model without (arch-relative ones start with '.'). */
static const char *const k_required[] = {
    "general.architecture",     ".block_count",           ".context_length",
    ".embedding_length",        ".feed_forward_length",   ".attention.head_count",
    ".attention.layer_norm_rms_epsilon", "tokenizer.ggml.model", "tokenizer.ggml.tokens",
};

/* Keys one family's loader requires beyond those (ik_llama.cpp's
 * llama-hparams.cpp reads them without a default). */
static const struct {
    lmq_arch_id arch;
    const char *key;
} k_required_arch[] = {
    {LMQ_ARCH_GPT_OSS, ".expert_feed_forward_length"},
    {LMQ_ARCH_GPT_OSS, ".attention.sliding_window"},
};

/* "<arch><suffix>" for arch-relative key names, the name itself otherwise. */
static const char *arch_key(const char *arch, const char *name, char *buf, size_t cap)
{
    if (name[0] != '.') return name;
    snprintf(buf, cap, "%s%s", arch, name);
    return buf;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* The same for the keys under the architecture's prefix ("<arch>.context_length"). */
static const struct {
    const char *suffix;
    key_kind kind;
} k_arch_keys[] = {
    {"context_length", K_U32},
    {"embedding_length", K_U32},
    {"block_count", K_U32},
    {"feed_forward_length", K_U32},
    {"attention.head_count", K_U32},
    {"attention.head_count_kv", K_U32},
    {"attention.key_length", K_U32},
    {"attention.value_length", K_U32},
    {"attention.layer_norm_rms_epsilon", K_F32},
    {"attention.sliding_window", K_U32},
    {"attention.scale", K_F32},
    {"attn_logit_softcapping", K_F32},
    {"final_logit_softcapping", K_F32},
    {"rope.freq_base", K_F32},
    {"rope.freq_base_swa", K_F32},
    {"rope.dimension_count", K_U32},
    {"vocab_size", K_U32},
    {"rope.scaling.type", K_STR},
    {"rope.scaling.factor", K_F32},
    {"rope.scaling.original_context_length", K_U32},
    {"rope.scaling.attn_factor", K_F32},
    {"rope.scaling.finetuned", K_BOOL},
    {"rope.scaling.yarn_beta_fast", K_F32},
    {"rope.scaling.yarn_beta_slow", K_F32},
    {"rope.dimension_sections", K_ARR_I32},
    {"expert_count", K_U32},
    {"expert_used_count", K_U32},
    {"expert_feed_forward_length", K_U32},
    {"expert_shared_feed_forward_length", K_U32},
    {"ssm.conv_kernel", K_U32},
    {"ssm.state_size", K_U32},
    {"ssm.group_count", K_U32},
    {"ssm.time_step_rank", K_U32},
    {"ssm.inner_size", K_U32},
    {"full_attention_interval", K_U32},
    {"nextn_predict_layers", K_U32},
    {"attention.key_length_swa", K_U32},
    {"attention.value_length_swa", K_U32},
    {"rope.dimension_count_swa", K_U32},
    {"attention.shared_kv_layers", K_U32},
    {"embedding_length_per_layer_input", K_U32},
};

static bool kind_of(const char *key, key_kind *out)
{
    for (size_t i = 0; i < sizeof k_arch_keys / sizeof k_arch_keys[0]; i++) {
        const char *dot = strchr(key, '.');
        if (dot && !strcmp(dot + 1, k_arch_keys[i].suffix) && !strchr(key, ':')) {
            *out = k_arch_keys[i].kind;
            return true;
        }
    }
    for (size_t i = 0; i < sizeof k_keys / sizeof k_keys[0]; i++)
        if (!strcmp(key, k_keys[i].key)) {
            *out = k_keys[i].kind;
            return true;
        }
    if (!strncmp(key, "tokenizer.ggml.", 15) && ends_with(key, "_token_id")) { /* bos, eos, eot, fim_*, ... */
        *out = K_U32;
        return true;
    }
    return false;
}

static bool is_int(lmq_vtype t)
{
    return t <= LMQ_V_I32 || t == LMQ_V_U64 || t == LMQ_V_I64;
}

static bool is_signed_int(lmq_vtype t)
{
    return t == LMQ_V_I8 || t == LMQ_V_I16 || t == LMQ_V_I32 || t == LMQ_V_I64;
}

/* Element i of a numeric array as double / int64. */
static double arr_f64(const lmq_value *v, uint64_t i)
{
    const uint8_t *p = (const uint8_t *)v->arr.data + i * lmq_vtype_size(v->arr.elem);
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
            float f32; uint64_t u64; int64_t i64; double f64; } x;
    memcpy(&x, p, lmq_vtype_size(v->arr.elem));
    switch (v->arr.elem) {
    case LMQ_V_U8: return x.u8;
    case LMQ_V_I8: return x.i8;
    case LMQ_V_U16: return x.u16;
    case LMQ_V_I16: return x.i16;
    case LMQ_V_U32: return x.u32;
    case LMQ_V_I32: return x.i32;
    case LMQ_V_F32: return x.f32;
    case LMQ_V_U64: return (double)x.u64;
    case LMQ_V_I64: return (double)x.i64;
    case LMQ_V_F64: return x.f64;
    default: return 0;
    }
}

static lmq_status type_error(const char *path, const char *key, const lmq_value *v, const char *want)
{
    return lmq_error(LMQ_ERR_FORMAT, "%s: metadata key '%s' is %s%s%s, llama.cpp needs %s", path, key,
                     lmq_vtype_name(v->type), v->type == LMQ_V_ARRAY ? " of " : "",
                     v->type == LMQ_V_ARRAY ? lmq_vtype_name(v->arr.elem) : "", want);
}

/* Copies `v` under `key` into `out`, converted to the type llama.cpp reads. */
static lmq_status put_coerced(lmq_meta *out, const char *path, const char *key, const lmq_value *v, key_kind kind)
{
    switch (kind) {
    case K_U32: {
        if (v->type == LMQ_V_ARRAY && is_int(v->arr.elem)) { /* per layer (feed_forward_length, head_count_kv) */
            uint32_t *u = malloc(v->arr.n ? (size_t)v->arr.n * 4 : 4);
            if (!u) return lmq_error(LMQ_ERR_NOMEM, "%s: metadata key '%s'", path, key);
            for (uint64_t i = 0; i < v->arr.n; i++) {
                const double d = arr_f64(v, i);
                if (d < 0 || d > UINT32_MAX) {
                    free(u);
                    return lmq_error(LMQ_ERR_FORMAT, "%s: metadata key '%s': element %llu does not fit in u32", path,
                                     key, (unsigned long long)i);
                }
                u[i] = (uint32_t)d;
            }
            lmq_status s = lmq_meta_set_arr(out, key, LMQ_V_U32, u, v->arr.n);
            free(u);
            return s;
        }
        if (!is_int(v->type)) return type_error(path, key, v, "u32");
        if (is_signed_int(v->type) ? (v->i < 0 || v->i > (int64_t)UINT32_MAX) : v->u > UINT32_MAX)
            return lmq_error(LMQ_ERR_FORMAT, "%s: metadata key '%s' does not fit in u32", path, key);
        return lmq_meta_set_u32(out, key, (uint32_t)(is_signed_int(v->type) ? (uint64_t)v->i : v->u));
    }
    case K_F32:
        if (v->type == LMQ_V_F32 || v->type == LMQ_V_F64) return lmq_meta_set_f32(out, key, (float)v->f);
        if (is_int(v->type))
            return lmq_meta_set_f32(out, key, is_signed_int(v->type) ? (float)v->i : (float)v->u);
        return type_error(path, key, v, "f32");
    case K_BOOL:
        if (v->type == LMQ_V_BOOL) return lmq_meta_set_bool(out, key, v->b);
        if (is_int(v->type) && v->u <= 1) return lmq_meta_set_bool(out, key, v->u != 0);
        return type_error(path, key, v, "bool");
    case K_STR:
        if (v->type != LMQ_V_STRING) return type_error(path, key, v, "a string");
        return lmq_meta_set_value(out, key, v);
    case K_ARR_STR:
        if (v->type != LMQ_V_ARRAY || v->arr.elem != LMQ_V_STRING) return type_error(path, key, v, "an array of strings");
        return lmq_meta_set_value(out, key, v);
    case K_ARR_F32:
    case K_ARR_I32: {
        lmq_vtype want = kind == K_ARR_F32 ? LMQ_V_F32 : LMQ_V_I32;
        if (v->type != LMQ_V_ARRAY || !(is_int(v->arr.elem) || v->arr.elem == LMQ_V_F32 || v->arr.elem == LMQ_V_F64) ||
            (want == LMQ_V_I32 && !is_int(v->arr.elem)))
            return type_error(path, key, v, kind == K_ARR_F32 ? "an array of f32" : "an array of i32");
        if (v->arr.elem == want) return lmq_meta_set_value(out, key, v);
        void *buf = malloc(v->arr.n ? (size_t)v->arr.n * 4 : 4);
        if (!buf) return lmq_error(LMQ_ERR_NOMEM, "%s: metadata key '%s'", path, key);
        for (uint64_t i = 0; i < v->arr.n; i++) {
            double d = arr_f64(v, i);
            if (want == LMQ_V_F32) {
                ((float *)buf)[i] = (float)d;
            } else {
                if (d < INT32_MIN || d > INT32_MAX) {
                    free(buf);
                    return lmq_error(LMQ_ERR_FORMAT, "%s: metadata key '%s': element %llu does not fit in i32", path,
                                     key, (unsigned long long)i);
                }
                ((int32_t *)buf)[i] = (int32_t)d;
            }
        }
        lmq_status s = lmq_meta_set_arr(out, key, want, buf, v->arr.n);
        free(buf);
        return s;
    }
    }
    return LMQ_OK;
}

/* Nested arrays: GGUF allows them but llama.cpp's reader refuses them. */
static bool has_nested_array(const lmq_value *v)
{
    return v->type == LMQ_V_ARRAY && v->arr.elem == LMQ_V_ARRAY;
}

/* Derived and defaulted keys, added only when missing. */
static lmq_status add_derived(lmq_meta *out, const char *in_path, const lmq_file *f, const char *arch)
{
    lmq_status s;
    char k1[128], k2[128];
    uint64_t n_embd = 0, n_head = 0, v;
    lmq_meta_get_u64(out, arch_key(arch, ".embedding_length", k1, sizeof k1), &n_embd);
    lmq_meta_get_u64(out, arch_key(arch, ".attention.head_count", k2, sizeof k2), &n_head);
    uint64_t key_len = 0;
    lmq_meta_get_u64(out, arch_key(arch, ".attention.key_length", k1, sizeof k1), &key_len);
    if (n_head == 0 || n_embd == 0 || (n_embd % n_head && key_len == 0))
        return lmq_error(LMQ_ERR_FORMAT, "%s: %s.embedding_length %llu is not a multiple of head_count %llu", in_path,
                         arch, (unsigned long long)n_embd, (unsigned long long)n_head);
    if (!lmq_meta_find(out, arch_key(arch, ".attention.head_count_kv", k1, sizeof k1)) &&
        (s = lmq_meta_set_u32(out, k1, (uint32_t)n_head)))
        return s;
    if (!lmq_meta_find(out, arch_key(arch, ".rope.dimension_count", k1, sizeof k1))) {
        uint64_t rot = key_len ? key_len : n_embd / n_head;
        if ((s = lmq_meta_set_u32(out, k1, (uint32_t)rot))) return s;
    }
    (void)v;
    /* ik_llama.cpp's gemma4 loader requires the per-layer-embedding width, 0 without PLE */
    const lmq_arch *ad = lmq_arch_by_name(arch);
    if (ad && ad->swa_heads && !lmq_meta_find(out, arch_key(arch, ".embedding_length_per_layer_input", k1, sizeof k1)) &&
        (s = lmq_meta_set_u32(out, k1, 0)))
        return s;
    if (!lmq_meta_find(out, arch_key(arch, ".vocab_size", k1, sizeof k1))) {
        uint64_t n_vocab = 0;
        lmq_meta_get_arr(out, "tokenizer.ggml.tokens", NULL, &n_vocab, NULL);
        const lmq_tensor_info *emb = lmq_file_find_tensor(f, "token_embd.weight");
        if (emb && emb->n_dims >= 2) n_vocab = (uint64_t)emb->ne[1];
        if (n_vocab > UINT32_MAX) return lmq_error(LMQ_ERR_FORMAT, "%s: vocabulary too large", in_path);
        if ((s = lmq_meta_set_u32(out, k1, (uint32_t)n_vocab))) return s;
    }
    lmq_error_clear();
    const char *model;
    if (!lmq_meta_find(out, "tokenizer.ggml.pre") && lmq_meta_get_str(out, "tokenizer.ggml.model", &model, NULL) == LMQ_OK &&
        !strcmp(model, "llama") && (s = lmq_meta_set_str(out, "tokenizer.ggml.pre", "default")))
        return s;
    if (!lmq_meta_find(out, "general.name")) {
        const char *b = strrchr(in_path, '/');
        b = b ? b + 1 : in_path;
        size_t len = strlen(b);
        const char *dot = strrchr(b, '.');
        if (dot && dot != b) len = (size_t)(dot - b);
        if ((s = lmq_meta_set_strn(out, "general.name", b, len))) return s;
    }
    return LMQ_OK;
}

/* Fills the writer's metadata from the container's. */
static lmq_status build_meta(lmq_meta *out, const char *in_path, const lmq_file *f, const char *arch,
                             bool llama3_rope)
{
    const lmq_meta *m = lmq_file_meta(f);
    lmq_status s;
    char scaling[96];
    snprintf(scaling, sizeof scaling, "%s.rope.scaling.", arch);
    for (size_t i = 0; i < lmq_meta_count(m); i++) {
        const char *key = lmq_meta_key(m, i);
        const lmq_value *v = lmq_meta_value(m, i);
        if (!strncmp(key, "lmq.", 4) || has_nested_array(v)) continue;
        /* llama.cpp knows no "llama3" scaling type: it reads rope_freqs.weight */
        if (llama3_rope && !strncmp(key, scaling, strlen(scaling))) continue;
        key_kind kind;
        s = kind_of(key, &kind) ? put_coerced(out, in_path, key, v, kind) : lmq_meta_set_value(out, key, v);
        if (s) return s;
    }
    char ek[128];
    const bool experts = lmq_meta_find(out, arch_key(arch, ".expert_count", ek, sizeof ek)) != NULL;
    for (size_t i = 0; i < sizeof k_required / sizeof k_required[0]; i++) {
        char kb[128];
        const char *k = arch_key(arch, k_required[i], kb, sizeof kb);
        /* expert-only models (qwen35moe) have no dense width */
        if (experts && !strcmp(k_required[i], ".feed_forward_length")) continue;
        if (!lmq_meta_find(out, k))
            return lmq_error(LMQ_ERR_NOT_FOUND, "%s: metadata key '%s' (needed by llama.cpp) is missing", in_path, k);
    }
    const lmq_arch *ad = lmq_arch_by_name(arch);
    for (size_t i = 0; ad && i < sizeof k_required_arch / sizeof k_required_arch[0]; i++) {
        char kb[128];
        const char *k = arch_key(arch, k_required_arch[i].key, kb, sizeof kb);
        if (k_required_arch[i].arch == ad->id && !lmq_meta_find(out, k))
            return lmq_error(LMQ_ERR_NOT_FOUND, "%s: metadata key '%s' (needed by llama.cpp's %s) is missing", in_path,
                             k, arch);
    }
    if ((s = add_derived(out, in_path, f, arch))) return s;
    return lmq_meta_set_u32(out, "general.quantization_version", 2);
}

/* ====================================================================
 * Tensors
 * ==================================================================== */

int64_t lmq_rope_permuted_row(int64_t r, int64_t n_rows, int64_t n_head)
{
    if (n_head <= 0 || n_rows <= 0 || n_rows % (2 * n_head) || r < 0 || r >= n_rows) return -1;
    int64_t d = n_rows / n_head, half = d / 2;
    int64_t h = r / d, w = r % d;
    int64_t j = w / 2, k = w % 2;
    return h * d + k * half + j;
}

/* The tensor names llama.cpp loads for the family (any other tensor makes
 * it refuse the file: "wrong number of tensors"): the descriptor's list,
 * plus rope_freqs for Llama 3.x, plus whatever the multi-token-prediction
 * blocks after the n_main main layers hold (a GGUF import of a Qwen3.5
 * with nextn_predict_layers; n_main < 0: none). */
static bool arch_tensor_name(const lmq_arch *a, const char *name, int64_t n_main)
{
    lmq_tensor_kind k;
    int il;
    if (n_main >= 0 && !strncmp(name, "blk.", 4)) {
        char *end;
        long l = strtol(name + 4, &end, 10);
        if (end != name + 4 && *end == '.' && l >= n_main) return true;
    }
    if (!lmq_tensor_parse_name(name, &k, &il)) return false;
    return lmq_arch_tensor_of(a, k) != NULL;
}

/* llama.cpp's qwen35 / qwen35moe loaders take the key and the value head
 * size both from ssm.state_size and the layer kinds from
 * full_attention_interval alone: a container that differs cannot be
 * expressed. *n_main gets the main layers when MTP blocks follow them. */
static lmq_status check_hybrid(const lmq_meta *m, const char *path, const lmq_arch *a, int64_t *n_main)
{
    *n_main = -1;
    if (!a->hybrid) return LMQ_OK;
    lmq_arch_dims d;
    lmq_status s = lmq_arch_dims_from_meta(m, a, path, &d);
    if (s) return s;
    if (d.ssm_dk != d.ssm_dv)
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: linear-attention key heads of %lld and value heads of %lld: "
                         "llama.cpp's %s reads both sizes from %s.ssm.state_size, so it cannot load this model",
                         path, (long long)d.ssm_dk, (long long)d.ssm_dv, a->name, a->name);
    char key[128];
    uint64_t interval = 4;
    snprintf(key, sizeof key, "%s.full_attention_interval", a->name);
    lmq_meta_get_u64(m, key, &interval);
    lmq_error_clear();
    bool *rec = malloc((size_t)d.n_layer * sizeof *rec);
    if (!rec) return lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", path);
    s = lmq_arch_layer_kinds(m, a, d.n_layer, path, rec);
    for (int64_t il = 0; !s && il < d.n_layer; il++)
        if (interval == 0 || rec[il] != ((uint64_t)(il + 1) % interval != 0))
            s = lmq_error(LMQ_ERR_UNSUPPORTED, "%s: layer %lld is a %s layer, but llama.cpp's %s makes layer i full "
                          "attention exactly when (i + 1) %% %s (%llu) == 0, so it cannot load this model", path,
                          (long long)il, rec[il] ? "linear-attention" : "full-attention", a->name, key,
                          (unsigned long long)interval);
    free(rec);
    if (!s && d.n_nextn > 0) *n_main = d.n_layer;
    return s;
}

/* llama.cpp's smollm3 skips RoPE on every 4th layer whatever the
 * checkpoint says (build_smollm3.cpp: use_rope = (il + 1) % 4 != 0). */
static lmq_status check_nope(const lmq_meta *m, const char *path, const lmq_arch *a)
{
    if (a->nope_interval <= 0) return LMQ_OK;
    lmq_arch_dims d;
    lmq_status s = lmq_arch_dims_from_meta(m, a, path, &d);
    if (s) return s;
    bool *nope = malloc((size_t)d.n_layer * sizeof *nope);
    if (!nope) return lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", path);
    s = lmq_arch_nope_layers(m, a, d.n_layer, path, nope);
    for (int64_t il = 0; !s && il < d.n_layer; il++)
        if (nope[il] != ((il + 1) % a->nope_interval == 0))
            s = lmq_error(LMQ_ERR_UNSUPPORTED, "%s: layer %lld %s RoPE, but llama.cpp's %s skips it exactly on layers "
                          "i with (i + 1) %% %d == 0, so it cannot load this model", path, (long long)il,
                          nope[il] ? "skips" : "applies", a->name, a->nope_interval);
    free(nope);
    return s;
}

/* llama.cpp hard-codes the window on the even layers of gemma2 and gpt-oss
 * (ik_llama.cpp build_gemma2.cpp, build_openai.cpp): a container whose
 * lmq.attention.sliding_window_layers says otherwise cannot be expressed. */
static lmq_status check_window(const lmq_meta *m, const char *path, const lmq_arch *a)
{
    lmq_vtype et;
    uint64_t n;
    const void *data;
    if (a->swa != LMQ_SWA_EVEN || lmq_meta_get_arr(m, "lmq.attention.sliding_window_layers", &et, &n, &data)) {
        lmq_error_clear();
        return LMQ_OK;
    }
    if (et != LMQ_V_BOOL)
        return lmq_error(LMQ_ERR_FORMAT, "%s: lmq.attention.sliding_window_layers is not a bool array", path);
    for (uint64_t il = 0; il < n; il++) {
        const bool sw = ((const uint8_t *)data)[il] != 0;
        if (sw != (il % 2 == 0))
            return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: layer %llu %s the sliding window, but llama.cpp's %s applies "
                             "it to the even layers exactly, so it cannot load this model", path,
                             (unsigned long long)il, sw ? "uses" : "does not use", a->name);
    }
    return LMQ_OK;
}

/* Shared KV (Gemma 4): lmq reads the cache of the last non-shared layer of
 * the same kind, as transformers does; llama.cpp / ik_llama.cpp hard-code
 * layer n - 2 for sliding layers and n - 1 for global ones (n = the first
 * shared layer; llama-build-context.cpp), which agrees only when those two
 * are a sliding and a global layer. Anything else cannot be expressed. */
static lmq_status check_shared_kv(const lmq_meta *m, const char *path, const lmq_arch *a)
{
    if (!a->swa_heads) return LMQ_OK;
    lmq_arch_dims d;
    lmq_status s = lmq_arch_dims_from_meta(m, a, path, &d);
    if (s || d.n_kv_shared == 0) return s;
    lmq_arch_layer *geo = malloc((size_t)d.n_layer * sizeof *geo);
    if (!geo) return lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", path);
    s = lmq_arch_layers(m, a, &d, path, geo);
    const int64_t first = d.n_layer - d.n_kv_shared;
    for (int64_t il = first; !s && il < d.n_layer; il++) {
        const int64_t ggml = geo[il].swa ? first - 2 : first - 1;
        if (geo[il].kv_src != ggml)
            s = lmq_error(LMQ_ERR_UNSUPPORTED, "%s: shared-KV layer %lld reads layer %lld's cache, but llama.cpp's %s "
                          "reads layer %lld (first shared layer - %d), so it cannot load this model", path,
                          (long long)il, (long long)geo[il].kv_src, a->name, (long long)ggml, geo[il].swa ? 2 : 1);
    }
    free(geo);
    return s;
}

/* Heads to permute by for a tensor: n_head for attn_q, n_head_kv for attn_k,
 * 0 for tensors that are not permuted. */
static int64_t permute_heads(const char *name, int64_t n_head, int64_t n_head_kv)
{
    if (strncmp(name, "blk.", 4)) return 0;
    if (ends_with(name, ".attn_q.weight") || ends_with(name, ".attn_q.bias")) return n_head;
    if (ends_with(name, ".attn_k.weight") || ends_with(name, ".attn_k.bias")) return n_head_kv;
    return 0;
}

typedef struct export_tensor {
    const lmq_tensor_info *t;
    const lmq_tensor_info *up; /* Gemma 4: t is ffn_gate_exps, written fused with this ffn_up_exps as
                                * llama.cpp's ffn_gate_up_exps (per expert: gate rows, then up rows) */
    bool skip;                 /* written as part of another tensor */
    lmq_type out_type;
    int64_t heads;    /* > 0: permute rows by this many heads */
    int64_t n_rows;   /* rows as permuted/widened (1-D: elements) */
    int64_t row_len;  /* elements per row */
} export_tensor;

typedef struct export_ctx {
    const char *in_path;
    lmq_gguf_writer *w;
    uint64_t done, total;
    float *fbuf;      /* one widened row as f32 */
    uint16_t *hbuf;   /* one widened row as f16/bf16 */
} export_ctx;

/* Writes one tensor: straight copy, or row by row (permuted and/or widened). */
static lmq_status write_tensor(export_ctx *c, const export_tensor *e)
{
    const lmq_tensor_info *t = e->t;
    if ((e->heads == 0 && e->out_type == t->type) || e->n_rows == 0)
        return lmq_gguf_writer_write(c->w, t->data, t->nbytes);
    size_t row_bytes = (size_t)(t->nbytes / (uint64_t)e->n_rows);
    for (int64_t r = 0; r < e->n_rows; r++) {
        int64_t src = e->heads ? lmq_rope_permuted_row(r, e->n_rows, e->heads) : r;
        const uint8_t *row = (const uint8_t *)t->data + (size_t)src * row_bytes;
        lmq_status s;
        if (e->out_type == t->type) {
            s = lmq_gguf_writer_write(c->w, row, row_bytes);
        } else {
            s = lmq_dequantize_row(t->type, row, c->fbuf, e->row_len);
            if (s) return lmq_error_prefix(s, "%s: tensor '%s': cannot widen", c->in_path, t->name);
            if (e->out_type == LMQ_TYPE_F16) lmq_fp32_to_fp16_row(c->fbuf, c->hbuf, e->row_len);
            else lmq_fp32_to_bf16_row(c->fbuf, c->hbuf, e->row_len);
            s = lmq_gguf_writer_write(c->w, c->hbuf, (uint64_t)e->row_len * 2);
        }
        if (s) return s;
    }
    return LMQ_OK;
}

/* Decides output type, permutation and row geometry of every tensor, and
 * refuses what llama.cpp could not load. */
static lmq_status plan_tensors(const lmq_file *f, const char *in_path, const lmq_export_opts *o, const lmq_arch *a,
                               bool neox, int64_t n_head, int64_t n_head_kv, int64_t n_main, export_tensor *plan,
                               int64_t *max_row)
{
    *max_row = 0;
    for (size_t i = 0; i < lmq_file_n_tensors(f); i++) {
        const lmq_tensor_info *t = lmq_file_tensor(f, i);
        export_tensor *e = &plan[i];
        e->t = t;
        e->out_type = t->type;
        if (e->skip) continue;
        if (a->swa_heads && ends_with(t->name, ".ffn_gate_exps.weight")) {
            /* llama.cpp's gemma4 loader wants ffn_gate_up_exps: the up stack of the same layer joins it */
            char up[96];
            snprintf(up, sizeof up, "%.*s.ffn_up_exps.weight", (int)(strlen(t->name) - strlen(".ffn_gate_exps.weight")),
                     t->name);
            const lmq_tensor_info *u = lmq_file_find_tensor(f, up);
            if (!u || u->type != t->type || u->n_dims != 3 || t->n_dims != 3 || u->ne[0] != t->ne[0] ||
                u->ne[1] != t->ne[1] || u->ne[2] != t->ne[2] || lmq_type_get(t->type)->ggml_type < 0)
                return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: '%s' and '%s' cannot be written as llama.cpp's "
                                 "ffn_gate_up_exps (missing, or of another type or shape)", in_path, t->name, up);
            e->up = u;
            for (size_t j = 0; j < lmq_file_n_tensors(f); j++)
                if (lmq_file_tensor(f, j) == u) plan[j].skip = true;
            continue;
        }
        if (!arch_tensor_name(a, t->name, n_main))
            return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: tensor '%s' is not one llama.cpp's %s architecture loads",
                             in_path, t->name, a->name);
        if (lmq_type_get(t->type)->ggml_type < 0) {
            if (!o->widen_fp8)
                return lmq_error(LMQ_ERR_UNSUPPORTED,
                                 "%s: tensor '%s' is %s, which GGUF cannot store: use --widen-fp8 f16|bf16 "
                                 "or quantize it to a GGUF type first", in_path, t->name, lmq_type_name(t->type));
            e->out_type = o->widen_type;
        }
        /* llama.cpp's converter permutes q/k rows only for Llama-class families */
        e->heads = neox && a->gguf_rope_permuted ? permute_heads(t->name, n_head, n_head_kv) : 0;
        e->row_len = t->ne[0];
        e->n_rows = t->ne[1] * t->ne[2] * t->ne[3];
        if (e->heads && t->n_dims == 1) { /* a bias: every element is a "row" */
            if (lmq_type_get(t->type)->block_size != 1)
                return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: tensor '%s': cannot permute a quantized vector", in_path, t->name);
            e->n_rows = t->ne[0];
            e->row_len = 1;
        }
        if (e->heads && (t->n_dims > 2 || lmq_rope_permuted_row(0, e->n_rows, e->heads) < 0))
            return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': %lld rows cannot be split into %lld RoPE heads", in_path,
                             t->name, (long long)e->n_rows, (long long)e->heads);
        if (e->out_type != t->type && e->row_len > *max_row) *max_row = e->row_len;
    }
    return LMQ_OK;
}

/* llama.cpp applies Llama 3 frequency scaling through a rope_freqs.weight
 * tensor of n_rot/2 factors, computed as convert_hf_to_gguf.py does (f32). */
static lmq_status llama3_rope_factors(const lmq_meta *m, const char *in_path, float *out, int64_t n_half)
{
    /* only the llama family has llama3 scaling (hf_config.c refuses it elsewhere) */
    double base = 10000.0, factor = 8.0, lo = 1.0, hi = 4.0, old_ctx = 8192.0;
    lmq_meta_get_f64(m, "llama.rope.freq_base", &base);
    lmq_meta_get_f64(m, "llama.rope.scaling.factor", &factor);
    lmq_meta_get_f64(m, "llama.rope.scaling.low_freq_factor", &lo);
    lmq_meta_get_f64(m, "llama.rope.scaling.high_freq_factor", &hi);
    lmq_meta_get_f64(m, "llama.rope.scaling.original_context_length", &old_ctx);
    if (!(factor > 0) || !(hi > lo) || !(lo > 0) || !(old_ctx > 0))
        return lmq_error(LMQ_ERR_FORMAT, "%s: llama3 rope scaling parameters out of range", in_path);
    float lo_wavelen = (float)(old_ctx / lo), hi_wavelen = (float)(old_ctx / hi);
    int64_t dim = 2 * n_half;
    for (int64_t i = 0; i < n_half; i++) {
        float freq = 1.0f / powf((float)base, (float)(2 * i) / (float)dim);
        float wavelen = (float)(2.0 * M_PI) / freq;
        if (wavelen < hi_wavelen) {
            out[i] = 1.0f;
        } else if (wavelen > lo_wavelen) {
            out[i] = (float)factor;
        } else {
            float smooth = ((float)old_ctx / wavelen - (float)lo) / (float)(hi - lo);
            out[i] = 1.0f / ((1.0f - smooth) / (float)factor + smooth);
        }
    }
    return LMQ_OK;
}

/* ====================================================================
 * Export
 * ==================================================================== */

static lmq_status verify_tensor(const lmq_tensor_info *t, const char *in_path)
{
    /* compressed tensors were checked when the container was opened */
    if (!t->has_checksum || t->codec != LMQ_CODEC_NONE) return LMQ_OK;
    if (lmq_hash64(t->data, (size_t)t->nbytes) != t->checksum)
        return lmq_error(LMQ_ERR_CHECKSUM, "%s: tensor '%s': checksum mismatch (data corrupted)", in_path, t->name);
    return LMQ_OK;
}

static lmq_status read_layout(const lmq_file *f, const char *in_path, bool *neox)
{
    const char *layout;
    /* a container without the key holds Hugging Face rows (as the runtime assumes) */
    *neox = lmq_file_kind_of(f) == LMQ_FILE_LMQ;
    if (lmq_meta_get_str(lmq_file_meta(f), "lmq.rope.layout", &layout, NULL) != LMQ_OK) return LMQ_OK;
    if (!strcmp(layout, "neox")) *neox = true;
    else if (!strcmp(layout, "normal")) *neox = false;
    else return lmq_error(LMQ_ERR_FORMAT, "%s: lmq.rope.layout '%s' (expected neox or normal)", in_path, layout);
    return LMQ_OK;
}

lmq_status lmq_export_gguf(const char *lmq_path, const char *out_path, const lmq_export_opts *opts,
                           lmq_convert_stats *stats)
{
    double t0 = lmq_time_s();
    if (stats) memset(stats, 0, sizeof *stats);
    lmq_export_opts o = {0};
    if (opts) o = *opts;
    if (!lmq_path || !out_path) return lmq_error(LMQ_ERR_INVALID_ARG, "export: missing input or output path");
    if (o.widen_fp8 && o.widen_type != LMQ_TYPE_F16 && o.widen_type != LMQ_TYPE_BF16)
        return lmq_error(LMQ_ERR_INVALID_ARG, "export: fp8 can be widened to f16 or bf16, not %s", lmq_type_name(o.widen_type));
    lmq_file *f = NULL;
    lmq_gguf_writer *w = NULL;
    export_tensor *plan = NULL;
    export_ctx c = {lmq_path, NULL, 0, 0, NULL, NULL};
    lmq_type *out_types = NULL;
    const lmq_tensor_info **ts = NULL;
    float *factors = NULL;
    lmq_status s = lmq_file_open(lmq_path, &f);
    if (s) return s;
    const lmq_meta *m = lmq_file_meta(f);
    const char *arch = NULL;
    const lmq_arch *ad = NULL;
    if (lmq_meta_get_str(m, "general.architecture", &arch, NULL) != LMQ_OK || !(ad = lmq_arch_by_name(arch))) {
        s = lmq_error(LMQ_ERR_UNSUPPORTED, "%s: architecture '%s' cannot be exported (lmq exports %s)", lmq_path,
                      arch ? arch : "(missing)", lmq_arch_names());
        goto out;
    }
    bool neox;
    if ((s = read_layout(f, lmq_path, &neox))) goto out;
    if (!neox && !ad->gguf_rope_permuted) {
        s = lmq_error(LMQ_ERR_FORMAT, "%s: lmq.rope.layout is 'normal', but llama.cpp runs %s with rotate-half pairs",
                      lmq_path, arch);
        goto out;
    }
    int64_t n_main;
    if ((s = check_hybrid(m, lmq_path, ad, &n_main))) goto out;
    if ((s = check_window(m, lmq_path, ad))) goto out;
    if ((s = check_nope(m, lmq_path, ad))) goto out;
    if ((s = check_shared_kv(m, lmq_path, ad))) goto out;
    char kb[128];
    uint64_t n_head = 0, n_head_kv = 0;
    lmq_meta_get_u64(m, arch_key(arch, ".attention.head_count", kb, sizeof kb), &n_head);
    if (lmq_meta_get_u64(m, arch_key(arch, ".attention.head_count_kv", kb, sizeof kb), &n_head_kv) != LMQ_OK)
        n_head_kv = n_head;
    if (neox && ad->gguf_rope_permuted &&
        (n_head == 0 || n_head_kv == 0 || n_head > INT32_MAX || n_head_kv > INT32_MAX)) {
        s = lmq_error(LMQ_ERR_FORMAT, "%s: %s.attention.head_count(_kv) missing or zero: cannot permute attn_q/attn_k",
                      lmq_path, arch);
        goto out;
    }
    const char *stype = NULL;
    bool llama3 = lmq_meta_get_str(m, arch_key(arch, ".rope.scaling.type", kb, sizeof kb), &stype, NULL) == LMQ_OK &&
                  !strcmp(stype, "llama3");
    lmq_error_clear();
    bool add_factors = llama3 && !lmq_file_find_tensor(f, "rope_freqs.weight");

    size_t n = lmq_file_n_tensors(f);
    plan = calloc(n ? n : 1, sizeof *plan);
    out_types = calloc(n ? n : 1, sizeof *out_types);
    ts = calloc(n ? n : 1, sizeof *ts);
    if (!plan || !out_types || !ts) {
        s = lmq_error(LMQ_ERR_NOMEM, "%s: tensor plan", lmq_path);
        goto out;
    }
    int64_t max_row = 0;
    if ((s = plan_tensors(f, lmq_path, &o, ad, neox, (int64_t)n_head, (int64_t)n_head_kv, n_main, plan, &max_row)))
        goto out;
    if (max_row) {
        c.fbuf = malloc((size_t)max_row * sizeof(float));
        c.hbuf = malloc((size_t)max_row * sizeof(uint16_t));
        if (!c.fbuf || !c.hbuf) {
            s = lmq_error(LMQ_ERR_NOMEM, "%s: row buffers", lmq_path);
            goto out;
        }
    }
    for (size_t i = 0; i < n; i++) {
        out_types[i] = plan[i].out_type;
        ts[i] = plan[i].t;
    }

    lmq_gguf_writer_opts wo = {o.alignment};
    if ((s = lmq_gguf_writer_open(out_path, &wo, &w))) goto out;
    c.w = w;
    lmq_meta *om = lmq_gguf_writer_meta(w);
    if ((s = build_meta(om, lmq_path, f, arch, llama3))) goto out;
    if ((s = lmq_meta_set_u32(om, "general.file_type", file_type_of(m, out_types, ts, n)))) goto out;

    int64_t n_half = 0;
    if (add_factors) {
        uint64_t rot = 0;
        lmq_meta_get_u64(om, arch_key(arch, ".rope.dimension_count", kb, sizeof kb), &rot);
        n_half = (int64_t)(rot / 2);
        factors = malloc((size_t)(n_half ? n_half : 1) * sizeof(float));
        if (!factors) {
            s = lmq_error(LMQ_ERR_NOMEM, "%s: rope factors", lmq_path);
            goto out;
        }
        if ((s = llama3_rope_factors(m, lmq_path, factors, n_half))) goto out;
        if ((s = lmq_gguf_writer_declare(w, "rope_freqs.weight", LMQ_TYPE_F32, 1, &n_half))) goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const lmq_tensor_info *t = plan[i].t;
        if (plan[i].skip) continue;
        if (plan[i].up) {
            char name[96];
            const int64_t ne[3] = {t->ne[0], 2 * t->ne[1], t->ne[2]};
            snprintf(name, sizeof name, "%.*s.ffn_gate_up_exps.weight",
                     (int)(strlen(t->name) - strlen(".ffn_gate_exps.weight")), t->name);
            if ((s = lmq_gguf_writer_declare(w, name, plan[i].out_type, 3, ne))) goto out;
        } else if ((s = lmq_gguf_writer_declare(w, t->name, plan[i].out_type, t->n_dims, t->ne))) {
            goto out;
        }
        c.total += t->nbytes + (plan[i].up ? plan[i].up->nbytes : 0);
    }
    if (add_factors && (s = lmq_gguf_writer_write(w, factors, (uint64_t)n_half * sizeof(float)))) goto out;
    uint64_t params = 0;
    for (size_t i = 0; i < n; i++) {
        const lmq_tensor_info *t = plan[i].t;
        if (plan[i].skip) continue;
        if ((s = verify_tensor(t, lmq_path))) goto out;
        if (plan[i].up) { /* per expert: its gate rows, then its up rows */
            const lmq_tensor_info *u = plan[i].up;
            if ((s = verify_tensor(u, lmq_path))) goto out;
            const size_t per = (size_t)(t->nbytes / (uint64_t)t->ne[2]);
            for (int64_t e = 0; e < t->ne[2] && !s; e++) {
                s = lmq_gguf_writer_write(w, (const uint8_t *)t->data + (size_t)e * per, per);
                if (!s) s = lmq_gguf_writer_write(w, (const uint8_t *)u->data + (size_t)e * per, per);
            }
            if (s) goto out;
            c.done += u->nbytes;
            params += (uint64_t)(u->ne[0] * u->ne[1] * u->ne[2]);
        } else if ((s = write_tensor(&c, &plan[i]))) {
            goto out;
        }
        c.done += t->nbytes;
        params += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
        if (o.progress) o.progress(o.progress_ctx, c.done, c.total);
    }
    s = lmq_gguf_writer_finish(w);
    w = NULL;
    if (s) goto out;
    if (stats) {
        struct stat st;
        size_t n_skip = 0;
        for (size_t i = 0; i < n; i++) n_skip += plan[i].skip;
        stats->n_tensors = n - n_skip + (add_factors ? 1 : 0);
        stats->n_params = params;
        stats->bytes_written = stat(out_path, &st) == 0 ? (uint64_t)st.st_size : 0;
        stats->seconds = lmq_time_s() - t0;
    }
out:
    lmq_gguf_writer_abort(w);
    free(factors);
    free(c.fbuf);
    free(c.hbuf);
    free(ts);
    free(out_types);
    free(plan);
    lmq_file_close(f);
    return s;
}
