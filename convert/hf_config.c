/* Hugging Face config.json -> general.* / llama.* metadata (GGUF key names).
 *
 * Only configurations whose forward pass is exactly lmq's Llama graph are
 * accepted: RMSNorm, SwiGLU (silu) MLP, grouped-query attention without
 * biases, RoPE with no scaling or linear/llama3 scaling. Mistral is the same
 * graph plus a sliding attention window; for contexts no longer than the
 * window the two agree, so the context length is capped at the window. */
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_convert.h"

#define CONFIG_MAX_BYTES ((size_t)16 << 20)

typedef struct cfg {
    const cJSON *root;
    const char *file; /* for messages */
} cfg;

/* The member `key` of obj; with duplicate keys the last one wins, as with
 * Python's json module that writes and reads these files. */
static const cJSON *member(const cJSON *obj, const char *key)
{
    const cJSON *found = NULL;
    for (const cJSON *e = obj ? obj->child : NULL; e; e = e->next)
        if (e->string && !strcmp(e->string, key)) found = e;
    return found;
}

/* The item under `key`, or NULL when absent or JSON null. */
static const cJSON *item(const cfg *c, const char *key)
{
    const cJSON *v = member(c->root, key);
    return cJSON_IsNull(v) ? NULL : v;
}

static bool as_int(const cJSON *v, int64_t lo, int64_t hi, int64_t *out)
{
    if (!cJSON_IsNumber(v)) return false;
    double d = v->valuedouble;
    if (!(d >= (double)lo && d <= (double)hi) || d != floor(d)) return false;
    *out = (int64_t)d;
    return true;
}

/* Integer key; required ones fail naming the key when absent. */
static lmq_status get_int(const cfg *c, const char *key, bool required, int64_t dflt, int64_t lo, int64_t hi,
                          int64_t *out)
{
    const cJSON *v = item(c, key);
    if (!v) {
        if (required) return lmq_error(LMQ_ERR_FORMAT, "%s: required key '%s' is missing", c->file, key);
        *out = dflt;
        return LMQ_OK;
    }
    if (!as_int(v, lo, hi, out))
        return lmq_error(LMQ_ERR_FORMAT, "%s: '%s' must be an integer in [%lld, %lld]", c->file, key, (long long)lo,
                         (long long)hi);
    return LMQ_OK;
}

/* Number in the open interval (lo, hi); `obj` is the object holding it. */
static lmq_status get_num(const cfg *c, const cJSON *obj, const char *key, bool required, double dflt, double lo,
                          double hi, double *out)
{
    const cJSON *v = member(obj, key);
    if (!v || cJSON_IsNull(v)) {
        if (required) return lmq_error(LMQ_ERR_FORMAT, "%s: required key '%s' is missing", c->file, key);
        *out = dflt;
        return LMQ_OK;
    }
    if (!cJSON_IsNumber(v) || !(v->valuedouble > lo && v->valuedouble < hi))
        return lmq_error(LMQ_ERR_FORMAT, "%s: '%s' must be a number in (%g, %g)", c->file, key, lo, hi);
    *out = v->valuedouble;
    return LMQ_OK;
}

static lmq_status get_bool(const cfg *c, const char *key, bool dflt, bool *out)
{
    const cJSON *v = item(c, key);
    if (!v) {
        *out = dflt;
        return LMQ_OK;
    }
    if (!cJSON_IsBool(v)) return lmq_error(LMQ_ERR_FORMAT, "%s: '%s' must be true or false", c->file, key);
    *out = cJSON_IsTrue(v);
    return LMQ_OK;
}

static const char *get_str(const cfg *c, const char *key)
{
    const cJSON *v = item(c, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* ---------------------------------------------------------------- family */

typedef enum family { FAM_LLAMA, FAM_MISTRAL } family;

static lmq_status check_family(const cfg *c, family *fam)
{
    const char *mt = get_str(c, "model_type");
    const cJSON *archs = item(c, "architectures");
    const char *arch = NULL;
    if (cJSON_IsArray(archs) && cJSON_IsString(cJSON_GetArrayItem(archs, 0)))
        arch = cJSON_GetArrayItem(archs, 0)->valuestring;
    if (item(c, "model_type") && !mt) return lmq_error(LMQ_ERR_FORMAT, "%s: 'model_type' is not a string", c->file);
    if (!mt && !arch)
        return lmq_error(LMQ_ERR_FORMAT, "%s: required key 'model_type' is missing (and no 'architectures')", c->file);
    if (mt) {
        if (!strcmp(mt, "llama")) *fam = FAM_LLAMA;
        else if (!strcmp(mt, "mistral")) *fam = FAM_MISTRAL;
        else if (!strcmp(mt, "qwen2"))
            return lmq_error(LMQ_ERR_UNSUPPORTED,
                             "%s: model_type 'qwen2' is not supported (its attention has q/k/v biases, which lmq's "
                             "Llama graph lacks)", c->file);
        else
            return lmq_error(LMQ_ERR_UNSUPPORTED,
                             "%s: model_type '%.64s' is not supported (lmq converts llama and mistral models)", c->file,
                             mt);
    } else {
        if (!strcmp(arch, "LlamaForCausalLM")) *fam = FAM_LLAMA;
        else if (!strcmp(arch, "MistralForCausalLM")) *fam = FAM_MISTRAL;
        else
            return lmq_error(LMQ_ERR_UNSUPPORTED,
                             "%s: architecture '%.64s' is not supported (no model_type; lmq converts "
                             "LlamaForCausalLM and MistralForCausalLM)", c->file, arch);
    }
    if (arch && strcmp(arch, "LlamaForCausalLM") && strcmp(arch, "MistralForCausalLM"))
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: architecture '%.64s' is not a Llama/Mistral causal LM", c->file,
                         arch);
    const char *act = get_str(c, "hidden_act");
    if (item(c, "hidden_act") && (!act || strcmp(act, "silu")))
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: hidden_act '%.32s' is not supported (the Llama graph uses silu)",
                         c->file, act ? act : "?");
    bool bias = false;
    lmq_status s;
    if ((s = get_bool(c, "attention_bias", false, &bias))) return s;
    if (bias) return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: attention_bias is true (lmq's Llama graph has no biases)", c->file);
    if ((s = get_bool(c, "mlp_bias", false, &bias))) return s;
    if (bias) return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: mlp_bias is true (lmq's Llama graph has no biases)", c->file);
    return LMQ_OK;
}

/* ---------------------------------------------------------------- rope scaling */

static lmq_status rope_scaling(const cfg *c, lmq_meta *m)
{
    const cJSON *rs = item(c, "rope_scaling");
    if (!rs) return LMQ_OK;
    if (!cJSON_IsObject(rs)) return lmq_error(LMQ_ERR_FORMAT, "%s: 'rope_scaling' must be an object or null", c->file);
    const cJSON *ty = member(rs, "rope_type");
    if (!ty) ty = member(rs, "type");
    if (!cJSON_IsString(ty)) return lmq_error(LMQ_ERR_FORMAT, "%s: 'rope_scaling' has no 'rope_type' string", c->file);
    const char *type = ty->valuestring;
    if (!strcmp(type, "default")) return LMQ_OK;
    bool llama3 = !strcmp(type, "llama3");
    if (!llama3 && strcmp(type, "linear"))
        return lmq_error(LMQ_ERR_UNSUPPORTED,
                         "%s: rope_scaling type '%.32s' is not supported (linear and llama3 are)", c->file, type);
    double factor = 1, lo = 1, hi = 4;
    lmq_status s;
    if ((s = get_num(c, rs, "factor", true, 1, 0, 1e6, &factor))) return s;
    if ((s = lmq_meta_set_str(m, "llama.rope.scaling.type", type))) return s;
    if ((s = lmq_meta_set_f32(m, "llama.rope.scaling.factor", (float)factor))) return s;
    if (!llama3) return LMQ_OK;
    if ((s = get_num(c, rs, "low_freq_factor", true, 1, 0, 1e6, &lo))) return s;
    if ((s = get_num(c, rs, "high_freq_factor", true, 4, 0, 1e6, &hi))) return s;
    if (!(hi > lo))
        return lmq_error(LMQ_ERR_FORMAT, "%s: rope_scaling high_freq_factor must exceed low_freq_factor", c->file);
    const cJSON *orig = member(rs, "original_max_position_embeddings");
    int64_t octx;
    if (!orig) return lmq_error(LMQ_ERR_FORMAT, "%s: required key 'original_max_position_embeddings' is missing", c->file);
    if (!as_int(orig, 1, 1 << 24, &octx))
        return lmq_error(LMQ_ERR_FORMAT, "%s: 'original_max_position_embeddings' must be an integer in [1, 2^24]",
                         c->file);
    if ((s = lmq_meta_set_f32(m, "llama.rope.scaling.low_freq_factor", (float)lo))) return s;
    if ((s = lmq_meta_set_f32(m, "llama.rope.scaling.high_freq_factor", (float)hi))) return s;
    return lmq_meta_set_u32(m, "llama.rope.scaling.original_context_length", (uint32_t)octx);
}

/* ---------------------------------------------------------------- special tokens */

/* bos/eos ids: an integer, or (eos, in Llama 3.x) a list whose first entry
 * becomes tokenizer.ggml.eos_token_id and all of which go to lmq.eos_token_ids. */
static lmq_status special_ids(const cfg *c, int64_t n_vocab, lmq_meta *m)
{
    int64_t v;
    lmq_status s;
    if (item(c, "bos_token_id")) {
        if ((s = get_int(c, "bos_token_id", true, 0, 0, n_vocab - 1, &v))) return s;
        if ((s = lmq_meta_set_u32(m, "tokenizer.ggml.bos_token_id", (uint32_t)v))) return s;
    }
    const cJSON *eos = item(c, "eos_token_id");
    if (!eos) return LMQ_OK;
    if (!cJSON_IsArray(eos)) {
        if ((s = get_int(c, "eos_token_id", true, 0, 0, n_vocab - 1, &v))) return s;
        return lmq_meta_set_u32(m, "tokenizer.ggml.eos_token_id", (uint32_t)v);
    }
    int n = cJSON_GetArraySize(eos);
    if (n < 1 || n > 64) return lmq_error(LMQ_ERR_FORMAT, "%s: 'eos_token_id' list of %d entries (1..64)", c->file, n);
    uint32_t ids[64];
    int i = 0;
    for (const cJSON *e = eos->child; e; e = e->next, i++) {
        if (!as_int(e, 0, n_vocab - 1, &v))
            return lmq_error(LMQ_ERR_FORMAT, "%s: 'eos_token_id' entries must be token ids below %lld", c->file,
                             (long long)n_vocab);
        ids[i] = (uint32_t)v;
    }
    if ((s = lmq_meta_set_u32(m, "tokenizer.ggml.eos_token_id", ids[0]))) return s;
    return lmq_meta_set_arr(m, "lmq.eos_token_ids", LMQ_V_U32, ids, (uint64_t)n);
}

/* ---------------------------------------------------------------- main */

static lmq_status fill(const cfg *c, const char *model_name, lmq_meta *m)
{
    family fam = FAM_LLAMA;
    lmq_status s = check_family(c, &fam);
    if (s) return s;
    int64_t n_embd, n_ff, n_layer, n_head, n_head_kv, n_vocab, head_dim, n_ctx;
    if ((s = get_int(c, "hidden_size", true, 0, 1, 1 << 20, &n_embd))) return s;
    if ((s = get_int(c, "intermediate_size", true, 0, 1, 1 << 22, &n_ff))) return s;
    if ((s = get_int(c, "num_hidden_layers", true, 0, 1, 4096, &n_layer))) return s;
    if ((s = get_int(c, "num_attention_heads", true, 0, 1, 4096, &n_head))) return s;
    if ((s = get_int(c, "num_key_value_heads", false, n_head, 1, n_head, &n_head_kv))) return s;
    if ((s = get_int(c, "vocab_size", true, 0, 1, 1 << 24, &n_vocab))) return s;
    if ((s = get_int(c, "max_position_embeddings", false, 2048, 1, 1 << 24, &n_ctx))) return s;
    if (n_head % n_head_kv)
        return lmq_error(LMQ_ERR_FORMAT, "%s: num_attention_heads %lld is not a multiple of num_key_value_heads %lld",
                         c->file, (long long)n_head, (long long)n_head_kv);
    if (!item(c, "head_dim") && n_embd % n_head)
        return lmq_error(LMQ_ERR_FORMAT, "%s: hidden_size %lld is not a multiple of num_attention_heads %lld", c->file,
                         (long long)n_embd, (long long)n_head);
    if ((s = get_int(c, "head_dim", false, n_embd / n_head, 2, 1024, &head_dim))) return s;
    if (head_dim % 2) return lmq_error(LMQ_ERR_FORMAT, "%s: head_dim %lld is odd (RoPE needs pairs)", c->file, (long long)head_dim);
    if (fam == FAM_MISTRAL && item(c, "sliding_window")) {
        int64_t win;
        if ((s = get_int(c, "sliding_window", true, 0, 1, 1 << 24, &win))) return s;
        if (win < n_ctx) n_ctx = win; /* exact within the window */
    }
    double eps = 1e-6, theta = 10000.0;
    if ((s = get_num(c, c->root, "rms_norm_eps", false, 1e-6, 0, 1, &eps))) return s;
    if ((s = get_num(c, c->root, "rope_theta", false, 10000.0, 0, 1e12, &theta))) return s;
    bool tied = false;
    if ((s = get_bool(c, "tie_word_embeddings", false, &tied))) return s;

    const char *mt = get_str(c, "model_type");
    if ((s = lmq_meta_set_str(m, "general.architecture", "llama"))) return s;
    if (model_name && (s = lmq_meta_set_str(m, "general.name", model_name))) return s;
#define U32(key, v) if ((s = lmq_meta_set_u32(m, key, (uint32_t)(v)))) return s
    U32("llama.block_count", n_layer);
    U32("llama.context_length", n_ctx);
    U32("llama.embedding_length", n_embd);
    U32("llama.feed_forward_length", n_ff);
    U32("llama.attention.head_count", n_head);
    U32("llama.attention.head_count_kv", n_head_kv);
    U32("llama.attention.key_length", head_dim);
    U32("llama.attention.value_length", head_dim);
    U32("llama.rope.dimension_count", head_dim);
    U32("llama.vocab_size", n_vocab);
#undef U32
    if ((s = lmq_meta_set_f32(m, "llama.rope.freq_base", (float)theta))) return s;
    if ((s = lmq_meta_set_f32(m, "llama.attention.layer_norm_rms_epsilon", (float)eps))) return s;
    if ((s = rope_scaling(c, m))) return s;
    if ((s = lmq_meta_set_bool(m, "lmq.tie_word_embeddings", tied))) return s;
    if ((s = lmq_meta_set_str(m, "lmq.source.model_type", mt ? mt : fam == FAM_MISTRAL ? "mistral" : "llama")))
        return s;
    return special_ids(c, n_vocab, m);
}

lmq_status lmq_hf_config_parse(const char *json, size_t len, const char *file, const char *model_name, lmq_meta *meta)
{
    if (!file) file = "config.json";
    if (!json || !meta) return lmq_error(LMQ_ERR_INVALID_ARG, "%s: no input or no metadata", file);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, false);
    if (!root) {
        size_t at = end && end >= json && end <= json + len ? (size_t)(end - json) : 0;
        return lmq_error(LMQ_ERR_FORMAT, "%s: not valid JSON (near byte %zu)", file, at);
    }
    lmq_status s;
    if (!cJSON_IsObject(root)) {
        s = lmq_error(LMQ_ERR_FORMAT, "%s: not a JSON object", file);
    } else {
        cfg c = {root, file};
        s = fill(&c, model_name, meta);
    }
    cJSON_Delete(root);
    return s;
}

/* Base name of a directory path, ignoring trailing slashes ("a/b/" -> "b"). */
static void dir_base_name(const char *dir, char *out, size_t cap)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && dir[b - 1] != '/') b--;
    snprintf(out, cap, "%.*s", (int)(n - b), dir + b);
    if (!strcmp(out, ".") || !strcmp(out, "..") || !*out) {
        char *real = realpath(dir, NULL);
        if (real) {
            const char *s = strrchr(real, '/');
            snprintf(out, cap, "%s", s && s[1] ? s + 1 : real);
            free(real);
        }
    }
}

lmq_status lmq_hf_config_to_meta(const char *dir, lmq_meta *meta)
{
    char path[4096], name[512];
    if (!dir || snprintf(path, sizeof path, "%s/config.json", dir) >= (int)sizeof path)
        return lmq_error(LMQ_ERR_INVALID_ARG, "config.json: bad directory path");
    char *text = NULL;
    size_t len = 0;
    lmq_status s = lmq_read_file(path, CONFIG_MAX_BYTES, &text, &len);
    if (s) return s;
    dir_base_name(dir, name, sizeof name);
    s = lmq_hf_config_parse(text, len, path, name, meta);
    free(text);
    return s;
}
