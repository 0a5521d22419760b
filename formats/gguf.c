/* GGUF (v2 and v3, little-endian) reader: header, key/value metadata and the
 * tensor directory, with the same bounds discipline as the .lmq parser.
 * Spec: ggml's docs/gguf.md. Tensor data is offered as zero-copy views. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_format.h"
#include "lmq_format_internal.h"

#define GGUF_DEFAULT_ALIGNMENT 32u

lmq_status lmq_gguf_parse(lmq_file *f)
{
    f->kind = LMQ_FILE_GGUF;
    lmq_cursor c = {f->map, f->size, 4, false};
    uint32_t version = lmq_cur_u32(&c);
    uint64_t n_tensors = lmq_cur_u64(&c);
    uint64_t n_kv = lmq_cur_u64(&c);
    if (c.bad) return lmq_error(LMQ_ERR_FORMAT, "%s: truncated GGUF header", f->path);
    f->version = version;
    if (version == 1 || version > 0xffff)
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: GGUF version %u is not supported (v2 and v3 little-endian are)", f->path, version);
    if (version != 2 && version != 3)
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: unknown GGUF version %u", f->path, version);
    f->meta = lmq_meta_new();
    if (!f->meta) return lmq_error(LMQ_ERR_NOMEM, "%s: metadata", f->path);
    size_t used = 0;
    lmq_status s = lmq_meta_decode(f->map + c.pos, f->size - c.pos, n_kv, f->meta, &used);
    if (s) return lmq_error_prefix(s, "%s", f->path);
    c.pos += used;
    uint32_t alignment = GGUF_DEFAULT_ALIGNMENT;
    const lmq_value *av = lmq_meta_find(f->meta, "general.alignment");
    if (av) {
        if ((av->type != LMQ_V_U32 && av->type != LMQ_V_U64 && av->type != LMQ_V_I32) || av->u == 0 ||
            av->u > 65536 || (av->u & (av->u - 1)))
            return lmq_error(LMQ_ERR_FORMAT, "%s: general.alignment must be a power of two", f->path);
        alignment = (uint32_t)av->u;
    }
    /* each tensor info is at least 8+1 + 4 + 8 + 4 + 8 bytes */
    if (n_tensors > (f->size - c.pos) / 33)
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
        uint64_t name_len = lmq_cur_u64(&c);
        if (c.bad || name_len == 0 || name_len > LMQ_MAX_NAME_LEN || name_len > c.len - c.pos) {
            s = lmq_error(LMQ_ERR_FORMAT, "%s: tensor %zu: bad name length", f->path, i);
            goto out;
        }
        f->names[i] = strndup((const char *)c.p + c.pos, (size_t)name_len);
        if (!f->names[i]) { s = lmq_error(LMQ_ERR_NOMEM, "%s: tensor names", f->path); goto out; }
        f->n_tensors = i + 1;
        c.pos += (size_t)name_len;
        t->name = f->names[i];
        t->n_dims = lmq_cur_u32(&c);
        if (c.bad || t->n_dims < 1 || t->n_dims > LMQ_MAX_DIMS) {
            s = lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': %u dimensions (1..%d allowed)", f->path, t->name, t->n_dims, LMQ_MAX_DIMS);
            goto out;
        }
        for (uint32_t d = 0; d < LMQ_MAX_DIMS; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            t->ne[d] = (int64_t)lmq_cur_u64(&c);
            if (t->ne[d] < 0 || t->ne[d] > LMQ_MAX_DIM) {
                s = lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': dimension %u out of range", f->path, t->name, d);
                goto out;
            }
        }
        uint32_t gtype = lmq_cur_u32(&c);
        offsets[i] = lmq_cur_u64(&c);
        if (c.bad) { s = lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': truncated tensor info", f->path, t->name); goto out; }
        lmq_type lt;
        if (lmq_type_from_ggml(gtype, &lt) != LMQ_OK) {
            s = lmq_error(LMQ_ERR_UNSUPPORTED, "%s: tensor '%s': ggml type %u is not supported by lmq", f->path, t->name, gtype);
            goto out;
        }
        t->type = lt;
        int64_t nb = lmq_tensor_nbytes(lt, t->n_dims, t->ne);
        if (nb < 0) {
            s = lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': shape invalid for type %s", f->path, t->name, lmq_type_name(lt));
            goto out;
        }
        t->nbytes = t->stored_bytes = (uint64_t)nb;
        t->codec = LMQ_CODEC_NONE;
        t->has_checksum = false;
        s = lmq_file_index_name(f, i);
        if (s) goto out;
    }
    uint64_t data_start = ((uint64_t)c.pos + alignment - 1) / alignment * alignment;
    if (data_start > f->size && n > 0) {
        s = lmq_error(LMQ_ERR_FORMAT, "%s: truncated before the tensor data", f->path);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        lmq_tensor_info *t = &f->tensors[i];
        if (offsets[i] % alignment || offsets[i] > f->size - data_start ||
            t->nbytes > f->size - data_start - offsets[i]) {
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
