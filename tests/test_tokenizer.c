/* Unit tests of the tokenizers on small synthetic vocabularies: SentencePiece
 * merging order, dummy prefix, byte fallback, special tokens, BOS rules,
 * byte-level BPE merges and pre-tokenization, invalid UTF-8, buffer limits,
 * detokenizing and the streaming decoder, NFC, the tokenizer.model and
 * tokenizer.json readers, and error paths. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hf_tokenizer_internal.h"
#include "lmq_convert.h"
#include "lmq_runtime.h"
#include "testutil.h"
#include "tokenizer_internal.h"

#define SP "\xe2\x96\x81" /* U+2581 */

/* ---------------------------------------------------------------- helpers */

static int ids_eq(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
    return na == nb && (na == 0 || !memcmp(a, b, na * sizeof *a));
}

static void show(const char *what, const int32_t *ids, size_t n)
{
    fprintf(stderr, "  %s:", what);
    for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
    fputc('\n', stderr);
}

#define CHECK_TOK(v, text, add, parse, ...)                                                     \
    do {                                                                                      \
        static const int32_t want_[] = {__VA_ARGS__};                                         \
        int32_t got_[256];                                                                    \
        size_t n_ = 0;                                                                        \
        lmq_status s_ = lmq_tokenize((v), (text), strlen(text), (add), (parse), got_, 256, &n_); \
        bool ok_ = s_ == LMQ_OK && ids_eq(got_, n_, want_, sizeof want_ / sizeof want_[0]);   \
        T_CHECK(ok_, "tokenize '%s' (%s)", (text), s_ ? lmq_last_error() : "ids differ");     \
        if (!ok_) {                                                                           \
            show("want", want_, sizeof want_ / sizeof want_[0]);                              \
            show("got ", got_, n_);                                                           \
        }                                                                                     \
    } while (0)

/* ---------------------------------------------------------------- SentencePiece vocab */

enum { S_UNK = 0, S_BOS = 1, S_EOS = 2, S_BYTE0 = 3, S_SP = 259, S_A, S_B, S_SPA, S_AB, S_SPAB, S_AA, S_USER, S_C, S_SPB };

static lmq_meta *spm_meta(void)
{
    static char bytes[256][8];
    const char *toks[270];
    float scores[270];
    int32_t types[270];
    int n = 0;
    toks[n] = "<unk>", scores[n] = 0, types[n++] = LMQ_TOKEN_UNKNOWN;
    toks[n] = "<s>", scores[n] = 0, types[n++] = LMQ_TOKEN_CONTROL;
    toks[n] = "</s>", scores[n] = 0, types[n++] = LMQ_TOKEN_CONTROL;
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        toks[n] = bytes[b], scores[n] = 0, types[n++] = LMQ_TOKEN_BYTE;
    }
    static const char *const words[] = {SP, "a", "b", SP "a", "ab", SP "ab", "aa", "<|u|>", "c", SP "b"};
    for (int i = 0; i < 10; i++) {
        toks[n] = words[i];
        scores[n] = -1.0f - (float)i;
        types[n++] = i == 7 ? LMQ_TOKEN_USER_DEFINED : LMQ_TOKEN_NORMAL;
    }
    lmq_meta *m = lmq_meta_new();
    lmq_meta_set_str(m, "tokenizer.ggml.model", "llama");
    lmq_meta_set_str_arr(m, "tokenizer.ggml.tokens", toks, NULL, (uint64_t)n);
    lmq_meta_set_arr(m, "tokenizer.ggml.scores", LMQ_V_F32, scores, (uint64_t)n);
    lmq_meta_set_arr(m, "tokenizer.ggml.token_type", LMQ_V_I32, types, (uint64_t)n);
    lmq_meta_set_u32(m, "tokenizer.ggml.bos_token_id", 1);
    lmq_meta_set_u32(m, "tokenizer.ggml.eos_token_id", 2);
    return m;
}

static lmq_vocab *load(lmq_meta *m)
{
    lmq_vocab *v = NULL;
    lmq_status s = lmq_vocab_load(m, &v);
    T_CHECK(s == LMQ_OK, "vocab_load: %s", lmq_last_error());
    lmq_meta_free(m);
    return v;
}

static void test_spm(void)
{
    lmq_vocab *v = load(spm_meta());
    if (!v) return;
    T_CHECK(lmq_vocab_type_of(v) == LMQ_VOCAB_SPM, "type");
    T_CHECK(lmq_vocab_bos(v) == S_BOS && lmq_vocab_eos(v) == S_EOS && lmq_vocab_unk(v) == S_UNK, "special ids");
    T_CHECK(lmq_vocab_add_bos(v) && !lmq_vocab_add_eos(v), "SentencePiece adds BOS by default");
    T_CHECK(lmq_vocab_nl(v) == S_BYTE0 + 10, "newline token is <0x0A>");
    T_CHECK(lmq_vocab_is_eog(v, S_EOS) && !lmq_vocab_is_eog(v, S_BOS) && !lmq_vocab_is_eog(v, -1), "eog");

    /* merging by score: "▁a" (-4) before "ab" (-5), then "▁ab" */
    CHECK_TOK(v, "ab", false, false, S_SPAB);
    /* dummy prefix and BOS */
    CHECK_TOK(v, "ab", true, false, S_BOS, S_SPAB);
    CHECK_TOK(v, "", true, false, S_BOS);
    CHECK_TOK(v, "", false, false);
    /* ties: the leftmost pair merges first ("aa" then "a") */
    CHECK_TOK(v, "aaa", false, false, S_SPA, S_AA);
    CHECK_TOK(v, "b aa", false, false, S_SPB, S_SPA, S_A);
    /* byte fallback, including bytes that are not valid UTF-8 */
    CHECK_TOK(v, "\xc3\xa9", false, false, S_SP, S_BYTE0 + 0xc3, S_BYTE0 + 0xa9);
    CHECK_TOK(v, "a\xff" "b", false, false, S_SPA, S_BYTE0 + 0xff, S_B);
    CHECK_TOK(v, "\xe2\x82", false, false, S_SP, S_BYTE0 + 0xe2, S_BYTE0 + 0x82);
    /* control tokens only with parse_special; the dummy prefix follows them */
    CHECK_TOK(v, "<s>ab", false, true, S_BOS, S_SPAB);
    CHECK_TOK(v, "a</s>b", false, true, S_SPA, S_EOS, S_SPB);
    CHECK_TOK(v, "<s>", false, false, S_SP, S_BYTE0 + '<', S_BYTE0 + 's', S_BYTE0 + '>');
    /* no double BOS when the text starts with it */
    CHECK_TOK(v, "<s>ab", true, true, S_BOS, S_SPAB);
    /* user-defined tokens are matched even without parse_special */
    CHECK_TOK(v, "a<|u|>b", false, false, S_SPA, S_USER, S_SPB);

    /* capacity: LMQ_ERR_LIMIT, the count, the first ids */
    int32_t ids[2] = {-1, -1};
    size_t n = 0;
    lmq_status s = lmq_tokenize(v, "ab ab ab", 8, true, false, ids, 2, &n);
    T_CHECK(s == LMQ_ERR_LIMIT && n == 4 && ids[0] == S_BOS && ids[1] == S_SPAB, "limit: %d n=%zu", s, n);
    s = lmq_tokenize(v, "ab", 2, false, false, NULL, 0, &n);
    T_CHECK(s == LMQ_ERR_LIMIT && n == 1, "count only");
    T_CHECK(lmq_tokenize(v, NULL, 3, false, false, ids, 2, &n) == LMQ_ERR_INVALID_ARG, "NULL text");

    /* pieces and detokenize */
    size_t pl;
    const char *p = lmq_token_to_piece(v, S_SPAB, false, &pl);
    T_CHECK(pl == 3 && !memcmp(p, " ab", 3), "piece of ▁ab");
    p = lmq_token_to_piece(v, S_BYTE0 + 0x41, false, &pl);
    T_CHECK(pl == 1 && p[0] == 'A', "piece of <0x41>");
    lmq_token_to_piece(v, S_BOS, false, &pl);
    T_CHECK(pl == 0, "control token hidden");
    p = lmq_token_to_piece(v, S_BOS, true, &pl);
    T_CHECK(pl == 3 && !memcmp(p, "<s>", 3), "control token shown");
    T_CHECK(lmq_token_to_piece(v, 9999, true, &pl) == NULL && pl == 0, "out of range piece");

    char buf[64];
    const int32_t d1[] = {S_SPAB, S_SPB};
    s = lmq_detokenize(v, d1, 2, false, false, buf, sizeof buf, &n);
    T_CHECK(s == LMQ_OK && n == 4 && !memcmp(buf, "ab b", 4), "detok: leading space removed");
    const int32_t d2[] = {S_BOS, S_SPAB, S_EOS};
    s = lmq_detokenize(v, d2, 3, true, false, buf, sizeof buf, &n);
    T_CHECK(s == LMQ_OK && n == 2 && !memcmp(buf, "ab", 2), "detok: remove_special");
    s = lmq_detokenize(v, d2, 3, false, true, buf, sizeof buf, &n);
    T_CHECK(s == LMQ_OK && n == 10 && !memcmp(buf, "<s> ab</s>", 10), "detok: unparse_special");
    s = lmq_detokenize(v, d2, 3, false, false, buf, 2, &n);
    T_CHECK(s == LMQ_ERR_LIMIT && n == 3, "detok: limit");
    const int32_t bad[] = {S_A, 100000};
    T_CHECK(lmq_detokenize(v, bad, 2, false, false, buf, sizeof buf, &n) == LMQ_ERR_INVALID_ARG, "detok: bad id");

    /* round trip of arbitrary bytes through byte fallback */
    const char rt[] = "ab \xff\xfe\x80 a\xc3\xa9 \xf0\x9f\xa6\x99 b";
    int32_t *all = NULL;
    size_t na = 0;
    char *back = NULL;
    size_t nb = 0;
    s = lmq_tokenize_alloc(v, rt, sizeof rt - 1, true, false, &all, &na);
    if (!s) s = lmq_detokenize_alloc(v, all, na, true, false, &back, &nb);
    T_CHECK(s == LMQ_OK && nb == sizeof rt - 1 && !memcmp(back, rt, nb), "round trip with invalid UTF-8");
    free(all);
    free(back);
    lmq_vocab_free(v);
}

/* The word/separator segmentation of the SentencePiece merge queue gives
 * the ids of one queue over the whole text. */
static void test_spm_segmentation(void)
{
    lmq_vocab *v = load(spm_meta());
    if (!v) return;
    T_CHECK(v->spm_word_split && v->spm_sep['\n'], "segmentation enabled on this vocab");
    char text[4096];
    uint32_t r = 12345;
    for (size_t i = 0; i < sizeof text; i++) {
        r = r * 1103515245u + 12345u;
        static const char alphabet[] = "aabbc \n\xc3\xa9<";
        text[i] = alphabet[(r >> 16) % (sizeof alphabet - 1)];
    }
    int32_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    lmq_tokenize_alloc(v, text, sizeof text, false, false, &a, &na);
    v->spm_word_split = false;
    memset(v->spm_sep, 0, sizeof v->spm_sep);
    lmq_tokenize_alloc(v, text, sizeof text, false, false, &b, &nb);
    T_CHECK(na > 0 && ids_eq(a, na, b, nb), "segmented and whole-text merging agree (%zu vs %zu)", na, nb);
    free(a);
    free(b);
    lmq_vocab_free(v);
}

static void test_spm_long_input(void)
{
    lmq_vocab *v = load(spm_meta());
    if (!v) return;
    /* one word of 1 MB: "▁a" + "aa" * n, no quadratic behaviour */
    size_t len = 1 << 20;
    char *t = malloc(len + 1);
    memset(t, 'a', len);
    t[len] = 0;
    int32_t *ids = NULL;
    size_t n = 0;
    lmq_status s = lmq_tokenize_alloc(v, t, len + 1 - 1, false, false, &ids, &n);
    bool ok = s == LMQ_OK && n == 1 + (len - 1) / 2 + ((len - 1) % 2) && ids[0] == S_SPA;
    for (size_t i = 1; ok && i < n - 1; i++) ok = ids[i] == S_AA;
    T_CHECK(ok, "1 MB word: %zu tokens", n);
    free(ids);
    free(t);
    lmq_vocab_free(v);
}

/* ---------------------------------------------------------------- byte-level BPE vocab */

static lmq_meta *bpe_meta(const char *pre, bool with_regex)
{
    static char ascii[128][2];
    const char *toks[200];
    int n = 0;
    for (int c = 0x21; c <= 0x7e; c++) {
        ascii[c][0] = (char)c;
        toks[n++] = ascii[c];
    }
    /* 94.. : byte-level characters of space, newline, 0xff, 0xc3, 0xa9 */
    toks[n++] = "\xc4\xa0"; /* Ġ = ' ' */
    toks[n++] = "\xc4\x8a"; /* Ċ = '\n' */
    toks[n++] = "\xc3\xbf"; /* ÿ = 0xff */
    toks[n++] = "\xc3\x83"; /* Ã = 0xc3 */
    toks[n++] = "\xc2\xa9"; /* © = 0xa9 */
    static const char *const merged[] = {"he", "ll", "llo", "hello", "\xc4\xa0w", "or", "\xc4\xa0wor", "ld",
                                         "\xc4\xa0world", "\xc3\x83\xc2\xa9", "<|endoftext|>", "\xc4\xa0\xc4\xa0"};
    for (int i = 0; i < 12; i++) toks[n++] = merged[i];
    static const char *const merges[] = {"h e", "l l", "ll o", "he llo", "\xc4\xa0 w", "o r", "\xc4\xa0w or", "l d",
                                         "\xc4\xa0wor ld", "\xc3\x83 \xc2\xa9", "\xc4\xa0 \xc4\xa0"};
    int32_t types[200];
    for (int i = 0; i < n; i++) types[i] = LMQ_TOKEN_NORMAL;
    types[n - 2] = LMQ_TOKEN_CONTROL;
    lmq_meta *m = lmq_meta_new();
    lmq_meta_set_str(m, "tokenizer.ggml.model", "gpt2");
    lmq_meta_set_str(m, "tokenizer.ggml.pre", pre);
    lmq_meta_set_str_arr(m, "tokenizer.ggml.tokens", toks, NULL, (uint64_t)n);
    lmq_meta_set_arr(m, "tokenizer.ggml.token_type", LMQ_V_I32, types, (uint64_t)n);
    lmq_meta_set_str_arr(m, "tokenizer.ggml.merges", merges, NULL, 11);
    lmq_meta_set_u32(m, "tokenizer.ggml.eos_token_id", (uint32_t)(n - 2));
    if (with_regex) {
        const char *re[] = {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"};
        lmq_meta_set_str_arr(m, "tokenizer.lmq.pre_regex", re, NULL, 1);
    }
    return m;
}

enum { B_SPACE = 94, B_NL, B_FF, B_C3, B_A9, B_HE, B_LL, B_LLO, B_HELLO, B_GW, B_OR, B_GWOR, B_LD, B_GWORLD, B_EACUTE, B_EOT, B_GG };
#define B_CH(c) ((c) - 0x21)

static void test_bpe(void)
{
    lmq_vocab *v = load(bpe_meta("gpt2", false));
    if (!v) return;
    T_CHECK(lmq_vocab_type_of(v) == LMQ_VOCAB_BPE && !strcmp(lmq_vocab_pre(v), "gpt2"), "type/pre");
    T_CHECK(!lmq_vocab_add_bos(v), "gpt2 adds no BOS");
    T_CHECK(lmq_vocab_is_eog(v, B_EOT) && lmq_vocab_eot(v) == B_EOT, "<|endoftext|> ends generation");
    CHECK_TOK(v, "hello world", false, false, B_HELLO, B_GWORLD);
    CHECK_TOK(v, "hello", true, false, B_HELLO);
    /* pre-tokenization keeps "hello" and " world" apart: no merge across */
    CHECK_TOK(v, "helloworld", false, false, B_HELLO, B_CH('w'), B_OR, B_LD);
    /* "\s+(?!\S)": of three spaces before a word, two go alone */
    CHECK_TOK(v, "a   b", false, false, B_CH('a'), B_GG, B_SPACE, B_CH('b'));
    CHECK_TOK(v, "\xc3\xa9!", false, false, B_EACUTE, B_CH('!'));
    /* invalid UTF-8 is never matched by the regex and encoded byte by byte */
    CHECK_TOK(v, "he\xffllo", false, false, B_HE, B_FF, B_LLO);
    CHECK_TOK(v, "<|endoftext|>hello", false, true, B_EOT, B_HELLO);
    CHECK_TOK(v, "x\n", false, false, B_CH('x'), B_NL);

    size_t n;
    char buf[64];
    const int32_t d[] = {B_HELLO, B_GWORLD, B_CH('!'), B_FF};
    lmq_status s = lmq_detokenize(v, d, 4, false, false, buf, sizeof buf, &n);
    T_CHECK(s == LMQ_OK && n == 13 && !memcmp(buf, "hello world!\xff", 13), "bpe detok");
    /* clean-up of " ." etc. (gpt2 family) */
    const int32_t d2[] = {B_HELLO, B_SPACE, B_CH(','), B_GWORLD, B_SPACE, B_CH('\''), B_CH('s')};
    s = lmq_detokenize(v, d2, 7, false, false, buf, sizeof buf, &n);
    T_CHECK(s == LMQ_OK && n == 14 && !memcmp(buf, "hello, world's", 14), "bpe clean-up: '%.*s'", (int)n, buf);
    lmq_vocab_free(v);

    /* the same with the regex given explicitly */
    v = load(bpe_meta("something-new", true));
    if (v) {
        CHECK_TOK(v, "hello world", false, false, B_HELLO, B_GWORLD);
        lmq_vocab_free(v);
    }
}

static void test_stream(void)
{
    lmq_vocab *v = load(spm_meta());
    if (!v) return;
    lmq_detok_stream st;
    lmq_detok_stream_init(&st, v, false, true);
    char out[64], all[64];
    size_t n, k = 0;
    /* "▁ab", then "é" as two byte tokens, then an emoji over four, "▁b" */
    const int32_t ids[] = {S_SPAB, S_BYTE0 + 0xc3, S_BYTE0 + 0xa9, S_BYTE0 + 0xf0, S_BYTE0 + 0x9f,
                           S_BYTE0 + 0xa6, S_BYTE0 + 0x99, S_SPB, S_BYTE0 + 0xe2};
    const size_t emitted[] = {2, 0, 2, 0, 0, 0, 4, 2, 0};
    for (int i = 0; i < 9; i++) {
        lmq_status s = lmq_detok_stream_push(&st, ids[i], out, sizeof out, &n);
        T_CHECK(s == LMQ_OK && n == emitted[i], "stream push %d: %zu bytes (want %zu)", i, n, emitted[i]);
        memcpy(all + k, out, n);
        k += n;
    }
    lmq_detok_stream_flush(&st, out, sizeof out, &n);
    T_CHECK(n == 1 && (unsigned char)out[0] == 0xe2, "stream flush keeps the incomplete byte");
    memcpy(all + k, out, n);
    k += n;
    static const char want[] = "ab\xc3\xa9\xf0\x9f\xa6\x99 b\xe2";
    T_CHECK(k == sizeof want - 1 && !memcmp(all, want, k), "stream text");
    /* an invalid byte is released at once */
    lmq_detok_stream_init(&st, v, false, false);
    lmq_detok_stream_push(&st, S_BYTE0 + 0xc3, out, sizeof out, &n);
    T_CHECK(n == 0, "lead byte held");
    lmq_detok_stream_push(&st, S_A, out, sizeof out, &n);
    T_CHECK(n == 2 && (unsigned char)out[0] == 0xc3 && out[1] == 'a', "broken sequence released");
    T_CHECK(lmq_detok_stream_push(&st, S_A, out, 0, &n) == LMQ_ERR_LIMIT, "stream limit");
    T_CHECK(lmq_detok_stream_push(&st, -3, out, sizeof out, &n) == LMQ_ERR_INVALID_ARG, "stream bad id");
    /* not at text start: the space stays */
    lmq_detok_stream_init(&st, v, false, false);
    lmq_detok_stream_push(&st, S_SPB, out, sizeof out, &n);
    T_CHECK(n == 2 && out[0] == ' ', "continuation keeps its space");
    lmq_vocab_free(v);
}

/* ---------------------------------------------------------------- errors */

static void test_errors(void)
{
    lmq_vocab *v = NULL;
    lmq_meta *m = lmq_meta_new();
    T_CHECK(lmq_vocab_load(m, &v) == LMQ_ERR_NOT_FOUND && v == NULL, "no tokenizer.ggml.model");
    T_CHECK(strstr(lmq_last_error(), "tokenizer.ggml.model") != NULL, "error names the key: %s", lmq_last_error());
    lmq_meta_set_str(m, "tokenizer.ggml.model", "bert");
    T_CHECK(lmq_vocab_load(m, &v) == LMQ_ERR_UNSUPPORTED, "bert");
    lmq_meta_set_str(m, "tokenizer.ggml.model", "llama");
    T_CHECK(lmq_vocab_load(m, &v) == LMQ_ERR_NOT_FOUND, "no tokens");
    const char *dup[] = {"a", "b", "a"};
    lmq_meta_set_str_arr(m, "tokenizer.ggml.tokens", dup, NULL, 3);
    T_CHECK(lmq_vocab_load(m, &v) == LMQ_ERR_FORMAT && strstr(lmq_last_error(), "duplicate"), "duplicate token");
    const char *ok3[] = {"a", "b", "c"};
    lmq_meta_set_str_arr(m, "tokenizer.ggml.tokens", ok3, NULL, 3);
    float sc[2] = {0, 0};
    lmq_meta_set_arr(m, "tokenizer.ggml.scores", LMQ_V_F32, sc, 2);
    T_CHECK(lmq_vocab_load(m, &v) == LMQ_ERR_FORMAT, "short scores");
    lmq_meta_remove(m, "tokenizer.ggml.scores");
    T_CHECK(lmq_vocab_load(m, &v) == LMQ_OK, "minimal vocab: %s", lmq_last_error());
    int32_t ids[8];
    size_t n;
    /* no byte tokens, no unk in range: unknown characters vanish, no crash */
    T_CHECK(lmq_tokenize(v, "a\xffz", 3, true, true, ids, 8, &n) == LMQ_OK, "tokenize without byte tokens");
    lmq_vocab_free(v);
    v = NULL;
    lmq_meta_free(m);

    m = bpe_meta("no-such-family", false);
    T_CHECK(lmq_vocab_load(m, &v) == LMQ_ERR_UNSUPPORTED && strstr(lmq_last_error(), "no-such-family"), "unknown pre");
    const char *bad_re[] = {"(unclosed"};
    lmq_meta_set_str_arr(m, "tokenizer.lmq.pre_regex", bad_re, NULL, 1);
    T_CHECK(lmq_vocab_load(m, &v) == LMQ_ERR_FORMAT && strstr(lmq_last_error(), "pre_regex"), "bad regex");
    lmq_meta_remove(m, "tokenizer.lmq.pre_regex");
    lmq_meta_set_str(m, "tokenizer.ggml.pre", "gpt2");
    lmq_meta_remove(m, "tokenizer.ggml.merges");
    T_CHECK(lmq_vocab_load(m, &v) == LMQ_ERR_NOT_FOUND && strstr(lmq_last_error(), "merges"), "bpe without merges");
    lmq_meta_free(m);
    lmq_vocab_free(NULL);
}

/* ---------------------------------------------------------------- NFC */

static void test_nfc(void)
{
    static const char *const cases[][2] = {
        {"65cc81", "c3a9"},                 /* e + acute */
        {"e18480e185a1e186a8", "eab081"},   /* Hangul L V T */
        {"41cc8a", "c385"},                 /* A + ring */
        {"61cca3cc82", "e1baad"},           /* a + dot below + circumflex */
        {"e284ab", "c385"},                 /* angstrom sign (singleton) */
        {"e1ba9bcca3", "e1ba9bcca3"},       /* long s with dot: stays */
        {"71cc87cca3", "71cca3cc87"},       /* canonical reordering */
        {"e0a598", "e0a495e0a4bc"},         /* composition exclusion */
        {"65cc81cc81", "c3a9cc81"},         /* second mark blocked */
        {"efac81", "efac81"},               /* compatibility only: unchanged */
        {"c385cca8", "c484cc8a"},           /* reorder then compose */
        {"61ff65cc81", "61ffc3a9"},         /* invalid byte passes through */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned char in[32], want[32];
        size_t ni = strlen(cases[i][0]) / 2, nw = strlen(cases[i][1]) / 2;
        for (size_t k = 0; k < ni; k++) sscanf(cases[i][0] + 2 * k, "%2hhx", &in[k]);
        for (size_t k = 0; k < nw; k++) sscanf(cases[i][1] + 2 * k, "%2hhx", &want[k]);
        size_t no = 0;
        char *out = tok_nfc((const char *)in, ni, &no);
        T_CHECK(out && no == nw && !memcmp(out, want, nw), "NFC case %zu (%s)", i, cases[i][0]);
        free(out);
    }
    T_CHECK(tok_nfc_quick("plain ascii \xc3\xa9", 14), "quick check: below U+0300");
    T_CHECK(!tok_nfc_quick("e\xcc\x81", 3), "quick check: combining mark");
}

/* ---------------------------------------------------------------- tokenizer.model */

typedef struct pbw {
    uint8_t b[4096];
    size_t n;
} pbw;

static void pw_varint(pbw *w, uint64_t v)
{
    while (v >= 0x80) {
        w->b[w->n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    w->b[w->n++] = (uint8_t)v;
}

static void pw_bytes(pbw *w, int field, const void *d, size_t len)
{
    pw_varint(w, (uint64_t)field << 3 | 2);
    pw_varint(w, len);
    memcpy(w->b + w->n, d, len);
    w->n += len;
}

static void pw_piece(pbw *w, const char *text, float score, int type)
{
    pbw p = {.n = 0};
    pw_bytes(&p, 1, text, strlen(text));
    pw_varint(&p, 2 << 3 | 5);
    memcpy(p.b + p.n, &score, 4);
    p.n += 4;
    if (type != 1) {
        pw_varint(&p, 3 << 3);
        pw_varint(&p, (uint64_t)type);
    }
    pw_bytes(w, 1, p.b, p.n);
}

static size_t make_model(uint8_t *out, int model_type, bool dummy_prefix)
{
    pbw w = {.n = 0};
    pw_piece(&w, "<unk>", 0, 2);
    pw_piece(&w, "<s>", 0, 3);
    pw_piece(&w, "</s>", 0, 3);
    pw_piece(&w, "<0x0A>", 0, 6);
    pw_piece(&w, SP, -1, 1);
    pw_piece(&w, "h", -2, 1);
    pw_piece(&w, "i", -3, 1);
    pw_piece(&w, SP "h", -4, 1);
    pw_piece(&w, SP "hi", -5, 1);
    pw_piece(&w, "<user>", 0, 4);
    pbw t = {.n = 0};
    pw_varint(&t, 3 << 3);
    pw_varint(&t, (uint64_t)model_type);
    pw_varint(&t, 35 << 3);
    pw_varint(&t, 1);
    pw_varint(&t, 43 << 3);
    pw_varint(&t, (uint64_t)-1); /* pad_id = -1: a 10-byte varint */
    pw_bytes(&w, 2, t.b, t.n);
    pbw nz = {.n = 0};
    pw_bytes(&nz, 1, "identity", 8);
    pw_varint(&nz, 3 << 3);
    pw_varint(&nz, dummy_prefix);
    pw_bytes(&w, 3, nz.b, nz.n);
    memcpy(out, w.b, w.n);
    return w.n;
}

static void test_spm_model(void)
{
    uint8_t buf[4096];
    size_t len = make_model(buf, 2, true);
    lmq_meta *m = lmq_meta_new();
    lmq_status s = lmq_spm_model_to_meta(buf, len, "test.model", m);
    T_CHECK(s == LMQ_OK, "spm model: %s", lmq_last_error());
    lmq_vtype et;
    uint64_t n;
    const void *d;
    T_CHECK(lmq_meta_get_arr(m, "tokenizer.ggml.token_type", &et, &n, &d) == LMQ_OK && n == 10 &&
                ((const int32_t *)d)[0] == 2 && ((const int32_t *)d)[3] == 6 && ((const int32_t *)d)[9] == 4,
            "piece types");
    T_CHECK(lmq_meta_get_arr(m, "tokenizer.ggml.scores", &et, &n, &d) == LMQ_OK && ((const float *)d)[8] == -5.0f,
            "piece scores");
    bool b = false;
    T_CHECK(lmq_meta_get_bool(m, "tokenizer.lmq.byte_fallback", &b) == LMQ_OK && b, "byte_fallback");
    lmq_vocab *v = NULL;
    if (!s && lmq_vocab_load(m, &v) == LMQ_OK) {
        CHECK_TOK(v, "hi\n<user>", true, false, 1, 8, 3, 9);
        lmq_vocab_free(v);
    }
    lmq_meta_free(m);

    /* no dummy prefix */
    len = make_model(buf, 2, false);
    m = lmq_meta_new();
    if (lmq_spm_model_to_meta(buf, len, "test.model", m) == LMQ_OK && lmq_vocab_load(m, &v) == LMQ_OK) {
        CHECK_TOK(v, "hi", false, false, 5, 6);
        CHECK_TOK(v, " hi", false, false, 8);
        lmq_vocab_free(v);
    }
    lmq_meta_free(m);

    /* unigram models are refused, truncations fail cleanly */
    len = make_model(buf, 1, true);
    m = lmq_meta_new();
    T_CHECK(lmq_spm_model_to_meta(buf, len, "uni.model", m) == LMQ_ERR_UNSUPPORTED, "unigram refused");
    lmq_meta_free(m);
    len = make_model(buf, 2, true);
    int failures = 0;
    for (size_t cut = 0; cut < len; cut++) {
        m = lmq_meta_new();
        lmq_status st = lmq_spm_model_to_meta(buf, cut, "cut.model", m);
        if (st != LMQ_OK) failures++;
        T_CHECK(st == LMQ_OK || st == LMQ_ERR_FORMAT || st == LMQ_ERR_UNSUPPORTED, "truncated at %zu: %d", cut, st);
        lmq_meta_free(m);
    }
    T_CHECK(failures > 0, "truncations are noticed");
}

/* ---------------------------------------------------------------- tokenizer.json */

static const char *TOKENIZER_JSON =
    "{\"version\":\"1.0\",\"added_tokens\":[{\"id\":7,\"content\":\"<|end|>\",\"special\":true,"
    "\"lstrip\":false,\"rstrip\":true,\"normalized\":false,\"single_word\":false},"
    "{\"id\":8,\"content\":\"<think>\",\"special\":false}],"
    "\"normalizer\":{\"type\":\"NFC\"},"
    "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
    "\"\\\\p{L}+|\\\\s+\"},\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"Digits\",\"individual_digits\":true},"
    "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,\"use_regex\":false}]},"
    "\"model\":{\"type\":\"BPE\",\"ignore_merges\":true,\"vocab\":{\"a\":0,\"b\":1,\"ab\":2,\"\\u0120\":3,\"1\":4,"
    "\"\\u0120a\":5,\"11\":6},\"merges\":MERGES}}";

static lmq_vocab *json_vocab(const char *merges, lmq_meta **keep)
{
    char json[2048];
    const char *at = strstr(TOKENIZER_JSON, "MERGES");
    snprintf(json, sizeof json, "%.*s%s%s", (int)(at - TOKENIZER_JSON), TOKENIZER_JSON, merges, at + 6);
    lmq_meta *m = lmq_meta_new();
    lmq_vocab *v = NULL;
    lmq_status s = lmq_tokenizer_json_to_meta(json, strlen(json), "test.json", m);
    if (!s) s = lmq_vocab_load(m, &v);
    T_CHECK(s == LMQ_OK, "tokenizer.json: %s", lmq_last_error());
    if (keep) *keep = m;
    else lmq_meta_free(m);
    return v;
}

static void test_tokenizer_json(void)
{
    lmq_meta *m = NULL;
    lmq_vocab *v = json_vocab("[\"a b\",\"\\u0120 a\",\"1 1\"]", &m);
    if (v) {
        const char *pre;
        uint64_t pl;
        T_CHECK(lmq_meta_get_str(m, "tokenizer.ggml.pre", &pre, &pl) == LMQ_OK && !strcmp(pre, "default"), "pre name");
        T_CHECK(lmq_vocab_token_type(v, 7) == LMQ_TOKEN_CONTROL && lmq_vocab_token_type(v, 8) == LMQ_TOKEN_USER_DEFINED,
                "added token types");
        /* "11" is not merged: digits are split first; " a" is two pieces */
        CHECK_TOK(v, "ab 11 a", false, false, 2, 3, 4, 4, 3, 0);
        /* rstrip of <|end|> eats the following spaces; <think> is always matched */
        CHECK_TOK(v, "a<|end|>  b<think>", false, true, 0, 7, 1, 8);
        /* as text, "<|end|>" has no characters in this vocab: nothing */
        size_t n0 = 9;
        T_CHECK(lmq_tokenize(v, "<|end|>", 7, false, false, NULL, 0, &n0) == LMQ_OK && n0 == 0, "unknown bytes dropped");
        T_CHECK(lmq_vocab_is_eog(v, 7), "<|end|> is an end of generation");
        lmq_vocab_free(v);
    }
    lmq_meta_free(m);
    /* the ["a", "b"] pair form gives the same tokenizer */
    v = json_vocab("[[\"a\",\"b\"],[\"\\u0120\",\"a\"],[\"1\",\"1\"]]", NULL);
    if (v) {
        CHECK_TOK(v, "ab 11 a", false, false, 2, 3, 4, 4, 3, 0);
        lmq_vocab_free(v);
    }
    /* unsupported pieces are reported, not guessed */
    m = lmq_meta_new();
    const char *wp = "{\"model\":{\"type\":\"WordPiece\",\"vocab\":{}}}";
    T_CHECK(lmq_tokenizer_json_to_meta(wp, strlen(wp), "wp.json", m) == LMQ_ERR_UNSUPPORTED, "WordPiece refused");
    const char *bad = "{\"model\":";
    T_CHECK(lmq_tokenizer_json_to_meta(bad, strlen(bad), "bad.json", m) == LMQ_ERR_FORMAT, "bad JSON");
    const char *rm = "{\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
                     "{\"String\":\" \"},\"behavior\":\"Removed\"},{\"type\":\"ByteLevel\"}]},\"model\":{\"type\":\"BPE\","
                     "\"vocab\":{\"a\":0},\"merges\":[]}}";
    T_CHECK(lmq_tokenizer_json_to_meta(rm, strlen(rm), "rm.json", m) == LMQ_ERR_UNSUPPORTED &&
                strstr(lmq_last_error(), "Removed"),
            "Split/Removed refused: %s", lmq_last_error());
    lmq_meta_free(m);
}

/* A directory with tokenizer.json + tokenizer_config.json +
 * generation_config.json. */
static void test_hf_dir(void)
{
    const char *dir = t_tmp("hfdir");
    char path[512], json[2048];
    T_CHECK(mkdir(dir, 0755) == 0, "mkdir %s", dir);
    const char *at = strstr(TOKENIZER_JSON, "MERGES");
    snprintf(json, sizeof json, "%.*s[\"a b\"]%s", (int)(at - TOKENIZER_JSON), TOKENIZER_JSON, at + 6);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    t_write_all(path, json, strlen(json));
    const char *cfg = "{\"bos_token\":\"<|end|>\",\"eos_token\":{\"content\":\"<|end|>\"},\"add_bos_token\":false,"
                      "\"clean_up_tokenization_spaces\":false,"
                      "\"chat_template\":[{\"name\":\"default\",\"template\":\"T1\"},{\"name\":\"tool_use\",\"template\":\"T2\"}]}";
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    t_write_all(path, cfg, strlen(cfg));
    const char *gen = "{\"eos_token_id\":[7,8,99]}";
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    t_write_all(path, gen, strlen(gen));
    const char *conf = "{\"vocab_size\":12}";
    snprintf(path, sizeof path, "%s/config.json", dir);
    t_write_all(path, conf, strlen(conf));

    lmq_meta *m = lmq_meta_new();
    lmq_status s = lmq_hf_tokenizer_to_meta(dir, m);
    T_CHECK(s == LMQ_OK, "hf dir: %s", lmq_last_error());
    const char *str;
    uint64_t len, u;
    T_CHECK(lmq_meta_get_str(m, "tokenizer.chat_template", &str, &len) == LMQ_OK && !strcmp(str, "T1"), "default template");
    T_CHECK(lmq_meta_get_str(m, "tokenizer.chat_template.tool_use", &str, &len) == LMQ_OK && !strcmp(str, "T2"),
            "named template");
    T_CHECK(lmq_meta_get_u64(m, "tokenizer.ggml.eos_token_id", &u) == LMQ_OK && u == 7, "eos from the token string");
    bool b = true;
    T_CHECK(lmq_meta_get_bool(m, "tokenizer.ggml.add_bos_token", &b) == LMQ_OK && !b, "add_bos_token");
    lmq_vtype et;
    uint64_t n;
    const void *d;
    T_CHECK(lmq_meta_get_arr(m, "tokenizer.lmq.eog_token_ids", &et, &n, &d) == LMQ_OK && n == 2, "eog ids (99 dropped)");
    T_CHECK(lmq_meta_get_arr(m, "tokenizer.ggml.tokens", &et, &n, &d) == LMQ_OK && n == 12 &&
                !strcmp(((const lmq_str *)d)[11].ptr, "[PAD11]"),
            "padded to config.json's vocab_size");
    lmq_vocab *v = NULL;
    if (!s && lmq_vocab_load(m, &v) == LMQ_OK) {
        T_CHECK(lmq_vocab_is_eog(v, 8), "generation_config eos ids end generation");
        T_CHECK(!lmq_vocab_add_bos(v), "no BOS");
        lmq_vocab_free(v);
    }
    lmq_meta_free(m);

    /* a vocab_size smaller than the tokenizer is refused with one line, not
     * cut (the tokenizer would still produce the dropped ids) */
    conf = "{\"vocab_size\":5}";
    snprintf(path, sizeof path, "%s/config.json", dir);
    t_write_all(path, conf, strlen(conf));
    m = lmq_meta_new();
    s = lmq_hf_tokenizer_to_meta(dir, m);
    T_CHECK(s == LMQ_ERR_FORMAT && strstr(lmq_last_error(), "vocab_size 5 is smaller") &&
                strstr(lmq_last_error(), "config.json"),
            "vocab_size below the tokenizer's count refused: %s", lmq_last_error());
    lmq_meta_free(m);

    m = lmq_meta_new();
    T_CHECK(lmq_hf_tokenizer_to_meta(t_tmp("nonexistent"), m) == LMQ_ERR_NOT_FOUND, "no tokenizer files");
    lmq_meta_free(m);
}

int main(void)
{
    test_spm();
    test_spm_segmentation();
    test_spm_long_input();
    test_bpe();
    test_stream();
    test_errors();
    test_nfc();
    test_spm_model();
    test_tokenizer_json();
    test_hf_dir();
    return t_finish();
}
