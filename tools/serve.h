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

typedef struct serve_slot {
    int id;
    lmq_context *ctx;
    int32_t *cache;              /* prompt tokens whose keys/values the context holds, in order */
    size_t n_cache, cap_cache;
    bool busy;
    uint64_t last_used;
} serve_slot;

typedef struct serve_engine {
    lmq_model *m;
    const lmq_vocab *v;
    lmq_chat_template *tmpl;     /* NULL: the plain "User:/Assistant:" format */
    char *bos, *eos;             /* special token texts for the template */
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
} serve_request;

/* One request running in a slot. */
typedef struct serve_job {
    serve_engine *e;
    serve_slot *slot;            /* NULL once released */
    serve_request req;
    lmq_sampler *smp;
    textgen g;
    int32_t n_reused;            /* prompt tokens found in the slot's cache */
} serve_job;

lmq_status serve_engine_init(serve_engine *e, const char *model_path, const lmq_context_params *cp, int n_parallel,
                             const char *alias);
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
char *serve_json_result(const serve_job *job, const char *text, size_t len);
/* One SSE event "data: {...}\n\n" appended to out: a content delta (text may
 * be NULL for the first chunk of a chat stream, which carries the role), or
 * with finish set, the final empty delta with the finish reason. */
bool serve_sse_chunk(textgen_buf *out, const serve_job *job, const char *text, size_t len, bool first, bool finish);
bool serve_sse_usage(textgen_buf *out, const serve_job *job);
char *serve_json_models(const serve_engine *e);
char *serve_json_health(serve_engine *e);
#endif
