/* lmq export: write a .lmq model as a GGUF v3 file for llama.cpp. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "lmq_convert.h"

static const char *USAGE = "lmq export MODEL.lmq -o OUT.gguf [--widen-fp8 f16|bf16] [--alignment N]";

static const char *HELP =
    "Writes a .lmq container as GGUF v3 that llama.cpp loads: llama.* and\n"
    "tokenizer.* metadata with llama.cpp's value types, general.file_type from the\n"
    "quantization mix, quantized blocks copied unchanged, and attn_q/attn_k rows\n"
    "permuted into llama.cpp's RoPE order when the container holds Hugging Face\n"
    "rows (lmq.rope.layout = neox). lmq.* keys are not exported.\n\n"
    "  -o, --output PATH     GGUF file to write (atomically)\n"
    "  --widen-fp8 TYPE      GGUF has no fp8: widen fp8 tensors to f16 or bf16\n"
    "                        (without it, fp8 tensors are refused)\n"
    "  --alignment N         tensor data alignment, a power of two (default 32)\n"
    "  -h, --help            this help\n";

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    cli_progress *p = ctx;
    p->total = (double)total / 1e6;
    cli_progress_update(p, (double)done / 1e6, "MB");
}

int lmq_cmd_export(int argc, char **argv)
{
    const char *in = NULL, *out = NULL;
    lmq_export_opts eo;
    memset(&eo, 0, sizeof eo);
    static const struct option opts[] = {{"output", required_argument, 0, 'o'},
                                         {"widen-fp8", required_argument, 0, 600},
                                         {"alignment", required_argument, 0, 601},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    opterr = 0;
    optind = 1;
    int o;
    int64_t align;
    while ((o = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (o) {
        case 'o': out = optarg; break;
        case 600:
            if (!strcmp(optarg, "f16")) eo.widen_type = LMQ_TYPE_F16;
            else if (!strcmp(optarg, "bf16")) eo.widen_type = LMQ_TYPE_BF16;
            else return cli_usage_error("export", USAGE, "--widen-fp8 takes f16 or bf16, not '%s'", optarg);
            eo.widen_fp8 = true;
            break;
        case 601:
            if (!cli_parse_i64(optarg, 1, 65536, &align) || (align & (align - 1)))
                return cli_usage_error("export", USAGE, "--alignment must be a power of two in [1, 65536]");
            eo.alignment = (uint32_t)align;
            break;
        case 'h': printf("usage: %s\n\n%s", USAGE, HELP); return LMQ_EXIT_OK;
        default: return cli_usage_error("export", USAGE, "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) in = argv[optind++];
    if (optind < argc) return cli_usage_error("export", USAGE, "unexpected argument '%s'", argv[optind]);
    if (!in) return cli_usage_error("export", USAGE, "an input model is required");
    if (!out) return cli_usage_error("export", USAGE, "-o OUT.gguf is required");

    cli_progress pr;
    cli_progress_begin(&pr, "export", 0);
    eo.progress = on_progress;
    eo.progress_ctx = &pr;
    lmq_convert_stats st;
    lmq_status s = lmq_export_gguf(in, out, &eo, &st);
    cli_progress_end(&pr);
    if (s) return cli_fail("export", s);
    fprintf(stderr, "lmq export: wrote %s: %llu tensors, %.1f M parameters, %.2f MB in %.2f s\n", out,
            (unsigned long long)st.n_tensors, (double)st.n_params / 1e6, (double)st.bytes_written / 1e6, st.seconds);
    return LMQ_EXIT_OK;
}
