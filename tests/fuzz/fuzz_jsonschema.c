/* libFuzzer target: the JSON-schema matcher (runtime/text/jsonschema.c).
 * The input is a schema, a NUL byte, and a document. A schema that does not
 * compile must leave an error message; one that does is fed the document
 * whole and byte by byte (the two must agree on how far it is accepted and
 * whether it is done), and an accepted, done document must parse as JSON.
 * Any disagreement traps. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "lmq_runtime.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
    lmq_json_matcher_free(a);
    lmq_json_matcher_free(b);
    lmq_json_schema_free(s);
    return 0;
}
