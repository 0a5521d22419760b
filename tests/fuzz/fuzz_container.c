/* libFuzzer target: .lmq container parser (header, metadata, directory,
 * zstd tensors) and checksum verification. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* force the .lmq path whatever the first bytes are */
    uint8_t *buf = malloc(size + 4);
    if (!buf) return 0;
    memcpy(buf, "LMQF", 4);
    if (size > 4) memcpy(buf + 4, data + 4, size - 4);
    lmq_file *f = NULL;
    if (lmq_file_open_memory(buf, size < 4 ? 4 : size, "fuzz.lmq", &f) == LMQ_OK) {
        size_t bad;
        lmq_file_verify(f, 1, &bad, NULL);
        const lmq_meta *m = lmq_file_meta(f);
        for (size_t i = 0; i < lmq_meta_count(m); i++) (void)lmq_meta_value(m, i);
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
