/* The runtime's generation API (lmq_gen, runtime/model/generate.c) without
 * the CLI, on llama-8m converted here (f32): greedy output equal to a hand
 * loop over lmq_eval, streamed text equal to the detokenized ids, stop
 * strings split across tokens, prefix reuse (what is evaluated, and that
 * the result equals a fresh context's), prefill in steps, cancellation from
 * the callback and by lmq_gen_cancel, a caller's token choice, a full
 * context, the error paths; constrained decoding to a JSON schema (greedy
 * against a hand loop over lmq_json_mask, sampled, through `choose`, a dead
 * end, reuse across generations) and a prompt whose last token is evaluated
 * alone (the same logits and sampled reply whatever the cache held).
 * Skips (77) without ../shared. */
#include <cjson/cJSON.h>
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

/* ---------------------------------------------------------------- constrained decoding */

static const char k_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\",\"maxLength\":12},"
    "\"age\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":120},"
    "\"pet\":{\"enum\":[\"dog\",\"cat\",\"bird\"]},"
    "\"friends\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":8},\"maxItems\":3}},"
    "\"required\":[\"name\",\"age\",\"pet\",\"friends\"]}";

static lmq_json_schema *compile(const char *json)
{
    lmq_json_schema *sc = NULL;
    T_CHECK(lmq_json_schema_compile(json, strlen(json), NULL, NULL, &sc) == LMQ_OK, "schema: %s", lmq_last_error());
    return sc;
}

/* The text is a whole document of the schema (the library's matcher) and
 * JSON with the required keys of the right types (cJSON). */
static void check_document(const char *what, const lmq_json_schema *sc, const char *text, size_t len)
{
    lmq_json_matcher *m = NULL;
    T_CHECK(lmq_json_matcher_new(sc, &m) == LMQ_OK, "matcher");
    bool ok = m && lmq_json_matcher_feed(m, text, len) && lmq_json_matcher_done(m);
    T_CHECK(ok, "%s: the output is a whole document of the schema: '%.*s'", what, (int)len, text);
    lmq_json_matcher_free(m);
    cJSON *o = cJSON_ParseWithLength(text, len);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name"), *age = cJSON_GetObjectItemCaseSensitive(o, "age"),
                *pet = cJSON_GetObjectItemCaseSensitive(o, "pet"), *fr = cJSON_GetObjectItemCaseSensitive(o, "friends");
    T_CHECK(cJSON_IsString(name) && cJSON_IsNumber(age) && age->valuedouble >= 1 && age->valuedouble <= 120 &&
                cJSON_IsString(pet) && cJSON_IsArray(fr) && cJSON_GetArraySize(fr) <= 3,
            "%s: JSON with name, age in 1..120, pet and friends", what);
    cJSON_Delete(o);
}

static bool bit(const uint8_t *mask, int32_t t) { return mask[t >> 3] >> (t & 7) & 1; }

/* Constrained greedy by hand: lmq_eval, lmq_json_mask, argmax among the
 * allowed, the piece fed to the matcher; stops when only EOS is allowed. */
static int hand_constrained(const int32_t *p, int n, const lmq_json_schema *sc, int n_new, int32_t *out)
{
    lmq_context *c = new_ctx_b(256, 256);
    const lmq_vocab *v = lmq_model_vocab(g_model);
    int nv = lmq_model_hparams(g_model)->n_vocab, k = 0;
    lmq_json_vocab *jv = NULL;
    lmq_json_matcher *m = NULL;
    T_CHECK(lmq_json_vocab_from_vocab(v, nv, &jv) == LMQ_OK, "json vocab: %s", lmq_last_error());
    T_CHECK(lmq_json_matcher_new(sc, &m) == LMQ_OK, "matcher");
    uint8_t *mask = malloc(((size_t)nv + 7) / 8);
    T_CHECK(lmq_eval(c, p, n, 1) == LMQ_OK, "hand eval: %s", lmq_last_error());
    for (; k < n_new; k++) {
        int32_t allowed = lmq_json_mask(jv, m, mask), eos = lmq_vocab_eos(v);
        if (lmq_json_matcher_done(m) && allowed == (bit(mask, eos) ? 1 : 0)) break;
        const float *lg = lmq_logits(c, 0);
        int32_t t = -1;
        for (int32_t i = 0; i < nv; i++)
            if (bit(mask, i) && (t < 0 || lg[i] > lg[t])) t = i;
        if (t < 0 || lmq_vocab_is_eog(v, t)) break;
        size_t len;
        const char *piece = lmq_token_to_piece(v, t, false, &len);
        T_CHECK(lmq_json_matcher_feed(m, piece, len), "hand loop: the allowed token %d feeds", t);
        out[k] = t;
        T_CHECK(lmq_eval(c, &t, 1, 1) == LMQ_OK, "hand eval: %s", lmq_last_error());
    }
    free(mask);
    lmq_json_matcher_free(m);
    lmq_json_vocab_free(jv);
    lmq_context_free(c);
    return k;
}

/* `choose` sees the disallowed logits at -inf; it takes the best finite one. */
static int32_t choose_finite(void *user, const float *logits, int32_t n_vocab)
{
    int *n_inf = user;
    int32_t best = -1;
    for (int32_t i = 0; i < n_vocab; i++) {
        if (isinf(logits[i]) && logits[i] < 0) (*n_inf)++;
        else if (best < 0 || logits[i] > logits[best]) best = i;
    }
    return best;
}

/* `choose` ignoring the mask: a letter where the document must start. */
static int32_t choose_letter(void *user, const float *logits, int32_t n_vocab)
{
    (void)logits;
    (void)n_vocab;
    return *(int32_t *)user;
}

static void check_constrained(void)
{
    const lmq_vocab *v = lmq_model_vocab(g_model);
    const int32_t nv = lmq_model_hparams(g_model)->n_vocab;
    int32_t *p;
    size_t np;
    tokenize("Tom is a boy. He has a dog. Here is Tom as JSON:", &p, &np);
    lmq_json_schema *sc = compile(k_schema);
    int32_t want[200];
    int n_want = hand_constrained(p, (int)np, sc, 200, want);
    T_CHECK(n_want > 10 && n_want < 200, "the hand loop ends its document (%d tokens)", n_want);

    lmq_context *c = new_ctx(512);
    lmq_gen *g = NULL;
    T_CHECK(lmq_gen_new(c, &g) == LMQ_OK, "gen_new");
    lmq_gen_params gp = lmq_gen_default_params();
    gp.n_predict = 200;
    gp.schema = sc;
    sink s = {0};
    gp.on_text = on_text;
    gp.user = &s;
    lmq_gen_stats st;
    /* greedy: the hand loop's ids, a whole document, then the end (twice:
     * the second reuses the generator's vocabulary and the cached prompt) */
    for (int round = 0; round < 2; round++) {
        s = (sink){0};
        T_CHECK(lmq_generate(g, p, np, &gp, &st) == LMQ_OK, "constrained greedy: %s", lmq_last_error());
        T_CHECK(st.stop == LMQ_GEN_STOP_EOG && st.n_gen == n_want, "constrained greedy ends with the document "
                "(reason %d, %d tokens, the hand loop %d)", st.stop, st.n_gen, n_want);
        size_t nt;
        const int32_t *toks = lmq_gen_tokens(g, &nt);
        bool same = nt >= np + (size_t)n_want - 1;
        for (int i = 0; same && i < n_want - 1; i++) same = toks[np + i] == want[i];
        T_CHECK(same, "constrained greedy ids equal the hand loop's (round %d)", round);
        check_document("constrained greedy", sc, s.text, s.len);
        T_CHECK(round == 0 || st.n_reused == (int)np - 1, "round 2 reuses the prompt (%d)", st.n_reused);
    }
    char greedy_text[8192];
    memcpy(greedy_text, s.text, s.len + 1);

    /* sampled (hot, every token a candidate): still a whole document */
    lmq_sampler_params sp = lmq_sampler_default_params();
    sp.temperature = 1.5f;
    sp.top_k = 0;
    sp.top_p = 1.0f;
    sp.min_p = 0.0f;
    sp.seed = 7;
    lmq_sampler *smp = NULL;
    T_CHECK(lmq_sampler_new(&sp, nv, &smp) == LMQ_OK, "sampler: %s", lmq_last_error());
    gp.sampler = smp;
    gp.n_predict = 400;
    int n_docs = 0;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        sp.seed = seed;
        lmq_sampler_free(smp);
        T_CHECK(lmq_sampler_new(&sp, nv, &smp) == LMQ_OK, "sampler");
        gp.sampler = smp;
        s = (sink){0};
        T_CHECK(lmq_generate(g, p, np, &gp, &st) == LMQ_OK, "constrained sample: %s", lmq_last_error());
        T_CHECK(st.stop == LMQ_GEN_STOP_EOG, "seed %llu: the sampled document ends (reason %d, %d tokens)",
                (unsigned long long)seed, st.stop, st.n_gen);
        if (st.stop == LMQ_GEN_STOP_EOG) {
            check_document("constrained sample", sc, s.text, s.len);
            n_docs += strcmp(s.text, greedy_text) != 0;
        }
    }
    T_CHECK(n_docs >= 3, "sampling gives other documents than greedy (%d of 4)", n_docs);

    /* an unconstrained generation on the same generator is free again */
    gp.schema = NULL;
    gp.sampler = NULL;
    gp.n_predict = 24;
    int32_t free_ids[24];
    int n_free = hand_greedy(p, (int)np, 24, free_ids);
    T_CHECK(lmq_generate(g, p, np, &gp, &st) == LMQ_OK && st.n_gen == n_free, "unconstrained after constrained");
    size_t nt;
    const int32_t *toks = lmq_gen_tokens(g, &nt);
    bool same = true;
    for (int i = 0; i < n_free - 1; i++) same = same && toks[np + i] == free_ids[i];
    T_CHECK(same, "an unconstrained generation after a constrained one is plain greedy");

    /* choose sees -inf where the schema says no; its choice is the greedy one */
    int n_inf = 0;
    gp.schema = sc;
    gp.choose = choose_finite;
    gp.choose_user = &n_inf;
    gp.n_predict = 200;
    s = (sink){0};
    T_CHECK(lmq_generate(g, p, np, &gp, &st) == LMQ_OK, "constrained choose: %s", lmq_last_error());
    T_CHECK(st.stop == LMQ_GEN_STOP_EOG && !strcmp(s.text, greedy_text) && n_inf > st.n_gen * (nv / 2),
            "choose on masked logits gives the greedy document (%d masked logits over %d tokens)", n_inf, st.n_gen);

    /* choose ignoring the mask: one error line, the generation ends */
    int32_t *letter;
    size_t nl;
    T_CHECK(lmq_tokenize_alloc(v, "x", 1, false, false, &letter, &nl) == LMQ_OK && nl >= 1, "tokenize x");
    gp.choose = choose_letter;
    gp.choose_user = &letter[nl - 1];
    t_check_error("choice off the schema", lmq_generate(g, p, np, &gp, &st), LMQ_ERR_FORMAT, "leaves the JSON document",
                  NULL);
    T_CHECK(st.stop == LMQ_GEN_STOP_ERROR && st.n_gen == 0, "stopped with an error (reason %d)", st.stop);
    free(letter);

    /* a dead end: a vocabulary without digits cannot write the age */
    const char **pieces = malloc((size_t)nv * sizeof *pieces);
    size_t *lens = malloc((size_t)nv * sizeof *lens);
    for (int32_t i = 0; i < nv; i++) {
        pieces[i] = lmq_token_to_piece(v, i, false, &lens[i]);
        for (size_t k = 0; pieces[i] && k < lens[i]; k++)
            if ((pieces[i][k] >= '0' && pieces[i][k] <= '9') || pieces[i][k] == '-') pieces[i] = NULL;
        if (!pieces[i]) lens[i] = 0;
    }
    lmq_json_vocab *nodigits = NULL;
    T_CHECK(lmq_json_vocab_new(nv, pieces, lens, lmq_vocab_eos(v), &nodigits) == LMQ_OK, "vocab without digits");
    gp.choose = NULL;
    gp.json_vocab = nodigits;
    s = (sink){0};
    t_check_error("dead end", lmq_generate(g, p, np, &gp, &st), LMQ_ERR_FORMAT, "no token of the vocabulary continues",
                  NULL);
    T_CHECK(st.stop == LMQ_GEN_STOP_ERROR && strstr(s.text, "\"age\"") && !strpbrk(s.text, "0123456789"),
            "the dead end comes at the age: '%s'", s.text);
    /* and the generator still works after it */
    gp.json_vocab = NULL;
    s = (sink){0};
    T_CHECK(lmq_generate(g, p, np, &gp, &st) == LMQ_OK && st.stop == LMQ_GEN_STOP_EOG && !strcmp(s.text, greedy_text),
            "constrained greedy after a dead end: the same document");
    lmq_json_vocab_free(nodigits);
    lmq_json_vocab *none = NULL;
    t_check_error("no vocabulary", lmq_json_vocab_from_vocab(NULL, nv, &none), LMQ_ERR_INVALID_ARG, "vocabulary", NULL);
    T_CHECK(none == NULL, "no vocabulary: nothing made");
    free(pieces);
    free(lens);
    lmq_sampler_free(smp);
    lmq_gen_free(g);
    lmq_context_free(c);
    lmq_json_schema_free(sc);
    free(p);
}

/* ---------------------------------------------------------------- the last prompt token alone */

/* With prompt_last_alone the last prompt token's logits and a seeded reply
 * do not depend on how much of the prompt the cache held. */
static void check_last_alone(void)
{
    const int32_t nv = lmq_model_hparams(g_model)->n_vocab;
    int32_t *p, *q;
    size_t np, nq;
    tokenize("The old man walked slowly to the river, where a small boat waited for him in the", &p, &np);
    tokenize("The old man walked slowly to the market", &q, &nq);
    lmq_context *c = new_ctx_b(256, 8);
    lmq_gen *g = NULL;
    T_CHECK(lmq_gen_new(c, &g) == LMQ_OK, "gen_new");
    lmq_sampler_params sp = lmq_sampler_default_params();
    sp.seed = 11;
    sp.temperature = 1.0f;
    lmq_sampler *smp = NULL;
    T_CHECK(lmq_sampler_new(&sp, nv, &smp) == LMQ_OK, "sampler");
    lmq_gen_params gp = lmq_gen_default_params();
    gp.prompt_last_alone = true;
    gp.sampler = smp;
    gp.n_predict = 16;
    float *ref = malloc((size_t)nv * sizeof *ref), *alone = malloc((size_t)nv * sizeof *ref);
    char ref_text[8192] = "";
    {
        lmq_context *h = new_ctx_b(256, 8);
        for (size_t i = 0; i + 1 < np; i += 8)
            T_CHECK(lmq_eval(h, p + i, (int32_t)(np - 1 - i < 8 ? np - 1 - i : 8), 0) == LMQ_OK, "hand eval");
        T_CHECK(lmq_eval(h, p + np - 1, 1, 1) == LMQ_OK, "hand eval");
        memcpy(alone, lmq_logits(h, 0), (size_t)nv * sizeof *alone);
        lmq_context_free(h);
    }
    /* 0: nothing cached; 1: after q (a shared head); 2: after p itself */
    for (int round = 0; round < 3; round++) {
        if (round == 1) {
            lmq_gen_stats st;
            lmq_gen_params gq = gp; /* no text sink: round 0's is out of scope */
            gq.on_text = NULL;
            gq.user = NULL;
            T_CHECK(lmq_generate(g, q, nq, &gq, &st) == LMQ_OK, "q: %s", lmq_last_error());
        }
        sink s = {0};
        gp.on_text = on_text;
        gp.user = &s;
        T_CHECK(lmq_gen_begin(g, p, np, &gp) == LMQ_OK, "begin: %s", lmq_last_error());
        int32_t left = 1;
        T_CHECK(lmq_gen_prefill(g, 0, &left) == LMQ_OK && left == 0, "prefill: %s", lmq_last_error());
        const lmq_gen_stats *st = lmq_gen_get_stats(g);
        int32_t want_reused = round == 0 ? 0 : round == 2 ? (int)np - 1 : -1;
        T_CHECK(want_reused < 0 || st->n_reused == want_reused, "round %d reuses %d (want %d)", round, st->n_reused,
                want_reused);
        T_CHECK(round != 1 || (st->n_reused > 3 && st->n_reused < (int)nq), "round 1 reuses the shared head (%d)",
                st->n_reused);
        /* the cached keys were computed in other batches: equal within
         * rounding (measured 2e-6 on llama-8m f32), not bit for bit */
        const float *lg = lmq_logits(c, 0);
        if (round == 0) {
            /* nothing cached: bit for bit the hand evaluation of the prompt
             * minus its last token in batches of 8, then the last alone (on
             * this machine the last token inside the last batch differs by
             * 2e-6) */
            T_CHECK(!memcmp(alone, lg, (size_t)nv * sizeof *ref),
                    "round 0: the logits of the last token evaluated alone");
            memcpy(ref, lg, (size_t)nv * sizeof *ref);
        }
        double md = 0;
        for (int32_t i = 0; i < nv; i++) md = fmax(md, fabs((double)ref[i] - lg[i]));
        T_CHECK(md < 1e-4, "round %d (%d reused): the last prompt token's logits within 1e-4 (%g)", round,
                st->n_reused, md);
        while (!lmq_gen_done(g)) {
            const char *t;
            size_t n;
            T_CHECK(lmq_gen_next(g, &t, &n) == LMQ_OK, "next");
            if (n) on_text(&s, t, n);
        }
        if (round == 0) memcpy(ref_text, s.text, s.len + 1);
        else T_CHECK(!strcmp(ref_text, s.text), "round %d: the seeded reply is the same ('%s' vs '%s')", round,
                     s.text, ref_text);
    }
    lmq_sampler_free(smp);
    lmq_gen_free(g);
    lmq_context_free(c);
    free(ref);
    free(alone);
    free(p);
    free(q);
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
        check_constrained();
        check_last_alone();
    }
    lmq_model_free(g_model);
    return t_finish();
}
