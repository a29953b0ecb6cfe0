"""The plugin's load, without vLLM: stream a checkpoint into a model.

:func:`load_model_weights` is what ``WeightliftModelLoader.load_weights``
runs once vLLM has built the model. It needs nothing of vLLM itself (the
model's own ``load_weights`` and the ranks are passed in), so the same
code path is benchmarked on machines without vLLM (bench/vllm_plugin.py).
"""

from __future__ import annotations

import os
import time
from typing import (Any, Callable, Dict, Iterable, Iterator, Optional, Set,
                    Tuple)

import torch
from torch import nn

import weightlift

from .options import PluginOptions
from .selection import plan_slices, split_by_stage


def _fmt_bytes(n: float) -> str:
    if n < 1024:
        return f"{n:.0f} B"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if n < 1024 or unit == "GiB":
            break
    return f"{n:.2f} {unit}"


class LoadSummary:
    """What one load_weights call did (also logged)."""

    def __init__(self, path: str, device: str, report, tensors: int,
                 skipped_other_stages: int, peak_bytes: int,
                 peak_measured: Optional[int], bound_bytes: int,
                 window_bytes: int, seconds: float, tp: Tuple[int, int],
                 pp: Tuple[int, int]):
        self.path = path
        self.device = device
        self.report = report
        self.tensors = tensors
        self.skipped_other_stages = skipped_other_stages
        self.peak_bytes = peak_bytes
        self.peak_measured = peak_measured
        self.bound_bytes = bound_bytes
        self.window_bytes = window_bytes
        self.seconds = seconds
        self.tp = tp
        self.pp = pp
        self.sliced = 0  # tensors read as this rank's slice
        # The loader's creation before vLLM built the model (the plugin's
        # create_model, weightlift.prepare); None when it did not run.
        self.prepared_s: Optional[float] = None

    def lines(self):
        r = self.report
        gb = r.bytes / 1e9 if r else 0.0
        rate = r.gb_per_s if r else 0.0
        yield (f"weightlift: {self.tensors} tensors, {gb:.3f} GB from "
               f"{self.path} to {self.device} in {r.seconds if r else 0:.3f} s"
               f" ({rate:.2f} GB/s); load_weights {self.seconds:.3f} s")
        if self.prepared_s is not None:
            setup = r.setup_seconds if r else 0.0
            yield (f"weightlift:   loader made before vLLM built the model "
                   f"({self.prepared_s * 1e3:.1f} ms); setup left in this "
                   f"load {setup * 1e3:.1f} ms")
        if r:
            for f in r.files:
                yield (f"weightlift:   {os.path.basename(f.path)}: "
                       f"{f.path_taken} ({f.reason})")
            for note in r.notes:
                yield f"weightlift:   note: {note}"
        peak = _fmt_bytes(self.peak_bytes)
        measured = ("" if self.peak_measured is None else
                    f", {_fmt_bytes(self.peak_measured)} measured by torch's "
                    f"allocator")
        yield (f"weightlift:   peak extra device memory {peak} held by the "
               f"stream{measured} (window {_fmt_bytes(self.window_bytes)}, "
               f"bound {_fmt_bytes(self.bound_bytes)})")
        if r and r.bytes_read is not None and r.bytes_read != r.bytes:
            yield (f"weightlift:   this rank read {r.bytes_read / 1e9:.3f} "
                   f"GB of the {r.bytes / 1e9:.3f} GB it received")
        if self.tp[1] > 1 or self.pp[1] > 1:
            yield (f"weightlift:   tensor-parallel rank {self.tp[0]} of "
                   f"{self.tp[1]}, pipeline stage {self.pp[0]} of "
                   f"{self.pp[1]}: {self.sliced} tensors read as this rank's "
                   f"slice, {self.skipped_other_stages} tensors of other "
                   f"stages not read")




class _PeakTracker:
    """Samples torch's allocated device memory around every tensor the
    model consumes: the stream's windows plus whatever the model's weight
    loaders allocate on the way (the parameters existed before)."""

    def __init__(self, device: torch.device):
        self.device = device
        torch.cuda.synchronize(device)
        self.base = torch.cuda.memory_allocated(device)
        self.peak = 0

    def _sample(self) -> None:
        extra = torch.cuda.memory_allocated(self.device) - self.base
        if extra > self.peak:
            self.peak = extra

    def wrap(self, it) -> Iterator:
        for item in it:
            self._sample()
            yield item
            self._sample()


def _progress(it, stream) -> Iterator:
    from tqdm.auto import tqdm
    with tqdm(total=stream.bytes, unit="B", unit_scale=True,
              unit_divisor=1024, desc="weightlift") as bar:
        for name, t in it:
            bar.update(t.numel() * t.element_size())
            yield name, t


def model_device(model: nn.Module) -> torch.device:
    """Where the model's parameters are (vLLM allocates them on the target
    device before loading); cpu for a model without any."""
    for p in model.parameters():
        if p.device.type != "meta":
            return p.device
    return torch.device("cpu")


def load_model_weights(
        model: nn.Module, path: str, opts: PluginOptions,
        consume: Callable[[Iterable[Tuple[str, torch.Tensor]]],
                          Optional[Set[str]]],
        tp: Tuple[int, int] = (0, 1), pp: Tuple[int, int] = (0, 1),
        tp_group: Any = None,
        slices: Optional[Tuple[Dict[str, str], Dict[str, Any]]] = None,
) -> Tuple[Optional[Set[str]], LoadSummary]:
    """Streams PATH's tensors (file order, those of this pipeline stage)
    onto MODEL's device into CONSUME (the model's ``load_weights``).
    TP_GROUP (a torch.distributed group of this stage's tensor-parallel
    ranks; gloo for cpu, NCCL for cuda): with tp_mode "group" the ranks
    split the reading and deliver the rest to each other. SLICES: the
    (tp_plan, {name: parameter}) of tensors read as this rank's slice and
    copied straight into their parameter; by default selection.plan_slices
    finds them in a vLLM model. Returns what CONSUME returned (plus the
    copied names) and the LoadSummary."""
    t0 = time.perf_counter()
    device = model_device(model)
    ckpt = weightlift._core.open_checkpoint(path)
    names, skipped = split_by_stage(model, [t[0] for t in ckpt.tensors()])
    group = tp_group if (opts.tp_mode == "group" and tp[1] > 1) else None
    plan, direct = {}, {}
    if tp[1] > 1 and opts.tp_slices:
        if slices is not None:
            plan, direct = slices
        else:
            wanted = set(names)
            plan, direct = plan_slices(
                model, [r for r in ckpt.tensors() if r[0] in wanted], tp[0],
                tp[1])
    tp_args = {}
    if plan:
        tp_args = {"tp_plan": plan}
        if group is None:
            tp_args.update(tp_rank=tp[0], tp_size=tp[1])
    stream = weightlift.stream_tensors(
        ckpt, device=device, names=names, window=opts.window,
        process_group=group, **tp_args, **opts.load)
    tracker = _PeakTracker(device) if device.type == "cuda" else None
    weights: Iterator = stream if tracker is None else tracker.wrap(stream)
    if opts.progress and tp[0] == 0:
        weights = _progress(weights, stream)
    copied: Set[str] = set()
    if direct:
        weights = _copy_slices(weights, direct, copied)
    try:
        loaded = consume(weights)
        if loaded is not None:
            loaded = set(loaded) | copied
        # A model's load_weights may stop early; the stream must still end
        # (its last load joined) before the summary.
        for _ in stream:
            pass
    finally:
        stream.close()
    summary = LoadSummary(
        path=path, device=str(device), report=stream.report,
        tensors=len(names), skipped_other_stages=len(skipped),
        peak_bytes=stream.peak_bytes,
        peak_measured=tracker.peak if tracker else None,
        bound_bytes=stream.bound_bytes, window_bytes=stream.window_bytes,
        seconds=time.perf_counter() - t0, tp=tp, pp=pp)
    summary.sliced = len(copied)
    return loaded, summary


def _copy_slices(weights, direct, copied: Set[str]) -> Iterator:
    """Copies the slices of DIRECT's parameters (this rank's part, which is
    what their vLLM weight loader would narrow the full tensor to) into
    them; passes everything else on to the model's load_weights."""
    for name, t in weights:
        p = direct.get(name)
        if p is None:
            yield name, t
            continue
        p.data.copy_(t)
        copied.add(name)
