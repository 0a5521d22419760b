/* Gemma 4 (SPEC.md 3) from Hugging Face directories this test writes
 * (Gemma4ForConditionalGeneration: text_config, tensors under
 * model.language_model., a vision and an audio tensor to skip, k/v
 * projections on a shared-KV layer to skip; an f32 model.safetensors of
 * random weights; Gemma 4's tokenizer.json from tests/data/gemma4-tokenizer,
 * llama-8m's tokenizer.model for the text-only layout), against a double-precision
 * forward written from transformers' modeling_gemma4.py:
 *   - per-kind head sizes (sliding 16, global 32) and rotary dims, the
 *     global layers' proportional RoPE (the first int(0.25 * 32 / 2) pairs
 *     rotate at base^(-2i/32), the rest not at all), NEOX pairing;
 *   - plain-weight RMSNorms (no 1 + w), q/k norms per head, v norm without a
 *     weight, attention scale 1, sliding windows from layer_types;
 *   - KV sharing: the last num_kv_shared_layers layers read the cache of the
 *     last earlier layer of their kind and own none (lmq_arch_kv_bytes_per_
 *     token and the context's cache show the saving);
 *   - double-wide MLPs on the shared layers, per-layer embeddings (the
 *     token table, the projection of the scaled embedding, its norm, each
 *     layer's gate, projection and norm), the layer scalar on the whole
 *     residual, sqrt(n_embd) embedding scale, final soft-cap 30;
 *   - a second model: K = V on global layers (no v_proj, values are the raw
 *     keys) with num_global_key_value_heads 2 beside 1, no PLE, no sharing.
 * Each is evaluated in one batch, token by token and in batches of 2
 * through the sliding rings, with rewinds through the rings (one step back
 * inside what they hold, and further back), with an edited continuation
 * after a rewind. Every feature is broken in the reference once: lmq must
 * then differ by far more than the tolerance. The .lmq is exported to GGUF
 * (llama.cpp's gemma4 keys and names), which loads with identical logits
 * and tokenizes as the .lmq does (tokenizer model gemma4), also imported back.
 * Exit 77 (skipped) when ../shared's tokenizer is absent. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lmq_convert.h"
#include "lmq_format.h"
#include "lmq_runtime.h"
#include "testutil.h"

#define H 64
#define FF 48
#define NH 2
#define HD 16    /* sliding layers */
#define HDG 32   /* global layers */
#define PD 32    /* per-layer-embedding width (n_layer PD = 256: the tables take K types) */
#define VOCAB 4096
#define NL 8
#define WIN 4
#define N_TOK 17
#define MAXS 256 /* safetensors entries */

/* Features the reference can switch off. */
enum {
    BRK_PLE = 1 << 0,      /* no per-layer embeddings */
    BRK_SCALAR = 1 << 1,   /* no layer scalar */
    BRK_DONOR = 1 << 2,    /* shared layers read the first layer of their kind */
    BRK_PLUS1 = 1 << 3,    /* norms as 1 + w */
    BRK_QSCALE = 1 << 4,   /* scores scaled by 1/sqrt(head_dim) */
    BRK_VNORM = 1 << 5,    /* no value norm */
    BRK_PROP = 1 << 6,     /* partial RoPE (Qwen-style) instead of proportional */
    BRK_SOFTCAP = 1 << 7,  /* no final soft-cap */
    BRK_WINDOW = 1 << 8,   /* no window */
    BRK_KEQV = 1 << 9,     /* values normed after the key norm (k_norm applied to V too) */
    BRK_ROUTER_IN = 1 << 10, /* the router reads the experts' normed input instead of the residual */
    BRK_EXP_SCALE = 1 << 11, /* no per-expert scale */
    BRK_MOE_NORMS = 1 << 12, /* no post_feedforward_layernorm_1/_2 */
    BRK_COUNT = 13
};
static const char *const k_brk[BRK_COUNT] = {"no PLE", "no layer scalar", "first donor", "norms 1 + w",
                                             "1/sqrt(d) scale", "no v norm", "partial RoPE", "no soft-cap",
                                             "no window", "V with k_norm", "router on the experts' input",
                                             "no per-expert scale", "no post norms 1/2"};

typedef struct gcfg {
    const char *label;
    const bool *swa;      /* layer kinds (NULL: k_swa_e2b) */
    bool text_only;       /* Gemma4ForCausalLM: flat config, tensors under model. */
    bool ple, keqv;
    int shared, kv, kv_g; /* shared-KV layers; KV heads of sliding / global layers */
    bool wide;
    bool moe;             /* enable_moe_block: NE experts, top-NK, FE wide, beside the dense MLP */
    unsigned breaks;
} gcfg;

#define NE 4
#define NK 2
#define FE 16

static const bool k_swa_e2b[NL] = {true, true, true, false, true, true, true, false};
/* the last non-shared layers are global then sliding: transformers' rule picks layers 2 and 3, llama.cpp's
 * hard-coded n - 2 / n - 1 would pick them the other way round: export refuses */
static const bool k_swa_swapped[NL] = {true, true, false, true, true, true, true, false};
static const bool *k_swa = k_swa_e2b;

typedef struct weights {
    float *embd, *onorm, *ple_embd, *ple_proj, *ple_norm;
    float *an[NL], *q[NL], *k[NL], *v[NL], *qn[NL], *kn[NL], *o[NL], *pan[NL], *fn[NL], *g[NL], *u[NL], *dn[NL],
        *pfn[NL], *pg[NL], *pp[NL], *ppn[NL], *scalar[NL];
    float *rp[NL], *rs[NL], *pes[NL], *gu[NL], *ed[NL], *pre2[NL], *post1[NL], *post2[NL]; /* MoE */
} weights;

static uint32_t g_rng = 2463534242u;
static float frand(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 17;
    g_rng ^= g_rng << 5;
    return (float)((g_rng & 0xffffff) / 16777216.0 - 0.5);
}

static int hd_of(int l) { return k_swa[l] ? HD : HDG; }
static int kv_of(const gcfg *c, int l) { return k_swa[l] || !c->keqv ? c->kv : c->kv_g; }
static int ff_of(const gcfg *c, int l) { return c->wide && l >= NL - c->shared ? 2 * FF : FF; }
static bool owns(const gcfg *c, int l) { return l < NL - c->shared; }
static bool has_v(const gcfg *c, int l) { return owns(c, l) && !(c->keqv && !k_swa[l]); }

/* The layer whose cache layer l reads (Hugging Face's store_full_length_kv). */
static int donor(const gcfg *c, int l, unsigned brk)
{
    if (owns(c, l)) return l;
    int first = -1, last = -1;
    for (int j = 0; j < NL - c->shared; j++)
        if (k_swa[j] == k_swa[l]) {
            if (first < 0) first = j;
            last = j;
        }
    return brk & BRK_DONOR ? first : last;
}

/* ---------------------------------------------------------------- the checkpoint */

static t_st_entry g_e[MAXS];
static size_t g_n;

/* An entry of `rows` x `cols` (cols 0: a vector) filled with random values
 * (norms near 1, matrices ~ 1/sqrt(cols), the scalar in [0.5, 1.5]). */
__attribute__((format(printf, 4, 5))) static float *entry(int64_t rows, int64_t cols, int kind, const char *fmt, ...)
{
    T_CHECK(g_n < MAXS, "too many tensors");
    t_st_entry *e = &g_e[g_n++];
    *e = (t_st_entry){.dtype = "F32", .n_dims = cols ? 2 : 1, .shape = {rows, cols}};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->name, sizeof e->name, fmt, ap);
    va_end(ap);
    const int64_t n = rows * (cols ? cols : 1);
    float *v = malloc((size_t)n * sizeof *v);
    T_CHECK(v != NULL, "out of memory");
    const float sc = cols ? 2.0f / sqrtf((float)cols) : 0.6f;
    for (int64_t i = 0; i < n; i++) v[i] = kind == 1 ? 1.0f + sc * frand() : kind == 2 ? 1.0f + frand() : sc * frand();
    e->data = v;
    e->nbytes = (uint64_t)n * sizeof(float);
    return v;
}

static void make_weights(const gcfg *c, weights *w)
{
    g_n = 0;
    g_rng = 2463534242u;
    memset(w, 0, sizeof *w);
    const char *p = c->text_only ? "model." : "model.language_model.";
    w->embd = entry(VOCAB, H, 0, "%sembed_tokens.weight", p);
    for (int64_t i = 0; i < (int64_t)VOCAB * H; i++) w->embd[i] *= 0.1f; /* embeddings are scaled by sqrt(H) */
    w->onorm = entry(H, 0, 1, "%snorm.weight", p);
    for (int i = 0; i < H; i++) w->onorm[i] *= 400.0f; /* logits of tens: the soft-cap bites */
    if (c->ple) {
        w->ple_embd = entry(VOCAB, NL * PD, 0, "%sembed_tokens_per_layer.weight", p);
        w->ple_proj = entry(NL * PD, H, 0, "%sper_layer_model_projection.weight", p);
        w->ple_norm = entry(PD, 0, 1, "%sper_layer_projection_norm.weight", p);
    }
    for (int l = 0; l < NL; l++) {
        const int hd = hd_of(l), kv = kv_of(c, l), ff = ff_of(c, l);
        w->an[l] = entry(H, 0, 1, "%slayers.%d.input_layernorm.weight", p, l);
        w->q[l] = entry(NH * hd, H, 0, "%slayers.%d.self_attn.q_proj.weight", p, l);
        w->qn[l] = entry(hd, 0, 1, "%slayers.%d.self_attn.q_norm.weight", p, l);
        if (owns(c, l)) {
            w->k[l] = entry(kv * hd, H, 0, "%slayers.%d.self_attn.k_proj.weight", p, l);
            w->kn[l] = entry(hd, 0, 1, "%slayers.%d.self_attn.k_norm.weight", p, l);
        } else if (l == NL - 2) { /* Hugging Face ignores these on shared layers; so must convert */
            entry(kv * hd, H, 0, "%slayers.%d.self_attn.k_proj.weight", p, l);
        }
        if (has_v(c, l)) w->v[l] = entry(kv * hd, H, 0, "%slayers.%d.self_attn.v_proj.weight", p, l);
        w->o[l] = entry(H, NH * hd, 0, "%slayers.%d.self_attn.o_proj.weight", p, l);
        w->pan[l] = entry(H, 0, 1, "%slayers.%d.post_attention_layernorm.weight", p, l);
        w->fn[l] = entry(H, 0, 1, "%slayers.%d.pre_feedforward_layernorm.weight", p, l);
        w->g[l] = entry(ff, H, 0, "%slayers.%d.mlp.gate_proj.weight", p, l);
        w->u[l] = entry(ff, H, 0, "%slayers.%d.mlp.up_proj.weight", p, l);
        w->dn[l] = entry(H, ff, 0, "%slayers.%d.mlp.down_proj.weight", p, l);
        w->pfn[l] = entry(H, 0, 1, "%slayers.%d.post_feedforward_layernorm.weight", p, l);
        if (c->ple) {
            w->pg[l] = entry(PD, H, 0, "%slayers.%d.per_layer_input_gate.weight", p, l);
            w->pp[l] = entry(H, PD, 0, "%slayers.%d.per_layer_projection.weight", p, l);
            w->ppn[l] = entry(H, 0, 1, "%slayers.%d.post_per_layer_input_norm.weight", p, l);
        }
        w->scalar[l] = entry(1, 0, 2, "%slayers.%d.layer_scalar", p, l);
        if (c->moe) {
            w->rp[l] = entry(NE, H, 0, "%slayers.%d.router.proj.weight", p, l);
            for (int i = 0; i < NE * H; i++) w->rp[l][i] *= 8.0f; /* routing that is not a coin toss */
            w->rs[l] = entry(H, 0, 1, "%slayers.%d.router.scale", p, l);
            w->pes[l] = entry(NE, 0, 2, "%slayers.%d.router.per_expert_scale", p, l);
            w->gu[l] = entry(NE * 2 * FE, H, 0, "%slayers.%d.experts.gate_up_proj", p, l);
            g_e[g_n - 1].n_dims = 3; /* [E, 2F, H] */
            g_e[g_n - 1].shape[0] = NE, g_e[g_n - 1].shape[1] = 2 * FE, g_e[g_n - 1].shape[2] = H;
            w->ed[l] = entry(NE * H, FE, 0, "%slayers.%d.experts.down_proj", p, l);
            g_e[g_n - 1].n_dims = 3; /* [E, H, F] */
            g_e[g_n - 1].shape[0] = NE, g_e[g_n - 1].shape[1] = H, g_e[g_n - 1].shape[2] = FE;
            w->pre2[l] = entry(H, 0, 1, "%slayers.%d.pre_feedforward_layernorm_2.weight", p, l);
            w->post1[l] = entry(H, 0, 1, "%slayers.%d.post_feedforward_layernorm_1.weight", p, l);
            w->post2[l] = entry(H, 0, 1, "%slayers.%d.post_feedforward_layernorm_2.weight", p, l);
        }
    }
    if (c->text_only) return;
    entry(16, 12, 0, "model.vision_tower.encoder.layers.0.mlp.fc1.weight");
    entry(8, 4, 0, "model.embed_vision.embedding_projection.weight");
    entry(8, 6, 0, "model.audio_tower.layers.0.feed_forward.weight");
}

static void free_weights(void)
{
    for (size_t i = 0; i < g_n; i++) free((void *)(uintptr_t)g_e[i].data);
    g_n = 0;
}

static bool make_dir(const gcfg *c, const char *dir)
{
    char path[1024], cfg[4096], text[3072], types[512] = "";
    if (mkdir(dir, 0755) && errno != EEXIST) return false;
    for (int l = 0; l < NL; l++)
        snprintf(types + strlen(types), sizeof types - strlen(types), "%s\"%s\"", l ? "," : "",
                 k_swa[l] ? "sliding_attention" : "full_attention");
    snprintf(text, sizeof text,
             "\"model_type\":\"gemma4_text\",\"hidden_size\":%d,\"intermediate_size\":%d,\"num_hidden_layers\":%d,\"num_attention_heads\":%d,"
             "\"num_key_value_heads\":%d,\"num_global_key_value_heads\":%d,\"head_dim\":%d,\"global_head_dim\":%d,"
             "\"vocab_size\":%d,\"vocab_size_per_layer_input\":%d,\"hidden_size_per_layer_input\":%d,"
             "\"num_kv_shared_layers\":%d,\"use_double_wide_mlp\":%s,\"attention_k_eq_v\":%s,"
             "\"enable_moe_block\":%s,\"num_experts\":%d,\"top_k_experts\":%d,\"moe_intermediate_size\":%d,"
             "\"sliding_window\":%d,\"layer_types\":[%s],\"rms_norm_eps\":1e-6,"
             "\"hidden_activation\":\"gelu_pytorch_tanh\",\"final_logit_softcapping\":30.0,"
             "\"max_position_embeddings\":1024,\"attention_bias\":false,\"rope_parameters\":{"
             "\"sliding_attention\":{\"rope_type\":\"default\",\"rope_theta\":10000.0},"
             "\"full_attention\":{\"rope_type\":\"proportional\",\"partial_rotary_factor\":0.25,"
             "\"rope_theta\":1000000.0}}",
             H, FF, NL, NH, c->kv, c->kv_g, HD, HDG, VOCAB, VOCAB, c->ple ? PD : 0, c->shared,
             c->wide ? "true" : "false", c->keqv ? "true" : "false", c->moe ? "true" : "false", NE, NK, FE, WIN,
             types);
    if (c->text_only)
        snprintf(cfg, sizeof cfg, "{\"architectures\":[\"Gemma4ForCausalLM\"],%s,\"bos_token_id\":1,\"eos_token_id\":[2,3],"
                 "\"tie_word_embeddings\":true}\n", text);
    else
        snprintf(cfg, sizeof cfg, "{\"architectures\":[\"Gemma4ForConditionalGeneration\"],\"model_type\":\"gemma4\","
                 "\"bos_token_id\":1,\"eos_token_id\":[2,3],\"tie_word_embeddings\":true,\"text_config\":{%s},"
                 "\"vision_config\":{\"model_type\":\"gemma4_vision\"},\"audio_config\":{\"model_type\":\"gemma4_audio\"}}\n",
                 text);
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (t_write_all(path, cfg, strlen(cfg))) return false;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (!t_write_st(path, g_e, g_n)) return false;
    if (c->text_only) {
        /* a tokenizer.model beside Gemma's tokenizer.json (Gemma 2/3's layout): the SentencePiece model wins */
        snprintf(path, sizeof path, "%s/tokenizer.json", dir);
        if (!t_copy_file(t_data("gemma4-tokenizer/tokenizer.json"), path)) return false;
        snprintf(path, sizeof path, "%s/tokenizer.model", dir);
        return t_copy_file(t_shared("models/llama-8m-debtext/tokenizer.model"), path);
    }
    /* the real layout's tokenizer: Gemma 4's tokenizer.json (tests/make_gemma4_tokenizer.py) */
    static const char *const tf[] = {"tokenizer.json", "tokenizer_config.json"};
    for (int i = 0; i < 2; i++) {
        char src[512];
        snprintf(src, sizeof src, "gemma4-tokenizer/%s", tf[i]);
        snprintf(path, sizeof path, "%s/%s", dir, tf[i]);
        if (!t_copy_file(t_data(src), path)) return false;
    }
    return true;
}

/* The ids of a chat-like text with file `path`'s vocabulary into ids[64]. */
static size_t file_ids(const char *path, int32_t *ids, const char **model)
{
    lmq_file *f = NULL;
    lmq_vocab *v = NULL;
    size_t n = 0;
    static const char text[] = "<|turn>user\nThe thing is\n\n\n\n  Caf\xc3\xa9 \xf0\x9f\x98\x8a<turn|>\n<|channel>";
    static char name[32];
    if (lmq_file_open(path, &f) == LMQ_OK && lmq_vocab_load(lmq_file_meta(f), &v) == LMQ_OK) {
        const char *m = NULL;
        lmq_meta_get_str(lmq_file_meta(f), "tokenizer.ggml.model", &m, NULL);
        snprintf(name, sizeof name, "%s", m ? m : "");
        *model = name;
        if (lmq_tokenize(v, text, sizeof text - 1, true, true, ids, 64, &n)) n = 0;
    }
    lmq_vocab_free(v);
    lmq_file_close(f);
    return n;
}

/* ---------------------------------------------------------------- reference (modeling_gemma4.py) */

static void matvec(const float *W, const double *x, int in, int out, double *y)
{
    for (int r = 0; r < out; r++) {
        double s = 0;
        for (int i = 0; i < in; i++) s += (double)W[(size_t)r * in + i] * x[i];
        y[r] = s;
    }
}

/* Gemma4RMSNorm: x (mean(x^2) + eps)^-1/2 w; w NULL: no weight. */
static void rms(double *x, const float *w, int n, unsigned brk)
{
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    const double sc = 1.0 / sqrt(ss / n + 1e-6);
    for (int i = 0; i < n; i++) x[i] *= sc * (w ? (double)w[i] + (brk & BRK_PLUS1 ? 1.0 : 0.0) : 1.0);
}

static double gelu(double x)
{
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

/* NEOX RoPE over the head (rotate_half): sliding layers the default over
 * HD; global layers the proportional one over HDG (pairs beyond the
 * rotated ones have frequency 0). */
static void rope(double *v, int l, int pos, unsigned brk)
{
    const int hd = hd_of(l), half = hd / 2, pairs = k_swa[l] ? half : (int)floor(0.25 * HDG / 2);
    const double base = k_swa[l] ? 10000.0 : 1e6;
    for (int i = 0; i < half; i++) {
        double f = i < pairs ? pow(base, -2.0 * i / hd) : 0.0;
        if (!k_swa[l] && brk & BRK_PROP) f = i < pairs ? pow(base, -2.0 * i / (2 * pairs)) : 0.0;
        const double a = pos * f, cs = cos(a), sn = sin(a), x0 = v[i], x1 = v[i + half];
        v[i] = x0 * cs - x1 * sn;
        v[i + half] = x1 * cs + x0 * sn;
    }
}

/* Gemma4TextDecoderLayer's MoE branch: o (the dense MLP's output) becomes
 * post_norm_1(o) + post_norm_2(experts(pre_norm_2(x))), routed by
 * softmax(W_r (rmsnorm(x) * scale / sqrt(H))), top-k renormalised, times
 * the per-expert scale; x is the residual before the FFN. */
static void ref_moe(const weights *w, int l, const double *x, unsigned brk, double *o)
{
    double r[H], in[H], p[NE], gu[2 * FE], y[H], acc[H] = {0};
    memcpy(in, x, sizeof in);
    rms(in, w->pre2[l], H, brk);
    memcpy(r, brk & BRK_ROUTER_IN ? in : x, sizeof r);
    rms(r, NULL, H, brk);
    for (int i = 0; i < H; i++) r[i] *= w->rs[l][i] / sqrt((double)H);
    matvec(w->rp[l], r, H, NE, p);
    double mx = p[0], den = 0;
    for (int e = 1; e < NE; e++) mx = p[e] > mx ? p[e] : mx;
    for (int e = 0; e < NE; e++) den += p[e] = exp(p[e] - mx);
    int sel[NK];
    double wt[NK], sum = 0;
    for (int k = 0; k < NK; k++) {
        int best = -1;
        for (int e = 0; e < NE; e++) {
            bool taken = false;
            for (int j = 0; j < k; j++) taken |= sel[j] == e;
            if (!taken && (best < 0 || p[e] > p[best])) best = e;
        }
        sel[k] = best;
        sum += wt[k] = p[best] / den;
    }
    for (int k = 0; k < NK; k++) {
        const int e = sel[k];
        const double wk = wt[k] / sum * (brk & BRK_EXP_SCALE ? 1.0 : w->pes[l][e]);
        matvec(w->gu[l] + (size_t)e * 2 * FE * H, in, H, 2 * FE, gu);
        for (int i = 0; i < FE; i++) gu[i] = gelu(gu[i]) * gu[FE + i];
        matvec(w->ed[l] + (size_t)e * H * FE, gu, FE, H, y);
        for (int i = 0; i < H; i++) acc[i] += wk * y[i];
    }
    if (!(brk & BRK_MOE_NORMS)) {
        rms(o, w->post1[l], H, brk);
        rms(acc, w->post2[l], H, brk);
    }
    for (int i = 0; i < H; i++) o[i] += acc[i];
}

typedef struct kvstore {
    double *k[NL], *v[NL]; /* [pos][kv][hd] of the layers that own a cache */
} kvstore;

/* Logits of toks[0..n) at every position into out[n][VOCAB]. */
static void ref_forward(const gcfg *c, const weights *w, const int *toks, int n, unsigned brk, double *out)
{
    kvstore kv = {0};
    for (int l = 0; l < NL; l++)
        if (owns(c, l)) {
            kv.k[l] = calloc((size_t)n * kv_of(c, l) * hd_of(l), sizeof(double));
            kv.v[l] = calloc((size_t)n * kv_of(c, l) * hd_of(l), sizeof(double));
        }
    double *x = calloc((size_t)n * H, sizeof *x), *pli = calloc((size_t)n * NL * PD, sizeof *pli);
    double h[H], q[NH * HDG], kk[4 * HDG], vv[4 * HDG], att[NH * HDG], o[H], g[2 * FF], u[2 * FF], t[NL * PD];
    double sc[N_TOK * 2];
    for (int p = 0; p < n; p++) {
        double *xp = x + (size_t)p * H;
        for (int i = 0; i < H; i++) xp[i] = w->embd[(size_t)toks[p] * H + i] * sqrt((double)H);
        if (!c->ple) continue;
        matvec(w->ple_proj, xp, H, NL * PD, t);
        for (int l = 0; l < NL; l++) {
            double *s = t + l * PD;
            for (int i = 0; i < PD; i++) s[i] /= sqrt((double)H);
            rms(s, w->ple_norm, PD, brk);
            for (int i = 0; i < PD; i++)
                pli[((size_t)p * NL + l) * PD + i] =
                    (s[i] + w->ple_embd[(size_t)toks[p] * NL * PD + l * PD + i] * sqrt((double)PD)) / sqrt(2.0);
        }
    }
    for (int l = 0; l < NL; l++) {
        const int hd = hd_of(l), nkv = kv_of(c, l), ff = ff_of(c, l), src = donor(c, l, brk);
        for (int p = 0; p < n; p++) { /* keys and values of the layers that own a cache, all positions first */
            if (!owns(c, l)) break;
            double *xp = x + (size_t)p * H;
            memcpy(h, xp, sizeof h);
            rms(h, w->an[l], H, brk);
            matvec(w->k[l], h, H, nkv * hd, kk);
            if (w->v[l]) matvec(w->v[l], h, H, nkv * hd, vv);
            else memcpy(vv, kk, (size_t)nkv * hd * sizeof(double));
            for (int j = 0; j < nkv; j++) {
                rms(kk + j * hd, w->kn[l], hd, brk);
                rope(kk + j * hd, l, p, brk);
                if (brk & BRK_KEQV && !w->v[l]) rms(vv + j * hd, w->kn[l], hd, brk);
                if (!(brk & BRK_VNORM)) rms(vv + j * hd, NULL, hd, brk);
            }
            memcpy(kv.k[l] + (size_t)p * nkv * hd, kk, (size_t)nkv * hd * sizeof(double));
            memcpy(kv.v[l] + (size_t)p * nkv * hd, vv, (size_t)nkv * hd * sizeof(double));
        }
        for (int p = 0; p < n; p++) {
            double *xp = x + (size_t)p * H;
            memcpy(h, xp, sizeof h);
            rms(h, w->an[l], H, brk);
            matvec(w->q[l], h, H, NH * hd, q);
            for (int hh = 0; hh < NH; hh++) {
                rms(q + hh * hd, w->qn[l], hd, brk);
                rope(q + hh * hd, l, p, brk);
                const int kh = hh / (NH / nkv);
                double mx = -1e300, den = 0;
                const int lo = k_swa[l] && !(brk & BRK_WINDOW) ? (p - WIN + 1 > 0 ? p - WIN + 1 : 0) : 0;
                for (int j = lo; j <= p; j++) {
                    double s = 0;
                    const double *kj = kv.k[src] + ((size_t)j * nkv + kh) * hd;
                    for (int i = 0; i < hd; i++) s += q[hh * hd + i] * kj[i];
                    if (brk & BRK_QSCALE) s /= sqrt((double)hd);
                    sc[j - lo] = s;
                    if (s > mx) mx = s;
                }
                for (int j = lo; j <= p; j++) den += sc[j - lo] = exp(sc[j - lo] - mx);
                for (int i = 0; i < hd; i++) {
                    double a = 0;
                    for (int j = lo; j <= p; j++) a += sc[j - lo] * kv.v[src][((size_t)j * nkv + kh) * hd + i];
                    att[hh * hd + i] = a / den;
                }
            }
            matvec(w->o[l], att, NH * hd, H, o);
            rms(o, w->pan[l], H, brk);
            for (int i = 0; i < H; i++) xp[i] += o[i];
            memcpy(h, xp, sizeof h);
            rms(h, w->fn[l], H, brk);
            matvec(w->g[l], h, H, ff, g);
            matvec(w->u[l], h, H, ff, u);
            for (int i = 0; i < ff; i++) g[i] = gelu(g[i]) * u[i];
            matvec(w->dn[l], g, ff, H, o);
            if (c->moe) ref_moe(w, l, xp, brk, o);
            rms(o, w->pfn[l], H, brk);
            for (int i = 0; i < H; i++) xp[i] += o[i];
            if (c->ple && !(brk & BRK_PLE)) {
                matvec(w->pg[l], xp, H, PD, g);
                for (int i = 0; i < PD; i++) g[i] = gelu(g[i]) * pli[((size_t)p * NL + l) * PD + i];
                matvec(w->pp[l], g, PD, H, o);
                rms(o, w->ppn[l], H, brk);
                for (int i = 0; i < H; i++) xp[i] += o[i];
            }
            if (!(brk & BRK_SCALAR))
                for (int i = 0; i < H; i++) xp[i] *= w->scalar[l][0];
        }
    }
    for (int p = 0; p < n; p++) {
        double *xp = x + (size_t)p * H;
        rms(xp, w->onorm, H, brk);
        matvec(w->embd, xp, H, VOCAB, out + (size_t)p * VOCAB);
        if (!(brk & BRK_SOFTCAP))
            for (int i = 0; i < VOCAB; i++) out[(size_t)p * VOCAB + i] = 30.0 * tanh(out[(size_t)p * VOCAB + i] / 30.0);
    }
    for (int l = 0; l < NL; l++) {
        free(kv.k[l]);
        free(kv.v[l]);
    }
    free(x);
    free(pli);
}

/* ---------------------------------------------------------------- lmq against it */

static double max_err(const float *got, const double *want)
{
    double e = 0, scale = 0;
    for (int i = 0; i < VOCAB; i++) {
        const double a = fabs(want[i]);
        if (a > scale) scale = a;
    }
    for (int i = 0; i < VOCAB; i++) {
        const double d = fabs(got[i] - want[i]) / scale;
        if (d > e) e = d;
    }
    return e;
}

static lmq_context *new_ctx(lmq_model *m, int n_batch)
{
    lmq_context_params p = lmq_context_default_params();
    p.n_ctx = 64;
    p.n_batch = n_batch;
    p.n_threads = 2;
    p.kv_type = LMQ_TYPE_F32;
    lmq_context *c = NULL;
    T_CHECK(lmq_context_new(m, &p, &c) == LMQ_OK, "context: %s", lmq_last_error());
    return c;
}

/* Evaluates toks[from..n) in batches of `batch`, every position's logits
 * against ref; returns the largest error relative to each row's largest logit. */
static double eval_range(lmq_context *c, const int *toks, int from, int n, int batch, const double *ref)
{
    double e = 0;
    for (int p = from; p < n; p += batch) {
        const int k = n - p < batch ? n - p : batch;
        int32_t t[N_TOK];
        for (int i = 0; i < k; i++) t[i] = toks[p + i];
        if (lmq_eval(c, t, k, k) != LMQ_OK) {
            T_CHECK(0, "eval at %d: %s", p, lmq_last_error());
            return 1e9;
        }
        for (int i = 0; i < k; i++) {
            const double x = max_err(lmq_logits(c, i), ref + (size_t)(p + i) * VOCAB);
            if (x > e) e = x;
        }
    }
    return e;
}

static void check_model(const gcfg *c, const weights *w, const char *path, double *worst)
{
    lmq_model *m = NULL;
    if (lmq_model_load(path, &m) != LMQ_OK) {
        T_CHECK(0, "%s: load %s: %s", c->label, path, lmq_last_error());
        return;
    }
    int toks[N_TOK], toks2[N_TOK];
    for (int i = 0; i < N_TOK; i++) toks[i] = toks2[i] = (int)((i * 977u + 13u) % VOCAB);
    const int cut = N_TOK - 6;
    for (int i = cut; i < N_TOK; i++) toks2[i] = (int)((i * 331u + 7u) % VOCAB); /* an edited continuation */
    double *ref = malloc((size_t)N_TOK * VOCAB * sizeof *ref), *ref2 = malloc((size_t)N_TOK * VOCAB * sizeof *ref2);
    ref_forward(c, w, toks, N_TOK, 0, ref);
    ref_forward(c, w, toks2, N_TOK, 0, ref2);
    /* f32 activations through 8 layers against doubles: measured at most 2.6e-5 of the largest logit */
    const double tol = 1e-4;
    double e;
    /* one batch, token by token, batches of 2 (rings of WIN + 1 slots) */
    const int batches[3] = {N_TOK, 1, 2};
    for (int b = 0; b < 3; b++) {
        lmq_context *ctx = new_ctx(m, batches[b]);
        e = eval_range(ctx, toks, 0, N_TOK, batches[b], ref);
        T_CHECK(e < tol, "%s: batch %d: max rel error %.3g (tol %.g)", c->label, batches[b], e, tol);
        if (e > *worst) *worst = e;
        lmq_context_free(ctx);
    }
    /* rewinds through the rings: one token back (the rings still hold what it needs), then back to `cut`
     * (they do not: lmq restarts where lmq_n_past says) with an edited continuation */
    lmq_context *ctx = new_ctx(m, 2);
    e = eval_range(ctx, toks, 0, N_TOK, 2, ref);
    T_CHECK(lmq_kv_truncate(ctx, N_TOK - 1) == LMQ_OK, "truncate: %s", lmq_last_error());
    T_CHECK(lmq_n_past(ctx) == N_TOK - 1, "%s: a one-token rewind inside the rings kept %d", c->label, lmq_n_past(ctx));
    double e2 = eval_range(ctx, toks, lmq_n_past(ctx), N_TOK, 2, ref);
    T_CHECK(lmq_kv_truncate(ctx, cut) == LMQ_OK, "truncate: %s", lmq_last_error());
    const int resume = lmq_n_past(ctx);
    T_CHECK(resume <= cut, "%s: rewind to %d resumed at %d", c->label, cut, resume);
    double e3 = eval_range(ctx, toks2, resume, N_TOK, 2, ref2);
    T_CHECK(e < tol && e2 < tol && e3 < tol, "%s: rewinds: %.3g %.3g %.3g (tol %.g; resumed at %d)", c->label, e, e2,
            e3, tol, resume);
    if (e3 > *worst) *worst = e3;
    lmq_context_free(ctx);
    /* every feature broken in the reference moves the output far beyond the tolerance */
    ctx = new_ctx(m, N_TOK);
    int32_t t[N_TOK];
    for (int i = 0; i < N_TOK; i++) t[i] = toks[i];
    T_CHECK(lmq_eval(ctx, t, N_TOK, N_TOK) == LMQ_OK, "eval: %s", lmq_last_error());
    for (int b = 0; b < BRK_COUNT; b++) {
        if (!(c->breaks >> b & 1)) continue;
        ref_forward(c, w, toks, N_TOK, 1u << b, ref2);
        double eb = 0;
        for (int p = 0; p < N_TOK; p++) {
            const double x = max_err(lmq_logits(ctx, p), ref2 + (size_t)p * VOCAB);
            if (x > eb) eb = x;
        }
        T_CHECK(eb > 100 * tol, "%s: reference with '%s' still agrees (%.3g)", c->label, k_brk[b], eb);
        printf("  %s: broken '%s' -> %.3g\n", c->label, k_brk[b], eb);
    }
    lmq_context_free(ctx);
    free(ref);
    free(ref2);
    lmq_model_free(m);
}

/* KV bytes per token (f16) from the file's metadata, as `lmq info` prints them. */
static uint64_t kv_bytes(const char *path)
{
    lmq_file *f = NULL;
    uint64_t b = 0;
    const lmq_arch *a = lmq_arch_by_name("gemma4");
    lmq_arch_dims d;
    lmq_arch_layer geo[NL];
    if (lmq_file_open(path, &f) == LMQ_OK && !lmq_arch_dims_from_meta(lmq_file_meta(f), a, path, &d) &&
        d.n_layer == NL && !lmq_arch_layers(lmq_file_meta(f), a, &d, path, geo))
        b = lmq_arch_kv_bytes_per_token(&d, geo, NULL, 2);
    else
        T_CHECK(0, "%s: geometry: %s", path, lmq_last_error());
    lmq_file_close(f);
    return b;
}

static void last_logits(const char *path, float *out)
{
    lmq_model *m = NULL;
    T_CHECK(lmq_model_load(path, &m) == LMQ_OK, "load %s: %s", path, lmq_last_error());
    if (!m) return;
    lmq_context *c = new_ctx(m, 8);
    int32_t t[8] = {1, 450, 3402, 310, 278, 2472, 2989, 338};
    T_CHECK(lmq_eval(c, t, 8, 1) == LMQ_OK, "eval: %s", lmq_last_error());
    memcpy(out, lmq_logits(c, 0), VOCAB * sizeof(float));
    lmq_context_free(c);
    lmq_model_free(m);
}

/* Quantize mixes: q8_0 with --token-embedding-type q6_k gives the per-layer
 * table q6_k (a token table, as ik_llama.cpp's llama-quantize treats it),
 * the PLE matrices q8_0, the layer scalar f32, and runs; the table alone in
 * q8_0 (the rest f32) moves the logits by little. (The random model is too
 * sharp for a whole-model bound: its logits sit at the soft-cap.) */
static void check_quantized(const gcfg *c, const char *lmq, const char *q8)
{
    lmq_quantize_opts q = {.mix = "q8_0", .output_type = LMQ_TYPE_COUNT, .token_embd_type = LMQ_TYPE_Q6_K,
                           .n_threads = 2};
    lmq_status s = lmq_quantize_model(lmq, q8, &q, NULL);
    T_CHECK(s == LMQ_OK, "%s: quantize: %s", c->label, lmq_last_error());
    if (s) return;
    lmq_file *f = NULL;
    T_CHECK(lmq_file_open(q8, &f) == LMQ_OK, "open %s", q8);
    if (!f) return;
    const lmq_tensor_info *t = lmq_file_find_tensor(f, "per_layer_token_embd.weight"),
                          *g = lmq_file_find_tensor(f, "blk.0.inp_gate.weight"),
                          *sc = lmq_file_find_tensor(f, "blk.0.layer_output_scale.weight");
    T_CHECK(t && t->type == LMQ_TYPE_Q6_K, "%s: per_layer_token_embd is %s, not the token table's q6_k", c->label,
            t ? lmq_type_name(t->type) : "missing");
    T_CHECK(g && g->type == LMQ_TYPE_Q8_0 && sc && sc->type == LMQ_TYPE_F32, "%s: inp_gate %s, layer scalar %s",
            c->label, g ? lmq_type_name(g->type) : "-", sc ? lmq_type_name(sc->type) : "-");
    lmq_file_close(f);
    static float a[VOCAB], b[VOCAB];
    last_logits(q8, b);
    bool finite = true;
    for (int i = 0; i < VOCAB; i++) finite &= isfinite(b[i]);
    T_CHECK(finite, "%s: q8_0 model gives non-finite logits", c->label);
    static const struct lmq_mix_override only_table = {"per_layer_token_embd", LMQ_TYPE_Q8_0};
    lmq_quantize_opts q2 = {.mix = "f32", .output_type = LMQ_TYPE_COUNT, .token_embd_type = LMQ_TYPE_COUNT,
                            .overrides = &only_table, .n_overrides = 1, .n_threads = 2};
    T_CHECK(lmq_quantize_model(lmq, q8, &q2, NULL) == LMQ_OK, "%s: quantize: %s", c->label, lmq_last_error());
    last_logits(lmq, a);
    last_logits(q8, b);
    double e = 0, mx = 0;
    for (int i = 0; i < VOCAB; i++) {
        if (fabs(a[i]) > mx) mx = fabs(a[i]);
        if (fabs(a[i] - b[i]) > e) e = fabs(a[i] - b[i]);
    }
    T_CHECK(e / mx < 1e-2 && e > 0, "%s: the table in q8_0 moves the logits by %.3g of the largest", c->label, e / mx);
    printf("  %s: per-layer table in q8_0: max logit change %.3g of the largest\n", c->label, e / mx);
}

static void run(const gcfg *c, uint64_t want_kv, double *worst, float *last)
{
    char dir[1024], lmq[1024], gguf[1024], q8[1024];
    k_swa = c->swa ? c->swa : k_swa_e2b;
    snprintf(dir, sizeof dir, "%s", t_tmp(c->label));
    snprintf(lmq, sizeof lmq, "%s.lmq", dir);
    snprintf(gguf, sizeof gguf, "%s.gguf", dir);
    snprintf(q8, sizeof q8, "%s-q8_0.lmq", dir);
    weights w;
    make_weights(c, &w);
    T_CHECK(make_dir(c, dir), "%s: write %s", c->label, dir);
    lmq_convert_opts o = {.out_type = LMQ_CONVERT_TYPE_AUTO, .codec = LMQ_CODEC_NONE, .n_threads = 2};
    lmq_status s = lmq_convert_hf(dir, lmq, &o, NULL);
    T_CHECK(s == LMQ_OK, "%s: convert: %s", c->label, lmq_last_error());
    if (s) {
        free_weights();
        return;
    }
    const uint64_t kvb = kv_bytes(lmq);
    T_CHECK(kvb == want_kv, "%s: KV bytes per token %llu, expected %llu", c->label, (unsigned long long)kvb,
            (unsigned long long)want_kv);
    check_model(c, &w, lmq, worst);
    if (last) last_logits(lmq, last);
    if (c->ple) check_quantized(c, lmq, q8);
    /* GGUF export (llama.cpp's gemma4 names and keys) loads with the same logits */
    s = lmq_export_gguf(lmq, gguf, NULL, NULL);
    if (c->swa == k_swa_swapped) {
        t_check_error("export with llama.cpp's shared-KV layers elsewhere", s, LMQ_ERR_UNSUPPORTED,
                      "shared-KV layer", "cannot load");
        T_CHECK(!t_exists(gguf), "%s: a refused export left %s", c->label, gguf);
        free_weights();
        return;
    }
    T_CHECK(s == LMQ_OK, "%s: export: %s", c->label, lmq_last_error());
    if (!s) {
        static float a[VOCAB], b[VOCAB];
        last_logits(lmq, a);
        last_logits(gguf, b);
        T_CHECK(!memcmp(a, b, sizeof a), "%s: the exported GGUF gives other logits", c->label);
        /* and imported back into a .lmq */
        char back[1100];
        snprintf(back, sizeof back, "%s-back.lmq", dir);
        T_CHECK(lmq_convert_gguf(gguf, back, NULL, NULL) == LMQ_OK, "%s: import: %s", c->label, lmq_last_error());
        last_logits(back, b);
        T_CHECK(!memcmp(a, b, sizeof a), "%s: the GGUF imported back gives other logits", c->label);
        T_CHECK(kv_bytes(back) == want_kv, "%s: KV bytes after the round trip", c->label);
        /* the tokenizer: gemma4 (Gemma 4's tokenizer.json) or llama (tokenizer.model) through all three */
        int32_t ia[64], ib[64], ic[64];
        const char *ma = "", *mb = "", *mc = "";
        size_t na = file_ids(lmq, ia, &ma), nb = file_ids(gguf, ib, &mb), nc = file_ids(back, ic, &mc);
        T_CHECK(!strcmp(ma, c->text_only ? "llama" : "gemma4") && !strcmp(mb, ma) && !strcmp(mc, ma),
                "%s: tokenizer model %s / %s / %s", c->label, ma, mb, mc);
        T_CHECK(na > 10 && ia[0] == (c->text_only ? 1 : 2) && na == nb && na == nc &&
                    !memcmp(ia, ib, na * sizeof *ia) && !memcmp(ia, ic, na * sizeof *ia),
                "%s: the same %zu ids from the .lmq, the GGUF and the GGUF imported back (%zu, %zu)", c->label, na, nb,
                nc);
        lmq_file *f = NULL;
        T_CHECK(lmq_file_open(gguf, &f) == LMQ_OK, "open %s", gguf);
        if (f) {
            const lmq_meta *m = lmq_file_meta(f);
            T_CHECK(lmq_file_find_tensor(f, "rope_freqs.weight") && lmq_meta_find(m, "gemma4.attention.key_length_swa") &&
                        lmq_meta_find(m, "gemma4.attention.sliding_window_pattern") &&
                        !lmq_meta_find(m, "lmq.rope.freq_factors"),
                    "%s: GGUF lacks llama.cpp's gemma4 keys or rope_freqs", c->label);
            T_CHECK(!c->ple || (lmq_file_find_tensor(f, "per_layer_token_embd.weight") &&
                                lmq_file_find_tensor(f, "blk.0.inp_gate.weight") &&
                                lmq_file_find_tensor(f, "blk.0.layer_output_scale.weight")),
                    "%s: GGUF lacks the PLE tensors", c->label);
            T_CHECK(!c->shared || !lmq_file_find_tensor(f, "blk.6.attn_k.weight"), "%s: a shared layer has attn_k",
                    c->label);
            /* experts: llama.cpp's fused gate|up (the runtime reads it as strided views) */
            const lmq_tensor_info *gu = lmq_file_find_tensor(f, "blk.1.ffn_gate_up_exps.weight");
            T_CHECK(!c->moe || (gu && gu->ne[1] == 2 * FE && gu->ne[2] == NE &&
                                !lmq_file_find_tensor(f, "blk.1.ffn_gate_exps.weight") &&
                                !lmq_file_find_tensor(f, "blk.1.ffn_up_exps.weight") &&
                                lmq_file_find_tensor(f, "blk.1.ffn_gate_inp.scale") &&
                                lmq_file_find_tensor(f, "blk.1.ffn_down_exps.scale")),
                    "%s: GGUF experts are not llama.cpp's", c->label);
            lmq_file_close(f);
        }
    }
    free_weights();
}

int main(void)
{
    t_require(t_shared("models/llama-8m-debtext/tokenizer.model"));
    double worst = 0;
    /* E2B-like: PLE, 4 shared-KV layers (sources 2 and 3), double-wide MLPs on them; one KV head.
     * Cache: layers 0-3 own one (3 sliding of 16, 1 global of 32): 2 (3 16 + 32) 2 bytes = 320 per token
     * instead of 2 (6 16 + 2 32) 2 = 640. */
    const gcfg dense = {.label = "gemma4-e2b-like", .ple = true, .shared = 4, .kv = 1, .kv_g = 1, .wide = true,
                        .breaks = BRK_PLE | BRK_SCALAR | BRK_DONOR | BRK_PLUS1 | BRK_QSCALE | BRK_VNORM | BRK_PROP |
                                  BRK_SOFTCAP | BRK_WINDOW};
    static float multimodal[VOCAB], text_only[VOCAB];
    run(&dense, 320, &worst, multimodal);
    /* the same model as Gemma4ForCausalLM (flat config, model.* names) */
    gcfg flat = dense;
    flat.label = "gemma4-text-only";
    flat.text_only = true;
    flat.breaks = 0;
    run(&flat, 320, &worst, text_only);
    T_CHECK(!memcmp(multimodal, text_only, sizeof multimodal), "the text-only layout gives other logits");
    /* 26B-A4B-like: experts beside the dense MLP, routed from the residual; K = V global layers */
    const gcfg moe = {.label = "gemma4-moe", .moe = true, .keqv = true, .kv = 2, .kv_g = 1,
                      .breaks = BRK_ROUTER_IN | BRK_EXP_SCALE | BRK_MOE_NORMS | BRK_KEQV};
    run(&moe, 2 * (6 * 2 * HD + 2 * HDG) * 2, &worst, NULL);
    /* shared-KV sources that llama.cpp cannot express: runs against the reference, export refuses */
    gcfg swapped = dense;
    swapped.label = "gemma4-swapped-kinds";
    swapped.swa = k_swa_swapped;
    swapped.breaks = BRK_DONOR;
    run(&swapped, 2 * (3 * HD + 32) * 2, &worst, NULL);
    /* 31B-like: K = V on the global layers with 2 KV heads there (1 on sliding ones), no PLE, no sharing */
    const gcfg keqv = {.label = "gemma4-keqv", .keqv = true, .kv = 1, .kv_g = 2,
                       .breaks = BRK_SCALAR | BRK_VNORM | BRK_KEQV | BRK_PROP};
    run(&keqv, 2 * (6 * HD + 2 * 2 * HDG) * 2, &worst, NULL);
    printf("gemma4: largest relative error against the double-precision reference %.3g\n", worst);
    return t_finish();
}
