/* The JSON-schema matcher (lmq_rt_json.h): documents of every keyword
 * accepted with every prefix, wrong ones refused at the first wrong byte,
 * unsupported schemas refused with a message naming the keyword, random walks
 * that never dead-end and end in JSON that parses and keeps its bounds, random
 * bytes that never crash, and the vocabulary mask against feeding every token
 * of the real Qwen3 vocabulary one by one. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "lmq_convert.h"
#include "lmq_runtime.h"
#include "testutil.h"

static lmq_json_schema *comp(const char *schema)
{
    lmq_json_schema *s = NULL;
    lmq_status st = lmq_json_schema_compile(schema, schema ? strlen(schema) : 0, NULL, NULL, &s);
    T_CHECK(st == LMQ_OK, "compile %s: %s", schema ? schema : "(object)", lmq_last_error());
    return s;
}

/* Every prefix of doc is accepted, only the whole one is done. */
static void accepts(const lmq_json_schema *s, const char *doc)
{
    lmq_json_matcher *m = NULL;
    if (!s || lmq_json_matcher_new(s, &m)) return;
    size_t n = strlen(doc);
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        ok = lmq_json_matcher_feed(m, doc + i, 1);
        T_CHECK(ok, "'%s' refused at byte %zu", doc, i);
    }
    if (ok) T_CHECK(lmq_json_matcher_done(m), "'%s' not done", doc);
    lmq_json_matcher_free(m);
}

/* doc is refused (at some byte) or not done at its end. */
static void refuses(const lmq_json_schema *s, const char *doc)
{
    lmq_json_matcher *m = NULL;
    if (!s || lmq_json_matcher_new(s, &m)) return;
    bool ok = lmq_json_matcher_feed(m, doc, strlen(doc)) && lmq_json_matcher_done(m);
    T_CHECK(!ok, "'%s' accepted", doc);
    lmq_json_matcher_free(m);
}

static void refused_schema(const char *schema, const char *word)
{
    lmq_json_schema *s = NULL;
    lmq_status st = lmq_json_schema_compile(schema, strlen(schema), NULL, NULL, &s);
    T_CHECK(st != LMQ_OK && !s, "schema %s compiled", schema);
    T_CHECK(strstr(lmq_last_error(), word) != NULL, "error for %s: '%s' lacks '%s'", schema, lmq_last_error(), word);
}

static void test_keywords(void)
{
    lmq_json_schema *s = comp("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},"
                              "\"b\":{\"type\":\"string\",\"maxLength\":3},\"c\":{\"type\":\"boolean\"}},"
                              "\"required\":[\"a\",\"c\"]}");
    accepts(s, "{\"a\":1,\"c\":true}");
    accepts(s, "{\"a\": -12, \"b\": \"x\\u00e9\", \"c\": false}");
    accepts(s, "{ \"a\" : 0 ,\"b\":\"\\u00e9\\n\xc3\xa9\",\"c\":true }");
    refuses(s, "{\"a\":1}");                      /* c required */
    refuses(s, "{\"c\":true,\"a\":1}");           /* schema order */
    refuses(s, "{\"a\":1,\"b\":\"abcd\",\"c\":true}"); /* maxLength */
    refuses(s, "{\"a\":1.5,\"c\":true}");         /* integer */
    refuses(s, "{\"a\":01,\"c\":true}");          /* leading zero */
    refuses(s, "{\"a\":1,\"c\":true,\"d\":1}");   /* unknown key */
    refuses(s, "{\"a\":1,     \"c\":true}");      /* more than LMQ_JSON_MAX_WS blanks */
    refuses(s, " {\"a\":1,\"c\":true}");          /* blank before the document */
    refuses(s, "{\"a\":1,\"c\":true} ");          /* or after */
    refuses(s, "{\"a\":1,\"c\":tru}");
    lmq_json_schema_free(s);

    s = comp("{\"type\":\"array\",\"items\":{\"enum\":[\"red\",\"green\",1,12,null,{\"k\":[1]}]},\"minItems\":1,\"maxItems\":3}");
    accepts(s, "[\"red\"]");
    accepts(s, "[1,12, null]");
    accepts(s, "[{\"k\":[1]},\"green\"]");
    refuses(s, "[]");
    refuses(s, "[1,1,1,1]");
    refuses(s, "[\"blue\"]");
    refuses(s, "[123]");
    lmq_json_schema_free(s);

    s = comp("{\"type\":\"integer\",\"minimum\":-5,\"maximum\":250}");
    accepts(s, "-5");
    accepts(s, "250");
    accepts(s, "0");
    accepts(s, "99");
    refuses(s, "-6");
    refuses(s, "251");
    refuses(s, "1000");
    refuses(s, "-10");
    lmq_json_schema_free(s);

    s = comp("{\"type\":\"number\",\"minimum\":0,\"exclusiveMaximum\":10}");
    accepts(s, "9.75");
    accepts(s, "0.5");
    accepts(s, "9");
    refuses(s, "10");
    refuses(s, "-0.5");
    refuses(s, "1e3");
    lmq_json_schema_free(s);

    s = comp("{\"type\":\"number\"}");
    accepts(s, "-0.25e+12");
    accepts(s, "3E7");
    refuses(s, "1.");
    refuses(s, ".5");
    refuses(s, "--1");
    lmq_json_schema_free(s);

    s = comp("{\"anyOf\":[{\"type\":\"string\",\"minLength\":2},{\"type\":\"array\",\"items\":{\"type\":\"integer\"}},{\"type\":\"null\"}]}");
    accepts(s, "\"ab\"");
    accepts(s, "[1,2]");
    accepts(s, "null");
    refuses(s, "\"a\"");
    refuses(s, "3");
    lmq_json_schema_free(s);

    /* alternatives that start alike, read in parallel until one is left */
    s = comp("{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"circle\"},\"r\":{\"type\":\"number\"}},\"required\":[\"kind\",\"r\"]},"
             "{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"rect\"},\"w\":{\"type\":\"integer\"}},\"required\":[\"kind\",\"w\"]},"
             "{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"rect\"},\"h\":{\"type\":\"integer\",\"maximum\":5}},\"required\":[\"kind\"]}]}");
    accepts(s, "{\"kind\":\"circle\",\"r\":1.5}");
    accepts(s, "{\"kind\":\"rect\",\"w\":3}");
    accepts(s, "{\"kind\":\"rect\",\"h\":5}");
    accepts(s, "{\"kind\":\"rect\"}");
    refuses(s, "{\"kind\":\"circle\",\"w\":3}");
    refuses(s, "{\"kind\":\"rect\",\"h\":6}");
    refuses(s, "{\"kind\":\"circle\"}");
    refuses(s, "{\"kind\":\"square\"}");
    lmq_json_schema_free(s);
    s = comp("{\"anyOf\":[{\"type\":\"string\",\"maxLength\":2},{\"enum\":[\"abc\",7]},{\"type\":\"integer\",\"minimum\":0,\"maximum\":5},"
             "{\"type\":\"number\",\"minimum\":100},{\"type\":\"array\",\"items\":{\"type\":\"integer\"}},{\"type\":\"array\",\"items\":{\"type\":\"string\"}}]}");
    accepts(s, "\"ab\"");
    accepts(s, "\"abc\"");
    accepts(s, "7");
    accepts(s, "3");
    accepts(s, "150.5");
    accepts(s, "[1,2]");
    accepts(s, "[\"a\"]");
    accepts(s, "[]");
    refuses(s, "\"abcd\"");
    refuses(s, "[1");
    refuses(s, "\"xyz\"");
    refuses(s, "6");
    refuses(s, "99.5");
    refuses(s, "[1,\"a\"]");
    lmq_json_schema_free(s);

    s = comp("{\"type\":[\"integer\",\"null\"]}");
    accepts(s, "7");
    accepts(s, "null");
    refuses(s, "\"7\"");
    lmq_json_schema_free(s);

    s = comp("{\"const\":\"fixed\"}");
    accepts(s, "\"fixed\"");
    refuses(s, "\"fixe\"");
    lmq_json_schema_free(s);

    s = comp(NULL); /* json_object */
    accepts(s, "{}");
    accepts(s, "{\"x\":[1,{\"y\":null},\"s\",true,-2.5e3],\"z\":{}}");
    refuses(s, "[1]");
    refuses(s, "{\"x\"}");
    refuses(s, "{\"x\":1,}");
    lmq_json_schema_free(s);

    /* a prefix and a suffix around the document */
    lmq_json_schema *w = NULL;
    T_CHECK(lmq_json_schema_compile("{\"type\":\"integer\"}", 18, "<a>", "</a>", &w) == LMQ_OK, "wrap");
    accepts(w, "<a>42</a>");
    refuses(w, "<a>42");
    refuses(w, "42</a>");
    lmq_json_schema_free(w);
}

static void test_refused(void)
{
    refused_schema("{\"$ref\":\"#/$defs/a\"}", "$ref");
    refused_schema("{\"type\":\"string\",\"pattern\":\"a+\"}", "pattern");
    refused_schema("{\"allOf\":[{}]}", "allOf");
    /* oneOf needs alternatives that start differently (two could accept one value) */
    refused_schema("{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]}", "#/oneOf/1: starts like");
    /* alternatives that start alike: 33 objects, and 6 x 6 nested, are over the bound of 32 readings */
    char wide[4000] = "{\"anyOf\":[";
    for (int i = 0; i < 33; i++)
        snprintf(wide + strlen(wide), sizeof wide - strlen(wide), "%s{\"type\":\"object\",\"properties\":{\"k\":{\"const\":%d}}}", i ? "," : "", i);
    strcat(wide, "]}");
    refused_schema(wide, "read 33 at once (limit 32)");
    char six[3000] = "{\"anyOf\":[";
    for (int i = 0; i < 6; i++)
        snprintf(six + strlen(six), sizeof six - strlen(six), "%s{\"type\":\"array\",\"items\":{\"anyOf\":[%s]}}", i ? "," : "",
                 "{\"type\":\"object\",\"properties\":{\"a\":{}}},{\"type\":\"object\",\"properties\":{\"b\":{}}},{\"type\":\"object\",\"properties\":{\"c\":{}}},"
                 "{\"type\":\"object\",\"properties\":{\"d\":{}}},{\"type\":\"object\",\"properties\":{\"e\":{}}},{\"type\":\"object\",\"properties\":{\"f\":{}}}");
    strcat(six, "]}");
    refused_schema(six, "read 36 at once");
    refused_schema("{\"type\":\"object\",\"properties\":{\"a\":{}},\"required\":[\"b\"]}", "'b'");
    refused_schema("{\"type\":\"strin\"}", "strin");
    refused_schema("{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "bounds");
    refused_schema("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}}", "additionalProperties");
    refused_schema("{\"type\":", "not valid JSON");
    refused_schema("[1]", "must be an object");
    char deep[2000] = "";
    for (int i = 0; i < 40; i++) strcat(deep, "{\"items\":");
    strcat(deep, "{}");
    for (int i = 0; i < 40; i++) strcat(deep, "}");
    refused_schema(deep, "deeper");
}

/* Random walks: at each position pick a random allowed byte (or stop when
 * done); there is always one (no dead end), and the result parses as JSON. */
static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)rng;
}

static char *walk(const lmq_json_schema *s, size_t cap)
{
    lmq_json_matcher *m = NULL, *t = NULL;
    lmq_json_matcher_new(s, &m);
    lmq_json_matcher_new(s, &t);
    char *out = calloc(1, cap + 1);
    size_t n = 0;
    while (n < cap) {
        if (lmq_json_matcher_done(m) && rnd() % 4 == 0) break;
        uint8_t ok[256];
        int k = 0;
        for (int c = 1; c < 256; c++) {
            lmq_json_matcher_copy(t, m);
            /* bias towards closing: printable bytes mostly */
            if (lmq_json_matcher_feed(t, (const char *)&(char){(char)c}, 1)) ok[k++] = (uint8_t)c;
        }
        if (k == 0) {
            T_CHECK(lmq_json_matcher_done(m), "dead end after '%s'", out);
            break;
        }
        /* prefer structural bytes so that walks end */
        uint8_t c = ok[rnd() % k];
        for (int i = 0; i < k; i++)
            if (strchr("}]\",", ok[i]) && rnd() % 3 == 0) c = ok[i];
        lmq_json_matcher_feed(m, (const char *)&c, 1);
        out[n++] = (char)c;
    }
    lmq_json_matcher_free(m);
    lmq_json_matcher_free(t);
    return out;
}

static void test_walks(void)
{
    const char *schemas[] = {
        "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"minimum\":3,\"maximum\":1234},"
        "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\"]},\"maxItems\":2},"
        "\"o\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\",\"minimum\":-2,\"maximum\":2}},\"required\":[\"x\"]}},"
        "\"required\":[\"n\",\"o\"]}",
        "{\"type\":\"array\",\"items\":{\"anyOf\":[{\"type\":\"string\",\"maxLength\":4},{\"type\":\"integer\",\"minimum\":-99,\"maximum\":-10}]},\"minItems\":2,\"maxItems\":4}",
        NULL,
        /* overlapping alternatives: objects told apart by a const, numbers by range */
        "{\"type\":\"array\",\"minItems\":1,\"maxItems\":3,\"items\":{\"anyOf\":["
        "{\"type\":\"object\",\"properties\":{\"t\":{\"const\":\"a\"},\"v\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9}},\"required\":[\"t\",\"v\"]},"
        "{\"type\":\"object\",\"properties\":{\"t\":{\"const\":\"ab\"},\"v\":{\"type\":\"integer\",\"minimum\":100,\"maximum\":200}},\"required\":[\"t\",\"v\"]},"
        "{\"type\":\"integer\",\"minimum\":10,\"maximum\":19},{\"type\":\"integer\",\"minimum\":30,\"maximum\":39}]}}",
    };
    for (int k = 0; k < 4; k++) {
        lmq_json_schema *s = comp(schemas[k]);
        if (!s) continue;
        int parsed = 0, runs = 60;
        for (int r = 0; r < runs; r++) {
            char *doc = walk(s, 4000);
            lmq_json_matcher *m = NULL;
            lmq_json_matcher_new(s, &m);
            bool done = lmq_json_matcher_feed(m, doc, strlen(doc)) && lmq_json_matcher_done(m);
            lmq_json_matcher_free(m);
            if (done) {
                cJSON *j = cJSON_Parse(doc);
                T_CHECK(j != NULL, "walk gave invalid JSON: %s", doc);
                parsed += j != NULL;
                if (j && k == 0) {
                    double n = cJSON_GetObjectItem(j, "n")->valuedouble;
                    double x = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "o"), "x")->valuedouble;
                    T_CHECK(n >= 3 && n <= 1234 && n == (double)(long)n, "n=%g in %s", n, doc);
                    T_CHECK(x >= -2 && x <= 2, "x=%g in %s", x, doc);
                }
                if (j && k == 1) {
                    cJSON *e;
                    cJSON_ArrayForEach(e, j) if (cJSON_IsNumber(e))
                        T_CHECK(e->valuedouble >= -99 && e->valuedouble <= -10, "%g in %s", e->valuedouble, doc);
                    T_CHECK(cJSON_GetArraySize(j) >= 2 && cJSON_GetArraySize(j) <= 4, "size in %s", doc);
                }
                if (j && k == 3) {
                    cJSON *e;
                    cJSON_ArrayForEach(e, j) {
                        double v = cJSON_IsObject(e) ? cJSON_GetObjectItem(e, "v")->valuedouble : e->valuedouble;
                        const char *t = cJSON_IsObject(e) ? cJSON_GetObjectItem(e, "t")->valuestring : NULL;
                        bool ok = t ? (!strcmp(t, "a") && v >= 0 && v <= 9) || (!strcmp(t, "ab") && v >= 100 && v <= 200)
                                    : (v >= 10 && v <= 19) || (v >= 30 && v <= 39);
                        T_CHECK(ok, "item out of every alternative in %s", doc);
                    }
                }
                cJSON_Delete(j);
            }
            free(doc);
        }
        T_CHECK(parsed >= runs / 2, "only %d of %d walks ended", parsed, runs);
        lmq_json_schema_free(s);
    }
}

static void test_random_bytes(void)
{
    lmq_json_schema *s = comp(NULL);
    lmq_json_matcher *m = NULL;
    if (!s || lmq_json_matcher_new(s, &m)) return;
    int fed = 0;
    for (int r = 0; r < 20000; r++) {
        char b[8];
        int n = 1 + (int)(rnd() % 8);
        for (int i = 0; i < n; i++) b[i] = "{}[]\",:0123-.eEtrufalsn \\xyz"[rnd() % 29];
        fed += lmq_json_matcher_feed(m, b, (size_t)n);
    }
    T_CHECK(fed > 0, "nothing fed");
    lmq_json_matcher_free(m);
    lmq_json_schema_free(s);
}

/* The mask against feeding every token on its own, on the Qwen3 vocabulary. */
typedef struct qvocab {
    lmq_vocab *voc;
    int32_t n, eos;
    const char **pieces;
    size_t *lens;
    lmq_json_vocab *jv;
    uint8_t *mask;
    lmq_json_matcher *t;
} qvocab;

/* Brute force: each token fed on its own; the number of tokens that differ. */
static int32_t mask_diff(qvocab *q, const lmq_json_matcher *m, int32_t allowed, int32_t *want_out)
{
    int32_t want = 0, diff = 0;
    for (int32_t i = 0; i < q->n; i++) {
        bool ok;
        if (i == q->eos) ok = lmq_json_matcher_done(m);
        else {
            lmq_json_matcher_copy(q->t, m);
            ok = q->lens[i] > 0 && q->lens[i] <= 128 && lmq_json_matcher_feed(q->t, q->pieces[i], q->lens[i]);
        }
        want += ok;
        diff += ok != (bool)(q->mask[i >> 3] >> (i & 7) & 1);
    }
    if (want_out) *want_out = want;
    return diff + (want != allowed);
}

static double ms_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

static void mask_states(qvocab *q)
{
    lmq_json_schema *s = comp("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":5},"
                              "\"n\":{\"type\":\"integer\",\"minimum\":-3,\"maximum\":40},\"k\":{\"enum\":[\"ab\",\"abc\",7]},"
                              "\"d\":{\"type\":\"string\"}},\"required\":[\"name\"]}");
    const char *states[] = {"", "{", "{\"", "{\"name\": \"", "{\"name\":\"abcd", "{\"name\":\"x\",\"n\":",
                            "{\"name\":\"x\",\"n\":4", "{\"name\":\"x\",\"k\":\"ab", "{\"name\":\"x\"", "{\"name\":\"x\"}",
                            "{\"name\":\"x\",\"d\":\"", "{\"name\":\"x\",\"d\":\"hello wor", "{\"name\":\"x\",\"d\":\"\xc3\xa9t\xc3\xa9 \\\"",
                            "{\"name\":\"x\",\"d\":\"\xe4", "{\"name\":\"x\",\"d\":\"\xe4\xbd", "{\"name\":\"x\",\"d\":\"\\", "{\"name\":\"x\",\"d\":\"\\u0",
                            "{\"name\":\"x\",\"n\":3}"};
    lmq_json_matcher *m = NULL;
    lmq_json_matcher_new(s, &m);
    for (size_t k = 0; k < sizeof states / sizeof *states; k++) {
        lmq_json_matcher_free(m);
        lmq_json_matcher_new(s, &m);
        T_CHECK(lmq_json_matcher_feed(m, states[k], strlen(states[k])), "state '%s'", states[k]);
        /* first call, then four more */
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int32_t allowed = lmq_json_mask(q->jv, m, q->mask);
        double first = ms_since(&t0);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int r = 0; r < 4; r++) allowed = lmq_json_mask(q->jv, m, q->mask);
        printf("mask after %-26s %6d allowed  first %.3f ms, again %.3f ms\n", states[k], allowed, first, ms_since(&t0) / 4);
        int32_t want = 0, diff = mask_diff(q, m, allowed, &want);
        T_CHECK(diff == 0, "state '%s': mask allows %d, brute force %d, %d differ", states[k], allowed, want, diff);
        T_CHECK(allowed > 0, "state '%s': dead end", states[k]);
    }
    lmq_json_matcher_free(m);
    lmq_json_schema_free(s);
}

/* Random token walks: at each state the mask equals brute force, a token
 * drawn from it (biased to ones holding '"', '\\' or bytes >= 0x80, which
 * reach every string sub-state) is fed, until the document is done. */
static void mask_walks(qvocab *q)
{
    const char *schemas[] = {
        "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"maxLength\":3},\"b\":{\"type\":\"string\",\"minLength\":4,\"maxLength\":40},"
        "\"c\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":2},\"maxItems\":3},\"e\":{\"enum\":[\"x\\\"y\",\"\\u00e9\",3]}},"
        "\"required\":[\"a\",\"b\",\"c\"]}",
        NULL, /* any object */
        "{\"type\":\"array\",\"items\":{\"anyOf\":[{\"type\":\"string\",\"maxLength\":130},{\"type\":\"number\",\"minimum\":-5,\"maximum\":5},{\"type\":\"null\"}]},\"maxItems\":4}",
        /* alternatives that start alike: several readings at once */
        "{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"get\"},\"arguments\":{\"type\":\"object\",\"properties\":{\"q\":{\"type\":\"string\",\"maxLength\":6}},\"required\":[\"q\"]}},\"required\":[\"name\",\"arguments\"]},"
        "{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"get_all\"},\"arguments\":{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"},\"q\":{\"type\":\"string\"}}}},\"required\":[\"name\",\"arguments\"]},"
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":4},\"arguments\":{}},\"required\":[\"name\"]}]}",
    };
    int32_t *cand = malloc((size_t)q->n * sizeof *cand);
    int states = 0, bad = 0;
    double worst = 0;
    for (int w = 0; w < 16; w++) {
        lmq_json_schema *s = comp(schemas[w % 4]);
        lmq_json_matcher *m = NULL;
        if (!s || lmq_json_matcher_new(s, &m)) break;
        for (int step = 0; step < 40 && !lmq_json_matcher_done(m); step++) {
            struct timespec t0;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            int32_t allowed = lmq_json_mask(q->jv, m, q->mask);
            double t = ms_since(&t0);
            worst = t > worst ? t : worst;
            states++;
            if (mask_diff(q, m, allowed, NULL)) bad++;
            if (allowed <= 0) break;
            int32_t nc = 0, nspecial = 0;
            for (int32_t i = 0; i < q->n; i++)
                if (i != q->eos && (q->mask[i >> 3] >> (i & 7) & 1)) cand[nc++] = i;
            if (!nc) break;
            /* move the special ones to the front */
            for (int32_t i = 0; i < nc; i++) {
                const char *p = q->pieces[cand[i]];
                size_t l = q->lens[cand[i]];
                bool sp = memchr(p, '"', l) || memchr(p, '\\', l) || (l && (uint8_t)p[l - 1] >= 0x80);
                if (sp) {
                    int32_t x = cand[nspecial];
                    cand[nspecial++] = cand[i];
                    cand[i] = x;
                }
            }
            int32_t pick = nspecial && rnd() % 2 ? cand[rnd() % (uint32_t)nspecial] : cand[rnd() % (uint32_t)nc];
            T_CHECK(lmq_json_matcher_feed(m, q->pieces[pick], q->lens[pick]), "walk %d: allowed token %d refused", w, pick);
        }
        lmq_json_matcher_free(m);
        lmq_json_schema_free(s);
    }
    printf("mask on %d walked states: %d differ from brute force, slowest %.3f ms\n", states, bad, worst);
    T_CHECK(states > 100 && bad == 0, "%d of %d walked states differ from brute force", bad, states);
    free(cand);
}

static void test_mask(void)
{
    const char *dir = t_shared("tokenizers/qwen3");
    t_require(dir);
    qvocab q = {0};
    lmq_meta *meta = lmq_meta_new();
    T_CHECK(lmq_hf_tokenizer_to_meta(dir, meta) == LMQ_OK && lmq_vocab_load(meta, &q.voc) == LMQ_OK, "vocab: %s", lmq_last_error());
    lmq_meta_free(meta);
    if (!q.voc) return;
    q.n = lmq_vocab_n_tokens(q.voc);
    q.pieces = malloc((size_t)q.n * sizeof *q.pieces);
    q.lens = malloc((size_t)q.n * sizeof *q.lens);
    for (int32_t i = 0; i < q.n; i++) q.pieces[i] = lmq_token_to_piece(q.voc, i, false, &q.lens[i]);
    q.eos = lmq_vocab_eot(q.voc);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    T_CHECK(lmq_json_vocab_new(q.n, q.pieces, q.lens, q.eos, &q.jv) == LMQ_OK, "json vocab");
    printf("json vocab of %d tokens built in %.1f ms\n", q.n, ms_since(&t0));
    q.mask = malloc(((size_t)q.n + 7) / 8);
    lmq_json_schema *any = comp(NULL);
    lmq_json_matcher_new(any, &q.t); /* rebound to each state by copy */
    mask_states(&q);
    mask_walks(&q);
    lmq_json_schema_free(any);
    lmq_json_matcher_free(q.t);
    lmq_json_vocab_free(q.jv);
    free(q.mask);
    free(q.pieces);
    free(q.lens);
    lmq_vocab_free(q.voc);
}

int main(void)
{
    test_keywords();
    test_refused();
    test_walks();
    test_random_bytes();
    test_mask();
    return t_finish();
}
