/* Private structures of the model and context (runtime/model.c, forward.c). */
#ifndef LMQ_MODEL_INTERNAL_H
#define LMQ_MODEL_INTERNAL_H
#include "lmq_runtime.h"

typedef struct lmq_weight {
    lmq_type type;
    const void *data; /* n_out rows of n_in elements, in the mapping */
    int64_t n_in, n_out;
    const lmq_tensor_info *info;
} lmq_weight;

typedef struct lmq_layer {
    float *attn_norm, *ffn_norm;      /* (n_embd) owned f32 */
    lmq_weight wq, wk, wv, wo;         /* (n_embd -> n_head*hd), (-> n_kv*hd) x2, (n_head*hd -> n_embd) */
    lmq_weight w_gate, w_up, w_down;   /* (n_embd -> n_ff) x2, (n_ff -> n_embd) */
} lmq_layer;

struct lmq_model {
    lmq_file *file;
    lmq_hparams hp;
    lmq_weight tok_embd;  /* (n_vocab rows of n_embd) */
    lmq_weight output;    /* (n_vocab rows of n_embd); == tok_embd when tied */
    float *output_norm;   /* (n_embd) */
    float *rope_freqs;    /* (n_rot/2) per-frequency divisors from rope_freqs.weight
                           * (llama.cpp's Llama 3 scaling), or NULL */
    lmq_layer *layers;    /* (n_layer) */
    lmq_vocab *vocab;
    const char *chat_template;
    uint64_t n_params, weight_bytes;
    char type_summary[256];
};
#endif
