"""One vLLM rank on CPU: builds a real vLLM model from a checkpoint folder
twice, loads it once with vLLM's DefaultModelLoader and once with load
format "weightlift" (through vLLM's own plugin loading and registry), and
compares every parameter bit for bit.

Used in-process by the single-rank tests and as a program, one process per
rank, for tensor and pipeline parallelism over a gloo group:

  python rank.py CKPT --rank R --world N --tp T --pp P --port PORT --out F

vLLM needs VLLM_TARGET_DEVICE=cpu to pick its CPU platform when the
installed wheel is its CUDA build and there is no GPU (set below, before
vLLM is imported).
"""

import argparse
import json
import logging
import os
import sys

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

import torch  # noqa: E402


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def init_vllm(ckpt, tp=1, pp=1, extra=None):
    """Loads vLLM's plugins (ours among them, by its entry point); returns
    a VllmConfig for CKPT on cpu with load format weightlift."""
    from vllm.config import (DeviceConfig, LoadConfig, ModelConfig,
                             ParallelConfig, VllmConfig)
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    mc = ModelConfig(model=ckpt, tokenizer=None, skip_tokenizer_init=True,
                     dtype="float32", enforce_eager=True)
    vc = VllmConfig(
        model_config=mc,
        load_config=LoadConfig(load_format="weightlift",
                               model_loader_extra_config=extra or {}),
        device_config=DeviceConfig(device="cpu"),
        parallel_config=ParallelConfig(tensor_parallel_size=tp,
                                       pipeline_parallel_size=pp))
    return vc


def start_distributed(vc, rank, world, tp, pp, port):
    from vllm.config import set_current_vllm_config
    from vllm.distributed import (init_distributed_environment,
                                  initialize_model_parallel)
    with set_current_vllm_config(vc):
        init_distributed_environment(
            world_size=world, rank=rank, local_rank=rank,
            distributed_init_method=f"tcp://127.0.0.1:{port}",
            backend="gloo")
        initialize_model_parallel(tp, pp)


def build(vc):
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader.utils import initialize_model
    from vllm.utils.torch_utils import set_default_torch_dtype
    # Attention layers register their names in the config; this builds the
    # same model twice (once per loader).
    vc.compilation_config.static_forward_context.clear()
    with set_current_vllm_config(vc), set_default_torch_dtype(torch.float32), \
            torch.device("cpu"):
        model = initialize_model(vllm_config=vc, model_config=vc.model_config)
    for p in model.parameters():  # no leftover that could match by chance
        p.data.fill_(float("nan"))
    return model


def compare(vc, load_model=False):
    """Loads the model with both loaders; returns a JSON-able result.
    LOAD_MODEL: weightlift's through vLLM's own load_model (the plugin
    prepares its loader before vLLM builds the model) instead of
    load_weights into a model built here (every parameter NaN first)."""
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader import (DefaultModelLoader,
                                                  get_model_loader)

    mc = vc.model_config
    loader = get_model_loader(vc.load_config)
    handler = _Lines()
    vllm_logger = logging.getLogger("vllm")
    # INFO, as vLLM's own logging configuration sets it in a server (under
    # pytest the logger may be left at the root's WARNING).
    level = vllm_logger.level
    vllm_logger.setLevel(logging.INFO)
    vllm_logger.addHandler(handler)
    try:
        with set_current_vllm_config(vc):
            ref = build(vc)
            DefaultModelLoader(
                type(vc.load_config)(load_format="safetensors")
            ).load_weights(ref, mc)
            if load_model:
                vc.compilation_config.static_forward_context.clear()
                got = loader.load_model(vllm_config=vc, model_config=mc)
            else:
                got = build(vc)
                loader.load_weights(got, mc)
    finally:
        vllm_logger.removeHandler(handler)
        vllm_logger.setLevel(level)
    ref_p = dict(ref.named_parameters())
    got_p = dict(got.named_parameters())
    def same_bits(a, b):
        return a.shape == b.shape and a.dtype == b.dtype and torch.equal(
            a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))

    differ = sorted(n for n in ref_p
                    if n not in got_p or not same_bits(ref_p[n], got_p[n]))
    s = loader.last_summary
    return {
        "loader": type(loader).__module__ + "." + type(loader).__name__,
        "params": sorted(ref_p),
        "shapes": {n: list(p.shape) for n, p in got_p.items()},
        "differ": differ,
        "nan_left": sorted(n for n, p in got_p.items()
                           if torch.isnan(p).any()),
        "log": [ln for ln in handler.lines if ln.startswith("weightlift")],
        "tensors_read": s.tensors,
        "bytes_received": s.report.bytes,
        "bytes_read": s.report.bytes_read,
        "files": [[f.path, f.path_taken] for f in s.report.files],
        "skipped_other_stages": s.skipped_other_stages,
        "peak_bytes": s.peak_bytes,
        "bound_bytes": s.bound_bytes,
        "tp": list(s.tp), "pp": list(s.pp),
        "setup_seconds": s.report.setup_seconds,
        "prepared_s": s.prepared_s,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world", type=int, default=1)
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--pp", type=int, default=1)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--extra", default="{}")
    ap.add_argument("--out", required=True)
    ap.add_argument("--load-model", action="store_true",
                    help="weightlift's load through vLLM's load_model")
    a = ap.parse_args()
    vc = init_vllm(a.ckpt, extra=json.loads(a.extra), tp=a.tp, pp=a.pp)
    start_distributed(vc, a.rank, a.world, a.tp, a.pp, a.port)
    result = compare(vc, load_model=a.load_model)
    with open(a.out, "w") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
