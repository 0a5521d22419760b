/* lmq serve: the Responses API (POST /v1/responses). A request is turned
 * into the chat request it means (instructions, the stored conversation of
 * previous_response_id, input items, function tools) and runs through the
 * chat path; the output is folded into Responses items (message,
 * function_call) and, when streamed, into its typed events. Conversations
 * are kept in memory for previous_response_id: at most
 * LMQ_SERVE_RESP_STORE_MAX, each for LMQ_SERVE_RESP_STORE_TTL_S. */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"

/* ---------------------------------------------------------------- store */

typedef struct stored {
    char id[48];
    char *messages;   /* JSON text: the chat messages up to and including the reply */
    double t;
} stored;

static stored store[LMQ_SERVE_RESP_STORE_MAX];
static pthread_mutex_t store_mu = PTHREAD_MUTEX_INITIALIZER;

static void store_put(const char *id, char *messages)
{
    pthread_mutex_lock(&store_mu);
    double now = lmq_time_s();
    stored *slot = &store[0];
    for (int i = 0; i < LMQ_SERVE_RESP_STORE_MAX; i++) {
        stored *s = &store[i];
        if (s->messages && now - s->t > LMQ_SERVE_RESP_STORE_TTL_S) {
            free(s->messages);
            s->messages = NULL;
        }
        if (!s->messages || s->t < slot->t) slot = s; /* an empty place, else the oldest */
        if (!slot->messages) break;
    }
    free(slot->messages);
    snprintf(slot->id, sizeof slot->id, "%s", id);
    slot->messages = messages;
    slot->t = now;
    pthread_mutex_unlock(&store_mu);
}

/* A copy of the stored messages (a cJSON array), or NULL when unknown or expired. */
static cJSON *store_get(const char *id)
{
    cJSON *m = NULL;
    pthread_mutex_lock(&store_mu);
    double now = lmq_time_s();
    for (int i = 0; i < LMQ_SERVE_RESP_STORE_MAX; i++)
        if (store[i].messages && !strcmp(store[i].id, id) && now - store[i].t <= LMQ_SERVE_RESP_STORE_TTL_S)
            m = cJSON_Parse(store[i].messages);
    pthread_mutex_unlock(&store_mu);
    return m;
}

/* ---------------------------------------------------------------- request */

static bool bad(serve_error *err, const char *param, const char *msg)
{
    serve_error_set(err, 400, "invalid_request_error", NULL, param, "%s", msg);
    return false;
}

/* The text of a message item's content: a string or a list of text parts. */
static char *item_text(const cJSON *c)
{
    if (cJSON_IsString(c)) return strdup(c->valuestring);
    if (!cJSON_IsArray(c)) return NULL;
    textgen_buf b = {0};
    textgen_buf_add(&b, "", 0);
    const cJSON *p;
    cJSON_ArrayForEach(p, c) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "text");
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(p, "type");
        if (!cJSON_IsString(t) || !cJSON_IsString(ty) || !strstr(ty->valuestring, "text")) {
            free(b.p);
            return NULL;
        }
        textgen_buf_add(&b, t->valuestring, strlen(t->valuestring));
    }
    return b.p;
}

/* Appends the input items to msgs as chat messages. */
static bool add_input(cJSON *msgs, const cJSON *input, serve_error *err)
{
    if (cJSON_IsString(input)) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "user");
        cJSON_AddStringToObject(m, "content", input->valuestring);
        cJSON_AddItemToArray(msgs, m);
        return true;
    }
    if (!cJSON_IsArray(input)) return bad(err, "input", "'input' must be a string or a list of items");
    const cJSON *it;
    cJSON_ArrayForEach(it, input) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(it, "type");
        const char *ty = cJSON_IsString(type) ? type->valuestring : "message";
        if (!strcmp(ty, "message")) {
            const cJSON *role = cJSON_GetObjectItemCaseSensitive(it, "role");
            char *text = item_text(cJSON_GetObjectItemCaseSensitive(it, "content"));
            if (!cJSON_IsString(role) || !text) {
                free(text);
                return bad(err, "input", "a message item needs a string 'role' and text content");
            }
            cJSON *m = cJSON_CreateObject();
            cJSON_AddStringToObject(m, "role", !strcmp(role->valuestring, "developer") ? "system" : role->valuestring);
            cJSON_AddStringToObject(m, "content", text);
            free(text);
            cJSON_AddItemToArray(msgs, m);
        } else if (!strcmp(ty, "function_call")) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "call_id");
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
            const cJSON *args = cJSON_GetObjectItemCaseSensitive(it, "arguments");
            if (!cJSON_IsString(id) || !cJSON_IsString(name) || !cJSON_IsString(args))
                return bad(err, "input", "a function_call item needs string 'call_id', 'name' and 'arguments'");
            /* calls that follow an assistant message belong to it */
            cJSON *last = cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1);
            const cJSON *lr = cJSON_GetObjectItemCaseSensitive(last, "role");
            if (!last || !cJSON_IsString(lr) || strcmp(lr->valuestring, "assistant")) {
                last = cJSON_CreateObject();
                cJSON_AddStringToObject(last, "role", "assistant");
                cJSON_AddStringToObject(last, "content", "");
                cJSON_AddItemToArray(msgs, last);
            }
            cJSON *calls = cJSON_GetObjectItemCaseSensitive(last, "tool_calls");
            if (!calls) calls = cJSON_AddArrayToObject(last, "tool_calls");
            cJSON *c = cJSON_CreateObject(), *f = cJSON_CreateObject();
            cJSON_AddStringToObject(c, "id", id->valuestring);
            cJSON_AddStringToObject(c, "type", "function");
            cJSON_AddStringToObject(f, "name", name->valuestring);
            cJSON_AddStringToObject(f, "arguments", args->valuestring);
            cJSON_AddItemToObject(c, "function", f);
            cJSON_AddItemToArray(calls, c);
        } else if (!strcmp(ty, "function_call_output")) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "call_id");
            const cJSON *out = cJSON_GetObjectItemCaseSensitive(it, "output");
            if (!cJSON_IsString(id) || !out) return bad(err, "input", "a function_call_output item needs 'call_id' and 'output'");
            char *text = cJSON_IsString(out) ? strdup(out->valuestring) : item_text(out);
            if (!text) text = cJSON_PrintUnformatted(out);
            cJSON *m = cJSON_CreateObject();
            cJSON_AddStringToObject(m, "role", "tool");
            cJSON_AddStringToObject(m, "tool_call_id", id->valuestring);
            cJSON_AddStringToObject(m, "content", text ? text : "");
            free(text);
            cJSON_AddItemToArray(msgs, m);
        } else if (!strcmp(ty, "reasoning")) {
            /* the model's earlier reasoning: not given back to the template */
        } else {
            char msg[160];
            snprintf(msg, sizeof msg, "input item type '%.60s' is not supported (message, function_call, function_call_output)", ty);
            return bad(err, "input", msg);
        }
    }
    return true;
}

static void copy_field(cJSON *dst, const char *dname, const cJSON *src, const char *sname)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(src, sname);
    if (f && !cJSON_IsNull(f)) cJSON_AddItemToObject(dst, dname, cJSON_Duplicate(f, 1));
}

bool serve_resp_parse(serve_engine *e, const char *body, size_t len, serve_request *r, serve_resp *rs,
                      serve_error *err)
{
    memset(rs, 0, sizeof *rs);
    memset(err, 0, sizeof *err);
    cJSON *root = cJSON_ParseWithLength(body, len), *chat = NULL, *msgs = NULL;
    bool ok = false;
    if (!cJSON_IsObject(root)) {
        bad(err, NULL, "the request body must be a JSON object");
        goto out;
    }
    const cJSON *prev = cJSON_GetObjectItemCaseSensitive(root, "previous_response_id");
    if (prev && !cJSON_IsNull(prev)) {
        if (!cJSON_IsString(prev)) {
            bad(err, "previous_response_id", "'previous_response_id' must be a string");
            goto out;
        }
        if (!(msgs = store_get(prev->valuestring))) {
            serve_error_set(err, 400, "invalid_request_error", "previous_response_not_found", "previous_response_id",
                            "previous response '%.60s' is not known (this server keeps %d responses for %d s)",
                            prev->valuestring, LMQ_SERVE_RESP_STORE_MAX, LMQ_SERVE_RESP_STORE_TTL_S);
            goto out;
        }
        snprintf(rs->previous, sizeof rs->previous, "%s", prev->valuestring);
    } else {
        msgs = cJSON_CreateArray();
    }
    /* instructions apply to this request only: first, as a system message */
    const cJSON *ins = cJSON_GetObjectItemCaseSensitive(root, "instructions");
    if (cJSON_IsString(ins)) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "system");
        cJSON_AddStringToObject(m, "content", ins->valuestring);
        cJSON *first = cJSON_GetArrayItem(msgs, 0);
        const cJSON *fr = cJSON_GetObjectItemCaseSensitive(first, "role");
        if (cJSON_IsString(fr) && !strcmp(fr->valuestring, "system")) cJSON_DeleteItemFromArray(msgs, 0);
        cJSON_InsertItemInArray(msgs, 0, m);
    }
    if (!add_input(msgs, cJSON_GetObjectItemCaseSensitive(root, "input"), err)) goto out;
    chat = cJSON_CreateObject();
    cJSON_AddItemToObject(chat, "messages", cJSON_Duplicate(msgs, 1));
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools"), *t;
    if (cJSON_IsArray(tools) && cJSON_GetArraySize(tools) > 0) {
        cJSON *ct = cJSON_AddArrayToObject(chat, "tools");
        cJSON_ArrayForEach(t, tools) {
            const cJSON *ty = cJSON_GetObjectItemCaseSensitive(t, "type");
            if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "function")) {
                bad(err, "tools", "only function tools are supported");
                goto out;
            }
            cJSON *o = cJSON_CreateObject(), *f = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "type", "function");
            copy_field(f, "name", t, "name");
            copy_field(f, "description", t, "description");
            copy_field(f, "parameters", t, "parameters");
            cJSON_AddItemToObject(o, "function", f);
            cJSON_AddItemToArray(ct, o);
        }
    } else if (tools && !cJSON_IsNull(tools) && !cJSON_IsArray(tools)) {
        bad(err, "tools", "'tools' must be a list");
        goto out;
    }
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "tool_choice");
    if (cJSON_IsObject(tc)) {
        cJSON *o = cJSON_CreateObject(), *f = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "type", "function");
        copy_field(f, "name", tc, "name");
        cJSON_AddItemToObject(o, "function", f);
        cJSON_AddItemToObject(chat, "tool_choice", o);
    } else {
        copy_field(chat, "tool_choice", root, "tool_choice");
    }
    /* text.format {type: "json_schema", name, schema, strict} is chat's
     * response_format with the schema one level up */
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "text"), "format");
    if (cJSON_IsObject(fmt)) {
        const cJSON *ft = cJSON_GetObjectItemCaseSensitive(fmt, "type");
        cJSON *rf = cJSON_AddObjectToObject(chat, "response_format");
        copy_field(rf, "type", fmt, "type");
        if (cJSON_IsString(ft) && !strcmp(ft->valuestring, "json_schema")) {
            cJSON *js = cJSON_AddObjectToObject(rf, "json_schema");
            copy_field(js, "name", fmt, "name");
            copy_field(js, "schema", fmt, "schema");
        }
    }
    copy_field(chat, "parallel_tool_calls", root, "parallel_tool_calls");
    copy_field(chat, "max_tokens", root, "max_output_tokens");
    copy_field(chat, "temperature", root, "temperature");
    copy_field(chat, "top_p", root, "top_p");
    copy_field(chat, "seed", root, "seed");
    copy_field(chat, "stop", root, "stop"); /* an lmq extension, as in chat */
    copy_field(chat, "stream", root, "stream");
    copy_field(chat, "chat_template_kwargs", root, "chat_template_kwargs");
    const cJSON *reasoning = cJSON_GetObjectItemCaseSensitive(root, "reasoning");
    if (cJSON_IsObject(reasoning)) copy_field(chat, "reasoning_effort", reasoning, "effort");
    char *cb = cJSON_PrintUnformatted(chat);
    if (!cb) {
        serve_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
        goto out;
    }
    ok = serve_request_parse(e, SERVE_CHAT, cb, strlen(cb), r, err);
    free(cb);
    if (!ok) goto out;
    static _Atomic unsigned long long serial;
    snprintf(rs->id, sizeof rs->id, "resp_%llx%llx", (unsigned long long)time(NULL), atomic_fetch_add(&serial, 1) + 1);
    rs->history = msgs;
    msgs = NULL;
    rs->echo = cJSON_CreateObject();
    copy_field(rs->echo, "instructions", root, "instructions");
    copy_field(rs->echo, "tools", root, "tools");
    copy_field(rs->echo, "temperature", root, "temperature");
    copy_field(rs->echo, "top_p", root, "top_p");
    copy_field(rs->echo, "max_output_tokens", root, "max_output_tokens");
    if (cJSON_IsObject(fmt)) copy_field(rs->echo, "text", root, "text");
out:
    cJSON_Delete(msgs);
    cJSON_Delete(chat);
    cJSON_Delete(root);
    return ok;
}

void serve_resp_free(serve_resp *rs)
{
    cJSON_Delete(rs->history);
    cJSON_Delete(rs->echo);
    cJSON_Delete(rs->calls);
    free(rs->text.p);
    free(rs->args.p);
    memset(rs, 0, sizeof *rs);
}

/* ---------------------------------------------------------------- output */

static void event(textgen_buf *out, serve_resp *rs, const char *type, cJSON *o)
{
    cJSON_AddStringToObject(o, "type", type);
    cJSON_AddNumberToObject(o, "sequence_number", rs->seq++);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s) return;
    textgen_buf_add(out, "event: ", 7);
    textgen_buf_add(out, type, strlen(type));
    textgen_buf_add(out, "\ndata: ", 7);
    textgen_buf_add(out, s, strlen(s));
    textgen_buf_add(out, "\n\n", 2);
    free(s);
}

static cJSON *message_item(const serve_resp *rs, const char *text, size_t n, bool done)
{
    cJSON *it = cJSON_CreateObject();
    cJSON_AddStringToObject(it, "type", "message");
    char id[64];
    snprintf(id, sizeof id, "msg_%s", rs->id + 5);
    cJSON_AddStringToObject(it, "id", id);
    cJSON_AddStringToObject(it, "status", done ? "completed" : "in_progress");
    cJSON_AddStringToObject(it, "role", "assistant");
    cJSON *content = cJSON_AddArrayToObject(it, "content");
    if (done) {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "type", "output_text");
        char *t = malloc(n + 1);
        if (t) {
            memcpy(t, text, n);
            t[n] = 0;
        }
        cJSON_AddStringToObject(p, "text", t ? t : "");
        free(t);
        cJSON_AddArrayToObject(p, "annotations");
        cJSON_AddItemToArray(content, p);
    }
    return it;
}

static cJSON *call_item(const cJSON *call, bool done)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(call, "function");
    const char *cid = cJSON_GetObjectItemCaseSensitive(call, "id")->valuestring;
    cJSON *it = cJSON_CreateObject();
    char id[96];
    snprintf(id, sizeof id, "fc_%s", cid + (strncmp(cid, "call_", 5) ? 0 : 5));
    cJSON_AddStringToObject(it, "type", "function_call");
    cJSON_AddStringToObject(it, "id", id);
    cJSON_AddStringToObject(it, "call_id", cid);
    cJSON_AddItemToObject(it, "name", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(f, "name"), 1));
    if (done) cJSON_AddItemToObject(it, "arguments", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(f, "arguments"), 1));
    else cJSON_AddStringToObject(it, "arguments", "");
    cJSON_AddStringToObject(it, "status", done ? "completed" : "in_progress");
    return it;
}

/* Closes the open output item (stream events). */
static void close_item(textgen_buf *out, serve_resp *rs)
{
    if (rs->open == SERVE_RESP_OPEN_MSG) {
        char id[64];
        snprintf(id, sizeof id, "msg_%s", rs->id + 5);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "item_id", id);
        cJSON_AddNumberToObject(o, "output_index", rs->out_index);
        cJSON_AddNumberToObject(o, "content_index", 0);
        cJSON_AddStringToObject(o, "text", rs->text.p ? rs->text.p : "");
        event(out, rs, "response.output_text.done", o);
        cJSON *it = message_item(rs, rs->text.p, rs->text.len, true);
        o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "item_id", id);
        cJSON_AddNumberToObject(o, "output_index", rs->out_index);
        cJSON_AddNumberToObject(o, "content_index", 0);
        cJSON_AddItemToObject(o, "part", cJSON_Duplicate(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(it, "content"), 0), 1));
        event(out, rs, "response.content_part.done", o);
        o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "output_index", rs->out_index);
        cJSON_AddItemToObject(o, "item", it);
        event(out, rs, "response.output_item.done", o);
        rs->out_index++;
    } else if (rs->open == SERVE_RESP_OPEN_CALL) {
        const cJSON *call = cJSON_GetArrayItem(rs->calls, cJSON_GetArraySize(rs->calls) - 1);
        cJSON *it = call_item(call, true);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "item_id", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(it, "id"), 1));
        cJSON_AddNumberToObject(o, "output_index", rs->out_index);
        cJSON_AddItemToObject(o, "arguments", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(it, "arguments"), 1));
        event(out, rs, "response.function_call_arguments.done", o);
        o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "output_index", rs->out_index);
        cJSON_AddItemToObject(o, "item", it);
        event(out, rs, "response.output_item.done", o);
        rs->out_index++;
    }
    rs->open = SERVE_RESP_OPEN_NONE;
}

void serve_resp_step(serve_resp *rs, serve_job *job, textgen_buf *out)
{
    /* calls first close the message before them; text after calls is dropped from the stream's order */
    if (job->content.len) {
        if (out && rs->open != SERVE_RESP_OPEN_MSG && !rs->calls) {
            close_item(out, rs);
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "output_index", rs->out_index);
            cJSON_AddItemToObject(o, "item", message_item(rs, NULL, 0, false));
            event(out, rs, "response.output_item.added", o);
            o = cJSON_CreateObject();
            char id[64];
            snprintf(id, sizeof id, "msg_%s", rs->id + 5);
            cJSON_AddStringToObject(o, "item_id", id);
            cJSON_AddNumberToObject(o, "output_index", rs->out_index);
            cJSON_AddNumberToObject(o, "content_index", 0);
            cJSON *p = cJSON_AddObjectToObject(o, "part");
            cJSON_AddStringToObject(p, "type", "output_text");
            cJSON_AddStringToObject(p, "text", "");
            cJSON_AddArrayToObject(p, "annotations");
            event(out, rs, "response.content_part.added", o);
            rs->open = SERVE_RESP_OPEN_MSG;
        }
        if (!rs->calls) {
            textgen_buf_add(&rs->text, job->content.p, job->content.len);
            if (out) {
                cJSON *o = cJSON_CreateObject();
                char id[64];
                snprintf(id, sizeof id, "msg_%s", rs->id + 5);
                cJSON_AddStringToObject(o, "item_id", id);
                cJSON_AddNumberToObject(o, "output_index", rs->out_index);
                cJSON_AddNumberToObject(o, "content_index", 0);
                cJSON_AddStringToObject(o, "delta", job->content.p);
                cJSON_AddArrayToObject(o, "logprobs");
                event(out, rs, "response.output_text.delta", o);
            }
        }
        job->content.len = 0;
    }
    const cJSON *d;
    cJSON_ArrayForEach(d, job->calls) {
        bool begin = cJSON_GetObjectItemCaseSensitive(d, "id") != NULL;
        cJSON *one = cJSON_CreateArray();
        cJSON_AddItemToArray(one, cJSON_Duplicate(d, 1));
        if (begin && out) close_item(out, rs);
        serve_calls_merge(&rs->calls, one);
        cJSON_Delete(one);
        if (!out) continue;
        const cJSON *call = cJSON_GetArrayItem(rs->calls, cJSON_GetArraySize(rs->calls) - 1);
        if (begin) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "output_index", rs->out_index);
            cJSON_AddItemToObject(o, "item", call_item(call, false));
            event(out, rs, "response.output_item.added", o);
            rs->open = SERVE_RESP_OPEN_CALL;
        } else {
            cJSON *it = call_item(call, false), *o = cJSON_CreateObject();
            cJSON_AddItemToObject(o, "item_id", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(it, "id"), 1));
            cJSON_Delete(it);
            cJSON_AddNumberToObject(o, "output_index", rs->out_index);
            cJSON_AddItemToObject(o, "delta",
                                  cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(d, "function"), "arguments"), 1));
            event(out, rs, "response.function_call_arguments.delta", o);
        }
    }
    cJSON_Delete(job->calls);
    job->calls = NULL;
    job->reasoning.len = 0; /* reasoning is not returned by this endpoint yet */
}

/* The response object; status from the job (NULL job: in progress). */
static cJSON *response_obj(const serve_resp *rs, const serve_job *job, bool done)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", rs->id);
    cJSON_AddStringToObject(o, "object", "response");
    cJSON_AddNumberToObject(o, "created_at", (double)job->req.created);
    bool cut = done && job->st.stop != LMQ_GEN_STOP_EOG && job->st.stop != LMQ_GEN_STOP_STRING;
    cJSON_AddStringToObject(o, "status", !done ? "in_progress" : cut ? "incomplete" : "completed");
    cJSON_AddNullToObject(o, "error");
    if (cut) cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "incomplete_details"), "reason", "max_output_tokens");
    else cJSON_AddNullToObject(o, "incomplete_details");
    cJSON_AddStringToObject(o, "model", job->e->alias);
    cJSON *output = cJSON_AddArrayToObject(o, "output");
    if (done) {
        if (rs->text.len || !rs->calls) cJSON_AddItemToArray(output, message_item(rs, rs->text.p, rs->text.len, true));
        const cJSON *c;
        cJSON_ArrayForEach(c, rs->calls) cJSON_AddItemToArray(output, call_item(c, true));
    }
    const cJSON *f;
    cJSON_ArrayForEach(f, rs->echo) cJSON_AddItemToObject(o, f->string, cJSON_Duplicate(f, 1));
    if (!cJSON_GetObjectItemCaseSensitive(o, "tools")) cJSON_AddArrayToObject(o, "tools");
    cJSON_AddBoolToObject(o, "parallel_tool_calls", job->req.parallel_tool_calls);
    if (rs->previous[0]) cJSON_AddStringToObject(o, "previous_response_id", rs->previous);
    else cJSON_AddNullToObject(o, "previous_response_id");
    if (!cJSON_GetObjectItemCaseSensitive(o, "text"))
        cJSON_AddStringToObject(cJSON_AddObjectToObject(cJSON_AddObjectToObject(o, "text"), "format"), "type", "text");
    cJSON_AddBoolToObject(o, "store", true);
    if (done) {
        cJSON *u = cJSON_AddObjectToObject(o, "usage");
        int in = (int)job->req.n_toks, ot = job->n_gen_total + job->st.n_gen;
        cJSON_AddNumberToObject(u, "input_tokens", in);
        cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "input_tokens_details"), "cached_tokens", job->n_reused);
        cJSON_AddNumberToObject(u, "output_tokens", ot);
        cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "output_tokens_details"), "reasoning_tokens", 0);
        cJSON_AddNumberToObject(u, "total_tokens", in + ot);
    }
    return o;
}

void serve_resp_begin(serve_resp *rs, const serve_job *job, textgen_buf *out)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "response", response_obj(rs, job, false));
    event(out, rs, "response.created", o);
    o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "response", response_obj(rs, job, false));
    event(out, rs, "response.in_progress", o);
}

/* Stores the conversation with the reply for previous_response_id. */
static void remember(serve_resp *rs)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "assistant");
    char *t = rs->text.p ? rs->text.p : "";
    cJSON_AddStringToObject(m, "content", t);
    if (rs->calls) cJSON_AddItemToObject(m, "tool_calls", cJSON_Duplicate(rs->calls, 1));
    cJSON_AddItemToArray(rs->history, m);
    char *s = cJSON_PrintUnformatted(rs->history);
    if (s) store_put(rs->id, s);
}

char *serve_resp_end(serve_resp *rs, const serve_job *job, textgen_buf *out)
{
    if (out) close_item(out, rs);
    remember(rs);
    cJSON *r = response_obj(rs, job, true);
    if (out) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "response", r);
        event(out, rs, "response.completed", o);
        return NULL;
    }
    char *s = cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    return s;
}
