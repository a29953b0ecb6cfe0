"""Costs the first call pays: cudaHostAlloc of the ring (one 256 MiB block,
or 16 x 16 MiB from 16 threads at once), cudaMalloc of 13.5 GB, cudaFree."""
import ctypes, glob, os, threading, time, sys
import torch
torch.zeros(1, device="cuda:0"); torch.cuda.synchronize()
cands = glob.glob(os.path.join(os.path.dirname(torch.__file__), "..", "nvidia", "**", "libcudart.so*"), recursive=True) + ["libcudart.so.13", "libcudart.so.12", "libcudart.so"]
rt = None
for c in cands:
    try:
        rt = ctypes.CDLL(c); break
    except OSError:
        pass
print("cudart:", rt._name if rt else None)
def host_alloc(n):
    p = ctypes.c_void_p()
    e = rt.cudaHostAlloc(ctypes.byref(p), ctypes.c_size_t(n), 0)
    assert e == 0, e
    return p
def t(f):
    t0 = time.perf_counter(); r = f(); return time.perf_counter() - t0, r
for rep in range(2):
    dt, p = t(lambda: host_alloc(256 << 20)); print(f"cudaHostAlloc 256 MiB: {dt*1e3:.1f} ms")
    dt, _ = t(lambda: rt.cudaFreeHost(p)); print(f"cudaFreeHost 256 MiB: {dt*1e3:.1f} ms")
    ps = [None] * 16
    def one(i): ps[i] = host_alloc(16 << 20)
    def par():
        th = [threading.Thread(target=one, args=(i,)) for i in range(16)]
        [x.start() for x in th]; [x.join() for x in th]
    dt, _ = t(par); print(f"cudaHostAlloc 16 x 16 MiB in 16 threads: {dt*1e3:.1f} ms")
    for q in ps: rt.cudaFreeHost(q)
    dt, _ = t(lambda: host_alloc(16 << 20)); print(f"cudaHostAlloc 16 MiB: {dt*1e3:.1f} ms")
    d = ctypes.c_void_p()
    dt, e = t(lambda: rt.cudaMalloc(ctypes.byref(d), ctypes.c_size_t(13476831232 + (1 << 20))))
    print(f"cudaMalloc 13.5 GB: {dt*1e3:.1f} ms (err {e})")
    dt, e = t(lambda: rt.cudaFree(d)); print(f"cudaFree 13.5 GB: {dt*1e3:.1f} ms")
import mmap
libc = ctypes.CDLL("libc.so.6")
for rep in range(2):
    n = 256 << 20
    t0 = time.perf_counter()
    m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    base = ctypes.addressof(ctypes.c_char.from_buffer(m))
    def touch(i):
        libc.memset(ctypes.c_void_p(base + i * (n // 16)), 0, ctypes.c_size_t(n // 16))
    th = [threading.Thread(target=touch, args=(i,)) for i in range(16)]
    [x.start() for x in th]; [x.join() for x in th]
    t1 = time.perf_counter()
    e = rt.cudaHostRegister(ctypes.c_void_p(base), ctypes.c_size_t(n), 0)
    t2 = time.perf_counter()
    print(f"mmap+16-thread touch 256 MiB {1e3*(t1-t0):.1f} ms, cudaHostRegister {1e3*(t2-t1):.1f} ms (err {e})")
    rt.cudaHostUnregister(ctypes.c_void_p(base))
    # 16 threads each register their own 16 MiB piece
    m2 = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    b2 = ctypes.addressof(ctypes.c_char.from_buffer(m2))
    def touch_reg(i):
        a = b2 + i * (n // 16)
        libc.memset(ctypes.c_void_p(a), 0, ctypes.c_size_t(n // 16))
        rt.cudaHostRegister(ctypes.c_void_p(a), ctypes.c_size_t(n // 16), 0)
    t0 = time.perf_counter()
    th = [threading.Thread(target=touch_reg, args=(i,)) for i in range(16)]
    [x.start() for x in th]; [x.join() for x in th]
    print(f"16 threads touch+register 16 MiB each: {1e3*(time.perf_counter()-t0):.1f} ms")
