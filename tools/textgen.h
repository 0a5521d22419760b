/* textgen.h — what `lmq run`, `lmq chat` and `lmq serve` share around the
 * runtime's generation API (lmq_gen, runtime/model/generate.c): the
 * generation options, chat rendering and a byte buffer. The token loop
 * itself is the library's. */
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

/* A growing byte buffer (NUL-terminated when non-empty). */
typedef struct textgen_buf {
    char *p;
    size_t len, cap;
} textgen_buf;
bool textgen_buf_add(textgen_buf *b, const char *s, size_t n);

/* Renders a conversation (JSON text: a list of {role, content} with string
 * contents) up to where the assistant speaks: with the model's chat template,
 * or, when tmpl is NULL, the plain "User: ...\nAssistant:" fallback of
 * docs/CHAT.md. *out is malloc'd. Template failures name line and column. */
lmq_status textgen_render_chat(const lmq_chat_template *tmpl, const char *messages_json, const char *bos,
                               const char *eos, char **out);

/* Tokenizes text into a malloc'd array (grows as needed). */
lmq_status textgen_tokenize(const lmq_vocab *v, const char *text, size_t len, bool add_special, bool parse_special,
                            int32_t **out, size_t *n);

/* The runtime's generation parameters for these options (out aside). */
lmq_gen_params textgen_params(const textgen_opts *o);
#endif
