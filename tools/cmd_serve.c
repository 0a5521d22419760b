/* lmq serve: an OpenAI-compatible HTTP server (libmicrohttpd, one thread per
 * connection). Routing, authentication, body limits and the SSE stream live
 * here; slots, parsing and JSON in serve_engine.c. See docs/SERVE.md. */
#include <arpa/inet.h>
#include <getopt.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "serve.h"

static const char *USAGE =
    "lmq serve -m MODEL [--host 127.0.0.1] [--port 8080] [-c N] [-t N] [--parallel N]\n"
    "  [--api-key KEY] [--alias NAME] [--timeout S] [--kv-type f16|f32|q8_0] [--chat-template FILE]\n"
    "  OpenAI-compatible API: POST /v1/chat/completions, POST /v1/completions, POST /v1/responses,\n"
    "  GET /v1/models, GET /health; --port 0 picks a free port (printed on stderr)";

typedef struct server {
    serve_engine e;
    const char *api_key;         /* NULL: no authentication */
    double keepalive_s;          /* half of --timeout: a stream silent this long gets an SSE comment */
} server;

enum route { ROUTE_NONE, ROUTE_CHAT, ROUTE_COMPLETIONS, ROUTE_RESPONSES, ROUTE_MODELS, ROUTE_HEALTH };

/* Per-connection request state (MHD's con_cls). */
typedef struct request {
    enum route route;
    textgen_buf body;
    bool too_big;
    double t_start;
} request;

/* The state of one SSE response; owned by the MHD response. */
typedef struct stream {
    server *sv;
    serve_job job;
    textgen_buf out;             /* bytes not yet handed to MHD */
    size_t off;
    bool first, ended;
    serve_resp *resp;            /* a Responses API stream, or NULL */
} stream;

/* ---------------------------------------------------------------- responses */

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, char *json)
{
    if (!json) {
        status = MHD_HTTP_INTERNAL_SERVER_ERROR;
        json = strdup("{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}");
        if (!json) return MHD_NO;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(json), json, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(json);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    if (status == MHD_HTTP_UNAUTHORIZED) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_error(struct MHD_Connection *c, const serve_error *err)
{
    return send_text(c, (unsigned)err->http, serve_error_json(err));
}

static enum MHD_Result fail(struct MHD_Connection *c, int http, const char *type, const char *code, const char *msg)
{
    serve_error err;
    serve_error_set(&err, http, type, code, NULL, "%s", msg);
    return send_error(c, &err);
}

static enum MHD_Result too_large(struct MHD_Connection *c)
{
    serve_error err;
    serve_error_set(&err, 413, "invalid_request_error", "request_too_large", NULL,
                    "the request body exceeds %u bytes", (unsigned)LMQ_SERVE_MAX_BODY);
    return send_error(c, &err);
}

/* ---------------------------------------------------------------- streaming */

static bool stream_error_event(stream *st, const char *type, const char *code, const char *msg)
{
    serve_error err;
    serve_error_set(&err, 500, type, code, NULL, "%s", msg);
    char *json = serve_error_json(&err);
    bool ok = json && textgen_buf_add(&st->out, "data: ", 6) && textgen_buf_add(&st->out, json, strlen(json)) &&
              textgen_buf_add(&st->out, "\n\n", 2);
    free(json);
    return ok;
}

/* A stream that generates without sending (a tool call is sent when its
 * block closes; a forced call is the whole reply) gets an SSE comment, which
 * clients ignore, before the idle timeout would close the connection. */
static bool keepalive_due(stream *st, double t0)
{
    if (lmq_time_s() - t0 < st->sv->keepalive_s) return false;
    textgen_buf_add(&st->out, ": keep-alive\n\n", 14);
    return true;
}

/* An error event ends the stream and frees its slot. */
static void stream_fail(stream *st, const char *type, const char *code, const char *msg)
{
    stream_error_event(st, type, code, msg);
    st->ended = true;
    serve_job_finish(&st->job);
}

static void resp_emit(stream *st)
{
    serve_resp_step(st->resp, &st->job, &st->out);
}

static void chunk_emit(stream *st)
{
    serve_sse_chunk(&st->out, &st->job, false, false);
}

/* Steps the job, letting emit turn each step into events, until there is
 * something to send (or a keep-alive is due): false then, or when the
 * stream ended in an error; true when the choice is done. */
static bool stream_run(stream *st, void (*emit)(stream *))
{
    serve_job *job = &st->job;
    const double t0 = lmq_time_s();
    while (!job->done) {
        if (serve_engine_stopping(&st->sv->e)) {
            stream_fail(st, "server_error", "shutting_down", "the server is shutting down");
            return false;
        }
        lmq_status s = serve_job_step(job);
        emit(st);
        if (s) {
            stream_fail(st, "server_error", NULL, lmq_last_error());
            return false;
        }
        if (st->out.len || keepalive_due(st, t0)) return false;
    }
    return true;
}

/* Appends the next event(s) to st->out: a role chunk, a content /
 * reasoning chunk, a choice's finish chunk, or the end (usage, [DONE]);
 * an error event when stopping. */
static void resp_produce(stream *st)
{
    serve_job *job = &st->job;
    if (st->first) {
        st->first = false;
        serve_resp_begin(st->resp, job, &st->out);
        return;
    }
    if (!stream_run(st, resp_emit)) return;
    serve_resp_end(st->resp, job, &st->out);
    st->ended = true;
    serve_job_finish(job);
}

static void stream_produce(stream *st)
{
    serve_job *job = &st->job;
    if (st->resp) {
        resp_produce(st);
        return;
    }
    if (st->first) {
        st->first = false;
        if (job->req.kind == SERVE_CHAT) {
            serve_sse_chunk(&st->out, job, true, false);
            return;
        }
    }
    if (!stream_run(st, chunk_emit)) return;
    serve_sse_chunk(&st->out, job, false, true);
    serve_error err;
    if (serve_job_next_choice(job, &err)) {
        if (job->req.kind == SERVE_CHAT) serve_sse_chunk(&st->out, job, true, false);
        return;
    }
    if (err.http) {
        stream_fail(st, err.type, err.code, err.message);
        return;
    }
    if (job->req.include_usage) serve_sse_usage(&st->out, job);
    textgen_buf_add(&st->out, "data: [DONE]\n\n", 14);
    st->ended = true;
    serve_job_finish(job); /* the slot is free before the client reads the end */
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    stream *st = cls;
    while (st->off == st->out.len) {
        st->off = st->out.len = 0;
        if (st->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        stream_produce(st);
        if (st->out.len == 0 && st->ended) return MHD_CONTENT_READER_END_OF_STREAM;
    }
    size_t n = st->out.len - st->off < max ? st->out.len - st->off : max;
    memcpy(buf, st->out.p + st->off, n);
    st->off += n;
    return (ssize_t)n;
}

/* Called when the response is destroyed: normally after the end, or at once
 * when the client went away mid-stream; either way the slot is freed. */
static void stream_free(void *cls)
{
    stream *st = cls;
    if (st->job.slot) serve_engine_note_cancel(&st->sv->e);
    serve_job_finish(&st->job);
    if (st->resp) serve_resp_free(st->resp);
    free(st->resp);
    free(st->out.p);
    free(st);
}

/* ---------------------------------------------------------------- generation */

/* The peer closed its side (or the socket failed): nobody will read the answer. */
static bool client_gone(void *arg)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(arg, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* The Responses API, not streamed. */
static enum MHD_Result respond_plain(server *sv, struct MHD_Connection *c, serve_request *req, serve_resp *rs)
{
    serve_error err;
    const serve_client client = {client_gone, c};
    serve_job job;
    if (!serve_job_start(&sv->e, req, &client, &job, &err)) {
        serve_resp_free(rs);
        return err.http == 499 ? MHD_NO : send_error(c, &err);
    }
    lmq_status s = LMQ_OK;
    bool stopped = false, gone = false;
    for (int i = 1; !job.done; i++) {
        if ((stopped = serve_engine_stopping(&sv->e))) break;
        if (i % LMQ_SERVE_GONE_CHECK_TOKENS == 0 && (gone = client_gone(c))) break;
        if ((s = serve_job_step(&job))) break;
        serve_resp_step(rs, &job, NULL);
    }
    enum MHD_Result ret;
    if (gone) {
        serve_engine_note_cancel(&sv->e);
        ret = MHD_NO;
    } else if (stopped) {
        ret = fail(c, 503, "server_error", "shutting_down", "the server is shutting down");
    } else if (s) {
        ret = fail(c, 500, "server_error", NULL, lmq_last_error());
    } else {
        ret = send_text(c, MHD_HTTP_OK, serve_resp_end(rs, &job, NULL));
    }
    serve_job_finish(&job);
    serve_resp_free(rs);
    return ret;
}

static enum MHD_Result complete(server *sv, struct MHD_Connection *c, serve_kind kind, const request *rq)
{
    serve_request req;
    serve_error err;
    const serve_client client = {client_gone, c};
    serve_resp *rs = NULL;
    if (rq->route == ROUTE_RESPONSES) {
        if (!(rs = calloc(1, sizeof *rs))) return fail(c, 500, "server_error", NULL, "out of memory");
        if (!serve_resp_parse(&sv->e, rq->body.p ? rq->body.p : "", rq->body.len, &req, rs, &err)) {
            serve_resp_free(rs);
            free(rs);
            return send_error(c, &err);
        }
        if (!req.stream) {
            enum MHD_Result ret = respond_plain(sv, c, &req, rs);
            free(rs);
            return ret;
        }
    } else if (!serve_request_parse(&sv->e, kind, rq->body.p ? rq->body.p : "", rq->body.len, &req, &err)) {
        return send_error(c, &err);
    }
    if (req.stream) {
        stream *st = calloc(1, sizeof *st);
        if (!st) {
            serve_request_free(&req);
            if (rs) serve_resp_free(rs);
            free(rs);
            return fail(c, 500, "server_error", NULL, "out of memory");
        }
        st->sv = sv;
        st->first = true;
        st->resp = rs;
        if (!serve_job_start(&sv->e, &req, &client, &st->job, &err)) {
            if (rs) serve_resp_free(rs);
            free(rs);
            free(st);
            return err.http == 499 ? MHD_NO : send_error(c, &err);
        }
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, st, stream_free);
        if (!r) {
            stream_free(st);
            return MHD_NO;
        }
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return ret;
    }
    serve_job job;
    if (!serve_job_start(&sv->e, &req, &client, &job, &err)) return err.http == 499 ? MHD_NO : send_error(c, &err);
    serve_choice ch[LMQ_SERVE_MAX_CHOICES];
    memset(ch, 0, sizeof ch);
    lmq_status s = LMQ_OK;
    bool stopped = false, gone = false, ok = true;
    int k = 0;
    err.http = 0;
    for (int i = 1;; i++) {
        if (job.done) {
            ch[k].finish = serve_job_finish_reason(&job);
            if (!serve_job_next_choice(&job, &err)) break;
            k++;
        }
        if ((stopped = serve_engine_stopping(&sv->e))) break;
        if (i % LMQ_SERVE_GONE_CHECK_TOKENS == 0 && (gone = client_gone(c))) break;
        if ((s = serve_job_step(&job))) break;
        ok = ok && textgen_buf_add(&ch[k].content, job.content.p ? job.content.p : "", job.content.len) &&
             textgen_buf_add(&ch[k].reasoning, job.reasoning.p ? job.reasoning.p : "", job.reasoning.len);
        if (job.calls) serve_calls_merge(&ch[k].calls, job.calls);
        if (job.lp) {
            if (!ch[k].lp) ch[k].lp = cJSON_CreateArray();
            cJSON *en = cJSON_DetachItemFromArray(job.lp, 0);
            if (en) cJSON_AddItemToArray(ch[k].lp, en);
        }
        if (!ok) {
            s = lmq_error(LMQ_ERR_NOMEM, "generation buffers");
            break;
        }
    }
    enum MHD_Result ret;
    if (gone) {
        /* nobody to answer: free the slot now, close the connection */
        serve_engine_note_cancel(&sv->e);
        ret = MHD_NO;
    } else if (stopped) {
        ret = fail(c, 503, "server_error", "shutting_down", "the server is shutting down");
    } else if (s) {
        ret = fail(c, 500, "server_error", NULL, lmq_last_error());
    } else if (err.http) {
        ret = send_error(c, &err);
    } else {
        ret = send_text(c, MHD_HTTP_OK, serve_json_result(&job, ch, k + 1));
    }
    serve_job_finish(&job);
    for (int i = 0; i < LMQ_SERVE_MAX_CHOICES; i++) {
        free(ch[i].content.p);
        free(ch[i].reasoning.p);
        cJSON_Delete(ch[i].lp);
        cJSON_Delete(ch[i].calls);
    }
    return ret;
}

/* ---------------------------------------------------------------- routing */

/* Constant-time comparison of the Authorization header with "Bearer KEY". */
static bool authorized(const server *sv, struct MHD_Connection *c)
{
    if (!sv->api_key) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncmp(h, "Bearer ", 7)) return false;
    h += 7;
    size_t n = strlen(sv->api_key), m = strlen(h);
    unsigned char diff = n != m;
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)(sv->api_key[i] ^ (i < m ? h[i] : 0));
    return diff == 0;
}

static enum route route_of(const char *url, const char **want_method)
{
    static const struct {
        const char *path, *method;
        enum route route;
    } table[] = {{"/v1/chat/completions", "POST", ROUTE_CHAT}, {"/chat/completions", "POST", ROUTE_CHAT},
                 {"/v1/completions", "POST", ROUTE_COMPLETIONS}, {"/completions", "POST", ROUTE_COMPLETIONS},
                 {"/v1/responses", "POST", ROUTE_RESPONSES}, {"/responses", "POST", ROUTE_RESPONSES},
                 {"/v1/models", "GET", ROUTE_MODELS}, {"/models", "GET", ROUTE_MODELS},
                 {"/health", "GET", ROUTE_HEALTH}, {"/v1/health", "GET", ROUTE_HEALTH}};
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (!strcmp(url, table[i].path)) {
            *want_method = table[i].method;
            return table[i].route;
        }
    return ROUTE_NONE;
}

/* First call for a request: headers only. Rejections here skip the body. */
static enum MHD_Result on_headers(server *sv, struct MHD_Connection *c, const char *url, const char *method,
                                  request *rq)
{
    const char *want = NULL;
    rq->route = route_of(url, &want);
    if (!authorized(sv, c))
        return fail(c, 401, "authentication_error", "invalid_api_key", "missing or wrong API key (Authorization: Bearer KEY)");
    if (rq->route == ROUTE_NONE) return fail(c, 404, "invalid_request_error", "not_found", "no such endpoint");
    if (strcmp(method, want)) {
        char msg[96];
        snprintf(msg, sizeof msg, "%s requires %s", url, want);
        return fail(c, 405, "invalid_request_error", "method_not_allowed", msg);
    }
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > LMQ_SERVE_MAX_BODY)
        return too_large(c);
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    server *sv = cls;
    request *rq = *con_cls;
    if (!rq) {
        if (!(rq = calloc(1, sizeof *rq))) return MHD_NO;
        rq->t_start = lmq_time_s();
        *con_cls = rq;
        return on_headers(sv, c, url, method, rq);
    }
    if (*upload_size) {
        /* a body that dribbles in for too long is dropped with the connection */
        if (lmq_time_s() - rq->t_start > LMQ_SERVE_BODY_DEADLINE_S) return MHD_NO;
        if (rq->too_big || rq->body.len + *upload_size > LMQ_SERVE_MAX_BODY) {
            rq->too_big = true; /* discard the rest, answer 413 at the end */
            free(rq->body.p);
            rq->body = (textgen_buf){0};
        } else if (!textgen_buf_add(&rq->body, upload, *upload_size)) {
            return MHD_NO;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (rq->too_big) return too_large(c);
    switch (rq->route) {
    case ROUTE_CHAT: return complete(sv, c, SERVE_CHAT, rq);
    case ROUTE_COMPLETIONS: return complete(sv, c, SERVE_COMPLETION, rq);
    case ROUTE_RESPONSES: return complete(sv, c, SERVE_CHAT, rq);
    case ROUTE_MODELS: return send_text(c, MHD_HTTP_OK, serve_json_models(&sv->e));
    case ROUTE_HEALTH: return send_text(c, MHD_HTTP_OK, serve_json_health(&sv->e));
    default: return fail(c, 404, "invalid_request_error", "not_found", "no such endpoint");
    }
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    request *rq = *con_cls;
    if (!rq) return;
    free(rq->body.p);
    free(rq);
    *con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    fputs("lmq serve: ", stderr);
    vfprintf(stderr, fmt, ap);
}

/* ---------------------------------------------------------------- main */

static bool resolve(const char *host, int port, struct sockaddr_storage *ss, bool *v6)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    if (getaddrinfo(host, ps, &hints, &res) || !res) return false;
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *v6 = res->ai_family == AF_INET6;
    freeaddrinfo(res);
    return true;
}

int lmq_cmd_serve(int argc, char **argv)
{
    const char *model = NULL, *host = "127.0.0.1", *alias = NULL, *template_path = NULL;
    char *template_src = NULL;
    int64_t port = 8080, parallel = 1, timeout = LMQ_SERVE_IDLE_TIMEOUT_S, v;
    server sv;
    memset(&sv, 0, sizeof sv);
    lmq_context_params cp = lmq_context_default_params();
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"host", required_argument, 0, 600}, {"port", required_argument, 0, 601},
        {"ctx-size", required_argument, 0, 'c'}, {"threads", required_argument, 0, 't'},
        {"parallel", required_argument, 0, 602}, {"api-key", required_argument, 0, 603},
        {"alias", required_argument, 0, 604}, {"timeout", required_argument, 0, 605},
        {"kv-type", required_argument, 0, 606}, {"chat-template", required_argument, 0, 607},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    opterr = 0;
    int o;
    while ((o = getopt_long(argc, argv, "m:c:t:h", opts, NULL)) != -1) {
        switch (o) {
        case 'm': model = optarg; break;
        case 600: host = optarg; break;
        case 601:
            if (!cli_parse_i64(optarg, 0, 65535, &port)) return cli_usage_error("serve", USAGE, "--port: bad value '%s'", optarg);
            break;
        case 'c':
            if (!cli_parse_i64(optarg, 8, 1 << 24, &v)) return cli_usage_error("serve", USAGE, "-c: bad value '%s'", optarg);
            cp.n_ctx = (int32_t)v;
            break;
        case 't':
            if (!cli_parse_i64(optarg, 1, 1024, &v)) return cli_usage_error("serve", USAGE, "-t: bad value '%s'", optarg);
            cp.n_threads = (int32_t)v;
            break;
        case 602:
            if (!cli_parse_i64(optarg, 1, LMQ_SERVE_MAX_PARALLEL, &parallel))
                return cli_usage_error("serve", USAGE, "--parallel: bad value '%s' (1..%d)", optarg, LMQ_SERVE_MAX_PARALLEL);
            break;
        case 603:
            if (!optarg[0]) return cli_usage_error("serve", USAGE, "--api-key: empty key");
            sv.api_key = optarg;
            break;
        case 604: alias = optarg; break;
        case 605:
            if (!cli_parse_i64(optarg, 1, 3600, &timeout)) return cli_usage_error("serve", USAGE, "--timeout: bad value '%s'", optarg);
            break;
        case 606:
            if (!cli_parse_kv_type(optarg, &cp.kv_type))
                return cli_usage_error("serve", USAGE, "--kv-type: '%s' (" CLI_KV_TYPES ")", optarg);
            break;
        case 607: template_path = optarg; break;
        case 'h': printf("usage: %s\n", USAGE); return LMQ_EXIT_OK;
        default: return cli_usage_error("serve", USAGE, "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error("serve", USAGE, "unexpected argument '%s'", argv[optind]);
    if (!model) return cli_usage_error("serve", USAGE, "-m MODEL is required");
    if (!alias) {
        const char *slash = strrchr(model, '/');
        alias = slash ? slash + 1 : model;
    }
    /* slots share the cores unless -t says otherwise */
    if (cp.n_threads <= 0) cp.n_threads = lmq_n_cpus() / (int)parallel > 0 ? lmq_n_cpus() / (int)parallel : 1;
    struct sockaddr_storage addr;
    bool v6 = false;
    if (!resolve(host, (int)port, &addr, &v6)) return cli_usage_error("serve", USAGE, "--host: cannot resolve '%s'", host);

    /* SIGINT/SIGTERM are taken by sigwait() in this thread; every thread
     * started from here on inherits the blocked mask */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    int rc = LMQ_EXIT_FAIL;
    lmq_status s = LMQ_OK;
    size_t tlen = 0;
    if (template_path && !(template_src = cli_load_template(template_path, &tlen))) {
        cli_fail("serve", LMQ_ERR_IO);
        goto out;
    }
    s = serve_engine_init(&sv.e, model, &cp, (int)parallel, alias, template_src);
    if (s) {
        cli_fail("serve", s);
        goto out;
    }
    sv.keepalive_s = (double)timeout / 2;
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG | MHD_USE_ITC |
            (v6 ? MHD_USE_IPv6 : 0),
        (uint16_t)port, NULL, NULL, on_request, &sv, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)timeout,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int)LMQ_SERVE_MAX_CONNECTIONS, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)LMQ_SERVE_HEADER_MEMORY, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "lmq serve: cannot listen on %s:%d\n", host, (int)port);
        goto out;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    fprintf(stderr, "lmq serve: %s, %d slot%s of %d tokens, %d thread%s each; listening on http://%s%s%s:%u\n", alias,
            sv.e.n_slots, sv.e.n_slots > 1 ? "s" : "", sv.e.n_ctx, cp.n_threads, cp.n_threads > 1 ? "s" : "",
            v6 ? "[" : "", host, v6 ? "]" : "", info ? info->port : (unsigned)port);
    fflush(stderr);

    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "lmq serve: %s: finishing in-flight requests\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    MHD_socket listener = MHD_quiesce_daemon(d); /* no new connections */
    serve_engine_stop(&sv.e);
    /* streams end with an error event at their next token; wait for them to
     * give their slots back before closing the connections */
    double t0 = lmq_time_s();
    int busy = 1, waiting = 1;
    while (lmq_time_s() - t0 < LMQ_SERVE_SHUTDOWN_GRACE_S) {
        serve_engine_counts(&sv.e, &busy, &waiting);
        if (!busy && !waiting) break;
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL); /* let the last events reach the clients */
    MHD_stop_daemon(d);
    if (listener != MHD_INVALID_SOCKET) close(listener); /* ours after quiesce */
    rc = LMQ_EXIT_OK;
out:
    serve_engine_free(&sv.e);
    free(template_src);
    return rc;
}
