/* jinja_parser.c — tokens -> AST, following Jinja2's grammar (parser.py):
 * condexpr > or > and > not > compare > math1 (+ -) > concat (~) > math2
 * (* / // %) > pow (**, left-associative) > unary (- +) > primary + postfix
 * (. [] ()) + filters (|) and tests (is). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_internal.h"

typedef struct parser {
    lmqj_template *t;
    lmqj_token *tk;
    size_t ntk, i;
    int depth, max_depth, loop_depth;
    jmp_buf jb;
    char *err;
    size_t errsz;
} parser;

static _Noreturn void pfail_at(parser *P, size_t pos, const char *fmt, ...)
{
    int line, col;
    lmqj_line_col(P->t->src, P->t->len, pos, &line, &col);
    int k = snprintf(P->err, P->errsz, "line %d col %d: ", line, col);
    if (k < 0) k = 0;
    if ((size_t)k < P->errsz) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(P->err + k, P->errsz - (size_t)k, fmt, ap);
        va_end(ap);
    }
    longjmp(P->jb, 1);
}

static lmqj_token *cur(parser *P) { return &P->tk[P->i]; }
static lmqj_token *peek(parser *P, size_t k)
{
    return P->i + k < P->ntk ? &P->tk[P->i + k] : &P->tk[P->ntk - 1];
}
static lmqj_token *advance(parser *P)
{
    lmqj_token *t = cur(P);
    if (P->i + 1 < P->ntk) P->i++;
    return t;
}

static const char *describe(const lmqj_token *t)
{
    static const char *ops[] = {"?", "+", "-", "/", "//", "*", "%", "**", "~", "[", "]", "(",
                                ")", "{", "}", "==", "!=", ">", ">=", "<", "<=", "=", ".",
                                ":", "|", ",", ";"};
    switch (t->type) {
    case TK_EOF: return "end of template";
    case TK_DATA: return "template data";
    case TK_VAR_BEGIN: return "begin of print statement";
    case TK_VAR_END: return "end of print statement";
    case TK_BLOCK_BEGIN: return "begin of statement block";
    case TK_BLOCK_END: return "end of statement block";
    case TK_STRING: return "string";
    case TK_INT: return "integer";
    case TK_FLOAT: return "float";
    case TK_OP: return t->op < sizeof ops / sizeof ops[0] ? ops[t->op] : "?";
    default: return t->s; /* a name */
    }
}

static bool is_op(parser *P, int op) { return cur(P)->type == TK_OP && cur(P)->op == op; }
static bool is_name(parser *P, const char *name)
{
    return cur(P)->type == TK_NAME && !strcmp(cur(P)->s, name);
}
static bool skip_op(parser *P, int op)
{
    if (!is_op(P, op)) return false;
    advance(P);
    return true;
}
static bool skip_name(parser *P, const char *name)
{
    if (!is_name(P, name)) return false;
    advance(P);
    return true;
}
static void expect_op(parser *P, int op, const char *what)
{
    if (!skip_op(P, op))
        pfail_at(P, cur(P)->pos, "expected token '%s', got '%s'", what, describe(cur(P)));
}
static void expect_type(parser *P, int type, const char *what)
{
    if (cur(P)->type != type)
        pfail_at(P, cur(P)->pos, "expected token '%s', got '%s'", what, describe(cur(P)));
    advance(P);
}
static const char *expect_ident(parser *P)
{
    if (cur(P)->type != TK_NAME)
        pfail_at(P, cur(P)->pos, "expected token 'name', got '%s'", describe(cur(P)));
    return advance(P)->s;
}

static lmqj_node *node(parser *P, int kind, size_t pos)
{
    lmqj_node *n = lmqj_arena_alloc(&P->t->ar, sizeof(lmqj_node));
    if (!n) pfail_at(P, pos, "template needs more than the parse memory limit (256 MiB)");
    n->kind = (uint16_t)kind;
    n->pos = (uint32_t)pos;
    return n;
}

/* Growable node list. */
typedef struct nlist {
    lmqj_node **v;
    uint32_t n, cap;
} nlist;

static void nl_push(parser *P, nlist *l, lmqj_node *x)
{
    if (l->n == l->cap) {
        uint32_t nc = l->cap ? l->cap * 2 : 4;
        lmqj_node **nv = lmqj_arena_alloc(&P->t->ar, nc * sizeof(lmqj_node *));
        if (!nv) pfail_at(P, x->pos, "template needs more than the parse memory limit (256 MiB)");
        if (l->n) memcpy(nv, l->v, l->n * sizeof(lmqj_node *));
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = x;
}

static void enter(parser *P)
{
    if (++P->depth > P->max_depth)
        pfail_at(P, cur(P)->pos, "template nested too deeply (limit %d)", P->max_depth);
}

static lmqj_node *parse_expression(parser *P, bool with_condexpr);
static lmqj_node *parse_tuple(parser *P, bool simplified, bool with_condexpr,
                              const char *const *extra_end, bool explicit_parens,
                              bool with_namespace);
static lmqj_node *parse_unary(parser *P, bool with_filter);
static lmqj_node *parse_primary(parser *P, bool with_namespace);
static lmqj_node *parse_postfix(parser *P, lmqj_node *n);
static lmqj_node *parse_filter(parser *P, lmqj_node *n, bool start_inline);
static lmqj_node *parse_body(parser *P, const char *const *end_tokens);

/* --------------------------------------------------------------- expressions */

static lmqj_node *parse_condexpr(parser *P)
{
    size_t pos = cur(P)->pos;
    lmqj_node *e1 = parse_expression(P, false);
    while (skip_name(P, "if")) {
        lmqj_node *cond = node(P, N_COND, pos);
        cond->a = parse_expression(P, false);
        cond->b = e1;
        if (skip_name(P, "else")) cond->c = parse_condexpr(P);
        e1 = cond;
    }
    return e1;
}

static lmqj_node *parse_or(parser *P);

static lmqj_node *parse_expression(parser *P, bool with_condexpr)
{
    enter(P);
    lmqj_node *n = with_condexpr ? parse_condexpr(P) : parse_or(P);
    P->depth--;
    return n;
}

static lmqj_node *parse_not(parser *P);
static lmqj_node *parse_and(parser *P)
{
    lmqj_node *l = parse_not(P);
    while (is_name(P, "and")) {
        lmqj_node *n = node(P, N_AND, advance(P)->pos);
        n->a = l;
        n->b = parse_not(P);
        l = n;
    }
    return l;
}

static lmqj_node *parse_or(parser *P)
{
    lmqj_node *l = parse_and(P);
    while (is_name(P, "or")) {
        lmqj_node *n = node(P, N_OR, advance(P)->pos);
        n->a = l;
        n->b = parse_and(P);
        l = n;
    }
    return l;
}

static lmqj_node *parse_compare(parser *P);
static lmqj_node *parse_not(parser *P)
{
    if (is_name(P, "not")) {
        lmqj_node *n = node(P, N_NOT, advance(P)->pos);
        enter(P);
        n->a = parse_not(P);
        P->depth--;
        return n;
    }
    return parse_compare(P);
}

static lmqj_node *parse_math1(parser *P);
static lmqj_node *parse_compare(parser *P)
{
    size_t pos = cur(P)->pos;
    lmqj_node *first = parse_math1(P);
    nlist ops = {0};
    for (;;) {
        lmqj_token *t = cur(P);
        int op = 0;
        if (t->type == TK_OP) {
            switch (t->op) {
            case TO_EQ: op = OP_EQ; break;
            case TO_NE: op = OP_NE; break;
            case TO_LT: op = OP_LT; break;
            case TO_LE: op = OP_LE; break;
            case TO_GT: op = OP_GT; break;
            case TO_GE: op = OP_GE; break;
            default: break;
            }
            if (op) advance(P);
        } else if (is_name(P, "in")) {
            op = OP_IN;
            advance(P);
        } else if (is_name(P, "not") && peek(P, 1)->type == TK_NAME && !strcmp(peek(P, 1)->s, "in")) {
            op = OP_NOTIN;
            advance(P);
            advance(P);
        }
        if (!op) break;
        lmqj_node *o = node(P, N_OPERAND, t->pos);
        o->op = (uint16_t)op;
        o->a = parse_math1(P);
        nl_push(P, &ops, o);
    }
    if (!ops.n) return first;
    lmqj_node *n = node(P, N_COMPARE, pos);
    n->a = first;
    n->list = ops.v;
    n->n = ops.n;
    return n;
}

static lmqj_node *binop(parser *P, int op, size_t pos, lmqj_node *l, lmqj_node *r)
{
    lmqj_node *n = node(P, N_BINOP, pos);
    n->op = (uint16_t)op;
    n->a = l;
    n->b = r;
    return n;
}

static lmqj_node *parse_concat(parser *P);
static lmqj_node *parse_math1(parser *P)
{
    lmqj_node *l = parse_concat(P);
    while (is_op(P, TO_ADD) || is_op(P, TO_SUB)) {
        lmqj_token *t = advance(P);
        l = binop(P, t->op == TO_ADD ? OP_ADD : OP_SUB, t->pos, l, parse_concat(P));
    }
    return l;
}

static lmqj_node *parse_math2(parser *P);
static lmqj_node *parse_concat(parser *P)
{
    size_t pos = cur(P)->pos;
    lmqj_node *first = parse_math2(P);
    if (!is_op(P, TO_TILDE)) return first;
    nlist args = {0};
    nl_push(P, &args, first);
    while (skip_op(P, TO_TILDE)) nl_push(P, &args, parse_math2(P));
    lmqj_node *n = node(P, N_CONCAT, pos);
    n->list = args.v;
    n->n = args.n;
    return n;
}

static lmqj_node *parse_pow(parser *P);
static lmqj_node *parse_math2(parser *P)
{
    lmqj_node *l = parse_pow(P);
    for (;;) {
        int op = is_op(P, TO_MUL) ? OP_MUL : is_op(P, TO_DIV) ? OP_DIV
               : is_op(P, TO_FLOORDIV) ? OP_FLOORDIV : is_op(P, TO_MOD) ? OP_MOD : 0;
        if (!op) return l;
        size_t pos = advance(P)->pos;
        l = binop(P, op, pos, l, parse_pow(P));
    }
}

static lmqj_node *parse_pow(parser *P)
{
    lmqj_node *l = parse_unary(P, true);
    while (is_op(P, TO_POW)) {
        size_t pos = advance(P)->pos;
        l = binop(P, OP_POW, pos, l, parse_unary(P, true));
    }
    return l;
}

static lmqj_node *parse_filter_expr(parser *P, lmqj_node *n);

static lmqj_node *parse_unary(parser *P, bool with_filter)
{
    lmqj_node *n;
    enter(P);
    if (is_op(P, TO_SUB) || is_op(P, TO_ADD)) {
        lmqj_token *t = advance(P);
        n = node(P, t->op == TO_SUB ? N_NEG : N_POS, t->pos);
        n->a = parse_unary(P, false);
    } else {
        n = parse_primary(P, false);
    }
    n = parse_postfix(P, n);
    if (with_filter) n = parse_filter_expr(P, n);
    P->depth--;
    return n;
}

static lmqj_node *parse_list_lit(parser *P)
{
    lmqj_node *n = node(P, N_LIST, advance(P)->pos);
    nlist items = {0};
    while (!is_op(P, TO_RBRACKET)) {
        if (items.n) expect_op(P, TO_COMMA, ",");
        if (is_op(P, TO_RBRACKET)) break;
        nl_push(P, &items, parse_expression(P, true));
    }
    expect_op(P, TO_RBRACKET, "]");
    n->list = items.v;
    n->n = items.n;
    return n;
}

static lmqj_node *parse_dict_lit(parser *P)
{
    lmqj_node *n = node(P, N_DICT, advance(P)->pos);
    nlist keys = {0}, vals = {0};
    while (!is_op(P, TO_RBRACE)) {
        if (keys.n) expect_op(P, TO_COMMA, ",");
        if (is_op(P, TO_RBRACE)) break;
        nl_push(P, &keys, parse_expression(P, true));
        expect_op(P, TO_COLON, ":");
        nl_push(P, &vals, parse_expression(P, true));
    }
    expect_op(P, TO_RBRACE, "}");
    n->list = keys.v;
    n->n = keys.n;
    n->list2 = vals.v;
    n->n2 = vals.n;
    return n;
}

static lmqj_node *const_node(parser *P, size_t pos, lmqj_value v)
{
    lmqj_node *n = node(P, N_CONST, pos);
    n->val = v;
    return n;
}

static lmqj_value const_str(parser *P, size_t pos, const char *s, size_t len)
{
    lmqj_str *p = lmqj_str_new(&P->t->ar, s, len);
    if (!p) pfail_at(P, pos, "template needs more than the parse memory limit (256 MiB)");
    return lmqj_strv(p);
}

static lmqj_node *parse_primary(parser *P, bool with_namespace)
{
    lmqj_token *t = cur(P);
    if (t->type == TK_NAME) {
        advance(P);
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True")) return const_node(P, t->pos, lmqj_bool(true));
        if (!strcmp(t->s, "false") || !strcmp(t->s, "False")) return const_node(P, t->pos, lmqj_bool(false));
        if (!strcmp(t->s, "none") || !strcmp(t->s, "None")) return const_node(P, t->pos, lmqj_none());
        if (with_namespace && is_op(P, TO_DOT)) {
            advance(P);
            lmqj_node *n = node(P, N_NSREF, t->pos);
            n->name = t->s;
            const char *attr = expect_ident(P);
            n->val = const_str(P, t->pos, attr, strlen(attr));
            return n;
        }
        lmqj_node *n = node(P, N_NAME, t->pos);
        n->name = t->s;
        return n;
    }
    if (t->type == TK_STRING) {
        advance(P);
        if (cur(P)->type != TK_STRING) return const_node(P, t->pos, const_str(P, t->pos, t->s, t->len));
        size_t total = t->len;
        for (size_t k = P->i; P->tk[k].type == TK_STRING; k++) total += P->tk[k].len;
        char *buf = lmqj_arena_alloc(&P->t->ar, total + 1);
        if (!buf) pfail_at(P, t->pos, "template needs more than the parse memory limit (256 MiB)");
        size_t o = t->len;
        memcpy(buf, t->s, t->len);
        while (cur(P)->type == TK_STRING) {
            lmqj_token *s2 = advance(P);
            memcpy(buf + o, s2->s, s2->len);
            o += s2->len;
        }
        return const_node(P, t->pos, const_str(P, t->pos, buf, o));
    }
    if (t->type == TK_INT) { advance(P); return const_node(P, t->pos, lmqj_int(t->i)); }
    if (t->type == TK_FLOAT) { advance(P); return const_node(P, t->pos, lmqj_float(t->f)); }
    if (is_op(P, TO_LPAREN)) {
        advance(P);
        lmqj_node *n = parse_tuple(P, false, true, NULL, true, false);
        expect_op(P, TO_RPAREN, ")");
        return n;
    }
    if (is_op(P, TO_LBRACKET)) return parse_list_lit(P);
    if (is_op(P, TO_LBRACE)) return parse_dict_lit(P);
    pfail_at(P, t->pos, "unexpected '%s'", describe(t));
}

static bool tuple_end(parser *P, const char *const *extra_end)
{
    lmqj_token *t = cur(P);
    if (t->type == TK_VAR_END || t->type == TK_BLOCK_END || is_op(P, TO_RPAREN)) return true;
    if (extra_end && t->type == TK_NAME)
        for (int k = 0; extra_end[k]; k++)
            if (!strcmp(t->s, extra_end[k])) return true;
    return false;
}

static lmqj_node *parse_tuple(parser *P, bool simplified, bool with_condexpr,
                              const char *const *extra_end, bool explicit_parens,
                              bool with_namespace)
{
    size_t pos = cur(P)->pos;
    nlist args = {0};
    bool is_tuple = false;
    for (;;) {
        if (args.n) expect_op(P, TO_COMMA, ",");
        if (tuple_end(P, extra_end)) break;
        nl_push(P, &args, simplified ? parse_primary(P, with_namespace)
                                     : parse_expression(P, with_condexpr));
        if (is_op(P, TO_COMMA)) is_tuple = true;
        else break;
    }
    if (!is_tuple) {
        if (args.n) return args.v[0];
        if (!explicit_parens)
            pfail_at(P, cur(P)->pos, "Expected an expression, got '%s'", describe(cur(P)));
    }
    lmqj_node *n = node(P, N_TUPLE, pos);
    n->list = args.v;
    n->n = args.n;
    return n;
}

static lmqj_node *parse_subscribed(parser *P)
{
    size_t pos = cur(P)->pos;
    lmqj_node *start = NULL, *stop = NULL, *step = NULL;
    if (is_op(P, TO_COLON)) {
        advance(P);
    } else {
        start = parse_expression(P, true);
        if (!is_op(P, TO_COLON)) return start;
        advance(P);
    }
    if (!is_op(P, TO_COLON) && !is_op(P, TO_RBRACKET) && !is_op(P, TO_COMMA))
        stop = parse_expression(P, true);
    if (is_op(P, TO_COLON)) {
        advance(P);
        if (!is_op(P, TO_RBRACKET) && !is_op(P, TO_COMMA)) step = parse_expression(P, true);
    }
    lmqj_node *n = node(P, N_SLICE, pos);
    n->a = start;
    n->b = stop;
    n->c = step;
    return n;
}

static lmqj_node *parse_subscript(parser *P, lmqj_node *obj)
{
    lmqj_token *t = advance(P);
    if (t->op == TO_DOT) {
        lmqj_token *a = advance(P);
        if (a->type == TK_NAME) {
            lmqj_node *n = node(P, N_GETATTR, t->pos);
            n->a = obj;
            n->name = a->s;
            return n;
        }
        if (a->type != TK_INT) pfail_at(P, a->pos, "expected name or number");
        lmqj_node *n = node(P, N_GETITEM, t->pos);
        n->a = obj;
        n->b = const_node(P, a->pos, lmqj_int(a->i));
        return n;
    }
    nlist args = {0};
    while (!is_op(P, TO_RBRACKET)) {
        if (args.n) expect_op(P, TO_COMMA, ",");
        nl_push(P, &args, parse_subscribed(P));
    }
    expect_op(P, TO_RBRACKET, "]");
    if (args.n == 0) pfail_at(P, t->pos, "expected subscript expression");
    lmqj_node *n = node(P, N_GETITEM, t->pos);
    n->a = obj;
    if (args.n == 1) {
        n->b = args.v[0];
    } else {
        n->b = node(P, N_TUPLE, t->pos);
        n->b->list = args.v;
        n->b->n = args.n;
    }
    return n;
}

/* Fills n->list (args), n->list2 (N_KW), n->c (*args), n->d (**kwargs). */
static void parse_call_args(parser *P, lmqj_node *n)
{
    size_t pos = cur(P)->pos;
    expect_op(P, TO_LPAREN, "(");
    nlist args = {0}, kws = {0};
    bool need_comma = false;
    while (!is_op(P, TO_RPAREN)) {
        if (need_comma) {
            expect_op(P, TO_COMMA, ",");
            if (is_op(P, TO_RPAREN)) break;
        }
        if (is_op(P, TO_MUL)) {
            if (n->c || n->d) pfail_at(P, pos, "invalid syntax for function call expression");
            advance(P);
            n->c = parse_expression(P, true);
        } else if (is_op(P, TO_POW)) {
            if (n->d) pfail_at(P, pos, "invalid syntax for function call expression");
            advance(P);
            n->d = parse_expression(P, true);
        } else if (cur(P)->type == TK_NAME && peek(P, 1)->type == TK_OP && peek(P, 1)->op == TO_ASSIGN) {
            if (n->d) pfail_at(P, pos, "invalid syntax for function call expression");
            lmqj_node *kw = node(P, N_KW, cur(P)->pos);
            kw->name = advance(P)->s;
            advance(P);
            kw->a = parse_expression(P, true);
            nl_push(P, &kws, kw);
        } else {
            if (n->c || n->d || kws.n) pfail_at(P, pos, "invalid syntax for function call expression");
            nl_push(P, &args, parse_expression(P, true));
        }
        need_comma = true;
    }
    expect_op(P, TO_RPAREN, ")");
    n->list = args.v;
    n->n = args.n;
    n->list2 = kws.v;
    n->n2 = kws.n;
}

static lmqj_node *parse_call(parser *P, lmqj_node *callee)
{
    lmqj_node *n = node(P, N_CALL, cur(P)->pos);
    n->a = callee;
    parse_call_args(P, n);
    return n;
}

static lmqj_node *parse_postfix(parser *P, lmqj_node *n)
{
    for (;;) {
        if (is_op(P, TO_DOT) || is_op(P, TO_LBRACKET)) n = parse_subscript(P, n);
        else if (is_op(P, TO_LPAREN)) n = parse_call(P, n);
        else return n;
    }
}

static const char *dotted_name(parser *P)
{
    const char *name = expect_ident(P);
    while (is_op(P, TO_DOT)) {
        advance(P);
        const char *more = expect_ident(P);
        size_t a = strlen(name), b = strlen(more);
        char *s = lmqj_arena_alloc(&P->t->ar, a + b + 2);
        if (!s) pfail_at(P, cur(P)->pos, "template needs more than the parse memory limit (256 MiB)");
        memcpy(s, name, a);
        s[a] = '.';
        memcpy(s + a + 1, more, b + 1);
        name = s;
    }
    return name;
}

static lmqj_node *parse_filter(parser *P, lmqj_node *n, bool start_inline)
{
    while (is_op(P, TO_PIPE) || start_inline) {
        if (!start_inline) advance(P);
        size_t pos = cur(P)->pos;
        lmqj_node *f = node(P, N_FILTER, pos);
        f->name = dotted_name(P);
        f->a = n;
        if (is_op(P, TO_LPAREN)) parse_call_args(P, f);
        n = f;
        start_inline = false;
    }
    return n;
}

static lmqj_node *parse_test(parser *P, lmqj_node *n)
{
    size_t pos = advance(P)->pos; /* 'is' */
    bool negated = skip_name(P, "not");
    lmqj_node *t = node(P, N_TEST, pos);
    t->a = n;
    t->name = dotted_name(P);
    lmqj_token *c = cur(P);
    if (is_op(P, TO_LPAREN)) {
        parse_call_args(P, t);
    } else if ((c->type == TK_NAME || c->type == TK_STRING || c->type == TK_INT ||
                c->type == TK_FLOAT || is_op(P, TO_LPAREN) || is_op(P, TO_LBRACKET) ||
                is_op(P, TO_LBRACE)) &&
               !is_name(P, "else") && !is_name(P, "or") && !is_name(P, "and")) {
        if (is_name(P, "is")) pfail_at(P, c->pos, "You cannot chain multiple tests with is");
        lmqj_node *arg = parse_postfix(P, parse_primary(P, false));
        t->list = lmqj_arena_alloc(&P->t->ar, sizeof(lmqj_node *));
        if (!t->list) pfail_at(P, pos, "template needs more than the parse memory limit (256 MiB)");
        t->list[0] = arg;
        t->n = 1;
    }
    if (!negated) return t;
    lmqj_node *nn = node(P, N_NOT, pos);
    nn->a = t;
    return nn;
}

static lmqj_node *parse_filter_expr(parser *P, lmqj_node *n)
{
    for (;;) {
        if (is_op(P, TO_PIPE)) n = parse_filter(P, n, false);
        else if (is_name(P, "is")) n = parse_test(P, n);
        else if (is_op(P, TO_LPAREN)) n = parse_call(P, n);
        else return n;
    }
}

/* --------------------------------------------------------------- statements */

static void check_target(parser *P, lmqj_node *t, bool allow_ns)
{
    if (t->kind == N_NAME) {
        if (!strcmp(t->name, "true") || !strcmp(t->name, "false") || !strcmp(t->name, "none"))
            pfail_at(P, t->pos, "can't assign to '%s'", t->name);
        return;
    }
    if (t->kind == N_NSREF && allow_ns) return;
    if (t->kind == N_TUPLE) {
        for (uint32_t k = 0; k < t->n; k++) check_target(P, t->list[k], allow_ns);
        return;
    }
    pfail_at(P, t->pos, "can't assign to this expression");
}

static lmqj_node *parse_assign_target(parser *P, const char *const *extra_end, bool with_ns)
{
    lmqj_node *t = parse_tuple(P, true, true, extra_end, false, with_ns);
    check_target(P, t, with_ns);
    return t;
}

static void end_of_tag(parser *P)
{
    if (cur(P)->type != TK_BLOCK_END)
        pfail_at(P, cur(P)->pos, "expected token 'end of statement block', got '%s'",
                 describe(cur(P)));
    advance(P);
}

/* Body up to one of end_tokens; leaves the parser on the end tag's name. */
static lmqj_node *parse_statements(parser *P, const char *const *end_tokens, bool drop_needle)
{
    skip_op(P, TO_COLON);
    end_of_tag(P);
    lmqj_node *body = parse_body(P, end_tokens);
    if (cur(P)->type == TK_EOF) {
        char want[128] = "";
        for (int k = 0; end_tokens[k]; k++) {
            if (k) strncat(want, " or ", sizeof want - strlen(want) - 1);
            strncat(want, "'", sizeof want - strlen(want) - 1);
            strncat(want, end_tokens[k], sizeof want - strlen(want) - 1);
            strncat(want, "'", sizeof want - strlen(want) - 1);
        }
        pfail_at(P, cur(P)->pos, "Unexpected end of template. Jinja was looking for: %s", want);
    }
    if (drop_needle) advance(P);
    return body;
}

static void parse_signature(parser *P, lmqj_node *n)
{
    nlist args = {0}, defs = {0};
    expect_op(P, TO_LPAREN, "(");
    while (!is_op(P, TO_RPAREN)) {
        if (args.n) expect_op(P, TO_COMMA, ",");
        lmqj_node *a = node(P, N_NAME, cur(P)->pos);
        a->name = expect_ident(P);
        if (skip_op(P, TO_ASSIGN)) nl_push(P, &defs, parse_expression(P, true));
        else if (defs.n) pfail_at(P, a->pos, "non-default argument follows default argument");
        nl_push(P, &args, a);
    }
    expect_op(P, TO_RPAREN, ")");
    n->list = args.v;
    n->n = args.n;
    n->list2 = defs.v;
    n->n2 = defs.n;
}

/* Sets bits on a macro node: 1 varargs, 2 kwargs, 4 caller are referenced. */
static unsigned scan_special(const lmqj_node *n, int depth)
{
    if (!n || depth > 512) return 0;
    unsigned r = 0;
    if (n->kind == N_NAME) {
        if (!strcmp(n->name, "varargs")) r |= 1;
        else if (!strcmp(n->name, "kwargs")) r |= 2;
        else if (!strcmp(n->name, "caller")) r |= 4;
    }
    r |= scan_special(n->a, depth + 1) | scan_special(n->b, depth + 1) |
         scan_special(n->c, depth + 1) | scan_special(n->d, depth + 1);
    for (uint32_t i = 0; i < n->n; i++) r |= scan_special(n->list[i], depth + 1);
    for (uint32_t i = 0; i < n->n2; i++) r |= scan_special(n->list2[i], depth + 1);
    for (uint32_t i = 0; i < n->n3; i++) r |= scan_special(n->list3[i], depth + 1);
    return r;
}

static lmqj_node *parse_statement(parser *P)
{
    static const char *const end_for[] = {"endfor", "else", NULL};
    static const char *const end_for2[] = {"endfor", NULL};
    static const char *const end_if[] = {"elif", "else", "endif", NULL};
    static const char *const end_if2[] = {"endif", NULL};
    static const char *const in_kw[] = {"in", NULL};
    static const char *const rec_kw[] = {"recursive", NULL};
    lmqj_token *t = cur(P);
    if (t->type != TK_NAME) pfail_at(P, t->pos, "tag name expected");
    const char *kw = t->s;
    size_t pos = t->pos;
    enter(P);
    lmqj_node *n = NULL;
    if (!strcmp(kw, "for")) {
        advance(P);
        n = node(P, N_FOR, pos);
        n->a = parse_assign_target(P, in_kw, false);
        if (!skip_name(P, "in"))
            pfail_at(P, cur(P)->pos, "expected token 'in', got '%s'", describe(cur(P)));
        n->b = parse_tuple(P, false, false, rec_kw, false, false);
        if (skip_name(P, "if")) n->c = parse_expression(P, true);
        n->op = skip_name(P, "recursive");
        P->loop_depth++;
        lmqj_node *body = parse_statements(P, end_for, false);
        P->loop_depth--;
        n->list = body->list;
        n->n = body->n;
        if (!strcmp(advance(P)->s, "else")) {
            lmqj_node *els = parse_statements(P, end_for2, true);
            n->list2 = els->list;
            n->n2 = els->n;
        }
    } else if (!strcmp(kw, "if")) {
        advance(P);
        n = node(P, N_IF, pos);
        lmqj_node *curif = n;
        for (;;) {
            curif->a = parse_tuple(P, false, false, NULL, false, false);
            lmqj_node *body = parse_statements(P, end_if, false);
            curif->list = body->list;
            curif->n = body->n;
            lmqj_token *e = advance(P);
            if (!strcmp(e->s, "elif")) {
                lmqj_node *nx = node(P, N_IF, e->pos);
                curif->list2 = lmqj_arena_alloc(&P->t->ar, sizeof(lmqj_node *));
                if (!curif->list2) pfail_at(P, e->pos, "template needs more than the parse memory limit (256 MiB)");
                curif->list2[0] = nx;
                curif->n2 = 1;
                curif = nx;
                continue;
            }
            if (!strcmp(e->s, "else")) {
                lmqj_node *els = parse_statements(P, end_if2, true);
                curif->list2 = els->list;
                curif->n2 = els->n;
            }
            break;
        }
    } else if (!strcmp(kw, "set")) {
        static const char *const end_set[] = {"endset", NULL};
        advance(P);
        lmqj_node *target = parse_assign_target(P, NULL, true);
        if (skip_op(P, TO_ASSIGN)) {
            n = node(P, N_SET, pos);
            n->a = target;
            n->b = parse_tuple(P, false, true, NULL, false, false);
        } else {
            n = node(P, N_SETBLOCK, pos);
            n->a = target;
            if (is_op(P, TO_PIPE)) n->b = parse_filter(P, node(P, N_PLACEHOLDER, pos), false);
            lmqj_node *body = parse_statements(P, end_set, true);
            n->list = body->list;
            n->n = body->n;
        }
    } else if (!strcmp(kw, "macro") || !strcmp(kw, "call")) {
        static const char *const end_macro[] = {"endmacro", NULL};
        static const char *const end_call[] = {"endcall", NULL};
        bool is_macro = kw[0] == 'm';
        advance(P);
        n = node(P, is_macro ? N_MACRO : N_CALLBLOCK, pos);
        if (is_macro) {
            n->name = expect_ident(P);
            parse_signature(P, n);
        } else {
            if (is_op(P, TO_LPAREN)) parse_signature(P, n);
            n->a = parse_expression(P, true);
            if (n->a->kind != N_CALL) pfail_at(P, pos, "expected call");
        }
        int saved = P->loop_depth;
        P->loop_depth = 0;
        lmqj_node *body = parse_statements(P, is_macro ? end_macro : end_call, true);
        P->loop_depth = saved;
        n->list3 = body->list;
        n->n3 = body->n;
        n->op = (uint16_t)scan_special(n, 0); /* varargs/kwargs/caller used? */
    } else if (!strcmp(kw, "filter")) {
        static const char *const end_filter[] = {"endfilter", NULL};
        advance(P);
        n = node(P, N_FILTERBLOCK, pos);
        n->b = parse_filter(P, node(P, N_PLACEHOLDER, pos), true);
        lmqj_node *body = parse_statements(P, end_filter, true);
        n->list = body->list;
        n->n = body->n;
    } else if (!strcmp(kw, "with")) {
        static const char *const end_with[] = {"endwith", NULL};
        advance(P);
        n = node(P, N_WITH, pos);
        nlist targets = {0}, values = {0};
        while (cur(P)->type != TK_BLOCK_END) {
            if (targets.n) expect_op(P, TO_COMMA, ",");
            nl_push(P, &targets, parse_assign_target(P, NULL, false));
            expect_op(P, TO_ASSIGN, "=");
            nl_push(P, &values, parse_expression(P, true));
        }
        n->list = targets.v;
        n->n = targets.n;
        n->list2 = values.v;
        n->n2 = values.n;
        lmqj_node *body = parse_statements(P, end_with, true);
        n->list3 = body->list;
        n->n3 = body->n;
    } else if (!strcmp(kw, "print")) {
        advance(P);
        n = node(P, N_OUTPUT, pos);
        n->a = parse_tuple(P, false, true, NULL, false, false);
    } else if (!strcmp(kw, "break") || !strcmp(kw, "continue")) {
        advance(P);
        if (P->loop_depth == 0) pfail_at(P, pos, "'%s' outside of a loop", kw);
        n = node(P, kw[0] == 'b' ? N_BREAK : N_CONTINUE, pos);
    } else if (!strcmp(kw, "block") || !strcmp(kw, "generation")) {
        /* a lone {% block %} renders in place; HF's {% generation %} marks
         * assistant text and renders its body unchanged */
        static const char *const end_block[] = {"endblock", NULL};
        static const char *const end_gen[] = {"endgeneration", NULL};
        bool gen = kw[0] == 'g';
        advance(P);
        n = node(P, N_SCOPE, pos);
        if (!gen) {
            expect_ident(P);
            skip_name(P, "scoped");
            skip_name(P, "required");
        }
        lmqj_node *body = parse_statements(P, gen ? end_gen : end_block, true);
        if (!gen && cur(P)->type == TK_NAME) advance(P); /* {% endblock name %} */
        n->list = body->list;
        n->n = body->n;
    } else if (!strcmp(kw, "extends") || !strcmp(kw, "include") || !strcmp(kw, "import") ||
               !strcmp(kw, "from")) {
        pfail_at(P, pos, "'%s' is not supported: chat templates cannot load other templates", kw);
    } else {
        pfail_at(P, pos, "Encountered unknown tag '%s'.", kw);
    }
    P->depth--;
    return n;
}

static lmqj_node *parse_body(parser *P, const char *const *end_tokens)
{
    lmqj_node *body = node(P, N_BODY, cur(P)->pos);
    nlist items = {0};
    for (;;) {
        lmqj_token *t = cur(P);
        if (t->type == TK_EOF) break;
        if (t->type == TK_DATA) {
            lmqj_node *d = node(P, N_DATA, t->pos);
            d->val = const_str(P, t->pos, t->s, t->len);
            nl_push(P, &items, d);
            advance(P);
        } else if (t->type == TK_VAR_BEGIN) {
            advance(P);
            lmqj_node *o = node(P, N_OUTPUT, t->pos);
            o->a = parse_tuple(P, false, true, NULL, false, false);
            expect_type(P, TK_VAR_END, "end of print statement");
            nl_push(P, &items, o);
        } else if (t->type == TK_BLOCK_BEGIN) {
            advance(P);
            if (end_tokens && cur(P)->type == TK_NAME)
                for (int k = 0; end_tokens[k]; k++)
                    if (!strcmp(cur(P)->s, end_tokens[k])) goto done;
            lmqj_node *st = parse_statement(P);
            nl_push(P, &items, st);
            end_of_tag(P);
        } else {
            pfail_at(P, t->pos, "unexpected '%s'", describe(t));
        }
    }
done:
    body->list = items.v;
    body->n = items.n;
    return body;
}

bool lmqj_parse(lmqj_template *t, const char *src, size_t len, int max_depth, char *err,
                size_t errsz)
{
    /* Jinja normalizes \r\n and \r to \n and drops one trailing newline
     * (keep_trailing_newline=False). */
    char *s = lmqj_arena_alloc(&t->ar, len + 1);
    if (!s) { snprintf(err, errsz, "template needs more than the parse memory limit (256 MiB)"); return false; }
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[o++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            s[o++] = src[i];
        }
    }
    if (o && s[o - 1] == '\n') o--;
    s[o] = 0;
    t->src = s;
    t->len = o;
    parser P = {0};
    P.t = t;
    P.max_depth = max_depth;
    P.err = err;
    P.errsz = errsz;
    if (!lmqj_lex(&t->ar, s, o, &P.tk, &P.ntk, err, errsz)) return false;
    if (setjmp(P.jb)) return false;
    t->root = parse_body(&P, NULL);
    if (cur(&P)->type != TK_EOF) pfail_at(&P, cur(&P)->pos, "unexpected '%s'", describe(cur(&P)));
    return true;
}
