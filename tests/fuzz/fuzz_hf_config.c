/* libFuzzer target: Hugging Face config.json -> metadata mapping. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_convert.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    if (size) memcpy(buf, data, size);
    lmq_meta *m = lmq_meta_new();
    if (m) lmq_hf_config_parse(buf, size, "fuzz/config.json", "fuzz", m);
    lmq_meta_free(m);
    free(buf);
    return 0;
}
