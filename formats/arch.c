/* Model architectures as data: one descriptor per family (lmq_format.h).
 *
 * To add a family: list its tensors (GGUF kind, Hugging Face name, shape,
 * flags) and fill one lmq_arch row; block features the runtime does not
 * implement yet get a flag in lmq_arch and one implementation in
 * runtime/model/forward.c. docs/ARCHITECTURE.md walks through it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lmq_format.h"

/* GGUF names, as llama.cpp's src/llama-arch.cpp spells them. */
static const struct {
    const char *name;
    bool per_layer;
} k_kinds[LMQ_TK_COUNT] = {
    [LMQ_TK_TOKEN_EMBD] = {"token_embd.weight", false},
    [LMQ_TK_OUTPUT_NORM] = {"output_norm.weight", false},
    [LMQ_TK_OUTPUT] = {"output.weight", false},
    [LMQ_TK_ROPE_FREQS] = {"rope_freqs.weight", false},
    [LMQ_TK_ROPE_FACTORS_LONG] = {"rope_factors_long.weight", false},
    [LMQ_TK_ROPE_FACTORS_SHORT] = {"rope_factors_short.weight", false},
    [LMQ_TK_ATTN_NORM] = {"attn_norm.weight", true},
    [LMQ_TK_ATTN_Q] = {"attn_q.weight", true},
    [LMQ_TK_ATTN_K] = {"attn_k.weight", true},
    [LMQ_TK_ATTN_V] = {"attn_v.weight", true},
    [LMQ_TK_ATTN_QKV] = {"attn_qkv.weight", true},
    [LMQ_TK_ATTN_OUT] = {"attn_output.weight", true},
    [LMQ_TK_ATTN_Q_BIAS] = {"attn_q.bias", true},
    [LMQ_TK_ATTN_K_BIAS] = {"attn_k.bias", true},
    [LMQ_TK_ATTN_V_BIAS] = {"attn_v.bias", true},
    [LMQ_TK_ATTN_OUT_BIAS] = {"attn_output.bias", true},
    [LMQ_TK_ATTN_Q_NORM] = {"attn_q_norm.weight", true},
    [LMQ_TK_ATTN_K_NORM] = {"attn_k_norm.weight", true},
    [LMQ_TK_ATTN_POST_NORM] = {"post_attention_norm.weight", true},
    [LMQ_TK_FFN_NORM] = {"ffn_norm.weight", true},
    [LMQ_TK_FFN_GATE] = {"ffn_gate.weight", true},
    [LMQ_TK_FFN_UP] = {"ffn_up.weight", true},
    [LMQ_TK_FFN_DOWN] = {"ffn_down.weight", true},
    [LMQ_TK_FFN_POST_NORM] = {"post_ffw_norm.weight", true},
    [LMQ_TK_FFN_GATE_INP] = {"ffn_gate_inp.weight", true},
    [LMQ_TK_FFN_GATE_EXPS] = {"ffn_gate_exps.weight", true},
    [LMQ_TK_FFN_UP_EXPS] = {"ffn_up_exps.weight", true},
    [LMQ_TK_FFN_DOWN_EXPS] = {"ffn_down_exps.weight", true},
    [LMQ_TK_FFN_GATE_INP_SHEXP] = {"ffn_gate_inp_shexp.weight", true},
    [LMQ_TK_FFN_GATE_SHEXP] = {"ffn_gate_shexp.weight", true},
    [LMQ_TK_FFN_UP_SHEXP] = {"ffn_up_shexp.weight", true},
    [LMQ_TK_FFN_DOWN_SHEXP] = {"ffn_down_shexp.weight", true},
    [LMQ_TK_ATTN_GATE] = {"attn_gate.weight", true},
    [LMQ_TK_SSM_BETA] = {"ssm_beta.weight", true},
    [LMQ_TK_SSM_ALPHA] = {"ssm_alpha.weight", true},
    [LMQ_TK_SSM_CONV1D] = {"ssm_conv1d.weight", true},
    [LMQ_TK_SSM_DT] = {"ssm_dt.bias", true},
    [LMQ_TK_SSM_A] = {"ssm_a", true},
    [LMQ_TK_SSM_NORM] = {"ssm_norm.weight", true},
    [LMQ_TK_SSM_OUT] = {"ssm_out.weight", true},
    [LMQ_TK_ATTN_SINKS] = {"attn_sinks.weight", true},
    [LMQ_TK_FFN_GATE_INP_BIAS] = {"ffn_gate_inp.bias", true},
    [LMQ_TK_FFN_GATE_EXPS_BIAS] = {"ffn_gate_exps.bias", true},
    [LMQ_TK_FFN_UP_EXPS_BIAS] = {"ffn_up_exps.bias", true},
    [LMQ_TK_FFN_DOWN_EXPS_BIAS] = {"ffn_down_exps.bias", true},
    [LMQ_TK_PER_LAYER_TOKEN_EMBD] = {"per_layer_token_embd.weight", false},
    [LMQ_TK_PER_LAYER_MODEL_PROJ] = {"per_layer_model_proj.weight", false},
    [LMQ_TK_PER_LAYER_PROJ_NORM] = {"per_layer_proj_norm.weight", false},
    [LMQ_TK_PER_LAYER_INP_GATE] = {"inp_gate.weight", true},
    [LMQ_TK_PER_LAYER_PROJ] = {"proj.weight", true},
    [LMQ_TK_PER_LAYER_POST_NORM] = {"post_norm.weight", true},
    [LMQ_TK_LAYER_OUT_SCALE] = {"layer_output_scale.weight", true},
    [LMQ_TK_FFN_GATE_INP_SCALE] = {"ffn_gate_inp.scale", true},
    [LMQ_TK_FFN_DOWN_EXPS_SCALE] = {"ffn_down_exps.scale", true},
    [LMQ_TK_FFN_PRE_NORM_2] = {"pre_ffw_norm_2.weight", true},
    [LMQ_TK_FFN_POST_NORM_1] = {"post_ffw_norm_1.weight", true},
    [LMQ_TK_FFN_POST_NORM_2] = {"post_ffw_norm_2.weight", true},
    [LMQ_TK_FFN_GATE_UP_EXPS] = {"ffn_gate_up_exps.weight", true},
};

/* Rows leave ne2 out (LMQ_DIM_1, i.e. 0) unless the tensor is stacked per expert. */
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#endif
#define OPT LMQ_AT_OPTIONAL
#define NRM LMQ_AT_NORM
#define FFN (LMQ_AT_OPTIONAL | LMQ_AT_FFN)
#define D(x) LMQ_DIM_##x
#define N_OF(a) (sizeof(a) / sizeof(a)[0])

/* Rows most families share (Hugging Face's Llama-style names). */
#define R_EMBD {LMQ_TK_TOKEN_EMBD, "model.embed_tokens.weight", D(EMBD), D(VOCAB), 0}
#define R_ATTN_NORM {LMQ_TK_ATTN_NORM, "input_layernorm.weight", D(EMBD), D(1), NRM}
#define R_QKV                                                                   \
    {LMQ_TK_ATTN_Q, "self_attn.q_proj.weight", D(EMBD), D(Q), 0},              \
    {LMQ_TK_ATTN_K, "self_attn.k_proj.weight", D(EMBD), D(KV), 0},             \
    {LMQ_TK_ATTN_V, "self_attn.v_proj.weight", D(EMBD), D(KV), 0}
#define R_QKV_BIAS(f)                                                           \
    {LMQ_TK_ATTN_Q_BIAS, "self_attn.q_proj.bias", D(Q), D(1), f},              \
    {LMQ_TK_ATTN_K_BIAS, "self_attn.k_proj.bias", D(KV), D(1), f},             \
    {LMQ_TK_ATTN_V_BIAS, "self_attn.v_proj.bias", D(KV), D(1), f}
#define R_QK_NORM                                                               \
    {LMQ_TK_ATTN_Q_NORM, "self_attn.q_norm.weight", D(HEAD), D(1), NRM},       \
    {LMQ_TK_ATTN_K_NORM, "self_attn.k_norm.weight", D(HEAD), D(1), NRM}
#define R_ATTN_OUT {LMQ_TK_ATTN_OUT, "self_attn.o_proj.weight", D(Q), D(EMBD), 0}
#define R_FFN_NORM(hf) {LMQ_TK_FFN_NORM, hf, D(EMBD), D(1), NRM}
#define R_MLP(f)                                                                \
    {LMQ_TK_FFN_GATE, "mlp.gate_proj.weight", D(EMBD), D(FF), f},              \
    {LMQ_TK_FFN_UP, "mlp.up_proj.weight", D(EMBD), D(FF), f},                  \
    {LMQ_TK_FFN_DOWN, "mlp.down_proj.weight", D(FF), D(EMBD), f}
#define R_EXPERTS(router, gate, up, down)                                       \
    {LMQ_TK_FFN_GATE_INP, router, D(EMBD), D(EXPERT), FFN},                    \
    {LMQ_TK_FFN_GATE_EXPS, gate, D(EMBD), D(FF_EXP), FFN, D(EXPERT)},          \
    {LMQ_TK_FFN_UP_EXPS, up, D(EMBD), D(FF_EXP), FFN, D(EXPERT)},              \
    {LMQ_TK_FFN_DOWN_EXPS, down, D(FF_EXP), D(EMBD), FFN, D(EXPERT)}
#define R_QWEN_EXPERTS                                                          \
    R_EXPERTS("mlp.gate.weight", "mlp.experts.*.gate_proj.weight", "mlp.experts.*.up_proj.weight", \
              "mlp.experts.*.down_proj.weight")
#define R_SANDWICH_ATTN {LMQ_TK_ATTN_POST_NORM, "post_attention_layernorm.weight", D(EMBD), D(1), NRM}
#define R_SANDWICH_FFN {LMQ_TK_FFN_POST_NORM, "post_feedforward_layernorm.weight", D(EMBD), D(1), NRM}
#define R_OUTPUT                                                                \
    {LMQ_TK_OUTPUT_NORM, "model.norm.weight", D(EMBD), D(1), NRM},             \
    {LMQ_TK_OUTPUT, "lm_head.weight", D(EMBD), D(VOCAB), OPT}

/* Llama, Mistral, SmolLM, Llama 3.x: q/k/v/o biases are optional (some
 * Llama-architecture checkpoints carry them; llama.cpp loads them).
 * Mixtral is this architecture with experts instead of the dense FFN (as in
 * llama.cpp, whose GGUF calls it "llama"). */
static const lmq_arch_tensor k_llama[] = {
    R_EMBD,
    {LMQ_TK_ROPE_FREQS, NULL, D(ROT_HALF), D(1), OPT},
    R_ATTN_NORM,
    R_QKV,
    R_QKV_BIAS(OPT),
    R_ATTN_OUT,
    {LMQ_TK_ATTN_OUT_BIAS, "self_attn.o_proj.bias", D(EMBD), D(1), OPT},
    R_FFN_NORM("post_attention_layernorm.weight"),
    R_MLP(FFN),
    R_EXPERTS("block_sparse_moe.gate.weight", "block_sparse_moe.experts.*.w1.weight",
              "block_sparse_moe.experts.*.w3.weight", "block_sparse_moe.experts.*.w2.weight"),
    R_OUTPUT,
};

/* Qwen2 / Qwen2.5: Llama with q/k/v biases. */
static const lmq_arch_tensor k_qwen2[] = {
    R_EMBD, R_ATTN_NORM, R_QKV, R_QKV_BIAS(0), R_ATTN_OUT, R_FFN_NORM("post_attention_layernorm.weight"), R_MLP(0),
    R_OUTPUT,
};

/* Qwen3: per-head q/k RMSNorm, explicit head_dim. */
static const lmq_arch_tensor k_qwen3[] = {
    R_EMBD, R_ATTN_NORM, R_QKV, R_QK_NORM, R_ATTN_OUT, R_FFN_NORM("post_attention_layernorm.weight"), R_MLP(0),
    R_OUTPUT,
};

/* Gemma 2: sandwich norms around attention and FFN. */
static const lmq_arch_tensor k_gemma2[] = {
    R_EMBD, R_ATTN_NORM, R_QKV, R_ATTN_OUT, R_SANDWICH_ATTN, R_FFN_NORM("pre_feedforward_layernorm.weight"), R_MLP(0),
    R_SANDWICH_FFN, R_OUTPUT,
};

/* Gemma 3 (text): Gemma 2 plus per-head q/k norms. */
static const lmq_arch_tensor k_gemma3[] = {
    R_EMBD, R_ATTN_NORM, R_QKV, R_QK_NORM, R_ATTN_OUT, R_SANDWICH_ATTN, R_FFN_NORM("pre_feedforward_layernorm.weight"),
    R_MLP(0), R_SANDWICH_FFN, R_OUTPUT,
};

/* Phi-3 / Phi-3.5 / Phi-4-mini: fused qkv and gate|up, partial rotary,
 * LongRoPE factor lists (from config.json, stored as tensors as llama.cpp does). */
static const lmq_arch_tensor k_phi3[] = {
    R_EMBD,
    {LMQ_TK_ROPE_FACTORS_LONG, NULL, D(ROT_HALF), D(1), OPT},
    {LMQ_TK_ROPE_FACTORS_SHORT, NULL, D(ROT_HALF), D(1), OPT},
    R_ATTN_NORM,
    {LMQ_TK_ATTN_QKV, "self_attn.qkv_proj.weight", D(EMBD), D(QKV), 0},
    R_ATTN_OUT,
    R_FFN_NORM("post_attention_layernorm.weight"),
    {LMQ_TK_FFN_UP, "mlp.gate_up_proj.weight", D(EMBD), D(FF2), 0},
    {LMQ_TK_FFN_DOWN, "mlp.down_proj.weight", D(FF), D(EMBD), 0},
    R_OUTPUT,
};

/* Qwen3-MoE: Qwen3's attention; every layer's FFN is the experts unless
 * config.json lists it in mlp_only_layers (or decoder_sparse_step skips it). */
static const lmq_arch_tensor k_qwen3moe[] = {
    R_EMBD, R_ATTN_NORM, R_QKV, R_QK_NORM, R_ATTN_OUT, R_FFN_NORM("post_attention_layernorm.weight"), R_QWEN_EXPERTS,
    R_MLP(FFN), R_OUTPUT,
};

/* Qwen2-MoE (Qwen1.5-MoE, Qwen2-57B-A14B): Qwen2's attention (q/k/v
 * biases), experts plus a shared expert whose output is scaled by
 * sigmoid(x . w); top-k weights not renormalised unless norm_topk_prob. */
static const lmq_arch_tensor k_qwen2moe[] = {
    R_EMBD,
    R_ATTN_NORM,
    R_QKV,
    R_QKV_BIAS(0),
    R_ATTN_OUT,
    R_FFN_NORM("post_attention_layernorm.weight"),
    R_QWEN_EXPERTS,
    {LMQ_TK_FFN_GATE_INP_SHEXP, "mlp.shared_expert_gate.weight", D(EMBD), D(1), FFN},
    {LMQ_TK_FFN_GATE_SHEXP, "mlp.shared_expert.gate_proj.weight", D(EMBD), D(FF_SHEXP), FFN},
    {LMQ_TK_FFN_UP_SHEXP, "mlp.shared_expert.up_proj.weight", D(EMBD), D(FF_SHEXP), FFN},
    {LMQ_TK_FFN_DOWN_SHEXP, "mlp.shared_expert.down_proj.weight", D(FF_SHEXP), D(EMBD), FFN},
    R_MLP(FFN),
    R_OUTPUT,
};

/* Qwen3.5 / Qwen3.6: three Gated DeltaNet layers to one gated-attention
 * layer. Attention layers: q_proj rows per head [q, gate], per-head q/k
 * norms, partial NEOX RoPE. Recurrent layers: fused q|k|v (conv channels),
 * z, beta, alpha, conv1d, dt_bias, -exp(A_log), the output's plain-weight
 * RMSNorm, out_proj. The pre-FFN norm is post_attention_layernorm, named
 * post_attention_norm in llama.cpp's GGUF (ffn_norm_post_attn). */
#define ATT (LMQ_AT_ATTN)
#define REC (LMQ_AT_REC)
#define R_QWEN35_LAYER                                                          \
    R_ATTN_NORM,                                                                \
    {LMQ_TK_ATTN_Q, "self_attn.q_proj.weight", D(EMBD), D(Q2), ATT},           \
    {LMQ_TK_ATTN_K, "self_attn.k_proj.weight", D(EMBD), D(KV), ATT},           \
    {LMQ_TK_ATTN_V, "self_attn.v_proj.weight", D(EMBD), D(KV), ATT},           \
    {LMQ_TK_ATTN_Q_NORM, "self_attn.q_norm.weight", D(HEAD), D(1), NRM | ATT}, \
    {LMQ_TK_ATTN_K_NORM, "self_attn.k_norm.weight", D(HEAD), D(1), NRM | ATT}, \
    {LMQ_TK_ATTN_OUT, "self_attn.o_proj.weight", D(Q), D(EMBD), ATT},          \
    {LMQ_TK_ATTN_QKV, "linear_attn.in_proj_qkv.weight", D(EMBD), D(SSM_CONV), REC}, \
    {LMQ_TK_ATTN_GATE, "linear_attn.in_proj_z.weight", D(EMBD), D(SSM_INNER), REC}, \
    {LMQ_TK_SSM_BETA, "linear_attn.in_proj_b.weight", D(EMBD), D(SSM_NV), REC}, \
    {LMQ_TK_SSM_ALPHA, "linear_attn.in_proj_a.weight", D(EMBD), D(SSM_NV), REC}, \
    {LMQ_TK_SSM_CONV1D, "linear_attn.conv1d.weight", D(SSM_K), D(SSM_CONV), REC}, \
    {LMQ_TK_SSM_DT, "linear_attn.dt_bias", D(SSM_NV), D(1), REC},             \
    {LMQ_TK_SSM_A, "linear_attn.A_log", D(SSM_NV), D(1), REC | LMQ_AT_NEG_EXP}, \
    {LMQ_TK_SSM_NORM, "linear_attn.norm.weight", D(SSM_DV), D(1), REC},       \
    {LMQ_TK_SSM_OUT, "linear_attn.out_proj.weight", D(SSM_INNER), D(EMBD), REC}, \
    {LMQ_TK_ATTN_POST_NORM, "post_attention_layernorm.weight", D(EMBD), D(1), NRM}

static const lmq_arch_tensor k_qwen35[] = {
    R_EMBD, R_QWEN35_LAYER, R_MLP(0), R_OUTPUT,
};

/* Experts: fused gate|up [E, 2 F, H] (rows gate then up) and down [E, H, F]
 * in released checkpoints; convert splits gate_up (docs/MODELS.md). */
static const lmq_arch_tensor k_qwen35moe[] = {
    R_EMBD,
    R_QWEN35_LAYER,
    R_EXPERTS("mlp.gate.weight", "mlp.experts.*.gate_proj.weight", "mlp.experts.*.up_proj.weight",
              "mlp.experts.*.down_proj.weight"),
    {LMQ_TK_FFN_GATE_INP_SHEXP, "mlp.shared_expert_gate.weight", D(EMBD), D(1), FFN},
    {LMQ_TK_FFN_GATE_SHEXP, "mlp.shared_expert.gate_proj.weight", D(EMBD), D(FF_SHEXP), FFN},
    {LMQ_TK_FFN_UP_SHEXP, "mlp.shared_expert.up_proj.weight", D(EMBD), D(FF_SHEXP), FFN},
    {LMQ_TK_FFN_DOWN_SHEXP, "mlp.shared_expert.down_proj.weight", D(FF_SHEXP), D(EMBD), FFN},
    R_OUTPUT,
};

/* gpt-oss: q/k/v/o biases, attention sinks, every layer's FFN 4-of-N experts
 * with biases (router too). The checkpoint's experts are MXFP4
 * (`*_blocks` + `*_scales`, gate and up rows interleaved): convert_hf.c
 * copies the blocks into lmq's MXFP4 type and splits gate from up. */
static const lmq_arch_tensor k_gptoss[] = {
    R_EMBD,
    R_ATTN_NORM,
    R_QKV,
    R_QKV_BIAS(0),
    R_ATTN_OUT,
    {LMQ_TK_ATTN_OUT_BIAS, "self_attn.o_proj.bias", D(EMBD), D(1), 0},
    {LMQ_TK_ATTN_SINKS, "self_attn.sinks", D(HEADS), D(1), 0},
    {LMQ_TK_ATTN_POST_NORM, "post_attention_layernorm.weight", D(EMBD), D(1), NRM}, /* the pre-FFN norm */
    {LMQ_TK_FFN_GATE_INP, "mlp.router.weight", D(EMBD), D(EXPERT), 0},
    {LMQ_TK_FFN_GATE_INP_BIAS, "mlp.router.bias", D(EXPERT), D(1), 0},
    {LMQ_TK_FFN_GATE_EXPS, "mlp.experts.gate_up_proj", D(EMBD), D(FF_EXP), 0, D(EXPERT)},
    {LMQ_TK_FFN_UP_EXPS, "mlp.experts.gate_up_proj", D(EMBD), D(FF_EXP), 0, D(EXPERT)},
    {LMQ_TK_FFN_DOWN_EXPS, "mlp.experts.down_proj", D(FF_EXP), D(EMBD), 0, D(EXPERT)},
    {LMQ_TK_FFN_GATE_EXPS_BIAS, "mlp.experts.gate_up_proj_bias", D(FF_EXP), D(EXPERT), 0},
    {LMQ_TK_FFN_UP_EXPS_BIAS, "mlp.experts.gate_up_proj_bias", D(FF_EXP), D(EXPERT), 0},
    {LMQ_TK_FFN_DOWN_EXPS_BIAS, "mlp.experts.down_proj_bias", D(EMBD), D(EXPERT), 0},
    R_OUTPUT,
};

/* Gemma 4 (text): Gemma 3's sandwich block with plain-weight norms, k and
 * v absent on the shared-KV layers (v also on K = V layers), per-layer
 * embeddings (PLE) and a per-layer output scalar. rope_freqs.weight is
 * generated by convert (llama.cpp's form of the global layers' proportional
 * RoPE: divisor 1 on the rotated pairs, 1e30 on the rest). */
static const lmq_arch_tensor k_gemma4[] = {
    R_EMBD,
    {LMQ_TK_ROPE_FREQS, NULL, D(ROT_HALF), D(1), OPT},
    {LMQ_TK_PER_LAYER_TOKEN_EMBD, "model.embed_tokens_per_layer.weight", D(PLE_ALL), D(VOCAB), OPT},
    {LMQ_TK_PER_LAYER_MODEL_PROJ, "model.per_layer_model_projection.weight", D(EMBD), D(PLE_ALL), OPT},
    {LMQ_TK_PER_LAYER_PROJ_NORM, "model.per_layer_projection_norm.weight", D(PLE), D(1), OPT | NRM},
    R_ATTN_NORM,
    {LMQ_TK_ATTN_Q, "self_attn.q_proj.weight", D(EMBD), D(Q), 0},
    {LMQ_TK_ATTN_K, "self_attn.k_proj.weight", D(EMBD), D(KV), OPT},
    {LMQ_TK_ATTN_V, "self_attn.v_proj.weight", D(EMBD), D(KV), OPT},
    {LMQ_TK_ATTN_Q_NORM, "self_attn.q_norm.weight", D(HEAD), D(1), NRM},
    {LMQ_TK_ATTN_K_NORM, "self_attn.k_norm.weight", D(HEAD), D(1), NRM | OPT},
    R_ATTN_OUT,
    R_SANDWICH_ATTN,
    R_FFN_NORM("pre_feedforward_layernorm.weight"),
    R_MLP(FFN),
    R_SANDWICH_FFN,
    /* MoE (26B-A4B): experts beside the dense MLP; gate_up_proj [E, 2F, H] fused, split by convert */
    R_EXPERTS("router.proj.weight", "experts.*.gate_proj", "experts.*.up_proj", "experts.*.down_proj"),
    {LMQ_TK_FFN_GATE_INP_SCALE, "router.scale", D(EMBD), D(1), OPT},
    {LMQ_TK_FFN_DOWN_EXPS_SCALE, "router.per_expert_scale", D(EXPERT), D(1), OPT},
    {LMQ_TK_FFN_PRE_NORM_2, "pre_feedforward_layernorm_2.weight", D(EMBD), D(1), OPT | NRM},
    {LMQ_TK_FFN_POST_NORM_1, "post_feedforward_layernorm_1.weight", D(EMBD), D(1), OPT | NRM},
    {LMQ_TK_FFN_POST_NORM_2, "post_feedforward_layernorm_2.weight", D(EMBD), D(1), OPT | NRM},
    {LMQ_TK_FFN_GATE_UP_EXPS, NULL, D(EMBD), D(FF_EXP2), OPT, D(EXPERT)}, /* llama.cpp's GGUFs */
    {LMQ_TK_PER_LAYER_INP_GATE, "per_layer_input_gate.weight", D(EMBD), D(PLE), OPT},
    {LMQ_TK_PER_LAYER_PROJ, "per_layer_projection.weight", D(PLE), D(EMBD), OPT},
    {LMQ_TK_PER_LAYER_POST_NORM, "post_per_layer_input_norm.weight", D(EMBD), D(1), OPT | NRM},
    {LMQ_TK_LAYER_OUT_SCALE, "layer_scalar", D(1), D(1), OPT},
    R_OUTPUT,
};

static const lmq_arch k_archs[LMQ_ARCH_COUNT] = {
    [LMQ_ARCH_LLAMA] = {.id = LMQ_ARCH_LLAMA, .name = "llama",
                        .hf_class = {"LlamaForCausalLM", "MistralForCausalLM", "MixtralForCausalLM"},
                        .hf_model_type = {"llama", "mistral", "mixtral"},
                        .moe_norm_topk = true,
                        .tensors = k_llama, .n_tensors = N_OF(k_llama),
                        .gguf_rope_permuted = true, .act = LMQ_ACT_SILU, .swa = LMQ_SWA_ALL},
    [LMQ_ARCH_QWEN2] = {.id = LMQ_ARCH_QWEN2, .name = "qwen2", .hf_class = {"Qwen2ForCausalLM"},
                        .hf_model_type = {"qwen2"}, .tensors = k_qwen2, .n_tensors = N_OF(k_qwen2),
                        .act = LMQ_ACT_SILU, .swa = LMQ_SWA_ALL},
    [LMQ_ARCH_QWEN3] = {.id = LMQ_ARCH_QWEN3, .name = "qwen3", .hf_class = {"Qwen3ForCausalLM"},
                        .hf_model_type = {"qwen3"}, .tensors = k_qwen3, .n_tensors = N_OF(k_qwen3),
                        .act = LMQ_ACT_SILU, .swa = LMQ_SWA_ALL},
    [LMQ_ARCH_GEMMA2] = {.id = LMQ_ARCH_GEMMA2, .name = "gemma2", .hf_class = {"Gemma2ForCausalLM"},
                         .hf_model_type = {"gemma2"}, .tensors = k_gemma2, .n_tensors = N_OF(k_gemma2),
                         .norm_plus_one = true, .embd_scale = true, .tied_default = true,
                         .act = LMQ_ACT_GELU_TANH, .swa = LMQ_SWA_EVEN},
    [LMQ_ARCH_GEMMA3] = {.id = LMQ_ARCH_GEMMA3, .name = "gemma3",
                         .hf_class = {"Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"},
                         .hf_model_type = {"gemma3_text", "gemma3"}, .tensors = k_gemma3,
                         .n_tensors = N_OF(k_gemma3), .norm_plus_one = true, .embd_scale = true,
                         .tied_default = true, .act = LMQ_ACT_GELU_TANH, .swa = LMQ_SWA_PERIOD, .swa_period = 6,
                         .rope_theta_swa = 10000.0f, .swa_rope_unscaled = true},
    [LMQ_ARCH_PHI3] = {.id = LMQ_ARCH_PHI3, .name = "phi3", .hf_class = {"Phi3ForCausalLM"},
                       .hf_model_type = {"phi3"}, .tensors = k_phi3, .n_tensors = N_OF(k_phi3),
                       .act = LMQ_ACT_SILU, .swa = LMQ_SWA_ALL},
    [LMQ_ARCH_QWEN3MOE] = {.id = LMQ_ARCH_QWEN3MOE, .name = "qwen3moe", .hf_class = {"Qwen3MoeForCausalLM"},
                           .hf_model_type = {"qwen3_moe"}, .tensors = k_qwen3moe, .n_tensors = N_OF(k_qwen3moe),
                           .act = LMQ_ACT_SILU, .swa = LMQ_SWA_ALL, .moe_norm_topk = true},
    [LMQ_ARCH_QWEN2MOE] = {.id = LMQ_ARCH_QWEN2MOE, .name = "qwen2moe", .hf_class = {"Qwen2MoeForCausalLM"},
                           .hf_model_type = {"qwen2_moe"}, .tensors = k_qwen2moe, .n_tensors = N_OF(k_qwen2moe),
                           .act = LMQ_ACT_SILU, .swa = LMQ_SWA_ALL, .moe_norm_topk = false},
    [LMQ_ARCH_QWEN35] = {.id = LMQ_ARCH_QWEN35, .name = "qwen35",
                         .hf_class = {"Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration"},
                         .hf_model_type = {"qwen3_5_text", "qwen3_5"}, .tensors = k_qwen35,
                         .n_tensors = N_OF(k_qwen35), .norm_plus_one = true, .act = LMQ_ACT_SILU,
                         .swa = LMQ_SWA_ALL, .attn_out_gate = true, .ffn_norm_post_attn = true, .hybrid = true},
    [LMQ_ARCH_QWEN35MOE] = {.id = LMQ_ARCH_QWEN35MOE, .name = "qwen35moe",
                            .hf_class = {"Qwen3_5MoeForCausalLM", "Qwen3_5MoeForConditionalGeneration"},
                            .hf_model_type = {"qwen3_5_moe_text", "qwen3_5_moe"}, .tensors = k_qwen35moe,
                            .n_tensors = N_OF(k_qwen35moe), .norm_plus_one = true, .act = LMQ_ACT_SILU,
                            .swa = LMQ_SWA_ALL, .moe_norm_topk = true, .attn_out_gate = true,
                            .ffn_norm_post_attn = true, .hybrid = true},
    [LMQ_ARCH_GPT_OSS] = {.id = LMQ_ARCH_GPT_OSS, .name = "gpt-oss", .hf_class = {"GptOssForCausalLM"},
                          .hf_model_type = {"gpt_oss"}, .tensors = k_gptoss, .n_tensors = N_OF(k_gptoss),
                          .act = LMQ_ACT_SWIGLU_OAI, .swa = LMQ_SWA_EVEN, .gating = LMQ_GATING_TOPK_SOFTMAX,
                          .ffn_norm_post_attn = true},
    [LMQ_ARCH_SMOLLM3] = {.id = LMQ_ARCH_SMOLLM3, .name = "smollm3", .hf_class = {"SmolLM3ForCausalLM"},
                          .hf_model_type = {"smollm3"}, .tensors = k_llama, .n_tensors = N_OF(k_llama),
                          .gguf_rope_permuted = true, .tied_default = true, .act = LMQ_ACT_SILU,
                          .swa = LMQ_SWA_ALL, .nope_interval = 4},
    [LMQ_ARCH_MISTRAL3] = {.id = LMQ_ARCH_MISTRAL3, .name = "mistral3",
                           .hf_class = {"Ministral3ForCausalLM", "Mistral3ForConditionalGeneration"},
                           .hf_model_type = {"ministral3", "mistral3"}, .tensors = k_llama, .n_tensors = N_OF(k_llama),
                           .gguf_rope_permuted = true, .act = LMQ_ACT_SILU, .swa = LMQ_SWA_ALL},
    [LMQ_ARCH_GEMMA4] = {.id = LMQ_ARCH_GEMMA4, .name = "gemma4",
                         .hf_class = {"Gemma4ForCausalLM", "Gemma4ForConditionalGeneration"},
                         .hf_model_type = {"gemma4_text", "gemma4"}, .tensors = k_gemma4,
                         .n_tensors = N_OF(k_gemma4), .embd_scale = true, .tied_default = true,
                         .act = LMQ_ACT_GELU_TANH, .swa = LMQ_SWA_PERIOD, .swa_period = 6,
                         .rope_theta_swa = 10000.0f, .swa_heads = true, .v_norm = true, .attn_scale_one = true,
                         .moe_norm_topk = true},
};

const lmq_arch *lmq_arch_get(lmq_arch_id id)
{
    return (unsigned)id < LMQ_ARCH_COUNT ? &k_archs[id] : NULL;
}

const lmq_arch *lmq_arch_by_name(const char *name)
{
    if (!name) return NULL;
    for (int i = 0; i < LMQ_ARCH_COUNT; i++)
        if (!strcmp(name, k_archs[i].name)) return &k_archs[i];
    return NULL;
}

const lmq_arch *lmq_arch_by_hf(const char *model_type, const char *hf_class)
{
    for (int i = 0; i < LMQ_ARCH_COUNT; i++)
        for (int j = 0; j < 3; j++) {
            if (model_type && k_archs[i].hf_model_type[j] && !strcmp(model_type, k_archs[i].hf_model_type[j]))
                return &k_archs[i];
        }
    if (model_type) return NULL;
    for (int i = 0; i < LMQ_ARCH_COUNT; i++)
        for (int j = 0; j < 3; j++)
            if (hf_class && k_archs[i].hf_class[j] && !strcmp(hf_class, k_archs[i].hf_class[j])) return &k_archs[i];
    return NULL;
}

const lmq_arch_tensor *lmq_arch_tensor_of(const lmq_arch *a, lmq_tensor_kind k)
{
    if (!a) return NULL;
    for (size_t i = 0; i < a->n_tensors; i++)
        if (a->tensors[i].kind == k) return &a->tensors[i];
    return NULL;
}

const char *lmq_tensor_kind_name(lmq_tensor_kind k)
{
    return (unsigned)k < LMQ_TK_COUNT ? k_kinds[k].name : "?";
}

bool lmq_tensor_kind_per_layer(lmq_tensor_kind k)
{
    return (unsigned)k < LMQ_TK_COUNT && k_kinds[k].per_layer;
}

bool lmq_tensor_gguf_name(lmq_tensor_kind k, int il, char *out, size_t cap)
{
    if ((unsigned)k >= LMQ_TK_COUNT || !out || !cap) return false;
    int n = k_kinds[k].per_layer ? snprintf(out, cap, "blk.%d.%s", il, k_kinds[k].name)
                                 : snprintf(out, cap, "%s", k_kinds[k].name);
    return n > 0 && (size_t)n < cap;
}

bool lmq_tensor_parse_name(const char *name, lmq_tensor_kind *kind, int *layer)
{
    if (!name) return false;
    int il = -1;
    const char *rest = name;
    if (!strncmp(name, "blk.", 4)) {
        const char *p = name + 4;
        long n = 0;
        int digits = 0;
        for (; *p >= '0' && *p <= '9'; p++) {
            if (++digits > 6) return false;
            n = n * 10 + (*p - '0');
        }
        if (!digits || *p != '.') return false;
        il = (int)n;
        rest = p + 1;
    }
    for (int k = 0; k < LMQ_TK_COUNT; k++)
        if (k_kinds[k].per_layer == (il >= 0) && !strcmp(rest, k_kinds[k].name)) {
            if (kind) *kind = (lmq_tensor_kind)k;
            if (layer) *layer = il;
            return true;
        }
    return false;
}

const char *lmq_arch_names(void)
{
    return "llama (and Mixtral), qwen2, qwen2moe, qwen3, qwen3moe, qwen35, qwen35moe, gpt-oss, smollm3, mistral3, gemma2, gemma3, phi3, gemma4";
}

/* ================================================================ hyper-parameters */

static lmq_status dim_key(const lmq_meta *m, const char *arch, const char *sfx, const char *path, bool required,
                          int64_t dflt, int64_t lo, int64_t hi, int64_t *out)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, sfx);
    uint64_t v;
    lmq_status s = lmq_meta_get_u64(m, key, &v);
    if (s == LMQ_ERR_NOT_FOUND && !required) {
        lmq_error_clear();
        *out = dflt;
        return LMQ_OK;
    }
    if (s) return lmq_error(s, "%s: metadata key '%s' is %s", path, key, s == LMQ_ERR_NOT_FOUND ? "missing" : "not an unsigned integer");
    if ((int64_t)v < lo || v > (uint64_t)hi)
        return lmq_error(LMQ_ERR_FORMAT, "%s: metadata key '%s' = %llu is outside [%lld, %lld]", path, key,
                         (unsigned long long)v, (long long)lo, (long long)hi);
    *out = (int64_t)v;
    return LMQ_OK;
}

/* Element i of an integer array value (u8 .. i64); false for other types or a negative value. */
static bool arr_int(lmq_vtype et, const void *data, uint64_t i, int64_t *out)
{
    switch (et) {
    case LMQ_V_U8: *out = ((const uint8_t *)data)[i]; return true;
    case LMQ_V_I8: *out = ((const int8_t *)data)[i]; break;
    case LMQ_V_U16: *out = ((const uint16_t *)data)[i]; return true;
    case LMQ_V_I16: *out = ((const int16_t *)data)[i]; break;
    case LMQ_V_U32: *out = ((const uint32_t *)data)[i]; return true;
    case LMQ_V_I32: *out = ((const int32_t *)data)[i]; break;
    case LMQ_V_U64: {
        const uint64_t v = ((const uint64_t *)data)[i];
        if (v > INT64_MAX) return false;
        *out = (int64_t)v;
        return true;
    }
    case LMQ_V_I64: *out = ((const int64_t *)data)[i]; break;
    default: return false;
    }
    return *out >= 0;
}

lmq_status lmq_arch_layer_values(const lmq_meta *m, const lmq_arch *a, const char *sfx, int64_t n_layer,
                                 const char *path, int64_t lo, int64_t hi, int64_t dflt, int64_t *out)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", a->name, sfx);
    lmq_vtype et;
    uint64_t n;
    const void *data;
    if (lmq_meta_get_arr(m, key, &et, &n, &data) != LMQ_OK) {
        lmq_error_clear();
        int64_t v;
        lmq_status s = dim_key(m, a->name, sfx, path, false, dflt, lo, hi, &v);
        for (int64_t il = 0; !s && il < n_layer; il++) out[il] = v;
        return s;
    }
    /* llama.cpp's per-layer form; GGUFs may carry entries for MTP blocks after the main layers */
    if (n < (uint64_t)n_layer)
        return lmq_error(LMQ_ERR_FORMAT, "%s: metadata key '%s' has %llu entries for %lld layers", path, key,
                         (unsigned long long)n, (long long)n_layer);
    for (int64_t il = 0; il < n_layer; il++)
        if (!arr_int(et, data, (uint64_t)il, &out[il]) || out[il] < lo || out[il] > hi)
            return lmq_error(LMQ_ERR_FORMAT, "%s: metadata key '%s'[%lld] is not an integer in [%lld, %lld]", path, key,
                             (long long)il, (long long)lo, (long long)hi);
    return LMQ_OK;
}

/* A key that may be per layer: the largest value (what buffers are sized for). */
static lmq_status dim_key_max(const lmq_meta *m, const lmq_arch *a, const char *sfx, int64_t n_layer, const char *path,
                              bool required, int64_t dflt, int64_t lo, int64_t hi, int64_t *out)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", a->name, sfx);
    if (!lmq_meta_find(m, key) || lmq_meta_get_arr(m, key, NULL, NULL, NULL) != LMQ_OK) {
        lmq_error_clear();
        return dim_key(m, a->name, sfx, path, required, dflt, lo, hi, out);
    }
    int64_t *v = malloc((size_t)n_layer * sizeof *v);
    if (!v) return lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", path);
    lmq_status s = lmq_arch_layer_values(m, a, sfx, n_layer, path, lo, hi, dflt, v);
    *out = 0;
    for (int64_t il = 0; !s && il < n_layer; il++)
        if (v[il] > *out) *out = v[il];
    free(v);
    return s;
}

lmq_status lmq_arch_dims_from_meta(const lmq_meta *m, const lmq_arch *a, const char *path, lmq_arch_dims *d)
{
    memset(d, 0, sizeof *d);
    if (!a) return lmq_error(LMQ_ERR_INVALID_ARG, "%s: no architecture", path);
    const char *n = a->name;
    lmq_status s;
    if ((s = dim_key(m, n, "block_count", path, true, 0, 1, 4096, &d->n_layer))) return s;
    if ((s = dim_key(m, n, "embedding_length", path, true, 0, 1, 1 << 20, &d->n_embd))) return s;
    /* expert-only families (qwen35moe) have no dense width */
    int64_t n_exp_peek;
    if ((s = dim_key(m, n, "expert_count", path, false, 0, 0, 4096, &n_exp_peek))) return s;
    if ((s = dim_key_max(m, a, "feed_forward_length", d->n_layer, path, n_exp_peek == 0, 0, n_exp_peek ? 0 : 1, 1 << 22,
                         &d->n_ff)))
        return s;
    if ((s = dim_key(m, n, "attention.head_count", path, true, 0, 1, 4096, &d->n_head))) return s;
    if ((s = dim_key_max(m, a, "attention.head_count_kv", d->n_layer, path, false, d->n_head, 1, d->n_head,
                         &d->n_head_kv)))
        return s;
    if (d->n_head % d->n_head_kv)
        return lmq_error(LMQ_ERR_FORMAT, "%s: %s.attention.head_count %lld is not a multiple of head_count_kv %lld",
                         path, n, (long long)d->n_head, (long long)d->n_head_kv);
    int64_t dflt_hd = d->n_embd % d->n_head ? 0 : d->n_embd / d->n_head;
    if ((s = dim_key(m, n, "attention.key_length", path, dflt_hd == 0, dflt_hd, 2, 1024, &d->head_dim))) return s;
    if (d->head_dim % 2) return lmq_error(LMQ_ERR_FORMAT, "%s: head dimension %lld is odd", path, (long long)d->head_dim);
    int64_t vlen;
    if ((s = dim_key(m, n, "attention.value_length", path, false, d->head_dim, 1, 1024, &vlen))) return s;
    if (vlen != d->head_dim)
        return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: %s.attention.value_length %lld differs from key_length %lld", path,
                         n, (long long)vlen, (long long)d->head_dim);
    if ((s = dim_key(m, n, "rope.dimension_count", path, false, d->head_dim, 2, d->head_dim, &d->n_rot))) return s;
    if (d->n_rot % 2) return lmq_error(LMQ_ERR_FORMAT, "%s: rope dimension %lld is odd", path, (long long)d->n_rot);
    if ((s = dim_key(m, n, "vocab_size", path, false, 0, 0, 1 << 24, &d->n_vocab))) return s;
    if ((s = dim_key(m, n, "expert_count", path, false, 0, 0, 4096, &d->n_expert))) return s;
    if ((s = dim_key(m, n, "expert_used_count", path, d->n_expert > 0, 0, d->n_expert > 0 ? 1 : 0, d->n_expert,
                     &d->n_expert_used)))
        return s;
    if ((s = dim_key(m, n, "expert_feed_forward_length", path, d->n_expert > 0 && d->n_ff == 0, d->n_ff, 1, 1 << 22,
                     &d->n_ff_exp)))
        return s;
    if ((s = dim_key(m, n, "expert_shared_feed_forward_length", path, false, 0, 0, 1 << 22, &d->n_ff_shexp))) return s;
    d->head_dim_swa = d->head_dim;
    d->n_rot_swa = d->n_rot;
    if (a->swa_heads) {
        if ((s = dim_key(m, n, "attention.key_length_swa", path, false, d->head_dim, 2, 1024, &d->head_dim_swa)))
            return s;
        if (d->head_dim_swa % 2)
            return lmq_error(LMQ_ERR_FORMAT, "%s: %s.attention.key_length_swa %lld is odd", path, n,
                             (long long)d->head_dim_swa);
        if ((s = dim_key(m, n, "attention.value_length_swa", path, false, d->head_dim_swa, 1, 1024, &vlen))) return s;
        if (vlen != d->head_dim_swa)
            return lmq_error(LMQ_ERR_UNSUPPORTED, "%s: %s.attention.value_length_swa %lld differs from key_length_swa "
                             "%lld", path, n, (long long)vlen, (long long)d->head_dim_swa);
        if ((s = dim_key(m, n, "rope.dimension_count_swa", path, false, d->head_dim_swa, 2, d->head_dim_swa,
                         &d->n_rot_swa)))
            return s;
        if (d->n_rot_swa % 2)
            return lmq_error(LMQ_ERR_FORMAT, "%s: %s.rope.dimension_count_swa is odd", path, n);
        if ((s = dim_key(m, n, "embedding_length_per_layer_input", path, false, 0, 0, 1 << 16, &d->n_embd_ple)))
            return s;
        if ((s = dim_key(m, n, "attention.shared_kv_layers", path, false, 0, 0, d->n_layer - 1, &d->n_kv_shared)))
            return s;
    }
    if (!a->hybrid) return LMQ_OK;
    if ((s = dim_key(m, n, "nextn_predict_layers", path, false, 0, 0, d->n_layer - 1, &d->n_nextn))) return s;
    d->n_layer -= d->n_nextn;
    int64_t inner;
    if ((s = dim_key(m, n, "ssm.conv_kernel", path, true, 0, 1, 64, &d->ssm_conv))) return s;
    if ((s = dim_key(m, n, "ssm.state_size", path, true, 0, 1, 1024, &d->ssm_dk))) return s;
    if ((s = dim_key(m, n, "ssm.group_count", path, true, 0, 1, 1024, &d->ssm_nk))) return s;
    if ((s = dim_key(m, n, "ssm.time_step_rank", path, true, 0, 1, 4096, &d->ssm_nv))) return s;
    if ((s = dim_key(m, n, "ssm.inner_size", path, true, 0, 1, 1 << 20, &inner))) return s;
    if (d->ssm_nv % d->ssm_nk)
        return lmq_error(LMQ_ERR_FORMAT, "%s: %s.ssm.time_step_rank %lld is not a multiple of ssm.group_count %lld", path,
                         n, (long long)d->ssm_nv, (long long)d->ssm_nk);
    if (inner % d->ssm_nv || inner / d->ssm_nv > 1024)
        return lmq_error(LMQ_ERR_FORMAT, "%s: %s.ssm.inner_size %lld is not time_step_rank %lld value heads of <= 1024",
                         path, n, (long long)inner, (long long)d->ssm_nv);
    d->ssm_dv = inner / d->ssm_nv;
    return LMQ_OK;
}

int64_t lmq_arch_dim(const lmq_arch_dims *d, lmq_dim x)
{
    switch (x) {
    case LMQ_DIM_1: return 1;
    case LMQ_DIM_EMBD: return d->n_embd;
    case LMQ_DIM_VOCAB: return d->n_vocab;
    case LMQ_DIM_Q: return d->n_head * d->head_dim;
    case LMQ_DIM_KV: return d->n_head_kv * d->head_dim;
    case LMQ_DIM_QKV: return (d->n_head + 2 * d->n_head_kv) * d->head_dim;
    case LMQ_DIM_FF: return d->n_ff;
    case LMQ_DIM_FF2: return 2 * d->n_ff;
    case LMQ_DIM_HEAD: return d->head_dim;
    case LMQ_DIM_ROT_HALF: return d->n_rot / 2;
    case LMQ_DIM_EXPERT: return d->n_expert;
    case LMQ_DIM_FF_EXP: return d->n_ff_exp;
    case LMQ_DIM_FF_SHEXP: return d->n_ff_shexp;
    case LMQ_DIM_Q2: return 2 * d->n_head * d->head_dim;
    case LMQ_DIM_SSM_CONV: return 2 * d->ssm_nk * d->ssm_dk + d->ssm_nv * d->ssm_dv;
    case LMQ_DIM_SSM_INNER: return d->ssm_nv * d->ssm_dv;
    case LMQ_DIM_SSM_NV: return d->ssm_nv;
    case LMQ_DIM_SSM_K: return d->ssm_conv;
    case LMQ_DIM_SSM_DV: return d->ssm_dv;
    case LMQ_DIM_HEADS: return d->n_head;
    case LMQ_DIM_PLE: return d->n_embd_ple;
    case LMQ_DIM_PLE_ALL: return d->n_layer * d->n_embd_ple;
    case LMQ_DIM_FF_EXP2: return 2 * d->n_ff_exp;
    }
    return 0;
}

lmq_status lmq_arch_layer_kinds(const lmq_meta *m, const lmq_arch *a, int64_t n_layer, const char *path, bool *rec)
{
    for (int64_t il = 0; il < n_layer; il++) rec[il] = false;
    if (!a || !a->hybrid) return LMQ_OK;
    lmq_vtype et;
    uint64_t n;
    const void *data;
    if (lmq_meta_get_arr(m, "lmq.layer.recurrent", &et, &n, &data) == LMQ_OK) {
        if (et != LMQ_V_BOOL || n != (uint64_t)n_layer)
            return lmq_error(LMQ_ERR_FORMAT, "%s: metadata key 'lmq.layer.recurrent' must be %lld bools", path,
                             (long long)n_layer);
        for (int64_t il = 0; il < n_layer; il++) rec[il] = ((const uint8_t *)data)[il] != 0;
        return LMQ_OK;
    }
    lmq_error_clear();
    int64_t interval;
    lmq_status s = dim_key(m, a->name, "full_attention_interval", path, false, 4, 1, 4096, &interval);
    if (s) return s;
    for (int64_t il = 0; il < n_layer; il++) rec[il] = (il + 1) % interval != 0;
    return LMQ_OK;
}

int64_t lmq_arch_rec_state_floats(const lmq_arch_dims *d)
{
    if (d->ssm_conv <= 0) return 0;
    return (d->ssm_conv - 1) * lmq_arch_dim(d, LMQ_DIM_SSM_CONV) + d->ssm_nv * d->ssm_dk * d->ssm_dv;
}

lmq_status lmq_arch_nope_layers(const lmq_meta *m, const lmq_arch *a, int64_t n_layer, const char *path, bool *nope)
{
    for (int64_t il = 0; il < n_layer; il++) nope[il] = false;
    lmq_vtype et;
    uint64_t n;
    const void *data;
    if (lmq_meta_get_arr(m, "lmq.rope.nope_layers", &et, &n, &data) == LMQ_OK) {
        if (et != LMQ_V_BOOL || n != (uint64_t)n_layer)
            return lmq_error(LMQ_ERR_FORMAT, "%s: metadata key 'lmq.rope.nope_layers' must be %lld bools", path,
                             (long long)n_layer);
        for (int64_t il = 0; il < n_layer; il++) nope[il] = ((const uint8_t *)data)[il] != 0;
        return LMQ_OK;
    }
    lmq_error_clear();
    if (a && a->nope_interval > 0)
        for (int64_t il = 0; il < n_layer; il++) nope[il] = (il + 1) % a->nope_interval == 0;
    return LMQ_OK;
}

/* ================================================================ per-layer geometry */

/* Sliding flags: llama.cpp's <arch>.attention.sliding_window_pattern (bools),
 * lmq's lmq.attention.sliding_window_layers, or the family's pattern. */
static lmq_status swa_flags(const lmq_meta *m, const lmq_arch *a, int64_t n_layer, const char *path, bool *swa)
{
    char key[128];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", a->name);
    const char *keys[2] = {key, "lmq.attention.sliding_window_layers"};
    for (int k = 0; k < 2; k++) {
        lmq_vtype et;
        uint64_t n;
        const void *data;
        if (!lmq_meta_find(m, keys[k])) continue;
        if (lmq_meta_get_arr(m, keys[k], &et, &n, &data) != LMQ_OK || et != LMQ_V_BOOL || n != (uint64_t)n_layer)
            return lmq_error(LMQ_ERR_FORMAT, "%s: metadata key '%s' must be %lld bools", path, keys[k],
                             (long long)n_layer);
        for (int64_t il = 0; il < n_layer; il++) swa[il] = ((const uint8_t *)data)[il] != 0;
        return LMQ_OK;
    }
    for (int64_t il = 0; il < n_layer; il++)
        swa[il] = a->swa == LMQ_SWA_ALL ? true
                : a->swa == LMQ_SWA_EVEN ? il % 2 == 0
                                         : (il + 1) % (a->swa_period > 0 ? a->swa_period : 1) != 0;
    return LMQ_OK;
}

lmq_status lmq_arch_layers(const lmq_meta *m, const lmq_arch *a, const lmq_arch_dims *d, const char *path,
                           lmq_arch_layer *out)
{
    const int64_t nl = d->n_layer;
    int64_t *v = malloc((size_t)nl * sizeof *v);
    bool *swa = malloc((size_t)nl * sizeof *swa);
    lmq_status s = v && swa ? LMQ_OK : lmq_error(LMQ_ERR_NOMEM, "%s: out of memory", path);
    if (!s) s = lmq_arch_layer_values(m, a, "attention.head_count_kv", nl, path, 1, d->n_head, d->n_head, v);
    for (int64_t il = 0; !s && il < nl; il++) out[il].n_head_kv = v[il];
    if (!s) s = lmq_arch_layer_values(m, a, "feed_forward_length", nl, path, 0, 1 << 22, d->n_ff, v);
    for (int64_t il = 0; !s && il < nl; il++) out[il].n_ff = v[il];
    if (!s) s = swa_flags(m, a, nl, path, swa);
    for (int64_t il = 0; !s && il < nl; il++) {
        lmq_arch_layer *l = &out[il];
        l->swa = swa[il];
        const bool own = a->swa_heads && l->swa;
        l->head_dim = own ? d->head_dim_swa : d->head_dim;
        l->n_rot = own ? d->n_rot_swa : d->n_rot;
        l->kv_src = il;
        if (il < nl - d->n_kv_shared) continue;
        for (int64_t j = nl - d->n_kv_shared - 1; j >= 0 && l->kv_src == il; j--)
            if (swa[j] == swa[il]) l->kv_src = j;
        const lmq_arch_layer *src = &out[l->kv_src];
        if (l->kv_src == il)
            s = lmq_error(LMQ_ERR_FORMAT, "%s: layer %lld shares the KV cache (%s.attention.shared_kv_layers %lld) but "
                          "no earlier layer is of its kind", path, (long long)il, a->name, (long long)d->n_kv_shared);
        else if (src->n_head_kv != l->n_head_kv || src->head_dim != l->head_dim)
            s = lmq_error(LMQ_ERR_FORMAT, "%s: layer %lld reads the KV cache of layer %lld, which has %lld KV heads of "
                          "%lld, not %lld of %lld", path, (long long)il, (long long)l->kv_src,
                          (long long)src->n_head_kv, (long long)src->head_dim, (long long)l->n_head_kv,
                          (long long)l->head_dim);
    }
    free(v);
    free(swa);
    return s;
}

void lmq_arch_dims_for_layer(const lmq_arch_dims *d, const lmq_arch_layer *l, lmq_arch_dims *out)
{
    *out = *d;
    out->n_head_kv = l->n_head_kv;
    out->n_ff = l->n_ff;
    out->head_dim = l->head_dim;
    out->n_rot = l->n_rot;
}

uint64_t lmq_arch_kv_bytes_per_token(const lmq_arch_dims *d, const lmq_arch_layer *l, const bool *rec,
                                     unsigned bytes_per_value)
{
    uint64_t b = 0;
    for (int64_t il = 0; il < d->n_layer; il++)
        if (l[il].kv_src == il && !(rec && rec[il]))
            b += 2u * (uint64_t)l[il].n_head_kv * (uint64_t)l[il].head_dim * bytes_per_value;
    return b;
}
