/* Kernel tests on real weights: rows of ../shared/models/llama-8m-debtext
 * quantized to every type with the quantize module, dotted against real
 * activations (embedding rows) with every ISA compiled and supported here;
 * SIMD vs scalar reference, reference vs dequantize-then-dot, and a real
 * projection (down_proj, 256 x 768) through lmq_matmul vs a naive product;
 * gpt-oss's MXFP4 expert matrices as stored in a GGUF (the zoo's gptoss)
 * through lmq_matmul and lmq_matmul_multi, against the f32 product.
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
        /* real weights need a quantizer: the read-only codebook types are
         * checked on ggml's own blocks (test_quant_iq.c) */
        if (!lmq_matmul_supported((lmq_type)t) || !lmq_type_can_quantize((lmq_type)t)) continue;
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
        if (!lmq_matmul_supported((lmq_type)t) || !lmq_type_can_quantize((lmq_type)t)) continue;
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

/* gpt-oss's expert matrices (MXFP4 blocks from ../shared/reference/zoo/
 * gptoss-q8_0.gguf: gate/up 128 x 256, down 256 x 128, 8 experts per
 * layer) times real activations (embedding rows), every ISA, 1 to 40 tokens
 * (40: the BLAS path where the build has one): the error against the f32
 * product of the decoded weights stays within what the q8_0 activations
 * cost (half a step per element), and is printed as a relative RMS;
 * lmq_matmul_multi over four experts gives lmq_matmul's bits per expert. */
static void test_mxfp4_experts(const float *emb, int64_t emb_len)
{
    lmq_file *f = NULL;
    T_CHECK(lmq_file_open(t_shared("reference/zoo/gptoss-q8_0.gguf"), &f) == LMQ_OK, "%s", lmq_last_error());
    if (!f) return;
    lmq_pool *p2 = NULL;
    lmq_workspace *ws = NULL;
    T_CHECK(!lmq_pool_new(2, &p2) && !lmq_workspace_new(&ws), "pool");
    static const char *const names[3] = {"blk.1.ffn_gate_exps.weight", "blk.2.ffn_up_exps.weight",
                                         "blk.3.ffn_down_exps.weight"};
    enum { MAX_TOK = 40 };
    const int64_t toks[4] = {1, 4, 17, MAX_TOK};
    for (int ni = 0; ni < 3; ni++) {
        const lmq_tensor_info *ti = lmq_file_find_tensor(f, names[ni]);
        T_CHECK(ti && ti->type == LMQ_TYPE_MXFP4 && ti->n_dims == 3, "%s is MXFP4", names[ni]);
        if (!ti || ti->type != LMQ_TYPE_MXFP4 || ti->n_dims != 3) continue;
        const int64_t n_in = ti->ne[0], n_out = ti->ne[1], n_exp = ti->ne[2], row = lmq_row_size(LMQ_TYPE_MXFP4, n_in);
        if (emb_len < MAX_TOK * n_in || n_exp < 4) continue;
        float *y = malloc(sizeof(float) * (size_t)(MAX_TOK * n_out)), *wf = malloc(sizeof(float) * (size_t)n_in);
        float *ym[4];
        for (int e = 0; e < 4; e++) ym[e] = malloc(sizeof(float) * (size_t)(MAX_TOK * n_out));
        for (int ii = 0; ii < n_isas; ii++) {
            lmq_isa_force(isas[ii]);
            for (int k = 0; k < 4; k++) {
                const int64_t nt = toks[k];
                double worst = 0, se = 0, ss = 0;
                for (int64_t e = 0; e < n_exp; e++) {
                    const uint8_t *w = (const uint8_t *)ti->data + e * n_out * row;
                    T_CHECK(!lmq_matmul(p2, LMQ_TYPE_MXFP4, w, n_out, n_in, emb, nt, y, ws), "matmul: %s", lmq_last_error());
                    for (int64_t r = 0; r < n_out; r++) {
                        lmq_dequantize_row(LMQ_TYPE_MXFP4, w + r * row, wf, n_in);
                        for (int64_t tk = 0; tk < nt; tk++) {
                            const float *x = emb + tk * n_in;
                            double exact = 0, sw = 0, amax = 0;
                            for (int64_t i = 0; i < n_in; i++) {
                                exact += (double)wf[i] * x[i];
                                sw += fabs(wf[i]);
                                amax = fmax(amax, fabs(x[i]));
                            }
                            const double d = y[tk * n_out + r] - exact;
                            worst = fmax(worst, fabs(d) / (sw * amax / 254 + 1e-6));
                            se += d * d;
                            ss += exact * exact;
                        }
                    }
                }
                T_CHECK(worst <= 1.0, "%s %s %lld tok: error %.3g of the bound", names[ni], lmq_isa_name(isas[ii]),
                        (long long)nt, worst);
                if (k != 1)
                    printf("%-28s %-6s %2lld tok: relative RMS error vs f32 %.3g (%.2f of the q8_0 bound at worst)\n",
                           names[ni], lmq_isa_name(isas[ii]), (long long)nt, sqrt(se / (ss + 1e-300)), worst);
            }
            /* four experts in one call, the tokens split unevenly */
            lmq_matmul_part parts[4];
            for (int e = 0; e < 4; e++)
                parts[e] = (lmq_matmul_part){(const uint8_t *)ti->data + (e + 1) * n_out * row, n_out, emb + e * n_in,
                                             1 + 5 * e, ym[e], NULL};
            T_CHECK(lmq_matmul_multi(p2, LMQ_TYPE_MXFP4, n_in, parts, 4, ws) == LMQ_OK, "%s", lmq_last_error());
            bool same = true;
            for (int e = 0; e < 4; e++) {
                T_CHECK(!lmq_matmul(p2, LMQ_TYPE_MXFP4, parts[e].w, n_out, n_in, parts[e].x, parts[e].n_tok, y, ws),
                        "matmul");
                same &= !memcmp(y, ym[e], sizeof(float) * (size_t)(parts[e].n_tok * n_out));
            }
            T_CHECK(same, "%s %s: lmq_matmul_multi equals lmq_matmul per expert", names[ni], lmq_isa_name(isas[ii]));
        }
        for (int e = 0; e < 4; e++) free(ym[e]);
        free(y);
        free(wf);
    }
    lmq_isa_force(isas[n_isas - 1]);
    lmq_workspace_free(ws);
    lmq_pool_free(p2);
    lmq_file_close(f);
}

int main(void)
{
    n_isas = lmq_isa_list(isas, LMQ_ISA_COUNT);
    const char *path = t_shared("models/llama-8m-debtext/model.safetensors");
    t_require(path);
    t_require(t_shared("reference/zoo/gptoss-q8_0.gguf"));
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
        test_mxfp4_experts(emb, ne);
    }
    lmq_safetensors_close(st);
    return t_finish();
}
