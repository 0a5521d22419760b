/* Evaluation context and the batched forward pass, one graph for every
 * family of formats/arch.c with its features switched on by the model:
 *
 *   x = embed(tokens) * embd_scale
 *   for each layer:
 *     h = rmsnorm(x) * attn_norm
 *     q, k, v = h Wq^T (+bq), h Wk^T (+bk), h Wv^T (+bv)     (row ranges of Wqkv when fused)
 *     q, k = rmsnorm per head or whole (q_norm, k_norm)        (Qwen3, Gemma 3; OLMo2)
 *     rope(q, k): global or sliding-window base, scaling, LongRoPE factors
 *     cache <- k, v        (sliding-window layers: a ring of window + batch keys)
 *     a = softmax(softcap(q k^T * scale) + causal/window mask) v
 *     o = a Wo^T (+bo) ; o = rmsnorm(o) * attn_post_norm     (Gemma sandwich)
 *     x += o
 *     h = rmsnorm(x) * ffn_norm
 *     f = (act(h Wgate^T) * (h Wup^T)) Wdown^T                 (SwiGLU or tanh-GeGLU; gate|up fused)
 *     f = rmsnorm(f) * ffn_post_norm                           (Gemma sandwich)
 *     x += f
 *   logits = softcap((rmsnorm(x) * output_norm) Wout^T)        (last n_logits tokens only)
 *
 * Every buffer is allocated in lmq_context_new(); lmq_eval() allocates nothing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "lmq_runtime.h"
#include "model_internal.h"

typedef struct lmq_state_snap {
    int32_t pos;        /* tokens the state had seen; -1: slot unused */
    float *data;        /* a copy of the context's `state` */
} lmq_state_snap;

struct lmq_context {
    lmq_model *model;
    lmq_pool *pool;
    lmq_workspace *ws;
    int32_t n_ctx, n_batch, n_logits_cap, n_threads;
    lmq_isa isa;        /* kernels of this context (LMQ_ISA_COUNT: the process-wide ones) */
    lmq_gemm_mode gemm; /* GEMM mode (LMQ_GEMM_MODE_COUNT: the process-wide one) */
    const lmq_kernel_table *kt; /* the table in force during lmq_eval: pool jobs call through it, since
                                * the settings' scope is the calling thread's */
    lmq_type kv_type;   /* f16, f32 or q8_0 */
    size_t *kv_head;    /* (n_layer) bytes of one head's part of a slot of layer il (its n_head_kv heads of
                         * its head size) */
    int32_t n_past;
    int32_t n_logits;   /* rows valid in `logits` after the last eval */
    void *k_cache;      /* per layer kv_len[il] slots of n_kv*hd, from kv_off[il] */
    void *v_cache;
    int32_t *kv_len;    /* (n_layer) slots: n_ctx, or window + n_batch - 1 for sliding layers */
    size_t *kv_off;     /* (n_layer) byte offset of the layer's slots (a shared-KV layer: its source's) */
    int32_t swa_lo;     /* lowest position every ring still holds (0 without rings) */
    int32_t ring_min;   /* smallest ring (n_ctx when no layer has one) */
    float *x;           /* (n_batch, n_embd) residual stream */
    float *h;           /* (n_batch, n_embd) normed input */
    float *q;           /* (n_batch, n_head*hd) */
    float *k;           /* (n_batch, n_kv*hd) */
    float *v;           /* (n_batch, n_kv*hd) */
    float *att;         /* (n_batch, n_head*hd) attention output */
    float *gate;        /* (n_batch, n_ff) */
    float *up;          /* (n_batch, n_ff) */
    float *attn_scratch;/* (n_threads, lmq_attn_scratch_floats(hd)) */
    float *logits;      /* (n_logits_cap, n_vocab) */
    float *rope_inv;    /* (n_rot/2) inverse frequencies, scaling applied */
    float *rope_inv_swa;/* (n_rot/2) the same for sliding-window layers */
    lmq_matmul_observer observer;
    void *observer_user;
    /* mixture of experts (NULL for dense models) */
    float *router;      /* (n_batch, n_expert) router probabilities */
    int32_t *sel;       /* (n_batch, n_expert_used) selected experts, best first */
    float *sel_w;       /* (n_batch, n_expert_used) their weights */
    int32_t *ex_count;  /* (n_expert + 1) slots per expert, then prefix offsets */
    int32_t *ex_slots;  /* (n_batch * n_expert_used) slot ids t * k + j grouped by expert */
    int32_t *ex_cur;    /* (n_expert) fill cursors */
    float *moe_in;      /* (n_batch * n_expert_used, n_embd) inputs gathered by expert */
    float *moe_g;       /* (n_batch * n_expert_used, n_ff_exp) gate, then the activation */
    float *moe_u;       /* (n_batch * n_expert_used, n_ff_exp) up */
    float *moe_tmp;     /* (n_batch * n_expert_used, n_embd) outputs in expert order */
    float *moe_y;       /* (n_batch * n_expert_used, n_embd) outputs in slot order */
    float *moe_sh;      /* (n_batch, n_embd) the shared expert's output (Qwen2-MoE), or the dense MLP's
                         * normed output beside the experts (Gemma 4), or NULL */
    float *moe_rin;     /* (n_batch, n_embd) the router's input when it is not the experts' (Gemma 4), or NULL */
    /* gated attention (Qwen3.5; NULL otherwise) */
    float *qg;          /* (n_batch, 2 n_head hd) per head [q, gate] */
    float *agate;       /* (n_batch, n_head hd) the gate */
    /* recurrent layers (NULL without them): the sequence state and its snapshots */
    float *state;       /* (n_rec, state_floats): per layer the conv state ((K-1) x C) then nv states (dk x dv) */
    size_t state_floats;/* per recurrent layer */
    int32_t *rec_index; /* (n_layer) the layer's index in `state`, -1 for attention layers */
    lmq_state_snap *snaps; /* (n_snaps) copies of `state` at known positions (lmq_kv_truncate) */
    int32_t n_snaps;
    float *ssm_qkv;     /* (n_batch, C) in-projection, before the conv */
    float *ssm_conv;    /* (n_batch, C) after conv and SiLU: q | k | v */
    float *ssm_z;       /* (n_batch, nv dv) output gate */
    float *ssm_beta;    /* (n_batch, nv) b, then sigmoid(b) */
    float *ssm_decay;   /* (n_batch, nv) a, then exp(A softplus(a + dt)) */
    float *ssm_o;       /* (n_batch, nv dv) the heads' outputs, then normed and gated */
    /* per-layer embeddings (Gemma 4; NULL otherwise) */
    float *ple;         /* (n_batch, n_layer ple) every layer's input per token */
    float *ple_tok;     /* (n_batch, n_layer ple) the tokens' rows of the table */
    float *ple_g;       /* (n_batch, ple) one layer's gate, then gelu(gate) * input */
    /* lmq_eval_layers: layers [layer_lo, layer_hi) only, the residual stream
     * read from x_io when no tokens are given and written back to it */
    int32_t layer_lo, layer_hi;
    float *x_io;        /* (n, n_embd) or NULL: a whole-model eval */
};

lmq_context_params lmq_context_default_params(void)
{
    lmq_context_params p;
    memset(&p, 0, sizeof p);
    p.kv_type = LMQ_TYPE_F16;
    p.isa = -1;
    p.gemm = -1;
    return p;
}

int32_t lmq_context_n_ctx(const lmq_context *c) { return c->n_ctx; }
int32_t lmq_context_n_batch(const lmq_context *c) { return c->n_batch; }
const lmq_model *lmq_context_model(const lmq_context *c) { return c->model; }
int32_t lmq_n_past(const lmq_context *c) { return c->n_past; }

const float *lmq_logits(const lmq_context *c, int32_t i)
{
    if (i < 0 || i >= c->n_logits) return NULL;
    return c->logits + (size_t)i * (size_t)c->model->hp.n_vocab;
}

/* ---------------------------------------------------------------- recurrent state */

size_t lmq_context_state_bytes(const lmq_context *c)
{
    return c->state ? c->state_floats * (size_t)c->model->ssm.n_rec * sizeof(float) : 0;
}

/* Copies the state into a snapshot slot for position n_past: a free slot,
 * else the one at the lowest position. A snapshot at the same position is
 * kept (the tokens before it are the same). */
static void snapshot_take(lmq_context *c)
{
    if (!c->state || c->n_snaps == 0 || c->n_past == 0) return;
    int slot = 0;
    for (int i = 0; i < c->n_snaps; i++) {
        if (c->snaps[i].pos == c->n_past) return;
        if (c->snaps[i].pos < c->snaps[slot].pos) slot = i;
    }
    memcpy(c->snaps[slot].data, c->state, lmq_context_state_bytes(c));
    c->snaps[slot].pos = c->n_past;
}

lmq_status lmq_state_checkpoint(lmq_context *c)
{
    if (!c->state) return lmq_error(LMQ_ERR_INVALID_ARG, "state checkpoint: the model has no recurrent layers");
    if (c->n_snaps == 0) return lmq_error(LMQ_ERR_LIMIT, "state checkpoint: the context keeps no snapshots");
    snapshot_take(c);
    return LMQ_OK;
}

/* A recurrent state cannot be rewound: the newest snapshot at or before
 * `pos` is restored (lmq_n_past() then tells where to resume), or the
 * sequence restarts at 0. Snapshots past the new position are dropped. */
static int32_t rewind_state(lmq_context *c, int32_t pos)
{
    int best = -1;
    for (int i = 0; i < c->n_snaps; i++)
        if (c->snaps[i].pos > 0 && c->snaps[i].pos <= pos && (best < 0 || c->snaps[i].pos > c->snaps[best].pos))
            best = i;
    pos = best >= 0 ? c->snaps[best].pos : 0;
    if (best >= 0) memcpy(c->state, c->snaps[best].data, lmq_context_state_bytes(c));
    for (int i = 0; i < c->n_snaps; i++)
        if (c->snaps[i].pos > pos) c->snaps[i].pos = -1;
    return pos;
}

lmq_status lmq_kv_truncate(lmq_context *c, int32_t pos)
{
    if (pos < 0 || pos > c->n_past)
        return lmq_error(LMQ_ERR_INVALID_ARG, "kv cache: cannot truncate to %d (it holds %d tokens)", pos, c->n_past);
    if (c->state && pos < c->n_past) pos = rewind_state(c, pos);
    /* a ring that has overwritten keys the next token at `pos` attends to cannot serve it */
    const int32_t need = pos - c->model->hp.n_swa + 1;
    if (pos > 0 && c->swa_lo > 0 && (need < 0 ? 0 : need) < c->swa_lo) pos = 0;
    if (pos == 0) c->swa_lo = 0;
    c->n_past = pos;
    return LMQ_OK;
}

/* YaRN's correction range (Hugging Face's _compute_yarn_parameters,
 * ggml's ggml_rope_yarn_corr_dims): the rotary pairs between `lo` and `hi`
 * blend interpolated and original frequencies. ggml always floors lo and
 * ceils hi; Hugging Face does so unless rope_scaling.truncate is false. */
static void yarn_range(const lmq_model *m, float theta, int n_rot, double *lo, double *hi)
{
    const lmq_hparams *hp = &m->hp;
    const double d = n_rot, base = theta, L0 = hp->rope_orig_ctx;
    double l = d * log(L0 / (m->yarn_beta_fast * 2 * M_PI)) / (2 * log(base));
    double h = d * log(L0 / (m->yarn_beta_slow * 2 * M_PI)) / (2 * log(base));
    if (m->yarn_truncate) {
        l = floor(l);
        h = ceil(h);
    }
    *lo = l > 0 ? l : 0;
    *hi = h < d - 1 ? h : d - 1;
}

/* Inverse RoPE frequencies with linear, llama3 or YaRN scaling (as in
 * llama.cpp and Hugging Face's _compute_llama3_parameters /
 * _compute_yarn_parameters). A rope_freqs.weight tensor (llama.cpp's form of
 * the llama3 scaling) or LongRoPE's factor list divides the frequencies
 * instead of the llama3 formula, as llama.cpp's freq_factors do. `scaled`
 * false: no scaling at all (Gemma 3's local layers). YaRN's attention factor
 * is hp->rope_attn_factor (model.c). */
static void rope_init(const lmq_model *m, float theta, int n_rot, bool scaled, const float *freq_factors, float *inv)
{
    const lmq_hparams *hp = &m->hp;
    int half = n_rot / 2;
    double ylo = 0, yhi = 0;
    if (scaled && hp->rope_scaling_type == 3) yarn_range(m, theta, n_rot, &ylo, &yhi);
    for (int i = 0; i < half; i++) {
        double f = pow((double)theta, -2.0 * i / n_rot);
        if (freq_factors) f /= freq_factors[i];
        if (scaled && hp->rope_scaling_type == 1) {
            f /= hp->rope_factor;
        } else if (scaled && hp->rope_scaling_type == 3) {
            double r = (i - ylo) / (yhi - ylo > 0.001 ? yhi - ylo : 0.001);
            r = r < 0 ? 0 : r > 1 ? 1 : r; /* 0: keep the frequency, 1: interpolate it */
            f = f / hp->rope_factor * r + f * (1 - r);
        } else if (scaled && hp->rope_scaling_type == 2 && !freq_factors) {
            double low_wl = hp->rope_orig_ctx / hp->rope_low_freq_factor;
            double high_wl = hp->rope_orig_ctx / hp->rope_high_freq_factor;
            double wl = 2 * M_PI / f;
            if (wl > low_wl) {
                f /= hp->rope_factor;
            } else if (wl >= high_wl) {
                double smooth = (hp->rope_orig_ctx / wl - hp->rope_low_freq_factor) /
                                (hp->rope_high_freq_factor - hp->rope_low_freq_factor);
                f = (1 - smooth) * f / hp->rope_factor + smooth * f;
            }
        }
        inv[i] = (float)f;
    }
}

lmq_status lmq_context_new(lmq_model *m, const lmq_context_params *pp, lmq_context **out)
{
    *out = NULL;
    lmq_context_params p = pp ? *pp : lmq_context_default_params();
    const lmq_hparams *hp = &m->hp;
    lmq_context *c = calloc(1, sizeof *c);
    if (!c) return lmq_error(LMQ_ERR_NOMEM, "context");
    c->model = m;
    c->n_ctx = p.n_ctx > 0 ? p.n_ctx : (hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096);
    if (c->n_ctx <= 0) c->n_ctx = 2048;
    c->n_batch = p.n_batch > 0 ? p.n_batch : 512;
    if (c->n_batch > c->n_ctx) c->n_batch = c->n_ctx;
    c->n_logits_cap = p.n_logits > 0 ? p.n_logits : c->n_batch;
    if (c->n_logits_cap > c->n_batch) c->n_logits_cap = c->n_batch;
    c->n_threads = p.n_threads > 0 ? p.n_threads : lmq_n_cpus();
    c->kv_type = p.kv_type;
    if (p.isa < -1 || p.isa >= LMQ_ISA_COUNT || p.gemm < -1 || p.gemm >= LMQ_GEMM_MODE_COUNT) {
        free(c);
        return lmq_error(LMQ_ERR_INVALID_ARG, "context parameters: isa %d, gemm %d (-1 or an lmq_isa / lmq_gemm_mode)",
                         p.isa, p.gemm);
    }
    if (p.isa >= 0 && !lmq_isa_supported((lmq_isa)p.isa)) {
        free(c);
        return lmq_error(LMQ_ERR_UNSUPPORTED, "context parameters: ISA %s is not supported by this build or CPU (%s)",
                         lmq_isa_name((lmq_isa)p.isa), lmq_cpu_features());
    }
    c->isa = p.isa >= 0 ? (lmq_isa)p.isa : LMQ_ISA_COUNT;
    c->gemm = p.gemm >= 0 ? (lmq_gemm_mode)p.gemm : LMQ_GEMM_MODE_COUNT;
    if (p.kv_type != LMQ_TYPE_F32 && p.kv_type != LMQ_TYPE_F16 && p.kv_type != LMQ_TYPE_Q8_0) {
        free(c);
        return lmq_error(LMQ_ERR_INVALID_ARG, "kv cache type %s is not supported (f16, f32 or q8_0)",
                         lmq_type_name(p.kv_type));
    }
    if (p.n_state_snapshots > LMQ_MAX_STATE_SNAPSHOTS) {
        free(c);
        return lmq_error(LMQ_ERR_INVALID_ARG, "%d state snapshots requested; at most %d", p.n_state_snapshots,
                         LMQ_MAX_STATE_SNAPSHOTS);
    }
    for (int il = 0; il < hp->n_layer; il++)
        if (p.kv_type == LMQ_TYPE_Q8_0 && m->layers[il].head_dim % 32 != 0) {
            free(c);
            return lmq_error(LMQ_ERR_UNSUPPORTED, "kv cache type q8_0 needs a head size that is a multiple of 32 "
                             "(layer %d's is %d)", il, m->layers[il].head_dim);
        }
    size_t B = (size_t)c->n_batch, d = (size_t)hp->n_embd, hd = (size_t)m->head_dim_max;
    size_t qd = (size_t)hp->n_head * hd, kvd = (size_t)hp->n_head_kv * hd, ff = (size_t)hp->n_ff;
    c->kv_len = calloc((size_t)hp->n_layer, sizeof *c->kv_len);
    c->kv_off = calloc((size_t)hp->n_layer, sizeof *c->kv_off);
    c->kv_head = calloc((size_t)hp->n_layer, sizeof *c->kv_head);
    if (!c->kv_len || !c->kv_off || !c->kv_head) {
        lmq_context_free(c);
        return lmq_error(LMQ_ERR_NOMEM, "context");
    }
    size_t kv_bytes = 0;
    c->ring_min = c->n_ctx;
    for (int il = 0; il < hp->n_layer; il++) {
        const lmq_layer *L = &m->layers[il];
        c->kv_off[il] = kv_bytes;
        c->kv_head[il] = (size_t)lmq_row_size(c->kv_type, L->head_dim);
        if (L->rec) { /* no keys: its sequence state is `state` */
            c->kv_len[il] = 0;
            continue;
        }
        if (L->kv_src != il) { /* shared KV: the source's slots (an earlier layer of the same kind and shape) */
            c->kv_off[il] = c->kv_off[L->kv_src];
            c->kv_len[il] = c->kv_len[L->kv_src];
            continue;
        }
        int64_t len = c->n_ctx;
        if (L->swa && hp->n_swa > 0 && (int64_t)hp->n_swa + c->n_batch - 1 < len)
            len = (int64_t)hp->n_swa + c->n_batch - 1;
        c->kv_len[il] = (int32_t)len;
        kv_bytes += (size_t)len * c->kv_head[il] * (size_t)L->n_head_kv;
        if (len < c->ring_min) c->ring_min = (int32_t)len;
    }
    kv_bytes += 1; /* a model of recurrent layers only has no slots */
    c->k_cache = aligned_alloc(64, (kv_bytes + 63) & ~(size_t)63);
    c->v_cache = aligned_alloc(64, (kv_bytes + 63) & ~(size_t)63);
#define ALLOC(field, n) c->field = aligned_alloc(64, (((n) * sizeof(float)) + 63) & ~(size_t)63)
    ALLOC(x, B * d);
    ALLOC(h, B * d);
    ALLOC(q, B * qd);
    ALLOC(k, B * kvd);
    ALLOC(v, B * kvd);
    ALLOC(att, B * qd);
    size_t ffw = hp->n_expert > 0 && (size_t)hp->n_ff_exp > ff ? (size_t)hp->n_ff_exp : ff;
    if ((size_t)hp->n_ff_shexp > ffw) ffw = (size_t)hp->n_ff_shexp;
    ALLOC(gate, B * ffw);
    ALLOC(up, B * ffw);
    if (hp->n_moe_layers > 0) {
        const size_t E = (size_t)hp->n_expert, K = (size_t)hp->n_expert_used;
        const size_t FE = (size_t)hp->n_ff_exp;
        ALLOC(router, B * E);
        ALLOC(sel_w, B * K);
        ALLOC(moe_in, B * K * d);
        ALLOC(moe_g, B * K * FE);
        ALLOC(moe_u, B * K * FE);
        ALLOC(moe_tmp, B * K * d);
        ALLOC(moe_y, B * K * d);
        bool beside = false;
        for (int il = 0; il < hp->n_layer; il++) beside |= m->layers[il].moe_dense;
        if (hp->n_ff_shexp > 0 || beside) ALLOC(moe_sh, B * d);
        if (beside) ALLOC(moe_rin, B * d);
        c->sel = malloc(B * K * sizeof(int32_t));
        c->ex_count = malloc((E + 1) * sizeof(int32_t));
        c->ex_cur = malloc(E * sizeof(int32_t));
        c->ex_slots = malloc(B * K * sizeof(int32_t));
        if (!c->router || !c->sel_w || !c->moe_in || !c->moe_g || !c->moe_u || !c->moe_tmp || !c->moe_y || !c->sel ||
            !c->ex_count || !c->ex_cur || !c->ex_slots || ((hp->n_ff_shexp > 0 || beside) && !c->moe_sh) ||
            (beside && !c->moe_rin)) {
            lmq_context_free(c);
            return lmq_error(LMQ_ERR_NOMEM, "context: cannot allocate the expert buffers for n_batch %d", c->n_batch);
        }
    }
    bool gated = false;
    for (int il = 0; il < hp->n_layer; il++) gated |= m->layers[il].attn_gate;
    if (gated) {
        ALLOC(qg, B * 2 * qd);
        ALLOC(agate, B * qd);
        if (!c->qg || !c->agate) {
            lmq_context_free(c);
            return lmq_error(LMQ_ERR_NOMEM, "context: cannot allocate the attention gate for n_batch %d", c->n_batch);
        }
    }
    if (m->ssm.n_rec > 0) {
        const lmq_ssm_dims *sd = &m->ssm;
        const size_t C = (size_t)sd->channels, inner = (size_t)sd->nv * (size_t)sd->dv, nv = (size_t)sd->nv;
        c->state_floats = (size_t)lmq_arch_rec_state_floats(&m->dims);
        const size_t st = c->state_floats * (size_t)sd->n_rec;
        c->n_snaps = p.n_state_snapshots < 0 ? 0 : p.n_state_snapshots > 0 ? p.n_state_snapshots : 4;
        ALLOC(state, st);
        ALLOC(ssm_qkv, B * C);
        ALLOC(ssm_conv, B * C);
        ALLOC(ssm_z, B * inner);
        ALLOC(ssm_o, B * inner);
        ALLOC(ssm_beta, B * nv);
        ALLOC(ssm_decay, B * nv);
        c->rec_index = malloc((size_t)hp->n_layer * sizeof *c->rec_index);
        c->snaps = calloc((size_t)c->n_snaps + 1, sizeof *c->snaps);
        bool ok = c->state && c->ssm_qkv && c->ssm_conv && c->ssm_z && c->ssm_o && c->ssm_beta && c->ssm_decay &&
                  c->rec_index && c->snaps;
        for (int i = 0; ok && i < c->n_snaps; i++) {
            c->snaps[i].pos = -1;
            ok = (c->snaps[i].data = aligned_alloc(64, (st * sizeof(float) + 63) & ~(size_t)63)) != NULL;
        }
        if (!ok) {
            lmq_context_free(c);
            return lmq_error(LMQ_ERR_NOMEM, "context: cannot allocate the recurrent state (%zu bytes per sequence, "
                             "%d snapshots)", st * sizeof(float), c->n_snaps);
        }
        for (int il = 0, r = 0; il < hp->n_layer; il++) c->rec_index[il] = m->layers[il].rec ? r++ : -1;
        memset(c->state, 0, st * sizeof(float));
    }
    if (m->n_embd_ple > 0) {
        ALLOC(ple, B * (size_t)hp->n_layer * (size_t)m->n_embd_ple);
        ALLOC(ple_g, B * (size_t)m->n_embd_ple);
        ALLOC(ple_tok, B * (size_t)hp->n_layer * (size_t)m->n_embd_ple);
        if (!c->ple || !c->ple_g || !c->ple_tok) {
            lmq_context_free(c);
            return lmq_error(LMQ_ERR_NOMEM, "context: cannot allocate the per-layer inputs for n_batch %d", c->n_batch);
        }
    }
    const int32_t half_max = (hp->n_rot > m->n_rot_swa ? hp->n_rot : m->n_rot_swa) / 2;
    ALLOC(attn_scratch, (size_t)c->n_threads * lmq_attn_scratch_floats(m->head_dim_max));
    ALLOC(logits, (size_t)c->n_logits_cap * (size_t)hp->n_vocab);
    ALLOC(rope_inv, (size_t)half_max + 1);
    ALLOC(rope_inv_swa, (size_t)half_max + 1);
#undef ALLOC
    if (!c->k_cache || !c->v_cache || !c->x || !c->h || !c->q || !c->k || !c->v || !c->att || !c->gate || !c->up ||
        !c->attn_scratch || !c->logits || !c->rope_inv || !c->rope_inv_swa) {
        lmq_context_free(c);
        return lmq_error(LMQ_ERR_NOMEM, "context: cannot allocate buffers for n_ctx %d, n_batch %d", p.n_ctx, p.n_batch);
    }
    /* LongRoPE: the long factors when the context exceeds the original one (llama.cpp's choice) */
    const float *factors = m->rope_freqs;
    if (m->rope_long) factors = c->n_ctx > hp->rope_orig_ctx ? m->rope_long : m->rope_short;
    rope_init(m, hp->rope_theta, hp->n_rot, true, factors, c->rope_inv);
    /* per-kind head sizes (Gemma 4): rope_freqs.weight is the global layers' proportional RoPE */
    rope_init(m, hp->rope_theta_swa, m->n_rot_swa, !hp->swa_rope_unscaled, m->arch->swa_heads ? NULL : factors,
              c->rope_inv_swa);
    lmq_status s = lmq_pool_new(c->n_threads, &c->pool);
    if (!s) s = lmq_workspace_new(&c->ws);
    /* size the workspace for the largest product once (the paths of this
     * context's ISA and GEMM mode), so eval never grows it */
    if (!s) {
        lmq_kernel_scope scope = lmq_kernel_scope_enter(c->isa, c->gemm);
        s = lmq_model_reserve(m, c->ws, c->n_batch, lmq_pool_n_threads(c->pool));
        lmq_kernel_scope_leave(scope);
    }
    if (s) {
        lmq_context_free(c);
        return s;
    }
    *out = c;
    return LMQ_OK;
}

void lmq_context_free(lmq_context *c)
{
    if (!c) return;
    lmq_pool_free(c->pool);
    lmq_workspace_free(c->ws);
    free(c->k_cache);
    free(c->v_cache);
    free(c->x);
    free(c->h);
    free(c->q);
    free(c->k);
    free(c->v);
    free(c->att);
    free(c->gate);
    free(c->up);
    free(c->attn_scratch);
    free(c->logits);
    free(c->rope_inv);
    free(c->rope_inv_swa);
    free(c->router);
    free(c->sel);
    free(c->sel_w);
    free(c->ex_count);
    free(c->ex_slots);
    free(c->ex_cur);
    free(c->moe_in);
    free(c->moe_g);
    free(c->moe_u);
    free(c->moe_tmp);
    free(c->moe_y);
    free(c->moe_sh);
    free(c->moe_rin);
    free(c->kv_len);
    free(c->kv_off);
    free(c->kv_head);
    free(c->ple);
    free(c->ple_g);
    free(c->ple_tok);
    free(c->qg);
    free(c->agate);
    free(c->state);
    free(c->rec_index);
    for (int i = 0; c->snaps && i < c->n_snaps; i++) free(c->snaps[i].data);
    free(c->snaps);
    free(c->ssm_qkv);
    free(c->ssm_conv);
    free(c->ssm_z);
    free(c->ssm_o);
    free(c->ssm_beta);
    free(c->ssm_decay);
    free(c);
}

/* ================================================================ pieces */

static void rmsnorm(float *out, const float *x, const float *w, int n, float eps)
{
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float scale = 1.0f / sqrtf((float)(ss / n) + eps);
    if (!w) { /* no weight (Gemma 4's value norm) */
        for (int i = 0; i < n; i++) out[i] = x[i] * scale;
        return;
    }
    for (int i = 0; i < n; i++) out[i] = x[i] * scale * w[i];
}

/* Rotates the first n_rot dimensions of each head; `mscale` multiplies cos
 * and sin (LongRoPE's attention factor; 1 otherwise). */
static void rope_apply(float *vec, int n_heads, int hd, int n_rot, int pos, const float *inv, lmq_rope_layout layout,
                       float mscale)
{
    for (int h = 0; h < n_heads; h++) {
        float *x = vec + (size_t)h * hd;
        for (int i = 0; i < n_rot / 2; i++) {
            float theta = (float)pos * inv[i];
            float cs = cosf(theta) * mscale, sn = sinf(theta) * mscale;
            int a = layout == LMQ_ROPE_NEOX ? i : 2 * i;
            int b = layout == LMQ_ROPE_NEOX ? i + n_rot / 2 : 2 * i + 1;
            float x0 = x[a], x1 = x[b];
            x[a] = x0 * cs - x1 * sn;
            x[b] = x0 * sn + x1 * cs;
        }
    }
}

static void add_bias(float *y, const float *b, int32_t n_tok, int64_t n)
{
    if (!b) return;
    for (int32_t t = 0; t < n_tok; t++)
        for (int64_t i = 0; i < n; i++) y[(size_t)t * (size_t)n + (size_t)i] += b[i];
}

/* RMSNorm of n_tok rows of `width`, in pieces of `len` (len == head_dim:
 * per head; len == width: the whole row). */
static void norm_rows(float *y, int32_t n_tok, int64_t width, const float *w, int32_t len, float eps)
{
    if (!w) return;
    for (size_t i = 0; i < (size_t)n_tok * (size_t)width; i += (size_t)len) rmsnorm(y + i, y + i, w, len, eps);
}

static float gelu_tanh(float x)
{
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

/* g = act(g) * u over n values: SwiGLU, tanh-GeGLU, or gpt-oss's clamped
 * SwiGLU (ggml's swiglu_oai: alpha 1.702, limit 7). */
static void glu(lmq_act act, float *g, const float *u, size_t n)
{
    if (act == LMQ_ACT_GELU_TANH) {
        for (size_t i = 0; i < n; i++) g[i] = gelu_tanh(g[i]) * u[i];
    } else if (act == LMQ_ACT_SWIGLU_OAI) {
        for (size_t i = 0; i < n; i++) {
            const float x = g[i] < 7.0f ? g[i] : 7.0f, y = u[i] < -7.0f ? -7.0f : u[i] > 7.0f ? 7.0f : u[i];
            g[i] = x / (1.0f + expf(-1.702f * x)) * (y + 1.0f);
        }
    } else {
        for (size_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
    }
}

void lmq_context_set_observer(lmq_context *c, lmq_matmul_observer fn, void *user)
{
    c->observer = fn;
    c->observer_user = user;
}

static lmq_status linear(lmq_context *c, const lmq_weight *w, const float *x, int32_t n_tok, float *y)
{
    if (c->observer && w->info && !w->quiet) c->observer(c->observer_user, w->info->name, -1, x, n_tok, w->n_in);
    /* repacked rows suit the ISA they were made for; after lmq_isa_force
     * to another the mapped rows serve */
    if (w->packed && lmq_isa_active() == c->model->repack_isa)
        return lmq_matmul_repacked(c->pool, w->type, w->packed, w->n_out, w->n_in, x, n_tok, y, c->ws);
    return lmq_matmul(c->pool, w->type, w->data, w->n_out, w->n_in, x, n_tok, y, c->ws);
}

/* ---------------------------------------------------------------- experts */

/* Experts handed to lmq_matmul_multi per pass (more are done in further passes). */
#define LMQ_MAX_EXPERTS_USED_PASS 128

/* The MoE FFN of c->h (n rows) into c->h: router softmax over all experts,
 * top-k (ties to the lower index), optional renormalisation of the k
 * weights; the rows are grouped by expert and every selected expert runs
 * once over its rows, all experts of a step in one pass over the thread pool
 * (lmq_matmul_multi: for one token that reads only its k experts' rows);
 * each row then sums its experts' outputs weighted, best expert first, as
 * llama.cpp's build_moe_ffn adds them. Experts nobody chose are not read. */
static lmq_status moe_ffn(lmq_context *c, const lmq_layer *L, int32_t n, const float *router_in)
{
    const lmq_hparams *hp = &c->model->hp;
    const int d = hp->n_embd, E = hp->n_expert, K = hp->n_expert_used;
    const int64_t fe = hp->n_ff_exp;
    lmq_status s;
    if (L->gate_shexp.data) { /* the shared expert, scaled by sigmoid(h . w), added to the experts' sum below */
        const int64_t fs = hp->n_ff_shexp;
        if ((s = linear(c, &L->gate_shexp, c->h, n, c->gate))) return s;
        if ((s = linear(c, &L->up_shexp, c->h, n, c->up))) return s;
        for (size_t i = 0; i < (size_t)n * (size_t)fs; i++) {
            const float g = c->gate[i];
            c->gate[i] = g / (1.0f + expf(-g)) * c->up[i];
        }
        if ((s = linear(c, &L->down_shexp, c->gate, n, c->moe_sh))) return s;
        for (int32_t t = 0; t < n; t++) {
            const float z = lmq_dot_f32(c->h + (size_t)t * d, L->gate_inp_shexp, d), g = 1.0f / (1.0f + expf(-z));
            for (int i = 0; i < d; i++) c->moe_sh[(size_t)t * d + i] *= g;
        }
    }
    if ((s = linear(c, &L->gate_inp, router_in ? router_in : c->h, n, c->router))) return s;
    add_bias(c->router, L->gate_inp_b, n, E);
    const bool topk_softmax = c->model->arch->gating == LMQ_GATING_TOPK_SOFTMAX;
    memset(c->ex_count, 0, (size_t)(E + 1) * sizeof(int32_t));
    for (int32_t t = 0; t < n; t++) {
        float *p = c->router + (size_t)t * E;
        if (!topk_softmax) lmq_softmax(p, E); /* else: the k raw logits, softmax over them below */
        int32_t *sel = c->sel + (size_t)t * K;
        float *w = c->sel_w + (size_t)t * K;
        double sum = 0;
        for (int j = 0; j < K; j++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                bool taken = false;
                for (int q = 0; q < j; q++) taken |= sel[q] == e;
                if (!taken && (best < 0 || p[e] > p[best])) best = e;
            }
            sel[j] = best;
            w[j] = p[best];
            sum += w[j];
            c->ex_count[best + 1]++;
        }
        if (topk_softmax) { /* gpt-oss: softmax over the selected logits (w[0] is the largest) */
            sum = 0;
            for (int j = 0; j < K; j++) sum += w[j] = expf(w[j] - p[sel[0]]);
            for (int j = 0; j < K; j++) w[j] = (float)(w[j] / sum);
        } else if (hp->moe_norm) {
            for (int j = 0; j < K; j++) w[j] = (float)(w[j] / sum);
        }
        if (L->down_exps_scale) /* Gemma 4's per-expert scale, after the renormalisation */
            for (int j = 0; j < K; j++) w[j] *= L->down_exps_scale[sel[j]];
    }
    for (int e = 0; e < E; e++) c->ex_count[e + 1] += c->ex_count[e]; /* offsets */
    memcpy(c->ex_cur, c->ex_count, (size_t)E * sizeof(int32_t));
    for (int32_t slot = 0; slot < n * K; slot++) {
        const int32_t r = c->ex_cur[c->sel[slot]]++;
        c->ex_slots[r] = slot;
        memcpy(c->moe_in + (size_t)r * d, c->h + (size_t)(slot / K) * d, (size_t)d * sizeof(float));
    }
    lmq_matmul_part gp[2 * LMQ_MAX_EXPERTS_USED_PASS], dp[LMQ_MAX_EXPERTS_USED_PASS];
    int32_t eid[LMQ_MAX_EXPERTS_USED_PASS];
    /* the experts' repacked copies (model.c's repack_experts: expert e at e x the bytes of one), while the ISA
     * they were made for is in force */
    const bool rp = lmq_isa_active() == c->model->repack_isa;
    const uint8_t *gpk = rp ? L->gate_exps.packed : NULL, *upk = rp ? L->up_exps.packed : NULL,
                  *dpk = rp ? L->down_exps.packed : NULL;
    const int64_t gpb = gpk ? lmq_repack_bytes(L->gate_exps.type, fe, d) : 0,
                  upb = upk ? lmq_repack_bytes(L->up_exps.type, fe, d) : 0,
                  dpb = dpk ? lmq_repack_bytes(L->down_exps.type, d, fe) : 0;
    const bool same = L->gate_exps.type == L->up_exps.type;
    int e = 0;
    while (e < E) {
        /* the selected experts, in passes of at most LMQ_MAX_EXPERTS_USED_PASS */
        int np = 0, nd = 0;
        for (; e < E && nd < LMQ_MAX_EXPERTS_USED_PASS; e++) {
            const int32_t off = c->ex_count[e], cnt = c->ex_count[e + 1] - off;
            if (cnt == 0) continue; /* never selected: its weights are never read */
            const float *x = c->moe_in + (size_t)off * d;
            if (c->observer && L->gate_exps.info) {
                c->observer(c->observer_user, L->gate_exps.info->name, e, x, cnt, d);
                c->observer(c->observer_user, L->up_exps.info->name, e, x, cnt, d);
            }
            const size_t grow = (size_t)lmq_row_size(L->gate_exps.type, d), urow = (size_t)lmq_row_size(L->up_exps.type, d);
            const size_t gstep = (size_t)(L->gate_exps.ex_rows ? L->gate_exps.ex_rows : fe),
                         ustep = (size_t)(L->up_exps.ex_rows ? L->up_exps.ex_rows : fe);
            gp[np++] = (lmq_matmul_part){(const uint8_t *)L->gate_exps.data + (size_t)e * gstep * grow, fe, x, cnt,
                                         c->moe_g + (size_t)off * fe, gpk ? gpk + e * gpb : NULL};
            gp[np++] = (lmq_matmul_part){(const uint8_t *)L->up_exps.data + (size_t)e * ustep * urow, fe, x, cnt,
                                         c->moe_u + (size_t)off * fe, upk ? upk + e * upb : NULL};
            eid[nd] = e;
            dp[nd++] = (lmq_matmul_part){(const uint8_t *)L->down_exps.data +
                                             (size_t)e * d * (size_t)lmq_row_size(L->down_exps.type, fe),
                                         d, c->moe_g + (size_t)off * fe, cnt, c->moe_tmp + (size_t)off * d,
                                         dpk ? dpk + e * dpb : NULL};
        }
        if (!nd) continue;
        if (same) {
            s = lmq_matmul_multi(c->pool, L->gate_exps.type, d, gp, np, c->ws);
        } else { /* gate and up parts alternate: two passes with a stride */
            lmq_matmul_part g2[LMQ_MAX_EXPERTS_USED_PASS], u2[LMQ_MAX_EXPERTS_USED_PASS];
            for (int i = 0; i < nd; i++) g2[i] = gp[2 * i], u2[i] = gp[2 * i + 1];
            s = lmq_matmul_multi(c->pool, L->gate_exps.type, d, g2, nd, c->ws);
            if (!s) s = lmq_matmul_multi(c->pool, L->up_exps.type, d, u2, nd, c->ws);
        }
        if (s) return s;
        for (int i = 0; i < nd; i++) {
            float *g = (float *)(uintptr_t)dp[i].x, *u = gp[2 * i + 1].y;
            add_bias(g, L->gate_exps_b ? L->gate_exps_b + (size_t)eid[i] * fe : NULL, (int32_t)dp[i].n_tok, fe);
            add_bias(u, L->up_exps_b ? L->up_exps_b + (size_t)eid[i] * fe : NULL, (int32_t)dp[i].n_tok, fe);
            glu(hp->act, g, u, (size_t)dp[i].n_tok * (size_t)fe);
        }
        if (c->observer && L->down_exps.info)
            for (int i = 0; i < nd; i++)
                c->observer(c->observer_user, L->down_exps.info->name, eid[i], dp[i].x, (int32_t)dp[i].n_tok, fe);
        if ((s = lmq_matmul_multi(c->pool, L->down_exps.type, fe, dp, nd, c->ws))) return s;
        for (int i = 0; L->down_exps_b && i < nd; i++)
            add_bias(dp[i].y, L->down_exps_b + (size_t)eid[i] * d, (int32_t)dp[i].n_tok, d);
    }
    for (int32_t r = 0; r < n * K; r++)
        memcpy(c->moe_y + (size_t)c->ex_slots[r] * d, c->moe_tmp + (size_t)r * d, (size_t)d * sizeof(float));
    for (int32_t t = 0; t < n; t++) {
        float *o = c->h + (size_t)t * d;
        for (int i = 0; i < d; i++) o[i] = 0;
        for (int j = 0; j < K; j++) {
            const float w = c->sel_w[(size_t)t * K + j], *y = c->moe_y + ((size_t)t * K + j) * d;
            for (int i = 0; i < d; i++) o[i] += w * y[i];
        }
        if (L->gate_shexp.data)
            for (int i = 0; i < d; i++) o[i] += c->moe_sh[(size_t)t * d + i];
    }
    return LMQ_OK;
}

/* ---------------------------------------------------------------- attention */

typedef struct attn_job {
    lmq_context *c;
    int il;          /* layer */
    int32_t n_tok;   /* tokens in this batch */
    int32_t pos0;    /* position of the first token */
    int32_t tpt;     /* tokens per tile */
    int32_t gpt;     /* heads of a group per tile */
    int64_t n_items; /* KV heads x head sub-groups x token tiles */
} attn_job;

/* Tiles of up to LMQ_ATTN_ROWS rows (a few tokens x the heads of one KV
 * group, lmq_attn), threads taking tiles round-robin, the last tokens (the
 * longest rows under the causal mask) first. Each row's arithmetic is the
 * same whichever thread runs its tile, so results do not depend on the
 * number of threads. */
static void attn_worker(void *arg, int ith, int nth)
{
    attn_job *j = arg;
    lmq_context *c = j->c;
    const lmq_hparams *hp = &c->model->hp;
    const int hd = c->model->layers[j->il].head_dim, group = hp->n_head / c->model->layers[j->il].n_head_kv;
    const int32_t n_sub = (group + j->gpt - 1) / j->gpt, n_tt = (j->n_tok + j->tpt - 1) / j->tpt;
    const lmq_layer *L = &c->model->layers[j->il];
    lmq_attn_args a = {
        .kv_type = c->kv_type,
        .head_dim = hd,
        .kv_stride = c->kv_head[j->il] * (size_t)c->model->layers[j->il].n_head_kv,
        .n_slots = c->kv_len[j->il],
        .q_stride = (int64_t)hp->n_head * hd,
        .out_stride = (int64_t)hp->n_head * hd,
        .window = c->model->layers[j->il].swa ? hp->n_swa : 0,
        .scale = hp->attn_scale,
        .softcap = hp->attn_softcap,
        .scratch = c->attn_scratch + (size_t)ith * lmq_attn_scratch_floats(c->model->head_dim_max),
    };
    for (int64_t it = ith; it < j->n_items; it += nth) {
        const int32_t tt = n_tt - 1 - (int32_t)(it % n_tt), rest = (int32_t)(it / n_tt);
        const int32_t sub = rest % n_sub, kvh = rest / n_sub;
        const int32_t t0 = tt * j->tpt, g0 = sub * j->gpt, h0 = kvh * group + g0;
        a.n_tok = j->n_tok - t0 < j->tpt ? j->n_tok - t0 : j->tpt;
        a.n_grp = group - g0 < j->gpt ? group - g0 : j->gpt;
        a.pos0 = j->pos0 + t0;
        a.k = (const uint8_t *)c->k_cache + c->kv_off[j->il] + (size_t)kvh * c->kv_head[j->il];
        a.v = (const uint8_t *)c->v_cache + c->kv_off[j->il] + (size_t)kvh * c->kv_head[j->il];
        a.q = c->q + (size_t)t0 * (size_t)a.q_stride + (size_t)h0 * hd;
        a.out = c->att + (size_t)t0 * (size_t)a.out_stride + (size_t)h0 * hd;
        a.sinks = L->sinks ? L->sinks + h0 : NULL;
        c->kt->attn(&a);
    }
}

static void attention(lmq_context *c, int il, int32_t pos0, int32_t n_tok)
{
    const lmq_hparams *hp = &c->model->hp;
    const int n_kv = c->model->layers[il].n_head_kv, group = hp->n_head / n_kv;
    attn_job job = {c, il, n_tok, pos0, 1, group < LMQ_ATTN_ROWS ? group : LMQ_ATTN_ROWS, 0};
    job.tpt = LMQ_ATTN_ROWS / job.gpt;
    job.n_items = (int64_t)n_kv * ((group + job.gpt - 1) / job.gpt) * ((n_tok + job.tpt - 1) / job.tpt);
    lmq_pool_run(c->pool, attn_worker, &job);
}

/* Token t's keys and values into slot (pos0 + t) % kv_len (a ring for
 * sliding-window layers, plain positions otherwise). */
static void store_kv_row(lmq_context *c, int il, int32_t pos0, int32_t t)
{
    const int64_t kvd = (int64_t)c->model->layers[il].n_head_kv * c->model->layers[il].head_dim;
    const size_t off = c->kv_off[il] + (size_t)((pos0 + t) % c->kv_len[il]) * c->kv_head[il] *
                                           (size_t)c->model->layers[il].n_head_kv;
    const float *k = c->k + (size_t)t * (size_t)kvd, *v = c->v + (size_t)t * (size_t)kvd;
    uint8_t *kc = (uint8_t *)c->k_cache + off, *vc = (uint8_t *)c->v_cache + off;
    if (c->kv_type == LMQ_TYPE_F32) {
        memcpy(kc, k, (size_t)kvd * 4);
        memcpy(vc, v, (size_t)kvd * 4);
    } else if (c->kv_type == LMQ_TYPE_F16) {
        lmq_fp32_to_fp16_row(k, (uint16_t *)(void *)kc, kvd);
        lmq_fp32_to_fp16_row(v, (uint16_t *)(void *)vc, kvd);
    } else { /* q8_0: the activation quantizer (SIMD, the reference's bytes) of the context's table, as
              * this runs on pool threads; the head size is a multiple of 32 (lmq_context_new) */
        c->kt->from_float[LMQ_TYPE_Q8_0](k, kc, kvd);
        c->kt->from_float[LMQ_TYPE_Q8_0](v, vc, kvd);
    }
}

/* ---------------------------------------------------------------- row-wise work */

/* The element-wise and per-token work between the products, one pass over
 * the thread pool per stage; each token row is done by one thread in a
 * fixed order, so results do not depend on the number of threads. */
typedef enum row_stage {
    ROWS_ATTN_IN,  /* h = rmsnorm(x) * attn_norm */
    ROWS_QKV,      /* q, k, v biases, q/k norms, RoPE, cache store */
    ROWS_ATTN_OUT, /* h += bo; post-norm; x += h; h = rmsnorm(x) * ffn_norm */
    ROWS_ACT,      /* gate = act(gate) * up */
    ROWS_FFN_OUT,  /* post-norm; x += h; h = rmsnorm(x) * the next layer's attn_norm */
    ROWS_ATTN_GATE,/* att *= sigmoid(gate) (gated attention) */
    ROWS_SSM_IN,   /* recurrent: q, k L2-normalised (q scaled), beta = sigmoid(b), decay */
    ROWS_SSM_OUT,  /* recurrent: o = rmsnorm(o) * ssm_norm * silu(z) per value head */
    ROWS_PLE_IN,   /* every layer's per-layer input from the embedding (Gemma 4) */
    ROWS_PLE_ACT,  /* ple_g = gelu(ple_g) * the layer's input */
    ROWS_LAYER_END,/* per-layer embedding added; x *= layer scalar; h = rmsnorm(x) * the next attn_norm */
    ROWS_MOE_IN,   /* experts beside the MLP: keep rmsnorm(mlp) * post_norm_1; experts' and router's inputs */
    ROWS_MOE_OUT,  /* h = rmsnorm(experts) * post_norm_2 + the kept MLP output */
} row_stage;

typedef struct rows_job {
    lmq_context *c;
    const lmq_layer *L, *next; /* next: the following layer (NULL after the last) */
    int il;
    row_stage stage;
    int32_t n, pos0;
} rows_job;

/* Token t's inputs for every layer (Hugging Face's get_per_layer_inputs and
 * project_per_layer_inputs): c->ple holds the projection of the scaled
 * embedding and c->ple_tok the token's row of the table; each layer's slice
 * becomes (rmsnorm(proj / sqrt(n_embd)) * proj_norm + row * sqrt(ple)) / sqrt(2). */
static void ple_in_row(lmq_context *c, int32_t t)
{
    const lmq_model *m = c->model;
    const int pd = m->n_embd_ple, nl = m->hp.n_layer;
    const size_t all = (size_t)pd * (size_t)nl;
    float *p = c->ple + (size_t)t * all;
    const float *row = c->ple_tok + (size_t)t * all;
    const float ps = 1.0f / sqrtf((float)m->hp.n_embd), es = sqrtf((float)pd), s2 = (float)M_SQRT1_2;
    for (int il = 0; il < nl; il++) {
        float *v = p + (size_t)il * (size_t)pd;
        const float *r = row + (size_t)il * (size_t)pd;
        for (int i = 0; i < pd; i++) v[i] *= ps;
        rmsnorm(v, v, m->ple_proj_norm, pd, m->hp.rms_eps);
        for (int i = 0; i < pd; i++) v[i] = (v[i] + r[i] * es) * s2;
    }
}

/* Recurrent layer, token t, before the delta rule: q and k of every key
 * head L2-normalised (eps 1e-6 as Hugging Face's l2norm; llama.cpp uses
 * rms_norm_eps, which is 1e-6 in every Qwen3.5 checkpoint), q scaled by
 * 1/sqrt(dk); beta = sigmoid(b);
 * decay = exp(A softplus(a + dt_bias)), A = -exp(A_log) as stored. */
static void ssm_in_row(lmq_context *c, const lmq_layer *L, int32_t t)
{
    const lmq_model *m = c->model;
    const lmq_ssm_dims *sd = &m->ssm;
    const size_t C = (size_t)sd->channels, dk = (size_t)sd->dk;
    float *u = c->ssm_conv + (size_t)t * C;
    const float qscale = 1.0f / sqrtf((float)sd->dk);
    for (int part = 0; part < 2; part++)
        for (int hh = 0; hh < sd->nk; hh++) {
            float *v = u + (size_t)part * (size_t)sd->nk * dk + (size_t)hh * dk;
            double ss = 0;
            for (size_t i = 0; i < dk; i++) ss += (double)v[i] * v[i];
            const float sc = (float)(1.0 / sqrt(ss + 1e-6)) * (part == 0 ? qscale : 1.0f);
            for (size_t i = 0; i < dk; i++) v[i] *= sc;
        }
    float *b = c->ssm_beta + (size_t)t * (size_t)sd->nv, *a = c->ssm_decay + (size_t)t * (size_t)sd->nv;
    for (int hh = 0; hh < sd->nv; hh++) {
        b[hh] = 1.0f / (1.0f + expf(-b[hh]));
        const float z = a[hh] + L->ssm_dt[hh];
        const float sp = z > 20.0f ? z : log1pf(expf(z)); /* softplus, torch's threshold */
        a[hh] = expf(L->ssm_a[hh] * sp);
    }
}

/* Recurrent layer, token t, after the delta rule: per value head
 * rmsnorm(o) * ssm_norm (a plain weight) * silu(z). */
static void ssm_out_row(lmq_context *c, const lmq_layer *L, int32_t t)
{
    const lmq_model *m = c->model;
    const lmq_ssm_dims *sd = &m->ssm;
    const size_t inner = (size_t)sd->nv * (size_t)sd->dv;
    float *o = c->ssm_o + (size_t)t * inner;
    const float *z = c->ssm_z + (size_t)t * inner;
    for (int hh = 0; hh < sd->nv; hh++) {
        float *oh = o + (size_t)hh * (size_t)sd->dv;
        const float *zh = z + (size_t)hh * (size_t)sd->dv;
        rmsnorm(oh, oh, L->ssm_norm, sd->dv, m->hp.rms_eps);
        for (int i = 0; i < sd->dv; i++) oh[i] *= zh[i] / (1.0f + expf(-zh[i]));
    }
}

static void rows_token(const rows_job *j, int32_t t)
{
    lmq_context *c = j->c;
    const lmq_layer *L = j->L;
    const lmq_hparams *hp = &c->model->hp;
    const int d = hp->n_embd, hd = L->head_dim;
    const size_t qd = (size_t)hp->n_head * hd, kvd = (size_t)L->n_head_kv * hd;
    const bool own_kv = L->kv_src == j->il;
    float *x = c->x + (size_t)t * d, *h = c->h + (size_t)t * d;
    switch (j->stage) {
    case ROWS_ATTN_IN:
        rmsnorm(h, x, L->attn_norm, d, hp->rms_eps);
        break;
    case ROWS_QKV: {
        float *q = c->q + (size_t)t * qd, *k = c->k + (size_t)t * kvd;
        if (L->attn_gate) { /* per head [q, gate] rows of the projection */
            const float *qg = c->qg + (size_t)t * 2 * qd;
            float *g = c->agate + (size_t)t * qd;
            for (int hh = 0; hh < hp->n_head; hh++) {
                memcpy(q + (size_t)hh * hd, qg + (size_t)hh * 2 * hd, (size_t)hd * sizeof(float));
                memcpy(g + (size_t)hh * hd, qg + (size_t)hh * 2 * hd + hd, (size_t)hd * sizeof(float));
            }
        }
        float *v = c->v + (size_t)t * kvd;
        add_bias(q, L->bq, 1, (int64_t)qd);
        add_bias(k, L->bk, 1, (int64_t)kvd);
        add_bias(v, L->bv, 1, (int64_t)kvd);
        if (L->k_eq_v) memcpy(v, k, kvd * sizeof(float)); /* the raw keys (Gemma 4's K = V layers) */
        norm_rows(q, 1, (int64_t)qd, L->q_norm, L->q_norm_len, hp->rms_eps);
        norm_rows(k, 1, (int64_t)kvd, L->k_norm, L->k_norm_len, hp->rms_eps);
        if (c->model->arch->v_norm) /* per head, no weight */
            for (size_t i = 0; i < kvd; i += (size_t)hd) rmsnorm(v + i, v + i, NULL, hd, hp->rms_eps);
        const float *inv = L->swa ? c->rope_inv_swa : c->rope_inv;
        if (!L->nope) {
            rope_apply(q, hp->n_head, hd, L->n_rot, j->pos0 + t, inv, hp->rope_layout, hp->rope_attn_factor);
            if (own_kv)
                rope_apply(k, L->n_head_kv, hd, L->n_rot, j->pos0 + t, inv, hp->rope_layout, hp->rope_attn_factor);
        }
        if (c->model->attn_temp_beta > 0) { /* Llama 4's query temperature (Ministral 3), after RoPE */
            const float sc = 1.0f + c->model->attn_temp_beta *
                                        logf(1.0f + floorf((float)(j->pos0 + t) / (float)hp->rope_orig_ctx));
            for (size_t i = 0; i < qd; i++) q[i] *= sc;
        }
        if (own_kv) store_kv_row(c, j->il, j->pos0, t); /* a shared-KV layer reads its source's */
        break;
    }
    case ROWS_ATTN_OUT:
        add_bias(h, L->bo, 1, d);
        norm_rows(h, 1, d, L->attn_post_norm, d, hp->rms_eps);
        for (int i = 0; i < d; i++) x[i] += h[i];
        rmsnorm(h, x, L->ffn_norm, d, hp->rms_eps);
        break;
    case ROWS_ACT: {
        const size_t ff = (size_t)L->n_ff;
        float *g = c->gate + (size_t)t * ff;
        const float *u = c->up + (size_t)t * ff;
        glu(hp->act, g, u, ff);
        break;
    }
    case ROWS_FFN_OUT:
        norm_rows(h, 1, d, L->ffn_post_norm, d, hp->rms_eps);
        for (int i = 0; i < d; i++) x[i] += h[i];
        if (j->next && !L->ple_gate.data && !L->out_scale) rmsnorm(h, x, j->next->attn_norm, d, hp->rms_eps);
        break;
    case ROWS_PLE_IN:
        ple_in_row(c, t);
        break;
    case ROWS_PLE_ACT: {
        const size_t pd = (size_t)c->model->n_embd_ple;
        float *g = c->ple_g + (size_t)t * pd;
        const float *in = c->ple + ((size_t)t * (size_t)hp->n_layer + (size_t)j->il) * pd;
        for (size_t i = 0; i < pd; i++) g[i] = gelu_tanh(g[i]) * in[i];
        break;
    }
    case ROWS_MOE_IN: {
        float *keep = c->moe_sh + (size_t)t * d, *r = c->moe_rin + (size_t)t * d;
        rmsnorm(keep, h, L->ffn_post_norm_1, d, hp->rms_eps);
        rmsnorm(h, x, L->ffn_pre_norm_2, d, hp->rms_eps);
        rmsnorm(r, x, NULL, d, hp->rms_eps);
        const float rs = 1.0f / sqrtf((float)d);
        for (int i = 0; i < d; i++) r[i] *= L->gate_inp_scale[i] * rs;
        break;
    }
    case ROWS_MOE_OUT: {
        const float *keep = c->moe_sh + (size_t)t * d;
        rmsnorm(h, h, L->ffn_post_norm_2, d, hp->rms_eps);
        for (int i = 0; i < d; i++) h[i] += keep[i];
        break;
    }
    case ROWS_LAYER_END:
        if (L->ple_gate.data) {
            rmsnorm(h, h, L->ple_post_norm, d, hp->rms_eps);
            for (int i = 0; i < d; i++) x[i] += h[i];
        }
        if (L->out_scale)
            for (int i = 0; i < d; i++) x[i] *= L->out_scale[0];
        if (j->next) rmsnorm(h, x, j->next->attn_norm, d, hp->rms_eps);
        break;
    case ROWS_ATTN_GATE: {
        float *o = c->att + (size_t)t * qd;
        const float *g = c->agate + (size_t)t * qd;
        for (size_t i = 0; i < qd; i++) o[i] *= 1.0f / (1.0f + expf(-g[i]));
        break;
    }
    case ROWS_SSM_IN:
        ssm_in_row(c, L, t);
        break;
    case ROWS_SSM_OUT:
        ssm_out_row(c, L, t);
        break;
    }
}

static void rows_worker(void *arg, int ith, int nth)
{
    const rows_job *j = arg;
    const int32_t t0 = (int32_t)((int64_t)j->n * ith / nth), t1 = (int32_t)((int64_t)j->n * (ith + 1) / nth);
    for (int32_t t = t0; t < t1; t++) rows_token(j, t);
}

/* Below this many tokens the hand-out to the pool costs more than it saves. */
#define ROWS_MIN_PARALLEL 4

static void rows_run(lmq_context *c, const lmq_layer *L, int il, row_stage stage, int32_t pos0, int32_t n)
{
    const lmq_hparams *hp = &c->model->hp;
    rows_job j = {c, L, il + 1 < hp->n_layer ? &c->model->layers[il + 1] : NULL, il, stage, n, pos0};
    if (n < ROWS_MIN_PARALLEL)
        rows_worker(&j, 0, 1);
    else
        lmq_pool_run(c->pool, rows_worker, &j);
}


/* ---------------------------------------------------------------- recurrent layers */

typedef struct rec_job {
    lmq_context *c;
    const lmq_layer *L;
    float *st;       /* this layer's state: conv ((K-1) x C), then nv heads of dk x dv */
    int32_t n;
} rec_job;

/* Channels in pieces of a fixed width, taken round-robin: each channel's
 * arithmetic does not depend on the split. */
#define CONV_PIECE 256

static void conv_worker(void *arg, int ith, int nth)
{
    const rec_job *j = arg;
    const lmq_ssm_dims *sd = &j->c->model->ssm;
    for (int32_t c0 = ith * CONV_PIECE; c0 < sd->channels; c0 += nth * CONV_PIECE) {
        lmq_conv_args a = {.w = j->L->ssm_conv, .state = j->st, .x = j->c->ssm_qkv, .x_stride = sd->channels,
                           .y = j->c->ssm_conv, .y_stride = sd->channels, .C = sd->channels, .K = sd->conv,
                           .c0 = c0, .c1 = c0 + CONV_PIECE < sd->channels ? c0 + CONV_PIECE : sd->channels,
                           .n_tok = j->n, .silu = true};
        j->c->kt->ssm_conv(&a);
    }
}

/* One value head per item: head hh reads key head hh % nk (tiled order). */
static void delta_worker(void *arg, int ith, int nth)
{
    const rec_job *j = arg;
    lmq_context *c = j->c;
    const lmq_ssm_dims *sd = &c->model->ssm;
    const size_t C = (size_t)sd->channels, dk = (size_t)sd->dk, dv = (size_t)sd->dv;
    float *S0 = j->st + (size_t)(sd->conv - 1) * C;
    for (int hh = ith; hh < sd->nv; hh += nth) {
        const size_t kh = (size_t)(hh % sd->nk);
        lmq_delta_args a = {.S = S0 + (size_t)hh * dk * dv, .dk = sd->dk, .dv = sd->dv, .n_tok = j->n,
                            .q = c->ssm_conv + kh * dk, .k = c->ssm_conv + (size_t)sd->nk * dk + kh * dk,
                            .qk_stride = (int64_t)C,
                            .v = c->ssm_conv + 2 * (size_t)sd->nk * dk + (size_t)hh * dv, .v_stride = (int64_t)C,
                            .beta = c->ssm_beta + hh, .decay = c->ssm_decay + hh, .g_stride = sd->nv,
                            .o = c->ssm_o + (size_t)hh * dv, .o_stride = (int64_t)sd->nv * (int64_t)dv};
        c->kt->delta_rule(&a);
    }
}

/* A Gated DeltaNet block on c->h (the normed input), its output into c->h. */
static lmq_status recurrent(lmq_context *c, const lmq_layer *L, int il, int32_t pos0, int32_t n)
{
    lmq_status s;
    if ((s = linear(c, &L->ssm_in, c->h, n, c->ssm_qkv))) return s;
    if ((s = linear(c, &L->ssm_z, c->h, n, c->ssm_z))) return s;
    if ((s = linear(c, &L->ssm_beta, c->h, n, c->ssm_beta))) return s;
    if ((s = linear(c, &L->ssm_alpha, c->h, n, c->ssm_decay))) return s;
    rec_job j = {c, L, c->state + (size_t)c->rec_index[il] * c->state_floats, n};
    lmq_pool_run(c->pool, conv_worker, &j);
    rows_run(c, L, il, ROWS_SSM_IN, pos0, n);
    lmq_pool_run(c->pool, delta_worker, &j);
    rows_run(c, L, il, ROWS_SSM_OUT, pos0, n);
    return linear(c, &L->ssm_out, c->ssm_o, n, c->h);
}

/* ================================================================ eval */

static lmq_status eval_scoped(lmq_context *c, const int32_t *tokens, int32_t n, int32_t n_logits);

/* The context's kernel settings on this thread while it evaluates. */
lmq_status lmq_eval(lmq_context *c, const int32_t *tokens, int32_t n, int32_t n_logits)
{
    lmq_kernel_scope scope = lmq_kernel_scope_enter(c->isa, c->gemm);
    c->kt = lmq_kernels();
    lmq_status s = eval_scoped(c, tokens, n, n_logits);
    lmq_kernel_scope_leave(scope);
    return s;
}

static lmq_status eval_scoped(lmq_context *c, const int32_t *tokens, int32_t n, int32_t n_logits)
{
    lmq_model *m = c->model;
    const lmq_hparams *hp = &m->hp;
    if (n <= 0) return lmq_error(LMQ_ERR_INVALID_ARG, "eval: empty batch");
    if (!tokens && !c->x_io) return lmq_error(LMQ_ERR_INVALID_ARG, "eval: no tokens");
    if (n > c->n_batch) return lmq_error(LMQ_ERR_LIMIT, "eval: batch of %d tokens exceeds n_batch %d", n, c->n_batch);
    if (c->n_past + n > c->n_ctx)
        return lmq_error(LMQ_ERR_LIMIT, "context full: %d tokens in the cache + %d new exceed the context size %d",
                         c->n_past, n, c->n_ctx);
    if (n_logits < 0 || n_logits > n) n_logits = n;
    if (n_logits > c->n_logits_cap)
        return lmq_error(LMQ_ERR_LIMIT, "eval: %d logit rows requested, context keeps %d", n_logits, c->n_logits_cap);
    for (int32_t i = 0; tokens && i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
            return lmq_error(LMQ_ERR_INVALID_ARG, "eval: token id %d out of range [0, %d)", tokens[i], hp->n_vocab);

    const int d = hp->n_embd;
    const int32_t pos0 = c->n_past;
    lmq_status s;
    if (c->state) {
        if (pos0 == 0) { /* a new sequence: zero state, no snapshots */
            memset(c->state, 0, lmq_context_state_bytes(c));
            for (int i = 0; i < c->n_snaps; i++) c->snaps[i].pos = -1;
        } else if (n > 1) {
            snapshot_take(c); /* a turn boundary: where an edit of what follows rewinds to */
        }
    }
    size_t erow = (size_t)lmq_row_size(m->tok_embd.type, d);
    if (!tokens) memcpy(c->x, c->x_io, (size_t)n * (size_t)d * sizeof(float)); /* lmq_eval_layers */
    for (int32_t t = 0; tokens && t < n; t++) {
        float *xt = c->x + (size_t)t * d;
        s = lmq_dequantize_row(m->tok_embd.type, (const uint8_t *)m->tok_embd.data + (size_t)tokens[t] * erow, xt, d);
        if (s) return s;
        if (hp->embd_scale != 1.0f)
            for (int i = 0; i < d; i++) xt[i] *= hp->embd_scale;
    }
    const int il_lo = c->x_io ? c->layer_lo : 0, il_hi = c->x_io ? c->layer_hi : hp->n_layer;
    if (m->n_embd_ple > 0 && il_lo < il_hi) { /* per-layer inputs from the scaled embedding and the token */
        if (!tokens) return lmq_error(LMQ_ERR_UNSUPPORTED, "eval_layers: per-layer embeddings (Gemma 4) need the tokens");
        if ((s = linear(c, &m->ple_model_proj, c->x, n, c->ple))) return s;
        const size_t all = (size_t)m->n_embd_ple * (size_t)hp->n_layer;
        const size_t prow = (size_t)lmq_row_size(m->ple_embd.type, (int64_t)all);
        for (int32_t t = 0; t < n; t++)
            if ((s = lmq_dequantize_row(m->ple_embd.type, (const uint8_t *)m->ple_embd.data + (size_t)tokens[t] * prow,
                                        c->ple_tok + (size_t)t * all, (int64_t)all)))
                return s;
        rows_run(c, &m->layers[0], 0, ROWS_PLE_IN, pos0, n);
    }
    for (int il = il_lo; il < il_hi; il++) {
        const lmq_layer *L = &m->layers[il];
        if (il == il_lo) rows_run(c, L, il, ROWS_ATTN_IN, pos0, n); /* later layers: done by ROWS_FFN_OUT */
        if (L->rec) {
            if ((s = recurrent(c, L, il, pos0, n))) return s;
        } else {
            if ((s = linear(c, &L->wq, c->h, n, L->attn_gate ? c->qg : c->q))) return s;
            if (L->wk.data && (s = linear(c, &L->wk, c->h, n, c->k))) return s; /* none: shared KV */
            if (L->wv.data && (s = linear(c, &L->wv, c->h, n, c->v))) return s; /* none: shared KV or K = V */
            rows_run(c, L, il, ROWS_QKV, pos0, n);
            attention(c, il, pos0, n);
            if (L->attn_gate) rows_run(c, L, il, ROWS_ATTN_GATE, pos0, n);
            if ((s = linear(c, &L->wo, c->att, n, c->h))) return s;
        }
        rows_run(c, L, il, ROWS_ATTN_OUT, pos0, n);
        if (!L->moe || L->moe_dense) {
            if ((s = linear(c, &L->w_gate, c->h, n, c->gate))) return s;
            if ((s = linear(c, &L->w_up, c->h, n, c->up))) return s;
            rows_run(c, L, il, ROWS_ACT, pos0, n);
            if ((s = linear(c, &L->w_down, c->gate, n, c->h))) return s;
        }
        if (L->moe_dense) { /* Gemma 4: the experts beside the MLP, routed from the residual */
            rows_run(c, L, il, ROWS_MOE_IN, pos0, n);
            if ((s = moe_ffn(c, L, n, c->moe_rin))) return s;
            rows_run(c, L, il, ROWS_MOE_OUT, pos0, n);
        } else if (L->moe) {
            if ((s = moe_ffn(c, L, n, NULL))) return s;
        }
        rows_run(c, L, il, ROWS_FFN_OUT, pos0, n);
        if (L->ple_gate.data) {
            if ((s = linear(c, &L->ple_gate, c->x, n, c->ple_g))) return s;
            rows_run(c, L, il, ROWS_PLE_ACT, pos0, n);
            if ((s = linear(c, &L->ple_proj, c->ple_g, n, c->h))) return s;
        }
        if (L->ple_gate.data || L->out_scale) rows_run(c, L, il, ROWS_LAYER_END, pos0, n);
    }
    int32_t first = n - n_logits;
    for (int32_t t = first; t < n; t++)
        rmsnorm(c->h + (size_t)(t - first) * d, c->x + (size_t)t * d, m->output_norm, d, hp->rms_eps);
    if (n_logits > 0 && (s = linear(c, &m->output, c->h, n_logits, c->logits))) return s;
    if (hp->final_softcap > 0) {
        const float cap = hp->final_softcap;
        for (size_t i = 0; i < (size_t)n_logits * (size_t)hp->n_vocab; i++) c->logits[i] = cap * tanhf(c->logits[i] / cap);
    }
    c->n_logits = n_logits;
    c->n_past += n;
    if (c->state && n > 1) snapshot_take(c); /* the end of a prompt */
    /* rings: positions below n_past - ring are overwritten from now on */
    if (c->ring_min < c->n_ctx && c->n_past - c->ring_min > c->swa_lo) c->swa_lo = c->n_past - c->ring_min;
    return LMQ_OK;
}

/* ================================================================ one block at a time */

lmq_status lmq_eval_layers(lmq_context *c, const int32_t *tokens, float *x, int32_t n, int32_t il0, int32_t il1)
{
    const lmq_hparams *hp = &c->model->hp;
    if (!x || il0 < 0 || il1 < il0 || il1 > hp->n_layer)
        return lmq_error(LMQ_ERR_INVALID_ARG, "eval_layers: layers [%d, %d) of %d", il0, il1, hp->n_layer);
    c->layer_lo = il0;
    c->layer_hi = il1;
    c->x_io = x;
    const bool head = il0 == hp->n_layer && !tokens; /* the output head alone */
    lmq_status s = lmq_eval(c, tokens, n, head ? n : 0);
    c->x_io = NULL;
    if (!s) memcpy(x, c->x, (size_t)n * (size_t)hp->n_embd * sizeof(float));
    return s;
}
