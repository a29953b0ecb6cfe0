"""``WeightliftModelLoader``: vLLM's load format ``weightlift``.

vLLM builds the model (parameters allocated on the target device), then
calls :meth:`load_weights`. We stream the checkpoint's tensors in file
order through weightlift (bounded extra device memory, see
weightlift._stream) into the model's own ``load_weights``, whose weight
loaders fuse q/k/v and gate/up, narrow to this tensor-parallel rank and
copy into the parameters, exactly as for vLLM's default loader. Under
pipeline parallelism the tensors of the layers other stages hold are not
read (selection.py). The load report goes to vLLM's log.
"""

from __future__ import annotations

import os
import time
from typing import Iterator, Optional, Set, Tuple

import torch
from torch import nn
from vllm.config import LoadConfig, ModelConfig
from vllm.logger import init_logger
from vllm.model_executor.model_loader.base_loader import BaseModelLoader

import weightlift

from . import options as options_mod
from .selection import split_by_stage

logger = init_logger("vllm.weightlift")

_REMOTE_SCHEMES = ("s3://", "gs://", "http://", "https://")


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n} B"


def _model_device(model: nn.Module) -> torch.device:
    for p in model.parameters():
        if p.device.type != "meta":
            return p.device
    return torch.device("cpu")


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

    def lines(self):
        r = self.report
        gb = r.bytes / 1e9 if r else 0.0
        rate = r.gb_per_s if r else 0.0
        yield (f"weightlift: {self.tensors} tensors, {gb:.3f} GB from "
               f"{self.path} to {self.device} in {r.seconds if r else 0:.3f} s"
               f" ({rate:.2f} GB/s); load_weights {self.seconds:.3f} s")
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
        if self.tp[1] > 1 or self.pp[1] > 1:
            yield (f"weightlift:   tensor-parallel rank {self.tp[0]} of "
                   f"{self.tp[1]}, pipeline stage {self.pp[0]} of "
                   f"{self.pp[1]}: {self.skipped_other_stages} tensors of "
                   f"other stages not read")


def _parallel_ranks() -> Tuple[Tuple[int, int], Tuple[int, int]]:
    """((tp rank, tp size), (pp rank, pp size)); (0, 1) each without a
    distributed state (a model built outside vLLM's engine)."""
    try:
        from vllm.distributed import (get_pp_group,
                                      get_tensor_model_parallel_rank,
                                      get_tensor_model_parallel_world_size)
        tp = (get_tensor_model_parallel_rank(),
              get_tensor_model_parallel_world_size())
        pp_group = get_pp_group()
        pp = (pp_group.rank_in_group, pp_group.world_size)
        return tp, pp
    except (AssertionError, ImportError, AttributeError):
        return (0, 1), (0, 1)


class WeightliftModelLoader(BaseModelLoader):
    """Load format ``weightlift`` (registered by weightlift.vllm.register).
    """

    def __init__(self, load_config: LoadConfig):
        super().__init__(load_config)
        self.options = options_mod.parse(
            getattr(load_config, "model_loader_extra_config", None))
        self.last_summary: Optional[LoadSummary] = None

    # -- where the checkpoint is ---------------------------------------------

    def _checkpoint_path(self, model_config: ModelConfig) -> str:
        """A local directory or file that weightlift opens, or an object
        storage URI handed to weightlift as is."""
        model = str(model_config.model)
        if model.startswith(_REMOTE_SCHEMES):
            return model
        if os.path.exists(model):
            return model
        # A Hugging Face repository id: vLLM's own download helper, for the
        # safetensors files and their index only.
        from vllm.model_executor.model_loader.weight_utils import (
            download_safetensors_index_file_from_hf, download_weights_from_hf)
        folder = download_weights_from_hf(
            model, self.load_config.download_dir, ["*.safetensors"],
            model_config.revision,
            ignore_patterns=self.load_config.ignore_patterns)
        download_safetensors_index_file_from_hf(
            model, "model.safetensors.index.json",
            self.load_config.download_dir, model_config.revision)
        return folder

    def download_model(self, model_config: ModelConfig) -> None:
        self._checkpoint_path(model_config)

    # -- loading ---------------------------------------------------------------

    def load_weights(self, model: nn.Module, model_config: ModelConfig) -> None:
        t0 = time.perf_counter()
        path = self._checkpoint_path(model_config)
        device = _model_device(model)
        tp, pp = _parallel_ranks()
        ckpt = weightlift._core.open_checkpoint(path)
        all_names = [t[0] for t in ckpt.tensors()]
        names, skipped = split_by_stage(model, all_names)
        opts = self.options
        stream = weightlift.stream_tensors(
            ckpt, device=device, names=names, window=opts.window, **opts.load)
        measure = device.type == "cuda"
        tracker = _PeakTracker(device) if measure else None
        weights = stream if tracker is None else tracker.wrap(stream)
        if opts.progress and tp[0] == 0:
            weights = _progress(weights, stream)
        loaded: Optional[Set[str]] = model.load_weights(weights)
        # A model's load_weights may stop early; the stream must still end.
        for _ in stream:
            pass
        self._check_all_loaded(model, model_config, loaded)
        summary = LoadSummary(
            path=path, device=str(device), report=stream.report,
            tensors=len(names), skipped_other_stages=len(skipped),
            peak_bytes=stream.peak_bytes,
            peak_measured=tracker.peak if tracker else None,
            bound_bytes=stream.bound_bytes, window_bytes=stream.window_bytes,
            seconds=time.perf_counter() - t0, tp=tp, pp=pp)
        self.last_summary = summary
        for line in summary.lines():
            logger.info("%s", line)

    @staticmethod
    def _check_all_loaded(model: nn.Module, model_config: ModelConfig,
                          loaded: Optional[Set[str]]) -> None:
        """As vLLM's default loader: with an unquantized model whose
        load_weights reports what it loaded, every parameter must be among
        them (a missing tensor is an error, not random weights)."""
        if loaded is None or model_config.quantization is not None:
            return
        expected = {n for n, _ in model.named_parameters()}
        missing = expected - set(loaded)
        if missing:
            raise ValueError(
                f"weightlift: these parameters were not initialized from "
                f"the checkpoint: {sorted(missing)}")


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
