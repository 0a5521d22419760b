/* Finding wikitext-2's wiki.test.raw and checking that it is the canonical
 * file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lmq_datasets.h"

static int is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A file, or a directory with wiki.test.raw or wikitext-2-raw/wiki.test.raw. */
static int try_path(const char *base, char *out, size_t cap)
{
    if (!base || !*base) return 0;
    if (is_file(base)) {
        snprintf(out, cap, "%s", base);
        return 1;
    }
    if (!is_dir(base)) return 0;
    const char *subs[] = {"wiki.test.raw", "wikitext-2-raw/wiki.test.raw", "data/wikitext-2-raw/wiki.test.raw"};
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
        snprintf(out, cap, "%s/%s", base, subs[i]);
        if (is_file(out)) return 1;
    }
    return 0;
}

lmq_status lmq_wikitext2_find(const char *hint, const char *exe_dir, char *out, size_t cap)
{
    if (hint && *hint) {
        if (try_path(hint, out, cap)) return LMQ_OK;
        return lmq_error(LMQ_ERR_NOT_FOUND, "%s: no wiki.test.raw there", hint);
    }
    if (try_path(getenv("LMQ_DATA"), out, cap)) return LMQ_OK;
    if (try_path("../shared/data", out, cap)) return LMQ_OK;
    if (exe_dir) {
        char p[4096];
        const char *rel[] = {"../../shared/data", "../shared/data"};
        for (size_t i = 0; i < 2; i++) {
            snprintf(p, sizeof p, "%s/%s", exe_dir, rel[i]);
            if (try_path(p, out, cap)) return LMQ_OK;
        }
    }
    return lmq_error(LMQ_ERR_NOT_FOUND,
                     "wiki.test.raw not found: pass -f PATH, set LMQ_DATA, or run datasets/get-wikitext-2.sh");
}

lmq_status lmq_text_load(const char *path, int allow_other, char **out, size_t *len)
{
    lmq_status s = lmq_read_file(path, (size_t)1 << 31, out, len);
    if (s) return s;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (!allow_other && !strcmp(base, "wiki.test.raw")) {
        char hex[65];
        lmq_sha256_hex(*out, *len, hex);
        if (strcmp(hex, LMQ_WIKITEXT2_TEST_SHA256)) {
            free(*out);
            *out = NULL;
            return lmq_error(LMQ_ERR_FORMAT,
                             "%s: SHA-256 %s is not the canonical wikitext-2 test file's (%s); perplexity would not be comparable "
                             "(pass --allow-other-text to use it anyway)",
                             path, hex, LMQ_WIKITEXT2_TEST_SHA256);
        }
    }
    return LMQ_OK;
}
