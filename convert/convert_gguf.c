/* GGUF -> .lmq: a bit-for-bit copy of a llama.cpp model file into an .lmq
 * container. lmq uses GGUF's key names and ggml's block layouts, so the
 * metadata is kept as it is and tensors are copied unchanged; the container
 * adds per-tensor checksums, the RoPE layout marker and provenance keys. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "lmq_convert.h"

bool lmq_path_is_gguf(const char *path)
{
    struct stat st;
    if (!path || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return false;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char magic[4];
    ssize_t r = read(fd, magic, sizeof magic);
    close(fd);
    return r == 4 && !memcmp(magic, "GGUF", 4);
}

/* XXH3-64 of a whole file, read in chunks. */
static lmq_status hash_file(const char *path, uint64_t *out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return lmq_error(LMQ_ERR_IO, "%s: %s", path, strerror(errno));
    XXH3_state_t *st = XXH3_createState();
    size_t cap = 1u << 20;
    uint8_t *buf = malloc(cap);
    lmq_status s = LMQ_OK;
    if (!st || !buf) {
        s = lmq_error(LMQ_ERR_NOMEM, "%s: hashing buffer", path);
        goto out;
    }
    XXH3_64bits_reset(st);
    for (;;) {
        ssize_t r = read(fd, buf, cap);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            s = lmq_error(LMQ_ERR_IO, "%s: read failed: %s", path, strerror(errno));
            goto out;
        }
        if (r == 0) break;
        XXH3_64bits_update(st, buf, (size_t)r);
    }
    *out = XXH3_64bits_digest(st);
out:
    free(buf);
    XXH3_freeState(st);
    close(fd);
    return s;
}

/* UTC time of the conversion; SOURCE_DATE_EPOCH (reproducible builds) wins. */
static void utc_now(char *out, size_t cap)
{
    time_t t = time(NULL);
    const char *sde = getenv("SOURCE_DATE_EPOCH");
    if (sde && *sde) {
        char *end;
        long long v = strtoll(sde, &end, 10);
        if (!*end && v >= 0) t = (time_t)v;
    }
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* Checks what lmq can run before anything is written. */
static lmq_status check_model(const lmq_file *f, const char *path)
{
    const char *arch;
    lmq_status s = lmq_meta_get_str(lmq_file_meta(f), "general.architecture", &arch, NULL);
    if (s == LMQ_ERR_NOT_FOUND)
        return lmq_error(LMQ_ERR_FORMAT, "%s: no general.architecture key: not a model file", path);
    if (s) return lmq_error(s, "%s: general.architecture is not a string", path);
    if (!lmq_arch_by_name(arch))
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: architecture '%.64s' is not supported (lmq runs %s)", path, arch,
                         lmq_arch_names());
    if (lmq_file_n_tensors(f) == 0)
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: no tensors (a vocab-only GGUF?)", path);
    /* GGUF (and ggml) allow an empty tensor name; a container does not */
    for (size_t i = 0; i < lmq_file_n_tensors(f); i++)
        if (!lmq_file_tensor(f, i)->name[0])
            return lmq_error(LMQ_ERR_UNSUPPORTED,
                             "%s: tensor %zu has an empty name, which an .lmq container cannot hold", path, i);
    return LMQ_OK;
}

static lmq_status add_provenance(lmq_meta *m, const char *gguf_path, const lmq_arch *a)
{
    uint64_t h = 0;
    lmq_status s = hash_file(gguf_path, &h);
    if (s) return s;
    char when[32];
    utc_now(when, sizeof when);
    const char *name = base_name(gguf_path);
    /* llama.cpp's row order: RoPE pairs adjacent dimensions for the families
     * whose q/k rows its converter permutes, rotate-half for the others */
    if ((s = lmq_meta_set_str(m, "lmq.rope.layout", a->gguf_rope_permuted ? "normal" : "neox"))) return s;
    if ((s = lmq_meta_set_str(m, "lmq.convert.version", LMQ_VERSION_STRING))) return s;
    if ((s = lmq_meta_set_str(m, "lmq.convert.time", when))) return s;
    if ((s = lmq_meta_set_str_arr(m, "lmq.source.files", &name, NULL, 1))) return s;
    return lmq_meta_set_arr(m, "lmq.source.xxh3", LMQ_V_U64, &h, 1);
}

lmq_status lmq_convert_gguf(const char *gguf_path, const char *out_path, const lmq_convert_opts *opts,
                            lmq_convert_stats *stats)
{
    double t0 = lmq_time_s();
    if (stats) memset(stats, 0, sizeof *stats);
    if (!gguf_path || !out_path) return lmq_error(LMQ_ERR_INVALID_ARG, "convert: missing input or output path");
    lmq_file *f = NULL;
    lmq_writer *w = NULL;
    lmq_status s = lmq_file_open(gguf_path, &f);
    if (s) return s;
    if (lmq_file_kind_of(f) != LMQ_FILE_GGUF) {
        s = lmq_error(LMQ_ERR_FORMAT, "%s: not a GGUF file", gguf_path);
        goto out;
    }
    if ((s = check_model(f, gguf_path))) goto out;

    lmq_writer_opts wo = {0};
    wo.codec = opts ? opts->codec : LMQ_CODEC_NONE;
    if ((s = lmq_writer_open(out_path, &wo, &w))) goto out;
    lmq_meta *m = lmq_writer_meta(w);
    const lmq_meta *src = lmq_file_meta(f);
    for (size_t i = 0; i < lmq_meta_count(src); i++)
        if ((s = lmq_meta_set_value(m, lmq_meta_key(src, i), lmq_meta_value(src, i)))) goto out;
    const char *an = NULL;
    lmq_meta_get_str(src, "general.architecture", &an, NULL);
    if ((s = add_provenance(m, gguf_path, lmq_arch_by_name(an)))) goto out;

    size_t n = lmq_file_n_tensors(f);
    uint64_t total = 0, done = 0, params = 0;
    for (size_t i = 0; i < n; i++) total += lmq_file_tensor(f, i)->nbytes;
    for (size_t i = 0; i < n; i++) {
        const lmq_tensor_info *t = lmq_file_tensor(f, i);
        if (opts && opts->tensor_begin) opts->tensor_begin(opts->progress_ctx, i, n, t->name);
        s = lmq_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->nbytes);
        if (s) goto out;
        done += t->nbytes;
        params += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
        if (opts && opts->progress) opts->progress(opts->progress_ctx, done, total);
    }
    s = lmq_writer_finish(w);
    w = NULL;
    if (s) goto out;
    if (stats) {
        struct stat st;
        stats->n_tensors = n;
        stats->n_params = params;
        stats->bytes_written = stat(out_path, &st) == 0 ? (uint64_t)st.st_size : 0;
        stats->seconds = lmq_time_s() - t0;
    }
out:
    lmq_writer_abort(w);
    lmq_file_close(f);
    return s;
}
