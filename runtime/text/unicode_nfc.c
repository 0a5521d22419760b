/* Unicode NFC (canonical decomposition, canonical ordering, canonical
 * composition; UAX #15) for tokenizers whose tokenizer.json has an NFC
 * normalizer (Qwen2/3, ...). Tables: unicode_nfc_data.h. Invalid UTF-8
 * bytes are copied unchanged and act as boundaries. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

typedef struct nfc_ccc_range { uint32_t lo, hi, ccc; } nfc_ccc_range;
typedef struct nfc_decomp { uint32_t cp, a, b; } nfc_decomp;   /* b == 0: singleton */
typedef struct nfc_comp { uint32_t a, b, c; } nfc_comp;        /* sorted by (a, b) */

#include "unicode_nfc_data.h"

enum { S_BASE = 0xAC00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11A7,
       L_COUNT = 19, V_COUNT = 21, T_COUNT = 28, N_COUNT = V_COUNT * T_COUNT, S_COUNT = L_COUNT * N_COUNT };

static unsigned ccc_of(uint32_t cp)
{
    if (cp < 0x300) return 0;
    size_t lo = 0, hi = sizeof NFC_CCC / sizeof NFC_CCC[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < NFC_CCC[mid].lo) hi = mid;
        else if (cp > NFC_CCC[mid].hi) lo = mid + 1;
        else return NFC_CCC[mid].ccc;
    }
    return 0;
}

static const nfc_decomp *decomp_of(uint32_t cp)
{
    size_t lo = 0, hi = sizeof NFC_DECOMP / sizeof NFC_DECOMP[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < NFC_DECOMP[mid].cp) hi = mid;
        else if (cp > NFC_DECOMP[mid].cp) lo = mid + 1;
        else return &NFC_DECOMP[mid];
    }
    return NULL;
}

/* composite of (a, b), or 0 */
static uint32_t compose(uint32_t a, uint32_t b)
{
    if (a >= L_BASE && a < L_BASE + L_COUNT && b >= V_BASE && b < V_BASE + V_COUNT)
        return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT;
    if (a >= S_BASE && a < S_BASE + S_COUNT && (a - S_BASE) % T_COUNT == 0 && b > T_BASE && b < T_BASE + T_COUNT)
        return a + (b - T_BASE);
    size_t lo = 0, hi = sizeof NFC_COMP / sizeof NFC_COMP[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const nfc_comp *c = &NFC_COMP[mid];
        if (a < c->a || (a == c->a && b < c->b)) hi = mid;
        else if (a > c->a || b > c->b) lo = mid + 1;
        else return c->c;
    }
    return 0;
}

typedef struct cp_buf {
    uint32_t *p;
    size_t n, cap;
} cp_buf;

static bool cb_push(cp_buf *b, uint32_t cp)
{
    if (b->n == b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 64;
        uint32_t *p = realloc(b->p, nc * sizeof *p);
        if (!p) return false;
        b->p = p;
        b->cap = nc;
    }
    b->p[b->n++] = cp;
    return true;
}

static bool decompose(cp_buf *b, uint32_t cp, int depth)
{
    if (cp >= S_BASE && cp < S_BASE + S_COUNT) {
        uint32_t s = cp - S_BASE, t = s % T_COUNT;
        if (!cb_push(b, L_BASE + s / N_COUNT) || !cb_push(b, V_BASE + (s % N_COUNT) / T_COUNT)) return false;
        return t == 0 || cb_push(b, T_BASE + t);
    }
    const nfc_decomp *d = cp >= 0xC0 && depth < 8 ? decomp_of(cp) : NULL;
    if (!d) return cb_push(b, cp);
    if (!decompose(b, d->a, depth + 1)) return false;
    return d->b == 0 || decompose(b, d->b, depth + 1);
}

static uint32_t utf8_decode(const unsigned char *s, size_t cl)
{
    if (cl == 1) return s[0];
    uint32_t cp = s[0] & (0x7f >> cl);
    for (size_t i = 1; i < cl; i++) cp = (cp << 6) | (s[i] & 0x3f);
    return cp;
}

static size_t utf8_encode(uint32_t cp, char *o)
{
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xc0 | cp >> 6); o[1] = (char)(0x80 | (cp & 0x3f)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | cp >> 12); o[1] = (char)(0x80 | ((cp >> 6) & 0x3f)); o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | cp >> 18); o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* NFC of the decomposed run b->p[0..n) in place; returns the new length. */
static size_t reorder_compose(uint32_t *p, size_t n)
{
    /* canonical ordering: stable sort of each run of non-starters by ccc */
    for (size_t i = 1; i < n; i++) {
        unsigned c = ccc_of(p[i]);
        if (c == 0) continue;
        size_t j = i;
        while (j > 0 && ccc_of(p[j - 1]) > c) {
            uint32_t t = p[j - 1];
            p[j - 1] = p[j];
            p[j] = t;
            j--;
        }
    }
    /* composition */
    if (n == 0) return 0;
    size_t starter = 0, k = 1;
    bool have_starter = ccc_of(p[0]) == 0;
    int last_ccc = have_starter ? 0 : 256;
    for (size_t i = 1; i < n; i++) {
        uint32_t c = p[i];
        int cc = (int)ccc_of(c);
        bool blocked = k - 1 != starter && (last_ccc == 0 || last_ccc >= cc);
        uint32_t comp = have_starter && !blocked ? compose(p[starter], c) : 0;
        if (comp) {
            p[starter] = comp;
            continue;
        }
        if (cc == 0) {
            starter = k;
            have_starter = true;
        }
        last_ccc = cc;
        p[k++] = c;
    }
    return k;
}

bool tok_nfc_quick(const char *src, size_t n)
{
    /* every code point below U+0300 is NFC-stable and composes with nothing
     * before it; lead bytes >= 0xCC start code points >= U+0300 */
    const unsigned char *s = (const unsigned char *)src;
    for (size_t i = 0; i < n; i++)
        if (s[i] >= 0xcc) return false;
    return true;
}

char *tok_nfc(const char *src, size_t n, size_t *out_len)
{
    const unsigned char *s = (const unsigned char *)src;
    /* NFC never grows UTF-8 text by more than 3x (UAX #15, "Stream-Safe") */
    if (n > (SIZE_MAX - 16) / 3) return NULL;
    char *out = malloc(3 * n + 16);
    cp_buf b = {0};
    if (!out) return NULL;
    size_t k = 0, i = 0;
    while (i < n) {
        size_t cl = tok_utf8_len(s + i, n - i);
        if (cl == 0) {
            out[k++] = (char)s[i++];
            continue;
        }
        /* a run of valid UTF-8 up to the next invalid byte, normalized as a
         * whole (flushed at each starter to bound the buffer) */
        b.n = 0;
        while (i < n && (cl = tok_utf8_len(s + i, n - i)) != 0) {
            uint32_t cp = utf8_decode(s + i, cl);
            size_t before = b.n;
            if (!decompose(&b, cp, 0)) goto oom;
            /* flush everything before a new starter that cannot compose
             * backwards (ccc 0 and not a composition's second part is
             * approximated by: ASCII), keeping memory bounded */
            if (cp < 0x80 && before > 0) {
                uint32_t last = b.p[b.n - 1];
                size_t m = reorder_compose(b.p, before);
                for (size_t j = 0; j < m; j++) k += utf8_encode(b.p[j], out + k);
                b.p[0] = last;
                b.n = 1;
            }
            i += cl;
        }
        size_t m = reorder_compose(b.p, b.n);
        for (size_t j = 0; j < m; j++) k += utf8_encode(b.p[j], out + k);
    }
    free(b.p);
    *out_len = k;
    return out;
oom:
    free(b.p);
    free(out);
    return NULL;
}
