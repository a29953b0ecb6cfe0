"""Which checkpoint tensors a vLLM model (this rank, this stage) needs,
and which of them a tensor-parallel rank can read as its slice.

Pipeline parallelism: vLLM builds every layer a stage does not hold as a
``PPMissingLayer`` (``make_layers``; embeddings on later stages, the head
on earlier ones likewise). A checkpoint name whose module path runs into
such a placeholder (``model.layers.7.mlp.down_proj.weight`` when layer 7
lives on another stage) is not read at all.

The walk is conservative: a name is skipped only when its path reaches a
placeholder. A name that does not resolve to modules (vLLM fuses q/k/v
into qkv_proj, and some models rename prefixes) is kept, and the model's
own ``load_weights`` decides what to do with it, as it does for every
loader. Nothing a stage needs can be dropped; at worst a tensor is read
that the model then skips.
"""

from __future__ import annotations

import glob
from typing import Dict, Iterable, List, Sequence, Set, Tuple


def _is_placeholder(module) -> bool:
    # By class name as well as by type: the class moved between vLLM
    # versions (model_executor.models.utils).
    try:
        from vllm.model_executor.models.utils import PPMissingLayer
        if isinstance(module, PPMissingLayer):
            return True
    except ImportError:
        pass
    return type(module).__name__ == "PPMissingLayer"


def on_other_stage(model, name: str) -> bool:
    """True when NAME's module path runs into a PPMissingLayer of MODEL."""
    node = model
    for part in name.split(".")[:-1]:
        if _is_placeholder(node):
            return True
        child = node._modules.get(part) if hasattr(node, "_modules") else None
        if child is None:
            return False  # not a module path (fused or renamed): keep it
        node = child
    return _is_placeholder(node)


def split_by_stage(model, names: Iterable[str]) -> Tuple[List[str],
                                                         Set[str]]:
    """(names this stage needs, in the given order; names it skips)."""
    keep, skip = [], set()
    for n in names:
        (skip.add(n) if on_other_stage(model, n) else keep.append(n))
    return keep, skip


def plan_slices(model, rows: Sequence[tuple], tp_rank: int, tp_size: int
                ) -> Tuple[Dict[str, str], Dict[str, object]]:
    """Checkpoint tensors this rank can read as its slice: those that map
    one-to-one (same name) to an unquantized parameter of a plain
    ColumnParallelLinear (split on ``output_dim`` 0) or RowParallelLinear
    (split on ``input_dim``, the last dim) whose weight loader is that
    class's own (v1 on a torch Parameter, or v2 on a ModelWeightParameter),
    split evenly over this TP group. For those, vLLM's weight loader does
    nothing but narrow the full tensor to ``rank * part`` on that dim and
    copy: exactly ``torch.tensor_split(full, n, dim)[rank]``, which the
    caller reads and copies itself. Returns (tp_plan {escaped name:
    "colwise" | "rowwise"}, {name: parameter}). Anything else (fused q/k/v
    and gate/up, vocabulary-parallel embeddings with their padding,
    quantized parameters, other weight loaders) is left to vLLM.
    ({}, {}) where vLLM's linear layers cannot be imported."""
    import torch
    try:
        from vllm.model_executor.layers.linear import (
            ColumnParallelLinear, MergedColumnParallelLinear,
            QKVParallelLinear, RowParallelLinear)
        from vllm.model_executor.parameter import ModelWeightParameter
    except ImportError:
        return {}, {}
    loaders = {
        (torch.nn.Parameter, ColumnParallelLinear.weight_loader): "colwise",
        (ModelWeightParameter, ColumnParallelLinear.weight_loader_v2):
            "colwise",
        (torch.nn.Parameter, RowParallelLinear.weight_loader): "rowwise",
        (ModelWeightParameter, RowParallelLinear.weight_loader_v2): "rowwise",
    }
    params = dict(model.named_parameters())
    plan: Dict[str, str] = {}
    direct: Dict[str, object] = {}
    for name, _dt, shape, *_ in rows:
        p = params.get(name)
        if p is None or "." not in name or \
                getattr(p, "is_sharded_weight", False):
            continue
        owner = model.get_submodule(name.rsplit(".", 1)[0])
        if isinstance(owner, (MergedColumnParallelLinear, QKVParallelLinear)) \
                or type(getattr(owner, "quant_method", None)).__name__ != \
                "UnquantizedLinearMethod":
            continue
        bound = getattr(p, "weight_loader", None)
        word = loaders.get((type(p), getattr(bound, "__func__", None)))
        if word is None or getattr(bound, "__self__", None) is not owner:
            continue
        if word == "colwise":
            if not isinstance(owner, ColumnParallelLinear) or \
                    getattr(p, "output_dim", None) != 0:
                continue
            dim = 0
        else:
            if not isinstance(owner, RowParallelLinear) or len(shape) < 2 \
                    or getattr(p, "input_dim", None) != len(shape) - 1:
                continue
            dim = len(shape) - 1
        if getattr(owner, "tp_size", None) != tp_size or \
                getattr(owner, "tp_rank", None) != tp_rank or \
                getattr(p, "tp_rank", tp_rank) != tp_rank:
            continue
        want = list(shape)
        want[dim] = shape[dim] // tp_size
        if shape[dim] % tp_size or list(p.shape) != want:
            continue
        plan[glob.escape(name)] = word
        direct[name] = p
    return plan, direct
