/* Importance matrices: accumulation, merging, llama.cpp's GGUF and legacy
 * .dat formats (lmq_quant.h, "Importance matrices"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_quant.h"

/* Bounds for untrusted files: names, columns, matrices, entries. */
#define IM_MAX_NAME 4096
#define IM_MAX_COLS ((int64_t)1 << 24)
#define IM_MAX_MAT 4096
#define IM_MAX_ENTRIES 1000000
#define IM_MAX_FILE ((size_t)1 << 34)

struct lmq_imatrix {
    lmq_imatrix_entry *e; /* [n] */
    size_t n, cap;
    size_t last;          /* index of the last lookup (accumulation hits it in runs) */
    char **datasets;      /* [n_ds] */
    size_t n_ds;
    uint32_t chunk_count, chunk_size;
};

lmq_imatrix *lmq_imatrix_new(void)
{
    return calloc(1, sizeof(lmq_imatrix));
}

void lmq_imatrix_free(lmq_imatrix *im)
{
    if (!im) return;
    for (size_t i = 0; i < im->n; i++) {
        free((char *)im->e[i].name);
        free(im->e[i].sum2);
        free(im->e[i].counts);
    }
    for (size_t i = 0; i < im->n_ds; i++) free(im->datasets[i]);
    free(im->datasets);
    free(im->e);
    free(im);
}

size_t lmq_imatrix_count(const lmq_imatrix *im)
{
    return im ? im->n : 0;
}

const lmq_imatrix_entry *lmq_imatrix_at(const lmq_imatrix *im, size_t i)
{
    return im && i < im->n ? &im->e[i] : NULL;
}

static lmq_imatrix_entry *find(const lmq_imatrix *im, const char *name)
{
    if (!im || !name) return NULL;
    if (im->last < im->n && !strcmp(im->e[im->last].name, name)) return &im->e[im->last];
    for (size_t i = 0; i < im->n; i++)
        if (!strcmp(im->e[i].name, name)) {
            ((lmq_imatrix *)im)->last = i;
            return &im->e[i];
        }
    return NULL;
}

const lmq_imatrix_entry *lmq_imatrix_find(const lmq_imatrix *im, const char *name)
{
    return find(im, name);
}

/* A new entry with n_mat zeroed matrices of n_cols. */
static lmq_status add_entry(lmq_imatrix *im, const char *name, int64_t n_cols, int32_t n_mat, lmq_imatrix_entry **out)
{
    if (n_cols <= 0 || n_cols > IM_MAX_COLS || n_mat <= 0 || n_mat > IM_MAX_MAT)
        return lmq_error(LMQ_ERR_INVALID_ARG, "imatrix: '%s': %lld columns x %d matrices is out of range", name,
                         (long long)n_cols, n_mat);
    if (im->n == im->cap) {
        size_t cap = im->cap ? im->cap * 2 : 64;
        lmq_imatrix_entry *e = realloc(im->e, cap * sizeof *e);
        if (!e) return lmq_error(LMQ_ERR_NOMEM, "imatrix: out of memory");
        im->e = e;
        im->cap = cap;
    }
    lmq_imatrix_entry *e = &im->e[im->n];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    e->sum2 = calloc((size_t)n_cols * (size_t)n_mat, sizeof(double));
    e->counts = calloc((size_t)n_mat, sizeof(double));
    if (!e->name || !e->sum2 || !e->counts) {
        free((char *)e->name);
        free(e->sum2);
        free(e->counts);
        return lmq_error(LMQ_ERR_NOMEM, "imatrix: out of memory");
    }
    e->n_cols = n_cols;
    e->n_mat = n_mat;
    im->last = im->n++;
    *out = e;
    return LMQ_OK;
}

/* Grows e to n_mat matrices (new ones zero). */
static lmq_status grow_mats(lmq_imatrix_entry *e, int32_t n_mat)
{
    if (n_mat <= e->n_mat) return LMQ_OK;
    if (n_mat > IM_MAX_MAT) return lmq_error(LMQ_ERR_INVALID_ARG, "imatrix: '%s': %d matrices", e->name, n_mat);
    double *s = realloc(e->sum2, (size_t)e->n_cols * (size_t)n_mat * sizeof *s);
    if (!s) return lmq_error(LMQ_ERR_NOMEM, "imatrix: out of memory");
    e->sum2 = s;
    double *c = realloc(e->counts, (size_t)n_mat * sizeof *c);
    if (!c) return lmq_error(LMQ_ERR_NOMEM, "imatrix: out of memory");
    e->counts = c;
    memset(s + (size_t)e->n_cols * (size_t)e->n_mat, 0, (size_t)e->n_cols * (size_t)(n_mat - e->n_mat) * sizeof *s);
    memset(c + e->n_mat, 0, (size_t)(n_mat - e->n_mat) * sizeof *c);
    e->n_mat = n_mat;
    return LMQ_OK;
}

/* The entry for name with n_cols columns and at least n_mat matrices. */
static lmq_status get_entry(lmq_imatrix *im, const char *name, int64_t n_cols, int32_t n_mat, lmq_imatrix_entry **out)
{
    lmq_imatrix_entry *e = find(im, name);
    if (!e) return add_entry(im, name, n_cols, n_mat, out);
    if (e->n_cols != n_cols)
        return lmq_error(LMQ_ERR_INVALID_ARG, "imatrix: '%s' has %lld columns, not %lld", name, (long long)e->n_cols,
                         (long long)n_cols);
    *out = e;
    return grow_mats(e, n_mat);
}

lmq_status lmq_imatrix_accumulate(lmq_imatrix *im, const char *name, int32_t mat, const float *x, int64_t n_tok,
                                  int64_t n_cols)
{
    if (!im || !name || (!x && n_tok > 0) || n_tok < 0 || mat < 0)
        return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_imatrix_accumulate: bad arguments");
    lmq_imatrix_entry *e;
    lmq_status st = get_entry(im, name, n_cols, mat + 1, &e);
    if (st) return st;
    double *s = e->sum2 + (size_t)mat * (size_t)n_cols;
    for (int64_t t = 0; t < n_tok; t++) {
        const float *r = x + t * n_cols;
        for (int64_t j = 0; j < n_cols; j++) s[j] += (double)r[j] * (double)r[j];
    }
    e->counts[mat] += (double)n_tok;
    return LMQ_OK;
}

lmq_status lmq_imatrix_add_dataset(lmq_imatrix *im, const char *name)
{
    if (!im || !name) return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_imatrix_add_dataset: bad arguments");
    char **d = realloc(im->datasets, (im->n_ds + 1) * sizeof *d);
    if (!d) return lmq_error(LMQ_ERR_NOMEM, "imatrix: out of memory");
    im->datasets = d;
    if (!(d[im->n_ds] = strdup(name))) return lmq_error(LMQ_ERR_NOMEM, "imatrix: out of memory");
    im->n_ds++;
    return LMQ_OK;
}

size_t lmq_imatrix_n_datasets(const lmq_imatrix *im)
{
    return im ? im->n_ds : 0;
}

const char *lmq_imatrix_dataset(const lmq_imatrix *im, size_t i)
{
    return im && i < im->n_ds ? im->datasets[i] : NULL;
}

void lmq_imatrix_set_chunks(lmq_imatrix *im, uint32_t chunk_count, uint32_t chunk_size)
{
    if (!im) return;
    im->chunk_count = chunk_count;
    im->chunk_size = chunk_size;
}

uint32_t lmq_imatrix_chunk_count(const lmq_imatrix *im)
{
    return im ? im->chunk_count : 0;
}

uint32_t lmq_imatrix_chunk_size(const lmq_imatrix *im)
{
    return im ? im->chunk_size : 0;
}

lmq_status lmq_imatrix_weights(const lmq_imatrix *im, const char *name, int32_t mat, float *out, int64_t n_cols)
{
    const lmq_imatrix_entry *e = find(im, name);
    if (!e) return lmq_error(LMQ_ERR_NOT_FOUND, "imatrix: no entry for '%s'", name ? name : "(null)");
    if (e->n_cols != n_cols || mat < 0 || mat >= e->n_mat || !out)
        return lmq_error(LMQ_ERR_INVALID_ARG, "imatrix: '%s' has %lld columns x %d matrices; asked for %lld columns, matrix %d",
                         name, (long long)e->n_cols, e->n_mat, (long long)n_cols, mat);
    const double c = e->counts[mat];
    const double *s = e->sum2 + (size_t)mat * (size_t)n_cols;
    for (int64_t j = 0; j < n_cols; j++) {
        double v = c > 0 ? s[j] / c : 1.0;
        out[j] = isfinite(v) && v >= 0 ? (float)v : 0.0f;
    }
    return LMQ_OK;
}

lmq_status lmq_imatrix_merge(lmq_imatrix *dst, const lmq_imatrix *src)
{
    if (!dst || !src) return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_imatrix_merge: bad arguments");
    lmq_status st;
    for (size_t i = 0; i < src->n; i++) {
        const lmq_imatrix_entry *se = &src->e[i];
        lmq_imatrix_entry *de;
        if ((st = get_entry(dst, se->name, se->n_cols, se->n_mat, &de))) return st;
        size_t n = (size_t)se->n_cols * (size_t)se->n_mat;
        for (size_t j = 0; j < n; j++) de->sum2[j] += se->sum2[j];
        for (int32_t m = 0; m < se->n_mat; m++) de->counts[m] += se->counts[m];
    }
    for (size_t i = 0; i < src->n_ds; i++)
        if ((st = lmq_imatrix_add_dataset(dst, src->datasets[i]))) return st;
    dst->chunk_count += src->chunk_count;
    if (!dst->chunk_size) dst->chunk_size = src->chunk_size;
    return LMQ_OK;
}

/* ====================================================================
 * GGUF
 * ==================================================================== */

static int cmp_entry_name(const void *a, const void *b)
{
    const lmq_imatrix_entry *x = *(const lmq_imatrix_entry *const *)a, *y = *(const lmq_imatrix_entry *const *)b;
    return strcmp(x->name, y->name);
}

lmq_status lmq_imatrix_save(const lmq_imatrix *im, const char *path)
{
    if (!im || !path) return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_imatrix_save: bad arguments");
    const lmq_imatrix_entry **order = calloc(im->n ? im->n : 1, sizeof *order);
    float *buf = NULL;
    size_t buf_cap = 0;
    lmq_gguf_writer *w = NULL;
    lmq_status st = LMQ_OK;
    if (!order) return lmq_error(LMQ_ERR_NOMEM, "imatrix: out of memory");
    for (size_t i = 0; i < im->n; i++) order[i] = &im->e[i];
    qsort(order, im->n, sizeof *order, cmp_entry_name);

    if ((st = lmq_gguf_writer_open(path, NULL, &w))) goto out;
    lmq_meta *m = lmq_gguf_writer_meta(w);
    if ((st = lmq_meta_set_str(m, "general.type", "imatrix"))) goto out;
    if ((st = lmq_meta_set_str_arr(m, "imatrix.datasets", (const char *const *)im->datasets, NULL, im->n_ds))) goto out;
    if ((st = lmq_meta_set_u32(m, "imatrix.chunk_count", im->chunk_count))) goto out;
    if ((st = lmq_meta_set_u32(m, "imatrix.chunk_size", im->chunk_size))) goto out;
    char name[IM_MAX_NAME + 16];
    for (size_t i = 0; i < im->n; i++) {
        const lmq_imatrix_entry *e = order[i];
        int64_t ne_s[2] = {e->n_cols, e->n_mat}, ne_c[2] = {1, e->n_mat};
        snprintf(name, sizeof name, "%s.in_sum2", e->name);
        if ((st = lmq_gguf_writer_declare(w, name, LMQ_TYPE_F32, 2, ne_s))) goto out;
        snprintf(name, sizeof name, "%s.counts", e->name);
        if ((st = lmq_gguf_writer_declare(w, name, LMQ_TYPE_F32, 2, ne_c))) goto out;
    }
    for (size_t i = 0; i < im->n; i++) {
        const lmq_imatrix_entry *e = order[i];
        size_t n = (size_t)e->n_cols * (size_t)e->n_mat;
        if (n > buf_cap) {
            free(buf);
            if (!(buf = malloc(n * sizeof *buf))) {
                buf_cap = 0;
                st = lmq_error(LMQ_ERR_NOMEM, "imatrix: out of memory");
                goto out;
            }
            buf_cap = n;
        }
        for (size_t j = 0; j < n; j++) buf[j] = (float)e->sum2[j];
        if ((st = lmq_gguf_writer_write(w, buf, n * sizeof(float)))) goto out;
        for (int32_t j = 0; j < e->n_mat; j++) buf[j] = (float)e->counts[j];
        if ((st = lmq_gguf_writer_write(w, buf, (size_t)e->n_mat * sizeof(float)))) goto out;
    }
    st = lmq_gguf_writer_finish(w);
    w = NULL;
out:
    lmq_gguf_writer_abort(w);
    free(buf);
    free(order);
    return st;
}

static bool ends_with(const char *s, const char *suffix, size_t *stem)
{
    size_t n = strlen(s), k = strlen(suffix);
    if (n <= k || strcmp(s + n - k, suffix)) return false;
    *stem = n - k;
    return true;
}

static lmq_status load_gguf(lmq_file *f, const char *name, lmq_imatrix *im)
{
    const lmq_meta *meta = lmq_file_meta(f);
    const char *type = NULL;
    size_t tlen = 0;
    if (lmq_meta_get_str(meta, "general.type", &type, &tlen) || tlen != 7 || memcmp(type, "imatrix", 7))
        return lmq_error(LMQ_ERR_FORMAT, "%s: not an imatrix file (general.type is not \"imatrix\")", name);
    lmq_vtype et;
    uint64_t nds;
    const void *data;
    if (!lmq_meta_get_arr(meta, "imatrix.datasets", &et, &nds, &data) && et == LMQ_V_STRING) {
        const lmq_str *s = data;
        for (uint64_t i = 0; i < nds; i++) {
            char buf[IM_MAX_NAME];
            size_t l = s[i].len < sizeof buf - 1 ? (size_t)s[i].len : sizeof buf - 1;
            memcpy(buf, s[i].ptr, l);
            buf[l] = 0;
            lmq_status st = lmq_imatrix_add_dataset(im, buf);
            if (st) return st;
        }
    }
    uint64_t v;
    if (!lmq_meta_get_u64(meta, "imatrix.chunk_count", &v) && v <= UINT32_MAX) im->chunk_count = (uint32_t)v;
    if (!lmq_meta_get_u64(meta, "imatrix.chunk_size", &v) && v <= UINT32_MAX) im->chunk_size = (uint32_t)v;

    for (size_t i = 0; i < lmq_file_n_tensors(f); i++) {
        const lmq_tensor_info *ts = lmq_file_tensor(f, i);
        size_t stem;
        if (!ends_with(ts->name, ".in_sum2", &stem)) continue;
        if (stem >= IM_MAX_NAME) return lmq_error(LMQ_ERR_FORMAT, "%s: tensor name too long", name);
        char wname[IM_MAX_NAME + 16];
        memcpy(wname, ts->name, stem);
        wname[stem] = 0;
        snprintf(wname + stem, sizeof wname - stem, ".counts");
        const lmq_tensor_info *tc = lmq_file_find_tensor(f, wname);
        wname[stem] = 0;
        if (!tc) return lmq_error(LMQ_ERR_FORMAT, "%s: '%s' has in_sum2 but no counts", name, wname);
        if (ts->type != LMQ_TYPE_F32 || tc->type != LMQ_TYPE_F32 || ts->n_dims > 2 || tc->n_dims > 2)
            return lmq_error(LMQ_ERR_FORMAT, "%s: '%s': in_sum2/counts must be 1-2-D f32", name, wname);
        int64_t n_cols = ts->ne[0], n_mat = ts->n_dims == 2 ? ts->ne[1] : 1;
        if (tc->ne[0] * (tc->n_dims == 2 ? tc->ne[1] : 1) != n_mat || n_mat > IM_MAX_MAT || n_cols > IM_MAX_COLS ||
            n_cols <= 0 || n_mat <= 0)
            return lmq_error(LMQ_ERR_FORMAT, "%s: '%s': in_sum2 [%lld, %lld] does not match counts (%lld values)", name,
                             wname, (long long)n_cols, (long long)n_mat, (long long)tc->ne[0]);
        if (find(im, wname)) return lmq_error(LMQ_ERR_FORMAT, "%s: '%s' appears twice", name, wname);
        lmq_imatrix_entry *e;
        lmq_status st = add_entry(im, wname, n_cols, (int32_t)n_mat, &e);
        if (st) return st;
        const float *s = ts->data, *c = tc->data;
        for (int64_t j = 0; j < n_cols * n_mat; j++) {
            if (!isfinite(s[j]) || s[j] < 0)
                return lmq_error(LMQ_ERR_FORMAT, "%s: '%s': bad in_sum2 value %g at %lld", name, wname, (double)s[j],
                                 (long long)j);
            e->sum2[j] = s[j];
        }
        for (int64_t j = 0; j < n_mat; j++) {
            if (!isfinite(c[j]) || c[j] < 0)
                return lmq_error(LMQ_ERR_FORMAT, "%s: '%s': bad count %g", name, wname, (double)c[j]);
            e->counts[j] = c[j];
        }
    }
    return LMQ_OK;
}

/* ====================================================================
 * Legacy imatrix.dat
 * ==================================================================== */

typedef struct rd {
    const uint8_t *p;
    size_t len, off;
} rd;

static bool rd_i32(rd *r, int32_t *v)
{
    if (r->len - r->off < 4) return false;
    memcpy(v, r->p + r->off, 4);
    r->off += 4;
    return true;
}

static lmq_status load_legacy(const uint8_t *buf, size_t len, const char *name, lmq_imatrix *im)
{
    rd r = {buf, len, 0};
    int32_t n_entries;
    if (!rd_i32(&r, &n_entries) || n_entries <= 0 || n_entries > IM_MAX_ENTRIES)
        return lmq_error(LMQ_ERR_FORMAT, "%s: not an imatrix file (bad entry count)", name);
    char wname[IM_MAX_NAME + 1];
    int32_t max_ncall = 0;
    for (int32_t i = 0; i < n_entries; i++) {
        int32_t nl, ncall, nval;
        if (!rd_i32(&r, &nl) || nl <= 0 || nl > IM_MAX_NAME || len - r.off < (size_t)nl)
            return lmq_error(LMQ_ERR_FORMAT, "%s: entry %d: bad or truncated name (byte %zu)", name, i, r.off);
        memcpy(wname, buf + r.off, (size_t)nl);
        wname[nl] = 0;
        r.off += (size_t)nl;
        if (memchr(wname, 0, (size_t)nl)) return lmq_error(LMQ_ERR_FORMAT, "%s: entry %d: name holds a NUL byte", name, i);
        if (!rd_i32(&r, &ncall) || !rd_i32(&r, &nval) || ncall < 0 || nval <= 0 || nval > IM_MAX_COLS * 8)
            return lmq_error(LMQ_ERR_FORMAT, "%s: '%s': bad or truncated header (byte %zu)", name, wname, r.off);
        if ((len - r.off) / 4 < (size_t)nval)
            return lmq_error(LMQ_ERR_FORMAT, "%s: '%s': truncated (%d values, %zu bytes left)", name, wname, nval,
                             len - r.off);
        if (find(im, wname)) return lmq_error(LMQ_ERR_FORMAT, "%s: '%s' appears twice", name, wname);
        lmq_imatrix_entry *e;
        lmq_status st = add_entry(im, wname, nval, 1, &e);
        if (st) return lmq_error_prefix(LMQ_ERR_FORMAT, "%s", name);
        for (int32_t j = 0; j < nval; j++) {
            float v;
            memcpy(&v, buf + r.off + (size_t)j * 4, 4);
            if (!isfinite(v) || v < 0)
                return lmq_error(LMQ_ERR_FORMAT, "%s: '%s': bad value %g at %d", name, wname, (double)v, j);
            e->sum2[j] = v;
        }
        r.off += (size_t)nval * 4;
        e->counts[0] = ncall;
        if (ncall > max_ncall) max_ncall = ncall;
    }
    /* optional trailer: last call count, dataset name */
    int32_t last_call, dl;
    im->chunk_count = (uint32_t)max_ncall;
    if (rd_i32(&r, &last_call) && last_call >= 0) {
        im->chunk_count = (uint32_t)last_call;
        if (rd_i32(&r, &dl) && dl > 0 && dl <= IM_MAX_NAME && len - r.off >= (size_t)dl) {
            memcpy(wname, buf + r.off, (size_t)dl);
            wname[dl] = 0;
            lmq_status st = lmq_imatrix_add_dataset(im, wname);
            if (st) return st;
        }
    }
    return LMQ_OK;
}

lmq_status lmq_imatrix_load_memory(const void *buf, size_t len, const char *name, lmq_imatrix **out)
{
    if (!out) return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_imatrix_load_memory: out is NULL");
    *out = NULL;
    if (!buf && len) return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_imatrix_load_memory: bad arguments");
    if (!name) name = "(memory)";
    lmq_imatrix *im = lmq_imatrix_new();
    if (!im) return lmq_error(LMQ_ERR_NOMEM, "imatrix: out of memory");
    lmq_status st;
    if (len >= 4 && !memcmp(buf, "GGUF", 4)) {
        lmq_file *f = NULL;
        st = lmq_file_open_memory(buf, len, name, &f);
        if (!st) st = load_gguf(f, name, im);
        lmq_file_close(f);
    } else {
        st = load_legacy(buf, len, name, im);
    }
    if (st) {
        lmq_imatrix_free(im);
        return st;
    }
    *out = im;
    return LMQ_OK;
}

lmq_status lmq_imatrix_load(const char *path, lmq_imatrix **out)
{
    if (!out || !path) return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_imatrix_load: bad arguments");
    *out = NULL;
    char *buf = NULL;
    size_t len = 0;
    lmq_status st = lmq_read_file(path, IM_MAX_FILE, &buf, &len);
    if (st) return st;
    st = lmq_imatrix_load_memory(buf, len, path, out);
    free(buf);
    return st;
}
