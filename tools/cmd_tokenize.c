/* lmq tokenize: tokenize text with a model's tokenizer (.lmq, .gguf or a
 * Hugging Face directory holding tokenizer files). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "lmq_convert.h"
#include "lmq_runtime.h"

static const char *USAGE =
    "lmq tokenize -m MODEL (-p TEXT | -f FILE) [--no-bos] [--ids | --pieces] [--no-parse-special] [--stats]";

static const char *HELP =
    "Tokenizes TEXT (or the contents of FILE, '-' for stdin) with the tokenizer of\n"
    "MODEL: a .lmq container, a GGUF file (vocab-only files work) or a Hugging Face\n"
    "directory with tokenizer.json / tokenizer.model (+ tokenizer_config.json).\n\n"
    "  -m, --model MODEL      .lmq, .gguf or directory\n"
    "  -p, --prompt TEXT      text to tokenize\n"
    "  -f, --file FILE        read the text from FILE ('-' = stdin), bytes as they are\n"
    "  --no-bos               do not add the BOS/EOS tokens the vocabulary asks for\n"
    "  --no-parse-special     treat control-token text (\"<s>\", \"<|im_start|>\") as\n"
    "                         plain text\n"
    "  --ids                  print the ids as a list: [1, 403, 407] (the default)\n"
    "  --pieces               print one token per line: ID<TAB>'PIECE' (the decoded\n"
    "                         bytes; \\n \\t \\r \\\\ \\' escaped, control bytes and bytes\n"
    "                         outside valid UTF-8 as \\xNN)\n"
    "  --stats                print the token count and the tokenizing time to stderr\n"
    "  -h, --help             this help\n";

static lmq_status load_vocab(const char *model, lmq_vocab **out)
{
    struct stat sb;
    if (stat(model, &sb) != 0) return lmq_error(LMQ_ERR_NOT_FOUND, "%s: no such file or directory", model);
    lmq_status s;
    if (S_ISDIR(sb.st_mode)) {
        lmq_meta *m = lmq_meta_new();
        if (!m) return lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", model);
        s = lmq_hf_tokenizer_to_meta(model, m);
        if (!s) s = lmq_vocab_load(m, out);
        lmq_meta_free(m);
        return s;
    }
    lmq_file *f = NULL;
    s = lmq_file_open(model, &f);
    if (!s) s = lmq_vocab_load(lmq_file_meta(f), out);
    if (s && f) s = lmq_error_prefix(s, "%s", model);
    lmq_file_close(f);
    return s;
}

static char *read_stream(FILE *f, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            return NULL;
        }
        buf = nb;
        cap *= 2;
    }
    *len = n;
    return buf;
}

/* Length of the well-formed UTF-8 sequence at s[0..n), 0 if none. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (len == 0 || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) || (c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] > 0x8f))
        return 0;
    return len;
}

/* 'piece' with \n \t \r \\ \' escaped, and control bytes and bytes that
 * are not part of valid UTF-8 (a character split over byte tokens) as \xNN. */
static void print_piece(const char *p, size_t n)
{
    const unsigned char *s = (const unsigned char *)p;
    putchar('\'');
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t l = utf8_seq(s + i, n - i);
        if (l > 1) {
            fwrite(s + i, 1, l, stdout);
            i += l;
            continue;
        }
        switch (c) {
        case '\n': fputs("\\n", stdout); break;
        case '\t': fputs("\\t", stdout); break;
        case '\r': fputs("\\r", stdout); break;
        case '\\': fputs("\\\\", stdout); break;
        case '\'': fputs("\\'", stdout); break;
        default:
            if (c < 0x20 || c >= 0x7f) printf("\\x%02x", c);
            else putchar(c);
        }
        i++;
    }
    putchar('\'');
}

int lmq_cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL, *prompt = NULL, *file = NULL;
    bool add_special = true, parse_special = true, pieces = false, stats = false;
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                         {"prompt", required_argument, 0, 'p'},
                                         {"file", required_argument, 0, 'f'},
                                         {"no-bos", no_argument, 0, 600},
                                         {"no-parse-special", no_argument, 0, 601},
                                         {"ids", no_argument, 0, 602},
                                         {"pieces", no_argument, 0, 603},
                                         {"stats", no_argument, 0, 604},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    opterr = 0;
    optind = 1;
    int o;
    while ((o = getopt_long(argc, argv, "m:p:f:h", opts, NULL)) != -1) {
        switch (o) {
        case 'm': model = optarg; break;
        case 'p': prompt = optarg; break;
        case 'f': file = optarg; break;
        case 600: add_special = false; break;
        case 601: parse_special = false; break;
        case 602: pieces = false; break;
        case 603: pieces = true; break;
        case 604: stats = true; break;
        case 'h': printf("usage: %s\n\n%s", USAGE, HELP); return LMQ_EXIT_OK;
        default: return cli_usage_error("tokenize", USAGE, "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error("tokenize", USAGE, "unexpected argument '%s'", argv[optind]);
    if (!model) return cli_usage_error("tokenize", USAGE, "-m MODEL is required");
    if (!prompt == !file) return cli_usage_error("tokenize", USAGE, "give exactly one of -p TEXT and -f FILE");

    char *text = NULL;
    size_t len = 0;
    if (file) {
        if (!strcmp(file, "-")) {
            text = read_stream(stdin, &len);
            if (!text) {
                fprintf(stderr, "lmq tokenize: cannot read stdin\n");
                return LMQ_EXIT_FAIL;
            }
        } else {
            lmq_status s = lmq_read_file(file, (size_t)1 << 32, &text, &len);
            if (s) return cli_fail("tokenize", s);
        }
    }

    lmq_vocab *v = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = LMQ_EXIT_OK;
    lmq_status s = load_vocab(model, &v);
    if (s) {
        rc = cli_fail("tokenize", s);
        goto out;
    }
    const char *t = file ? text : prompt;
    size_t tl = file ? len : strlen(prompt);
    double t0 = lmq_time_s();
    s = lmq_tokenize_alloc(v, t, tl, add_special, parse_special, &ids, &n);
    double dt = lmq_time_s() - t0;
    if (s) {
        rc = cli_fail("tokenize", s);
        goto out;
    }
    if (pieces) {
        for (size_t i = 0; i < n; i++) {
            size_t pl;
            const char *p = lmq_token_to_piece(v, ids[i], true, &pl);
            printf("%d\t", ids[i]);
            print_piece(p, pl);
            putchar('\n');
        }
    } else {
        putchar('[');
        for (size_t i = 0; i < n; i++) printf(i ? ", %d" : "%d", ids[i]);
        puts("]");
    }
    if (stats)
        fprintf(stderr, "lmq tokenize: %zu bytes -> %zu tokens (%.3f bytes/token) in %.1f ms\n", tl, n,
                n ? (double)tl / (double)n : 0.0, dt * 1e3);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "lmq tokenize: write error\n");
        rc = LMQ_EXIT_FAIL;
    }
out:
    free(ids);
    free(text);
    lmq_vocab_free(v);
    return rc;
}
