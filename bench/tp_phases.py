#!/usr/bin/env python3
"""Where one tensor-parallel rank's load time goes (slice mode), in a fresh
process: the public call's wall time, then the same load step by step
(checkpoint open, shard rule and request, loader, the C++ load and its
report's phases,
taking the tensors, making torch tensors, the report), per call.

    python3 bench/tp_phases.py --ckpt DIR --n 8 [--r 0] [--device cuda:0]
                               [--calls 3] [--option backend=pread ...]
                               [--plan llama|colwise] [--prepared [--wait S]]

--plan colwise splits the row-parallel weights (o_proj, down_proj) on dim 0
instead of their last: the same bytes for each rank of a Llama checkpoint
at an n that divides its sizes, read as contiguous ranges instead of one
short run per row, so that the two plans' times tell what the row runs
cost.

--prepared: before every call, weightlift.prepare(device, checkpoint=,
tp_*) with the same options and then --wait seconds (0.2, as tp_bench.py
--prepared), so each call takes the kept checkpoint and request and the
pages prepare registered, as a prepared server's load does.

Call 0 is load_checkpoint itself (what tp_bench.py times, a first call);
calls 1.. repeat it step by step with the loader pooled by call 0. GB/s is
delivered bytes over wall time; the CUDA context is made before any clock,
and the weightlift package is byte-compiled before it too.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "tests", "python"))
from tp_reference import LLAMA_PLAN  # noqa: E402
from bench_common import parse_options  # noqa: E402


def ms(a, b):
    return f"{(b - a) * 1e3:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--r", type=int, default=0)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--option", action="append", default=[],
                    help="NAME=VALUE load option (e.g. backend=pread)")
    ap.add_argument("--plan", choices=["llama", "colwise"], default="llama")
    ap.add_argument("--prepared", action="store_true",
                    help="weightlift.prepare before every call")
    ap.add_argument("--wait", type=float, default=0.2,
                    help="--prepared: seconds from prepare to the call")
    args = ap.parse_args()
    plan = LLAMA_PLAN if args.plan == "llama" else {
        k: "colwise" for k in LLAMA_PLAN}
    opts = parse_options(args.option)
    import torch
    cuda = args.device.startswith("cuda")
    if cuda:
        torch.cuda.set_device(torch.device(args.device))
    torch.empty(1, device=args.device)
    sync = (lambda: torch.cuda.synchronize(args.device)) if cuda else (
        lambda: None)
    import compileall
    import weightlift
    # Byte-compiled first, as an installed package is (and as tp_bench.py
    # does), so that call 0 does not compile the TP modules it imports.
    compileall.compile_dir(os.path.dirname(weightlift.__file__), quiet=1)
    tag = f"n={args.n} r={args.r} plan {args.plan} {opts or 'defaults'}"
    if args.prepared:
        tag += f" prepared {args.wait:g} s ahead"

    def prepare():
        if args.prepared:
            weightlift.prepare(args.device, checkpoint=args.ckpt,
                               tp_rank=args.r, tp_size=args.n, tp_plan=plan,
                               **opts)
            time.sleep(args.wait)

    prepare()
    sync()
    t0 = time.perf_counter()
    sd = weightlift.load_checkpoint(args.ckpt, device=args.device,
                                    tp_rank=args.r, tp_size=args.n,
                                    tp_plan=plan, **opts)
    sync()
    t1 = time.perf_counter()
    nb = sum(v.numel() * v.element_size() for v in sd.values())
    rep = sd.report
    # What the report's phases leave out of its seconds (the whole call).
    rest = rep.seconds - (rep.setup_seconds + rep.open_seconds +
                          rep.alloc_seconds + rep.transfer_seconds)
    print(f"{tag} call 0 (load_checkpoint): wall {ms(t0, t1)} ms, "
          f"{nb / (t1 - t0) / 1e9:.2f} GB/s delivered; python report "
          f"{rep.seconds * 1e3:.1f} ms (setup "
          f"{rep.setup_seconds * 1e3:.1f}, open {rep.open_seconds * 1e3:.1f}, "
          f"alloc {rep.alloc_seconds * 1e3:.1f}, transfer "
          f"{rep.transfer_seconds * 1e3:.1f}; not in a phase "
          f"{rest * 1e3:.1f})", flush=True)
    del sd
    for note in rep.notes:
        if note.startswith(("python:", "setup", "staging", "executor",
                            "loader phases", "prepare")):
            print("    call 0:", note)

    from weightlift import _core, _dtypes, _load_torch, _native, _tp
    into_block = _load_torch.applies(args.device, False)
    for call in range(1, args.calls):
        prepare()
        sync()
        a = time.perf_counter()
        req = _tp.take_tp(dict(tp_rank=args.r, tp_size=args.n,
                               tp_plan=plan), args.ckpt)
        b = time.perf_counter()
        ckpt = _core.open_checkpoint(args.ckpt)
        c = time.perf_counter()
        # The kept request when prepared (_tp.rank_requests takes it).
        requests, info = (_tp.rank_requests(ckpt, req) if args.prepared else
                          _native.tp_requests(ckpt, req.rank, req.size,
                                              req.plan))
        d = time.perf_counter()
        base = None
        if into_block:  # as load_checkpoint: prepare's block, if it took one
            base, _ = _tp.load_block(ckpt, req, info,
                                     torch.device(args.device))
        e = time.perf_counter()
        with _core.pooled_loader(dict(opts, device=args.device)) as loader:
            f = time.perf_counter()
            if into_block:  # what load_checkpoint does on a CUDA device
                f_ns = time.monotonic_ns()
                job = loader.start_load_tp_into(ckpt, requests,
                                                base.data_ptr(), base)
                g = time.perf_counter()
                out = _load_torch._views(info["layout"], base)
                h = time.perf_counter()
                while not job.wait(0.5):
                    pass
                woke_ns = time.monotonic_ns()
                report = _core.wait(job, False, info["bytes"])
                i = time.perf_counter()
            else:
                f_ns = time.monotonic_ns()
                job = loader.start_load_tp(ckpt, requests)
                g = time.perf_counter()
                while not job.wait(0.5):
                    pass
                woke_ns = time.monotonic_ns()
                report = _core.wait(job, False, info["bytes"])
                h = time.perf_counter()
                out = [(name, _dtypes.to_torch(dt, shape, data, args.device,
                                               name))
                       for name, dt, shape, data in job.take_tensors(False)]
                i = time.perf_counter()
        _tp.make_report(args.device, [report], info["tensors"], nb, 0, i - c,
                        0.0, [])
        j = time.perf_counter()
        sync()
        k = time.perf_counter()
        # The job's thread: how long it took to begin, and from its load's
        # return to this thread waking (native modules without Job.times:
        # not said).
        began, returned = (job.times() if hasattr(job, "times")
                           else (0, 0))
        thread = (f"; job thread began {(began - f_ns) / 1e6:.2f} ms after "
                  f"the start call, load returned "
                  f"{(woke_ns - returned) / 1e6:.2f} ms before the wait "
                  f"woke" if began and returned else "")
        steps = (f"block {ms(d, e)}, loader {ms(e, f)}, start_load_tp_into "
                 f"{ms(f, g)}, views {ms(g, h)} (beside the load), wait "
                 f"{ms(h, i)}" if into_block else
                 f"loader {ms(e, f)}, start_load_tp {ms(f, g)}, wait "
                 f"{ms(g, h)}, take_tensors + to_torch {ms(h, i)}")
        print(f"{tag} call {call}: wall {ms(a, k)} ms, "
              f"{nb / (k - a) / 1e9:.2f} GB/s; take_tp {ms(a, b)}, "
              f"open_checkpoint {ms(b, c)}, tp_requests {ms(c, d)}, {steps}, "
              f"make_report {ms(i, j)}, sync {ms(j, k)}{thread} | C++ report: "
              f"seconds {report.seconds * 1e3:.1f} (setup "
              f"{report.setup_seconds * 1e3:.1f}, open "
              f"{report.open_seconds * 1e3:.1f}, alloc "
              f"{report.alloc_seconds * 1e3:.1f}, transfer "
              f"{report.transfer_seconds * 1e3:.1f}), read "
              f"{report.bytes_read / 1e9:.3f} GB, threads {report.threads}",
              flush=True)
        if call == args.calls - 1:
            for note in report.notes:
                print("    ", note)
            for fr in report.files:
                print("    file:", fr.as_dict())
        del out, base


if __name__ == "__main__":
    main()
