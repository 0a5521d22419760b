/* sampling_opts.h — the sampling/context flags shared by `lmq run` and
 * `lmq chat` (parsed in one place so they behave the same). */
#ifndef LMQ_SAMPLING_OPTS_H
#define LMQ_SAMPLING_OPTS_H
#include <getopt.h>
#include <stdbool.h>

#include "lmq_runtime.h"
#include "textgen.h"

typedef struct gen_opts {
    lmq_sampler_params sp;
    lmq_context_params cp;
    textgen_opts tg;
} gen_opts;

#define GEN_OPTS_USAGE                                                                               \
    "  [-n N] [-c CTX] [-t N] [--temp T] [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R]\n" \
    "  [--repeat-last-n N] [--frequency-penalty F] [--presence-penalty P] [--sampler-order rkpmt]\n" \
    "  [--seed S] [--stop TEXT]... [--kv-type f16|f32|q8_0]"

/* Long options (values >= 512) to append to a command's option table. */
#define GEN_LONG_OPTIONS                                                                              \
    {"n-predict", required_argument, 0, 'n'}, {"ctx-size", required_argument, 0, 'c'},              \
        {"threads", required_argument, 0, 't'}, {"temp", required_argument, 0, 512},                  \
        {"top-k", required_argument, 0, 513}, {"top-p", required_argument, 0, 514},                   \
        {"min-p", required_argument, 0, 515}, {"repeat-penalty", required_argument, 0, 516},          \
        {"repeat-last-n", required_argument, 0, 517}, {"frequency-penalty", required_argument, 0, 518}, \
        {"presence-penalty", required_argument, 0, 519}, {"seed", required_argument, 0, 520},         \
        {"stop", required_argument, 0, 521}, {"kv-type", required_argument, 0, 522},                  \
        {"sampler-order", required_argument, 0, 523}

void gen_opts_init(gen_opts *g);
/* Handles one option of GEN_LONG_OPTIONS (or -n/-c/-t). Returns 1 if handled,
 * 0 if the option is not a generation option, -1 on a bad value (message
 * already printed with the command's usage). */
int gen_opts_parse(gen_opts *g, int opt, const char *arg, const char *cmd, const char *usage);
#endif
