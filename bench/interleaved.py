#!/usr/bin/env python3
"""Later calls of several load configurations, interleaved round by round in
one process, against the pinned-copy ceiling measured after them: the A/B
that sessions 10-12 each wrote again as a probe (staging_sweep*.py,
ordered_sweep.py, flush_sweep.py, tp_shape.py, tp_prefault.py).

    python3 bench/interleaved.py DIR [--device cuda:0] [--rounds 4]
        [--no-check] [--json] --config NAME [OPT=VALUE ...] [--config NAME ...]

Each --config starts a configuration: a name, then its load options (as
load_checkpoint keywords; integers as ints). The tensor-parallel keywords
take plan names: tp_plan=llama (transformers' Llama plan), colwise or
rowwise (every tensor split so).

    python3 bench/interleaved.py /var/tmp/wl_llama2-7b \\
        --config default \\
        --config "12 x 8M" threads=12 cuda_chunk=8M staging=96M \\
        --config "rank 0 of 8" tp_rank=0 tp_size=8 tp_plan=llama

Round 0 is each configuration's first call (its loader is made then; every
distinct set of options gets a loader of its own) and is not counted. In
round 0 every configuration's tensors are also compared with those of the
first configuration that has the same tensor-parallel keywords (--no-check:
not). Rounds 1.. are timed: wall (synchronized) and the report's transfer
phase. Per configuration: medians, range, and wall as x the ceiling.
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import ROOT, parse_options, sync  # noqa: E402

TP_KEYS = ("tp_rank", "tp_size", "tp_plan")


def parse_configs(items):
    """[(name, options)] from the words after the flags: --config NAME
    starts one, OPT=VALUE words add to the last one."""
    configs = []
    it = iter(items)
    for word in it:
        if word == "--config":
            name = next(it, None)
            if name is None:
                raise SystemExit("interleaved.py: --config needs a name")
            configs.append((name, []))
        elif "=" in word and configs:
            configs[-1][1].append(word)
        else:
            raise SystemExit(f"interleaved.py: unexpected {word!r} (options "
                             f"follow a --config NAME)")
    if not configs:
        raise SystemExit("interleaved.py: give at least one --config NAME")
    return [(name, resolve_plan(parse_options(opts))) for name, opts in configs]


def resolve_plan(options):
    plan = options.get("tp_plan")
    if plan == "llama":
        sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
        from tp_reference import LLAMA_PLAN
        options["tp_plan"] = LLAMA_PLAN
    elif plan in ("colwise", "rowwise"):
        options["tp_plan"] = {"*": plan}
    return options


def tp_key(options):
    return repr([options.get(k) for k in TP_KEYS])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--json", action="store_true",
                    help="a last line of JSON: per configuration its bytes "
                    "and every wall and transfer time, and the ceiling")
    args, rest = ap.parse_known_args()
    configs = parse_configs(rest)

    import torch
    import weightlift
    from ceiling import pinned_copy_ceiling

    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    if cuda:
        torch.empty(1, device=dev)  # the CUDA context, before any clock
    refs = {}  # tp_key -> the first configuration's tensors (round 0)
    got = {name: [] for name, _ in configs}
    for r in range(args.rounds + 1):
        for name, opts in configs:
            sd = None
            sync(dev)
            t = time.perf_counter()
            sd = weightlift.load_checkpoint(args.dir, device=dev, **opts)
            sync(dev)
            wall = time.perf_counter() - t
            rep = sd.report
            if r:
                got[name].append((wall, rep.transfer_seconds, rep.bytes))
                continue
            if args.no_check:
                continue
            key = tp_key(opts)
            if key not in refs:
                refs[key] = sd
                print(f"{name}: {len(sd)} tensors, the reference for its "
                      f"tensor-parallel keywords", flush=True)
                continue
            ref = refs[key]
            bad = [k for k, v in sd.items()
                   if k not in ref or not torch.equal(v, ref[k])]
            bad += [k for k in ref if k not in sd]
            print(f"{name}: {len(sd)} tensors, {len(bad)} differ from the "
                  f"reference {bad[:3]}", flush=True)
            if bad:
                sys.exit(1)
    sd = None
    refs.clear()
    ceiling = pinned_copy_ceiling(dev, 4 << 30) if cuda else 0.0
    print(f"ceiling {ceiling:.1f} GB/s; {args.rounds} later calls each, "
          f"configurations interleaved")
    width = max(len(name) for name, _ in configs)
    for name, _ in configs:
        walls = [w for w, _, _ in got[name]]
        xfer = [x for _, x, _ in got[name]]
        nb = got[name][0][2]
        w, x = statistics.median(walls), statistics.median(xfer)
        ratio = f" ({nb / w / 1e9 / ceiling:.3f}x)" if ceiling else ""
        print(f"{name:{width}s} {nb / 1e9:7.3f} GB: wall median "
              f"{w * 1e3:7.1f} ms = {nb / w / 1e9:5.1f} GB/s{ratio}; transfer "
              f"median {x * 1e3:7.1f} ms = {nb / x / 1e9:5.1f} GB/s (range "
              f"{nb / max(xfer) / 1e9:5.1f}-{nb / min(xfer) / 1e9:5.1f})")
    if args.json:
        print(json.dumps({"ceiling_gb_per_s": ceiling, "configs": [
            {"name": name, "bytes": got[name][0][2],
             "wall_seconds": [w for w, _, _ in got[name]],
             "transfer_seconds": [x for _, x, _ in got[name]]}
            for name, _ in configs]}))


if __name__ == "__main__":
    main()
