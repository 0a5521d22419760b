/* Byte-level BPE (tokenizer.ggml.model = "gpt2"): GPT-2, Llama 3, Qwen2/3,
 * DeepSeek, StarCoder, Falcon, MPT, Refact, ...
 *
 * 1. Pre-tokenization: the fragment is split by each regex of the family in
 *    turn (every piece of the previous split is searched on its own; matches
 *    and the gaps between them both become pieces: Hugging Face's Split with
 *    behaviour "Isolated"). PCRE2 in UTF + UCP mode, JIT-compiled once per
 *    vocabulary; invalid UTF-8 never matches and so ends up in gap pieces.
 * 2. Each piece's bytes are mapped to GPT-2's byte-level unicode characters
 *    (one symbol per byte) and merged pairwise, lowest merge rank first
 *    (ties: leftmost), with a heap and a linked list.
 *
 * The per-family regexes are the ones the families' tokenizer.json files
 * use (as listed by llama.cpp's llama-vocab.cpp, which adapts a few of them
 * to std::regex; PCRE2 runs the originals). */
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer_internal.h"

#define MAX_REGEXES 16
#define MAX_MERGES (1u << 24)

struct bpe_regex {
    size_t n;
    pcre2_code *code[MAX_REGEXES];
};

/* ======================================================================
 * GPT-2's byte <-> unicode map
 * ====================================================================== */

static bool byte_is_self(unsigned b)
{
    return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

/* GPT-2's map in closed form: printable bytes map to themselves, the 68
 * others (0x00-0x20, 0x7f-0xa0, 0xad) to U+0100.. in byte order. */
static uint32_t byte_cp(uint8_t b)
{
    if (byte_is_self(b)) return b;
    if (b <= 0x20) return 256u + b;
    if (b >= 0x7f && b <= 0xa0) return 289u + (b - 0x7fu);
    return 323u; /* 0xad */
}

size_t bpe_byte_char(uint8_t b, char out[2])
{
    uint32_t cp = byte_cp(b);
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xc0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
}

/* byte of code point cp, or -1 */
static int cp_byte(uint32_t cp)
{
    if (cp < 256) return byte_is_self(cp) ? (int)cp : -1;
    if (cp <= 288) return (int)(cp - 256);
    if (cp <= 322) return (int)(0x7f + cp - 289);
    if (cp == 323) return 0xad;
    return -1;
}

size_t bpe_decode_text(const char *src, size_t n, char *dst)
{
    const unsigned char *s = (const unsigned char *)src;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        size_t cl = tok_utf8_len(s + i, n - i);
        if (cl == 0) {
            dst[k++] = (char)s[i++];
            continue;
        }
        uint32_t cp = cl == 1 ? s[i] : cl == 2 ? ((uint32_t)(s[i] & 0x1f) << 6) | (s[i + 1] & 0x3f) : 0x110000;
        int b = cp_byte(cp);
        if (b >= 0) {
            dst[k++] = (char)b;
        } else {
            memcpy(dst + k, s + i, cl);
            k += cl;
        }
        i += cl;
    }
    return k;
}

/* ======================================================================
 * Pre-tokenizer families
 * ====================================================================== */

#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define RE_LLAMA3                                                                               \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                              \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN35                                                                                     \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+" \
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_CJK "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"
#define RE_BLOOM " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{0964}\\x{06D4}\\x{060C})]+"
#define RE_TEKKEN                                                                                              \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"                    \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| ?"           \
    "[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_GPT4O                                                                                          \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"                 \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"                \
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

static const char *const FAM_GPT2[] = {RE_GPT2, NULL};
static const char *const FAM_LLAMA3[] = {RE_LLAMA3, NULL};
static const char *const FAM_QWEN2[] = {RE_QWEN2, NULL};
static const char *const FAM_QWEN35[] = {RE_QWEN35, NULL};
static const char *const FAM_STARCODER[] = {"\\p{N}", RE_GPT2, NULL};
static const char *const FAM_FALCON[] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]", NULL};
static const char *const FAM_DEFAULT[] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]", NULL};
static const char *const FAM_DEEPSEEK_LLM[] = {
    "[\r\n]",
    /* the cased letters (of an older Unicode) that deepseek-llm's tokenizer.json lists */
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-"
    "\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}"
    "\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-"
    "\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-"
    "\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}"
    "\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-"
    "\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-"
    "\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-"
    "\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}"
    "\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-"
    "\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}"
    "\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}"
    "\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}"
    "\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-"
    "\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}"
    "\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+",
    "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
    "\\s+$",
    RE_CJK,
    "\\p{N}+",
    NULL};
static const char *const FAM_DEEPSEEK_CODER[] = {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_CJK, "\\p{N}", NULL};
static const char *const FAM_DEEPSEEK3[] = {
    "\\p{N}{1,3}",
    "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const FAM_BLOOM[] = {RE_BLOOM, NULL};
static const char *const FAM_VIKING[] = {RE_BLOOM, "\\p{N}", NULL};
static const char *const FAM_TEKKEN[] = {RE_TEKKEN, NULL};
static const char *const FAM_GPT4O[] = {RE_GPT4O, NULL};
static const char *const FAM_SEED_CODER[] = {
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+",
    NULL};
static const char *const FAM_BAILING[] = {
    "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*|\\s*[\\r\\n]|"
    "\\s+(?!\\S)|\\s+",
    NULL};

typedef struct bpe_family {
    const char *names; /* space-separated tokenizer.ggml.pre names */
    const char *const *regex;
    bool clean_spaces, ignore_merges, add_bos;
} bpe_family;

static const bpe_family FAMILIES[] = {
    {"default", FAM_DEFAULT, true, false, false},
    {"llama3 llama-v3 llama-bpe falcon3 falcon-h1 pixtral midm-2.0 lfm2 jina-v5-nano", FAM_LLAMA3, true, true, true},
    {"dbrx smaug-bpe chatglm-bpe glm4", FAM_LLAMA3, true, false, false},
    {"deepseek-llm", FAM_DEEPSEEK_LLM, false, false, false},
    {"deepseek-coder", FAM_DEEPSEEK_CODER, false, false, false},
    {"deepseek-v3 hunyuan-dense joyai-llm", FAM_DEEPSEEK3, false, false, false},
    {"falcon", FAM_FALCON, true, false, false},
    {"starcoder refact codeshell exaone minerva-7b mellum2", FAM_STARCODER, true, false, false},
    {"command-r smollm", FAM_STARCODER, false, false, false},
    {"gpt-2 gpt2 phi-2 mpt olmo jais jina-es jina-de gigachat jina-v2-es jina-v2-de a.x-4.0 mellum modern-bert "
     "jina-v1-en jina-v2-code roberta-bpe exaone4",
     FAM_GPT2, true, false, false},
    {"trillion granite-docling", FAM_GPT2, false, false, false},
    {"qwen2 deepseek-r1-qwen kormo f2llmv2 hunyuan grok-2 solar-open", FAM_QWEN2, false, false, false},
    {"stablelm2 megrez", FAM_QWEN2, true, false, false},
    {"qwen35", FAM_QWEN35, false, false, false},
    {"poro-chat", FAM_BLOOM, false, false, false},
    {"bloom gpt3-finnish", FAM_BLOOM, true, false, false},
    {"viking", FAM_VIKING, false, false, false},
    {"tekken", FAM_TEKKEN, false, true, true},
    {"gpt-4o llama4 kanana2 talkie minimax-m2", FAM_GPT4O, false, false, false},
    {"seed-coder", FAM_SEED_CODER, false, false, false},
    {"bailingmoe bailingmoe2 llada-moe", FAM_BAILING, false, false, false},
};

static const bpe_family *find_family(const char *pre)
{
    size_t pl = strlen(pre);
    for (size_t i = 0; i < sizeof FAMILIES / sizeof FAMILIES[0]; i++) {
        const char *p = FAMILIES[i].names;
        while (*p) {
            const char *e = strchr(p, ' ');
            size_t l = e ? (size_t)(e - p) : strlen(p);
            if (l == pl && !memcmp(p, pre, l)) return &FAMILIES[i];
            p += l + (e ? 1 : 0);
        }
    }
    return NULL;
}

static lmq_status add_regex(bpe_regex *re, const char *pat, size_t len, const char *what)
{
    if (re->n == MAX_REGEXES) return lmq_error(LMQ_ERR_LIMIT, "%s: more than %d pre-tokenizer regexes", what, MAX_REGEXES);
    int err;
    PCRE2_SIZE eoff;
    /* MULTILINE: ^ and $ at line boundaries, as in Oniguruma (which the
     * Hugging Face tokenizers use) */
    pcre2_code *c = pcre2_compile((PCRE2_SPTR)pat, len, PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_MULTILINE,
                                  &err, &eoff, NULL);
    if (!c) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(err, msg, sizeof msg);
        return lmq_error(LMQ_ERR_FORMAT, "%s: regex '%.*s' does not compile at offset %zu: %s", what,
                         (int)(len > 200 ? 200 : len), pat, (size_t)eoff, (const char *)msg);
    }
    pcre2_jit_compile(c, PCRE2_JIT_COMPLETE); /* falls back to the interpreter when JIT is unavailable */
    re->code[re->n++] = c;
    return LMQ_OK;
}

lmq_status bpe_setup(lmq_vocab *v, const lmq_meta *meta, bool *default_add_bos)
{
    const bpe_family *fam = find_family(v->pre);
    lmq_vtype et;
    uint64_t n;
    const void *data;
    bool have_re = lmq_meta_get_arr(meta, "tokenizer.lmq.pre_regex", &et, &n, &data) == LMQ_OK;
    lmq_error_clear();
    if (have_re && et != LMQ_V_STRING)
        return lmq_error(LMQ_ERR_FORMAT, "tokenizer.lmq.pre_regex: not a string array");
    if (!fam && !have_re)
        return lmq_error(LMQ_ERR_UNSUPPORTED, "tokenizer.ggml.pre: unknown pre-tokenizer '%s' (and no tokenizer.lmq.pre_regex)",
                         v->pre);
    v->re = calloc(1, sizeof *v->re);
    if (!v->re) return lmq_error(LMQ_ERR_NOMEM, "tokenizer: regexes");
    if (fam) {
        v->clean_spaces = fam->clean_spaces;
        v->ignore_merges = fam->ignore_merges;
        *default_add_bos = fam->add_bos;
    }
    lmq_status s;
    if (have_re) {
        const lmq_str *strs = data;
        for (uint64_t i = 0; i < n; i++)
            if ((s = add_regex(v->re, strs[i].ptr, (size_t)strs[i].len, "tokenizer.lmq.pre_regex"))) return s;
    } else {
        for (size_t i = 0; fam->regex[i]; i++)
            if ((s = add_regex(v->re, fam->regex[i], strlen(fam->regex[i]), "tokenizer.ggml.pre"))) return s;
    }
    return LMQ_OK;
}

void bpe_free(lmq_vocab *v)
{
    if (v->re) {
        for (size_t i = 0; i < v->re->n; i++) pcre2_code_free(v->re->code[i]);
        free(v->re);
        v->re = NULL;
    }
    free(v->merges);
    v->merges = NULL;
}

/* ======================================================================
 * Merges
 * ====================================================================== */

static inline uint64_t merge_key(int32_t l, int32_t r)
{
    return (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
}

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static const bpe_merge_slot *merge_find(const lmq_vocab *v, int32_t l, int32_t r)
{
    uint64_t key = merge_key(l, r);
    uint64_t i = mix64(key) & v->merge_mask;
    for (;;) {
        const bpe_merge_slot *s = &v->merges[i];
        if (s->key == key) return s;
        if (s->key == UINT64_MAX) return NULL;
        i = (i + 1) & v->merge_mask;
    }
}

lmq_status bpe_load_merges(lmq_vocab *v, const lmq_meta *meta)
{
    lmq_vtype et;
    uint64_t n;
    const void *data;
    lmq_status s = lmq_meta_get_arr(meta, "tokenizer.ggml.merges", &et, &n, &data);
    if (s) return s;
    if (et != LMQ_V_STRING) return lmq_error(LMQ_ERR_FORMAT, "tokenizer.ggml.merges: not a string array");
    if (n > MAX_MERGES) return lmq_error(LMQ_ERR_FORMAT, "tokenizer.ggml.merges: %llu merges (at most %u)", (unsigned long long)n, MAX_MERGES);
    uint64_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    v->merges = malloc((size_t)cap * sizeof *v->merges);
    if (!v->merges) return lmq_error(LMQ_ERR_NOMEM, "tokenizer: %llu merges", (unsigned long long)n);
    for (uint64_t i = 0; i < cap; i++) v->merges[i].key = UINT64_MAX;
    v->merge_mask = cap - 1;
    const lmq_str *strs = data;
    char *buf = NULL;
    size_t bcap = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *m = strs[i].ptr;
        size_t len = (size_t)strs[i].len;
        /* "left right": split at the first space after the first byte */
        const char *sp = len > 1 ? memchr(m + 1, ' ', len - 1) : NULL;
        if (!sp) continue;
        size_t ll = (size_t)(sp - m), rl = len - ll - 1;
        int32_t l = tok_map_find(v, m, ll), r = tok_map_find(v, sp + 1, rl);
        if (l < 0 || r < 0) continue; /* a merge of strings that are not tokens can never apply */
        if (ll + rl > bcap) {
            bcap = (ll + rl) * 2;
            char *nb = realloc(buf, bcap);
            if (!nb) {
                free(buf);
                return lmq_error(LMQ_ERR_NOMEM, "tokenizer: merges");
            }
            buf = nb;
        }
        memcpy(buf, m, ll);
        memcpy(buf + ll, sp + 1, rl);
        int32_t res = tok_map_find(v, buf, ll + rl);
        uint64_t key = merge_key(l, r);
        uint64_t j = mix64(key) & v->merge_mask;
        while (v->merges[j].key != UINT64_MAX && v->merges[j].key != key) j = (j + 1) & v->merge_mask;
        if (v->merges[j].key == key) continue; /* the first rank wins */
        v->merges[j] = (bpe_merge_slot){key, (int32_t)i, res};
    }
    free(buf);
    return LMQ_OK;
}

/* ======================================================================
 * Tokenize
 * ====================================================================== */

typedef struct piece {
    uint32_t off, len;
} piece;

typedef struct piece_vec {
    piece *p;
    size_t n, cap;
} piece_vec;

static bool pv_push(piece_vec *v, size_t off, size_t len)
{
    if (v->n == v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 64;
        piece *p = realloc(v->p, nc * sizeof *p);
        if (!p) return false;
        v->p = p;
        v->cap = nc;
    }
    v->p[v->n++] = (piece){(uint32_t)off, (uint32_t)len};
    return true;
}

/* Splits every piece of `in` with one regex into `out`. */
static lmq_status split_one(pcre2_code *re, const char *text, const piece_vec *in, piece_vec *out,
                            pcre2_match_data *md, pcre2_match_context *mc)
{
    out->n = 0;
    for (size_t i = 0; i < in->n; i++) {
        const char *s = text + in->p[i].off;
        size_t n = in->p[i].len, pos = 0, gap = 0;
        while (pos < n) {
            int rc = pcre2_match(re, (PCRE2_SPTR)s, n, pos, 0, md, mc);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0) {
                PCRE2_UCHAR msg[120];
                pcre2_get_error_message(rc, msg, sizeof msg);
                return lmq_error(LMQ_ERR_RUNTIME, "tokenize: pre-tokenizer regex failed: %s", (const char *)msg);
            }
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            size_t ms = ov[0], me = ov[1];
            if (me <= ms) { /* empty match: ignore it, move on by one character */
                size_t cl = tok_utf8_len((const unsigned char *)s + pos, n - pos);
                pos += cl ? cl : 1;
                continue;
            }
            if (ms > gap && !pv_push(out, in->p[i].off + gap, ms - gap)) goto oom;
            if (!pv_push(out, in->p[i].off + ms, me - ms)) goto oom;
            gap = pos = me;
        }
        if (n > gap && !pv_push(out, in->p[i].off + gap, n - gap)) goto oom;
    }
    return LMQ_OK;
oom:
    return lmq_error(LMQ_ERR_NOMEM, "tokenize: pre-tokenizer pieces");
}

typedef struct bpe_sym {
    int32_t prev, next;
    int32_t id;          /* token id of the symbol's text, -1 if none */
    uint32_t off, n;     /* bytes of the piece (original bytes); n == 0: merged away */
} bpe_sym;

typedef struct bpe_bigram {
    int32_t rank;
    int32_t left, right;
    int32_t lid, rid;    /* ids when queued (stale check) */
    int32_t result;
} bpe_bigram;

typedef struct bpe_heap {
    bpe_bigram *a;
    size_t n, cap;
} bpe_heap;

static inline bool bb_before(const bpe_bigram *a, const bpe_bigram *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static bool bheap_push(bpe_heap *h, bpe_bigram x)
{
    if (h->n == h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 64;
        bpe_bigram *p = realloc(h->a, nc * sizeof *p);
        if (!p) return false;
        h->a = p;
        h->cap = nc;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!bb_before(&x, &h->a[parent])) break;
        h->a[i] = h->a[parent];
        i = parent;
    }
    h->a[i] = x;
    return true;
}

static bpe_bigram bheap_pop(bpe_heap *h)
{
    bpe_bigram top = h->a[0];
    bpe_bigram last = h->a[--h->n];
    size_t i = 0, n = h->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bb_before(&h->a[c + 1], &h->a[c])) c++;
        if (!bb_before(&h->a[c], &last)) break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (n > 0) h->a[i] = last;
    return top;
}

typedef struct bpe_work {
    bpe_sym *sym;
    size_t sym_cap;
    char *enc;           /* byte-level unicode of the piece */
    size_t enc_cap;
    bpe_heap heap;
} bpe_work;

static bool add_bigram(const lmq_vocab *v, bpe_work *w, int32_t l, int32_t r)
{
    if (l < 0 || r < 0) return true;
    int32_t lid = w->sym[l].id, rid = w->sym[r].id;
    if (lid < 0 || rid < 0) return true;
    const bpe_merge_slot *m = merge_find(v, lid, rid);
    if (!m) return true;
    return bheap_push(&w->heap, (bpe_bigram){m->rank, l, r, lid, rid, m->result});
}

static lmq_status bpe_piece(const lmq_vocab *v, const unsigned char *s, size_t n, bpe_work *w, tok_out *out)
{
    if (n > w->sym_cap) {
        free(w->sym);
        w->sym = malloc(n * sizeof *w->sym);
        w->sym_cap = w->sym ? n : 0;
        if (!w->sym) return lmq_error(LMQ_ERR_NOMEM, "tokenize: piece of %zu bytes", n);
    }
    if (v->ignore_merges) {
        if (2 * n > w->enc_cap) {
            free(w->enc);
            w->enc = malloc(2 * n);
            w->enc_cap = w->enc ? 2 * n : 0;
            if (!w->enc) return lmq_error(LMQ_ERR_NOMEM, "tokenize: piece of %zu bytes", n);
        }
        size_t k = 0;
        for (size_t i = 0; i < n; i++) k += bpe_byte_char(s[i], w->enc + k);
        int32_t id = tok_map_find(v, w->enc, k);
        if (id >= 0) {
            tok_out_push(out, id);
            return LMQ_OK;
        }
    }
    bpe_sym *sym = w->sym;
    for (size_t i = 0; i < n; i++)
        sym[i] = (bpe_sym){(int32_t)i - 1, i + 1 == n ? -1 : (int32_t)i + 1, v->byte_tok[s[i]], (uint32_t)i, 1};
    w->heap.n = 0;
    for (size_t i = 1; i < n; i++)
        if (!add_bigram(v, w, (int32_t)i - 1, (int32_t)i)) goto oom;
    while (w->heap.n > 0) {
        bpe_bigram bg = bheap_pop(&w->heap);
        bpe_sym *l = &sym[bg.left], *r = &sym[bg.right];
        if (l->n == 0 || r->n == 0 || l->id != bg.lid || r->id != bg.rid) continue;
        l->n += r->n;
        l->id = bg.result;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = bg.left;
        if (!add_bigram(v, w, l->prev, bg.left) || !add_bigram(v, w, bg.left, l->next)) goto oom;
    }
    for (int32_t i = 0; i != -1; i = sym[i].next) {
        if (sym[i].id >= 0) {
            tok_out_push(out, sym[i].id);
            continue;
        }
        for (uint32_t j = 0; j < sym[i].n; j++) {
            int32_t b = v->byte_tok[s[sym[i].off + j]];
            if (b >= 0) tok_out_push(out, b);
        }
    }
    return LMQ_OK;
oom:
    return lmq_error(LMQ_ERR_NOMEM, "tokenize: merge queue");
}

lmq_status bpe_tokenize(const lmq_vocab *v, const char *text, size_t len, tok_out *out)
{
    if (len == 0) return LMQ_OK;
    if (len > UINT32_MAX) return lmq_error(LMQ_ERR_LIMIT, "tokenize: fragment of %zu bytes is too long", len);
    lmq_status s = LMQ_OK;
    piece_vec a = {0}, b = {0};
    bpe_work w = {0};
    pcre2_match_data *md = NULL;
    pcre2_match_context *mc = NULL;
    pcre2_jit_stack *js = NULL;

    if (!pv_push(&a, 0, len)) goto oom;
    md = pcre2_match_data_create(4, NULL);
    mc = pcre2_match_context_create(NULL);
    js = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, NULL);
    if (!md || !mc || !js) goto oom;
    pcre2_jit_stack_assign(mc, NULL, js);
    for (size_t i = 0; i < v->re->n; i++) {
        if ((s = split_one(v->re->code[i], text, &a, &b, md, mc))) goto done;
        piece_vec t = a;
        a = b;
        b = t;
    }
    for (size_t i = 0; i < a.n && !out->oom; i++)
        if ((s = bpe_piece(v, (const unsigned char *)text + a.p[i].off, a.p[i].len, &w, out))) goto done;
    goto done;
oom:
    s = lmq_error(LMQ_ERR_NOMEM, "tokenize: pre-tokenizer");
done:
    pcre2_jit_stack_free(js);
    pcre2_match_context_free(mc);
    pcre2_match_data_free(md);
    free(a.p);
    free(b.p);
    free(w.sym);
    free(w.enc);
    free(w.heap.a);
    return s;
}

/* ======================================================================
 * Gemma 4: ranked merges over raw UTF-8 (Hugging Face BPE with
 * byte_fallback and fuse_unk, after the Replace(" ", U+2581) normalizer)
 * ====================================================================== */

/* Queues the pair (l, r) when a merge joins them into a token. */
static bool ubpe_bigram(const lmq_vocab *v, bpe_work *w, int32_t l, int32_t r)
{
    if (l < 0 || r < 0) return true;
    int32_t lid = w->sym[l].id, rid = w->sym[r].id;
    if (lid < 0 || rid < 0) return true;
    const bpe_merge_slot *m = merge_find(v, lid, rid);
    if (!m || m->result < 0) return true; /* Hugging Face refuses a merge whose result is no token */
    return bheap_push(&w->heap, (bpe_bigram){m->rank, l, r, lid, rid, m->result});
}

/* Pushes one initial symbol; consecutive unk symbols fuse into one. */
static void ubpe_sym(bpe_work *w, int32_t *n, int32_t id, uint32_t off, uint32_t len, int32_t unk)
{
    if (id == unk && *n > 0 && w->sym[*n - 1].id == unk) {
        w->sym[*n - 1].n += len;
        return;
    }
    w->sym[*n] = (bpe_sym){*n - 1, -1, id, off, len};
    if (*n > 0) w->sym[*n - 1].next = *n;
    (*n)++;
}

/* Merges one segment s[0..len) (no merge can cross its ends). */
static lmq_status ubpe_segment(const lmq_vocab *v, const char *s, size_t len, bpe_work *w, tok_out *out)
{
    int32_t n = 0;
    for (size_t off = 0; off < len;) {
        size_t cl = tok_utf8_len((const unsigned char *)s + off, len - off);
        if (cl == 0) cl = 1; /* a byte outside any valid sequence is a character of its own */
        int32_t id = tok_map_find(v, s + off, cl);
        if (id >= 0) {
            ubpe_sym(w, &n, id, (uint32_t)off, (uint32_t)cl, v->unk);
        } else {
            bool all = v->byte_fallback;
            for (size_t j = 0; all && j < cl; j++) all = v->byte_tok[(unsigned char)s[off + j]] >= 0;
            if (all) {
                for (size_t j = 0; j < cl; j++)
                    ubpe_sym(w, &n, v->byte_tok[(unsigned char)s[off + j]], (uint32_t)(off + j), 1, v->unk);
            } else {
                ubpe_sym(w, &n, v->unk, (uint32_t)off, (uint32_t)cl, v->unk);
            }
        }
        off += cl;
    }
    w->heap.n = 0;
    for (int32_t i = 1; i < n; i++)
        if (!ubpe_bigram(v, w, i - 1, i)) goto oom;
    while (w->heap.n > 0) {
        bpe_bigram bg = bheap_pop(&w->heap);
        bpe_sym *l = &w->sym[bg.left], *r = &w->sym[bg.right];
        if (l->n == 0 || r->n == 0 || l->id != bg.lid || r->id != bg.rid) continue;
        l->n += r->n;
        l->id = bg.result;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) w->sym[r->next].prev = bg.left;
        if (!ubpe_bigram(v, w, l->prev, bg.left) || !ubpe_bigram(v, w, bg.left, l->next)) goto oom;
    }
    for (int32_t i = 0; i >= 0 && n > 0; i = w->sym[i].next)
        if (w->sym[i].id >= 0) tok_out_push(out, w->sym[i].id); /* an unk without an unk token: nothing */
    return LMQ_OK;
oom:
    return lmq_error(LMQ_ERR_NOMEM, "tokenize: merge queue for %zu bytes", len);
}

lmq_status ubpe_tokenize(const lmq_vocab *v, const char *text, size_t len, tok_out *out)
{
    if (len == 0) return LMQ_OK;
    if (len > INT32_MAX / 2) return lmq_error(LMQ_ERR_LIMIT, "tokenize: fragment of %zu bytes is too long", len);
    bpe_work w = {0};
    w.sym = malloc(len * sizeof *w.sym);
    if (!w.sym) return lmq_error(LMQ_ERR_NOMEM, "tokenize: %zu bytes", len);
    /* As for SentencePiece (tokenizer_spm.c): bytes in no multi-byte token,
     * and word starts when no token continues across one, are places no
     * merge can cross (every merge makes a token), so the pieces between
     * them are merged one by one with the same result as one queue. */
    lmq_status s = LMQ_OK;
    size_t start = 0;
    for (size_t i = 0; i <= len && !s; i++) {
        unsigned char c = i < len ? (unsigned char)text[i] : 0;
        if (i < len && c == 0xe2 && v->spm_word_split && i > start && i + 3 <= len &&
            !memcmp(text + i, "\xe2\x96\x81", 3) && (i < 3 || memcmp(text + i - 3, "\xe2\x96\x81", 3))) {
            s = ubpe_segment(v, text + start, i - start, &w, out);
            start = i;
            continue;
        }
        if (i < len && !(c < 128 && v->spm_sep[c])) continue;
        if (i > start) s = ubpe_segment(v, text + start, i - start, &w, out);
        if (!s && i < len) s = ubpe_segment(v, text + i, 1, &w, out);
        start = i + 1;
    }
    free(w.sym);
    free(w.heap.a);
    return s;
}
