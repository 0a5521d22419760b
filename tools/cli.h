/* cli.h — helpers shared by the lmq subcommands (tools/ only). */
#ifndef LMQ_CLI_H
#define LMQ_CLI_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "lmq_format.h"
#include "lmq_runtime.h"

/* Every subcommand: int lmq_cmd_NAME(int argc, char **argv), argv[0] is NAME.
 * Exit codes: 0 success, 1 failure on input/runtime, 2 usage error. */
#define LMQ_EXIT_OK 0
#define LMQ_EXIT_FAIL 1
#define LMQ_EXIT_USAGE 2

/* Prints "lmq CMD: MESSAGE" and the usage line to stderr; returns 2. */
int cli_usage_error(const char *cmd, const char *usage, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Prints "lmq CMD: <lmq_last_error()>" to stderr; returns 1. */
int cli_fail(const char *cmd, lmq_status s);

/* Strict number parsing: the whole string must be a number within [lo, hi]. */
bool cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
bool cli_parse_f64(const char *s, double lo, double hi, double *out);
/* --kv-type: "f16", "f32" or "q8_0" (the KV cache types lmq_context_new takes). */
bool cli_parse_kv_type(const char *s, lmq_type *out);
#define CLI_KV_TYPES "f16, f32 or q8_0"

/* Progress line on stderr with rate and ETA, redrawn in place; silent unless
 * stderr is a terminal (and LMQ_NO_PROGRESS is unset). */
typedef struct cli_progress {
    bool enabled;
    const char *label;
    double total;
    double t0, last_draw;
} cli_progress;
void cli_progress_begin(cli_progress *p, const char *label, double total);
/* `done` in the same unit as total; `unit` names it ("MB", "tensors"). */
void cli_progress_update(cli_progress *p, double done, const char *unit);
void cli_progress_end(cli_progress *p); /* clears the line */

/* Writes a JSON string literal (quoted, escaped) to f. */
void cli_json_str(FILE *f, const char *s);

/* Reads the process's peak resident set size in bytes (0 if unknown). */
uint64_t cli_peak_rss(void);

/* The directory holding the running lmq binary (from /proc/self/exe), or
 * NULL; data finders look beside it (build/../../shared/data). */
const char *cli_exe_dir(void);

/* A chat template from a file (cmd_template.c): a tokenizer_config.json
 * yields its chat_template, any other file is the template. malloc'd, *len
 * bytes; NULL with lmq_last_error() set on failure. */
char *cli_load_template(const char *path, size_t *len);
/* The environment's defaults for the process-wide kernel settings, read by
 * the CLI only (the library reads no environment; docs/API.md): LMQ_ISA
 * (lmq_isa_force) and LMQ_GEMM (lmq_gemm_mode_set). A value that is unknown
 * or not supported here is reported on stderr and ignored. */
void cli_env_defaults(void);
/* lmq_model_load_params with the environment's default: LMQ_REPACK=0 keeps
 * the weights as mapped. */
lmq_status cli_model_load(const char *path, lmq_model **out);
#endif
