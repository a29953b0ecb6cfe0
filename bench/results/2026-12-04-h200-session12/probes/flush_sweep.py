"""A slot's cache lines after its read (probe, session 12, branch
s12-probe): WL_PROBE_FLUSH=demote|clwb|clflushopt (read when a loader is
made) makes each staging worker run CLDEMOTE / CLWB / CLFLUSHOPT over the
bytes it just read into its slot, before the slot's copy is enqueued. The
question: does the DMA lose time snooping lines a core still holds modified
in its 2 MiB L2? Later calls of load_checkpoint(DIR, device="cuda:0") with
each configuration, in one process, interleaved round by round, against the
pinned-copy ceiling measured after; each configuration gets its own cached
loader through a distinct, otherwise unused option (queue_depth: io_uring
only; these files are in the page cache, read with pread). Round 0 checks
every tensor against the default's, on the GPU.

    python3 flush_sweep.py DIR [ROUNDS]
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
CONFIGS = [  # name, WL_PROBE_FLUSH (None: unset), options
    ("default", None, {}),
    ("cldemote", "demote", dict(queue_depth=41)),
    ("clwb", "clwb", dict(queue_depth=42)),
    ("clflushopt", "clflushopt", dict(queue_depth=43)),
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
                os.environ.pop("WL_PROBE_FLUSH", None)
            else:
                os.environ["WL_PROBE_FLUSH"] = group
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
            notes = []
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
