"""A group load of one rank (gloo, cpu) against the plain load of the same
checkpoint, at the automatic batch size and at smaller batches: what the
batches cost. Run with PYTHONPATH naming the build's python folder (one
build per run; the README pairs two builds).

    PYTHONPATH=BUILD/python .venv/bin/python group_stream.py CKPT [ROUNDS] [THREADS]

THREADS: the loader's threads (default: automatic, which on a 2-core
machine takes both cores and leaves the collectives none).
"""
import os
import statistics
import sys
import tempfile
import time

import torch.distributed as dist

import weightlift
from weightlift import _group

ck = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
opts = {"threads": int(sys.argv[3])} if len(sys.argv) > 3 else {}
store = os.path.join(tempfile.mkdtemp(), "s")
dist.init_process_group("gloo", init_method=f"file://{store}", rank=0,
                        world_size=1)
print(f"weightlift from {os.path.dirname(weightlift.__file__)}, options "
      f"{opts or 'defaults'}", flush=True)
configs = [("plain", None), ("group, automatic batches", 0),
           ("group, 64 MiB batches", 64 << 20),
           ("group, 16 MiB batches", 16 << 20)]
walls = {name: [] for name, _ in configs}
batches = {}
sd = weightlift.load_checkpoint(ck, device="cpu", **opts)  # warm-up: loader, cache
del sd
for _ in range(rounds):  # configurations interleaved, round by round
    for name, bb in configs:
        kw = dict(opts)
        if bb is not None:
            _group.BATCH_BYTES = bb
            kw["process_group"] = dist.group.WORLD
        t = time.perf_counter()
        sd = weightlift.load_checkpoint(ck, device="cpu", **kw)
        walls[name].append(time.perf_counter() - t)
        notes = [n for n in sd.report.notes if n.startswith("group")]
        batches[name] = notes[0].split(", ")[-1] if notes else "-"
        del sd
plain = statistics.median(walls["plain"])
for name, _ in configs:
    w = walls[name]
    m = statistics.median(w)
    print(f"{name:26s} {batches[name]:>12s}: wall median {m * 1e3:7.1f} ms "
          f"(min {min(w) * 1e3:7.1f}), {m / plain:.3f}x the plain load",
          flush=True)
dist.destroy_process_group()
