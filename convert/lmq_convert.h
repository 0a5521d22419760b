/* lmq_convert.h — the convert module: Hugging Face model directories (and,
 * later, GGUF files) to .lmq containers, and the metadata mapping they share.
 * All metadata uses GGUF key names (general.*, llama.*, tokenizer.ggml.*),
 * so that a container alone is enough to run the model. */
#ifndef LMQ_CONVERT_H
#define LMQ_CONVERT_H
/* liblmq exports what its public headers declare, nothing else (docs/API.md) */
#pragma GCC visibility push(default)

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
 *   docs/TOKENIZER.md, "lmq's own keys"). */
lmq_status lmq_hf_tokenizer_to_meta(const char *dir, lmq_meta *meta);

/* ---- Hugging Face directory -> .lmq ------------------------------------ */

typedef void (*lmq_progress_fn)(void *ctx, uint64_t done, uint64_t total);

/* opts.out_type value: keep each weight's source dtype (llama.cpp's "auto"). */
#define LMQ_CONVERT_TYPE_AUTO LMQ_TYPE_COUNT

typedef struct lmq_convert_opts {
    lmq_type out_type;      /* F32, F16 or BF16 for 2-D weights, or LMQ_CONVERT_TYPE_AUTO; norms stay F32 */
    lmq_codec codec;        /* LMQ_CODEC_NONE or LMQ_CODEC_ZSTD */
    int n_threads;
    lmq_progress_fn progress; /* may be NULL; called with bytes done/total */
    void *progress_ctx;
    /* may be NULL; called (with progress_ctx) before tensor i of n is written */
    void (*tensor_begin)(void *ctx, size_t i, size_t n, const char *name);
} lmq_convert_opts;

typedef struct lmq_convert_stats {
    uint64_t n_tensors;
    uint64_t n_params;
    uint64_t bytes_written;
    double seconds;
} lmq_convert_stats;

/* Reads DIR/config.json into general.* / llama.* keys (and lmq.* keys where
 * GGUF has no name; all listed in docs/FORMAT.md, "Keys written by lmq
 * convert"). Accepts Llama (model_type llama / LlamaForCausalLM) and
 * Mistral configs (same graph; a sliding window shorter than the context
 * caps llama.context_length at the window); refuses other model types,
 * attention/MLP biases, activations other than silu and RoPE scalings other
 * than linear/llama3 with one line naming config.json and the key. Missing
 * required keys (hidden_size, intermediate_size, num_hidden_layers,
 * num_attention_heads, vocab_size) are LMQ_ERR_FORMAT naming the key.
 * general.name is the directory's base name. */
lmq_status lmq_hf_config_to_meta(const char *dir, lmq_meta *meta);
/* The same from an in-memory config.json; `file` names it in errors and
 * `model_name` becomes general.name (may be NULL: no general.name). */
lmq_status lmq_hf_config_parse(const char *json, size_t len, const char *file,
                               const char *model_name, lmq_meta *meta);
/* Maps an HF tensor name to its GGUF-style name ("model.layers.3.self_attn.q_proj.weight"
 * -> "blk.3.attn_q.weight"); returns false for names lmq does not use
 * (e.g. rotary inv_freq). */
bool lmq_hf_tensor_name(const char *hf_name, char *out, size_t cap);
/* The same for any family of formats/arch.c (lmq_hf_tensor_name is the
 * Llama case). Multimodal prefixes ("language_model.") are understood. */
bool lmq_hf_tensor_name_arch(const lmq_arch *arch, const char *hf_name, char *out, size_t cap);
/* True for a layer's fused experts tensor of the family ("model.layers.N.
 * mlp.experts.gate_up_proj" [E, 2F, H] or "...down_proj" [E, H, F], with or
 * without ".weight"), which lmq_convert_hf splits into the per-kind stacks. */
bool lmq_hf_is_fused_experts(const lmq_arch *arch, const char *hf_name);
/* Converts a Hugging Face Llama directory (config.json, tokenizer files,
 * model.safetensors or a sharded index) to a .lmq container, streaming one
 * tensor at a time: GGUF tensor names in the order token_embd, blk.0..N-1
 * (attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate,
 * ffn_up, ffn_down), output_norm, output (absent when tied); HF row order
 * kept (lmq.rope.layout = "neox"); 2-D weights in opts->out_type, 1-D in
 * f32; values converted exactly (bit copy, exact widening, or RNE
 * narrowing). Checks every shape against config.json; refuses missing
 * tensors and unsupported dtypes naming the tensor; warns on stderr (one
 * line each) about tensors it does not use. The output is written
 * atomically: on any failure no file is left at out_path. opts may be NULL
 * (auto type, no compression, all cores); stats may be NULL. */
lmq_status lmq_convert_hf(const char *dir, const char *out_path,
                          const lmq_convert_opts *opts, lmq_convert_stats *stats);

/* ---- GGUF <-> .lmq (convert/convert_gguf.c, convert/export_gguf.c) ------
 * See docs/GGUF.md. */

/* True when `path` is a regular file that starts with the GGUF magic. */
bool lmq_path_is_gguf(const char *path);

/* GGUF file (llama.cpp's, v2/v3) -> .lmq container. Every tensor is copied
 * bit for bit in file order (no re-quantization; opts->out_type and
 * n_threads are ignored; codec and progress are honoured; opts may be NULL),
 * every metadata key is kept as it is, and lmq adds lmq.rope.layout
 * ("normal" for llama, whose attn_q/attn_k rows llama.cpp's converter
 * permutes; "neox" for every other family, qwen35 and qwen35moe included)
 * plus lmq.convert.version, lmq.convert.time (UTC; SOURCE_DATE_EPOCH when
 * set), lmq.source.files and lmq.source.xxh3. Refuses (LMQ_ERR_UNSUPPORTED,
 * one line naming the file and what is unsupported) architectures of no
 * family in formats/arch.c, tensor types lmq lacks, and files without
 * tensors. stats may be NULL. */
lmq_status lmq_convert_gguf(const char *gguf_path, const char *out_path,
                            const lmq_convert_opts *opts, lmq_convert_stats *stats);

typedef struct lmq_export_opts {
    /* GGUF has no fp8 type: false refuses fp8 tensors (naming the first);
     * true widens them to widen_type (LMQ_TYPE_F16 or LMQ_TYPE_BF16). */
    bool widen_fp8;
    lmq_type widen_type;
    uint32_t alignment;       /* 0 = 32 (GGUF's default) */
    lmq_progress_fn progress; /* may be NULL; bytes done/total */
    void *progress_ctx;
} lmq_export_opts;

/* .lmq container -> GGUF v3 for llama.cpp: metadata with the key names and
 * value types llama.cpp reads (derived keys filled in, general.file_type
 * from lmq.quantize.mix or the dominant tensor type, lmq.* keys dropped),
 * tensors in container order with quantized blocks copied unchanged, and
 * (llama only) attn_q/attn_k rows permuted into llama.cpp's order when the
 * container's lmq.rope.layout is "neox" (the default for .lmq files without
 * the key). qwen35/qwen35moe: LMQ_ERR_UNSUPPORTED (one line) when the key
 * and value heads differ in size or the layer kinds do not follow
 * full_attention_interval, which llama.cpp's loaders cannot express.
 * Each tensor's checksum is verified before it is written. Deterministic:
 * the same container gives the same bytes. opts and stats may be NULL. */
lmq_status lmq_export_gguf(const char *lmq_path, const char *out_path,
                           const lmq_export_opts *opts, lmq_convert_stats *stats);

/* llama.cpp's LLAMA_FTYPE value for a type or mix name ("q4_k_m" -> 15,
 * "f32" -> 0, "bf16" -> 32; case-insensitive), or -1 when it has none. */
int32_t lmq_llama_ftype_from_name(const char *name);

/* llama.cpp's convert_hf_to_gguf.py row permutation of attn_q/attn_k (HF
 * "neox" pairing -> GGUF "normal" pairing): viewing the n_rows rows as
 * (n_head, 2, n_rows/n_head/2), swap the last two axes. Output row
 * h*d + 2*j + k is input row h*d + k*d/2 + j, d = n_rows/n_head. Rows are
 * moved whole (row_bytes each), so quantized rows work too. Returns the
 * source row of output row `r`, or -1 if n_rows is not a multiple of
 * 2*n_head or r is out of range. */
int64_t lmq_rope_permuted_row(int64_t r, int64_t n_rows, int64_t n_head);

/* ---- Quantize a model (convert/quantize_model.c) -------------------------
 * Streams a float model (.lmq or GGUF with f32/f16/bf16 tensors, or a
 * Hugging Face directory, converted first to a temporary .lmq next to the
 * output) into a .lmq whose tensors follow a mix (lmq_quant.h, "Mixes"):
 * one tensor at a time, a bounded chunk of rows converted to f32 and
 * quantized with n_threads (output identical for any thread count), so the
 * peak memory is about the largest output tensor whatever the model size.
 * The output keeps the input's metadata and sets general.file_type
 * (llama.cpp's LLAMA_FTYPE of the mix; removed for mixes llama.cpp lacks),
 * general.quantization_version = 2, lmq.quantize.mix, lmq.quantize.version,
 * lmq.quantize.source_id (lmq_file_id of the input) and, when used,
 * lmq.quantize.pure and lmq.quantize.overrides ("REGEX=TYPE" strings). A
 * GGUF input without lmq.rope.layout gets "normal" (llama.cpp's row order).
 * Refuses (nothing written): an input with quantized tensors unless every
 * quantized tensor becomes a float type or is copied unchanged (MXFP4
 * tensors, which every mix keeps, and tensors an override gives their own
 * type; an override may also turn MXFP4 into any type) (LMQ_ERR_UNSUPPORTED
 * naming the tensor), an unknown mix (LMQ_ERR_INVALID_ARG listing the valid names), a
 * NaN or Inf weight (LMQ_ERR_FORMAT naming the tensor, row and column),
 * out_path naming the input. The file is written atomically. */

typedef struct lmq_quantize_opts {
    const char *mix;          /* mix name: "q4_k_m", "q8_0", "f16", ... */
    bool pure;                /* no promotions (lmq_mix_opts.pure) */
    lmq_type output_type;     /* LMQ_TYPE_COUNT: as the mix says */
    lmq_type token_embd_type; /* LMQ_TYPE_COUNT: as the mix says */
    const struct lmq_mix_override *overrides; /* first match wins */
    size_t n_overrides;
    int n_threads;            /* <= 0: all CPUs */
    lmq_codec codec;          /* container codec for the output */
    lmq_progress_fn progress; /* may be NULL; weights done/total */
    void *progress_ctx;
    /* Importance weights (lmq_quant.h, "Importance matrices"): a tensor with
     * an entry is quantized with its mean square activations as `imatrix`
     * (per expert for 3-D tensors whose entry has ne[2] matrices); one
     * without falls back to the plain weighting. NULL: none. */
    const struct lmq_imatrix *imatrix;
    const char *imatrix_path; /* recorded as quantize.imatrix.file */
    /* Extra keys copied into the output's metadata (the target-bpw plan);
     * may be NULL. */
    const lmq_meta *extra_meta;
    /* Error feedback (lmq_quantize_rows_gptq): gptq_factor returns the
     * lmq_gptq_factor() of the input covariance (n_cols x n_cols) of a 2-D
     * tensor (expert -1) or of one expert's matrix of a 3-D tensor, or NULL
     * to quantize those rows plainly. NULL: off. The calibration text and
     * chunk count are recorded as lmq.quantize.gptq_calibration /
     * lmq.quantize.gptq_chunks. */
    const float *(*gptq_factor)(void *user, const char *tensor, int32_t expert, int64_t n_cols);
    void *gptq_user;
    const char *gptq_calibration;
    int gptq_chunks;
    /* Tensors already quantized by the caller (layer-by-layer GPTQ): when
     * it returns non-NULL for a tensor planned as `type` of `bytes` bytes,
     * those bytes are written as they are (counted as error feedback when
     * *gptq is set). NULL: none. */
    const void *(*prequantized)(void *user, const char *tensor, lmq_type type, uint64_t bytes, bool *gptq);
    void *prequantized_user;
} lmq_quantize_opts;

typedef struct lmq_quantize_stats {
    uint64_t n_tensors;
    uint64_t n_quantized;  /* tensors stored in a quantized type */
    uint64_t n_fallback;   /* tensors whose row length forced a fallback type */
    uint64_t n_elements;   /* weights in all tensors */
    uint64_t bytes_in;     /* tensor data of the source */
    uint64_t bytes_out;    /* tensor data of the result */
    uint64_t file_bytes;   /* size of the written file (0 for a plan) */
    uint64_t n_imatrix;    /* tensors quantized with importance weights */
    uint64_t n_gptq;       /* tensors quantized with error feedback */
    double bpw;            /* bytes_out * 8 / n_elements */
    double seconds;
} lmq_quantize_stats;

typedef struct lmq_quantize_plan { /* what lmq_quantize_model would write */
    const struct lmq_mix_info *mix;
    size_t n;                        /* tensors, in the order they are written */
    char **names;                    /* [n] */
    struct lmq_mix_tensor *tensors;  /* [n] source name/type/shape */
    struct lmq_mix_entry *entries;   /* [n] chosen type, reason, size */
    size_t *override_hits;           /* [opts->n_overrides] tensors matched */
    lmq_quantize_stats stats;        /* file_bytes and seconds are 0 */
} lmq_quantize_plan;

/* Plans without writing anything (an HF directory is read from its
 * safetensors headers and config.json). Same refusals as below. */
lmq_status lmq_quantize_plan_model(const char *in_path, const lmq_quantize_opts *opts,
                                   lmq_quantize_plan **out);
void lmq_quantize_plan_free(lmq_quantize_plan *p);

/* stats may be NULL. */
lmq_status lmq_quantize_model(const char *in_path, const char *out_path,
                              const lmq_quantize_opts *opts, lmq_quantize_stats *stats);

/* One float tensor of an open file (ti from lmq_file_find_tensor) quantized
 * to `type` into dst exactly as lmq_quantize_model writes it with opts (its
 * imatrix entry, its error-feedback factor when opts->gptq_factor gives one;
 * the mix and pins are not consulted). cap: dst's bytes (rows x
 * lmq_row_size). *used_gptq (may be NULL): whether feedback was applied.
 * Refuses a quantized source (LMQ_ERR_UNSUPPORTED), rows the type's blocks
 * do not divide, a NaN/Inf weight (LMQ_ERR_FORMAT), a small dst (LMQ_ERR_LIMIT). */
lmq_status lmq_quantize_tensor(const char *in_path, const lmq_tensor_info *ti, lmq_type type,
                               const lmq_quantize_opts *opts, void *dst, size_t cap, bool *used_gptq);


/* ---- Size-targeted plans (convert/quantize_target.c) ----------------------
 * `lmq quantize --target-bpw/--target-size`: every quantizable tensor that
 * no --tensor-type pins gets the candidate type that minimises the
 * predicted end-to-end error under a byte budget. The predicted error of
 * tensor t in type q is scale_t * err_t(q), err_t(q) the importance-weighted
 * squared error sum_rows sum_j w_j (x_j - x'_j)^2 (w = the imatrix's mean
 * square activation, 1 without an entry), scale_t a per-tensor factor
 * (KLD per unit error, fitted by the caller from one measured KLD; 1 when
 * not fitted). Errors of different tensors add up. */

#define LMQ_TARGET_MAX_CAND 16

typedef struct lmq_target_cand {
    lmq_type type;
    int64_t bytes;  /* stored size */
    double err;     /* importance-weighted squared error */
} lmq_target_cand;

typedef struct lmq_target_tensor {
    char *name;
    int64_t n_elements;
    int64_t ne0;
    bool free_;            /* chosen by the solver; else fixed (kept, pinned) */
    lmq_type fixed_type;   /* the plan's type when !free_ */
    int64_t fixed_bytes;
    int n_cand;
    lmq_target_cand cand[LMQ_TARGET_MAX_CAND]; /* by increasing bytes */
    double scale;          /* predicted KLD per unit of err (default 1) */
    double kld_measured;   /* the fit's measurement (0: none) */
    int choice;            /* index into cand after lmq_target_solve */
} lmq_target_tensor;

typedef struct lmq_target_table {
    size_t n;
    lmq_target_tensor *t;   /* [n], in the source's order */
    int64_t n_elements;     /* all tensors */
    uint64_t source_id;     /* lmq_file_id of the source */
} lmq_target_table;

/* Plans the source with opts (the mix only decides which tensors are
 * quantizable; pins and the output/embedding types of opts stay fixed),
 * then quantizes every free tensor to each of the n_types candidates whose
 * block fits its rows and records the weighted error (opts->imatrix; a
 * matrix of more than 512 rows on 512 evenly spaced rows, the sum scaled
 * to all rows). opts->progress: weights measured, after each tensor. A
 * .lmq or GGUF input only. */
lmq_status lmq_target_measure(const char *in_path, const lmq_quantize_opts *opts, const lmq_type *types,
                              size_t n_types, lmq_target_table **out);
void lmq_target_table_free(lmq_target_table *t);

/* Chooses a candidate per free tensor: starts from the smallest, then
 * repeatedly takes the upgrade with the largest predicted-error decrease per
 * added byte that still fits (a greedy walk of each tensor's lower convex
 * hull, which also spends the leftover budget). Deterministic. The total
 * (fixed + chosen bytes) never exceeds budget_bytes: LMQ_ERR_INVALID_ARG
 * when even the smallest candidates do not fit. total_bytes may be NULL. */
lmq_status lmq_target_solve(lmq_target_table *t, int64_t budget_bytes, int64_t *total_bytes);
/* Predicted error of the current choice (sum of scale * err). */
double lmq_target_predicted(const lmq_target_table *t);
/* Cache: a text file of the measured table (errors and fitted scales). */
lmq_status lmq_target_save(const lmq_target_table *t, const char *path);
lmq_status lmq_target_load(const char *path, lmq_target_table **out);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop
#endif
