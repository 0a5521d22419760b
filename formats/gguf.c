/* GGUF (v2 and v3, little-endian) reader: header, key/value metadata and the
 * tensor directory, with the same bounds discipline as the .lmq parser.
 * Spec: ggml's docs/gguf.md. Tensor data is offered as zero-copy views.
 *
 * What it accepts follows ggml's own reader (gguf.cpp): a file ggml reads and
 * can compute with is read here too, unless a size in it is unsafe to act on;
 * docs/GGUF.md ("What the GGUF reader accepts") lists where the two differ. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_format.h"
#include "lmq_format_internal.h"

#define GGUF_DEFAULT_ALIGNMENT 32u
/* the smallest tensor info: name length (8, empty name), n_dims (4, no
 * extents), type (4), offset (8) */
#define GGUF_MIN_TENSOR_INFO 24u

/* general.alignment: a power of two. ggml reads it as a u32 (another type
 * stops it on an assertion); lmq also takes u64 and i32 values. */
static lmq_status read_alignment(const lmq_file *f, uint32_t *out)
{
    *out = GGUF_DEFAULT_ALIGNMENT;
    const lmq_value *av = lmq_meta_find(f->meta, "general.alignment");
    if (!av) return LMQ_OK;
    uint64_t a;
    if (av->type == LMQ_V_U32 || av->type == LMQ_V_U64) a = av->u;
    else if (av->type == LMQ_V_I32) a = av->i > 0 ? (uint64_t)av->i : 0;
    else
        return lmq_error(LMQ_ERR_FORMAT, "%s: general.alignment has value type %s (u32 expected)", f->path,
                         lmq_vtype_name(av->type));
    if (a == 0 || a > ((uint64_t)1 << 31) || (a & (a - 1)))
        return lmq_error(LMQ_ERR_FORMAT, "%s: general.alignment = %llu is not a power of two in [1, 2^31]", f->path,
                         av->type == LMQ_V_I32 ? (unsigned long long)av->i : (unsigned long long)av->u);
    *out = (uint32_t)a;
    return LMQ_OK;
}

/* Shape and type of tensor t, whose n_dims and name are read: the extents,
 * each in [0, 2^40] and their product (zeros aside: row counts are formed
 * from any of them) below 2^63 elements, then the type, whose block size must
 * divide ne[0], and the byte size. A 0-dimension tensor is one element, every
 * extent 1 (ggml's rule); lmq's view of it is 1-D, ne[0] = 1. */
static lmq_status read_shape(const lmq_file *f, lmq_cursor *c, lmq_tensor_info *t, uint64_t *offset)
{
    const uint32_t n_dims = t->n_dims;
    for (uint32_t d = 0; d < LMQ_MAX_DIMS; d++) t->ne[d] = 1;
    int64_t n_elems = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        t->ne[d] = (int64_t)lmq_cur_u64(c);
        if (t->ne[d] < 0 || t->ne[d] > LMQ_MAX_DIM)
            return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': ne[%u] = %lld is out of range (0..2^40)", f->path,
                             t->name, d, (long long)t->ne[d]);
        if (t->ne[d] > 1 && n_elems > INT64_MAX / t->ne[d])
            return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': ne[0..%u] multiply to 2^63 or more (zero extents aside)",
                             f->path, t->name, d);
        if (t->ne[d] > 1) n_elems *= t->ne[d];
    }
    if (n_dims == 0) t->n_dims = 1;
    uint32_t gtype = lmq_cur_u32(c);
    *offset = lmq_cur_u64(c);
    if (c->bad) return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': truncated tensor info", f->path, t->name);
    if (lmq_type_from_ggml(gtype, &t->type) != LMQ_OK)
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: tensor '%s': ggml type %u is not supported by lmq", f->path,
                         t->name, gtype);
    const lmq_type_traits *tt = lmq_type_get(t->type);
    if (t->ne[0] % tt->block_size)
        return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': type %s: ne[0] = %lld%s is not a multiple of its block size %d",
                         f->path, t->name, tt->name, (long long)t->ne[0],
                         n_dims == 0 ? " (a 0-dimension tensor is one element)" : "", (int)tt->block_size);
    int64_t nb = lmq_tensor_nbytes(t->type, t->n_dims, t->ne);
    if (nb < 0)
        return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': %s data of shape [%lld, %lld, %lld, %lld] exceeds 2^63 bytes",
                         f->path, t->name, tt->name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                         (long long)t->ne[3]);
    t->nbytes = t->stored_bytes = (uint64_t)nb;
    t->codec = LMQ_CODEC_NONE;
    t->has_checksum = false;
    return LMQ_OK;
}

lmq_status lmq_gguf_parse(lmq_file *f)
{
    f->kind = LMQ_FILE_GGUF;
    lmq_cursor c = {f->map, f->size, 4, false};
    uint32_t version = lmq_cur_u32(&c);
    uint64_t n_tensors = lmq_cur_u64(&c);
    uint64_t n_kv = lmq_cur_u64(&c);
    if (c.bad) return lmq_error(LMQ_ERR_FORMAT, "%s: truncated GGUF header", f->path);
    f->version = version;
    /* ggml refuses 1 (32-bit counts) and anything above 3; 0 it reads as 2 and 3 */
    if (version == 1 || version > 0xffff)
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: GGUF version %u is not supported (v2 and v3 little-endian are)", f->path, version);
    if (version > 3)
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: unknown GGUF version %u", f->path, version);
    f->meta = lmq_meta_new();
    if (!f->meta) return lmq_error(LMQ_ERR_NOMEM, "%s: metadata", f->path);
    size_t used = 0;
    lmq_status s = lmq_meta_decode(f->map + c.pos, f->size - c.pos, n_kv, f->meta, &used);
    if (s) return lmq_error_prefix(s, "%s", f->path);
    c.pos += used;
    uint32_t alignment;
    if ((s = read_alignment(f, &alignment))) return s;
    if (n_tensors > (f->size - c.pos) / GGUF_MIN_TENSOR_INFO)
        return lmq_error(LMQ_ERR_FORMAT, "%s: %llu tensors cannot fit in the file", f->path, (unsigned long long)n_tensors);
    size_t n = (size_t)n_tensors;
    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    f->names = calloc(n ? n : 1, sizeof(char *));
    f->owned_data = calloc(n ? n : 1, sizeof(void *));
    if (!f->tensors || !f->names || !f->owned_data) return lmq_error(LMQ_ERR_NOMEM, "%s: tensor directory", f->path);
    uint64_t *offsets = calloc(n ? n : 1, sizeof(uint64_t));
    if (!offsets) return lmq_error(LMQ_ERR_NOMEM, "%s: tensor directory", f->path);
    for (size_t i = 0; i < n; i++) {
        lmq_tensor_info *t = &f->tensors[i];
        /* ggml allows names of 0..63 bytes (lmq: up to 4096); both read a name up to its first NUL */
        uint64_t name_len = lmq_cur_u64(&c);
        if (c.bad || name_len > LMQ_MAX_NAME_LEN || name_len > c.len - c.pos) {
            s = lmq_error(LMQ_ERR_FORMAT, "%s: tensor %zu: name length %llu (at most %u bytes, within the file)",
                          f->path, i, (unsigned long long)name_len, LMQ_MAX_NAME_LEN);
            goto out;
        }
        f->names[i] = strndup((const char *)c.p + c.pos, (size_t)name_len);
        if (!f->names[i]) { s = lmq_error(LMQ_ERR_NOMEM, "%s: tensor names", f->path); goto out; }
        f->n_tensors = i + 1;
        c.pos += (size_t)name_len;
        t->name = f->names[i];
        t->n_dims = lmq_cur_u32(&c);
        if (c.bad || t->n_dims > LMQ_MAX_DIMS) {
            s = c.bad ? lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': truncated tensor info", f->path, t->name)
                      : lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': n_dims = %u (0..%d allowed)", f->path, t->name,
                                  t->n_dims, LMQ_MAX_DIMS);
            goto out;
        }
        if ((s = read_shape(f, &c, t, &offsets[i]))) goto out;
        if ((s = lmq_file_index_name(f, i))) goto out;
    }
    uint64_t data_start = ((uint64_t)c.pos + alignment - 1) / alignment * alignment;
    if (data_start > f->size && n > 0) {
        s = lmq_error(LMQ_ERR_FORMAT, "%s: truncated before the tensor data", f->path);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        lmq_tensor_info *t = &f->tensors[i];
        if (offsets[i] % alignment) {
            s = lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': offset %llu is not a multiple of general.alignment %u",
                          f->path, t->name, (unsigned long long)offsets[i], alignment);
            goto out;
        }
        if (offsets[i] > f->size - data_start || t->nbytes > f->size - data_start - offsets[i]) {
            s = lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': data [%llu,+%llu) lies outside the file (truncated?)", f->path,
                          t->name, (unsigned long long)(data_start + offsets[i]), (unsigned long long)t->nbytes);
            goto out;
        }
        t->file_offset = data_start + offsets[i];
        t->data = f->map + t->file_offset;
    }
    f->id = lmq_hash64(f->map, (size_t)(data_start < f->size ? data_start : f->size));
    s = LMQ_OK;
out:
    free(offsets);
    return s;
}
