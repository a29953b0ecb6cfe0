"""weightlift gives the same results as the real safetensors package."""

import os

import numpy as np
import pytest
import safetensors
import safetensors.numpy
import safetensors.torch
import torch
from conftest import (TORCH_VERSION, random_tensor, raw_bytes, torch_dtypes,
                      write_raw)

import weightlift
import weightlift.numpy
import weightlift.torch

SHAPES = [(), (0,), (3,), (2, 5), (4, 1, 6), (0, 7)]


def assert_same(a, b, name=""):
    assert a.dtype == b.dtype, name
    assert tuple(a.shape) == tuple(b.shape), name
    assert a.device == b.device, name
    assert torch.equal(raw_bytes(a), raw_bytes(b)), name


@pytest.fixture
def every_dtype_file(tmp_path, gen):
    tensors = {}
    for st_name, dt in torch_dtypes().items():
        for i, shape in enumerate(SHAPES):
            tensors[f"{st_name.lower()}.{i}"] = random_tensor(dt, shape, gen)
    path = str(tmp_path / "all.safetensors")
    safetensors.torch.save_file(tensors, path, metadata={"format": "pt"})
    return path, tensors


def test_load_file_every_dtype_bit_exact(every_dtype_file):
    path, written = every_dtype_file
    ours = weightlift.torch.load_file(path)
    theirs = safetensors.torch.load_file(path)
    assert list(ours) == list(theirs)  # same keys, same (file) order
    for k in theirs:
        assert_same(ours[k], theirs[k], k)
        assert torch.equal(raw_bytes(ours[k]), raw_bytes(written[k]))


def test_dtype_matrix_covers_this_torch():
    names = set(torch_dtypes())
    assert {"BOOL", "U8", "I8", "I16", "I32", "I64", "F16", "BF16", "F32",
            "F64", "C64"} <= names
    if TORCH_VERSION >= (2, 1):
        assert {"F8_E4M3", "F8_E5M2"} <= names
    if TORCH_VERSION >= (2, 3):
        assert {"U16", "U32", "U64"} <= names


def test_float8_values(tmp_path):
    """The float8 encodings of 0.5, -1, 448 and 2**-9 (written by hand, so
    the file does not need a torch with float8): their values where torch
    has the types; where it does not, the error safetensors' class
    (AttributeError) catches."""
    values = [0.5, -1.0, 448.0, 2.0 ** -9]
    path = write_raw(str(tmp_path / "f8.safetensors"), [
        ("e4m3", "F8_E4M3", [4], bytes([0x30, 0xB8, 0x7E, 0x01])),
        ("e5m2", "F8_E5M2", [4], bytes([0x38, 0xBC, 0x5F, 0x18]))])
    if not hasattr(torch, "float8_e4m3fn"):
        with pytest.raises(AttributeError):
            safetensors.torch.load_file(path)
        with pytest.raises(AttributeError) as err:
            weightlift.torch.load_file(path)
        assert isinstance(err.value, weightlift.UnsupportedDtypeError)
        return
    ours = weightlift.torch.load_file(path)
    assert ours["e4m3"].dtype == torch.float8_e4m3fn
    assert ours["e5m2"].dtype == torch.float8_e5m2
    for k in ours:
        assert ours[k].float().tolist() == values, k


def test_fnuz_and_subbyte_layouts(tmp_path, gen):
    raw = bytes(range(12))
    path = write_raw(str(tmp_path / "sub.safetensors"), [
        ("e8m0", "F8_E8M0", [4], raw[:4]),
        ("f4", "F4", [2, 4], raw[:4]),          # even last dim
        ("f4odd", "F4", [2, 3], raw[:3]),       # odd last dim -> 1-D bytes
        ("f6", "F6_E2M3", [4, 2], raw[:6]),
        ("f6b", "F6_E3M2", [4], raw[:3]),
        ("fnuz", "F8_E4M3FNUZ", [2], raw[:2]),
        ("fnuz5", "F8_E5M2FNUZ", [2], raw[:2]),
    ])
    with weightlift.safe_open(path, "pt") as f:
        got = {}
        for k in f.keys():
            try:
                got[k] = f.get_tensor(k)
            except weightlift.UnsupportedDtypeError as e:
                # F6: no framework has the type (safetensors refuses it
                # too); FNUZ where this torch lacks it.
                assert k.startswith("f6") or (
                    k.startswith("fnuz")
                    and not hasattr(torch, "float8_e4m3fnuz")), (k, e)
                assert f"'{k}'" in str(e)
        assert f.get_slice("f4").get_dtype() == "F4"
        assert f.get_slice("f4").get_shape() == [2, 4]
    assert "f6" not in got and "f6b" not in got
    e8m0 = getattr(torch, "float8_e8m0fnu", torch.uint8)
    assert got["e8m0"].dtype == e8m0 and got["e8m0"].shape == (4,)
    f4 = getattr(torch, "float4_e2m1fn_x2", torch.uint8)
    assert got["f4"].dtype == f4 and tuple(got["f4"].shape) == (2, 2)
    assert got["f4odd"].dtype == torch.uint8 and got["f4odd"].shape == (3,)
    for k, n in [("e8m0", 4), ("f4", 4), ("f4odd", 3)]:
        assert bytes(raw_bytes(got[k]).tolist()) == raw[:n], k
    if "fnuz" in got:
        assert got["fnuz"].dtype == torch.float8_e4m3fnuz
        assert bytes(raw_bytes(got["fnuz"]).tolist()) == raw[:2]


def test_numpy_load_file(tmp_path):
    rng = np.random.default_rng(0)
    arrays = {
        "f32": rng.standard_normal((3, 4)).astype(np.float32),
        "f64": rng.standard_normal(5),
        "i8": rng.integers(-128, 127, (7,), dtype=np.int8),
        "u16": rng.integers(0, 65535, (2, 2), dtype=np.uint16),
        "u64": rng.integers(0, 2 ** 63, (3,), dtype=np.uint64),
        "b": rng.integers(0, 2, (4,)).astype(bool),
        "c": (rng.standard_normal(3) + 1j).astype(np.complex64),
        "empty": np.zeros((0, 3), np.float16),
        "scalar": np.array(3.5, np.float32),
    }
    path = str(tmp_path / "np.safetensors")
    safetensors.numpy.save_file(arrays, path)
    ours = weightlift.numpy.load_file(path)
    theirs = safetensors.numpy.load_file(path)
    assert list(ours) == list(theirs)
    for k, v in theirs.items():
        assert ours[k].dtype == v.dtype and ours[k].shape == v.shape, k
        assert ours[k].tobytes() == v.tobytes(), k
    with weightlift.safe_open(path, framework="np") as f:
        assert isinstance(f.get_tensor("f32"), np.ndarray)
        np.testing.assert_array_equal(f.get_slice("f32")[1:, :2],
                                      arrays["f32"][1:, :2])


def test_numpy_bf16_without_ml_dtypes_is_clear(tmp_path):
    path = str(tmp_path / "bf.safetensors")
    safetensors.torch.save_file({"x": torch.ones(2, dtype=torch.bfloat16)},
                                path)
    try:
        import ml_dtypes  # noqa: F401
        assert weightlift.numpy.load_file(path)["x"].dtype.name == "bfloat16"
    except ImportError:
        with pytest.raises(weightlift.UnsupportedError, match="BF16"):
            weightlift.numpy.load_file(path)


def test_safe_open_surface(tmp_path, gen):
    t = {"w": random_tensor(torch.float32, (4, 6), gen),
         "b": random_tensor(torch.bfloat16, (6,), gen),
         "a": random_tensor(torch.int64, (2, 3), gen)}
    path = str(tmp_path / "m.safetensors")
    safetensors.torch.save_file(t, path, metadata={"k": "v", "n": "1"})
    with safetensors.safe_open(path, "pt") as ref, \
            weightlift.safe_open(path, framework="pt", device="cpu") as f:
        assert f.keys() == ref.keys()
        assert f.offset_keys() == ref.offset_keys()
        assert f.metadata() == ref.metadata() == {"k": "v", "n": "1"}
        for k in ref.keys():
            assert_same(f.get_tensor(k), ref.get_tensor(k), k)
            s, rs = f.get_slice(k), ref.get_slice(k)
            assert s.get_shape() == rs.get_shape()
            assert s.get_dtype() == rs.get_dtype()
        for idx in [(slice(1, 3),), (slice(None), slice(2, 5)), (0,),
                    (slice(None, None, 2),), (Ellipsis, 1)]:
            assert_same(f.get_slice("w")[idx], ref.get_slice("w")[idx])
        begin, end = f.offsets("w")
        assert end - begin == 4 * 6 * 4
        with open(path, "rb") as fh:
            fh.seek(begin)
            assert fh.read(end - begin) == t["w"].numpy().tobytes()
        info = f.tensor_info("b")
        assert (info.dtype, info.shape, info.size) == ("BF16", [6], 12)


def test_metadata_none_when_absent(tmp_path):
    path = str(tmp_path / "nometa.safetensors")
    safetensors.torch.save_file({"x": torch.zeros(2)}, path)
    with safetensors.safe_open(path, "pt") as ref:
        assert ref.metadata() is None
    with weightlift.safe_open(path, "pt") as f:
        assert f.metadata() is None


def test_load_bytes(tmp_path, gen):
    t = {"x": random_tensor(torch.float16, (5, 3), gen),
         "y": random_tensor(torch.int32, (2,), gen)}
    data = safetensors.torch.save(t)
    ours = weightlift.torch.load(data)
    theirs = safetensors.torch.load(data)
    # safetensors' load(bytes) order is its hash map's; ours is file order.
    assert sorted(ours) == sorted(theirs)
    for k in theirs:
        assert_same(ours[k], theirs[k], k)
    arrs = {"a": np.arange(6, dtype=np.int16).reshape(2, 3)}
    got = weightlift.numpy.load(safetensors.numpy.save(arrs))
    np.testing.assert_array_equal(got["a"], arrs["a"])


def test_sharded_checkpoint_and_load_checkpoint(tmp_path, gen):
    d = tmp_path / "ckpt"
    d.mkdir()
    t1 = {"layer.0.w": random_tensor(torch.float32, (8, 8), gen)}
    t2 = {"layer.1.w": random_tensor(torch.float32, (8, 8), gen),
          "head": random_tensor(torch.float16, (4,), gen)}
    safetensors.torch.save_file(t1, str(d / "model-00001-of-00002.safetensors"))
    safetensors.torch.save_file(t2, str(d / "model-00002-of-00002.safetensors"))
    import json
    wm = {k: "model-00001-of-00002.safetensors" for k in t1}
    wm.update({k: "model-00002-of-00002.safetensors" for k in t2})
    (d / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 0}, "weight_map": wm}))
    for src in (str(d), str(d / "model.safetensors.index.json"), d):
        sd = weightlift.load_checkpoint(src)
        assert isinstance(sd, dict) and set(sd) == set(wm)
        for k, v in {**t1, **t2}.items():
            assert torch.equal(raw_bytes(sd[k]), raw_bytes(v))
        assert isinstance(sd.report, weightlift.LoadReport)
        assert sd.report.tensors == 3
        assert sd.report.bytes == 8 * 8 * 4 * 2 + 8
    with weightlift.safe_open(str(d), "pt") as f:
        assert f.keys() == sorted(wm)
        assert torch.equal(f.get_tensor("head"), t2["head"])
    np_sd = weightlift.load_checkpoint(str(d), framework="np")
    assert isinstance(np_sd["head"], np.ndarray)


DROP_IN = [
    (weightlift.torch, safetensors.torch,
     ("load_file", "load", "load_model", "save_file", "save", "save_model")),
    (weightlift.numpy, safetensors.numpy,
     ("load_file", "load", "save_file", "save")),
]


@pytest.mark.parametrize("ours,theirs,names", DROP_IN,
                         ids=["torch", "numpy"])
def test_drop_in_signatures_accept_every_safetensors_call(ours, theirs,
                                                         names):
    """Every parameter of safetensors' function, by the same name and kind
    (positional, keyword), with the same default: a call written for
    safetensors binds the same way to weightlift's."""
    import inspect
    for name in names:
        want = inspect.signature(getattr(theirs, name))
        got = inspect.signature(getattr(ours, name))
        has_kwargs = any(p.kind is p.VAR_KEYWORD
                         for p in got.parameters.values())
        positional = [p.name for p in got.parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY,
                                    p.POSITIONAL_OR_KEYWORD)]
        for i, (pname, p) in enumerate(want.parameters.items()):
            what = f"{ours.__name__}.{name}({pname})"
            if p.kind is p.KEYWORD_ONLY and pname not in got.parameters:
                assert has_kwargs, what  # a load option, e.g. backend=
                continue
            assert pname in got.parameters, what
            mine = got.parameters[pname]
            if p.kind is p.POSITIONAL_OR_KEYWORD:
                assert positional[i] == pname, what
            if p.default is not p.empty:
                assert mine.default == p.default or (
                    pname == "backend" and mine.default is mine.empty), what
            else:
                assert mine.default is mine.empty, what


def test_safe_open_signature():
    with pytest.raises(TypeError):
        weightlift.safe_open()  # filename is required, as in safetensors
    import inspect
    sig = inspect.signature(weightlift.safe_open)
    assert list(sig.parameters)[:3] == ["filename", "framework", "device"]
    assert sig.parameters["device"].default == "cpu"


def test_save_forwarded(tmp_path):
    path = str(tmp_path / "s.safetensors")
    weightlift.torch.save_file({"x": torch.arange(4)}, path, metadata={"a": "b"})
    assert torch.equal(weightlift.torch.load_file(path)["x"], torch.arange(4))
    assert os.path.getsize(path) > 0


def test_only_empty_tensors(tmp_path):
    path = str(tmp_path / "empty.safetensors")
    safetensors.torch.save_file({"e": torch.zeros(0), "f": torch.zeros(2, 0)},
                                path)
    d = weightlift.torch.load_file(path)
    assert d["e"].shape == (0,) and d["f"].shape == (2, 0)
    with weightlift.safe_open(path, "pt") as f:
        assert f.get_tensor("f").shape == (2, 0)
