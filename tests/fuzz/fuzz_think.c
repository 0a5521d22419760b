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

typedef struct rec {
    char *s;
    size_t len, cap;
    int last, bad; /* last: -1 none, 0 content, 1 reasoning */
} rec;

static void add(rec *r, const char *s, size_t n)
{
    if (r->bad) return;
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 256;
        while (cap < r->len + n + 1) cap *= 2;
        char *p = realloc(r->s, cap);
        if (!p) {
            r->bad = 2;
            return;
        }
        r->s = p;
        r->cap = cap;
    }
    memcpy(r->s + r->len, s, n);
    r->len += n;
    r->s[r->len] = 0;
}

static void on_part(void *user, bool reasoning, const char *s, size_t n)
{
    rec *r = user;
    if (!n || (reasoning && r->last == 0)) r->bad = 1;
    if (r->last != (int)reasoning) add(r, reasoning ? "\x01" : "\x02", 1);
    r->last = reasoning;
    add(r, s, n);
}

static void run(bool inside, const char *s, size_t n, unsigned seed, rec *r)
{
    r->last = -1;
    lmq_think *t = NULL;
    if (lmq_think_new(inside, on_part, r, &t)) {
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
    rec a = {0}, b = {0};
    run(inside, s, n, 0, &a);
    run(inside, s, n, seed, &b);
    if (a.bad != 2 && b.bad != 2) {
        if (a.bad == 1 || b.bad == 1) __builtin_trap();
        if (a.len != b.len || (a.len && memcmp(a.s, b.s, a.len))) __builtin_trap();
    }
    free(a.s);
    free(b.s);
    return 0;
}
