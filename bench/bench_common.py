"""Small helpers the benchmark programs share (no torch at import time, so
a program that only parses its arguments stays quick)."""

import os
import re
import shutil
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def parse_options(pairs):
    """NAME=VALUE strings as load keywords; integers as ints (threads=2).
    ValueError naming the first string without "="."""
    out = {}
    for pair in pairs:
        if "=" not in pair:
            raise ValueError(f"an option is NAME=VALUE, got {pair!r}")
        name, value = pair.split("=", 1)
        out[name] = int(value) if value.lstrip("-").isdigit() else value
    return out


def executor_timeline(notes):
    """(first chunk delivered, all drained), in ms since the executor's
    start, from a report's "executor: ..." note (exec/executor.h
    TimelineNote); (None, None) without one."""
    for note in notes:
        m = re.search(r"first chunk delivered at ([\d.]+) ms.*all drained "
                      r"at ([\d.]+) ms", note)
        if note.startswith("executor:") and m:
            return float(m.group(1)), float(m.group(2))
    return None, None


# A Python program for `python -c`: argv ROOT LOCATION N R [OPTIONS_JSON].
# Loads LOCATION (a folder or an s3:// prefix) with weightlift.load_checkpoint
# into host memory, as rank R of N under Llama's tp_plan (N = 0: the whole
# checkpoint), with the load options of OPTIONS_JSON if given, timed from
# after its imports (torch included) to the end of the load, and prints one
# JSON line: seconds, bytes, bytes_read and the report's slices note.
# tp_cold.py and object_tp.py run it per measurement.
TP_RANK_LOAD = r"""
import json, os, sys, time
sys.path.insert(0, os.path.join(sys.argv[1], "tests", "python"))
from tp_reference import LLAMA_PLAN
import torch  # noqa: F401 - weightlift imports it lazily: not on the clock
import weightlift
location, n, r = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
kw = dict(tp_rank=r, tp_size=n, tp_plan=LLAMA_PLAN) if n else {}
kw.update(json.loads(sys.argv[5]) if len(sys.argv) > 5 else {})
t = time.perf_counter()
sd = weightlift.load_checkpoint(location, **kw)
dt = time.perf_counter() - t
rep = sd.report
note = [x for x in rep.notes if x.startswith("slices:")]
print(json.dumps({"seconds": dt, "bytes": rep.bytes,
                  "bytes_read": rep.bytes_read,
                  "note": note[0] if note else ""}))
"""


def evict(files, whole_cache=False):
    """Drops FILES from the page cache (a cold read next); returns how: each
    file's pages with posix_fadvise(DONTNEED) after a sync, or with
    WHOLE_CACHE, when root may, the whole cache through
    /proc/sys/vm/drop_caches (pages some process still maps go too, and so
    do the libraries' pages: a fresh process then reads them from disk)."""
    os.sync()
    if whole_cache and os.geteuid() == 0:
        try:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
            return "drop_caches"
        except OSError:
            pass
    for p in files:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return "fadvise"



def find_cli(arg=None):
    """The weightlift CLI: ARG if given and executable, else build/weightlift
    of this checkout, else the one on PATH; None when there is none."""
    for c in [arg, os.path.join(ROOT, "build", "weightlift"),
              shutil.which("weightlift")]:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def sync(device):
    """Waits for DEVICE's queued work (nothing to wait for on the CPU)."""
    if str(device) != "cpu":
        import torch
        torch.cuda.synchronize(device)


def timed(fn, device):
    """(seconds, result) of FN(), synchronized with DEVICE on both sides."""
    sync(device)
    t0 = time.perf_counter()
    out = fn()
    sync(device)
    return time.perf_counter() - t0, out
