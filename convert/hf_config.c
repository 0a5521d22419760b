/* Hugging Face config.json -> general.* / <arch>.* metadata (GGUF key names).
 *
 * The family comes from model_type (or architectures[0]) through the
 * architecture descriptors (formats/arch.c); only configurations whose
 * forward pass lmq computes exactly are accepted (the activation, biases
 * and RoPE scaling are checked). Mistral is Llama plus a sliding attention
 * window on every layer; for contexts no longer than the window the two
 * agree, so the context length is capped at the window (as llama.cpp's
 * llama architecture ignores the window). Gemma and Phi-3 windows are kept
 * and applied per layer. docs/MODELS.md lists the keys per family. */
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

/* Metadata writers under the architecture's prefix. */
static lmq_status put_u32(lmq_meta *m, const lmq_arch *a, const char *sfx, int64_t v)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", a->name, sfx);
    return lmq_meta_set_u32(m, key, (uint32_t)v);
}

static lmq_status put_f32(lmq_meta *m, const lmq_arch *a, const char *sfx, double v)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", a->name, sfx);
    return lmq_meta_set_f32(m, key, (float)v);
}

static lmq_status put_str(lmq_meta *m, const lmq_arch *a, const char *sfx, const char *v)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", a->name, sfx);
    return lmq_meta_set_str(m, key, v);
}

static lmq_status check_family(const cfg *c, const lmq_arch **out)
{
    const char *mt = get_str(c, "model_type");
    const cJSON *archs = item(c, "architectures");
    const char *cls = NULL;
    if (cJSON_IsArray(archs) && cJSON_IsString(cJSON_GetArrayItem(archs, 0)))
        cls = cJSON_GetArrayItem(archs, 0)->valuestring;
    if (item(c, "model_type") && !mt) return lmq_error(LMQ_ERR_FORMAT, "%s: 'model_type' is not a string", c->file);
    if (!mt && !cls)
        return lmq_error(LMQ_ERR_FORMAT, "%s: required key 'model_type' is missing (and no 'architectures')", c->file);
    const lmq_arch *a = lmq_arch_by_hf(mt, mt ? NULL : cls);
    if (!a)
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: %s '%.64s' is not supported (lmq converts the families %s)", c->file,
                         mt ? "model_type" : "architecture", mt ? mt : cls, lmq_arch_names());
    if (cls && !lmq_arch_by_hf(NULL, cls))
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: architecture '%.64s' is not a causal LM lmq converts (%s family)",
                         c->file, cls, a->name);
    *out = a;
    return LMQ_OK;
}

/* The config's activation names for each of the graph's activations.
 * gpt-oss configs say "silu" although its experts always compute the
 * clamped SwiGLU (transformers ignores the key there). */
static const char *const k_act_names[][3] = {
    [LMQ_ACT_SILU] = {"silu", NULL, NULL},
    [LMQ_ACT_GELU_TANH] = {"gelu_pytorch_tanh", "gelu_tanh", NULL},
    [LMQ_ACT_SWIGLU_OAI] = {"silu", NULL, NULL},
};

/* gpt-oss's clamped SwiGLU: the runtime (like llama.cpp) has limit 7 and
 * alpha 1.702 built in, so a checkpoint must have those. */
#define SWIGLU_OAI_LIMIT 7.0

/* The activation and bias flags must be what the family's graph computes. */
static lmq_status check_block(const cfg *c, const lmq_arch *a)
{
    static const char *const keys[] = {"hidden_activation", "hidden_act"};
    for (int i = 0; i < 2; i++) {
        if (!item(c, keys[i])) continue;
        const char *act = get_str(c, keys[i]);
        bool ok = false;
        for (int k = 0; k < 3 && act && k_act_names[a->act][k]; k++) ok |= !strcmp(act, k_act_names[a->act][k]);
        if (!ok)
            return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: %s '%.32s' is not supported for %s (it uses %s)", c->file, keys[i],
                             act ? act : "?", a->name, k_act_names[a->act][0]);
        break; /* Gemma 2 configs carry both; hidden_activation wins, as in transformers */
    }
    lmq_status s;
    if (a->act == LMQ_ACT_SWIGLU_OAI) {
        double limit;
        if ((s = get_num(c, c->root, "swiglu_limit", false, SWIGLU_OAI_LIMIT, 0, 1e9, &limit))) return s;
        if (limit != SWIGLU_OAI_LIMIT)
            return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: swiglu_limit %g is not supported for %s (lmq's clamped SwiGLU "
                             "has limit %g and alpha 1.702 built in, as llama.cpp's)", c->file, limit, a->name,
                             SWIGLU_OAI_LIMIT);
    }
    bool bias = false;
    if ((s = get_bool(c, "attention_bias", false, &bias))) return s;
    if (bias && !lmq_arch_tensor_of(a, LMQ_TK_ATTN_Q_BIAS))
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: attention_bias is true, which %s does not have", c->file, a->name);
    if ((s = get_bool(c, "mlp_bias", false, &bias))) return s;
    if (bias) return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: mlp_bias is true (lmq's graphs have no MLP biases)", c->file);
    if (a->id == LMQ_ARCH_QWEN2 || a->id == LMQ_ARCH_QWEN3) {
        bool sw = false;
        if ((s = get_bool(c, "use_sliding_window", false, &sw))) return s;
        if (sw)
            return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: use_sliding_window is true (Qwen's mixed window layers are not supported)",
                             c->file);
    }
    return LMQ_OK;
}

/* ---------------------------------------------------------------- rope scaling */

/* LongRoPE factor list of n entries -> lmq.rope.factors_<which> (convert
 * writes it as the rope_factors_<which>.weight tensor llama.cpp reads). */
static lmq_status longrope_list(const cfg *c, const cJSON *rs, const char *which, int64_t n, lmq_meta *m)
{
    char key[32];
    snprintf(key, sizeof key, "%s_factor", which);
    const cJSON *l = member(rs, key);
    if (!cJSON_IsArray(l) || cJSON_GetArraySize(l) != n)
        return lmq_error(LMQ_ERR_FORMAT, "%s: rope_scaling.%s must be a list of %lld numbers (rotary dims / 2)", c->file,
                         key, (long long)n);
    float v[512];
    int i = 0;
    for (const cJSON *e = l->child; e; e = e->next, i++) {
        if (!cJSON_IsNumber(e) || !(e->valuedouble > 0 && e->valuedouble < 1e9))
            return lmq_error(LMQ_ERR_FORMAT, "%s: rope_scaling.%s[%d] must be a positive number", c->file, key, i);
        v[i] = (float)e->valuedouble;
    }
    char mkey[64];
    snprintf(mkey, sizeof mkey, "lmq.rope.factors_%s", which);
    return lmq_meta_set_arr(m, mkey, LMQ_V_F32, v, (uint64_t)n);
}

/* The RoPE description: rope_scaling, or (transformers >= 5) rope_parameters,
 * which also holds rope_theta and partial_rotary_factor. NULL when absent. */
static const char *rope_obj_key(const cfg *c)
{
    return item(c, "rope_scaling") ? "rope_scaling" : item(c, "rope_parameters") ? "rope_parameters" : NULL;
}

/* A RoPE number: in rope_parameters when that object has it, else at the top level. */
static lmq_status rope_num(const cfg *c, const char *key, double dflt, double lo, double hi, double *out)
{
    const cJSON *rp = item(c, "rope_parameters");
    const cJSON *obj = cJSON_IsObject(rp) && member(rp, key) ? rp : c->root;
    return get_num(c, obj, key, false, dflt, lo, hi, out);
}

/* YaRN (gpt-oss; Hugging Face's _compute_yarn_parameters): llama.cpp's
 * rope.scaling.* keys plus lmq.rope.yarn_truncate. Hugging Face rounds the
 * correction range [low, high] to whole dimensions only when `truncate` is
 * true (its default; gpt-oss says false); ggml always rounds and a GGUF has
 * no key for it, so the runtime follows lmq.rope.yarn_truncate where a file
 * has it and ggml's rounding where not. The attention factor is Hugging
 * Face's default 0.1 ln(factor) + 1, which is also what ggml computes;
 * another one is refused. */
static lmq_status yarn_keys(const cfg *c, const cJSON *rs, const char *rkey, const lmq_arch *a, int64_t n_ctx,
                            lmq_meta *m)
{
    lmq_status s;
    double factor, fast, slow, af;
    if ((s = get_num(c, rs, "factor", true, 1, 0, 1e6, &factor))) return s;
    if (factor < 1) return lmq_error(LMQ_ERR_FORMAT, "%s: %s.factor %g is below 1", c->file, rkey, factor);
    if ((s = get_num(c, rs, "beta_fast", false, 32, 0, 1e6, &fast))) return s;
    if ((s = get_num(c, rs, "beta_slow", false, 1, 0, 1e6, &slow))) return s;
    /* Hugging Face's attention factor: attention_factor, else get_mscale(factor, mscale) /
     * get_mscale(factor, mscale_all_dim) when both are given, else get_mscale(factor);
     * get_mscale(s, m) = 0.1 m ln s + 1 (1 for s <= 1) */
    const double af_default = factor > 1 ? 0.1 * log(factor) + 1.0 : 1.0;
    double ms = 0, ms_all = 0;
    if ((s = get_num(c, rs, "mscale", false, 0, -1e6, 1e6, &ms))) return s;
    if ((s = get_num(c, rs, "mscale_all_dim", false, 0, -1e6, 1e6, &ms_all))) return s;
    double af_hf = af_default;
    if (ms != 0 && ms_all != 0 && factor > 1) af_hf = (0.1 * ms * log(factor) + 1.0) / (0.1 * ms_all * log(factor) + 1.0);
    if ((s = get_num(c, rs, "attention_factor", false, af_hf, 0, 1e6, &af))) return s;
    int64_t orig = n_ctx;
    const cJSON *o = member(rs, "original_max_position_embeddings");
    if (o && !as_int(o, 1, 1 << 24, &orig))
        return lmq_error(LMQ_ERR_FORMAT, "%s: %s.original_max_position_embeddings must be an integer in [1, 2^24]",
                         c->file, rkey);
    bool truncate = true;
    const cJSON *tr = member(rs, "truncate");
    if (tr && !cJSON_IsNull(tr)) {
        if (!cJSON_IsBool(tr)) return lmq_error(LMQ_ERR_FORMAT, "%s: %s.truncate must be true or false", c->file, rkey);
        truncate = cJSON_IsTrue(tr);
    }
    if ((s = put_str(m, a, "rope.scaling.type", "yarn"))) return s;
    if ((s = put_f32(m, a, "rope.scaling.factor", factor))) return s;
    if ((s = put_u32(m, a, "rope.scaling.original_context_length", orig))) return s;
    if ((s = put_f32(m, a, "rope.scaling.yarn_beta_fast", fast))) return s;
    if ((s = put_f32(m, a, "rope.scaling.yarn_beta_slow", slow))) return s;
    if (fabs(af - af_default) > 1e-6 * af_default) {
        /* llama.cpp's attn_factor multiplies ggml's own 1 + 0.1 ln(factor) */
        if ((s = put_f32(m, a, "rope.scaling.attn_factor", af / af_default))) return s;
    }
    if (ms_all != 0 && (s = put_f32(m, a, "rope.scaling.yarn_log_multiplier", ms_all))) return s;
    /* Llama 4's query temperature (Ministral 3): q *= 1 + beta ln(1 + floor(pos / original context)) */
    double beta = 0;
    if ((s = get_num(c, rs, "llama_4_scaling_beta", false, 0, -1e-9, 1e6, &beta))) return s;
    if (beta > 0) {
        if (a->id != LMQ_ARCH_MISTRAL3)
            return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: %s.llama_4_scaling_beta is only supported for mistral3", c->file,
                             rkey);
        if ((s = put_f32(m, a, "attention.temperature_scale", beta))) return s;
    }
    return lmq_meta_set_bool(m, "lmq.rope.yarn_truncate", truncate);
}

static lmq_status rope_scaling(const cfg *c, const lmq_arch *a, int64_t n_rot, int64_t n_ctx, lmq_meta *m)
{
    const char *rkey = rope_obj_key(c);
    if (!rkey) return LMQ_OK;
    const cJSON *rs = item(c, rkey);
    if (!cJSON_IsObject(rs)) return lmq_error(LMQ_ERR_FORMAT, "%s: '%s' must be an object or null", c->file, rkey);
    const cJSON *ty = member(rs, "rope_type");
    if (!ty) ty = member(rs, "type");
    if (!ty && !strcmp(rkey, "rope_parameters")) return LMQ_OK; /* only rope_theta and friends */
    if (!cJSON_IsString(ty)) return lmq_error(LMQ_ERR_FORMAT, "%s: '%s' has no 'rope_type' string", c->file, rkey);
    const char *type = ty->valuestring;
    if (!strcmp(type, "default")) return LMQ_OK;
    lmq_status s;
    if ((!strcmp(type, "longrope") || !strcmp(type, "su")) && a->id == LMQ_ARCH_PHI3) {
        if (n_rot / 2 > 512) return lmq_error(LMQ_ERR_LIMIT, "%s: %lld rotary dimensions", c->file, (long long)n_rot);
        int64_t orig;
        if ((s = get_int(c, "original_max_position_embeddings", true, 0, 1, 1 << 24, &orig))) return s;
        if ((s = longrope_list(c, rs, "long", n_rot / 2, m))) return s;
        if ((s = longrope_list(c, rs, "short", n_rot / 2, m))) return s;
        /* Hugging Face's Phi-3 attention factor (llama.cpp's converter writes the same) */
        double scale = (double)n_ctx / (double)orig, af = 1.0;
        const cJSON *f = member(rs, "attention_factor");
        if (cJSON_IsNumber(f)) af = f->valuedouble;
        else if (scale > 1.0) af = sqrt(1.0 + log(scale) / log((double)orig));
        if ((s = put_f32(m, a, "rope.scaling.attn_factor", af))) return s;
        return put_u32(m, a, "rope.scaling.original_context_length", orig);
    }
    if (!strcmp(type, "yarn") && (a->id == LMQ_ARCH_GPT_OSS || a->id == LMQ_ARCH_MISTRAL3))
        return yarn_keys(c, rs, rkey, a, n_ctx, m);
    bool llama3 = !strcmp(type, "llama3");
    if (!(llama3 && a->id == LMQ_ARCH_LLAMA) && strcmp(type, "linear"))
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: %s type '%.32s' is not supported for %s", c->file, rkey, type,
                         a->name);
    double factor = 1, lo = 1, hi = 4;
    if ((s = get_num(c, rs, "factor", true, 1, 0, 1e6, &factor))) return s;
    if ((s = put_str(m, a, "rope.scaling.type", type))) return s;
    if ((s = put_f32(m, a, "rope.scaling.factor", factor))) return s;
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
    if ((s = put_f32(m, a, "rope.scaling.low_freq_factor", lo))) return s;
    if ((s = put_f32(m, a, "rope.scaling.high_freq_factor", hi))) return s;
    return put_u32(m, a, "rope.scaling.original_context_length", octx);
}

/* ---------------------------------------------------------------- sliding window, soft-caps */

/* Per-layer window flags: config's layer_types when present, else the
 * family's pattern (sliding_window_pattern overrides Gemma 3's period). */
static lmq_status window_layers(const cfg *c, const lmq_arch *a, int64_t n_layer, lmq_meta *m)
{
    bool *sw = calloc((size_t)n_layer, sizeof *sw);
    if (!sw) return lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", c->file);
    lmq_status s = LMQ_OK;
    const cJSON *lt = item(c, "layer_types");
    if (lt) {
        if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != n_layer) {
            s = lmq_error(LMQ_ERR_FORMAT, "%s: 'layer_types' must list %lld layers", c->file, (long long)n_layer);
            goto out;
        }
        int i = 0;
        for (const cJSON *e = lt->child; e; e = e->next, i++) {
            if (!cJSON_IsString(e) || (strcmp(e->valuestring, "sliding_attention") && strcmp(e->valuestring, "full_attention"))) {
                s = lmq_error(LMQ_ERR_FORMAT, "%s: layer_types[%d] must be sliding_attention or full_attention", c->file, i);
                goto out;
            }
            sw[i] = !strcmp(e->valuestring, "sliding_attention");
        }
    } else {
        int64_t period = a->swa_period;
        if (a->swa == LMQ_SWA_PERIOD && (s = get_int(c, "sliding_window_pattern", false, period, 1, 4096, &period)))
            goto out;
        for (int64_t i = 0; i < n_layer; i++)
            sw[i] = a->swa == LMQ_SWA_ALL ? true : a->swa == LMQ_SWA_EVEN ? i % 2 == 0 : (i + 1) % period != 0;
    }
    char key[128];
    snprintf(key, sizeof key, "lmq.attention.sliding_window_layers");
    s = lmq_meta_set_arr(m, key, LMQ_V_BOOL, sw, (uint64_t)n_layer);
out:
    free(sw);
    return s;
}

static lmq_status window_cap_scale_keys(const cfg *c, const lmq_arch *a, int64_t n_layer, lmq_meta *m)
{
    lmq_status s;
    double cap = 0, qs = 0, base = a->rope_theta_swa;
    if ((s = get_num(c, c->root, "attn_logit_softcapping", false, 0, 0, 1e9, &cap))) return s;
    if (cap > 0 && (s = put_f32(m, a, "attn_logit_softcapping", cap))) return s;
    if ((s = get_num(c, c->root, "final_logit_softcapping", false, 0, 0, 1e9, &cap))) return s;
    if (cap > 0 && (s = put_f32(m, a, "final_logit_softcapping", cap))) return s;
    if ((s = get_num(c, c->root, "query_pre_attn_scalar", false, 0, 0, 1e9, &qs))) return s;
    if (qs > 0 && (s = put_f32(m, a, "attention.scale", 1.0 / sqrt(qs)))) return s;
    if (a->rope_theta_swa > 0) {
        if ((s = get_num(c, c->root, "rope_local_base_freq", false, base, 0, 1e12, &base))) return s;
        if ((s = put_f32(m, a, "rope.freq_base_swa", base))) return s;
    }
    int64_t win = 0;
    if ((s = get_int(c, "sliding_window", false, 0, 0, 1 << 24, &win))) return s;
    if (win > 0) {
        if ((s = put_u32(m, a, "attention.sliding_window", win))) return s;
        if ((s = window_layers(c, a, n_layer, m))) return s;
    }
    return LMQ_OK;
}

/* ---------------------------------------------------------------- Gated DeltaNet layers */

/* rope.dimension_sections: mrope_section (rope_parameters, or the older
 * rope_scaling) + zeros to 4 entries, i32 as llama.cpp's loader requires;
 * [11, 11, 10, 0] when the config has none, as llama.cpp's converter
 * writes it. Text positions are equal on every axis, so the sections do
 * not change the rotation. */
static lmq_status mrope_sections(const cfg *c, const lmq_arch *a, lmq_meta *m)
{
    int32_t sec[4] = {11, 11, 10, 0};
    const char *rkey = rope_obj_key(c);
    const cJSON *l = rkey ? member(item(c, rkey), "mrope_section") : NULL;
    if (l) {
        if (!cJSON_IsArray(l) || cJSON_GetArraySize(l) < 1 || cJSON_GetArraySize(l) > 4)
            return lmq_error(LMQ_ERR_FORMAT, "%s: %s.mrope_section must be a list of 1 to 4 integers", c->file, rkey);
        int i = 0;
        int64_t v;
        memset(sec, 0, sizeof sec);
        for (const cJSON *e = l->child; e; e = e->next, i++) {
            if (!as_int(e, 0, 4096, &v))
                return lmq_error(LMQ_ERR_FORMAT, "%s: %s.mrope_section[%d] must be an integer in [0, 4096]", c->file,
                                 rkey, i);
            sec[i] = (int32_t)v;
        }
    }
    char key[128];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", a->name);
    return lmq_meta_set_arr(m, key, LMQ_V_I32, sec, 4);
}

/* Which layers are recurrent: layer_types ("linear_attention" /
 * "full_attention") when present, else every interval-th layer is full
 * attention, as Hugging Face and llama.cpp decide it. */
static lmq_status recurrent_layers(const cfg *c, int64_t n_layer, int64_t interval, lmq_meta *m)
{
    bool *rec = calloc((size_t)n_layer, sizeof *rec);
    if (!rec) return lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", c->file);
    lmq_status s = LMQ_OK;
    const cJSON *lt = item(c, "layer_types");
    if (lt) {
        if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != n_layer) {
            s = lmq_error(LMQ_ERR_FORMAT, "%s: 'layer_types' must list num_hidden_layers = %lld layers (it has %d)",
                          c->file, (long long)n_layer, cJSON_IsArray(lt) ? cJSON_GetArraySize(lt) : 0);
            goto out;
        }
        int i = 0;
        for (const cJSON *e = lt->child; e; e = e->next, i++) {
            if (!cJSON_IsString(e) || (strcmp(e->valuestring, "linear_attention") && strcmp(e->valuestring, "full_attention"))) {
                s = lmq_error(LMQ_ERR_FORMAT, "%s: layer_types[%d] must be linear_attention or full_attention", c->file, i);
                goto out;
            }
            rec[i] = !strcmp(e->valuestring, "linear_attention");
        }
    } else {
        for (int64_t i = 0; i < n_layer; i++) rec[i] = (i + 1) % interval != 0;
    }
    s = lmq_meta_set_arr(m, "lmq.layer.recurrent", LMQ_V_BOOL, rec, (uint64_t)n_layer);
out:
    free(rec);
    return s;
}

/* Qwen3.5 (SPEC 1.2-1.3): the linear-attention geometry under llama.cpp's
 * ssm.* keys, full_attention_interval, rope.dimension_sections, and
 * lmq.layer.recurrent. The gated attention is the only kind lmq computes. */
static lmq_status hybrid_keys(const cfg *c, const lmq_arch *a, int64_t n_layer, lmq_meta *m)
{
    lmq_status s;
    bool gate = true;
    if ((s = get_bool(c, "attn_output_gate", true, &gate))) return s;
    if (!gate)
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: attn_output_gate is false, but lmq's %s attention always applies "
                         "the output gate (q_proj holds query and gate rows)", c->file, a->name);
    int64_t kc, dk, dv, nk, nv, interval;
    if ((s = get_int(c, "linear_conv_kernel_dim", true, 0, 1, 64, &kc))) return s;
    if ((s = get_int(c, "linear_key_head_dim", true, 0, 1, 1024, &dk))) return s;
    if ((s = get_int(c, "linear_value_head_dim", true, 0, 1, 1024, &dv))) return s;
    if ((s = get_int(c, "linear_num_key_heads", true, 0, 1, 1024, &nk))) return s;
    if ((s = get_int(c, "linear_num_value_heads", true, 0, 1, 4096, &nv))) return s;
    if ((s = get_int(c, "full_attention_interval", false, 4, 1, 4096, &interval))) return s;
    if (nv % nk)
        return lmq_error(LMQ_ERR_FORMAT, "%s: linear_num_value_heads %lld is not a multiple of linear_num_key_heads %lld",
                         c->file, (long long)nv, (long long)nk);
    if ((s = put_u32(m, a, "ssm.conv_kernel", kc))) return s;
    if ((s = put_u32(m, a, "ssm.state_size", dk))) return s;
    if ((s = put_u32(m, a, "ssm.group_count", nk))) return s;
    if ((s = put_u32(m, a, "ssm.time_step_rank", nv))) return s;
    if ((s = put_u32(m, a, "ssm.inner_size", dv * nv))) return s;
    if ((s = put_u32(m, a, "full_attention_interval", interval))) return s;
    if ((s = mrope_sections(c, a, m))) return s;
    return recurrent_layers(c, n_layer, interval, m);
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

/* ---------------------------------------------------------------- Gemma 4 */

/* rope_parameters.<kind>: its rope_theta; for full_attention also the
 * proportional RoPE's rotated pairs (Hugging Face's
 * _compute_proportional_rope_parameters: int(partial * head_dim // 2)). */
static lmq_status gemma4_rope(const cfg *c, const char *kind, int64_t hd, double *theta, int64_t *pairs)
{
    const cJSON *rp = item(c, "rope_parameters"), *r = cJSON_IsObject(rp) ? member(rp, kind) : NULL;
    if (!cJSON_IsObject(r))
        return lmq_error(LMQ_ERR_FORMAT, "%s: rope_parameters.%s must be an object", c->file, kind);
    lmq_status s;
    if ((s = get_num(c, r, "rope_theta", true, 0, 0, 1e12, theta))) return s;
    const cJSON *ty = member(r, "rope_type");
    const char *type = cJSON_IsString(ty) ? ty->valuestring : "default";
    double factor = 1, partial = 1;
    if ((s = get_num(c, r, "factor", false, 1, 0, 1e6, &factor))) return s;
    if ((s = get_num(c, r, "partial_rotary_factor", false, 1, 0, 1 + 1e-9, &partial))) return s;
    const bool full = pairs != NULL;
    if (strcmp(type, full ? "proportional" : "default") || factor != 1 || (!full && partial != 1))
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: rope_parameters.%s (rope_type '%.32s', factor %g, partial %g) is not "
                         "supported: lmq runs Gemma 4's %s RoPE without scaling", c->file, kind, type, factor, partial,
                         full ? "proportional" : "default");
    if (full) *pairs = (int64_t)floor(partial * (double)hd / 2);
    return LMQ_OK;
}

/* One key per layer as llama.cpp writes them (u32 array). */
static lmq_status put_layer_arr(lmq_meta *m, const lmq_arch *a, const char *sfx, const int64_t *v, int64_t n)
{
    uint32_t *u = malloc((size_t)n * sizeof *u);
    if (!u) return lmq_error(LMQ_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) u[i] = (uint32_t)v[i];
    char key[128];
    snprintf(key, sizeof key, "%s.%s", a->name, sfx);
    lmq_status s = lmq_meta_set_arr(m, key, LMQ_V_U32, u, (uint64_t)n);
    free(u);
    return s;
}

/* Gemma 4 (SPEC.md 3.1-3.2; transformers' Gemma4TextConfig): head sizes per
 * layer kind, layer_types as llama.cpp's sliding_window_pattern, shared KV,
 * double-wide MLPs and K = V layers as per-layer arrays, per-layer
 * embeddings, the global layers' proportional RoPE as the divisors llama.cpp
 * keeps in rope_freqs.weight (lmq.rope.freq_factors; convert writes the
 * tensor). The MoE block is not supported yet. */
static lmq_status gemma4_keys(const cfg *c, const lmq_arch *a, int64_t n_layer, int64_t n_ff, int64_t n_kv,
                              int64_t n_vocab, lmq_meta *m)
{
    lmq_status s;
    bool moe = false, wide = false, keqv = false;
    if ((s = get_bool(c, "enable_moe_block", false, &moe))) return s;
    if (moe) { /* experts beside the dense MLP in every layer (26B-A4B) */
        int64_t ne, nu, fe;
        if ((s = get_int(c, "num_experts", true, 0, 1, 4096, &ne))) return s;
        if ((s = get_int(c, "top_k_experts", true, 0, 1, ne, &nu))) return s;
        if ((s = get_int(c, "moe_intermediate_size", true, 0, 1, 1 << 22, &fe))) return s;
        if ((s = put_u32(m, a, "expert_count", ne))) return s;
        if ((s = put_u32(m, a, "expert_used_count", nu))) return s;
        if ((s = put_u32(m, a, "expert_feed_forward_length", fe))) return s;
    }
    int64_t hd, hd_g, shared, ple, vple, win, nkv_g, pairs;
    double theta_s, theta_g, cap;
    if ((s = get_int(c, "head_dim", false, 256, 2, 1024, &hd))) return s;
    if ((s = get_int(c, "global_head_dim", false, hd, 2, 1024, &hd_g))) return s;
    if (hd % 2 || hd_g % 2) return lmq_error(LMQ_ERR_FORMAT, "%s: head_dim / global_head_dim must be even", c->file);
    if ((s = get_int(c, "num_kv_shared_layers", false, 0, 0, n_layer - 1, &shared))) return s;
    if ((s = get_int(c, "hidden_size_per_layer_input", false, 0, 0, 1 << 16, &ple))) return s;
    if ((s = get_int(c, "vocab_size_per_layer_input", false, n_vocab, 1, 1 << 24, &vple))) return s;
    if (ple > 0 && vple != n_vocab)
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: vocab_size_per_layer_input %lld differs from vocab_size %lld",
                         c->file, (long long)vple, (long long)n_vocab);
    if ((s = get_int(c, "sliding_window", false, 0, 0, 1 << 24, &win))) return s;
    if ((s = get_bool(c, "use_double_wide_mlp", false, &wide))) return s;
    if ((s = get_bool(c, "attention_k_eq_v", false, &keqv))) return s;
    if ((s = get_int(c, "num_global_key_value_heads", false, n_kv, 1, 4096, &nkv_g))) return s;
    if ((s = get_num(c, c->root, "final_logit_softcapping", false, 0, -1e-9, 1e9, &cap))) return s;
    if ((s = gemma4_rope(c, "sliding_attention", hd, &theta_s, NULL))) return s;
    if ((s = gemma4_rope(c, "full_attention", hd_g, &theta_g, &pairs))) return s;
    /* layer kinds: layer_types, else 5 sliding : 1 full with the last layer full (Gemma4TextConfig) */
    bool *sw = calloc((size_t)n_layer, sizeof *sw);
    int64_t *v = calloc((size_t)n_layer, sizeof *v);
    float *ff = calloc((size_t)hd_g / 2, sizeof *ff);
    if (!sw || !v || !ff) {
        s = lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", c->file);
        goto out;
    }
    const cJSON *lt = item(c, "layer_types");
    if (lt && (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != n_layer)) {
        s = lmq_error(LMQ_ERR_FORMAT, "%s: 'layer_types' must list %lld layers", c->file, (long long)n_layer);
        goto out;
    }
    for (int64_t i = 0; i < n_layer; i++) {
        const cJSON *e = lt ? cJSON_GetArrayItem(lt, (int)i) : NULL;
        if (lt && (!cJSON_IsString(e) || (strcmp(e->valuestring, "sliding_attention") &&
                                          strcmp(e->valuestring, "full_attention")))) {
            s = lmq_error(LMQ_ERR_FORMAT, "%s: layer_types[%lld] must be sliding_attention or full_attention", c->file,
                          (long long)i);
            goto out;
        }
        sw[i] = lt ? !strcmp(e->valuestring, "sliding_attention") : (i + 1) % 6 != 0 && i != n_layer - 1;
    }
#define U32(sfx, x) if ((s = put_u32(m, a, sfx, x))) goto out
    U32("attention.key_length", hd_g);
    U32("attention.value_length", hd_g);
    U32("attention.key_length_swa", hd);
    U32("attention.value_length_swa", hd);
    U32("rope.dimension_count", hd_g);
    U32("rope.dimension_count_swa", hd);
    if (win > 0) U32("attention.sliding_window", win);
    if (shared > 0) U32("attention.shared_kv_layers", shared);
    U32("embedding_length_per_layer_input", ple); /* 0 too: ik_llama.cpp's loader requires the key */
#undef U32
    if ((s = put_f32(m, a, "rope.freq_base", theta_g))) goto out;
    if ((s = put_f32(m, a, "rope.freq_base_swa", theta_s))) goto out;
    if (cap > 0 && (s = put_f32(m, a, "final_logit_softcapping", cap))) goto out;
    char key[128];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", a->name);
    if ((s = lmq_meta_set_arr(m, key, LMQ_V_BOOL, sw, (uint64_t)n_layer))) goto out;
    /* double-wide MLP on the shared-KV layers (Gemma4TextMLP) */
    if (wide && shared > 0) {
        for (int64_t i = 0; i < n_layer; i++) v[i] = i >= n_layer - shared ? 2 * n_ff : n_ff;
        if ((s = put_layer_arr(m, a, "feed_forward_length", v, n_layer))) goto out;
    }
    /* K = V on global layers, with their own KV head count (Gemma4TextAttention) */
    if (keqv && nkv_g != n_kv) {
        for (int64_t i = 0; i < n_layer; i++) v[i] = sw[i] ? n_kv : nkv_g;
        if ((s = put_layer_arr(m, a, "attention.head_count_kv", v, n_layer))) goto out;
    }
    for (int64_t i = 0; i < hd_g / 2; i++) ff[i] = i < pairs ? 1.0f : 1e30f;
    s = lmq_meta_set_arr(m, "lmq.rope.freq_factors", LMQ_V_F32, ff, (uint64_t)(hd_g / 2));
out:
    free(sw);
    free(v);
    free(ff);
    return s;
}

/* ---------------------------------------------------------------- main */

/* Mixture of experts: Qwen3-MoE (num_experts, moe_intermediate_size,
 * norm_topk_prob) and Mixtral (num_local_experts; experts as wide as
 * intermediate_size). Which layers are sparse (decoder_sparse_step,
 * mlp_only_layers) the checkpoint's tensors say. */
/* SmolLM3's layers without RoPE: config's no_rope_layers (1 = RoPE, 0 =
 * none, one per layer) or every no_rope_layer_interval-th layer, as
 * transformers' SmolLM3Config derives it; written as lmq.rope.nope_layers
 * (true = no RoPE). */
static lmq_status nope_keys(const cfg *c, const lmq_arch *a, int64_t n_layer, lmq_meta *m)
{
    if (a->nope_interval <= 0) return LMQ_OK;
    bool *nope = calloc((size_t)n_layer, sizeof *nope);
    if (!nope) return lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", c->file);
    lmq_status s = LMQ_OK;
    const cJSON *l = item(c, "no_rope_layers");
    if (l) {
        if (!cJSON_IsArray(l) || cJSON_GetArraySize(l) != n_layer) {
            s = lmq_error(LMQ_ERR_FORMAT, "%s: 'no_rope_layers' must list %lld layers", c->file, (long long)n_layer);
            goto out;
        }
        int i = 0;
        for (const cJSON *e = l->child; e; e = e->next, i++) {
            int64_t v;
            if (!as_int(e, 0, 1, &v)) {
                s = lmq_error(LMQ_ERR_FORMAT, "%s: no_rope_layers[%d] must be 0 or 1", c->file, i);
                goto out;
            }
            nope[i] = v == 0;
        }
    } else {
        int64_t every;
        if ((s = get_int(c, "no_rope_layer_interval", false, a->nope_interval, 1, 4096, &every))) goto out;
        for (int64_t i = 0; i < n_layer; i++) nope[i] = (i + 1) % every == 0;
    }
    s = lmq_meta_set_arr(m, "lmq.rope.nope_layers", LMQ_V_BOOL, nope, (uint64_t)n_layer);
out:
    free(nope);
    return s;
}

static lmq_status moe_keys(const cfg *c, const lmq_arch *a, int64_t n_ff, lmq_meta *m)
{
    lmq_status s;
    int64_t n_exp = 0, n_used = 0, ff_exp = n_ff;
    const char *key = item(c, "num_experts") ? "num_experts" : "num_local_experts";
    if ((s = get_int(c, key, false, 0, 0, 4096, &n_exp))) return s;
    if (n_exp == 0) return LMQ_OK;
    if (!lmq_arch_tensor_of(a, LMQ_TK_FFN_GATE_EXPS))
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: '%s' is set but %s has no experts in lmq", c->file, key, a->name);
    int64_t ff_sh = 0;
    if (item(c, "n_shared_experts") ||
        (item(c, "shared_expert_intermediate_size") && !lmq_arch_tensor_of(a, LMQ_TK_FFN_GATE_SHEXP)))
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: shared experts are not supported for %s", c->file, a->name);
    if ((s = get_int(c, "shared_expert_intermediate_size", false, 0, 0, 1 << 22, &ff_sh))) return s;
    if (ff_sh > 0 && (s = put_u32(m, a, "expert_shared_feed_forward_length", ff_sh))) return s;
    /* gpt-oss configs carry both num_experts_per_tok and experts_per_token */
    const char *used_key = item(c, "num_experts_per_tok") || !item(c, "experts_per_token") ? "num_experts_per_tok"
                                                                                         : "experts_per_token";
    if ((s = get_int(c, used_key, true, 0, 1, n_exp, &n_used))) return s;
    if ((s = get_int(c, "moe_intermediate_size", false, n_ff, 1, 1 << 22, &ff_exp))) return s;
    if ((s = put_u32(m, a, "expert_count", n_exp))) return s;
    if ((s = put_u32(m, a, "expert_used_count", n_used))) return s;
    /* a family without a dense FFN (gpt-oss: experts as wide as intermediate_size) always names the
     * experts' width, as llama.cpp's loader requires it there */
    const bool no_dense = !lmq_arch_tensor_of(a, LMQ_TK_FFN_GATE) && !lmq_arch_tensor_of(a, LMQ_TK_FFN_UP);
    if ((item(c, "moe_intermediate_size") || no_dense) && (s = put_u32(m, a, "expert_feed_forward_length", ff_exp)))
        return s;
    bool norm = a->moe_norm_topk;
    if ((s = get_bool(c, "norm_topk_prob", norm, &norm))) return s;
    /* Qwen3.5-MoE's router renormalises whatever norm_topk_prob says (as in transformers) */
    if (item(c, "norm_topk_prob") && a->id != LMQ_ARCH_QWEN35MOE) {
        char k[128];
        snprintf(k, sizeof k, "%s.expert_weights_norm", a->name);
        if ((s = lmq_meta_set_bool(m, k, norm))) return s;
    }
    return LMQ_OK;
}

/* Gemma 3's text defaults (transformers' Gemma3TextConfig): the multimodal
 * checkpoints' text_config often lists only what differs from them. */
typedef struct text_default {
    const char *key;
    double v;
} text_default;

static const text_default k_gemma3_text_defaults[] = {
    {"vocab_size", 262208}, {"hidden_size", 2304}, {"intermediate_size", 9216}, {"num_hidden_layers", 26},
    {"num_attention_heads", 8}, {"num_key_value_heads", 4}, {"head_dim", 256}, {"max_position_embeddings", 131072},
    {"rms_norm_eps", 1e-6}, {"rope_theta", 1000000.0}, {"query_pre_attn_scalar", 256}, {"sliding_window", 4096},
    {"rope_local_base_freq", 10000.0}, {"sliding_window_pattern", 6},
};

/* Multimodal wrappers (model_type) whose language model's config is
 * text_config, with the text model's defaults to fill in (or none). */
static const struct {
    const char *model_type, *text_model_type;
    const text_default *defaults;
    size_t n_defaults;
} k_wrappers[] = {
    {"gemma3", "gemma3_text", k_gemma3_text_defaults, sizeof k_gemma3_text_defaults / sizeof k_gemma3_text_defaults[0]},
    {"qwen3_5", "qwen3_5_text", NULL, 0},         /* Qwen3_5ForConditionalGeneration */
    {"qwen3_5_moe", "qwen3_5_moe_text", NULL, 0}, /* Qwen3_5MoeForConditionalGeneration */
    {"mistral3", "ministral3", NULL, 0},          /* Mistral3ForConditionalGeneration (Ministral 3) */
    {"gemma4", "gemma4_text", NULL, 0},           /* Gemma4ForConditionalGeneration */
};

static lmq_status fill(const cfg *c, const char *model_name, lmq_meta *m)
{
    const lmq_arch *a = NULL;
    lmq_status s = check_family(c, &a);
    if (s) return s;
    const char *mt = get_str(c, "model_type");
    size_t wi = 0, n_wrappers = sizeof k_wrappers / sizeof k_wrappers[0];
    while (mt && wi < n_wrappers && strcmp(mt, k_wrappers[wi].model_type)) wi++;
    if (mt && wi < n_wrappers) {
        /* the language model's config is text_config */
        const cJSON *tc = item(c, "text_config");
        if (!cJSON_IsObject(tc))
            return lmq_error(LMQ_ERR_FORMAT, "%s: %s config has no 'text_config' object", c->file, mt);
        cJSON *copy = cJSON_Duplicate(tc, true);
        if (!copy) return lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", c->file);
        for (size_t i = 0; i < k_wrappers[wi].n_defaults; i++)
            if (!member(copy, k_wrappers[wi].defaults[i].key))
                cJSON_AddNumberToObject(copy, k_wrappers[wi].defaults[i].key, k_wrappers[wi].defaults[i].v);
        if (!member(copy, "model_type")) cJSON_AddStringToObject(copy, "model_type", k_wrappers[wi].text_model_type);
        cfg inner = {copy, c->file};
        /* the top level's tie_word_embeddings (if any) wins over text_config's */
        const cJSON *tie = item(c, "tie_word_embeddings");
        if (tie && cJSON_IsBool(tie)) {
            cJSON_DeleteItemFromObject(copy, "tie_word_embeddings");
            cJSON_AddBoolToObject(copy, "tie_word_embeddings", cJSON_IsTrue(tie));
        }
        /* bos/eos usually live at the top level */
        static const char *const ids[] = {"bos_token_id", "eos_token_id"};
        for (int i = 0; i < 2; i++)
            if (!member(copy, ids[i]) && item(c, ids[i])) cJSON_AddItemToObject(copy, ids[i], cJSON_Duplicate(item(c, ids[i]), true));
        s = fill(&inner, model_name, m);
        cJSON_Delete(copy);
        if (!s) s = lmq_meta_set_str(m, "lmq.source.model_type", mt);
        return s;
    }
    if ((s = check_block(c, a))) return s;
    int64_t n_embd, n_ff, n_layer, n_head, n_head_kv, n_vocab, head_dim, n_ctx;
    if ((s = get_int(c, "hidden_size", true, 0, 1, 1 << 20, &n_embd))) return s;
    /* expert-only models (Qwen3.5-MoE) have no dense width */
    const bool experts_only = (item(c, "num_experts") || item(c, "num_local_experts")) && item(c, "moe_intermediate_size");
    if ((s = get_int(c, "intermediate_size", !experts_only, 0, 1, 1 << 22, &n_ff))) return s;
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
    double prf = 1.0;
    if ((s = rope_num(c, "partial_rotary_factor", 1.0, 0, 1.0 + 1e-9, &prf))) return s;
    int64_t n_rot = (int64_t)(head_dim * prf + 0.5);
    if (n_rot < 2 || n_rot % 2)
        return lmq_error(LMQ_ERR_FORMAT, "%s: partial_rotary_factor %g gives %lld rotary dimensions (must be even)",
                         c->file, prf, (long long)n_rot);
    bool mistral = mt && (!strcmp(mt, "mistral") || !strcmp(mt, "ministral3"));
    if (mistral && item(c, "sliding_window")) {
        int64_t win;
        if ((s = get_int(c, "sliding_window", true, 0, 1, 1 << 24, &win))) return s;
        if (win < n_ctx) n_ctx = win; /* exact within the window */
    }
    double eps = 1e-6, theta = 10000.0;
    if ((s = get_num(c, c->root, "rms_norm_eps", false, 1e-6, 0, 1, &eps))) return s;
    if ((s = rope_num(c, "rope_theta", 10000.0, 0, 1e12, &theta))) return s;
    bool tied = false;
    if ((s = get_bool(c, "tie_word_embeddings", a->tied_default, &tied))) return s;

    if ((s = lmq_meta_set_str(m, "general.architecture", a->name))) return s;
    if (model_name && (s = lmq_meta_set_str(m, "general.name", model_name))) return s;
#define U32(sfx, v) if ((s = put_u32(m, a, sfx, v))) return s
    U32("block_count", n_layer);
    U32("context_length", n_ctx);
    U32("embedding_length", n_embd);
    if (n_ff > 0) U32("feed_forward_length", n_ff);
    U32("attention.head_count", n_head);
    U32("attention.head_count_kv", n_head_kv);
    U32("attention.key_length", head_dim);
    U32("attention.value_length", head_dim);
    U32("rope.dimension_count", n_rot);
    U32("vocab_size", n_vocab);
#undef U32
    if ((s = put_f32(m, a, "rope.freq_base", theta))) return s;
    if ((s = put_f32(m, a, "attention.layer_norm_rms_epsilon", eps))) return s;
    if ((s = rope_scaling(c, a, n_rot, n_ctx, m))) return s;
    if (a->id == LMQ_ARCH_GEMMA2 || a->id == LMQ_ARCH_GEMMA3 || a->id == LMQ_ARCH_PHI3 || a->id == LMQ_ARCH_GPT_OSS) {
        if ((s = window_cap_scale_keys(c, a, n_layer, m))) return s;
    }
    if (a->id == LMQ_ARCH_GEMMA4 && (s = gemma4_keys(c, a, n_layer, n_ff, n_head_kv, n_vocab, m))) return s;
    if (a->id != LMQ_ARCH_GEMMA4 && (s = moe_keys(c, a, n_ff, m))) return s; /* Gemma 4: gemma4_keys */
    if ((s = nope_keys(c, a, n_layer, m))) return s;
    if (a->hybrid && (s = hybrid_keys(c, a, n_layer, m))) return s;
    if ((s = lmq_meta_set_bool(m, "lmq.tie_word_embeddings", tied))) return s;
    if ((s = lmq_meta_set_str(m, "lmq.source.model_type", mt ? mt : a->hf_model_type[0]))) return s;
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
