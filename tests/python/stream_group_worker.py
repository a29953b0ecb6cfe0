"""One rank of a gloo group for test_stream.py's group-mode tests:
python stream_group_worker.py CKPT RANK WORLD PORT WINDOW OUT_JSON [PLAN].
Streams CKPT with process_group= (and tp_plan=PLAN, a JSON object) and
checks every tensor against the real safetensors package (the planned ones
against torch.tensor_split of it); writes names (in order), mismatches,
bytes read, the report's setup, how many loaders the process made (one:
every window's group load runs on the stream's loader), and whether
destroy_process_group() destroyed the group while
the ended stream was still referenced ("group_freed": a stream that keeps
it alive leaves its teardown to interpreter shutdown, where gloo's worker
threads abort the process)."""

import datetime
import json
import os
import sys
import weakref

import torch
import torch.distributed as dist
from safetensors.torch import load_file

import weightlift
from weightlift import _core

ckpt, rank, world, port, window, out = sys.argv[1:7]
made = []  # every loader this process makes
_Loader = _core._native.Loader


class CountedLoader:
    def __init__(self, options):
        made.append(options)
        self._loader = _Loader(options)

    def __getattr__(self, name):
        return getattr(self._loader, name)


_core._native.Loader = CountedLoader
plan = json.loads(sys.argv[7]) if len(sys.argv) > 7 else None
rank, world = int(rank), int(world)
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                        rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=120))
ref = {}
for f in sorted(os.listdir(ckpt)):
    if f.endswith(".safetensors"):
        ref.update(load_file(os.path.join(ckpt, f)))
stream = weightlift.stream_tensors(ckpt, window=int(window),
                                   process_group=dist.group.WORLD,
                                   tp_plan=plan)
names, bad = [], []
for name, t in stream:
    names.append(name)
    r = ref[name]
    if plan and name in plan:
        r = torch.tensor_split(r, world, 0 if plan[name] == "colwise" else -1)[
            rank].contiguous()
    if t.dtype != r.dtype or t.shape != r.shape or not torch.equal(
            t.reshape(-1).view(torch.uint8), r.reshape(-1).view(torch.uint8)):
        bad.append(name)
group = weakref.ref(dist.group.WORLD)
dist.destroy_process_group()
with open(out, "w") as fh:
    json.dump({"names": names, "bad": bad,
               "bytes": stream.report.bytes,
               "bytes_read": stream.report.bytes_read,
               "notes": stream.report.notes,
               "setup_seconds": stream.report.setup_seconds,
               "seconds": stream.report.seconds,
               "loaders_made": len(made),
               "peak": stream.peak_bytes, "bound": stream.bound_bytes,
               "group_freed": group() is None}, fh)
