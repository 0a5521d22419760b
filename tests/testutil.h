/* testutil.h — minimal assertion helpers shared by the C tests.
 * Each test binary calls T_CHECK/T_NEAR and ends with `return t_finish();`,
 * which prints "N passed, N failed" and returns non-zero on any failure or
 * when zero checks ran; a test whose data is missing calls t_skip (exit 77).
 * The second part writes crafted Hugging Face directories (safetensors files
 * from tensor lists, config.json edits) for the conversion tests; the third
 * compares converted tensors and GGUF files with what the golden tests want. */
#ifndef LMQ_TESTUTIL_H
#define LMQ_TESTUTIL_H
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lmq_format.h"

struct cJSON;

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
/* Copies a whole file; true on success. */
bool t_copy_file(const char *from, const char *to);
/* Prints the summary line and returns the process exit code: non-zero on any
 * failure, and also when no check ran at all (a test that checked nothing
 * did not pass). Removes t_tmpdir() and what it holds. */
int t_finish(void);

/* ================================================================ crafted Hugging Face directories */

/* One tensor of a safetensors file to write; `data` is borrowed. */
typedef struct t_st_entry {
    char name[128];
    const char *dtype; /* safetensors' name: "F32", "BF16", "U8", ... */
    uint32_t n_dims;   /* at most 4 */
    int64_t shape[4];  /* row-major as in the file; unused dims 0 */
    const void *data;
    uint64_t nbytes;
} t_st_entry;

/* Writes a safetensors file of e[0..n), data packed in that order. */
bool t_write_st(const char *path, const t_st_entry *e, size_t n);
/* The tensors of `st` as entries (data in st's mapping: valid while st is
 * open), zeroed room for `extra` more after them; *n gets the count.
 * calloc'd: the caller frees. */
t_st_entry *t_entries_of(const lmq_safetensors *st, size_t extra, size_t *n);
/* A fresh directory t_tmpdir()/name (reused if it exists) with `config` as
 * config.json (NULL: a copy of src's) and copies of src's tokenizer and
 * generation files that exist; each write is a check. Returns the path in a
 * static buffer, valid until the next call. */
const char *t_crafted_dir(const char *src, const char *name, const char *config);
/* t_crafted_dir plus model.safetensors: e[0..n) written by t_write_st, or a
 * copy of src's when e is NULL. */
const char *t_crafted(const char *src, const char *name, const char *config, const t_st_entry *e, size_t n);
/* The parsed dir/config.json; NULL if it is missing or not JSON. The caller
 * frees it with cJSON_Delete. */
struct cJSON *t_config_of(const char *dir);
/* src's config.json after `edit` (cJSON_Print, the caller frees); NULL if it
 * cannot be read. */
char *t_config_with(const char *src, void (*edit)(struct cJSON *));
/* One check: `s` is `want` and lmq_last_error() is one line naming `mention`
 * (and `mention2` unless NULL). */
void t_check_error(const char *what, lmq_status s, lmq_status want, const char *mention, const char *mention2);

/* ================================================================ comparisons */

/* One tensor as a conversion must write it, restated from the source. */
typedef struct t_want {
    char name[64];
    uint32_t n_dims;
    int64_t ne[3];
    int64_t n;           /* ne[0] * ne[1] * ne[2] */
    float *v;            /* the values (quantized tensors: the decoded source values) */
    float *hf;           /* reordered tensors: the same in Hugging Face's order; otherwise v or NULL */
    bool approx;         /* computed in double here: equal within about an ulp, not bit for bit */
    uint8_t *blocks;     /* tensors kept quantized: the blocks in ggml's layout; otherwise NULL */
    size_t blocks_bytes;
} t_want;

typedef struct t_wants {
    t_want *t;
    size_t n;
} t_wants;

/* Frees every tensor's v, hf (unless it is v) and blocks, then the list;
 * leaves *w empty. */
void t_wants_free(t_wants *w);
/* The wanted tensor named `name`; NULL if there is none. */
const t_want *t_want_find(const t_wants *w, const char *name);
/* True if t has w's dimensions and extents. */
bool t_same_shape(const lmq_tensor_info *t, const t_want *w);
/* ||a - b|| / ||b|| over n values (||a - b|| when b is all zeros). */
double t_rel_rms(const float *a, const float *b, int64_t n);
/* A tensor's values through lmq's dequantizer (malloc'd, the caller frees);
 * NULL when it fails. */
float *t_tensor_floats(const lmq_tensor_info *t);
/* A bfloat16 value as a float (exact). */
float t_bf16f(uint16_t b);

/* One check: every <arch>.* key of `ref` is in `ours` with the same type and
 * value (strings and arrays byte for byte, numbers as doubles), and there are
 * at least `min_keys` of them; ours has no other <arch>.* key than the
 * suffixes in `optional` (NULL-terminated; keys llama.cpp reads optionally,
 * with the same defaults). */
void t_check_keys(const char *what, const lmq_meta *ours, const lmq_meta *ref, const char *arch,
                  const char *const *optional, int min_keys);

/* What t_check_names compares beyond names and shapes. */
typedef enum t_names_cmp {
    T_NAMES_SHAPES,         /* nothing more */
    T_NAMES_BYTES,          /* type and bytes */
    T_NAMES_BYTES_OR_CLOSE, /* type and bytes, or both f32 and within a relative 1e-6 (about an ulp) */
} t_names_cmp;

/* One check: `ours` has exactly the tensor names of `ref`, each with its
 * shape (and what `cmp` adds). */
void t_check_names(const char *what, const lmq_file *ours, const lmq_file *ref, t_names_cmp cmp);
#endif
