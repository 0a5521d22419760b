/* The calibration module (eval/calib, lmq_calib.h) reached without the CLI,
 * on llama-8m (f32 GGUF) and the calibration text in ../shared:
 *  - input groups by tensor kind;
 *  - the evaluation-text refusal (wiki.test.raw) and calibration tokens;
 *  - an observer failure stops lmq_perplexity with its message, and the
 *    observer is not called again;
 *  - the one-pass covariances: q/k/v and gate/up share one matrix each,
 *    H of blk.1.attn_k equals sum x x^T of the rows an independent observer
 *    saw (double precision), the memory limit refuses with the bytes;
 *  - lmq_model_swap_weight: a swapped tensor changes the logits, restoring
 *    gives the float logits back bit for bit; non-whole tensors refused;
 *  - lmq_target_calibrate's KLD for a tensor (started from the cached
 *    stream at its block: a block's tensor, the head, the embedding) equals
 *    the KLD of a model file with only that tensor quantized (the file
 *    round trip it replaces) up to the logits file's rounding of the base;
 *    the default fit (against a q8_0 copy) equals the KLD of a q8_0 file
 *    with that tensor quantized against the q8_0 file, leaves the float
 *    weights in place, and stops a tensor's chunks at its standard error;
 *    lmq_target_measure's errors from 512 sampled rows match all rows';
 *    with a memory limit that keeps only the first and last streams the
 *    figures are the same;
 *  - layer-by-layer GPTQ on the float stream writes the very bytes of the
 *    one-pass collection (the same rows reach the same matrices), the
 *    quantized stream writes other bytes of the same layout, and a memory
 *    limit below one block is refused naming the bytes and the flag. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lmq_calib.h"
#include "lmq_convert.h"
#include "lmq_eval.h"
#include "lmq_quant.h"
#include "testutil.h"

#define CTX 128

static void test_groups(void)
{
    char k[256];
    T_CHECK(lmq_calib_input_group("blk.12.attn_q.weight", k, sizeof k) && !strcmp(k, "blk.12.attn_in"), "q: %s", k);
    T_CHECK(lmq_calib_input_group("blk.12.attn_v.weight", k, sizeof k) && !strcmp(k, "blk.12.attn_in"), "v: %s", k);
    T_CHECK(lmq_calib_input_group("blk.0.ffn_up.weight", k, sizeof k) && !strcmp(k, "blk.0.ffn_in"), "up: %s", k);
    T_CHECK(lmq_calib_input_group("blk.3.ffn_up_exps.weight", k, sizeof k) && !strcmp(k, "blk.3.exps_in"), "exps: %s", k);
    T_CHECK(!lmq_calib_input_group("blk.0.ffn_down.weight", k, sizeof k) && !strcmp(k, "blk.0.ffn_down.weight"),
            "down alone: %s", k);
    T_CHECK(!lmq_calib_input_group("blk.0.attn_output.weight", k, sizeof k), "attn_output alone");
    T_CHECK(!lmq_calib_input_group("output.weight", k, sizeof k) && !strcmp(k, "output.weight"), "output alone");
    T_CHECK(!lmq_calib_input_group("blk.x.attn_q.weight", k, sizeof k), "no layer number: not grouped");
    T_CHECK(!lmq_calib_input_group("blk.1.attn_q.weightX", k, sizeof k), "other kind: not grouped");
}

/* ---- observer failure stops the pass */
typedef struct stop_ctx {
    int calls, fail_at;
} stop_ctx;

static lmq_status stop_obs(void *user, const char *tensor, int32_t expert, const float *x, int32_t n_tok, int64_t n_in)
{
    stop_ctx *s = user;
    if (++s->calls == s->fail_at) return lmq_error(LMQ_ERR_LIMIT, "test observer: stop at '%s'", tensor);
    return LMQ_OK;
}

/* ---- an independent H of one tensor's input */
typedef struct ref_ctx {
    const char *tensor;
    int64_t n;
    double *h;
} ref_ctx;

static lmq_status ref_obs(void *user, const char *tensor, int32_t expert, const float *x, int32_t n_tok, int64_t n_in)
{
    ref_ctx *r = user;
    if (strcmp(tensor, r->tensor)) return LMQ_OK;
    r->n = n_in;
    if (!r->h) r->h = calloc((size_t)(n_in * n_in), sizeof *r->h);
    for (int32_t t = 0; t < n_tok; t++)
        for (int64_t i = 0; i < n_in; i++)
            for (int64_t j = i; j < n_in; j++) r->h[i * n_in + j] += (double)x[t * n_in + i] * x[t * n_in + j];
    return LMQ_OK;
}

static void test_collect(lmq_model *m, const int32_t *toks, size_t n)
{
    /* an observer failure: one clear error, no further calls */
    lmq_ppl_params pp = lmq_ppl_default_params();
    pp.n_ctx = CTX;
    pp.n_chunks = 3;
    stop_ctx sc = {0, 5};
    pp.observer = stop_obs;
    pp.observer_user = &sc;
    lmq_ppl_result r;
    lmq_status st = lmq_perplexity(m, toks, (int64_t)n, &pp, &r);
    T_CHECK(st == LMQ_ERR_LIMIT && strstr(lmq_last_error(), "stop at") && sc.calls == 5,
            "observer failure stops the pass (%d, %d calls: %s)", st, sc.calls, lmq_last_error());

    lmq_calib_params p = lmq_calib_default_params();
    p.n_ctx = CTX;
    p.n_chunks = 3;
    lmq_gptq_calib *g = NULL;
    T_CHECK((st = lmq_gptq_calib_collect(m, toks, n, &p, &g)) == LMQ_OK, "collect: %s", lmq_last_error());
    if (st) return;
    const lmq_hparams *hp = lmq_model_hparams(m);
    /* llama: attn_in, attn_output, ffn_in, ffn_down per layer, and the output head */
    T_CHECK(lmq_gptq_calib_count(g) == (size_t)hp->n_layer * 4 + 1, "%zu matrices for %d layers",
            lmq_gptq_calib_count(g), hp->n_layer);
    T_CHECK(lmq_gptq_calib_matrix(g, "output.weight", -1, NULL, NULL) != NULL, "the output head's input");
    int64_t nq = 0, nk = 0, nd = 0;
    const char *oq = NULL, *ok = NULL, *ou = NULL;
    const float *hq = lmq_gptq_calib_matrix(g, "blk.1.attn_q.weight", -1, &nq, &oq);
    const float *hk = lmq_gptq_calib_matrix(g, "blk.1.attn_k.weight", -1, &nk, &ok);
    const float *hv = lmq_gptq_calib_matrix(g, "blk.1.attn_v.weight", -1, NULL, NULL);
    const float *hg = lmq_gptq_calib_matrix(g, "blk.1.ffn_gate.weight", -1, NULL, NULL);
    const float *hu = lmq_gptq_calib_matrix(g, "blk.1.ffn_up.weight", -1, NULL, &ou);
    const float *hd = lmq_gptq_calib_matrix(g, "blk.1.ffn_down.weight", -1, &nd, NULL);
    T_CHECK(hq && hq == hk && hk == hv && !strcmp(ok, "blk.1.attn_q.weight"), "q/k/v share one matrix (owner %s)",
            ok ? ok : "-");
    T_CHECK(hg && hg == hu && !strcmp(ou, "blk.1.ffn_gate.weight") && hd && hd != hg && nd == hp->n_ff,
            "gate/up share, down has its own of %lld", (long long)nd);
    T_CHECK(!lmq_gptq_calib_matrix(g, "blk.1.attn_q.weight", 0, NULL, NULL), "no expert matrices in a dense model");

    /* the same rows through an independent observer */
    ref_ctx rc = {"blk.1.attn_k.weight", 0, NULL};
    pp.observer = ref_obs;
    pp.observer_user = &rc;
    T_CHECK(lmq_perplexity(m, toks, (int64_t)n, &pp, &r) == LMQ_OK && rc.h && rc.n == nk, "reference pass");
    if (rc.h && hk && rc.n == nk) {
        double worst = 0, scale = 0;
        for (int64_t i = 0; i < nk; i++) scale = fmax(scale, fabs(rc.h[i * nk + i]));
        for (int64_t i = 0; i < nk; i++)
            for (int64_t j = i; j < nk; j++) worst = fmax(worst, fabs((double)hk[i * nk + j] - rc.h[i * nk + j]));
        /* float accumulation (sgemm/ssyrk) of 384 rows against double: measured 2e-6 of the largest diagonal */
        T_CHECK(worst <= 2e-5 * scale, "H of blk.1.attn_k: max |diff| %.3g, largest diagonal %.3g", worst, scale);
    }
    free(rc.h);
    const float *u = lmq_gptq_calib_factor(g, "blk.1.attn_k.weight", -1, nk);
    T_CHECK(u && !lmq_gptq_calib_failures(g), "factor of a collected matrix");
    T_CHECK(!lmq_gptq_calib_factor(g, "blk.1.attn_k.weight", -1, nk + 1), "factor refused for another width");
    T_CHECK(!lmq_gptq_calib_factor(g, "blk.99.attn_k.weight", -1, nk), "factor of an unseen tensor: NULL");
    lmq_gptq_calib_free(g);

    /* the memory limit: one clear refusal naming the bytes */
    p.max_bytes = 100000;
    g = NULL;
    st = lmq_gptq_calib_collect(m, toks, n, &p, &g);
    T_CHECK(st == LMQ_ERR_LIMIT && !g && strstr(lmq_last_error(), "GiB") && strstr(lmq_last_error(), "blk.0."),
            "limit refused: %s", lmq_last_error());
}

static void last_logits(lmq_model *m, const int32_t *toks, float *out)
{
    lmq_context *c = NULL;
    lmq_context_params cp = lmq_context_default_params();
    cp.n_ctx = 64;
    cp.n_batch = 64;
    T_CHECK(lmq_context_new(m, &cp, &c) == LMQ_OK, "context");
    if (!c) return;
    T_CHECK(lmq_eval(c, toks, 32, 1) == LMQ_OK, "eval");
    memcpy(out, lmq_logits(c, 0), (size_t)lmq_model_hparams(m)->n_vocab * sizeof(float));
    lmq_context_free(c);
}

static void test_swap(lmq_model *m, const int32_t *toks)
{
    const int nv = lmq_model_hparams(m)->n_vocab;
    float *a = calloc((size_t)nv, 4), *b = calloc((size_t)nv, 4), *c = calloc((size_t)nv, 4);
    const char *name = "blk.0.ffn_down.weight";
    const lmq_tensor_info *ti = lmq_file_find_tensor(lmq_model_file(m), name);
    T_CHECK(ti != NULL, "%s present", name);
    if (!ti) goto out;
    size_t bytes = (size_t)ti->ne[1] * (size_t)lmq_row_size(LMQ_TYPE_Q4_0, ti->ne[0]);
    void *q = malloc(bytes);
    lmq_quantize_opts qo;
    memset(&qo, 0, sizeof qo);
    qo.n_threads = 1;
    T_CHECK(lmq_quantize_tensor("llama-8m", ti, LMQ_TYPE_Q4_0, &qo, q, bytes, NULL) == LMQ_OK, "quantize tensor: %s",
            lmq_last_error());
    T_CHECK(lmq_quantize_tensor("llama-8m", ti, LMQ_TYPE_Q4_0, &qo, q, bytes - 1, NULL) == LMQ_ERR_LIMIT,
            "a short buffer is refused");
    last_logits(m, toks, a);
    T_CHECK(lmq_model_swap_weight(m, name, LMQ_TYPE_Q4_0, q) == LMQ_OK, "swap: %s", lmq_last_error());
    last_logits(m, toks, b);
    T_CHECK(lmq_model_swap_weight(m, name, LMQ_TYPE_COUNT, NULL) == LMQ_OK, "restore");
    last_logits(m, toks, c);
    double diff = 0;
    for (int i = 0; i < nv; i++) diff = fmax(diff, fabs((double)a[i] - b[i]));
    T_CHECK(diff > 1e-4, "the swapped tensor changes the logits (max diff %.3g)", diff);
    T_CHECK(!memcmp(a, c, (size_t)nv * 4), "restored: the float logits bit for bit");
    {
        const lmq_tensor_info *te = lmq_file_find_tensor(lmq_model_file(m), "token_embd.weight");
        size_t eb = te ? (size_t)te->ne[1] * (size_t)lmq_row_size(LMQ_TYPE_Q4_0, te->ne[0]) : 0;
        void *qe = eb ? malloc(eb) : NULL;
        T_CHECK(qe && lmq_quantize_tensor("llama-8m", te, LMQ_TYPE_Q4_0, &qo, qe, eb, NULL) == LMQ_OK &&
                    lmq_model_swap_weight(m, "token_embd.weight", LMQ_TYPE_Q4_0, qe) == LMQ_OK,
                "the embedding lookup swaps");
        last_logits(m, toks, b);
        T_CHECK(memcmp(a, b, (size_t)nv * 4) != 0, "a swapped embedding changes the logits");
        T_CHECK(lmq_model_swap_weight(m, "token_embd.weight", LMQ_TYPE_COUNT, NULL) == LMQ_OK, "embedding restored");
        last_logits(m, toks, c);
        T_CHECK(!memcmp(a, c, (size_t)nv * 4), "restored embedding: the float logits bit for bit");
        free(qe);
    }
    T_CHECK(lmq_model_swap_weight(m, "blk.0.no_such.weight", LMQ_TYPE_Q4_0, q) == LMQ_ERR_UNSUPPORTED,
            "an absent tensor is refused");
    T_CHECK(lmq_model_swap_weight(m, "blk.0.attn_norm.weight", LMQ_TYPE_Q4_0, q) == LMQ_ERR_UNSUPPORTED,
            "a norm vector is refused");
    free(q);
out:
    free(a);
    free(b);
    free(c);
}

/* Unweighted squared error of a whole tensor of `path` in `type`, every row. */
static double full_err(const char *path, const char *name, lmq_type type)
{
    lmq_file *f = NULL;
    double e = -1;
    if (lmq_file_open(path, &f)) return -1;
    const lmq_tensor_info *ti = lmq_file_find_tensor(f, name);
    const int64_t ne0 = ti ? ti->ne[0] : 0, rows = ti ? ti->ne[1] : 0, rb = lmq_row_size(type, ne0);
    float *x = ti ? malloc((size_t)(rows * ne0) * sizeof *x) : NULL, *y = malloc((size_t)(ne0 > 0 ? ne0 : 1) * sizeof *y);
    uint8_t *q = rb > 0 ? malloc((size_t)(rows * rb)) : NULL;
    if (x && y && q && !lmq_convert_float_row(ti->type, ti->data, LMQ_TYPE_F32, x, rows * ne0) &&
        !lmq_quantize_rows(type, x, q, rows, ne0, NULL, 2)) {
        e = 0;
        for (int64_t r = 0; r < rows && !lmq_dequantize_row(type, q + r * rb, y, ne0); r++)
            for (int64_t j = 0; j < ne0; j++) e += ((double)y[j] - x[r * ne0 + j]) * ((double)y[j] - x[r * ne0 + j]);
    }
    free(x);
    free(y);
    free(q);
    lmq_file_close(f);
    return e;
}

/* lmq_target_measure's errors: exact for a matrix of at most 512 rows, from
 * 512 evenly spaced rows (scaled to all rows) for a larger one, where the
 * ratio of two types' errors (all the fitted plan uses) holds closely. */
static void test_err_rows(const char *path, const lmq_target_table *t)
{
    const char *names[2] = {"blk.1.attn_v.weight", "output.weight"};
    for (int k = 0; k < 2; k++) {
        const lmq_target_tensor *x = NULL;
        for (size_t i = 0; i < t->n; i++)
            if (!strcmp(t->t[i].name, names[k])) x = &t->t[i];
        T_CHECK(x && x->n_cand == 2, "%s measured", names[k]);
        if (!x || x->n_cand != 2) continue;
        const int64_t rows = x->n_elements / x->ne0;
        const double e2 = full_err(path, x->name, x->cand[0].type), e4 = full_err(path, x->name, x->cand[1].type);
        T_CHECK(e2 > 0 && e4 > 0, "%s: full errors", x->name);
        if (rows <= 512) {
            T_NEAR(x->cand[0].err, e2, 1e-9 * e2, "all rows: the same error");
            T_NEAR(x->cand[1].err, e4, 1e-9 * e4, "all rows: the same error");
        } else {
            /* measured on llama-8m's head (4096 rows): -0.04% / +0.16%, ratio +0.2% */
            T_NEAR(x->cand[0].err, e2, 0.03 * e2, "sampled rows: the error of all rows");
            T_NEAR(x->cand[1].err / x->cand[0].err, e4 / e2, 0.005 * e4 / e2, "sampled rows: the ratio of all rows");
            printf("# %s (%lld rows): sampled / full error %.5f %.5f, ratio %.5f\n", x->name, (long long)rows,
                   x->cand[0].err / e2, x->cand[1].err / e4, (x->cand[1].err / x->cand[0].err) / (e4 / e2));
        }
    }
}

/* The quantizer options of the fits below: q4_k_m's mix, 2 threads. */
static lmq_quantize_opts fit_opts(void)
{
    lmq_quantize_opts qo;
    memset(&qo, 0, sizeof qo);
    qo.mix = "q4_k_m";
    qo.output_type = LMQ_TYPE_COUNT;
    qo.token_embd_type = LMQ_TYPE_COUNT;
    qo.n_threads = 2;
    return qo;
}

/* Perplexity parameters of the checks below: CTX tokens a chunk, n_chunks
 * chunks, 2 threads, the logits saved to save_logits (NULL: not saved). */
static lmq_ppl_params ppl_opts(int n_chunks, const char *save_logits)
{
    lmq_ppl_params pp = lmq_ppl_default_params();
    pp.n_ctx = CTX;
    pp.n_chunks = n_chunks;
    pp.n_threads = 2;
    pp.save_logits = save_logits;
    return pp;
}

/* Perplexity of m over the first chunk (its figure is a function of the
 * logits: a changed weight changes it). */
static double ppl1(lmq_model *m, const int32_t *toks, size_t n)
{
    lmq_ppl_params pp = ppl_opts(1, NULL);
    lmq_ppl_result r;
    T_CHECK(lmq_perplexity(m, toks, (int64_t)n, &pp, &r) == LMQ_OK, "ppl: %s", lmq_last_error());
    return r.ppl;
}

/* The default fit runs against a q8_0 copy of the model: a tensor's KLD is
 * that of a file with every weight q8_0 and that tensor in its candidate
 * type against the all-q8_0 file, and it differs from the float fit's; the
 * model's own weights are as loaded afterwards. */
static void test_fit_q8(lmq_model *m, const char *path, const int32_t *toks, size_t n, lmq_target_table *t,
                        const size_t *keep, size_t nk, const lmq_calib_params *fp)
{
    double kld_float[4];
    for (size_t k = 0; k < nk; k++) kld_float[k] = t->t[keep[k]].kld_measured;
    const double ppl_before = ppl1(m, toks, n);
    lmq_quantize_opts qo = fit_opts();
    lmq_calib_params p = *fp;
    p.fit_float = false;
    T_CHECK(lmq_target_calibrate(m, t, &qo, toks, n, &p) == LMQ_OK, "calibrate (q8_0): %s", lmq_last_error());
    T_CHECK(ppl1(m, toks, n) == ppl_before, "the float weights are back after the q8_0 fit");
    char ref[300], base[300], var[300];
    snprintf(ref, sizeof ref, "%s.q8.lmq", p.scratch_path);
    snprintf(base, sizeof base, "%s.q8.base", p.scratch_path);
    snprintf(var, sizeof var, "%s.q8v.lmq", p.scratch_path);
    lmq_quantize_opts vo = qo;
    vo.mix = "q8_0";
    T_CHECK(lmq_quantize_model(path, ref, &vo, NULL) == LMQ_OK, "q8_0 reference: %s", lmq_last_error());
    lmq_model *rm = NULL;
    T_CHECK(lmq_model_load(ref, &rm) == LMQ_OK, "load q8_0: %s", lmq_last_error());
    lmq_ppl_params pp = ppl_opts(2, base);
    lmq_ppl_result r;
    if (rm) T_CHECK(lmq_perplexity(rm, toks, (int64_t)n, &pp, &r) == LMQ_OK, "q8_0 base logits");
    lmq_model_free(rm);
    pp.save_logits = NULL;
    pp.kld_base = base;
    for (size_t k = 0; k < nk; k++) {
        lmq_target_tensor *x = &t->t[keep[k]];
        char pat[512];
        lmq_target_name_regex(x->name, pat, sizeof pat);
        lmq_mix_override ov = {pat, x->cand[0].type};
        vo.overrides = &ov;
        vo.n_overrides = 1;
        T_CHECK(lmq_quantize_model(path, var, &vo, NULL) == LMQ_OK, "q8_0 variant: %s", lmq_last_error());
        lmq_model *vm = NULL;
        T_CHECK(lmq_model_load(var, &vm) == LMQ_OK, "load q8_0 variant");
        if (vm) T_CHECK(lmq_perplexity(vm, toks, (int64_t)n, &pp, &r) == LMQ_OK, "q8_0 variant KLD");
        lmq_model_free(vm);
        /* the loaded file's repacked q8_0 kernels against the fit's swapped
         * rows (repacked the same way by lmq_model_swap_weight), and the
         * base file's rounding: within 2% */
        T_NEAR(x->kld_measured, r.kld.kld_mean, 2e-2 * r.kld.kld_mean + 1e-9, x->name);
        T_CHECK(x->scale > 0 && fabs(x->kld_measured - kld_float[k]) > 1e-3 * kld_float[k],
                "%s: the q8_0 reference is another measurement (%g against %g on the float model)", x->name,
                x->kld_measured, kld_float[k]);
        unlink(var);
    }
    unlink(base);
    unlink(ref);
    /* chunk by chunk: a huge allowed standard error stops every tensor at
     * 4 chunks (the figures of a 4-chunk fit), none (or a tiny one) runs
     * all 8 */
    T_CHECK(n >= 8 * CTX, "8 chunks of calibration text (%zu tokens)", n);
    double k4[4], k8[4];
    p.n_chunks = 4;
    p.fit_rel_se = -1;
    T_CHECK(lmq_target_calibrate(m, t, &qo, toks, n, &p) == LMQ_OK, "calibrate (4 chunks): %s", lmq_last_error());
    for (size_t k = 0; k < nk; k++) k4[k] = t->t[keep[k]].kld_measured;
    p.n_chunks = 8;
    T_CHECK(lmq_target_calibrate(m, t, &qo, toks, n, &p) == LMQ_OK, "calibrate (8 chunks): %s", lmq_last_error());
    for (size_t k = 0; k < nk; k++) k8[k] = t->t[keep[k]].kld_measured;
    p.fit_rel_se = 1e9;
    T_CHECK(lmq_target_calibrate(m, t, &qo, toks, n, &p) == LMQ_OK, "calibrate (stop early): %s", lmq_last_error());
    for (size_t k = 0; k < nk; k++) {
        const double kv = t->t[keep[k]].kld_measured;
        T_NEAR(kv, k4[k], 1e-9 * k4[k], "a loose standard error stops after 4 chunks");
        T_CHECK(fabs(k8[k] - k4[k]) > 1e-4 * k4[k], "%s: 8 chunks measure otherwise (%g, %g)", t->t[keep[k]].name,
                k8[k], k4[k]);
    }
    p.fit_rel_se = 1e-9;
    T_CHECK(lmq_target_calibrate(m, t, &qo, toks, n, &p) == LMQ_OK, "calibrate (tight): %s", lmq_last_error());
    for (size_t k = 0; k < nk; k++)
        T_NEAR(t->t[keep[k]].kld_measured, k8[k], 1e-9 * k8[k], "a tight standard error runs every chunk");
}

/* The fit's KLD for one tensor against the file round trip it replaces. */
static void test_fit(lmq_model *m, const char *path, const int32_t *toks, size_t n)
{
    lmq_quantize_opts qo = fit_opts();
    const lmq_type types[] = {LMQ_TYPE_Q2_K, LMQ_TYPE_Q4_K};
    lmq_target_table *t = NULL;
    T_CHECK(lmq_target_measure(path, &qo, types, 2, &t) == LMQ_OK, "measure: %s", lmq_last_error());
    if (!t) return;
    test_err_rows(path, t);
    /* fit only four tensors (the others fixed), to keep the test short:
     * two blocks' tensors, the head (only the head runs), the embedding
     * (from the tokens) */
    size_t keep[4] = {0, 0, 0, 0}, nk = 0;
    for (size_t i = 0; i < t->n; i++) {
        const char *nm = t->t[i].name;
        bool want = !strcmp(nm, "blk.1.attn_v.weight") || !strcmp(nm, "blk.2.ffn_down.weight") ||
                    !strcmp(nm, "output.weight") || !strcmp(nm, "token_embd.weight");
        if (t->t[i].free_ && want && nk < 4) keep[nk++] = i;
        else t->t[i].free_ = false;
    }
    T_CHECK(nk == 4, "four free tensors (%zu)", nk);
    char scratch[256];
    snprintf(scratch, sizeof scratch, "%s", t_tmp("fit.logits"));
    lmq_calib_params p = lmq_calib_default_params();
    p.n_ctx = CTX;
    p.n_chunks = 2;
    p.n_threads = 2;
    p.scratch_path = scratch;
    p.fit_float = true; /* against the float model: the file round trip of the f32 mix below */
    lmq_status st = lmq_target_calibrate(m, t, &qo, toks, n, &p);
    T_CHECK(st == LMQ_OK, "calibrate: %s", lmq_last_error());
    T_CHECK(access(scratch, F_OK) != 0, "the scratch log-probs are removed");
    /* a limit that keeps only the first and the last stream: every block
     * tensor starts from the embeddings, the same figures */
    {
        const lmq_hparams *hp = lmq_model_hparams(m);
        const uint64_t stream = 2ull * CTX * (uint64_t)hp->n_embd * 4;
        const uint64_t base = 2ull * (CTX - 1 - CTX / 2) * (uint64_t)hp->n_vocab * 4;
        double kld[4];
        for (size_t k = 0; k < nk; k++) kld[k] = t->t[keep[k]].kld_measured;
        lmq_calib_params lp = p;
        lp.max_bytes = base + 3 * stream;
        T_CHECK(lmq_target_calibrate(m, t, &qo, toks, n, &lp) == LMQ_OK, "calibrate (limit): %s", lmq_last_error());
        for (size_t k = 0; k < nk; k++)
            T_NEAR(t->t[keep[k]].kld_measured, kld[k], 1e-9 * kld[k], "same KLD from an earlier stream");
        lp.max_bytes = base + stream; /* not even two streams: refused naming the bytes and the flag */
        lmq_status ls = lmq_target_calibrate(m, t, &qo, toks, n, &lp);
        T_CHECK(ls == LMQ_ERR_LIMIT && strstr(lmq_last_error(), "--calib-chunks"), "limit: %d %s", (int)ls,
                lmq_last_error());
    }
    for (size_t k = 0; k < nk && !st; k++) {
        lmq_target_tensor *x = &t->t[keep[k]];
        T_CHECK(x->kld_measured > 0 && x->scale > 0, "%s: KLD %g scale %g", x->name, x->kld_measured, x->scale);
        /* the same measurement through a written model */
        char pat[512], base[300], var[300];
        lmq_target_name_regex(x->name, pat, sizeof pat);
        lmq_mix_override ov = {pat, x->cand[0].type};
        lmq_quantize_opts vo;
        memset(&vo, 0, sizeof vo);
        vo.mix = "f32";
        vo.output_type = LMQ_TYPE_COUNT;
        vo.token_embd_type = LMQ_TYPE_COUNT;
        vo.overrides = &ov;
        vo.n_overrides = 1;
        vo.n_threads = 2;
        snprintf(base, sizeof base, "%s.base", scratch);
        snprintf(var, sizeof var, "%s.lmq", scratch);
        T_CHECK(lmq_quantize_model(path, var, &vo, NULL) == LMQ_OK, "variant: %s", lmq_last_error());
        lmq_ppl_params pp = ppl_opts(2, base);
        lmq_ppl_result r;
        T_CHECK(lmq_perplexity(m, toks, (int64_t)n, &pp, &r) == LMQ_OK, "base logits");
        lmq_model *vm = NULL;
        T_CHECK(lmq_model_load(var, &vm) == LMQ_OK, "load variant");
        pp.save_logits = NULL;
        pp.kld_base = base;
        if (vm) T_CHECK(lmq_perplexity(vm, toks, (int64_t)n, &pp, &r) == LMQ_OK, "variant KLD");
        /* same weights, same kernels: the same figure up to the rounding of
         * the file's base log-probs (measured: 0.3% at a KLD of 2e-5) */
        T_NEAR(x->kld_measured, r.kld.kld_mean, 1e-2 * r.kld.kld_mean + 1e-9, x->name);
        lmq_model_free(vm);
        unlink(base);
        unlink(var);
    }
    test_fit_q8(m, path, toks, n, t, keep, nk, &p);
    lmq_target_table_free(t);
}

/* Tensors of equal layout in a and b; counts those whose bytes differ
 * (other than `except`) and those equal. */
static bool same_tensors(const char *a, const char *b, const char *except, int *n_diff, int *n_same)
{
    lmq_file *fa = NULL, *fb = NULL;
    *n_diff = *n_same = 0;
    if (lmq_file_open(a, &fa) || lmq_file_open(b, &fb)) {
        lmq_file_close(fa);
        return false;
    }
    bool layout = lmq_file_n_tensors(fa) == lmq_file_n_tensors(fb);
    for (size_t i = 0; layout && i < lmq_file_n_tensors(fa); i++) {
        const lmq_tensor_info *x = lmq_file_tensor(fa, i);
        const lmq_tensor_info *y = lmq_file_find_tensor(fb, x->name);
        if (!y || y->type != x->type || y->nbytes != x->nbytes) {
            layout = false;
            break;
        }
        if (except && !strcmp(x->name, except)) continue;
        if (memcmp(x->data, y->data, (size_t)x->nbytes)) ++*n_diff;
        else ++*n_same;
    }
    lmq_file_close(fa);
    lmq_file_close(fb);
    return layout;
}

static void test_sequential(lmq_model *m, const char *path, const int32_t *toks, size_t n)
{
    lmq_quantize_opts qo = fit_opts();
    lmq_calib_params p = lmq_calib_default_params();
    p.n_ctx = CTX;
    p.n_chunks = 3;
    p.n_threads = 2;
    /* one pass, every matrix at once */
    lmq_gptq_calib *g = NULL;
    T_CHECK(lmq_gptq_calib_collect(m, toks, n, &p, &g) == LMQ_OK, "collect");
    lmq_quantize_opts o1 = qo;
    o1.gptq_factor = lmq_gptq_calib_factor;
    o1.gptq_user = g;
    const char *one = t_tmp("one.lmq"), *seqf = t_tmp("seqf.lmq"), *seqq = t_tmp("seqq.lmq");
    lmq_quantize_stats s1, s2;
    T_CHECK(lmq_quantize_model(path, one, &o1, &s1) == LMQ_OK, "one-pass write: %s", lmq_last_error());
    lmq_gptq_calib_free(g);
    p.gptq_inputs = LMQ_GPTQ_INPUTS_FLOAT;
    T_CHECK(lmq_gptq_sequential(path, seqf, &qo, toks, n, &p, &s2) == LMQ_OK, "sequential: %s", lmq_last_error());
    T_CHECK(s2.n_gptq == s1.n_gptq && s2.n_gptq >= 57, "feedback on %llu tensors (one pass %llu)",
            (unsigned long long)s2.n_gptq, (unsigned long long)s1.n_gptq);
    int nd = 0, ns = 0;
    /* the output head differs: the perplexity pass computes (and shows the
     * observer) only the scored half of each chunk's logits */
    T_CHECK(same_tensors(one, seqf, "output.weight", &nd, &ns) && nd == 0 && ns == 74,
            "float stream: the one-pass bytes (%d tensors differ, %d equal)", nd, ns);
    p.gptq_inputs = LMQ_GPTQ_INPUTS_QUANTIZED;
    T_CHECK(lmq_gptq_sequential(path, seqq, &qo, toks, n, &p, NULL) == LMQ_OK, "sequential (quantized stream)");
    /* block 0 reads the embeddings either way; later blocks see quantized inputs */
    T_CHECK(same_tensors(one, seqq, NULL, &nd, &ns) && nd >= 40, "quantized stream: same layout, %d tensors differ", nd);
    lmq_file *f = NULL;
    const char *cal = NULL;
    if (lmq_file_open(seqq, &f) == LMQ_OK) {
        T_CHECK(lmq_meta_get_str(lmq_file_meta(f), "lmq.quantize.version", &cal, NULL) == LMQ_OK &&
                    !strcmp(cal, LMQ_QUANTIZE_VERSION),
                "quantizer version recorded");
        lmq_file_close(f);
    }
    /* the memory formula, and the refusal below it */
    const lmq_hparams *hp = lmq_model_hparams(m);
    uint64_t need = lmq_gptq_sequential_bytes(hp, CTX, 3, LMQ_GPTQ_INPUTS_FLOAT);
    uint64_t d = (uint64_t)hp->n_embd, ff = (uint64_t)hp->n_ff, qd = (uint64_t)hp->n_head * hp->head_dim;
    T_CHECK(need == 3ull * CTX * d * 4 + 4 * (2 * d * d + qd * qd + ff * ff), "formula: %llu bytes",
            (unsigned long long)need);
    p.max_bytes = need - 1;
    lmq_status st = lmq_gptq_sequential(path, t_tmp("refused.lmq"), &qo, toks, n, &p, NULL);
    T_CHECK(st == LMQ_ERR_LIMIT && strstr(lmq_last_error(), "--gptq-chunks") && access(t_tmp("refused.lmq"), F_OK) != 0,
            "limit: %s", lmq_last_error());
}

int main(void)
{
    test_groups();
    T_CHECK(lmq_calib_check_text("x.txt", "plain text", 10) == LMQ_OK, "ordinary text accepted");
    const char *wiki = t_shared("data/wikitext-2-raw/wiki.test.raw");
    const char *cal = t_shared("data/calibration/git-doc.txt");
    const char *path = t_shared("reference/llama-8m-debtext-f32.gguf");
    t_require(wiki);
    t_require(cal);
    t_require(path);
    lmq_model *m = NULL;
    T_CHECK(lmq_model_load(path, &m) == LMQ_OK, "load %s: %s", path, lmq_last_error());
    if (!m) return t_finish();
    int32_t *toks = NULL;
    size_t n = 0;
    lmq_status st = lmq_calib_tokens(m, wiki, &toks, &n);
    T_CHECK(st == LMQ_ERR_INVALID_ARG && !toks && strstr(lmq_last_error(), "evaluation text"),
            "the evaluation text is refused: %s", lmq_last_error());
    T_CHECK(lmq_calib_tokens(m, "/nonexistent/calib.txt", &toks, &n) == LMQ_ERR_NOT_FOUND ||
                lmq_last_error()[0] != 0,
            "a missing file: an error");
    T_CHECK(lmq_calib_tokens(m, cal, &toks, &n) == LMQ_OK && n > 4 * CTX, "calibration tokens: %zu", n);
    if (toks && n > 4 * CTX) {
        test_collect(m, toks, n);
        test_swap(m, toks);
        test_fit(m, path, toks, n);
        test_sequential(m, path, toks, n);
    }
    free(toks);
    lmq_model_free(m);
    return t_finish();
}
