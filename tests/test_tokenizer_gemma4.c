/* Gemma 4's tokenizer (llama.cpp's tokenizer model "gemma4"): the
 * tokenizer.json that tests/make_gemma4_tokenizer.py writes in the real
 * layout (Replace(" " -> U+2581) normalizer, ranked BPE merges over raw
 * UTF-8, <0xNN> byte fallback, Gemma 4's special tokens, newline runs as
 * added tokens) must convert to tokenizer.ggml.model = "gemma4" and give,
 * for every text of cases.json, the ids Hugging Face's algorithm gives (the
 * script's independent re-implementation), decode back to the text, add one
 * BOS, keep <|channel>-style markers visible; the same after a GGUF round
 * trip, and as llama.cpp's own GGUFs have it (newline runs typed normal,
 * add_bos false, no tokenizer.lmq.* keys). Plus fused unknowns without byte
 * pieces, and refusals. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "hf_tokenizer_internal.h"
#include "lmq_convert.h"
#include "lmq_runtime.h"
#include "testutil.h"

static cJSON *g_cases;

/* Every case through `v`: ids, decode, BOS. */
static void check_cases(const lmq_vocab *v, const char *what)
{
    const cJSON *c;
    int n_case = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(g_cases, "cases")) {
        const char *text = cJSON_GetObjectItemCaseSensitive(c, "text")->valuestring;
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(c, "ids");
        size_t nw = (size_t)cJSON_GetArraySize(want), n = 0;
        int32_t *ids = NULL;
        lmq_status s = lmq_tokenize_alloc(v, text, strlen(text), false, true, &ids, &n);
        bool same = s == LMQ_OK && n == nw;
        for (size_t i = 0; same && i < n; i++) same = ids[i] == cJSON_GetArrayItem(want, (int)i)->valueint;
        if (!same) {
            fprintf(stderr, "  got:");
            for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
            fprintf(stderr, "\n");
        }
        T_CHECK(same, "%s: case %d: %zu ids, want %zu (%s)", what, n_case, n, nw, s ? lmq_last_error() : "ok");
        /* decode: U+2581 and space both come back as a space */
        char *exp = malloc(strlen(text) + 1), *out = malloc(4 * strlen(text) + 16);
        size_t k = 0;
        for (size_t i = 0; text[i];) {
            if (!strncmp(text + i, "\xe2\x96\x81", 3)) {
                exp[k++] = ' ';
                i += 3;
            } else {
                exp[k++] = text[i++];
            }
        }
        size_t ol = 0;
        s = lmq_detokenize(v, ids, n, false, true, out, 4 * strlen(text) + 16, &ol);
        T_CHECK(s == LMQ_OK && ol == k && !memcmp(out, exp, k), "%s: case %d decodes back (%.*s)", what, n_case,
                (int)ol, out);
        /* add_special: one BOS in front, none more when the text starts with it */
        int32_t *ids2 = NULL;
        size_t n2 = 0;
        s = lmq_tokenize_alloc(v, text, strlen(text), true, true, &ids2, &n2);
        bool starts_bos = !strncmp(text, "<bos>", 5);
        T_CHECK(s == LMQ_OK && n2 == n + !starts_bos && ids2[0] == 2 &&
                    (n == 0 || !memcmp(ids2 + !starts_bos, ids, n * sizeof *ids)),
                "%s: case %d with add_special: one BOS", what, n_case);
        free(ids2);
        free(ids);
        free(exp);
        free(out);
        n_case++;
    }
    T_CHECK(n_case >= 20, "%s: %d cases", what, n_case);
}

static void check_vocab(const lmq_meta *m, const char *what)
{
    lmq_vocab *v = NULL;
    T_CHECK(lmq_vocab_load(m, &v) == LMQ_OK, "%s: load: %s", what, lmq_last_error());
    if (!v) return;
    T_CHECK(lmq_vocab_type_of(v) == LMQ_VOCAB_GEMMA4 && !strcmp(lmq_vocab_pre(v), "gemma4"), "%s: type", what);
    T_CHECK(lmq_vocab_bos(v) == 2 && lmq_vocab_eos(v) == 1 && lmq_vocab_add_bos(v) && !lmq_vocab_add_eos(v),
            "%s: bos 2, eos 1, add_bos", what);
    T_CHECK(lmq_vocab_is_eog(v, 1) && lmq_vocab_is_eog(v, 106) && lmq_vocab_is_eog(v, 50) && !lmq_vocab_is_eog(v, 105),
            "%s: <eos>, <turn|>, <|tool_response> end generation", what);
    T_CHECK(lmq_vocab_nl(v) == 107, "%s: newline token %d", what, lmq_vocab_nl(v));
    size_t len = 0;
    const char *p = lmq_token_to_piece(v, 100, false, &len);
    T_CHECK(p && len == 10 && !memcmp(p, "<|channel>", 10), "%s: <|channel> is visible in decoded text", what);
    p = lmq_token_to_piece(v, 105, false, &len);
    T_CHECK(len == 0, "%s: <|turn> is control (no text without special)", what);
    check_cases(v, what);
    /* control tokens stay text without parse_special; the visible markers are user-defined: always tokens */
    int32_t ids[64];
    size_t n = 0;
    T_CHECK(lmq_tokenize(v, "<|turn><|channel>", 17, false, false, ids, 64, &n) == LMQ_OK && n > 2 &&
                ids[n - 1] == 100 && ids[0] != 105,
            "%s: without parse_special <|turn> is text, <|channel> a token", what);
    /* invalid UTF-8 is kept byte for byte (byte pieces) */
    const char bad[] = "a\xff\xc3(b";
    T_CHECK(lmq_tokenize(v, bad, 5, false, true, ids, 64, &n) == LMQ_OK && n == 5 && ids[1] == 110 + 0xff &&
                ids[2] == 110 + 0xc3,
            "%s: invalid UTF-8 -> byte pieces", what);
    char out[16];
    size_t ol = 0;
    T_CHECK(lmq_detokenize(v, ids, n, false, true, out, sizeof out, &ol) == LMQ_OK && ol == 5 && !memcmp(out, bad, 5),
            "%s: invalid UTF-8 round trip", what);
    lmq_vocab_free(v);
}

/* The metadata as llama.cpp's converter writes it: newline runs normal,
 * add_bos as the Hugging Face config says, no tokenizer.lmq.* keys. */
static void as_llama_cpp(lmq_meta *m)
{
    lmq_vtype et;
    uint64_t n;
    const void *data;
    T_CHECK(lmq_meta_get_arr(m, "tokenizer.ggml.token_type", &et, &n, &data) == LMQ_OK && et == LMQ_V_I32, "types");
    int32_t *t = malloc(n * sizeof *t);
    memcpy(t, data, n * sizeof *t);
    T_CHECK(t[107] == 4 && t[108] == 4 && t[109] == 4, "newline runs are user-defined after convert");
    t[107] = t[108] = t[109] = 1;
    lmq_meta_set_arr(m, "tokenizer.ggml.token_type", LMQ_V_I32, t, n);
    free(t);
    lmq_meta_set_bool(m, "tokenizer.ggml.add_bos_token", false);
    lmq_meta_remove(m, "tokenizer.ggml.pre");
    for (size_t i = lmq_meta_count(m); i-- > 0;)
        if (!strncmp(lmq_meta_key(m, i), "tokenizer.lmq.", 14)) lmq_meta_remove(m, lmq_meta_key(m, i));
    lmq_meta_set_arr(m, "tokenizer.lmq.eog_token_ids", LMQ_V_I32, (int32_t[]){50}, 1); /* llama.cpp: by text */
}

static void gguf_round_trip(const lmq_meta *m)
{
    const char *path = t_tmp("gemma4-vocab.gguf");
    lmq_gguf_writer *w = NULL;
    T_CHECK(lmq_gguf_writer_open(path, NULL, &w) == LMQ_OK, "gguf open: %s", lmq_last_error());
    if (!w) return;
    lmq_meta *wm = lmq_gguf_writer_meta(w);
    lmq_meta_set_str(wm, "general.architecture", "gemma4");
    for (size_t i = 0; i < lmq_meta_count(m); i++) lmq_meta_set_value(wm, lmq_meta_key(m, i), lmq_meta_value(m, i));
    T_CHECK(lmq_gguf_writer_finish(w) == LMQ_OK, "gguf write: %s", lmq_last_error());
    lmq_file *f = NULL;
    T_CHECK(lmq_file_open(path, &f) == LMQ_OK, "gguf read: %s", lmq_last_error());
    if (!f) return;
    const char *model = NULL;
    lmq_meta_get_str(lmq_file_meta(f), "tokenizer.ggml.model", &model, NULL);
    T_CHECK(model && !strcmp(model, "gemma4"), "GGUF tokenizer.ggml.model");
    check_vocab(lmq_file_meta(f), "vocab-only GGUF");
    lmq_file_close(f);
}

/* A Gemma-style file without byte pieces: unknown characters fuse into one
 * <unk>; other Gemma-like shapes are refused by name. */
static void small_cases(void)
{
    static const char J[] =
        "{\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xe2\x96\x81\"},"
        "\"pre_tokenizer\":null,\"added_tokens\":[{\"id\":0,\"content\":\"<unk>\",\"special\":true}],"
        "\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"fuse_unk\":true,\"byte_fallback\":true,"
        "\"vocab\":{\"<unk>\":0,\"a\":1,\"\xe2\x96\x81\":2,\"\xe2\x96\x81" "a\":3},\"merges\":[[\"\xe2\x96\x81\",\"a\"]]}}";
    lmq_meta *m = lmq_meta_new();
    T_CHECK(lmq_tokenizer_json_to_meta(J, strlen(J), "small.json", m) == LMQ_OK, "small: %s", lmq_last_error());
    lmq_meta_set_u32(m, "tokenizer.ggml.unknown_token_id", 0);
    lmq_vocab *v = NULL;
    T_CHECK(lmq_vocab_load(m, &v) == LMQ_OK, "small: load: %s", lmq_last_error());
    int32_t ids[16];
    size_t n = 0;
    if (v) {
        /* x y e-acute fuse into one <unk>; z after the space is another */
        T_CHECK(lmq_tokenize(v, "xy\xc3\xa9 a z", 9, false, true, ids, 16, &n) == LMQ_OK && n == 4 && ids[0] == 0 &&
                    ids[1] == 3 && ids[2] == 2 && ids[3] == 0,
                "small: fused unknowns -> [0 3 2 0] (%zu ids)", n);
        lmq_vocab_free(v);
    }
    lmq_meta_free(m);
    static const char *const bad[] = {
        /* a Split that could still cut: on "x" */
        "{\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xe2\x96\x81\"},"
        "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"String\":\"x\"},\"behavior\":\"Isolated\"},"
        "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}",
        /* ignore_merges */
        "{\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xe2\x96\x81\"},"
        "\"model\":{\"type\":\"BPE\",\"ignore_merges\":true,\"vocab\":{\"a\":0},\"merges\":[]}}",
        /* Llama 2's: a dummy prefix too */
        "{\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"\xe2\x96\x81\"},"
        "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xe2\x96\x81\"}]},"
        "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        m = lmq_meta_new();
        lmq_status s = lmq_tokenizer_json_to_meta(bad[i], strlen(bad[i]), "bad.json", m);
        T_CHECK(s == LMQ_ERR_UNSUPPORTED, "refused shape %zu: %d %s", i, s, lmq_last_error());
        lmq_meta_free(m);
    }
}

int main(void)
{
    size_t n = 0;
    char *text = t_read_all(t_data("gemma4-tokenizer/cases.json"), &n);
    T_CHECK(text != NULL, "tests/data/gemma4-tokenizer/cases.json");
    if (!text) return t_finish();
    g_cases = cJSON_ParseWithLength(text, n);
    free(text);

    lmq_meta *m = lmq_meta_new();
    lmq_status s = lmq_hf_tokenizer_to_meta(t_data("gemma4-tokenizer"), m);
    T_CHECK(s == LMQ_OK, "convert: %s", lmq_last_error());
    const char *model = NULL, *pre = NULL;
    lmq_meta_get_str(m, "tokenizer.ggml.model", &model, NULL);
    lmq_meta_get_str(m, "tokenizer.ggml.pre", &pre, NULL);
    T_CHECK(model && !strcmp(model, "gemma4") && pre && !strcmp(pre, "gemma4"), "model/pre gemma4");
    bool b = false;
    T_CHECK(lmq_meta_get_bool(m, "tokenizer.ggml.add_bos_token", &b) == LMQ_OK && b,
            "add_bos_token true although tokenizer_config.json says false (as llama.cpp)");
    T_CHECK(lmq_meta_get_bool(m, "tokenizer.ggml.add_space_prefix", &b) == LMQ_OK && !b, "no space prefix");
    lmq_vtype et;
    uint64_t nt;
    const void *data;
    T_CHECK(lmq_meta_get_arr(m, "tokenizer.ggml.token_type", &et, &nt, &data) == LMQ_OK && et == LMQ_V_I32, "types");
    const int32_t *tt = data;
    T_CHECK(tt[2] == 3 && tt[105] == 3 && tt[98] == 3 && tt[100] == 4 && tt[101] == 4 && tt[48] == 4 && tt[52] == 4 &&
                tt[50] == 4 && tt[110] == 6 && tt[110 + 255] == 6 && tt[400] == 1,
            "types: control, visible markers user-defined, <0xNN> byte, pieces normal");
    T_CHECK(lmq_meta_get_arr(m, "tokenizer.ggml.merges", &et, &nt, NULL) == LMQ_OK && nt > 40, "merges");
    check_vocab(m, "tokenizer.json");
    gguf_round_trip(m);
    as_llama_cpp(m);
    check_vocab(m, "as llama.cpp's GGUF");
    lmq_meta_free(m);
    small_cases();
    cJSON_Delete(g_cases);
    return t_finish();
}
