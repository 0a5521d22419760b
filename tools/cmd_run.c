/* lmq run: generate text from a prompt, streaming it as it is produced. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sampling_opts.h"
#include "textgen.h"

/* Streams each piece to stdout as it comes. */
static bool print_text(void *user, const char *text, size_t len)
{
    (void)user;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return true;
}

static const char *USAGE = "lmq run -m MODEL [-p TEXT | -f FILE] [--no-bos] [--no-echo]\n" GEN_OPTS_USAGE;

int lmq_cmd_run(int argc, char **argv)
{
    const char *model = NULL, *prompt = NULL, *prompt_file = NULL;
    bool echo = true, add_bos = true;
    gen_opts g;
    gen_opts_init(&g);
    g.tg.n_predict = 128;
    static const struct option opts[] = {{"model", required_argument, 0, 'm'}, {"prompt", required_argument, 0, 'p'},
                                         {"file", required_argument, 0, 'f'}, {"no-echo", no_argument, 0, 600},
                                         {"no-bos", no_argument, 0, 601}, {"help", no_argument, 0, 'h'},
                                         GEN_LONG_OPTIONS, {0, 0, 0, 0}};
    opterr = 0;
    int o;
    while ((o = getopt_long(argc, argv, "m:p:f:n:c:t:h", opts, NULL)) != -1) {
        int r = gen_opts_parse(&g, o, optarg, "run", USAGE);
        if (r < 0) return LMQ_EXIT_USAGE;
        if (r > 0) continue;
        switch (o) {
        case 'm': model = optarg; break;
        case 'p': prompt = optarg; break;
        case 'f': prompt_file = optarg; break;
        case 600: echo = false; break;
        case 601: add_bos = false; break;
        case 'h': printf("usage: %s\n", USAGE); return LMQ_EXIT_OK;
        default: return cli_usage_error("run", USAGE, "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error("run", USAGE, "unexpected argument '%s'", argv[optind]);
    if (!model) return cli_usage_error("run", USAGE, "-m MODEL is required");
    if (prompt && prompt_file) return cli_usage_error("run", USAGE, "-p and -f exclude each other");
    char *file_text = NULL;
    size_t file_len = 0;
    lmq_status s;
    if (prompt_file && (s = lmq_read_file(prompt_file, (size_t)1 << 30, &file_text, &file_len))) return cli_fail("run", s);
    const char *text = prompt_file ? file_text : prompt ? prompt : "";
    size_t text_len = prompt_file ? file_len : strlen(text);

    double t_load = lmq_time_s();
    lmq_model *m = NULL;
    lmq_context *ctx = NULL;
    lmq_sampler *smp = NULL;
    lmq_gen *gen = NULL;
    int32_t *toks = NULL;
    size_t n_toks = 0;
    int rc = LMQ_EXIT_FAIL;
    if ((s = cli_model_load(model, &m))) goto fail;
    const lmq_vocab *v = lmq_model_vocab(m);
    if (!v) {
        s = lmq_error(LMQ_ERR_NOT_FOUND, "%s: the model has no tokenizer", model);
        goto fail;
    }
    if ((s = lmq_context_new(m, &g.cp, &ctx))) goto fail;
    if ((s = lmq_sampler_new(&g.sp, lmq_model_hparams(m)->n_vocab, &smp))) goto fail;
    if ((s = lmq_gen_new(ctx, &gen))) goto fail;
    t_load = lmq_time_s() - t_load;
    if ((s = textgen_tokenize(v, text, text_len, add_bos, true, &toks, &n_toks))) goto fail;
    if (n_toks == 0) {
        s = lmq_error(LMQ_ERR_INVALID_ARG, "empty prompt and the model adds no BOS token: nothing to condition on");
        goto fail;
    }
    if (echo) {
        fwrite(text, 1, text_len, stdout);
        fflush(stdout);
    }
    lmq_gen_params gp = textgen_params(&g.tg);
    gp.sampler = smp;
    gp.on_text = print_text;
    lmq_gen_stats st;
    s = lmq_generate(gen, toks, n_toks, &gp, &st);
    fflush(stdout);
    if (s) goto fail;
    if (echo) printf("\n");
    fprintf(stderr, "\nload %.0f ms | prompt %d tokens, %.1f tok/s | generated %d tokens, %.1f tok/s%s\n", t_load * 1e3,
            st.n_prompt, st.t_prompt > 0 ? st.n_prompt / st.t_prompt : 0, st.n_gen, st.t_gen > 0 ? st.n_gen / st.t_gen : 0,
            st.stop == LMQ_GEN_STOP_CONTEXT ? " | stopped: context full" : "");
    rc = LMQ_EXIT_OK;
    goto out;
fail:
    cli_fail("run", s);
out:
    free(toks);
    free(file_text);
    lmq_gen_free(gen);
    lmq_sampler_free(smp);
    lmq_context_free(ctx);
    lmq_model_free(m);
    return rc;
}
