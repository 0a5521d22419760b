/* libFuzzer target: the --save-logits / --kl-divergence file reader
 * (eval/logits_file.c): header checks, chunk lengths, zstd frames. The input
 * goes through a memfd so the reader's own FILE* path is exercised. Headers
 * asking for more than 2^22 log-probs per chunk are only opened, not read
 * (the reader's buffers are sized from the header, bounded at 2^31 values). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../eval/logits_file.h"

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size >= 24 && (uint64_t)rd32(data + 8) * rd32(data + 20) > (1u << 22)) return 0;
    int fd = memfd_create("fuzz_logits", 0);
    if (fd < 0) return 0;
    if (size && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    lmq_logits_file lf;
    if (lmq_logits_open(&lf, path) == LMQ_OK) {
        float *lp = malloc(sizeof(float) * (size_t)lf.h.n_scored * lf.h.n_vocab + 1);
        for (uint32_t c = 0; lp && c < lf.h.n_chunks && c < 8; c++)
            if (lmq_logits_read_chunk(&lf, lp) != LMQ_OK) break;
        free(lp);
    }
    lmq_logits_close(&lf);
    close(fd);
    return 0;
}
