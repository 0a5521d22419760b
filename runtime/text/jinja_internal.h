/* jinja_internal.h — private to the chat template engine (runtime/jinja_*.c).
 *
 * The engine is a Jinja2 subset with Hugging Face's settings (trim_blocks,
 * lstrip_blocks, loopcontrols, the immutable sandbox). Parts, in dependency
 * order:
 *   jinja_values.c   arena, values (str/list/dict/...), equality, ordering,
 *                    Python str()/repr(), JSON in (cJSON) and out (json.dumps)
 *   jinja_lexer.c    source -> tokens (whitespace control, trim/lstrip)
 *   jinja_parser.c   tokens -> AST
 *   jinja_eval.c     AST walker: statements, expressions, scopes, macros
 *   jinja_filters.c  filters and tests
 *   jinja_methods.c  str/list/dict methods, globals, printf-style '%'
 *   jinja_api.c      the public API in lmq_rt_chat.h
 *
 * Memory: everything a parse or a render allocates comes from an arena that is
 * freed at once, so errors unwind with longjmp and nothing can leak; the arena
 * counts bytes against a limit. */
#ifndef LMQ_JINJA_INTERNAL_H
#define LMQ_JINJA_INTERNAL_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* ------------------------------------------------------------------ arena */

typedef struct lmqj_chunk lmqj_chunk;
typedef struct lmqj_arena {
    lmqj_chunk *head;
    size_t used;  /* bytes handed out, for the memory limit */
    size_t limit; /* 0 = unlimited */
} lmqj_arena;

/* ------------------------------------------------------------------ values */

typedef enum lmqj_type {
    JV_UNDEF = 0,
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST,
    JV_TUPLE,
    JV_DICT,
    JV_NS,   /* namespace(): a dict whose attributes can be assigned */
    JV_FUNC, /* macro, builtin global, bound method */
    JV_LOOP, /* the `loop` object of a for loop */
    JV_TYPE_COUNT
} lmqj_type;

/* How an undefined value came to be (for Jinja's UndefinedError text). */
enum { JU_NAME = 0, JU_ATTR, JU_ITEM, JU_HINT, JU_UNSAFE };

/* What Jinja's lazy filters and dict methods really return: iterators (no
 * len(), always true, not JSON serializable, used up by one pass) and dict
 * views (sized, not JSON serializable). Values carry the kind so that these
 * behave as in HF, where e.g. `xs|map(...)|tojson` fails. */
enum { JG_LIST = 0, JG_GENERATOR, JG_REVITER, JG_ITEMS, JG_KEYS, JG_VALUES };

typedef struct lmqj_str {
    size_t len;
    char s[]; /* len bytes + NUL */
} lmqj_str;

typedef struct lmqj_value lmqj_value;
typedef struct lmqj_list {
    size_t n, cap;
    bool consumed; /* an iterator (JG_GENERATOR/JG_REVITER) already iterated */
    lmqj_value *v;
} lmqj_list;

typedef struct lmqj_dict {
    size_t n, cap;
    lmqj_value *k, *v;
    uint32_t *index; /* open addressing over k (slot = i + 1), NULL when small */
    size_t index_cap;
} lmqj_dict;

typedef struct lmqj_func lmqj_func;
typedef struct lmqj_loop lmqj_loop;

struct lmqj_value {
    uint8_t t;     /* lmqj_type */
    uint8_t safe;  /* JV_STR: Markup (|safe, |escape) */
    uint8_t ukind; /* JV_UNDEF: JU_* */
    uint8_t uobj;  /* JV_UNDEF: type of the object the lookup failed on */
    uint8_t gen;   /* JV_LIST: a Python iterator or view rather than a list (JG_*) */
    union {
        bool b;
        int64_t i;
        double f;
        lmqj_str *s;
        lmqj_list *l; /* JV_LIST, JV_TUPLE */
        lmqj_dict *d; /* JV_DICT, JV_NS */
        lmqj_func *fn;
        lmqj_loop *loop;
        const char *uname; /* JV_UNDEF: the name, attribute or hint */
    } u;
};

typedef struct lmqj_node lmqj_node;
typedef struct lmqj_frame lmqj_frame;
typedef struct lmqj_ctx lmqj_ctx;

typedef lmqj_value (*lmqj_builtin_fn)(lmqj_ctx *c, const lmqj_node *at, lmqj_value self,
                                      int argc, const lmqj_value *argv, int kwc,
                                      const char *const *kwn, const lmqj_value *kwv);

enum { JF_MACRO = 0, JF_BUILTIN, JF_METHOD, JF_LOOPCALL };

struct lmqj_func {
    uint8_t kind;
    const char *name;
    lmqj_builtin_fn fn;      /* JF_BUILTIN, JF_METHOD */
    lmqj_value self;         /* JF_METHOD: the bound object */
    const lmqj_node *macro;  /* JF_MACRO */
    lmqj_frame *closure;     /* JF_MACRO: frame the macro was defined in */
    lmqj_value caller;       /* JF_MACRO from {% call %}: the caller() */
    lmqj_loop *loop;         /* JF_LOOPCALL */
};

struct lmqj_loop {
    int64_t index0, length, depth0;
    const lmqj_list *items;
    lmqj_value changed_last;
    bool has_changed;
    const lmqj_node *node; /* the for statement (recursive loops) */
    lmqj_frame *frame;     /* frame the for statement runs in */
};

/* ------------------------------------------------------------------ AST */

typedef enum lmqj_kind {
    /* statements */
    N_BODY = 0, N_DATA, N_OUTPUT, N_IF, N_FOR, N_SET, N_SETBLOCK, N_MACRO, N_CALLBLOCK,
    N_FILTERBLOCK, N_WITH, N_BREAK, N_CONTINUE, N_SCOPE,
    /* expressions */
    N_CONST, N_NAME, N_NSREF, N_TUPLE, N_LIST, N_DICT, N_GETATTR, N_GETITEM, N_SLICE,
    N_BINOP, N_NEG, N_POS, N_NOT, N_AND, N_OR, N_COMPARE, N_OPERAND, N_CONCAT, N_COND,
    N_CALL, N_FILTER, N_TEST, N_KW, N_PLACEHOLDER,
    N_KIND_COUNT
} lmqj_kind;

/* Binary and comparison operators (node->op). */
enum {
    OP_ADD = 1, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN
};

struct lmqj_node {
    uint16_t kind, op;
    uint32_t pos;           /* byte offset in the (newline-normalized) source */
    lmqj_node *a, *b, *c, *d;
    lmqj_node **list, **list2, **list3;
    uint32_t n, n2, n3;
    const char *name;
    lmqj_value val;         /* N_CONST, N_DATA */
};

typedef struct lmqj_template {
    lmqj_arena ar;
    char *src;   /* normalized source (arena) */
    size_t len;
    lmqj_node *root;
} lmqj_template;

/* ------------------------------------------------------------------ render */

struct lmqj_frame {
    lmqj_frame *parent;
    uint32_t n, cap;
    const char **names;
    lmqj_value *vals;
};

typedef struct lmqj_limits {
    size_t max_output;      /* bytes of any one output/capture buffer */
    size_t max_memory;      /* arena bytes */
    uint64_t max_steps;     /* evaluated nodes + loop iterations */
    int max_depth;          /* nested macro calls / recursive loops */
} lmqj_limits;

struct lmqj_ctx {
    jmp_buf jb;
    lmqj_arena ar;
    const lmqj_template *tmpl;
    lmqj_frame *globals; /* caller's variables */
    lmqj_frame *top;     /* the template's top-level frame */
    struct lmqj_buf *out; /* where output goes (the result or a capture) */
    lmqj_limits lim;
    uint64_t steps;
    int depth;    /* nested macro calls / recursive loops */
    int nest;     /* nested evaluations (bounds the C stack) */
    int64_t now; /* seconds since the epoch, for strftime_now */
    /* error */
    char err[512];
    uint32_t err_pos;
    bool err_raised; /* raise_exception(): err holds exactly its message */
    bool err_limit;  /* a resource limit was hit */
};

/* A break/continue signal inside statement execution. */
enum { JX_NORMAL = 0, JX_BREAK, JX_CONTINUE };

/* ------------------------------------------------------------------ arena API */

void lmqj_arena_init(lmqj_arena *a, size_t limit);
void lmqj_arena_free(lmqj_arena *a);
/* NULL when out of memory or over the limit. Zeroed, 16-byte aligned. */
void *lmqj_arena_alloc(lmqj_arena *a, size_t n);

/* ------------------------------------------------------------------ errors */

/* Sets the error (at source offset `pos`) and longjmps out of the render. */
_Noreturn void lmqj_fail(lmqj_ctx *c, const lmqj_node *at, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* The same for a hit resource limit (the render returns LMQ_ERR_LIMIT). */
_Noreturn void lmqj_fail_limit(lmqj_ctx *c, const lmqj_node *at, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Raises Jinja's UndefinedError for an undefined value. */
_Noreturn void lmqj_fail_undefined(lmqj_ctx *c, const lmqj_node *at, lmqj_value u);
/* Allocation that fails the render on exhaustion. */
void *lmqj_alloc(lmqj_ctx *c, size_t n);
/* One evaluation step: fails when the step budget is spent. */
void lmqj_step(lmqj_ctx *c, const lmqj_node *at);

/* ------------------------------------------------------------------ values API */

static inline lmqj_value lmqj_undef(void) { lmqj_value v = {0}; return v; }
static inline lmqj_value lmqj_none(void) { lmqj_value v = {0}; v.t = JV_NONE; return v; }
static inline lmqj_value lmqj_bool(bool b) { lmqj_value v = {0}; v.t = JV_BOOL; v.u.b = b; return v; }
static inline lmqj_value lmqj_int(int64_t i) { lmqj_value v = {0}; v.t = JV_INT; v.u.i = i; return v; }
static inline lmqj_value lmqj_float(double f) { lmqj_value v = {0}; v.t = JV_FLOAT; v.u.f = f; return v; }
lmqj_value lmqj_undef_named(uint8_t kind, uint8_t obj_type, const char *name);

lmqj_str *lmqj_str_new(lmqj_arena *a, const char *s, size_t n); /* NULL on OOM */
lmqj_value lmqj_strn(lmqj_ctx *c, const char *s, size_t n);
lmqj_value lmqj_cstr(lmqj_ctx *c, const char *s);
lmqj_value lmqj_strv(lmqj_str *s);
lmqj_value lmqj_list_new(lmqj_ctx *c, size_t cap);
void lmqj_list_push(lmqj_ctx *c, lmqj_value list, lmqj_value item);
lmqj_value lmqj_dict_new(lmqj_ctx *c);
/* Lookup: returns a pointer to the stored value or NULL. Fails on unhashable keys. */
lmqj_value *lmqj_dict_get(lmqj_ctx *c, const lmqj_dict *d, lmqj_value key);
lmqj_value *lmqj_dict_get_str(const lmqj_dict *d, const char *key);
void lmqj_dict_set(lmqj_ctx *c, lmqj_dict *d, lmqj_value key, lmqj_value val);
lmqj_value lmqj_func_new(lmqj_ctx *c, uint8_t kind, const char *name, lmqj_builtin_fn fn,
                         lmqj_value self);

bool lmqj_truthy(lmqj_value v);
bool lmqj_is_str(lmqj_value v);
bool lmqj_is_num(lmqj_value v);        /* bool, int or float */
bool lmqj_is_seq(lmqj_value v);        /* list or tuple */
double lmqj_num_f(lmqj_value v);
/* Python ==; fails (deep nesting) only via c. */
bool lmqj_equal(lmqj_ctx *c, lmqj_value a, lmqj_value b);
/* Python <, as -1/0/1; fails with TypeError when the types do not order. */
int lmqj_compare(lmqj_ctx *c, const lmqj_node *at, lmqj_value a, lmqj_value b);
/* Python-ish type name for messages ("str", "int", "NoneType", "dict"...). */
const char *lmqj_type_name(lmqj_value v);
/* Jinja's object_type_repr: "dict object", "None", "list object" */
const char *lmqj_type_obj_name(uint8_t t);

/* String building in the render arena. */
typedef struct lmqj_buf {
    lmqj_ctx *c;
    char *p;
    size_t len, cap;
} lmqj_buf;
void lmqj_buf_init(lmqj_buf *b, lmqj_ctx *c);
void lmqj_buf_add(lmqj_buf *b, const char *s, size_t n);
void lmqj_buf_adds(lmqj_buf *b, const char *s);
void lmqj_buf_addc(lmqj_buf *b, char ch);
void lmqj_buf_printf(lmqj_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
lmqj_value lmqj_buf_value(lmqj_buf *b);

/* Python str(v) / repr(v) appended to b. Undefined prints as "". */
void lmqj_to_str(lmqj_buf *b, const lmqj_node *at, lmqj_value v);
void lmqj_repr(lmqj_buf *b, const lmqj_node *at, lmqj_value v);
lmqj_value lmqj_stringify(lmqj_ctx *c, const lmqj_node *at, lmqj_value v); /* str(v), keeps Markup */
/* Python repr() of a float ("1.0", "1e+16", "0.1"). */
void lmqj_float_repr(double f, char out[32]);

/* json.dumps(v, ensure_ascii, indent, separators, sort_keys). indent_str NULL
 * = no indent. */
typedef struct lmqj_json_opts {
    bool ensure_ascii, sort_keys;
    const char *indent; /* NULL: compact; otherwise the per-level indent */
    const char *item_sep, *key_sep;
} lmqj_json_opts;
void lmqj_tojson(lmqj_buf *b, const lmqj_node *at, lmqj_value v, const lmqj_json_opts *o);
/* JSON text -> value, with integers kept apart from floats. */
bool lmqj_from_json(lmqj_ctx *c, const char *text, size_t len, lmqj_value *out,
                    char *err, size_t errsz);

/* HTML escape (markupsafe.escape) of str(v). */
lmqj_value lmqj_escape(lmqj_ctx *c, const lmqj_node *at, lmqj_value v);

/* ------------------------------------------------------------------ UTF-8 */

/* Decodes one code point at s[i] (len n); invalid bytes decode as themselves
 * (as latin-1) with length 1. */
uint32_t lmqj_utf8_next(const char *s, size_t n, size_t *i);
size_t lmqj_utf8_put(uint32_t cp, char out[4]);
size_t lmqj_utf8_count(const char *s, size_t n);
bool lmqj_uspace(uint32_t cp); /* Python str.isspace() */

/* ------------------------------------------------------------------ lexer */

typedef enum lmqj_tok_type {
    TK_EOF = 0, TK_DATA, TK_VAR_BEGIN, TK_VAR_END, TK_BLOCK_BEGIN, TK_BLOCK_END,
    TK_NAME, TK_STRING, TK_INT, TK_FLOAT, TK_OP
} lmqj_tok_type;

/* Operator tokens (lmqj_token.op). */
enum {
    TO_ADD = 1, TO_SUB, TO_DIV, TO_FLOORDIV, TO_MUL, TO_MOD, TO_POW, TO_TILDE,
    TO_LBRACKET, TO_RBRACKET, TO_LPAREN, TO_RPAREN, TO_LBRACE, TO_RBRACE,
    TO_EQ, TO_NE, TO_GT, TO_GE, TO_LT, TO_LE, TO_ASSIGN, TO_DOT, TO_COLON,
    TO_PIPE, TO_COMMA, TO_SEMICOLON
};

typedef struct lmqj_token {
    uint8_t type, op;
    uint32_t pos;      /* byte offset of the token in the source */
    const char *s;     /* TK_NAME, TK_STRING, TK_DATA: text (arena, NUL-terminated) */
    size_t len;
    int64_t i;
    double f;
} lmqj_token;

/* Tokenizes the normalized source; false with "line L col C: msg" in err. */
bool lmqj_lex(lmqj_arena *ar, const char *src, size_t len, lmqj_token **toks, size_t *ntok,
              char *err, size_t errsz);

/* ------------------------------------------------------------------ parser */

/* Parses src into t (t->ar must be initialised). On failure returns false and
 * writes "line L col C: message" into err. */
bool lmqj_parse(lmqj_template *t, const char *src, size_t len, int max_depth, char *err,
                size_t errsz);
/* 1-based line and column (in code points) of offset pos in src. */
void lmqj_line_col(const char *src, size_t len, size_t pos, int *line, int *col);

/* ------------------------------------------------------------------ eval */

void lmqj_render_body(lmqj_ctx *c, lmqj_frame *f, const lmqj_node *body);
lmqj_value lmqj_eval(lmqj_ctx *c, lmqj_frame *f, const lmqj_node *e);
lmqj_frame *lmqj_frame_new(lmqj_ctx *c, lmqj_frame *parent);
void lmqj_frame_set(lmqj_ctx *c, lmqj_frame *f, const char *name, lmqj_value v);
lmqj_value lmqj_lookup(lmqj_ctx *c, lmqj_frame *f, const char *name);
/* Calls any callable with evaluated arguments. */
lmqj_value lmqj_call(lmqj_ctx *c, const lmqj_node *at, lmqj_value fn, int argc,
                     const lmqj_value *argv, int kwc, const char *const *kwn,
                     const lmqj_value *kwv);
/* obj.name / obj[key] with Jinja's sandboxed lookup order. */
lmqj_value lmqj_getattr(lmqj_ctx *c, const lmqj_node *at, lmqj_value obj, const char *name);
/* Python getattr() alone (no item fallback), as the attr filter uses. */
bool lmqj_pyattr(lmqj_ctx *c, lmqj_value obj, const char *name, lmqj_value *out);
lmqj_value lmqj_getitem(lmqj_ctx *c, const lmqj_node *at, lmqj_value obj, lmqj_value key);
/* Iteration as a list (dict -> keys, str -> chars); fails on non-iterables. */
const lmqj_list *lmqj_iterate(lmqj_ctx *c, const lmqj_node *at, lmqj_value v);
lmqj_value lmqj_binop(lmqj_ctx *c, const lmqj_node *at, int op, lmqj_value a, lmqj_value b);
bool lmqj_contains(lmqj_ctx *c, const lmqj_node *at, lmqj_value container, lmqj_value item);
/* Rendered output capture. */
void lmqj_emit(lmqj_ctx *c, const char *s, size_t n);

/* ------------------------------------------------------------------ filters, tests, methods */

/* Applies filter `name`; `at` is the filter node (for errors). */
lmqj_value lmqj_filter(lmqj_ctx *c, lmqj_frame *f, const lmqj_node *at, const char *name,
                       lmqj_value in, int argc, const lmqj_value *argv, int kwc,
                       const char *const *kwn, const lmqj_value *kwv);
bool lmqj_test(lmqj_ctx *c, lmqj_frame *f, const lmqj_node *at, const char *name,
               lmqj_value in, int argc, const lmqj_value *argv);
bool lmqj_has_test(const char *name);
bool lmqj_has_filter(const char *name);
/* Method lookup on str/list/dict; returns a JF_METHOD func or undefined. */
lmqj_value lmqj_method(lmqj_ctx *c, lmqj_value obj, const char *name);
/* Global functions (range, namespace, dict, raise_exception, ...); undefined if none. */
lmqj_value lmqj_global(lmqj_ctx *c, const char *name);
/* printf-style `fmt % args` on strings. */
lmqj_value lmqj_percent_format(lmqj_ctx *c, const lmqj_node *at, lmqj_value fmt,
                               lmqj_value args);
/* Argument helper: positional i or keyword `name`, else NULL. */
const lmqj_value *lmqj_arg(int i, const char *name, int argc, const lmqj_value *argv, int kwc,
                           const char *const *kwn, const lmqj_value *kwv);

/* String helpers shared by filters and methods (results keep Markup-ness
 * where Python's Markup methods would). */
enum { JC_LOWER = 0, JC_UPPER, JC_CAPITALIZE, JC_PYTITLE, JC_SWAPCASE };
lmqj_value lmqj_str_case(lmqj_ctx *c, lmqj_value s, int mode);
/* chars NULL or None: Unicode whitespace. */
lmqj_value lmqj_str_strip(lmqj_ctx *c, const lmqj_node *at, lmqj_value s, const lmqj_value *chars,
                          bool left, bool right);
lmqj_value lmqj_str_replace(lmqj_ctx *c, lmqj_value s, lmqj_value old, lmqj_value repl,
                            int64_t count);
/* str.splitlines(keepends) as a list of str. */
lmqj_value lmqj_splitlines(lmqj_ctx *c, lmqj_value s, bool keepends);
/* Stable sort of list items by a key compare (Python sorted()). */
void lmqj_sort(lmqj_ctx *c, const lmqj_node *at, lmqj_value *items, const lmqj_value *keys,
               size_t n, bool reverse);

#endif
