"""weightlift._load_torch: one block of torch's, a view per tensor, the
loader writing into it (LoadInto). load_checkpoint and load_file use it for
cuda devices (test_cuda.py runs it there); the same code runs here on the
host, against the real safetensors package on real files."""

import pytest
import safetensors.torch
import torch
from conftest import random_tensor, raw_bytes, storage_nbytes, torch_dtypes, \
    write_raw

import weightlift
from weightlift import _core, _load_torch

SHAPES = [(), (0,), (7,), (33, 65), (2, 0, 3), (3, 4, 5)]


@pytest.fixture
def every_dtype(tmp_path, gen):
    t = {f"{name}.{i}": random_tensor(dt, shape, gen)
         for name, dt in torch_dtypes().items()
         for i, shape in enumerate(SHAPES)}
    path = str(tmp_path / "all.safetensors")
    safetensors.torch.save_file(t, path)
    return path


def _load(path, names=None):
    return _load_torch.load(_core.open_checkpoint(path), "cpu", {}, False,
                            names=names)


def test_views_of_one_block_equal_safetensors(every_dtype):
    items, report = _load(every_dtype)
    want = safetensors.torch.load_file(every_dtype)
    assert [n for n, _ in items] == list(want)
    got = dict(items)
    block = None
    for k, w in want.items():
        g = got[k]
        assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape), k
        assert g.is_contiguous(), k
        assert torch.equal(raw_bytes(g), raw_bytes(w)), k
        if w.numel():
            # Every non-empty tensor is a view of the one block.
            size = storage_nbytes(g)
            assert block in (None, size), k
            block = size
    assert block >= sum(w.numel() * w.element_size() for w in want.values())
    assert report.bytes == sum(w.numel() * w.element_size()
                               for w in want.values())
    assert report is weightlift.last_report()


def test_report_covers_the_call(every_dtype):
    _, r = _load(every_dtype)
    parts = r.setup_seconds + r.open_seconds + r.alloc_seconds + \
        r.transfer_seconds
    assert 0 < parts <= r.seconds
    assert any(n.startswith("python: checkpoint open") for n in r.notes)
    assert r.gb_per_s == pytest.approx(r.bytes / r.seconds / 1e9)


def test_names_keep_checkpoint_order(every_dtype):
    names = ["F32.3", "BF16.5", "U8.2"]
    items, _ = _load(every_dtype, names)
    want = safetensors.torch.load_file(every_dtype)
    assert [n for n, _ in items] == [k for k in want if k in names]
    for n, t in items:
        assert torch.equal(raw_bytes(t), raw_bytes(want[n])), n


def test_every_tensor_empty_reads_nothing(tmp_path):
    path = str(tmp_path / "empty.safetensors")
    safetensors.torch.save_file({"a": torch.zeros(0, 3), "b": torch.zeros(0)},
                                path)
    items, r = _load(path)
    assert [(n, tuple(t.shape)) for n, t in items] == [("a", (0, 3)),
                                                       ("b", (0,))]
    assert r.bytes == 0


def test_unsupported_dtype_raises_before_any_memory(tmp_path, monkeypatch):
    path = write_raw(str(tmp_path / "f6.safetensors"),
                     [("ok", "F32", [2], b"\0" * 8),
                      ("bad", "F6_E2M3", [4], b"\0" * 3)])

    def no_block(*a, **k):
        raise AssertionError("memory taken before the dtype was checked")

    monkeypatch.setattr(torch, "empty", no_block)
    with pytest.raises(weightlift.UnsupportedDtypeError, match="F6_E2M3"):
        _load(path)


def test_bad_option_raises_before_any_memory(every_dtype, monkeypatch):
    def no_block(*a, **k):
        raise AssertionError("memory taken before the options were checked")

    monkeypatch.setattr(torch, "empty", no_block)
    with pytest.raises((TypeError, ValueError, weightlift.WeightliftError)):
        _load_torch.load(_core.open_checkpoint(every_dtype), "cpu",
                         {"frobnicate": 1}, False)


def test_only_cuda_torch_loads_take_this_path():
    assert _load_torch.applies("cuda:0", False)
    assert not _load_torch.applies("cuda:0", True)  # numpy
    assert not _load_torch.applies("cpu", False)


def test_open_beside_loader_makes_the_loader_meanwhile(every_dtype):
    opts = {"device": "cpu", "threads": 3}  # options no other test pools
    _core.release_cached_loaders()
    assert not _core.has_idle_loader(opts)
    ckpt, open_s, prepared = _load_torch.open_beside_loader(every_dtype, opts)
    assert prepared is None  # nothing to prepare: nothing allocated
    assert open_s >= 0  # the part of the open not beside the setup
    assert [t[0] for t in ckpt.tensors()] == \
        [t[0] for t in _core.open_checkpoint(every_dtype).tensors()]
    assert _core.has_idle_loader(opts)  # made on the other thread, pooled
    # With a loader pooled, no thread: the same checkpoint.
    again, _, _ = _load_torch.open_beside_loader(every_dtype, opts)
    assert len(again) == len(ckpt)


def test_open_beside_loader_allocates_beside_the_setup(every_dtype,
                                                       monkeypatch):
    """With a PREPARE (whole_block), the layout and the block for every
    tensor are made while the loader is made (a first call); only their
    time beyond the setup is the report's. A bad option value (checked in
    C++) is raised before any memory is taken. A later call (a loader
    pooled) prepares after its open, with all of that time its own."""
    opts = {"device": "cpu", "threads": 5}  # options no other test pools
    _core.release_cached_loaders()
    ckpt, _, prepared = _load_torch.open_beside_loader(
        every_dtype, opts, _load_torch.whole_block("cpu"))
    layout, total = _load_torch._layout(ckpt.tensors())
    assert prepared is not None
    got_layout, base, got_total = prepared.value
    assert got_total == total and base.numel() == total
    assert [r[0] for r in got_layout] == [r[0] for r in layout]
    assert 0 <= prepared.seconds <= prepared.took
    # A later call: a loader is pooled; the block is made after the open.
    _, _, later = _load_torch.open_beside_loader(
        every_dtype, opts, _load_torch.whole_block("cpu"))
    assert later is not None and later.seconds == later.took
    assert later.value[2] == total and later.note() == ""
    taken = []
    real_block = _load_torch._block
    monkeypatch.setattr(_load_torch, "_block",
                        lambda *a: taken.append(a) or real_block(*a))
    with pytest.raises(weightlift.InvalidArgumentError, match="threads"):
        _load_torch.open_beside_loader(every_dtype,
                                       {"device": "cpu", "threads": -1},
                                       _load_torch.whole_block("cpu"))
    assert taken == []


def test_open_beside_loader_errors(tmp_path):
    missing = str(tmp_path / "nope.safetensors")
    # A bad option is named before a missing file, as load_file does.
    with pytest.raises(TypeError, match="threads"):
        _load_torch.open_beside_loader(missing, {"device": "cpu",
                                                 "threads": "many"})
    with pytest.raises(weightlift.NotFoundError, match="nope"):
        _load_torch.open_beside_loader(missing, {"device": "cpu"})
