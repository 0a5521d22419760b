/* Input covariances for error-feedback quantization (gptq_calib.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gptq_calib.h"
#include "lmq_quant.h"
#include "target_calib.h"

/* GPTQ's damping (1% of the mean diagonal). On llama-8m, 0.01-0.3 gave the
 * same KLD within noise on held-out calibration text (docs/QUANT.md). */
#define GPTQ_DAMP 0.01f

typedef struct hmat {
    int64_t n;
    float *h;       /* n x n: H (upper triangle), then its factor */
    bool factored, failed;
} hmat;

typedef struct hname {
    char *name;
    int32_t expert; /* -1: a 2-D tensor */
    size_t mat;     /* index into mats */
    bool alias;     /* reads the input of the tensor before it: no accumulation */
} hname;

struct gptq_calib {
    hmat *mats;
    size_t n_mats, cap_mats;
    hname *names;
    size_t n_names, cap_names;
    size_t hint;    /* the entry after the last one found: calls come in the same order every chunk */
    uint64_t bytes, max_bytes;
    /* the previous call, to recognise a shared input */
    const float *last_x;
    int32_t last_tok;
    int64_t last_in;
    int32_t last_expert;
    size_t last_mat;
    lmq_status st;
    char err[512];
};

static hname *find_name(gptq_calib *g, const char *name, int32_t expert)
{
    for (size_t k = 0; k < g->n_names; k++) {
        const size_t i = (g->hint + k) % g->n_names;
        if (g->names[i].expert == expert && !strcmp(g->names[i].name, name)) {
            g->hint = i + 1;
            return &g->names[i];
        }
    }
    return NULL;
}

static lmq_status add_name(gptq_calib *g, const char *name, int32_t expert, size_t mat, bool alias)
{
    if (g->n_names == g->cap_names) {
        size_t cap = g->cap_names ? 2 * g->cap_names : 64;
        hname *p = realloc(g->names, cap * sizeof *p);
        if (!p) return lmq_error(LMQ_ERR_NOMEM, "out of memory");
        g->names = p;
        g->cap_names = cap;
    }
    char *s = strdup(name);
    if (!s) return lmq_error(LMQ_ERR_NOMEM, "out of memory");
    g->names[g->n_names++] = (hname){s, expert, mat, alias};
    return LMQ_OK;
}

static lmq_status add_mat(gptq_calib *g, const char *name, int64_t n, size_t *idx)
{
    const uint64_t bytes = (uint64_t)n * (uint64_t)n * sizeof(float);
    if (g->bytes + bytes > g->max_bytes)
        return lmq_error(LMQ_ERR_LIMIT, "gptq: the input covariances need more than %.1f GiB (at '%s', %lld inputs)",
                         (double)g->max_bytes / 1073741824.0, name, (long long)n);
    if (g->n_mats == g->cap_mats) {
        size_t cap = g->cap_mats ? 2 * g->cap_mats : 32;
        hmat *p = realloc(g->mats, cap * sizeof *p);
        if (!p) return lmq_error(LMQ_ERR_NOMEM, "out of memory");
        g->mats = p;
        g->cap_mats = cap;
    }
    float *h = calloc((size_t)(n * n), sizeof *h);
    if (!h) return lmq_error(LMQ_ERR_NOMEM, "gptq: out of memory for a %lld x %lld covariance", (long long)n, (long long)n);
    g->mats[g->n_mats] = (hmat){n, h, false, false};
    *idx = g->n_mats++;
    g->bytes += bytes;
    return LMQ_OK;
}

static void observe(void *user, const char *tensor, int32_t expert, const float *x, int32_t n_tok, int64_t n_in)
{
    gptq_calib *g = user;
    if (g->st || !tensor || n_in <= 0) return;
    if (expert < 0) expert = -1;
    const bool same_input = x == g->last_x && n_tok == g->last_tok && n_in == g->last_in && expert == g->last_expert;
    hname *e = find_name(g, tensor, expert);
    lmq_status st = LMQ_OK;
    size_t mat = 0;
    if (!e) {
        if (same_input) {
            mat = g->last_mat;
            st = add_name(g, tensor, expert, mat, true);
        } else {
            st = add_mat(g, tensor, n_in, &mat);
            if (!st) st = add_name(g, tensor, expert, mat, false);
            if (!st) lmq_gptq_accumulate(g->mats[mat].h, x, n_tok, n_in);
        }
    } else {
        mat = e->mat;
        if (g->mats[mat].n != n_in) {
            st = lmq_error(LMQ_ERR_FORMAT, "gptq: tensor '%s' read %lld inputs, then %lld", tensor,
                           (long long)g->mats[mat].n, (long long)n_in);
        } else if (!e->alias) {
            lmq_gptq_accumulate(g->mats[mat].h, x, n_tok, n_in);
        }
    }
    if (st) {
        g->st = st;
        snprintf(g->err, sizeof g->err, "%s", lmq_last_error());
        return;
    }
    g->last_x = x;
    g->last_tok = n_tok;
    g->last_in = n_in;
    g->last_expert = expert;
    g->last_mat = mat;
}

void gptq_calib_free(gptq_calib *g)
{
    if (!g) return;
    for (size_t i = 0; i < g->n_mats; i++) free(g->mats[i].h);
    for (size_t i = 0; i < g->n_names; i++) free(g->names[i].name);
    free(g->mats);
    free(g->names);
    free(g);
}

static void on_chunk(void *ctx, int32_t chunk, int32_t n_chunks, double ppl)
{
    const double el = lmq_time_s() - *(const double *)ctx;
    const double eta = el / (chunk + 1) * (n_chunks - chunk - 1);
    fprintf(stderr, "\rlmq quantize: gptq: calibration chunk %d/%d, perplexity %.4f, ETA %.0f s   ", chunk + 1,
            n_chunks, ppl, eta);
    if (chunk + 1 == n_chunks) fputc('\n', stderr);
}

lmq_status gptq_calib_collect(const char *in, const char *text_path, int n_chunks, int n_ctx, int n_threads,
                              uint64_t max_bytes, bool quiet, gptq_calib **out)
{
    *out = NULL;
    gptq_calib *g = calloc(1, sizeof *g);
    if (!g) return lmq_error(LMQ_ERR_NOMEM, "out of memory");
    g->max_bytes = max_bytes;
    g->last_mat = (size_t)-1;
    lmq_model *m = NULL;
    int32_t *toks = NULL;
    size_t n_toks = 0;
    lmq_status st = lmq_model_load(in, &m);
    if (!st && !lmq_model_vocab(m)) st = lmq_error(LMQ_ERR_UNSUPPORTED, "%s: the model has no tokenizer", in);
    if (!st) st = calib_tokens(m, text_path, &toks, &n_toks);
    if (!st) {
        lmq_ppl_params pp = lmq_ppl_default_params();
        pp.n_ctx = n_ctx;
        pp.n_chunks = n_chunks;
        pp.n_threads = n_threads;
        pp.observer = observe;
        pp.observer_user = g;
        double t0 = lmq_time_s();
        if (!quiet && isatty(2)) {
            pp.on_chunk = on_chunk;
            pp.cb_ctx = &t0;
        }
        lmq_ppl_result r;
        st = lmq_perplexity(m, toks, (int64_t)n_toks, &pp, &r);
        if (!st && !quiet)
            fprintf(stderr, "lmq quantize: gptq: %d chunks of %d tokens, %zu input covariances (%.1f MiB), %.1f s\n",
                    r.n_chunks, n_ctx, g->n_mats, (double)g->bytes / 1048576.0, lmq_time_s() - t0);
        if (!st && g->st) st = lmq_error(g->st, "%s", g->err);
    }
    free(toks);
    lmq_model_free(m);
    if (st) {
        gptq_calib_free(g);
        return st;
    }
    *out = g;
    return LMQ_OK;
}

const float *gptq_calib_factor(void *user, const char *tensor, int32_t expert, int64_t n_cols)
{
    gptq_calib *g = user;
    hname *e = find_name(g, tensor, expert < 0 ? -1 : expert);
    if (!e) return NULL;
    hmat *h = &g->mats[e->mat];
    if (h->n != n_cols || h->failed) return NULL;
    if (!h->factored) {
        lmq_status st = lmq_gptq_factor(h->h, h->n, GPTQ_DAMP);
        if (st) {
            if (expert >= 0)
                fprintf(stderr, "lmq quantize: warning: gptq: %s expert %d: %s; quantized without error feedback\n",
                        tensor, (int)expert, lmq_last_error());
            else
                fprintf(stderr, "lmq quantize: warning: gptq: %s: %s; quantized without error feedback\n", tensor,
                        lmq_last_error());
            h->failed = true;
            return NULL;
        }
        h->factored = true;
    }
    return h->h;
}
