"""Where a fresh process's first weightlift call spends its time (session 8
probe): wall time, the report's phases, then (in a second fresh process)
the same call under cProfile.

    python3 first_profile.py DIR tp8|tp4|full [profile]
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "..", "tests", "python"))
from tp_reference import LLAMA_PLAN  # noqa: E402

ckpt, mode = sys.argv[1], sys.argv[2]
prof = len(sys.argv) > 3
import torch  # noqa: E402
torch.cuda.set_device(0)
torch.empty(1, device="cuda:0")
import weightlift  # noqa: E402
kw = {} if mode == "full" else dict(tp_rank=0, tp_size=int(mode[2:]),
                                     tp_plan=LLAMA_PLAN)


def call():
    sd = weightlift.load_checkpoint(ckpt, device="cuda:0", **kw)
    torch.cuda.synchronize()
    return sd


if prof:
    import cProfile
    import pstats
    p = cProfile.Profile()
    t0 = time.perf_counter()
    p.enable()
    sd = call()
    p.disable()
    t1 = time.perf_counter()
    print(f"{mode} first call under cProfile: {(t1 - t0) * 1e3:.1f} ms")
    st = pstats.Stats(p)
    st.sort_stats("tottime").print_stats(25)
    st.sort_stats("cumulative").print_stats(30)
else:
    for i in range(3):
        t0 = time.perf_counter()
        sd = call()
        t1 = time.perf_counter()
        nb = sum(v.numel() * v.element_size() for v in sd.values())
        print(f"{mode} call {i}: {(t1 - t0) * 1e3:.1f} ms, "
              f"{nb / (t1 - t0) / 1e9:.2f} GB/s")
        if i == 0:
            print(sd.report)
        del sd
