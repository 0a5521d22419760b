/* llama.cpp's low-bit files run in lmq: tests/data/llama8m-lowbit-mix.gguf
 * is llama-8m with layer i taken from llama-quantize's (imatrix) file of
 * IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S and TQ1_0 (layer 7's
 * FFN from TQ2_0), the embedding q2_K and the head q5_K as those files had
 * them: every codebook and ternary type in one model, bytes as ggml wrote
 * them.
 *
 * Checked: the perplexity straight from the GGUF equals llama.cpp's on the
 * same file (llama-perplexity -c 256 --chunks 8, c392e5094: 300.0007; the
 * programs' float sums differ by 0.05%, a wrong decode of any one type
 * moves it by percent), the same after `lmq convert` (bit for bit) and on
 * the scalar kernels (to their rounding); the export gives the tensors'
 * bytes back unchanged. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_convert.h"
#include "lmq_datasets.h"
#include "lmq_eval.h"
#include "lmq_format.h"
#include "lmq_runtime.h"
#include "testutil.h"

#define PPL_CTX 256
#define PPL_CHUNKS 8
#define LLAMA_CPP_PPL 300.0007 /* llama-perplexity on the file, see above */
#define TEXT_BYTES (64 * 1024) /* 8 x 256 tokens are the text's first ~10 KB */

static char *g_text;
static size_t g_text_len;

static double ppl_of(const char *path)
{
    lmq_model *m = NULL;
    if (lmq_model_load(path, &m) != LMQ_OK) {
        T_CHECK(0, "load %s: %s", path, lmq_last_error());
        return NAN;
    }
    int32_t *toks = NULL;
    size_t n = 0;
    double ppl = NAN;
    const lmq_vocab *v = lmq_model_vocab(m);
    if (!v || lmq_tokenize_alloc(v, g_text, g_text_len, true, false, &toks, &n) != LMQ_OK) {
        T_CHECK(0, "%s: tokenize: %s", path, lmq_last_error());
    } else {
        lmq_ppl_params p = lmq_ppl_default_params();
        p.n_ctx = PPL_CTX;
        p.n_chunks = PPL_CHUNKS;
        p.n_threads = 2;
        lmq_ppl_result r;
        lmq_status s = lmq_perplexity(m, toks, (int64_t)n, &p, &r);
        T_CHECK(s == LMQ_OK && r.n_chunks == PPL_CHUNKS, "%s: perplexity: %s", path, lmq_last_error());
        if (!s) {
            ppl = r.ppl;
            printf("%s (%s) -c %d --chunks %d: PPL %.6f +/- %.5f\n", path, lmq_isa_name(lmq_isa_active()), PPL_CTX,
                   PPL_CHUNKS, r.ppl, r.ppl_err);
        }
    }
    free(toks);
    lmq_model_free(m);
    return ppl;
}

/* Every tensor of a has the same type, shape and bytes in b. */
static void same_tensors(const char *pa, const char *pb)
{
    lmq_file *a = NULL, *b = NULL;
    T_CHECK(lmq_file_open(pa, &a) == LMQ_OK && lmq_file_open(pb, &b) == LMQ_OK, "open %s, %s: %s", pa, pb,
            lmq_last_error());
    if (a && b) {
        size_t bad = 0, lowbit = 0;
        for (size_t i = 0; i < lmq_file_n_tensors(a); i++) {
            const lmq_tensor_info *x = lmq_file_tensor(a, i), *y = lmq_file_find_tensor(b, x->name);
            if (!y || y->type != x->type || y->nbytes != x->nbytes || memcmp(x->data, y->data, x->nbytes)) bad++;
            lowbit += x->type >= LMQ_TYPE_IQ2_XXS && x->type <= LMQ_TYPE_TQ2_0;
        }
        T_CHECK(bad == 0 && lmq_file_n_tensors(a) == lmq_file_n_tensors(b), "%s -> %s: %zu tensors differ", pa, pb, bad);
        T_CHECK(lowbit == 51, "51 codebook / ternary tensors (%zu)", lowbit);
    }
    lmq_file_close(a);
    lmq_file_close(b);
}

int main(void)
{
    char wiki[4096];
    if (lmq_wikitext2_find(t_shared("data"), NULL, wiki, sizeof wiki) != LMQ_OK)
        t_skip("wikitext-2 not found under %s: %s", t_shared("data"), lmq_last_error());
    T_CHECK(lmq_text_load(wiki, 0, &g_text, &g_text_len) == LMQ_OK, "load %s: %s", wiki, lmq_last_error());
    if (g_text_len > TEXT_BYTES) g_text_len = TEXT_BYTES;
    const char *gguf = t_data("llama8m-lowbit-mix.gguf");
    lmq_file *f = NULL;
    T_CHECK(lmq_file_open(gguf, &f) == LMQ_OK, "open %s: %s", gguf, lmq_last_error());
    if (f) {
        int seen[LMQ_TYPE_COUNT] = {0};
        for (size_t i = 0; i < lmq_file_n_tensors(f); i++) seen[lmq_file_tensor(f, i)->type]++;
        for (int t = LMQ_TYPE_IQ2_XXS; t <= LMQ_TYPE_TQ2_0; t++)
            T_CHECK(seen[t] > 0, "the file holds %s tensors", lmq_type_name((lmq_type)t));
        lmq_file_close(f);
    }

    const double p_gguf = ppl_of(gguf);
    T_CHECK(fabs(p_gguf / LLAMA_CPP_PPL - 1) < 1.5e-3, "PPL %.4f, llama.cpp's %.4f (within 0.15%%)", p_gguf,
            LLAMA_CPP_PPL);
    const lmq_isa isa = lmq_isa_active();
    lmq_isa_force(LMQ_ISA_SCALAR); /* loaded without repacking, every product scalar */
    const double p_scalar = ppl_of(gguf);
    lmq_isa_force(isa);
    /* the scalar table rounds its activations in its own order: measured
     * 0.11% here, 0.05% on llama.cpp's Q4_K_M file, 0.2% on its TQ2_0 one */
    T_CHECK(fabs(p_scalar / p_gguf - 1) < 5e-3, "scalar kernels: PPL %.6f against %.6f", p_scalar, p_gguf);

    const char *lmq = t_tmp("lowbit.lmq"), *back = t_tmp("lowbit-back.gguf");
    T_CHECK(lmq_convert_gguf(gguf, lmq, NULL, NULL) == LMQ_OK, "convert: %s", lmq_last_error());
    const double p_lmq = ppl_of(lmq);
    T_CHECK(p_lmq == p_gguf, "converted: PPL %.6f, the GGUF's %.6f", p_lmq, p_gguf);
    lmq_export_opts eo = {0};
    T_CHECK(lmq_export_gguf(lmq, back, &eo, NULL) == LMQ_OK, "export: %s", lmq_last_error());
    same_tensors(gguf, back);
    free(g_text);
    return t_finish();
}
