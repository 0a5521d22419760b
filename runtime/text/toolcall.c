/* toolcall.c — streaming parser of the tool calls a model writes, per
 * family (lmq_rt_chat.h, "tool calls"): Hermes/Qwen `<tool_call>{...}
 * </tool_call>` blocks between content, Gemma 4's `<|tool_call>call:N{...}
 * <tool_call|>` blocks (its value notation turned into JSON), Mistral `[TOOL_CALLS][{...}]` and
 * Llama 3.x's bare JSON object that make up the rest of the output. Tags are
 * found with at most MAX_TAG - 1 bytes held back, a call's JSON is kept in
 * a bounded buffer, so the events do not depend on where the input was cut
 * and memory stays bounded. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_rt_chat.h"

#define OPEN_TAG "<tool_call>"
#define CLOSE_TAG "</tool_call>"
#define MISTRAL_TAG "[TOOL_CALLS]"
#define PYTHON_TAG "<|python_tag|>"
#define GEMMA_OPEN "<|tool_call>"
#define GEMMA_CLOSE "<tool_call|>"
#define GEMMA_QUOTE "<|\"|>"
#define MAX_TAG 16

enum state {
    ST_START,   /* nothing but whitespace yet */
    ST_TEXT,    /* content */
    ST_CALL,    /* inside <tool_call>, or the JSON that ends the output */
};

struct lmq_toolcall {
    lmq_tool_format fmt;
    lmq_toolcall_fn fn;
    void *user;
    enum state state;
    bool tail_json;       /* ST_CALL holds the rest of the output (Mistral, Llama 3.x) */
    char hold[MAX_TAG];
    size_t n_hold;
    char *buf;            /* (LMQ_TOOLCALL_MAX_JSON) the JSON of the current call */
    size_t n_buf;
    bool overflow;
    int32_t n_calls;
    char pre[64];         /* whitespace held in ST_START */
    size_t n_pre;
};

lmq_tool_format lmq_tool_format_guess(const char *src, size_t len)
{
    if (!src) return LMQ_TOOL_FORMAT_NONE;
    if (lmq_harmony_is_template(src, len)) return LMQ_TOOL_FORMAT_HARMONY;
    if (memmem(src, len, GEMMA_OPEN, sizeof GEMMA_OPEN - 1)) return LMQ_TOOL_FORMAT_GEMMA4;
    if (memmem(src, len, OPEN_TAG, sizeof OPEN_TAG - 1)) return LMQ_TOOL_FORMAT_HERMES;
    if (memmem(src, len, MISTRAL_TAG, sizeof MISTRAL_TAG - 1)) return LMQ_TOOL_FORMAT_MISTRAL;
    if (memmem(src, len, "<|python_tag|>", 14) || memmem(src, len, "ipython", 7)) return LMQ_TOOL_FORMAT_LLAMA3;
    /* a template that says nothing about tools: the generic format, which the
     * server describes to the model itself */
    return LMQ_TOOL_FORMAT_HERMES;
}

const char *lmq_tool_format_str(lmq_tool_format f)
{
    static const char *names[LMQ_TOOL_FORMAT_COUNT] = {"none", "hermes", "mistral", "llama3", "harmony", "gemma4"};
    return (unsigned)f < LMQ_TOOL_FORMAT_COUNT ? names[f] : "?";
}

lmq_status lmq_toolcall_new(lmq_tool_format fmt, lmq_toolcall_fn fn, void *user, lmq_toolcall **out)
{
    if (!out || !fn || (unsigned)fmt >= LMQ_TOOL_FORMAT_COUNT || fmt == LMQ_TOOL_FORMAT_HARMONY)
        return lmq_error(LMQ_ERR_INVALID_ARG, "tool-call parser: bad argument");
    lmq_toolcall *t = calloc(1, sizeof *t);
    if (!t || !(t->buf = malloc(LMQ_TOOLCALL_MAX_JSON))) {
        free(t);
        return lmq_error(LMQ_ERR_NOMEM, "tool-call parser");
    }
    t->fmt = fmt;
    t->fn = fn;
    t->user = user;
    *out = t;
    return LMQ_OK;
}

void lmq_toolcall_free(lmq_toolcall *t)
{
    if (!t) return;
    free(t->buf);
    free(t);
}

static void emit(lmq_toolcall *t, lmq_toolcall_event_kind k, const char *s, size_t n, const char *name)
{
    lmq_toolcall_event e = {.kind = k, .index = t->n_calls, .text = s, .len = n, .name = name};
    t->fn(t->user, &e);
}

static void content(lmq_toolcall *t, const char *s, size_t n)
{
    if (!n) return;
    if (t->state == ST_START) {
        /* whitespace before a possible call is held (up to 64 bytes; more
         * makes it content, whatever the cuts), then given as content */
        size_t i = 0;
        while (i < n && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) i++;
        if (t->n_pre + i > sizeof t->pre) {
            t->state = ST_TEXT;
            if (t->n_pre) emit(t, LMQ_TOOLCALL_TEXT, t->pre, t->n_pre, NULL);
            t->n_pre = 0;
            emit(t, LMQ_TOOLCALL_TEXT, s, n, NULL);
            return;
        }
        if (i == n) {
            memcpy(t->pre + t->n_pre, s, n);
            t->n_pre += n;
            return;
        }
        /* Llama 3.x: an output that is a JSON object is a call */
        if (t->fmt == LMQ_TOOL_FORMAT_LLAMA3 && s[i] == '{') {
            t->state = ST_CALL;
            t->tail_json = true;
            s += i;
            n -= i;
            goto call_bytes;
        }
        t->state = ST_TEXT;
        if (t->n_pre) emit(t, LMQ_TOOLCALL_TEXT, t->pre, t->n_pre, NULL);
        t->n_pre = 0;
    }
    if (t->state == ST_TEXT) {
        emit(t, LMQ_TOOLCALL_TEXT, s, n, NULL);
        return;
    }
call_bytes:
    if (t->n_buf + n > LMQ_TOOLCALL_MAX_JSON) {
        t->overflow = true;
        return;
    }
    memcpy(t->buf + t->n_buf, s, n);
    t->n_buf += n;
}

/* Emits one call from a parsed object {name, arguments|parameters}; false
 * when it does not have that shape. */
static bool call_from(lmq_toolcall *t, const cJSON *o)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(o, "arguments");
    if (!args) args = cJSON_GetObjectItemCaseSensitive(o, "parameters");
    if (!cJSON_IsObject(o) || !cJSON_IsString(name) || !name->valuestring[0]) return false;
    char *a = NULL;
    if (cJSON_IsString(args)) a = strdup(args->valuestring); /* already a JSON text */
    else a = args ? cJSON_PrintUnformatted(args) : strdup("{}");
    if (!a) return false;
    emit(t, LMQ_TOOLCALL_BEGIN, NULL, 0, name->valuestring);
    emit(t, LMQ_TOOLCALL_ARGS, a, strlen(a), name->valuestring);
    emit(t, LMQ_TOOLCALL_END, NULL, 0, name->valuestring);
    free(a);
    t->n_calls++;
    return true;
}

/* ---- Gemma 4's notation -> JSON ---- */

typedef struct gbuf {
    char *p;
    size_t n, cap;
    bool bad;
} gbuf;

static void gput(gbuf *b, const char *s, size_t n)
{
    if (b->bad) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 256;
        while (nc < b->n + n + 1) nc *= 2;
        char *p = nc <= 2 * (size_t)LMQ_TOOLCALL_MAX_JSON + 16 ? realloc(b->p, nc) : NULL;
        if (!p) {
            b->bad = true;
            return;
        }
        b->p = p;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void gstr(gbuf *b, const char *s, size_t n)
{
    gput(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char e[8];
        if (c == '"' || c == '\\') {
            e[0] = '\\';
            e[1] = (char)c;
            gput(b, e, 2);
        } else if (c == '\n' || c == '\t' || c == '\r') {
            e[0] = '\\';
            e[1] = c == '\n' ? 'n' : c == '\t' ? 't' : 'r';
            gput(b, e, 2);
        } else if (c < 0x20) {
            snprintf(e, sizeof e, "\\u%04x", c);
            gput(b, e, 6);
        } else {
            gput(b, (const char *)&c, 1);
        }
    }
    gput(b, "\"", 1);
}

static void gskip_ws(const char *s, size_t n, size_t *i)
{
    while (*i < n && (s[*i] == ' ' || s[*i] == '\n' || s[*i] == '\r' || s[*i] == '\t')) (*i)++;
}

/* One value at s[*i]; false when it is not Gemma's notation. */
static bool gvalue(const char *s, size_t n, size_t *i, gbuf *b, int depth)
{
    const size_t ql = sizeof GEMMA_QUOTE - 1;
    gskip_ws(s, n, i);
    if (*i >= n || depth > 64) return false;
    if (n - *i >= ql && !memcmp(s + *i, GEMMA_QUOTE, ql)) { /* <|"|>text<|"|> */
        const char *e = memmem(s + *i + ql, n - *i - ql, GEMMA_QUOTE, ql);
        if (!e) return false;
        gstr(b, s + *i + ql, (size_t)(e - (s + *i + ql)));
        *i = (size_t)(e - s) + ql;
        return true;
    }
    char open = s[*i];
    if (open == '{' || open == '[') {
        (*i)++;
        gput(b, &open, 1);
        gskip_ws(s, n, i);
        char close = open == '{' ? '}' : ']';
        if (*i < n && s[*i] == close) {
            (*i)++;
            gput(b, &close, 1);
            return true;
        }
        for (bool first = true;; first = false) {
            if (!first) gput(b, ",", 1);
            if (open == '{') { /* a key: bare or quoted */
                gskip_ws(s, n, i);
                if (n - *i >= ql && !memcmp(s + *i, GEMMA_QUOTE, ql)) {
                    if (!gvalue(s, n, i, b, depth + 1)) return false;
                } else {
                    size_t k = *i;
                    while (*i < n && s[*i] != ':' && s[*i] != ',' && s[*i] != '}' && s[*i] != '{') (*i)++;
                    size_t e = *i;
                    while (e > k && (s[e - 1] == ' ' || s[e - 1] == '\n')) e--;
                    if (e == k) return false;
                    gstr(b, s + k, e - k);
                }
                gskip_ws(s, n, i);
                if (*i >= n || s[*i] != ':') return false;
                (*i)++;
                gput(b, ":", 1);
            }
            if (!gvalue(s, n, i, b, depth + 1)) return false;
            gskip_ws(s, n, i);
            if (*i < n && s[*i] == ',') {
                (*i)++;
                continue;
            }
            if (*i < n && s[*i] == close) {
                (*i)++;
                gput(b, &close, 1);
                return true;
            }
            return false;
        }
    }
    /* a bare number, true, false or null */
    size_t k = *i;
    while (*i < n && s[*i] != ',' && s[*i] != '}' && s[*i] != ']' && s[*i] != ' ' && s[*i] != '\n') (*i)++;
    if (*i == k) return false;
    gput(b, s + k, *i - k);
    return true;
}

/* A Gemma 4 call body "call:NAME{...}" -> its name and JSON arguments. */
static bool gemma_call(lmq_toolcall *t)
{
    const char *s = t->buf;
    size_t n = t->n_buf, i = 0;
    gskip_ws(s, n, &i);
    if (n - i < 5 || memcmp(s + i, "call:", 5)) return false;
    i += 5;
    size_t k = i;
    while (i < n && s[i] != '{') i++;
    if (i >= n || i == k || i - k > 256) return false;
    char name[257];
    memcpy(name, s + k, i - k);
    name[i - k] = 0;
    for (size_t j = 0; j < i - k; j++)
        if ((unsigned char)name[j] <= ' ' || name[j] == '<') return false; /* no controls, NUL or blanks */
    gbuf b = {0};
    bool ok = gvalue(s, n, &i, &b, 0);
    gskip_ws(s, n, &i);
    ok = ok && i == n && !b.bad;
    if (ok) {
        gput(&b, "", 1);
        cJSON *j = b.bad ? NULL : cJSON_ParseWithLength(b.p, b.n - 1); /* the conversion is JSON, or not a call */
        ok = cJSON_IsObject(j);
        cJSON_Delete(j);
    }
    if (ok) {
        emit(t, LMQ_TOOLCALL_BEGIN, NULL, 0, name);
        emit(t, LMQ_TOOLCALL_ARGS, b.p, b.n - 1, name);
        emit(t, LMQ_TOOLCALL_END, NULL, 0, name);
        t->n_calls++;
    }
    free(b.p);
    return ok;
}

/* The end of a call's JSON: calls, or (malformed) the raw text as content. */
static void close_call(lmq_toolcall *t, const char *open, const char *close)
{
    bool ok = false;
    cJSON *j = t->overflow || t->fmt == LMQ_TOOL_FORMAT_GEMMA4 ? NULL : cJSON_ParseWithLength(t->buf, t->n_buf);
    if (t->fmt == LMQ_TOOL_FORMAT_GEMMA4 && !t->overflow) ok = gemma_call(t);
    if (cJSON_IsArray(j) && cJSON_GetArraySize(j) > 0) {
        /* validate all first, so a bad array is content as a whole */
        const cJSON *it;
        ok = true;
        cJSON_ArrayForEach(it, j) ok = ok && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(it, "name"));
        if (ok) cJSON_ArrayForEach(it, j) call_from(t, it);
    } else if (cJSON_IsObject(j)) {
        ok = call_from(t, j);
    }
    cJSON_Delete(j);
    t->state = ok ? ST_START : ST_TEXT; /* whitespace between calls is not content */
    t->tail_json = false;
    if (!ok) {
        /* not a call: what the model wrote is content */
        if (open) emit(t, LMQ_TOOLCALL_TEXT, open, strlen(open), NULL);
        if (t->n_buf) emit(t, LMQ_TOOLCALL_TEXT, t->buf, t->n_buf, NULL);
        if (close) emit(t, LMQ_TOOLCALL_TEXT, close, strlen(close), NULL);
    }
    t->n_buf = 0;
    t->overflow = false;
}

/* A whole tag. */
static void tag(lmq_toolcall *t, const char *tg)
{
    size_t n = strlen(tg);
    if (t->fmt == LMQ_TOOL_FORMAT_HERMES && !strcmp(tg, OPEN_TAG) && t->state != ST_CALL) {
        t->n_pre = 0; /* whitespace before a call is not content */
        t->state = ST_CALL;
        t->n_buf = 0;
        return;
    }
    if (t->fmt == LMQ_TOOL_FORMAT_HERMES && !strcmp(tg, CLOSE_TAG) && t->state == ST_CALL) {
        close_call(t, OPEN_TAG, CLOSE_TAG);
        return;
    }
    if (t->fmt == LMQ_TOOL_FORMAT_GEMMA4 && !strcmp(tg, GEMMA_OPEN) && t->state != ST_CALL) {
        t->n_pre = 0;
        t->state = ST_CALL;
        t->n_buf = 0;
        return;
    }
    if (t->fmt == LMQ_TOOL_FORMAT_GEMMA4 && !strcmp(tg, GEMMA_CLOSE) && t->state == ST_CALL) {
        close_call(t, GEMMA_OPEN, GEMMA_CLOSE);
        return;
    }
    if (t->fmt == LMQ_TOOL_FORMAT_MISTRAL && !strcmp(tg, MISTRAL_TAG) && t->state != ST_CALL) {
        t->state = ST_CALL;
        t->tail_json = true;
        t->n_buf = 0;
        return;
    }
    if (t->fmt == LMQ_TOOL_FORMAT_LLAMA3 && !strcmp(tg, PYTHON_TAG) && t->state == ST_START) {
        t->state = ST_CALL;
        t->tail_json = true;
        t->n_buf = 0;
        return;
    }
    content(t, tg, n);
}

static const char *TAGS[] = {OPEN_TAG, CLOSE_TAG, MISTRAL_TAG, PYTHON_TAG, GEMMA_OPEN, GEMMA_CLOSE};

/* The tag a held prefix completes (or NULL), and whether it may still become one. */
static const char *match(const char *s, size_t n, bool *partial)
{
    *partial = false;
    for (size_t i = 0; i < sizeof TAGS / sizeof *TAGS; i++) {
        size_t l = strlen(TAGS[i]);
        if (n <= l && !memcmp(s, TAGS[i], n)) {
            if (n == l) return TAGS[i];
            *partial = true;
        }
    }
    return NULL;
}

lmq_status lmq_toolcall_push(lmq_toolcall *t, const char *s, size_t n)
{
    if (!t || (!s && n)) return lmq_error(LMQ_ERR_INVALID_ARG, "tool-call parser: NULL argument");
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (t->n_hold) {
            t->hold[t->n_hold++] = c;
            bool partial;
            const char *tg = match(t->hold, t->n_hold, &partial);
            if (tg) {
                t->n_hold = 0;
                tag(t, tg);
                run = i + 1;
            } else if (!partial) {
                char tmp[MAX_TAG];
                size_t h = t->n_hold - 1;
                memcpy(tmp, t->hold, h);
                t->n_hold = 0;
                content(t, tmp, h);
                run = i;
                i--;
            }
            continue;
        }
        if (c == '<' || c == '[') {
            content(t, s + run, i - run);
            t->hold[t->n_hold++] = c;
            run = i + 1;
        }
    }
    if (!t->n_hold && run < n) content(t, s + run, n - run);
    return LMQ_OK;
}

lmq_status lmq_toolcall_finish(lmq_toolcall *t)
{
    if (!t) return lmq_error(LMQ_ERR_INVALID_ARG, "tool-call parser: NULL argument");
    if (t->n_hold) {
        char tmp[MAX_TAG];
        size_t h = t->n_hold;
        memcpy(tmp, t->hold, h);
        t->n_hold = 0;
        content(t, tmp, h);
    }
    if (t->state == ST_CALL) {
        /* the JSON ran to the end of the output; a <tool_call> cut short is content */
        const char *open = t->fmt == LMQ_TOOL_FORMAT_HERMES    ? OPEN_TAG
                           : t->fmt == LMQ_TOOL_FORMAT_GEMMA4  ? GEMMA_OPEN
                           : t->fmt == LMQ_TOOL_FORMAT_MISTRAL ? MISTRAL_TAG
                                                               : NULL;
        close_call(t, open, NULL);
    }
    if (t->state == ST_START && t->n_pre && !t->n_calls) emit(t, LMQ_TOOLCALL_TEXT, t->pre, t->n_pre, NULL);
    t->n_pre = 0;
    t->state = ST_TEXT;
    return LMQ_OK;
}

int32_t lmq_toolcall_count(const lmq_toolcall *t)
{
    return t ? t->n_calls : 0;
}
