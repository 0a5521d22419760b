/* What `lmq run`, `lmq chat` and `lmq serve` share around lmq_gen (textgen.h). */
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

lmq_gen_params textgen_params(const textgen_opts *o)
{
    lmq_gen_params p = lmq_gen_default_params();
    p.n_predict = o->n_predict;
    for (int i = 0; i < o->n_stops; i++) p.stops[i] = o->stops[i];
    p.n_stops = o->n_stops;
    p.unparse_special = o->unparse_special;
    return p;
}
