/* lmq imatrix: importance matrix of a model over calibration text, in
 * llama.cpp's GGUF imatrix format; merging and converting imatrix files. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lmq_datasets.h"
#include "lmq_calib.h"
#include "lmq_eval.h"
#include "textgen.h"

static const char *USAGE =
    "lmq imatrix -m MODEL -f TEXT [-c 512] [--chunks N] [-t N] [--process-output] [--force] -o OUT.gguf\n"
    "       lmq imatrix --in-file A [--in-file B]... [-m MODEL -f TEXT ...] -o OUT.gguf   (merge / convert)\n"
    "       lmq imatrix --show FILE";

static const char *HELP =
    "Runs MODEL over TEXT in chunks of -c tokens (llama-imatrix's method: BOS at the\n"
    "start of each chunk, running perplexity of the second halves) and writes, for\n"
    "every blk.* weight, the per-column sum of squared input activations and the\n"
    "token count (per expert for MoE) in llama.cpp's GGUF imatrix format.\n\n"
    "  -m, --model MODEL      model (.lmq or GGUF)\n"
    "  -f, --file TEXT        calibration text (wiki.test.raw is refused: it is the\n"
    "                         evaluation set; --force overrides)\n"
    "  -c, --ctx-size N       chunk length (default 512)\n"
    "  --chunks N             use the first N chunks (default: all)\n"
    "  -t, --threads N        threads (default: all cores)\n"
    "  --process-output       also collect the output head\n"
    "  --in-file FILE         add an existing imatrix (GGUF or legacy .dat); repeat\n"
    "                         to merge several (sums and counts add exactly)\n"
    "  -o, --output FILE      GGUF imatrix to write\n"
    "  --show FILE            print an imatrix's datasets, chunks and entries\n"
    "  -h, --help             this help\n";

#define MAX_IN 64

typedef struct progress_ctx {
    cli_progress prog;
    double t0;
} progress_ctx;

static void on_chunk(void *arg, int32_t chunk, int32_t n_chunks, double ppl)
{
    progress_ctx *pc = arg;
    double el = lmq_time_s() - pc->t0;
    double eta = chunk + 1 > 0 ? el / (chunk + 1) * (n_chunks - chunk - 1) : 0;
    cli_progress_end(&pc->prog);
    if (chunk == 0) fprintf(stderr, "imatrix: %.2f s per chunk, ETA %.1f s\n", el, eta);
    printf("[%d]%.4f,", chunk + 1, ppl);
    if ((chunk + 1) % 16 == 0 || chunk + 1 == n_chunks) printf("  (ETA %.0f s)\n", eta);
    fflush(stdout);
    cli_progress_update(&pc->prog, chunk + 1, "chunks");
}

static int show(const char *path)
{
    lmq_imatrix *im;
    lmq_status s = lmq_imatrix_load(path, &im);
    if (s) return cli_fail("imatrix", s);
    printf("%s: %zu entries, %u chunks of %u tokens\n", path, lmq_imatrix_count(im), lmq_imatrix_chunk_count(im),
           lmq_imatrix_chunk_size(im));
    for (size_t i = 0; i < lmq_imatrix_n_datasets(im); i++) printf("dataset: %s\n", lmq_imatrix_dataset(im, i));
    for (size_t i = 0; i < lmq_imatrix_count(im); i++) {
        const lmq_imatrix_entry *e = lmq_imatrix_at(im, i);
        double sum = 0;
        for (int64_t j = 0; j < e->n_cols * e->n_mat; j++) sum += e->sum2[j];
        double cnt = 0;
        for (int32_t j = 0; j < e->n_mat; j++) cnt += e->counts[j];
        printf("%-40s %6lld x %-4d count %10.0f  mean sq %.6g\n", e->name, (long long)e->n_cols, e->n_mat, cnt,
               cnt > 0 ? sum / cnt / (double)e->n_cols : 0.0);
    }
    lmq_imatrix_free(im);
    return LMQ_EXIT_OK;
}

static int collect(lmq_imatrix *im, const char *model, const char *text_path, bool force, lmq_imatrix_params *ip)
{
    char *text = NULL;
    size_t len = 0;
    lmq_status s = lmq_read_file(text_path, (size_t)1 << 32, &text, &len);
    if (s) return cli_fail("imatrix", s);
    if (!force && (s = lmq_calib_check_text(text_path, text, len))) {
        free(text);
        fprintf(stderr, "lmq imatrix: %s (--force to do it anyway)\n", lmq_last_error());
        return LMQ_EXIT_FAIL;
    }
    lmq_model *m;
    if ((s = cli_model_load(model, &m))) {
        free(text);
        return cli_fail("imatrix", s);
    }
    const lmq_vocab *vocab = lmq_model_vocab(m);
    if (!vocab) {
        free(text);
        lmq_model_free(m);
        fprintf(stderr, "lmq imatrix: %s: the model has no tokenizer\n", model);
        return LMQ_EXIT_FAIL;
    }
    int32_t *toks = NULL;
    size_t n_toks = 0;
    s = textgen_tokenize(vocab, text, len, true, false, &toks, &n_toks);
    free(text);
    if (s) {
        lmq_model_free(m);
        return cli_fail("imatrix", s);
    }
    int64_t n_max = (int64_t)n_toks / ip->n_ctx;
    int64_t n_run = ip->n_chunks > 0 && ip->n_chunks < n_max ? ip->n_chunks : n_max;
    fprintf(stderr, "imatrix: %s: %zu tokens, %lld chunks of %d\n", text_path, n_toks, (long long)n_run, ip->n_ctx);
    progress_ctx pc;
    memset(&pc, 0, sizeof pc);
    pc.t0 = lmq_time_s();
    cli_progress_begin(&pc.prog, "imatrix", (double)n_run);
    ip->on_chunk = on_chunk;
    ip->cb_ctx = &pc;
    lmq_ppl_result r;
    s = lmq_imatrix_collect(m, toks, (int64_t)n_toks, ip, im, &r);
    cli_progress_end(&pc.prog);
    free(toks);
    lmq_model_free(m);
    if (s) return cli_fail("imatrix", s);
    const char *base = strrchr(text_path, '/');
    if ((s = lmq_imatrix_add_dataset(im, base ? base + 1 : text_path))) return cli_fail("imatrix", s);
    printf("\nFinal estimate: PPL = %.4f +/- %.5f (%d chunks, %.2f s)\n", r.ppl, r.ppl_err, r.n_chunks, r.seconds);
    return LMQ_EXIT_OK;
}

int lmq_cmd_imatrix(int argc, char **argv)
{
    const char *model = NULL, *text = NULL, *out = NULL, *show_path = NULL;
    const char *in_files[MAX_IN];
    size_t n_in = 0;
    bool force = false;
    lmq_imatrix_params ip;
    memset(&ip, 0, sizeof ip);
    ip.n_ctx = 512;
    int64_t v;
    enum { O_CHUNKS = 256, O_OUTPUT_HEAD, O_FORCE, O_IN, O_SHOW, O_HELP };
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"file", required_argument, 0, 'f'},
        {"ctx-size", required_argument, 0, 'c'}, {"threads", required_argument, 0, 't'},
        {"output", required_argument, 0, 'o'}, {"chunks", required_argument, 0, O_CHUNKS},
        {"process-output", no_argument, 0, O_OUTPUT_HEAD}, {"force", no_argument, 0, O_FORCE},
        {"in-file", required_argument, 0, O_IN}, {"show", required_argument, 0, O_SHOW},
        {"help", no_argument, 0, O_HELP}, {0, 0, 0, 0}};
    opterr = 0;
    optind = 1;
    int o;
    while ((o = getopt_long(argc, argv, "m:f:c:t:o:h", opts, NULL)) != -1) {
        switch (o) {
        case 'm': model = optarg; break;
        case 'f': text = optarg; break;
        case 'o': out = optarg; break;
        case 'c':
            if (!cli_parse_i64(optarg, 4, 1 << 20, &v)) return cli_usage_error("imatrix", USAGE, "-c: bad context size '%s'", optarg);
            ip.n_ctx = (int32_t)v;
            break;
        case 't':
            if (!cli_parse_i64(optarg, 1, 1024, &v)) return cli_usage_error("imatrix", USAGE, "-t: bad thread count '%s'", optarg);
            ip.n_threads = (int32_t)v;
            break;
        case O_CHUNKS:
            if (!cli_parse_i64(optarg, 1, 1 << 30, &v)) return cli_usage_error("imatrix", USAGE, "--chunks: bad count '%s'", optarg);
            ip.n_chunks = (int32_t)v;
            break;
        case O_OUTPUT_HEAD: ip.process_output = true; break;
        case O_FORCE: force = true; break;
        case O_IN:
            if (n_in == MAX_IN) return cli_usage_error("imatrix", USAGE, "too many --in-file options");
            in_files[n_in++] = optarg;
            break;
        case O_SHOW: show_path = optarg; break;
        case 'h':
        case O_HELP: printf("usage: %s\n\n%s", USAGE, HELP); return LMQ_EXIT_OK;
        default: return cli_usage_error("imatrix", USAGE, "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error("imatrix", USAGE, "unexpected argument '%s'", argv[optind]);
    if (show_path) return show(show_path);
    if (!out) return cli_usage_error("imatrix", USAGE, "-o OUT is required");
    if (!n_in && (!model || !text)) return cli_usage_error("imatrix", USAGE, "-m MODEL and -f TEXT are required");
    if (!!model != !!text) return cli_usage_error("imatrix", USAGE, "-m and -f go together");

    lmq_imatrix *im = lmq_imatrix_new();
    if (!im) return cli_fail("imatrix", lmq_error(LMQ_ERR_NOMEM, "out of memory"));
    int rc = LMQ_EXIT_OK;
    for (size_t i = 0; i < n_in && rc == LMQ_EXIT_OK; i++) {
        lmq_imatrix *x;
        lmq_status s = lmq_imatrix_load(in_files[i], &x);
        if (!s) s = lmq_imatrix_merge(im, x);
        lmq_imatrix_free(x);
        if (s) rc = cli_fail("imatrix", s);
        else fprintf(stderr, "imatrix: merged %s\n", in_files[i]);
    }
    if (rc == LMQ_EXIT_OK && model) rc = collect(im, model, text, force, &ip);
    if (rc == LMQ_EXIT_OK) {
        lmq_status s = lmq_imatrix_save(im, out);
        if (s) rc = cli_fail("imatrix", s);
        else
            fprintf(stderr, "imatrix: wrote %s: %zu entries, %u chunks of %u\n", out, lmq_imatrix_count(im),
                    lmq_imatrix_chunk_count(im), lmq_imatrix_chunk_size(im));
    }
    lmq_imatrix_free(im);
    return rc;
}
