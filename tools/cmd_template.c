/* lmq template: render a chat template (debugging), or name its family. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "lmq_runtime.h"

static const char *USAGE =
    "lmq template render TEMPLATE --messages CONV.json [--tools TOOLS.json] [--var NAME=VALUE]...\n"
    "                    [--var-json NAME=JSON]... [--add-generation-prompt] [--now YYYY-MM-DD]\n"
    "       lmq template name TEMPLATE";

static const char *HELP =
    "render: prints what the template renders for a conversation, exactly (no\n"
    "newline is added), as Hugging Face's apply_chat_template would. A failing\n"
    "template (raise_exception, undefined values, ...) prints its error with the\n"
    "line and column to stderr and exits 1.\n"
    "name: prints the template's family (llama3, chatml, gemma, ...).\n\n"
    "  TEMPLATE                 a .jinja file, or a tokenizer_config.json whose\n"
    "                           \"chat_template\" is used\n"
    "  --messages CONV.json     a list of messages, or an object with \"messages\"\n"
    "                           (and \"tools\")\n"
    "  --tools TOOLS.json       a list of tools (default: tools is None)\n"
    "  --var NAME=VALUE         a string variable (bos_token=<s>, ...); repeatable\n"
    "  --var-json NAME=JSON     a JSON variable (tools_in_user_message=false, ...)\n"
    "  --add-generation-prompt  set add_generation_prompt to true\n"
    "  --now YYYY-MM-DD         the date strftime_now() sees (noon, local time)\n"
    "  -h, --help               this help\n";

#define MAX_INPUT ((size_t)64 << 20)
#define MAX_VARS 256

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        lmq_error(LMQ_ERR_IO, "%s: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 65536;
            if (nc > MAX_INPUT + 1) {
                lmq_error(LMQ_ERR_LIMIT, "%s: larger than %zu bytes", path, MAX_INPUT);
                goto fail;
            }
            char *nb = realloc(buf, nc + 1);
            if (!nb) {
                lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", path);
                goto fail;
            }
            buf = nb;
            cap = nc;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        lmq_error(LMQ_ERR_IO, "%s: read error", path);
        goto fail;
    }
    fclose(f);
    buf[n] = 0;
    *len = n;
    return buf;
fail:
    free(buf);
    fclose(f);
    return NULL;
}

/* A tokenizer_config.json yields its chat_template (a string, or the
 * "default" entry of a list of {name, template}); other files are the
 * template itself. */
char *cli_load_template(const char *path, size_t *len)
{
    char *src = read_file(path, len);
    size_t pl = strlen(path);
    if (!src || pl < 5 || strcmp(path + pl - 5, ".json")) return src;
    cJSON *j = cJSON_ParseWithLength(src, *len);
    free(src);
    const cJSON *t = j ? cJSON_GetObjectItemCaseSensitive(j, "chat_template") : NULL;
    if (cJSON_IsArray(t)) {
        const cJSON *e, *pick = NULL;
        cJSON_ArrayForEach(e, t) {
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
            if (cJSON_IsString(nm) && !strcmp(nm->valuestring, "default")) pick = e;
        }
        t = pick ? cJSON_GetObjectItemCaseSensitive(pick, "template") : NULL;
    }
    if (!cJSON_IsString(t)) {
        lmq_error(LMQ_ERR_NOT_FOUND, "%s: no \"chat_template\" string", path);
        cJSON_Delete(j);
        return NULL;
    }
    char *out = strdup(t->valuestring);
    *len = out ? strlen(out) : 0;
    cJSON_Delete(j);
    if (!out) lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", path);
    return out;
}

static bool parse_date(const char *s, int64_t *out)
{
    int y, m, d;
    char extra;
    if (sscanf(s, "%4d-%2d-%2d%c", &y, &m, &d, &extra) != 3) return false;
    if (y < 1970 || y > 9999 || m < 1 || m > 12 || d < 1 || d > 31) return false;
    struct tm tmv = {0};
    tmv.tm_year = y - 1900;
    tmv.tm_mon = m - 1;
    tmv.tm_mday = d;
    tmv.tm_hour = 12;
    tmv.tm_isdst = -1;
    time_t t = mktime(&tmv);
    if (t == (time_t)-1 || tmv.tm_mday != d) return false;
    *out = (int64_t)t;
    return true;
}

static int cmd_name(int argc, char **argv)
{
    if (argc != 2) return cli_usage_error("template", USAGE, "name takes one TEMPLATE");
    size_t len;
    char *src = cli_load_template(argv[1], &len);
    if (!src) return cli_fail("template", LMQ_ERR_IO);
    char buf[96];
    printf("%s\n", lmq_chat_template_name_guess(src, buf, sizeof buf));
    free(src);
    return LMQ_EXIT_OK;
}

int lmq_cmd_template(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: %s\n\n%s", USAGE, HELP);
        return LMQ_EXIT_OK;
    }
    if (argc < 2) return cli_usage_error("template", USAGE, "a subcommand (render, name) is required");
    if (!strcmp(argv[1], "name")) return cmd_name(argc - 1, argv + 1);
    if (strcmp(argv[1], "render"))
        return cli_usage_error("template", USAGE, "unknown subcommand '%s'", argv[1]);
    argc--;
    argv++;

    const char *tpath = NULL, *mpath = NULL, *tools_path = NULL;
    lmq_chat_var vars[MAX_VARS];
    size_t nvars = 0;
    lmq_chat_vars v;
    memset(&v, 0, sizeof v);
    static const struct option opts[] = {{"messages", required_argument, 0, 'm'},
                                         {"tools", required_argument, 0, 't'},
                                         {"var", required_argument, 0, 600},
                                         {"var-json", required_argument, 0, 601},
                                         {"add-generation-prompt", no_argument, 0, 602},
                                         {"now", required_argument, 0, 603},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    opterr = 0;
    optind = 1;
    int o;
    while ((o = getopt_long(argc, argv, "m:t:h", opts, NULL)) != -1) {
        switch (o) {
        case 'm': mpath = optarg; break;
        case 't': tools_path = optarg; break;
        case 600: case 601: {
            char *eq = strchr(optarg, '=');
            if (!eq || eq == optarg)
                return cli_usage_error("template", USAGE, "--var takes NAME=VALUE, not '%s'", optarg);
            if (nvars == MAX_VARS) return cli_usage_error("template", USAGE, "too many --var options");
            *eq = 0;
            vars[nvars].name = optarg;
            vars[nvars].value = eq + 1;
            vars[nvars].json = o == 601;
            nvars++;
            break;
        }
        case 602: v.add_generation_prompt = true; break;
        case 603:
            if (!parse_date(optarg, &v.now))
                return cli_usage_error("template", USAGE, "--now takes a date YYYY-MM-DD, not '%s'", optarg);
            break;
        case 'h': printf("usage: %s\n\n%s", USAGE, HELP); return LMQ_EXIT_OK;
        default:
            return cli_usage_error("template", USAGE, "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) tpath = argv[optind++];
    if (optind < argc) return cli_usage_error("template", USAGE, "unexpected argument '%s'", argv[optind]);
    if (!tpath) return cli_usage_error("template", USAGE, "a TEMPLATE is required");
    if (!mpath) return cli_usage_error("template", USAGE, "--messages CONV.json is required");

    int rc = LMQ_EXIT_FAIL;
    size_t tlen, mlen, tolen;
    char *src = NULL, *msgs = NULL, *tools = NULL, *out = NULL;
    lmq_chat_template *t = NULL;
    lmq_status s;
    if (!(src = cli_load_template(tpath, &tlen))) goto fail;
    if (!(msgs = read_file(mpath, &mlen))) goto fail;
    if (tools_path && !(tools = read_file(tools_path, &tolen))) goto fail;
    if ((s = lmq_chat_template_parse(src, tlen, &t))) {
        fprintf(stderr, "lmq template: %s: %s\n", tpath, lmq_last_error());
        goto out;
    }
    v.messages_json = msgs;
    v.tools_json = tools;
    v.extra = vars;
    v.n_extra = nvars;
    size_t len;
    if ((s = lmq_chat_render(t, &v, &out, &len))) {
        fprintf(stderr, "lmq template: %s: %s\n", tpath, lmq_last_error());
        goto out;
    }
    if (fwrite(out, 1, len, stdout) != len || fflush(stdout)) {
        fprintf(stderr, "lmq template: write error on stdout\n");
        goto out;
    }
    rc = LMQ_EXIT_OK;
    goto out;
fail:
    rc = cli_fail("template", LMQ_ERR_IO);
out:
    free(out);
    lmq_chat_template_free(t);
    free(tools);
    free(msgs);
    free(src);
    return rc;
}
