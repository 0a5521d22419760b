/* Private structures of the model and context (runtime/model.c, forward.c). */
#ifndef LMQ_MODEL_INTERNAL_H
#define LMQ_MODEL_INTERNAL_H
#include "lmq_runtime.h"

typedef struct lmq_weight {
    lmq_type type;
    const void *data; /* n_out rows of n_in elements, in the mapping */
    int64_t n_in, n_out;
    int64_t ex_rows;  /* stacked experts: rows from one expert to the next (0: n_out / n_expert; 2 n_ff_exp
                       * for the gate and up views of a fused ffn_gate_up_exps) */
    const lmq_tensor_info *info;
    bool quiet;       /* a second view of a fused tensor: not reported to the observer */
    void *packed;     /* the rows repacked (lmq_repack), owned by the model, or NULL */
} lmq_weight;

/* One layer. Which fields are set follows the layer's kind (attention or
 * recurrent) and the tensors its file has; model.c's slot table (k_slots)
 * maps each per-layer tensor kind to its field, and load, repack, free and
 * the workspace reservation walk that table. */
typedef struct lmq_layer {
    bool rec;                               /* a Gated DeltaNet (recurrent) layer: no attention, no KV slots */
    bool nope;                              /* attention without RoPE (SmolLM3's every 4th layer) */
    int32_t n_head_kv, n_ff;                /* this layer's KV heads and FFN width (per-layer metadata arrays;
                                             * the hparams' values are the largest) */
    int32_t head_dim, n_rot;                /* this layer's head size and rotary dims (Gemma 4: per kind) */
    int32_t kv_src;                         /* the layer whose KV cache it reads (itself unless shared KV) */
    bool k_eq_v;                            /* no attn_v: values are the raw keys (Gemma 4's K = V layers) */
    bool attn_gate;                         /* wq rows per head are [q (hd), gate (hd)]: output * sigmoid(gate) */
    float *attn_norm, *ffn_norm;            /* (n_embd) owned f32 */
    float *attn_post_norm, *ffn_post_norm;  /* (n_embd) sandwich norms, or NULL */
    float *q_norm, *k_norm;                 /* (head_dim) per head or (n_head*hd / n_kv*hd) whole, or NULL */
    int32_t q_norm_len, k_norm_len;
    float *bq, *bk, *bv, *bo;               /* biases, or NULL */
    lmq_weight wq, wk, wv, wo;              /* (n_embd -> n_head*hd), (-> n_kv*hd) x2, (n_head*hd -> n_embd);
                                             * row ranges of attn_qkv when fused */
    lmq_weight w_gate, w_up, w_down;        /* (n_embd -> n_ff) x2, (n_ff -> n_embd); gate|up row ranges of
                                             * ffn_up when fused */
    bool swa;                               /* sliding-window layer */
    /* mixture of experts (moe: the FFN above is absent) */
    bool moe;
    lmq_weight gate_inp;                    /* router (n_embd -> n_expert) */
    lmq_weight gate_exps, up_exps;          /* n_expert stacked (n_embd -> n_ff_exp): expert e is rows
                                             * [e n_ff_exp, (e+1) n_ff_exp) */
    lmq_weight down_exps;                   /* n_expert stacked (n_ff_exp -> n_embd) */
    lmq_weight gate_up_exps;                /* fused gate|up per expert (llama.cpp's Gemma 4): only its views
                                             * gate_exps and up_exps are used */
    lmq_weight gate_shexp, up_shexp, down_shexp; /* shared expert (Qwen2-MoE), or absent (data NULL) */
    float *gate_inp_shexp;                  /* (n_embd) its output is scaled by sigmoid(x . w) */
    float *gate_inp_b;                      /* (n_expert) router bias, or NULL (gpt-oss) */
    float *gate_exps_b, *up_exps_b;         /* (n_expert, n_ff_exp) expert biases, or NULL */
    float *down_exps_b;                     /* (n_expert, n_embd) */
    float *sinks;                           /* (n_head) attention sink logits, or NULL (gpt-oss) */
    /* Gated DeltaNet (rec): value head j reads key head j % nk (llama.cpp's tiled order) */
    lmq_weight ssm_in;                      /* (n_embd -> C = 2 nk dk + nv dv) rows q|k|v (attn_qkv) */
    lmq_weight ssm_z;                       /* (n_embd -> nv dv) output gate (attn_gate) */
    lmq_weight ssm_beta, ssm_alpha;         /* (n_embd -> nv) */
    lmq_weight ssm_out;                     /* (nv dv -> n_embd) */
    float *ssm_conv;                        /* (C, K) depthwise taps */
    float *ssm_dt, *ssm_a;                  /* (nv) dt_bias, -exp(A_log) */
    float *ssm_norm;                        /* (dv) */
    /* Gemma 4 */
    lmq_weight ple_gate, ple_proj;          /* per-layer embedding: (n_embd -> ple), (ple -> n_embd), or absent */
    float *ple_post_norm;                   /* (n_embd) */
    float *out_scale;                       /* (1) the residual stream's scale after the layer, or NULL */
    bool moe_dense;                         /* experts beside the dense MLP (Gemma 4 26B-A4B): the MLP's output
                                             * normed by ffn_post_norm_1 plus the experts' by ffn_post_norm_2 */
    float *ffn_pre_norm_2, *ffn_post_norm_1, *ffn_post_norm_2; /* (n_embd) */
    float *gate_inp_scale;                  /* (n_embd) the router reads rmsnorm(x) * this / sqrt(n_embd) */
    float *down_exps_scale;                 /* (n_expert) per-expert output scale, or NULL */
} lmq_layer;

/* Shapes of the recurrent layers (0 without them). */
typedef struct lmq_ssm_dims {
    int32_t n_rec;      /* recurrent layers */
    int32_t conv;       /* K: conv kernel */
    int32_t nk, nv;     /* key heads, value heads */
    int32_t dk, dv;     /* head sizes */
    int32_t channels;   /* C = 2 nk dk + nv dv */
} lmq_ssm_dims;

struct lmq_model {
    lmq_file *file;
    const lmq_arch *arch;
    lmq_hparams hp;
    lmq_weight tok_embd;  /* (n_vocab rows of n_embd) */
    lmq_weight output;    /* (n_vocab rows of n_embd); == tok_embd when tied */
    float *output_norm;   /* (n_embd) */
    float *rope_freqs;    /* (n_rot/2) per-frequency divisors from rope_freqs.weight
                           * (llama.cpp's Llama 3 scaling), or NULL */
    float *rope_long, *rope_short; /* (n_rot/2) LongRoPE divisors, or NULL */
    lmq_layer *layers;    /* (n_layer) */
    lmq_ssm_dims ssm;
    lmq_arch_dims dims;   /* the shape symbols of the descriptor, from the metadata */
    int32_t head_dim_max; /* the largest head size over layers (buffers are sized for it) */
    int32_t n_rot_swa;    /* rotary dims of sliding layers (hp.n_rot for global ones) */
    /* per-layer embeddings (Gemma 4; absent: data NULL) */
    int32_t n_embd_ple;   /* one layer's width */
    lmq_weight ple_embd;  /* (n_vocab rows of n_layer ple) */
    lmq_weight ple_model_proj; /* (n_embd -> n_layer ple) */
    float *ple_proj_norm; /* (ple) */
    /* YaRN (hp.rope_scaling_type 3): correction range from beta_fast/beta_slow;
     * truncate: floor/ceil it as ggml always does (false: Hugging Face's
     * rope_scaling.truncate = false, recorded by lmq convert) */
    float yarn_beta_fast, yarn_beta_slow;
    bool yarn_truncate;
    /* Llama 4's query temperature (Ministral 3): q *= 1 + beta ln(1 + floor(pos / orig_ctx)); beta 0: off */
    float attn_temp_beta;
    lmq_vocab *vocab;
    const char *chat_template;
    uint64_t n_params, weight_bytes;
    uint64_t repacked_bytes; /* weights held repacked (lmq_repack) */
    lmq_isa repack_isa;      /* the ISA the copies are laid out for: used only while it is active */
    bool repack;             /* lmq_model_params.repack: swapped weights are repacked as loaded ones */
    uint8_t *repack_arena;   /* one anonymous mapping holding the copies (NULL: each its own allocation) */
    size_t repack_arena_bytes;
    char type_summary[256];
};
/* Sizes the workspace for every product of the model at n_batch tokens on
 * n_threads threads, on every path the ISA and GEMM mode in force can take
 * (model.c): lmq_eval then allocates nothing. */
lmq_status lmq_model_reserve(const lmq_model *md, lmq_workspace *ws, int32_t n_batch, int n_threads);
#endif
