#!/usr/bin/env python3
"""What a group load costs over the plain load: one process, a group of
one (NCCL on a CUDA device, gloo on cpu), the same checkpoint loaded plain
and in group mode at the automatic batch size and at smaller batches;
configurations interleaved round by round after one warm-up, each load end
to end (synchronized on CUDA). Prints the medians and their ratio to the
plain load of the same process.

    python3 bench/group_one.py --ckpt DIR [--device cuda:0] [--rounds 3]
                               [--threads N]

A group of one moves nothing between ranks, so what it costs over the
plain load is the group's own work: the agreement, each batch's status
exchange and its (empty) collectives, and how the reads are run.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0,
                    help="the loader's threads (0: automatic)")
    args = ap.parse_args()
    import torch
    import torch.distributed as dist
    import weightlift
    from weightlift import _group
    cuda = args.device.startswith("cuda")
    store = os.path.join(tempfile.mkdtemp(), "store")
    if cuda:
        dev = torch.device(args.device)
        torch.cuda.set_device(dev)
        torch.empty(1, device=dev)
        dist.init_process_group("nccl", init_method=f"file://{store}",
                                rank=0, world_size=1, device_id=dev)
    else:
        dist.init_process_group("gloo", init_method=f"file://{store}",
                                rank=0, world_size=1)
    sync = (lambda: torch.cuda.synchronize(args.device)) if cuda else (
        lambda: None)
    opts = {"threads": args.threads} if args.threads else {}
    print(f"weightlift {os.path.dirname(weightlift.__file__)}, "
          f"{args.device}, options {opts or 'defaults'}", flush=True)
    configs = [("plain", None), ("group, automatic batches", 0),
               ("group, 256 MiB batches", 256 << 20),
               ("group, 64 MiB batches", 64 << 20)]

    def load(batch_bytes):
        kw = dict(opts)
        if batch_bytes is not None:
            _group.BATCH_BYTES = batch_bytes
            kw["process_group"] = dist.group.WORLD
        sync()
        t = time.perf_counter()
        sd = weightlift.load_checkpoint(args.ckpt, device=args.device, **kw)
        sync()
        wall = time.perf_counter() - t
        notes = [n for n in sd.report.notes if n.startswith("group")]
        del sd
        return wall, (notes[0].split(", ")[-1] if notes else "-")

    load(None)  # warm-up: the loader, the page cache, the allocator
    walls = {name: [] for name, _ in configs}
    batches = {}
    for _ in range(args.rounds):
        for name, bb in configs:
            wall, batches[name] = load(bb)
            walls[name].append(wall)
    plain = statistics.median(walls["plain"])
    for name, _ in configs:
        w = walls[name]
        m = statistics.median(w)
        print(f"{name:26s} {batches[name]:>12s}: median {m * 1e3:7.1f} ms "
              f"(min {min(w) * 1e3:7.1f}, max {max(w) * 1e3:7.1f}), "
              f"{m / plain:.3f}x the plain load", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
