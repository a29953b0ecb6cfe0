"""The first load of a fresh process, end to end (issue 13).

    python3 bench/first_call.py DIR [--device cuda:0] [--calls 3]

Run once per fresh process: creates the CUDA context (and measures the
pinned host-to-device copy ceiling, 4 GiB) before the clock starts, then
times weightlift.load_checkpoint(DIR, device=DEV) CALLS times, each
synchronized, and prints per call the wall time, GB/s, the ratio to the
ceiling and the report's own accounting of the call (setup: loader
creation with its staging, registration and threads; open; allocation;
transfer). The first call is the one a new user times.
"""

import argparse
import json
import time

import torch

import weightlift


def pinned_ceiling(device, nbytes=4 << 30):
    src = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    dst = torch.empty(nbytes, dtype=torch.uint8, device=device)
    best = 1e9
    for _ in range(3):
        torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        dst.copy_(src, non_blocking=True)
        torch.cuda.synchronize(device)
        best = min(best, time.perf_counter() - t0)
    del src, dst
    torch.cuda.empty_cache()
    return nbytes / best / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--calls", type=int, default=3)
    a = ap.parse_args()
    torch.empty(1, device=a.device)  # the CUDA context, before the clock
    ceiling = pinned_ceiling(a.device)
    print(f"pinned host->device ceiling: {ceiling:.1f} GB/s")
    rows = []
    for call in range(1, a.calls + 1):
        torch.cuda.synchronize(a.device)
        t0 = time.perf_counter()
        sd = weightlift.load_checkpoint(a.dir, device=a.device)
        torch.cuda.synchronize(a.device)
        dt = time.perf_counter() - t0
        r = weightlift.last_report()
        nbytes = sum(t.numel() * t.element_size() for t in sd.values())
        gbps = nbytes / dt / 1e9
        setup = getattr(r, "setup_seconds", None)
        print(f"call {call}: {dt:.3f} s end to end, {gbps:.1f} GB/s = "
              f"{gbps / ceiling:.2f}x the ceiling; report: seconds "
              f"{r.seconds:.3f} (setup "
              f"{setup if setup is None else round(setup, 3)}, open "
              f"{r.open_seconds:.3f}, alloc {r.alloc_seconds:.3f}, transfer "
              f"{r.transfer_seconds:.3f})")
        rows.append({"call": call, "seconds": dt, "gb_per_s": gbps,
                     "ratio": gbps / ceiling, "report": r.__dict__.get(
                         "_text", str(r))})
        del sd
    print(json.dumps({"ceiling_gb_per_s": ceiling, "calls": rows}))


if __name__ == "__main__":
    main()
