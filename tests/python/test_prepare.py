"""weightlift.prepare: the loader a later load uses, made ahead of it."""

import pytest
import safetensors.torch
import torch

import weightlift
from weightlift import _core, _options


@pytest.fixture
def ckpt(tmp_path):
    g = torch.Generator().manual_seed(14)
    tensors = {f"w.{i}": torch.randn(64, 48, generator=g) for i in range(4)}
    tensors["bias"] = torch.randn(48, generator=g)
    path = str(tmp_path / "model.safetensors")
    safetensors.torch.save_file(tensors, path)
    return path, tensors


@pytest.fixture(autouse=True)
def no_cached_loaders():
    weightlift.release_cached_loaders()
    yield
    weightlift.release_cached_loaders()


def _idle(options):
    key = _core._pool_key(_options.normalize(options))
    return len(_core._idle.get(key, []))


def test_first_load_pays_for_the_loader_without_it(ckpt):
    path, want = ckpt
    sd = weightlift.load_checkpoint(path, threads=2)
    assert sd.report.setup_seconds > 0
    for k, t in want.items():
        assert torch.equal(sd[k], t), k


def test_prepared_loader_is_the_first_loads(ckpt):
    path, want = ckpt
    assert weightlift.prepare("cpu", threads=2) > 0
    assert _idle({"device": "cpu", "threads": 2}) == 1
    assert weightlift.prepare("cpu", threads=2) == 0  # cached: no second
    assert _idle({"device": "cpu", "threads": 2}) == 1
    sd = weightlift.load_checkpoint(path, threads=2)
    assert sd.report.setup_seconds == 0
    for k, t in want.items():
        assert torch.equal(sd[k], t), k
    # Other options make another loader, which pays its own setup.
    assert weightlift.load_checkpoint(path, threads=3).report.setup_seconds > 0


def test_tensor_parallel_keywords_are_ignored(ckpt):
    path, want = ckpt
    tp = {"tp_rank": 1, "tp_size": 2, "tp_plan": {"w.*": "colwise"}}
    first = weightlift.load_checkpoint(path, threads=2, **tp)
    # A tensor-parallel report carries its loader's setup too.
    assert first.report.setup_seconds > 0
    weightlift.release_cached_loaders()
    weightlift.prepare(torch.device("cpu"), threads=2, progress=False,
                       framework="pt", **tp)
    sd = weightlift.load_checkpoint(path, threads=2, **tp)
    assert sd.report.setup_seconds == 0
    for k, t in want.items():
        part = torch.tensor_split(t, 2, 0)[1] if k.startswith("w.") else t
        assert torch.equal(sd[k], part), k


def test_tensor_parallel_keywords_import_the_tp_code_ahead():
    """A fresh process: prepare with a TP keyword imports weightlift._tp
    (the first TP load would import it on its clock); without one it does
    not (a plain first call does not pay for it)."""
    import subprocess
    import sys
    code = ("import sys, weightlift; weightlift.prepare('cpu'{}); "
            "print('weightlift._tp' in sys.modules)")
    got = [subprocess.run([sys.executable, "-c", code.format(extra)],
                          capture_output=True, text=True, timeout=120,
                          check=True).stdout.strip()
           for extra in ("", ", tp_size=2, tp_rank=0")]
    assert got == ["False", "True"], got


def test_bad_options_raise_what_the_load_raises(ckpt):
    path, _ = ckpt
    for bad, kind in (({"thraeds": 2}, TypeError),
                      ({"threads": -1}, weightlift.InvalidArgumentError),
                      ({"staging": "lots"}, ValueError),
                      ({"framework": "jax"}, ValueError)):
        with pytest.raises(kind) as got:
            weightlift.prepare("cpu", **bad)
        with pytest.raises(kind) as load:
            weightlift.load_checkpoint(path, **bad)
        assert str(got.value) == str(load.value)
    assert _core._idle == {}


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_unusable_device_raises_as_the_load_does(ckpt):
    path, _ = ckpt
    with pytest.raises(weightlift.WeightliftError) as got:
        weightlift.prepare("cuda:0")
    with pytest.raises(weightlift.WeightliftError) as load:
        weightlift.load_checkpoint(path, device="cuda:0")
    assert type(got.value) is type(load.value)
    assert str(got.value) == str(load.value)


def test_iterators_and_handles_take_the_prepared_loader(ckpt):
    """iter_tensors, stream_tensors and safe_open take the loader prepare
    made (no setup in their reports), and give it back to the pool."""
    path, want = ckpt
    opts = {"device": "cpu", "threads": 2}
    weightlift.prepare("cpu", threads=2)
    it = weightlift.iter_tensors(path, threads=2)
    assert _idle(opts) == 0  # in use while the load runs
    got = dict(it)
    assert it.report.setup_seconds == 0
    assert _idle(opts) == 1
    stream = weightlift.stream_tensors(path, threads=2)
    got_s = dict(stream)
    assert stream.report.setup_seconds == 0 and _idle(opts) == 1
    with weightlift.safe_open(path, "pt", threads=2) as f:
        got_f = {k: f.get_tensor(k) for k in f.keys()}
    assert weightlift.last_report().setup_seconds == 0 and _idle(opts) == 1
    for k, t in want.items():
        for have in (got, got_s, got_f):
            assert torch.equal(have[k], t), k


def test_an_iterator_stopped_early_gives_its_loader_back(ckpt):
    path, _ = ckpt
    it = weightlift.iter_tensors(path, threads=2)
    next(it)
    it.close()
    assert _idle({"device": "cpu", "threads": 2}) == 1
    # ... and a second iterator pays no setup.
    it = weightlift.iter_tensors(path, threads=2)
    list(it)
    assert it.report.setup_seconds == 0


def test_a_handles_first_read_is_not_charged_its_loader(ckpt):
    """safe_open makes the loader when it opens (to check the options);
    its first get_tensor through it (a backend named: not the cpu
    handle's own reads) did not wait for that, so its report counts no
    setup, where a load_checkpoint making its own loader counts it."""
    path, want = ckpt
    opts = {"threads": 5, "backend": "pread"}
    with weightlift.safe_open(path, "pt", **opts) as f:
        assert torch.equal(f.get_tensor("w.0"), want["w.0"])
        r = weightlift.last_report()
        assert r.files and r.files[0].path_taken == "pread"
        assert r.setup_seconds == 0
    weightlift.release_cached_loaders()
    sd = weightlift.load_checkpoint(path, **opts)
    assert sd.report.setup_seconds > 0


def test_a_prepared_checkpoint_is_the_next_loads(ckpt, tmp_path):
    """prepare(checkpoint=) opens it now; the next loads of that path take
    the opened checkpoint (no second header parse) and load its bytes."""
    path, want = ckpt
    weightlift.prepare("cpu", checkpoint=path)
    kept = _core._prepared_checkpoint[1]
    assert _core.open_checkpoint(path) is kept
    # The same file by another spelling of its path.
    rel = tmp_path / "." / "model.safetensors"
    assert _core.open_checkpoint(str(rel)) is kept
    sd = weightlift.load_checkpoint(path)
    for k, t in want.items():
        assert torch.equal(sd[k], t), k
    # Another checkpoint is opened as usual.
    other = str(tmp_path / "other.safetensors")
    safetensors.torch.save_file({"x": torch.ones(3)}, other)
    assert _core.open_checkpoint(other) is not kept
    weightlift.release_cached_loaders()
    assert _core._prepared_checkpoint is None
    assert _core.open_checkpoint(path) is not kept


def test_a_prepared_checkpoint_rewritten_since_is_opened_again(ckpt):
    """A file replaced after prepare (new contents, or the same size
    written again) is not served from the kept checkpoint: the load reads
    the file as it is now."""
    path, want = ckpt
    weightlift.prepare("cpu", checkpoint=path)
    kept = _core._prepared_checkpoint[1]
    new = {k: t + 1 for k, t in want.items()}
    safetensors.torch.save_file(new, path)  # same layout, same size
    assert _core.open_checkpoint(path) is not kept
    sd = weightlift.load_checkpoint(path)
    for k, t in new.items():
        assert torch.equal(sd[k], t), k


def test_a_sharded_prepared_checkpoint_notices_a_changed_shard(tmp_path):
    """A folder with an index: the kept checkpoint stands while the folder,
    the index and every shard are unchanged; a shard touched since is a
    miss."""
    import os
    d = tmp_path / "sharded"
    d.mkdir()
    a = {"a": torch.arange(6.0)}
    b = {"b": torch.arange(4.0)}
    safetensors.torch.save_file(a, str(d / "s1.safetensors"))
    safetensors.torch.save_file(b, str(d / "s2.safetensors"))
    (d / "model.safetensors.index.json").write_text(
        '{"weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}}')
    weightlift.prepare("cpu", checkpoint=d)
    kept = _core._prepared_checkpoint[1]
    assert _core.open_checkpoint(str(d)) is kept
    st = os.stat(d / "s2.safetensors")
    os.utime(d / "s2.safetensors",
             ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert _core.open_checkpoint(str(d)) is not kept


def test_preparing_a_missing_checkpoint_raises_as_the_load_does(tmp_path):
    missing = str(tmp_path / "nope")
    with pytest.raises(weightlift.NotFoundError) as want:
        weightlift.load_checkpoint(missing)
    with pytest.raises(weightlift.NotFoundError) as got:
        weightlift.prepare("cpu", checkpoint=missing)
    assert str(got.value) == str(want.value)
    assert _core._prepared_checkpoint is None


def _tp_checkpoint(tmp_path, rows, seed):
    """(path, tensors, plan): a column-parallel weight of ROWS x 6, a
    row-parallel one of 6 x ROWS and a bias, and the plan that says so."""
    g = torch.Generator().manual_seed(seed)
    want = {"w.0": torch.randn(rows, 6, generator=g),
            "w.1": torch.randn(6, rows, generator=g),
            "bias": torch.randn(6, generator=g)}
    path = str(tmp_path / "tp.safetensors")
    safetensors.torch.save_file(want, path)
    return path, want, {"w.0": "colwise", "w.1": "rowwise"}


def test_a_prepared_rank_takes_its_request_made_ahead(tmp_path):
    """prepare(checkpoint=, tp_rank=, tp_size=, tp_plan=) makes the rank's
    request (the C++ shard rule over the kept checkpoint) ahead; the load
    with the same arguments takes it and delivers tensor_split's part; other
    arguments make their own."""
    path, want, plan = _tp_checkpoint(tmp_path, 8, seed=3)
    weightlift.prepare("cpu", checkpoint=path, tp_rank=1, tp_size=2,
                       tp_plan=plan)
    ckpt = _core._prepared_checkpoint[1]
    key, made, block = _core._prepared_tp
    assert key == (1, 2, (("w.0", "colwise"), ("w.1", "rowwise")))
    assert block is None  # no device memory to take ahead on a CPU
    from weightlift import _tp
    req = _tp.take_tp(dict(tp_rank=1, tp_size=2, tp_plan=plan), path)
    assert _tp.rank_requests(ckpt, req) is made
    other = _tp.take_tp(dict(tp_rank=0, tp_size=2, tp_plan=plan), path)
    assert _tp.rank_requests(ckpt, other) is not made
    sd = weightlift.load_checkpoint(path, tp_rank=1, tp_size=2, tp_plan=plan)
    assert torch.equal(sd["w.0"], torch.tensor_split(want["w.0"], 2, 0)[1])
    assert torch.equal(sd["w.1"], torch.tensor_split(want["w.1"], 2, -1)[1])
    assert torch.equal(sd["bias"], want["bias"])
    # A bad rank raises at prepare, as the load would.
    with pytest.raises(weightlift.InvalidArgumentError):
        weightlift.load_checkpoint(path, tp_rank=2, tp_size=2, tp_plan=plan)
    with pytest.raises(weightlift.InvalidArgumentError):
        weightlift.prepare("cpu", checkpoint=path, tp_rank=2, tp_size=2,
                           tp_plan=plan)
    # Another checkpoint prepared: the request made for this one goes.
    other = str(tmp_path / "other.safetensors")
    safetensors.torch.save_file({"x": torch.ones(3)}, other)
    weightlift.prepare("cpu", checkpoint=path, tp_rank=1, tp_size=2,
                       tp_plan=plan)
    assert _core._prepared_tp is not None
    weightlift.prepare("cpu", checkpoint=other)
    assert _core._prepared_tp is None
    weightlift.prepare("cpu", checkpoint=path, tp_rank=1, tp_size=2,
                       tp_plan=plan)
    weightlift.release_cached_loaders()
    assert _core._prepared_tp is None


def test_a_kept_block_goes_once_to_the_load_it_was_made_for(tmp_path):
    """The device block prepare keeps beside a rank's request is handed to
    the load of that rank, size, plan, byte count and device, once (its
    tensors are views of it); a load of anything else leaves it; the next
    prepare(checkpoint=) lets it go. (A CPU tensor stands in for the CUDA
    block here: the hand-over is the same; test_tp runs it on a GPU.)"""
    path = str(tmp_path / "tp.safetensors")
    safetensors.torch.save_file({"w": torch.ones(4, 4)}, path)
    weightlift.prepare("cpu", checkpoint=path, tp_rank=0, tp_size=2,
                       tp_plan={"w": "colwise"})
    ckpt = _core._prepared_checkpoint[1]
    key, made, _ = _core._prepared_tp
    block = torch.empty(96, dtype=torch.uint8)
    _core.keep_tp_request(ckpt, key, made, block)
    cpu = torch.device("cpu")
    other_key = (1,) + key[1:]
    assert _core.take_tp_block(ckpt, other_key, 96, cpu) is None
    assert _core.take_tp_block(ckpt, key, 95, cpu) is None
    assert _core.take_tp_block(ckpt, key, 96, torch.device("meta")) is None
    assert _core._prepared_tp[2] is block  # left for its own load
    assert _core.take_tp_block(ckpt, key, 96, cpu) is block
    assert _core.take_tp_block(ckpt, key, 96, cpu) is None  # once
    # Any later prepare(checkpoint=) lets the block go (the request made
    # for the same, unchanged checkpoint stays).
    _core.keep_tp_request(ckpt, key, made, block)
    weightlift.prepare("cpu", checkpoint=path)
    assert _core._prepared_tp[1] is made and _core._prepared_tp[2] is None
    _core.keep_tp_request(ckpt, key, made, block)
    weightlift.release_cached_loaders()
    assert _core._prepared_tp is None


def test_a_prepared_rank_lands_in_the_block_prepare_took(tmp_path,
                                                         monkeypatch):
    """The CUDA path's hand-over, run on the host: with the one-block path
    switched on for cpu (_load_torch.applies; the loader's LoadSlicesInto
    serves host memory as it does device memory), prepare takes the rank's
    block, a load of another rank leaves it, and the rank's own load lands
    in it, bit-exact, its note saying so; a second load takes a new one;
    iter_tensors and stream_tensors of the rank let it go."""
    from weightlift import _load_torch
    monkeypatch.setattr(_load_torch, "applies",
                        lambda dev, numpy: not numpy)
    path, want, plan = _tp_checkpoint(tmp_path, 16, seed=5)
    kw = dict(tp_rank=1, tp_size=4, tp_plan=plan)

    def check(sd, r):
        assert torch.equal(sd["w.0"],
                           torch.tensor_split(want["w.0"], 4, 0)[r])
        assert torch.equal(sd["w.1"],
                           torch.tensor_split(want["w.1"], 4, -1)[r])
        assert torch.equal(sd["bias"], want["bias"])

    weightlift.prepare("cpu", checkpoint=path, **kw)
    block = _core._prepared_tp[2]
    assert block is not None and block.device.type == "cpu"
    other = weightlift.load_checkpoint(path, device="cpu", tp_rank=2,
                                       tp_size=4, tp_plan=plan)
    check(other, 2)
    assert _core._prepared_tp[2] is block
    start, end = block.data_ptr(), block.data_ptr() + block.numel()
    del block
    got = weightlift.load_checkpoint(path, device="cpu", **kw)
    check(got, 1)
    assert all(start <= t.data_ptr() < end for t in got.values())
    assert _core._prepared_tp[2] is None
    assert any("device memory (the block prepare took)" in n
               for n in got.report.notes), got.report.notes
    again = weightlift.load_checkpoint(path, device="cpu", **kw)
    check(again, 1)
    assert not any(start <= t.data_ptr() < end for t in again.values())
    assert any("device memory from torch's caching allocator" in n
               for n in again.report.notes), again.report.notes
    # The same rank loaded in batches, into memory of their own: the block
    # prepare took is let go rather than held beside them.
    for load in (weightlift.iter_tensors, weightlift.stream_tensors):
        weightlift.prepare("cpu", checkpoint=path, **kw)
        assert _core._prepared_tp[2] is not None
        check(dict(load(path, device="cpu", **kw)), 1)
        assert _core._prepared_tp[2] is None, load.__name__


def test_a_prepared_rank_has_its_row_pages_filled_ahead(tmp_path):
    """prepare(checkpoint=, tp_*) starts filling the page tables of the
    rank's row runs (its row-parallel parts' short runs, which the load
    copies out of a mapping); the load takes that mapping, says how far
    filling got, and delivers tensor_split's part; the load after it, and
    a load through another backend, map nothing of prepare's."""
    g = torch.Generator().manual_seed(4)
    want = {"o_proj": torch.randn(96, 64, generator=g),
            "embed": torch.randn(512, 64, generator=g)}
    path = str(tmp_path / "rows.safetensors")
    safetensors.torch.save_file(want, path)
    plan = {"o_proj": "rowwise"}
    # Every file counts as resident wherever the test runs.
    opts = dict(tp_rank=1, tp_size=2, tp_plan=plan, resident_threshold=0)
    weightlift.prepare("cpu", checkpoint=path, **opts)
    sd = weightlift.load_checkpoint(path, **opts)
    reason = weightlift.last_report().files[0].reason
    assert "whose pages prepare filled: 96 of 96 runs" in reason, reason
    assert torch.equal(sd["o_proj"],
                       torch.tensor_split(want["o_proj"], 2, -1)[1])
    assert torch.equal(sd["embed"], want["embed"])
    weightlift.load_checkpoint(path, **opts)
    assert "prepare filled" not in weightlift.last_report().files[0].reason
    # Another backend copies no runs out of a mapping: nothing is filled.
    weightlift.prepare("cpu", checkpoint=path, backend="pread", **opts)
    sd = weightlift.load_checkpoint(path, backend="pread", **opts)
    assert "prepare filled" not in weightlift.last_report().files[0].reason
    assert torch.equal(sd["o_proj"],
                       torch.tensor_split(want["o_proj"], 2, -1)[1])
