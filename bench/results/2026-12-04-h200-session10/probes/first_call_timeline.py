"""Where a first call's time goes beyond the report's phases (probe, session
10): wraps the Python steps of weightlift.load_checkpoint with timestamps
(on whichever thread runs them) and prints them against the report.

    python3 first_call_timeline.py DIR [CALLS [TP_SIZE]]

With TP_SIZE, rank 0 of TP_SIZE in slice mode (tests/python/tp_reference's
LLAMA_PLAN).
"""
import importlib
import os
import sys
import threading
import time

import torch

import weightlift
from weightlift import _core, _load_torch, _native

T0 = [0.0]
EVENTS = []


def wrap(mod, name):
    f = getattr(mod, name)

    def g(*a, **k):
        s = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            e = time.perf_counter()
            EVENTS.append((s - T0[0], e - T0[0], name,
                           threading.current_thread().name))
    setattr(mod, name, g)


for m, n in [(_native, "Loader"), (_core, "open_checkpoint"),
             (_core, "validate_options"), (_load_torch, "_layout"),
             (_load_torch, "_block"), (_load_torch, "_views"),
             (_core, "wait"), (_load_torch, "open_beside_loader"),
             (_load_torch, "load"), (_native, "tp_requests")]:
    wrap(m, n)


def main():
    d = sys.argv[1]
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    tp = {}
    if len(sys.argv) > 3:
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                        "..", "..", "tests", "python"))
        from tp_reference import LLAMA_PLAN
        tp = dict(tp_rank=0, tp_size=int(sys.argv[3]), tp_plan=LLAMA_PLAN)
        importlib.import_module("weightlift._tp")  # as tp_bench does
    torch.empty(1, device="cuda:0")
    torch.cuda.synchronize()
    for c in range(calls):
        EVENTS.clear()
        torch.cuda.synchronize()
        T0[0] = time.perf_counter()
        sd = weightlift.load_checkpoint(d, device="cuda:0", **tp)
        torch.cuda.synchronize()
        wall = time.perf_counter() - T0[0]
        r = sd.report
        print(f"call {c}: wall {wall * 1e3:.1f} ms; report {r.seconds * 1e3:.1f}"
              f" (setup {r.setup_seconds * 1e3:.1f}, open "
              f"{r.open_seconds * 1e3:.1f}, alloc {r.alloc_seconds * 1e3:.1f}, "
              f"transfer {r.transfer_seconds * 1e3:.1f})")
        for s, e, name, th in sorted(EVENTS):
            print(f"   {s * 1e3:8.2f} -> {e * 1e3:8.2f} ms  {e * 1e3 - s * 1e3:7.2f}"
                  f"  {name:20s} [{th}]")
        for n in r.notes:
            if n.startswith(("setup", "python", "staging ring pinned")):
                print("   ", n)
        del sd


main()
