#!/usr/bin/python3
"""Synthetic Qwen3-MoE checkpoint (random weights) for speed and memory benchmarks,
and its dense twin with the same active parameter count (docs/PERF.md, "Mixture of
experts"). Quality figures on these mean nothing.

  scripts/make_synthetic_moe.py OUT_DIR [--dense] [--layers 24] [--seed N]
                                [--tokenizer PATH/tokenizer.model]

MoE (default): Qwen3MoeForCausalLM, hidden 1024, 24 layers, 16 heads / 4 KV heads of
128, 64 experts of width 512, 8 used per token, 32000-token vocabulary, untied:
about 2.6 B parameters, 0.5 B active. --dense: Qwen3ForCausalLM with the same
attention and an MLP of width 8 x 512 = 4096, i.e. the MoE's active parameters.
Deterministic for a given seed. Needs python3-numpy (Debian). The tokenizer is the
Llama 2 SentencePiece model from the shared data ($LMQ_SHARED or ../shared beside
the checkout) unless --tokenizer names another.
"""
import argparse, json, os, shutil, struct, sys
import numpy as np

H, NH, NKV, HD, V = 1024, 16, 4, 128, 32000
N_EXP, K_EXP, FF_EXP = 64, 8, 512


def bf16_bytes(a):
    u = a.astype("<f4").view("<u4").astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2").tobytes()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--dense", action="store_true")
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--seed", type=int, default=7)
    here = os.path.dirname(os.path.abspath(__file__))
    shared = os.environ.get("LMQ_SHARED", os.path.join(here, "..", "..", "shared"))
    ap.add_argument("--tokenizer", default=os.path.join(shared, "models", "llama2-tokenizer", "tokenizer.model"))
    a = ap.parse_args()
    L = a.layers
    shapes = {"model.embed_tokens.weight": (V, H), "model.norm.weight": (H,), "lm_head.weight": (V, H)}
    for l in range(L):
        p = f"model.layers.{l}."
        shapes.update({
            p + "input_layernorm.weight": (H,), p + "post_attention_layernorm.weight": (H,),
            p + "self_attn.q_proj.weight": (NH * HD, H), p + "self_attn.k_proj.weight": (NKV * HD, H),
            p + "self_attn.v_proj.weight": (NKV * HD, H), p + "self_attn.o_proj.weight": (H, NH * HD),
            p + "self_attn.q_norm.weight": (HD,), p + "self_attn.k_norm.weight": (HD,),
        })
        if a.dense:
            ff = K_EXP * FF_EXP
            shapes.update({p + "mlp.gate_proj.weight": (ff, H), p + "mlp.up_proj.weight": (ff, H),
                           p + "mlp.down_proj.weight": (H, ff)})
        else:
            shapes[p + "mlp.gate.weight"] = (N_EXP, H)
            for e in range(N_EXP):
                q = f"{p}mlp.experts.{e}."
                shapes.update({q + "gate_proj.weight": (FF_EXP, H), q + "up_proj.weight": (FF_EXP, H),
                               q + "down_proj.weight": (H, FF_EXP)})
    names = sorted(shapes)
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for n in names:
        nb = int(np.prod(shapes[n])) * 2
        header[n] = {"dtype": "BF16", "shape": list(shapes[n]), "data_offsets": [off, off + nb]}
        off += nb
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    tmp = os.path.join(a.out, "model.safetensors.tmp")
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj)
        for n in names:
            s = shapes[n]
            x = np.ones(s, np.float32) if len(s) == 1 else rng.standard_normal(s, dtype=np.float32) * np.float32(0.02)
            if n.endswith("mlp.gate.weight"):
                x *= np.float32(20.0)  # a router whose choice varies from token to token
            f.write(bf16_bytes(x))
    os.replace(tmp, os.path.join(a.out, "model.safetensors"))
    cfg = {"model_type": "qwen3" if a.dense else "qwen3_moe",
           "architectures": ["Qwen3ForCausalLM" if a.dense else "Qwen3MoeForCausalLM"],
           "hidden_size": H, "num_hidden_layers": L, "num_attention_heads": NH, "num_key_value_heads": NKV,
           "head_dim": HD, "vocab_size": V, "hidden_act": "silu", "max_position_embeddings": 8192,
           "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": False, "bos_token_id": 1,
           "eos_token_id": 2, "attention_bias": False, "torch_dtype": "bfloat16",
           "intermediate_size": K_EXP * FF_EXP}
    if not a.dense:
        cfg.update({"num_experts": N_EXP, "num_experts_per_tok": K_EXP, "moe_intermediate_size": FF_EXP,
                    "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": []})
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    shutil.copy(a.tokenizer, os.path.join(a.out, "tokenizer.model"))
    with open(os.path.join(a.out, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "add_eos_token": False,
                   "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, f, indent=2)
    total = sum(int(np.prod(s)) for s in shapes.values())
    exp = 0 if a.dense else L * N_EXP * 3 * FF_EXP * H
    active = total - exp + exp * K_EXP // N_EXP
    print(f"{a.out}: {'dense' if a.dense else 'moe'}, {total / 1e9:.3f} B parameters, {active / 1e9:.3f} B active")


if __name__ == "__main__":
    sys.exit(main())
