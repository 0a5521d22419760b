#define _XOPEN_SOURCE 700
#include "testutil.h"

#include <cjson/cJSON.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int t_passed, t_failed;

static char *slot(void)
{
    static char bufs[16][4096];
    static int next;
    char *b = bufs[next];
    next = (next + 1) % 16;
    return b;
}

const char *t_shared(const char *rel)
{
    const char *root = getenv("LMQ_SHARED");
    char *b = slot();
    snprintf(b, 4096, "%s/%s", root && *root ? root : LMQ_SHARED_DIR, rel);
    return b;
}

const char *t_data(const char *rel)
{
    char *b = slot();
    snprintf(b, 4096, "%s/%s", LMQ_TEST_DATA_DIR, rel);
    return b;
}

static char g_tmpdir[4096];
static bool g_tmpdir_made;

const char *t_tmpdir(void)
{
    char *dir = g_tmpdir;
    if (!dir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(dir, sizeof g_tmpdir, "%s/lmqtest.XXXXXX", base && *base ? base : "/tmp");
        if (mkdtemp(dir)) {
            g_tmpdir_made = true;
        } else {
            perror("mkdtemp");
            snprintf(dir, sizeof g_tmpdir, "/tmp");
        }
    }
    return dir;
}

const char *t_tmp(const char *name)
{
    char *b = slot();
    snprintf(b, 4096, "%s/%s", t_tmpdir(), name);
    return b;
}

bool t_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

char *t_read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0) { fclose(f); return NULL; }
    long n = ftell(f);
    if (n < 0) { fclose(f); return NULL; }
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    if (!buf) { fclose(f); return NULL; }
    size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    if (got != (size_t)n) { free(buf); return NULL; }
    buf[n] = 0;
    if (len) *len = (size_t)n;
    return buf;
}

int t_write_all(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t put = fwrite(data, 1, len, f);
    int rc = fclose(f);
    return (put == len && rc == 0) ? 0 : -1;
}

bool t_copy_file(const char *from, const char *to)
{
    size_t len = 0;
    char *d = t_read_all(from, &len);
    bool ok = d && t_write_all(to, d, len) == 0;
    free(d);
    return ok;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

/* Removes this process's temporary directory (LMQ_KEEP_TMP=1 keeps it). */
static void remove_tmpdir(void)
{
    const char *keep = getenv("LMQ_KEEP_TMP");
    if (!g_tmpdir_made || (keep && *keep == '1')) return;
    nftw(g_tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    g_tmpdir_made = false;
}

void t_skip(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("SKIP: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    remove_tmpdir();
    exit(T_SKIP_CODE);
}

void t_require(const char *path)
{
    if (!t_exists(path)) t_skip("%s not found (set LMQ_SHARED)", path);
}

int t_finish(void)
{
    remove_tmpdir();
    printf("%d passed, %d failed\n", t_passed, t_failed);
    if (t_passed + t_failed == 0) {
        printf("FAIL: no check ran\n");
        return 1;
    }
    return t_failed ? 1 : 0;
}

bool t_files_equal(const char *a, const char *b)
{
    size_t la, lb;
    char *x = t_read_all(a, &la), *y = t_read_all(b, &lb);
    bool eq = x && y && la == lb && !memcmp(x, y, la);
    free(x);
    free(y);
    return eq;
}

/* ================================================================ crafted Hugging Face directories */

bool t_write_st(const char *path, const t_st_entry *e, size_t n)
{
    size_t cap = 16, len = 0;
    for (size_t i = 0; i < n; i++) cap += strlen(e[i].name) + strlen(e[i].dtype) + 64 + 21 * (4 + 2);
    char *h = malloc(cap);
    if (!h) return false;
    uint64_t off = 0;
    len += (size_t)snprintf(h + len, cap - len, "{");
    for (size_t i = 0; i < n; i++) {
        len += (size_t)snprintf(h + len, cap - len, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "", e[i].name,
                                e[i].dtype);
        for (uint32_t d = 0; d < e[i].n_dims && d < 4; d++)
            len += (size_t)snprintf(h + len, cap - len, "%s%lld", d ? "," : "", (long long)e[i].shape[d]);
        len += (size_t)snprintf(h + len, cap - len, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                                (unsigned long long)(off + e[i].nbytes));
        off += e[i].nbytes;
    }
    len += (size_t)snprintf(h + len, cap - len, "}");
    while (len % 8) h[len++] = ' ';
    const uint64_t total = 8 + len + off;
    uint8_t *buf = malloc((size_t)total);
    if (!buf) {
        free(h);
        return false;
    }
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)len >> (8 * i));
    memcpy(buf + 8, h, len);
    uint64_t p = 8 + len;
    for (size_t i = 0; i < n; i++) {
        memcpy(buf + p, e[i].data, (size_t)e[i].nbytes);
        p += e[i].nbytes;
    }
    bool ok = t_write_all(path, buf, (size_t)total) == 0;
    free(buf);
    free(h);
    return ok;
}

t_st_entry *t_entries_of(const lmq_safetensors *st, size_t extra, size_t *n)
{
    *n = lmq_safetensors_count(st);
    t_st_entry *e = calloc(*n + extra, sizeof *e);
    if (!e) return NULL;
    for (size_t i = 0; i < *n; i++) {
        const lmq_st_tensor *t = lmq_safetensors_tensor(st, i);
        snprintf(e[i].name, sizeof e[i].name, "%s", t->name);
        e[i].dtype = t->dtype;
        e[i].n_dims = t->n_dims;
        for (uint32_t d = 0; d < t->n_dims && d < 4; d++) e[i].shape[d] = t->shape[d];
        e[i].data = t->data;
        e[i].nbytes = t->nbytes;
    }
    return e;
}

const char *t_crafted_dir(const char *src, const char *name, const char *config)
{
    static char dir[4096]; /* not a slot(): callers hold t_shared() paths across many calls */
    snprintf(dir, sizeof dir, "%s/%s", t_tmpdir(), name);
    mkdir(dir, 0755);
    static const char *const files[] = {"config.json", "tokenizer.model", "tokenizer_config.json",
                                        "special_tokens_map.json", "generation_config.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char a[4096], b[4096];
        snprintf(a, sizeof a, "%s/%s", src, files[i]);
        snprintf(b, sizeof b, "%s/%s", dir, files[i]);
        if (i == 0 && config) T_CHECK(t_write_all(b, config, strlen(config)) == 0, "write %s", b);
        else if (t_exists(a)) T_CHECK(t_copy_file(a, b), "copy %s", a);
    }
    return dir;
}

const char *t_crafted(const char *src, const char *name, const char *config, const t_st_entry *e, size_t n)
{
    const char *dir = t_crafted_dir(src, name, config);
    char a[4096], b[4096];
    snprintf(a, sizeof a, "%s/model.safetensors", src);
    snprintf(b, sizeof b, "%s/model.safetensors", dir);
    if (e) T_CHECK(t_write_st(b, e, n), "write %s", b);
    else if (t_exists(a)) T_CHECK(t_copy_file(a, b), "copy %s", a);
    return dir;
}

cJSON *t_config_of(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text = t_read_all(path, NULL);
    cJSON *c = text ? cJSON_Parse(text) : NULL;
    free(text);
    return c;
}

char *t_config_with(const char *src, void (*edit)(cJSON *))
{
    cJSON *c = t_config_of(src);
    if (!c) return NULL;
    edit(c);
    char *out = cJSON_Print(c);
    cJSON_Delete(c);
    return out;
}

void t_check_error(const char *what, lmq_status s, lmq_status want, const char *mention, const char *mention2)
{
    const char *e = lmq_last_error();
    T_CHECK(s == want && strstr(e, mention) && (!mention2 || strstr(e, mention2)) && !strchr(e, '\n'),
            "%s: status %d (want %d), one line naming '%s': %s", what, s, want, mention, e);
}
