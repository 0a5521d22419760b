/* reasoning.c — streaming splitter of a model's thinking from its answer:
 * `<think>...</think>` (Qwen3, Qwen3.5, DeepSeek-R1 and the models that copy
 * them) and Gemma 4's thought channel `<|channel>thought\n...<channel|>`
 * (whichever opens the output; the block closes with its own tag). Like the
 * harmony splitter, it holds back only the bytes that may still become a
 * tag, so its output does not depend on where the input was cut, and it
 * lives in one fixed-size object. */
#include <stdlib.h>
#include <string.h>

#include "lmq_rt_chat.h"

#define MAX_TAG 16

/* The tag pairs, tried in this order; index = style. */
static const struct {
    const char *open, *close;
    const char *name; /* Gemma 4: the channel's name line after the open tag, dropped */
} k_tags[] = {
    {"<think>", "</think>", NULL},
    {"<|channel>", "<channel|>", "thought\n"},
};
#define N_STYLES (sizeof k_tags / sizeof k_tags[0])

enum state {
    ST_START,     /* before anything but whitespace: an open tag here opens reasoning */
    ST_NAME,      /* just after Gemma's <|channel>: is "thought\n" next? (held in `hold`) */
    ST_REASONING, /* inside the block */
    ST_CONTENT,   /* after the block, or an answer without one */
};

struct lmq_think {
    enum state state;
    int style;             /* the tag pair of the open block (k_tags), or -1 */
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
    t->style = t->started_inside ? 0 : -1;
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

/* A whole tag of pair `style` was seen. */
static void tag(lmq_think *t, int style, bool open)
{
    if (open && t->state == ST_START) {
        t->style = style;
        t->state = k_tags[style].name ? ST_NAME : ST_REASONING;
        t->skip_ws = true;
    } else if (!open && t->state == ST_REASONING && style == t->style) {
        t->n_ws = 0; /* trailing whitespace of the reasoning */
        t->state = ST_CONTENT;
        t->skip_ws = true;
    } else {
        /* out of place: text of the current part */
        const char *x = open ? k_tags[style].open : k_tags[style].close;
        text(t, x, strlen(x));
    }
}

/* The tags a held prefix may still become: bit 2 * style (open) and
 * 2 * style + 1 (close); *whole gets the bit of a tag it completes. */
static unsigned could_be(const char *s, size_t n, unsigned *whole)
{
    unsigned r = 0;
    *whole = 0;
    for (size_t i = 0; i < N_STYLES; i++)
        for (int c = 0; c < 2; c++) {
            const char *x = c ? k_tags[i].close : k_tags[i].open;
            size_t l = strlen(x);
            if (n <= l && !memcmp(s, x, n)) {
                r |= 1u << (2 * i + c);
                if (n == l) *whole = 1u << (2 * i + c);
            }
        }
    return r;
}

/* ST_NAME: the bytes after Gemma's open tag, held until they are or are not
 * the channel name ("thought\n", dropped); c is the next byte (-1 at the
 * end). Returns true when c was consumed. */
static bool channel_name(lmq_think *t, int c)
{
    const char *name = k_tags[t->style].name;
    size_t l = strlen(name);
    if (c >= 0 && t->n_hold < l && name[t->n_hold] == (char)c) {
        t->hold[t->n_hold++] = (char)c;
        if (t->n_hold == l) { /* the name: dropped */
            t->n_hold = 0;
            t->state = ST_REASONING;
        }
        return true;
    }
    /* not the name: what was held is reasoning */
    char tmp[MAX_TAG];
    size_t h = t->n_hold;
    memcpy(tmp, t->hold, h);
    t->n_hold = 0;
    t->state = ST_REASONING;
    text(t, tmp, h);
    return false;
}

lmq_status lmq_think_push(lmq_think *t, const char *s, size_t n)
{
    if (!t || (!s && n)) return lmq_error(LMQ_ERR_INVALID_ARG, "think splitter: NULL argument");
    size_t run = 0; /* start of the pending plain run in s */
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (t->state == ST_NAME) {
            if (channel_name(t, (unsigned char)c)) {
                run = i + 1;
                continue;
            }
            run = i; /* c is looked at as reasoning */
        }
        if (t->n_hold) {
            t->hold[t->n_hold++] = c;
            unsigned whole;
            unsigned k = could_be(t->hold, t->n_hold, &whole);
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
            if (whole) {
                int bit = __builtin_ctz(whole);
                t->n_hold = 0;
                tag(t, bit / 2, !(bit & 1));
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
    if (t->state == ST_NAME) channel_name(t, -1);
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
    /* <think> only: a prompt that leaves Gemma's channel open is not one its
     * templates write (the splitter's inside state is the <think> pair) */
    static const char open[] = "<think>", close[] = "</think>";
    const char *last_open = NULL, *last_close = NULL;
    for (size_t i = 0; i + sizeof open - 1 <= len; i++) {
        if (!memcmp(prompt + i, open, sizeof open - 1)) last_open = prompt + i;
        if (i + sizeof close - 1 <= len && !memcmp(prompt + i, close, sizeof close - 1)) last_close = prompt + i;
    }
    if (!last_open || last_close > last_open) return false;
    /* only whitespace after the open tag: the model continues inside it */
    for (const char *p = last_open + sizeof open - 1; p < prompt + len; p++)
        if (!is_ws(*p)) return false;
    return true;
}

bool lmq_think_is_template(const char *src, size_t len)
{
    if (!src) return false;
    bool think = false, ch_open = false, ch_close = false;
    for (size_t i = 0; i < len; i++) {
        if (src[i] != '<') continue;
        if (len - i >= 7 && !memcmp(src + i, "<think>", 7)) think = true;
        if (len - i >= 10 && !memcmp(src + i, "<|channel>", 10)) ch_open = true;
        if (len - i >= 10 && !memcmp(src + i, "<channel|>", 10)) ch_close = true;
    }
    return think || (ch_open && ch_close);
}
