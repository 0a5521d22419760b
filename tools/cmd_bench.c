/* lmq bench: llama-bench-like speed table (ppN prompt processing, tgN token
 * generation, mean +/- stddev over repetitions), and kernel micro-benchmarks. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lmq_runtime.h"

static const char *USAGE =
    "lmq bench -m MODEL [-p 512] [-n 128] [-d DEPTH] [-b BATCH] [-c N_CTX] [-t N] [-r REPS] [--kv-type f16|f32|q8_0] [--sampling] [--json]\n"
    "       lmq bench --kernels [--types q4_K,q8_0,...] [--rows 4096] [--cols 4096] [--tokens 128] [--repacked] [-t N] [--json]";

typedef struct read_count {
    const lmq_file *f;
    uint64_t bytes;
} read_count;

static void count_read(void *user, const char *tensor, int32_t expert, const float *x, int32_t n_tok, int64_t n_in)
{
    (void)x;
    (void)n_tok;
    (void)n_in;
    read_count *rc = user;
    const lmq_tensor_info *t = lmq_file_find_tensor(rc->f, tensor);
    if (!t) return;
    rc->bytes += expert >= 0 && t->ne[2] > 1 ? t->nbytes / (uint64_t)t->ne[2] : t->nbytes;
}

static void mean_sd(const double *v, int n, double *mean, double *sd)
{
    double s = 0, s2 = 0;
    for (int i = 0; i < n; i++) s += v[i];
    *mean = s / n;
    for (int i = 0; i < n; i++) s2 += (v[i] - *mean) * (v[i] - *mean);
    *sd = n > 1 ? sqrt(s2 / (n - 1)) : 0;
}

/* Leaves the cache holding the first `depth` tokens (evaluated in batches,
 * untimed; kept from the previous repetition when a rewind can serve). */
static lmq_status bench_fill_depth(lmq_context *c, const int32_t *toks, int64_t depth)
{
    lmq_status s = lmq_kv_truncate(c, lmq_n_past(c) >= depth ? (int32_t)depth : 0);
    for (int32_t done = lmq_n_past(c); !s && done < depth; done = lmq_n_past(c)) {
        const int32_t n = depth - done < lmq_context_n_batch(c) ? (int32_t)(depth - done) : lmq_context_n_batch(c);
        s = lmq_eval(c, toks + done, n, 1);
    }
    return s;
}

/* One tgN run from after the depth: tokens/s. Without a sampler the next
 * token is made up (llama-bench's test: only the model's work); with one it
 * is drawn from each step's logits (and accepted), as `lmq run` does. */
static lmq_status bench_tg(lmq_context *c, const int32_t *toks, int64_t depth, int64_t tg, int32_t n_vocab,
                           lmq_sampler *smp, double *tps)
{
    lmq_status s = bench_fill_depth(c, toks, depth);
    int32_t tok = toks[depth];
    if (smp) lmq_sampler_reset(smp);
    double t0 = lmq_time_s();
    for (int64_t i = 0; i < tg && !s; i++) {
        s = lmq_eval(c, &tok, 1, 1);
        if (s) break;
        if (smp) {
            tok = lmq_sampler_sample(smp, lmq_logits(c, 0));
            lmq_sampler_accept(smp, tok);
        } else {
            tok = (tok + 1) % n_vocab;
        }
    }
    *tps = tg / (lmq_time_s() - t0);
    return s;
}

static int bench_kernels(const char *types, int64_t rows, int64_t cols, int64_t ntok, int threads, bool repacked,
                         bool json)
{
    lmq_isa isas[LMQ_ISA_COUNT];
    int n_isa = lmq_isa_list(isas, LMQ_ISA_COUNT);
    if (!json) {
        printf("cpu: %s\n", lmq_cpu_features());
        printf("| type    | isa     | matvec GB/s | matvec GFLOP/s | gemm(%lld) GFLOP/s |\n", (long long)ntok);
        printf("|---------|---------|-------------|----------------|-------------------|\n");
    } else {
        printf("[");
    }
    bool first = true;
    for (int t = 0; t < LMQ_TYPE_COUNT; t++) {
        lmq_type ty = (lmq_type)t;
        if (!lmq_matmul_supported(ty)) continue;
        if (types) {
            char buf[512];
            snprintf(buf, sizeof buf, ",%s,", types);
            char name[32];
            snprintf(name, sizeof name, ",%s,", lmq_type_name(ty));
            if (!strcasestr(buf, name)) continue;
        }
        if (lmq_row_size(ty, cols) < 0) continue;
        for (int i = 0; i < n_isa; i++) {
            lmq_kbench mv, mm;
            lmq_status ks = lmq_kernel_bench(ty, isas[i], rows, cols, 1, threads, 0.3, repacked, &mv);
            if (!ks) ks = lmq_kernel_bench(ty, isas[i], rows, cols, ntok, threads, 0.3, repacked, &mm);
            if (ks) {
                if (!(repacked && ks == LMQ_ERR_UNSUPPORTED)) fprintf(stderr, "lmq bench: %s\n", lmq_last_error());
                lmq_error_clear();
                continue;
            }
            if (json) {
                printf("%s{\"type\": \"%s\", \"isa\": \"%s\", \"threads\": %d, \"matvec_gbytes_s\": %.3f, \"matvec_gflops\": %.3f, "
                       "\"gemm_tokens\": %lld, \"gemm_gflops\": %.3f}",
                       first ? "" : ", ", lmq_type_name(ty), lmq_isa_name(isas[i]), threads, mv.gbytes_s, mv.gflops,
                       (long long)ntok, mm.gflops);
            } else {
                printf("| %-7s | %-7s | %11.2f | %14.2f | %17.2f |\n", lmq_type_name(ty), lmq_isa_name(isas[i]), mv.gbytes_s,
                       mv.gflops, mm.gflops);
            }
            first = false;
            fflush(stdout);
        }
    }
    if (json) printf("]\n");
    return LMQ_EXIT_OK;
}

int lmq_cmd_bench(int argc, char **argv)
{
    const char *model = NULL, *types = NULL;
    int64_t pp = 512, tg = 128, depth = 0, n_ctx = 0, batch = 0, threads = 0, reps = 3, rows = 4096, cols = 4096,
            ktok = 128, v;
    lmq_type kv_type = LMQ_TYPE_F16;
    bool json = false, kernels = false, repacked = false, sampling = false;
    enum { O_JSON = 256, O_KERNELS, O_TYPES, O_ROWS, O_COLS, O_TOKENS, O_REPACKED, O_KV, O_SAMPLING };
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"n-prompt", required_argument, 0, 'p'}, {"n-gen", required_argument, 0, 'n'},
        {"threads", required_argument, 0, 't'}, {"repetitions", required_argument, 0, 'r'}, {"json", no_argument, 0, O_JSON},
        {"kernels", no_argument, 0, O_KERNELS}, {"types", required_argument, 0, O_TYPES}, {"rows", required_argument, 0, O_ROWS},
        {"cols", required_argument, 0, O_COLS}, {"tokens", required_argument, 0, O_TOKENS},
        {"repacked", no_argument, 0, O_REPACKED}, {"n-depth", required_argument, 0, 'd'},
        {"ctx-size", required_argument, 0, 'c'}, {"kv-type", required_argument, 0, O_KV},
        {"batch-size", required_argument, 0, 'b'}, {"sampling", no_argument, 0, O_SAMPLING},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    opterr = 0;
    int o;
    while ((o = getopt_long(argc, argv, "m:p:n:d:b:c:t:r:h", opts, NULL)) != -1) {
        switch (o) {
        case 'm': model = optarg; break;
        case 'p': if (!cli_parse_i64(optarg, 0, 1 << 16, &pp)) return cli_usage_error("bench", USAGE, "-p: bad value '%s'", optarg); break;
        case 'n': if (!cli_parse_i64(optarg, 0, 1 << 16, &tg)) return cli_usage_error("bench", USAGE, "-n: bad value '%s'", optarg); break;
        case 'd': if (!cli_parse_i64(optarg, 0, 1 << 20, &depth)) return cli_usage_error("bench", USAGE, "-d: bad depth '%s'", optarg); break;
        case 'b': if (!cli_parse_i64(optarg, 1, 1 << 16, &batch)) return cli_usage_error("bench", USAGE, "-b: bad batch size '%s'", optarg); break;
        case 'c': if (!cli_parse_i64(optarg, 1, 1 << 22, &n_ctx)) return cli_usage_error("bench", USAGE, "-c: bad context size '%s'", optarg); break;
        case O_KV: if (!cli_parse_kv_type(optarg, &kv_type)) return cli_usage_error("bench", USAGE, "--kv-type: '%s' (" CLI_KV_TYPES ")", optarg); break;
        case 't': if (!cli_parse_i64(optarg, 1, LMQ_MAX_THREADS, &threads)) return cli_usage_error("bench", USAGE, "-t takes a thread count in [1, %d], not '%s'", LMQ_MAX_THREADS, optarg); break;
        case 'r': if (!cli_parse_i64(optarg, 1, 1000, &reps)) return cli_usage_error("bench", USAGE, "-r: bad value '%s'", optarg); break;
        case O_JSON: json = true; break;
        case O_KERNELS: kernels = true; break;
        case O_TYPES: types = optarg; break;
        case O_REPACKED: repacked = true; break;
        case O_SAMPLING: sampling = true; break;
        case O_TOKENS: if (!cli_parse_i64(optarg, 1, 1 << 16, &ktok)) return cli_usage_error("bench", USAGE, "--tokens takes a count in [1, 65536], not '%s'", optarg); break;
        case O_ROWS: if (!cli_parse_i64(optarg, 1, 1 << 20, &rows)) return cli_usage_error("bench", USAGE, "--rows: bad value"); break;
        case O_COLS: if (!cli_parse_i64(optarg, 1, 1 << 20, &cols)) return cli_usage_error("bench", USAGE, "--cols: bad value"); break;
        case 'h': printf("usage: %s\n", USAGE); return LMQ_EXIT_OK;
        default: return cli_usage_error("bench", USAGE, "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    (void)v;
    if (optind < argc) return cli_usage_error("bench", USAGE, "unexpected argument '%s'", argv[optind]);
    if (kernels) return bench_kernels(types, rows, cols, ktok, threads ? (int)threads : lmq_n_cpus(), repacked, json);
    if (!model) return cli_usage_error("bench", USAGE, "-m MODEL is required (or --kernels)");
    if (lmq_isa_active() == LMQ_ISA_AVXVNNI) /* the VEX or the EVEX build of its kernels: never silently */
        fprintf(stderr, "lmq bench: isa avxvnni on %s\n", lmq_cpu_features());
    lmq_model *m;
    lmq_status s = cli_model_load(model, &m);
    if (s) return cli_fail("bench", s);
    const lmq_hparams *hp = lmq_model_hparams(m);
    if (n_ctx > 0 && n_ctx < depth + (pp > tg ? pp : tg) + 1) {
        lmq_model_free(m);
        return cli_usage_error("bench", USAGE, "-c %lld is too small for -d %lld and the test (%lld tokens)", (long long)n_ctx,
                               (long long)depth, (long long)(depth + (pp > tg ? pp : tg) + 1));
    }
    lmq_context_params cp = lmq_context_default_params();
    cp.n_ctx = (int32_t)(n_ctx > 0 ? n_ctx : depth + pp + tg + 1);
    /* -b: the prompt in batches of that size (llama-bench's -ub); default one batch */
    cp.n_batch = batch > 0 ? (int32_t)batch : pp > 0 ? (int32_t)pp : depth > 0 ? 512 : 1;
    cp.kv_type = kv_type;
    cp.n_threads = (int32_t)threads;
    cp.n_logits = 1;
    lmq_context *c;
    if ((s = lmq_context_new(m, &cp, &c))) {
        lmq_model_free(m);
        return cli_fail("bench", s);
    }
    /* the depth's tokens, then the prompt's (one token even for -p 0: tg starts from it) */
    const int64_t n_toks = depth + (pp > 0 ? pp : 1);
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)n_toks), *ptoks = toks + depth;
    uint32_t r = 1234567;
    for (int64_t i = 0; i < n_toks; i++) {
        r = r * 1664525u + 1013904223u;
        toks[i] = (int32_t)(r % (uint32_t)hp->n_vocab);
    }
    double *pp_s = calloc((size_t)reps, sizeof(double)), *tg_s = calloc((size_t)reps, sizeof(double));
    double *tgg_s = calloc((size_t)reps, sizeof(double)), *tgs_s = calloc((size_t)reps, sizeof(double));
    lmq_sampler *greedy = NULL, *sampler = NULL;
    if (sampling) {
        lmq_sampler_params gp = lmq_sampler_default_params(), dp = lmq_sampler_default_params();
        gp.temperature = 0;
        if (!(s = lmq_sampler_new(&gp, hp->n_vocab, &greedy))) s = lmq_sampler_new(&dp, hp->n_vocab, &sampler);
    }
    /* warm-up run (page in the weights) */
    lmq_kv_truncate(c, 0);
    if (!s) lmq_eval(c, toks, n_toks < 16 ? (int32_t)n_toks : 16, 1);
    for (int64_t k = 0; k < reps && !s; k++) {
        if (pp > 0) {
            s = bench_fill_depth(c, toks, depth);
            double t0 = lmq_time_s();
            for (int64_t done = 0; !s && done < pp; done += cp.n_batch)
                s = lmq_eval(c, ptoks + done, (int32_t)(pp - done < cp.n_batch ? pp - done : cp.n_batch), 1);
            pp_s[k] = pp / (lmq_time_s() - t0);
        }
        if (tg > 0 && !s) s = bench_tg(c, toks, depth, tg, hp->n_vocab, NULL, &tg_s[k]);
        /* --sampling: the same test with the next token drawn greedily and
         * with the default sampler, so the per-token cost outside the model shows */
        if (tg > 0 && !s && sampling) s = bench_tg(c, toks, depth, tg, hp->n_vocab, greedy, &tgg_s[k]);
        if (tg > 0 && !s && sampling) s = bench_tg(c, toks, depth, tg, hp->n_vocab, sampler, &tgs_s[k]);
    }
    if (s) {
        free(toks); free(pp_s); free(tg_s); free(tgg_s); free(tgs_s);
        lmq_sampler_free(greedy); lmq_sampler_free(sampler);
        lmq_context_free(c);
        lmq_model_free(m);
        return cli_fail("bench", s);
    }
    /* weight bytes one generated token reads: every product of one step,
     * counted as the runtime calls them (an expert product reads one expert) */
    read_count rc = {lmq_model_file(m), 0};
    if (tg > 0) {
        int32_t tok = ptoks[0];
        lmq_context_set_observer(c, count_read, &rc);
        s = lmq_eval(c, &tok, 1, 1);
        lmq_context_set_observer(c, NULL, NULL);
        rc.bytes += (uint64_t)lmq_row_size(lmq_file_find_tensor(rc.f, "token_embd.weight")->type, hp->n_embd);
    }
    /* recurrent models: what a snapshot and a rewind to it cost (one copy of
     * the state each way), averaged over 8 positions */
    double snap_ms = 0, restore_ms = 0;
    const size_t state_bytes = lmq_context_n_ctx(c) > 16 ? lmq_context_state_bytes(c) : 0;
    if (state_bytes && !s) {
        int32_t tok = ptoks[0];
        enum { N_SNAP = 8 };
        s = lmq_kv_truncate(c, 0); /* room for the 2 N_SNAP + 1 tokens below (n_ctx >= 2) */
        for (int i = 0; i < N_SNAP && !s; i++) {
            if ((s = lmq_eval(c, &tok, 1, 1))) break;
            double t0 = lmq_time_s();
            if ((s = lmq_state_checkpoint(c))) break;
            double t1 = lmq_time_s();
            if ((s = lmq_eval(c, &tok, 1, 1))) break;
            double t2 = lmq_time_s();
            s = lmq_kv_truncate(c, lmq_n_past(c) - 1); /* back to the snapshot just taken */
            restore_ms += (lmq_time_s() - t2) * 1e3 / N_SNAP;
            snap_ms += (t1 - t0) * 1e3 / N_SNAP;
        }
        if (s) {
            free(toks); free(pp_s); free(tg_s); free(tgg_s); free(tgs_s);
            lmq_sampler_free(greedy); lmq_sampler_free(sampler);
            lmq_context_free(c);
            lmq_model_free(m);
            return cli_fail("bench", s);
        }
    }
    int nt = threads ? (int)threads : lmq_n_cpus();
    double bytes = (double)lmq_model_weight_bytes(m);
    const char *name = strrchr(model, '/') ? strrchr(model, '/') + 1 : model;
    double mean, sd;
    if (json) {
        printf("[");
        bool first = true;
        if (pp > 0) {
            mean_sd(pp_s, (int)reps, &mean, &sd);
            printf("{\"model\": \"%s\", \"size\": %.0f, \"params\": %llu, \"types\": \"%s\", \"threads\": %d, \"isa\": \"%s\", "
                   "\"test\": \"pp%lld\", \"depth\": %lld, \"tokens_per_second\": %.3f, \"stddev\": %.3f}",
                   name, bytes, (unsigned long long)lmq_model_n_params(m), lmq_model_type_summary(m), nt,
                   lmq_isa_name(lmq_isa_active()), (long long)pp, (long long)depth, mean, sd);
            first = false;
        }
        if (tg > 0) {
            mean_sd(tg_s, (int)reps, &mean, &sd);
            printf("%s{\"model\": \"%s\", \"size\": %.0f, \"params\": %llu, \"types\": \"%s\", \"threads\": %d, \"isa\": \"%s\", "
                   "\"test\": \"tg%lld\", \"depth\": %lld, \"tokens_per_second\": %.3f, \"stddev\": %.3f}",
                   first ? "" : ", ", name, bytes, (unsigned long long)lmq_model_n_params(m), lmq_model_type_summary(m), nt,
                   lmq_isa_name(lmq_isa_active()), (long long)tg, (long long)depth, mean, sd);
            printf(", {\"model\": \"%s\", \"test\": \"weight_bytes_per_token\", \"bytes\": %llu}", name,
                   (unsigned long long)rc.bytes);
            for (int q = 0; sampling && q < 2; q++) {
                mean_sd(q ? tgs_s : tgg_s, (int)reps, &mean, &sd);
                printf(", {\"model\": \"%s\", \"threads\": %d, \"isa\": \"%s\", \"test\": \"tg%lld\", \"depth\": %lld, "
                       "\"sampler\": \"%s\", \"tokens_per_second\": %.3f, \"stddev\": %.3f}",
                       name, nt, lmq_isa_name(lmq_isa_active()), (long long)tg, (long long)depth,
                       q ? "default" : "greedy", mean, sd);
            }
        }
        if (state_bytes)
            printf(", {\"model\": \"%s\", \"test\": \"recurrent_state\", \"bytes\": %zu, \"snapshot_ms\": %.4f, "
                   "\"restore_ms\": %.4f}", name, state_bytes, snap_ms, restore_ms);
        printf("]\n");
    } else {
        printf("| model | size | params | types | isa | threads | test | t/s |\n|---|---:|---:|---|---|---:|---:|---:|\n");
        const char *unit = bytes >= 1e9 ? "GiB" : "MiB";
        char at[32] = ""; /* llama-bench's name of a test after a context */
        if (depth > 0) snprintf(at, sizeof at, " @ d%lld", (long long)depth);
        double sz = bytes / (bytes >= 1e9 ? 1073741824.0 : 1048576.0);
        if (pp > 0) {
            mean_sd(pp_s, (int)reps, &mean, &sd);
            printf("| %s | %.2f %s | %.2f M | %s | %s | %d | pp%lld%s | %.2f ± %.2f |\n", name, sz, unit,
                   lmq_model_n_params(m) / 1e6, lmq_model_type_summary(m), lmq_isa_name(lmq_isa_active()), nt, (long long)pp,
                   at, mean, sd);
        }
        if (tg > 0) {
            mean_sd(tg_s, (int)reps, &mean, &sd);
            printf("| %s | %.2f %s | %.2f M | %s | %s | %d | tg%lld%s | %.2f ± %.2f |\n", name, sz, unit,
                   lmq_model_n_params(m) / 1e6, lmq_model_type_summary(m), lmq_isa_name(lmq_isa_active()), nt, (long long)tg,
                   at, mean, sd);
            for (int q = 0; sampling && q < 2; q++) {
                mean_sd(q ? tgs_s : tgg_s, (int)reps, &mean, &sd);
                printf("| %s | %.2f %s | %.2f M | %s | %s | %d | tg%lld%s %s | %.2f ± %.2f |\n", name, sz, unit,
                       lmq_model_n_params(m) / 1e6, lmq_model_type_summary(m), lmq_isa_name(lmq_isa_active()), nt,
                       (long long)tg, at, q ? "sampling" : "greedy", mean, sd);
            }
            printf("\nweights read per generated token: %.2f MiB of %.2f MiB (%.1f%%)\n", rc.bytes / 1048576.0,
                   bytes / 1048576.0, 100.0 * (double)rc.bytes / bytes);
        }
        if (state_bytes)
            printf("recurrent state: %.2f MiB per sequence; a snapshot %.3f ms, a rewind to it %.3f ms\n",
                   state_bytes / 1048576.0, snap_ms, restore_ms);
    }
    free(toks); free(pp_s); free(tg_s); free(tgg_s); free(tgs_s);
    lmq_sampler_free(greedy); lmq_sampler_free(sampler);
    lmq_context_free(c);
    lmq_model_free(m);
    return LMQ_EXIT_OK;
}
