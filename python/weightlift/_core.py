"""Glue to the native module: open, create loaders, run jobs."""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, Dict, List, Optional

from . import _errors, _native
from ._options import normalize
from .report import LoadReport

_native._set_error_factory(_errors.from_status)

_last = threading.local()
_POLL_S = 0.05


def last_report() -> Optional[LoadReport]:
    """The LoadReport of the calling thread's most recent load (any API)."""
    report = getattr(_last, "report", None)
    if isinstance(report, (_native.HostReport, _native.Report)):
        # Built when first asked for.
        report = _last.report = LoadReport(report.as_dict())
    return report


def set_last_report(report) -> None:
    """REPORT: a LoadReport, or a native HostReport (safe_open's per-call
    path) or Report (load_slices_into), turned into one by last_report()
    only if someone asks."""
    _last.report = report


# The checkpoint prepare(checkpoint=) opened ahead of its load, one at a
# time: (absolute path, the opened checkpoint, its files' identities then).
# Opening reads and parses every header (0.9 ms for Llama-2-7B's two
# shards on the H200 host, session 17), on the clock of a first load that
# prepare has otherwise taken everything off; looking the identities up
# again is a few stat calls.
_prepared_checkpoint: Optional[tuple] = None
# A tensor-parallel rank's request prepare(checkpoint=, tp_*) made for the
# kept checkpoint: [(rank, size, plan), (requests, info), block]; it goes
# with it. BLOCK: on a CUDA device, the rank's device memory from torch's
# caching allocator, taken ahead (a fresh process's first block of a few
# GB is a cudaMalloc: 0.4-0.7 ms of a rank's first call on the H100 host
# in session 24, up to 2.1 ms on the H200 in session 11); the load it was
# made for takes it (take_tp_block). None otherwise.
_prepared_tp: Optional[list] = None
# Hands the block over once when two threads load at the same time.
_block_lock = threading.Lock()


def _identities(path: str, ckpt: "_native.Checkpoint") -> Optional[tuple]:
    """What must not have changed for CKPT (opened from PATH) to stand for
    PATH still: the path itself (a folder's entries), its index and every
    file, each as (device, inode, size, mtime); None when one is gone."""
    paths = [path] + ([ckpt.index_path] if ckpt.index_path else []) + [
        f["path"] for f in ckpt.files()]
    ids = []
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            return None
        ids.append((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(ids)


def prepare_checkpoint(path: Any) -> None:
    """Opens PATH now (raising what opening it would raise) and keeps it for
    the next open_checkpoint of the same path, which takes it while none of
    its files has changed (identity, size, modification time). Replaces the
    one kept before; release_cached_loaders() lets it go (it holds the
    files open). A remote checkpoint (URL) is not kept: nothing tells here
    that its objects are unchanged."""
    global _prepared_checkpoint, _prepared_tp
    if _prepared_tp is not None:
        # An earlier prepare's device block is let go, whatever this one
        # prepares: a block is made for the load that follows its prepare.
        with _block_lock:
            _prepared_tp[2] = None
    path = os.fspath(path)
    if isinstance(path, bytes) or "://" in path:
        return
    path = os.path.abspath(path)
    ckpt = open_checkpoint(path)
    ids = _identities(path, ckpt)
    # Opened between two looks that agree: the files it holds open are the
    # ones at these paths (a file replaced while it was opened is a miss).
    if ids is not None and ids == _identities(path, ckpt):
        if _prepared_checkpoint is None or _prepared_checkpoint[1] is not ckpt:
            _prepared_tp = None  # made for the one replaced
        _prepared_checkpoint = (path, ckpt, ids)


def keep_tp_request(ckpt: "_native.Checkpoint", key: tuple,
                    made: tuple, block: Any = None) -> None:
    """Keeps MADE (tp_requests' (requests, info)) for KEY (rank, size,
    plan) of CKPT, the checkpoint prepare kept, with BLOCK (the load's
    device memory, or None) for take_tp_block."""
    global _prepared_tp
    entry = _prepared_checkpoint
    if entry is not None and entry[1] is ckpt:
        _prepared_tp = [key, made, block]


def _kept_tp(ckpt: "_native.Checkpoint", key: tuple) -> Optional[list]:
    """The [key, (requests, info), block] prepare kept for KEY of CKPT (the
    checkpoint it kept), or None."""
    entry, tp = _prepared_checkpoint, _prepared_tp
    if entry is None or entry[1] is not ckpt or tp is None or tp[0] != key:
        return None
    return tp


def take_tp_block(ckpt: "_native.Checkpoint", key: tuple, nbytes: int,
                  device: Any) -> Any:
    """The device block prepare took for KEY's load of CKPT, when it is
    NBYTES on DEVICE, handed over once (that load's tensors are views of
    it: no second load may have it); None otherwise. A load of another
    rank or device leaves it for the load it was made for, as it leaves
    the pages prepare registered; the next prepare(checkpoint=) and
    release_cached_loaders() let it go."""
    tp = _kept_tp(ckpt, key)
    if tp is None:
        return None
    with _block_lock:
        block = tp[2]
        if block is None or block.numel() != nbytes or block.device != device:
            return None
        tp[2] = None
    return block


def drop_tp_block(ckpt: "_native.Checkpoint", key: tuple) -> None:
    """Lets go of the device block prepare took for KEY's load of CKPT:
    that rank is loading it in batches (iter_tensors, stream_tensors),
    into memory of their own, so the block would only hold a rank's share
    of the model's memory to no end."""
    tp = _kept_tp(ckpt, key)
    if tp is not None:
        with _block_lock:
            tp[2] = None


def kept_tp_request(ckpt: "_native.Checkpoint", key: tuple
                    ) -> Optional[tuple]:
    """The (requests, info) keep_tp_request kept for KEY of CKPT, or None."""
    tp = _kept_tp(ckpt, key)
    return None if tp is None else tp[1]


def kept_checkpoint(path) -> Optional["_native.Checkpoint"]:
    """The checkpoint prepare(checkpoint=) kept for PATH, while it still
    stands for it; None otherwise."""
    entry = _prepared_checkpoint
    if entry is None or not isinstance(path, str) or "://" in path:
        return None
    where, ckpt, ids = entry
    if os.path.abspath(path) != where or _identities(where, ckpt) != ids:
        return None
    return ckpt


def open_checkpoint(path: Any) -> "_native.Checkpoint":
    if isinstance(path, _native.Checkpoint):
        return path
    path = os.fspath(path)
    if ("\0" if isinstance(path, str) else b"\0") in path:
        # The C++ refuses it too (the system calls would open the file named
        # by the part before it); safetensors' error here, as for a missing
        # file.
        raise _errors.NotFoundError(f"No such file or directory: {path}",
                                    code="NotFound")
    prepared = kept_checkpoint(path)
    if prepared is not None:
        return prepared
    try:
        return _native.Checkpoint.open(path)
    except _errors.NotFoundError:
        if os.path.lexists(path):
            raise  # a shard or tensor is missing: the C++ message says which
        # The path itself: safetensors' words, so code that matches them
        # (and users who know them) see the same.
        raise _errors.NotFoundError(f"No such file or directory: {path}",
                                    code="NotFound") from None


def make_loader(options: Dict[str, Any]) -> "_native.Loader":
    """A new Loader of its own (staging memory, threads, streams)."""
    return _native.Loader(normalize(options))


# Idle loaders by options. A Loader allocates its pinned staging ring,
# threads and CUDA streams once (~0.1-0.2 s for a CUDA loader); reusing it
# across load_file / load_checkpoint / load_into calls keeps that out of
# every load. At most _MAX_IDLE per distinct options; a loader is returned
# only after its job has finished. release_cached_loaders() frees them.
_pool_lock = threading.Lock()
_idle: Dict[tuple, List["_native.Loader"]] = {}
_MAX_IDLE = 2


def _pool_key(options: Dict[str, Any]) -> tuple:
    return tuple(sorted(options.items()))


@contextlib.contextmanager
def pooled_loader(options: Dict[str, Any]):
    """Yields an idle loader for OPTIONS (or a new one); puts it back after
    the block unless the block was interrupted with its job maybe running
    (anything but a WeightliftError)."""
    opts = normalize(options)
    key = _pool_key(opts)
    with _pool_lock:
        stack = _idle.get(key)
        loader = stack.pop() if stack else None
    if loader is None:
        loader = _native.Loader(opts)
    reusable = False
    try:
        yield loader
        reusable = True
    except _errors.WeightliftError:
        reusable = True  # the job ran to its (failed) end
        raise
    finally:
        if reusable:
            with _pool_lock:
                stack = _idle.setdefault(key, [])
                if len(stack) < _MAX_IDLE:
                    stack.append(loader)


# What this process had made before it was forked from its parent, kept by
# the child and never freed (see _forget_after_fork).
_inherited: List[Any] = []


def _forget_after_fork() -> None:
    """In a forked child (os.fork, multiprocessing's fork, a pre-forking
    server): the pooled loaders and the checkpoint prepare kept belong to
    the parent. Their worker threads stayed there, and their C++ side
    refuses to load here (util/fork_epoch.h) rather than wait forever for
    those threads. They are set aside, never freed (freeing a CUDA loader
    would call into a CUDA context the child cannot use), and the child's
    loads make their own loaders. The pool's and the block's locks are
    new: another thread of the parent may have held one when the process
    forked."""
    global _pool_lock, _block_lock, _idle, _prepared_checkpoint, _prepared_tp
    _inherited.append((_idle, _prepared_checkpoint, _prepared_tp))
    _idle = {}
    _pool_lock = threading.Lock()
    _block_lock = threading.Lock()
    _prepared_checkpoint = _prepared_tp = None


os.register_at_fork(after_in_child=_forget_after_fork)


def has_idle_loader(options: Dict[str, Any]) -> bool:
    """Whether a load with OPTIONS would take a pooled loader (no setup)."""
    key = _pool_key(normalize(options))
    with _pool_lock:
        return bool(_idle.get(key))


def validate_options(options: Dict[str, Any]) -> None:
    """Raises what making a loader would raise for OPTIONS' names and values
    (not for the device), without making one: no threads, no memory."""
    _native.check_options(normalize(options))


def check_options(options: Dict[str, Any], take_setup: bool = False) -> float:
    """Raises what a load with OPTIONS would raise for them (unknown name,
    bad value, unusable device) without loading: a loader is made (or
    taken from the pool) and pooled again for the load that follows.
    TAKE_SETUP: that load does not wait for the loader's creation (it comes
    later, as a handle's reads do), so its report does not count it; the
    seconds taken are returned (0.0 otherwise, or when none were left)."""
    with pooled_loader(options) as loader:
        return loader.take_setup_seconds() if take_setup else 0.0


def release_cached_loaders() -> None:
    """Frees the staging memory of every idle cached loader, and lets go of
    the checkpoint prepare(checkpoint=) kept open, with what it prepared
    for a rank's load: its request, its registered pages and its device
    block."""
    global _prepared_checkpoint, _prepared_tp
    _prepared_checkpoint = _prepared_tp = None
    with _pool_lock:
        _idle.clear()


def wait(job: "_native.Job", progress: bool, total: int,
         desc: str = "weightlift") -> LoadReport:
    """Waits for JOB (GIL released in slices, so Ctrl-C works); draws a tqdm
    bar from the loader's on_progress counts when PROGRESS; raises the load's
    error; returns and records its LoadReport."""
    bar = None
    try:
        bar = _progress_bar(progress, total, desc)
        while not job.wait(_POLL_S if bar else 0.5):
            if bar:
                _advance(bar, job)
        if bar:
            bar.update(bar.total - bar.n)
    except BaseException:
        # Ctrl-C, or no tqdm for the bar: the load is cancelled (no more
        # reads) and its reads in flight end before the error goes up.
        # Otherwise it would go on writing into the caller's tensors after
        # the call returned (and over a later load into the same tensors).
        stop(job)
        raise
    finally:
        if bar:
            bar.close()
    report = LoadReport(job.finish())
    set_last_report(report)
    return report


def stop(job: "_native.Job") -> None:
    """Stops JOB early: cancels it (it takes no more reads; a native module
    without Job.cancel lets it run to its end) and waits until its thread
    has stopped writing. Its outcome is dropped: the caller is stopping or
    already raising. A second Ctrl-C still goes up."""
    cancel = getattr(job, "cancel", None)
    if cancel is not None:
        cancel()
    while not job.wait(0.5):
        pass


def _progress_bar(progress: bool, total: int, desc: str):
    if not progress:
        return None
    from tqdm.auto import tqdm
    return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024,
                desc=desc)


def _advance(bar, job) -> None:
    done, total = job.progress()
    if total and total != bar.total:
        bar.total = total
        bar.refresh()
    if done > bar.n:
        bar.update(done - bar.n)


def _empty_report(loader, tensors: int) -> LoadReport:
    r = LoadReport({"device": loader.options()["device"], "tensors": tensors,
                    "bytes": 0, "bytes_read": 0, "seconds": 0.0,
                    "open_seconds": 0.0, "alloc_seconds": 0.0,
                    "transfer_seconds": 0.0, "staging_bytes": 0,
                    "device_bytes": 0, "threads": 0, "gb_per_s": 0.0,
                    "notes": ["every tensor is empty: nothing loaded"]})
    set_last_report(r)
    return r


def load_raw(path: Any, names: Optional[List[str]] = None,
             progress: bool = False, numpy: bool = False, **options):
    """Loads NAMES (all when None) with loader-owned memory.

    Returns ([(name, dtype, shape, bytes_or_None)], device string, report);
    the bytes are DLPack capsules, or memoryviews when NUMPY.
    """
    ckpt = open_checkpoint(path)
    with pooled_loader(options) as loader:
        return _load_raw_with(loader, ckpt, names, progress, numpy)


def _load_raw_with(loader, ckpt, names, progress, numpy):
    infos = ckpt.tensors()
    if names:
        wanted = set(names)
        infos = [t for t in infos if t[0] in wanted]
    if infos and all(t[5] == 0 for t in infos) and (
            not names or len(infos) == len(set(names))):
        # Nothing to move: every tensor is empty.
        return ([(n, dt, shape, None) for n, dt, shape, *_ in infos],
                loader.options()["device"], _empty_report(loader, len(infos)))
    job = loader.start_load(ckpt, list(names or []))
    report = wait(job, progress, ckpt.total_bytes)
    return job.take_tensors(numpy), loader.options()["device"], report
