#!/usr/bin/env python3
"""A tensor-parallel rank's slice-mode load from object storage, against
the whole checkpoint, in one run, with an optional A/B between builds.

Starts a real SeaweedFS S3 server on 127.0.0.1 (tests/object/s3_server.py),
uploads a synthetic checkpoint (`weightlift synth --layout LAYOUT --shards 2`,
made with --cli) with its index, and times, each in a fresh process, from
after `import torch, weightlift` to the end of the load into host memory:
  full NAME   weightlift.load_checkpoint("s3://bench/model/")
  rank NAME   the same with tp_rank=R, tp_size=N and Llama's tp_plan
for every --variant NAME=PYTHONPATH (default: new=the PYTHONPATH this runs
with). Rounds rotate the order; the table gives best and median seconds,
bytes delivered and read and the rank's slices note (how many range
requests its row runs became).

  python3 bench/object_tp.py --cli build/weightlift --layout tiny --n 8 \\
      --rounds 3 --variant old=/tmp/wl_old/build/python --out DIR
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "object"))
from s3_server import ACCESS_KEY, SECRET_KEY, SeaweedS3  # noqa: E402
from bench_common import TP_RANK_LOAD  # noqa: E402

BUCKET, PREFIX = "bench", "model/"


def run(env, pythonpath, n, r):
    e = dict(env, PYTHONPATH=pythonpath)
    out = subprocess.run([sys.executable, "-c", TP_RANK_LOAD, ROOT,
                          f"s3://{BUCKET}/{PREFIX}", str(n), str(r)],
                         env=e, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        return {"error": out.stderr[-2000:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", required=True, help="the weightlift binary")
    ap.add_argument("--layout", default="tiny")
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--r", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--variant", action="append", default=[],
                    help="NAME=PYTHONPATH of another weightlift build")
    ap.add_argument("--out")
    args = ap.parse_args()
    variants = [("new", os.environ.get("PYTHONPATH", ""))]
    variants += [tuple(v.split("=", 1)) for v in args.variant]
    rows = [(f"{kind} {name}", path, n) for name, path in variants
            for kind, n in (("full", 0), ("rank", args.n))]
    results = {name: [] for name, _, _ in rows}
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = os.path.join(tmp, "ckpt")
        subprocess.run([args.cli, "synth", "--layout", args.layout,
                        "--shards", "2", ckpt], check=True,
                       stdout=subprocess.DEVNULL)
        with SeaweedS3(workdir=os.path.join(tmp, "weed")) as server:
            server.create_bucket(BUCKET)
            for f in sorted(os.listdir(ckpt)):
                server.upload(BUCKET, PREFIX + f, os.path.join(ckpt, f))
            env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY,
                       AWS_SECRET_ACCESS_KEY=SECRET_KEY,
                       AWS_ENDPOINT_URL=server.endpoint,
                       AWS_REGION="us-east-1",
                       AWS_EC2_METADATA_DISABLED="true")
            for k in range(args.rounds):
                order = rows[k % len(rows):] + rows[:k % len(rows)]
                for name, path, n in order:
                    res = run(env, path, n, args.r)
                    results[name].append(res)
                    print(f"round {k + 1} {name}: " + (
                        f"{res['seconds']:.3f} s, {res['bytes'] / 1e9:.3f} GB "
                        f"delivered, {res['bytes_read'] / 1e9:.3f} GB read"
                        if "error" not in res else "ERROR " + res["error"]),
                        flush=True)
    print(f"\nrank {args.r} of {args.n}, layout {args.layout}, local "
          f"SeaweedFS, {args.rounds} rounds\n"
          "| row | best s | median s | GB delivered | GB read |\n"
          "|---|---|---|---|---|")
    for name, _, _ in rows:
        ok = [x for x in results[name] if "error" not in x]
        if not ok:
            print(f"| {name} | failed | | | |")
            continue
        secs = [x["seconds"] for x in ok]
        print(f"| {name} | {min(secs):.3f} | {statistics.median(secs):.3f} "
              f"| {ok[0]['bytes'] / 1e9:.3f} | {ok[0]['bytes_read'] / 1e9:.3f}"
              " |")
    for name, _, _ in rows:
        ok = [x for x in results[name] if "error" not in x and x["note"]]
        if ok:
            print(f"{name}: {ok[0]['note']}")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump(results, f, indent=1)
    return 0 if all("error" not in x for v in results.values()
                    for x in v) else 1


if __name__ == "__main__":
    sys.exit(main())
