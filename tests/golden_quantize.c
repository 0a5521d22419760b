/* lmq quantize against llama.cpp on the shared models (../shared/reference):
 *  - llama-8m-debtext (converted from its HF directory to an f32 .lmq) in
 *    every mix of llamacpp-figures.json: bits per weight within 1% of
 *    llama-quantize's, and for the mixes whose GGUF llama.cpp wrote, the
 *    same type for every tensor and the same tensor data size;
 *  - stories260K (64/172-wide rows, tied embeddings) in q4_k_m: the types
 *    of llama.cpp's fallbacks;
 *  - the recorded metadata (general.file_type, quantization version, mix,
 *    source id) and checksums that verify;
 *  - 1 and 2 threads write byte-identical files;
 *  - llama.cpp's own f32 GGUF quantized to q8_0 and q4_0 (round-to-nearest
 *    types, deterministic) gives tensor bytes identical to its GGUF files
 *    (except q4_0's q6_K output head, whose scale search is lmq's own). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_convert.h"
#include "lmq_format.h"
#include "lmq_quant.h"
#include "testutil.h"

static lmq_quantize_opts qopts(const char *mix, int n_threads)
{
    lmq_quantize_opts o;
    memset(&o, 0, sizeof o);
    o.mix = mix;
    o.output_type = LMQ_TYPE_COUNT;
    o.token_embd_type = LMQ_TYPE_COUNT;
    o.n_threads = n_threads;
    return o;
}

static bool convert_f32(const char *model_dir, const char *out)
{
    lmq_convert_opts co;
    memset(&co, 0, sizeof co);
    co.out_type = LMQ_TYPE_F32;
    lmq_status s = lmq_convert_hf(t_shared(model_dir), out, &co, NULL);
    T_CHECK(s == LMQ_OK, "convert %s: %s", model_dir, lmq_last_error());
    return s == LMQ_OK;
}

/* Every tensor of `got` has the type llama.cpp gave it in `ref`; returns
 * the number of differences. */
static int compare_types(const lmq_file *got, const lmq_file *ref, const char *what)
{
    int bad = 0;
    T_CHECK(lmq_file_n_tensors(got) == lmq_file_n_tensors(ref), "%s: %zu tensors vs llama.cpp's %zu", what,
            lmq_file_n_tensors(got), lmq_file_n_tensors(ref));
    for (size_t i = 0; i < lmq_file_n_tensors(got); i++) {
        const lmq_tensor_info *g = lmq_file_tensor(got, i);
        const lmq_tensor_info *r = lmq_file_find_tensor(ref, g->name);
        if (!r || r->type != g->type) {
            if (bad < 5)
                T_CHECK(false, "%s: %s is %s, llama.cpp has %s", what, g->name, lmq_type_name(g->type),
                        r ? lmq_type_name(r->type) : "no such tensor");
            bad++;
        }
    }
    T_CHECK(bad == 0, "%s: %d tensor types differ from llama.cpp's", what, bad);
    return bad;
}

static uint64_t data_bytes(const lmq_file *f, uint64_t *n_elements)
{
    uint64_t b = 0, n = 0;
    for (size_t i = 0; i < lmq_file_n_tensors(f); i++) {
        const lmq_tensor_info *t = lmq_file_tensor(f, i);
        b += t->nbytes;
        uint64_t e = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) e *= (uint64_t)t->ne[d];
        n += e;
    }
    if (n_elements) *n_elements = n;
    return b;
}

static void check_meta(const lmq_file *f, const char *mix, uint64_t source_id)
{
    const lmq_meta *m = lmq_file_meta(f);
    uint64_t ft = 0, qv = 0, id = 0;
    const char *s = NULL;
    const lmq_mix_info *mi = NULL;
    lmq_mix_from_name(mix, &mi);
    T_CHECK(lmq_meta_get_u64(m, "general.file_type", &ft) == LMQ_OK && mi && ft == (uint64_t)mi->llama_ftype,
            "%s: general.file_type %llu", mix, (unsigned long long)ft);
    T_CHECK(lmq_meta_get_u64(m, "general.quantization_version", &qv) == LMQ_OK && qv == 2, "%s: quantization_version",
            mix);
    T_CHECK(lmq_meta_get_str(m, "lmq.quantize.mix", &s, NULL) == LMQ_OK && !strcmp(s, mix), "%s: lmq.quantize.mix",
            mix);
    T_CHECK(lmq_meta_get_str(m, "lmq.quantize.version", &s, NULL) == LMQ_OK && !strcmp(s, LMQ_QUANTIZE_VERSION),
            "%s: lmq.quantize.version", mix);
    T_CHECK(lmq_meta_get_u64(m, "lmq.quantize.source_id", &id) == LMQ_OK && id == source_id,
            "%s: source_id %llx vs %llx", mix, (unsigned long long)id, (unsigned long long)source_id);
    T_CHECK(lmq_meta_find(m, "tokenizer.ggml.tokens") != NULL, "%s: input metadata carried over", mix);
    size_t n_checked = 0;
    T_CHECK(lmq_file_verify(f, 2, NULL, &n_checked) == LMQ_OK && n_checked == lmq_file_n_tensors(f),
            "%s: checksums: %s", mix, lmq_last_error());
}

static void test_debtext(void)
{
    char f32[4096];
    snprintf(f32, sizeof f32, "%s", t_tmp("debtext-f32.lmq"));
    if (!convert_f32("models/llama-8m-debtext", f32)) return;
    lmq_file *src = NULL;
    if (lmq_file_open(f32, &src) != LMQ_OK) {
        T_CHECK(false, "open %s: %s", f32, lmq_last_error());
        return;
    }
    uint64_t source_id = lmq_file_id(src);
    lmq_file_close(src);

    size_t jlen;
    char *json = t_read_all(t_shared("reference/llamacpp-figures.json"), &jlen);
    cJSON *root = json ? cJSON_Parse(json) : NULL;
    const cJSON *bpw = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "llama-8m-debtext"), "bpw");
    T_CHECK(cJSON_IsObject(bpw) && cJSON_GetArraySize(bpw) >= 15, "figures: bpw table");
    static const char *const with_gguf[] = {"q2_k", "q3_k_m", "q4_k_m", "q6_k", "q8_0", "q4_0", "iq4_xs"};

    const cJSON *item;
    cJSON_ArrayForEach(item, bpw)
    {
        const char *mix = item->string;
        char out[64];
        snprintf(out, sizeof out, "debtext-%s.lmq", mix);
        lmq_quantize_opts o = qopts(mix, 2);
        lmq_quantize_stats st;
        lmq_status s = lmq_quantize_model(f32, t_tmp(out), &o, &st);
        T_CHECK(s == LMQ_OK, "quantize %s: %s", mix, lmq_last_error());
        if (s) continue;
        lmq_file *f = NULL;
        if (lmq_file_open(t_tmp(out), &f) != LMQ_OK) {
            T_CHECK(false, "open %s: %s", out, lmq_last_error());
            continue;
        }
        uint64_t n_el;
        uint64_t bytes = data_bytes(f, &n_el);
        double got = (double)bytes * 8.0 / (double)n_el, want = item->valuedouble;
        T_CHECK(fabs(got / want - 1.0) <= 0.01, "%s: %.4f bpw, llama.cpp %.3f", mix, got, want);
        printf("%-7s %.4f bpw (llama.cpp %.3f), %.2f s\n", mix, got, want, st.seconds);
        T_CHECK(st.bytes_out == bytes && fabs(st.bpw - got) < 1e-9, "%s: stats agree with the file", mix);
        check_meta(f, mix, source_id);
        for (size_t k = 0; k < sizeof with_gguf / sizeof with_gguf[0]; k++) {
            if (strcmp(with_gguf[k], mix) != 0) continue;
            char ref_name[96];
            snprintf(ref_name, sizeof ref_name, "reference/llama-8m-debtext-%s.gguf", mix);
            lmq_file *ref = NULL;
            if (lmq_file_open(t_shared(ref_name), &ref) != LMQ_OK) {
                T_CHECK(false, "open %s: %s", ref_name, lmq_last_error());
                continue;
            }
            if (compare_types(f, ref, mix) == 0)
                T_CHECK(data_bytes(ref, NULL) == bytes, "%s: tensor data %llu bytes, llama.cpp %llu", mix,
                        (unsigned long long)bytes, (unsigned long long)data_bytes(ref, NULL));
            lmq_file_close(ref);
        }
        lmq_file_close(f);
    }
    cJSON_Delete(root);
    free(json);

    /* thread count does not change a byte */
    lmq_quantize_opts o1 = qopts("q4_k_m", 1);
    lmq_status s = lmq_quantize_model(f32, t_tmp("debtext-q4km-t1.lmq"), &o1, NULL);
    T_CHECK(s == LMQ_OK, "q4_k_m 1 thread: %s", lmq_last_error());
    T_CHECK(t_files_equal(t_tmp("debtext-q4km-t1.lmq"), t_tmp("debtext-q4_k_m.lmq")), "1 vs 2 threads differ");
    o1 = qopts("iq4_xs", 1);
    s = lmq_quantize_model(f32, t_tmp("debtext-iq4xs-t1.lmq"), &o1, NULL);
    T_CHECK(s == LMQ_OK && t_files_equal(t_tmp("debtext-iq4xs-t1.lmq"), t_tmp("debtext-iq4_xs.lmq")),
            "iq4_xs 1 vs 2 threads differ");
}

static void test_stories(void)
{
    char f32[4096];
    snprintf(f32, sizeof f32, "%s", t_tmp("stories-f32.lmq"));
    if (!convert_f32("models/stories260K-hf", f32)) return;
    lmq_quantize_opts o = qopts("q4_k_m", 2);
    lmq_quantize_stats st;
    lmq_status s = lmq_quantize_model(f32, t_tmp("stories-q4_k_m.lmq"), &o, &st);
    T_CHECK(s == LMQ_OK, "stories q4_k_m: %s", lmq_last_error());
    if (s) return;
    lmq_file *f = NULL, *ref = NULL;
    if (lmq_file_open(t_tmp("stories-q4_k_m.lmq"), &f) == LMQ_OK &&
        lmq_file_open(t_shared("reference/stories260K-q4_k_m.gguf"), &ref) == LMQ_OK) {
        if (compare_types(f, ref, "stories260K q4_k_m") == 0)
            T_CHECK(data_bytes(f, NULL) == data_bytes(ref, NULL), "stories: data bytes %llu vs %llu",
                    (unsigned long long)data_bytes(f, NULL), (unsigned long long)data_bytes(ref, NULL));
        T_CHECK(st.n_fallback == 5 * 7, "stories: %llu fallbacks", (unsigned long long)st.n_fallback);
    } else {
        T_CHECK(false, "open stories outputs: %s", lmq_last_error());
    }
    lmq_file_close(f);
    lmq_file_close(ref);
}

/* llama.cpp's f32 GGUF in, q8_0/q4_0 out: same bytes as llama-quantize. */
static void test_gguf_bytes(void)
{
    static const char *const mixes[] = {"q8_0", "q4_0"};
    for (size_t k = 0; k < 2; k++) {
        char out[64], ref_name[96];
        snprintf(out, sizeof out, "gguf-%s.lmq", mixes[k]);
        snprintf(ref_name, sizeof ref_name, "reference/llama-8m-debtext-%s.gguf", mixes[k]);
        lmq_quantize_opts o = qopts(mixes[k], 2);
        lmq_status s = lmq_quantize_model(t_shared("reference/llama-8m-debtext-f32.gguf"), t_tmp(out), &o, NULL);
        T_CHECK(s == LMQ_OK, "gguf -> %s: %s", mixes[k], lmq_last_error());
        if (s) continue;
        lmq_file *f = NULL, *ref = NULL;
        if (lmq_file_open(t_tmp(out), &f) == LMQ_OK && lmq_file_open(t_shared(ref_name), &ref) == LMQ_OK) {
            int differ = 0, n_k = 0, k_same = 0;
            for (size_t i = 0; i < lmq_file_n_tensors(f); i++) {
                const lmq_tensor_info *g = lmq_file_tensor(f, i), *r = lmq_file_find_tensor(ref, g->name);
                bool same = r && r->type == g->type && r->nbytes == g->nbytes && !memcmp(r->data, g->data, g->nbytes);
                if (g->type == LMQ_TYPE_Q6_K) {
                    /* the K-quants search scales their own way: types must
                     * match, bytes need not (counted for information) */
                    n_k++;
                    k_same += same;
                    T_CHECK(r && r->type == g->type, "%s: %s type", mixes[k], g->name);
                    continue;
                }
                if (!same) {
                    if (differ++ < 3) T_CHECK(false, "%s: tensor %s differs from llama.cpp's", mixes[k], g->name);
                }
            }
            T_CHECK(differ == 0, "%s: %d tensors differ from llama-quantize's bytes", mixes[k], differ);
            if (n_k) printf("%s: %d of %d q6_K tensors byte-identical to llama.cpp's\n", mixes[k], k_same, n_k);
            const char *layout = NULL;
            T_CHECK(lmq_meta_get_str(lmq_file_meta(f), "lmq.rope.layout", &layout, NULL) == LMQ_OK &&
                        !strcmp(layout, "normal"),
                    "GGUF input records the normal RoPE layout");
        } else {
            T_CHECK(false, "open %s: %s", out, lmq_last_error());
        }
        lmq_file_close(f);
        lmq_file_close(ref);
    }
}

int main(void)
{
    t_require(t_shared("reference/llamacpp-figures.json"));
    test_debtext();
    test_stories();
    test_gguf_bytes();
    return t_finish();
}
