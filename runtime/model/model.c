/* The model: loading a .lmq/.gguf file of any family in formats/arch.c,
 * every tensor checked against the descriptor and the metadata.
 *
 * Shapes follow ggml: a weight [out, in] has ne = {in, out} and is stored
 * row-major, one row of `in` elements per output. All activations are f32;
 * RoPE, softmax and norms are computed in f32 (sums in double where cheap). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_runtime.h"
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
    if (stype && strcmp(stype, "none") && !hp->rope_scaling_type)
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: rope scaling type '%s' is not supported", path, stype);
    if ((s = meta_f32(m, arch, "rope.scaling.factor", &hp->rope_factor, 1.0f))) return s;
    if ((s = meta_f32(m, arch, "rope.scaling.low_freq_factor", &hp->rope_low_freq_factor, 1.0f))) return s;
    if ((s = meta_f32(m, arch, "rope.scaling.high_freq_factor", &hp->rope_high_freq_factor, 4.0f))) return s;
    if ((s = meta_i32(m, arch, "rope.scaling.original_context_length", &hp->rope_orig_ctx, false, 8192))) return s;
    if ((s = meta_f32(m, arch, "rope.scaling.attn_factor", &hp->rope_attn_factor, 1.0f))) return s;
    if (hp->rope_scaling_type && !(hp->rope_factor > 0))
        return lmq_error(LMQ_ERR_FORMAT, "%s: rope scaling factor must be positive", path);
    if (!(hp->rope_attn_factor > 0) || !isfinite(hp->rope_attn_factor))
        return lmq_error(LMQ_ERR_FORMAT, "%s: %s.rope.scaling.attn_factor must be positive", path, arch);
    /* attention: query scale, soft-caps (llama.cpp's Gemma 2 defaults 50 / 30 when the keys are absent) */
    float dflt_scale = 1.0f / sqrtf((float)hp->head_dim);
    if ((a->id == LMQ_ARCH_GEMMA2 && hp->n_layer == 46) || (a->id == LMQ_ARCH_GEMMA3 && hp->n_layer == 62))
        dflt_scale = 1.0f / sqrtf((float)(hp->n_embd / hp->n_head)); /* the 27B sizes, as llama.cpp */
    if ((s = meta_f32(m, arch, "attention.scale", &hp->attn_scale, dflt_scale))) return s;
    bool gemma2 = a->id == LMQ_ARCH_GEMMA2;
    if ((s = meta_f32(m, arch, "attn_logit_softcapping", &hp->attn_softcap, gemma2 ? 50.0f : 0.0f))) return s;
    if ((s = meta_f32(m, arch, "final_logit_softcapping", &hp->final_softcap, gemma2 ? 30.0f : 0.0f))) return s;
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

/* Per-layer sliding-window flags (hp->n_swa > 0): the file's
 * <arch>.attention.sliding_window_pattern (one bool per layer, as lmq
 * convert writes it) or the family's pattern. */
static lmq_status window_layers(lmq_model *md)
{
    lmq_hparams *hp = &md->hp;
    const lmq_arch *a = md->arch;
    hp->n_swa_layers = 0;
    if (hp->n_swa <= 0) return LMQ_OK;
    char key[128];
    snprintf(key, sizeof key, "lmq.attention.sliding_window_layers");
    lmq_vtype et;
    uint64_t n;
    const void *data;
    bool have = lmq_meta_get_arr(lmq_file_meta(md->file), key, &et, &n, &data) == LMQ_OK;
    lmq_error_clear();
    if (have && (et != LMQ_V_BOOL || n != (uint64_t)hp->n_layer))
        return lmq_error(LMQ_ERR_FORMAT, "%s: metadata key '%s' must be %d bools", lmq_file_path(md->file), key,
                         hp->n_layer);
    for (int il = 0; il < hp->n_layer; il++) {
        bool sw = have ? ((const uint8_t *)data)[il] != 0
                       : a->swa == LMQ_SWA_ALL ? true
                       : a->swa == LMQ_SWA_EVEN ? il % 2 == 0
                                                : (il + 1) % (a->swa_period > 0 ? a->swa_period : 1) != 0;
        md->layers[il].swa = sw;
        hp->n_swa_layers += sw;
    }
    return LMQ_OK;
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

static lmq_status load_layer(lmq_model *md, int il)
{
    const lmq_hparams *hp = &md->hp;
    const lmq_arch *a = md->arch;
    const char *path = lmq_file_path(md->file);
    lmq_layer *L = &md->layers[il];
    const int64_t d = hp->n_embd, hd = hp->head_dim, qd = (int64_t)hp->n_head * hd, kvd = (int64_t)hp->n_head_kv * hd;
    const int64_t ff = hp->n_ff;
    char name[128];
    lmq_status s;
#define NAME(kind) lmq_tensor_gguf_name(kind, il, name, sizeof name)
#define HAS(kind) (NAME(kind) && lmq_file_find_tensor(md->file, name))
    /* attention projections: separate, or fused rows Q|K|V */
    if (lmq_arch_tensor_of(a, LMQ_TK_ATTN_QKV) && HAS(LMQ_TK_ATTN_QKV)) {
        lmq_weight qkv;
        if ((s = get_tensor(md, name, d, qd + 2 * kvd, false, &qkv))) return s;
        L->wq = row_view(&qkv, 0, qd, false);
        L->wk = row_view(&qkv, qd, kvd, true);
        L->wv = row_view(&qkv, qd + kvd, kvd, true);
    } else {
        NAME(LMQ_TK_ATTN_Q);
        if ((s = get_tensor(md, name, d, qd, false, &L->wq))) return s;
        NAME(LMQ_TK_ATTN_K);
        if ((s = get_tensor(md, name, d, kvd, false, &L->wk))) return s;
        NAME(LMQ_TK_ATTN_V);
        if ((s = get_tensor(md, name, d, kvd, false, &L->wv))) return s;
    }
    NAME(LMQ_TK_ATTN_OUT);
    if ((s = get_tensor(md, name, qd, d, false, &L->wo))) return s;
    /* FFN: experts, separate gate and up, or fused rows gate|up in ffn_up */
    if (lmq_arch_tensor_of(a, LMQ_TK_FFN_DOWN_EXPS) && HAS(LMQ_TK_FFN_DOWN_EXPS)) {
        const int64_t ne = hp->n_expert, fe = hp->n_ff_exp;
        if (ne <= 0)
            return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s' but no %s.expert_count", path, name, a->name);
        if ((s = get_experts(md, name, fe, d, ne, &L->down_exps))) return s;
        NAME(LMQ_TK_FFN_GATE_EXPS);
        if ((s = get_experts(md, name, d, fe, ne, &L->gate_exps))) return s;
        NAME(LMQ_TK_FFN_UP_EXPS);
        if ((s = get_experts(md, name, d, fe, ne, &L->up_exps))) return s;
        NAME(LMQ_TK_FFN_GATE_INP);
        if ((s = get_tensor(md, name, d, ne, false, &L->gate_inp))) return s;
        if (lmq_arch_tensor_of(a, LMQ_TK_FFN_GATE_SHEXP)) { /* the shared expert, required where the family has it */
            const int64_t fs = hp->n_ff_shexp;
            if (fs <= 0)
                return lmq_error(LMQ_ERR_FORMAT, "%s: %s.expert_shared_feed_forward_length is missing", path, a->name);
            NAME(LMQ_TK_FFN_GATE_SHEXP);
            if ((s = get_tensor(md, name, d, fs, false, &L->gate_shexp))) return s;
            NAME(LMQ_TK_FFN_UP_SHEXP);
            if ((s = get_tensor(md, name, d, fs, false, &L->up_shexp))) return s;
            NAME(LMQ_TK_FFN_DOWN_SHEXP);
            if ((s = get_tensor(md, name, fs, d, false, &L->down_shexp))) return s;
            NAME(LMQ_TK_FFN_GATE_INP_SHEXP);
            if ((s = get_vec(md, name, d, d, false, &L->gate_inp_shexp))) return s;
        }
        L->moe = true;
        md->hp.n_moe_layers++;
        goto norms;
    }
    NAME(LMQ_TK_FFN_DOWN);
    if ((s = get_tensor(md, name, ff, d, false, &L->w_down))) return s;
    if (HAS(LMQ_TK_FFN_GATE)) {
        if ((s = get_tensor(md, name, d, ff, false, &L->w_gate))) return s;
        NAME(LMQ_TK_FFN_UP);
        if ((s = get_tensor(md, name, d, ff, false, &L->w_up))) return s;
    } else {
        lmq_weight gu;
        NAME(LMQ_TK_FFN_UP);
        if ((s = get_tensor(md, name, d, 2 * ff, false, &gu))) return s;
        L->w_gate = row_view(&gu, 0, ff, false);
        L->w_up = row_view(&gu, ff, ff, true);
    }
norms:;
    /* norms and biases: required or optional as the descriptor says */
    struct {
        lmq_tensor_kind kind;
        float **dst;
        int64_t n;
    } vecs[] = {
        {LMQ_TK_ATTN_NORM, &L->attn_norm, d},           {LMQ_TK_FFN_NORM, &L->ffn_norm, d},
        {LMQ_TK_ATTN_POST_NORM, &L->attn_post_norm, d}, {LMQ_TK_FFN_POST_NORM, &L->ffn_post_norm, d},
        {LMQ_TK_ATTN_Q_BIAS, &L->bq, qd},               {LMQ_TK_ATTN_K_BIAS, &L->bk, kvd},
        {LMQ_TK_ATTN_V_BIAS, &L->bv, kvd},              {LMQ_TK_ATTN_OUT_BIAS, &L->bo, d},
    };
    for (size_t i = 0; i < sizeof vecs / sizeof vecs[0]; i++) {
        const lmq_arch_tensor *at = lmq_arch_tensor_of(a, vecs[i].kind);
        bool present = HAS(vecs[i].kind);
        if (!at && present)
            return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: tensor '%s' is not part of the %s architecture", path, name,
                             a->name);
        if (!at) continue;
        if ((s = get_vec(md, name, vecs[i].n, vecs[i].n, (at->flags & LMQ_AT_OPTIONAL) != 0, vecs[i].dst))) return s;
    }
    /* q/k RMSNorm: per head [head_dim] or over the whole projection */
    const lmq_tensor_kind qk[2] = {LMQ_TK_ATTN_Q_NORM, LMQ_TK_ATTN_K_NORM};
    float **qk_dst[2] = {&L->q_norm, &L->k_norm};
    int32_t *qk_len[2] = {&L->q_norm_len, &L->k_norm_len};
    const int64_t qk_whole[2] = {qd, kvd};
    for (int i = 0; i < 2; i++) {
        const lmq_arch_tensor *at = lmq_arch_tensor_of(a, qk[i]);
        bool present = HAS(qk[i]);
        if (present != (at != NULL) && (!at || !(at->flags & LMQ_AT_OPTIONAL)))
            return lmq_error(present ? LMQ_ERR_UNSUPPORTED : LMQ_ERR_NOT_FOUND, "%s: tensor '%s' is %s", path, name,
                             present ? "not part of the architecture" : "missing");
        if (present && (s = get_vec2(md, name, hd, qk_whole[i], 0, qk_dst[i], qk_len[i]))) return s;
    }
#undef NAME
#undef HAS
    return LMQ_OK;
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
    if (!md->layers) return lmq_error(LMQ_ERR_NOMEM, "layers");
    for (int il = 0; il < hp->n_layer; il++)
        if ((s = load_layer(md, il))) return s;
    if ((s = window_layers(md))) return s;
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

/* The matmul weights of a model (the output head as its own view even when
 * tied: the embedding rows stay as they are for lookups). */
static int model_weights(lmq_model *md, lmq_weight **ws, int cap)
{
    int n = 0;
    for (int il = 0; il < md->hp.n_layer; il++) {
        lmq_layer *L = &md->layers[il];
        lmq_weight *lw[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down,
                            &L->gate_shexp, &L->up_shexp, &L->down_shexp};
        for (size_t i = 0; i < sizeof lw / sizeof lw[0]; i++)
            if (lw[i]->data && n < cap) ws[n++] = lw[i];
    }
    if (md->output.data && n < cap) ws[n++] = &md->output;
    return n;
}

/* Repacks the weights the active kernels have a repacked layout for (q4_0,
 * q8_0, iq4_nl on AVX-512: 16 rows interleaved, the same bytes), unless
 * LMQ_REPACK=0. The copies replace the mapped rows in every product; a copy
 * that cannot be allocated leaves its weight as it is. */
static void repack_weights(lmq_model *md)
{
    const char *e = getenv("LMQ_REPACK");
    if (e && !strcmp(e, "0")) return;
    int cap = md->hp.n_layer * 10 + 1, n;
    lmq_weight **ws = malloc((size_t)cap * sizeof *ws);
    if (!ws) return;
    n = model_weights(md, ws, cap);
    lmq_pool *pool = NULL;
    for (int i = 0; i < n; i++) {
        lmq_weight *w = ws[i];
        const int64_t bytes = lmq_repack_bytes(w->type, w->n_out, w->n_in);
        if (bytes <= 0) continue;
        if (!pool && lmq_pool_new(lmq_n_cpus(), &pool)) break;
        void *buf = aligned_alloc(64, ((size_t)bytes + 63) & ~(size_t)63);
        if (!buf) continue;
        if (lmq_repack(pool, w->type, w->data, w->n_out, w->n_in, buf)) {
            lmq_error_clear();
            free(buf);
            continue;
        }
        w->packed = buf;
        md->repacked_bytes += (uint64_t)bytes;
        /* the mapped rows are not read again (except a tied embedding's) */
        if (w->data != md->tok_embd.data)
            lmq_file_release(md->file, w->data, (size_t)lmq_row_size(w->type, w->n_in) * (size_t)w->n_out);
    }
    lmq_pool_free(pool);
    free(ws);
}

lmq_status lmq_model_load(const char *path, lmq_model **out)
{
    *out = NULL;
    lmq_model *md = calloc(1, sizeof *md);
    if (!md) return lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", path);
    lmq_status s = lmq_file_open(path, &md->file);
    if (s) goto fail;
    if ((s = read_hparams(md))) goto fail;
    if ((s = load_tensors(md))) goto fail;
    repack_weights(md);
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
            void *packed[] = {L->wq.packed, L->wk.packed, L->wv.packed, L->wo.packed, L->w_gate.packed,
                              L->w_up.packed, L->w_down.packed, L->gate_shexp.packed, L->up_shexp.packed,
                              L->down_shexp.packed};
            for (size_t i = 0; i < sizeof packed / sizeof packed[0]; i++) free(packed[i]);
            float *owned[] = {L->attn_norm, L->ffn_norm, L->attn_post_norm, L->ffn_post_norm, L->q_norm,
                              L->k_norm, L->bq, L->bk, L->bv, L->bo, L->gate_inp_shexp};
            for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) free(owned[i]);
        }
    }
    free(md->output.packed);
    free(md->rope_long);
    free(md->rope_short);
    free(md->layers);
    free(md->output_norm);
    free(md->rope_freqs);
    lmq_vocab_free(md->vocab);
    lmq_file_close(md->file);
    free(md);
}

const lmq_hparams *lmq_model_hparams(const lmq_model *m) { return &m->hp; }
const lmq_vocab *lmq_model_vocab(const lmq_model *m) { return m->vocab; }
const lmq_file *lmq_model_file(const lmq_model *m) { return m->file; }
uint64_t lmq_model_n_params(const lmq_model *m) { return m->n_params; }
uint64_t lmq_model_weight_bytes(const lmq_model *m) { return m->weight_bytes; }
const char *lmq_model_type_summary(const lmq_model *m) { return m->type_summary; }
const char *lmq_model_chat_template(const lmq_model *m) { return m->chat_template; }
