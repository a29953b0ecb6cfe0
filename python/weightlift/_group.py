"""Group mode: ``process_group=`` (a torch.distributed group; gloo for cpu
tensors, NCCL for cuda tensors).

Without tp_*: every rank ends with every full tensor, while each reads about
1/n of the bytes and the group delivers the rest. With tp_*: each rank reads
its own parts of the split tensors, and each replicated tensor is read once
in the group and delivered to the others.

Who reads what and which collective delivers it is the C++ group plan
(src/plan/group_plan.h, via _native.group_plan): the same on every rank, so
ranks agree on the order of collectives without talking. A large tensor
whose dim 0 divides by n is all-gathered from n equal parts read in place;
any other is read whole by one owner (balanced by bytes) and broadcast.

Before any data moves, the ranks all-gather a 256-byte record: a status
(and this rank's error text), and a fingerprint of the mode, tp_size,
tp_plan and the checkpoint's names, dtypes, shapes, files, offsets and
sizes. Any error or disagreement fails the load on every rank, naming the
ranks. Every collective waits at most ``group_timeout`` seconds.

Memory: tensors are received straight into their final buffers; the reads
go through the loader's bounded staging. The steps run in batches of about
256 MiB, and the next batch's reads (a C++ job, GIL released) overlap the
current batch's collectives.
"""

from __future__ import annotations

import datetime
import time
from typing import Any, Dict, List, Optional

from . import _core, _dtypes, _errors, _native, _tp
from ._errors import InvalidArgumentError, WeightliftIOError
from .report import LoadReport

_RECORD = 256
_MSG_AT = 37
ALLGATHER_MIN_BYTES = 4 << 20
BATCH_BYTES = 256 << 20


class GroupTimeoutError(WeightliftIOError, TimeoutError):
    """A collective of the process group did not finish in time (a rank
    stopped, crashed, or is running a different load)."""

    code = "IoError"


class _Group:
    def __init__(self, group: Any, timeout: float):
        import torch.distributed as dist

        self.dist = dist
        self.group = group
        self.size = dist.get_world_size(group)
        self.rank = dist.get_rank(group)
        self.backend = str(dist.get_backend(group)).lower()
        self.timeout = timeout
        if self.rank < 0:
            raise InvalidArgumentError(
                "process_group: this process is not a member of the group",
                code="InvalidArgument")

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

    def global_rank(self, r: int) -> int:
        if self.group is None or self.group is self.dist.GroupMember.WORLD:
            return r
        return self.dist.get_global_rank(self.group, r)

    def issue(self, fn, what: str):
        """Starts a collective (async); a group that fails at once (a peer
        gone) is a WeightliftIOError naming it, like a timeout."""
        try:
            return fn()
        except RuntimeError as e:
            raise WeightliftIOError(
                f"process group ({self.backend}, rank {self.rank} of "
                f"{self.size}): {what} failed: {e}", code="IoError") from None

    def wait(self, work, what: str) -> None:
        try:
            work.wait(datetime.timedelta(seconds=self.timeout))
        except RuntimeError as e:
            raise GroupTimeoutError(
                f"process group ({self.backend}, rank {self.rank} of "
                f"{self.size}): {what} did not complete within "
                f"{self.timeout:g} s: {e} (a rank stopped, crashed or runs "
                f"a different load)", code="IoError") from None


def _record(ok: bool, fingerprint: str, message: str):
    import torch

    rec = bytearray(_RECORD)
    rec[0] = 1 if ok else 2
    fp = fingerprint.encode("ascii")[:32]
    rec[5:5 + len(fp)] = fp
    msg = message.encode("utf-8")[:_RECORD - _MSG_AT]
    rec[_MSG_AT:_MSG_AT + len(msg)] = msg
    return torch.frombuffer(rec, dtype=torch.uint8).clone()


def _agree(g: _Group, device: str, ok: bool, fingerprint: str,
           error: Optional[BaseException]) -> None:
    """All-gathers every rank's record; raises on every rank if any rank
    failed to prepare or the fingerprints differ."""
    import torch

    mine = _record(ok, fingerprint, "" if error is None else str(error))
    mine = mine.to(device)
    out = [torch.empty_like(mine) for _ in range(g.size)]
    what = f"the agreement on the plan and checkpoint (all_gather of " \
           f"{_RECORD} bytes)"
    work = g.issue(lambda: g.dist.all_gather(out, mine, group=g.group,
                                             async_op=True), what)
    g.wait(work, what)
    recs = [bytes(t.cpu().numpy()) for t in out]
    failed = [(r, rec[_MSG_AT:].rstrip(b"\0").decode("utf-8", "replace"))
              for r, rec in enumerate(recs) if rec[0] != 1]
    if error is not None:
        raise error
    if failed:
        raise InvalidArgumentError(
            "process group: " + "; ".join(
                f"rank {r} could not start the load: {m}" for r, m in failed),
            code="InvalidArgument")
    prints: Dict[str, List[int]] = {}
    for r, rec in enumerate(recs):
        prints.setdefault(rec[5:37].decode("ascii", "replace"), []).append(r)
    if len(prints) > 1:
        raise InvalidArgumentError(
            "process group: ranks disagree on the plan or the checkpoint "
            "(fingerprint of mode, tp_size, tp_plan and every tensor's name, "
            "dtype, shape, file, offset and size): " + "; ".join(
                f"ranks {ranks} have {fp}" for fp, ranks in prints.items()),
            code="InvalidArgument")


def load_group(path: Any, device: str, req: _tp.TpRequest,
               options: Dict[str, Any], progress: bool = False):
    """Group mode: [(name, tensor)] in checkpoint order, and this rank's
    report (bytes_read: what this rank read)."""
    import torch

    t0 = time.perf_counter()
    g = _Group(req.group, req.timeout)
    # The agreement travels on the device the group's collectives use, so a
    # rank whose device does not fit the group still joins it and fails.
    comm_device = (device if device.startswith("cuda") and "nccl" in g.backend
                   else "cpu")
    error: Optional[BaseException] = None
    fingerprint = ""
    ckpt = tensors = parts = info = None
    try:
        # "nccl", "gloo", or torch 2's default "cpu:gloo,cuda:nccl".
        if "gloo" not in g.backend and not device.startswith("cuda"):
            raise InvalidArgumentError(
                f"process_group: an NCCL group delivers cuda tensors, not "
                f"{device} (use a gloo group for cpu)", code="InvalidArgument")
        if "nccl" not in g.backend and device != "cpu":
            raise InvalidArgumentError(
                f"process_group: a gloo group delivers cpu tensors, not "
                f"{device} (use an NCCL group for cuda)",
                code="InvalidArgument")
        if req.sharded:
            size = g.size if req.size is None else req.size
            rank = g.rank if req.rank is None else req.rank
            if size != g.size or rank != g.rank:
                raise InvalidArgumentError(
                    f"process_group has {g.size} ranks and this is rank "
                    f"{g.rank}, but tp_size={size}, tp_rank={rank} (leave "
                    f"them out to take them from the group)",
                    code="InvalidArgument")
            req.size, req.rank = size, rank
        ckpt = _core.open_checkpoint(path)
        tensors = ckpt.tensors()
        if req.sharded:
            parts, info = _tp.shards(tensors, req.rank, req.size, req.plan)
        fingerprint = _native.group_fingerprint(
            tensors, [f["size"] for f in ckpt.files()], req.sharded, g.size,
            req.plan)
        if isinstance(fingerprint, dict):
            _tp._raise(fingerprint["error"])
    except (_errors.WeightliftError, ValueError, TypeError, OSError) as e:
        error = e
    if comm_device.startswith("cuda"):
        with torch.cuda.device(comm_device):
            _agree(g, comm_device, error is None, fingerprint, error)
    else:
        _agree(g, comm_device, error is None, fingerprint, error)

    plan = _native.group_plan(tensors, g.size, req.sharded, req.plan,
                              ALLGATHER_MIN_BYTES, True, BATCH_BYTES)
    if "error" in plan:
        _tp._raise(plan["error"])
    runner = _Runner(g, ckpt, tensors, parts, plan, device, options)
    if device.startswith("cuda"):
        with torch.cuda.device(device):
            runner.run()
    else:
        runner.run()
    t1 = time.perf_counter()
    notes = [f"group: rank {g.rank} of {g.size} ({g.backend}): read "
             f"{runner.bytes_read} bytes, {plan['broadcast_bytes']} bytes "
             f"broadcast and {plan['allgather_bytes']} all-gathered in the "
             f"group, {plan['batches']} batches"]
    if req.sharded:
        notes += _tp.tp_notes(req, info, req.rank, req.size)
    delivered = sum(int(b.numel()) for b in runner.bufs if b is not None)
    report = _tp.make_report(device, runner.reports, len(tensors), delivered,
                             runner.part_bytes, t1 - t0,
                             runner.part_seconds, notes)
    _core.set_last_report(report)
    out = []
    for i, t in enumerate(tensors):
        name, dt, shape = t[0], t[1], t[2]
        if parts is not None and parts[i].split:
            shape = parts[i].shape
        buf = runner.bufs[i]
        out.append((name, _dtypes.view_torch(buf, dt, shape)
                    if buf is not None and buf.numel() else
                    _dtypes.view_torch(None, dt, shape).to(device)))
    return out, report


class _Runner:
    """Runs the group plan: per batch, this rank's reads (a C++ job for
    whole tensors it owns, positioned reads for its parts), then the
    batch's collectives, with batch k + 1's C++ job reading meanwhile."""

    def __init__(self, g: _Group, ckpt, tensors, parts, plan, device: str,
                 options: Dict[str, Any]):
        self.g, self.ckpt, self.tensors, self.parts = g, ckpt, tensors, parts
        self.steps = plan["steps"]
        self.batches = plan["batches"]
        self.device = device
        self.options = dict(options, device=device)
        self.bufs: List[Any] = [None] * len(tensors)
        self.reports: List[LoadReport] = []
        # Bytes read outside the loader's reports: none since every read
        # goes through Loader::LoadSlices (kept for weightlift._stream).
        self.part_bytes = 0
        self.part_seconds = 0.0
        self.bytes_read = 0
        by_batch: List[List[int]] = [[] for _ in range(self.batches)]
        for i, s in enumerate(self.steps):
            by_batch[s[4]].append(i)
        self.by_batch = by_batch

    def run(self) -> None:
        with _core.pooled_loader(self.options) as loader:
            pending = self._start(loader, 0) if self.batches else None
            for b in range(self.batches):
                self._finish(pending)
                pending = (self._start(loader, b + 1)
                           if b + 1 < self.batches else None)
                self._communicate(b)
        self.bytes_read = self.part_bytes + sum(
            r.bytes_read or 0 for r in self.reports)

    def _empty(self, size: int):
        import torch
        return torch.empty(size, dtype=torch.uint8, device=self.device)

    def _shard_of(self, i: int) -> _tp.Shard:
        """Tensor I as a (replicated) Shard, for slice requests."""
        t = self.tensors[i]
        return _tp.Shard(t[0], t[1], tuple(t[2]), t[3], t[4], -1, 0, 0,
                         tuple(t[2]), t[5], 1, t[5], t[5], 0, "replicate")

    def _start(self, loader, b: int):
        """One LoadSlices job for batch B: the whole tensors this rank owns,
        its dim-0 rows of the all-gathered ones, its own parts of the split
        ones. Receive buffers are allocated here. Returns the job and what
        each request is for."""
        reqs, what = [], []
        for i in self.by_batch[b]:
            delivery, root, part_rows, part_bytes, _ = self.steps[i]
            size = self.tensors[i][5]
            if delivery == "local":
                s = self.parts[i]
                if s.bytes == 0:
                    self.bufs[i] = self._empty(0)
                    continue
                reqs.append(_tp.slice_request(s))
                what.append((i, "local"))
            elif size == 0:
                self.bufs[i] = self._empty(0)
            elif delivery == "broadcast":
                if root == self.g.rank:
                    reqs.append((self.tensors[i][0], []))
                    what.append((i, "owned"))
                else:
                    self.bufs[i] = self._empty(size)
            else:
                self.bufs[i] = self._empty(size)
                r = self.g.rank
                reqs.append(_tp.slice_request(self._shard_of(i), 0,
                                              r * part_rows,
                                              (r + 1) * part_rows))
                what.append((i, "part"))
        if not reqs:
            return None
        job = loader.start_load_slices(self.ckpt, reqs)
        return job, what, sum(self.tensors[i][5] for i, _ in what)

    def _finish(self, pending) -> None:
        import torch

        if pending is None:
            return
        job, what, total = pending
        self.reports.append(_core.wait(job, False, total))
        items = job.take_tensors(False)
        rank = self.g.rank
        for (i, kind), (_, _, _, data) in zip(what, items):
            got = torch.utils.dlpack.from_dlpack(data)
            if kind == "part":  # my rows of an all-gathered tensor
                part = self.steps[i][3]
                self.bufs[i].narrow(0, rank * part, part).copy_(got)
            else:
                self.bufs[i] = got
        if self.device.startswith("cuda"):
            torch.cuda.synchronize(self.device)

    def _communicate(self, b: int) -> None:
        g, dist = self.g, self.g.dist
        works = []
        for i in self.by_batch[b]:
            delivery, root, _, part_bytes, _ = self.steps[i]
            size = self.tensors[i][5]
            if delivery == "local" or size == 0:
                continue
            buf = self.bufs[i]
            name = self.tensors[i][0]
            if delivery == "broadcast":
                what = (f"broadcast of tensor '{name}' ({size} bytes from "
                        f"rank {root})")
                w = g.issue(lambda: dist.broadcast(
                    buf, src=g.global_rank(root), group=g.group,
                    async_op=True), what)
            else:
                what = (f"all_gather of tensor '{name}' ({size} bytes, "
                        f"{part_bytes} per rank)")
                mine = buf.narrow(0, g.rank * part_bytes, part_bytes)
                if self.device.startswith("cuda"):
                    w = g.issue(lambda: dist.all_gather_into_tensor(
                        buf, mine, group=g.group, async_op=True), what)
                else:
                    w = g.issue(lambda: dist.all_gather(
                        list(buf.chunk(g.size)), mine, group=g.group,
                        async_op=True), what)
            works.append((w, what))
        for w, what in works:
            g.wait(w, what)
