/* Qwen3.5 conversion (../shared/models/zoo/qwen35 and qwen35moe: Gated
 * DeltaNet + gated attention, 2 key / 4 value heads, fused experts) against
 * the safetensors source and against the q8_0 GGUFs that llama.cpp's
 * converter and ik_llama.cpp's quantizer made from the same checkpoints
 * (../shared/reference/zoo/qwen35*-q8_0.gguf):
 *   1. every tensor of the f32 .lmq equals its source under the conversions,
 *      restated here from the Hugging Face side (+1 on the norms except
 *      linear_attn.norm, -exp(A_log), conv1d squeezed, fused experts split,
 *      value heads moved to llama.cpp's tiled order by the forward map
 *      head j -> (j % r) * nk + j / r);
 *   2. tensor names, shapes and every <arch>.* key equal the reference's, and
 *      each tensor agrees with the dequantized reference within q8_0's error,
 *      while the same values in Hugging Face's head order do not (the proof
 *      of the head order); lmq's q8_0 of each tensor is the reference's bytes;
 *   3. `lmq export` gives the reference's names, shapes and keys; the
 *      reference imports into .lmq bit for bit and exports back;
 *   4. q4_k_m, q8_0 and q2_k quantize (llama.cpp's rules for the new
 *      tensors; q8_0 gives the reference's tensors byte for byte);
 *   5. the multimodal layout (text_config, model.language_model.*, visual
 *      and mtp tensors) and per-expert tensors convert to the same bytes;
 *      refusals (attn_output_gate false, a missing linear_attn tensor,
 *      layer_types of the wrong length or against the tensors, export of
 *      what llama.cpp cannot express) are one line each.
 * Exit 77 (skipped) when the data is absent. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_convert.h"
#include "lmq_format.h"
#include "lmq_quant.h"
#include "testutil.h"

/* ================================================================ the source, restated */

typedef struct geom {
    int64_t nk, nv, dk, dv, n_layer;
} geom;

static float *source_floats(const lmq_st_tensor *t, int64_t n)
{
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        if (t->type == LMQ_TYPE_F32) {
            memcpy(&v[i], (const uint8_t *)t->data + 4 * i, 4);
        } else {
            uint16_t h;
            memcpy(&h, (const uint8_t *)t->data + 2 * i, 2);
            v[i] = t->type == LMQ_TYPE_BF16 ? t_bf16f(h) : NAN; /* the zoo is BF16 */
        }
    }
    return v;
}

enum { OP_COPY, OP_PLUS1, OP_NEGEXP };
enum { RO_NONE, RO_QKV, RO_DV, RO_ONE, RO_COLS };

/* Hugging Face name (after "model.layers.N.") -> GGUF name (after "blk.N.") */
static const struct {
    const char *hf, *gguf;
    int op, ro;
} k_layer_map[] = {
    {"input_layernorm.weight", "attn_norm.weight", OP_PLUS1, RO_NONE},
    {"post_attention_layernorm.weight", "post_attention_norm.weight", OP_PLUS1, RO_NONE},
    {"self_attn.q_proj.weight", "attn_q.weight", OP_COPY, RO_NONE},
    {"self_attn.k_proj.weight", "attn_k.weight", OP_COPY, RO_NONE},
    {"self_attn.v_proj.weight", "attn_v.weight", OP_COPY, RO_NONE},
    {"self_attn.o_proj.weight", "attn_output.weight", OP_COPY, RO_NONE},
    {"self_attn.q_norm.weight", "attn_q_norm.weight", OP_PLUS1, RO_NONE},
    {"self_attn.k_norm.weight", "attn_k_norm.weight", OP_PLUS1, RO_NONE},
    {"linear_attn.in_proj_qkv.weight", "attn_qkv.weight", OP_COPY, RO_QKV},
    {"linear_attn.in_proj_z.weight", "attn_gate.weight", OP_COPY, RO_DV},
    {"linear_attn.in_proj_b.weight", "ssm_beta.weight", OP_COPY, RO_ONE},
    {"linear_attn.in_proj_a.weight", "ssm_alpha.weight", OP_COPY, RO_ONE},
    {"linear_attn.conv1d.weight", "ssm_conv1d.weight", OP_COPY, RO_QKV},
    {"linear_attn.dt_bias", "ssm_dt.bias", OP_COPY, RO_ONE},
    {"linear_attn.A_log", "ssm_a", OP_NEGEXP, RO_ONE},
    {"linear_attn.norm.weight", "ssm_norm.weight", OP_COPY, RO_NONE}, /* a plain weight: no +1 */
    {"linear_attn.out_proj.weight", "ssm_out.weight", OP_COPY, RO_COLS},
    {"mlp.gate_proj.weight", "ffn_gate.weight", OP_COPY, RO_NONE},
    {"mlp.up_proj.weight", "ffn_up.weight", OP_COPY, RO_NONE},
    {"mlp.down_proj.weight", "ffn_down.weight", OP_COPY, RO_NONE},
    {"mlp.gate.weight", "ffn_gate_inp.weight", OP_COPY, RO_NONE},
    {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight", OP_COPY, RO_NONE},
    {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight", OP_COPY, RO_NONE},
    {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight", OP_COPY, RO_NONE},
    {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight", OP_COPY, RO_NONE},
};

/* Value heads to llama.cpp's tiled order, forward: Hugging Face head j goes
 * to (j % r) * nk + j / r. rows x len values; heads of hd rows start at row
 * off, or (RO_COLS) heads of hd columns in every row. */
static void tile_heads(const float *src, float *dst, int64_t rows, int64_t len, int ro, const geom *g)
{
    memcpy(dst, src, (size_t)(rows * len) * sizeof *dst);
    const int64_t r = g->nv / g->nk;
    if (ro == RO_COLS) {
        for (int64_t row = 0; row < rows; row++)
            for (int64_t j = 0; j < g->nv; j++)
                memcpy(dst + row * len + ((j % r) * g->nk + j / r) * g->dv, src + row * len + j * g->dv,
                       (size_t)g->dv * sizeof *dst);
        return;
    }
    const int64_t off = ro == RO_QKV ? 2 * g->nk * g->dk : 0, hd = ro == RO_ONE ? 1 : g->dv;
    for (int64_t j = 0; j < g->nv; j++)
        memcpy(dst + (off + ((j % r) * g->nk + j / r) * hd) * len, src + (off + j * hd) * len,
               (size_t)(hd * len) * sizeof *dst);
}

static t_want *want_add(t_wants *w, const char *name, uint32_t n_dims, const int64_t *ne)
{
    w->t = realloc(w->t, (w->n + 1) * sizeof *w->t);
    t_want *x = &w->t[w->n++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", name);
    x->n_dims = n_dims;
    x->n = 1;
    for (int d = 0; d < 3; d++) {
        x->ne[d] = d < (int)n_dims ? ne[d] : 1;
        x->n *= x->ne[d];
    }
    return x;
}

/* The tensors the conversion must write, from the safetensors alone. */
static bool build_wants(const char *dir, const geom *g, t_wants *w)
{
    lmq_safetensors *st = NULL;
    if (lmq_safetensors_open(dir, &st) != LMQ_OK) {
        T_CHECK(0, "open %s: %s", dir, lmq_last_error());
        return false;
    }
    bool ok = true;
    for (size_t i = 0; i < lmq_safetensors_count(st) && ok; i++) {
        const lmq_st_tensor *t = lmq_safetensors_tensor(st, i);
        int64_t n = 1, ne[3] = {1, 1, 1};
        for (uint32_t d = 0; d < t->n_dims; d++) n *= t->shape[d];
        /* ggml order, the conv's middle 1 squeezed */
        uint32_t nd = 0;
        for (int d = (int)t->n_dims - 1; d >= 0; d--)
            if (t->shape[d] != 1 || t->n_dims == 1) ne[nd++] = t->shape[d];
        if (t->n_dims == 2 && t->shape[0] == 1) nd = 1; /* shared_expert_gate [1, H] */
        int layer = -1, used = 0;
        char gname[96];
        if (!strcmp(t->name, "model.embed_tokens.weight")) {
            t_want *x = want_add(w, "token_embd.weight", nd, ne);
            x->v = x->hf = source_floats(t, n);
            continue;
        }
        if (!strcmp(t->name, "model.norm.weight")) {
            t_want *x = want_add(w, "output_norm.weight", nd, ne);
            x->v = x->hf = source_floats(t, n);
            for (int64_t k = 0; k < n; k++) x->v[k] += 1.0f;
            continue;
        }
        if (sscanf(t->name, "model.layers.%d.%n", &layer, &used) != 1 || !used) {
            T_CHECK(0, "%s: unexpected tensor %s", dir, t->name);
            ok = false;
            break;
        }
        const char *rest = t->name + used;
        if (!strcmp(rest, "mlp.experts.gate_up_proj") || !strcmp(rest, "mlp.experts.down_proj")) {
            /* [E, R, C]: gate_up rows [0, F) gate, [F, 2F) up; down as it is */
            const bool down = strstr(rest, "down") != NULL;
            const int64_t E = t->shape[0], R = t->shape[1], C = t->shape[2], F = down ? R : R / 2;
            float *all = source_floats(t, n);
            for (int part = 0; part < (down ? 1 : 2); part++) {
                snprintf(gname, sizeof gname, "blk.%d.%s", layer,
                         down ? "ffn_down_exps.weight" : part ? "ffn_up_exps.weight" : "ffn_gate_exps.weight");
                int64_t ne3[3] = {C, F, E};
                t_want *x = want_add(w, gname, 3, ne3);
                x->v = x->hf = malloc((size_t)x->n * sizeof(float));
                for (int64_t e = 0; e < E; e++)
                    memcpy(x->v + e * F * C, all + (e * R + part * F) * C, (size_t)(F * C) * sizeof(float));
            }
            free(all);
            continue;
        }
        size_t k = 0, nm = sizeof k_layer_map / sizeof k_layer_map[0];
        while (k < nm && strcmp(rest, k_layer_map[k].hf)) k++;
        if (k == nm) {
            T_CHECK(0, "%s: unexpected tensor %s", dir, t->name);
            ok = false;
            break;
        }
        snprintf(gname, sizeof gname, "blk.%d.%s", layer, k_layer_map[k].gguf);
        t_want *x = want_add(w, gname, nd, ne);
        x->hf = source_floats(t, n);
        if (k_layer_map[k].op == OP_PLUS1)
            for (int64_t e = 0; e < n; e++) x->hf[e] += 1.0f;
        if (k_layer_map[k].op == OP_NEGEXP) {
            for (int64_t e = 0; e < n; e++) x->hf[e] = (float)-exp((double)x->hf[e]);
            x->approx = true;
        }
        if (k_layer_map[k].ro == RO_NONE || g->nk == g->nv) {
            x->v = x->hf;
        } else {
            x->v = malloc((size_t)n * sizeof(float));
            const int64_t rows = nd == 1 ? ne[0] : ne[1], len = nd == 1 ? 1 : ne[0];
            tile_heads(x->hf, x->v, rows, len, k_layer_map[k].ro, g);
        }
    }
    lmq_safetensors_close(st);
    return ok;
}

static bool read_geom(const char *dir, geom *g)
{
    cJSON *c = t_config_of(dir);
    if (!c) return false;
    const char *keys[] = {"linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                          "linear_value_head_dim", "num_hidden_layers"};
    int64_t *dst[] = {&g->nk, &g->nv, &g->dk, &g->dv, &g->n_layer};
    bool ok = true;
    for (int i = 0; i < 5; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, keys[i]);
        ok = ok && cJSON_IsNumber(v);
        if (ok) *dst[i] = (int64_t)v->valuedouble;
    }
    cJSON_Delete(c);
    return ok && g->nk > 0 && g->nv % g->nk == 0;
}

/* ================================================================ comparisons */

/* The <arch>.* keys lmq may write beyond the reference's: vocab_size, which
 * llama.cpp reads optionally. */
static const char *const k_optional_keys[] = {"vocab_size", NULL};

/* 1. The container holds exactly the wanted tensors, value for value. */
static void check_container(const char *name, const char *path, const t_wants *w)
{
    lmq_file *f = NULL;
    if (lmq_file_open(path, &f) != LMQ_OK) {
        T_CHECK(0, "%s: open %s: %s", name, path, lmq_last_error());
        return;
    }
    int bad = 0;
    for (size_t i = 0; i < w->n; i++) {
        const t_want *x = &w->t[i];
        const lmq_tensor_info *t = lmq_file_find_tensor(f, x->name);
        if (!t || !t_same_shape(t, x) || t->type != LMQ_TYPE_F32) {
            fprintf(stderr, "%s: %s missing, of another shape or not f32\n", name, x->name);
            bad++;
            continue;
        }
        const float *v = t->data;
        int64_t off = 0;
        for (int64_t k = 0; k < x->n; k++) {
            bool eq = x->approx ? fabsf(v[k] - x->v[k]) <= 2e-7f * fabsf(x->v[k]) : memcmp(&v[k], &x->v[k], 4) == 0;
            if (!eq) off++;
        }
        if (off) {
            fprintf(stderr, "%s: %s: %lld values differ from the source's conversion\n", name, x->name, (long long)off);
            bad++;
        }
    }
    T_CHECK(bad == 0 && lmq_file_n_tensors(f) == w->n, "%s: %zu tensors equal the source's conversion (%d bad, %zu in "
            "the container)", name, w->n, bad, lmq_file_n_tensors(f));
    lmq_file_close(f);
}

/* 2. Against the reference: names, shapes, keys; values within q8_0's error
 * in llama.cpp's head order and far off in Hugging Face's; lmq's q8_0 of
 * each tensor is the reference's bytes. */
static void check_reference(const char *name, const char *arch, const char *f32_path, const char *ref_path,
                            const t_wants *w)
{
    lmq_file *ours = NULL, *ref = NULL;
    if (lmq_file_open(f32_path, &ours) || lmq_file_open(ref_path, &ref)) {
        T_CHECK(0, "%s: open: %s", name, lmq_last_error());
        goto out;
    }
    t_check_names(name, ours, ref, T_NAMES_SHAPES);
    t_check_keys(name, lmq_file_meta(ours), lmq_file_meta(ref), arch, k_optional_keys, 17);
    double max_f32 = 0, max_q8 = 0, min_wrong = INFINITY, max_ratio_ours_wrong = 0;
    int n_q8 = 0, n_same_bytes = 0, n_reordered = 0, bad = 0;
    printf("%-10s %-28s %-5s %12s %14s\n", name, "tensor (layers 0 and 3)", "type", "rel. RMS", "in HF order");
    for (size_t i = 0; i < lmq_file_n_tensors(ref); i++) {
        const lmq_tensor_info *t = lmq_file_tensor(ref, i);
        const t_want *x = t_want_find(w, t->name);
        float *rv = t_tensor_floats(t);
        if (!x || !rv || !t_same_shape(t, x)) {
            free(rv);
            bad++;
            continue;
        }
        const double e = t_rel_rms(x->v, rv, x->n), e_hf = x->hf != x->v ? t_rel_rms(x->hf, rv, x->n) : e;
        if (x->hf != x->v) {
            n_reordered++;
            if (e_hf < min_wrong) min_wrong = e_hf;
            if (e / e_hf > max_ratio_ours_wrong) max_ratio_ours_wrong = e / e_hf;
        }
        if (t->type == LMQ_TYPE_F32) {
            if (e > max_f32) max_f32 = e;
        } else {
            n_q8++;
            if (e > max_q8) max_q8 = e;
            /* the same quantizer on the same values gives the same blocks */
            size_t nb = (size_t)t->nbytes;
            uint8_t *q = malloc(nb);
            int64_t rows = x->n / x->ne[0], rb = lmq_row_size(t->type, x->ne[0]);
            bool okq = true;
            for (int64_t r = 0; r < rows && okq; r++)
                okq = lmq_quantize_row(t->type, x->v + r * x->ne[0], q + r * rb, x->ne[0], NULL) == LMQ_OK;
            if (okq && !memcmp(q, t->data, nb)) n_same_bytes++;
            else fprintf(stderr, "%s: %s: lmq's %s differs from the reference's bytes\n", name, t->name,
                         lmq_type_name(t->type));
            free(q);
        }
        if (!strncmp(t->name, "blk.0.", 6) || !strncmp(t->name, "blk.3.", 6)) {
            char hf[32] = "";
            if (x->hf != x->v) snprintf(hf, sizeof hf, "%.4e", e_hf);
            printf("%-10s %-28s %-5s %12.4e %14s\n", name, t->name, lmq_type_name(t->type), e, hf);
        }
        free(rv);
    }
    printf("%-10s max rel. RMS: f32 tensors %.3g, q8_0 tensors %.3g (%d); reordered tensors in HF order: min %.3g "
           "(%d tensors, ours/HF-order <= %.3g)\n",
           name, max_f32, max_q8, n_q8, min_wrong, n_reordered, max_ratio_ours_wrong);
    T_CHECK(bad == 0, "%s: every reference tensor has a wanted counterpart of its shape (%d not)", name, bad);
    T_CHECK(max_f32 <= 1e-7, "%s: unquantized reference tensors equal ours (max rel. RMS %.3g)", name, max_f32);
    /* q8_0 on these weights: a relative RMS error of ~0.4% */
    T_CHECK(n_q8 > 20 && max_q8 < 0.01, "%s: q8_0 reference tensors within q8_0's error (max %.3g)", name, max_q8);
    /* measured: >= 0.119 (a near-identity conv1d), ours <= 1.4% of that */
    T_CHECK(n_reordered >= 18 && min_wrong > 0.1 && max_ratio_ours_wrong < 0.05,
            "%s: in Hugging Face's head order %d tensors are off by >= %.3g (ours <= %.3g of that)", name, n_reordered,
            min_wrong, max_ratio_ours_wrong);
    T_CHECK(n_same_bytes == n_q8, "%s: lmq's q8_0 of %d of %d tensors is the reference's bytes", name, n_same_bytes,
            n_q8);
out:
    lmq_file_close(ours);
    lmq_file_close(ref);
}

/* 3. Export of ours, import of the reference and its export. */
static void check_gguf(const char *name, const char *arch, const char *f32_path, const char *ref_path)
{
    char gguf[4096], imp[4096], back[4096];
    snprintf(gguf, sizeof gguf, "%s/%s-export.gguf", t_tmpdir(), name);
    snprintf(imp, sizeof imp, "%s/%s-import.lmq", t_tmpdir(), name);
    snprintf(back, sizeof back, "%s/%s-import-export.gguf", t_tmpdir(), name);
    lmq_status s = lmq_export_gguf(f32_path, gguf, NULL, NULL);
    T_CHECK(s == LMQ_OK, "%s: export: %s", name, lmq_last_error());
    lmq_file *a = NULL, *b = NULL, *c = NULL;
    if (!s && !lmq_file_open(gguf, &a) && !lmq_file_open(ref_path, &b) && !lmq_file_open(f32_path, &c)) {
        t_check_names("export", a, b, T_NAMES_SHAPES);
        t_check_keys("export", lmq_file_meta(a), lmq_file_meta(b), arch, k_optional_keys, 17);
        const char *ga = NULL;
        lmq_meta_get_str(lmq_file_meta(a), "general.architecture", &ga, NULL);
        T_CHECK(ga && !strcmp(ga, arch), "%s: exported architecture %s", name, ga ? ga : "(none)");
        T_CHECK(!lmq_meta_find(lmq_file_meta(a), "lmq.layer.recurrent"), "%s: lmq.* keys dropped", name);
        t_check_names("export vs container (bytes)", a, c, T_NAMES_BYTES);
    }
    lmq_file_close(a);
    lmq_file_close(c);
    a = c = NULL;
    s = lmq_convert_gguf(ref_path, imp, NULL, NULL);
    T_CHECK(s == LMQ_OK, "%s: import of the reference GGUF: %s", name, lmq_last_error());
    if (!s && !lmq_file_open(imp, &a)) {
        t_check_names("import (bytes)", a, b, T_NAMES_BYTES);
        const char *layout = NULL;
        lmq_meta_get_str(lmq_file_meta(a), "lmq.rope.layout", &layout, NULL);
        T_CHECK(layout && !strcmp(layout, "neox"), "%s: imported with rotate-half RoPE pairs (%s)", name,
                layout ? layout : "none");
        s = lmq_export_gguf(imp, back, NULL, NULL);
        T_CHECK(s == LMQ_OK, "%s: export of the import: %s", name, lmq_last_error());
        if (!s && !lmq_file_open(back, &c)) {
            t_check_names("import + export (bytes)", c, b, T_NAMES_BYTES);
            t_check_keys("import + export", lmq_file_meta(c), lmq_file_meta(b), arch, k_optional_keys, 17);
        }
    }
    lmq_file_close(a);
    lmq_file_close(b);
    lmq_file_close(c);
    remove(gguf);
    remove(imp);
    remove(back);
}

/* 4. Quantization with llama.cpp's rules. q8_0: the reference byte for byte. */
static void check_quantize(const char *name, const char *f32_path, const char *ref_path)
{
    static const struct {
        const char *mix;
        lmq_type base, qkv;
    } mixes[] = {{"q4_k_m", LMQ_TYPE_Q4_K, LMQ_TYPE_Q5_K}, {"q8_0", LMQ_TYPE_Q8_0, LMQ_TYPE_Q8_0},
                 {"q2_k", LMQ_TYPE_Q2_K, LMQ_TYPE_Q2_K}};
    for (size_t m = 0; m < sizeof mixes / sizeof mixes[0]; m++) {
        char out[4096];
        snprintf(out, sizeof out, "%s/%s-%s.lmq", t_tmpdir(), name, mixes[m].mix);
        lmq_quantize_opts o = {.mix = mixes[m].mix, .output_type = LMQ_TYPE_COUNT, .token_embd_type = LMQ_TYPE_COUNT,
                               .n_threads = 2};
        lmq_status s = lmq_quantize_model(f32_path, out, &o, NULL);
        T_CHECK(s == LMQ_OK, "%s: quantize %s: %s", name, mixes[m].mix, lmq_last_error());
        lmq_file *f = NULL;
        if (s || lmq_file_open(out, &f)) continue;
        int bad = 0;
        for (size_t i = 0; i < lmq_file_n_tensors(f); i++) {
            const lmq_tensor_info *t = lmq_file_tensor(f, i);
            lmq_type want = LMQ_TYPE_COUNT;
            if (t->n_dims == 1 || strstr(t->name, "ssm_conv1d") || strstr(t->name, "ffn_gate_inp.")) want = LMQ_TYPE_F32;
            else if (strstr(t->name, "attn_qkv")) want = mixes[m].qkv;
            else if (strstr(t->name, "ssm_beta") || strstr(t->name, "ssm_alpha") || strstr(t->name, "ssm_out") ||
                     strstr(t->name, "attn_gate"))
                want = mixes[m].base;
            if (want != LMQ_TYPE_COUNT && t->type != want) {
                fprintf(stderr, "%s %s: %s is %s, llama.cpp's rules give %s\n", name, mixes[m].mix, t->name,
                        lmq_type_name(t->type), lmq_type_name(want));
                bad++;
            }
        }
        T_CHECK(bad == 0, "%s %s: the Gated DeltaNet tensors' types follow llama.cpp's rules (%d differ)", name,
                mixes[m].mix, bad);
        if (!strcmp(mixes[m].mix, "q8_0")) {
            lmq_file *r = NULL;
            if (!lmq_file_open(ref_path, &r))
                t_check_names("q8_0 vs the reference (bytes)", f, r, T_NAMES_BYTES_OR_CLOSE);
            lmq_file_close(r);
        }
        lmq_file_close(f);
        remove(out);
    }
}

/* ================================================================ crafted directories */

static void edit_no_gate(cJSON *c)
{
    cJSON_ReplaceItemInObject(c, "attn_output_gate", cJSON_CreateFalse());
}

static void edit_short_layer_types(cJSON *c)
{
    cJSON_DeleteItemFromArray(cJSON_GetObjectItem(c, "layer_types"), 7);
}

static void edit_swapped_layer_types(cJSON *c)
{
    cJSON *lt = cJSON_GetObjectItem(c, "layer_types");
    cJSON_ReplaceItemInArray(lt, 0, cJSON_CreateString("full_attention"));
    cJSON_ReplaceItemInArray(lt, 3, cJSON_CreateString("linear_attention"));
}

static void edit_interval_2(cJSON *c)
{
    cJSON_ReplaceItemInObject(c, "full_attention_interval", cJSON_CreateNumber(2));
}

/* Qwen3_5ForConditionalGeneration's layout: the text config under text_config. */
static void edit_wrapper(cJSON *c)
{
    cJSON *text = cJSON_Duplicate(c, 1);
    cJSON_DeleteItemFromObject(text, "architectures");
    cJSON_DeleteItemFromObject(text, "tie_word_embeddings");
    cJSON_DeleteItemFromObject(text, "eos_token_id");
    cJSON_AddNumberToObject(text, "mtp_num_hidden_layers", 1);
    /* transformers < 5 kept rope_theta and partial_rotary_factor at the top */
    cJSON *rp = cJSON_DetachItemFromObject(text, "rope_parameters");
    cJSON_AddNumberToObject(text, "rope_theta", cJSON_GetObjectItem(rp, "rope_theta")->valuedouble);
    cJSON_AddNumberToObject(text, "partial_rotary_factor", cJSON_GetObjectItem(rp, "partial_rotary_factor")->valuedouble);
    cJSON_DeleteItemFromObject(rp, "rope_theta");
    cJSON_DeleteItemFromObject(rp, "partial_rotary_factor");
    cJSON_AddItemToObject(text, "rope_scaling", rp);
    cJSON *child;
    while ((child = c->child)) cJSON_Delete(cJSON_DetachItemViaPointer(c, child));
    cJSON *arch = cJSON_CreateArray();
    cJSON_AddItemToArray(arch, cJSON_CreateString("Qwen3_5ForConditionalGeneration"));
    cJSON_AddItemToObject(c, "architectures", arch);
    cJSON_AddStringToObject(c, "model_type", "qwen3_5");
    cJSON_AddTrueToObject(c, "tie_word_embeddings");
    cJSON_AddNumberToObject(c, "eos_token_id", 2);
    cJSON_AddItemToObject(c, "text_config", text);
    cJSON_AddItemToObject(c, "vision_config", cJSON_CreateObject());
}

/* Every tensor of `a` equals the one of the same name in `b`, bytes included. */
static void check_same_container(const char *what, const char *a_path, const char *b_path)
{
    lmq_file *a = NULL, *b = NULL;
    if (lmq_file_open(a_path, &a) || lmq_file_open(b_path, &b)) T_CHECK(0, "%s: open: %s", what, lmq_last_error());
    else t_check_names(what, a, b, T_NAMES_BYTES);
    lmq_file_close(a);
    lmq_file_close(b);
}

/* A random checkpoint of another geometry: 3 value heads per key head (so
 * that the tiled order is not its own inverse, as it is for the zoo's 2)
 * and optionally value heads narrower than the key heads. */
typedef struct synth {
    int64_t H, F, V, nh, nkv, hd, nk, nv, dk, dv, K, n_layer;
} synth;

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static uint16_t rand_bf16(void)
{
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    float f = (float)((g_rng >> 40) & 0xffff) / 65536.0f - 0.5f;
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

static void synth_add(t_st_entry *e, size_t *n, uint16_t **bufs, const char *name, uint32_t nd, int64_t a, int64_t b,
                      int64_t c)
{
    t_st_entry *x = &e[*n];
    snprintf(x->name, sizeof x->name, "%s", name);
    x->dtype = "BF16";
    x->n_dims = nd;
    x->shape[0] = a;
    x->shape[1] = b;
    x->shape[2] = c;
    int64_t cnt = a * (nd > 1 ? b : 1) * (nd > 2 ? c : 1);
    uint16_t *d = malloc((size_t)cnt * 2);
    for (int64_t i = 0; i < cnt; i++) d[i] = rand_bf16();
    bufs[*n] = d;
    x->data = d;
    x->nbytes = (uint64_t)cnt * 2;
    (*n)++;
}

/* Writes the synthetic checkpoint (Qwen3_5ForCausalLM, layers lin, lin, lin, full). */
static const char *synth_dir(const char *src, const char *name, const synth *m)
{
    t_st_entry *e = calloc(256, sizeof *e);
    uint16_t **bufs = calloc(256, sizeof *bufs);
    size_t n = 0;
    char t[128];
    const int64_t C = 2 * m->nk * m->dk + m->nv * m->dv;
    synth_add(e, &n, bufs, "model.embed_tokens.weight", 2, m->V, m->H, 0);
    synth_add(e, &n, bufs, "model.norm.weight", 1, m->H, 0, 0);
    for (int64_t l = 0; l < m->n_layer; l++) {
#define L(sfx, nd, a, b, c) (snprintf(t, sizeof t, "model.layers.%lld.%s", (long long)l, sfx), synth_add(e, &n, bufs, t, nd, a, b, c))
        L("input_layernorm.weight", 1, m->H, 0, 0);
        L("post_attention_layernorm.weight", 1, m->H, 0, 0);
        L("mlp.gate_proj.weight", 2, m->F, m->H, 0);
        L("mlp.up_proj.weight", 2, m->F, m->H, 0);
        L("mlp.down_proj.weight", 2, m->H, m->F, 0);
        if (l % 4 == 3) {
            L("self_attn.q_proj.weight", 2, 2 * m->nh * m->hd, m->H, 0);
            L("self_attn.k_proj.weight", 2, m->nkv * m->hd, m->H, 0);
            L("self_attn.v_proj.weight", 2, m->nkv * m->hd, m->H, 0);
            L("self_attn.o_proj.weight", 2, m->H, m->nh * m->hd, 0);
            L("self_attn.q_norm.weight", 1, m->hd, 0, 0);
            L("self_attn.k_norm.weight", 1, m->hd, 0, 0);
        } else {
            L("linear_attn.in_proj_qkv.weight", 2, C, m->H, 0);
            L("linear_attn.in_proj_z.weight", 2, m->nv * m->dv, m->H, 0);
            L("linear_attn.in_proj_b.weight", 2, m->nv, m->H, 0);
            L("linear_attn.in_proj_a.weight", 2, m->nv, m->H, 0);
            L("linear_attn.conv1d.weight", 3, C, 1, m->K);
            L("linear_attn.dt_bias", 1, m->nv, 0, 0);
            L("linear_attn.A_log", 1, m->nv, 0, 0);
            L("linear_attn.norm.weight", 1, m->dv, 0, 0);
            L("linear_attn.out_proj.weight", 2, m->H, m->nv * m->dv, 0);
        }
#undef L
    }
    char cfg[2048];
    snprintf(cfg, sizeof cfg,
             "{\"architectures\": [\"Qwen3_5ForCausalLM\"], \"model_type\": \"qwen3_5_text\", \"hidden_size\": %lld, "
             "\"intermediate_size\": %lld, \"num_hidden_layers\": %lld, \"num_attention_heads\": %lld, "
             "\"num_key_value_heads\": %lld, \"head_dim\": %lld, \"vocab_size\": %lld, \"rms_norm_eps\": 1e-6, "
             "\"hidden_act\": \"silu\", \"attn_output_gate\": true, \"tie_word_embeddings\": true, "
             "\"linear_conv_kernel_dim\": %lld, \"linear_key_head_dim\": %lld, \"linear_value_head_dim\": %lld, "
             "\"linear_num_key_heads\": %lld, \"linear_num_value_heads\": %lld, \"full_attention_interval\": 4, "
             "\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 1e7, \"partial_rotary_factor\": 0.25, "
             "\"mrope_section\": [2, 1, 1]}}",
             (long long)m->H, (long long)m->F, (long long)m->n_layer, (long long)m->nh, (long long)m->nkv,
             (long long)m->hd, (long long)m->V, (long long)m->K, (long long)m->dk, (long long)m->dv, (long long)m->nk,
             (long long)m->nv);
    const char *dir = t_crafted(src, name, cfg, e, n);
    for (size_t i = 0; i < n; i++) free(bufs[i]);
    free(bufs);
    free(e);
    return dir;
}

static void check_synthetic(const char *src)
{
    static const struct {
        const char *name;
        synth m;
        bool exportable;
    } cases[] = {
        {"synth_r3", {64, 96, 4096, 4, 2, 32, 2, 6, 16, 16, 4, 4}, true},
        {"synth_dk_dv", {64, 96, 4096, 4, 2, 32, 2, 6, 16, 8, 3, 4}, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const synth *m = &cases[i].m;
        const char *dir = synth_dir(src, cases[i].name, m);
        char out[4096], gguf[4096];
        snprintf(out, sizeof out, "%s/%s.lmq", t_tmpdir(), cases[i].name);
        snprintf(gguf, sizeof gguf, "%s/%s.gguf", t_tmpdir(), cases[i].name);
        lmq_convert_opts co = {.out_type = LMQ_TYPE_F32, .codec = LMQ_CODEC_NONE, .n_threads = 1};
        lmq_status s = lmq_convert_hf(dir, out, &co, NULL);
        T_CHECK(s == LMQ_OK, "%s: convert: %s", cases[i].name, lmq_last_error());
        if (s) continue;
        geom g = {m->nk, m->nv, m->dk, m->dv, m->n_layer};
        t_wants w = {0};
        if (build_wants(dir, &g, &w)) check_container(cases[i].name, out, &w);
        t_wants_free(&w);
        s = lmq_export_gguf(out, gguf, NULL, NULL);
        if (cases[i].exportable) T_CHECK(s == LMQ_OK, "%s: export: %s", cases[i].name, lmq_last_error());
        else t_check_error("export with dk != dv", s, LMQ_ERR_UNSUPPORTED, "ssm.state_size", NULL);
        remove(out);
        remove(gguf);
    }
}

static void check_crafted(const char *f32_qwen35, const char *f32_moe)
{
    const char *src = t_shared("models/zoo/qwen35"), *src_moe = t_shared("models/zoo/qwen35moe");
    char out[4096], *cfg;
    const char *dir;
    lmq_convert_opts co = {.out_type = LMQ_TYPE_F32, .codec = LMQ_CODEC_NONE, .n_threads = 1};
    lmq_status s;
    snprintf(out, sizeof out, "%s/crafted.lmq", t_tmpdir());

    cfg = t_config_with(src, edit_no_gate);
    dir = t_crafted(src, "no_gate", cfg, NULL, 0);
    free(cfg);
    s = lmq_convert_hf(dir, out, &co, NULL);
    t_check_error("attn_output_gate false", s, LMQ_ERR_UNSUPPORTED, "attn_output_gate", NULL);

    cfg = t_config_with(src, edit_short_layer_types);
    dir = t_crafted(src, "short_types", cfg, NULL, 0);
    free(cfg);
    s = lmq_convert_hf(dir, out, &co, NULL);
    t_check_error("layer_types of 7 entries", s, LMQ_ERR_FORMAT, "layer_types", "8");

    cfg = t_config_with(src, edit_swapped_layer_types);
    dir = t_crafted(src, "swapped_types", cfg, NULL, 0);
    free(cfg);
    s = lmq_convert_hf(dir, out, &co, NULL);
    t_check_error("linear_attn tensor in a full_attention layer", s, LMQ_ERR_FORMAT, "model.layers.0.linear_attn.",
                  "full_attention");

    lmq_safetensors *st = NULL, *st_moe = NULL;
    if (lmq_safetensors_open(src, &st) || lmq_safetensors_open(src_moe, &st_moe)) {
        T_CHECK(0, "open the zoo safetensors: %s", lmq_last_error());
        goto out;
    }
    size_t n;
    t_st_entry *e = t_entries_of(st, 2, &n);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(e[i].name, "model.layers.1.linear_attn.in_proj_b.weight"))
            snprintf(e[i].name, sizeof e[i].name, "model.layers.1.linear_attn.in_proj_bb.weight");
    dir = t_crafted(src, "missing", NULL, e, n);
    s = lmq_convert_hf(dir, out, &co, NULL);
    t_check_error("missing in_proj_b", s, LMQ_ERR_NOT_FOUND, "model.layers.1.linear_attn.in_proj_b.weight", NULL);
    T_CHECK(!t_exists(out), "no output after a refusal");

    /* export refuses what llama.cpp cannot express: an interval that layer_types does not follow */
    cfg = t_config_with(src, edit_interval_2);
    dir = t_crafted(src, "interval_2", cfg, NULL, 0);
    free(cfg);
    s = lmq_convert_hf(dir, out, &co, NULL);
    T_CHECK(s == LMQ_OK, "layer_types wins over full_attention_interval: %s", lmq_last_error());
    if (!s) {
        s = lmq_export_gguf(out, t_tmp("refused.gguf"), NULL, NULL);
        t_check_error("export with layer_types against the interval", s, LMQ_ERR_UNSUPPORTED, "full_attention_interval",
                      "layer 1");
        T_CHECK(!t_exists(t_tmp("refused.gguf")), "no GGUF after a refusal");
    }

    /* the multimodal layout: text_config, model.language_model.*, a vision tower and an MTP block
     * (skipped with one line each), rope_theta and partial_rotary_factor at the top level */
    static const float junk[4] = {1, 2, 3, 4};
    for (size_t i = 0; i < n; i++)
        if (!strncmp(e[i].name, "model.", 6)) {
            char b[128];
            snprintf(b, sizeof b, "model.language_model.%s", e[i].name + 6);
            snprintf(e[i].name, sizeof e[i].name, "%s", b);
        }
    for (size_t i = 0; i < n; i++)
        if (strstr(e[i].name, "in_proj_bb")) snprintf(e[i].name, sizeof e[i].name,
                                                      "model.language_model.layers.1.linear_attn.in_proj_b.weight");
    e[n] = (t_st_entry){"model.visual.blocks.0.attn.qkv.weight", "F32", 2, {2, 2, 0}, junk, 16};
    e[n + 1] = (t_st_entry){"mtp.fc.weight", "F32", 2, {2, 2, 0}, junk, 16};
    cfg = t_config_with(src, edit_wrapper);
    dir = t_crafted(src, "wrapper", cfg, e, n + 2);
    free(cfg);
    s = lmq_convert_hf(dir, out, &co, NULL);
    T_CHECK(s == LMQ_OK, "Qwen3_5ForConditionalGeneration layout: %s", lmq_last_error());
    if (!s) {
        check_same_container("multimodal layout", out, f32_qwen35);
        lmq_file *a = NULL, *b = NULL;
        if (!lmq_file_open(out, &a) && !lmq_file_open(f32_qwen35, &b))
            t_check_keys("multimodal layout", lmq_file_meta(a), lmq_file_meta(b), "qwen35", k_optional_keys, 17);
        lmq_file_close(a);
        lmq_file_close(b);
    }
    free(e);

    /* experts stored per expert (older checkpoints): the same stacks */
    e = t_entries_of(st_moe, 0, &n);
    size_t cap = n + 64, m = 0;
    t_st_entry *pe = calloc(cap * 3, sizeof *pe);
    for (size_t i = 0; i < n; i++) {
        int layer, used = 0;
        if (sscanf(e[i].name, "model.layers.%d.%n", &layer, &used) == 1 && used &&
            (!strcmp(e[i].name + used, "mlp.experts.gate_up_proj") || !strcmp(e[i].name + used, "mlp.experts.down_proj"))) {
            const bool down = strstr(e[i].name, "down_proj") != NULL;
            const int64_t E = e[i].shape[0], R = e[i].shape[1], C = e[i].shape[2], F = down ? R : R / 2;
            for (int64_t x = 0; x < E; x++)
                for (int part = 0; part < (down ? 1 : 2); part++) {
                    t_st_entry *q = &pe[m++];
                    snprintf(q->name, sizeof q->name, "model.layers.%d.mlp.experts.%lld.%s.weight", layer, (long long)x,
                             down ? "down_proj" : part ? "up_proj" : "gate_proj");
                    q->dtype = e[i].dtype;
                    q->n_dims = 2;
                    q->shape[0] = F;
                    q->shape[1] = C;
                    q->nbytes = (uint64_t)(F * C) * 2;
                    q->data = (const uint8_t *)e[i].data + (size_t)((x * R + part * F) * C) * 2;
                }
            continue;
        }
        pe[m++] = e[i];
    }
    dir = t_crafted(src_moe, "per_expert", NULL, pe, m);
    s = lmq_convert_hf(dir, out, &co, NULL);
    T_CHECK(s == LMQ_OK, "per-expert tensors: %s", lmq_last_error());
    if (!s) check_same_container("per-expert layout", out, f32_moe);
    free(pe);
    free(e);
out:
    remove(out);
    lmq_safetensors_close(st);
    lmq_safetensors_close(st_moe);
}

/* ================================================================ main */

int main(void)
{
    static const struct {
        const char *model, *arch;
    } models[] = {{"qwen35", "qwen35"}, {"qwen35moe", "qwen35moe"}};
    const char *first = t_shared("models/zoo/qwen35/config.json");
    const char *ref0 = t_shared("reference/zoo/qwen35-q8_0.gguf");
    if (!t_exists(first) || !t_exists(ref0)) t_skip("the Qwen3.5 zoo models or their reference GGUFs are absent");
    char f32[2][4096];
    for (size_t i = 0; i < 2; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "models/zoo/%s", models[i].model);
        char dir[4096], ref[4096];
        snprintf(dir, sizeof dir, "%s", t_shared(rel));
        snprintf(rel, sizeof rel, "reference/zoo/%s-q8_0.gguf", models[i].model);
        snprintf(ref, sizeof ref, "%s", t_shared(rel));
        t_require(dir);
        t_require(ref);
        snprintf(f32[i], sizeof f32[i], "%s/%s-f32.lmq", t_tmpdir(), models[i].model);
        geom g;
        T_CHECK(read_geom(dir, &g), "%s: config.json geometry", models[i].model);
        lmq_convert_opts co = {.out_type = LMQ_TYPE_F32, .codec = LMQ_CODEC_NONE, .n_threads = 2};
        lmq_status s = lmq_convert_hf(dir, f32[i], &co, NULL);
        T_CHECK(s == LMQ_OK, "%s: convert: %s", models[i].model, lmq_last_error());
        if (s) continue;
        t_wants w = {0};
        if (build_wants(dir, &g, &w)) {
            check_container(models[i].model, f32[i], &w);
            check_reference(models[i].model, models[i].arch, f32[i], ref, &w);
        }
        t_wants_free(&w);
        check_gguf(models[i].model, models[i].arch, f32[i], ref);
        check_quantize(models[i].model, f32[i], ref);
    }
    check_crafted(f32[0], f32[1]);
    check_synthetic(t_shared("models/zoo/qwen35"));
    return t_finish();
}
