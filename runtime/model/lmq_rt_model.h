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
/* liblmq exports what its public headers declare, nothing else (docs/API.md) */
#pragma GCC visibility push(default)

#include <stdbool.h>
#include <stdint.h>

#include "lmq_format.h"
#include "lmq_rt_json.h"
#include "lmq_rt_kernels.h"

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

/* Load-time settings (lmq_model_load uses lmq_model_default_params()). */
typedef struct lmq_model_params {
    /* Repack the weights the ISA (`isa` below) has 16-row interleaved
     * kernels for (docs/PERF.md): 1 or -1 (default) yes, 0 no (the CLI
     * passes 0 when the environment says LMQ_REPACK=0). The copies are used
     * by contexts evaluating with that ISA (lmq_model_repack_isa); under
     * another one (a context's own isa, lmq_isa_force) the mapped rows
     * serve, slower but exact. */
    int32_t repack;
    int32_t n_threads;  /* threads for repacking (0: all cores) */
    /* The ISA (an lmq_isa) whose layout the weights are repacked for; -1
     * (default): the process-wide one (lmq_isa_active) at load time.
     * LMQ_ERR_UNSUPPORTED when this build or CPU lacks it. */
    int32_t isa;
} lmq_model_params;

lmq_model_params lmq_model_default_params(void);
/* LMQ_ERR_INVALID_ARG for settings out of range; otherwise as lmq_model_load. */
lmq_status lmq_model_load_params(const char *path, const lmq_model_params *p, lmq_model **out);
/* The ISA the model's repacked weights are laid out for, LMQ_ISA_COUNT when
 * none are repacked. */
lmq_isa lmq_model_repack_isa(const lmq_model *m);
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
    /* Kernel settings of this context alone; -1 (default): the process-wide
     * ones (lmq_isa_force, lmq_gemm_mode_set; the CLI sets them from
     * LMQ_ISA / LMQ_GEMM) as they are at each lmq_eval. isa: an lmq_isa this build
     * and CPU support (LMQ_ERR_UNSUPPORTED otherwise); the model's repacked
     * weights serve only when it is the ISA they were made for
     * (lmq_model_repack_isa), the mapped rows otherwise. gemm: an
     * lmq_gemm_mode. Contexts with different settings may run at once. */
    int32_t isa;
    int32_t gemm;
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
/* The model the context evaluates (borrowed). */
const lmq_model *lmq_context_model(const lmq_context *c);

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
 * kernels lack. A repacked copy of the old rows is dropped; when the model
 * was loaded with repacking, the caller's rows are repacked as the loader
 * would have (so a measurement runs the kernels a file of that type runs:
 * on AVX2 an unpacked q8_0 batch takes float activations, a repacked one
 * q8_0 ones; the copy costs the rows' size again), and a restored tensor
 * runs unpacked. */
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

/* Constrained decoding: mask is NULL (no constraint) or (n_vocab + 7) / 8
 * bytes, bit (id & 7) of byte id >> 3 set when token id is allowed; the
 * disallowed tokens get -inf before every stage of the chain. The sampler
 * keeps the pointer (not a copy): the caller updates the bits between
 * samples and keeps them alive. With every token masked the draw returns
 * some token anyway: the caller checks that at least one bit is set. */
void lmq_sampler_set_mask(lmq_sampler *s, const uint8_t *mask);

/* Log-probabilities (OpenAI's `logprobs`/`top_logprobs`): after
 * lmq_sampler_set_logprobs(s, n) with 0 <= n <= LMQ_SAMPLER_MAX_TOP_LOGPROBS,
 * each sample also records the log-probability of the chosen token and of
 * the n most likely tokens (best first, ties by lower id) under the model's
 * distribution: log-softmax of the raw logits, before penalties, mask,
 * truncation and temperature. n < 0 turns it off (the default). */
#define LMQ_SAMPLER_MAX_TOP_LOGPROBS 20
typedef struct lmq_token_logprob {
    int32_t id;
    float logprob;
} lmq_token_logprob;
lmq_status lmq_sampler_set_logprobs(lmq_sampler *s, int32_t n_top);
/* The last sample's figures: *chosen, top[0..*n_top) (top has room for the
 * n set). false when recording is off or nothing was sampled since. */
bool lmq_sampler_last_logprobs(const lmq_sampler *s, lmq_token_logprob *chosen, lmq_token_logprob *top,
                               int32_t *n_top);

/* ---------------------------------------------------------------- generation
 * A generator (lmq_gen) runs the token loop on one context: it evaluates a
 * prompt, picks tokens (a sampler, or a caller's function), decodes them to
 * UTF-8 text as they come, and stops on an end-of-generation token, a stop
 * string, n_predict tokens, a full context or the caller's word. It owns
 * the context's sequence: it remembers which tokens the KV cache holds, and
 * a later prompt that starts with them (the next turn of a chat, a re-sent
 * conversation) evaluates only the part that differs (lmq_kv_truncate to
 * the common prefix; a recurrent model resumes from its newest state
 * snapshot at or before it). Text is streamed in pieces that never end
 * inside a UTF-8 character nor hand out the start of a possible stop
 * string; a stop string, even split across tokens, is never part of the
 * text. docs/API.md has the whole contract.
 *
 * Threading: one generator per context; calls on one generator (and its
 * context) from one thread at a time. Memory: lmq_gen_new sizes every
 * buffer (the sequence of n_ctx tokens, the text held back); lmq_gen_begin
 * grows the held-back text buffer for longer stop strings, and with a
 * schema makes the generation's matcher (and, the first time, the mask
 * and the generator's own json vocabulary); lmq_gen_next allocates nothing. */

#define LMQ_GEN_MAX_STOPS 16

typedef enum lmq_gen_stop {
    LMQ_GEN_RUNNING = 0,
    LMQ_GEN_STOP_EOG,      /* the model ended its turn (the token is not evaluated nor shown) */
    LMQ_GEN_STOP_STRING,   /* a stop string appeared (it and what followed are not shown) */
    LMQ_GEN_STOP_LENGTH,   /* n_predict tokens were generated */
    LMQ_GEN_STOP_CONTEXT,  /* the context is full */
    LMQ_GEN_STOP_CANCEL,   /* the text callback returned false, or lmq_gen_cancel */
    LMQ_GEN_STOP_ERROR,    /* a call failed (its status and lmq_last_error() say why) */
    LMQ_GEN_STOP_COUNT
} lmq_gen_stop;

/* Chooses the next token from the row of n_vocab logits of the last
 * evaluated token (a server's per-request sampling, ...). With a schema the
 * row is a copy in which the tokens the schema does not allow are -inf.
 * A negative return cancels (LMQ_GEN_STOP_CANCEL). */
typedef int32_t (*lmq_gen_choose_fn)(void *user, const float *logits, int32_t n_vocab);
/* Receives the next piece of text (len >= 1, not NUL-terminated, valid
 * during the call). Return false to stop (LMQ_GEN_STOP_CANCEL; what was
 * handed out stays handed out). */
typedef bool (*lmq_gen_text_fn)(void *user, const char *text, size_t len);

typedef struct lmq_gen_params {
    int32_t n_predict;          /* tokens to generate at most; < 0: until another stop */
    const char *stops[LMQ_GEN_MAX_STOPS]; /* stop strings (non-empty; borrowed until the generation ends) */
    int32_t n_stops;
    /* Token choice: `choose` when set; else `sampler` (reset and fed the
     * prompt by lmq_gen_begin, then every generated token); else greedy. */
    lmq_sampler *sampler;
    lmq_gen_choose_fn choose;
    void *choose_user;
    /* Control tokens come out as their text ("<|channel|>") for a caller
     * that parses them (a harmony splitter); false drops them. */
    bool unparse_special;
    /* Constrained decoding (lmq_rt_json.h): with a schema (borrowed until
     * the generation ends) every token chosen keeps the text a prefix of a
     * document the schema accepts, whichever way tokens are chosen (the
     * sampler gets the mask through lmq_sampler_set_mask, `choose` sees the
     * disallowed logits at -inf, greedy picks among the allowed). Once the
     * document is whole and nothing may follow it the generation ends
     * (LMQ_GEN_STOP_EOG, without a draw); where it may go on (a top-level
     * number) the vocabulary's EOS token is allowed beside the
     * continuations. A dead end (no token continues the document), or a
     * `choose` that returns a token the schema refuses, ends it with
     * LMQ_GEN_STOP_ERROR and LMQ_ERR_FORMAT. The generated text is the
     * document alone: keep stop strings and n_predict out of its way. */
    const lmq_json_schema *schema;
    /* The vocabulary as the matcher sees it (lmq_json_vocab_from_vocab
     * with this model's n_vocab; borrowed, used by one generation at a
     * time: it holds the mask's scratch). NULL: the generator builds its own at its first constrained
     * generation and keeps it. */
    const lmq_json_vocab *json_vocab;
    /* Evaluate the last prompt token on its own, after the rest, as
     * generated tokens are: its logits then do not depend on how much of
     * the prompt the cache already held, so a seed reproduces a reply
     * whatever was reused (a server's prefix cache). Costs one
     * single-token evaluation per prompt. */
    bool prompt_last_alone;
    /* lmq_generate only: where the text goes (may be NULL) */
    lmq_gen_text_fn on_text;
    void *user;
} lmq_gen_params;

lmq_gen_params lmq_gen_default_params(void);

typedef struct lmq_gen_stats {
    int32_t n_prompt;           /* prompt tokens */
    int32_t n_reused;           /* of which the cache already held (not evaluated again) */
    int32_t n_gen;              /* tokens generated (the end-of-generation token not counted) */
    double t_prompt, t_gen;     /* seconds: prompt evaluation, generation */
    lmq_gen_stop stop;
} lmq_gen_stats;

typedef struct lmq_gen lmq_gen;

/* A generator on ctx (borrowed: free the generator first). The model must
 * have a tokenizer (LMQ_ERR_NOT_FOUND otherwise). Tokens the context
 * already holds are kept, as tokens the generator does not know (no prompt
 * matches them; lmq_gen_begin_append continues after them). */
lmq_status lmq_gen_new(lmq_context *ctx, lmq_gen **out);
void lmq_gen_free(lmq_gen *g); /* accepts NULL */

/* Starts a generation on `prompt` (n tokens; the whole conversation so far,
 * not a continuation): keeps the longest prefix the cache holds (at most
 * n - 1 tokens, so the last prompt token gives logits) and queues the rest
 * for evaluation; nothing is evaluated yet. LMQ_ERR_INVALID_ARG for an
 * empty prompt, a token out of range, an empty or too many stop strings;
 * LMQ_ERR_LIMIT when the prompt does not fit in the context. */
lmq_status lmq_gen_begin(lmq_gen *g, const int32_t *prompt, size_t n, const lmq_gen_params *p);
/* The same, but `prompt` continues the sequence the context holds (no
 * prefix matching, nothing truncated). */
lmq_status lmq_gen_begin_append(lmq_gen *g, const int32_t *prompt, size_t n, const lmq_gen_params *p);
/* Evaluates up to max_tokens (<= 0: all) of the queued prompt, in batches
 * of the context's n_batch (a server interleaves several contexts' prompts
 * with it). *left (may be NULL): tokens still queued. */
lmq_status lmq_gen_prefill(lmq_gen *g, int32_t max_tokens, int32_t *left);
/* One step: evaluates what is left of the prompt, or the previous token,
 * and picks the next. *text, *len: the text now safe to hand out (possibly
 * none; valid until the next call on g). After the last piece
 * lmq_gen_done() is true. On failure the generation ends
 * (LMQ_GEN_STOP_ERROR) and *text still belongs to the output. */
lmq_status lmq_gen_next(lmq_gen *g, const char **text, size_t *len);
/* Ends the generation as cancelled; the next lmq_gen_next hands out the
 * text still held back. */
void lmq_gen_cancel(lmq_gen *g);
bool lmq_gen_done(const lmq_gen *g);
const lmq_gen_stats *lmq_gen_get_stats(const lmq_gen *g);
/* The token chosen by the last lmq_gen_next (-1 before any). */
int32_t lmq_gen_last_token(const lmq_gen *g);
/* The tokens in the cache, in order (-1 for those it held before
 * lmq_gen_new); valid until the next call on g. */
const int32_t *lmq_gen_tokens(const lmq_gen *g, size_t *n);
/* Forgets the sequence and clears the cache. */
void lmq_gen_reset(lmq_gen *g);

/* The pieces of the vocabulary of v for the JSON matcher, for logits rows
 * of n_vocab entries (the model's n_vocab; ids past the tokenizer's are
 * never allowed): lmq_token_to_piece(special = false) of each token, with
 * the vocabulary's EOS token as the end of the document. Free with
 * lmq_json_vocab_free. Build it once per model; one generation at a time
 * may use it. */
lmq_status lmq_json_vocab_from_vocab(const lmq_vocab *v, int32_t n_vocab, lmq_json_vocab **out);

/* The whole loop: lmq_gen_begin, then lmq_gen_next until done, handing
 * every piece to p->on_text. st (may be NULL) gets the figures. */
lmq_status lmq_generate(lmq_gen *g, const int32_t *prompt, size_t n, const lmq_gen_params *p, lmq_gen_stats *st);
/* The same from text: tokenized with the vocabulary's BOS rule (add_special)
 * and special tokens parsed ("<|im_start|>"), as a rendered chat prompt. */
lmq_status lmq_generate_text(lmq_gen *g, const char *prompt, size_t len, const lmq_gen_params *p, lmq_gen_stats *st);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif
