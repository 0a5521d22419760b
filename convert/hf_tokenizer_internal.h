/* hf_tokenizer_internal.h — entry points of convert/hf_tokenizer.c below
 * lmq_hf_tokenizer_to_meta, for the fuzz targets and tests. Not installed. */
#ifndef LMQ_HF_TOKENIZER_INTERNAL_H
#define LMQ_HF_TOKENIZER_INTERNAL_H

#include <stddef.h>

#include "lmq_format.h"

/* A SentencePiece tokenizer.model (protobuf ModelProto) in memory ->
 * tokenizer.ggml.model "llama", tokens, scores, token_type, the special ids
 * of its trainer spec, tokenizer.ggml.add_space_prefix and
 * tokenizer.lmq.byte_fallback. `name` names the buffer in errors. Bounded:
 * every length is checked against `len`; never reads outside buf. */
lmq_status lmq_spm_model_to_meta(const void *buf, size_t len, const char *name, lmq_meta *meta);

/* A tokenizer.json in memory (byte-level BPE model) -> tokenizer.ggml.model
 * "gpt2", tokens, token_type, merges, tokenizer.ggml.pre, and the
 * tokenizer.lmq.* keys (pre_regex, ignore_merges, normalizer, strip ids).
 * LMQ_ERR_UNSUPPORTED for models, pre-tokenizers or normalizers lmq cannot
 * reproduce, naming the JSON key. */
lmq_status lmq_tokenizer_json_to_meta(const char *json, size_t len, const char *name, lmq_meta *meta);

#endif
