/* Every block feature of the families (formats/arch.c) against an
 * independent double-precision reference forward on tiny random models:
 * q/k/v/o biases, q/k RMSNorm per head and over the whole projection,
 * explicit head_dim != n_embd / n_head, sandwich norms, tanh-GeGLU, fused
 * qkv and gate|up, partial rotary, LongRoPE (factors, attention factor,
 * long/short choice), linear RoPE scaling on global layers only, a separate
 * RoPE base for sliding layers, per-layer sliding windows (ring caches with
 * a small batch, rewinds inside and beyond what the ring holds), attention
 * and final soft-caps, embedding and query scales, experts (softmax, top-k,
 * renormalised or not, dense layers between, a shared expert).
 *
 * Qwen3.5 hybrids (SPEC.md 1.5): Gated DeltaNet layers (fused q|k|v, the
 * causal conv and its state, L2 norms, beta, decay from A and dt_bias, the
 * delta rule written in its textbook form, value head j reading key head
 * j % nk, nk != nv, dk != dv, the gated per-head output norm), layer kinds
 * from lmq.layer.recurrent, full_attention_interval or its default, gated
 * attention (q rows per head [q, gate]) with per-head q/k norms and partial
 * RoPE, the pre-FFN norm named post_attention_norm, experts with a shared
 * expert and no feed_forward_length; the state carried across calls, and
 * rewinds through its snapshots (resuming from lmq_n_past()).
 * gpt-oss (SPEC.md 2.4): q/k/v/o biases, attention sinks (also with more
 * heads per KV head than one attention tile takes), the family's window on
 * even layers, YaRN (correction range truncated or not, beta keys, the
 * attention factor), router bias, top-k on raw logits then softmax over
 * the k, expert biases, the clamped SwiGLU (the reference counts the
 * clamps it hits).
 *
 * Each model is evaluated in one batch, token by token, and in small
 * batches through the rings. Each feature added with the hybrids and
 * gpt-oss is also switched off in the reference once (feat.breaks): lmq's
 * output must then differ by far more than the tolerance, so the check can
 * fail. (The earlier features were each broken on purpose once by hand.) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_runtime.h"
#include "testutil.h"

#define VOCAB 61
#define N_TOK 21
#define MAXL 4
#define MAXE 16 /* experts */

/* Features the reference can switch off (feat.breaks, check_breaks). */
enum {
    BRK_HEAD_ORDER = 1 << 0,  /* value head j reads key head j / (nv/nk) (grouped, Hugging Face's order) */
    BRK_ATTN_GATE = 1 << 1,   /* attention output not gated */
    BRK_DECAY = 1 << 2,       /* the delta rule without the decay */
    BRK_SINKS = 1 << 3,       /* no attention sinks */
    BRK_CLAMP = 1 << 4,       /* SwiGLU without the clamps */
    BRK_YARN_TRUNC = 1 << 5,  /* YaRN's correction range truncated the other way */
    BRK_ROUTER_BIAS = 1 << 6, /* router without its bias */
    BRK_WINDOW = 1 << 7,      /* the window on the other layers */
    BRK_EXP_BIAS = 1 << 8,    /* experts without their biases */
    BRK_SHEXP = 1 << 9,       /* no shared expert */
    BRK_YARN_MSCALE = 1 << 10,/* YaRN without its attention factor on cos and sin */
    BRK_NOPE = 1 << 11,       /* RoPE on the NoPE layers too */
    BRK_TEMP = 1 << 12,       /* no query temperature */
    BRK_COUNT = 13
};
static const char *const k_break_names[BRK_COUNT] = {
    "grouped value-head order", "no attention output gate", "no decay", "no sinks", "no SwiGLU clamp",
    "YaRN truncation flipped", "no router bias", "window on the other layers", "no expert biases", "no shared expert",
    "no YaRN attention factor", "RoPE on every layer", "no query temperature",
};

typedef struct feat {
    const char *label, *arch;
    int d, layers, heads, kv, hd, ff, n_rot; /* ff 0: no feed_forward_length key */
    bool bias_qkv, bias_o, sandwich, gelu, fused, tied, embd_scale, longrope;
    int qk_norm;             /* 0 none, 1 per head, 2 whole projection */
    int swa;                 /* window (keys incl. the current one), 0 none */
    bool swa_layer[MAXL];    /* written as lmq.attention.sliding_window_layers */
    bool swa_implicit;       /* the family's pattern instead: the key is not written */
    float attn_cap, final_cap, qscale; /* qscale 0: 1/sqrt(hd) */
    float theta, theta_swa;  /* theta_swa 0: same */
    float linear;            /* linear RoPE factor (global layers only when theta_swa) */
    int orig_ctx;            /* LongRoPE / YaRN original context */
    float yarn;              /* YaRN factor, 0: none */
    float beta_fast, beta_slow; /* YaRN correction range, written when > 0 (else 32 and 1) */
    bool yarn_no_trunc;      /* lmq.rope.yarn_truncate = false */
    int n_exp, k_exp, ff_exp;/* mixture of experts (n_exp 0: dense) */
    bool exp_norm;           /* renormalise the k weights */
    bool write_norm_key;     /* write <arch>.expert_weights_norm */
    unsigned dense_mask;     /* MoE models: layers (bits) that keep a dense FFN */
    int ff_sh;               /* shared expert width (Qwen2-MoE, Qwen3.5-MoE), 0: none */
    bool oai;                /* gpt-oss experts: router bias, top-k on raw logits then softmax over the k,
                              * expert biases, clamped SwiGLU */
    bool sinks;              /* attention sinks */
    bool attn_gate;          /* q rows per head [q (hd), gate (hd)]: output * sigmoid(gate) */
    bool ffn_norm_pan;       /* the pre-FFN norm is named post_attention_norm.weight */
    float eps;               /* RMSNorm epsilon, 0: 1e-5 */
    int nk, nv, dk, dv, conv;/* Gated DeltaNet heads, head sizes, conv kernel (nv 0: no recurrent layers) */
    bool rec[MAXL];          /* recurrent layers */
    int rec_key;             /* kinds written as: 0 nothing (interval 4), > 0 full_attention_interval,
                              * -1 lmq.layer.recurrent */
    unsigned nope;           /* layers (bits) without RoPE (SmolLM3) */
    float yarn_af;           /* YaRN's attention factor on cos and sin (Hugging Face's; written as llama.cpp's
                              * rope.scaling.attn_factor = yarn_af / (1 + 0.1 ln factor)), 0: 1 + 0.1 ln factor */
    float temp_beta;         /* Llama 4's query temperature (Ministral 3): q *= 1 + beta ln(1 + floor(pos / orig_ctx)) */
    int kv_l[MAXL], ff_l[MAXL]; /* per-layer KV heads and FFN widths (0: kv, ff), written as arrays */
    bool nope_implicit;      /* not written: the family's every-4th-layer rule */
    unsigned breaks;         /* BRK_* the reference switches off once */
} feat;

typedef struct model_w {
    float *embd, *out, *onorm, *lf, *sf;
    float *q[MAXL], *k[MAXL], *v[MAXL], *o[MAXL], *g[MAXL], *u[MAXL], *dn[MAXL];
    float *an[MAXL], *fn[MAXL], *pan[MAXL], *pfn[MAXL], *qn[MAXL], *kn[MAXL];
    float *bq[MAXL], *bk[MAXL], *bv[MAXL], *bo[MAXL];
    float *router[MAXL], *eg[MAXL], *eu[MAXL], *ed[MAXL]; /* experts stacked: [n_exp][rows][cols] */
    float *sg[MAXL], *su[MAXL], *sd[MAXL], *sgate[MAXL];   /* shared expert and its gate vector */
    float *sinks[MAXL];                                    /* (heads) */
    float *rb[MAXL], *egb[MAXL], *eub[MAXL], *edb[MAXL];   /* router bias (E), expert biases [E][ff_exp or d] */
    /* Gated DeltaNet: C = 2 nk dk + nv dv channels, inner = nv dv */
    float *qkv[MAXL], *z[MAXL], *beta[MAXL], *alpha[MAXL]; /* (C x d), (inner x d), (nv x d) x2 */
    float *conv[MAXL];                                     /* (C x K) taps, the last one on the current token */
    float *dt[MAXL], *A[MAXL], *snorm[MAXL], *sout[MAXL];  /* (nv), (nv) = -exp(A_log), (dv), (d x inner) */
} model_w;

static bool is_moe(const feat *f, int l)
{
    return f->n_exp > 0 && !(f->dense_mask >> l & 1);
}

static bool is_rec(const feat *f, int l)
{
    return f->nv > 0 && f->rec[l];
}

static int n_chan(const feat *f)
{
    return 2 * f->nk * f->dk + f->nv * f->dv;
}

static double feps(const feat *f)
{
    return f->eps > 0 ? f->eps : 1e-5;
}

/* Layer l's KV heads and FFN width. */
static int fkv(const feat *f, int l) { return f->kv_l[l] > 0 ? f->kv_l[l] : f->kv; }
static int fff(const feat *f, int l) { return f->ff_l[l] > 0 ? f->ff_l[l] : f->ff; }

static uint32_t rng = 88172645u;
static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return (float)((rng & 0xffffff) / 16777216.0 - 0.5);
}

static float *rnd(size_t n, float scale, float add)
{
    float *p = malloc(n ? n * sizeof(float) : 1);
    for (size_t i = 0; i < n; i++) p[i] = frand() * scale + add;
    return p;
}

static void make_rec(const feat *f, model_w *w, int l)
{
    const int d = f->d, C = n_chan(f), inner = f->nv * f->dv;
    w->qkv[l] = rnd((size_t)C * d, 0.5f, 0);
    w->z[l] = rnd((size_t)inner * d, 0.5f, 0);
    w->beta[l] = rnd((size_t)f->nv * d, 0.5f, 0);
    w->alpha[l] = rnd((size_t)f->nv * d, 0.5f, 0);
    w->conv[l] = rnd((size_t)C * f->conv, 1.2f, 0);
    w->dt[l] = rnd(f->nv, 1.0f, 0);
    w->A[l] = rnd(f->nv, 2.0f, -2.0f); /* A_log in [-3, -1]: decays of 0.75 to 0.97, a state that lasts */
    for (int i = 0; i < f->nv; i++) w->A[l][i] = -expf(w->A[l][i]);
    w->snorm[l] = rnd(f->dv, 0.3f, 1);
    w->sout[l] = rnd((size_t)d * inner, 0.4f, 0);
}

static void make(const feat *f, model_w *w)
{
    memset(w, 0, sizeof *w);
    const int qd = f->heads * f->hd;
    w->embd = rnd((size_t)VOCAB * f->d, 1.0f, 0);
    w->out = f->tied ? w->embd : rnd((size_t)VOCAB * f->d, 0.5f, 0);
    w->onorm = rnd(f->d, 0.4f, 1);
    if (f->longrope) {
        w->lf = rnd(f->n_rot / 2, 3.0f, 2.6f); /* positive divisors */
        w->sf = rnd(f->n_rot / 2, 0.6f, 1.4f);
    }
    for (int l = 0; l < f->layers; l++) {
        const bool rec = is_rec(f, l);
        const int kvd = fkv(f, l) * f->hd, ff = fff(f, l);
        if (!rec) {
            w->q[l] = rnd((size_t)(f->attn_gate ? 2 : 1) * qd * f->d, 0.5f, 0);
            w->k[l] = rnd((size_t)kvd * f->d, 0.5f, 0);
            w->v[l] = rnd((size_t)kvd * f->d, 0.5f, 0);
            w->o[l] = rnd((size_t)f->d * qd, 0.4f, 0);
        }
        w->g[l] = rnd((size_t)ff * f->d, 0.5f, 0);
        w->u[l] = rnd((size_t)ff * f->d, 0.5f, 0);
        w->dn[l] = rnd((size_t)f->d * ff, 0.4f, 0);
        w->an[l] = rnd(f->d, 0.3f, 1);
        w->fn[l] = rnd(f->d, 0.3f, 1);
        if (rec) make_rec(f, w, l);
        if (f->sandwich) w->pan[l] = rnd(f->d, 0.3f, 1), w->pfn[l] = rnd(f->d, 0.3f, 1);
        if (f->qk_norm && !rec) {
            w->qn[l] = rnd(f->qk_norm == 1 ? f->hd : qd, 0.4f, 1);
            w->kn[l] = rnd(f->qk_norm == 1 ? f->hd : kvd, 0.4f, 1);
        }
        if (f->bias_qkv) w->bq[l] = rnd(qd, 0.6f, 0), w->bk[l] = rnd(kvd, 0.6f, 0), w->bv[l] = rnd(kvd, 0.6f, 0);
        if (f->bias_o) w->bo[l] = rnd(f->d, 0.6f, 0);
        if (is_moe(f, l)) {
            /* gpt-oss: gate and up rows large enough that min(g, 7) and clamp(u, -7, 7) are hit */
            const float gu = f->oai ? 3.0f : 0.5f, dw = f->oai ? 0.08f : 0.4f;
            w->router[l] = rnd((size_t)f->n_exp * f->d, 1.5f, 0);
            w->eg[l] = rnd((size_t)f->n_exp * f->ff_exp * f->d, gu, 0);
            w->eu[l] = rnd((size_t)f->n_exp * f->ff_exp * f->d, gu, 0);
            w->ed[l] = rnd((size_t)f->n_exp * f->d * f->ff_exp, dw, 0);
            if (f->ff_sh) {
                w->sg[l] = rnd((size_t)f->ff_sh * f->d, 0.5f, 0);
                w->su[l] = rnd((size_t)f->ff_sh * f->d, 0.5f, 0);
                w->sd[l] = rnd((size_t)f->d * f->ff_sh, 0.4f, 0);
                w->sgate[l] = rnd(f->d, 1.0f, 0);
            }
            if (f->oai) {
                w->rb[l] = rnd(f->n_exp, 2.0f, 0);
                w->egb[l] = rnd((size_t)f->n_exp * f->ff_exp, 4.0f, 0);
                w->eub[l] = rnd((size_t)f->n_exp * f->ff_exp, 4.0f, 0);
                w->edb[l] = rnd((size_t)f->n_exp * f->d, 1.0f, 0);
            }
        }
        if (f->sinks) w->sinks[l] = rnd(f->heads, 3.0f, 0.5f);
    }
}

static void unmake(const feat *f, model_w *w)
{
    for (int l = 0; l < f->layers; l++) {
        float *all[] = {w->q[l], w->k[l], w->v[l], w->o[l], w->g[l], w->u[l], w->dn[l], w->an[l], w->fn[l],
                        w->pan[l], w->pfn[l], w->qn[l], w->kn[l], w->bq[l], w->bk[l], w->bv[l], w->bo[l],
                        w->router[l], w->eg[l], w->eu[l], w->ed[l], w->sg[l], w->su[l], w->sd[l], w->sgate[l],
                        w->sinks[l], w->rb[l], w->egb[l], w->eub[l], w->edb[l], w->qkv[l], w->z[l], w->beta[l],
                        w->alpha[l], w->conv[l], w->dt[l], w->A[l], w->snorm[l], w->sout[l]};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    }
    if (w->out != w->embd) free(w->out);
    free(w->embd);
    free(w->onorm);
    free(w->lf);
    free(w->sf);
}

static void add(lmq_writer *wr, const char *name, const float *data, int64_t in, int64_t out)
{
    int64_t ne[2] = {in, out};
    lmq_status s = lmq_writer_add_tensor(wr, name, LMQ_TYPE_F32, out > 0 ? 2 : 1, ne, data,
                                         (uint64_t)(in * (out > 0 ? out : 1) * 4));
    T_CHECK(s == LMQ_OK, "add %s: %s", name, lmq_last_error());
}

static void add3(lmq_writer *wr, const char *name, const float *data, int64_t in, int64_t out, int64_t n)
{
    int64_t ne[3] = {in, out, n};
    lmq_status s = lmq_writer_add_tensor(wr, name, LMQ_TYPE_F32, 3, ne, data, (uint64_t)(in * out * n * 4));
    T_CHECK(s == LMQ_OK, "add %s: %s", name, lmq_last_error());
}

static void key_u32(lmq_meta *m, const feat *f, const char *sfx, uint32_t v)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", f->arch, sfx);
    lmq_meta_set_u32(m, k, v);
}

static void key_f32(lmq_meta *m, const feat *f, const char *sfx, float v)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", f->arch, sfx);
    lmq_meta_set_f32(m, k, v);
}

static void key_str(lmq_meta *m, const feat *f, const char *sfx, const char *v)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", f->arch, sfx);
    lmq_meta_set_str(m, k, v);
}

static void write_meta(const feat *f, lmq_meta *m)
{
    lmq_meta_set_str(m, "general.architecture", f->arch);
    key_u32(m, f, "block_count", f->layers);
    key_u32(m, f, "embedding_length", f->d);
    if (f->ff_l[0] > 0) {
        uint32_t v[MAXL];
        for (int l = 0; l < f->layers; l++) v[l] = (uint32_t)fff(f, l);
        char k[96];
        snprintf(k, sizeof k, "%s.feed_forward_length", f->arch);
        lmq_meta_set_arr(m, k, LMQ_V_U32, v, (uint64_t)f->layers);
    } else if (f->ff) {
        key_u32(m, f, "feed_forward_length", f->ff);
    }
    key_u32(m, f, "attention.head_count", f->heads);
    if (f->kv_l[0] > 0) {
        uint32_t v[MAXL];
        for (int l = 0; l < f->layers; l++) v[l] = (uint32_t)fkv(f, l);
        char k[96];
        snprintf(k, sizeof k, "%s.attention.head_count_kv", f->arch);
        lmq_meta_set_arr(m, k, LMQ_V_U32, v, (uint64_t)f->layers);
    } else {
        key_u32(m, f, "attention.head_count_kv", f->kv);
    }
    key_u32(m, f, "attention.key_length", f->hd);
    key_u32(m, f, "attention.value_length", f->hd);
    key_u32(m, f, "rope.dimension_count", f->n_rot);
    key_u32(m, f, "context_length", 64);
    key_f32(m, f, "attention.layer_norm_rms_epsilon", (float)feps(f));
    key_f32(m, f, "rope.freq_base", f->theta);
    if (f->theta_swa > 0) key_f32(m, f, "rope.freq_base_swa", f->theta_swa);
    if (f->qscale > 0) key_f32(m, f, "attention.scale", f->qscale);
    if (f->attn_cap > 0) key_f32(m, f, "attn_logit_softcapping", f->attn_cap);
    if (f->final_cap > 0) key_f32(m, f, "final_logit_softcapping", f->final_cap);
    if (f->linear > 0) {
        key_str(m, f, "rope.scaling.type", "linear");
        key_f32(m, f, "rope.scaling.factor", f->linear);
    }
    if (f->longrope) {
        key_u32(m, f, "rope.scaling.original_context_length", (uint32_t)f->orig_ctx);
        key_f32(m, f, "rope.scaling.attn_factor", 1.25f);
    }
    if (f->yarn > 0) {
        key_str(m, f, "rope.scaling.type", "yarn");
        key_f32(m, f, "rope.scaling.factor", f->yarn);
        key_u32(m, f, "rope.scaling.original_context_length", (uint32_t)f->orig_ctx);
        if (f->beta_fast > 0) key_f32(m, f, "rope.scaling.yarn_beta_fast", f->beta_fast);
        if (f->beta_slow > 0) key_f32(m, f, "rope.scaling.yarn_beta_slow", f->beta_slow);
        if (f->yarn_no_trunc) lmq_meta_set_bool(m, "lmq.rope.yarn_truncate", false);
        if (f->yarn_af > 0) key_f32(m, f, "rope.scaling.attn_factor", f->yarn_af / (1.0f + 0.1f * logf(f->yarn)));
    }
    if (f->temp_beta > 0) key_f32(m, f, "attention.temperature_scale", f->temp_beta);
    if (f->nope && !f->nope_implicit) {
        bool nl[MAXL] = {false};
        for (int l = 0; l < f->layers; l++) nl[l] = f->nope >> l & 1;
        lmq_meta_set_arr(m, "lmq.rope.nope_layers", LMQ_V_BOOL, nl, (uint64_t)f->layers);
    }
    if (f->swa) {
        key_u32(m, f, "attention.sliding_window", (uint32_t)f->swa);
        if (!f->swa_implicit)
            lmq_meta_set_arr(m, "lmq.attention.sliding_window_layers", LMQ_V_BOOL, f->swa_layer, (uint64_t)f->layers);
    }
    if (f->n_exp) {
        key_u32(m, f, "expert_count", (uint32_t)f->n_exp);
        key_u32(m, f, "expert_used_count", (uint32_t)f->k_exp);
        key_u32(m, f, "expert_feed_forward_length", (uint32_t)f->ff_exp);
        if (f->ff_sh) key_u32(m, f, "expert_shared_feed_forward_length", (uint32_t)f->ff_sh);
        if (f->write_norm_key) {
            char k[128];
            snprintf(k, sizeof k, "%s.expert_weights_norm", f->arch);
            lmq_meta_set_bool(m, k, f->exp_norm);
        }
    }
    if (f->nv) {
        key_u32(m, f, "ssm.conv_kernel", (uint32_t)f->conv);
        key_u32(m, f, "ssm.state_size", (uint32_t)f->dk);
        key_u32(m, f, "ssm.group_count", (uint32_t)f->nk);
        key_u32(m, f, "ssm.time_step_rank", (uint32_t)f->nv);
        key_u32(m, f, "ssm.inner_size", (uint32_t)(f->nv * f->dv));
        if (f->rec_key > 0) key_u32(m, f, "full_attention_interval", (uint32_t)f->rec_key);
        if (f->rec_key < 0) lmq_meta_set_arr(m, "lmq.layer.recurrent", LMQ_V_BOOL, f->rec, (uint64_t)f->layers);
    }
    lmq_meta_set_str(m, "lmq.rope.layout", "neox");
}

#define T(sfx, data, in, out)                             \
    do {                                                  \
        snprintf(nm, sizeof nm, "blk.%d." sfx, l);        \
        add(wr, nm, data, in, out);                       \
    } while (0)
#define T3(sfx, data, in, out, n)                         \
    do {                                                  \
        snprintf(nm, sizeof nm, "blk.%d." sfx, l);        \
        add3(wr, nm, data, in, out, n);                   \
    } while (0)

static void write_attn(const feat *f, const model_w *w, int l, lmq_writer *wr)
{
    const int qd = f->heads * f->hd, kvd = fkv(f, l) * f->hd;
    char nm[64];
    if (f->fused) {
        float *qkv = malloc((size_t)(qd + 2 * kvd) * f->d * sizeof(float));
        memcpy(qkv, w->q[l], (size_t)qd * f->d * 4);
        memcpy(qkv + (size_t)qd * f->d, w->k[l], (size_t)kvd * f->d * 4);
        memcpy(qkv + (size_t)(qd + kvd) * f->d, w->v[l], (size_t)kvd * f->d * 4);
        T("attn_qkv.weight", qkv, f->d, qd + 2 * kvd);
        free(qkv);
    } else {
        T("attn_q.weight", w->q[l], f->d, (f->attn_gate ? 2 : 1) * qd);
        T("attn_k.weight", w->k[l], f->d, kvd);
        T("attn_v.weight", w->v[l], f->d, kvd);
    }
    T("attn_output.weight", w->o[l], qd, f->d);
    if (f->qk_norm) {
        T("attn_q_norm.weight", w->qn[l], f->qk_norm == 1 ? f->hd : qd, 0);
        T("attn_k_norm.weight", w->kn[l], f->qk_norm == 1 ? f->hd : kvd, 0);
    }
    if (f->bias_qkv) {
        T("attn_q.bias", w->bq[l], qd, 0);
        T("attn_k.bias", w->bk[l], kvd, 0);
        T("attn_v.bias", w->bv[l], kvd, 0);
    }
    if (f->bias_o) T("attn_output.bias", w->bo[l], f->d, 0);
    if (f->sinks) T("attn_sinks.weight", w->sinks[l], f->heads, 0);
}

static void write_rec(const feat *f, const model_w *w, int l, lmq_writer *wr)
{
    const int C = n_chan(f), inner = f->nv * f->dv;
    char nm[64];
    T("attn_qkv.weight", w->qkv[l], f->d, C);
    T("attn_gate.weight", w->z[l], f->d, inner);
    T("ssm_beta.weight", w->beta[l], f->d, f->nv);
    T("ssm_alpha.weight", w->alpha[l], f->d, f->nv);
    T("ssm_conv1d.weight", w->conv[l], f->conv, C);
    T("ssm_dt.bias", w->dt[l], f->nv, 0);
    T("ssm_a", w->A[l], f->nv, 0);
    T("ssm_norm.weight", w->snorm[l], f->dv, 0);
    T("ssm_out.weight", w->sout[l], inner, f->d);
}

static void write_ffn(const feat *f, const model_w *w, int l, lmq_writer *wr)
{
    char nm[64];
    if (!is_moe(f, l)) {
        if (f->fused) {
            float *gu = malloc((size_t)2 * fff(f, l) * f->d * sizeof(float));
            memcpy(gu, w->g[l], (size_t)fff(f, l) * f->d * 4);
            memcpy(gu + (size_t)fff(f, l) * f->d, w->u[l], (size_t)fff(f, l) * f->d * 4);
            T("ffn_up.weight", gu, f->d, 2 * fff(f, l));
            free(gu);
        } else {
            T("ffn_gate.weight", w->g[l], f->d, fff(f, l));
            T("ffn_up.weight", w->u[l], f->d, fff(f, l));
        }
        T("ffn_down.weight", w->dn[l], fff(f, l), f->d);
        return;
    }
    T("ffn_gate_inp.weight", w->router[l], f->d, f->n_exp);
    T3("ffn_gate_exps.weight", w->eg[l], f->d, f->ff_exp, f->n_exp);
    T3("ffn_up_exps.weight", w->eu[l], f->d, f->ff_exp, f->n_exp);
    T3("ffn_down_exps.weight", w->ed[l], f->ff_exp, f->d, f->n_exp);
    if (f->ff_sh) {
        T("ffn_gate_shexp.weight", w->sg[l], f->d, f->ff_sh);
        T("ffn_up_shexp.weight", w->su[l], f->d, f->ff_sh);
        T("ffn_down_shexp.weight", w->sd[l], f->ff_sh, f->d);
        T("ffn_gate_inp_shexp.weight", w->sgate[l], f->d, 0);
    }
    if (f->oai) {
        T("ffn_gate_inp.bias", w->rb[l], f->n_exp, 0);
        T("ffn_gate_exps.bias", w->egb[l], f->ff_exp, f->n_exp);
        T("ffn_up_exps.bias", w->eub[l], f->ff_exp, f->n_exp);
        T("ffn_down_exps.bias", w->edb[l], f->d, f->n_exp);
    }
}

static void write_model(const feat *f, const model_w *w, const char *path)
{
    lmq_writer *wr;
    T_CHECK(lmq_writer_open(path, NULL, &wr) == LMQ_OK, "writer");
    write_meta(f, lmq_writer_meta(wr));
    add(wr, "token_embd.weight", w->embd, f->d, VOCAB);
    if (!f->tied) add(wr, "output.weight", w->out, f->d, VOCAB);
    add(wr, "output_norm.weight", w->onorm, f->d, 0);
    if (f->longrope) {
        add(wr, "rope_factors_long.weight", w->lf, f->n_rot / 2, 0);
        add(wr, "rope_factors_short.weight", w->sf, f->n_rot / 2, 0);
    }
    char nm[64];
    for (int l = 0; l < f->layers; l++) {
        if (is_rec(f, l)) write_rec(f, w, l, wr);
        else write_attn(f, w, l, wr);
        write_ffn(f, w, l, wr);
        T("attn_norm.weight", w->an[l], f->d, 0);
        if (f->ffn_norm_pan) T("post_attention_norm.weight", w->fn[l], f->d, 0);
        else T("ffn_norm.weight", w->fn[l], f->d, 0);
        if (f->sandwich) {
            T("post_attention_norm.weight", w->pan[l], f->d, 0);
            T("post_ffw_norm.weight", w->pfn[l], f->d, 0);
        }
    }
    T_CHECK(lmq_writer_finish(wr) == LMQ_OK, "finish: %s", lmq_last_error());
}
#undef T
#undef T3

/* ------------------------------------------------ reference (double, whole sequence) */

typedef struct ref_stats {
    long n_act;                  /* clamped-SwiGLU activations computed */
    long g_hi, u_hi, u_lo;       /* of which g > 7, u > 7, u < -7 */
} ref_stats;

static void matvec(const float *W, const double *x, int in, int out, double *y)
{
    for (int o = 0; o < out; o++) {
        double s = 0;
        for (int i = 0; i < in; i++) s += (double)W[(size_t)o * in + i] * x[i];
        y[o] = s;
    }
}

static void rms(double *x, const float *w, int n, double eps)
{
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    double sc = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++) x[i] = x[i] * sc * w[i];
}

static double sigmoid(double x)
{
    return 1 / (1 + exp(-x));
}

/* YaRN (Hugging Face's _compute_yarn_parameters): the share of pair i that
 * keeps its original frequency, 1 below the correction range, 0 above it. */
static double yarn_extrapolation(const feat *f, int i, unsigned brk)
{
    const double dim = f->n_rot, base = f->theta, L0 = f->orig_ctx;
    const double bf = f->beta_fast > 0 ? f->beta_fast : 32, bs = f->beta_slow > 0 ? f->beta_slow : 1;
    double low = dim * log(L0 / (bf * 2 * M_PI)) / (2 * log(base));
    double high = dim * log(L0 / (bs * 2 * M_PI)) / (2 * log(base));
    if (f->yarn_no_trunc == !!(brk & BRK_YARN_TRUNC)) {
        low = floor(low);
        high = ceil(high);
    }
    low = low > 0 ? low : 0;
    high = high < dim - 1 ? high : dim - 1;
    if (low == high) high += 0.001;
    double ramp = (i - low) / (high - low);
    return 1 - (ramp < 0 ? 0 : ramp > 1 ? 1 : ramp);
}

/* neox pairs (i, i + n_rot/2) over the first n_rot dims of a head */
static void rope(double *v, const feat *f, int pos, bool swa, const float *factors, double mscale, unsigned brk)
{
    double theta = swa && f->theta_swa > 0 ? f->theta_swa : f->theta;
    bool scaled = !(swa && f->theta_swa > 0);
    for (int i = 0; i < f->n_rot / 2; i++) {
        double fr = pow(theta, -2.0 * i / f->n_rot);
        if (factors) fr /= factors[i];
        if (scaled && f->linear > 0) fr /= f->linear;
        if (f->yarn > 0) {
            const double ex = yarn_extrapolation(f, i, brk);
            fr = fr / f->yarn * (1 - ex) + fr * ex;
        }
        double a = pos * fr, c = cos(a) * mscale, s = sin(a) * mscale;
        double x0 = v[i], x1 = v[i + f->n_rot / 2];
        v[i] = x0 * c - x1 * s;
        v[i + f->n_rot / 2] = x0 * s + x1 * c;
    }
}

/* The attention block of layer l on the residual stream x (n tokens) into out. */
static void ref_attn(const feat *f, const model_w *w, int l, const double *x, int n, int n_ctx, unsigned brk,
                     double *out)
{
    const int d = f->d, hd = f->hd, qd = f->heads * hd, kvd = fkv(f, l) * hd, ph = f->attn_gate ? 2 * hd : hd;
    double *h = malloc(sizeof(double) * d), *P = malloc(sizeof(double) * 2 * qd);
    double *Q = malloc(sizeof(double) * (size_t)n * qd), *G = malloc(sizeof(double) * (size_t)n * qd);
    double *K = malloc(sizeof(double) * (size_t)n * kvd), *V = malloc(sizeof(double) * (size_t)n * kvd);
    double *a = malloc(sizeof(double) * qd), *sc = malloc(sizeof(double) * n);
    const bool swa = f->swa > 0 && f->swa_layer[l] != !!(brk & BRK_WINDOW);
    const float *factors = f->longrope ? (n_ctx > f->orig_ctx ? w->lf : w->sf) : NULL;
    const double mscale = f->longrope                                  ? 1.25
                          : f->yarn > 0 && f->yarn_af > 0           ? f->yarn_af
                          : f->yarn > 0 && !(brk & BRK_YARN_MSCALE) ? 1 + 0.1 * log(f->yarn)
                                                                     : 1.0;
    const double qs = f->qscale > 0 ? f->qscale : 1.0 / sqrt((double)hd);
    for (int t = 0; t < n; t++) {
        memcpy(h, x + (size_t)t * d, sizeof(double) * d);
        rms(h, w->an[l], d, feps(f));
        double *q = Q + (size_t)t * qd, *k = K + (size_t)t * kvd, *v = V + (size_t)t * kvd;
        matvec(w->q[l], h, d, f->heads * ph, P);
        for (int hh = 0; hh < f->heads; hh++) /* gated: per head [q, gate] */
            for (int i = 0; i < hd; i++) {
                q[hh * hd + i] = P[hh * ph + i];
                G[(size_t)t * qd + hh * hd + i] = f->attn_gate ? P[hh * ph + hd + i] : 0;
            }
        matvec(w->k[l], h, d, kvd, k);
        matvec(w->v[l], h, d, kvd, v);
        if (w->bq[l]) {
            for (int i = 0; i < qd; i++) q[i] += w->bq[l][i];
            for (int i = 0; i < kvd; i++) k[i] += w->bk[l][i], v[i] += w->bv[l][i];
        }
        if (f->qk_norm == 1) {
            for (int hh = 0; hh < f->heads; hh++) rms(q + hh * hd, w->qn[l], hd, feps(f));
            for (int hh = 0; hh < fkv(f, l); hh++) rms(k + hh * hd, w->kn[l], hd, feps(f));
        } else if (f->qk_norm == 2) {
            rms(q, w->qn[l], qd, feps(f));
            rms(k, w->kn[l], kvd, feps(f));
        }
        if ((f->nope >> l & 1) && !(brk & BRK_NOPE)) continue; /* NoPE layer: q and k as they are */
        for (int hh = 0; hh < f->heads; hh++) rope(q + hh * hd, f, t, swa, factors, mscale, brk);
        for (int hh = 0; hh < fkv(f, l); hh++) rope(k + hh * hd, f, t, swa, factors, mscale, brk);
        if (f->temp_beta > 0 && !(brk & BRK_TEMP)) {
            const double tsc = 1 + f->temp_beta * log(1 + floor((double)t / f->orig_ctx));
            for (int i = 0; i < qd; i++) q[i] *= tsc;
        }
    }
    for (int t = 0; t < n; t++) {
        int lo = swa && t - f->swa + 1 > 0 ? t - f->swa + 1 : 0;
        for (int hh = 0; hh < f->heads; hh++) {
            int kh = hh / (f->heads / fkv(f, l));
            double mx = -1e300, sum = 0;
            for (int j = lo; j <= t; j++) {
                double s = 0;
                for (int i = 0; i < hd; i++) s += Q[(size_t)t * qd + hh * hd + i] * K[(size_t)j * kvd + kh * hd + i];
                s *= qs;
                if (f->attn_cap > 0) s = f->attn_cap * tanh(s / f->attn_cap);
                sc[j] = s;
                if (s > mx) mx = s;
            }
            /* a sink: one more logit in the denominator, no value */
            const bool sink = f->sinks && !(brk & BRK_SINKS);
            if (sink && w->sinks[l][hh] > mx) mx = w->sinks[l][hh];
            for (int j = lo; j <= t; j++) sum += (sc[j] = exp(sc[j] - mx));
            if (sink) sum += exp(w->sinks[l][hh] - mx);
            for (int i = 0; i < hd; i++) {
                double acc = 0;
                for (int j = lo; j <= t; j++) acc += sc[j] / sum * V[(size_t)j * kvd + kh * hd + i];
                a[hh * hd + i] = acc;
            }
        }
        if (f->attn_gate && !(brk & BRK_ATTN_GATE))
            for (int i = 0; i < qd; i++) a[i] *= sigmoid(G[(size_t)t * qd + i]);
        matvec(w->o[l], a, qd, d, out + (size_t)t * d);
        if (w->bo[l])
            for (int i = 0; i < d; i++) out[(size_t)t * d + i] += w->bo[l][i];
    }
    free(h); free(P); free(Q); free(G); free(K); free(V); free(a); free(sc);
}

/* A Gated DeltaNet block (Hugging Face's Qwen3_5GatedDeltaNet with
 * torch_recurrent_gated_delta_rule, heads in the GGUF's tiled order) on x
 * (n tokens from the start of the sequence: zero conv history and state)
 * into out. */
static void ref_rec(const feat *f, const model_w *w, int l, const double *x, int n, unsigned brk, double *out)
{
    const int d = f->d, C = n_chan(f), nk = f->nk, nv = f->nv, dk = f->dk, dv = f->dv, K = f->conv;
    const int inner = nv * dv;
    double *h = malloc(sizeof(double) * d), *X = malloc(sizeof(double) * (size_t)n * C);
    double *Z = malloc(sizeof(double) * (size_t)n * inner), *B = malloc(sizeof(double) * (size_t)n * nv);
    double *Al = malloc(sizeof(double) * (size_t)n * nv), *u = malloc(sizeof(double) * C);
    double *S = calloc((size_t)nv * dk * dv, sizeof(double)), *m = malloc(sizeof(double) * dv);
    double *dl = malloc(sizeof(double) * dv), *y = malloc(sizeof(double) * inner);
    for (int t = 0; t < n; t++) {
        memcpy(h, x + (size_t)t * d, sizeof(double) * d);
        rms(h, w->an[l], d, feps(f));
        matvec(w->qkv[l], h, d, C, X + (size_t)t * C);
        matvec(w->z[l], h, d, inner, Z + (size_t)t * inner);
        matvec(w->beta[l], h, d, nv, B + (size_t)t * nv);
        matvec(w->alpha[l], h, d, nv, Al + (size_t)t * nv);
    }
    for (int t = 0; t < n; t++) {
        /* causal depthwise conv (zeros before the sequence), SiLU */
        for (int ch = 0; ch < C; ch++) {
            double s = 0;
            for (int j = 0; j < K; j++) {
                const int src = t - K + 1 + j;
                if (src >= 0) s += (double)w->conv[l][(size_t)ch * K + j] * X[(size_t)src * C + ch];
            }
            u[ch] = s * sigmoid(s);
        }
        /* q, k per key head: L2-normalised (eps 1e-6, Hugging Face's l2norm), q scaled by 1/sqrt(dk) */
        for (int part = 0; part < 2; part++)
            for (int hh = 0; hh < nk; hh++) {
                double *p = u + (size_t)part * nk * dk + (size_t)hh * dk, ss = 0;
                for (int i = 0; i < dk; i++) ss += p[i] * p[i];
                const double s = 1 / sqrt(ss + 1e-6) / (part == 0 ? sqrt((double)dk) : 1);
                for (int i = 0; i < dk; i++) p[i] *= s;
            }
        for (int j = 0; j < nv; j++) {
            const int kh = brk & BRK_HEAD_ORDER ? j / (nv / nk) : j % nk;
            const double *q = u + (size_t)kh * dk, *k = u + (size_t)nk * dk + (size_t)kh * dk;
            const double *v = u + 2 * (size_t)nk * dk + (size_t)j * dv;
            const double beta = sigmoid(B[(size_t)t * nv + j]);
            const double g = w->A[l][j] * log1p(exp(Al[(size_t)t * nv + j] + w->dt[l][j]));
            const double decay = brk & BRK_DECAY ? 1 : exp(g);
            double *Sj = S + (size_t)j * dk * dv; /* Sj[a * dv + b]: key dim a, value dim b */
            for (int i = 0; i < dk * dv; i++) Sj[i] *= decay;
            for (int b = 0; b < dv; b++) {
                m[b] = 0;
                for (int a = 0; a < dk; a++) m[b] += Sj[a * dv + b] * k[a];
                dl[b] = beta * (v[b] - m[b]);
            }
            for (int a = 0; a < dk; a++)
                for (int b = 0; b < dv; b++) Sj[a * dv + b] += k[a] * dl[b];
            double *o = y + (size_t)j * dv;
            for (int b = 0; b < dv; b++) {
                o[b] = 0;
                for (int a = 0; a < dk; a++) o[b] += Sj[a * dv + b] * q[a];
            }
            /* Qwen3_5RMSNormGated: rmsnorm(o) * weight * silu(z) */
            rms(o, w->snorm[l], dv, feps(f));
            for (int b = 0; b < dv; b++) {
                const double zz = Z[(size_t)t * inner + (size_t)j * dv + b];
                o[b] *= zz * sigmoid(zz);
            }
        }
        matvec(w->sout[l], y, inner, d, out + (size_t)t * d);
    }
    free(h); free(X); free(Z); free(B); free(Al); free(u); free(S); free(m); free(dl); free(y);
}

/* y = D (act(G h + bg) * (U h + bu)) + bd: SwiGLU, tanh-GeGLU or gpt-oss's
 * clamped SwiGLU (HF GptOssExperts: g = min(g, 7), u = clamp(u, -7, 7),
 * g * sigmoid(1.702 g) * (u + 1)); biases may be NULL. */
static void ref_mlp(const feat *f, const float *G, const float *U, const float *D, const float *bg, const float *bu,
                    const float *bd, int ff, const double *h, unsigned brk, ref_stats *st, double *y)
{
    const int d = f->d;
    double *g = malloc(sizeof(double) * ff), *u = malloc(sizeof(double) * ff);
    matvec(G, h, d, ff, g);
    matvec(U, h, d, ff, u);
    for (int i = 0; i < ff; i++) {
        double z = g[i] + (bg ? bg[i] : 0), up = u[i] + (bu ? bu[i] : 0);
        if (f->oai) {
            if (st) st->n_act++, st->g_hi += z > 7, st->u_hi += up > 7, st->u_lo += up < -7;
            if (!(brk & BRK_CLAMP)) {
                z = z < 7 ? z : 7;
                up = up < -7 ? -7 : up > 7 ? 7 : up;
            }
            g[i] = z * sigmoid(1.702 * z) * (up + 1);
        } else if (f->gelu) {
            g[i] = 0.5 * z * (1 + tanh(sqrt(2 / M_PI) * (z + 0.044715 * z * z * z))) * up;
        } else {
            g[i] = z * sigmoid(z) * up;
        }
    }
    matvec(D, g, ff, d, y);
    for (int i = 0; bd && i < d; i++) y[i] += bd[i];
    free(g);
    free(u);
}

/* The FFN of layer l on one normed row h into o: dense, or experts. */
static void ref_ffn(const feat *f, const model_w *w, int l, const double *h, unsigned brk, ref_stats *st, double *o)
{
    const int d = f->d, fe = f->ff_exp, E = f->n_exp;
    if (!is_moe(f, l)) {
        ref_mlp(f, w->g[l], w->u[l], w->dn[l], NULL, NULL, NULL, fff(f, l), h, brk, st, o);
        return;
    }
    /* router: softmax over all experts, top-k (ties: lower index), optional
     * renormalisation; gpt-oss: logits + bias, top-k of the raw logits,
     * softmax over the k */
    double pr[MAXE], mx = -1e300, sum = 0, wsum = 0, wk[MAXE];
    int sel[MAXE];
    matvec(w->router[l], h, d, E, pr);
    if (f->oai && !(brk & BRK_ROUTER_BIAS))
        for (int e = 0; e < E; e++) pr[e] += w->rb[l][e];
    if (!f->oai) {
        for (int e = 0; e < E; e++) mx = pr[e] > mx ? pr[e] : mx;
        for (int e = 0; e < E; e++) sum += (pr[e] = exp(pr[e] - mx));
        for (int e = 0; e < E; e++) pr[e] /= sum;
    }
    for (int j = 0; j < f->k_exp; j++) {
        int best = -1;
        for (int e = 0; e < E; e++) {
            bool taken = false;
            for (int q2 = 0; q2 < j; q2++) taken |= sel[q2] == e;
            if (!taken && (best < 0 || pr[e] > pr[best])) best = e;
        }
        sel[j] = best;
        wk[j] = f->oai ? exp(pr[best] - pr[sel[0]]) : pr[best];
        wsum += wk[j];
    }
    double *y = malloc(sizeof(double) * d);
    for (int i = 0; i < d; i++) o[i] = 0;
    for (int j = 0; j < f->k_exp; j++) {
        const int e = sel[j];
        const double wj = f->oai || f->exp_norm ? wk[j] / wsum : wk[j];
        const bool eb = f->oai && !(brk & BRK_EXP_BIAS);
        ref_mlp(f, w->eg[l] + (size_t)e * fe * d, w->eu[l] + (size_t)e * fe * d, w->ed[l] + (size_t)e * d * fe,
                eb ? w->egb[l] + (size_t)e * fe : NULL, eb ? w->eub[l] + (size_t)e * fe : NULL,
                eb ? w->edb[l] + (size_t)e * d : NULL, fe, h, brk, st, y);
        for (int i = 0; i < d; i++) o[i] += wj * y[i];
    }
    if (f->ff_sh && !(brk & BRK_SHEXP)) { /* shared expert times sigmoid(h . gate) */
        double z = 0;
        ref_mlp(f, w->sg[l], w->su[l], w->sd[l], NULL, NULL, NULL, f->ff_sh, h, brk, st, y);
        for (int i = 0; i < d; i++) z += h[i] * w->sgate[l][i];
        for (int i = 0; i < d; i++) o[i] += y[i] * sigmoid(z);
    }
    free(y);
}

/* Logits of toks[0..n) with the features in `brk` switched off; clamp
 * counts into st (may be NULL). */
static void ref_forward(const feat *f, const model_w *w, const int *toks, int n, int n_ctx, unsigned brk,
                        ref_stats *st, double *logits)
{
    const int d = f->d;
    double *x = calloc((size_t)n * d, sizeof(double)), *blk = malloc(sizeof(double) * (size_t)n * d);
    double *h = malloc(sizeof(double) * d), *o = malloc(sizeof(double) * d);
    const double es = f->embd_scale ? sqrt((double)d) : 1.0;
    for (int t = 0; t < n; t++)
        for (int i = 0; i < d; i++) x[(size_t)t * d + i] = w->embd[(size_t)toks[t] * d + i] * es;
    for (int l = 0; l < f->layers; l++) {
        if (is_rec(f, l)) ref_rec(f, w, l, x, n, brk, blk);
        else ref_attn(f, w, l, x, n, n_ctx, brk, blk);
        for (int t = 0; t < n; t++) {
            double *xt = x + (size_t)t * d;
            memcpy(o, blk + (size_t)t * d, sizeof(double) * d);
            if (f->sandwich) rms(o, w->pan[l], d, feps(f));
            for (int i = 0; i < d; i++) xt[i] += o[i];
            memcpy(h, xt, sizeof(double) * d);
            rms(h, w->fn[l], d, feps(f));
            ref_ffn(f, w, l, h, brk, st, o);
            if (f->sandwich) rms(o, w->pfn[l], d, feps(f));
            for (int i = 0; i < d; i++) xt[i] += o[i];
        }
    }
    for (int t = 0; t < n; t++) {
        memcpy(h, x + (size_t)t * d, sizeof(double) * d);
        rms(h, w->onorm, d, feps(f));
        matvec(w->out, h, d, VOCAB, logits + (size_t)t * VOCAB);
        if (f->final_cap > 0)
            for (int i = 0; i < VOCAB; i++)
                logits[(size_t)t * VOCAB + i] = f->final_cap * tanh(logits[(size_t)t * VOCAB + i] / f->final_cap);
    }
    free(x); free(blk); free(h); free(o);
}

/* ------------------------------------------------ lmq against the reference */

static double max_err(const float *got, const double *want, int n)
{
    double e = 0;
    for (int i = 0; i < n; i++) {
        double d = fabs(got[i] - want[i]);
        if (!(d <= e)) e = isnan(d) ? INFINITY : d;
    }
    return e;
}

/* Evaluates toks[from..n) in batches of `batch`, checking every position's
 * logits against ref; returns the worst error. */
static double eval_range(lmq_context *c, const int *toks, int from, int n, int batch, const double *ref)
{
    double worst = 0;
    for (int t = from; t < n; t += batch) {
        int nb = n - t < batch ? n - t : batch;
        if (lmq_eval(c, toks + t, nb, nb) != LMQ_OK) {
            T_CHECK(0, "eval at %d: %s", t, lmq_last_error());
            return INFINITY;
        }
        for (int i = 0; i < nb; i++) {
            double e = max_err(lmq_logits(c, i), ref + (size_t)(t + i) * VOCAB, VOCAB);
            if (!(e <= worst)) worst = e;
        }
    }
    return worst;
}

static lmq_context *new_ctx(lmq_model *m, int n_ctx, int batch, int snaps)
{
    lmq_context_params cp = lmq_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = batch;
    cp.n_threads = 2;
    cp.kv_type = LMQ_TYPE_F32;
    cp.n_state_snapshots = snaps;
    lmq_context *c = NULL;
    if (lmq_context_new(m, &cp, &c) != LMQ_OK) T_CHECK(0, "context: %s", lmq_last_error());
    return c;
}

/* Rewinds of a recurrent state (lmq_rt_model.h): snapshots are taken before
 * a batch of more than one token that continues a sequence, after such a
 * batch and by lmq_state_checkpoint(), the newest n_state_snapshots kept;
 * lmq_kv_truncate restores the newest at or before the position (or
 * restarts at 0) and evaluation resumes from lmq_n_past(). */
static void check_snapshots(const feat *f, const model_w *w, lmq_model *m, const int *toks, const double *ref,
                            double tol)
{
    /* batches of 4 leave snapshots at 4, 8, 12, 16, 20; 8 kept */
    lmq_context *c = new_ctx(m, 64, 4, 8);
    if (!c) return;
    double e = eval_range(c, toks, 0, N_TOK, 4, ref);
    const int steps[][2] = {{19, 16}, {6, 4}, {12, 12}, {3, 0}}; /* truncate to, resumes at */
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        lmq_kv_truncate(c, steps[i][0]);
        T_CHECK(lmq_n_past(c) == steps[i][1], "%s: truncate to %d resumes at %d (n_past %d)", f->label, steps[i][0],
                steps[i][1], lmq_n_past(c));
        const double ei = eval_range(c, toks, lmq_n_past(c), N_TOK, 4, ref);
        e = ei > e ? ei : e;
    }
    printf("%-70s snapshots, rewinds to 16, 4, 12, 0: max err %.3g\n", f->label, e);
    T_CHECK(e <= tol, "%s: after rewinds through snapshots: max error %.3g", f->label, e);
    lmq_context_free(c);

    /* single tokens take no snapshots: a checkpoint at 10, a rewind to 15
     * resumes there, and a different continuation follows */
    int alt[N_TOK];
    double *ref2 = malloc(sizeof(double) * N_TOK * VOCAB);
    for (int i = 0; i < N_TOK; i++) alt[i] = i < 10 ? toks[i] : (i * 13 + 5) % VOCAB;
    ref_forward(f, w, alt, N_TOK, 64, 0, NULL, ref2);
    if ((c = new_ctx(m, 64, 4, 0))) {
        e = eval_range(c, toks, 0, 10, 1, ref);
        T_CHECK(lmq_state_checkpoint(c) == LMQ_OK, "%s: checkpoint: %s", f->label, lmq_last_error());
        const double e1 = eval_range(c, toks, 10, N_TOK, 1, ref);
        lmq_kv_truncate(c, 15);
        T_CHECK(lmq_n_past(c) == 10, "%s: truncate to 15 resumes at the checkpoint 10 (n_past %d)", f->label,
                lmq_n_past(c));
        const double e2 = eval_range(c, alt, lmq_n_past(c), N_TOK, 3, ref2);
        e = e1 > e ? e1 : e;
        e = e2 > e ? e2 : e;
        printf("%-70s checkpoint, other continuation: max err %.3g\n", f->label, e);
        T_CHECK(e <= tol, "%s: a different continuation after a checkpoint: max error %.3g", f->label, e);
        lmq_context_free(c);
    }
    free(ref2);

    /* no snapshots: every rewind restarts the sequence */
    if ((c = new_ctx(m, 64, 4, -1))) {
        e = eval_range(c, toks, 0, N_TOK, 4, ref);
        T_CHECK(lmq_state_checkpoint(c) == LMQ_ERR_LIMIT, "%s: checkpoint without snapshots refused", f->label);
        lmq_kv_truncate(c, 19);
        T_CHECK(lmq_n_past(c) == 0, "%s: no snapshots: truncate restarts at 0 (n_past %d)", f->label, lmq_n_past(c));
        const double e1 = eval_range(c, toks, lmq_n_past(c), N_TOK, 4, ref);
        e = e1 > e ? e1 : e;
        T_CHECK(e <= tol, "%s: no snapshots, restarted: max error %.3g", f->label, e);
        lmq_context_free(c);
    }
}

/* Each feature in f->breaks switched off in the reference: lmq's logits
 * (one batch) must then be far off, or the check above could not fail. */
static void check_breaks(const feat *f, const model_w *w, lmq_model *m, const int *toks, double tol)
{
    lmq_context *c = new_ctx(m, 64, N_TOK, 0);
    if (!c) return;
    T_CHECK(lmq_eval(c, toks, N_TOK, N_TOK) == LMQ_OK, "%s: eval: %s", f->label, lmq_last_error());
    double *alt = malloc(sizeof(double) * N_TOK * VOCAB);
    for (int b = 0; b < BRK_COUNT; b++) {
        if (!(f->breaks >> b & 1)) continue;
        ref_forward(f, w, toks, N_TOK, 64, 1u << b, NULL, alt);
        double e = 0;
        for (int t = 0; t < N_TOK; t++) {
            const double et = max_err(lmq_logits(c, t), alt + (size_t)t * VOCAB, VOCAB);
            e = et > e ? et : e;
        }
        printf("%-70s   reference with %s: off by %.3g\n", f->label, k_break_names[b], e);
        T_CHECK(e > 100 * tol, "%s: a reference with %s is off by only %.3g", f->label, k_break_names[b], e);
    }
    free(alt);
    lmq_context_free(c);
}

/* 1, 2 and 3 threads give the same bits (every output element is computed
 * by one thread, in an order fixed by the shapes), with either cache type,
 * in one batch and in batches of 4 */
static void check_threads(const feat *f, lmq_model *m, const int *toks)
{
    for (int kv = 0; kv < 2; kv++) {
        for (int bi = 0; bi < 2; bi++) {
            const int batch = bi ? 4 : N_TOK;
            float *lg[3];
            bool ok = true;
            for (int th = 0; th < 3; th++) {
                lg[th] = malloc(sizeof(float) * N_TOK * VOCAB);
                lmq_context_params cp = lmq_context_default_params();
                cp.n_ctx = 64;
                cp.n_batch = batch;
                cp.n_threads = th + 1;
                cp.kv_type = kv ? LMQ_TYPE_F32 : LMQ_TYPE_F16;
                lmq_context *c = NULL;
                ok &= lmq_context_new(m, &cp, &c) == LMQ_OK;
                for (int t = 0; ok && t < N_TOK; t += batch) {
                    const int nb = N_TOK - t < batch ? N_TOK - t : batch;
                    ok &= lmq_eval(c, toks + t, nb, nb) == LMQ_OK;
                    for (int i = 0; ok && i < nb; i++)
                        memcpy(lg[th] + (size_t)(t + i) * VOCAB, lmq_logits(c, i), sizeof(float) * VOCAB);
                }
                lmq_context_free(c);
            }
            T_CHECK(ok && !memcmp(lg[0], lg[1], sizeof(float) * N_TOK * VOCAB) &&
                        !memcmp(lg[0], lg[2], sizeof(float) * N_TOK * VOCAB),
                    "%s: 1, 2 and 3 threads give identical logits (%s cache, batches of %d)", f->label,
                    kv ? "f32" : "f16", batch);
            for (int th = 0; th < 3; th++) free(lg[th]);
        }
    }
}

/* What the loader made of the file: layer kinds (recurrent, windowed) and
 * the size of the recurrent state. */
static void check_layout(const feat *f, lmq_model *m)
{
    for (int l = 0; l < f->layers; l++) {
        const lmq_layer_kind want = is_rec(f, l)                      ? LMQ_LAYER_RECURRENT
                                    : f->swa > 0 && f->swa_layer[l] ? LMQ_LAYER_ATTN_SWA
                                                                    : LMQ_LAYER_ATTN;
        T_CHECK(lmq_model_layer_kind(m, l) == want, "%s: layer %d has kind %d, expected %d", f->label, l,
                (int)lmq_model_layer_kind(m, l), (int)want);
    }
    int n_rec = 0;
    for (int l = 0; l < f->layers; l++) n_rec += is_rec(f, l);
    const uint64_t want = (uint64_t)n_rec * ((uint64_t)(f->conv - 1) * n_chan(f) + (uint64_t)f->nv * f->dk * f->dv) * 4;
    T_CHECK(lmq_model_state_bytes(m) == (f->nv ? want : 0), "%s: state bytes %llu, expected %llu", f->label,
            (unsigned long long)lmq_model_state_bytes(m), (unsigned long long)(f->nv ? want : 0));
}

static void check_feat(const feat *f)
{
    model_w w;
    make(f, &w);
    char path[256];
    snprintf(path, sizeof path, "%s", t_tmp("feat.lmq"));
    write_model(f, &w, path);
    int toks[N_TOK];
    for (int i = 0; i < N_TOK; i++) toks[i] = (i * 37 + 11) % VOCAB;
    lmq_model *m = NULL;
    lmq_status s = lmq_model_load(path, &m);
    T_CHECK(s == LMQ_OK, "%s: load: %s", f->label, lmq_last_error());
    if (s) goto out;
    check_layout(f, m);
    /* measured worst (f32 weights and cache, float vs double): 1.7e-6 for
     * the attention families, 6.7e-6 for the hybrids (a different
     * continuation after a checkpoint) and 5.8e-6 for gpt-oss (18 heads) */
    const double tol = 2e-5;
    const int n_ctxs[2] = {64, 40};
    for (int ci = 0; ci < (f->longrope ? 2 : 1); ci++) {
        /* LongRoPE: n_ctx 64 > original 48 takes the long factors, 40 the short */
        const int n_ctx = n_ctxs[ci];
        double *ref = malloc(sizeof(double) * N_TOK * VOCAB);
        ref_stats st = {0};
        ref_forward(f, &w, toks, N_TOK, n_ctx, 0, &st, ref);
        if (f->oai && ci == 0) {
            printf("%-70s clamps: g > 7 %ld, u > 7 %ld, u < -7 %ld of %ld\n", f->label, st.g_hi, st.u_hi, st.u_lo,
                   st.n_act);
            T_CHECK(st.g_hi > 0 && st.u_hi > 0 && st.u_lo > 0, "%s: the reference hits every SwiGLU clamp", f->label);
        }
        const int batches[3] = {N_TOK, 1, 4};
        for (int b = 0; b < 3; b++) {
            lmq_context *c = new_ctx(m, n_ctx, batches[b], 0);
            if (!c) continue;
            double e = eval_range(c, toks, 0, N_TOK, batches[b], ref);
            printf("%-70s n_ctx %d batch %2d: max err %.3g\n", f->label, n_ctx, batches[b], e);
            T_CHECK(e <= tol, "%s (n_ctx %d): batches of %d: max |logit - ref| %.3g", f->label, n_ctx, batches[b], e);
            if (batches[b] == 4) {
                /* rewind inside what every ring holds (the last two tokens), re-evaluate;
                 * a recurrent state resumes from its newest snapshot (16 of 8, 12, 16, 20) */
                lmq_kv_truncate(c, N_TOK - 2);
                const int want = f->nv ? 16 : N_TOK - 2;
                T_CHECK(lmq_n_past(c) == want, "%s: short rewind to %d resumes at %d (n_past %d)", f->label, N_TOK - 2,
                        want, lmq_n_past(c));
                e = eval_range(c, toks, lmq_n_past(c), N_TOK, 4, ref);
                T_CHECK(e <= tol, "%s: after a short rewind: max error %.3g", f->label, e);
                /* rewind further than a ring holds: the cache restarts (n_past 0) or keeps the
                 * position; a recurrent state has no snapshot at or before 6 left (4 of them kept) */
                lmq_kv_truncate(c, 6);
                const bool ring = f->swa > 0 && f->swa + 4 - 1 < n_ctx;
                T_CHECK(lmq_n_past(c) == (ring || f->nv ? 0 : 6), "%s: long rewind: n_past %d (%s)", f->label,
                        lmq_n_past(c), ring || f->nv ? "ring or state: expected 0" : "no ring: expected 6");
                e = eval_range(c, toks, lmq_n_past(c), N_TOK, 4, ref);
                T_CHECK(e <= tol, "%s: after a long rewind: max error %.3g", f->label, e);
                if (!f->nv)
                    T_CHECK(lmq_state_checkpoint(c) == LMQ_ERR_INVALID_ARG, "%s: no state to checkpoint", f->label);
            }
            lmq_context_free(c);
        }
        if (f->nv && ci == 0) check_snapshots(f, &w, m, toks, ref, tol);
        free(ref);
    }
    check_breaks(f, &w, m, toks, tol);
    check_threads(f, m, toks);
    /* a q8_0 cache needs head sizes in whole blocks of 32 */
    {
        lmq_context_params cp = lmq_context_default_params();
        cp.n_ctx = 64;
        cp.kv_type = LMQ_TYPE_Q8_0;
        lmq_context *c = NULL;
        const lmq_status qs = lmq_context_new(m, &cp, &c);
        T_CHECK(qs == LMQ_ERR_UNSUPPORTED && !c && strstr(lmq_last_error(), "multiple of 32"),
                "%s: q8_0 cache with head size %d refused: %s", f->label, f->hd, lmq_last_error());
        lmq_context_free(c);
    }
    lmq_model_free(m);
out:
    remove(path);
    unmake(f, &w);
}

int main(void)
{
    const feat feats[] = {
        {.label = "llama + q/k/v/o biases", .arch = "llama", .d = 32, .layers = 2, .heads = 4, .kv = 2, .hd = 8,
         .ff = 24, .n_rot = 8, .bias_qkv = true, .bias_o = true, .theta = 10000},
        {.label = "qwen2 (qkv biases, tied)", .arch = "qwen2", .d = 32, .layers = 2, .heads = 4, .kv = 2, .hd = 8,
         .ff = 24, .n_rot = 8, .bias_qkv = true, .tied = true, .theta = 1e6f},
        {.label = "qwen3 (per-head q/k norm, head_dim 12)", .arch = "qwen3", .d = 32, .layers = 2, .heads = 4,
         .kv = 2, .hd = 12, .ff = 24, .n_rot = 12, .qk_norm = 1, .theta = 1e6f},
        {.label = "q/k norm over the whole projection", .arch = "qwen3", .d = 32, .layers = 2, .heads = 4, .kv = 1,
         .hd = 8, .ff = 24, .n_rot = 8, .qk_norm = 2, .theta = 10000},
        {.label = "gemma2 (sandwich, GeGLU, soft-caps, window on even layers, scales)", .arch = "gemma2", .d = 32,
         .layers = 3, .heads = 2, .kv = 1, .hd = 16, .ff = 24, .n_rot = 16, .sandwich = true, .gelu = true,
         .tied = true, .embd_scale = true, .swa = 5, .swa_layer = {true, false, true}, .attn_cap = 1.5f,
         .final_cap = 2.0f, .qscale = 0.2f, .theta = 10000},
        {.label = "gemma3 (q/k norm, local base, linear scaling on global layers)", .arch = "gemma3", .d = 32,
         .layers = 3, .heads = 4, .kv = 1, .hd = 8, .ff = 24, .n_rot = 8, .sandwich = true, .gelu = true, .tied = true,
         .embd_scale = true, .qk_norm = 1, .swa = 6, .swa_layer = {true, true, false}, .qscale = 0.3f, .theta = 1e6f,
         .theta_swa = 10000, .linear = 4.0f},
        {.label = "phi3 (fused qkv/gate_up, partial rotary, LongRoPE, window everywhere)", .arch = "phi3", .d = 32,
         .layers = 2, .heads = 4, .kv = 2, .hd = 8, .ff = 24, .n_rot = 6, .fused = true, .longrope = true,
         .orig_ctx = 48, .swa = 7, .swa_layer = {true, true}, .theta = 10000},
    };
    for (size_t i = 0; i < sizeof feats / sizeof feats[0]; i++) check_feat(&feats[i]);
    const feat moe[] = {
        {.label = "qwen3moe (top-2 of 6, renormalised, layer 1 dense)", .arch = "qwen3moe", .d = 32, .layers = 3,
         .heads = 4, .kv = 2, .hd = 8, .ff = 40, .n_rot = 8, .qk_norm = 1, .theta = 1e6f, .n_exp = 6, .k_exp = 2,
         .ff_exp = 16, .exp_norm = true, .dense_mask = 2},
        {.label = "qwen3moe (top-3 of 5, not renormalised)", .arch = "qwen3moe", .d = 32, .layers = 2, .heads = 4,
         .kv = 2, .hd = 8, .ff = 24, .n_rot = 8, .qk_norm = 1, .theta = 1e6f, .n_exp = 5, .k_exp = 3, .ff_exp = 24,
         .exp_norm = false, .write_norm_key = true},
        {.label = "qwen2moe (qkv biases, top-2 of 4 not renormalised, shared expert with sigmoid gate)",
         .arch = "qwen2moe", .d = 32, .layers = 2, .heads = 4, .kv = 2, .hd = 8, .ff = 24, .n_rot = 8,
         .bias_qkv = true, .theta = 1e6f, .n_exp = 4, .k_exp = 2, .ff_exp = 16, .exp_norm = false, .ff_sh = 40},
        {.label = "mixtral (llama with experts, top-2 of 4)", .arch = "llama", .d = 32, .layers = 2, .heads = 4,
         .kv = 2, .hd = 8, .ff = 24, .n_rot = 8, .theta = 10000, .n_exp = 4, .k_exp = 2, .ff_exp = 24,
         .exp_norm = true},
    };
    for (size_t i = 0; i < sizeof moe / sizeof moe[0]; i++) check_feat(&moe[i]);
    /* Qwen3.5: recurrent layers by the default interval 4, the interval key
     * and the per-layer list; attention layers gated, per-head q/k norms,
     * partial rotary; eps 1e-6 as the checkpoints (the runtime's L2 norm
     * uses rms_eps, Hugging Face 1e-6) */
    const feat hybrid[] = {
        {.label = "qwen35 (DeltaNet x3 + gated attention, nk 2 nv 4, dk 8 dv 6, K 4)", .arch = "qwen35", .d = 32,
         .layers = 4, .heads = 4, .kv = 2, .hd = 16, .ff = 24, .n_rot = 8, .qk_norm = 1, .theta = 1e7f,
         .attn_gate = true, .ffn_norm_pan = true, .eps = 1e-6f, .nk = 2, .nv = 4, .dk = 8, .dv = 6, .conv = 4,
         .rec = {true, true, true, false}, .rec_key = 0, .breaks = BRK_HEAD_ORDER | BRK_ATTN_GATE | BRK_DECAY},
        {.label = "qwen35 (full_attention_interval 2, nk = nv 2, dk = dv 8, K 2)", .arch = "qwen35", .d = 32,
         .layers = 2, .heads = 2, .kv = 1, .hd = 8, .ff = 24, .n_rot = 4, .qk_norm = 1, .theta = 1e7f,
         .attn_gate = true, .ffn_norm_pan = true, .eps = 1e-6f, .nk = 2, .nv = 2, .dk = 8, .dv = 8, .conv = 2,
         .rec = {true, false}, .rec_key = 2, .breaks = BRK_DECAY},
        {.label = "qwen35moe (lmq.layer.recurrent A R R, nk 2 nv 6, dk 6 dv 4, K 3, top-2 of 4 + shared)",
         .arch = "qwen35moe", .d = 32, .layers = 3, .heads = 4, .kv = 1, .hd = 12, .n_rot = 6, .qk_norm = 1,
         .theta = 1e7f, .n_exp = 4, .k_exp = 2, .ff_exp = 16, .exp_norm = true, .ff_sh = 24, .attn_gate = true,
         .ffn_norm_pan = true, .eps = 1e-6f, .nk = 2, .nv = 6, .dk = 6, .dv = 4, .conv = 3,
         .rec = {false, true, true}, .rec_key = -1, .breaks = BRK_HEAD_ORDER | BRK_ATTN_GATE | BRK_SHEXP},
    };
    for (size_t i = 0; i < sizeof hybrid / sizeof hybrid[0]; i++) check_feat(&hybrid[i]);
    /* gpt-oss: the family's window pattern (even layers), untied output */
    const feat oss[] = {
        {.label = "gpt-oss (biases, sinks, window on even layers, YaRN x8, clamped SwiGLU top-2 of 4)",
         .arch = "gpt-oss", .d = 32, .layers = 3, .heads = 4, .kv = 2, .hd = 16, .ff = 16, .n_rot = 16,
         .bias_qkv = true, .bias_o = true, .sinks = true, .swa = 5, .swa_layer = {true, false, true},
         .swa_implicit = true, .theta = 1000, .yarn = 8, .orig_ctx = 500, .n_exp = 4, .k_exp = 2, .ff_exp = 16,
         .oai = true, .ffn_norm_pan = true,
         .breaks = BRK_SINKS | BRK_CLAMP | BRK_YARN_TRUNC | BRK_YARN_MSCALE | BRK_ROUTER_BIAS | BRK_WINDOW |
                   BRK_EXP_BIAS},
        {.label = "gpt-oss (YaRN x4 not truncated, beta 16/2, 18 heads on 1 KV head, top-3 of 5)",
         .arch = "gpt-oss", .d = 32, .layers = 2, .heads = 18, .kv = 1, .hd = 16, .ff = 24, .n_rot = 16,
         .bias_qkv = true, .bias_o = true, .sinks = true, .swa = 6, .swa_layer = {true, false},
         .swa_implicit = true, .theta = 500, .yarn = 4, .orig_ctx = 400, .beta_fast = 16, .beta_slow = 2,
         .yarn_no_trunc = true, .n_exp = 5, .k_exp = 3, .ff_exp = 24, .oai = true, .ffn_norm_pan = true,
         .breaks = BRK_SINKS | BRK_YARN_TRUNC | BRK_CLAMP},
    };
    for (size_t i = 0; i < sizeof oss / sizeof oss[0]; i++) check_feat(&oss[i]);
    const feat smol[] = {
        {.label = "smollm3 (no RoPE on layer 3 of 4: the family's rule, tied)", .arch = "smollm3", .d = 32,
         .layers = 4, .heads = 4, .kv = 2, .hd = 8, .ff = 24, .n_rot = 8, .tied = true, .theta = 2e6f,
         .nope = 1u << 3, .nope_implicit = true, .breaks = BRK_NOPE},
        {.label = "smollm3 (lmq.rope.nope_layers: layers 0 and 2 without RoPE)", .arch = "smollm3", .d = 32,
         .layers = 3, .heads = 4, .kv = 1, .hd = 8, .ff = 24, .n_rot = 8, .tied = true, .theta = 10000,
         .nope = 5u, .breaks = BRK_NOPE},
    };
    for (size_t i = 0; i < sizeof smol / sizeof smol[0]; i++) check_feat(&smol[i]);
    const feat mini[] = {
        {.label = "mistral3 (YaRN x16, attention factor 1, query temperature 0.5 from position 6)", .arch = "mistral3",
         .d = 32, .layers = 2, .heads = 4, .kv = 2, .hd = 8, .ff = 24, .n_rot = 8, .theta = 1e6f, .yarn = 16,
         .orig_ctx = 6, .yarn_af = 1.0f, .temp_beta = 0.5f, .breaks = BRK_TEMP},
    };
    for (size_t i = 0; i < sizeof mini / sizeof mini[0]; i++) check_feat(&mini[i]);
    const feat shapes[] = {
        {.label = "per-layer KV heads [2 1 4] and FFN widths [24 40 8] (llama.cpp's arrays)", .arch = "llama",
         .d = 32, .layers = 3, .heads = 4, .kv = 4, .hd = 8, .ff = 40, .n_rot = 8, .theta = 10000,
         .kv_l = {2, 1, 4}, .ff_l = {24, 40, 8}},
        {.label = "per-layer shapes with fused qkv and gate|up, window on every layer (phi3)", .arch = "phi3",
         .d = 32, .layers = 2, .heads = 4, .kv = 2, .hd = 8, .ff = 32, .n_rot = 8, .fused = true, .swa = 5,
         .swa_layer = {true, true}, .theta = 10000, .kv_l = {1, 2}, .ff_l = {32, 16}},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_feat(&shapes[i]);
    return t_finish();
}
