/* lmq_datasets.h — locating and checking evaluation data sets. */
#ifndef LMQ_DATASETS_H
#define LMQ_DATASETS_H
/* liblmq exports what its public headers declare, nothing else (docs/API.md) */
#pragma GCC visibility push(default)

#include <stddef.h>
#include <stdint.h>

#include "lmq_format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* SHA-256 of the canonical wikitext-2-raw wiki.test.raw (1,290,590 bytes). */
#define LMQ_WIKITEXT2_TEST_SHA256 "173c87a53759e0201f33e0ccf978e510c2042d7f2cb78229d9a50d79b9e7dd08"

/* SHA-256 of a buffer as 64 lower-case hex digits plus NUL. */
void lmq_sha256_hex(const void *data, size_t len, char out[65]);

/* Finds wiki.test.raw: `hint` (a file, or a directory holding it or
 * wikitext-2-raw/wiki.test.raw), else $LMQ_DATA (same rules), else
 * ../shared/data/wikitext-2-raw/ relative to the working directory and to
 * `exe_dir` (may be NULL). Writes the path found into out. */
lmq_status lmq_wikitext2_find(const char *hint, const char *exe_dir, char *out, size_t cap);

/* Reads a text file for evaluation; if its name is wiki.test.raw, checks the
 * SHA-256 against the canonical one and fails with a clear message on a
 * mismatch (a wrong file silently gives wrong numbers) unless allow_other. */
lmq_status lmq_text_load(const char *path, int allow_other, char **out, size_t *len);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif
