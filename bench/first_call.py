"""The first load of a fresh process, end to end (issue 13), and the calls
after it.

    python3 bench/first_call.py DIR [--device cuda:0] [--later free,free]
                                    [--alloc torch|native] [--json]
                                    [--prepared]

Run once per fresh process: makes the CUDA context before the clock starts,
then times weightlift.load_checkpoint(DIR, device=DEV), synchronized: the
first call, then one later call per word of --later, each after the
previous state dict was
  free   deleted right before the call,
  sleep  deleted, then 1 s of sleep (lets the driver finish whatever it does
         with freed device memory before the next call),
  keep   kept alive (the call gets new device memory).
--alloc native loads into the loader's own cudaMalloc (Loader::Load, the
way before torch's allocator was used). The pinned host-to-device copy
ceiling (bench/ceiling.py: 4 GiB, best of 3) is measured AFTER the calls,
so that nothing allocates or frees device memory before the first call. On
a cpu device (a smoke run) there is no ceiling and no ratio.

--prepared: before the clock, weightlift.prepare(DEV, checkpoint=DIR,
**opts) and 0.2 s of sleep, as a server that makes its loader and opens
its checkpoint while it builds its model (the vLLM plugin does); the first call is then not a fresh process's (issue 13
times that one), and the output says so.

Per call: wall time, GB/s, ratio to the ceiling, the report's accounting
(seconds, setup: loader creation; open; alloc; transfer) and the part of the
wall time the report does not cover (wall - report.seconds). The first call
is the one a new user times.
"""

import argparse
import gc
import json
import time

import torch
from ceiling import pinned_copy_ceiling  # bench/ceiling.py

import weightlift


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--later", default="free,free",
                    help="comma list of free / sleep / keep, one per call "
                         "after the first")
    ap.add_argument("--alloc", default="torch", choices=["torch", "native"])
    ap.add_argument("--calls", type=int, default=None,
                    help="(old form) CALLS - 1 later calls, each 'free'")
    ap.add_argument("--opt", action="append", default=[], metavar="K=V",
                    help="a load option for every call (ints as ints)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--prepared", action="store_true",
                    help="weightlift.prepare before the clock (a server)")
    a = ap.parse_args()
    opts = {}
    for kv in a.opt:
        k, v = kv.split("=", 1)
        opts[k] = int(v) if v.lstrip("-").isdigit() else v
    later = [w for w in a.later.split(",") if w]
    if a.calls is not None:
        later = ["free"] * (a.calls - 1)
    if a.alloc == "native":
        from weightlift import _load_torch
        _load_torch.ENABLED = False
    cuda = a.device.startswith("cuda")

    def sync():
        if cuda:
            torch.cuda.synchronize(a.device)

    torch.empty(1, device=a.device)  # the CUDA context, before the clock
    prepared = None
    if a.prepared:  # the loader made, its ring pinned, before the clock
        prepared = weightlift.prepare(a.device, checkpoint=a.dir, **opts)
        time.sleep(0.2)
    sync()
    rows, held, sd = [], [], None
    for call, how in enumerate(["first"] + later, 1):
        if how == "keep":
            held.append(sd)
        sd = None
        gc.collect()
        if how == "sleep":
            time.sleep(1.0)
        sync()
        t0 = time.perf_counter()
        sd = weightlift.load_checkpoint(a.dir, device=a.device, **opts)
        sync()
        dt = time.perf_counter() - t0
        r = weightlift.last_report()
        nbytes = sum(t.numel() * t.element_size() for t in sd.values())
        rows.append({"call": call, "before": how, "alloc": a.alloc,
                     "seconds": dt, "bytes": nbytes,
                     "report_seconds": r.seconds,
                     "setup": r.setup_seconds, "open": r.open_seconds,
                     "alloc_seconds": r.alloc_seconds,
                     "transfer": r.transfer_seconds,
                     "notes": [n for n in r.notes if "pinned" in n
                               or "python" in n or "setup" in n]})
    sd = None
    held.clear()
    gc.collect()
    # 0.0 on cpu (a smoke run: no host -> device hop, no ratio).
    ceiling = pinned_copy_ceiling(a.device, nbytes=4 << 30)
    made = ("" if prepared is None else
            f"; loader prepared before the clock (made in "
            f"{prepared * 1e3:.1f} ms), so call 1 is not a fresh process's")
    print(f"alloc={a.alloc} {' '.join(a.opt)}; pinned host->device ceiling "
          f"(after the calls): {ceiling:.1f} GB/s{made}")
    for x in rows:
        gbps = x["bytes"] / x["seconds"] / 1e9
        x["gb_per_s"] = gbps
        x["ratio"] = gbps / ceiling if ceiling else None
        ratio = f" = {gbps / ceiling:.2f}x the ceiling" if ceiling else ""
        print(f"call {x['call']} ({x['before']}): {x['seconds']:.3f} s end to "
              f"end, {gbps:.1f} GB/s{ratio}; "
              f"report {x['report_seconds']:.3f} s (setup {x['setup']:.4f}, "
              f"open {x['open']:.4f}, alloc {x['alloc_seconds']:.4f}, "
              f"transfer {x['transfer']:.3f} = "
              f"{x['bytes'] / max(x['transfer'], 1e-9) / 1e9:.1f} GB/s); "
              f"not in the "
              f"report {1e3 * (x['seconds'] - x['report_seconds']):.1f} ms")
        for n in x["notes"]:
            print("    " + n)
    if a.json:
        print(json.dumps({"ceiling_gb_per_s": ceiling, "calls": rows,
                          "prepared_seconds": prepared}))


if __name__ == "__main__":
    main()
