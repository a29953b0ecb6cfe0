"""Staging ring shapes and copy streams (probe, session 12): for each
(threads, cuda_chunk, staging, copy_streams) configuration, later calls of
load_checkpoint(DIR, device="cuda:0", ...) in one process, configurations
interleaved round by round, against the pinned-copy ceiling measured after.
The default is 12 threads x 4 MiB x 2 on 16 cores (session 10). This one
asks whether larger copies out of a ring of the same size (so it still fits
the host's last-level cache) do better: one slot per thread of 6-16 MiB,
which needs the branch s12-probe and WL_PROBE_ONE_SLOT=1 in the environment.

    python3 staging_sweep3.py DIR [ROUNDS]
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
    ("12 x 8M x 1 (96M)", dict(threads=12, cuda_chunk=8 * M, staging=96 * M)),
    ("16 x 6M x 1 (96M)", dict(threads=16, cuda_chunk=6 * M, staging=96 * M)),
    ("12 x 6M x 1 (72M)", dict(threads=12, cuda_chunk=6 * M, staging=72 * M)),
    ("10 x 8M x 1 (80M)", dict(threads=10, cuda_chunk=8 * M, staging=80 * M)),
    ("14 x 8M x 1 (112M)", dict(threads=14, cuda_chunk=8 * M, staging=112 * M)),
    ("8 x 12M x 1 (96M)", dict(threads=8, cuda_chunk=12 * M, staging=96 * M)),
    ("6 x 16M x 1 (96M)", dict(threads=6, cuda_chunk=16 * M, staging=96 * M)),
    ("6 x 8M x 2 (96M)", dict(threads=6, cuda_chunk=8 * M, staging=96 * M)),
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
            else:  # the shape the loader took (the probe's env var works?)
                print(f"{name}: threads {rep.threads}, ring "
                      f"{rep.staging_bytes >> 20} MiB", flush=True)
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
