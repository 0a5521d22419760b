/* libFuzzer target: the streaming <think> splitter (runtime/text/reasoning.c).
 * Byte 0 says whether the splitter starts inside the block, byte 1 seeds
 * where the rest is cut; the rest is fed once whole and once in pieces, and
 * the two transcripts (reasoning and content, each part marked) must be
 * equal. Empty pieces or content followed by reasoning are bugs too. Any
 * difference traps. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_runtime.h"
#include "split_check.h"

static void on_part(void *user, bool reasoning, const char *s, size_t n)
{
    fz_rec *r = user;
    if (!n || (reasoning && r->state == 0)) r->bad = 1;
    if (r->state != (int)reasoning) fz_add(r, reasoning ? "\x01" : "\x02", 1);
    r->state = reasoning;
    fz_add(r, s, n);
}

static void run(bool inside, const char *s, size_t n, unsigned seed, fz_rec *r)
{
    r->state = -1;
    lmq_think *t = NULL;
    if (lmq_think_new(inside, on_part, r, &t)) {
        r->bad = 2;
        return;
    }
    size_t at = 0;
    while (at < n) {
        size_t k = fz_piece(&seed, n - at);
        if (lmq_think_push(t, s + at, k)) r->bad = 1;
        at += k;
    }
    if (lmq_think_finish(t)) r->bad = 1;
    lmq_think_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    bool inside = data[0] & 1;
    unsigned seed = data[1] | 1u;
    const char *s = (const char *)data + 2;
    size_t n = size - 2;
    fz_rec a = {0}, b = {0};
    run(inside, s, n, 0, &a);
    run(inside, s, n, seed, &b);
    fz_compare(&a, &b, 0, 0);
    return 0;
}
