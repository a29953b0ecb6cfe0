"""Host loads against the disk's and the page cache's limits, in one run.

    python3 bench/host_disk_limit.py FILE [--rounds 2] [--out DIR]
        [--weightlift build/weightlift] [--baseline NAME=BINARY ...]

Cold: `weightlift load --cold FILE` (pages evicted first, a fresh process,
the report's whole load call) against fio reading the same file with
io_uring, O_DIRECT, queue depth 16 and 8 MiB blocks (the disk's limit).
Warm: `weightlift load FILE` with the file in the page cache against a
fresh Python process that reads the file into fresh anonymous memory
(f.read(): new memory, first touch included). Each round runs the pairs
back to back, alternating which goes first; the best of the rounds is
compared (ratios >= 0.9 are issue 10's bar). The load average before and
after is printed: on a shared machine the numbers move with it.
--baseline adds another weightlift binary (e.g. one built from an earlier
commit) to both groups, as rows "cold NAME" and "warm NAME": an A/B of a
change in the same run. With more than two in a group the order rotates.
Needs fio (the Makefile's APT_PACKAGES) and posix_fadvise.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from bench_common import evict

READ_FRESH = r"""
import sys, time
t0 = time.perf_counter()
with open(sys.argv[1], "rb", buffering=0) as f:
    data = f.read()
dt = time.perf_counter() - t0
print(len(data), dt)
"""


def warm_up(path):
    with open(path, "rb", buffering=0) as f:
        while f.read(64 << 20):
            pass


def run(cmd):
    print("+ " + " ".join(c if "\n" not in c else "<read_fresh>"
                         for c in cmd), flush=True)
    return subprocess.run(cmd, check=True, capture_output=True, text=True)


def fio_gbps(path, size):
    out = run(["fio", "--name=seq", f"--filename={path}", "--rw=read",
               "--bs=8M", "--iodepth=16", "--ioengine=io_uring", "--direct=1",
               "--readonly", "--invalidate=1", f"--size={size}",
               "--output-format=json"]).stdout
    job = json.loads(out)["jobs"][0]["read"]
    return job["io_bytes"] / (job["runtime"] / 1e3) / 1e9


def weightlift_gbps(binary, path, cold):
    cmd = [binary, "load", "--json", path] + (["--cold"] if cold else [])
    rep = json.loads(run(cmd).stdout)
    return rep["bytes"] / rep["seconds"] / 1e9, rep


def fresh_read_gbps(path):
    out = run([sys.executable, "-c", READ_FRESH, path]).stdout.split()
    return int(out[0]) / float(out[1]) / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--weightlift", default="build/weightlift")
    ap.add_argument("--out", help="folder for results.json and the log")
    ap.add_argument("--baseline", action="append", default=[],
                    metavar="NAME=BINARY",
                    help="another weightlift binary to compare, in both groups")
    a = ap.parse_args()
    baselines = dict(b.split("=", 1) for b in a.baseline)
    size = os.path.getsize(a.file)
    load_before = os.getloadavg()
    print(f"file {a.file}: {size / 1e9:.2f} GB; {os.cpu_count()} cpus; "
          f"load average {load_before[0]:.2f} {load_before[1]:.2f} "
          f"{load_before[2]:.2f}", flush=True)
    rows = {"fio": [], "cold": [], "fresh_read": [], "warm": []}
    for n in baselines:
        rows["cold " + n] = []
        rows["warm " + n] = []
    reports = []

    def weightlift_row(binary, cold):
        g, rep = weightlift_gbps(binary, a.file, cold=cold)
        reports.append(rep)
        return g

    measure = {"fio": lambda: fio_gbps(a.file, size),
               "cold": lambda: weightlift_row(a.weightlift, True),
               "fresh_read": lambda: fresh_read_gbps(a.file),
               "warm": lambda: weightlift_row(a.weightlift, False)}
    for n, binary in baselines.items():
        measure["cold " + n] = lambda b=binary: weightlift_row(b, True)
        measure["warm " + n] = lambda b=binary: weightlift_row(b, False)
    cold_group = ("fio", "cold") + tuple("cold " + n for n in baselines)
    warm_group = ("fresh_read", "warm") + tuple("warm " + n for n in baselines)
    # Each round: the cold group (the file evicted before each run), then
    # the warm group (the file read into the page cache once), each group
    # back to back, rotating which goes first (alternating for a pair).
    for r in range(a.rounds):
        for group, cold in ((cold_group, True), (warm_group, False)):
            if not cold:
                warm_up(a.file)
            k = r % len(group)
            for what in group[k:] + group[:k]:
                if cold:
                    evict([a.file])
                rows[what].append(measure[what]())
                print(f"round {r + 1} {what}: {rows[what][-1]:.3f} GB/s",
                      flush=True)
    load_after = os.getloadavg()
    best = {k: max(v) for k, v in rows.items()}
    cold_ratio = best["cold"] / best["fio"]
    warm_ratio = best["warm"] / best["fresh_read"]
    print()
    print(f"{'':34}{'best GB/s':>10}{'median':>8}  rounds")
    names = {"fio": "fio io_uring O_DIRECT qd16 8M",
             "cold": "weightlift load --cold",
             "fresh_read": "fresh process f.read() (warm)",
             "warm": "weightlift load (warm)"}
    for n in baselines:
        names["cold " + n] = f"  {n}: load --cold"
        names["warm " + n] = f"  {n}: load (warm)"
    for k in cold_group + warm_group:
        med = statistics.median(rows[k])
        print(f"{names[k]:34}{best[k]:10.3f}{med:8.3f}  "
              + " ".join(f"{v:.3f}" for v in rows[k]))
    print(f"cold: weightlift / fio = {cold_ratio:.2f} (bar 0.90: "
          f"{'met' if cold_ratio >= 0.9 else 'NOT met'})")
    print(f"warm: weightlift / fresh read = {warm_ratio:.2f} (bar 0.90: "
          f"{'met' if warm_ratio >= 0.9 else 'NOT met'})")
    print(f"load average before {load_before[0]:.2f}, after "
          f"{load_after[0]:.2f} (1 min)")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "results.json"), "w") as f:
            json.dump({"file": a.file, "bytes": size, "rounds": rows,
                       "weightlift": a.weightlift, "baselines": baselines,
                       "best": best, "cold_ratio": cold_ratio,
                       "warm_ratio": warm_ratio,
                       "loadavg_before": load_before,
                       "loadavg_after": load_after,
                       "reports": reports,
                       "time": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                             time.gmtime())}, f, indent=1)


if __name__ == "__main__":
    main()
