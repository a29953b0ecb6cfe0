#!/usr/bin/env python3
"""Per-call cost of safe_open(...).get_tensor(name) on cpu, weightlift
against safetensors, in the same run.

Users loop over get_tensor for every tensor of a file, so a call must cost
what it costs in safetensors. Measured with the handle open and the file in
the page cache, for one tiny (16 B), one 1 MiB and one 64 MiB tensor, and
for the loop over every tensor of a synthetic checkpoint
(`weightlift synth --layout tiny` unless --checkpoint is given):

  pt           safe_open(framework="pt"): weightlift's default on cpu is a
               view of the handle's private mapping, as safetensors
  pt copy      weightlift zero_copy=False: read on the calling thread
  pt job       weightlift backend="pread": the same request through a
               loader job (the path every call took before the per-call
               path; shown for scale)
  np           safe_open(framework="np"): a copy in both

Each figure is the median over --calls calls (one untimed warm-up call
first); each weightlift way and the safetensors way it stands in for are
interleaved call by call (pairs, so one slow path does not cool the
caches of the others). "call" times get_tensor alone;
"+touch" also reads one byte of every 4 KiB page of the result, so a lazily
mapped tensor pays for its page faults inside the timing. Then
get_slice(name)[1000:2000] of the 1 MiB and 64 MiB tensors. Ratios are
weightlift's time over safetensors' (below 1: weightlift faster).

  PYTHONPATH=build/python .venv/bin/python bench/get_tensor_calls.py
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _touch(t):
    """Reads one byte of every page of T (torch tensor or numpy array)."""
    import torch
    if isinstance(t, torch.Tensor):
        t = t.reshape(-1).view(torch.uint8)
        return int(t[::4096].sum()) if t.numel() else 0
    b = t.reshape(-1).view("uint8")
    return int(b[::4096].sum()) if b.size else 0


def _times_us(fn, calls, touch):
    ts = []
    for _ in range(calls):
        t0 = time.perf_counter()
        x = fn()
        if touch:
            _touch(x)
        ts.append((time.perf_counter() - t0) * 1e6)
        del x
    return ts


def per_call(methods, calls, touch):
    """{method: [microseconds]} with the methods interleaved call by call."""
    out = {m: [] for m in methods}
    for fn in methods.values():  # warm-up
        _touch(fn())
    for _ in range(calls):
        for m, fn in methods.items():
            out[m] += _times_us(fn, 1, touch)
    return out


# Each weightlift way against the safetensors way it stands in for.
PAIRS = [("wl pt", "st pt"), ("wl pt copy", "st pt"), ("wl pt job", "st pt"),
         ("wl np", "st np")]


def main():
    tmp = tempfile.mkdtemp(prefix="wl-get-tensor-")
    try:
        run(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(tmp):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=200,
                    help="calls per tiny / 1 MiB figure (64 MiB: a tenth)")
    ap.add_argument("--loops", type=int, default=10,
                    help="passes over the whole checkpoint")
    ap.add_argument("--checkpoint", default=None,
                    help="a .safetensors file for the loop (default: synth)")
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "weightlift"))
    args = ap.parse_args()

    import ml_dtypes  # noqa: F401 - numpy's bfloat16 (the synth layouts)
    import numpy as np
    import safetensors
    import torch
    from safetensors.torch import save_file

    import weightlift

    sizes = {"tiny 16 B": 4, "1 MiB": 2**18, "64 MiB": 2**24}
    path = os.path.join(tmp, "sizes.safetensors")
    save_file({k: torch.arange(n, dtype=torch.float32)
               for k, n in sizes.items()}, path)
    ckpt = args.checkpoint
    if ckpt is None:
        subprocess.run([args.cli, "synth", "--layout", "tiny", tmp],
                       check=True, stdout=subprocess.DEVNULL)
        ckpt = os.path.join(tmp, "model.safetensors")
    for p in (path, ckpt):  # into the page cache
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass

    print(f"# {platform.node()}, {os.cpu_count()} cpus, load "
          f"{os.getloadavg()[0]:.1f}; weightlift {weightlift.__version__}, "
          f"safetensors {safetensors.__version__}, torch {torch.__version__}, "
          f"numpy {np.__version__}")
    print(f"$ {' '.join([os.path.basename(sys.executable)] + sys.argv)}")
    print("# per call, median microseconds (min-max); ratio = weightlift / "
          "safetensors")

    def handles(p):
        return {
            "wl pt": weightlift.safe_open(p, "pt"),
            "wl pt copy": weightlift.safe_open(p, "pt", zero_copy=False),
            "wl pt job": weightlift.safe_open(p, "pt", backend="pread"),
            "st pt": safetensors.safe_open(p, "pt"),
            "wl np": weightlift.safe_open(p, "np"),
            "st np": safetensors.safe_open(p, "np"),
        }

    # What the default path did, for the record (path taken, threads).
    h = weightlift.safe_open(path, "pt")
    h.get_tensor("1 MiB")
    r = weightlift.last_report()
    print(f"# weightlift pt default: path {r.files[0].path_taken}, "
          f"threads {r.threads}, bytes read {r.bytes_read}")

    def fmt(ts):
        return (f"{statistics.median(ts):10.1f} ({min(ts):.1f}-"
                f"{max(ts):.1f})")

    def show(title, res, count=1):
        """One comparison: weightlift's method against safetensors'."""
        (wl, wts), (st, sts) = res.items()
        ratio = statistics.median(wts) / statistics.median(sts)
        per = ""
        if count > 1:
            per = (f"   per tensor {statistics.median(wts) / count:.1f} / "
                   f"{statistics.median(sts) / count:.1f}")
        print(f"{title:34s} {wl:11s} {fmt(wts)}   {st:6s} {fmt(sts)}   "
              f"ratio {ratio:5.2f}{per}")

    hs = handles(path)
    for name in sizes:
        n = args.calls if sizes[name] <= 2**18 else max(args.calls // 10, 5)
        print(f"\n## {name}: {n} calls of each, each pair interleaved")
        for touch in (False, True):
            for wl, st in PAIRS:
                methods = {m: (lambda f=hs[m], name=name: f.get_tensor(name))
                           for m in (wl, st)}
                show(f"{name}{' +touch' if touch else ''}",
                     per_call(methods, n, touch))

    # get_slice(name)[a:b] of 1000 elements of the 1 MiB and 64 MiB tensors.
    for name in ("1 MiB", "64 MiB"):
        print(f"\n## get_slice({name!r})[1000:2000]: {args.calls} calls of "
              f"each, each pair interleaved")
        for wl, st in PAIRS:
            methods = {m: (lambda f=hs[m], name=name:
                           f.get_slice(name)[1000:2000]) for m in (wl, st)}
            show(f"slice of {name}", per_call(methods, args.calls, False))

    # The loop over every tensor of the checkpoint, with a handle per pass
    # (open included, as a user's loop pays it).
    def loop(m):
        kw = {"wl pt copy": {"zero_copy": False},
              "wl pt job": {"backend": "pread"}}.get(m, {})
        opener = weightlift.safe_open if m.startswith("wl") else \
            safetensors.safe_open

        def run():
            with opener(ckpt, m.split()[1], **kw) as f:
                return [f.get_tensor(k) for k in f.keys()]
        return run

    with safetensors.safe_open(ckpt, "pt") as f:
        count = len(f.keys())
    print(f"\n## whole checkpoint {os.path.basename(ckpt)} ({count} tensors, "
          f"{os.path.getsize(ckpt) / 2**20:.2f} MiB): open + every "
          f"get_tensor, per pass, {args.loops} passes of each, each pair "
          f"interleaved; per tensor = median / {count}")
    for touch in (False, True):
        for wl, st in PAIRS:
            fns = {m: loop(m) for m in (wl, st)}
            out = {m: [] for m in fns}
            for fn in fns.values():
                fn()
            for _ in range(args.loops):
                for m, fn in fns.items():
                    t0 = time.perf_counter()
                    xs = fn()
                    if touch:
                        for x in xs:
                            _touch(x)
                    out[m].append((time.perf_counter() - t0) * 1e6)
                    del xs
            show(f"checkpoint{' +touch' if touch else ''}", out, count)


if __name__ == "__main__":
    main()
