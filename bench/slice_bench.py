"""Slices of one weight to a CUDA device: weightlift against safetensors.

    python3 bench/slice_bench.py [--dir DIR] [--device cuda:0] [--repeat 5]
                                 [--shape 4096 11008]

Writes DIR/slice.safetensors (a 4096 x 11008 bf16 weight, the Llama-2-7B
MLP shape, random data) once, keeps it in the page cache, then for a row
slice [1024:2048] and a column slice [:, 2752:5504] times, in the same
process and interleaved, synchronized:
  weightlift  safe_open(f, "pt", device=DEV).get_slice("w")[index]
  safetensors safe_open(f, "pt").get_slice("w")[index].to(DEV)
Best of REPEAT each; prints both, the ratio (issue 10 asks >= 5x) and
whether the bytes are equal, plus weightlift's report of the last call.
Next to both it prints the floor of this machine: the same bytes copied
from pinned host memory to the device in one cudaMemcpyAsync (best of
3 x REPEAT, same run), which no path through pinned staging can beat,
and each time as a multiple of it. --device cpu is a smoke run (no
host -> device hop, so no floor); --shape R C another weight (rows
[R/4:R/2], columns [C/4:C/2]), with its own file.
"""

import argparse
import os

import torch
import safetensors
import safetensors.torch

import weightlift

from bench_common import timed


def indices(rows, cols):
    """{label: index}: a row slice and a column slice, a quarter each."""
    r, c = (rows // 4, rows // 2), (cols // 4, cols // 2)
    return {f"row slice [{r[0]}:{r[1]}]": (slice(*r),),
            f"column slice [:, {c[0]}:{c[1]}]": (slice(None), slice(*c))}


def pinned_floor(nbytes, device, repeat):
    """Seconds of the fastest pinned host -> DEVICE copy of NBYTES."""
    src = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    src.fill_(1)
    dst = torch.empty(nbytes, dtype=torch.uint8, device=device)
    best = 1e9
    for _ in range(3 * repeat):
        dt, _ = timed(lambda: dst.copy_(src, non_blocking=True), device)
        best = min(best, dt)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/var/tmp/wl_slice")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--shape", type=int, nargs=2, default=(4096, 11008),
                    metavar=("ROWS", "COLS"))
    a = ap.parse_args()
    rows, cols = a.shape
    os.makedirs(a.dir, exist_ok=True)
    path = os.path.join(a.dir, "slice.safetensors" if (rows, cols) == (
        4096, 11008) else f"slice_{rows}x{cols}.safetensors")
    if not os.path.exists(path):
        g = torch.Generator().manual_seed(10)
        w = torch.randn(rows, cols, generator=g).to(torch.bfloat16)
        safetensors.torch.save_file({"w": w}, path)
    with open(path, "rb") as f:  # into the page cache
        while f.read(64 << 20):
            pass
    if a.device != "cpu":
        torch.empty(1, device=a.device)  # CUDA context before any clock
    print(f"file {path} ({os.path.getsize(path) / 1e6:.1f} MB, page cache); "
          f"device {a.device}; torch {torch.__version__}; safetensors "
          f"{safetensors.__version__}; best of {a.repeat}")
    ok = True
    for label, index in indices(rows, cols).items():
        best = {"weightlift": 1e9, "safetensors": 1e9}
        with weightlift.safe_open(path, "pt", device=a.device) as wf, \
                safetensors.safe_open(path, "pt") as sf:
            for _ in range(a.repeat):
                dt, got = timed(lambda: wf.get_slice("w")[index], a.device)
                best["weightlift"] = min(best["weightlift"], dt)
                dt, want = timed(
                    lambda: sf.get_slice("w")[index].to(a.device), a.device)
                best["safetensors"] = min(best["safetensors"], dt)
            report = weightlift.last_report()
        same = torch.equal(got.view(torch.int16), want.view(torch.int16))
        ok = ok and same
        nbytes = got.numel() * got.element_size()
        ratio = best["safetensors"] / best["weightlift"]
        if a.device == "cpu":  # a smoke run: no hop to a device
            floor, floor_text = None, "no floor on cpu"
        else:
            floor = pinned_floor(nbytes, a.device, a.repeat)
            floor_text = (f"floor (one pinned copy of the same bytes) "
                          f"{floor * 1e3:.2f} ms "
                          f"({nbytes / floor / 1e9:.2f} GB/s)")

        def show(t):
            return (f"{t * 1e3:.2f} ms ({nbytes / t / 1e9:.2f} GB/s"
                    + (f", {t / floor:.1f}x the floor)" if floor else ")"))
        print(f"{label}: {nbytes / 1e6:.1f} MB; {floor_text}; weightlift "
              f"{show(best['weightlift'])}, safetensors get_slice + .to "
              f"{show(best['safetensors'])}: "
              f"{ratio:.1f}x ({'>= 5x: met' if ratio >= 5 else '< 5x: NOT met'}"
              f"; 5x would be {best['safetensors'] / 5 * 1e3:.2f} ms)"
              f"; bytes {'equal' if same else 'DIFFER'}")
        print("  weightlift report: " + " | ".join(report.notes))
    if not ok:
        raise SystemExit("slices differ from safetensors")


if __name__ == "__main__":
    main()
