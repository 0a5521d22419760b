/* lmq info: what a .lmq or .gguf file holds — format, hyper-parameters,
 * tokenizer, tensor types and sizes, provenance — and, with --verify, whether
 * every tensor still matches its checksum. */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lmq_format.h"
#include "lmq_runtime.h"

static const char *USAGE = "lmq info FILE.lmq|FILE.gguf [--tensors] [--verify] [--meta] [--json] [-t N]";

static const char *HELP =
    "Shows a model file: format and size, architecture and hyper-parameters,\n"
    "tokenizer (model, vocabulary size, bos/eos tokens), chat template, tensor\n"
    "counts and bytes per type, parameter count, bits per weight, provenance.\n\n"
    "  --tensors        list every tensor: name, type, shape, bytes, checksum\n"
    "  --verify         check every tensor checksum (exit 1 naming the first bad tensor)\n"
    "  --meta           print every metadata key (long arrays abbreviated)\n"
    "  --json           one JSON object on stdout instead of text\n"
    "  -t, --threads N  threads for --verify (default: all cores)\n"
    "  -h, --help       this help\n";

typedef struct info_opts {
    bool tensors, verify, meta, json;
    int n_threads;
} info_opts;

typedef struct verify_result {
    bool ran, ok;
    size_t n_checked, bad;
    uint64_t bytes;
    double seconds;
    char message[512];
} verify_result;

/* ================================================================ strings */

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t len = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3 : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (!len || len > n || (len == 2 && s[0] < 0xc2)) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    return len;
}

/* JSON string of len bytes; invalid UTF-8 becomes U+FFFD, NUL is escaped. */
static void json_strn(FILE *f, const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    fputc('"', f);
    for (size_t i = 0; i < len;) {
        unsigned char c = p[i];
        size_t k = utf8_len(p + i, len - i);
        if (!k) {
            fputs("\\ufffd", f);
            i++;
            continue;
        }
        if (k > 1) {
            fwrite(p + i, 1, k, f);
        } else if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc(c, f);
        } else if (c == '\n') {
            fputs("\\n", f);
        } else if (c == '\t') {
            fputs("\\t", f);
        } else if (c == '\r') {
            fputs("\\r", f);
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(f, "\\u%04x", c);
        } else {
            fputc(c, f);
        }
        i += k;
    }
    fputc('"', f);
}

static void json_str(FILE *f, const char *s)
{
    json_strn(f, s, s ? strlen(s) : 0);
}

/* Quoted for a terminal: control bytes escaped, at most `max` bytes shown. */
static void text_strn(FILE *f, const char *s, size_t len, size_t max)
{
    fputc('"', f);
    size_t n = len < max ? len : max;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20 || c == 0x7f) fprintf(f, "\\x%02x", c);
        else fputc(c, f);
    }
    fputc('"', f);
    if (len > max) fputs("...", f);
}

/* ================================================================ values */

static double elem_num(lmq_vtype t, const void *data, uint64_t i, bool *is_int, int64_t *iv, uint64_t *uv)
{
    const uint8_t *p = (const uint8_t *)data + i * lmq_vtype_size(t);
    *is_int = true;
    switch (t) {
    case LMQ_V_U8: *uv = *p; return (double)(*iv = *p);
    case LMQ_V_I8: { int8_t x; memcpy(&x, p, 1); *uv = (uint64_t)x; return (double)(*iv = x); }
    case LMQ_V_U16: { uint16_t x; memcpy(&x, p, 2); *uv = x; return (double)(*iv = x); }
    case LMQ_V_I16: { int16_t x; memcpy(&x, p, 2); *uv = (uint64_t)x; return (double)(*iv = x); }
    case LMQ_V_U32: { uint32_t x; memcpy(&x, p, 4); *uv = x; return (double)(*iv = x); }
    case LMQ_V_I32: { int32_t x; memcpy(&x, p, 4); *uv = (uint64_t)x; return (double)(*iv = x); }
    case LMQ_V_U64: { uint64_t x; memcpy(&x, p, 8); *uv = x; *iv = (int64_t)x; return (double)x; }
    case LMQ_V_I64: { int64_t x; memcpy(&x, p, 8); *uv = (uint64_t)x; return (double)(*iv = x); }
    case LMQ_V_BOOL: *uv = *p != 0; return (double)(*iv = *p != 0);
    case LMQ_V_F32: { float x; memcpy(&x, p, 4); *is_int = false; return x; }
    case LMQ_V_F64: { double x; memcpy(&x, p, 8); *is_int = false; return x; }
    default: *is_int = false; return 0;
    }
}

static void put_number(FILE *f, lmq_vtype t, double d, int64_t iv, uint64_t uv, bool is_int, bool json)
{
    if (t == LMQ_V_BOOL) fputs(iv ? "true" : "false", f);
    else if (t == LMQ_V_U64 || t == LMQ_V_U32 || t == LMQ_V_U16 || t == LMQ_V_U8) fprintf(f, "%" PRIu64, uv);
    else if (is_int) fprintf(f, "%" PRId64, iv);
    else if (json && !isfinite(d)) fputs("null", f);
    else fprintf(f, t == LMQ_V_F32 ? "%.9g" : "%.17g", d);
}

/* A value as text or JSON; arrays show at most max_elems elements (text
 * adds "... N total"; JSON keeps only the first max_elems). */
static void put_value(FILE *f, const lmq_value *v, bool json, uint64_t max_elems)
{
    bool is_int;
    int64_t iv = 0;
    uint64_t uv = 0;
    switch (v->type) {
    case LMQ_V_STRING:
        if (json) json_strn(f, v->s.ptr, v->s.len);
        else text_strn(f, v->s.ptr, v->s.len, 200);
        return;
    case LMQ_V_ARRAY: {
        uint64_t n = v->arr.n < max_elems ? v->arr.n : max_elems;
        fputc('[', f);
        for (uint64_t i = 0; i < n; i++) {
            if (i) fputs(", ", f);
            if (v->arr.elem == LMQ_V_STRING) {
                const lmq_str *s = (const lmq_str *)v->arr.data + i;
                if (json) json_strn(f, s->ptr, s->len);
                else text_strn(f, s->ptr, s->len, 60);
            } else if (v->arr.elem == LMQ_V_ARRAY) {
                put_value(f, (const lmq_value *)v->arr.data + i, json, max_elems);
            } else {
                double d = elem_num(v->arr.elem, v->arr.data, i, &is_int, &iv, &uv);
                put_number(f, v->arr.elem, d, iv, uv, is_int, json);
            }
        }
        if (!json && v->arr.n > n) fprintf(f, "%s... %" PRIu64 " %s total", n ? ", " : "", v->arr.n, lmq_vtype_name(v->arr.elem));
        fputc(']', f);
        return;
    }
    default: {
        /* scalars: lmq_value keeps integers in u/i and floats in f */
        if (v->type == LMQ_V_F32 || v->type == LMQ_V_F64) put_number(f, v->type, v->f, 0, 0, false, json);
        else if (v->type == LMQ_V_BOOL) fputs(v->b ? "true" : "false", f);
        else if (v->type == LMQ_V_I8 || v->type == LMQ_V_I16 || v->type == LMQ_V_I32 || v->type == LMQ_V_I64)
            fprintf(f, "%" PRId64, v->i);
        else fprintf(f, "%" PRIu64, v->u);
    }
    }
}

/* ================================================================ summary */

typedef struct type_sum {
    size_t count;
    uint64_t bytes, stored;
} type_sum;

typedef struct summary {
    const char *arch;
    type_sum by_type[LMQ_TYPE_COUNT];
    uint64_t params, bytes, stored;
    size_t n_zstd;
    uint64_t n_expert, n_expert_used; /* <arch>.expert_count / expert_used_count (0: dense) */
    uint64_t active_params;           /* per token: the experts' share is n_used / n_expert */
    uint64_t active_bytes;            /* weight bytes read per token (the same share of expert tensors) */
    int64_t n_layer, n_rec;           /* layers run (MTP blocks excluded) and recurrent ones (hybrid families) */
    uint64_t state_bytes;             /* recurrent state per sequence (f32) */
    uint64_t kv_bytes_token;          /* f16 KV cache per token, attention layers that own a cache only */
    int64_t n_kv_shared;              /* layers reading another layer's cache (Gemma 4) */
    int64_t rec_state_floats;         /* per recurrent layer */
} summary;

/* Layer kinds and per-sequence memory from the descriptor and metadata
 * (nothing when the family or its keys are unknown). */
static void summarize_layers(const lmq_file *f, summary *s)
{
    const lmq_arch *a = lmq_arch_by_name(s->arch);
    lmq_arch_dims d;
    if (!a || lmq_arch_dims_from_meta(lmq_file_meta(f), a, lmq_file_path(f), &d)) {
        lmq_error_clear();
        return;
    }
    bool *rec = calloc((size_t)d.n_layer, sizeof *rec);
    if (rec && !lmq_arch_layer_kinds(lmq_file_meta(f), a, d.n_layer, lmq_file_path(f), rec)) {
        s->n_layer = d.n_layer;
        for (int64_t i = 0; i < d.n_layer; i++) s->n_rec += rec[i];
        s->rec_state_floats = lmq_arch_rec_state_floats(&d);
        s->state_bytes = (uint64_t)s->rec_state_floats * (uint64_t)s->n_rec * sizeof(float);
        /* per layer: KV heads and head sizes, no cache on shared-KV layers (Gemma 4) */
        lmq_arch_layer *geo = malloc((size_t)d.n_layer * sizeof *geo);
        if (geo && !lmq_arch_layers(lmq_file_meta(f), a, &d, lmq_file_path(f), geo)) {
            s->kv_bytes_token = lmq_arch_kv_bytes_per_token(&d, geo, rec, 2);
            for (int64_t i = 0; i < d.n_layer; i++) s->n_kv_shared += geo[i].kv_src != i;
        }
        free(geo);
    }
    lmq_error_clear();
    free(rec);
}

static void summarize(const lmq_file *f, summary *s)
{
    memset(s, 0, sizeof *s);
    if (lmq_meta_get_str(lmq_file_meta(f), "general.architecture", &s->arch, NULL)) s->arch = NULL;
    summarize_layers(f, s);
    if (s->arch) {
        char key[160];
        snprintf(key, sizeof key, "%.100s.expert_count", s->arch);
        lmq_meta_get_u64(lmq_file_meta(f), key, &s->n_expert);
        snprintf(key, sizeof key, "%.100s.expert_used_count", s->arch);
        lmq_meta_get_u64(lmq_file_meta(f), key, &s->n_expert_used);
        if (s->n_expert_used > s->n_expert) s->n_expert_used = s->n_expert;
        lmq_error_clear();
    }
    for (size_t i = 0; i < lmq_file_n_tensors(f); i++) {
        const lmq_tensor_info *t = lmq_file_tensor(f, i);
        uint64_t n = 1;
        for (uint32_t d = 0; d < LMQ_MAX_DIMS; d++) n *= (uint64_t)t->ne[d];
        s->params += n;
        const bool exps = s->n_expert > 0 && strstr(t->name, "_exps.") && (uint64_t)t->ne[2] == s->n_expert;
        s->active_params += exps ? n / s->n_expert * s->n_expert_used : n;
        s->active_bytes += exps ? t->nbytes / s->n_expert * s->n_expert_used : t->nbytes;
        s->bytes += t->nbytes;
        s->stored += t->stored_bytes;
        s->n_zstd += t->codec == LMQ_CODEC_ZSTD;
        if ((unsigned)t->type < LMQ_TYPE_COUNT) {
            s->by_type[t->type].count++;
            s->by_type[t->type].bytes += t->nbytes;
            s->by_type[t->type].stored += t->stored_bytes;
        }
    }
}

/* Token text of id `key` (tokenizer.ggml.<key>), or NULL. */
static bool token_of(const lmq_meta *m, const char *key, uint64_t *id, const lmq_str **text)
{
    *text = NULL;
    if (lmq_meta_get_u64(m, key, id)) return false;
    lmq_vtype et;
    uint64_t n;
    const void *data;
    if (!lmq_meta_get_arr(m, "tokenizer.ggml.tokens", &et, &n, &data) && et == LMQ_V_STRING && *id < n)
        *text = (const lmq_str *)data + *id;
    return true;
}

static uint64_t n_tokens(const lmq_meta *m)
{
    lmq_vtype et;
    uint64_t n = 0;
    if (lmq_meta_get_arr(m, "tokenizer.ggml.tokens", &et, &n, NULL)) return 0;
    return n;
}

static const char *tokenizer_kind(const char *model)
{
    if (!strcmp(model, "llama")) return "SentencePiece";
    if (!strcmp(model, "gpt2")) return "byte-level BPE";
    if (!strcmp(model, "gemma4")) return "Gemma BPE";
    if (!strcmp(model, "bert")) return "WordPiece";
    return NULL;
}

static bool is_hparam_key(const char *key, const char *arch)
{
    size_t n = arch ? strlen(arch) : 0;
    return arch && !strncmp(key, arch, n) && key[n] == '.';
}

static const char *kind_name(const lmq_file *f)
{
    return lmq_file_kind_of(f) == LMQ_FILE_LMQ ? "lmq" : "gguf";
}

/* ================================================================ text */

static void text_tokenizer(const lmq_meta *m)
{
    const char *model;
    if (lmq_meta_get_str(m, "tokenizer.ggml.model", &model, NULL)) {
        printf("tokenizer     none\n");
        return;
    }
    const char *kind = tokenizer_kind(model);
    printf("tokenizer     %s%s%s%s, %" PRIu64 " tokens", model, kind ? " (" : "", kind ? kind : "", kind ? ")" : "",
           n_tokens(m));
    const char *pre;
    if (!lmq_meta_get_str(m, "tokenizer.ggml.pre", &pre, NULL)) printf(", pre '%s'", pre);
    static const char *const keys[2][2] = {{"bos", "tokenizer.ggml.bos_token_id"}, {"eos", "tokenizer.ggml.eos_token_id"}};
    for (int i = 0; i < 2; i++) {
        uint64_t id;
        const lmq_str *t;
        if (!token_of(m, keys[i][1], &id, &t)) continue;
        printf(", %s %" PRIu64, keys[i][0], id);
        if (t) {
            putchar(' ');
            text_strn(stdout, t->ptr, t->len, 40);
        }
    }
    bool b;
    if (!lmq_meta_get_bool(m, "tokenizer.ggml.add_bos_token", &b)) printf(", add_bos %s", b ? "yes" : "no");
    putchar('\n');
}

/* The template's family ("chatml", "llama3", ...) or its first line. */
static const char *template_name(const char *tmpl, uint64_t len, char *buf, size_t bufsz)
{
    char *src = malloc((size_t)len + 1);
    if (!src) {
        snprintf(buf, bufsz, "?");
        return buf;
    }
    memcpy(src, tmpl, (size_t)len);
    src[len] = 0;
    lmq_chat_template_name_guess(src, buf, bufsz);
    free(src);
    return buf;
}

static void text_template(const lmq_meta *m)
{
    const char *tmpl;
    uint64_t len;
    if (lmq_meta_get_str(m, "tokenizer.chat_template", &tmpl, &len)) {
        printf("chat template none\n");
        return;
    }
    char name[96];
    printf("chat template %" PRIu64 " bytes, %s\n", len, template_name(tmpl, len, name, sizeof name));
}

static void text_provenance(const lmq_meta *m)
{
    lmq_vtype fe, he;
    uint64_t nf = 0, nh = 0;
    const void *files = NULL, *hashes = NULL;
    bool have_src = !lmq_meta_get_arr(m, "lmq.source.files", &fe, &nf, &files) && fe == LMQ_V_STRING &&
                    !lmq_meta_get_arr(m, "lmq.source.xxh3", &he, &nh, &hashes) && he == LMQ_V_U64 && nf == nh;
    bool header = false;
    for (size_t i = 0; i < lmq_meta_count(m); i++) {
        const char *k = lmq_meta_key(m, i);
        if (strncmp(k, "lmq.", 4) || (have_src && (!strcmp(k, "lmq.source.files") || !strcmp(k, "lmq.source.xxh3"))))
            continue;
        if (!header) printf("lmq keys\n");
        header = true;
        printf("  %-34s ", k);
        put_value(stdout, lmq_meta_value(m, i), false, 8);
        putchar('\n');
    }
    if (!have_src) return;
    printf("sources\n");
    for (uint64_t i = 0; i < nf; i++) {
        uint64_t h;
        memcpy(&h, (const uint8_t *)hashes + i * 8, 8);
        const lmq_str *s = (const lmq_str *)files + i;
        printf("  xxh3 %016" PRIx64 "  %s\n", h, s->ptr);
    }
}

static void shape_str(const lmq_tensor_info *t, char *out, size_t cap)
{
    out[0] = 0;
    for (uint32_t d = 0; d < t->n_dims; d++)
        snprintf(out + strlen(out), cap - strlen(out), "%s%" PRId64, d ? " x " : "", t->ne[d]);
}

/* The family's block features, from its descriptor (formats/arch.c), the
 * tensors present and the metadata: "" for files of no known family. */
static void family_features(const lmq_file *f, const char *arch_name, char *out, size_t cap)
{
    out[0] = 0;
    const lmq_arch *a = lmq_arch_by_name(arch_name);
    if (!a) return;
    const lmq_meta *m = lmq_file_meta(f);
    size_t n = 0;
    char key[128];
#define ADD(...)                                                                      \
    do {                                                                              \
        int k_ = snprintf(out + n, n < cap ? cap - n : 0, "%s", n ? ", " : "");       \
        if (k_ > 0) n += (size_t)k_;                                                  \
        k_ = snprintf(out + n, n < cap ? cap - n : 0, __VA_ARGS__);                   \
        if (k_ > 0) n += (size_t)k_;                                                  \
        if (n >= cap) n = cap - 1;                                                    \
    } while (0)
    ADD("%s", a->act == LMQ_ACT_GELU_TANH ? "GeGLU (tanh)" : "SwiGLU");
    ADD("RoPE %s in GGUF", a->gguf_rope_permuted ? "interleaved" : "rotate-half");
    if (a->norm_plus_one) ADD("(1+w) norms stored as multipliers");
    if (a->embd_scale) ADD("embeddings x sqrt(n_embd)");
    uint64_t ne = 0, nu = 0;
    snprintf(key, sizeof key, "%s.expert_count", a->name);
    lmq_meta_get_u64(m, key, &ne);
    snprintf(key, sizeof key, "%s.expert_used_count", a->name);
    lmq_meta_get_u64(m, key, &nu);
    if (ne) ADD("mixture of %" PRIu64 " experts, top-%" PRIu64, ne, nu);
    if (a->hybrid) ADD("Gated DeltaNet layers beside gated attention (partial RoPE)");
    if (lmq_file_find_tensor(f, "blk.0.attn_qkv.weight") && !a->hybrid) ADD("fused qkv");
    if (lmq_file_find_tensor(f, "blk.0.ffn_up.weight") && !lmq_file_find_tensor(f, "blk.0.ffn_gate.weight"))
        ADD("fused gate|up");
    if (lmq_file_find_tensor(f, "blk.0.attn_q.bias")) ADD("q/k/v biases");
    const lmq_tensor_info *qn = lmq_file_find_tensor(f, "blk.0.attn_q_norm.weight");
    if (qn) ADD("q/k RMSNorm (%" PRId64 " wide)", qn->ne[0]);
    if (lmq_file_find_tensor(f, "blk.0.post_attention_norm.weight") && !a->ffn_norm_post_attn) ADD("sandwich norms");
    if (lmq_file_find_tensor(f, "rope_factors_long.weight")) ADD("LongRoPE");
    if (lmq_file_find_tensor(f, "blk.0.attn_sinks.weight")) ADD("attention sinks");
    if (lmq_file_find_tensor(f, "blk.0.ffn_gate_exps.bias")) ADD("biased experts, clamped SwiGLU");
    const char *rs = NULL;
    snprintf(key, sizeof key, "%s.rope.scaling.type", a->name);
    if (!lmq_meta_get_str(m, key, &rs, NULL) && !strcmp(rs, "yarn")) {
        double fac = 0;
        snprintf(key, sizeof key, "%s.rope.scaling.factor", a->name);
        lmq_meta_get_f64(m, key, &fac);
        ADD("YaRN x%g", fac);
    }
    if (a->nope_interval > 0 || lmq_meta_find(m, "lmq.rope.nope_layers")) ADD("layers without RoPE");
    if (!lmq_file_find_tensor(f, "output.weight")) ADD("tied output");
    double v;
    snprintf(key, sizeof key, "%s.attention.sliding_window", a->name);
    uint64_t win = 0;
    if (!lmq_meta_get_u64(m, key, &win) && win) ADD("sliding window %" PRIu64, win);
    snprintf(key, sizeof key, "%s.attn_logit_softcapping", a->name);
    if (!lmq_meta_get_f64(m, key, &v) && v > 0) ADD("attention soft-cap %g", v);
    snprintf(key, sizeof key, "%s.final_logit_softcapping", a->name);
    if (!lmq_meta_get_f64(m, key, &v) && v > 0) ADD("final soft-cap %g", v);
    lmq_arch_dims d;
    if (a->swa_heads && !lmq_arch_dims_from_meta(m, a, lmq_file_path(f), &d)) { /* Gemma 4 */
        ADD("heads of %" PRId64 " (sliding) / %" PRId64 " (global), proportional RoPE, v norm, attention scale 1",
            d.head_dim_swa, d.head_dim);
        if (d.n_kv_shared) ADD("last %" PRId64 " layers share KV", d.n_kv_shared);
        if (d.n_embd_ple) ADD("per-layer embeddings (%" PRId64 " per layer)", d.n_embd_ple);
        if (lmq_file_find_tensor(f, "blk.0.layer_output_scale.weight")) ADD("layer scalar");
    }
#undef ADD
    lmq_error_clear();
}

static void print_text(const lmq_file *f, const summary *s, const info_opts *o, const verify_result *vr)
{
    const lmq_meta *m = lmq_file_meta(f);
    printf("file          %s\n", lmq_file_path(f));
    printf("format        %s v%u, %.2f MB, %zu metadata keys\n", lmq_file_kind_of(f) == LMQ_FILE_LMQ ? "lmq container" : "GGUF",
           lmq_file_version(f), (double)lmq_file_size(f) / 1e6, lmq_meta_count(m));
    const char *name;
    printf("architecture  %s", s->arch ? s->arch : "(none)");
    if (!lmq_meta_get_str(m, "general.name", &name, NULL)) printf(", name \"%s\"", name);
    putchar('\n');
    char feats[512];
    family_features(f, s->arch, feats, sizeof feats);
    if (feats[0]) printf("family        %s\n", feats);
    bool header = false;
    for (size_t i = 0; i < lmq_meta_count(m); i++) {
        const lmq_value *v = lmq_meta_value(m, i);
        if (!is_hparam_key(lmq_meta_key(m, i), s->arch) || v->type == LMQ_V_ARRAY) continue;
        if (!header) printf("hyper-parameters\n");
        header = true;
        printf("  %-34s ", lmq_meta_key(m, i) + strlen(s->arch) + 1);
        put_value(stdout, v, false, 8);
        putchar('\n');
    }
    text_tokenizer(m);
    text_template(m);
    printf("tensors       %zu", lmq_file_n_tensors(f));
    for (int t = 0; t < LMQ_TYPE_COUNT; t++)
        if (s->by_type[t].count)
            printf("%s %s %zu (%.2f MB)", t ? "," : ":", lmq_type_name((lmq_type)t), s->by_type[t].count,
                   (double)s->by_type[t].bytes / 1e6);
    putchar('\n');
    if (s->n_zstd)
        printf("compression   zstd on %zu tensors: %.2f MB stored for %.2f MB\n", s->n_zstd, (double)s->stored / 1e6,
               (double)s->bytes / 1e6);
    if (s->params)
        printf("parameters    %.3f M (%" PRIu64 "), %.3f bits per weight\n", (double)s->params / 1e6, s->params,
               8.0 * (double)s->bytes / (double)s->params);
    if (s->n_expert)
        printf("experts       %" PRIu64 ", %" PRIu64 " used per token: %.3f M active parameters of %.3f M, %.2f MB of "
               "weights read per token\n", s->n_expert, s->n_expert_used, (double)s->active_params / 1e6,
               (double)s->params / 1e6, (double)s->active_bytes / 1e6);
    if (s->n_rec)
        printf("layers        %" PRId64 ": %" PRId64 " recurrent (Gated DeltaNet), %" PRId64 " attention; state %.3f MB "
               "per sequence (%" PRId64 " x %" PRId64 " f32), KV cache %" PRIu64 " bytes per token (f16)\n",
               s->n_layer, s->n_rec, s->n_layer - s->n_rec, (double)s->state_bytes / 1e6, s->n_rec,
               s->rec_state_floats, s->kv_bytes_token);
    else if (s->n_kv_shared || (s->arch && lmq_arch_by_name(s->arch) && lmq_arch_by_name(s->arch)->swa_heads))
        printf("layers        %" PRId64 ": %" PRId64 " read an earlier layer's KV cache; KV cache %" PRIu64
               " bytes per token (f16)\n", s->n_layer, s->n_kv_shared, s->kv_bytes_token);
    text_provenance(m);
    if (o->meta) {
        printf("metadata\n");
        for (size_t i = 0; i < lmq_meta_count(m); i++) {
            const lmq_value *v = lmq_meta_value(m, i);
            printf("  %-40s %-7s ", lmq_meta_key(m, i),
                   v->type == LMQ_V_ARRAY ? lmq_vtype_name(v->arr.elem) : lmq_vtype_name(v->type));
            put_value(stdout, v, false, 8);
            putchar('\n');
        }
    }
    if (o->tensors) {
        printf("%5s  %-32s %-8s %-18s %12s  %s\n", "#", "name", "type", "shape", "bytes", "checksum");
        for (size_t i = 0; i < lmq_file_n_tensors(f); i++) {
            const lmq_tensor_info *t = lmq_file_tensor(f, i);
            char shape[96];
            shape_str(t, shape, sizeof shape);
            printf("%5zu  %-32s %-8s %-18s %12" PRIu64 "  ", i, t->name, lmq_type_name(t->type), shape, t->nbytes);
            if (t->has_checksum) printf("%016" PRIx64, t->checksum);
            else printf("-");
            if (t->codec == LMQ_CODEC_ZSTD) printf("  zstd %" PRIu64 " bytes stored", t->stored_bytes);
            putchar('\n');
        }
    }
    if (vr->ran) {
        if (lmq_file_kind_of(f) == LMQ_FILE_GGUF) printf("verify        GGUF files carry no checksums: nothing to verify\n");
        else if (vr->ok)
            printf("verify        all %zu checksums OK (%.2f GB in %.3f s, %.2f GB/s)\n", vr->n_checked,
                   (double)vr->bytes / 1e9, vr->seconds, vr->seconds > 0 ? (double)vr->bytes / 1e9 / vr->seconds : 0.0);
        else printf("verify        FAILED: %s\n", vr->message);
    }
}

/* ================================================================ JSON */

static void json_tokenizer(const lmq_meta *m)
{
    const char *model;
    if (lmq_meta_get_str(m, "tokenizer.ggml.model", &model, NULL)) {
        printf("null");
        return;
    }
    printf("{\"model\": ");
    json_str(stdout, model);
    const char *pre;
    if (!lmq_meta_get_str(m, "tokenizer.ggml.pre", &pre, NULL)) {
        printf(", \"pre\": ");
        json_str(stdout, pre);
    }
    printf(", \"n_tokens\": %" PRIu64, n_tokens(m));
    static const char *const keys[2][2] = {{"bos", "tokenizer.ggml.bos_token_id"}, {"eos", "tokenizer.ggml.eos_token_id"}};
    for (int i = 0; i < 2; i++) {
        uint64_t id;
        const lmq_str *t;
        if (!token_of(m, keys[i][1], &id, &t)) continue;
        printf(", \"%s_id\": %" PRIu64 ", \"%s\": ", keys[i][0], id, keys[i][0]);
        if (t) json_strn(stdout, t->ptr, t->len);
        else printf("null");
    }
    bool b;
    if (!lmq_meta_get_bool(m, "tokenizer.ggml.add_bos_token", &b)) printf(", \"add_bos\": %s", b ? "true" : "false");
    printf("}");
}

static void print_json(const lmq_file *f, const summary *s, const info_opts *o, const verify_result *vr)
{
    const lmq_meta *m = lmq_file_meta(f);
    printf("{\"file\": ");
    json_str(stdout, lmq_file_path(f));
    printf(", \"kind\": \"%s\", \"version\": %u, \"size\": %" PRIu64 ", \"architecture\": ", kind_name(f),
           lmq_file_version(f), lmq_file_size(f));
    if (s->arch) json_str(stdout, s->arch);
    else printf("null");
    const char *name;
    printf(", \"name\": ");
    if (!lmq_meta_get_str(m, "general.name", &name, NULL)) json_str(stdout, name);
    else printf("null");
    char feats[512];
    family_features(f, s->arch, feats, sizeof feats);
    printf(", \"family\": ");
    json_str(stdout, feats);
    if (s->n_layer)
        printf(", \"layers\": %" PRId64 ", \"recurrent_layers\": %" PRId64 ", \"state_bytes_per_sequence\": %" PRIu64
               ", \"kv_bytes_per_token_f16\": %" PRIu64, s->n_layer, s->n_rec, s->state_bytes, s->kv_bytes_token);
    printf(", \"hparams\": {");
    bool first = true;
    for (size_t i = 0; i < lmq_meta_count(m); i++) {
        const lmq_value *v = lmq_meta_value(m, i);
        if (!is_hparam_key(lmq_meta_key(m, i), s->arch) || v->type == LMQ_V_ARRAY) continue;
        printf("%s", first ? "" : ", ");
        first = false;
        json_str(stdout, lmq_meta_key(m, i) + strlen(s->arch) + 1);
        printf(": ");
        put_value(stdout, v, true, 0);
    }
    printf("}, \"tokenizer\": ");
    json_tokenizer(m);
    const char *tmpl;
    uint64_t tlen;
    printf(", \"chat_template\": ");
    if (!lmq_meta_get_str(m, "tokenizer.chat_template", &tmpl, &tlen)) {
        const char *nl = memchr(tmpl, '\n', (size_t)tlen);
        char tname[96];
        template_name(tmpl, tlen, tname, sizeof tname);
        printf("{\"bytes\": %" PRIu64 ", \"name\": ", tlen);
        json_strn(stdout, tname, strlen(tname));
        printf(", \"first_line\": ");
        json_strn(stdout, tmpl, nl ? (size_t)(nl - tmpl) : (size_t)tlen);
        printf("}");
    } else {
        printf("null");
    }
    printf(", \"n_tensors\": %zu, \"types\": {", lmq_file_n_tensors(f));
    first = true;
    for (int t = 0; t < LMQ_TYPE_COUNT; t++) {
        if (!s->by_type[t].count) continue;
        printf("%s\"%s\": {\"count\": %zu, \"bytes\": %" PRIu64 ", \"stored_bytes\": %" PRIu64 "}", first ? "" : ", ",
               lmq_type_name((lmq_type)t), s->by_type[t].count, s->by_type[t].bytes, s->by_type[t].stored);
        first = false;
    }
    printf("}, \"n_params\": %" PRIu64 ", \"tensor_bytes\": %" PRIu64 ", \"n_expert\": %" PRIu64
           ", \"n_expert_used\": %" PRIu64 ", \"active_params\": %" PRIu64 ", \"active_bytes\": %" PRIu64
           ", \"bits_per_weight\": ",
           s->params, s->bytes, s->n_expert, s->n_expert_used, s->active_params, s->active_bytes);
    if (s->params) printf("%.6f", 8.0 * (double)s->bytes / (double)s->params);
    else printf("null");
    printf(", \"lmq\": {");
    first = true;
    for (size_t i = 0; i < lmq_meta_count(m); i++) {
        const char *k = lmq_meta_key(m, i);
        if (strncmp(k, "lmq.", 4)) continue;
        printf("%s", first ? "" : ", ");
        first = false;
        json_str(stdout, k);
        printf(": ");
        const lmq_value *v = lmq_meta_value(m, i);
        if (!strcmp(k, "lmq.source.xxh3") && v->type == LMQ_V_ARRAY && v->arr.elem == LMQ_V_U64) {
            printf("["); /* hex strings: JSON numbers lose precision above 2^53 */
            for (uint64_t j = 0; j < v->arr.n; j++) {
                uint64_t h;
                memcpy(&h, (const uint8_t *)v->arr.data + j * 8, 8);
                printf("%s\"%016" PRIx64 "\"", j ? ", " : "", h);
            }
            printf("]");
        } else {
            put_value(stdout, v, true, 1000);
        }
    }
    printf("}");
    if (o->meta) {
        printf(", \"metadata\": {");
        for (size_t i = 0; i < lmq_meta_count(m); i++) {
            printf("%s", i ? ", " : "");
            json_str(stdout, lmq_meta_key(m, i));
            printf(": ");
            put_value(stdout, lmq_meta_value(m, i), true, 16);
        }
        printf("}");
    }
    if (o->tensors) {
        printf(", \"tensors\": [");
        for (size_t i = 0; i < lmq_file_n_tensors(f); i++) {
            const lmq_tensor_info *t = lmq_file_tensor(f, i);
            printf("%s{\"name\": ", i ? ", " : "");
            json_str(stdout, t->name);
            printf(", \"type\": \"%s\", \"shape\": [", lmq_type_name(t->type));
            for (uint32_t d = 0; d < t->n_dims; d++) printf("%s%" PRId64, d ? ", " : "", t->ne[d]);
            printf("], \"bytes\": %" PRIu64 ", \"offset\": %" PRIu64 ", \"stored_bytes\": %" PRIu64
                   ", \"codec\": \"%s\", \"checksum\": ",
                   t->nbytes, t->file_offset, t->stored_bytes, t->codec == LMQ_CODEC_ZSTD ? "zstd" : "none");
            if (t->has_checksum) printf("\"%016" PRIx64 "\"}", t->checksum);
            else printf("null}");
        }
        printf("]");
    }
    if (vr->ran) {
        printf(", \"verify\": {\"ok\": %s, \"n_checked\": %zu, \"bytes\": %" PRIu64 ", \"seconds\": %.6f, \"bad_tensor\": ",
               vr->ok ? "true" : "false", vr->n_checked, vr->bytes, vr->seconds);
        if (vr->ok) printf("null");
        else json_str(stdout, lmq_file_tensor(f, vr->bad) ? lmq_file_tensor(f, vr->bad)->name : "");
        printf("}");
    }
    printf("}\n");
}

/* ================================================================ command */

static void run_verify(const lmq_file *f, int n_threads, verify_result *vr)
{
    vr->ran = true;
    for (size_t i = 0; i < lmq_file_n_tensors(f); i++)
        if (lmq_file_tensor(f, i)->has_checksum) vr->bytes += lmq_file_tensor(f, i)->stored_bytes;
    double t0 = lmq_time_s();
    lmq_status s = lmq_file_verify(f, n_threads, &vr->bad, &vr->n_checked);
    vr->seconds = lmq_time_s() - t0;
    vr->ok = s == LMQ_OK;
    if (!vr->ok) snprintf(vr->message, sizeof vr->message, "%s", lmq_last_error());
}

int lmq_cmd_info(int argc, char **argv)
{
    info_opts o = {0};
    static const struct option opts[] = {{"tensors", no_argument, 0, 600}, {"verify", no_argument, 0, 601},
                                         {"json", no_argument, 0, 602},    {"meta", no_argument, 0, 603},
                                         {"threads", required_argument, 0, 't'}, {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    opterr = 0;
    optind = 1;
    int c;
    int64_t v;
    while ((c = getopt_long(argc, argv, "t:h", opts, NULL)) != -1) {
        switch (c) {
        case 600: o.tensors = true; break;
        case 601: o.verify = true; break;
        case 602: o.json = true; break;
        case 603: o.meta = true; break;
        case 't':
            if (!cli_parse_i64(optarg, 1, LMQ_MAX_THREADS, &v))
                return cli_usage_error("info", USAGE, "-t takes a thread count in [1, %d], not '%s'", LMQ_MAX_THREADS, optarg);
            o.n_threads = (int)v;
            break;
        case 'h': printf("usage: %s\n\n%s", USAGE, HELP); return LMQ_EXIT_OK;
        default: return cli_usage_error("info", USAGE, "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc) return cli_usage_error("info", USAGE, "a model file is required");
    const char *path = argv[optind++];
    if (optind < argc) return cli_usage_error("info", USAGE, "unexpected argument '%s'", argv[optind]);

    lmq_file *f = NULL;
    lmq_status s = lmq_file_open(path, &f);
    if (s) return cli_fail("info", s);
    summary sum;
    summarize(f, &sum);
    verify_result vr;
    memset(&vr, 0, sizeof vr);
    if (o.verify) run_verify(f, o.n_threads, &vr);
    if (o.json) print_json(f, &sum, &o, &vr);
    else print_text(f, &sum, &o, &vr);
    if (vr.ran && !vr.ok) fprintf(stderr, "lmq info: %s\n", vr.message);
    lmq_file_close(f);
    return vr.ran && !vr.ok ? LMQ_EXIT_FAIL : LMQ_EXIT_OK;
}
