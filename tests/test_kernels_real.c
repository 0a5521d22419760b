/* Kernel tests on real weights: rows of ../shared/models/llama-8m-debtext
 * quantized to every type with the quantize module, dotted against real
 * activations (embedding rows) with every ISA compiled and supported here;
 * SIMD vs scalar reference, reference vs dequantize-then-dot, and a real
 * projection (down_proj, 256 x 768) through lmq_matmul vs a naive product.
 * Skips (exit 77) when the model is absent. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "testutil.h"

static int n_isas;
static lmq_isa isas[LMQ_ISA_COUNT];

static const float *tensor_f32(const lmq_safetensors *st, const char *name, int64_t *n)
{
    const lmq_st_tensor *t = lmq_safetensors_find(st, name);
    T_CHECK(t && t->type == LMQ_TYPE_F32, "%s is an f32 tensor", name);
    if (!t || t->type != LMQ_TYPE_F32) return NULL;
    *n = (int64_t)(t->nbytes / 4);
    return t->data;
}

static double deq_dot(lmq_type t, const void *w, const void *act, int64_t n, double *scale)
{
    float *wf = malloc((size_t)n * 4), *af = malloc((size_t)n * 4);
    lmq_dequantize_row(t, w, wf, n);
    if (lmq_act_type(t) == LMQ_TYPE_F32)
        memcpy(af, act, (size_t)n * 4);
    else
        lmq_dequantize_row(lmq_act_type(t), act, af, n);
    double s = 0, a = 0;
    for (int64_t i = 0; i < n; i++) {
        s += (double)wf[i] * af[i];
        a += fabs((double)wf[i] * af[i]);
    }
    free(wf);
    free(af);
    *scale = a + 1e-30;
    return s;
}

static void test_dots(const float *wsrc, int64_t wlen, const float *xsrc, int64_t xlen)
{
    static const int blocks[5] = {1, 2, 3, 7, 33};
    for (int t = 0; t < LMQ_TYPE_COUNT; t++) {
        if (!lmq_matmul_supported((lmq_type)t)) continue;
        const int64_t bs = lmq_type_get((lmq_type)t)->block_size == 1 ? 32 : lmq_type_get((lmq_type)t)->block_size;
        const lmq_type at = lmq_act_type((lmq_type)t);
        for (int k = 0; k < 5; k++) {
            const int64_t n = blocks[k] * bs;
            if (n > wlen || n > xlen) continue;
            /* offsets keep the block structs' C alignment but not SIMD alignment */
            const size_t wo = t == LMQ_TYPE_F32 ? 4 : 2, ao = at == LMQ_TYPE_F32 || at == LMQ_TYPE_Q8_K ? 4 : 2;
            uint8_t *wbuf = malloc((size_t)lmq_row_size((lmq_type)t, n) + 4), *w = wbuf + wo;
            const int64_t abytes = at == LMQ_TYPE_F32 ? n * 4 : lmq_row_size(at, n);
            uint8_t *abuf = malloc((size_t)abytes + 4), *act = abuf + ao;
            T_CHECK(lmq_quantize_row((lmq_type)t, wsrc, w, n, NULL) == LMQ_OK, "quantize %s: %s",
                    lmq_type_name((lmq_type)t), lmq_last_error());
            T_CHECK(lmq_act_quantize((lmq_type)t, xsrc, act, n) == LMQ_OK, "act quantize");
            double scale;
            const double exact = deq_dot((lmq_type)t, w, act, n, &scale);
            float ref;
            lmq_kernels_for(LMQ_ISA_SCALAR)->vec_dot[t](n, &ref, w, act);
            const double tol_deq = at == LMQ_TYPE_Q8_1 ? 2e-3 : 2e-6;
            T_CHECK(fabs(ref - exact) <= tol_deq * scale, "%s n=%lld: ref %.9g vs dequantized %.9g",
                    lmq_type_name((lmq_type)t), (long long)n, ref, exact);
            for (int i = 1; i < n_isas; i++) {
                float v = NAN;
                lmq_kernels_for(isas[i])->vec_dot[t](n, &v, w, act);
                T_CHECK(fabs(v - ref) <= 2e-6 * scale, "%s %s n=%lld: %.9g vs ref %.9g", lmq_type_name((lmq_type)t),
                        lmq_isa_name(isas[i]), (long long)n, v, ref);
            }
            free(wbuf);
            free(abuf);
        }
    }
}

/* down_proj (256 rows of 768) times 1, 3, 17, 33 activations */
static void test_projection(const float *wsrc, const float *emb, int64_t emb_len)
{
    const int64_t n_out = 256, n_in = 768, max_tok = 33;
    if (emb_len < max_tok * n_in) return;
    lmq_pool *p1 = NULL, *p2 = NULL;
    lmq_workspace *ws = NULL;
    T_CHECK(!lmq_pool_new(1, &p1) && !lmq_pool_new(2, &p2) && !lmq_workspace_new(&ws), "pools");
    float *y1 = malloc((size_t)(max_tok * n_out * 4)), *y2 = malloc((size_t)(max_tok * n_out * 4));
    float *wf = malloc((size_t)n_in * 4);
    const int64_t toks[4] = {1, 3, 17, 33};
    for (int t = 0; t < LMQ_TYPE_COUNT; t++) {
        if (!lmq_matmul_supported((lmq_type)t)) continue;
        const int64_t row = lmq_row_size((lmq_type)t, n_in);
        uint8_t *w = malloc((size_t)(row * n_out));
        T_CHECK(lmq_quantize_rows((lmq_type)t, wsrc, w, n_out, n_in, NULL, 1) == LMQ_OK, "quantize rows");
        for (int ii = 0; ii < n_isas; ii++) {
            lmq_isa_force(isas[ii]);
            for (int k = 0; k < 4; k++) {
                const int64_t nt = toks[k];
                T_CHECK(!lmq_matmul(p1, (lmq_type)t, w, n_out, n_in, emb, nt, y1, ws) &&
                            !lmq_matmul(p2, (lmq_type)t, w, n_out, n_in, emb, nt, y2, ws),
                        "matmul: %s", lmq_last_error());
                T_CHECK(memcmp(y1, y2, (size_t)(nt * n_out * 4)) == 0, "%s %s %lld tok: 1 and 2 threads agree",
                        lmq_type_name((lmq_type)t), lmq_isa_name(isas[ii]), (long long)nt);
                /* against the f32 product of the dequantized weights; the
                 * q8 activations cost at most half a step per element */
                double worst = 0;
                for (int64_t r = 0; r < n_out; r++) {
                    lmq_dequantize_row((lmq_type)t, w + r * row, wf, n_in);
                    for (int64_t tk = 0; tk < nt; tk++) {
                        const float *x = emb + tk * n_in;
                        double e = 0, sw = 0, amax = 0;
                        for (int64_t i = 0; i < n_in; i++) {
                            e += (double)wf[i] * x[i];
                            sw += fabs(wf[i]);
                            amax = fmax(amax, fabs(x[i]));
                        }
                        const double tol = lmq_act_type((lmq_type)t) == LMQ_TYPE_F32 ? 1e-5 * sw * amax : sw * amax / 254 + 1e-6;
                        const double err = fabs(y1[tk * n_out + r] - e) / tol;
                        if (err > worst) worst = err;
                    }
                }
                T_CHECK(worst <= 1.0, "%s %s %lld tok: error %.3g of the bound", lmq_type_name((lmq_type)t),
                        lmq_isa_name(isas[ii]), (long long)nt, worst);
            }
        }
        free(w);
    }
    lmq_isa_force(isas[n_isas - 1]);
    free(y1);
    free(y2);
    free(wf);
    lmq_workspace_free(ws);
    lmq_pool_free(p1);
    lmq_pool_free(p2);
}

int main(void)
{
    n_isas = lmq_isa_list(isas, LMQ_ISA_COUNT);
    const char *path = t_shared("models/llama-8m-debtext/model.safetensors");
    t_require(path);
    lmq_safetensors *st = NULL;
    T_CHECK(lmq_safetensors_open(path, &st) == LMQ_OK, "open %s: %s", path, lmq_last_error());
    if (!st) return t_finish();
    int64_t nq, nd, ne;
    const float *q = tensor_f32(st, "model.layers.0.self_attn.q_proj.weight", &nq);
    const float *down = tensor_f32(st, "model.layers.1.mlp.down_proj.weight", &nd);
    const float *emb = tensor_f32(st, "model.embed_tokens.weight", &ne);
    if (q && down && emb) {
        test_dots(q, nq, emb + 256 * 100, ne - 256 * 100);
        test_dots(down, nd, emb, ne);
        test_projection(down, emb, ne);
    }
    lmq_safetensors_close(st);
    return t_finish();
}
