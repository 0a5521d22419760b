/* jinja_lexer.c — chat template source -> tokens, following Jinja2's lexer with
 * Hugging Face's settings: trim_blocks (a block or comment end eats one
 * following newline), lstrip_blocks (whitespace from a line start up to a
 * block or comment tag is dropped), and the `-`/`+` whitespace controls. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_internal.h"

#define LEX_MAX_BALANCE 1024

typedef struct lexer {
    lmqj_arena *ar;
    const char *s;
    size_t n;
    lmqj_token *t;
    size_t nt, cap;
    char *err;
    size_t errsz;
    bool failed;
} lexer;

static bool lex_fail(lexer *L, size_t pos, const char *fmt, ...)
{
    if (L->failed) return false;
    int line, col;
    lmqj_line_col(L->s, L->n, pos, &line, &col);
    int k = snprintf(L->err, L->errsz, "line %d col %d: ", line, col);
    if (k < 0) k = 0;
    if ((size_t)k < L->errsz) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(L->err + k, L->errsz - (size_t)k, fmt, ap);
        va_end(ap);
    }
    L->failed = true;
    return false;
}

void lmqj_line_col(const char *src, size_t len, size_t pos, int *line, int *col)
{
    int ln = 1;
    size_t ls = 0;
    if (pos > len) pos = len;
    for (size_t i = 0; i < pos; i++)
        if (src[i] == '\n') { ln++; ls = i + 1; }
    *line = ln;
    *col = (int)lmqj_utf8_count(src + ls, pos - ls) + 1;
}

static lmqj_token *push(lexer *L, uint8_t type, size_t pos)
{
    if (L->nt == L->cap) {
        size_t nc = L->cap ? L->cap * 2 : 256;
        lmqj_token *nt = lmqj_arena_alloc(L->ar, nc * sizeof(lmqj_token));
        if (!nt) { lex_fail(L, pos, "template needs more than the parse memory limit (256 MiB)"); return NULL; }
        if (L->nt) memcpy(nt, L->t, L->nt * sizeof(lmqj_token));
        L->t = nt;
        L->cap = nc;
    }
    lmqj_token *t = &L->t[L->nt++];
    memset(t, 0, sizeof *t);
    t->type = type;
    t->pos = (uint32_t)pos;
    return t;
}

static bool push_text(lexer *L, uint8_t type, size_t pos, const char *s, size_t n)
{
    char *p = lmqj_arena_alloc(L->ar, n + 1);
    if (!p) return lex_fail(L, pos, "template needs more than the parse memory limit (256 MiB)");
    memcpy(p, s, n);
    p[n] = 0;
    lmqj_token *t = push(L, type, pos);
    if (!t) return false;
    t->s = p;
    t->len = n;
    return true;
}

/* Length of the Unicode whitespace character at i, 0 if none. */
static size_t ws_len(const char *s, size_t n, size_t i)
{
    if (i >= n) return 0;
    size_t j = i;
    uint32_t cp = lmqj_utf8_next(s, n, &j);
    return lmqj_uspace(cp) ? j - i : 0;
}

static size_t skip_ws(const char *s, size_t n, size_t i)
{
    size_t k;
    while ((k = ws_len(s, n, i)) > 0) i += k;
    return i;
}

static bool starts(const char *s, size_t n, size_t i, const char *lit)
{
    size_t k = strlen(lit);
    return i + k <= n && !memcmp(s + i, lit, k);
}

/* Start of the trailing whitespace of s[a..b) (Python rstrip()). */
static size_t rstrip_at(const char *s, size_t a, size_t b)
{
    size_t end = b;
    while (end > a) {
        size_t st = end - 1;
        while (st > a && ((unsigned char)s[st] & 0xc0) == 0x80) st--;
        size_t j = st;
        uint32_t cp = lmqj_utf8_next(s, b, &j);
        if (j != end || !lmqj_uspace(cp)) break;
        end = st;
    }
    return end;
}

/* Emits the data before a tag, applying '-' (strip all trailing whitespace)
 * or lstrip_blocks (drop spaces between a line start and a block/comment
 * tag), as Jinja's OptionalLStrip rule. */
static bool emit_data(lexer *L, size_t a, size_t b, char sign, bool lstrip_ok, bool line_starting)
{
    if (sign == '-') {
        b = rstrip_at(L->s, a, b);
    } else if (sign != '+' && lstrip_ok) {
        size_t l_pos = a;
        for (size_t i = b; i > a; i--)
            if (L->s[i - 1] == '\n') { l_pos = i; break; }
        if ((l_pos > a || line_starting) && l_pos < b && skip_ws(L->s, b, l_pos) == b) b = l_pos;
    }
    if (b > a) return push_text(L, TK_DATA, a, L->s + a, b - a);
    return true;
}

/* --------------------------------------------------------------- literals */

static bool is_digit_in(char ch, int base)
{
    if (base == 2) return ch == '0' || ch == '1';
    if (base == 8) return ch >= '0' && ch <= '7';
    if (base == 16)
        return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
    return ch >= '0' && ch <= '9';
}

/* (\d+_)*\d+ at i; returns the end, or i when there is no match. */
static size_t digits_us(const char *s, size_t n, size_t i)
{
    size_t j = i;
    if (j >= n || !is_digit_in(s[j], 10)) return i;
    for (;;) {
        while (j < n && is_digit_in(s[j], 10)) j++;
        if (j + 1 < n && s[j] == '_' && is_digit_in(s[j + 1], 10)) { j++; continue; }
        return j;
    }
}

static bool lex_number(lexer *L, size_t *pi)
{
    const char *s = L->s;
    size_t n = L->n, i = *pi;
    /* float first (not directly after a '.') */
    if (!(i > 0 && s[i - 1] == '.')) {
        size_t m = digits_us(s, n, i), end = 0;
        if (m > i) {
            size_t frac = 0;
            if (m < n && s[m] == '.') {
                size_t f = digits_us(s, n, m + 1);
                if (f > m + 1) frac = f;
            }
            size_t e0 = frac ? frac : m;
            if (e0 < n && (s[e0] == 'e' || s[e0] == 'E')) {
                size_t k = e0 + 1;
                if (k < n && (s[k] == '+' || s[k] == '-')) k++;
                size_t e = digits_us(s, n, k);
                if (e > k) end = e;
            }
            if (!end && frac) end = frac;
        }
        if (end) {
            char tmp[128];
            size_t k = 0;
            for (size_t j = i; j < end && k + 1 < sizeof tmp; j++)
                if (s[j] != '_') tmp[k++] = s[j];
            tmp[k] = 0;
            lmqj_token *t = push(L, TK_FLOAT, i);
            if (!t) return false;
            t->f = strtod(tmp, NULL);
            *pi = end;
            return true;
        }
    }
    int base = 10;
    size_t j = i, ds;
    if (s[i] == '0' && i + 1 < n && strchr("bBoOxX", s[i + 1]) && s[i + 1]) {
        char p = (char)(s[i + 1] | 0x20);
        base = p == 'b' ? 2 : p == 'o' ? 8 : 16;
        j = i + 2;
        ds = j;
        while (j < n) {
            if (is_digit_in(s[j], base)) j++;
            else if (s[j] == '_' && j + 1 < n && is_digit_in(s[j + 1], base)) j++;
            else break;
        }
        if (j == ds) { base = 10; j = i; }
    }
    if (base == 10) {
        ds = i;
        if (s[i] == '0') {
            j = i + 1;
            while (j < n && (s[j] == '0' || (s[j] == '_' && j + 1 < n && s[j + 1] == '0'))) j++;
        } else {
            j = i;
            while (j < n && (is_digit_in(s[j], 10) ||
                             (s[j] == '_' && j + 1 < n && is_digit_in(s[j + 1], 10))))
                j++;
        }
    }
    uint64_t v = 0;
    for (size_t k = (base == 10 ? i : i + 2); k < j; k++) {
        if (s[k] == '_') continue;
        int d = s[k] <= '9' ? s[k] - '0' : (s[k] | 0x20) - 'a' + 10;
        if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base || v * (uint64_t)base + (uint64_t)d > INT64_MAX)
            return lex_fail(L, i, "integer literal too large");
        v = v * (uint64_t)base + (uint64_t)d;
    }
    lmqj_token *t = push(L, TK_INT, i);
    if (!t) return false;
    t->i = (int64_t)v;
    *pi = j;
    return true;
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9') return ch - '0';
    ch = (char)(ch | 0x20);
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    return -1;
}

/* Decodes a string literal body as Python's unicode-escape codec does after
 * Jinja's backslashreplace of non-ASCII characters. */
static bool lex_string(lexer *L, size_t *pi)
{
    const char *s = L->s;
    size_t n = L->n, i = *pi;
    char q = s[i];
    size_t j = i + 1;
    while (j < n && s[j] != q) j += (s[j] == '\\') ? 2 : 1;
    if (j >= n) return lex_fail(L, i, "unexpected char %s at %zu", q == '"' ? "'\"'" : "\"'\"", i);
    char *out = lmqj_arena_alloc(L->ar, (j - i) * 4 + 16);
    if (!out) return lex_fail(L, i, "template needs more than the parse memory limit (256 MiB)");
    size_t o = 0;
    for (size_t k = i + 1; k < j;) {
        if (s[k] != '\\') { out[o++] = s[k++]; continue; }
        char e = s[k + 1];
        size_t start = k;
        k += 2;
        uint32_t cp;
        switch (e) {
        case '\n': continue;
        case '\\': out[o++] = '\\'; continue;
        case '\'': out[o++] = '\''; continue;
        case '"': out[o++] = '"'; continue;
        case 'a': out[o++] = 7; continue;
        case 'b': out[o++] = 8; continue;
        case 'f': out[o++] = 12; continue;
        case 'n': out[o++] = '\n'; continue;
        case 'r': out[o++] = '\r'; continue;
        case 't': out[o++] = '\t'; continue;
        case 'v': out[o++] = 11; continue;
        case 'x': case 'u': case 'U': {
            int nd = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            cp = 0;
            for (int d = 0; d < nd; d++) {
                int h = k < j ? hexval(s[k]) : -1;
                if (h < 0) return lex_fail(L, start, "invalid \\%c escape in string literal", e);
                cp = cp * 16 + (uint32_t)h;
                k++;
            }
            if (cp > 0x10ffff) return lex_fail(L, start, "illegal Unicode character in string literal");
            o += lmqj_utf8_put(cp, out + o);
            continue;
        }
        default:
            if (e >= '0' && e <= '7') {
                cp = (uint32_t)(e - '0');
                for (int d = 0; d < 2 && k < j && s[k] >= '0' && s[k] <= '7'; d++)
                    cp = cp * 8 + (uint32_t)(s[k++] - '0');
                o += lmqj_utf8_put(cp, out + o);
                continue;
            }
            if ((unsigned char)e >= 0x80) {
                /* "\\" + backslashreplace form of the character, read literally */
                size_t m = k - 1;
                uint32_t c2 = lmqj_utf8_next(s, j, &m);
                out[o++] = '\\';
                o += (size_t)sprintf(out + o, c2 < 0x100 ? "x%02x" : c2 < 0x10000 ? "u%04x" : "U%08x", c2);
                k = m;
                continue;
            }
            if (e == 'N') return lex_fail(L, start, "\\N{...} escapes are not supported");
            out[o++] = '\\';
            k = start + 1; /* unknown escape: keep the backslash, reread the char */
            continue;
        }
    }
    out[o] = 0;
    lmqj_token *t = push(L, TK_STRING, i);
    if (!t) return false;
    t->s = out;
    t->len = o;
    *pi = j + 1;
    return true;
}

static int lex_operator(const char *s, size_t n, size_t i, size_t *len)
{
    static const struct { const char *lit; int op; } ops[] = {
        {"**", TO_POW}, {"//", TO_FLOORDIV}, {"==", TO_EQ}, {"!=", TO_NE}, {">=", TO_GE},
        {"<=", TO_LE}, {"+", TO_ADD}, {"-", TO_SUB}, {"/", TO_DIV}, {"*", TO_MUL},
        {"%", TO_MOD}, {"~", TO_TILDE}, {"[", TO_LBRACKET}, {"]", TO_RBRACKET},
        {"(", TO_LPAREN}, {")", TO_RPAREN}, {"{", TO_LBRACE}, {"}", TO_RBRACE},
        {">", TO_GT}, {"<", TO_LT}, {"=", TO_ASSIGN}, {".", TO_DOT}, {":", TO_COLON},
        {"|", TO_PIPE}, {",", TO_COMMA}, {";", TO_SEMICOLON},
    };
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        if (starts(s, n, i, ops[k].lit)) {
            *len = strlen(ops[k].lit);
            return ops[k].op;
        }
    }
    return 0;
}

static bool is_ident(unsigned char ch, bool first)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || ch >= 0x80 ||
           (!first && ch >= '0' && ch <= '9');
}

/* --------------------------------------------------------------- tags */

/* Tokens inside {{ }} or {% %}; returns the position after the end tag (or n
 * at the end of input) and whether the match ended in a newline. */
static bool lex_tag(lexer *L, size_t *pi, bool block, bool *line_starting)
{
    const char *s = L->s;
    size_t n = L->n, i = *pi;
    char bal[LEX_MAX_BALANCE];
    int nb = 0;
    while (i < n) {
        if (nb == 0) {
            size_t end = 0;
            const char *close = block ? "%}" : "}}";
            if (block && s[i] == '+' && starts(s, n, i + 1, close)) end = i + 3;
            else if (s[i] == '-' && starts(s, n, i + 1, close)) end = skip_ws(s, n, i + 3);
            else if (starts(s, n, i, close)) {
                end = i + 2;
                if (block && end < n && s[end] == '\n') end++;
            }
            if (end) {
                if (!push(L, block ? TK_BLOCK_END : TK_VAR_END, i)) return false;
                *line_starting = s[end - 1] == '\n';
                *pi = end;
                return true;
            }
        }
        size_t w = ws_len(s, n, i);
        if (w) { i = skip_ws(s, n, i); continue; }
        unsigned char ch = (unsigned char)s[i];
        if (ch >= '0' && ch <= '9') {
            if (!lex_number(L, &i)) return false;
            continue;
        }
        if (is_ident(ch, true)) {
            size_t j = i + 1;
            while (j < n && is_ident((unsigned char)s[j], false)) j++;
            if (!push_text(L, TK_NAME, i, s + i, j - i)) return false;
            i = j;
            continue;
        }
        if (ch == '\'' || ch == '"') {
            if (!lex_string(L, &i)) return false;
            continue;
        }
        size_t len = 0;
        int op = lex_operator(s, n, i, &len);
        if (!op) return lex_fail(L, i, "unexpected char '%c' at %zu", ch, i);
        if (op == TO_LBRACE || op == TO_LPAREN || op == TO_LBRACKET) {
            if (nb == LEX_MAX_BALANCE) return lex_fail(L, i, "brackets nested too deeply");
            bal[nb++] = op == TO_LBRACE ? '}' : op == TO_LPAREN ? ')' : ']';
        } else if (op == TO_RBRACE || op == TO_RPAREN || op == TO_RBRACKET) {
            if (nb == 0) return lex_fail(L, i, "unexpected '%c'", ch);
            if (bal[nb - 1] != (char)ch)
                return lex_fail(L, i, "unexpected '%c', expected '%c'", ch, bal[nb - 1]);
            nb--;
        }
        lmqj_token *t = push(L, TK_OP, i);
        if (!t) return false;
        t->op = (uint8_t)op;
        i += len;
    }
    *pi = n;
    return true;
}

/* {%(-|+|)\s*NAME\s*(-%}\s*|%}) for raw; end tag variant for endraw. Returns the
 * end position or 0. */
static size_t match_raw_tag(const char *s, size_t n, size_t i, const char *name, bool endraw,
                            char *sign)
{
    if (!starts(s, n, i, "{%")) return 0;
    size_t j = i + 2;
    *sign = 0;
    if (j < n && (s[j] == '-' || s[j] == '+')) *sign = s[j++];
    j = skip_ws(s, n, j);
    if (!starts(s, n, j, name)) return 0;
    j = skip_ws(s, n, j + strlen(name));
    if (endraw && starts(s, n, j, "+%}")) return j + 3;
    if (starts(s, n, j, "-%}")) return skip_ws(s, n, j + 3);
    if (starts(s, n, j, "%}")) {
        j += 2;
        if (endraw && j < n && s[j] == '\n') j++;
        return j;
    }
    return 0;
}

bool lmqj_lex(lmqj_arena *ar, const char *src, size_t len, lmqj_token **toks, size_t *ntok,
              char *err, size_t errsz)
{
    lexer L = {ar, src, len, NULL, 0, 0, err, errsz, false};
    const char *s = src;
    size_t n = len, pos = 0;
    bool line_starting = true;
    while (pos < n) {
        size_t k = pos;
        while (k + 1 < n && !(s[k] == '{' && (s[k + 1] == '{' || s[k + 1] == '%' || s[k + 1] == '#')))
            k++;
        if (k + 1 >= n) {
            if (!push_text(&L, TK_DATA, pos, s + pos, n - pos)) return false;
            break;
        }
        char kind = s[k + 1];
        char sign = (k + 2 < n && (s[k + 2] == '-' || s[k + 2] == '+')) ? s[k + 2] : 0;
        size_t after = k + 2 + (sign ? 1 : 0);
        char rsign;
        size_t raw_end = kind == '%' ? match_raw_tag(s, n, k, "raw", false, &rsign) : 0;
        if (!emit_data(&L, pos, k, sign, kind != '{', line_starting)) return false;
        if (raw_end) {
            bool ls = s[raw_end - 1] == '\n';
            size_t e = raw_end, end = 0;
            char esign = 0;
            for (; e < n; e++)
                if (s[e] == '{' && (end = match_raw_tag(s, n, e, "endraw", true, &esign))) break;
            if (!end) return lex_fail(&L, k, "Missing end of raw directive");
            if (!emit_data(&L, raw_end, e, esign, true, ls)) return false;
            line_starting = s[end - 1] == '\n';
            pos = end;
            continue;
        }
        if (kind == '#') {
            size_t e = after, end = 0;
            for (; e < n; e++) {
                if (starts(s, n, e, "+#}")) { end = e + 3; break; }
                if (starts(s, n, e, "-#}")) { end = skip_ws(s, n, e + 3); break; }
                if (starts(s, n, e, "#}")) {
                    end = e + 2;
                    if (end < n && s[end] == '\n') end++;
                    break;
                }
            }
            if (!end) return lex_fail(&L, k, "Missing end of comment tag");
            line_starting = s[end - 1] == '\n';
            pos = end;
            continue;
        }
        bool block = kind == '%';
        if (!push(&L, block ? TK_BLOCK_BEGIN : TK_VAR_BEGIN, k)) return false;
        pos = after;
        if (!lex_tag(&L, &pos, block, &line_starting)) return false;
    }
    if (!push(&L, TK_EOF, n)) return false;
    *toks = L.t;
    *ntok = L.nt;
    return true;
}
