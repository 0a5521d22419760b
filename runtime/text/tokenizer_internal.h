/* tokenizer_internal.h — private to runtime/tokenizer*.c: the vocabulary
 * layout shared by the SentencePiece and byte-level BPE tokenizers. */
#ifndef LMQ_TOKENIZER_INTERNAL_H
#define LMQ_TOKENIZER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lmq_rt_tokenizer.h"

/* Token attributes (llama.cpp's llama_token_attr bits). */
enum {
    TOK_ATTR_UNKNOWN = 1 << 0,
    TOK_ATTR_UNUSED = 1 << 1,
    TOK_ATTR_NORMAL = 1 << 2,
    TOK_ATTR_CONTROL = 1 << 3,
    TOK_ATTR_USER_DEFINED = 1 << 4,
    TOK_ATTR_BYTE = 1 << 5,
    TOK_ATTR_LSTRIP = 1 << 7,
    TOK_ATTR_RSTRIP = 1 << 8,
};

typedef struct tok_entry {
    uint32_t off, len;     /* stored text: v->text + off, len bytes */
    uint32_t poff, plen;   /* decoded piece (special form): v->pieces + poff */
    float score;
    uint16_t attr;         /* TOK_ATTR_* */
    uint8_t type;          /* lmq_token_type as stored */
} tok_entry;

/* Open-addressing hash map from token text to id. */
typedef struct tok_map {
    uint32_t *slot_hash;   /* low 32 bits of the hash, for quick rejects */
    int32_t *slot_id;      /* -1 = empty */
    uint32_t mask;         /* capacity - 1 (power of two) */
} tok_map;

/* BPE merge table: (left id, right id) -> (rank, merged id). */
typedef struct bpe_merge_slot {
    uint64_t key;          /* (uint64)left << 32 | right; UINT64_MAX = empty */
    int32_t rank;
    int32_t result;
} bpe_merge_slot;

typedef struct bpe_regex bpe_regex; /* compiled pre-tokenizer (tokenizer_bpe.c) */

/* Byte trie of the special tokens' texts, to find which of them occur in a
 * text in one pass. */
typedef struct spec_node {
    int32_t child, sibling; /* node indices, -1 = none */
    int32_t special;        /* index into lmq_vocab.special ending here, or -1 */
    uint8_t byte;
} spec_node;

struct lmq_vocab {
    lmq_vocab_type type;
    char pre[64];
    int32_t n_tokens;
    char *text;            /* all token texts, concatenated */
    char *pieces;          /* all decoded pieces, concatenated */
    tok_entry *tok;        /* [n_tokens] */
    tok_map map;
    size_t max_piece;

    int32_t bos, eos, eot, eom, unk, pad, nl;
    bool add_bos, add_eos;
    bool add_space_prefix; /* SPM dummy prefix; BPE: ByteLevel add_prefix_space */
    bool clean_spaces;     /* detokenizer clean-up of " ." etc. */
    bool ignore_merges;    /* BPE: a whole pre-token found in the vocab is kept */
    bool byte_fallback;    /* SPM: unknown characters become <0xNN> tokens */
    bool nfc;              /* apply Unicode NFC before tokenizing */

    int32_t byte_tok[256]; /* SPM: <0xNN> ids; BPE: ids of the byte-level chars; -1 none */
    /* SPM: ASCII bytes that occur in no token longer than one byte; no merge
     * can cross them, so the merge queue runs on the text between them */
    bool spm_sep[128];
    uint32_t *spm_rank;    /* SPM: dense rank of each token's score, 0 = highest */
    /* SPM: no token has U+2581 right after another character than U+2581,
     * so no merge crosses the start of a word (a U+2581 after a non-U+2581) */
    bool spm_word_split;

    int32_t *special;      /* CONTROL/USER_DEFINED/UNKNOWN ids, longest text first */
    size_t n_special;
    spec_node *trie;       /* [n_trie], node 0 = root */
    size_t n_trie;
    int32_t *eog;          /* sorted ascending */
    size_t n_eog;

    /* BPE */
    bpe_merge_slot *merges;
    uint64_t merge_mask;
    bpe_regex *re;
};

/* ---- tokenizer.c ---- */

/* Hash of a short string (token texts are a few bytes: an inline
 * multiply-xor over 8-byte words beats a library call). */
static inline uint64_t tok_hash(const char *s, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t x;
        memcpy(&x, s, 8);
        h = (h ^ x) * 0xff51afd7ed558ccdULL;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) x |= (uint64_t)(unsigned char)s[i] << (8 * i);
    h = (h ^ x) * 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 29);
}

/* Id of the token with text s[0..n), or -1. */
static inline int32_t tok_map_find(const lmq_vocab *v, const char *s, size_t n)
{
    uint64_t h = tok_hash(s, n);
    uint32_t i = (uint32_t)h & v->map.mask;
    for (;;) {
        int32_t o = v->map.slot_id[i];
        if (o < 0) return -1;
        if (v->map.slot_hash[i] == (uint32_t)h && v->tok[o].len == n && !memcmp(v->text + v->tok[o].off, s, n))
            return o;
        i = (i + 1) & v->map.mask;
    }
}

/* Growable id buffer used while tokenizing. */
typedef struct tok_out {
    int32_t *ids;
    size_t n, cap;
    bool oom;
} tok_out;
void tok_out_push(tok_out *o, int32_t id);

/* Length of the well-formed UTF-8 sequence at s[0..n) (1..4), or 0 when
 * s[0] does not start one (the byte then counts as a character of its own). */
size_t tok_utf8_len(const unsigned char *s, size_t n);

/* ---- tokenizer_spm.c ---- */
/* Tokenizes one raw fragment (already escaped: spaces as U+2581, dummy
 * prefix added). */
lmq_status spm_tokenize(const lmq_vocab *v, const char *text, size_t len, tok_out *out);

/* ---- tokenizer_bpe.c ---- */
/* Compiles the pre-tokenizer of `v` from tokenizer.lmq.pre_regex (when
 * given) or the family named by v->pre; also sets the family's flags
 * (clean_spaces, ignore_merges, add_bos defaults) unless `meta` overrides. */
lmq_status bpe_setup(lmq_vocab *v, const lmq_meta *meta, bool *default_add_bos);
lmq_status bpe_load_merges(lmq_vocab *v, const lmq_meta *meta);
void bpe_free(lmq_vocab *v);
lmq_status bpe_tokenize(const lmq_vocab *v, const char *text, size_t len, tok_out *out);
/* Gemma 4 (tokenizer.ggml.model "gemma4"): ranked merges over the UTF-8
 * characters of one escaped fragment (spaces already U+2581), no
 * pre-tokenization; characters that are not tokens become their <0xNN>
 * tokens before merging (Hugging Face's BPE byte_fallback), or one fused
 * unk when a byte token is missing. */
lmq_status ubpe_tokenize(const lmq_vocab *v, const char *text, size_t len, tok_out *out);
/* Decodes byte-level unicode text (each code point one byte) into dst
 * (capacity >= n); code points outside the map are copied as UTF-8. */
size_t bpe_decode_text(const char *src, size_t n, char *dst);
/* Byte-level unicode (UTF-8, 1 or 2 bytes) of byte b; returns its length. */
size_t bpe_byte_char(uint8_t b, char out[2]);

/* ---- unicode_nfc.c ---- */
/* NFC of src[0..n) into a malloc'd buffer; invalid UTF-8 bytes are copied
 * unchanged. Returns NULL on allocation failure. */
char *tok_nfc(const char *src, size_t n, size_t *out_len);
/* True when src has nothing NFC could change (fast check). */
bool tok_nfc_quick(const char *src, size_t n);

#endif
