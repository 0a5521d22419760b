/* Typed key/value metadata: an ordered map with GGUF's value types, and its
 * GGUF encoding (shared by .lmq containers and GGUF files). */
#include <stdlib.h>
#include <string.h>

#include "lmq_format.h"
#include "lmq_format_internal.h"

typedef struct kv {
    char *key;
    lmq_value val;
} kv;

struct lmq_meta {
    kv *items;
    size_t n, cap;
    lmq_strindex ix; /* key -> position in items */
};

static const size_t vtype_sizes[LMQ_V_COUNT] = {
    [LMQ_V_U8] = 1, [LMQ_V_I8] = 1, [LMQ_V_U16] = 2, [LMQ_V_I16] = 2, [LMQ_V_U32] = 4,
    [LMQ_V_I32] = 4, [LMQ_V_F32] = 4, [LMQ_V_BOOL] = 1, [LMQ_V_STRING] = 0, [LMQ_V_ARRAY] = 0,
    [LMQ_V_U64] = 8, [LMQ_V_I64] = 8, [LMQ_V_F64] = 8,
};

static const char *const vtype_names[LMQ_V_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};

size_t lmq_vtype_size(lmq_vtype t)
{
    return (unsigned)t < LMQ_V_COUNT ? vtype_sizes[t] : 0;
}

const char *lmq_vtype_name(lmq_vtype t)
{
    return (unsigned)t < LMQ_V_COUNT ? vtype_names[t] : "?";
}

static bool is_unsigned(lmq_vtype t)
{
    return t == LMQ_V_U8 || t == LMQ_V_U16 || t == LMQ_V_U32 || t == LMQ_V_U64;
}

static bool is_signed(lmq_vtype t)
{
    return t == LMQ_V_I8 || t == LMQ_V_I16 || t == LMQ_V_I32 || t == LMQ_V_I64;
}

/* ---------------------------------------------------------------- values */

static void value_clear(lmq_value *v)
{
    if (v->type == LMQ_V_STRING) {
        free(v->s.ptr);
    } else if (v->type == LMQ_V_ARRAY) {
        if (v->arr.elem == LMQ_V_STRING) {
            lmq_str *s = v->arr.data;
            for (uint64_t i = 0; s && i < v->arr.n; i++) free(s[i].ptr);
        } else if (v->arr.elem == LMQ_V_ARRAY) {
            lmq_value *items = v->arr.data;
            for (uint64_t i = 0; items && i < v->arr.n; i++) value_clear(&items[i]);
        }
        free(v->arr.data);
    }
    memset(v, 0, sizeof *v);
}

static char *dup_bytes(const char *s, uint64_t len)
{
    char *p = malloc((size_t)len + 1);
    if (!p) return NULL;
    if (len) memcpy(p, s, (size_t)len);
    p[len] = 0;
    return p;
}

static lmq_status value_copy(lmq_value *dst, const lmq_value *src, int depth)
{
    memset(dst, 0, sizeof *dst);
    if (depth > LMQ_MAX_ARRAY_DEPTH)
        return lmq_error(LMQ_ERR_LIMIT, "metadata arrays nested deeper than %d", LMQ_MAX_ARRAY_DEPTH);
    dst->type = src->type;
    if (src->type == LMQ_V_STRING) {
        dst->s.ptr = dup_bytes(src->s.ptr, src->s.len);
        dst->s.len = src->s.len;
        return dst->s.ptr ? LMQ_OK : lmq_error(LMQ_ERR_NOMEM, "metadata string copy");
    }
    if (src->type != LMQ_V_ARRAY) {
        *dst = *src;
        return LMQ_OK;
    }
    dst->arr.elem = src->arr.elem;
    dst->arr.n = src->arr.n;
    size_t esz = src->arr.elem == LMQ_V_STRING  ? sizeof(lmq_str)
                 : src->arr.elem == LMQ_V_ARRAY ? sizeof(lmq_value)
                                                : lmq_vtype_size(src->arr.elem);
    dst->arr.data = calloc(src->arr.n ? (size_t)src->arr.n : 1, esz);
    if (!dst->arr.data) return lmq_error(LMQ_ERR_NOMEM, "metadata array copy");
    if (src->arr.elem == LMQ_V_STRING) {
        const lmq_str *s = src->arr.data;
        lmq_str *d = dst->arr.data;
        for (uint64_t i = 0; i < src->arr.n; i++) {
            d[i].ptr = dup_bytes(s[i].ptr, s[i].len);
            d[i].len = s[i].len;
            if (!d[i].ptr) {
                dst->arr.n = i;
                value_clear(dst);
                return lmq_error(LMQ_ERR_NOMEM, "metadata array copy");
            }
        }
    } else if (src->arr.elem == LMQ_V_ARRAY) {
        const lmq_value *s = src->arr.data;
        lmq_value *d = dst->arr.data;
        for (uint64_t i = 0; i < src->arr.n; i++) {
            lmq_status st = value_copy(&d[i], &s[i], depth + 1);
            if (st) {
                dst->arr.n = i;
                value_clear(dst);
                return st;
            }
        }
    } else if (src->arr.n) {
        memcpy(dst->arr.data, src->arr.data, (size_t)src->arr.n * esz);
    }
    return LMQ_OK;
}

/* ---------------------------------------------------------------- the map */

lmq_meta *lmq_meta_new(void)
{
    return calloc(1, sizeof(lmq_meta));
}

void lmq_meta_free(lmq_meta *m)
{
    if (!m) return;
    for (size_t i = 0; i < m->n; i++) {
        free(m->items[i].key);
        value_clear(&m->items[i].val);
    }
    free(m->items);
    lmq_strindex_clear(&m->ix);
    free(m);
}

size_t lmq_meta_count(const lmq_meta *m)
{
    return m ? m->n : 0;
}

const char *lmq_meta_key(const lmq_meta *m, size_t i)
{
    return m && i < m->n ? m->items[i].key : NULL;
}

const lmq_value *lmq_meta_value(const lmq_meta *m, size_t i)
{
    return m && i < m->n ? &m->items[i].val : NULL;
}

static const char *key_at(const void *owner, size_t i)
{
    return ((const lmq_meta *)owner)->items[i].key;
}

static kv *find_kv(const lmq_meta *m, const char *key)
{
    if (!m || !key) return NULL;
    size_t i = lmq_strindex_find(&m->ix, key, key_at, m);
    return i < m->n ? &m->items[i] : NULL;
}

const lmq_value *lmq_meta_find(const lmq_meta *m, const char *key)
{
    kv *e = find_kv(m, key);
    return e ? &e->val : NULL;
}

/* Takes ownership of *v (moved in; *v is zeroed) on success and failure.
 * A key already present gets the new value, unless refuse_dup is given: then
 * *refuse_dup is set, the map is unchanged and *v is freed. */
static lmq_status put_owned(lmq_meta *m, const char *key, lmq_value *v, bool *refuse_dup)
{
    if (!m || !key) {
        value_clear(v);
        return lmq_error(LMQ_ERR_INVALID_ARG, "metadata: null map or key");
    }
    /* one probe for the usual case of a new key: decoding a file's keys */
    size_t at = refuse_dup ? SIZE_MAX : lmq_strindex_find(&m->ix, key, key_at, m);
    if (at != SIZE_MAX) {
        kv *e = &m->items[at];
        value_clear(&e->val);
        e->val = *v;
        memset(v, 0, sizeof *v);
        return LMQ_OK;
    }
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        kv *items = realloc(m->items, cap * sizeof *items);
        if (!items) {
            value_clear(v);
            return lmq_error(LMQ_ERR_NOMEM, "metadata: cannot grow");
        }
        m->items = items;
        m->cap = cap;
    }
    char *k = dup_bytes(key, strlen(key));
    if (!k) {
        value_clear(v);
        return lmq_error(LMQ_ERR_NOMEM, "metadata: key copy");
    }
    m->items[m->n].key = k;
    m->items[m->n].val = *v;
    size_t dup = SIZE_MAX;
    lmq_status s = lmq_strindex_add(&m->ix, m->n, key_at, m, &dup);
    if (s || dup != SIZE_MAX) {
        free(k);
        value_clear(v);
        if (refuse_dup && dup != SIZE_MAX) *refuse_dup = true;
        return s;
    }
    m->n++;
    memset(v, 0, sizeof *v);
    return LMQ_OK;
}

lmq_status lmq_meta_set_value(lmq_meta *m, const char *key, const lmq_value *src)
{
    lmq_value v;
    lmq_status s = value_copy(&v, src, 0);
    if (s) return s;
    return put_owned(m, key, &v, NULL);
}

static lmq_status set_scalar(lmq_meta *m, const char *key, lmq_vtype t, uint64_t u, int64_t i,
                             double f, bool b)
{
    lmq_value v;
    memset(&v, 0, sizeof v);
    v.type = t;
    if (is_unsigned(t)) v.u = u;
    else if (is_signed(t)) v.i = i;
    else if (t == LMQ_V_F32 || t == LMQ_V_F64) v.f = f;
    else v.b = b;
    return put_owned(m, key, &v, NULL);
}

lmq_status lmq_meta_set_u32(lmq_meta *m, const char *k, uint32_t v) { return set_scalar(m, k, LMQ_V_U32, v, 0, 0, 0); }
lmq_status lmq_meta_set_i32(lmq_meta *m, const char *k, int32_t v) { return set_scalar(m, k, LMQ_V_I32, 0, v, 0, 0); }
lmq_status lmq_meta_set_u64(lmq_meta *m, const char *k, uint64_t v) { return set_scalar(m, k, LMQ_V_U64, v, 0, 0, 0); }
lmq_status lmq_meta_set_f32(lmq_meta *m, const char *k, float v) { return set_scalar(m, k, LMQ_V_F32, 0, 0, v, 0); }
lmq_status lmq_meta_set_f64(lmq_meta *m, const char *k, double v) { return set_scalar(m, k, LMQ_V_F64, 0, 0, v, 0); }
lmq_status lmq_meta_set_bool(lmq_meta *m, const char *k, bool v) { return set_scalar(m, k, LMQ_V_BOOL, 0, 0, 0, v); }

lmq_status lmq_meta_set_strn(lmq_meta *m, const char *key, const char *s, size_t len)
{
    lmq_value v;
    memset(&v, 0, sizeof v);
    v.type = LMQ_V_STRING;
    v.s.ptr = dup_bytes(s ? s : "", s ? len : 0);
    v.s.len = s ? len : 0;
    if (!v.s.ptr) return lmq_error(LMQ_ERR_NOMEM, "metadata: string copy for %s", key);
    return put_owned(m, key, &v, NULL);
}

lmq_status lmq_meta_set_str(lmq_meta *m, const char *key, const char *s)
{
    return lmq_meta_set_strn(m, key, s, s ? strlen(s) : 0);
}

lmq_status lmq_meta_set_arr(lmq_meta *m, const char *key, lmq_vtype elem, const void *data,
                            uint64_t n)
{
    size_t esz = lmq_vtype_size(elem);
    if (!esz) return lmq_error(LMQ_ERR_INVALID_ARG, "metadata %s: array element type %s", key, lmq_vtype_name(elem));
    lmq_value src;
    memset(&src, 0, sizeof src);
    src.type = LMQ_V_ARRAY;
    src.arr.elem = elem;
    src.arr.n = n;
    src.arr.data = (void *)data;
    return lmq_meta_set_value(m, key, &src);
}

lmq_status lmq_meta_set_str_arr(lmq_meta *m, const char *key, const char *const *strs,
                                const size_t *lens, uint64_t n)
{
    lmq_value v;
    memset(&v, 0, sizeof v);
    v.type = LMQ_V_ARRAY;
    v.arr.elem = LMQ_V_STRING;
    v.arr.data = calloc(n ? (size_t)n : 1, sizeof(lmq_str));
    if (!v.arr.data) return lmq_error(LMQ_ERR_NOMEM, "metadata %s: %llu strings", key, (unsigned long long)n);
    lmq_str *d = v.arr.data;
    for (uint64_t i = 0; i < n; i++) {
        size_t len = lens ? lens[i] : strlen(strs[i]);
        d[i].ptr = dup_bytes(strs[i], len);
        d[i].len = len;
        v.arr.n = i + 1;
        if (!d[i].ptr) {
            value_clear(&v);
            return lmq_error(LMQ_ERR_NOMEM, "metadata %s: string copy", key);
        }
    }
    return put_owned(m, key, &v, NULL);
}

lmq_status lmq_meta_remove(lmq_meta *m, const char *key)
{
    kv *e = find_kv(m, key);
    if (!e) return lmq_error(LMQ_ERR_NOT_FOUND, "metadata key '%s' not found", key);
    free(e->key);
    value_clear(&e->val);
    size_t i = (size_t)(e - m->items);
    memmove(&m->items[i], &m->items[i + 1], (m->n - i - 1) * sizeof(kv));
    m->n--;
    /* positions after i moved: rebuild the index (removal is rare) */
    lmq_strindex_clear(&m->ix);
    for (size_t j = 0; j < m->n; j++) {
        lmq_status s = lmq_strindex_add(&m->ix, j, key_at, m, NULL);
        if (s) return s;
    }
    return LMQ_OK;
}

/* ---------------------------------------------------------------- getters */

static lmq_status get_found(const lmq_meta *m, const char *key, const lmq_value **v)
{
    *v = lmq_meta_find(m, key);
    if (!*v) return lmq_error(LMQ_ERR_NOT_FOUND, "metadata key '%s' is missing", key);
    return LMQ_OK;
}

lmq_status lmq_meta_get_u64(const lmq_meta *m, const char *key, uint64_t *out)
{
    const lmq_value *v;
    lmq_status s = get_found(m, key, &v);
    if (s) return s;
    if (is_unsigned(v->type)) *out = v->u;
    else if (is_signed(v->type) && v->i >= 0) *out = (uint64_t)v->i;
    else return lmq_error(LMQ_ERR_FORMAT, "metadata key '%s': expected a non-negative integer, found %s", key, lmq_vtype_name(v->type));
    return LMQ_OK;
}

lmq_status lmq_meta_get_i64(const lmq_meta *m, const char *key, int64_t *out)
{
    const lmq_value *v;
    lmq_status s = get_found(m, key, &v);
    if (s) return s;
    if (is_signed(v->type)) *out = v->i;
    else if (is_unsigned(v->type) && v->u <= (uint64_t)INT64_MAX) *out = (int64_t)v->u;
    else return lmq_error(LMQ_ERR_FORMAT, "metadata key '%s': expected an integer, found %s", key, lmq_vtype_name(v->type));
    return LMQ_OK;
}

lmq_status lmq_meta_get_f64(const lmq_meta *m, const char *key, double *out)
{
    const lmq_value *v;
    lmq_status s = get_found(m, key, &v);
    if (s) return s;
    if (v->type == LMQ_V_F32 || v->type == LMQ_V_F64) *out = v->f;
    else if (is_signed(v->type)) *out = (double)v->i;
    else if (is_unsigned(v->type)) *out = (double)v->u;
    else return lmq_error(LMQ_ERR_FORMAT, "metadata key '%s': expected a number, found %s", key, lmq_vtype_name(v->type));
    return LMQ_OK;
}

lmq_status lmq_meta_get_bool(const lmq_meta *m, const char *key, bool *out)
{
    const lmq_value *v;
    lmq_status s = get_found(m, key, &v);
    if (s) return s;
    if (v->type == LMQ_V_BOOL) *out = v->b;
    else if (is_unsigned(v->type)) *out = v->u != 0;
    else if (is_signed(v->type)) *out = v->i != 0;
    else return lmq_error(LMQ_ERR_FORMAT, "metadata key '%s': expected a bool, found %s", key, lmq_vtype_name(v->type));
    return LMQ_OK;
}

lmq_status lmq_meta_get_str(const lmq_meta *m, const char *key, const char **out, uint64_t *len)
{
    const lmq_value *v;
    lmq_status s = get_found(m, key, &v);
    if (s) return s;
    if (v->type != LMQ_V_STRING)
        return lmq_error(LMQ_ERR_FORMAT, "metadata key '%s': expected a string, found %s", key, lmq_vtype_name(v->type));
    *out = v->s.ptr;
    if (len) *len = v->s.len;
    return LMQ_OK;
}

lmq_status lmq_meta_get_arr(const lmq_meta *m, const char *key, lmq_vtype *elem, uint64_t *n,
                            const void **data)
{
    const lmq_value *v;
    lmq_status s = get_found(m, key, &v);
    if (s) return s;
    if (v->type != LMQ_V_ARRAY)
        return lmq_error(LMQ_ERR_FORMAT, "metadata key '%s': expected an array, found %s", key, lmq_vtype_name(v->type));
    if (elem) *elem = v->arr.elem;
    if (n) *n = v->arr.n;
    if (data) *data = v->arr.data;
    return LMQ_OK;
}

/* ---------------------------------------------------------------- encoding */

void lmq_buf_put(lmq_buf *b, const void *data, size_t n)
{
    if (b->oom) return;
    if (n > b->cap - b->len) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap - b->len < n) {
            if (cap > SIZE_MAX / 2) { b->oom = true; return; }
            cap *= 2;
        }
        uint8_t *p = realloc(b->p, cap);
        if (!p) { b->oom = true; return; }
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, data, n);
    b->len += n;
}

void lmq_buf_u32(lmq_buf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    lmq_buf_put(b, x, 4);
}

void lmq_buf_u64(lmq_buf *b, uint64_t v)
{
    lmq_buf_u32(b, (uint32_t)v);
    lmq_buf_u32(b, (uint32_t)(v >> 32));
}

void lmq_buf_str(lmq_buf *b, const char *s, uint64_t len)
{
    lmq_buf_u64(b, len);
    lmq_buf_put(b, s, (size_t)len);
}

static void put_scalar(lmq_buf *b, lmq_vtype t, const void *p)
{
    /* the host is little-endian (checked at container open); copy raw */
    lmq_buf_put(b, p, lmq_vtype_size(t));
}

static void encode_value(lmq_buf *b, const lmq_value *v);

static void encode_array(lmq_buf *b, const lmq_value *v)
{
    lmq_buf_u32(b, (uint32_t)v->arr.elem);
    lmq_buf_u64(b, v->arr.n);
    if (v->arr.elem == LMQ_V_STRING) {
        const lmq_str *s = v->arr.data;
        for (uint64_t i = 0; i < v->arr.n; i++) lmq_buf_str(b, s[i].ptr, s[i].len);
    } else if (v->arr.elem == LMQ_V_ARRAY) {
        const lmq_value *items = v->arr.data;
        for (uint64_t i = 0; i < v->arr.n; i++) encode_array(b, &items[i]);
    } else {
        lmq_buf_put(b, v->arr.data, (size_t)v->arr.n * lmq_vtype_size(v->arr.elem));
    }
}

static void encode_value(lmq_buf *b, const lmq_value *v)
{
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
            float f32; uint64_t u64; int64_t i64; double f64; } x;
    switch (v->type) {
    case LMQ_V_U8: x.u8 = (uint8_t)v->u; break;
    case LMQ_V_I8: x.i8 = (int8_t)v->i; break;
    case LMQ_V_U16: x.u16 = (uint16_t)v->u; break;
    case LMQ_V_I16: x.i16 = (int16_t)v->i; break;
    case LMQ_V_U32: x.u32 = (uint32_t)v->u; break;
    case LMQ_V_I32: x.i32 = (int32_t)v->i; break;
    case LMQ_V_F32: x.f32 = (float)v->f; break;
    case LMQ_V_BOOL: x.u8 = v->b ? 1 : 0; break;
    case LMQ_V_U64: x.u64 = v->u; break;
    case LMQ_V_I64: x.i64 = v->i; break;
    case LMQ_V_F64: x.f64 = v->f; break;
    case LMQ_V_STRING: lmq_buf_str(b, v->s.ptr, v->s.len); return;
    case LMQ_V_ARRAY: encode_array(b, v); return;
    default: b->oom = true; return;
    }
    put_scalar(b, v->type, &x);
}

lmq_status lmq_meta_encode(const lmq_meta *m, uint8_t **out, size_t *out_len)
{
    lmq_buf b = {0};
    for (size_t i = 0; i < m->n; i++) {
        lmq_buf_str(&b, m->items[i].key, strlen(m->items[i].key));
        lmq_buf_u32(&b, (uint32_t)m->items[i].val.type);
        encode_value(&b, &m->items[i].val);
    }
    if (b.oom) {
        free(b.p);
        return lmq_error(LMQ_ERR_NOMEM, "metadata: cannot encode");
    }
    *out = b.p ? b.p : malloc(1);
    *out_len = b.len;
    return *out ? LMQ_OK : lmq_error(LMQ_ERR_NOMEM, "metadata: cannot encode");
}

/* ---------------------------------------------------------------- decoding */

static lmq_status decode_str(lmq_cursor *c, lmq_str *s, uint64_t limit, const char *what)
{
    uint64_t len = lmq_cur_u64(c);
    if (c->bad || len > limit || len > c->len - c->pos)
        return lmq_error(LMQ_ERR_FORMAT, "%s: string length %llu at byte %zu exceeds the data", what,
                         (unsigned long long)len, c->pos);
    s->ptr = dup_bytes((const char *)c->p + c->pos, len);
    if (!s->ptr) return lmq_error(LMQ_ERR_NOMEM, "%s: string of %llu bytes", what, (unsigned long long)len);
    s->len = len;
    c->pos += (size_t)len;
    return LMQ_OK;
}

static lmq_status decode_value(lmq_cursor *c, lmq_vtype t, lmq_value *v, int depth, const char *key);

static lmq_status decode_array(lmq_cursor *c, lmq_value *v, int depth, const char *key)
{
    if (depth > LMQ_MAX_ARRAY_DEPTH)
        return lmq_error(LMQ_ERR_LIMIT, "metadata key '%s': arrays nested deeper than %d", key, LMQ_MAX_ARRAY_DEPTH);
    uint32_t et = lmq_cur_u32(c);
    uint64_t n = lmq_cur_u64(c);
    if (c->bad) return lmq_error(LMQ_ERR_FORMAT, "metadata key '%s': truncated array header", key);
    if (et >= LMQ_V_COUNT)
        return lmq_error(LMQ_ERR_FORMAT, "metadata key '%s': unknown array element type %u", key, et);
    v->type = LMQ_V_ARRAY;
    v->arr.elem = (lmq_vtype)et;
    size_t remaining = c->len - c->pos;
    /* minimal encoded size per element bounds the count before allocating */
    size_t min_sz = et == LMQ_V_STRING ? 8 : et == LMQ_V_ARRAY ? 12 : lmq_vtype_size((lmq_vtype)et);
    if (n > remaining / min_sz)
        return lmq_error(LMQ_ERR_FORMAT, "metadata key '%s': array of %llu elements exceeds the data", key, (unsigned long long)n);
    size_t esz = et == LMQ_V_STRING ? sizeof(lmq_str) : et == LMQ_V_ARRAY ? sizeof(lmq_value) : min_sz;
    v->arr.data = calloc(n ? (size_t)n : 1, esz);
    if (!v->arr.data) return lmq_error(LMQ_ERR_NOMEM, "metadata key '%s': array of %llu elements", key, (unsigned long long)n);
    if (et == LMQ_V_STRING) {
        lmq_str *s = v->arr.data;
        for (uint64_t i = 0; i < n; i++) {
            lmq_status st = decode_str(c, &s[i], LMQ_MAX_STRING_LEN, key);
            if (st) return st;
            v->arr.n = i + 1;
        }
    } else if (et == LMQ_V_ARRAY) {
        lmq_value *items = v->arr.data;
        for (uint64_t i = 0; i < n; i++) {
            v->arr.n = i + 1;
            lmq_status st = decode_array(c, &items[i], depth + 1, key);
            if (st) return st;
        }
    } else {
        memcpy(v->arr.data, c->p + c->pos, (size_t)n * esz);
        c->pos += (size_t)n * esz;
        v->arr.n = n;
        if (et == LMQ_V_BOOL) {
            uint8_t *bb = v->arr.data;
            for (uint64_t i = 0; i < n; i++)
                if (bb[i] > 1) return lmq_error(LMQ_ERR_FORMAT, "metadata key '%s': bool array value %u", key, bb[i]);
        }
    }
    return LMQ_OK;
}

static lmq_status decode_value(lmq_cursor *c, lmq_vtype t, lmq_value *v, int depth, const char *key)
{
    memset(v, 0, sizeof *v);
    v->type = t;
    const uint8_t *p;
    size_t sz = lmq_vtype_size(t);
    if (t == LMQ_V_STRING) return decode_str(c, &v->s, LMQ_MAX_STRING_LEN, key);
    if (t == LMQ_V_ARRAY) return decode_array(c, v, depth, key);
    if (!lmq_cur_need(c, sz)) return lmq_error(LMQ_ERR_FORMAT, "metadata key '%s': truncated value", key);
    p = c->p + c->pos;
    c->pos += sz;
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
            float f32; uint64_t u64; int64_t i64; double f64; } x;
    memcpy(&x, p, sz);
    switch (t) {
    case LMQ_V_U8: v->u = x.u8; break;
    case LMQ_V_I8: v->i = x.i8; break;
    case LMQ_V_U16: v->u = x.u16; break;
    case LMQ_V_I16: v->i = x.i16; break;
    case LMQ_V_U32: v->u = x.u32; break;
    case LMQ_V_I32: v->i = x.i32; break;
    case LMQ_V_F32: v->f = x.f32; break;
    case LMQ_V_BOOL:
        if (x.u8 > 1) return lmq_error(LMQ_ERR_FORMAT, "metadata key '%s': bool value %u", key, x.u8);
        v->b = x.u8 != 0;
        break;
    case LMQ_V_U64: v->u = x.u64; break;
    case LMQ_V_I64: v->i = x.i64; break;
    case LMQ_V_F64: v->f = x.f64; break;
    default: break;
    }
    return LMQ_OK;
}

lmq_status lmq_meta_decode(const uint8_t *buf, size_t len, uint64_t n_kv, lmq_meta *m,
                           size_t *consumed)
{
    lmq_cursor c = {buf, len, 0, false};
    /* each entry takes at least 8 (key length) + 4 (type) + 1 bytes */
    if (n_kv > len / 13) return lmq_error(LMQ_ERR_FORMAT, "metadata: %llu entries cannot fit in %zu bytes", (unsigned long long)n_kv, len);
    for (uint64_t i = 0; i < n_kv; i++) {
        lmq_str key = {0};
        lmq_status s = decode_str(&c, &key, LMQ_MAX_KEY_LEN, "metadata key");
        if (s) return s;
        uint32_t t = lmq_cur_u32(&c);
        if (c.bad) {
            lmq_error(LMQ_ERR_FORMAT, "metadata key '%.200s': truncated value type", key.ptr);
            free(key.ptr);
            return LMQ_ERR_FORMAT;
        }
        if (t >= LMQ_V_COUNT) {
            lmq_error(LMQ_ERR_FORMAT, "metadata key '%.200s': unknown value type %u", key.ptr, t);
            free(key.ptr);
            return LMQ_ERR_FORMAT;
        }
        if (strlen(key.ptr) != key.len || key.len == 0) {
            free(key.ptr);
            return lmq_error(LMQ_ERR_FORMAT, "metadata entry %llu: empty key or key with NUL byte", (unsigned long long)i);
        }
        lmq_value v;
        s = decode_value(&c, (lmq_vtype)t, &v, 0, key.ptr);
        if (s) {
            value_clear(&v);
            free(key.ptr);
            return s;
        }
        bool dup = false;
        s = put_owned(m, key.ptr, &v, &dup);
        if (dup) {
            lmq_error(LMQ_ERR_FORMAT, "metadata key '%.200s' appears twice", key.ptr);
            free(key.ptr);
            return LMQ_ERR_FORMAT;
        }
        free(key.ptr);
        if (s) return s;
    }
    if (consumed) *consumed = c.pos;
    return LMQ_OK;
}
