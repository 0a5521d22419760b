/* testutil.h — minimal assertion helpers shared by the C tests.
 * Each test binary calls T_CHECK/T_NEAR and ends with `return t_finish();`,
 * which prints "N passed, N failed" and returns non-zero on any failure or
 * when zero checks ran; a test whose data is missing calls t_skip (exit 77). */
#ifndef LMQ_TESTUTIL_H
#define LMQ_TESTUTIL_H
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

extern int t_passed, t_failed;

#define T_CHECK(cond, ...)                                                        \
    do {                                                                          \
        if (cond) {                                                               \
            t_passed++;                                                           \
        } else {                                                                  \
            t_failed++;                                                           \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);       \
            fprintf(stderr, __VA_ARGS__);                                         \
            fputc('\n', stderr);                                                  \
        }                                                                         \
    } while (0)

#define T_NEAR(a, b, tol, what)                                                   \
    T_CHECK(fabs((double)(a) - (double)(b)) <= (tol), "%s: %.9g vs %.9g (tol %g)", \
            (what), (double)(a), (double)(b), (double)(tol))

/* Path of a file under ../shared (or $LMQ_SHARED); returns a static buffer
 * slot (16 rotating slots). */
const char *t_shared(const char *rel);
/* Path of a file under tests/data. */
const char *t_data(const char *rel);
/* A fresh temporary directory for this test (created once per process). */
const char *t_tmpdir(void);
/* Joins t_tmpdir() and name (rotating static slots). */
const char *t_tmp(const char *name);
/* True if the file exists. */
bool t_exists(const char *path);
/* Exit code of a skipped test; CMake sets SKIP_RETURN_CODE to it, so ctest
 * lists the test as skipped (never as passed) and scripts/test.sh fails on it
 * unless LMQ_ALLOW_SKIP=1. */
#define T_SKIP_CODE 77
/* Prints "SKIP: <reason>" and exits with T_SKIP_CODE. A test skips as a whole:
 * a part of it never skips on its own. */
_Noreturn void t_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Returns only if `path` exists; otherwise skips the whole test naming it. */
void t_require(const char *path);
/* Reads a whole file (malloc'd, NUL-terminated); NULL on failure. */
char *t_read_all(const char *path, size_t *len);
/* True if both files can be read and hold the same bytes. */
bool t_files_equal(const char *a, const char *b);
/* Writes a whole buffer; returns 0 on success. */
int t_write_all(const char *path, const void *data, size_t len);
/* Prints the summary line and returns the process exit code: non-zero on any
 * failure, and also when no check ran at all (a test that checked nothing
 * did not pass). Removes t_tmpdir() and what it holds. */
int t_finish(void);
#endif
