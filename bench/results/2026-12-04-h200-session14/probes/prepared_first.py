"""Session 14 probe: a TP rank's first load_checkpoint in a fresh process,
with (MODE=prepared) or without (MODE=fresh) its loader made beforehand
(weightlift.prepare; its workers pin their ring right away). Then two later calls. Rank 0 of N,
Llama's plan. WL_PROBE_TL=1 prints the probe branch's timelines.

    python3 prepared_first.py CKPT N MODE
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "..", "tests", "python"))
from tp_reference import LLAMA_PLAN  # noqa: E402

ckpt, n, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
import torch  # noqa: E402
torch.cuda.set_device(0)
torch.empty(1, device="cuda:0")
import compileall  # noqa: E402
import weightlift  # noqa: E402
compileall.compile_dir(os.path.dirname(weightlift.__file__), quiet=1)
import weightlift._tp  # noqa: E402,F401 - as a server that loaded before
if mode == "prepared":
    t = time.perf_counter()
    # Call A (branch s14-probe) made it with weightlift._core.check_options,
    # which is what weightlift.prepare (main) does, bar the setup's report.
    if hasattr(weightlift, "prepare"):
        weightlift.prepare("cuda:0")
    else:
        weightlift._core.check_options({"device": "cuda:0"})
    made = time.perf_counter() - t
    time.sleep(0.3)  # what a model's construction would give the workers
    print(f"prepared: loader made in {made * 1e3:.2f} ms, then 300 ms idle")
for call in range(3):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    sd = weightlift.load_checkpoint(ckpt, device="cuda:0", tp_rank=0,
                                    tp_size=n, tp_plan=LLAMA_PLAN)
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    b = sum(t.numel() * t.element_size() for t in sd.values())
    r = sd.report
    print(f"n={n} {mode} call {call}: wall {(t1 - t0) * 1e3:.1f} ms = "
          f"{b / (t1 - t0) / 1e9:.2f} GB/s; report {r.seconds * 1e3:.1f} "
          f"(setup {r.setup_seconds * 1e3:.1f}, open {r.open_seconds * 1e3:.1f},"
          f" alloc {r.alloc_seconds * 1e3:.1f}, transfer "
          f"{r.transfer_seconds * 1e3:.1f})", flush=True)
    del sd
