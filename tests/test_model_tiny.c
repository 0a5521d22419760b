/* The forward pass against an independent double-precision reference on tiny
 * random models (GQA and not, tied and untied heads, both RoPE pairings),
 * batched vs token-by-token evaluation, perplexity on hand-checkable cases,
 * context overflow, and malformed models (missing tensor, wrong shape). */
#include <stdlib.h>
#include <string.h>

#include "lmq_eval.h"
#include "lmq_runtime.h"
#include "testutil.h"

typedef struct shape {
    int vocab, d, layers, heads, kv_heads, ff;
    bool tied, normal_rope;
} shape;

typedef struct weights {
    shape s;
    int hd;
    float *embd, *out, *onorm;
    float **q, **k, **v, **o, **g, **u, **dn, **an, **fn;
} weights;

static uint32_t rng = 2463534242u;
static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return (float)((rng & 0xffffff) / 16777216.0 - 0.5);
}

static float *rnd(size_t n, float scale)
{
    float *p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = frand() * scale;
    return p;
}

static void make_weights(weights *w, shape s)
{
    w->s = s;
    w->hd = s.d / s.heads;
    int qd = s.heads * w->hd, kvd = s.kv_heads * w->hd;
    w->embd = rnd((size_t)s.vocab * s.d, 1.0f);
    w->out = s.tied ? w->embd : rnd((size_t)s.vocab * s.d, 0.5f);
    w->onorm = rnd(s.d, 0.5f);
    for (int i = 0; i < s.d; i++) w->onorm[i] += 1.0f;
#define L(f) w->f = calloc((size_t)s.layers, sizeof(float *))
    L(q); L(k); L(v); L(o); L(g); L(u); L(dn); L(an); L(fn);
#undef L
    for (int l = 0; l < s.layers; l++) {
        w->q[l] = rnd((size_t)qd * s.d, 0.4f);
        w->k[l] = rnd((size_t)kvd * s.d, 0.4f);
        w->v[l] = rnd((size_t)kvd * s.d, 0.4f);
        w->o[l] = rnd((size_t)s.d * qd, 0.4f);
        w->g[l] = rnd((size_t)s.ff * s.d, 0.4f);
        w->u[l] = rnd((size_t)s.ff * s.d, 0.4f);
        w->dn[l] = rnd((size_t)s.d * s.ff, 0.4f);
        w->an[l] = rnd(s.d, 0.3f);
        w->fn[l] = rnd(s.d, 0.3f);
        for (int i = 0; i < s.d; i++) w->an[l][i] += 1, w->fn[l][i] += 1;
    }
}

static void free_weights(weights *w)
{
    for (int l = 0; l < w->s.layers; l++) {
        free(w->q[l]); free(w->k[l]); free(w->v[l]); free(w->o[l]); free(w->g[l]);
        free(w->u[l]); free(w->dn[l]); free(w->an[l]); free(w->fn[l]);
    }
    free(w->q); free(w->k); free(w->v); free(w->o); free(w->g);
    free(w->u); free(w->dn); free(w->an); free(w->fn);
    if (w->out != w->embd) free(w->out);
    free(w->embd);
    free(w->onorm);
}

static void add2(lmq_writer *wr, const char *name, const float *data, int64_t in, int64_t out)
{
    int64_t ne[2] = {in, out};
    lmq_status s = lmq_writer_add_tensor(wr, name, LMQ_TYPE_F32, out > 0 ? 2 : 1, ne, data,
                                         (uint64_t)(in * (out > 0 ? out : 1) * 4));
    T_CHECK(s == LMQ_OK, "add %s: %s", name, lmq_last_error());
}

/* RoPE scaling written by write_model: 0 none, 1 llama3 keys, 2 the same
 * scaling as a rope_freqs.weight tensor of divisors (llama.cpp's form). */
static int g_rope_scaling;
#define L3_FACTOR 8.0
#define L3_LOW 1.0
#define L3_HIGH 4.0
#define L3_ORIG_CTX 16

/* llama3 frequency divisors, computed independently of the runtime. */
static void llama3_divisors(int n_rot, float *div)
{
    for (int i = 0; i < n_rot / 2; i++) {
        double f = pow(10000.0, -2.0 * i / n_rot), wl = 2 * M_PI / f, scaled;
        if (wl < L3_ORIG_CTX / L3_HIGH)
            scaled = f;
        else if (wl > L3_ORIG_CTX / L3_LOW)
            scaled = f / L3_FACTOR;
        else {
            double sm = (L3_ORIG_CTX / wl - L3_LOW) / (L3_HIGH - L3_LOW);
            scaled = (1 - sm) * f / L3_FACTOR + sm * f;
        }
        div[i] = (float)(f / scaled);
    }
}

/* skip: a tensor name to leave out; bad_shape: a tensor written with a wrong shape */
static void write_model(const weights *w, const char *path, const char *skip, const char *bad_shape)
{
    const shape *s = &w->s;
    int qd = s->heads * w->hd, kvd = s->kv_heads * w->hd;
    lmq_writer *wr;
    T_CHECK(lmq_writer_open(path, NULL, &wr) == LMQ_OK, "writer");
    lmq_meta *m = lmq_writer_meta(wr);
    lmq_meta_set_str(m, "general.architecture", "llama");
    lmq_meta_set_u32(m, "llama.block_count", (uint32_t)s->layers);
    lmq_meta_set_u32(m, "llama.embedding_length", (uint32_t)s->d);
    lmq_meta_set_u32(m, "llama.feed_forward_length", (uint32_t)s->ff);
    lmq_meta_set_u32(m, "llama.attention.head_count", (uint32_t)s->heads);
    lmq_meta_set_u32(m, "llama.attention.head_count_kv", (uint32_t)s->kv_heads);
    lmq_meta_set_u32(m, "llama.context_length", 64);
    lmq_meta_set_f32(m, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    lmq_meta_set_f32(m, "llama.rope.freq_base", 10000.0f);
    lmq_meta_set_str(m, "lmq.rope.layout", s->normal_rope ? "normal" : "neox");
    if (g_rope_scaling == 1) {
        lmq_meta_set_str(m, "llama.rope.scaling.type", "llama3");
        lmq_meta_set_f32(m, "llama.rope.scaling.factor", (float)L3_FACTOR);
        lmq_meta_set_f32(m, "llama.rope.scaling.low_freq_factor", (float)L3_LOW);
        lmq_meta_set_f32(m, "llama.rope.scaling.high_freq_factor", (float)L3_HIGH);
        lmq_meta_set_u32(m, "llama.rope.scaling.original_context_length", L3_ORIG_CTX);
    } else if (g_rope_scaling == 2) {
        float div[64];
        llama3_divisors(w->hd, div);
        add2(wr, "rope_freqs.weight", div, w->hd / 2, 0);
    }
    char name[64];
#define W(nm, data, in, out)                                                      \
    if (!skip || strcmp(skip, nm)) {                                              \
        bool bad = bad_shape && !strcmp(bad_shape, nm);                           \
        add2(wr, nm, data, bad ? (in) / 2 : (in), out);                           \
    }
    W("token_embd.weight", w->embd, s->d, s->vocab);
    if (!s->tied) W("output.weight", w->out, s->d, s->vocab);
    W("output_norm.weight", w->onorm, s->d, 0);
    for (int l = 0; l < s->layers; l++) {
#define LW(suffix, data, in, out)                                                 \
    snprintf(name, sizeof name, "blk.%d." suffix ".weight", l);                   \
    W(name, data, in, out)
        LW("attn_q", w->q[l], s->d, qd);
        LW("attn_k", w->k[l], s->d, kvd);
        LW("attn_v", w->v[l], s->d, kvd);
        LW("attn_output", w->o[l], qd, s->d);
        LW("ffn_gate", w->g[l], s->d, s->ff);
        LW("ffn_up", w->u[l], s->d, s->ff);
        LW("ffn_down", w->dn[l], s->ff, s->d);
        LW("attn_norm", w->an[l], s->d, 0);
        LW("ffn_norm", w->fn[l], s->d, 0);
#undef LW
    }
#undef W
    T_CHECK(lmq_writer_finish(wr) == LMQ_OK, "finish: %s", lmq_last_error());
}

/* ---- independent reference forward (double precision, whole sequence) ---- */

static void matvec(const float *W, const double *x, int in, int out, double *y)
{
    for (int o = 0; o < out; o++) {
        double s = 0;
        for (int i = 0; i < in; i++) s += (double)W[(size_t)o * in + i] * x[i];
        y[o] = s;
    }
}

static void norm(const double *x, const float *w, int n, double *y)
{
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    double r = 1.0 / sqrt(ss / n + 1e-5);
    for (int i = 0; i < n; i++) y[i] = x[i] * r * w[i];
}

static void rope(double *v, int hd, int pos, bool normal)
{
    for (int i = 0; i < hd / 2; i++) {
        double th = pos * pow(10000.0, -2.0 * i / hd);
        int a = normal ? 2 * i : i, b = normal ? 2 * i + 1 : i + hd / 2;
        double x0 = v[a], x1 = v[b];
        v[a] = x0 * cos(th) - x1 * sin(th);
        v[b] = x0 * sin(th) + x1 * cos(th);
    }
}

/* logits of the last token after the sequence toks[0..n) */
static void ref_forward(const weights *w, const int *toks, int n, double *logits)
{
    const shape *s = &w->s;
    int d = s->d, hd = w->hd, qd = s->heads * hd, kvd = s->kv_heads * hd;
    double *x = calloc((size_t)n * d, sizeof(double)), *h = malloc(sizeof(double) * d);
    double *K = malloc(sizeof(double) * n * kvd), *V = malloc(sizeof(double) * n * kvd);
    double *q = malloc(sizeof(double) * qd), *att = malloc(sizeof(double) * qd), *tmp = malloc(sizeof(double) * (d > s->ff ? d : s->ff));
    double *g = malloc(sizeof(double) * s->ff), *u = malloc(sizeof(double) * s->ff), *sc = malloc(sizeof(double) * n);
    for (int t = 0; t < n; t++)
        for (int i = 0; i < d; i++) x[(size_t)t * d + i] = w->embd[(size_t)toks[t] * d + i];
    for (int l = 0; l < s->layers; l++) {
        for (int t = 0; t < n; t++) {
            norm(x + (size_t)t * d, w->an[l], d, h);
            matvec(w->k[l], h, d, kvd, K + (size_t)t * kvd);
            matvec(w->v[l], h, d, kvd, V + (size_t)t * kvd);
            for (int kh = 0; kh < s->kv_heads; kh++) rope(K + (size_t)t * kvd + kh * hd, hd, t, s->normal_rope);
        }
        for (int t = 0; t < n; t++) {
            norm(x + (size_t)t * d, w->an[l], d, h);
            matvec(w->q[l], h, d, qd, q);
            for (int hh = 0; hh < s->heads; hh++) {
                rope(q + hh * hd, hd, t, s->normal_rope);
                int kh = hh / (s->heads / s->kv_heads);
                double mx = -1e300, sum = 0;
                for (int p = 0; p <= t; p++) {
                    double a = 0;
                    for (int i = 0; i < hd; i++) a += q[hh * hd + i] * K[(size_t)p * kvd + kh * hd + i];
                    sc[p] = a / sqrt(hd);
                    if (sc[p] > mx) mx = sc[p];
                }
                for (int p = 0; p <= t; p++) sum += (sc[p] = exp(sc[p] - mx));
                for (int i = 0; i < hd; i++) {
                    double o = 0;
                    for (int p = 0; p <= t; p++) o += sc[p] / sum * V[(size_t)p * kvd + kh * hd + i];
                    att[hh * hd + i] = o;
                }
            }
            matvec(w->o[l], att, qd, d, tmp);
            for (int i = 0; i < d; i++) x[(size_t)t * d + i] += tmp[i];
            norm(x + (size_t)t * d, w->fn[l], d, h);
            matvec(w->g[l], h, d, s->ff, g);
            matvec(w->u[l], h, d, s->ff, u);
            for (int i = 0; i < s->ff; i++) g[i] = g[i] / (1 + exp(-g[i])) * u[i];
            matvec(w->dn[l], g, s->ff, d, tmp);
            for (int i = 0; i < d; i++) x[(size_t)t * d + i] += tmp[i];
        }
    }
    norm(x + (size_t)(n - 1) * d, w->onorm, d, h);
    matvec(w->out, h, d, s->vocab, logits);
    free(x); free(h); free(K); free(V); free(q); free(att); free(tmp); free(g); free(u); free(sc);
}

static void check_shape(shape s, const char *label)
{
    weights w;
    make_weights(&w, s);
    const char *path = t_tmp(label);
    write_model(&w, path, NULL, NULL);
    lmq_model *m;
    lmq_status st = lmq_model_load(path, &m);
    T_CHECK(st == LMQ_OK, "%s: load: %s", label, lmq_last_error());
    if (st) {
        free_weights(&w);
        return;
    }
    T_CHECK(lmq_model_hparams(m)->tied_embeddings == s.tied, "%s: tied flag", label);
    int toks[40];
    for (int i = 0; i < 40; i++) toks[i] = (i * 7 + 3) % s.vocab;
    double *ref = malloc(sizeof(double) * s.vocab);
    for (int kv = 0; kv < 2; kv++) {
        lmq_context_params cp = lmq_context_default_params();
        cp.n_ctx = 48;
        cp.n_batch = 16; /* a 40-token prompt spans three batches */
        cp.n_threads = 2;
        cp.kv_type = kv ? LMQ_TYPE_F16 : LMQ_TYPE_F32;
        lmq_context *c;
        T_CHECK(lmq_context_new(m, &cp, &c) == LMQ_OK, "%s: context", label);
        /* batched prompt */
        for (int b = 0; b < 40; b += 16) {
            int nb = 40 - b < 16 ? 40 - b : 16;
            T_CHECK(lmq_eval(c, toks + b, nb, 1) == LMQ_OK, "%s: eval: %s", label, lmq_last_error());
        }
        ref_forward(&w, toks, 40, ref);
        const float *lg = lmq_logits(c, 0);
        double maxerr = 0, maxref = 0;
        for (int i = 0; i < s.vocab; i++) {
            maxerr = fmax(maxerr, fabs(lg[i] - ref[i]));
            maxref = fmax(maxref, fabs(ref[i]));
        }
        /* f32 cache: f32 arithmetic vs double; f16 cache rounds K, V, Q and P to f16 */
        double tol = kv ? 2e-2 * maxref : 2e-4 * maxref;
        T_CHECK(maxerr <= tol, "%s (%s cache): max |logit - ref| = %g (tol %g)", label, kv ? "f16" : "f32", maxerr, tol);
        /* token-by-token from scratch gives the same logits as the batched run
         * (every eval succeeds; compared with the batched logits, which the
         * reference check above already pinned, and with the reference) */
        float *batched = malloc(sizeof(float) * s.vocab);
        memcpy(batched, lg, sizeof(float) * s.vocab);
        lmq_kv_truncate(c, 0);
        int evals_ok = 0;
        for (int t = 0; t < 40; t++) evals_ok += lmq_eval(c, toks + t, 1, 1) == LMQ_OK;
        T_CHECK(evals_ok == 40, "%s: token-by-token evals: %d of 40 ok: %s", label, evals_ok, lmq_last_error());
        T_CHECK(lmq_n_past(c) == 40, "%s: token-by-token fills the cache: %d", label, lmq_n_past(c));
        const float *lg1 = lmq_logits(c, 0);
        double d1 = 0, dref = 0;
        for (int i = 0; i < s.vocab; i++) {
            d1 = fmax(d1, fabs(lg1[i] - batched[i]));
            dref = fmax(dref, fabs(lg1[i] - ref[i]));
        }
        T_CHECK(d1 <= 1e-4 * maxref, "%s (%s cache): token-by-token vs batched %g (tol %g)", label,
                kv ? "f16" : "f32", d1, 1e-4 * maxref);
        T_CHECK(dref <= tol, "%s: token-by-token vs reference %g", label, dref);
        free(batched);
        /* overflow: 40 + 9 > 48 */
        T_CHECK(lmq_eval(c, toks, 9, 1) == LMQ_ERR_LIMIT && strstr(lmq_last_error(), "context"), "%s: overflow", label);
        T_CHECK(lmq_n_past(c) == 40, "%s: cache unchanged by a refused eval", label);
        int bad_tok = s.vocab;
        T_CHECK(lmq_eval(c, &bad_tok, 1, 1) == LMQ_ERR_INVALID_ARG, "%s: token out of range", label);
        lmq_context_free(c);
    }
    free(ref);
    lmq_model_free(m);
    free_weights(&w);
}

static void check_bad_models(void)
{
    shape s = {64, 32, 2, 4, 2, 48, false, false};
    weights w;
    make_weights(&w, s);
    write_model(&w, t_tmp("missing.lmq"), "blk.1.ffn_up.weight", NULL);
    lmq_model *m;
    T_CHECK(lmq_model_load(t_tmp("missing.lmq"), &m) == LMQ_ERR_NOT_FOUND && strstr(lmq_last_error(), "blk.1.ffn_up.weight"),
            "missing tensor named: %s", lmq_last_error());
    write_model(&w, t_tmp("badshape.lmq"), NULL, "blk.0.attn_k.weight");
    T_CHECK(lmq_model_load(t_tmp("badshape.lmq"), &m) == LMQ_ERR_FORMAT && strstr(lmq_last_error(), "blk.0.attn_k.weight"),
            "wrong shape named: %s", lmq_last_error());
    free_weights(&w);
}

static void check_perplexity(void)
{
    /* zero output head: every distribution is uniform, so PPL == n_vocab
     * exactly and the number of scored tokens follows the chunking rule */
    shape s = {50, 32, 1, 4, 4, 48, false, false};
    weights w;
    make_weights(&w, s);
    memset(w.out, 0, sizeof(float) * s.vocab * s.d);
    write_model(&w, t_tmp("uniform.lmq"), NULL, NULL);
    lmq_model *m;
    T_CHECK(lmq_model_load(t_tmp("uniform.lmq"), &m) == LMQ_OK, "load");
    int32_t toks[200];
    for (int i = 0; i < 200; i++) toks[i] = (i * 13) % s.vocab;
    lmq_ppl_params p = lmq_ppl_default_params();
    p.n_ctx = 32;
    p.n_threads = 1;
    lmq_ppl_result r;
    T_CHECK(lmq_perplexity(m, toks, 200, &p, &r) == LMQ_OK, "ppl: %s", lmq_last_error());
    T_NEAR(r.ppl, 50.0, 1e-4, "uniform ppl");
    T_CHECK(r.n_chunks == 6 && r.n_scored == 6 * 15, "chunks %d scored %lld", r.n_chunks, (long long)r.n_scored);
    p.n_chunks = 2;
    T_CHECK(lmq_perplexity(m, toks, 200, &p, &r) == LMQ_OK && r.n_chunks == 2, "--chunks limits");
    p.n_ctx = 128;
    T_CHECK(lmq_perplexity(m, toks, 200, &p, &r) == LMQ_ERR_INVALID_ARG && strstr(lmq_last_error(), "2*c"),
            "short text refused: %s", lmq_last_error());
    lmq_model_free(m);
    free_weights(&w);

    /* a real model: hand-check one chunk's NLL from eval logits, KLD of the
     * model against itself is 0 with 100% same top token */
    shape s2 = {64, 32, 2, 4, 2, 48, true, false};
    make_weights(&w, s2);
    write_model(&w, t_tmp("rand.lmq"), NULL, NULL);
    T_CHECK(lmq_model_load(t_tmp("rand.lmq"), &m) == LMQ_OK, "load");
    for (int i = 0; i < 200; i++) toks[i] = (i * 29 + 5) % s2.vocab;
    p = lmq_ppl_default_params();
    p.n_ctx = 16;
    p.n_chunks = 1;
    p.kv_type = LMQ_TYPE_F32;
    T_CHECK(lmq_perplexity(m, toks, 200, &p, &r) == LMQ_OK, "ppl");
    lmq_context_params cp = lmq_context_default_params();
    cp.n_ctx = 16;
    cp.kv_type = LMQ_TYPE_F32;
    lmq_context *c;
    lmq_context_new(m, &cp, &c);
    double nll = 0;
    for (int t = 0; t < 15; t++) {
        lmq_eval(c, toks + t, 1, 1);
        if (t >= 8) nll -= lmq_log_softmax_at(lmq_logits(c, 0), s2.vocab, toks[t + 1]);
    }
    lmq_context_free(c);
    T_NEAR(r.ppl, exp(nll / 7), 1e-4 * r.ppl, "ppl equals hand-computed NLL over positions c/2+1..c-1");
    p.n_chunks = 4;
    p.save_logits = t_tmp("base.logits");
    T_CHECK(lmq_perplexity(m, toks, 200, &p, &r) == LMQ_OK && r.logits_bytes > 0, "save logits: %s", lmq_last_error());
    p.save_logits = NULL;
    p.kld_base = t_tmp("base.logits");
    T_CHECK(lmq_perplexity(m, toks, 200, &p, &r) == LMQ_OK && r.has_kld, "kld: %s", lmq_last_error());
    T_CHECK(fabs(r.kld.kld_mean) < 1e-3, "self KLD %g", r.kld.kld_mean);
    T_NEAR(r.kld.same_top_pct, 100.0, 1e-9, "self same-top");
    p.n_ctx = 20;
    T_CHECK(lmq_perplexity(m, toks, 200, &p, &r) == LMQ_ERR_INVALID_ARG, "different chunking refused");
    lmq_model_free(m);
    /* a logits file from a model with another vocabulary is refused */
    T_CHECK(lmq_model_load(t_tmp("uniform.lmq"), &m) == LMQ_OK, "load");
    p.n_ctx = 16;
    T_CHECK(lmq_perplexity(m, toks, 200, &p, &r) == LMQ_ERR_INVALID_ARG && strstr(lmq_last_error(), "vocabulary"),
            "other model refused: %s", lmq_last_error());
    lmq_model_free(m);
    free_weights(&w);
}

/* llama.cpp's GGUFs of Llama 3.x carry the scaling as rope_freqs.weight:
 * the runtime must give the logits of the same model with llama3 keys,
 * and differ from the unscaled model. */
static void check_rope_freqs(void)
{
    shape s = {64, 32, 2, 4, 2, 48, false, false};
    weights w;
    make_weights(&w, s);
    const char *names[3] = {"rope-none.lmq", "rope-llama3.lmq", "rope-freqs.lmq"};
    float *logits[3] = {NULL, NULL, NULL};
    int toks[40];
    for (int i = 0; i < 40; i++) toks[i] = (i * 11 + 1) % s.vocab;
    for (int v = 0; v < 3; v++) {
        g_rope_scaling = v;
        write_model(&w, t_tmp(names[v]), NULL, NULL);
        lmq_model *m;
        if (lmq_model_load(t_tmp(names[v]), &m) != LMQ_OK) {
            T_CHECK(0, "%s: %s", names[v], lmq_last_error());
            continue;
        }
        lmq_context_params cp = lmq_context_default_params();
        cp.n_ctx = 48;
        cp.kv_type = LMQ_TYPE_F32;
        lmq_context *c;
        T_CHECK(lmq_context_new(m, &cp, &c) == LMQ_OK && lmq_eval(c, toks, 40, 1) == LMQ_OK, "%s: eval", names[v]);
        logits[v] = malloc(sizeof(float) * s.vocab);
        memcpy(logits[v], lmq_logits(c, 0), sizeof(float) * s.vocab);
        lmq_context_free(c);
        lmq_model_free(m);
    }
    g_rope_scaling = 0;
    if (logits[0] && logits[1] && logits[2]) {
        double d_same = 0, d_unscaled = 0;
        for (int i = 0; i < s.vocab; i++) {
            d_same = fmax(d_same, fabs(logits[1][i] - logits[2][i]));
            d_unscaled = fmax(d_unscaled, fabs(logits[0][i] - logits[2][i]));
        }
        T_CHECK(d_same < 1e-4, "rope_freqs.weight gives the llama3-scaled logits (max diff %g)", d_same);
        T_CHECK(d_unscaled > 1e-3, "and differs from the unscaled model (max diff %g)", d_unscaled);
    }
    for (int v = 0; v < 3; v++) free(logits[v]);
    free_weights(&w);
}

int main(void)
{
    check_shape((shape){64, 32, 2, 4, 4, 48, false, false}, "mha_untied_neox.lmq");
    check_shape((shape){64, 32, 2, 4, 2, 48, true, false}, "gqa_tied_neox.lmq");
    check_shape((shape){70, 48, 3, 6, 2, 40, false, true}, "gqa_untied_normal.lmq");
    check_bad_models();
    check_rope_freqs();
    check_perplexity();
    return t_finish();
}
