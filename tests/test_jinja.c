/* test_jinja: the chat template engine — language features against outputs
 * of Python's jinja2 in Hugging Face's environment (test_jinja_cases.h),
 * lazy-filter iterators,
 * whitespace control, error messages with line:col, raise_exception, limits,
 * JSON input (ints stay ints), strftime_now, and family names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "lmq_runtime.h"
#include "testutil.h"
#include "test_jinja_cases.h"

/* Renders src with vars; returns the output (malloc'd) or NULL with *st set. */
static char *render(const char *src, lmq_chat_vars *v, lmq_status *st)
{
    lmq_chat_template *t = NULL;
    char *out = NULL;
    *st = lmq_chat_template_parse(src, strlen(src), &t);
    if (*st == LMQ_OK) *st = lmq_chat_render(t, v, &out, NULL);
    lmq_chat_template_free(t);
    return out;
}

static char *render0(const char *src, lmq_status *st)
{
    lmq_chat_vars v;
    memset(&v, 0, sizeof v);
    v.messages_json = "[{\"role\": \"user\", \"content\": \"hi\"}]";
    return render(src, &v, st);
}

static void expect_out(const char *src, const char *want)
{
    lmq_status st;
    char *got = render0(src, &st);
    T_CHECK(got && !strcmp(got, want), "%s\n  got  [%s]\n  want [%s]\n  (%s)", src, got ? got : "(null)",
            want, st ? lmq_last_error() : "");
    free(got);
}

/* Expects failure with status `want_st` and lmq_last_error() == want_msg. */
static void expect_err(const char *src, lmq_status want_st, const char *want_msg)
{
    lmq_status st;
    char *got = render0(src, &st);
    T_CHECK(!got && st == want_st, "%s: want status %d, got %d", src, want_st, st);
    T_CHECK(!strcmp(lmq_last_error(), want_msg), "%s\n  got  [%s]\n  want [%s]", src, lmq_last_error(), want_msg);
    free(got);
}

static void test_reference_cases(void)
{
    /* split the context into the API's variables */
    cJSON *ctx = cJSON_Parse(JINJA_CASES_CTX);
    T_CHECK(ctx != NULL, "context parses");
    if (!ctx) return;
    lmq_chat_var extra[32];
    char *texts[32];
    size_t ne = 0, nt = 0;
    lmq_chat_vars v;
    memset(&v, 0, sizeof v);
    const cJSON *e;
    cJSON_ArrayForEach(e, ctx) {
        if (nt == 32) break;
        char *txt = texts[nt++] = cJSON_PrintUnformatted(e);
        if (!strcmp(e->string, "messages")) v.messages_json = txt;
        else if (!strcmp(e->string, "tools")) v.tools_json = cJSON_IsNull(e) ? NULL : txt;
        else if (!strcmp(e->string, "add_generation_prompt")) v.add_generation_prompt = cJSON_IsTrue(e);
        else extra[ne++] = (lmq_chat_var){e->string, txt, true};
    }
    v.extra = extra;
    v.n_extra = ne;
    int same = 0;
    size_t ncases = sizeof JINJA_CASES / sizeof JINJA_CASES[0];
    for (size_t i = 0; i < ncases; i++) {
        lmq_status st;
        char *got = render(JINJA_CASES[i].tmpl, &v, &st);
        bool ok = got && !strcmp(got, JINJA_CASES[i].want);
        T_CHECK(ok, "case %zu: %s\n  got  [%s]\n  want [%s]\n  (%s)", i, JINJA_CASES[i].tmpl,
                got ? got : "(null)", JINJA_CASES[i].want, st ? lmq_last_error() : "");
        same += ok;
        free(got);
    }
    printf("reference cases: %d/%zu identical to jinja2\n", same, ncases);
    for (size_t i = 0; i < nt; i++) free(texts[i]);
    cJSON_Delete(ctx);
}

static void test_whitespace(void)
{
    /* trim_blocks: the newline after a block tag goes; lstrip_blocks: the
     * indentation before a block tag goes; expressions keep both */
    expect_out("{% if true %}\nA\n{% endif %}\nB", "A\nB");
    expect_out("  {% if true %}\n  x\n  {% endif %}\ny", "  x\ny");
    expect_out("  {{ 'v' }}\n", "  v");                      /* one trailing newline dropped */
    expect_out("a\n\n", "a\n");
    expect_out("a  {% if true %}b{% endif %}", "a  b");       /* not at a line start */
    expect_out("  {%+ if true %}b{% endif %}", "  b");        /* + keeps the indentation */
    expect_out("a {%- if true %} b {% endif -%} c", "a b c");
    expect_out("a\n  {{- 'b' -}}  \n c", "abc");
    expect_out("x {#- note -#} y", "xy");
    expect_out("  {# note #}\nz", "z");
    expect_out("{% for i in [1,2] %}\n  {{ i }}\n{% endfor %}", "  1\n  2\n");
    expect_out("{% raw %}{{ x }}{% endraw %}", "{{ x }}");
    expect_out("a\r\nb\rc", "a\nb\nc");                       /* newlines normalized */
    expect_out("{{ '\\n' }}|{{ \"\\u00e9\\t\\x41\" }}", "\n|\xc3\xa9\tA");
}

static void test_errors(void)
{
    expect_err("line one\n  {{ x.y }}", LMQ_ERR_RUNTIME,
               "chat template line 2 col 7: UndefinedError: 'x' is undefined");
    expect_err("{{ messages[0].nope + 'x' }}", LMQ_ERR_RUNTIME,
               "chat template line 1 col 21: UndefinedError: 'dict object' has no attribute 'nope'");
    expect_err("{% for m in none %}{% endfor %}", LMQ_ERR_RUNTIME,
               "chat template line 1 col 13: TypeError: 'NoneType' object is not iterable");
    expect_err("\n\n{% if true %}\nno end", LMQ_ERR_FORMAT,
               "chat template line 4 col 7: Unexpected end of template. Jinja was looking for: 'elif' or 'else' or 'endif'");
    expect_err("{{ 1 + }}", LMQ_ERR_FORMAT, "chat template line 1 col 8: unexpected 'end of print statement'");
    expect_err("{% frob %}", LMQ_ERR_FORMAT, "chat template line 1 col 4: Encountered unknown tag 'frob'.");
    expect_err("{{ 'abc }}", LMQ_ERR_FORMAT, "chat template line 1 col 4: unexpected char \"'\" at 3");
    expect_err("{# open", LMQ_ERR_FORMAT, "chat template line 1 col 1: Missing end of comment tag");
    expect_err("{{ x | nofilter }}", LMQ_ERR_RUNTIME,
               "chat template line 1 col 8: TemplateAssertionError: No filter named 'nofilter'.");
    expect_err("{{ [1].append(2) }}", LMQ_ERR_RUNTIME,
               "chat template line 1 col 14: SecurityError: access to attribute 'append' of 'list' object is unsafe.");
    expect_err("{% break %}", LMQ_ERR_FORMAT, "chat template line 1 col 4: 'break' outside of a loop");
    expect_err("{{ 1/0 }}", LMQ_ERR_RUNTIME, "chat template line 1 col 5: ZeroDivisionError: division by zero");
    /* lazy filters give iterators, as in HF: no len(), not JSON serializable */
    expect_err("{{ messages|map(attribute='role')|tojson }}", LMQ_ERR_RUNTIME,
               "chat template line 1 col 35: TypeError: Object of type generator is not JSON serializable");
    expect_err("{{ [1, 2]|select|length }}", LMQ_ERR_RUNTIME,
               "chat template line 1 col 18: TypeError: object of type 'generator' has no len()");

    /* raise_exception: the message alone, flagged, with its position */
    lmq_chat_vars v;
    memset(&v, 0, sizeof v);
    lmq_chat_error err;
    v.error = &err;
    lmq_status st;
    char *out = render("ok\n{{ raise_exception('Roles must alternate: ' ~ 3) }}", &v, &st);
    T_CHECK(!out && st == LMQ_ERR_RUNTIME, "raise_exception fails the render");
    T_CHECK(err.raised && !strcmp(err.message, "Roles must alternate: 3"), "raised message [%s]", err.message);
    T_CHECK(err.line == 2 && err.col == 19, "raise position %d:%d", err.line, err.col);
    T_CHECK(!strcmp(lmq_last_error(), "chat template line 2 col 19: Roles must alternate: 3"), "%s", lmq_last_error());
    free(out);

    /* bad JSON input is an input error, not a template error */
    v.messages_json = "[{\"role\": ";
    out = render("x", &v, &st);
    T_CHECK(!out && st == LMQ_ERR_FORMAT, "invalid messages JSON: %d %s", st, lmq_last_error());
    free(out);
}

static void test_limits(void)
{
    lmq_chat_vars v;
    memset(&v, 0, sizeof v);
    lmq_status st;
    char *out;
    /* unbounded recursion */
    out = render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", &v, &st);
    T_CHECK(!out && st == LMQ_ERR_LIMIT, "recursion: %d %s", st, lmq_last_error());
    free(out);
    /* step budget */
    v.max_steps = 100000;
    out = render("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", &v, &st);
    T_CHECK(!out && st == LMQ_ERR_LIMIT, "steps: %d %s", st, lmq_last_error());
    free(out);
    v.max_steps = 0;
    /* output size */
    v.max_output = 1000;
    out = render("{% for i in range(2000) %}x{% endfor %}", &v, &st);
    T_CHECK(!out && st == LMQ_ERR_LIMIT, "output: %d %s", st, lmq_last_error());
    free(out);
    out = render("{{ 'abc' * 100000000 }}", &v, &st);
    T_CHECK(!out && st == LMQ_ERR_LIMIT, "string repetition: %d %s", st, lmq_last_error());
    free(out);
    v.max_output = 0;
    /* memory */
    v.max_memory = 1 << 20;
    out = render("{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = ns.l + [i] %}{% endfor %}",
                 &v, &st);
    T_CHECK(!out && (st == LMQ_ERR_LIMIT), "memory: %d %s", st, lmq_last_error());
    free(out);
    v.max_memory = 0;
    /* sandbox range */
    out = render("{{ range(1000000)|length }}", &v, &st);
    T_CHECK(!out && st == LMQ_ERR_RUNTIME, "range: %d %s", st, lmq_last_error());
    free(out);
    /* deep nesting in the source */
    size_t depth = 5000;
    char *deep = malloc(depth * 2 + 16);
    strcpy(deep, "{{ ");
    size_t k = 3;
    for (size_t i = 0; i < depth; i++) deep[k++] = '(';
    deep[k++] = '1';
    for (size_t i = 0; i < depth; i++) deep[k++] = ')';
    strcpy(deep + k, " }}");
    out = render(deep, &v, &st);
    T_CHECK(!out && st == LMQ_ERR_FORMAT && strstr(lmq_last_error(), "nested too deeply"), "deep parens: %d %s", st,
            lmq_last_error());
    free(out);
    free(deep);
    /* deep values from a loop */
    out = render("{% set ns = namespace(x=1) %}{% for i in range(5000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x|tojson }}",
                 &v, &st);
    T_CHECK(!out && st == LMQ_ERR_LIMIT, "deep value: %d %s", st, lmq_last_error());
    free(out);
}

static void test_inputs(void)
{
    lmq_chat_vars v;
    memset(&v, 0, sizeof v);
    lmq_status st;
    char *out;
    /* ints stay ints, floats stay floats, big ints exact, key order kept */
    v.messages_json = "{\"messages\": [{\"a\": 1, \"b\": 1.0, \"c\": 9007199254740993, \"d\": -2e3, \"z\": 0, \"y\": 1E2}],"
                      " \"tools\": [{\"name\": \"t\"}]}";
    out = render("{{ messages[0]|tojson }}|{{ messages[0].a is integer }}{{ messages[0].b is float }}|{{ tools[0].name }}",
                 &v, &st);
    T_CHECK(out && !strcmp(out, "{\"a\": 1, \"b\": 1.0, \"c\": 9007199254740993, \"d\": -2000.0, \"z\": 0, \"y\": 100.0}|TrueTrue|t"),
            "json numbers: %s", out ? out : lmq_last_error());
    free(out);
    /* defaults: tools is None, documents None, bos undefined */
    memset(&v, 0, sizeof v);
    out = render("{{ tools is none }}{{ bos_token is defined }}{{ messages|length }}{{ add_generation_prompt }}", &v, &st);
    T_CHECK(out && !strcmp(out, "TrueFalse0False"), "defaults: %s", out ? out : lmq_last_error());
    free(out);
    /* extra variables: strings and JSON */
    lmq_chat_var extra[] = {{"bos_token", "<s>", false}, {"flag", "false", true}, {"num", "[1, 2.5]", true}};
    v.extra = extra;
    v.n_extra = 3;
    out = render("{{ bos_token }}{{ flag is false }}{{ num }}", &v, &st);
    T_CHECK(out && !strcmp(out, "<s>True[1, 2.5]"), "extra vars: %s", out ? out : lmq_last_error());
    free(out);
    /* strftime_now: the injected clock */
    memset(&v, 0, sizeof v);
    v.now = 1721995200 + 12 * 3600; /* 2024-07-26 12:00 UTC */
    out = render("{{ strftime_now('%Y-%m') }}", &v, &st);
    T_CHECK(out && !strcmp(out, "2024-07"), "strftime_now: %s", out ? out : lmq_last_error());
    free(out);
    /* the same template renders again identically (templates are immutable) */
    lmq_chat_template *t;
    const char *src = "{% macro m(x) %}[{{ x }}]{% endmacro %}{{ m(1) }}{{ m(2) }}";
    T_CHECK(lmq_chat_template_parse(src, strlen(src), &t) == LMQ_OK, "parse");
    char *a = NULL, *b = NULL;
    lmq_chat_render(t, &v, &a, NULL);
    lmq_chat_render(t, &v, &b, NULL);
    T_CHECK(a && b && !strcmp(a, "[1][2]") && !strcmp(a, b), "re-render");
    free(a);
    free(b);
    lmq_chat_template_free(t);
    lmq_chat_template_free(NULL);
}

static void test_names(void)
{
    char buf[64];
    T_CHECK(!strcmp(lmq_chat_template_name_guess("{{ '<|im_start|>' + m }}", buf, sizeof buf), "chatml"), "chatml");
    T_CHECK(!strcmp(lmq_chat_template_name_guess("[INST] <<SYS>>", buf, sizeof buf), "llama2"), "llama2");
    T_CHECK(!strcmp(lmq_chat_template_name_guess("{{ '<|start|>assistant<|channel|>final<|message|>' }}", buf, sizeof buf), "harmony"), "harmony");
    T_CHECK(!strcmp(lmq_chat_template_name_guess("\n  my own format\nline 2", buf, sizeof buf), "my own format"),
            "first line: %s", buf);
    T_CHECK(!strcmp(lmq_chat_template_name_guess("abcdef", buf, 4), "abc"), "truncated: %s", buf);
}

int main(void)
{
    test_reference_cases();
    test_whitespace();
    test_errors();
    test_limits();
    test_inputs();
    test_names();
    return t_finish();
}
