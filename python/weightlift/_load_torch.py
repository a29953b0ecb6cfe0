"""Whole-tensor loads to a CUDA device for torch (``load_checkpoint``,
``weightlift.torch.load_file``): the tensors' memory is ONE block from
torch's caching allocator, and the loader writes straight into it
(Loader::LoadInto).

Why torch's allocator rather than the loader's own cudaMalloc (Loader::Load):
- it is what safetensors' tensors use: ``torch.cuda.memory_allocated()``
  counts the weights, freeing the state dict gives the block back to torch's
  cache (``torch.cuda.empty_cache()`` to the driver), and running out of
  memory is torch's OutOfMemoryError after torch freed its cache and retried;
- a later load after the previous state dict was freed takes torch's cached
  block again instead of cudaFree + cudaMalloc of 13 GB (on the H200 the
  transfer right after that pair ran at 44-46 GB/s, against 49-50 GB/s with
  the old block still alive: bench/results/2026-12-03-h200-session5);
- the tensors are views (as_strided) of one tensor per dtype: no DLPack
  import per tensor.

The layout is the loader's own (cuda/device_layout.cc): request order, every
tensor 256-byte aligned.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import _core, _dtypes

# A private switch for benchmarks and tests that compare the two ways
# (False: Loader::Load's own device memory, as before).
ENABLED = True

_ALIGN = 256


def applies(dev: str, numpy: bool) -> bool:
    return ENABLED and not numpy and dev.startswith("cuda")


def _strides(shape: Sequence[int]) -> Tuple[int, ...]:
    out, step = [], 1
    for d in reversed(shape):
        out.append(step)
        step *= max(int(d), 1)
    return tuple(reversed(out))


def _allocate(rows, dev: str):
    """([(name, tensor)], block, [(name, address, size)], block bytes) for
    ROWS (Checkpoint.tensors() rows): one block of torch's on DEV, every
    tensor a view of it."""
    import torch

    # Layout first: an unsupported dtype raises before anything is taken.
    layout = []
    total = 0
    for name, dt, shape, _, _, size in rows:
        tdt, tshape = _dtypes.torch_layout(dt, shape, name)
        off = (total + _ALIGN - 1) // _ALIGN * _ALIGN
        layout.append((name, tdt, tuple(tshape), off, size))
        total = off + size
    device = torch.device(dev)
    total = max((total + _ALIGN - 1) // _ALIGN * _ALIGN, _ALIGN)
    base = torch.empty(total, dtype=torch.uint8, device=device)
    if device.type == "cuda":
        # The block may have been freed by work still queued on torch's
        # stream: it must end before the loader's streams write into it.
        torch.cuda.current_stream(device).synchronize()
    ptr = base.data_ptr()
    dests = [(name, ptr + off, size) for name, _, _, off, size in layout
             if size]
    typed: Dict[Any, Any] = {}
    out = []
    for name, tdt, tshape, off, size in layout:
        if not size:
            out.append((name, torch.empty(tshape, dtype=tdt, device=device)))
            continue
        view = typed.get(tdt)
        if view is None:
            view = typed[tdt] = base.view(tdt)
        out.append((name, view.as_strided(tshape, _strides(tshape),
                                          off // view.element_size())))
    return out, base, dests, total


def load(ckpt, dev: str, options: Dict[str, Any], progress: bool,
         names: Optional[List[str]] = None, t_start: Optional[float] = None):
    """Loads every tensor of CKPT (or NAMES, in checkpoint order) to DEV.

    Returns ([(name, tensor)], LoadReport). The report's seconds cover the
    whole call from T_START (the caller's entry, default now): its
    open_seconds include opening the checkpoint here, its alloc_seconds the
    block from torch's allocator and the tensor views."""
    t0 = time.perf_counter() if t_start is None else t_start
    rows = ckpt.tensors()
    if names:
        wanted = set(names)
        rows = [r for r in rows if r[0] in wanted]
    t_alloc = time.perf_counter()
    open_s = t_alloc - t0
    # The loader first: a bad option or device raises before any memory is
    # taken (and its setup is in the report, not in alloc_seconds).
    with _core.pooled_loader(dict(options, device=dev)) as loader:
        t_alloc = time.perf_counter()
        out, base, dests, total = _allocate(rows, dev)
        alloc_s = time.perf_counter() - t_alloc
        if not dests:  # every tensor is empty: nothing to read
            return out, _core._empty_report(loader, len(out))
        job = loader.start_load_into(ckpt, dests, base)
        report = _core.wait(job, progress, sum(d[2] for d in dests))
    report.open_seconds += open_s
    report.alloc_seconds += alloc_s
    report.device_bytes = total
    report.seconds = time.perf_counter() - t0
    report.gb_per_s = report.bytes / report.seconds / 1e9 if report.seconds else 0
    report.notes.append(
        f"python: checkpoint open {open_s * 1e3:.1f} ms, device memory from "
        f"torch's caching allocator + {len(out)} tensor views "
        f"{alloc_s * 1e3:.1f} ms; seconds cover the whole call")
    _core.set_last_report(report)
    return out, report
