/* Perplexity on wikitext-2 against llama.cpp's figures for the same files
 * (../shared/reference: llamacpp-figures.json and README.md), same method
 * and flags (-c, --chunks, f16 KV cache, 2 threads):
 *   - llama-8m-debtext converted from its HF directory to an f32 .lmq:
 *     PPL and its ± within 0.05% / 1% of llama.cpp's f32 GGUF figure;
 *   - llama.cpp's own q4_k_m GGUF of it: PPL within 0.05%, and the KL
 *     divergence against the f32 base (saved logits file) within 5% with
 *     the same-top-token rate within 0.5 points;
 *   - stories260K (llama.cpp's f32 GGUF at -c 256, 100 chunks; the HF
 *     conversion at -c 512, 400 chunks).
 * Skips (exit 77) when ../shared is absent. */
#include <cjson/cJSON.h>
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

/* README figures for stories260K (not in llamacpp-figures.json). */
#define STORIES_PPL_C256_100 115.7021
#define STORIES_ERR_C256_100 3.98805
#define STORIES_PPL_C512_400 132.4787
#define STORIES_ERR_C512_400 1.56734

static char *g_text;
static size_t g_text_len;

static bool run(const char *model, int c, int chunks, const char *save, const char *kld, lmq_ppl_result *r)
{
    lmq_model *m = NULL;
    if (lmq_model_load(model, &m) != LMQ_OK) {
        T_CHECK(0, "load %s: %s", model, lmq_last_error());
        return false;
    }
    int32_t *toks = NULL;
    size_t n = 0;
    bool ok = false;
    const lmq_vocab *v = lmq_model_vocab(m);
    if (!v || lmq_tokenize_alloc(v, g_text, g_text_len, true, false, &toks, &n) != LMQ_OK) {
        T_CHECK(0, "%s: tokenize: %s", model, lmq_last_error());
        goto out;
    }
    lmq_ppl_params p = lmq_ppl_default_params();
    p.n_ctx = c;
    p.n_chunks = chunks;
    p.n_threads = 2;
    p.save_logits = save;
    p.kld_base = kld;
    ok = lmq_perplexity(m, toks, (int64_t)n, &p, r) == LMQ_OK;
    T_CHECK(ok, "%s: perplexity: %s", model, lmq_last_error());
    if (ok)
        printf("%s -c %d --chunks %d: PPL %.4f +/- %.5f (%lld tokens scored, %.1f s)\n", model, c, chunks, r->ppl,
               r->ppl_err, (long long)r->n_scored, r->seconds);
out:
    free(toks);
    lmq_model_free(m);
    return ok;
}

static double num(const cJSON *o, const char *a, const char *b, const char *c)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
    x = cJSON_GetObjectItemCaseSensitive(x, b);
    x = cJSON_GetObjectItemCaseSensitive(x, c);
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

int main(void)
{
    char wiki[4096];
    t_require(t_shared("reference/llamacpp-figures.json"));
    if (lmq_wikitext2_find(t_shared("data"), NULL, wiki, sizeof wiki) != LMQ_OK)
        t_skip("wikitext-2 not found under %s: %s", t_shared("data"), lmq_last_error());
    T_CHECK(lmq_text_load(wiki, 0, &g_text, &g_text_len) == LMQ_OK, "load %s: %s", wiki, lmq_last_error());
    char *json = NULL;
    size_t json_len = 0;
    T_CHECK(lmq_read_file(t_shared("reference/llamacpp-figures.json"), 1u << 20, &json, &json_len) == LMQ_OK,
            "figures: %s", lmq_last_error());
    cJSON *fig = json ? cJSON_ParseWithLength(json, json_len) : NULL;
    free(json);
    const cJSON *m8 = cJSON_GetObjectItemCaseSensitive(fig, "llama-8m-debtext");
    const double f32_ppl = num(m8, "ppl_c256", "f32", "ppl"), f32_err = num(m8, "ppl_c256", "f32", "stderr");
    const double q4_ppl = num(m8, "ppl_c256", "q4_k_m", "ppl"), q4_kld = num(m8, "ppl_c256", "q4_k_m", "kld");
    const double q4_top = num(m8, "ppl_c256", "q4_k_m", "same_top_pct");
    const int chunks = (int)num(m8, "ppl_c256", "f32", "chunks");
    T_CHECK(isfinite(f32_ppl) && isfinite(q4_ppl) && isfinite(q4_kld) && chunks > 0, "figures have the entries");
    if (!g_text || !fig || !isfinite(f32_ppl) || chunks <= 0) goto out;

    /* llama-8m-debtext: HF -> f32 .lmq, then llama.cpp's q4_k_m GGUF with KLD */
    const char *f32 = t_tmp("m8-f32.lmq");
    lmq_convert_opts co;
    memset(&co, 0, sizeof co);
    co.out_type = LMQ_TYPE_F32;
    T_CHECK(lmq_convert_hf(t_shared("models/llama-8m-debtext"), f32, &co, NULL) == LMQ_OK, "convert: %s",
            lmq_last_error());
    lmq_ppl_result r;
    const char *base = t_tmp("m8-f32.logits");
    if (run(f32, 256, chunks, base, NULL, &r)) {
        T_NEAR(r.ppl, f32_ppl, 5e-4 * f32_ppl, "llama-8m f32 PPL vs llama.cpp");
        T_NEAR(r.ppl_err, f32_err, 1e-2 * f32_err, "llama-8m f32 PPL error vs llama.cpp");
        T_CHECK(r.n_scored == (int64_t)chunks * 127, "scored tokens %lld", (long long)r.n_scored);
        T_CHECK(r.logits_bytes > 0 && r.logits_bytes < r.logits_bytes_llama, "logits file %llu bytes < llama.cpp's %llu",
                (unsigned long long)r.logits_bytes, (unsigned long long)r.logits_bytes_llama);
    }
    if (run(t_shared("reference/llama-8m-debtext-q4_k_m.gguf"), 256, chunks, NULL, base, &r)) {
        T_NEAR(r.ppl, q4_ppl, 5e-4 * q4_ppl, "llama.cpp's q4_k_m GGUF PPL vs llama.cpp");
        T_CHECK(r.has_kld, "KLD computed");
        T_NEAR(r.kld.kld_mean, q4_kld, 0.05 * q4_kld, "q4_k_m mean KLD vs llama.cpp");
        T_NEAR(r.kld.same_top_pct, q4_top, 0.5, "q4_k_m same-top % vs llama.cpp");
    }
    remove(base);

    /* stories260K: llama.cpp's f32 GGUF, and our HF conversion at -c 512 */
    if (run(t_shared("reference/stories260K-f32.gguf"), 256, 100, NULL, NULL, &r)) {
        T_NEAR(r.ppl, STORIES_PPL_C256_100, 5e-4 * STORIES_PPL_C256_100, "stories260K GGUF -c 256 PPL");
        T_NEAR(r.ppl_err, STORIES_ERR_C256_100, 1e-2 * STORIES_ERR_C256_100, "stories260K GGUF -c 256 error");
    }
    const char *st = t_tmp("stories-f32.lmq");
    T_CHECK(lmq_convert_hf(t_shared("models/stories260K-hf"), st, &co, NULL) == LMQ_OK, "convert: %s",
            lmq_last_error());
    if (run(st, 512, 400, NULL, NULL, &r)) {
        T_NEAR(r.ppl, STORIES_PPL_C512_400, 5e-4 * STORIES_PPL_C512_400, "stories260K -c 512 PPL");
        T_NEAR(r.ppl_err, STORIES_ERR_C512_400, 1e-2 * STORIES_ERR_C512_400, "stories260K -c 512 error");
    }
out:
    cJSON_Delete(fig);
    free(g_text);
    return t_finish();
}
