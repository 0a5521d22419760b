/* The Llama-family model: loading from a .lmq/.gguf file with every tensor
 * checked, and the batched forward pass over a KV cache.
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
    if (strcmp(arch, "llama") && strcmp(arch, "mistral"))
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: architecture '%s' is not supported (lmq runs Llama-family models)", path, arch);
    char msg[512];
#define NEED(sfx, field)                                                          \
    if ((s = meta_i32(m, arch, sfx, &hp->field, true, 0))) {                      \
        snprintf(msg, sizeof msg, "%s", lmq_last_error());                        \
        return lmq_error(s, "%s: %s", path, msg);                                 \
    }
    NEED("block_count", n_layer);
    NEED("embedding_length", n_embd);
    NEED("feed_forward_length", n_ff);
    NEED("attention.head_count", n_head);
#undef NEED
    if ((s = meta_i32(m, arch, "attention.head_count_kv", &hp->n_head_kv, false, hp->n_head))) return s;
    if ((s = meta_i32(m, arch, "context_length", &hp->n_ctx_train, false, 2048))) return s;
    if (hp->n_head <= 0 || hp->n_embd <= 0 || hp->n_layer <= 0 || hp->n_ff <= 0 || hp->n_head_kv <= 0 ||
        hp->n_head % hp->n_head_kv || hp->n_layer > 4096 || hp->n_head > 4096)
        return lmq_error(LMQ_ERR_FORMAT, "%s: inconsistent hyper-parameters (layers %d, heads %d/%d, embd %d)", path,
                         hp->n_layer, hp->n_head, hp->n_head_kv, hp->n_embd);
    if ((s = meta_i32(m, arch, "attention.key_length", &hp->head_dim, false, hp->n_embd / hp->n_head))) return s;
    if (hp->head_dim <= 0 || hp->head_dim % 2 || hp->head_dim > 1024)
        return lmq_error(LMQ_ERR_FORMAT, "%s: head dimension %d", path, hp->head_dim);
    if ((s = meta_i32(m, arch, "rope.dimension_count", &hp->n_rot, false, hp->head_dim))) return s;
    if (hp->n_rot <= 0 || hp->n_rot > hp->head_dim || hp->n_rot % 2)
        return lmq_error(LMQ_ERR_FORMAT, "%s: rope dimension %d", path, hp->n_rot);
    if ((s = meta_f32(m, arch, "attention.layer_norm_rms_epsilon", &hp->rms_eps, 1e-5f))) return s;
    if ((s = meta_f32(m, arch, "rope.freq_base", &hp->rope_theta, 10000.0f))) return s;
    /* rope scaling */
    char key[256];
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
    if (hp->rope_scaling_type && !(hp->rope_factor > 0))
        return lmq_error(LMQ_ERR_FORMAT, "%s: rope scaling factor must be positive", path);
    /* rope pairing: recorded by lmq; GGUF files from llama.cpp imply "normal" */
    const char *layout = NULL;
    if (lmq_meta_get_str(m, "lmq.rope.layout", &layout, NULL) == LMQ_OK) {
        if (!strcmp(layout, "neox")) hp->rope_layout = LMQ_ROPE_NEOX;
        else if (!strcmp(layout, "normal")) hp->rope_layout = LMQ_ROPE_NORMAL;
        else return lmq_error(LMQ_ERR_FORMAT, "%s: lmq.rope.layout '%s' (expected neox or normal)", path, layout);
    } else {
        hp->rope_layout = lmq_file_kind_of(md->file) == LMQ_FILE_GGUF ? LMQ_ROPE_NORMAL : LMQ_ROPE_NEOX;
    }
    return LMQ_OK;
}

/* Finds a tensor and checks its shape; 2-D weights may be of any type the
 * kernels support, 1-D norms must be float types. */
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

/* Norm weights as owned f32 vectors (tiny; converted once). */
static lmq_status get_norm(lmq_model *md, const char *name, int64_t n, float **out)
{
    lmq_weight w;
    lmq_status s = get_tensor(md, name, n, 0, false, &w);
    if (s) return s;
    *out = malloc((size_t)n * sizeof(float));
    if (!*out) return lmq_error(LMQ_ERR_NOMEM, "%s: norm %s", lmq_file_path(md->file), name);
    s = lmq_dequantize_row(w.type, w.data, *out, n);
    if (s) return lmq_error(s, "%s: tensor '%s': cannot read as f32", lmq_file_path(md->file), name);
    return LMQ_OK;
}

static lmq_status load_tensors(lmq_model *md)
{
    const lmq_hparams *hp = &md->hp;
    int64_t d = hp->n_embd, qd = (int64_t)hp->n_head * hp->head_dim, kvd = (int64_t)hp->n_head_kv * hp->head_dim;
    lmq_status s;
    const lmq_tensor_info *te = lmq_file_find_tensor(md->file, "token_embd.weight");
    if (!te) return lmq_error(LMQ_ERR_NOT_FOUND, "%s: tensor 'token_embd.weight' is missing", lmq_file_path(md->file));
    md->hp.n_vocab = (int32_t)te->ne[1];
    if (te->ne[1] <= 0 || te->ne[1] > INT32_MAX)
        return lmq_error(LMQ_ERR_FORMAT, "%s: token_embd.weight has %lld rows", lmq_file_path(md->file), (long long)te->ne[1]);
    if ((s = get_tensor(md, "token_embd.weight", d, hp->n_vocab, false, &md->tok_embd))) return s;
    if ((s = get_norm(md, "output_norm.weight", d, &md->output_norm))) return s;
    if ((s = get_tensor(md, "output.weight", d, hp->n_vocab, true, &md->output))) return s;
    if (lmq_file_find_tensor(md->file, "rope_freqs.weight")) {
        /* llama.cpp's GGUFs of Llama 3.x carry the scaled frequencies as a
         * tensor of divisors instead of rope.scaling.* keys */
        if ((s = get_norm(md, "rope_freqs.weight", hp->n_rot / 2, &md->rope_freqs))) return s;
        for (int i = 0; i < hp->n_rot / 2; i++)
            if (!(md->rope_freqs[i] > 0) || !isfinite(md->rope_freqs[i]))
                return lmq_error(LMQ_ERR_FORMAT, "%s: tensor 'rope_freqs.weight' holds %g at %d (must be positive)",
                                 lmq_file_path(md->file), (double)md->rope_freqs[i], i);
    }
    md->hp.tied_embeddings = md->output.data == NULL;
    if (md->hp.tied_embeddings) md->output = md->tok_embd;
    md->layers = calloc((size_t)hp->n_layer, sizeof *md->layers);
    if (!md->layers) return lmq_error(LMQ_ERR_NOMEM, "layers");
    char name[128];
    for (int il = 0; il < hp->n_layer; il++) {
        lmq_layer *L = &md->layers[il];
#define T(field, nm, a, b)                                                        \
    snprintf(name, sizeof name, "blk.%d." nm ".weight", il);                      \
    if ((s = get_tensor(md, name, a, b, false, &L->field))) return s;
        T(wq, "attn_q", d, qd);
        T(wk, "attn_k", d, kvd);
        T(wv, "attn_v", d, kvd);
        T(wo, "attn_output", qd, d);
        T(w_gate, "ffn_gate", d, hp->n_ff);
        T(w_up, "ffn_up", d, hp->n_ff);
        T(w_down, "ffn_down", hp->n_ff, d);
#undef T
        snprintf(name, sizeof name, "blk.%d.attn_norm.weight", il);
        if ((s = get_norm(md, name, d, &L->attn_norm))) return s;
        snprintf(name, sizeof name, "blk.%d.ffn_norm.weight", il);
        if ((s = get_norm(md, name, d, &L->ffn_norm))) return s;
    }
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

lmq_status lmq_model_load(const char *path, lmq_model **out)
{
    *out = NULL;
    lmq_model *md = calloc(1, sizeof *md);
    if (!md) return lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", path);
    lmq_status s = lmq_file_open(path, &md->file);
    if (s) goto fail;
    if ((s = read_hparams(md))) goto fail;
    if ((s = load_tensors(md))) goto fail;
    const lmq_meta *m = lmq_file_meta(md->file);
    if (lmq_meta_find(m, "tokenizer.ggml.model")) {
        s = lmq_vocab_load(m, &md->vocab);
        if (s) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", lmq_last_error());
            s = lmq_error(s, "%s: tokenizer: %s", path, msg);
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
            free(md->layers[il].attn_norm);
            free(md->layers[il].ffn_norm);
        }
    }
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
