"""Shared helpers for the weightlift Python tests.

weightlift is imported from PYTHONPATH when it holds the module, else from
$WEIGHTLIFT_BUILD_PYTHON, else from the newest <repo>/build*/python holding
weightlift/_native*.so (cmake -DWL_BUILD_PYTHON=ON builds it there), else
as installed (pip install .).
"""

import glob
import json
import os
import struct
import sys
import threading

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))


def _add_build_tree():
    """Puts the weightlift to test first on sys.path: one on PYTHONPATH or
    $WEIGHTLIFT_BUILD_PYTHON if given, else this checkout's newest build
    tree, else an installed one. The checkout's build comes before an
    installed one because `make` leaves a .pth in the venv naming its own
    build tree, which in a shared venv may be another checkout's."""
    for p in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if p and glob.glob(os.path.join(p, "weightlift", "_native*.so")):
            return
    cands = []
    env = os.environ.get("WEIGHTLIFT_BUILD_PYTHON")
    if env:
        cands.append(env)
    found = glob.glob(os.path.join(ROOT, "build*", "python", "weightlift",
                                   "_native*.so"))
    found.sort(key=os.path.getmtime, reverse=True)
    cands += [os.path.dirname(os.path.dirname(p)) for p in found]
    for c in cands:
        if glob.glob(os.path.join(c, "weightlift", "_native*.so")):
            sys.modules.pop("weightlift", None)
            sys.path.insert(0, c)
            return


_add_build_tree()

import torch  # noqa: E402

TORCH_VERSION = tuple(int(x) for x in
                      torch.__version__.split("+")[0].split(".")[:2])
HAS_CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")

# safetensors dtype -> torch attribute, for every dtype the installed torch
# has (the test matrix grows with torch: u16/u32/u64 from 2.3, float8 from
# 2.1, e8m0 / fp4 x2 from 2.7 or so).
_ALL = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16",
    "U16": "uint16", "I32": "int32", "U32": "uint32", "I64": "int64",
    "U64": "uint64", "F16": "float16", "BF16": "bfloat16",
    "F32": "float32", "F64": "float64", "C64": "complex64",
    "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
    "F8_E8M0": "float8_e8m0fnu",
}


def torch_dtypes():
    """{safetensors name: torch dtype} the installed torch has."""
    return {k: getattr(torch, v) for k, v in _ALL.items()
            if getattr(torch, v, None) is not None}


def random_tensor(dtype, shape, gen):
    """Random bits of DTYPE (bool as 0/1) built from random bytes, so every
    bit pattern of the float types appears, NaNs included."""
    n = 1
    for d in shape:
        n *= d
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    size = torch.empty(0, dtype=dtype).element_size()
    raw = torch.randint(0, 256, (n * size,), dtype=torch.uint8, generator=gen)
    return raw.view(dtype).reshape(shape)


def raw_bytes(t):
    """A tensor's bytes as a 1-D uint8 tensor on cpu (for bit-exact checks).
    """
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.uint8:
        return t.reshape(-1)
    return t.reshape(-1).view(torch.uint8)


def storage_nbytes(t):
    """Bytes of the storage tensor T views (how much memory it keeps alive):
    untyped_storage() on torch 2.x, storage() on Debian's torch 1.13."""
    if hasattr(t, "untyped_storage"):
        return t.untyped_storage().nbytes()
    return t.storage().nbytes()


def write_raw(path, entries, metadata=None, header_pad=True):
    """Writes a safetensors file by hand: ENTRIES is [(name, dtype, shape,
    bytes)] laid out in that order. For dtypes the writers lack (F6, FNUZ)
    and for corrupt files."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    offset = 0
    for name, dtype, shape, data in entries:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    h = json.dumps(header).encode()
    if header_pad:
        h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for *_, data in entries:
            f.write(data)
    return path


def write_sharded(d, shards, metadata=None):
    """Writes SHARDS (a list of {name: tensor}) into folder D as Hugging Face
    does: model-0000K-of-0000N.safetensors plus model.safetensors.index.json.
    Returns D as a string."""
    import safetensors.torch
    weight_map = {}
    for k, tensors in enumerate(shards):
        name = f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
        safetensors.torch.save_file(tensors, os.path.join(str(d), name))
        weight_map.update({n: name for n in tensors})
    with open(os.path.join(str(d), "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": metadata or {}, "weight_map": weight_map}, f)
    return str(d)


def small_two_shard_checkpoint(tmp_path_factory, name, seed, matrices,
                               vectors):
    """A folder of two shards, for the bench programs' end-to-end tests:
    MATRICES = (count, rows, cols) bf16 tensors a.0.. in the first, VECTORS
    = (count, length) float32 tensors b.0.. in the second, random from SEED.
    Returns (folder, total tensor bytes)."""
    import torch
    g = torch.Generator().manual_seed(seed)
    (na, rows, cols), (nb, length) = matrices, vectors
    shards = [{f"a.{i}": torch.randn(rows, cols, generator=g).to(
                   torch.bfloat16) for i in range(na)},
              {f"b.{i}": torch.randn(length, generator=g) for i in range(nb)}]
    d = tmp_path_factory.mktemp(name)
    write_sharded(d, shards)
    nbytes = sum(t.numel() * t.element_size()
                 for s in shards for t in s.values())
    return str(d), nbytes


def errors_in_threads(work, n):
    """Runs WORK in N threads at once and returns the exceptions they raised
    (an exception in a thread would otherwise only be printed)."""
    errors = []

    def run():
        try:
            work()
        except Exception as e:  # noqa: BLE001 - returned to the test
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return errors


@pytest.fixture
def gen():
    g = torch.Generator()
    g.manual_seed(1234)
    return g
