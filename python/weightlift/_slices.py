"""Slices through the C++ loader: the data path of ``get_slice(...)[...]``.

    dims, squeeze = normalize_basic_index(index, shape)   # or None
    [tensor] = load_slices(loader, ckpt, [(name, dims, squeeze)], "pt", dev)

The loader reads only the selected bytes (or one covering range placed with
strided copies, whichever moves fewer bytes at the storage's granularity),
through the same staging, O_DIRECT and report as every other load, straight
onto the loader's device. ``normalize_basic_index`` is the plain numpy rule
for basic indexing; ``get_slice`` applies safetensors' own rules instead
(_slice_index.select) and passes its normalized ranges in.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from . import _core, _dtypes

Dims = List[Tuple[int, int, int]]


def _is_int(x) -> bool:
    # bool is an int subclass but indexes as a new axis (torch and numpy).
    return type(x) is int  # noqa: E721 - exactly int, not bool/np.integer


def normalize_basic_index(index: Any, shape: Sequence[int]
                          ) -> Optional[Tuple[Dims, List[int]]]:
    """INDEX (ints, slices with a positive step, one Ellipsis) as per-dim
    (start, stop, step) with start <= stop <= dim, and the axes an int
    index drops; None for anything else (new axes, bools, lists, negative
    steps, out-of-range ints, too many indices), which the caller handles
    another way (and which may raise there, as torch/numpy would)."""
    parts = index if isinstance(index, tuple) else (index,)
    if sum(1 for p in parts if p is Ellipsis) > 1:
        return None
    explicit = [p for p in parts if p is not Ellipsis]
    if len(explicit) > len(shape):
        return None
    full = slice(None)
    if any(p is Ellipsis for p in parts):
        at = next(i for i, p in enumerate(parts) if p is Ellipsis)
        fill = len(shape) - len(explicit)
        parts = parts[:at] + (full,) * fill + parts[at + 1:]
    else:
        parts = tuple(parts) + (full,) * (len(shape) - len(parts))
    dims: Dims = []
    squeeze: List[int] = []
    for axis, (p, n) in enumerate(zip(parts, shape)):
        if _is_int(p):
            i = p + n if p < 0 else p
            if not 0 <= i < n:
                return None
            dims.append((i, i + 1, 1))
            squeeze.append(axis)
        elif type(p) is slice and all(v is None or _is_int(v)
                                      for v in (p.start, p.stop, p.step)):
            start, stop, step = p.indices(n)
            if step < 1:
                return None
            dims.append((start, max(start, stop), step))
        else:
            return None
    return dims, squeeze


def slice_shape(dims: Dims, squeeze: Sequence[int]) -> List[int]:
    """The result's shape for DIMS covering every dimension (as
    normalize_basic_index gives them): each dim's element count, squeezed
    axes gone."""
    drop = set(squeeze)
    return [max(0, -(-(stop - start) // step))
            for axis, (start, stop, step) in enumerate(dims)
            if axis not in drop]


def load_slices(loader, ckpt, requests: Sequence[Tuple[str, Dims, Any]],
                framework: str, device: str) -> list:
    """Loads REQUESTS [(name, dims, squeeze)] with LOADER (one load, one
    report, recorded as the thread's last report) and returns one torch
    tensor (framework "pt", on DEVICE) or numpy array ("np") per request.
    DIMS may stop before the last dimension (the rest are whole); SQUEEZE
    lists the axes to drop (each must select one element)."""
    job = loader.start_load_slices(
        ckpt, [(name, [tuple(d) for d in dims]) for name, dims, _ in requests])
    _core.wait(job, False, 0)
    raw = job.take_tensors(framework == "np")
    out = []
    for (name, dims, squeeze), (_, dt, shape, data) in zip(requests, raw):
        if framework == "np":
            part = _dtypes.to_numpy(dt, shape, data, name)
        else:
            part = _dtypes.to_torch(dt, shape, data, device, name)
        if squeeze:
            drop = set(squeeze)
            part = part.reshape([n for axis, n in enumerate(shape)
                                 if axis not in drop])
        out.append(part)
    return out
