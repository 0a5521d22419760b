/* Per-tensor KLD scale for size-targeted plans: one tensor quantized at a
 * time, mean KLD against the float model on calibration text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lmq_datasets.h"
#include "lmq_eval.h"
#include "target_calib.h"
#include "textgen.h"

void target_name_regex(const char *name, char *out, size_t cap)
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

/* Tokens of the calibration text; refuses the evaluation set. */
lmq_status calib_tokens(const lmq_model *m, const char *path, int32_t **toks, size_t *n)
{
    char *text = NULL;
    size_t len = 0;
    lmq_status st = lmq_read_file(path, (size_t)1 << 32, &text, &len);
    if (st) return st;
    char hex[65];
    lmq_sha256_hex(text, len, hex);
    if (!strcmp(hex, LMQ_WIKITEXT2_TEST_SHA256)) {
        free(text);
        return lmq_error(LMQ_ERR_INVALID_ARG, "%s is wikitext-2's test set, the evaluation text: calibrate on other text", path);
    }
    st = textgen_tokenize(lmq_model_vocab(m), text, len, true, false, toks, n);
    free(text);
    return st;
}

lmq_status target_calibrate(const char *in, lmq_target_table *t, const lmq_quantize_opts *qo, const char *text_path,
                            int n_chunks, int n_ctx, const char *work_prefix, bool quiet)
{
    size_t plen = strlen(work_prefix) + 64;
    char *logits = malloc(plen), *variant = malloc(plen);
    int32_t *toks = NULL;
    size_t n_toks = 0;
    lmq_model *m = NULL;
    lmq_status st = LMQ_OK;
    if (!logits || !variant) {
        st = lmq_error(LMQ_ERR_NOMEM, "out of memory");
        goto out;
    }
    snprintf(logits, plen, "%s.calib.%ld.logits", work_prefix, (long)getpid());
    snprintf(variant, plen, "%s.calib.%ld.lmq", work_prefix, (long)getpid());

    lmq_ppl_params pp = lmq_ppl_default_params();
    pp.n_ctx = n_ctx;
    pp.n_chunks = n_chunks;
    pp.n_threads = qo->n_threads;
    lmq_ppl_result r;
    if ((st = lmq_model_load(in, &m))) goto out;
    if (!lmq_model_vocab(m)) {
        st = lmq_error(LMQ_ERR_UNSUPPORTED, "%s: the model has no tokenizer", in);
        goto out;
    }
    if ((st = calib_tokens(m, text_path, &toks, &n_toks))) goto out;
    pp.save_logits = logits;
    if ((st = lmq_perplexity(m, toks, (int64_t)n_toks, &pp, &r))) goto out;
    lmq_model_free(m);
    m = NULL;
    pp.save_logits = NULL;
    pp.kld_base = logits;

    double t0 = lmq_time_s();
    size_t n_free = 0, done = 0;
    for (size_t i = 0; i < t->n; i++) n_free += t->t[i].free_;
    for (size_t i = 0; i < t->n; i++) {
        lmq_target_tensor *x = &t->t[i];
        if (!x->free_) continue;
        char pat[1100];
        target_name_regex(x->name, pat, sizeof pat);
        lmq_mix_override ov = {pat, x->cand[0].type};
        lmq_quantize_opts vo;
        memset(&vo, 0, sizeof vo);
        vo.mix = "f32";
        vo.output_type = LMQ_TYPE_COUNT;
        vo.token_embd_type = LMQ_TYPE_COUNT;
        vo.overrides = &ov;
        vo.n_overrides = 1;
        vo.n_threads = qo->n_threads;
        vo.imatrix = qo->imatrix;
        vo.gptq_factor = qo->gptq_factor; /* --gptq: the variant as the plan will quantize it */
        vo.gptq_user = qo->gptq_user;
        vo.gptq_calibration = qo->gptq_calibration;
        vo.gptq_chunks = qo->gptq_chunks;
        if ((st = lmq_quantize_model(in, variant, &vo, NULL))) goto out;
        if ((st = lmq_model_load(variant, &m))) goto out;
        st = lmq_perplexity(m, toks, (int64_t)n_toks, &pp, &r);
        lmq_model_free(m);
        m = NULL;
        if (st) goto out;
        x->kld_measured = r.kld.kld_mean;
        double kld = r.kld.kld_mean > 1e-9 ? r.kld.kld_mean : 1e-9;
        x->scale = x->cand[0].err > 0 ? kld / x->cand[0].err : 0;
        done++;
        if (!quiet) {
            double el = lmq_time_s() - t0;
            fprintf(stderr, "target: [%zu/%zu] %-32s %-7s KLD %.6f  (ETA %.0f s)\n", done, n_free, x->name,
                    lmq_type_name(x->cand[0].type), r.kld.kld_mean, el / (double)done * (double)(n_free - done));
        }
    }
out:
    lmq_model_free(m);
    if (logits) unlink(logits);
    if (variant) unlink(variant);
    free(logits);
    free(variant);
    free(toks);
    return st;
}
