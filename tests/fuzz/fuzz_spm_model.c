/* libFuzzer target: SentencePiece tokenizer.model (protobuf) reader, and the
 * vocabulary and tokenizer built from whatever it accepts (the input bytes
 * are tokenized and detokenized too). */
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
    if (lmq_spm_model_to_meta(data, size, "fuzz.model", m) == LMQ_OK && lmq_vocab_load(m, &v) == LMQ_OK) {
        static const char text[] = "Hello world! <s> \xe2\x96\x81 \xff\xc3 \xf0\x9f\xa6\x99\n  end</s>";
        for (int parse = 0; parse < 2; parse++) {
            int32_t *ids = NULL;
            size_t n = 0;
            const char *t = parse ? (const char *)data : text;
            size_t tl = parse ? (size > 4096 ? 4096 : size) : sizeof text - 1;
            if (lmq_tokenize_alloc(v, t, tl, true, parse != 0, &ids, &n) == LMQ_OK) {
                char *back = NULL;
                size_t bl = 0;
                if (lmq_detokenize_alloc(v, ids, n, true, true, &back, &bl) == LMQ_OK) free(back);
                lmq_detok_stream st;
                lmq_detok_stream_init(&st, v, true, true);
                char *buf = malloc(lmq_vocab_max_piece_len(v) + 8);
                for (size_t i = 0; buf && i < n; i++) {
                    size_t k;
                    lmq_detok_stream_push(&st, ids[i], buf, lmq_vocab_max_piece_len(v) + 8, &k);
                }
                free(buf);
            }
            free(ids);
        }
    }
    lmq_vocab_free(v);
    lmq_meta_free(m);
    return 0;
}
