/* Small families of the Llama block from Hugging Face directories this
 * test writes (config.json, an f32 model.safetensors of random weights,
 * llama-8m's tokenizer.model). SmolLM3 (no RoPE on some layers):
 *   - config's no_rope_layers (1 = RoPE) becomes lmq.rope.nope_layers
 *     (true = none); without the list, no_rope_layer_interval (default 4)
 *     decides, as transformers' SmolLM3Config does;
 *   - the model loads and runs; `lmq export` writes llama.cpp's `smollm3`
 *     GGUF (q/k rows permuted as for Llama) with the same logits, and
 *     refuses a layer pattern llama.cpp cannot express (it hard-codes every
 *     4th layer);
 *   - a bad no_rope_layers is refused with one line naming it.
 * Ministral 3 (`mistral3`: YaRN with Hugging Face's attention factor and
 * Llama 4's query temperature), as Mistral3ForConditionalGeneration (text
 * config under text_config, tensors under model.language_model., a vision
 * tower to skip) and as Ministral3ForCausalLM:
 *   - rope_parameters become llama.cpp's keys (rope.scaling.*,
 *     attention.temperature_scale, yarn_log_multiplier) and the attention
 *     factor get_mscale(16, 1) / get_mscale(16, 1) = 1 as rope.scaling.attn_factor
 *     over ggml's own 1 + 0.1 ln 16;
 *   - both layouts give the same logits, and so does the exported GGUF.
 * The forward passes themselves (NoPE layers, YaRN, the temperature) are
 * checked against the double-precision reference in test_model_features.c.
 * Exit 77 (skipped) when ../shared's tokenizer is absent. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lmq_convert.h"
#include "lmq_format.h"
#include "lmq_runtime.h"
#include "testutil.h"

#define D 64
#define FF 96
#define HEADS 4
#define KV 2
#define HD 16
#define VOCAB 4096
#define LAYERS 4

static uint32_t g_rng = 2463534242u;
static float frand(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 17;
    g_rng ^= g_rng << 5;
    return (float)((g_rng & 0xffffff) / 16777216.0 - 0.5);
}

/* An f32 tensor [rows] (cols 0) or [rows, cols], named by fmt; no data yet. */
__attribute__((format(printf, 4, 5))) static void tensor(t_st_entry *e, int64_t rows, int64_t cols, const char *fmt,
                                                          ...)
{
    *e = (t_st_entry){.dtype = "F32", .n_dims = cols ? 2 : 1, .shape = {rows, cols}};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->name, sizeof e->name, fmt, ap);
    va_end(ap);
}

/* Writes e[0..n) as a safetensors file of random values (vectors, the
 * norms, near 1). */
static bool write_random_st(const char *path, t_st_entry *e, size_t n)
{
    float **v = calloc(n, sizeof *v);
    bool ok = v != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        const bool norm = e[i].n_dims == 1;
        const int64_t cols = norm ? 1 : e[i].shape[1], cnt = e[i].shape[0] * cols;
        const float scale = norm ? 0.2f : 1.0f / sqrtf((float)cols);
        ok = (v[i] = malloc((size_t)cnt * sizeof(float))) != NULL;
        for (int64_t j = 0; ok && j < cnt; j++) v[i][j] = (norm ? 1.0f : 0.0f) + 2 * scale * frand();
        e[i].data = v[i];
        e[i].nbytes = (uint64_t)cnt * sizeof(float);
    }
    if (ok) ok = t_write_st(path, e, n);
    for (size_t i = 0; v && i < n; i++) free(v[i]);
    free(v);
    return ok;
}

/* A checkpoint directory: `config` is the whole config.json; tensor names
 * get `prefix` ("model." or "model.language_model."); `extra` adds
 * untied lm_head and a vision tower tensor. */
static bool make_dir(const char *dir, const char *config, const char *prefix, bool extra)
{
    char path[1024];
    if (mkdir(dir, 0755) && errno != EEXIST) return false;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (t_write_all(path, config, strlen(config))) return false;
    static t_st_entry e[4 + 9 * LAYERS];
    size_t n = 0;
    tensor(&e[n++], VOCAB, D, "%sembed_tokens.weight", prefix);
    tensor(&e[n++], D, 0, "%snorm.weight", prefix);
    if (extra) {
        tensor(&e[n++], VOCAB, D, "lm_head.weight");
        tensor(&e[n++], 16, 12, "model.vision_tower.patch_conv.weight");
    }
    for (int l = 0; l < LAYERS; l++) {
        const struct {
            const char *s;
            int64_t r, c;
        } t[] = {{"input_layernorm.weight", D, 0},     {"post_attention_layernorm.weight", D, 0},
                 {"self_attn.q_proj.weight", HEADS * HD, D}, {"self_attn.k_proj.weight", KV * HD, D},
                 {"self_attn.v_proj.weight", KV * HD, D},    {"self_attn.o_proj.weight", D, HEADS * HD},
                 {"mlp.gate_proj.weight", FF, D},            {"mlp.up_proj.weight", FF, D},
                 {"mlp.down_proj.weight", D, FF}};
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
            tensor(&e[n++], t[i].r, t[i].c, "%slayers.%d.%s", prefix, l, t[i].s);
    }
    g_rng = 2463534242u; /* the same weights in every directory */
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (!write_random_st(path, e, n)) return false;
    snprintf(path, sizeof path, "%s/tokenizer.model", dir);
    return t_copy_file(t_shared("models/llama-8m-debtext/tokenizer.model"), path);
}

static bool make_smollm3(const char *dir, const char *rope_cfg)
{
    char cfg[2048];
    snprintf(cfg, sizeof cfg,
             "{\"architectures\":[\"SmolLM3ForCausalLM\"],\"model_type\":\"smollm3\",\"hidden_size\":%d,"
             "\"intermediate_size\":%d,\"num_hidden_layers\":%d,\"num_attention_heads\":%d,"
             "\"num_key_value_heads\":%d,\"vocab_size\":%d,\"max_position_embeddings\":512,"
             "\"rms_norm_eps\":1e-6,\"rope_theta\":2000000.0,\"hidden_act\":\"silu\",\"tie_word_embeddings\":true,"
             "\"attention_bias\":false,\"bos_token_id\":1,\"eos_token_id\":2%s}\n",
             D, FF, LAYERS, HEADS, KV, VOCAB, rope_cfg);
    return make_dir(dir, cfg, "model.", false);
}

/* Ministral 3's text config (rope_parameters as the released checkpoints have them). */
static void ministral3_text(char *out, size_t cap)
{
    snprintf(out, cap,
             "\"model_type\":\"ministral3\",\"hidden_size\":%d,\"intermediate_size\":%d,\"num_hidden_layers\":%d,"
             "\"num_attention_heads\":%d,\"num_key_value_heads\":%d,\"head_dim\":%d,\"vocab_size\":%d,"
             "\"max_position_embeddings\":512,\"rms_norm_eps\":1e-5,\"hidden_act\":\"silu\","
             "\"tie_word_embeddings\":false,\"sliding_window\":null,\"rope_parameters\":{\"rope_type\":\"yarn\","
             "\"rope_theta\":1000000.0,\"factor\":16.0,\"original_max_position_embeddings\":8,\"beta_fast\":32.0,"
             "\"beta_slow\":1.0,\"mscale\":1.0,\"mscale_all_dim\":1.0,\"llama_4_scaling_beta\":0.1}",
             D, FF, LAYERS, HEADS, KV, HD, VOCAB);
}

static void nope_of(const char *lmq_path, bool *nope, int *n)
{
    *n = -1;
    lmq_file *f = NULL;
    if (lmq_file_open(lmq_path, &f)) return;
    lmq_vtype et;
    uint64_t cnt;
    const void *data;
    if (!lmq_meta_get_arr(lmq_file_meta(f), "lmq.rope.nope_layers", &et, &cnt, &data) && et == LMQ_V_BOOL &&
        cnt <= LAYERS) {
        *n = (int)cnt;
        for (uint64_t i = 0; i < cnt; i++) nope[i] = ((const uint8_t *)data)[i] != 0;
    }
    lmq_file_close(f);
}

/* Logits of the last token of a fixed prompt. */
static bool logits_of(const char *path, float *out)
{
    lmq_model *m = NULL;
    lmq_context *c = NULL;
    bool ok = lmq_model_load(path, &m) == LMQ_OK;
    lmq_context_params p = lmq_context_default_params();
    p.n_ctx = 64;
    p.n_threads = 1;
    if (ok) ok = lmq_context_new(m, &p, &c) == LMQ_OK;
    int32_t toks[9] = {1, 450, 3402, 310, 278, 2472, 2989, 338, 263};
    if (ok) ok = lmq_eval(c, toks, 9, 1) == LMQ_OK;
    if (ok) memcpy(out, lmq_logits(c, 0), VOCAB * sizeof(float));
    if (!ok) T_CHECK(0, "%s: run: %s", path, lmq_last_error());
    lmq_context_free(c);
    lmq_model_free(m);
    return ok;
}

static double meta_f(const char *path, const char *key)
{
    lmq_file *f = NULL;
    double v = NAN;
    if (lmq_file_open(path, &f) == LMQ_OK && lmq_meta_get_f64(lmq_file_meta(f), key, &v)) v = NAN;
    lmq_error_clear();
    lmq_file_close(f);
    return v;
}

static void check_mistral3(void)
{
    char text[2048], cfg[4096], d1[1024], d2[1024], m1[1024], m2[1024], g1[1024];
    ministral3_text(text, sizeof text);
    snprintf(d1, sizeof d1, "%s", t_tmp("mistral3-vlm"));
    snprintf(d2, sizeof d2, "%s", t_tmp("ministral3-text"));
    snprintf(cfg, sizeof cfg, "{\"architectures\":[\"Mistral3ForConditionalGeneration\"],\"model_type\":\"mistral3\","
             "\"bos_token_id\":1,\"eos_token_id\":2,\"text_config\":{%s},\"vision_config\":{\"model_type\":\"pixtral\"}}\n",
             text);
    T_CHECK(make_dir(d1, cfg, "model.language_model.", true), "write %s", d1);
    snprintf(cfg, sizeof cfg, "{\"architectures\":[\"Ministral3ForCausalLM\"],\"bos_token_id\":1,\"eos_token_id\":2,%s}\n",
             text);
    T_CHECK(make_dir(d2, cfg, "model.", true), "write %s", d2);
    snprintf(m1, sizeof m1, "%s/m.lmq", d1);
    snprintf(m2, sizeof m2, "%s/m.lmq", d2);
    snprintf(g1, sizeof g1, "%s/m.gguf", d1);
    lmq_convert_opts co = {.out_type = LMQ_TYPE_F32, .codec = LMQ_CODEC_NONE};
    lmq_status s = lmq_convert_hf(d1, m1, &co, NULL);
    T_CHECK(s == LMQ_OK, "convert %s: %s", d1, lmq_last_error());
    lmq_status s2 = lmq_convert_hf(d2, m2, &co, NULL);
    T_CHECK(s2 == LMQ_OK, "convert %s: %s", d2, lmq_last_error());
    if (s || s2) return;
    const double af = meta_f(m1, "mistral3.rope.scaling.attn_factor");
    T_CHECK(fabs(af - 1.0 / (1.0 + 0.1 * log(16.0))) < 1e-6, "attention factor 1 written as %.6f over ggml's own", af);
    T_CHECK(fabs(meta_f(m1, "mistral3.attention.temperature_scale") - 0.1) < 1e-7, "attention.temperature_scale 0.1");
    T_CHECK(meta_f(m1, "mistral3.rope.scaling.yarn_log_multiplier") == 1.0, "yarn_log_multiplier 1");
    T_CHECK(meta_f(m1, "mistral3.rope.scaling.factor") == 16.0 &&
                meta_f(m1, "mistral3.rope.freq_base") == 1e6, "rope factor and base");
    lmq_export_opts eo = {0};
    s = lmq_export_gguf(m1, g1, &eo, NULL);
    T_CHECK(s == LMQ_OK, "export mistral3: %s", lmq_last_error());
    float *a = malloc(VOCAB * sizeof(float)), *b = malloc(VOCAB * sizeof(float)), *c = malloc(VOCAB * sizeof(float));
    if (logits_of(m1, a) && logits_of(m2, b) && (s || logits_of(g1, c))) {
        double dab = 0, dac = 0;
        for (int i = 0; i < VOCAB; i++) {
            dab = fmax(dab, fabs((double)a[i] - b[i]));
            if (!s) dac = fmax(dac, fabs((double)a[i] - c[i]));
        }
        T_CHECK(dab == 0, "Mistral3ForConditionalGeneration and Ministral3ForCausalLM give the same logits (%g)", dab);
        /* measured 1.1e-6 on AVX-512, 2.2e-5 on AVX2: the permuted q/k rows reorder the sums */
        T_CHECK(!s && dac < 1e-4, "the exported GGUF gives the container's logits (max diff %g)", dac);
        printf("mistral3: text-only vs multimodal layout %.3g, container vs exported GGUF %.3g\n", dab, dac);
    }
    free(a);
    free(b);
    free(c);
}

int main(void)
{
    t_require(t_shared("models/llama-8m-debtext/tokenizer.model"));
    char dir[3][1024], out[1024], gguf[1024];
    snprintf(dir[0], sizeof dir[0], "%s", t_tmp("smol-default"));
    snprintf(dir[1], sizeof dir[1], "%s", t_tmp("smol-list"));
    snprintf(dir[2], sizeof dir[2], "%s", t_tmp("smol-bad"));
    T_CHECK(make_smollm3(dir[0], ""), "write %s", dir[0]);
    T_CHECK(make_smollm3(dir[1], ",\"no_rope_layers\":[0,1,0,1]"), "write %s", dir[1]);
    T_CHECK(make_smollm3(dir[2], ",\"no_rope_layers\":[1,1,2,1]"), "write %s", dir[2]);
    lmq_convert_opts co = {.out_type = LMQ_TYPE_F32, .codec = LMQ_CODEC_NONE};
    bool want[2][LAYERS] = {{false, false, false, true}, {true, false, true, false}};
    for (int k = 0; k < 2; k++) {
        snprintf(out, sizeof out, "%s/m.lmq", dir[k]);
        lmq_status s = lmq_convert_hf(dir[k], out, &co, NULL);
        T_CHECK(s == LMQ_OK, "convert %s: %s", dir[k], lmq_last_error());
        if (s) continue;
        bool nope[LAYERS];
        int n;
        nope_of(out, nope, &n);
        T_CHECK(n == LAYERS && !memcmp(nope, want[k], sizeof nope), "%s: lmq.rope.nope_layers as the config says",
                dir[k]);
        snprintf(gguf, sizeof gguf, "%s/m.gguf", dir[k]);
        lmq_export_opts eo = {0};
        s = lmq_export_gguf(out, gguf, &eo, NULL);
        if (k == 0) {
            T_CHECK(s == LMQ_OK, "export of the every-4th-layer model: %s", lmq_last_error());
            float *a = malloc(VOCAB * sizeof(float)), *b = malloc(VOCAB * sizeof(float));
            if (!s && logits_of(out, a) && logits_of(gguf, b)) {
                double diff = 0;
                for (int i = 0; i < VOCAB; i++) diff = fmax(diff, fabs((double)a[i] - b[i]));
                /* the permuted q/k rows only reorder the float sums of q.k: measured 5.1e-7
                 * on AVX-512, 2.6e-5 on AVX2 (8-lane partial sums); a wrong permutation
                 * moves logits by whole units */
                T_CHECK(diff < 1e-4, "the exported GGUF's logits equal the container's (max diff %g)", diff);
                printf("smollm3: container vs exported GGUF: max logit difference %.3g\n", diff);
            }
            free(a);
            free(b);
            lmq_file *f = NULL;
            const char *arch = NULL;
            if (!s && lmq_file_open(gguf, &f) == LMQ_OK) lmq_meta_get_str(lmq_file_meta(f), "general.architecture", &arch, NULL);
            T_CHECK(arch && !strcmp(arch, "smollm3"), "exported architecture smollm3");
            lmq_file_close(f);
        } else {
            T_CHECK(s != LMQ_OK && strstr(lmq_last_error(), "RoPE"), "export refuses NoPE layers 0 and 2: %s",
                    lmq_last_error());
        }
    }
    snprintf(out, sizeof out, "%s/m.lmq", dir[2]);
    lmq_status s = lmq_convert_hf(dir[2], out, &co, NULL);
    T_CHECK(s != LMQ_OK && strstr(lmq_last_error(), "no_rope_layers[2]"), "a bad no_rope_layers is refused: %s",
            lmq_last_error());
    check_mistral3();
    return t_finish();
}
