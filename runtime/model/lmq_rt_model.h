/* lmq_rt_model.h — section of lmq_runtime.h: the model (every family of
 * formats/arch.c: Llama, Qwen2/3, Qwen3.5, Gemma 2/3, Phi-3, their MoE
 * variants), its evaluation context (KV cache, recurrent state, scratch),
 * and the sampler.
 *
 * API stability: lmq_hparams is frozen (its fields keep their meaning and
 * place). Hyper-parameters that only some families have live inside the
 * model and are reached through functions (lmq_model_layer_kind,
 * lmq_model_state_bytes, ...); a family that needs a new one adds a
 * function, never a field.
 *
 * Ownership: a model owns its lmq_file (mmapped weights) and vocab; a context
 * borrows the model (free contexts before the model). Nothing in the token
 * loop allocates: every buffer is sized in lmq_context_new(). */
#ifndef LMQ_RT_MODEL_H
#define LMQ_RT_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "lmq_format.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lmq_vocab lmq_vocab;

/* ---------------------------------------------------------------- model */

typedef enum lmq_rope_layout {
    LMQ_ROPE_NEOX = 0,   /* pairs (i, i + d/2): Hugging Face rows as stored */
    LMQ_ROPE_NORMAL = 1, /* pairs (2i, 2i+1): llama.cpp's GGUF (rows permuted) */
} lmq_rope_layout;

typedef struct lmq_hparams {
    int32_t n_vocab;
    int32_t n_embd;     /* hidden size */
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t head_dim;
    int32_t n_ff;       /* MLP hidden size */
    int32_t n_ctx_train;
    int32_t n_rot;      /* rotary dimensions (== head_dim unless metadata says) */
    float rms_eps;
    float rope_theta;
    lmq_rope_layout rope_layout;
    /* rope scaling: type 0 none, 1 linear, 2 llama3 */
    int32_t rope_scaling_type;
    float rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int32_t rope_orig_ctx;
    bool tied_embeddings;
    /* family features (formats/arch.c; docs/MODELS.md) */
    int32_t arch;          /* lmq_arch_id */
    int32_t act;           /* lmq_act: 0 silu (SwiGLU), 1 tanh-GELU (GeGLU) */
    float attn_scale;      /* query scale (1/sqrt(head_dim) unless the family says otherwise) */
    float attn_softcap;    /* scores = c * tanh(scores / c) after scaling; 0: off */
    float final_softcap;   /* logits = c * tanh(logits / c); 0: off */
    float embd_scale;      /* embeddings multiplied by this (Gemma: sqrt(n_embd)); 1 otherwise */
    int32_t n_swa;         /* sliding window in keys, the current one included; 0: none */
    int32_t n_swa_layers;  /* layers that use it */
    float rope_theta_swa;  /* RoPE base of sliding-window layers */
    bool swa_rope_unscaled;/* sliding-window layers ignore rope scaling (Gemma 3) */
    float rope_attn_factor;/* multiplies RoPE's cos and sin (LongRoPE's attention factor); 1 */
    bool longrope;         /* rope_factors_long/short present */
    /* mixture of experts (0 experts: dense) */
    int32_t n_expert, n_expert_used, n_ff_exp;
    int32_t n_ff_shexp;    /* shared expert width (0: none) */
    int32_t n_moe_layers;  /* layers whose FFN is the experts */
    bool moe_norm;         /* the selected experts' weights renormalised to sum 1 */
} lmq_hparams;

typedef struct lmq_model lmq_model;

/* Loads a .lmq or .gguf file: hyper-parameters from metadata, every tensor
 * checked for presence, type and shape (an error names the tensor), and the
 * tokenizer. Weights stay in the read-only mapping. */
lmq_status lmq_model_load(const char *path, lmq_model **out);
void lmq_model_free(lmq_model *m);
const lmq_hparams *lmq_model_hparams(const lmq_model *m);
const lmq_vocab *lmq_model_vocab(const lmq_model *m); /* NULL when the file has no tokenizer */
const lmq_file *lmq_model_file(const lmq_model *m);
uint64_t lmq_model_n_params(const lmq_model *m);
uint64_t lmq_model_weight_bytes(const lmq_model *m);
/* Short description of the type mix, e.g. "q4_K:97 q6_K:17 f32:17". */
const char *lmq_model_type_summary(const lmq_model *m);
/* The chat template from metadata (NULL if none). */
const char *lmq_model_chat_template(const lmq_model *m);

typedef enum lmq_layer_kind {
    LMQ_LAYER_ATTN = 0,      /* attention over every earlier token */
    LMQ_LAYER_ATTN_SWA,      /* sliding-window attention */
    LMQ_LAYER_RECURRENT,     /* Gated DeltaNet: a fixed-size state per sequence, no KV cache */
    LMQ_LAYER_KIND_COUNT
} lmq_layer_kind;
/* Kind of layer il (LMQ_LAYER_KIND_COUNT when il is out of range). */
lmq_layer_kind lmq_model_layer_kind(const lmq_model *m, int32_t il);
/* Bytes of recurrent state one sequence needs (f32; 0 without recurrent
 * layers): per recurrent layer (K-1) C conv values + nv dk dv. */
uint64_t lmq_model_state_bytes(const lmq_model *m);

/* ---------------------------------------------------------------- context */

typedef struct lmq_context_params {
    int32_t n_ctx;     /* KV cache length in tokens (0: min(training context, 4096)) */
    int32_t n_batch;   /* largest batch lmq_eval accepts (0: 512) */
    int32_t n_threads; /* 0: all cores */
    lmq_type kv_type;  /* LMQ_TYPE_F16 (default), LMQ_TYPE_F32 or LMQ_TYPE_Q8_0 (head size a multiple of 32) */
    int32_t n_logits;  /* rows of logits kept per eval (0: n_batch) */
    int32_t n_state_snapshots; /* recurrent models: copies of the state kept for rewinds (0: 4, < 0: none,
                                * at most LMQ_MAX_STATE_SNAPSHOTS) */
} lmq_context_params;

#define LMQ_MAX_STATE_SNAPSHOTS 64

lmq_context_params lmq_context_default_params(void);

typedef struct lmq_context lmq_context;

/* LMQ_ERR_INVALID_ARG for a KV cache type other than f16, f32 and q8_0 or
 * more than LMQ_MAX_STATE_SNAPSHOTS snapshots,
 * LMQ_ERR_UNSUPPORTED for q8_0 with a head size that is not a multiple of 32,
 * LMQ_ERR_NOMEM when the buffers do not fit; *out is NULL on failure. */
lmq_status lmq_context_new(lmq_model *m, const lmq_context_params *p, lmq_context **out);
void lmq_context_free(lmq_context *c);
int32_t lmq_context_n_ctx(const lmq_context *c);
int32_t lmq_context_n_batch(const lmq_context *c);

/* Evaluates n tokens at positions n_past .. n_past+n-1 (n_past = tokens
 * already in the cache), appending their keys and values to the cache.
 * Logits are computed for the last `n_logits` tokens of the batch
 * (1 for generation; up to the context's n_logits). LMQ_ERR_LIMIT (with a
 * message) when the cache or batch would overflow; the cache is unchanged. */
lmq_status lmq_eval(lmq_context *c, const int32_t *tokens, int32_t n, int32_t n_logits);
/* Logits row i (0 = first of the last n_logits tokens of the latest eval). */
const float *lmq_logits(const lmq_context *c, int32_t i);
/* Tokens currently in the cache. */
int32_t lmq_n_past(const lmq_context *c);
/* Forgets cache entries from position `pos` on (0 clears the cache). A
 * sliding-window layer keeps only the last window (+ a batch) of keys in a
 * ring; when it no longer holds the keys that position `pos` needs, the
 * cache is cleared instead: lmq_n_past() then tells where to resume. */
lmq_status lmq_kv_truncate(lmq_context *c, int32_t pos);
/* Recurrent layers (Qwen3.5) keep a state that cannot be rewound. The
 * context keeps snapshots of it: taken before every batch of more than one
 * token that continues a sequence (a turn boundary) and after it (the end
 * of a prompt), and by lmq_state_checkpoint(); the n_state_snapshots
 * newest positions are kept. lmq_kv_truncate(pos) restores the newest
 * snapshot at or before pos, or restarts the sequence at 0; lmq_n_past()
 * then tells where to resume (a rewind costs re-evaluating pos - n_past
 * tokens). */
lmq_status lmq_state_checkpoint(lmq_context *c);
/* Bytes of one sequence's recurrent state (lmq_model_state_bytes). */
size_t lmq_context_state_bytes(const lmq_context *c);

/* Activation observer (lmq imatrix): called, on the calling thread, with
 * the input of every weight-matrix product before it runs: the weight's
 * tensor name, n_tok rows of n_in floats (row-major), and the expert index
 * (-1 for dense weights; for expert tensors, only the rows routed to that
 * expert). The rows are valid only during the call. NULL removes it. */
typedef void (*lmq_matmul_observer)(void *user, const char *tensor, int32_t expert, const float *x, int32_t n_tok,
                                    int64_t n_in);
void lmq_context_set_observer(lmq_context *c, lmq_matmul_observer fn, void *user);

/* Runs only blocks [il0, il1) over n tokens at positions n_past.. (as
 * lmq_eval, KV cache included; no logits): the residual stream comes from
 * `tokens`' embeddings, or from x (n x n_embd floats) when tokens is NULL,
 * and the stream after block il1 - 1 is written to x. il0 == il1 with
 * tokens: the embeddings; il0 == il1 == n_layer without tokens: the final
 * norm and the output head over x, all n rows' logits (lmq_logits; the
 * context must keep n). For calibration one block at a time (the
 * activation observer sees that block's products). */
lmq_status lmq_eval_layers(lmq_context *c, const int32_t *tokens, float *x, int32_t n, int32_t il0, int32_t il1);

/* Points the 2-D weight `name` at `data`: rows of `type` (n_out rows of
 * lmq_row_size(type, n_in) bytes), owned by the caller and valid while the
 * model uses them; data NULL restores the file's tensor. For calibration:
 * one tensor measured in another type without writing a model (contexts
 * see the change on their next eval; not while one runs). The token
 * embedding (a lookup) swaps too; a tied output head swaps the embedding
 * rows with it. LMQ_ERR_UNSUPPORTED for a tensor that
 * is absent, a view of a fused tensor or stacked experts, or a type the
 * kernels lack. A repacked copy of the old rows is dropped (a restored
 * tensor runs unpacked). */
lmq_status lmq_model_swap_weight(lmq_model *m, const char *name, lmq_type type, const void *data);

/* ---------------------------------------------------------------- sampler */

typedef struct lmq_sampler_params {
    float temperature;       /* <= 0: greedy */
    int32_t top_k;           /* <= 0: off */
    float top_p;             /* >= 1: off */
    float min_p;             /* <= 0: off */
    float repeat_penalty;    /* 1: off (llama.cpp semantics: divide positive logits) */
    float frequency_penalty; /* 0: off */
    float presence_penalty;  /* 0: off */
    int32_t penalty_last_n;  /* window of recent tokens for penalties (64) */
    uint64_t seed;
    /* chain order, one letter per stage: r = repetition/frequency/presence
     * penalties, k = top-k, p = top-p, m = min-p, t = temperature; then a
     * token is drawn. Default "rkpmt" (llama.cpp's default order). */
    char order[16];
} lmq_sampler_params;

lmq_sampler_params lmq_sampler_default_params(void);

typedef struct lmq_sampler lmq_sampler;
lmq_status lmq_sampler_new(const lmq_sampler_params *p, int32_t n_vocab, lmq_sampler **out);
void lmq_sampler_free(lmq_sampler *s);
/* Picks the next token from a row of logits (not modified). */
int32_t lmq_sampler_sample(lmq_sampler *s, const float *logits);
/* Records a token in the penalty window (call for prompt and output tokens). */
void lmq_sampler_accept(lmq_sampler *s, int32_t token);
void lmq_sampler_reset(lmq_sampler *s);

#ifdef __cplusplus
}
#endif
#endif
