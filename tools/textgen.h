/* textgen.h — what `lmq run`, `lmq chat` and `lmq serve` share around the
 * runtime's generation API (lmq_gen, runtime/model/generate.c): the
 * generation options, chat rendering, a byte buffer, and serve's adapter. */
#ifndef LMQ_TEXTGEN_H
#define LMQ_TEXTGEN_H
#include <stdbool.h>
#include <stdio.h>

#include "lmq_runtime.h"

#define TEXTGEN_MAX_STOPS LMQ_GEN_MAX_STOPS

typedef struct textgen_opts {
    int32_t n_predict;           /* < 0: until end of generation or context full */
    const char *stops[TEXTGEN_MAX_STOPS];
    int n_stops;
    FILE *out;                   /* streamed text goes here (may be NULL) */
    /* Control tokens come out as their text ("<|channel|>", "<|end|>"), for
     * a caller that parses them (the harmony splitter of `lmq chat`); false
     * (the default) drops them. The end-of-generation token that stops the
     * loop is never part of the text. */
    bool unparse_special;
} textgen_opts;

typedef struct textgen_stats {
    int32_t n_prompt, n_gen;
    double t_prompt, t_gen;      /* seconds */
    bool stopped_eog, stopped_stop, stopped_ctx;
} textgen_stats;

/* A growing byte buffer (NUL-terminated when non-empty). */
typedef struct textgen_buf {
    char *p;
    size_t len, cap;
} textgen_buf;
bool textgen_buf_add(textgen_buf *b, const char *s, size_t n);

/* One generation of `lmq serve` through the runtime's generator
 * (lmq_gen, lmq_rt_model.h). textgen_begin/next/end keep serve's calls as
 * they were until serve adopts lmq_gen itself; run and chat use lmq_gen
 * directly. */
typedef struct textgen {
    lmq_gen *gen;
    lmq_sampler *smp;            /* the caller's, fed every generated token */
    const lmq_vocab *v;
    textgen_stats st;
    bool done;
    /* constrained decoding (textgen_constrain): the matcher of this
     * generation, the caller's vocabulary pieces and mask bytes */
    lmq_json_matcher *jm;
    const lmq_json_vocab *jv;
    uint8_t *mask;
    int32_t end_tok;             /* the end-of-generation token chosen when the document is done */
    bool json_dead;              /* the mask allowed nothing, or the drawn token left the document: failed */
    bool json_off;               /* (with json_dead) the drawn token's bytes were refused */
} textgen;

/* Renders a conversation (JSON text: a list of {role, content} with string
 * contents) up to where the assistant speaks: with the model's chat template,
 * or, when tmpl is NULL, the plain "User: ...\nAssistant:" fallback of
 * docs/CHAT.md. *out is malloc'd. Template failures name line and column. */
lmq_status textgen_render_chat(const lmq_chat_template *tmpl, const char *messages_json, const char *bos,
                               const char *eos, char **out);

/* Prompt-prefix reuse (`lmq chat` turns, `lmq serve` slots): the number of
 * leading tokens of toks[0..n) that the context already holds (cache[0..n_cache)
 * lists its tokens), at most n - 1 so that the last prompt token is evaluated
 * and gives logits. Truncates the KV cache there and returns where it resumes
 * (lower when a sliding-window cache had to restart: lmq_n_past()). */
size_t textgen_keep_prefix(lmq_context *ctx, const int32_t *cache, size_t n_cache, const int32_t *toks, size_t n);

/* Tokenizes text into a malloc'd array (grows as needed). */
lmq_status textgen_tokenize(const lmq_vocab *v, const char *text, size_t len, bool add_special, bool parse_special,
                            int32_t **out, size_t *n);

/* Starts generating after `prompt`, appended to what the context holds
 * (each prompt token is fed to smp; smp is not reset). Nothing is evaluated
 * before the first textgen_next. */
lmq_status textgen_begin(textgen *g, lmq_context *ctx, const lmq_vocab *v, lmq_sampler *smp, const int32_t *prompt,
                         size_t n_prompt, const textgen_opts *opts);
/* Constrains the generation begun with textgen_begin to the documents of
 * schema (lmq_rt_json.h): before each draw the mask of jv (built from
 * lmq_token_to_piece(special = false) pieces; the caller's, one generation
 * at a time) goes to the sampler; after it the token's bytes go to the
 * matcher; once the document is whole the turn ends (an end-of-generation
 * token, without a draw). A dead end (nothing allowed) ends the generation
 * with LMQ_ERR_FORMAT from textgen_next. mask holds (n_vocab + 7) / 8 bytes
 * and lives until textgen_end. */
lmq_status textgen_constrain(textgen *g, const lmq_json_schema *schema, const lmq_json_vocab *jv, uint8_t *mask);
/* The vocabulary pieces textgen_constrain expects (special = false). */
lmq_status textgen_json_vocab(const lmq_vocab *v, int32_t n_vocab, lmq_json_vocab **out);
/* One step (lmq_gen_next); g->done is set after the last piece. */
lmq_status textgen_next(textgen *g, const char **text, size_t *n);
void textgen_end(textgen *g); /* accepts a zeroed textgen */

/* The runtime's generation parameters for these options (out and
 * unparse_special aside). */
lmq_gen_params textgen_params(const textgen_opts *o);
#endif
