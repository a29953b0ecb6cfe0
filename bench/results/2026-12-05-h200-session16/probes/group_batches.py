"""A group load's batches on the H200: an NCCL group of one loading
Llama-2-7B to cuda:0 with the group's batch size from 4 GiB down to 64 MiB
(weightlift._group.BATCH_BYTES; 256 MiB is the default), against the plain
load_checkpoint; three loads each after one warm-up, end to end with a
synchronize. python3 group_batches.py CKPT"""
import os, statistics, sys, tempfile, time
import torch, torch.distributed as dist
import weightlift
from weightlift import _group
ck = sys.argv[1]
torch.cuda.set_device(0)
torch.empty(1, device="cuda:0")
store = os.path.join(tempfile.mkdtemp(), "s")
dist.init_process_group("nccl", init_method=f"file://{store}", rank=0,
                        world_size=1, device_id=torch.device("cuda:0"))

def timed(**kw):
    torch.cuda.synchronize()
    t = time.perf_counter()
    sd = weightlift.load_checkpoint(ck, device="cuda:0", **kw)
    torch.cuda.synchronize()
    w = time.perf_counter() - t
    r = sd.report
    del sd
    return w, r

sizes = (("plain", None), ("4096", 4 << 30), ("1024", 1 << 30),
         ("256", 256 << 20), ("64", 64 << 20))
if sys.argv[2:] == ["auto"]:  # main's automatic size against 256 MiB
    sizes = (("plain", None), ("auto", 0), ("256", 256 << 20), ("auto", 0))
for label, bb in sizes:
    kw = {}
    if bb is not None:
        _group.BATCH_BYTES = bb
        kw = dict(process_group=dist.group.WORLD)
    timed(**kw)
    runs = [timed(**kw) for _ in range(3)]
    walls = [w for w, _ in runs]
    r = runs[-1][1]
    nb = [n for n in r.notes if "batches" in n]
    print(f"{label:>6} MiB: wall {statistics.median(walls) * 1e3:.1f} ms "
          f"(min {min(walls) * 1e3:.1f}), {r.bytes / statistics.median(walls) / 1e9:.1f} GB/s; "
          f"open {r.open_seconds * 1e3:.2f} ms transfer {r.transfer_seconds * 1e3:.1f} ms; "
          f"{nb[0].split(', ')[-1] if nb else ''}", flush=True)
dist.destroy_process_group()
