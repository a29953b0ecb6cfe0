"""LoadReport: what a load did and why, as a Python object."""

from __future__ import annotations

from typing import Any, Dict, List, Optional


class FileReport:
    """One file of a load: which path served it and why."""

    __slots__ = ("path", "path_taken", "reason", "bytes", "copied_row_runs",
                 "copied_row_reads")

    def __init__(self, path: str, path_taken: str, reason: str, bytes: int,
                 copied_row_runs: int = 0, copied_row_reads: int = 0):
        self.path = path
        self.path_taken = path_taken
        self.reason = reason
        self.bytes = bytes
        # Row runs copied from a mapping of the page cache, in this many
        # strided reads (slices of the last dim read from the page cache).
        self.copied_row_runs = copied_row_runs
        self.copied_row_reads = copied_row_reads

    def as_dict(self) -> Dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}

    def __repr__(self) -> str:
        return (f"FileReport(path={self.path!r}, path_taken="
                f"{self.path_taken!r}, reason={self.reason!r}, "
                f"bytes={self.bytes})")


class LoadReport:
    """Bytes, timings, threads and the path each file took.

    Attributes mirror the C++ LoadReport: ``device``, ``tensors``, ``bytes``,
    ``bytes_read``, ``seconds``, ``setup_seconds`` (the loader's creation,
    paid by its first load), ``open_seconds``, ``alloc_seconds``,
    ``transfer_seconds``, ``staging_bytes``, ``device_bytes``, ``threads``,
    ``gb_per_s``, ``files`` (list of FileReport), ``counts`` (how the reads
    were made, by name: ``direct_reads``, ``bounced_reads``, ``slices``,
    ``slice_bytes_read``, ... as the C++ ReadCounts; the notes say the same
    in words), ``notes`` (fallbacks and warnings) and ``options`` (the
    options in effect, a dict keyed like ``default_options()``; sizes in
    bytes, 0 = automatic). ``load_into``
    adds ``missing_keys`` and ``unexpected_keys``.
    ``str(report)`` is the C++ LoadReport::ToString() text.
    """

    _FIELDS = ("device", "tensors", "bytes", "bytes_read", "seconds",
               "setup_seconds", "open_seconds", "alloc_seconds", "transfer_seconds",
               "staging_bytes", "device_bytes", "threads", "gb_per_s")

    def __init__(self, data: Dict[str, Any]):
        for k in self._FIELDS:
            setattr(self, k, data.get(k))
        if self.setup_seconds is None:  # reports made in Python
            self.setup_seconds = 0.0
        self.files: List[FileReport] = [FileReport(**f)
                                        for f in data.get("files", [])]
        self.counts: Dict[str, int] = dict(data.get("counts") or {})
        self.notes: List[str] = list(data.get("notes", []))
        self.options: Dict[str, Any] = dict(data.get("options") or {})
        self.missing_keys: List[str] = []
        self.unexpected_keys: List[str] = []
        self._text: str = data.get("text", "")

    @staticmethod
    def merge(reports: List["LoadReport"],
              files_by_path: bool = False) -> Optional["LoadReport"]:
        """One report for several loads run one after another. The counts
        add up and the notes they say (how reads landed, how slices were
        placed, row runs copied from a mapping) are said once for the whole,
        not once per load. FILES_BY_PATH: one entry per file (its bytes
        added up over the loads; a file no load read is left out) instead
        of each load's list."""
        if not reports:
            return None
        if len(reports) == 1 and not files_by_path:
            return reports[0]
        d = reports[0].as_dict()
        d["notes"] = uncounted_notes(reports[0])
        for r in reports[1:]:
            add_reads(d, r)
            for k in ("tensors", "bytes", "seconds"):
                d[k] += getattr(r, k)
            d["device"] += "," + r.device
        if files_by_path:
            d["files"] = _files_by_path(d["files"])
        d["notes"] += counted_notes_once(d)
        d["gb_per_s"] = d["bytes"] / d["seconds"] / 1e9 if d["seconds"] else 0
        d["text"] = "\n".join(str(r) for r in reports)
        return LoadReport(d)

    def as_dict(self) -> Dict[str, Any]:
        d = {k: getattr(self, k) for k in self._FIELDS}
        d["files"] = [f.as_dict() for f in self.files]
        d["counts"] = dict(self.counts)
        d["notes"] = list(self.notes)
        d["options"] = dict(self.options)
        if self.missing_keys or self.unexpected_keys:
            d["missing_keys"] = list(self.missing_keys)
            d["unexpected_keys"] = list(self.unexpected_keys)
        return d

    def __str__(self) -> str:
        return self._text or repr(self)

    def __repr__(self) -> str:
        return (f"<LoadReport {self.tensors} tensors, {self.bytes} bytes in "
                f"{self.seconds:.3f} s ({self.gb_per_s:.2f} GB/s) on "
                f"{self.device}>")


def add_reads(d: Dict[str, Any], part: LoadReport) -> None:
    """Adds what the load behind PART read to D (a report's as_dict() of a
    load made of several run one after another): bytes read, the phases
    and device memory add up, staging and threads are the largest any part
    used, the files, counts and uncounted notes are appended (the counted
    ones are said once for the whole: counted_notes_once)."""
    for k in ("bytes_read", "setup_seconds", "open_seconds", "alloc_seconds",
              "transfer_seconds", "device_bytes"):
        d[k] += getattr(part, k) or 0
    d["staging_bytes"] = max(d["staging_bytes"], part.staging_bytes or 0)
    d["threads"] = max(d["threads"], part.threads or 0)
    d["files"] += [f.as_dict() for f in part.files]
    add_counts(d["counts"], part.counts)
    d["notes"] += uncounted_notes(part)


def add_counts(into: Dict[str, int], part: Dict[str, int]) -> None:
    """Adds PART's counts (a report's ``counts``) to INTO: sums, but for
    ``slice_read_cost_bytes``, a weight, the largest."""
    for k, v in part.items():
        into[k] = (max(into.get(k, 0), v) if k == "slice_read_cost_bytes"
                   else into.get(k, 0) + v)


def counted_notes(d: Dict[str, Any]) -> List[str]:
    """The notes the counts of report dict D say (its ``counts``, its files'
    copied row runs, its ``bytes``), worded as the C++ loaders word them."""
    from . import _native
    return _native.counted_notes(d)


def counted_notes_once(d: Dict[str, Any]) -> List[str]:
    """counted_notes of D, a report made of several, whose files may list
    one path once per part: each file's note (its copied row runs) is said
    once, for the runs of every part, as C++ AddFiles sums them."""
    return counted_notes(dict(d, files=_files_by_path(d["files"])))


def uncounted_notes(report: LoadReport) -> List[str]:
    """REPORT's notes but those its counts say: for a report made of
    several, which says those once for the whole (counted_notes)."""
    counted = set(counted_notes(report.as_dict()))
    return [n for n in report.notes if n not in counted]


def _files_by_path(files: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """One entry per path, in first-seen order: bytes and copied row runs
    added up, each path taken said once with its first reason. Entries of
    files a load did not read (a window's report lists every file; those it
    did not read say "none") are left out."""
    seen: Dict[str, Dict[str, Any]] = {}
    for f in files:
        if f["bytes"] == 0 and f["path_taken"] == "none":
            continue
        prev = seen.get(f["path"])
        if prev is None:
            seen[f["path"]] = dict(f)
            continue
        for k in ("bytes", "copied_row_runs", "copied_row_reads"):
            prev[k] = prev.get(k, 0) + f.get(k, 0)
        # A path taken again keeps its first reason (later loads' differ
        # only in their sizes: "small read (N of M bytes)" a window).
        if f["path_taken"] not in prev["path_taken"].split("+"):
            prev["path_taken"] += "+" + f["path_taken"]
            if f["reason"]:
                prev["reason"] += "; " + f["reason"]
    return list(seen.values())
