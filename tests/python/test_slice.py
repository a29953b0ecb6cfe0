"""safe_open metadata() and get_slice() against the real safetensors package.

The reference is safetensors itself, opened on the same file: metadata()
must tell an absent __metadata__ (None) from an empty one ({}), and every
get_slice(name)[index] must give the same dtype, shape and bytes (or raise
the same exception type) for basic indices (only the rows they touch read
from the file) and for every other index (loaded whole, then indexed by
torch). The numpy framework's own rules are in test_dropin_slice.py.
"""

import os

import numpy as np
import pytest
import safetensors
import safetensors.numpy
import safetensors.torch
import torch
from conftest import random_tensor, write_raw
from conftest import raw_bytes as _raw_bytes

import weightlift
import weightlift.torch
from weightlift import _safe_open

E = Ellipsis

# Every index kind: row ranges (fast path), ints, negative and out-of-range
# bounds, empty ranges, steps, Ellipsis, None/bool (new axes), lists, too
# many indices, and indices that must fail.
INDICES = [
    slice(1, 3), slice(0, 1), slice(None), slice(None, 2), slice(2, None),
    slice(-2, None), slice(None, -1), slice(-3, -1), slice(3, 1),
    slice(2, 2), slice(0, 100), slice(-100, 2), slice(2, -100),
    slice(100, 200), slice(None, None, 1), slice(1, 3, 1),
    slice(None, None, 2), slice(1, None, 3), slice(None, None, -1),
    0, 1, 4, -1, -5, 5, -6, 100,
    (), E, (E,), (slice(1, 3), E), (E, slice(1, 3)), (E, 1), (1, E),
    (slice(1, 3), slice(None)), (slice(1, 3), slice(None), slice(None)),
    (slice(1, 3), slice(None), E), (slice(1, 3), slice(1, 2)),
    (slice(None), 0), (slice(None), slice(None, None, 2)), (1, 2), (1, 2, 0),
    (-1, slice(None)), (slice(1, 3), E, slice(None)), (E, E),
    (slice(1, 3), slice(None), slice(None), slice(None)), (1, 2, 0, 0),
    None, (slice(1, 3), None), (None, slice(1, 3)), True, False, [0, 2],
    (slice(np.int64(1), 3),), np.int64(2),
]

# (dtype, shape): 1-D, 3-D, zero rows, zero-size inner dims, a scalar.
TENSORS = {
    "w": (torch.float32, (5, 4, 3)),
    "b": (torch.bfloat16, (5, 6)),
    "v": (torch.int16, (7,)),
    "k": (torch.bool, (5, 2)),
    "c": (torch.complex64, (5, 2)),
    "z": (torch.float16, (0, 3)),
    "e": (torch.int64, (5, 0, 2)),
    "s": (torch.float64, ()),
}


def raw_bytes(t):
    # torch 1.13 cannot view some empty strided tensors as bytes.
    if t.numel() == 0:
        return torch.empty(0, dtype=torch.uint8)
    return _raw_bytes(t)


def _idx_id(i):
    return repr(i).replace(" ", "")


@pytest.fixture(scope="module")
def slice_file(tmp_path_factory):
    gen = torch.Generator().manual_seed(7)
    t = {k: random_tensor(dt, shape, gen) for k, (dt, shape) in
         TENSORS.items()}
    path = str(tmp_path_factory.mktemp("slice") / "s.safetensors")
    safetensors.torch.save_file(t, path)
    return path


def _outcome(fn):
    try:
        return fn(), None
    except Exception as e:  # noqa: BLE001 - compared below
        return None, e


def _assert_same_torch(ours, ref, what):
    assert isinstance(ours, torch.Tensor), what
    assert ours.dtype == ref.dtype, what
    assert tuple(ours.shape) == tuple(ref.shape), what
    assert ours.device == ref.device, what
    assert torch.equal(raw_bytes(ours), raw_bytes(ref)), what


# -- metadata ---------------------------------------------------------------

@pytest.mark.parametrize("meta", [None, {}, {"format": "pt"},
                                  {"a": "1", "b": ""}],
                         ids=["absent", "empty", "one", "two"])
@pytest.mark.parametrize("framework", ["pt", "np"])
@pytest.mark.parametrize("with_tensors", [True, False],
                         ids=["tensors", "no_tensors"])
def test_metadata_matches_safetensors(tmp_path, meta, framework,
                                      with_tensors):
    path = str(tmp_path / "m.safetensors")
    entries = [("x", "F32", [2], b"\0" * 8)] if with_tensors else []
    write_raw(path, entries, metadata=meta)
    with safetensors.safe_open(path, framework) as ref:
        expected = ref.metadata()
    # What safetensors does: {} stays {}, only an absent key is None.
    assert expected == meta and (expected is None) == (meta is None)
    with weightlift.safe_open(path, framework) as f:
        got = f.metadata()
        assert got == expected
        assert (got is None) == (expected is None)
        if got is not None:
            got["mutated"] = "x"  # a copy: the handle's value is unchanged
            assert f.metadata() == expected


def test_metadata_empty_written_by_safetensors(tmp_path):
    path = str(tmp_path / "m.safetensors")
    safetensors.torch.save_file({"x": torch.ones(3)}, path, metadata={})
    with safetensors.safe_open(path, "pt") as ref, \
            weightlift.safe_open(path, "pt") as f:
        assert f.metadata() == ref.metadata() == {}


def test_metadata_of_a_sharded_checkpoint_is_the_first_files(tmp_path):
    d = tmp_path / "ckpt"
    d.mkdir()
    write_raw(str(d / "a.safetensors"), [("x", "U8", [1], b"\1")],
              metadata={})
    write_raw(str(d / "b.safetensors"), [("y", "U8", [1], b"\2")],
              metadata={"k": "v"})
    with weightlift.safe_open(str(d), "pt") as f:
        assert f.metadata() == {}
    ckpt = weightlift._core.open_checkpoint(str(d))
    assert [fi["has_metadata"] for fi in ckpt.files()] == [True, True]


# -- get_slice ----------------------------------------------------------------

def _reference_raised(what, got_err, want_err):
    """Where the reference raised, asserts weightlift raised the same type
    and returns True (nothing more to compare); else asserts weightlift did
    not raise and returns False."""
    if want_err is not None:
        assert got_err is not None, f"{what}: expected {want_err!r}"
        assert type(got_err) is type(want_err), (what, got_err, want_err)
        return True
    assert got_err is None, f"{what}: {got_err!r}"
    return False


@pytest.mark.parametrize("index", INDICES, ids=_idx_id)
@pytest.mark.parametrize("name", list(TENSORS))
def test_get_slice_torch_matches_safetensors(slice_file, name, index):
    with safetensors.safe_open(slice_file, "pt") as ref, \
            weightlift.safe_open(slice_file, "pt", device="cpu") as f:
        want, want_err = _outcome(lambda: ref.get_slice(name)[index])
        got, got_err = _outcome(lambda: f.get_slice(name)[index])
    what = f"{name}[{index!r}]"
    if _reference_raised(what, got_err, want_err):
        return
    _assert_same_torch(got, want, what)


# Indices both frameworks accept (numpy follows safetensors' own rules, which
# refuse negative slice bounds and out-of-range stops; see
# test_dropin_slice.py), then torch-only ones.
ROW_INDICES = [slice(1, 3), 2, -1, (slice(1, 4), slice(None)),
               (slice(1, 4), E), E, (), (slice(None), 1),
               slice(None, None, 2), (slice(1, 4), slice(1, 3), 2)]
ROW_INDICES_PT = [slice(-2, None), slice(3, 1), slice(0, 100),
                  (slice(-3, None), slice(None), slice(None, None, 2))]


def _no_full_load(monkeypatch):
    def fail(self, name):
        raise AssertionError(f"whole tensor loaded: {name}")
    monkeypatch.setattr(_safe_open._Source, "load_one", fail)


@pytest.mark.parametrize("framework,index",
                         [(fw, i) for i in ROW_INDICES for fw in ("pt", "np")]
                         + [("pt", i) for i in ROW_INDICES_PT],
                         ids=lambda v: _idx_id(v) if not isinstance(v, str)
                         else v)
def test_basic_indices_read_only_the_rows_they_touch(slice_file, monkeypatch,
                                                     framework, index):
    """A basic index never loads the whole tensor: the loader reads it as a
    slice request, never beyond the rows of the first dimension it touches
    (buffered reads: granularity 1), and the result owns exactly its own
    bytes (no view into a bigger buffer)."""
    _no_full_load(monkeypatch)
    weightlift._core.set_last_report(None)
    with weightlift.safe_open(slice_file, framework) as f:
        part = f.get_slice("w")[index]
    report = weightlift.last_report()
    ref = safetensors.torch.load_file(slice_file)["w"]
    want = ref[index]
    row_bytes = 4 * 3 * 4
    touched = torch.arange(5)[index if not isinstance(index, tuple)
                              else index[0] if index and index[0] is not E
                              else slice(None)]
    rows = (int(touched.max()) - int(touched.min()) + 1
            if touched.numel() else 0)
    assert report is not None
    assert report.bytes == want.numel() * 4
    assert report.bytes_read <= (rows * row_bytes if want.numel() else 0)
    if framework == "np":
        assert isinstance(part, np.ndarray)
        root = part
        while isinstance(root.base, np.ndarray):
            root = root.base
        assert root.nbytes == want.numel() * 4
        part = torch.from_numpy(part)
    else:
        assert part.storage().nbytes() == want.numel() * 4
    assert part.shape == want.shape
    assert torch.equal(raw_bytes(part), raw_bytes(want))


def test_other_indices_load_the_whole_tensor_once(slice_file, monkeypatch):
    """Indices beyond basic indexing (new axes, lists) are torch's: the
    tensor is loaded once, cached on the slice, and indexed with torch."""
    calls = []
    real = _safe_open._Source.load_one

    def counting(self, name):
        calls.append(name)
        return real(self, name)

    monkeypatch.setattr(_safe_open._Source, "load_one", counting)
    with weightlift.safe_open(slice_file, "pt") as f:
        s = f.get_slice("w")
        a = s[None]
        b = s[[0, 2]]
        c = s[1:3]  # basic: read from the file, not from the cache
    full = safetensors.torch.load_file(slice_file)["w"]
    assert calls == ["w"]
    for got, want in ((a, full[None]), (b, full[[0, 2]]), (c, full[1:3])):
        assert got.shape == want.shape
        assert torch.equal(raw_bytes(got), raw_bytes(want))


def test_row_ranges_in_the_second_shard(tmp_path):
    gen = torch.Generator().manual_seed(3)
    d = tmp_path / "ckpt"
    d.mkdir()
    parts = [{"a": random_tensor(torch.float32, (4, 3), gen)},
             {"b": random_tensor(torch.int32, (6, 2), gen),
              "c": random_tensor(torch.float16, (3, 5), gen)}]
    for i, p in enumerate(parts):
        safetensors.torch.save_file(p, str(d / f"m-{i}.safetensors"))
    with weightlift.safe_open(str(d), "pt") as f:
        for p in parts:
            for name, t in p.items():
                for idx in (slice(1, 3), -1, slice(None)):
                    got = f.get_slice(name)[idx]
                    assert got.shape == t[idx].shape
                    assert torch.equal(raw_bytes(got), raw_bytes(t[idx]))


def test_sub_byte_dtype_takes_the_general_path(tmp_path):
    path = str(tmp_path / "f4.safetensors")
    data = bytes(range(8))
    write_raw(path, [("f4", "F4", [4, 4], data)])
    with weightlift.safe_open(path, "pt") as f:
        full = f.get_tensor("f4")
        for idx in (slice(1, 3), 0, slice(None)):
            got = f.get_slice("f4")[idx]
            # torch >= 2.8 hands F4 out as float4_e2m1fn_x2, which has no
            # torch.equal: compare the bytes.
            assert got.dtype == full.dtype and got.shape == full[idx].shape
            assert torch.equal(raw_bytes(got), raw_bytes(full[idx]))


def test_file_shrunk_after_open_raises_ioerror(tmp_path):
    path = str(tmp_path / "t.safetensors")
    safetensors.torch.save_file({"w": torch.arange(40.0).reshape(10, 4)},
                                path)
    with weightlift.safe_open(path, "pt") as f:
        s = f.get_slice("w")
        assert torch.equal(s[0:2], torch.arange(8.0).reshape(2, 4))
        os.truncate(path, os.path.getsize(path) - 16)
        with pytest.raises(OSError) as err:
            s[8:10]
        assert isinstance(err.value, weightlift.WeightliftError)
        assert path in str(err.value)
        assert "changed since" in str(err.value)


def test_row_slice_is_writable_and_independent(slice_file):
    with weightlift.safe_open(slice_file, "pt") as f:
        s = f.get_slice("w")
        a = s[1:3]
        a.zero_()
        assert not torch.equal(s[1:3], a)
    with weightlift.safe_open(slice_file, "np") as f:
        b = f.get_slice("w")[0:2]
        assert b.flags.writeable and b.flags.aligned
        b[...] = 0


def test_an_unusable_device_is_refused_at_open(slice_file):
    """A handle on a device that cannot be loaded onto (an unknown device;
    cuda where there is none) is refused at safe_open, with the error a
    load onto that device raises, instead of failing at the first read."""
    from conftest import HAS_CUDA
    devices = ["meta"] + ([] if HAS_CUDA else ["cuda:0"])
    for device in devices:
        with pytest.raises(weightlift.WeightliftError) as load:
            weightlift.torch.load_file(slice_file, device=device)
        with pytest.raises(type(load.value)):
            weightlift.safe_open(slice_file, "pt", device=device)
