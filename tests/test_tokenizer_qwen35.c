/* Qwen3.5's byte-level BPE pre-tokenizer (llama.cpp's "qwen35": Qwen2's
 * regex with \p{M} joined to the letters, SPEC 1.7): a tokenizer.json with
 * that Split regex is recognised as tokenizer.ggml.pre = "qwen35", and a
 * vocabulary named only by tokenizer.ggml.pre (a llama.cpp GGUF) splits a
 * letter + combining mark + letter as one piece, where "qwen2" splits it
 * after the first letter. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_tokenizer_internal.h"
#include "lmq_convert.h"
#include "lmq_runtime.h"
#include "testutil.h"

/* The regex of Qwen3.5's tokenizer.json, JSON-escaped. */
#define QWEN35_RE                                                                                          \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?[\\\\p{L}\\\\p{M}]+|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{M}" \
    "\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+"

/* Byte-level symbols: 'e' 'x', U+0301 = CC 81 -> "\u00cc" "\u0123". */
static const char *JSON =
    "{\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"" QWEN35_RE
    "\"},\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
    "\"trim_offsets\":false,\"use_regex\":false}]},"
    "\"model\":{\"type\":\"BPE\",\"vocab\":{\"e\":0,\"\\u00cc\":1,\"\\u0123\":2,\"\\u00cc\\u0123\":3,"
    "\"e\\u00cc\\u0123\":4,\"x\":5},\"merges\":[\"\\u00cc \\u0123\",\"e \\u00cc\\u0123\"]}}";

static const char TEXT[] = "e\xcc\x81x"; /* e, combining acute accent, x */

static size_t tokens(const lmq_meta *m, int32_t *out, size_t cap)
{
    lmq_vocab *v = NULL;
    size_t n = 0;
    lmq_status s = lmq_vocab_load(m, &v);
    if (!s) s = lmq_tokenize(v, TEXT, strlen(TEXT), false, false, out, cap, &n);
    T_CHECK(s == LMQ_OK, "tokenize: %s", lmq_last_error());
    lmq_vocab_free(v);
    return s ? 0 : n;
}

int main(void)
{
    lmq_meta *m = lmq_meta_new();
    lmq_status s = lmq_tokenizer_json_to_meta(JSON, strlen(JSON), "qwen35.json", m);
    T_CHECK(s == LMQ_OK, "tokenizer.json: %s", lmq_last_error());
    const char *pre = NULL;
    lmq_meta_get_str(m, "tokenizer.ggml.pre", &pre, NULL);
    T_CHECK(pre && !strcmp(pre, "qwen35"), "pre-tokenizer recognised as qwen35 (%s)", pre ? pre : "none");
    int32_t ids[8];
    size_t n = tokens(m, ids, 8);
    T_CHECK(n == 2 && ids[0] == 4 && ids[1] == 5, "with the file's regex: one piece e+U+0301+x -> [4 5] (%zu ids)", n);

    /* as a llama.cpp GGUF has it: the family name only */
    lmq_meta_remove(m, "tokenizer.lmq.pre_regex");
    n = tokens(m, ids, 8);
    T_CHECK(n == 2 && ids[0] == 4 && ids[1] == 5, "pre qwen35: [4 5] (%zu ids)", n);
    lmq_meta_set_str(m, "tokenizer.ggml.pre", "qwen2");
    n = tokens(m, ids, 8);
    T_CHECK(n == 3 && ids[0] == 0 && ids[1] == 3 && ids[2] == 5, "pre qwen2: e | U+0301 x -> [0 3 5] (%zu ids)", n);
    lmq_meta_free(m);
    return t_finish();
}
