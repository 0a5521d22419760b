#include "sampling_opts.h"

#include <string.h>

#include "cli.h"

void gen_opts_init(gen_opts *g)
{
    memset(g, 0, sizeof *g);
    g->sp = lmq_sampler_default_params();
    g->cp = lmq_context_default_params();
    g->tg.n_predict = -1;
    g->tg.out = stdout;
}

int gen_opts_parse(gen_opts *g, int opt, const char *arg, const char *cmd, const char *usage)
{
    int64_t v;
    double f;
#define INT(lo, hi, dst, what)                                                              \
    if (!cli_parse_i64(arg, lo, hi, &v)) {                                                  \
        cli_usage_error(cmd, usage, "%s: bad value '%s'", what, arg);                      \
        return -1;                                                                          \
    }                                                                                       \
    dst = v;
#define FLT(lo, hi, dst, what)                                                              \
    if (!cli_parse_f64(arg, lo, hi, &f)) {                                                  \
        cli_usage_error(cmd, usage, "%s: bad value '%s'", what, arg);                      \
        return -1;                                                                          \
    }                                                                                       \
    dst = (float)f;
    switch (opt) {
    case 'n': INT(-1, 1 << 30, g->tg.n_predict, "-n"); return 1;
    case 'c': INT(8, 1 << 24, g->cp.n_ctx, "-c"); return 1;
    case 't':
        if (!cli_parse_i64(arg, 1, LMQ_MAX_THREADS, &v)) {
            cli_usage_error(cmd, usage, "-t takes a thread count in [1, %d], not '%s'", LMQ_MAX_THREADS, arg);
            return -1;
        }
        g->cp.n_threads = (int)v;
        return 1;
    case 512: FLT(0, 100, g->sp.temperature, "--temp"); return 1;
    case 513: INT(0, 1 << 30, g->sp.top_k, "--top-k"); return 1;
    case 514: FLT(0, 1, g->sp.top_p, "--top-p"); return 1;
    case 515: FLT(0, 1, g->sp.min_p, "--min-p"); return 1;
    case 516: FLT(0.01, 100, g->sp.repeat_penalty, "--repeat-penalty"); return 1;
    case 517: INT(0, 1 << 20, g->sp.penalty_last_n, "--repeat-last-n"); return 1;
    case 518: FLT(-100, 100, g->sp.frequency_penalty, "--frequency-penalty"); return 1;
    case 519: FLT(-100, 100, g->sp.presence_penalty, "--presence-penalty"); return 1;
    case 520: INT(0, INT64_MAX, g->sp.seed, "--seed"); return 1;
    case 521:
        if (g->tg.n_stops == TEXTGEN_MAX_STOPS || !*arg) {
            cli_usage_error(cmd, usage, "--stop: empty or more than %d stop strings", TEXTGEN_MAX_STOPS);
            return -1;
        }
        g->tg.stops[g->tg.n_stops++] = arg;
        return 1;
    case 522:
        if (!cli_parse_kv_type(arg, &g->cp.kv_type)) {
            cli_usage_error(cmd, usage, "--kv-type: '%s' (" CLI_KV_TYPES ")", arg);
            return -1;
        }
        return 1;
    case 523:
        if (strlen(arg) >= sizeof g->sp.order || strspn(arg, "rkpmt") != strlen(arg)) {
            cli_usage_error(cmd, usage, "--sampler-order: '%s' (letters r k p m t)", arg);
            return -1;
        }
        strcpy(g->sp.order, arg);
        return 1;
    }
#undef INT
#undef FLT
    return 0;
}
