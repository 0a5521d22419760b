/* Error-feedback quantization (quantize/gptq.c) on llama-8m's real weights.
 *
 * The input covariances are built from the model itself: layer 0's q/k/v
 * and gate/up read rmsnorm(embedding) * attn_norm / ffn_norm (here over
 * every vocabulary row, i.e. one token of each kind, without attention's
 * mixing), and ffn_down reads silu(gate x) * (up x) of those. So H has the
 * real correlations of the residual stream and of the FFN's hidden units.
 *
 * Checks: the factor inverts the damped H; for every supported type the
 * output error e^T H e (e = w - w' per row) is lower than plain (imatrix-
 * weighted) quantization's by at least the measured margin; the bytes do
 * not depend on the thread count; rows of a width that is not a multiple
 * of 256 (32-element blocks, several lazy windows); the error paths. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_format.h"
#include "lmq_quant.h"
#include "testutil.h"

static const float *tensor_f32(const lmq_safetensors *st, const char *name, int64_t rows, int64_t cols)
{
    const lmq_st_tensor *t = lmq_safetensors_find(st, name);
    T_CHECK(t && t->type == LMQ_TYPE_F32 && t->nbytes == (uint64_t)(rows * cols * 4), "%s is an f32 %lld x %lld tensor",
            name, (long long)rows, (long long)cols);
    return t && t->type == LMQ_TYPE_F32 && t->nbytes == (uint64_t)(rows * cols * 4) ? t->data : NULL;
}

/* x (n_tok x n) -> H = x^T x (full, symmetric), in double for the checks */
static double *full_h(const float *x, int64_t n_tok, int64_t n)
{
    double *h = calloc((size_t)(n * n), sizeof *h);
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++) h[i * n + j] += (double)x[t * n + i] * x[t * n + j];
    return h;
}

/* sum over rows of e^T H e, e = w - dequant(q) */
static double out_err(lmq_type t, const float *w, const uint8_t *q, int64_t rows, int64_t n, const double *h)
{
    float *d = malloc((size_t)n * sizeof *d);
    double *e = malloc((size_t)n * sizeof *e);
    double total = 0.0;
    const int64_t rb = lmq_row_size(t, n);
    for (int64_t r = 0; r < rows; r++) {
        lmq_dequantize_row(t, q + r * rb, d, n);
        for (int64_t i = 0; i < n; i++) e[i] = (double)w[r * n + i] - d[i];
        for (int64_t i = 0; i < n; i++) {
            double s = 0.0;
            for (int64_t j = 0; j < n; j++) s += h[i * n + j] * e[j];
            total += e[i] * s;
        }
    }
    free(d);
    free(e);
    return total;
}

static void test_factor(const float *x, int64_t n_tok, int64_t n)
{
    float *u = calloc((size_t)(n * n), sizeof *u);
    lmq_gptq_accumulate(u, x, n_tok, n);
    double *h = full_h(x, n_tok, n);
    /* accumulate fills the upper triangle with H */
    double worst = 0.0, scale = 0.0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = i; j < n; j++) {
            worst = fmax(worst, fabs(u[i * n + j] - h[i * n + j]));
            scale = fmax(scale, fabs(h[i * n + j]));
        }
    T_CHECK(worst <= 1e-5 * scale, "accumulate: worst %g of %g", worst, scale);
    const float damp = 0.01f;
    T_CHECK(lmq_gptq_factor(u, n, damp) == LMQ_OK, "factor: %s", lmq_last_error());
    double mean = 0.0;
    for (int64_t i = 0; i < n; i++) mean += h[i * n + i];
    mean /= (double)n;
    for (int64_t i = 0; i < n; i++) h[i * n + i] += damp * mean;
    /* U upper, and U^T U (H + damp) = I: check (U (H + damp) U^T) = I, the
     * same identity multiplied by U on the left and U^-1 on the right */
    bool lower_zero = true;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < i; j++) lower_zero &= u[i * n + j] == 0.0f;
    T_CHECK(lower_zero, "factor: lower triangle is zero");
    double *uh = calloc((size_t)(n * n), sizeof *uh);
    for (int64_t i = 0; i < n; i++)
        for (int64_t k = i; k < n; k++) {
            const double a = u[i * n + k];
            for (int64_t j = 0; j < n; j++) uh[i * n + j] += a * h[k * n + j];
        }
    double dev = 0.0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0.0;
            for (int64_t k = j; k < n; k++) s += uh[i * n + k] * u[j * n + k];
            dev = fmax(dev, fabs(s - (i == j ? 1.0 : 0.0)));
        }
    printf("factor %lld x %lld: max |U H U^T - I| = %.2e\n", (long long)n, (long long)n, dev);
    T_CHECK(dev < 2e-5, "factor: U H U^T deviates from I by %g", dev); /* measured 4e-7 (C), 3e-6 (LAPACK) */
    free(uh);
    free(h);
    free(u);
}

/* One weight matrix: every type, plain vs error feedback. `margin`: the
 * largest allowed ratio of feedback to plain output error, set above the
 * measured ratios (printed): attn_q 0.87-0.93, ffn_down 0.77-0.82, the
 * 96-wide slice 0.97 (few inputs to spread an error over). */
static void test_matrix(const char *what, const float *w, int64_t rows, int64_t n, const float *x, int64_t n_tok,
                        const lmq_type *types, int n_types, double margin)
{
    double *h = full_h(x, n_tok, n);
    float *u = calloc((size_t)(n * n), sizeof *u), *im = malloc((size_t)n * sizeof *im);
    lmq_gptq_accumulate(u, x, n_tok, n);
    for (int64_t i = 0; i < n; i++) im[i] = (float)(h[i * n + i] / (double)n_tok);
    T_CHECK(lmq_gptq_factor(u, n, 0.01f) == LMQ_OK, "%s: factor: %s", what, lmq_last_error());
    float *scratch = malloc((size_t)(rows * n) * sizeof *scratch);
    for (int k = 0; k < n_types; k++) {
        const lmq_type t = types[k];
        const int64_t bytes = rows * lmq_row_size(t, n);
        uint8_t *plain = malloc((size_t)bytes), *fb = malloc((size_t)bytes), *fb1 = malloc((size_t)bytes);
        T_CHECK(lmq_gptq_supported(t), "%s supported", lmq_type_name(t));
        T_CHECK(lmq_quantize_rows(t, w, plain, rows, n, im, 2) == LMQ_OK, "plain %s", lmq_type_name(t));
        memcpy(scratch, w, (size_t)(rows * n) * sizeof *scratch);
        T_CHECK(lmq_quantize_rows_gptq(t, scratch, fb, rows, n, im, u, 2) == LMQ_OK, "gptq %s: %s", lmq_type_name(t),
                lmq_last_error());
        memcpy(scratch, w, (size_t)(rows * n) * sizeof *scratch);
        T_CHECK(lmq_quantize_rows_gptq(t, scratch, fb1, rows, n, im, u, 1) == LMQ_OK, "gptq %s, 1 thread", lmq_type_name(t));
        T_CHECK(!memcmp(fb, fb1, (size_t)bytes), "%s %s: the bytes do not depend on the thread count", what,
                lmq_type_name(t));
        const double ep = out_err(t, w, plain, rows, n, h), ef = out_err(t, w, fb, rows, n, h);
        printf("%-24s %-7s output error plain %.6g, feedback %.6g (%.3fx)\n", what, lmq_type_name(t), ep, ef, ef / ep);
        T_CHECK(ef < margin * ep, "%s %s: feedback %.6g vs plain %.6g, ratio above %.2f", what, lmq_type_name(t), ef, ep,
                margin);
        free(plain);
        free(fb);
        free(fb1);
    }
    free(scratch);
    free(im);
    free(u);
    free(h);
}

static void test_errors(void)
{
    float h[4] = {1, 0, 0, -1};
    T_CHECK(lmq_gptq_factor(h, 2, 0.01f) == LMQ_ERR_INVALID_ARG, "negative diagonal refused");
    float h2[4] = {1, 2, 2, 1}; /* indefinite */
    T_CHECK(lmq_gptq_factor(h2, 2, 0.0f) == LMQ_ERR_INVALID_ARG, "indefinite matrix refused");
    float h3[4] = {NAN, 0, 0, 1};
    T_CHECK(lmq_gptq_factor(h3, 2, 0.01f) == LMQ_ERR_INVALID_ARG, "NaN refused");
    float h4[4] = {0, 0, 0, 0}; /* never-active inputs: unit diagonal */
    T_CHECK(lmq_gptq_factor(h4, 2, 0.01f) == LMQ_OK && h4[2] == 0.0f && h4[0] > 0.0f, "dead inputs factor");
    T_CHECK(lmq_gptq_factor(h4, 0, 0.01f) == LMQ_ERR_INVALID_ARG, "n = 0 refused");
    T_CHECK(!lmq_gptq_supported(LMQ_TYPE_Q8_1) && !lmq_gptq_supported(LMQ_TYPE_F16) &&
                !lmq_gptq_supported(LMQ_TYPE_F8_E4M3), "q8_1/f16/fp8 have no grid");
    float u[32 * 32] = {0}, x[32] = {0};
    uint8_t out[64];
    for (int i = 0; i < 32; i++) u[i * 32 + i] = 1.0f;
    T_CHECK(lmq_quantize_rows_gptq(LMQ_TYPE_F16, x, out, 1, 32, NULL, u, 1) == LMQ_ERR_UNSUPPORTED, "f16 refused");
    T_CHECK(lmq_quantize_rows_gptq(LMQ_TYPE_Q4_K, x, out, 1, 32, NULL, u, 1) == LMQ_ERR_INVALID_ARG,
            "row of 32 refused for q4_K");
    x[5] = NAN;
    T_CHECK(lmq_quantize_rows_gptq(LMQ_TYPE_Q4_0, x, out, 1, 32, NULL, u, 1) == LMQ_ERR_INVALID_ARG, "NaN input refused");
    T_CHECK(strstr(lmq_last_error(), "element 5") != NULL, "message names the element: %s", lmq_last_error());
    x[5] = 0.0f;
    u[3 * 32 + 3] = 0.0f;
    T_CHECK(lmq_quantize_rows_gptq(LMQ_TYPE_Q4_0, x, out, 1, 32, NULL, u, 1) == LMQ_ERR_INVALID_ARG,
            "zero factor diagonal refused");
}

static float silu(float v)
{
    return v / (1.0f + expf(-v));
}

/* The covariance sums on several threads (fixed stripes of H, inputs of
 * 512 and more): the same bits for every thread count, H to float
 * accuracy, the lower triangle untouched. n = 600: stripes whose bounds
 * are not multiples of the width. */
static void test_accumulate_threads(const float *xd, int64_t n_tok, int64_t f)
{
    const int64_t n = 600;
    float *x = malloc((size_t)(n_tok * n) * sizeof *x);
    for (int64_t t = 0; t < n_tok; t++) memcpy(x + t * n, xd + t * f + 7, (size_t)n * sizeof *x);
    float *h[4];
    for (int k = 0; k < 4; k++) {
        h[k] = calloc((size_t)(n * n), sizeof *h[k]);
        for (int64_t t0 = 0; t0 < n_tok; t0 += 256) /* chunks of 256 tokens, as the calibration pass */
            if (k == 0)
                lmq_gptq_accumulate(h[k], x + t0 * n, n_tok - t0 < 256 ? n_tok - t0 : 256, n);
            else
                lmq_gptq_accumulate_mt(h[k], x + t0 * n, n_tok - t0 < 256 ? n_tok - t0 : 256, n, k);
    }
    for (int k = 1; k < 4; k++)
        T_CHECK(!memcmp(h[0], h[k], (size_t)(n * n) * sizeof *h[0]), "accumulate on %d threads: the same bits as on one", k);
    double *ref = full_h(x, n_tok, n);
    double worst = 0.0, scale = 0.0;
    bool lower_zero = true;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            if (j < i) {
                lower_zero &= h[2][i * n + j] == 0.0f;
                continue;
            }
            worst = fmax(worst, fabs(h[2][i * n + j] - ref[i * n + j]));
            scale = fmax(scale, fabs(ref[i * n + j]));
        }
    T_CHECK(worst <= 1e-5 * scale, "accumulate (threads, %lld wide): worst %g of %g", (long long)n, worst, scale);
    T_CHECK(lower_zero, "accumulate leaves the lower triangle alone");
    free(ref);
    for (int k = 0; k < 4; k++) free(h[k]);
    free(x);
}

int main(void)
{
    const char *path = t_shared("models/llama-8m-debtext/model.safetensors");
    t_require(path);
    test_errors();
    lmq_safetensors *st = NULL;
    T_CHECK(lmq_safetensors_open(path, &st) == LMQ_OK, "open %s: %s", path, lmq_last_error());
    if (!st) return t_finish();
    const int64_t V = 4096, E = 256, F = 768;
    const float *emb = tensor_f32(st, "model.embed_tokens.weight", V, E);
    const float *an = tensor_f32(st, "model.layers.0.input_layernorm.weight", 1, E);
    const float *fn = tensor_f32(st, "model.layers.0.post_attention_layernorm.weight", 1, E);
    const float *wq = tensor_f32(st, "model.layers.0.self_attn.q_proj.weight", E, E);
    const float *wg = tensor_f32(st, "model.layers.0.mlp.gate_proj.weight", F, E);
    const float *wu = tensor_f32(st, "model.layers.0.mlp.up_proj.weight", F, E);
    const float *wd = tensor_f32(st, "model.layers.0.mlp.down_proj.weight", E, F);
    if (!emb || !an || !fn || !wq || !wg || !wu || !wd) {
        lmq_safetensors_close(st);
        return t_finish();
    }
    /* inputs of layer 0 for one token of each kind */
    float *xa = malloc((size_t)(V * E) * sizeof *xa), *xf = malloc((size_t)(V * E) * sizeof *xf);
    float *xd = malloc((size_t)(V * F) * sizeof *xd);
    for (int64_t t = 0; t < V; t++) {
        double ss = 0.0;
        for (int64_t i = 0; i < E; i++) ss += (double)emb[t * E + i] * emb[t * E + i];
        const float r = (float)(1.0 / sqrt(ss / (double)E + 1e-5));
        for (int64_t i = 0; i < E; i++) {
            xa[t * E + i] = emb[t * E + i] * r * an[i];
            xf[t * E + i] = emb[t * E + i] * r * fn[i];
        }
        for (int64_t o = 0; o < F; o++) {
            float g = 0.0f, up = 0.0f;
            for (int64_t i = 0; i < E; i++) {
                g += wg[o * E + i] * xf[t * E + i];
                up += wu[o * E + i] * xf[t * E + i];
            }
            xd[t * F + o] = silu(g) * up;
        }
    }
    test_factor(xa, V, E);
    test_factor(xd, 1024, F); /* fewer tokens than inputs: the damping carries it */
    test_accumulate_threads(xd, 1000, F);
    static const lmq_type k_all[] = {LMQ_TYPE_Q2_K, LMQ_TYPE_Q3_K, LMQ_TYPE_Q4_K, LMQ_TYPE_Q5_K,
                                     LMQ_TYPE_Q6_K, LMQ_TYPE_IQ4_XS, LMQ_TYPE_Q4_0, LMQ_TYPE_Q8_0};
    test_matrix("blk.0.attn_q", wq, E, E, xa, V, k_all, 8, 0.95);
    test_matrix("blk.0.ffn_down", wd, E, F, xd, V, k_all, 8, 0.87);
    /* 32-element types on rows of 96: three windows of one block each */
    static const lmq_type k_legacy[] = {LMQ_TYPE_Q4_0, LMQ_TYPE_Q4_1, LMQ_TYPE_Q5_0, LMQ_TYPE_Q5_1,
                                        LMQ_TYPE_Q8_0, LMQ_TYPE_IQ4_NL, LMQ_TYPE_MXFP4};
    float *w96 = malloc((size_t)(64 * 96) * sizeof *w96), *x96 = malloc((size_t)(V * 96) * sizeof *x96);
    for (int64_t r = 0; r < 64; r++) memcpy(w96 + r * 96, wd + r * F + 5, 96 * sizeof *w96);
    for (int64_t t = 0; t < V; t++) memcpy(x96 + t * 96, xd + t * F + 5, 96 * sizeof *x96);
    test_matrix("ffn_down[:, 5:101]", w96, 64, 96, x96, V, k_legacy, 7, 0.99);
    test_matrix("blk.0.ffn_down (32-blocks)", wd, E, F, xd, V, k_legacy, 7, 0.87);
    free(w96);
    free(x96);
    free(xa);
    free(xf);
    free(xd);
    lmq_safetensors_close(st);
    return t_finish();
}
