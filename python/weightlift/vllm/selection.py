"""Which checkpoint tensors a vLLM model (this rank, this stage) needs.

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

from typing import Iterable, List, Set, Tuple


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
