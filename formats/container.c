/* The .lmq container: parser and streaming writer. Layout (docs/FORMAT.md):
 *
 *   [0,128)        header: magic "LMQF", version, endianness marker, counts,
 *                  offsets of the data and index sections, alignment, and an
 *                  XXH3-64 over the header and the whole index section
 *   [128, ...)     tensor data, each tensor at a multiple of `alignment`
 *   [index_off,+)  index: GGUF-encoded key/value metadata, then the tensor
 *                  directory (name, dims, type, codec, offset, sizes, XXH3-64)
 *
 * The index sits after the data so that the writer streams tensors to disk
 * one at a time and fills in the header last. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include "lmq_format.h"
#include "lmq_format_internal.h"

#define LMQ_MAGIC "LMQF"
#define LMQ_FORMAT_VERSION 1u
#define LMQ_ENDIAN_MARK 0x01020304u
#define LMQ_HEADER_SIZE 128u
#define LMQ_ALIGNMENT 64u
#define LMQ_HDR_CKSUM_OFF 72u /* the checksum field; the whole header (field zeroed) + index are hashed */

typedef struct lmq_header {
    uint32_t version, endian, flags, alignment;
    uint64_t n_kv, n_tensors;
    uint64_t data_offset, data_size;
    uint64_t index_offset, index_size;
    uint64_t checksum;
} lmq_header;

static void header_encode(const lmq_header *h, uint8_t out[LMQ_HEADER_SIZE])
{
    lmq_buf b = {0};
    lmq_buf_put(&b, LMQ_MAGIC, 4);
    lmq_buf_u32(&b, h->version);
    lmq_buf_u32(&b, h->endian);
    lmq_buf_u32(&b, h->flags);
    lmq_buf_u32(&b, h->alignment);
    lmq_buf_u32(&b, 0); /* reserved */
    lmq_buf_u64(&b, h->n_kv);
    lmq_buf_u64(&b, h->n_tensors);
    lmq_buf_u64(&b, h->data_offset);
    lmq_buf_u64(&b, h->data_size);
    lmq_buf_u64(&b, h->index_offset);
    lmq_buf_u64(&b, h->index_size);
    lmq_buf_u64(&b, h->checksum); /* at LMQ_HDR_CKSUM_OFF */
    memset(out, 0, LMQ_HEADER_SIZE);
    if (b.p) memcpy(out, b.p, b.len < LMQ_HEADER_SIZE ? b.len : LMQ_HEADER_SIZE);
    free(b.p);
}

static uint64_t header_checksum(const uint8_t *hdr, const uint8_t *index, size_t index_len)
{
    XXH3_state_t *st = XXH3_createState();
    if (!st) return 0;
    XXH3_64bits_reset(st);
    uint8_t h0[LMQ_HEADER_SIZE];
    memcpy(h0, hdr, LMQ_HEADER_SIZE);
    memset(h0 + LMQ_HDR_CKSUM_OFF, 0, 8); /* the checksum field itself hashes as zero */
    XXH3_64bits_update(st, h0, LMQ_HEADER_SIZE);
    XXH3_64bits_update(st, index, index_len);
    uint64_t h = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return h;
}

/* ================================================================ parser */

static lmq_status parse_directory(lmq_file *f, lmq_cursor *c, const lmq_header *h)
{
    /* each entry is at least 8+1 (name) + 4 + 8 + 4+4 + 4*8 bytes */
    if (h->n_tensors > (c->len - c->pos) / 61)
        return lmq_error(LMQ_ERR_FORMAT, "%s: %llu tensors cannot fit in the index", f->path, (unsigned long long)h->n_tensors);
    size_t n = (size_t)h->n_tensors;
    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    f->names = calloc(n ? n : 1, sizeof(char *));
    f->owned_data = calloc(n ? n : 1, sizeof(void *));
    if (!f->tensors || !f->names || !f->owned_data) return lmq_error(LMQ_ERR_NOMEM, "%s: tensor directory", f->path);
    for (size_t i = 0; i < n; i++) {
        lmq_tensor_info *t = &f->tensors[i];
        uint64_t name_len = lmq_cur_u64(c);
        if (c->bad || name_len == 0 || name_len > LMQ_MAX_NAME_LEN || name_len > c->len - c->pos)
            return lmq_error(LMQ_ERR_FORMAT, "%s: tensor %zu: bad name length", f->path, i);
        f->names[i] = strndup((const char *)c->p + c->pos, (size_t)name_len);
        if (!f->names[i]) return lmq_error(LMQ_ERR_NOMEM, "%s: tensor names", f->path);
        f->n_tensors = i + 1; /* from here lmq_file_close frees names[i] */
        if (strlen(f->names[i]) != name_len) return lmq_error(LMQ_ERR_FORMAT, "%s: tensor %zu: name contains a NUL byte", f->path, i);
        c->pos += (size_t)name_len;
        t->name = f->names[i];
        t->n_dims = lmq_cur_u32(c);
        if (c->bad || t->n_dims < 1 || t->n_dims > LMQ_MAX_DIMS)
            return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': %u dimensions (1..%d allowed)", f->path, t->name, t->n_dims, LMQ_MAX_DIMS);
        for (uint32_t d = 0; d < LMQ_MAX_DIMS; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            t->ne[d] = (int64_t)lmq_cur_u64(c);
            if (t->ne[d] < 0 || t->ne[d] > LMQ_MAX_DIM)
                return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': dimension %u is out of range", f->path, t->name, d);
        }
        uint32_t type = lmq_cur_u32(c), codec = lmq_cur_u32(c);
        uint64_t offset = lmq_cur_u64(c);
        t->stored_bytes = lmq_cur_u64(c);
        t->nbytes = lmq_cur_u64(c);
        t->checksum = lmq_cur_u64(c);
        t->has_checksum = true;
        if (c->bad) return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': truncated directory entry", f->path, t->name);
        if (type >= LMQ_TYPE_COUNT)
            return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: tensor '%s': unknown type id %u", f->path, t->name, type);
        if (codec >= LMQ_CODEC_COUNT)
            return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: tensor '%s': unknown codec %u", f->path, t->name, codec);
        t->type = (lmq_type)type;
        t->codec = (lmq_codec)codec;
        int64_t want = lmq_tensor_nbytes(t->type, t->n_dims, t->ne);
        if (want < 0 || (uint64_t)want != t->nbytes)
            return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': size %llu does not match its %s shape", f->path, t->name,
                             (unsigned long long)t->nbytes, lmq_type_name(t->type));
        if (t->codec == LMQ_CODEC_NONE && t->stored_bytes != t->nbytes)
            return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': stored size differs from its size", f->path, t->name);
        if (t->codec == LMQ_CODEC_ZSTD && t->nbytes / LMQ_MAX_ZSTD_RATIO > t->stored_bytes)
            return lmq_error(LMQ_ERR_LIMIT, "%s: tensor '%s': %llu bytes compressed into %llu exceeds the ratio limit %u",
                             f->path, t->name, (unsigned long long)t->nbytes, (unsigned long long)t->stored_bytes,
                             LMQ_MAX_ZSTD_RATIO);
        if (offset % h->alignment || offset > h->data_size || t->stored_bytes > h->data_size - offset)
            return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': data [%llu,+%llu) outside the data section", f->path, t->name,
                             (unsigned long long)offset, (unsigned long long)t->stored_bytes);
        t->file_offset = h->data_offset + offset;
        lmq_status s = lmq_file_index_name(f, i);
        if (s) return s;
    }
    return LMQ_OK;
}

_Thread_local uint64_t lmq_work_zstd_bytes;

static lmq_status decode_tensors(lmq_file *f)
{
    for (size_t i = 0; i < f->n_tensors; i++) {
        lmq_tensor_info *t = &f->tensors[i];
        const uint8_t *src = f->map + t->file_offset;
        if (t->codec == LMQ_CODEC_NONE) {
            t->data = src;
            continue;
        }
        /* zstd: the frame must declare exactly the tensor's size */
        if (lmq_hash64(src, (size_t)t->stored_bytes) != t->checksum)
            return lmq_error(LMQ_ERR_CHECKSUM, "%s: tensor '%s': checksum mismatch in compressed data", f->path, t->name);
        unsigned long long fs = ZSTD_getFrameContentSize(src, (size_t)t->stored_bytes);
        if (fs != t->nbytes)
            return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': zstd frame size does not match", f->path, t->name);
        size_t cap = ((size_t)t->nbytes + 63) & ~(size_t)63;
        void *dst = aligned_alloc(64, cap ? cap : 64);
        if (!dst) return lmq_error(LMQ_ERR_NOMEM, "%s: tensor '%s': %llu bytes", f->path, t->name, (unsigned long long)t->nbytes);
        f->owned_data[i] = dst;
        size_t got = ZSTD_decompress(dst, (size_t)t->nbytes, src, (size_t)t->stored_bytes);
        if (!ZSTD_isError(got)) lmq_work_zstd_bytes += got;
        if (ZSTD_isError(got) || got != t->nbytes)
            return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': zstd data is corrupt", f->path, t->name);
        t->data = dst;
    }
    return LMQ_OK;
}

lmq_status lmq_lmq_parse(lmq_file *f)
{
    f->kind = LMQ_FILE_LMQ;
    if (f->size < LMQ_HEADER_SIZE)
        return lmq_error(LMQ_ERR_FORMAT, "%s: truncated header (%zu bytes)", f->path, f->size);
    lmq_cursor c = {f->map, LMQ_HEADER_SIZE, 4, false};
    lmq_header h;
    h.version = lmq_cur_u32(&c);
    h.endian = lmq_cur_u32(&c);
    h.flags = lmq_cur_u32(&c);
    h.alignment = lmq_cur_u32(&c);
    (void)lmq_cur_u32(&c);
    h.n_kv = lmq_cur_u64(&c);
    h.n_tensors = lmq_cur_u64(&c);
    h.data_offset = lmq_cur_u64(&c);
    h.data_size = lmq_cur_u64(&c);
    h.index_offset = lmq_cur_u64(&c);
    h.index_size = lmq_cur_u64(&c);
    h.checksum = lmq_cur_u64(&c);
    f->version = h.version;
    if (h.endian != LMQ_ENDIAN_MARK)
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: byte order marker 0x%08x: not a little-endian container", f->path, h.endian);
    if (h.version != LMQ_FORMAT_VERSION)
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: container version %u (this lmq reads version %u)", f->path, h.version, LMQ_FORMAT_VERSION);
    if (h.alignment < 8 || h.alignment > 65536 || (h.alignment & (h.alignment - 1)))
        return lmq_error(LMQ_ERR_FORMAT, "%s: bad alignment %u", f->path, h.alignment);
    if (h.data_offset < LMQ_HEADER_SIZE || h.data_offset % h.alignment || h.data_offset > f->size ||
        h.data_size > f->size - h.data_offset)
        return lmq_error(LMQ_ERR_FORMAT, "%s: data section [%llu,+%llu) is outside the file (%zu bytes): truncated?", f->path,
                         (unsigned long long)h.data_offset, (unsigned long long)h.data_size, f->size);
    if (h.index_offset < h.data_offset + h.data_size || h.index_offset > f->size ||
        h.index_size > f->size - h.index_offset)
        return lmq_error(LMQ_ERR_FORMAT, "%s: index section [%llu,+%llu) is outside the file (%zu bytes): truncated?", f->path,
                         (unsigned long long)h.index_offset, (unsigned long long)h.index_size, f->size);
    const uint8_t *index = f->map + h.index_offset;
    uint64_t ck = header_checksum(f->map, index, (size_t)h.index_size);
    if (ck != h.checksum)
        return lmq_error(LMQ_ERR_CHECKSUM, "%s: header/metadata checksum mismatch (file corrupted)", f->path);
    f->id = ck;
    f->meta = lmq_meta_new();
    if (!f->meta) return lmq_error(LMQ_ERR_NOMEM, "%s: metadata", f->path);
    size_t used = 0;
    lmq_status s = lmq_meta_decode(index, (size_t)h.index_size, h.n_kv, f->meta, &used);
    if (s) return lmq_error_prefix(s, "%s", f->path);
    lmq_cursor dc = {index, (size_t)h.index_size, used, false};
    s = parse_directory(f, &dc, &h);
    if (s) return s;
    if (dc.pos != dc.len)
        return lmq_error(LMQ_ERR_FORMAT, "%s: %zu unexpected bytes after the tensor directory", f->path, dc.len - dc.pos);
    return decode_tensors(f);
}

/* ================================================================ writer */

typedef struct dir_entry {
    char *name;
    uint32_t n_dims;
    int64_t ne[LMQ_MAX_DIMS];
    uint32_t type, codec;
    uint64_t offset, stored, nbytes, checksum;
} dir_entry;

struct lmq_writer {
    char *path;
    char tmp[4096];
    int fd;
    uint64_t pos; /* bytes written so far (file offset) */
    lmq_writer_opts opts;
    lmq_meta *meta;
    dir_entry *dir;
    size_t n, cap;
    lmq_strindex name_ix; /* dir[].name -> position */
    bool failed;
};

static const char *dir_name_at(const void *owner, size_t i)
{
    return ((const lmq_writer *)owner)->dir[i].name;
}

static lmq_status write_all(lmq_writer *w, const void *data, size_t len)
{
    const uint8_t *p = data;
    while (len) {
        size_t chunk = len > (1u << 30) ? (1u << 30) : len;
        ssize_t r = write(w->fd, p, chunk);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            w->failed = true;
            return lmq_error(LMQ_ERR_IO, "%s: write failed: %s", w->path, r < 0 ? strerror(errno) : "short write");
        }
        p += r;
        len -= (size_t)r;
        w->pos += (uint64_t)r;
    }
    return LMQ_OK;
}

static lmq_status pad_to(lmq_writer *w, uint64_t align)
{
    static const uint8_t zeros[LMQ_ALIGNMENT > 128 ? LMQ_ALIGNMENT : 128];
    uint64_t pad = (align - w->pos % align) % align;
    return pad ? write_all(w, zeros, (size_t)pad) : LMQ_OK;
}

lmq_status lmq_writer_open(const char *path, const lmq_writer_opts *opts, lmq_writer **out)
{
    *out = NULL;
    lmq_writer *w = calloc(1, sizeof *w);
    if (!w) return lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", path);
    w->fd = -1;
    w->path = strdup(path);
    w->meta = lmq_meta_new();
    if (opts) w->opts = *opts;
    if (!w->path || !w->meta) {
        lmq_writer_abort(w);
        return lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", path);
    }
    lmq_status s = lmq_tmp_name(path, w->tmp, sizeof w->tmp);
    if (s) {
        lmq_writer_abort(w);
        return s;
    }
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        s = lmq_error(LMQ_ERR_IO, "%s: cannot create output: %s", path, strerror(errno));
        w->tmp[0] = 0;
        lmq_writer_abort(w);
        return s;
    }
    uint8_t hdr[LMQ_HEADER_SIZE] = {0};
    s = write_all(w, hdr, sizeof hdr);
    if (!s) s = pad_to(w, LMQ_ALIGNMENT);
    if (s) {
        lmq_writer_abort(w);
        return s;
    }
    *out = w;
    return LMQ_OK;
}

lmq_meta *lmq_writer_meta(lmq_writer *w)
{
    return w->meta;
}

lmq_status lmq_writer_add_tensor(lmq_writer *w, const char *name, lmq_type type, uint32_t n_dims,
                                 const int64_t *ne, const void *data, uint64_t nbytes)
{
    if (w->failed) return lmq_error(LMQ_ERR_IO, "%s: writer already failed", w->path);
    if (!name || !*name || strlen(name) > LMQ_MAX_NAME_LEN)
        return lmq_error(LMQ_ERR_INVALID_ARG, "%s: bad tensor name", w->path);
    int64_t want = lmq_tensor_nbytes(type, n_dims, ne);
    if (want < 0 || (uint64_t)want != nbytes)
        return lmq_error(LMQ_ERR_INVALID_ARG, "%s: tensor '%s': %llu bytes do not match its %s shape", w->path, name,
                         (unsigned long long)nbytes, lmq_type_name(type));
    if (lmq_strindex_find(&w->name_ix, name, dir_name_at, w) != SIZE_MAX)
        return lmq_error(LMQ_ERR_INVALID_ARG, "%s: tensor '%s' written twice", w->path, name);
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        dir_entry *d = realloc(w->dir, cap * sizeof *d);
        if (!d) return lmq_error(LMQ_ERR_NOMEM, "%s: directory", w->path);
        w->dir = d;
        w->cap = cap;
    }
    lmq_status s = pad_to(w, LMQ_ALIGNMENT);
    if (s) return s;
    dir_entry e;
    memset(&e, 0, sizeof e);
    e.n_dims = n_dims;
    for (uint32_t i = 0; i < LMQ_MAX_DIMS; i++) e.ne[i] = i < n_dims ? ne[i] : 1;
    e.type = (uint32_t)type;
    e.nbytes = nbytes;
    e.offset = w->pos - LMQ_HEADER_SIZE;
    const void *out = data;
    size_t out_len = (size_t)nbytes;
    void *zbuf = NULL;
    if (w->opts.codec == LMQ_CODEC_ZSTD && nbytes > 0) {
        size_t bound = ZSTD_compressBound((size_t)nbytes);
        zbuf = malloc(bound);
        if (!zbuf) return lmq_error(LMQ_ERR_NOMEM, "%s: tensor '%s': compression buffer", w->path, name);
        size_t z = ZSTD_compress(zbuf, bound, data, (size_t)nbytes, w->opts.zstd_level ? w->opts.zstd_level : 3);
        if (!ZSTD_isError(z) && z < nbytes && nbytes / LMQ_MAX_ZSTD_RATIO <= z) {
            out = zbuf;
            out_len = z;
            e.codec = LMQ_CODEC_ZSTD;
        }
    }
    e.stored = out_len;
    e.checksum = lmq_hash64(out, out_len);
    s = write_all(w, out, out_len);
    free(zbuf);
    if (s) return s;
    e.name = strdup(name);
    if (!e.name) return lmq_error(LMQ_ERR_NOMEM, "%s: directory", w->path);
    w->dir[w->n] = e;
    s = lmq_strindex_add(&w->name_ix, w->n, dir_name_at, w, NULL);
    if (s) {
        free(e.name);
        return s;
    }
    w->n++;
    return LMQ_OK;
}

static void free_writer(lmq_writer *w)
{
    for (size_t i = 0; i < w->n; i++) free(w->dir[i].name);
    free(w->dir);
    lmq_strindex_clear(&w->name_ix);
    lmq_meta_free(w->meta);
    free(w->path);
    free(w);
}

void lmq_writer_abort(lmq_writer *w)
{
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    if (w->tmp[0]) unlink(w->tmp);
    free_writer(w);
}

lmq_status lmq_writer_finish(lmq_writer *w)
{
    lmq_status s = LMQ_OK;
    uint8_t *kvbuf = NULL;
    size_t kvlen = 0;
    lmq_buf idx = {0};
    if (w->failed) {
        s = lmq_error(LMQ_ERR_IO, "%s: writer failed earlier", w->path);
        goto out_abort;
    }
    s = pad_to(w, LMQ_ALIGNMENT);
    if (s) goto out_abort;
    lmq_header h = {0};
    h.version = LMQ_FORMAT_VERSION;
    h.endian = LMQ_ENDIAN_MARK;
    h.alignment = LMQ_ALIGNMENT;
    h.n_kv = lmq_meta_count(w->meta);
    h.n_tensors = w->n;
    h.data_offset = LMQ_HEADER_SIZE;
    h.data_size = w->pos - LMQ_HEADER_SIZE;
    h.index_offset = w->pos;
    s = lmq_meta_encode(w->meta, &kvbuf, &kvlen);
    if (s) goto out_abort;
    lmq_buf_put(&idx, kvbuf, kvlen);
    for (size_t i = 0; i < w->n; i++) {
        const dir_entry *e = &w->dir[i];
        lmq_buf_str(&idx, e->name, strlen(e->name));
        lmq_buf_u32(&idx, e->n_dims);
        for (uint32_t d = 0; d < e->n_dims; d++) lmq_buf_u64(&idx, (uint64_t)e->ne[d]);
        lmq_buf_u32(&idx, e->type);
        lmq_buf_u32(&idx, e->codec);
        lmq_buf_u64(&idx, e->offset);
        lmq_buf_u64(&idx, e->stored);
        lmq_buf_u64(&idx, e->nbytes);
        lmq_buf_u64(&idx, e->checksum);
    }
    if (idx.oom) {
        s = lmq_error(LMQ_ERR_NOMEM, "%s: index", w->path);
        goto out_abort;
    }
    h.index_size = idx.len;
    s = write_all(w, idx.p, idx.len);
    if (s) goto out_abort;
    uint8_t hdr[LMQ_HEADER_SIZE];
    header_encode(&h, hdr);
    h.checksum = header_checksum(hdr, idx.p, idx.len);
    header_encode(&h, hdr);
    if (pwrite(w->fd, hdr, sizeof hdr, 0) != (ssize_t)sizeof hdr) {
        s = lmq_error(LMQ_ERR_IO, "%s: header write failed: %s", w->path, strerror(errno));
        goto out_abort;
    }
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
    free(kvbuf);
    free(idx.p);
    free_writer(w);
    return LMQ_OK;

out_abort:
    free(kvbuf);
    free(idx.p);
    lmq_writer_abort(w);
    return s;
}
