"""``load_into``: fill existing tensors in place (Loader::LoadInto).

No extra device memory: the loader writes straight into each parameter's
or buffer's own storage (``data_ptr()``). Every target must already have
the checkpoint's dtype and shape (as weightlift returns them, see
weightlift._dtypes), be contiguous, and live on cpu or a CUDA device (not
meta: materialize first, e.g. ``module.to_empty(device=...)``). Tied
weights (several names over the same memory) are written once, and a name
missing from the checkpoint is fine when one of its aliases is present.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from . import _core, _dtypes, _tp
from ._errors import InvalidArgumentError, WeightliftError
from ._options import device_string
from ._targets import MAX_LISTED as _MAX_LISTED
from ._targets import describe_ckpt as _describe_ckpt
from ._targets import strict_error
from ._targets import targets as _targets
from .report import LoadReport


def _describe(t: Any) -> Tuple[str, Any, Tuple[int, ...], int, int, bool]:
    """(device, dtype, shape, data address, nbytes, contiguous) of a torch
    tensor or numpy array."""
    if hasattr(t, "data_ptr"):  # torch
        if t.is_meta if hasattr(t, "is_meta") else t.device.type == "meta":
            raise InvalidArgumentError(
                "is on the meta device (no memory); materialize it first, "
                "e.g. module.to_empty(device=...)", code="InvalidArgument")
        for lazy, what, resolve in (("is_conj", "conjugated", "resolve_conj"),
                                    ("is_neg", "negated", "resolve_neg")):
            if getattr(t, lazy, lambda: False)():
                # Its memory holds the values before a lazy conjugation or
                # negation: raw bytes written there would read back changed.
                raise InvalidArgumentError(
                    f"is a lazily {what} view ({lazy}() is True); load into "
                    f"t.{resolve}() instead", code="InvalidArgument")
        dev = t.device
        dev_s = "cpu" if dev.type == "cpu" else (
            f"cuda:{dev.index if dev.index is not None else 0}"
            if dev.type == "cuda" else str(dev))
        return (dev_s, t.dtype, tuple(t.shape), t.data_ptr(),
                t.numel() * t.element_size(), t.is_contiguous())
    if hasattr(t, "ctypes") and hasattr(t, "flags"):  # numpy
        if not t.flags.writeable:
            raise InvalidArgumentError("is a read-only numpy array",
                                       code="InvalidArgument")
        return ("cpu", t.dtype, tuple(t.shape), t.ctypes.data, t.nbytes,
                bool(t.flags.c_contiguous))
    raise InvalidArgumentError(f"is a {type(t)!r}, not a tensor",
                               code="InvalidArgument")


def _expected(t: Any, dt: str, shape) -> Tuple[Any, Tuple[int, ...]]:
    if hasattr(t, "data_ptr"):
        return _dtypes.torch_layout(dt, shape)
    return _dtypes.numpy_layout(dt, shape)


def _mark_modified(tensors) -> None:
    """Bumps each torch tensor's autograd version counter, as an in-place
    write does (torch.autograd.graph.increment_version where torch has it;
    on older torch an in-place op on an empty view, which launches
    nothing). numpy targets have none."""
    tensors = [t for t in tensors if not hasattr(t, "flags")]
    if not tensors:
        return
    import torch
    bump = getattr(getattr(torch.autograd, "graph", None),
                   "increment_version", None)
    with torch.no_grad():
        for t in tensors:
            if bump is not None:
                bump(t)
            else:
                t.view(-1)[:0].zero_()


def _say_what_was_written(e: WeightliftError, per_device, written,
                          failed: str) -> None:
    """Adds to E's message what the failed load left in the caller's
    tensors: they are not rolled back, so a caller must know which ones may
    hold a mix of old and new bytes."""
    count = {dev: len(dests) for dev, dests in per_device.items()}
    untouched = [d for d in per_device if d not in written and d != failed]
    parts = [f"the {count[failed]} target tensor(s) on {failed} may be "
             f"partly written"]
    if written:
        parts.append(f"the {sum(count[d] for d in written)} on "
                     f"{', '.join(written)} were written in full")
    if untouched:
        parts.append(f"the {sum(count[d] for d in untouched)} on "
                     f"{', '.join(untouched)} were not touched")
    e.message = f"{e.message} (load_into: {'; '.join(parts)})"
    e.args = (e.message,)


def load_into(target: Any, checkpoint: Any, *, strict: bool = True,
              progress: bool = False, **options) -> LoadReport:
    """Loads CHECKPOINT (file, index or directory) into the existing tensors
    of TARGET (an nn.Module's state_dict, or a mapping name -> tensor).

    With STRICT, every target name must be in the checkpoint (directly or
    through an alias) and every checkpoint tensor must have a target;
    otherwise only the names both have are loaded. Returns the LoadReport
    with ``missing_keys`` and ``unexpected_keys``. Load options (backend,
    threads, ...) are keyword arguments; ``device`` is taken from the
    targets. With tp_* / process_group, TARGET holds this rank's parts
    (docs/tensor-parallel.md).
    """
    tp = _tp.take_tp(options, checkpoint)
    if tp is not None:
        return _tp.load_into_tp(target, checkpoint, tp, strict, progress,
                                options)
    want_device = options.pop("device", None)
    targets = _targets(target)
    ckpt = _core.open_checkpoint(checkpoint)
    infos = {name: (dt, shape, size)
             for name, dt, shape, _, _, size in ckpt.tensors()}

    errors: List[str] = []
    described = {}
    groups: Dict[Tuple[str, int, int], List[str]] = {}
    for name, t in targets.items():
        try:
            d = _describe(t)
        except InvalidArgumentError as e:
            if name in infos:
                errors.append(f"{name!r} {e.message}")
            continue
        described[name] = d
        key = (d[0], d[3], d[4]) if d[4] else ("empty", id(t), 0)
        groups.setdefault(key, []).append(name)

    missing: List[str] = []
    loaded = set()
    per_device: Dict[str, List[Tuple[str, int, int]]] = {}
    for names in groups.values():
        present = [n for n in names if n in infos]
        if not present:
            missing.extend(names)
            continue
        loaded.update(present)
        name = present[0]
        dev, tdt, tshape, ptr, nbytes, contiguous = described[name]
        dt, shape, size = infos[name]
        exp_dtype, exp_shape = _expected(targets[name], dt, shape)
        if tdt != exp_dtype:
            errors.append(f"{name!r}: dtype mismatch: checkpoint has {dt} "
                          f"({exp_dtype}), target is {tdt}")
        elif tshape != tuple(exp_shape):
            errors.append(f"{name!r}: shape mismatch: checkpoint has "
                          f"{list(exp_shape)}, target is {list(tshape)}")
        elif not contiguous:
            errors.append(f"{name!r}: target is not contiguous (load_into "
                          f"writes raw bytes; call .contiguous() first)")
        elif nbytes != size:
            errors.append(f"{name!r}: target holds {nbytes} bytes, the "
                          f"checkpoint {size}")
        elif dev not in ("cpu",) and not dev.startswith("cuda:"):
            errors.append(f"{name!r}: device {dev} is not supported")
        elif size:
            per_device.setdefault(dev, []).append((name, ptr, size))
    if errors:
        raise InvalidArgumentError(
            f"load_into {_describe_ckpt(ckpt)}: {len(errors)} tensor(s) "
            f"cannot be loaded: " + "; ".join(errors[:_MAX_LISTED])
            + (f"; and {len(errors) - _MAX_LISTED} more"
               if len(errors) > _MAX_LISTED else ""),
            code="InvalidArgument")
    unexpected = [n for n in infos if n not in loaded]
    if strict and (missing or unexpected):
        raise strict_error(ckpt, missing, unexpected)
    if want_device is not None:
        want = device_string(want_device)
        if any(dev != want for dev in per_device):
            raise InvalidArgumentError(
                f"load_into: device={want} but the targets are on "
                f"{sorted(per_device)}", code="InvalidArgument")

    reports = []
    written: List[str] = []  # devices whose targets were all loaded
    try:
        for dev, dests in per_device.items():
            if dev.startswith("cuda"):
                import torch
                # Work queued on the targets (e.g. to_empty, earlier
                # kernels) must finish before the loader's streams write.
                torch.cuda.synchronize(dev)
            total = sum(s for _, _, s in dests)
            try:
                with _core.pooled_loader(dict(options, device=dev)) as loader:
                    job = loader.start_load_into(ckpt, dests, targets)
                    reports.append(_core.wait(job, progress, total))
            except WeightliftError as e:
                _say_what_was_written(e, per_device, written, dev)
                raise
            written.append(dev)
    finally:
        # Written behind autograd's back (raw bytes): as for an in-place
        # copy_, a backward through a graph that saved these tensors must
        # refuse, not use the new values. Also after a failure part way.
        _mark_modified(targets[n] for dests in per_device.values()
                       for n, _, _ in dests)
    report = LoadReport.merge(reports) or LoadReport(
        {"device": want_device and device_string(want_device) or "cpu",
         "tensors": 0, "bytes": 0, "bytes_read": 0, "seconds": 0.0,
         "open_seconds": 0.0, "alloc_seconds": 0.0, "transfer_seconds": 0.0,
         "staging_bytes": 0, "device_bytes": 0, "threads": 0,
         "gb_per_s": 0.0})
    report.missing_keys = missing
    report.unexpected_keys = unexpected
    _core.set_last_report(report)
    return report
