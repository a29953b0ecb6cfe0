"""bench/ceiling.py: the one pinned-copy ceiling of the Python benchmarks
(compare.py, first_call.py, tp_bench.py and tp_multi_gpu.py import it)."""

import importlib.util
import os

import pytest

from conftest import ROOT, needs_cuda

torch = pytest.importorskip("torch")


def _ceiling_module():
    path = os.path.join(ROOT, "bench", "ceiling.py")
    spec = importlib.util.spec_from_file_location("wl_bench_ceiling", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_no_host_to_device_hop_on_cpu():
    assert _ceiling_module().pinned_copy_ceiling("cpu") == 0.0


@pytest.mark.parametrize("script", ["compare.py", "first_call.py",
                                    "tp_bench.py", "tp_multi_gpu.py"])
def test_benchmarks_use_the_one_ceiling(script):
    text = open(os.path.join(ROOT, "bench", script)).read()
    assert "from ceiling import pinned_copy_ceiling" in text
    assert "def pinned_ceiling" not in text and \
        "def pinned_copy_ceiling" not in text


@needs_cuda
def test_measures_a_copy_and_frees_its_memory():
    before = torch.cuda.memory_allocated(0)
    gbps = _ceiling_module().pinned_copy_ceiling("cuda:0", nbytes=64 << 20)
    # PCIe 3 x16 is ~12 GB/s; anything under 1 GB/s is a broken measurement.
    assert 1.0 < gbps < 1000.0
    assert torch.cuda.memory_allocated(0) == before
