"""Later calls: is their slower transfer about reusing freed device memory?
Calls 0-2 free the previous state dict first; calls 3-4 keep it alive."""
import sys, time
import torch
torch.zeros(1, device="cuda:0"); torch.cuda.synchronize()
import weightlift
d = sys.argv[1]
held = []
for i in range(5):
    keep = i >= 3
    torch.cuda.synchronize(); t0 = time.perf_counter()
    sd = weightlift.load_checkpoint(d, device="cuda:0")
    torch.cuda.synchronize(); t = time.perf_counter() - t0
    r = weightlift.last_report()
    print(f"call {i} keep_previous={keep}: wall {t*1e3:.1f} ms {r.bytes/t/1e9:.2f} GB/s; report {r.seconds*1e3:.1f} setup {r.setup_seconds*1e3:.1f} alloc {r.alloc_seconds*1e3:.1f} transfer {r.transfer_seconds*1e3:.1f} ({r.bytes/r.transfer_seconds/1e9:.2f} GB/s)")
    if i >= 2:
        held.append(sd)
    del sd
