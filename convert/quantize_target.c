/* Size-targeted plans (lmq_convert.h, "Size-targeted plans"): per-tensor
 * error of every candidate type, and the greedy allocation under a byte
 * budget. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_convert.h"
#include "lmq_quant.h"

void lmq_target_table_free(lmq_target_table *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->n; i++) free(t->t[i].name);
    free(t->t);
    free(t);
}

static lmq_target_table *table_new(size_t n)
{
    lmq_target_table *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->t = calloc(n ? n : 1, sizeof *t->t);
    if (!t->t) {
        free(t);
        return NULL;
    }
    return t;
}

/* ====================================================================
 * Measurement
 * ==================================================================== */

typedef struct mbuf {
    float *x, *y, *w;   /* [nrows*ne0] source, [ne0] dequantized row, [ne0] weights */
    float *s;           /* [TARGET_ERR_ROWS*ne0] the sampled rows of one matrix */
    uint8_t *q;         /* [rows * row bytes] quantized */
    size_t x_cap, y_cap, w_cap, s_cap, q_cap;
} mbuf;

/* Rows whose error is measured, per matrix: evenly spaced, the sum scaled
 * by rows / sampled. The plan uses a tensor's errors only relative to each
 * other (the fit scales them to one measured KLD), and on the same rows the
 * ratios between types hold to well under 1% (docs/QUANT.md), while the
 * cost of quantizing every tensor to ten types drops by the same factor
 * (the output head of a 128k vocabulary: 250x). */
#define TARGET_ERR_ROWS 512

static lmq_status grow(void **p, size_t *cap, size_t need)
{
    if (need <= *cap) return LMQ_OK;
    free(*p);
    *p = malloc(need);
    *cap = *p ? need : 0;
    return *p ? LMQ_OK : lmq_error(LMQ_ERR_NOMEM, "out of memory (%zu bytes)", need);
}

/* The whole tensor as f32 in b->x. */
static lmq_status load_f32(mbuf *b, const lmq_tensor_info *ti, const char *in_path)
{
    int64_t n = 1;
    for (uint32_t d = 0; d < ti->n_dims; d++) n *= ti->ne[d];
    lmq_status st = grow((void **)&b->x, &b->x_cap, (size_t)n * sizeof(float));
    if (st) return st;
    const lmq_type_traits *tt = lmq_type_get(ti->type);
    if (tt && tt->quantized)
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: tensor '%s' is already quantized (%s)", in_path, ti->name,
                         lmq_type_name(ti->type));
    st = lmq_convert_float_row(ti->type, ti->data, LMQ_TYPE_F32, b->x, n);
    if (st) return lmq_error_prefix(st, "%s: tensor '%s'", in_path, ti->name);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(b->x[i]))
            return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s' has a non-finite weight at %lld", in_path, ti->name,
                             (long long)i);
    return LMQ_OK;
}

/* Weighted squared error of the whole tensor in type `type`. */
static lmq_status tensor_err(mbuf *b, const lmq_tensor_info *ti, const lmq_quantize_opts *opts, lmq_type type,
                             double *err)
{
    const int64_t ne0 = ti->ne[0];
    int64_t nrows = 1;
    for (uint32_t d = 1; d < ti->n_dims; d++) nrows *= ti->ne[d];
    const int64_t n_mat = ti->n_dims >= 3 ? ti->ne[2] : 1;
    const int64_t rows_per_mat = nrows / n_mat;
    const int64_t rb = lmq_row_size(type, ne0);
    const int64_t n_s = rows_per_mat < TARGET_ERR_ROWS ? rows_per_mat : TARGET_ERR_ROWS;
    lmq_status st;
    if ((st = grow((void **)&b->q, &b->q_cap, (size_t)(rb * n_s)))) return st;
    if ((st = grow((void **)&b->s, &b->s_cap, (size_t)(n_s * ne0) * sizeof(float)))) return st;
    if ((st = grow((void **)&b->y, &b->y_cap, (size_t)ne0 * sizeof(float)))) return st;
    if ((st = grow((void **)&b->w, &b->w_cap, (size_t)ne0 * sizeof(float)))) return st;
    const lmq_imatrix_entry *ie = lmq_imatrix_find(opts->imatrix, ti->name);
    if (ie && (ie->n_cols != ne0 || (ie->n_mat != 1 && ie->n_mat != n_mat))) ie = NULL;
    double e = 0;
    for (int64_t m = 0; m < n_mat; m++) {
        const float *imw = NULL;
        if (ie) {
            if ((st = lmq_imatrix_weights(opts->imatrix, ti->name, ie->n_mat > 1 ? (int32_t)m : 0, b->w, ne0))) return st;
            imw = b->w;
        }
        const float *x = b->x + m * rows_per_mat * ne0;
        for (int64_t k = 0; k < n_s; k++) /* row k * rows / n_s */
            memcpy(b->s + k * ne0, x + (k * rows_per_mat / n_s) * ne0, (size_t)ne0 * sizeof(float));
        st = lmq_quantize_rows(type, b->s, b->q, n_s, ne0, imw, opts->n_threads);
        if (st) return lmq_error_prefix(st, "tensor '%s' -> %s", ti->name, lmq_type_name(type));
        double em = 0;
        for (int64_t r = 0; r < n_s; r++) {
            if ((st = lmq_dequantize_row(type, b->q + r * rb, b->y, ne0))) return st;
            const float *xr = b->s + r * ne0;
            for (int64_t j = 0; j < ne0; j++) {
                double d = (double)b->y[j] - (double)xr[j];
                em += (imw ? imw[j] : 1.0) * d * d;
            }
        }
        e += em * (double)rows_per_mat / (double)n_s;
    }
    *err = e;
    return LMQ_OK;
}

static int cmp_cand(const void *a, const void *b)
{
    const lmq_target_cand *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? -1 : 1;
    return x->type < y->type ? -1 : x->type > y->type;
}

lmq_status lmq_target_measure(const char *in_path, const lmq_quantize_opts *opts, const lmq_type *types,
                              size_t n_types, lmq_target_table **out)
{
    if (!out) return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_target_measure: out is NULL");
    *out = NULL;
    if (!in_path || !opts || !types || !n_types || n_types > LMQ_TARGET_MAX_CAND)
        return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_target_measure: bad arguments");
    lmq_quantize_plan *p = NULL;
    lmq_file *f = NULL;
    lmq_target_table *t = NULL;
    mbuf b = {0};
    lmq_status st = lmq_quantize_plan_model(in_path, opts, &p);
    if (st) return st;
    if ((st = lmq_file_open(in_path, &f))) goto out;
    if (!(t = table_new(p->n))) {
        st = lmq_error(LMQ_ERR_NOMEM, "out of memory");
        goto out;
    }
    t->source_id = lmq_file_id(f);
    uint64_t done = 0, total = 0; /* weights to measure, for opts->progress */
    for (size_t i = 0; i < p->n; i++) {
        const lmq_type_traits *et = lmq_type_get(p->entries[i].type);
        if (et && et->quantized && p->entries[i].why != LMQ_MIX_WHY_OVERRIDE) total += (uint64_t)p->entries[i].n_elements;
    }
    if (opts->progress) opts->progress(opts->progress_ctx, 0, total);
    for (size_t i = 0; i < p->n; i++) {
        const lmq_mix_tensor *mt = &p->tensors[i];
        const lmq_mix_entry *e = &p->entries[i];
        lmq_target_tensor *tt = &t->t[t->n++];
        if (!(tt->name = strdup(mt->name))) {
            st = lmq_error(LMQ_ERR_NOMEM, "out of memory");
            goto out;
        }
        tt->n_elements = e->n_elements;
        tt->ne0 = mt->ne[0];
        tt->scale = 1.0;
        tt->fixed_type = e->type;
        tt->fixed_bytes = e->bytes;
        t->n_elements += e->n_elements;
        const lmq_type_traits *et = lmq_type_get(e->type);
        bool quantized = et && et->quantized;
        if (!quantized || e->why == LMQ_MIX_WHY_OVERRIDE) continue; /* kept or pinned */
        const lmq_tensor_info *ti = lmq_file_find_tensor(f, mt->name);
        if (!ti) {
            st = lmq_error(LMQ_ERR_NOT_FOUND, "%s: tensor '%s' vanished", in_path, mt->name);
            goto out;
        }
        if ((st = load_f32(&b, ti, in_path))) goto out;
        for (size_t k = 0; k < n_types; k++) {
            if (!lmq_mix_type_storable(types[k]) || lmq_mix_fallback(types[k], mt->ne[0]) != types[k]) continue;
            lmq_target_cand *c = &tt->cand[tt->n_cand];
            c->type = types[k];
            c->bytes = lmq_row_size(types[k], mt->ne[0]) * (e->n_elements / mt->ne[0]);
            if ((st = tensor_err(&b, ti, opts, types[k], &c->err))) goto out;
            tt->n_cand++;
        }
        done += (uint64_t)e->n_elements;
        if (opts->progress) opts->progress(opts->progress_ctx, done, total);
        if (tt->n_cand == 0) continue; /* nothing fits its rows: keep the plan's type */
        qsort(tt->cand, (size_t)tt->n_cand, sizeof tt->cand[0], cmp_cand);
        tt->free_ = true;
    }
    *out = t;
    t = NULL;
out:
    free(b.x);
    free(b.y);
    free(b.w);
    free(b.s);
    free(b.q);
    lmq_target_table_free(t);
    lmq_file_close(f);
    lmq_quantize_plan_free(p);
    return st;
}

/* ====================================================================
 * Allocation
 * ==================================================================== */

static double pred(const lmq_target_tensor *t, int k)
{
    return t->scale * t->cand[k].err;
}

double lmq_target_predicted(const lmq_target_table *t)
{
    double s = 0;
    for (size_t i = 0; t && i < t->n; i++)
        if (t->t[i].free_) s += pred(&t->t[i], t->t[i].choice);
    return s;
}

lmq_status lmq_target_solve(lmq_target_table *t, int64_t budget, int64_t *total_bytes)
{
    if (!t) return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_target_solve: table is NULL");
    int64_t total = 0;
    for (size_t i = 0; i < t->n; i++) {
        lmq_target_tensor *x = &t->t[i];
        if (!x->free_) {
            total += x->fixed_bytes;
            continue;
        }
        /* the smallest candidate; among equal sizes the lowest error */
        x->choice = 0;
        for (int k = 1; k < x->n_cand && x->cand[k].bytes == x->cand[0].bytes; k++)
            if (pred(x, k) < pred(x, x->choice)) x->choice = k;
        total += x->cand[x->choice].bytes;
    }
    if (total > budget)
        return lmq_error(LMQ_ERR_INVALID_ARG, "target: %lld bytes do not fit even with the smallest types (%lld bytes needed)",
                         (long long)budget, (long long)total);
    for (;;) {
        double best = 0;
        size_t bi = 0;
        int bk = -1;
        for (size_t i = 0; i < t->n; i++) {
            const lmq_target_tensor *x = &t->t[i];
            if (!x->free_) continue;
            const lmq_target_cand *c = &x->cand[x->choice];
            for (int k = 0; k < x->n_cand; k++) {
                int64_t db = x->cand[k].bytes - c->bytes;
                double de = pred(x, x->choice) - pred(x, k);
                if (db <= 0 || de <= 0 || total + db > budget) continue;
                double r = de / (double)db;
                if (r > best) {
                    best = r;
                    bi = i;
                    bk = k;
                }
            }
        }
        if (bk < 0) break;
        lmq_target_tensor *x = &t->t[bi];
        total += x->cand[bk].bytes - x->cand[x->choice].bytes;
        x->choice = bk;
    }
    if (total_bytes) *total_bytes = total;
    return LMQ_OK;
}

/* ====================================================================
 * Cache file: "lmq-target 1 <source_id> <n>" then one line per tensor:
 * name free n_elements ne0 fixed_type fixed_bytes scale kld n_cand
 * (type bytes err)...
 * ==================================================================== */

lmq_status lmq_target_save(const lmq_target_table *t, const char *path)
{
    size_t cap = 4096 + t->n * (512 + LMQ_TARGET_MAX_CAND * 64), len = 0;
    char *buf = malloc(cap);
    if (!buf) return lmq_error(LMQ_ERR_NOMEM, "out of memory");
    len += (size_t)snprintf(buf + len, cap - len, "lmq-target 1 %llu %zu\n", (unsigned long long)t->source_id, t->n);
    for (size_t i = 0; i < t->n; i++) {
        const lmq_target_tensor *x = &t->t[i];
        len += (size_t)snprintf(buf + len, cap - len, "%s %d %lld %lld %d %lld %.17g %.17g %d", x->name, x->free_,
                                (long long)x->n_elements, (long long)x->ne0, (int)x->fixed_type,
                                (long long)x->fixed_bytes, x->scale, x->kld_measured, x->n_cand);
        for (int k = 0; k < x->n_cand; k++)
            len += (size_t)snprintf(buf + len, cap - len, " %d %lld %.17g", (int)x->cand[k].type,
                                    (long long)x->cand[k].bytes, x->cand[k].err);
        len += (size_t)snprintf(buf + len, cap - len, "\n");
    }
    lmq_status st = lmq_write_file_atomic(path, buf, len);
    free(buf);
    return st;
}

lmq_status lmq_target_load(const char *path, lmq_target_table **out)
{
    *out = NULL;
    char *buf = NULL;
    size_t len = 0;
    lmq_status st = lmq_read_file(path, (size_t)1 << 28, &buf, &len);
    if (st) return st;
    unsigned long long sid;
    size_t n;
    int off = 0;
    lmq_target_table *t = NULL;
    char *p = buf;
    if (sscanf(p, "lmq-target 1 %llu %zu\n%n", &sid, &n, &off) != 2 || off <= 0 || n > 1000000) goto bad;
    p += off;
    if (!(t = table_new(n))) {
        free(buf);
        return lmq_error(LMQ_ERR_NOMEM, "out of memory");
    }
    t->source_id = sid;
    for (size_t i = 0; i < n; i++) {
        lmq_target_tensor *x = &t->t[t->n];
        char name[1024];
        int fr, ft, nc;
        long long ne, ne0, fb;
        if (sscanf(p, "%1023s %d %lld %lld %d %lld %lg %lg %d%n", name, &fr, &ne, &ne0, &ft, &fb, &x->scale,
                   &x->kld_measured, &nc, &off) != 9 || nc < 0 || nc > LMQ_TARGET_MAX_CAND || ft < 0 ||
            ft >= LMQ_TYPE_COUNT)
            goto bad;
        p += off;
        if (!(x->name = strdup(name))) goto bad;
        t->n++;
        x->free_ = fr != 0;
        x->n_elements = ne;
        x->ne0 = ne0;
        x->fixed_type = (lmq_type)ft;
        x->fixed_bytes = fb;
        x->n_cand = nc;
        t->n_elements += ne;
        for (int k = 0; k < nc; k++) {
            int ty;
            long long by;
            if (sscanf(p, " %d %lld %lg%n", &ty, &by, &x->cand[k].err, &off) != 3 || ty < 0 || ty >= LMQ_TYPE_COUNT)
                goto bad;
            p += off;
            x->cand[k].type = (lmq_type)ty;
            x->cand[k].bytes = by;
        }
    }
    free(buf);
    *out = t;
    return LMQ_OK;
bad:
    free(buf);
    lmq_target_table_free(t);
    return lmq_error(LMQ_ERR_FORMAT, "%s: not a valid lmq-target cache file", path);
}
