"""Where the staging path loses against the one-big-copy ceiling, without
weightlift: 13.48 GB host->device
  big       4 GiB copies from one pinned buffer, one stream (the ceiling)
  cK/sN     K MiB copies out of a 128 MiB pinned ring (cycled), spread over
            N streams round-robin, no reads: the copy engines' cost per copy
  +reads    the same 4 MiB / 16 streams copies while 16 dd processes read
            the checkpoint's files (page cache) in 8 MiB reads into their
            own buffers: host memory shared by the reads and the DMA
Usage: python3 chunked_copy.py CKPT_DIR [ROUNDS]
"""
import os, sys, time
import torch

D = sys.argv[1]
N = 13476831232
dev = torch.device("cuda:0")
torch.empty(1, device=dev)
big = torch.empty(4 << 30, dtype=torch.uint8, pin_memory=True); big.fill_(1)
ring = torch.empty(128 << 20, dtype=torch.uint8, pin_memory=True); ring.fill_(1)
dst = torch.empty(N, dtype=torch.uint8, device=dev)
streams = [torch.cuda.Stream(dev) for _ in range(16)]
torch.cuda.synchronize()


def run_big():
    off = 0
    while off < N:
        n = min(big.numel(), N - off)
        dst[off:off + n].copy_(big[:n], non_blocking=True)
        off += n


def run_chunked(chunk, nstreams):
    def go():
        off, k, rn = 0, 0, ring.numel()
        while off < N:
            n = min(chunk, N - off)
            r = (k * chunk) % (rn - chunk + 1)
            with torch.cuda.stream(streams[k % nstreams]):
                dst[off:off + n].copy_(ring[r:r + n], non_blocking=True)
            off += n
            k += 1
    return go


def reads_in_background():
    """16 processes (no GIL in the way), each reading 1/16 of the
    checkpoint's bytes from the page cache with dd, 8 MiB reads into its own
    buffer."""
    files = sorted(os.path.join(D, f) for f in os.listdir(D) if f.endswith(".safetensors"))
    blocks = [(f, b) for f in files
              for b in range((os.path.getsize(f) + (8 << 20) - 1) // (8 << 20))]
    step = (len(blocks) + 15) // 16
    cmds = []
    for k in range(0, len(blocks), step):
        part = blocks[k:k + step]
        runs = []
        for f in dict.fromkeys(f for f, _ in part):
            bs = [b for g, b in part if g == f]
            runs.append(f"dd if={f} of=/dev/null bs=8M skip={bs[0]} count={len(bs)} status=none")
        cmds.append(["sh", "-c", "; ".join(runs)])
    return cmds


def timed(label, fn, with_reads=False):
    import subprocess
    torch.cuda.synchronize()
    cmds = reads_in_background() if with_reads else []
    t0 = time.perf_counter()
    ps = [subprocess.Popen(c) for c in cmds]
    if fn is not None:
        fn()
        torch.cuda.synchronize()
    t1 = time.perf_counter()
    for p in ps: p.wait()
    t2 = time.perf_counter()
    reads = f"reads done after {t2 - t0:.3f} s = {N / (t2 - t0) / 1e9:.1f} GB/s" if ps else ""
    copy = f"{N / (t1 - t0) / 1e9:6.2f} GB/s ({t1 - t0:.3f} s)" if fn is not None else ""
    print(f"{label:22s} {copy} {reads}", flush=True)


for rnd in range(int(sys.argv[2]) if len(sys.argv) > 2 else 2):
    print(f"-- round {rnd + 1}")
    timed("big 4 GiB x1 stream", run_big)
    for chunk_mib, ns in [(4, 16), (4, 4), (4, 1), (8, 16), (2, 16)]:
        timed(f"c{chunk_mib}M/s{ns}", run_chunked(chunk_mib << 20, ns))
    timed("c4M/s16 +reads", run_chunked(4 << 20, 16), with_reads=True)
    timed("reads alone (16 dd)", None, with_reads=True)
