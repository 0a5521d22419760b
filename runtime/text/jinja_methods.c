/* jinja_methods.c — methods of str/list/dict values as templates call them
 * (`s.strip()`, `d.items()`, ...) under the immutable sandbox, the global
 * functions (range, namespace, dict, joiner, Hugging Face's raise_exception
 * and strftime_now), Python's printf-style `%` and str.format. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jinja_internal.h"

#define MARGS lmqj_ctx *c, const lmqj_node *at, lmqj_value self, int argc, \
              const lmqj_value *argv, int kwc, const char *const *kwn, const lmqj_value *kwv
#define ARG(i, name) lmqj_arg((i), (name), argc, argv, kwc, kwn, kwv)

/* ====================================================================== case mapping */

static uint32_t lower_cp(uint32_t cp)
{
    if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    if ((cp >= 0xc0 && cp <= 0xde && cp != 0xd7)) return cp + 32;
    if (cp == 0x178) return 0xff;
    if (cp == 0x130) return 'i';
    if ((cp >= 0x100 && cp <= 0x137) || (cp >= 0x14a && cp <= 0x177)) return cp | 1;
    if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17e)) return (cp & 1) ? cp + 1 : cp;
    if (cp >= 0x391 && cp <= 0x3ab && cp != 0x3a2) return cp + 32;
    if (cp >= 0x410 && cp <= 0x42f) return cp + 32;
    if (cp >= 0x400 && cp <= 0x40f) return cp + 80;
    if ((cp >= 0x460 && cp <= 0x481) || (cp >= 0x48a && cp <= 0x4bf) || (cp >= 0x4d0 && cp <= 0x52f))
        return cp | 1;
    return cp;
}

static uint32_t upper_cp(uint32_t cp)
{
    if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
    if ((cp >= 0xe0 && cp <= 0xfe && cp != 0xf7)) return cp - 32;
    if (cp == 0xff) return 0x178;
    if (cp == 0xb5) return 0x39c;
    if (cp == 0x131) return 'I';
    if (cp == 0x17f) return 'S';
    if ((cp >= 0x100 && cp <= 0x137) || (cp >= 0x14a && cp <= 0x177)) return cp & ~1u;
    if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17e)) return (cp & 1) ? cp : cp - 1;
    if (cp == 0x3c2) return 0x3a3;
    if (cp >= 0x3b1 && cp <= 0x3cb) return cp - 32;
    if (cp >= 0x430 && cp <= 0x44f) return cp - 32;
    if (cp >= 0x450 && cp <= 0x45f) return cp - 80;
    if ((cp >= 0x460 && cp <= 0x481) || (cp >= 0x48a && cp <= 0x4bf) || (cp >= 0x4d0 && cp <= 0x52f))
        return cp & ~1u;
    return cp;
}

static bool cased(uint32_t cp) { return lower_cp(cp) != cp || upper_cp(cp) != cp || cp == 0xdf; }

static void put_cp(lmqj_buf *b, uint32_t cp, bool upper_ss)
{
    char t[4];
    if (upper_ss && cp == 0xdf) { lmqj_buf_add(b, "SS", 2); return; }
    lmqj_buf_add(b, t, lmqj_utf8_put(cp, t));
}

lmqj_value lmqj_str_case(lmqj_ctx *c, lmqj_value s, int mode)
{
    const char *p = s.u.s->s;
    size_t n = s.u.s->len;
    lmqj_buf b;
    lmqj_buf_init(&b, c);
    bool prev_cased = false, first = true;
    for (size_t i = 0; i < n;) {
        size_t st = i;
        uint32_t cp = lmqj_utf8_next(p, n, &i);
        if (i - st == 1 && cp >= 0x80) { lmqj_buf_add(&b, p + st, 1); continue; } /* invalid byte */
        bool up;
        switch (mode) {
        case JC_UPPER: up = true; break;
        case JC_CAPITALIZE: up = first; break;
        case JC_PYTITLE: up = !prev_cased; break;
        case JC_SWAPCASE: up = lower_cp(cp) == cp; break;
        default: up = false; break;
        }
        prev_cased = cased(cp);
        first = false;
        if (up) put_cp(&b, upper_cp(cp), true);
        else put_cp(&b, lower_cp(cp), false);
    }
    lmqj_value r = b.len ? lmqj_buf_value(&b) : lmqj_cstr(c, "");
    r.safe = s.safe;
    return r;
}

/* ====================================================================== string helpers */

static bool in_set(uint32_t cp, const lmqj_value *chars)
{
    if (!chars) return lmqj_uspace(cp);
    const char *p = chars->u.s->s;
    size_t n = chars->u.s->len;
    for (size_t i = 0; i < n;)
        if (lmqj_utf8_next(p, n, &i) == cp) return true;
    return false;
}

lmqj_value lmqj_str_strip(lmqj_ctx *c, const lmqj_node *at, lmqj_value s, const lmqj_value *chars,
                          bool left, bool right)
{
    if (chars && chars->t == JV_NONE) chars = NULL;
    if (chars && chars->t != JV_STR)
        lmqj_fail(c, at, "TypeError: strip arg must be None or str");
    const char *p = s.u.s->s;
    size_t n = s.u.s->len, a = 0, b = n;
    if (left)
        while (a < n) {
            size_t j = a;
            if (!in_set(lmqj_utf8_next(p, n, &j), chars)) break;
            a = j;
        }
    if (right)
        while (b > a) {
            size_t st = b - 1;
            while (st > a && ((unsigned char)p[st] & 0xc0) == 0x80) st--;
            size_t j = st;
            uint32_t cp = lmqj_utf8_next(p, b, &j);
            if (j != b || !in_set(cp, chars)) break;
            b = st;
        }
    if (a == 0 && b == n) return s;
    lmqj_value r = lmqj_strn(c, p + a, b - a);
    r.safe = s.safe;
    return r;
}

lmqj_value lmqj_str_replace(lmqj_ctx *c, lmqj_value s, lmqj_value old, lmqj_value repl,
                            int64_t count)
{
    const char *p = s.u.s->s;
    size_t n = s.u.s->len, on = old.u.s->len;
    lmqj_buf b;
    lmqj_buf_init(&b, c);
    int64_t done = 0;
    if (on == 0) { /* Python inserts the replacement around every character */
        size_t i = 0;
        while (true) {
            if (count < 0 || done < count) { lmqj_buf_add(&b, repl.u.s->s, repl.u.s->len); done++; }
            if (i >= n) break;
            size_t st = i;
            lmqj_utf8_next(p, n, &i);
            lmqj_buf_add(&b, p + st, i - st);
        }
        return b.len ? lmqj_buf_value(&b) : lmqj_cstr(c, "");
    }
    size_t i = 0;
    while (i < n) {
        const char *hit = (count < 0 || done < count) ? memmem(p + i, n - i, old.u.s->s, on) : NULL;
        if (!hit) break;
        lmqj_buf_add(&b, p + i, (size_t)(hit - (p + i)));
        lmqj_buf_add(&b, repl.u.s->s, repl.u.s->len);
        i = (size_t)(hit - p) + on;
        done++;
    }
    lmqj_buf_add(&b, p + i, n - i);
    return b.len ? lmqj_buf_value(&b) : lmqj_cstr(c, "");
}

/* Python's line boundaries: \n \r \r\n \v \f \x1c \x1d \x1e \x85 \u2028 \u2029 */
static size_t line_break(const char *p, size_t n, size_t i)
{
    size_t j = i;
    uint32_t cp = lmqj_utf8_next(p, n, &j);
    if (cp == '\r' && j < n && p[j] == '\n') return j + 1 - i;
    if (cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || (cp >= 0x1c && cp <= 0x1e) ||
        cp == 0x85 || cp == 0x2028 || cp == 0x2029)
        return j - i;
    return 0;
}

lmqj_value lmqj_splitlines(lmqj_ctx *c, lmqj_value s, bool keepends)
{
    const char *p = s.u.s->s;
    size_t n = s.u.s->len, st = 0;
    lmqj_value out = lmqj_list_new(c, 0);
    for (size_t i = 0; i < n;) {
        size_t br = line_break(p, n, i);
        if (!br) { lmqj_utf8_next(p, n, &i); continue; }
        lmqj_list_push(c, out, lmqj_strn(c, p + st, (keepends ? i + br : i) - st));
        i += br;
        st = i;
    }
    if (st < n) lmqj_list_push(c, out, lmqj_strn(c, p + st, n - st));
    return out;
}

static lmqj_value need_s(lmqj_ctx *c, const lmqj_node *at, const lmqj_value *v, const char *what)
{
    if (!v || v->t != JV_STR)
        lmqj_fail(c, at, "TypeError: %s must be str, not %s", what, v ? lmqj_type_name(*v) : "nothing");
    return *v;
}

static int64_t cp_index(const char *p, size_t byte_off)
{
    return (int64_t)lmqj_utf8_count(p, byte_off);
}

/* ====================================================================== str methods */

static lmqj_value m_upper(MARGS) { return lmqj_str_case(c, self, JC_UPPER); }
static lmqj_value m_lower(MARGS) { return lmqj_str_case(c, self, JC_LOWER); }
static lmqj_value m_title(MARGS) { return lmqj_str_case(c, self, JC_PYTITLE); }
static lmqj_value m_capitalize(MARGS) { return lmqj_str_case(c, self, JC_CAPITALIZE); }
static lmqj_value m_swapcase(MARGS) { return lmqj_str_case(c, self, JC_SWAPCASE); }
static lmqj_value m_strip(MARGS) { return lmqj_str_strip(c, at, self, ARG(0, "chars"), true, true); }
static lmqj_value m_lstrip(MARGS) { return lmqj_str_strip(c, at, self, ARG(0, "chars"), true, false); }
static lmqj_value m_rstrip(MARGS) { return lmqj_str_strip(c, at, self, ARG(0, "chars"), false, true); }

static lmqj_value split_common(MARGS, bool from_right)
{
    const lmqj_value *sep = ARG(0, "sep"), *mx = ARG(1, "maxsplit");
    int64_t maxsplit = mx && mx->t == JV_INT ? mx->u.i : -1;
    const char *p = self.u.s->s;
    size_t n = self.u.s->len;
    lmqj_value out = lmqj_list_new(c, 0);
    if (sep && sep->t == JV_NONE) sep = NULL;
    if (sep) {
        lmqj_value sp = need_s(c, at, sep, "separator");
        size_t sn = sp.u.s->len;
        if (!sn) lmqj_fail(c, at, "ValueError: empty separator");
        if (!from_right) {
            size_t i = 0;
            int64_t done = 0;
            for (;;) {
                const char *hit = (maxsplit < 0 || done < maxsplit) ? memmem(p + i, n - i, sp.u.s->s, sn) : NULL;
                if (!hit) break;
                lmqj_list_push(c, out, lmqj_strn(c, p + i, (size_t)(hit - p) - i));
                i = (size_t)(hit - p) + sn;
                done++;
            }
            lmqj_list_push(c, out, lmqj_strn(c, p + i, n - i));
            return out;
        }
        /* rsplit: collect from the right, then reverse */
        size_t end = n;
        int64_t done = 0;
        while (maxsplit < 0 || done < maxsplit) {
            size_t k = end;
            bool found = false;
            while (k >= sn) {
                if (!memcmp(p + k - sn, sp.u.s->s, sn)) { found = true; break; }
                k--;
            }
            if (!found) break;
            lmqj_list_push(c, out, lmqj_strn(c, p + k, end - k));
            end = k - sn;
            done++;
        }
        lmqj_list_push(c, out, lmqj_strn(c, p, end));
        for (size_t a = 0, b = out.u.l->n - 1; a < b; a++, b--) {
            lmqj_value t = out.u.l->v[a];
            out.u.l->v[a] = out.u.l->v[b];
            out.u.l->v[b] = t;
        }
        return out;
    }
    /* whitespace runs */
    size_t *st = lmqj_alloc(c, (n + 1) * sizeof(size_t) * 2);
    size_t nw = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        if (lmqj_uspace(lmqj_utf8_next(p, n, &j))) { i = j; continue; }
        size_t a = i;
        while (i < n) {
            j = i;
            if (lmqj_uspace(lmqj_utf8_next(p, n, &j))) break;
            i = j;
        }
        st[2 * nw] = a;
        st[2 * nw + 1] = i;
        nw++;
    }
    if (maxsplit < 0 || (size_t)maxsplit >= nw) {
        for (size_t w = 0; w < nw; w++) lmqj_list_push(c, out, lmqj_strn(c, p + st[2 * w], st[2 * w + 1] - st[2 * w]));
        return out;
    }
    if (!from_right) {
        for (size_t w = 0; w < (size_t)maxsplit; w++)
            lmqj_list_push(c, out, lmqj_strn(c, p + st[2 * w], st[2 * w + 1] - st[2 * w]));
        lmqj_list_push(c, out, lmqj_strn(c, p + st[2 * maxsplit], n - st[2 * maxsplit]));
        return out;
    }
    size_t first = nw - (size_t)maxsplit;
    lmqj_list_push(c, out, lmqj_strn(c, p, st[2 * (first - 1) + 1]));
    for (size_t w = first; w < nw; w++) lmqj_list_push(c, out, lmqj_strn(c, p + st[2 * w], st[2 * w + 1] - st[2 * w]));
    return out;
}
static lmqj_value m_split(MARGS) { return split_common(c, at, self, argc, argv, kwc, kwn, kwv, false); }
static lmqj_value m_rsplit(MARGS) { return split_common(c, at, self, argc, argv, kwc, kwn, kwv, true); }

static lmqj_value m_splitlines(MARGS)
{
    const lmqj_value *k = ARG(0, "keepends");
    return lmqj_splitlines(c, self, k && lmqj_truthy(*k));
}

static bool affix_match(lmqj_ctx *c, const lmqj_node *at, lmqj_value s, lmqj_value a, bool end)
{
    if (lmqj_is_seq(a)) {
        for (size_t i = 0; i < a.u.l->n; i++)
            if (affix_match(c, at, s, a.u.l->v[i], end)) return true;
        return false;
    }
    if (a.t != JV_STR) lmqj_fail(c, at, "TypeError: %swith first arg must be str or a tuple of str", end ? "ends" : "starts");
    size_t n = a.u.s->len;
    if (n > s.u.s->len) return false;
    return !memcmp(s.u.s->s + (end ? s.u.s->len - n : 0), a.u.s->s, n);
}
static lmqj_value m_startswith(MARGS)
{
    const lmqj_value *a = ARG(0, "prefix");
    if (!a) lmqj_fail(c, at, "TypeError: startswith() takes at least 1 argument");
    return lmqj_bool(affix_match(c, at, self, *a, false));
}
static lmqj_value m_endswith(MARGS)
{
    const lmqj_value *a = ARG(0, "suffix");
    if (!a) lmqj_fail(c, at, "TypeError: endswith() takes at least 1 argument");
    return lmqj_bool(affix_match(c, at, self, *a, true));
}

static int64_t find_common(lmqj_ctx *c, const lmqj_node *at, lmqj_value self, const lmqj_value *sub,
                           bool rev)
{
    lmqj_value s = need_s(c, at, sub, "substring");
    const char *p = self.u.s->s;
    size_t n = self.u.s->len, sn = s.u.s->len;
    if (!rev) {
        const char *hit = sn ? memmem(p, n, s.u.s->s, sn) : p;
        return hit ? cp_index(p, (size_t)(hit - p)) : -1;
    }
    if (sn > n) return -1;
    for (size_t k = n - sn + 1; k-- > 0;)
        if (!memcmp(p + k, s.u.s->s, sn)) return cp_index(p, k);
    return -1;
}
static lmqj_value m_find(MARGS) { return lmqj_int(find_common(c, at, self, ARG(0, "sub"), false)); }
static lmqj_value m_rfind(MARGS) { return lmqj_int(find_common(c, at, self, ARG(0, "sub"), true)); }
static lmqj_value m_index(MARGS)
{
    int64_t r = find_common(c, at, self, ARG(0, "sub"), false);
    if (r < 0) lmqj_fail(c, at, "ValueError: substring not found");
    return lmqj_int(r);
}

static lmqj_value m_count(MARGS)
{
    lmqj_value s = need_s(c, at, ARG(0, "sub"), "substring");
    const char *p = self.u.s->s;
    size_t n = self.u.s->len, sn = s.u.s->len;
    if (!sn) return lmqj_int((int64_t)lmqj_utf8_count(p, n) + 1);
    int64_t cnt = 0;
    for (size_t i = 0; i + sn <= n;) {
        const char *hit = memmem(p + i, n - i, s.u.s->s, sn);
        if (!hit) break;
        cnt++;
        i = (size_t)(hit - p) + sn;
    }
    return lmqj_int(cnt);
}

static lmqj_value m_replace(MARGS)
{
    lmqj_value old = need_s(c, at, ARG(0, "old"), "replace() argument 1");
    lmqj_value rep = need_s(c, at, ARG(1, "new"), "replace() argument 2");
    const lmqj_value *cnt = ARG(2, "count");
    int64_t count = cnt && cnt->t == JV_INT ? cnt->u.i : -1;
    lmqj_value r = lmqj_str_replace(c, self, old.safe || !self.safe ? old : lmqj_escape(c, at, old),
                                    rep.safe || !self.safe ? rep : lmqj_escape(c, at, rep), count);
    r.safe = self.safe;
    return r;
}

static lmqj_value m_join(MARGS)
{
    const lmqj_value *it = ARG(0, "iterable");
    if (!it) lmqj_fail(c, at, "TypeError: join() takes exactly one argument");
    const lmqj_list *l = lmqj_iterate(c, at, *it);
    lmqj_buf b;
    lmqj_buf_init(&b, c);
    for (size_t i = 0; i < l->n; i++) {
        if (l->v[i].t != JV_STR)
            lmqj_fail(c, at, "TypeError: sequence item %zu: expected str instance, %s found", i,
                      lmqj_type_name(l->v[i]));
        if (i) lmqj_buf_add(&b, self.u.s->s, self.u.s->len);
        lmqj_buf_add(&b, l->v[i].u.s->s, l->v[i].u.s->len);
    }
    return b.len ? lmqj_buf_value(&b) : lmqj_cstr(c, "");
}

static lmqj_value m_removeaffix(lmqj_ctx *c, const lmqj_node *at, lmqj_value self,
                                const lmqj_value *a, bool suffix)
{
    lmqj_value s = need_s(c, at, a, "affix");
    if (!affix_match(c, at, self, s, suffix)) return self;
    size_t n = self.u.s->len - s.u.s->len;
    return lmqj_strn(c, self.u.s->s + (suffix ? 0 : s.u.s->len), n);
}
static lmqj_value m_removeprefix(MARGS) { return m_removeaffix(c, at, self, ARG(0, "prefix"), false); }
static lmqj_value m_removesuffix(MARGS) { return m_removeaffix(c, at, self, ARG(0, "suffix"), true); }

static lmqj_value pad_common(MARGS, int mode) /* 0 ljust, 1 rjust, 2 center, 3 zfill */
{
    const lmqj_value *w = ARG(0, "width"), *fc = mode == 3 ? NULL : ARG(1, "fillchar");
    if (!w || w->t != JV_INT) lmqj_fail(c, at, "TypeError: width must be an integer");
    int64_t width = w->u.i, n = (int64_t)lmqj_utf8_count(self.u.s->s, self.u.s->len);
    if (width > (int64_t)c->lim.max_output) lmqj_fail_limit(c, at, "width exceeds the output limit");
    const char *fill = " ";
    size_t fl = 1;
    if (fc) {
        lmqj_value f = need_s(c, at, fc, "fillchar");
        if (lmqj_utf8_count(f.u.s->s, f.u.s->len) != 1)
            lmqj_fail(c, at, "TypeError: The fill character must be exactly one character long");
        fill = f.u.s->s;
        fl = f.u.s->len;
    }
    if (width <= n) return self;
    int64_t pad = width - n, left = mode == 0 ? 0 : mode == 2 ? pad / 2 + (pad & width & 1) : pad;
    lmqj_buf b;
    lmqj_buf_init(&b, c);
    const char *p = self.u.s->s;
    size_t len = self.u.s->len, skip = 0;
    if (mode == 3) {
        fill = "0";
        if (len && (p[0] == '+' || p[0] == '-')) { lmqj_buf_addc(&b, p[0]); skip = 1; }
    }
    for (int64_t i = 0; i < left; i++) lmqj_buf_add(&b, fill, fl);
    lmqj_buf_add(&b, p + skip, len - skip);
    for (int64_t i = 0; i < pad - left; i++) lmqj_buf_add(&b, fill, fl);
    return lmqj_buf_value(&b);
}
static lmqj_value m_ljust(MARGS) { return pad_common(c, at, self, argc, argv, kwc, kwn, kwv, 0); }
static lmqj_value m_rjust(MARGS) { return pad_common(c, at, self, argc, argv, kwc, kwn, kwv, 1); }
static lmqj_value m_center(MARGS) { return pad_common(c, at, self, argc, argv, kwc, kwn, kwv, 2); }
static lmqj_value m_zfill(MARGS) { return pad_common(c, at, self, argc, argv, kwc, kwn, kwv, 3); }

static lmqj_value partition_common(MARGS, bool rev)
{
    lmqj_value sep = need_s(c, at, ARG(0, "sep"), "separator");
    if (!sep.u.s->len) lmqj_fail(c, at, "ValueError: empty separator");
    const char *p = self.u.s->s;
    size_t n = self.u.s->len, sn = sep.u.s->len;
    long pos = -1;
    if (!rev) {
        const char *hit = memmem(p, n, sep.u.s->s, sn);
        if (hit) pos = hit - p;
    } else if (sn <= n) {
        for (size_t k = n - sn + 1; k-- > 0;)
            if (!memcmp(p + k, sep.u.s->s, sn)) { pos = (long)k; break; }
    }
    lmqj_value t = lmqj_list_new(c, 3), e = lmqj_cstr(c, "");
    t.t = JV_TUPLE;
    if (pos < 0) {
        lmqj_list_push(c, t, rev ? e : self);
        lmqj_list_push(c, t, e);
        lmqj_list_push(c, t, rev ? self : e);
    } else {
        lmqj_list_push(c, t, lmqj_strn(c, p, (size_t)pos));
        lmqj_list_push(c, t, sep);
        lmqj_list_push(c, t, lmqj_strn(c, p + pos + sn, n - (size_t)pos - sn));
    }
    return t;
}
static lmqj_value m_partition(MARGS) { return partition_common(c, at, self, argc, argv, kwc, kwn, kwv, false); }
static lmqj_value m_rpartition(MARGS) { return partition_common(c, at, self, argc, argv, kwc, kwn, kwv, true); }

static lmqj_value is_class(lmqj_value self, int cls)
{
    const char *p = self.u.s->s;
    size_t n = self.u.s->len;
    if (!n) return lmqj_bool(false);
    for (size_t i = 0; i < n;) {
        uint32_t cp = lmqj_utf8_next(p, n, &i);
        bool digit = cp >= '0' && cp <= '9';
        bool alpha = cp >= 0x80 ? (cased(cp) || (cp >= 0x4e00 && cp <= 0x9fff) || (cp >= 0x3040 && cp <= 0x30ff) || (cp >= 0xac00 && cp <= 0xd7a3))
                                : ((cp | 32) >= 'a' && (cp | 32) <= 'z');
        bool ok = cls == 0 ? alpha : cls == 1 ? digit : cls == 2 ? (alpha || digit) : lmqj_uspace(cp);
        if (!ok) return lmqj_bool(false);
    }
    return lmqj_bool(true);
}
static lmqj_value m_isalpha(MARGS) { return is_class(self, 0); }
static lmqj_value m_isdigit(MARGS) { return is_class(self, 1); }
static lmqj_value m_isalnum(MARGS) { return is_class(self, 2); }
static lmqj_value m_isspace(MARGS) { return is_class(self, 3); }

static lmqj_value m_islower_upper(lmqj_ctx *c, lmqj_value self, bool upper)
{
    lmqj_value lo = lmqj_str_case(c, self, JC_LOWER), up = lmqj_str_case(c, self, JC_UPPER);
    bool has_cased = !(lo.u.s->len == up.u.s->len && !memcmp(lo.u.s->s, up.u.s->s, lo.u.s->len));
    lmqj_value same = upper ? up : lo;
    return lmqj_bool(has_cased && same.u.s->len == self.u.s->len &&
                     !memcmp(same.u.s->s, self.u.s->s, self.u.s->len));
}
static lmqj_value m_islower(MARGS) { return m_islower_upper(c, self, false); }
static lmqj_value m_isupper(MARGS) { return m_islower_upper(c, self, true); }

static lmqj_value str_format(lmqj_ctx *c, const lmqj_node *at, lmqj_value fmt, int argc,
                             const lmqj_value *argv, int kwc, const char *const *kwn,
                             const lmqj_value *kwv);
static lmqj_value m_format(MARGS) { return str_format(c, at, self, argc, argv, kwc, kwn, kwv); }

/* ====================================================================== list, dict, loop methods */

static lmqj_value m_list_count(MARGS)
{
    const lmqj_value *x = ARG(0, NULL);
    if (!x) lmqj_fail(c, at, "TypeError: count() takes exactly one argument");
    int64_t n = 0;
    for (size_t i = 0; i < self.u.l->n; i++) n += lmqj_equal(c, self.u.l->v[i], *x);
    return lmqj_int(n);
}

static lmqj_value m_list_index(MARGS)
{
    const lmqj_value *x = ARG(0, NULL);
    if (!x) lmqj_fail(c, at, "TypeError: index() takes at least 1 argument");
    for (size_t i = 0; i < self.u.l->n; i++)
        if (lmqj_equal(c, self.u.l->v[i], *x)) return lmqj_int((int64_t)i);
    lmqj_fail(c, at, "ValueError: value is not in list");
}

static lmqj_value m_copy(MARGS)
{
    if (self.t == JV_DICT) {
        lmqj_value d = lmqj_dict_new(c);
        for (size_t i = 0; i < self.u.d->n; i++) lmqj_dict_set(c, d.u.d, self.u.d->k[i], self.u.d->v[i]);
        return d;
    }
    lmqj_value l = lmqj_list_new(c, self.u.l->n);
    l.t = self.t;
    for (size_t i = 0; i < self.u.l->n; i++) lmqj_list_push(c, l, self.u.l->v[i]);
    return l;
}

static lmqj_value m_get(MARGS)
{
    const lmqj_value *k = ARG(0, NULL), *d = ARG(1, NULL);
    if (!k) lmqj_fail(c, at, "TypeError: get expected at least 1 argument, got 0");
    if (k->t == JV_LIST || k->t == JV_DICT) lmqj_fail(c, at, "TypeError: unhashable type: '%s'", lmqj_type_name(*k));
    lmqj_value *v = lmqj_dict_get(c, self.u.d, *k);
    return v ? *v : d ? *d : lmqj_none();
}

static lmqj_value dict_view(lmqj_ctx *c, lmqj_value self, int what)
{
    lmqj_value l = lmqj_list_new(c, self.u.d->n);
    for (size_t i = 0; i < self.u.d->n; i++) {
        if (what == 0) lmqj_list_push(c, l, self.u.d->k[i]);
        else if (what == 1) lmqj_list_push(c, l, self.u.d->v[i]);
        else {
            lmqj_value t = lmqj_list_new(c, 2);
            t.t = JV_TUPLE;
            lmqj_list_push(c, t, self.u.d->k[i]);
            lmqj_list_push(c, t, self.u.d->v[i]);
            lmqj_list_push(c, l, t);
        }
    }
    return l;
}
static lmqj_value m_keys(MARGS) { lmqj_value r = dict_view(c, self, 0); r.gen = JG_KEYS; return r; }
static lmqj_value m_values(MARGS) { lmqj_value r = dict_view(c, self, 1); r.gen = JG_VALUES; return r; }
static lmqj_value m_items(MARGS) { lmqj_value r = dict_view(c, self, 2); r.gen = JG_ITEMS; return r; }

static lmqj_value m_cycle(MARGS)
{
    if (argc == 0) lmqj_fail(c, at, "TypeError: no items for cycling given");
    return argv[self.u.loop->index0 % argc];
}

static lmqj_value m_changed(MARGS)
{
    lmqj_loop *L = self.u.loop;
    lmqj_value t = lmqj_list_new(c, (size_t)argc);
    t.t = JV_TUPLE;
    for (int i = 0; i < argc; i++) lmqj_list_push(c, t, argv[i]);
    if (L->has_changed && lmqj_equal(c, L->changed_last, t)) return lmqj_bool(false);
    L->changed_last = t;
    L->has_changed = true;
    return lmqj_bool(true);
}

typedef struct method_row {
    uint8_t type; /* JV_STR, JV_LIST (lists and tuples), JV_DICT, JV_LOOP */
    const char *name;
    lmqj_builtin_fn fn; /* NULL: exists but the sandbox forbids it (mutates) */
} method_row;

static const method_row methods[] = {
    {JV_STR, "upper", m_upper}, {JV_STR, "lower", m_lower}, {JV_STR, "title", m_title},
    {JV_STR, "capitalize", m_capitalize}, {JV_STR, "swapcase", m_swapcase},
    {JV_STR, "casefold", m_lower}, {JV_STR, "strip", m_strip}, {JV_STR, "lstrip", m_lstrip},
    {JV_STR, "rstrip", m_rstrip}, {JV_STR, "split", m_split}, {JV_STR, "rsplit", m_rsplit},
    {JV_STR, "splitlines", m_splitlines}, {JV_STR, "startswith", m_startswith},
    {JV_STR, "endswith", m_endswith}, {JV_STR, "find", m_find}, {JV_STR, "rfind", m_rfind},
    {JV_STR, "index", m_index}, {JV_STR, "count", m_count}, {JV_STR, "replace", m_replace},
    {JV_STR, "join", m_join}, {JV_STR, "format", m_format},
    {JV_STR, "removeprefix", m_removeprefix}, {JV_STR, "removesuffix", m_removesuffix},
    {JV_STR, "ljust", m_ljust}, {JV_STR, "rjust", m_rjust}, {JV_STR, "center", m_center},
    {JV_STR, "zfill", m_zfill}, {JV_STR, "partition", m_partition},
    {JV_STR, "rpartition", m_rpartition}, {JV_STR, "isalpha", m_isalpha},
    {JV_STR, "isdigit", m_isdigit}, {JV_STR, "isnumeric", m_isdigit},
    {JV_STR, "isdecimal", m_isdigit}, {JV_STR, "isalnum", m_isalnum},
    {JV_STR, "isspace", m_isspace}, {JV_STR, "islower", m_islower},
    {JV_STR, "isupper", m_isupper},
    {JV_LIST, "count", m_list_count}, {JV_LIST, "index", m_list_index}, {JV_LIST, "copy", m_copy},
    {JV_LIST, "append", NULL}, {JV_LIST, "clear", NULL}, {JV_LIST, "pop", NULL},
    {JV_LIST, "reverse", NULL}, {JV_LIST, "insert", NULL}, {JV_LIST, "sort", NULL},
    {JV_LIST, "extend", NULL}, {JV_LIST, "remove", NULL},
    {JV_DICT, "get", m_get}, {JV_DICT, "keys", m_keys}, {JV_DICT, "values", m_values},
    {JV_DICT, "items", m_items}, {JV_DICT, "copy", m_copy}, {JV_DICT, "clear", NULL},
    {JV_DICT, "pop", NULL}, {JV_DICT, "popitem", NULL}, {JV_DICT, "setdefault", NULL},
    {JV_DICT, "update", NULL},
    {JV_LOOP, "cycle", m_cycle}, {JV_LOOP, "changed", m_changed},
};

lmqj_value lmqj_method(lmqj_ctx *c, lmqj_value obj, const char *name)
{
    uint8_t t = obj.t == JV_TUPLE ? JV_LIST : obj.t;
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        const method_row *m = &methods[i];
        if (m->type != t || strcmp(m->name, name)) continue;
        if (obj.t == JV_TUPLE && m->fn != m_list_count && m->fn != m_list_index) break;
        if (!m->fn) return lmqj_undef_named(JU_UNSAFE, obj.t, m->name);
        return lmqj_func_new(c, JF_METHOD, m->name, m->fn, obj);
    }
    return lmqj_undef_named(JU_ATTR, obj.t, name);
}

/* ====================================================================== globals */

static lmqj_value g_range(MARGS)
{
    int64_t a = 0, b, step = 1;
    for (int i = 0; i < argc; i++)
        if (argv[i].t != JV_INT && argv[i].t != JV_BOOL)
            lmqj_fail(c, at, "TypeError: '%s' object cannot be interpreted as an integer", lmqj_type_name(argv[i]));
#define IV(k) (argv[k].t == JV_INT ? argv[k].u.i : (int64_t)argv[k].u.b)
    if (argc == 1) b = IV(0);
    else if (argc == 2 || argc == 3) {
        a = IV(0);
        b = IV(1);
        if (argc == 3) step = IV(2);
    } else {
        lmqj_fail(c, at, "TypeError: range expected 1 to 3 arguments, got %d", argc);
    }
#undef IV
    if (step == 0) lmqj_fail(c, at, "ValueError: range() arg 3 must not be zero");
    double cnt = step > 0 ? ceil(((double)b - (double)a) / (double)step)
                          : ceil(((double)a - (double)b) / (double)-step);
    if (cnt < 0) cnt = 0;
    if (cnt > 100000)
        lmqj_fail(c, at, "OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    lmqj_value l = lmqj_list_new(c, (size_t)cnt);
    for (int64_t i = 0, v = a; i < (int64_t)cnt; i++, v += step) lmqj_list_push(c, l, lmqj_int(v));
    return l;
}

static lmqj_value g_namespace(MARGS)
{
    lmqj_value ns = lmqj_dict_new(c);
    ns.t = JV_NS;
    for (int i = 0; i < argc; i++) {
        if (argv[i].t != JV_DICT && argv[i].t != JV_NS)
            lmqj_fail(c, at, "TypeError: namespace() positional arguments must be mappings");
        for (size_t k = 0; k < argv[i].u.d->n; k++)
            lmqj_dict_set(c, ns.u.d, argv[i].u.d->k[k], argv[i].u.d->v[k]);
    }
    for (int i = 0; i < kwc; i++) lmqj_dict_set(c, ns.u.d, lmqj_cstr(c, kwn[i]), kwv[i]);
    return ns;
}

static lmqj_value g_dict(MARGS)
{
    lmqj_value d = g_namespace(c, at, self, argc, argv, kwc, kwn, kwv);
    d.t = JV_DICT;
    return d;
}

static lmqj_value g_raise(MARGS)
{
    lmqj_value msg = argc > 0 ? lmqj_stringify(c, at, argv[0]) : lmqj_cstr(c, "");
    c->err_raised = true;
    lmqj_fail(c, at, "%s", msg.u.s->s);
}

static lmqj_value g_strftime_now(MARGS)
{
    if (argc < 1 || argv[0].t != JV_STR) lmqj_fail(c, at, "TypeError: strftime_now() needs a format string");
    time_t t = (time_t)c->now;
    struct tm tmv;
    if (!localtime_r(&t, &tmv)) lmqj_fail(c, at, "strftime_now: invalid time");
    /* a trailing sentinel tells an empty result from a too-small buffer */
    lmqj_buf fmt;
    lmqj_buf_init(&fmt, c);
    lmqj_buf_add(&fmt, argv[0].u.s->s, argv[0].u.s->len);
    lmqj_buf_addc(&fmt, 'x');
    for (size_t cap = 256; cap <= (1u << 20); cap *= 4) {
        char *out = lmqj_alloc(c, cap);
        size_t n = strftime(out, cap, fmt.p, &tmv);
        if (n > 0) return lmqj_strn(c, out, n - 1);
    }
    lmqj_fail(c, at, "strftime_now: result too long");
}

static lmqj_value g_joiner_call(MARGS)
{
    lmqj_value *used = lmqj_dict_get_str(self.u.d, "used");
    if (!used || !lmqj_truthy(*used)) {
        lmqj_dict_set(c, self.u.d, lmqj_cstr(c, "used"), lmqj_bool(true));
        return lmqj_cstr(c, "");
    }
    return *lmqj_dict_get_str(self.u.d, "sep");
}

static lmqj_value g_joiner(MARGS)
{
    const lmqj_value *sep = ARG(0, "sep");
    lmqj_value st = lmqj_dict_new(c);
    lmqj_dict_set(c, st.u.d, lmqj_cstr(c, "sep"), sep ? lmqj_stringify(c, at, *sep) : lmqj_cstr(c, ", "));
    lmqj_dict_set(c, st.u.d, lmqj_cstr(c, "used"), lmqj_bool(false));
    return lmqj_func_new(c, JF_BUILTIN, "joiner", g_joiner_call, st);
}

lmqj_value lmqj_global(lmqj_ctx *c, const char *name)
{
    static const struct { const char *name; lmqj_builtin_fn fn; } globals[] = {
        {"range", g_range}, {"namespace", g_namespace}, {"dict", g_dict},
        {"raise_exception", g_raise}, {"strftime_now", g_strftime_now}, {"joiner", g_joiner},
    };
    for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++)
        if (!strcmp(globals[i].name, name))
            return lmqj_func_new(c, JF_BUILTIN, globals[i].name, globals[i].fn, lmqj_undef());
    return lmqj_undef();
}

/* ====================================================================== printf-style % */

typedef struct spec {
    bool left, plus, space, alt, zero;
    int64_t width, prec; /* -1: none */
} spec;

static void pad_out(lmqj_buf *b, const char *s, size_t n, const spec *sp, bool numeric)
{
    int64_t len = (int64_t)lmqj_utf8_count(s, n), pad = sp->width > len ? sp->width - len : 0;
    if (pad > 1 << 24) pad = 1 << 24;
    if (!sp->left && !(numeric && sp->zero))
        for (int64_t i = 0; i < pad; i++) lmqj_buf_addc(b, ' ');
    if (!sp->left && numeric && sp->zero) {
        size_t sign = (n && (s[0] == '-' || s[0] == '+' || s[0] == ' ')) ? 1 : 0;
        if (n > sign + 1 && s[sign] == '0' && (s[sign + 1] | 32) == 'x') sign += 2;
        lmqj_buf_add(b, s, sign);
        for (int64_t i = 0; i < pad; i++) lmqj_buf_addc(b, '0');
        lmqj_buf_add(b, s + sign, n - sign);
        return;
    }
    lmqj_buf_add(b, s, n);
    if (sp->left)
        for (int64_t i = 0; i < pad; i++) lmqj_buf_addc(b, ' ');
}

static void fmt_number(lmqj_ctx *c, const lmqj_node *at, lmqj_buf *b, char conv, lmqj_value v,
                       const spec *sp)
{
    char tmp[512], f[32];
    int k = 0;
    f[k++] = '%';
    if (sp->plus) f[k++] = '+';
    else if (sp->space) f[k++] = ' ';
    if (sp->alt) f[k++] = '#';
    if (v.t == JV_UNDEF) lmqj_fail_undefined(c, at, v);
    if (strchr("diuoxX", conv)) {
        if (!lmqj_is_num(v))
            lmqj_fail(c, at, "TypeError: %%%c format: a real number is required, not %s", conv, lmqj_type_name(v));
        if (v.t == JV_FLOAT && (isnan(v.u.f) || fabs(v.u.f) > 9.2e18))
            lmqj_fail(c, at, "OverflowError: cannot convert float to integer");
        long long iv = v.t == JV_FLOAT ? (long long)v.u.f : v.t == JV_INT ? v.u.i : v.u.b;
        f[k++] = 'l'; f[k++] = 'l';
        f[k++] = (conv == 'i' || conv == 'u') ? 'd' : conv;
        f[k] = 0;
        if (sp->alt && conv == 'o') { /* Python writes 0o */
            snprintf(tmp, sizeof tmp, iv < 0 ? "-0o%llo" : "0o%llo", iv < 0 ? -(unsigned long long)iv : (unsigned long long)iv);
        } else {
            snprintf(tmp, sizeof tmp, f, iv);
        }
        if (sp->prec > 0) { /* minimum digits */
            spec s2 = *sp;
            s2.width = sp->prec;
            s2.zero = true;
            s2.left = false;
            lmqj_buf t2;
            lmqj_buf_init(&t2, c);
            pad_out(&t2, tmp, strlen(tmp), &s2, true);
            snprintf(tmp, sizeof tmp, "%s", t2.p ? t2.p : "");
        }
    } else {
        if (!lmqj_is_num(v))
            lmqj_fail(c, at, "TypeError: must be real number, not %s", lmqj_type_name(v));
        double x = lmqj_num_f(v);
        int prec = sp->prec < 0 ? 6 : (int)(sp->prec > 300 ? 300 : sp->prec);
        f[k++] = '.'; f[k++] = '*';
        f[k++] = conv;
        f[k] = 0;
        snprintf(tmp, sizeof tmp, f, prec, x);
        if (isinf(x) || isnan(x)) { /* Python: inf/nan, lower or upper per conversion */
            const char *w = isnan(x) ? "nan" : "inf";
            snprintf(tmp, sizeof tmp, "%s%s", x < 0 ? "-" : sp->plus ? "+" : sp->space ? " " : "", w);
            if (conv >= 'A' && conv <= 'Z')
                for (char *q = tmp; *q; q++) *q = (char)(*q >= 'a' ? *q - 32 : *q);
        }
    }
    pad_out(b, tmp, strlen(tmp), sp, true);
}

lmqj_value lmqj_percent_format(lmqj_ctx *c, const lmqj_node *at, lmqj_value fmt, lmqj_value args)
{
    const char *p = fmt.u.s->s;
    size_t n = fmt.u.s->len;
    const lmqj_value *pos = &args;
    size_t npos = 1, next = 0;
    bool mapping = args.t == JV_DICT;
    if (args.t == JV_TUPLE) { pos = args.u.l->v; npos = args.u.l->n; }
    lmqj_buf b;
    lmqj_buf_init(&b, c);
    bool used_mapping = false;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '%') { lmqj_buf_addc(&b, p[i]); continue; }
        if (++i >= n) lmqj_fail(c, at, "ValueError: incomplete format");
        lmqj_value val;
        bool have_val = false;
        if (p[i] == '(') {
            if (!mapping) lmqj_fail(c, at, "TypeError: format requires a mapping");
            size_t st = ++i;
            int depth = 1;
            while (i < n && depth) { if (p[i] == '(') depth++; else if (p[i] == ')') depth--; if (depth) i++; }
            if (i >= n) lmqj_fail(c, at, "ValueError: incomplete format key");
            lmqj_value key = lmqj_strn(c, p + st, i - st);
            lmqj_value *v = lmqj_dict_get(c, args.u.d, key);
            if (!v) lmqj_fail(c, at, "KeyError: '%s'", key.u.s->s);
            val = *v;
            have_val = true;
            used_mapping = true;
            i++;
        }
        spec sp = {0};
        sp.prec = -1;
        for (; i < n && strchr("-+ #0", p[i]); i++) {
            if (p[i] == '-') sp.left = true;
            else if (p[i] == '+') sp.plus = true;
            else if (p[i] == ' ') sp.space = true;
            else if (p[i] == '#') sp.alt = true;
            else sp.zero = true;
        }
        if (i < n && p[i] == '*') {
            if (next >= npos || pos[next].t != JV_INT) lmqj_fail(c, at, "TypeError: * wants int");
            sp.width = pos[next++].u.i;
            if (sp.width < -100000000 || sp.width > 100000000) lmqj_fail_limit(c, at, "width exceeds the output limit");
            if (sp.width < 0) { sp.left = true; sp.width = -sp.width; }
            i++;
        } else {
            while (i < n && p[i] >= '0' && p[i] <= '9') { if (sp.width < 100000000) sp.width = sp.width * 10 + (p[i] - '0'); i++; }
        }
        if (i < n && p[i] == '.') {
            i++;
            sp.prec = 0;
            if (i < n && p[i] == '*') {
                if (next >= npos || pos[next].t != JV_INT) lmqj_fail(c, at, "TypeError: * wants int");
                sp.prec = pos[next++].u.i;
                if (sp.prec > 100000000) sp.prec = 100000000;
                i++;
            } else {
                while (i < n && p[i] >= '0' && p[i] <= '9') { if (sp.prec < 100000000) sp.prec = sp.prec * 10 + (p[i] - '0'); i++; }
            }
        }
        while (i < n && (p[i] == 'h' || p[i] == 'l' || p[i] == 'L')) i++;
        if (i >= n) lmqj_fail(c, at, "ValueError: incomplete format");
        char conv = p[i];
        if (conv == '%') { lmqj_buf_addc(&b, '%'); continue; }
        if (!have_val) {
            if (next >= npos) lmqj_fail(c, at, "TypeError: not enough arguments for format string");
            val = pos[next++];
        }
        switch (conv) {
        case 's': case 'r': case 'a': {
            lmqj_buf t;
            lmqj_buf_init(&t, c);
            if (conv == 's') lmqj_to_str(&t, at, val);
            else lmqj_repr(&t, at, val);
            size_t len = t.len;
            if (sp.prec >= 0) {
                size_t q = 0;
                for (int64_t k = 0; k < sp.prec && q < t.len; k++) lmqj_utf8_next(t.p, t.len, &q);
                len = q;
            }
            sp.zero = false;
            pad_out(&b, t.p ? t.p : "", len, &sp, false);
            break;
        }
        case 'c': {
            char tmp[4];
            size_t len;
            if (val.t == JV_INT && val.u.i >= 0 && val.u.i <= 0x10ffff) len = lmqj_utf8_put((uint32_t)val.u.i, tmp);
            else if (val.t == JV_STR && lmqj_utf8_count(val.u.s->s, val.u.s->len) == 1) { len = val.u.s->len; memcpy(tmp, val.u.s->s, len); }
            else lmqj_fail(c, at, "TypeError: %%c requires int or char");
            sp.zero = false;
            pad_out(&b, tmp, len, &sp, false);
            break;
        }
        case 'd': case 'i': case 'u': case 'o': case 'x': case 'X':
        case 'e': case 'E': case 'f': case 'F': case 'g': case 'G':
            fmt_number(c, at, &b, conv, val, &sp);
            break;
        default:
            lmqj_fail(c, at, "ValueError: unsupported format character '%c' (0x%x)", conv, (unsigned)(unsigned char)conv);
        }
    }
    if (!mapping && next < npos && args.t == JV_TUPLE)
        lmqj_fail(c, at, "TypeError: not all arguments converted during string formatting");
    /* Python skips this check when the argument supports [] (list, dict) */
    if (args.t != JV_TUPLE && args.t != JV_LIST && !mapping && next == 0)
        lmqj_fail(c, at, "TypeError: not all arguments converted during string formatting");
    (void)used_mapping;
    lmqj_value r = b.len ? lmqj_buf_value(&b) : lmqj_cstr(c, "");
    r.safe = fmt.safe;
    return r;
}

/* ====================================================================== str.format */

static void format_spec(lmqj_ctx *c, const lmqj_node *at, lmqj_buf *b, lmqj_value v,
                        const char *s, size_t n)
{
    char fill = ' ', align = 0, sign = '-', type = 0;
    bool alt = false, comma = false, zero = false;
    int64_t width = -1, prec = -1;
    size_t i = 0;
    if (n >= 2 && strchr("<>^=", s[1])) { fill = s[0]; align = s[1]; i = 2; }
    else if (n >= 1 && strchr("<>^=", s[0])) { align = s[0]; i = 1; }
    if (i < n && strchr("+- ", s[i])) sign = s[i++];
    if (i < n && s[i] == '#') { alt = true; i++; }
    if (i < n && s[i] == '0') { zero = true; i++; }
    if (i < n && s[i] >= '0' && s[i] <= '9') {
        width = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9') { if (width < 100000000) width = width * 10 + (s[i] - '0'); i++; }
    }
    if (i < n && s[i] == ',') { comma = true; i++; }
    if (i < n && s[i] == '.') {
        i++;
        prec = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9') { if (prec < 100000000) prec = prec * 10 + (s[i] - '0'); i++; }
    }
    if (i < n) type = s[i++];
    if (i != n) lmqj_fail(c, at, "ValueError: Invalid format specifier");
    lmqj_buf t;
    lmqj_buf_init(&t, c);
    bool numeric = lmqj_is_num(v) && v.t != JV_BOOL;
    if (v.t == JV_BOOL && type && type != 's') numeric = true;
    if (!numeric || type == 's') {
        if (type && type != 's') lmqj_fail(c, at, "ValueError: Unknown format code '%c' for object of type '%s'", type, lmqj_type_name(v));
        lmqj_to_str(&t, at, v);
        size_t len = t.len;
        if (prec >= 0) {
            size_t q = 0;
            for (int64_t k = 0; k < prec && q < t.len; k++) lmqj_utf8_next(t.p, t.len, &q);
            len = q;
        }
        if (!align) align = '<';
        t.len = len;
    } else {
        spec sp = {0};
        sp.plus = sign == '+';
        sp.space = sign == ' ';
        sp.alt = alt;
        sp.prec = prec;
        sp.width = -1;
        char conv = type;
        if (v.t != JV_FLOAT && (!type || type == 'd' || type == 'n')) conv = 'd';
        else if (!type) conv = prec >= 0 ? 'g' : 'r';
        if (conv == 'b') {
            if (v.t == JV_FLOAT) lmqj_fail(c, at, "ValueError: Unknown format code 'b' for object of type 'float'");
            int64_t iv = v.t == JV_INT ? v.u.i : v.u.b;
            uint64_t u = iv < 0 ? -(uint64_t)iv : (uint64_t)iv;
            char bits[80];
            int k = 0;
            do { bits[k++] = (char)('0' + (u & 1)); u >>= 1; } while (u);
            if (iv < 0) lmqj_buf_addc(&t, '-');
            else if (sp.plus) lmqj_buf_addc(&t, '+');
            if (alt) lmqj_buf_adds(&t, "0b");
            while (k--) lmqj_buf_addc(&t, bits[k]);
        } else if (conv == 'r') {
            char tmp[32];
            lmqj_float_repr(v.u.f, tmp);
            if (sp.plus && v.u.f >= 0) lmqj_buf_addc(&t, '+');
            lmqj_buf_adds(&t, tmp);
        } else if (conv == '%') {
            sp.prec = prec < 0 ? 6 : prec;
            fmt_number(c, at, &t, 'f', lmqj_float(lmqj_num_f(v) * 100), &sp);
            lmqj_buf_addc(&t, '%');
        } else if (strchr("dxXoeEfFgGc", conv)) {
            if (conv == 'c') {
                char tmp[4];
                lmqj_buf_add(&t, tmp, lmqj_utf8_put((uint32_t)(v.t == JV_INT ? v.u.i : 0) & 0x1fffff, tmp));
            } else {
                if (strchr("eEfFgG", conv)) v = lmqj_float(lmqj_num_f(v));
                if (v.t == JV_FLOAT && strchr("dxXo", conv))
                    lmqj_fail(c, at, "ValueError: Unknown format code '%c' for object of type 'float'", conv);
                fmt_number(c, at, &t, conv, v, &sp);
            }
        } else {
            lmqj_fail(c, at, "ValueError: Unknown format code '%c'", conv);
        }
        if (comma && t.len) { /* group the integer digits */
            size_t st = (t.p[0] == '-' || t.p[0] == '+' || t.p[0] == ' ') ? 1 : 0, e = st;
            while (e < t.len && t.p[e] >= '0' && t.p[e] <= '9') e++;
            lmqj_buf g;
            lmqj_buf_init(&g, c);
            lmqj_buf_add(&g, t.p, st);
            for (size_t k = st; k < e; k++) {
                lmqj_buf_addc(&g, t.p[k]);
                if ((e - k - 1) % 3 == 0 && k + 1 < e) lmqj_buf_addc(&g, ',');
            }
            lmqj_buf_add(&g, t.p + e, t.len - e);
            t = g;
        }
        if (!align) align = zero ? '=' : '>';
        if (zero && fill == ' ' && align == '=') fill = '0';
    }
    int64_t len = (int64_t)lmqj_utf8_count(t.p ? t.p : "", t.len);
    int64_t pad = width > len ? width - len : 0;
    if (pad > 1 << 24) pad = 1 << 24;
    int64_t left = align == '>' ? pad : align == '^' ? pad / 2 : 0;
    if (align == '=') {
        size_t st = (t.len && (t.p[0] == '-' || t.p[0] == '+' || t.p[0] == ' ')) ? 1 : 0;
        lmqj_buf_add(b, t.p, st);
        for (int64_t k = 0; k < pad; k++) lmqj_buf_addc(b, fill);
        lmqj_buf_add(b, t.p + st, t.len - st);
        return;
    }
    for (int64_t k = 0; k < left; k++) lmqj_buf_addc(b, fill);
    lmqj_buf_add(b, t.p ? t.p : "", t.len);
    for (int64_t k = 0; k < pad - left; k++) lmqj_buf_addc(b, fill);
}

static lmqj_value str_format(lmqj_ctx *c, const lmqj_node *at, lmqj_value fmt, int argc,
                             const lmqj_value *argv, int kwc, const char *const *kwn,
                             const lmqj_value *kwv)
{
    const char *p = fmt.u.s->s;
    size_t n = fmt.u.s->len;
    lmqj_buf b;
    lmqj_buf_init(&b, c);
    int auto_idx = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        if (ch == '}') {
            if (i + 1 < n && p[i + 1] == '}') { lmqj_buf_addc(&b, '}'); i++; continue; }
            lmqj_fail(c, at, "ValueError: Single '}' encountered in format string");
        }
        if (ch != '{') { lmqj_buf_addc(&b, ch); continue; }
        if (i + 1 < n && p[i + 1] == '{') { lmqj_buf_addc(&b, '{'); i++; continue; }
        size_t st = ++i;
        int depth = 1;
        while (i < n && depth) {
            if (p[i] == '{') depth++;
            else if (p[i] == '}') depth--;
            if (depth) i++;
        }
        if (i >= n) lmqj_fail(c, at, "ValueError: expected '}' before end of string");
        /* field [!conv] [:spec] */
        size_t e = st;
        while (e < i && p[e] != '!' && p[e] != ':' && p[e] != '.' && p[e] != '[') e++;
        lmqj_value v;
        if (e == st) {
            if (auto_idx >= argc) lmqj_fail(c, at, "IndexError: Replacement index %d out of range for positional args tuple", auto_idx);
            v = argv[auto_idx++];
        } else if (p[st] >= '0' && p[st] <= '9') {
            long idx = strtol(p + st, NULL, 10);
            if (idx >= argc) lmqj_fail(c, at, "IndexError: Replacement index %ld out of range for positional args tuple", idx);
            v = argv[idx];
        } else {
            lmqj_value key = lmqj_strn(c, p + st, e - st);
            const lmqj_value *kv = lmqj_arg(-1, key.u.s->s, 0, NULL, kwc, kwn, kwv);
            if (!kv) lmqj_fail(c, at, "KeyError: '%s'", key.u.s->s);
            v = *kv;
        }
        while (e < i && (p[e] == '.' || p[e] == '[')) {
            if (p[e] == '.') {
                size_t a = ++e;
                while (e < i && p[e] != '.' && p[e] != '[' && p[e] != '!' && p[e] != ':') e++;
                v = lmqj_getattr(c, at, v, lmqj_strn(c, p + a, e - a).u.s->s);
            } else {
                size_t a = ++e;
                while (e < i && p[e] != ']') e++;
                if (e >= i) lmqj_fail(c, at, "ValueError: Missing ']' in format string");
                bool digits = e > a;
                for (size_t k = a; k < e; k++) if (p[k] < '0' || p[k] > '9') digits = false;
                lmqj_value key = digits ? lmqj_int(strtoll(p + a, NULL, 10)) : lmqj_strn(c, p + a, e - a);
                v = lmqj_getitem(c, at, v, key);
                e++;
            }
        }
        char conv = 0;
        if (e < i && p[e] == '!') {
            if (e + 1 >= i) lmqj_fail(c, at, "ValueError: end of string while looking for conversion specifier");
            conv = p[e + 1];
            e += 2;
        }
        const char *specp = "";
        size_t specn = 0;
        if (e < i && p[e] == ':') { specp = p + e + 1; specn = i - e - 1; }
        else if (e != i) lmqj_fail(c, at, "ValueError: expected ':' after conversion specifier");
        if (conv == 'r' || conv == 'a' || conv == 's') {
            lmqj_buf t;
            lmqj_buf_init(&t, c);
            if (conv == 's') lmqj_to_str(&t, at, v);
            else lmqj_repr(&t, at, v);
            v = t.len ? lmqj_buf_value(&t) : lmqj_cstr(c, "");
        } else if (conv) {
            lmqj_fail(c, at, "ValueError: Unknown conversion specifier %c", conv);
        }
        if (v.t == JV_UNDEF && v.ukind != JU_UNSAFE && specn == 0) continue;
        format_spec(c, at, &b, v, specp, specn);
    }
    lmqj_value r = b.len ? lmqj_buf_value(&b) : lmqj_cstr(c, "");
    r.safe = fmt.safe;
    return r;
}
