"""Small helpers the benchmark programs share (no torch at import time, so
a program that only parses its arguments stays quick)."""

import os
import shutil
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def parse_options(pairs):
    """NAME=VALUE strings as load keywords; integers as ints (threads=2)."""
    out = {}
    for pair in pairs:
        name, value = pair.split("=", 1)
        out[name] = int(value) if value.lstrip("-").isdigit() else value
    return out


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
