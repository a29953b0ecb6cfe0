"""Staging ring shapes and copy streams (probe, session 11): for each
(threads, cuda_chunk, staging, copy_streams) configuration, later calls of
load_checkpoint(DIR, device="cuda:0", ...) in one process, configurations
interleaved round by round, against the pinned-copy ceiling measured after.
The default (12 threads x 4 MiB x 2 on 16 cores) came from session 10's
sweep (staging_sweep.py there); this one asks whether fewer copy
streams (workers sharing streams) or a smaller ring do better.

    python3 staging_sweep2.py DIR [ROUNDS]
"""
import statistics
import sys
import time

import torch

sys.path.insert(0, "bench")
from ceiling import pinned_copy_ceiling  # noqa: E402

import weightlift  # noqa: E402

M = 1 << 20
CONFIGS = [
    ("12 x 4M x 2 (default)", {}),
    ("12 x 4M x 2, 1 stream", dict(copy_streams=1)),
    ("12 x 4M x 2, 2 streams", dict(copy_streams=2)),
    ("12 x 4M x 2, 4 streams", dict(copy_streams=4)),
    ("12 x 4M x 2, 6 streams", dict(copy_streams=6)),
    ("8 x 4M x 2", dict(threads=8, staging=64 * M)),
    ("10 x 4M x 2", dict(threads=10, staging=80 * M)),
    ("12 x 3M x 2", dict(threads=12, cuda_chunk=3 * M, staging=72 * M)),
    ("14 x 4M x 2", dict(threads=14, staging=112 * M)),
]


def main():
    d = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    torch.empty(1, device="cuda:0")
    got = {name: [] for name, _ in CONFIGS}
    sd = None
    for r in range(rounds + 1):  # round 0: each loader's first call
        for name, opts in CONFIGS:
            sd = None
            torch.cuda.synchronize()
            t = time.perf_counter()
            sd = weightlift.load_checkpoint(d, device="cuda:0", **opts)
            torch.cuda.synchronize()
            wall = time.perf_counter() - t
            rep = sd.report
            if r:
                got[name].append((wall, rep.transfer_seconds, rep.bytes))
    sd = None
    ceiling = pinned_copy_ceiling(torch.device("cuda:0"), 4 << 30)
    print(f"ceiling {ceiling:.1f} GB/s; {rounds} later calls each, "
          f"configurations interleaved")
    for name, _ in CONFIGS:
        walls = [w for w, _, _ in got[name]]
        xfer = [x for _, x, _ in got[name]]
        nb = got[name][0][2]
        print(f"{name:24s} wall median {statistics.median(walls) * 1e3:6.1f} "
              f"ms ({nb / statistics.median(walls) / 1e9 / ceiling:.3f}x), "
              f"best {min(walls) * 1e3:6.1f}; transfer median "
              f"{nb / statistics.median(xfer) / 1e9:5.1f} GB/s, range "
              f"{nb / max(xfer) / 1e9:5.1f}-{nb / min(xfer) / 1e9:5.1f}")


main()
