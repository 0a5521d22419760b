/* lmq_convert.h — the convert module: Hugging Face model directories (and,
 * later, GGUF files) to .lmq containers, and the metadata mapping they share.
 * All metadata uses GGUF key names (general.*, llama.*, tokenizer.ggml.*),
 * so that a container alone is enough to run the model. */
#ifndef LMQ_CONVERT_H
#define LMQ_CONVERT_H

#include <stdbool.h>
#include <stdint.h>

#include "lmq_format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- tokenizer files -> tokenizer.* metadata ---------------------------
 * Reads the tokenizer of a Hugging Face directory: tokenizer.json if present
 * (BPE vocab, merges, added tokens, pre-tokenizer/normalizer description),
 * else tokenizer.model (SentencePiece protobuf), plus tokenizer_config.json
 * (chat_template, add_bos_token/add_eos_token, special tokens) and writes
 * GGUF-named keys into `meta`:
 *   tokenizer.ggml.model ("llama" = SentencePiece, "gpt2" = byte-level BPE),
 *   tokenizer.ggml.pre, tokenizer.ggml.tokens / scores / token_type / merges,
 *   tokenizer.ggml.bos_token_id / eos_token_id / unknown_token_id / padding_token_id,
 *   tokenizer.ggml.add_bos_token / add_eos_token, tokenizer.chat_template,
 *   and lmq's own tokenizer.lmq.* keys where GGUF has no name (documented in
 *   docs/FORMAT.md). */
lmq_status lmq_hf_tokenizer_to_meta(const char *dir, lmq_meta *meta);

/* ---- Hugging Face directory -> .lmq ------------------------------------ */

typedef void (*lmq_progress_fn)(void *ctx, uint64_t done, uint64_t total);

typedef struct lmq_convert_opts {
    lmq_type out_type;      /* F32, F16 or BF16 for 2-D weights; norms stay F32 */
    lmq_codec codec;        /* LMQ_CODEC_NONE or LMQ_CODEC_ZSTD */
    int n_threads;
    lmq_progress_fn progress; /* may be NULL; called with bytes done/total */
    void *progress_ctx;
} lmq_convert_opts;

typedef struct lmq_convert_stats {
    uint64_t n_tensors;
    uint64_t n_params;
    uint64_t bytes_written;
    double seconds;
} lmq_convert_stats;

/* Reads config.json into llama.* / general.* keys. */
lmq_status lmq_hf_config_to_meta(const char *dir, lmq_meta *meta);
/* Maps an HF tensor name to its GGUF-style name ("model.layers.3.self_attn.q_proj.weight"
 * -> "blk.3.attn_q.weight"); returns false for names lmq does not use
 * (e.g. rotary inv_freq). */
bool lmq_hf_tensor_name(const char *hf_name, char *out, size_t cap);
lmq_status lmq_convert_hf(const char *dir, const char *out_path,
                          const lmq_convert_opts *opts, lmq_convert_stats *stats);

#ifdef __cplusplus
}
#endif
#endif
