/* The streaming model quantizer behind `lmq quantize` (lmq_convert.h).
 *
 * Source tensors are visited in file order. Each one is planned by the mix
 * (quantize/mix.c); a tensor that keeps its type is handed to the writer
 * straight from the mapping, any other is quantized a chunk of rows at a
 * time into one output buffer: float rows by lmq_quantize_rows_src() (each
 * thread converts and checks its own rows), others (dequantized sources,
 * error feedback) through an f32 buffer and lmq_quantize_rows() or
 * lmq_quantize_rows_gptq(). The pages of the source that were
 * read are released as the chunks go, so the resident set is about the
 * largest output tensor plus a chunk, whatever the model size. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lmq_convert.h"
#include "lmq_quant.h"

/* f32 elements converted per step (16 MiB). */
#define CHUNK_ELEMS ((int64_t)4 << 20)

/* ====================================================================
 * Sources: a model file, or an HF directory read from its headers
 * ==================================================================== */

typedef struct source {
    lmq_file *file;          /* .lmq or GGUF */
    lmq_safetensors *st;     /* HF directory (plans only) */
    lmq_meta *hf_meta;       /* config.json keys of the HF directory */
    size_t n;
    char **names;            /* [n] owned */
    lmq_mix_tensor *tensors; /* [n] */
    const lmq_tensor_info **infos; /* [n] (file sources) */
    uint64_t bytes;          /* source tensor data */
} source;

static void source_close(source *s)
{
    for (size_t i = 0; s->names && i < s->n; i++) free(s->names[i]);
    free(s->names);
    free(s->tensors);
    free(s->infos);
    lmq_file_close(s->file);
    lmq_safetensors_close(s->st);
    lmq_meta_free(s->hf_meta);
    memset(s, 0, sizeof *s);
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static lmq_status source_alloc(source *s, size_t n)
{
    s->names = calloc(n ? n : 1, sizeof *s->names);
    s->tensors = calloc(n ? n : 1, sizeof *s->tensors);
    s->infos = calloc(n ? n : 1, sizeof *s->infos);
    if (!s->names || !s->tensors || !s->infos) return lmq_error(LMQ_ERR_NOMEM, "out of memory");
    return LMQ_OK;
}

static lmq_status source_add(source *s, const char *name, lmq_type type, uint32_t n_dims, const int64_t *ne)
{
    size_t i = s->n;
    s->names[i] = strdup(name);
    if (!s->names[i]) return lmq_error(LMQ_ERR_NOMEM, "out of memory");
    lmq_mix_tensor *t = &s->tensors[i];
    t->name = s->names[i];
    t->type = type;
    t->n_dims = n_dims;
    for (uint32_t d = 0; d < LMQ_MAX_DIMS; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    s->n++;
    return LMQ_OK;
}

static lmq_status source_open_file(source *s, const char *path)
{
    lmq_status st = lmq_file_open(path, &s->file);
    if (st) return st;
    size_t n = lmq_file_n_tensors(s->file);
    if ((st = source_alloc(s, n))) return st;
    for (size_t i = 0; i < n; i++) {
        const lmq_tensor_info *ti = lmq_file_tensor(s->file, i);
        if ((st = source_add(s, ti->name, ti->type, ti->n_dims, ti->ne))) return st;
        s->infos[i] = ti;
        s->bytes += ti->nbytes;
    }
    return LMQ_OK;
}

/* The tensors lmq_convert_hf() would write, from the safetensors headers:
 * GGUF names, ggml shape order, 1-D tensors in f32 and 2-D ones in their
 * source dtype (the converter's "auto" type). */
static lmq_status source_open_hf(source *s, const char *dir)
{
    lmq_status st;
    if (!(s->hf_meta = lmq_meta_new())) return lmq_error(LMQ_ERR_NOMEM, "out of memory");
    if ((st = lmq_hf_config_to_meta(dir, s->hf_meta))) return st;
    if ((st = lmq_safetensors_open(dir, &s->st))) return st;
    size_t n = lmq_safetensors_count(s->st);
    if ((st = source_alloc(s, n))) return st;
    const char *an = "llama";
    lmq_meta_get_str(s->hf_meta, "general.architecture", &an, NULL);
    const lmq_arch *arch = lmq_arch_by_name(an);
    for (size_t i = 0; i < n; i++) {
        const lmq_st_tensor *t = lmq_safetensors_tensor(s->st, i);
        char name[256];
        if (lmq_hf_is_fused_experts(arch, t->name))
            return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: tensor '%s': the experts are split by lmq convert; convert "
                             "this mixture-of-experts model first, then quantize the container", dir, t->name);
        if (!lmq_hf_tensor_name_arch(arch, t->name, name, sizeof name)) continue;
        if (strstr(name, "_exps."))
            return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: tensor '%s': the experts are stacked by lmq convert; convert "
                             "this mixture-of-experts model first, then quantize the container", dir, t->name);
        if (!t->supported)
            return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s (lmq reads F32, F16, BF16)", dir,
                             t->name, t->dtype);
        if (t->n_dims < 1 || t->n_dims > LMQ_MAX_DIMS)
            return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: tensor '%s' has %u dimensions", dir, t->name, t->n_dims);
        int64_t ne[LMQ_MAX_DIMS];
        uint32_t n_dims = t->n_dims;
        for (uint32_t d = 0; d < n_dims; d++) ne[d] = t->shape[n_dims - 1 - d];
        lmq_type type = n_dims == 1 ? LMQ_TYPE_F32 : t->type;
        if (strstr(name, "ssm_conv1d.")) { /* [C, 1, K] -> {K, C}, kept in f32 */
            ne[1] = ne[n_dims - 1];
            n_dims = 2;
            type = LMQ_TYPE_F32;
        }
        if ((st = source_add(s, name, type, n_dims, ne))) return st;
        s->bytes += t->nbytes;
    }
    return LMQ_OK;
}

static const lmq_meta *source_meta(const source *s)
{
    return s->file ? lmq_file_meta(s->file) : s->hf_meta;
}

/* ====================================================================
 * Planning
 * ==================================================================== */

void lmq_quantize_plan_free(lmq_quantize_plan *p)
{
    if (!p) return;
    for (size_t i = 0; p->names && i < p->n; i++) free(p->names[i]);
    free(p->names);
    free(p->tensors);
    free(p->entries);
    free(p->override_hits);
    free(p);
}

static bool type_is_quantized(lmq_type t)
{
    const lmq_type_traits *tt = lmq_type_get(t);
    return tt && tt->quantized;
}

/* Plans the source's tensors; refuses requantization. The plan takes over
 * the source's name strings. */
static lmq_status plan_source(source *src, const char *in_path, const lmq_quantize_opts *opts,
                              lmq_quantize_plan **out)
{
    *out = NULL;
    const lmq_mix_info *mi;
    lmq_status st = lmq_mix_from_name(opts->mix, &mi);
    if (st) return st;
    lmq_quantize_plan *p = calloc(1, sizeof *p);
    if (!p) return lmq_error(LMQ_ERR_NOMEM, "out of memory");
    p->mix = mi;
    size_t n = src->n;
    p->entries = calloc(n ? n : 1, sizeof *p->entries);
    p->override_hits = calloc(opts->n_overrides ? opts->n_overrides : 1, sizeof *p->override_hits);
    if (!p->entries || !p->override_hits) {
        lmq_quantize_plan_free(p);
        return lmq_error(LMQ_ERR_NOMEM, "out of memory");
    }
    lmq_mix_model model;
    lmq_mix_model_from_meta(source_meta(src), &model);
    lmq_mix_opts mo = {mi, opts->pure, opts->output_type, opts->token_embd_type, opts->overrides,
                       opts->n_overrides};
    if ((st = lmq_mix_plan(&mo, &model, src->tensors, n, p->entries, p->override_hits))) {
        lmq_quantize_plan_free(p);
        return st;
    }
    for (size_t i = 0; i < n; i++) {
        const lmq_mix_tensor *t = &src->tensors[i];
        const lmq_mix_entry *e = &p->entries[i];
        /* a quantized tensor may be copied as it is when the plan keeps it (MXFP4 experts) or the user
         * names its own type for it; MXFP4 may become any type the user names */
        const bool named = e->why == LMQ_MIX_WHY_OVERRIDE || e->why == LMQ_MIX_WHY_OUTPUT ||
                           e->why == LMQ_MIX_WHY_TOKEN_EMBD;
        const bool copied = e->type == t->type && (e->why == LMQ_MIX_WHY_KEEP || named);
        const bool asked = t->type == LMQ_TYPE_MXFP4 && named;
        if (type_is_quantized(t->type) && !copied && !asked &&
            (type_is_quantized(mi->base) || type_is_quantized(e->type))) {
            lmq_quantize_plan_free(p);
            return lmq_error(LMQ_ERR_UNSUPPORTED,
                             "%s: tensor '%s' is already quantized (%s); quantize from the f32/f16/bf16 model "
                             "(requantizing loses accuracy), or use --type f32/f16/bf16 to dequantize",
                             in_path, t->name, lmq_type_name(t->type));
        }
        lmq_quantize_stats *s = &p->stats;
        s->n_tensors++;
        s->n_quantized += type_is_quantized(e->type);
        s->n_fallback += e->type != e->wanted;
        s->n_elements += (uint64_t)e->n_elements;
        s->bytes_out += (uint64_t)e->bytes;
    }
    p->stats.bytes_in = src->bytes;
    p->stats.bpw = p->stats.n_elements ? (double)p->stats.bytes_out * 8.0 / (double)p->stats.n_elements : 0.0;
    /* hand the names over */
    p->n = n;
    p->names = src->names;
    p->tensors = src->tensors;
    src->names = NULL;
    src->tensors = NULL;
    *out = p;
    return LMQ_OK;
}

lmq_status lmq_quantize_plan_model(const char *in_path, const lmq_quantize_opts *opts, lmq_quantize_plan **out)
{
    if (!out) return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_quantize_plan_model: out is NULL");
    *out = NULL;
    if (!in_path || !opts) return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_quantize_plan_model: bad arguments");
    const lmq_mix_info *mi;
    lmq_status st = lmq_mix_from_name(opts->mix, &mi);
    if (st) return st;
    source src = {0};
    st = is_dir(in_path) ? source_open_hf(&src, in_path) : source_open_file(&src, in_path);
    if (!st) st = plan_source(&src, in_path, opts, out);
    source_close(&src);
    return st;
}

/* ====================================================================
 * Writing
 * ==================================================================== */

/* Drops the source pages of [begin, end) from the resident set. Only for
 * uncompressed tensors, whose bytes are a read-only private file mapping
 * (pages come back from the file if touched again). */
static void release_pages(const void *begin, const void *end)
{
    long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0) return;
    uintptr_t b = ((uintptr_t)begin + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1);
    uintptr_t e = (uintptr_t)end & ~((uintptr_t)pg - 1);
    if (e > b) madvise((void *)b, e - b, MADV_DONTNEED);
}

/* Finds the first non-finite value of n floats; -1 when all are finite. */
static int64_t first_non_finite(const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return i;
    return -1;
}

typedef struct qctx {
    const lmq_quantize_opts *opts;
    const char *in_path;
    int n_threads;
    float *f32;          /* [CHUNK rows * ne0] */
    size_t f32_cap;      /* floats */
    uint8_t *out;        /* one output tensor */
    size_t out_cap;
    float *w;            /* [ne0] importance weights of the current matrix */
    size_t w_cap;
    uint64_t n_imatrix;  /* tensors quantized with weights */
    uint64_t n_gptq;     /* tensors quantized with error feedback */
    uint64_t done, total; /* weights, for progress */
} qctx;

static lmq_status grow(void **buf, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return LMQ_OK;
    free(*buf);
    *buf = malloc(need * elem);
    *cap = *buf ? need : 0;
    return *buf ? LMQ_OK : lmq_error(LMQ_ERR_NOMEM, "out of memory (%zu bytes)", need * elem);
}

/* Source rows [r0, r0 + nr) as f32 in q->f32, checked for NaN/Inf. */
static lmq_status rows_to_f32(qctx *q, const lmq_tensor_info *ti, int64_t r0, int64_t nr)
{
    const int64_t ne0 = ti->ne[0];
    const int64_t row_bytes = lmq_row_size(ti->type, ne0);
    const uint8_t *src = (const uint8_t *)ti->data + r0 * row_bytes;
    lmq_status st = grow((void **)&q->f32, &q->f32_cap, (size_t)(nr * ne0), sizeof(float));
    if (st) return st;
    if (!type_is_quantized(ti->type)) {
        st = lmq_convert_float_row(ti->type, src, LMQ_TYPE_F32, q->f32, ne0 * nr);
    } else {
        st = LMQ_OK;
        for (int64_t r = 0; r < nr && !st; r++)
            st = lmq_dequantize_row(ti->type, src + r * row_bytes, q->f32 + r * ne0, ne0);
    }
    if (st) return lmq_error_prefix(st, "%s: tensor '%s'", q->in_path, ti->name);
    int64_t bad = first_non_finite(q->f32, ne0 * nr);
    if (bad >= 0)
        return lmq_error(LMQ_ERR_FORMAT, "%s: tensor '%s' has a non-finite weight (%g) at row %lld, column %lld",
                         q->in_path, ti->name, (double)q->f32[bad], (long long)(r0 + bad / ne0),
                         (long long)(bad % ne0));
    return LMQ_OK;
}

static void report(qctx *q, uint64_t add)
{
    q->done += add;
    if (q->opts->progress) q->opts->progress(q->opts->progress_ctx, q->done, q->total);
}

/* Quantizes the nrows rows of ti into out (nrows * lmq_row_size(type, ne0)
 * bytes) a chunk at a time: importance weights per matrix, error feedback
 * where opts give a factor; the source pages read are released when
 * `releasable`. */
static lmq_status quantize_rows_of(qctx *q, const lmq_tensor_info *ti, lmq_type type, int64_t nrows, uint8_t *out,
                                   bool releasable)
{
    const int64_t ne0 = ti->ne[0];
    lmq_status st;
    const int64_t out_row = lmq_row_size(type, ne0);
    const int64_t in_row = lmq_row_size(ti->type, ne0);
    int64_t step = ne0 > 0 && CHUNK_ELEMS / ne0 > 0 ? CHUNK_ELEMS / ne0 : 1;
    /* 3-D tensors: n_mat matrices (experts) of mat_rows rows each. A chunk
     * never crosses experts: importance weights and error-feedback factors
     * are per expert. */
    const int64_t n_mat = ti->n_dims >= 3 ? ti->ne[2] : 1;
    const int64_t mat_rows = n_mat > 1 ? nrows / n_mat : nrows;
    /* importance weights: one vector per matrix, or one for all */
    const lmq_imatrix_entry *ie = type_is_quantized(type) ? lmq_imatrix_find(q->opts->imatrix, ti->name) : NULL;
    if (ie) {
        if (ie->n_cols != ne0 || (ie->n_mat != 1 && ie->n_mat != n_mat))
            return lmq_error(LMQ_ERR_INVALID_ARG, "%s: imatrix entry '%s' is %lld x %d, the tensor has rows of %lld and %lld matrices",
                             q->opts->imatrix_path ? q->opts->imatrix_path : "imatrix", ti->name, (long long)ie->n_cols,
                             ie->n_mat, (long long)ne0, (long long)n_mat);
        if ((st = grow((void **)&q->w, &q->w_cap, (size_t)ne0, sizeof(float)))) return st;
        q->n_imatrix++;
    }
    /* error feedback: 2-D tensors and the experts of 3-D ones, of a type
     * with a grid, when the caller has their input's covariance */
    const bool fb = q->opts->gptq_factor && (ti->n_dims == 2 || ti->n_dims == 3) && lmq_gptq_supported(type);
    bool used_fb = false;
    int32_t w_mat = -1; /* matrix whose weights q->w holds */
    for (int64_t r0 = 0, nr = 0; r0 < nrows; r0 += nr) {
        const int32_t mat = (int32_t)(r0 / mat_rows);
        nr = nrows - r0 < step ? nrows - r0 : step;
        if (r0 + nr > (int64_t)(mat + 1) * mat_rows) nr = (int64_t)(mat + 1) * mat_rows - r0;
        const float *imw = NULL;
        if (ie) {
            const int32_t im_mat = ie->n_mat > 1 ? mat : 0;
            if (im_mat != w_mat && (st = lmq_imatrix_weights(q->opts->imatrix, ti->name, im_mat, q->w, ne0))) return st;
            w_mat = im_mat;
            imw = q->w;
        }
        const float *gptq_u =
            fb ? q->opts->gptq_factor(q->opts->gptq_user, ti->name, n_mat > 1 ? mat : -1, ne0) : NULL;
        used_fb |= gptq_u != NULL;
        if (!gptq_u && !type_is_quantized(ti->type)) {
            /* float source: converted row by row on the quantizing threads */
            st = lmq_quantize_rows_src(type, ti->type, (const uint8_t *)ti->data + r0 * in_row, out + r0 * out_row,
                                       nr, ne0, imw, q->n_threads);
            /* a non-finite weight: the message that names the tensor's row and column */
            lmq_status cs;
            if (st == LMQ_ERR_INVALID_ARG && (cs = rows_to_f32(q, ti, r0, nr))) return cs;
        } else {
            if ((st = rows_to_f32(q, ti, r0, nr))) return st;
            st = gptq_u ? lmq_quantize_rows_gptq(type, q->f32, out + r0 * out_row, nr, ne0, imw, gptq_u, q->n_threads)
                        : lmq_quantize_rows(type, q->f32, out + r0 * out_row, nr, ne0, imw, q->n_threads);
        }
        if (st) return lmq_error_prefix(st, "%s: tensor '%s' -> %s", q->in_path, ti->name, lmq_type_name(type));
        if (releasable)
            release_pages((const uint8_t *)ti->data + r0 * in_row, (const uint8_t *)ti->data + (r0 + nr) * in_row);
        report(q, (uint64_t)(nr * ne0));
    }
    q->n_gptq += used_fb;
    return LMQ_OK;
}

/* Writes one tensor as planned. */
static lmq_status write_tensor(qctx *q, lmq_writer *w, const lmq_tensor_info *ti, const lmq_mix_entry *e)
{
    const int64_t ne0 = ti->ne[0];
    const int64_t nrows = ne0 > 0 ? e->n_elements / ne0 : 0;
    const bool releasable = ti->codec == LMQ_CODEC_NONE;
    lmq_status st;

    if (e->type == ti->type) {
        /* kept as is; float data is still checked for NaN/Inf */
        if (!type_is_quantized(ti->type) && nrows > 0) {
            int64_t step = CHUNK_ELEMS / ne0 > 0 ? CHUNK_ELEMS / ne0 : 1;
            if ((st = grow((void **)&q->f32, &q->f32_cap, (size_t)(step * ne0), sizeof(float)))) return st;
            for (int64_t r0 = 0; r0 < nrows; r0 += step) {
                int64_t nr = nrows - r0 < step ? nrows - r0 : step;
                if ((st = rows_to_f32(q, ti, r0, nr))) return st;
            }
        }
        st = lmq_writer_add_tensor(w, ti->name, ti->type, ti->n_dims, ti->ne, ti->data, ti->nbytes);
        if (releasable) release_pages(ti->data, (const uint8_t *)ti->data + ti->nbytes);
        report(q, (uint64_t)e->n_elements);
        return st;
    }

    bool pre_fb = false;
    const void *pre = q->opts->prequantized
                          ? q->opts->prequantized(q->opts->prequantized_user, ti->name, e->type, (uint64_t)e->bytes, &pre_fb)
                          : NULL;
    if (pre) {
        q->n_gptq += pre_fb;
        report(q, (uint64_t)e->n_elements);
        return lmq_writer_add_tensor(w, ti->name, e->type, ti->n_dims, ti->ne, pre, (uint64_t)e->bytes);
    }
    if ((st = grow((void **)&q->out, &q->out_cap, (size_t)e->bytes, 1))) return st;
    if ((st = quantize_rows_of(q, ti, e->type, nrows, q->out, releasable))) return st;
    return lmq_writer_add_tensor(w, ti->name, e->type, ti->n_dims, ti->ne, q->out, (uint64_t)e->bytes);
}

/* llama-quantize's provenance keys for an importance matrix. */
static lmq_status imatrix_meta(lmq_meta *m, const lmq_quantize_opts *opts)
{
    const lmq_imatrix *im = opts->imatrix;
    const char *path = opts->imatrix_path ? opts->imatrix_path : "";
    const char *base = strrchr(path, '/');
    lmq_status st = lmq_meta_set_str(m, "quantize.imatrix.file", base ? base + 1 : path);
    if (!st && lmq_imatrix_n_datasets(im)) st = lmq_meta_set_str(m, "quantize.imatrix.dataset", lmq_imatrix_dataset(im, 0));
    if (!st) st = lmq_meta_set_i32(m, "quantize.imatrix.entries_count", (int32_t)lmq_imatrix_count(im));
    if (!st) st = lmq_meta_set_i32(m, "quantize.imatrix.chunks_count", (int32_t)lmq_imatrix_chunk_count(im));
    return st;
}

/* The input's metadata plus what the quantization records. */
static lmq_status fill_meta(lmq_meta *m, const lmq_file *f, const lmq_quantize_plan *p,
                            const lmq_quantize_opts *opts)
{
    const lmq_meta *in = lmq_file_meta(f);
    lmq_status st = LMQ_OK;
    for (size_t i = 0; i < lmq_meta_count(in) && !st; i++) {
        const char *k = lmq_meta_key(in, i);
        if (!strncmp(k, "lmq.quantize.", 13) || !strncmp(k, "quantize.imatrix.", 17)) continue; /* replaced below */
        st = lmq_meta_set_value(m, k, lmq_meta_value(in, i));
    }
    if (st) return st;
    if (p->mix->llama_ftype >= 0) st = lmq_meta_set_u32(m, "general.file_type", (uint32_t)p->mix->llama_ftype);
    else if (lmq_meta_find(m, "general.file_type")) st = lmq_meta_remove(m, "general.file_type");
    if (!st) st = lmq_meta_set_u32(m, "general.quantization_version", 2);
    if (!st) st = lmq_meta_set_str(m, "lmq.quantize.mix", p->mix->name);
    if (!st) st = lmq_meta_set_str(m, "lmq.quantize.version", LMQ_QUANTIZE_VERSION);
    if (!st) st = lmq_meta_set_u64(m, "lmq.quantize.source_id", lmq_file_id(f));
    if (!st && opts->pure) st = lmq_meta_set_bool(m, "lmq.quantize.pure", true);
    if (!st && opts->n_overrides) {
        char **strs = calloc(opts->n_overrides, sizeof *strs);
        if (!strs) return lmq_error(LMQ_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < opts->n_overrides && !st; i++) {
            const lmq_mix_override *o = &opts->overrides[i];
            size_t len = strlen(o->pattern) + 32;
            if (!(strs[i] = malloc(len))) st = lmq_error(LMQ_ERR_NOMEM, "out of memory");
            else snprintf(strs[i], len, "%s=%s", o->pattern, lmq_type_name(o->type));
        }
        if (!st) st = lmq_meta_set_str_arr(m, "lmq.quantize.overrides", (const char *const *)strs, NULL,
                                           opts->n_overrides);
        for (size_t i = 0; i < opts->n_overrides; i++) free(strs[i]);
        free(strs);
    }
    if (!st && opts->imatrix) st = imatrix_meta(m, opts);
    if (!st && opts->gptq_factor) {
        const char *cal = opts->gptq_calibration ? opts->gptq_calibration : "";
        const char *base = strrchr(cal, '/');
        st = lmq_meta_set_str(m, "lmq.quantize.gptq_calibration", base ? base + 1 : cal);
        if (!st) st = lmq_meta_set_i32(m, "lmq.quantize.gptq_chunks", opts->gptq_chunks);
    }
    for (size_t i = 0; !st && opts->extra_meta && i < lmq_meta_count(opts->extra_meta); i++)
        st = lmq_meta_set_value(m, lmq_meta_key(opts->extra_meta, i), lmq_meta_value(opts->extra_meta, i));
    if (!st && lmq_file_kind_of(f) == LMQ_FILE_GGUF && !lmq_meta_find(m, "lmq.rope.layout"))
        st = lmq_meta_set_str(m, "lmq.rope.layout", "normal");
    return st;
}

static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static lmq_status quantize_file(const char *in_path, const char *out_path, const lmq_quantize_opts *opts,
                                lmq_quantize_stats *stats, double t0)
{
    if (same_file(in_path, out_path))
        return lmq_error(LMQ_ERR_INVALID_ARG, "%s: the output would overwrite the input", out_path);
    source src = {0};
    lmq_quantize_plan *p = NULL;
    lmq_writer *w = NULL;
    qctx q = {0};
    lmq_status st = source_open_file(&src, in_path);
    if (!st) st = plan_source(&src, in_path, opts, &p);
    if (st) goto out;

    q.opts = opts;
    q.in_path = in_path;
    q.n_threads = opts->n_threads > 0 ? opts->n_threads : lmq_n_cpus();
    q.total = p->stats.n_elements;

    lmq_writer_opts wo = {opts->codec, 0};
    if ((st = lmq_writer_open(out_path, &wo, &w))) goto out;
    if ((st = fill_meta(lmq_writer_meta(w), src.file, p, opts))) goto out;
    for (size_t i = 0; i < p->n; i++)
        if ((st = write_tensor(&q, w, src.infos[i], &p->entries[i]))) goto out;
    st = lmq_writer_finish(w);
    w = NULL;
    if (st) goto out;

    if (stats) {
        *stats = p->stats;
        stats->n_imatrix = q.n_imatrix;
        stats->n_gptq = q.n_gptq;
        struct stat sb;
        stats->file_bytes = stat(out_path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
        stats->seconds = lmq_time_s() - t0;
    }
out:
    lmq_writer_abort(w);
    free(q.f32);
    free(q.out);
    free(q.w);
    lmq_quantize_plan_free(p);
    source_close(&src);
    return st;
}

lmq_status lmq_quantize_model(const char *in_path, const char *out_path, const lmq_quantize_opts *opts,
                              lmq_quantize_stats *stats)
{
    double t0 = lmq_time_s();
    if (!in_path || !out_path || !opts) return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_quantize_model: bad arguments");
    const lmq_mix_info *mi;
    lmq_status st = lmq_mix_from_name(opts->mix, &mi);
    if (st) return st;
    if (!is_dir(in_path)) return quantize_file(in_path, out_path, opts, stats, t0);

    /* HF directory: plan first (cheap refusals), convert to a temporary
     * container next to the output, quantize that, remove it. */
    lmq_quantize_plan *p = NULL;
    if ((st = lmq_quantize_plan_model(in_path, opts, &p))) return st;
    lmq_quantize_plan_free(p);
    size_t len = strlen(out_path) + 48;
    char *tmp = malloc(len);
    if (!tmp) return lmq_error(LMQ_ERR_NOMEM, "out of memory");
    snprintf(tmp, len, "%s.hfsrc.%ld.lmq", out_path, (long)getpid());
    lmq_convert_opts co = {0};
    co.out_type = LMQ_CONVERT_TYPE_AUTO;
    co.codec = LMQ_CODEC_NONE;
    co.n_threads = opts->n_threads;
    st = lmq_convert_hf(in_path, tmp, &co, NULL);
    if (!st) st = quantize_file(tmp, out_path, opts, stats, t0);
    if (unlink(tmp) != 0 && errno != ENOENT && !st)
        st = lmq_error(LMQ_ERR_IO, "%s: cannot remove: %s", tmp, strerror(errno));
    free(tmp);
    return st;
}

lmq_status lmq_quantize_tensor(const char *in_path, const lmq_tensor_info *ti, lmq_type type,
                               const lmq_quantize_opts *opts, void *dst, size_t cap, bool *used_gptq)
{
    if (used_gptq) *used_gptq = false;
    if (!ti || !dst || !opts || ti->n_dims < 1 || ti->ne[0] <= 0)
        return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_quantize_tensor: bad arguments");
    const lmq_type_traits *tt = lmq_type_get(type);
    if (!tt || !tt->quantized || !lmq_mix_type_storable(type))
        return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_quantize_tensor: %s is not a quantized type", lmq_type_name(type));
    if (type_is_quantized(ti->type))
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: tensor '%s' is already quantized (%s)", in_path ? in_path : "model",
                         ti->name, lmq_type_name(ti->type));
    const int64_t ne0 = ti->ne[0];
    if (ne0 % tt->block_size)
        return lmq_error(LMQ_ERR_INVALID_ARG, "tensor '%s': rows of %lld do not divide into %s blocks", ti->name,
                         (long long)ne0, lmq_type_name(type));
    int64_t nrows = 1;
    for (uint32_t d = 1; d < ti->n_dims; d++) nrows *= ti->ne[d];
    if ((uint64_t)nrows * (uint64_t)lmq_row_size(type, ne0) > cap)
        return lmq_error(LMQ_ERR_LIMIT, "lmq_quantize_tensor: '%s' in %s needs %lld bytes, the buffer has %zu", ti->name,
                         lmq_type_name(type), (long long)(nrows * lmq_row_size(type, ne0)), cap);
    qctx q;
    memset(&q, 0, sizeof q);
    q.opts = opts;
    q.in_path = in_path ? in_path : "model";
    q.n_threads = opts->n_threads > 0 ? opts->n_threads : lmq_n_cpus();
    lmq_status st = quantize_rows_of(&q, ti, type, nrows, dst, false);
    if (used_gptq) *used_gptq = q.n_gptq > 0;
    free(q.f32);
    free(q.w);
    return st;
}
