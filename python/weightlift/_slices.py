"""Slices through the C++ loader: the data path of ``get_slice(...)[...]``.

    sel = _slice_index.select(index, shape, framework)   # or None
    [tensor] = load_slices(loader, ckpt, [(name, sel.ranges, sel.squeeze)],
                           framework, device)

The loader reads only the selected bytes (or one covering range placed with
strided copies, whichever moves fewer bytes at the storage's granularity),
through the same staging, O_DIRECT and report as every other load, straight
onto the loader's device. The index rules (torch's for "pt", safetensors'
own for "np") are _slice_index's.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from . import _core, _dtypes

Dims = List[Tuple[int, int, int]]


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
