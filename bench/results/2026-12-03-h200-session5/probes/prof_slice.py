"""Where a get_slice to cuda:0 spends its time: wall vs the report's phases,
freeing each result (cudaFree) or keeping them, plus a cProfile of 20 calls."""
import cProfile, pstats, sys, time
import torch
import weightlift
torch.zeros(1, device="cuda:0"); torch.cuda.synchronize()
path = "/var/tmp/wl_slice/slice.safetensors"
with weightlift.safe_open(path, "pt", device="cuda:0") as f:
    for idx, label in [((slice(1024, 2048),), "row"),
                       ((slice(None), slice(2752, 5504)), "col")]:
        for keep in (False, True):
            held = []
            for k in range(5):
                torch.cuda.synchronize(); t0 = time.perf_counter()
                x = f.get_slice("w")[idx]
                torch.cuda.synchronize(); t = time.perf_counter() - t0
                r = weightlift.last_report()
                print(f"{label} keep={keep}: wall {t*1e3:.2f} ms; report {r.seconds*1e3:.2f} open {r.open_seconds*1e3:.2f} alloc {r.alloc_seconds*1e3:.2f} transfer {r.transfer_seconds*1e3:.2f} threads {r.threads}")
                if keep:
                    held.append(x)
                del x
            t0 = time.perf_counter(); del held; torch.cuda.synchronize()
            print(f"   freeing: {1e3*(time.perf_counter()-t0):.2f} ms")
    print([n for n in weightlift.last_report().notes])
    print([(fr.path_taken, fr.reason) for fr in weightlift.last_report().files])
    pr = cProfile.Profile(); pr.enable()
    for _ in range(20):
        x = f.get_slice("w")[1024:2048]; del x
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(10)
