"""safe_open, load_file and load against the real safetensors package, on the
same files: each call's result bit for bit, or the exception class (and,
where the drop-in promise names it, the message)."""

import os

import numpy as np
import pytest
import safetensors
import safetensors.numpy
import safetensors.torch
import torch
from conftest import random_tensor, write_raw
from dropin_util import assert_same_outcome, assert_same_value

import weightlift
import weightlift.numpy
import weightlift.torch

FRAMEWORKS = ["pt", "np"]


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    gen = torch.Generator().manual_seed(11)
    t = {"w": random_tensor(torch.float32, (6, 4), gen),
         "b": random_tensor(torch.int64, (3,), gen),
         "h": random_tensor(torch.float16, (2, 3, 2), gen),
         "s": random_tensor(torch.float64, (), gen),
         "e": torch.zeros(0, 5),
         "k": random_tensor(torch.bool, (7,), gen)}
    path = str(tmp_path_factory.mktemp("dropin") / "m.safetensors")
    # Saved in a name order different from the offset order on purpose.
    safetensors.torch.save_file(t, path, metadata={"format": "pt"})
    return path


def _both(path, framework, fn, **kw):
    """FN(handle) on a weightlift handle and on a safetensors handle."""
    def ours():
        with weightlift.safe_open(path, framework, **kw) as f:
            return fn(f)

    def theirs():
        with safetensors.safe_open(path, framework, **kw) as f:
            return fn(f)
    return ours, theirs


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("call", ["keys", "offset_keys", "metadata",
                                  "get_tensors"])
def test_handle_calls_match(model_file, framework, call):
    ours, theirs = _both(model_file, framework,
                         lambda f: getattr(f, call)())
    assert_same_outcome(ours, theirs, f"{framework}.{call}()")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_get_tensors_is_every_get_tensor_in_offset_order(model_file,
                                                        framework):
    with weightlift.safe_open(model_file, framework) as f:
        every = f.get_tensors()
        assert list(every) == f.offset_keys()
        for name in f.keys():
            assert_same_value(every[name], f.get_tensor(name), name)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("name", ["w", "b", "h", "s", "e", "k", "absent"])
def test_get_tensor_matches(model_file, framework, name):
    ours, theirs = _both(model_file, framework,
                         lambda f: f.get_tensor(name))
    assert_same_outcome(ours, theirs, f"{framework} get_tensor({name})",
                        message=name == "absent")


@pytest.mark.parametrize("kw", [
    {"backend": "foo"}, {"backend": "mmap"}, {"backend": "pread"},
    {"device": "foo"}, {"device": "cuda:x"}, {"device": "meta"},
    {"device": "cpu"},
], ids=repr)
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_open_arguments_match(model_file, framework, kw):
    """An invalid backend= or device= raises SafetensorError at safe_open,
    before any tensor is asked for; a valid one loads the same data."""
    def open_only(cls):
        return lambda: cls(model_file, framework, **kw).keys()
    assert_same_outcome(open_only(weightlift.safe_open),
                        open_only(safetensors.safe_open),
                        f"safe_open({framework}, {kw})")
    ours, theirs = _both(model_file, framework,
                         lambda f: f.get_tensor("w"), **kw)
    assert_same_outcome(ours, theirs, f"get_tensor with {kw}")


@pytest.mark.parametrize("framework", ["foo", "", "PT", "tensorflow"])
def test_invalid_framework_is_a_safetensor_error(model_file, framework):
    with pytest.raises(safetensors.SafetensorError):
        safetensors.safe_open(model_file, "foo")
    with pytest.raises(safetensors.SafetensorError,
                       match=f"framework {framework} is"):
        weightlift.safe_open(model_file, framework)


def test_numpy_handle_on_a_device_is_a_safetensor_error(model_file):
    assert_same_outcome(
        lambda: weightlift.safe_open(model_file, "np", device="cuda:0"),
        lambda: safetensors.safe_open(model_file, "np", device="cuda:0"),
        "np on cuda:0")


@pytest.mark.parametrize("call", ["keys", "offset_keys", "metadata",
                                  "get_tensors", "get_tensor", "get_slice"])
def test_handle_after_close_raises_safetensor_error(model_file, call):
    args = ("w",) if call in ("get_tensor", "get_slice") else ()

    def after_close(cls):
        def run():
            with cls(model_file, "pt") as f:
                pass
            return getattr(f, call)(*args)
        return run
    _, err = assert_same_outcome(after_close(weightlift.safe_open),
                                 after_close(safetensors.safe_open),
                                 f"{call} after close", message=True)
    assert isinstance(err, safetensors.SafetensorError)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("index", [slice(1, 3), 2, (slice(None), 1),
                                   slice(None, None, 2), ()], ids=repr)
def test_slice_taken_inside_the_block_works_after_close(model_file,
                                                        framework, index):
    def slice_after_close(cls):
        def run():
            with cls(model_file, framework) as f:
                s = f.get_slice("w")
            return s[index], s.get_shape(), s.get_dtype()
        return run
    got, _ = assert_same_outcome(slice_after_close(weightlift.safe_open),
                                 slice_after_close(safetensors.safe_open),
                                 f"{framework} slice {index!r} after close")
    assert got is not None


@pytest.mark.parametrize("path", ["notafile", "no/such/dir/x.safetensors"])
def test_missing_file_says_what_safetensors_says(tmp_path, path,
                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)
    calls = [
        (lambda: weightlift.safe_open(path, "pt"),
         lambda: safetensors.safe_open(path, "pt")),
        (lambda: weightlift.torch.load_file(path),
         lambda: safetensors.torch.load_file(path)),
        (lambda: weightlift.numpy.load_file(path),
         lambda: safetensors.numpy.load_file(path)),
    ]
    for ours, theirs in calls:
        _, err = assert_same_outcome(ours, theirs, path, message=True)
        assert isinstance(err, FileNotFoundError)
        assert str(err) == f"No such file or directory: {path}"


def test_a_path_with_a_nul_byte_opens_nothing(tmp_path, monkeypatch):
    """"real.safetensors\\0x" exists only up to the NUL: the system calls
    would open real.safetensors. safetensors says the file is missing, and
    so does weightlift (it used to load real.safetensors)."""
    monkeypatch.chdir(tmp_path)
    safetensors.torch.save_file({"w": torch.ones(2)}, "real.safetensors")
    path = "real.safetensors\0x"
    calls = [
        (lambda: weightlift.safe_open(path, "pt"),
         lambda: safetensors.safe_open(path, "pt")),
        (lambda: weightlift.torch.load_file(path),
         lambda: safetensors.torch.load_file(path)),
    ]
    for ours, theirs in calls:
        _, err = assert_same_outcome(ours, theirs, repr(path), message=True)
        assert isinstance(err, FileNotFoundError)


def test_arguments_are_checked_before_the_file(tmp_path, monkeypatch):
    """An invalid backend or device on a missing file: safetensors checks
    the arguments first (SafetensorError), then the file."""
    monkeypatch.chdir(tmp_path)
    calls = [
        (lambda: weightlift.safe_open("nope", "pt", backend="foo"),
         lambda: safetensors.safe_open("nope", "pt", backend="foo")),
        (lambda: weightlift.safe_open("nope", "pt", device="foo"),
         lambda: safetensors.safe_open("nope", "pt", device="foo")),
        (lambda: weightlift.safe_open("nope", "foo"),
         lambda: safetensors.safe_open("nope", "foo")),
        (lambda: weightlift.torch.load_file("nope", device="foo"),
         lambda: safetensors.torch.load_file("nope", device="foo")),
        (lambda: weightlift.torch.load_file("nope", backend="foo"),
         lambda: safetensors.torch.load_file("nope", backend="foo")),
        (lambda: weightlift.numpy.load_file("nope", backend="foo"),
         lambda: safetensors.numpy.load_file("nope", backend="foo")),
    ]
    for i, (ours, theirs) in enumerate(calls):
        _, err = assert_same_outcome(ours, theirs, f"call {i}")
        assert isinstance(err, safetensors.SafetensorError), (i, err)


def test_missing_shard_names_the_shard(tmp_path):
    """Only the path itself gets safetensors' words; a shard missing from an
    index keeps the loader's message, which names the shard (safetensors
    opens single files only)."""
    d = tmp_path / "ckpt"
    d.mkdir()
    write_raw(str(d / "a.safetensors"), [("x", "U8", [1], b"\1")])
    (d / "model.safetensors.index.json").write_text(
        '{"weight_map": {"x": "a.safetensors", "y": "gone.safetensors"}}')
    with pytest.raises(weightlift.WeightliftError) as err:
        weightlift.safe_open(str(d / "model.safetensors.index.json"), "pt")
    assert "gone.safetensors" in str(err.value)
    assert "No such file or directory" not in str(err.value)


@pytest.mark.parametrize("device", ["cpu", 0, "foo"], ids=repr)
def test_torch_load_file_matches(model_file, device):
    if device == 0 and not torch.cuda.is_available():
        # safetensors hands device 0 to torch, which fails without CUDA;
        # weightlift refuses it at the loader. Both raise; classes differ.
        with pytest.raises(weightlift.WeightliftError):
            weightlift.torch.load_file(model_file, device=device)
        return
    assert_same_outcome(
        lambda: weightlift.torch.load_file(model_file, device=device),
        lambda: safetensors.torch.load_file(model_file, device=device),
        f"torch.load_file(device={device!r})")


def test_numpy_load_file_matches(model_file):
    assert_same_outcome(lambda: weightlift.numpy.load_file(model_file),
                        lambda: safetensors.numpy.load_file(model_file),
                        "numpy.load_file")


@pytest.mark.parametrize("ours_load,theirs_load", [
    (weightlift.numpy.load, safetensors.numpy.load),
    (weightlift.torch.load, safetensors.torch.load),
], ids=["numpy", "torch"])
def test_load_from_bytes_matches(model_file, ours_load, theirs_load):
    with open(model_file, "rb") as f:
        data = f.read()
    ours = ours_load(data)
    theirs = theirs_load(data)
    # safetensors.numpy.load returns hash-map order; compare by name.
    assert sorted(ours) == sorted(theirs)
    for k in theirs:
        assert_same_value(ours[k], theirs[k], k)


def test_every_error_in_the_drop_in_api_is_catchable_as_before(model_file):
    """Code written for safetensors catches SafetensorError around these."""
    for bad in (lambda: weightlift.safe_open(model_file, "pt",
                                             backend="nope"),
                lambda: weightlift.safe_open(model_file, "nope"),
                lambda: weightlift.torch.load_file(model_file,
                                                   device="nope")):
        with pytest.raises(safetensors.SafetensorError):
            bad()


def test_handle_holds_no_file_descriptor_after_close(model_file):
    """The open checkpoint holds its files open (so a file replaced under
    it is never read by mistake) while the handle, or a slice taken from
    it, can still read; once both are gone no descriptor is left."""
    fd_dir = f"/proc/{os.getpid()}/fd"
    before = len(os.listdir(fd_dir))
    with weightlift.safe_open(model_file, "np") as f:
        s = f.get_slice("w")
        np.asarray(s[1:2])
    np.asarray(s[0:1])  # a slice reads after its handle was closed
    del s
    assert len(os.listdir(fd_dir)) == before


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device")


@needs_cuda
@pytest.mark.parametrize("device", ["cuda:0", "cuda", 0], ids=repr)
def test_cuda_handle_matches(model_file, device):
    """On a GPU: get_tensor, get_tensors and basic and other slices of a
    cuda handle give safetensors' tensors, on the same device, bit for
    bit."""
    calls = {
        "get_tensors": lambda f: f.get_tensors(),
        "get_tensor": lambda f: f.get_tensor("h"),
        "rows": lambda f: f.get_slice("w")[1:4],
        "strided": lambda f: f.get_slice("h")[:, 1:, ::2],
        "int": lambda f: f.get_slice("w")[-1],
        "0-d": lambda f: f.get_slice("s")[()],
        "list": lambda f: f.get_slice("w")[[0, 2]],
    }
    for what, fn in calls.items():
        ours, theirs = _both(model_file, "pt", fn, device=device)
        assert_same_outcome(ours, theirs, f"{device} {what}")


@needs_cuda
def test_cuda_load_file_matches(model_file):
    assert_same_outcome(
        lambda: weightlift.torch.load_file(model_file, device="cuda:0"),
        lambda: safetensors.torch.load_file(model_file, device="cuda:0"),
        "load_file cuda:0")


def _corrupt_files(d):
    import json
    import struct

    def header(h, data=b""):
        raw = json.dumps(h).encode()
        return struct.pack("<Q", len(raw)) + raw + data
    return {
        "empty": b"",
        "short": b"\x01",
        "huge_header_len": struct.pack("<Q", 1 << 40) + b"{}",
        "not_json": struct.pack("<Q", 4) + b"{{{{",
        "past_end": header({"x": {"dtype": "F32", "shape": [4],
                                  "data_offsets": [0, 16]}}, b"\0" * 8),
        "overlap": header({"x": {"dtype": "U8", "shape": [4],
                                 "data_offsets": [0, 4]},
                           "y": {"dtype": "U8", "shape": [4],
                                 "data_offsets": [2, 6]}}, b"\0" * 6),
        "shape_size": header({"x": {"dtype": "F32", "shape": [3],
                                    "data_offsets": [0, 8]}}, b"\0" * 8),
        "bad_dtype": header({"x": {"dtype": "Q7", "shape": [1],
                                   "data_offsets": [0, 1]}}, b"\0"),
    }


@pytest.mark.parametrize("kind", list(_corrupt_files(None)))
def test_corrupt_file_is_a_safetensor_error(tmp_path, kind):
    """Both refuse a broken file at open, with SafetensorError (weightlift's
    FormatError is one)."""
    path = tmp_path / f"{kind}.safetensors"
    path.write_bytes(_corrupt_files(tmp_path)[kind])
    for ours, theirs in (
            (lambda: weightlift.safe_open(str(path), "pt"),
             lambda: safetensors.safe_open(str(path), "pt")),
            (lambda: weightlift.torch.load_file(str(path)),
             lambda: safetensors.torch.load_file(str(path))),
            (lambda: weightlift.torch.load(path.read_bytes()),
             lambda: safetensors.torch.load(path.read_bytes()))):
        _, err = assert_same_outcome(ours, theirs, kind)
        assert isinstance(err, safetensors.SafetensorError), err
