"""The tensor-parallel reference, written independently of weightlift
(Python's fnmatch, first match wins, torch.tensor_split's sizes), and the
one home of the plans it is used with: the tests (test_tp.py,
tp_worker.py) and the benchmarks (bench/tp_bench.py, bench/tp_multi_gpu.py)
import it from here. Needs torch only for split_reference."""

import fnmatch

# docs/tensor-parallel.md's Llama plan: what the benchmarks load.
LLAMA_PLAN = {
    "*.self_attn.q_proj.weight": "colwise",
    "*.self_attn.k_proj.weight": "colwise",
    "*.self_attn.v_proj.weight": "colwise",
    "*.self_attn.o_proj.weight": "rowwise",
    "*.mlp.gate_proj.weight": "colwise",
    "*.mlp.up_proj.weight": "colwise",
    "*.mlp.down_proj.weight": "rowwise",
    "lm_head.weight": "colwise",
}

# The tests' plan: LLAMA_PLAN plus the rule's corners (a 1-D tensor under
# rowwise is replicated, biases split colwise, a 3-D tensor split rowwise).
TEST_PLAN = dict(LLAMA_PLAN, **{
    "*.o_proj.bias": "rowwise",  # 1-D under rowwise: replicated
    "*.bias": "colwise",
    "*.odd3d": "rowwise",
})


def word_of(name, plan):
    """PLAN's word for NAME (first matching pattern), else "replicate"."""
    return next((w for p, w in plan.items()
                 if fnmatch.fnmatchcase(name, p)), "replicate")


def part_bounds(name, shape, plan, rank, size):
    """Rank RANK of SIZE's part of tensor NAME of SHAPE under PLAN as
    (dim, start, stop), torch.tensor_split's sizes; None when replicated."""
    word = word_of(name, plan)
    if word == "colwise" and len(shape) >= 1:
        dim = 0
    elif word == "rowwise" and len(shape) >= 2:
        dim = len(shape) - 1
    else:
        return None
    q, rem = divmod(shape[dim], size)
    start = rank * q + min(rank, rem)
    return dim, start, start + q + (1 if rank < rem else 0)


def split_reference(full, plan, rank, size):
    """{name: torch.tensor_split(t, size, dim)[rank]} by PLAN's words."""
    import torch

    out = {}
    for name, t in full.items():
        word = word_of(name, plan)
        if word == "colwise" and t.dim() >= 1:
            out[name] = torch.tensor_split(t, size, 0)[rank]
        elif word == "rowwise" and t.dim() >= 2:
            out[name] = torch.tensor_split(t, size, t.dim() - 1)[rank]
        else:
            out[name] = t
    return out
