#!/usr/bin/env python3
"""One tensor-parallel rank loading from pages prepare registered ahead
(src/cuda/registered_pages.h), under load options, each variant in a fresh
interpreter: where its time goes.

    python3 bench/registered_rank.py --ckpt DIR [--n 8] [--r 0]
        [--device cuda:0] [--wait 0.5] [--calls 3]
        [--variant NAME:plan=llama|colwise,OPTION=VALUE,...] ...

Each call of a variant: prepare(device, checkpoint=, tp_*) with the
variant's options, a sleep of --wait seconds (the registration finishes),
then load_checkpoint with the same arguments, timed from the call to the
device's synchronize. Printed per call: the wall time, GB/s, the executor's
"all drained" (the transfer) and first chunk, and the registration note.
The colwise plan splits o_proj and down_proj on dim 0 (no strided copies):
the same bytes at an n that divides their sizes. host_register=off is the
pinned staging path with the same prepare (row pages filled) for
comparison.
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
from tp_reference import LLAMA_PLAN  # noqa: E402
from bench_common import executor_timeline  # noqa: E402

DEFAULT_VARIANTS = ["default:", "colwise:plan=colwise",
                    "streams1:copy_streams=1", "streams4:copy_streams=4",
                    "staging:host_register=off"]


def parse_variant(text):
    name, _, rest = text.partition(":")
    plan, opts = "llama", {}
    for item in filter(None, rest.split(",")):
        k, _, v = item.partition("=")
        if k == "plan":
            plan = v
        else:
            opts[k] = int(v) if v.isdigit() else v
    return name, plan, opts


def child(args):
    import torch
    import weightlift
    dev = args.device
    cuda = dev.startswith("cuda")
    if cuda:
        torch.cuda.set_device(torch.device(dev))
    torch.empty(1, device=dev)
    name, plan_name, opts = parse_variant(args.child)
    plan = (LLAMA_PLAN if plan_name == "llama"
            else {k: "colwise" for k in LLAMA_PLAN})
    kw = dict(tp_rank=args.r, tp_size=args.n, tp_plan=plan, **opts)
    rows = []
    for call in range(args.calls):
        weightlift.prepare(dev, checkpoint=args.ckpt, **kw)
        time.sleep(args.wait)
        t0 = time.perf_counter()
        got = weightlift.load_checkpoint(args.ckpt, device=dev, **kw)
        if cuda:
            torch.cuda.synchronize(dev)
        t1 = time.perf_counter()
        rep = got.report
        ex = next((x for x in rep.notes if x.startswith("executor")), "")
        first_ms, drained_ms = executor_timeline(rep.notes)
        reg = next((x for x in rep.notes
                    if x.startswith("prepare registered")), "")
        rows.append({"call": call, "seconds": t1 - t0, "bytes": rep.bytes,
                     "first_ms": first_ms, "drained_ms": drained_ms,
                     "paths": [f.path_taken for f in rep.files],
                     "registered": reg, "executor": ex})
        del got
    print(json.dumps({"variant": name, "rows": rows}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--r", type=int, default=0)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--wait", type=float, default=0.5)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--variant", action="append", default=[])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        return child(args)
    for v in args.variant or DEFAULT_VARIANTS:
        cmd = [sys.executable, os.path.abspath(__file__), "--ckpt", args.ckpt,
               "--n", str(args.n), "--r", str(args.r), "--device",
               args.device, "--wait", str(args.wait), "--calls",
               str(args.calls), "--child", v]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            print(f"{v}: failed rc {p.returncode}\n{p.stderr[-2000:]}")
            continue
        out = json.loads(p.stdout.strip().splitlines()[-1])
        for r in out["rows"]:
            gbps = r["bytes"] / r["seconds"] / 1e9
            xfer = (r["bytes"] / r["drained_ms"] / 1e6
                    if r["drained_ms"] else 0)
            print(f"{out['variant']:>9} call {r['call']}: "
                  f"{r['seconds'] * 1e3:6.1f} ms = {gbps:5.1f} GB/s; "
                  f"transfer {r['drained_ms']} ms = {xfer:5.1f} GB/s, first "
                  f"chunk {r['first_ms']} ms; {','.join(r['paths'])}; "
                  f"{r['registered'][:260]}")
            print(f"{'':>9}   {r['executor'][:200]}")


if __name__ == "__main__":
    main()
