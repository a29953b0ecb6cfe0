"""One TP rank alone in slice mode, with the report."""
import sys, time
import torch
torch.zeros(1, device="cuda:0"); torch.cuda.synchronize()
import weightlift
sys.path.insert(0, "tests/python")
from tp_reference import LLAMA_PLAN
d, n = sys.argv[1], int(sys.argv[2])
for i in range(3):
    torch.cuda.synchronize(); t0 = time.perf_counter()
    sd = weightlift.load_checkpoint(d, device="cuda:0", tp_rank=0, tp_size=n, tp_plan=LLAMA_PLAN)
    torch.cuda.synchronize(); t = time.perf_counter() - t0
    r = weightlift.last_report()
    nb = sum(v.numel() * v.element_size() for v in sd.values())
    print(f"n={n} call {i}: wall {t*1e3:.1f} ms delivered {nb/1e9:.2f} GB {nb/t/1e9:.2f} GB/s; report s {r.seconds*1e3:.1f} setup {r.setup_seconds*1e3:.1f} open {r.open_seconds*1e3:.1f} alloc {r.alloc_seconds*1e3:.1f} transfer {r.transfer_seconds*1e3:.1f} read {r.bytes_read/1e9:.2f} GB")
    if i == 2:
        for x in r.notes: print("   ", x)
    del sd
