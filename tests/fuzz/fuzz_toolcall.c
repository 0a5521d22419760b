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
#include "split_check.h"

static void on_event(void *user, const lmq_toolcall_event *e)
{
    fz_rec *r = user;
    switch (e->kind) {
    case LMQ_TOOLCALL_TEXT:
        if (r->state || !e->len) r->bad = 1;
        fz_add(r, e->text, e->len);
        break;
    case LMQ_TOOLCALL_BEGIN:
        if (r->state || !e->name || !e->name[0]) r->bad = 1;
        r->state = 1;
        fz_add(r, "\x01", 1);
        if (e->name) fz_add(r, e->name, strlen(e->name));
        fz_add(r, "\x02", 1);
        break;
    case LMQ_TOOLCALL_ARGS:
        if (!r->state) r->bad = 1;
        fz_add(r, e->text, e->len);
        break;
    default:
        if (!r->state) r->bad = 1;
        r->state = 0;
        fz_add(r, "\x03", 1);
        break;
    }
}

static void run(lmq_tool_format f, const char *s, size_t n, unsigned seed, fz_rec *r)
{
    lmq_toolcall *t = NULL;
    if (lmq_toolcall_new(f, on_event, r, &t)) {
        r->bad = 2;
        return;
    }
    size_t at = 0;
    while (at < n) {
        size_t k = fz_piece(&seed, n - at);
        if (lmq_toolcall_push(t, s + at, k)) r->bad = 1;
        at += k;
    }
    if (lmq_toolcall_finish(t)) r->bad = 1;
    if (r->state) r->bad = 1;
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
    fz_rec a = {0}, b = {0};
    run(f, s, n, 0, &a);
    run(f, s, n, seed, &b);
    fz_compare(&a, &b, 0, 0);
    return 0;
}
