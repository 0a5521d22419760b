/* Every block feature of the families (formats/arch.c) against an
 * independent double-precision reference forward on tiny random models:
 * q/k/v/o biases, q/k RMSNorm per head and over the whole projection,
 * explicit head_dim != n_embd / n_head, sandwich norms, tanh-GeGLU, fused
 * qkv and gate|up, partial rotary, LongRoPE (factors, attention factor,
 * long/short choice), linear RoPE scaling on global layers only, a separate
 * RoPE base for sliding layers, per-layer sliding windows (ring caches with
 * a small batch, rewinds inside and beyond what the ring holds), attention
 * and final soft-caps, embedding and query scales. Each model is evaluated
 * in one batch, token by token, and in small batches through the rings. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_runtime.h"
#include "testutil.h"

#define VOCAB 61
#define N_TOK 21
#define MAXL 4

typedef struct feat {
    const char *label, *arch;
    int d, layers, heads, kv, hd, ff, n_rot;
    bool bias_qkv, bias_o, sandwich, gelu, fused, tied, embd_scale, longrope;
    int qk_norm;             /* 0 none, 1 per head, 2 whole projection */
    int swa;                 /* window (keys incl. the current one), 0 none */
    bool swa_layer[MAXL];    /* written as lmq.attention.sliding_window_layers */
    float attn_cap, final_cap, qscale; /* qscale 0: 1/sqrt(hd) */
    float theta, theta_swa;  /* theta_swa 0: same */
    float linear;            /* linear RoPE factor (global layers only when theta_swa) */
    int orig_ctx;            /* LongRoPE original context */
    int n_exp, k_exp, ff_exp;/* mixture of experts (n_exp 0: dense) */
    bool exp_norm;           /* renormalise the k weights */
    bool write_norm_key;     /* write <arch>.expert_weights_norm */
    unsigned dense_mask;     /* MoE models: layers (bits) that keep a dense FFN */
    int ff_sh;               /* shared expert width (Qwen2-MoE), 0: none */
} feat;

typedef struct model_w {
    float *embd, *out, *onorm, *lf, *sf;
    float *q[MAXL], *k[MAXL], *v[MAXL], *o[MAXL], *g[MAXL], *u[MAXL], *dn[MAXL];
    float *an[MAXL], *fn[MAXL], *pan[MAXL], *pfn[MAXL], *qn[MAXL], *kn[MAXL];
    float *bq[MAXL], *bk[MAXL], *bv[MAXL], *bo[MAXL];
    float *router[MAXL], *eg[MAXL], *eu[MAXL], *ed[MAXL]; /* experts stacked: [n_exp][rows][cols] */
    float *sg[MAXL], *su[MAXL], *sd[MAXL], *sgate[MAXL];   /* shared expert and its gate vector */
} model_w;

static bool is_moe(const feat *f, int l)
{
    return f->n_exp > 0 && !(f->dense_mask >> l & 1);
}

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
    float *p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = frand() * scale + add;
    return p;
}

static void make(const feat *f, model_w *w)
{
    memset(w, 0, sizeof *w);
    const int qd = f->heads * f->hd, kvd = f->kv * f->hd;
    w->embd = rnd((size_t)VOCAB * f->d, 1.0f, 0);
    w->out = f->tied ? w->embd : rnd((size_t)VOCAB * f->d, 0.5f, 0);
    w->onorm = rnd(f->d, 0.4f, 1);
    if (f->longrope) {
        w->lf = rnd(f->n_rot / 2, 3.0f, 2.6f); /* positive divisors */
        w->sf = rnd(f->n_rot / 2, 0.6f, 1.4f);
    }
    for (int l = 0; l < f->layers; l++) {
        w->q[l] = rnd((size_t)qd * f->d, 0.5f, 0);
        w->k[l] = rnd((size_t)kvd * f->d, 0.5f, 0);
        w->v[l] = rnd((size_t)kvd * f->d, 0.5f, 0);
        w->o[l] = rnd((size_t)f->d * qd, 0.4f, 0);
        w->g[l] = rnd((size_t)f->ff * f->d, 0.5f, 0);
        w->u[l] = rnd((size_t)f->ff * f->d, 0.5f, 0);
        w->dn[l] = rnd((size_t)f->d * f->ff, 0.4f, 0);
        w->an[l] = rnd(f->d, 0.3f, 1);
        w->fn[l] = rnd(f->d, 0.3f, 1);
        if (f->sandwich) w->pan[l] = rnd(f->d, 0.3f, 1), w->pfn[l] = rnd(f->d, 0.3f, 1);
        if (f->qk_norm) {
            w->qn[l] = rnd(f->qk_norm == 1 ? f->hd : qd, 0.4f, 1);
            w->kn[l] = rnd(f->qk_norm == 1 ? f->hd : kvd, 0.4f, 1);
        }
        if (f->bias_qkv) w->bq[l] = rnd(qd, 0.6f, 0), w->bk[l] = rnd(kvd, 0.6f, 0), w->bv[l] = rnd(kvd, 0.6f, 0);
        if (f->bias_o) w->bo[l] = rnd(f->d, 0.6f, 0);
        if (is_moe(f, l)) {
            w->router[l] = rnd((size_t)f->n_exp * f->d, 1.5f, 0);
            w->eg[l] = rnd((size_t)f->n_exp * f->ff_exp * f->d, 0.5f, 0);
            w->eu[l] = rnd((size_t)f->n_exp * f->ff_exp * f->d, 0.5f, 0);
            w->ed[l] = rnd((size_t)f->n_exp * f->d * f->ff_exp, 0.4f, 0);
            if (f->ff_sh) {
                w->sg[l] = rnd((size_t)f->ff_sh * f->d, 0.5f, 0);
                w->su[l] = rnd((size_t)f->ff_sh * f->d, 0.5f, 0);
                w->sd[l] = rnd((size_t)f->d * f->ff_sh, 0.4f, 0);
                w->sgate[l] = rnd(f->d, 1.0f, 0);
            }
        }
    }
}

static void unmake(const feat *f, model_w *w)
{
    for (int l = 0; l < f->layers; l++) {
        float *all[] = {w->q[l], w->k[l], w->v[l], w->o[l], w->g[l], w->u[l], w->dn[l], w->an[l], w->fn[l],
                        w->pan[l], w->pfn[l], w->qn[l], w->kn[l], w->bq[l], w->bk[l], w->bv[l], w->bo[l],
                        w->router[l], w->eg[l], w->eu[l], w->ed[l], w->sg[l], w->su[l], w->sd[l], w->sgate[l]};
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

static void write_model(const feat *f, const model_w *w, const char *path)
{
    const int qd = f->heads * f->hd, kvd = f->kv * f->hd;
    lmq_writer *wr;
    T_CHECK(lmq_writer_open(path, NULL, &wr) == LMQ_OK, "writer");
    lmq_meta *m = lmq_writer_meta(wr);
    lmq_meta_set_str(m, "general.architecture", f->arch);
    key_u32(m, f, "block_count", f->layers);
    key_u32(m, f, "embedding_length", f->d);
    key_u32(m, f, "feed_forward_length", f->ff);
    key_u32(m, f, "attention.head_count", f->heads);
    key_u32(m, f, "attention.head_count_kv", f->kv);
    key_u32(m, f, "attention.key_length", f->hd);
    key_u32(m, f, "attention.value_length", f->hd);
    key_u32(m, f, "rope.dimension_count", f->n_rot);
    key_u32(m, f, "context_length", 64);
    key_f32(m, f, "attention.layer_norm_rms_epsilon", 1e-5f);
    key_f32(m, f, "rope.freq_base", f->theta);
    if (f->theta_swa > 0) key_f32(m, f, "rope.freq_base_swa", f->theta_swa);
    if (f->qscale > 0) key_f32(m, f, "attention.scale", f->qscale);
    if (f->attn_cap > 0) key_f32(m, f, "attn_logit_softcapping", f->attn_cap);
    if (f->final_cap > 0) key_f32(m, f, "final_logit_softcapping", f->final_cap);
    if (f->linear > 0) {
        char k[128];
        snprintf(k, sizeof k, "%s.rope.scaling.type", f->arch);
        lmq_meta_set_str(m, k, "linear");
        key_f32(m, f, "rope.scaling.factor", f->linear);
    }
    if (f->longrope) {
        key_u32(m, f, "rope.scaling.original_context_length", (uint32_t)f->orig_ctx);
        key_f32(m, f, "rope.scaling.attn_factor", 1.25f);
        add(wr, "rope_factors_long.weight", w->lf, f->n_rot / 2, 0);
        add(wr, "rope_factors_short.weight", w->sf, f->n_rot / 2, 0);
    }
    if (f->swa) {
        key_u32(m, f, "attention.sliding_window", (uint32_t)f->swa);
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
    lmq_meta_set_str(m, "lmq.rope.layout", "neox");
    add(wr, "token_embd.weight", w->embd, f->d, VOCAB);
    if (!f->tied) add(wr, "output.weight", w->out, f->d, VOCAB);
    add(wr, "output_norm.weight", w->onorm, f->d, 0);
    char nm[64];
    for (int l = 0; l < f->layers; l++) {
#define T(sfx, data, in, out)                             \
    do {                                                  \
        snprintf(nm, sizeof nm, "blk.%d." sfx, l);        \
        add(wr, nm, data, in, out);                       \
    } while (0)
        if (f->fused) {
            float *qkv = malloc((size_t)(qd + 2 * kvd) * f->d * sizeof(float));
            memcpy(qkv, w->q[l], (size_t)qd * f->d * 4);
            memcpy(qkv + (size_t)qd * f->d, w->k[l], (size_t)kvd * f->d * 4);
            memcpy(qkv + (size_t)(qd + kvd) * f->d, w->v[l], (size_t)kvd * f->d * 4);
            T("attn_qkv.weight", qkv, f->d, qd + 2 * kvd);
            free(qkv);
            float *gu = malloc((size_t)2 * f->ff * f->d * sizeof(float));
            memcpy(gu, w->g[l], (size_t)f->ff * f->d * 4);
            memcpy(gu + (size_t)f->ff * f->d, w->u[l], (size_t)f->ff * f->d * 4);
            T("ffn_up.weight", gu, f->d, 2 * f->ff);
            free(gu);
        } else {
            T("attn_q.weight", w->q[l], f->d, qd);
            T("attn_k.weight", w->k[l], f->d, kvd);
            T("attn_v.weight", w->v[l], f->d, kvd);
            if (!is_moe(f, l)) {
                T("ffn_gate.weight", w->g[l], f->d, f->ff);
                T("ffn_up.weight", w->u[l], f->d, f->ff);
            }
        }
        T("attn_output.weight", w->o[l], qd, f->d);
        if (is_moe(f, l)) {
            T("ffn_gate_inp.weight", w->router[l], f->d, f->n_exp);
            snprintf(nm, sizeof nm, "blk.%d.ffn_gate_exps.weight", l);
            add3(wr, nm, w->eg[l], f->d, f->ff_exp, f->n_exp);
            snprintf(nm, sizeof nm, "blk.%d.ffn_up_exps.weight", l);
            add3(wr, nm, w->eu[l], f->d, f->ff_exp, f->n_exp);
            snprintf(nm, sizeof nm, "blk.%d.ffn_down_exps.weight", l);
            add3(wr, nm, w->ed[l], f->ff_exp, f->d, f->n_exp);
            if (f->ff_sh) {
                T("ffn_gate_shexp.weight", w->sg[l], f->d, f->ff_sh);
                T("ffn_up_shexp.weight", w->su[l], f->d, f->ff_sh);
                T("ffn_down_shexp.weight", w->sd[l], f->ff_sh, f->d);
                T("ffn_gate_inp_shexp.weight", w->sgate[l], f->d, 0);
            }
        } else {
            T("ffn_down.weight", w->dn[l], f->ff, f->d);
        }
        T("attn_norm.weight", w->an[l], f->d, 0);
        T("ffn_norm.weight", w->fn[l], f->d, 0);
        if (f->sandwich) {
            T("post_attention_norm.weight", w->pan[l], f->d, 0);
            T("post_ffw_norm.weight", w->pfn[l], f->d, 0);
        }
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
#undef T
    }
    T_CHECK(lmq_writer_finish(wr) == LMQ_OK, "finish: %s", lmq_last_error());
}

/* ------------------------------------------------ reference (double, whole sequence) */

static void matvec(const float *W, const double *x, int in, int out, double *y)
{
    for (int o = 0; o < out; o++) {
        double s = 0;
        for (int i = 0; i < in; i++) s += (double)W[(size_t)o * in + i] * x[i];
        y[o] = s;
    }
}

static void rms(double *x, const float *w, int n)
{
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    double sc = 1.0 / sqrt(ss / n + 1e-5);
    for (int i = 0; i < n; i++) x[i] = x[i] * sc * w[i];
}

/* neox pairs (i, i + n_rot/2) over the first n_rot dims of a head */
static void rope(double *v, const feat *f, int pos, bool swa, const float *factors, double mscale)
{
    double theta = swa && f->theta_swa > 0 ? f->theta_swa : f->theta;
    bool scaled = !(swa && f->theta_swa > 0);
    for (int i = 0; i < f->n_rot / 2; i++) {
        double fr = pow(theta, -2.0 * i / f->n_rot);
        if (factors) fr /= factors[i];
        if (scaled && f->linear > 0) fr /= f->linear;
        double a = pos * fr, c = cos(a) * mscale, s = sin(a) * mscale;
        double x0 = v[i], x1 = v[i + f->n_rot / 2];
        v[i] = x0 * c - x1 * s;
        v[i + f->n_rot / 2] = x0 * s + x1 * c;
    }
}

static void ref_forward(const feat *f, const model_w *w, const int *toks, int n, int n_ctx, double *logits)
{
    const int d = f->d, hd = f->hd, qd = f->heads * hd, kvd = f->kv * hd;
    double *x = calloc((size_t)n * d, sizeof(double)), *h = malloc(sizeof(double) * (size_t)(d > f->ff ? d : f->ff) * 2);
    double *Q = malloc(sizeof(double) * (size_t)n * qd), *K = malloc(sizeof(double) * (size_t)n * kvd);
    double *V = malloc(sizeof(double) * (size_t)n * kvd), *a = malloc(sizeof(double) * qd);
    const int ffm = f->ff > f->ff_exp ? (f->ff > f->ff_sh ? f->ff : f->ff_sh) : (f->ff_exp > f->ff_sh ? f->ff_exp : f->ff_sh);
    double *o = malloc(sizeof(double) * d), *g = malloc(sizeof(double) * ffm), *u = malloc(sizeof(double) * ffm);
    double *sc = malloc(sizeof(double) * n);
    const float *factors = f->longrope ? (n_ctx > f->orig_ctx ? w->lf : w->sf) : NULL;
    const double mscale = f->longrope ? 1.25 : 1.0;
    const double qs = f->qscale > 0 ? f->qscale : 1.0 / sqrt((double)hd);
    for (int t = 0; t < n; t++)
        for (int i = 0; i < d; i++) x[(size_t)t * d + i] = w->embd[(size_t)toks[t] * d + i] * (f->embd_scale ? sqrt((double)d) : 1.0);
    for (int l = 0; l < f->layers; l++) {
        const bool swa = f->swa > 0 && f->swa_layer[l];
        for (int t = 0; t < n; t++) {
            memcpy(h, x + (size_t)t * d, sizeof(double) * d);
            rms(h, w->an[l], d);
            double *q = Q + (size_t)t * qd, *k = K + (size_t)t * kvd, *v = V + (size_t)t * kvd;
            matvec(w->q[l], h, d, qd, q);
            matvec(w->k[l], h, d, kvd, k);
            matvec(w->v[l], h, d, kvd, v);
            if (w->bq[l]) {
                for (int i = 0; i < qd; i++) q[i] += w->bq[l][i];
                for (int i = 0; i < kvd; i++) k[i] += w->bk[l][i], v[i] += w->bv[l][i];
            }
            if (f->qk_norm == 1) {
                for (int hh = 0; hh < f->heads; hh++) rms(q + hh * hd, w->qn[l], hd);
                for (int hh = 0; hh < f->kv; hh++) rms(k + hh * hd, w->kn[l], hd);
            } else if (f->qk_norm == 2) {
                rms(q, w->qn[l], qd);
                rms(k, w->kn[l], kvd);
            }
            for (int hh = 0; hh < f->heads; hh++) rope(q + hh * hd, f, t, swa, factors, mscale);
            for (int hh = 0; hh < f->kv; hh++) rope(k + hh * hd, f, t, swa, factors, mscale);
        }
        for (int t = 0; t < n; t++) {
            int lo = swa && t - f->swa + 1 > 0 ? t - f->swa + 1 : 0;
            for (int hh = 0; hh < f->heads; hh++) {
                int kh = hh / (f->heads / f->kv);
                double mx = -1e300, sum = 0;
                for (int j = lo; j <= t; j++) {
                    double s = 0;
                    for (int i = 0; i < hd; i++) s += Q[(size_t)t * qd + hh * hd + i] * K[(size_t)j * kvd + kh * hd + i];
                    s *= qs;
                    if (f->attn_cap > 0) s = f->attn_cap * tanh(s / f->attn_cap);
                    sc[j] = s;
                    if (s > mx) mx = s;
                }
                for (int j = lo; j <= t; j++) sum += (sc[j] = exp(sc[j] - mx));
                for (int i = 0; i < hd; i++) {
                    double acc = 0;
                    for (int j = lo; j <= t; j++) acc += sc[j] / sum * V[(size_t)j * kvd + kh * hd + i];
                    a[hh * hd + i] = acc;
                }
            }
            matvec(w->o[l], a, qd, d, o);
            if (w->bo[l])
                for (int i = 0; i < d; i++) o[i] += w->bo[l][i];
            if (f->sandwich) rms(o, w->pan[l], d);
            for (int i = 0; i < d; i++) x[(size_t)t * d + i] += o[i];
            memcpy(h, x + (size_t)t * d, sizeof(double) * d);
            rms(h, w->fn[l], d);
            if (is_moe(f, l)) {
                /* softmax over all experts, top-k (ties: lower index), optional renormalisation */
                double pr[16], mx = -1e300, sum = 0, wsum = 0, wk[16];
                int sel[16];
                matvec(w->router[l], h, d, f->n_exp, pr);
                for (int e = 0; e < f->n_exp; e++) mx = pr[e] > mx ? pr[e] : mx;
                for (int e = 0; e < f->n_exp; e++) sum += (pr[e] = exp(pr[e] - mx));
                for (int e = 0; e < f->n_exp; e++) pr[e] /= sum;
                for (int j = 0; j < f->k_exp; j++) {
                    int best = -1;
                    for (int e = 0; e < f->n_exp; e++) {
                        bool taken = false;
                        for (int q2 = 0; q2 < j; q2++) taken |= sel[q2] == e;
                        if (!taken && (best < 0 || pr[e] > pr[best])) best = e;
                    }
                    sel[j] = best;
                    wk[j] = pr[best];
                    wsum += wk[j];
                }
                for (int i = 0; i < d; i++) o[i] = 0;
                for (int j = 0; j < f->k_exp; j++) {
                    const int e = sel[j];
                    const double wj = f->exp_norm ? wk[j] / wsum : wk[j];
                    double *y = malloc(sizeof(double) * d);
                    matvec(w->eg[l] + (size_t)e * f->ff_exp * d, h, d, f->ff_exp, g);
                    matvec(w->eu[l] + (size_t)e * f->ff_exp * d, h, d, f->ff_exp, u);
                    for (int i = 0; i < f->ff_exp; i++) g[i] = g[i] / (1 + exp(-g[i])) * u[i];
                    matvec(w->ed[l] + (size_t)e * d * f->ff_exp, g, f->ff_exp, d, y);
                    for (int i = 0; i < d; i++) o[i] += wj * y[i];
                    free(y);
                }
                if (f->ff_sh) { /* shared expert times sigmoid(h . gate) */
                    double *y = malloc(sizeof(double) * d), z = 0;
                    matvec(w->sg[l], h, d, f->ff_sh, g);
                    matvec(w->su[l], h, d, f->ff_sh, u);
                    for (int i = 0; i < f->ff_sh; i++) g[i] = g[i] / (1 + exp(-g[i])) * u[i];
                    matvec(w->sd[l], g, f->ff_sh, d, y);
                    for (int i = 0; i < d; i++) z += h[i] * w->sgate[l][i];
                    for (int i = 0; i < d; i++) o[i] += y[i] / (1 + exp(-z));
                    free(y);
                }
                goto ffn_out;
            }
            matvec(w->g[l], h, d, f->ff, g);
            matvec(w->u[l], h, d, f->ff, u);
            for (int i = 0; i < f->ff; i++) {
                double z = g[i];
                double act = f->gelu ? 0.5 * z * (1 + tanh(sqrt(2 / M_PI) * (z + 0.044715 * z * z * z))) : z / (1 + exp(-z));
                g[i] = act * u[i];
            }
            matvec(w->dn[l], g, f->ff, d, o);
        ffn_out:
            if (f->sandwich) rms(o, w->pfn[l], d);
            for (int i = 0; i < d; i++) x[(size_t)t * d + i] += o[i];
        }
    }
    for (int t = 0; t < n; t++) {
        memcpy(h, x + (size_t)t * d, sizeof(double) * d);
        rms(h, w->onorm, d);
        matvec(w->out, h, d, VOCAB, logits + (size_t)t * VOCAB);
        if (f->final_cap > 0)
            for (int i = 0; i < VOCAB; i++)
                logits[(size_t)t * VOCAB + i] = f->final_cap * tanh(logits[(size_t)t * VOCAB + i] / f->final_cap);
    }
    free(x); free(h); free(Q); free(K); free(V); free(a); free(o); free(g); free(u); free(sc);
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
    const double tol = 2e-5; /* measured worst 1.9e-6 (f32 weights and cache, float vs double) */
    const int n_ctxs[2] = {64, 40};
    for (int ci = 0; ci < (f->longrope ? 2 : 1); ci++) {
        /* LongRoPE: n_ctx 64 > original 48 takes the long factors, 40 the short */
        const int n_ctx = n_ctxs[ci];
        double *ref = malloc(sizeof(double) * N_TOK * VOCAB);
        ref_forward(f, &w, toks, N_TOK, n_ctx, ref);
        const int batches[3] = {N_TOK, 1, 4};
        for (int b = 0; b < 3; b++) {
            lmq_context_params cp = lmq_context_default_params();
            cp.n_ctx = n_ctx;
            cp.n_batch = batches[b];
            cp.n_threads = 2;
            cp.kv_type = LMQ_TYPE_F32;
            lmq_context *c = NULL;
            if (lmq_context_new(m, &cp, &c) != LMQ_OK) {
                T_CHECK(0, "%s: context: %s", f->label, lmq_last_error());
                continue;
            }
            double e = eval_range(c, toks, 0, N_TOK, batches[b], ref);
            printf("%-70s n_ctx %d batch %2d: max err %.3g\n", f->label, n_ctx, batches[b], e);
            T_CHECK(e <= tol, "%s (n_ctx %d): batches of %d: max |logit - ref| %.3g", f->label, n_ctx, batches[b], e);
            if (batches[b] == 4) {
                /* rewind inside what every ring holds (the last two tokens), re-evaluate */
                lmq_kv_truncate(c, N_TOK - 2);
                T_CHECK(lmq_n_past(c) == N_TOK - 2, "%s: short rewind keeps position %d (n_past %d)", f->label,
                        N_TOK - 2, lmq_n_past(c));
                e = eval_range(c, toks, lmq_n_past(c), N_TOK, 4, ref);
                T_CHECK(e <= tol, "%s: after a short rewind: max error %.3g", f->label, e);
                /* rewind further than a ring holds: the cache restarts (n_past 0) or keeps the position */
                lmq_kv_truncate(c, 6);
                const bool ring = f->swa > 0 && f->swa + 4 - 1 < n_ctx;
                T_CHECK(lmq_n_past(c) == (ring ? 0 : 6), "%s: long rewind: n_past %d (%s)", f->label, lmq_n_past(c),
                        ring ? "ring: expected 0" : "no ring: expected 6");
                e = eval_range(c, toks, lmq_n_past(c), N_TOK, 4, ref);
                T_CHECK(e <= tol, "%s: after a long rewind: max error %.3g", f->label, e);
            }
            lmq_context_free(c);
        }
        free(ref);
    }
    /* 1, 2 and 3 threads give the same bits (every output element is
     * computed by one thread, in an order fixed by the shapes), with either
     * cache type, in one batch and in batches of 4 */
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
    return t_finish();
}
