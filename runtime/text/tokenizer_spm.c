/* SentencePiece BPE (tokenizer.ggml.model = "llama"): the text is split into
 * UTF-8 characters, then the adjacent pair whose concatenation is the
 * highest-scoring vocabulary token is merged, repeatedly (ties: leftmost
 * first), with a binary heap of candidate pairs and a linked list of
 * symbols, so a fragment of n characters costs O(n log n). Symbols that are
 * not tokens in the end are emitted as <0xNN> byte tokens (byte fallback) or
 * as unk. Same algorithm and tie-breaking as llama.cpp's llm_tokenizer_spm
 * and SentencePiece's BPE model. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

typedef struct spm_sym {
    int32_t prev, next; /* -1 at the ends */
    uint32_t off, n;    /* bytes of the escaped text; n == 0 once merged away */
} spm_sym;

typedef struct spm_bigram {
    uint64_t key;  /* score rank << 32 | left: the smallest key merges first */
    int32_t right;
    uint32_t size; /* bytes of the pair when it was queued (stale check) */
} spm_bigram;

typedef struct spm_heap {
    spm_bigram *a;
    size_t n, cap;
} spm_heap;

/* a comes out before b: higher score, then smaller left index */
static inline bool bg_before(const spm_bigram *a, const spm_bigram *b)
{
    return a->key < b->key;
}

static bool heap_push(spm_heap *h, spm_bigram x)
{
    if (h->n == h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 256;
        spm_bigram *p = realloc(h->a, nc * sizeof *p);
        if (!p) return false;
        h->a = p;
        h->cap = nc;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!bg_before(&x, &h->a[parent])) break;
        h->a[i] = h->a[parent];
        i = parent;
    }
    h->a[i] = x;
    return true;
}

static spm_bigram heap_pop(spm_heap *h)
{
    spm_bigram top = h->a[0];
    spm_bigram last = h->a[--h->n];
    size_t i = 0, n = h->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bg_before(&h->a[c + 1], &h->a[c])) c++;
        if (!bg_before(&h->a[c], &last)) break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (n > 0) h->a[i] = last;
    return top;
}

static bool try_add(const lmq_vocab *v, const char *text, const spm_sym *sym, int32_t left, int32_t right,
                    spm_heap *h)
{
    if (left < 0 || right < 0) return true;
    uint32_t size = sym[left].n + sym[right].n;
    int32_t id = tok_map_find(v, text + sym[left].off, size);
    if (id < 0) return true;
    return heap_push(h, (spm_bigram){(uint64_t)v->spm_rank[id] << 32 | (uint32_t)left, right, size});
}

static void emit_symbol(const lmq_vocab *v, const char *text, const spm_sym *s, tok_out *out)
{
    int32_t id = tok_map_find(v, text + s->off, s->n);
    if (id >= 0) {
        tok_out_push(out, id);
        return;
    }
    if (!v->byte_fallback) {
        if (v->unk >= 0) tok_out_push(out, v->unk);
        return;
    }
    for (uint32_t j = 0; j < s->n; j++) {
        int32_t b = v->byte_tok[(unsigned char)text[s->off + j]];
        if (b >= 0) tok_out_push(out, b);
        else if (v->unk >= 0) tok_out_push(out, v->unk);
    }
}

/* Merges one segment text[0..len) (no separator inside). */
static lmq_status spm_segment(const lmq_vocab *v, const char *text, size_t len, spm_sym *sym, spm_heap *h,
                              tok_out *out)
{
    int32_t n = 0;
    for (size_t off = 0; off < len;) {
        size_t cl = tok_utf8_len((const unsigned char *)text + off, len - off);
        if (cl == 0) cl = 1; /* a byte outside any valid sequence stands alone */
        sym[n] = (spm_sym){n - 1, off + cl == len ? -1 : n + 1, (uint32_t)off, (uint32_t)cl};
        off += cl;
        n++;
    }
    h->n = 0;
    for (int32_t i = 1; i < n; i++)
        if (!try_add(v, text, sym, i - 1, i, h)) goto oom;
    while (h->n > 0) {
        spm_bigram bg = heap_pop(h);
        int32_t left = (int32_t)(uint32_t)bg.key;
        spm_sym *l = &sym[left], *r = &sym[bg.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != bg.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = left;
        if (!try_add(v, text, sym, l->prev, left, h) || !try_add(v, text, sym, left, l->next, h)) goto oom;
    }
    for (int32_t i = 0; i != -1; i = sym[i].next) emit_symbol(v, text, &sym[i], out);
    return LMQ_OK;
oom:
    return lmq_error(LMQ_ERR_NOMEM, "tokenize: merge queue for %zu bytes", len);
}

lmq_status spm_tokenize(const lmq_vocab *v, const char *text, size_t len, tok_out *out)
{
    if (len == 0) return LMQ_OK;
    if (len > INT32_MAX / 2) return lmq_error(LMQ_ERR_LIMIT, "tokenize: fragment of %zu bytes is too long", len);
    /* Separator bytes (newlines, typically) are in no multi-byte token, and
     * in the usual vocabularies no token continues across the start of a
     * word, so no merge spans those places: merging the pieces between them
     * one by one gives the same result as one queue over the whole text
     * (the queue order within a piece is unchanged), with tiny heaps. */
    spm_sym *sym = malloc(len * sizeof *sym);
    spm_heap h = {0};
    lmq_status s = LMQ_OK;
    if (!sym) return lmq_error(LMQ_ERR_NOMEM, "tokenize: %zu bytes", len);
    size_t start = 0;
    for (size_t i = 0; i <= len && !s; i++) {
        unsigned char c = i < len ? (unsigned char)text[i] : 0;
        if (i < len && c == 0xe2 && v->spm_word_split && i > start && i + 3 <= len &&
            !memcmp(text + i, "\xe2\x96\x81", 3) && (i < 3 || memcmp(text + i - 3, "\xe2\x96\x81", 3))) {
            /* a word starts here: merge the text before it on its own */
            s = spm_segment(v, text + start, i - start, sym, &h, out);
            start = i;
            continue;
        }
        if (i < len && !(c < 128 && v->spm_sep[c])) continue;
        if (i > start) s = spm_segment(v, text + start, i - start, sym, &h, out);
        if (!s && i < len) {
            spm_sym one = {-1, -1, 0, 1};
            emit_symbol(v, text + i, &one, out);
        }
        start = i + 1;
    }
    free(h.a);
    free(sym);
    return s;
}
