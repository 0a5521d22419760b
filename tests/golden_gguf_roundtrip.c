/* GGUF both ways on llama.cpp's own files (../shared/reference):
 *  - every GGUF imports into an .lmq container with the same tensors (names,
 *    types, shapes, bytes, order), every key kept, checksums that verify,
 *    lmq.rope.layout "normal"; exporting that container gives back the
 *    original file byte for byte (so also the keys llama.cpp needs, checked
 *    by type as well);
 *  - a container holding the Hugging Face rows of llama-8m-debtext (RoPE
 *    layout "neox") exports to exactly llama.cpp's f32 GGUF of that model:
 *    the attn_q/attn_k row permutation matches convert_hf_to_gguf.py; the
 *    same holds for the tensors of lmq's own HF converter's output, and for
 *    q8_0 rows lmq quantized from it (against llama.cpp's q8_0 file);
 *  - truncated and corrupted GGUF files fail to import with the file named. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lmq_convert.h"
#include "lmq_format.h"
#include "testutil.h"

static const char *const k_files[] = {
    "llama-8m-debtext-f32",  "llama-8m-debtext-q8_0",   "llama-8m-debtext-q6_k", "llama-8m-debtext-q4_k_m",
    "llama-8m-debtext-q3_k_m", "llama-8m-debtext-q2_k", "llama-8m-debtext-q4_0", "llama-8m-debtext-iq4_xs",
    "stories260K-f32",       "stories260K-q4_k_m",
};

static bool value_equal(const lmq_value *a, const lmq_value *b)
{
    if (a->type != b->type) return false;
    switch (a->type) {
    case LMQ_V_STRING: return a->s.len == b->s.len && !memcmp(a->s.ptr, b->s.ptr, a->s.len);
    case LMQ_V_F32:
    case LMQ_V_F64: return a->f == b->f;
    case LMQ_V_BOOL: return a->b == b->b;
    case LMQ_V_ARRAY:
        if (a->arr.elem != b->arr.elem || a->arr.n != b->arr.n) return false;
        if (a->arr.elem == LMQ_V_STRING) {
            const lmq_str *x = a->arr.data, *y = b->arr.data;
            for (uint64_t i = 0; i < a->arr.n; i++)
                if (x[i].len != y[i].len || memcmp(x[i].ptr, y[i].ptr, x[i].len)) return false;
            return true;
        }
        if (a->arr.elem == LMQ_V_ARRAY) {
            const lmq_value *x = a->arr.data, *y = b->arr.data;
            for (uint64_t i = 0; i < a->arr.n; i++)
                if (!value_equal(&x[i], &y[i])) return false;
            return true;
        }
        return !memcmp(a->arr.data, b->arr.data, (size_t)a->arr.n * lmq_vtype_size(a->arr.elem));
    default: return a->u == b->u; /* integers share the union's bits */
    }
}

/* The keys and value types llama.cpp reads for a llama model. */
static void check_llama_keys(const lmq_meta *m, const char *what)
{
    static const struct { const char *key; lmq_vtype t; } need[] = {
        {"general.architecture", LMQ_V_STRING},
        {"general.name", LMQ_V_STRING},
        {"general.file_type", LMQ_V_U32},
        {"general.quantization_version", LMQ_V_U32},
        {"llama.block_count", LMQ_V_U32},
        {"llama.context_length", LMQ_V_U32},
        {"llama.embedding_length", LMQ_V_U32},
        {"llama.feed_forward_length", LMQ_V_U32},
        {"llama.attention.head_count", LMQ_V_U32},
        {"llama.attention.head_count_kv", LMQ_V_U32},
        {"llama.attention.layer_norm_rms_epsilon", LMQ_V_F32},
        {"llama.rope.freq_base", LMQ_V_F32},
        {"llama.rope.dimension_count", LMQ_V_U32},
        {"llama.vocab_size", LMQ_V_U32},
        {"tokenizer.ggml.model", LMQ_V_STRING},
        {"tokenizer.ggml.pre", LMQ_V_STRING},
        {"tokenizer.ggml.tokens", LMQ_V_ARRAY},
        {"tokenizer.ggml.scores", LMQ_V_ARRAY},
        {"tokenizer.ggml.token_type", LMQ_V_ARRAY},
        {"tokenizer.ggml.bos_token_id", LMQ_V_U32},
        {"tokenizer.ggml.eos_token_id", LMQ_V_U32},
        {"tokenizer.ggml.add_bos_token", LMQ_V_BOOL},
        {"tokenizer.ggml.add_eos_token", LMQ_V_BOOL},
    };
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        const lmq_value *v = lmq_meta_find(m, need[i].key);
        T_CHECK(v && v->type == need[i].t, "%s: %s is %s", what, need[i].key, lmq_vtype_name(need[i].t));
    }
    uint64_t qv = 0;
    T_CHECK(lmq_meta_get_u64(m, "general.quantization_version", &qv) == LMQ_OK && qv == 2, "%s: quantization_version 2", what);
    bool lmq_keys = false;
    for (size_t i = 0; i < lmq_meta_count(m); i++) lmq_keys |= !strncmp(lmq_meta_key(m, i), "lmq.", 4);
    T_CHECK(!lmq_keys, "%s: no lmq.* keys", what);
}

static void roundtrip(const char *base)
{
    char rel[256], lmq[64], out[64];
    snprintf(rel, sizeof rel, "reference/%s.gguf", base);
    const char *src = t_shared(rel);
    snprintf(lmq, sizeof lmq, "%s.lmq", base);
    snprintf(out, sizeof out, "%s.gguf", base);
    const char *lmq_path = t_tmp(lmq);
    const char *out_path = t_tmp(out);
    lmq_convert_stats st;
    lmq_status s = lmq_convert_gguf(src, lmq_path, NULL, &st);
    T_CHECK(s == LMQ_OK, "%s: import: %s", base, lmq_last_error());
    if (s) return;
    lmq_file *g = NULL, *c = NULL, *e = NULL;
    if (lmq_file_open(src, &g) || lmq_file_open(lmq_path, &c)) {
        T_CHECK(0, "%s: open: %s", base, lmq_last_error());
        goto out;
    }
    T_CHECK(lmq_file_kind_of(c) == LMQ_FILE_LMQ, "%s: import is an .lmq container", base);
    size_t n_checked = 0;
    T_CHECK(lmq_file_verify(c, 2, NULL, &n_checked) == LMQ_OK && n_checked == lmq_file_n_tensors(c), "%s: checksums", base);
    T_CHECK(st.n_tensors == lmq_file_n_tensors(g), "%s: stats count every tensor", base);
    /* metadata: every GGUF key kept as it is, plus lmq's own */
    const lmq_meta *gm = lmq_file_meta(g), *cm = lmq_file_meta(c);
    for (size_t i = 0; i < lmq_meta_count(gm); i++) {
        const lmq_value *v = lmq_meta_find(cm, lmq_meta_key(gm, i));
        T_CHECK(v && value_equal(v, lmq_meta_value(gm, i)), "%s: key %s kept", base, lmq_meta_key(gm, i));
    }
    const char *layout;
    T_CHECK(lmq_meta_get_str(cm, "lmq.rope.layout", &layout, NULL) == LMQ_OK && !strcmp(layout, "normal"), "%s: layout", base);
    T_CHECK(lmq_meta_find(cm, "lmq.convert.version") && lmq_meta_find(cm, "lmq.convert.time") &&
                lmq_meta_find(cm, "lmq.source.files") && lmq_meta_find(cm, "lmq.source.xxh3"), "%s: provenance", base);
    /* tensors: bit for bit, same order */
    T_CHECK(lmq_file_n_tensors(c) == lmq_file_n_tensors(g), "%s: tensor count", base);
    for (size_t i = 0; i < lmq_file_n_tensors(g) && i < lmq_file_n_tensors(c); i++) {
        const lmq_tensor_info *x = lmq_file_tensor(g, i), *y = lmq_file_tensor(c, i);
        T_CHECK(!strcmp(x->name, y->name) && x->type == y->type && x->n_dims == y->n_dims &&
                    !memcmp(x->ne, y->ne, sizeof x->ne) && x->nbytes == y->nbytes && !memcmp(x->data, y->data, x->nbytes),
                "%s: tensor %s identical", base, x->name);
    }
    /* and back: llama.cpp's file, byte for byte */
    s = lmq_export_gguf(lmq_path, out_path, NULL, NULL);
    T_CHECK(s == LMQ_OK, "%s: export: %s", base, lmq_last_error());
    if (s) goto out;
    T_CHECK(t_files_equal(src, out_path), "%s: export of the import is identical to llama.cpp's file", base);
    if (lmq_file_open(out_path, &e) == LMQ_OK) {
        check_llama_keys(lmq_file_meta(e), base);
        uint64_t a = 0, b = 1;
        lmq_meta_get_u64(gm, "general.file_type", &a);
        lmq_meta_get_u64(lmq_file_meta(e), "general.file_type", &b);
        T_CHECK(a == b, "%s: file_type %llu kept", base, (unsigned long long)a);
    } else {
        T_CHECK(0, "open %s: %s", out_path, lmq_last_error());
    }
out:
    lmq_file_close(e);
    lmq_file_close(c);
    lmq_file_close(g);
    unlink(lmq_path);
    unlink(out_path);
}

/* ------------------------------------------------------------ HF rows (neox) */

static const struct { const char *hf, *gguf; } k_names[] = {
    {"input_layernorm.weight", "attn_norm.weight"},  {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"}, {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},     {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};

/* The HF tensor name of a GGUF tensor name (written by this test, so that it
 * does not depend on the HF converter). */
static bool hf_name(const char *gguf, char *out, size_t cap)
{
    if (!strcmp(gguf, "token_embd.weight")) return snprintf(out, cap, "model.embed_tokens.weight") > 0;
    if (!strcmp(gguf, "output_norm.weight")) return snprintf(out, cap, "model.norm.weight") > 0;
    if (!strcmp(gguf, "output.weight")) return snprintf(out, cap, "lm_head.weight") > 0;
    int layer, used = 0;
    if (sscanf(gguf, "blk.%d.%n", &layer, &used) != 1 || !used) return false;
    for (size_t i = 0; i < sizeof k_names / sizeof k_names[0]; i++)
        if (!strcmp(gguf + used, k_names[i].gguf))
            return snprintf(out, cap, "model.layers.%d.%s", layer, k_names[i].hf) > 0;
    return false;
}

/* Writes an .lmq holding the safetensors rows as they are (layout neox), in
 * the reference GGUF's tensor order and with its metadata. */
static lmq_status make_neox_container(const lmq_file *ref, const lmq_safetensors *st, const char *path)
{
    lmq_writer *w;
    lmq_status s = lmq_writer_open(path, NULL, &w);
    if (s) return s;
    lmq_meta *m = lmq_writer_meta(w);
    const lmq_meta *rm = lmq_file_meta(ref);
    for (size_t i = 0; i < lmq_meta_count(rm) && !s; i++) s = lmq_meta_set_value(m, lmq_meta_key(rm, i), lmq_meta_value(rm, i));
    if (!s) s = lmq_meta_set_str(m, "lmq.rope.layout", "neox");
    for (size_t i = 0; i < lmq_file_n_tensors(ref) && !s; i++) {
        const lmq_tensor_info *t = lmq_file_tensor(ref, i);
        char name[256];
        const lmq_st_tensor *x = hf_name(t->name, name, sizeof name) ? lmq_safetensors_find(st, name) : NULL;
        if (!x || x->type != LMQ_TYPE_F32) {
            s = lmq_error(LMQ_ERR_NOT_FOUND, "no f32 safetensors tensor for %s", t->name);
            break;
        }
        s = lmq_writer_add_tensor(w, t->name, LMQ_TYPE_F32, t->n_dims, t->ne, x->data, x->nbytes);
    }
    if (s) {
        lmq_writer_abort(w);
        return s;
    }
    return lmq_writer_finish(w);
}

static void neox_export(void)
{
    const char *ref_path = t_shared("reference/llama-8m-debtext-f32.gguf");
    const char *lmq = t_tmp("neox.lmq"), *out = t_tmp("neox.gguf");
    lmq_file *ref = NULL, *e = NULL;
    lmq_safetensors *st = NULL;
    if (lmq_file_open(ref_path, &ref) || lmq_safetensors_open(t_shared("models/llama-8m-debtext"), &st)) {
        T_CHECK(0, "open reference: %s", lmq_last_error());
        goto out;
    }
    lmq_status s = make_neox_container(ref, st, lmq);
    T_CHECK(s == LMQ_OK, "neox container: %s", lmq_last_error());
    if (s) goto out;
    /* the HF rows really differ from llama.cpp's (else the test proves nothing) */
    const lmq_st_tensor *hq = lmq_safetensors_find(st, "model.layers.0.self_attn.q_proj.weight");
    const lmq_tensor_info *rq = lmq_file_find_tensor(ref, "blk.0.attn_q.weight");
    T_CHECK(hq && rq && hq->nbytes == rq->nbytes && memcmp(hq->data, rq->data, rq->nbytes), "HF q rows differ from GGUF's");
    s = lmq_export_gguf(lmq, out, NULL, NULL);
    T_CHECK(s == LMQ_OK, "neox export: %s", lmq_last_error());
    if (s || lmq_file_open(out, &e)) goto out;
    T_CHECK(lmq_file_n_tensors(e) == lmq_file_n_tensors(ref), "tensor count");
    int n_perm = 0;
    for (size_t i = 0; i < lmq_file_n_tensors(ref); i++) {
        const lmq_tensor_info *x = lmq_file_tensor(ref, i);
        const lmq_tensor_info *y = lmq_file_find_tensor(e, x->name);
        T_CHECK(y && y->type == x->type && !memcmp(y->ne, x->ne, sizeof x->ne) && y->nbytes == x->nbytes &&
                    !memcmp(y->data, x->data, x->nbytes), "exported %s equals llama.cpp's bit for bit", x->name);
        n_perm += strstr(x->name, "attn_q.weight") || strstr(x->name, "attn_k.weight");
    }
    T_CHECK(n_perm == 16, "16 permuted tensors compared (%d)", n_perm);
    check_llama_keys(lmq_file_meta(e), "neox export");
    T_CHECK(t_files_equal(ref_path, out), "neox export is byte-identical to llama.cpp's convert_hf_to_gguf output");
out:
    lmq_file_close(e);
    lmq_file_close(ref);
    lmq_safetensors_close(st);
}

/* The same through lmq's own HF converter: convert the checkpoint, export
 * it, and every tensor equals llama.cpp's f32 GGUF bit for bit (metadata
 * differs in order and in keys each converter adds, so not the file). */
/* Compares every tensor of `ref` with the same-named tensor of `got`. */
static void same_tensors(const lmq_file *ref, const lmq_file *got, const char *what)
{
    T_CHECK(lmq_file_n_tensors(got) == lmq_file_n_tensors(ref), "%s: tensor count %zu vs %zu", what,
            lmq_file_n_tensors(got), lmq_file_n_tensors(ref));
    for (size_t i = 0; i < lmq_file_n_tensors(ref); i++) {
        const lmq_tensor_info *x = lmq_file_tensor(ref, i);
        const lmq_tensor_info *y = lmq_file_find_tensor(got, x->name);
        T_CHECK(y && y->type == x->type && !memcmp(y->ne, x->ne, sizeof x->ne) && y->nbytes == x->nbytes &&
                    !memcmp(y->data, x->data, x->nbytes), "%s: exported %s equals llama.cpp's", what, x->name);
    }
}

/* q8_0 rows quantized by lmq from the HF (neox) rows, then permuted whole by
 * the export, equal llama.cpp's q8_0 GGUF (quantized from permuted rows):
 * row quantization and row permutation commute. */
static void quantized_export(const char *lmq, const char *ref_rel)
{
    const char *q = t_tmp("hf-q8_0.lmq"), *out = t_tmp("hf-q8_0.gguf");
    lmq_quantize_opts qo;
    memset(&qo, 0, sizeof qo);
    qo.mix = "q8_0";
    qo.output_type = qo.token_embd_type = LMQ_TYPE_COUNT;
    qo.n_threads = 2;
    lmq_status s = lmq_quantize_model(lmq, q, &qo, NULL);
    T_CHECK(s == LMQ_OK, "quantize q8_0: %s", lmq_last_error());
    if (!s) s = lmq_export_gguf(q, out, NULL, NULL);
    T_CHECK(s == LMQ_OK, "export q8_0: %s", lmq_last_error());
    lmq_file *ref = NULL, *e = NULL;
    if (!s && !lmq_file_open(t_shared(ref_rel), &ref) && !lmq_file_open(out, &e)) {
        same_tensors(ref, e, "q8_0");
        uint64_t ft = 0;
        T_CHECK(lmq_meta_get_u64(lmq_file_meta(e), "general.file_type", &ft) == LMQ_OK && ft == 7, "q8_0: file_type 7");
    }
    lmq_file_close(e);
    lmq_file_close(ref);
    unlink(q);
    unlink(out);
}

static void hf_convert_export(const char *model, const char *ref_rel, const char *q8_ref_rel)
{
    const char *ref_path = t_shared(ref_rel);
    char name[256];
    snprintf(name, sizeof name, "hf-%s.lmq", model);
    const char *lmq = t_tmp(name);
    snprintf(name, sizeof name, "hf-%s.gguf", model);
    const char *out = t_tmp(name);
    snprintf(name, sizeof name, "models/%s", model);
    lmq_convert_opts co;
    memset(&co, 0, sizeof co);
    co.out_type = LMQ_TYPE_F32;
    lmq_status s = lmq_convert_hf(t_shared(name), lmq, &co, NULL);
    T_CHECK(s == LMQ_OK, "%s: HF convert: %s", model, lmq_last_error());
    if (s) return;
    s = lmq_export_gguf(lmq, out, NULL, NULL);
    T_CHECK(s == LMQ_OK, "%s: export: %s", model, lmq_last_error());
    lmq_file *ref = NULL, *e = NULL;
    if (s || lmq_file_open(ref_path, &ref) || lmq_file_open(out, &e)) {
        T_CHECK(!s, "%s: open: %s", model, lmq_last_error());
        goto out;
    }
    same_tensors(ref, e, model);
    check_llama_keys(lmq_file_meta(e), model);
    /* hyper-parameters and vocabulary as llama.cpp's converter wrote them */
    static const char *const same[] = {
        "llama.block_count", "llama.context_length", "llama.embedding_length", "llama.feed_forward_length",
        "llama.attention.head_count", "llama.attention.head_count_kv", "llama.rope.freq_base",
        "llama.attention.layer_norm_rms_epsilon", "llama.rope.dimension_count", "llama.vocab_size",
        "tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type",
        "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.add_bos_token",
        "tokenizer.ggml.add_eos_token", "tokenizer.chat_template", "general.file_type",
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        const lmq_value *a = lmq_meta_find(lmq_file_meta(ref), same[i]), *b = lmq_meta_find(lmq_file_meta(e), same[i]);
        T_CHECK((!a && !b) || (a && b && value_equal(a, b)), "%s: %s as llama.cpp writes it", model, same[i]);
    }
    if (q8_ref_rel) quantized_export(lmq, q8_ref_rel);
out:
    lmq_file_close(e);
    lmq_file_close(ref);
    unlink(lmq);
    unlink(out);
}

/* ------------------------------------------------------------ broken inputs */

static void broken_inputs(void)
{
    const char *src = t_shared("reference/stories260K-q4_k_m.gguf");
    size_t len;
    char *bytes = t_read_all(src, &len);
    T_CHECK(bytes != NULL, "read %s", src);
    if (!bytes) return;
    const char *bad = t_tmp("broken.gguf"), *out = t_tmp("broken.lmq");
    size_t cuts[] = {0, 4, 20, 100, 5000, 14000, len / 2, len - 20}; /* the last 16 bytes are padding */
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        t_write_all(bad, bytes, cuts[i]);
        lmq_status s = lmq_convert_gguf(bad, out, NULL, NULL);
        T_CHECK(s != LMQ_OK && strstr(lmq_last_error(), bad), "truncated at %zu fails naming the file: %s", cuts[i],
                lmq_last_error());
        T_CHECK(!t_exists(out), "no output for truncated input");
    }
    /* an unknown ggml type id in the first tensor info */
    lmq_file *f;
    if (lmq_file_open(src, &f) == LMQ_OK) {
        const lmq_tensor_info *t = lmq_file_tensor(f, 0);
        /* locate the info: name bytes, n_dims, ne[], then the u32 type */
        const char *p = memmem(bytes, len, t->name, strlen(t->name));
        if (p) {
            size_t at = (size_t)(p - bytes) + strlen(t->name) + 4 + 8 * t->n_dims;
            char *copy = malloc(len);
            memcpy(copy, bytes, len);
            copy[at] = 24; /* i8: a ggml type lmq does not have */
            t_write_all(bad, copy, len);
            lmq_status s = lmq_convert_gguf(bad, out, NULL, NULL);
            T_CHECK(s == LMQ_ERR_UNSUPPORTED && strstr(lmq_last_error(), bad) && strstr(lmq_last_error(), t->name),
                    "unknown tensor type named: %s", lmq_last_error());
            free(copy);
        } else {
            T_CHECK(0, "%s: tensor info of %s not found in the file", src, t->name);
        }
        lmq_file_close(f);
    } else {
        T_CHECK(0, "open %s: %s", src, lmq_last_error());
    }
    free(bytes);
}

int main(void)
{
    t_require(t_shared("reference/llama-8m-debtext-f32.gguf"));
    for (size_t i = 0; i < sizeof k_files / sizeof k_files[0]; i++) roundtrip(k_files[i]);
    neox_export();
    hf_convert_export("llama-8m-debtext", "reference/llama-8m-debtext-f32.gguf", "reference/llama-8m-debtext-q8_0.gguf");
    hf_convert_export("stories260K-hf", "reference/stories260K-f32.gguf", NULL);
    broken_inputs();
    return t_finish();
}
