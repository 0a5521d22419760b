/* target_calib.h — fitting the per-tensor KLD scale of a size-targeted plan
 * (lmq quantize --target-bpw): tools/ only, it runs the model. */
#ifndef LMQ_TARGET_CALIB_H
#define LMQ_TARGET_CALIB_H

#include "lmq_convert.h"
#include "lmq_eval.h"

/* For every free tensor of t: writes a copy of the float model `in` with
 * only that tensor in its smallest candidate type (next to `work_prefix`;
 * with qo's imatrix, and with error feedback when qo->gptq_factor is set),
 * measures the mean KLD against the float model on the first n_chunks
 * chunks of n_ctx tokens of `text_path` (wiki.test.raw refused), and sets
 * scale = KLD / err of that candidate. Prints one progress line per tensor
 * to stderr unless quiet. */
lmq_status target_calibrate(const char *in, lmq_target_table *t, const lmq_quantize_opts *qo, const char *text_path,
                            int n_chunks, int n_ctx, const char *work_prefix, bool quiet);

/* Tokens of a calibration text (BOS first); refuses wikitext-2's test set,
 * the evaluation text. */
lmq_status calib_tokens(const lmq_model *m, const char *path, int32_t **toks, size_t *n);

/* Escapes a tensor name into an anchored POSIX extended regex. */
void target_name_regex(const char *name, char *out, size_t cap);
#endif
