/* libFuzzer target: the streaming harmony splitter (runtime/text/harmony.c).
 * The input's first byte seeds where the rest is cut into pieces; the rest is
 * fed once whole and once in those pieces, and the two transcripts of events
 * (headers, joined text, terminators) and statuses must be equal: the
 * splitter's output may not depend on where a piece ends. Events out of
 * order or empty text chunks are bugs too. Any difference traps. */
#include <stdint.h>
#include <stdio.h>
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

static void on_event(void *user, const lmq_harmony_event *e)
{
    rec *r = user;
    char buf[LMQ_HARMONY_MAX_HEADER * 2 + 64];
    int n = 0;
    if (e->kind == LMQ_HARMONY_BEGIN) {
        if (r->open) r->bad = 1;
        r->open = 1;
        n = snprintf(buf, sizeof buf, "{B%d%d %s|%s|%s|%s}", (int)e->msg->channel, (int)e->msg->implied,
                     e->msg->role, e->msg->channel_name, e->msg->recipient, e->msg->content_type);
    } else if (e->kind == LMQ_HARMONY_TEXT) {
        if (!r->open || !e->len || !e->text) r->bad = 1;
        else add(r, e->text, e->len);
        return;
    } else {
        if (!r->open) r->bad = 1;
        r->open = 0;
        n = snprintf(buf, sizeof buf, "{E%d}", (int)e->term);
    }
    add(r, buf, n > 0 ? (size_t)n : 0);
}

static lmq_status run(const char *s, size_t n, unsigned seed, rec *r)
{
    lmq_harmony *h = NULL;
    if (lmq_harmony_new(on_event, r, &h)) return LMQ_ERR_NOMEM;
    lmq_status st = LMQ_OK;
    size_t at = 0;
    while (at < n) {
        size_t k = n - at;
        if (seed) {
            seed = seed * 1103515245u + 12345u;
            k = 1 + (seed >> 16) % 17;
            if (k > n - at) k = n - at;
        }
        lmq_status s1 = lmq_harmony_push(h, s + at, k);
        if (s1 && !st) st = s1;
        at += k;
    }
    lmq_status s2 = lmq_harmony_finish(h);
    if (s2 && !st) st = s2;
    if (r->open && !st) r->bad = 1;
    lmq_harmony_free(h);
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    unsigned seed = data[0] | 1u;
    const char *s = (const char *)data + 1;
    size_t n = size - 1;
    rec a = {0}, b = {0};
    lmq_status sa = run(s, n, 0, &a), sb = run(s, n, seed, &b);
    if (a.bad != 2 && b.bad != 2) {
        if (a.bad == 1 || b.bad == 1) __builtin_trap();
        if (sa != sb || a.len != b.len || (a.len && memcmp(a.s, b.s, a.len))) __builtin_trap();
    }
    free(a.s);
    free(b.s);
    return 0;
}
