/* lmq — command-line entry point: dispatches to one file per subcommand. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "lmq_runtime.h"

/* Subcommands are weak references so that the table can list commands whose
 * file a given build does not contain; those report that plainly. */
#define LMQ_COMMANDS(X)                                                          \
    X(convert, "convert a Hugging Face directory or GGUF file to .lmq")          \
    X(quantize, "quantize a model to a type or mix (q4_k_m, q8_0, ...)")         \
    X(info, "show a .lmq or .gguf file: metadata, tensors, checksums")           \
    X(run, "generate text from a prompt")                                        \
    X(chat, "chat with a model using its own chat template")                     \
    X(tokenize, "tokenize text with a model's tokenizer")                        \
    X(perplexity, "perplexity and KL divergence on a text file")                 \
    X(imatrix, "importance matrix over calibration text (llama.cpp GGUF format)")\
    X(compare, "PPL/KLD table for several quantizations against one base")       \
    X(bench, "speed of prompt processing and generation, kernel micro-bench")    \
    X(export, "write a .lmq model as GGUF for llama.cpp and friends")            \
    X(serve, "OpenAI-compatible HTTP server (chat, completions, streaming)")     \
    X(template, "render a chat template (debugging)")

#define DECLARE(name, help) int lmq_cmd_##name(int argc, char **argv) __attribute__((weak));
LMQ_COMMANDS(DECLARE)
#undef DECLARE

static void usage(FILE *f)
{
    fprintf(f, "lmq %s — quantized language models on the CPU\n\n"
               "usage: lmq <command> [options]   (lmq <command> --help for details)\n\n"
               "commands:\n", LMQ_VERSION_STRING);
#define HELP(name, help) if (lmq_cmd_##name) fprintf(f, "  %-11s %s\n", #name, help);
    LMQ_COMMANDS(HELP)
#undef HELP
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return LMQ_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    /* lmq splits BLAS products over its own threads: OpenBLAS's stay at 1 (docs/API.md) */
    lmq_blas_set_threads(1);
    cli_env_defaults(); /* LMQ_ISA, LMQ_GEMM */
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return LMQ_EXIT_OK;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
        printf("lmq %s\n", LMQ_VERSION_STRING);
        return LMQ_EXIT_OK;
    }
#define DISPATCH(name, help)                                                      \
    if (!strcmp(cmd, #name) && lmq_cmd_##name) return lmq_cmd_##name(argc - 1, argv + 1);
    LMQ_COMMANDS(DISPATCH)
#undef DISPATCH
    fprintf(stderr, "lmq: unknown command '%s'\n", cmd);
    usage(stderr);
    return LMQ_EXIT_USAGE;
}
