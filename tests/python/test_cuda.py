"""device="cuda" paths (skipped without a CUDA device)."""

import gc

import pytest
import safetensors
import safetensors.torch
import torch
from conftest import (errors_in_threads, needs_cuda, random_tensor, raw_bytes,
                      storage_nbytes, torch_dtypes)

import weightlift
import weightlift.torch
from weightlift import _native

pytestmark = needs_cuda


@pytest.fixture
def every_dtype(tmp_path, gen):
    t = {}
    for name, dt in torch_dtypes().items():
        for i, shape in enumerate([(), (0,), (7,), (33, 65)]):
            t[f"{name}.{i}"] = random_tensor(dt, shape, gen)
    path = str(tmp_path / "cuda.safetensors")
    safetensors.torch.save_file(t, path)
    return path, t


def _same(a, b, k):
    assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape), k
    assert a.device == b.device, k
    assert torch.equal(raw_bytes(a), raw_bytes(b)), k


@pytest.mark.parametrize("paths", [{}, {"host_register": "off"},
                                   {"host_register": "on"},
                                   {"gds": "off", "backend": "pread"}])
def test_load_file_cuda_bit_exact(every_dtype, paths):
    path, t = every_dtype
    try:
        ours = weightlift.torch.load_file(path, device="cuda:0", **paths)
    except weightlift.UnsupportedError as e:
        pytest.skip(f"path not available here: {e}")
    theirs = safetensors.torch.load_file(path, device="cuda:0")
    assert list(ours) == list(theirs)
    for k in theirs:
        _same(ours[k], theirs[k], k)
    assert weightlift.last_report().device == "cuda:0"


def test_safe_open_cuda(every_dtype):
    path, _ = every_dtype
    with safetensors.safe_open(path, "pt", device="cuda:0") as ref, \
            weightlift.safe_open(path, "pt", device="cuda:0") as f:
        assert f.keys() == ref.keys()
        for k in ref.keys():
            _same(f.get_tensor(k), ref.get_tensor(k), k)
        for k in [k for k in ref.keys() if k.endswith(".3")][:3]:
            _same(f.get_slice(k)[1:5, ::3], ref.get_slice(k)[1:5, ::3], k)
    with weightlift.safe_open(path, "pt", device=0) as f:
        assert f.get_tensor(f.keys()[0]).device == torch.device("cuda:0")


@pytest.mark.parametrize("index", [slice(1, 5), slice(None, 2), 3, -1,
                                   (slice(2, 30), slice(None)),
                                   (slice(0, 33), Ellipsis), slice(40, 50)])
def test_get_slice_cuda_row_ranges_read_only_their_rows(every_dtype,
                                                        monkeypatch, index):
    """A row range on a cuda handle (a tensor-parallel shard of a weight)
    reads just those rows and lands on the device, equal to safetensors'
    get_slice on cuda; the whole tensor is never loaded."""
    path, _ = every_dtype

    def no_full_load(self, name):
        raise AssertionError(f"get_tensor({name}) called for a row range")

    with safetensors.safe_open(path, "pt", device="cuda:0") as ref:
        # Sub-byte (F4) rows go the general path, tested above.
        keys = [k for k in ref.keys()
                if k.endswith(".3") and not k.startswith("F4")]
        want = {k: ref.get_slice(k)[index] for k in keys}
    monkeypatch.setattr(weightlift.safe_open, "get_tensor", no_full_load)
    with weightlift.safe_open(path, "pt", device="cuda:0") as f:
        for k in keys:
            got = f.get_slice(k)[index]
            _same(got, want[k], k)
            assert storage_nbytes(got) == want[k].nbytes, k


def test_get_slice_cuda_memory_comes_from_torchs_allocator(tmp_path):
    """get_slice(...)[index] on cuda lands in memory of torch's caching
    allocator (torch.cuda.memory_allocated counts exactly it while it
    lives, and no more once it is gone): no cudaMalloc / cudaFree per call.
    Rows, columns and an int index, equal to safetensors."""
    gen = torch.Generator().manual_seed(3)
    w = torch.randn(512, 1024, generator=gen)
    path = str(tmp_path / "w.safetensors")
    safetensors.torch.save_file({"w": w}, path)
    with weightlift.safe_open(path, "pt", device="cuda:0") as f:
        for index in [slice(100, 300), (slice(None), slice(7, 519)), 5]:
            torch.cuda.synchronize()
            before = torch.cuda.memory_allocated(0)
            got = f.get_slice("w")[index]
            assert torch.cuda.memory_allocated(0) - before == \
                (got.numel() * 4 + 511) // 512 * 512, index
            _same(got, w[index].to("cuda:0"), index)
            del got
            assert torch.cuda.memory_allocated(0) == before, index


def test_get_slice_cuda_waits_for_work_queued_on_reused_memory(tmp_path):
    """Memory torch's allocator hands to a slice may still be read by work
    queued on the current stream (a tensor freed while a kernel reading it
    waits): the slice's copies (on the loader's streams) must not land
    before that work has run."""
    gen = torch.Generator().manual_seed(4)
    w = torch.randn(1024, 1024, generator=gen)
    path = str(tmp_path / "w.safetensors")
    safetensors.torch.save_file({"w": w}, path)
    with weightlift.safe_open(path, "pt", device="cuda:0") as f:
        f.get_slice("w")[0:1]  # the loader made and warm
        a = torch.full((256, 1024), 3.0, device="cuda:0")
        torch.cuda.synchronize()
        torch.cuda._sleep(500_000_000)  # a long kernel queued first
        b = a * 2  # reads A after the sleep
        ptr = a.data_ptr()
        del a  # back in torch's cache, still to be read by a * 2
        got = f.get_slice("w")[256:512]
        assert got.data_ptr() == ptr, "the allocator did not reuse A's block"
        torch.cuda.synchronize()
    assert torch.equal(b, torch.full_like(b, 6.0))
    _same(got, w[256:512].to("cuda:0"), "w[256:512]")


def test_cuda_tensors_outlive_loader_and_free(tmp_path):
    """load_file / load_checkpoint to cuda take their memory from torch's
    caching allocator, as safetensors' tensors do: torch counts it while a
    tensor lives, gets it back when the last one dies, and empty_cache()
    gives it to the driver. No loader-owned buffer is left behind."""
    path = str(tmp_path / "big.safetensors")
    safetensors.torch.save_file({"x": torch.full((32 << 20,), 7.0),
                                 "y": torch.arange(10)}, path)
    gc.collect()  # earlier tests' garbage must not be freed mid-count
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    base = _native._live_buffers()
    held = torch.cuda.memory_allocated()
    d = weightlift.torch.load_file(path, device="cuda")
    assert torch.cuda.memory_allocated() >= held + (128 << 20)
    x = d["x"]
    del d
    gc.collect()
    torch.cuda.synchronize()
    assert float(x[-1]) == 7.0 and x.is_cuda
    assert _native._live_buffers() == base
    free_before, _ = torch.cuda.mem_get_info()
    del x
    gc.collect()
    assert torch.cuda.memory_allocated() == held
    torch.cuda.empty_cache()
    free_after, _ = torch.cuda.mem_get_info()
    # The 128 MiB block went back to the driver.
    assert free_after >= free_before + (100 << 20)


@pytest.mark.parametrize("torch_alloc", [True, False])
def test_load_checkpoint_cuda_both_allocations(every_dtype, monkeypatch,
                                               torch_alloc):
    """Both ways to device memory (torch's allocator + LoadInto, and the
    loader's own allocation + Load) give safetensors' tensors, in file order,
    with a report of the whole call."""
    from weightlift import _load_torch
    monkeypatch.setattr(_load_torch, "ENABLED", torch_alloc)
    path, _ = every_dtype
    got = weightlift.load_checkpoint(path, device="cuda:0")
    want = safetensors.torch.load_file(path, device="cuda:0")
    assert list(got) == list(want)
    for k in want:
        _same(got[k], want[k], k)
    r = got.report
    assert r is weightlift.last_report() and r.device == "cuda:0"
    assert r.bytes == sum(v.nbytes for v in want.values())
    parts = r.setup_seconds + r.open_seconds + r.alloc_seconds + \
        r.transfer_seconds
    assert parts <= r.seconds + 1e-6
    assert any("python:" in n for n in r.notes) == torch_alloc


def test_load_checkpoint_cuda_waits_for_torch_stream(tmp_path):
    """The block torch hands out may have been freed by work still queued on
    its stream; the load must not write into it before that work is done."""
    path = str(tmp_path / "w.safetensors")
    w = torch.arange(1 << 24, dtype=torch.float32)
    safetensors.torch.save_file({"w": w}, path)
    a = torch.zeros(1 << 24, device="cuda:0")
    for _ in range(2000):  # ~0.1 s of kernels queued, each writing a
        a.add_(1.0)
    del a  # its block is free for the next allocation of this size
    got = weightlift.load_checkpoint(path, device="cuda:0")["w"]
    assert torch.equal(got.cpu(), w)


def test_iter_and_load_into_cuda(every_dtype):
    path, t = every_dtype
    got = dict(weightlift.iter_tensors(path, device="cuda:0"))
    for k in t:
        _same(got[k], t[k].cuda(), k)
    targets = {k: torch.empty_like(v, device="cuda:0") for k, v in t.items()}
    ptrs = {k: v.data_ptr() for k, v in targets.items()}
    weightlift.load_into(targets, path)
    for k in t:
        assert targets[k].data_ptr() == ptrs[k]
        _same(targets[k], t[k].cuda(), k)


def test_load_into_cuda_module_no_extra_memory(tmp_path):
    src = torch.nn.Linear(4096, 4096, dtype=torch.bfloat16)
    path = str(tmp_path / "lin.safetensors")
    safetensors.torch.save_file(src.state_dict(), path)
    dst = torch.nn.Linear(4096, 4096, dtype=torch.bfloat16, device="cuda")
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    weightlift.load_into(dst, path)
    assert torch.cuda.max_memory_allocated() == before
    assert torch.equal(dst.weight.cpu(), src.weight)


def test_threads_loading_cuda_at_once(every_dtype):
    path, t = every_dtype

    def work():
        for _ in range(3):
            d = weightlift.torch.load_file(path, device="cuda:0")
            assert all(torch.equal(raw_bytes(d[k]), raw_bytes(t[k]))
                       for k in t)

    errors = errors_in_threads(work, 4)
    assert not errors, errors


def test_float8_cuda(tmp_path):
    # Asked here, not in a skipif mark: a mark would be reported before the
    # module's "no CUDA device", so CI (no GPU, Debian's torch 1.13) named
    # the torch when the GPU is what it lacks. Where both are missing the
    # GPU is named; a GPU machine with torch < 2.1 names the torch.
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip(f"float8 needs torch>=2.1, this is torch "
                    f"{torch.__version__} (Debian 12's python3-torch is "
                    f"1.13; PyPI's Linux torch 2.x is the CUDA build: "
                    f"python/requirements-dev.txt says why CI keeps 1.13)")
    x = torch.linspace(-8, 8, 257)
    t = {"a": x.to(torch.float8_e4m3fn), "b": x.to(torch.float8_e5m2)}
    path = str(tmp_path / "f8.safetensors")
    safetensors.torch.save_file(t, path)
    d = weightlift.torch.load_file(path, device="cuda:0")
    for k in t:
        assert d[k].dtype == t[k].dtype and d[k].is_cuda
        assert torch.equal(d[k].float().cpu(), t[k].float())


def test_only_empty_tensors_cuda(tmp_path):
    path = str(tmp_path / "empty.safetensors")
    safetensors.torch.save_file({"e": torch.zeros(0), "f": torch.zeros(3, 0)},
                                path)
    d = weightlift.torch.load_file(path, device="cuda:0")
    assert d["f"].shape == (3, 0) and d["f"].is_cuda
    with weightlift.safe_open(path, "pt", device="cuda:0") as f:
        assert f.get_tensor("e").is_cuda


def test_prepared_loader_takes_the_first_cuda_loads(every_dtype):
    """weightlift.prepare("cuda:0") makes the loader (its ring pinned in the
    background) that the first whole and tensor-parallel loads then take:
    neither report counts a setup, both give safetensors' bytes. Without
    it, a first tensor-parallel call's report counts its loader's setup,
    and its phases stay within its seconds."""
    path, _ = every_dtype
    want = safetensors.torch.load_file(path, device="cuda:0")
    weightlift.release_cached_loaders()
    tp = {"tp_rank": 1, "tp_size": 2, "tp_plan": {"*": "colwise"}}
    first = weightlift.load_checkpoint(path, device="cuda:0", **tp).report
    assert first.setup_seconds > 0
    assert first.setup_seconds + first.open_seconds + first.alloc_seconds + \
        first.transfer_seconds <= first.seconds + 1e-6
    weightlift.release_cached_loaders()
    assert weightlift.prepare("cuda:0", **tp) > 0
    got = weightlift.load_checkpoint(path, device="cuda:0")
    assert got.report.setup_seconds == 0
    for k in want:
        _same(got[k], want[k], k)
    sliced = weightlift.load_checkpoint(path, device="cuda:0", **tp)
    assert sliced.report.setup_seconds == 0
    for k, w in want.items():
        part = torch.tensor_split(w, 2, 0)[1] if w.dim() else w
        _same(sliced[k], part, k)
