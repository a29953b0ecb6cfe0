"""What tensor-parallel slice mode (weightlift._tp) and group mode
(weightlift._group) share: the request, the shard rule's answer (one Shard
per tensor, from C++), the report's notes and the one LoadReport of a TP
load. A leaf: it imports neither mode, so _tp can use _group and _group this
without an import cycle.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

from . import _errors, _native
from .report import LoadReport, add_reads, counted_notes_once

DEFAULT_GROUP_TIMEOUT_S = 300.0
# What a rank of a group load can be refused for before the load (bad input,
# a missing file): kept and told to the group through its agreement, so the
# other ranks fail at once naming the rank, then raised on it.
REFUSALS = (_errors.WeightliftError, ValueError, TypeError, OSError)
# A year: far beyond any load, and small enough for torch's and datetime's
# conversions (inf, nan or 1e15 seconds failed inside the first collective).
MAX_GROUP_TIMEOUT_S = 365 * 24 * 3600.0


def group_timeout_seconds(value: Any) -> float:
    """VALUE (seconds, None for the default) checked: a finite number above
    0 and at most MAX_GROUP_TIMEOUT_S; TypeError naming group_timeout
    otherwise, before any collective."""
    if value is None:
        return DEFAULT_GROUP_TIMEOUT_S
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not 0 < value <= MAX_GROUP_TIMEOUT_S:
        raise TypeError(f"group_timeout: expected seconds > 0 and at most "
                        f"{MAX_GROUP_TIMEOUT_S:.0f} (a year), got {value!r}")
    return float(value)


def rank_key(rank: int, size: int, plan: List[Tuple[str, str]]) -> tuple:
    """(rank, size, plan) as prepare keeps a rank's request and device block
    under it (_core.keep_tp_request) and its load looks them up."""
    return (rank, size, tuple(plan))


class TpRequest:
    """The TP keywords of one call (take_tp). A plain class, not a
    dataclass: building a dataclass costs ~1 ms at import, on the first TP
    call's clock."""

    __slots__ = ("rank", "size", "plan", "group", "timeout", "sharded",
                 "notes", "error")

    def __init__(self, rank: Optional[int], size: Optional[int],
                 plan: List[Tuple[str, str]], group: Any = None,
                 timeout: float = DEFAULT_GROUP_TIMEOUT_S,
                 sharded: bool = False):
        self.rank, self.size, self.plan = rank, size, plan
        self.group, self.timeout = group, timeout
        self.sharded = sharded  # tp_* given: slices; else group mode, full
        self.notes: List[str] = []
        # Group mode: what this rank got wrong before the load (its plan
        # file, its options). GroupLoad still joins the agreement with it,
        # so the other ranks fail at once naming this one; then it is
        # raised here.
        self.error: Optional[BaseException] = None

    def key(self) -> tuple:
        """What prepare keeps this rank's request and block under."""
        return rank_key(self.rank, self.size, self.plan)

    def __repr__(self) -> str:
        return (f"TpRequest(rank={self.rank!r}, size={self.size!r}, "
                f"plan={self.plan!r}, sharded={self.sharded!r})")


def raise_error(err: Tuple[str, str]):
    """Raises the weightlift error of a C++ (code, message) pair."""
    raise _errors.from_status(err[0], None, err[1])


# ---- the shard rule (C++) --------------------------------------------------

_SHARD_FIELDS = ("name", "dtype", "full_shape", "file", "offset", "dim",
                 "start", "stop", "shape", "bytes", "runs", "run_bytes",
                 "run_stride", "first_byte", "style")


class Shard:
    """One tensor's part for this rank (see TensorShard in C++): NAME,
    DTYPE, FULL_SHAPE, FILE, OFFSET, DIM (-1: replicated), START, STOP,
    SHAPE, BYTES, RUNS, RUN_BYTES, RUN_STRIDE, FIRST_BYTE, STYLE."""

    __slots__ = _SHARD_FIELDS

    def __init__(self, *values):
        if len(values) != len(_SHARD_FIELDS):
            raise TypeError(f"Shard takes {len(_SHARD_FIELDS)} values, got "
                            f"{len(values)}")
        for k, v in zip(_SHARD_FIELDS, values):
            setattr(self, k, v)

    @property
    def split(self) -> bool:
        return self.dim >= 0

    def __eq__(self, other) -> bool:
        return isinstance(other, Shard) and all(
            getattr(self, k) == getattr(other, k) for k in _SHARD_FIELDS)

    __hash__ = None  # mutable, as the dataclass was

    def __repr__(self) -> str:
        return "Shard(" + ", ".join(f"{k}={getattr(self, k)!r}"
                                    for k in _SHARD_FIELDS) + ")"


def shards(tensors: List[tuple], rank: int, size: int,
           plan: List[Tuple[str, str]]) -> Tuple[List[Shard], dict]:
    """Every tensor's Shard for RANK of SIZE; the C++ answer's totals and
    warnings in the dict. Raises the C++ error for a bad TP."""
    got = _native.tp_shards(tensors, rank, size, plan)
    if "error" in got:
        raise_error(got["error"])
    out = []
    for t, s in zip(tensors, got["shards"]):
        name, dt, shape, file, offset, _ = t
        out.append(Shard(name, dt, tuple(shape), file, offset, s[0], s[1],
                         s[2], tuple(s[3]), s[4], s[5], s[6], s[7], s[8],
                         s[9]))
    return out, got


def tp_notes(req: TpRequest, info: dict, rank: int, size: int) -> List[str]:
    notes = [f"tp: rank {rank} of {size}: {info['split_bytes']} bytes of "
             f"split tensors, {info['replicated_bytes']} replicated"]
    notes += [f"tp: warning: {w}" for w in info["warnings"]]
    return notes + req.notes


def make_report(device: str, reports: List[LoadReport], tensors: int,
                delivered: int, extra_read: int, seconds: float,
                extra_seconds: float, notes: List[str]) -> LoadReport:
    """One LoadReport for a TP load: the C++ loads' reports (plus
    EXTRA_READ bytes read outside them, if any), with NOTES first."""
    d = {"device": device, "tensors": tensors, "bytes": delivered,
         "bytes_read": extra_read, "seconds": seconds, "setup_seconds": 0.0,
         "open_seconds": 0.0,
         "alloc_seconds": 0.0, "transfer_seconds": extra_seconds,
         "staging_bytes": 0, "device_bytes": 0, "threads": 0, "files": [],
         "counts": {}, "notes": []}
    texts = []
    for r in reports:
        # A first call's loader creation is part of the call, so part of the
        # phases (a batch load's later parts reuse the loader: 0); the
        # counted notes are said once, below.
        add_reads(d, r)
        texts.append(str(r))
    over = d["bytes_read"] - delivered
    notes = notes + [f"tp: read {d['bytes_read']} bytes for {delivered} "
                     f"delivered ({over:+d} bytes: the storage's read "
                     f"granularity)" if over >= 0 else
                     f"tp: read {d['bytes_read']} bytes, received "
                     f"{-over} more from the group"]
    d["notes"] = notes + d["notes"] + counted_notes_once(d)
    d["gb_per_s"] = delivered / seconds / 1e9 if seconds else 0.0
    d["text"] = "\n".join(
        [f"tensor-parallel load on {device}: {tensors} tensors, {delivered} "
         f"bytes delivered, {d['bytes_read']} bytes read, {seconds:.3f} s"]
        + [f"  {n}" for n in d["notes"]] + texts)
    return LoadReport(d)
