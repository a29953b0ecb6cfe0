"""iter_tensors, load_into, LoadReport, progress."""

import numpy as np
import sys

import pytest
import safetensors.torch
import torch
from conftest import random_tensor, raw_bytes

import weightlift
import weightlift.torch


@pytest.fixture
def ckpt(tmp_path, gen):
    t = {"w1": random_tensor(torch.bfloat16, (32, 16), gen),
         "w2": random_tensor(torch.float32, (16,), gen),
         "i": random_tensor(torch.int64, (3, 3), gen),
         "e": torch.zeros(0, 4),
         "s": torch.tensor(2.5)}
    path = str(tmp_path / "c.safetensors")
    safetensors.torch.save_file(t, path)
    return path, t


def test_iter_tensors_yields_everything(ckpt):
    path, t = ckpt
    it = weightlift.iter_tensors(path)
    got = {}
    for name, tensor in it:
        assert name not in got
        got[name] = tensor
    assert set(got) == set(t)
    for k in t:
        assert got[k].dtype == t[k].dtype and got[k].shape == t[k].shape
        assert torch.equal(raw_bytes(got[k]), raw_bytes(t[k]))
    assert isinstance(it.report, weightlift.LoadReport)
    assert weightlift.last_report() is it.report


def test_iter_tensors_numpy_and_early_close(ckpt, tmp_path):
    path, t = ckpt
    np_path = str(tmp_path / "np.safetensors")  # numpy has no bf16
    safetensors.torch.save_file({"w2": t["w2"], "i": t["i"]}, np_path)
    got = dict(weightlift.iter_tensors(np_path, framework="np"))
    assert isinstance(got["w2"], np.ndarray)
    np.testing.assert_array_equal(got["w2"], t["w2"].numpy())
    it = weightlift.iter_tensors(path)
    first = next(it)
    it.close()  # waits for the load, drops the rest
    it.close()
    assert first[0] in t
    with pytest.raises(StopIteration):
        next(it)


def test_load_into_module_in_place(tmp_path):
    torch.manual_seed(0)
    src = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.BatchNorm1d(4))
    path = str(tmp_path / "m.safetensors")
    safetensors.torch.save_file(src.state_dict(), path)
    dst = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.BatchNorm1d(4))
    ptrs = {k: v.data_ptr() for k, v in dst.state_dict().items()}
    report = weightlift.load_into(dst, path)
    for k, v in dst.state_dict().items():
        assert v.data_ptr() == ptrs[k]  # filled in place
        assert torch.equal(v, src.state_dict()[k]), k
    assert report.missing_keys == [] and report.unexpected_keys == []
    assert report.tensors == len(src.state_dict())


def test_load_into_state_dict_and_numpy(ckpt):
    path, t = ckpt
    targets = {k: torch.empty_like(v) for k, v in t.items()}
    weightlift.load_into(targets, path)
    for k in t:
        assert torch.equal(raw_bytes(targets[k]), raw_bytes(t[k]))
    arrs = {"w2": np.empty(16, np.float32), "i": np.empty((3, 3), np.int64)}
    r = weightlift.load_into(arrs, path, strict=False)
    np.testing.assert_array_equal(arrs["w2"], t["w2"].numpy())
    assert sorted(r.unexpected_keys) == ["e", "s", "w1"]


def test_load_into_mismatches_are_clear(ckpt):
    path, t = ckpt
    bad = {k: torch.empty_like(v) for k, v in t.items()}
    bad["w1"] = torch.empty(32, 16, dtype=torch.float16)
    with pytest.raises(weightlift.InvalidArgumentError,
                       match=r"'w1': dtype mismatch.*BF16"):
        weightlift.load_into(bad, path)
    bad["w1"] = torch.empty(16, 32, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"'w1': shape mismatch"):
        weightlift.load_into(bad, path)
    bad["w1"] = torch.empty(16, 32, dtype=torch.bfloat16).t()
    with pytest.raises(ValueError, match=r"not contiguous"):
        weightlift.load_into(bad, path)
    bad["w1"] = torch.empty(32, 16, dtype=torch.bfloat16, device="meta")
    with pytest.raises(ValueError, match=r"meta device"):
        weightlift.load_into(bad, path)


def test_load_into_strict(ckpt):
    path, t = ckpt
    partial = {k: torch.empty_like(t[k]) for k in ("w1", "w2")}
    with pytest.raises(weightlift.InvalidArgumentError,
                       match="not in the target"):
        weightlift.load_into(partial, path)
    extra = dict(partial, extra=torch.empty(3))
    with pytest.raises(weightlift.InvalidArgumentError,
                       match="missing from the checkpoint: 'extra'"):
        weightlift.load_into(extra, path)
    r = weightlift.load_into(extra, path, strict=False)
    assert r.missing_keys == ["extra"]
    assert torch.equal(raw_bytes(extra["w1"]), raw_bytes(t["w1"]))


def test_load_into_tied_weights(tmp_path):
    """Two names over one tensor (tied embeddings): the checkpoint holds one
    of them; the other is satisfied through the alias."""
    emb = torch.nn.Embedding(10, 4)
    head = torch.nn.Linear(4, 10, bias=False)
    head.weight = emb.weight
    model = torch.nn.ModuleDict({"emb": emb, "head": head})
    w = torch.randn(10, 4)
    path = str(tmp_path / "tied.safetensors")
    safetensors.torch.save_file({"emb.weight": w}, path)
    r = weightlift.load_into(model, path)
    assert r.missing_keys == []
    assert torch.equal(model["head"].weight, w)


def test_report_object(ckpt):
    path, t = ckpt
    sd = weightlift.load_checkpoint(path)
    r = sd.report
    assert r.tensors == len(t)
    assert r.bytes == sum(v.numel() * v.element_size() for v in t.values())
    assert r.device == "cpu"
    d = r.as_dict()
    for k in ("tensors", "bytes", "seconds", "gb_per_s", "files", "notes",
              "threads", "transfer_seconds"):
        assert k in d
    assert isinstance(str(r), str) and str(r)
    assert "LoadReport" in repr(r)


def _finished_bars(err):
    """The last state of every tqdm bar in ERR (bars redraw with \r)."""
    lines = [seg.strip() for seg in err.replace("\n", "\r").split("\r")]
    return [seg for seg in lines if seg.startswith("weightlift")]


def test_a_load_into_that_raises_has_stopped_writing(tmp_path, monkeypatch):
    """progress=True without tqdm raises ImportError after the load has
    started: the load is cancelled, and by the time the error reaches the
    caller its reads in flight have ended, so nothing writes into the
    targets afterwards (it used to go on writing for as long as the load
    took, and later read the whole file before raising)."""
    import time
    import safetensors.torch
    t = {f"w{i:02d}": torch.full((4 << 20,), float(i + 1)) for i in range(48)}
    path = str(tmp_path / "big.safetensors")
    safetensors.torch.save_file(t, path)
    targets = {k: torch.zeros_like(v) for k, v in t.items()}
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    try:
        weightlift.load_into(targets, path, progress=True, threads=1,
                             backend="pread")
    except ImportError:
        at_raise = {k: v.clone() for k, v in targets.items()}
    else:
        pytest.fail("progress=True without tqdm did not raise")
    time.sleep(0.2)  # a load still running would write on meanwhile
    changed = [k for k in t if not torch.equal(targets[k], at_raise[k])]
    assert changed == [], f"written after the error went up: {changed}"
    # Cancelled: one thread reads 768 MiB in file order, and it was told to
    # stop as the error was raised, long before the last tensor.
    assert not torch.equal(targets["w47"], t["w47"])


def test_a_load_into_that_fails_midway_says_what_it_left_written(tmp_path):
    """The file shrinks after the checkpoint was opened: the load fails
    with the read's error, and the message says that the caller's tensors
    may be partly written (they are not rolled back). Tensors before the
    cut hold the new bytes, the last one does not."""
    import os
    t = {f"w{i:02d}": torch.full((1 << 18,), float(i + 1)) for i in range(8)}
    path = str(tmp_path / "shrinks.safetensors")
    safetensors.torch.save_file(t, path)
    ckpt = weightlift._core.open_checkpoint(path)
    os.truncate(path, os.path.getsize(path) - (1 << 20))
    targets = {k: torch.zeros_like(v) for k, v in t.items()}
    with pytest.raises(weightlift.WeightliftIOError) as got:
        weightlift.load_into(targets, ckpt, threads=1, backend="pread")
    msg = str(got.value)
    assert "shrinks.safetensors" in msg, msg
    assert "load_into: the 8 target tensor(s) on cpu may be partly " \
        "written" in msg, msg
    assert got.value.message == msg
    assert not torch.equal(targets["w07"], t["w07"])


def test_load_into_counts_as_an_in_place_write_for_autograd(tmp_path):
    """A weight saved for backward and then overwritten by load_into: the
    backward refuses, as after an in-place copy_ (safetensors' load_model
    copies, so it refuses too); it used to run on the new values."""
    import safetensors.torch
    path = str(tmp_path / "w.safetensors")
    safetensors.torch.save_file({"w": torch.full((3,), 2.0)}, path)
    w = torch.nn.Parameter(torch.ones(3))
    loss = (w * w).sum()  # saves w for backward
    before = w._version
    weightlift.load_into({"w": w}, path)
    assert torch.equal(w.detach(), torch.full((3,), 2.0))
    assert w._version > before
    with pytest.raises(RuntimeError, match="modified by an inplace"):
        loss.backward()


def test_lazily_conjugated_or_negated_targets_are_refused(tmp_path):
    """A .conj() view's memory holds the unconjugated values: raw bytes
    written there read back conjugated (copy_ would write the right ones).
    Refused before anything is written."""
    import safetensors.torch
    path = str(tmp_path / "z.safetensors")
    z = torch.tensor([1 + 2j, 3 + 4j], dtype=torch.complex64)
    safetensors.torch.save_file({"z": z}, path)
    target = torch.zeros(2, dtype=torch.complex64).conj()
    with pytest.raises(weightlift.InvalidArgumentError, match="conjugated"):
        weightlift.load_into({"z": target}, path)
    assert torch.equal(target.resolve_conj(), torch.zeros(2,
                                                          dtype=torch.complex64))
    neg = torch.zeros(2, dtype=torch.complex64).conj().imag
    if neg.is_neg():
        safetensors.torch.save_file({"i": torch.ones(2)}, path)
        with pytest.raises(weightlift.InvalidArgumentError, match="negated"):
            weightlift.load_into({"i": neg}, path)
    plain = torch.zeros(2, dtype=torch.complex64)
    safetensors.torch.save_file({"z": z}, path)
    weightlift.load_into({"z": plain}, path)
    assert torch.equal(plain, z)


def test_one_iterator_shared_by_threads_hands_each_tensor_out_once(tmp_path):
    """Four threads pulling from one iter_tensors iterator: every tensor
    comes out exactly once, with its own values, and no thread fails (two
    threads at the end of the load used to race: AttributeError)."""
    import threading
    import safetensors.torch
    t = {f"w{i:03d}": torch.full((256,), float(i)) for i in range(200)}
    path = str(tmp_path / "many.safetensors")
    safetensors.torch.save_file(t, path)
    for _ in range(5):
        it = weightlift.iter_tensors(path, threads=2)
        got, errors = [], []

        def pull():
            try:
                for name, tensor in it:
                    got.append((name, tensor))
            except BaseException as e:  # noqa: B036 - reported below
                errors.append(e)
        threads = [threading.Thread(target=pull) for _ in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert errors == []
        assert sorted(n for n, _ in got) == sorted(t)
        assert all(torch.equal(v, t[n]) for n, v in got)


def test_progress_bar(ckpt, capsys):
    """progress=True draws a tqdm bar (on stderr) that ends at the load's
    byte count; progress=False draws nothing."""
    from tqdm import tqdm
    path, t = ckpt
    total = sum(v.numel() * v.element_size() for v in t.values())
    done = f"{tqdm.format_sizeof(total, divisor=1024)}/" \
           f"{tqdm.format_sizeof(total, divisor=1024)} "

    weightlift.torch.load_file(path)
    list(weightlift.iter_tensors(path))
    assert capsys.readouterr().err == ""

    runs = {
        "load_file": lambda: weightlift.torch.load_file(path, progress=True),
        "iter_tensors": lambda: list(weightlift.iter_tensors(
            path, progress=True)),
        "load_into": lambda: weightlift.load_into(
            torch.nn.ParameterDict({
                k: torch.nn.Parameter(torch.empty_like(v),
                                      requires_grad=False)
                for k, v in t.items()}), path, progress=True),
    }
    for what, run in runs.items():
        run()
        bars = _finished_bars(capsys.readouterr().err)
        assert bars, f"{what}: no progress bar on stderr"
        assert "100%" in bars[-1] and done in bars[-1], (what, bars[-1])


def test_load_model_compat(tmp_path):
    src = torch.nn.Linear(3, 2)
    path = str(tmp_path / "lm.safetensors")
    safetensors.torch.save_model(src, path)
    dst = torch.nn.Linear(3, 2)
    missing, unexpected = weightlift.torch.load_model(dst, path)
    # safetensors' types: missing is a set, unexpected a list.
    assert missing == set() and unexpected == []
    assert torch.equal(dst.weight, src.weight)


def test_default_options_match_cpp():
    d = weightlift.default_options()
    assert d["device"] == "cpu" and d["backend"] == "auto"
    assert d["chunk"] == 8 << 20 and d["staging"] == 128 << 20
    assert d["threads"] == 0 and d["gds"] == "auto"
