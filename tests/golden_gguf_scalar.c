/* 0-dimension GGUF tensors on a real-weight Gemma 4 (issue 43).
 *
 * ik_llama.cpp's converter squeezes each Gemma 4 layer's one-element
 * layer_scalar into a tensor of n_dims = 0, which ggml reads as one element.
 * The zoo has no Gemma 4 checkpoint, so this test derives one from the zoo's
 * Gemma 3 (weights distilled from the trained llama-8m): the same block with
 * Gemma 4's conventions (norm weights w -> 1 + w, Gemma 3's 1/sqrt(32) score
 * scale folded into q_norm, Gemma 4's config keys) plus a layer_scalar per
 * layer (0.6 .. 1.5). Then:
 *   - lmq converts the checkpoint and exports the .lmq to GGUF; the test
 *     rewrites the export's layer_output_scale tensor infos to n_dims = 0
 *     (ne dropped, the data section unchanged), checks the rewritten file
 *     holds six 0-d infos, and that lmq reads each as 1-D [1] with the
 *     export's bytes;
 *   - perplexity on wiki.test.raw straight from that GGUF equals lmq's own
 *     conversion of the checkpoint to 0.01%; the same file with the scalars
 *     set to 1 is off by far more (the scalars are read, and matter);
 *   - lmq convert of the 0-d GGUF gives 1-D [1] tensors and the very logits
 *     of the conversion; lmq quantize (q8_0) of the 0-d GGUF writes the same
 *     tensors as quantize of the unmodified export;
 *   - `lmq info` on it exits 0 and lists the six tensors with shape [1].
 * Skips (exit 77) when ../shared's zoo or wikitext-2 is absent. */
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

#define N_LAYER 6
#define HEAD_DIM 32
#define PPL_CTX 256
#define PPL_CHUNKS 16
#define TEXT_BYTES 200000 /* enough text for PPL_CHUNKS chunks */
#define MAX_OWNED 64      /* norm tensors rewritten (gemma3 zoo: 37) */

static const float k_scalars[N_LAYER] = {0.6f, 1.4f, 0.7f, 1.5f, 0.65f, 1.3f};

/* ---------------------------------------------------------------- the checkpoint */

static void to_gemma4(cJSON *c)
{
    static const char *const drop[] = {"architectures", "model_type", "query_pre_attn_scalar", "rope_local_base_freq",
                                       "rope_theta", "rope_scaling", "sliding_window_pattern", "cache_implementation",
                                       "attn_logit_softcapping", "final_logit_softcapping"};
    for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++) cJSON_DeleteItemFromObjectCaseSensitive(c, drop[i]);
    cJSON *arch = cJSON_AddArrayToObject(c, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString("Gemma4ForCausalLM"));
    cJSON_AddStringToObject(c, "model_type", "gemma4_text");
    cJSON_AddNumberToObject(c, "global_head_dim", HEAD_DIM);
    cJSON_AddNumberToObject(c, "num_global_key_value_heads", 1);
    cJSON_AddNumberToObject(c, "hidden_size_per_layer_input", 0);
    cJSON_AddNumberToObject(c, "num_kv_shared_layers", 0);
    cJSON_AddBoolToObject(c, "attention_k_eq_v", false);
    cJSON_AddBoolToObject(c, "use_double_wide_mlp", false);
    cJSON_AddBoolToObject(c, "enable_moe_block", false);
    cJSON *rp = cJSON_AddObjectToObject(c, "rope_parameters");
    cJSON *sl = cJSON_AddObjectToObject(rp, "sliding_attention"), *fu = cJSON_AddObjectToObject(rp, "full_attention");
    cJSON_AddStringToObject(sl, "rope_type", "default");
    cJSON_AddNumberToObject(sl, "rope_theta", 10000.0);
    cJSON_AddStringToObject(fu, "rope_type", "proportional");
    cJSON_AddNumberToObject(fu, "partial_rotary_factor", 1.0);
    cJSON_AddNumberToObject(fu, "rope_theta", 1000000.0);
}

static bool ends_with(const char *s, const char *suffix)
{
    const size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* The Gemma 4 directory derived from zoo/gemma3 (src); NULL on failure.
 * The rewritten norms go to owned[MAX_OWNED] (the caller frees them). */
static const char *make_checkpoint(const char *src, float **owned, size_t *n_owned)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", src);
    lmq_safetensors *st = NULL;
    if (lmq_safetensors_open(path, &st) != LMQ_OK) {
        T_CHECK(0, "open %s: %s", path, lmq_last_error());
        return NULL;
    }
    size_t n = 0;
    t_st_entry *e = t_entries_of(st, N_LAYER, &n);
    *n_owned = 0;
    for (size_t i = 0; e && i < n; i++) {
        if (!ends_with(e[i].name, "norm.weight")) continue;
        if (*n_owned == MAX_OWNED) {
            T_CHECK(0, "more than %d norm tensors", MAX_OWNED);
            break;
        }
        /* Gemma 3 scales by (1 + w), Gemma 4 by w; Gemma 3's scores are scaled by
         * query_pre_attn_scalar^-1/2 = 32^-1/2, Gemma 4's by 1: folded into q */
        T_CHECK(!strcmp(e[i].dtype, "BF16") && e[i].n_dims == 1, "%s: %s", e[i].name, e[i].dtype);
        const int64_t k = e[i].shape[0];
        const float mul = ends_with(e[i].name, "q_norm.weight") ? 1.0f / sqrtf((float)HEAD_DIM) : 1.0f;
        float *v = malloc((size_t)k * sizeof *v);
        const uint16_t *b = e[i].data;
        for (int64_t j = 0; j < k; j++) v[j] = (1.0f + lmq_bf16_to_fp32(b[j])) * mul;
        owned[(*n_owned)++] = v;
        e[i].dtype = "F32";
        e[i].data = v;
        e[i].nbytes = (uint64_t)k * sizeof *v;
    }
    for (int l = 0; e && l < N_LAYER; l++) {
        t_st_entry *x = &e[n++];
        *x = (t_st_entry){.dtype = "F32", .n_dims = 1, .shape = {1}, .data = &k_scalars[l], .nbytes = 4};
        snprintf(x->name, sizeof x->name, "model.layers.%d.layer_scalar", l);
    }
    char *cfg = t_config_with(src, to_gemma4);
    const char *dir = e && cfg ? t_crafted(src, "gemma4", cfg, e, n) : NULL;
    free(cfg);
    free(e);
    lmq_safetensors_close(st);
    return dir;
}

/* ---------------------------------------------------------------- rewriting a GGUF's tensor infos */

typedef struct rd {
    const uint8_t *p;
    size_t len, pos;
    bool bad;
} rd;

static uint64_t rd_n(rd *r, size_t n)
{
    uint64_t v = 0;
    if (r->bad || n > r->len - r->pos) {
        r->bad = true;
        return 0;
    }
    for (size_t i = 0; i < n; i++) v |= (uint64_t)r->p[r->pos + i] << (8 * i);
    r->pos += n;
    return v;
}

static void rd_skip(rd *r, uint64_t n)
{
    if (r->bad || n > r->len - r->pos) r->bad = true;
    else r->pos += (size_t)n;
}

/* Skips one metadata value of GGUF type t. */
static void skip_value(rd *r, uint32_t t, int depth)
{
    static const uint8_t size[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (t == 8) {
        rd_skip(r, rd_n(r, 8));
    } else if (t == 9 && depth < 4) {
        const uint32_t et = (uint32_t)rd_n(r, 4);
        const uint64_t n = rd_n(r, 8);
        for (uint64_t i = 0; i < n && !r->bad; i++) skip_value(r, et, depth + 1);
    } else if (t < 13 && size[t]) {
        rd_skip(r, size[t]);
    } else {
        r->bad = true;
    }
}

typedef struct tinfo {
    size_t at, end;    /* bytes of the info in the file */
    size_t name_at, name_len;
    uint32_t n_dims;
} tinfo;

/* The tensor infos of a GGUF (at most cap); returns their count, 0 on a parse failure. */
static size_t tensor_infos(const uint8_t *p, size_t len, tinfo *ti, size_t cap, size_t *infos_end)
{
    rd r = {p, len, 8, false};
    const uint64_t n_t = rd_n(&r, 8), n_kv = rd_n(&r, 8);
    for (uint64_t i = 0; i < n_kv && !r.bad; i++) {
        rd_skip(&r, rd_n(&r, 8));
        skip_value(&r, (uint32_t)rd_n(&r, 4), 0);
    }
    if (r.bad || n_t > cap) return 0;
    for (size_t i = 0; i < n_t && !r.bad; i++) {
        ti[i].at = r.pos;
        ti[i].name_len = (size_t)rd_n(&r, 8);
        ti[i].name_at = r.pos;
        rd_skip(&r, ti[i].name_len);
        ti[i].n_dims = (uint32_t)rd_n(&r, 4);
        rd_skip(&r, 8ull * ti[i].n_dims + 4 + 8);
        ti[i].end = r.pos;
    }
    *infos_end = r.pos;
    return r.bad ? 0 : (size_t)n_t;
}

static bool is_scale(const uint8_t *p, const tinfo *t)
{
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)t->name_len, (const char *)p + t->name_at);
    int l, k = 0;
    return sscanf(name, "blk.%d.layer_output_scale.weight%n", &l, &k) == 1 && k == (int)strlen(name);
}

/* `in` with every blk.N.layer_output_scale.weight info rewritten to n_dims 0
 * (its ne dropped); the data section is copied as it is (offsets are
 * relative to it) after the padding to `alignment`. Returns the tensors
 * rewritten. With `ones`, their data is set to 1.0f as well. */
static int rewrite_0d(const char *in, const char *out, uint32_t alignment, bool ones)
{
    size_t len = 0, infos_end = 0;
    uint8_t *p = (uint8_t *)t_read_all(in, &len);
    static tinfo ti[4096];
    const size_t n = p ? tensor_infos(p, len, ti, 4096, &infos_end) : 0;
    const size_t data_start = (infos_end + alignment - 1) / alignment * alignment;
    if (!n || data_start > len) {
        free(p);
        return -1;
    }
    uint8_t *q = calloc(len + alignment, 1);
    size_t w = ti[0].at;
    memcpy(q, p, w); /* header and metadata */
    int rewritten = 0;
    uint64_t scale_offs[64];
    for (size_t i = 0; i < n; i++) {
        const tinfo *t = &ti[i];
        if (!is_scale(p, t) || t->n_dims != 1 || rewritten == 64) {
            memcpy(q + w, p + t->at, t->end - t->at);
            w += t->end - t->at;
            continue;
        }
        const size_t dims_at = t->name_at + t->name_len; /* u32 n_dims, u64 ne[0], u32 type, u64 offset */
        memcpy(q + w, p + t->at, dims_at - t->at);
        w += dims_at - t->at;
        memset(q + w, 0, 4);
        w += 4;
        memcpy(q + w, p + dims_at + 12, 12);
        rd r = {p, len, dims_at + 16, false};
        scale_offs[rewritten++] = rd_n(&r, 8);
        w += 12;
    }
    while (w % alignment) q[w++] = 0;
    memcpy(q + w, p + data_start, len - data_start);
    if (ones)
        for (int i = 0; i < rewritten; i++) {
            const float one = 1.0f;
            memcpy(q + w + scale_offs[i], &one, 4);
        }
    w += len - data_start;
    T_CHECK(t_write_all(out, q, w) == 0, "write %s", out);
    free(q);
    free(p);
    return rewritten;
}

/* ---------------------------------------------------------------- running it */

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
            printf("%s -c %d --chunks %d: PPL %.6f +/- %.5f\n", path, PPL_CTX, PPL_CHUNKS, r.ppl, r.ppl_err);
        }
    }
    free(toks);
    lmq_model_free(m);
    return ppl;
}

#define VOCAB 4096
static bool last_logits(const char *path, float *out)
{
    lmq_model *m = NULL;
    lmq_context *c = NULL;
    bool ok = false;
    if (lmq_model_load(path, &m) == LMQ_OK) {
        lmq_context_params cp = lmq_context_default_params();
        cp.n_ctx = 64;
        cp.n_batch = 8;
        cp.n_threads = 2;
        int32_t t[8] = {1, 450, 3402, 310, 278, 2472, 2989, 338};
        ok = lmq_context_new(m, &cp, &c) == LMQ_OK && lmq_eval(c, t, 8, 1) == LMQ_OK;
        if (ok) memcpy(out, lmq_logits(c, 0), VOCAB * sizeof(float));
    }
    T_CHECK(ok, "%s: eval: %s", path, lmq_last_error());
    lmq_context_free(c);
    lmq_model_free(m);
    return ok;
}

/* Each layer's scale in `path` is 1-D [1] f32 holding k_scalars[l] (or 1 with ones). */
static void check_scales(const char *what, const char *path, bool ones)
{
    lmq_file *f = NULL;
    if (lmq_file_open(path, &f) != LMQ_OK) {
        T_CHECK(0, "%s: open %s: %s", what, path, lmq_last_error());
        return;
    }
    int good = 0;
    for (int l = 0; l < N_LAYER; l++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.layer_output_scale.weight", l);
        const lmq_tensor_info *t = lmq_file_find_tensor(f, name);
        float v = 0;
        if (t && t->nbytes == 4) memcpy(&v, t->data, 4);
        good += t && t->type == LMQ_TYPE_F32 && t->n_dims == 1 && t->ne[0] == 1 && t->ne[1] == 1 &&
                v == (ones ? 1.0f : k_scalars[l]);
    }
    T_CHECK(good == N_LAYER, "%s: %d of %d layer scales are 1-D [1] f32 with their value", what, good, N_LAYER);
    lmq_file_close(f);
}

/* `lmq info --tensors` exits 0 and lists each scale tensor as f32 of shape 1, 4 bytes. */
static void check_cli_info(const char *path)
{
    char cmd[8192], out[4096];
    snprintf(out, sizeof out, "%s.info.txt", path);
    snprintf(cmd, sizeof cmd, "'%s' info --tensors '%s' > '%s' 2>&1", LMQ_BIN, path, out);
    const int rc = system(cmd);
    char *text = t_read_all(out, NULL);
    int lines = 0;
    for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        char name[128], type[16], shape[32];
        long long bytes = 0;
        if (sscanf(line, "%*d %127s %15s %31s %lld", name, type, shape, &bytes) == 4 &&
            strstr(name, "layer_output_scale.weight"))
            lines += !strcmp(type, "f32") && !strcmp(shape, "1") && bytes == 4;
    }
    T_CHECK(rc == 0 && lines == N_LAYER,
            "lmq info --tensors %s: exit %d, %d of %d scale tensors listed as f32, 1, 4 bytes", path, rc, lines, N_LAYER);
    free(text);
}

int main(void)
{
    const char *src = t_shared("models/zoo/gemma3");
    char gemma3[4096], wiki[4096];
    snprintf(gemma3, sizeof gemma3, "%s", src);
    t_require(gemma3);
    if (lmq_wikitext2_find(t_shared("data"), NULL, wiki, sizeof wiki) != LMQ_OK)
        t_skip("wikitext-2 not found under %s: %s", t_shared("data"), lmq_last_error());
    T_CHECK(lmq_text_load(wiki, 0, &g_text, &g_text_len) == LMQ_OK, "load %s: %s", wiki, lmq_last_error());
    if (g_text_len > TEXT_BYTES) g_text_len = TEXT_BYTES;

    float *owned[MAX_OWNED];
    size_t n_owned = 0;
    const char *d = make_checkpoint(gemma3, owned, &n_owned);
    char dir[4096], lmq[4200], gguf[4200], g0[4200], g1[4200], back[4200], qa[4200], qb[4200];
    snprintf(dir, sizeof dir, "%s", d ? d : "");
    snprintf(lmq, sizeof lmq, "%s.lmq", dir);
    snprintf(gguf, sizeof gguf, "%s.gguf", dir);
    snprintf(g0, sizeof g0, "%s-0d.gguf", dir);
    snprintf(g1, sizeof g1, "%s-0d-ones.gguf", dir);
    snprintf(back, sizeof back, "%s-0d-back.lmq", dir);
    snprintf(qa, sizeof qa, "%s-q8_0-from-0d.lmq", dir);
    snprintf(qb, sizeof qb, "%s-q8_0-from-export.lmq", dir);
    lmq_convert_opts co = {.out_type = LMQ_CONVERT_TYPE_AUTO, .codec = LMQ_CODEC_NONE, .n_threads = 2};
    lmq_status s = d ? lmq_convert_hf(dir, lmq, &co, NULL) : LMQ_ERR_IO;
    T_CHECK(s == LMQ_OK, "convert the Gemma 4 checkpoint: %s", lmq_last_error());
    if (!s) s = lmq_export_gguf(lmq, gguf, NULL, NULL);
    T_CHECK(s == LMQ_OK, "export: %s", lmq_last_error());
    for (size_t i = 0; i < n_owned; i++) free(owned[i]);
    if (s) {
        free(g_text);
        return t_finish();
    }
    check_scales("the conversion", lmq, false);
    check_scales("the export", gguf, false);

    /* the export's scale infos rewritten to 0 dimensions (GGUF's default alignment: export writes 32) */
    T_CHECK(rewrite_0d(gguf, g0, 32, false) == N_LAYER, "rewrote %d layer scales", N_LAYER);
    T_CHECK(rewrite_0d(gguf, g1, 32, true) == N_LAYER, "rewrote %d layer scales (set to 1)", N_LAYER);
    {
        size_t len = 0, end = 0, n0 = 0;
        uint8_t *p = (uint8_t *)t_read_all(g0, &len);
        static tinfo ti[4096];
        const size_t n = p ? tensor_infos(p, len, ti, 4096, &end) : 0;
        for (size_t i = 0; i < n; i++) n0 += ti[i].n_dims == 0;
        T_CHECK(n > 0 && n0 == N_LAYER, "the rewritten file holds %zu 0-d tensor infos of %zu", n0, n);
        free(p);
    }
    check_scales("the 0-d GGUF", g0, false);
    check_scales("the 0-d GGUF with ones", g1, true);
    check_cli_info(g0);

    /* perplexity straight from the 0-d GGUF = lmq's conversion of the checkpoint */
    const double p_lmq = ppl_of(lmq), p_0d = ppl_of(g0), p_ones = ppl_of(g1);
    const double rel = fabs(p_0d - p_lmq) / p_lmq, rel_ones = fabs(p_ones - p_lmq) / p_lmq;
    T_CHECK(isfinite(p_lmq) && p_lmq > 1 && p_lmq < 1000, "PPL of the conversion %.4f: finite, far below the vocabulary's 4096", p_lmq);
    T_CHECK(rel <= 1e-4, "PPL from the 0-d GGUF %.6f vs the conversion %.6f: %.3g relative (tol 1e-4)", p_0d, p_lmq,
            rel);
    T_CHECK(rel_ones > 1e-2, "with the scalars at 1 the PPL %.4f is only %.3g off", p_ones, rel_ones);
    printf("gemma4 (zoo gemma3 weights): PPL conversion %.6f, 0-d GGUF %.6f (%.2g relative), scalars at 1 %.4f "
           "(%.2g)\n", p_lmq, p_0d, rel, p_ones, rel_ones);

    /* convert from the 0-d GGUF: 1-D [1] in the container, the conversion's logits */
    s = lmq_convert_gguf(g0, back, NULL, NULL);
    T_CHECK(s == LMQ_OK, "convert the 0-d GGUF: %s", lmq_last_error());
    check_scales("the 0-d GGUF converted", back, false);
    static float a[VOCAB], b[VOCAB], c[VOCAB];
    if (last_logits(lmq, a) && last_logits(g0, b) && last_logits(back, c))
        T_CHECK(!memcmp(a, b, sizeof a) && !memcmp(a, c, sizeof a),
                "the 0-d GGUF and its conversion give the conversion's logits");

    /* quantize with a 0-d GGUF as input: the same tensors as from the unmodified export */
    lmq_quantize_opts q = {.mix = "q8_0", .output_type = LMQ_TYPE_COUNT, .token_embd_type = LMQ_TYPE_COUNT,
                           .n_threads = 2};
    s = lmq_quantize_model(g0, qa, &q, NULL);
    T_CHECK(s == LMQ_OK, "quantize the 0-d GGUF: %s", lmq_last_error());
    T_CHECK(lmq_quantize_model(gguf, qb, &q, NULL) == LMQ_OK, "quantize the export: %s", lmq_last_error());
    lmq_file *fa = NULL, *fb = NULL;
    if (lmq_file_open(qa, &fa) == LMQ_OK && lmq_file_open(qb, &fb) == LMQ_OK) {
        t_check_names("q8_0 of the 0-d GGUF against q8_0 of the export", fa, fb, T_NAMES_BYTES);
        const lmq_tensor_info *wq = lmq_file_find_tensor(fa, "blk.0.attn_q.weight");
        T_CHECK(wq && wq->type == LMQ_TYPE_Q8_0, "the q8_0 mix quantized attn_q (%s)",
                wq ? lmq_type_name(wq->type) : "-");
    } else {
        T_CHECK(0, "open the quantized files: %s", lmq_last_error());
    }
    lmq_file_close(fa);
    lmq_file_close(fb);
    check_scales("q8_0 of the 0-d GGUF", qa, false);
    free(g_text);
    return t_finish();
}
