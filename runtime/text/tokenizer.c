/* Tokenizer front end: builds a vocabulary from tokenizer.* metadata, splits
 * text around special tokens, dispatches fragments to the SentencePiece or
 * byte-level BPE tokenizer, and decodes ids back to text.
 *
 * The rules follow llama.cpp's llama-vocab.cpp (vocab loading, special-token
 * partitioning, the SentencePiece dummy prefix, token_to_piece, detokenize)
 * so that lmq produces the same ids as llama.cpp and Hugging Face; see
 * docs/TOKENIZER.md for the metadata keys and the deliberate differences. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

#define MAX_TOKENS (1u << 24)       /* 16.7 M tokens */
#define MAX_TOKEN_BYTES (1u << 16)  /* one token's text */

/* ======================================================================
 * Small helpers: hashing, the text -> id map, UTF-8
 * ====================================================================== */

static lmq_status map_build(lmq_vocab *v)
{
    uint32_t cap = 16;
    while (cap < (uint32_t)v->n_tokens * 2u) cap <<= 1;
    v->map.slot_hash = malloc((size_t)cap * sizeof(uint32_t));
    v->map.slot_id = malloc((size_t)cap * sizeof(int32_t));
    if (!v->map.slot_hash || !v->map.slot_id) return lmq_error(LMQ_ERR_NOMEM, "tokenizer: token map");
    memset(v->map.slot_id, 0xff, (size_t)cap * sizeof(int32_t));
    v->map.mask = cap - 1;
    for (int32_t id = 0; id < v->n_tokens; id++) {
        const char *s = v->text + v->tok[id].off;
        size_t n = v->tok[id].len;
        uint64_t h = tok_hash(s, n);
        uint32_t i = (uint32_t)h & v->map.mask;
        for (;;) {
            int32_t o = v->map.slot_id[i];
            if (o < 0) break;
            if (v->map.slot_hash[i] == (uint32_t)h && v->tok[o].len == n &&
                !memcmp(v->text + v->tok[o].off, s, n)) {
                return lmq_error(LMQ_ERR_FORMAT, "tokenizer.ggml.tokens: duplicate token '%.*s' has ids %d and %d",
                                 (int)(n > 64 ? 64 : n), s, o, id);
            }
            i = (i + 1) & v->map.mask;
        }
        v->map.slot_id[i] = id;
        v->map.slot_hash[i] = (uint32_t)h;
    }
    return LMQ_OK;
}

size_t tok_utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned min;
    if (c >= 0xc2 && c <= 0xdf) { len = 2; min = 0x80; }
    else if (c >= 0xe0 && c <= 0xef) { len = 3; min = 0x800; }
    else if (c >= 0xf0 && c <= 0xf4) { len = 4; min = 0x10000; }
    else return 0;
    if (n < len) return 0;
    uint32_t cp = c & (0x7f >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

void tok_out_push(tok_out *o, int32_t id)
{
    if (o->oom) return;
    if (o->n == o->cap) {
        size_t nc = o->cap ? o->cap * 2 : 64;
        int32_t *p = realloc(o->ids, nc * sizeof *p);
        if (!p) { o->oom = true; return; }
        o->ids = p;
        o->cap = nc;
    }
    o->ids[o->n++] = id;
}

/* ======================================================================
 * Loading
 * ====================================================================== */

static bool meta_bool(const lmq_meta *m, const char *key, bool *out)
{
    const lmq_value *val = lmq_meta_find(m, key);
    if (!val) return false;
    if (val->type == LMQ_V_BOOL) { *out = val->b; return true; }
    if (val->type <= LMQ_V_I32 || val->type == LMQ_V_U64 || val->type == LMQ_V_I64) {
        *out = val->u != 0;
        return true;
    }
    return false;
}

/* Special-token id key: -1 when absent or out of range (llama.cpp keeps the
 * default then; it warns). */
static void meta_token_id(const lmq_meta *m, const char *key, int32_t n_tokens, int32_t *id)
{
    int64_t x;
    if (lmq_meta_get_i64(m, key, &x) != LMQ_OK) {
        lmq_error_clear();
        return;
    }
    if (x >= 0 && x < n_tokens) *id = (int32_t)x;
}

/* Reads element i of a numeric array as double. */
static double arr_num(lmq_vtype t, const void *data, uint64_t i)
{
    switch (t) {
    case LMQ_V_U8: return ((const uint8_t *)data)[i];
    case LMQ_V_I8: return ((const int8_t *)data)[i];
    case LMQ_V_U16: { uint16_t x; memcpy(&x, (const char *)data + 2 * i, 2); return x; }
    case LMQ_V_I16: { int16_t x; memcpy(&x, (const char *)data + 2 * i, 2); return x; }
    case LMQ_V_U32: { uint32_t x; memcpy(&x, (const char *)data + 4 * i, 4); return x; }
    case LMQ_V_I32: { int32_t x; memcpy(&x, (const char *)data + 4 * i, 4); return x; }
    case LMQ_V_F32: { float x; memcpy(&x, (const char *)data + 4 * i, 4); return x; }
    case LMQ_V_U64: { uint64_t x; memcpy(&x, (const char *)data + 8 * i, 8); return (double)x; }
    case LMQ_V_I64: { int64_t x; memcpy(&x, (const char *)data + 8 * i, 8); return (double)x; }
    case LMQ_V_F64: { double x; memcpy(&x, (const char *)data + 8 * i, 8); return x; }
    default: return 0;
    }
}

static bool vtype_numeric(lmq_vtype t)
{
    return t <= LMQ_V_F32 || t == LMQ_V_U64 || t == LMQ_V_I64 || t == LMQ_V_F64;
}

static lmq_status load_tokens(lmq_vocab *v, const lmq_meta *m)
{
    lmq_vtype et;
    uint64_t n;
    const void *data;
    lmq_status s = lmq_meta_get_arr(m, "tokenizer.ggml.tokens", &et, &n, &data);
    if (s) return s;
    if (et != LMQ_V_STRING) return lmq_error(LMQ_ERR_FORMAT, "tokenizer.ggml.tokens: not a string array");
    if (n == 0 || n > MAX_TOKENS)
        return lmq_error(LMQ_ERR_FORMAT, "tokenizer.ggml.tokens: %llu tokens (1..%u allowed)", (unsigned long long)n, MAX_TOKENS);
    const lmq_str *strs = data;
    v->n_tokens = (int32_t)n;
    v->tok = calloc((size_t)n, sizeof *v->tok);
    if (!v->tok) return lmq_error(LMQ_ERR_NOMEM, "tokenizer: %llu tokens", (unsigned long long)n);

    /* empty tokens get the text "[EMPTY_i]" as in llama.cpp */
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (strs[i].len > MAX_TOKEN_BYTES)
            return lmq_error(LMQ_ERR_FORMAT, "tokenizer.ggml.tokens: token %llu is %llu bytes long", (unsigned long long)i,
                             (unsigned long long)strs[i].len);
        total += strs[i].len ? strs[i].len : 24;
    }
    v->text = malloc((size_t)total + 1);
    if (!v->text) return lmq_error(LMQ_ERR_NOMEM, "tokenizer: token text");
    size_t pos = 0;
    for (uint64_t i = 0; i < n; i++) {
        v->tok[i].off = (uint32_t)pos;
        if (strs[i].len) {
            memcpy(v->text + pos, strs[i].ptr, (size_t)strs[i].len);
            v->tok[i].len = (uint32_t)strs[i].len;
        } else {
            v->tok[i].len = (uint32_t)snprintf(v->text + pos, 25, "[EMPTY_%llu]", (unsigned long long)i);
        }
        pos += v->tok[i].len;
        v->tok[i].type = LMQ_TOKEN_NORMAL;
        v->tok[i].attr = TOK_ATTR_NORMAL;
    }
    if (pos > UINT32_MAX) return lmq_error(LMQ_ERR_LIMIT, "tokenizer.ggml.tokens: %zu bytes of token text", pos);

    /* scores: f32 (or i32) array, at least n_tokens long */
    const lmq_value *sv = lmq_meta_find(m, "tokenizer.ggml.scores");
    if (sv) {
        if (sv->type != LMQ_V_ARRAY || !vtype_numeric(sv->arr.elem))
            return lmq_error(LMQ_ERR_FORMAT, "tokenizer.ggml.scores: not a numeric array");
        if (sv->arr.n < n)
            return lmq_error(LMQ_ERR_FORMAT, "tokenizer.ggml.scores: %llu scores for %llu tokens",
                             (unsigned long long)sv->arr.n, (unsigned long long)n);
        for (uint64_t i = 0; i < n; i++) v->tok[i].score = (float)arr_num(sv->arr.elem, sv->arr.data, i);
    }
    const lmq_value *tv = lmq_meta_find(m, "tokenizer.ggml.token_type");
    if (tv) {
        if (tv->type != LMQ_V_ARRAY || !vtype_numeric(tv->arr.elem) || tv->arr.elem == LMQ_V_F32 ||
            tv->arr.elem == LMQ_V_F64)
            return lmq_error(LMQ_ERR_FORMAT, "tokenizer.ggml.token_type: not an integer array");
        if (tv->arr.n < n)
            return lmq_error(LMQ_ERR_FORMAT, "tokenizer.ggml.token_type: %llu types for %llu tokens",
                             (unsigned long long)tv->arr.n, (unsigned long long)n);
        static const uint16_t attr_of[LMQ_TOKEN_TYPE_COUNT] = {
            [LMQ_TOKEN_UNDEFINED] = 0,
            [LMQ_TOKEN_NORMAL] = TOK_ATTR_NORMAL,
            [LMQ_TOKEN_UNKNOWN] = TOK_ATTR_UNKNOWN,
            [LMQ_TOKEN_CONTROL] = TOK_ATTR_CONTROL,
            [LMQ_TOKEN_USER_DEFINED] = TOK_ATTR_USER_DEFINED,
            [LMQ_TOKEN_UNUSED] = TOK_ATTR_UNUSED,
            [LMQ_TOKEN_BYTE] = TOK_ATTR_BYTE,
        };
        for (uint64_t i = 0; i < n; i++) {
            double t = arr_num(tv->arr.elem, tv->arr.data, i);
            int ti = (t >= 0 && t < LMQ_TOKEN_TYPE_COUNT) ? (int)t : LMQ_TOKEN_UNDEFINED;
            v->tok[i].type = (uint8_t)ti;
            v->tok[i].attr = attr_of[ti];
        }
    }
    return LMQ_OK;
}

static int32_t find_str(const lmq_vocab *v, const char *s)
{
    return tok_map_find(v, s, strlen(s));
}

/* The first token of `names` that exists (priority = list order). */
static int32_t find_first(const lmq_vocab *v, const char *const *names)
{
    for (size_t i = 0; names[i]; i++) {
        int32_t id = find_str(v, names[i]);
        if (id >= 0) return id;
    }
    return -1;
}

static const char *const EOT_NAMES[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                        "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
                                        "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>",
                                        "<end_of_utterance>", NULL};
static const char *const EOG_NAMES[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>",
                                        "<|flush|>", "<|calls|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
                                        "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
                                        "<end_of_utterance>",
                                        "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>",
                                        "<turn|>", "<|tool_response>", /* Gemma 4 */
                                        NULL};
/* fill-in-the-middle pad / repo / file-separator tokens also end generation */
static const char *const FIM_PAD_NAMES[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL};
static const char *const FIM_REP_NAMES[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL};
static const char *const FIM_SEP_NAMES[] = {"<|file_sep|>", NULL};

static void promote_control(lmq_vocab *v, int32_t id)
{
    if (id >= 0) v->tok[id].attr |= TOK_ATTR_CONTROL;
}

/* Gemma 4: a run of newlines that is a token is always that token (in the
 * Hugging Face files the runs are added tokens, split off before the
 * merges; llama.cpp's GGUFs type them normal and special-case such runs),
 * so they are matched whole, as user-defined tokens are. */
static void promote_newline_runs(lmq_vocab *v)
{
    for (int32_t id = 0; id < v->n_tokens; id++) {
        tok_entry *t = &v->tok[id];
        if (!(t->attr & TOK_ATTR_NORMAL) || t->len == 0) continue;
        const char *x = v->text + t->off;
        uint32_t i = 0;
        while (i < t->len && x[i] == '\n') i++;
        if (i == t->len) t->attr = (uint16_t)((t->attr & ~TOK_ATTR_NORMAL) | TOK_ATTR_USER_DEFINED);
    }
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static lmq_status build_eog(lmq_vocab *v, const lmq_meta *m)
{
    size_t cap = 64, n = 0;
    int32_t *e = malloc(cap * sizeof *e);
    if (!e) return lmq_error(LMQ_ERR_NOMEM, "tokenizer: eog list");
#define ADD(id_)                                                                      \
    do {                                                                              \
        int32_t id__ = (id_);                                                         \
        if (id__ >= 0 && id__ < v->n_tokens) {                                        \
            if (n == cap) {                                                           \
                int32_t *ne = realloc(e, 2 * cap * sizeof *e);                        \
                if (!ne) { free(e); return lmq_error(LMQ_ERR_NOMEM, "tokenizer: eog list"); } \
                e = ne;                                                               \
                cap *= 2;                                                             \
            }                                                                         \
            e[n++] = id__;                                                            \
        }                                                                             \
    } while (0)
    int32_t fim[3] = {find_first(v, FIM_PAD_NAMES), find_first(v, FIM_REP_NAMES), find_first(v, FIM_SEP_NAMES)};
    for (int i = 0; i < 3; i++) {
        promote_control(v, fim[i]);
        ADD(fim[i]);
    }
    for (size_t i = 0; EOG_NAMES[i]; i++) {
        int32_t id = find_str(v, EOG_NAMES[i]);
        promote_control(v, id);
        ADD(id);
    }
    ADD(v->eos);
    ADD(v->eot);
    ADD(v->eom);
    lmq_vtype et;
    uint64_t cnt;
    const void *data;
    if (lmq_meta_get_arr(m, "tokenizer.lmq.eog_token_ids", &et, &cnt, &data) == LMQ_OK && vtype_numeric(et)) {
        for (uint64_t i = 0; i < cnt && i < 4096; i++) {
            double x = arr_num(et, data, i);
            if (x >= 0 && x < v->n_tokens) ADD((int32_t)x);
        }
    }
    lmq_error_clear();
#undef ADD
    qsort(e, n, sizeof *e, cmp_i32);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (k == 0 || e[k - 1] != e[i]) e[k++] = e[i];
    /* o200k_harmony / solar-open: "<|end|>" is not an end of generation when
     * "<|return|>"/"<|call|>" (or "<|calls|>"/"<|flush|>") exist (llama.cpp). */
    int32_t end_id = find_str(v, "<|end|>");
    bool has_ret = find_str(v, "<|return|>") >= 0, has_call = find_str(v, "<|call|>") >= 0 || find_str(v, "<|calls|>") >= 0;
    bool has_flush = find_str(v, "<|flush|>") >= 0;
    if (end_id >= 0 && has_call && (has_ret || has_flush)) {
        size_t j = 0;
        for (size_t i = 0; i < k; i++)
            if (e[i] != end_id) e[j++] = e[i];
        k = j;
        v->tok[end_id].attr = TOK_ATTR_USER_DEFINED;
    }
    v->eog = e;
    v->n_eog = k;
    return LMQ_OK;
}

typedef struct { int32_t id; uint32_t len; } len_id;
static int cmp_len_desc(const void *a, const void *b)
{
    const len_id *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? 1 : -1;
    return (x->id > y->id) - (x->id < y->id);
}

static lmq_status build_special(lmq_vocab *v)
{
    size_t n = 0;
    for (int32_t id = 0; id < v->n_tokens; id++)
        if (v->tok[id].attr & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN)) n++;
    len_id *tmp = malloc((n ? n : 1) * sizeof *tmp);
    v->special = malloc((n ? n : 1) * sizeof *v->special);
    if (!tmp || !v->special) {
        free(tmp);
        return lmq_error(LMQ_ERR_NOMEM, "tokenizer: special tokens");
    }
    size_t k = 0;
    for (int32_t id = 0; id < v->n_tokens; id++)
        if (v->tok[id].attr & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN))
            tmp[k++] = (len_id){id, v->tok[id].len};
    qsort(tmp, n, sizeof *tmp, cmp_len_desc);
    for (size_t i = 0; i < n; i++) v->special[i] = tmp[i].id;
    v->n_special = n;
    free(tmp);

    /* the trie: at most one node per byte of special-token text, plus root */
    size_t cap = 1;
    for (size_t i = 0; i < n; i++) cap += v->tok[v->special[i]].len;
    v->trie = malloc(cap * sizeof *v->trie);
    if (!v->trie) return lmq_error(LMQ_ERR_NOMEM, "tokenizer: special tokens");
    v->trie[0] = (spec_node){-1, -1, -1, 0};
    v->n_trie = 1;
    for (size_t i = 0; i < n; i++) {
        const tok_entry *t = &v->tok[v->special[i]];
        int32_t node = 0;
        for (uint32_t j = 0; j < t->len; j++) {
            uint8_t b = (uint8_t)v->text[t->off + j];
            int32_t c = v->trie[node].child;
            while (c >= 0 && v->trie[c].byte != b) c = v->trie[c].sibling;
            if (c < 0) {
                c = (int32_t)v->n_trie++;
                v->trie[c] = (spec_node){-1, v->trie[node].child, -1, b};
                v->trie[node].child = c;
            }
            node = c;
        }
        if (v->trie[node].special < 0) v->trie[node].special = (int32_t)i;
    }
    return LMQ_OK;
}

/* lstrip/rstrip attributes: tokenizer.lmq.lstrip_ids / rstrip_ids, and
 * llama.cpp's rule for Phi-3 vocabs (recognised by general.name). */
static void apply_strip_attrs(lmq_vocab *v, const lmq_meta *m)
{
    static const char *const keys[2] = {"tokenizer.lmq.lstrip_ids", "tokenizer.lmq.rstrip_ids"};
    static const uint16_t bits[2] = {TOK_ATTR_LSTRIP, TOK_ATTR_RSTRIP};
    bool any = false;
    for (int k = 0; k < 2; k++) {
        lmq_vtype et;
        uint64_t cnt;
        const void *data;
        if (lmq_meta_get_arr(m, keys[k], &et, &cnt, &data) != LMQ_OK || !vtype_numeric(et)) continue;
        any = true;
        for (uint64_t i = 0; i < cnt; i++) {
            double x = arr_num(et, data, i);
            if (x >= 0 && x < v->n_tokens) v->tok[(int32_t)x].attr |= bits[k];
        }
    }
    lmq_error_clear();
    if (any) return;
    const char *name;
    uint64_t nlen;
    if (lmq_meta_get_str(m, "general.name", &name, &nlen) != LMQ_OK) {
        lmq_error_clear();
        return;
    }
    char low[128];
    size_t l = nlen < sizeof low - 1 ? (size_t)nlen : sizeof low - 1;
    for (size_t i = 0; i < l; i++) low[i] = (char)tolower((unsigned char)name[i]);
    low[l] = 0;
    if (!strstr(low, "phi-3") && !strstr(low, "phi3")) return;
    for (size_t i = 0; i < v->n_special; i++) v->tok[v->special[i]].attr |= TOK_ATTR_RSTRIP;
    int32_t id = find_str(v, "</s>");
    if (id >= 0) v->tok[id].attr |= TOK_ATTR_RSTRIP;
    static const char *const keep[] = {"<unk>", "<s>", "<|endoftext|>"};
    for (int i = 0; i < 3; i++) {
        id = find_str(v, keep[i]);
        if (id >= 0) v->tok[id].attr &= (uint16_t)~TOK_ATTR_RSTRIP;
    }
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The byte of a "<0xNN>" token, or -1. */
static int token_byte(const lmq_vocab *v, int32_t id)
{
    const char *t = v->text + v->tok[id].off;
    if (v->tok[id].len != 6 || memcmp(t, "<0x", 3) || t[5] != '>') return -1;
    int hi = hexval((unsigned char)t[3]), lo = hexval((unsigned char)t[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* Decoded piece of every token (llama.cpp's token_to_piece with
 * special = true), concatenated into v->pieces. */
static lmq_status build_pieces(lmq_vocab *v)
{
    size_t total = 0;
    for (int32_t id = 0; id < v->n_tokens; id++) total += v->tok[id].len;
    v->pieces = malloc(total + 1);
    if (!v->pieces) return lmq_error(LMQ_ERR_NOMEM, "tokenizer: pieces");
    size_t pos = 0;
    v->max_piece = 0;
    for (int32_t id = 0; id < v->n_tokens; id++) {
        tok_entry *t = &v->tok[id];
        const char *src = v->text + t->off;
        char *dst = v->pieces + pos;
        size_t n = 0;
        if (t->attr & (TOK_ATTR_UNKNOWN | TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED)) {
            memcpy(dst, src, t->len);
            n = t->len;
        } else if (t->attr & TOK_ATTR_NORMAL) {
            if (v->type == LMQ_VOCAB_SPM || v->type == LMQ_VOCAB_GEMMA4) {
                for (size_t i = 0; i < t->len;) {
                    if (i + 3 <= t->len && !memcmp(src + i, "\xe2\x96\x81", 3)) {
                        dst[n++] = ' ';
                        i += 3;
                    } else {
                        dst[n++] = src[i++];
                    }
                }
            } else {
                n = bpe_decode_text(src, t->len, dst);
            }
        } else if (t->attr & TOK_ATTR_BYTE) {
            int b = token_byte(v, id);
            if (b >= 0) dst[n++] = (char)b;
        }
        t->poff = (uint32_t)pos;
        t->plen = (uint32_t)n;
        pos += n;
        if (n > v->max_piece) v->max_piece = n;
    }
    return LMQ_OK;
}

/* Scores as dense integer ranks (higher score = smaller rank; equal scores
 * share a rank; NaN ranks last), so the merge queue compares integers. */
typedef struct score_id { float score; int32_t id; } score_id;
static int cmp_score_desc(const void *a, const void *b)
{
    float x = ((const score_id *)a)->score, y = ((const score_id *)b)->score;
    bool xn = x != x, yn = y != y;
    if (xn || yn) return xn - yn;
    return (x < y) - (x > y);
}

static lmq_status build_spm_rank(lmq_vocab *v)
{
    score_id *order = malloc((size_t)v->n_tokens * sizeof *order);
    v->spm_rank = malloc((size_t)v->n_tokens * sizeof *v->spm_rank);
    if (!order || !v->spm_rank) {
        free(order);
        return lmq_error(LMQ_ERR_NOMEM, "tokenizer: score ranks");
    }
    for (int32_t i = 0; i < v->n_tokens; i++) order[i] = (score_id){v->tok[i].score, i};
    qsort(order, (size_t)v->n_tokens, sizeof *order, cmp_score_desc);
    uint32_t r = 0;
    for (int32_t i = 0; i < v->n_tokens; i++) {
        if (i > 0 && !(order[i - 1].score == order[i].score)) r++;
        v->spm_rank[order[i].id] = r;
    }
    free(order);
    return LMQ_OK;
}

static void find_byte_tokens(lmq_vocab *v)
{
    for (int b = 0; b < 256; b++) {
        v->byte_tok[b] = -1;
        if (v->type == LMQ_VOCAB_GEMMA4) {
            char buf[8];
            snprintf(buf, sizeof buf, "<0x%02X>", b);
            v->byte_tok[b] = find_str(v, buf);
        } else if (v->type == LMQ_VOCAB_SPM) {
            char buf[8];
            snprintf(buf, sizeof buf, "<0x%02X>", b);
            int32_t id = find_str(v, buf);
            if (id < 0) {
                char c = (char)b;
                id = tok_map_find(v, &c, 1);
            }
            v->byte_tok[b] = id;
        } else {
            char c[2];
            size_t n = bpe_byte_char((uint8_t)b, c);
            v->byte_tok[b] = tok_map_find(v, c, n);
        }
    }
}

lmq_status lmq_vocab_load(const lmq_meta *meta, lmq_vocab **out)
{
    if (!meta || !out) return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_vocab_load: NULL argument");
    *out = NULL;
    const char *model;
    uint64_t mlen;
    lmq_status s = lmq_meta_get_str(meta, "tokenizer.ggml.model", &model, &mlen);
    if (s) return s;
    lmq_vocab *v = calloc(1, sizeof *v);
    if (!v) return lmq_error(LMQ_ERR_NOMEM, "tokenizer: vocab");
    v->bos = v->eos = v->eot = v->eom = v->unk = v->pad = v->nl = -1;
    bool add_bos = false;
    if (!strcmp(model, "llama")) {
        v->type = LMQ_VOCAB_SPM;
        snprintf(v->pre, sizeof v->pre, "default");
        v->add_space_prefix = true;
        v->byte_fallback = true;
        add_bos = true;
    } else if (!strcmp(model, "gpt2")) {
        v->type = LMQ_VOCAB_BPE;
        const char *pre;
        uint64_t plen;
        if (lmq_meta_get_str(meta, "tokenizer.ggml.pre", &pre, &plen) == LMQ_OK && plen < sizeof v->pre)
            snprintf(v->pre, sizeof v->pre, "%s", pre);
        else
            snprintf(v->pre, sizeof v->pre, "default");
        lmq_error_clear();
        v->clean_spaces = true;
    } else if (!strcmp(model, "gemma4")) {
        /* llama.cpp's "gemma4": Hugging Face's Gemma BPE (Replace(" ", U+2581)
         * normalizer, merges by rank over raw UTF-8, <0xNN> byte fallback);
         * llama.cpp always adds BOS for it (the models degrade without) */
        v->type = LMQ_VOCAB_GEMMA4;
        snprintf(v->pre, sizeof v->pre, "gemma4");
        v->byte_fallback = true;
        add_bos = true;
    } else {
        s = lmq_error(LMQ_ERR_UNSUPPORTED, "tokenizer.ggml.model: '%s' is not supported (llama, gpt2 and gemma4 are)",
                      model);
        goto fail;
    }

    if ((s = load_tokens(v, meta))) goto fail;
    if ((s = map_build(v))) goto fail;
    if (v->type == LMQ_VOCAB_BPE) {
        if ((s = bpe_load_merges(v, meta))) goto fail;
        if ((s = bpe_setup(v, meta, &add_bos))) goto fail;
    } else if (v->type == LMQ_VOCAB_GEMMA4) {
        if ((s = bpe_load_merges(v, meta))) goto fail;
        promote_newline_runs(v);
    } else {
        v->bos = 1 < v->n_tokens ? 1 : -1;
        v->eos = 2 < v->n_tokens ? 2 : -1;
        v->unk = 0;
    }
    find_byte_tokens(v);

    meta_token_id(meta, "tokenizer.ggml.bos_token_id", v->n_tokens, &v->bos);
    meta_token_id(meta, "tokenizer.ggml.eos_token_id", v->n_tokens, &v->eos);
    meta_token_id(meta, "tokenizer.ggml.eot_token_id", v->n_tokens, &v->eot);
    meta_token_id(meta, "tokenizer.ggml.eom_token_id", v->n_tokens, &v->eom);
    meta_token_id(meta, "tokenizer.ggml.unknown_token_id", v->n_tokens, &v->unk);
    meta_token_id(meta, "tokenizer.ggml.padding_token_id", v->n_tokens, &v->pad);
    v->add_bos = add_bos;
    meta_bool(meta, "tokenizer.ggml.add_bos_token", &v->add_bos);
    if (v->type == LMQ_VOCAB_GEMMA4) v->add_bos = true; /* llama.cpp overrides a stored false too */
    meta_bool(meta, "tokenizer.ggml.add_eos_token", &v->add_eos);
    meta_bool(meta, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix);
    meta_bool(meta, "tokenizer.lmq.clean_spaces", &v->clean_spaces);
    meta_bool(meta, "tokenizer.lmq.ignore_merges", &v->ignore_merges);
    meta_bool(meta, "tokenizer.lmq.byte_fallback", &v->byte_fallback);
    {
        const char *norm;
        uint64_t nl;
        if (lmq_meta_get_str(meta, "tokenizer.lmq.normalizer", &norm, &nl) == LMQ_OK) {
            if (!strcmp(norm, "NFC")) v->nfc = true;
            else if (nl && strcmp(norm, "none")) {
                s = lmq_error(LMQ_ERR_UNSUPPORTED, "tokenizer.lmq.normalizer: '%s' is not supported (NFC is)", norm);
                goto fail;
            }
        }
        lmq_error_clear();
    }
    /* a vocabulary that asks for BOS/EOS it does not have cannot add them */
    if (v->add_bos && v->bos < 0) v->add_bos = false;
    if (v->add_eos && v->eos < 0) v->add_eos = false;

    v->eom = v->eom >= 0 ? v->eom : find_str(v, "<|eom_id|>");
    if (v->eot < 0) v->eot = find_first(v, EOT_NAMES);
    promote_control(v, v->eot);
    promote_control(v, v->eom);
    if ((s = build_eog(v, meta))) goto fail;
    if ((s = build_special(v))) goto fail;
    apply_strip_attrs(v, meta);
    if ((s = build_pieces(v))) goto fail;

    if (v->type == LMQ_VOCAB_SPM || v->type == LMQ_VOCAB_GEMMA4) {
        if (v->type == LMQ_VOCAB_SPM && (s = build_spm_rank(v))) goto fail;
        for (int b = 0; b < 128; b++) v->spm_sep[b] = true;
        v->spm_word_split = true;
        for (int32_t id = 0; id < v->n_tokens; id++) {
            const char *t = v->text + v->tok[id].off;
            uint32_t n = v->tok[id].len;
            if (n > 1)
                for (uint32_t i = 0; i < n; i++)
                    if ((unsigned char)t[i] < 128) v->spm_sep[(unsigned char)t[i]] = false;
            for (uint32_t i = 1; i + 3 <= n; i++)
                if (!memcmp(t + i, "\xe2\x96\x81", 3) && (i < 3 || memcmp(t + i - 3, "\xe2\x96\x81", 3)))
                    v->spm_word_split = false;
        }
        if (v->type == LMQ_VOCAB_GEMMA4) {
            /* a character that is no token falls back to byte tokens, which
             * merges may join to their neighbours: no separator then */
            for (int b = 0; b < 128; b++) {
                char c = (char)b;
                if (v->spm_sep[b] && tok_map_find(v, &c, 1) < 0) v->spm_sep[b] = false;
            }
            if (tok_map_find(v, "\xe2\x96\x81", 3) < 0) v->spm_word_split = false;
        }
        v->nl = v->byte_tok['\n'];
    }
    if (v->type != LMQ_VOCAB_SPM) {
        int32_t ids[8];
        size_t n = 0;
        if (lmq_tokenize(v, "\n", 1, false, false, ids, 8, &n) == LMQ_OK && n > 0) v->nl = ids[0];
        lmq_error_clear();
    }
    *out = v;
    return LMQ_OK;
fail:
    lmq_vocab_free(v);
    return s;
}

void lmq_vocab_free(lmq_vocab *v)
{
    if (!v) return;
    bpe_free(v);
    free(v->text);
    free(v->pieces);
    free(v->tok);
    free(v->map.slot_hash);
    free(v->map.slot_id);
    free(v->special);
    free(v->trie);
    free(v->eog);
    free(v->spm_rank);
    free(v);
}

/* ======================================================================
 * Accessors
 * ====================================================================== */

lmq_vocab_type lmq_vocab_type_of(const lmq_vocab *v) { return v->type; }
const char *lmq_vocab_pre(const lmq_vocab *v) { return v->pre; }
int32_t lmq_vocab_n_tokens(const lmq_vocab *v) { return v->n_tokens; }
int32_t lmq_vocab_bos(const lmq_vocab *v) { return v->bos; }
int32_t lmq_vocab_eos(const lmq_vocab *v) { return v->eos; }
int32_t lmq_vocab_eot(const lmq_vocab *v) { return v->eot; }
int32_t lmq_vocab_eom(const lmq_vocab *v) { return v->eom; }
int32_t lmq_vocab_unk(const lmq_vocab *v) { return v->unk; }
int32_t lmq_vocab_pad(const lmq_vocab *v) { return v->pad; }
int32_t lmq_vocab_nl(const lmq_vocab *v) { return v->nl; }
bool lmq_vocab_add_bos(const lmq_vocab *v) { return v->add_bos; }
bool lmq_vocab_add_eos(const lmq_vocab *v) { return v->add_eos; }
size_t lmq_vocab_max_piece_len(const lmq_vocab *v) { return v->max_piece; }
size_t lmq_vocab_n_eog(const lmq_vocab *v) { return v->n_eog; }

int32_t lmq_vocab_eog(const lmq_vocab *v, size_t i)
{
    return i < v->n_eog ? v->eog[i] : -1;
}

bool lmq_vocab_is_eog(const lmq_vocab *v, int32_t id)
{
    if (id < 0 || id >= v->n_tokens) return false;
    size_t lo = 0, hi = v->n_eog;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v->eog[mid] == id) return true;
        if (v->eog[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return false;
}

lmq_token_type lmq_vocab_token_type(const lmq_vocab *v, int32_t id)
{
    if (id < 0 || id >= v->n_tokens) return LMQ_TOKEN_UNDEFINED;
    if (v->tok[id].attr & TOK_ATTR_CONTROL) return LMQ_TOKEN_CONTROL;
    return (lmq_token_type)v->tok[id].type;
}

const char *lmq_vocab_token_text(const lmq_vocab *v, int32_t id, size_t *len)
{
    if (id < 0 || id >= v->n_tokens) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = v->tok[id].len;
    return v->text + v->tok[id].off;
}

float lmq_vocab_token_score(const lmq_vocab *v, int32_t id)
{
    return id < 0 || id >= v->n_tokens ? 0.0f : v->tok[id].score;
}

int32_t lmq_vocab_find(const lmq_vocab *v, const char *text, size_t len)
{
    return text ? tok_map_find(v, text, len) : -1;
}

/* ======================================================================
 * Tokenize: special-token partition, then per-fragment tokenizers
 * ====================================================================== */

/* A fragment is raw text [off, off+len) (id -1) or a token (id >= 0). */
typedef struct frag {
    size_t off, len;
    int32_t id;
} frag;

typedef struct frag_list {
    frag *f;
    size_t n, cap;
} frag_list;

static bool frag_push(frag_list *l, frag x)
{
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 16;
        frag *p = realloc(l->f, nc * sizeof *p);
        if (!p) return false;
        l->f = p;
        l->cap = nc;
    }
    l->f[l->n++] = x;
    return true;
}

static bool is_space_c(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* Marks in present[] the special tokens that occur anywhere in the text
 * (one pass over the text, walking the trie from every position). */
static void find_present(const lmq_vocab *v, const char *text, size_t len, bool *present)
{
    const spec_node *tr = v->trie;
    if (tr[0].child < 0) return;
    for (size_t i = 0; i < len; i++) {
        int32_t node = 0;
        for (size_t k = i; k < len; k++) {
            uint8_t b = (uint8_t)text[k];
            int32_t c = tr[node].child;
            while (c >= 0 && tr[c].byte != b) c = tr[c].sibling;
            if (c < 0) break;
            node = c;
            if (tr[node].special >= 0) present[tr[node].special] = true;
        }
    }
}

/* Splits the raw fragments of `in` around every occurrence of special token
 * sid, into `out`. */
static bool split_special(const lmq_vocab *v, const char *text, int32_t sid, const frag_list *in, frag_list *out)
{
    const tok_entry *t = &v->tok[sid];
    const char *stext = v->text + t->off;
    size_t slen = t->len;
    out->n = 0;
    for (size_t fi = 0; fi < in->n; fi++) {
        frag f = in->f[fi];
        if (f.id >= 0 || f.len < slen) {
            if (!frag_push(out, f)) return false;
            continue;
        }
        size_t base = f.off, blen = f.len;
        for (;;) {
            const char *hit = blen >= slen ? memmem(text + base, blen, stext, slen) : NULL;
            if (!hit) {
                if (blen > 0 && !frag_push(out, (frag){base, blen, -1})) return false;
                break;
            }
            size_t match = (size_t)(hit - text);
            size_t left_len = match - base;
            if (t->attr & TOK_ATTR_LSTRIP)
                while (left_len > 0 && is_space_c(text[base + left_len - 1])) left_len--;
            if (left_len > 0 && !frag_push(out, (frag){base, left_len, -1})) return false;
            if (!frag_push(out, (frag){0, 0, sid})) return false;
            size_t right_off = match + slen, right_len = base + blen - right_off;
            if (t->attr & TOK_ATTR_RSTRIP)
                while (right_len > 0 && is_space_c(text[right_off])) right_off++, right_len--;
            base = right_off;
            blen = right_len;
        }
    }
    return true;
}

/* llama.cpp's tokenizer_st_partition: for every special token, longest
 * first, every raw fragment is split around its occurrences. Control and
 * unknown tokens only take part when parse_special is set. Tokens that do
 * not occur in the text are skipped (found in one pass with the trie); each
 * pass rebuilds the list, so the cost is linear in the fragments. */
static lmq_status partition(const lmq_vocab *v, const char *text, size_t len, bool parse_special, frag_list *l)
{
    l->n = 0;
    if (len == 0) return LMQ_OK;
    if (!frag_push(l, (frag){0, len, -1})) return lmq_error(LMQ_ERR_NOMEM, "tokenize: fragments");
    if (v->n_special == 0) return LMQ_OK;
    bool *present = calloc(v->n_special, sizeof *present);
    if (!present) return lmq_error(LMQ_ERR_NOMEM, "tokenize: special tokens");
    find_present(v, text, len, present);
    frag_list tmp = {0};
    lmq_status s = LMQ_OK;
    for (size_t si = 0; si < v->n_special; si++) {
        int32_t sid = v->special[si];
        if (!present[si]) continue;
        if (!parse_special && (v->tok[sid].attr & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN))) continue;
        if (!split_special(v, text, sid, l, &tmp)) {
            s = lmq_error(LMQ_ERR_NOMEM, "tokenize: fragments");
            break;
        }
        frag_list x = *l;
        *l = tmp;
        tmp = x;
    }
    free(tmp.f);
    free(present);
    return s;
}

/* Escapes spaces as U+2581 and prepends the dummy prefix (SentencePiece). */
static char *spm_escape(const char *s, size_t n, bool prefix, size_t *out_len)
{
    size_t spaces = prefix ? 1 : 0;
    for (size_t i = 0; i < n; i++) spaces += s[i] == ' ';
    if (n > (SIZE_MAX - 1) / 3) return NULL;
    char *buf = malloc(n + 2 * spaces + 1);
    if (!buf) return NULL;
    size_t k = 0;
    if (prefix) { memcpy(buf, "\xe2\x96\x81", 3); k = 3; }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') { memcpy(buf + k, "\xe2\x96\x81", 3); k += 3; }
        else buf[k++] = s[i];
    }
    *out_len = k;
    return buf;
}

static lmq_status tokenize_fragment(const lmq_vocab *v, const char *s, size_t n, bool prefix, tok_out *o)
{
    char *nfc = NULL;
    if (v->nfc && !tok_nfc_quick(s, n)) {
        size_t nn;
        nfc = tok_nfc(s, n, &nn);
        if (!nfc) return lmq_error(LMQ_ERR_NOMEM, "tokenize: NFC of %zu bytes", n);
        s = nfc;
        n = nn;
    }
    lmq_status st;
    if (v->type == LMQ_VOCAB_SPM) {
        size_t el;
        char *esc = spm_escape(s, n, prefix, &el);
        if (!esc) {
            free(nfc);
            return lmq_error(LMQ_ERR_NOMEM, "tokenize: %zu bytes", n);
        }
        st = spm_tokenize(v, esc, el, o);
        free(esc);
    } else if (v->type == LMQ_VOCAB_GEMMA4) {
        size_t el;
        char *esc = spm_escape(s, n, false, &el);
        if (!esc) {
            free(nfc);
            return lmq_error(LMQ_ERR_NOMEM, "tokenize: %zu bytes", n);
        }
        st = ubpe_tokenize(v, esc, el, o);
        free(esc);
    } else if (v->add_space_prefix && prefix && (n == 0 || s[0] != ' ')) {
        char *b = malloc(n + 1);
        if (!b) {
            free(nfc);
            return lmq_error(LMQ_ERR_NOMEM, "tokenize: %zu bytes", n);
        }
        b[0] = ' ';
        memcpy(b + 1, s, n);
        st = bpe_tokenize(v, b, n + 1, o);
        free(b);
    } else {
        st = bpe_tokenize(v, s, n, o);
    }
    free(nfc);
    return st;
}

static lmq_status tokenize_impl(const lmq_vocab *v, const char *text, size_t len, bool add_special,
                                bool parse_special, tok_out *o)
{
    frag_list l = {0};
    lmq_status s = partition(v, text, len, parse_special, &l);
    if (s) goto out;
    bool add_bos = add_special && v->add_bos;
    /* no double BOS: the text already starts with the BOS token */
    if (add_bos && l.n > 0 && l.f[0].id == v->bos) add_bos = false;
    if (add_bos) tok_out_push(o, v->bos);
    /* SentencePiece: the dummy prefix goes before the first raw fragment
     * and every raw fragment that follows a special token (llama.cpp);
     * byte-level BPE with add_prefix_space: before the first one only. */
    bool prev_special = true;
    for (size_t i = 0; i < l.n && !o->oom; i++) {
        if (l.f[i].id >= 0) {
            tok_out_push(o, l.f[i].id);
            prev_special = true;
            continue;
        }
        bool prefix = v->type == LMQ_VOCAB_SPM ? v->add_space_prefix && prev_special : i == 0;
        s = tokenize_fragment(v, text + l.f[i].off, l.f[i].len, prefix, o);
        if (s) goto out;
        prev_special = false;
    }
    if (add_special && v->add_eos) tok_out_push(o, v->eos);
    if (o->oom) s = lmq_error(LMQ_ERR_NOMEM, "tokenize: output of %zu tokens", o->n);
out:
    free(l.f);
    return s;
}

lmq_status lmq_tokenize(const lmq_vocab *v, const char *text, size_t len, bool add_special,
                        bool parse_special, int32_t *out, size_t cap, size_t *n_out)
{
    if (n_out) *n_out = 0;
    if (!v || (!text && len) || (!out && cap) || !n_out)
        return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_tokenize: NULL argument");
    tok_out o = {0};
    lmq_status s = tokenize_impl(v, text ? text : "", len, add_special, parse_special, &o);
    if (s == LMQ_OK) {
        *n_out = o.n;
        size_t k = o.n < cap ? o.n : cap;
        if (k) memcpy(out, o.ids, k * sizeof *out);
        if (o.n > cap) s = lmq_error(LMQ_ERR_LIMIT, "tokenize: %zu tokens do not fit in %zu", o.n, cap);
    }
    free(o.ids);
    return s;
}

lmq_status lmq_tokenize_alloc(const lmq_vocab *v, const char *text, size_t len, bool add_special,
                              bool parse_special, int32_t **out, size_t *n_out)
{
    if (out) *out = NULL;
    if (n_out) *n_out = 0;
    if (!v || (!text && len) || !out || !n_out) return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_tokenize_alloc: NULL argument");
    tok_out o = {0};
    lmq_status s = tokenize_impl(v, text ? text : "", len, add_special, parse_special, &o);
    if (s) {
        free(o.ids);
        return s;
    }
    *out = o.ids;
    *n_out = o.n;
    return LMQ_OK;
}

/* ======================================================================
 * Detokenize
 * ====================================================================== */

const char *lmq_token_to_piece(const lmq_vocab *v, int32_t id, bool special, size_t *len)
{
    if (!v || id < 0 || id >= v->n_tokens) {
        if (len) *len = 0;
        return NULL;
    }
    const tok_entry *t = &v->tok[id];
    if (!special && (t->attr & (TOK_ATTR_UNKNOWN | TOK_ATTR_CONTROL))) {
        if (len) *len = 0;
        return v->pieces + t->poff;
    }
    if (len) *len = t->plen;
    return v->pieces + t->poff;
}

/* llama.cpp's clean-up passes (" ?" " !" " ." " ,", " ' ", " 's" " 'm"
 * " 're" " 've"); in place, returns the new length. */
static size_t clean_spaces(char *t, size_t n)
{
    if (n == 0) return 0;
    size_t k = 1;
    for (size_t i = 1; i < n; i++) {
        char x = t[i];
        if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) k--;
        t[k++] = x;
    }
    n = k;
    k = 1;
    for (size_t i = 1; i < n; i++) {
        char x = t[i];
        if (x == '\'' && i + 1 < n && t[i - 1] == ' ' && t[i + 1] == ' ') {
            k--;
            t[++i] = 0; /* the next space is dropped: its slot is skipped */
            t[k++] = x;
            continue;
        }
        t[k++] = x;
    }
    n = k;
    k = 1;
    for (size_t i = 1; i < n; i++) {
        char x = t[i];
        if (t[i - 1] == ' ' && x == '\'' && i + 1 < n) {
            char x1 = t[i + 1];
            if (x1 == 's' || x1 == 'm') k--;
            else if (i + 2 < n && ((x1 == 'r' && t[i + 2] == 'e') || (x1 == 'v' && t[i + 2] == 'e'))) k--;
        }
        t[k++] = x;
    }
    return k;
}

static lmq_status detok_impl(const lmq_vocab *v, const int32_t *ids, size_t n, bool remove_special,
                             bool unparse_special, char **buf, size_t *len)
{
    bool remove_space = v->add_space_prefix;
    /* Dropping the BOS keeps the dummy-prefix rule for the first piece, so
     * that detokenize(tokenize(x)) == x (Hugging Face's decode with
     * skip_special_tokens; llama.cpp keeps the space here). */
    if (remove_special && v->add_bos && n > 0 && ids[0] == v->bos) {
        ids++;
        n--;
    }
    if (remove_special && v->add_eos && n > 0 && ids[n - 1] == v->eos) n--;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= v->n_tokens)
            return lmq_error(LMQ_ERR_INVALID_ARG, "detokenize: id %d at position %zu is out of range (vocab of %d)",
                             ids[i], i, v->n_tokens);
        total += v->tok[ids[i]].plen;
    }
    char *b = malloc(total + 1);
    if (!b) return lmq_error(LMQ_ERR_NOMEM, "detokenize: %zu bytes", total);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t pl;
        const char *p = lmq_token_to_piece(v, ids[i], unparse_special, &pl);
        if (remove_space && pl > 0 && p[0] == ' ') p++, pl--;
        remove_space = false;
        memcpy(b + k, p, pl);
        k += pl;
    }
    if (v->clean_spaces) k = clean_spaces(b, k);
    b[k] = 0;
    *buf = b;
    *len = k;
    return LMQ_OK;
}

lmq_status lmq_detokenize(const lmq_vocab *v, const int32_t *ids, size_t n, bool remove_special,
                          bool unparse_special, char *out, size_t cap, size_t *n_out)
{
    if (n_out) *n_out = 0;
    if (!v || (!ids && n) || (!out && cap) || !n_out) return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_detokenize: NULL argument");
    char *b;
    size_t len;
    lmq_status s = detok_impl(v, ids, n, remove_special, unparse_special, &b, &len);
    if (s) return s;
    *n_out = len;
    if (cap && len) memcpy(out, b, len < cap ? len : cap);
    free(b);
    if (len > cap) return lmq_error(LMQ_ERR_LIMIT, "detokenize: %zu bytes do not fit in %zu", len, cap);
    return LMQ_OK;
}

lmq_status lmq_detokenize_alloc(const lmq_vocab *v, const int32_t *ids, size_t n, bool remove_special,
                                bool unparse_special, char **out, size_t *n_out)
{
    if (out) *out = NULL;
    if (n_out) *n_out = 0;
    if (!v || (!ids && n) || !out || !n_out) return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_detokenize_alloc: NULL argument");
    return detok_impl(v, ids, n, remove_special, unparse_special, out, n_out);
}

/* ======================================================================
 * Streaming decoder
 * ====================================================================== */

void lmq_detok_stream_init(lmq_detok_stream *s, const lmq_vocab *v, bool unparse_special, bool at_text_start)
{
    memset(s, 0, sizeof *s);
    s->vocab = v;
    s->unparse_special = unparse_special;
    s->strip_space = at_text_start && v && v->add_space_prefix;
}

/* Length of the longest prefix of b[0..n) that holds no incomplete UTF-8
 * sequence at its end: a trailing lead byte whose continuation bytes have
 * not all arrived yet is held back; anything that can never become valid is
 * released. */
static size_t utf8_complete_prefix(const unsigned char *b, size_t n)
{
    size_t i = n, back = 0;
    while (i > 0 && back < 3 && (b[i - 1] & 0xc0) == 0x80) i--, back++;
    if (i == 0) return n;
    unsigned c = b[i - 1];
    size_t need = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
    if (need == 0) return n;             /* ASCII or invalid lead: nothing to wait for */
    size_t have = back + 1;
    if (have >= need) return n;           /* complete (validity is not our business) */
    /* could the bytes so far still start a valid sequence? */
    if (have >= 2) {
        unsigned c1 = b[i];
        if ((c == 0xe0 && c1 < 0xa0) || (c == 0xed && c1 > 0x9f) || (c == 0xf0 && c1 < 0x90) ||
            (c == 0xf4 && c1 > 0x8f))
            return n;
    }
    return i - 1;
}

lmq_status lmq_detok_stream_push(lmq_detok_stream *s, int32_t id, char *out, size_t cap, size_t *n_out)
{
    if (n_out) *n_out = 0;
    if (!s || !s->vocab || (!out && cap) || !n_out) return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_detok_stream_push: NULL argument");
    const lmq_vocab *v = s->vocab;
    if (id < 0 || id >= v->n_tokens)
        return lmq_error(LMQ_ERR_INVALID_ARG, "detokenize: id %d is out of range (vocab of %d)", id, v->n_tokens);
    size_t pl;
    const char *p = lmq_token_to_piece(v, id, s->unparse_special, &pl);
    bool strip = s->strip_space && pl > 0;
    if (strip && p[0] == ' ') p++, pl--;
    if (s->n_pend + pl > cap) return lmq_error(LMQ_ERR_LIMIT, "detokenize: stream chunk needs %zu bytes", s->n_pend + pl);
    if (strip || pl > 0) s->strip_space = false;
    if (s->n_pend) memcpy(out, s->pend, s->n_pend);
    if (pl) memcpy(out + s->n_pend, p, pl);
    size_t n = s->n_pend + pl;
    size_t k = utf8_complete_prefix((const unsigned char *)out, n);
    s->n_pend = (uint8_t)(n - k);
    memcpy(s->pend, out + k, n - k);
    *n_out = k;
    return LMQ_OK;
}

lmq_status lmq_detok_stream_flush(lmq_detok_stream *s, char *out, size_t cap, size_t *n_out)
{
    if (n_out) *n_out = 0;
    if (!s || (!out && cap) || !n_out) return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_detok_stream_flush: NULL argument");
    if (s->n_pend > cap) return lmq_error(LMQ_ERR_LIMIT, "detokenize: stream flush needs %u bytes", s->n_pend);
    if (s->n_pend) memcpy(out, s->pend, s->n_pend);
    *n_out = s->n_pend;
    s->n_pend = 0;
    return LMQ_OK;
}
