"""get_slice(name)[index] against the real safetensors package, both
frameworks, on the same file: the same array or tensor bit for bit, or an
exception of the class safetensors raised.

With framework="np" safetensors slices by its own rules (out-of-range ints
and bounds raise SafetensorError instead of clamping, lists raise, negative
slice bounds raise OverflowError, a 0-d result is a 0-d array); with "pt" it
indexes the whole tensor with torch. test_slice.py holds the torch cases.
"""

import numpy as np
import pytest
import safetensors
import safetensors.torch
import torch
from conftest import random_tensor
from dropin_util import assert_same_outcome

import weightlift

E = Ellipsis

INDICES = [
    # the cases issue 13 names
    (slice(2, None), -6), slice(None, 20), (slice(None), slice(None, 20)),
    [[0, 1]], (),
    # ints: in range, negative, out of range, beyond 32 bits, look-alikes
    0, 1, -1, -2, 2, 3, 5, -6, 2 ** 31, -(2 ** 31) - 1, True, False,
    np.int64(1), np.int32(-1), torch.tensor(1),
    # slices: bounds in and out of range, empty, reversed, steps
    slice(None), slice(0, 1), slice(1, 3), slice(0, 0), slice(1, 1),
    slice(2, 1), slice(1, 0, 2), slice(3, 3), slice(3, 4), slice(5, 7),
    slice(0, 2 ** 40),
    slice(None, 3), slice(None, 4), slice(-2, None), slice(None, -1),
    slice(None, None, 2), slice(1, None, 3), slice(0, 3, 3), slice(0, 2, 2),
    slice(None, None, -1), slice(0, 3, 0), slice(np.int64(1), 3),
    slice(True, 2), slice(1.0, 2), slice(0, None, 2 ** 40),
    # Ellipsis, tuples, too many indices
    E, (E,), (E, 1), (1, E), (E, E), (E, 1, E), (0, 1), (0, -1), (1, 2, 0),
    (slice(1, 3), slice(None)), (slice(None), slice(1, 3, 2)),
    (-1, slice(None)), (slice(1, 3), E, slice(None)), (0, E, -9),
    (1, slice(None, None, 2), slice(3, None)), (E, slice(5, 6)),
    (slice(None), slice(None), slice(None), E), (1, 2, 0, 0), (E, 0, 0, 0, 0),
    # what safetensors' numpy slicing refuses
    None, (slice(1, 2), None), [0, 1], [0], [], ([],), (slice(None), [0]),
    (E, [0]), 1.0, (0, 1.5), "a",
]

TENSORS = {
    "m": (torch.float32, (3, 4)),
    "w": (torch.float32, (5, 4, 3)),
    "v": (torch.int16, (7,)),
    "k": (torch.bool, (5, 2)),
    "c": (torch.complex64, (3, 2)),
    "z": (torch.float16, (0, 3)),
    "e": (torch.int64, (3, 0, 2)),
    "s": (torch.float64, ()),
}


def _idx_id(i):
    return repr(i).replace(" ", "")


@pytest.fixture(scope="module")
def slice_file(tmp_path_factory):
    gen = torch.Generator().manual_seed(5)
    t = {k: random_tensor(dt, shape, gen)
         for k, (dt, shape) in TENSORS.items()}
    path = str(tmp_path_factory.mktemp("dropin_slice") / "s.safetensors")
    safetensors.torch.save_file(t, path)
    return path


def _sliced(cls, path, framework, name, index):
    def run():
        with cls(path, framework) as f:
            return f.get_slice(name)[index]
    return run


def _stop_before_start(index, shape):
    """A slice whose stop is before its start within the dimension: the
    deliberate difference (docs/python.md): safetensors 0.8 underflows
    there (SystemError / ValueError), weightlift raises SafetensorError."""
    return (type(index) is slice and shape and index.start is not None
            and index.stop is not None and index.stop < index.start
            < shape[0])


@pytest.mark.parametrize("index", INDICES, ids=_idx_id)
@pytest.mark.parametrize("name", list(TENSORS))
def test_numpy_slice_matches_safetensors(slice_file, name, index):
    if _stop_before_start(index, TENSORS[name][1]):
        with pytest.raises((SystemError, ValueError)):
            _sliced(safetensors.safe_open, slice_file, "np", name, index)()
        with pytest.raises(safetensors.SafetensorError,
                           match="is before start"):
            _sliced(weightlift.safe_open, slice_file, "np", name, index)()
        return
    got, _ = assert_same_outcome(
        _sliced(weightlift.safe_open, slice_file, "np", name, index),
        _sliced(safetensors.safe_open, slice_file, "np", name, index),
        f"np {name}[{index!r}]")
    if got is not None:  # an array of its own, never a numpy scalar
        assert isinstance(got, np.ndarray)


def test_numpy_0d_slice_is_a_0d_array(slice_file):
    with weightlift.safe_open(slice_file, "np") as f:
        for part in (f.get_slice("s")[()], f.get_slice("m")[1, 2],
                     f.get_slice("s")[...]):
            assert isinstance(part, np.ndarray) and part.shape == ()


@pytest.mark.parametrize("index", INDICES, ids=_idx_id)
@pytest.mark.parametrize("name", ["m", "w", "s", "z"])
def test_torch_slice_matches_safetensors(slice_file, name, index):
    assert_same_outcome(
        _sliced(weightlift.safe_open, slice_file, "pt", name, index),
        _sliced(safetensors.safe_open, slice_file, "pt", name, index),
        f"pt {name}[{index!r}]")
