/* libFuzzer target: GGUF parser (header, metadata, tensor infos, offsets). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = malloc(size + 4);
    if (!buf) return 0;
    memcpy(buf, "GGUF", 4);
    if (size > 4) memcpy(buf + 4, data + 4, size - 4);
    lmq_file *f = NULL;
    if (lmq_file_open_memory(buf, size < 4 ? 4 : size, "fuzz.gguf", &f) == LMQ_OK) {
        for (size_t i = 0; i < lmq_file_n_tensors(f); i++) {
            const lmq_tensor_info *t = lmq_file_tensor(f, i);
            volatile uint8_t sink = 0;
            if (t->nbytes) sink ^= ((const uint8_t *)t->data)[t->nbytes - 1];
            (void)sink;
        }
    }
    lmq_file_close(f);
    free(buf);
    return 0;
}
