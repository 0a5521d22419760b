/* The model: loading a .lmq/.gguf file of any family in formats/arch.c,
 * every tensor checked against the descriptor and the metadata.
 *
 * Shapes follow ggml: a weight [out, in] has ne = {in, out} and is stored
 * row-major, one row of `in` elements per output. All activations are f32;
 * RoPE, softmax and norms are computed in f32 (sums in double where cheap). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "lmq_runtime.h"
#include "kernels.h"
#include "model_internal.h"

/* ================================================================ loading */

static lmq_status meta_i32(const lmq_meta *m, const char *arch, const char *suffix, int32_t *out,
                           bool required, int32_t dflt)
{
    char key[256];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int64_t v;
    lmq_status s = lmq_meta_get_i64(m, key, &v);
    if (s == LMQ_ERR_NOT_FOUND && !required) {
        *out = dflt;
        return LMQ_OK;
    }
    if (s) return s;
    if (v < 0 || v > INT32_MAX) return lmq_error(LMQ_ERR_FORMAT, "metadata key '%s': value %lld out of range", key, (long long)v);
    *out = (int32_t)v;
    return LMQ_OK;
}

static lmq_status meta_f32(const lmq_meta *m, const char *arch, const char *suffix, float *out, float dflt)
{
    char key[256];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    double v;
    lmq_status s = lmq_meta_get_f64(m, key, &v);
    if (s == LMQ_ERR_NOT_FOUND) {
        *out = dflt;
        return LMQ_OK;
    }
    if (s) return s;
    *out = (float)v;
    return LMQ_OK;
}

static lmq_status read_hparams(lmq_model *md)
{
    const lmq_meta *m = lmq_file_meta(md->file);
    const char *path = lmq_file_path(md->file);
    lmq_hparams *hp = &md->hp;
    const char *arch;
    lmq_status s = lmq_meta_get_str(m, "general.architecture", &arch, NULL);
    if (s) return lmq_error(s, "%s: metadata key 'general.architecture' is missing", path);
    const lmq_arch *a = md->arch = lmq_arch_by_name(arch);
    if (!a)
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: architecture '%.64s' is not supported (lmq runs %s)", path, arch,
                         lmq_arch_names());
    lmq_arch_dims d;
    char key[256];
    if ((s = lmq_arch_dims_from_meta(m, a, path, &d))) return s;
    md->dims = d;
    hp->arch = a->id;
    hp->act = a->act;
    hp->n_layer = (int32_t)d.n_layer;
    hp->n_embd = (int32_t)d.n_embd;
    hp->n_ff = (int32_t)d.n_ff;
    hp->n_head = (int32_t)d.n_head;
    hp->n_head_kv = (int32_t)d.n_head_kv;
    hp->head_dim = (int32_t)d.head_dim;
    hp->n_rot = (int32_t)d.n_rot;
    hp->n_expert = (int32_t)d.n_expert;
    hp->n_expert_used = (int32_t)d.n_expert_used;
    hp->n_ff_exp = (int32_t)d.n_ff_exp;
    hp->n_ff_shexp = (int32_t)d.n_ff_shexp;
    hp->moe_norm = a->moe_norm_topk;
    snprintf(key, sizeof key, "%s.expert_weights_norm", arch);
    if (lmq_meta_get_bool(m, key, &hp->moe_norm) == LMQ_ERR_FORMAT)
        return lmq_error(LMQ_ERR_FORMAT, "%s: metadata key '%s' is not a bool", path, key);
    if ((s = meta_i32(m, arch, "context_length", &hp->n_ctx_train, false, 2048))) return s;
    if ((s = meta_f32(m, arch, "attention.layer_norm_rms_epsilon", &hp->rms_eps, 1e-5f))) return s;
    if ((s = meta_f32(m, arch, "rope.freq_base", &hp->rope_theta, 10000.0f))) return s;
    /* rope scaling */
    const char *stype = NULL;
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    if (lmq_meta_get_str(m, key, &stype, NULL) != LMQ_OK) stype = NULL;
    hp->rope_scaling_type = 0;
    if (stype && !strcmp(stype, "linear")) hp->rope_scaling_type = 1;
    if (stype && !strcmp(stype, "llama3")) hp->rope_scaling_type = 2;
    if (stype && !strcmp(stype, "yarn")) hp->rope_scaling_type = 3;
    if (stype && strcmp(stype, "none") && !hp->rope_scaling_type)
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: rope scaling type '%s' is not supported", path, stype);
    if ((s = meta_f32(m, arch, "rope.scaling.factor", &hp->rope_factor, 1.0f))) return s;
    if ((s = meta_f32(m, arch, "rope.scaling.low_freq_factor", &hp->rope_low_freq_factor, 1.0f))) return s;
    if ((s = meta_f32(m, arch, "rope.scaling.high_freq_factor", &hp->rope_high_freq_factor, 4.0f))) return s;
    if ((s = meta_i32(m, arch, "rope.scaling.original_context_length", &hp->rope_orig_ctx, false, 8192))) return s;
    if ((s = meta_f32(m, arch, "rope.scaling.attn_factor", &hp->rope_attn_factor, 1.0f))) return s;
    if (hp->rope_scaling_type && !(hp->rope_factor > 0))
        return lmq_error(LMQ_ERR_FORMAT, "%s: rope scaling factor must be positive", path);
    if (hp->rope_scaling_type == 3) {
        /* YaRN: llama.cpp's defaults; cos and sin carry 1 + 0.1 ln(factor) times rope.scaling.attn_factor */
        if ((s = meta_f32(m, arch, "rope.scaling.yarn_beta_fast", &md->yarn_beta_fast, 32.0f))) return s;
        if ((s = meta_f32(m, arch, "rope.scaling.yarn_beta_slow", &md->yarn_beta_slow, 1.0f))) return s;
        if (!(md->yarn_beta_fast > 0) || !(md->yarn_beta_slow > 0) || !isfinite(md->yarn_beta_fast) ||
            !isfinite(md->yarn_beta_slow))
            return lmq_error(LMQ_ERR_FORMAT, "%s: %s.rope.scaling.yarn_beta_fast/slow must be positive", path, arch);
        md->yarn_truncate = true;
        if (lmq_meta_get_bool(m, "lmq.rope.yarn_truncate", &md->yarn_truncate) == LMQ_ERR_FORMAT)
            return lmq_error(LMQ_ERR_FORMAT, "%s: metadata key 'lmq.rope.yarn_truncate' is not a bool", path);
        lmq_error_clear();
    }
    if (!(hp->rope_attn_factor > 0) || !isfinite(hp->rope_attn_factor))
        return lmq_error(LMQ_ERR_FORMAT, "%s: %s.rope.scaling.attn_factor must be positive", path, arch);
    if (hp->rope_scaling_type == 3) {
        /* YaRN's attention factor on cos and sin: llama.cpp's attn_factor key times 1 + 0.1 ln(factor) as
         * ggml computes it; a file with rope.scaling.yarn_log_multiplier (mscale_all_dim) and no
         * attn_factor key means Hugging Face's get_mscale(factor, mscale) / get_mscale(factor,
         * mscale_all_dim) with mscale = mscale_all_dim, i.e. 1 (Ministral 3, as llama.cpp reads it) */
        float log_mul = 0;
        if ((s = meta_f32(m, arch, "rope.scaling.yarn_log_multiplier", &log_mul, 0.0f))) return s;
        snprintf(key, sizeof key, "%s.rope.scaling.attn_factor", arch);
        const bool have_af = lmq_meta_find(m, key) != NULL;
        if (!(log_mul > 0 && !have_af)) hp->rope_attn_factor *= 1.0f + 0.1f * logf(hp->rope_factor);
    }
    if ((s = meta_f32(m, arch, "attention.temperature_scale", &md->attn_temp_beta, 0.0f))) return s;
    if (!(md->attn_temp_beta >= 0) || !isfinite(md->attn_temp_beta))
        return lmq_error(LMQ_ERR_FORMAT, "%s: %s.attention.temperature_scale must be >= 0", path, arch);
    if (md->attn_temp_beta > 0 && hp->rope_orig_ctx <= 0)
        return lmq_error(LMQ_ERR_FORMAT, "%s: %s.attention.temperature_scale needs a positive "
                         "rope.scaling.original_context_length", path, arch);
    /* attention: query scale, soft-caps (llama.cpp's Gemma 2 defaults 50 / 30 when the keys are absent) */
    float dflt_scale = 1.0f / sqrtf((float)hp->head_dim);
    if ((a->id == LMQ_ARCH_GEMMA2 && hp->n_layer == 46) || (a->id == LMQ_ARCH_GEMMA3 && hp->n_layer == 62))
        dflt_scale = 1.0f / sqrtf((float)(hp->n_embd / hp->n_head)); /* the 27B sizes, as llama.cpp */
    if (a->attn_scale_one) dflt_scale = 1.0f;
    if ((s = meta_f32(m, arch, "attention.scale", &hp->attn_scale, dflt_scale))) return s;
    bool gemma2 = a->id == LMQ_ARCH_GEMMA2, gemma4 = a->id == LMQ_ARCH_GEMMA4; /* ik_llama.cpp's Gemma 4 default */
    if ((s = meta_f32(m, arch, "attn_logit_softcapping", &hp->attn_softcap, gemma2 ? 50.0f : 0.0f))) return s;
    if ((s = meta_f32(m, arch, "final_logit_softcapping", &hp->final_softcap, gemma2 || gemma4 ? 30.0f : 0.0f)))
        return s;
    if (!(hp->attn_scale > 0) || !isfinite(hp->attn_scale) || hp->attn_softcap < 0 || hp->final_softcap < 0 ||
        !isfinite(hp->attn_softcap) || !isfinite(hp->final_softcap))
        return lmq_error(LMQ_ERR_FORMAT, "%s: attention scale or soft-cap out of range", path);
    hp->embd_scale = a->embd_scale ? sqrtf((float)hp->n_embd) : 1.0f;
    /* sliding window: per-layer flags from the file, else the family's pattern */
    if ((s = meta_i32(m, arch, "attention.sliding_window", &hp->n_swa, false, 0))) return s;
    hp->rope_theta_swa = a->rope_theta_swa > 0 ? a->rope_theta_swa : hp->rope_theta;
    if ((s = meta_f32(m, arch, "rope.freq_base_swa", &hp->rope_theta_swa, hp->rope_theta_swa))) return s;
    hp->swa_rope_unscaled = a->swa_rope_unscaled;
    /* rope pairing: recorded by lmq; GGUF files from llama.cpp use the
     * interleaved pairing only for the families whose rows it permutes */
    const char *layout = NULL;
    if (lmq_meta_get_str(m, "lmq.rope.layout", &layout, NULL) == LMQ_OK) {
        if (!strcmp(layout, "neox")) hp->rope_layout = LMQ_ROPE_NEOX;
        else if (!strcmp(layout, "normal")) hp->rope_layout = LMQ_ROPE_NORMAL;
        else return lmq_error(LMQ_ERR_FORMAT, "%s: lmq.rope.layout '%s' (expected neox or normal)", path, layout);
    } else {
        hp->rope_layout = lmq_file_kind_of(md->file) == LMQ_FILE_GGUF && a->gguf_rope_permuted ? LMQ_ROPE_NORMAL
                                                                                               : LMQ_ROPE_NEOX;
    }
    lmq_error_clear();
    return LMQ_OK;
}

/* Sliding-window layers: the flags lmq_arch_layers read (llama.cpp's
 * <arch>.attention.sliding_window_pattern, lmq.attention.sliding_window_layers
 * or the family's pattern), kept only when the model has a window; a family
 * with per-kind head sizes keeps them anyway (they choose the head size). */
static void window_layers(lmq_model *md)
{
    lmq_hparams *hp = &md->hp;
    hp->n_swa_layers = 0;
    for (int il = 0; il < hp->n_layer; il++) {
        lmq_layer *L = &md->layers[il];
        if (hp->n_swa <= 0 && !md->arch->swa_heads) L->swa = false;
        hp->n_swa_layers += L->swa && hp->n_swa > 0;
    }
}

/* Finds a tensor and checks its shape; 2-D weights may be of any type the
 * kernels support, 1-D tensors are read as f32. */
static lmq_status get_tensor(lmq_model *md, const char *name, int64_t ne0, int64_t ne1, bool optional,
                             lmq_weight *out)
{
    const char *path = lmq_file_path(md->file);
    const lmq_tensor_info *t = lmq_file_find_tensor(md->file, name);
    memset(out, 0, sizeof *out);
    if (!t) {
        if (optional) return LMQ_OK;
        return lmq_error(LMQ_ERR_NOT_FOUND, "%s: tensor '%s' is missing", path, name);
    }
    int64_t want_dims = ne1 > 0 ? 2 : 1;
    bool ok = t->ne[0] == ne0 && (ne1 > 0 ? t->ne[1] == ne1 : t->ne[1] == 1) && t->ne[2] == 1 && t->ne[3] == 1;
    if (!ok)
        return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s' has shape [%lld, %lld], expected [%lld, %lld] from the metadata",
                         path, name, (long long)t->ne[0], (long long)t->ne[1], (long long)ne0,
                         (long long)(want_dims == 2 ? ne1 : 1));
    if (!lmq_matmul_supported(t->type))
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s, which the kernels do not support", path, name,
                         lmq_type_name(t->type));
    out->type = t->type;
    out->data = t->data;
    out->n_in = t->ne[0];
    out->n_out = ne1 > 0 ? ne1 : 1;
    out->info = t;
    return LMQ_OK;
}

/* A stacked expert tensor [ne0, ne1, ne2] as one weight of ne1 * ne2 rows. */
static lmq_status get_experts(lmq_model *md, const char *name, int64_t ne0, int64_t ne1, int64_t ne2, lmq_weight *out)
{
    const char *path = lmq_file_path(md->file);
    const lmq_tensor_info *t = lmq_file_find_tensor(md->file, name);
    memset(out, 0, sizeof *out);
    if (!t) return lmq_error(LMQ_ERR_NOT_FOUND, "%s: tensor '%s' is missing", path, name);
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != ne2 || t->ne[3] != 1)
        return lmq_error(LMQ_ERR_FORMAT,
                         "%s: tensor '%s' has shape [%lld, %lld, %lld], expected [%lld, %lld, %lld] from the metadata",
                         path, name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)ne0,
                         (long long)ne1, (long long)ne2);
    if (!lmq_matmul_supported(t->type))
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s, which the kernels do not support", path, name,
                         lmq_type_name(t->type));
    out->type = t->type;
    out->data = t->data;
    out->n_in = ne0;
    out->n_out = ne1 * ne2;
    out->info = t;
    return LMQ_OK;
}

/* A 1-D tensor of ne0 elements as an owned f32 vector (tiny; converted
 * once), its first n checked finite; *out stays NULL when an optional
 * tensor is absent. */
static lmq_status get_vec(lmq_model *md, const char *name, int64_t ne0, int64_t n, bool optional, float **out)
{
    *out = NULL;
    lmq_weight w;
    lmq_status s = get_tensor(md, name, ne0, 0, optional, &w);
    if (s || !w.data) return s;
    *out = malloc((size_t)ne0 * sizeof(float));
    if (!*out) return lmq_error(LMQ_ERR_NOMEM, "%s: tensor %s", lmq_file_path(md->file), name);
    s = lmq_dequantize_row(w.type, w.data, *out, ne0);
    if (s) return lmq_error(s, "%s: tensor '%s': cannot read as f32", lmq_file_path(md->file), name);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite((*out)[i]))
            return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s' holds a non-finite value at %lld", lmq_file_path(md->file),
                             name, (long long)i);
    return LMQ_OK;
}

/* A small 2-D tensor (conv taps) as an owned f32 array of n_out rows of n_in. */
static lmq_status get_vec_rows(lmq_model *md, const char *name, const lmq_weight *w, float **out)
{
    const size_t n = (size_t)w->n_in * (size_t)w->n_out, row = (size_t)lmq_row_size(w->type, w->n_in);
    if (!(*out = malloc(n * sizeof(float)))) return lmq_error(LMQ_ERR_NOMEM, "%s: tensor %s", lmq_file_path(md->file), name);
    for (int64_t r = 0; r < w->n_out; r++) {
        float *dst = *out + (size_t)r * (size_t)w->n_in;
        lmq_status s = lmq_dequantize_row(w->type, (const uint8_t *)w->data + (size_t)r * row, dst, w->n_in);
        if (s) return lmq_error(s, "%s: tensor '%s': cannot read as f32", lmq_file_path(md->file), name);
        for (int64_t i = 0; i < w->n_in; i++)
            if (!isfinite(dst[i]))
                return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s' holds a non-finite value in row %lld",
                                 lmq_file_path(md->file), name, (long long)r);
    }
    return LMQ_OK;
}

static lmq_status get_norm(lmq_model *md, const char *name, int64_t n, float **out)
{
    return get_vec(md, name, n, n, false, out);
}

/* An optional vector whose length may be one of two values (q/k norms: per
 * head or whole projection; LongRoPE lists: n_rot/2, or head_dim/2 padded
 * as in ik_llama.cpp's files). */
static lmq_status get_vec2(lmq_model *md, const char *name, int64_t a, int64_t b, int64_t n_used, float **out,
                           int32_t *len)
{
    *out = NULL;
    const lmq_tensor_info *t = lmq_file_find_tensor(md->file, name);
    if (!t) return LMQ_OK;
    int64_t n = t->ne[0] == b ? b : a;
    if (len) *len = (int32_t)n;
    return get_vec(md, name, n, n_used > 0 ? n_used : n, false, out);
}

/* Rows [r0, r0 + n) of a fused weight as a weight of its own (zero copy:
 * quantized rows are independent). */
static lmq_weight row_view(const lmq_weight *w, int64_t r0, int64_t n, bool quiet)
{
    lmq_weight v = *w;
    v.data = (const uint8_t *)w->data + (size_t)r0 * (size_t)lmq_row_size(w->type, w->n_in);
    v.n_out = n;
    v.quiet = quiet;
    return v;
}

/* Where each per-layer tensor kind lives in lmq_layer: a weight (2-D, or
 * 3-D stacked experts) or an owned f32 vector. Load, repack, free and the
 * workspace reservation walk this table; a new tensor kind is one row. */
typedef struct layer_slot {
    lmq_tensor_kind kind;
    size_t off;
    bool vec;
} layer_slot;

#define W(k, f) {LMQ_TK_##k, offsetof(lmq_layer, f), false}
#define V(k, f) {LMQ_TK_##k, offsetof(lmq_layer, f), true}
static const layer_slot k_slots[] = {
    V(ATTN_NORM, attn_norm),       V(FFN_NORM, ffn_norm),         V(ATTN_POST_NORM, attn_post_norm),
    V(FFN_POST_NORM, ffn_post_norm), V(ATTN_Q_BIAS, bq),          V(ATTN_K_BIAS, bk),
    V(ATTN_V_BIAS, bv),            V(ATTN_OUT_BIAS, bo),          V(ATTN_Q_NORM, q_norm),
    V(ATTN_K_NORM, k_norm),        W(ATTN_Q, wq),                 W(ATTN_K, wk),
    W(ATTN_V, wv),                 W(ATTN_QKV, ssm_in),           W(ATTN_OUT, wo),
    W(FFN_GATE, w_gate),           W(FFN_UP, w_up),               W(FFN_DOWN, w_down),
    W(FFN_GATE_INP, gate_inp),     W(FFN_GATE_EXPS, gate_exps),   W(FFN_UP_EXPS, up_exps),
    W(FFN_DOWN_EXPS, down_exps),   V(FFN_GATE_INP_SHEXP, gate_inp_shexp), W(FFN_GATE_SHEXP, gate_shexp),
    W(FFN_UP_SHEXP, up_shexp),     W(FFN_DOWN_SHEXP, down_shexp), W(ATTN_GATE, ssm_z),
    W(SSM_BETA, ssm_beta),         W(SSM_ALPHA, ssm_alpha),       V(SSM_CONV1D, ssm_conv),
    V(SSM_DT, ssm_dt),             V(SSM_A, ssm_a),               V(SSM_NORM, ssm_norm),
    W(SSM_OUT, ssm_out),           V(ATTN_SINKS, sinks),          V(FFN_GATE_INP_BIAS, gate_inp_b),
    V(FFN_GATE_EXPS_BIAS, gate_exps_b), V(FFN_UP_EXPS_BIAS, up_exps_b), V(FFN_DOWN_EXPS_BIAS, down_exps_b),
    W(PER_LAYER_INP_GATE, ple_gate), W(PER_LAYER_PROJ, ple_proj), V(PER_LAYER_POST_NORM, ple_post_norm),
    V(LAYER_OUT_SCALE, out_scale), V(FFN_GATE_INP_SCALE, gate_inp_scale), V(FFN_DOWN_EXPS_SCALE, down_exps_scale),
    V(FFN_PRE_NORM_2, ffn_pre_norm_2), V(FFN_POST_NORM_1, ffn_post_norm_1), V(FFN_POST_NORM_2, ffn_post_norm_2),
    W(FFN_GATE_UP_EXPS, gate_up_exps),
};
#undef W
#undef V
#define N_SLOTS (sizeof k_slots / sizeof k_slots[0])

static lmq_weight *slot_weight(lmq_layer *L, const layer_slot *sl) { return (lmq_weight *)((char *)L + sl->off); }
static float **slot_vec(lmq_layer *L, const layer_slot *sl) { return (float **)(void *)((char *)L + sl->off); }

static const layer_slot *slot_of(lmq_tensor_kind k)
{
    for (size_t i = 0; i < N_SLOTS; i++)
        if (k_slots[i].kind == k) return &k_slots[i];
    return NULL;
}

/* Does descriptor entry `t` belong in a layer of this kind? */
static bool entry_applies(const lmq_arch_tensor *t, bool rec)
{
    return rec ? !(t->flags & LMQ_AT_ATTN) : !(t->flags & LMQ_AT_REC);
}

/* Loads every per-layer tensor the descriptor lists for this layer's kind
 * (shapes from the hyper-parameters), then checks the layer is whole: an
 * attention block or a recurrent block, and a dense FFN or a set of experts. */
static lmq_status load_layer(lmq_model *md, int il, const lmq_arch_dims *dims)
{
    const lmq_hparams *hp = &md->hp;
    const lmq_arch *a = md->arch;
    const char *path = lmq_file_path(md->file);
    lmq_layer *L = &md->layers[il];
    /* this layer's shapes */
    lmq_arch_dims ld = *dims;
    ld.n_head_kv = L->n_head_kv;
    ld.n_ff = L->n_ff;
    ld.head_dim = L->head_dim;
    ld.n_rot = L->n_rot;
    dims = &ld;
    const int64_t hd = L->head_dim, qd = (int64_t)hp->n_head * hd, kvd = (int64_t)L->n_head_kv * hd;
    const bool shared = L->kv_src != il;
    char name[128];
    lmq_status s;
    /* kinds present in the file that this layer cannot have */
    for (int k = 0; k < LMQ_TK_COUNT; k++) {
        if (!lmq_tensor_kind_per_layer((lmq_tensor_kind)k)) continue;
        const lmq_arch_tensor *at = lmq_arch_tensor_of(a, (lmq_tensor_kind)k);
        if (at && entry_applies(at, L->rec)) continue;
        if (lmq_tensor_gguf_name((lmq_tensor_kind)k, il, name, sizeof name) && lmq_file_find_tensor(md->file, name))
            return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: tensor '%s' is not part of %s %s layer", path, name, a->name,
                             L->rec ? "a recurrent" : "an attention");
    }
    for (size_t i = 0; i < a->n_tensors; i++) {
        const lmq_arch_tensor *t = &a->tensors[i];
        if (!lmq_tensor_kind_per_layer(t->kind) || !entry_applies(t, L->rec)) continue;
        const layer_slot *sl = slot_of(t->kind);
        if (!sl || !lmq_tensor_gguf_name(t->kind, il, name, sizeof name))
            return lmq_error(LMQ_ERR_INVALID_ARG, "%s: tensor kind %s has no place in a layer", path,
                             lmq_tensor_kind_name(t->kind));
        const bool optional = (t->flags & LMQ_AT_OPTIONAL) != 0;
        const int64_t ne0 = lmq_arch_dim(dims, t->ne0), ne1 = lmq_arch_dim(dims, t->ne1);
        if (sl->vec) {
            float **dst = slot_vec(L, sl);
            if (t->kind == LMQ_TK_ATTN_Q_NORM || t->kind == LMQ_TK_ATTN_K_NORM) {
                /* per head [head_dim] or over the whole projection */
                int32_t *len = t->kind == LMQ_TK_ATTN_Q_NORM ? &L->q_norm_len : &L->k_norm_len;
                if (!optional && !lmq_file_find_tensor(md->file, name))
                    return lmq_error(LMQ_ERR_NOT_FOUND, "%s: tensor '%s' is missing", path, name);
                if ((s = get_vec2(md, name, hd, t->kind == LMQ_TK_ATTN_Q_NORM ? qd : kvd, 0, dst, len))) return s;
                continue;
            }
            const int64_t n = ne0 * (t->ne1 == LMQ_DIM_1 ? 1 : ne1); /* conv taps: K x C */
            if (t->ne1 == LMQ_DIM_1) {
                if ((s = get_vec(md, name, n, n, optional, dst))) return s;
            } else {
                lmq_weight w;
                if ((s = get_tensor(md, name, ne0, ne1, optional, &w))) return s;
                if (w.data && (s = get_vec_rows(md, name, &w, dst))) return s;
            }
            continue;
        }
        lmq_weight *w = slot_weight(L, sl);
        if (t->ne2 != LMQ_DIM_1) {
            if (!lmq_file_find_tensor(md->file, name)) continue; /* experts: checked as a set below */
            if (hp->n_expert <= 0)
                return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s' but no %s.expert_count", path, name, a->name);
            s = get_experts(md, name, ne0, ne1, lmq_arch_dim(dims, t->ne2), w);
        } else if (t->kind == LMQ_TK_ATTN_Q && a->attn_out_gate) {
            s = get_tensor(md, name, ne0, ne1, optional, w);
            L->attn_gate = true;
        } else {
            s = get_tensor(md, name, ne0, ne1, optional, w);
        }
        if (s) return s;
    }
    if (a->ffn_norm_post_attn) { /* llama.cpp's Qwen3.5 name for the pre-FFN norm */
        L->ffn_norm = L->attn_post_norm;
        L->attn_post_norm = NULL;
    }
    /* fused attention rows Q|K|V (Phi-3): views; the fused weight itself is not kept */
    if (!L->rec && L->ssm_in.data) {
        const lmq_weight qkv = L->ssm_in;
        memset(&L->ssm_in, 0, sizeof L->ssm_in);
        L->wq = row_view(&qkv, 0, qd, false);
        L->wk = row_view(&qkv, qd, kvd, true);
        L->wv = row_view(&qkv, qd + kvd, kvd, true);
    }
    if (a->swa_heads && !L->rec) {
        /* Gemma 4: a shared-KV layer has no keys of its own (any in the file are not read); a layer
         * without attn_v uses its raw keys as values (K = V) */
        if (shared) {
            L->wk = L->wv = (lmq_weight){0};
            free(L->k_norm);
            L->k_norm = NULL;
        } else {
            if (!L->wk.data || !L->k_norm)
                return lmq_error(LMQ_ERR_NOT_FOUND, "%s: tensor 'blk.%d.%s' is missing (layer %d owns its KV cache)",
                                 path, il, !L->wk.data ? "attn_k.weight" : "attn_k_norm.weight", il);
            L->k_eq_v = !L->wv.data;
        }
        if (!L->wq.data || !L->wo.data || !L->attn_norm || !L->q_norm)
            return lmq_error(LMQ_ERR_NOT_FOUND, "%s: layer %d has no complete attention block", path, il);
        if (!L->ple_gate.data != !L->ple_proj.data || !L->ple_gate.data != !L->ple_post_norm ||
            !L->ple_gate.data != (md->n_embd_ple == 0))
            return lmq_error(LMQ_ERR_NOT_FOUND, "%s: layer %d: inp_gate, proj and post_norm come together, when "
                             "%s.embedding_length_per_layer_input is set", path, il, a->name);
    } else if (!L->rec && (!L->wq.data || !L->wk.data || !L->wv.data || !L->wo.data || !L->attn_norm)) {
        return lmq_error(LMQ_ERR_NOT_FOUND, "%s: layer %d has no complete attention block", path, il);
    }
    /* experts' gate|up fused per expert (llama.cpp's Gemma 4 GGUFs): strided views, the fused weight itself
     * is not used (nor reserved: its views are the same rows) */
    if (L->gate_up_exps.data) {
        if (L->gate_exps.data || L->up_exps.data)
            return lmq_error(LMQ_ERR_FORMAT, "%s: layer %d has ffn_gate_up_exps and ffn_gate_exps/ffn_up_exps", path, il);
        const int64_t fe = hp->n_ff_exp;
        L->gate_exps = row_view(&L->gate_up_exps, 0, hp->n_expert * fe, false);
        L->up_exps = row_view(&L->gate_up_exps, fe, hp->n_expert * fe, true);
        L->gate_exps.ex_rows = L->up_exps.ex_rows = 2 * fe;
        L->up_exps.info = L->gate_exps.info; /* one tensor: the observer names it once */
        L->gate_up_exps = (lmq_weight){0};
    }
    /* FFN: experts, separate gate and up, or fused rows gate|up in ffn_up */
    if (L->down_exps.data || L->gate_exps.data || L->up_exps.data) {
        const char *miss = !L->gate_exps.data ? "ffn_gate_exps" : !L->up_exps.data ? "ffn_up_exps"
                         : !L->down_exps.data ? "ffn_down_exps" : !L->gate_inp.data ? "ffn_gate_inp" : NULL;
        if (miss) return lmq_error(LMQ_ERR_NOT_FOUND, "%s: tensor 'blk.%d.%s.weight' is missing", path, il, miss);
        if (lmq_arch_tensor_of(a, LMQ_TK_FFN_GATE_SHEXP)) { /* the shared expert, required where the family has it */
            if (hp->n_ff_shexp <= 0)
                return lmq_error(LMQ_ERR_FORMAT, "%s: %s.expert_shared_feed_forward_length is missing", path, a->name);
            miss = !L->gate_shexp.data ? "ffn_gate_shexp.weight" : !L->up_shexp.data ? "ffn_up_shexp.weight"
                 : !L->down_shexp.data ? "ffn_down_shexp.weight" : !L->gate_inp_shexp ? "ffn_gate_inp_shexp.weight"
                 : NULL;
            if (miss) return lmq_error(LMQ_ERR_NOT_FOUND, "%s: tensor 'blk.%d.%s' is missing", path, il, miss);
        }
        L->moe = true;
        md->hp.n_moe_layers++;
        if (a->swa_heads) { /* Gemma 4: the dense MLP stays, with its own norms and the router's scale */
            miss = !L->w_gate.data ? "ffn_gate.weight" : !L->w_up.data ? "ffn_up.weight"
                 : !L->w_down.data ? "ffn_down.weight" : !L->ffn_pre_norm_2 ? "pre_ffw_norm_2.weight"
                 : !L->ffn_post_norm_1 ? "post_ffw_norm_1.weight" : !L->ffn_post_norm_2 ? "post_ffw_norm_2.weight"
                 : !L->gate_inp_scale ? "ffn_gate_inp.scale" : NULL;
            if (miss) return lmq_error(LMQ_ERR_NOT_FOUND, "%s: tensor 'blk.%d.%s' is missing", path, il, miss);
            L->moe_dense = true;
        }
    } else if (L->w_up.data && !L->w_gate.data && L->w_up.n_out == 2 * (int64_t)L->n_ff) {
        const lmq_weight gu = L->w_up;
        L->w_gate = row_view(&gu, 0, L->n_ff, false);
        L->w_up = row_view(&gu, L->n_ff, L->n_ff, true);
    } else if (!L->w_gate.data || !L->w_up.data || !L->w_down.data) {
        const char *miss = !L->w_down.data ? "ffn_down" : !L->w_gate.data ? "ffn_gate" : "ffn_up";
        return lmq_error(LMQ_ERR_NOT_FOUND, "%s: tensor 'blk.%d.%s.weight' is missing (layer %d has no FFN)", path, il,
                         miss, il);
    }
    if (!L->ffn_norm) return lmq_error(LMQ_ERR_NOT_FOUND, "%s: layer %d has no FFN norm", path, il);
    return LMQ_OK;
}

/* Gemma 4's per-layer embeddings: the token table, the projection of the
 * scaled embedding and its norm (all or none, as the width key says). */
static lmq_status load_ple(lmq_model *md)
{
    const lmq_hparams *hp = &md->hp;
    const char *path = lmq_file_path(md->file);
    const int64_t ple = md->dims.n_embd_ple, all = ple * hp->n_layer;
    md->n_embd_ple = (int32_t)ple;
    lmq_status s;
    if (ple == 0) {
        if (lmq_file_find_tensor(md->file, "per_layer_token_embd.weight"))
            return lmq_error(LMQ_ERR_FORMAT, "%s: tensor 'per_layer_token_embd.weight' but no %s.embedding_length_per_"
                             "layer_input", path, md->arch->name);
        return LMQ_OK;
    }
    const lmq_tensor_info *t = lmq_file_find_tensor(md->file, "per_layer_token_embd.weight");
    if (!t) return lmq_error(LMQ_ERR_NOT_FOUND, "%s: tensor 'per_layer_token_embd.weight' is missing", path);
    if (t->ne[1] != hp->n_vocab)
        return lmq_error(LMQ_ERR_FORMAT, "%s: per_layer_token_embd.weight has %lld rows, token_embd.weight %d", path,
                         (long long)t->ne[1], hp->n_vocab);
    if ((s = get_tensor(md, "per_layer_token_embd.weight", all, hp->n_vocab, false, &md->ple_embd))) return s;
    if ((s = get_tensor(md, "per_layer_model_proj.weight", hp->n_embd, all, false, &md->ple_model_proj))) return s;
    return get_norm(md, "per_layer_proj_norm.weight", ple, &md->ple_proj_norm);
}

static lmq_status load_tensors(lmq_model *md)
{
    lmq_hparams *hp = &md->hp;
    const char *path = lmq_file_path(md->file);
    int64_t d = hp->n_embd;
    lmq_status s;
    const lmq_tensor_info *te = lmq_file_find_tensor(md->file, "token_embd.weight");
    if (!te) return lmq_error(LMQ_ERR_NOT_FOUND, "%s: tensor 'token_embd.weight' is missing", path);
    if (te->ne[1] <= 0 || te->ne[1] > INT32_MAX)
        return lmq_error(LMQ_ERR_FORMAT, "%s: token_embd.weight has %lld rows", path, (long long)te->ne[1]);
    hp->n_vocab = (int32_t)te->ne[1];
    if ((s = get_tensor(md, "token_embd.weight", d, hp->n_vocab, false, &md->tok_embd))) return s;
    if ((s = get_norm(md, "output_norm.weight", d, &md->output_norm))) return s;
    if ((s = get_tensor(md, "output.weight", d, hp->n_vocab, true, &md->output))) return s;
    if (lmq_file_find_tensor(md->file, "rope_freqs.weight")) {
        /* llama.cpp's GGUFs of Llama 3.x carry the scaled frequencies as a
         * tensor of divisors instead of rope.scaling.* keys */
        if ((s = get_norm(md, "rope_freqs.weight", hp->n_rot / 2, &md->rope_freqs))) return s;
        for (int i = 0; i < hp->n_rot / 2; i++)
            if (!(md->rope_freqs[i] > 0))
                return lmq_error(LMQ_ERR_FORMAT, "%s: tensor 'rope_freqs.weight' holds %g at %d (must be positive)",
                                 path, (double)md->rope_freqs[i], i);
    }
    /* LongRoPE divisors (both or neither) */
    const int64_t half = hp->n_rot / 2, padded = hp->head_dim / 2;
    if ((s = get_vec2(md, "rope_factors_long.weight", half, padded, half, &md->rope_long, NULL))) return s;
    if ((s = get_vec2(md, "rope_factors_short.weight", half, padded, half, &md->rope_short, NULL))) return s;
    if (!md->rope_long != !md->rope_short)
        return lmq_error(LMQ_ERR_FORMAT, "%s: rope_factors_long.weight and rope_factors_short.weight come together", path);
    for (int64_t i = 0; md->rope_long && i < half; i++)
        if (!(md->rope_long[i] > 0) || !(md->rope_short[i] > 0))
            return lmq_error(LMQ_ERR_FORMAT, "%s: LongRoPE factor %lld is not positive", path, (long long)i);
    hp->longrope = md->rope_long != NULL;
    md->hp.tied_embeddings = md->output.data == NULL;
    if (md->hp.tied_embeddings) md->output = md->tok_embd;
    md->layers = calloc((size_t)hp->n_layer, sizeof *md->layers);
    bool *rec = calloc((size_t)hp->n_layer, sizeof *rec);
    if (!md->layers || !rec) {
        free(rec);
        return lmq_error(LMQ_ERR_NOMEM, "layers");
    }
    s = lmq_arch_layer_kinds(lmq_file_meta(md->file), md->arch, hp->n_layer, path, rec);
    for (int il = 0; il < hp->n_layer && !s; il++) {
        md->layers[il].rec = rec[il];
        md->ssm.n_rec += rec[il];
    }
    if (!s) s = lmq_arch_nope_layers(lmq_file_meta(md->file), md->arch, hp->n_layer, path, rec);
    for (int il = 0; il < hp->n_layer && !s; il++) md->layers[il].nope = rec[il];
    /* per-layer geometry: KV heads and FFN width may be arrays (llama.cpp's convention), head sizes per
     * kind and shared KV (Gemma 4) */
    lmq_arch_layer *geo = s ? NULL : malloc((size_t)hp->n_layer * sizeof *geo);
    if (!s && !geo) s = lmq_error(LMQ_ERR_NOMEM, "layers");
    if (!s) s = lmq_arch_layers(lmq_file_meta(md->file), md->arch, &md->dims, path, geo);
    md->head_dim_max = hp->head_dim;
    md->n_rot_swa = (int32_t)md->dims.n_rot_swa;
    for (int il = 0; il < hp->n_layer && !s; il++) {
        lmq_layer *L = &md->layers[il];
        if (hp->n_head % geo[il].n_head_kv)
            s = lmq_error(LMQ_ERR_FORMAT, "%s: layer %d has %lld KV heads, not a divisor of %d heads", path, il,
                          (long long)geo[il].n_head_kv, hp->n_head);
        L->n_head_kv = (int32_t)geo[il].n_head_kv;
        L->n_ff = (int32_t)geo[il].n_ff;
        L->head_dim = (int32_t)geo[il].head_dim;
        L->n_rot = (int32_t)geo[il].n_rot;
        L->swa = geo[il].swa;
        L->kv_src = (int32_t)geo[il].kv_src;
        if (L->head_dim > md->head_dim_max) md->head_dim_max = L->head_dim;
        if (L->kv_src != il && md->layers[L->kv_src].rec)
            s = lmq_error(LMQ_ERR_FORMAT, "%s: layer %d shares the KV cache of recurrent layer %d", path, il, L->kv_src);
    }
    free(geo);
    free(rec);
    if (s) return s;
    window_layers(md);
    if ((s = load_ple(md))) return s;
    if (md->ssm.n_rec > 0) {
        const lmq_arch_dims *ad = &md->dims;
        md->ssm.conv = (int32_t)ad->ssm_conv;
        md->ssm.nk = (int32_t)ad->ssm_nk;
        md->ssm.nv = (int32_t)ad->ssm_nv;
        md->ssm.dk = (int32_t)ad->ssm_dk;
        md->ssm.dv = (int32_t)ad->ssm_dv;
        md->ssm.channels = (int32_t)lmq_arch_dim(ad, LMQ_DIM_SSM_CONV);
    }
    for (int il = 0; il < hp->n_layer; il++)
        if ((s = load_layer(md, il, &md->dims))) return s;
    /* totals for info and bench */
    char *p = md->type_summary;
    size_t left = sizeof md->type_summary;
    int counts[LMQ_TYPE_COUNT] = {0};
    for (size_t i = 0; i < lmq_file_n_tensors(md->file); i++) {
        const lmq_tensor_info *t = lmq_file_tensor(md->file, i);
        md->n_params += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
        md->weight_bytes += t->nbytes;
        counts[t->type]++;
    }
    p[0] = 0;
    for (int t = 0; t < LMQ_TYPE_COUNT; t++) {
        if (!counts[t]) continue;
        int n = snprintf(p, left, "%s%s:%d", p == md->type_summary ? "" : " ", lmq_type_name((lmq_type)t), counts[t]);
        if (n < 0 || (size_t)n >= left) break;
        p += n;
        left -= (size_t)n;
    }
    return LMQ_OK;
}

/* Expert tensors and the router: not in model_weights (the experts go
 * through lmq_matmul_multi, repacked per expert by repack_experts). */
static bool slot_is_expert(const layer_slot *sl)
{
    return sl->kind == LMQ_TK_FFN_GATE_INP || sl->kind == LMQ_TK_FFN_GATE_EXPS || sl->kind == LMQ_TK_FFN_UP_EXPS ||
           sl->kind == LMQ_TK_FFN_DOWN_EXPS || sl->kind == LMQ_TK_FFN_GATE_UP_EXPS;
}

/* The matmul weights of a model (the output head as its own view even when
 * tied: the embedding rows stay as they are for lookups). */
static int model_weights(lmq_model *md, lmq_weight **ws, int cap)
{
    int n = 0;
    for (int il = 0; il < md->hp.n_layer; il++)
        for (size_t i = 0; i < N_SLOTS; i++) {
            if (k_slots[i].vec || slot_is_expert(&k_slots[i])) continue;
            lmq_weight *w = slot_weight(&md->layers[il], &k_slots[i]);
            if (w->data && n < cap) ws[n++] = w;
        }
    if (md->output.data && n < cap) ws[n++] = &md->output;
    return n;
}

lmq_status lmq_model_reserve(const lmq_model *md, lmq_workspace *ws, int32_t n_batch, int n_threads)
{
    lmq_status s = lmq_workspace_reserve_threads(ws, md->output.type, md->output.n_in, n_batch, n_threads);
    if (!s && md->ple_model_proj.data)
        s = lmq_workspace_reserve_threads(ws, md->ple_model_proj.type, md->ple_model_proj.n_in, n_batch, n_threads);
    for (int il = 0; il < md->hp.n_layer && !s; il++)
        for (size_t i = 0; i < N_SLOTS && !s; i++) {
            if (k_slots[i].vec) continue;
            const lmq_weight *w = slot_weight(&md->layers[il], &k_slots[i]);
            if (!w->data) continue;
            /* the experts' activations are quantized together: n_batch x n_expert_used rows, twice when
             * the gate and up parts share one lmq_matmul_multi call (moe_ffn) */
            const bool ex = slot_is_expert(&k_slots[i]) && k_slots[i].kind != LMQ_TK_FFN_GATE_INP;
            s = lmq_workspace_reserve_threads(ws, w->type, w->n_in,
                                              ex ? 2 * (int64_t)n_batch * md->hp.n_expert_used : n_batch, n_threads);
        }
    return s;
}

lmq_model_params lmq_model_default_params(void)
{
    lmq_model_params p;
    memset(&p, 0, sizeof p);
    p.repack = -1;
    p.isa = -1;
    return p;
}

#define ARENA_ALIGN 64
#define HUGE_PAGE ((size_t)2 << 20)

static size_t arena_size(int64_t bytes) { return ((size_t)bytes + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1); }

static bool in_arena(const lmq_model *md, const void *p)
{
    return md->repack_arena && (const uint8_t *)p >= md->repack_arena &&
           (const uint8_t *)p < md->repack_arena + md->repack_arena_bytes;
}

/* Frees a repacked copy of `bytes`: its own allocation, or the whole pages
 * it covers in the arena (the arena stays mapped until the model goes). */
static void free_packed(lmq_model *md, void *p, int64_t bytes)
{
    if (!in_arena(md, p)) {
        free(p);
        return;
    }
    const size_t pg = 4096;
    uintptr_t a = ((uintptr_t)p + pg - 1) & ~(uintptr_t)(pg - 1), b = ((uintptr_t)p + arena_size(bytes)) & ~(uintptr_t)(pg - 1);
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

/* One anonymous mapping for all the copies, backed by transparent huge
 * pages where the kernel allows it (generation streams every copy once per
 * token: 2 MiB pages measured 1.07-1.10x tokens/s on AVX2, docs/PERF.md); NULL
 * when it cannot be mapped (each copy is then allocated on its own). */
static uint8_t *arena_map(size_t total, size_t *mapped)
{
    if (!total) return NULL;
    const size_t len = (total + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    void *a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(a, len, MADV_HUGEPAGE); /* advice only: without THP the pages are 4 KiB */
#endif
    *mapped = len;
    return a;
}

/* Memory for a copy of `bytes`: the arena's next bytes, or (no arena, or
 * it is full) an allocation of its own; NULL when neither is there. */
static void *copy_alloc(lmq_model *md, size_t *used, int64_t bytes)
{
    const size_t sz = arena_size(bytes);
    if (md->repack_arena && sz <= md->repack_arena_bytes - *used) {
        void *p = md->repack_arena + *used;
        *used += sz;
        return p;
    }
    return aligned_alloc(ARENA_ALIGN, sz);
}

/* The stacked experts of a tensor view to repack (not the router). */
static lmq_weight *expert_weight(lmq_model *md, int il, size_t i)
{
    if (k_slots[i].vec || !slot_is_expert(&k_slots[i]) || k_slots[i].kind == LMQ_TK_FFN_GATE_INP) return NULL;
    lmq_weight *w = slot_weight(&md->layers[il], &k_slots[i]);
    return w->data ? w : NULL;
}

/* Bytes of the experts' copy of w: n_expert x lmq_repack_bytes of one
 * expert's rows (0: not repacked). */
static int64_t experts_copy_bytes(const lmq_model *md, const lmq_weight *w)
{
    const int64_t E = md->hp.n_expert;
    if (E <= 0 || w->n_out % E) return 0;
    const int64_t per = lmq_repack_bytes(w->type, w->n_out / E, w->n_in);
    if (per <= 0 || per > INT64_MAX / E || (uint64_t)(per * E) > SIZE_MAX - 63) return 0;
    return per * E;
}

/* The stacked experts of one tensor view, repacked expert by expert: expert
 * e's rows (e x ex_rows from the start; ex_rows = the expert's rows unless
 * a fused gate|up view strides over the other half) go to bytes
 * e x lmq_repack_bytes(rows) of the copy, which moe_ffn hands to
 * lmq_matmul_multi. Returns the copy's size, 0 when it was not made. */
static int64_t repack_experts(lmq_model *md, lmq_pool *pool, lmq_weight *w, size_t *used)
{
    const int64_t total = experts_copy_bytes(md, w);
    if (total <= 0) return 0;
    const int64_t E = md->hp.n_expert, rows = w->n_out / E, per = total / E;
    const int64_t step = w->ex_rows ? w->ex_rows : rows, row = lmq_row_size(w->type, w->n_in);
    uint8_t *buf = copy_alloc(md, used, total);
    if (!buf) return 0;
    for (int64_t e = 0; e < E; e++)
        if (lmq_repack(pool, w->type, (const uint8_t *)w->data + e * step * row, rows, w->n_in, buf + e * per)) {
            lmq_error_clear();
            free_packed(md, buf, total);
            return 0;
        }
    w->packed = buf;
    /* the mapped rows are not read again; a fused view's rows alternate with the other view's and stay */
    if (step == rows) lmq_file_release(md->file, w->data, (size_t)row * (size_t)w->n_out);
    return total;
}

/* Repacks the weights the active kernels have a repacked layout for (q4_0,
 * q8_0, iq4_nl, q4_K, iq4_xs on AVX-512 VNNI and AVX2, and MXFP4; on AVX2
 * also q5_K, q6_K; the stacked experts too, one expert at a time: 16 rows
 * interleaved) unless
 * p->repack is 0 (the CLI makes LMQ_REPACK=0 say so). The copies replace the mapped
 * rows in every product while the ISA they were made for is active (the
 * model remembers it); a copy that cannot be allocated leaves its weight as
 * it is. */
static void repack_weights(lmq_model *md, const lmq_model_params *p)
{
    if (p->repack == 0) return;
    md->repack = true;
    /* the layouts of the ISA asked for (lmq_repack_bytes and lmq_repack look it up) */
    lmq_kernel_scope scope = lmq_kernel_scope_enter(p->isa >= 0 ? (lmq_isa)p->isa : LMQ_ISA_COUNT, LMQ_GEMM_MODE_COUNT);
    md->repack_isa = lmq_isa_active();
    int cap = md->hp.n_layer * (int)N_SLOTS + 1, n;
    lmq_weight **ws = malloc((size_t)cap * sizeof *ws);
    if (!ws) {
        lmq_kernel_scope_leave(scope);
        return;
    }
    n = model_weights(md, ws, cap);
    size_t total = 0, used = 0;
    for (int i = 0; i < n; i++) {
        const int64_t bytes = lmq_repack_bytes(ws[i]->type, ws[i]->n_out, ws[i]->n_in);
        if (bytes > 0) total += arena_size(bytes);
    }
    for (int il = 0; il < md->hp.n_layer && md->hp.n_expert > 0; il++)
        for (size_t i = 0; i < N_SLOTS; i++) {
            const lmq_weight *w = expert_weight(md, il, i);
            if (w && experts_copy_bytes(md, w) > 0) total += arena_size(experts_copy_bytes(md, w));
        }
    md->repack_arena = arena_map(total, &md->repack_arena_bytes);
    lmq_pool *pool = NULL;
    for (int i = 0; i < n; i++) {
        lmq_weight *w = ws[i];
        const int64_t bytes = lmq_repack_bytes(w->type, w->n_out, w->n_in);
        if (bytes <= 0) continue;
        if (!pool && lmq_pool_new(p->n_threads > 0 ? p->n_threads : lmq_n_cpus(), &pool)) break;
        void *buf = copy_alloc(md, &used, bytes);
        if (!buf) continue;
        if (lmq_repack(pool, w->type, w->data, w->n_out, w->n_in, buf)) {
            lmq_error_clear();
            free_packed(md, buf, bytes);
            continue;
        }
        w->packed = buf;
        md->repacked_bytes += (uint64_t)bytes;
        /* the mapped rows are not read again (except a tied embedding's) */
        if (w->data != md->tok_embd.data)
            lmq_file_release(md->file, w->data, (size_t)lmq_row_size(w->type, w->n_in) * (size_t)w->n_out);
    }
    for (int il = 0; il < md->hp.n_layer && md->hp.n_expert > 0; il++)
        for (size_t i = 0; i < N_SLOTS; i++) {
            lmq_weight *w = expert_weight(md, il, i);
            if (!w || experts_copy_bytes(md, w) <= 0) continue;
            if (!pool && lmq_pool_new(p->n_threads > 0 ? p->n_threads : lmq_n_cpus(), &pool)) break;
            md->repacked_bytes += (uint64_t)repack_experts(md, pool, w, &used);
        }
    lmq_pool_free(pool);
    free(ws);
    lmq_kernel_scope_leave(scope);
}

lmq_status lmq_model_load(const char *path, lmq_model **out)
{
    lmq_model_params p = lmq_model_default_params();
    return lmq_model_load_params(path, &p, out);
}

lmq_isa lmq_model_repack_isa(const lmq_model *m)
{
    return m->repacked_bytes ? m->repack_isa : LMQ_ISA_COUNT;
}

lmq_status lmq_model_load_params(const char *path, const lmq_model_params *p, lmq_model **out)
{
    *out = NULL;
    if (!p || p->repack < -1 || p->repack > 1 || p->n_threads < 0 || p->n_threads > LMQ_MAX_THREADS ||
        p->isa < -1 || p->isa >= LMQ_ISA_COUNT)
        return lmq_error(LMQ_ERR_INVALID_ARG, "%s: model parameters: repack %d, n_threads %d, isa %d", path,
                         p ? p->repack : 0, p ? p->n_threads : 0, p ? p->isa : 0);
    if (p->isa >= 0 && !lmq_isa_supported((lmq_isa)p->isa))
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: model parameters: ISA %s is not supported by this build or CPU (%s)",
                         path, lmq_isa_name((lmq_isa)p->isa), lmq_cpu_features());
    lmq_model *md = calloc(1, sizeof *md);
    if (!md) return lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", path);
    lmq_status s = lmq_file_open(path, &md->file);
    if (s) goto fail;
    if ((s = read_hparams(md))) goto fail;
    if ((s = load_tensors(md))) goto fail;
    repack_weights(md, p);
    const lmq_meta *m = lmq_file_meta(md->file);
    if (lmq_meta_find(m, "tokenizer.ggml.model")) {
        s = lmq_vocab_load(m, &md->vocab);
        if (s) {
            s = lmq_error_prefix(s, "%s: tokenizer", path);
            goto fail;
        }
        if (lmq_vocab_n_tokens(md->vocab) > md->hp.n_vocab) {
            s = lmq_error(LMQ_ERR_FORMAT, "%s: tokenizer has %d tokens but the embedding only %d rows", path,
                          lmq_vocab_n_tokens(md->vocab), md->hp.n_vocab);
            goto fail;
        }
    }
    const char *tmpl;
    if (lmq_meta_get_str(m, "tokenizer.chat_template", &tmpl, NULL) == LMQ_OK) md->chat_template = tmpl;
    *out = md;
    return LMQ_OK;
fail:
    lmq_model_free(md);
    return s;
}

void lmq_model_free(lmq_model *md)
{
    if (!md) return;
    if (md->layers) {
        for (int il = 0; il < md->hp.n_layer; il++) {
            lmq_layer *L = &md->layers[il];
            for (size_t i = 0; i < N_SLOTS; i++) {
                if (k_slots[i].vec) free(*slot_vec(L, &k_slots[i]));
                else if (!in_arena(md, slot_weight(L, &k_slots[i])->packed)) free(slot_weight(L, &k_slots[i])->packed);
            }
        }
    }
    if (!in_arena(md, md->output.packed)) free(md->output.packed);
    if (md->repack_arena) munmap(md->repack_arena, md->repack_arena_bytes);
    free(md->rope_long);
    free(md->rope_short);
    free(md->layers);
    free(md->output_norm);
    free(md->rope_freqs);
    free(md->ple_proj_norm);
    lmq_vocab_free(md->vocab);
    lmq_file_close(md->file);
    free(md);
}

lmq_layer_kind lmq_model_layer_kind(const lmq_model *m, int32_t il)
{
    if (!m || il < 0 || il >= m->hp.n_layer) return LMQ_LAYER_KIND_COUNT;
    const lmq_layer *L = &m->layers[il];
    return L->rec ? LMQ_LAYER_RECURRENT : L->swa && m->hp.n_swa > 0 ? LMQ_LAYER_ATTN_SWA : LMQ_LAYER_ATTN;
}

uint64_t lmq_model_state_bytes(const lmq_model *m)
{
    return (uint64_t)lmq_arch_rec_state_floats(&m->dims) * (uint64_t)m->ssm.n_rec * sizeof(float);
}

const lmq_hparams *lmq_model_hparams(const lmq_model *m) { return &m->hp; }
const lmq_vocab *lmq_model_vocab(const lmq_model *m) { return m->vocab; }
const lmq_file *lmq_model_file(const lmq_model *m) { return m->file; }
uint64_t lmq_model_n_params(const lmq_model *m) { return m->n_params; }
uint64_t lmq_model_weight_bytes(const lmq_model *m) { return m->weight_bytes; }
const char *lmq_model_type_summary(const lmq_model *m) { return m->type_summary; }
const char *lmq_model_chat_template(const lmq_model *m) { return m->chat_template; }

/* ---------------------------------------------------------------- weight swap */

/* The matmul weight holding all of tensor `name` (not a view of a fused
 * tensor, not stacked experts), or NULL. */
static bool whole_of(const lmq_weight *w, const char *name)
{
    const lmq_tensor_info *t = w->data ? w->info : NULL;
    return t && !strcmp(t->name, name) && w->n_in == t->ne[0] && w->n_out == t->ne[1] && t->ne[2] == 1;
}

static lmq_weight *whole_weight(lmq_model *md, const char *name)
{
    for (int il = 0; il < md->hp.n_layer; il++)
        for (size_t i = 0; i < N_SLOTS; i++) {
            if (k_slots[i].vec || slot_is_expert(&k_slots[i])) continue;
            lmq_weight *w = slot_weight(&md->layers[il], &k_slots[i]);
            if (whole_of(w, name)) return w;
        }
    return whole_of(&md->output, name) ? &md->output : NULL;
}

lmq_status lmq_model_swap_weight(lmq_model *md, const char *name, lmq_type type, const void *data)
{
    if (!md || !name) return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_model_swap_weight: bad arguments");
    lmq_weight *w = whole_weight(md, name);
    if (!w && md->tok_embd.info && !strcmp(md->tok_embd.info->name, name)) w = &md->tok_embd; /* the lookup */
    if (!w)
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: '%s' is not a whole 2-D weight of the model (absent, fused or experts)",
                         lmq_file_path(md->file), name);
    const bool new_rows = data != NULL; /* the caller's rows, not the file's */
    if (!data) {
        type = w->info->type;
        data = w->info->data;
    }
    if (!lmq_matmul_supported(type))
        return lmq_error(LMQ_ERR_UNSUPPORTED, "lmq_model_swap_weight: the kernels do not support %s", lmq_type_name(type));
    if (lmq_row_size(type, w->n_in) <= 0)
        return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_model_swap_weight: rows of %lld do not fit %s", (long long)w->n_in,
                         lmq_type_name(type));
    if (w->packed) { /* the repacked copy is of the old rows */
        const int64_t bytes = lmq_repack_bytes(w->type, w->n_out, w->n_in);
        md->repacked_bytes -= (uint64_t)bytes;
        free_packed(md, w->packed, bytes);
        w->packed = NULL;
    }
    w->type = type;
    w->data = data;
    /* the caller's rows repacked as the loader would have (the kernels a
     * file of this type runs); the file's rows run unpacked; the embedding
     * lookup reads the rows */
    if (new_rows && md->repack && w != &md->tok_embd) {
        lmq_kernel_scope scope = lmq_kernel_scope_enter(md->repack_isa, LMQ_GEMM_MODE_COUNT);
        const int64_t bytes = lmq_repack_bytes(type, w->n_out, w->n_in);
        void *buf = bytes > 0 ? aligned_alloc(ARENA_ALIGN, arena_size(bytes)) : NULL;
        if (buf && lmq_repack(NULL, type, data, w->n_out, w->n_in, buf) == LMQ_OK) {
            w->packed = buf;
            md->repacked_bytes += (uint64_t)bytes;
        } else {
            free(buf);
            lmq_error_clear();
        }
        lmq_kernel_scope_leave(scope);
    }
    /* a tied head: the embedding lookup reads the same rows */
    if (md->tok_embd.info == w->info && &md->tok_embd != w) {
        md->tok_embd.type = type;
        md->tok_embd.data = data;
    }
    return LMQ_OK;
}
