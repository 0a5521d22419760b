/* The <think> splitter (and Gemma 4's thought channel) on recorded-style model outputs: the expected reasoning and
 * content, the same parts whatever the cut (every single split point, and
 * byte by byte), prompts that leave the block open. */
#include <stdlib.h>
#include <string.h>

#include "lmq_runtime.h"
#include "testutil.h"

typedef struct parts {
    char r[4096], c[4096];
    size_t nr, nc;
    int switches; /* reasoning -> content transitions seen, as a sanity check */
    int last;     /* -1 none, 0 content, 1 reasoning */
} parts;

static void on_part(void *user, bool reasoning, const char *s, size_t n)
{
    parts *p = user;
    T_CHECK(n > 0, "empty piece");
    if (reasoning) {
        memcpy(p->r + p->nr, s, n);
        p->nr += n;
    } else {
        memcpy(p->c + p->nc, s, n);
        p->nc += n;
    }
    if (p->last == 1 && !reasoning) p->switches++;
    p->last = reasoning;
}

static void run(const char *in, bool inside, size_t cut1, size_t cut2, parts *p)
{
    memset(p, 0, sizeof *p);
    p->last = -1;
    lmq_think *t = NULL;
    lmq_think_new(inside, on_part, p, &t);
    size_t n = strlen(in);
    if (cut1 > n) cut1 = n;
    if (cut2 > n || cut2 < cut1) cut2 = n;
    lmq_think_push(t, in, cut1);
    lmq_think_push(t, in + cut1, cut2 - cut1);
    lmq_think_push(t, in + cut2, n - cut2);
    lmq_think_finish(t);
    lmq_think_free(t);
    p->r[p->nr] = p->c[p->nc] = 0;
}

static void check_case(const char *in, bool inside, const char *want_r, const char *want_c)
{
    parts whole, p;
    run(in, inside, strlen(in), strlen(in), &whole);
    T_CHECK(!strcmp(whole.r, want_r), "reasoning of %.40s: '%s' want '%s'", in, whole.r, want_r);
    T_CHECK(!strcmp(whole.c, want_c), "content of %.40s: '%s' want '%s'", in, whole.c, want_c);
    size_t n = strlen(in);
    int bad = 0;
    for (size_t a = 0; a <= n; a++)
        for (size_t b = a; b <= n; b += 3) {
            run(in, inside, a, b, &p);
            if (strcmp(p.r, want_r) || strcmp(p.c, want_c) || p.switches > 1) bad++;
        }
    /* byte by byte */
    memset(&p, 0, sizeof p);
    p.last = -1;
    lmq_think *t = NULL;
    lmq_think_new(inside, on_part, &p, &t);
    for (size_t i = 0; i < n; i++) lmq_think_push(t, in + i, 1);
    lmq_think_finish(t);
    lmq_think_free(t);
    p.r[p.nr] = p.c[p.nc] = 0;
    if (strcmp(p.r, want_r) || strcmp(p.c, want_c)) bad++;
    T_CHECK(bad == 0, "%d cuts of '%.40s' differ", bad, in);
}

int main(void)
{
    /* Qwen3 (thinking on): the model opens the block itself */
    check_case("<think>\nThe user greets me. I should answer kindly.\n</think>\n\nHello! How can I help?", false,
               "The user greets me. I should answer kindly.", "Hello! How can I help?");
    /* Qwen3.5: the generation prompt ends inside <think> */
    check_case("The user wants 2+2.\nThat is 4.\n</think>\n\n2 + 2 = 4.", true, "The user wants 2+2.\nThat is 4.",
               "2 + 2 = 4.");
    /* enable_thinking=false: the template wrote an empty block; the output is all content */
    check_case("Paris is the capital of France.", false, "", "Paris is the capital of France.");
    /* no block, text that looks like tags */
    check_case("Use <b>bold</b> and a < b <th", false, "", "Use <b>bold</b> and a < b <th");
    /* a block cut off by max_tokens */
    check_case("<think>Let me think about <this> and", false, "Let me think about <this> and", "");
    /* tags out of place stay text */
    check_case("<think>a</think>b<think>c</think>d", false, "a", "b<think>c</think>d");
    check_case("  </think> x", false, "", "</think> x");
    check_case("<think></think>\n\nanswer", false, "", "answer");
    check_case("<<think>>", false, "", "<<think>>");
    check_case("<think>x<</think>", false, "x<", "");
    /* Gemma 4 (thinking on: the system turn has <|think|>): the thought channel,
     * as the 26B/31B models write it after "<|turn>model\n" */
    check_case("<|channel>thought\nThe user asks for the capital of France.\nIt is Paris.<channel|>The capital of France "
               "is **Paris**.",
               false, "The user asks for the capital of France.\nIt is Paris.", "The capital of France is **Paris**.");
    /* a thought before a tool call (the call stays content, for the tool-call parser) */
    check_case("<|channel>thought\nI need the weather in Lima.\n<channel|><|tool_call>call:get_weather{city:<|\"|>Lima<|\"|>}"
               "<tool_call|>",
               false, "I need the weather in Lima.", "<|tool_call>call:get_weather{city:<|\"|>Lima<|\"|>}<tool_call|>");
    /* thinking off: the prompt ended with an empty block, the output is the answer */
    check_case("Paris.<turn|>", false, "", "Paris.<turn|>");
    /* the channel without its name line, an empty one, one cut by max_tokens, a partial name */
    check_case("<|channel>Just reasoning<channel|>done", false, "Just reasoning", "done");
    check_case("<|channel>thought\n<channel|>\n\nanswer", false, "", "answer");
    check_case("<|channel>thought\nstill <thinking", false, "still <thinking", "");
    check_case("<|channel>thou", false, "thou", "");
    check_case("<|channel>thoughtful<channel|>x", false, "thoughtful", "x");
    /* each pair closes only its own block; markers out of place stay text */
    check_case("<|channel>a</think>b<channel|>c", false, "a</think>b", "c");
    check_case("<think>a<channel|>b</think>c", false, "a<channel|>b", "c");
    check_case("x<|channel>thought\ny<channel|>", false, "", "x<|channel>thought\ny<channel|>");
    check_case("<|chan<channel|", false, "", "<|chan<channel|");
    T_CHECK(lmq_think_is_template("{{ '<|channel>thought\\n<channel|>' }}", 33), "Gemma 4's template");
    T_CHECK(lmq_think_is_template("<think>", 7) && !lmq_think_is_template("<|channel|>x<|message|>", 23) &&
                !lmq_think_is_template("<|channel>", 10) && !lmq_think_is_template(NULL, 0),
            "templates without blocks");
    T_CHECK(!lmq_think_prompt_open("<|turn>model\n<|channel>thought\n<channel|>", 41), "Gemma's closed empty block");
    T_CHECK(lmq_think_prompt_open("<|im_start|>assistant\n<think>\n", 30), "open at the end");
    T_CHECK(!lmq_think_prompt_open("<|im_start|>assistant\n<think>\n\n</think>\n\n", 41), "closed");
    T_CHECK(!lmq_think_prompt_open("<think>x", 8), "text after the tag");
    T_CHECK(!lmq_think_prompt_open("plain", 5), "no tag");
    return t_finish();
}
