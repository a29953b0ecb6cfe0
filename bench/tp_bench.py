#!/usr/bin/env python3
"""Tensor-parallel slice mode on one GPU: n processes share one device, each
loading rank r's parts of a checkpoint (no NCCL), against the pinned-copy
ceiling and the peers, all in one run.

    python3 bench/tp_bench.py --ckpt DIR [--sizes 2,4,8] [--device cuda:0]
                              [--json OUT.json] [--option NAME=VALUE ...]
                              [--modes alone,together,peers,copies]
                              [--no-verify] [--prepared [--construct-seconds S]]

For each n:
  - alone: each rank r in its own fresh process, one at a time; GB/s is the
    rank's bytes delivered (report.bytes) over the wall time of the load
    call (CUDA context made before the clock, synchronized after);
  - together: n processes started, each waits at a barrier (a file), then
    all load at once; aggregate = sum of bytes / (last end - first start);
  - peers, rank 0 alone: safetensors get_slice(...)[part] + .to(device) per
    tensor, and safetensors load_file(device=...) + tensor_split (narrow);
  - copies (cuda only): the ceiling of "together". n processes, each with
    its rank's bytes already in pinned host memory (allocated and touched
    before the barrier), copy them to the device in one copy at once, as
    the one-process ceiling does; aggregate as for together. n CUDA
    contexts then share one GPU's copy engines, which one process's
    ceiling does not show.
Every weightlift rank is then checked bit-exact against safetensors'
get_slice of the same part (outside the clock). Rank processes are forked
from a fork server that imported torch, safetensors and weightlift once and
never touched the GPU (--spawn: a new interpreter each); either way each
is a new process with its own CUDA context and loader. The ceiling is a 2 GiB
pinned host -> device copy, best of 3, measured by this process first.
"Together" sets LOCAL_WORLD_SIZE=n in the ranks' environment, as torchrun
does, so their loaders share the cores (--no-local-world-size: not).
--option passes load options to every weightlift rank (e.g. backend=pread);
--modes runs only some of the three measurements. --prepared: each
weightlift rank calls weightlift.prepare with its load's arguments (its
loader made, its staging ring pinned, the tensor-parallel code imported,
the checkpoint opened)
before the barrier and then waits --construct-seconds (0.2 s), as a
server that prepared its loader while it built its model (the vLLM plugin
does): a rank whose prepare is still registering pages when the clock
starts says so in its notes; without it, a
rank's first call makes its loader on the clock. The weightlift package
is byte-compiled first, as an installed package is, so no rank compiles
its modules inside the clock.
"""

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "tests", "python"))
from tp_reference import LLAMA_PLAN, part_bounds  # noqa: E402
from ceiling import pinned_copy_ceiling  # noqa: E402
from bench_common import executor_timeline, parse_options  # noqa: E402


def files_of(ckpt):
    return sorted(os.path.join(ckpt, f) for f in os.listdir(ckpt)
                  if f.endswith(".safetensors"))


def part_index(name, shape, n, r):
    """The rule's part as (dim, start, stop), or None for replicated."""
    return part_bounds(name, shape, LLAMA_PLAN, r, n)


DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1,
               "F16": 2, "BF16": 2, "I16": 2, "U16": 2, "F32": 4, "I32": 4,
               "U32": 4, "F64": 8, "I64": 8, "U64": 8}


def rank_bytes(ckpt, n, r):
    """Bytes rank R of N delivers (its parts, the replicated tensors whole),
    from the files' headers alone."""
    total = 0
    for path in files_of(ckpt):
        with open(path, "rb") as f:
            size = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(size))
        for name, info in header.items():
            if name == "__metadata__":
                continue
            shape = list(info["shape"])
            p = part_index(name, shape, n, r)
            if p is not None:
                shape[p[0]] = p[2] - p[1]
            count = 1
            for d in shape:
                count *= d
            total += count * DTYPE_BYTES[info["dtype"]]
    return total


def st_slices(ckpt, n, r, device):
    """safetensors get_slice + .to(device): {name: tensor}."""
    from safetensors import safe_open
    out = {}
    for path in files_of(ckpt):
        with safe_open(path, framework="pt", device="cpu") as f:
            for name in f.keys():
                sl = f.get_slice(name)
                shape = sl.get_shape()
                p = part_index(name, shape, n, r)
                if p is None:
                    t = f.get_tensor(name)
                else:
                    dim, a, b = p
                    idx = tuple([slice(None)] * dim + [slice(a, b)])
                    t = sl[idx]
                out[name] = t.to(device)
    return out


def outside_workers_ms(rank):
    """Milliseconds of RANK's load_checkpoint call (its report's seconds)
    outside the executor's run (its "executor: ... all drained at X ms"
    note): opening, planning, the Python steps and the job's end. None
    without both."""
    _, drained = executor_timeline(rank.get("notes", []))
    if drained is None or "report_seconds" not in rank:
        return None
    return rank["report_seconds"] * 1e3 - drained


def run_rank(args):
    import torch
    dev = args.device
    cuda = dev.startswith("cuda")
    if cuda:
        torch.cuda.set_device(torch.device(dev))
    torch.empty(1, device=dev)  # the CUDA context, before the clock
    import weightlift  # noqa: F401 - imported before the clock
    import safetensors.torch  # noqa: F401
    if args.prepared and args.method == "weightlift":
        # As a server does before it builds its model; the sleep stands in
        # for the model's construction, while the loader's workers pin their
        # staging ring and prepare registers the rank's pages.
        weightlift.prepare(dev, checkpoint=args.ckpt, tp_rank=args.r,
                           tp_size=args.n, tp_plan=LLAMA_PLAN,
                           **parse_options(args.option))
        time.sleep(args.construct_seconds)
    if args.method == "pinned_copy":  # its memory, before the clock
        nbytes = rank_bytes(args.ckpt, args.n, args.r)
        host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
        host.fill_(1)
        dst = torch.empty(nbytes, dtype=torch.uint8, device=dev)
        torch.cuda.synchronize(dev)
    open(args.ready, "w").close()
    while not os.path.exists(args.go):
        time.sleep(0.0005)
    t0 = time.time()
    report = None
    if args.method == "weightlift":
        opts = parse_options(args.option)
        got = weightlift.load_checkpoint(args.ckpt, device=dev,
                                         tp_rank=args.r, tp_size=args.n,
                                         tp_plan=LLAMA_PLAN, **opts)
        report = got.report
    elif args.method == "pinned_copy":
        dst.copy_(host, non_blocking=True)
        got = {"copy": dst}
    elif args.method == "st_get_slice":
        got = st_slices(args.ckpt, args.n, args.r, dev)
    else:  # st_full_narrow
        got = {}
        for path in files_of(args.ckpt):
            full = safetensors.torch.load_file(path, device=dev)
            for name, t in full.items():
                p = part_index(name, list(t.shape), args.n, args.r)
                got[name] = t if p is None else t.narrow(p[0], p[1],
                                                         p[2] - p[1])
    if cuda:
        torch.cuda.synchronize(dev)
    t1 = time.time()
    nbytes = sum(t.numel() * t.element_size() for t in got.values())
    out = {"method": args.method, "n": args.n, "r": args.r, "t0": t0,
           "t1": t1, "seconds": t1 - t0, "bytes": nbytes,
           "gb_per_s": nbytes / (t1 - t0) / 1e9}
    if report is not None:
        out["bytes_read"] = report.bytes_read
        out["report_seconds"] = report.seconds
        out["setup_seconds"] = report.setup_seconds
        # The report's own phases, so a rank's time outside the transfer
        # (opening, allocating) is in the results.
        for phase in ("open_seconds", "alloc_seconds", "transfer_seconds"):
            out[phase] = getattr(report, phase)
        out["notes"] = list(report.notes)
        out["file_reasons"] = [f.reason for f in report.files]
        out["file_paths"] = [f.path_taken for f in report.files]
    if args.verify and args.method == "weightlift":
        want = st_slices(args.ckpt, args.n, args.r, dev)
        bad = [k for k in want if k not in got or got[k].dtype != want[k].dtype
               or got[k].shape != want[k].shape
               or not torch.equal(got[k], want[k])]
        out["bit_exact"] = not bad and len(got) == len(want)
        out["mismatch"] = bad[:5]
    with open(args.out, "w") as f:
        json.dump(out, f)


class ForkedRank:
    """A rank process forked from the fork server (multiprocessing
    "forkserver": a fresh interpreter that imported torch, safetensors and
    weightlift once and never made a CUDA context), with Popen's poll and
    wait: each rank is still a new process with its own CUDA context and
    loader, without paying ~5 s of imports each."""

    def __init__(self, ctx, argv, env):
        self.proc = ctx.Process(target=rank_entry, args=(argv, env))
        self.proc.start()

    def poll(self):
        return self.proc.exitcode

    def wait(self, timeout=None):
        self.proc.join(timeout)
        if self.proc.exitcode is None:
            raise subprocess.TimeoutExpired("rank", timeout)
        return self.proc.exitcode


def rank_entry(argv, env):
    os.environ.update(env)
    sys.exit(main(argv))


def aggregate(results, n):
    """GB/s of N ranks' RESULTS run at once: their bytes over the span from
    the first start to the last end; 0.0 unless all N ran."""
    if len(results) != n or not results:
        return 0.0
    span = max(x["t1"] for x in results) - min(x["t0"] for x in results)
    return sum(x["bytes"] for x in results) / span / 1e9


def check_options(pairs):
    """Exits with the load's own message when an --option is malformed,
    unknown or of the wrong type, before any rank starts: otherwise every
    rank of every size fails alone, after the ceiling was measured (a
    device run lost that way in session 26 to `staging_bytes=`)."""
    from weightlift import _options
    try:
        _options.normalize(parse_options(pairs))
    except (TypeError, ValueError) as e:
        sys.exit(f"tp_bench: --option: {e}")


def launch(args, method, n, ranks, tag, verify=False, env=None):
    """Starts one process per rank in RANKS (with ENV added to their
    environment), releases them together, and returns their results."""
    work = os.path.join(args.work, tag)
    os.makedirs(work, exist_ok=True)
    go = os.path.join(work, "go")
    # A run before this one in the same --work folder left its ready and out
    # files: gone first, or the barrier below would open before these ranks
    # are ready and they would start apart.
    stale = [go] + [os.path.join(work, name) for r in ranks
                    for name in (f"ready{r}", f"out{r}.json")]
    for path in stale:
        if os.path.exists(path):
            os.remove(path)
    procs = []
    for r in ranks:
        cmd = [sys.executable, os.path.abspath(__file__), "rank", "--ckpt",
               args.ckpt, "--device", args.device, "--n", str(n), "--r",
               str(r), "--method", method, "--go", go,
               "--ready", os.path.join(work, f"ready{r}"),
               "--out", os.path.join(work, f"out{r}.json")]
        if verify:
            cmd.append("--verify")
        if method == "weightlift":
            for o in args.option:
                cmd += ["--option", o]
            if args.prepared:
                cmd += ["--prepared", "--construct-seconds",
                        str(args.construct_seconds)]
        if args.forkserver is not None:
            procs.append(ForkedRank(args.forkserver, cmd[2:], env or {}))
        else:
            procs.append(subprocess.Popen(cmd, env=dict(os.environ,
                                                        **(env or {}))))
    deadline = time.time() + 300
    while not all(os.path.exists(os.path.join(work, f"ready{r}"))
                  for r in ranks):
        if time.time() > deadline or any(p.poll() not in (None, 0)
                                          for p in procs):
            break
        time.sleep(0.01)
    open(go, "w").close()
    results = []
    for r, p in zip(ranks, procs):
        rc = p.wait(timeout=600)
        path = os.path.join(work, f"out{r}.json")
        if rc != 0 or not os.path.exists(path):
            results.append({"method": method, "n": n, "r": r, "error":
                            f"exit {rc}"})
            continue
        with open(path) as f:
            results.append(json.load(f))
    return results


def main(argv=None):
    # No abbreviations: the rank subcommand's --n must not read as a prefix
    # of the top-level --no-* flags ("ambiguous option").
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 allow_abbrev=False)
    sub = ap.add_subparsers(dest="cmd")
    rank = sub.add_parser("rank", allow_abbrev=False)
    for a in ("--ckpt", "--device", "--method", "--go", "--ready", "--out"):
        rank.add_argument(a, required=True)
    rank.add_argument("--n", type=int, required=True)
    rank.add_argument("--r", type=int, required=True)
    rank.add_argument("--verify", action="store_true")
    rank.add_argument("--prepared", action="store_true")
    rank.add_argument("--construct-seconds", type=float, default=0.2)
    rank.add_argument("--option", action="append", default=[])
    ap.add_argument("--ckpt")
    ap.add_argument("--sizes", default="2,4,8")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--json")
    ap.add_argument("--work", default="/tmp/wl_tp_bench")
    ap.add_argument("--option", action="append", default=[],
                    help="NAME=VALUE load option for the weightlift ranks")
    ap.add_argument("--modes", default="alone,together,peers")
    ap.add_argument("--no-verify", action="store_true")
    ap.add_argument("--no-local-world-size", action="store_true",
                    help="together: do not set LOCAL_WORLD_SIZE=n")
    ap.add_argument("--prepared", action="store_true",
                    help="weightlift ranks call weightlift.prepare before "
                    "the clock (as a server does while building its model)")
    ap.add_argument("--construct-seconds", type=float, default=0.2,
                    help="--prepared: seconds each rank waits between "
                    "prepare and the barrier (its model's construction)")
    ap.add_argument("--spawn", action="store_true",
                    help="start each rank as a new interpreter (slower) "
                    "instead of forking it from a fork server")
    args = ap.parse_args(argv)
    if args.cmd == "rank":
        return run_rank(args)
    modes = set(args.modes.split(","))
    args.forkserver = None
    if not args.spawn:
        import multiprocessing
        args.forkserver = multiprocessing.get_context("forkserver")
        args.forkserver.set_forkserver_preload(
            ["__main__", "torch", "safetensors.torch", "weightlift"])

    import compileall
    import weightlift
    compileall.compile_dir(os.path.dirname(weightlift.__file__), quiet=1)
    check_options(args.option)

    import torch
    file_bytes = sum(os.path.getsize(p) for p in files_of(args.ckpt))
    ceiling = pinned_copy_ceiling(args.device)
    print(f"checkpoint {args.ckpt}: {file_bytes / 1e9:.2f} GB; pinned-copy "
          f"ceiling {ceiling:.1f} GB/s", flush=True)
    del torch
    rows, fails = [], []
    for n in (int(x) for x in args.sizes.split(",")):
        alone, together, st_slice, st_full = [], [], [], []
        if "alone" in modes:
            for r in range(n):
                alone += launch(args, "weightlift", n, [r], f"alone-{n}-{r}",
                                verify=not args.no_verify)
        if "together" in modes:
            # As torchrun would: the n ranks share this host's cores.
            together = launch(
                args, "weightlift", n, list(range(n)), f"together-{n}",
                env=None if args.no_local_world_size else
                {"LOCAL_WORLD_SIZE": str(n)})
        copies = []
        if "copies" in modes and args.device.startswith("cuda"):
            copies = launch(args, "pinned_copy", n, list(range(n)),
                            f"copies-{n}")
        if "peers" in modes:
            st_slice = launch(args, "st_get_slice", n, [0], f"st-slice-{n}")
            st_full = launch(args, "st_full_narrow", n, [0], f"st-full-{n}")
        for res in alone + together + copies + st_slice + st_full:
            if "error" in res:
                fails.append(f"n={n} {res['method']} rank {res['r']}: "
                             f"{res['error']}")
        ok = [a for a in alone if "error" not in a]
        tog = [t for t in together if "error" not in t]
        agg = aggregate(tog, n)
        copies_agg = aggregate([c for c in copies if "error" not in c], n)
        row = {
            "n": n,
            "alone_gb_per_s": [round(a["gb_per_s"], 2) for a in ok],
            "alone_min_gb_per_s": min((a["gb_per_s"] for a in ok),
                                      default=0.0),
            "bytes_read_fraction_max": max((a["bytes_read"] / file_bytes
                                            for a in ok), default=0.0),
            "bit_exact": (None if args.no_verify or not alone else
                          bool(ok) and len(ok) == n and all(
                              a.get("bit_exact") for a in ok)),
            "together_aggregate_gb_per_s": agg,
            "together_vs_ceiling": agg / ceiling if ceiling else 0.0,
            "copies_together_gb_per_s": copies_agg,
            "together_vs_copies": agg / copies_agg if copies_agg else 0.0,
            "st_get_slice_rank0_gb_per_s": (st_slice or [{}])[0].get(
                "gb_per_s", 0.0),
            "st_full_narrow_rank0_gb_per_s": (st_full or [{}])[0].get(
                "gb_per_s", 0.0),
            "alone": alone, "together": together, "copies": copies,
        }
        rows.append(row)
        spans = [t["seconds"] for t in tog]
        label = " ".join(args.option) or "default options"
        label += ("; ranks in new interpreters" if args.spawn else
                  "; ranks forked from a server that imported torch")
        if args.prepared:
            label += (f"; loaders prepared {args.construct_seconds:g} s "
                      "before the clock")
        if "together" in modes and not args.no_local_world_size:
            label += "; together with LOCAL_WORLD_SIZE"
        print(f"n={n} [{label}]: "
              f"each rank alone {min(row['alone_gb_per_s'] or [0]):.1f}"
              f"-{max(row['alone_gb_per_s'] or [0]):.1f} GB/s (goal >= 45), "
              f"bytes read <= {row['bytes_read_fraction_max']:.3f} of the "
              f"file, bit-exact {row['bit_exact']}; together "
              f"{agg:.1f} GB/s = {row['together_vs_ceiling']:.2f}x ceiling "
              f"(goal >= 0.9; ranks took {min(spans, default=0):.3f}-"
              f"{max(spans, default=0):.3f} s); safetensors get_slice+.to "
              f"{row['st_get_slice_rank0_gb_per_s']:.2f} GB/s, full load + "
              f"narrow {row['st_full_narrow_rank0_gb_per_s']:.2f} GB/s "
              f"(rank 0)", flush=True)
        outside = [o for o in map(outside_workers_ms, alone)
                   if o is not None]
        if outside:
            print(f"n={n}: each rank alone spent {min(outside):.1f}-"
                  f"{max(outside):.1f} ms of its call outside the executor's "
                  f"workers (its report's seconds less \"all drained at\")",
                  flush=True)
        if copies:
            print(f"n={n}: the same bytes as pinned copies, n processes at "
                  f"once: {copies_agg:.1f} GB/s = "
                  f"{copies_agg / ceiling if ceiling else 0:.2f}x the "
                  f"one-process ceiling; weightlift together = "
                  f"{row['together_vs_copies']:.2f}x of it", flush=True)
    for f in fails:
        print("FAILED:", f, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ckpt": args.ckpt, "file_bytes": file_bytes,
                       "pinned_ceiling_gb_per_s": ceiling, "rows": rows,
                       "ranks_started": "spawn" if args.spawn else "fork",
                       "prepared": args.prepared,
                       "construct_seconds": args.construct_seconds,
                       "failures": fails}, f, indent=1)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
