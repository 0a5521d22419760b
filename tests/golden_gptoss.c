/* gpt-oss conversion (../shared/models/zoo/gptoss: experts in MXFP4 as
 * *_blocks / *_scales, attention sinks, biases everywhere, YaRN) against the
 * safetensors source and against the q8_0 GGUF that llama.cpp's converter and
 * ik_llama.cpp's quantizer made from the same checkpoint, experts kept MXFP4
 * (../shared/reference/zoo/gptoss-q8_0.gguf):
 *   1. every tensor of the f32 .lmq equals its source under the conversion,
 *      restated here from the Hugging Face side: norms and biases as they are,
 *      sinks -> attn_sinks, gate = even and up = odd rows of gate_up (entries
 *      of its bias), MXFP4 blocks with their nibbles in ggml's order; and the
 *      repacked blocks decode by ggml's rule to exactly what the source's
 *      blocks decode to by Hugging Face's rule;
 *   2. names, shapes and every gpt-oss.* key are the reference's; the MXFP4
 *      experts are its bytes; every other tensor is within q8_0's error of it
 *      and lmq's q8_0 of it is the reference's bytes;
 *   3. `lmq export` of the f32 and of the q8_0 container: the reference's
 *      names, shapes and keys (the q8_0 one: its bytes); the reference imports
 *      bit for bit and exports back;
 *   4. every mix keeps the MXFP4 experts; --tensor-type turns them into
 *      another type (needs the MXFP4 dequantizer);
 *   5. the float form of the experts ([E, H, 2F] / [E, F, H], input by
 *      output) converts to the same values; --type f16 keeps MXFP4;
 *      rope_parameters (transformers 5) gives the same keys; an o200k
 *      tokenizer.json is named "gpt-4o" and ends generation at <|return|>
 *      and <|call|>, not at <|end|>;
 *   6. refusals, one line each: swiglu_limit 5, a missing _scales tensor,
 *      _blocks of the wrong shape, export of a
 *      window pattern llama.cpp cannot express.
 * Exit 77 (skipped) when the data is absent. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lmq_convert.h"
#include "lmq_format.h"
#include "lmq_quant.h"
#include "lmq_runtime.h"
#include "testutil.h"

/* ================================================================ MXFP4, both ways */

/* Hugging Face / OpenAI: value = E2M1(code) * 2^(scale - 127); element 2j in
 * the low nibble of byte j, 2j + 1 in the high one. */
static const float k_e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};

static float hf_value(const uint8_t *q16, uint8_t scale, int i)
{
    const uint8_t code = (uint8_t)((q16[i / 2] >> (4 * (i % 2))) & 15);
    return ldexpf(k_e2m1[code], (int)scale - 127);
}

/* ggml's block_mxfp4 (e, qs[16]): element j in the low nibble of qs[j],
 * j + 16 in the high one; value = kvalues[code] * 2^(e - 128). */
static float ggml_value(const uint8_t *blk17, int i)
{
    static const int8_t kv[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    const uint8_t code = (uint8_t)(i < 16 ? blk17[1 + i] & 15 : blk17[1 + i - 16] >> 4);
    return ldexpf((float)kv[code], (int)blk17[0] - 128);
}

/* ================================================================ the source, restated */

static t_want *want_add(t_wants *w, const char *name, uint32_t n_dims, int64_t ne0, int64_t ne1, int64_t ne2)
{
    w->t = realloc(w->t, (w->n + 1) * sizeof *w->t);
    t_want *x = &w->t[w->n++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", name);
    x->n_dims = n_dims;
    x->ne[0] = ne0;
    x->ne[1] = n_dims > 1 ? ne1 : 1;
    x->ne[2] = n_dims > 2 ? ne2 : 1;
    x->n = x->ne[0] * x->ne[1] * x->ne[2];
    x->v = malloc((size_t)x->n * sizeof(float));
    return x;
}

static float src_at(const lmq_st_tensor *t, int64_t i)
{
    uint16_t h;
    memcpy(&h, (const uint8_t *)t->data + 2 * i, 2);
    return t->type == LMQ_TYPE_BF16 ? t_bf16f(h) : NAN; /* the zoo is BF16 */
}

/* Hugging Face name (after "model.layers.N.") -> GGUF name (after "blk.N."), copied as they are */
static const struct {
    const char *hf, *gguf;
} k_plain[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.o_proj.bias", "attn_output.bias"},
    {"self_attn.sinks", "attn_sinks.weight"},
    {"mlp.router.weight", "ffn_gate_inp.weight"},
    {"mlp.router.bias", "ffn_gate_inp.bias"},
    {"mlp.experts.down_proj_bias", "ffn_down_exps.bias"},
};

/* MXFP4 blocks [E, R, C/32, 16] + scales [E, R, C/32] -> the stacks taking
 * rows k, k + parts, ... (gate_up: parts 2, gate even). */
static void want_mxfp4(t_wants *w, int layer, const lmq_st_tensor *b, const lmq_st_tensor *s, bool down)
{
    const int64_t E = b->shape[0], R = b->shape[1], nb = b->shape[2], C = nb * 32;
    const int parts = down ? 1 : 2;
    const uint8_t *qb = b->data, *qs = s->data;
    for (int part = 0; part < parts; part++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.%s", layer,
                 down ? "ffn_down_exps.weight" : part ? "ffn_up_exps.weight" : "ffn_gate_exps.weight");
        const int64_t rows = R / parts;
        t_want *x = want_add(w, name, 3, C, rows, E);
        x->blocks_bytes = (size_t)(E * rows * nb) * 17;
        x->blocks = malloc(x->blocks_bytes);
        uint8_t *o = x->blocks;
        for (int64_t e = 0; e < E; e++)
            for (int64_t r = 0; r < rows; r++) {
                const int64_t sr = e * R + r * parts + part;
                for (int64_t k = 0; k < nb; k++, o += 17) {
                    const uint8_t *q = qb + (size_t)(sr * nb + k) * 16;
                    const uint8_t sc = qs[sr * nb + k];
                    uint8_t codes[32];
                    for (int i = 0; i < 32; i++) codes[i] = (uint8_t)((q[i / 2] >> (4 * (i % 2))) & 15);
                    o[0] = sc;
                    for (int j = 0; j < 16; j++) o[1 + j] = (uint8_t)(codes[j] | codes[16 + j] << 4);
                    for (int i = 0; i < 32; i++) x->v[((e * rows + r) * nb + k) * 32 + i] = hf_value(q, sc, i);
                }
            }
    }
}

/* The tensors the conversion must write, from the safetensors alone. */
static bool build_wants(const char *dir, t_wants *w)
{
    lmq_safetensors *st = NULL;
    if (lmq_safetensors_open(dir, &st) != LMQ_OK) {
        T_CHECK(0, "open %s: %s", dir, lmq_last_error());
        return false;
    }
    bool ok = true;
    for (size_t i = 0; i < lmq_safetensors_count(st) && ok; i++) {
        const lmq_st_tensor *t = lmq_safetensors_tensor(st, i);
        const int64_t a = t->shape[0], b = t->n_dims > 1 ? t->shape[1] : 1;
        static const struct {
            const char *hf, *gguf;
        } globals[] = {{"model.embed_tokens.weight", "token_embd.weight"},
                       {"model.norm.weight", "output_norm.weight"},
                       {"lm_head.weight", "output.weight"}};
        bool done = false;
        for (size_t k = 0; k < 3 && !done; k++)
            if (!strcmp(t->name, globals[k].hf)) {
                t_want *x = want_add(w, globals[k].gguf, t->n_dims, t->n_dims > 1 ? b : a, a, 1);
                for (int64_t e = 0; e < x->n; e++) x->v[e] = src_at(t, e);
                done = true;
            }
        if (done) continue;
        int layer = -1, used = 0;
        if (sscanf(t->name, "model.layers.%d.%n", &layer, &used) != 1 || !used) {
            T_CHECK(0, "%s: unexpected tensor %s", dir, t->name);
            ok = false;
            break;
        }
        const char *rest = t->name + used;
        char name[96], other[160];
        if (!strcmp(rest, "mlp.experts.gate_up_proj_blocks") || !strcmp(rest, "mlp.experts.down_proj_blocks")) {
            snprintf(other, sizeof other, "%.*s_scales", (int)(strlen(t->name) - 7), t->name);
            const lmq_st_tensor *s = lmq_safetensors_find(st, other);
            if (!s) {
                T_CHECK(0, "%s: no %s", dir, other);
                ok = false;
                break;
            }
            want_mxfp4(w, layer, t, s, strstr(rest, "down") != NULL);
            continue;
        }
        if (strstr(rest, "_scales")) continue;
        if (!strcmp(rest, "mlp.experts.gate_up_proj_bias")) { /* [E, 2F] interleaved */
            for (int part = 0; part < 2; part++) {
                snprintf(name, sizeof name, "blk.%d.%s", layer, part ? "ffn_up_exps.bias" : "ffn_gate_exps.bias");
                t_want *x = want_add(w, name, 2, b / 2, a, 1);
                for (int64_t e = 0; e < a; e++)
                    for (int64_t f = 0; f < b / 2; f++) x->v[e * (b / 2) + f] = src_at(t, e * b + 2 * f + part);
            }
            continue;
        }
        size_t k = 0, nk = sizeof k_plain / sizeof k_plain[0];
        while (k < nk && strcmp(rest, k_plain[k].hf)) k++;
        if (k == nk) {
            T_CHECK(0, "%s: unexpected tensor %s", dir, t->name);
            ok = false;
            break;
        }
        snprintf(name, sizeof name, "blk.%d.%s", layer, k_plain[k].gguf);
        t_want *x = want_add(w, name, t->n_dims, t->n_dims > 1 ? b : a, a, 1);
        for (int64_t e = 0; e < x->n; e++) x->v[e] = src_at(t, e);
    }
    lmq_safetensors_close(st);
    return ok;
}

/* ================================================================ comparisons */

/* The gpt-oss.* keys lmq may write beyond the reference's: vocab_size and
 * rope.dimension_count, which llama.cpp reads optionally, with the same
 * defaults. */
static const char *const k_optional_keys[] = {"vocab_size", "rope.dimension_count", NULL};

/* 1. The container holds exactly the wanted tensors: floats (in `ftype`)
 * value for value, MXFP4 block for block; the blocks decode by ggml's rule
 * to what the source's decode to by Hugging Face's. */
static void check_container(const char *what, const char *path, const t_wants *w, lmq_type ftype)
{
    lmq_file *f = NULL;
    if (lmq_file_open(path, &f) != LMQ_OK) {
        T_CHECK(0, "%s: open %s: %s", what, path, lmq_last_error());
        return;
    }
    int bad = 0, n_mx = 0, n_decoded = 0;
    for (size_t i = 0; i < w->n; i++) {
        const t_want *x = &w->t[i];
        const lmq_tensor_info *t = lmq_file_find_tensor(f, x->name);
        lmq_type want_type = x->n_dims == 1 || strstr(x->name, ".bias") ? LMQ_TYPE_F32 : ftype;
        if (x->blocks) want_type = LMQ_TYPE_MXFP4;
        if (!t || !t_same_shape(t, x) || t->type != want_type) {
            fprintf(stderr, "%s: %s missing, of another shape or not %s\n", what, x->name, lmq_type_name(want_type));
            bad++;
            continue;
        }
        int64_t off = 0;
        if (x->blocks) {
            n_mx++;
            if (t->nbytes != x->blocks_bytes || memcmp(t->data, x->blocks, x->blocks_bytes)) off = 1;
            const uint8_t *blk = t->data;
            int64_t dec_off = 0;
            for (int64_t k = 0; k < x->n; k++) {
                float g = ggml_value(blk + (k / 32) * 17, (int)(k % 32));
                if (memcmp(&g, &x->v[k], 4) && !(g == 0 && x->v[k] == 0)) dec_off++;
            }
            n_decoded += dec_off == 0;
            off += dec_off;
        } else {
            float *v = t->type == LMQ_TYPE_F32 ? NULL : t_tensor_floats(t);
            const float *tv = v ? v : t->data;
            for (int64_t k = 0; k < x->n; k++)
                if (memcmp(&tv[k], &x->v[k], 4)) off++;
            free(v);
        }
        if (off) {
            fprintf(stderr, "%s: %s: %lld values differ from the source's conversion\n", what, x->name,
                    (long long)off);
            bad++;
        }
    }
    T_CHECK(bad == 0 && lmq_file_n_tensors(f) == w->n, "%s: %zu tensors equal the source's conversion (%d bad, %zu in "
            "the container)", what, w->n, bad, lmq_file_n_tensors(f));
    T_CHECK(n_mx == 12 && n_decoded == n_mx, "%s: %d MXFP4 stacks decode (ggml's rule) to the source's values "
            "(Hugging Face's rule): %d", what, n_mx, n_decoded);
    lmq_file_close(f);
}

static bool open2(const char *a_path, lmq_file **a, const char *b_path, lmq_file **b)
{
    *a = *b = NULL;
    if (lmq_file_open(a_path, a) == LMQ_OK && lmq_file_open(b_path, b) == LMQ_OK) return true;
    T_CHECK(0, "open %s / %s: %s", a_path, b_path, lmq_last_error());
    lmq_file_close(*a);
    *a = NULL;
    return false;
}

/* 2. Against the reference. */
static void check_reference(const char *f32_path, const char *ref_path, const t_wants *w)
{
    lmq_file *ours, *ref;
    if (!open2(f32_path, &ours, ref_path, &ref)) return;
    t_check_names("f32 vs reference", ours, ref, T_NAMES_SHAPES);
    t_check_keys("f32 vs reference", lmq_file_meta(ours), lmq_file_meta(ref), "gpt-oss", k_optional_keys, 19);
    int n_mx = 0, mx_same = 0, n_f32 = 0, f32_same = 0, n_q8 = 0, q8_same = 0, bad = 0;
    double max_q8 = 0;
    printf("%-34s %-6s %12s\n", "tensor (layer 0)", "type", "rel. RMS");
    for (size_t i = 0; i < lmq_file_n_tensors(ref); i++) {
        const lmq_tensor_info *t = lmq_file_tensor(ref, i), *o = lmq_file_find_tensor(ours, t->name);
        const t_want *x = t_want_find(w, t->name);
        if (!o || !x || !t_same_shape(t, x)) {
            bad++;
            continue;
        }
        double e = 0;
        if (t->type == LMQ_TYPE_MXFP4) {
            n_mx++;
            mx_same += o->type == LMQ_TYPE_MXFP4 && o->nbytes == t->nbytes && !memcmp(o->data, t->data, (size_t)t->nbytes);
        } else if (t->type == LMQ_TYPE_F32) {
            n_f32++;
            f32_same += t->nbytes == (uint64_t)x->n * 4 && !memcmp(t->data, x->v, (size_t)t->nbytes);
        } else {
            n_q8++;
            float *rv = t_tensor_floats(t);
            e = rv ? t_rel_rms(x->v, rv, x->n) : INFINITY;
            if (e > max_q8) max_q8 = e;
            free(rv);
            /* the same quantizer on the same values gives the same blocks */
            uint8_t *q = malloc((size_t)t->nbytes);
            int64_t rows = x->n / x->ne[0], rb = lmq_row_size(t->type, x->ne[0]);
            bool okq = true;
            for (int64_t r = 0; r < rows && okq; r++)
                okq = lmq_quantize_row(t->type, x->v + r * x->ne[0], q + r * rb, x->ne[0], NULL) == LMQ_OK;
            q8_same += okq && !memcmp(q, t->data, (size_t)t->nbytes);
            free(q);
        }
        if (!strncmp(t->name, "blk.0.", 6) || !strchr(t->name, '.') || strncmp(t->name, "blk.", 4))
            printf("%-34s %-6s %12.4e\n", t->name, lmq_type_name(t->type), e);
    }
    printf("reference: %d MXFP4, %d f32, %d q8_0 tensors; q8_0 max rel. RMS %.3g\n", n_mx, n_f32, n_q8, max_q8);
    T_CHECK(bad == 0, "every reference tensor has a wanted counterpart of its shape (%d not)", bad);
    T_CHECK(n_mx == 12 && mx_same == n_mx, "MXFP4 experts are the reference's bytes: %d of %d", mx_same, n_mx);
    T_CHECK(n_f32 == 49 && f32_same == n_f32, "f32 reference tensors (norms, biases, sinks, router) equal ours: %d of %d",
            f32_same, n_f32);
    /* q8_0 on these weights: a relative RMS error of ~0.4% */
    T_CHECK(n_q8 == 18 && max_q8 < 0.01, "q8_0 reference tensors within q8_0's error (max %.3g)", max_q8);
    T_CHECK(q8_same == n_q8, "lmq's q8_0 of %d of %d tensors is the reference's bytes", q8_same, n_q8);
    lmq_file_close(ours);
    lmq_file_close(ref);
}

/* 3. Export of ours, import of the reference and its export. */
static void check_gguf(const char *f32_path, const char *q8_path, const char *ref_path)
{
    const char *gguf = t_tmp("export-f32.gguf"), *gq8 = t_tmp("export-q8.gguf"), *imp = t_tmp("import.lmq"),
               *back = t_tmp("import-export.gguf");
    lmq_file *a, *b;
    lmq_status s = lmq_export_gguf(f32_path, gguf, NULL, NULL);
    T_CHECK(s == LMQ_OK, "export f32: %s", lmq_last_error());
    if (!s && open2(gguf, &a, ref_path, &b)) {
        t_check_names("export f32", a, b, T_NAMES_SHAPES);
        t_check_keys("export f32", lmq_file_meta(a), lmq_file_meta(b), "gpt-oss", k_optional_keys, 19);
        bool no_lmq = true;
        for (size_t i = 0; i < lmq_meta_count(lmq_file_meta(a)); i++)
            no_lmq &= strncmp(lmq_meta_key(lmq_file_meta(a), i), "lmq.", 4) != 0;
        T_CHECK(no_lmq, "export: lmq.* keys dropped (lmq.rope.yarn_truncate, the window layers)");
        lmq_file_close(a);
        lmq_file_close(b);
        if (open2(gguf, &a, f32_path, &b)) t_check_names("export f32 vs container (bytes)", a, b, T_NAMES_BYTES);
        lmq_file_close(a);
        lmq_file_close(b);
    }
    s = q8_path ? lmq_export_gguf(q8_path, gq8, NULL, NULL) : LMQ_ERR_NOT_FOUND;
    T_CHECK(s == LMQ_OK, "export q8_0: %s", lmq_last_error());
    if (!s && open2(gq8, &a, ref_path, &b)) {
        t_check_names("export q8_0 vs reference (bytes)", a, b, T_NAMES_BYTES);
        t_check_keys("export q8_0", lmq_file_meta(a), lmq_file_meta(b), "gpt-oss", k_optional_keys, 19);
        uint64_t ft = 0;
        lmq_meta_get_u64(lmq_file_meta(a), "general.file_type", &ft);
        T_CHECK(ft == 7, "export q8_0: general.file_type %llu (MOSTLY_Q8_0 = 7)", (unsigned long long)ft);
        lmq_file_close(a);
        lmq_file_close(b);
    }
    s = lmq_convert_gguf(ref_path, imp, NULL, NULL);
    T_CHECK(s == LMQ_OK, "import of the reference GGUF: %s", lmq_last_error());
    if (!s && open2(imp, &a, ref_path, &b)) {
        t_check_names("import (bytes)", a, b, T_NAMES_BYTES);
        const char *layout = NULL;
        lmq_meta_get_str(lmq_file_meta(a), "lmq.rope.layout", &layout, NULL);
        T_CHECK(layout && !strcmp(layout, "neox"), "import: rotate-half RoPE pairs (%s)", layout ? layout : "none");
        T_CHECK(!lmq_meta_find(lmq_file_meta(a), "lmq.rope.yarn_truncate"),
                "import: no lmq.rope.yarn_truncate (a llama.cpp file means ggml's YaRN rounding)");
        lmq_file_close(a);
        lmq_file_close(b);
        s = lmq_export_gguf(imp, back, NULL, NULL);
        T_CHECK(s == LMQ_OK, "export of the import: %s", lmq_last_error());
        if (!s && open2(back, &a, ref_path, &b)) {
            t_check_names("import + export (bytes)", a, b, T_NAMES_BYTES);
            t_check_keys("import + export", lmq_file_meta(a), lmq_file_meta(b), "gpt-oss", k_optional_keys, 19);
            lmq_file_close(a);
            lmq_file_close(b);
        }
    }
    remove(gguf);
    remove(gq8);
    remove(imp);
    remove(back);
}

/* 4. Mixes: q8_0 is the reference byte for byte; every mix keeps the MXFP4
 * experts; llama.cpp's 8-expert rules for the rest. Returns the q8_0 path. */
static const char *check_quantize(const char *f32_path, const char *ref_path)
{
    static const struct {
        const char *mix;
        lmq_type base, attn_kv, attn_out;
    } mixes[] = {{"q8_0", LMQ_TYPE_Q8_0, LMQ_TYPE_Q8_0, LMQ_TYPE_Q8_0},
                 {"q4_k_m", LMQ_TYPE_Q4_K, LMQ_TYPE_Q8_0, LMQ_TYPE_Q5_K},
                 {"f16", LMQ_TYPE_F16, LMQ_TYPE_F16, LMQ_TYPE_F16}};
    static char q8[4096];
    q8[0] = 0;
    for (size_t m = 0; m < sizeof mixes / sizeof mixes[0]; m++) {
        char out[4096];
        snprintf(out, sizeof out, "%s/%s.lmq", t_tmpdir(), mixes[m].mix);
        lmq_quantize_opts o = {.mix = mixes[m].mix, .output_type = LMQ_TYPE_COUNT, .token_embd_type = LMQ_TYPE_COUNT,
                               .n_threads = 2};
        lmq_status s = lmq_quantize_model(f32_path, out, &o, NULL);
        T_CHECK(s == LMQ_OK, "quantize %s: %s", mixes[m].mix, lmq_last_error());
        lmq_file *f = NULL, *ref = NULL;
        if (s || !open2(out, &f, f32_path, &ref)) continue;
        int bad = 0;
        for (size_t i = 0; i < lmq_file_n_tensors(f); i++) {
            const lmq_tensor_info *t = lmq_file_tensor(f, i), *src = lmq_file_find_tensor(ref, t->name);
            lmq_type want = mixes[m].base;
            if (t->n_dims == 1 || strstr(t->name, ".bias") || strstr(t->name, "ffn_gate_inp.")) want = LMQ_TYPE_F32;
            else if (strstr(t->name, "_exps.weight")) want = LMQ_TYPE_MXFP4;
            else if (strstr(t->name, "attn_k.") || strstr(t->name, "attn_v.")) want = mixes[m].attn_kv;
            else if (strstr(t->name, "attn_output.")) want = mixes[m].attn_out;
            else if (!strcmp(t->name, "output.weight") && m == 1) want = LMQ_TYPE_Q6_K;
            bool ok = t->type == want;
            if (ok && want == LMQ_TYPE_MXFP4) ok = src && !memcmp(src->data, t->data, (size_t)t->nbytes);
            if (!ok) {
                fprintf(stderr, "%s: %s is %s, want %s\n", mixes[m].mix, t->name, lmq_type_name(t->type),
                        lmq_type_name(want));
                bad++;
            }
        }
        T_CHECK(bad == 0, "%s: MXFP4 experts kept as they are, biases/sinks/router f32, llama.cpp's 8-expert rules "
                "(%d differ)", mixes[m].mix, bad);
        lmq_file_close(ref);
        if (m == 0) {
            if (!lmq_file_open(ref_path, &ref)) t_check_names("q8_0 vs the reference (bytes)", f, ref, T_NAMES_BYTES);
            lmq_file_close(ref);
            snprintf(q8, sizeof q8, "%s", out);
        } else {
            remove(out);
        }
        lmq_file_close(f);
    }
    return q8[0] ? q8 : NULL;
}

/* --tensor-type on the MXFP4 experts: dequantized to f32 they are the
 * source's values; q8_0 is accepted (an explicit request). Needs lmq's MXFP4
 * dequantizer. */
static void check_override(const char *f32_path, const t_wants *w)
{
    static const struct {
        const char *type;
        lmq_type t;
    } cases[] = {{"f32", LMQ_TYPE_F32}, {"q8_0", LMQ_TYPE_Q8_0}};
    for (size_t c = 0; c < 2; c++) {
        const char *out = t_tmp("override.lmq");
        lmq_mix_override ov = {"ffn_(gate|up|down)_exps\\.weight", cases[c].t};
        lmq_quantize_opts o = {.mix = "q8_0", .output_type = LMQ_TYPE_COUNT, .token_embd_type = LMQ_TYPE_COUNT,
                               .overrides = &ov, .n_overrides = 1, .n_threads = 2};
        lmq_status s = lmq_quantize_model(f32_path, out, &o, NULL);
        T_CHECK(s == LMQ_OK, "--tensor-type experts=%s: %s", cases[c].type, lmq_last_error());
        lmq_file *f = NULL;
        if (s || lmq_file_open(out, &f)) continue;
        int n = 0, ok = 0;
        for (size_t i = 0; i < w->n; i++) {
            const t_want *x = &w->t[i];
            const lmq_tensor_info *t = x->blocks ? lmq_file_find_tensor(f, x->name) : NULL;
            if (!x->blocks) continue;
            n++;
            if (!t || t->type != cases[c].t) continue;
            float *v = t_tensor_floats(t);
            if (v && cases[c].t == LMQ_TYPE_F32) ok += !memcmp(v, x->v, (size_t)x->n * 4);
            else if (v) ok += t_rel_rms(v, x->v, x->n) < 0.01;
            free(v);
        }
        T_CHECK(n == 12 && ok == n, "--tensor-type experts=%s: %d of %d stacks %s", cases[c].type, ok, n,
                c ? "within q8_0's error of the source" : "equal the source's values");
        lmq_file_close(f);
        remove(out);
    }
}

/* ================================================================ crafted directories */

static void edit_swiglu_5(cJSON *c)
{
    cJSON_ReplaceItemInObject(c, "swiglu_limit", cJSON_CreateNumber(5.0));
}

static void edit_attention_factor(cJSON *c)
{
    cJSON_AddNumberToObject(cJSON_GetObjectItem(c, "rope_scaling"), "attention_factor", 2.0);
}

static void edit_full_first(cJSON *c)
{
    cJSON *lt = cJSON_GetObjectItem(c, "layer_types");
    for (int i = 0; i < cJSON_GetArraySize(lt); i++)
        cJSON_ReplaceItemInArray(lt, i, cJSON_CreateString(i % 2 ? "sliding_attention" : "full_attention"));
}

/* transformers 5: rope_parameters with rope_theta inside; no truncate (default true) */
static void edit_rope_parameters(cJSON *c)
{
    cJSON *rp = cJSON_DetachItemFromObject(c, "rope_scaling");
    cJSON_AddNumberToObject(rp, "rope_theta", cJSON_GetObjectItem(c, "rope_theta")->valuedouble);
    cJSON_DeleteItemFromObject(c, "rope_theta");
    cJSON_DeleteItemFromObject(rp, "truncate");
    cJSON_AddItemToObject(c, "rope_parameters", rp);
}

/* Every tensor of `a` equals the one of the same name in `b`, bytes included,
 * except the ones whose name contains `skip` (NULL: none). */
static void check_same(const char *what, const char *a_path, const char *b_path, const char *skip)
{
    lmq_file *a, *b;
    if (!open2(a_path, &a, b_path, &b)) return;
    int bad = 0, n = 0;
    for (size_t i = 0; i < lmq_file_n_tensors(b); i++) {
        const lmq_tensor_info *y = lmq_file_tensor(b, i), *x = lmq_file_find_tensor(a, y->name);
        if (skip && strstr(y->name, skip)) continue;
        n++;
        if (!x || x->type != y->type || x->nbytes != y->nbytes || memcmp(x->data, y->data, (size_t)x->nbytes)) {
            fprintf(stderr, "%s: %s differs\n", what, y->name);
            bad++;
        }
    }
    T_CHECK(bad == 0 && n > 0 && lmq_file_n_tensors(a) == lmq_file_n_tensors(b), "%s: %d tensors the same (%d differ)",
            what, n, bad);
    lmq_file_close(a);
    lmq_file_close(b);
}

/* The float form: gate_up_proj [E, H, 2F] and down_proj [E, F, H] (input by
 * output) in BF16, holding the values the MXFP4 blocks decode to. */
static t_st_entry *float_form(const t_st_entry *e, size_t n, size_t *n_out, uint16_t ***bufs_out)
{
    t_st_entry *o = calloc(n, sizeof *o);
    uint16_t **bufs = calloc(n, sizeof *bufs);
    size_t m = 0;
    bool exact = true;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(e[i].name);
        if (len > 7 && !strcmp(e[i].name + len - 7, "_scales")) continue;
        if (len <= 7 || strcmp(e[i].name + len - 7, "_blocks")) {
            o[m++] = e[i];
            continue;
        }
        const t_st_entry *sc = NULL;
        for (size_t k = 0; k < n; k++)
            if (!strncmp(e[k].name, e[i].name, len - 7) && !strcmp(e[k].name + len - 7, "_scales")) sc = &e[k];
        const int64_t E = e[i].shape[0], R = e[i].shape[1], nb = e[i].shape[2], C = nb * 32;
        uint16_t *d = malloc((size_t)(E * R * C) * 2);
        for (int64_t x = 0; x < E; x++)
            for (int64_t r = 0; r < R; r++)
                for (int64_t c = 0; c < C; c++) {
                    const int64_t blk = (x * R + r) * nb + c / 32;
                    float v = hf_value((const uint8_t *)e[i].data + blk * 16, ((const uint8_t *)sc->data)[blk],
                                       (int)(c % 32));
                    d[(x * C + c) * R + r] = lmq_fp32_to_bf16(v);
                    exact &= lmq_bf16_to_fp32(d[(x * C + c) * R + r]) == v;
                }
        t_st_entry *q = &o[m];
        snprintf(q->name, sizeof q->name, "%.*s", (int)(len - 7), e[i].name);
        q->dtype = "BF16";
        q->n_dims = 3;
        q->shape[0] = E;
        q->shape[1] = C;
        q->shape[2] = R;
        q->data = d;
        q->nbytes = (uint64_t)(E * R * C) * 2;
        bufs[m++] = d;
    }
    T_CHECK(exact, "the MXFP4 values are exact in BF16");
    *n_out = m;
    *bufs_out = bufs;
    return o;
}

static void check_crafted(const char *src, const char *f32_path, const t_wants *w)
{
    const char *out = t_tmp("crafted.lmq"), *dir;
    char *cfg;
    lmq_convert_opts co = {.out_type = LMQ_TYPE_F32, .codec = LMQ_CODEC_NONE, .n_threads = 1};
    lmq_status s;

    /* the float form of the experts: the same tensors, in f32 */
    lmq_safetensors *st = NULL;
    if (lmq_safetensors_open(src, &st)) {
        T_CHECK(0, "open %s: %s", src, lmq_last_error());
        return;
    }
    size_t n, nf;
    t_st_entry *e = t_entries_of(st, 0, &n);
    uint16_t **bufs = NULL;
    t_st_entry *fe = float_form(e, n, &nf, &bufs);
    dir = t_crafted(src, "float_experts", NULL, fe, nf);
    s = lmq_convert_hf(dir, out, &co, NULL);
    T_CHECK(s == LMQ_OK, "float experts [E, in, out]: %s", lmq_last_error());
    if (!s) {
        lmq_file *f = NULL;
        int ok = 0, nx = 0;
        if (!lmq_file_open(out, &f)) {
            for (size_t i = 0; i < w->n; i++) {
                const t_want *x = &w->t[i];
                if (!x->blocks) continue;
                nx++;
                const lmq_tensor_info *t = lmq_file_find_tensor(f, x->name);
                ok += t && t->type == LMQ_TYPE_F32 && t_same_shape(t, x) && !memcmp(t->data, x->v, (size_t)x->n * 4);
            }
        }
        lmq_file_close(f);
        T_CHECK(nx == 12 && ok == nx, "float experts: %d of %d stacks transposed and split to the MXFP4 form's values",
                ok, nx);
        check_same("float experts, other tensors", out, f32_path, "_exps.weight");
    }
    for (size_t i = 0; i < nf; i++) free(bufs[i]);
    free(bufs);
    free(fe);

    /* --type f16 keeps the MXFP4 experts */
    co.out_type = LMQ_TYPE_F16;
    s = lmq_convert_hf(src, out, &co, NULL);
    T_CHECK(s == LMQ_OK, "--type f16: %s", lmq_last_error());
    if (!s) {
        lmq_file *a, *b;
        if (open2(out, &a, f32_path, &b)) {
            int mx = 0, f16 = 0;
            for (size_t i = 0; i < lmq_file_n_tensors(a); i++) {
                const lmq_tensor_info *t = lmq_file_tensor(a, i), *r = lmq_file_find_tensor(b, t->name);
                if (t->type == LMQ_TYPE_MXFP4) mx += r && r->nbytes == t->nbytes && !memcmp(r->data, t->data, (size_t)t->nbytes);
                f16 += t->type == LMQ_TYPE_F16;
            }
            T_CHECK(mx == 12 && f16 == 22, "--type f16: 12 MXFP4 stacks unchanged (%d), 22 matrices f16 (%d)", mx, f16);
            lmq_file_close(a);
            lmq_file_close(b);
        }
    }
    co.out_type = LMQ_TYPE_F32;

    /* transformers 5's rope_parameters: the same keys; truncate absent = true */
    cfg = t_config_with(src, edit_rope_parameters);
    dir = t_crafted(src, "rope_parameters", cfg, NULL, 0);
    free(cfg);
    s = lmq_convert_hf(dir, out, &co, NULL);
    T_CHECK(s == LMQ_OK, "rope_parameters: %s", lmq_last_error());
    if (!s) {
        lmq_file *a, *b;
        if (open2(out, &a, f32_path, &b)) {
            t_check_keys("rope_parameters", lmq_file_meta(a), lmq_file_meta(b), "gpt-oss", k_optional_keys, 19);
            bool tr = false, tr_ref = true;
            lmq_meta_get_bool(lmq_file_meta(a), "lmq.rope.yarn_truncate", &tr);
            lmq_meta_get_bool(lmq_file_meta(b), "lmq.rope.yarn_truncate", &tr_ref);
            T_CHECK(tr && !tr_ref, "lmq.rope.yarn_truncate: %d without the key (want 1), %d for truncate false (want 0)",
                    tr, tr_ref);
            lmq_file_close(a);
            lmq_file_close(b);
        }
    }

    /* refusals */
    cfg = t_config_with(src, edit_swiglu_5);
    dir = t_crafted(src, "swiglu_5", cfg, NULL, 0);
    free(cfg);
    s = lmq_convert_hf(dir, out, &co, NULL);
    t_check_error("swiglu_limit 5", s, LMQ_ERR_UNSUPPORTED, "swiglu_limit 5", "7");

    cfg = t_config_with(src, edit_attention_factor);
    dir = t_crafted(src, "attention_factor", cfg, NULL, 0);
    free(cfg);
    s = lmq_convert_hf(dir, out, &co, NULL);
    /* an explicit attention factor is kept: llama.cpp's attn_factor key multiplies ggml's own
     * 1 + 0.1 ln(factor), so it is written as 2 / (1 + 0.1 ln 32) */
    T_CHECK(s == LMQ_OK, "YaRN attention_factor 2 converts: %s", lmq_last_error());
    if (!s) {
        lmq_file *af_file = NULL;
        double af = NAN;
        if (lmq_file_open(out, &af_file) == LMQ_OK)
            lmq_meta_get_f64(lmq_file_meta(af_file), "gpt-oss.rope.scaling.attn_factor", &af);
        lmq_file_close(af_file);
        T_CHECK(fabs(af - 2.0 / (1.0 + 0.1 * log(32.0))) < 1e-6, "attention_factor 2 stored as %.6f", af);
    }
    remove(out);

    for (size_t i = 0; i < n; i++)
        if (!strcmp(e[i].name, "model.layers.1.mlp.experts.gate_up_proj_scales"))
            snprintf(e[i].name, sizeof e[i].name, "model.layers.1.mlp.experts.gate_up_proj_scalez");
    dir = t_crafted(src, "missing_scales", NULL, e, n);
    remove(out);
    s = lmq_convert_hf(dir, out, &co, NULL);
    t_check_error("missing _scales", s, LMQ_ERR_NOT_FOUND, "model.layers.1.mlp.experts.gate_up_proj_scales", NULL);
    T_CHECK(!t_exists(out), "no output after a refusal");
    for (size_t i = 0; i < n; i++)
        if (strstr(e[i].name, "_scalez")) snprintf(e[i].name, sizeof e[i].name, "model.layers.1.mlp.experts.gate_up_proj_scales");

    for (size_t i = 0; i < n; i++)
        if (!strcmp(e[i].name, "model.layers.2.mlp.experts.down_proj_blocks")) {
            e[i].shape[2] = 2; /* [8, 256, 2, 32]: the same bytes */
            e[i].shape[3] = 32;
        }
    dir = t_crafted(src, "blocks_shape", NULL, e, n);
    s = lmq_convert_hf(dir, out, &co, NULL);
    t_check_error("_blocks of the wrong shape", s, LMQ_ERR_FORMAT, "model.layers.2.mlp.experts.down_proj_blocks",
                  "8, 256, 4, 16");
    free(e);
    lmq_safetensors_close(st);

    /* export refuses a window pattern llama.cpp cannot express */
    cfg = t_config_with(src, edit_full_first);
    dir = t_crafted(src, "full_first", cfg, NULL, 0);
    free(cfg);
    s = lmq_convert_hf(dir, out, &co, NULL);
    T_CHECK(s == LMQ_OK, "layer_types full first: %s", lmq_last_error());
    if (!s) {
        const char *g = t_tmp("refused.gguf");
        s = lmq_export_gguf(out, g, NULL, NULL);
        t_check_error("export with odd sliding layers", s, LMQ_ERR_UNSUPPORTED, "layer 0", "even layers");
        T_CHECK(!t_exists(g), "no GGUF after a refusal");
    }
    remove(out);
}

/* ================================================================ tokenizer */

/* A byte-level BPE tokenizer.json with gpt-oss's pre-tokenizer (o200k's
 * regex split, then ByteLevel without its own regex) and the harmony
 * special tokens; generation_config.json lists <|return|>, <|endoftext|>
 * and <|call|> as gpt-oss's does. */
static void check_tokenizer(void)
{
    static const char o200k[] =
        "[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?[\\\\p{Lu}\\\\p{Lt}\\\\p{Lm}\\\\p{Lo}\\\\p{M}]*[\\\\p{Ll}\\\\p{Lm}\\\\p{Lo}\\\\p{M}]+"
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?[\\\\p{Lu}\\\\p{Lt}\\\\p{Lm}\\\\p{Lo}\\\\p{M}]+"
        "[\\\\p{Ll}\\\\p{Lm}\\\\p{Lo}\\\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+"
        "[\\\\r\\\\n/]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+";
    static const char *const specials[] = {"<|startoftext|>", "<|endoftext|>", "<|return|>", "<|constrain|>",
                                           "<|channel|>", "<|start|>", "<|end|>", "<|message|>", "<|call|>"};
    size_t cap = 1 << 16, len = 0;
    char *j = malloc(cap);
    len += (size_t)snprintf(j + len, cap - len,
                            "{\"version\":\"1.0\",\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"Sequence\","
                            "\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"%s\"},\"behavior\":"
                            "\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
                            "\"trim_offsets\":true,\"use_regex\":false}]},\"decoder\":{\"type\":\"ByteLevel\"},"
                            "\"added_tokens\":[", o200k);
    for (int i = 0; i < 9; i++)
        len += (size_t)snprintf(j + len, cap - len, "%s{\"id\":%d,\"content\":\"%s\",\"special\":true}", i ? "," : "",
                                256 + i, specials[i]);
    len += (size_t)snprintf(j + len, cap - len, "],\"model\":{\"type\":\"BPE\",\"merges\":[],\"vocab\":{");
    /* the 256 byte tokens in GPT-2's byte-to-character map */
    for (int b = 0, extra = 0; b < 256; b++) {
        bool self = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
        unsigned cp = self ? (unsigned)b : 256u + (unsigned)extra++;
        char u[8];
        if (cp == '"' || cp == '\\') snprintf(u, sizeof u, "\\%c", (char)cp);
        else if (cp < 0x80) snprintf(u, sizeof u, "%c", (char)cp);
        else snprintf(u, sizeof u, "%c%c", (char)(0xc0 | (cp >> 6)), (char)(0x80 | (cp & 0x3f)));
        len += (size_t)snprintf(j + len, cap - len, "%s\"%s\":%d", b ? "," : "", u, b);
    }
    len += (size_t)snprintf(j + len, cap - len, "}}}");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/o200k", t_tmpdir());
    mkdir(dir, 0755);
    char p[4200];
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    T_CHECK(t_write_all(p, j, len) == 0, "write %s", p);
    static const char tcfg[] = "{\"tokenizer_class\": \"PreTrainedTokenizerFast\", \"bos_token\": \"<|startoftext|>\", "
                               "\"eos_token\": \"<|return|>\", \"pad_token\": \"<|endoftext|>\"}";
    static const char gen[] = "{\"bos_token_id\": 256, \"eos_token_id\": [258, 257, 264], \"pad_token_id\": 257}";
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    T_CHECK(t_write_all(p, tcfg, strlen(tcfg)) == 0, "write %s", p);
    snprintf(p, sizeof p, "%s/generation_config.json", dir);
    T_CHECK(t_write_all(p, gen, strlen(gen)) == 0, "write %s", p);
    free(j);

    lmq_meta *m = lmq_meta_new();
    lmq_status s = lmq_hf_tokenizer_to_meta(dir, m);
    T_CHECK(s == LMQ_OK, "o200k tokenizer.json: %s", lmq_last_error());
    const char *pre = NULL;
    lmq_meta_get_str(m, "tokenizer.ggml.pre", &pre, NULL);
    T_CHECK(pre && !strcmp(pre, "gpt-4o"), "o200k pre-tokenizer named '%s' (llama.cpp's gpt-oss GGUFs: gpt-4o)",
            pre ? pre : "(none)");
    lmq_vocab *v = NULL;
    s = s ? s : lmq_vocab_load(m, &v);
    T_CHECK(s == LMQ_OK, "o200k vocabulary loads: %s", lmq_last_error());
    if (!s) {
        T_CHECK(lmq_vocab_eos(v) == 258, "eos is <|return|> (%d)", lmq_vocab_eos(v));
        T_CHECK(lmq_vocab_is_eog(v, 258) && lmq_vocab_is_eog(v, 264) && lmq_vocab_is_eog(v, 257),
                "<|return|>, <|call|> and <|endoftext|> end generation");
        T_CHECK(!lmq_vocab_is_eog(v, 262), "<|end|> does not (it closes every harmony message)");
        int32_t ids[16];
        size_t nt = 0;
        s = lmq_tokenize(v, "<|start|>assistant", 18, false, true, ids, 16, &nt);
        T_CHECK(s == LMQ_OK && nt >= 2 && ids[0] == 261, "'<|start|>assistant' starts with <|start|> (%zu tokens, "
                "first %d)", nt, nt ? ids[0] : -1);
    }
    lmq_vocab_free(v);
    lmq_meta_free(m);
}

/* ================================================================ main */

int main(void)
{
    const char *src = t_shared("models/zoo/gptoss");
    char ref[4096];
    snprintf(ref, sizeof ref, "%s", t_shared("reference/zoo/gptoss-q8_0.gguf"));
    char cfgp[4200];
    snprintf(cfgp, sizeof cfgp, "%s/config.json", src);
    if (!t_exists(cfgp) || !t_exists(ref)) t_skip("the gpt-oss zoo model or its reference GGUF is absent");

    check_tokenizer();

    char f32[4096];
    snprintf(f32, sizeof f32, "%s/gptoss-f32.lmq", t_tmpdir());
    lmq_convert_opts co = {.out_type = LMQ_TYPE_F32, .codec = LMQ_CODEC_NONE, .n_threads = 2};
    lmq_status s = lmq_convert_hf(src, f32, &co, NULL);
    T_CHECK(s == LMQ_OK, "convert --type f32: %s", lmq_last_error());
    if (s) return t_finish();
    t_wants w = {0};
    if (build_wants(src, &w)) {
        check_container("f32", f32, &w, LMQ_TYPE_F32);
        const char *autop = t_tmp("gptoss-auto.lmq");
        co.out_type = LMQ_CONVERT_TYPE_AUTO;
        s = lmq_convert_hf(src, autop, &co, NULL);
        T_CHECK(s == LMQ_OK, "convert (auto): %s", lmq_last_error());
        if (!s) check_container("auto (bf16)", autop, &w, LMQ_TYPE_BF16);
        remove(autop);
        check_reference(f32, ref, &w);
        const char *q8 = check_quantize(f32, ref);
        check_gguf(f32, q8, ref);
        check_override(f32, &w);
        check_crafted(src, f32, &w);
    }
    t_wants_free(&w);
    remove(f32);
    return t_finish();
}
