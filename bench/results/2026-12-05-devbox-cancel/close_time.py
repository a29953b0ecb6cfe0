import sys, time, os, weightlift
ck = sys.argv[1]
for r in range(3):
    t0 = time.perf_counter()
    it = weightlift.iter_tensors(ck)
    next(it)
    t1 = time.perf_counter()
    it.close()
    t2 = time.perf_counter()
    sd = weightlift.load_checkpoint(ck); t3 = time.perf_counter(); del sd
    print(f"first tensor {1e3*(t1-t0):.1f} ms, close() {1e3*(t2-t1):.1f} ms; a whole load {1e3*(t3-t2):.1f} ms", flush=True)
