import datetime, sys, time, os, statistics
import torch, torch.distributed as dist
import weightlift
from weightlift import _group
ck, rank, port, rounds = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2, timeout=datetime.timedelta(seconds=300))
run_all = _group.TorchGroupTransport.run_all
res = {"batched": [], "one at a time": []}
if len(sys.argv) > 5 and sys.argv[5] == "swap":
    res = {"one at a time": [], "batched": []}
weightlift.load_checkpoint(ck, process_group=dist.group.WORLD)  # warm-up
for i in range(rounds):
    for mode in res:
        if mode == "batched": _group.TorchGroupTransport.run_all = run_all
        else: del _group.TorchGroupTransport.run_all
        dist.barrier(); t0 = time.perf_counter()
        sd = weightlift.load_checkpoint(ck, process_group=dist.group.WORLD)
        res[mode].append(time.perf_counter() - t0)
        del sd
if rank == 0:
    for m, v in res.items(): print(f"{m}: " + " ".join(f"{x:.3f}" for x in v) + f" s; median {statistics.median(v):.3f}")
dist.destroy_process_group()
