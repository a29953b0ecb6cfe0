"""The tensor-parallel reference for test_tp.py and tp_worker.py: the plan
the tests use and torch.tensor_split applied by the rule's words, written
independently of weightlift (Python's fnmatch, first match wins)."""

import fnmatch

import torch

LLAMA_PLAN = {
    "*.self_attn.q_proj.weight": "colwise",
    "*.self_attn.k_proj.weight": "colwise",
    "*.self_attn.v_proj.weight": "colwise",
    "*.self_attn.o_proj.weight": "rowwise",
    "*.mlp.gate_proj.weight": "colwise",
    "*.mlp.up_proj.weight": "colwise",
    "*.mlp.down_proj.weight": "rowwise",
    "lm_head.weight": "colwise",
    "*.o_proj.bias": "rowwise",  # 1-D under rowwise: replicated
    "*.bias": "colwise",
    "*.odd3d": "rowwise",
}


def split_reference(full, plan, rank, size):
    """{name: torch.tensor_split(t, size, dim)[rank]} by PLAN's words."""
    out = {}
    for name, t in full.items():
        word = next((w for p, w in plan.items()
                     if fnmatch.fnmatchcase(name, p)), "replicate")
        if word == "colwise" and t.dim() >= 1:
            out[name] = torch.tensor_split(t, size, 0)[rank]
        elif word == "rowwise" and t.dim() >= 2:
            out[name] = torch.tensor_split(t, size, t.dim() - 1)[rank]
        else:
            out[name] = t
    return out
