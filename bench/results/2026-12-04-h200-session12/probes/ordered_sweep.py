"""The ordered staging ring (probe, session 12, branch s12-probe): later
calls of load_checkpoint(DIR, device="cuda:0") with each configuration, in
one process, configurations interleaved round by round, against the
pinned-copy ceiling measured after. WL_PROBE_GROUP=G (read when a loader is
made) switches a loader to one ring shared in plan order, copied G slots at
a time; each configuration gets its own cached loader through a distinct,
otherwise unused option (queue_depth: io_uring only; these files are in the
page cache, so they are read with pread). Round 0 (each loader's first call)
checks every tensor of each configuration against the default's, on the GPU.

    python3 ordered_sweep.py DIR [ROUNDS]
"""
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, "bench")
from ceiling import pinned_copy_ceiling  # noqa: E402

import weightlift  # noqa: E402

M = 1 << 20
CONFIGS = [  # name, group (None: per-worker slots, today's), options
    ("per-worker 12 x 4M x 2 (default)", None, {}),
    ("ordered G=1, 4M (no merging)", 1, dict(queue_depth=31)),
    ("ordered G=2, 4M (8M copies)", 2, dict(queue_depth=32)),
    ("ordered G=4, 4M (16M copies)", 4, dict(queue_depth=34)),
    ("ordered G=6, 2M (12M copies)", 6, dict(queue_depth=26, cuda_chunk=2 * M)),
    ("ordered G=12, 2M (24M copies)", 12, dict(queue_depth=212, cuda_chunk=2 * M)),
]


def main():
    d = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    torch.empty(1, device="cuda:0")
    got = {name: [] for name, _, _ in CONFIGS}
    ref = None
    for r in range(rounds + 1):
        for name, group, opts in CONFIGS:
            if group is None:
                os.environ.pop("WL_PROBE_GROUP", None)
            else:
                os.environ["WL_PROBE_GROUP"] = str(group)
            sd = None
            torch.cuda.synchronize()
            t = time.perf_counter()
            sd = weightlift.load_checkpoint(d, device="cuda:0", **opts)
            torch.cuda.synchronize()
            wall = time.perf_counter() - t
            rep = sd.report
            if r:
                got[name].append((wall, rep.transfer_seconds, rep.bytes))
                continue
            notes = [n for n in rep.notes if "PROBE" in n]
            if group is None:
                ref = {k: v for k, v in sd.items()}
                print(f"{name}: reference kept; {notes}", flush=True)
            else:
                bad = [k for k, v in sd.items() if not torch.equal(v, ref[k])]
                print(f"{name}: {len(sd)} tensors, {len(bad)} differ from the "
                      f"default's {bad[:3]}; {notes}", flush=True)
                if bad:
                    sys.exit(1)
    sd = ref = None
    torch.cuda.empty_cache()
    ceiling = pinned_copy_ceiling(torch.device("cuda:0"), 4 << 30)
    print(f"ceiling {ceiling:.1f} GB/s; {rounds} later calls each, "
          f"configurations interleaved")
    for name, _, _ in CONFIGS:
        walls = [w for w, _, _ in got[name]]
        xfer = [x for _, x, _ in got[name]]
        nb = got[name][0][2]
        print(f"{name:34s} wall median {statistics.median(walls) * 1e3:6.1f} "
              f"ms ({nb / statistics.median(walls) / 1e9 / ceiling:.3f}x), "
              f"best {min(walls) * 1e3:6.1f}; transfer median "
              f"{nb / statistics.median(xfer) / 1e9:5.1f} GB/s, range "
              f"{nb / max(xfer) / 1e9:5.1f}-{nb / min(xfer) / 1e9:5.1f}")


main()
