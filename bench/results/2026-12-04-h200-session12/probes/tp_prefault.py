"""Row runs with their pages mapped ahead of the readers (probe, session 12,
call F): prefault_threads=-1 (none, as before) against 0 (automatic: the
idle cores, at most 4). Below, the rest of call E's description still holds.
Why is a TP rank's transfer slower per byte than a whole load? Rank 0 of n with three plans, later calls interleaved round by
round in one process: transformers' Llama plan (colwise q/k/v/gate/up,
rowwise o/down: 64 tensors read as row runs, gathered from a mapping of
the page cache); every tensor colwise (each rank slice one contiguous
range: no row runs); every tensor rowwise (row runs everywhere, 1-D
tensors replicated). Each line: bytes delivered, wall and transfer medians,
GB/s of both. If all-colwise runs at the whole load's transfer rate and the
Llama plan does not, the row-run gathers cost the difference; if neither
does, it is the rank's size (pipeline start and end, fixed costs).

    python3 tp_prefault.py DIR [ROUNDS]
"""
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.getcwd(), "tests", "python"))
from tp_reference import LLAMA_PLAN  # noqa: E402

import weightlift  # noqa: E402

CONFIGS = [
    ("n=8 Llama plan, none", 8, LLAMA_PLAN, -1),
    ("n=8 Llama plan, auto", 8, LLAMA_PLAN, 0),
    ("n=8 all rowwise, none", 8, {"*": "rowwise"}, -1),
    ("n=8 all rowwise, auto", 8, {"*": "rowwise"}, 0),
    ("n=4 Llama plan, none", 4, LLAMA_PLAN, -1),
    ("n=4 Llama plan, auto", 4, LLAMA_PLAN, 0),
    ("n=2 Llama plan, none", 2, LLAMA_PLAN, -1),
    ("n=2 Llama plan, auto", 2, LLAMA_PLAN, 0),
]


def main():
    d = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    torch.empty(1, device="cuda:0")
    got = {name: [] for name, _, _, _ in CONFIGS}
    for r in range(rounds + 1):
        for name, n, plan, pf in CONFIGS:
            sd = None
            kw = dict(tp_rank=0, tp_size=n, tp_plan=plan, prefault_threads=pf)
            torch.cuda.synchronize()
            t = time.perf_counter()
            sd = weightlift.load_checkpoint(d, device="cuda:0", **kw)
            torch.cuda.synchronize()
            wall = time.perf_counter() - t
            rep = sd.report
            nb = sum(v.numel() * v.element_size() for v in sd.values())
            if r:
                got[name].append((wall, rep.transfer_seconds, nb))
            else:
                print(f"{name}: {[x for x in rep.notes if 'row runs:' in x]}",
                      flush=True)
    sd = None
    for name, _, _, _ in CONFIGS:
        walls = [w for w, _, _ in got[name]]
        xfer = [x for _, x, _ in got[name]]
        nb = got[name][0][2]
        w, x = statistics.median(walls), statistics.median(xfer)
        print(f"{name:26s} {nb / 1e9:6.3f} GB: wall median {w * 1e3:6.1f} ms "
              f"= {nb / w / 1e9:5.1f} GB/s; transfer median {x * 1e3:6.1f} ms "
              f"= {nb / x / 1e9:5.1f} GB/s (range {nb / max(xfer) / 1e9:5.1f}-"
              f"{nb / min(xfer) / 1e9:5.1f}); wall - transfer {(w - x) * 1e3:4.1f} ms")


main()
