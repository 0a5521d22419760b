/* textgen.h — generation loop shared by `lmq run`, `lmq chat` and `lmq serve`:
 * sampling, streaming detokenization, stop strings matched across token
 * boundaries. textgen_run is the whole loop; textgen_begin/next/end are the
 * same loop one token at a time, for callers that interleave it with I/O. */
#ifndef LMQ_TEXTGEN_H
#define LMQ_TEXTGEN_H
#include <stdbool.h>
#include <stdio.h>

#include "lmq_runtime.h"

#define TEXTGEN_MAX_STOPS 16

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

/* State of one generation (fields private to textgen.c). */
typedef struct textgen {
    lmq_context *ctx;
    const lmq_vocab *v;
    lmq_sampler *smp;
    textgen_opts o;
    textgen_stats st;
    lmq_detok_stream ds;
    char *piece;                 /* one detokenized token */
    size_t piece_cap;
    textgen_buf pend;            /* text held back while it may become a stop string */
    size_t consumed;             /* bytes of pend handed out by the last textgen_next */
    double t0;
    bool done;
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

/* Evaluates `prompt` (appended to what the context holds) in batches and
 * prepares sampling. opts->out is ignored. On failure nothing needs freeing. */
lmq_status textgen_begin(textgen *g, lmq_context *ctx, const lmq_vocab *v, lmq_sampler *smp, const int32_t *prompt,
                         size_t n_prompt, const textgen_opts *opts);
/* Samples one token; *text, *n is the text now safe to show (possibly empty;
 * valid until the next call). g->done is set after the last piece. On a
 * failure the text returned still belongs to the output. */
lmq_status textgen_next(textgen *g, const char **text, size_t *n);
void textgen_end(textgen *g);

/* The whole loop: samples until n_predict, an end-of-generation token, a stop
 * string, or a full context. Generated text (minus any stop string) is
 * streamed to opts->out and, if `text` is not NULL, also returned (malloc'd). */
lmq_status textgen_run(lmq_context *ctx, const lmq_vocab *v, lmq_sampler *smp, const int32_t *prompt, size_t n_prompt,
                       const textgen_opts *opts, textgen_stats *st, char **text);
#endif
