"""``weightlift.torch.load_model``: safetensors.torch.load_model's contract.

safetensors loads the file (onto DEVICE) and hands it to
``model.load_state_dict(strict=False)``, so torch decides what is loaded and
how: a BF16 tensor is cast into an fp32 parameter, a non-contiguous
parameter is filled through ``copy_``, a module's own load hooks run. Then
names tied in the model (one storage) count once: of each tied group the
name the file has (else the first, sorted) is kept and the others, when the
file has them too, are unexpected. It returns (missing: set, unexpected:
list) and, when STRICT, raises RuntimeError naming them.

weightlift does the same, with its loader doing the read. Two checks come
before anything is written, so that a refused file leaves the model as it
was: a size mismatch, and (strict) a file name the model has no place for
or a second copy of a tied weight. Missing names are known only after
torch's load (a module's hook may supply them), as in safetensors.
For loading straight into the parameters' memory without the extra copy,
use ``weightlift.load_into``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Dict, List, Set, Tuple

from . import _core, _dtypes
from ._options import device_string


def _storage(t) -> Tuple[int, int]:
    """(address, bytes) of T's whole storage; (0, 0) for meta tensors."""
    try:
        s = t.untyped_storage() if hasattr(t, "untyped_storage") \
            else t.storage().untyped()
        return s.data_ptr(), s.nbytes()
    except (NotImplementedError, RuntimeError):
        return 0, 0


def _end(t) -> int:
    if t.numel():
        return t.view(-1)[-1].data_ptr() + t.element_size()
    return t.data_ptr()


def _shared_groups(state: Dict[str, Any]) -> List[Set[str]]:
    """Names whose tensors overlap in memory, as safetensors groups them:
    by storage, then split where the byte ranges do not overlap."""
    by_storage: Dict[tuple, Set[str]] = defaultdict(set)
    for name, t in state.items():
        ptr, size = _storage(t)
        if t.device.type != "meta" and ptr and size:
            by_storage[(str(t.device), ptr, size)].add(name)
    groups = []
    for names in sorted(by_storage.values(), key=sorted):
        if len(names) < 2:
            groups.append(names)
            continue
        areas = sorted((state[n].data_ptr(), _end(state[n]), n)
                       for n in names)
        groups.append({areas[0][2]})
        last_stop = areas[0][1]
        for start, stop, n in areas[1:]:
            if start >= last_stop:
                groups.append({n})
            else:
                groups[-1].add(n)
            last_stop = stop
    return groups


def _is_complete(t) -> bool:
    ptr, size = _storage(t)
    return t.data_ptr() == ptr and t.numel() * t.element_size() == size


def _aliases(state: Dict[str, Any], preferred) -> Dict[str, List[str]]:
    """{kept name: [its aliases]}: safetensors' _remove_duplicate_names."""
    aliases: Dict[str, List[str]] = defaultdict(list)
    for group in _shared_groups(state):
        if len(group) < 2:
            continue
        complete = sorted(n for n in group if _is_complete(state[n]))
        if not complete:
            raise RuntimeError(
                f"Error while trying to find names to remove to save state "
                f"dict, but found no suitable name to keep for saving "
                f"amongst: {group}. None is covering the entire storage. "
                f"Refusing to save/load the model since you could be storing "
                f"much more memory than needed.")
        keep = complete[0]
        chosen = sorted(set(preferred) & set(complete))
        if chosen:
            keep = chosen[0]
        aliases[keep] = [n for n in sorted(group) if n != keep]
    return aliases


def _strict_error(model, missing, unexpected) -> RuntimeError:
    text = f"Error(s) in loading state_dict for {model.__class__.__name__}:"
    if missing:
        text += "\n    Missing key(s) in state_dict: " + ", ".join(
            f'"{k}"' for k in sorted(missing))
    if unexpected:
        text += "\n    Unexpected key(s) in state_dict: " + ", ".join(
            f'"{k}"' for k in sorted(unexpected))
    return RuntimeError(text)


def _size_mismatches(model, state, rows) -> List[str]:
    """torch's own size-mismatch messages, for the names both have."""
    import torch
    msgs = []
    for name, dt, shape, *_ in rows:
        t = state.get(name)
        if t is None:
            continue
        _, file_shape = _dtypes.torch_layout(dt, shape, name)
        if t.dim() == 0 and len(file_shape) == 1:
            file_shape = ()  # torch loads element 0 into a 0-d parameter
        if tuple(t.shape) != tuple(file_shape):
            msgs.append(
                f"size mismatch for {name}: copying a param with shape "
                f"{torch.Size(file_shape)} from checkpoint, the shape in "
                f"current model is {t.shape}.")
    return msgs


def load_model(model, filename: Any, *, strict: bool = True,
               device: Any = "cpu", **options):
    ckpt = _core.open_checkpoint(filename)
    rows = ckpt.tensors()
    file_names = [r[0] for r in rows]
    state = model.state_dict()
    aliases = _aliases(state, file_names)

    errors = _size_mismatches(model, state, rows)
    if errors:
        raise RuntimeError(
            f"Error(s) in loading state_dict for "
            f"{model.__class__.__name__}:\n\t" + "\n\t".join(errors))
    present = set(file_names)
    if strict:
        alias_names = {a for group in aliases.values() for a in group}
        extra = [n for n in file_names if n not in state]
        extra += [a for a in sorted(alias_names) if a in present]
        if extra:
            # Missing as torch would find them (by name), for the message.
            missing = {n for n in state
                       if n not in present and n not in alias_names}
            raise _strict_error(model, missing, extra)

    _dtypes.check_framework_types(rows, numpy=False)
    items, dev, _ = _core.load_raw(ckpt, device=device_string(device),
                                   **options)
    loaded = {n: _dtypes.to_torch(dt, shape, data, dev, n)
              for n, dt, shape, data in items}
    missing_keys, unexpected = model.load_state_dict(loaded, strict=False)
    del loaded
    missing = set(missing_keys)
    for group in aliases.values():
        for alias in group:
            if alias in missing:
                missing.remove(alias)
            else:
                unexpected.append(alias)
    if strict and (missing or unexpected):
        raise _strict_error(model, missing, unexpected)
    return missing, unexpected
