/* jinja_filters.c — Jinja2's builtin filters and tests (with Hugging Face's
 * tojson), evaluated on the engine's values with Python semantics. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_internal.h"

#define ARGS lmqj_ctx *c, lmqj_frame *f, const lmqj_node *at, lmqj_value in, int argc, \
             const lmqj_value *argv, int kwc, const char *const *kwn, const lmqj_value *kwv
#define ARG(i, name) lmqj_arg((i), (name), argc, argv, kwc, kwn, kwv)

typedef lmqj_value (*filter_fn)(ARGS);

/* ====================================================================== helpers */

static bool opt_bool(const lmqj_value *v, bool dflt) { return v ? lmqj_truthy(*v) : dflt; }

static int64_t opt_int(lmqj_ctx *c, const lmqj_node *at, const lmqj_value *v, int64_t dflt,
                       const char *what)
{
    if (!v || v->t == JV_NONE) return dflt;
    if (v->t == JV_INT) return v->u.i;
    if (v->t == JV_BOOL) return v->u.b;
    lmqj_fail(c, at, "TypeError: %s must be an integer, not %s", what, lmqj_type_name(*v));
}

static lmqj_value need_str(lmqj_ctx *c, const lmqj_node *at, lmqj_value v)
{
    return lmqj_stringify(c, at, v);
}

static size_t ulen(lmqj_value s) { return lmqj_utf8_count(s.u.s->s, s.u.s->len); }

static lmqj_value make_tuple2(lmqj_ctx *c, lmqj_value a, lmqj_value b)
{
    lmqj_value t = lmqj_list_new(c, 2);
    t.t = JV_TUPLE;
    lmqj_list_push(c, t, a);
    lmqj_list_push(c, t, b);
    return t;
}

/* environment.getitem over a dotted path ("a.b", "0") as make_attrgetter. */
static lmqj_value attr_path(lmqj_ctx *c, const lmqj_node *at, lmqj_value obj, lmqj_value attr,
                            const lmqj_value *dflt)
{
    if (attr.t != JV_STR) {
        obj = lmqj_getitem(c, at, obj, attr);
    } else {
        const char *s = attr.u.s->s;
        size_t n = attr.u.s->len, st = 0;
        for (size_t i = 0; i <= n; i++) {
            if (i < n && s[i] != '.') continue;
            lmqj_value key;
            bool digits = i > st;
            for (size_t k = st; k < i; k++)
                if (s[k] < '0' || s[k] > '9') digits = false;
            if (digits && i - st < 18) key = lmqj_int(strtoll(s + st, NULL, 10));
            else key = lmqj_strn(c, s + st, i - st);
            obj = lmqj_getitem(c, at, obj, key);
            st = i + 1;
        }
    }
    if (obj.t == JV_UNDEF && dflt) return *dflt;
    return obj;
}

static lmqj_value sort_key(lmqj_ctx *c, const lmqj_node *at, lmqj_value v, const lmqj_value *attr,
                           bool case_sensitive)
{
    if (attr && attr->t != JV_NONE) v = attr_path(c, at, v, *attr, NULL);
    if (!case_sensitive && v.t == JV_STR) v = lmqj_str_case(c, v, JC_LOWER);
    return v;
}

static lmqj_value list_copy(lmqj_ctx *c, const lmqj_list *l)
{
    lmqj_value r = lmqj_list_new(c, l->n);
    for (size_t i = 0; i < l->n; i++) lmqj_list_push(c, r, l->v[i]);
    return r;
}

/* Stable merge sort (Python's sorted is stable; reverse keeps stability). */
static void merge_sort(lmqj_ctx *c, const lmqj_node *at, size_t *idx, size_t *tmp, size_t n,
                       const lmqj_value *keys, bool reverse)
{
    if (n < 2) return;
    size_t h = n / 2;
    merge_sort(c, at, idx, tmp, h, keys, reverse);
    merge_sort(c, at, idx + h, tmp, n - h, keys, reverse);
    size_t i = 0, j = h, o = 0;
    while (i < h && j < n) {
        int r = lmqj_compare(c, at, keys[idx[j]], keys[idx[i]]);
        bool take_right = reverse ? r > 0 : r < 0;
        tmp[o++] = take_right ? idx[j++] : idx[i++];
    }
    while (i < h) tmp[o++] = idx[i++];
    while (j < n) tmp[o++] = idx[j++];
    memcpy(idx, tmp, n * sizeof(size_t));
}

void lmqj_sort(lmqj_ctx *c, const lmqj_node *at, lmqj_value *items, const lmqj_value *keys,
               size_t n, bool reverse)
{
    if (n < 2) return;
    size_t *idx = lmqj_alloc(c, n * sizeof(size_t)), *tmp = lmqj_alloc(c, n * sizeof(size_t));
    for (size_t i = 0; i < n; i++) idx[i] = i;
    merge_sort(c, at, idx, tmp, n, keys, reverse);
    lmqj_value *copy = lmqj_alloc(c, n * sizeof(lmqj_value));
    for (size_t i = 0; i < n; i++) copy[i] = items[idx[i]];
    memcpy(items, copy, n * sizeof(lmqj_value));
}

/* ====================================================================== filters */

static lmqj_value f_abs(ARGS)
{
    if (in.t == JV_INT || in.t == JV_BOOL) {
        int64_t i = in.t == JV_INT ? in.u.i : in.u.b;
        if (i == INT64_MIN) lmqj_fail(c, at, "OverflowError: integer result out of range");
        return lmqj_int(i < 0 ? -i : i);
    }
    if (in.t == JV_FLOAT) return lmqj_float(fabs(in.u.f));
    if (in.t == JV_UNDEF) lmqj_fail_undefined(c, at, in);
    lmqj_fail(c, at, "TypeError: bad operand type for abs(): '%s'", lmqj_type_name(in));
}

static lmqj_value f_attr(ARGS)
{
    const lmqj_value *name = ARG(0, "name");
    if (!name || name->t != JV_STR) lmqj_fail(c, at, "attr() needs an attribute name");
    if (in.t == JV_UNDEF) lmqj_fail_undefined(c, at, in);
    lmqj_value v;
    if (lmqj_pyattr(c, in, name->u.s->s, &v)) return v;
    return lmqj_undef_named(JU_ATTR, in.t, name->u.s->s);
}

static lmqj_value f_batch(ARGS)
{
    int64_t n = opt_int(c, at, ARG(0, "linecount"), 0, "linecount");
    const lmqj_value *fill = ARG(1, "fill_with");
    if (n <= 0) lmqj_fail(c, at, "ValueError: batch size must be positive");
    const lmqj_list *l = lmqj_iterate(c, at, in);
    lmqj_value out = lmqj_list_new(c, 0), cur = lmqj_list_new(c, 0);
    for (size_t i = 0; i < l->n; i++) {
        if ((int64_t)cur.u.l->n == n) { lmqj_list_push(c, out, cur); cur = lmqj_list_new(c, 0); }
        lmqj_list_push(c, cur, l->v[i]);
    }
    if (cur.u.l->n) {
        if (fill && fill->t != JV_NONE)
            while ((int64_t)cur.u.l->n < n) lmqj_list_push(c, cur, *fill);
        lmqj_list_push(c, out, cur);
    }
    out.gen = JG_GENERATOR;
    return out;
}

static lmqj_value f_capitalize(ARGS) { return lmqj_str_case(c, need_str(c, at, in), JC_CAPITALIZE); }

static lmqj_value f_center(ARGS)
{
    lmqj_value s = need_str(c, at, in);
    int64_t w = opt_int(c, at, ARG(0, "width"), 80, "width"), n = (int64_t)ulen(s);
    if (w <= n) return s;
    if (w > (int64_t)c->lim.max_output) lmqj_fail_limit(c, at, "width exceeds the output limit");
    int64_t pad = w - n, left = pad / 2 + (pad & w & 1);
    lmqj_buf b;
    lmqj_buf_init(&b, c);
    for (int64_t i = 0; i < left; i++) lmqj_buf_addc(&b, ' ');
    lmqj_buf_add(&b, s.u.s->s, s.u.s->len);
    for (int64_t i = 0; i < pad - left; i++) lmqj_buf_addc(&b, ' ');
    return lmqj_buf_value(&b);
}

static lmqj_value f_length(ARGS)
{
    switch (in.t) {
    case JV_STR: return lmqj_int((int64_t)ulen(in));
    case JV_LIST: case JV_TUPLE:
        if (in.gen == JG_GENERATOR || in.gen == JG_REVITER)
            lmqj_fail(c, at, "TypeError: object of type '%s' has no len()", lmqj_type_name(in));
        return lmqj_int((int64_t)in.u.l->n);
    case JV_DICT: return lmqj_int((int64_t)in.u.d->n);
    case JV_UNDEF: return lmqj_int(0);
    case JV_LOOP: return lmqj_int(in.u.loop->length);
    default: lmqj_fail(c, at, "TypeError: object of type '%s' has no len()", lmqj_type_name(in));
    }
}

static lmqj_value f_default(ARGS)
{
    const lmqj_value *d = ARG(0, "default_value");
    bool boolean = opt_bool(ARG(1, "boolean"), false);
    if (in.t == JV_UNDEF || (boolean && !lmqj_truthy(in))) return d ? *d : lmqj_cstr(c, "");
    return in;
}

static lmqj_value f_dictsort(ARGS)
{
    bool cs = opt_bool(ARG(0, "case_sensitive"), false), rev = opt_bool(ARG(2, "reverse"), false);
    const lmqj_value *by = ARG(1, "by");
    int pos = 0;
    if (by && by->t == JV_STR) {
        if (!strcmp(by->u.s->s, "value")) pos = 1;
        else if (strcmp(by->u.s->s, "key")) lmqj_fail(c, at, "FilterArgumentError: You can only sort by either \"key\" or \"value\"");
    }
    if (in.t != JV_DICT) lmqj_fail(c, at, "TypeError: dictsort needs a mapping");
    size_t n = in.u.d->n;
    lmqj_value out = lmqj_list_new(c, n);
    lmqj_value *keys = lmqj_alloc(c, (n + 1) * sizeof(lmqj_value));
    for (size_t i = 0; i < n; i++) {
        lmqj_list_push(c, out, make_tuple2(c, in.u.d->k[i], in.u.d->v[i]));
        keys[i] = sort_key(c, at, pos ? in.u.d->v[i] : in.u.d->k[i], NULL, cs);
    }
    lmqj_sort(c, at, out.u.l->v, keys, n, rev);
    return out;
}

static lmqj_value f_escape(ARGS) { return lmqj_escape(c, at, in); }

static lmqj_value f_forceescape(ARGS)
{
    lmqj_value s = need_str(c, at, in);
    s.safe = 0;
    return lmqj_escape(c, at, s);
}

static lmqj_value f_first(ARGS)
{
    const lmqj_list *l = lmqj_iterate(c, at, in);
    if (!l->n) return lmqj_undef_named(JU_HINT, 0, "No first item, sequence was empty.");
    return l->v[0];
}

static lmqj_value f_last(ARGS)
{
    if (in.t == JV_UNDEF) lmqj_fail(c, at, "TypeError: 'Undefined' object is not reversible");
    const lmqj_list *l = lmqj_iterate(c, at, in);
    if (!l->n) return lmqj_undef_named(JU_HINT, 0, "No last item, sequence was empty.");
    return l->v[l->n - 1];
}

/* Python float(str) / int(str): surrounding whitespace allowed, '_' between digits. */
static bool parse_num_str(lmqj_value s, bool want_int, int base, int64_t *iv, double *fv)
{
    const char *p = s.u.s->s;
    size_t n = s.u.s->len, a = 0, b = n;
    while (a < n && (p[a] == ' ' || (p[a] >= 9 && p[a] <= 13))) a++;
    while (b > a && (p[b - 1] == ' ' || (p[b - 1] >= 9 && p[b - 1] <= 13))) b--;
    if (a == b || b - a > 400) return false;
    char tmp[512];
    size_t k = 0;
    for (size_t i = a; i < b; i++) {
        if (p[i] == '_') {
            if (i == a || i + 1 == b || p[i - 1] == '_') return false;
            continue;
        }
        tmp[k++] = p[i];
    }
    tmp[k] = 0;
    char *end;
    if (want_int) {
        errno = 0;
        const char *q = tmp;
        long long v = strtoll(q, &end, base);
        if (*end || errno || end == q) return false;
        if (strchr(tmp, 'x') || strchr(tmp, 'X')) { if (base != 16 && base != 0) return false; }
        *iv = v;
        return true;
    }
    if (strchr(tmp, 'x') || strchr(tmp, 'X') || strchr(tmp, 'p') || strchr(tmp, 'P')) return false;
    *fv = strtod(tmp, &end);
    return *end == 0 && end != tmp;
}

static lmqj_value f_float(ARGS)
{
    const lmqj_value *d = ARG(0, "default");
    lmqj_value dflt = d ? *d : lmqj_float(0.0);
    if (lmqj_is_num(in)) return lmqj_float(lmqj_num_f(in));
    if (in.t == JV_STR) {
        double v;
        if (parse_num_str(in, false, 10, NULL, &v)) return lmqj_float(v);
    }
    return dflt;
}

static lmqj_value f_int(ARGS)
{
    const lmqj_value *d = ARG(0, "default");
    int64_t base = opt_int(c, at, ARG(1, "base"), 10, "base");
    lmqj_value dflt = d ? *d : lmqj_int(0);
    if (in.t == JV_INT) return in;
    if (in.t == JV_BOOL) return lmqj_int(in.u.b);
    if (in.t == JV_FLOAT) {
        if (isnan(in.u.f) || fabs(in.u.f) >= 9.2e18) return dflt;
        return lmqj_int((int64_t)in.u.f);
    }
    if (in.t == JV_STR) {
        int64_t iv;
        double fv;
        if (base >= 2 && base <= 36 && parse_num_str(in, true, (int)base, &iv, NULL)) return lmqj_int(iv);
        if (parse_num_str(in, false, 10, NULL, &fv) && !isnan(fv) && fabs(fv) < 9.2e18)
            return lmqj_int((int64_t)fv);
    }
    return dflt;
}

static lmqj_value f_format(ARGS)
{
    lmqj_value s = need_str(c, at, in);
    if (kwc && argc) lmqj_fail(c, at, "FilterArgumentError: can't handle positional and keyword arguments at the same time");
    lmqj_value args;
    if (kwc) {
        args = lmqj_dict_new(c);
        for (int i = 0; i < kwc; i++) lmqj_dict_set(c, args.u.d, lmqj_cstr(c, kwn[i]), kwv[i]);
    } else {
        args = lmqj_list_new(c, (size_t)argc);
        args.t = JV_TUPLE;
        for (int i = 0; i < argc; i++) lmqj_list_push(c, args, argv[i]);
    }
    return lmqj_percent_format(c, at, s, args);
}

static lmqj_value f_indent(ARGS)
{
    if (in.t == JV_UNDEF) lmqj_fail_undefined(c, at, in);
    if (in.t != JV_STR)
        lmqj_fail(c, at, "TypeError: unsupported operand type(s) for +=: '%s' and 'str'", lmqj_type_name(in));
    lmqj_value s = need_str(c, at, in);
    const lmqj_value *w = ARG(0, "width");
    bool first = opt_bool(ARG(1, "first"), false), blank = opt_bool(ARG(2, "blank"), false);
    lmqj_value ind;
    if (w && w->t == JV_STR) ind = *w;
    else {
        int64_t n = opt_int(c, at, w, 4, "width");
        if (n < 0) n = 0;
        if (n > 4096) lmqj_fail_limit(c, at, "indent width too large");
        char *sp = lmqj_alloc(c, (size_t)n + 1);
        memset(sp, ' ', (size_t)n);
        ind = lmqj_strn(c, sp, (size_t)n);
    }
    lmqj_buf tmp;
    lmqj_buf_init(&tmp, c);
    lmqj_buf_add(&tmp, s.u.s->s, s.u.s->len);
    lmqj_buf_addc(&tmp, '\n');
    const lmqj_list *lines = lmqj_splitlines(c, lmqj_buf_value(&tmp), false).u.l;
    lmqj_buf b;
    lmqj_buf_init(&b, c);
    if (first) lmqj_buf_add(&b, ind.u.s->s, ind.u.s->len);
    for (size_t i = 0; i < lines->n; i++) {
        lmqj_value ln = lines->v[i];
        if (i) {
            lmqj_buf_addc(&b, '\n');
            if (blank || ln.u.s->len) lmqj_buf_add(&b, ind.u.s->s, ind.u.s->len);
        }
        lmqj_buf_add(&b, ln.u.s->s, ln.u.s->len);
    }
    lmqj_value r = lmqj_buf_value(&b);
    r.safe = s.safe;
    return r;
}

static lmqj_value f_items(ARGS)
{
    if (in.t == JV_UNDEF) {
        lmqj_value e = lmqj_list_new(c, 0);
        e.gen = JG_GENERATOR;
        return e;
    }
    if (in.t != JV_DICT) lmqj_fail(c, at, "FilterArgumentError: Can only get item pairs from a mapping.");
    lmqj_value out = lmqj_list_new(c, in.u.d->n);
    for (size_t i = 0; i < in.u.d->n; i++)
        lmqj_list_push(c, out, make_tuple2(c, in.u.d->k[i], in.u.d->v[i]));
    out.gen = JG_GENERATOR;
    return out;
}

static lmqj_value f_join(ARGS)
{
    const lmqj_value *d = ARG(0, "d"), *attr = ARG(1, "attribute");
    const lmqj_list *l = lmqj_iterate(c, at, in);
    lmqj_buf b;
    lmqj_buf_init(&b, c);
    for (size_t i = 0; i < l->n; i++) {
        if (i && d) lmqj_to_str(&b, at, *d);
        lmqj_value v = l->v[i];
        if (attr && attr->t != JV_NONE) v = attr_path(c, at, v, *attr, NULL);
        lmqj_to_str(&b, at, v);
    }
    return lmqj_buf_value(&b);
}

static lmqj_value f_list(ARGS) { return list_copy(c, lmqj_iterate(c, at, in)); }

static lmqj_value f_lower(ARGS) { return lmqj_str_case(c, need_str(c, at, in), JC_LOWER); }
static lmqj_value f_upper(ARGS) { return lmqj_str_case(c, need_str(c, at, in), JC_UPPER); }

static lmqj_value f_map(ARGS)
{
    if (!lmqj_truthy(in)) { /* Jinja: `if value:` */
        lmqj_value e = lmqj_list_new(c, 0);
        e.gen = JG_GENERATOR;
        return e;
    }
    const lmqj_list *l = lmqj_iterate(c, at, in);
    lmqj_value out = lmqj_list_new(c, l->n);
    const lmqj_value *attr = lmqj_arg(-1, "attribute", 0, NULL, kwc, kwn, kwv);
    if (attr) {
        const lmqj_value *dflt = lmqj_arg(-1, "default", 0, NULL, kwc, kwn, kwv);
        for (size_t i = 0; i < l->n; i++) lmqj_list_push(c, out, attr_path(c, at, l->v[i], *attr, dflt));
        out.gen = JG_GENERATOR;
    return out;
    }
    if (argc < 1 || argv[0].t != JV_STR) {
        if (argc == 0) return out;
        lmqj_fail(c, at, "map needs a filter name or attribute=");
    }
    const char *name = argv[0].u.s->s;
    for (size_t i = 0; i < l->n; i++)
        lmqj_list_push(c, out, lmqj_filter(c, f, at, name, l->v[i], argc - 1, argv + 1, kwc, kwn, kwv));
    out.gen = JG_GENERATOR;
    return out;
}

static lmqj_value minmax(ARGS, bool want_max)
{
    bool cs = opt_bool(ARG(0, "case_sensitive"), false);
    const lmqj_value *attr = ARG(1, "attribute");
    const lmqj_list *l = lmqj_iterate(c, at, in);
    if (!l->n) return lmqj_undef_named(JU_HINT, 0, "No aggregated item, sequence was empty.");
    size_t best = 0;
    lmqj_value bk = sort_key(c, at, l->v[0], attr, cs);
    for (size_t i = 1; i < l->n; i++) {
        lmqj_value k = sort_key(c, at, l->v[i], attr, cs);
        int r = lmqj_compare(c, at, k, bk);
        if (want_max ? r > 0 : r < 0) { best = i; bk = k; }
    }
    return l->v[best];
}
static lmqj_value f_max(ARGS) { return minmax(c, f, at, in, argc, argv, kwc, kwn, kwv, true); }
static lmqj_value f_min(ARGS) { return minmax(c, f, at, in, argc, argv, kwc, kwn, kwv, false); }

static lmqj_value f_pprint(ARGS)
{
    lmqj_buf b;
    lmqj_buf_init(&b, c);
    lmqj_repr(&b, at, in);
    return lmqj_buf_value(&b);
}

/* select/reject/selectattr/rejectattr */
static lmqj_value select_common(ARGS, bool by_attr, bool want)
{
    if (!lmqj_truthy(in)) { /* Jinja: `if value:` */
        lmqj_value e = lmqj_list_new(c, 0);
        e.gen = JG_GENERATOR;
        return e;
    }
    const lmqj_list *l = lmqj_iterate(c, at, in);
    lmqj_value out = lmqj_list_new(c, 0);
    int a0 = 0;
    lmqj_value attr = {0};
    if (by_attr) {
        if (argc < 1) lmqj_fail(c, at, "TypeError: missing attribute for selectattr/rejectattr");
        attr = argv[0];
        a0 = 1;
    }
    const char *test = NULL;
    if (argc > a0) {
        if (argv[a0].t != JV_STR) lmqj_fail(c, at, "test name must be a string");
        test = argv[a0].u.s->s;
        if (!lmqj_has_test(test)) lmqj_fail(c, at, "TemplateRuntimeError: No test named '%s'.", test);
    }
    for (size_t i = 0; i < l->n; i++) {
        lmqj_value v = by_attr ? attr_path(c, at, l->v[i], attr, NULL) : l->v[i];
        bool r = test ? lmqj_test(c, f, at, test, v, argc - a0 - 1, argv + a0 + 1) : lmqj_truthy(v);
        if (r == want) lmqj_list_push(c, out, l->v[i]);
    }
    out.gen = JG_GENERATOR;
    return out;
}
static lmqj_value f_select(ARGS) { return select_common(c, f, at, in, argc, argv, kwc, kwn, kwv, false, true); }
static lmqj_value f_reject(ARGS) { return select_common(c, f, at, in, argc, argv, kwc, kwn, kwv, false, false); }
static lmqj_value f_selectattr(ARGS) { return select_common(c, f, at, in, argc, argv, kwc, kwn, kwv, true, true); }
static lmqj_value f_rejectattr(ARGS) { return select_common(c, f, at, in, argc, argv, kwc, kwn, kwv, true, false); }

static lmqj_value f_replace(ARGS)
{
    const lmqj_value *old = ARG(0, "old"), *rep = ARG(1, "new");
    if (!old || !rep) lmqj_fail(c, at, "TypeError: replace() needs old and new");
    int64_t count = opt_int(c, at, ARG(2, "count"), -1, "count");
    lmqj_value s = need_str(c, at, in);
    s.safe = 0;
    return lmqj_str_replace(c, s, need_str(c, at, *old), need_str(c, at, *rep), count);
}

static lmqj_value f_reverse(ARGS)
{
    if (in.t == JV_STR) {
        size_t n = in.u.s->len;
        uint32_t *cp = lmqj_alloc(c, (n + 1) * sizeof(uint32_t));
        size_t k = 0;
        for (size_t i = 0; i < n;) cp[k++] = lmqj_utf8_next(in.u.s->s, n, &i);
        lmqj_buf b;
        lmqj_buf_init(&b, c);
        while (k--) {
            char t[4];
            lmqj_buf_add(&b, t, lmqj_utf8_put(cp[k], t));
        }
        return lmqj_buf_value(&b);
    }
    if (in.t == JV_UNDEF) lmqj_fail(c, at, "TypeError: argument to reversed() must be a sequence");
    const lmqj_list *l = lmqj_iterate(c, at, in);
    lmqj_value out = lmqj_list_new(c, l->n);
    for (size_t i = l->n; i-- > 0;) lmqj_list_push(c, out, l->v[i]);
    if (in.t == JV_LIST && !in.gen) out.gen = JG_REVITER; /* reversed(list); others become lists */
    return out;
}

static lmqj_value f_round(ARGS)
{
    int64_t prec = opt_int(c, at, ARG(0, "precision"), 0, "precision");
    const lmqj_value *m = ARG(1, "method");
    const char *method = m && m->t == JV_STR ? m->u.s->s : "common";
    if (!lmqj_is_num(in)) lmqj_fail(c, at, "TypeError: type %s doesn't define __round__ method", lmqj_type_name(in));
    double x = lmqj_num_f(in);
    if (prec > 300) prec = 300;
    if (prec < -300) prec = -300;
    if (!strcmp(method, "common")) {
        if (in.t != JV_FLOAT) {
            if (prec >= 0) return lmqj_int(in.t == JV_INT ? in.u.i : in.u.b);
            double p = pow(10, (double)-prec), r = nearbyint(x / p) * p;
            if (!(fabs(r) < 9.2e18)) lmqj_fail(c, at, "OverflowError: integer result out of range");
            return lmqj_int((int64_t)r);
        }
        if (!isfinite(x)) return in;
        if (prec >= 0 && prec <= 20) {
            char tmp[400];
            snprintf(tmp, sizeof tmp, "%.*f", (int)prec, x); /* correctly rounded, ties to even */
            return lmqj_float(strtod(tmp, NULL));
        }
        double p = pow(10, (double)prec);
        return lmqj_float(nearbyint(x * p) / p);
    }
    double p = pow(10, (double)prec);
    if (!strcmp(method, "ceil")) return lmqj_float(ceil(x * p) / p);
    if (!strcmp(method, "floor")) return lmqj_float(floor(x * p) / p);
    lmqj_fail(c, at, "FilterArgumentError: method must be common, ceil or floor");
}

static lmqj_value f_safe(ARGS)
{
    lmqj_value s = need_str(c, at, in);
    s.safe = 1;
    return s;
}

static lmqj_value f_slice(ARGS)
{
    int64_t slices = opt_int(c, at, ARG(0, "slices"), 0, "slices");
    const lmqj_value *fill = ARG(1, "fill_with");
    if (slices <= 0 || slices > 100000) lmqj_fail(c, at, "ValueError: invalid number of slices");
    const lmqj_list *l = lmqj_iterate(c, at, in);
    int64_t n = (int64_t)l->n, per = n / slices, extra = n % slices, offset = 0;
    lmqj_value out = lmqj_list_new(c, 0);
    for (int64_t s = 0; s < slices; s++) {
        int64_t start = offset + s * per;
        if (s < extra) offset++;
        int64_t end = offset + (s + 1) * per;
        lmqj_value part = lmqj_list_new(c, 0);
        for (int64_t i = start; i < end && i < n; i++) lmqj_list_push(c, part, l->v[i]);
        if (fill && fill->t != JV_NONE && s >= extra) lmqj_list_push(c, part, *fill);
        lmqj_list_push(c, out, part);
    }
    out.gen = JG_GENERATOR;
    return out;
}

static lmqj_value f_sort(ARGS)
{
    bool rev = opt_bool(ARG(0, "reverse"), false), cs = opt_bool(ARG(1, "case_sensitive"), false);
    const lmqj_value *attr = ARG(2, "attribute");
    lmqj_value out = list_copy(c, lmqj_iterate(c, at, in));
    size_t n = out.u.l->n;
    lmqj_value *keys = lmqj_alloc(c, (n + 1) * sizeof(lmqj_value));
    for (size_t i = 0; i < n; i++) keys[i] = sort_key(c, at, out.u.l->v[i], attr, cs);
    lmqj_sort(c, at, out.u.l->v, keys, n, rev);
    return out;
}

static lmqj_value f_string(ARGS) { return need_str(c, at, in); }

static lmqj_value f_striptags(ARGS)
{
    lmqj_value s = need_str(c, at, in);
    lmqj_buf b;
    lmqj_buf_init(&b, c);
    const char *p = s.u.s->s;
    size_t n = s.u.s->len;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '<' && i + 3 < n && !memcmp(p + i, "<!--", 4)) {
            const char *e = memmem(p + i + 4, n - i - 4, "-->", 3);
            if (e) { i = (size_t)(e - p) + 2; continue; }
        }
        if (p[i] == '<') {
            const char *e = memchr(p + i + 1, '>', n - i - 1);
            if (e) { i = (size_t)(e - p); continue; }
        }
        lmqj_buf_addc(&b, p[i]);
    }
    /* collapse whitespace like " ".join(s.split()) */
    lmqj_value t = b.len ? lmqj_buf_value(&b) : lmqj_cstr(c, "");
    lmqj_buf o;
    lmqj_buf_init(&o, c);
    const char *q = t.u.s->s;
    size_t m = t.u.s->len;
    bool pending = false;
    for (size_t i = 0; i < m;) {
        size_t st = i;
        uint32_t cp = lmqj_utf8_next(q, m, &i);
        if (lmqj_uspace(cp)) { pending = o.len > 0; continue; }
        if (pending) lmqj_buf_addc(&o, ' ');
        pending = false;
        lmqj_buf_add(&o, q + st, i - st);
    }
    return o.len ? lmqj_buf_value(&o) : lmqj_cstr(c, "");
}

static lmqj_value f_sum(ARGS)
{
    const lmqj_value *attr = ARG(0, "attribute"), *start = ARG(1, "start");
    lmqj_value acc = start ? *start : lmqj_int(0);
    const lmqj_list *l = lmqj_iterate(c, at, in);
    for (size_t i = 0; i < l->n; i++) {
        lmqj_value v = attr && attr->t != JV_NONE ? attr_path(c, at, l->v[i], *attr, NULL) : l->v[i];
        acc = lmqj_binop(c, at, OP_ADD, acc, v);
    }
    return acc;
}

static lmqj_value f_title(ARGS)
{
    /* Jinja's title: split before runs of [-\s({\[<]; each piece: first char
     * upper, the rest lower */
    lmqj_value s = need_str(c, at, in);
    const char *p = s.u.s->s;
    size_t n = s.u.s->len;
    lmqj_buf b;
    lmqj_buf_init(&b, c);
    bool at_start = true;
    for (size_t i = 0; i < n;) {
        size_t st = i;
        uint32_t cp = lmqj_utf8_next(p, n, &i);
        bool sep = lmqj_uspace(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
        lmqj_value ch = lmqj_strn(c, p + st, i - st);
        if (sep) {
            lmqj_buf_add(&b, p + st, i - st);
            at_start = true;
            continue;
        }
        ch = lmqj_str_case(c, ch, at_start ? JC_UPPER : JC_LOWER);
        lmqj_buf_add(&b, ch.u.s->s, ch.u.s->len);
        at_start = false;
    }
    lmqj_value r = b.len ? lmqj_buf_value(&b) : lmqj_cstr(c, "");
    r.safe = s.safe;
    return r;
}

static const char *sep_str(lmqj_ctx *c, const lmqj_node *at, lmqj_value v)
{
    if (v.t != JV_STR) lmqj_fail(c, at, "TypeError: separators must be strings");
    return v.u.s->s;
}

static lmqj_value f_tojson(ARGS)
{
    lmqj_json_opts o = {0};
    o.ensure_ascii = opt_bool(ARG(0, "ensure_ascii"), false);
    const lmqj_value *ind = ARG(1, "indent"), *seps = ARG(2, "separators");
    o.sort_keys = opt_bool(ARG(3, "sort_keys"), false);
    if (ind && ind->t != JV_NONE) {
        if (ind->t == JV_STR) {
            o.indent = ind->u.s->s;
        } else {
            int64_t n = opt_int(c, at, ind, 0, "indent");
            if (n > 1024) lmqj_fail_limit(c, at, "indent too large");
            char *sp = lmqj_alloc(c, (size_t)(n > 0 ? n : 0) + 1);
            if (n > 0) memset(sp, ' ', (size_t)n);
            o.indent = sp;
        }
    }
    o.item_sep = o.indent ? "," : ", ";
    o.key_sep = ": ";
    if (seps && seps->t != JV_NONE) {
        if (!lmqj_is_seq(*seps) || seps->u.l->n != 2)
            lmqj_fail(c, at, "ValueError: separators must be an (item_separator, key_separator) pair");
        o.item_sep = sep_str(c, at, seps->u.l->v[0]);
        o.key_sep = sep_str(c, at, seps->u.l->v[1]);
    }
    lmqj_buf b;
    lmqj_buf_init(&b, c);
    lmqj_tojson(&b, at, in, &o);
    return lmqj_buf_value(&b);
}

static lmqj_value f_trim(ARGS)
{
    const lmqj_value *chars = ARG(0, "chars");
    return lmqj_str_strip(c, at, need_str(c, at, in), chars, true, true);
}

static lmqj_value f_truncate(ARGS)
{
    if (in.t != JV_STR) { /* Jinja only measures other sized values, then fails on them */
        int64_t sz = lmqj_is_seq(in) ? (int64_t)in.u.l->n : in.t == JV_DICT ? (int64_t)in.u.d->n : -1;
        if (sz < 0 && in.t != JV_UNDEF)
            lmqj_fail(c, at, "TypeError: object of type '%s' has no len()", lmqj_type_name(in));
        int64_t length = opt_int(c, at, ARG(0, "length"), 255, "length");
        int64_t leeway = opt_int(c, at, ARG(3, "leeway"), 5, "leeway");
        if (sz < 0 || sz - leeway <= length) return in;
        lmqj_fail(c, at, "AttributeError: '%s' object has no attribute 'rsplit'", lmqj_type_name(in));
    }
    lmqj_value s = need_str(c, at, in);
    int64_t length = opt_int(c, at, ARG(0, "length"), 255, "length");
    bool killwords = opt_bool(ARG(1, "killwords"), false);
    const lmqj_value *endv = ARG(2, "end");
    int64_t leeway = opt_int(c, at, ARG(3, "leeway"), 5, "leeway");
    lmqj_value end = endv ? need_str(c, at, *endv) : lmqj_cstr(c, "...");
    int64_t elen = (int64_t)ulen(end), n = (int64_t)ulen(s);
    if (length < elen) lmqj_fail(c, at, "AssertionError: expected length >= %lld, got %lld", (long long)elen, (long long)length);
    if (leeway < 0) lmqj_fail(c, at, "AssertionError: expected leeway >= 0, got %lld", (long long)leeway);
    if (n - leeway <= length) return s;
    /* byte offset of code point length - elen */
    size_t cut = 0;
    for (int64_t k = 0; k < length - elen; k++) lmqj_utf8_next(s.u.s->s, s.u.s->len, &cut);
    size_t keep = cut;
    if (!killwords) {
        for (size_t i = cut; i > 0; i--)
            if (s.u.s->s[i - 1] == ' ') { keep = i - 1; break; }
    }
    lmqj_buf b;
    lmqj_buf_init(&b, c);
    lmqj_buf_add(&b, s.u.s->s, keep);
    lmqj_buf_add(&b, end.u.s->s, end.u.s->len);
    return lmqj_buf_value(&b);
}

static lmqj_value f_unique(ARGS)
{
    bool cs = opt_bool(ARG(0, "case_sensitive"), false);
    const lmqj_value *attr = ARG(1, "attribute");
    const lmqj_list *l = lmqj_iterate(c, at, in);
    lmqj_value out = lmqj_list_new(c, 0), seen = lmqj_dict_new(c);
    for (size_t i = 0; i < l->n; i++) {
        lmqj_value k = sort_key(c, at, l->v[i], attr, cs);
        if (lmqj_dict_get(c, seen.u.d, k)) continue;
        lmqj_dict_set(c, seen.u.d, k, lmqj_none());
        lmqj_list_push(c, out, l->v[i]);
    }
    out.gen = JG_GENERATOR;
    return out;
}

static void url_quote(lmqj_buf *b, lmqj_value s, bool for_qs)
{
    for (size_t i = 0; i < s.u.s->len; i++) {
        unsigned char ch = (unsigned char)s.u.s->s[i];
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
            ch == '_' || ch == '.' || ch == '-' || ch == '~' || (!for_qs && ch == '/'))
            lmqj_buf_addc(b, (char)ch);
        else
            lmqj_buf_printf(b, "%%%02X", ch);
    }
}

static lmqj_value f_urlencode(ARGS)
{
    lmqj_buf b;
    lmqj_buf_init(&b, c);
    if (in.t == JV_DICT) {
        for (size_t i = 0; i < in.u.d->n; i++) {
            if (i) lmqj_buf_addc(&b, '&');
            url_quote(&b, need_str(c, at, in.u.d->k[i]), true);
            lmqj_buf_addc(&b, '=');
            url_quote(&b, need_str(c, at, in.u.d->v[i]), true);
        }
    } else {
        url_quote(&b, need_str(c, at, in), false);
    }
    return b.len ? lmqj_buf_value(&b) : lmqj_cstr(c, "");
}

static lmqj_value f_wordcount(ARGS)
{
    lmqj_value s = need_str(c, at, in);
    int64_t words = 0;
    bool inword = false;
    for (size_t i = 0; i < s.u.s->len; i++) {
        unsigned char ch = (unsigned char)s.u.s->s[i];
        bool w = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '_' || ch >= 0x80;
        if (w && !inword) words++;
        inword = w;
    }
    return lmqj_int(words);
}

static lmqj_value f_groupby(ARGS)
{
    const lmqj_value *attr = ARG(0, "attribute"), *dflt = ARG(1, "default");
    bool cs = opt_bool(ARG(2, "case_sensitive"), false);
    if (!attr) lmqj_fail(c, at, "TypeError: groupby needs an attribute");
    lmqj_value items = list_copy(c, lmqj_iterate(c, at, in));
    size_t n = items.u.l->n;
    lmqj_value *keys = lmqj_alloc(c, (n + 1) * sizeof(lmqj_value));
    for (size_t i = 0; i < n; i++) {
        keys[i] = attr_path(c, at, items.u.l->v[i], *attr, dflt);
        if (!cs && keys[i].t == JV_STR) keys[i] = lmqj_str_case(c, keys[i], JC_LOWER);
    }
    lmqj_value sorted_keys = lmqj_list_new(c, n);
    for (size_t i = 0; i < n; i++) lmqj_list_push(c, sorted_keys, make_tuple2(c, keys[i], items.u.l->v[i]));
    lmqj_sort(c, at, sorted_keys.u.l->v, keys, n, false);
    lmqj_value out = lmqj_list_new(c, 0), group = {0};
    lmqj_value last = {0};
    for (size_t i = 0; i < n; i++) {
        lmqj_value k = sorted_keys.u.l->v[i].u.l->v[0], v = sorted_keys.u.l->v[i].u.l->v[1];
        if (i == 0 || !lmqj_equal(c, k, last)) {
            group = lmqj_list_new(c, 0);
            lmqj_list_push(c, out, make_tuple2(c, k, group));
            last = k;
        }
        lmqj_list_push(c, group, v);
    }
    return out;
}

static const struct { const char *name; filter_fn fn; } filters[] = {
    {"abs", f_abs}, {"attr", f_attr}, {"batch", f_batch}, {"capitalize", f_capitalize},
    {"center", f_center}, {"count", f_length}, {"d", f_default}, {"default", f_default},
    {"dictsort", f_dictsort}, {"e", f_escape}, {"escape", f_escape}, {"first", f_first},
    {"float", f_float}, {"forceescape", f_forceescape}, {"format", f_format},
    {"groupby", f_groupby}, {"indent", f_indent}, {"int", f_int}, {"items", f_items},
    {"join", f_join}, {"last", f_last}, {"length", f_length}, {"list", f_list},
    {"lower", f_lower}, {"map", f_map}, {"max", f_max}, {"min", f_min}, {"pprint", f_pprint},
    {"reject", f_reject}, {"rejectattr", f_rejectattr}, {"replace", f_replace},
    {"reverse", f_reverse}, {"round", f_round}, {"safe", f_safe}, {"select", f_select},
    {"selectattr", f_selectattr}, {"slice", f_slice}, {"sort", f_sort}, {"string", f_string},
    {"striptags", f_striptags}, {"sum", f_sum}, {"title", f_title}, {"tojson", f_tojson},
    {"trim", f_trim}, {"truncate", f_truncate}, {"unique", f_unique}, {"upper", f_upper},
    {"urlencode", f_urlencode}, {"wordcount", f_wordcount},
};

bool lmqj_has_filter(const char *name)
{
    for (size_t i = 0; i < sizeof filters / sizeof filters[0]; i++)
        if (!strcmp(filters[i].name, name)) return true;
    return false;
}

lmqj_value lmqj_filter(lmqj_ctx *c, lmqj_frame *f, const lmqj_node *at, const char *name,
                       lmqj_value in, int argc, const lmqj_value *argv, int kwc,
                       const char *const *kwn, const lmqj_value *kwv)
{
    for (size_t i = 0; i < sizeof filters / sizeof filters[0]; i++)
        if (!strcmp(filters[i].name, name)) {
            if (in.t == JV_UNDEF && in.ukind == JU_UNSAFE) lmqj_fail_undefined(c, at, in);
            return filters[i].fn(c, f, at, in, argc, argv, kwc, kwn, kwv);
        }
    lmqj_fail(c, at, "TemplateAssertionError: No filter named '%s'.", name);
}

/* ====================================================================== tests */

static bool test_cmp(lmqj_ctx *c, const lmqj_node *at, int op, lmqj_value a, int argc,
                     const lmqj_value *argv)
{
    if (argc < 1) lmqj_fail(c, at, "TypeError: test needs an argument");
    lmqj_value b = argv[0];
    if (op == OP_EQ) return lmqj_equal(c, a, b);
    if (op == OP_NE) return !lmqj_equal(c, a, b);
    int r = lmqj_compare(c, at, a, b);
    return op == OP_LT ? r < 0 : op == OP_LE ? r <= 0 : op == OP_GT ? r > 0 : r >= 0;
}

static bool int_mod(lmqj_ctx *c, const lmqj_node *at, lmqj_value v, lmqj_value m, bool *zero)
{
    lmqj_value r = lmqj_binop(c, at, OP_MOD, v, m);
    *zero = lmqj_num_f(r) == 0;
    return true;
}

static bool str_all(lmqj_ctx *c, lmqj_value v, bool upper)
{
    /* Python islower/isupper: at least one cased char, no cased char of the other case */
    lmqj_value lo = lmqj_str_case(c, v, JC_LOWER), up = lmqj_str_case(c, v, JC_UPPER);
    bool cased = !(lo.u.s->len == up.u.s->len && !memcmp(lo.u.s->s, up.u.s->s, lo.u.s->len));
    lmqj_value same = upper ? up : lo;
    return cased && same.u.s->len == v.u.s->len && !memcmp(same.u.s->s, v.u.s->s, v.u.s->len);
}

static const char *const test_names[] = {
    "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "==", "escaped", "even",
    "false", "filter", "float", "ge", ">=", "gt", "greaterthan", ">", "in", "integer",
    "iterable", "le", "<=", "lower", "lt", "lessthan", "<", "mapping", "ne", "!=", "none",
    "number", "odd", "sameas", "sequence", "string", "test", "true", "undefined", "upper", NULL};

bool lmqj_has_test(const char *name)
{
    for (int i = 0; test_names[i]; i++)
        if (!strcmp(test_names[i], name)) return true;
    return false;
}

bool lmqj_test(lmqj_ctx *c, lmqj_frame *f, const lmqj_node *at, const char *name,
               lmqj_value v, int argc, const lmqj_value *argv)
{
    (void)f;
#define IS(s) (!strcmp(name, s))
    if (IS("defined")) return v.t != JV_UNDEF;
    if (IS("undefined")) return v.t == JV_UNDEF;
    if (IS("none")) return v.t == JV_NONE;
    if (IS("boolean")) return v.t == JV_BOOL;
    if (IS("false")) return v.t == JV_BOOL && !v.u.b;
    if (IS("true")) return v.t == JV_BOOL && v.u.b;
    if (IS("integer")) return v.t == JV_INT;
    if (IS("float")) return v.t == JV_FLOAT;
    if (IS("number")) return lmqj_is_num(v);
    if (IS("string")) return v.t == JV_STR;
    if (IS("mapping")) return v.t == JV_DICT;
    if (IS("iterable"))
        return v.t == JV_STR || v.t == JV_LIST || v.t == JV_TUPLE || v.t == JV_DICT ||
               v.t == JV_UNDEF || v.t == JV_LOOP;
    if (IS("sequence"))
        return v.t == JV_STR || v.t == JV_LIST || v.t == JV_TUPLE || v.t == JV_DICT || v.t == JV_UNDEF;
    if (IS("callable")) return v.t == JV_FUNC || v.t == JV_LOOP;
    if (IS("escaped")) return v.t == JV_STR && v.safe;
    if (IS("odd") || IS("even")) {
        if (v.t == JV_UNDEF) lmqj_fail_undefined(c, at, v);
        if (!lmqj_is_num(v)) lmqj_fail(c, at, "TypeError: not all arguments converted during string formatting");
        lmqj_value r = lmqj_binop(c, at, OP_MOD, v, lmqj_int(2));
        return lmqj_num_f(r) == (IS("even") ? 0.0 : 1.0);
    }
    if (IS("divisibleby")) {
        bool zero;
        if (argc < 1) lmqj_fail(c, at, "TypeError: divisibleby needs an argument");
        int_mod(c, at, v, argv[0], &zero);
        return zero;
    }
    if (IS("eq") || IS("equalto") || IS("==")) return test_cmp(c, at, OP_EQ, v, argc, argv);
    if (IS("ne") || IS("!=")) return test_cmp(c, at, OP_NE, v, argc, argv);
    if (IS("lt") || IS("lessthan") || IS("<")) return test_cmp(c, at, OP_LT, v, argc, argv);
    if (IS("le") || IS("<=")) return test_cmp(c, at, OP_LE, v, argc, argv);
    if (IS("gt") || IS("greaterthan") || IS(">")) return test_cmp(c, at, OP_GT, v, argc, argv);
    if (IS("ge") || IS(">=")) return test_cmp(c, at, OP_GE, v, argc, argv);
    if (IS("in")) {
        if (argc < 1) lmqj_fail(c, at, "TypeError: in needs an argument");
        return lmqj_contains(c, at, argv[0], v);
    }
    if (IS("sameas")) {
        if (argc < 1) lmqj_fail(c, at, "TypeError: sameas needs an argument");
        lmqj_value o = argv[0];
        if (v.t != o.t) return false;
        if (v.t == JV_NONE || v.t == JV_UNDEF) return true;
        if (v.t == JV_BOOL) return v.u.b == o.u.b;
        if (v.t == JV_INT) return v.u.i == o.u.i && v.u.i >= -5 && v.u.i <= 256;
        return v.u.s == o.u.s;
    }
    if (IS("lower") || IS("upper")) {
        lmqj_value s = lmqj_stringify(c, at, v);
        return str_all(c, s, IS("upper"));
    }
    if (IS("filter") || IS("test")) {
        if (v.t != JV_STR) return false;
        return IS("filter") ? lmqj_has_filter(v.u.s->s) : lmqj_has_test(v.u.s->s);
    }
#undef IS
    lmqj_fail(c, at, "TemplateAssertionError: No test named '%s'.", name);
}
