/* GPTQ input covariances in one float pass (lmq_calib.h). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib_internal.h"
#include "lmq_calib.h"
#include "lmq_quant.h"

/* ------------------------------------------------------------ the store */

static hname *find_name(lmq_gptq_calib *g, const char *name, int32_t expert)
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

static lmq_status add_name(lmq_gptq_calib *g, const char *name, int32_t expert, size_t mat, bool alias)
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

static lmq_status add_mat(lmq_gptq_calib *g, const char *name, const char *group, int32_t expert, int64_t n,
                          size_t *idx)
{
    const uint64_t bytes = (uint64_t)n * (uint64_t)n * sizeof(float);
    if (g->max_bytes && g->bytes + bytes > g->max_bytes)
        return lmq_error(LMQ_ERR_LIMIT,
                         "gptq: the input covariances need more than %.2f GiB (at '%s', %lld inputs; %zu matrices "
                         "held, %.2f GiB)",
                         (double)g->max_bytes / 1073741824.0, name, (long long)n, g->n_mats,
                         (double)g->bytes / 1073741824.0);
    if (g->n_mats == g->cap_mats) {
        size_t cap = g->cap_mats ? 2 * g->cap_mats : 32;
        hmat *p = realloc(g->mats, cap * sizeof *p);
        if (!p) return lmq_error(LMQ_ERR_NOMEM, "out of memory");
        g->mats = p;
        g->cap_mats = cap;
    }
    float *h = NULL;
    for (int k = 0; k < 8 && !h; k++)
        if (g->spare[k] && g->spare_n[k] == n) {
            h = g->spare[k];
            g->spare[k] = NULL;
            memset(h, 0, (size_t)(n * n) * sizeof *h);
        }
    if (!h) h = calloc((size_t)(n * n), sizeof *h);
    char *gk = strdup(group);
    if (!h || !gk) {
        free(h);
        free(gk);
        return lmq_error(LMQ_ERR_NOMEM, "gptq: out of memory for a %lld x %lld covariance", (long long)n, (long long)n);
    }
    g->mats[g->n_mats] = (hmat){n, h, gk, expert, 0, 0, false, false};
    *idx = g->n_mats++;
    g->bytes += bytes;
    return LMQ_OK;
}

static hmat *group_mat(lmq_gptq_calib *g, const char *group, int32_t expert)
{
    for (size_t i = g->n_mats; i-- > 0;)
        if (g->mats[i].expert == expert && !strcmp(g->mats[i].group, group)) return &g->mats[i];
    return NULL;
}

lmq_status calib_observe(void *user, const char *tensor, int32_t expert, const float *x, int32_t n_tok, int64_t n_in)
{
    lmq_gptq_calib *g = user;
    if (!tensor || n_in <= 0 || n_tok <= 0) return LMQ_OK;
    if (g->filter && !g->filter(g->filter_ctx, tensor)) return LMQ_OK;
    if (expert < 0) expert = -1;
    /* the rows' identity: members of a group must have read these very rows */
    const uint64_t hx = lmq_hash64(x, (size_t)n_tok * (size_t)n_in * sizeof *x) ^ (uint64_t)n_tok * 0x9e3779b97f4a7c15ULL;
    hname *e = find_name(g, tensor, expert);
    if (!e) {
        char group[256];
        bool grouped = lmq_calib_input_group(tensor, group, sizeof group);
        hmat *gm = grouped ? group_mat(g, group, expert) : NULL;
        if (gm && gm->n == n_in && gm->last_hash == hx && gm->last_round == g->round) {
            lmq_status st = add_name(g, tensor, expert, (size_t)(gm - g->mats), true);
            return st;
        }
        size_t mat = 0;
        lmq_status st = add_mat(g, tensor, grouped && !gm ? group : tensor, expert, n_in, &mat);
        if (!st) st = add_name(g, tensor, expert, mat, false);
        if (st) return st;
        e = &g->names[g->n_names - 1];
    }
    hmat *h = &g->mats[e->mat];
    if (h->n != n_in)
        return lmq_error(LMQ_ERR_FORMAT, "gptq: tensor '%s' read %lld inputs, then %lld", tensor, (long long)h->n,
                         (long long)n_in);
    if (e->alias) {
        if (h->last_hash != hx || h->last_round != g->round)
            return lmq_error(LMQ_ERR_FORMAT, "gptq: tensor '%s' did not read the same input as the other weights of '%s'",
                             tensor, h->group);
        return LMQ_OK;
    }
    lmq_gptq_accumulate_mt(h->h, x, n_tok, n_in, g->n_threads);
    h->last_hash = hx;
    h->last_round = g->round;
    return LMQ_OK;
}

static void note_failure(lmq_gptq_calib *g, const char *tensor, int32_t expert, const char *why);

static const char *mat_owner(const lmq_gptq_calib *g, size_t mat)
{
    const char *owner = g->mats[mat].group;
    for (size_t j = 0; j < g->n_names; j++)
        if (g->names[j].mat == mat && !g->names[j].alias) owner = g->names[j].name;
    return owner;
}

lmq_gptq_calib *calib_store_new(uint64_t max_bytes)
{
    lmq_gptq_calib *g = calloc(1, sizeof *g);
    if (g) g->max_bytes = max_bytes;
    return g;
}

void calib_store_clear(lmq_gptq_calib *g)
{
    for (size_t i = 0; i < g->n_mats; i++) {
        int k = 0;
        while (k < 8 && g->spare[k]) k++;
        if (k < 8) {
            g->spare[k] = g->mats[i].h;
            g->spare_n[k] = g->mats[i].n;
        } else {
            free(g->mats[i].h);
        }
        free(g->mats[i].group);
    }
    for (size_t i = 0; i < g->n_names; i++) free(g->names[i].name);
    g->n_mats = g->n_names = 0;
    g->hint = 0;
    g->bytes = 0;
}

void calib_store_trim(lmq_gptq_calib *g)
{
    for (int k = 0; k < 8; k++) {
        free(g->spare[k]);
        g->spare[k] = NULL;
    }
}

void lmq_gptq_calib_free(lmq_gptq_calib *g)
{
    if (!g) return;
    calib_store_clear(g);
    calib_store_trim(g);
    free(g->mats);
    free(g->names);
    free(g->failures);
    free(g);
}

const float *lmq_gptq_calib_matrix(const lmq_gptq_calib *g, const char *tensor, int32_t expert, int64_t *n,
                                   const char **owner)
{
    if (!g || !tensor) return NULL;
    if (expert < 0) expert = -1;
    for (size_t i = 0; i < g->n_names; i++) {
        const hname *e = &g->names[i];
        if (e->expert != expert || strcmp(e->name, tensor)) continue;
        const hmat *h = &g->mats[e->mat];
        if (h->factored || h->failed) return NULL;
        if (n) *n = h->n;
        if (owner) {
            *owner = e->name;
            for (size_t j = 0; j < g->n_names; j++)
                if (g->names[j].mat == e->mat && !g->names[j].alias) *owner = g->names[j].name;
        }
        return h->h;
    }
    return NULL;
}

size_t lmq_gptq_calib_count(const lmq_gptq_calib *g) { return g ? g->n_mats : 0; }
uint64_t lmq_gptq_calib_bytes(const lmq_gptq_calib *g) { return g ? g->bytes : 0; }
const char *lmq_gptq_calib_failures(const lmq_gptq_calib *g) { return g && g->failures_len ? g->failures : NULL; }

lmq_calib_params lmq_calib_default_params(void)
{
    lmq_calib_params p;
    memset(&p, 0, sizeof p);
    p.n_ctx = 256;
    return p;
}

/* ------------------------------------------------------------ the pass */

typedef struct chunk_cb {
    const lmq_calib_params *p;
    lmq_gptq_calib *g;
} chunk_cb;

static void on_chunk(void *ctx, int32_t chunk, int32_t n_chunks, double ppl)
{
    chunk_cb *cb = ctx;
    cb->g->round++; /* a new chunk: grouped inputs are new rows */
    if (cb->p->progress) cb->p->progress(cb->p->progress_ctx, "collect", chunk + 1, n_chunks, NULL);
}

lmq_status lmq_gptq_calib_collect(lmq_model *m, const int32_t *toks, size_t n_toks, const lmq_calib_params *p,
                                  lmq_gptq_calib **out)
{
    *out = NULL;
    if (!m || !toks || !p) return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_gptq_calib_collect: bad arguments");
    lmq_gptq_calib *g = calib_store_new(p->max_bytes);
    if (!g) return lmq_error(LMQ_ERR_NOMEM, "out of memory");
    g->n_threads = p->n_threads;
    lmq_ppl_params pp = lmq_ppl_default_params();
    pp.n_ctx = p->n_ctx > 0 ? p->n_ctx : 256;
    pp.n_chunks = p->n_chunks;
    pp.n_threads = p->n_threads;
    pp.observer = calib_observe;
    pp.observer_user = g;
    chunk_cb cb = {p, g};
    pp.on_chunk = on_chunk;
    pp.cb_ctx = &cb;
    int64_t total = (int64_t)n_toks / pp.n_ctx;
    if (pp.n_chunks > 0 && pp.n_chunks < total) total = pp.n_chunks;
    if (p->progress) p->progress(p->progress_ctx, "collect", 0, total, NULL);
    lmq_ppl_result r;
    lmq_status st = lmq_perplexity(m, toks, (int64_t)n_toks, &pp, &r);
    if (st) {
        lmq_gptq_calib_free(g);
        return st;
    }
    *out = g;
    return LMQ_OK;
}

/* ------------------------------------------------------------ factors */

static void note_failure(lmq_gptq_calib *g, const char *tensor, int32_t expert, const char *why)
{
    char line[600];
    int n = expert >= 0 ? snprintf(line, sizeof line, "%s expert %d: %s\n", tensor, (int)expert, why)
                        : snprintf(line, sizeof line, "%s: %s\n", tensor, why);
    if (n <= 0) return;
    size_t len = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    if (g->failures_len + len + 1 > g->failures_cap) {
        size_t cap = (g->failures_cap + len + 1) * 2;
        char *q = realloc(g->failures, cap);
        if (!q) return;
        g->failures = q;
        g->failures_cap = cap;
    }
    memcpy(g->failures + g->failures_len, line, len);
    g->failures_len += len;
    g->failures[g->failures_len] = 0;
}

const float *lmq_gptq_calib_factor(void *user, const char *tensor, int32_t expert, int64_t n_cols)
{
    lmq_gptq_calib *g = user;
    if (!g || !tensor) return NULL;
    hname *e = find_name(g, tensor, expert < 0 ? -1 : expert);
    if (!e) return NULL;
    hmat *h = &g->mats[e->mat];
    if (h->n != n_cols || h->failed) return NULL;
    if (!h->factored) {
        lmq_status st = lmq_gptq_factor(h->h, h->n, LMQ_CALIB_GPTQ_DAMP);
        if (st) {
            note_failure(g, tensor, expert, lmq_last_error());
            lmq_error_clear();
            h->failed = true;
            return NULL;
        }
        h->factored = true;
    }
    return h->h;
}

typedef struct factor_all {
    lmq_gptq_calib *g;
    size_t *order;     /* matrices to factor, largest first */
    size_t n;
    lmq_status *st;
    char (*err)[512];
    _Atomic size_t next;
} factor_all;

static void factor_some(void *ctx, int ith, int nth)
{
    factor_all *f = ctx;
    (void)ith;
    (void)nth;
    for (size_t k; (k = atomic_fetch_add(&f->next, 1)) < f->n;) {
        hmat *h = &f->g->mats[f->order[k]];
        f->st[k] = lmq_gptq_factor(h->h, h->n, LMQ_CALIB_GPTQ_DAMP);
        if (f->st[k]) {
            snprintf(f->err[k], sizeof f->err[k], "%s", lmq_last_error());
            lmq_error_clear();
        }
    }
}

void calib_factor_done(lmq_gptq_calib *g, size_t mat, lmq_status st, const char *err)
{
    hmat *h = &g->mats[mat];
    if (!st) {
        h->factored = true;
        return;
    }
    h->failed = true;
    note_failure(g, mat_owner(g, mat), h->expert, err);
}

bool calib_uses_mat(const lmq_gptq_calib *g, const char *tensor, size_t mat)
{
    for (size_t i = 0; tensor && i < g->n_names; i++)
        if (g->names[i].mat == mat && !strcmp(g->names[i].name, tensor)) return true;
    return false;
}

size_t calib_factor_all(lmq_gptq_calib *g, bool keep_largest)
{
    size_t kept = SIZE_MAX;
    size_t n = 0;
    size_t *order = malloc((g->n_mats + 1) * sizeof *order);
    lmq_status *st = calloc(g->n_mats + 1, sizeof *st);
    char(*err)[512] = calloc(g->n_mats + 1, sizeof *err);
    if (!order || !st || !err) { /* lmq_gptq_calib_factor factors them one by one */
        free(order);
        free(st);
        free(err);
        return SIZE_MAX;
    }
    for (size_t i = 0; i < g->n_mats; i++)
        if (!g->mats[i].factored && !g->mats[i].failed) order[n++] = i;
    for (size_t i = 1; i < n; i++) /* largest first: the long ones start early */
        for (size_t j = i; j > 0 && g->mats[order[j]].n > g->mats[order[j - 1]].n; j--) {
            const size_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    int nth = g->n_threads > 0 ? g->n_threads : lmq_n_cpus();
    size_t first = 0;
    if (keep_largest && nth >= 2 && n >= 2) {
        kept = order[0];
        first = 1;
        nth--;
    }
    factor_all f = {g, order + first, n - first, st + first, err + first, 0};
    if ((size_t)nth > n - first) nth = (int)(n - first);
    if (nth <= 1 || lmq_pool_for(nth, factor_some, &f)) factor_some(&f, 0, 1);
    for (size_t k = first; k < n; k++) calib_factor_done(g, order[k], st[k], err[k]);
    free(order);
    free(st);
    free(err);
    return kept;
}
