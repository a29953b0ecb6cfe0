"""A tensor-parallel rank's slice-mode load from a cold disk, against the
disk's limit, the whole checkpoint cold, and safetensors' get_slice, in one
run (host memory: the question is the reads, not the copies).

    python3 bench/tp_cold.py --ckpt DIR [--n 8] [--r 0] [--rounds 2]
        [--variant NAME=PYTHONPATH ...] [--option NAME=VALUE ...] [--out DIR]

Each measurement is a fresh process after the checkpoint's pages were
evicted (posix_fadvise DONTNEED on every file), timed from after its
imports (torch included) to the end of the load:
  fio          every file read with io_uring, O_DIRECT, queue depth 16, 8 MiB
               blocks (the disk's limit; GB/s of the file bytes);
  full NAME    weightlift.load_checkpoint(DIR) on the cpu;
  rank NAME    load_checkpoint(DIR, tp_rank=R, tp_size=N, tp_plan=Llama's);
  st_get_slice safetensors' safe_open + get_slice of the same parts.
Each --variant is another weightlift (its python folder on PYTHONPATH, e.g.
an older build) run as full and rank rows: an A/B in the same run. Each
--option is a load option for every weightlift row (e.g. backend=pread).
Rounds rotate the order. Prints a table (best and median seconds per row, bytes
read, the rank's slices note) and writes results.json to --out.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from bench_common import TP_RANK_LOAD, evict, parse_options

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


ST_SLICE = r"""
import json, os, sys, time
sys.path.insert(0, os.path.join(sys.argv[1], "tests", "python"))
sys.path.insert(0, os.path.join(sys.argv[1], "bench"))
from tp_bench import st_slices
import safetensors.torch  # noqa: F401 - torch too, before the clock
ckpt, n, r = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
t = time.perf_counter()
got = st_slices(ckpt, n, r, "cpu")
dt = time.perf_counter() - t
nb = sum(v.numel() * v.element_size() for v in got.values())
print(json.dumps({"seconds": dt, "bytes": nb, "bytes_read": 0, "note": ""}))
"""


def files_of(ckpt):
    return sorted(os.path.join(ckpt, f) for f in os.listdir(ckpt)
                  if f.endswith(".safetensors"))


def fio_seconds(ckpt):
    total = 0.0
    for path in files_of(ckpt):
        # 8 MiB blocks, or the file's whole 4 KiB blocks if it is smaller.
        bs = min(8 << 20, max(4096, os.path.getsize(path) // 4096 * 4096))
        out = subprocess.run(
            ["fio", "--name=seq", f"--filename={path}", "--rw=read",
             f"--bs={bs}", "--iodepth=16", "--ioengine=io_uring", "--direct=1",
             "--readonly", "--invalidate=1", "--output-format=json"],
            check=True, capture_output=True, text=True).stdout
        job = json.loads(out)["jobs"][0]["read"]
        total += job["runtime"] / 1e3
    nb = sum(os.path.getsize(p) for p in files_of(ckpt))
    return {"seconds": total, "bytes": nb, "bytes_read": nb, "note": ""}


def python_row(code, pythonpath, ckpt, n, r, options=None):
    env = dict(os.environ, PYTHONPATH=pythonpath)
    extra = [json.dumps(options)] if options else []
    out = subprocess.run([sys.executable, "-c", code, ROOT, ckpt, str(n),
                          str(r), *extra], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--r", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--variant", action="append", default=[],
                    metavar="NAME=PYTHONPATH")
    ap.add_argument("--option", action="append", default=[],
                    metavar="NAME=VALUE")
    ap.add_argument("--out")
    a = ap.parse_args()
    opts = parse_options(a.option)
    variants = [("new", os.environ.get("PYTHONPATH", ""))]
    variants += [tuple(v.split("=", 1)) for v in a.variant]
    rows = [("fio", lambda: fio_seconds(a.ckpt))]
    for name, pp in variants:
        rows.append((f"full {name}", lambda pp=pp: python_row(
            TP_RANK_LOAD, pp, a.ckpt, 0, 0, opts)))
        rows.append((f"rank {name}", lambda pp=pp: python_row(
            TP_RANK_LOAD, pp, a.ckpt, a.n, a.r, opts)))
    rows.append(("st_get_slice", lambda: python_row(
        ST_SLICE, variants[0][1], a.ckpt, a.n, a.r)))
    got = {name: [] for name, _ in rows}
    print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
    for k in range(a.rounds):
        order = rows[k % len(rows):] + rows[:k % len(rows)]
        for name, fn in order:
            evict(files_of(a.ckpt))
            time.sleep(0.2)
            res = fn()
            got[name].append(res)
            print(f"round {k + 1} {name}: {res['seconds']:.2f} s, "
                  f"{res['bytes'] / 1e9:.3f} GB delivered, "
                  f"{res['bytes_read'] / 1e9:.3f} GB read", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(f"\nrank {a.r} of {a.n}, {a.ckpt}, cold, {a.rounds} rounds; "
          f"weightlift options: {opts or 'defaults'}")
    print("| row | best s | median s | GB delivered | GB read |")
    print("|---|---|---|---|---|")
    for name, _ in rows:
        secs = [x["seconds"] for x in got[name]]
        last = got[name][-1]
        print(f"| {name} | {min(secs):.2f} | {statistics.median(secs):.2f} | "
              f"{last['bytes'] / 1e9:.3f} | {last['bytes_read'] / 1e9:.3f} |")
    for name, _ in rows:
        if got[name][-1]["note"]:
            print(f"{name}: {got[name][-1]['note']}")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "results.json"), "w") as f:
            json.dump({"ckpt": a.ckpt, "n": a.n, "r": a.r, "options": opts,
                       "rows": got}, f, indent=1)


if __name__ == "__main__":
    main()
