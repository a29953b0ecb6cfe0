#!/usr/bin/env python3
"""The vLLM plugin's load path on a GPU, without vLLM (which the GPU machine
cannot install): weightlift.vllm.engine.load_model_weights, the function
WeightliftModelLoader.load_weights runs, streams a Llama-layout checkpoint
into a model whose parameters are laid out as vLLM lays them out for one
tensor-parallel rank (q/k/v fused into qkv_proj, gate/up into gate_up_proj,
column-parallel weights split on dim 0, row-parallel ones on dim 1, the
vocabulary split on dim 0), through a load_weights that narrows and copies
as vLLM's weight loaders do.

Compared in the same process, same model, same consumer:
  default   what vLLM's DefaultModelLoader feeds load_weights for
            safetensors: safetensors.safe_open(framework="pt") per file,
            get_tensor() on cpu (the weight loaders copy to the GPU)
  plugin    weightlift.vllm.engine.load_model_weights (bounded stream of
            GPU tensors in file order)
  ceiling   one pinned host-to-device copy of the rank's bytes
Every run checks that both give the same parameters, bit for bit. Reports
seconds, GB/s (the whole checkpoint's bytes over the time, whatever this
rank read), and the peak extra GPU memory
beyond the parameters (torch's allocator peak; the plugin's stream also
reports its own count and bound).

  python3 bench/vllm_plugin.py CKPT_DIR [--tp-size N --tp-rank R]
      [--mode warm|cold] [--runs 3] [--window 512MiB] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time

import torch

from bench_common import evict

_LAYER = re.compile(r"^(.*\.layers\.\d+\.)(self_attn|mlp)\.(\w+)\.weight$")
_FUSED = {"q_proj": ("qkv_proj", 0), "k_proj": ("qkv_proj", 1),
          "v_proj": ("qkv_proj", 2), "gate_proj": ("gate_up_proj", 0),
          "up_proj": ("gate_up_proj", 1)}
_ROW = ("o_proj", "down_proj")


def _split(n: int, tp: int, name: str) -> int:
    if n % tp:
        sys.exit(f"{name}: {n} rows do not split over {tp} ranks")
    return n // tp


class VllmLayoutModel(torch.nn.Module):
    """Parameters as vLLM allocates them for rank R of N; load_weights
    consumes (name, tensor) as vLLM's Llama does."""

    def __init__(self, infos, tp_rank: int, tp_size: int, device):
        super().__init__()
        self.rank, self.tp = tp_rank, tp_size
        self.slots = {}   # ckpt name -> (param name, dim, fused offset)
        shapes = {}       # param name -> [shape], dtype
        for name, dt, shape, *_ in infos:
            shape = list(shape)
            m = _LAYER.match(name)
            if m and m.group(3) in _FUSED:
                pname = m.group(1) + m.group(2) + "." + \
                    _FUSED[m.group(3)][0] + ".weight"
                rows = _split(shape[0], tp_size, name)
                cur = shapes.setdefault(pname, [[0] + shape[1:], dt])
                self.slots[name] = (pname, 0, cur[0][0])
                cur[0][0] += rows
            elif m and m.group(3) in _ROW:
                shapes[name] = [[shape[0], _split(shape[1], tp_size, name)],
                                dt]
                self.slots[name] = (name, 1, 0)
            elif len(shape) == 2 and ("embed" in name or "lm_head" in name):
                shapes[name] = [[_split(shape[0], tp_size, name), shape[1]],
                                dt]
                self.slots[name] = (name, 0, 0)
            else:
                shapes[name] = [shape, dt]
                self.slots[name] = (name, None, 0)
        from weightlift import _dtypes
        for pname, (shape, dt) in shapes.items():
            tdt, _ = _dtypes.torch_layout(dt, shape)
            self.register_parameter(
                pname.replace(".", "__"),
                torch.nn.Parameter(torch.empty(shape, dtype=tdt,
                                               device=device),
                                   requires_grad=False))

    def slices(self):
        """(tp_plan, {name: parameter}) of the row-parallel weights that map
        one-to-one to a checkpoint tensor (o_proj, down_proj): what the
        plugin's selection.plan_slices finds in a vLLM Llama."""
        import glob
        direct = {name: self.param(pname) for name, (pname, dim, _) in
                  self.slots.items() if dim == 1 and pname == name}
        return {glob.escape(n): "rowwise" for n in direct}, direct

    def param(self, pname):
        return getattr(self, pname.replace(".", "__"))

    def load_weights(self, weights):
        loaded = set()
        for name, w in weights:
            pname, dim, off = self.slots[name]
            p = self.param(pname).data
            if dim is None:
                p.copy_(w)
            elif pname != name:  # fused: this rank's rows at OFF
                rows = w.shape[0] // self.tp
                p.narrow(0, off, rows).copy_(
                    w.narrow(0, self.rank * rows, rows))
            else:
                n = p.shape[dim]
                p.copy_(w.narrow(dim, self.rank * n, n))
            loaded.add(pname)
        return loaded


def default_weights(files):
    """What vLLM's default loader yields for safetensors files."""
    from safetensors import safe_open
    for f in files:
        with safe_open(f, framework="pt") as st:
            for name in st.keys():
                yield name, st.get_tensor(name)


def param_bytes(model):
    return sum(p.numel() * p.element_size() for p in model.parameters())


def timed(model, fn, device):
    """(seconds, peak extra device memory, FN's result); on cpu (a smoke
    test of this script) the peak is not measured: 0."""
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
    t0 = time.perf_counter()
    extra = fn()
    if cuda:
        torch.cuda.synchronize(device)
    dt = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated(device) - base if cuda else 0
    return dt, peak, extra


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ckpt")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--tp-size", type=int, default=1)
    ap.add_argument("--tp-rank", type=int, default=0)
    ap.add_argument("--mode", choices=("warm", "cold"), default="warm")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--window", default="512MiB")
    ap.add_argument("--methods", default="default,plugin")
    ap.add_argument("--no-slices", dest="slices", action="store_false",
                    help="under TP, read o_proj/down_proj whole (default: "
                    "this rank's slice, as the plugin does in vLLM)")
    ap.add_argument("--json")
    args = ap.parse_args()

    import weightlift
    from weightlift.vllm.engine import load_model_weights
    from weightlift.vllm.options import parse

    device = torch.device(args.device)
    torch.empty(1, device=device)  # CUDA context before any clock
    ckpt = weightlift._core.open_checkpoint(args.ckpt)
    infos = ckpt.tensors()
    files = sorted({f["resolved_path"] or f["path"] for f in ckpt.files()})
    total = ckpt.total_bytes
    opts = parse({"window": args.window})
    print(f"checkpoint {args.ckpt}: {len(infos)} tensors, {total / 1e9:.2f} "
          f"GB in {len(files)} files; rank {args.tp_rank} of {args.tp_size};"
          f" {args.mode}; window {args.window}")

    model = VllmLayoutModel(infos, args.tp_rank, args.tp_size, device)
    slices = model.slices() if args.slices else ({}, {})
    pbytes = param_bytes(model)
    print(f"parameters of this rank: {pbytes / 1e9:.2f} GB on {device}")

    # Ceiling: one pinned copy of the rank's parameter bytes.
    cuda = device.type == "cuda"
    host = torch.empty(pbytes, dtype=torch.uint8, pin_memory=cuda)
    dev = torch.empty(pbytes, dtype=torch.uint8, device=device)
    for _ in range(2):  # the first copy warms up; the second is timed
        t0 = time.perf_counter()
        dev.copy_(host, non_blocking=True)
        if cuda:
            torch.cuda.synchronize(device)
    ceiling = pbytes / (time.perf_counter() - t0) / 1e9
    del host, dev
    if cuda:
        torch.cuda.empty_cache()
    print(f"ceiling: pinned host-to-device copy of {pbytes / 1e9:.2f} GB: "
          f"{ceiling:.1f} GB/s")

    reference = None
    results = {"ckpt": args.ckpt, "bytes": total, "tp_size": args.tp_size,
               "tp_rank": args.tp_rank, "mode": args.mode,
               "window": args.window, "param_bytes": pbytes,
               "ceiling_gb_per_s": ceiling, "runs": []}
    methods = args.methods.split(",")
    for run in range(args.runs):
        # Rotate the order so no method always runs first (cold disks
        # drift between minutes).
        order = methods[run % len(methods):] + methods[:run % len(methods)]
        for method in order:
            if args.mode == "cold":
                evict(files)
            for p in model.parameters():
                p.data.zero_()
            if method == "default":
                dt, peak, extra = timed(
                    model, lambda: model.load_weights(default_weights(files)),
                    device)
                line = ""
            else:
                dt, peak, extra = timed(
                    model, lambda: load_model_weights(
                        model, args.ckpt, opts, model.load_weights,
                        tp=(args.tp_rank, args.tp_size),
                        slices=slices)[1], device)
                s = extra
                line = (f" {s.sliced} sliced; rank read "
                        f"{s.report.bytes_read / 1e9:.2f} GB;"
                        f" stream peak {s.peak_bytes / 2**20:.0f} MiB "
                        f"(bound {s.bound_bytes / 2**20:.0f} MiB); "
                        f"weightlift report {s.report.gb_per_s:.1f} GB/s; "
                        + "; ".join(f"{os.path.basename(f.path)}: "
                                    f"{f.path_taken}" for f in s.report.files))
            rate = total / dt / 1e9
            state = {n: p.detach().clone() for n, p in
                     model.named_parameters()} if reference is None else None
            same = True
            if reference is None:
                reference = state
            else:
                same = all(torch.equal(p, reference[n])
                           for n, p in model.named_parameters())
            print(f"run {run} {method:8s} {dt:7.3f} s {rate:6.2f} GB/s "
                  f"({rate / ceiling:.2f}x ceiling) peak extra GPU "
                  f"{peak / 2**20:8.1f} MiB; params "
                  f"{'equal' if same else 'DIFFER'}{line}", flush=True)
            results["runs"].append({"run": run, "method": method,
                                    "seconds": dt, "gb_per_s": rate,
                                    "peak_extra_bytes": peak,
                                    "params_equal": same})
            if not same:
                sys.exit("parameters differ between methods")
    for method in methods:
        rs = [r for r in results["runs"] if r["method"] == method]
        best = min(rs, key=lambda r: r["seconds"])
        print(f"best {method:8s} {best['seconds']:.3f} s "
              f"{best['gb_per_s']:.2f} GB/s, peak extra GPU "
              f"{max(r['peak_extra_bytes'] for r in rs) / 2**20:.1f} MiB")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
