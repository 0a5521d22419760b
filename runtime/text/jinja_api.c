/* jinja_api.c — the public chat template API (lmq_rt_chat.h) over the engine. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jinja_internal.h"
#include "lmq_rt_chat.h"

#define PARSE_MAX_DEPTH 256
#define DEF_MAX_OUTPUT LMQ_CHAT_MAX_OUTPUT
#define DEF_MAX_MEMORY LMQ_CHAT_MAX_MEMORY
#define DEF_MAX_STEPS LMQ_CHAT_MAX_STEPS
#define DEF_MAX_DEPTH LMQ_CHAT_MAX_DEPTH

struct lmq_chat_template {
    lmqj_template t;
};

lmq_status lmq_chat_template_parse(const char *src, size_t len, lmq_chat_template **out)
{
    if (!out) return lmq_error(LMQ_ERR_INVALID_ARG, "chat template: NULL output");
    *out = NULL;
    if (!src && len) return lmq_error(LMQ_ERR_INVALID_ARG, "chat template: NULL source");
    if (len > LMQ_CHAT_MAX_TEMPLATE)
        return lmq_error(LMQ_ERR_LIMIT, "chat template: %zu bytes exceeds the limit of %u", len,
                         LMQ_CHAT_MAX_TEMPLATE);
    lmq_chat_template *ct = calloc(1, sizeof *ct);
    if (!ct) return lmq_error(LMQ_ERR_NOMEM, "chat template: out of memory");
    /* a fixed cap, not a multiple of the source size (which let a 16 MiB
     * template claim 8 GiB) */
    lmqj_arena_init(&ct->t.ar, LMQ_CHAT_MAX_PARSE_MEMORY);
    char err[512];
    if (!lmqj_parse(&ct->t, src ? src : "", len, PARSE_MAX_DEPTH, err, sizeof err)) {
        lmq_chat_template_free(ct);
        return lmq_error(LMQ_ERR_FORMAT, "chat template %s", err);
    }
    *out = ct;
    return LMQ_OK;
}

void lmq_chat_template_free(lmq_chat_template *t)
{
    if (!t) return;
    lmqj_arena_free(&t->t.ar);
    free(t);
}

/* Parses JSON into a value; on failure longjmps with the message. */
static lmqj_value json_value(lmqj_ctx *c, const char *what, const char *text)
{
    lmqj_value v;
    char err[256];
    if (!lmqj_from_json(c, text, strlen(text), &v, err, sizeof err))
        lmqj_fail(c, NULL, "\x02%s: %s", what, err); /* \x02 marks an input error */
    return v;
}

static void setup_globals(lmqj_ctx *c, const lmq_chat_vars *v)
{
    lmqj_frame *g = c->globals;
    lmqj_value messages = lmqj_list_new(c, 0), tools = lmqj_none();
    if (v->messages_json) {
        lmqj_value m = json_value(c, "messages", v->messages_json);
        if (m.t == JV_DICT) {
            lmqj_value *mm = lmqj_dict_get_str(m.u.d, "messages");
            lmqj_value *tt = lmqj_dict_get_str(m.u.d, "tools");
            if (!mm) lmqj_fail(c, NULL, "\x02messages: the JSON object has no \"messages\"");
            m = *mm;
            if (tt) tools = *tt;
        }
        messages = m;
    }
    if (v->tools_json) tools = json_value(c, "tools", v->tools_json);
    lmqj_frame_set(c, g, "messages", messages);
    lmqj_frame_set(c, g, "tools", tools);
    lmqj_frame_set(c, g, "documents", lmqj_none());
    lmqj_frame_set(c, g, "add_generation_prompt", lmqj_bool(v->add_generation_prompt));
    if (v->bos_token) lmqj_frame_set(c, g, "bos_token", lmqj_cstr(c, v->bos_token));
    if (v->eos_token) lmqj_frame_set(c, g, "eos_token", lmqj_cstr(c, v->eos_token));
    for (size_t i = 0; i < v->n_extra; i++) {
        const lmq_chat_var *x = &v->extra[i];
        if (!x->name || !x->value) lmqj_fail(c, NULL, "\x03variable %zu has no name or value", i);
        char *name = lmqj_alloc(c, strlen(x->name) + 1);
        strcpy(name, x->name);
        lmqj_frame_set(c, g, name, x->json ? json_value(c, name, x->value) : lmqj_cstr(c, x->value));
    }
}

lmq_status lmq_chat_render(const lmq_chat_template *t, const lmq_chat_vars *v, char **out,
                           size_t *len)
{
    if (out) *out = NULL;
    if (len) *len = 0;
    if (!t || !v || !out) return lmq_error(LMQ_ERR_INVALID_ARG, "chat render: NULL argument");
    if (v->error) memset(v->error, 0, sizeof *v->error);
    lmqj_ctx *c = calloc(1, sizeof *c);
    if (!c) return lmq_error(LMQ_ERR_NOMEM, "chat render: out of memory");
    c->lim.max_output = v->max_output ? v->max_output : DEF_MAX_OUTPUT;
    c->lim.max_memory = v->max_memory ? v->max_memory : DEF_MAX_MEMORY;
    c->lim.max_steps = v->max_steps ? v->max_steps : DEF_MAX_STEPS;
    c->lim.max_depth = v->max_depth > 0 ? v->max_depth : DEF_MAX_DEPTH;
    c->now = v->now ? v->now : (int64_t)time(NULL);
    c->tmpl = &t->t;
    lmqj_arena_init(&c->ar, c->lim.max_memory);
    lmq_status st = LMQ_OK;
    if (setjmp(c->jb)) {
        const char *msg = c->err;
        int line = 0, col = 0;
        if (msg[0] == '\x02' || msg[0] == '\x03') {
            st = msg[0] == '\x02' ? LMQ_ERR_FORMAT : LMQ_ERR_INVALID_ARG;
            msg++;
            lmq_error(st, "chat render: %s", msg);
        } else {
            st = c->err_limit ? LMQ_ERR_LIMIT : LMQ_ERR_RUNTIME;
            if (c->err_pos != UINT32_MAX) {
                lmqj_line_col(t->t.src, t->t.len, c->err_pos, &line, &col);
                lmq_error(st, "chat template line %d col %d: %s", line, col, msg);
            } else {
                lmq_error(st, "chat template: %s", msg);
            }
        }
        if (v->error) {
            v->error->line = line;
            v->error->col = col;
            v->error->raised = c->err_raised;
            snprintf(v->error->message, sizeof v->error->message, "%s", msg);
        }
        lmqj_arena_free(&c->ar);
        free(c);
        return st;
    }
    c->globals = lmqj_frame_new(c, NULL);
    c->top = lmqj_frame_new(c, c->globals);
    setup_globals(c, v);
    lmqj_buf result;
    lmqj_buf_init(&result, c);
    c->out = &result;
    lmqj_render_body(c, c->top, t->t.root);
    char *s = malloc(result.len + 1);
    if (!s) {
        lmqj_arena_free(&c->ar);
        free(c);
        return lmq_error(LMQ_ERR_NOMEM, "chat render: out of memory");
    }
    if (result.len) memcpy(s, result.p, result.len);
    s[result.len] = 0;
    *out = s;
    if (len) *len = result.len;
    lmqj_arena_free(&c->ar);
    free(c);
    return LMQ_OK;
}

const char *lmq_chat_template_name_guess(const char *src, char *buf, size_t bufsz)
{
    static const struct { const char *needle, *needle2, *name; } rules[] = {
        {"<|START_OF_TURN_TOKEN|>", NULL, "command-r"},
        {"<|channel|>", "<|message|>", "harmony"},             /* gpt-oss */
        {"<|start_header_id|>", "<function=", "functionary"},
        {"<|start_header_id|>", ">>>", "functionary"},
        {"<start_of_turn>", NULL, "gemma"},
        {"<\xef\xbd\x9cUser\xef\xbd\x9c>", NULL, "deepseek"},      /* <｜User｜> */
        {"<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>", NULL, "deepseek"},
        {"<|im_start|>", "function calling AI model", "hermes"},
        {"<|im_start|>", NULL, "chatml"},
        {"<|start_header_id|>", NULL, "llama3"},
        {"<<SYS>>", NULL, "llama2"},
        {"[INST]", NULL, "mistral"},
        {"<|user|>", "<|end|>", "phi3"},
    };
    if (!buf || bufsz == 0) return buf;
    buf[0] = 0;
    if (!src) return buf;
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        if (strstr(src, rules[i].needle) && (!rules[i].needle2 || strstr(src, rules[i].needle2))) {
            snprintf(buf, bufsz, "%s", rules[i].name);
            return buf;
        }
    }
    while (*src == ' ' || *src == '\t' || *src == '\n' || *src == '\r') src++;
    size_t n = strcspn(src, "\r\n");
    if (n > 60) n = 60;
    if (n >= bufsz) n = bufsz - 1;
    memcpy(buf, src, n);
    buf[n] = 0;
    return buf;
}
