/* Golden test of lmq_convert_hf on the real models in ../shared/models:
 * every model directory with a config.json (f32 and bf16 sources) is
 * converted to f32, f16, bf16 and "auto" containers, and every tensor is
 * checked against the safetensors source with an independent reference
 * (bit copies, exact widening, round-to-nearest-even narrowing computed in
 * double precision here); metadata against config.json (parsed here with
 * cJSON); tied embeddings; zstd containers against the plain ones;
 * checksum verification against a flipped byte in every tensor; sharded
 * input; and the converter's refusals on crafted directories. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lmq_convert.h"
#include "lmq_format.h"
#include "testutil.h"

/* ================================================================ references */

static double f16_value(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -v : v;
}

static double bf16_value(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static double f32_value(const uint8_t *p)
{
    float f;
    memcpy(&f, p, 4);
    return f;
}

/* x rounded to `mant` stored mantissa bits, minimum normal exponent emin,
 * ties to even; beyond maxv: infinity. */
static double round_ref(double x, int mant, int emin, double maxv)
{
    if (x == 0 || isnan(x) || isinf(x)) return x;
    double a = fabs(x);
    int e;
    frexp(a, &e);
    e -= 1;
    if (e < emin) e = emin;
    double ulp = ldexp(1.0, e - mant);
    double q = a / ulp, fl = floor(q), r = q - fl;
    if (r > 0.5 || (r == 0.5 && fmod(fl, 2.0) == 1.0)) fl += 1;
    double y = fl * ulp;
    if (y > maxv) y = INFINITY;
    return x < 0 ? -y : y;
}

static double src_value(lmq_type t, const uint8_t *p, int64_t i)
{
    uint16_t h;
    switch (t) {
    case LMQ_TYPE_F32: return f32_value(p + 4 * i);
    case LMQ_TYPE_F16: memcpy(&h, p + 2 * i, 2); return f16_value(h);
    default: memcpy(&h, p + 2 * i, 2); return bf16_value(h);
    }
}

/* What an exact converter must produce for value x in type t. */
static double expect_in(lmq_type t, double x)
{
    if (t == LMQ_TYPE_F16) return round_ref(x, 10, -14, 65504.0);
    if (t == LMQ_TYPE_BF16) return round_ref(x, 7, -126, 3.3895313892515355e38);
    return x; /* every f16/bf16/f32 value is an f32 */
}

static bool same_value(double a, double b)
{
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return a == b && signbit(a) == signbit(b);
}

/* Checks one container tensor against its source; returns mismatches. */
static int64_t compare_tensor(const lmq_st_tensor *s, const lmq_tensor_info *t)
{
    int64_t n = (int64_t)(s->nbytes / (s->type == LMQ_TYPE_F32 ? 4 : 2));
    if (s->type == t->type) return memcmp(s->data, t->data, (size_t)s->nbytes) ? n : 0;
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = src_value(s->type, s->data, i);
        double got = src_value(t->type, t->data, i);
        if (!same_value(got, expect_in(t->type, x))) bad++;
    }
    return bad;
}

/* ================================================================ names (independent table) */

static bool gguf_name(const char *hf, char *out, size_t cap)
{
    static const char *const top[][2] = {{"model.embed_tokens.weight", "token_embd.weight"},
                                         {"model.norm.weight", "output_norm.weight"},
                                         {"lm_head.weight", "output.weight"}};
    static const char *const layer[][2] = {
        {"input_layernorm", "attn_norm"},  {"self_attn.q_proj", "attn_q"},          {"self_attn.k_proj", "attn_k"},
        {"self_attn.v_proj", "attn_v"},    {"self_attn.o_proj", "attn_output"},     {"post_attention_layernorm", "ffn_norm"},
        {"mlp.gate_proj", "ffn_gate"},     {"mlp.up_proj", "ffn_up"},               {"mlp.down_proj", "ffn_down"}};
    for (int i = 0; i < 3; i++)
        if (!strcmp(hf, top[i][0])) return snprintf(out, cap, "%s", top[i][1]) > 0;
    int l, used = 0;
    if (sscanf(hf, "model.layers.%d.%n", &l, &used) != 1 || !used) return false;
    for (int i = 0; i < 9; i++) {
        char want[128];
        snprintf(want, sizeof want, "%s.weight", layer[i][0]);
        if (!strcmp(hf + used, want)) return snprintf(out, cap, "blk.%d.%s.weight", l, layer[i][1]) > 0;
    }
    return false;
}

/* ================================================================ config.json */

static double cfg_num(const cJSON *c, const char *key, double dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, key);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

static void check_meta(const lmq_meta *m, const cJSON *c, const char *name, const char *what)
{
    static const struct {
        const char *key, *cfg;
    } ints[] = {
        {"llama.block_count", "num_hidden_layers"},         {"llama.context_length", "max_position_embeddings"},
        {"llama.embedding_length", "hidden_size"},          {"llama.feed_forward_length", "intermediate_size"},
        {"llama.attention.head_count", "num_attention_heads"}, {"llama.attention.head_count_kv", "num_key_value_heads"},
        {"llama.vocab_size", "vocab_size"},                 {"tokenizer.ggml.bos_token_id", "bos_token_id"},
        {"tokenizer.ggml.eos_token_id", "eos_token_id"},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        uint64_t v = 0;
        T_CHECK(lmq_meta_get_u64(m, ints[i].key, &v) == LMQ_OK && (double)v == cfg_num(c, ints[i].cfg, -1), "%s: %s = %llu",
                what, ints[i].key, (unsigned long long)v);
    }
    double hd = cfg_num(c, "head_dim", cfg_num(c, "hidden_size", 0) / cfg_num(c, "num_attention_heads", 1));
    uint64_t v = 0;
    T_CHECK(!lmq_meta_get_u64(m, "llama.attention.key_length", &v) && (double)v == hd, "%s: key_length", what);
    T_CHECK(!lmq_meta_get_u64(m, "llama.attention.value_length", &v) && (double)v == hd, "%s: value_length", what);
    T_CHECK(!lmq_meta_get_u64(m, "llama.rope.dimension_count", &v) && (double)v == hd, "%s: rope dims", what);
    double f = 0;
    T_CHECK(!lmq_meta_get_f64(m, "llama.rope.freq_base", &f) && f == (double)(float)cfg_num(c, "rope_theta", 0),
            "%s: freq_base %g", what, f);
    T_CHECK(!lmq_meta_get_f64(m, "llama.attention.layer_norm_rms_epsilon", &f) && f == (double)(float)cfg_num(c, "rms_norm_eps", 0),
            "%s: rms eps %g", what, f);
    bool tied = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "tie_word_embeddings")), got = !tied;
    T_CHECK(!lmq_meta_get_bool(m, "lmq.tie_word_embeddings", &got) && got == tied, "%s: tie flag", what);
    const char *s;
    T_CHECK(!lmq_meta_get_str(m, "general.architecture", &s, NULL) && !strcmp(s, "llama"), "%s: architecture", what);
    T_CHECK(!lmq_meta_get_str(m, "general.name", &s, NULL) && !strcmp(s, name), "%s: general.name", what);
    T_CHECK(!lmq_meta_get_str(m, "lmq.rope.layout", &s, NULL) && !strcmp(s, "neox"), "%s: rope layout neox", what);
    T_CHECK(!lmq_meta_get_str(m, "lmq.convert.version", &s, NULL) && !strcmp(s, LMQ_VERSION_STRING), "%s: version", what);
    T_CHECK(!lmq_meta_get_str(m, "lmq.convert.time", &s, NULL) && strlen(s) == 20 && s[10] == 'T' && s[19] == 'Z',
            "%s: convert time", what);
}

/* lmq.source.files holds model.safetensors with the XXH3 of the real file. */
static void check_sources(const lmq_meta *m, const char *dir, const char *what)
{
    lmq_vtype fe = LMQ_V_COUNT, he = LMQ_V_COUNT;
    uint64_t nf = 0, nh = 0;
    const void *files = NULL, *hashes = NULL;
    T_CHECK(!lmq_meta_get_arr(m, "lmq.source.files", &fe, &nf, &files) && fe == LMQ_V_STRING &&
                !lmq_meta_get_arr(m, "lmq.source.xxh3", &he, &nh, &hashes) && he == LMQ_V_U64 && nf == nh && nf >= 2,
            "%s: provenance arrays", what);
    int found = 0;
    for (uint64_t i = 0; i < nf && fe == LMQ_V_STRING && he == LMQ_V_U64; i++) {
        const lmq_str *name = (const lmq_str *)files + i;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, name->ptr);
        size_t len = 0;
        char *data = t_read_all(path, &len);
        uint64_t h;
        memcpy(&h, (const uint8_t *)hashes + 8 * i, 8);
        T_CHECK(data && lmq_hash64(data, len) == h, "%s: xxh3 of %s", what, name->ptr);
        found += !strcmp(name->ptr, "model.safetensors") || !strcmp(name->ptr, "config.json");
        free(data);
    }
    T_CHECK(found == 2, "%s: config.json and model.safetensors listed", what);
}

/* ================================================================ per model */

static const struct {
    lmq_type type;
    const char *name;
} OUT_TYPES[] = {{LMQ_TYPE_F32, "f32"}, {LMQ_TYPE_F16, "f16"}, {LMQ_TYPE_BF16, "bf16"}, {LMQ_CONVERT_TYPE_AUTO, "auto"}};

/* Compares a container with its source; returns the container's tensor count. */
static size_t check_container(const char *path, const lmq_safetensors *st, lmq_type want, bool tied, const char *what)
{
    lmq_file *f = NULL;
    lmq_status s = lmq_file_open(path, &f);
    T_CHECK(s == LMQ_OK, "%s: open: %s", what, lmq_last_error());
    if (s) return 0;
    size_t checked = 0;
    T_CHECK(lmq_file_verify(f, 2, NULL, &checked) == LMQ_OK && checked == lmq_file_n_tensors(f),
            "%s: checksums", what);
    size_t matched = 0;
    for (size_t i = 0; i < lmq_safetensors_count(st); i++) {
        const lmq_st_tensor *src = lmq_safetensors_tensor(st, i);
        char g[128];
        if (!gguf_name(src->name, g, sizeof g)) continue;
        const lmq_tensor_info *t = lmq_file_find_tensor(f, g);
        if (tied && !strcmp(g, "output.weight")) {
            T_CHECK(!t, "%s: tied model has no output.weight", what);
            continue;
        }
        T_CHECK(t != NULL, "%s: %s missing", what, g);
        if (!t) continue;
        matched++;
        lmq_type exp = src->n_dims == 1 ? LMQ_TYPE_F32 : want == LMQ_CONVERT_TYPE_AUTO ? src->type : want;
        T_CHECK(t->type == exp, "%s: %s is %s, expected %s", what, g, lmq_type_name(t->type), lmq_type_name(exp));
        bool shape_ok = t->n_dims == src->n_dims;
        for (uint32_t d = 0; d < src->n_dims && shape_ok; d++) shape_ok = t->ne[d] == src->shape[src->n_dims - 1 - d];
        T_CHECK(shape_ok, "%s: %s shape reversed from safetensors", what, g);
        if (t->type != exp || !shape_ok) continue;
        int64_t bad = compare_tensor(src, t);
        T_CHECK(bad == 0, "%s: %s: %lld values differ from the reference", what, g, (long long)bad);
    }
    T_CHECK(matched == lmq_file_n_tensors(f), "%s: %zu of %zu container tensors come from the source", what, matched,
            lmq_file_n_tensors(f));
    size_t n = lmq_file_n_tensors(f);
    lmq_file_close(f);
    return n;
}

/* Two containers with the same tensors (names, types, shapes, decoded bytes) and metadata values. */
static void check_same(const char *a_path, const char *b_path, const char *what)
{
    lmq_file *a = NULL, *b = NULL;
    T_CHECK(lmq_file_open(a_path, &a) == LMQ_OK && lmq_file_open(b_path, &b) == LMQ_OK, "%s: open both: %s", what,
            lmq_last_error());
    if (a && b) {
        T_CHECK(lmq_file_n_tensors(a) == lmq_file_n_tensors(b), "%s: tensor counts", what);
        size_t zstd = 0;
        for (size_t i = 0; i < lmq_file_n_tensors(a) && i < lmq_file_n_tensors(b); i++) {
            const lmq_tensor_info *x = lmq_file_tensor(a, i), *y = lmq_file_tensor(b, i);
            T_CHECK(!strcmp(x->name, y->name) && x->type == y->type && x->nbytes == y->nbytes &&
                        !memcmp(x->ne, y->ne, sizeof x->ne) && !memcmp(x->data, y->data, (size_t)x->nbytes),
                    "%s: tensor %s identical", what, x->name);
            zstd += y->codec == LMQ_CODEC_ZSTD;
        }
        T_CHECK(zstd > 0, "%s: some tensors are stored compressed", what);
        size_t nv = 0;
        T_CHECK(lmq_file_verify(b, 1, NULL, &nv) == LMQ_OK && nv == lmq_file_n_tensors(b), "%s: zstd checksums", what);
        const lmq_meta *ma = lmq_file_meta(a), *mb = lmq_file_meta(b);
        T_CHECK(lmq_meta_count(ma) == lmq_meta_count(mb), "%s: metadata counts", what);
        for (size_t i = 0; i < lmq_meta_count(ma); i++) {
            const char *k = lmq_meta_key(ma, i);
            if (!strcmp(k, "lmq.convert.time")) continue;
            uint8_t *ea = NULL, *eb = NULL;
            size_t la = 0, lb = 0;
            lmq_meta *one_a = lmq_meta_new(), *one_b = lmq_meta_new();
            const lmq_value *vb = lmq_meta_find(mb, k);
            T_CHECK(vb != NULL, "%s: key %s in both", what, k);
            if (vb) {
                lmq_meta_set_value(one_a, k, lmq_meta_value(ma, i));
                lmq_meta_set_value(one_b, k, vb);
                lmq_meta_encode(one_a, &ea, &la);
                lmq_meta_encode(one_b, &eb, &lb);
                T_CHECK(la == lb && ea && eb && !memcmp(ea, eb, la), "%s: key %s equal", what, k);
            }
            free(ea);
            free(eb);
            lmq_meta_free(one_a);
            lmq_meta_free(one_b);
        }
    }
    lmq_file_close(a);
    lmq_file_close(b);
}

/* Flips one byte in every tensor in turn: verify must name exactly that tensor. */
static void check_flips(const char *path, const char *what)
{
    size_t len = 0;
    uint8_t *buf = (uint8_t *)t_read_all(path, &len);
    lmq_file *f = NULL;
    T_CHECK(buf && lmq_file_open_memory(buf, len, path, &f) == LMQ_OK, "%s: open in memory", what);
    if (!f) {
        free(buf);
        return;
    }
    size_t n = lmq_file_n_tensors(f), caught = 0;
    uint64_t *offs = malloc(n * sizeof *offs), *sizes = malloc(n * sizeof *sizes);
    for (size_t i = 0; i < n; i++) {
        offs[i] = lmq_file_tensor(f, i)->file_offset;
        sizes[i] = lmq_file_tensor(f, i)->stored_bytes;
    }
    lmq_file_close(f);
    for (size_t i = 0; i < n; i++) {
        uint64_t at = offs[i] + (sizes[i] * 7 / 13); /* somewhere inside, not always the first byte */
        buf[at] ^= 0x40;
        lmq_file *g = NULL;
        if (lmq_file_open_memory(buf, len, path, &g) == LMQ_OK) {
            size_t bad = SIZE_MAX;
            lmq_status s = lmq_file_verify(g, 2, &bad, NULL);
            const char *name = lmq_file_tensor(g, i)->name;
            char quoted[160];
            snprintf(quoted, sizeof quoted, "'%s'", name);
            if (s == LMQ_ERR_CHECKSUM && bad == i && strstr(lmq_last_error(), quoted)) caught++;
            else T_CHECK(false, "%s: flipped byte in %s not reported (status %d, bad %zu: %s)", what, name, s, bad, lmq_last_error());
            lmq_file_close(g);
        }
        buf[at] ^= 0x40;
    }
    T_CHECK(caught == n && n > 0, "%s: %zu of %zu flipped tensors named", what, caught, n);
    free(offs);
    free(sizes);
    free(buf);
}

static void check_model(const char *dir, const char *name)
{
    cJSON *cfg = t_config_of(dir);
    T_CHECK(cfg != NULL, "%s: config.json parses", name);
    if (!cfg) return;
    bool tied = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, "tie_word_embeddings"));
    int64_t layers = (int64_t)cfg_num(cfg, "num_hidden_layers", 0);
    lmq_safetensors *st = NULL;
    T_CHECK(lmq_safetensors_open(dir, &st) == LMQ_OK, "%s: source: %s", name, lmq_last_error());
    char plain[4096] = "";
    for (size_t k = 0; st && k < sizeof OUT_TYPES / sizeof OUT_TYPES[0]; k++) {
        char out[4096], what[256];
        snprintf(out, sizeof out, "%s/%s-%s.lmq", t_tmpdir(), name, OUT_TYPES[k].name);
        snprintf(what, sizeof what, "%s -> %s", name, OUT_TYPES[k].name);
        lmq_convert_opts o = {.out_type = OUT_TYPES[k].type, .codec = LMQ_CODEC_NONE, .n_threads = 2};
        lmq_convert_stats stats;
        lmq_status s = lmq_convert_hf(dir, out, &o, &stats);
        T_CHECK(s == LMQ_OK, "%s: %s", what, lmq_last_error());
        if (s) continue;
        size_t n = check_container(out, st, OUT_TYPES[k].type, tied, what);
        T_CHECK(n == (size_t)(2 + 9 * layers + (tied ? 0 : 1)) && stats.n_tensors == n, "%s: %zu tensors", what, n);
        lmq_file *f = NULL;
        if (lmq_file_open(out, &f) == LMQ_OK) {
            check_meta(lmq_file_meta(f), cfg, name, what);
            if (k == 0) check_sources(lmq_file_meta(f), dir, what);
            const char *ty;
            lmq_type src_type = lmq_safetensors_find(st, "model.embed_tokens.weight")->type;
            const char *want_ty = OUT_TYPES[k].type == LMQ_CONVERT_TYPE_AUTO ? lmq_type_name(src_type) : OUT_TYPES[k].name;
            T_CHECK(!lmq_meta_get_str(lmq_file_meta(f), "lmq.convert.type", &ty, NULL) && !strcmp(ty, want_ty),
                    "%s: lmq.convert.type %s", what, want_ty);
            uint64_t params = 0;
            for (size_t i = 0; i < lmq_file_n_tensors(f); i++) {
                const lmq_tensor_info *t = lmq_file_tensor(f, i);
                params += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
            }
            T_CHECK(stats.n_params == params, "%s: parameter count", what);
            lmq_file_close(f);
        } else {
            T_CHECK(0, "open %s: %s", out, lmq_last_error());
        }
        if (k == 0) snprintf(plain, sizeof plain, "%s", out);
    }
    /* zstd container == plain container */
    if (plain[0]) {
        char z[4096];
        snprintf(z, sizeof z, "%s/%s-f32-zstd.lmq", t_tmpdir(), name);
        lmq_convert_opts o = {.out_type = LMQ_TYPE_F32, .codec = LMQ_CODEC_ZSTD, .n_threads = 1};
        lmq_status s = lmq_convert_hf(dir, z, &o, NULL);
        T_CHECK(s == LMQ_OK, "%s zstd: %s", name, lmq_last_error());
        if (!s) check_same(plain, z, name);
        check_flips(plain, name);
    }
    lmq_safetensors_close(st);
    cJSON_Delete(cfg);
}

/* ================================================================ crafted directories */

static lmq_status convert_crafted(const char *dir, const char *out)
{
    lmq_convert_opts o = {.out_type = LMQ_CONVERT_TYPE_AUTO, .n_threads = 1};
    return lmq_convert_hf(dir, out, &o, NULL);
}

static bool no_leftovers(const char *dir_of_out, const char *base)
{
    DIR *d = opendir(dir_of_out);
    bool clean = true;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (!strncmp(e->d_name, base, strlen(base))) clean = false;
    if (d) closedir(d);
    return clean;
}

static void check_crafted(void)
{
    const char *src = t_shared("models/stories260K-hf");
    lmq_safetensors *st = NULL;
    if (lmq_safetensors_open(src, &st) != LMQ_OK) return;
    size_t n = 0;
    t_st_entry *e = t_entries_of(st, 0, &n);
    char path[4096], out[4096];
    const char *dir;
    lmq_status s;

    /* sharded: the tensors split over two files and an index: same container */
    dir = t_crafted_dir(src, "sharded", NULL);
    snprintf(path, sizeof path, "%s/model-00001-of-00002.safetensors", dir);
    T_CHECK(t_write_st(path, e, n / 2), "shard 1");
    snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", dir);
    T_CHECK(t_write_st(path, e + n / 2, n - n / 2), "shard 2");
    {
        size_t cap = 64 + n * 200, len = 0;
        char *idx = malloc(cap);
        len += (size_t)snprintf(idx, cap, "{\"metadata\":{},\"weight_map\":{");
        for (size_t i = 0; i < n; i++)
            len += (size_t)snprintf(idx + len, cap - len, "%s\"%s\":\"model-0000%d-of-00002.safetensors\"", i ? "," : "",
                                    e[i].name, i < n / 2 ? 1 : 2);
        len += (size_t)snprintf(idx + len, cap - len, "}}");
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
        T_CHECK(t_write_all(path, idx, len) == 0, "index");
        free(idx);
    }
    snprintf(out, sizeof out, "%s/sharded.lmq", t_tmpdir());
    s = convert_crafted(dir, out);
    T_CHECK(s == LMQ_OK, "sharded convert: %s", lmq_last_error());
    if (!s) {
        check_container(out, st, LMQ_CONVERT_TYPE_AUTO, true, "sharded");
        lmq_file *f = NULL;
        if (lmq_file_open(out, &f) == LMQ_OK) {
            lmq_vtype et;
            uint64_t nf = 0;
            lmq_meta_get_arr(lmq_file_meta(f), "lmq.source.files", &et, &nf, NULL);
            T_CHECK(nf == 6, "sharded: config, tokenizer x2, index and 2 shards listed (%llu)", (unsigned long long)nf);
            lmq_file_close(f);
        } else {
            T_CHECK(0, "open %s: %s", out, lmq_last_error());
        }
    }

    /* an extra unknown tensor is skipped; a rotary table silently */
    free(e);
    e = t_entries_of(st, 2, &n);
    static const float junk[4] = {1, 2, 3, 4};
    e[n] = (t_st_entry){"model.layers.0.self_attn.rotary_emb.inv_freq", "F32", 1, {4, 0}, junk, 16};
    e[n + 1] = (t_st_entry){"model.vision_tower.weight", "F32", 1, {4, 0}, junk, 16};
    dir = t_crafted(src, "extra", NULL, e, n + 2);
    snprintf(out, sizeof out, "%s/extra.lmq", t_tmpdir());
    s = convert_crafted(dir, out);
    T_CHECK(s == LMQ_OK, "extra tensors skipped: %s", lmq_last_error());
    if (!s) check_container(out, st, LMQ_CONVERT_TYPE_AUTO, true, "extra");

    /* refusals: each names the tensor, leaves no output and no temporary */
    static const struct {
        const char *what, *tensor, *mention;
        lmq_status want;
    } bad[] = {
        {"missing tensor", "model.layers.2.mlp.up_proj.weight", "model.layers.2.mlp.up_proj.weight", LMQ_ERR_NOT_FOUND},
        {"I64 weight", "model.layers.1.self_attn.k_proj.weight", "I64", LMQ_ERR_UNSUPPORTED},
        {"wrong shape", "model.norm.weight", "model.norm.weight", LMQ_ERR_FORMAT},
        {"layer beyond config", "model.layers.9.mlp.up_proj.weight", "model.layers.9", LMQ_ERR_FORMAT},
    };
    static int64_t i64[64 * 32];
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        size_t m = 0;
        free(e);
        e = t_entries_of(st, 1, &m);
        for (size_t i = 0; i < m; i++) {
            if (strcmp(e[i].name, bad[b].tensor)) continue;
            if (b == 0) e[i] = e[--m];
            if (b == 1) { /* same shape, 8-byte integers */
                e[i].dtype = "I64";
                e[i].data = i64;
                e[i].nbytes = (uint64_t)(e[i].shape[0] * e[i].shape[1]) * 8;
            }
            if (b == 2) {
                e[i].shape[0] -= 1;
                e[i].nbytes -= 4;
            }
        }
        if (b == 3) {
            e[m] = e[0];
            snprintf(e[m].name, sizeof e[m].name, "%s", bad[b].tensor);
            m++;
        }
        dir = t_crafted(src, "bad", NULL, e, m);
        snprintf(out, sizeof out, "%s/refused.lmq", t_tmpdir());
        s = convert_crafted(dir, out);
        T_CHECK(s == bad[b].want && strstr(lmq_last_error(), bad[b].mention), "%s: status %d: %s", bad[b].what, s,
                lmq_last_error());
        T_CHECK(no_leftovers(t_tmpdir(), "refused.lmq"), "%s: no output or temporary left", bad[b].what);
    }

    /* an unwritable output path: one error, nothing created */
    snprintf(out, sizeof out, "%s/no/such/dir/out.lmq", t_tmpdir());
    s = convert_crafted(src, out);
    T_CHECK(s == LMQ_ERR_IO && strstr(lmq_last_error(), out), "unwritable output: %s", lmq_last_error());
    /* a missing input directory */
    s = convert_crafted(t_tmp("missing_model"), t_tmp("x.lmq"));
    T_CHECK(s == LMQ_ERR_NOT_FOUND && strstr(lmq_last_error(), "missing_model") && !t_exists(t_tmp("x.lmq")),
            "missing input: %s", lmq_last_error());
    free(e);
    lmq_safetensors_close(st);
}

int main(void)
{
    const char *models = t_shared("models");
    DIR *d = opendir(models);
    if (!d) t_skip("%s not found (set LMQ_SHARED)", models);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char dir[4096], cfg[4200];
        snprintf(dir, sizeof dir, "%s/%s", models, e->d_name);
        snprintf(cfg, sizeof cfg, "%s/config.json", dir);
        if (!t_exists(cfg)) continue;
        check_model(dir, e->d_name);
        n++;
    }
    closedir(d);
    T_CHECK(n >= 3, "model directories converted: %d", n);
    check_crafted();
    return t_finish();
}
