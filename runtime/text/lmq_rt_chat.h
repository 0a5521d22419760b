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
/* liblmq exports what its public headers declare, nothing else (docs/API.md) */
#pragma GCC visibility push(default)

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

/* ---- harmony: the output of gpt-oss models --------------------------------
 * OpenAI's harmony format (docs/CHAT.md, "Harmony"): after the generation
 * prompt `<|start|>assistant` a model writes one or more messages
 *   <|channel|>analysis<|message|>reasoning<|end|>
 *   <|start|>assistant<|channel|>final<|message|>answer<|return|>
 * or a tool call
 *   <|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>{...}<|call|>
 * The splitter takes the generated text (with the special tokens rendered
 * as their text: lmq_token_to_piece(..., special = true, ...)) in pieces of
 * any size, cut anywhere (a marker such as <|channel|> may arrive over
 * several pieces), and reports each message as BEGIN (the parsed header),
 * TEXT (its content, in chunks), END (how it ended). The events, and the
 * text of each message once its chunks are joined, do not depend on where
 * the input was cut.
 *
 * Rules for output that breaks the format (never an abort):
 *   - Text where a header should be (the model skipped it), and a header
 *     without <|channel|>, begin a message of channel FINAL with `implied`
 *     set: the model is answering. Whitespace between messages is dropped.
 *   - A header is at most LMQ_HARMONY_MAX_HEADER bytes (real ones are under
 *     100); a longer one fails the splitter with LMQ_ERR_LIMIT and one line
 *     naming the byte offset where it began; every later push or finish
 *     returns the same status and message, and nothing of that header is
 *     reported. Memory stays at one fixed-size object.
 *   - `<|start|>` or `<|channel|>` inside a message's content ends it (term
 *     NONE) and begins a new header; `<|message|>` and `<|constrain|>` there
 *     are content; `<|end|>` outside a message is ignored.
 *   - After `<|return|>` or `<|call|>` (ends of generation) the splitter is
 *     done (lmq_harmony_done) and ignores further input.
 *   - lmq_harmony_finish ends an open message with term NONE and drops a
 *     header that never reached `<|message|>`.
 * Only the marker texts matter, so plain text spelling "<|end|>" reads as a
 * marker too (a model whose vocabulary lacks these tokens does not emit it). */
#define LMQ_HARMONY_MAX_HEADER 1024

typedef struct lmq_harmony lmq_harmony;

typedef enum lmq_harmony_channel {
    LMQ_HARMONY_FINAL = 0,      /* the answer for the user */
    LMQ_HARMONY_ANALYSIS = 1,   /* reasoning (chain of thought) */
    LMQ_HARMONY_COMMENTARY = 2, /* tool calls and their preambles */
    LMQ_HARMONY_UNKNOWN = 3,    /* any other channel name, or an empty one */
    LMQ_HARMONY_CHANNEL_COUNT
} lmq_harmony_channel;

/* How a message ended. */
typedef enum lmq_harmony_term {
    LMQ_HARMONY_TERM_END = 0,    /* <|end|>: more messages may follow */
    LMQ_HARMONY_TERM_RETURN = 1, /* <|return|>: the answer is complete */
    LMQ_HARMONY_TERM_CALL = 2,   /* <|call|>: a tool call waits for its result */
    LMQ_HARMONY_TERM_NONE = 3,   /* no terminator: a new header began, or finish */
    LMQ_HARMONY_TERM_COUNT
} lmq_harmony_term;

typedef enum lmq_harmony_event_kind {
    LMQ_HARMONY_BEGIN = 0, /* a message starts: header parsed */
    LMQ_HARMONY_TEXT = 1,  /* content bytes of the current message */
    LMQ_HARMONY_END = 2,   /* the current message ended */
    LMQ_HARMONY_EVENT_COUNT
} lmq_harmony_event_kind;

/* A parsed message header. The strings are NUL-terminated, "" when absent,
 * and valid during the callback only. */
typedef struct lmq_harmony_header {
    lmq_harmony_channel channel;
    bool implied;             /* no header or no <|channel|>: taken as FINAL */
    const char *role;         /* "assistant" after <|start|>; "" when the prompt gave it */
    const char *channel_name; /* as written ("analysis", "" for `<|channel|><|message|>`) */
    const char *recipient;    /* "functions.get_weather" from `to=...` */
    const char *content_type; /* "json" from `commentary json` or `<|constrain|>json` */
} lmq_harmony_header;

typedef struct lmq_harmony_event {
    lmq_harmony_event_kind kind;
    const lmq_harmony_header *msg; /* the message this event belongs to */
    const char *text;              /* TEXT: not NUL-terminated, len bytes (never 0) */
    size_t len;
    lmq_harmony_term term;         /* END */
} lmq_harmony_event;

/* Called for each event, in order, from push/finish. It must not call back
 * into the same splitter. */
typedef void (*lmq_harmony_fn)(void *user, const lmq_harmony_event *ev);

/* A splitter at the start of an assistant turn (the prompt ended with
 * `<|start|>assistant`, so the first header has no role). LMQ_ERR_NOMEM or
 * LMQ_ERR_INVALID_ARG (fn or out NULL); *out NULL on failure. */
lmq_status lmq_harmony_new(lmq_harmony_fn fn, void *user, lmq_harmony **out);
void lmq_harmony_free(lmq_harmony *h); /* NULL ok */
/* Back to the state of lmq_harmony_new (also clears a failure). */
void lmq_harmony_reset(lmq_harmony *h);
/* Feeds text[0..len) (len 0 is fine). LMQ_OK, or the splitter's failure
 * (see the rules above), or LMQ_ERR_INVALID_ARG for NULL arguments. */
lmq_status lmq_harmony_push(lmq_harmony *h, const char *text, size_t len);
/* The input is over: releases held bytes, ends an open message. Later
 * pushes are ignored. LMQ_OK or the splitter's failure. */
lmq_status lmq_harmony_finish(lmq_harmony *h);
/* `<|return|>` or `<|call|>` was seen, or lmq_harmony_finish was called. */
bool lmq_harmony_done(const lmq_harmony *h);
/* "final", "analysis", "commentary", "unknown"; "?" out of range. */
const char *lmq_harmony_channel_str(lmq_harmony_channel c);
/* Whether a chat template produces harmony (its text names both
 * `<|channel|>` and `<|message|>`): gpt-oss's template. src need not be
 * NUL-terminated; NULL is false. */
bool lmq_harmony_is_template(const char *src, size_t len);


/* ---- <think> blocks: the reasoning of Qwen3 / Qwen3.5 / DeepSeek-R1, and
 * Gemma 4's thought channel ------------------------------------------------
 * A streaming splitter of generated text into reasoning and content: a
 * `<think>` at the start of the output (after whitespace) opens the
 * reasoning, `</think>` closes it, the rest is content; output without a
 * leading `<think>` is all content. Gemma 4's `<|channel>` opens it the same
 * way (a `thought\n` right after it, the channel's name, is dropped) and
 * `<channel|>` closes it; a block closes only with its own pair's tag. inside = true starts in the reasoning:
 * the prompt itself ended with an open `<think>` (Qwen3.5's generation
 * prompt; lmq_think_prompt_open tells). Whitespace at the start of each
 * part and at the end of the reasoning is dropped. Tags out of place (a
 * second `<think>`, a `</think>` in the content) are text. The pieces given
 * to fn, joined per part, do not depend on where the input was cut; fn must
 * not call back into the splitter. One fixed-size object; never fails on
 * any input. */
typedef struct lmq_think lmq_think;
typedef void (*lmq_think_fn)(void *user, bool reasoning, const char *text, size_t len);
lmq_status lmq_think_new(bool inside, lmq_think_fn fn, void *user, lmq_think **out);
void lmq_think_free(lmq_think *t); /* NULL ok */
void lmq_think_reset(lmq_think *t);
lmq_status lmq_think_push(lmq_think *t, const char *text, size_t len);
/* The input is over: releases held bytes (a cut tag is text). */
lmq_status lmq_think_finish(lmq_think *t);
/* Whether a rendered prompt ends inside a `<think>` block (its last
 * `<think>` is followed by whitespace only). */
bool lmq_think_prompt_open(const char *prompt, size_t len);
/* Whether a chat template's model may write such blocks: its text names
 * `<think>`, or both `<|channel>` and `<channel|>` (Gemma 4). NULL is false. */
bool lmq_think_is_template(const char *src, size_t len);


/* ---- tool calls: parsing what a model writes back -------------------------
 * The families' formats (docs/SERVE.md, "Tool calls"):
 *   HERMES   Qwen2.5/3/3.5, Hermes, and the generic fallback:
 *            <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>,
 *            any number, between content
 *   MISTRAL  [TOOL_CALLS][{"name": N, "arguments": {...}}, ...] to the end
 *   LLAMA3   Llama 3.x: the whole output is {"name": N, "parameters": {...}}
 *            (optionally after <|python_tag|>)
 *   HARMONY  gpt-oss: parsed by the harmony splitter (a commentary message
 *            with `to=functions.N`), not by lmq_toolcall
 *   GEMMA4   Gemma 4: <|tool_call>call:N{key:value,...}<tool_call|>, any
 *            number, between content; values are Gemma's notation (strings
 *            between <|"|> marks, bare keys, numbers, true/false/null,
 *            {...} and [...]), reported as the equivalent JSON
 * A streaming parser takes the generated text (special tokens as their
 * text) in pieces cut anywhere, and reports content (TEXT) and each call as
 * BEGIN (name), ARGS (the arguments as a JSON text), END. A call whose JSON
 * does not parse, lacks a string "name", or exceeds LMQ_TOOLCALL_MAX_JSON
 * bytes is reported as TEXT (what the model wrote); so is a block cut off by
 * the end of the output. The events, joined, do not depend on the cuts.
 * Never fails on any input; memory is one object plus the JSON buffer. */
#define LMQ_TOOLCALL_MAX_JSON (256u << 10)

typedef enum lmq_tool_format {
    LMQ_TOOL_FORMAT_NONE = 0,
    LMQ_TOOL_FORMAT_HERMES = 1,
    LMQ_TOOL_FORMAT_MISTRAL = 2,
    LMQ_TOOL_FORMAT_LLAMA3 = 3,
    LMQ_TOOL_FORMAT_HARMONY = 4,
    LMQ_TOOL_FORMAT_GEMMA4 = 5,
    LMQ_TOOL_FORMAT_COUNT
} lmq_tool_format;

/* The format a chat template's model writes (NULL: NONE); a template that
 * never mentions tools gets HERMES, the generic format. */
lmq_tool_format lmq_tool_format_guess(const char *template_src, size_t len);
const char *lmq_tool_format_str(lmq_tool_format f);

typedef enum lmq_toolcall_event_kind {
    LMQ_TOOLCALL_TEXT = 0,  /* content bytes */
    LMQ_TOOLCALL_BEGIN = 1, /* call `index` named `name` starts */
    LMQ_TOOLCALL_ARGS = 2,  /* its arguments (JSON text), possibly in fragments */
    LMQ_TOOLCALL_END = 3,
    LMQ_TOOLCALL_EVENT_COUNT
} lmq_toolcall_event_kind;

typedef struct lmq_toolcall_event {
    lmq_toolcall_event_kind kind;
    int32_t index;     /* of the call, from 0 */
    const char *name;  /* BEGIN/ARGS/END: NUL-terminated, valid during the callback */
    const char *text;  /* TEXT/ARGS: len bytes, not NUL-terminated */
    size_t len;
} lmq_toolcall_event;

typedef struct lmq_toolcall lmq_toolcall;
typedef void (*lmq_toolcall_fn)(void *user, const lmq_toolcall_event *ev);
/* fmt HERMES, MISTRAL, LLAMA3 or GEMMA4 (NONE: all content); LMQ_ERR_INVALID_ARG
 * otherwise, LMQ_ERR_NOMEM. */
lmq_status lmq_toolcall_new(lmq_tool_format fmt, lmq_toolcall_fn fn, void *user, lmq_toolcall **out);
void lmq_toolcall_free(lmq_toolcall *t); /* NULL ok */
lmq_status lmq_toolcall_push(lmq_toolcall *t, const char *text, size_t len);
/* The output is over: a call that ran to the end is parsed, held bytes released. */
lmq_status lmq_toolcall_finish(lmq_toolcall *t);
/* Calls reported so far. */
int32_t lmq_toolcall_count(const lmq_toolcall *t);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif
