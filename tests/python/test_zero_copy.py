"""zero_copy=True: cpu tensors as views of a private mapping of the file."""

import numpy as np
import pytest
import safetensors.torch
import torch
from conftest import random_tensor, raw_bytes, torch_dtypes, write_raw

import weightlift
import weightlift.numpy
import weightlift.torch


def test_every_dtype_same_as_safetensors(tmp_path, gen):
    tensors = {f"{n.lower()}.{i}": random_tensor(dt, shape, gen)
               for n, dt in torch_dtypes().items()
               for i, shape in enumerate([(), (0,), (7,), (3, 5)])}
    path = str(tmp_path / "all.safetensors")
    safetensors.torch.save_file(tensors, path)
    ours = weightlift.torch.load_file(path, zero_copy=True)
    theirs = safetensors.torch.load_file(path)
    assert list(ours) == list(theirs)
    for k in theirs:
        assert ours[k].dtype == theirs[k].dtype, k
        assert tuple(ours[k].shape) == tuple(theirs[k].shape), k
        assert torch.equal(raw_bytes(ours[k]), raw_bytes(theirs[k])), k
    r = weightlift.last_report()
    assert r.files[0].path_taken == "mmap-view"
    assert r.bytes_read == 0  # save_file aligns every tensor: all are views


def test_writes_stay_in_the_process(tmp_path):
    path = str(tmp_path / "w.safetensors")
    w = torch.arange(256 * 64, dtype=torch.float32).reshape(256, 64)
    safetensors.torch.save_file({"w": w}, path)
    before = open(path, "rb").read()
    t = weightlift.torch.load_file(path, zero_copy=True)["w"]
    t.add_(1.0)  # copy-on-write: the file must not change
    assert open(path, "rb").read() == before
    assert torch.equal(t, w + 1.0)
    again = weightlift.torch.load_file(path, zero_copy=True)["w"]
    assert torch.equal(again, w)


def test_misaligned_tensor_is_copied_and_reported(tmp_path):
    # An f32 at byte offset 1 of the data: not a valid view, so a copy.
    path = str(tmp_path / "odd.safetensors")
    f32 = np.arange(6, dtype=np.float32)
    write_raw(path, [("u8", "U8", [1], b"\x07"),
                     ("f32", "F32", [6], f32.tobytes())])
    d = weightlift.torch.load_file(path, zero_copy=True)
    assert torch.equal(d["f32"], torch.from_numpy(f32))
    assert d["u8"].tolist() == [7]
    r = weightlift.last_report()
    assert r.bytes_read == 24
    assert any("copied instead of mapped" in n for n in r.notes), r.notes


def test_tensors_outlive_everything(tmp_path, gen):
    path = str(tmp_path / "l.safetensors")
    w = random_tensor(torch.bfloat16, (33, 17), gen)
    safetensors.torch.save_file({"w": w}, path)
    t = weightlift.torch.load_file(path, zero_copy=True)["w"]
    weightlift.release_cached_loaders()
    import gc
    gc.collect()
    assert torch.equal(raw_bytes(t), raw_bytes(w))


def test_numpy_and_safe_open(tmp_path, gen):
    path = str(tmp_path / "n.safetensors")
    w = random_tensor(torch.int32, (5, 9), gen)
    safetensors.torch.save_file({"w": w}, path)
    arr = weightlift.numpy.load_file(path, zero_copy=True)["w"]
    assert np.array_equal(arr, w.numpy())
    with weightlift.safe_open(path, "pt", zero_copy=True) as f:
        assert torch.equal(f.get_tensor("w"), w)


def test_cuda_device_is_refused(tmp_path, gen):
    path = str(tmp_path / "c.safetensors")
    safetensors.torch.save_file({"w": torch.zeros(2)}, path)
    with pytest.raises(ValueError, match="zero_copy"):
        weightlift.torch.load_file(path, device="cuda:0", zero_copy=True)


def test_not_a_bool_is_a_type_error(tmp_path):
    path = str(tmp_path / "b.safetensors")
    safetensors.torch.save_file({"w": torch.zeros(2)}, path)
    with pytest.raises(TypeError, match="zero_copy"):
        weightlift.torch.load_file(path, zero_copy="yes")
