/* lmq_rt_json.h — section of lmq_runtime.h: constrained decoding to a
 * JSON-schema subset.
 *
 * lmq_json_matcher is a byte-level pushdown matcher compiled from a JSON
 * schema (or "any JSON object"): it accepts exactly the byte strings that are
 * prefixes of a JSON text valid against the schema, written with bounded
 * whitespace (at most LMQ_JSON_MAX_WS bytes at a place where JSON allows it,
 * none before the document or after it).
 *
 * The subset: type (one name or an array of names), properties + required
 * (keys are written in schema order; an optional key may be left out; no key
 * outside properties), objects without properties (any keys), items,
 * minItems/maxItems, enum/const (any JSON values), minLength/maxLength
 * (strings are capped at LMQ_JSON_MAX_STRING code points when no maxLength),
 * integer minimum/maximum/exclusive* (exact), number bounds (exact on integer
 * bounds: no exponent, no fraction at the bound), anyOf of any
 * alternatives (those that can start with the same byte are read in
 * parallel, each reading on its own stack, until the bytes rule them out),
 * oneOf whose alternatives start with different bytes (object, array,
 * string, number, true/false, null: then no value matches two). Annotations
 * (title, description, default, examples, $schema, $id, format,
 * additionalProperties: false, strict) are ignored. Anything else that would
 * change the meaning ($ref, pattern, allOf, not, if/then, patternProperties,
 * uniqueItems, additionalProperties as a schema, multipleOf, oneOf
 * alternatives that start alike) is refused with LMQ_ERR_FORMAT and an
 * lmq_last_error line naming the keyword and its JSON pointer.
 *
 * Memory is bounded: LMQ_JSON_MAX_NODES schema nodes, LMQ_JSON_MAX_DEPTH
 * nesting levels (an "any" value refuses to open past it), 64 properties or
 * enum values per node, LMQ_JSON_MAX_ALTS readings at once (a schema whose
 * alternatives that start alike, nested ones multiplied, could need more is
 * refused at compile time, naming the anyOf). Integers and numbers hold at most 18 digits in their
 * integer part, 18 in their fraction and 3 in their exponent. */
#ifndef LMQ_RT_JSON_H
#define LMQ_RT_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmq_format.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LMQ_JSON_MAX_WS 4
#define LMQ_JSON_MAX_DEPTH 32
#define LMQ_JSON_MAX_NODES 4096
#define LMQ_JSON_MAX_ALTS 32 /* anyOf alternatives read in parallel at once */
#define LMQ_JSON_MAX_STRING 2048
#define LMQ_JSON_MAX_SCHEMA (1u << 20) /* bytes of schema text */

typedef struct lmq_json_schema lmq_json_schema; /* compiled, immutable */
typedef struct lmq_json_matcher lmq_json_matcher; /* one position */

/* Compiles a schema given as JSON text (len bytes). schema_json NULL means
 * "any JSON object" (response_format json_object). prefix/suffix (may be NULL)
 * are literal bytes the output must start and end with (a tool-call wrapper).
 * Errors: LMQ_ERR_FORMAT naming the unsupported or malformed part. */
lmq_status lmq_json_schema_compile(const char *schema_json, size_t len, const char *prefix,
                                   const char *suffix, lmq_json_schema **out);
void lmq_json_schema_free(lmq_json_schema *s); /* NULL ok */

/* A matcher at the start of the document. */
lmq_status lmq_json_matcher_new(const lmq_json_schema *s, lmq_json_matcher **out);
void lmq_json_matcher_free(lmq_json_matcher *m); /* NULL ok */
void lmq_json_matcher_copy(lmq_json_matcher *dst, const lmq_json_matcher *src);
/* Feeds bytes; false (matcher unchanged) if they would leave the language. */
bool lmq_json_matcher_feed(lmq_json_matcher *m, const char *bytes, size_t len);
/* True if the bytes so far are a whole valid document (suffix included). */
bool lmq_json_matcher_done(const lmq_json_matcher *m);

/* The vocabulary as byte strings, sorted once per model (and, for strings,
 * classified once per string sub-state: about 50 ms and 8 MB on 152k tokens)
 * so that a mask costs a walk of the first-byte groups the state accepts, or
 * inside a string a bitset copy and a walk of the tokens holding '"'.
 * pieces[i] may be NULL/empty (never allowed); pieces longer than 128 bytes
 * are never allowed. eos_id (or -1) is allowed exactly when the document is
 * done. */
typedef struct lmq_json_vocab lmq_json_vocab;
lmq_status lmq_json_vocab_new(int32_t n_vocab, const char *const *pieces, const size_t *lens,
                              int32_t eos_id, lmq_json_vocab **out);
void lmq_json_vocab_free(lmq_json_vocab *v); /* NULL ok */
/* Fills mask ((n_vocab + 7) / 8 bytes, bit i of byte i/8 = token i allowed):
 * exactly the tokens whose bytes lmq_json_matcher_feed would accept from m.
 * Returns the number of allowed tokens; 0 is a dead end (the function only
 * reports it: the caller names the error). The vocab holds the walk's
 * scratch: one call at a time per lmq_json_vocab. */
int32_t lmq_json_mask(const lmq_json_vocab *v, const lmq_json_matcher *m, uint8_t *mask);

#ifdef __cplusplus
}
#endif
#endif
