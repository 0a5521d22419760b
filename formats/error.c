/* Status names and the per-thread last-error message. */
#include <stdarg.h>
#include <stdio.h>

#include "lmq_format.h"

static _Thread_local char last_error[1024];

const char *lmq_status_str(lmq_status s)
{
    switch (s) {
    case LMQ_OK: return "ok";
    case LMQ_ERR_IO: return "i/o error";
    case LMQ_ERR_NOMEM: return "out of memory";
    case LMQ_ERR_FORMAT: return "malformed input";
    case LMQ_ERR_CHECKSUM: return "checksum mismatch";
    case LMQ_ERR_UNSUPPORTED: return "unsupported";
    case LMQ_ERR_NOT_FOUND: return "not found";
    case LMQ_ERR_INVALID_ARG: return "invalid argument";
    case LMQ_ERR_LIMIT: return "limit exceeded";
    case LMQ_ERR_RUNTIME: return "runtime error";
    default: return "unknown status";
    }
}

const char *lmq_last_error(void)
{
    return last_error;
}

lmq_status lmq_error(lmq_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    /* one line: fold any newline a caller's text may carry */
    for (char *p = last_error; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    return s;
}

lmq_status lmq_error_prefix(lmq_status s, const char *fmt, ...)
{
    char prefix[sizeof last_error], cur[sizeof last_error];
    snprintf(cur, sizeof cur, "%s", last_error); /* copy first: the arguments may point into it */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    if (cur[0]) return lmq_error(s, "%s: %s", prefix, cur);
    return lmq_error(s, "%s", prefix);
}

void lmq_error_clear(void)
{
    last_error[0] = 0;
}

static void log_stderr(lmq_log_level level, const char *msg, void *user)
{
    (void)user;
    fprintf(stderr, "lmq: %s%s\n", level == LMQ_LOG_WARN ? "warning: " : "", msg);
}

static lmq_log_fn log_fn = log_stderr;
static void *log_user;

void lmq_set_log(lmq_log_fn fn, void *user)
{
    log_fn = fn ? fn : log_stderr;
    log_user = fn ? user : NULL;
}

void lmq_log(lmq_log_level level, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_fn(level, msg, log_user);
}
