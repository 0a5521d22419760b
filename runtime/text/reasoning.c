/* reasoning.c — streaming splitter of a model's thinking from its answer:
 * `<think>...</think>` (Qwen3, Qwen3.5, DeepSeek-R1 and the models that copy
 * them). Like the harmony splitter, it holds back only the bytes that may
 * still become a tag, so its output does not depend on where the input was
 * cut, and it lives in one fixed-size object. */
#include <stdlib.h>
#include <string.h>

#include "lmq_rt_chat.h"

#define OPEN_TAG "<think>"
#define CLOSE_TAG "</think>"
#define MAX_TAG 8

enum state {
    ST_START,     /* before anything but whitespace: a <think> here opens reasoning */
    ST_REASONING, /* inside the block */
    ST_CONTENT,   /* after the block, or an answer without one */
};

struct lmq_think {
    enum state state;
    bool skip_ws;          /* drop whitespace at the start of the current part */
    char hold[MAX_TAG];    /* bytes that may begin a tag */
    size_t n_hold;
    /* trailing whitespace of the reasoning, emitted only if more reasoning follows */
    char ws[64];
    size_t n_ws;
    lmq_think_fn fn;
    void *user;
    bool started_inside;
};

lmq_status lmq_think_new(bool inside, lmq_think_fn fn, void *user, lmq_think **out)
{
    if (!out || !fn) return lmq_error(LMQ_ERR_INVALID_ARG, "think splitter: NULL argument");
    *out = calloc(1, sizeof **out);
    if (!*out) return lmq_error(LMQ_ERR_NOMEM, "think splitter");
    (*out)->fn = fn;
    (*out)->user = user;
    (*out)->started_inside = inside;
    lmq_think_reset(*out);
    return LMQ_OK;
}

void lmq_think_free(lmq_think *t)
{
    free(t);
}

void lmq_think_reset(lmq_think *t)
{
    t->state = t->started_inside ? ST_REASONING : ST_START;
    t->skip_ws = true;
    t->n_hold = t->n_ws = 0;
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static void flush_ws(lmq_think *t)
{
    if (t->n_ws) t->fn(t->user, true, t->ws, t->n_ws);
    t->n_ws = 0;
}

/* Plain text (no tag) of the current part. */
static void text(lmq_think *t, const char *s, size_t n)
{
    if (!n) return;
    if (t->skip_ws) {
        while (n && is_ws(*s)) s++, n--;
        if (!n) return;
        t->skip_ws = false;
    }
    if (t->state == ST_START) t->state = ST_CONTENT;
    if (t->state == ST_CONTENT) {
        t->fn(t->user, false, s, n);
        return;
    }
    /* reasoning: hold trailing whitespace until more text shows it is inside */
    size_t end = n;
    while (end && is_ws(s[end - 1])) end--;
    if (end) {
        flush_ws(t);
        t->fn(t->user, true, s, end);
    }
    for (size_t i = end; i < n; i++) {
        if (t->n_ws == sizeof t->ws) flush_ws(t);
        t->ws[t->n_ws++] = s[i];
    }
}

/* A whole tag was seen. */
static void tag(lmq_think *t, bool open)
{
    if (open && t->state == ST_START) {
        t->state = ST_REASONING;
        t->skip_ws = true;
    } else if (!open && t->state == ST_REASONING) {
        t->n_ws = 0; /* trailing whitespace of the reasoning */
        t->state = ST_CONTENT;
        t->skip_ws = true;
    } else {
        /* out of place: text of the current part */
        text(t, open ? OPEN_TAG : CLOSE_TAG, open ? sizeof OPEN_TAG - 1 : sizeof CLOSE_TAG - 1);
    }
}

/* Which tag a held prefix may still become: 1 open, 2 close (bits). */
static int could_be(const char *s, size_t n)
{
    int r = 0;
    if (n <= sizeof OPEN_TAG - 1 && !memcmp(s, OPEN_TAG, n)) r |= 1;
    if (n <= sizeof CLOSE_TAG - 1 && !memcmp(s, CLOSE_TAG, n)) r |= 2;
    return r;
}

lmq_status lmq_think_push(lmq_think *t, const char *s, size_t n)
{
    if (!t || (!s && n)) return lmq_error(LMQ_ERR_INVALID_ARG, "think splitter: NULL argument");
    size_t run = 0; /* start of the pending plain run in s */
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (t->n_hold) {
            t->hold[t->n_hold++] = c;
            int k = could_be(t->hold, t->n_hold);
            if (!k) {
                /* not a tag: the held bytes are text; c is looked at again */
                size_t h = t->n_hold - 1;
                t->n_hold = 0;
                char tmp[MAX_TAG];
                memcpy(tmp, t->hold, h);
                text(t, tmp, h);
                run = i;
                i--;
                continue;
            }
            if ((k & 1 && t->n_hold == sizeof OPEN_TAG - 1) || (k & 2 && t->n_hold == sizeof CLOSE_TAG - 1)) {
                bool open = (k & 1) && t->n_hold == sizeof OPEN_TAG - 1;
                t->n_hold = 0;
                tag(t, open);
                run = i + 1;
            }
            continue;
        }
        if (c == '<') {
            text(t, s + run, i - run);
            t->hold[t->n_hold++] = c;
        }
        run = t->n_hold ? i + 1 : run;
    }
    if (!t->n_hold && run < n) text(t, s + run, n - run);
    return LMQ_OK;
}

lmq_status lmq_think_finish(lmq_think *t)
{
    if (!t) return lmq_error(LMQ_ERR_INVALID_ARG, "think splitter: NULL argument");
    if (t->n_hold) {
        char tmp[MAX_TAG];
        size_t h = t->n_hold;
        memcpy(tmp, t->hold, h);
        t->n_hold = 0;
        text(t, tmp, h);
    }
    t->n_ws = 0;
    return LMQ_OK;
}

bool lmq_think_prompt_open(const char *prompt, size_t len)
{
    const char *last_open = NULL, *last_close = NULL;
    for (size_t i = 0; i + sizeof OPEN_TAG - 1 <= len; i++) {
        if (!memcmp(prompt + i, OPEN_TAG, sizeof OPEN_TAG - 1)) last_open = prompt + i;
        if (i + sizeof CLOSE_TAG - 1 <= len && !memcmp(prompt + i, CLOSE_TAG, sizeof CLOSE_TAG - 1))
            last_close = prompt + i;
    }
    if (!last_open || last_close > last_open) return false;
    /* only whitespace after the open tag: the model continues inside it */
    for (const char *p = last_open + sizeof OPEN_TAG - 1; p < prompt + len; p++)
        if (!is_ws(*p)) return false;
    return true;
}
