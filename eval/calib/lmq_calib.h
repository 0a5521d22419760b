/* lmq_calib.h — calibration for the quantizer: everything that runs a model
 * over calibration text to decide how to quantize it. Above eval (it runs
 * the perplexity method) and convert (it quantizes tensors), below tools.
 *
 *  - the calibration text: tokens, and the one refusal of the evaluation
 *    text (wikitext-2's test set);
 *  - GPTQ input covariances, collected in one float pass (every matrix at
 *    once) or layer by layer (lmq_gptq_sequential: one block's matrices at
 *    a time, each block fed the quantized output of the blocks before it);
 *  - the per-tensor sensitivity fit of size-targeted plans (KLD per unit
 *    of weighted error), measured by swapping one tensor at a time in the
 *    loaded float model, and the key of its cache.
 *
 * Nothing here prints: long phases report through lmq_calib_progress_fn.
 * Errors are lmq_status with a one-line lmq_last_error(). */
#ifndef LMQ_CALIB_H
#define LMQ_CALIB_H

#include <stdbool.h>
#include <stdint.h>

#include "lmq_convert.h"
#include "lmq_eval.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Progress of a long phase: called with done = 0 when the phase starts,
 * then after each unit (chunk, layer, tensor) with what it was ("blk.3",
 * a tensor name; may be NULL), and once more with done == total at the end.
 * phase: "collect", "gptq", "fit". */
typedef void (*lmq_calib_progress_fn)(void *ctx, const char *phase, int64_t done, int64_t total, const char *what);

/* ---- Calibration text ---------------------------------------------------- */

/* LMQ_ERR_INVALID_ARG when text is wikitext-2's test set (the evaluation
 * text: calibrating on it makes every KLD/PPL figure meaningless), naming
 * `path`; LMQ_OK otherwise. The one copy of that refusal. */
lmq_status lmq_calib_check_text(const char *path, const char *text, size_t len);

/* Reads path (at most 4 GiB), refuses the evaluation text, tokenizes it with
 * the model's vocabulary (BOS first when the vocabulary adds it). *toks is
 * the caller's (free()). LMQ_ERR_UNSUPPORTED for a model without a tokenizer. */
lmq_status lmq_calib_tokens(const lmq_model *m, const char *path, int32_t **toks, size_t *n);

/* ---- Which weights read the same input ----------------------------------- *
 * By tensor kind within a block: q/k/v (and fused qkv, a recurrent layer's
 * in-projections) read the attention norm's output; gate/up, the router and
 * a shared expert's gate/up read the FFN norm's output; every expert's
 * gate/up read its routed rows. Writes the group's key ("blk.3.attn_in")
 * and returns true for a grouped kind; false (key = the name) otherwise. */
bool lmq_calib_input_group(const char *tensor, char *key, size_t cap);

/* ---- GPTQ input covariances ---------------------------------------------- */

typedef struct lmq_gptq_calib lmq_gptq_calib;

/* Layer-by-layer GPTQ: which residual stream block l's covariances come
 * from: the float model's (the default: the one-pass collection's matrices,
 * one pass per block), the quantized blocks' output (each block sees the
 * error of those before it; two passes per block), or both (H = H_float +
 * H_quantized; two streams in memory, three passes). On llama-8m q4_k_m
 * the float stream gave the lowest KLD (docs/QUANT.md). */
typedef enum lmq_gptq_inputs {
    LMQ_GPTQ_INPUTS_FLOAT = 0,
    LMQ_GPTQ_INPUTS_QUANTIZED,
    LMQ_GPTQ_INPUTS_BOTH,
    LMQ_GPTQ_INPUTS_COUNT
} lmq_gptq_inputs;

typedef struct lmq_calib_params {
    int32_t n_ctx;            /* chunk length (default 256) */
    int32_t n_chunks;         /* <= 0: all the text gives */
    int32_t n_threads;        /* 0: all cores */
    uint64_t max_bytes;       /* memory limit for the matrices (and hidden states); 0: none */
    lmq_gptq_inputs gptq_inputs; /* lmq_gptq_sequential's stream (default float) */
    const char *scratch_path; /* the fit's file of float log-probs (removed after); NULL: $TMPDIR or /tmp */
    bool fit_float;           /* lmq_target_calibrate on the weights as loaded; false (default): on a q8_0 copy */
    double fit_rel_se;        /* lmq_target_calibrate measures a tensor chunk by chunk until the standard error
                                 of its mean KLD over chunks is at most this fraction of it (at least 4 chunks,
                                 at most n_chunks); 0: 0.1; < 0: every chunk */
    lmq_calib_progress_fn progress;
    void *progress_ctx;
} lmq_calib_params;

lmq_calib_params lmq_calib_default_params(void);

/* One float pass of the perplexity method over toks, accumulating H = sum
 * x x^T for every weight product's input: one matrix per input group (its
 * members share it after checking that they did read the same rows), one
 * per expert for MoE expert tensors, over the tokens routed to it.
 * LMQ_ERR_LIMIT (naming the bytes and the tensor) when the matrices would
 * exceed p->max_bytes; the pass stops at the first failure. */
lmq_status lmq_gptq_calib_collect(lmq_model *m, const int32_t *toks, size_t n_toks, const lmq_calib_params *p,
                                  lmq_gptq_calib **out);

/* lmq_quantize_opts.gptq_factor over a collection: the factor of the input
 * covariance of tensor (expert: -1, or the expert of a 3-D tensor),
 * computed on first use; NULL when the tensor was not seen, its width
 * differs, or the matrix cannot be factored (listed by
 * lmq_gptq_calib_failures). */
const float *lmq_gptq_calib_factor(void *user, const char *tensor, int32_t expert, int64_t n_cols);

/* The accumulated H (n x n, upper triangle) of a tensor's input, and the
 * tensor whose matrix it is (the group's first member; itself when not
 * shared); NULL when not seen or already factored. For tests and tools. */
const float *lmq_gptq_calib_matrix(const lmq_gptq_calib *g, const char *tensor, int32_t expert, int64_t *n,
                                   const char **owner);
size_t lmq_gptq_calib_count(const lmq_gptq_calib *g);     /* matrices held */
uint64_t lmq_gptq_calib_bytes(const lmq_gptq_calib *g);   /* their bytes */
/* Tensors whose matrix could not be factored (quantized without feedback),
 * as "name: reason" lines, or NULL when none. Owned by g. */
const char *lmq_gptq_calib_failures(const lmq_gptq_calib *g);
void lmq_gptq_calib_free(lmq_gptq_calib *g);

/* ---- Layer-by-layer GPTQ -------------------------------------------------- *
 * Quantizes the float model in_path into out_path as lmq_quantize_model
 * does with qo (mix, pins, imatrix), every GPTQ-capable matrix of the blocks
 * with error feedback from covariances collected block by block: the
 * calibration chunks' residual streams (p->gptq_inputs) go through block l
 * alone; block l's covariances are collected, its tensors quantized (kept in
 * a scratch file next to out_path until the write) and swapped into the
 * model, and the block's output (float, or quantized) becomes block l + 1's
 * input. The output head gets feedback from the
 * final (quantized) stream; the embedding is quantized plainly. Memory: lmq_gptq_sequential_bytes (the hidden
 * states plus one block's matrices) whatever the depth, plus one block's
 * quantized bytes; LMQ_ERR_LIMIT naming the bytes when it exceeds
 * p->max_bytes. Progress phase "gptq", per block. stats may be NULL. */
lmq_status lmq_gptq_sequential(const char *in_path, const char *out_path, const lmq_quantize_opts *qo,
                               const int32_t *toks, size_t n_toks, const lmq_calib_params *p,
                               lmq_quantize_stats *stats);
/* n_chunks x n_ctx x n_embd x 4 (the residual stream; twice for BOTH) + 4 (2 n_embd^2 +
 * (n_head head_dim)^2 + n_ff^2) (one block's covariances: attention input,
 * attention output, FFN input, FFN down). */
uint64_t lmq_gptq_sequential_bytes(const lmq_hparams *hp, int32_t n_ctx, int32_t n_chunks, lmq_gptq_inputs inputs);

/* ---- Size-targeted plans: the sensitivity fit ---------------------------- */

/* For every free tensor of t: quantizes that tensor alone to its smallest
 * candidate type (with qo's imatrix, and error feedback when
 * qo->gptq_factor is set), swaps it into the loaded float model m, measures
 * the mean KLD against the reference model's output on the first
 * p->n_chunks chunks of toks (fewer once its standard error is below
 * p->fit_rel_se; the whole-evaluation fallback for models whose blocks
 * need the tokens uses every chunk), restores the reference tensor and sets
 * scale = KLD / err. The reference is m with every whole float weight it
 * can swap quantized to q8_0 (the quantized kernels run prompts several
 * times faster than the float path; the perturbation is the candidate's
 * against q8_0), or m as loaded with p->fit_float. m's weights are as
 * loaded again on return. Tensors the model cannot swap (experts, fused
 * views) get the mean scale of the others. Progress phase "fit", per
 * tensor. */
lmq_status lmq_target_calibrate(lmq_model *m, lmq_target_table *t, const lmq_quantize_opts *qo, const int32_t *toks,
                                size_t n_toks, const lmq_calib_params *p);

/* The fit's cache key: source id, quantizer version (LMQ_QUANTIZE_VERSION),
 * the fit's method (its reference type, chunk rule, sampled rows),
 * imatrix contents, calibration text hash, chunk count, pins, output and
 * embedding types, GPTQ use. text may be NULL. */
uint64_t lmq_target_cache_key(const lmq_quantize_opts *qo, uint64_t source_id, const char *text, size_t text_len,
                              int chunks);

/* Escapes a tensor name into an anchored POSIX extended regex (an exact-name
 * pin for lmq_mix_override). */
void lmq_target_name_regex(const char *name, char *out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
