"""Session 6 sweep: one fresh process per (config), first call then later
calls (freed / freed + 1.5 s sleep / previous kept). Options as k=v args."""
import sys, time, json
import torch
torch.cuda.init(); torch.zeros(1, device="cuda:0"); torch.cuda.synchronize()
import weightlift
d = sys.argv[1]
opts = dict(a.split("=", 1) for a in sys.argv[2:])
tag = ",".join(f"{k}={v}" for k, v in opts.items()) or "default"
held = None
def one(label):
    torch.cuda.synchronize(); t0 = time.perf_counter()
    sd = weightlift.load_checkpoint(d, device="cuda:0", **opts)
    torch.cuda.synchronize(); t = time.perf_counter() - t0
    r = weightlift.last_report()
    print(f"[{tag}] {label}: wall {t*1e3:.1f} ms {r.bytes/t/1e9:.2f} GB/s; report {r.seconds*1e3:.1f} setup {r.setup_seconds*1e3:.1f} alloc {r.alloc_seconds*1e3:.1f} transfer {r.transfer_seconds*1e3:.1f} ({r.bytes/r.transfer_seconds/1e9:.2f}) thr {r.threads}", flush=True)
    return sd
sd = one("first"); del sd
sd = one("freed"); del sd
time.sleep(1.5)
sd = one("freed+sleep1.5")
sd2 = one("kept")
del sd, sd2
