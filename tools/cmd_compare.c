/* lmq compare: perplexity and KL divergence of several quantizations against
 * one base model, as one table (the one that goes into a model card). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "lmq_datasets.h"
#include "lmq_eval.h"
#include "textgen.h"

static const char *USAGE =
    "lmq compare -b BASE_MODEL [-f TEXT] [-c 512] [--chunks N] [-t N] [--json] MODEL...";

typedef struct row {
    const char *path;
    char mix[64];
    uint64_t bytes, params;
    lmq_ppl_result r;
} row;

static void describe(lmq_model *m, row *w)
{
    const lmq_meta *meta = lmq_file_meta(lmq_model_file(m));
    const char *mix;
    if (lmq_meta_get_str(meta, "lmq.quantize.mix", &mix, NULL) == LMQ_OK) {
        snprintf(w->mix, sizeof w->mix, "%s", mix);
    } else {
        /* the dominant type by bytes */
        uint64_t by[LMQ_TYPE_COUNT] = {0};
        const lmq_file *f = lmq_model_file(m);
        for (size_t i = 0; i < lmq_file_n_tensors(f); i++) by[lmq_file_tensor(f, i)->type] += lmq_file_tensor(f, i)->nbytes;
        int best = 0;
        for (int t = 1; t < LMQ_TYPE_COUNT; t++)
            if (by[t] > by[best]) best = t;
        snprintf(w->mix, sizeof w->mix, "%s", lmq_type_name((lmq_type)best));
    }
    w->bytes = lmq_model_weight_bytes(m);
    w->params = lmq_model_n_params(m);
}

int lmq_cmd_compare(int argc, char **argv)
{
    const char *base = NULL, *text_path = NULL;
    lmq_ppl_params p = lmq_ppl_default_params();
    bool json = false;
    int64_t v;
    static const struct option opts[] = {{"base", required_argument, 0, 'b'}, {"file", required_argument, 0, 'f'},
                                         {"ctx-size", required_argument, 0, 'c'}, {"threads", required_argument, 0, 't'},
                                         {"chunks", required_argument, 0, 256}, {"json", no_argument, 0, 257},
                                         {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    opterr = 0;
    int o;
    while ((o = getopt_long(argc, argv, "b:f:c:t:h", opts, NULL)) != -1) {
        switch (o) {
        case 'b': base = optarg; break;
        case 'f': text_path = optarg; break;
        case 'c':
            if (!cli_parse_i64(optarg, 4, 1 << 20, &v)) return cli_usage_error("compare", USAGE, "-c: bad value '%s'", optarg);
            p.n_ctx = (int32_t)v;
            break;
        case 't':
            if (!cli_parse_i64(optarg, 1, LMQ_MAX_THREADS, &v)) return cli_usage_error("compare", USAGE, "-t takes a thread count in [1, %d], not '%s'", LMQ_MAX_THREADS, optarg);
            p.n_threads = (int32_t)v;
            break;
        case 256:
            if (!cli_parse_i64(optarg, 1, 1 << 30, &v)) return cli_usage_error("compare", USAGE, "--chunks: bad value '%s'", optarg);
            p.n_chunks = (int32_t)v;
            break;
        case 257: json = true; break;
        case 'h': printf("usage: %s\n", USAGE); return LMQ_EXIT_OK;
        default: return cli_usage_error("compare", USAGE, "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (!base) return cli_usage_error("compare", USAGE, "-b BASE_MODEL is required");
    if (optind >= argc) return cli_usage_error("compare", USAGE, "at least one MODEL to compare is required");
    int n_rows = argc - optind + 1;
    row *rows = calloc((size_t)n_rows, sizeof *rows);
    char found[4096], logits[4200] = "";
    char *text = NULL;
    size_t text_len;
    int32_t *toks = NULL;
    size_t n_toks = 0;
    lmq_model *m = NULL;
    lmq_status s = lmq_wikitext2_find(text_path, cli_exe_dir(), found, sizeof found);
    if (!s) s = lmq_text_load(found, 1, &text, &text_len);
    if (s) goto fail;
    snprintf(logits, sizeof logits, "%s/lmq-compare-%ld.logits", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid());
    for (int i = 0; i < n_rows; i++) {
        rows[i].path = i == 0 ? base : argv[optind + i - 1];
        if ((s = cli_model_load(rows[i].path, &m))) goto fail;
        if (!lmq_model_vocab(m)) {
            s = lmq_error(LMQ_ERR_NOT_FOUND, "%s: the model has no tokenizer", rows[i].path);
            goto fail;
        }
        if (i == 0 && (s = textgen_tokenize(lmq_model_vocab(m), text, text_len, true, false, &toks, &n_toks))) goto fail;
        describe(m, &rows[i]);
        lmq_ppl_params q = p;
        if (i == 0) q.save_logits = logits;
        else q.kld_base = logits;
        fprintf(stderr, "compare: %s ...\n", rows[i].path);
        s = lmq_perplexity(m, toks, (int64_t)n_toks, &q, &rows[i].r);
        lmq_model_free(m);
        m = NULL;
        if (s) goto fail;
    }
    unlink(logits);
    double ppl0 = rows[0].r.ppl;
    if (json) printf("[");
    else
        printf("| model | type | size (MiB) | bpw | PPL | ΔPPL | mean KLD | same top %% |\n|---|---|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < n_rows; i++) {
        const row *w = &rows[i];
        double bpw = w->params ? 8.0 * (double)w->bytes / (double)w->params : 0;
        const char *name = strrchr(w->path, '/') ? strrchr(w->path, '/') + 1 : w->path;
        if (json) {
            printf("%s{\"model\": ", i ? ", " : "");
            cli_json_str(stdout, name);
            printf(", \"type\": \"%s\", \"bytes\": %llu, \"bpw\": %.4f, \"ppl\": %.6f, \"ppl_err\": %.6f", w->mix,
                   (unsigned long long)w->bytes, bpw, w->r.ppl, w->r.ppl_err);
            if (i) printf(", \"kld\": %.6g, \"kld_err\": %.6g, \"same_top_pct\": %.4f", w->r.kld.kld_mean, w->r.kld.kld_err,
                          w->r.kld.same_top_pct);
            printf("}");
        } else if (i == 0) {
            printf("| %s | %s | %.2f | %.3f | %.4f ± %.4f | | | |\n", name, w->mix, w->bytes / 1048576.0, bpw, w->r.ppl,
                   w->r.ppl_err);
        } else {
            printf("| %s | %s | %.2f | %.3f | %.4f ± %.4f | %+.4f | %.6f ± %.6f | %.3f |\n", name, w->mix, w->bytes / 1048576.0,
                   bpw, w->r.ppl, w->r.ppl_err, w->r.ppl - ppl0, w->r.kld.kld_mean, w->r.kld.kld_err, w->r.kld.same_top_pct);
        }
    }
    if (json) printf("]\n");
    free(rows);
    free(text);
    free(toks);
    return LMQ_EXIT_OK;
fail:
    if (logits[0]) unlink(logits);
    lmq_model_free(m);
    free(rows);
    free(text);
    free(toks);
    return cli_fail("compare", s);
}
