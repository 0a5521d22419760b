/* safetensors reader: one file, or a sharded checkpoint described by
 * model.safetensors.index.json. Layout of a file (huggingface/safetensors):
 *
 *   u64 LE   header length N
 *   N bytes  JSON object: name -> {"dtype", "shape", "data_offsets": [b, e]},
 *            plus an optional "__metadata__" map (ignored here)
 *   ...      data region; tensor bytes at [b, e) relative to its start
 *
 * Every shard is mapped read-only once; tensors are zero-copy views into
 * the mappings. Everything read from a header is validated before use (see
 * the contract in lmq_format.h). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "lmq_format.h"
#include "lmq_format_internal.h"

#define ST_MAX_INDEX_BYTES ((size_t)64 << 20)
#define ST_MAX_JSON_INT 9007199254740992.0 /* 2^53: larger integers are not exact in JSON numbers */

/* ================================================================ dtypes */

typedef struct st_dtype {
    const char *name;
    uint32_t bits; /* per element */
    lmq_type type; /* LMQ_TYPE_COUNT when lmq cannot convert it */
} st_dtype;

/* The dtypes of the safetensors spec; only the first three are converted. */
static const st_dtype DTYPES[] = {
    {"F32", 32, LMQ_TYPE_F32},        {"F16", 16, LMQ_TYPE_F16},
    {"BF16", 16, LMQ_TYPE_BF16},      {"F64", 64, LMQ_TYPE_COUNT},
    {"I64", 64, LMQ_TYPE_COUNT},      {"U64", 64, LMQ_TYPE_COUNT},
    {"I32", 32, LMQ_TYPE_COUNT},      {"U32", 32, LMQ_TYPE_COUNT},
    {"I16", 16, LMQ_TYPE_COUNT},      {"U16", 16, LMQ_TYPE_COUNT},
    {"I8", 8, LMQ_TYPE_COUNT},        {"U8", 8, LMQ_TYPE_COUNT},
    {"BOOL", 8, LMQ_TYPE_COUNT},      {"F8_E4M3", 8, LMQ_TYPE_COUNT},
    {"F8_E5M2", 8, LMQ_TYPE_COUNT},   {"F8_E8M0", 8, LMQ_TYPE_COUNT},
    {"F6_E2M3", 6, LMQ_TYPE_COUNT},   {"F6_E3M2", 6, LMQ_TYPE_COUNT},
    {"F4", 4, LMQ_TYPE_COUNT},        {"C64", 64, LMQ_TYPE_COUNT},
};

static const st_dtype *dtype_find(const char *name)
{
    for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++)
        if (!strcmp(DTYPES[i].name, name)) return &DTYPES[i];
    return NULL;
}

/* ================================================================ state */

typedef struct st_shard {
    char *path;
    const uint8_t *map; /* whole file */
    size_t size;
    bool owns_map;      /* munmap on close */
} st_shard;

struct lmq_safetensors {
    st_shard *shards;
    size_t n_shards;
    lmq_st_tensor *t; /* shard by shard, in data-offset order */
    size_t n, cap;
    const lmq_st_tensor **by_name; /* t sorted by name, for lmq_safetensors_find */
};

static void st_free(lmq_safetensors *st)
{
    if (!st) return;
    for (size_t i = 0; i < st->n; i++) free((char *)st->t[i].name);
    for (size_t i = 0; i < st->n_shards; i++) {
        if (st->shards[i].owns_map && st->shards[i].map)
            munmap((void *)st->shards[i].map, st->shards[i].size);
        free(st->shards[i].path);
    }
    free(st->shards);
    free(st->t);
    free(st->by_name);
    free(st);
}

void lmq_safetensors_close(lmq_safetensors *st)
{
    st_free(st);
}

/* Adds an empty shard slot; returns its index or -1 on OOM. */
static long add_shard(lmq_safetensors *st, const char *path)
{
    st_shard *s = realloc(st->shards, (st->n_shards + 1) * sizeof *s);
    if (!s) return -1;
    st->shards = s;
    memset(&s[st->n_shards], 0, sizeof *s);
    s[st->n_shards].path = strdup(path);
    if (!s[st->n_shards].path) return -1;
    return (long)st->n_shards++;
}

/* ================================================================ header */

/* A JSON number that is a non-negative integer exactly representable. */
static bool json_u64(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v)) return false;
    double d = v->valuedouble;
    if (!(d >= 0.0) || d > ST_MAX_JSON_INT || d != (double)(uint64_t)d) return false;
    *out = (uint64_t)d;
    return true;
}

static lmq_status push_tensor(lmq_safetensors *st, const lmq_st_tensor *t, const char *path)
{
    if (st->n == st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 64;
        lmq_st_tensor *p = realloc(st->t, cap * sizeof *p);
        if (!p) return lmq_error(LMQ_ERR_NOMEM, "%s: out of memory for the tensor list", path);
        st->t = p;
        st->cap = cap;
    }
    st->t[st->n] = *t;
    st->t[st->n].name = strdup(t->name);
    if (!st->t[st->n].name) return lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", path);
    st->n++;
    return LMQ_OK;
}

/* Validates one header entry and fills *t (name still borrowed). */
static lmq_status parse_entry(const cJSON *e, const char *path, uint64_t dsize, lmq_st_tensor *t,
                              uint64_t *begin)
{
    const char *name = e->string;
    if (!*name || strlen(name) > LMQ_MAX_NAME_LEN)
        return lmq_error(LMQ_ERR_FORMAT, "%s: tensor name of %zu bytes (1..%u allowed)", path, strlen(name),
                         LMQ_MAX_NAME_LEN);
    if (!cJSON_IsObject(e)) return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': entry is not a JSON object", path, name);
    const cJSON *jd = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *jo = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(jd))
        return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': missing or non-string \"dtype\"", path, name);
    const st_dtype *dt = dtype_find(jd->valuestring);
    if (!dt) return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': unknown dtype '%.32s'", path, name, jd->valuestring);
    if (!cJSON_IsArray(js)) return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': missing \"shape\" array", path, name);
    int nd = cJSON_GetArraySize(js);
    if (nd > 8) return lmq_error(LMQ_ERR_LIMIT, "%s: tensor '%s': %d dimensions (at most 8)", path, name, nd);
    memset(t, 0, sizeof *t);
    t->name = name;
    t->dtype = dt->name;
    t->supported = dt->type != LMQ_TYPE_COUNT;
    t->type = t->supported ? dt->type : LMQ_TYPE_F32;
    t->n_dims = (uint32_t)nd;
    uint64_t numel = 1;
    int d = 0;
    for (const cJSON *v = js->child; v; v = v->next, d++) {
        uint64_t x;
        if (!json_u64(v, &x) || x > (uint64_t)LMQ_MAX_DIM)
            return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': shape[%d] is not an integer in [0, 2^40]", path, name, d);
        t->shape[d] = (int64_t)x;
        if (__builtin_mul_overflow(numel, x, &numel))
            return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': element count overflows", path, name);
    }
    uint64_t bits;
    if (__builtin_mul_overflow(numel, (uint64_t)dt->bits, &bits))
        return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': byte size overflows", path, name);
    if (bits % 8)
        return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': %llu %s elements do not fill whole bytes", path, name,
                         (unsigned long long)numel, dt->name);
    if (!cJSON_IsArray(jo) || cJSON_GetArraySize(jo) != 2)
        return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': \"data_offsets\" must be [begin, end]", path, name);
    uint64_t b, en;
    if (!json_u64(jo->child, &b) || !json_u64(jo->child->next, &en))
        return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': data_offsets are not non-negative integers", path, name);
    if (b > en || en > dsize)
        return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] outside the data region of %llu bytes",
                         path, name, (unsigned long long)b, (unsigned long long)en, (unsigned long long)dsize);
    if (en - b != bits / 8)
        return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s': data_offsets hold %llu bytes but the %s shape needs %llu",
                         path, name, (unsigned long long)(en - b), dt->name, (unsigned long long)(bits / 8));
    t->nbytes = en - b;
    *begin = b;
    return LMQ_OK;
}

/* Parses the header of one file held in [buf, buf+len) and appends its
 * tensors to st (as shard `shard`). */
static lmq_status parse_file(lmq_safetensors *st, uint32_t shard, const uint8_t *buf, size_t len, const char *path)
{
    if (len < 8)
        return lmq_error(LMQ_ERR_FORMAT, "%s: %zu bytes is too short for a safetensors file (no header length)", path, len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | buf[i];
    if (hlen > LMQ_ST_MAX_HEADER)
        return lmq_error(LMQ_ERR_LIMIT, "%s: header length %llu exceeds the limit of %llu bytes", path,
                         (unsigned long long)hlen, (unsigned long long)LMQ_ST_MAX_HEADER);
    if (hlen > len - 8)
        return lmq_error(LMQ_ERR_FORMAT, "%s: header length %llu runs past the end of the file (%zu bytes)", path,
                         (unsigned long long)hlen, len);
    const char *hdr = (const char *)buf + 8;
    if (hlen < 2 || hdr[0] != '{')
        return lmq_error(LMQ_ERR_FORMAT, "%s: header is not a JSON object", path);
    if (memchr(hdr, 0, (size_t)hlen)) return lmq_error(LMQ_ERR_FORMAT, "%s: header contains a NUL byte", path);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(hdr, (size_t)hlen, &end, false);
    if (!root) {
        size_t at = end && end >= hdr && end <= hdr + hlen ? (size_t)(end - hdr) : 0;
        return lmq_error(LMQ_ERR_FORMAT, "%s: header is not valid JSON (near header byte %zu)", path, at);
    }
    lmq_status s = LMQ_OK;
    for (const char *p = end; p < hdr + hlen; p++) {
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            s = lmq_error(LMQ_ERR_FORMAT, "%s: trailing bytes after the JSON header (header byte %zu)", path,
                          (size_t)(p - hdr));
            goto out;
        }
    }
    if (!cJSON_IsObject(root)) {
        s = lmq_error(LMQ_ERR_FORMAT, "%s: header is not a JSON object", path);
        goto out;
    }
    const uint8_t *data = buf + 8 + hlen;
    uint64_t dsize = len - 8 - hlen;
    for (const cJSON *e = root->child; e; e = e->next) {
        if (!e->string) {
            s = lmq_error(LMQ_ERR_FORMAT, "%s: header entry without a name", path);
            goto out;
        }
        if (!strcmp(e->string, "__metadata__")) continue;
        lmq_st_tensor t;
        uint64_t begin = 0;
        if ((s = parse_entry(e, path, dsize, &t, &begin))) goto out;
        t.data = data + begin;
        t.shard = shard;
        if ((s = push_tensor(st, &t, path))) goto out;
    }
out:
    cJSON_Delete(root);
    return s;
}

/* ================================================================ checks */

static int cmp_offset(const void *a, const void *b)
{
    const lmq_st_tensor *x = a, *y = b;
    if (x->shard != y->shard) return x->shard < y->shard ? -1 : 1;
    const uint8_t *px = x->data, *py = y->data;
    if (px != py) return px < py ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp((*(const lmq_st_tensor *const *)a)->name, (*(const lmq_st_tensor *const *)b)->name);
}

/* Sorts by (shard, offset), refuses overlapping byte ranges and duplicate
 * names, and builds the name index. */
static lmq_status finalize(lmq_safetensors *st)
{
    if (st->n > 1) qsort(st->t, st->n, sizeof *st->t, cmp_offset);
    const lmq_st_tensor *prev = NULL;
    for (size_t i = 0; i < st->n; i++) {
        const lmq_st_tensor *t = &st->t[i];
        if (prev && prev->shard != t->shard) prev = NULL;
        if (!t->nbytes) continue; /* an empty range overlaps nothing */
        if (prev && (const uint8_t *)t->data < (const uint8_t *)prev->data + prev->nbytes)
            return lmq_error(LMQ_ERR_FORMAT, "%s: tensors '%s' and '%s' overlap in the data region",
                             st->shards[t->shard].path, prev->name, t->name);
        prev = t;
    }
    st->by_name = malloc((st->n ? st->n : 1) * sizeof *st->by_name);
    if (!st->by_name) return lmq_error(LMQ_ERR_NOMEM, "safetensors: out of memory for the name index");
    for (size_t i = 0; i < st->n; i++) st->by_name[i] = &st->t[i];
    if (st->n > 1) qsort(st->by_name, st->n, sizeof *st->by_name, cmp_name);
    for (size_t i = 1; i < st->n; i++) {
        const lmq_st_tensor *a = st->by_name[i - 1], *b = st->by_name[i];
        if (!strcmp(a->name, b->name))
            return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s' appears twice (also in %s)", st->shards[b->shard].path,
                             b->name, st->shards[a->shard].path);
    }
    return LMQ_OK;
}

/* ================================================================ files */

static lmq_status map_shard(lmq_safetensors *st, size_t i)
{
    st_shard *sh = &st->shards[i];
    int fd = open(sh->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return lmq_error(errno == ENOENT ? LMQ_ERR_NOT_FOUND : LMQ_ERR_IO, "%s: %s", sh->path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return lmq_error(LMQ_ERR_IO, "%s: not a regular file", sh->path);
    }
    if ((uint64_t)sb.st_size > SIZE_MAX) {
        close(fd);
        return lmq_error(LMQ_ERR_LIMIT, "%s: file too large to map", sh->path);
    }
    sh->size = (size_t)sb.st_size;
    if (sh->size) {
        void *m = mmap(NULL, sh->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            return lmq_error(LMQ_ERR_IO, "%s: mmap failed: %s", sh->path, strerror(e));
        }
        sh->map = m;
        sh->owns_map = true;
    }
    close(fd);
    return parse_file(st, (uint32_t)i, sh->map, sh->size, sh->path);
}

static lmq_status open_single(lmq_safetensors *st, const char *path)
{
    long i = add_shard(st, path);
    if (i < 0) return lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", path);
    return map_shard(st, (size_t)i);
}

static bool shard_name_ok(const char *s)
{
    return *s && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..") && strlen(s) < 1024;
}

static long find_shard(const lmq_safetensors *st, const char *path)
{
    for (size_t i = 0; i < st->n_shards; i++)
        if (!strcmp(st->shards[i].path, path)) return (long)i;
    return -1;
}

/* model.safetensors.index.json: {"metadata": {...}, "weight_map": {tensor: shard file}} */
static lmq_status open_index(lmq_safetensors *st, const char *index_path)
{
    char *text = NULL;
    size_t len = 0;
    lmq_status s = lmq_read_file(index_path, ST_MAX_INDEX_BYTES, &text, &len);
    if (s) return s;
    cJSON *root = cJSON_ParseWithLength(text, len);
    char dir[4096], path[4096 + 1100];
    const cJSON *wm = root ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
    if (!root) {
        s = lmq_error(LMQ_ERR_FORMAT, "%s: not valid JSON", index_path);
        goto out;
    }
    if (!cJSON_IsObject(wm) || !wm->child) {
        s = lmq_error(LMQ_ERR_FORMAT, "%s: missing or empty \"weight_map\" object", index_path);
        goto out;
    }
    snprintf(dir, sizeof dir, "%s", index_path);
    char *slash = strrchr(dir, '/');
    if (slash) slash[1] = 0;
    else dir[0] = 0;
    /* every distinct shard, in order of first mention, opened once */
    for (const cJSON *e = wm->child; e; e = e->next) {
        if (!cJSON_IsString(e) || !shard_name_ok(e->valuestring)) {
            s = lmq_error(LMQ_ERR_FORMAT, "%s: weight_map entry '%.200s' does not name a shard file in this directory",
                          index_path, e->string ? e->string : "");
            goto out;
        }
        snprintf(path, sizeof path, "%s%s", dir, e->valuestring);
        if (find_shard(st, path) >= 0) continue;
        long i = add_shard(st, path);
        if (i < 0) {
            s = lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", index_path);
            goto out;
        }
        if ((s = map_shard(st, (size_t)i))) goto out;
    }
    if ((s = finalize(st))) goto out;
    /* every tensor the index names must be in the shard it names */
    for (const cJSON *e = wm->child; e; e = e->next) {
        snprintf(path, sizeof path, "%s%s", dir, e->valuestring);
        const lmq_st_tensor *t = lmq_safetensors_find(st, e->string);
        long want = find_shard(st, path);
        if (!t) {
            s = lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%.200s' listed in %s is missing", path, e->string, index_path);
            goto out;
        }
        if ((long)t->shard != want) {
            s = lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s' is listed in %s as in %s", st->shards[t->shard].path,
                          t->name, index_path, e->valuestring);
            goto out;
        }
    }
out:
    cJSON_Delete(root);
    free(text);
    return s;
}

static bool is_file(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

lmq_status lmq_safetensors_open(const char *path, lmq_safetensors **out)
{
    *out = NULL;
    if (!path) return lmq_error(LMQ_ERR_INVALID_ARG, "safetensors: no path");
    struct stat sb;
    if (stat(path, &sb) != 0)
        return lmq_error(errno == ENOENT ? LMQ_ERR_NOT_FOUND : LMQ_ERR_IO, "%s: %s", path, strerror(errno));
    lmq_safetensors *st = calloc(1, sizeof *st);
    if (!st) return lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", path);
    lmq_status s;
    char p[4096];
    if (S_ISDIR(sb.st_mode)) {
        size_t n = strlen(path);
        while (n > 1 && path[n - 1] == '/') n--;
        if (snprintf(p, sizeof p, "%.*s/model.safetensors.index.json", (int)n, path) >= (int)sizeof p) {
            s = lmq_error(LMQ_ERR_LIMIT, "%s: path too long", path);
        } else if (is_file(p)) {
            s = open_index(st, p);
        } else {
            snprintf(p, sizeof p, "%.*s/model.safetensors", (int)n, path);
            if (is_file(p)) s = open_single(st, p);
            else s = lmq_error(LMQ_ERR_NOT_FOUND, "%s: no model.safetensors or model.safetensors.index.json", path);
            if (!s) s = finalize(st);
        }
    } else if (ends_with(path, ".json")) {
        s = open_index(st, path);
    } else {
        s = open_single(st, path);
        if (!s) s = finalize(st);
    }
    if (s) {
        st_free(st);
        return s;
    }
    *out = st;
    return LMQ_OK;
}

lmq_status lmq_safetensors_check_memory(const void *buf, size_t len, const char *name, size_t *n_tensors)
{
    if (n_tensors) *n_tensors = 0;
    if (!name) name = "(memory)";
    lmq_safetensors *st = calloc(1, sizeof *st);
    if (!st) return lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", name);
    lmq_status s = LMQ_OK;
    if (add_shard(st, name) < 0) s = lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", name);
    if (!s) s = parse_file(st, 0, buf, len, name);
    if (!s) s = finalize(st);
    if (!s && n_tensors) *n_tensors = st->n;
    st_free(st);
    return s;
}

/* ================================================================ access */

size_t lmq_safetensors_count(const lmq_safetensors *st)
{
    return st ? st->n : 0;
}

const lmq_st_tensor *lmq_safetensors_tensor(const lmq_safetensors *st, size_t i)
{
    return st && i < st->n ? &st->t[i] : NULL;
}

const lmq_st_tensor *lmq_safetensors_find(const lmq_safetensors *st, const char *name)
{
    if (!st || !name || !st->by_name) return NULL;
    size_t lo = 0, hi = st->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(st->by_name[mid]->name, name);
        if (!c) return st->by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

size_t lmq_safetensors_n_shards(const lmq_safetensors *st)
{
    return st ? st->n_shards : 0;
}

const char *lmq_safetensors_shard_path(const lmq_safetensors *st, size_t i)
{
    return st && i < st->n_shards ? st->shards[i].path : NULL;
}

lmq_status lmq_safetensors_shard_data(const lmq_safetensors *st, size_t i, const void **data, size_t *size)
{
    if (!st || i >= st->n_shards) return lmq_error(LMQ_ERR_INVALID_ARG, "safetensors: no shard %zu", i);
    *data = st->shards[i].map;
    *size = st->shards[i].size;
    return LMQ_OK;
}

static size_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

/* madvise(DONTNEED) over the whole pages inside [p, p+n) of a mapping. */
static void release_range(const st_shard *sh, const uint8_t *p, size_t n)
{
    if (!sh->owns_map || !n) return;
    size_t ps = page_size();
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)(ps - 1);
    uintptr_t b = ((uintptr_t)p + n + ps - 1) & ~(uintptr_t)(ps - 1);
    uintptr_t lo = (uintptr_t)sh->map, hi = ((uintptr_t)sh->map + sh->size + ps - 1) & ~(uintptr_t)(ps - 1);
    if (a < lo) a = lo;
    if (b > hi) b = hi;
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

lmq_status lmq_safetensors_shard_hash(const lmq_safetensors *st, size_t i, uint64_t *out)
{
    if (!st || i >= st->n_shards) return lmq_error(LMQ_ERR_INVALID_ARG, "safetensors: no shard %zu", i);
    const st_shard *sh = &st->shards[i];
    XXH3_state_t *x = XXH3_createState();
    if (!x) return lmq_error(LMQ_ERR_NOMEM, "%s: hash state", sh->path);
    XXH3_64bits_reset(x);
    const size_t chunk = (size_t)16 << 20; /* a multiple of any page size */
    for (size_t off = 0; off < sh->size; off += chunk) {
        size_t n = sh->size - off < chunk ? sh->size - off : chunk;
        XXH3_64bits_update(x, sh->map + off, n);
        release_range(sh, sh->map + off, n);
    }
    *out = XXH3_64bits_digest(x);
    XXH3_freeState(x);
    return LMQ_OK;
}

void lmq_safetensors_release(const lmq_safetensors *st, const lmq_st_tensor *t)
{
    if (!st || !t || t->shard >= st->n_shards) return;
    release_range(&st->shards[t->shard], t->data, (size_t)t->nbytes);
}
