/* The per-tensor KLD scale of size-targeted plans (lmq_calib.h): one tensor
 * at a time quantized and swapped into the loaded float model, the mean
 * KLD against the float model's own log-probs on calibration text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lmq_calib.h"
#include "lmq_quant.h"
#include <math.h>

void lmq_target_name_regex(const char *name, char *out, size_t cap)
{
    size_t k = 0;
    if (cap < 4) {
        if (cap) out[0] = 0;
        return;
    }
    out[k++] = '^';
    for (const char *p = name; *p && k + 4 < cap; p++) {
        if (strchr(".[]()*+?{}|^$\\", *p)) out[k++] = '\\';
        out[k++] = *p;
    }
    out[k++] = '$';
    out[k] = 0;
}

#define MIX(h, v) ((h) = (h) * 0x100000001b3ULL ^ (uint64_t)(v))

/* The fit's method, in the cache key: bump it when the fitted scales of the
 * same inputs can change (2: measured against a q8_0 copy of the model;
 * the errors of lmq_target_measure on at most 512 rows per matrix). */
#define TARGET_FIT_VERSION "2 q8_0-reference, 512-row errors"

uint64_t lmq_target_cache_key(const lmq_quantize_opts *qo, uint64_t source_id, const char *text, size_t text_len,
                              int chunks)
{
    uint64_t h = source_id ^ 0x9e3779b97f4a7c15ULL;
    MIX(h, lmq_hash64(LMQ_QUANTIZE_VERSION, strlen(LMQ_QUANTIZE_VERSION)));
    MIX(h, lmq_hash64(TARGET_FIT_VERSION, strlen(TARGET_FIT_VERSION)));
    for (size_t i = 0; i < lmq_imatrix_count(qo->imatrix); i++) {
        const lmq_imatrix_entry *e = lmq_imatrix_at(qo->imatrix, i);
        MIX(h, lmq_hash64(e->name, strlen(e->name)));
        MIX(h, lmq_hash64(e->sum2, (size_t)(e->n_cols * e->n_mat) * sizeof(double)));
        MIX(h, lmq_hash64(e->counts, (size_t)e->n_mat * sizeof(double)));
    }
    if (text) MIX(h, lmq_hash64(text, text_len));
    MIX(h, chunks);
    for (size_t i = 0; i < qo->n_overrides; i++) {
        MIX(h, lmq_hash64(qo->overrides[i].pattern, strlen(qo->overrides[i].pattern)));
        MIX(h, qo->overrides[i].type);
    }
    MIX(h, (uint64_t)qo->output_type * 31u ^ (uint64_t)qo->token_embd_type);
    /* the per-tensor fit quantizes with feedback under --gptq */
    if (qo->gptq_factor) MIX(h, 0x6770747100000000ULL | (uint64_t)qo->gptq_chunks);
    return h;
}

static lmq_status scratch_file(const lmq_calib_params *p, char *path, size_t cap)
{
    if (p->scratch_path) {
        snprintf(path, cap, "%s", p->scratch_path);
        return LMQ_OK;
    }
    const char *dir = getenv("TMPDIR");
    snprintf(path, cap, "%s/lmq-fit-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0) return lmq_error(LMQ_ERR_IO, "target fit: cannot create a scratch file in %s", dir && *dir ? dir : "/tmp");
    close(fd);
    return LMQ_OK;
}

/* Quantizes x to its first candidate's type (into *buf, grown as needed)
 * and swaps it into the model in place of its weights. *swapped is false
 * for a tensor the model cannot swap (experts, fused views: the fit gives
 * it the mean scale). */
static lmq_status swap_in_candidate(lmq_model *m, const lmq_target_tensor *x, const lmq_quantize_opts *qo,
                                    uint8_t **buf, size_t *cap, bool *swapped)
{
    *swapped = false;
    const lmq_file *f = lmq_model_file(m);
    const lmq_tensor_info *ti = lmq_file_find_tensor(f, x->name);
    const lmq_type ty = x->cand[0].type;
    if (!ti)
        return lmq_error(LMQ_ERR_NOT_FOUND, "%s: tensor '%s' of the plan is not in the model", lmq_file_path(f), x->name);
    int64_t rows = 1;
    for (uint32_t d = 1; d < ti->n_dims; d++) rows *= ti->ne[d];
    const size_t need = (size_t)rows * (size_t)lmq_row_size(ty, ti->ne[0]);
    if (need > *cap) {
        free(*buf);
        if (!(*buf = malloc(need))) {
            *cap = 0;
            return lmq_error(LMQ_ERR_NOMEM, "target fit: out of memory for '%s' (%zu bytes)", x->name, need);
        }
        *cap = need;
    }
    lmq_status st = lmq_quantize_tensor(lmq_file_path(f), ti, ty, qo, *buf, *cap, NULL);
    if (st) return st;
    if (lmq_model_swap_weight(m, x->name, ty, *buf) != LMQ_OK) {
        lmq_error_clear();
        return LMQ_OK;
    }
    *swapped = true;
    return LMQ_OK;
}

/* ======================================================================
 * The fit's reference: a q8_0 copy of the float weights, swapped in for the
 * fit's forward passes (the quantized panel kernels against the float
 * BLAS path) and swapped out again before returning.
 * ====================================================================== */

#define FIT_REF_TYPE LMQ_TYPE_Q8_0

/* ref[i]: table tensor i's q8_0 rows, swapped into m; NULL where the
 * tensor stays as loaded (not a whole float 2-D weight, rows q8_0's blocks
 * do not divide, a weight the model cannot swap). */
static lmq_status ref_build(lmq_model *m, const lmq_target_table *t, const lmq_quantize_opts *qo, uint8_t **ref)
{
    const lmq_file *f = lmq_model_file(m);
    lmq_quantize_opts ro = *qo;
    ro.gptq_factor = NULL; /* plain q8_0: the perturbation is the candidate's */
    for (size_t i = 0; i < t->n; i++) {
        const lmq_tensor_info *ti = lmq_file_find_tensor(f, t->t[i].name);
        if (!ti || ti->n_dims != 2) continue;
        const lmq_type_traits *tt = lmq_type_get(ti->type);
        const int64_t rb = lmq_row_size(FIT_REF_TYPE, ti->ne[0]);
        if (!tt || tt->quantized || rb <= 0 || 8 * tt->type_size <= 9 * tt->block_size) continue; /* not float, or not larger */
        const size_t need = (size_t)rb * (size_t)ti->ne[1];
        if (!(ref[i] = malloc(need)))
            return lmq_error(LMQ_ERR_NOMEM, "target fit: out of memory for the q8_0 copy of '%s' (%zu bytes)", ti->name,
                             need);
        lmq_status st = lmq_quantize_tensor(lmq_file_path(f), ti, FIT_REF_TYPE, &ro, ref[i], need, NULL);
        if (st) return st;
        if (lmq_model_swap_weight(m, ti->name, FIT_REF_TYPE, ref[i]) != LMQ_OK) {
            lmq_error_clear();
            free(ref[i]);
            ref[i] = NULL;
        }
    }
    return LMQ_OK;
}

/* Puts tensor i of t back to its reference rows (or as loaded). */
static lmq_status ref_restore(lmq_model *m, const lmq_target_table *t, uint8_t *const *ref, size_t i)
{
    if (ref && ref[i]) return lmq_model_swap_weight(m, t->t[i].name, FIT_REF_TYPE, ref[i]);
    return lmq_model_swap_weight(m, t->t[i].name, LMQ_TYPE_COUNT, NULL);
}

/* Every reference tensor back to its loaded rows; frees the copies. */
static void ref_free(lmq_model *m, const lmq_target_table *t, uint8_t **ref)
{
    for (size_t i = 0; ref && i < t->n; i++) {
        if (!ref[i]) continue;
        if (lmq_model_swap_weight(m, t->t[i].name, LMQ_TYPE_COUNT, NULL) != LMQ_OK) lmq_error_clear();
        free(ref[i]);
    }
    free(ref);
}

/* The fit through lmq_perplexity: a whole evaluation per tensor (models
 * whose blocks cannot start from a residual stream: Gemma 4). */
static lmq_status fit_full(lmq_model *m, lmq_target_table *t, const lmq_quantize_opts *qo, const int32_t *toks,
                           size_t n_toks, const lmq_calib_params *p, uint8_t *const *ref)
{
    char logits[4096];
    lmq_status st = scratch_file(p, logits, sizeof logits);
    if (st) return st;
    uint8_t *buf = NULL;
    size_t cap = 0;
    lmq_ppl_params pp = lmq_ppl_default_params();
    pp.n_ctx = p->n_ctx > 0 ? p->n_ctx : 256;
    pp.n_chunks = p->n_chunks;
    pp.n_threads = p->n_threads;
    pp.save_logits = logits;
    lmq_ppl_result r;
    if ((st = lmq_perplexity(m, toks, (int64_t)n_toks, &pp, &r))) goto out;
    pp.save_logits = NULL;
    pp.kld_base = logits;

    size_t n_free = 0, done = 0, n_fit = 0;
    double scale_sum = 0;
    for (size_t i = 0; i < t->n; i++) n_free += t->t[i].free_;
    if (p->progress) p->progress(p->progress_ctx, "fit", 0, (int64_t)n_free, NULL);
    for (size_t i = 0; i < t->n; i++) {
        lmq_target_tensor *x = &t->t[i];
        if (!x->free_) continue;
        x->scale = -1; /* not measured yet */
        bool swapped = false;
        if ((st = swap_in_candidate(m, x, qo, &buf, &cap, &swapped))) goto out;
        if (swapped) {
            st = lmq_perplexity(m, toks, (int64_t)n_toks, &pp, &r);
            lmq_status rs = ref_restore(m, t, ref, i);
            if (st || (st = rs)) goto out;
            x->kld_measured = r.kld.kld_mean;
            double kld = r.kld.kld_mean > 1e-9 ? r.kld.kld_mean : 1e-9;
            x->scale = x->cand[0].err > 0 ? kld / x->cand[0].err : 0;
            scale_sum += x->scale;
            n_fit++;
        }
        done++;
        if (p->progress) p->progress(p->progress_ctx, "fit", (int64_t)done, (int64_t)n_free, x->name);
    }
    /* tensors the model could not swap: the mean of the measured scales */
    for (size_t i = 0; i < t->n; i++)
        if (t->t[i].free_ && t->t[i].scale < 0) t->t[i].scale = n_fit ? scale_sum / (double)n_fit : 1.0;
out:
    unlink(logits);
    free(buf);
    return st;
}

/* ======================================================================
 * The fit from cached streams: the float model's residual stream entering
 * every block (of every chunk) is kept, so a tensor of block b is measured
 * by running blocks b.. and the head only; the float model's log-probs are
 * kept in memory (exact, not the rounded logits file). Chunks, BOS and the
 * scored positions are the perplexity method's (the second half of each
 * chunk), so the KLD is lmq_perplexity's up to the base's rounding.
 * ====================================================================== */

typedef struct fit_ctx {
    lmq_model *m;
    lmq_context *c;
    int32_t n_ctx, n_chunks, first, n_scored, nv, L;
    size_t d;
    int32_t *toks;   /* n_chunks x n_ctx, BOS substituted */
    float **S;       /* [L + 1]: the streams entering block l for every chunk (S[L]: after the last block); NULL: not kept */
    float *base;     /* n_chunks x n_scored x nv: the float model's log-probs */
    float *xb;       /* n_ctx x d */
    double rel_se;   /* stop a tensor's chunks at this relative standard error (0: every chunk) */
} fit_ctx;

/* A tensor's KLD is measured chunk by chunk until the standard error of its
 * mean over the chunks is at most FIT_REL_SE of it (lmq_calib_params.
 * fit_rel_se), after at least FIT_MIN_CHUNKS chunks: the fit needs each
 * scale to ~10% (on llama-8m, scales from 4 chunks instead of 16 differ by
 * 7% rms and give the same plan), not the whole text per tensor. */
#define FIT_MIN_CHUNKS 4
#define FIT_REL_SE 0.1

/* The block a tensor belongs to: blk.N. -> N, the output head (and its
 * norm) -> L, anything else (the token embedding) -> -1: from the tokens. */
static int tensor_block(const char *name, int L)
{
    if (!strncmp(name, "blk.", 4)) {
        char *end;
        long b = strtol(name + 4, &end, 10);
        if (end != name + 4 && *end == '.' && b >= 0 && b < L) return (int)b;
        return -1;
    }
    if (!strncmp(name, "output", 6)) return L;
    return -1;
}

/* log-softmax of one row, in place into out */
static void log_softmax(const float *z, int32_t nv, float *out)
{
    float mx = z[0];
    for (int32_t v = 1; v < nv; v++) mx = z[v] > mx ? z[v] : mx;
    double sum = 0;
    for (int32_t v = 0; v < nv; v++) sum += exp((double)z[v] - mx);
    const double lse = mx + log(sum);
    for (int32_t v = 0; v < nv; v++) out[v] = (float)((double)z[v] - lse);
}

/* sum over vocab of p_base (lp_base - lp), lp the log-softmax of z */
static double kld_row(const float *base, const float *z, int32_t nv)
{
    float mx = z[0];
    for (int32_t v = 1; v < nv; v++) mx = z[v] > mx ? z[v] : mx;
    double sum = 0;
    for (int32_t v = 0; v < nv; v++) sum += exp((double)z[v] - mx);
    const double lse = mx + log(sum);
    double kl = 0;
    for (int32_t v = 0; v < nv; v++) kl += exp((double)base[v]) * ((double)base[v] - ((double)z[v] - lse));
    return kl;
}

/* Runs chunk ch from block `start` (-1: the tokens' embeddings) to the
 * logits; the result is in lmq_logits(f->c, row). */
static lmq_status run_from(fit_ctx *f, int32_t ch, int start)
{
    lmq_status st = LMQ_OK;
    int l0 = start;
    if (start < 0) {
        lmq_kv_truncate(f->c, 0);
        st = lmq_eval_layers(f->c, f->toks + (size_t)ch * f->n_ctx, f->xb, f->n_ctx, 0, 0);
        l0 = 0;
    } else {
        memcpy(f->xb, f->S[start] + (size_t)ch * f->n_ctx * f->d, (size_t)f->n_ctx * f->d * sizeof(float));
    }
    if (!st && l0 < f->L) {
        lmq_kv_truncate(f->c, 0);
        st = lmq_eval_layers(f->c, NULL, f->xb, f->n_ctx, l0, f->L);
    }
    if (!st) { /* the head over the scored rows only: logits row j is position first + j */
        lmq_kv_truncate(f->c, 0);
        st = lmq_eval_layers(f->c, NULL, f->xb + (size_t)f->first * f->d, f->n_scored, f->L, f->L);
    }
    return st;
}

/* The streams of every chunk through the float model, block by block, and
 * its log-probs. LMQ_ERR_UNSUPPORTED when the model's blocks cannot start
 * from a stream. */
static lmq_status fit_prepare(fit_ctx *f)
{
    lmq_status st = LMQ_OK;
    const size_t chunk_floats = (size_t)f->n_ctx * f->d;
    for (int32_t ch = 0; ch < f->n_chunks && !st; ch++) {
        lmq_kv_truncate(f->c, 0);
        st = lmq_eval_layers(f->c, f->toks + (size_t)ch * f->n_ctx, f->xb, f->n_ctx, 0, 0);
        for (int l = 0; l <= f->L && !st; l++) {
            if (f->S[l]) memcpy(f->S[l] + (size_t)ch * chunk_floats, f->xb, chunk_floats * sizeof(float));
            lmq_kv_truncate(f->c, 0);
            if (l < f->L) st = lmq_eval_layers(f->c, NULL, f->xb, f->n_ctx, l, l + 1);
            else st = lmq_eval_layers(f->c, NULL, f->xb + (size_t)f->first * f->d, f->n_scored, f->L, f->L);
        }
        for (int32_t j = 0; j < f->n_scored && !st; j++)
            log_softmax(lmq_logits(f->c, j), f->nv,
                        f->base + ((size_t)ch * f->n_scored + (size_t)j) * (size_t)f->nv);
    }
    return st;
}

/* Mean KLD over the scored tokens of the model as it is now against the
 * float base, starting at the kept stream at or below block b. */
static lmq_status fit_measure(fit_ctx *f, int b, double *kld)
{
    int start = b > f->L ? f->L : b;
    while (start >= 0 && !f->S[start]) start--;
    double sum = 0, sum2 = 0; /* of the chunks' mean KLDs */
    int32_t n = 0;
    lmq_status st = LMQ_OK;
    while (n < f->n_chunks) {
        if ((st = run_from(f, n, start))) break;
        double k = 0;
        for (int32_t j = 0; j < f->n_scored; j++)
            k += kld_row(f->base + ((size_t)n * f->n_scored + (size_t)j) * (size_t)f->nv, lmq_logits(f->c, j), f->nv);
        k /= f->n_scored;
        sum += k;
        sum2 += k * k;
        n++;
        if (f->rel_se > 0 && n >= FIT_MIN_CHUNKS) { /* the standard error of the mean over chunks */
            const double mean = sum / n, var = (sum2 - sum * mean) / (n - 1);
            if (var <= 0 || var / n <= f->rel_se * f->rel_se * mean * mean) break;
        }
    }
    *kld = n ? sum / n : 0;
    return st;
}

lmq_status lmq_target_calibrate(lmq_model *m, lmq_target_table *t, const lmq_quantize_opts *qo, const int32_t *toks,
                                size_t n_toks, const lmq_calib_params *p)
{
    if (!m || !t || !qo || !toks || !p) return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_target_calibrate: bad arguments");
    const lmq_hparams *hp = lmq_model_hparams(m);
    fit_ctx f = {0};
    f.m = m;
    f.n_ctx = p->n_ctx > 0 ? p->n_ctx : 256;
    f.rel_se = p->fit_rel_se < 0 ? 0 : p->fit_rel_se > 0 ? p->fit_rel_se : FIT_REL_SE;
    f.L = hp->n_layer;
    f.d = (size_t)hp->n_embd;
    f.nv = hp->n_vocab;
    lmq_status st = LMQ_OK;
    uint8_t **ref = NULL, *buf = NULL;
    size_t cap = 0;
    if (!p->fit_float) {
        if (!(ref = calloc(t->n ? t->n : 1, sizeof *ref)))
            return lmq_error(LMQ_ERR_NOMEM, "target fit: out of memory");
        if ((st = ref_build(m, t, qo, ref))) goto out;
    }
    if (f.n_ctx < 4 || n_toks < 2 * (size_t)f.n_ctx) { /* the perplexity method's refusals, in its words */
        st = fit_full(m, t, qo, toks, n_toks, p, ref);
        goto out;
    }
    const int64_t n_max = (int64_t)(n_toks / (size_t)f.n_ctx);
    f.n_chunks = (int32_t)(p->n_chunks > 0 && p->n_chunks < n_max ? p->n_chunks : n_max);
    f.first = f.n_ctx / 2;
    f.n_scored = f.n_ctx - 1 - f.first;
    const uint64_t stream = (uint64_t)f.n_chunks * (uint64_t)f.n_ctx * f.d * 4;
    const uint64_t base = (uint64_t)f.n_chunks * (uint64_t)f.n_scored * (uint64_t)f.nv * 4;
    /* keep every block's stream, or every stride-th when p->max_bytes says so */
    int stride = 1;
    while (p->max_bytes && stride <= f.L && base + stream * (uint64_t)(f.L / stride + 2) > p->max_bytes) stride++;
    if (p->max_bytes && base + stream * (uint64_t)(f.L / stride + 2) > p->max_bytes) {
        st = lmq_error(LMQ_ERR_LIMIT,
                         "target fit: %d chunks need %.2f GiB (log-probs %.2f GiB + 2 residual streams), the limit is "
                         "%.2f GiB: lower --calib-chunks",
                         f.n_chunks, (double)(base + 2 * stream) / 1073741824.0, (double)base / 1073741824.0,
                         (double)p->max_bytes / 1073741824.0);
        goto out;
    }
    f.S = calloc((size_t)f.L + 1, sizeof *f.S);
    f.toks = malloc((size_t)f.n_chunks * (size_t)f.n_ctx * sizeof *f.toks);
    f.base = malloc((size_t)base);
    f.xb = malloc((size_t)f.n_ctx * f.d * sizeof *f.xb);
    if (!f.S || !f.toks || !f.base || !f.xb) {
        st = lmq_error(LMQ_ERR_NOMEM, "target fit: out of memory (%.2f GiB of log-probs)", (double)base / 1073741824.0);
        goto out;
    }
    for (int l = 0; l <= f.L; l++) {
        if (l % stride && l != f.L) continue;
        if (!(f.S[l] = malloc((size_t)stream))) {
            st = lmq_error(LMQ_ERR_NOMEM, "target fit: out of memory for the residual streams (%.2f GiB each)",
                           (double)stream / 1073741824.0);
            goto out;
        }
    }
    const lmq_vocab *v = lmq_model_vocab(m);
    memcpy(f.toks, toks, (size_t)f.n_chunks * (size_t)f.n_ctx * sizeof *f.toks);
    if (v && lmq_vocab_add_bos(v))
        for (int32_t ch = 0; ch < f.n_chunks; ch++) f.toks[(size_t)ch * f.n_ctx] = lmq_vocab_bos(v);
    lmq_context_params cp = lmq_context_default_params();
    cp.n_ctx = f.n_ctx;
    cp.n_batch = f.n_ctx;
    cp.n_logits = f.n_ctx;
    cp.n_threads = p->n_threads;
    if ((st = lmq_context_new(m, &cp, &f.c))) goto out;

    size_t n_free = 0, done = 0, n_fit = 0;
    double scale_sum = 0;
    for (size_t i = 0; i < t->n; i++) n_free += t->t[i].free_;
    if (p->progress) p->progress(p->progress_ctx, "fit", 0, (int64_t)n_free, NULL);
    if ((st = fit_prepare(&f))) {
        if (st != LMQ_ERR_UNSUPPORTED) goto out;
        lmq_error_clear(); /* blocks that need the tokens: a whole evaluation per tensor */
        lmq_context_free(f.c);
        f.c = NULL;
        st = fit_full(m, t, qo, toks, n_toks, p, ref);
        goto out;
    }
    for (size_t i = 0; i < t->n; i++) {
        lmq_target_tensor *x = &t->t[i];
        if (!x->free_) continue;
        x->scale = -1; /* not measured yet */
        bool swapped = false;
        if ((st = swap_in_candidate(m, x, qo, &buf, &cap, &swapped))) goto out;
        if (swapped) {
            double kld = 0;
            st = fit_measure(&f, tensor_block(x->name, f.L), &kld);
            lmq_status rs = ref_restore(m, t, ref, i);
            if (st || (st = rs)) goto out;
            x->kld_measured = kld;
            kld = kld > 1e-9 ? kld : 1e-9;
            x->scale = x->cand[0].err > 0 ? kld / x->cand[0].err : 0;
            scale_sum += x->scale;
            n_fit++;
        }
        done++;
        if (p->progress) p->progress(p->progress_ctx, "fit", (int64_t)done, (int64_t)n_free, x->name);
    }
    for (size_t i = 0; i < t->n; i++)
        if (t->t[i].free_ && t->t[i].scale < 0) t->t[i].scale = n_fit ? scale_sum / (double)n_fit : 1.0;
out:
    ref_free(m, t, ref);
    lmq_context_free(f.c);
    for (int l = 0; f.S && l <= f.L; l++) free(f.S[l]);
    free(f.S);
    free(f.toks);
    free(f.base);
    free(f.xb);
    free(buf);
    return st;
}
