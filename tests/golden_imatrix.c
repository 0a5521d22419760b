/* Golden tests of importance matrices on llama-8m-debtext:
 *
 * 1. llama.cpp's legacy imatrix.dat (../shared/reference, made by
 *    llama-imatrix -c 256 --chunks 200 on the calibration text) is read, and
 *    lmq_imatrix_collect on the same model (llama.cpp's f32 GGUF), text and
 *    chunking agrees with it tensor by tensor: relative L1 distance of the
 *    per-column mean squares (sum |a - b| / sum b) at most 1%. Both tools
 *    evaluate the same tokens with an f16 KV cache, so the only differences
 *    are float summation orders (measured: about 1e-5, printed).
 * 2. Quantizing with the importance weights lowers the importance-weighted
 *    error sum_j w_j (x_j - x'_j)^2 of real tensors for every type that takes
 *    weights; q8_0 ignores them, and fp8 uses them only to choose a block's
 *    power-of-two scale (e or e - 1), which on these tensors never changes
 *    the choice: for those three the ratio is 1, which shows that the
 *    criterion does reject a type that ignores the weights.
 * Skips (and says so) when ../shared is absent. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_eval.h"
#include "lmq_runtime.h"
#include "testutil.h"

static lmq_imatrix *collect(const char *model, const char *text_path)
{
    lmq_model *m = NULL;
    lmq_imatrix *im = lmq_imatrix_new();
    size_t len = 0;
    char *text = t_read_all(text_path, &len);
    int32_t *toks = NULL;
    size_t n = 0;
    T_CHECK(text && lmq_model_load(model, &m) == LMQ_OK, "load: %s", lmq_last_error());
    if (m && text && lmq_tokenize_alloc(lmq_model_vocab(m), text, len, true, false, &toks, &n) == LMQ_OK) {
        lmq_imatrix_params p = {256, 200, 2, false, NULL, NULL};
        lmq_ppl_result r;
        double t0 = lmq_time_s();
        T_CHECK(lmq_imatrix_collect(m, toks, (int64_t)n, &p, im, &r) == LMQ_OK, "collect: %s", lmq_last_error());
        printf("imatrix: %d chunks, PPL %.4f, %.1f s\n", r.n_chunks, r.ppl, lmq_time_s() - t0);
        T_CHECK(lmq_imatrix_chunk_count(im) == 200 && lmq_imatrix_chunk_size(im) == 256, "chunks recorded");
    }
    free(toks);
    free(text);
    lmq_model_free(m);
    return im;
}

static void compare(const lmq_imatrix *ours, const lmq_imatrix *ref)
{
    T_CHECK(lmq_imatrix_count(ours) == lmq_imatrix_count(ref), "%zu entries vs llama.cpp's %zu", lmq_imatrix_count(ours),
            lmq_imatrix_count(ref));
    double worst = 0;
    for (size_t i = 0; i < lmq_imatrix_count(ref); i++) {
        const lmq_imatrix_entry *r = lmq_imatrix_at(ref, i), *o = lmq_imatrix_find(ours, r->name);
        T_CHECK(o && o->n_cols == r->n_cols, "%s: present with %lld columns", r->name, (long long)r->n_cols);
        if (!o || o->n_cols != r->n_cols) continue;
        float *a = malloc((size_t)r->n_cols * sizeof *a), *b = malloc((size_t)r->n_cols * sizeof *b);
        lmq_imatrix_weights(ours, r->name, 0, a, r->n_cols);
        lmq_imatrix_weights(ref, r->name, 0, b, r->n_cols);
        double d = 0, s = 0;
        for (int64_t j = 0; j < r->n_cols; j++) {
            d += fabs((double)a[j] - b[j]);
            s += b[j];
        }
        double rel = s > 0 ? d / s : 0;
        if (rel > worst) worst = rel;
        T_CHECK(rel <= 0.01, "%s: relative L1 distance %.3g to llama.cpp's", r->name, rel);
        free(a);
        free(b);
    }
    printf("imatrix vs llama.cpp's legacy .dat: worst per-tensor relative L1 distance %.3g\n", worst);
}

/* sum_j w_j (x - x')^2 over the rows of a tensor quantized to t. */
static double weighted_err(lmq_type t, const float *x, int64_t nrows, int64_t ne0, const float *w, const float *qw)
{
    int64_t rb = lmq_row_size(t, ne0);
    uint8_t *q = malloc((size_t)(rb * nrows));
    float *y = malloc((size_t)ne0 * sizeof *y);
    double e = 0;
    if (lmq_quantize_rows(t, x, q, nrows, ne0, qw, 1) != LMQ_OK) e = NAN;
    for (int64_t r = 0; r < nrows && !isnan(e); r++) {
        lmq_dequantize_row(t, q + r * rb, y, ne0);
        for (int64_t j = 0; j < ne0; j++) e += w[j] * ((double)y[j] - x[r * ne0 + j]) * ((double)y[j] - x[r * ne0 + j]);
    }
    free(q);
    free(y);
    return e;
}

static void test_weights(const char *model, const lmq_imatrix *im)
{
    static const lmq_type takes[] = {LMQ_TYPE_Q4_0, LMQ_TYPE_Q4_1, LMQ_TYPE_Q5_0, LMQ_TYPE_Q5_1, LMQ_TYPE_Q2_K,
                                     LMQ_TYPE_Q3_K, LMQ_TYPE_Q4_K, LMQ_TYPE_Q5_K, LMQ_TYPE_Q6_K, LMQ_TYPE_IQ4_NL,
                                     LMQ_TYPE_IQ4_XS};
    static const lmq_type ignores[] = {LMQ_TYPE_Q8_0, LMQ_TYPE_F8_E4M3, LMQ_TYPE_F8_E5M2};
    static const char *names[] = {"blk.2.attn_v.weight", "blk.5.ffn_down.weight", "blk.7.attn_output.weight"};
    lmq_file *f = NULL;
    T_CHECK(lmq_file_open(model, &f) == LMQ_OK, "open %s", model);
    if (!f) return;
    for (size_t n = 0; n < sizeof names / sizeof names[0]; n++) {
        const lmq_tensor_info *ti = lmq_file_find_tensor(f, names[n]);
        T_CHECK(ti && ti->type == LMQ_TYPE_F32, "%s in f32", names[n]);
        if (!ti || ti->type != LMQ_TYPE_F32) continue;
        const int64_t ne0 = ti->ne[0], nrows = ti->ne[1];
        float *w = malloc((size_t)ne0 * sizeof *w);
        T_CHECK(lmq_imatrix_weights(im, names[n], 0, w, ne0) == LMQ_OK, "weights of %s", names[n]);
        printf("%-26s", names[n]);
        for (size_t k = 0; k < sizeof takes / sizeof takes[0]; k++) {
            double plain = weighted_err(takes[k], ti->data, nrows, ne0, w, NULL);
            double imp = weighted_err(takes[k], ti->data, nrows, ne0, w, w);
            T_CHECK(imp < plain, "%s %s: weighted error %.6g with the imatrix, %.6g without", names[n],
                    lmq_type_name(takes[k]), imp, plain);
            printf(" %s %.3f", lmq_type_name(takes[k]), imp / plain);
        }
        printf("\n");
        /* a type that ignores the weights fails the criterion */
        for (size_t k = 0; k < sizeof ignores / sizeof ignores[0]; k++) {
            double p8 = weighted_err(ignores[k], ti->data, nrows, ne0, w, NULL);
            double i8 = weighted_err(ignores[k], ti->data, nrows, ne0, w, w);
            T_CHECK(!(i8 < p8 * 0.999), "%s: the criterion rejects a type that ignores the weights (%.6g vs %.6g)",
                    lmq_type_name(ignores[k]), i8, p8);
        }
        free(w);
    }
    lmq_file_close(f);
}

int main(void)
{
    const char *model = t_shared("reference/llama-8m-debtext-f32.gguf");
    const char *dat = t_shared("reference/llama-8m-debtext-imatrix.dat");
    const char *text = t_shared("data/calibration/git-doc.txt");
    if (!t_exists(model) || !t_exists(dat) || !t_exists(text)) {
        printf("skip: ../shared reference data not found\n");
        T_CHECK(0, "golden data missing (a skip is not a pass)");
        return t_finish();
    }
    lmq_imatrix *ref = NULL;
    T_CHECK(lmq_imatrix_load(dat, &ref) == LMQ_OK, "legacy .dat: %s", lmq_last_error());
    T_CHECK(ref && lmq_imatrix_count(ref) == 56 && lmq_imatrix_chunk_count(ref) == 200 &&
                lmq_imatrix_n_datasets(ref) == 1 && strstr(lmq_imatrix_dataset(ref, 0), "git-doc.txt"),
            "legacy .dat: 56 entries, 200 chunks, dataset git-doc.txt");
    lmq_imatrix *ours = collect(model, text);
    if (ref) compare(ours, ref);
    /* the same after a trip through the GGUF file */
    const char *path = t_tmp("m8.imatrix.gguf");
    lmq_imatrix *back = NULL;
    T_CHECK(lmq_imatrix_save(ours, path) == LMQ_OK && lmq_imatrix_load(path, &back) == LMQ_OK, "GGUF round trip");
    if (back && ref) compare(back, ref);
    test_weights(model, ours);
    lmq_imatrix_free(back);
    lmq_imatrix_free(ours);
    lmq_imatrix_free(ref);
    return t_finish();
}
