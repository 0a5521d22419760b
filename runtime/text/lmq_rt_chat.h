/* lmq_rt_chat.h — section of lmq_runtime.h: chat templates.
 *
 * A Jinja2 engine for the chat templates shipped with models (the
 * `chat_template` of tokenizer_config.json or GGUF's
 * tokenizer.chat_template), rendering byte for byte what Hugging Face's
 * apply_chat_template renders: Jinja2 with trim_blocks, lstrip_blocks and
 * loopcontrols in the immutable sandbox, HF's tojson (json.dumps with
 * ensure_ascii=False), raise_exception(msg) and strftime_now(fmt).
 * docs/CHAT.md lists the supported language and the known differences.
 *
 * Safe on untrusted templates and inputs: parse and render are bounded in
 * nesting depth, evaluation steps, output size and memory; every failure is
 * a status with a message naming the template line and column; nothing
 * aborts, and a failed call leaves nothing allocated.
 *
 * A parsed template is immutable: one template may be rendered from several
 * threads at once. */
#ifndef LMQ_RT_CHAT_H
#define LMQ_RT_CHAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmq_format.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lmq_chat_template lmq_chat_template;

/* Parses a template (src need not be NUL-terminated; len bytes, at most
 * LMQ_CHAT_MAX_TEMPLATE). On a syntax error returns LMQ_ERR_FORMAT with
 * "chat template line L col C: message" in lmq_last_error() and *out NULL. */
#define LMQ_CHAT_MAX_TEMPLATE (16u << 20)
/* Memory of one parse (tokens + syntax tree), whatever the template's size;
 * a template that needs more is refused with one line. docs/CHAT.md. */
#define LMQ_CHAT_MAX_PARSE_MEMORY ((size_t)256 << 20)
/* Default (and documented) limits of one render; see lmq_chat_vars. */
#define LMQ_CHAT_MAX_OUTPUT ((size_t)16 << 20)
#define LMQ_CHAT_MAX_MEMORY ((size_t)256 << 20)
#define LMQ_CHAT_MAX_STEPS 10000000ULL
#define LMQ_CHAT_MAX_DEPTH 64
lmq_status lmq_chat_template_parse(const char *src, size_t len, lmq_chat_template **out);
void lmq_chat_template_free(lmq_chat_template *t); /* NULL ok */

/* A caller-set template variable: a string, or (json = true) a JSON value
 * (so `--var-json tools_in_user_message=false` is a boolean). */
typedef struct lmq_chat_var {
    const char *name;
    const char *value;
    bool json;
} lmq_chat_var;

/* Details of a failed render (optional output, see lmq_chat_vars.error). */
typedef struct lmq_chat_error {
    int line, col;     /* 1-based position in the template; 0 when not tied to one */
    bool raised;       /* the template called raise_exception(): message is its argument */
    char message[512]; /* the message without the position ("System role not supported",
                          "UndefinedError: 'x' is undefined", ...) */
} lmq_chat_error;

/* Everything a render sees. Zero-initialise, then set what you need; zero
 * limits take the defaults below. */
typedef struct lmq_chat_vars {
    /* JSON text of the conversation: a list of messages, or an object with
     * "messages" (and optionally "tools"). NULL = no messages ([]). */
    const char *messages_json;
    /* JSON list of tools, or NULL: `tools` is then None (as HF passes it),
     * unless messages_json is an object that carries "tools". */
    const char *tools_json;
    bool add_generation_prompt;
    const char *bos_token; /* NULL = undefined in the template */
    const char *eos_token; /* NULL = undefined in the template */
    const lmq_chat_var *extra; /* more variables; these override the ones above */
    size_t n_extra;
    /* Seconds since the epoch that strftime_now() formats (in local time, as
     * datetime.now()); 0 = the current time. */
    int64_t now;
    /* Limits (0 = default: the LMQ_CHAT_MAX_* constants above). */
    size_t max_output;  /* bytes of output and of any one string: 16 MiB */
    size_t max_memory;  /* working memory of one render: 256 MiB */
    uint64_t max_steps; /* statements + loop iterations + calls: 10,000,000 */
    int max_depth;      /* nested macro calls / recursive loops: 64 */
    lmq_chat_error *error; /* optional: filled on failure */
} lmq_chat_vars;

/* Renders t with v. On success *out is a malloc'd NUL-terminated string
 * (free() it) of *len bytes (the output may itself contain NUL bytes only if
 * the inputs did). Failures: LMQ_ERR_RUNTIME when the template fails
 * (raise_exception, undefined use, type errors), LMQ_ERR_LIMIT when a limit
 * is hit, LMQ_ERR_FORMAT for invalid JSON in v, LMQ_ERR_INVALID_ARG for bad
 * arguments; lmq_last_error() then reads "chat template line L col C:
 * message" (the message alone for raise_exception is in v->error). */
lmq_status lmq_chat_render(const lmq_chat_template *t, const lmq_chat_vars *v, char **out,
                           size_t *len);

/* A short family name for a template source, for `lmq info`: "llama3",
 * "llama2", "chatml", "hermes", "gemma", "mistral", "phi3", "deepseek",
 * "command-r", "functionary"; else the template's first line (truncated).
 * Writes into buf (always NUL-terminated when bufsz > 0) and returns buf. */
const char *lmq_chat_template_name_guess(const char *src, char *buf, size_t bufsz);

#ifdef __cplusplus
}
#endif
#endif
