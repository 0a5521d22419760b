/* The runtime's generation API (lmq_gen, runtime/model/generate.c) without
 * the CLI, on llama-8m converted here (f32): greedy output equal to a hand
 * loop over lmq_eval, streamed text equal to the detokenized ids, stop
 * strings split across tokens, prefix reuse (what is evaluated, and that
 * the result equals a fresh context's), prefill in steps, cancellation from
 * the callback and by lmq_gen_cancel, a caller's token choice, a full
 * context, and the error paths. Skips (77) without ../shared. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_convert.h"
#include "lmq_runtime.h"
#include "testutil.h"

static lmq_model *g_model;

typedef struct sink {
    char text[8192];
    size_t len;
    int n_calls, cancel_after;
    bool bad_utf8_end; /* a piece ended inside a UTF-8 character */
} sink;

static bool on_text(void *user, const char *t, size_t n)
{
    sink *s = user;
    T_CHECK(n > 0, "pieces are never empty");
    if (s->len + n < sizeof s->text) {
        memcpy(s->text + s->len, t, n);
        s->len += n;
        s->text[s->len] = 0;
    }
    /* the last byte starts or continues a sequence that the piece does not finish */
    size_t i = n, k = 0;
    while (i > 0 && ((unsigned char)t[i - 1] & 0xC0) == 0x80 && k < 4) i--, k++;
    if (i > 0) {
        unsigned char b = (unsigned char)t[i - 1];
        size_t want = b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : b >= 0xC0 ? 1 : 0;
        if (want > k) s->bad_utf8_end = true;
    }
    s->n_calls++;
    return !(s->cancel_after && s->n_calls >= s->cancel_after);
}

static lmq_context *new_ctx_b(int n_ctx, int n_batch)
{
    lmq_context_params cp = lmq_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    cp.n_threads = 2;
    cp.kv_type = LMQ_TYPE_F32;
    lmq_context *c = NULL;
    T_CHECK(lmq_context_new(g_model, &cp, &c) == LMQ_OK, "context: %s", lmq_last_error());
    return c;
}

static lmq_context *new_ctx(int n_ctx) { return new_ctx_b(n_ctx, 32); }

static int32_t argmax(const float *x, int32_t n)
{
    int32_t b = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* Greedy ids by hand: lmq_eval and argmax, n_new tokens (stops at EOG). */
static int hand_greedy(const int32_t *p, int n, int n_new, int32_t *out)
{
    lmq_context *c = new_ctx_b(256, 256);
    const lmq_vocab *v = lmq_model_vocab(g_model);
    int nv = lmq_model_hparams(g_model)->n_vocab, k = 0;
    T_CHECK(lmq_eval(c, p, n, 1) == LMQ_OK, "hand eval: %s", lmq_last_error());
    for (; k < n_new; k++) {
        int32_t t = argmax(lmq_logits(c, 0), nv);
        if (lmq_vocab_is_eog(v, t)) break;
        out[k] = t;
        T_CHECK(lmq_eval(c, &t, 1, 1) == LMQ_OK, "hand eval: %s", lmq_last_error());
    }
    lmq_context_free(c);
    return k;
}

static void tokenize(const char *text, int32_t **ids, size_t *n)
{
    T_CHECK(lmq_tokenize_alloc(lmq_model_vocab(g_model), text, strlen(text), true, false, ids, n) == LMQ_OK,
            "tokenize: %s", lmq_last_error());
}

/* Greedy output and streamed text against the hand loop. */
static void check_greedy(void)
{
    int32_t *p;
    size_t np;
    tokenize("Once upon a time, there was a little", &p, &np);
    int32_t want[48];
    int n_want = hand_greedy(p, (int)np, 48, want);
    lmq_context *c = new_ctx(256);
    lmq_gen *g = NULL;
    T_CHECK(lmq_gen_new(c, &g) == LMQ_OK, "gen_new: %s", lmq_last_error());
    lmq_gen_params gp = lmq_gen_default_params();
    gp.n_predict = 48;
    sink s = {0};
    gp.on_text = on_text;
    gp.user = &s;
    lmq_gen_stats st;
    T_CHECK(lmq_generate(g, p, np, &gp, &st) == LMQ_OK, "generate: %s", lmq_last_error());
    T_CHECK(st.n_gen == n_want, "greedy: %d tokens generated, the hand loop %d", st.n_gen, n_want);
    T_CHECK(st.stop == (n_want == 48 ? LMQ_GEN_STOP_LENGTH : LMQ_GEN_STOP_EOG), "stop reason %d", st.stop);
    T_CHECK(st.n_prompt == (int)np && st.n_reused == 0, "prompt %d reused %d", st.n_prompt, st.n_reused);
    size_t nt;
    const int32_t *toks = lmq_gen_tokens(g, &nt);
    /* the cache holds the prompt and every generated token but the last (never evaluated) */
    T_CHECK(nt == np + (size_t)n_want - (n_want == 48 ? 1 : 0) && (int)nt == lmq_n_past(c),
            "cached tokens %zu, n_past %d", nt, lmq_n_past(c));
    bool same = true;
    for (int i = 0; i < n_want && np + (size_t)i < nt; i++) same = same && toks[np + i] == want[i];
    T_CHECK(same, "greedy ids equal the hand loop's");
    char *ref = NULL;
    size_t ref_len;
    T_CHECK(lmq_detokenize_alloc(lmq_model_vocab(g_model), want, (size_t)n_want, true, false, &ref, &ref_len) == LMQ_OK,
            "detokenize");
    /* the stream keeps the first piece's leading space; detokenize strips it */
    const char *got = s.text + (s.len && s.text[0] == ' ' && ref && ref[0] != ' ' ? 1 : 0);
    T_CHECK(ref && !strcmp(got, ref), "streamed text equals the detokenized ids:\n  got  '%s'\n  want '%s'", got,
            ref ? ref : "");
    T_CHECK(!s.bad_utf8_end, "no piece ends inside a UTF-8 character");

    /* stop strings across token boundaries: every window of 2..6 bytes that
     * straddles a piece boundary of the text above */
    int cases = 0;
    for (size_t at = 3; at + 6 < s.len && cases < 12; at += 7) {
        size_t L = 2 + at % 5;
        char stop[8];
        memcpy(stop, s.text + at, L);
        stop[L] = 0;
        const char *first = strstr(s.text, stop);
        size_t want_len = (size_t)(first - s.text);
        lmq_gen_params sp = gp;
        sink s2 = {0};
        sp.user = &s2;
        sp.stops[0] = "\x01never";
        sp.stops[1] = stop;
        sp.n_stops = 2;
        T_CHECK(lmq_generate(g, p, np, &sp, &st) == LMQ_OK, "generate with stop: %s", lmq_last_error());
        T_CHECK(st.stop == LMQ_GEN_STOP_STRING, "stop '%s': reason %d", stop, st.stop);
        T_CHECK(s2.len == want_len && !memcmp(s2.text, s.text, want_len),
                "stop '%s': the text up to its first occurrence (%zu bytes), got %zu", stop, want_len, s2.len);
        cases++;
    }
    T_CHECK(cases >= 5, "%d stop-string cases", cases);

    /* cancellation from the callback: no piece after the one that said stop */
    sink s3 = {.cancel_after = 3};
    lmq_gen_params cp = gp;
    cp.user = &s3;
    T_CHECK(lmq_generate(g, p, np, &cp, &st) == LMQ_OK, "cancelled generate: %s", lmq_last_error());
    T_CHECK(st.stop == LMQ_GEN_STOP_CANCEL && s3.n_calls == 3, "cancel: reason %d after %d pieces", st.stop, s3.n_calls);
    T_CHECK(st.n_reused == (int)np - 1, "the same prompt again reuses all of it but the last token (%d)", st.n_reused);
    T_CHECK(s3.len <= s.len && !memcmp(s3.text, s.text, s3.len), "cancelled text is a prefix of the full one");

    /* lmq_gen_cancel between steps */
    T_CHECK(lmq_gen_begin(g, p, np, &gp) == LMQ_OK, "begin: %s", lmq_last_error());
    const char *t;
    size_t n;
    for (int i = 0; i < 4; i++) T_CHECK(lmq_gen_next(g, &t, &n) == LMQ_OK, "next");
    lmq_gen_cancel(g);
    T_CHECK(lmq_gen_next(g, &t, &n) == LMQ_OK && lmq_gen_done(g) && lmq_gen_get_stats(g)->stop == LMQ_GEN_STOP_CANCEL,
            "lmq_gen_cancel ends the generation");
    T_CHECK(lmq_gen_get_stats(g)->n_gen == 4, "4 tokens before the cancel (%d)", lmq_gen_get_stats(g)->n_gen);
    lmq_gen_free(g);
    lmq_context_free(c);
    free(ref);
    free(p);
}

/* Prefix reuse: a second prompt that extends the first evaluates only the
 * new part, and gives what a fresh context gives. */
static void check_prefix_reuse(void)
{
    int32_t *p1, *p2;
    size_t n1, n2;
    tokenize("The little dog ran to the park. It saw", &p1, &n1);
    lmq_context *c = new_ctx(256);
    lmq_gen *g = NULL;
    T_CHECK(lmq_gen_new(c, &g) == LMQ_OK, "gen_new");
    lmq_gen_params gp = lmq_gen_default_params();
    gp.n_predict = 12;
    lmq_gen_stats st;
    T_CHECK(lmq_generate(g, p1, n1, &gp, &st) == LMQ_OK, "turn 1: %s", lmq_last_error());
    size_t nh;
    const int32_t *h = lmq_gen_tokens(g, &nh);
    /* turn 2: the history plus a few more prompt tokens */
    tokenize(" Then the cat said hello.", &p2, &n2);
    size_t n3 = nh + (n2 - 1);
    int32_t *p3 = malloc(n3 * sizeof *p3);
    memcpy(p3, h, nh * sizeof *p3);
    memcpy(p3 + nh, p2 + 1, (n2 - 1) * sizeof *p3); /* without its BOS */
    sink a = {0};
    gp.on_text = on_text;
    gp.user = &a;
    gp.n_predict = 16;
    T_CHECK(lmq_generate(g, p3, n3, &gp, &st) == LMQ_OK, "turn 2: %s", lmq_last_error());
    T_CHECK(st.n_reused == (int)nh, "turn 2 reuses the %zu cached tokens (%d)", nh, st.n_reused);
    int32_t want[16];
    int n_want = hand_greedy(p3, (int)n3, 16, want);
    h = lmq_gen_tokens(g, &nh);
    bool same = st.n_gen == n_want;
    for (int i = 0; same && i < n_want && n3 + (size_t)i < nh; i++) same = h[n3 + i] == want[i];
    T_CHECK(same, "turn 2 after reuse gives the fresh context's greedy ids (%d vs %d tokens)", st.n_gen, n_want);

    /* an edit: a prompt that diverges inside the cached part */
    int32_t *p4 = malloc(n3 * sizeof *p4);
    memcpy(p4, p3, n3 * sizeof *p4);
    size_t cut = n1 / 2;
    p4[cut] = p4[cut] == 100 ? 101 : 100;
    gp.user = &(sink){0};
    gp.n_predict = 4;
    T_CHECK(lmq_generate(g, p4, n3, &gp, &st) == LMQ_OK, "edit: %s", lmq_last_error());
    T_CHECK(st.n_reused == (int)cut, "an edit at token %zu reuses %zu tokens (%d)", cut, cut, st.n_reused);
    n_want = hand_greedy(p4, (int)n3, 4, want);
    h = lmq_gen_tokens(g, &nh);
    same = st.n_gen == n_want;
    for (int i = 0; same && i < n_want && n3 + (size_t)i < nh; i++) same = h[n3 + i] == want[i];
    T_CHECK(same, "after the edit: the fresh context's greedy ids");

    /* prefill in steps of 5 */
    free(p2);
    tokenize("A long time ago in a small town by the sea there lived an old man", &p2, &n2);
    gp.n_predict = 2;
    T_CHECK(lmq_gen_begin(g, p2, n2, &gp) == LMQ_OK, "begin");
    int32_t left = -1, steps = 0;
    do {
        T_CHECK(lmq_gen_prefill(g, 5, &left) == LMQ_OK, "prefill: %s", lmq_last_error());
        steps++;
    } while (left > 0 && steps < 100);
    int32_t reused = lmq_gen_get_stats(g)->n_reused;
    T_CHECK(steps == (int)((n2 - (size_t)reused + 4) / 5), "prefill of %zu tokens (%d reused) in %d steps of 5", n2,
            reused, steps);
    T_CHECK(lmq_n_past(c) == (int)n2, "prefill evaluated the prompt (%d)", lmq_n_past(c));
    lmq_gen_free(g);
    lmq_context_free(c);
    free(p1);
    free(p2);
    free(p3);
    free(p4);
}

/* A caller's choice, a full context, errors. */
static const int32_t k_forced[] = {450, 1996, 3017, 1701, 432, 2704};
static int32_t choose_forced(void *user, const float *logits, int32_t n_vocab)
{
    int *i = user;
    (void)logits;
    (void)n_vocab;
    return *i < 6 ? k_forced[(*i)++] : -1;
}
static int32_t choose_bad(void *user, const float *logits, int32_t n_vocab)
{
    (void)user;
    (void)logits;
    return n_vocab;
}

static void check_choose_and_errors(void)
{
    int32_t *p;
    size_t np;
    tokenize("Hello", &p, &np);
    lmq_context *c = new_ctx(32);
    lmq_gen *g = NULL;
    T_CHECK(lmq_gen_new(c, &g) == LMQ_OK, "gen_new");
    int idx = 0;
    sink s = {0};
    lmq_gen_params gp = lmq_gen_default_params();
    gp.choose = choose_forced;
    gp.choose_user = &idx;
    gp.on_text = on_text;
    gp.user = &s;
    lmq_gen_stats st;
    T_CHECK(lmq_generate(g, p, np, &gp, &st) == LMQ_OK, "forced: %s", lmq_last_error());
    char *ref = NULL;
    size_t ref_len;
    lmq_detokenize_alloc(lmq_model_vocab(g_model), k_forced, 6, false, false, &ref, &ref_len);
    const char *got = s.text + (s.text[0] == ' ' && ref && ref[0] != ' ' ? 1 : 0);
    T_CHECK(st.n_gen == 6 && st.stop == LMQ_GEN_STOP_CANCEL && ref && !strcmp(got, ref),
            "a choose function picks the tokens; a negative return cancels ('%s' vs '%s')", got, ref ? ref : "");
    free(ref);

    /* a context of 32: the generation stops when it is full */
    gp = lmq_gen_default_params();
    T_CHECK(lmq_generate(g, p, np, &gp, &st) == LMQ_OK, "until full: %s", lmq_last_error());
    T_CHECK(st.stop == LMQ_GEN_STOP_CONTEXT || st.stop == LMQ_GEN_STOP_EOG, "context full (reason %d)", st.stop);
    if (st.stop == LMQ_GEN_STOP_CONTEXT) T_CHECK(lmq_n_past(c) == 32, "the cache is full (%d)", lmq_n_past(c));

    gp.choose = choose_bad;
    T_CHECK(lmq_generate(g, p, np, &gp, &st) == LMQ_ERR_INVALID_ARG && st.stop == LMQ_GEN_STOP_ERROR,
            "a token out of range from choose is an error");
    gp.choose = NULL;
    t_check_error("empty prompt", lmq_gen_begin(g, p, 0, &gp), LMQ_ERR_INVALID_ARG, "empty prompt", NULL);
    int32_t big[40] = {1};
    t_check_error("prompt > context", lmq_gen_begin(g, big, 40, &gp), LMQ_ERR_LIMIT, "does not fit", NULL);
    int32_t bad[2] = {1, 1 << 30};
    t_check_error("token out of range", lmq_gen_begin(g, bad, 2, &gp), LMQ_ERR_INVALID_ARG, "token 1", NULL);
    gp.stops[0] = "";
    gp.n_stops = 1;
    t_check_error("empty stop string", lmq_gen_begin(g, p, np, &gp), LMQ_ERR_INVALID_ARG, "stop string 0", NULL);
    gp.n_stops = LMQ_GEN_MAX_STOPS + 1;
    t_check_error("too many stops", lmq_gen_begin(g, p, np, &gp), LMQ_ERR_INVALID_ARG, "stop strings", NULL);
    T_CHECK(lmq_gen_done(g), "a failed begin leaves the generator done");
    lmq_gen_free(g);
    lmq_gen_free(NULL);
    lmq_context_free(c);
    free(p);
}

int main(void)
{
    const char *dir = t_shared("models/llama-8m-debtext");
    t_require(dir);
    const char *path = t_tmp("genapi-llama8m-f32.lmq");
    lmq_convert_opts co;
    memset(&co, 0, sizeof co);
    co.out_type = LMQ_TYPE_F32;
    co.n_threads = 2;
    T_CHECK(lmq_convert_hf(dir, path, &co, NULL) == LMQ_OK, "convert: %s", lmq_last_error());
    T_CHECK(lmq_model_load(path, &g_model) == LMQ_OK, "load: %s", lmq_last_error());
    if (g_model) {
        check_greedy();
        check_prefix_reuse();
        check_choose_and_errors();
    }
    lmq_model_free(g_model);
    return t_finish();
}
