/* Perplexity (llama.cpp's method, see lmq_eval.h) and KL divergence against
 * saved base log-probs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_eval.h"
#include "logits_file.h"

lmq_ppl_params lmq_ppl_default_params(void)
{
    lmq_ppl_params p;
    memset(&p, 0, sizeof p);
    p.n_ctx = 512;
    p.kv_type = LMQ_TYPE_F16;
    return p;
}

double lmq_log_softmax_at(const float *logits, int32_t n_vocab, int32_t token)
{
    float mx = logits[0];
    for (int32_t i = 1; i < n_vocab; i++)
        if (logits[i] > mx) mx = logits[i];
    double sum = 0;
    for (int32_t i = 0; i < n_vocab; i++) sum += expf(logits[i] - mx);
    return (double)(logits[token] - mx) - log(sum);
}

/* XXH3 of the tokenizer's token strings: identifies the vocabulary. */
static uint64_t vocab_hash(const lmq_model *m)
{
    const lmq_meta *meta = lmq_file_meta(lmq_model_file(m));
    lmq_vtype et;
    uint64_t n;
    const void *data;
    if (lmq_meta_get_arr(meta, "tokenizer.ggml.tokens", &et, &n, &data) != LMQ_OK || et != LMQ_V_STRING) return 0;
    const lmq_str *s = data;
    uint64_t h = n;
    for (uint64_t i = 0; i < n; i++) h = h * 0x100000001b3ULL ^ lmq_hash64(s[i].ptr, (size_t)s[i].len);
    return h;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Value at fraction q of the sorted array, interpolating between neighbours. */
static double pct(const double *v, int64_t n, double q)
{
    if (n <= 0) return 0;
    double pos = q * (double)(n - 1);
    int64_t i = (int64_t)pos;
    if (i >= n - 1) return v[n - 1];
    double f = pos - (double)i;
    return v[i] * (1 - f) + v[i + 1] * f;
}

static void mean_err(const double *v, int64_t n, double *mean, double *err)
{
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++) {
        s += v[i];
        s2 += v[i] * v[i];
    }
    *mean = n ? s / n : 0;
    double var = n ? s2 / n - *mean * *mean : 0;
    *err = (n > 1 && var > 0) ? sqrt(var / (double)(n - 1)) : 0;
}

typedef struct kld_acc {
    double *kld, *dp, *nll_diff, *nll_base; /* (n_total) per scored token */
    int64_t n, same_top;
} kld_acc;

static void kld_token(kld_acc *a, const float *base_lp, const float *logits, int32_t nv, int32_t tok)
{
    float mx = logits[0];
    int32_t top_q = 0, top_b = 0;
    for (int32_t v = 1; v < nv; v++) {
        if (logits[v] > mx) {
            mx = logits[v];
            top_q = v;
        }
        if (base_lp[v] > base_lp[top_b]) top_b = v;
    }
    double sum = 0, sum_b = 0;
    for (int32_t v = 0; v < nv; v++) {
        sum += expf(logits[v] - mx);
        sum_b += exp((double)base_lp[v] - (double)base_lp[top_b]);
    }
    /* The stored base log-probs are rounded (docs/EVAL.md); renormalising
     * them cancels the first-order effect of the rounding on the KLD, which
     * otherwise shows up as noise of ~1e-4 per token (negative KLDs). */
    const double lse = (double)mx + log(sum), lse_b = (double)base_lp[top_b] + log(sum_b);
    double kl = 0;
    for (int32_t v = 0; v < nv; v++) {
        const double lpb = (double)base_lp[v] - lse_b;
        kl += exp(lpb) * (lpb - ((double)logits[v] - lse));
    }
    double lq = (double)logits[tok] - lse, lb = base_lp[tok] - lse_b;
    a->kld[a->n] = kl;
    a->dp[a->n] = 100.0 * (exp(lq) - exp(lb));
    a->nll_diff[a->n] = -lq + lb;
    a->nll_base[a->n] = -lb;
    a->same_top += top_q == top_b;
    a->n++;
}

static void kld_finish(kld_acc *a, lmq_kld_stats *k)
{
    int64_t n = a->n;
    k->n = n;
    double m, e;
    mean_err(a->nll_base, n, &m, &e);
    k->ppl_base = exp(m);
    k->ppl_base_err = k->ppl_base * e;
    mean_err(a->nll_diff, n, &k->ln_ppl_ratio, &k->ln_ppl_ratio_err);
    mean_err(a->kld, n, &k->kld_mean, &k->kld_err);
    mean_err(a->dp, n, &k->dp_mean, &k->dp_err);
    double s2 = 0;
    for (int64_t i = 0; i < n; i++) s2 += a->dp[i] * a->dp[i];
    k->dp_rms = n ? sqrt(s2 / n) : 0;
    double p = n ? (double)a->same_top / n : 0;
    k->same_top_pct = 100 * p;
    k->same_top_err = n > 1 ? 100 * sqrt(p * (1 - p) / (n - 1)) : 0;
    qsort(a->kld, (size_t)n, sizeof(double), cmp_double);
    qsort(a->dp, (size_t)n, sizeof(double), cmp_double);
    const double *v = a->kld;
    k->kld_max = n ? v[n - 1] : 0;
    k->kld_p999 = pct(v, n, 0.999);
    k->kld_p99 = pct(v, n, 0.99);
    k->kld_p90 = pct(v, n, 0.90);
    k->kld_median = pct(v, n, 0.5);
    k->kld_p10 = pct(v, n, 0.10);
    k->kld_p5 = pct(v, n, 0.05);
    k->kld_p1 = pct(v, n, 0.01);
    k->kld_min = n ? v[0] : 0;
    v = a->dp;
    k->dp_max = n ? v[n - 1] : 0;
    k->dp_p999 = pct(v, n, 0.999);
    k->dp_p99 = pct(v, n, 0.99);
    k->dp_p95 = pct(v, n, 0.95);
    k->dp_p90 = pct(v, n, 0.90);
    k->dp_p75 = pct(v, n, 0.75);
    k->dp_median = pct(v, n, 0.5);
    k->dp_p25 = pct(v, n, 0.25);
    k->dp_p10 = pct(v, n, 0.10);
    k->dp_p5 = pct(v, n, 0.05);
    k->dp_p1 = pct(v, n, 0.01);
    k->dp_p01 = pct(v, n, 0.001);
    k->dp_min = n ? v[0] : 0;
}

/* The eval observer behind the runtime's: keeps its first failure (and
 * message) for the chunk loop, and stops calling it after one. */
typedef struct observer_wrap {
    lmq_ppl_observer fn;
    void *user;
    lmq_status st;
    char msg[512];
} observer_wrap;

static void observe_wrap(void *user, const char *tensor, int32_t expert, const float *x, int32_t n_tok, int64_t n_in)
{
    observer_wrap *w = user;
    if (w->st) return;
    lmq_status st = w->fn(w->user, tensor, expert, x, n_tok, n_in);
    if (st) {
        w->st = st;
        snprintf(w->msg, sizeof w->msg, "%s", lmq_last_error());
    }
}

lmq_status lmq_perplexity(lmq_model *m, const int32_t *tokens, int64_t n_tokens, const lmq_ppl_params *pp,
                          lmq_ppl_result *r)
{
    observer_wrap ow = {0};
    memset(r, 0, sizeof *r);
    lmq_ppl_params p = pp ? *pp : lmq_ppl_default_params();
    const lmq_hparams *hp = lmq_model_hparams(m);
    const lmq_vocab *vocab = lmq_model_vocab(m);
    const int32_t c = p.n_ctx > 0 ? p.n_ctx : 512;
    const int32_t nv = hp->n_vocab;
    if (c < 4) return lmq_error(LMQ_ERR_INVALID_ARG, "perplexity: context %d is too small", c);
    if (n_tokens < 2 * (int64_t)c)
        return lmq_error(LMQ_ERR_INVALID_ARG, "perplexity: the text has %lld tokens; at least 2*c = %d are needed (use a smaller -c)",
                         (long long)n_tokens, 2 * c);
    int64_t n_max = n_tokens / c;
    int32_t n_chunks = (int32_t)(p.n_chunks > 0 && p.n_chunks < n_max ? p.n_chunks : n_max);
    const int32_t first = c / 2, n_scored = c - 1 - first;
    bool add_bos = vocab && lmq_vocab_add_bos(vocab);
    int32_t bos = vocab ? lmq_vocab_bos(vocab) : -1;

    lmq_context_params cp = lmq_context_default_params();
    cp.n_ctx = c;
    cp.n_batch = p.n_batch > 0 && p.n_batch < c ? p.n_batch : c;
    cp.n_threads = p.n_threads;
    cp.kv_type = p.kv_type;
    cp.n_logits = c; /* logits are needed from position `first` on, across batches */
    lmq_context *ctx = NULL;
    int32_t *chunk = malloc((size_t)c * sizeof *chunk);
    float *logits = malloc((size_t)(n_scored + 1) * (size_t)nv * sizeof(float));
    float *base_lp = NULL;
    kld_acc acc = {0};
    lmq_logits_file save = {0}, base = {0};
    bool saving = false, comparing = false;
    lmq_status s = LMQ_OK;
    if (!chunk || !logits) {
        s = lmq_error(LMQ_ERR_NOMEM, "perplexity: buffers");
        goto out;
    }
    if ((s = lmq_context_new(m, &cp, &ctx))) goto out;
    if (p.observer) {
        ow.fn = p.observer;
        ow.user = p.observer_user;
        lmq_context_set_observer(ctx, observe_wrap, &ow);
    }

    /* identity of the evaluated token stream, with BOS substitution applied */
    uint64_t tok_hash = 0;
    {
        uint64_t h = (uint64_t)c;
        for (int32_t i = 0; i < n_chunks; i++) {
            memcpy(chunk, tokens + (int64_t)i * c, (size_t)c * sizeof *chunk);
            if (add_bos) chunk[0] = bos;
            h = h * 0x100000001b3ULL ^ lmq_hash64(chunk, (size_t)c * sizeof *chunk);
        }
        tok_hash = h;
    }
    lmq_logits_header lh = {(uint32_t)nv, (uint32_t)c, (uint32_t)n_chunks, (uint32_t)n_scored, vocab_hash(m), tok_hash,
                            lmq_file_id(lmq_model_file(m))};
    if (p.save_logits) {
        if ((s = lmq_logits_create(&save, p.save_logits, &lh))) goto out;
        saving = true;
    }
    if (p.kld_base) {
        if ((s = lmq_logits_open(&base, p.kld_base))) goto out;
        comparing = true;
        const lmq_logits_header *bh = &base.h;
        if (bh->n_vocab != (uint32_t)nv || bh->vocab_hash != lh.vocab_hash) {
            s = lmq_error(LMQ_ERR_INVALID_ARG, "%s: made with a different tokenizer/vocabulary (%u tokens) than this model (%d tokens)",
                          p.kld_base, bh->n_vocab, nv);
            goto out;
        }
        if (bh->n_ctx != (uint32_t)c) {
            s = lmq_error(LMQ_ERR_INVALID_ARG, "%s: made with -c %u, this run uses -c %d", p.kld_base, bh->n_ctx, c);
            goto out;
        }
        if (bh->n_chunks < (uint32_t)n_chunks) n_chunks = (int32_t)bh->n_chunks;
        /* the token stream must be the base run's (same text, same chunks) */
        uint64_t h = (uint64_t)c;
        for (int32_t i = 0; i < (int32_t)bh->n_chunks && i <= n_max - 1; i++) {
            memcpy(chunk, tokens + (int64_t)i * c, (size_t)c * sizeof *chunk);
            if (add_bos) chunk[0] = bos;
            h = h * 0x100000001b3ULL ^ lmq_hash64(chunk, (size_t)c * sizeof *chunk);
        }
        if (h != bh->tokens_hash || (int64_t)bh->n_chunks > n_max) {
            s = lmq_error(LMQ_ERR_INVALID_ARG, "%s: made from a different text or chunking (%u chunks of %u tokens)", p.kld_base,
                          bh->n_chunks, bh->n_ctx);
            goto out;
        }
        size_t nt = (size_t)n_chunks * (size_t)n_scored;
        base_lp = malloc((size_t)n_scored * (size_t)nv * sizeof(float));
        acc.kld = malloc(nt * sizeof(double));
        acc.dp = malloc(nt * sizeof(double));
        acc.nll_diff = malloc(nt * sizeof(double));
        acc.nll_base = malloc(nt * sizeof(double));
        if (!base_lp || !acc.kld || !acc.dp || !acc.nll_diff || !acc.nll_base) {
            s = lmq_error(LMQ_ERR_NOMEM, "kl-divergence buffers");
            goto out;
        }
    }

    double nll = 0, nll2 = 0;
    int64_t count = 0;
    double t0 = lmq_time_s();
    for (int32_t i = 0; i < n_chunks; i++) {
        memcpy(chunk, tokens + (int64_t)i * c, (size_t)c * sizeof *chunk);
        if (add_bos) chunk[0] = bos;
        lmq_kv_truncate(ctx, 0);
        /* evaluate in batches; keep logits for positions >= first */
        for (int32_t b0 = 0; b0 < c; b0 += cp.n_batch) {
            int32_t nb = c - b0 < cp.n_batch ? c - b0 : cp.n_batch;
            int32_t want_from = first > b0 ? first : b0;
            int32_t n_out = b0 + nb > want_from ? b0 + nb - want_from : 0;
            if ((s = lmq_eval(ctx, chunk + b0, nb, n_out))) goto out;
            if (ow.st) {
                s = lmq_error(ow.st, "%s", ow.msg);
                goto out;
            }
            for (int32_t j = 0; j < n_out; j++) {
                int32_t pos = b0 + nb - n_out + j; /* position of this logits row */
                if (pos - first > n_scored) continue;
                memcpy(logits + (size_t)(pos - first) * nv, lmq_logits(ctx, j), (size_t)nv * sizeof(float));
            }
        }
        r->n_tokens_evaluated += c;
        for (int32_t j = 0; j < n_scored; j++) {
            double lp = lmq_log_softmax_at(logits + (size_t)j * nv, nv, chunk[first + 1 + j]);
            nll -= lp;
            nll2 += lp * lp;
            count++;
        }
        if (saving && (s = lmq_logits_write_chunk(&save, logits))) goto out;
        if (comparing) {
            if ((s = lmq_logits_read_chunk(&base, base_lp))) goto out;
            for (int32_t j = 0; j < n_scored; j++)
                kld_token(&acc, base_lp + (size_t)j * nv, logits + (size_t)j * nv, nv, chunk[first + 1 + j]);
        }
        if (p.on_chunk) p.on_chunk(p.cb_ctx, i, n_chunks, exp(nll / (double)count));
    }
    r->seconds = lmq_time_s() - t0;
    r->n_chunks = n_chunks;
    r->n_scored = count;
    double mean = nll / (double)count, var = nll2 / (double)count - mean * mean;
    r->ppl = exp(mean);
    r->ppl_err = var > 0 && count > 1 ? r->ppl * sqrt(var / (double)(count - 1)) : 0;
    if (saving) {
        if ((s = lmq_logits_finish(&save))) goto out;
        r->logits_bytes = save.bytes;
        /* llama.cpp: per scored token 2*((n_vocab+1)/2) + 4 uint16 values */
        r->logits_bytes_llama = (uint64_t)count * (uint64_t)(2 * ((nv + 1) / 2) + 4) * 2u;
    }
    if (comparing) {
        kld_finish(&acc, &r->kld);
        r->has_kld = true;
    }
out:
    if (saving) lmq_logits_close(&save);
    if (comparing) lmq_logits_close(&base);
    free(acc.kld);
    free(acc.dp);
    free(acc.nll_diff);
    free(acc.nll_base);
    free(base_lp);
    free(chunk);
    free(logits);
    lmq_context_free(ctx);
    return s;
}
