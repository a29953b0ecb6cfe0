"""``WeightliftModelLoader``: vLLM's load format ``weightlift``.

vLLM builds the model (parameters allocated on the target device), then
calls :meth:`load_weights`. Before it builds the model
(:meth:`create_model`) we make weightlift's loader (weightlift.prepare),
so that its threads start and its staging ring is pinned while vLLM
builds, not in the load. We stream the checkpoint's tensors in file
order through weightlift (bounded extra device memory, see
weightlift._stream) into the model's own ``load_weights``, whose weight
loaders fuse q/k/v and gate/up, narrow to this tensor-parallel rank and
copy into the parameters, exactly as for vLLM's default loader. Under
pipeline parallelism the tensors of the layers other stages hold are not
read (selection.py). The load report goes to vLLM's log.
"""

from __future__ import annotations

import os
from typing import Optional, Set, Tuple

import torch
from torch import nn
from vllm.config import LoadConfig, ModelConfig, VllmConfig
from vllm.logger import init_logger
from vllm.model_executor.model_loader.base_loader import BaseModelLoader

import weightlift

from . import options as options_mod
from .engine import LoadSummary, load_model_weights, model_device

logger = init_logger("vllm.weightlift")

_REMOTE_SCHEMES = ("s3://", "gs://", "http://", "https://")


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


def _tp_group(device):
    """vLLM's tensor-parallel group of this stage, as a torch.distributed
    group that can move tensors on DEVICE (its NCCL group for cuda, its
    gloo group for cpu)."""
    from vllm.distributed import get_tp_group
    coordinator = get_tp_group()
    return (coordinator.device_group if device.type == "cuda"
            else coordinator.cpu_group)


class WeightliftModelLoader(BaseModelLoader):
    """Load format ``weightlift`` (registered by weightlift.vllm.register).
    """

    def __init__(self, load_config: LoadConfig):
        super().__init__(load_config)
        self.options = options_mod.parse(
            getattr(load_config, "model_loader_extra_config", None))
        self.last_summary: Optional[LoadSummary] = None
        # The loader's creation in create_model (weightlift.prepare; 0.0
        # when one was cached); None when the model was built some other
        # way (load_weights alone).
        self._prepared_s: Optional[float] = None

    # -- where the checkpoint is ---------------------------------------------

    def _checkpoint_path(self, model_config: ModelConfig) -> str:
        """A local directory or file that weightlift opens, or an object
        storage URI handed to weightlift as is."""
        # vLLM keeps an object-storage URI here and points `model` at a
        # local folder holding only the config files it pulled.
        model = str(getattr(model_config, "model_weights", "") or
                    model_config.model)
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

    def create_model(self, vllm_config: VllmConfig, model_config: ModelConfig,
                     prefix: str = "") -> nn.Module:
        """vLLM's, with weightlift's loader made first (on the device
        load_model builds the model on), so that its setup and the pinning
        of its staging ring overlap the model's construction. Bad options
        or an unusable device raise here, before the model is built."""
        # As BaseModelLoader.load_model picks it (LoadConfig.device is
        # newer than some vLLM releases).
        load_device = getattr(vllm_config.load_config, "device", None)
        device = torch.device(vllm_config.device_config.device
                              if load_device is None else load_device)
        # The checkpoint is opened now too (its headers read and checked),
        # so a missing or malformed one fails before the model is built.
        self._prepared_s = weightlift.prepare(
            device, checkpoint=self._checkpoint_path(model_config),
            **self.options.load)
        return super().create_model(vllm_config, model_config, prefix)

    def load_weights(self, model: nn.Module, model_config: ModelConfig) -> None:
        # create_model's prepare counts for this load only, failed or not.
        prepared_s, self._prepared_s = self._prepared_s, None
        path = self._checkpoint_path(model_config)
        tp, pp = _parallel_ranks()
        loaded, summary = load_model_weights(
            model, path, self.options, model.load_weights, tp=tp, pp=pp,
            tp_group=_tp_group(model_device(model)) if tp[1] > 1 else None)
        self._check_all_loaded(model, model_config, loaded)
        summary.prepared_s = prepared_s
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


