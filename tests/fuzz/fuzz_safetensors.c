/* libFuzzer target: safetensors header parser (length field, JSON, dtypes,
 * shapes, offsets, overlaps) over an in-memory file. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* an exact-size copy so that any read past the end is caught by ASan */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    if (size) memcpy(buf, data, size);
    size_t n = 0;
    lmq_safetensors_check_memory(buf, size, "fuzz.safetensors", &n);
    free(buf);
    return 0;
}
