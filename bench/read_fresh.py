"""The plain way to get a checkpoint's files into memory, for one-shot
comparisons with `weightlift load` in a fresh process: f.read() of every
.safetensors file in DIR, all kept until the end (new memory, first touch
included).

    python3 bench/read_fresh.py DIR
"""
import sys, time, glob
files = sorted(glob.glob(sys.argv[1] + "/*.safetensors"))
t0 = time.perf_counter(); kept = [open(f, "rb", buffering=0).read() for f in files]
dt = time.perf_counter() - t0; n = sum(len(k) for k in kept)
print(f"f.read() of each file into new memory: {n/1e9:.2f} GB in {dt:.3f} s ({n/dt/1e9:.2f} GB/s)")
