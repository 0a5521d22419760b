/* GGUF v3 writer (little-endian). Layout, as ggml's docs/gguf.md specifies:
 *
 *   "GGUF", u32 version, u64 n_tensors, u64 n_kv
 *   n_kv key/value pairs            (lmq_meta_encode: GGUF's own encoding)
 *   n_tensors tensor infos          (string name, u32 n_dims, u64 ne[n_dims],
 *                                    u32 ggml type, u64 offset from data start)
 *   zero padding to `alignment`
 *   tensor data, each tensor padded with zeros to `alignment` (the last too,
 *   as llama.cpp writes it)
 *
 * Writes are coalesced in a buffer; the file goes to PATH.tmp.<pid> and is
 * renamed over PATH only once complete and fsynced. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lmq_format.h"
#include "lmq_format_internal.h"

#define GGUF_WBUF_SIZE (1u << 20)

typedef struct gguf_wtensor {
    char *name;
    uint32_t n_dims;
    int64_t ne[LMQ_MAX_DIMS];
    uint32_t ggml_type;
    uint64_t nbytes;
    uint64_t offset; /* relative to the start of the data section */
} gguf_wtensor;

struct lmq_gguf_writer {
    char *path;
    char tmp[4096];
    int fd;
    uint32_t alignment; /* 0 until the header is written (then fixed) */
    uint32_t opt_alignment;
    lmq_meta *meta;
    gguf_wtensor *t;
    size_t n, cap;
    uint64_t data_size;  /* sum of padded tensor sizes declared so far */
    bool started;        /* header written: no more declarations */
    size_t cur;          /* tensor receiving data */
    uint64_t cur_done;   /* bytes of it received */
    uint8_t *buf;        /* write coalescing buffer */
    size_t buf_len;
    bool failed;
};

static uint64_t align_up(uint64_t x, uint64_t a)
{
    return (x + a - 1) / a * a;
}

/* ---------------------------------------------------------------- raw I/O */

static lmq_status flush_buf(lmq_gguf_writer *w)
{
    const uint8_t *p = w->buf;
    size_t len = w->buf_len;
    while (len) {
        ssize_t r = write(w->fd, p, len);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            w->failed = true;
            return lmq_error(LMQ_ERR_IO, "%s: write failed: %s", w->path, r < 0 ? strerror(errno) : "short write");
        }
        p += r;
        len -= (size_t)r;
    }
    w->buf_len = 0;
    return LMQ_OK;
}

static lmq_status put(lmq_gguf_writer *w, const void *data, size_t len)
{
    const uint8_t *p = data;
    while (len) {
        if (w->buf_len == GGUF_WBUF_SIZE) {
            lmq_status s = flush_buf(w);
            if (s) return s;
        }
        size_t room = GGUF_WBUF_SIZE - w->buf_len;
        size_t n = len < room ? len : room;
        memcpy(w->buf + w->buf_len, p, n);
        w->buf_len += n;
        p += n;
        len -= n;
    }
    return LMQ_OK;
}

static lmq_status put_zeros(lmq_gguf_writer *w, uint64_t n)
{
    static const uint8_t zeros[256];
    while (n) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        lmq_status s = put(w, zeros, k);
        if (s) return s;
        n -= k;
    }
    return LMQ_OK;
}

/* ---------------------------------------------------------------- open */

lmq_status lmq_gguf_writer_open(const char *path, const lmq_gguf_writer_opts *opts, lmq_gguf_writer **out)
{
    *out = NULL;
    if (!path || !*path) return lmq_error(LMQ_ERR_INVALID_ARG, "GGUF writer: empty output path");
    uint32_t a = opts ? opts->alignment : 0;
    if (a && (a > 65536 || (a & (a - 1))))
        return lmq_error(LMQ_ERR_INVALID_ARG, "%s: alignment %u is not a power of two in [1, 65536]", path, a);
    lmq_gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", path);
    w->fd = -1;
    w->opt_alignment = a;
    w->path = strdup(path);
    w->meta = lmq_meta_new();
    w->buf = malloc(GGUF_WBUF_SIZE);
    if (!w->path || !w->meta || !w->buf) {
        lmq_gguf_writer_abort(w);
        return lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", path);
    }
    lmq_status s = lmq_tmp_name(path, w->tmp, sizeof w->tmp);
    if (s) {
        w->tmp[0] = 0;
        lmq_gguf_writer_abort(w);
        return s;
    }
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        s = lmq_error(LMQ_ERR_IO, "%s: cannot create output: %s", path, strerror(errno));
        w->tmp[0] = 0;
        lmq_gguf_writer_abort(w);
        return s;
    }
    *out = w;
    return LMQ_OK;
}

lmq_meta *lmq_gguf_writer_meta(lmq_gguf_writer *w)
{
    return w->meta;
}

/* The alignment the file will use: the option, else general.alignment from
 * the metadata, else 32. */
static lmq_status resolve_alignment(lmq_gguf_writer *w, uint32_t *out)
{
    uint32_t a = w->opt_alignment;
    if (!a) {
        const lmq_value *v = lmq_meta_find(w->meta, "general.alignment");
        a = LMQ_GGUF_DEFAULT_ALIGNMENT;
        if (v) {
            uint64_t u;
            if (lmq_meta_get_u64(w->meta, "general.alignment", &u) != LMQ_OK || u == 0 || u > 65536 || (u & (u - 1)))
                return lmq_error(LMQ_ERR_INVALID_ARG, "%s: general.alignment must be a power of two in [1, 65536]", w->path);
            a = (uint32_t)u;
        }
    }
    *out = a;
    return LMQ_OK;
}

/* ---------------------------------------------------------------- declare */

lmq_status lmq_gguf_writer_declare(lmq_gguf_writer *w, const char *name, lmq_type type, uint32_t n_dims,
                                   const int64_t *ne)
{
    if (w->failed) return lmq_error(LMQ_ERR_IO, "%s: writer already failed", w->path);
    if (w->started)
        return lmq_error(LMQ_ERR_INVALID_ARG, "%s: tensor '%s' declared after tensor data started", w->path,
                         name ? name : "?");
    if (!name || !*name || strlen(name) > LMQ_MAX_NAME_LEN)
        return lmq_error(LMQ_ERR_INVALID_ARG, "%s: bad tensor name", w->path);
    const lmq_type_traits *tr = lmq_type_get(type);
    if (!tr) return lmq_error(LMQ_ERR_INVALID_ARG, "%s: tensor '%s': invalid type id %d", w->path, name, (int)type);
    if (tr->ggml_type < 0)
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: tensor '%s': type %s has no GGUF equivalent", w->path, name, tr->name);
    if (n_dims < 1 || n_dims > LMQ_MAX_DIMS || !ne)
        return lmq_error(LMQ_ERR_INVALID_ARG, "%s: tensor '%s': %u dimensions (1..%d allowed)", w->path, name, n_dims,
                         LMQ_MAX_DIMS);
    for (uint32_t d = 0; d < n_dims; d++)
        if (ne[d] < 0 || ne[d] > LMQ_MAX_DIM)
            return lmq_error(LMQ_ERR_INVALID_ARG, "%s: tensor '%s': dimension %u out of range", w->path, name, d);
    int64_t nb = lmq_tensor_nbytes(type, n_dims, ne);
    if (nb < 0)
        return lmq_error(LMQ_ERR_INVALID_ARG, "%s: tensor '%s': shape invalid for type %s", w->path, name, tr->name);
    for (size_t i = 0; i < w->n; i++)
        if (!strcmp(w->t[i].name, name)) return lmq_error(LMQ_ERR_INVALID_ARG, "%s: tensor '%s' declared twice", w->path, name);
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        gguf_wtensor *t = realloc(w->t, cap * sizeof *t);
        if (!t) return lmq_error(LMQ_ERR_NOMEM, "%s: tensor directory", w->path);
        w->t = t;
        w->cap = cap;
    }
    gguf_wtensor *e = &w->t[w->n];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    if (!e->name) return lmq_error(LMQ_ERR_NOMEM, "%s: tensor directory", w->path);
    e->n_dims = n_dims;
    for (uint32_t d = 0; d < LMQ_MAX_DIMS; d++) e->ne[d] = d < n_dims ? ne[d] : 1;
    e->ggml_type = (uint32_t)tr->ggml_type;
    e->nbytes = (uint64_t)nb;
    w->n++;
    return LMQ_OK;
}

/* ---------------------------------------------------------------- header */

/* Fixes the alignment, assigns offsets and writes header, metadata and
 * tensor infos followed by the padding before the data section. */
static lmq_status write_header(lmq_gguf_writer *w)
{
    uint32_t a = LMQ_GGUF_DEFAULT_ALIGNMENT;
    lmq_status s = resolve_alignment(w, &a);
    if (s) return s;
    if (a != LMQ_GGUF_DEFAULT_ALIGNMENT || lmq_meta_find(w->meta, "general.alignment")) {
        s = lmq_meta_set_u32(w->meta, "general.alignment", a);
        if (s) return s;
    }
    w->alignment = a;
    uint64_t off = 0;
    for (size_t i = 0; i < w->n; i++) {
        w->t[i].offset = off;
        if (off > UINT64_MAX - 2 * (uint64_t)a || w->t[i].nbytes > UINT64_MAX - 2 * (uint64_t)a - off)
            return lmq_error(LMQ_ERR_LIMIT, "%s: tensor data exceeds 2^64 bytes", w->path);
        off = align_up(off + w->t[i].nbytes, a);
    }
    w->data_size = off;

    uint8_t *kv = NULL;
    size_t kv_len = 0;
    s = lmq_meta_encode(w->meta, &kv, &kv_len);
    if (s) return s;
    lmq_buf b = {0};
    lmq_buf_put(&b, "GGUF", 4);
    lmq_buf_u32(&b, LMQ_GGUF_VERSION);
    lmq_buf_u64(&b, (uint64_t)w->n);
    lmq_buf_u64(&b, (uint64_t)lmq_meta_count(w->meta));
    lmq_buf_put(&b, kv, kv_len);
    free(kv);
    for (size_t i = 0; i < w->n; i++) {
        const gguf_wtensor *e = &w->t[i];
        lmq_buf_str(&b, e->name, strlen(e->name));
        lmq_buf_u32(&b, e->n_dims);
        for (uint32_t d = 0; d < e->n_dims; d++) lmq_buf_u64(&b, (uint64_t)e->ne[d]);
        lmq_buf_u32(&b, e->ggml_type);
        lmq_buf_u64(&b, e->offset);
    }
    if (b.oom) {
        free(b.p);
        return lmq_error(LMQ_ERR_NOMEM, "%s: GGUF header", w->path);
    }
    size_t hdr_len = b.len;
    s = put(w, b.p, b.len);
    free(b.p);
    if (!s) s = put_zeros(w, align_up(hdr_len, a) - hdr_len);
    if (s) return s;
    w->started = true;
    w->cur = 0;
    w->cur_done = 0;
    return LMQ_OK;
}

/* After a tensor's last byte: pad and move on to the next non-empty tensor. */
static lmq_status advance(lmq_gguf_writer *w)
{
    while (w->cur < w->n && w->cur_done == w->t[w->cur].nbytes) {
        uint64_t nb = w->t[w->cur].nbytes;
        lmq_status s = put_zeros(w, align_up(nb, w->alignment) - nb);
        if (s) return s;
        w->cur++;
        w->cur_done = 0;
    }
    return LMQ_OK;
}

lmq_status lmq_gguf_writer_write(lmq_gguf_writer *w, const void *data, uint64_t nbytes)
{
    if (w->failed) return lmq_error(LMQ_ERR_IO, "%s: writer already failed", w->path);
    lmq_status s;
    if (!w->started) {
        s = write_header(w);
        if (!s) s = advance(w); /* skips leading empty tensors */
        if (s) {
            w->failed = true;
            return s;
        }
    }
    if (nbytes == 0) return LMQ_OK;
    if (w->cur >= w->n)
        return lmq_error(LMQ_ERR_INVALID_ARG, "%s: %llu bytes written after the last tensor", w->path,
                         (unsigned long long)nbytes);
    const gguf_wtensor *e = &w->t[w->cur];
    if (nbytes > e->nbytes - w->cur_done)
        return lmq_error(LMQ_ERR_INVALID_ARG, "%s: tensor '%s': %llu bytes given, only %llu remain", w->path, e->name,
                         (unsigned long long)nbytes, (unsigned long long)(e->nbytes - w->cur_done));
    if (!data) return lmq_error(LMQ_ERR_INVALID_ARG, "%s: tensor '%s': null data", w->path, e->name);
    const uint8_t *p = data;
    uint64_t left = nbytes;
    while (left) {
        size_t chunk = left > (1u << 30) ? (1u << 30) : (size_t)left;
        s = put(w, p, chunk);
        if (s) return s;
        p += chunk;
        left -= chunk;
    }
    w->cur_done += nbytes;
    s = advance(w);
    if (s) w->failed = true;
    return s;
}

/* ---------------------------------------------------------------- finish */

static void free_writer(lmq_gguf_writer *w)
{
    for (size_t i = 0; i < w->n; i++) free(w->t[i].name);
    free(w->t);
    free(w->buf);
    lmq_meta_free(w->meta);
    free(w->path);
    free(w);
}

void lmq_gguf_writer_abort(lmq_gguf_writer *w)
{
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    if (w->tmp[0]) unlink(w->tmp);
    free_writer(w);
}

lmq_status lmq_gguf_writer_finish(lmq_gguf_writer *w)
{
    lmq_status s;
    if (w->failed) {
        s = lmq_error(LMQ_ERR_IO, "%s: writer failed earlier", w->path);
        goto out_abort;
    }
    if (!w->started) {
        s = lmq_gguf_writer_write(w, NULL, 0); /* header only (or all tensors empty) */
        if (s) goto out_abort;
    }
    if (w->cur < w->n) {
        s = lmq_error(LMQ_ERR_INVALID_ARG, "%s: tensor '%s': %llu of %llu bytes written", w->path, w->t[w->cur].name,
                      (unsigned long long)w->cur_done, (unsigned long long)w->t[w->cur].nbytes);
        goto out_abort;
    }
    s = flush_buf(w);
    if (s) goto out_abort;
    if (fsync(w->fd) != 0) {
        s = lmq_error(LMQ_ERR_IO, "%s: fsync failed: %s", w->path, strerror(errno));
        goto out_abort;
    }
    int fd = w->fd;
    w->fd = -1;
    if (close(fd) != 0) {
        s = lmq_error(LMQ_ERR_IO, "%s: close failed: %s", w->path, strerror(errno));
        goto out_abort;
    }
    if (rename(w->tmp, w->path) != 0) {
        s = lmq_error(LMQ_ERR_IO, "%s: rename from %s failed: %s", w->path, w->tmp, strerror(errno));
        goto out_abort;
    }
    lmq_fsync_dir_of(w->path);
    free_writer(w);
    return LMQ_OK;

out_abort:
    lmq_gguf_writer_abort(w);
    return s;
}
