/* The generation loop (lmq_rt_model.h, "generation"): prompt evaluation with
 * prefix reuse, token choice (constrained to a JSON schema when asked),
 * streaming UTF-8-safe detokenization and stop strings matched across token
 * boundaries. `lmq run`, `lmq chat` and
 * embedders use it; docs/API.md describes the contract. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

struct lmq_gen {
    lmq_context *ctx;
    const lmq_vocab *v;
    int32_t n_vocab, n_ctx, n_batch;
    /* the sequence: toks[0..n_cached) are in the KV cache (-1: a token the
     * generator did not see, held before lmq_gen_new); toks[n_cached..n_toks)
     * are queued for evaluation (the rest of a prompt, or the token just
     * chosen) */
    int32_t *toks;      /* (n_ctx + 1) */
    size_t n_cached, n_toks;
    lmq_gen_params p;
    size_t max_stop;    /* longest stop string */
    lmq_detok_stream ds;
    char *piece;        /* (piece_cap) one decoded token */
    size_t piece_cap;
    char *pend;         /* (pend_cap) text held back while it may start a stop string */
    size_t pend_len, pend_cap, consumed;
    lmq_gen_stats st;
    double t0;
    int32_t last;
    bool active, done, cancel, prompt_done;
    /* constrained decoding (p.schema): allocated at the first constrained
     * generation, kept for the next ones */
    lmq_json_vocab *own_jv;     /* built when p.json_vocab is NULL */
    const lmq_json_vocab *jv;   /* p.json_vocab or own_jv */
    lmq_json_matcher *jm;       /* this generation's place in the document (NULL: unconstrained) */
    uint8_t *mask;              /* ((n_vocab + 7) / 8) the tokens allowed next */
    float *masked;              /* (n_vocab) logits with the disallowed at -inf, for p.choose */
};

lmq_gen_params lmq_gen_default_params(void)
{
    lmq_gen_params p;
    memset(&p, 0, sizeof p);
    p.n_predict = -1;
    return p;
}

/* Room for the held-back text: a stop string's start plus one piece. */
static lmq_status reserve_pend(lmq_gen *g, size_t max_stop)
{
    size_t need = max_stop + g->piece_cap + 8;
    if (need <= g->pend_cap) return LMQ_OK;
    char *p = realloc(g->pend, need);
    if (!p) return lmq_error(LMQ_ERR_NOMEM, "generation: text buffer of %zu bytes", need);
    g->pend = p;
    g->pend_cap = need;
    return LMQ_OK;
}

lmq_status lmq_gen_new(lmq_context *ctx, lmq_gen **out)
{
    *out = NULL;
    if (!ctx) return lmq_error(LMQ_ERR_INVALID_ARG, "generation: no context");
    const lmq_model *m = lmq_context_model(ctx);
    const lmq_vocab *v = lmq_model_vocab(m);
    if (!v) return lmq_error(LMQ_ERR_NOT_FOUND, "generation: the model has no tokenizer");
    lmq_gen *g = calloc(1, sizeof *g);
    if (!g) return lmq_error(LMQ_ERR_NOMEM, "generation");
    g->ctx = ctx;
    g->v = v;
    g->n_vocab = lmq_model_hparams(m)->n_vocab;
    g->n_ctx = lmq_context_n_ctx(ctx);
    g->n_batch = lmq_context_n_batch(ctx);
    g->piece_cap = lmq_vocab_max_piece_len(v) + 8;
    g->toks = malloc(((size_t)g->n_ctx + 1) * sizeof *g->toks);
    g->piece = malloc(g->piece_cap);
    lmq_status s = g->toks && g->piece ? reserve_pend(g, 64) : LMQ_ERR_NOMEM;
    if (s) {
        lmq_gen_free(g);
        return lmq_error(LMQ_ERR_NOMEM, "generation: buffers for %d tokens", lmq_context_n_ctx(ctx));
    }
    g->n_cached = g->n_toks = (size_t)lmq_n_past(ctx);
    for (size_t i = 0; i < g->n_cached; i++) g->toks[i] = -1;
    g->last = -1;
    g->done = true;
    *out = g;
    return LMQ_OK;
}

void lmq_gen_free(lmq_gen *g)
{
    if (!g) return;
    free(g->toks);
    free(g->piece);
    free(g->pend);
    lmq_json_vocab_free(g->own_jv);
    lmq_json_matcher_free(g->jm);
    free(g->mask);
    free(g->masked);
    free(g);
}

/* The cache may have been changed behind the generator's back (lmq_eval,
 * lmq_kv_truncate by the caller): keep only what is certainly still true. */
static void sync_cache(lmq_gen *g)
{
    size_t past = (size_t)lmq_n_past(g->ctx);
    if (past > g->n_cached) {
        lmq_kv_truncate(g->ctx, (int32_t)g->n_cached);
        past = (size_t)lmq_n_past(g->ctx);
    }
    if (past < g->n_cached) g->n_cached = past;
    g->n_toks = g->n_cached;
}

static lmq_status check_params(lmq_gen *g, const int32_t *prompt, size_t n, const lmq_gen_params *p)
{
    if (p->n_stops < 0 || p->n_stops > LMQ_GEN_MAX_STOPS)
        return lmq_error(LMQ_ERR_INVALID_ARG, "generation: %d stop strings (at most %d)", p->n_stops,
                         LMQ_GEN_MAX_STOPS);
    size_t max_stop = 0;
    for (int i = 0; i < p->n_stops; i++) {
        size_t k = p->stops[i] ? strlen(p->stops[i]) : 0;
        if (!k) return lmq_error(LMQ_ERR_INVALID_ARG, "generation: stop string %d is empty", i);
        if (k > 4096) return lmq_error(LMQ_ERR_INVALID_ARG, "generation: stop string %d is %zu bytes (at most 4096)", i, k);
        if (k > max_stop) max_stop = k;
    }
    for (size_t i = 0; i < n; i++)
        if (prompt[i] < 0 || prompt[i] >= g->n_vocab)
            return lmq_error(LMQ_ERR_INVALID_ARG, "generation: prompt token %zu is %d (vocabulary of %d)", i, prompt[i],
                             g->n_vocab);
    g->max_stop = max_stop;
    return reserve_pend(g, max_stop);
}

/* ---------------------------------------------------------------- constrained decoding */

lmq_status lmq_json_vocab_from_vocab(const lmq_vocab *v, int32_t n_vocab, lmq_json_vocab **out)
{
    *out = NULL;
    if (!v || n_vocab <= 0) return lmq_error(LMQ_ERR_INVALID_ARG, "json vocabulary: no vocabulary");
    const char **pieces = malloc((size_t)n_vocab * sizeof *pieces);
    size_t *lens = malloc((size_t)n_vocab * sizeof *lens);
    if (!pieces || !lens) {
        free(pieces);
        free(lens);
        return lmq_error(LMQ_ERR_NOMEM, "json vocabulary of %d tokens", n_vocab);
    }
    for (int32_t i = 0; i < n_vocab; i++) {
        lens[i] = 0;
        pieces[i] = lmq_token_to_piece(v, i, false, &lens[i]); /* NULL past the tokenizer's ids */
        if (!pieces[i]) lens[i] = 0;
    }
    int32_t eos = lmq_vocab_eos(v);
    lmq_status s = lmq_json_vocab_new(n_vocab, pieces, lens, eos < n_vocab ? eos : -1, out);
    free(pieces);
    free(lens);
    return s;
}

/* Prepares the constraint of a generation (p->schema set): the matcher at
 * the start of the document, the vocabulary and the buffers. */
static lmq_status constrain(lmq_gen *g, const lmq_gen_params *p)
{
    lmq_json_matcher_free(g->jm);
    g->jm = NULL;
    if (!p->schema) return LMQ_OK;
    lmq_status s;
    if (!p->json_vocab && !g->own_jv && (s = lmq_json_vocab_from_vocab(g->v, g->n_vocab, &g->own_jv)))
        return lmq_error_prefix(s, "generation");
    g->jv = p->json_vocab ? p->json_vocab : g->own_jv;
    if (!g->mask && !(g->mask = malloc(((size_t)g->n_vocab + 7) / 8)))
        return lmq_error(LMQ_ERR_NOMEM, "generation: mask of %d tokens", g->n_vocab);
    if (p->choose && !g->masked && !(g->masked = malloc((size_t)g->n_vocab * sizeof *g->masked)))
        return lmq_error(LMQ_ERR_NOMEM, "generation: logits of %d tokens", g->n_vocab);
    if ((s = lmq_json_matcher_new(p->schema, &g->jm))) return lmq_error_prefix(s, "generation");
    return LMQ_OK;
}

static bool allowed(const uint8_t *mask, int32_t tok) { return mask[tok >> 3] >> (tok & 7) & 1; }

/* The token after `logits` under the schema; -1 cancels (choose). *end:
 * the document is whole and nothing may follow it (no token chosen). */
static lmq_status choose_constrained(lmq_gen *g, const float *logits, int32_t *tok, bool *end)
{
    *tok = -1;
    *end = false;
    int32_t n_ok = lmq_json_mask(g->jv, g->jm, g->mask);
    int32_t eos = lmq_vocab_eos(g->v);
    bool eos_ok = eos >= 0 && eos < g->n_vocab && allowed(g->mask, eos);
    if (lmq_json_matcher_done(g->jm) && n_ok == (eos_ok ? 1 : 0)) {
        *end = true;
        return LMQ_OK;
    }
    if (n_ok <= 0)
        return lmq_error(LMQ_ERR_FORMAT, "constrained decoding: no token of the vocabulary continues the JSON document "
                                         "after %d generated tokens", g->st.n_gen);
    if (g->p.choose) {
        for (int32_t i = 0; i < g->n_vocab; i++) g->masked[i] = allowed(g->mask, i) ? logits[i] : -INFINITY;
        *tok = g->p.choose(g->p.choose_user, g->masked, g->n_vocab);
    } else if (g->p.sampler) {
        lmq_sampler_set_mask(g->p.sampler, g->mask);
        *tok = lmq_sampler_sample(g->p.sampler, logits);
        lmq_sampler_set_mask(g->p.sampler, NULL);
    } else {
        int32_t best = -1;
        for (int32_t i = 0; i < g->n_vocab; i++)
            if (allowed(g->mask, i) && (best < 0 || logits[i] > logits[best])) best = i;
        *tok = best;
    }
    if (*tok < 0 || *tok >= g->n_vocab) return LMQ_OK; /* a cancel, or out of range: the caller says */
    if (lmq_vocab_is_eog(g->v, *tok)) {
        if (lmq_json_matcher_done(g->jm)) return LMQ_OK;
    } else {
        size_t len = 0;
        const char *piece = lmq_token_to_piece(g->v, *tok, false, &len);
        if (piece && len && lmq_json_matcher_feed(g->jm, piece, len)) return LMQ_OK;
    }
    return lmq_error(LMQ_ERR_FORMAT, "constrained decoding: the chosen token %d leaves the JSON document after %d "
                                     "generated tokens (the choice ignored the mask)", *tok, g->st.n_gen);
}

/* Common tail of both begins: toks[n_cached..n_toks) is queued. */
static void start(lmq_gen *g, const lmq_gen_params *p, size_t n_prompt, size_t n_reused)
{
    g->p = *p;
    memset(&g->st, 0, sizeof g->st);
    g->st.n_prompt = (int32_t)n_prompt;
    g->st.n_reused = (int32_t)n_reused;
    g->pend_len = g->consumed = 0;
    g->last = -1;
    g->active = true;
    g->done = g->cancel = g->prompt_done = false;
    g->t0 = lmq_time_s();
    lmq_detok_stream_init(&g->ds, g->v, p->unparse_special, false);
    if (p->sampler && !p->choose) {
        lmq_sampler_reset(p->sampler);
        for (size_t i = 0; i < g->n_toks; i++)
            if (g->toks[i] >= 0) lmq_sampler_accept(p->sampler, g->toks[i]);
    }
}

lmq_status lmq_gen_begin(lmq_gen *g, const int32_t *prompt, size_t n, const lmq_gen_params *p)
{
    g->done = true;
    g->active = false;
    sync_cache(g);
    if (n == 0) return lmq_error(LMQ_ERR_INVALID_ARG, "generation: empty prompt");
    if (n > (size_t)g->n_ctx)
        return lmq_error(LMQ_ERR_LIMIT, "the prompt (%zu tokens) does not fit in the context (%d tokens); use a larger -c",
                         n, g->n_ctx);
    lmq_status s = check_params(g, prompt, n, p);
    if (!s) s = constrain(g, p);
    if (s) return s;
    size_t common = 0;
    while (common < g->n_cached && common < n && g->toks[common] == prompt[common]) common++;
    if (common == n) common--; /* the last prompt token is evaluated again for its logits */
    if (common < g->n_cached) {
        lmq_kv_truncate(g->ctx, (int32_t)common);
        /* a recurrent state or sliding-window ring may resume further back */
        g->n_cached = (size_t)lmq_n_past(g->ctx);
        if (g->n_cached > common) g->n_cached = common; /* never: truncation does not grow */
    }
    memcpy(g->toks + g->n_cached, prompt + g->n_cached, (n - g->n_cached) * sizeof *prompt);
    g->n_toks = n;
    start(g, p, n, g->n_cached);
    return LMQ_OK;
}

lmq_status lmq_gen_begin_append(lmq_gen *g, const int32_t *prompt, size_t n, const lmq_gen_params *p)
{
    g->done = true;
    g->active = false;
    sync_cache(g);
    if (n == 0) return lmq_error(LMQ_ERR_INVALID_ARG, "generation: empty prompt");
    if (g->n_cached + n > (size_t)g->n_ctx)
        return lmq_error(LMQ_ERR_LIMIT,
                         "the prompt (%zu tokens) does not fit in the context (%d tokens, %zu used); use a larger -c", n,
                         g->n_ctx, g->n_cached);
    lmq_status s = check_params(g, prompt, n, p);
    if (!s) s = constrain(g, p);
    if (s) return s;
    memcpy(g->toks + g->n_cached, prompt, n * sizeof *prompt);
    size_t reused = g->n_cached;
    g->n_toks = g->n_cached + n;
    start(g, p, g->n_toks, reused);
    return LMQ_OK;
}

/* Ends the generation: the queued tokens are dropped (they are not in the
 * cache). With `flush` everything held back is handed out. */
static lmq_status finish(lmq_gen *g, lmq_gen_stop why, bool flush, const char **text, size_t *len)
{
    g->done = true;
    g->active = false;
    g->st.stop = why;
    g->n_toks = g->n_cached;
    if (g->prompt_done) g->st.t_gen = lmq_time_s() - g->t0;
    if (!flush) return LMQ_OK;
    size_t k = 0;
    lmq_detok_stream_flush(&g->ds, g->pend + g->pend_len, g->pend_cap - g->pend_len, &k);
    g->pend_len += k;
    *text = g->pend;
    *len = g->pend_len;
    g->consumed = g->pend_len;
    return LMQ_OK;
}

static lmq_status fail(lmq_gen *g, lmq_status s)
{
    const char *t;
    size_t n;
    finish(g, LMQ_GEN_STOP_ERROR, false, &t, &n);
    return s;
}

/* Evaluates up to `budget` queued tokens (<= 0: all); logits only for the
 * last queued token. */
static lmq_status eval_queued(lmq_gen *g, int64_t budget)
{
    while (g->n_cached < g->n_toks) {
        size_t left = g->n_toks - g->n_cached;
        size_t k = left < (size_t)g->n_batch ? left : (size_t)g->n_batch;
        if (g->p.prompt_last_alone && k == left && k > 1) k--; /* the last token in a batch of its own */
        if (budget > 0 && (size_t)budget < k) k = (size_t)budget;
        lmq_status s = lmq_eval(g->ctx, g->toks + g->n_cached, (int32_t)k, k == left ? 1 : 0);
        if (s) return s;
        g->n_cached += k;
        if (budget > 0 && (budget -= (int64_t)k) == 0) break;
    }
    return LMQ_OK;
}

lmq_status lmq_gen_prefill(lmq_gen *g, int32_t max_tokens, int32_t *left)
{
    lmq_status s = LMQ_OK;
    if (g->active && !g->prompt_done) {
        s = eval_queued(g, max_tokens > 0 ? max_tokens : 0);
        if (s) fail(g, s);
    }
    if (left) *left = g->active && !g->prompt_done ? (int32_t)(g->n_toks - g->n_cached) : 0;
    return s;
}

/* Position of the first stop string in s[0..n), or n. */
static size_t find_stop(const lmq_gen *g, const char *s, size_t n)
{
    size_t first = n;
    for (int i = 0; i < g->p.n_stops; i++) {
        const char *hit = memmem(s, n, g->p.stops[i], strlen(g->p.stops[i]));
        if (hit && (size_t)(hit - s) < first) first = (size_t)(hit - s);
    }
    return first;
}

/* Length of the longest suffix of s[0..n) that is a proper prefix of a stop string. */
static size_t held_suffix(const lmq_gen *g, const char *s, size_t n)
{
    size_t best = 0;
    for (int i = 0; i < g->p.n_stops; i++) {
        size_t sl = strlen(g->p.stops[i]);
        for (size_t k = sl - 1 < n ? sl - 1 : n; k > best; k--)
            if (!memcmp(s + n - k, g->p.stops[i], k)) {
                best = k;
                break;
            }
    }
    return best;
}

static int32_t argmax(const float *x, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

lmq_status lmq_gen_next(lmq_gen *g, const char **text, size_t *len)
{
    *text = NULL;
    *len = 0;
    if (g->done) return LMQ_OK;
    if (g->consumed) {
        memmove(g->pend, g->pend + g->consumed, g->pend_len - g->consumed);
        g->pend_len -= g->consumed;
        g->consumed = 0;
    }
    if (g->cancel) return finish(g, LMQ_GEN_STOP_CANCEL, true, text, len);
    /* the last token chosen is not evaluated when nothing follows it */
    if (g->prompt_done && g->p.n_predict >= 0 && g->st.n_gen >= g->p.n_predict)
        return finish(g, LMQ_GEN_STOP_LENGTH, true, text, len);
    if (g->n_toks > (size_t)g->n_ctx) return finish(g, LMQ_GEN_STOP_CONTEXT, true, text, len);
    lmq_status s = eval_queued(g, 0);
    if (s) return fail(g, s);
    if (!g->prompt_done) {
        g->prompt_done = true;
        double now = lmq_time_s();
        g->st.t_prompt = now - g->t0;
        g->t0 = now;
    }
    if (g->p.n_predict >= 0 && g->st.n_gen >= g->p.n_predict) return finish(g, LMQ_GEN_STOP_LENGTH, true, text, len);
    const float *logits = lmq_logits(g->ctx, 0);
    if (!logits) return fail(g, lmq_error(LMQ_ERR_INVALID_ARG, "generation: the context has no logits"));
    int32_t tok;
    if (g->jm) {
        bool end;
        if ((s = choose_constrained(g, logits, &tok, &end))) return fail(g, s);
        if (end) {
            g->last = lmq_vocab_eos(g->v);
            return finish(g, LMQ_GEN_STOP_EOG, true, text, len);
        }
    } else {
        tok = g->p.choose ? g->p.choose(g->p.choose_user, logits, g->n_vocab)
              : g->p.sampler ? lmq_sampler_sample(g->p.sampler, logits)
                             : argmax(logits, g->n_vocab);
    }
    if (tok < 0) return finish(g, LMQ_GEN_STOP_CANCEL, true, text, len);
    if (tok >= g->n_vocab)
        return fail(g, lmq_error(LMQ_ERR_INVALID_ARG, "generation: token %d chosen (vocabulary of %d)", tok, g->n_vocab));
    if (g->p.sampler && !g->p.choose) lmq_sampler_accept(g->p.sampler, tok);
    g->last = tok;
    if (lmq_vocab_is_eog(g->v, tok)) return finish(g, LMQ_GEN_STOP_EOG, true, text, len);
    g->st.n_gen++;
    g->toks[g->n_toks++] = tok;
    size_t k = 0;
    s = lmq_detok_stream_push(&g->ds, tok, g->pend + g->pend_len, g->pend_cap - g->pend_len, &k);
    if (s) return fail(g, s);
    g->pend_len += k;
    size_t stop = find_stop(g, g->pend, g->pend_len);
    size_t emit = stop < g->pend_len ? stop : g->pend_len - held_suffix(g, g->pend, g->pend_len);
    *text = g->pend;
    *len = emit;
    g->consumed = emit;
    if (stop < g->pend_len) return finish(g, LMQ_GEN_STOP_STRING, false, text, len);
    return LMQ_OK;
}

void lmq_gen_cancel(lmq_gen *g)
{
    if (g && g->active) g->cancel = true;
}

bool lmq_gen_done(const lmq_gen *g) { return g->done; }
const lmq_gen_stats *lmq_gen_get_stats(const lmq_gen *g) { return &g->st; }
int32_t lmq_gen_last_token(const lmq_gen *g) { return g->last; }

const int32_t *lmq_gen_tokens(const lmq_gen *g, size_t *n)
{
    *n = g->n_cached;
    return g->toks;
}

void lmq_gen_reset(lmq_gen *g)
{
    lmq_kv_truncate(g->ctx, 0);
    g->n_cached = (size_t)lmq_n_past(g->ctx);
    for (size_t i = 0; i < g->n_cached; i++) g->toks[i] = -1;
    g->n_toks = g->n_cached;
    g->done = true;
    g->active = false;
}

lmq_status lmq_generate(lmq_gen *g, const int32_t *prompt, size_t n, const lmq_gen_params *p, lmq_gen_stats *st)
{
    lmq_status s = lmq_gen_begin(g, prompt, n, p);
    while (!s && !g->done) {
        const char *t;
        size_t k;
        s = lmq_gen_next(g, &t, &k);
        if (k && p->on_text && !p->on_text(p->user, t, k) && !g->done) {
            const char *t2;
            size_t k2;
            finish(g, LMQ_GEN_STOP_CANCEL, false, &t2, &k2);
        }
    }
    if (st) *st = g->st;
    return s;
}

lmq_status lmq_generate_text(lmq_gen *g, const char *prompt, size_t len, const lmq_gen_params *p, lmq_gen_stats *st)
{
    int32_t *toks = NULL;
    size_t n = 0;
    lmq_status s = lmq_tokenize_alloc(g->v, prompt, len, true, true, &toks, &n);
    if (!s) s = lmq_generate(g, toks, n, p, st);
    else if (st) memset(st, 0, sizeof *st);
    free(toks);
    return s;
}
