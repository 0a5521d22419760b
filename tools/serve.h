/* serve.h — `lmq serve` internals shared by the HTTP front (cmd_serve.c) and
 * the engine (serve_engine.c): slots, the wait queue, OpenAI request parsing
 * and response JSON. tools/ only; not a public API. */
#ifndef LMQ_SERVE_H
#define LMQ_SERVE_H
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "lmq_runtime.h"
#include "textgen.h"

/* Limits (docs/SERVE.md lists them). */
#define LMQ_SERVE_MAX_PARALLEL 64        /* --parallel upper bound */
#define LMQ_SERVE_QUEUE_MAX 16           /* requests waiting for a slot; 429 beyond */
#define LMQ_SERVE_QUEUE_WAIT_S 120       /* longest wait for a slot; 503 after */
#define LMQ_SERVE_MAX_BODY (4u << 20)    /* request body bytes; 413 beyond */
#define LMQ_SERVE_MAX_MESSAGES 4096      /* messages of one chat request */
#define LMQ_SERVE_MAX_STOPS 4            /* stop strings per request (OpenAI's limit) */
#define LMQ_SERVE_MAX_STOP_LEN 256       /* bytes of one stop string */
#define LMQ_SERVE_MAX_CONNECTIONS 128    /* open connections; more are refused */
#define LMQ_SERVE_IDLE_TIMEOUT_S 10      /* default --timeout: a connection idle this long is closed */
#define LMQ_SERVE_BODY_DEADLINE_S 30     /* a body still arriving after this is dropped */
#define LMQ_SERVE_HEADER_MEMORY (64u << 10) /* per-connection buffer for the request line and headers */
#define LMQ_SERVE_SHUTDOWN_GRACE_S 10    /* wait for in-flight requests on SIGINT/SIGTERM */
#define LMQ_SERVE_GONE_CHECK_MS 250      /* a queued request checks this often whether its client left */
#define LMQ_SERVE_GONE_CHECK_TOKENS 8    /* a non-streamed request checks every this many tokens */
#define LMQ_SERVE_MAX_CHOICES 8          /* `n`: choices of one request */
#define LMQ_SERVE_MAX_KWARGS 16          /* chat_template_kwargs entries */
#define LMQ_SERVE_MAX_TOOLS 128          /* tools of one request */
#define LMQ_SERVE_RESP_STORE_MAX 256     /* responses kept for previous_response_id */
#define LMQ_SERVE_RESP_STORE_TTL_S 3600  /* ... for this long */

/* How the model writes its reasoning (chat only). */
typedef enum serve_reasoning {
    SERVE_REASONING_NONE,    /* everything is content */
    SERVE_REASONING_THINK,   /* <think>...</think> (lmq_think) */
    SERVE_REASONING_HARMONY, /* gpt-oss channels (lmq_harmony): analysis is reasoning */
} serve_reasoning;

typedef struct serve_slot {
    int id;
    lmq_context *ctx;
    lmq_gen *gen;                /* the slot's token loop; it knows which tokens the context holds */
    bool busy;
    uint64_t last_used;
} serve_slot;

typedef struct serve_engine {
    lmq_model *m;
    const lmq_vocab *v;
    lmq_chat_template *tmpl;     /* NULL: the plain "User:/Assistant:" format */
    char *bos, *eos;             /* special token texts for the template */
    serve_reasoning reasoning;   /* from the template: harmony, <think>, or none */
    lmq_tool_format tool_format; /* how the model writes tool calls */
    bool template_has_tools;     /* the template renders `tools`; else lmq describes them in a system message */
    const char *alias;           /* model id shown to clients */
    int32_t n_ctx;
    serve_slot *slots;
    int n_slots;
    pthread_mutex_t mu;
    pthread_cond_t cv;           /* a slot was freed, or stopping */
    int n_waiting;
    int n_busy;
    uint64_t tick;
    bool stopping;               /* SIGINT/SIGTERM: no new work, streams end */
    uint64_t n_served;           /* requests that got a slot */
    uint64_t n_cancelled;        /* requests whose client went away before the end */
} serve_engine;

typedef enum serve_kind { SERVE_CHAT, SERVE_COMPLETION } serve_kind;


/* An error in OpenAI's shape: {"error": {message, type, param, code}}. */
typedef struct serve_error {
    int http;
    const char *type;
    const char *code;            /* NULL: null */
    char param[64];              /* "": null */
    char message[512];
} serve_error;

typedef struct serve_request {
    serve_kind kind;
    bool stream, include_usage;
    lmq_sampler_params sp;
    int32_t max_tokens;          /* -1: until the end of generation or a full context */
    char *stops[LMQ_SERVE_MAX_STOPS];
    int n_stops;
    int32_t *toks;               /* the rendered, tokenized prompt */
    size_t n_toks;
    char id[48];
    long long created;
    int n_choices;               /* `n`: choice i samples with seed + i */
    bool logprobs;               /* chat: logprobs; completions: logprobs given */
    int32_t top_logprobs;        /* 0..LMQ_SAMPLER_MAX_TOP_LOGPROBS */
    serve_reasoning reasoning;
    bool think_open;             /* the rendered prompt ends inside <think> */
    bool tools;                  /* tools given and tool_choice is not "none": parse calls */
    bool parallel_tool_calls;    /* false: the first call only */
    lmq_json_schema *schema;     /* constrained output (response_format, forced tool_choice), or NULL */
    char *forced_call;           /* harmony: the tool whose call header ends the prompt; the output is its arguments */
} serve_request;

/* One request running in a slot. */
typedef struct serve_job {
    serve_engine *e;
    serve_slot *slot;            /* NULL once released */
    serve_request req;
    lmq_sampler *smp;
    lmq_gen_stats st;            /* the current choice's figures (lmq_gen_get_stats after each step) */
    bool done;                   /* the current choice has ended */
    int32_t n_reused;            /* prompt tokens found in the slot's cache (first choice) */
    int choice;                  /* index of the choice being generated */
    int32_t n_gen_total;         /* tokens generated by the finished choices */
    lmq_think *think;            /* SERVE_REASONING_THINK */
    lmq_harmony *harmony;        /* SERVE_REASONING_HARMONY */
    /* the output of the last serve_job_step, split; emptied by the next step */
    textgen_buf content, reasoning;
    struct cJSON *lp;            /* logprobs entries of the step's tokens (array), or NULL */
    lmq_toolcall *tc;            /* tool-call parser (tools given, not harmony) */
    struct cJSON *calls;         /* the step's tool-call deltas: [{index, id?, name?, arguments}] */
    int32_t n_calls;             /* calls of the current choice so far */
    bool harmony_call;           /* harmony: the current message is a call */
} serve_job;

/* template_src: a chat template overriding the model's (NULL: the model's). */
lmq_status serve_engine_init(serve_engine *e, const char *model_path, const lmq_context_params *cp, int n_parallel,
                             const char *alias, const char *template_src);
void serve_engine_free(serve_engine *e);
void serve_engine_stop(serve_engine *e);
bool serve_engine_stopping(serve_engine *e);
void serve_engine_counts(serve_engine *e, int *busy, int *waiting);
void serve_engine_note_cancel(serve_engine *e);

/* Parses and validates a request body, renders and tokenizes the prompt.
 * false with *err filled on bad input. */
bool serve_request_parse(serve_engine *e, serve_kind kind, const char *body, size_t len, serve_request *r,
                         serve_error *err);
void serve_request_free(serve_request *r);

/* Whether the client of a request has gone away (may be NULL: never). */
typedef struct serve_client {
    bool (*gone)(void *arg);
    void *arg;
} serve_client;

/* Takes a slot (the free one sharing the longest prefix with the prompt),
 * waiting in the queue if all are busy, and evaluates the prompt. Takes
 * ownership of *r. false with *err (429 queue full, 503 stopping or waited
 * too long, 499 the client left while waiting, 400/500 evaluation
 * failures); the slot is then released. */
bool serve_job_start(serve_engine *e, serve_request *r, const serve_client *client, serve_job *job, serve_error *err);
/* Generates one token of the current choice: job->content / job->reasoning
 * receive the text now safe to show, job->lp the token's logprobs entry
 * (when asked); job->done after the choice's last piece. */
lmq_status serve_job_step(serve_job *job);
/* Moves to the next choice (n > 1): false when there is none; false with
 * err->http set when re-evaluating the prompt failed. */
bool serve_job_next_choice(serve_job *job, serve_error *err);
/* Releases the slot (keeping its prompt cache) and frees the job; safe twice. */
void serve_job_finish(serve_job *job);
const char *serve_job_finish_reason(const serve_job *job);

void serve_error_set(serve_error *err, int http, const char *type, const char *code, const char *param,
                     const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 6, 7)))
#endif
    ;
/* malloc'd JSON texts. */
char *serve_error_json(const serve_error *err);
/* One finished choice of a non-streamed answer. */
typedef struct serve_choice {
    textgen_buf content, reasoning;
    struct cJSON *lp;            /* logprobs entries, or NULL */
    struct cJSON *calls;         /* tool calls [{id, type, function: {name, arguments}}], or NULL */
    const char *finish;
} serve_choice;
char *serve_json_result(const serve_job *job, const serve_choice *choices, int n);
/* Folds a step's tool-call deltas (job->calls) into a choice's calls. */
void serve_calls_merge(struct cJSON **acc, const struct cJSON *deltas);
/* One SSE event "data: {...}\n\n" appended to out for the job's current
 * choice: the role (first), the step's content / reasoning deltas and
 * logprobs, or with finish set, the final empty delta with the finish
 * reason. Nothing is appended for a step with nothing to send. */
bool serve_sse_chunk(textgen_buf *out, serve_job *job, bool first, bool finish);
bool serve_sse_usage(textgen_buf *out, const serve_job *job);
/* The Responses API (serve_responses.c). */
enum { SERVE_RESP_OPEN_NONE, SERVE_RESP_OPEN_MSG, SERVE_RESP_OPEN_CALL };
typedef struct serve_resp {
    char id[48];                 /* resp_... */
    char previous[128];          /* previous_response_id, "" */
    struct cJSON *history;       /* the chat messages of the request */
    struct cJSON *echo;          /* request fields repeated in the response */
    textgen_buf text, args;      /* the reply's text so far */
    struct cJSON *calls;         /* its calls so far (chat shape) */
    int seq, out_index, open;    /* stream: sequence number, output item, open item kind */
} serve_resp;
/* Parses a Responses body into the chat request it means (*r) and *rs. */
bool serve_resp_parse(serve_engine *e, const char *body, size_t len, serve_request *r, serve_resp *rs,
                      serve_error *err);
void serve_resp_free(serve_resp *rs);
/* Stream: response.created / in_progress events. */
void serve_resp_begin(serve_resp *rs, const serve_job *job, textgen_buf *out);
/* Folds a step's content and calls into rs (out: their stream events, or NULL). */
void serve_resp_step(serve_resp *rs, serve_job *job, textgen_buf *out);
/* The end: stores the conversation; out != NULL appends the closing events
 * and response.completed (returns NULL), else returns the response JSON. */
char *serve_resp_end(serve_resp *rs, const serve_job *job, textgen_buf *out);
char *serve_json_models(const serve_engine *e);
char *serve_json_health(serve_engine *e);
#endif
