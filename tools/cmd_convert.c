/* lmq convert: a Hugging Face model directory (or a llama.cpp GGUF file) to .lmq. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "lmq_convert.h"

static const char *USAGE =
    "lmq convert HF_DIR|MODEL.gguf -o OUT.lmq [--type auto|f32|f16|bf16] [--compress zstd|none] [-t N]";

static const char *HELP =
    "Converts a Hugging Face Llama-family model directory (config.json, tokenizer\n"
    "files, model.safetensors or a sharded model.safetensors.index.json) into one\n"
    ".lmq container, streaming one tensor at a time. Values are converted exactly:\n"
    "bit copies when the type is unchanged, exact widening, round-to-nearest-even\n"
    "narrowing. 1-D tensors (norms) are always f32. Rows keep Hugging Face's order\n"
    "(recorded as lmq.rope.layout = neox). A GGUF input is copied tensor for tensor\n"
    "(--type does not apply).\n\n"
    "  -o, --output PATH    container to write (atomically: no partial file on failure)\n"
    "  --type TYPE          type of the 2-D weights: auto (the source dtype, default),\n"
    "                       f32, f16 or bf16\n"
    "  --compress CODEC     zstd: compress tensors that shrink; none (default)\n"
    "  -t, --threads N      threads for converting large tensors (default: all cores)\n"
    "  -h, --help           this help\n";

typedef struct progress_state {
    cli_progress bar;
    char label[64];
} progress_state;

static void on_tensor(void *ctx, size_t i, size_t n, const char *name)
{
    progress_state *p = ctx;
    snprintf(p->label, sizeof p->label, "convert [%zu/%zu]", i + 1, n);
    (void)name;
}

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    progress_state *p = ctx;
    p->bar.total = (double)total / 1e6;
    cli_progress_update(&p->bar, (double)done / 1e6, "MB");
}

int lmq_cmd_convert(int argc, char **argv)
{
    const char *in = NULL, *out = NULL;
    lmq_convert_opts co;
    memset(&co, 0, sizeof co);
    co.out_type = LMQ_CONVERT_TYPE_AUTO;
    co.codec = LMQ_CODEC_NONE;
    bool type_given = false;
    static const struct option opts[] = {{"output", required_argument, 0, 'o'},
                                         {"type", required_argument, 0, 600},
                                         {"compress", required_argument, 0, 601},
                                         {"threads", required_argument, 0, 't'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    opterr = 0;
    optind = 1;
    int o;
    int64_t v;
    while ((o = getopt_long(argc, argv, "o:t:h", opts, NULL)) != -1) {
        switch (o) {
        case 'o': out = optarg; break;
        case 600:
            type_given = true;
            if (!strcmp(optarg, "auto")) co.out_type = LMQ_CONVERT_TYPE_AUTO;
            else if (!strcmp(optarg, "f32")) co.out_type = LMQ_TYPE_F32;
            else if (!strcmp(optarg, "f16")) co.out_type = LMQ_TYPE_F16;
            else if (!strcmp(optarg, "bf16")) co.out_type = LMQ_TYPE_BF16;
            else return cli_usage_error("convert", USAGE, "--type takes auto, f32, f16 or bf16, not '%s' (quantize with lmq quantize)", optarg);
            break;
        case 601:
            if (!strcmp(optarg, "zstd")) co.codec = LMQ_CODEC_ZSTD;
            else if (!strcmp(optarg, "none")) co.codec = LMQ_CODEC_NONE;
            else return cli_usage_error("convert", USAGE, "--compress takes zstd or none, not '%s'", optarg);
            break;
        case 't':
            if (!cli_parse_i64(optarg, 1, LMQ_MAX_THREADS, &v))
                return cli_usage_error("convert", USAGE, "-t takes a thread count in [1, %d], not '%s'", LMQ_MAX_THREADS, optarg);
            co.n_threads = (int)v;
            break;
        case 'h': printf("usage: %s\n\n%s", USAGE, HELP); return LMQ_EXIT_OK;
        default: return cli_usage_error("convert", USAGE, "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) in = argv[optind++];
    if (optind < argc) return cli_usage_error("convert", USAGE, "unexpected argument '%s'", argv[optind]);
    if (!in) return cli_usage_error("convert", USAGE, "an input model directory is required");
    if (!out) return cli_usage_error("convert", USAGE, "-o OUT.lmq is required");

    progress_state ps;
    snprintf(ps.label, sizeof ps.label, "convert");
    cli_progress_begin(&ps.bar, ps.label, 0);
    co.progress = on_progress;
    co.tensor_begin = on_tensor;
    co.progress_ctx = &ps;
    lmq_convert_stats st;
    lmq_status s;
    if (lmq_path_is_gguf(in)) {
        if (type_given && co.out_type != LMQ_CONVERT_TYPE_AUTO)
            fprintf(stderr, "lmq convert: note: --type does not apply to GGUF input (tensors are copied as they are)\n");
        s = lmq_convert_gguf(in, out, &co, &st);
    } else {
        s = lmq_convert_hf(in, out, &co, &st);
    }
    cli_progress_end(&ps.bar);
    if (s) return cli_fail("convert", s);
    fprintf(stderr,
            "lmq convert: wrote %s: %llu tensors, %.2f M parameters, %.2f MB in %.2f s (%.0f MB/s), peak RSS %.1f MB\n",
            out, (unsigned long long)st.n_tensors, (double)st.n_params / 1e6, (double)st.bytes_written / 1e6,
            st.seconds, st.seconds > 0 ? (double)st.bytes_written / 1e6 / st.seconds : 0.0,
            (double)cli_peak_rss() / 1e6);
    return LMQ_EXIT_OK;
}
