"""Where a get_slice to a CUDA device spends its time, phase by phase.

    python3 bench/slice_phases.py [--dir /var/tmp/wl_slice] [--device cuda:0]
                                  [--repeat 7] [--quick]

Uses slice_bench.py's file (DIR/slice.safetensors, a 4096 x 11008 bf16
weight, written there if missing) and its row slice [1024:2048] and column
slice [:, 2752:5504] (22.5 MB each). In one process, CUDA context first,
file in the page cache, each figure the best and the median of REPEAT:

1. the hardware: one pinned host -> device copy of the 22.5 MB (the floor),
   the same as 32 or 88 chunk copies on one stream and spread over 16
   streams (what a copy launch costs); preadv of the row slice's bytes from
   the page cache into pinned memory by 1-16 threads (what the read side
   can do); torch.empty of the result on the device (the caching
   allocator) for scale against the report's alloc phase.
2. weightlift, by option (threads, cuda_chunk, copy_streams): wall time of
   the call (synchronized) against the report's phases (open, alloc,
   transfer) and wall - report (Python, the job's thread, the report).
   2b. the loader's job path (what get_slice on cuda took before
   load_slices_into) against get_slice, interleaved.
3. a cProfile of 20 row-slice calls with the default options.
"""

import argparse
import concurrent.futures
import cProfile
import os
import pstats
import statistics
import time

import torch

import weightlift

from bench_common import timed

ROWS = (slice(1024, 2048),)
COLS = (slice(None), slice(2752, 5504))


def stats_ms(ts):
    return f"best {min(ts) * 1e3:6.3f} median {statistics.median(ts) * 1e3:6.3f} ms"


def hardware(path, device, repeat, nbytes, offset):
    print("## 1. the hardware (22.5 MB, the row slice's bytes)")
    src = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    src.fill_(1)
    dst = torch.empty(nbytes, dtype=torch.uint8, device=device)
    ts = [timed(lambda: dst.copy_(src, non_blocking=True), device)[0]
          for _ in range(3 * repeat)]
    floor = min(ts)
    print(f"one pinned copy: {stats_ms(ts)} ({nbytes / floor / 1e9:.1f} GB/s)"
          " = the floor")
    streams = [torch.cuda.Stream(device) for _ in range(16)]
    for chunks in (32, 88):
        step = -(-nbytes // chunks)
        for nstreams in (1, 16):
            def copy():
                cur = torch.cuda.current_stream(device)
                for k in range(chunks):
                    s = streams[k % nstreams]
                    s.wait_stream(cur)
                    with torch.cuda.stream(s):
                        dst[k * step:(k + 1) * step].copy_(
                            src[k * step:(k + 1) * step], non_blocking=True)
                for s in streams[:nstreams]:
                    cur.wait_stream(s)
            ts = [timed(copy, device)[0] for _ in range(repeat)]
            print(f"{chunks} chunk copies of {step >> 10} KiB on {nstreams:2d} "
                  f"stream(s): {stats_ms(ts)} (launch from Python included)")
    fd = os.open(path, os.O_RDONLY)
    try:
        view = memoryview(src.numpy())
        pool = concurrent.futures.ThreadPoolExecutor(16)
        for threads in (1, 2, 4, 8, 16):
            part = -(-nbytes // threads)
            part = (part + 4095) // 4096 * 4096

            def read_part(k):
                lo = k * part
                hi = min(nbytes, lo + part)
                got = 0
                while lo + got < hi:
                    n = os.preadv(fd, [view[lo + got:hi]], offset + lo + got)
                    if n <= 0:
                        raise OSError("short read")
                    got += n

            def read_all():
                list(pool.map(read_part, range(threads)))
            read_all()
            ts = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                read_all()
                ts.append(time.perf_counter() - t0)
            print(f"preadv page cache -> pinned, {threads:2d} thread(s): "
                  f"{stats_ms(ts)} ({nbytes / min(ts) / 1e9:.1f} GB/s; "
                  f"Python threads)")
        pool.shutdown()
    finally:
        os.close(fd)
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        x = torch.empty(nbytes, dtype=torch.uint8, device=device)
        ts.append(time.perf_counter() - t0)
        del x
    print(f"torch.empty on the device (caching allocator): {stats_ms(ts)}")
    del src, dst
    torch.cuda.empty_cache()
    return floor


def sweep(path, device, repeat, quick):
    print("\n## 2. weightlift by option: wall (synchronized) and the report's"
          " phases, medians of", repeat)
    threads = (2, 4, 8, 16) if quick else (1, 2, 4, 8, 12, 16)
    chunks = ("1MiB", "4MiB") if quick else ("256KiB", "1MiB", "2MiB", "4MiB")
    streams = (0, 1) if quick else (0, 1, 4)
    rows = []
    for t in threads:
        for c in chunks:
            for s in streams:
                opts = dict(threads=t, cuda_chunk=c)
                if s:
                    opts["copy_streams"] = s
                try:
                    f = weightlift.safe_open(path, "pt", device=device, **opts)
                except Exception as e:  # an invalid combination: say so
                    print(f"threads={t} cuda_chunk={c} copy_streams={s}: {e}")
                    continue
                with f:
                    for label, idx in (("row", ROWS), ("col", COLS)):
                        f.get_slice("w")[idx]  # warm: pins the ring
                        walls, rep = [], []
                        for _ in range(repeat):
                            dt, x = timed(lambda: f.get_slice("w")[idx], device)
                            r = weightlift.last_report()
                            walls.append(dt)
                            rep.append((r.seconds, r.open_seconds,
                                        r.alloc_seconds, r.transfer_seconds,
                                        r.threads))
                            del x
                        med = [statistics.median(v[i] for v in rep)
                               for i in range(4)]
                        rows.append((label, statistics.median(walls),
                                     min(walls), t, c, s, med))
                weightlift.release_cached_loaders()
    for label in ("row", "col"):
        print(f"\n{label} slice, fastest first: wall median (best) | report:"
              " seconds open alloc transfer | wall - report")
        for lab, wall, best, t, c, s, med in sorted(
                (r for r in rows if r[0] == label), key=lambda r: r[1]):
            print(f"  threads={t:2d} cuda_chunk={c:6s} copy_streams="
                  f"{s or 'default':7}: {wall * 1e3:6.3f} ({best * 1e3:6.3f}) "
                  f"| {med[0] * 1e3:6.3f} {med[1] * 1e3:5.3f} "
                  f"{med[2] * 1e3:5.3f} {med[3] * 1e3:6.3f} | "
                  f"{(wall - med[0]) * 1e3:5.3f} ms")


def paths(path, device, repeat):
    """The same slices through the loader's job path (a thread per load,
    cudaMalloc'd memory, the report dict built: what get_slice on cuda did
    before load_slices_into) and through get_slice, interleaved."""
    from weightlift import _core, _slice_index, _slices

    print("\n## 2b. job path (start_load_slices) vs get_slice (default "
          "options), interleaved, wall synchronized")
    with weightlift.safe_open(path, "pt", device=device) as f:
        src = f._source
        shape = f.get_slice("w").get_shape()
        for label, idx in (("row", ROWS), ("col", COLS)):
            sel = _slice_index.select(idx, shape, "pt")

            def job():
                with _core.pooled_loader(src.options) as loader:
                    return _slices.load_slices(
                        loader, src.ckpt, [("w", sel.ranges, sel.squeeze)],
                        "pt", device)[0]
            times = {"job path": [], "get_slice": []}
            for _ in range(repeat + 1):
                times["job path"].append(timed(job, device)[0])
                times["get_slice"].append(
                    timed(lambda: f.get_slice("w")[idx], device)[0])
            for k, ts in times.items():
                print(f"{label} {k:9s}: {stats_ms(ts[1:])}")


def profile(path, device):
    print("\n## 3. cProfile of 20 row-slice calls (default options)")
    with weightlift.safe_open(path, "pt", device=device) as f:
        for _ in range(3):
            f.get_slice("w")[ROWS]
        torch.cuda.synchronize(device)
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(20):
            x = f.get_slice("w")[ROWS]
            del x
        torch.cuda.synchronize(device)
        pr.disable()
        print(" | ".join(weightlift.last_report().notes))
    pstats.Stats(pr).sort_stats("tottime").print_stats(12)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/var/tmp/wl_slice")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--quick", action="store_true",
                    help="fewer option combinations")
    a = ap.parse_args()
    path = os.path.join(a.dir, "slice.safetensors")
    if not os.path.exists(path):
        import safetensors.torch
        os.makedirs(a.dir, exist_ok=True)
        g = torch.Generator().manual_seed(10)
        w = torch.randn(4096, 11008, generator=g).to(torch.bfloat16)
        safetensors.torch.save_file({"w": w}, path)
    with open(path, "rb") as fh:  # into the page cache
        while fh.read(64 << 20):
            pass
    torch.empty(1, device=a.device)  # the CUDA context before any clock
    with weightlift.safe_open(path, "pt") as f:
        info = f.tensor_info("w")
    row_bytes = info.size // info.shape[0]
    nbytes = 1024 * row_bytes
    print(f"file {path}; device {a.device} "
          f"({torch.cuda.get_device_name(a.device)}); torch {torch.__version__};"
          f" {os.cpu_count()} cpus; weightlift {weightlift.__version__}")
    hardware(path, a.device, a.repeat, nbytes, info.offset + 1024 * row_bytes)
    paths(path, a.device, a.repeat)
    sweep(path, a.device, a.repeat, a.quick)
    profile(path, a.device)


if __name__ == "__main__":
    main()
