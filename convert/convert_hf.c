/* Hugging Face model directory -> .lmq container (every family of
 * formats/arch.c: the descriptor gives the tensor names and shapes).
 *
 * The metadata comes from config.json (hf_config.c) and the tokenizer files
 * (hf_tokenizer.c); the weights from safetensors, one tensor at a time:
 * each is bit-copied from the mapping or converted into one reused buffer,
 * handed to the container writer, and its pages are released, so the peak
 * resident set stays near the largest tensor rather than the model.
 *
 * Rows are kept in Hugging Face order. HF's q_proj/k_proj rows pair RoPE
 * dimension i with i + head_dim/2 ("neox" pairing, rotate_half); llama.cpp's
 * converter permutes them to adjacent pairs for Llama-class families only. lmq records the layout
 * in lmq.rope.layout = "neox" and the runtime rotates accordingly.
 *
 * Qwen3.5's Gated DeltaNet tensors are stored as llama.cpp's converter
 * writes them (docs/MODELS.md): A_log as -exp(A_log), conv1d [C, 1, K] as
 * {K, C}, and the value heads in llama.cpp's tiled order (see vhead_src).
 * Fused experts ([E, 2F, H] gate_up_proj, [E, H, F] down_proj) are split
 * into the per-kind stacks.
 *
 * gpt-oss (docs/MODELS.md): descriptor entries that share one Hugging Face
 * name split that tensor between them, interleaved (gate_up_proj: gate rows
 * even, up rows odd; its bias likewise). Its experts come as MXFP4
 * (`<name>_blocks` + `<name>_scales`, U8), copied into lmq's MXFP4 type
 * with the nibbles moved to ggml's order and never dequantized, whatever
 * the output type; or as floats stored [E, in, out], transposed. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "lmq_convert.h"

/* ================================================================ names */

#define MAX_LAYER 99999

/* Multimodal checkpoints keep the language model under a prefix
 * (Gemma 3: "language_model.model.*" or, in newer transformers,
 * "model.language_model.*"); the name is rewritten to the text model's. */
static const char *strip_lm_prefix(const char *hf, char *buf, size_t cap)
{
    static const char p1[] = "language_model.", p2[] = "model.language_model.";
    if (!strncmp(hf, p1, sizeof p1 - 1)) return hf + sizeof p1 - 1;
    if (!strncmp(hf, p2, sizeof p2 - 1)) {
        snprintf(buf, cap, "model.%s", hf + sizeof p2 - 1);
        return buf;
    }
    return hf;
}

static bool starts_with(const char *s, const char *prefix)
{
    return !strncmp(s, prefix, strlen(prefix));
}

/* Non-text parts of multimodal checkpoints, skipped with one line. */
static bool is_vision(const char *hf)
{
    static const char *const pre[] = {"vision_tower.", "multi_modal_projector.", "model.vision_tower.",
                                      "model.multi_modal_projector.", "visual.", "model.visual.",
                                      "model.embed_vision.", "embed_vision."};
    for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++)
        if (starts_with(hf, pre[i])) return true;
    return false;
}

/* The audio tower of multimodal checkpoints (Gemma 4), skipped with one line. */
static bool is_audio(const char *hf)
{
    static const char *const pre[] = {"audio_tower.", "model.audio_tower.", "embed_audio.", "model.embed_audio."};
    for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++)
        if (starts_with(hf, pre[i])) return true;
    return false;
}

/* Multi-token-prediction blocks (Qwen3.5 "mtp.*"): not part of the main
 * model lmq runs; skipped with one line. */
static bool is_mtp(const char *hf)
{
    return starts_with(hf, "mtp.") || starts_with(hf, "model.mtp.");
}

/* Matches `name` against a descriptor pattern whose '*' stands for an
 * expert index (decimal, no leading zeros); *expert gets it (-1 without). */
static bool match_hf(const char *pat, const char *name, long *expert)
{
    *expert = -1;
    const char *star = strchr(pat, '*');
    if (!star) return !strcmp(pat, name);
    size_t pre = (size_t)(star - pat);
    if (strncmp(pat, name, pre)) return false;
    const char *p = name + pre;
    long e = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        if (digits == 5) return false;
        e = e * 10 + (*p - '0');
    }
    if (!digits || (digits > 1 && p[-digits] == '0') || strcmp(p, star + 1)) return false;
    *expert = e;
    return true;
}

/* Splits "model.layers.N.rest" into N and rest (*layer -1 and the whole
 * name for global tensors); NULL for a malformed layer number. */
static const char *split_layer(const char *hf, long *layer)
{
    static const char pre[] = "model.layers.";
    *layer = -1;
    if (strncmp(hf, pre, sizeof pre - 1)) return hf;
    const char *p = hf + sizeof pre - 1;
    int digits = 0;
    long n = 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        if (digits == 5) return NULL;
        n = n * 10 + (*p - '0');
    }
    if (!digits || *p != '.' || (digits > 1 && p[-digits] == '0') || n > MAX_LAYER) return NULL;
    *layer = n;
    return p + 1;
}

/* Maps an HF name to the descriptor entry, layer and expert; false when unused. */
static bool hf_lookup(const lmq_arch *a, const char *hf_in, const lmq_arch_tensor **entry, long *layer, long *expert)
{
    char buf[512];
    if (strlen(hf_in) >= sizeof buf - 8) return false;
    const char *hf = strip_lm_prefix(hf_in, buf, sizeof buf);
    long n;
    const char *rest = split_layer(hf, &n);
    if (!rest) return false;
    for (size_t i = 0; i < a->n_tensors; i++) {
        const lmq_arch_tensor *t = &a->tensors[i];
        if (!t->hf || lmq_tensor_kind_per_layer(t->kind) != (n >= 0)) continue;
        if (match_hf(t->hf, rest, expert)) {
            *entry = t;
            *layer = n;
            return true;
        }
    }
    return false;
}

/* Fused experts (Qwen3.5-MoE, transformers >= 5): per layer one
 * "<experts>gate_up_proj" [E, 2F, H] (rows [0, F) gate, [F, 2F) up) and one
 * "<experts>down_proj" [E, H, F], <experts> the prefix of the family's
 * per-expert names ("mlp.experts."), with or without ".weight". *down is
 * false for gate_up. */
static bool fused_lookup(const lmq_arch *a, const char *hf_in, long *layer, bool *down)
{
    const lmq_arch_tensor *g = lmq_arch_tensor_of(a, LMQ_TK_FFN_GATE_EXPS);
    const char *star = g && g->hf ? strchr(g->hf, '*') : NULL;
    char buf[512];
    if (!star || strlen(hf_in) >= sizeof buf - 8) return false;
    const char *rest = split_layer(strip_lm_prefix(hf_in, buf, sizeof buf), layer);
    size_t pre = (size_t)(star - g->hf);
    if (!rest || *layer < 0 || strncmp(rest, g->hf, pre)) return false;
    rest += pre;
    static const char *const names[] = {"gate_up_proj", "gate_up_proj.weight", "down_proj", "down_proj.weight"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(rest, names[i])) {
            *down = i >= 2;
            return true;
        }
    return false;
}

bool lmq_hf_is_fused_experts(const lmq_arch *a, const char *hf)
{
    long il;
    bool down;
    return a && hf && fused_lookup(a, hf, &il, &down);
}

bool lmq_hf_tensor_name_arch(const lmq_arch *a, const char *hf, char *out, size_t cap)
{
    if (!a || !hf || !out || !cap) return false;
    const lmq_arch_tensor *t;
    long il, e;
    if (!hf_lookup(a, hf, &t, &il, &e)) return false;
    return lmq_tensor_gguf_name(t->kind, (int)il, out, cap);
}

bool lmq_hf_tensor_name(const char *hf, char *out, size_t cap)
{
    return lmq_hf_tensor_name_arch(lmq_arch_get(LMQ_ARCH_LLAMA), hf, out, cap);
}

/* Tensors lmq knows it does not need: no warning. */
static bool ignorable(const char *hf)
{
    size_t n = strlen(hf);
    static const char sfx[] = "rotary_emb.inv_freq";
    return n >= sizeof sfx - 1 && !strcmp(hf + n - (sizeof sfx - 1), sfx);
}

/* ================================================================ plan */

/* Value-head reordering of a tensor (vhead_src): none, its rows, or its columns. */
typedef enum { REORDER_NONE, REORDER_ROWS, REORDER_COLS } reorder_axis;

typedef struct plan_item {
    char name[48];    /* GGUF-style name */
    char hf[96];      /* Hugging Face name */
    int64_t ne0, ne1; /* expected shape; ne1 == 0 for 1-D */
    const lmq_arch_tensor *desc;
    const lmq_st_tensor *src;
    int64_t ne2;                /* experts stacked (3-D), else 1 */
    const lmq_st_tensor **srcs; /* [ne2] one source per expert, for stacked tensors */
    int64_t fused_rows;         /* > 0: src is [ne2, fused_rows, ne0], all experts fused */
    int64_t fused_row0;         /* this tensor's first row in each expert's block */
    const float *gen; /* generated from config.json (LongRoPE factors), ne0 floats */
    reorder_axis reorder;
    int64_t ro_off, ro_hd;      /* value heads start at row ro_off; ro_hd rows (columns) each */
    int64_t split_k, split_m;   /* entry k of the m sharing one HF name: rows (of a vector or a stack of
                                 * vectors, elements) k, k + m, ... of the source; m = 1: the whole */
    bool mx;                    /* the source is MXFP4: src the `_blocks`, scales the `_scales` */
    const lmq_st_tensor *scales;
    bool in_out;                /* stacked experts in one tensor [E, in, out] (gpt-oss's float form) */
    lmq_type out;
    uint64_t out_bytes;
} plan_item;

typedef struct hparams {
    const lmq_arch *arch;
    lmq_arch_dims d;
    bool tied;
    const float *rope_long, *rope_short; /* in the metadata (lmq.rope.factors_*) */
    const float *rope_freqs;             /* lmq.rope.freq_factors (Gemma 4's proportional RoPE), or NULL */
    bool *rec;                           /* [n_layer] recurrent layers (hybrid families), else NULL */
    lmq_arch_layer *geo;                 /* [n_layer] per-layer shapes and KV sources */
} hparams;

/* ================================================================ value heads
 *
 * Hugging Face's Gated DeltaNet stores value heads grouped by key head:
 * value head j reads key head j / r (r = nv / nk). llama.cpp's converter
 * permutes every value-head dimension to the tiled order, in which value
 * head n reads key head n % nk, so that ggml broadcasts the key heads
 * (conversion/qwen.py, _LinearAttentionVReorderBase); lmq stores that order
 * so that a GGUF export needs no permutation. Output head n is source head
 * (n % nk) * r + n / nk. Only when nk != nv. */

static int64_t vhead_src(int64_t n, int64_t nk, int64_t nv)
{
    return (n % nk) * (nv / nk) + n / nk;
}

/* The tensors with a value-head dimension: which axis, and whether the
 * heads follow the q and k channels (2 nk dk rows) and are dv wide or 1. */
static const struct {
    lmq_tensor_kind kind;
    reorder_axis axis;
    bool after_qk, per_dv;
} k_vheads[] = {
    {LMQ_TK_ATTN_QKV, REORDER_ROWS, true, true}, {LMQ_TK_SSM_CONV1D, REORDER_ROWS, true, true},
    {LMQ_TK_ATTN_GATE, REORDER_ROWS, false, true}, {LMQ_TK_SSM_BETA, REORDER_ROWS, false, false},
    {LMQ_TK_SSM_ALPHA, REORDER_ROWS, false, false}, {LMQ_TK_SSM_DT, REORDER_ROWS, false, false},
    {LMQ_TK_SSM_A, REORDER_ROWS, false, false},     {LMQ_TK_SSM_OUT, REORDER_COLS, false, true},
};

static void plan_reorder(plan_item *it, const hparams *hp)
{
    const lmq_arch_dims *d = &hp->d;
    if (!hp->arch->hybrid || !(it->desc->flags & LMQ_AT_REC) || d->ssm_nk == d->ssm_nv) return;
    for (size_t i = 0; i < sizeof k_vheads / sizeof k_vheads[0]; i++)
        if (k_vheads[i].kind == it->desc->kind) {
            it->reorder = k_vheads[i].axis;
            it->ro_off = k_vheads[i].after_qk ? 2 * d->ssm_nk * d->ssm_dk : 0;
            it->ro_hd = k_vheads[i].per_dv ? d->ssm_dv : 1;
        }
}

/* Source row of output row r (1-D tensors: of element r). */
static int64_t reorder_row(const plan_item *it, const lmq_arch_dims *d, int64_t r)
{
    if (it->reorder != REORDER_ROWS || r < it->ro_off) return r;
    int64_t j = r - it->ro_off;
    return it->ro_off + vhead_src(j / it->ro_hd, d->ssm_nk, d->ssm_nv) * it->ro_hd + j % it->ro_hd;
}

static lmq_status read_hparams(const lmq_meta *m, const char *dir, hparams *hp)
{
    memset(hp, 0, sizeof *hp);
    const char *an;
    if (lmq_meta_get_str(m, "general.architecture", &an, NULL) || !(hp->arch = lmq_arch_by_name(an)))
        return lmq_error(LMQ_ERR_FORMAT, "%s: config gave no known architecture", dir);
    lmq_status s = lmq_arch_dims_from_meta(m, hp->arch, dir, &hp->d);
    if (s) return s;
    if (hp->d.n_vocab <= 0) return lmq_error(LMQ_ERR_FORMAT, "%s: config gave no vocab_size", dir);
    hp->tied = false;
    lmq_meta_get_bool(m, "lmq.tie_word_embeddings", &hp->tied);
    lmq_vtype et;
    uint64_t n;
    const void *data;
    if (!lmq_meta_get_arr(m, "lmq.rope.factors_long", &et, &n, &data) && et == LMQ_V_F32 &&
        n == (uint64_t)hp->d.n_rot / 2)
        hp->rope_long = data;
    if (!lmq_meta_get_arr(m, "lmq.rope.factors_short", &et, &n, &data) && et == LMQ_V_F32 &&
        n == (uint64_t)hp->d.n_rot / 2)
        hp->rope_short = data;
    if (!lmq_meta_get_arr(m, "lmq.rope.freq_factors", &et, &n, &data) && et == LMQ_V_F32 &&
        n == (uint64_t)hp->d.n_rot / 2)
        hp->rope_freqs = data;
    lmq_error_clear();
    if (!(hp->geo = malloc((size_t)hp->d.n_layer * sizeof *hp->geo)))
        return lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", dir);
    if ((s = lmq_arch_layers(m, hp->arch, &hp->d, dir, hp->geo))) return s;
    if (!hp->arch->hybrid) return LMQ_OK;
    if (!(hp->rec = malloc((size_t)hp->d.n_layer * sizeof *hp->rec)))
        return lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", dir);
    return lmq_arch_layer_kinds(m, hp->arch, hp->d.n_layer, dir, hp->rec);
}

/* A layer that reads another's KV cache has no keys or values of its own. */
static bool shared_kv_tensor(const hparams *hp, const lmq_arch_tensor *t, long il)
{
    return hp->geo && il >= 0 && il < hp->d.n_layer && hp->geo[il].kv_src != il &&
           (t->kind == LMQ_TK_ATTN_K || t->kind == LMQ_TK_ATTN_V || t->kind == LMQ_TK_ATTN_K_NORM);
}

/* False for a tensor the layer's kind does not have (hybrid families, shared KV). */
static bool layer_has(const hparams *hp, const lmq_arch_tensor *t, long il)
{
    if (shared_kv_tensor(hp, t, il)) return false;
    if (!hp->rec || il < 0 || il >= hp->d.n_layer) return true;
    if (t->flags & LMQ_AT_ATTN) return !hp->rec[il];
    if (t->flags & LMQ_AT_REC) return hp->rec[il];
    return true;
}

/* Entries sharing one Hugging Face name split that tensor between them: entry
 * k of m (in descriptor order) takes the source's rows k, k + m, k + 2m, ...
 * (gpt-oss's gate_up_proj: gate = even rows, up = odd). A stacked tensor
 * splits its rows; a vector, or a stack of one vector per expert, its
 * elements. */
static void plan_split(plan_item *it, const lmq_arch *a)
{
    it->split_m = 0;
    for (size_t i = 0; i < a->n_tensors; i++) {
        const lmq_arch_tensor *t = &a->tensors[i];
        if (t != it->desc && (!t->hf || !it->desc->hf || strcmp(t->hf, it->desc->hf))) continue;
        if (t == it->desc) it->split_k = it->split_m;
        it->split_m++;
    }
}

static bool is_stacked(const plan_item *it)
{
    return it->desc->ne2 != LMQ_DIM_1;
}

static bool is_bias(const plan_item *it)
{
    size_t n = strlen(it->name);
    return n >= 5 && !strcmp(it->name + n - 5, ".bias");
}

static void plan_add(plan_item *it, const lmq_arch_tensor *t, long il, const hparams *hp)
{
    memset(it, 0, sizeof *it);
    lmq_tensor_gguf_name(t->kind, (int)il, it->name, sizeof it->name);
    if (t->hf && il >= 0) snprintf(it->hf, sizeof it->hf, "model.layers.%ld.%s", il, t->hf);
    else snprintf(it->hf, sizeof it->hf, "%s", t->hf ? t->hf : it->name);
    it->desc = t;
    lmq_arch_dims ld = hp->d; /* this layer's shapes */
    if (il >= 0 && hp->geo) lmq_arch_dims_for_layer(&hp->d, &hp->geo[il], &ld);
    it->ne0 = lmq_arch_dim(&ld, t->ne0);
    it->ne1 = t->ne1 == LMQ_DIM_1 ? 0 : lmq_arch_dim(&ld, t->ne1);
    it->ne2 = lmq_arch_dim(&ld, t->ne2);
    if (t->kind == LMQ_TK_ROPE_FREQS) it->gen = hp->rope_freqs;
    if (t->kind == LMQ_TK_ROPE_FACTORS_LONG) it->gen = hp->rope_long;
    if (t->kind == LMQ_TK_ROPE_FACTORS_SHORT) it->gen = hp->rope_short;
    plan_reorder(it, hp);
    plan_split(it, hp->arch);
}

/* Every tensor the descriptor lists, in container order: global tensors
 * (except the output ones), layers 0..N-1 (of a hybrid family, only the
 * tensors of the layer's kind), output_norm and output. Optional entries
 * are dropped later when the checkpoint has no such tensor. */
static plan_item *plan_build(const hparams *hp, size_t *n_out)
{
    const lmq_arch *a = hp->arch;
    size_t n = a->n_tensors * (size_t)(hp->d.n_layer + 1);
    plan_item *p = calloc(n, sizeof *p);
    if (!p) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < a->n_tensors; i++) {
        const lmq_arch_tensor *t = &a->tensors[i];
        if (!lmq_tensor_kind_per_layer(t->kind) && t->kind != LMQ_TK_OUTPUT_NORM && t->kind != LMQ_TK_OUTPUT)
            plan_add(&p[k++], t, -1, hp);
    }
    for (long l = 0; l < hp->d.n_layer; l++)
        for (size_t i = 0; i < a->n_tensors; i++)
            if (lmq_tensor_kind_per_layer(a->tensors[i].kind) && layer_has(hp, &a->tensors[i], l))
                plan_add(&p[k++], &a->tensors[i], l, hp);
    for (size_t i = 0; i < a->n_tensors; i++) {
        const lmq_arch_tensor *t = &a->tensors[i];
        if (t->kind == LMQ_TK_OUTPUT_NORM || (t->kind == LMQ_TK_OUTPUT && !hp->tied)) plan_add(&p[k++], t, -1, hp);
    }
    *n_out = k;
    return p;
}

static plan_item *plan_find(plan_item *p, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(p[i].name, name)) return &p[i];
    return NULL;
}

static void shape_str(const lmq_st_tensor *t, char *out, size_t cap)
{
    out[0] = 0;
    for (uint32_t d = 0; d < t->n_dims; d++)
        snprintf(out + strlen(out), cap - strlen(out), "%s%lld", d ? ", " : "", (long long)t->shape[d]);
}

/* Binds a fused experts tensor to the stacks it holds (gate_up: gate and
 * up; down: down). */
static lmq_status bind_fused(plan_item *p, size_t n, const lmq_st_tensor *t, long il, bool down, const char *file,
                             const hparams *hp)
{
    const lmq_tensor_kind kinds[2] = {down ? LMQ_TK_FFN_DOWN_EXPS : LMQ_TK_FFN_GATE_EXPS, LMQ_TK_FFN_UP_EXPS};
    const int parts = down ? 1 : 2;
    plan_item *its[2] = {NULL, NULL};
    for (int k = 0; k < parts; k++) {
        char g[128];
        lmq_tensor_gguf_name(kinds[k], (int)il, g, sizeof g);
        if (!(its[k] = plan_find(p, n, g)))
            return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s' does not fit config.json (%lld layers)", file, t->name,
                             (long long)hp->d.n_layer);
    }
    const plan_item *a = its[0];
    const int64_t rows = parts * a->ne1;
    if (!t->supported)
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s, which lmq cannot convert (F32, F16 and "
                         "BF16 can be)", file, t->name, t->dtype);
    if (t->n_dims != 3 || t->shape[0] != a->ne2 || t->shape[1] != rows || t->shape[2] != a->ne0) {
        char got[96];
        shape_str(t, got, sizeof got);
        return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s' has shape [%s] but config.json implies [%lld, %lld, %lld]",
                         file, t->name, got, (long long)a->ne2, (long long)rows, (long long)a->ne0);
    }
    for (int k = 0; k < parts; k++) {
        if (its[k]->src)
            return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s' appears twice (as '%s' and '%s')", file, its[k]->name,
                             its[k]->src->name, t->name);
        its[k]->src = t;
        its[k]->fused_rows = rows;
        its[k]->fused_row0 = k * a->ne1;
    }
    return LMQ_OK;
}

/* MXFP4 parts of a stacked tensor: "<name>_blocks" and "<name>_scales". */
enum { MX_NONE, MX_BLOCKS, MX_SCALES };

static int mx_part(const char *hf, char *base, size_t cap)
{
    static const char *const sfx[] = {"_blocks", "_scales"};
    size_t n = strlen(hf);
    for (int i = 0; i < 2; i++) {
        size_t k = strlen(sfx[i]);
        if (n > k && n - k < cap && !strcmp(hf + n - k, sfx[i])) {
            memcpy(base, hf, n - k);
            base[n - k] = 0;
            return i ? MX_SCALES : MX_BLOCKS;
        }
    }
    return MX_NONE;
}

/* Binds a source tensor (or one MXFP4 part of it) to every entry sharing its
 * Hugging Face name (one, or the parts of a split). */
static lmq_status bind_group(plan_item *p, size_t n, const lmq_arch *a, const lmq_arch_tensor *de, long il,
                             const lmq_st_tensor *t, int mx, const char *file)
{
    for (size_t i = 0; i < a->n_tensors; i++) {
        const lmq_arch_tensor *d = &a->tensors[i];
        if (d != de && (!d->hf || strcmp(d->hf, de->hf))) continue;
        char g[128];
        plan_item *it = lmq_tensor_gguf_name(d->kind, (int)il, g, sizeof g) ? plan_find(p, n, g) : NULL;
        if (!it) continue;
        const lmq_st_tensor **slot = mx == MX_SCALES ? &it->scales : &it->src;
        const lmq_st_tensor *other = *slot ? *slot : mx == MX_NONE ? it->scales : it->mx ? NULL : it->src;
        if (other)
            return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s' appears twice (as '%s' and '%s')", file, it->name,
                             other->name, t->name);
        *slot = t;
        it->mx = mx != MX_NONE;
    }
    return LMQ_OK;
}

/* A stacked tensor bound to one source that is neither per expert nor fused
 * Qwen-style: MXFP4 blocks [E, R, C/32, 16] and scales [E, R, C/32] (U8), or
 * floats [E, C, R] (gpt-oss's x @ W layout, transposed when written); R
 * counts the rows of every entry sharing the source. */
static lmq_status check_stacked(plan_item *it, const char *file)
{
    const lmq_st_tensor *t = it->src, *sc = it->scales;
    const int64_t E = it->ne2, R = it->ne1 * it->split_m, C = it->ne0;
    char got[96];
    if (it->mx) {
        for (int i = 0; i < 2; i++) {
            const lmq_st_tensor *x = i ? sc : t;
            if (strcmp(x->dtype, "U8"))
                return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s (MXFP4 blocks and scales are U8)",
                                 file, x->name, x->dtype);
        }
        if (C % 32)
            return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': rows of %lld are not a whole number of MXFP4 blocks "
                             "of 32", file, t->name, (long long)C);
        const bool ok_b = t->n_dims == 4 && t->shape[0] == E && t->shape[1] == R && t->shape[2] == C / 32 &&
                          t->shape[3] == 16;
        const bool ok_s = sc->n_dims == 3 && sc->shape[0] == E && sc->shape[1] == R && sc->shape[2] == C / 32;
        if (!ok_b || !ok_s) {
            const lmq_st_tensor *x = ok_b ? sc : t;
            shape_str(x, got, sizeof got);
            return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s' has shape [%s] but config.json implies [%lld, %lld, "
                             "%lld%s]", file, x->name, got, (long long)E, (long long)R, (long long)(C / 32),
                             ok_b ? "" : ", 16");
        }
        return LMQ_OK;
    }
    if (!t->supported)
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s, which lmq cannot convert (F32, F16 and "
                         "BF16 can be, and MXFP4 as _blocks and _scales)", file, t->name, t->dtype);
    if (t->n_dims != 3 || t->shape[0] != E || t->shape[1] != C || t->shape[2] != R) {
        shape_str(t, got, sizeof got);
        return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s' has shape [%s] but config.json implies [%lld, %lld, %lld] "
                         "(experts, input, output)", file, t->name, got, (long long)E, (long long)C, (long long)R);
    }
    it->in_out = true;
    return LMQ_OK;
}

/* Assigns every source tensor to its plan slot; warns about the ones lmq
 * does not use; checks dtypes and shapes; drops absent optional entries. */
static lmq_status plan_bind(plan_item *p, size_t *n_io, const lmq_safetensors *st, const hparams *hp, lmq_type want,
                            const char *dir)
{
    size_t n = *n_io, n_vision = 0, n_audio = 0, n_mtp = 0, n_shared = 0;
    char g[128];
    lmq_status s;
    for (size_t i = 0; i < lmq_safetensors_count(st); i++) {
        const lmq_st_tensor *t = lmq_safetensors_tensor(st, i);
        const char *file = lmq_safetensors_shard_path(st, t->shard);
        const lmq_arch_tensor *de;
        long dl, ex;
        bool down;
        if (fused_lookup(hp->arch, t->name, &dl, &down)) {
            if ((s = bind_fused(p, n, t, dl, down, file, hp))) return s;
            continue;
        }
        char base[512];
        const int mx = mx_part(t->name, base, sizeof base);
        if (!hf_lookup(hp->arch, mx ? base : t->name, &de, &dl, &ex) ||
            !lmq_tensor_gguf_name(de->kind, (int)dl, g, sizeof g)) {
            if (is_vision(t->name)) n_vision++;
            else if (is_audio(t->name)) n_audio++;
            else if (is_mtp(t->name)) n_mtp++;
            else if (!ignorable(t->name))
                lmq_log(LMQ_LOG_WARN, "convert: %s: skipping tensor '%s' (not part of the %s graph)", file,
                        t->name, hp->arch->name);
            continue;
        }
        plan_item *it = plan_find(p, n, g);
        if (mx && (ex >= 0 || de->ne2 == LMQ_DIM_1))
            return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: tensor '%s': MXFP4 blocks and scales are supported for the "
                             "stacked experts only", file, t->name);
        if (it && ex >= 0) { /* one expert of a stacked tensor */
            if (it->fused_rows)
                return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s' appears twice (as '%s' and '%s')", file, it->name,
                                 it->src->name, t->name);
            if (ex >= it->ne2)
                return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': expert %ld, but config.json has %lld experts", file,
                                 t->name, ex, (long long)it->ne2);
            if (!it->srcs && !(it->srcs = calloc((size_t)it->ne2, sizeof *it->srcs)))
                return lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", dir);
            if (it->srcs[ex])
                return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s' appears twice", file, t->name);
            it->srcs[ex] = t;
            if (!it->src) it->src = t;
            continue;
        }
        if (!it && !strcmp(g, "output.weight") && hp->tied) {
            lmq_log(LMQ_LOG_WARN, "convert: %s: skipping '%s' (tie_word_embeddings is true)", file, t->name);
            continue;
        }
        if (!it && shared_kv_tensor(hp, de, dl)) { /* Hugging Face ignores them too */
            n_shared++;
            continue;
        }
        if (!it && !layer_has(hp, de, dl))
            return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s' is in layer %ld, a %s layer by config.json, which has no "
                             "such tensor", file, t->name, dl, hp->rec[dl] ? "linear_attention" : "full_attention");
        if (!it)
            return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s' does not fit config.json (%lld layers)", file, t->name,
                             (long long)hp->d.n_layer);
        if ((s = bind_group(p, n, hp->arch, de, dl, t, mx, file))) return s;
    }
    if (n_vision)
        lmq_log(LMQ_LOG_INFO, "convert: %s: skipping the vision tower and projector (%zu tensors; lmq converts the "
                              "text model)", dir, n_vision);
    if (n_audio)
        lmq_log(LMQ_LOG_INFO, "convert: %s: skipping the audio tower (%zu tensors; lmq converts the text model)", dir,
                n_audio);
    if (n_shared)
        lmq_log(LMQ_LOG_INFO, "convert: %s: skipping %zu k/v tensors of the shared-KV layers (they read an earlier "
                              "layer's cache)", dir, n_shared);
    if (n_mtp)
        lmq_log(LMQ_LOG_INFO, "convert: %s: skipping the multi-token-prediction block (%zu mtp.* tensors; lmq converts "
                              "the main model)", dir, n_mtp);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        plan_item *it = &p[i];
        const lmq_st_tensor *t = it->src;
        if (it->mx && (!it->src || !it->scales))
            return lmq_error(LMQ_ERR_NOT_FOUND, "%s: tensor '%s_%s' is missing from the safetensors files (MXFP4 "
                             "experts need both _blocks and _scales)", dir, it->hf, it->src ? "scales" : "blocks");
        if (!t && !it->gen) {
            if (it->desc->flags & LMQ_AT_OPTIONAL) continue;
            return lmq_error(LMQ_ERR_NOT_FOUND, "%s: tensor '%s' is missing from the safetensors files", dir, it->hf);
        }
        for (int64_t e = 0; it->srcs && e < it->ne2; e++) {
            const lmq_st_tensor *x = it->srcs[e];
            if (!x)
                return lmq_error(LMQ_ERR_NOT_FOUND, "%s: expert %lld of '%s' is missing from the safetensors files",
                                 dir, (long long)e, it->name);
            if (!x->supported || x->type != it->srcs[0]->type)
                return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s (every expert must be F32, F16 or "
                                 "BF16, and all alike)", dir, x->name, x->dtype);
            if (x->n_dims != 2 || x->shape[0] != it->ne1 || x->shape[1] != it->ne0)
                return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s' is not [%lld, %lld] as config.json implies", dir,
                                 x->name, (long long)it->ne1, (long long)it->ne0);
        }
        if (t && is_stacked(it) && !it->srcs && !it->fused_rows) {
            if ((s = check_stacked(it, lmq_safetensors_shard_path(st, t->shard)))) return s;
        } else if (t && !it->srcs && !it->fused_rows) { /* fused experts were checked when bound */
            const char *file = lmq_safetensors_shard_path(st, t->shard);
            const int64_t m0 = it->split_m; /* a split vector: m times as long */
            if (!t->supported)
                return lmq_error(LMQ_ERR_UNSUPPORTED,
                                 "%s: tensor '%s' has dtype %s, which lmq cannot convert (F32, F16 and BF16 can be)",
                                 file, t->name, t->dtype);
            /* a vector may be stored as a [1, n] matrix (Qwen2-MoE's shared_expert_gate), a
             * depthwise conv1d weight [C, 1, K] is the same bytes as [C, K] */
            bool ok = it->ne1 ? (t->n_dims == 2 && t->shape[0] == it->ne1 && t->shape[1] == it->ne0 * m0) ||
                                    (t->n_dims == 3 && t->shape[0] == it->ne1 && t->shape[1] == 1 &&
                                     t->shape[2] == it->ne0 && it->desc->kind == LMQ_TK_SSM_CONV1D)
                              : (t->n_dims == 1 && t->shape[0] == it->ne0 * m0) ||
                                    (t->n_dims == 2 && t->shape[0] == 1 && t->shape[1] == it->ne0 * m0);
            if (!ok) {
                char got[96], exp[48];
                shape_str(t, got, sizeof got);
                if (it->ne1) snprintf(exp, sizeof exp, "%lld, %lld", (long long)it->ne1, (long long)(it->ne0 * m0));
                else snprintf(exp, sizeof exp, "%lld", (long long)(it->ne0 * m0));
                return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s' has shape [%s] but config.json implies [%s]", file,
                                 t->name, got, exp);
            }
        }
        /* vectors, biases and split vector stacks (gpt-oss's per-expert biases) in f32, and the conv1d
         * kernel: ggml's ssm_conv computes in f32 only (llama.cpp's converter keeps it f32); MXFP4
         * experts stay MXFP4 whatever the output type (as llama.cpp's converter keeps them) */
        const bool f32 = !it->ne1 || is_bias(it) || (it->split_m > 1 && !is_stacked(it)) ||
                         it->desc->kind == LMQ_TK_SSM_CONV1D;
        it->out = it->mx ? LMQ_TYPE_MXFP4 : f32 ? LMQ_TYPE_F32 : want == LMQ_CONVERT_TYPE_AUTO ? t->type : want;
        int64_t ne[3] = {it->ne0, it->ne1 ? it->ne1 : 1, it->ne2};
        int64_t nb = lmq_tensor_nbytes(it->out, is_stacked(it) ? 3 : it->ne1 ? 2 : 1, ne);
        if (nb < 0) return lmq_error(LMQ_ERR_LIMIT, "tensor '%s': size overflows", it->name);
        it->out_bytes = (uint64_t)nb;
        if (&p[kept] != it) {
            p[kept] = *it;
            it->srcs = NULL; /* moved: freed once, from its new slot */
        }
        kept++;
    }
    *n_io = kept;
    /* every layer has a whole dense FFN or a whole set of experts */
    for (long l = 0; l < hp->d.n_layer; l++) {
        int have[2] = {0, 0}, need[2] = {0, 0};
        const char *first_missing[2] = {NULL, NULL};
        for (size_t i = 0; i < hp->arch->n_tensors; i++) {
            const lmq_arch_tensor *t = &hp->arch->tensors[i];
            if (!(t->flags & LMQ_AT_FFN)) continue;
            const int grp = t->kind >= LMQ_TK_FFN_GATE_INP; /* 1: the experts' group */
            char nm[48];
            lmq_tensor_gguf_name(t->kind, (int)l, nm, sizeof nm);
            need[grp]++;
            if (plan_find(p, kept, nm)) have[grp]++;
            else if (!first_missing[grp]) first_missing[grp] = t->hf;
        }
        for (int k = 0; k < 2; k++)
            if (have[k] && have[k] < need[k])
                return lmq_error(LMQ_ERR_NOT_FOUND, "%s: tensor 'model.layers.%ld.%s' is missing from the safetensors files",
                                 dir, l, first_missing[k]);
        if (need[0] + need[1] > 0 && !have[0] && !have[1])
            return lmq_error(LMQ_ERR_NOT_FOUND, "%s: layer %ld has neither an MLP nor experts in the safetensors files",
                             dir, l);
    }
    return LMQ_OK;
}

/* ================================================================ conversion */

typedef struct conv_job {
    lmq_type st, dt;
    const uint8_t *src;
    uint8_t *dst;
    int64_t begin, end; /* element range */
} conv_job;

/* Converts elements [begin, end) in blocks; misaligned sources (a header
 * length that is not a multiple of 4 in a hand-made file) go through an
 * aligned bounce buffer so the row functions only see aligned data. */
static void *conv_worker(void *arg)
{
    const conv_job *j = arg;
    enum { BLOCK = 8192 };
    static _Thread_local float bounce[BLOCK];
    const size_t ss = j->st == LMQ_TYPE_F32 ? 4 : 2, ds = j->dt == LMQ_TYPE_F32 ? 4 : 2;
    for (int64_t i = j->begin; i < j->end; i += BLOCK) {
        int64_t n = j->end - i < BLOCK ? j->end - i : BLOCK;
        const uint8_t *s = j->src + (size_t)i * ss;
        if ((uintptr_t)s % ss) {
            memcpy(bounce, s, (size_t)n * ss);
            s = (const uint8_t *)bounce;
        }
        lmq_convert_float_row(j->st, s, j->dt, j->dst + (size_t)i * ds, n);
    }
    return NULL;
}

/* lmq_pool_for's share ith: jobs[ith] */
static void conv_share(void *ctx, int ith, int nth)
{
    (void)nth;
    conv_worker((conv_job *)ctx + ith);
}

static void convert_parallel(lmq_type st, const void *src, lmq_type dt, void *dst, int64_t n, int n_threads)
{
    if (n < ((int64_t)1 << 20)) n_threads = 1;
    if (n_threads > LMQ_MAX_THREADS) n_threads = LMQ_MAX_THREADS;
    if (n_threads < 1) n_threads = 1;
    conv_job jobs[LMQ_MAX_THREADS];
    int64_t per = (n + n_threads - 1) / n_threads;
    per = (per + 63) & ~(int64_t)63;
    for (int t = 0; t < n_threads; t++) {
        int64_t b = per * t < n ? per * t : n, e = per * (t + 1) < n ? per * (t + 1) : n;
        jobs[t] = (conv_job){st, dt, src, dst, b, e};
    }
    lmq_pool_for(n_threads, conv_share, jobs);
}

/* ================================================================ provenance */

static void utc_now(char *out, size_t cap)
{
    time_t t = time(NULL);
    const char *sde = getenv("SOURCE_DATE_EPOCH"); /* reproducible builds */
    if (sde && *sde) {
        char *end;
        long long v = strtoll(sde, &end, 10);
        if (!*end && v >= 0) t = (time_t)v;
    }
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

#define MAX_SOURCES 4096

typedef struct sources {
    const char *names[MAX_SOURCES];
    char *owned[MAX_SOURCES];
    uint64_t hash[MAX_SOURCES];
    size_t n;
} sources;

static lmq_status add_small_file(sources *src, const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || src->n == MAX_SOURCES) return LMQ_OK;
    char *text = NULL;
    size_t len = 0;
    lmq_status s = lmq_read_file(path, (size_t)1 << 30, &text, &len);
    if (s) return s;
    src->owned[src->n] = strdup(name);
    src->names[src->n] = src->owned[src->n];
    src->hash[src->n] = lmq_hash64(text, len);
    free(text);
    if (!src->names[src->n]) return lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", path);
    src->n++;
    return LMQ_OK;
}

/* lmq.source.files / lmq.source.xxh3: every input file read, hashed whole. */
static lmq_status add_provenance(lmq_meta *m, const char *dir, const lmq_safetensors *st, const char *type_name,
                                 bool norm_plus_one)
{
    sources *src = calloc(1, sizeof *src);
    if (!src) return lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", dir);
    static const char *const small[] = {"config.json", "tokenizer.json", "tokenizer.model", "tokenizer_config.json",
                                        "model.safetensors.index.json"};
    lmq_status s = LMQ_OK;
    for (size_t i = 0; i < sizeof small / sizeof small[0] && !s; i++) s = add_small_file(src, dir, small[i]);
    for (size_t i = 0; i < lmq_safetensors_n_shards(st) && !s; i++) {
        if (src->n == MAX_SOURCES) break;
        src->names[src->n] = base_name(lmq_safetensors_shard_path(st, i));
        s = lmq_safetensors_shard_hash(st, i, &src->hash[src->n]);
        src->n++;
    }
    char when[32];
    utc_now(when, sizeof when);
    if (!s) s = lmq_meta_set_str(m, "lmq.rope.layout", "neox");
    if (!s && norm_plus_one) s = lmq_meta_set_bool(m, "lmq.norm_plus_one_applied", true);
    if (!s) s = lmq_meta_set_str(m, "lmq.convert.version", LMQ_VERSION_STRING);
    if (!s) s = lmq_meta_set_str(m, "lmq.convert.time", when);
    if (!s) s = lmq_meta_set_str(m, "lmq.convert.type", type_name);
    if (!s) s = lmq_meta_set_str_arr(m, "lmq.source.files", src->names, NULL, src->n);
    if (!s) s = lmq_meta_set_arr(m, "lmq.source.xxh3", LMQ_V_U64, src->hash, src->n);
    for (size_t i = 0; i < src->n; i++) free(src->owned[i]);
    free(src);
    return s;
}

/* "f16" when every 2-D weight is written as f16, else "auto". */
static const char *type_label(const plan_item *p, size_t n, lmq_type want)
{
    if (want != LMQ_CONVERT_TYPE_AUTO) return lmq_type_name(want);
    lmq_type seen = LMQ_TYPE_COUNT;
    for (size_t i = 0; i < n; i++) {
        if (!p[i].ne1) continue;
        if (seen == LMQ_TYPE_COUNT) seen = p[i].out;
        else if (seen != p[i].out) return "auto";
    }
    return seen == LMQ_TYPE_COUNT ? "auto" : lmq_type_name(seen);
}

/* ================================================================ driver */

static size_t float_size(lmq_type t)
{
    return t == LMQ_TYPE_F32 ? 4 : 2;
}

/* Writes the rows (columns) of a tensor with value heads in llama.cpp's
 * order, converted to the output type. */
static void gather_vheads(const plan_item *it, const lmq_arch_dims *d, void *dst)
{
    const lmq_st_tensor *t = it->src;
    const size_t ss = float_size(t->type), ds = float_size(it->out);
    const int64_t rows = it->ne1 ? it->ne1 : it->ne0, len = it->ne1 ? it->ne0 : 1;
    const int64_t hd = it->reorder == REORDER_COLS ? it->ro_hd : len;
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *src = (const uint8_t *)t->data + (size_t)(reorder_row(it, d, r) * len) * ss;
        uint8_t *out = (uint8_t *)dst + (size_t)(r * len) * ds;
        for (int64_t h = 0; h < len / hd; h++) {
            const int64_t sh = it->reorder == REORDER_COLS ? vhead_src(h, d->ssm_nk, d->ssm_nv) : h;
            convert_parallel(t->type, src + (size_t)(sh * hd) * ss, it->out, out + (size_t)(h * hd) * ds, hd, 1);
        }
    }
}

static lmq_status ensure_buf(void **buf, size_t *cap, uint64_t need, const char *name)
{
    if (need <= *cap) return LMQ_OK;
    free(*buf);
    *cap = (size_t)need;
    if (!(*buf = malloc(*cap))) {
        *cap = 0;
        return lmq_error(LMQ_ERR_NOMEM, "tensor '%s': cannot allocate %zu bytes", name, (size_t)need);
    }
    return LMQ_OK;
}

/* Experts stacked into one 3-D tensor, converted expert by expert from one
 * source per expert or from this tensor's rows of a fused source. */
static void stack_experts(const plan_item *it, const lmq_safetensors *st, int n_threads, void *buf)
{
    const int64_t n_el = it->ne0 * it->ne1;
    const size_t per = (size_t)(it->out_bytes / (uint64_t)it->ne2);
    for (int64_t e = 0; e < it->ne2; e++) {
        const lmq_st_tensor *x = it->srcs ? it->srcs[e] : it->src;
        const uint8_t *src = x->data;
        if (it->fused_rows) src += (size_t)((e * it->fused_rows + it->fused_row0) * it->ne0) * float_size(x->type);
        if (x->type == it->out) memcpy((uint8_t *)buf + (size_t)e * per, src, per);
        else convert_parallel(x->type, src, it->out, (uint8_t *)buf + (size_t)e * per, n_el, n_threads);
        if (it->srcs) lmq_safetensors_release(st, x);
    }
    /* a fused source is released after the last stack taken from it */
    if (it->fused_rows && it->fused_row0 + it->ne1 == it->fused_rows) lmq_safetensors_release(st, it->src);
}

/* ================================================================ gpt-oss experts
 *
 * MXFP4 (docs/MODELS.md; SPEC 2.5): Hugging Face stores a block of 32 as a
 * scale byte (`_scales` [E, R, C/32]) and 16 bytes (`_blocks` [E, R, C/32,
 * 16]) whose byte j holds element 2j (low nibble) and 2j + 1 (high); ggml's
 * block_mxfp4 is the same E8M0 scale byte followed by 16 bytes whose byte j
 * holds element j (low) and j + 16 (high). Rows are output rows and blocks
 * run along the input, as in the GGUF tensor {C, R, E}: only nibbles move. */

static uint8_t hf_code(const uint8_t *q, int i) /* element i of a Hugging Face block */
{
    return i & 1 ? q[i >> 1] >> 4 : q[i >> 1] & 15;
}

static void repack_mxfp4(const plan_item *it, uint8_t *dst)
{
    const int64_t nb = it->ne0 / 32, rows_src = it->ne1 * it->split_m;
    const uint8_t *blocks = it->src->data, *scales = it->scales->data;
    for (int64_t e = 0; e < it->ne2; e++)
        for (int64_t r = 0; r < it->ne1; r++) {
            const int64_t sr = e * rows_src + r * it->split_m + it->split_k;
            for (int64_t b = 0; b < nb; b++, dst += 17) {
                const uint8_t *q = blocks + (size_t)(sr * nb + b) * 16;
                dst[0] = scales[sr * nb + b];
                for (int j = 0; j < 16; j++) dst[1 + j] = (uint8_t)(hf_code(q, j) | hf_code(q, j + 16) << 4);
            }
        }
}

static float load_float(lmq_type t, const uint8_t *p)
{
    if (t == LMQ_TYPE_F32) {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, p, 2);
    return t == LMQ_TYPE_BF16 ? lmq_bf16_to_fp32(h) : lmq_fp16_to_fp32(h);
}

/* Float experts stored [E, C, R] (x @ W): row r of expert e is column
 * r m + k of the source, gathered a tile of rows at a time so that the
 * source is read along its rows. tile: TILE_ROWS * C floats. */
#define TILE_ROWS 32
static void transpose_experts(const plan_item *it, void *dst, float *tile)
{
    const lmq_st_tensor *t = it->src;
    const int64_t C = it->ne0, R = it->ne1, Rs = R * it->split_m;
    const size_t ss = float_size(t->type), ds = float_size(it->out);
    for (int64_t e = 0; e < it->ne2; e++)
        for (int64_t r0 = 0; r0 < R; r0 += TILE_ROWS) {
            const int64_t nr = R - r0 < TILE_ROWS ? R - r0 : TILE_ROWS;
            for (int64_t c = 0; c < C; c++) {
                const uint8_t *row = (const uint8_t *)t->data + (size_t)((e * C + c) * Rs) * ss;
                for (int64_t i = 0; i < nr; i++)
                    tile[i * C + c] = load_float(t->type, row + (size_t)((r0 + i) * it->split_m + it->split_k) * ss);
            }
            for (int64_t i = 0; i < nr; i++)
                lmq_convert_float_row(LMQ_TYPE_F32, tile + i * C, it->out,
                                      (uint8_t *)dst + (size_t)((e * R + r0 + i) * C) * ds, C);
        }
}

/* One part of a split vector (or stack of vectors): elements k, k + m, ...
 * of each source row, as f32. */
static void gather_split(const plan_item *it, float *dst)
{
    const lmq_st_tensor *t = it->src;
    const int64_t n = it->ne0, rows = it->ne1 ? it->ne1 : 1, m = it->split_m;
    const size_t ss = float_size(t->type);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < n; i++)
            dst[r * n + i] = load_float(t->type, (const uint8_t *)t->data + (size_t)(r * n * m + i * m + it->split_k) * ss);
}

/* The tensors that are not a (converted) copy of their source's bytes in
 * order: MXFP4 repacks, transposed experts, split vectors. */
static lmq_status write_rearranged(lmq_writer *w, const plan_item *it, const lmq_safetensors *st, void *buf)
{
    const bool stacked = is_stacked(it);
    int64_t ne[3] = {it->ne0, it->ne1 ? it->ne1 : 1, it->ne2};
    if (it->mx) {
        repack_mxfp4(it, buf);
    } else if (it->in_out) {
        float *tile = malloc((size_t)(TILE_ROWS * it->ne0) * sizeof *tile);
        if (!tile) return lmq_error(LMQ_ERR_NOMEM, "tensor '%s': out of memory", it->name);
        transpose_experts(it, buf, tile);
        free(tile);
    } else {
        gather_split(it, buf);
    }
    lmq_status s = lmq_writer_add_tensor(w, it->name, it->out, stacked ? 3 : it->ne1 ? 2 : 1, ne, buf, it->out_bytes);
    /* a shared source is released after the last part taken from it */
    if (it->split_k == it->split_m - 1) {
        lmq_safetensors_release(st, it->src);
        if (it->scales) lmq_safetensors_release(st, it->scales);
    }
    return s;
}

static lmq_status write_tensors(lmq_writer *w, const plan_item *p, size_t n, const lmq_safetensors *st,
                                const lmq_convert_opts *o, const hparams *hp, lmq_convert_stats *stats)
{
    uint64_t total = 0, done = 0;
    for (size_t i = 0; i < n; i++) total += p[i].out_bytes;
    void *buf = NULL;
    size_t cap = 0;
    lmq_status s = LMQ_OK;
    for (size_t i = 0; i < n && !s; i++) {
        const plan_item *it = &p[i];
        const lmq_st_tensor *t = it->src;
        if (o->tensor_begin) o->tensor_begin(o->progress_ctx, i, n, it->name);
        int64_t ne[3] = {it->ne0, it->ne1 ? it->ne1 : 1, it->ne2};
        if (!t) { /* generated from config.json */
            s = lmq_writer_add_tensor(w, it->name, LMQ_TYPE_F32, 1, ne, it->gen, it->out_bytes);
            done += it->out_bytes;
            stats->n_params += (uint64_t)ne[0];
            stats->n_tensors++;
            continue;
        }
        if (it->mx || it->in_out || it->split_m > 1) {
            if ((s = ensure_buf(&buf, &cap, it->out_bytes, it->name))) break;
            s = write_rearranged(w, it, st, buf);
            done += it->out_bytes;
            stats->n_params += (uint64_t)(ne[0] * ne[1] * ne[2]);
            stats->n_tensors++;
            if (o->progress) o->progress(o->progress_ctx, done, total);
            continue;
        }
        if (it->srcs || it->fused_rows) {
            if ((s = ensure_buf(&buf, &cap, it->out_bytes, it->name))) break;
            stack_experts(it, st, o->n_threads, buf);
            s = lmq_writer_add_tensor(w, it->name, it->out, 3, ne, buf, it->out_bytes);
            done += it->out_bytes;
            stats->n_params += (uint64_t)(ne[0] * ne[1] * ne[2]);
            stats->n_tensors++;
            if (o->progress) o->progress(o->progress_ctx, done, total);
            continue;
        }
        /* (1 + w) norms are stored as the multiplier, A_log as -exp(A_log), as llama.cpp's converter does */
        const bool plus_one = hp->arch->norm_plus_one && (it->desc->flags & LMQ_AT_NORM);
        const bool neg_exp = (it->desc->flags & LMQ_AT_NEG_EXP) != 0;
        const void *data = t->data;
        if (t->type != it->out || plus_one || neg_exp || it->reorder) {
            if ((s = ensure_buf(&buf, &cap, it->out_bytes, it->name))) break;
            if (it->reorder) gather_vheads(it, &hp->d, buf);
            else convert_parallel(t->type, t->data, it->out, buf, ne[0] * ne[1], o->n_threads);
            float *f = buf; /* vectors (norms, A_log) are f32 */
            if (plus_one)
                for (int64_t e = 0; e < ne[0]; e++) f[e] += 1.0f;
            if (neg_exp)
                for (int64_t e = 0; e < ne[0]; e++) f[e] = (float)-exp((double)f[e]);
            data = buf;
        }
        s = lmq_writer_add_tensor(w, it->name, it->out, it->ne1 ? 2 : 1, ne, data, it->out_bytes);
        lmq_safetensors_release(st, t);
        done += it->out_bytes;
        stats->n_params += (uint64_t)(ne[0] * ne[1]);
        stats->n_tensors++;
        if (o->progress) o->progress(o->progress_ctx, done, total);
    }
    free(buf);
    return s;
}

lmq_status lmq_convert_hf(const char *dir, const char *out_path, const lmq_convert_opts *opts,
                          lmq_convert_stats *stats)
{
    double t0 = lmq_time_s();
    lmq_convert_stats local;
    if (!stats) stats = &local;
    memset(stats, 0, sizeof *stats);
    lmq_convert_opts o = {.out_type = LMQ_CONVERT_TYPE_AUTO, .codec = LMQ_CODEC_NONE};
    if (opts) o = *opts;
    if (o.n_threads <= 0) o.n_threads = lmq_n_cpus();
    if (!dir || !out_path) return lmq_error(LMQ_ERR_INVALID_ARG, "convert: missing input or output path");
    if (o.out_type != LMQ_CONVERT_TYPE_AUTO && o.out_type != LMQ_TYPE_F32 && o.out_type != LMQ_TYPE_F16 &&
        o.out_type != LMQ_TYPE_BF16)
        return lmq_error(LMQ_ERR_INVALID_ARG, "convert: output type %s (f32, f16 or bf16 expected; quantize afterwards)",
                         lmq_type_name(o.out_type));
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return lmq_error(errno == ENOENT ? LMQ_ERR_NOT_FOUND : LMQ_ERR_IO, "%s: %s", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return lmq_error(LMQ_ERR_INVALID_ARG, "%s: not a directory (expected a Hugging Face model directory)", dir);

    lmq_meta *meta = lmq_meta_new();
    lmq_safetensors *st = NULL;
    lmq_writer *w = NULL;
    plan_item *plan = NULL;
    size_t n_plan = 0, n_plan_all = 0;
    hparams hp = {0};
    lmq_status s = meta ? LMQ_OK : lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", dir);
    if (!s) s = lmq_hf_config_to_meta(dir, meta);
    if (!s) s = lmq_hf_tokenizer_to_meta(dir, meta);
    if (!s) s = read_hparams(meta, dir, &hp);
    if (!s) s = lmq_safetensors_open(dir, &st);
    if (s) goto out;
    plan = plan_build(&hp, &n_plan);
    n_plan_all = n_plan;
    if (!plan) {
        s = lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", dir);
        goto out;
    }
    if ((s = plan_bind(plan, &n_plan, st, &hp, o.out_type, dir))) goto out;

    lmq_writer_opts wo = {.codec = o.codec};
    if ((s = lmq_writer_open(out_path, &wo, &w))) goto out;
    lmq_meta *wm = lmq_writer_meta(w);
    for (size_t i = 0; i < lmq_meta_count(meta); i++)
        if ((s = lmq_meta_set_value(wm, lmq_meta_key(meta, i), lmq_meta_value(meta, i)))) goto out;
    if ((s = add_provenance(wm, dir, st, type_label(plan, n_plan, o.out_type), hp.arch->norm_plus_one))) goto out;
    if ((s = write_tensors(w, plan, n_plan, st, &o, &hp, stats))) goto out;
    s = lmq_writer_finish(w);
    w = NULL;
    if (s) goto out;
    if (stat(out_path, &sb) == 0) stats->bytes_written = (uint64_t)sb.st_size;
    stats->seconds = lmq_time_s() - t0;
out:
    lmq_writer_abort(w);
    for (size_t i = 0; plan && i < n_plan_all; i++) free(plan[i].srcs);
    free(plan);
    free(hp.rec);
    free(hp.geo);
    lmq_safetensors_close(st);
    lmq_meta_free(meta);
    return s;
}
