"""``weightlift.torch.load_model``: safetensors.torch.load_model's contract.

safetensors loads the file (onto DEVICE) and hands it to
``model.load_state_dict(strict=False)``, so torch decides what is loaded and
how: a BF16 tensor is cast into an fp32 parameter, a non-contiguous
parameter is filled through ``copy_``, a module's own load hooks run. Then
names tied in the model (one storage) count once: of each tied group the
name the file has (else the first, sorted) is kept and the others, when the
file has them too, are unexpected. It returns (missing: set, unexpected:
list) and, when STRICT, raises RuntimeError naming them.

weightlift gives the same results. Where no module changes how torch loads
(no load hooks or overrides: _is_plain), torch's outcome follows from the
module tree, so it is computed first: a size mismatch or (strict) a missing
or unexpected name is refused before anything is written, and when every
target already has the file's dtype and shape and is contiguous, the loader
writes straight into the parameters' memory (Loader::LoadInto: no copy of
the file on DEVICE first). Otherwise it does what safetensors does: the
file on DEVICE, then ``load_state_dict``.
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


def _is_plain(model) -> bool:
    """No module changes how torch loads a state dict (no override of
    _load_from_state_dict / set_extra_state / load_state_dict / state_dict,
    no load or state-dict hooks): then the names torch would load, miss and
    not expect follow from the module tree alone (_torch_keys)."""
    import torch
    base = torch.nn.Module
    if type(model).load_state_dict is not base.load_state_dict:
        return False
    for m in model.modules():
        cls = type(m)
        if (cls._load_from_state_dict is not base._load_from_state_dict
                or cls.set_extra_state is not base.set_extra_state
                or cls.state_dict is not base.state_dict):
            return False
        for hooks in ("_load_state_dict_pre_hooks",
                      "_load_state_dict_post_hooks", "_state_dict_hooks",
                      "_state_dict_pre_hooks"):
            if getattr(m, hooks, None):
                return False
    return True


_RULES: Dict[str, bool] = {}


def _torch_rules() -> Dict[str, bool]:
    """How this torch's _load_from_state_dict judges two names, asked of
    torch itself once on a one-layer model (nothing is written: no name
    matches a parameter). torch 1.x expects a child module's own name and
    a dotted name under a parameter; torch 2.x counts both unexpected."""
    if not _RULES:
        import torch
        probe = torch.nn.Sequential(torch.nn.Linear(1, 1))
        x = torch.zeros(1)
        _, unexpected = probe.load_state_dict(
            {"0": x, "0.weight.x": x}, strict=False)
        _RULES["child_name"] = "0" in unexpected
        _RULES["under_param"] = "0.weight.x" in unexpected
    return _RULES


def _torch_keys(model, file_names: List[str]) -> Tuple[List[str], List[str]]:
    """(missing, unexpected) exactly as load_state_dict(strict=False) finds
    them in a plain module tree (torch's Module._load_from_state_dict)."""
    rules = _torch_rules()
    present = set(file_names)
    missing: List[str] = []
    unexpected: List[str] = []

    def visit(module, prefix: str) -> None:
        local = [k for k, v in module._parameters.items() if v is not None]
        local += [k for k, v in module._buffers.items()
                  if v is not None
                  and k not in module._non_persistent_buffers_set]
        missing.extend(prefix + k for k in local if prefix + k not in present)
        extra_state = prefix + "_extra_state"
        if extra_state in present:  # set_extra_state is not overridden
            unexpected.append(extra_state)
        for key in file_names:
            if not key.startswith(prefix) or key == extra_state:
                continue
            first, *rest = key[len(prefix):].split(".", 1)
            is_child, is_local = first in module._modules, first in local
            if rest and rules["under_param"]:
                bad = not is_child
            elif not rest and rules["child_name"]:
                bad = not is_local
            else:
                bad = not is_child and not is_local
            if bad:
                unexpected.append(key)
        for name, child in module._modules.items():
            if child is not None:
                visit(child, prefix + name + ".")

    visit(model, "")
    return missing, unexpected


def _direct_targets(model, rows) -> Any:
    """{name: parameter or buffer} to write the file's bytes into straight
    (Loader::LoadInto) where that gives what torch's copy_ gives: every name
    both have has the file's dtype and shape, is contiguous and on cpu or
    cuda, and no two targets overlap unless they are the same tensor (tied:
    then the name torch copies last is the one written). None otherwise."""
    state = model.state_dict(keep_vars=True)
    order = {name: i for i, name in enumerate(state)}
    chosen: Dict[tuple, str] = {}
    for name, dt, shape, *_ in rows:
        t = state.get(name)
        if t is None:
            continue
        tdt, tshape = _dtypes.torch_layout(dt, shape, name)
        if (t.dtype != tdt or tuple(t.shape) != tuple(tshape)
                or not t.is_contiguous()
                or t.device.type not in ("cpu", "cuda")):
            return None
        if t.numel() == 0:
            continue
        key = (str(t.device), t.data_ptr(), t.numel() * t.element_size())
        if key not in chosen or order[name] > order[chosen[key]]:
            chosen[key] = name
    spans = sorted(chosen)
    for a, b in zip(spans, spans[1:]):
        if a[0] == b[0] and a[1] + a[2] > b[1]:
            return None  # partial overlap: torch's copy order matters
    return {name: state[name] for name in chosen.values()}


def _with_aliases(aliases, missing_keys, unexpected):
    """safetensors' fix-up: a tied name counts once."""
    missing = set(missing_keys)
    unexpected = list(unexpected)
    for group in aliases.values():
        for alias in group:
            if alias in missing:
                missing.remove(alias)
            else:
                unexpected.append(alias)
    return missing, unexpected


def load_model(model, filename: Any, *, strict: bool = True,
               device: Any = "cpu", **options):
    options = dict(options, device=device_string(device))
    _core.check_options(options)  # before the file, as safetensors does
    ckpt = _core.open_checkpoint(filename)
    rows = ckpt.tensors()
    file_names = [r[0] for r in rows]
    aliases = _aliases(model.state_dict(), file_names)
    _dtypes.check_framework_types(rows, numpy=False)

    if _is_plain(model):
        # torch's outcome is known before anything is written: refuse
        # first, then write straight into the parameters where that is
        # what copy_ would give (no copy of the file on DEVICE).
        errors = _size_mismatches(model, model.state_dict(), rows)
        if errors:
            raise RuntimeError(
                f"Error(s) in loading state_dict for "
                f"{model.__class__.__name__}:\n\t" + "\n\t".join(errors))
        missing, unexpected = _with_aliases(aliases,
                                            *_torch_keys(model, file_names))
        if strict and (missing or unexpected):
            raise _strict_error(model, missing, unexpected)
        direct = _direct_targets(model, rows)
        if direct is not None:
            from ._load_into import load_into
            load_into(direct, ckpt, strict=False,
                      **{k: v for k, v in options.items() if k != "device"})
            return missing, unexpected

    # As safetensors: the file on DEVICE, then torch's load_state_dict
    # (casts, non-contiguous parameters, the modules' own load hooks).
    items, dev, _ = _core.load_raw(ckpt, **options)
    loaded = {n: _dtypes.to_torch(dt, shape, data, dev, n)
              for n, dt, shape, data in items}
    missing_keys, unexpected = model.load_state_dict(loaded, strict=False)
    del loaded
    missing, unexpected = _with_aliases(aliases, missing_keys, unexpected)
    if strict and (missing or unexpected):
        raise _strict_error(model, missing, unexpected)
    return missing, unexpected
