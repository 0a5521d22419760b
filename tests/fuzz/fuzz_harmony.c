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
#include "split_check.h"

static void on_event(void *user, const lmq_harmony_event *e)
{
    fz_rec *r = user;
    char buf[LMQ_HARMONY_MAX_HEADER * 2 + 64];
    int n = 0;
    if (e->kind == LMQ_HARMONY_BEGIN) {
        if (r->state) r->bad = 1;
        r->state = 1;
        n = snprintf(buf, sizeof buf, "{B%d%d %s|%s|%s|%s}", (int)e->msg->channel, (int)e->msg->implied,
                     e->msg->role, e->msg->channel_name, e->msg->recipient, e->msg->content_type);
    } else if (e->kind == LMQ_HARMONY_TEXT) {
        if (!r->state || !e->len || !e->text) r->bad = 1;
        else fz_add(r, e->text, e->len);
        return;
    } else {
        if (!r->state) r->bad = 1;
        r->state = 0;
        n = snprintf(buf, sizeof buf, "{E%d}", (int)e->term);
    }
    fz_add(r, buf, n > 0 ? (size_t)n : 0);
}

static lmq_status run(const char *s, size_t n, unsigned seed, fz_rec *r)
{
    lmq_harmony *h = NULL;
    if (lmq_harmony_new(on_event, r, &h)) return LMQ_ERR_NOMEM;
    lmq_status st = LMQ_OK;
    size_t at = 0;
    while (at < n) {
        size_t k = fz_piece(&seed, n - at);
        lmq_status s1 = lmq_harmony_push(h, s + at, k);
        if (s1 && !st) st = s1;
        at += k;
    }
    lmq_status s2 = lmq_harmony_finish(h);
    if (s2 && !st) st = s2;
    if (r->state && !st) r->bad = 1;
    lmq_harmony_free(h);
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    unsigned seed = data[0] | 1u;
    const char *s = (const char *)data + 1;
    size_t n = size - 1;
    fz_rec a = {0}, b = {0};
    lmq_status sa = run(s, n, 0, &a), sb = run(s, n, seed, &b);
    fz_compare(&a, &b, (int)sa, (int)sb);
    return 0;
}
