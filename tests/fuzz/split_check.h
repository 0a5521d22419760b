/* Shared by the fuzz targets of the streaming splitters (think, tool calls,
 * harmony): a transcript that events append to, the pieces an input is cut
 * into, and the check that feeding it whole and in pieces told the same. */
#ifndef LMQ_FUZZ_SPLIT_CHECK_H
#define LMQ_FUZZ_SPLIT_CHECK_H

#include <stdlib.h>
#include <string.h>

typedef struct fz_rec {
    char *s;
    size_t len, cap;
    int state; /* the target's own: a call or message open, the last part's kind */
    int bad;   /* 1 a finding, 2 out of memory (not a finding) */
} fz_rec;

static void fz_add(fz_rec *r, const char *s, size_t n)
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

/* The length of the next piece of the `left` bytes still to feed: all of
 * them when *seed is 0, else 1..17 from the seed's sequence. */
static size_t fz_piece(unsigned *seed, size_t left)
{
    if (!*seed) return left;
    *seed = *seed * 1103515245u + 12345u;
    size_t k = 1 + (*seed >> 16) % 17;
    return k < left ? k : left;
}

/* Traps on a finding in either run, or when the two transcripts (and the
 * statuses the caller passes) differ; frees both. */
static void fz_compare(fz_rec *a, fz_rec *b, int status_a, int status_b)
{
    if (a->bad != 2 && b->bad != 2) {
        if (a->bad == 1 || b->bad == 1) __builtin_trap();
        if (status_a != status_b || a->len != b->len || (a->len && memcmp(a->s, b->s, a->len))) __builtin_trap();
    }
    free(a->s);
    free(b->s);
}

#endif
