"""First touch of fresh anonymous memory: what a host load's destination
costs before any byte of the file lands in it.

    python3 bench/first_touch.py [--gib 2] [--reps 3]

Each configuration runs in a fresh process (as a load would): maps GIB of
private anonymous memory, optionally asks for transparent huge pages
(MADV_HUGEPAGE), and faults it in with MADV_POPULATE_WRITE in 4 MiB pieces
(what exec/populator.cc does), REPS times in the same process (unmapping
in between), printing GB/s per repetition. The first repetition is what a
fresh process pays; later ones show memory the process freed and mapped
again. Linux >= 5.14 (MADV_POPULATE_WRITE).
"""

import argparse
import mmap
import subprocess
import sys
import time

MADV_POPULATE_WRITE = 23  # <linux/mman.h>; Python 3.11's mmap lacks the name

CHILD = r"""
import mmap, sys, time
size, huge, reps = int(sys.argv[1]), sys.argv[2] == "1", int(sys.argv[3])
piece = 4 << 20
out = []
for _ in range(reps):
    m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if huge:
        m.madvise(mmap.MADV_HUGEPAGE)
    t = time.perf_counter()
    for off in range(0, size, piece):
        m.madvise(23, off, piece)
    out.append(size / (time.perf_counter() - t) / 1e9)
    m.close()
print(" ".join(f"{g:.3f}" for g in out))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gib", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    size = a.gib << 30
    print(f"{a.gib} GiB, MADV_POPULATE_WRITE in 4 MiB pieces, GB/s per "
          f"repetition in one fresh process", flush=True)
    for r in range(a.rounds):
        for huge in ("0", "1"):
            out = subprocess.run([sys.executable, "-c", CHILD, str(size), huge,
                                  str(a.reps)], check=True,
                                 capture_output=True, text=True).stdout
            name = "MADV_HUGEPAGE" if huge == "1" else "4 KiB pages"
            print(f"round {r + 1} {name:14} {out.strip()}", flush=True)


if __name__ == "__main__":
    main()
