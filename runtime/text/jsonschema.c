/* jsonschema.c — a JSON-schema subset compiled to a byte-level pushdown
 * matcher, and the vocabulary mask computed from it (lmq_rt_json.h).
 *
 * The schema becomes a table of nodes (object, array, string, number,
 * literal set, union, any); the matcher is a stack of frames, one per open
 * value, each a node index, a phase and three counters. A frame never holds
 * a pointer, so a matcher copies with memcpy of its used depth: the mask walk
 * copies one per vocabulary-trie level. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "lmq_rt_json.h"

/* ---------------------------------------------------------------- schema */

enum { K_ANY, K_OBJ, K_ARR, K_STR, K_NUM, K_LIT, K_UNION };
/* Built-in nodes every schema has: what an "any" value dispatches to. */
enum { N_ANY, N_GOBJ, N_GARR, N_GSTR, N_GNUM, N_GLIT, N_BUILTIN };

#define MAX_SET 64 /* properties of an object, values of an enum, alternatives */
#define NUM_DIGITS 18
#define NUM_BIG 999999999999999999LL /* 18 nines */

typedef struct node {
    uint8_t kind;
    uint8_t integer; /* K_NUM: no fraction or exponent */
    uint8_t bounded; /* K_NUM: a bound was given (then no exponent) */
    int32_t first, count; /* K_OBJ props, K_LIT lits, K_UNION alts: range in the side table */
    int32_t item;         /* K_ARR */
    int32_t min, max;     /* K_ARR items, K_STR code points */
    int64_t lo, hi;       /* K_NUM: integers the value (a number: its integer part) may be */
    double fmin, fmax;    /* K_NUM: the schema's bounds, inclusive or not (for fractions) */
} node;

typedef struct prop {
    char *key; /* JSON-encoded, quotes included */
    size_t len;
    int32_t node;
    bool required;
} prop;

typedef struct lit {
    char *s; /* compact JSON text */
    size_t len;
} lit;

struct lmq_json_schema {
    node *nodes;
    int32_t n_nodes, cap_nodes;
    prop *props;
    int32_t n_props, cap_props;
    lit *lits;
    int32_t n_lits, cap_lits;
    int32_t *alts;
    int32_t n_alts, cap_alts;
    int32_t root;
    char *prefix, *suffix;
    size_t prefix_len, suffix_len;
};

static bool grow(void **p, int32_t *cap, int32_t need, size_t elem)
{
    if (need <= *cap) return true;
    int32_t c = *cap ? *cap * 2 : 16;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

static int32_t new_node(lmq_json_schema *s, const char *where)
{
    if (s->n_nodes >= LMQ_JSON_MAX_NODES) {
        lmq_error(LMQ_ERR_LIMIT, "json schema: more than %d nodes at %s", LMQ_JSON_MAX_NODES, where);
        return -1;
    }
    if (!grow((void **)&s->nodes, &s->cap_nodes, s->n_nodes + 1, sizeof(node))) {
        lmq_error(LMQ_ERR_NOMEM, "json schema");
        return -1;
    }
    node *n = &s->nodes[s->n_nodes];
    memset(n, 0, sizeof *n);
    n->lo = -NUM_BIG;
    n->hi = NUM_BIG;
    n->fmin = -(double)NUM_BIG;
    n->fmax = (double)NUM_BIG;
    n->max = LMQ_JSON_MAX_STRING;
    return s->n_nodes++;
}

static int32_t add_lit(lmq_json_schema *s, const char *text)
{
    if (!grow((void **)&s->lits, &s->cap_lits, s->n_lits + 1, sizeof(lit))) return -1;
    char *c = strdup(text);
    if (!c) return -1;
    s->lits[s->n_lits] = (lit){c, strlen(c)};
    return s->n_lits++;
}

void lmq_json_schema_free(lmq_json_schema *s)
{
    if (!s) return;
    for (int32_t i = 0; i < s->n_props; i++) free(s->props[i].key);
    for (int32_t i = 0; i < s->n_lits; i++) free(s->lits[i].s);
    free(s->nodes);
    free(s->props);
    free(s->lits);
    free(s->alts);
    free(s->prefix);
    free(s->suffix);
    free(s);
}

/* The bytes a value of node n can start with. */
static void first_bytes(const lmq_json_schema *s, int32_t n, uint8_t set[32])
{
    const node *nd = &s->nodes[n];
#define ADD(c) (set[(uint8_t)(c) >> 3] |= (uint8_t)(1u << ((uint8_t)(c)&7)))
    switch (nd->kind) {
    case K_ANY:
        for (int i = N_GOBJ; i < N_BUILTIN; i++) first_bytes(s, i, set);
        break;
    case K_OBJ: ADD('{'); break;
    case K_ARR: ADD('['); break;
    case K_STR: ADD('"'); break;
    case K_NUM:
        if (nd->lo < 0) ADD('-');
        for (int c = '0'; c <= '9'; c++) ADD(c);
        break;
    case K_LIT:
        for (int32_t i = 0; i < nd->count; i++) ADD(s->lits[nd->first + i].s[0]);
        break;
    case K_UNION:
        for (int32_t i = 0; i < nd->count; i++) first_bytes(s, s->alts[nd->first + i], set);
        break;
    }
#undef ADD
}

static int32_t compile(lmq_json_schema *s, const cJSON *j, int depth, const char *ptr);

static const char *const known_keys[] = {
    "type", "properties", "required", "items", "minItems", "maxItems", "enum", "const",
    "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "anyOf", "oneOf", "title", "description", "default", "examples", "$schema", "$id",
    "format", "additionalProperties", "strict", "$comment", NULL};

static bool num_of(const cJSON *j, const char *key, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v) return false;
    *out = v->valuedouble;
    return true;
}

/* How many readings a value of node n can need at once: the alternatives of
 * a union that can start with the same byte are read in parallel, each with
 * the readings its own unions need. Capped at INT32_MAX. */
static int64_t width(const lmq_json_schema *s, int32_t n)
{
    const node *nd = &s->nodes[n];
    int64_t w = 1;
    switch (nd->kind) {
    case K_OBJ:
        for (int32_t i = 0; i < nd->count; i++) {
            int64_t c = width(s, s->props[nd->first + i].node);
            w = c > w ? c : w;
        }
        return w;
    case K_ARR: return nd->item == n ? 1 : width(s, nd->item);
    case K_UNION: {
        int64_t sum[256] = {0};
        for (int32_t i = 0; i < nd->count; i++) {
            int32_t a = s->alts[nd->first + i];
            uint8_t f[32] = {0};
            first_bytes(s, a, f);
            int64_t c = width(s, a);
            for (int b = 0; b < 256; b++)
                if (f[b >> 3] >> (b & 7) & 1) {
                    sum[b] += c;
                    if (sum[b] > INT32_MAX) sum[b] = INT32_MAX;
                }
        }
        for (int b = 0; b < 256; b++) w = sum[b] > w ? sum[b] : w;
        return w;
    }
    default: return 1;
    }
}

/* exclusive: oneOf, whose alternatives must start with different bytes (a
 * value that two alternatives accept would be invalid, which parallel
 * readings cannot tell). */
static int32_t make_union(lmq_json_schema *s, const int32_t *alt, int n, bool exclusive, const char *ptr)
{
    uint8_t seen[32] = {0};
    for (int i = 0; exclusive && i < n; i++) {
        uint8_t f[32] = {0};
        first_bytes(s, alt[i], f);
        for (int b = 0; b < 32; b++)
            if (f[b] & seen[b]) {
                lmq_error(LMQ_ERR_FORMAT,
                          "json schema: %s/oneOf/%d: starts like an earlier alternative (oneOf is supported "
                          "for alternatives of different JSON types; anyOf for any)",
                          ptr, i);
                return -1;
            }
        for (int b = 0; b < 32; b++) seen[b] |= f[b];
    }
    int32_t u = new_node(s, ptr);
    if (u < 0) return -1;
    if (!grow((void **)&s->alts, &s->cap_alts, s->n_alts + n, sizeof(int32_t))) {
        lmq_error(LMQ_ERR_NOMEM, "json schema");
        return -1;
    }
    s->nodes[u].kind = K_UNION;
    s->nodes[u].first = s->n_alts;
    s->nodes[u].count = n;
    memcpy(s->alts + s->n_alts, alt, (size_t)n * sizeof *alt);
    s->n_alts += n;
    int64_t w = width(s, u);
    if (w > LMQ_JSON_MAX_ALTS) {
        lmq_error(LMQ_ERR_FORMAT, "json schema: %s: alternatives that start alike would be read %lld at once (limit %d)", ptr,
                  (long long)w, LMQ_JSON_MAX_ALTS);
        return -1;
    }
    return u;
}

static int32_t compile_typed(lmq_json_schema *s, const cJSON *j, const char *type, int depth, const char *ptr)
{
    char sub[256];
    double d;
    if (!strcmp(type, "boolean") || !strcmp(type, "null")) {
        int32_t n = new_node(s, ptr);
        if (n < 0) return -1;
        s->nodes[n].kind = K_LIT;
        s->nodes[n].first = s->n_lits;
        if (type[0] == 'b') {
            if (add_lit(s, "true") < 0 || add_lit(s, "false") < 0) goto nomem;
            s->nodes[n].count = 2;
        } else {
            if (add_lit(s, "null") < 0) goto nomem;
            s->nodes[n].count = 1;
        }
        return n;
    }
    if (!strcmp(type, "string")) {
        int32_t n = new_node(s, ptr);
        if (n < 0) return -1;
        node *nd = &s->nodes[n];
        nd->kind = K_STR;
        if (num_of(j, "minLength", &d)) nd->min = d < 0 ? 0 : d > LMQ_JSON_MAX_STRING ? LMQ_JSON_MAX_STRING + 1 : (int32_t)d;
        if (num_of(j, "maxLength", &d) && d < LMQ_JSON_MAX_STRING) nd->max = d < 0 ? 0 : (int32_t)d;
        if (nd->min > nd->max) {
            lmq_error(LMQ_ERR_FORMAT, "json schema: %s: minLength above maxLength (or above the cap %d)", ptr, LMQ_JSON_MAX_STRING);
            return -1;
        }
        return n;
    }
    if (!strcmp(type, "integer") || !strcmp(type, "number")) {
        int32_t n = new_node(s, ptr);
        if (n < 0) return -1;
        node *nd = &s->nodes[n];
        nd->kind = K_NUM;
        nd->integer = type[0] == 'i';
        double lo = -(double)NUM_BIG, hi = (double)NUM_BIG;
        nd->fmin = lo;
        nd->fmax = hi;
        if (num_of(j, "minimum", &d)) { nd->bounded = 1; lo = d > lo ? d : lo; nd->fmin = lo; }
        if (num_of(j, "maximum", &d)) { nd->bounded = 1; hi = d < hi ? d : hi; nd->fmax = hi; }
        const cJSON *ex = cJSON_GetObjectItemCaseSensitive(j, "exclusiveMinimum");
        if (ex && cJSON_IsNumber(ex)) {
            nd->bounded = 1;
            nd->fmin = ex->valuedouble > nd->fmin ? ex->valuedouble : nd->fmin;
            d = __builtin_floor(ex->valuedouble) + 1;
            lo = d > lo ? d : lo;
        }
        ex = cJSON_GetObjectItemCaseSensitive(j, "exclusiveMaximum");
        if (ex && cJSON_IsNumber(ex)) {
            nd->bounded = 1;
            nd->fmax = ex->valuedouble < nd->fmax ? ex->valuedouble : nd->fmax;
            d = __builtin_ceil(ex->valuedouble) - 1;
            hi = d < hi ? d : hi;
        }
        lo = __builtin_ceil(lo);
        hi = __builtin_floor(hi);
        if (lo < -(double)NUM_BIG) lo = -(double)NUM_BIG;
        if (hi > (double)NUM_BIG) hi = (double)NUM_BIG;
        if (lo > hi) {
            lmq_error(LMQ_ERR_FORMAT, "json schema: %s: no integer lies between the bounds (fractional-only ranges are not supported)", ptr);
            return -1;
        }
        nd->lo = (int64_t)lo;
        nd->hi = (int64_t)hi;
        return n;
    }
    if (!strcmp(type, "array")) {
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(j, "items");
        int32_t item = N_ANY;
        if (it) {
            snprintf(sub, sizeof sub, "%s/items", ptr);
            if ((item = compile(s, it, depth + 1, sub)) < 0) return -1;
        }
        int32_t n = new_node(s, ptr);
        if (n < 0) return -1;
        node *nd = &s->nodes[n];
        nd->kind = K_ARR;
        nd->item = item;
        nd->min = 0;
        nd->max = INT32_MAX;
        if (num_of(j, "minItems", &d)) nd->min = d < 0 ? 0 : d > 100000 ? 100000 : (int32_t)d;
        if (num_of(j, "maxItems", &d) && d < INT32_MAX) nd->max = d < 0 ? 0 : (int32_t)d;
        if (nd->min > nd->max) {
            lmq_error(LMQ_ERR_FORMAT, "json schema: %s: minItems above maxItems", ptr);
            return -1;
        }
        return n;
    }
    if (!strcmp(type, "object")) {
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(j, "properties");
        const cJSON *req = cJSON_GetObjectItemCaseSensitive(j, "required");
        const cJSON *ap = cJSON_GetObjectItemCaseSensitive(j, "additionalProperties");
        if (ap && !cJSON_IsBool(ap)) {
            lmq_error(LMQ_ERR_FORMAT, "json schema: %s/additionalProperties: only true or false is supported", ptr);
            return -1;
        }
        if (req && !cJSON_IsArray(req)) {
            lmq_error(LMQ_ERR_FORMAT, "json schema: %s/required: not an array", ptr);
            return -1;
        }
        int np = props ? cJSON_GetArraySize(props) : 0;
        if (props && !cJSON_IsObject(props)) {
            lmq_error(LMQ_ERR_FORMAT, "json schema: %s/properties: not an object", ptr);
            return -1;
        }
        if (np == 0) {
            if (req && cJSON_GetArraySize(req) > 0) {
                lmq_error(LMQ_ERR_FORMAT, "json schema: %s/required names keys not in properties", ptr);
                return -1;
            }
            return N_GOBJ;
        }
        if (np > MAX_SET) {
            lmq_error(LMQ_ERR_LIMIT, "json schema: %s/properties: more than %d", ptr, MAX_SET);
            return -1;
        }
        const cJSON *r;
        cJSON_ArrayForEach(r, req) {
            if (!cJSON_IsString(r) || !cJSON_GetObjectItemCaseSensitive(props, r->valuestring)) {
                lmq_error(LMQ_ERR_FORMAT, "json schema: %s/required: '%s' is not in properties", ptr,
                          cJSON_IsString(r) ? r->valuestring : "(not a string)");
                return -1;
            }
        }
        int32_t kids[MAX_SET];
        int i = 0;
        const cJSON *p;
        cJSON_ArrayForEach(p, props) {
            snprintf(sub, sizeof sub, "%s/properties/%s", ptr, p->string);
            if ((kids[i++] = compile(s, p, depth + 1, sub)) < 0) return -1;
        }
        int32_t n = new_node(s, ptr);
        if (n < 0) return -1;
        if (!grow((void **)&s->props, &s->cap_props, s->n_props + np, sizeof(prop))) goto nomem;
        s->nodes[n].kind = K_OBJ;
        s->nodes[n].first = s->n_props;
        s->nodes[n].count = np;
        i = 0;
        cJSON_ArrayForEach(p, props) {
            cJSON *k = cJSON_CreateString(p->string);
            char *enc = k ? cJSON_PrintUnformatted(k) : NULL;
            cJSON_Delete(k);
            if (!enc) goto nomem;
            bool required = false;
            cJSON_ArrayForEach(r, req) required |= !strcmp(r->valuestring, p->string);
            s->props[s->n_props++] = (prop){enc, strlen(enc), kids[i++], required};
        }
        return n;
    }
    lmq_error(LMQ_ERR_FORMAT, "json schema: %s/type: unknown type '%s'", ptr, type);
    return -1;
nomem:
    lmq_error(LMQ_ERR_NOMEM, "json schema");
    return -1;
}

static int32_t compile(lmq_json_schema *s, const cJSON *j, int depth, const char *ptr)
{
    char sub[256];
    if (depth >= LMQ_JSON_MAX_DEPTH - 1) {
        lmq_error(LMQ_ERR_LIMIT, "json schema: %s: nested deeper than %d", ptr, LMQ_JSON_MAX_DEPTH - 1);
        return -1;
    }
    if (cJSON_IsTrue(j)) return N_ANY;
    if (!cJSON_IsObject(j)) {
        lmq_error(LMQ_ERR_FORMAT, "json schema: %s: a schema must be an object or true", ptr);
        return -1;
    }
    const cJSON *k;
    cJSON_ArrayForEach(k, j) {
        bool ok = false;
        for (int i = 0; known_keys[i]; i++) ok |= !strcmp(known_keys[i], k->string);
        if (!ok && (!strcmp(k->string, "$defs") || !strcmp(k->string, "definitions"))) ok = true;
        if (!ok) {
            lmq_error(LMQ_ERR_FORMAT, "json schema: %s: keyword '%s' is not supported", ptr, k->string);
            return -1;
        }
    }
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(j, "enum");
    const cJSON *cn = cJSON_GetObjectItemCaseSensitive(j, "const");
    if (en || cn) {
        int n = en ? cJSON_GetArraySize(en) : 1;
        if ((en && !cJSON_IsArray(en)) || n == 0 || n > MAX_SET) {
            lmq_error(LMQ_ERR_FORMAT, "json schema: %s/enum: must be an array of 1 to %d values", ptr, MAX_SET);
            return -1;
        }
        int32_t nd = new_node(s, ptr);
        if (nd < 0) return -1;
        s->nodes[nd].kind = K_LIT;
        s->nodes[nd].first = s->n_lits;
        s->nodes[nd].count = n;
        const cJSON *v;
        if (cn) {
            char *t = cJSON_PrintUnformatted(cn);
            int32_t r = t ? add_lit(s, t) : -1;
            free(t);
            if (r < 0) goto nomem;
        } else {
            cJSON_ArrayForEach(v, en) {
                char *t = cJSON_PrintUnformatted(v);
                int32_t r = t ? add_lit(s, t) : -1;
                free(t);
                if (r < 0) goto nomem;
            }
        }
        /* Two equal literals, or one a prefix of another that is not a
         * number, is harmless: the set just matches both. */
        return nd;
    }
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(j, "anyOf");
    bool one_of = !any;
    if (!any) any = cJSON_GetObjectItemCaseSensitive(j, "oneOf");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(j, "type");
    if (any) {
        if (type) {
            lmq_error(LMQ_ERR_FORMAT, "json schema: %s: anyOf/oneOf beside type is not supported", ptr);
            return -1;
        }
        int n = cJSON_GetArraySize(any);
        if (!cJSON_IsArray(any) || n == 0 || n > MAX_SET) {
            lmq_error(LMQ_ERR_FORMAT, "json schema: %s/anyOf: must be an array of 1 to %d schemas", ptr, MAX_SET);
            return -1;
        }
        int32_t alt[MAX_SET];
        int i = 0;
        const cJSON *a;
        cJSON_ArrayForEach(a, any) {
            snprintf(sub, sizeof sub, "%s/%s/%d", ptr, one_of ? "oneOf" : "anyOf", i);
            if ((alt[i] = compile(s, a, depth + 1, sub)) < 0) return -1;
            i++;
        }
        return n == 1 ? alt[0] : make_union(s, alt, n, one_of, ptr);
    }
    if (!type) {
        if (cJSON_GetObjectItemCaseSensitive(j, "properties")) return compile_typed(s, j, "object", depth, ptr);
        if (cJSON_GetObjectItemCaseSensitive(j, "items")) return compile_typed(s, j, "array", depth, ptr);
        return N_ANY;
    }
    if (cJSON_IsString(type)) return compile_typed(s, j, type->valuestring, depth, ptr);
    if (cJSON_IsArray(type)) {
        int n = cJSON_GetArraySize(type);
        if (n == 0 || n > 7) {
            lmq_error(LMQ_ERR_FORMAT, "json schema: %s/type: an array of 1 to 7 type names", ptr);
            return -1;
        }
        int32_t alt[8];
        int i = 0;
        const cJSON *t;
        cJSON_ArrayForEach(t, type) {
            if (!cJSON_IsString(t)) {
                lmq_error(LMQ_ERR_FORMAT, "json schema: %s/type: not a string", ptr);
                return -1;
            }
            if ((alt[i++] = compile_typed(s, j, t->valuestring, depth, ptr)) < 0) return -1;
        }
        return n == 1 ? alt[0] : make_union(s, alt, n, false, ptr);
    }
    lmq_error(LMQ_ERR_FORMAT, "json schema: %s/type: not a string or an array", ptr);
    return -1;
nomem:
    lmq_error(LMQ_ERR_NOMEM, "json schema");
    return -1;
}

static bool builtins(lmq_json_schema *s)
{
    for (int i = 0; i < N_BUILTIN; i++)
        if (new_node(s, "builtin") != i) return false;
    s->nodes[N_ANY].kind = K_ANY;
    s->nodes[N_GOBJ].kind = K_OBJ; /* count 0: any keys, any values */
    s->nodes[N_GARR].kind = K_ARR;
    s->nodes[N_GARR].item = N_ANY;
    s->nodes[N_GARR].max = INT32_MAX;
    s->nodes[N_GSTR].kind = K_STR;
    s->nodes[N_GNUM].kind = K_NUM;
    s->nodes[N_GLIT].kind = K_LIT;
    s->nodes[N_GLIT].first = s->n_lits;
    s->nodes[N_GLIT].count = 3;
    return add_lit(s, "true") >= 0 && add_lit(s, "false") >= 0 && add_lit(s, "null") >= 0;
}

lmq_status lmq_json_schema_compile(const char *schema_json, size_t len, const char *prefix,
                                   const char *suffix, lmq_json_schema **out)
{
    if (!out) return lmq_error(LMQ_ERR_INVALID_ARG, "json schema: no output");
    *out = NULL;
    if (schema_json && len > LMQ_JSON_MAX_SCHEMA)
        return lmq_error(LMQ_ERR_LIMIT, "json schema: %zu bytes (limit %u)", len, LMQ_JSON_MAX_SCHEMA);
    lmq_json_schema *s = calloc(1, sizeof *s);
    if (!s || !builtins(s)) {
        lmq_json_schema_free(s);
        return lmq_error(LMQ_ERR_NOMEM, "json schema");
    }
    s->prefix = strdup(prefix ? prefix : "");
    s->suffix = strdup(suffix ? suffix : "");
    if (!s->prefix || !s->suffix) {
        lmq_json_schema_free(s);
        return lmq_error(LMQ_ERR_NOMEM, "json schema");
    }
    s->prefix_len = strlen(s->prefix);
    s->suffix_len = strlen(s->suffix);
    if (!schema_json) {
        s->root = N_GOBJ;
        *out = s;
        return LMQ_OK;
    }
    cJSON *j = cJSON_ParseWithLength(schema_json, len);
    if (!j) {
        lmq_json_schema_free(s);
        return lmq_error(LMQ_ERR_FORMAT, "json schema: not valid JSON");
    }
    s->root = compile(s, j, 0, "#");
    cJSON_Delete(j);
    if (s->root < 0) {
        lmq_json_schema_free(s);
        return LMQ_ERR_FORMAT;
    }
    *out = s;
    return LMQ_OK;
}

/* --------------------------------------------------------------- matcher */

enum { P_PREFIX, P_BODY, P_SUFFIX, P_DONE };
enum {
    F_START, /* a value of frame.node, nothing read yet */
    O_OPEN, O_KEY, O_KEYG, O_COLON, O_BEFORE_VAL, O_VALUE, O_AFTER, O_COMMA,
    A_OPEN, A_VALUE, A_AFTER, A_COMMA,
    S_IN, S_ESC, S_HEX, S_UTF,
    N_SIGN, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP,
    L_IN,
};

typedef struct frame {
    int32_t node;
    uint8_t ph, ws, neg, pad;
    int32_t a;  /* object: next property; array: items; string: code points; number: digits; literal: position */
    int32_t spare; /* zero: frames compare with memcmp */
    uint64_t b; /* object: key candidates; literal: candidates; number: fraction/exponent digits */
    int64_t c;  /* object: key position; string: bytes to come; number: magnitude */
} frame;

/* One reading of the bytes so far: a stack of open values. */
typedef struct run {
    const lmq_json_schema *s;
    int32_t phase, pos, depth, pad;
    frame f[LMQ_JSON_MAX_DEPTH];
} run;

/* The readings still alive: more than one only while the alternatives of an
 * anyOf that start alike are read in parallel. */
struct lmq_json_matcher {
    int32_t n, pad;
    run r[LMQ_JSON_MAX_ALTS];
};

/* Where a union's extra alternatives go: runs that still have to read the
 * byte that forked them. */
typedef struct forks {
    run *r;
    int n, cap;
} forks;

enum { R_FAIL, R_OK, R_POP, R_REFEED };

static void run_reset(run *m, const lmq_json_schema *s)
{
    memset(m, 0, offsetof(run, f));
    m->s = s;
    m->phase = P_PREFIX;
    if (s->prefix_len == 0) {
        m->phase = P_BODY;
        m->depth = 1;
        memset(&m->f[0], 0, sizeof m->f[0]);
        m->f[0].node = s->root;
    }
}

lmq_status lmq_json_matcher_new(const lmq_json_schema *s, lmq_json_matcher **out)
{
    if (!s || !out) return lmq_error(LMQ_ERR_INVALID_ARG, "json matcher: bad argument");
    lmq_json_matcher *m = malloc(sizeof *m);
    if (!m) return lmq_error(LMQ_ERR_NOMEM, "json matcher");
    m->n = 1;
    m->pad = 0;
    run_reset(&m->r[0], s);
    *out = m;
    return LMQ_OK;
}

void lmq_json_matcher_free(lmq_json_matcher *m) { free(m); }

static void run_copy(run *dst, const run *src)
{
    memcpy(dst, src, offsetof(run, f) + (size_t)src->depth * sizeof(frame));
}

static bool run_same(const run *a, const run *b)
{
    return !memcmp(a, b, offsetof(run, f)) && !memcmp(a->f, b->f, (size_t)a->depth * sizeof(frame));
}

void lmq_json_matcher_copy(lmq_json_matcher *dst, const lmq_json_matcher *src)
{
    dst->n = src->n;
    dst->pad = 0;
    for (int i = 0; i < src->n; i++) run_copy(&dst->r[i], &src->r[i]);
}

static bool is_ws(uint8_t c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

static int64_t pow10i(int k)
{
    int64_t p = 1;
    while (k-- > 0) p *= 10;
    return p;
}

/* Can a number whose integer part starts with k digits of magnitude mag
 * (sign neg) still end inside [lo, hi]? */
static bool num_feasible(bool neg, int64_t mag, int k, int64_t lo, int64_t hi)
{
    if (k == 0) return neg ? lo <= 0 : hi >= 0;
    if (mag == 0 && k == 1) return lo <= 0 && hi >= 0;
    for (int j = 0; j + k <= NUM_DIGITS; j++) {
        int64_t p = pow10i(j), a = mag * p, b = a + p - 1;
        if (neg) {
            int64_t t = -b;
            b = -a;
            a = t;
        }
        if (a <= hi && b >= lo) return true;
    }
    return false;
}

static bool num_complete(const frame *f, const node *nd)
{
    switch (f->ph) {
    case N_ZERO:
    case N_INT: {
        int64_t v = f->neg ? -f->c : f->c;
        return v >= nd->lo && v <= nd->hi;
    }
    case N_FRAC:
    case N_EXP: return true;
    default: return false;
    }
}

static bool lit_complete(const lmq_json_schema *s, const frame *f, const node *nd)
{
    for (int32_t i = 0; i < nd->count; i++)
        if ((f->b >> i & 1) && s->lits[nd->first + i].len == (size_t)f->a) return true;
    return false;
}

/* Object keys that may come next: from property a up to the first required one. */
static uint64_t key_set(const lmq_json_schema *s, const node *nd, int32_t a)
{
    uint64_t set = 0;
    for (int32_t i = a; i < nd->count; i++) {
        set |= 1ull << i;
        if (s->props[nd->first + i].required) break;
    }
    return set;
}

static bool obj_closable(const lmq_json_schema *s, const node *nd, int32_t a)
{
    for (int32_t i = a; i < nd->count; i++)
        if (s->props[nd->first + i].required) return false;
    return true;
}

static bool push(run *m, int32_t nid)
{
    if (m->depth >= LMQ_JSON_MAX_DEPTH) return false;
    frame *f = &m->f[m->depth++];
    memset(f, 0, sizeof *f);
    f->node = nid;
    return true;
}

static int ws_step(frame *f, uint8_t ch)
{
    if (!is_ws(ch) || f->ws >= LMQ_JSON_MAX_WS) return R_FAIL;
    f->ws++;
    return R_OK;
}

static void set_ph(frame *f, int ph)
{
    f->ph = (uint8_t)ph;
    f->ws = 0;
}

static int start_key(run *m, frame *f, const node *nd)
{
    if (f->node == N_GOBJ) {
        set_ph(f, O_KEYG);
        if (!push(m, N_GSTR)) return R_FAIL;
        m->f[m->depth - 1].ph = S_IN;
        return R_OK;
    }
    f->b = key_set(m->s, nd, f->a);
    if (!f->b) return R_FAIL;
    f->c = 1;
    set_ph(f, O_KEY);
    return R_OK;
}

/* Starts a child value and hands it ch; the caller's frame pointer is stale
 * afterwards. */
static int child(run *m, int32_t nid, uint8_t ch, forks *fk);

static int step_frame(run *m, uint8_t ch, forks *fk)
{
    const lmq_json_schema *s = m->s;
    frame *f = &m->f[m->depth - 1];
    const node *nd = &s->nodes[f->node];
    switch (f->ph) {
    case F_START:
        switch (nd->kind) {
        case K_ANY: {
            int32_t n = ch == '{' ? N_GOBJ : ch == '[' ? N_GARR : ch == '"' ? N_GSTR
                      : (ch == '-' || (ch >= '0' && ch <= '9')) ? N_GNUM : N_GLIT;
            if ((n == N_GOBJ || n == N_GARR) && m->depth >= LMQ_JSON_MAX_DEPTH) return R_FAIL;
            f->node = n;
            return step_frame(m, ch, fk);
        }
        case K_UNION: {
            /* the first alternative that can start with ch goes on in this
             * run; each other one in a copy made here, which reads ch too */
            int32_t pick = -1;
            for (int32_t i = 0; i < nd->count; i++) {
                uint8_t set[32] = {0};
                int32_t a = s->alts[nd->first + i];
                first_bytes(s, a, set);
                if (!(set[ch >> 3] >> (ch & 7) & 1)) continue;
                if (pick < 0) {
                    pick = a;
                    continue;
                }
                /* the schema's width bound keeps this within cap */
                if (!fk || fk->n >= fk->cap) return R_FAIL;
                run *c = &fk->r[fk->n++];
                run_copy(c, m);
                c->f[c->depth - 1].node = a;
            }
            if (pick < 0) return R_FAIL;
            f->node = pick;
            return step_frame(m, ch, fk);
        }
        case K_OBJ:
            if (ch != '{') return R_FAIL;
            set_ph(f, O_OPEN);
            return R_OK;
        case K_ARR:
            if (ch != '[') return R_FAIL;
            set_ph(f, A_OPEN);
            return R_OK;
        case K_STR:
            if (ch != '"') return R_FAIL;
            set_ph(f, S_IN);
            return R_OK;
        case K_NUM:
            if (ch == '-') {
                if (!num_feasible(true, 0, 0, nd->lo, nd->hi)) return R_FAIL;
                f->neg = 1;
                set_ph(f, N_SIGN);
                return R_OK;
            }
            set_ph(f, N_SIGN);
            return step_frame(m, ch, fk);
        case K_LIT: {
            f->b = nd->count >= 64 ? ~0ull : (1ull << nd->count) - 1;
            f->a = 0;
            set_ph(f, L_IN);
            return step_frame(m, ch, fk);
        }
        }
        return R_FAIL;
    /* objects */
    case O_OPEN:
        if (ch == '}' && obj_closable(s, nd, f->a)) return R_POP;
        if (ch == '"') return start_key(m, f, nd);
        return ws_step(f, ch);
    case O_KEY: {
        uint64_t nb = 0;
        for (int32_t i = 0; i < nd->count; i++) {
            const prop *p = &s->props[nd->first + i];
            if ((f->b >> i & 1) && (size_t)f->c < p->len && (uint8_t)p->key[f->c] == ch) nb |= 1ull << i;
        }
        if (!nb) return R_FAIL;
        f->b = nb;
        f->c++;
        for (int32_t i = 0; i < nd->count; i++)
            if ((nb >> i & 1) && s->props[nd->first + i].len == (size_t)f->c) {
                f->a = i + 1;
                f->c = i; /* the property whose value comes */
                set_ph(f, O_COLON);
                break;
            }
        return R_OK;
    }
    case O_COLON:
        if (ch == ':') {
            set_ph(f, O_BEFORE_VAL);
            return R_OK;
        }
        return ws_step(f, ch);
    case O_BEFORE_VAL:
        if (is_ws(ch)) return ws_step(f, ch);
        set_ph(f, O_VALUE);
        return child(m, f->node == N_GOBJ ? N_ANY : s->props[nd->first + f->c].node, ch, fk);
    case O_AFTER:
        if (ch == '}' && (f->node == N_GOBJ || obj_closable(s, nd, f->a))) return R_POP;
        if (ch == ',' && (f->node == N_GOBJ || f->a < nd->count)) {
            set_ph(f, O_COMMA);
            return R_OK;
        }
        return ws_step(f, ch);
    case O_COMMA:
        if (ch == '"') return start_key(m, f, nd);
        return ws_step(f, ch);
    /* arrays */
    case A_OPEN:
        if (ch == ']' && nd->min == 0) return R_POP;
        if (is_ws(ch)) return ws_step(f, ch);
        if (nd->max == 0) return R_FAIL;
        set_ph(f, A_VALUE);
        return child(m, nd->item, ch, fk);
    case A_AFTER:
        if (ch == ']' && f->a >= nd->min) return R_POP;
        if (ch == ',' && f->a < nd->max) {
            set_ph(f, A_COMMA);
            return R_OK;
        }
        return ws_step(f, ch);
    case A_COMMA:
        if (is_ws(ch)) return ws_step(f, ch);
        set_ph(f, A_VALUE);
        return child(m, nd->item, ch, fk);
    /* strings */
    case S_IN:
        if (ch == '"') return f->a >= nd->min ? R_POP : R_FAIL;
        if (ch < 0x20 || f->a >= nd->max) return R_FAIL;
        if (ch == '\\') {
            f->ph = S_ESC;
            return R_OK;
        }
        if (ch < 0x80) {
            f->a++;
            return R_OK;
        }
        if (ch >= 0xC2 && ch <= 0xDF) f->c = 1;
        else if (ch >= 0xE0 && ch <= 0xEF) f->c = 2;
        else if (ch >= 0xF0 && ch <= 0xF4) f->c = 3;
        else return R_FAIL;
        f->a++;
        f->ph = S_UTF;
        return R_OK;
    case S_UTF:
        if (ch < 0x80 || ch > 0xBF) return R_FAIL;
        if (--f->c == 0) f->ph = S_IN;
        return R_OK;
    case S_ESC:
        if (ch == 'u') {
            f->c = 4;
            f->ph = S_HEX;
            return R_OK;
        }
        if (!strchr("\"\\/bfnrt", ch) || !ch) return R_FAIL;
        f->a++;
        f->ph = S_IN;
        return R_OK;
    case S_HEX:
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F'))) return R_FAIL;
        if (--f->c == 0) {
            f->a++;
            f->ph = S_IN;
        }
        return R_OK;
    /* numbers */
    case N_SIGN:
        if (ch < '0' || ch > '9' || !num_feasible(f->neg, ch - '0', 1, nd->lo, nd->hi)) return R_FAIL;
        f->c = ch - '0';
        f->a = 1;
        f->ph = ch == '0' ? N_ZERO : N_INT;
        return R_OK;
    case N_ZERO:
    case N_INT:
        if (ch >= '0' && ch <= '9') {
            if (f->ph == N_ZERO || f->a >= NUM_DIGITS) return R_FAIL;
            int64_t v = f->c * 10 + (ch - '0');
            if (!num_feasible(f->neg, v, f->a + 1, nd->lo, nd->hi)) return R_FAIL;
            f->c = v;
            f->a++;
            return R_OK;
        }
        if (ch == '.' && !nd->integer) {
            /* the value lies strictly between the integer part v and v +- 1 */
            double v = (double)f->c;
            bool ok = f->neg ? (-(v + 1) >= nd->fmin && -v <= nd->fmax) : (v >= nd->fmin && v + 1 <= nd->fmax);
            if (!ok) return R_FAIL;
            f->ph = N_DOT;
            return R_OK;
        }
        if ((ch == 'e' || ch == 'E') && !nd->integer && !nd->bounded) {
            f->ph = N_E;
            return R_OK;
        }
        return num_complete(f, nd) ? R_REFEED : R_FAIL;
    case N_DOT:
    case N_FRAC:
        if (ch >= '0' && ch <= '9') {
            if (f->b >= NUM_DIGITS) return R_FAIL;
            f->b++;
            f->ph = N_FRAC;
            return R_OK;
        }
        if (f->ph == N_DOT) return R_FAIL;
        if ((ch == 'e' || ch == 'E') && !nd->bounded) {
            f->b = 0;
            f->ph = N_E;
            return R_OK;
        }
        return R_REFEED;
    case N_E:
        if (ch == '+' || ch == '-') {
            f->ph = N_ESIGN;
            return R_OK;
        }
        /* fall through */
    case N_ESIGN:
    case N_EXP:
        if (ch >= '0' && ch <= '9') {
            if (f->ph == N_EXP && f->b >= 3) return R_FAIL;
            f->b = f->ph == N_EXP ? f->b + 1 : 1;
            f->ph = N_EXP;
            return R_OK;
        }
        return f->ph == N_EXP ? R_REFEED : R_FAIL;
    /* literals */
    case L_IN: {
        uint64_t nb = 0;
        bool longer = false;
        for (int32_t i = 0; i < nd->count; i++) {
            const lit *l = &s->lits[nd->first + i];
            if ((f->b >> i & 1) && (size_t)f->a < l->len && (uint8_t)l->s[f->a] == ch) nb |= 1ull << i;
        }
        if (!nb) return lit_complete(s, f, nd) ? R_REFEED : R_FAIL;
        f->b = nb;
        f->a++;
        for (int32_t i = 0; i < nd->count; i++)
            if ((nb >> i & 1) && s->lits[nd->first + i].len > (size_t)f->a) longer = true;
        return longer ? R_OK : R_POP;
    }
    }
    return R_FAIL;
}

static int child(run *m, int32_t nid, uint8_t ch, forks *fk)
{
    if (!push(m, nid)) return R_FAIL;
    int r = step_frame(m, ch, fk);
    if (r == R_FAIL) m->depth--; /* the whole step is rolled back by the caller anyway */
    return r;
}

/* A value finished: its frame is popped and the parent moves on. */
static void pop(run *m)
{
    m->depth--;
    if (m->depth == 0) {
        m->phase = m->s->suffix_len ? P_SUFFIX : P_DONE;
        m->pos = 0;
        return;
    }
    frame *p = &m->f[m->depth - 1];
    if (p->ph == O_VALUE) set_ph(p, O_AFTER);
    else if (p->ph == O_KEYG) set_ph(p, O_COLON);
    else if (p->ph == A_VALUE) {
        p->a++;
        set_ph(p, A_AFTER);
    }
}

static bool step(run *m, uint8_t ch, forks *fk)
{
    const lmq_json_schema *s = m->s;
    for (;;) {
        switch (m->phase) {
        case P_PREFIX:
            if ((uint8_t)s->prefix[m->pos] != ch) return false;
            if ((size_t)++m->pos == s->prefix_len) {
                m->phase = P_BODY;
                m->depth = 0;
                push(m, s->root);
            }
            return true;
        case P_SUFFIX:
            if ((uint8_t)s->suffix[m->pos] != ch) return false;
            if ((size_t)++m->pos == s->suffix_len) m->phase = P_DONE;
            return true;
        case P_DONE: return false;
        default: break;
        }
        /* A child that returns R_POP or R_REFEED may sit above the frame
         * that started it: it is always the top frame that finished. */
        int r = step_frame(m, ch, fk);
        if (r == R_FAIL) return false;
        if (r == R_OK) return true;
        pop(m);
        if (r == R_POP) return true;
        /* R_REFEED: the byte ended a number or literal and belongs to the parent */
    }
}

/* Feeds one byte to every reading: those that refuse it go, forks join,
 * equal ones merge. False if none is left (m is then garbage: callers step
 * a copy). */
static bool mstep(lmq_json_matcher *m, uint8_t ch)
{
    forks fk = {m->r, m->n, LMQ_JSON_MAX_ALTS};
    bool alive[LMQ_JSON_MAX_ALTS];
    for (int i = 0; i < fk.n; i++) alive[i] = step(&m->r[i], ch, &fk);
    if (fk.n == 1) return alive[0];
    int k = 0;
    for (int i = 0; i < fk.n; i++) {
        if (!alive[i]) continue;
        bool dup = false;
        for (int j = 0; j < k && !dup; j++) dup = run_same(&m->r[j], &m->r[i]);
        if (dup) continue;
        if (k != i) run_copy(&m->r[k], &m->r[i]);
        k++;
    }
    m->n = k ? k : 1;
    return k > 0;
}

bool lmq_json_matcher_feed(lmq_json_matcher *m, const char *bytes, size_t len)
{
    if (!m || (len && !bytes)) return false;
    lmq_json_matcher *t = malloc(sizeof *t);
    if (!t) return false;
    lmq_json_matcher_copy(t, m);
    size_t i = 0;
    while (i < len && mstep(t, (uint8_t)bytes[i])) i++;
    if (i == len) lmq_json_matcher_copy(m, t);
    free(t);
    return i == len;
}

static bool run_done(const run *m)
{
    if (m->phase == P_DONE) return true;
    if (m->phase != P_BODY || m->depth != 1 || m->s->suffix_len) return false;
    const frame *f = &m->f[0];
    const node *nd = &m->s->nodes[f->node];
    if (f->ph == L_IN) return lit_complete(m->s, f, nd);
    return num_complete(f, nd);
}

bool lmq_json_matcher_done(const lmq_json_matcher *m)
{
    if (!m) return false;
    for (int i = 0; i < m->n; i++)
        if (run_done(&m->r[i])) return true;
    return false;
}

/* ------------------------------------------------------------------ mask */

/* Tokens are kept in byte order in two lists: all of them, and those with a
 * '"' byte. A list is walked one first-byte group at a time: a refused first
 * byte skips its whole group, and inside a group each token feeds only the
 * bytes past the prefix it shares with the previous one.
 *
 * Inside a string a token without '"' never leaves the string frame, so
 * whether it fits depends only on where the frame is in a character (one of
 * N_SUB string sub-states) and on how many code points the string may still
 * start (maxLength minus the count): that is precomputed per sub-state, and
 * such a mask costs a copy of a bitset plus a walk of the '"' tokens. */

#define MAX_PIECE 128 /* longer tokens are never allowed */

/* String sub-states: S_IN, S_ESC, S_HEX with 4..1 digits to come, S_UTF
 * with 3..1 continuation bytes to come. */
enum { SUB_IN, SUB_ESC, SUB_HEX, SUB_UTF = SUB_HEX + 4, N_SUB = SUB_UTF + 3 };

typedef struct tlist {
    int32_t n;
    int32_t *id;  /* (n) token id */
    int32_t *off; /* (n + 1) offsets into bytes */
    uint8_t *lcp; /* (n) common prefix with the previous token of the list */
    char *bytes;
    int32_t first[257]; /* tokens first[b] .. first[b + 1] - 1 start with byte b */
} tlist;

typedef struct strclass {
    int32_t n;          /* tokens without '"' that fit from this sub-state */
    uint8_t *all;       /* ((n_vocab + 7) / 8) their bitset */
    int32_t *by_need;   /* (n) their ids, by need ascending; need = the code
                         * points the string must still be able to start */
    int32_t cnt[MAX_PIECE + 2]; /* cnt[r]: how many need at most r */
} strclass;

struct lmq_json_vocab {
    int32_t n_vocab;
    int32_t eos;
    tlist all, quoted;
    strclass sub[N_SUB];
    lmq_json_matcher *st; /* (MAX_PIECE + 1) scratch states: one per prefix length */
    lmq_json_matcher *one; /* scratch: one reading of a matcher that has several */
    uint8_t *part;         /* ((n_vocab + 7) / 8) scratch: that reading's mask */
};

typedef struct piece {
    const char *p;
    size_t len;
    int32_t id;
} piece;

static int cmp_piece(const void *a, const void *b)
{
    const piece *x = a, *y = b;
    int c = memcmp(x->p, y->p, x->len < y->len ? x->len : y->len);
    if (c) return c;
    return x->len < y->len ? -1 : x->len > y->len ? 1 : (x->id < y->id ? -1 : 1);
}

static void tlist_free(tlist *l)
{
    free(l->id);
    free(l->off);
    free(l->lcp);
    free(l->bytes);
}

/* pc (n pieces, sorted) becomes the list. */
static bool tlist_build(tlist *l, const piece *pc, int32_t n)
{
    size_t total = 0;
    for (int32_t k = 0; k < n; k++) total += pc[k].len;
    if (total > INT32_MAX) return false;
    l->n = n;
    l->id = malloc((size_t)n * sizeof *l->id + 1);
    l->off = malloc(((size_t)n + 1) * sizeof *l->off);
    l->lcp = malloc((size_t)n + 1);
    l->bytes = malloc(total + 1);
    if (!l->id || !l->off || !l->lcp || !l->bytes) return false;
    size_t o = 0;
    for (int32_t k = 0; k < n; k++) {
        l->id[k] = pc[k].id;
        l->off[k] = (int32_t)o;
        memcpy(l->bytes + o, pc[k].p, pc[k].len);
        size_t c = 0;
        if (k > 0)
            while (c < pc[k - 1].len && c < pc[k].len && pc[k - 1].p[c] == pc[k].p[c]) c++;
        l->lcp[k] = (uint8_t)c;
        o += pc[k].len;
    }
    l->off[n] = (int32_t)o;
    int32_t k = 0;
    for (int b = 0; b <= 256; b++) {
        while (b < 256 && k < n && (uint8_t)pc[k].p[0] < b) k++;
        l->first[b] = b == 256 ? n : k;
    }
    return true;
}

static void sub_frame(frame *f, int sub)
{
    memset(f, 0, sizeof *f);
    f->node = N_GSTR;
    f->ph = sub == SUB_IN ? S_IN : sub == SUB_ESC ? S_ESC : sub < SUB_UTF ? S_HEX : S_UTF;
    f->c = sub < SUB_HEX ? 0 : sub < SUB_UTF ? 4 - (sub - SUB_HEX) : 3 - (sub - SUB_UTF);
}

/* The sub-state of a string frame, or -1. */
static int frame_sub(const frame *f)
{
    switch (f->ph) {
    case S_IN: return SUB_IN;
    case S_ESC: return SUB_ESC;
    case S_HEX: return f->c >= 1 && f->c <= 4 ? SUB_HEX + 4 - (int)f->c : -1;
    case S_UTF: return f->c >= 1 && f->c <= 3 ? SUB_UTF + 3 - (int)f->c : -1;
    default: return -1;
    }
}

/* Runs every token without '"' through the real matcher from each string
 * sub-state (a string of the built-in node, whose cap a token never reaches)
 * and records whether it fits and the largest count it is checked at. */
static bool strclass_build(lmq_json_vocab *v, const piece *pc, int32_t n)
{
    lmq_json_schema *s = NULL;
    if (lmq_json_schema_compile(NULL, 0, NULL, NULL, &s) != LMQ_OK) return false;
    size_t bytes = ((size_t)v->n_vocab + 7) / 8;
    uint8_t *need = malloc((size_t)n + 1);
    bool ok = need != NULL;
    run m0, m;
    run_reset(&m0, s);
    for (int sb = 0; ok && sb < N_SUB; sb++) {
        strclass *c = &v->sub[sb];
        m0.depth = 1;
        sub_frame(&m0.f[0], sb);
        int32_t hist[MAX_PIECE + 2] = {0};
        c->n = 0;
        for (int32_t k = 0; k < n; k++) {
            need[k] = 0xFF;
            if (memchr(pc[k].p, '"', pc[k].len)) continue;
            run_copy(&m, &m0);
            int32_t r = 0;
            size_t i = 0;
            for (; i < pc[k].len; i++) {
                if (m.f[0].ph == S_IN && m.f[0].a + 1 > r) r = m.f[0].a + 1;
                if (!step(&m, (uint8_t)pc[k].p[i], NULL) || m.depth != 1) break;
            }
            if (i < pc[k].len) continue;
            need[k] = (uint8_t)r;
            hist[r]++;
            c->n++;
        }
        c->all = calloc(bytes, 1);
        c->by_need = malloc((size_t)c->n * sizeof *c->by_need + 1);
        if (!c->all || !c->by_need) {
            ok = false;
            break;
        }
        int32_t at[MAX_PIECE + 2];
        for (int r = 0, sum = 0; r <= MAX_PIECE + 1; r++) {
            at[r] = sum;
            sum += hist[r];
            c->cnt[r] = sum;
        }
        for (int32_t k = 0; k < n; k++)
            if (need[k] != 0xFF) {
                int32_t id = pc[k].id;
                c->by_need[at[need[k]]++] = id;
                c->all[id >> 3] |= (uint8_t)(1u << (id & 7));
            }
    }
    free(need);
    lmq_json_schema_free(s);
    return ok;
}

void lmq_json_vocab_free(lmq_json_vocab *v)
{
    if (!v) return;
    tlist_free(&v->all);
    tlist_free(&v->quoted);
    for (int i = 0; i < N_SUB; i++) {
        free(v->sub[i].all);
        free(v->sub[i].by_need);
    }
    free(v->st);
    free(v->one);
    free(v->part);
    free(v);
}

lmq_status lmq_json_vocab_new(int32_t n_vocab, const char *const *pieces, const size_t *lens,
                              int32_t eos_id, lmq_json_vocab **out)
{
    if (!out || n_vocab <= 0 || !pieces || !lens)
        return lmq_error(LMQ_ERR_INVALID_ARG, "json vocab: bad argument");
    *out = NULL;
    lmq_json_vocab *v = calloc(1, sizeof *v);
    if (!v) return lmq_error(LMQ_ERR_NOMEM, "json vocab");
    v->n_vocab = n_vocab;
    v->eos = eos_id < n_vocab ? eos_id : -1;
    v->st = malloc((MAX_PIECE + 1) * sizeof *v->st);
    v->one = malloc(sizeof *v->one);
    v->part = malloc(((size_t)n_vocab + 7) / 8);
    piece *pc = malloc((size_t)n_vocab * sizeof *pc);
    piece *pq = malloc((size_t)n_vocab * sizeof *pq);
    int32_t n = 0, nq = 0;
    bool ok = v->st && v->one && v->part && pc && pq;
    if (ok) {
        for (int32_t i = 0; i < n_vocab; i++)
            if (pieces[i] && lens[i] > 0 && lens[i] <= MAX_PIECE) pc[n++] = (piece){pieces[i], lens[i], i};
        qsort(pc, (size_t)n, sizeof *pc, cmp_piece);
        for (int32_t k = 0; k < n; k++)
            if (memchr(pc[k].p, '"', pc[k].len)) pq[nq++] = pc[k];
        ok = tlist_build(&v->all, pc, n) && tlist_build(&v->quoted, pq, nq) && strclass_build(v, pc, n);
    }
    free(pc);
    free(pq);
    if (!ok) {
        lmq_json_vocab_free(v);
        return lmq_error(LMQ_ERR_NOMEM, "json vocab");
    }
    *out = v;
    return LMQ_OK;
}

/* Sets the bits of the list's tokens that m accepts whole; their count. */
static int32_t walk(lmq_json_vocab *v, const tlist *L, const lmq_json_matcher *m, uint8_t *mask)
{
    int32_t allowed = 0;
    lmq_json_matcher_copy(&v->st[0], m);
    for (int b = 0; b < 256; b++) {
        int32_t lo = L->first[b], hi = L->first[b + 1];
        if (lo == hi) continue;
        lmq_json_matcher_copy(&v->st[1], &v->st[0]);
        if (!mstep(&v->st[1], (uint8_t)b)) continue;
        int dead = MAX_PIECE + 1; /* shortest failing prefix of the previous token */
        int good = 1;             /* st[0..good] hold the previous token's prefixes */
        for (int32_t k = lo; k < hi; k++) {
            int l = L->lcp[k] < 1 ? 1 : L->lcp[k]; /* the group shares its first byte */
            int len = L->off[k + 1] - L->off[k];
            if (l >= dead) continue; /* shares a prefix already refused */
            const uint8_t *p = (const uint8_t *)L->bytes + L->off[k];
            if (l > good) l = good;
            dead = MAX_PIECE + 1;
            int d = l;
            for (; d < len; d++) {
                lmq_json_matcher_copy(&v->st[d + 1], &v->st[d]);
                if (!mstep(&v->st[d + 1], p[d])) break;
            }
            good = d;
            if (d < len) {
                dead = d + 1;
                continue;
            }
            int32_t id = L->id[k];
            mask[id >> 3] |= (uint8_t)(1u << (id & 7));
            allowed++;
        }
    }
    return allowed;
}

/* Inside a string: the precomputed tokens without '"' that fit in what is
 * left of maxLength, then the walk of the tokens with '"'. */
static int32_t string_mask(lmq_json_vocab *v, const lmq_json_matcher *mm, int sb, uint8_t *mask)
{
    const run *m = &mm->r[0];
    const frame *f = &m->f[m->depth - 1];
    const strclass *c = &v->sub[sb];
    size_t bytes = ((size_t)v->n_vocab + 7) / 8;
    int64_t left = (int64_t)m->s->nodes[f->node].max - f->a;
    int32_t k = left > MAX_PIECE ? c->n : left < 0 ? c->cnt[0] : c->cnt[left];
    if (k > c->n / 2) {
        memcpy(mask, c->all, bytes);
        for (int32_t i = k; i < c->n; i++) {
            int32_t id = c->by_need[i];
            mask[id >> 3] &= (uint8_t)~(1u << (id & 7));
        }
    } else {
        memset(mask, 0, bytes);
        for (int32_t i = 0; i < k; i++) {
            int32_t id = c->by_need[i];
            mask[id >> 3] |= (uint8_t)(1u << (id & 7));
        }
    }
    return k + walk(v, &v->quoted, mm, mask);
}

/* The mask of one reading (m->n == 1). */
static int32_t mask_one(lmq_json_vocab *v, const lmq_json_matcher *m, uint8_t *mask)
{
    const run *r = &m->r[0];
    int sb = r->phase == P_BODY && r->depth > 0 ? frame_sub(&r->f[r->depth - 1]) : -1;
    if (sb >= 0) return string_mask(v, m, sb, mask);
    memset(mask, 0, ((size_t)v->n_vocab + 7) / 8);
    return walk(v, &v->all, m, mask);
}

int32_t lmq_json_mask(const lmq_json_vocab *cv, const lmq_json_matcher *m, uint8_t *mask)
{
    lmq_json_vocab *v = (lmq_json_vocab *)cv; /* st, one and part are scratch */
    if (!v || !m || !mask || m->n < 1) return 0;
    int32_t allowed = 0;
    if (m->n == 1) {
        allowed = mask_one(v, m, mask);
    } else {
        /* the readings are independent: a token fits if it fits one of
         * them, so the mask is the union of theirs */
        size_t bytes = ((size_t)v->n_vocab + 7) / 8;
        memset(mask, 0, bytes);
        for (int i = 0; i < m->n; i++) {
            v->one->n = 1;
            run_copy(&v->one->r[0], &m->r[i]);
            mask_one(v, v->one, v->part);
            for (size_t b = 0; b < bytes; b++) mask[b] |= v->part[b];
        }
        for (size_t b = 0; b < bytes; b++) allowed += __builtin_popcount(mask[b]);
    }
    if (v->eos >= 0 && lmq_json_matcher_done(m)) {
        if (!(mask[v->eos >> 3] >> (v->eos & 7) & 1)) allowed++;
        mask[v->eos >> 3] |= (uint8_t)(1u << (v->eos & 7));
    }
    return allowed;
}
