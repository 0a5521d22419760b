/* lmq perplexity: wikitext-2 perplexity with llama.cpp's method, and KL
 * divergence against saved base-model log-probs. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lmq_datasets.h"
#include "lmq_eval.h"
#include "textgen.h"

static const char *USAGE =
    "lmq perplexity -m MODEL [-f TEXT] [-c 512] [-b N] [--chunks N] [-t N] [--kv-type f16|f32|q8_0]\n"
    "                       [--save-logits FILE] [--kl-divergence FILE] [--allow-other-text] [--json]";

typedef struct progress_ctx {
    cli_progress prog;
    bool json;
} progress_ctx;

static void on_chunk(void *arg, int32_t chunk, int32_t n_chunks, double ppl)
{
    progress_ctx *pc = arg;
    if (pc->json) return;
    cli_progress_end(&pc->prog);
    printf("[%d]%.4f,", chunk + 1, ppl);
    if ((chunk + 1) % 16 == 0 || chunk + 1 == n_chunks) printf("\n");
    fflush(stdout);
    cli_progress_update(&pc->prog, chunk + 1, "chunks");
}

static void print_kld(const lmq_ppl_result *r, double ppl_q)
{
    const lmq_kld_stats *k = &r->kld;
    printf("\n====== Perplexity statistics ======\n");
    printf("Mean PPL(Q)                   : %10.6f +/- %10.6f\n", ppl_q, r->ppl_err);
    printf("Mean PPL(base)                : %10.6f +/- %10.6f\n", k->ppl_base, k->ppl_base_err);
    printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f +/- %10.6f\n", k->ln_ppl_ratio, k->ln_ppl_ratio_err);
    printf("Mean PPL(Q)/PPL(base)         : %10.6f\n", exp(k->ln_ppl_ratio));
    printf("Mean PPL(Q)-PPL(base)         : %10.6f\n", ppl_q - k->ppl_base);
    printf("\n====== KL divergence statistics ======\n");
    printf("Mean    KLD: %10.6f +/- %10.6f\n", k->kld_mean, k->kld_err);
    printf("Maximum KLD: %10.6f\n99.9%%   KLD: %10.6f\n99.0%%   KLD: %10.6f\n90.0%%   KLD: %10.6f\n", k->kld_max, k->kld_p999,
           k->kld_p99, k->kld_p90);
    printf("Median  KLD: %10.6f\n10.0%%   KLD: %10.6f\n 5.0%%   KLD: %10.6f\n 1.0%%   KLD: %10.6f\nMinimum KLD: %10.6f\n",
           k->kld_median, k->kld_p10, k->kld_p5, k->kld_p1, k->kld_min);
    printf("\n====== Token probability statistics ======\n");
    printf("Mean    Δp: %7.3f +/- %5.3f %%\n", k->dp_mean, k->dp_err);
    printf("Maximum Δp: %7.3f%%\n99.9%%   Δp: %7.3f%%\n99.0%%   Δp: %7.3f%%\n95.0%%   Δp: %7.3f%%\n90.0%%   Δp: %7.3f%%\n"
           "75.0%%   Δp: %7.3f%%\nMedian  Δp: %7.3f%%\n25.0%%   Δp: %7.3f%%\n10.0%%   Δp: %7.3f%%\n 5.0%%   Δp: %7.3f%%\n"
           " 1.0%%   Δp: %7.3f%%\n 0.1%%   Δp: %7.3f%%\nMinimum Δp: %7.3f%%\n",
           k->dp_max, k->dp_p999, k->dp_p99, k->dp_p95, k->dp_p90, k->dp_p75, k->dp_median, k->dp_p25, k->dp_p10, k->dp_p5,
           k->dp_p1, k->dp_p01, k->dp_min);
    printf("RMS Δp    : %7.3f %%\n", k->dp_rms);
    printf("Same top p: %7.3f +/- %5.3f %%\n", k->same_top_pct, k->same_top_err);
}

static void print_json(const char *model, const lmq_ppl_result *r, int32_t c)
{
    printf("{\"model\": ");
    cli_json_str(stdout, model);
    printf(", \"ctx\": %d, \"chunks\": %d, \"tokens_scored\": %lld, \"ppl\": %.6f, \"stderr\": %.6f, \"seconds\": %.3f, "
           "\"tokens_per_second\": %.2f",
           c, r->n_chunks, (long long)r->n_scored, r->ppl, r->ppl_err, r->seconds,
           r->seconds > 0 ? r->n_tokens_evaluated / r->seconds : 0);
    if (r->logits_bytes)
        printf(", \"logits_bytes\": %llu, \"logits_bytes_llamacpp_layout\": %llu", (unsigned long long)r->logits_bytes,
               (unsigned long long)r->logits_bytes_llama);
    if (r->has_kld) {
        const lmq_kld_stats *k = &r->kld;
        printf(", \"kld\": {\"ppl_base\": %.6f, \"ln_ppl_ratio\": %.6g, \"ln_ppl_ratio_err\": %.6g, \"mean\": %.6g, "
               "\"err\": %.6g, \"max\": %.6g, \"p99_9\": %.6g, \"p99\": %.6g, \"p90\": %.6g, \"median\": %.6g, \"p10\": %.6g, "
               "\"p5\": %.6g, \"p1\": %.6g, \"min\": %.6g, \"dp_mean\": %.4f, \"dp_rms\": %.4f, \"same_top_pct\": %.4f, "
               "\"same_top_err\": %.4f}",
               k->ppl_base, k->ln_ppl_ratio, k->ln_ppl_ratio_err, k->kld_mean, k->kld_err, k->kld_max, k->kld_p999, k->kld_p99,
               k->kld_p90, k->kld_median, k->kld_p10, k->kld_p5, k->kld_p1, k->kld_min, k->dp_mean, k->dp_rms,
               k->same_top_pct, k->same_top_err);
    }
    printf("}\n");
}

int lmq_cmd_perplexity(int argc, char **argv)
{
    const char *model = NULL, *text_path = NULL;
    lmq_ppl_params p = lmq_ppl_default_params();
    bool json = false, allow_other = false;
    int64_t v;
    enum { O_CHUNKS = 256, O_SAVE, O_KLD, O_JSON, O_KV, O_ALLOW, O_HELP };
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"file", required_argument, 0, 'f'},
        {"ctx-size", required_argument, 0, 'c'}, {"batch-size", required_argument, 0, 'b'},
        {"threads", required_argument, 0, 't'}, {"chunks", required_argument, 0, O_CHUNKS},
        {"save-logits", required_argument, 0, O_SAVE}, {"kl-divergence", required_argument, 0, O_KLD},
        {"kv-type", required_argument, 0, O_KV}, {"allow-other-text", no_argument, 0, O_ALLOW},
        {"json", no_argument, 0, O_JSON}, {"help", no_argument, 0, O_HELP}, {0, 0, 0, 0}};
    opterr = 0;
    int o;
    while ((o = getopt_long(argc, argv, "m:f:c:b:t:h", opts, NULL)) != -1) {
        switch (o) {
        case 'm': model = optarg; break;
        case 'f': text_path = optarg; break;
        case 'c':
            if (!cli_parse_i64(optarg, 4, 1 << 20, &v)) return cli_usage_error("perplexity", USAGE, "-c: bad context size '%s'", optarg);
            p.n_ctx = (int32_t)v;
            break;
        case 'b':
            if (!cli_parse_i64(optarg, 1, 1 << 20, &v)) return cli_usage_error("perplexity", USAGE, "-b: bad batch size '%s'", optarg);
            p.n_batch = (int32_t)v;
            break;
        case 't':
            if (!cli_parse_i64(optarg, 1, LMQ_MAX_THREADS, &v)) return cli_usage_error("perplexity", USAGE, "-t takes a thread count in [1, %d], not '%s'", LMQ_MAX_THREADS, optarg);
            p.n_threads = (int32_t)v;
            break;
        case O_CHUNKS:
            if (!cli_parse_i64(optarg, 1, 1 << 30, &v)) return cli_usage_error("perplexity", USAGE, "--chunks: bad count '%s'", optarg);
            p.n_chunks = (int32_t)v;
            break;
        case O_SAVE: p.save_logits = optarg; break;
        case O_KLD: p.kld_base = optarg; break;
        case O_KV:
            if (!cli_parse_kv_type(optarg, &p.kv_type))
                return cli_usage_error("perplexity", USAGE, "--kv-type: '%s' (" CLI_KV_TYPES ")", optarg);
            break;
        case O_ALLOW: allow_other = true; break;
        case O_JSON: json = true; break;
        case 'h':
        case O_HELP: printf("usage: %s\n", USAGE); return LMQ_EXIT_OK;
        default: return cli_usage_error("perplexity", USAGE, "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error("perplexity", USAGE, "unexpected argument '%s'", argv[optind]);
    if (!model) return cli_usage_error("perplexity", USAGE, "-m MODEL is required");
    if (p.save_logits && p.kld_base) return cli_usage_error("perplexity", USAGE, "--save-logits and --kl-divergence exclude each other");
    char found[4096];
    lmq_status s = lmq_wikitext2_find(text_path, cli_exe_dir(), found, sizeof found);
    if (s) return cli_fail("perplexity", s);
    char *text = NULL;
    size_t text_len = 0;
    if ((s = lmq_text_load(found, allow_other, &text, &text_len))) return cli_fail("perplexity", s);
    lmq_model *m;
    if ((s = cli_model_load(model, &m))) {
        free(text);
        return cli_fail("perplexity", s);
    }
    const lmq_vocab *vocab = lmq_model_vocab(m);
    if (!vocab) {
        free(text);
        lmq_model_free(m);
        fprintf(stderr, "lmq perplexity: %s: the model has no tokenizer\n", model);
        return LMQ_EXIT_FAIL;
    }
    int32_t *toks = NULL;
    size_t n_toks = 0;
    double t0 = lmq_time_s();
    s = textgen_tokenize(vocab, text, text_len, true, false, &toks, &n_toks);
    free(text);
    if (s) {
        lmq_model_free(m);
        return cli_fail("perplexity", s);
    }
    if (!json)
        fprintf(stderr, "perplexity: %s: %zu tokens (%.2f s to tokenize), -c %d\n", found, n_toks, lmq_time_s() - t0,
                p.n_ctx);
    progress_ctx pc = {.json = json};
    int64_t n_max = (int64_t)n_toks / p.n_ctx;
    cli_progress_begin(&pc.prog, "perplexity", (double)(p.n_chunks > 0 && p.n_chunks < n_max ? p.n_chunks : n_max));
    p.on_chunk = on_chunk;
    p.cb_ctx = &pc;
    lmq_ppl_result r;
    s = lmq_perplexity(m, toks, (int64_t)n_toks, &p, &r);
    cli_progress_end(&pc.prog);
    free(toks);
    lmq_model_free(m);
    if (s) return cli_fail("perplexity", s);
    if (json) {
        print_json(model, &r, p.n_ctx);
        return LMQ_EXIT_OK;
    }
    printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", r.ppl, r.ppl_err);
    printf("%d chunks of %d, %lld tokens scored, %.2f s, %.1f tokens/s\n", r.n_chunks, p.n_ctx, (long long)r.n_scored,
           r.seconds, r.seconds > 0 ? r.n_tokens_evaluated / r.seconds : 0);
    if (r.logits_bytes)
        printf("saved base log-probs: %s, %.2f MB (llama.cpp's layout: %.2f MB, %.1fx larger)\n", p.save_logits,
               r.logits_bytes / 1e6, r.logits_bytes_llama / 1e6, (double)r.logits_bytes_llama / (double)r.logits_bytes);
    if (r.has_kld) print_kld(&r, r.ppl);
    return LMQ_EXIT_OK;
}
