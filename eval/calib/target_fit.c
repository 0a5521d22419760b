/* The per-tensor KLD scale of size-targeted plans (lmq_calib.h): one tensor
 * at a time quantized and swapped into the loaded float model, the mean
 * KLD against the float model's own log-probs on calibration text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lmq_calib.h"
#include "lmq_quant.h"

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

uint64_t lmq_target_cache_key(const lmq_quantize_opts *qo, uint64_t source_id, const char *text, size_t text_len,
                              int chunks)
{
    uint64_t h = source_id ^ 0x9e3779b97f4a7c15ULL;
    MIX(h, lmq_hash64(LMQ_QUANTIZE_VERSION, strlen(LMQ_QUANTIZE_VERSION)));
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

lmq_status lmq_target_calibrate(lmq_model *m, lmq_target_table *t, const lmq_quantize_opts *qo, const int32_t *toks,
                                size_t n_toks, const lmq_calib_params *p)
{
    if (!m || !t || !qo || !toks || !p) return lmq_error(LMQ_ERR_INVALID_ARG, "lmq_target_calibrate: bad arguments");
    const lmq_file *f = lmq_model_file(m);
    const char *in_path = lmq_file_path(f);
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
        const lmq_tensor_info *ti = lmq_file_find_tensor(f, x->name);
        const lmq_type ty = x->cand[0].type;
        if (!ti) {
            st = lmq_error(LMQ_ERR_NOT_FOUND, "%s: tensor '%s' of the plan is not in the model", in_path, x->name);
            goto out;
        }
        int64_t rows = 1;
        for (uint32_t d = 1; d < ti->n_dims; d++) rows *= ti->ne[d];
        const size_t need = (size_t)rows * (size_t)lmq_row_size(ty, ti->ne[0]);
        if (need > cap) {
            free(buf);
            if (!(buf = malloc(need))) {
                cap = 0;
                st = lmq_error(LMQ_ERR_NOMEM, "target fit: out of memory for '%s' (%zu bytes)", x->name, need);
                goto out;
            }
            cap = need;
        }
        if ((st = lmq_quantize_tensor(in_path, ti, ty, qo, buf, cap, NULL))) goto out;
        if (lmq_model_swap_weight(m, x->name, ty, buf) != LMQ_OK) {
            lmq_error_clear(); /* experts, fused views: the mean scale below */
        } else {
            st = lmq_perplexity(m, toks, (int64_t)n_toks, &pp, &r);
            lmq_status rs = lmq_model_swap_weight(m, x->name, LMQ_TYPE_COUNT, NULL);
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
