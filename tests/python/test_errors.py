"""Errors become the documented Python exceptions with the C++ message."""

import json
import os
import struct

import pytest
import safetensors.torch
import torch
from conftest import write_raw

import weightlift
import weightlift.numpy
import weightlift.torch


def test_hierarchy():
    W = weightlift
    assert issubclass(W.FormatError, W.WeightliftError)
    assert issubclass(W.FormatError, ValueError)
    assert issubclass(W.WeightliftIOError, OSError)
    assert issubclass(W.NotFoundError, FileNotFoundError)
    assert issubclass(W.NotFoundError, W.WeightliftIOError)
    assert issubclass(W.ResourceExhaustedError, MemoryError)
    assert issubclass(W.CudaError, W.WeightliftError)
    assert issubclass(W.UnsupportedError, W.WeightliftError)
    assert issubclass(W.TensorNotFoundError, KeyError)
    assert issubclass(W.InvalidArgumentError, ValueError)


def test_missing_file(tmp_path):
    missing = str(tmp_path / "nope.safetensors")
    with pytest.raises(FileNotFoundError) as ei:
        weightlift.torch.load_file(missing)
    assert isinstance(ei.value, weightlift.WeightliftError)
    assert "nope.safetensors" in str(ei.value)
    with pytest.raises(FileNotFoundError):
        weightlift.safe_open(missing, "pt")
    with pytest.raises(FileNotFoundError):
        safetensors.torch.load_file(missing)  # the reference agrees


def _corrupt(path, header, data=b"", raw_header=None):
    h = raw_header if raw_header is not None else json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)
    return str(path)


@pytest.mark.parametrize("case,rule", [
    ("overlap", "range_overlap"),
    ("gap", "range_gap"),
    ("size", "size_mismatch"),
    ("dtype", "bad_dtype"),
    ("json", "header_bad_json"),
    ("small", "file_too_small"),
    ("past_eof", "header_past_eof"),
    ("trailing", "trailing_bytes"),
])
def test_corrupt_file_is_format_error_with_rule(tmp_path, case, rule):
    p = tmp_path / f"{case}.safetensors"
    if case == "overlap":
        path = _corrupt(p, {"a": {"dtype": "U8", "shape": [4],
                                  "data_offsets": [0, 4]},
                            "b": {"dtype": "U8", "shape": [4],
                                  "data_offsets": [2, 6]}}, b"x" * 6)
    elif case == "gap":
        path = _corrupt(p, {"a": {"dtype": "U8", "shape": [2],
                                  "data_offsets": [2, 4]}}, b"x" * 4)
    elif case == "size":
        path = _corrupt(p, {"a": {"dtype": "F32", "shape": [2],
                                  "data_offsets": [0, 4]}}, b"x" * 4)
    elif case == "dtype":
        path = _corrupt(p, {"a": {"dtype": "F12", "shape": [1],
                                  "data_offsets": [0, 1]}}, b"x")
    elif case == "json":
        path = _corrupt(p, None, b"", raw_header=b"{not json}")
    elif case == "small":
        p.write_bytes(b"\x01\x02")
        path = str(p)
    elif case == "past_eof":
        p.write_bytes(struct.pack("<Q", 1000) + b"{}")
        path = str(p)
    elif case == "trailing":
        path = _corrupt(p, {"a": {"dtype": "U8", "shape": [2],
                                  "data_offsets": [0, 2]}}, b"x" * 3)
    with pytest.raises(weightlift.FormatError) as ei:
        weightlift.torch.load_file(path)
    e = ei.value
    assert e.rule == rule, str(e)
    assert e.code == "Corruption"
    assert isinstance(e, ValueError)
    assert os.path.basename(path) in str(e)
    with pytest.raises(weightlift.FormatError):
        weightlift.safe_open(path, "pt")


def test_missing_tensor(tmp_path):
    path = str(tmp_path / "a.safetensors")
    safetensors.torch.save_file({"x": torch.zeros(1)}, path)
    with weightlift.safe_open(path, "pt") as f:
        with pytest.raises(KeyError, match="does not contain tensor y"):
            f.get_tensor("y")
        with pytest.raises(weightlift.TensorNotFoundError):
            f.get_slice("y")


def test_code_catching_safetensors_errors_still_catches(tmp_path):
    """Switching the import must keep `except SafetensorError` working for
    what safetensors raises as one: format errors and missing tensors."""
    import safetensors
    assert weightlift.SafetensorError is safetensors.SafetensorError
    path = str(tmp_path / "a.safetensors")
    safetensors.torch.save_file({"x": torch.zeros(1)}, path)
    with weightlift.safe_open(path, "pt") as f:
        with pytest.raises(safetensors.SafetensorError):
            f.get_tensor("y")
    bad = str(tmp_path / "bad.safetensors")
    with open(bad, "wb") as f:
        f.write(struct.pack("<Q", 8) + b"{bad js}")
    for load in (weightlift.torch.load_file, weightlift.numpy.load_file):
        with pytest.raises(safetensors.SafetensorError) as e:
            load(bad)
        assert isinstance(e.value, ValueError)  # and still our hierarchy
        assert isinstance(e.value, weightlift.FormatError)
    # I/O errors stay OSError subclasses, as safetensors raises them.
    assert not issubclass(weightlift.NotFoundError, safetensors.SafetensorError)


def test_without_safetensors_a_stand_in_of_the_same_name():
    import subprocess
    import sys
    code = ("import sys; sys.modules['safetensors'] = None\n"
            "import weightlift\n"
            "E = weightlift.SafetensorError\n"
            "assert E.__module__ == 'weightlift._errors', E\n"
            "assert issubclass(weightlift.FormatError, E)\n"
            "assert issubclass(weightlift.TensorNotFoundError, E)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", code], env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_bad_options(tmp_path):
    path = str(tmp_path / "a.safetensors")
    safetensors.torch.save_file({"x": torch.zeros(1)}, path)
    with pytest.raises(TypeError, match="unexpected keyword"):
        weightlift.torch.load_file(path, bogus=1)
    with pytest.raises(weightlift.InvalidArgumentError):
        weightlift.torch.load_file(path, backend="floppy")
    with pytest.raises(weightlift.InvalidArgumentError):
        weightlift.torch.load_file(path, device="tpu:3")
    with pytest.raises(weightlift.InvalidArgumentError):
        weightlift.torch.load_file(path, threads=-5)
    with pytest.raises(ValueError):
        weightlift.torch.load_file(path, chunk="lots")
    with pytest.raises(weightlift.InvalidArgumentError):
        weightlift.safe_open(path, framework="tf")
    # Sizes as strings work.
    assert weightlift.torch.load_file(path, chunk="1MiB", staging="16M")


def _one_byte_file(tmp_path):
    p = tmp_path / "t.safetensors"
    p.write_bytes(b"\x01")
    return p


def test_format_error_says_what_and_where(tmp_path):
    p = _one_byte_file(tmp_path)
    with pytest.raises(weightlift.FormatError) as ei:
        weightlift.torch.load_file(str(p))
    err = ei.value
    assert err.code == "Corruption" and err.rule is not None
    assert str(p) in str(err)


def test_error_message_is_the_cpp_message(tmp_path):
    """The Python exception carries the C++ Status text unchanged: the same
    words the CLI (which prints the Status) prints for the same file."""
    import os
    import subprocess
    build = os.path.dirname(os.path.dirname(os.path.dirname(
        weightlift._native.__file__)))
    cli = os.environ.get("WEIGHTLIFT_BIN") or os.path.join(build,
                                                           "weightlift")
    if not os.path.exists(cli):
        pytest.skip(f"no weightlift CLI at {cli} (an installed package, "
                    f"not a build tree; set WEIGHTLIFT_BIN)")
    p = _one_byte_file(tmp_path)
    with pytest.raises(weightlift.FormatError) as ei:
        weightlift.torch.load_file(str(p))
    r = subprocess.run([cli, "inspect", str(p)], capture_output=True,
                       text=True)
    assert r.returncode != 0
    assert str(ei.value) in r.stderr, (str(ei.value), r.stderr)


def test_truncated_after_open_raises_from_load(tmp_path):
    """A file that shrinks between Open and the reads fails the load with an
    error (never short data)."""
    path = write_raw(str(tmp_path / "s.safetensors"),
                     [("a", "U8", [1 << 16], b"\x07" * (1 << 16)),
                      ("b", "U8", [1 << 16], b"\x09" * (1 << 16))])
    ckpt = weightlift._core.open_checkpoint(path)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 1000)
    with pytest.raises(weightlift.WeightliftError):
        weightlift._core.load_raw(ckpt)
    with pytest.raises(weightlift.WeightliftError):
        list(weightlift.iter_tensors(ckpt))
