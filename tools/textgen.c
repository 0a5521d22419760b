/* The generation loop shared by `lmq run`, `lmq chat` and `lmq serve`. */
#include "textgen.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

lmq_status textgen_tokenize(const lmq_vocab *v, const char *text, size_t len, bool add_special, bool parse_special,
                            int32_t **out, size_t *n)
{
    return lmq_tokenize_alloc(v, text, len, add_special, parse_special, out, n);
}

bool textgen_buf_add(textgen_buf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return false;
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return true;
}

/* The fallback for models without a template, from the conversation's JSON. */
static lmq_status render_plain(const char *messages_json, char **out)
{
    cJSON *arr = cJSON_Parse(messages_json);
    if (!cJSON_IsArray(arr)) {
        cJSON_Delete(arr);
        return lmq_error(LMQ_ERR_FORMAT, "messages: expected a JSON list");
    }
    textgen_buf b = {0};
    bool ok = true;
    const cJSON *m;
    cJSON_ArrayForEach(m, arr) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        const char *r = cJSON_IsString(role) ? role->valuestring : "user";
        const char *text = cJSON_IsString(content) ? content->valuestring : "";
        const char *label = !strcmp(r, "system") ? "System" : !strcmp(r, "assistant") ? "Assistant" : "User";
        ok = ok && textgen_buf_add(&b, label, strlen(label)) && textgen_buf_add(&b, ": ", 2) &&
             textgen_buf_add(&b, text, strlen(text)) && textgen_buf_add(&b, "\n", 1);
    }
    ok = ok && textgen_buf_add(&b, "Assistant:", 10);
    cJSON_Delete(arr);
    if (!ok) {
        free(b.p);
        return lmq_error(LMQ_ERR_NOMEM, "prompt");
    }
    *out = b.p;
    return LMQ_OK;
}

lmq_status textgen_render_chat(const lmq_chat_template *tmpl, const char *messages_json, const char *bos,
                               const char *eos, char **out)
{
    *out = NULL;
    if (!tmpl) return render_plain(messages_json, out);
    lmq_chat_error err;
    memset(&err, 0, sizeof err);
    lmq_chat_vars vars;
    memset(&vars, 0, sizeof vars);
    vars.messages_json = messages_json;
    vars.add_generation_prompt = true;
    vars.bos_token = bos;
    vars.eos_token = eos;
    vars.error = &err;
    size_t len;
    lmq_status s = lmq_chat_render(tmpl, &vars, out, &len);
    if (s && err.line > 0) return lmq_error(s, "chat template (line %d, column %d): %s", err.line, err.col, err.message);
    if (s && err.message[0]) return lmq_error(s, "chat template: %s", err.message);
    if (s) return lmq_error_prefix(s, "chat template");
    return LMQ_OK;
}

size_t textgen_keep_prefix(lmq_context *ctx, const int32_t *cache, size_t n_cache, const int32_t *toks, size_t n)
{
    size_t common = 0;
    while (common < n && common < n_cache && toks[common] == cache[common]) common++;
    if (common == n && n > 0) common--; /* re-evaluate the last token to get its logits */
    lmq_kv_truncate(ctx, (int32_t)common);
    /* a sliding-window cache may have restarted further back */
    return (size_t)lmq_n_past(ctx);
}

/* Length of the longest suffix of s[0..n) that is a proper prefix of a stop string. */
static size_t held_suffix(const char *s, size_t n, const textgen_opts *o)
{
    size_t best = 0;
    for (int i = 0; i < o->n_stops; i++) {
        size_t sl = strlen(o->stops[i]);
        for (size_t k = sl - 1 < n ? sl - 1 : n; k > best; k--)
            if (!memcmp(s + n - k, o->stops[i], k)) {
                best = k;
                break;
            }
    }
    return best;
}

/* Position of the first stop string in s[0..n), or n when none. */
static size_t find_stop(const char *s, size_t n, const textgen_opts *o)
{
    size_t first = n;
    for (int i = 0; i < o->n_stops; i++) {
        const char *hit = memmem(s, n, o->stops[i], strlen(o->stops[i]));
        if (hit && (size_t)(hit - s) < first) first = (size_t)(hit - s);
    }
    return first;
}

lmq_status textgen_begin(textgen *g, lmq_context *ctx, const lmq_vocab *v, lmq_sampler *smp, const int32_t *prompt,
                         size_t n_prompt, const textgen_opts *opts)
{
    memset(g, 0, sizeof *g);
    g->ctx = ctx;
    g->v = v;
    g->smp = smp;
    g->o = *opts;
    lmq_status s = LMQ_OK;
    const int32_t nb = lmq_context_n_batch(ctx);
    if ((int64_t)lmq_n_past(ctx) + (int64_t)n_prompt > lmq_context_n_ctx(ctx))
        return lmq_error(LMQ_ERR_LIMIT, "the prompt (%zu tokens) does not fit in the context (%d tokens, %d used); use a larger -c",
                         n_prompt, lmq_context_n_ctx(ctx), lmq_n_past(ctx));
    double t0 = lmq_time_s();
    for (size_t i = 0; i < n_prompt; i += (size_t)nb) {
        int32_t n = (int32_t)(n_prompt - i < (size_t)nb ? n_prompt - i : (size_t)nb);
        if ((s = lmq_eval(ctx, prompt + i, n, i + (size_t)n == n_prompt ? 1 : 0))) return s;
    }
    for (size_t i = 0; i < n_prompt; i++) lmq_sampler_accept(smp, prompt[i]);
    g->st.n_prompt = (int32_t)n_prompt;
    g->st.t_prompt = lmq_time_s() - t0;
    g->piece_cap = lmq_vocab_max_piece_len(v) + 8;
    g->piece = malloc(g->piece_cap);
    if (!g->piece) return lmq_error(LMQ_ERR_NOMEM, "generation buffers");
    lmq_detok_stream_init(&g->ds, v, g->o.unparse_special, false);
    g->t0 = lmq_time_s();
    return LMQ_OK;
}

/* Ends the generation; with `flush`, hands out everything still held. */
static lmq_status finish(textgen *g, bool flush, const char **text, size_t *n)
{
    g->done = true;
    g->st.t_gen = lmq_time_s() - g->t0;
    if (!flush) return LMQ_OK;
    size_t k = 0;
    lmq_detok_stream_flush(&g->ds, g->piece, g->piece_cap, &k);
    if (!textgen_buf_add(&g->pend, g->piece, k)) return lmq_error(LMQ_ERR_NOMEM, "generation buffers");
    *text = g->pend.p;
    *n = g->pend.len;
    g->consumed = g->pend.len;
    return LMQ_OK;
}

lmq_status textgen_next(textgen *g, const char **text, size_t *n)
{
    *text = NULL;
    *n = 0;
    if (g->done) return LMQ_OK;
    if (g->consumed) {
        memmove(g->pend.p, g->pend.p + g->consumed, g->pend.len - g->consumed);
        g->pend.len -= g->consumed;
        g->consumed = 0;
    }
    if (g->o.n_predict >= 0 && g->st.n_gen >= g->o.n_predict) return finish(g, true, text, n);
    int32_t tok = lmq_sampler_sample(g->smp, lmq_logits(g->ctx, 0));
    lmq_sampler_accept(g->smp, tok);
    if (lmq_vocab_is_eog(g->v, tok)) {
        g->st.stopped_eog = true;
        return finish(g, true, text, n);
    }
    g->st.n_gen++;
    size_t k = 0;
    lmq_status s = lmq_detok_stream_push(&g->ds, tok, g->piece, g->piece_cap, &k);
    if (!s && !textgen_buf_add(&g->pend, g->piece, k)) s = lmq_error(LMQ_ERR_NOMEM, "generation buffers");
    if (s) {
        finish(g, false, text, n);
        return s;
    }
    size_t stop = find_stop(g->pend.p, g->pend.len, &g->o);
    size_t emit = stop < g->pend.len ? stop : g->pend.len - held_suffix(g->pend.p, g->pend.len, &g->o);
    *text = g->pend.p;
    *n = emit;
    g->consumed = emit;
    if (stop < g->pend.len) {
        g->st.stopped_stop = true;
        return finish(g, false, text, n);
    }
    if (lmq_n_past(g->ctx) >= lmq_context_n_ctx(g->ctx)) {
        g->st.stopped_ctx = true;
        return finish(g, true, text, n);
    }
    if ((s = lmq_eval(g->ctx, &tok, 1, 1))) finish(g, false, text, n);
    return s;
}

void textgen_end(textgen *g)
{
    free(g->piece);
    free(g->pend.p);
    g->piece = NULL;
    g->pend.p = NULL;
}

lmq_status textgen_run(lmq_context *ctx, const lmq_vocab *v, lmq_sampler *smp, const int32_t *prompt, size_t n_prompt,
                       const textgen_opts *o, textgen_stats *st, char **text)
{
    if (text) *text = NULL;
    textgen g;
    lmq_status s = textgen_begin(&g, ctx, v, smp, prompt, n_prompt, o);
    if (s) {
        *st = g.st;
        textgen_end(&g);
        return s;
    }
    textgen_buf all = {0};
    while (!g.done && !s) {
        const char *piece;
        size_t n;
        s = textgen_next(&g, &piece, &n);
        if (!n) continue;
        if (o->out) {
            fwrite(piece, 1, n, o->out);
            fflush(o->out);
        }
        if (text && !textgen_buf_add(&all, piece, n) && !s) s = lmq_error(LMQ_ERR_NOMEM, "generation buffers");
    }
    if (o->out) fflush(o->out);
    *st = g.st;
    textgen_end(&g);
    if (text && !s) *text = all.p ? all.p : calloc(1, 1);
    else free(all.p);
    return s;
}
