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


def _layout(rows):
    """([(name, dtype, shape, offset, size)], block bytes) for ROWS
    (Checkpoint.tensors() rows), every tensor 256-byte aligned. Raises the
    first tensor's UnsupportedDtypeError for a dtype torch cannot hold,
    before anything is taken or read."""
    layout = []
    total = 0
    for name, dt, shape, _, _, size in rows:
        off = (total + _ALIGN - 1) // _ALIGN * _ALIGN
        layout.append((name, dt, shape, off, size))
        total = off + size
    check_dtypes(layout)
    return layout, max((total + _ALIGN - 1) // _ALIGN * _ALIGN, _ALIGN)


def check_dtypes(layout) -> None:
    """Raises the UnsupportedDtypeError of LAYOUT's first tensor whose
    dtype torch cannot hold (F6, a torch without F8), before anything is
    taken or read."""
    checked = set()
    for name, dt, shape, _, _ in layout:
        if dt not in checked:  # the dtype decides, not the shape
            _dtypes.torch_layout(dt, shape, name)
            checked.add(dt)


def _block(total: int, device):
    """TOTAL bytes from torch's caching allocator on DEVICE, safe for the
    loader's own streams to write."""
    import torch

    base = torch.empty(total, dtype=torch.uint8, device=device)
    if base.device.type == "cuda":
        # The block may have been freed by work still queued on torch's
        # stream: it must end before the loader's streams write into it.
        torch.cuda.current_stream(base.device).synchronize()
    return base


def _views(layout, base):
    """[(name, tensor)]: each of LAYOUT a view of BASE as its torch dtype
    and shape (empty tensors: their own, on BASE's device)."""
    import torch

    typed: Dict[Any, Any] = {}
    shapes: Dict[Tuple[str, Any], Tuple[Any, Any, Any]] = {}
    out = []
    for name, dt, shape, off, size in layout:
        key = (dt, shape)
        got = shapes.get(key)
        if got is None:
            tdt, tshape = _dtypes.torch_layout(dt, shape, name)
            tshape = tuple(tshape)
            got = shapes[key] = (tdt, tshape, _strides(tshape))
        tdt, tshape, strides = got
        if not size:
            out.append((name, torch.empty(tshape, dtype=tdt,
                                          device=base.device)))
            continue
        view = typed.get(tdt)
        if view is None:
            view = typed[tdt] = base.view(tdt)
        out.append((name, view.as_strided(tshape, strides,
                                          off // view.element_size())))
    return out


def _allocate(rows, dev: str):
    """([(name, tensor)], block, [(name, address, size)], block bytes) for
    ROWS (Checkpoint.tensors() rows): one block of torch's on DEV, every
    tensor a view of it."""
    import torch

    layout, total = _layout(rows)
    base = _block(total, torch.device(dev))
    ptr = base.data_ptr()
    dests = [(name, ptr + off, size) for name, _, _, off, size in layout
             if size]
    return _views(layout, base), base, dests, total


class Prepared:
    """What open_beside_loader's PREPARE made: VALUE; TOOK, its whole time;
    SECONDS, its time not spent beside the loader's setup (all of it when
    no setup ran)."""

    __slots__ = ("value", "seconds", "took")

    def __init__(self, value, seconds: float, took: float):
        self.value, self.seconds, self.took = value, seconds, took

    def note(self) -> str:
        """The report's words for it."""
        if self.took <= self.seconds:
            return ""
        return (f" beyond the loader's setup (made beside it, "
                f"{self.took * 1e3:.1f} ms in all)")


def whole_block(dev: str):
    """A PREPARE for open_beside_loader: (layout, block, block bytes) for
    every tensor of the checkpoint on DEV (load() with PREPARED)."""
    def prepare(ckpt):
        import torch

        layout, total = _layout(ckpt.tensors())
        return layout, _block(total, torch.device(dev)), total
    return prepare


def open_beside_loader(path: Any, options: Dict[str, Any], prepare=None):
    """(checkpoint of PATH, seconds of its open NOT spent beside the
    loader's setup, Prepared or None).

    When no loader for OPTIONS is pooled, one is made on another thread
    meanwhile: both release the GIL, so a first call pays for the longer of
    the two, not for both, and the report's phases (setup, then the rest of
    the open and allocation) still add up. PREPARE(checkpoint), when given,
    runs next on this thread (the layout and the device block, so that a
    first call also takes its memory beside the setup); beside a setup it
    runs only once the options passed the checks a loader makes of them, so
    a bad option still takes no memory. An error in OPTIONS is raised
    before one of PATH, as load_file does."""
    t = time.perf_counter()
    if _core.has_idle_loader(options):
        ckpt = _core.open_checkpoint(path)
        opened = time.perf_counter()
        prepared = None
        if prepare is not None:
            value = prepare(ckpt)
            took = time.perf_counter() - opened
            prepared = Prepared(value, took, took)
        return ckpt, opened - t, prepared
    import threading

    failed: List[BaseException] = []
    made = [t]

    def make():
        try:
            _core.check_options(options)
        except BaseException as e:  # noqa: BLE001 - raised below
            failed.append(e)
        made[0] = time.perf_counter()

    maker = threading.Thread(target=make, name="weightlift-loader-setup")
    maker.start()
    prepared = None
    try:
        ckpt = _core.open_checkpoint(path)
        opened = time.perf_counter()
        if prepare is not None:
            _core.validate_options(options)  # no memory for bad options
            value = prepare(ckpt)
            prepared = Prepared(value, 0.0, time.perf_counter() - opened)
    finally:
        maker.join()
        if failed:
            try:
                raise failed.pop()
            finally:
                # No local keeps the error (a cycle through its traceback
                # would keep the checkpoint's files open until the garbage
                # collector runs).
                failed = None
    if prepared is not None:
        done = opened + prepared.took
        prepared.seconds = max(0.0, done - max(opened, made[0]))
    return ckpt, max(0.0, opened - made[0]), prepared


def load(ckpt, dev: str, options: Dict[str, Any], progress: bool,
         names: Optional[List[str]] = None, t_start: Optional[float] = None,
         open_s: Optional[float] = None,
         prepared: Optional[Prepared] = None):
    """Loads every tensor of CKPT (or NAMES, in checkpoint order) to DEV.

    Returns ([(name, tensor)], LoadReport). The report's seconds cover the
    whole call from T_START (the caller's entry, default now); its
    open_seconds include OPEN_S (the caller's open of CKPT; default: from
    T_START on), its alloc_seconds the layout and the block from torch's
    allocator (PREPARED: made beside the loader's setup, for every tensor of
    CKPT; only its time beyond the setup counts). The tensor views are made
    while the loader's threads read and copy, so they cost the call nothing
    but a core's share."""
    import torch

    t0 = time.perf_counter() if t_start is None else t_start
    rows = ckpt.tensors()
    if names:
        wanted = set(names)
        rows = [r for r in rows if r[0] in wanted]
    # The loader first: a bad option or device raises before any memory is
    # taken (and its setup is in the report, not in alloc_seconds).
    with _core.pooled_loader(dict(options, device=dev)) as loader:
        t_alloc = time.perf_counter()
        if open_s is None:
            open_s = t_alloc - t0
        if prepared is not None and not names:
            layout, base, total = prepared.value
            prepared.value = None  # the views and the job hold it from here
        else:
            prepared = None
            layout, total = _layout(rows)
            base = _block(total, torch.device(dev))
        ptr = base.data_ptr()
        dests = [(name, ptr + off, size) for name, _, _, off, size in layout
                 if size]
        alloc_s = time.perf_counter() - t_alloc
        if prepared is not None:
            alloc_s += prepared.seconds
        if not dests:  # every tensor is empty: nothing to read
            return _views(layout, base), _core._empty_report(loader,
                                                             len(layout))
        job = loader.start_load_into(ckpt, dests, base)
        t_views = time.perf_counter()
        try:
            out = _views(layout, base)
        finally:  # also when it raised: the job must end before we do
            views_s = time.perf_counter() - t_views
            report = _core.wait(job, progress, sum(d[2] for d in dests))
    report.open_seconds += open_s
    report.alloc_seconds += alloc_s
    report.device_bytes = total
    report.seconds = time.perf_counter() - t0
    report.gb_per_s = (report.bytes / report.seconds / 1e9
                       if report.seconds else 0.0)
    beside = "" if prepared is None else prepared.note()
    report.notes.append(
        f"python: checkpoint open {open_s * 1e3:.1f} ms (beyond the "
        f"loader's setup), layout + device memory from torch's caching "
        f"allocator {alloc_s * 1e3:.1f} ms{beside}, {len(out)} tensor views "
        f"{views_s * 1e3:.1f} ms while the loader ran; seconds cover the "
        f"whole call")
    _core.set_last_report(report)
    return out, report
