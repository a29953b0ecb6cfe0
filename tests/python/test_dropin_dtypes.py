"""Every safetensors dtype through every drop-in entry point, against the
real safetensors package on the same file: the same tensor or array bit for
bit where safetensors returns one, and where it raises (F6 anywhere, F4 and
F8 in numpy, BF16 in numpy until ml_dtypes is imported, types the installed
torch lacks) an exception that safetensors' class catches. The file is
written by hand: the writers cannot make F6.

What numpy can hold depends on ml_dtypes (installed by `make deps`, from
python/requirements-dev.txt), so the matrix also runs in two child pytest
processes: one where ml_dtypes is hidden (as if not installed) and one where
it is imported first ($WL_TEST_ML_DTYPES, read below before anything else
is imported)."""

import importlib.abc
import os
import subprocess
import sys

# Before safetensors, numpy or weightlift are imported: the ml_dtypes state
# a child process of test_matrix_in_each_ml_dtypes_state runs in.
_ML_DTYPES_STATE = os.environ.get("WL_TEST_ML_DTYPES")
if _ML_DTYPES_STATE == "hidden":
    class _HideMlDtypes(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "ml_dtypes" or name.startswith("ml_dtypes."):
                raise ModuleNotFoundError(f"No module named {name!r} "
                                          f"(hidden by the test)", name=name)
            return None
    assert "ml_dtypes" not in sys.modules
    sys.meta_path.insert(0, _HideMlDtypes())
elif _ML_DTYPES_STATE == "imported":
    import ml_dtypes  # noqa: F401 - registers bfloat16 with numpy

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
    "numpy.load": (lambda p: weightlift.numpy.load(_read(p)),
                   lambda p: safetensors.numpy.load(_read(p))),
}


def _read(path):
    with open(path, "rb") as f:
        return f.read()

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


def _has_ml_dtypes():
    """Whether ml_dtypes can be imported, asked of a child (importing it
    here would register bfloat16 with numpy in this process)."""
    return subprocess.run([sys.executable, "-c", "import ml_dtypes"],
                          capture_output=True).returncode == 0


@pytest.mark.skipif(_ML_DTYPES_STATE is not None,
                    reason="this process is already one of the children")
@pytest.mark.parametrize("state", ["hidden", "imported"])
def test_matrix_in_each_ml_dtypes_state(state):
    """The whole dtype x call matrix in a child pytest where ml_dtypes is
    hidden, and in one where it is imported first: with ml_dtypes, numpy
    has bfloat16 (safetensors returns BF16 arrays) but still no F8 or F4
    attribute (safetensors raises AttributeError, and so must weightlift)."""
    if state == "imported":
        assert _has_ml_dtypes(), (
            "ml_dtypes is not installed: `make deps` installs it (python/"
            "requirements-dev.txt); the with-ml_dtypes case cannot run")
    env = dict(os.environ, WL_TEST_ML_DTYPES=state)
    cases = len(CALLS) * len(ENTRIES)
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         f"{__file__}::test_dtype_matches_safetensors",
         f"{__file__}::test_bf16_numpy_follows_ml_dtypes"],
        cwd=os.path.dirname(__file__), env=env, capture_output=True,
        text=True, timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-6000:]
    assert f"{cases + 1} passed" in out, out[-3000:]


def test_bf16_numpy_follows_ml_dtypes(one_dtype_files):
    """BF16 through numpy: an array exactly when safetensors gives one (in
    this process: ml_dtypes imported or not), and weightlift itself never
    imports ml_dtypes."""
    path = one_dtype_files["BF16"]
    imported = "ml_dtypes" in sys.modules
    got, err = assert_same_outcome(
        lambda: weightlift.safe_open(path, "np").get_tensor("x"),
        lambda: safetensors.safe_open(path, "np").get_tensor("x"), "BF16 np")
    if not imported:  # weightlift did not import it behind our back
        assert "ml_dtypes" not in sys.modules
    if _ML_DTYPES_STATE == "imported":
        assert err is None and str(got.dtype) == "bfloat16"
    elif _ML_DTYPES_STATE == "hidden":
        assert isinstance(err, TypeError), err
