/* Tool-call parsers on recorded model outputs (Qwen/Hermes, Mistral,
 * Llama 3.x, Gemma 4): the calls and content expected, and the same events at every
 * cut (one or two split points anywhere, and byte by byte); malformed calls
 * come back as content; the format guessed from real templates. */
#include <stdlib.h>
#include <string.h>

#include "lmq_runtime.h"
#include "testutil.h"

typedef struct rec {
    char s[8192];
    size_t n;
    int open; /* -1: no call open */
} rec;

static void add(rec *r, const char *s, size_t n)
{
    if (r->n + n < sizeof r->s) {
        memcpy(r->s + r->n, s, n);
        r->n += n;
        r->s[r->n] = 0;
    }
}

/* Serializes the events: content as is, a call as «name|args»; ARGS
 * fragments join inside the call. */
static void on_ev(void *user, const lmq_toolcall_event *e)
{
    rec *r = user;
    switch (e->kind) {
    case LMQ_TOOLCALL_TEXT:
        T_CHECK(r->open < 0 && e->len > 0, "text inside a call or empty");
        add(r, e->text, e->len);
        break;
    case LMQ_TOOLCALL_BEGIN:
        T_CHECK(r->open < 0, "nested call");
        r->open = e->index;
        add(r, "\xC2\xAB", 2);
        add(r, e->name, strlen(e->name));
        add(r, "|", 1);
        break;
    case LMQ_TOOLCALL_ARGS: add(r, e->text, e->len); break;
    case LMQ_TOOLCALL_END:
        T_CHECK(r->open == e->index, "end of another call");
        r->open = -1;
        add(r, "\xC2\xBB", 2);
        break;
    default: T_CHECK(0, "unknown event"); break;
    }
}

static void run(lmq_tool_format f, const char *in, size_t c1, size_t c2, bool bytewise, rec *r)
{
    memset(r, 0, sizeof *r);
    r->open = -1;
    lmq_toolcall *t = NULL;
    T_CHECK(lmq_toolcall_new(f, on_ev, r, &t) == LMQ_OK, "new");
    size_t n = strlen(in);
    if (bytewise) {
        for (size_t i = 0; i < n; i++) lmq_toolcall_push(t, in + i, 1);
    } else {
        lmq_toolcall_push(t, in, c1);
        lmq_toolcall_push(t, in + c1, c2 - c1);
        lmq_toolcall_push(t, in + c2, n - c2);
    }
    lmq_toolcall_finish(t);
    T_CHECK(r->open < 0, "a call left open");
    lmq_toolcall_free(t);
}

static void check_case(lmq_tool_format f, const char *in, const char *want)
{
    rec r;
    size_t n = strlen(in);
    run(f, in, n, n, false, &r);
    T_CHECK(!strcmp(r.s, want), "%s: %s\n  got  '%s'\n  want '%s'", lmq_tool_format_str(f), in, r.s, want);
    int bad = 0;
    for (size_t a = 0; a <= n; a++)
        for (size_t b = a; b <= n; b += (n > 200 ? 7 : 1)) {
            run(f, in, a, b, false, &r);
            if (strcmp(r.s, want)) bad++;
        }
    run(f, in, 0, 0, true, &r);
    if (strcmp(r.s, want)) bad++;
    T_CHECK(bad == 0, "%s: %d cuts of '%.50s' differ", lmq_tool_format_str(f), bad, in);
}

int main(void)
{
    const lmq_tool_format H = LMQ_TOOL_FORMAT_HERMES, M = LMQ_TOOL_FORMAT_MISTRAL, L = LMQ_TOOL_FORMAT_LLAMA3;
    /* Qwen2.5 / Qwen3 (as the templates ask: one JSON object per block) */
    check_case(H, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>",
               "\xC2\xABget_weather|{\"city\":\"Paris\",\"unit\":\"c\"}\xC2\xBB");
    check_case(H,
               "I will check both.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": "
               "\"b\", \"arguments\": {\"x\": [1, 2, {\"y\": \"</tool\"}]}}\n</tool_call>",
               "I will check both.\n\xC2\xAB" "a|{}\xC2\xBB\xC2\xAB" "b|{\"x\":[1,2,{\"y\":\"</tool\"}]}\xC2\xBB");
    /* arguments given as a JSON string are passed through */
    check_case(H, "<tool_call>{\"name\":\"f\",\"arguments\":\"{\\\"k\\\":1}\"}</tool_call>", "\xC2\xAB" "f|{\"k\":1}\xC2\xBB");
    /* plain answers, tags out of place, malformed calls: content */
    check_case(H, "The answer is 4 < 5 and [x].", "The answer is 4 < 5 and [x].");
    check_case(H, "<tool_call>{\"name\": broken}</tool_call> ok", "<tool_call>{\"name\": broken}</tool_call> ok");
    check_case(H, "<tool_call>{\"arguments\": {}}</tool_call>", "<tool_call>{\"arguments\": {}}</tool_call>");
    check_case(H, "text </tool_call> more", "text </tool_call> more");
    check_case(H, "<tool_call>{\"name\": \"cut", "<tool_call>{\"name\": \"cut");
    check_case(H, "  \n", "  \n");
    check_case(H, "<tool_ca", "<tool_ca");
    /* Mistral (v3 and later) */
    check_case(M, "[TOOL_CALLS][{\"name\": \"search\", \"arguments\": {\"q\": \"lmq\"}}, {\"name\": \"open\", \"arguments\": {\"id\": 3}}]",
               "\xC2\xABsearch|{\"q\":\"lmq\"}\xC2\xBB\xC2\xABopen|{\"id\":3}\xC2\xBB");
    check_case(M, "No tools needed [really].", "No tools needed [really].");
    check_case(M, "[TOOL_CALLS] not json", "[TOOL_CALLS] not json");
    /* Llama 3.1 / 3.2 / 3.3 */
    check_case(L, "{\"name\": \"get_time\", \"parameters\": {\"tz\": \"UTC\"}}", "\xC2\xABget_time|{\"tz\":\"UTC\"}\xC2\xBB");
    check_case(L, "<|python_tag|>{\"name\": \"calc\", \"parameters\": {\"e\": \"1+1\"}}", "\xC2\xAB" "calc|{\"e\":\"1+1\"}\xC2\xBB");
    check_case(L, "{\"not\": \"a call\"}", "{\"not\": \"a call\"}");
    check_case(L, "Hello {there}", "Hello {there}");
    /* Gemma 4: <|tool_call>call:NAME{...}<tool_call|>, its value notation as JSON */
    const lmq_tool_format G = LMQ_TOOL_FORMAT_GEMMA4;
    check_case(G, "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,unit:<|\"|>celsius<|\"|>}<tool_call|>",
               "\xC2\xABget_weather|{\"city\":\"Paris\",\"unit\":\"celsius\"}\xC2\xBB");
    check_case(G,
               "Checking.<|tool_call>call:a{}<tool_call|>\n<|tool_call>call:b{n:3,f:-1.5e2,ok:true,none:null,"
               "xs:[1,<|\"|>two, \"quoted\"<|\"|>,{k:<|\"|>v<|\"|>}],o:{<|\"|>spaced key<|\"|>:<|\"|>x\\y<|\"|>}}<tool_call|>",
               "Checking.\xC2\xAB" "a|{}\xC2\xBB\xC2\xAB"
               "b|{\"n\":3,\"f\":-1.5e2,\"ok\":true,\"none\":null,\"xs\":[1,\"two, \\\"quoted\\\"\",{\"k\":\"v\"}],"
               "\"o\":{\"spaced key\":\"x\\\\y\"}}\xC2\xBB");
    check_case(G, "<|tool_call>call:note{text:<|\"|>line 1\nline 2 {a:b}<|\"|>}<tool_call|>",
               "\xC2\xABnote|{\"text\":\"line 1\\nline 2 {a:b}\"}\xC2\xBB");
    /* not Gemma's notation, cut short, or another family's syntax: content */
    check_case(G, "<|tool_call>call:f{city:Paris}<tool_call|>", "<|tool_call>call:f{city:Paris}<tool_call|>");
    check_case(G, "<|tool_call>get{}<tool_call|> x", "<|tool_call>get{}<tool_call|> x");
    check_case(G, "<|tool_call>call:f{a:1}}<tool_call|>", "<|tool_call>call:f{a:1}}<tool_call|>");
    check_case(G, "<|tool_call>call:f{a:<|\"|>open", "<|tool_call>call:f{a:<|\"|>open");
    check_case(G, "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>",
               "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>");
    check_case(G, "Just <|an answer|> <tool_call|>", "Just <|an answer|> <tool_call|>");
    /* a name with a control byte or a blank (the fuzzer's NUL) is not a call */
    check_case(G, "<|tool_call>call:a\tb{}<tool_call|>", "<|tool_call>call:a\tb{}<tool_call|>");
    check_case(G, "<|tool_call>call:\x01get{}<tool_call|>", "<|tool_call>call:\x01get{}<tool_call|>");
    static const char gsrc[] = "{{- '<|tool_call>call:' + function['name'] + '{' -}}";
    T_CHECK(lmq_tool_format_guess(gsrc, sizeof gsrc - 1) == G && !strcmp(lmq_tool_format_str(G), "gemma4"),
            "Gemma 4's template -> gemma4");
    /* format guesses from the real templates */
    static const struct {
        const char *file;
        lmq_tool_format f;
    } guesses[] = {
        {"chat-templates/templates/Qwen-Qwen2.5-7B-Instruct.jinja", LMQ_TOOL_FORMAT_HERMES},
        {"chat-templates/templates/NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", LMQ_TOOL_FORMAT_HERMES},
        {"chat-templates/templates/meta-llama-Llama-3.1-8B-Instruct.jinja", LMQ_TOOL_FORMAT_LLAMA3},
        {"chat-templates/templates/mistralai-Mistral-Nemo-Instruct-2407.jinja", LMQ_TOOL_FORMAT_MISTRAL},
    };
    for (size_t i = 0; i < sizeof guesses / sizeof *guesses; i++) {
        size_t len = 0;
        char *src = t_read_all(t_shared(guesses[i].file), &len);
        if (!src) t_skip("%s missing", t_shared(guesses[i].file));
        lmq_tool_format g = lmq_tool_format_guess(src, len);
        T_CHECK(g == guesses[i].f, "%s: guessed %s", guesses[i].file, lmq_tool_format_str(g));
        free(src);
    }
    lmq_toolcall *t = NULL;
    T_CHECK(lmq_toolcall_new(LMQ_TOOL_FORMAT_HARMONY, on_ev, NULL, &t) == LMQ_ERR_INVALID_ARG, "harmony is the splitter's");
    return t_finish();
}
