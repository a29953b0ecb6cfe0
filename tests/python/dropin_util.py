"""Runs one call against weightlift and against the real safetensors package
and compares what came back: the same value (type, dtype, shape, device and
bytes, recursively through dicts, lists, tuples and sets), or, where
safetensors raised, an exception weightlift raised that ``except`` with
safetensors' class catches."""

import numpy as np
import torch


def outcome(fn):
    """(value, None) or (None, exception) of calling FN."""
    try:
        return fn(), None
    except Exception as e:  # noqa: BLE001 - compared by the caller
        return None, e


def _bytes(t):
    if isinstance(t, np.ndarray):
        return np.ascontiguousarray(t).tobytes()
    t = t.detach().cpu().contiguous()
    if t.numel() == 0:
        return b""
    return t.reshape(-1).view(torch.uint8).numpy().tobytes()


def assert_same_value(got, want, what):
    assert type(got) is type(want), (what, type(got), type(want))
    if isinstance(want, torch.Tensor):
        assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
        assert tuple(got.shape) == tuple(want.shape), (what, got.shape,
                                                        want.shape)
        assert got.device == want.device, what
        assert _bytes(got) == _bytes(want), what
    elif isinstance(want, np.ndarray):
        assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
        assert got.flags.writeable == want.flags.writeable, what
        assert got.shape == want.shape, (what, got.shape, want.shape)
        assert _bytes(got) == _bytes(want), what
    elif isinstance(want, dict):
        assert list(got) == list(want), (what, list(got), list(want))
        for k in want:
            assert_same_value(got[k], want[k], f"{what}[{k!r}]")
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), what
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same_value(g, w, f"{what}[{i}]")
    else:
        assert got == want, (what, got, want)


def assert_same_outcome(ours, theirs, what, message=False):
    """Calls both; where safetensors raised, weightlift must raise something
    its class catches (and, with MESSAGE, with the same text); else both
    values must be the same. Returns weightlift's (value, error)."""
    want, want_err = outcome(theirs)
    got, got_err = outcome(ours)
    if want_err is not None:
        assert got_err is not None, (
            f"{what}: safetensors raised {want_err!r}, weightlift returned "
            f"{got!r}")
        assert isinstance(got_err, type(want_err)), (
            f"{what}: safetensors raised {type(want_err).__name__} "
            f"({want_err}), weightlift {type(got_err).__name__} ({got_err})")
        if message:
            assert str(got_err) == str(want_err), (what, str(got_err),
                                                   str(want_err))
        return None, got_err
    assert got_err is None, (
        f"{what}: safetensors returned, weightlift raised {got_err!r}")
    assert_same_value(got, want, what)
    return got, None
