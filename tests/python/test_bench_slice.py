"""bench/slice_bench.py runs end to end on cpu (a small weight): the GPU run
(the final device call's `bench/slice_bench.py --repeat 7`) is this same
program on cuda:0, where it also prints the pinned-copy floor."""

import os
import subprocess
import sys

from conftest import ROOT


def test_slice_bench_smoke_run_on_cpu(tmp_path):
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "slice_bench.py"),
         "--device", "cpu", "--shape", "64", "96", "--repeat", "2",
         "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "row slice [16:32]: 0.0 MB; no floor on cpu" in out, out
    assert "column slice [:, 24:48]" in out, out
    assert out.count("bytes equal") == 2, out
    assert "safetensors get_slice + .to" in out, out
    assert os.path.exists(tmp_path / "slice_64x96.safetensors")
