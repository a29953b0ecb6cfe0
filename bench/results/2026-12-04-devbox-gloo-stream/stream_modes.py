import datetime, sys, time, os
import torch, torch.distributed as dist
import weightlift
ck, rank, port, rounds = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2, timeout=datetime.timedelta(seconds=300))
def run(label, **kw):
    dist.barrier(); t0 = time.perf_counter()
    s = weightlift.stream_tensors(ck, **kw)
    n = 0
    for name, t in s:
        n += t.numel() * t.element_size()
    dt = time.perf_counter() - t0
    dist.barrier(); span = time.perf_counter() - t0
    if rank == 0:
        print(f"{label}: rank0 {dt:.3f} s, both done {span:.3f} s, {n/1e9:.2f} GB, read {s.report.bytes_read/1e9:.2f} GB", flush=True)
for i in range(rounds):
    run("group", process_group=dist.group.WORLD)
    run("full ")
dist.destroy_process_group()
