/* libFuzzer target: tokenizer.json reader (vocab, merges, added tokens,
 * pre-tokenizer regexes, normalizer), and the byte-level BPE tokenizer built
 * from whatever it accepts (user-supplied regexes compiled by PCRE2). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hf_tokenizer_internal.h"
#include "lmq_runtime.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lmq_meta *m = lmq_meta_new();
    if (!m) return 0;
    lmq_vocab *v = NULL;
    if (lmq_tokenizer_json_to_meta((const char *)data, size, "fuzz.json", m) == LMQ_OK &&
        lmq_vocab_load(m, &v) == LMQ_OK) {
        static const char *const texts[] = {"Hello world! 123 <|endoftext|>", "e\xcc\x81 \xff\xfe \xe4\xb8\x80\n\n  x",
                                            ""};
        for (int i = 0; i < 3; i++) {
            int32_t *ids = NULL;
            size_t n = 0;
            if (lmq_tokenize_alloc(v, texts[i], strlen(texts[i]), true, i == 0, &ids, &n) == LMQ_OK) {
                char *back = NULL;
                size_t bl = 0;
                if (lmq_detokenize_alloc(v, ids, n, false, true, &back, &bl) == LMQ_OK) free(back);
            }
            free(ids);
        }
    }
    lmq_vocab_free(v);
    lmq_meta_free(m);
    return 0;
}
