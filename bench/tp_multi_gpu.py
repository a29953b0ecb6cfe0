#!/usr/bin/env python3
"""Group mode over NCCL on every GPU of a machine (issue 15), one rank per
GPU, started by torchrun:

    torchrun --standalone --nproc-per-node N bench/tp_multi_gpu.py \
        --ckpt DIR [--json OUT.json] [--label page-cache]

Each rank, in one run:
  1. measures its own GPU's pinned host -> device copy (2 GiB, best of 3),
     one rank after another (so no two share the host's bandwidth);
  2. group mode, full tensors (process_group only): all ranks start at a
     barrier; node aggregate = sum of bytes delivered / (last end - first
     start);
  3. group mode with the Llama tp_plan (each rank's parts, replicated
     tensors read once in the group), timed the same way;
  4. slice mode (tp_rank / tp_size, no group), timed the same way;
  5. checks 2-4 bit-exact against safetensors' load_file on its own GPU
     followed by tensor_split, and that no process of the job has a CUDA
     context on a GPU other than its own (nvidia-smi
     --query-compute-apps, sampled while the loads ran and after).
Rank 0 prints one summary line per mode and writes the JSON.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import threading
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "tests", "python"))
from tp_reference import LLAMA_PLAN, split_reference  # noqa: E402
from ceiling import pinned_copy_ceiling  # noqa: E402


def compute_apps():
    """{pid: set of GPU bus ids} from nvidia-smi."""
    try:
        text = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,gpu_bus_id",
             "--format=csv,noheader"], capture_output=True, text=True,
            timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    apps = {}
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit():
            apps.setdefault(int(parts[0]), set()).add(parts[1])
    return apps


class AppSampler(threading.Thread):
    """Samples nvidia-smi every 0.5 s while the loads run (rank 0)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.samples = []
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            self.samples.append(compute_apps())
            self.stop.wait(0.5)


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def timed(fn, device):
    dist.barrier()
    sync(device)
    t0 = time.time()
    out = fn()
    sync(device)
    t1 = time.time()
    return out, t0, t1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--json")
    ap.add_argument("--label", default="")
    ap.add_argument("--verify", type=int, default=1)
    ap.add_argument("--backend", default="nccl",
                    help="nccl (cuda:LOCAL_RANK) or gloo (cpu: a smoke run)")
    args = ap.parse_args()

    local = int(os.environ["LOCAL_RANK"])
    device = f"cuda:{local}" if args.backend == "nccl" else "cpu"
    if args.backend == "nccl":
        torch.cuda.set_device(local)
    dist.init_process_group(args.backend,
                            timeout=datetime.timedelta(seconds=300))
    rank, size = dist.get_rank(), dist.get_world_size()
    pg = dist.group.WORLD
    import weightlift

    ceilings = []
    for r in range(size):  # one GPU at a time
        if r == rank:
            ceilings.append(pinned_copy_ceiling(device))
        dist.barrier()
    mine = torch.tensor([ceilings[0] if ceilings else 0.0], device=device)
    gathered = [torch.zeros(1, device=device) for _ in range(size)]
    dist.all_gather(gathered, mine)
    ceiling_per_gpu = [float(t.item()) for t in gathered]

    sampler = AppSampler() if rank == 0 else None
    if sampler:
        sampler.start()
    modes = {
        "group_full": lambda: weightlift.load_checkpoint(
            args.ckpt, device=device, process_group=pg),
        "group_tp": lambda: weightlift.load_checkpoint(
            args.ckpt, device=device, tp_plan=LLAMA_PLAN, process_group=pg),
        "slice": lambda: weightlift.load_checkpoint(
            args.ckpt, device=device, tp_rank=rank, tp_size=size,
            tp_plan=LLAMA_PLAN),
    }
    results = {}
    loaded = {}
    for mode, fn in modes.items():
        got, t0, t1 = timed(fn, device)
        nbytes = sum(t.numel() * t.element_size() for t in got.values())
        rec = torch.tensor([t0, t1, float(nbytes),
                            float(got.report.bytes_read)],
                           dtype=torch.float64, device=device)
        recs = [torch.zeros_like(rec) for _ in range(size)]
        dist.all_gather(recs, rec)
        recs = [r.tolist() for r in recs]
        start = min(r[0] for r in recs)
        end = max(r[1] for r in recs)
        total = sum(r[2] for r in recs)
        results[mode] = {
            "seconds": end - start,
            "bytes_delivered": total,
            "aggregate_gb_per_s": total / (end - start) / 1e9,
            "bytes_read_per_rank": [r[3] for r in recs],
            "per_rank_gb_per_s": [r[2] / (r[1] - r[0]) / 1e9 for r in recs],
        }
        loaded[mode] = got
        if mode != "slice":
            del got
    if sampler:
        sampler.stop.set()
        sampler.join()

    # Bit-exact against safetensors on this GPU + tensor_split.
    ok = {}
    if args.verify:
        from safetensors.torch import load_file
        full = {}
        for f in sorted(os.listdir(args.ckpt)):
            if f.endswith(".safetensors"):
                full.update(load_file(os.path.join(args.ckpt, f),
                                      device=device))
        want_parts = split_reference(full, LLAMA_PLAN, rank, size)
        for mode, got in loaded.items():
            want = full if mode == "group_full" else want_parts
            bad = [k for k in want if k not in got
                   or got[k].shape != want[k].shape
                   or got[k].dtype != want[k].dtype
                   or not torch.equal(got[k], want[k])]
            ok[mode] = not bad and len(got) == len(want)
        del full, want_parts
    loaded.clear()
    flags = torch.tensor([int(ok.get(m, 0)) for m in modes],
                         dtype=torch.int32, device=device)
    all_flags = [torch.zeros_like(flags) for _ in range(size)]
    dist.all_gather(all_flags, flags)

    # Contexts: every pid of this job on exactly one GPU.
    pid = torch.tensor([os.getpid()], dtype=torch.int64, device=device)
    pids = [torch.zeros_like(pid) for _ in range(size)]
    dist.all_gather(pids, pid)
    if rank == 0:
        pids = {int(p.item()) for p in pids}
        samples = (sampler.samples if sampler else []) + [compute_apps()]
        extra = {}
        for apps in samples:
            for p, gpus in apps.items():
                if p in pids and len(gpus) > 1:
                    extra[p] = sorted(gpus)
        n_gpu = torch.cuda.device_count()
        one_gpu = sum(ceiling_per_gpu) / len(ceiling_per_gpu) or float("nan")
        summary = {
            "label": args.label, "ckpt": args.ckpt, "ranks": size,
            "gpus_visible": n_gpu,
            "pinned_ceiling_per_gpu_gb_per_s": ceiling_per_gpu,
            "modes": results,
            "bit_exact": {m: all(bool(f[i].item()) for f in all_flags)
                          for i, m in enumerate(modes)},
            "nvidia_smi_samples": len(samples),
            "processes_with_contexts_on_several_gpus": extra,
        }
        for mode, r in results.items():
            ratio = r["aggregate_gb_per_s"] / (size * one_gpu)
            print(f"[{args.label}] {mode}: {size} GPUs, node aggregate "
                  f"{r['aggregate_gb_per_s']:.1f} GB/s = {ratio:.2f}x of "
                  f"{size} x {one_gpu:.1f} GB/s (goal >= 0.8); max bytes "
                  f"read by a rank {max(r['bytes_read_per_rank']) / 1e9:.2f}"
                  f" GB; bit-exact {summary['bit_exact'][mode]}", flush=True)
        print(f"[{args.label}] CUDA contexts on other GPUs: "
              f"{extra or 'none'} ({len(samples)} nvidia-smi samples)",
              flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(summary, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
