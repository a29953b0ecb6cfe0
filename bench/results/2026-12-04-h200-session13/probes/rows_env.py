"""Row runs with software prefetch inside the loader (probe, session 13).
Rank 0 of 8 (Llama plan, and every tensor rowwise), later calls interleaved
round by round in one process, under each setting of the probe knobs that
branch s13-probe reads in CopyRows (SET=pf: WL_PROBE_ROWS_PF rows ahead,
WL_PROBE_ROWS_PFL lines of that row, 0 = all; SET=store: how a row is
written, and a mapping kept across calls). Round 0 checks each
setting's tensors against the first setting's. Lines: transfer and wall
medians per setting.

    python3 rows_pf.py DIR [ROUNDS]
"""
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.getcwd(), "tests", "python"))
from tp_reference import LLAMA_PLAN  # noqa: E402

import weightlift  # noqa: E402

KNOBS = ("WL_PROBE_ROWS_PF", "WL_PROBE_ROWS_PFL", "WL_PROBE_ROWS_STORE",
         "WL_PROBE_ROWS_KEEPMAP")
SETS = {
    "pf": [("off", {}), ("pf2", {"WL_PROBE_ROWS_PF": "2"}),
           ("pf4", {"WL_PROBE_ROWS_PF": "4"}),
           ("pf8", {"WL_PROBE_ROWS_PF": "8"}),
           ("pf4,2 lines", {"WL_PROBE_ROWS_PF": "4",
                            "WL_PROBE_ROWS_PFL": "2"})],
    "store": [("off", {}), ("nt", {"WL_PROBE_ROWS_STORE": "nt"}),
              ("movsb", {"WL_PROBE_ROWS_STORE": "movsb"}),
              ("bounce", {"WL_PROBE_ROWS_STORE": "bounce"}),
              ("keepmap", {"WL_PROBE_ROWS_KEEPMAP": "1"})],
}
SETTINGS = SETS[os.environ.get("SET", "pf")]
PLANS = [("n=8 llama", LLAMA_PLAN), ("n=8 rowwise", {"*": "rowwise"}),
         ("n=4 llama", LLAMA_PLAN)]


def main():
    global DEV
    d = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    DEV = os.environ.get("DEV", "cuda:0")
    if DEV != "cpu":
        torch.empty(1, device=DEV)
    got = {}
    ref = {}
    for r in range(rounds + 1):
        for pname, plan in PLANS:
            n = int(pname[2])
            for sname, env in SETTINGS:
                for k in KNOBS:
                    os.environ.pop(k, None)
                os.environ.update(env)
                DEV != "cpu" and torch.cuda.synchronize()
                t = time.perf_counter()
                sd = weightlift.load_checkpoint(d, device=DEV, tp_rank=0,
                                                tp_size=n, tp_plan=plan)
                DEV != "cpu" and torch.cuda.synchronize()
                wall = time.perf_counter() - t
                nb = sum(v.numel() * v.element_size() for v in sd.values())
                if r == 0:
                    if pname not in ref:
                        ref[pname] = sd
                    else:
                        same = all(torch.equal(sd[k], ref[pname][k])
                                   for k in ref[pname])
                        print(f"{pname} {sname}: bit-exact vs off: {same}",
                              flush=True)
                else:
                    got.setdefault((pname, sname), []).append(
                        (wall, sd.report.transfer_seconds, nb))
                sd = None
        if r == 0:
            ref = {}
    for (pname, sname), v in got.items():
        w = statistics.median(x[0] for x in v)
        x = statistics.median(x[1] for x in v)
        nb = v[0][2]
        print(f"{pname:12s} {sname:12s} transfer {x * 1e3:6.1f} ms = "
              f"{nb / x / 1e9:5.1f} GB/s (range "
              f"{nb / max(t[1] for t in v) / 1e9:5.1f}-"
              f"{nb / min(t[1] for t in v) / 1e9:5.1f}); wall {w * 1e3:6.1f} ms"
              f" = {nb / w / 1e9:5.1f} GB/s")


main()
