/* lmq serve's engine: the model, its slots (one lmq_context each, with the
 * tokens it holds for prompt-prefix reuse), the bounded wait queue, OpenAI
 * request parsing and response JSON. The HTTP side is cmd_serve.c. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "serve.h"

/* ---------------------------------------------------------------- errors */

void serve_error_set(serve_error *err, int http, const char *type, const char *code, const char *param,
                     const char *fmt, ...)
{
    err->http = http;
    err->type = type;
    err->code = code;
    snprintf(err->param, sizeof err->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
}

static void bad_request(serve_error *err, const char *param, const char *fmt, const char *detail)
{
    serve_error_set(err, 400, "invalid_request_error", NULL, param, fmt, param, detail ? detail : "");
}

char *serve_error_json(const serve_error *err)
{
    cJSON *root = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(e, "message", err->message);
    cJSON_AddStringToObject(e, "type", err->type ? err->type : "server_error");
    if (err->param[0]) cJSON_AddStringToObject(e, "param", err->param);
    else cJSON_AddNullToObject(e, "param");
    if (err->code) cJSON_AddStringToObject(e, "code", err->code);
    else cJSON_AddNullToObject(e, "code");
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

/* ---------------------------------------------------------------- engine */

static char *dup_n(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = 0;
    }
    return p;
}

lmq_status serve_engine_init(serve_engine *e, const char *model_path, const lmq_context_params *cp, int n_parallel,
                             const char *alias, const char *template_src)
{
    memset(e, 0, sizeof *e);
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    e->alias = alias;
    lmq_status s = cli_model_load(model_path, &e->m);
    if (s) return s;
    e->v = lmq_model_vocab(e->m);
    if (!e->v) return lmq_error(LMQ_ERR_NOT_FOUND, "%s: the model has no tokenizer", model_path);
    const char *src = template_src ? template_src : lmq_model_chat_template(e->m);
    if (src && (s = lmq_chat_template_parse(src, strlen(src), &e->tmpl))) return s;
    if (src && lmq_harmony_is_template(src, strlen(src))) e->reasoning = SERVE_REASONING_HARMONY;
    else if (lmq_think_is_template(src, src ? strlen(src) : 0)) e->reasoning = SERVE_REASONING_THINK;
    e->tool_format = src ? lmq_tool_format_guess(src, strlen(src)) : LMQ_TOOL_FORMAT_HERMES;
    e->template_has_tools = src && strstr(src, "tools");
    size_t bl = 0, el = 0;
    const char *bos = lmq_vocab_bos(e->v) >= 0 ? lmq_vocab_token_text(e->v, lmq_vocab_bos(e->v), &bl) : NULL;
    const char *eos = lmq_vocab_eos(e->v) >= 0 ? lmq_vocab_token_text(e->v, lmq_vocab_eos(e->v), &el) : NULL;
    e->bos = bos ? dup_n(bos, bl) : NULL;
    e->eos = eos ? dup_n(eos, el) : NULL;
    e->slots = calloc((size_t)n_parallel, sizeof *e->slots);
    if (!e->slots) return lmq_error(LMQ_ERR_NOMEM, "slots");
    for (int i = 0; i < n_parallel; i++) {
        e->slots[i].id = i;
        if ((s = lmq_context_new(e->m, cp, &e->slots[i].ctx))) return s;
        e->n_slots = i + 1;
        if ((s = lmq_gen_new(e->slots[i].ctx, &e->slots[i].gen))) return s;
    }
    e->n_ctx = lmq_context_n_ctx(e->slots[0].ctx);
    return LMQ_OK;
}

void serve_engine_free(serve_engine *e)
{
    for (int i = 0; i < e->n_slots; i++) {
        lmq_gen_free(e->slots[i].gen);
        lmq_context_free(e->slots[i].ctx);
    }
    free(e->slots);
    free(e->bos);
    free(e->eos);
    lmq_chat_template_free(e->tmpl);
    lmq_model_free(e->m);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
}

void serve_engine_stop(serve_engine *e)
{
    pthread_mutex_lock(&e->mu);
    e->stopping = true;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

bool serve_engine_stopping(serve_engine *e)
{
    pthread_mutex_lock(&e->mu);
    bool s = e->stopping;
    pthread_mutex_unlock(&e->mu);
    return s;
}

void serve_engine_counts(serve_engine *e, int *busy, int *waiting)
{
    pthread_mutex_lock(&e->mu);
    *busy = e->n_busy;
    *waiting = e->n_waiting;
    pthread_mutex_unlock(&e->mu);
}

void serve_engine_note_cancel(serve_engine *e)
{
    pthread_mutex_lock(&e->mu);
    e->n_cancelled++;
    pthread_mutex_unlock(&e->mu);
}

/* ---------------------------------------------------------------- request parsing */

/* Looks up an optional field; NULL when absent or JSON null. */
static const cJSON *field(const cJSON *o, const char *name)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
    return f && !cJSON_IsNull(f) ? f : NULL;
}

static bool get_number(const cJSON *o, const char *name, double lo, double hi, float *dst, serve_error *err)
{
    const cJSON *f = field(o, name);
    if (!f) return true;
    if (!cJSON_IsNumber(f)) return bad_request(err, name, "'%s' must be a number%s", NULL), false;
    if (!(f->valuedouble >= lo && f->valuedouble <= hi)) {
        char range[64];
        snprintf(range, sizeof range, " between %g and %g", lo, hi);
        return bad_request(err, name, "'%s' must be a number%s", range), false;
    }
    *dst = (float)f->valuedouble;
    return true;
}

static bool get_int(const cJSON *o, const char *name, double lo, double hi, int64_t *dst, bool *present,
                    serve_error *err)
{
    const cJSON *f = field(o, name);
    if (present) *present = f != NULL;
    if (!f) return true;
    if (!cJSON_IsNumber(f) || floor(f->valuedouble) != f->valuedouble)
        return bad_request(err, name, "'%s' must be an integer%s", NULL), false;
    if (!(f->valuedouble >= lo && f->valuedouble <= hi)) {
        char range[64];
        snprintf(range, sizeof range, " between %.0f and %.0f", lo, hi);
        return bad_request(err, name, "'%s' must be an integer%s", range), false;
    }
    *dst = (int64_t)f->valuedouble;
    return true;
}

static bool get_bool(const cJSON *o, const char *name, bool *dst, serve_error *err)
{
    const cJSON *f = field(o, name);
    if (!f) return true;
    if (!cJSON_IsBool(f)) return bad_request(err, name, "'%s' must be a boolean%s", NULL), false;
    *dst = cJSON_IsTrue(f);
    return true;
}

static bool add_stop(serve_request *r, const cJSON *s, serve_error *err)
{
    if (!cJSON_IsString(s) || !s->valuestring[0] || strlen(s->valuestring) > LMQ_SERVE_MAX_STOP_LEN)
        return serve_error_set(err, 400, "invalid_request_error", NULL, "stop",
                               "'stop' must be a non-empty string of at most %d bytes or a list of them",
                               LMQ_SERVE_MAX_STOP_LEN),
               false;
    if (r->n_stops == LMQ_SERVE_MAX_STOPS)
        return serve_error_set(err, 400, "invalid_request_error", NULL, "stop", "'stop' has more than %d strings",
                               LMQ_SERVE_MAX_STOPS),
               false;
    if (!(r->stops[r->n_stops] = strdup(s->valuestring)))
        return serve_error_set(err, 500, "server_error", NULL, NULL, "out of memory"), false;
    r->n_stops++;
    return true;
}

static bool parse_sampling(const cJSON *o, serve_request *r, serve_error *err)
{
    lmq_sampler_params *sp = &r->sp;
    *sp = lmq_sampler_default_params();
    sp->temperature = 1.0f; /* OpenAI's defaults */
    sp->top_p = 1.0f;
    sp->top_k = 0;
    sp->min_p = 0.0f;
    sp->repeat_penalty = 1.0f;
    int64_t v = 0;
    bool has_seed = false, has = false;
    if (!get_number(o, "temperature", 0, 2, &sp->temperature, err) || !get_number(o, "top_p", 0, 1, &sp->top_p, err) ||
        !get_number(o, "presence_penalty", -2, 2, &sp->presence_penalty, err) ||
        !get_number(o, "frequency_penalty", -2, 2, &sp->frequency_penalty, err) ||
        !get_int(o, "seed", -9007199254740991.0, 9007199254740991.0, &v, &has_seed, err))
        return false;
    static _Atomic unsigned long long counter;
    sp->seed = has_seed ? (uint64_t)v : (uint64_t)time(NULL) * 2654435761u + atomic_fetch_add(&counter, 1);
    r->max_tokens = -1;
    if (!get_int(o, "max_tokens", 1, 1 << 30, &v, &has, err)) return false;
    if (has) r->max_tokens = (int32_t)v;
    if (!get_int(o, "max_completion_tokens", 1, 1 << 30, &v, &has, err)) return false;
    if (has) r->max_tokens = (int32_t)v;
    r->n_choices = 1;
    if (!get_int(o, "n", 1, LMQ_SERVE_MAX_CHOICES, &v, &has, err)) return false;
    if (has) r->n_choices = (int)v;
    if (r->kind == SERVE_CHAT) {
        if (!get_bool(o, "logprobs", &r->logprobs, err)) return false;
        if (!get_int(o, "top_logprobs", 0, LMQ_SAMPLER_MAX_TOP_LOGPROBS, &v, &has, err)) return false;
        if (has && !r->logprobs)
            return bad_request(err, "top_logprobs", "'%s' needs 'logprobs': true%s", NULL), false;
        if (has) r->top_logprobs = (int32_t)v;
    } else {
        /* completions: logprobs is the number of top entries (0 included) */
        if (!get_int(o, "logprobs", 0, LMQ_SAMPLER_MAX_TOP_LOGPROBS, &v, &has, err)) return false;
        r->logprobs = has;
        if (has) r->top_logprobs = (int32_t)v;
    }
    if (!get_bool(o, "stream", &r->stream, err)) return false;
    const cJSON *so = field(o, "stream_options");
    if (so && !cJSON_IsObject(so)) return bad_request(err, "stream_options", "'%s' must be an object%s", NULL), false;
    if (so && !get_bool(so, "include_usage", &r->include_usage, err)) return false;
    const cJSON *stop = field(o, "stop");
    if (cJSON_IsArray(stop)) {
        const cJSON *it;
        cJSON_ArrayForEach(it, stop) if (!add_stop(r, it, err)) return false;
    } else if (stop && !add_stop(r, stop, err)) {
        return false;
    }
    const cJSON *model = field(o, "model");
    if (model && !cJSON_IsString(model)) return bad_request(err, "model", "'%s' must be a string%s", NULL), false;
    return true;
}

/* The text of a message's content: a string, or a list of {type: "text", text} parts. */
static bool content_text(const cJSON *c, textgen_buf *out, serve_error *err)
{
    if (!c) return textgen_buf_add(out, "", 0);
    if (cJSON_IsString(c)) return textgen_buf_add(out, c->valuestring, strlen(c->valuestring));
    if (!cJSON_IsArray(c))
        return bad_request(err, "messages", "'%s': content must be a string or a list of text parts%s", NULL), false;
    const cJSON *part;
    cJSON_ArrayForEach(part, c) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") || !cJSON_IsString(text))
            return bad_request(err, "messages", "'%s': only text content parts are supported%s", NULL), false;
        if (!textgen_buf_add(out, text->valuestring, strlen(text->valuestring))) return false;
    }
    return true;
}

/* Template variables from the request: chat_template_kwargs (each key as a
 * JSON value, e.g. enable_thinking) and reasoning_effort. */
typedef struct render_vars {
    lmq_chat_var v[LMQ_SERVE_MAX_KWARGS + 1];
    char *owned[LMQ_SERVE_MAX_KWARGS];
    size_t n, n_owned;
} render_vars;

static void render_vars_free(render_vars *rv)
{
    for (size_t i = 0; i < rv->n_owned; i++) free(rv->owned[i]);
    rv->n = rv->n_owned = 0;
}

static bool template_vars(const cJSON *root, render_vars *rv, serve_error *err)
{
    memset(rv, 0, sizeof *rv);
    const cJSON *kw = field(root, "chat_template_kwargs");
    if (kw && !cJSON_IsObject(kw))
        return bad_request(err, "chat_template_kwargs", "'%s' must be an object%s", NULL), false;
    if (kw && cJSON_GetArraySize(kw) > LMQ_SERVE_MAX_KWARGS)
        return serve_error_set(err, 400, "invalid_request_error", NULL, "chat_template_kwargs",
                               "'chat_template_kwargs' has more than %d entries", LMQ_SERVE_MAX_KWARGS),
               false;
    const cJSON *it;
    if (kw) cJSON_ArrayForEach(it, kw) {
        char *js = cJSON_PrintUnformatted(it);
        if (!js) return serve_error_set(err, 500, "server_error", NULL, NULL, "out of memory"), false;
        rv->owned[rv->n_owned++] = js;
        rv->v[rv->n++] = (lmq_chat_var){.name = it->string, .value = js, .json = true};
    }
    const cJSON *effort = field(root, "reasoning_effort");
    if (effort) {
        static const char *levels[] = {"minimal", "low", "medium", "high"};
        bool known = false;
        for (size_t i = 0; cJSON_IsString(effort) && i < sizeof levels / sizeof *levels; i++)
            known |= !strcmp(effort->valuestring, levels[i]);
        if (!known)
            return bad_request(err, "reasoning_effort", "'%s' must be \"minimal\", \"low\", \"medium\" or \"high\"%s",
                               NULL),
                   false;
        /* gpt-oss's template knows low/medium/high */
        const char *lv = strcmp(effort->valuestring, "minimal") ? effort->valuestring : "low";
        rv->v[rv->n++] = (lmq_chat_var){.name = "reasoning_effort", .value = lv, .json = false};
    }
    return true;
}

static bool render_with(serve_engine *e, const char *messages_json, const char *tools_json, const render_vars *rv,
                        char **prompt, serve_error *err)
{
    lmq_status s;
    if (!e->tmpl) {
        s = textgen_render_chat(NULL, messages_json, e->bos, e->eos, prompt);
    } else {
        lmq_chat_error ce;
        memset(&ce, 0, sizeof ce);
        lmq_chat_vars vars;
        memset(&vars, 0, sizeof vars);
        vars.messages_json = messages_json;
        vars.tools_json = tools_json;
        vars.add_generation_prompt = true;
        vars.bos_token = e->bos;
        vars.eos_token = e->eos;
        vars.extra = rv->v;
        vars.n_extra = rv->n;
        vars.error = &ce;
        size_t len;
        s = lmq_chat_render(e->tmpl, &vars, prompt, &len);
        if (s && s != LMQ_ERR_NOMEM) {
            if (ce.line > 0)
                serve_error_set(err, 400, "invalid_request_error", NULL, "messages", "chat template (line %d, column %d): %s",
                                ce.line, ce.col, ce.message);
            else
                serve_error_set(err, 400, "invalid_request_error", NULL, "messages", "chat template: %s",
                                ce.message[0] ? ce.message : lmq_last_error());
            return false;
        }
    }
    if (s == LMQ_ERR_NOMEM) return serve_error_set(err, 500, "server_error", NULL, NULL, "out of memory"), false;
    if (s) return serve_error_set(err, 400, "invalid_request_error", NULL, "messages", "%s", lmq_last_error()), false;
    return true;
}

/* The request's tools: validated, their names listed; the tool_choice. */
typedef struct req_tools {
    const cJSON *tools;          /* the request's list, or NULL */
    const char *names[LMQ_SERVE_MAX_TOOLS];
    int n;
    bool none;                   /* tool_choice "none" */
} req_tools;

/* Compiles a schema (NULL: any JSON object) with a prefix/suffix into
 * r->schema; a refusal is a 400 naming param and the matcher's reason. */
static bool compile_schema(const cJSON *schema, const char *prefix, const char *suffix, serve_request *r,
                           const char *param, serve_error *err)
{
    char *json = schema ? cJSON_PrintUnformatted(schema) : NULL;
    if (schema && !json) return serve_error_set(err, 500, "server_error", NULL, NULL, "out of memory"), false;
    lmq_status s = lmq_json_schema_compile(json, json ? strlen(json) : 0, prefix, suffix, &r->schema);
    free(json);
    if (s == LMQ_ERR_NOMEM) return serve_error_set(err, 500, "server_error", NULL, NULL, "out of memory"), false;
    if (s)
        return serve_error_set(err, 400, "invalid_request_error", NULL, param, "'%s': the schema cannot be used: %s",
                               param, lmq_last_error()),
               false;
    return true;
}

/* How a format writes one call: the text before it, the key of its
 * arguments, the text after it. The forms whose call syntax is not text the
 * matcher can force (harmony's and Gemma 4's headers are special tokens or
 * not JSON) have none. */
typedef struct call_form {
    const char *open, *args_key, *close;
} call_form;

static const call_form *call_form_of(lmq_tool_format f)
{
    static const call_form hermes = {"<tool_call>\n", "arguments", "\n</tool_call>"};
    static const call_form llama3 = {"", "parameters", ""};
    static const call_form mistral = {"[TOOL_CALLS][", "arguments", "]"};
    switch (f) {
    case LMQ_TOOL_FORMAT_HERMES: return &hermes;
    case LMQ_TOOL_FORMAT_LLAMA3: return &llama3;
    case LMQ_TOOL_FORMAT_MISTRAL: return &mistral;
    default: return NULL;
    }
}

static void beside_response_format(serve_error *err)
{
    serve_error_set(err, 400, "invalid_request_error", NULL, "tool_choice",
                    "a forced tool_choice and a JSON response_format cannot be combined (the reply is "
                    "either a call or content)");
}

/* The form a call is forced in (the model's call syntax), or NULL with a
 * 400; a JSON response_format beside it is refused too. */
static const call_form *can_force(const serve_engine *e, const serve_request *r, serve_error *err)
{
    const call_form *cf = call_form_of(e->tool_format);
    if (!cf)
        return serve_error_set(err, 400, "invalid_request_error", NULL, "tool_choice",
                               "forcing a tool call is supported for the Hermes (<tool_call>), Llama 3, Mistral and "
                               "(one named tool) harmony formats; this model writes calls as %s",
                               lmq_tool_format_str(e->tool_format)),
               NULL;
    if (r->schema) return beside_response_format(err), NULL;
    return cf;
}

/* A forced call of `tool`: the output is the model's own call syntax around
 * {"name": NAME, ARGS_KEY: ARGS}, ARGS matching the tool's parameters. In
 * harmony the call's header (special tokens) ends the prompt instead
 * (render_chat) and the output is ARGS alone. */
static bool force_tool(const serve_engine *e, const cJSON *tool, serve_request *r, serve_error *err)
{
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tool, "function");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
    const cJSON *params = field(fn, "parameters");
    if (e->tool_format == LMQ_TOOL_FORMAT_HARMONY && e->reasoning == SERVE_REASONING_HARMONY) {
        if (r->schema) return beside_response_format(err), false;
        /* the name goes into the prompt's header: no markers, only a function name's characters */
        for (const char *c = name->valuestring; *c; c++)
            if (!isalnum((unsigned char)*c) && !strchr("_-.", *c))
                return serve_error_set(err, 400, "invalid_request_error", NULL, "tool_choice",
                                       "tool '%s' cannot be forced in the harmony format: a name of letters, digits, "
                                       "'_', '-' and '.' only",
                                       name->valuestring),
                       false;
        if (!compile_schema(params, NULL, NULL, r, "tools", err)) return false;
        if (!(r->forced_call = strdup(name->valuestring)))
            return serve_error_set(err, 500, "server_error", NULL, NULL, "out of memory"), false;
        return true;
    }
    const call_form *cf = can_force(e, r, err);
    if (!cf) return false;
    char *qname = cJSON_PrintUnformatted(name);
    if (!qname) return serve_error_set(err, 500, "server_error", NULL, NULL, "out of memory"), false;
    size_t n = strlen(qname) + 64, ns = strlen(cf->close) + 2;
    char *prefix = malloc(n), *suffix = malloc(ns);
    if (!prefix || !suffix) {
        free(qname);
        free(prefix);
        free(suffix);
        return serve_error_set(err, 500, "server_error", NULL, NULL, "out of memory"), false;
    }
    snprintf(prefix, n, "%s{\"name\": %s, \"%s\": ", cf->open, qname, cf->args_key);
    snprintf(suffix, ns, "}%s", cf->close);
    free(qname);
    bool ok = compile_schema(params, prefix, suffix, r, "tools", err);
    free(prefix);
    free(suffix);
    return ok;
}

/* tool_choice "required": one call of any of the tools, forced as the
 * schema {"anyOf": [{"name": {"const": NAME_i}, ARGS_KEY: PARAMS_i}...]}
 * inside the format's call syntax (the matcher reads the alternatives in
 * parallel until the name settles which one it is). */
static bool force_any_tool(const serve_engine *e, const cJSON *tools, serve_request *r, serve_error *err)
{
    if (cJSON_GetArraySize(tools) == 1) return force_tool(e, cJSON_GetArrayItem(tools, 0), r, err);
    if (e->tool_format == LMQ_TOOL_FORMAT_HARMONY)
        return serve_error_set(err, 400, "invalid_request_error", NULL, "tool_choice",
                               "tool_choice \"required\" over several tools cannot be forced in the harmony format "
                               "(the tool's name is in the call's header); name one tool"),
               false;
    const call_form *cf = can_force(e, r, err);
    if (!cf) return false;
    cJSON *root = cJSON_CreateObject(), *alts = cJSON_AddArrayToObject(root, "anyOf");
    bool ok = alts != NULL;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        if (!ok) break;
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *params = field(fn, "parameters");
        cJSON *alt = cJSON_CreateObject(), *props = cJSON_CreateObject(), *name = cJSON_CreateObject();
        cJSON *args = params ? cJSON_Duplicate(params, 1) : cJSON_CreateObject();
        ok = alt && props && name && args && cJSON_AddItemToArray(alts, alt);
        if (!ok) {
            cJSON_Delete(alt);
            cJSON_Delete(props);
            cJSON_Delete(name);
            cJSON_Delete(args);
            break;
        }
        if (!params) ok = cJSON_AddStringToObject(args, "type", "object") != NULL;
        ok = ok && cJSON_AddStringToObject(alt, "type", "object") &&
             cJSON_AddItemReferenceToObject(name, "const", (cJSON *)cJSON_GetObjectItemCaseSensitive(fn, "name"));
        ok = cJSON_AddItemToObject(props, "name", name) && ok;
        ok = cJSON_AddItemToObject(props, cf->args_key, args) && ok;
        ok = cJSON_AddItemToObject(alt, "properties", props) && ok;
        const char *req[] = {"name", cf->args_key};
        ok = ok && cJSON_AddItemToObject(alt, "required", cJSON_CreateStringArray(req, 2));
    }
    ok = ok && compile_schema(root, cf->open, cf->close, r, "tool_choice", err);
    if (!ok && !err->http) serve_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    cJSON_Delete(root);
    return ok;
}

static bool parse_tools(const serve_engine *e, const cJSON *root, serve_request *r, req_tools *rt, serve_error *err)
{
    memset(rt, 0, sizeof *rt);
    const cJSON *tools = field(root, "tools");
    if (tools && (!cJSON_IsArray(tools) || cJSON_GetArraySize(tools) > LMQ_SERVE_MAX_TOOLS))
        return serve_error_set(err, 400, "invalid_request_error", NULL, "tools", "'tools' must be a list of at most %d tools",
                               LMQ_SERVE_MAX_TOOLS),
               false;
    const cJSON *t;
    if (tools) cJSON_ArrayForEach(t, tools) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *params = field(fn, "parameters");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "function") || !cJSON_IsObject(fn) ||
            !cJSON_IsString(name) || !name->valuestring[0] || (params && !cJSON_IsObject(params)))
            return bad_request(err, "tools",
                               "'%s': each tool must be {\"type\": \"function\", \"function\": {\"name\": non-empty string, "
                               "\"parameters\": object}}%s", NULL),
                   false;
        for (int i = 0; i < rt->n; i++)
            if (!strcmp(rt->names[i], name->valuestring))
                return serve_error_set(err, 400, "invalid_request_error", NULL, "tools", "tool '%s' is defined twice",
                                       name->valuestring),
                       false;
        rt->names[rt->n++] = name->valuestring;
    }
    rt->tools = rt->n ? tools : NULL;
    const cJSON *choice = field(root, "tool_choice");
    if (choice && cJSON_IsString(choice) && !strcmp(choice->valuestring, "none")) rt->none = true;
    else if (choice && cJSON_IsString(choice) && !strcmp(choice->valuestring, "auto")) {
    } else if (choice && cJSON_IsString(choice) && !strcmp(choice->valuestring, "required")) {
        if (rt->n == 0)
            return serve_error_set(err, 400, "invalid_request_error", NULL, "tool_choice",
                                   "tool_choice \"required\" needs at least one tool in 'tools'"),
                   false;
        if (!force_any_tool(e, tools, r, err)) return false;
    } else if (choice && cJSON_IsObject(choice)) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(choice, "function"), "name");
        if (!cJSON_IsString(nm)) return bad_request(err, "tool_choice", "'%s': expected {\"type\": \"function\", \"function\": {\"name\": ...}}%s", NULL), false;
        const cJSON *named = NULL;
        for (int i = 0; i < rt->n; i++)
            if (!strcmp(rt->names[i], nm->valuestring)) named = cJSON_GetArrayItem(tools, i);
        if (!named)
            return serve_error_set(err, 400, "invalid_request_error", NULL, "tool_choice", "tool_choice names '%s', which is not in 'tools'",
                                   nm->valuestring),
                   false;
        if (!force_tool(e, named, r, err)) return false;
    } else if (choice) {
        return bad_request(err, "tool_choice", "'%s' must be \"none\", \"auto\", \"required\" or a named function%s", NULL), false;
    }
    r->parallel_tool_calls = true;
    if (!get_bool(root, "parallel_tool_calls", &r->parallel_tool_calls, err)) return false;
    r->tools = rt->tools && !rt->none;
    return true;
}

/* An assistant message's tool_calls for the template: names checked against
 * the tools, arguments parsed into objects (what HF templates expect); the
 * ids are remembered for the tool messages that answer them. */
static bool norm_tool_calls(const cJSON *calls, const req_tools *rt, cJSON *o, cJSON *ids, serve_error *err)
{
    if (!cJSON_IsArray(calls)) return bad_request(err, "messages", "'%s': tool_calls must be a list%s", NULL), false;
    cJSON *out = cJSON_AddArrayToObject(o, "tool_calls");
    const cJSON *c;
    cJSON_ArrayForEach(c, calls) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(c, "id");
        if (!cJSON_IsString(name) || !cJSON_IsString(id))
            return bad_request(err, "messages", "'%s': each tool call needs a string 'id' and 'function.name'%s", NULL), false;
        bool known = false;
        for (int i = 0; i < rt->n; i++) known |= !strcmp(rt->names[i], name->valuestring);
        if (!known)
            return serve_error_set(err, 400, "invalid_request_error", NULL, "messages",
                                   "the history calls tool '%s', which is not in 'tools'", name->valuestring),
                   false;
        cJSON *a = cJSON_IsString(args) ? cJSON_Parse(args->valuestring) : args ? cJSON_Duplicate(args, 1) : cJSON_CreateObject();
        if (!cJSON_IsObject(a)) {
            cJSON_Delete(a);
            return serve_error_set(err, 400, "invalid_request_error", NULL, "messages",
                                   "the arguments of tool call '%s' are not a JSON object", id->valuestring),
                   false;
        }
        cJSON *nc = cJSON_CreateObject(), *nf = cJSON_CreateObject();
        cJSON_AddStringToObject(nc, "id", id->valuestring);
        cJSON_AddStringToObject(nc, "type", "function");
        cJSON_AddStringToObject(nf, "name", name->valuestring);
        cJSON_AddItemToObject(nf, "arguments", a);
        cJSON_AddItemToObject(nc, "function", nf);
        cJSON_AddItemToArray(out, nc);
        cJSON_AddItemToObject(ids, id->valuestring, cJSON_CreateString(name->valuestring));
    }
    return true;
}

/* For a template that does not render tools: a system message in the
 * generic (Hermes) format describing them. */
static bool describe_tools(cJSON *norm, const cJSON *tools)
{
    textgen_buf b = {0};
    char *list = cJSON_PrintUnformatted(tools);
    static const char head[] =
        "You can call functions. The available functions, in JSON Schema:\n<tools>\n";
    static const char tail[] =
        "\n</tools>\nTo call a function, answer with one block per call:\n<tool_call>\n{\"name\": \"FUNCTION\", "
        "\"arguments\": {...}}\n</tool_call>";
    bool ok = list && textgen_buf_add(&b, head, sizeof head - 1) && textgen_buf_add(&b, list, strlen(list)) &&
              textgen_buf_add(&b, tail, sizeof tail - 1);
    free(list);
    if (!ok) {
        free(b.p);
        return false;
    }
    cJSON *first = cJSON_GetArrayItem(norm, 0);
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(first, "role");
    if (cJSON_IsString(role) && !strcmp(role->valuestring, "system")) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(first, "content");
        textgen_buf m = {0};
        ok = textgen_buf_add(&m, c->valuestring, strlen(c->valuestring)) && textgen_buf_add(&m, "\n\n", 2) &&
             textgen_buf_add(&m, b.p, b.len);
        if (ok) cJSON_ReplaceItemInObjectCaseSensitive(first, "content", cJSON_CreateString(m.p));
        free(m.p);
    } else {
        cJSON *sys = cJSON_CreateObject();
        cJSON_AddStringToObject(sys, "role", "system");
        cJSON_AddStringToObject(sys, "content", b.p);
        cJSON_InsertItemInArray(norm, 0, sys);
    }
    free(b.p);
    return ok;
}

/* For a template that knows nothing of tools, a message's calls and tool
 * results become text in the generic (Hermes) format: the calls as
 * <tool_call> blocks after the assistant's content, a result as a user
 * turn in <tool_response>. */
static bool generic_tool_turn(cJSON *o)
{
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(o, "role");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(o, "content");
    cJSON *calls = cJSON_GetObjectItemCaseSensitive(o, "tool_calls");
    bool tool = !strcmp(role->valuestring, "tool");
    if (!calls && !tool) return true;
    textgen_buf b = {0};
    bool ok = true;
    if (tool) {
        ok = textgen_buf_add(&b, "<tool_response>\n", 16) &&
             textgen_buf_add(&b, content->valuestring, strlen(content->valuestring)) &&
             textgen_buf_add(&b, "\n</tool_response>", 17);
        cJSON_ReplaceItemInObjectCaseSensitive(o, "role", cJSON_CreateString("user"));
    } else {
        ok = textgen_buf_add(&b, content->valuestring, strlen(content->valuestring));
        const cJSON *c;
        cJSON_ArrayForEach(c, calls) {
            const cJSON *f = cJSON_GetObjectItemCaseSensitive(c, "function");
            cJSON *call = cJSON_CreateObject();
            cJSON_AddItemToObject(call, "name", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(f, "name"), 1));
            cJSON_AddItemToObject(call, "arguments", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(f, "arguments"), 1));
            char *js = cJSON_PrintUnformatted(call);
            cJSON_Delete(call);
            ok = ok && js && textgen_buf_add(&b, b.len ? "\n<tool_call>\n" : "<tool_call>\n", b.len ? 13 : 12) &&
                 textgen_buf_add(&b, js, strlen(js)) && textgen_buf_add(&b, "\n</tool_call>", 13);
            free(js);
        }
        cJSON_DeleteItemFromObjectCaseSensitive(o, "tool_calls");
    }
    if (ok) cJSON_ReplaceItemInObjectCaseSensitive(o, "content", cJSON_CreateString(b.p ? b.p : ""));
    free(b.p);
    return ok;
}

/* A forced harmony call: the header gpt-oss's template writes for a call,
 * " to=functions.NAME<|channel|>commentary json<|message|>", after the
 * generation prompt's "<|start|>assistant". */
static bool harmony_call_header(const char *name, char **prompt, serve_error *err)
{
    static const char gen[] = "<|start|>assistant";
    size_t n = strlen(*prompt), gl = sizeof gen - 1;
    if (n < gl || memcmp(*prompt + n - gl, gen, gl))
        return serve_error_set(err, 400, "invalid_request_error", NULL, "tool_choice",
                               "a call can be forced only when the template's prompt ends with %s", gen),
               false;
    size_t add = strlen(name) + 64;
    char *p = realloc(*prompt, n + add);
    if (!p) return serve_error_set(err, 500, "server_error", NULL, NULL, "out of memory"), false;
    snprintf(p + n, add, " to=functions.%s<|channel|>commentary json<|message|>", name);
    *prompt = p;
    return true;
}

/* Renders the messages with the model's template (or the plain format). */
static bool render_chat(serve_engine *e, const cJSON *root, serve_request *r, char **prompt, serve_error *err)
{
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0)
        return bad_request(err, "messages", "'%s' must be a non-empty list of messages%s", NULL), false;
    if (cJSON_GetArraySize(msgs) > LMQ_SERVE_MAX_MESSAGES)
        return serve_error_set(err, 400, "invalid_request_error", NULL, "messages", "'messages' has more than %d entries",
                               LMQ_SERVE_MAX_MESSAGES),
               false;
    req_tools rt;
    if (!parse_tools(e, root, r, &rt, err)) return false;
    render_vars rv;
    if (!template_vars(root, &rv, err)) {
        render_vars_free(&rv);
        return false;
    }
    /* the conversation as the template sees it: {role, content} with string
     * contents, an assistant's reasoning_content (Qwen3's templates) and
     * tool_calls, a tool message's tool_call_id and name */
    cJSON *norm = cJSON_CreateArray(), *ids = cJSON_CreateObject();
    bool ok = norm && ids;
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        if (!ok) break;
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsObject(m) || !cJSON_IsString(role)) {
            ok = false;
            bad_request(err, "messages", "'%s': each message needs a string 'role'%s", NULL);
            break;
        }
        textgen_buf text = {0};
        if (!(ok = content_text(field(m, "content"), &text, err))) break;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(norm, o);
        cJSON_AddStringToObject(o, "role", role->valuestring);
        cJSON_AddStringToObject(o, "content", text.p ? text.p : "");
        free(text.p);
        const cJSON *rc = field(m, "reasoning_content");
        if (cJSON_IsString(rc)) {
            cJSON_AddStringToObject(o, "reasoning_content", rc->valuestring);
            cJSON_AddStringToObject(o, "thinking", rc->valuestring); /* gpt-oss's template */
        }
        const cJSON *calls = field(m, "tool_calls");
        if (calls && !(ok = norm_tool_calls(calls, &rt, o, ids, err))) break;
        if (!strcmp(role->valuestring, "tool")) {
            const cJSON *id = field(m, "tool_call_id");
            const cJSON *name = cJSON_IsString(id) ? cJSON_GetObjectItemCaseSensitive(ids, id->valuestring) : NULL;
            if (!name) {
                ok = false;
                serve_error_set(err, 400, "invalid_request_error", NULL, "messages",
                                "a tool message answers tool_call_id '%s', which no earlier assistant message called",
                                cJSON_IsString(id) ? id->valuestring : "(none)");
                break;
            }
            cJSON_AddStringToObject(o, "tool_call_id", id->valuestring);
            cJSON_AddStringToObject(o, "name", name->valuestring);
        }
        if (!e->template_has_tools && !(ok = generic_tool_turn(o))) break;
    }
    if (ok && r->tools && !e->template_has_tools) ok = describe_tools(norm, rt.tools);
    char *json = ok ? cJSON_PrintUnformatted(norm) : NULL;
    char *tools_json = ok && rt.tools && !rt.none && e->template_has_tools ? cJSON_PrintUnformatted(rt.tools) : NULL;
    cJSON_Delete(norm);
    cJSON_Delete(ids);
    if (ok && !json) ok = false;
    if (ok) ok = render_with(e, json, tools_json, &rv, prompt, err);
    if (ok && r->forced_call) ok = harmony_call_header(r->forced_call, prompt, err);
    free(json);
    free(tools_json);
    render_vars_free(&rv);
    if (!ok && !err->http) serve_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    return ok;
}

/* response_format: {"type": "text"}, {"type": "json_object"} (content is
 * one JSON object) or {"type": "json_schema", "json_schema": {"schema": ...}}. */
static bool parse_response_format(const cJSON *root, serve_request *r, serve_error *err)
{
    const cJSON *rf = field(root, "response_format");
    if (!rf) return true;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(rf, "type");
    if (!cJSON_IsObject(rf) || !cJSON_IsString(type))
        return bad_request(err, "response_format", "'%s' must be an object with a 'type'%s", NULL), false;
    if (!strcmp(type->valuestring, "text")) return true;
    if (!strcmp(type->valuestring, "json_object")) return compile_schema(NULL, NULL, NULL, r, "response_format", err);
    if (strcmp(type->valuestring, "json_schema"))
        return bad_request(err, "response_format", "'%s': type must be \"text\", \"json_object\" or \"json_schema\"%s",
                           NULL),
               false;
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(js, "schema");
    if (!cJSON_IsObject(schema))
        return bad_request(err, "response_format", "'%s': json_schema needs a 'schema' object%s", NULL), false;
    return compile_schema(schema, NULL, NULL, r, "response_format", err);
}

bool serve_request_parse(serve_engine *e, serve_kind kind, const char *body, size_t len, serve_request *r,
                         serve_error *err)
{
    memset(r, 0, sizeof *r);
    memset(err, 0, sizeof *err);
    r->kind = kind;
    cJSON *root = cJSON_ParseWithLength(body, len);
    char *prompt = NULL;
    bool ok = false;
    if (!root) {
        /* cJSON's error pointer is process-global: trust it only inside this body */
        uintptr_t at = (uintptr_t)cJSON_GetErrorPtr(), b0 = (uintptr_t)body;
        if (at >= b0 && at <= b0 + len)
            serve_error_set(err, 400, "invalid_request_error", NULL, NULL,
                            "the request body is not valid JSON (near byte %zu)", (size_t)(at - b0));
        else
            serve_error_set(err, 400, "invalid_request_error", NULL, NULL, "the request body is not valid JSON");
        goto out;
    }
    if (!cJSON_IsObject(root)) {
        serve_error_set(err, 400, "invalid_request_error", NULL, NULL, "the request body must be a JSON object");
        goto out;
    }
    if (!parse_sampling(root, r, err)) goto out;
    if (!parse_response_format(root, r, err)) goto out;
    if (kind == SERVE_CHAT) {
        if (!render_chat(e, root, r, &prompt, err)) goto out;
        r->reasoning = e->reasoning;
        r->think_open = e->reasoning == SERVE_REASONING_THINK && lmq_think_prompt_open(prompt, strlen(prompt));
    } else {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
        if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1) p = cJSON_GetArrayItem(p, 0);
        if (!cJSON_IsString(p)) {
            bad_request(err, "prompt", "'%s' must be a string (or a list of one string)%s", NULL);
            goto out;
        }
        if (!(prompt = strdup(p->valuestring))) goto nomem;
    }
    lmq_status s = textgen_tokenize(e->v, prompt, strlen(prompt), true, true, &r->toks, &r->n_toks);
    if (s == LMQ_ERR_NOMEM) goto nomem;
    if (s) {
        serve_error_set(err, 400, "invalid_request_error", NULL, kind == SERVE_CHAT ? "messages" : "prompt",
                        "cannot tokenize the prompt: %s", lmq_last_error());
        goto out;
    }
    if (r->n_toks == 0) {
        serve_error_set(err, 400, "invalid_request_error", NULL, "prompt", "the prompt is empty");
        goto out;
    }
    /* the prompt and at least one generated token must fit */
    if (r->n_toks >= (size_t)e->n_ctx) {
        serve_error_set(err, 400, "invalid_request_error", "context_length_exceeded",
                        kind == SERVE_CHAT ? "messages" : "prompt",
                        "the prompt has %zu tokens; this server's context holds %d (start it with a larger -c)",
                        r->n_toks, e->n_ctx);
        goto out;
    }
    if (r->max_tokens > 0 && (int64_t)r->n_toks + r->max_tokens > e->n_ctx) {
        serve_error_set(err, 400, "invalid_request_error", "context_length_exceeded", "max_tokens",
                        "the prompt (%zu tokens) plus max_tokens (%d) exceeds the context of %d tokens", r->n_toks,
                        r->max_tokens, e->n_ctx);
        goto out;
    }
    static _Atomic unsigned long long serial;
    snprintf(r->id, sizeof r->id, "%s-%llx%llx", kind == SERVE_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)time(NULL), atomic_fetch_add(&serial, 1) + 1);
    r->created = (long long)time(NULL);
    ok = true;
    goto out;
nomem:
    serve_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
out:
    free(prompt);
    cJSON_Delete(root);
    if (!ok) serve_request_free(r);
    return ok;
}

void serve_request_free(serve_request *r)
{
    for (int i = 0; i < r->n_stops; i++) free(r->stops[i]);
    r->n_stops = 0;
    free(r->toks);
    r->toks = NULL;
    lmq_json_schema_free(r->schema);
    r->schema = NULL;
    free(r->forced_call);
    r->forced_call = NULL;
}

/* ---------------------------------------------------------------- slots */

/* The tokens of r's prompt that s's cache already holds. */
static size_t common_prefix(const serve_slot *s, const serve_request *r)
{
    size_t n_cache, n = 0;
    const int32_t *cache = lmq_gen_tokens(s->gen, &n_cache);
    while (n < n_cache && n < r->n_toks && cache[n] == r->toks[n]) n++;
    return n;
}

/* Under e->mu: the free slot sharing the longest prefix (then the least recently used). */
static serve_slot *pick_slot(serve_engine *e, const serve_request *r)
{
    serve_slot *best = NULL;
    size_t best_n = 0;
    for (int i = 0; i < e->n_slots; i++) {
        serve_slot *s = &e->slots[i];
        if (s->busy) continue;
        size_t n = common_prefix(s, r);
        if (!best || n > best_n || (n == best_n && s->last_used < best->last_used)) {
            best = s;
            best_n = n;
        }
    }
    return best;
}

static serve_slot *acquire(serve_engine *e, const serve_request *r, const serve_client *client, serve_error *err)
{
    pthread_mutex_lock(&e->mu);
    serve_slot *s = NULL;
    bool gone = false;
    if (!e->stopping && !(s = pick_slot(e, r))) {
        if (e->n_waiting >= LMQ_SERVE_QUEUE_MAX) {
            pthread_mutex_unlock(&e->mu);
            serve_error_set(err, 429, "rate_limit_error", "queue_full", NULL,
                            "all %d slots are busy and %d requests are waiting; retry later", e->n_slots,
                            LMQ_SERVE_QUEUE_MAX);
            return NULL;
        }
        /* wait in slices, to notice a client that leaves the queue */
        double t_end = lmq_time_s() + LMQ_SERVE_QUEUE_WAIT_S;
        e->n_waiting++;
        while (!e->stopping && !(s = pick_slot(e, r)) && lmq_time_s() < t_end && !gone) {
            struct timespec slice;
            clock_gettime(CLOCK_REALTIME, &slice);
            slice.tv_nsec += LMQ_SERVE_GONE_CHECK_MS * 1000000L;
            slice.tv_sec += slice.tv_nsec / 1000000000L;
            slice.tv_nsec %= 1000000000L;
            if (pthread_cond_timedwait(&e->cv, &e->mu, &slice) == ETIMEDOUT && client && client->gone) {
                pthread_mutex_unlock(&e->mu);
                gone = client->gone(client->arg);
                pthread_mutex_lock(&e->mu);
            }
        }
        e->n_waiting--;
        if (gone) e->n_cancelled++;
    }
    if (s) {
        s->busy = true;
        s->last_used = ++e->tick;
        e->n_served++;
        e->n_busy++;
    }
    bool stopping = e->stopping;
    pthread_mutex_unlock(&e->mu);
    if (!s && gone)
        serve_error_set(err, 499, "invalid_request_error", "client_closed", NULL, "the client went away while queued");
    else if (!s)
        serve_error_set(err, 503, "server_error", stopping ? "shutting_down" : "queue_timeout", NULL,
                        stopping ? "the server is shutting down" : "no slot became free within %d s",
                        LMQ_SERVE_QUEUE_WAIT_S);
    return s;
}

static void release(serve_engine *e, serve_slot *s)
{
    pthread_mutex_lock(&e->mu);
    s->busy = false;
    e->n_busy--;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

/* Tool-call deltas of the step, in OpenAI's shape: the first of a call
 * carries index, id, type and name with empty arguments; the next ones
 * index and an arguments fragment. parallel_tool_calls false keeps the
 * first call only. */
static void call_begin(serve_job *job, const char *name)
{
    if (!job->req.parallel_tool_calls && job->n_calls > 0) {
        job->n_calls++;
        return;
    }
    if (!job->calls) job->calls = cJSON_CreateArray();
    cJSON *d = cJSON_CreateObject(), *f = cJSON_CreateObject();
    char id[96];
    snprintf(id, sizeof id, "call_%s_%d_%d", strchr(job->req.id, '-') ? strchr(job->req.id, '-') + 1 : job->req.id,
             job->choice, job->n_calls);
    cJSON_AddNumberToObject(d, "index", job->n_calls);
    cJSON_AddStringToObject(d, "id", id);
    cJSON_AddStringToObject(d, "type", "function");
    cJSON_AddStringToObject(f, "name", name);
    cJSON_AddStringToObject(f, "arguments", "");
    cJSON_AddItemToObject(d, "function", f);
    cJSON_AddItemToArray(job->calls, d);
    job->n_calls++;
}

static void call_args(serve_job *job, const char *text, size_t len)
{
    if (!len || (!job->req.parallel_tool_calls && job->n_calls > 1)) return;
    if (!job->calls) job->calls = cJSON_CreateArray();
    cJSON *d = cJSON_CreateObject(), *f = cJSON_CreateObject();
    cJSON_AddNumberToObject(d, "index", job->n_calls - 1);
    char *t = dup_n(text, len);
    cJSON_AddStringToObject(f, "arguments", t ? t : "");
    free(t);
    cJSON_AddItemToObject(d, "function", f);
    cJSON_AddItemToArray(job->calls, d);
}

static void on_toolcall(void *user, const lmq_toolcall_event *ev)
{
    serve_job *job = user;
    switch (ev->kind) {
    case LMQ_TOOLCALL_TEXT: textgen_buf_add(&job->content, ev->text, ev->len); break;
    case LMQ_TOOLCALL_BEGIN: call_begin(job, ev->name); break;
    case LMQ_TOOLCALL_ARGS: call_args(job, ev->text, ev->len); break;
    default: break;
    }
}

/* Content of the answer: through the tool-call parser when tools are on. */
static void route_content(serve_job *job, const char *text, size_t len)
{
    if (job->tc) lmq_toolcall_push(job->tc, text, len);
    else textgen_buf_add(&job->content, text, len);
}

/* The splitters' callbacks: text into the step's content or reasoning. */
static void on_think(void *user, bool reasoning, const char *text, size_t len)
{
    serve_job *job = user;
    if (reasoning) textgen_buf_add(&job->reasoning, text, len);
    else route_content(job, text, len);
}

static void on_harmony(void *user, const lmq_harmony_event *ev)
{
    serve_job *job = user;
    /* a commentary message to functions.NAME is a call (when tools are on) */
    if (ev->kind == LMQ_HARMONY_BEGIN) {
        job->harmony_call = job->req.tools && !strncmp(ev->msg->recipient, "functions.", 10) && ev->msg->recipient[10];
        if (job->harmony_call) call_begin(job, ev->msg->recipient + 10);
        return;
    }
    if (ev->kind != LMQ_HARMONY_TEXT) return;
    if (job->harmony_call) call_args(job, ev->text, ev->len);
    /* analysis is reasoning; final and commentary preambles are for the user */
    else textgen_buf_add(ev->msg->channel == LMQ_HARMONY_ANALYSIS ? &job->reasoning : &job->content, ev->text, ev->len);
}

/* Starts the generation of choice job->choice in the job's slot: the
 * slot's generator keeps the prefix its cache shares with the prompt and
 * evaluates the rest now (the last token alone, as generated tokens are:
 * its logits then do not depend on how much of the prompt the cache held,
 * and a seed reproduces a reply). */
static lmq_status job_prefill(serve_job *job)
{
    serve_engine *e = job->e;
    serve_slot *s = job->slot;
    serve_request *q = &job->req;
    job->done = true;
    lmq_sampler_params sp = q->sp;
    sp.seed += (uint64_t)job->choice;
    lmq_status st = lmq_sampler_new(&sp, lmq_model_hparams(e->m)->n_vocab, &job->smp);
    if (!st && q->logprobs) st = lmq_sampler_set_logprobs(job->smp, q->top_logprobs);
    /* constrained output is the document alone: no reasoning to split off */
    if (!st && q->reasoning == SERVE_REASONING_THINK && !q->schema)
        st = lmq_think_new(q->think_open, on_think, job, &job->think);
    if (!st && q->reasoning == SERVE_REASONING_HARMONY && !q->schema)
        st = lmq_harmony_new(on_harmony, job, &job->harmony);
    job->n_calls = 0;
    if (!st && q->tools && e->tool_format != LMQ_TOOL_FORMAT_HARMONY)
        st = lmq_toolcall_new(e->tool_format, on_toolcall, job, &job->tc);
    if (st) return st;
    lmq_gen_params p = lmq_gen_default_params();
    p.n_predict = q->max_tokens > 0 ? q->max_tokens : -1;
    for (int i = 0; i < q->n_stops; i++) p.stops[i] = q->stops[i];
    p.n_stops = q->n_stops;
    /* the splitters read the markers ([TOOL_CALLS], <|channel|>, ...) */
    p.unparse_special = q->reasoning == SERVE_REASONING_HARMONY || (q->tools && e->tool_format != LMQ_TOOL_FORMAT_HERMES);
    p.sampler = job->smp; /* reset, fed the prompt, then every generated token */
    p.schema = q->schema;
    p.prompt_last_alone = true;
    st = lmq_gen_begin(s->gen, q->toks, q->n_toks, &p);
    if (!st && job->choice == 0) job->n_reused = lmq_gen_get_stats(s->gen)->n_reused;
    if (!st) st = lmq_gen_prefill(s->gen, 0, NULL);
    job->st = *lmq_gen_get_stats(s->gen);
    if (st) {
        lmq_gen_reset(s->gen); /* the cache may be half written */
        return st;
    }
    job->done = false;
    return LMQ_OK;
}

static void prefill_error(lmq_status st, serve_error *err)
{
    serve_error_set(err, st == LMQ_ERR_LIMIT ? 400 : 500, st == LMQ_ERR_LIMIT ? "invalid_request_error" : "server_error",
                    NULL, NULL, "%s", lmq_last_error());
}

bool serve_job_start(serve_engine *e, serve_request *r, const serve_client *client, serve_job *job, serve_error *err)
{
    memset(job, 0, sizeof *job);
    job->e = e;
    job->req = *r;
    memset(r, 0, sizeof *r);
    serve_request *q = &job->req;
    serve_slot *s = acquire(e, q, client, err);
    if (!s) {
        serve_request_free(q);
        return false;
    }
    job->slot = s;
    lmq_status st = job_prefill(job);
    if (st) {
        prefill_error(st, err);
        serve_job_finish(job);
        return false;
    }
    return true;
}

/* Frees what belongs to one choice. */
static void job_end_choice(serve_job *job)
{
    lmq_sampler_free(job->smp);
    job->smp = NULL;
    lmq_think_free(job->think);
    job->think = NULL;
    lmq_harmony_free(job->harmony);
    job->harmony = NULL;
    lmq_toolcall_free(job->tc);
    job->tc = NULL;
}

bool serve_job_next_choice(serve_job *job, serve_error *err)
{
    err->http = 0;
    if (!job->slot || job->choice + 1 >= job->req.n_choices) return false;
    job->n_gen_total += job->st.n_gen;
    job_end_choice(job);
    job->choice++;
    lmq_status st = job_prefill(job);
    if (st) {
        prefill_error(st, err);
        return false;
    }
    return true;
}

/* A logprobs entry: {token, logprob, bytes, top_logprobs}. */
static cJSON *string_n(const char *s, size_t n);

static cJSON *token_bytes(const char *p, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((unsigned char)p[i]));
    return a;
}

static cJSON *logprob_entry(const lmq_vocab *v, lmq_token_logprob t, bool with_top, const lmq_token_logprob *top,
                            int32_t n_top)
{
    cJSON *o = cJSON_CreateObject();
    size_t n = 0;
    const char *p = lmq_token_to_piece(v, t.id, true, &n);
    cJSON_AddItemToObject(o, "token", string_n(p, n));
    /* -inf (a token the mask removed) is not JSON: OpenAI's floor instead */
    cJSON_AddNumberToObject(o, "logprob", isfinite(t.logprob) ? t.logprob : -9999.0);
    cJSON_AddItemToObject(o, "bytes", token_bytes(p, n));
    if (with_top) {
        cJSON *a = cJSON_AddArrayToObject(o, "top_logprobs");
        for (int32_t i = 0; i < n_top; i++) cJSON_AddItemToArray(a, logprob_entry(v, top[i], false, NULL, 0));
    }
    return o;
}

lmq_status serve_job_step(serve_job *job)
{
    job->content.len = job->reasoning.len = 0;
    cJSON_Delete(job->lp);
    job->lp = NULL;
    cJSON_Delete(job->calls);
    job->calls = NULL;
    if (job->done || !job->slot) return LMQ_OK;
    int32_t before = job->st.n_gen;
    const char *text;
    size_t n;
    lmq_gen *g = job->slot->gen;
    lmq_status s = lmq_gen_next(g, &text, &n);
    job->st = *lmq_gen_get_stats(g);
    job->done = lmq_gen_done(g);
    lmq_token_logprob ch, top[LMQ_SAMPLER_MAX_TOP_LOGPROBS];
    int32_t nt = 0;
    /* the end-of-generation token is not part of the output */
    if (job->req.logprobs && job->st.n_gen > before && lmq_sampler_last_logprobs(job->smp, &ch, top, &nt)) {
        job->lp = cJSON_CreateArray();
        cJSON_AddItemToArray(job->lp, logprob_entry(job->e->v, ch, true, top, nt));
    }
    if (job->think) {
        lmq_think_push(job->think, text, n);
        if (job->done) lmq_think_finish(job->think);
    } else if (job->harmony) {
        lmq_harmony_push(job->harmony, text, n); /* a malformed header is dropped, not fatal */
        if (job->done) lmq_harmony_finish(job->harmony);
    } else if (n && job->req.forced_call) {
        if (!job->n_calls) call_begin(job, job->req.forced_call); /* its arguments follow, as written */
        call_args(job, text, n);
    } else if (n) {
        route_content(job, text, n);
    }
    if (job->tc && job->done) lmq_toolcall_finish(job->tc);
    return s;
}

void serve_job_finish(serve_job *job)
{
    if (job->slot) {
        release(job->e, job->slot);
        job->slot = NULL;
    }
    job->done = true;
    job_end_choice(job);
    free(job->content.p);
    free(job->reasoning.p);
    job->content = job->reasoning = (textgen_buf){0};
    cJSON_Delete(job->lp);
    job->lp = NULL;
    cJSON_Delete(job->calls);
    job->calls = NULL;
    serve_request_free(&job->req);
}

const char *serve_job_finish_reason(const serve_job *job)
{
    bool stopped = job->st.stop == LMQ_GEN_STOP_EOG || job->st.stop == LMQ_GEN_STOP_STRING;
    if (job->n_calls && stopped) return "tool_calls";
    return stopped ? "stop" : "length";
}

void serve_calls_merge(cJSON **acc, const cJSON *deltas)
{
    const cJSON *d;
    cJSON_ArrayForEach(d, deltas) {
        if (!*acc) *acc = cJSON_CreateArray();
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(d, "function");
        if (cJSON_GetObjectItemCaseSensitive(d, "id")) {
            cJSON *c = cJSON_Duplicate(d, 1);
            cJSON_DeleteItemFromObjectCaseSensitive(c, "index");
            cJSON_AddItemToArray(*acc, c);
            continue;
        }
        int i = cJSON_GetObjectItemCaseSensitive(d, "index")->valueint;
        cJSON *c = cJSON_GetArrayItem(*acc, i), *cf = cJSON_GetObjectItemCaseSensitive(c, "function");
        const cJSON *frag = cJSON_GetObjectItemCaseSensitive(f, "arguments");
        const cJSON *have = cJSON_GetObjectItemCaseSensitive(cf, "arguments");
        if (!cf || !cJSON_IsString(frag) || !cJSON_IsString(have)) continue;
        textgen_buf b = {0};
        textgen_buf_add(&b, have->valuestring, strlen(have->valuestring));
        textgen_buf_add(&b, frag->valuestring, strlen(frag->valuestring));
        cJSON_ReplaceItemInObjectCaseSensitive(cf, "arguments", cJSON_CreateString(b.p ? b.p : ""));
        free(b.p);
    }
}

/* ---------------------------------------------------------------- response JSON */

static cJSON *usage_json(const serve_job *job)
{
    cJSON *u = cJSON_CreateObject();
    int pt = (int)job->req.n_toks, ct = job->n_gen_total + job->st.n_gen;
    cJSON_AddNumberToObject(u, "prompt_tokens", pt);
    cJSON_AddNumberToObject(u, "completion_tokens", ct);
    cJSON_AddNumberToObject(u, "total_tokens", pt + ct);
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(d, "cached_tokens", job->n_reused);
    return u;
}

static cJSON *envelope(const serve_job *job, bool chunk)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", job->req.id);
    cJSON_AddStringToObject(o, "object", job->req.kind == SERVE_CHAT ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                                                     : "text_completion");
    cJSON_AddNumberToObject(o, "created", (double)job->req.created);
    cJSON_AddStringToObject(o, "model", job->e->alias);
    cJSON_AddStringToObject(o, "system_fingerprint", "lmq");
    return o;
}

/* cJSON strings are NUL-terminated: generated text with a NUL byte is cut there. */
static cJSON *string_n(const char *s, size_t n)
{
    char *t = dup_n(s ? s : "", s ? n : 0);
    cJSON *j = cJSON_CreateString(t ? t : "");
    free(t);
    return j;
}

/* The logprobs object of a choice from its entries (taken): chat's
 * {content: [...], refusal: null}, or the completions' parallel lists. */
static cJSON *logprobs_json(const serve_job *job, cJSON *entries)
{
    if (!entries) return cJSON_CreateNull();
    if (job->req.kind == SERVE_CHAT) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "content", entries);
        cJSON_AddNullToObject(o, "refusal");
        return o;
    }
    cJSON *o = cJSON_CreateObject(), *toks = cJSON_AddArrayToObject(o, "tokens"),
          *lps = cJSON_AddArrayToObject(o, "token_logprobs"), *tops = cJSON_AddArrayToObject(o, "top_logprobs"),
          *offs = cJSON_AddArrayToObject(o, "text_offset");
    double off = 0;
    const cJSON *en;
    cJSON_ArrayForEach(en, entries) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(en, "token");
        cJSON_AddItemToArray(toks, cJSON_Duplicate(t, 1));
        cJSON_AddItemToArray(lps, cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(en, "logprob"), 1));
        cJSON *m = cJSON_CreateObject();
        const cJSON *alt;
        cJSON_ArrayForEach(alt, cJSON_GetObjectItemCaseSensitive(en, "top_logprobs")) {
            const char *k = cJSON_GetObjectItemCaseSensitive(alt, "token")->valuestring;
            if (!cJSON_GetObjectItemCaseSensitive(m, k))
                cJSON_AddItemToObject(m, k, cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(alt, "logprob"), 1));
        }
        cJSON_AddItemToArray(tops, m);
        cJSON_AddItemToArray(offs, cJSON_CreateNumber(off));
        off += (double)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(en, "bytes"));
    }
    cJSON_Delete(entries);
    return o;
}

char *serve_json_result(const serve_job *job, const serve_choice *ch, int n)
{
    cJSON *o = envelope(job, false), *choices = cJSON_AddArrayToObject(o, "choices");
    for (int i = 0; i < n; i++) {
        cJSON *c = cJSON_CreateObject();
        cJSON_AddNumberToObject(c, "index", i);
        if (job->req.kind == SERVE_CHAT) {
            cJSON *m = cJSON_AddObjectToObject(c, "message");
            cJSON_AddStringToObject(m, "role", "assistant");
            if (ch[i].calls && !ch[i].content.len) cJSON_AddNullToObject(m, "content");
            else cJSON_AddItemToObject(m, "content", string_n(ch[i].content.p, ch[i].content.len));
            if (ch[i].calls) cJSON_AddItemToObject(m, "tool_calls", cJSON_Duplicate(ch[i].calls, 1));
            if (job->req.reasoning != SERVE_REASONING_NONE && ch[i].reasoning.len)
                cJSON_AddItemToObject(m, "reasoning_content", string_n(ch[i].reasoning.p, ch[i].reasoning.len));
        } else {
            cJSON_AddItemToObject(c, "text", string_n(ch[i].content.p, ch[i].content.len));
        }
        cJSON_AddItemToObject(c, "logprobs", logprobs_json(job, job->req.logprobs ? cJSON_Duplicate(ch[i].lp, 1) : NULL));
        cJSON_AddStringToObject(c, "finish_reason", ch[i].finish ? ch[i].finish : "stop");
        cJSON_AddItemToArray(choices, c);
    }
    cJSON_AddItemToObject(o, "usage", usage_json(job));
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

static bool add_event(textgen_buf *out, cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    bool ok = s && textgen_buf_add(out, "data: ", 6) && textgen_buf_add(out, s, strlen(s)) &&
              textgen_buf_add(out, "\n\n", 2);
    free(s);
    return ok;
}

bool serve_sse_chunk(textgen_buf *out, serve_job *job, bool first, bool finish)
{
    bool chat = job->req.kind == SERVE_CHAT;
    if (!first && !finish && !job->content.len && !job->reasoning.len && !job->lp && !job->calls) return true;
    cJSON *o = envelope(job, true), *choices = cJSON_AddArrayToObject(o, "choices"), *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", job->choice);
    if (chat) {
        cJSON *d = cJSON_AddObjectToObject(c, "delta");
        if (first) {
            cJSON_AddStringToObject(d, "role", "assistant");
            cJSON_AddStringToObject(d, "content", "");
        }
        if (job->reasoning.len) cJSON_AddItemToObject(d, "reasoning_content", string_n(job->reasoning.p, job->reasoning.len));
        if (job->content.len) cJSON_AddItemToObject(d, "content", string_n(job->content.p, job->content.len));
        if (job->calls) {
            cJSON_AddItemToObject(d, "tool_calls", job->calls);
            job->calls = NULL;
        }
    } else {
        cJSON_AddItemToObject(c, "text", string_n(job->content.p, job->content.len));
    }
    cJSON_AddItemToObject(c, "logprobs", logprobs_json(job, job->lp));
    job->lp = NULL;
    job->content.len = job->reasoning.len = 0;
    if (finish) cJSON_AddStringToObject(c, "finish_reason", serve_job_finish_reason(job));
    else cJSON_AddNullToObject(c, "finish_reason");
    cJSON_AddItemToArray(choices, c);
    return add_event(out, o);
}

bool serve_sse_usage(textgen_buf *out, const serve_job *job)
{
    cJSON *o = envelope(job, true);
    cJSON_AddArrayToObject(o, "choices");
    cJSON_AddItemToObject(o, "usage", usage_json(job));
    return add_event(out, o);
}

char *serve_json_models(const serve_engine *e)
{
    cJSON *o = cJSON_CreateObject(), *data;
    cJSON_AddStringToObject(o, "object", "list");
    data = cJSON_AddArrayToObject(o, "data");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", e->alias);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)time(NULL));
    cJSON_AddStringToObject(m, "owned_by", "lmq");
    cJSON_AddNumberToObject(m, "context_length", e->n_ctx);
    cJSON_AddItemToArray(data, m);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

char *serve_json_health(serve_engine *e)
{
    int busy, waiting;
    serve_engine_counts(e, &busy, &waiting);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "status", serve_engine_stopping(e) ? "stopping" : "ok");
    cJSON_AddNumberToObject(o, "slots_total", e->n_slots);
    cJSON_AddNumberToObject(o, "slots_idle", e->n_slots - busy);
    cJSON_AddNumberToObject(o, "queue", waiting);
    pthread_mutex_lock(&e->mu);
    cJSON_AddNumberToObject(o, "requests_served", (double)e->n_served);
    cJSON_AddNumberToObject(o, "requests_cancelled", (double)e->n_cancelled);
    pthread_mutex_unlock(&e->mu);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}
