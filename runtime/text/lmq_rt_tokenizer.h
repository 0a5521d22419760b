/* lmq_rt_tokenizer.h — section of lmq_runtime.h: tokenizers.
 *
 * A vocabulary is built from GGUF-named metadata only (tokenizer.ggml.* plus
 * lmq's tokenizer.lmq.* extensions, see docs/TOKENIZER.md), so the same code
 * serves vocab-only GGUF files, .lmq containers and Hugging Face directories
 * (through lmq_hf_tokenizer_to_meta in the convert module). Two models:
 *
 *   tokenizer.ggml.model = "llama"  SentencePiece BPE: score-ordered merges of
 *                                    UTF-8 characters, U+2581 as the space
 *                                    marker, dummy prefix, <0xNN> byte fallback;
 *   tokenizer.ggml.model = "gpt2"   byte-level BPE: pre-tokenizer regexes
 *                                    (PCRE2, per tokenizer.ggml.pre family or
 *                                    tokenizer.lmq.pre_regex), GPT-2's
 *                                    byte-to-unicode map, rank-ordered merges.
 *
 * Behaviour follows llama.cpp's llama-vocab.cpp (special-token partitioning,
 * dummy-prefix rule, detokenizer clean-up) so that ids match llama.cpp and the
 * Hugging Face tokenizers on the same inputs. The deliberate differences are
 * listed in docs/TOKENIZER.md (no double BOS, invalid UTF-8 handling).
 *
 * Thread safety: a loaded lmq_vocab is immutable; any number of threads may
 * tokenize and detokenize with it concurrently.
 *
 * Input text is a byte string and need not be valid UTF-8: each byte that is
 * not part of a well-formed UTF-8 sequence is treated as a character of its
 * own, which SentencePiece encodes as its <0xNN> byte token (or unk when the
 * vocab has no byte tokens) and byte-level BPE encodes like any other byte.
 * Tokenizing never fails on content, and detokenize(tokenize(x)) gives x back
 * byte for byte whenever the vocabulary can represent x (see the doc).
 */
#ifndef LMQ_RT_TOKENIZER_H
#define LMQ_RT_TOKENIZER_H
/* liblmq exports what its public headers declare, nothing else (docs/API.md) */
#pragma GCC visibility push(default)

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmq_format.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lmq_vocab lmq_vocab;

typedef enum lmq_vocab_type {
    LMQ_VOCAB_SPM = 1,   /* tokenizer.ggml.model "llama" */
    LMQ_VOCAB_BPE = 2,   /* tokenizer.ggml.model "gpt2" */
    LMQ_VOCAB_GEMMA4 = 3 /* tokenizer.ggml.model "gemma4": ranked merges over raw UTF-8, spaces as U+2581 */
} lmq_vocab_type;

/* tokenizer.ggml.token_type values (GGUF / llama.cpp numbering). */
typedef enum lmq_token_type {
    LMQ_TOKEN_UNDEFINED = 0,
    LMQ_TOKEN_NORMAL = 1,
    LMQ_TOKEN_UNKNOWN = 2,
    LMQ_TOKEN_CONTROL = 3,
    LMQ_TOKEN_USER_DEFINED = 4,
    LMQ_TOKEN_UNUSED = 5,
    LMQ_TOKEN_BYTE = 6,
    LMQ_TOKEN_TYPE_COUNT
} lmq_token_type;

/* Builds a vocabulary from `meta` (which may be freed afterwards: everything
 * is copied). Requires tokenizer.ggml.model ("llama", "gpt2" or "gemma4")
 * and tokenizer.ggml.tokens; "gpt2" and "gemma4" also need
 * tokenizer.ggml.merges. Fails with
 * LMQ_ERR_NOT_FOUND (missing key), LMQ_ERR_FORMAT (wrong type, arrays of
 * mismatched length, duplicate token text, a pre-tokenizer regex that does
 * not compile) or LMQ_ERR_UNSUPPORTED (another tokenizer model or an unknown
 * tokenizer.ggml.pre without tokenizer.lmq.pre_regex), naming the key. */
lmq_status lmq_vocab_load(const lmq_meta *meta, lmq_vocab **out);
void lmq_vocab_free(lmq_vocab *v);

lmq_vocab_type lmq_vocab_type_of(const lmq_vocab *v);
/* Pre-tokenizer family name ("default" for SPM vocabs). Never NULL. */
const char *lmq_vocab_pre(const lmq_vocab *v);
int32_t lmq_vocab_n_tokens(const lmq_vocab *v);

/* Special token ids, or -1 when the vocabulary has none. */
int32_t lmq_vocab_bos(const lmq_vocab *v);
int32_t lmq_vocab_eos(const lmq_vocab *v);
int32_t lmq_vocab_eot(const lmq_vocab *v); /* end of turn: <|eot_id|>, <|im_end|>, ... */
int32_t lmq_vocab_eom(const lmq_vocab *v); /* end of message: <|eom_id|> */
int32_t lmq_vocab_unk(const lmq_vocab *v);
int32_t lmq_vocab_pad(const lmq_vocab *v);
int32_t lmq_vocab_nl(const lmq_vocab *v); /* the token of "\n" */

/* Whether tokenizing with add_special prepends BOS / appends EOS. */
bool lmq_vocab_add_bos(const lmq_vocab *v);
bool lmq_vocab_add_eos(const lmq_vocab *v);

/* End of generation: eos, eot, eom, the ids of tokenizer.lmq.eog_token_ids
 * and the tokens llama.cpp recognises by text (<|im_end|>, <|eot_id|>,
 * <|endoftext|>, <end_of_turn>, ...). False for ids out of range. */
bool lmq_vocab_is_eog(const lmq_vocab *v, int32_t id);
/* Number of end-of-generation ids and the i-th one (ascending). */
size_t lmq_vocab_n_eog(const lmq_vocab *v);
int32_t lmq_vocab_eog(const lmq_vocab *v, size_t i);

/* Per-token data; LMQ_TOKEN_UNDEFINED / NULL / 0 for ids out of range.
 * lmq_vocab_token_type reports CONTROL for tokens llama.cpp promotes to
 * control by their text (eot/eog tokens stored as normal). */
lmq_token_type lmq_vocab_token_type(const lmq_vocab *v, int32_t id);
/* The token's text as stored in the vocabulary (U+2581 / byte-level unicode
 * form, not decoded); not NUL-terminated-safe for embedded NULs: use *len. */
const char *lmq_vocab_token_text(const lmq_vocab *v, int32_t id, size_t *len);
float lmq_vocab_token_score(const lmq_vocab *v, int32_t id);
/* Id of the token whose stored text is exactly text[0..len), or -1. */
int32_t lmq_vocab_find(const lmq_vocab *v, const char *text, size_t len);
/* Longest decoded piece in bytes (for sizing buffers). */
size_t lmq_vocab_max_piece_len(const lmq_vocab *v);

/* ---- tokenize ------------------------------------------------------------
 * Tokenizes text[0..len). add_special: prepend BOS / append EOS as the
 * vocabulary says (BOS is not added again when the text itself starts with
 * the BOS token under parse_special). parse_special: control tokens written
 * in the text ("<s>", "<|im_start|>") become their ids; user-defined tokens
 * are always matched, as in llama.cpp and Hugging Face.
 * Writes at most `cap` ids to `out` (out may be NULL when cap is 0) and the
 * full count to *n_out; when the count exceeds cap returns LMQ_ERR_LIMIT
 * (the first cap ids are written), so a caller can retry with *n_out.
 * Other failures: LMQ_ERR_NOMEM, LMQ_ERR_LIMIT for a text fragment (between
 * special tokens) over 1 GiB, LMQ_ERR_INVALID_ARG for NULL arguments. */
lmq_status lmq_tokenize(const lmq_vocab *v, const char *text, size_t len, bool add_special,
                        bool parse_special, int32_t *out, size_t cap, size_t *n_out);
/* Same, into a malloc'd array (*out, free() it; NULL when the count is 0). */
lmq_status lmq_tokenize_alloc(const lmq_vocab *v, const char *text, size_t len,
                              bool add_special, bool parse_special, int32_t **out,
                              size_t *n_out);

/* ---- detokenize ----------------------------------------------------------
 * The decoded bytes of one token (U+2581 -> space, <0xNN> -> the byte,
 * byte-level unicode -> bytes; control/unknown tokens give their text when
 * `special` is true and nothing otherwise; user-defined tokens always give
 * their text). Returns a pointer into the vocabulary (valid while it lives;
 * not NUL-terminated) and its length in *len; NULL and 0 for ids out of
 * range. */
const char *lmq_token_to_piece(const lmq_vocab *v, int32_t id, bool special, size_t *len);

/* Decodes n ids into out[0..cap) as llama.cpp's llama_detokenize does:
 * pieces concatenated; for vocabs with a dummy prefix (SentencePiece) the
 * leading space of the first piece is removed (a BOS that is not dropped
 * counts as the first piece, so "<s>", "▁Hello" gives " Hello");
 * remove_special drops a leading BOS / a trailing EOS when the vocabulary
 * adds them (the space rule then applies to the piece after the BOS, so
 * that detokenize(tokenize(x, add_special), remove_special) == x; llama.cpp
 * keeps that space); unparse_special renders
 * control tokens' text; the vocabulary's clean-up of spaces before
 * punctuation (byte-level BPE families that have it) is applied.
 * Out-of-range ids are LMQ_ERR_INVALID_ARG. Writes the length to *n_out; if
 * it exceeds cap, returns LMQ_ERR_LIMIT (out holds the first cap bytes).
 * The output is not NUL-terminated. */
lmq_status lmq_detokenize(const lmq_vocab *v, const int32_t *ids, size_t n,
                          bool remove_special, bool unparse_special, char *out, size_t cap,
                          size_t *n_out);
/* Same, into a malloc'd NUL-terminated buffer (*out, free() it). */
lmq_status lmq_detokenize_alloc(const lmq_vocab *v, const int32_t *ids, size_t n,
                                bool remove_special, bool unparse_special, char **out,
                                size_t *n_out);

/* ---- streaming decoder ---------------------------------------------------
 * Turns generated ids into text as they come, holding back the bytes of a
 * UTF-8 sequence that is not complete yet (a character split over byte
 * tokens), so that every chunk it emits ends on a character boundary.
 * Bytes that can never form a valid sequence are emitted as they are (the
 * stream never changes bytes, it only delays them). at_text_start: strip the
 * leading space of the first piece as lmq_detokenize does (use it when the
 * stream decodes a text from its beginning; a continuation of a prompt keeps
 * its spaces). No clean-up of spaces is done. Usage: */
/*   lmq_detok_stream st; lmq_detok_stream_init(&st, v, false, false);
 *   for each id: lmq_detok_stream_push(&st, id, buf, sizeof buf, &n); write(buf, n);
 *   at the end:  lmq_detok_stream_flush(&st, buf, sizeof buf, &n); write(buf, n); */
typedef struct lmq_detok_stream {
    const lmq_vocab *vocab;
    bool unparse_special;
    bool strip_space; /* the next non-empty piece loses one leading space */
    uint8_t n_pend;   /* held-back bytes of an incomplete UTF-8 sequence */
    uint8_t pend[7];
} lmq_detok_stream;

void lmq_detok_stream_init(lmq_detok_stream *s, const lmq_vocab *v, bool unparse_special,
                           bool at_text_start);
/* Adds one id; writes the bytes now complete to out (at most
 * lmq_vocab_max_piece_len(v) + 4 bytes; LMQ_ERR_LIMIT and nothing consumed
 * when cap is smaller). LMQ_ERR_INVALID_ARG for ids out of range. */
lmq_status lmq_detok_stream_push(lmq_detok_stream *s, int32_t id, char *out, size_t cap,
                                 size_t *n_out);
/* Emits whatever is held back (at most 4 bytes; possibly an incomplete
 * sequence, unchanged). */
lmq_status lmq_detok_stream_flush(lmq_detok_stream *s, char *out, size_t cap, size_t *n_out);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif
