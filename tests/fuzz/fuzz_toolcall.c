/* libFuzzer target: the streaming tool-call parser (runtime/text/toolcall.c).
 * Byte 0 picks the format (none, Hermes, Mistral, Llama 3), byte 1 seeds
 * where the rest is cut; the rest is fed once whole and once in pieces, and
 * the two transcripts (content, and each call as name + joined arguments)
 * must be equal. Events out of order, empty text or a call left open are
 * bugs too. Any difference traps. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_runtime.h"

typedef struct rec {
    char *s;
    size_t len, cap;
    int open, bad;
} rec;

static void add(rec *r, const char *s, size_t n)
{
    if (r->bad) return;
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 256;
        while (cap < r->len + n + 1) cap *= 2;
        char *p = realloc(r->s, cap);
        if (!p) {
            r->bad = 2; /* out of memory: not a finding */
            return;
        }
        r->s = p;
        r->cap = cap;
    }
    memcpy(r->s + r->len, s, n);
    r->len += n;
    r->s[r->len] = 0;
}

static void on_event(void *user, const lmq_toolcall_event *e)
{
    rec *r = user;
    switch (e->kind) {
    case LMQ_TOOLCALL_TEXT:
        if (r->open || !e->len) r->bad = 1;
        add(r, e->text, e->len);
        break;
    case LMQ_TOOLCALL_BEGIN:
        if (r->open || !e->name || !e->name[0]) r->bad = 1;
        r->open = 1;
        add(r, "\x01", 1);
        if (e->name) add(r, e->name, strlen(e->name));
        add(r, "\x02", 1);
        break;
    case LMQ_TOOLCALL_ARGS:
        if (!r->open) r->bad = 1;
        add(r, e->text, e->len);
        break;
    default:
        if (!r->open) r->bad = 1;
        r->open = 0;
        add(r, "\x03", 1);
        break;
    }
}

static void run(lmq_tool_format f, const char *s, size_t n, unsigned seed, rec *r)
{
    lmq_toolcall *t = NULL;
    if (lmq_toolcall_new(f, on_event, r, &t)) {
        r->bad = 2;
        return;
    }
    size_t at = 0;
    while (at < n) {
        size_t k = n - at;
        if (seed) {
            seed = seed * 1103515245u + 12345u;
            k = 1 + (seed >> 16) % 17;
            if (k > n - at) k = n - at;
        }
        if (lmq_toolcall_push(t, s + at, k)) r->bad = 1;
        at += k;
    }
    if (lmq_toolcall_finish(t)) r->bad = 1;
    if (r->open) r->bad = 1;
    lmq_toolcall_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    static const lmq_tool_format formats[] = {LMQ_TOOL_FORMAT_NONE, LMQ_TOOL_FORMAT_HERMES, LMQ_TOOL_FORMAT_MISTRAL,
                                              LMQ_TOOL_FORMAT_LLAMA3, LMQ_TOOL_FORMAT_GEMMA4};
    lmq_tool_format f = formats[data[0] % 5];
    unsigned seed = data[1] | 1u;
    const char *s = (const char *)data + 2;
    size_t n = size - 2;
    rec a = {0}, b = {0};
    run(f, s, n, 0, &a);
    run(f, s, n, seed, &b);
    if (a.bad != 2 && b.bad != 2) {
        if (a.bad == 1 || b.bad == 1) __builtin_trap();
        if (a.len != b.len || (a.len && memcmp(a.s, b.s, a.len))) __builtin_trap();
    }
    free(a.s);
    free(b.s);
    return 0;
}
