/* jinja_values.c — the chat template engine's values: arena, strings, lists,
 * dicts, Python equality/ordering, str()/repr(), json.dumps and JSON input. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "jinja_internal.h"

#define JV_MAX_NEST 256 /* nesting depth for repr/tojson/equality/hash */

/* ====================================================================== arena */

struct lmqj_chunk {
    lmqj_chunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

void lmqj_arena_init(lmqj_arena *a, size_t limit)
{
    a->head = NULL;
    a->used = 0;
    a->limit = limit;
}

void lmqj_arena_free(lmqj_arena *a)
{
    lmqj_chunk *ch = a->head;
    while (ch) {
        lmqj_chunk *next = ch->next;
        free(ch);
        ch = next;
    }
    a->head = NULL;
    a->used = 0;
}

void *lmqj_arena_alloc(lmqj_arena *a, size_t n)
{
    if (n > ((size_t)1 << 40)) return NULL;
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    if (a->limit && (a->used > a->limit || n > a->limit - a->used)) return NULL;
    lmqj_chunk *ch = a->head;
    if (!ch || ch->size - ch->used < n) {
        size_t sz = n > 32768 ? n : 65536 - sizeof(lmqj_chunk);
        lmqj_chunk *nc = malloc(sizeof(lmqj_chunk) + sz);
        if (!nc) return NULL;
        nc->size = sz;
        nc->used = 0;
        if (n > 32768 && ch) { /* big block: keep the current chunk on top */
            nc->next = ch->next;
            ch->next = nc;
        } else {
            nc->next = ch;
            a->head = nc;
        }
        ch = nc;
    }
    void *p = ch->data + ch->used;
    ch->used += n;
    a->used += n;
    memset(p, 0, n);
    return p;
}

void *lmqj_alloc(lmqj_ctx *c, size_t n)
{
    void *p = lmqj_arena_alloc(&c->ar, n);
    if (!p) lmqj_fail_limit(c, NULL, "memory limit exceeded (%zu bytes)", c->ar.limit);
    return p;
}

/* ====================================================================== UTF-8 */

uint32_t lmqj_utf8_next(const char *s, size_t n, size_t *i)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t p = *i;
    uint32_t c0 = u[p];
    int len = c0 < 0x80 ? 1 : (c0 >> 5) == 6 ? 2 : (c0 >> 4) == 14 ? 3 : (c0 >> 3) == 30 ? 4 : 0;
    if (len <= 1 || p + (size_t)len > n) { *i = p + 1; return c0; }
    uint32_t cp = c0 & (0x7f >> len);
    for (int k = 1; k < len; k++) {
        if ((u[p + k] & 0xc0) != 0x80) { *i = p + 1; return c0; }
        cp = (cp << 6) | (u[p + k] & 0x3f);
    }
    *i = p + (size_t)len;
    return cp;
}

size_t lmqj_utf8_put(uint32_t cp, char out[4])
{
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12)); out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18)); out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

size_t lmqj_utf8_count(const char *s, size_t n)
{
    size_t cnt = 0;
    for (size_t i = 0; i < n;) { lmqj_utf8_next(s, n, &i); cnt++; }
    return cnt;
}

bool lmqj_uspace(uint32_t cp)
{
    return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 ||
           cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

/* Python str.isprintable() for one code point (close approximation: Unicode
 * categories Cc, Cf, Cs, Co, Zl, Zp and Zs other than space are not). */
static bool uprintable(uint32_t cp)
{
    if (cp < 0x20 || (cp >= 0x7f && cp <= 0xa0)) return false;
    if (cp < 0x7f) return true;
    if (cp == 0xad || (cp >= 0x600 && cp <= 0x605) || cp == 0x61c || cp == 0x6dd ||
        cp == 0x70f || cp == 0x180e || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200f) ||
        (cp >= 0x2028 && cp <= 0x202f) || (cp >= 0x205f && cp <= 0x2064) ||
        (cp >= 0x2066 && cp <= 0x206f) || cp == 0x3000 || (cp >= 0xd800 && cp <= 0xf8ff) ||
        cp == 0xfeff || (cp >= 0xfff9 && cp <= 0xfffb) || cp >= 0xf0000 ||
        (cp >= 0xe0000 && cp <= 0xe007f))
        return false;
    return true;
}

/* ====================================================================== constructors */

lmqj_value lmqj_undef_named(uint8_t kind, uint8_t obj_type, const char *name)
{
    lmqj_value v = {0};
    v.ukind = kind;
    v.uobj = obj_type;
    v.u.uname = name;
    return v;
}

lmqj_str *lmqj_str_new(lmqj_arena *a, const char *s, size_t n)
{
    if (n > ((size_t)1 << 40)) return NULL;
    lmqj_str *p = lmqj_arena_alloc(a, sizeof(lmqj_str) + n + 1);
    if (!p) return NULL;
    p->len = n;
    if (n) memcpy(p->s, s, n);
    p->s[n] = 0;
    return p;
}

lmqj_value lmqj_strv(lmqj_str *s)
{
    lmqj_value v = {0};
    v.t = JV_STR;
    v.u.s = s;
    return v;
}

lmqj_value lmqj_strn(lmqj_ctx *c, const char *s, size_t n)
{
    if (n > c->lim.max_output)
        lmqj_fail_limit(c, NULL, "string of %zu bytes exceeds the output limit", n);
    lmqj_str *p = lmqj_str_new(&c->ar, s, n);
    if (!p) lmqj_fail_limit(c, NULL, "memory limit exceeded (%zu bytes)", c->ar.limit);
    return lmqj_strv(p);
}

lmqj_value lmqj_cstr(lmqj_ctx *c, const char *s) { return lmqj_strn(c, s, strlen(s)); }

lmqj_value lmqj_list_new(lmqj_ctx *c, size_t cap)
{
    lmqj_value v = {0};
    v.t = JV_LIST;
    v.u.l = lmqj_alloc(c, sizeof(lmqj_list));
    if (cap) {
        if (cap > ((size_t)1 << 32)) lmqj_fail_limit(c, NULL, "list too large");
        v.u.l->v = lmqj_alloc(c, cap * sizeof(lmqj_value));
        v.u.l->cap = cap;
    }
    return v;
}

void lmqj_list_push(lmqj_ctx *c, lmqj_value list, lmqj_value item)
{
    lmqj_list *l = list.u.l;
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 4;
        if (nc > ((size_t)1 << 32)) lmqj_fail_limit(c, NULL, "list too large");
        lmqj_value *nv = lmqj_alloc(c, nc * sizeof(lmqj_value));
        if (l->n) memcpy(nv, l->v, l->n * sizeof(lmqj_value));
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = item;
}

lmqj_value lmqj_dict_new(lmqj_ctx *c)
{
    lmqj_value v = {0};
    v.t = JV_DICT;
    v.u.d = lmqj_alloc(c, sizeof(lmqj_dict));
    return v;
}

lmqj_value lmqj_func_new(lmqj_ctx *c, uint8_t kind, const char *name, lmqj_builtin_fn fn,
                         lmqj_value self)
{
    lmqj_value v = {0};
    v.t = JV_FUNC;
    v.u.fn = lmqj_alloc(c, sizeof(lmqj_func));
    v.u.fn->kind = kind;
    v.u.fn->name = name;
    v.u.fn->fn = fn;
    v.u.fn->self = self;
    return v;
}

/* ====================================================================== predicates */

bool lmqj_is_str(lmqj_value v) { return v.t == JV_STR; }
bool lmqj_is_num(lmqj_value v) { return v.t == JV_BOOL || v.t == JV_INT || v.t == JV_FLOAT; }
bool lmqj_is_seq(lmqj_value v) { return v.t == JV_LIST || v.t == JV_TUPLE; }

double lmqj_num_f(lmqj_value v)
{
    return v.t == JV_FLOAT ? v.u.f : v.t == JV_INT ? (double)v.u.i : v.t == JV_BOOL ? v.u.b : 0;
}

bool lmqj_truthy(lmqj_value v)
{
    switch (v.t) {
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0;
    case JV_STR: return v.u.s->len != 0;
    case JV_LIST: case JV_TUPLE: return v.u.l->n != 0 || v.gen == JG_GENERATOR || v.gen == JG_REVITER;
    case JV_DICT: return v.u.d->n != 0;
    case JV_NS: case JV_FUNC: case JV_LOOP: return true;
    default: return false;
    }
}

const char *lmqj_type_name(lmqj_value v)
{
    static const char *names[JV_TYPE_COUNT] = {"Undefined", "NoneType", "bool", "int", "float",
                                               "str", "list", "tuple", "dict", "Namespace",
                                               "function", "LoopContext"};
    static const char *gens[] = {"list", "generator", "list_reverseiterator", "dict_items", "dict_keys",
                                 "dict_values"};
    if (v.t == JV_STR && v.safe) return "Markup";
    if (v.t == JV_LIST && v.gen && v.gen <= JG_VALUES) return gens[v.gen];
    if (v.t == JV_FUNC && v.u.fn->kind == JF_MACRO) return "Macro";
    return v.t < JV_TYPE_COUNT ? names[v.t] : "?";
}

const char *lmqj_type_obj_name(uint8_t t)
{
    static const char *names[JV_TYPE_COUNT] = {"jinja2.runtime.Undefined object", "None",
                                               "bool object", "int object", "float object",
                                               "str object", "list object", "tuple object",
                                               "dict object", "jinja2.utils.Namespace object",
                                               "function object", "LoopContext object"};
    return t < JV_TYPE_COUNT ? names[t] : "object";
}

/* ====================================================================== hashing, dicts */

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

static uint64_t vhash(lmqj_ctx *c, lmqj_value k, int depth)
{
    if (depth > JV_MAX_NEST) lmqj_fail_limit(c, NULL, "maximum nesting depth exceeded");
    switch (k.t) {
    case JV_STR: {
        uint64_t h = 1469598103934665603ULL;
        for (size_t i = 0; i < k.u.s->len; i++) h = (h ^ (unsigned char)k.u.s->s[i]) * 1099511628211ULL;
        return h;
    }
    case JV_BOOL: return mix64((uint64_t)k.u.b);
    case JV_INT: return mix64((uint64_t)k.u.i);
    case JV_FLOAT:
        if (k.u.f == floor(k.u.f) && fabs(k.u.f) < 9.2e18) return mix64((uint64_t)(int64_t)k.u.f);
        { uint64_t b; double f = k.u.f; memcpy(&b, &f, 8); return mix64(b ^ 0x5555); }
    case JV_NONE: return 0x1234567;
    case JV_UNDEF: return 0x7654321;
    case JV_TUPLE: {
        uint64_t h = 0x345678;
        for (size_t i = 0; i < k.u.l->n; i++) h = mix64(h ^ vhash(c, k.u.l->v[i], depth + 1));
        return h;
    }
    case JV_FUNC: case JV_NS: case JV_LOOP: return mix64((uint64_t)(uintptr_t)k.u.fn);
    default: lmqj_fail(c, NULL, "TypeError: unhashable type: '%s'", lmqj_type_name(k));
    }
}

static void dict_reindex(lmqj_ctx *c, lmqj_dict *d, size_t cap)
{
    d->index = lmqj_alloc(c, cap * sizeof(uint32_t));
    d->index_cap = cap;
    for (size_t i = 0; i < d->n; i++) {
        size_t h = (size_t)vhash(c, d->k[i], 0) & (cap - 1);
        while (d->index[h]) h = (h + 1) & (cap - 1);
        d->index[h] = (uint32_t)(i + 1);
    }
}

static long dict_find(lmqj_ctx *c, const lmqj_dict *d, lmqj_value key)
{
    if (!d->index) {
        if (c) vhash(c, key, 0); /* unhashable keys fail even on small dicts */
        for (size_t i = 0; i < d->n; i++)
            if (lmqj_equal(c, d->k[i], key)) return (long)i;
        return -1;
    }
    size_t h = (size_t)vhash(c, key, 0) & (d->index_cap - 1);
    while (d->index[h]) {
        size_t i = d->index[h] - 1;
        if (lmqj_equal(c, d->k[i], key)) return (long)i;
        h = (h + 1) & (d->index_cap - 1);
    }
    return -1;
}

lmqj_value *lmqj_dict_get(lmqj_ctx *c, const lmqj_dict *d, lmqj_value key)
{
    long i = dict_find(c, d, key);
    return i < 0 ? NULL : &d->v[i];
}

lmqj_value *lmqj_dict_get_str(const lmqj_dict *d, const char *key)
{
    size_t n = strlen(key);
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == JV_STR && d->k[i].u.s->len == n && !memcmp(d->k[i].u.s->s, key, n))
            return &d->v[i];
    return NULL;
}

void lmqj_dict_set(lmqj_ctx *c, lmqj_dict *d, lmqj_value key, lmqj_value val)
{
    long i = dict_find(c, d, key);
    if (i >= 0) { d->v[i] = val; return; }
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 4;
        if (nc > ((size_t)1 << 30)) lmqj_fail_limit(c, NULL, "dict too large");
        lmqj_value *nk = lmqj_alloc(c, nc * sizeof(lmqj_value));
        lmqj_value *nv = lmqj_alloc(c, nc * sizeof(lmqj_value));
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof(lmqj_value));
            memcpy(nv, d->v, d->n * sizeof(lmqj_value));
        }
        d->k = nk; d->v = nv; d->cap = nc;
    }
    d->k[d->n] = key;
    d->v[d->n] = val;
    d->n++;
    if (d->n > 8) {
        if (!d->index || d->n * 2 > d->index_cap) {
            size_t cap = 32;
            while (cap < d->n * 4) cap *= 2;
            dict_reindex(c, d, cap);
        } else {
            size_t h = (size_t)vhash(c, key, 0) & (d->index_cap - 1);
            while (d->index[h]) h = (h + 1) & (d->index_cap - 1);
            d->index[h] = (uint32_t)d->n;
        }
    }
}

/* ====================================================================== equality, order */

static bool equal_rec(lmqj_ctx *c, lmqj_value a, lmqj_value b, int depth)
{
    if (depth > JV_MAX_NEST) lmqj_fail_limit(c, NULL, "maximum nesting depth exceeded");
    if (lmqj_is_num(a) && lmqj_is_num(b)) {
        if (a.t == JV_FLOAT || b.t == JV_FLOAT) return lmqj_num_f(a) == lmqj_num_f(b);
        int64_t x = a.t == JV_BOOL ? a.u.b : a.u.i, y = b.t == JV_BOOL ? b.u.b : b.u.i;
        return x == y;
    }
    if (a.t != b.t) return false;
    if (a.gen != b.gen || (a.gen && a.gen != JG_KEYS)) return a.gen == b.gen && a.u.l == b.u.l;
    switch (a.t) {
    case JV_UNDEF: case JV_NONE: return true;
    case JV_STR: return a.u.s->len == b.u.s->len && !memcmp(a.u.s->s, b.u.s->s, a.u.s->len);
    case JV_LIST: case JV_TUPLE:
        if (a.u.l->n != b.u.l->n) return false;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!equal_rec(c, a.u.l->v[i], b.u.l->v[i], depth + 1)) return false;
        return true;
    case JV_DICT:
        if (a.u.d->n != b.u.d->n) return false;
        for (size_t i = 0; i < a.u.d->n; i++) {
            lmqj_value *o = lmqj_dict_get(c, b.u.d, a.u.d->k[i]);
            if (!o || !equal_rec(c, a.u.d->v[i], *o, depth + 1)) return false;
        }
        return true;
    case JV_FUNC: case JV_NS: case JV_LOOP: return a.u.fn == b.u.fn;
    default: return false;
    }
}

bool lmqj_equal(lmqj_ctx *c, lmqj_value a, lmqj_value b) { return equal_rec(c, a, b, 0); }

static int compare_rec(lmqj_ctx *c, const lmqj_node *at, lmqj_value a, lmqj_value b, int depth)
{
    if (depth > JV_MAX_NEST) lmqj_fail_limit(c, at, "maximum nesting depth exceeded");
    if (a.t == JV_UNDEF) lmqj_fail_undefined(c, at, a);
    if (b.t == JV_UNDEF) lmqj_fail_undefined(c, at, b);
    if (lmqj_is_num(a) && lmqj_is_num(b)) {
        if (a.t == JV_FLOAT || b.t == JV_FLOAT) {
            double x = lmqj_num_f(a), y = lmqj_num_f(b);
            return x < y ? -1 : x > y ? 1 : 0; /* NaN compares as "equal" (never less) */
        }
        int64_t x = a.t == JV_BOOL ? a.u.b : a.u.i, y = b.t == JV_BOOL ? b.u.b : b.u.i;
        return x < y ? -1 : x > y;
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        size_t n = a.u.s->len < b.u.s->len ? a.u.s->len : b.u.s->len;
        int r = memcmp(a.u.s->s, b.u.s->s, n);
        if (r) return r < 0 ? -1 : 1;
        return a.u.s->len < b.u.s->len ? -1 : a.u.s->len > b.u.s->len;
    }
    if (a.t == b.t && (a.t == JV_LIST || a.t == JV_TUPLE)) {
        size_t n = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (size_t i = 0; i < n; i++) {
            if (equal_rec(c, a.u.l->v[i], b.u.l->v[i], depth + 1)) continue;
            return compare_rec(c, at, a.u.l->v[i], b.u.l->v[i], depth + 1);
        }
        return a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
    }
    lmqj_fail(c, at, "TypeError: '<' not supported between instances of '%s' and '%s'",
              lmqj_type_name(a), lmqj_type_name(b));
}

int lmqj_compare(lmqj_ctx *c, const lmqj_node *at, lmqj_value a, lmqj_value b)
{
    return compare_rec(c, at, a, b, 0);
}

/* ====================================================================== buffers */

void lmqj_buf_init(lmqj_buf *b, lmqj_ctx *c)
{
    b->c = c;
    b->p = NULL;
    b->len = b->cap = 0;
}

void lmqj_buf_add(lmqj_buf *b, const char *s, size_t n)
{
    if (!n) return;
    if (n > b->c->lim.max_output || b->len > b->c->lim.max_output - n)
        lmqj_fail_limit(b->c, NULL, "output exceeds the limit of %zu bytes", b->c->lim.max_output);
    if (b->len + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 64;
        while (nc < b->len + n + 1) nc *= 2;
        char *np = lmqj_alloc(b->c, nc);
        if (b->len) memcpy(np, b->p, b->len);
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void lmqj_buf_adds(lmqj_buf *b, const char *s) { lmqj_buf_add(b, s, strlen(s)); }
void lmqj_buf_addc(lmqj_buf *b, char ch) { lmqj_buf_add(b, &ch, 1); }

void lmqj_buf_printf(lmqj_buf *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) lmqj_buf_add(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

lmqj_value lmqj_buf_value(lmqj_buf *b)
{
    lmqj_value v = {0};
    v.t = JV_STR;
    v.u.s = lmqj_alloc(b->c, sizeof(lmqj_str) + b->len + 1);
    v.u.s->len = b->len;
    if (b->len) memcpy(v.u.s->s, b->p, b->len);
    v.u.s->s[b->len] = 0;
    return v;
}

/* ====================================================================== str() and repr() */

void lmqj_float_repr(double f, char out[32])
{
    if (isnan(f)) { strcpy(out, "nan"); return; }
    if (isinf(f)) { strcpy(out, f < 0 ? "-inf" : "inf"); return; }
    if (f == 0) { strcpy(out, signbit(f) ? "-0.0" : "0.0"); return; }
    char tmp[40], digits[24];
    int exp10 = 0, nd = 0;
    for (int p = 1; p <= 17; p++) {
        snprintf(tmp, sizeof tmp, "%.*e", p - 1, f);
        if (strtod(tmp, NULL) == f || p == 17) break;
    }
    /* tmp = [-]d.ddde[+-]XX */
    const char *q = tmp;
    char *o = out;
    if (*q == '-') { *o++ = '-'; q++; }
    for (; *q && *q != 'e'; q++)
        if (*q != '.') digits[nd++] = *q;
    if (*q == 'e') exp10 = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    int decpt = exp10 + 1;
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            *o++ = '0'; *o++ = '.';
            for (int i = 0; i < -decpt; i++) *o++ = '0';
            memcpy(o, digits, (size_t)nd); o += nd;
        } else if (decpt >= nd) {
            memcpy(o, digits, (size_t)nd); o += nd;
            for (int i = nd; i < decpt; i++) *o++ = '0';
            *o++ = '.'; *o++ = '0';
        } else {
            memcpy(o, digits, (size_t)decpt); o += decpt;
            *o++ = '.';
            memcpy(o, digits + decpt, (size_t)(nd - decpt)); o += nd - decpt;
        }
        *o = 0;
    } else {
        *o++ = digits[0];
        if (nd > 1) { *o++ = '.'; memcpy(o, digits + 1, (size_t)(nd - 1)); o += nd - 1; }
        sprintf(o, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    }
}

static void repr_str(lmqj_buf *b, const char *s, size_t n)
{
    bool has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = (has_sq && !has_dq) ? '"' : '\'';
    lmqj_buf_addc(b, q);
    size_t run = 0;
    for (size_t i = 0; i < n;) {
        size_t st = i;
        uint32_t cp = lmqj_utf8_next(s, n, &i);
        const char *esc = NULL;
        char tmp[16];
        if (cp == (uint32_t)q || cp == '\\') { tmp[0] = '\\'; tmp[1] = (char)cp; tmp[2] = 0; esc = tmp; }
        else if (cp == '\n') esc = "\\n";
        else if (cp == '\r') esc = "\\r";
        else if (cp == '\t') esc = "\\t";
        else if (i - st == 1 && cp >= 0x80) { snprintf(tmp, sizeof tmp, "\\udc%02x", cp); esc = tmp; }
        else if (!uprintable(cp)) {
            if (cp < 0x100) snprintf(tmp, sizeof tmp, "\\x%02x", cp);
            else if (cp < 0x10000) snprintf(tmp, sizeof tmp, "\\u%04x", cp);
            else snprintf(tmp, sizeof tmp, "\\U%08x", cp);
            esc = tmp;
        }
        if (esc) {
            lmqj_buf_add(b, s + run, st - run);
            lmqj_buf_adds(b, esc);
            run = i;
        }
    }
    lmqj_buf_add(b, s + run, n - run);
    lmqj_buf_addc(b, q);
}

static void str_rec(lmqj_buf *b, const lmqj_node *at, lmqj_value v, bool repr, int depth)
{
    char tmp[64];
    if (depth > JV_MAX_NEST) lmqj_fail_limit(b->c, at, "maximum nesting depth exceeded");
    switch (v.t) {
    case JV_UNDEF:
        if (v.ukind == JU_UNSAFE) lmqj_fail_undefined(b->c, at, v);
        if (repr) lmqj_buf_adds(b, "Undefined");
        return;
    case JV_NONE: lmqj_buf_adds(b, "None"); return;
    case JV_BOOL: lmqj_buf_adds(b, v.u.b ? "True" : "False"); return;
    case JV_INT: snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i); lmqj_buf_adds(b, tmp); return;
    case JV_FLOAT: lmqj_float_repr(v.u.f, tmp); lmqj_buf_adds(b, tmp); return;
    case JV_STR:
        if (!repr) { lmqj_buf_add(b, v.u.s->s, v.u.s->len); return; }
        if (v.safe) lmqj_buf_adds(b, "Markup(");
        repr_str(b, v.u.s->s, v.u.s->len);
        if (v.safe) lmqj_buf_adds(b, ")");
        return;
    case JV_LIST: case JV_TUPLE:
        if (v.gen == JG_GENERATOR || v.gen == JG_REVITER) {
            lmqj_buf_printf(b, "<%s object>", lmqj_type_name(v));
            return;
        }
        if (v.gen) lmqj_buf_printf(b, "%s(", lmqj_type_name(v));
        lmqj_buf_addc(b, v.t == JV_LIST ? '[' : '(');
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) lmqj_buf_add(b, ", ", 2);
            str_rec(b, at, v.u.l->v[i], true, depth + 1);
        }
        if (v.t == JV_TUPLE && v.u.l->n == 1) lmqj_buf_addc(b, ',');
        lmqj_buf_addc(b, v.t == JV_LIST ? ']' : ')');
        if (v.gen) lmqj_buf_addc(b, ')');
        return;
    case JV_DICT: case JV_NS:
        if (v.t == JV_NS) lmqj_buf_adds(b, "<Namespace ");
        lmqj_buf_addc(b, '{');
        for (size_t i = 0; i < v.u.d->n; i++) {
            if (i) lmqj_buf_add(b, ", ", 2);
            str_rec(b, at, v.u.d->k[i], true, depth + 1);
            lmqj_buf_add(b, ": ", 2);
            str_rec(b, at, v.u.d->v[i], true, depth + 1);
        }
        lmqj_buf_addc(b, '}');
        if (v.t == JV_NS) lmqj_buf_addc(b, '>');
        return;
    case JV_FUNC:
        if (v.u.fn->kind == JF_MACRO) lmqj_buf_printf(b, "<Macro '%s'>", v.u.fn->name);
        else if (v.u.fn->kind == JF_METHOD)
            lmqj_buf_printf(b, "<built-in method %s of %s object>", v.u.fn->name,
                            lmqj_type_name(v.u.fn->self));
        else lmqj_buf_printf(b, "<function %s>", v.u.fn->name);
        return;
    case JV_LOOP:
        lmqj_buf_printf(b, "<LoopContext %lld/%lld>", (long long)v.u.loop->index0 + 1,
                        (long long)v.u.loop->length);
        return;
    default: return;
    }
}

void lmqj_to_str(lmqj_buf *b, const lmqj_node *at, lmqj_value v) { str_rec(b, at, v, false, 0); }
void lmqj_repr(lmqj_buf *b, const lmqj_node *at, lmqj_value v) { str_rec(b, at, v, true, 0); }

lmqj_value lmqj_stringify(lmqj_ctx *c, const lmqj_node *at, lmqj_value v)
{
    if (v.t == JV_STR) return v;
    lmqj_buf b;
    lmqj_buf_init(&b, c);
    lmqj_to_str(&b, at, v);
    return lmqj_buf_value(&b);
}

lmqj_value lmqj_escape(lmqj_ctx *c, const lmqj_node *at, lmqj_value v)
{
    if (v.t == JV_STR && v.safe) return v;
    lmqj_value s = lmqj_stringify(c, at, v);
    lmqj_buf b;
    lmqj_buf_init(&b, c);
    size_t run = 0;
    const char *p = s.u.s->s;
    for (size_t i = 0; i < s.u.s->len; i++) {
        const char *e = p[i] == '&' ? "&amp;" : p[i] == '<' ? "&lt;" : p[i] == '>' ? "&gt;"
                      : p[i] == '"' ? "&#34;" : p[i] == '\'' ? "&#39;" : NULL;
        if (!e) continue;
        lmqj_buf_add(&b, p + run, i - run);
        lmqj_buf_adds(&b, e);
        run = i + 1;
    }
    lmqj_buf_add(&b, p + run, s.u.s->len - run);
    lmqj_value r = lmqj_buf_value(&b);
    r.safe = 1;
    return r;
}

/* ====================================================================== json.dumps */

static void json_str(lmqj_buf *b, const char *s, size_t n, bool ascii)
{
    lmqj_buf_addc(b, '"');
    size_t run = 0;
    for (size_t i = 0; i < n;) {
        size_t st = i;
        uint32_t cp = lmqj_utf8_next(s, n, &i);
        char tmp[16];
        const char *esc = NULL;
        if (cp == '"') esc = "\\\"";
        else if (cp == '\\') esc = "\\\\";
        else if (cp == '\n') esc = "\\n";
        else if (cp == '\r') esc = "\\r";
        else if (cp == '\t') esc = "\\t";
        else if (cp == '\b') esc = "\\b";
        else if (cp == '\f') esc = "\\f";
        else if (cp < 0x20 || (ascii && cp >= 0x7f)) {
            if (cp >= 0x10000) {
                uint32_t v = cp - 0x10000;
                snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
            } else {
                snprintf(tmp, sizeof tmp, "\\u%04x", cp);
            }
            esc = tmp;
        }
        if (esc) {
            lmqj_buf_add(b, s + run, st - run);
            lmqj_buf_adds(b, esc);
            run = i;
        }
    }
    lmqj_buf_add(b, s + run, n - run);
    lmqj_buf_addc(b, '"');
}

static void json_newline(lmqj_buf *b, const lmqj_json_opts *o, int level)
{
    lmqj_buf_addc(b, '\n');
    for (int i = 0; i < level; i++) lmqj_buf_adds(b, o->indent);
}

static void json_num(lmqj_buf *b, lmqj_value v)
{
    char tmp[40];
    if (v.t == JV_FLOAT) {
        if (isnan(v.u.f)) strcpy(tmp, "NaN");
        else if (isinf(v.u.f)) strcpy(tmp, v.u.f < 0 ? "-Infinity" : "Infinity");
        else lmqj_float_repr(v.u.f, tmp);
    } else {
        snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i);
    }
    lmqj_buf_adds(b, tmp);
}

static void json_key(lmqj_buf *b, const lmqj_node *at, lmqj_value k, const lmqj_json_opts *o)
{
    switch (k.t) {
    case JV_STR: json_str(b, k.u.s->s, k.u.s->len, o->ensure_ascii); return;
    case JV_BOOL: lmqj_buf_adds(b, k.u.b ? "\"true\"" : "\"false\""); return;
    case JV_NONE: lmqj_buf_adds(b, "\"null\""); return;
    case JV_INT: case JV_FLOAT:
        lmqj_buf_addc(b, '"'); json_num(b, k); lmqj_buf_addc(b, '"');
        return;
    default:
        lmqj_fail(b->c, at, "TypeError: keys must be str, int, float, bool or None, not %s",
                  lmqj_type_name(k));
    }
}

static void json_rec(lmqj_buf *b, const lmqj_node *at, lmqj_value v, const lmqj_json_opts *o,
                     int level)
{
    lmqj_ctx *c = b->c;
    if (level > JV_MAX_NEST) lmqj_fail_limit(c, at, "maximum nesting depth exceeded");
    switch (v.t) {
    case JV_NONE: lmqj_buf_adds(b, "null"); return;
    case JV_BOOL: lmqj_buf_adds(b, v.u.b ? "true" : "false"); return;
    case JV_INT: case JV_FLOAT: json_num(b, v); return;
    case JV_STR: json_str(b, v.u.s->s, v.u.s->len, o->ensure_ascii); return;
    case JV_LIST: case JV_TUPLE: {
        if (v.gen)
            lmqj_fail(c, at, "TypeError: Object of type %s is not JSON serializable", lmqj_type_name(v));
        if (v.u.l->n == 0) { lmqj_buf_adds(b, "[]"); return; }
        lmqj_buf_addc(b, '[');
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) lmqj_buf_adds(b, o->item_sep);
            if (o->indent) json_newline(b, o, level + 1);
            json_rec(b, at, v.u.l->v[i], o, level + 1);
        }
        if (o->indent) json_newline(b, o, level);
        lmqj_buf_addc(b, ']');
        return;
    }
    case JV_DICT: {
        const lmqj_dict *d = v.u.d;
        if (d->n == 0) { lmqj_buf_adds(b, "{}"); return; }
        size_t *order = lmqj_alloc(c, d->n * sizeof(size_t));
        for (size_t i = 0; i < d->n; i++) order[i] = i;
        if (o->sort_keys && d->n > 1) {
            /* insertion sort by key (stable, uses Python ordering; fails on mixed types) */
            for (size_t i = 1; i < d->n; i++) {
                size_t k = order[i], j = i;
                while (j > 0 && lmqj_compare(c, at, d->k[k], d->k[order[j - 1]]) < 0) {
                    order[j] = order[j - 1];
                    j--;
                }
                order[j] = k;
            }
        }
        lmqj_buf_addc(b, '{');
        for (size_t i = 0; i < d->n; i++) {
            if (i) lmqj_buf_adds(b, o->item_sep);
            if (o->indent) json_newline(b, o, level + 1);
            json_key(b, at, d->k[order[i]], o);
            lmqj_buf_adds(b, o->key_sep);
            json_rec(b, at, d->v[order[i]], o, level + 1);
        }
        if (o->indent) json_newline(b, o, level);
        lmqj_buf_addc(b, '}');
        return;
    }
    default:
        lmqj_fail(c, at, "TypeError: Object of type %s is not JSON serializable",
                  lmqj_type_name(v));
    }
}

void lmqj_tojson(lmqj_buf *b, const lmqj_node *at, lmqj_value v, const lmqj_json_opts *o)
{
    json_rec(b, at, v, o, 0);
}

/* ====================================================================== JSON input */

/* cJSON keeps numbers as doubles; Python's json keeps integers exact. The
 * number tokens of the text appear in the same order as a depth-first walk of
 * the parsed tree, so the walk takes each number's kind and exact integer
 * value from the matching token. */
typedef struct numtok {
    bool is_float;
    bool big; /* integer outside int64: kept as a float */
    int64_t i;
} numtok;

typedef struct json_in {
    lmqj_ctx *c;
    numtok *toks;
    size_t ntok, next;
} json_in;

static bool scan_numbers(lmqj_ctx *c, const char *s, size_t n, json_in *ji)
{
    size_t cap = 0;
    for (size_t i = 0; i < n;) {
        char ch = s[i];
        if (ch == '"') {
            for (i++; i < n && s[i] != '"'; i++)
                if (s[i] == '\\') i++;
            i++;
            continue;
        }
        if (ch == '-' || (ch >= '0' && ch <= '9')) {
            size_t st = i;
            bool fl = false;
            while (i < n && strchr("+-0123456789.eE", s[i])) {
                if (s[i] == '.' || s[i] == 'e' || s[i] == 'E') fl = true;
                i++;
            }
            if (ji->ntok == cap) {
                size_t nc = cap ? cap * 2 : 64;
                numtok *nt = lmqj_alloc(c, nc * sizeof(numtok));
                if (ji->ntok) memcpy(nt, ji->toks, ji->ntok * sizeof(numtok));
                ji->toks = nt;
                cap = nc;
            }
            numtok *t = &ji->toks[ji->ntok++];
            t->is_float = fl;
            if (!fl) {
                char tmp[32];
                size_t len = i - st;
                if (len >= sizeof tmp) { t->big = true; continue; }
                memcpy(tmp, s + st, len);
                tmp[len] = 0;
                errno = 0;
                char *end;
                long long v = strtoll(tmp, &end, 10);
                if (errno || *end) t->big = true;
                else t->i = v;
            }
            continue;
        }
        i++;
    }
    return true;
}

static lmqj_value from_cjson(json_in *ji, const cJSON *j)
{
    lmqj_ctx *c = ji->c;
    if (cJSON_IsNull(j)) return lmqj_none();
    if (cJSON_IsFalse(j)) return lmqj_bool(false);
    if (cJSON_IsTrue(j)) return lmqj_bool(true);
    if (cJSON_IsNumber(j)) {
        if (ji->next < ji->ntok) {
            numtok *t = &ji->toks[ji->next++];
            if (!t->is_float && !t->big) return lmqj_int(t->i);
        }
        return lmqj_float(j->valuedouble);
    }
    if (cJSON_IsString(j)) return lmqj_cstr(c, j->valuestring ? j->valuestring : "");
    if (cJSON_IsArray(j)) {
        lmqj_value l = lmqj_list_new(c, 0);
        for (const cJSON *e = j->child; e; e = e->next) lmqj_list_push(c, l, from_cjson(ji, e));
        return l;
    }
    if (cJSON_IsObject(j)) {
        lmqj_value d = lmqj_dict_new(c);
        for (const cJSON *e = j->child; e; e = e->next) {
            lmqj_value k = lmqj_cstr(c, e->string ? e->string : "");
            lmqj_dict_set(c, d.u.d, k, from_cjson(ji, e));
        }
        return d;
    }
    return lmqj_none();
}

bool lmqj_from_json(lmqj_ctx *c, const char *text, size_t len, lmqj_value *out, char *err,
                    size_t errsz)
{
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!j) {
        size_t off = end && end >= text ? (size_t)(end - text) : 0;
        snprintf(err, errsz, "invalid JSON near byte %zu", off);
        return false;
    }
    for (const char *p = end; p && p < text + len; p++) {
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r' && *p != 0) {
            cJSON_Delete(j);
            snprintf(err, errsz, "invalid JSON: extra data at byte %zu", (size_t)(p - text));
            return false;
        }
    }
    json_in ji = {c, NULL, 0, 0};
    /* lmqj_alloc may longjmp: the tree must not leak, so allocation failures
     * during conversion are caught by the caller's jmp_buf after this frees. */
    jmp_buf saved;
    memcpy(saved, c->jb, sizeof saved);
    if (setjmp(c->jb)) {
        memcpy(c->jb, saved, sizeof saved);
        cJSON_Delete(j);
        snprintf(err, errsz, "%s", c->err);
        return false;
    }
    scan_numbers(c, text, len, &ji);
    *out = from_cjson(&ji, j);
    memcpy(c->jb, saved, sizeof saved);
    cJSON_Delete(j);
    return true;
}
