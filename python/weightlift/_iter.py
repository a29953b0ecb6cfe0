"""``iter_tensors``: yield ``(name, tensor)`` as each tensor lands.

The load runs on a C++ thread with the GIL released (Loader::LoadInto into
buffers allocated up front by torch or numpy). The loader's on_ready
callback pushes each finished tensor's index into a thread-safe queue that
the iterator drains, so a consumer can start (e.g. shard or quantize) while
the rest is still in flight. Tensors come in completion order, not file
order. If the load fails, the iterator raises the load's error (after the
tensors that did land); closing the iterator early cancels the load and
waits for its reads in flight before the buffers can be freed.
"""

from __future__ import annotations

import collections
import threading
from typing import Any, Iterator, Optional, Tuple

from . import _core, _dtypes, _errors
from ._options import device_string
from .report import LoadReport

_POLL_S = 0.1


class TensorIterator:
    """Iterator of ``(name, tensor)``; ``.report`` is set once exhausted."""

    def __init__(self, path: Any, device: Any = "cpu", framework: str = "pt",
                 progress: bool = False, **options):
        if framework not in ("pt", "torch", "np", "numpy"):
            raise _errors.InvalidArgumentError(
                f"framework must be 'pt' or 'np', got {framework!r}")
        self._np = framework in ("np", "numpy")
        self._device = device_string(device)
        if self._np and self._device != "cpu":
            raise _errors.InvalidArgumentError(
                "framework 'np' loads into host memory only")
        ckpt = _core.open_checkpoint(path)
        # From the pool (one weightlift.prepare or an earlier load made: no
        # setup), given back once its load has ended (_release).
        self._loader_cm = _core.pooled_loader(dict(options,
                                                   device=self._device))
        self._loader = self._loader_cm.__enter__()
        self._job = None
        try:
            self._start(ckpt, progress)
        except BaseException:
            if self._job is None:  # nothing was started: it is idle
                self._release()
            raise

    def _start(self, ckpt, progress: bool) -> None:
        self.report: Optional[LoadReport] = None
        self._infos = []
        self._bufs = []
        self._empty = collections.deque()
        # One consumer at a time: threads sharing the iterator take turns,
        # each tensor going to one of them.
        self._lock = threading.Lock()
        dests = []
        for name, dt, shape, _, _, size in ckpt.tensors():
            # Fail before allocating anything for a dtype we cannot return.
            if self._np:
                _dtypes.numpy_layout(dt, shape, name)
            else:
                _dtypes.torch_layout(dt, shape, name)
            if size == 0:
                self._empty.append((name, dt, shape))
                continue
            buf, ptr = self._alloc(size)
            self._infos.append((name, dt, shape))
            self._bufs.append(buf)
            dests.append((name, ptr, size))
        if self._device.startswith("cuda"):
            import torch
            # The caching allocator may hand out blocks still used by work
            # queued on the current stream; the loader writes on its own.
            torch.cuda.synchronize(self._device)
        self._bar = _core._progress_bar(progress, ckpt.total_bytes,
                                        "weightlift")
        self._job = self._loader.start_load_into(ckpt, dests, self._bufs)

    def _release(self, pool: bool = True) -> None:
        """Lets go of the loader, once no load of ours runs on it: back to
        the pool when POOL (not from a finalizer, which may run while this
        thread holds the pool's lock)."""
        cm, self._loader_cm = self._loader_cm, None
        self._loader = None
        if cm is not None and pool:
            cm.__exit__(None, None, None)

    def _alloc(self, size: int):
        if self._np:
            import numpy as np
            buf = np.empty(size, dtype=np.uint8)
            return buf, buf.ctypes.data
        import torch
        buf = torch.empty(size, dtype=torch.uint8, device=self._device)
        return buf, buf.data_ptr()

    def __iter__(self) -> Iterator[Tuple[str, Any]]:
        return self

    def __next__(self) -> Tuple[str, Any]:
        with self._lock:
            return self._next()

    def _next(self) -> Tuple[str, Any]:
        if self._empty:
            name, dt, shape = self._empty.popleft()
            return name, self._view(None, dt, shape)
        if self._job is None:
            raise StopIteration
        while True:
            i = self._job.next_ready(_POLL_S)
            if i >= 0:
                name, dt, shape = self._infos[i]
                buf, self._bufs[i] = self._bufs[i], None
                return name, self._view(buf, dt, shape)
            if self._bar is not None:
                _core._advance(self._bar, self._job)
            if i == -2:
                self._finish()
                raise StopIteration

    def _view(self, buf, dt, shape):
        if self._np:
            return _dtypes.view_numpy(buf, dt, shape)
        t = _dtypes.view_torch(buf, dt, shape)
        return t.to(self._device) if buf is None else t

    def _finish(self) -> None:
        job, self._job = self._job, None
        try:
            if self._bar is not None:
                self._bar.update(self._bar.total - self._bar.n)
                self._bar.close()
            self.report = LoadReport(job.finish())  # raises the load's error
            _core.set_last_report(self.report)
        finally:
            self._bufs = []
            self._release()  # the load has ended, failed or not

    def close(self) -> None:
        """Stops iterating: cancels the load, waits for its reads in flight
        (their buffers must outlive them) and drops the tensors not yet
        yielded."""
        with self._lock:
            self._close()

    def _close(self, pool: bool = True) -> None:
        if self._job is not None:
            job, self._job = self._job, None
            _core.stop(job)
            if self._bar is not None:
                self._bar.close()
            self._bufs = []
            self._empty.clear()
            self._release(pool)

    def __del__(self):
        try:
            with self._lock:
                self._close(pool=False)
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass


def iter_tensors(path: Any, device: Any = "cpu", *, framework: str = "pt",
                 progress: bool = False, **options) -> TensorIterator:
    """Yields ``(name, tensor)`` for every tensor of PATH as it lands on
    DEVICE (completion order). Raises the load's error if it fails.
    With tp_* / process_group the parts come in checkpoint order, a batch
    at a time as each lands (docs/tensor-parallel.md)."""
    from . import _tp
    tp = _tp.take_tp(options, path)
    if tp is not None:
        if framework not in ("pt", "torch"):
            raise _errors.InvalidArgumentError(
                "tp_* and process_group load torch tensors")
        return _tp.TpIterator(path, device_string(device), tp, options)
    return TensorIterator(path, device=device, framework=framework,
                          progress=progress, **options)
