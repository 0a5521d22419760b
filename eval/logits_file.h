/* Private: the base log-probability file written by --save-logits and read
 * by --kl-divergence (format in docs/EVAL.md). */
#ifndef LMQ_LOGITS_FILE_H
#define LMQ_LOGITS_FILE_H
#include <stdio.h>

#include "lmq_eval.h"

typedef struct lmq_logits_header {
    uint32_t n_vocab, n_ctx, n_chunks, n_scored; /* n_scored per chunk */
    uint64_t vocab_hash;  /* XXH3 over the tokenizer's token strings */
    uint64_t tokens_hash; /* XXH3 of the evaluated tokens (n_chunks * n_ctx int32) */
    uint64_t model_id;    /* lmq_file_id of the base model (informational) */
} lmq_logits_header;

typedef struct lmq_logits_file {
    FILE *f;
    char path[4096];
    char tmp[4200];
    bool writing;
    uint32_t version; /* of the file being read */
    lmq_logits_header h;
    uint16_t *raw;   /* (n_scored * n_vocab) one chunk, encoded */
    uint8_t *plane;  /* byte-shuffled copy */
    void *z;         /* compressed chunk */
    size_t zcap;
    uint64_t bytes;
} lmq_logits_file;

/* Version 1 stored log-probs as uint16 q = round(-lp * 2048) (clamped at
 * -32 nats). Version 2 spends the resolution where the probability mass is:
 * x = -lp in nats is coded with a step of 1/2048 below 8 nats (p > 3.4e-4),
 * 1/256 from 8 to 16 nats and 1/32 beyond (p < 1.1e-7, up to 1488 nats);
 * a token's contribution to KL divergence is weighted by its probability, so
 * the coarser steps cost nothing measurable and the file shrinks by ~20%. */
#define LMQ_LOGITS_STEP (1.0 / 2048.0)
#define LMQ_LOGITS_T1 8.0
#define LMQ_LOGITS_T2 16.0
#define LMQ_LOGITS_S1 2048.0
#define LMQ_LOGITS_S2 256.0
#define LMQ_LOGITS_S3 32.0
#define LMQ_LOGITS_C1 16384 /* T1 * S1 */
#define LMQ_LOGITS_C2 18432 /* C1 + (T2 - T1) * S2 */
uint16_t lmq_logits_encode(double neg_lp);
double lmq_logits_decode(uint16_t q);

lmq_status lmq_logits_create(lmq_logits_file *lf, const char *path, const lmq_logits_header *h);
lmq_status lmq_logits_write_chunk(lmq_logits_file *lf, const float *logits /* n_scored x n_vocab */);
lmq_status lmq_logits_finish(lmq_logits_file *lf);
lmq_status lmq_logits_open(lmq_logits_file *lf, const char *path);
/* Decodes the next chunk into lp (n_scored x n_vocab log-probs). */
lmq_status lmq_logits_read_chunk(lmq_logits_file *lf, float *lp);
void lmq_logits_close(lmq_logits_file *lf); /* removes a temp file if not finished */
#endif
