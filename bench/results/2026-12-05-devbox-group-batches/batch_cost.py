import os, sys, time, statistics, tempfile
import torch, torch.distributed as dist
import weightlift
from weightlift import _group
store = os.path.join(tempfile.mkdtemp(), "s")
dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
ck = "/var/tmp/wl_tiny11"
for bb in (4 << 30, 256 << 20, 64 << 20, 16 << 20):
    _group.BATCH_BYTES = bb
    walls, opens = [], []
    for i in range(5):
        t = time.perf_counter()
        sd = weightlift.load_checkpoint(ck, device="cpu", process_group=dist.group.WORLD)
        walls.append(time.perf_counter() - t)
        opens.append(sd.report.open_seconds)
        batches = [n for n in sd.report.notes if n.startswith("group")][0].split(", ")[-1]
        del sd
    print(f"batch {bb >> 20} MiB: {batches}: wall median {statistics.median(walls)*1e3:.1f} ms (min {min(walls)*1e3:.1f}), open {statistics.median(opens)*1e3:.2f} ms", flush=True)
dist.destroy_process_group()
