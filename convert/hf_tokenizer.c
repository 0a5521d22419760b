/* Hugging Face tokenizer files -> GGUF-named tokenizer metadata.
 *
 *   tokenizer.json        byte-level BPE: vocab, merges ("a b" strings or
 *                         ["a", "b"] pairs), added tokens, the pre-tokenizer
 *                         as a list of regexes, the normalizer; or Gemma's
 *                         BPE (spaces escaped to U+2581, merges over raw
 *                         UTF-8: tokenizer model "gemma4");
 *   tokenizer.model       SentencePiece ModelProto (protobuf wire format,
 *                         parsed here): pieces, scores, types, trainer and
 *                         normalizer flags;
 *   tokenizer_config.json chat_template (string or a list of named
 *                         templates), add_bos_token / add_eos_token,
 *                         bos/eos/unk/pad token strings, added_tokens_decoder,
 *                         clean_up_tokenization_spaces;
 *   config.json           vocab_size (the vocabulary is padded to it) and
 *                         *_token_id fallbacks;
 *   generation_config.json eos_token_id (int or list): end-of-generation ids.
 *
 * Token types and added-token handling follow llama.cpp's
 * convert_hf_to_gguf.py so that a converted vocabulary equals the one in a
 * GGUF made by llama.cpp; keys GGUF has no name for are tokenizer.lmq.*
 * (docs/TOKENIZER.md). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "hf_tokenizer_internal.h"
#include "lmq_convert.h"

#define MAX_VOCAB (1u << 24)
#define MAX_HOLES (1u << 16) /* ids of a tokenizer.json without a token */
#define MAX_JSON_BYTES ((size_t)1 << 30)
#define MAX_MODEL_BYTES ((size_t)1 << 28)
#define MAX_CONFIG_BYTES ((size_t)64 << 20)

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER_DEFINED = 4, TT_UNUSED = 5, TT_BYTE = 6 };

/* ======================================================================
 * Vocabulary under construction
 * ====================================================================== */

typedef struct vocab_build {
    size_t n;          /* entries (ids 0..n-1) */
    char **text;       /* owned; NULL = hole */
    size_t *len;
    float *score;
    int32_t *type;
    bool has_scores;
    int32_t *lstrip, *rstrip; /* ids with lstrip/rstrip added tokens */
    size_t n_lstrip, n_rstrip;
} vocab_build;

static void vb_free(vocab_build *v)
{
    if (v->text)
        for (size_t i = 0; i < v->n; i++) free(v->text[i]);
    free(v->text);
    free(v->len);
    free(v->score);
    free(v->type);
    free(v->lstrip);
    free(v->rstrip);
    memset(v, 0, sizeof *v);
}

/* Grows (or shrinks) to n entries; new entries are holes. */
static lmq_status vb_resize(vocab_build *v, size_t n, const char *what)
{
    if (n > MAX_VOCAB) return lmq_error(LMQ_ERR_LIMIT, "%s: vocabulary of %zu tokens (at most %u)", what, n, MAX_VOCAB);
    for (size_t i = n; i < v->n; i++) free(v->text[i]);
    size_t k = n ? n : 1;
    char **t = realloc(v->text, k * sizeof *t);
    if (t) v->text = t;
    size_t *l = realloc(v->len, k * sizeof *l);
    if (l) v->len = l;
    float *s = realloc(v->score, k * sizeof *s);
    if (s) v->score = s;
    int32_t *ty = realloc(v->type, k * sizeof *ty);
    if (ty) v->type = ty;
    if (!t || !l || !s || !ty) return lmq_error(LMQ_ERR_NOMEM, "%s: vocabulary of %zu tokens", what, n);
    for (size_t i = v->n; i < n; i++) {
        v->text[i] = NULL;
        v->len[i] = 0;
        v->score[i] = 0;
        v->type[i] = TT_NORMAL;
    }
    v->n = n;
    return LMQ_OK;
}

static lmq_status vb_set(vocab_build *v, size_t id, const char *s, size_t len, const char *what)
{
    char *c = malloc(len + 1);
    if (!c) return lmq_error(LMQ_ERR_NOMEM, "%s: token text", what);
    memcpy(c, s, len);
    c[len] = 0;
    free(v->text[id]);
    v->text[id] = c;
    v->len[id] = len;
    return LMQ_OK;
}

static lmq_status push_id(int32_t **arr, size_t *n, int32_t id)
{
    int32_t *p = realloc(*arr, (*n + 1) * sizeof *p);
    if (!p) return lmq_error(LMQ_ERR_NOMEM, "tokenizer: strip list");
    p[(*n)++] = id;
    *arr = p;
    return LMQ_OK;
}

/* Holes get llama.cpp's "[PADi]" text; `type` and `score` as given. */
static lmq_status vb_fill_holes(vocab_build *v, int32_t type, float score)
{
    for (size_t i = 0; i < v->n; i++) {
        if (v->text[i]) continue;
        char buf[32];
        int n = snprintf(buf, sizeof buf, "[PAD%zu]", i);
        lmq_status s = vb_set(v, i, buf, (size_t)n, "tokenizer");
        if (s) return s;
        v->type[i] = type;
        v->score[i] = score;
    }
    return LMQ_OK;
}

static int32_t vb_find(const vocab_build *v, const char *s, size_t len)
{
    for (size_t i = 0; i < v->n; i++)
        if (v->text[i] && v->len[i] == len && !memcmp(v->text[i], s, len)) return (int32_t)i;
    return -1;
}

static lmq_status vb_write(const vocab_build *v, lmq_meta *meta)
{
    lmq_status s = lmq_meta_set_str_arr(meta, "tokenizer.ggml.tokens", (const char *const *)v->text, v->len, v->n);
    if (!s && v->has_scores) s = lmq_meta_set_arr(meta, "tokenizer.ggml.scores", LMQ_V_F32, v->score, v->n);
    if (!s) s = lmq_meta_set_arr(meta, "tokenizer.ggml.token_type", LMQ_V_I32, v->type, v->n);
    if (!s && v->n_lstrip) s = lmq_meta_set_arr(meta, "tokenizer.lmq.lstrip_ids", LMQ_V_I32, v->lstrip, v->n_lstrip);
    if (!s && v->n_rstrip) s = lmq_meta_set_arr(meta, "tokenizer.lmq.rstrip_ids", LMQ_V_I32, v->rstrip, v->n_rstrip);
    return s;
}

/* llama.cpp's does_token_look_special: added tokens that are control tokens
 * even when the files do not say "special". */
static bool looks_special(const char *t, size_t n)
{
    static const char *const exact[] = {"<pad>", "<mask>", "<2mass>", "[@BOS@]"};
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (strlen(exact[i]) == n && !memcmp(t, exact[i], n)) return true;
    if (n >= 4 && !memcmp(t, "<|", 2) && !memcmp(t + n - 2, "|>", 2)) return true;
    /* <｜ ... ｜> (fullwidth vertical bar, DeepSeek) */
    if (n >= 8 && !memcmp(t, "<\xef\xbd\x9c", 4) && !memcmp(t + n - 4, "\xef\xbd\x9c>", 4)) return true;
    if (n >= 8 && !memcmp(t, "<unused", 7) && t[n - 1] == '>') return true;
    return false;
}

/* An added token (tokenizer.json added_tokens / tokenizer_config.json
 * added_tokens_decoder): control when special or special-looking, else
 * user-defined with U+2581 turned back into spaces (llama.cpp). */
static lmq_status apply_added(vocab_build *v, size_t id, const char *content, bool special, bool set_score,
                              const char *what)
{
    size_t n = strlen(content);
    lmq_status s;
    if (special || looks_special(content, n)) {
        v->type[id] = TT_CONTROL;
        s = vb_set(v, id, content, n, what);
    } else {
        v->type[id] = TT_USER_DEFINED;
        char *c = malloc(n + 1);
        if (!c) return lmq_error(LMQ_ERR_NOMEM, "%s: token text", what);
        size_t k = 0;
        for (size_t i = 0; i < n;) {
            if (i + 3 <= n && !memcmp(content + i, "\xe2\x96\x81", 3)) {
                c[k++] = ' ';
                i += 3;
            } else {
                c[k++] = content[i++];
            }
        }
        s = vb_set(v, id, c, k, what);
        free(c);
    }
    if (set_score) v->score[id] = -1000.0f;
    return s;
}

/* ======================================================================
 * SentencePiece ModelProto (protobuf wire format)
 * ====================================================================== */

typedef struct pb {
    const uint8_t *p;
    size_t n, pos;
} pb;

static bool pb_varint(pb *b, uint64_t *v)
{
    uint64_t r = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (b->pos >= b->n) return false;
        uint8_t c = b->p[b->pos++];
        r |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *v = r;
            return true;
        }
    }
    return false;
}

static bool pb_key(pb *b, uint64_t *field, unsigned *wt)
{
    uint64_t k;
    if (!pb_varint(b, &k)) return false;
    *field = k >> 3;
    *wt = (unsigned)(k & 7);
    return *field != 0;
}

static bool pb_bytes(pb *b, const uint8_t **data, size_t *len)
{
    uint64_t l;
    if (!pb_varint(b, &l) || l > b->n - b->pos) return false;
    *data = b->p + b->pos;
    *len = (size_t)l;
    b->pos += (size_t)l;
    return true;
}

static bool pb_skip(pb *b, unsigned wt)
{
    uint64_t v;
    const uint8_t *d;
    size_t l;
    switch (wt) {
    case 0: return pb_varint(b, &v);
    case 1: if (b->n - b->pos < 8) return false; b->pos += 8; return true;
    case 2: return pb_bytes(b, &d, &l);
    case 5: if (b->n - b->pos < 4) return false; b->pos += 4; return true;
    default: return false; /* groups (3, 4) are not used by sentencepiece_model.proto */
    }
}

typedef struct spm_info {
    int64_t model_type;      /* 1 unigram, 2 BPE, ... */
    bool byte_fallback;
    bool treat_ws_as_suffix;
    int64_t unk_id, bos_id, eos_id, pad_id;
    bool add_dummy_prefix, remove_extra_ws, escape_ws;
} spm_info;

static lmq_status spm_piece(const uint8_t *d, size_t len, size_t idx, const char *name, vocab_build *v)
{
    pb b = {d, len, 0};
    const uint8_t *text = NULL;
    size_t tlen = 0;
    float score = 0;
    uint64_t type = 1;
    uint64_t f;
    unsigned wt;
    while (b.pos < b.n) {
        if (!pb_key(&b, &f, &wt)) goto bad;
        if (f == 1 && wt == 2) {
            if (!pb_bytes(&b, &text, &tlen)) goto bad;
        } else if (f == 2 && wt == 5) {
            if (b.n - b.pos < 4) goto bad;
            uint32_t u = (uint32_t)b.p[b.pos] | (uint32_t)b.p[b.pos + 1] << 8 | (uint32_t)b.p[b.pos + 2] << 16 |
                         (uint32_t)b.p[b.pos + 3] << 24;
            memcpy(&score, &u, 4);
            b.pos += 4;
        } else if (f == 3 && wt == 0) {
            if (!pb_varint(&b, &type)) goto bad;
        } else if (f <= 3) {
            goto bad;
        } else if (!pb_skip(&b, wt)) {
            goto bad;
        }
    }
    if (type < 1 || type > 6)
        return lmq_error(LMQ_ERR_FORMAT, "%s: piece %zu has unknown type %llu", name, idx, (unsigned long long)type);
    if (idx >= v->n) {
        size_t nn = v->n ? v->n * 2 : 1024;
        lmq_status s = vb_resize(v, nn, name);
        if (s) return s;
    }
    lmq_status s = vb_set(v, idx, text ? (const char *)text : "", tlen, name);
    if (s) return s;
    v->score[idx] = score;
    /* SentencePiece's types are GGUF's token types, number for number */
    v->type[idx] = (int32_t)type;
    return LMQ_OK;
bad:
    return lmq_error(LMQ_ERR_FORMAT, "%s: piece %zu: malformed protobuf", name, idx);
}

static bool pb_int32(pb *b, int64_t *out)
{
    uint64_t v;
    if (!pb_varint(b, &v)) return false;
    *out = (int64_t)(int32_t)(uint32_t)v; /* int32 fields: negative values are 10-byte varints */
    return true;
}

static lmq_status spm_trainer(const uint8_t *d, size_t len, const char *name, spm_info *info)
{
    pb b = {d, len, 0};
    uint64_t f, v = 0;
    unsigned wt;
    while (b.pos < b.n) {
        if (!pb_key(&b, &f, &wt)) goto bad;
        bool ok = true;
        if (wt == 0 && f == 3) ok = pb_int32(&b, &info->model_type);
        else if (wt == 0 && f == 24) { ok = pb_varint(&b, &v); info->treat_ws_as_suffix = v != 0; }
        else if (wt == 0 && f == 35) { ok = pb_varint(&b, &v); info->byte_fallback = v != 0; }
        else if (wt == 0 && f == 40) ok = pb_int32(&b, &info->unk_id);
        else if (wt == 0 && f == 41) ok = pb_int32(&b, &info->bos_id);
        else if (wt == 0 && f == 42) ok = pb_int32(&b, &info->eos_id);
        else if (wt == 0 && f == 43) ok = pb_int32(&b, &info->pad_id);
        else ok = pb_skip(&b, wt);
        if (!ok) goto bad;
    }
    return LMQ_OK;
bad:
    return lmq_error(LMQ_ERR_FORMAT, "%s: trainer_spec: malformed protobuf", name);
}

static lmq_status spm_normalizer(const uint8_t *d, size_t len, const char *name, spm_info *info)
{
    pb b = {d, len, 0};
    uint64_t f, v = 0;
    unsigned wt;
    while (b.pos < b.n) {
        if (!pb_key(&b, &f, &wt)) goto bad;
        bool ok = true;
        if (wt == 0 && f == 3) { ok = pb_varint(&b, &v); info->add_dummy_prefix = v != 0; }
        else if (wt == 0 && f == 4) { ok = pb_varint(&b, &v); info->remove_extra_ws = v != 0; }
        else if (wt == 0 && f == 5) { ok = pb_varint(&b, &v); info->escape_ws = v != 0; }
        else ok = pb_skip(&b, wt);
        if (!ok) goto bad;
    }
    return LMQ_OK;
bad:
    return lmq_error(LMQ_ERR_FORMAT, "%s: normalizer_spec: malformed protobuf", name);
}

static lmq_status spm_parse(const uint8_t *buf, size_t len, const char *name, vocab_build *v, spm_info *info)
{
    *info = (spm_info){.model_type = 1, .unk_id = 0, .bos_id = 1, .eos_id = 2, .pad_id = -1,
                       .add_dummy_prefix = true, .remove_extra_ws = true, .escape_ws = true};
    pb b = {buf, len, 0};
    size_t n = 0;
    lmq_status s;
    uint64_t f;
    unsigned wt;
    while (b.pos < b.n) {
        const uint8_t *d;
        size_t dl;
        if (!pb_key(&b, &f, &wt)) goto bad;
        if (f >= 1 && f <= 3) {
            if (wt != 2 || !pb_bytes(&b, &d, &dl)) goto bad;
            if (f == 1) {
                if (n >= MAX_VOCAB) return lmq_error(LMQ_ERR_LIMIT, "%s: more than %u pieces", name, MAX_VOCAB);
                if ((s = spm_piece(d, dl, n, name, v))) return s;
                n++;
            } else if (f == 2) {
                if ((s = spm_trainer(d, dl, name, info))) return s;
            } else {
                if ((s = spm_normalizer(d, dl, name, info))) return s;
            }
        } else if (!pb_skip(&b, wt)) {
            goto bad;
        }
    }
    if (n == 0) return lmq_error(LMQ_ERR_FORMAT, "%s: no pieces (not a SentencePiece model?)", name);
    if ((s = vb_resize(v, n, name))) return s;
    for (size_t i = 0; i < n; i++)
        if (v->len[i] == 0) return lmq_error(LMQ_ERR_FORMAT, "%s: piece %zu is empty", name, i);
    if (info->model_type != 2)
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: SentencePiece model type %lld is not supported (only BPE, type 2)", name,
                         (long long)info->model_type);
    if (info->treat_ws_as_suffix)
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: treat_whitespace_as_suffix is not supported", name);
    if (!info->escape_ws)
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: escape_whitespaces = false is not supported", name);
    v->has_scores = true;
    return LMQ_OK;
bad:
    return lmq_error(LMQ_ERR_FORMAT, "%s: malformed protobuf at byte %zu", name, b.pos);
}

static lmq_status spm_write_info(const spm_info *info, size_t n_tokens, lmq_meta *meta)
{
    lmq_status s = lmq_meta_set_str(meta, "tokenizer.ggml.model", "llama");
    if (!s) s = lmq_meta_set_str(meta, "tokenizer.ggml.pre", "default");
    if (!s && info->unk_id >= 0 && (size_t)info->unk_id < n_tokens)
        s = lmq_meta_set_u32(meta, "tokenizer.ggml.unknown_token_id", (uint32_t)info->unk_id);
    if (!s) s = lmq_meta_set_bool(meta, "tokenizer.ggml.add_space_prefix", info->add_dummy_prefix);
    if (!s) s = lmq_meta_set_bool(meta, "tokenizer.lmq.byte_fallback", info->byte_fallback);
    return s;
}

lmq_status lmq_spm_model_to_meta(const void *buf, size_t len, const char *name, lmq_meta *meta)
{
    if ((!buf && len) || !meta) return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_spm_model_to_meta: NULL argument");
    vocab_build v = {0};
    spm_info info;
    lmq_status s = spm_parse(buf, len, name ? name : "tokenizer.model", &v, &info);
    if (!s) s = spm_write_info(&info, v.n, meta);
    if (!s) s = vb_write(&v, meta);
    vb_free(&v);
    return s;
}

/* ======================================================================
 * tokenizer.json
 * ====================================================================== */

/* Known pre-tokenizer regex lists -> tokenizer.ggml.pre names (so a GGUF
 * exported for llama.cpp names the family llama.cpp knows). */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
static const struct {
    const char *pre;
    const char *re;
} KNOWN_PRE[] = {
    {"gpt-2", RE_GPT2},
    {"llama-bpe", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                  "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    {"qwen2", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
              "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    {"qwen35", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+"
               "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    /* o200k (tiktoken's o200k_base pattern): GPT-4o, gpt-oss's o200k_harmony, Llama 4 */
    {"gpt-4o", "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
               "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
               "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|"
               "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
};

typedef struct str_list {
    char **s;
    size_t n;
} str_list;

static void sl_free(str_list *l)
{
    for (size_t i = 0; i < l->n; i++) free(l->s[i]);
    free(l->s);
    l->s = NULL;
    l->n = 0;
}

static lmq_status sl_push(str_list *l, const char *s)
{
    char **p = realloc(l->s, (l->n + 1) * sizeof *p);
    if (!p) return lmq_error(LMQ_ERR_NOMEM, "tokenizer.json: pre-tokenizer");
    l->s = p;
    if (!(p[l->n] = strdup(s))) return lmq_error(LMQ_ERR_NOMEM, "tokenizer.json: pre-tokenizer");
    l->n++;
    return LMQ_OK;
}

static const char *jstr(const cJSON *o, const char *key)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(x) ? x->valuestring : NULL;
}

static bool jbool(const cJSON *o, const char *key, bool dflt)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsBool(x)) return cJSON_IsTrue(x);
    return dflt;
}

/* A literal string as a PCRE2 pattern. */
static char *regex_escape(const char *s)
{
    size_t n = strlen(s);
    char *o = malloc(2 * n + 1);
    if (!o) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (strchr("\\^$.|?*+()[]{}", s[i])) o[k++] = '\\';
        o[k++] = s[i];
    }
    o[k] = 0;
    return o;
}

/* Appends the regexes of one pre-tokenizer node. */
static lmq_status pre_regexes(const cJSON *pt, const char *name, str_list *re, bool *byte_level, bool *prefix_space,
                              int depth)
{
    if (cJSON_IsNull(pt) || !pt) return LMQ_OK;
    const char *type = jstr(pt, "type");
    if (!type || depth > 8) return lmq_error(LMQ_ERR_FORMAT, "%s: pre_tokenizer: node without a type", name);
    if (!strcmp(type, "Sequence")) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(pt, "pretokenizers");
        if (!cJSON_IsArray(arr)) return lmq_error(LMQ_ERR_FORMAT, "%s: pre_tokenizer.pretokenizers: not an array", name);
        const cJSON *e;
        cJSON_ArrayForEach(e, arr) {
            lmq_status s = pre_regexes(e, name, re, byte_level, prefix_space, depth + 1);
            if (s) return s;
        }
        return LMQ_OK;
    }
    if (!strcmp(type, "ByteLevel")) {
        *byte_level = true;
        if (jbool(pt, "add_prefix_space", false)) *prefix_space = true;
        return jbool(pt, "use_regex", true) ? sl_push(re, RE_GPT2) : LMQ_OK;
    }
    if (!strcmp(type, "Split")) {
        const char *beh = jstr(pt, "behavior");
        if (!beh || strcmp(beh, "Isolated") || jbool(pt, "invert", false))
            return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: pre_tokenizer Split with behavior '%s'%s is not supported (Isolated is)",
                             name, beh ? beh : "?", jbool(pt, "invert", false) ? " and invert" : "");
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(pt, "pattern");
        const char *rx = jstr(pat, "Regex"), *lit = jstr(pat, "String");
        if (rx) return sl_push(re, rx);
        if (lit) {
            char *e = regex_escape(lit);
            if (!e) return lmq_error(LMQ_ERR_NOMEM, "%s: pre-tokenizer", name);
            lmq_status s = sl_push(re, e);
            free(e);
            return s;
        }
        return lmq_error(LMQ_ERR_FORMAT, "%s: pre_tokenizer Split without a pattern", name);
    }
    if (!strcmp(type, "Digits"))
        return sl_push(re, jbool(pt, "individual_digits", false) ? "\\p{N}" : "\\p{N}+");
    if (!strcmp(type, "Punctuation")) {
        const char *beh = jstr(pt, "behavior");
        /* Hugging Face's is_punctuation: ASCII punctuation or Unicode P* */
        if (!beh || !strcmp(beh, "Isolated")) return sl_push(re, "[\\p{P}!-/:-@\\[-`{-~]");
        if (!strcmp(beh, "Contiguous")) return sl_push(re, "[\\p{P}!-/:-@\\[-`{-~]+");
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: pre_tokenizer Punctuation with behavior '%s' is not supported", name, beh);
    }
    return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: pre_tokenizer '%s' is not supported", name, type);
}

static lmq_status normalizer_kind(const cJSON *nz, const char *name, bool *nfc, int depth)
{
    if (!nz || cJSON_IsNull(nz)) return LMQ_OK;
    const char *type = jstr(nz, "type");
    if (!type || depth > 8) return lmq_error(LMQ_ERR_FORMAT, "%s: normalizer: node without a type", name);
    if (!strcmp(type, "NFC")) {
        *nfc = true;
        return LMQ_OK;
    }
    if (!strcmp(type, "Sequence")) {
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(nz, "normalizers")) {
            lmq_status s = normalizer_kind(e, name, nfc, depth + 1);
            if (s) return s;
        }
        return LMQ_OK;
    }
    return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: normalizer '%s' is not supported (NFC is)", name, type);
}

/* True when the tokenizer.json describes a byte-level BPE. */
static bool json_is_byte_level(const cJSON *root)
{
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    char *txt = pt ? cJSON_PrintUnformatted(pt) : NULL;
    bool bl = txt && strstr(txt, "\"ByteLevel\"");
    free(txt);
    return bl;
}

/* A Replace(" " -> U+2581) normalizer, alone or as a one-member Sequence. */
static bool is_space_escape(const cJSON *nz)
{
    const char *type = jstr(nz, "type");
    if (type && !strcmp(type, "Sequence")) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(nz, "normalizers");
        return cJSON_GetArraySize(arr) == 1 && is_space_escape(cJSON_GetArrayItem(arr, 0));
    }
    const char *pat = jstr(cJSON_GetObjectItemCaseSensitive(nz, "pattern"), "String"), *content = jstr(nz, "content");
    return type && !strcmp(type, "Replace") && pat && !strcmp(pat, " ") && content && !strcmp(content, "\xe2\x96\x81");
}

/* A pre-tokenizer that cannot split a text whose spaces are all U+2581:
 * none, or Split on the string " " (Gemma's, whatever its behaviour). */
static bool is_noop_after_escape(const cJSON *pt)
{
    if (!pt || cJSON_IsNull(pt)) return true;
    const char *type = jstr(pt, "type");
    if (type && !strcmp(type, "Sequence")) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(pt, "pretokenizers"), *e;
        if (!cJSON_IsArray(arr)) return false;
        cJSON_ArrayForEach(e, arr) if (!is_noop_after_escape(e)) return false;
        return true;
    }
    const char *lit = jstr(cJSON_GetObjectItemCaseSensitive(pt, "pattern"), "String");
    return type && !strcmp(type, "Split") && lit && !strcmp(lit, " ") && !jbool(pt, "invert", false);
}

/* True when the tokenizer.json is Gemma's BPE (Gemma 3 and 4, llama.cpp's
 * "gemma4" tokenizer model): spaces escaped to U+2581 by the normalizer,
 * no pre-tokenization, merges over raw UTF-8. */
static bool json_is_gemma(const cJSON *root)
{
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const char *mtype = jstr(model, "type");
    return mtype && !strcmp(mtype, "BPE") && !json_is_byte_level(root) &&
           is_space_escape(cJSON_GetObjectItemCaseSensitive(root, "normalizer")) &&
           is_noop_after_escape(cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"));
}

/* Gemma 4's markers the reasoning and tool-call parsers must see in the
 * decoded text: user-defined, as llama.cpp's converter makes them. */
static void gemma_visible_tokens(vocab_build *v)
{
    static const char *const vis[] = {"<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>",
                                      "<|tool_response>", "<tool_response|>", "<|\"|>"};
    for (size_t i = 0; i < sizeof vis / sizeof vis[0]; i++) {
        int32_t id = vb_find(v, vis[i], strlen(vis[i]));
        if (id >= 0) v->type[id] = TT_USER_DEFINED;
    }
}

/* Gemma: the <0xNN> pieces of model.vocab are byte tokens. */
static void gemma_byte_tokens(vocab_build *v)
{
    for (size_t id = 0; id < v->n; id++) {
        const char *t = v->text[id];
        if (v->type[id] != TT_NORMAL || !t || strlen(t) != 6 || memcmp(t, "<0x", 3) || t[5] != '>' ||
            !isxdigit((unsigned char)t[3]) || !isxdigit((unsigned char)t[4]))
            continue;
        v->type[id] = TT_BYTE;
    }
}

static lmq_status json_merges(const cJSON *model, const char *name, lmq_meta *meta)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!cJSON_IsArray(m)) return lmq_error(LMQ_ERR_FORMAT, "%s: model.merges: missing or not an array", name);
    size_t n = (size_t)cJSON_GetArraySize(m);
    if (n > MAX_VOCAB) return lmq_error(LMQ_ERR_LIMIT, "%s: %zu merges", name, n);
    char **strs = calloc(n ? n : 1, sizeof *strs);
    if (!strs) return lmq_error(LMQ_ERR_NOMEM, "%s: merges", name);
    lmq_status s = LMQ_OK;
    size_t i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, m) {
        if (cJSON_IsString(e)) {
            strs[i] = strdup(e->valuestring);
        } else if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 && cJSON_IsString(cJSON_GetArrayItem(e, 0)) &&
                   cJSON_IsString(cJSON_GetArrayItem(e, 1))) {
            const char *a = cJSON_GetArrayItem(e, 0)->valuestring, *b = cJSON_GetArrayItem(e, 1)->valuestring;
            size_t la = strlen(a), lb = strlen(b);
            strs[i] = malloc(la + lb + 2);
            if (strs[i]) {
                memcpy(strs[i], a, la);
                strs[i][la] = ' ';
                memcpy(strs[i] + la + 1, b, lb + 1);
            }
        } else {
            s = lmq_error(LMQ_ERR_FORMAT, "%s: model.merges[%zu]: neither \"a b\" nor [\"a\", \"b\"]", name, i);
            break;
        }
        if (!strs[i]) {
            s = lmq_error(LMQ_ERR_NOMEM, "%s: merges", name);
            break;
        }
        i++;
    }
    if (!s) s = lmq_meta_set_str_arr(meta, "tokenizer.ggml.merges", (const char *const *)strs, NULL, n);
    for (size_t k = 0; k < n; k++) free(strs[k]);
    free(strs);
    return s;
}

static lmq_status json_vocab(const cJSON *model, const cJSON *added, const char *name, vocab_build *v)
{
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    if (!cJSON_IsObject(vocab)) return lmq_error(LMQ_ERR_FORMAT, "%s: model.vocab: missing or not an object", name);
    /* size: the largest id of the vocab and the added tokens */
    double max_id = -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab) {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= MAX_VOCAB || e->valuedouble != (int)e->valuedouble)
            return lmq_error(LMQ_ERR_FORMAT, "%s: model.vocab['%.64s']: bad id", name, e->string ? e->string : "?");
        if (e->valuedouble > max_id) max_id = e->valuedouble;
    }
    cJSON_ArrayForEach(e, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble >= MAX_VOCAB || !jstr(e, "content"))
            return lmq_error(LMQ_ERR_FORMAT, "%s: added_tokens: entry without a valid id and content", name);
        if (id->valuedouble > max_id) max_id = id->valuedouble;
    }
    if (max_id < 0) return lmq_error(LMQ_ERR_FORMAT, "%s: model.vocab is empty", name);
    /* ids leave holes (filled with "[PADi]" tokens); a few kilobytes must
     * not make millions of them: at most MAX_HOLES more ids than entries */
    const size_t n_entries = (size_t)cJSON_GetArraySize(vocab) + (size_t)cJSON_GetArraySize(added);
    if ((size_t)max_id + 1 > n_entries + MAX_HOLES)
        return lmq_error(LMQ_ERR_FORMAT, "%s: ids up to %.0f for %zu tokens (more than %u ids without a token)", name,
                         max_id, n_entries, MAX_HOLES);
    lmq_status s = vb_resize(v, (size_t)max_id + 1, name);
    if (s) return s;
    cJSON_ArrayForEach(e, vocab) {
        size_t id = (size_t)e->valuedouble;
        if (v->text[id])
            return lmq_error(LMQ_ERR_FORMAT, "%s: model.vocab: id %zu is used twice ('%.64s')", name, id, e->string);
        if ((s = vb_set(v, id, e->string, strlen(e->string), name))) return s;
        v->type[id] = TT_NORMAL;
    }
    cJSON_ArrayForEach(e, added) {
        size_t id = (size_t)cJSON_GetObjectItemCaseSensitive(e, "id")->valuedouble;
        if ((s = apply_added(v, id, jstr(e, "content"), jbool(e, "special", false), false, name))) return s;
        if (jbool(e, "lstrip", false) && (s = push_id(&v->lstrip, &v->n_lstrip, (int32_t)id))) return s;
        if (jbool(e, "rstrip", false) && (s = push_id(&v->rstrip, &v->n_rstrip, (int32_t)id))) return s;
    }
    return LMQ_OK;
}

/* tokenizer.json -> everything but the final token list (left in v). */
static lmq_status json_parse(const cJSON *root, const char *name, lmq_meta *meta, vocab_build *v)
{
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const char *mtype = jstr(model, "type");
    if (!cJSON_IsObject(model)) return lmq_error(LMQ_ERR_FORMAT, "%s: no model object", name);
    if (mtype && strcmp(mtype, "BPE"))
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: model.type '%s' is not supported (BPE is)", name, mtype);
    const char *csp = jstr(model, "continuing_subword_prefix"), *eow = jstr(model, "end_of_word_suffix");
    if ((csp && *csp) || (eow && *eow))
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: BPE with continuing_subword_prefix/end_of_word_suffix is not supported", name);
    if (json_is_gemma(root)) {
        if (jbool(model, "ignore_merges", false))
            return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: Gemma-style BPE with ignore_merges is not supported", name);
        lmq_status s = lmq_meta_set_str(meta, "tokenizer.ggml.model", "gemma4");
        if (!s) s = lmq_meta_set_str(meta, "tokenizer.ggml.pre", "gemma4");
        if (!s) s = lmq_meta_set_bool(meta, "tokenizer.ggml.add_space_prefix", false);
        if (!s) s = lmq_meta_set_bool(meta, "tokenizer.lmq.byte_fallback", jbool(model, "byte_fallback", false));
        if (!s) s = json_merges(model, name, meta);
        if (!s) s = json_vocab(model, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), name, v);
        if (!s) {
            gemma_byte_tokens(v);
            gemma_visible_tokens(v);
        }
        return s;
    }
    if (!json_is_byte_level(root))
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: neither a byte-level BPE (no ByteLevel pre-tokenizer) nor Gemma's "
                         "(Replace(\" \", U+2581) normalizer); SentencePiece-style tokenizers need their tokenizer.model", name);

    str_list re = {0};
    bool byte_level = false, prefix_space = false, nfc = false;
    lmq_status s = pre_regexes(cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), name, &re, &byte_level,
                               &prefix_space, 0);
    if (!s) s = normalizer_kind(cJSON_GetObjectItemCaseSensitive(root, "normalizer"), name, &nfc, 0);
    if (s) goto out;
    const char *pre = "default";
    for (size_t i = 0; i < sizeof KNOWN_PRE / sizeof KNOWN_PRE[0]; i++)
        if (re.n == 1 && !strcmp(re.s[0], KNOWN_PRE[i].re)) pre = KNOWN_PRE[i].pre;
    if (!s) s = lmq_meta_set_str(meta, "tokenizer.ggml.model", "gpt2");
    if (!s) s = lmq_meta_set_str(meta, "tokenizer.ggml.pre", pre);
    if (!s) s = lmq_meta_set_str_arr(meta, "tokenizer.lmq.pre_regex", (const char *const *)re.s, NULL, re.n);
    if (!s) s = lmq_meta_set_bool(meta, "tokenizer.lmq.ignore_merges", jbool(model, "ignore_merges", false));
    if (!s && nfc) s = lmq_meta_set_str(meta, "tokenizer.lmq.normalizer", "NFC");
    if (!s && prefix_space) s = lmq_meta_set_bool(meta, "tokenizer.ggml.add_space_prefix", true);
    if (!s) s = json_merges(model, name, meta);
    if (!s) s = json_vocab(model, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), name, v);
out:
    sl_free(&re);
    return s;
}

lmq_status lmq_tokenizer_json_to_meta(const char *json, size_t len, const char *name, lmq_meta *meta)
{
    if ((!json && len) || !meta) return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_tokenizer_json_to_meta: NULL argument");
    if (!name) name = "tokenizer.json";
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) return lmq_error(LMQ_ERR_FORMAT, "%s: not valid JSON", name);
    vocab_build v = {0};
    lmq_status s = json_parse(root, name, meta, &v);
    if (!s) s = vb_fill_holes(&v, TT_USER_DEFINED, 0.0f);
    if (!s) s = vb_write(&v, meta);
    vb_free(&v);
    cJSON_Delete(root);
    return s;
}

/* ======================================================================
 * The directory: routes, configs, special tokens
 * ====================================================================== */

/* Reads DIR/NAME; *found false (and LMQ_OK) when it does not exist. */
static lmq_status read_opt(const char *dir, const char *file, size_t max, char **buf, size_t *len, bool *found,
                           char *path, size_t pcap)
{
    snprintf(path, pcap, "%s/%s", dir, file);
    *buf = NULL;
    *len = 0;
    *found = false;
    FILE *f = fopen(path, "rb");
    if (!f) return LMQ_OK;
    fclose(f);
    *found = true;
    return lmq_read_file(path, max, buf, len);
}

static cJSON *read_json_opt(const char *dir, const char *file, lmq_status *st)
{
    char path[4096], *buf;
    size_t len;
    bool found;
    *st = read_opt(dir, file, MAX_CONFIG_BYTES, &buf, &len, &found, path, sizeof path);
    if (*st || !found) return NULL;
    cJSON *j = cJSON_ParseWithLength(buf, len);
    free(buf);
    if (!j) *st = lmq_error(LMQ_ERR_FORMAT, "%s: not valid JSON", path);
    return j;
}

/* tokenizer_config.json added_tokens_decoder: {"id": {"content", "special", ...}} */
static lmq_status apply_added_decoder(const cJSON *tcfg, vocab_build *v, bool set_score)
{
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(tcfg, "added_tokens_decoder");
    const cJSON *e;
    cJSON_ArrayForEach(e, dec) {
        char *end;
        unsigned long id = strtoul(e->string ? e->string : "", &end, 10);
        const char *content = jstr(e, "content");
        if (!e->string || *end || !content)
            return lmq_error(LMQ_ERR_FORMAT, "tokenizer_config.json: added_tokens_decoder['%.32s']: bad entry",
                             e->string ? e->string : "?");
        if (id >= v->n) continue; /* llama.cpp: beyond the vocabulary size, ignored */
        lmq_status s = apply_added(v, id, content, jbool(e, "special", false), set_score, "tokenizer_config.json");
        if (s) return s;
        if (jbool(e, "lstrip", false) && (s = push_id(&v->lstrip, &v->n_lstrip, (int32_t)id))) return s;
        if (jbool(e, "rstrip", false) && (s = push_id(&v->rstrip, &v->n_rstrip, (int32_t)id))) return s;
    }
    return LMQ_OK;
}

/* SentencePiece's added_tokens.json: {"text": id} */
static lmq_status apply_added_json(const char *dir, vocab_build *v)
{
    lmq_status st;
    cJSON *j = read_json_opt(dir, "added_tokens.json", &st);
    if (st || !j) return st;
    const cJSON *e;
    cJSON_ArrayForEach(e, j) {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || !e->string) continue;
        size_t id = (size_t)e->valuedouble;
        if (id >= v->n) continue;
        if ((st = vb_set(v, id, e->string, strlen(e->string), "added_tokens.json"))) break;
        v->score[id] = -1000.0f;
        v->type[id] = TT_USER_DEFINED;
    }
    cJSON_Delete(j);
    return st;
}

static const char *special_content(const cJSON *cfg, const char *key)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsString(x)) return x->valuestring;
    if (cJSON_IsObject(x)) return jstr(x, "content");
    return NULL;
}

static lmq_status special_ids(const vocab_build *v, const cJSON *tcfg, const cJSON *stmap, const cJSON *config,
                              lmq_meta *meta, int32_t *eos_out)
{
    static const struct {
        const char *typ, *key;
    } T[] = {{"bos", "tokenizer.ggml.bos_token_id"},     {"eos", "tokenizer.ggml.eos_token_id"},
             {"unk", "tokenizer.ggml.unknown_token_id"}, {"sep", "tokenizer.ggml.seperator_token_id"},
             {"pad", "tokenizer.ggml.padding_token_id"}, {"cls", "tokenizer.ggml.cls_token_id"},
             {"mask", "tokenizer.ggml.mask_token_id"}};
    *eos_out = -1;
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        char k[32];
        snprintf(k, sizeof k, "%s_token", T[i].typ);
        const char *c = special_content(tcfg, k);
        if (!c) c = special_content(stmap, k);
        int32_t id = c ? vb_find(v, c, strlen(c)) : -1;
        if (id < 0) {
            snprintf(k, sizeof k, "%s_token_id", T[i].typ);
            const cJSON *x = cJSON_GetObjectItemCaseSensitive(config, k);
            if (cJSON_IsNumber(x) && x->valuedouble >= 0 && x->valuedouble < (double)v->n) id = (int32_t)x->valuedouble;
        }
        if (id < 0) continue;
        if (!strcmp(T[i].typ, "eos")) *eos_out = id;
        lmq_status s = lmq_meta_set_u32(meta, T[i].key, (uint32_t)id);
        if (s) return s;
    }
    return LMQ_OK;
}

static lmq_status chat_templates(const char *dir, const cJSON *tcfg, lmq_meta *meta)
{
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(tcfg, "chat_template");
    lmq_status s = LMQ_OK;
    if (cJSON_IsString(ct)) return lmq_meta_set_str(meta, "tokenizer.chat_template", ct->valuestring);
    if (cJSON_IsArray(ct)) {
        /* [{"name": ..., "template": ...}]: "default" is the template, the
         * others go to tokenizer.chat_template.NAME (as llama.cpp writes) */
        const cJSON *e;
        size_t n_named = 0;
        const char *names[64];
        cJSON_ArrayForEach(e, ct) {
            const char *nm = jstr(e, "name"), *tp = jstr(e, "template");
            if (!nm || !tp) return lmq_error(LMQ_ERR_FORMAT, "tokenizer_config.json: chat_template: entry without name/template");
            if (!strcmp(nm, "default")) {
                s = lmq_meta_set_str(meta, "tokenizer.chat_template", tp);
            } else {
                char key[256];
                snprintf(key, sizeof key, "tokenizer.chat_template.%s", nm);
                s = lmq_meta_set_str(meta, key, tp);
                if (n_named < 64) names[n_named++] = nm;
            }
            if (s) return s;
        }
        if (n_named) s = lmq_meta_set_str_arr(meta, "tokenizer.chat_templates", names, NULL, n_named);
        return s;
    }
    /* newer Hugging Face layouts keep the template in its own file */
    char path[4096], *buf;
    size_t len;
    bool found;
    if ((s = read_opt(dir, "chat_template.jinja", MAX_CONFIG_BYTES, &buf, &len, &found, path, sizeof path)) || !found)
        return s;
    s = lmq_meta_set_strn(meta, "tokenizer.chat_template", buf, len);
    free(buf);
    return s;
}

static lmq_status eog_ids(const cJSON *gen, int32_t eos, size_t n_tokens, lmq_meta *meta)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(gen, "eos_token_id");
    int32_t ids[64];
    size_t n = 0;
    if (cJSON_IsNumber(x)) {
        if (x->valuedouble >= 0 && x->valuedouble < (double)n_tokens) ids[n++] = (int32_t)x->valuedouble;
    } else if (cJSON_IsArray(x)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, x)
            if (n < 64 && cJSON_IsNumber(e) && e->valuedouble >= 0 && e->valuedouble < (double)n_tokens)
                ids[n++] = (int32_t)e->valuedouble;
    }
    if (n == 0) return LMQ_OK;
    lmq_status s = lmq_meta_set_arr(meta, "tokenizer.lmq.eog_token_ids", LMQ_V_I32, ids, n);
    if (!s && eos < 0) s = lmq_meta_set_u32(meta, "tokenizer.ggml.eos_token_id", (uint32_t)ids[0]);
    return s;
}

/* config.json vocab_size: the model's embedding rows; the vocabulary is
 * padded to it as llama.cpp's converter does. A size smaller than the
 * tokenizer's is refused (cutting would silently drop tokens the tokenizer
 * still produces), and so is one far beyond it (more than twice it plus
 * 64 Ki) rather than padded. */
static lmq_status config_vocab_size(const cJSON *config, size_t have, size_t *want)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(config, "vocab_size");
    if (!x) {
        const cJSON *tc = cJSON_GetObjectItemCaseSensitive(config, "text_config");
        x = cJSON_GetObjectItemCaseSensitive(tc, "vocab_size");
    }
    *want = have;
    if (!cJSON_IsNumber(x)) return LMQ_OK;
    if (x->valuedouble < 1 || x->valuedouble > 2.0 * (double)have + 65536)
        return lmq_error(LMQ_ERR_FORMAT, "config.json: vocab_size %.0f does not fit a tokenizer of %zu tokens",
                         x->valuedouble, have);
    if (x->valuedouble < (double)have)
        return lmq_error(LMQ_ERR_FORMAT, "config.json: vocab_size %.0f is smaller than the tokenizer's %zu tokens",
                         x->valuedouble, have);
    *want = (size_t)x->valuedouble;
    return LMQ_OK;
}

lmq_status lmq_hf_tokenizer_to_meta(const char *dir, lmq_meta *meta)
{
    if (!dir || !meta) return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_hf_tokenizer_to_meta: NULL argument");
    lmq_status s;
    cJSON *tcfg = NULL, *config = NULL, *gen = NULL, *stmap = NULL, *tj = NULL;
    char *buf = NULL;
    size_t len;
    bool found_json, found_model;
    char jpath[4096], mpath[4096];
    vocab_build v = {0};

    tcfg = read_json_opt(dir, "tokenizer_config.json", &s);
    if (!s) config = read_json_opt(dir, "config.json", &s);
    if (!s) gen = read_json_opt(dir, "generation_config.json", &s);
    if (!s) stmap = read_json_opt(dir, "special_tokens_map.json", &s);
    if (s) goto out;

    /* tokenizer.json when it is a byte-level BPE, else tokenizer.model */
    if ((s = read_opt(dir, "tokenizer.json", MAX_JSON_BYTES, &buf, &len, &found_json, jpath, sizeof jpath))) goto out;
    if (found_json) {
        tj = cJSON_ParseWithLength(buf, len);
        free(buf);
        buf = NULL;
        if (!tj) {
            s = lmq_error(LMQ_ERR_FORMAT, "%s: not valid JSON", jpath);
            goto out;
        }
    }
    snprintf(mpath, sizeof mpath, "%s/tokenizer.model", dir);
    FILE *mf = fopen(mpath, "rb");
    found_model = mf != NULL;
    if (mf) fclose(mf);

    bool spm;
    /* a directory with both (Gemma 3's) keeps its tokenizer.model, as llama.cpp's converter does */
    if (tj && (json_is_byte_level(tj) || !found_model)) {
        spm = false;
        if ((s = json_parse(tj, jpath, meta, &v))) goto out;
    } else if (found_model) {
        spm = true;
        if ((s = lmq_read_file(mpath, MAX_MODEL_BYTES, &buf, &len))) goto out;
        spm_info info;
        if ((s = spm_parse((const uint8_t *)buf, len, mpath, &v, &info))) goto out;
        free(buf);
        buf = NULL;
        /* pad to the model's vocab_size with unused "[PADi]" tokens */
        size_t want, old = v.n;
        if ((s = config_vocab_size(config, v.n, &want))) goto out;
        if ((s = vb_resize(&v, want, mpath))) goto out;
        for (size_t i = old; i < want; i++) {
            v.score[i] = -10000.0f;
            v.type[i] = TT_UNUSED;
        }
        if ((s = vb_fill_holes(&v, TT_UNUSED, -10000.0f))) goto out;
        if ((s = apply_added_json(dir, &v))) goto out;
        if ((s = spm_write_info(&info, v.n, meta))) goto out;
    } else {
        s = lmq_error(LMQ_ERR_NOT_FOUND, "%s: no tokenizer.json or tokenizer.model", dir);
        goto out;
    }

    if (!spm) {
        size_t want;
        if ((s = config_vocab_size(config, v.n, &want))) goto out;
        if (want > v.n && (s = vb_resize(&v, want, jpath))) goto out;
    }
    if ((s = apply_added_decoder(tcfg, &v, spm))) goto out;
    const char *tmodel = NULL;
    bool gemma = lmq_meta_get_str(meta, "tokenizer.ggml.model", &tmodel, NULL) == LMQ_OK && !strcmp(tmodel, "gemma4");
    lmq_error_clear();
    if (gemma) gemma_visible_tokens(&v);
    if (!spm && (s = vb_fill_holes(&v, TT_USER_DEFINED, 0.0f))) goto out;
    if ((s = vb_write(&v, meta))) goto out;

    int32_t eos;
    if ((s = special_ids(&v, tcfg, stmap, config, meta, &eos))) goto out;
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(tcfg, "add_bos_token");
    if (cJSON_IsBool(x) && (s = lmq_meta_set_bool(meta, "tokenizer.ggml.add_bos_token", cJSON_IsTrue(x)))) goto out;
    /* Gemma 4's tokenizer_config.json says false, yet the models need BOS
     * (llama.cpp's converter writes true, and its loader forces it) */
    if (gemma && (s = lmq_meta_set_bool(meta, "tokenizer.ggml.add_bos_token", true))) goto out;
    x = cJSON_GetObjectItemCaseSensitive(tcfg, "add_eos_token");
    if (cJSON_IsBool(x) && (s = lmq_meta_set_bool(meta, "tokenizer.ggml.add_eos_token", cJSON_IsTrue(x)))) goto out;
    x = cJSON_GetObjectItemCaseSensitive(tcfg, "clean_up_tokenization_spaces");
    if (!spm && cJSON_IsBool(x) && (s = lmq_meta_set_bool(meta, "tokenizer.lmq.clean_spaces", cJSON_IsTrue(x)))) goto out;
    if ((s = chat_templates(dir, tcfg, meta))) goto out;
    s = eog_ids(gen, eos, v.n, meta);
out:
    free(buf);
    vb_free(&v);
    cJSON_Delete(tj);
    cJSON_Delete(tcfg);
    cJSON_Delete(config);
    cJSON_Delete(gen);
    cJSON_Delete(stmap);
    return s;
}
