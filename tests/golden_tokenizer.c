/* Golden tokenizer tests on real data in ../shared:
 *  - every vector of every SentencePiece and byte-level BPE vocab in
 *    tokenizer-vectors/ (vocab-only GGUF files; inputs split on
 *    "\n__ggml_vocab_test__\n" and tokenized without BOS and without parsing
 *    special tokens, exactly as llama.cpp's test-tokenizer-0 does);
 *  - tokenizers/llama3 and tokenizers/qwen3 (tokenizer.json) through
 *    lmq_hf_tokenizer_to_meta, same vectors (ids without BOS);
 *  - SentencePiece tokenizer.model files: the Llama 2 one against the
 *    llama-spm GGUF vocab on the same inputs (and on wikitext), the models'
 *    own against llama.cpp's reference GGUF conversions and the prompt ids in
 *    reference_greedy.json;
 *  - round trips on wiki.test.raw. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "lmq_convert.h"
#include "lmq_runtime.h"
#include "testutil.h"

typedef struct cases {
    char *raw;       /* the .inp file, cut in place */
    char **inp;      /* case texts */
    size_t *inp_len;
    int32_t **ids;   /* expected ids */
    size_t *n_ids;
    size_t n;
} cases;

static void cases_free(cases *c)
{
    for (size_t i = 0; i < c->n; i++) free(c->ids[i]);
    free(c->ids);
    free(c->n_ids);
    free(c->inp);
    free(c->inp_len);
    free(c->raw);
    memset(c, 0, sizeof *c);
}

/* test-tokenizer-0's reader: cases separated by "\n__ggml_vocab_test__\n"
 * (the text after the last separator, if any, is a case too), one line of
 * space-separated ids per case in the .out file. */
static bool cases_load(const char *inp_path, const char *out_path, cases *c)
{
    memset(c, 0, sizeof *c);
    size_t len, olen;
    c->raw = t_read_all(inp_path, &len);
    char *out = t_read_all(out_path, &olen);
    if (!c->raw || !out) {
        free(out);
        return false;
    }
    static const char SEP[] = "\n__ggml_vocab_test__\n";
    size_t cap = 64;
    c->inp = malloc(cap * sizeof *c->inp);
    c->inp_len = malloc(cap * sizeof *c->inp_len);
    size_t pos = 0;
    while (pos < len) {
        if (c->n == cap) {
            cap *= 2;
            c->inp = realloc(c->inp, cap * sizeof *c->inp);
            c->inp_len = realloc(c->inp_len, cap * sizeof *c->inp_len);
        }
        char *next = memmem(c->raw + pos, len - pos, SEP, sizeof SEP - 1);
        size_t end = next ? (size_t)(next - c->raw) : len;
        c->inp[c->n] = c->raw + pos;
        c->inp_len[c->n] = end - pos;
        c->n++;
        if (!next) break;
        pos = end + sizeof SEP - 1;
    }
    c->ids = calloc(c->n, sizeof *c->ids);
    c->n_ids = calloc(c->n, sizeof *c->n_ids);
    char *line = out;
    size_t lines = 0;
    while (line && *line && lines < c->n) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        int32_t *ids = malloc((strlen(line) / 2 + 1) * sizeof *ids);
        size_t k = 0;
        char *p = line, *end;
        for (;;) {
            long x = strtol(p, &end, 10);
            if (end == p) break;
            ids[k++] = (int32_t)x;
            p = end;
        }
        c->ids[lines] = ids;
        c->n_ids[lines] = k;
        lines++;
        line = nl ? nl + 1 : NULL;
    }
    free(out);
    if (lines != c->n) {
        fprintf(stderr, "%s: %zu cases but %zu result lines\n", inp_path, c->n, lines);
        return false;
    }
    return true;
}

static void print_ids(const char *what, const int32_t *ids, size_t n)
{
    fprintf(stderr, "  %s:", what);
    for (size_t i = 0; i < n && i < 64; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "%s\n", n > 64 ? " ..." : "");
}

/* Runs every case; returns the number of mismatches. */
static int run_cases(const lmq_vocab *v, const cases *c, const char *label)
{
    int bad = 0;
    for (size_t i = 0; i < c->n; i++) {
        int32_t *ids = NULL;
        size_t n = 0;
        lmq_status s = lmq_tokenize_alloc(v, c->inp[i], c->inp_len[i], false, false, &ids, &n);
        bool ok = s == LMQ_OK && n == c->n_ids[i] && (n == 0 || !memcmp(ids, c->ids[i], n * sizeof *ids));
        if (!ok) {
            bad++;
            fprintf(stderr, "%s case %zu '%.*s' (%s)\n", label, i, (int)(c->inp_len[i] > 80 ? 80 : c->inp_len[i]),
                    c->inp[i], s ? lmq_last_error() : "mismatch");
            print_ids("expected", c->ids[i], c->n_ids[i]);
            print_ids("got     ", ids, n);
        }
        free(ids);
    }
    T_CHECK(bad == 0, "%s: %d of %zu vectors differ", label, bad, c->n);
    return bad;
}

static lmq_vocab *vocab_from_file(const char *path)
{
    lmq_file *f = NULL;
    lmq_vocab *v = NULL;
    lmq_status s = lmq_file_open(path, &f);
    if (!s) s = lmq_vocab_load(lmq_file_meta(f), &v);
    T_CHECK(s == LMQ_OK, "%s: %s", path, lmq_last_error());
    lmq_file_close(f);
    return v;
}

static lmq_vocab *vocab_from_hf(const char *dir)
{
    lmq_meta *m = lmq_meta_new();
    lmq_vocab *v = NULL;
    lmq_status s = lmq_hf_tokenizer_to_meta(dir, m);
    if (!s) s = lmq_vocab_load(m, &v);
    T_CHECK(s == LMQ_OK, "%s: %s", dir, lmq_last_error());
    lmq_meta_free(m);
    return v;
}

static void test_gguf_vectors(void)
{
    static const char *const names[] = {"llama-spm", "phi-3",     "gpt-2",        "falcon",        "mpt",
                                        "starcoder", "refact",    "deepseek-llm", "deepseek-coder"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char rel[256], inp[300], out[300];
        snprintf(rel, sizeof rel, "tokenizer-vectors/ggml-vocab-%s.gguf", names[i]);
        const char *path = t_shared(rel);
        t_require(path);
        snprintf(inp, sizeof inp, "%s.inp", path);
        snprintf(out, sizeof out, "%s.out", path);
        cases c;
        T_CHECK(cases_load(inp, out, &c), "%s: cannot read vectors", path);
        lmq_vocab *v = vocab_from_file(path);
        if (v) {
            int bad = run_cases(v, &c, names[i]);
            printf("%-15s %zu vectors, %d differ\n", names[i], c.n, bad);
        }
        lmq_vocab_free(v);
        cases_free(&c);
    }
}

static void test_hf_json_vectors(void)
{
    static const char *const names[] = {"llama3", "qwen3"};
    for (size_t i = 0; i < 2; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "tokenizers/%s", names[i]);
        const char *dir = t_shared(rel);
        t_require(dir);
        char inp[512], out[512];
        snprintf(inp, sizeof inp, "%s/vectors.inp", dir);
        snprintf(out, sizeof out, "%s/vectors.out", dir);
        cases c;
        T_CHECK(cases_load(inp, out, &c), "%s: cannot read vectors", dir);
        lmq_vocab *v = vocab_from_hf(dir);
        if (v) {
            int bad = run_cases(v, &c, names[i]);
            printf("%-15s %zu vectors, %d differ (tokenizer.json)\n", names[i], c.n, bad);
            T_CHECK(lmq_vocab_type_of(v) == LMQ_VOCAB_BPE, "%s: type", names[i]);
        }
        lmq_vocab_free(v);
        cases_free(&c);
    }
}


/* Every tokenizer.* key of `ref` (a GGUF llama.cpp converted) has the same
 * value in `got` (lmq's conversion of the Hugging Face directory). */
static bool value_eq(const lmq_value *a, const lmq_value *b)
{
    if (a->type == LMQ_V_STRING) return b->type == LMQ_V_STRING && a->s.len == b->s.len && !memcmp(a->s.ptr, b->s.ptr, a->s.len);
    if (a->type == LMQ_V_ARRAY) {
        if (b->type != LMQ_V_ARRAY || a->arr.elem != b->arr.elem || a->arr.n != b->arr.n) return false;
        if (a->arr.elem == LMQ_V_STRING) {
            const lmq_str *x = a->arr.data, *y = b->arr.data;
            for (uint64_t i = 0; i < a->arr.n; i++)
                if (x[i].len != y[i].len || memcmp(x[i].ptr, y[i].ptr, x[i].len)) return false;
            return true;
        }
        return !memcmp(a->arr.data, b->arr.data, (size_t)a->arr.n * lmq_vtype_size(a->arr.elem));
    }
    if (a->type == LMQ_V_BOOL) return b->type == LMQ_V_BOOL && a->b == b->b;
    return a->type == b->type && a->u == b->u;
}

static void compare_with_reference(const char *hf_rel, const char *gguf_rel)
{
    const char *dir = t_shared(hf_rel), *gguf = t_shared(gguf_rel);
    t_require(dir);
    t_require(gguf);
    lmq_meta *m = lmq_meta_new();
    lmq_file *f = NULL;
    lmq_status s = lmq_hf_tokenizer_to_meta(dir, m);
    T_CHECK(s == LMQ_OK, "%s: %s", dir, lmq_last_error());
    s = lmq_file_open(gguf, &f);
    T_CHECK(s == LMQ_OK, "%s: %s", gguf, lmq_last_error());
    if (f) {
        const lmq_meta *ref = lmq_file_meta(f);
        int n = 0;
        for (size_t i = 0; i < lmq_meta_count(ref); i++) {
            const char *key = lmq_meta_key(ref, i);
            if (strncmp(key, "tokenizer.", 10)) continue;
            const lmq_value *got = lmq_meta_find(m, key);
            T_CHECK(got && value_eq(lmq_meta_value(ref, i), got), "%s: key %s differs from llama.cpp's %s", dir, key, gguf);
            n++;
        }
        printf("%-28s %d tokenizer keys equal to llama.cpp's conversion\n", hf_rel, n);
        T_CHECK(n >= 8, "%s: only %d tokenizer keys compared", gguf, n);
    }
    lmq_file_close(f);
    lmq_meta_free(m);
}

/* reference_greedy.json: {"prompt": ..., "prompt_ids_with_bos": [...]} at the
 * top level or in a list of runs. */
static void check_prompts(const cJSON *node, const lmq_vocab *v, const char *label, int *n_checked)
{
    if (cJSON_IsArray(node) || cJSON_IsObject(node)) {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(node, "prompt");
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(node, "prompt_ids_with_bos");
        if (cJSON_IsString(p) && cJSON_IsArray(ids)) {
            int32_t *got = NULL;
            size_t n = 0;
            lmq_status s = lmq_tokenize_alloc(v, p->valuestring, strlen(p->valuestring), true, false, &got, &n);
            bool ok = s == LMQ_OK && n == (size_t)cJSON_GetArraySize(ids);
            for (size_t i = 0; ok && i < n; i++) ok = got[i] == (int32_t)cJSON_GetArrayItem(ids, (int)i)->valuedouble;
            T_CHECK(ok, "%s: prompt '%s' tokenizes differently from reference_greedy.json", label, p->valuestring);
            if (!ok) print_ids("got", got, n);
            free(got);
            (*n_checked)++;
        }
        const cJSON *e;
        cJSON_ArrayForEach(e, node) check_prompts(e, v, label, n_checked);
    }
}

static void test_model_prompts(const char *rel)
{
    const char *dir = t_shared(rel);
    t_require(dir);
    lmq_vocab *v = vocab_from_hf(dir);
    char path[512];
    snprintf(path, sizeof path, "%s/reference_greedy.json", dir);
    size_t len;
    char *txt = t_read_all(path, &len);
    cJSON *j = txt ? cJSON_ParseWithLength(txt, len) : NULL;
    T_CHECK(v && j, "%s: vocab or reference_greedy.json", dir);
    int n = 0;
    if (v && j) check_prompts(j, v, rel, &n);
    T_CHECK(n >= 1, "%s: no prompts found in reference_greedy.json", dir);
    printf("%-28s %d reference prompts match\n", rel, n);
    cJSON_Delete(j);
    free(txt);
    lmq_vocab_free(v);
}

static void test_stories_prompt(void)
{
    const char *dir = t_shared("models/stories260K-hf");
    if (!t_exists(dir)) return;
    lmq_vocab *v = vocab_from_hf(dir);
    if (!v) return;
    int32_t ids[16];
    size_t n = 0;
    lmq_status s = lmq_tokenize(v, "Once upon a time", 16, true, false, ids, 16, &n);
    static const int32_t want[] = {1, 403, 407, 261, 378};
    T_CHECK(s == LMQ_OK && n == 5 && !memcmp(ids, want, sizeof want), "stories260K: 'Once upon a time'");
    lmq_vocab_free(v);
}

/* The Llama 2 tokenizer.model and llama.cpp's llama-spm GGUF hold the same
 * vocabulary: equal ids on the vectors and on wikitext. */
static void test_llama2_model_vs_gguf(void)
{
    const char *dir = t_shared("models/llama2-tokenizer");
    const char *gguf = t_shared("tokenizer-vectors/ggml-vocab-llama-spm.gguf");
    t_require(dir);
    t_require(gguf);
    lmq_vocab *a = vocab_from_hf(dir), *b = vocab_from_file(gguf);
    if (a && b) {
        T_CHECK(lmq_vocab_n_tokens(a) == lmq_vocab_n_tokens(b), "llama2: vocab sizes");
        int diff = 0;
        for (int32_t id = 0; id < lmq_vocab_n_tokens(a) && id < lmq_vocab_n_tokens(b); id++) {
            size_t la, lb;
            const char *ta = lmq_vocab_token_text(a, id, &la), *tb = lmq_vocab_token_text(b, id, &lb);
            if (la != lb || memcmp(ta, tb, la) || lmq_vocab_token_score(a, id) != lmq_vocab_token_score(b, id) ||
                lmq_vocab_token_type(a, id) != lmq_vocab_token_type(b, id))
                diff++;
        }
        T_CHECK(diff == 0, "llama2: %d tokens differ between tokenizer.model and the GGUF vocab", diff);
        char inp[512], out[512];
        snprintf(inp, sizeof inp, "%s.inp", gguf);
        snprintf(out, sizeof out, "%s.out", gguf);
        cases c;
        if (cases_load(inp, out, &c)) {
            int bad = run_cases(a, &c, "llama2 tokenizer.model");
            printf("%-28s %zu vectors, %d differ (tokenizer.model)\n", "llama2-tokenizer", c.n, bad);
        }
        cases_free(&c);
        size_t len;
        char *wiki = t_read_all(t_shared("data/wikitext-2-raw/wiki.test.raw"), &len);
        if (wiki) {
            int32_t *ia = NULL, *ib = NULL;
            size_t na = 0, nb = 0;
            lmq_status s1 = lmq_tokenize_alloc(a, wiki, len, true, false, &ia, &na);
            lmq_status s2 = lmq_tokenize_alloc(b, wiki, len, true, false, &ib, &nb);
            T_CHECK(!s1 && !s2 && na == nb && !memcmp(ia, ib, na * sizeof *ia), "llama2: wikitext ids differ (%zu vs %zu)", na, nb);
            free(ia);
            free(ib);
        }
        free(wiki);
    }
    lmq_vocab_free(a);
    lmq_vocab_free(b);
}

/* wiki.test.raw with the llama-8m-debtext tokenizer: the count its README
 * reports for SentencePiece (434,213 with BOS) and an exact round trip. */
static void test_wikitext(void)
{
    const char *dir = t_shared("models/llama-8m-debtext");
    size_t len;
    char *wiki = t_read_all(t_shared("data/wikitext-2-raw/wiki.test.raw"), &len);
    if (!wiki) t_skip("%s not found (set LMQ_SHARED)", t_shared("data/wikitext-2-raw/wiki.test.raw"));
    t_require(dir);
    lmq_vocab *v = vocab_from_hf(dir);
    if (v) {
        int32_t *ids = NULL;
        size_t n = 0;
        lmq_status s = lmq_tokenize_alloc(v, wiki, len, true, false, &ids, &n);
        T_CHECK(s == LMQ_OK && n == 434213, "debtext wikitext: %zu tokens (SentencePiece: 434213)", n);
        char *back = NULL;
        size_t blen = 0;
        s = lmq_detokenize_alloc(v, ids, n, true, false, &back, &blen);
        T_CHECK(s == LMQ_OK && blen == len && !memcmp(back, wiki, len), "debtext wikitext: round trip");
        printf("%-28s wiki.test.raw: %zu tokens, round trip %s\n", "llama-8m-debtext", n,
               blen == len && !memcmp(back, wiki, len) ? "exact" : "DIFFERS");
        free(back);
        free(ids);
    }
    lmq_vocab_free(v);
    free(wiki);
}

int main(void)
{
    test_gguf_vectors();
    test_hf_json_vectors();
    test_llama2_model_vs_gguf();
    compare_with_reference("models/llama-8m-debtext", "reference/llama-8m-debtext-f32.gguf");
    compare_with_reference("models/stories260K-hf", "reference/stories260K-f32.gguf");
    test_stories_prompt();
    test_model_prompts("models/llama-8m-debtext");
    test_model_prompts("models/llama-8m-debtext-bf16");
    test_model_prompts("models/stories260K-hf");
    test_wikitext();
    return t_finish();
}
