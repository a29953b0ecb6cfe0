"""The shard rule's cost through the Python module: _native.tp_requests for
rank 0 of N of a checkpoint under Llama's plan, best and median of 20 calls
in ms (probe, session 11).

    PYTHONPATH=<build>/python python3 tp_requests_time.py DIR [N]
"""
import sys
import time

sys.path.insert(0, "tests/python")
from tp_reference import LLAMA_PLAN  # noqa: E402

from weightlift import _core, _native, _tp  # noqa: E402

d = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 4
ckpt = _core.open_checkpoint(d)
req = _tp.take_tp(dict(tp_rank=0, tp_size=n, tp_plan=LLAMA_PLAN), d)
times = []
for _ in range(20):
    t = time.perf_counter()
    _native.tp_requests(ckpt, req.rank, req.size, req.plan)
    times.append(time.perf_counter() - t)
times.sort()
print(f"tp_requests, rank 0 of {n}, {len(ckpt.tensors())} tensors, "
      f"{len(req.plan)} patterns: best {times[0] * 1e3:.3f} ms, median "
      f"{times[10] * 1e3:.3f} ms")
