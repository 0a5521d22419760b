/* gptq_calib.h — the input covariances behind `lmq quantize --gptq`: the
 * float model runs over calibration text and every 2-D weight product's
 * input is accumulated into H = sum x x^T (tools/ only, it runs the model). */
#ifndef LMQ_GPTQ_CALIB_H
#define LMQ_GPTQ_CALIB_H

#include "lmq_convert.h"

typedef struct gptq_calib gptq_calib;

/* Runs `in` over the first n_chunks chunks of n_ctx tokens of text_path
 * (wikitext-2's test set refused). Tensors that read the same input one
 * after the other (q/k/v, gate/up) share one H; MoE expert tensors get one
 * per expert, over the tokens routed to it. Refuses (LMQ_ERR_LIMIT) when
 * the matrices would take more than max_bytes. Progress to stderr unless
 * quiet. */
lmq_status gptq_calib_collect(const char *in, const char *text_path, int n_chunks, int n_ctx, int n_threads,
                              uint64_t max_bytes, bool quiet, gptq_calib **out);

/* lmq_quantize_opts.gptq_factor: the factor of the input covariance of
 * tensor (expert: -1, or the expert of a 3-D tensor), computed on first
 * use; NULL when it was not seen, its width differs, or the matrix cannot
 * be factored (one warning line). */
const float *gptq_calib_factor(void *user, const char *tensor, int32_t expert, int64_t n_cols);

void gptq_calib_free(gptq_calib *g);
#endif
