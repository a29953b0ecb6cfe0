#!/usr/bin/env python3
"""Many small loads in one process: the cost per call of a small checkpoint.

Loads one small checkpoint (default: `weightlift synth --layout tiny`, a few
MB, one file) N times in a row into host memory, through

  weightlift.torch.load_file    (the package keeps its loader, whose cache
                                of freed host destinations serves the call)
  the same after weightlift.release_cached_loaders()   (a new loader, with
                                an empty cache, for every call)
  safetensors.torch.load_file

interleaved call by call, after one untimed warm-up call each, files in the
page cache. Prints milliseconds per call (median, min-max) for each.

  PYTHONPATH=build/python .venv/bin/python bench/small_loads.py --calls 20
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--file", default=None,
                    help="a .safetensors file (default: synthesize tiny)")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "weightlift"))
    args = ap.parse_args()

    import safetensors.torch
    import torch
    import weightlift
    import weightlift.torch

    path = args.file
    if path is None:
        tmp = tempfile.mkdtemp(prefix="wl-small-")
        subprocess.run([args.cli, "synth", "--layout", "tiny", tmp],
                       check=True, stdout=subprocess.DEVNULL)
        path = os.path.join(tmp, "model.safetensors")
    size = os.path.getsize(path)

    def touch(d):  # safetensors hands out lazily mapped tensors: read them
        return sum(int(t.reshape(-1).view(torch.uint8)[::4096].sum())
                   for t in d.values() if t.numel())

    methods = {
        "weightlift load_file (kept loader)":
            lambda: weightlift.torch.load_file(path),
        "weightlift load_file, new loader each call":
            lambda: (weightlift.release_cached_loaders(),
                     weightlift.torch.load_file(path))[1],
        "safetensors load_file":
            lambda: safetensors.torch.load_file(path),
    }
    times = {name: [] for name in methods}
    for fn in methods.values():  # warm-up: page cache, loaders, imports
        touch(fn())
    for _ in range(args.calls):
        for name, fn in methods.items():
            t = time.perf_counter()
            d = fn()
            touch(d)
            times[name].append((time.perf_counter() - t) * 1e3)
            del d

    print(f"# {args.calls} calls each, interleaved; {path} "
          f"({size / 2**20:.2f} MiB); {platform.node()}, "
          f"{os.cpu_count()} cpus, weightlift {weightlift.__version__}, "
          f"safetensors {safetensors.__version__}, torch {torch.__version__}")
    print(f"$ {' '.join([os.path.basename(sys.executable)] + sys.argv)}")
    for name, ts in times.items():
        print(f"{name:48s} median {statistics.median(ts):7.3f} ms  "
              f"min {min(ts):7.3f}  max {max(ts):7.3f}")


if __name__ == "__main__":
    main()
