#define _XOPEN_SOURCE 700
#include "testutil.h"
#include "lmq_runtime.h"

#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int t_passed, t_failed;

/* Test programs take LMQ_ISA and LMQ_GEMM as the CLI does (the library reads
 * no environment): test_kernels_avx2 and scripts/test-arm.sh force an ISA
 * this way. Before main, so that every test sees the setting from its start. */
__attribute__((constructor)) static void t_env_settings(void)
{
    const char *e = getenv("LMQ_ISA");
    lmq_isa isa;
    if (e && *e && (lmq_isa_from_name(e, &isa) != LMQ_OK || lmq_isa_force(isa) != LMQ_OK))
        fprintf(stderr, "LMQ_ISA=%s is unknown or not supported here; using %s\n", e, lmq_isa_name(lmq_isa_active()));
    if (e && !strcmp(e, "scalar")) lmq_quantize_use_simd(false);
    e = getenv("LMQ_GEMM");
    lmq_gemm_mode mode;
    if (e && *e && lmq_gemm_mode_from_name(e, &mode) == LMQ_OK) lmq_gemm_mode_set(mode);
    else if (e && *e) fprintf(stderr, "LMQ_GEMM=%s is not auto, vecdot, blas or panel; using auto\n", e);
    lmq_error_clear();
}

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

/* The tests run lmq as the CLI does (tools/main.c): OpenBLAS on one thread
 * per call, so that LMQ_GEMM_AUTO takes the BLAS path where the CLI does and
 * the golden tolerances, measured on the CLI's paths, apply (docs/API.md,
 * "Threads"). */
__attribute__((constructor)) static void t_blas_like_cli(void)
{
    lmq_blas_set_threads(1);
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
