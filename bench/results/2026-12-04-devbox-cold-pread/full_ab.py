"""Cold full loads with backend=pread, variants interleaved (order reversed every other round): each
NAME=PYTHONPATH a build of weightlift. Prints each variant's seconds per round.

    python3 full_ab.py NAME=PYTHONPATH ... (from the repository root)
"""
import json, os, subprocess, sys, time
sys.path.insert(0, 'bench')
from bench_common import evict, TP_RANK_LOAD
d = '/var/tmp/wl_tiny11'
files = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith('.safetensors'))
variants = [(n, p) for n, p in (a.split('=', 1) for a in sys.argv[1:])]
got = {n: [] for n, _ in variants}
for rnd in range(8):
    for name, pp in (variants if rnd % 2 == 0 else variants[::-1]):
        evict(files); time.sleep(0.2)
        out = subprocess.run([sys.executable, '-c', TP_RANK_LOAD, os.getcwd(), d, '0', '0', json.dumps({"backend": "pread"})],
                             capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=pp))
        got[name].append(json.loads(out.stdout.strip().splitlines()[-1])['seconds'])
for n, v in got.items(): print(n, ' '.join(f'{x:.2f}' for x in v))
