"""A tiny Llama-shaped checkpoint written with the real safetensors package:
config.json (LlamaForCausalLM) and two shards with their index, random
weights in the names and shapes Hugging Face uses (q/k/v, gate/up
unfused; vLLM fuses them while loading)."""

import json
import os

import torch
from safetensors.torch import save_file

CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 4,
    "vocab_size": 512,
    "max_position_embeddings": 256,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
    "bos_token_id": 1,
    "eos_token_id": 2,
}


def tensors(config=CONFIG, seed=0):
    """{name: tensor} of a Llama checkpoint with CONFIG's shapes."""
    g = torch.Generator().manual_seed(seed)
    h, i = config["hidden_size"], config["intermediate_size"]
    heads, kv = config["num_attention_heads"], config["num_key_value_heads"]
    d = h // heads
    v = config["vocab_size"]

    def r(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float32)

    out = {"model.embed_tokens.weight": r(v, h)}
    for n in range(config["num_hidden_layers"]):
        p = f"model.layers.{n}."
        out.update({
            p + "input_layernorm.weight": r(h),
            p + "post_attention_layernorm.weight": r(h),
            p + "self_attn.q_proj.weight": r(heads * d, h),
            p + "self_attn.k_proj.weight": r(kv * d, h),
            p + "self_attn.v_proj.weight": r(kv * d, h),
            p + "self_attn.o_proj.weight": r(h, heads * d),
            p + "mlp.gate_proj.weight": r(i, h),
            p + "mlp.up_proj.weight": r(i, h),
            p + "mlp.down_proj.weight": r(h, i),
        })
    out["model.norm.weight"] = r(h)
    out["lm_head.weight"] = r(v, h)
    return out


def write(directory, config=CONFIG, seed=0, shards=2):
    """Writes config.json, SHARDS safetensors files and their index."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f)
    all_t = tensors(config, seed)
    names = list(all_t)
    per = (len(names) + shards - 1) // shards
    weight_map = {}
    for s in range(shards):
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: all_t[n] for n in names[s * per:(s + 1) * per]}
        save_file(part, os.path.join(directory, fname),
                  metadata={"format": "pt"})
        weight_map.update({n: fname for n in part})
    with open(os.path.join(directory, "model.safetensors.index.json"),
              "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    return all_t
