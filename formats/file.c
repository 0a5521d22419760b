/* lmq_file: one read interface over .lmq containers and GGUF files.
 * Opening maps the file read-only, dispatches on the magic to the parser,
 * and offers zero-copy tensor views; verify() re-hashes tensors in threads. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lmq_format.h"
#include "lmq_format_internal.h"

static lmq_status parse_any(lmq_file *f)
{
    if (f->size < 4)
        return lmq_error(LMQ_ERR_FORMAT, "%s: file of %zu bytes is too short to be a model", f->path, f->size);
    if (!memcmp(f->map, "LMQF", 4)) return lmq_lmq_parse(f);
    if (!memcmp(f->map, "GGUF", 4)) return lmq_gguf_parse(f);
    return lmq_error(LMQ_ERR_FORMAT, "%s: not an .lmq or GGUF file (bad magic)", f->path);
}

static lmq_status open_common(lmq_file *f, lmq_file **out)
{
    lmq_status s = parse_any(f);
    if (s) {
        lmq_file_close(f);
        return s;
    }
    *out = f;
    return LMQ_OK;
}

lmq_status lmq_file_open(const char *path, lmq_file **out)
{
    *out = NULL;
    lmq_file *f = calloc(1, sizeof *f);
    if (!f) return lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", path);
    f->path = strdup(path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        lmq_status s = lmq_error(errno == ENOENT ? LMQ_ERR_NOT_FOUND : LMQ_ERR_IO, "%s: %s", path, strerror(errno));
        lmq_file_close(f);
        return s;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        lmq_file_close(f);
        return lmq_error(LMQ_ERR_IO, "%s: not a regular file", path);
    }
    f->size = (size_t)st.st_size;
    if (f->size > 0) {
        void *m = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            lmq_file_close(f);
            return lmq_error(LMQ_ERR_IO, "%s: mmap failed: %s", path, strerror(e));
        }
        f->map = m;
        f->owns_map = true;
    }
    close(fd);
    return open_common(f, out);
}

void lmq_file_release(const lmq_file *f, const void *p, size_t n)
{
    if (!f || !f->owns_map || !f->map || !p || !n) return;
    const uintptr_t lo = (uintptr_t)f->map, hi = lo + f->size, s = (uintptr_t)p;
    if (s < lo || s >= hi || n > hi - s) return;
    const long ps = sysconf(_SC_PAGESIZE);
    const uintptr_t pg = ps > 0 ? (uintptr_t)ps : 4096;
    const uintptr_t a = (s + pg - 1) & ~(pg - 1), b = (s + n) & ~(pg - 1);
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

lmq_status lmq_file_open_memory(const void *buf, size_t len, const char *name, lmq_file **out)
{
    *out = NULL;
    lmq_file *f = calloc(1, sizeof *f);
    if (!f) return lmq_error(LMQ_ERR_NOMEM, "out of memory");
    f->path = strdup(name ? name : "(memory)");
    f->map = buf;
    f->size = len;
    return open_common(f, out);
}

void lmq_file_close(lmq_file *f)
{
    if (!f) return;
    for (size_t i = 0; i < f->n_tensors; i++) {
        if (f->owned_data) free(f->owned_data[i]);
        if (f->names) free(f->names[i]);
    }
    free(f->owned_data);
    free(f->names);
    lmq_strindex_clear(&f->name_ix);
    free(f->tensors);
    lmq_meta_free(f->meta);
    if (f->owns_map && f->map) munmap((void *)f->map, f->size);
    free(f->path);
    free(f);
}

lmq_file_kind lmq_file_kind_of(const lmq_file *f) { return f->kind; }
const char *lmq_file_path(const lmq_file *f) { return f->path; }
uint64_t lmq_file_size(const lmq_file *f) { return f->size; }
uint32_t lmq_file_version(const lmq_file *f) { return f->version; }
const lmq_meta *lmq_file_meta(const lmq_file *f) { return f->meta; }
size_t lmq_file_n_tensors(const lmq_file *f) { return f->n_tensors; }
uint64_t lmq_file_id(const lmq_file *f) { return f->id; }

const lmq_tensor_info *lmq_file_tensor(const lmq_file *f, size_t i)
{
    return i < f->n_tensors ? &f->tensors[i] : NULL;
}

static const char *tensor_name_at(const void *owner, size_t i)
{
    return ((const lmq_file *)owner)->tensors[i].name;
}

lmq_status lmq_file_index_name(lmq_file *f, size_t i)
{
    size_t dup;
    lmq_status s = lmq_strindex_add(&f->name_ix, i, tensor_name_at, f, &dup);
    if (s) return s;
    if (dup != SIZE_MAX) return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s' appears twice", f->path, f->tensors[i].name);
    return LMQ_OK;
}

const lmq_tensor_info *lmq_file_find_tensor(const lmq_file *f, const char *name)
{
    size_t i = lmq_strindex_find(&f->name_ix, name, tensor_name_at, f);
    return i < f->n_tensors ? &f->tensors[i] : NULL;
}

/* ---------------------------------------------------------------- verify */

typedef struct verify_job {
    const lmq_file *f;
    size_t begin, end; /* tensor index range */
    size_t first_bad;  /* SIZE_MAX when all good */
} verify_job;

static void *verify_worker(void *arg);

/* lmq_pool_for's share ith: jobs[ith] */
static void verify_share(void *ctx, int ith, int nth)
{
    (void)nth;
    verify_worker((verify_job *)ctx + ith);
}

static void *verify_worker(void *arg)
{
    verify_job *j = arg;
    j->first_bad = SIZE_MAX;
    for (size_t i = j->begin; i < j->end; i++) {
        const lmq_tensor_info *t = &j->f->tensors[i];
        if (!t->has_checksum) continue;
        uint64_t h = lmq_hash64(j->f->map + t->file_offset, (size_t)t->stored_bytes);
        if (h != t->checksum) {
            j->first_bad = i;
            break;
        }
    }
    return NULL;
}

lmq_status lmq_file_verify(const lmq_file *f, int n_threads, size_t *bad, size_t *n_checked)
{
    if (n_checked) *n_checked = 0;
    if (n_threads <= 0) n_threads = lmq_n_cpus();
    if (n_threads > LMQ_MAX_THREADS) n_threads = LMQ_MAX_THREADS;
    size_t n = f->n_tensors;
    if ((size_t)n_threads > n) n_threads = n ? (int)n : 1;
    /* split tensors into ranges of roughly equal bytes */
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) total += f->tensors[i].has_checksum ? f->tensors[i].stored_bytes : 0;
    verify_job jobs[LMQ_MAX_THREADS];
    size_t idx = 0;
    uint64_t acc = 0;
    for (int t = 0; t < n_threads; t++) {
        jobs[t].f = f;
        jobs[t].begin = idx;
        uint64_t target = total * (uint64_t)(t + 1) / (uint64_t)n_threads;
        while (idx < n && (acc < target || t == n_threads - 1)) {
            acc += f->tensors[idx].has_checksum ? f->tensors[idx].stored_bytes : 0;
            idx++;
        }
        jobs[t].end = idx;
    }
    lmq_pool_for(n_threads, verify_share, jobs);
    size_t first_bad = SIZE_MAX, checked = 0;
    for (int t = 0; t < n_threads; t++)
        if (jobs[t].first_bad < first_bad) first_bad = jobs[t].first_bad;
    for (size_t i = 0; i < n; i++) checked += f->tensors[i].has_checksum;
    if (n_checked) *n_checked = checked;
    if (first_bad != SIZE_MAX) {
        if (bad) *bad = first_bad;
        return lmq_error(LMQ_ERR_CHECKSUM, "%s: tensor '%s': checksum mismatch (data corrupted)",
                         f->path, f->tensors[first_bad].name);
    }
    return LMQ_OK;
}
