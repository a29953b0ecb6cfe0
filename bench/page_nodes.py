#!/usr/bin/env python3
"""Which NUMA nodes hold the cached pages of FILES (the page cache a load
copies from), as /proc/self/numa_maps counts them once a mapping of each
file has its page tables filled (MAP_POPULATE: a page not cached is read
first, so run it on files already in the page cache).

    python3 bench/page_nodes.py FILE [FILE ...]

Prints one line a file: "page nodes PATH: N0=..% N1=..% (PAGES pages)".
A device's copies from pages on a node other than the GPU's cross the
sockets' link; `lscpu` and /sys/bus/pci/devices/*/numa_node say which node
is the GPU's.
"""

import mmap
import os
import re
import sys


def node_counts(path):
    """{node: pages} of PATH's mapping in this process, from numa_maps."""
    real = os.path.realpath(path)
    counts = {}
    with open("/proc/self/numa_maps") as f:
        for line in f:
            if not line.rstrip().endswith(real) and f" file={real} " not in \
                    f" {line} ":
                continue
            for node, pages in re.findall(r"\bN(\d+)=(\d+)", line):
                counts[int(node)] = counts.get(int(node), 0) + int(pages)
    return counts


def main(paths):
    if not paths:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    for path in paths:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            m = mmap.mmap(f.fileno(), size, flags=mmap.MAP_SHARED |
                          getattr(mmap, "MAP_POPULATE", 0),
                          prot=mmap.PROT_READ)
            try:
                counts = node_counts(path)
            finally:
                m.close()
        total = sum(counts.values())
        share = " ".join(f"N{n}={100.0 * c / total:.1f}%"
                         for n, c in sorted(counts.items())) if total else \
            "no pages mapped (numa_maps lists none)"
        print(f"page nodes {path}: {share} ({total} pages)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
