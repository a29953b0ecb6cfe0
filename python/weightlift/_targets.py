"""What ``load_into`` and its tensor-parallel form share: the targets of a
load (a module's state dict or a mapping of name to tensor), how a
checkpoint is named in an error, and strict mode's refusal.

A leaf: it imports nothing of the package but the error classes, so both
``_load_into`` and ``_tp`` import it at the top (the direction of imports is
_load_into -> _tp -> _targets, never back)."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from ._errors import InvalidArgumentError

MAX_LISTED = 10  # names an error lists before "(and N more)"


def targets(target: Any) -> Dict[str, Any]:
    """{name: tensor} of TARGET: an nn.Module (its state dict, with
    parameters as they are) or a mapping."""
    if hasattr(target, "state_dict") and callable(target.state_dict):
        return dict(target.state_dict(keep_vars=True))
    if isinstance(target, Mapping):
        return dict(target)
    raise TypeError(f"load_into: expected an nn.Module or a state dict "
                    f"(mapping of name to tensor), got {type(target)!r}")


def listing(names: List[str]) -> str:
    """The first MAX_LISTED of NAMES, quoted, and how many more."""
    shown = ", ".join(repr(n) for n in names[:MAX_LISTED])
    more = len(names) - MAX_LISTED
    return shown + (f" (and {more} more)" if more > 0 else "")


def describe_ckpt(ckpt) -> str:
    """How an error names the open checkpoint CKPT: its index, its one file,
    or how many files it has."""
    files = ckpt.files()
    if ckpt.index_path:
        return ckpt.index_path
    return files[0]["path"] if len(files) == 1 else f"{len(files)} files"


def strict_error(ckpt, missing: List[str],
                 unexpected: List[str]) -> Optional[InvalidArgumentError]:
    """strict=True's refusal of a load into targets that miss MISSING (in
    CKPT, not in the targets) and lack UNEXPECTED; None when both are
    empty."""
    parts = []
    if missing:
        parts.append(f"missing from the checkpoint: {listing(missing)}")
    if unexpected:
        parts.append(f"not in the target: {listing(unexpected)}")
    if not parts:
        return None
    return InvalidArgumentError(
        f"load_into {describe_ckpt(ckpt)} (strict): " + "; ".join(parts),
        code="InvalidArgument")
