/* jinja_eval.c — walks the chat template AST: statements, expressions, scopes
 * (a frame per loop iteration, macro call and with-block, as Jinja scopes
 * `set`), macros and calls, and Jinja's sandboxed attribute/item lookup. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_internal.h"

/* ====================================================================== errors */

_Noreturn void lmqj_fail(lmqj_ctx *c, const lmqj_node *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    c->err_pos = at ? at->pos : UINT32_MAX;
    longjmp(c->jb, 1);
}

_Noreturn void lmqj_fail_limit(lmqj_ctx *c, const lmqj_node *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    c->err_pos = at ? at->pos : UINT32_MAX;
    c->err_limit = true;
    longjmp(c->jb, 1);
}

_Noreturn void lmqj_fail_undefined(lmqj_ctx *c, const lmqj_node *at, lmqj_value u)
{
    const char *name = u.u.uname ? u.u.uname : "";
    switch (u.ukind) {
    case JU_NAME: lmqj_fail(c, at, "UndefinedError: '%s' is undefined", name);
    case JU_ATTR:
        lmqj_fail(c, at, "UndefinedError: '%s' has no attribute '%s'", lmqj_type_obj_name(u.uobj), name);
    case JU_ITEM:
        lmqj_fail(c, at, "UndefinedError: %s has no element %s", lmqj_type_obj_name(u.uobj), name);
    case JU_UNSAFE:
        lmqj_fail(c, at, "SecurityError: access to attribute '%s' of '%s' object is unsafe.", name,
                  lmqj_type_name((lmqj_value){.t = u.uobj}));
    default: lmqj_fail(c, at, "UndefinedError: %s", name);
    }
}

void lmqj_step(lmqj_ctx *c, const lmqj_node *at)
{
    if (++c->steps > c->lim.max_steps)
        lmqj_fail_limit(c, at, "template exceeded the step limit (%llu)", (unsigned long long)c->lim.max_steps);
}

/* ====================================================================== frames */

lmqj_frame *lmqj_frame_new(lmqj_ctx *c, lmqj_frame *parent)
{
    lmqj_frame *f = lmqj_alloc(c, sizeof(lmqj_frame));
    f->parent = parent;
    return f;
}

static lmqj_value *frame_find(lmqj_frame *f, const char *name)
{
    for (uint32_t i = 0; i < f->n; i++)
        if (!strcmp(f->names[i], name)) return &f->vals[i];
    return NULL;
}

void lmqj_frame_set(lmqj_ctx *c, lmqj_frame *f, const char *name, lmqj_value v)
{
    lmqj_value *slot = frame_find(f, name);
    if (slot) { *slot = v; return; }
    if (f->n == f->cap) {
        uint32_t nc = f->cap ? f->cap * 2 : 8;
        const char **nn = lmqj_alloc(c, nc * sizeof(char *));
        lmqj_value *nv = lmqj_alloc(c, nc * sizeof(lmqj_value));
        if (f->n) {
            memcpy(nn, f->names, f->n * sizeof(char *));
            memcpy(nv, f->vals, f->n * sizeof(lmqj_value));
        }
        f->names = nn;
        f->vals = nv;
        f->cap = nc;
    }
    f->names[f->n] = name;
    f->vals[f->n] = v;
    f->n++;
}

lmqj_value lmqj_lookup(lmqj_ctx *c, lmqj_frame *f, const char *name)
{
    for (; f; f = f->parent) {
        lmqj_value *v = frame_find(f, name);
        if (v) return *v;
    }
    lmqj_value g = lmqj_global(c, name);
    if (g.t != JV_UNDEF) return g;
    return lmqj_undef_named(JU_NAME, 0, name);
}

void lmqj_emit(lmqj_ctx *c, const char *s, size_t n) { lmqj_buf_add(c->out, s, n); }

/* ====================================================================== lookup */

static bool hashable(lmqj_value v)
{
    if (v.t == JV_LIST || v.t == JV_DICT) return false;
    if (v.t == JV_TUPLE)
        for (size_t i = 0; i < v.u.l->n; i++)
            if (!hashable(v.u.l->v[i])) return false;
    return true;
}

static lmqj_value loop_attr(lmqj_ctx *c, lmqj_value lv, const char *name)
{
    lmqj_loop *L = lv.u.loop;
    int64_t i0 = L->index0, n = L->length;
    if (!strcmp(name, "index")) return lmqj_int(i0 + 1);
    if (!strcmp(name, "index0")) return lmqj_int(i0);
    if (!strcmp(name, "revindex")) return lmqj_int(n - i0);
    if (!strcmp(name, "revindex0")) return lmqj_int(n - i0 - 1);
    if (!strcmp(name, "first")) return lmqj_bool(i0 == 0);
    if (!strcmp(name, "last")) return lmqj_bool(i0 == n - 1);
    if (!strcmp(name, "length")) return lmqj_int(n);
    if (!strcmp(name, "depth")) return lmqj_int(L->depth0 + 1);
    if (!strcmp(name, "depth0")) return lmqj_int(L->depth0);
    if (!strcmp(name, "previtem"))
        return i0 > 0 ? L->items->v[i0 - 1] : lmqj_undef_named(JU_HINT, 0, "there is no previous item");
    if (!strcmp(name, "nextitem"))
        return i0 + 1 < n ? L->items->v[i0 + 1] : lmqj_undef_named(JU_HINT, 0, "there is no next item");
    lmqj_value m = lmqj_method(c, lv, name);
    if (m.t != JV_UNDEF) return m;
    return lmqj_undef_named(JU_ATTR, JV_LOOP, name);
}

/* Python attribute lookup only (methods, namespace attributes, loop fields). */
bool lmqj_pyattr(lmqj_ctx *c, lmqj_value obj, const char *name, lmqj_value *out)
{
    if (name[0] == '_') return false; /* the sandbox hides private attributes */
    if (obj.t == JV_NS) {
        lmqj_value *v = lmqj_dict_get_str(obj.u.d, name);
        if (v) { *out = *v; return true; }
        return false;
    }
    if (obj.t == JV_LOOP) {
        *out = loop_attr(c, obj, name);
        return out->t != JV_UNDEF || out->ukind != JU_ATTR;
    }
    lmqj_value m = lmqj_method(c, obj, name);
    if (m.t == JV_UNDEF && m.ukind != JU_UNSAFE) return false;
    *out = m;
    return true;
}

/* Python obj[key]; false on TypeError/LookupError. */
static bool py_getitem(lmqj_ctx *c, const lmqj_node *at, lmqj_value obj, lmqj_value key,
                       lmqj_value *out)
{
    if (obj.t == JV_DICT) {
        if (!hashable(key)) return false;
        lmqj_value *v = lmqj_dict_get(c, obj.u.d, key);
        if (!v) return false;
        *out = *v;
        return true;
    }
    if (obj.gen) return false; /* iterators and views are not subscriptable */
    if ((lmqj_is_seq(obj) || obj.t == JV_STR) && (key.t == JV_INT || key.t == JV_BOOL)) {
        int64_t i = key.t == JV_INT ? key.u.i : key.u.b;
        if (obj.t == JV_STR) {
            /* index by code point */
            const char *s = obj.u.s->s;
            size_t n = obj.u.s->len, cnt = lmqj_utf8_count(s, n);
            if (i < 0) i += (int64_t)cnt;
            if (i < 0 || (size_t)i >= cnt) return false;
            size_t p = 0;
            for (int64_t k = 0; k < i; k++) lmqj_utf8_next(s, n, &p);
            size_t st = p;
            lmqj_utf8_next(s, n, &p);
            *out = lmqj_strn(c, s + st, p - st);
            return true;
        }
        int64_t n = (int64_t)obj.u.l->n;
        if (i < 0) i += n;
        if (i < 0 || i >= n) return false;
        *out = obj.u.l->v[i];
        return true;
    }
    (void)at;
    return false;
}

lmqj_value lmqj_getattr(lmqj_ctx *c, const lmqj_node *at, lmqj_value obj, const char *name)
{
    if (obj.t == JV_UNDEF) lmqj_fail_undefined(c, at, obj);
    lmqj_value v;
    if (lmqj_pyattr(c, obj, name, &v)) return v;
    lmqj_value key = lmqj_cstr(c, name);
    if (py_getitem(c, at, obj, key, &v)) return v;
    return lmqj_undef_named(JU_ATTR, obj.t, name);
}

lmqj_value lmqj_getitem(lmqj_ctx *c, const lmqj_node *at, lmqj_value obj, lmqj_value key)
{
    if (obj.t == JV_UNDEF) lmqj_fail_undefined(c, at, obj);
    lmqj_value v;
    if (py_getitem(c, at, obj, key, &v)) return v;
    if (key.t == JV_STR) {
        if (lmqj_pyattr(c, obj, key.u.s->s, &v)) return v;
        return lmqj_undef_named(JU_ATTR, obj.t, key.u.s->s);
    }
    lmqj_buf b;
    lmqj_buf_init(&b, c);
    lmqj_repr(&b, at, key);
    return lmqj_undef_named(JU_ITEM, obj.t, lmqj_buf_value(&b).u.s->s);
}

static int64_t clamp_index(int64_t i, int64_t n, bool neg_step)
{
    if (i < 0) {
        i += n;
        if (i < 0) i = neg_step ? -1 : 0;
    } else if (i >= n) {
        i = neg_step ? n - 1 : n;
    }
    return i;
}

static int64_t slice_arg(lmqj_ctx *c, lmqj_frame *f, const lmqj_node *e, bool *present)
{
    *present = false;
    if (!e) return 0;
    lmqj_value v = lmqj_eval(c, f, e);
    if (v.t == JV_NONE) return 0;
    if (v.t == JV_BOOL) { *present = true; return v.u.b; }
    if (v.t != JV_INT)
        lmqj_fail(c, e, "TypeError: slice indices must be integers or None");
    *present = true;
    return v.u.i;
}

static lmqj_value do_slice(lmqj_ctx *c, lmqj_frame *f, const lmqj_node *at, lmqj_value obj,
                           const lmqj_node *sl)
{
    bool has_a, has_b, has_s;
    int64_t a = slice_arg(c, f, sl->a, &has_a), b = slice_arg(c, f, sl->b, &has_b);
    int64_t step = slice_arg(c, f, sl->c, &has_s);
    if (!has_s) step = 1;
    if (obj.t == JV_UNDEF) lmqj_fail_undefined(c, at, obj);
    if (step == 0) lmqj_fail(c, at, "ValueError: slice step cannot be zero");
    if (obj.t == JV_DICT) lmqj_fail(c, at, "TypeError: unhashable type: 'slice'");
    if (!(obj.t == JV_STR || lmqj_is_seq(obj)) || obj.gen) /* slices subscript directly */
        lmqj_fail(c, at, "TypeError: '%s' object is not subscriptable", lmqj_type_name(obj));
    /* work on code points for strings */
    size_t n = 0;
    uint32_t *cps = NULL;
    if (obj.t == JV_STR) {
        const char *s = obj.u.s->s;
        size_t len = obj.u.s->len;
        cps = lmqj_alloc(c, (len + 1) * sizeof(uint32_t));
        for (size_t i = 0; i < len;) cps[n++] = lmqj_utf8_next(s, len, &i);
    } else {
        n = obj.u.l->n;
    }
    int64_t N = (int64_t)n;
    a = has_a ? clamp_index(a, N, step < 0) : (step < 0 ? N - 1 : 0);
    b = has_b ? clamp_index(b, N, step < 0) : (step < 0 ? -1 : N);
    if (obj.t == JV_STR) {
        lmqj_buf out;
        lmqj_buf_init(&out, c);
        for (int64_t i = a; step > 0 ? i < b : i > b;) {
            char tmp[4];
            lmqj_buf_add(&out, tmp, lmqj_utf8_put(cps[i], tmp));
            if (__builtin_add_overflow(i, step, &i)) break;
        }
        lmqj_value r = lmqj_buf_value(&out);
        r.safe = obj.safe;
        return r;
    }
    lmqj_value r = lmqj_list_new(c, 0);
    r.t = obj.t;
    for (int64_t i = a; step > 0 ? i < b : i > b;) {
        lmqj_list_push(c, r, obj.u.l->v[i]);
        if (__builtin_add_overflow(i, step, &i)) break;
    }
    return r;
}

const lmqj_list *lmqj_iterate(lmqj_ctx *c, const lmqj_node *at, lmqj_value v)
{
    switch (v.t) {
    case JV_UNDEF: {
        if (v.ukind == JU_UNSAFE) lmqj_fail_undefined(c, at, v);
        lmqj_list *l = lmqj_alloc(c, sizeof(lmqj_list));
        return l;
    }
    case JV_LIST: case JV_TUPLE:
        if (v.gen == JG_GENERATOR || v.gen == JG_REVITER) { /* an iterator is used up by one pass */
            if (v.u.l->consumed) return lmqj_alloc(c, sizeof(lmqj_list));
            v.u.l->consumed = true;
        }
        return v.u.l;
    case JV_DICT: {
        lmqj_value l = lmqj_list_new(c, v.u.d->n);
        for (size_t i = 0; i < v.u.d->n; i++) lmqj_list_push(c, l, v.u.d->k[i]);
        return l.u.l;
    }
    case JV_STR: {
        lmqj_value l = lmqj_list_new(c, 0);
        const char *s = v.u.s->s;
        size_t n = v.u.s->len;
        for (size_t i = 0; i < n;) {
            size_t st = i;
            lmqj_utf8_next(s, n, &i);
            lmqj_value ch = lmqj_strn(c, s + st, i - st);
            ch.safe = v.safe;
            lmqj_list_push(c, l, ch);
        }
        return l.u.l;
    }
    default:
        lmqj_fail(c, at, "TypeError: '%s' object is not iterable", lmqj_type_name(v));
    }
}

/* ====================================================================== operators */

static lmqj_value str_concat(lmqj_ctx *c, lmqj_value a, lmqj_value b)
{
    bool safe = a.safe || b.safe;
    if (safe) {
        /* Markup + str escapes the plain side */
        if (!a.safe) a = lmqj_escape(c, NULL, a);
        if (!b.safe) b = lmqj_escape(c, NULL, b);
    }
    lmqj_buf buf;
    lmqj_buf_init(&buf, c);
    lmqj_buf_add(&buf, a.u.s->s, a.u.s->len);
    lmqj_buf_add(&buf, b.u.s->s, b.u.s->len);
    lmqj_value r = lmqj_buf_value(&buf);
    r.safe = safe;
    return r;
}

static lmqj_value repeat(lmqj_ctx *c, const lmqj_node *at, lmqj_value seq, int64_t n)
{
    if (n < 0) n = 0;
    if (seq.t == JV_STR) {
        if (n && seq.u.s->len > c->lim.max_output / (uint64_t)n)
            lmqj_fail_limit(c, at, "string repetition exceeds the output limit");
        lmqj_buf b;
        lmqj_buf_init(&b, c);
        for (int64_t i = 0; i < n; i++) lmqj_buf_add(&b, seq.u.s->s, seq.u.s->len);
        lmqj_value r = lmqj_buf_value(&b);
        r.safe = seq.safe;
        return r;
    }
    if (n && seq.u.l->n > (c->lim.max_memory / sizeof(lmqj_value)) / (uint64_t)n)
        lmqj_fail_limit(c, at, "list repetition exceeds the memory limit");
    lmqj_value r = lmqj_list_new(c, seq.u.l->n * (size_t)n);
    r.t = seq.t;
    for (int64_t i = 0; i < n; i++)
        for (size_t k = 0; k < seq.u.l->n; k++) lmqj_list_push(c, r, seq.u.l->v[k]);
    return r;
}

static _Noreturn void bad_operands(lmqj_ctx *c, const lmqj_node *at, int op, lmqj_value a,
                                   lmqj_value b)
{
    static const char *sym[] = {"", "+", "-", "*", "/", "//", "%", "** or pow()"};
    lmqj_fail(c, at, "TypeError: unsupported operand type(s) for %s: '%s' and '%s'",
              op >= OP_ADD && op <= OP_POW ? sym[op] : "?", lmqj_type_name(a), lmqj_type_name(b));
}

static int64_t ival(lmqj_value v) { return v.t == JV_BOOL ? v.u.b : v.u.i; }

static lmqj_value int_op(lmqj_ctx *c, const lmqj_node *at, int op, int64_t x, int64_t y)
{
    int64_t r;
    switch (op) {
    case OP_ADD: if (__builtin_add_overflow(x, y, &r)) goto overflow; return lmqj_int(r);
    case OP_SUB: if (__builtin_sub_overflow(x, y, &r)) goto overflow; return lmqj_int(r);
    case OP_MUL: if (__builtin_mul_overflow(x, y, &r)) goto overflow; return lmqj_int(r);
    case OP_DIV:
        if (y == 0) lmqj_fail(c, at, "ZeroDivisionError: division by zero");
        return lmqj_float((double)x / (double)y);
    case OP_FLOORDIV: case OP_MOD: {
        if (y == 0) lmqj_fail(c, at, "ZeroDivisionError: integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) goto overflow;
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) { q--; m += y; }
        return lmqj_int(op == OP_MOD ? m : q);
    }
    case OP_POW: {
        if (y < 0) return lmqj_float(pow((double)x, (double)y));
        r = 1;
        int64_t base = x;
        while (y) {
            if (y & 1) { if (__builtin_mul_overflow(r, base, &r)) goto overflow; }
            y >>= 1;
            if (y && __builtin_mul_overflow(base, base, &base)) goto overflow;
        }
        return lmqj_int(r);
    }
    default: break;
    }
overflow:
    lmqj_fail(c, at, "OverflowError: integer result out of range");
}

static lmqj_value float_op(lmqj_ctx *c, const lmqj_node *at, int op, double x, double y)
{
    switch (op) {
    case OP_ADD: return lmqj_float(x + y);
    case OP_SUB: return lmqj_float(x - y);
    case OP_MUL: return lmqj_float(x * y);
    case OP_DIV:
        if (y == 0) lmqj_fail(c, at, "ZeroDivisionError: float division by zero");
        return lmqj_float(x / y);
    case OP_FLOORDIV: case OP_MOD: {
        if (y == 0) lmqj_fail(c, at, "ZeroDivisionError: float modulo");
        double m = fmod(x, y);
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        if (op == OP_MOD) return lmqj_float(m == 0 ? copysign(0.0, y) : m);
        return lmqj_float(floor((x - m) / y + 0.0));
    }
    case OP_POW:
        if (x == 0 && y < 0) lmqj_fail(c, at, "ZeroDivisionError: 0.0 cannot be raised to a negative power");
        if (x < 0 && y != floor(y)) lmqj_fail(c, at, "ValueError: complex result of a power");
        return lmqj_float(pow(x, y));
    default: return lmqj_float(0);
    }
}

lmqj_value lmqj_binop(lmqj_ctx *c, const lmqj_node *at, int op, lmqj_value a, lmqj_value b)
{
    if (a.t == JV_UNDEF) lmqj_fail_undefined(c, at, a);
    if (b.t == JV_UNDEF) lmqj_fail_undefined(c, at, b);
    if (lmqj_is_num(a) && lmqj_is_num(b)) {
        if (a.t == JV_FLOAT || b.t == JV_FLOAT) return float_op(c, at, op, lmqj_num_f(a), lmqj_num_f(b));
        return int_op(c, at, op, ival(a), ival(b));
    }
    switch (op) {
    case OP_ADD:
        if (a.t == JV_STR && b.t == JV_STR) return str_concat(c, a, b);
        if (a.t == b.t && lmqj_is_seq(a)) {
            lmqj_value r = lmqj_list_new(c, a.u.l->n + b.u.l->n);
            r.t = a.t;
            for (size_t i = 0; i < a.u.l->n; i++) lmqj_list_push(c, r, a.u.l->v[i]);
            for (size_t i = 0; i < b.u.l->n; i++) lmqj_list_push(c, r, b.u.l->v[i]);
            return r;
        }
        if (a.t == JV_STR || b.t == JV_STR) {
            lmqj_value o = a.t == JV_STR ? b : a;
            if (a.t == JV_STR && !a.safe)
                lmqj_fail(c, at, "TypeError: can only concatenate str (not \"%s\") to str", lmqj_type_name(o));
        }
        break;
    case OP_MUL:
        if ((a.t == JV_STR || lmqj_is_seq(a)) && (b.t == JV_INT || b.t == JV_BOOL)) return repeat(c, at, a, ival(b));
        if ((b.t == JV_STR || lmqj_is_seq(b)) && (a.t == JV_INT || a.t == JV_BOOL)) return repeat(c, at, b, ival(a));
        break;
    case OP_MOD:
        if (a.t == JV_STR) return lmqj_percent_format(c, at, a, b);
        break;
    default: break;
    }
    bad_operands(c, at, op, a, b);
}

bool lmqj_contains(lmqj_ctx *c, const lmqj_node *at, lmqj_value container, lmqj_value item)
{
    switch (container.t) {
    case JV_STR:
        if (item.t != JV_STR)
            lmqj_fail(c, at, "TypeError: 'in <string>' requires string as left operand, not %s",
                      lmqj_type_name(item));
        if (item.u.s->len == 0) return true;
        return memmem(container.u.s->s, container.u.s->len, item.u.s->s, item.u.s->len) != NULL;
    case JV_LIST: case JV_TUPLE:
        for (size_t i = 0; i < container.u.l->n; i++)
            if (lmqj_equal(c, container.u.l->v[i], item)) return true;
        return false;
    case JV_DICT:
        if (!hashable(item)) lmqj_fail(c, at, "TypeError: unhashable type: '%s'", lmqj_type_name(item));
        return lmqj_dict_get(c, container.u.d, item) != NULL;
    case JV_UNDEF:
        if (container.ukind == JU_UNSAFE) lmqj_fail_undefined(c, at, container);
        return false;
    default:
        lmqj_fail(c, at, "TypeError: argument of type '%s' is not iterable", lmqj_type_name(container));
    }
}

static bool compare_op(lmqj_ctx *c, const lmqj_node *at, int op, lmqj_value a, lmqj_value b)
{
    switch (op) {
    case OP_EQ: return lmqj_equal(c, a, b);
    case OP_NE: return !lmqj_equal(c, a, b);
    case OP_IN: return lmqj_contains(c, at, b, a);
    case OP_NOTIN: return !lmqj_contains(c, at, b, a);
    default: break;
    }
    if (a.t == JV_FLOAT && isnan(a.u.f)) return false;
    if (b.t == JV_FLOAT && isnan(b.u.f)) return false;
    int r = lmqj_compare(c, at, a, b);
    switch (op) {
    case OP_LT: return r < 0;
    case OP_LE: return r <= 0;
    case OP_GT: return r > 0;
    default: return r >= 0;
    }
}

/* ====================================================================== calls */

const lmqj_value *lmqj_arg(int i, const char *name, int argc, const lmqj_value *argv, int kwc,
                           const char *const *kwn, const lmqj_value *kwv)
{
    if (i >= 0 && i < argc) return &argv[i];
    if (name)
        for (int k = 0; k < kwc; k++)
            if (!strcmp(kwn[k], name)) return &kwv[k];
    return NULL;
}

static void bind_target(lmqj_ctx *c, lmqj_frame *f, const lmqj_node *t, lmqj_value v);

static lmqj_value call_macro(lmqj_ctx *c, const lmqj_node *at, lmqj_func *fn, int argc,
                             const lmqj_value *argv, int kwc, const char *const *kwn,
                             const lmqj_value *kwv)
{
    const lmqj_node *m = fn->macro;
    if (++c->depth > c->lim.max_depth)
        lmqj_fail_limit(c, at, "maximum recursion depth exceeded (%d nested calls)", c->lim.max_depth);
    lmqj_step(c, at);
    lmqj_frame *f = lmqj_frame_new(c, fn->closure);
    bool use_varargs = m->op & 1, use_kwargs = m->op & 2, use_caller = m->op & 4;
    uint32_t np = m->n;
    if ((uint32_t)argc > np && !use_varargs)
        lmqj_fail(c, at, "TypeError: macro '%s' takes not more than %u argument(s)", fn->name, np);
    bool *bound = lmqj_alloc(c, (np + 1) * sizeof(bool));
    for (uint32_t i = 0; i < np && (int)i < argc; i++) {
        lmqj_frame_set(c, f, m->list[i]->name, argv[i]);
        bound[i] = true;
    }
    lmqj_value kwargs = lmqj_dict_new(c);
    lmqj_value caller = fn->caller;
    for (int k = 0; k < kwc; k++) {
        uint32_t i;
        for (i = 0; i < np; i++)
            if (!strcmp(m->list[i]->name, kwn[k])) break;
        if (i < np) {
            if (bound[i])
                lmqj_fail(c, at, "TypeError: macro '%s' got multiple values for argument '%s'", fn->name, kwn[k]);
            lmqj_frame_set(c, f, kwn[k], kwv[k]);
            bound[i] = true;
        } else if (!strcmp(kwn[k], "caller") && use_caller) {
            caller = kwv[k];
        } else if (use_kwargs) {
            lmqj_dict_set(c, kwargs.u.d, lmqj_cstr(c, kwn[k]), kwv[k]);
        } else {
            lmqj_fail(c, at, "TypeError: macro '%s' takes no keyword argument '%s'", fn->name, kwn[k]);
        }
    }
    /* defaults belong to the last n2 parameters and see earlier arguments */
    for (uint32_t i = 0; i < np; i++) {
        if (bound[i]) continue;
        uint32_t first_def = np - m->n2;
        lmqj_value v;
        if (i >= first_def) {
            v = lmqj_eval(c, f, m->list2[i - first_def]);
        } else {
            char *hint = lmqj_alloc(c, strlen(m->list[i]->name) + 40);
            sprintf(hint, "parameter '%s' was not provided", m->list[i]->name);
            v = lmqj_undef_named(JU_HINT, 0, hint);
        }
        lmqj_frame_set(c, f, m->list[i]->name, v);
    }
    if (use_varargs) {
        lmqj_value va = lmqj_list_new(c, 0);
        va.t = JV_TUPLE;
        for (int i = (int)np; i < argc; i++) lmqj_list_push(c, va, argv[i]);
        lmqj_frame_set(c, f, "varargs", va);
    }
    if (use_kwargs) lmqj_frame_set(c, f, "kwargs", kwargs);
    if (use_caller && caller.t != JV_UNDEF) lmqj_frame_set(c, f, "caller", caller);
    lmqj_buf out, *saved = c->out;
    lmqj_buf_init(&out, c);
    c->out = &out;
    lmqj_node body = {0};
    body.kind = N_BODY;
    body.list = m->list3;
    body.n = m->n3;
    lmqj_render_body(c, f, &body);
    c->out = saved;
    c->depth--;
    return lmqj_buf_value(&out);
}

static void run_for(lmqj_ctx *c, lmqj_frame *f, const lmqj_node *n, lmqj_value iter, int depth0,
                    lmqj_buf *capture);

lmqj_value lmqj_call(lmqj_ctx *c, const lmqj_node *at, lmqj_value fn, int argc,
                     const lmqj_value *argv, int kwc, const char *const *kwn,
                     const lmqj_value *kwv)
{
    if (fn.t == JV_UNDEF) lmqj_fail_undefined(c, at, fn);
    if (fn.t != JV_FUNC) {
        if (fn.t == JV_LOOP) { /* loop(...) of a recursive loop */
            lmqj_loop *L = fn.u.loop;
            if (!L->node->op) lmqj_fail(c, at, "TypeError: the loop is not recursive");
            if (argc != 1) lmqj_fail(c, at, "TypeError: loop() takes exactly one argument");
            if (++c->depth > c->lim.max_depth)
                lmqj_fail_limit(c, at, "maximum recursion depth exceeded (%d nested calls)", c->lim.max_depth);
            lmqj_buf out;
            lmqj_buf_init(&out, c);
            run_for(c, L->frame, L->node, argv[0], (int)L->depth0 + 1, &out);
            c->depth--;
            return lmqj_buf_value(&out);
        }
        lmqj_fail(c, at, "TypeError: '%s' object is not callable", lmqj_type_name(fn));
    }
    lmqj_func *f = fn.u.fn;
    if (f->kind == JF_MACRO) return call_macro(c, at, f, argc, argv, kwc, kwn, kwv);
    return f->fn(c, at, f->self, argc, argv, kwc, kwn, kwv);
}

/* Evaluates call arguments (positional, keywords, *args, **kwargs). */
typedef struct call_args {
    int argc, kwc;
    lmqj_value *argv, *kwv;
    const char **kwn;
} call_args;

static void eval_args(lmqj_ctx *c, lmqj_frame *f, const lmqj_node *n, call_args *ca)
{
    size_t extra_pos = 0, extra_kw = 0;
    lmqj_value star = {0}, dstar = {0};
    if (n->c) {
        star = lmqj_eval(c, f, n->c);
        extra_pos = lmqj_iterate(c, n->c, star)->n;
    }
    if (n->d) {
        dstar = lmqj_eval(c, f, n->d);
        if (dstar.t != JV_DICT) lmqj_fail(c, n->d, "TypeError: argument after ** must be a mapping");
        extra_kw = dstar.u.d->n;
    }
    size_t np = n->n + extra_pos, nk = n->n2 + extra_kw;
    if (np > 100000 || nk > 100000) lmqj_fail(c, n, "too many arguments");
    ca->argv = lmqj_alloc(c, (np + 1) * sizeof(lmqj_value));
    ca->kwv = lmqj_alloc(c, (nk + 1) * sizeof(lmqj_value));
    ca->kwn = lmqj_alloc(c, (nk + 1) * sizeof(char *));
    ca->argc = 0;
    ca->kwc = 0;
    for (uint32_t i = 0; i < n->n; i++) ca->argv[ca->argc++] = lmqj_eval(c, f, n->list[i]);
    if (n->c) {
        const lmqj_list *l = lmqj_iterate(c, n->c, star);
        for (size_t i = 0; i < l->n; i++) ca->argv[ca->argc++] = l->v[i];
    }
    for (uint32_t i = 0; i < n->n2; i++) {
        ca->kwn[ca->kwc] = n->list2[i]->name;
        ca->kwv[ca->kwc++] = lmqj_eval(c, f, n->list2[i]->a);
    }
    for (size_t i = 0; i < extra_kw; i++) {
        lmqj_value k = dstar.u.d->k[i];
        if (k.t != JV_STR) lmqj_fail(c, n->d, "TypeError: keywords must be strings");
        ca->kwn[ca->kwc] = k.u.s->s;
        ca->kwv[ca->kwc++] = dstar.u.d->v[i];
    }
}

/* ====================================================================== expressions */

static lmqj_value eval_node(lmqj_ctx *c, lmqj_frame *f, const lmqj_node *e);

/* Every nested evaluation (expressions, statements, across macro calls) counts
 * against one bound, so deep trees such as `1+1+...+1` or long elif chains
 * fail cleanly instead of exhausting the C stack. */
#define EVAL_MAX_NEST 3000

lmqj_value lmqj_eval(lmqj_ctx *c, lmqj_frame *f, const lmqj_node *e)
{
    if (++c->nest > EVAL_MAX_NEST) lmqj_fail_limit(c, e, "template nested too deeply (limit %d)", EVAL_MAX_NEST);
    lmqj_value v = eval_node(c, f, e);
    c->nest--;
    return v;
}

static lmqj_value eval_node(lmqj_ctx *c, lmqj_frame *f, const lmqj_node *e)
{
    switch (e->kind) {
    case N_CONST: return e->val;
    case N_NAME: return lmqj_lookup(c, f, e->name);
    case N_TUPLE: case N_LIST: {
        lmqj_value l = lmqj_list_new(c, e->n);
        l.t = e->kind == N_TUPLE ? JV_TUPLE : JV_LIST;
        for (uint32_t i = 0; i < e->n; i++) lmqj_list_push(c, l, lmqj_eval(c, f, e->list[i]));
        return l;
    }
    case N_DICT: {
        lmqj_value d = lmqj_dict_new(c);
        for (uint32_t i = 0; i < e->n; i++) {
            lmqj_value k = lmqj_eval(c, f, e->list[i]);
            if (!hashable(k)) lmqj_fail(c, e->list[i], "TypeError: unhashable type: '%s'", lmqj_type_name(k));
            lmqj_dict_set(c, d.u.d, k, lmqj_eval(c, f, e->list2[i]));
        }
        return d;
    }
    case N_GETATTR: return lmqj_getattr(c, e, lmqj_eval(c, f, e->a), e->name);
    case N_GETITEM: {
        lmqj_value obj = lmqj_eval(c, f, e->a);
        if (e->b->kind == N_SLICE) return do_slice(c, f, e, obj, e->b);
        return lmqj_getitem(c, e, obj, lmqj_eval(c, f, e->b));
    }
    case N_BINOP: {
        lmqj_value a = lmqj_eval(c, f, e->a), b = lmqj_eval(c, f, e->b);
        return lmqj_binop(c, e, e->op, a, b);
    }
    case N_NEG: case N_POS: {
        lmqj_value v = lmqj_eval(c, f, e->a);
        if (v.t == JV_UNDEF) lmqj_fail_undefined(c, e, v);
        if (v.t == JV_FLOAT) return e->kind == N_NEG ? lmqj_float(-v.u.f) : v;
        if (v.t == JV_INT || v.t == JV_BOOL) {
            int64_t i = ival(v);
            if (e->kind == N_POS) return lmqj_int(i);
            if (i == INT64_MIN) lmqj_fail(c, e, "OverflowError: integer result out of range");
            return lmqj_int(-i);
        }
        lmqj_fail(c, e, "TypeError: bad operand type for unary %c: '%s'", e->kind == N_NEG ? '-' : '+',
                  lmqj_type_name(v));
    }
    case N_NOT: {
        lmqj_value v = lmqj_eval(c, f, e->a);
        if (v.t == JV_UNDEF && v.ukind == JU_UNSAFE) lmqj_fail_undefined(c, e, v);
        return lmqj_bool(!lmqj_truthy(v));
    }
    case N_AND: case N_OR: {
        lmqj_value l = lmqj_eval(c, f, e->a);
        if (l.t == JV_UNDEF && l.ukind == JU_UNSAFE) lmqj_fail_undefined(c, e, l);
        if (lmqj_truthy(l) == (e->kind == N_OR)) return l;
        return lmqj_eval(c, f, e->b);
    }
    case N_COMPARE: {
        lmqj_value l = lmqj_eval(c, f, e->a);
        for (uint32_t i = 0; i < e->n; i++) {
            lmqj_value r = lmqj_eval(c, f, e->list[i]->a);
            if (!compare_op(c, e->list[i], e->list[i]->op, l, r)) return lmqj_bool(false);
            l = r;
        }
        return lmqj_bool(true);
    }
    case N_CONCAT: {
        lmqj_buf b;
        lmqj_buf_init(&b, c);
        for (uint32_t i = 0; i < e->n; i++) lmqj_to_str(&b, e, lmqj_eval(c, f, e->list[i]));
        return lmqj_buf_value(&b);
    }
    case N_COND:
        if (lmqj_truthy(lmqj_eval(c, f, e->a))) return lmqj_eval(c, f, e->b);
        if (e->c) return lmqj_eval(c, f, e->c);
        return lmqj_undef_named(JU_HINT, 0, "the inline if-expression evaluated to false and no else section was defined.");
    case N_CALL: {
        lmqj_value fn = lmqj_eval(c, f, e->a);
        call_args ca;
        eval_args(c, f, e, &ca);
        return lmqj_call(c, e, fn, ca.argc, ca.argv, ca.kwc, ca.kwn, ca.kwv);
    }
    case N_FILTER: {
        lmqj_value in = lmqj_eval(c, f, e->a);
        call_args ca;
        eval_args(c, f, e, &ca);
        return lmqj_filter(c, f, e, e->name, in, ca.argc, ca.argv, ca.kwc, ca.kwn, ca.kwv);
    }
    case N_TEST: {
        lmqj_value in = lmqj_eval(c, f, e->a);
        call_args ca;
        eval_args(c, f, e, &ca);
        return lmqj_bool(lmqj_test(c, f, e, e->name, in, ca.argc, ca.argv));
    }
    case N_PLACEHOLDER: return lmqj_lookup(c, f, "\x01placeholder");
    default: lmqj_fail(c, e, "internal error: unexpected node %d in expression", e->kind);
    }
}

/* ====================================================================== statements */

static void bind_target(lmqj_ctx *c, lmqj_frame *f, const lmqj_node *t, lmqj_value v)
{
    if (t->kind == N_NAME) { lmqj_frame_set(c, f, t->name, v); return; }
    if (t->kind == N_NSREF) {
        lmqj_value ns = lmqj_lookup(c, f, t->name);
        if (ns.t != JV_NS) lmqj_fail(c, t, "TemplateRuntimeError: cannot assign attribute on non-namespace object");
        lmqj_dict_set(c, ns.u.d, t->val, v);
        return;
    }
    /* tuple unpacking */
    const lmqj_list *l = lmqj_iterate(c, t, v);
    if (l->n != t->n)
        lmqj_fail(c, t, "ValueError: %s values to unpack (expected %u, got %zu)",
                  l->n > t->n ? "too many" : "not enough", t->n, l->n);
    for (uint32_t i = 0; i < t->n; i++) bind_target(c, f, t->list[i], l->v[i]);
}

static int render_list(lmqj_ctx *c, lmqj_frame *f, lmqj_node *const *list, uint32_t n);

static lmqj_value capture(lmqj_ctx *c, lmqj_frame *f, lmqj_node *const *list, uint32_t n)
{
    lmqj_buf out, *saved = c->out;
    lmqj_buf_init(&out, c);
    c->out = &out;
    render_list(c, f, list, n);
    c->out = saved;
    return lmqj_buf_value(&out);
}

static void run_for(lmqj_ctx *c, lmqj_frame *f, const lmqj_node *n, lmqj_value iter, int depth0,
                    lmqj_buf *cap)
{
    lmqj_buf *saved = c->out;
    if (cap) c->out = cap;
    const lmqj_list *src = lmqj_iterate(c, n->b, iter);
    const lmqj_list *items = src;
    if (n->c) { /* {% for x in xs if cond %}: filter first (loop.length counts kept items) */
        lmqj_value kept = lmqj_list_new(c, 0);
        for (size_t i = 0; i < src->n; i++) {
            lmqj_step(c, n);
            lmqj_frame *tf = lmqj_frame_new(c, f);
            bind_target(c, tf, n->a, src->v[i]);
            if (lmqj_truthy(lmqj_eval(c, tf, n->c))) lmqj_list_push(c, kept, src->v[i]);
        }
        items = kept.u.l;
    }
    if (items->n == 0) {
        render_list(c, lmqj_frame_new(c, f), n->list2, n->n2);
    } else {
        lmqj_loop *L = lmqj_alloc(c, sizeof(lmqj_loop));
        L->items = items;
        L->length = (int64_t)items->n;
        L->depth0 = depth0;
        L->node = n;
        L->frame = f;
        lmqj_value lv = {0};
        lv.t = JV_LOOP;
        lv.u.loop = L;
        for (size_t i = 0; i < items->n; i++) {
            lmqj_step(c, n);
            L->index0 = (int64_t)i;
            lmqj_frame *it = lmqj_frame_new(c, f);
            lmqj_frame_set(c, it, "loop", lv);
            bind_target(c, it, n->a, items->v[i]);
            int sig = render_list(c, it, n->list, n->n);
            if (sig == JX_BREAK) break;
        }
    }
    c->out = saved;
}

static lmqj_value make_macro(lmqj_ctx *c, lmqj_frame *f, const lmqj_node *n, const char *name)
{
    lmqj_value m = lmqj_func_new(c, JF_MACRO, name, NULL, lmqj_undef());
    m.u.fn->macro = n;
    m.u.fn->closure = f;
    return m;
}

static void output_value(lmqj_ctx *c, const lmqj_node *at, lmqj_value v)
{
    if (v.t == JV_STR) { lmqj_emit(c, v.u.s->s, v.u.s->len); return; }
    lmqj_to_str(c->out, at, v);
}

static int exec_node(lmqj_ctx *c, lmqj_frame *f, const lmqj_node *n);

static int exec_stmt(lmqj_ctx *c, lmqj_frame *f, const lmqj_node *n)
{
    lmqj_step(c, n);
    if (++c->nest > EVAL_MAX_NEST) lmqj_fail_limit(c, n, "template nested too deeply (limit %d)", EVAL_MAX_NEST);
    int sig = exec_node(c, f, n);
    c->nest--;
    return sig;
}

static int exec_node(lmqj_ctx *c, lmqj_frame *f, const lmqj_node *n)
{
    switch (n->kind) {
    case N_DATA: lmqj_emit(c, n->val.u.s->s, n->val.u.s->len); return JX_NORMAL;
    case N_OUTPUT: output_value(c, n->a, lmqj_eval(c, f, n->a)); return JX_NORMAL;
    case N_IF:
        if (lmqj_truthy(lmqj_eval(c, f, n->a))) return render_list(c, f, n->list, n->n);
        return render_list(c, f, n->list2, n->n2);
    case N_FOR: run_for(c, f, n, lmqj_eval(c, f, n->b), 0, NULL); return JX_NORMAL;
    case N_SET: bind_target(c, f, n->a, lmqj_eval(c, f, n->b)); return JX_NORMAL;
    case N_SETBLOCK: {
        lmqj_value v = capture(c, lmqj_frame_new(c, f), n->list, n->n);
        if (n->b) {
            lmqj_frame *tf = lmqj_frame_new(c, f);
            lmqj_frame_set(c, tf, "\x01placeholder", v);
            v = lmqj_eval(c, tf, n->b);
        }
        bind_target(c, f, n->a, v);
        return JX_NORMAL;
    }
    case N_FILTERBLOCK: {
        lmqj_value v = capture(c, lmqj_frame_new(c, f), n->list, n->n);
        lmqj_frame *tf = lmqj_frame_new(c, f);
        lmqj_frame_set(c, tf, "\x01placeholder", v);
        output_value(c, n, lmqj_eval(c, tf, n->b));
        return JX_NORMAL;
    }
    case N_MACRO: lmqj_frame_set(c, f, n->name, make_macro(c, f, n, n->name)); return JX_NORMAL;
    case N_CALLBLOCK: {
        const lmqj_node *call = n->a;
        lmqj_value fn = lmqj_eval(c, f, call->a);
        call_args ca;
        eval_args(c, f, call, &ca);
        lmqj_value caller = make_macro(c, f, n, "caller");
        const char **kwn = lmqj_alloc(c, (size_t)(ca.kwc + 1) * sizeof(char *));
        lmqj_value *kwv = lmqj_alloc(c, (size_t)(ca.kwc + 1) * sizeof(lmqj_value));
        if (ca.kwc) {
            memcpy(kwn, ca.kwn, (size_t)ca.kwc * sizeof(char *));
            memcpy(kwv, ca.kwv, (size_t)ca.kwc * sizeof(lmqj_value));
        }
        kwn[ca.kwc] = "caller";
        kwv[ca.kwc] = caller;
        output_value(c, n, lmqj_call(c, call, fn, ca.argc, ca.argv, ca.kwc + 1, kwn, kwv));
        return JX_NORMAL;
    }
    case N_WITH: {
        lmqj_frame *wf = lmqj_frame_new(c, f);
        for (uint32_t i = 0; i < n->n; i++) bind_target(c, wf, n->list[i], lmqj_eval(c, f, n->list2[i]));
        return render_list(c, wf, n->list3, n->n3);
    }
    case N_SCOPE: return render_list(c, lmqj_frame_new(c, f), n->list, n->n);
    case N_BREAK: return JX_BREAK;
    case N_CONTINUE: return JX_CONTINUE;
    default: lmqj_fail(c, n, "internal error: unexpected statement %d", n->kind);
    }
}

static int render_list(lmqj_ctx *c, lmqj_frame *f, lmqj_node *const *list, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        int sig = exec_stmt(c, f, list[i]);
        if (sig != JX_NORMAL) return sig;
    }
    return JX_NORMAL;
}

void lmqj_render_body(lmqj_ctx *c, lmqj_frame *f, const lmqj_node *body)
{
    render_list(c, f, body->list, body->n);
}
