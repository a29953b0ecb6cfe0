"""Tensors are zero-copy views that outlive everything else; memory is
freed when the last one dies; loads run concurrently from threads."""

import gc

import numpy as np
import safetensors.torch
import torch
from conftest import errors_in_threads, needs_cuda, random_tensor

import weightlift
import weightlift.numpy
import weightlift.torch
from weightlift import _native

MiB = 1 << 20


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def _file(tmp_path, gen, big=False):
    t = {"a": torch.randn(64, 64, generator=gen),  # no NaNs: torch.equal
         "b": random_tensor(torch.int16, (100,), gen)}
    if big:
        t["big"] = torch.full((64 * MiB // 4,), 3.0)
    path = str(tmp_path / "l.safetensors")
    safetensors.torch.save_file(t, path)
    return path, t


def test_tensor_outlives_loader_result_and_handle(tmp_path, gen):
    path, t = _file(tmp_path, gen)
    gc.collect()  # earlier tests' garbage must not be freed mid-count
    base = _native._live_buffers()
    d = weightlift.torch.load_file(path)
    a = d["a"]
    del d
    with weightlift.safe_open(path, "pt") as f:
        b = f.get_tensor("b")
    f.close()  # closed twice: fine
    f.close()
    del f
    gc.collect()
    assert torch.equal(a, t["a"]) and torch.equal(b, t["b"])
    assert _native._live_buffers() >= base + 1
    del a, b
    gc.collect()
    assert _native._live_buffers() == base


def test_views_share_memory_zero_copy(tmp_path, gen):
    path, _ = _file(tmp_path, gen)
    d = weightlift.torch.load_file(path)
    a = d["a"]
    v = a.view(-1)
    assert v.data_ptr() == a.data_ptr()
    a.add_(1)  # writable, and a view sees it
    assert torch.equal(v, a.reshape(-1))
    assert a.data_ptr() % 64 == 0  # loader's host alignment


def test_memory_freed_when_last_tensor_dies(tmp_path, gen):
    path, _ = _file(tmp_path, gen, big=True)
    gc.collect()
    base_live = _native._live_buffers()
    d = weightlift.torch.load_file(path)
    keep = d["big"]
    del d
    gc.collect()
    assert float(keep[12345]) == 3.0
    rss_with = _rss_bytes()
    del keep
    gc.collect()
    assert _native._live_buffers() == base_live
    # 64 MiB buffer: its pages go back when the owner drops (allow slack for
    # allocator behaviour; the counter above is the exact check).
    assert _rss_bytes() < rss_with - 32 * MiB


def test_numpy_arrays_outlive_everything(tmp_path, gen):
    path, t = _file(tmp_path, gen)
    gc.collect()  # earlier tests' garbage must not be freed mid-count
    base = _native._live_buffers()
    arr = weightlift.numpy.load_file(path)["a"]
    gc.collect()
    assert arr.flags.writeable
    np.testing.assert_array_equal(arr, t["a"].numpy())
    del arr
    gc.collect()
    assert _native._live_buffers() == base


def test_threads_loading_at_once(tmp_path, gen):
    path, t = _file(tmp_path, gen)
    results = []

    def work():
        for _ in range(5):
            d = weightlift.torch.load_file(path, threads=2)
            results.append(all(torch.equal(d[k], t[k]) for k in t))
            with weightlift.safe_open(path, "pt") as f:
                results.append(torch.equal(f.get_tensor("b"), t["b"]))
            results.append(sum(1 for _ in weightlift.iter_tensors(path))
                           == len(t))

    errors = errors_in_threads(work, 6)
    assert not errors, errors
    assert len(results) == 6 * 5 * 3 and all(results)


def test_shared_safe_open_from_threads(tmp_path, gen):
    """One handle used from several threads (its loader serializes)."""
    path, t = _file(tmp_path, gen)
    f = weightlift.safe_open(path, "pt")
    out = []

    def work():
        for _ in range(10):
            out.append(torch.equal(f.get_tensor("a"), t["a"]))

    errors = errors_in_threads(work, 4)
    f.close()
    assert not errors, errors
    assert len(out) == 40 and all(out)


def test_cached_loader_is_reused_and_results_stay_independent(tmp_path):
    """load_file reuses one cached loader per options; tensors of an earlier
    load keep their own memory when a later load runs on the same loader."""
    import torch
    from safetensors.torch import save_file
    import weightlift
    from weightlift import _core
    from weightlift.torch import load_file

    weightlift.release_cached_loaders()
    a = tmp_path / "a.safetensors"
    b = tmp_path / "b.safetensors"
    save_file({"x": torch.arange(1000, dtype=torch.float32)}, str(a))
    save_file({"x": -torch.arange(1000, dtype=torch.float32)}, str(b))
    first = load_file(str(a))
    assert len(_core._idle) == 1
    (loader,) = next(iter(_core._idle.values()))
    second = load_file(str(b))
    (again,) = next(iter(_core._idle.values()))
    assert again is loader
    assert torch.equal(first["x"], torch.arange(1000, dtype=torch.float32))
    assert torch.equal(second["x"], -torch.arange(1000, dtype=torch.float32))
    weightlift.release_cached_loaders()
    assert not _core._idle


def _failed_call_leaves_no_cycle(fn):
    """FN must raise; returns the names of the frames the garbage collector
    alone would free afterwards (none: the error's traceback is not in a
    reference cycle, so its frames, and the loader, checkpoint or process
    group their locals hold, go as soon as the caller drops the error)."""
    import types
    gc.collect()
    gc.disable()
    try:
        try:
            fn()
        except Exception:  # noqa: BLE001 - any refusal will do
            pass
        else:
            raise AssertionError("the call did not fail")
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        frames = [f"{o.f_code.co_name} ({o.f_code.co_filename})"
                  for o in gc.garbage if isinstance(o, types.FrameType)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    return frames


def _failing_calls(tmp_path, gen, device):
    path, _ = _file(tmp_path, gen)
    truncated = str(tmp_path / "truncated.safetensors")
    with open(path, "rb") as f, open(truncated, "wb") as g:
        g.write(f.read()[:-100])
    missing = str(tmp_path / "missing")
    tp = dict(tp_rank=0, tp_size=2, tp_plan={"a": "colwise"})
    return {
        "missing": lambda: weightlift.load_checkpoint(missing, device=device),
        "truncated": lambda: weightlift.load_checkpoint(truncated,
                                                        device=device),
        "bad option": lambda: weightlift.load_checkpoint(path, device=device,
                                                         threads=-1),
        "tp missing": lambda: weightlift.load_checkpoint(missing,
                                                         device=device, **tp),
        "tp truncated": lambda: weightlift.load_checkpoint(
            truncated, device=device, **tp),
        "tp bad rank": lambda: weightlift.load_checkpoint(
            path, device=device, tp_rank=2, tp_size=2),
        "iter missing": lambda: list(weightlift.iter_tensors(missing,
                                                             device=device)),
        "safe_open missing": lambda: weightlift.safe_open(missing, "pt",
                                                          device=device),
    }


def _check_no_cycles(tmp_path, gen, device):
    for name, fn in _failing_calls(tmp_path, gen, device).items():
        # A first call (no pooled loader) opens the checkpoint on a thread
        # beside the loader's setup; a later call does not: both ways.
        for first in (True, False):
            if first:
                weightlift.release_cached_loaders()
            frames = _failed_call_leaves_no_cycle(fn)
            assert not frames, (name, "first" if first else "later", frames)


def test_failed_loads_leave_no_reference_cycle(tmp_path, gen):
    _check_no_cycles(tmp_path, gen, "cpu")


@needs_cuda
def test_failed_cuda_loads_leave_no_reference_cycle(tmp_path, gen):
    _check_no_cycles(tmp_path, gen, "cuda:0")
