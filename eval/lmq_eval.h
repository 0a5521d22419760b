/* lmq_eval.h — the eval module: perplexity with llama.cpp's method, and KL
 * divergence of a (quantized) model against saved base-model log-probs.
 *
 * Method (identical to llama-perplexity): the text is tokenized once; chunk i
 * is tokens [i*c, (i+1)*c); its first token is replaced by BOS when the vocab
 * adds BOS; it is evaluated with an empty KV cache, and only tokens at
 * positions c/2+1 .. c-1 are scored, each from the logits of the position
 * before it. PPL = exp(mean NLL); the +/- is ppl * stddev(NLL)/sqrt(N-1). */
#ifndef LMQ_EVAL_H
#define LMQ_EVAL_H
/* liblmq exports what its public headers declare, nothing else (docs/API.md) */
#pragma GCC visibility push(default)

#include <stdbool.h>
#include <stdint.h>

#include "lmq_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lmq_kld_stats {
    int64_t n;                 /* scored tokens */
    double ppl_base, ppl_base_err;
    double ln_ppl_ratio, ln_ppl_ratio_err;
    double kld_mean, kld_err;
    double kld_max, kld_p999, kld_p99, kld_p90, kld_median, kld_p10, kld_p5, kld_p1, kld_min;
    double dp_mean, dp_err, dp_rms;    /* delta p of the correct token, in percent */
    double dp_max, dp_p999, dp_p99, dp_p95, dp_p90, dp_p75, dp_median, dp_p25, dp_p10, dp_p5, dp_p1,
        dp_p01, dp_min;
    double same_top_pct, same_top_err;
} lmq_kld_stats;

typedef struct lmq_ppl_result {
    double ppl, ppl_err;
    int32_t n_chunks;
    int64_t n_scored;
    int64_t n_tokens_evaluated;
    double seconds;
    bool has_kld;
    lmq_kld_stats kld;
    uint64_t logits_bytes;       /* bytes written by save_logits */
    uint64_t logits_bytes_llama; /* what llama.cpp's layout would take */
} lmq_ppl_result;

/* Called after each chunk with the running PPL (for the [i]ppl line and the
 * progress display). */
typedef void (*lmq_ppl_chunk_fn)(void *ctx, int32_t chunk, int32_t n_chunks, double running_ppl);

/* Sees the input of every weight product before it runs (the runtime's
 * lmq_matmul_observer: the weight's tensor name, the expert or -1, n_tok rows
 * of n_in floats valid during the call). A non-zero status stops the pass:
 * lmq_perplexity returns it, with the observer's last error message, after
 * the batch in which it happened; the observer is not called again. */
typedef lmq_status (*lmq_ppl_observer)(void *user, const char *tensor, int32_t expert, const float *x, int32_t n_tok,
                                       int64_t n_in);

typedef struct lmq_ppl_params {
    int32_t n_ctx;             /* chunk length c (default 512) */
    int32_t n_batch;           /* tokens per eval call, <= 0 or > c: c (one batch per chunk) */
    int32_t n_chunks;          /* <= 0: all */
    int32_t n_threads;         /* 0: all cores */
    lmq_type kv_type;          /* default f16, as llama.cpp */
    const char *save_logits;   /* write base log-probs here (NULL: no) */
    const char *kld_base;      /* compare against this logits file (NULL: no) */
    lmq_ppl_chunk_fn on_chunk;
    void *cb_ctx;
    lmq_ppl_observer observer;    /* sees every weight product's input (NULL: none) */
    void *observer_user;
} lmq_ppl_params;

lmq_ppl_params lmq_ppl_default_params(void);

/* Runs the method on already tokenized text (tokens as the model's tokenizer
 * produced them, BOS included if the vocab adds it). Needs at least 2*c
 * tokens (LMQ_ERR_INVALID_ARG otherwise, with the counts in the message). */
lmq_status lmq_perplexity(lmq_model *m, const int32_t *tokens, int64_t n_tokens, const lmq_ppl_params *p,
                          lmq_ppl_result *r);

/* Importance matrix (lmq imatrix): runs the perplexity method over the
 * calibration tokens (same chunking, BOS substitution and running PPL) and
 * adds, for every blk.* weight product (and output.weight /
 * a tied token_embd.weight when process_output), the squared input
 * activations of every evaluated token to `im` (per expert for MoE weights,
 * only the tokens routed to it). Sets im's chunk count and size (added to
 * what it holds). r (may be NULL) receives the perplexity result. */
typedef struct lmq_imatrix_params {
    int32_t n_ctx;        /* chunk length (default 512) */
    int32_t n_chunks;     /* <= 0: all */
    int32_t n_threads;    /* 0: all cores */
    bool process_output;  /* also the output head (llama-imatrix --process-output) */
    lmq_ppl_chunk_fn on_chunk;
    void *cb_ctx;
} lmq_imatrix_params;

lmq_status lmq_imatrix_collect(lmq_model *m, const int32_t *tokens, int64_t n_tokens, const lmq_imatrix_params *p,
                               lmq_imatrix *im, lmq_ppl_result *r);

/* The scoring primitive, exposed for tests: log-softmax of `logits` at
 * `token` (float max, double sum as llama.cpp). */
double lmq_log_softmax_at(const float *logits, int32_t n_vocab, int32_t token);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif
