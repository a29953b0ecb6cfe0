"""Every safetensors dtype through every drop-in entry point, against the
real safetensors package on the same file: the same tensor or array bit for
bit where safetensors returns one, and where it raises (F6 anywhere, F4 and
F8 in numpy, types the installed torch lacks) an exception that safetensors'
class catches. The file is written by hand: the writers cannot make F6."""

import pytest
import safetensors
import safetensors.numpy
import safetensors.torch
import torch
from conftest import write_raw
from dropin_util import assert_same_outcome

import weightlift
import weightlift.numpy
import weightlift.torch

# (dtype, shape, bytes): whole bytes for every sub-byte dtype.
ENTRIES = {
    "BOOL": ([4], bytes([0, 1, 1, 0])),
    "U8": ([2, 2], bytes(range(4))),
    "I8": ([3], bytes([0x80, 0x7F, 0x01])),
    "I16": ([2], bytes(range(4))),
    "U16": ([2], bytes(range(4))),
    "F16": ([2], bytes(range(4))),
    "BF16": ([2], bytes(range(4))),
    "I32": ([1], bytes(range(4))),
    "U32": ([1], bytes(range(4))),
    "F32": ([1], bytes(range(4))),
    "I64": ([1], bytes(range(8))),
    "U64": ([1], bytes(range(8))),
    "F64": ([1], bytes(range(8))),
    "C64": ([1], bytes(range(8))),
    "F8_E4M3": ([4], bytes(range(4))),
    "F8_E5M2": ([4], bytes(range(4))),
    "F8_E4M3FNUZ": ([4], bytes(range(4))),
    "F8_E5M2FNUZ": ([4], bytes(range(4))),
    "F8_E8M0": ([4], bytes(range(4))),
    "F4": ([2, 4], bytes(range(4))),
    "F6_E2M3": ([4], bytes(range(3))),
    "F6_E3M2": ([2, 4], bytes(range(6))),
}


@pytest.fixture(scope="module")
def one_dtype_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("dtypes")
    return {dt: write_raw(str(d / f"{dt}.safetensors"),
                          [("x", dt, shape, data)])
            for dt, (shape, data) in ENTRIES.items()}


CALLS = {
    "torch.load_file": (lambda p: weightlift.torch.load_file(p),
                        lambda p: safetensors.torch.load_file(p)),
    "numpy.load_file": (lambda p: weightlift.numpy.load_file(p),
                        lambda p: safetensors.numpy.load_file(p)),
    "pt.get_tensor": (
        lambda p: weightlift.safe_open(p, "pt").get_tensor("x"),
        lambda p: safetensors.safe_open(p, "pt").get_tensor("x")),
    "np.get_tensor": (
        lambda p: weightlift.safe_open(p, "np").get_tensor("x"),
        lambda p: safetensors.safe_open(p, "np").get_tensor("x")),
    "pt.get_slice": (
        lambda p: weightlift.safe_open(p, "pt").get_slice("x")[:1],
        lambda p: safetensors.safe_open(p, "pt").get_slice("x")[:1]),
    "np.get_slice": (
        lambda p: weightlift.safe_open(p, "np").get_slice("x")[:1],
        lambda p: safetensors.safe_open(p, "np").get_slice("x")[:1]),
}

_TORCH_HAS = {"F4": "float4_e2m1fn_x2", "F8_E8M0": "float8_e8m0fnu"}


def _deliberate(dtype, call):
    """Why weightlift returns data where safetensors raises, for the cases
    docs/python.md lists; None elsewhere."""
    if dtype not in _TORCH_HAS or not call.startswith(("pt", "torch")):
        return None
    if not hasattr(torch, _TORCH_HAS[dtype]):
        return "old torch: raw bytes as uint8"
    if dtype == "F4" and call == "pt.get_slice":
        return "safetensors reshapes packed F4 bytes to the logical shape"
    return None


@pytest.mark.parametrize("call", list(CALLS))
@pytest.mark.parametrize("dtype", list(ENTRIES))
def test_dtype_matches_safetensors(one_dtype_files, dtype, call):
    ours, theirs = CALLS[call]
    path = one_dtype_files[dtype]
    why = _deliberate(dtype, call)
    if why is not None:
        with pytest.raises((AttributeError, RuntimeError)):
            theirs(path)
        got = ours(path)
        got = got["x"] if isinstance(got, dict) else got
        # The bytes of the file: F4 [2, 4] is 2 packed bytes a row, and
        # get_slice[:1] takes one row.
        n = 4 if "slice" not in call else (2 if dtype == "F4" else 1)
        raw = got.contiguous().view(-1).view(torch.uint8)
        assert bytes(raw.tolist()) == ENTRIES[dtype][1][:n], why
        return
    _, err = assert_same_outcome(lambda: ours(path), lambda: theirs(path),
                                 f"{dtype} {call}")
    if err is not None:
        assert isinstance(err, weightlift.UnsupportedDtypeError), err
        assert "'x'" in str(err) or "F6" in str(err), err


def test_f6_error_uses_safetensors_words(one_dtype_files):
    for dtype in ("F6_E2M3", "F6_E3M2"):
        with pytest.raises(safetensors.SafetensorError) as theirs:
            safetensors.torch.load_file(one_dtype_files[dtype])
        with pytest.raises(safetensors.SafetensorError) as ours:
            weightlift.torch.load_file(one_dtype_files[dtype])
        assert str(ours.value).startswith(str(theirs.value))
        assert "'x'" in str(ours.value)


def test_unloadable_dtype_is_refused_before_any_read(one_dtype_files,
                                                     monkeypatch):
    """load_file checks every dtype against the framework first: a file
    with an F6 tensor reads nothing."""
    from weightlift import _core
    started = []
    real = _core.load_raw

    def counting(*a, **kw):
        started.append(a)
        return real(*a, **kw)
    monkeypatch.setattr(_core, "load_raw", counting)
    with pytest.raises(weightlift.UnsupportedDtypeError):
        weightlift.torch.load_file(one_dtype_files["F6_E2M3"])
    with pytest.raises(weightlift.UnsupportedDtypeError):
        weightlift.numpy.load_file(one_dtype_files["F4"])
    assert started == []
