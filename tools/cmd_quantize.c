/* lmq quantize: quantize a float model to a type or mix (q4_k_m, q8_0, ...). */
#include <getopt.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "lmq_convert.h"
#include "lmq_quant.h"
#include "lmq_calib.h"

static const char *USAGE =
    "lmq quantize IN OUT --type MIX [--tensor-type REGEX=TYPE]... [--output-tensor-type T]\n"
    "       [--token-embedding-type T] [--pure] [--imatrix FILE] [-t N] [--zstd] [--dry-run] [--json]\n"
    "       [--target-bpw X | --target-size BYTES[K|M|G]] [--gptq] [--calibrate TEXT] [--calib-chunks N] [--gptq-chunks N]\n"
    "       [--gptq-inputs float|quantized|both]";

static const char *HELP =
    "Quantizes a float model (.lmq or GGUF with f32/f16/bf16 tensors, or a Hugging\n"
    "Face directory, converted on the fly) into a .lmq file, one tensor at a time.\n"
    "MIX is one of llama.cpp's mixes, with its per-layer rules (output head, attn_v\n"
    "and ffn_down promotions, fallbacks for row lengths the blocks do not divide),\n"
    "or an lmq-only type (f8_e4m3, f8_e5m2); `--list` shows them. MIX may also be\n"
    "given as a third argument (lmq quantize IN OUT q4_k_m).\n\n"
    "  --type MIX                  the mix or type\n"
    "  --tensor-type REGEX=TYPE    type of the tensors whose name matches the POSIX\n"
    "                              extended regex (repeatable; first match wins)\n"
    "  --output-tensor-type T      type of output.weight\n"
    "  --token-embedding-type T    type of token_embd.weight\n"
    "  --imatrix FILE              importance matrix (lmq imatrix's or llama.cpp's GGUF,\n"
    "                              or llama.cpp's legacy imatrix.dat): every quantizer\n"
    "                              weights its error by the activations' mean squares\n"
    "  --target-bpw X              choose every tensor's type (q2_K..q8_0, iq4_xs, q4_0,\n"
    "                              fp8) to minimise the predicted KLD with at most X bits\n"
    "                              per weight (all tensors counted); --tensor-type pins\n"
    "                              are kept. Needs --calibrate (and best --imatrix)\n"
    "  --target-size SIZE          the same with a budget of SIZE bytes of tensor data\n"
    "  --gptq                      error feedback: round each row so that its output error\n"
    "                              on the calibration text (not its weight error) is\n"
    "                              small, from the inputs' covariance (GPTQ). Needs\n"
    "                              --calibrate. Layer by layer: one block's covariances\n"
    "                              and the calibration's hidden states in memory\n"
    "                              (chunks x 256 x hidden x 4 bytes), any depth\n"
    "  --calibrate TEXT            calibration text (never the evaluation text) for the\n"
    "                              per-tensor KLD fit and --gptq\n"
    "  --calib-chunks N            chunks of 256 tokens for the fit (default 16)\n"
    "  --gptq-chunks N             chunks of 256 tokens for --gptq (default 128)\n"
    "  --gptq-inputs S             the stream a block's covariances come from: float\n"
    "                              (default), quantized (the blocks before it\n"
    "                              quantized) or both\n"
    "  --pure                      no promotions: every matrix in the mix's base type\n"
    "                              (row-length fallbacks still apply)\n"
    "  -t, --threads N             threads (default: all cores)\n"
    "  --zstd                      compress the tensors in the container\n"
    "  --dry-run                   print the plan (tensor, shape, type, size) and the\n"
    "                              resulting size and bits per weight; write nothing\n"
    "  --json                      machine-readable plan/summary on stdout\n"
    "  --list                      list the mixes\n"
    "  -h, --help                  this help\n";

#define MAX_OVERRIDES 256

typedef struct write_progress {
    cli_progress bar;
    int decile; /* the last tenth printed without a terminal */
    bool started;
    const char *phase; /* NULL: "write" */
} write_progress;

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    write_progress *p = ctx;
    p->bar.total = (double)total / 1e6;
    cli_progress_update(&p->bar, (double)done / 1e6, "M weights");
    if (!p->started) { /* the write's own clock (a calibration may have run before) */
        p->started = true;
        p->bar.t0 = lmq_time_s();
    }
    if (p->bar.enabled || !total) return;
    int dec = (int)(done * 10 / total);
    if (dec > p->decile) { /* without a terminal: a line per tenth */
        p->decile = dec;
        double el = lmq_time_s() - p->bar.t0;
        fprintf(stderr, "lmq quantize: %s: %d%% (%.0f of %.0f M weights), %.1f s, ETA %.0f s\n",
                p->phase ? p->phase : "write", dec * 10,
                (double)done / 1e6, (double)total / 1e6, el, done ? el * (double)(total - done) / (double)done : 0.0);
    }
}

/* Progress of the calibration phases (lmq_calib_progress_fn): a bar with
 * ETA on a terminal; otherwise a line per tenth of the phase (every unit
 * of the per-layer pass, with its time), so that logs show where time goes. */
typedef struct calib_progress {
    bool tty, quiet;
    double t0, t_unit;
    int decile;
} calib_progress;

static void on_calib(void *ctx, const char *phase, int64_t done, int64_t total, const char *what)
{
    calib_progress *p = ctx;
    if (p->quiet) return;
    const double now = lmq_time_s();
    if (done == 0) {
        p->t0 = p->t_unit = now;
        p->decile = 0;
        if (!p->tty) fprintf(stderr, "lmq quantize: %s: started (%lld steps)\n", phase, (long long)total);
        return;
    }
    const double el = now - p->t0, unit = now - p->t_unit;
    const double eta = total > done ? el / (double)done * (double)(total - done) : 0.0;
    p->t_unit = now;
    const bool per_layer = !strcmp(phase, "gptq");
    if (p->tty) {
        fprintf(stderr, "\r\033[Klmq quantize: %s %lld/%lld %s  %.1f s  ETA %.0f s", phase, (long long)done,
                (long long)total, what ? what : "", el, eta);
        if (per_layer) fprintf(stderr, "\r\033[Klmq quantize: %s: %s done in %.1f s\n", phase, what ? what : "", unit);
    } else if (per_layer) {
        fprintf(stderr, "lmq quantize: %s: %lld/%lld %s in %.1f s, ETA %.0f s\n", phase, (long long)done, (long long)total,
                what ? what : "", unit, eta);
    } else {
        int dec = total > 0 ? (int)(done * 10 / total) : 0;
        if (dec > p->decile || done == total) {
            p->decile = dec;
            fprintf(stderr, "lmq quantize: %s: %lld/%lld%s%s, %.1f s, ETA %.0f s\n", phase, (long long)done, (long long)total,
                    what ? " " : "", what ? what : "", el, eta);
        }
    }
    if (done == total) {
        if (p->tty) fprintf(stderr, "\r\033[K");
        fprintf(stderr, "lmq quantize: %s: %lld steps in %.1f s\n", phase, (long long)total, el);
    }
}

static bool is_directory(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static void list_mixes(void)
{
    printf("%-9s %-8s %-6s %s\n", "mix", "base", "ftype", "description");
    for (size_t i = 0; i < lmq_mix_count(); i++) {
        const lmq_mix_info *m = lmq_mix_at(i);
        char ft[16] = "-";
        if (m->llama_ftype >= 0) snprintf(ft, sizeof ft, "%d", m->llama_ftype);
        printf("%-9s %-8s %-6s %s\n", m->name, lmq_type_name(m->base), ft, m->desc);
    }
}

static const char *type_list(void)
{
    static char buf[512];
    size_t len = 0;
    for (int t = 0; t < LMQ_TYPE_COUNT && len < sizeof buf; t++)
        if (lmq_mix_type_storable((lmq_type)t))
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", len ? ", " : "", lmq_type_name((lmq_type)t));
    return buf;
}

static bool parse_type(const char *s, lmq_type *out)
{
    return lmq_type_from_name(s, out) == LMQ_OK && lmq_mix_type_storable(*out);
}

static void shape_str(const lmq_mix_tensor *t, char *buf, size_t cap)
{
    size_t len = 0;
    for (uint32_t d = 0; d < t->n_dims && len < cap; d++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", d ? " x " : "", (long long)t->ne[d]);
}

static void print_plan_text(const lmq_quantize_plan *p, const lmq_quantize_opts *o)
{
    printf("%-36s %-18s %-8s %-8s %10s  %s\n", "tensor", "shape", "from", "type", "MiB", "why");
    for (size_t i = 0; i < p->n; i++) {
        const lmq_mix_tensor *t = &p->tensors[i];
        const lmq_mix_entry *e = &p->entries[i];
        char shape[64], why[160];
        shape_str(t, shape, sizeof shape);
        if (e->why == LMQ_MIX_WHY_OVERRIDE)
            snprintf(why, sizeof why, "--tensor-type %s", o->overrides[e->override_index].pattern);
        else
            snprintf(why, sizeof why, "%s", lmq_mix_why_name(e->why));
        if (e->type != e->wanted) {
            size_t l = strlen(why);
            snprintf(why + l, sizeof why - l, ", %s does not fit rows of %lld", lmq_type_name(e->wanted),
                     (long long)t->ne[0]);
        }
        printf("%-36s %-18s %-8s %-8s %10.3f  %s\n", t->name, shape, lmq_type_name(t->type), lmq_type_name(e->type),
               (double)e->bytes / 1048576.0, why);
    }
    const lmq_quantize_stats *s = &p->stats;
    printf("%s: %llu tensors (%llu quantized, %llu fallbacks), %.2f M weights, %.2f MiB -> %.2f MiB, %.3f bpw\n",
           p->mix->name, (unsigned long long)s->n_tensors, (unsigned long long)s->n_quantized,
           (unsigned long long)s->n_fallback, (double)s->n_elements / 1e6, (double)s->bytes_in / 1048576.0,
           (double)s->bytes_out / 1048576.0, s->bpw);
}

static void print_stats_json(const lmq_quantize_stats *s)
{
    printf("\"n_tensors\": %llu, \"quantized\": %llu, \"fallbacks\": %llu, \"weights\": %llu, "
           "\"bytes_in\": %llu, \"bytes_out\": %llu, \"file_bytes\": %llu, \"gptq_tensors\": %llu, \"bpw\": %.6f, \"seconds\": %.3f",
           (unsigned long long)s->n_tensors, (unsigned long long)s->n_quantized, (unsigned long long)s->n_fallback,
           (unsigned long long)s->n_elements, (unsigned long long)s->bytes_in, (unsigned long long)s->bytes_out,
           (unsigned long long)s->file_bytes, (unsigned long long)s->n_gptq, s->bpw, s->seconds);
}

static void print_plan_json(const lmq_quantize_plan *p, const lmq_quantize_opts *o)
{
    printf("{\"mix\": ");
    cli_json_str(stdout, p->mix->name);
    printf(", \"dry_run\": true, ");
    print_stats_json(&p->stats);
    printf(",\n \"tensors\": [\n");
    for (size_t i = 0; i < p->n; i++) {
        const lmq_mix_tensor *t = &p->tensors[i];
        const lmq_mix_entry *e = &p->entries[i];
        printf("  {\"name\": ");
        cli_json_str(stdout, t->name);
        printf(", \"shape\": [");
        for (uint32_t d = 0; d < t->n_dims; d++) printf("%s%lld", d ? ", " : "", (long long)t->ne[d]);
        printf("], \"from\": \"%s\", \"type\": \"%s\", \"wanted\": \"%s\", \"bytes\": %lld, \"why\": ",
               lmq_type_name(t->type), lmq_type_name(e->type), lmq_type_name(e->wanted), (long long)e->bytes);
        cli_json_str(stdout, lmq_mix_why_name(e->why));
        if (e->why == LMQ_MIX_WHY_OVERRIDE) {
            printf(", \"override\": ");
            cli_json_str(stdout, o->overrides[e->override_index].pattern);
        }
        printf("}%s\n", i + 1 < p->n ? "," : "");
    }
    printf(" ]}\n");
}

/* One warning line naming the quantized tensors the imatrix has no entry
 * for (they get the plain weighting). The embedding and the output head are
 * left out: llama-imatrix does not collect them by default. */
static void warn_missing(const lmq_quantize_plan *p, const lmq_quantize_opts *qo)
{
    size_t n = 0, len = 0;
    char buf[1024] = "";
    for (size_t i = 0; i < p->n; i++) {
        const char *name = p->tensors[i].name;
        const lmq_type_traits *tt = lmq_type_get(p->entries[i].type);
        if (!tt || !tt->quantized || !strcmp(name, "token_embd.weight") || !strcmp(name, "output.weight")) continue;
        if (lmq_imatrix_find(qo->imatrix, name)) continue;
        if (len < sizeof buf - 64) len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", n ? ", " : "", name);
        else if (len < sizeof buf - 4) len += (size_t)snprintf(buf + len, sizeof buf - len, ", ...");
        n++;
    }
    if (n)
        fprintf(stderr, "lmq quantize: warning: %s has no entry for %zu tensor(s), quantized without importance weights: %s\n",
                qo->imatrix_path, n, buf);
}

/* Plans (refusals before any work, warnings), then prints or writes. */
/* Layer-by-layer GPTQ for quantize_run (NULL: plain lmq_quantize_model). */
typedef struct seq_args {
    const char *text;
    int chunks;
    uint64_t limit;
    lmq_gptq_inputs inputs;
} seq_args;

static lmq_status run_sequential(const char *in, const char *out, lmq_quantize_opts *qo, const seq_args *sa, bool quiet,
                                 lmq_quantize_stats *st)
{
    lmq_model *m = NULL;
    int32_t *toks = NULL;
    size_t n_toks = 0;
    calib_progress cp = {isatty(2) && !getenv("LMQ_NO_PROGRESS"), quiet, 0, 0, 0};
    lmq_calib_params p = lmq_calib_default_params();
    p.n_chunks = sa->chunks;
    p.n_threads = qo->n_threads;
    p.max_bytes = sa->limit;
    p.gptq_inputs = sa->inputs;
    p.progress = on_calib;
    p.progress_ctx = &cp;
    lmq_status s = cli_model_load(in, &m); /* the tokenizer */
    if (!s) s = lmq_calib_tokens(m, sa->text, &toks, &n_toks);
    lmq_model_free(m);
    qo->gptq_calibration = sa->text;
    qo->gptq_chunks = sa->chunks;
    if (!s) s = lmq_gptq_sequential(in, out, qo, toks, n_toks, &p, st);
    free(toks);
    return s;
}

static int quantize_run(const char *in, const char *out, const lmq_mix_info *mi, lmq_quantize_opts *qo_, bool dry_run,
                        bool json, const seq_args *sa)
{
    lmq_quantize_opts qo = *qo_;
    const lmq_mix_override *ov = qo.overrides;
    size_t n_ov = qo.n_overrides;
    lmq_quantize_plan *plan = NULL;
    lmq_status s = lmq_quantize_plan_model(in, &qo, &plan);
    if (s) return cli_fail("quantize", s);
    if (qo.imatrix) warn_missing(plan, &qo);
    for (size_t i = 0; i < n_ov; i++)
        if (plan->override_hits[i] == 0)
            fprintf(stderr, "lmq quantize: warning: --tensor-type '%s' matches no tensor\n", ov[i].pattern);
    if (dry_run) {
        if (json) print_plan_json(plan, &qo);
        else print_plan_text(plan, &qo);
        lmq_quantize_plan_free(plan);
        return LMQ_EXIT_OK;
    }
    lmq_quantize_plan_free(plan);

    if (is_directory(in))
        fprintf(stderr, "lmq quantize: converting %s to a temporary .lmq next to %s first\n", in, out);
    write_progress pr = {0};
    cli_progress_begin(&pr.bar, "quantize", 0);
    qo.progress = on_progress;
    qo.progress_ctx = &pr;
    lmq_quantize_stats st;
    memset(&st, 0, sizeof st);
    s = sa ? run_sequential(in, out, &qo, sa, json, &st) : lmq_quantize_model(in, out, &qo, &st);
    cli_progress_end(&pr.bar);
    if (s) return cli_fail("quantize", s);
    fprintf(stderr,
            "lmq quantize: wrote %s (%s): %llu tensors, %.2f MiB -> %.2f MiB, %.3f bpw, %.2f s, peak RSS %.0f MiB\n",
            out, mi->name, (unsigned long long)st.n_tensors, (double)st.bytes_in / 1048576.0,
            (double)st.bytes_out / 1048576.0, st.bpw, st.seconds, (double)cli_peak_rss() / 1048576.0);
    if (qo.gptq_factor || sa)
        fprintf(stderr, "lmq quantize: %llu tensors quantized with error feedback (gptq%s)\n", (unsigned long long)st.n_gptq,
                sa ? ", layer by layer" : "");
    if (json) {
        printf("{\"mix\": ");
        cli_json_str(stdout, mi->name);
        printf(", \"output\": ");
        cli_json_str(stdout, out);
        printf(", ");
        print_stats_json(&st);
        printf("}\n");
    }
    return LMQ_EXIT_OK;
}

/* ---------------------------------------------------------- target plans */

typedef struct target_args {
    double bpw;       /* > 0: --target-bpw */
    int64_t size;     /* > 0: --target-size (bytes of tensor data) */
    const char *text; /* calibration text */
    int chunks;
} target_args;

static bool parse_size(const char *s, int64_t *out)
{
    char *end;
    double v = strtod(s, &end);
    double mul = 1;
    if (end == s || v <= 0) return false;
    if (*end == 'K' || *end == 'k') mul = 1024, end++;
    else if (*end == 'M' || *end == 'm') mul = 1048576, end++;
    else if (*end == 'G' || *end == 'g') mul = 1073741824, end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end) return false;
    *out = (int64_t)(v * mul);
    return *out > 0;
}

static const lmq_type TARGET_TYPES[] = {LMQ_TYPE_Q2_K, LMQ_TYPE_Q3_K, LMQ_TYPE_Q4_K, LMQ_TYPE_Q5_K,
                                        LMQ_TYPE_Q6_K, LMQ_TYPE_Q8_0, LMQ_TYPE_IQ4_XS, LMQ_TYPE_Q4_0,
                                        LMQ_TYPE_F8_E4M3, LMQ_TYPE_F8_E5M2};

/* The cache key (lmq_target_cache_key: the quantizer's version, source,
 * imatrix, calibration text, chunks, pins). */
static uint64_t target_key(const lmq_quantize_opts *qo, const target_args *tg, uint64_t source_id)
{
    char *text = NULL;
    size_t len = 0;
    if (lmq_read_file(tg->text, (size_t)1 << 32, &text, &len) != LMQ_OK) lmq_error_clear();
    uint64_t h = lmq_target_cache_key(qo, source_id, text, len, tg->chunks);
    free(text);
    return h;
}

/* The sensitivity fit on the loaded float model (lmq_target_calibrate). */
static lmq_status target_fit(const char *in, lmq_target_table *t, const lmq_quantize_opts *qo, const target_args *tg,
                             const char *dest, bool quiet)
{
    lmq_model *m = NULL;
    int32_t *toks = NULL;
    size_t n_toks = 0;
    char scratch[4200];
    snprintf(scratch, sizeof scratch, "%s.calib.%ld.logits", dest, (long)getpid());
    calib_progress cp = {isatty(2) && !getenv("LMQ_NO_PROGRESS"), quiet, 0, 0, 0};
    lmq_calib_params p = lmq_calib_default_params();
    p.n_chunks = tg->chunks;
    p.n_threads = qo->n_threads;
    p.scratch_path = scratch;
    p.progress = on_calib;
    p.progress_ctx = &cp;
    lmq_status s = cli_model_load(in, &m);
    if (!s) s = lmq_calib_tokens(m, tg->text, &toks, &n_toks);
    if (!s) s = lmq_target_calibrate(m, t, qo, toks, n_toks, &p);
    free(toks);
    lmq_model_free(m);
    return s;
}

/* Measures (or reads the cache), fits, solves, then quantizes with the
 * plan as exact-name pins after the user's own. */
static int target_run(const char *in, const char *out, const lmq_mix_info *mi, lmq_quantize_opts *qo,
                      const target_args *tg, bool dry_run, bool json)
{
    lmq_target_table *t = NULL;
    lmq_file *f = NULL;
    lmq_status s = lmq_file_open(in, &f);
    if (s) return cli_fail("quantize", s);
    uint64_t source_id = lmq_file_id(f);
    lmq_file_close(f);
    /* the cache and the fit's temporary files go next to the output (the working
     * directory for a dry run without one: the input's may be read-only) */
    const char *dest = out ? out : "./lmq-target";
    char cache[4096];
    {
        const char *slash = strrchr(dest, '/');
        int dl = slash ? (int)(slash - dest) : 1;
        snprintf(cache, sizeof cache, "%.*s/.lmq-target-%016llx.cache", dl, slash ? dest : ".",
                 (unsigned long long)target_key(qo, tg, source_id));
    }
    if (lmq_target_load(cache, &t) == LMQ_OK && t->source_id == source_id) {
        fprintf(stderr, "lmq quantize: target: measurements from %s\n", cache);
    } else {
        lmq_target_table_free(t);
        t = NULL;
        lmq_error_clear();
        double t0 = lmq_time_s();
        write_progress ep = {.phase = "errors"};
        lmq_quantize_opts mo = *qo;
        if (!json) {
            cli_progress_begin(&ep.bar, "errors", 0);
            mo.progress = on_progress;
            mo.progress_ctx = &ep;
        }
        s = lmq_target_measure(in, &mo, TARGET_TYPES, sizeof TARGET_TYPES / sizeof TARGET_TYPES[0], &t);
        if (!json) cli_progress_end(&ep.bar);
        if (s) return cli_fail("quantize", s);
        fprintf(stderr, "lmq quantize: target: weighted errors of %zu candidate types measured in %.1f s\n",
                sizeof TARGET_TYPES / sizeof TARGET_TYPES[0], lmq_time_s() - t0);
        if ((s = target_fit(in, t, qo, tg, dest, json))) {
            lmq_target_table_free(t);
            return cli_fail("quantize", s);
        }
        if (lmq_target_save(t, cache)) fprintf(stderr, "lmq quantize: warning: cannot write %s\n", cache);
        else fprintf(stderr, "lmq quantize: target: measurements cached in %s\n", cache);
    }
    int64_t budget = tg->size > 0 ? tg->size : (int64_t)(tg->bpw * (double)t->n_elements / 8.0);
    int64_t total = 0;
    if ((s = lmq_target_solve(t, budget, &total))) {
        lmq_target_table_free(t);
        return cli_fail("quantize", s);
    }
    /* the plan as pins: the user's first (they are fixed in t), then ours */
    size_t n_free = 0;
    for (size_t i = 0; i < t->n; i++) n_free += t->t[i].free_;
    size_t n_ov = qo->n_overrides + n_free;
    lmq_mix_override *ov = calloc(n_ov ? n_ov : 1, sizeof *ov);
    char (*pats)[1100] = calloc(n_free ? n_free : 1, sizeof *pats);
    char **plan_strs = calloc(n_free ? n_free : 1, sizeof *plan_strs);
    lmq_meta *extra = lmq_meta_new();
    int rc = LMQ_EXIT_FAIL;
    if (!ov || !pats || !plan_strs || !extra) {
        cli_fail("quantize", lmq_error(LMQ_ERR_NOMEM, "out of memory"));
        goto done;
    }
    memcpy(ov, qo->overrides, qo->n_overrides * sizeof *ov);
    size_t k = qo->n_overrides, j = 0;
    if (dry_run && !json)
        printf("%-32s %-8s %10s %14s %12s %12s\n", "tensor", "type", "bytes", "weighted err", "KLD/err", "pred. KLD");
    for (size_t i = 0; i < t->n; i++) {
        const lmq_target_tensor *x = &t->t[i];
        if (!x->free_) continue;
        const lmq_target_cand *c = &x->cand[x->choice];
        lmq_target_name_regex(x->name, pats[j], sizeof pats[j]);
        ov[k].pattern = pats[j];
        ov[k].type = c->type;
        k++;
        size_t len = strlen(x->name) + 16;
        if (!(plan_strs[j] = malloc(len))) {
            cli_fail("quantize", lmq_error(LMQ_ERR_NOMEM, "out of memory"));
            goto done;
        }
        snprintf(plan_strs[j], len, "%s=%s", x->name, lmq_type_name(c->type));
        j++;
        if (dry_run && !json)
            printf("%-32s %-8s %10lld %14.6g %12.4g %12.6f\n", x->name, lmq_type_name(c->type), (long long)c->bytes,
                   c->err, x->scale, x->scale * c->err);
    }
    double predicted = lmq_target_predicted(t);
    fprintf(stderr, "lmq quantize: target: %lld of %lld bytes (%.4f bpw), predicted mean KLD %.6f\n",
            (long long)total, (long long)budget, (double)total * 8.0 / (double)t->n_elements, predicted);
    lmq_meta_set_str(extra, "lmq.quantize.mix", "target");
    if (tg->bpw > 0) lmq_meta_set_f64(extra, "lmq.quantize.target_bpw", tg->bpw);
    else lmq_meta_set_u64(extra, "lmq.quantize.target_size", (uint64_t)tg->size);
    lmq_meta_set_f64(extra, "lmq.quantize.target_predicted_kld", predicted);
    lmq_meta_set_str(extra, "lmq.quantize.target_calibration", tg->text);
    lmq_meta_set_str_arr(extra, "lmq.quantize.plan", (const char *const *)plan_strs, NULL, n_free);
    lmq_quantize_opts qt = *qo;
    qt.overrides = ov;
    qt.n_overrides = n_ov;
    qt.extra_meta = extra;
    rc = quantize_run(in, out, mi, &qt, dry_run, json, NULL);
done:
    for (size_t i = 0; plan_strs && i < n_free; i++) free(plan_strs[i]);
    free(plan_strs);
    free(pats);
    free(ov);
    lmq_meta_free(extra);
    lmq_target_table_free(t);
    return rc;
}

/* The one-pass float collection of GPTQ covariances (lmq_gptq_calib_collect). */
static lmq_status gptq_collect(const char *in, const char *text, int chunks, int n_threads, uint64_t limit, bool quiet,
                               lmq_gptq_calib **out)
{
    lmq_model *m = NULL;
    int32_t *toks = NULL;
    size_t n_toks = 0;
    calib_progress cp = {isatty(2) && !getenv("LMQ_NO_PROGRESS"), quiet, 0, 0, 0};
    lmq_calib_params p = lmq_calib_default_params();
    p.n_chunks = chunks;
    p.n_threads = n_threads;
    p.max_bytes = limit;
    p.progress = on_calib;
    p.progress_ctx = &cp;
    lmq_status s = cli_model_load(in, &m);
    if (!s) s = lmq_calib_tokens(m, text, &toks, &n_toks);
    if (!s) s = lmq_gptq_calib_collect(m, toks, n_toks, &p, out);
    if (!s && !quiet)
        fprintf(stderr, "lmq quantize: gptq: %zu input covariances (%.1f MiB)\n", lmq_gptq_calib_count(*out),
                (double)lmq_gptq_calib_bytes(*out) / 1048576.0);
    free(toks);
    lmq_model_free(m);
    return s;
}

int lmq_cmd_quantize(int argc, char **argv)
{
    const char *in = NULL, *out = NULL, *mix = NULL, *imatrix_path = NULL;
    target_args tg = {0, 0, NULL, 16};
    bool dry_run = false, json = false, gptq = false, gptq_chunks_set = false;
    int gptq_chunks = 128;
    lmq_gptq_inputs gptq_inputs = LMQ_GPTQ_INPUTS_FLOAT;
    lmq_quantize_opts qo;
    memset(&qo, 0, sizeof qo);
    qo.output_type = LMQ_TYPE_COUNT;
    qo.token_embd_type = LMQ_TYPE_COUNT;
    static lmq_mix_override ov[MAX_OVERRIDES];
    static char ov_pat[MAX_OVERRIDES][512];
    size_t n_ov = 0;
    static const struct option opts[] = {{"type", required_argument, 0, 600},
                                         {"tensor-type", required_argument, 0, 601},
                                         {"output-tensor-type", required_argument, 0, 602},
                                         {"token-embedding-type", required_argument, 0, 603},
                                         {"pure", no_argument, 0, 604},
                                         {"threads", required_argument, 0, 't'},
                                         {"zstd", no_argument, 0, 605},
                                         {"dry-run", no_argument, 0, 606},
                                         {"json", no_argument, 0, 607},
                                         {"list", no_argument, 0, 608},
                                         {"imatrix", required_argument, 0, 609},
                                         {"target-bpw", required_argument, 0, 610},
                                         {"target-size", required_argument, 0, 611},
                                         {"calibrate", required_argument, 0, 612},
                                         {"calib-chunks", required_argument, 0, 613},
                                         {"gptq", no_argument, 0, 614},
                                         {"gptq-chunks", required_argument, 0, 615},
                                         {"gptq-inputs", required_argument, 0, 616},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    opterr = 0;
    optind = 1;
    int o;
    int64_t v;
    while ((o = getopt_long(argc, argv, "t:h", opts, NULL)) != -1) {
        switch (o) {
        case 600: mix = optarg; break;
        case 601: {
            const char *eq = strrchr(optarg, '=');
            if (!eq || eq == optarg)
                return cli_usage_error("quantize", USAGE, "--tensor-type takes REGEX=TYPE, not '%s'", optarg);
            if (n_ov == MAX_OVERRIDES) return cli_usage_error("quantize", USAGE, "too many --tensor-type options");
            size_t plen = (size_t)(eq - optarg);
            if (plen >= sizeof ov_pat[0]) return cli_usage_error("quantize", USAGE, "--tensor-type pattern too long");
            memcpy(ov_pat[n_ov], optarg, plen);
            ov_pat[n_ov][plen] = '\0';
            if (!parse_type(eq + 1, &ov[n_ov].type))
                return cli_usage_error("quantize", USAGE, "--tensor-type %s: unknown type '%s' (valid: %s)", ov_pat[n_ov],
                                       eq + 1, type_list());
            regex_t re;
            int rc = regcomp(&re, ov_pat[n_ov], REG_EXTENDED | REG_NOSUB);
            if (rc != 0) {
                char msg[160];
                regerror(rc, &re, msg, sizeof msg);
                return cli_usage_error("quantize", USAGE, "--tensor-type: bad regular expression '%s': %s", ov_pat[n_ov],
                                       msg);
            }
            regfree(&re);
            ov[n_ov].pattern = ov_pat[n_ov];
            n_ov++;
            break;
        }
        case 602:
        case 603: {
            lmq_type t;
            if (!parse_type(optarg, &t))
                return cli_usage_error("quantize", USAGE, "%s: unknown type '%s' (valid: %s)",
                                       o == 602 ? "--output-tensor-type" : "--token-embedding-type", optarg, type_list());
            if (o == 602) qo.output_type = t;
            else qo.token_embd_type = t;
            break;
        }
        case 604: qo.pure = true; break;
        case 't':
            if (!cli_parse_i64(optarg, 1, LMQ_MAX_THREADS, &v))
                return cli_usage_error("quantize", USAGE, "--threads must be in [1, %d], not '%s'", LMQ_MAX_THREADS, optarg);
            qo.n_threads = (int)v;
            break;
        case 605: qo.codec = LMQ_CODEC_ZSTD; break;
        case 606: dry_run = true; break;
        case 607: json = true; break;
        case 608: list_mixes(); return LMQ_EXIT_OK;
        case 609: imatrix_path = optarg; break;
        case 610:
            if (!cli_parse_f64(optarg, 1.0, 64.0, &tg.bpw)) return cli_usage_error("quantize", USAGE, "--target-bpw: bad value '%s'", optarg);
            break;
        case 611:
            if (!parse_size(optarg, &tg.size)) return cli_usage_error("quantize", USAGE, "--target-size: bad size '%s'", optarg);
            break;
        case 612: tg.text = optarg; break;
        case 613:
            if (!cli_parse_i64(optarg, 1, 100000, &v)) return cli_usage_error("quantize", USAGE, "--calib-chunks: bad count '%s'", optarg);
            tg.chunks = (int)v;
            break;
        case 614: gptq = true; break;
        case 615:
            if (!cli_parse_i64(optarg, 1, 100000, &v)) return cli_usage_error("quantize", USAGE, "--gptq-chunks: bad count '%s'", optarg);
            gptq_chunks = (int)v;
            gptq_chunks_set = true;
            break;
        case 616:
            if (!strcmp(optarg, "float")) gptq_inputs = LMQ_GPTQ_INPUTS_FLOAT;
            else if (!strcmp(optarg, "quantized")) gptq_inputs = LMQ_GPTQ_INPUTS_QUANTIZED;
            else if (!strcmp(optarg, "both")) gptq_inputs = LMQ_GPTQ_INPUTS_BOTH;
            else return cli_usage_error("quantize", USAGE, "--gptq-inputs: float, quantized or both, not '%s'", optarg);
            break;
        case 'h': printf("usage: %s\n\n%s", USAGE, HELP); return LMQ_EXIT_OK;
        default: return cli_usage_error("quantize", USAGE, "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    int n_pos = argc - optind;
    char **pos = argv + optind;
    const lmq_mix_info *mi;
    if (n_pos > 3) return cli_usage_error("quantize", USAGE, "unexpected argument '%s'", pos[3]);
    if (n_pos >= 1) in = pos[0];
    if (n_pos == 2 && dry_run && !mix && lmq_mix_from_name(pos[1], &mi) == LMQ_OK) mix = pos[1];
    else if (n_pos >= 2) out = pos[1];
    if (n_pos == 3) {
        if (mix) return cli_usage_error("quantize", USAGE, "the type is given twice ('%s' and '%s')", mix, pos[2]);
        mix = pos[2];
    }
    if (!in) return cli_usage_error("quantize", USAGE, "an input model is required");
    if (!out && !dry_run) return cli_usage_error("quantize", USAGE, "an output path is required");
    if (!mix && (tg.bpw > 0 || tg.size > 0)) mix = "q4_k_m"; /* only decides which tensors are quantizable */
    if (!mix) return cli_usage_error("quantize", USAGE, "--type MIX is required (valid: %s)", lmq_mix_names());
    if (lmq_mix_from_name(mix, &mi) != LMQ_OK)
        return cli_usage_error("quantize", USAGE, "%s", lmq_last_error());
    qo.mix = mi->name;
    qo.overrides = ov;
    qo.n_overrides = n_ov;

    lmq_imatrix *im = NULL;
    lmq_status s;
    if (imatrix_path) {
        if ((s = lmq_imatrix_load(imatrix_path, &im))) return cli_fail("quantize", s);
        qo.imatrix = im;
        qo.imatrix_path = imatrix_path;
    }
    lmq_gptq_calib *gc = NULL;
    seq_args seq = {NULL, 0, 0, LMQ_GPTQ_INPUTS_FLOAT};
    if (gptq_chunks_set && !gptq) {
        lmq_imatrix_free(im);
        return cli_usage_error("quantize", USAGE, "--gptq-chunks is for --gptq");
    }
    if ((gptq || tg.bpw > 0 || tg.size > 0) && is_directory(in)) {
        lmq_imatrix_free(im);
        return cli_usage_error("quantize", USAGE, "%s needs a converted model: run 'lmq convert %s -o model.lmq' first",
                               gptq ? "--gptq" : "--target-bpw/--target-size", in);
    }
    if (gptq) {
        if (!tg.text) {
            lmq_imatrix_free(im);
            return cli_usage_error("quantize", USAGE, "--gptq needs --calibrate TEXT");
        }
        lmq_quantize_plan *plan = NULL; /* the refusals (a quantized input, ...) before the long run */
        if (!dry_run && (s = lmq_quantize_plan_model(in, &qo, &plan))) {
            lmq_imatrix_free(im);
            return cli_fail("quantize", s);
        }
        lmq_quantize_plan_free(plan);
        const long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
        const uint64_t limit = pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize / 2 : (uint64_t)8 << 30;
        if (!dry_run && !(tg.bpw > 0 || tg.size > 0)) {
            /* layer by layer: one block's covariances at a time */
            seq = (seq_args){tg.text, gptq_chunks, limit, gptq_inputs};
        } else if (!dry_run) {
            if ((s = gptq_collect(in, tg.text, gptq_chunks, qo.n_threads, limit, json, &gc))) {
                lmq_imatrix_free(im);
                return cli_fail("quantize", s);
            }
            qo.gptq_factor = lmq_gptq_calib_factor;
            qo.gptq_user = gc;
            qo.gptq_calibration = tg.text;
            qo.gptq_chunks = gptq_chunks;
        }
    }
    int rc;
    if (tg.bpw > 0 || tg.size > 0) {
        if (tg.bpw > 0 && tg.size > 0) rc = cli_usage_error("quantize", USAGE, "--target-bpw and --target-size exclude each other");
        else if (!tg.text) rc = cli_usage_error("quantize", USAGE, "--target-bpw/--target-size need --calibrate TEXT");
        else rc = target_run(in, out, mi, &qo, &tg, dry_run, json);
    } else {
        rc = quantize_run(in, out, mi, &qo, dry_run, json, seq.text ? &seq : NULL);
    }
    const char *fails = lmq_gptq_calib_failures(gc);
    for (const char *l = fails; l && *l;) { /* one warning per tensor without feedback */
        const char *nl = strchr(l, '\n');
        int len = nl ? (int)(nl - l) : (int)strlen(l);
        fprintf(stderr, "lmq quantize: warning: gptq: %.*s; quantized without error feedback\n", len, l);
        l += len + (nl ? 1 : 0);
    }
    lmq_gptq_calib_free(gc);
    lmq_imatrix_free(im);
    return rc;
}
