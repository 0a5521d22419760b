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

lmq_gen_params textgen_params(const textgen_opts *o)
{
    lmq_gen_params p = lmq_gen_default_params();
    p.n_predict = o->n_predict;
    for (int i = 0; i < o->n_stops; i++) p.stops[i] = o->stops[i];
    p.n_stops = o->n_stops;
    p.unparse_special = o->unparse_special;
    return p;
}

/* serve's sampler keeps the penalty window serve fed it: sampled here and
 * fed each generated token, never reset */
static int32_t choose_serve(void *user, const float *logits, int32_t n_vocab)
{
    (void)n_vocab;
    textgen *g = user;
    lmq_sampler *smp = g->smp;
    if (g->jm) {
        /* the document is whole: the turn ends here (a negative end_tok cancels) */
        if (lmq_json_matcher_done(g->jm)) return g->end_tok;
        if (lmq_json_mask(g->jv, g->jm, g->mask) <= 0) {
            g->json_dead = true;
            return -1;
        }
        lmq_sampler_set_mask(smp, g->mask);
    }
    int32_t tok = lmq_sampler_sample(smp, logits);
    lmq_sampler_accept(smp, tok);
    if (g->jm) {
        size_t len = 0;
        const char *piece = lmq_token_to_piece(g->v, tok, false, &len);
        if (!piece || !len || !lmq_json_matcher_feed(g->jm, piece, len)) {
            g->json_dead = g->json_off = true;
            return -1;
        }
    }
    return tok;
}

lmq_status textgen_json_vocab(const lmq_vocab *v, int32_t n_vocab, lmq_json_vocab **out)
{
    *out = NULL;
    const char **pieces = malloc((size_t)n_vocab * sizeof *pieces);
    size_t *lens = malloc((size_t)n_vocab * sizeof *lens);
    if (!pieces || !lens) {
        free(pieces);
        free(lens);
        return lmq_error(LMQ_ERR_NOMEM, "json vocabulary");
    }
    for (int32_t i = 0; i < n_vocab; i++) {
        lens[i] = 0;
        pieces[i] = lmq_token_to_piece(v, i, false, &lens[i]);
        if (!pieces[i]) lens[i] = 0;
    }
    lmq_status s = lmq_json_vocab_new(n_vocab, pieces, lens, lmq_vocab_eos(v), out);
    free(pieces);
    free(lens);
    return s;
}

lmq_status textgen_constrain(textgen *g, const lmq_json_schema *schema, const lmq_json_vocab *jv, uint8_t *mask)
{
    lmq_status s = lmq_json_matcher_new(schema, &g->jm);
    if (s) return s;
    g->jv = jv;
    g->mask = mask;
    g->json_dead = g->json_off = false;
    /* the token that ends the turn: EOS, else the first end-of-generation token */
    g->end_tok = lmq_vocab_eos(g->v);
    for (int32_t i = 0; g->end_tok < 0 && i < lmq_vocab_n_tokens(g->v); i++)
        if (lmq_vocab_is_eog(g->v, i)) g->end_tok = i;
    return LMQ_OK;
}

lmq_status textgen_begin(textgen *g, lmq_context *ctx, const lmq_vocab *v, lmq_sampler *smp, const int32_t *prompt,
                         size_t n_prompt, const textgen_opts *opts)
{
    memset(g, 0, sizeof *g);
    g->done = true;
    g->smp = smp;
    g->v = v;
    lmq_status s = lmq_gen_new(ctx, &g->gen);
    if (s) return s;
    lmq_gen_params p = textgen_params(opts);
    p.choose = choose_serve;
    p.choose_user = g;
    if ((s = lmq_gen_begin_append(g->gen, prompt, n_prompt, &p))) return s;
    for (size_t i = 0; i < n_prompt; i++) lmq_sampler_accept(smp, prompt[i]);
    g->st.n_prompt = (int32_t)n_prompt;
    g->done = false;
    return LMQ_OK;
}

lmq_status textgen_next(textgen *g, const char **text, size_t *n)
{
    lmq_status s = lmq_gen_next(g->gen, text, n);
    const lmq_gen_stats *st = lmq_gen_get_stats(g->gen);
    g->st.n_gen = st->n_gen;
    g->st.t_prompt = st->t_prompt;
    g->st.t_gen = st->t_gen;
    g->st.stopped_eog = st->stop == LMQ_GEN_STOP_EOG;
    g->st.stopped_stop = st->stop == LMQ_GEN_STOP_STRING;
    g->st.stopped_ctx = st->stop == LMQ_GEN_STOP_CONTEXT;
    g->done = lmq_gen_done(g->gen);
    if (g->json_dead && !s) {
        g->done = true;
        if (g->json_off)
            return lmq_error(LMQ_ERR_FORMAT, "constrained decoding: the drawn token leaves the JSON document after %d "
                                             "generated tokens (the mask and the sampler disagree)", g->st.n_gen);
        return lmq_error(LMQ_ERR_FORMAT, "constrained decoding: no token of the vocabulary continues the JSON document "
                                         "after %d generated tokens", g->st.n_gen);
    }
    return s;
}

void textgen_end(textgen *g)
{
    lmq_gen_free(g->gen);
    g->gen = NULL;
    lmq_json_matcher_free(g->jm);
    g->jm = NULL;
    if (g->smp && g->mask) lmq_sampler_set_mask(g->smp, NULL);
    g->mask = NULL;
}
