"""Tensor-parallel loading: ``tp_rank``, ``tp_size``, ``tp_plan`` and
``process_group``, the keyword arguments of load_checkpoint, load_file,
iter_tensors and load_into.

Slice mode (tp_size / tp_rank, no process_group): this process reads only
its part of each split tensor plus the replicated tensors. The shard rule is
the C++ one (include/weightlift/tensor_parallel.h, via _native.tp_shards):
colwise splits dim 0, rowwise the last dim of tensors with 2 or more dims, a
name no pattern matches is replicated, parts are torch.tensor_split's.

Group mode (process_group given) lives in weightlift._group; what both
modes share, in weightlift._tp_common.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from . import _core, _dtypes, _errors, _load_torch, _native, _options
from ._errors import (InvalidArgumentError, NotFoundError,
                      UnsupportedDtypeError, UnsupportedError)
# What slice mode shares with group mode (_group) lives in a leaf module, so
# that _tp imports _group and neither imports the other back. _tp imports
# _group only when a process group is given: a slice load's first call does
# not pay for group mode's imports (~1 ms).
from ._tp_common import (REFUSALS, Shard, TpRequest, group_timeout_seconds,
                         make_report, shards, tp_notes)
from .report import LoadReport

# The keyword arguments this module takes out of a load call's options.
TP_KEYWORDS = ("tp_rank", "tp_size", "tp_plan", "process_group",
               "group_timeout")

# transformers' tp_plan words that shard a weight like colwise / rowwise.
_COLWISE_WORDS = {"colwise", "colwise_rep", "local_colwise", "packed_colwise"}
_ROWWISE_WORDS = {"rowwise", "rowwise_rep", "local_rowwise",
                  "packed_rowwise"}

def take_tp(options: Dict[str, Any], path: Any) -> Optional[TpRequest]:
    """Removes the TP keywords from OPTIONS; None when none was given (a
    plain load). Checks their types and combinations; ranges are checked by
    the C++ TensorParallel::Validate."""
    given = {k: options.pop(k) for k in TP_KEYWORDS if k in options}
    rank, size = given.get("tp_rank"), given.get("tp_size")
    plan, group = given.get("tp_plan"), given.get("process_group")
    timeout = given.get("group_timeout")
    if rank is None and size is None and plan is None and group is None:
        if timeout is not None:
            raise TypeError("group_timeout needs a process_group")
        return None
    for key, value in (("tp_rank", rank), ("tp_size", size)):
        if value is not None and (isinstance(value, bool)
                                  or not isinstance(value, int)):
            raise TypeError(f"{key}: expected an int, got {value!r}")
    sharded = rank is not None or size is not None or plan is not None
    req = TpRequest(rank=rank, size=size, plan=[], group=group,
                    timeout=group_timeout_seconds(timeout), sharded=sharded)
    if group is None:
        if size is None or rank is None:
            missing = "tp_size" if size is None else "tp_rank"
            raise InvalidArgumentError(
                f"{missing} is required with "
                + ", ".join(f"{k}={given[k]!r}" for k in
                            ("tp_rank", "tp_size", "tp_plan")
                            if given.get(k) is not None)
                + " (or pass process_group= to take both from the group)",
                code="InvalidArgument")
    try:
        req.plan = normalize_plan(plan, path, req.notes)
    except REFUSALS as e:
        if group is None:
            raise
        req.error = e  # raised by GroupLoad after telling the group
    return req


def rank_requests(ckpt, req: TpRequest):
    """_native.tp_requests of REQ's rank over CKPT: (requests, info). The C++
    shard rule makes them (no Python object per tensor); a bad rank, size
    or word raises. Taken from prepare(checkpoint=, tp_*) when it made
    them for this checkpoint and these arguments."""
    kept = _core.kept_tp_request(ckpt, req.key())
    if kept is not None:
        return kept
    return _native.tp_requests(ckpt, req.rank, req.size, req.plan)


def prepare_rank(path: Any, options: Dict[str, Any],
                 load_options: Dict[str, Any], device: str) -> None:
    """prepare(DEVICE, checkpoint=PATH, tp_rank=, tp_size=, tp_plan=) in
    slice mode: makes the rank's request for the checkpoint prepare kept,
    for its load to take (a bad rank, size or plan raises here, as that
    load would), and starts filling the page tables of its row runs where
    the load (with LOAD_OPTIONS, checked already) will copy them out of a
    mapping: the auto backend, resident files (src/env/warm_mappings.h).
    On a CUDA device it also starts registering the pages of the rank's
    parts in the resident files, for that load to copy straight from
    (src/cuda/registered_pages.h), unless host_register is off or GDS was
    asked for; a part whose pages are more than 1.5 times its bytes (the
    whole rows of a row-parallel part) is left to staging unless
    host_register="on" (src/cuda/register_ahead.h)."""
    req = take_tp(dict(options), path)
    if req is None or req.group is not None or req.error is not None:
        return
    ckpt = _core.kept_checkpoint(path)
    if ckpt is None:  # not kept (a remote checkpoint): nothing to keep for
        return
    made = _native.tp_requests(ckpt, req.rank, req.size, req.plan)
    _core.keep_tp_request(ckpt, req.key(), made,
                          _rank_block(made[1], device))
    threshold = load_options.get("resident_threshold")
    threshold = -1.0 if threshold is None else float(threshold)
    if str(load_options.get("backend", "auto")).lower() == "auto":
        _native.warm_row_pages(ckpt, made[0], threshold)
    # As the load will read them (_options.normalize: bools, any case).
    host_register = _options._mode(load_options.get("host_register", "auto"),
                                   "host_register")
    gds = _options._mode(load_options.get("gds", "auto"), "gds")
    if (device.startswith("cuda:") and host_register != "off"
            and gds not in ("on", "compat")):
        try:
            _native.register_pages(ckpt, made[0], int(device[5:]), threshold,
                                   host_register == "on")
        except UnsupportedError:
            pass  # a device that cannot: the load stages, and says why


def _rank_block(info: dict, device: str):
    """The device memory a CUDA load of the rank will land in (INFO:
    tp_requests' info), taken now from torch's caching allocator so that
    the load does not take it on its clock; None where that load takes none
    (not CUDA, nothing to load), or cannot: a dtype torch does not hold, or
    not enough memory now (the load raises either, or finds the memory
    later)."""
    if not _load_torch.applies(device, False) or not info["device_bytes"]:
        return None
    import torch

    try:
        _load_torch.check_dtypes(info["layout"])
        return _load_torch._block(info["device_bytes"], torch.device(device))
    except (UnsupportedDtypeError, torch.cuda.OutOfMemoryError):
        return None


def load_block(ckpt, req: TpRequest, info: dict, where) -> tuple:
    """(block, what it is) for a load of REQ's rank of CKPT on torch
    device WHERE (INFO: tp_requests' info): the block prepare took for it
    (handed over once), else a new one from torch's caching allocator."""
    kept = _core.take_tp_block(ckpt, req.key(), info["device_bytes"], where)
    if kept is not None:
        return kept, "device memory (the block prepare took)"
    return (_load_torch._block(info["device_bytes"], where),
            "device memory from torch's caching allocator")


def normalize_plan(plan: Any, path: Any, notes: List[str]
                   ) -> List[Tuple[str, str]]:
    """[(pattern, word)] in order from a dict, a list of pairs, a JSON file
    (a path ending in .json holding an object), or "auto"."""
    if plan is None:
        return []
    if isinstance(plan, (str, os.PathLike)):
        text = os.fspath(plan)
        if text == "auto":
            return auto_plan(path, notes)
        return _plan_from_json_file(text)
    if isinstance(plan, dict):
        items = list(plan.items())
    else:
        try:
            items = [tuple(p) for p in plan]
        except TypeError:
            raise TypeError(f"tp_plan: expected a dict of pattern -> word, "
                            f"a list of pairs, a .json file or 'auto', got "
                            f"{type(plan)!r}") from None
    out = []
    for item in items:
        if len(item) != 2 or not all(isinstance(x, str) for x in item):
            raise TypeError(f"tp_plan: entries must be (pattern, word) "
                            f"strings, got {item!r}")
        out.append((item[0], item[1]))
    return out


def _plan_from_json_file(path: str) -> List[Tuple[str, str]]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise NotFoundError(f"tp_plan file {path}: not found (tp_plan is a "
                            f"dict, a .json file or 'auto')",
                            code="NotFound") from None
    except (OSError, ValueError) as e:
        raise InvalidArgumentError(f"tp_plan file {path}: {e}",
                                   code="InvalidArgument") from None
    if isinstance(data, dict) and isinstance(data.get("tp_plan"), dict):
        data = data["tp_plan"]
    if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, str)
            for k, v in data.items()):
        raise InvalidArgumentError(
            f"tp_plan file {path}: expected a JSON object of pattern -> "
            f"\"colwise\" | \"rowwise\" | \"replicate\"",
            code="InvalidArgument")
    return list(data.items())


def _checkpoint_folder(path: Any) -> str:
    p = os.fspath(path)
    return p if os.path.isdir(p) else os.path.dirname(os.path.abspath(p))


def plan_from_transformers(base_plan: Dict[str, str],
                           model_plan: Dict[str, str], base_prefix: str,
                           notes: List[str]) -> List[Tuple[str, str]]:
    """Glob patterns over full tensor names from transformers' module-level
    plans: BASE_PLAN keys are relative to the base model (prefix
    BASE_PREFIX, e.g. "model"), MODEL_PLAN keys to the whole model. A key K
    names a module; its tensors are "K.*". transformers' words that shard
    the weight like colwise or rowwise map to those; any other word is
    replicated here (with a note)."""
    out: List[Tuple[str, str]] = []

    def word_of(word: str) -> str:
        if word in _COLWISE_WORDS:
            return "colwise"
        if word in _ROWWISE_WORDS:
            return "rowwise"
        if word != "replicate":
            notes.append(f"tp_plan auto: transformers' word {word!r} is "
                         f"loaded replicated")
        return "replicate"

    for key, word in model_plan.items():
        out.append((f"{key}.*", word_of(word)))
    for key, word in base_plan.items():
        w = word_of(word)
        if base_prefix:
            out.append((f"{base_prefix}.{key}.*", w))
        out.append((f"{key}.*", w))  # a checkpoint of the base model alone
    return out


def auto_plan(path: Any, notes: List[str]) -> List[Tuple[str, str]]:
    """tp_plan="auto": the plan of the transformers model class named in
    the checkpoint folder's config.json."""
    folder = _checkpoint_folder(path)
    config_path = os.path.join(folder, "config.json")
    if not os.path.exists(config_path):
        raise NotFoundError(f"tp_plan='auto': {config_path} not found (the "
                            f"model class comes from config.json)",
                            code="NotFound")
    try:
        import transformers
    except ImportError:
        raise UnsupportedError(
            "tp_plan='auto' needs the transformers package (not installed); "
            "pass tp_plan as a dict of pattern -> colwise|rowwise|replicate",
            code="Unsupported") from None
    config = transformers.AutoConfig.from_pretrained(folder)
    base_plan = dict(getattr(config, "base_model_tp_plan", None) or {})
    model_plan: Dict[str, str] = {}
    prefix = "model"
    for arch in getattr(config, "architectures", None) or []:
        cls = getattr(transformers, arch, None)
        if cls is not None:
            model_plan = dict(getattr(cls, "_tp_plan", None) or {})
            prefix = getattr(cls, "base_model_prefix", prefix) or prefix
            break
    if not base_plan and not model_plan:
        raise UnsupportedError(
            f"tp_plan='auto': transformers {transformers.__version__} has no "
            f"tp plan for {config_path} (model_type "
            f"{getattr(config, 'model_type', '?')!r})", code="Unsupported")
    notes.append(f"tp_plan auto: from transformers "
                 f"{transformers.__version__} for "
                 f"{(getattr(config, 'architectures', None) or ['?'])[0]}")
    return plan_from_transformers(base_plan, model_plan, prefix, notes)


# ---- reading parts without the loader ----------------------------------------
# weightlift._stream's fallback for a native module without LoadSlices.

def read_runs(path: str, shard: Shard, out: memoryview) -> int:
    """Reads SHARD's runs (its bytes, in order) from PATH into OUT; returns
    the bytes read. Each run is one positioned read (looped for short reads
    and EINTR); a file that ends early is an error naming tensor, offset and
    length."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        pos = 0
        base = shard.offset + shard.first_byte
        for i in range(shard.runs):
            at = base + i * shard.run_stride
            view = out[pos:pos + shard.run_bytes]
            done = 0
            while done < shard.run_bytes:
                try:
                    got = os.preadv(fd, [view[done:]], at + done)
                except OSError as e:
                    raise _errors.WeightliftIOError(
                        f"{path}: tensor '{shard.name}': read of "
                        f"{shard.run_bytes - done} bytes at offset "
                        f"{at + done} failed: {os.strerror(e.errno)} "
                        f"({e.errno})", code="IoError") from None
                if got == 0:
                    raise _errors.WeightliftIOError(
                        f"{path}: tensor '{shard.name}': unexpected end of "
                        f"file at offset {at + done} ({shard.run_bytes - done}"
                        f" bytes of the part missing)", code="IoError")
                done += got
            pos += shard.run_bytes
        return pos
    finally:
        os.close(fd)


def read_part_into(ckpt, shard: Shard, buf) -> int:
    """Fills BUF (a 1-D uint8 torch tensor of shard.bytes, any device) with
    SHARD's bytes; returns bytes read. CUDA buffers are filled from a host
    copy."""
    import torch

    if shard.bytes == 0:
        return 0
    path = ckpt.files()[shard.file]["resolved_path"] or \
        ckpt.files()[shard.file]["path"]
    host = buf if buf.device.type == "cpu" else torch.empty(
        shard.bytes, dtype=torch.uint8, pin_memory=True)
    n = read_runs(path, shard, memoryview(host.numpy()).cast("B"))
    if host is not buf:
        buf.copy_(host, non_blocking=False)
    return n


# ---- slice mode --------------------------------------------------------------

def slice_request(s: Shard, dim: int = -1, start: int = 0, stop: int = 0):
    """(name, [(start, stop, step)] per dim) for LoadSlices: SHARD's part,
    or (DIM >= 0) rows [START, STOP) of dim DIM; [] is the whole tensor."""
    if dim < 0 and not s.split:
        return (s.name, [])
    dims = [(0, d, 1) for d in s.full_shape]
    if dim >= 0:
        dims[dim] = (start, stop, 1)
    else:
        dims[s.dim] = (s.start, s.stop, 1)
    return (s.name, dims)


def slice_requests(parts: List[Shard]) -> list:
    return [slice_request(s) for s in parts]


class _Opening:
    """_core.open_checkpoint(PATH), on a thread of its own when ASIDE (and
    PATH is not already open): result() returns it or raises its error."""

    def __init__(self, path: Any, aside: bool):
        self._path, self._ckpt, self._error, self._thread = path, None, None, \
            None
        if aside and not isinstance(path, _native.Checkpoint):
            self._thread = threading.Thread(target=self._open, daemon=True,
                                            name="weightlift-open")
            self._thread.start()

    def _open(self):
        try:
            self._ckpt = _core.open_checkpoint(self._path)
        except BaseException as e:  # re-raised by result(), on its caller
            self._error = e

    def result(self):
        if self._thread is None:
            return _core.open_checkpoint(self._path)
        self._thread.join()
        if self._error is not None:
            error, self._error = self._error, None
            try:
                raise error
            finally:
                # Neither this frame nor this object keeps the error: its
                # traceback holds the caller's frames, and a cycle through
                # them would keep their loader alive until the garbage
                # collector runs (as concurrent.futures does).
                error = None
        return self._ckpt


def load_sliced(path: Any, device: str, req: TpRequest, options: Dict[str, Any],
                progress: bool = False):
    """Slice mode: [(name, tensor)] in checkpoint order and the report. One
    Loader::LoadSlices call reads every part and every replicated tensor
    onto DEVICE (on a CUDA device for torch: into one block of torch's, as
    a whole-checkpoint load does, see _load_torch)."""
    if _load_torch.applies(device, False):
        return _load_sliced_into_block(path, device, req, options, progress)
    t0 = time.perf_counter()
    loader_options = dict(options, device=device)
    # A first call makes its loader (streams, staging, threads: ~2.5 ms on
    # the H200) while a thread opens the checkpoint; both release the GIL.
    opening = _Opening(path, not _core.has_idle_loader(loader_options))
    with _core.pooled_loader(loader_options) as loader:
        ckpt = opening.result()
        # The shard rule and the request stay in C++ (no Python object per
        # tensor); a bad rank, size or word raises here.
        requests, info = rank_requests(ckpt, req)
        notes = tp_notes(req, info, req.rank, req.size)
        total = info["bytes"]
        job = loader.start_load_tp(ckpt, requests)
        report = _core.wait(job, progress, total)
        items = job.take_tensors(False)
    out = [(name, _dtypes.to_torch(dt, shape, data, device, name))
           for name, dt, shape, data in items]
    t1 = time.perf_counter()
    report = make_report(device, [report], info["tensors"], total, 0,
                         t1 - t0, 0.0, notes)
    _core.set_last_report(report)
    return out, report


def _load_sliced_into_block(path: Any, device: str, req: TpRequest,
                            options: Dict[str, Any], progress: bool):
    """load_sliced onto a CUDA device: the parts land in one block from
    torch's caching allocator (Loader::LoadSlicesInto), whose views are
    made while the loader reads and copies. A first call also opens the
    checkpoint, applies the shard rule and takes the block while its loader
    is made (_load_torch.open_beside_loader). Against the loader's own
    cudaMalloc per call and a DLPack import per tensor after the load, this
    keeps ~2-3 ms of views off the clock and gives torch the memory to
    account for and cache (see _load_torch)."""
    import torch

    t0 = time.perf_counter()
    loader_options = dict(options, device=device)

    def prepare(ckpt):
        # The shard rule stays in C++; a bad rank, size or word raises here,
        # an unsupported dtype before the block is taken. prepare(tp_*) may
        # have taken the block already (_rank_block).
        requests, info = rank_requests(ckpt, req)
        _load_torch.check_dtypes(info["layout"])
        return (requests, info) + load_block(ckpt, req, info,
                                             torch.device(device))

    ckpt, open_s, prepared = _load_torch.open_beside_loader(
        path, loader_options, prepare)
    requests, info, base, memory = prepared.value
    prepared.value = None  # the views and the job hold the block from here
    notes = tp_notes(req, info, req.rank, req.size)
    total = info["bytes"]
    layout = info["layout"]
    with _core.pooled_loader(loader_options) as loader:
        if not total:  # every part is empty: nothing to read
            out = _load_torch._views(layout, base)
            reports = []
        else:
            job = loader.start_load_tp_into(ckpt, requests, base.data_ptr(),
                                            base)
            t_views = time.perf_counter()
            try:
                out = _load_torch._views(layout, base)
            finally:  # also when it raised: the job must end before we do
                views_s = time.perf_counter() - t_views
                report = _core.wait(job, progress, total)
            report.open_seconds += open_s
            report.alloc_seconds += prepared.seconds
            report.device_bytes = info["device_bytes"]
            report.notes.append(
                f"python: checkpoint open {open_s * 1e3:.1f} ms (beyond the "
                f"loader's setup), shard rule + layout + {memory} "
                f"{prepared.seconds * 1e3:.1f} ms"
                f"{prepared.note()}, {len(out)} tensor views "
                f"{views_s * 1e3:.1f} ms while the loader ran")
            reports = [report]
    report = make_report(device, reports, info["tensors"], total, 0,
                         time.perf_counter() - t0, 0.0, notes)
    _core.set_last_report(report)
    return out, report


# ---- entry points (load_checkpoint, load_file, iter_tensors, load_into) ----

def _check_tp_options(options: Dict[str, Any], numpy: bool) -> None:
    if numpy:
        raise UnsupportedError("tp_* and process_group load torch tensors "
                               "(framework='pt')", code="Unsupported")
    if "zero_copy" in options and options["zero_copy"]:
        raise UnsupportedError("zero_copy=True cannot be combined with tp_* "
                               "or process_group", code="Unsupported")


def _check_group_options(req: TpRequest, options: Dict[str, Any],
                         numpy: bool) -> None:
    """_check_tp_options; in group mode a refusal is kept in REQ.error (for
    GroupLoad to tell the group) instead of raised alone."""
    try:
        _check_tp_options(options, numpy)
    except _errors.WeightliftError as e:
        if req.group is None:
            raise
        req.error = req.error or e


def load(path: Any, device: str, req: TpRequest, options: Dict[str, Any],
         progress: bool = False, numpy: bool = False):
    """[(name, tensor)] in checkpoint order and the report, in slice or
    group mode."""
    _check_group_options(req, options, numpy)
    if req.group is not None:
        from . import _group  # group mode only: not on a slice load's clock
        return _group.load_group(path, device, req, options, progress)
    return load_sliced(path, device, req, options, progress)


# iter_tensors in slice mode reads in batches of about this many bytes of
# parts (file order): batch k + 1 is read while the consumer has batch k.
ITER_BATCH_BYTES = 64 << 20


class TpIterator:
    """iter_tensors with tp_* / process_group: (name, tensor) in checkpoint
    order as they land, a batch at a time. Slice mode: one LoadSlices job
    per batch of about ITER_BATCH_BYTES, the next one reading while the
    consumer takes this one's tensors. Group mode: the C++ group load's
    batches, as their collectives complete (every rank's load runs to its
    end even if this consumer stops: the others' collectives need it).
    ``batches`` and ``batches_loaded`` count slice mode's loads (None in
    group mode); ``.report`` is set once exhausted."""

    def __init__(self, path: Any, device: str, req: TpRequest,
                 options: Dict[str, Any]):
        _check_group_options(req, options, False)
        self.report: Optional[LoadReport] = None
        self.batches = 0
        self.batches_loaded = 0
        self._gen = (self._group(path, device, req, options)
                     if req.group is not None else
                     self._sliced(path, device, req, options))

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._gen)

    def close(self) -> None:
        """Stops early: cancels the load in flight, waits for its reads in
        flight, drops the rest."""
        self._gen.close()

    def _sliced(self, path, device, req, options):
        t0 = time.perf_counter()
        ckpt = _core.open_checkpoint(path)
        # Batches land in memory of their own: a block prepare took for
        # this rank's load would only be held.
        _core.drop_tp_block(ckpt, req.key())
        parts, info = shards(ckpt.tensors(), req.rank, req.size, req.plan)
        notes = tp_notes(req, info, req.rank, req.size)
        batches: List[List[int]] = []
        size = 0
        for i, s in enumerate(parts):
            if not batches or size >= ITER_BATCH_BYTES:
                batches.append([])
                size = 0
            batches[-1].append(i)
            size += s.bytes
        self.batches = len(batches)
        reports: List[LoadReport] = []
        with _core.pooled_loader(dict(options, device=device)) as loader:
            def start(b):
                return loader.start_load_slices(
                    ckpt, [slice_request(parts[i]) for i in batches[b]])

            job = start(0) if batches else None
            try:
                for b in range(len(batches)):
                    reports.append(_core.wait(
                        job, False, sum(parts[i].bytes for i in batches[b])))
                    items = job.take_tensors(False)
                    self.batches_loaded += 1
                    job = start(b + 1) if b + 1 < len(batches) else None
                    for name, dt, shape, data in items:
                        yield name, _dtypes.to_torch(dt, shape, data, device,
                                                     name)
                    items = None
            finally:
                if job is not None:  # stopped early: its memory is in use
                    _core.stop(job)
        total = sum(s.bytes for s in parts)
        self.report = make_report(device, reports, len(parts), total, 0,
                                  time.perf_counter() - t0, 0.0, notes)
        _core.set_last_report(self.report)

    def _group(self, path, device, req, options):
        self.batches = self.batches_loaded = None
        from ._group import GroupLoad
        load = GroupLoad(path, device, req, options)
        try:
            for _, name, t in load.tensors():
                yield name, t
        finally:
            load.close()
        self.report = load.report


def load_into_tp(target: Any, checkpoint: Any, req: TpRequest, strict: bool,
                 progress: bool, options: Dict[str, Any]) -> LoadReport:
    """load_into with tp_* / process_group: TARGET holds this rank's parts
    (shapes as the shard rule gives them). The parts are loaded, then
    copied into the targets (one copy per tensor, on the target's device)."""
    from ._options import device_string
    from ._targets import strict_error, targets as _targets

    targets = _targets(target)
    devices = {device_string(t.device) for t in targets.values()
               if hasattr(t, "device")}
    want = options.pop("device", None)
    if want is not None:
        devices = {device_string(want)}
    if len(devices) > 1:
        raise InvalidArgumentError(
            f"load_into with tp: the targets are on several devices "
            f"{sorted(devices)}", code="InvalidArgument")
    device = devices.pop() if devices else "cpu"
    items, report = load(checkpoint, device, req, options, progress)
    loaded = dict(items)
    missing = [n for n in targets if n not in loaded]
    unexpected = [n for n in loaded if n not in targets]
    if strict and (missing or unexpected):
        raise strict_error(_core.open_checkpoint(checkpoint), missing,
                           unexpected)
    errors = []
    for name, t in targets.items():
        src = loaded.get(name)
        if src is None:
            continue
        if tuple(t.shape) != tuple(src.shape) or t.dtype != src.dtype:
            errors.append(f"{name!r}: this rank's part is {src.dtype} "
                          f"{list(src.shape)}, the target {t.dtype} "
                          f"{list(t.shape)}")
    if errors:
        raise InvalidArgumentError(
            f"load_into with tp: {len(errors)} tensor(s) cannot be loaded: "
            + "; ".join(errors[:10]), code="InvalidArgument")
    import torch
    with torch.no_grad():
        for name, t in targets.items():
            if name in loaded:
                t.copy_(loaded[name])
    report.missing_keys = missing
    report.unexpected_keys = unexpected
    _core.set_last_report(report)
    return report
