/* libFuzzer target: the JSON-schema matcher (runtime/text/jsonschema.c).
 * The input is a schema, a NUL byte, and a document. A schema that does not
 * compile must leave an error message; one that does is fed the document
 * whole and byte by byte (the two must agree on how far it is accepted and
 * whether it is done), and an accepted, done document must parse as JSON.
 * The vocabulary mask, over the 256 single bytes and pieces cut from the
 * document (and a few escapes and UTF-8 pieces), must equal feeding each
 * piece on its own, at every fourth accepted prefix.
 * Any disagreement traps. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "lmq_runtime.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NP 512

static void check_masks(const lmq_json_schema *s, const char *doc, size_t ok)
{
    static const char *const extra[] = {"\"", "\\", "\\u00", "\\n\"", "\xc3\xa9", "\xc3", "\xa9\"", "\xe4\xbd\xa0",
                                        "\": ", "\",\"", "\"}", "true", "null", "-0.5e", "{\"", "[\""};
    const char *pieces[NP + 1];
    size_t lens[NP + 1];
    char single[256];
    int n = 0;
    for (int c = 0; c < 256; c++) {
        single[c] = (char)c;
        pieces[n] = &single[c];
        lens[n++] = 1;
    }
    for (size_t i = 0; i < sizeof extra / sizeof *extra; i++) {
        pieces[n] = extra[i];
        lens[n++] = strlen(extra[i]);
    }
    for (size_t i = 0; i + 1 < ok && n < NP; i += 2) {
        pieces[n] = doc + i;
        lens[n++] = 2 + i % 5 < ok - i ? 2 + i % 5 : ok - i;
    }
    pieces[n] = NULL; /* EOS */
    lens[n] = 0;
    lmq_json_vocab *v = NULL;
    lmq_json_matcher *m = NULL, *t = NULL;
    uint8_t mask[(NP + 1 + 7) / 8];
    if (lmq_json_vocab_new(n + 1, pieces, lens, n, &v) || lmq_json_matcher_new(s, &m) || lmq_json_matcher_new(s, &t))
        __builtin_trap();
    for (size_t at = 0; at <= ok; at++) {
        if (at % 4 == 0) {
            int32_t allowed = lmq_json_mask(v, m, mask), want = 0;
            for (int i = 0; i <= n; i++) {
                lmq_json_matcher_copy(t, m);
                bool fits = i == n ? lmq_json_matcher_done(m) : lmq_json_matcher_feed(t, pieces[i], lens[i]);
                if (fits != (bool)(mask[i >> 3] >> (i & 7) & 1)) __builtin_trap();
                want += fits;
            }
            if (want != allowed) __builtin_trap();
        }
        if (at < ok && !lmq_json_matcher_feed(m, doc + at, 1)) __builtin_trap();
    }
    lmq_json_matcher_free(m);
    lmq_json_matcher_free(t);
    lmq_json_vocab_free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t slen = nul ? (size_t)(nul - data) : size;
    const char *doc = nul ? (const char *)nul + 1 : "";
    size_t dlen = nul ? size - slen - 1 : 0;
    lmq_json_schema *s = NULL;
    /* an empty schema part stands for json_object */
    if (lmq_json_schema_compile(slen ? (const char *)data : NULL, slen, NULL, NULL, &s) != LMQ_OK) {
        if (s || !lmq_last_error()[0]) __builtin_trap();
        return 0;
    }
    lmq_json_matcher *a = NULL, *b = NULL;
    if (lmq_json_matcher_new(s, &a) || lmq_json_matcher_new(s, &b)) __builtin_trap();
    size_t ok = 0;
    while (ok < dlen && lmq_json_matcher_feed(b, doc + ok, 1)) ok++;
    bool whole = lmq_json_matcher_feed(a, doc, dlen);
    if (whole != (ok == dlen)) __builtin_trap();
    if (whole && lmq_json_matcher_done(a) != lmq_json_matcher_done(b)) __builtin_trap();
    if (whole && lmq_json_matcher_done(a)) {
        cJSON *j = cJSON_ParseWithLength(doc, dlen);
        if (!j) __builtin_trap();
        cJSON_Delete(j);
    }
    check_masks(s, doc, ok);
    lmq_json_matcher_free(a);
    lmq_json_matcher_free(b);
    lmq_json_schema_free(s);
    return 0;
}
