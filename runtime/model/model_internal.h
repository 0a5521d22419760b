/* Private structures of the model and context (runtime/model.c, forward.c). */
#ifndef LMQ_MODEL_INTERNAL_H
#define LMQ_MODEL_INTERNAL_H
#include "lmq_runtime.h"

typedef struct lmq_weight {
    lmq_type type;
    const void *data; /* n_out rows of n_in elements, in the mapping */
    int64_t n_in, n_out;
    const lmq_tensor_info *info;
    bool quiet;       /* a second view of a fused tensor: not reported to the observer */
    void *packed;     /* the rows repacked (lmq_repack), owned by the model, or NULL */
} lmq_weight;

typedef struct lmq_layer {
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
    lmq_weight gate_shexp, up_shexp, down_shexp; /* shared expert (Qwen2-MoE), or absent (data NULL) */
    float *gate_inp_shexp;                  /* (n_embd) its output is scaled by sigmoid(x . w) */
} lmq_layer;

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
    lmq_vocab *vocab;
    const char *chat_template;
    uint64_t n_params, weight_bytes;
    uint64_t repacked_bytes; /* weights held repacked (lmq_repack) */
    char type_summary[256];
};
#endif
