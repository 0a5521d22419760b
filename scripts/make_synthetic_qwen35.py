#!/usr/bin/python3
"""Write a Qwen3.5 hybrid (Gated DeltaNet + gated attention) Hugging Face checkpoint with
random weights at real shapes, for speed and memory benchmarks (quality figures on it
mean nothing; it is random, not trained, but its logits are finite and its activations
stay O(1) through the layers).

  scripts/make_synthetic_qwen35.py OUT_DIR [--preset 0.8b|35b-a3b] [--layers N]
        [--experts N] [--vocab N] [--dtype bf16|f16|f32] [--seed N]
        [--tokenizer-dir DIR] [--dry-run]

Writes config.json, model.safetensors (one file, tensors sorted by name, written one
chunk at a time so memory stays around 100 MB whatever the size) and the tokenizer files
of --tokenizer-dir (default: llama-8m-debtext in the shared data, $LMQ_SHARED or
../shared beside the checkout; 4096 tokens). Deterministic: the same arguments give
byte-identical files. Each tensor has its own random stream (seed, tensor name), so
`--layers N` gives exactly the first N layers of the full model. Needs Debian's
python3-numpy (run with /usr/bin/python3). --dry-run prints the parameter count and
size without writing anything.

Layout: the text-only classes, exactly as shared/models/zoo/qwen35 and zoo/qwen35moe:
Qwen3_5ForCausalLM (model_type qwen3_5_text) for 0.8b, Qwen3_5MoeForCausalLM
(qwen3_5_moe_text) for 35b-a3b; tensors under `model.` (released checkpoints are the VLM
wrapper with the same tensors under `model.language_model.` and this config under
text_config). No MTP layer (mtp_num_hidden_layers 0; the released models have 1) and no
vision tower.

Presets and where each number comes from ("SPEC" = shared/reference/arch-2026/SPEC.md;
"slime" = the Megatron launch scripts THUDM/slime scripts/models/qwen3.5-0.8B.sh and
qwen3.5-35B-A3B.sh; "mirrors" = copies of the released text_config in public test
fixtures, found with the search tool; all sources that give a number agree):
  0.8b (Qwen3.5-0.8B):
    24 layers, hidden 1024, 8 q heads / 2 KV heads, head_dim 256       SPEC 1.8 + slime + mirrors
    intermediate 3584, tie_word_embeddings true                         slime + mirrors
    linear nk = nv = 16, dk = dv = 128, conv kernel 4                   SPEC 1.2/1.6/1.8 + mirrors
    layer_types 3 x linear + 1 full, full_attention_interval 4          SPEC 1.2 + mirrors
    rope_theta 1e7, partial_rotary_factor 0.25, mrope_section
      [11,11,10], mrope_interleaved, rms_norm_eps 1e-6                  SPEC 1.2 + slime + mirrors
    vocab_size 248320, max_position_embeddings 262144                   SPEC 1.2 + slime + mirrors
  35b-a3b (Qwen3.5-35B-A3B):
    40 layers, hidden 2048, 16 q heads / 2 KV heads, head_dim 256       SPEC 1.8 + slime + mirrors
    256 experts top-8, moe_intermediate_size 512, shared expert 512     SPEC 1.2/1.8 + slime + mirrors
    linear nk 16, nv 32, dk = dv = 128, conv 4; rope/eps as 0.8b        SPEC 1.2/1.6/1.8 + slime + mirrors
    tie_word_embeddings false (lm_head.weight written)                  slime + mirrors
    No dense intermediate_size key (the zoo's qwen35moe config has none).
  Vocabulary: the embedding has as many rows as the tokenizer source's model (its
  config.json vocab_size, else the number of tokens in tokenizer.json/tokenizer.model),
  so 248320 only with a real Qwen3.5 tokenizer; --vocab N pads the rows to N (the real
  models' 248320 for size benchmarks; ids past the tokenizer's are never produced by it).
  --experts N keeps N experts per layer (top-8 kept, or top-N when N < 8); --layers N
  keeps layers 0..N-1 (layer_types cut to match).

Weights (random normal unless said; r = 1/sqrt(2 * preset layer count) scales every
projection that writes into the residual stream, so it stays O(1)):
  projections into a layer: std 1/sqrt(fan_in); output projections (o_proj, out_proj,
  down_proj, experts.down_proj, shared_expert.down_proj): std r/sqrt(fan_in); router
  mlp.gate.weight and shared_expert_gate: 1/sqrt(hidden) (router logits ~ N(0,1));
  embed_tokens: 1/sqrt(hidden) (so tied logits are ~ N(0,1)), lm_head the same, and
  rows past the tokenizer's last id (--vocab padding) 100x smaller, so their logits stay
  near 0 and greedy decoding picks tokens the tokenizer can print;
  zero-centred RMSNorm weights (input/post_attention/final norm, q_norm, k_norm; used as
  1 + w): N(0, 0.02); linear_attn.norm.weight (plain weight): 1 + N(0, 0.02);
  A_log = log(A), A log-uniform in [0.02, 4]; dt_bias uniform in [-0.5, 1];
  conv1d: 1 on the last tap (the current token) plus N(0, 0.05) on every tap.
"""
import os, sys
import numpy as np
sys.dont_write_bytecode = True        # no scripts/__pycache__ left in the checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import synth_common as sc

PRESETS = {
    "0.8b": dict(
        arch="Qwen3_5ForCausalLM", model_type="qwen3_5_text", moe=False,
        hidden_size=1024, intermediate_size=3584, num_hidden_layers=24,
        num_attention_heads=8, num_key_value_heads=2, head_dim=256,
        linear_num_key_heads=16, linear_num_value_heads=16,
        linear_key_head_dim=128, linear_value_head_dim=128,
        tie_word_embeddings=True),
    "35b-a3b": dict(
        arch="Qwen3_5MoeForCausalLM", model_type="qwen3_5_moe_text", moe=True,
        hidden_size=2048, num_hidden_layers=40,
        num_attention_heads=16, num_key_value_heads=2, head_dim=256,
        linear_num_key_heads=16, linear_num_value_heads=32,
        linear_key_head_dim=128, linear_value_head_dim=128,
        num_experts=256, num_experts_per_tok=8, moe_intermediate_size=512,
        shared_expert_intermediate_size=512, tie_word_embeddings=False),
}
REAL_VOCAB = 248320
CONV_K = 4
FULL_INTERVAL = 4


def layer_types(n):
    return ["full_attention" if (i + 1) % FULL_INTERVAL == 0 else "linear_attention" for i in range(n)]


def build_shapes(p, L, V):
    H, nh, nkv, hd = p["hidden_size"], p["num_attention_heads"], p["num_key_value_heads"], p["head_dim"]
    nk, nv, dk, dv = (p["linear_num_key_heads"], p["linear_num_value_heads"],
                      p["linear_key_head_dim"], p["linear_value_head_dim"])
    Dk, Dv = nk * dk, nv * dv
    C = 2 * Dk + Dv
    s = {"model.embed_tokens.weight": (V, H), "model.norm.weight": (H,)}
    if not p["tie_word_embeddings"]:
        s["lm_head.weight"] = (V, H)
    for l, kind in enumerate(layer_types(L)):
        q = f"model.layers.{l}."
        s[q + "input_layernorm.weight"] = (H,)
        s[q + "post_attention_layernorm.weight"] = (H,)
        if kind == "linear_attention":
            a = q + "linear_attn."
            s.update({a + "in_proj_qkv.weight": (C, H), a + "in_proj_z.weight": (Dv, H),
                      a + "in_proj_b.weight": (nv, H), a + "in_proj_a.weight": (nv, H),
                      a + "conv1d.weight": (C, 1, CONV_K), a + "dt_bias": (nv,), a + "A_log": (nv,),
                      a + "norm.weight": (dv,), a + "out_proj.weight": (H, Dv)})
        else:
            a = q + "self_attn."
            s.update({a + "q_proj.weight": (nh * 2 * hd, H), a + "k_proj.weight": (nkv * hd, H),
                      a + "v_proj.weight": (nkv * hd, H), a + "o_proj.weight": (H, nh * hd),
                      a + "q_norm.weight": (hd,), a + "k_norm.weight": (hd,)})
        m = q + "mlp."
        if p["moe"]:
            E, F, S = p["num_experts"], p["moe_intermediate_size"], p["shared_expert_intermediate_size"]
            s.update({m + "gate.weight": (E, H), m + "experts.gate_up_proj": (E, 2 * F, H),
                      m + "experts.down_proj": (E, H, F),
                      m + "shared_expert.gate_proj.weight": (S, H), m + "shared_expert.up_proj.weight": (S, H),
                      m + "shared_expert.down_proj.weight": (H, S), m + "shared_expert_gate.weight": (1, H)})
        else:
            F = p["intermediate_size"]
            s.update({m + "gate_proj.weight": (F, H), m + "up_proj.weight": (F, H),
                      m + "down_proj.weight": (H, F)})
    return s


OUT_PROJ = ("o_proj.weight", "out_proj.weight", "down_proj.weight", "experts.down_proj")
ZERO_NORMS = ("input_layernorm.weight", "post_attention_layernorm.weight", "q_norm.weight",
              "k_norm.weight", "model.norm.weight")


def chunks(name, shape, rng, resid, ntok):
    """Yield the tensor's values (f32, C order) a bounded chunk at a time."""
    n = int(np.prod(shape))
    if name.endswith("linear_attn.A_log"):
        yield rng.uniform(np.log(0.02), np.log(4.0), n).astype(np.float32)   # log of A in [0.02, 4]
        return
    if name.endswith("linear_attn.dt_bias"):
        yield rng.uniform(-0.5, 1.0, n).astype(np.float32)
        return
    if name.endswith("linear_attn.norm.weight"):
        yield (1.0 + 0.02 * rng.standard_normal(n)).astype(np.float32)
        return
    if name.endswith(ZERO_NORMS):
        yield (0.02 * rng.standard_normal(n)).astype(np.float32)
        return
    if name.endswith("conv1d.weight"):
        a = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.05)
        a[..., -1] += np.float32(1.0)
        yield a.reshape(-1)
        return
    std = sc.fan_in_std(name, shape[-1], resid, OUT_PROJ)   # fan_in is the last dim of every matrix here
    yield from sc.normal_chunks(name, shape, rng, std, ntok)


def main():
    ap, a = sc.parse_args(__doc__, PRESETS, "0.8b", "35b-a3b: experts per layer (default 256)", REAL_VOCAB,
                          os.path.join(sc.shared_dir(), "models", "llama-8m-debtext"))

    p = dict(PRESETS[a.preset])
    full_layers = p["num_hidden_layers"]
    L = a.layers if a.layers > 0 else full_layers
    if a.experts:
        if not p["moe"]:
            ap.error("--experts needs a MoE preset")
        p["num_experts"] = a.experts
        p["num_experts_per_tok"] = min(8, a.experts)
    ntok, V, bos, eos = sc.vocab(ap, a)
    resid = 1.0 / np.sqrt(2.0 * full_layers)

    shapes = build_shapes(p, L, V)
    hjson, _, off = sc.st_header({n: (s, "X") for n, s in shapes.items()}, a.dtype)

    total = sum(int(np.prod(s)) for s in shapes.values())
    experts = sum(int(np.prod(s)) for n, s in shapes.items() if ".mlp.experts." in n)
    active = total - experts + (experts * p["num_experts_per_tok"] // p["num_experts"] if p["moe"] else 0)
    embed = V * p["hidden_size"] * (1 if p["tie_word_embeddings"] else 2)
    summary = (f"{a.out}: preset {a.preset}, {L} layers, vocab {V}, {a.dtype}: "
               f"{total / 1e9:.4f} B parameters ({total:,}; {(total - embed) / 1e9:.4f} B without "
               f"embedding/lm_head" + (f", {active / 1e9:.4f} B active" if p["moe"] else "") +
               f"), {(8 + len(hjson) + off) / 2**30:.2f} GiB")
    if a.dry_run:
        print(summary)
        return 0

    with sc.safetensors_file(a.out, hjson, off) as f:
        for n in sorted(shapes):
            wrote = sc.write_chunks(f, chunks(n, shapes[n], sc.tensor_rng(a.seed, n), resid, ntok), a.dtype)
            assert wrote == int(np.prod(shapes[n])), n

    cfg = {
        "architectures": [p["arch"]], "attention_bias": False, "attention_dropout": 0.0,
        "attn_output_gate": True, "bos_token_id": bos,
        "dtype": sc.TORCH_DTYPE[a.dtype],
        "eos_token_id": eos, "full_attention_interval": FULL_INTERVAL, "head_dim": p["head_dim"],
        "hidden_act": "silu", "hidden_size": p["hidden_size"], "initializer_range": 0.02,
        "layer_types": layer_types(L), "linear_conv_kernel_dim": CONV_K,
        "linear_key_head_dim": p["linear_key_head_dim"], "linear_num_key_heads": p["linear_num_key_heads"],
        "linear_num_value_heads": p["linear_num_value_heads"],
        "linear_value_head_dim": p["linear_value_head_dim"], "mamba_ssm_dtype": "float32",
        "max_position_embeddings": 262144, "model_type": p["model_type"],
        "mtp_num_hidden_layers": 0, "mtp_use_dedicated_embeddings": False,
        "num_attention_heads": p["num_attention_heads"], "num_hidden_layers": L,
        "num_key_value_heads": p["num_key_value_heads"], "pad_token_id": None, "rms_norm_eps": 1e-6,
        "rope_parameters": {"mrope_interleaved": True, "mrope_section": [11, 11, 10],
                            "partial_rotary_factor": 0.25, "rope_theta": 10000000.0, "rope_type": "default"},
        "tie_word_embeddings": p["tie_word_embeddings"], "use_cache": True, "vocab_size": V,
    }
    if p["moe"]:
        cfg.update({"moe_intermediate_size": p["moe_intermediate_size"], "num_experts": p["num_experts"],
                    "num_experts_per_tok": p["num_experts_per_tok"], "output_router_logits": False,
                    "router_aux_loss_coef": 0.001,
                    "shared_expert_intermediate_size": p["shared_expert_intermediate_size"]})
    else:
        cfg["intermediate_size"] = p["intermediate_size"]
    copied = sc.write_config_and_tokenizer(a.out, cfg, a.tokenizer_dir)
    print(summary)
    print(f"  tokenizer ({ntok} tokens) from {a.tokenizer_dir}: {', '.join(copied)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
