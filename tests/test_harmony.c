/* test_harmony: the streaming harmony splitter (runtime/text/harmony.c).
 * Every case is fed whole, byte by byte, cut at every single point, at every
 * pair of points (short cases), and in random pieces with empty pushes in
 * between; the transcript of events (headers, joined text, terminators)
 * must be the expected one each time. Covers several messages, tool calls
 * with recipients and content types, text without headers, empty and
 * unknown channel names, markers inside content, the header size limit
 * (exactly at it and one byte over) and the template predicate. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_runtime.h"
#include "testutil.h"

/* ---- a recorder: events as one canonical string ------------------------ */

typedef struct rec {
    char *s;
    size_t len, cap;
    bool open;    /* between BEGIN and END */
    int bad;      /* events out of order, empty TEXT, ... */
} rec;

static void rec_add(rec *r, const char *s, size_t n)
{
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 256;
        while (cap < r->len + n + 1) cap *= 2;
        char *p = realloc(r->s, cap);
        if (!p) abort(); /* test harness only */
        r->s = p;
        r->cap = cap;
    }
    memcpy(r->s + r->len, s, n);
    r->len += n;
    r->s[r->len] = 0;
}

static void rec_str(rec *r, const char *s) { rec_add(r, s, strlen(s)); }

static void on_event(void *user, const lmq_harmony_event *e)
{
    rec *r = user;
    static const char *const terms[] = {"end", "return", "call", "none"};
    char buf[2300];
    switch (e->kind) {
    case LMQ_HARMONY_BEGIN:
        if (r->open) r->bad++;
        r->open = true;
        snprintf(buf, sizeof buf, "{%s%s name=%s role=%s to=%s ct=%s}", lmq_harmony_channel_str(e->msg->channel),
                 e->msg->implied ? " implied" : "", e->msg->channel_name, e->msg->role, e->msg->recipient,
                 e->msg->content_type);
        rec_str(r, buf);
        break;
    case LMQ_HARMONY_TEXT:
        if (!r->open || e->len == 0 || !e->text) r->bad++;
        else rec_add(r, e->text, e->len);
        break;
    case LMQ_HARMONY_END:
        if (!r->open || (unsigned)e->term >= LMQ_HARMONY_TERM_COUNT) r->bad++;
        r->open = false;
        snprintf(buf, sizeof buf, "{/%s}", terms[e->term & 3]);
        rec_str(r, buf);
        break;
    default: r->bad++;
    }
}

/* The outcome of one feeding: transcript, done flag, first failure. */
typedef struct outcome {
    rec r;
    bool done;
    lmq_status st;
    char err[256];
} outcome;

static void feed(lmq_harmony *h, outcome *o, const char *s, size_t n)
{
    lmq_status st = lmq_harmony_push(h, s, n);
    if (st && !o->st) {
        o->st = st;
        snprintf(o->err, sizeof o->err, "%s", lmq_last_error());
    }
}

/* Feeds `in` cut at the sorted points cuts[0..n_cuts), with an empty push
 * before each piece when `empties`, then finishes. */
static void run_cuts(const char *in, size_t len, const size_t *cuts, int n_cuts, bool empties, outcome *o)
{
    memset(o, 0, sizeof *o);
    lmq_harmony *h = NULL;
    if (lmq_harmony_new(on_event, &o->r, &h)) abort();
    size_t at = 0;
    for (int i = 0; i <= n_cuts; i++) {
        size_t end = i < n_cuts ? cuts[i] : len;
        if (empties) feed(h, o, in + at, 0);
        feed(h, o, in + at, end - at);
        at = end;
    }
    lmq_status st = lmq_harmony_finish(h);
    if (st && !o->st) {
        o->st = st;
        snprintf(o->err, sizeof o->err, "%s", lmq_last_error());
    }
    o->done = lmq_harmony_done(h);
    if (o->r.open) o->r.bad++; /* finish must close the open message */
    lmq_harmony_free(h);
}

static int n_runs;

/* Checks one outcome against the expected transcript and status. */
static bool same(const outcome *o, const char *want, lmq_status want_st, const char *err_has)
{
    n_runs++;
    const char *got = o->r.s ? o->r.s : "";
    if (strcmp(got, want) || o->r.bad || o->st != want_st) return false;
    if (err_has && !strstr(o->err, err_has)) return false;
    return true;
}

static unsigned long long rng = 0x9e3779b97f4a7c15ull;
static size_t rnd(size_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (size_t)(rng % n);
}

/* One case through every way of cutting it. */
static void expect_split(const char *what, const char *in, size_t len, const char *want, lmq_status want_st,
                         const char *err_has)
{
    outcome o;
    size_t cuts[64];
    bool ok = true;
    char how[96] = "";
#define TRY(desc)                                                                  \
    do {                                                                           \
        if (ok && !same(&o, want, want_st, err_has)) {                             \
            ok = false;                                                            \
            snprintf(how, sizeof how, "%s", desc);                                 \
            T_CHECK(0, "%s (%s):\n  got  [%s] st %d bad %d err [%s]\n  want [%s] st %d", what, how, \
                    o.r.s ? o.r.s : "", o.st, o.r.bad, o.err, want, want_st);      \
        }                                                                          \
        free(o.r.s);                                                               \
    } while (0)
    run_cuts(in, len, NULL, 0, false, &o);
    TRY("whole");
    for (size_t i = 1; i < len && ok; i++) {
        cuts[0] = i;
        run_cuts(in, len, cuts, 1, false, &o);
        TRY("one cut");
    }
    if (len <= 160) {
        for (size_t i = 1; i < len && ok; i++)
            for (size_t j = i + 1; j < len && ok; j++) {
                cuts[0] = i;
                cuts[1] = j;
                run_cuts(in, len, cuts, 2, false, &o);
                TRY("two cuts");
            }
    }
    for (int t = 0; t < 200 && ok; t++) {
        int n = 0;
        for (size_t i = 1; i < len && n < 64; i++)
            if (rnd(4) == 0) cuts[n++] = i;
        run_cuts(in, len, cuts, n, true, &o);
        TRY("random cuts");
    }
    /* byte by byte */
    if (ok) {
        memset(&o, 0, sizeof o);
        lmq_harmony *h = NULL;
        lmq_harmony_new(on_event, &o.r, &h);
        for (size_t i = 0; i < len; i++) feed(h, &o, in + i, 1);
        lmq_status st = lmq_harmony_finish(h);
        if (st && !o.st) o.st = st, snprintf(o.err, sizeof o.err, "%s", lmq_last_error());
        lmq_harmony_free(h);
        TRY("byte by byte");
    }
#undef TRY
    if (ok) t_passed++;
}

static void expect_str(const char *what, const char *in, const char *want)
{
    expect_split(what, in, strlen(in), want, LMQ_OK, NULL);
}

/* ---- cases --------------------------------------------------------------- */

#define A "{analysis name=analysis role= to= ct=}"
#define F "{final name=final role=assistant to= ct=}"
#define IMPL "{final implied name= role= to= ct=}"

static void test_messages(void)
{
    expect_str("analysis then final",
               "<|channel|>analysis<|message|>The user greets. Reply briefly.<|end|>"
               "<|start|>assistant<|channel|>final<|message|>Hello! How can I help?<|return|>",
               A "The user greets. Reply briefly.{/end}" F "Hello! How can I help?{/return}");
    expect_str("final only, cut without a terminator (n_predict)",
               "<|channel|>final<|message|>Paris is the capital",
               "{final name=final role= to= ct=}Paris is the capital{/none}");
    expect_str("three messages, commentary preamble in between",
               "<|channel|>analysis<|message|>a1<|end|><|start|>assistant<|channel|>commentary<|message|>"
               "Let me check.<|end|><|start|>assistant<|channel|>final<|message|>done<|return|>",
               A "a1{/end}{commentary name=commentary role=assistant to= ct=}Let me check.{/end}" F "done{/return}");
    expect_str("text after <|return|> is ignored",
               "<|channel|>final<|message|>4<|return|>trailing<|start|>assistant<|channel|>final<|message|>x",
               "{final name=final role= to= ct=}4{/return}");
    expect_str("UTF-8 content cut anywhere",
               "<|channel|>final<|message|>h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x98\x80<|return|>",
               "{final name=final role= to= ct=}h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x98\x80{/return}");
    expect_str("whitespace between messages is dropped",
               "<|channel|>analysis<|message|>x<|end|>\n \n<|start|>assistant<|channel|>final<|message|> y <|return|>",
               A "x{/end}" F " y {/return}");
}

static void test_tool_calls(void)
{
    expect_str("tool call right after the prompt (recipient in the role part)",
               " to=functions.get_weather<|channel|>commentary json<|message|>{\"city\":\"Paris\"}<|call|>",
               "{commentary name=commentary role= to=functions.get_weather ct=json}{\"city\":\"Paris\"}{/call}");
    expect_str("reasoning then a tool call with <|constrain|> (recipient in the channel part)",
               "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
               "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Oslo\"}<|call|>",
               A "Need the weather.{/end}{commentary name=commentary role=assistant to=functions.get_weather "
                 "ct=json}{\"city\":\"Oslo\"}{/call}");
    expect_str("tool call with the role named",
               "<|start|>assistant to=browser.search<|channel|>commentary json<|message|>{}<|call|>",
               "{commentary name=commentary role=assistant to=browser.search ct=json}{}{/call}");
}

static void test_no_header(void)
{
    expect_str("plain text: the model skipped the header", "Hello there, how are you?",
               IMPL "Hello there, how are you?{/none}");
    expect_str("plain text starting like a recipient", "to be or not to be<|return|>",
               IMPL "to be or not to be{/return}");
    expect_str("leading whitespace dropped, then text", "  \n Hi<|end|>", IMPL "Hi{/end}");
    expect_str("a short text that is a prefix of to=", "to", IMPL "to{/none}");
    expect_str("text then a proper message",
               "oops<|end|><|start|>assistant<|channel|>final<|message|>ok<|return|>",
               IMPL "oops{/end}" F "ok{/return}");
    expect_str("header without <|channel|> is final, implied",
               "<|start|>assistant<|message|>plain<|return|>",
               "{final implied name= role=assistant to= ct=}plain{/return}");
    expect_str("<|message|> with no header at all", "<|message|>m<|end|>", IMPL "m{/end}");
    expect_str("nothing at all", "", "");
    expect_str("only whitespace", " \n\t ", "");
    expect_str("<|return|> alone", "<|return|>", "");
    expect_str("a header never completed is dropped", "<|channel|>analysis<|mess", "");
}

static void test_odd_headers(void)
{
    expect_str("empty channel name", "<|channel|><|message|>x<|end|>", "{unknown name= role= to= ct=}x{/end}");
    expect_str("empty channel name after <|start|>",
               "<|start|>assistant<|channel|> <|message|>y<|return|>",
               "{unknown name= role=assistant to= ct=}y{/return}");
    expect_str("unknown channel name", "<|channel|>scratchpad<|message|>z<|end|>",
               "{unknown name=scratchpad role= to= ct=}z{/end}");
    expect_str("a header ended by <|end|> gives an empty message",
               "<|channel|>analysis<|end|><|start|>assistant<|channel|>final<|message|>k<|return|>",
               A "{/end}" F "k{/return}");
    expect_str("a header abandoned for <|start|>",
               "<|channel|>anal<|start|>assistant<|channel|>final<|message|>k<|return|>", F "k{/return}");
}

static void test_markers_in_content(void)
{
    expect_str("<|start|> inside content ends the message",
               "<|channel|>analysis<|message|>think<|start|>assistant<|channel|>final<|message|>ok",
               A "think{/none}" F "ok{/none}");
    expect_str("<|channel|> inside content ends the message",
               "<|channel|>analysis<|message|>a<|channel|>final<|message|>b<|return|>",
               A "a{/none}{final name=final role= to= ct=}b{/return}");
    expect_str("<|message|>, <|constrain|>, other <|...|> and '<' are content",
               "<|channel|>final<|message|>x <|message|> <|constrain|> <|foo|> a<b <<|| <|en<|return|>",
               "{final name=final role= to= ct=}x <|message|> <|constrain|> <|foo|> a<b <<|| <|en{/return}");
    expect_str("a marker prefix at the very end is text",
               "<|channel|>final<|message|>tail <|ret", "{final name=final role= to= ct=}tail <|ret{/none}");
    expect_str("a lone '<' at the end", "<|channel|>final<|message|><", "{final name=final role= to= ct=}<{/none}");
}

static void test_header_limit(void)
{
    /* a header of exactly LMQ_HARMONY_MAX_HEADER bytes is accepted ... */
    const char *pre = "<|start|>";
    const char *head = "assistant<|channel|>";
    size_t name_len = LMQ_HARMONY_MAX_HEADER - strlen(head);
    size_t cap = 4096;
    char *in = malloc(cap), *want = malloc(cap);
    char *name = malloc(name_len + 2);
    memset(name, 'n', name_len);
    name[name_len] = 0;
    snprintf(in, cap, "%s%s%s<|message|>x<|end|>", pre, head, name);
    snprintf(want, cap, "{unknown name=%s role=assistant to= ct=}x{/end}", name);
    expect_split("header of exactly the limit", in, strlen(in), want, LMQ_OK, NULL);
    /* ... one byte more fails, naming the limit and where the header began
     * (byte 9, right after <|start|>) */
    name[name_len] = 'n';
    name[name_len + 1] = 0;
    snprintf(in, cap, "%s%s%s<|message|>x<|end|>", pre, head, name);
    expect_split("header one byte over the limit", in, strlen(in), "", LMQ_ERR_LIMIT,
                 "header longer than 1024 bytes (it begins at byte 9 of the output)");
    /* a complete message before the long header is still reported */
    snprintf(in, cap, "<|channel|>analysis<|message|>a<|end|>%s%s%s<|message|>x<|end|>", pre, head, name);
    expect_split("message, then a header over the limit", in, strlen(in), A "a{/end}", LMQ_ERR_LIMIT,
                 "begins at byte 47 of the output");
    /* a long run of text where the first header should be: a recipient
     * prefix that never ends */
    size_t n = 0;
    n += (size_t)snprintf(in + n, cap - n, " to=");
    memset(in + n, 'r', 1500);
    n += 1500;
    in[n] = 0;
    expect_split("an endless recipient", in, n, "", LMQ_ERR_LIMIT, "begins at byte 1 of the output");

    /* the failure is sticky: later pushes and finish return it, no events */
    rec r = {0};
    lmq_harmony *h = NULL;
    T_CHECK(lmq_harmony_new(on_event, &r, &h) == LMQ_OK, "new");
    memset(in, 'h', 2000);
    T_CHECK(lmq_harmony_push(h, "<|start|>", 9) == LMQ_OK, "start");
    T_CHECK(lmq_harmony_push(h, in, 2000) == LMQ_ERR_LIMIT, "over the limit");
    T_CHECK(lmq_harmony_push(h, "<|message|>more", 15) == LMQ_ERR_LIMIT, "sticky push");
    T_CHECK(strstr(lmq_last_error(), "longer than 1024 bytes") != NULL, "sticky message: %s", lmq_last_error());
    T_CHECK(lmq_harmony_finish(h) == LMQ_ERR_LIMIT, "sticky finish");
    T_CHECK(!r.s && !r.bad, "no events from a failed header: [%s]", r.s ? r.s : "");
    T_CHECK(!lmq_harmony_done(h), "a failed splitter is not done");
    /* reset makes it usable again */
    lmq_harmony_reset(h);
    const char *okmsg = "<|channel|>final<|message|>ok<|return|>";
    T_CHECK(lmq_harmony_push(h, okmsg, strlen(okmsg)) == LMQ_OK, "after reset");
    T_CHECK(lmq_harmony_done(h), "done after <|return|>");
    T_CHECK(r.s && !strcmp(r.s, "{final name=final role= to= ct=}ok{/return}"), "after reset: [%s]", r.s ? r.s : "");
    T_CHECK(lmq_harmony_push(h, "ignored", 7) == LMQ_OK && !strcmp(r.s, "{final name=final role= to= ct=}ok{/return}"),
            "input after the end is ignored");
    lmq_harmony_free(h);
    free(r.s);
    free(in);
    free(want);
    free(name);
}

static void test_api(void)
{
    lmq_harmony *h = (lmq_harmony *)1;
    T_CHECK(lmq_harmony_new(NULL, NULL, &h) == LMQ_ERR_INVALID_ARG && h == NULL, "NULL callback");
    T_CHECK(lmq_harmony_new(on_event, NULL, NULL) == LMQ_ERR_INVALID_ARG, "NULL out");
    T_CHECK(lmq_harmony_push(NULL, "x", 1) == LMQ_ERR_INVALID_ARG, "NULL splitter");
    T_CHECK(lmq_harmony_finish(NULL) == LMQ_ERR_INVALID_ARG, "NULL finish");
    T_CHECK(!lmq_harmony_done(NULL), "NULL done");
    lmq_harmony_free(NULL);
    lmq_harmony_reset(NULL);
    rec r = {0};
    T_CHECK(lmq_harmony_new(on_event, &r, &h) == LMQ_OK, "new");
    T_CHECK(lmq_harmony_push(h, NULL, 1) == LMQ_ERR_INVALID_ARG, "NULL text with a length");
    T_CHECK(lmq_harmony_push(h, NULL, 0) == LMQ_OK, "NULL text of length 0");
    T_CHECK(lmq_harmony_finish(h) == LMQ_OK && lmq_harmony_done(h), "finish makes it done");
    T_CHECK(lmq_harmony_finish(h) == LMQ_OK, "finish twice");
    lmq_harmony_free(h);
    free(r.s);

    T_CHECK(!strcmp(lmq_harmony_channel_str(LMQ_HARMONY_ANALYSIS), "analysis") &&
                !strcmp(lmq_harmony_channel_str(LMQ_HARMONY_FINAL), "final") &&
                !strcmp(lmq_harmony_channel_str(LMQ_HARMONY_COMMENTARY), "commentary") &&
                !strcmp(lmq_harmony_channel_str(LMQ_HARMONY_UNKNOWN), "unknown") &&
                !strcmp(lmq_harmony_channel_str(LMQ_HARMONY_CHANNEL_COUNT), "?"),
            "channel names");

    const char *gptoss = "{{- \"<|start|>assistant<|channel|>final<|message|>\" + message.content + \"<|end|>\" }}";
    T_CHECK(lmq_harmony_is_template(gptoss, strlen(gptoss)), "gpt-oss template detected");
    const char *chatml = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>{% endfor %}";
    T_CHECK(!lmq_harmony_is_template(chatml, strlen(chatml)), "chatml is not harmony");
    const char *half = "<|channel|> only";
    T_CHECK(!lmq_harmony_is_template(half, strlen(half)), "needs both markers");
    T_CHECK(!lmq_harmony_is_template(gptoss, 20), "length is honoured");
    T_CHECK(!lmq_harmony_is_template(NULL, 5), "NULL");
}

int main(void)
{
    test_messages();
    test_tool_calls();
    test_no_header();
    test_odd_headers();
    test_markers_in_content();
    test_header_limit();
    test_api();
    printf("%d feedings compared\n", n_runs);
    return t_finish();
}
