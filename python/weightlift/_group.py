"""Group mode: ``process_group=`` (a torch.distributed group; gloo for cpu
tensors, NCCL for cuda tensors).

Without tp_*: every rank ends with every full tensor, while each reads about
1/n of the bytes and the group delivers the rest. With tp_*: each rank reads
its own parts of the split tensors, and each replicated tensor is read once
in the group and delivered to the others.

The load is the C++ one, LoadWithGroup (include/weightlift/group.h), the
same code the CLI and C++ callers run: the agreement on a fingerprint of
the request and the checkpoint, the group plan (src/plan/group_plan.h),
this rank's reads and the collectives, batch by batch. Python only
supplies the transport: TorchGroupTransport fills the C++ GroupTransport
interface with the torch.distributed group, so each collective is a torch
collective on a tensor over the C++ memory (host for gloo, the rank's CUDA
device for NCCL), issued from the load's C++ thread with the GIL taken.

Every collective waits at most ``group_timeout`` seconds, then fails with
GroupTimeoutError naming the rank, the collective and the seconds. A
collective the group refuses (a peer gone) is a WeightliftIOError naming
it. torch cannot cancel a gloo collective whose wait timed out: its tensors
and the C++ memory under them are kept (``_BROKEN``) until that work ends,
so a late peer never writes into freed memory.
"""

from __future__ import annotations

import contextlib
import datetime
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from . import _core, _dtypes, _errors, _native
from ._tp_common import (REFUSALS, TpRequest, make_report, raise_error,
                         shards, tp_notes)
from ._errors import InvalidArgumentError, WeightliftIOError

ALLGATHER_MIN_BYTES = 4 << 20
# 0: the C++ default (about 8 batches, none under 256 MiB or over 4 GiB;
# GroupPlanOptions, AutoBatchBytes)
BATCH_BYTES = 0


class GroupTimeoutError(WeightliftIOError, TimeoutError):
    """A collective of the process group did not finish in time (a rank
    stopped, crashed, or is running a different load)."""

    code = "IoError"


# (work, transport, tensors) of collectives whose wait failed while the
# work may still run: kept so that neither the tensors nor the C++ memory
# they view (retained by the transport: a failed load's whole buffer, on a
# GPU as large as the model) is freed under it. A reaper thread prunes the
# works that ended, so that memory goes as soon as it can (a server that
# retries a failed load needs it back), not at the next failure.
_BROKEN: List[Tuple[Any, Any, Any]] = []
_BROKEN_LOCK = threading.Lock()
_REAPER: Optional[threading.Thread] = None
_REAP_EVERY_S = 0.05


def _keep_until_done(work, transport, tensors) -> None:
    global _REAPER
    with _BROKEN_LOCK:
        _BROKEN.append((work, transport, tensors))
        if _REAPER is None:
            _REAPER = threading.Thread(target=_reap, daemon=True,
                                       name="weightlift-group-reaper")
            _REAPER.start()


def _reap() -> None:
    """Drops the entries of _BROKEN whose work ended; ends when none is
    left."""
    global _REAPER
    while True:
        time.sleep(_REAP_EVERY_S)
        with _BROKEN_LOCK:
            _BROKEN[:] = [b for b in _BROKEN if not _completed(b[0])]
            if not _BROKEN:
                _REAPER = None
                return


def _completed(work) -> bool:
    try:
        return bool(work.is_completed())
    except Exception:  # noqa: BLE001 - a failed work has ended
        return True


def _first_unfinished(issued) -> int:
    """The index of the first op of ISSUED [(index, works)] with a work
    that has not completed or whose state cannot be read (it failed),
    else the last one's."""
    for k, works in issued:
        for w in works:
            try:
                if not w.is_completed():
                    return k
            except Exception:  # noqa: BLE001 - the work that failed
                return k
    return issued[-1][0] if issued else 0


def _await_works(works, seconds: float) -> bool:
    """True once every work of WORKS has completed, False when SECONDS
    passed first; raises what a work raised. Polls is_completed(): for
    NCCL, Work.wait(timeout) only orders the current stream after the
    collective (torch enforces its timeout only with
    TORCH_NCCL_BLOCKING_WAIT), so a synchronize after it would wait for a
    rank that never comes, forever."""
    deadline = time.monotonic() + seconds
    nap = 20e-6
    while True:
        if all(w.is_completed() for w in works):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(nap)
        nap = min(nap * 2, 1e-3)


class TorchGroupTransport(_native.GroupTransport):
    """The C++ GroupTransport over a torch.distributed GROUP. Its
    collectives run on the group load's thread; each waits at most TIMEOUT
    seconds (over NCCL, run_all's batch as a whole). ``error`` is the first
    exception a collective raised."""

    def __init__(self, group: Any, timeout: float):
        super().__init__()
        import torch.distributed as dist

        self.dist = dist
        self.group = group
        self._size = dist.get_world_size(group)
        self._rank = dist.get_rank(group)
        # "nccl", "gloo", or torch 2's default "cpu:gloo,cuda:nccl".
        self.backend = str(dist.get_backend(group)).lower()
        self.timeout = timeout
        self.error: Optional[BaseException] = None
        self.failed_at: Optional[int] = None  # run_all's failed collective
        if self._rank < 0:
            raise InvalidArgumentError(
                "process_group: this process is not a member of the group",
                code="InvalidArgument")

    # -- GroupTransport ------------------------------------------------------

    def rank(self) -> int:
        return self._rank

    def size(self) -> int:
        return self._size

    def broadcast(self, buf, root: int) -> None:
        self._run_ops([self._broadcast_op(buf, root)])

    def all_gather(self, buf, part_bytes: int) -> None:
        self._run_ops([self._all_gather_op(buf, part_bytes)])

    def run_all(self, items) -> None:
        """GroupTransport::RunAll: ITEMS [(kind, buf, arg)] in order, kind
        "broadcast" (ARG the root) or "all_gather" (ARG the part's bytes).
        When it raises, failed_at is the index of the collective that
        failed.

        CUDA (NCCL): every collective is issued before any is waited for.
        They run one after another on NCCL's stream either way; what this
        saves is the host's wait for each (polled, so up to a millisecond
        late) and its stream synchronize: one per batch instead of one per
        collective. The timeout covers the batch.

        cpu (gloo): one at a time. gloo runs async works on its own
        threads at once; on the 2-core development VM that was no faster
        for TinyLlama (1.79 against 1.82 s) and slower for a small
        checkpoint (17 against 14 ms, medians;
        bench/results/2026-12-04-devbox-group-run-all/)."""
        ops = [self._broadcast_op(buf, arg) if kind == "broadcast"
               else self._all_gather_op(buf, arg)
               for kind, buf, arg in items]
        if not ops or ops[0][2][0].device.type == "cuda":
            self._run_ops(ops)
            return
        for k, op in enumerate(ops):
            try:
                self._run_ops([op])
            except BaseException:
                self.failed_at = k
                raise

    # -- helpers -------------------------------------------------------------

    def _broadcast_op(self, buf, root: int):
        """(issue, what, tensors) of a broadcast over BUF from ROOT."""
        import torch

        t = torch.utils.dlpack.from_dlpack(buf)
        return (lambda: self.dist.broadcast(
            t, src=self._global_rank(root), group=self.group, async_op=True),
            f"broadcast of {t.numel()} bytes from rank {root}", [t])

    def _all_gather_op(self, buf, part_bytes: int):
        """(issue, what, tensors) of an in-place all-gather over BUF."""
        import torch

        t = torch.utils.dlpack.from_dlpack(buf)
        what = (f"all_gather of {t.numel()} bytes ({part_bytes} per rank)")
        if t.device.type == "cuda":
            mine = t.narrow(0, self._rank * part_bytes, part_bytes)
            return (lambda: self.dist.all_gather_into_tensor(
                t, mine, group=self.group, async_op=True), what, [t])
        # gloo's all_gather gathers into a temporary as large as the whole
        # tensor, then copies; one in-place broadcast per part moves the
        # same bytes into the final buffer with none.
        parts = list(t.split(part_bytes))
        return (lambda: [self.dist.broadcast(
            p, src=self._global_rank(k), group=self.group,
            async_op=True) for k, p in enumerate(parts)], what, [t, parts])

    def _global_rank(self, r: int) -> int:
        if self.group is None or self.group is self.dist.GroupMember.WORLD:
            return r
        return self.dist.get_global_rank(self.group, r)

    def _where(self) -> str:
        return (f"process group ({self.backend}, rank {self._rank} of "
                f"{self._size})")

    def _run_ops(self, ops) -> None:
        """OPS [(issue, what, tensors)]: each ISSUE starts a collective (one
        work, or a list), in order; then every work is waited for, all
        within the timeout. On failure failed_at names the op."""
        self.failed_at = None
        if not ops:
            return
        if self.error is not None:
            self.failed_at = 0
            raise WeightliftIOError(f"{self._where()}: {ops[0][1]}: the "
                                    f"group failed earlier ({self.error})",
                                    code="IoError")
        t0 = time.monotonic()
        issued: List[Tuple[int, list]] = []
        works_all: list = []
        tensors_all: list = []
        for k, (issue, what, tensors) in enumerate(ops):
            try:
                works = issue()
            except Exception as e:  # noqa: BLE001 - torch raises several
                self.failed_at = k
                for w in works_all:  # issued before: they may still run
                    _keep_until_done(w, self, tensors_all)
                self.error = WeightliftIOError(
                    f"{self._where()}: {what} failed: {e}", code="IoError")
                self.release()
                raise self.error from None
            works = works if isinstance(works, list) else [works]
            issued.append((k, works))
            works_all += works
            tensors_all += tensors
        for k, works in issued:
            for work in works:
                left = max(self.timeout - (time.monotonic() - t0), 0.001)
                try:
                    work.wait(datetime.timedelta(seconds=left))
                except RuntimeError as e:
                    self.failed_at = k
                    self._fail(works_all, tensors_all, ops[k][1], e,
                               time.monotonic() - t0)
        if tensors_all and tensors_all[0].device.type == "cuda":
            # NCCL: the waits above only ordered the streams; the timeout
            # is enforced here, before the synchronize that would block.
            left = max(self.timeout - (time.monotonic() - t0), 0.001)
            try:
                done = _await_works(works_all, left)
            except RuntimeError as e:
                self.failed_at = _first_unfinished(issued)
                self._fail(works_all, tensors_all, ops[self.failed_at][1], e,
                           time.monotonic() - t0)
            if not done:
                self.failed_at = _first_unfinished(issued)
                self._fail(works_all, tensors_all, ops[self.failed_at][1],
                           "the collective had not completed",
                           time.monotonic() - t0)
            # The load hands the memory on as soon as this returns.
            import torch
            torch.cuda.current_stream(tensors_all[0].device).synchronize()

    def _fail(self, works, tensors, what: str, e, waited: float):
        """Records and raises the failure E of a collective after WAITED
        seconds: a GroupTimeoutError near the timeout, else the peer's
        refusal. The works stay referenced until they end."""
        for w in works:
            _keep_until_done(w, self, tensors)
        if waited >= self.timeout * 0.9:
            self.error = GroupTimeoutError(
                f"{self._where()}: {what} did not complete within "
                f"{self.timeout:g} s: {e} (a rank stopped, crashed "
                f"or runs a different load)", code="IoError")
        else:  # refused before the timeout: a peer is gone
            self.error = WeightliftIOError(
                f"{self._where()}: {what} failed after "
                f"{waited:.1f} s: {e} (a rank stopped or crashed)",
                code="IoError")
        # Nothing is issued after a failure: the transport lets go of the
        # torch group so the caller's destroy_process_group() can tear it
        # down (the works keep what they use).
        self.release()
        raise self.error from None

    def release(self) -> None:
        """Lets go of the torch group (rank, size, backend and timeout stay,
        for reports); nothing may be issued after. A stream that has ended
        must not keep the group alive: while anything holds it, the user's
        destroy_process_group() does not destroy it, and then it is torn
        down during interpreter shutdown, where a gloo worker thread that
        still drops a finished collective's tensors needs the GIL and is
        killed by Python (pthread_exit), which aborts the process
        ("terminate called without an active exception")."""
        self.group = None
        self.dist = None

    def raise_from(self, e: BaseException):
        """E (a load's error) as the class of what the transport saw: a
        GroupTimeoutError when a collective timed out."""
        try:
            if isinstance(self.error, GroupTimeoutError) and \
                    not isinstance(e, GroupTimeoutError):
                raise GroupTimeoutError(str(e), code="IoError") from None
            raise e
        finally:
            e = None  # not kept by a frame of its own traceback


def _check_backend(tr: TorchGroupTransport, device: str) -> None:
    if "gloo" not in tr.backend and not device.startswith("cuda"):
        raise InvalidArgumentError(
            f"process_group: an NCCL group delivers cuda tensors, not "
            f"{device} (use a gloo group for cpu)", code="InvalidArgument")
    if "nccl" not in tr.backend and device != "cpu":
        raise InvalidArgumentError(
            f"process_group: a gloo group delivers cpu tensors, not "
            f"{device} (use an NCCL group for cuda)", code="InvalidArgument")


def _comm_device(tr: TorchGroupTransport, device: str) -> str:
    """Where the agreement travels: the rank's CUDA device under NCCL,
    else the host (so a rank whose device does not fit the group still
    joins it and fails with the others)."""
    return device if device.startswith("cuda") and "nccl" in tr.backend \
        else "cpu"


def _status_of(e: BaseException) -> Tuple[str, str]:
    code = getattr(e, "code", None)
    return (code if isinstance(code, str) else "InvalidArgument", str(e))


def agree(tr: TorchGroupTransport, device: str, fingerprint: str,
          error: Optional[BaseException]) -> None:
    """The group's agreement alone (C++ AgreeOnGroupLoad): raises on every
    rank if any rank failed (ERROR, raised as is on its own rank) or the
    fingerprints differ."""
    got = _native.group_agree(tr, _comm_device(tr, device), fingerprint,
                              None if error is None else _status_of(error))
    if error is not None:
        # Raised with no local left holding it: a frame that holds its own
        # exception is a cycle that keeps every frame of the traceback, and
        # so the caller's process group, alive until the garbage collector
        # runs. A group still alive when the user destroys it is torn down
        # at interpreter shutdown, where gloo aborts the process.
        try:
            raise error
        finally:
            error = None
    if got is not None:
        try:
            raise_error(got["error"])
        except WeightliftIOError as e:
            tr.raise_from(e)


class GroupLoad:
    """One LoadWithGroup on this rank's C++ job thread. ``tensors()``
    yields (name, tensor) as batches complete, then ``report`` is set."""

    def __init__(self, path: Any, device: str, req: TpRequest,
                 options: Dict[str, Any], names: Optional[List[str]] = None,
                 ckpt=None, transport: Optional[TorchGroupTransport] = None,
                 loader=None):
        """LOADER: the loader to run on (a stream's, which it holds for
        all its windows); by default one from the pool for OPTIONS."""
        self.device = device
        self.req = req
        self.t0 = time.perf_counter()
        tr = transport or TorchGroupTransport(req.group, req.timeout)
        self.transport = tr
        self.error: Optional[BaseException] = None
        self.parts = self.info = None
        self.ckpt = ckpt
        if req.sharded:
            # From the group (no collective): set even when this rank fails
            # below, since the failing rank still joins the agreement.
            req.size = tr.size() if req.size is None else req.size
            req.rank = tr.rank() if req.rank is None else req.rank
        try:
            if req.error is not None:
                raise req.error  # refused before the load: tell the group
            _check_backend(tr, device)
            if self.ckpt is None:
                self.ckpt = _core.open_checkpoint(path)
            rows = self.ckpt.tensors()
            if names is not None:
                wanted = set(names)
                rows = [t for t in rows if t[0] in wanted]
            self.rows = rows
            if req.sharded and req.rank < req.size:
                # For the report's notes (the load itself shards in C++).
                self.parts, self.info = shards(rows, req.rank, req.size,
                                               req.plan)
        except REFUSALS as e:
            self.error = e
            self.rows = []
        loader_device = device if self.error is None else \
            _comm_device(tr, device)
        try:
            if loader is not None and self.error is None:
                # The caller's: it goes back to the pool with the caller.
                self._loader_cm = contextlib.nullcontext(loader)
            else:
                self._loader_cm = _core.pooled_loader(
                    dict(options, device=loader_device))
            loader = self._loader_cm.__enter__()
        except (_errors.WeightliftError, ValueError, TypeError) as e:
            # This rank's options are refused (threads=-1, ...): it still
            # joins the agreement, with a loader of default options, so the
            # others fail at once naming it instead of waiting out the
            # group timeout.
            if self.error is None:
                self.error = e
                self.rows = []
            self._loader_cm = _core.pooled_loader(
                {"device": _comm_device(tr, device)})
            loader = self._loader_cm.__enter__()
        try:
            self.job = loader.start_load_group(
                self.ckpt if self.error is None else None, tr, req.sharded,
                req.rank if req.sharded else 0,
                req.size if req.sharded else tr.size(), req.plan,
                [] if names is None else list(names), ALLGATHER_MIN_BYTES,
                BATCH_BYTES,
                None if self.error is None else _status_of(self.error))
        except BaseException:
            self._loader_cm.__exit__(None, None, None)
            self._let_go()
            raise
        self.report = None

    def _let_go(self) -> None:
        """After a failure: nothing more is issued, so this load lets go of
        the torch group (its transport's and its request's references) and
        of the checkpoint's open files. The error raised holds this load
        through its traceback's frames, and the frames hold the error (a
        cycle the garbage collector alone frees): without this, the user's
        destroy_process_group() would leave the group to interpreter
        shutdown, where gloo aborts the process (see
        TorchGroupTransport.release)."""
        self.transport.release()
        self.req.group = None
        self.ckpt = None
        # The transport keeps the first error a collective raised (for its
        # messages): without its traceback, whose frames hold the
        # transport, that is no cycle either, and the memory the transport
        # retains for a failed collective goes with the last holder
        # (_BROKEN holds it while a work may still write there).
        if self.transport.error is not None:
            self.transport.error.__traceback__ = None

    def _fail(self, e: BaseException):
        """Raises this rank's own reason (its refusal), else E as the
        transport saw it. Neither this frame nor this load keeps the error
        raised: its traceback holds this frame and the caller's, so an
        error kept there would be a cycle that holds the caller's frames
        (and the process group in their locals) until the garbage
        collector runs (see _let_go)."""
        own, self.error, self.req.error = self.error, None, None
        try:
            if own is not None:
                raise own  # as raised here
            self.transport.raise_from(e)
        finally:
            own = e = None

    def tensors(self, poll_s: float = 0.1, raw: bool = False):
        """(index, name, tensor) as they become final on this rank (a batch
        at a time); RAW: the 1-D uint8 DLPack bytes (None when empty)
        instead of the tensor. Raises the load's error."""
        try:
            while True:
                i = self.job.next_ready(poll_s)
                if i >= 0:
                    name, dt, shape, data = self.job.take_ready(i)
                    yield i, name, (data if raw else _dtypes.to_torch(
                        dt, shape, data, self.device, name))
                elif i == -2:
                    break
            self._finish()
        except _errors.WeightliftError as e:
            self._close()
            self._let_go()
            self._fail(e)

    def _close(self) -> None:
        if self.job is not None:
            job, self.job = self.job, None
            # Not cancelled: a rank that stops taking tensors still does its
            # part, which the other ranks' collectives need (close()).
            while not job.wait(3600):
                pass
            self._loader_cm.__exit__(None, None, None)

    def _finish(self) -> None:
        job = self.job
        native = job.finish()  # raises the load's error
        self._close()
        from .report import LoadReport
        r = LoadReport(native)
        tr, req = self.transport, self.req
        notes = []
        if req.sharded and self.info is not None:
            notes += tp_notes(req, self.info, req.rank, req.size)
        self.report = make_report(
            self.device, [r], len(self.rows), r.bytes or 0, 0,
            time.perf_counter() - self.t0, 0.0, notes)
        self.report.notes = [n.replace("group: rank", f"group ({tr.backend}):"
                                       f" rank", 1) for n in
                             self.report.notes]
        _core.set_last_report(self.report)

    def close(self) -> None:
        """Stops taking tensors; the load still runs to its end (the other
        ranks' collectives need this one)."""
        self._close()


def load_group(path: Any, device: str, req: TpRequest,
               options: Dict[str, Any], progress: bool = False):
    """Group mode: [(name, tensor)] in checkpoint order, and this rank's
    report (bytes_read: what this rank read)."""
    g = GroupLoad(path, device, req, options)
    got = {i: (name, t) for i, name, t in g.tensors()}
    return [got[i] for i in sorted(got)], g.report
