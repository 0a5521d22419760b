/* textgen.h — generation loop shared by `lmq run` and `lmq chat`: sampling,
 * streaming detokenization, stop strings matched across token boundaries. */
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
} textgen_opts;

typedef struct textgen_stats {
    int32_t n_prompt, n_gen;
    double t_prompt, t_gen;      /* seconds */
    bool stopped_eog, stopped_stop, stopped_ctx;
} textgen_stats;

/* Tokenizes text into a malloc'd array (grows as needed). */
lmq_status textgen_tokenize(const lmq_vocab *v, const char *text, size_t len, bool add_special, bool parse_special,
                            int32_t **out, size_t *n);

/* Evaluates `prompt` (appended to what the context holds) in batches, then
 * samples until n_predict, an end-of-generation token, a stop string, or a
 * full context. Generated text (minus any stop string) is streamed to
 * opts->out and, if `text` is not NULL, also returned (malloc'd). */
lmq_status textgen_run(lmq_context *ctx, const lmq_vocab *v, lmq_sampler *smp, const int32_t *prompt, size_t n_prompt,
                       const textgen_opts *opts, textgen_stats *st, char **text);
#endif
