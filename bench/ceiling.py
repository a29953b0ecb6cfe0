"""The pinned-copy ceiling the Python benchmarks compare against, in one
place: the best GB/s of one host -> device copy out of pinned host memory
(torch's pinned allocator), synchronized. compare.py, first_call.py,
tp_bench.py and tp_multi_gpu.py import it (they run from bench/, so it is on
sys.path).
"""

import time


def pinned_copy_ceiling(device, nbytes=2 << 30, reps=3):
    """Best GB/s (1e9 bytes/s) of REPS copies of NBYTES from pinned host
    memory to DEVICE, each timed from a synchronized start to a synchronized
    end. 0.0 for a non-CUDA device (a smoke run on cpu has no host -> device
    hop). Frees both buffers and torch's cached device memory before it
    returns, so the loads measured next start from the same device memory."""
    if not str(device).startswith("cuda"):
        return 0.0
    import torch
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    host.fill_(1)  # touched: no first-touch page faults inside the clock
    dst = torch.empty(nbytes, dtype=torch.uint8, device=device)
    best = 0.0
    for _ in range(reps):
        torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        dst.copy_(host, non_blocking=True)
        torch.cuda.synchronize(device)
        best = max(best, nbytes / (time.perf_counter() - t0) / 1e9)
    del host, dst
    torch.cuda.empty_cache()
    return best
