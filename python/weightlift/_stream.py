"""``stream_tensors``: a checkpoint's tensors in file order, through a
bounded window of memory.

What an inference server's weight loader wants: every ``(name, tensor)``
in the order of the files (so the reads stay sequential), each tensor
valid for as long as the consumer holds it, and no more memory on the
device beyond the model's own parameters than a known bound.

How: the tensors are cut, in file order, into windows of at most
``window // 2`` bytes (a tensor larger than that is a window of its own).
Each window is one torch (or numpy) buffer that the loader fills in place
(Loader::LoadInto) on its C++ thread, GIL released. Window k+1 starts
loading when the consumer takes the second tensor of window k (or, for a
window of one tensor, when it asks for the next one): by then the
consumer has let go of window k-1, even with its loop variable still
bound to the tensor it had last. So at most two windows are alive at
once: ``peak_bytes <= window``, unless one tensor is larger than
``window // 2``; ``bound_bytes`` is the largest pair of neighbouring
windows, what the peak can reach.

Group mode (``process_group=``, a torch.distributed group: gloo for cpu,
NCCL for cuda): every rank still gets every full tensor, but the ranks
split the reading of each window and deliver the rest to each other
(weightlift._group's plan: all-gather of row blocks for large tensors,
broadcast from one owner for the others). The ranks must stream the same
tensors with the same window (they agree on a fingerprint first, and
every collective times out). A group window loads when the consumer
reaches it, on every rank in step (no prefetch).

Parts (``tp_plan=`` with ``tp_rank=`` / ``tp_size=``, or taken from
``process_group``; the rule of docs/tensor-parallel.md): a tensor the plan
splits comes as this rank's part, ``torch.tensor_split(full, n, dim)[r]``,
and only its bytes are read (Loader::LoadSlices; in group mode the plan's
"local" parts); the others come whole. Windows count the parts' bytes.

The yielded tensors are views of their window buffer and keep it alive:
they stay valid whatever the consumer does with them; the memory is
bounded as long as the consumer drops them (vLLM's weight loaders copy
each into its parameter and let go).
"""

from __future__ import annotations

import time
from typing import Any, Iterator, List, Optional, Sequence, Tuple

from . import _core, _dtypes, _errors, _tp_common
from ._options import device_string, parse_size
from .report import LoadReport

# Destinations inside a window start on this boundary (the CUDA
# allocator's, and a multiple of every element size).
_ALIGN = 256
DEFAULT_WINDOW = 512 << 20
MIN_WINDOW = 2 * _ALIGN  # two slots


def _align(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


class _Window:
    """Consecutive tensors (file order) loaded into one buffer."""

    __slots__ = ("infos", "rows", "parts", "offsets", "nbytes", "buffer",
                 "job")

    def __init__(self):
        self.infos: List[Tuple[str, str, Tuple[int, ...], int]] = []
        self.rows: List[tuple] = []  # Checkpoint.tensors() rows
        self.parts: List[Any] = []   # their _tp.Shard (with tp_plan)
        self.offsets: List[int] = []
        self.nbytes = 0
        self.buffer = None  # one buffer, or (group mode) one per tensor
        self.job = None

    def add(self, row: tuple, part=None) -> None:
        name, dtype, shape, _file, _offset, size = row
        if part is not None and part.split:
            shape, size = part.shape, part.bytes
        self.offsets.append(self.nbytes)
        self.infos.append((name, dtype, tuple(shape), size))
        self.rows.append(row)
        self.parts.append(part)
        self.nbytes += _align(size)


def plan_windows(infos: Sequence[tuple], window_bytes: int,
                 parts: Optional[Sequence[Any]] = None) -> List[_Window]:
    """Cuts INFOS (Checkpoint.tensors() rows, file order) into windows of
    at most WINDOW_BYTES // 2 aligned bytes each; a larger tensor is a
    window of its own. PARTS (one _tp.Shard per row, or None): split
    tensors count their part's bytes. Pure; exposed for tests."""
    half = max(window_bytes // 2, 1)
    windows: List[_Window] = []
    cur = _Window()
    for k, row in enumerate(infos):
        part = parts[k] if parts is not None else None
        size = part.bytes if part is not None and part.split else row[5]
        if cur.infos and cur.nbytes + _align(size) > half:
            windows.append(cur)
            cur = _Window()
        cur.add(row, part)
    if cur.infos:
        windows.append(cur)
    return windows


class TensorStream:
    """Iterator of ``(name, tensor)`` in file order (see module doc).

    After exhaustion: ``report`` (the loads' LoadReport merged, with
    ``seconds`` the wall time from taking the loader (its creation, when
    none was cached: the report's ``setup_seconds``) to the last tensor
    loaded), ``peak_bytes`` (most window memory the stream held at once),
    ``bound_bytes`` (what peak_bytes could reach: ``window``, or more when
    one tensor is larger than half of it), ``window_bytes`` and
    ``windows`` (how many loads ran).
    """

    def __init__(self, path: Any, device: Any = "cpu", *,
                 names: Optional[Sequence[str]] = None,
                 window: Any = DEFAULT_WINDOW, framework: str = "pt",
                 process_group: Any = None, group_timeout: float = 300.0,
                 tp_rank: Optional[int] = None, tp_size: Optional[int] = None,
                 tp_plan: Any = None, **options):
        if framework not in ("pt", "torch", "np", "numpy"):
            raise _errors.InvalidArgumentError(
                f"framework must be 'pt' or 'np', got {framework!r}")
        self._np = framework in ("np", "numpy")
        if self._np and process_group is not None:
            raise _errors.InvalidArgumentError(
                "process_group streams torch tensors (framework='pt')")
        self._device = device_string(device)
        if self._np and self._device != "cpu":
            raise _errors.InvalidArgumentError(
                "framework 'np' loads into host memory only")
        self.window_bytes = parse_size(window, "window")
        if self.window_bytes < MIN_WINDOW:
            raise _errors.InvalidArgumentError(
                f"window: {self.window_bytes} bytes is too small (at least "
                f"{MIN_WINDOW})")
        self._ckpt = _core.open_checkpoint(path)
        infos = self._ckpt.tensors()
        if isinstance(names, (str, bytes)):
            # set("ab") would be the names "a" and "b".
            raise TypeError(f"names: expected a list of tensor names, got "
                            f"the string {names!r}")
        self._group = None
        self._extra_bytes_read = 0
        self._plan = []
        refused = None  # group mode: told to the other ranks, then raised
        try:
            if names is not None:
                wanted = set(names)
                missing = wanted - {t[0] for t in infos}
                if missing:
                    from ._errors import TensorNotFoundError
                    raise TensorNotFoundError(
                        f"{len(missing)} requested tensor(s) not in the "
                        f"checkpoint, e.g. {sorted(missing)[0]!r}",
                        code="NotFound")
                infos = [t for t in infos if t[0] in wanted]
            for _, dt, shape, *_ in infos:  # fail before taking memory
                (_dtypes.numpy_layout if self._np else _dtypes.torch_layout)(
                    dt, shape)
            self._plan = _tp_plan(tp_plan, path, process_group, tp_rank,
                                  tp_size, self._np)
        except _tp_common.REFUSALS as e:
            if process_group is None:
                raise
            refused = e
        parts = None
        if process_group is not None:
            try:
                self._group = self._agree(process_group, group_timeout,
                                          infos, refused)
            finally:
                refused = None  # see _group.agree
            if self._plan:
                tp_rank, tp_size = self._group.rank(), self._group.size()
        if self._plan:
            from . import _tp
            parts, _ = _tp.shards(infos, tp_rank, tp_size, self._plan)
            # Windows land in memory of their own: a block prepare took for
            # this rank's load would only be held.
            _core.drop_tp_block(self._ckpt, _tp_common.rank_key(
                tp_rank, tp_size, self._plan))
        # Parts through the native LoadSlices where this build has it, else
        # by positioned reads (weightlift._tp.read_part_into) when reached.
        self._slice_loads = bool(self._plan) and self._group is None and \
            hasattr(_native_loader(), "start_load_slices")
        self.split_tensors = sum(1 for p in parts or () if p.split)
        self._windows = plan_windows(infos, self.window_bytes, parts)
        self.windows = len(self._windows)
        sizes = [w.nbytes for w in self._windows]
        self.bound_bytes = max([0] + sizes + [x + y for x, y in
                                              zip(sizes, sizes[1:])])
        self.bytes = sum(w_info[3] for w in self._windows
                         for w_info in w.infos)
        self.peak_bytes = 0
        self.report: Optional[LoadReport] = None
        self._reports: List[LoadReport] = []
        self._options = dict(options)
        # From here on the report's seconds: a loader made now (its setup,
        # in the first window's report) is part of them.
        self._t0 = time.perf_counter()
        self._loader_cm = _core.pooled_loader(dict(options,
                                                   device=self._device))
        self._loader = self._loader_cm.__enter__()
        self._next = 0          # index of the next window to start
        self._pending: Optional[_Window] = None  # started, not handed out
        self._current: Optional[_Window] = None  # being handed out
        self._last: Optional[_Window] = None     # window of the last tensor
        self._pos = 0
        self._t_loaded = self._t0
        self._start_next()

    def _agree(self, process_group, timeout, infos, refused=None):
        """Group mode: every rank checks it streams the same tensors of the
        same checkpoint (the C++ agreement, AgreeOnGroupLoad, with the
        group's timeout). REFUSED: what this rank got wrong before, told to
        the others (they fail at once, naming this rank) and raised."""
        from . import _group, _native
        g = _group.TorchGroupTransport(
            process_group, _tp_common.group_timeout_seconds(timeout))
        cuda = self._device.startswith("cuda")
        error, fingerprint = refused, ""
        try:
            if error is not None:
                pass  # told to the group below, as it is
            # g.backend: "nccl", "gloo", or torch 2's "cpu:gloo,cuda:nccl".
            elif ("nccl" if cuda else "gloo") not in g.backend:
                raise _errors.InvalidArgumentError(
                    f"process_group: a {g.backend} group cannot deliver "
                    f"tensors on {self._device} (gloo for cpu, NCCL for "
                    f"cuda)")
            else:
                # The layout here; each window's LoadWithGroup agrees again,
                # on its tensors' layout and a sample of their bytes, before
                # its data moves.
                fingerprint = _native.group_fingerprint(
                    infos, [f["size"] for f in self._ckpt.files()],
                    bool(self._plan), g.size(), self._plan)
                if isinstance(fingerprint, dict):
                    _tp_common.raise_error(fingerprint["error"])
        except (ValueError, TypeError, OSError) as e:
            error = e
        try:
            _group.agree(g, self._device, fingerprint, error)
        finally:
            # The error's traceback holds this frame: no local may hold the
            # error (see _group.agree).
            error = refused = None
        return g

    def _in_device(self, fn):
        if self._device.startswith("cuda"):
            import torch
            with torch.cuda.device(self._device):
                return fn()
        return fn()

    def _load_group_window(self, w: _Window) -> None:
        """Group mode: the ranks read W's tensors between them and deliver
        the rest (C++ LoadWithGroup over W's tensors; every rank ends with
        every full tensor of W, or its part under tp_plan)."""
        from . import _group
        g = self._group
        sharded = bool(self._plan)
        req = _tp_common.TpRequest(rank=g.rank() if sharded else None,
                                   size=g.size() if sharded else None,
                                   plan=self._plan, group=g.group,
                                   timeout=g.timeout, sharded=sharded)
        load = _group.GroupLoad(None, self._device, req, self._options,
                                names=[row[0] for row in w.rows],
                                ckpt=self._ckpt, transport=g,
                                loader=self._loader)
        got = {i: data for i, _, data in load.tensors(raw=True)}
        w.buffer = [got.get(i) for i in range(len(w.rows))]
        self._reports.append(load.report)

    # -- window life cycle -------------------------------------------------

    def _start_next(self) -> None:
        """Allocates the next window and starts its load (if any left)."""
        if self._next >= len(self._windows):
            return
        w = self._windows[self._next]
        self._next += 1
        self._pending = w
        if self._group is not None:
            return  # loaded in step with the other ranks, when reached
        if self._slice_loads:
            # LoadSlices: this rank's parts (and whole tensors) into memory
            # the loader allocates; counted as the window's bytes.
            from . import _tp
            alive = {id(x): x.nbytes for x in (w, self._current, self._last)
                     if x is not None}
            self.peak_bytes = max(self.peak_bytes, sum(alive.values()))
            reqs = [_tp.slice_request(p) for p, info in zip(w.parts, w.infos)
                    if info[3]]
            w.buffer = []
            if reqs:
                w.job = self._loader.start_load_slices(self._ckpt, reqs)
            return
        w.buffer = self._alloc(w.nbytes)
        # Alive now: this window, the one being handed out and the one the
        # consumer's last tensor is a view of (kept alive by that view).
        alive = {id(x): x.nbytes for x in (w, self._current, self._last)
                 if x is not None}
        self.peak_bytes = max(self.peak_bytes, sum(alive.values()))
        dests = []
        base = self._address(w.buffer)
        for (name, _dt, _shape, size), off, part in zip(w.infos, w.offsets,
                                                         w.parts):
            if size and (part is None or not part.split):
                dests.append((name, base + off, size))  # parts: in _finish
        if not dests:
            return  # every tensor of the window is empty: nothing to read
        if self._device.startswith("cuda"):
            import torch
            # The caching allocator may hand out a block that work queued
            # on the current stream (the consumer's copies out of an
            # earlier window) still reads; the loader writes on its own
            # streams.
            torch.cuda.current_stream(self._device).synchronize()
        w.job = self._loader.start_load_into(self._ckpt, dests, w.buffer)

    def _alloc(self, size: int):
        size = max(size, 1)
        if self._np:
            import numpy as np
            return np.empty(size, dtype=np.uint8)
        import torch
        return torch.empty(size, dtype=torch.uint8, device=self._device)

    @staticmethod
    def _address(buf) -> int:
        return buf.ctypes.data if hasattr(buf, "ctypes") else buf.data_ptr()

    def _finish(self, w: _Window) -> None:
        if self._group is not None:
            alive = {id(x): x.nbytes for x in (w, self._last)
                     if x is not None}
            self.peak_bytes = max(self.peak_bytes, sum(alive.values()))
            self._load_group_window(w)
            self._t_loaded = time.perf_counter()
            return
        job, w.job = w.job, None
        if job is not None:
            self._reports.append(_core.wait(job, False, w.nbytes))
            if isinstance(w.buffer, list):  # LoadSlices: loader-owned
                got = {name: data for name, _, _, data in
                       job.take_tensors(False)}
                w.buffer = [got.get(info[0]) if info[3] else None
                            for info in w.infos]
        if self._plan and not isinstance(w.buffer, list):
            from . import _tp
            for part, off in zip(w.parts, w.offsets):
                if part.split and part.bytes:
                    self._extra_bytes_read += _tp.read_part_into(
                        self._ckpt, part, w.buffer.narrow(0, off, part.bytes))
        self._t_loaded = time.perf_counter()

    def _view(self, w: _Window, i: int):
        _name, dt, shape, size = w.infos[i]
        off = w.offsets[i]
        if size == 0:
            buf = None
        elif isinstance(w.buffer, list):  # one buffer per tensor
            buf = w.buffer[i]
            if not hasattr(buf, "data_ptr"):  # a DLPack capsule (LoadSlices)
                import torch
                buf = torch.utils.dlpack.from_dlpack(buf)
        elif self._np:
            buf = w.buffer[off:off + size]
        else:
            buf = w.buffer.narrow(0, off, size)
        if self._np:
            return _dtypes.view_numpy(buf, dt, shape)
        t = _dtypes.view_torch(buf, dt, shape)
        return t.to(self._device) if buf is None else t

    # -- iteration -----------------------------------------------------------

    def __iter__(self) -> Iterator[Tuple[str, Any]]:
        return self

    def __next__(self) -> Tuple[str, Any]:
        if self._current is None or self._pos >= len(self._current.infos):
            self._advance()
        w, i = self._current, self._pos
        self._pos += 1
        if i == 1 and self._pending is None and self._group is None:
            # The consumer has moved on to this window (it took tensor 0
            # and let go of the previous window's last one): prefetch.
            self._start_next_or_close()
        self._last = w
        return w.infos[i][0], self._view(w, i)

    def _advance(self) -> None:
        """Makes the next loaded window current (waits for its load)."""
        if self._loader is None:  # ended, failed or closed
            raise StopIteration
        if self._current is not None:
            # Handed out in full: the stream lets go of it (the consumer's
            # tensors keep their parts alive while it holds them).
            self._current.buffer = None
            self._current = None
        if self._pending is None:
            # A one-tensor window came before, or group mode (no prefetch).
            self._start_next_or_close()
        if self._pending is None:
            self._close(ok=True)
            raise StopIteration
        w, self._pending = self._pending, None
        try:
            self._finish(w)
        except BaseException:
            self._close(ok=False)
            raise
        self._current, self._pos = w, 0

    def _start_next_or_close(self) -> None:
        try:
            self._start_next()
        except BaseException:
            self._close(ok=False)
            raise

    def _close(self, ok: bool) -> None:
        if self._loader is None:
            return
        pending, self._pending = self._pending, None
        if pending is not None and pending.job is not None:
            job, pending.job = pending.job, None
            _core.stop(job)  # its buffer must outlive the reads in flight
        pending = None
        if self._current is not None:
            self._current.buffer = None
            self._current = None
        self._last = None
        # No load is in flight any more: the loader may be reused.
        self._loader = None
        self._loader_cm.__exit__(None, None, None)
        if self._group is not None:
            # Ended: the stream must not keep the process group alive past
            # the caller's destroy_process_group() (see
            # TorchGroupTransport.release).
            self._group.release()
        if ok:
            self._make_report()

    def _make_report(self) -> None:
        merged = LoadReport.merge(self._reports, files_by_path=True)
        if merged is None:
            merged = LoadReport({"device": self._device, "tensors": 0,
                                 "bytes": 0, "bytes_read": 0, "seconds": 0.0,
                                 "open_seconds": 0.0, "alloc_seconds": 0.0,
                                 "transfer_seconds": 0.0, "staging_bytes": 0,
                                 "device_bytes": 0, "threads": 0,
                                 "gb_per_s": 0.0, "files": [], "notes": []})
        else:
            merged.notes = list(dict.fromkeys(merged.notes))
            merged.device = self._device
        wall = self._t_loaded - self._t0
        merged.tensors = sum(len(w.infos) for w in self._windows)
        merged.bytes = self.bytes  # delivered (group mode: not all read)
        merged.bytes_read = (merged.bytes_read or 0) + self._extra_bytes_read
        if self.split_tensors:
            merged.notes.insert(0, (
                f"tp: {self.split_tensors} tensors came as this rank's part "
                f"(tp_plan); {self.bytes} bytes delivered"))
        if self._group is not None:
            g = self._group
            merged.notes.insert(0, (
                f"group: rank {g.rank()} of {g.size()} ({g.backend}) read "
                f"{merged.bytes_read} of {self.bytes} bytes; the group "
                f"delivered the rest"))
        merged.seconds = wall
        merged.gb_per_s = merged.bytes / wall / 1e9 if wall > 0 else 0.0
        self.report = merged
        _core.set_last_report(merged)

    def close(self) -> None:
        """Stops early: cancels the load in flight, waits for its reads in
        flight, drops the windows."""
        self._close(ok=False)

    def __del__(self):
        try:
            self._close(ok=False)
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass


def _native_loader():
    from . import _native
    return _native.Loader


def _tp_plan(plan, path, group, rank, size, np):
    """The normalized tp_plan ([] without one), its arguments checked."""
    from . import _tp
    if plan is None:
        if rank is not None or size is not None:
            raise TypeError("tp_rank / tp_size need a tp_plan here (the "
                            "stream splits only the tensors a plan names)")
        return []
    if np:
        raise _errors.InvalidArgumentError(
            "tp_plan streams torch tensors (framework='pt')")
    if group is not None:
        if rank is not None or size is not None:
            raise TypeError("with process_group, tp_rank and tp_size come "
                            "from the group")
    elif rank is None or size is None:
        raise TypeError("tp_plan needs tp_rank and tp_size (or a "
                        "process_group)")
    return _tp.normalize_plan(plan, path, [])


def stream_tensors(path: Any, device: Any = "cpu", *,
                   names: Optional[Sequence[str]] = None,
                   window: Any = DEFAULT_WINDOW, framework: str = "pt",
                   process_group: Any = None, group_timeout: float = 300.0,
                   tp_rank: Optional[int] = None, tp_size: Optional[int] = None,
                   tp_plan: Any = None, **options) -> TensorStream:
    """Yields ``(name, tensor)`` for the tensors of PATH (or NAMES of them)
    in file order, holding at most WINDOW bytes of them at once (see the
    module doc). With PROCESS_GROUP the ranks split the reading (group
    mode). Raises the load's error where it happens."""
    return TensorStream(path, device=device, names=names, window=window,
                        framework=framework, process_group=process_group,
                        group_timeout=group_timeout, tp_rank=tp_rank,
                        tp_size=tp_size, tp_plan=tp_plan, **options)
