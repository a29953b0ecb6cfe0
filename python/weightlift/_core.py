"""Glue to the native module: open, create loaders, run jobs."""

from __future__ import annotations

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
    return getattr(_last, "report", None)


def set_last_report(report: Optional[LoadReport]) -> None:
    _last.report = report


def open_checkpoint(path: Any) -> "_native.Checkpoint":
    if isinstance(path, _native.Checkpoint):
        return path
    return _native.Checkpoint.open(os.fspath(path))


def make_loader(options: Dict[str, Any]) -> "_native.Loader":
    return _native.Loader(normalize(options))


def wait(job: "_native.Job", progress: bool, total: int,
         desc: str = "weightlift") -> LoadReport:
    """Waits for JOB (GIL released in slices, so Ctrl-C works); draws a tqdm
    bar from the loader's on_progress counts when PROGRESS; raises the load's
    error; returns and records its LoadReport."""
    bar = _progress_bar(progress, total, desc)
    try:
        while not job.wait(_POLL_S if bar else 0.5):
            if bar:
                _advance(bar, job)
        if bar:
            bar.update(bar.total - bar.n)
    finally:
        if bar:
            bar.close()
    report = LoadReport(job.finish())
    set_last_report(report)
    return report


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
    loader = make_loader(options)
    infos = ckpt.tensors()
    if names:
        wanted = set(names)
        infos = [t for t in infos if t[0] in wanted]
    if infos and all(t[5] == 0 for t in infos) and (
            not names or len(infos) == len(set(names))):
        # Nothing to move: every tensor is empty. (Also sidesteps a crash of
        # the CUDA loader on zero-byte loads, seen on the H200.)
        return ([(n, dt, shape, None) for n, dt, shape, *_ in infos],
                loader.options()["device"], _empty_report(loader, len(infos)))
    job = loader.start_load(ckpt, list(names or []))
    report = wait(job, progress, ckpt.total_bytes)
    return job.take_tensors(numpy), loader.options()["device"], report
