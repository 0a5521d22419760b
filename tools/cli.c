#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

int cli_usage_error(const char *cmd, const char *usage, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "lmq %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nusage: %s\n", usage);
    return LMQ_EXIT_USAGE;
}

int cli_fail(const char *cmd, lmq_status s)
{
    const char *msg = lmq_last_error();
    fprintf(stderr, "lmq %s: %s\n", cmd, msg && *msg ? msg : lmq_status_str(s));
    return LMQ_EXIT_FAIL;
}

bool cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool cli_parse_kv_type(const char *s, lmq_type *out)
{
    static const lmq_type kv[] = {LMQ_TYPE_F16, LMQ_TYPE_F32, LMQ_TYPE_Q8_0};
    for (size_t i = 0; s && i < sizeof kv / sizeof kv[0]; i++)
        if (!strcmp(s, lmq_type_name(kv[i]))) {
            *out = kv[i];
            return true;
        }
    return false;
}

bool cli_parse_f64(const char *s, double lo, double hi, double *out)
{
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < lo || v > hi) return false;
    *out = v;
    return true;
}

void cli_progress_begin(cli_progress *p, const char *label, double total)
{
    memset(p, 0, sizeof *p);
    p->enabled = isatty(2) && !getenv("LMQ_NO_PROGRESS");
    p->label = label;
    p->total = total;
    p->t0 = lmq_time_s();
}

void cli_progress_update(cli_progress *p, double done, const char *unit)
{
    if (!p->enabled) return;
    double now = lmq_time_s();
    if (now - p->last_draw < 0.1 && done < p->total) return;
    p->last_draw = now;
    double el = now - p->t0;
    double rate = el > 0 ? done / el : 0;
    double eta = rate > 0 ? (p->total - done) / rate : 0;
    double pct = p->total > 0 ? 100.0 * done / p->total : 0;
    fprintf(stderr, "\r\033[K%s %5.1f%% %.0f/%.0f %s  %.1f %s/s  ETA %.0fs", p->label, pct,
            done, p->total, unit, rate, unit, eta);
    fflush(stderr);
}

void cli_progress_end(cli_progress *p)
{
    if (!p->enabled) return;
    fprintf(stderr, "\r\033[K");
    fflush(stderr);
}

void cli_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c; c++) {
        switch (*c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*c < 0x20) fprintf(f, "\\u%04x", *c);
            else fputc(*c, f);
        }
    }
    fputc('"', f);
}

uint64_t cli_peak_rss(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (uint64_t)ru.ru_maxrss * 1024u;
}

const char *cli_exe_dir(void)
{
    static char dir[4096];
    ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
    if (n <= 0) return NULL;
    dir[n] = 0;
    char *slash = strrchr(dir, '/');
    if (!slash) return NULL;
    *slash = 0;
    return dir;
}

void cli_env_defaults(void)
{
    const char *e = getenv("LMQ_ISA");
    lmq_isa isa;
    if (e && *e && lmq_isa_from_name(e, &isa) != LMQ_OK)
        fprintf(stderr, "lmq: LMQ_ISA=%s is not a known ISA (scalar, avx2, avxvnni, avx512, neon, i8mm); using %s\n", e,
                lmq_isa_name(lmq_isa_active()));
    else if (e && *e && lmq_isa_force(isa) != LMQ_OK)
        fprintf(stderr, "lmq: LMQ_ISA=%s is not supported by this build or CPU; using %s\n", e,
                lmq_isa_name(lmq_isa_active()));
    /* the quantizers follow: scalar runs their references (same bytes) */
    if (e && !strcmp(e, "scalar")) lmq_quantize_use_simd(false);
    e = getenv("LMQ_GEMM");
    lmq_gemm_mode mode;
    if (e && *e && lmq_gemm_mode_from_name(e, &mode) != LMQ_OK)
        fprintf(stderr, "lmq: LMQ_GEMM=%s is not auto, vecdot, blas or panel; using auto\n", e);
    else if (e && *e)
        lmq_gemm_mode_set(mode);
    lmq_error_clear();
}

lmq_status cli_model_load(const char *path, lmq_model **out)
{
    lmq_model_params p = lmq_model_default_params();
    const char *e = getenv("LMQ_REPACK");
    if (e && !strcmp(e, "0")) p.repack = 0;
    return lmq_model_load_params(path, &p, out);
}
