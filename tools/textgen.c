/* The generation loop shared by `lmq run` and `lmq chat`. */
#include "textgen.h"

#include <stdlib.h>
#include <string.h>

lmq_status textgen_tokenize(const lmq_vocab *v, const char *text, size_t len, bool add_special, bool parse_special,
                            int32_t **out, size_t *n)
{
    return lmq_tokenize_alloc(v, text, len, add_special, parse_special, out, n);
}

/* Output accumulator: text held back while it may still become a stop string. */
typedef struct outbuf {
    char *p;
    size_t len, cap;
} outbuf;

static bool ob_add(outbuf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return false;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return true;
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

lmq_status textgen_run(lmq_context *ctx, const lmq_vocab *v, lmq_sampler *smp, const int32_t *prompt, size_t n_prompt,
                       const textgen_opts *o, textgen_stats *st, char **text)
{
    memset(st, 0, sizeof *st);
    if (text) *text = NULL;
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
    st->n_prompt = (int32_t)n_prompt;
    st->t_prompt = lmq_time_s() - t0;

    size_t piece_cap = lmq_vocab_max_piece_len(v) + 8;
    char *piece = malloc(piece_cap);
    outbuf all = {0}, pend = {0};
    if (!piece) return lmq_error(LMQ_ERR_NOMEM, "generation buffers");
    lmq_detok_stream ds;
    lmq_detok_stream_init(&ds, v, false, false);
    t0 = lmq_time_s();
    while (o->n_predict < 0 || st->n_gen < o->n_predict) {
        int32_t tok = lmq_sampler_sample(smp, lmq_logits(ctx, 0));
        lmq_sampler_accept(smp, tok);
        if (lmq_vocab_is_eog(v, tok)) {
            st->stopped_eog = true;
            break;
        }
        st->n_gen++;
        size_t n = 0;
        if ((s = lmq_detok_stream_push(&ds, tok, piece, piece_cap, &n))) break;
        if (!ob_add(&pend, piece, n)) {
            s = lmq_error(LMQ_ERR_NOMEM, "generation buffers");
            break;
        }
        size_t stop = find_stop(pend.p, pend.len, o);
        size_t emit = stop < pend.len ? stop : pend.len - held_suffix(pend.p, pend.len, o);
        if (emit) {
            if (o->out) {
                fwrite(pend.p, 1, emit, o->out);
                fflush(o->out);
            }
            if (text && !ob_add(&all, pend.p, emit)) s = lmq_error(LMQ_ERR_NOMEM, "generation buffers");
            memmove(pend.p, pend.p + emit, pend.len - emit);
            pend.len -= emit;
        }
        if (stop < pend.len + emit) {
            st->stopped_stop = true;
            pend.len = 0;
            break;
        }
        if (s) break;
        if (lmq_n_past(ctx) >= lmq_context_n_ctx(ctx)) {
            st->stopped_ctx = true;
            break;
        }
        if ((s = lmq_eval(ctx, &tok, 1, 1))) break;
    }
    st->t_gen = lmq_time_s() - t0;
    if (!s && !st->stopped_stop) {
        size_t n = 0;
        lmq_detok_stream_flush(&ds, piece, piece_cap, &n);
        ob_add(&pend, piece, n);
        if (o->out && pend.len) fwrite(pend.p, 1, pend.len, o->out);
        if (text && pend.len) ob_add(&all, pend.p, pend.len);
    }
    if (o->out) fflush(o->out);
    free(piece);
    free(pend.p);
    if (text && !s) *text = all.p ? all.p : calloc(1, 1);
    else free(all.p);
    return s;
}
