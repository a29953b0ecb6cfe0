"""Is a host->device copy slower into device memory that was just freed and
allocated again (the driver scrubbing freed memory on the copy engines?)
No files: 13.5 GB from one 4 GiB pinned buffer, in 4 GiB copies on one
stream, into
  fresh    the process's first cudaMalloc of 13.5 GB
  again    the same block, second time
  realloc  cudaFree + cudaMalloc of 13.5 GB right before
  sleep    cudaFree, 1 s sleep, cudaMalloc
  cached   freed to torch's cache and taken again (no cudaFree)
  keep     a new cudaMalloc while the old block stays allocated
"""
import time
import torch

N = 13476831232
dev = "cuda:0"
torch.empty(1, device=dev)
src = torch.empty(4 << 30, dtype=torch.uint8, pin_memory=True)
torch.cuda.synchronize()


def fill(dst, label, t_alloc):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    off = 0
    while off < N:
        n = min(src.numel(), N - off)
        dst[off:off + n].copy_(src[:n], non_blocking=True)
        off += n
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    print(f"{label:8s}: alloc {t_alloc * 1e3:6.1f} ms, copy {N / dt / 1e9:6.2f} GB/s")


def alloc():
    t = time.perf_counter()
    x = torch.empty(N, dtype=torch.uint8, device=dev)
    torch.cuda.synchronize()
    return x, time.perf_counter() - t


for rep in range(2):
    print(f"-- round {rep + 1}")
    a, t = alloc(); fill(a, "fresh" if rep == 0 else "realloc", t)
    fill(a, "again", 0)
    del a; torch.cuda.empty_cache()
    a, t = alloc(); fill(a, "realloc", t)
    del a; torch.cuda.empty_cache(); time.sleep(1.0)
    a, t = alloc(); fill(a, "sleep", t)
    del a  # stays in torch's cache
    a, t = alloc(); fill(a, "cached", t)
    b, t = alloc(); fill(b, "keep", t)
    del a, b; torch.cuda.empty_cache()
