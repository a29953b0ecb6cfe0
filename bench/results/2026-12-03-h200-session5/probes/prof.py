"""Where the time goes: first and later load_checkpoint calls, with the
Python-side split (wall vs report), in a fresh process."""
import sys, time, json
import torch
torch.cuda.init(); torch.zeros(1, device="cuda:0"); torch.cuda.synchronize()
t_imp = time.perf_counter()
import weightlift
t_imp = time.perf_counter() - t_imp
d = sys.argv[1]
print(f"import weightlift {t_imp*1e3:.1f} ms")
for i in range(3):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    sd = weightlift.load_checkpoint(d, device="cuda:0")
    torch.cuda.synchronize()
    t = time.perf_counter() - t0
    r = weightlift.last_report()
    nb = sum(v.numel() * v.element_size() for v in sd.values())
    print(f"call {i}: wall {t*1e3:.1f} ms {nb/t/1e9:.2f} GB/s; report seconds {r.seconds*1e3:.1f} setup {r.setup_seconds*1e3:.1f} open {r.open_seconds*1e3:.1f} alloc {r.alloc_seconds*1e3:.1f} transfer {r.transfer_seconds*1e3:.1f} threads {r.threads} staging {r.staging_bytes}")
    for n in r.notes: print("   ", n)
    del sd
