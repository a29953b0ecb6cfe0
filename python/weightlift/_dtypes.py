"""Safetensors dtype strings -> torch / numpy dtypes and returned shapes.

What each safetensors dtype becomes in torch (numpy: below the table):

=============  ==========================================================
BOOL .. C64    the matching torch dtype, same shape (U16/U32/U64 need
               torch >= 2.3; older torch raises UnsupportedDtypeError, as
               safetensors itself fails there)
F8_E4M3        torch.float8_e4m3fn   (torch >= 2.1)
F8_E5M2        torch.float8_e5m2     (torch >= 2.1)
F8_E4M3FNUZ    torch.float8_e4m3fnuz (where torch has it)
F8_E5M2FNUZ    torch.float8_e5m2fnuz (where torch has it)
F8_E8M0        torch.float8_e8m0fnu where torch has it (as safetensors
               returns), else torch.uint8 with the same shape: one byte per
               element, the raw biased exponent (value = 2**(byte - 127),
               0xFF = NaN)
F4             packed fp4 e2m1, two elements per byte. When the last
               dimension is even: torch.float4_e2m1fn_x2 where torch has it
               (as safetensors returns), else torch.uint8, with the shape
               [..., last // 2]. Otherwise (odd last dimension, scalar):
               1-D torch.uint8 of the raw bytes. Bytes are exactly as in
               the file; by the common convention (OCP MX, torch's _x2 type)
               element 2*i sits in the low nibble, 2*i+1 in the high nibble.
F6_E2M3/E3M2   UnsupportedDtypeError ("Dtype not understood", as
               safetensors raises): neither torch nor numpy has a type.
=============  ==========================================================

numpy: as safetensors 0.8 (safe_open(framework="np"), safetensors.numpy),
whether or not ``ml_dtypes`` is installed. The F8 types and F4 raise
UnsupportedDtypeError (safetensors looks the type up as an attribute of the
numpy module, which never has one: AttributeError). BF16 loads as
``numpy.dtype("bfloat16")`` when something in the process has registered that
name (``import ml_dtypes`` does), else raises (TypeError in safetensors).
weightlift never imports ml_dtypes itself, so the outcome is the one
safetensors gives in the same process. UnsupportedDtypeError is a
SafetensorError, an AttributeError and a TypeError at once.
"""

from __future__ import annotations

import math
from typing import Any, Sequence, Tuple

from ._errors import UnsupportedDtypeError, UnsupportedError

_TORCH_NAMES = {
    "BOOL": "bool",
    "U8": "uint8",
    "I8": "int8",
    "I16": "int16",
    "U16": "uint16",
    "I32": "int32",
    "U32": "uint32",
    "I64": "int64",
    "U64": "uint64",
    "F16": "float16",
    "BF16": "bfloat16",
    "F32": "float32",
    "F64": "float64",
    "C64": "complex64",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "F8_E4M3FNUZ": "float8_e4m3fnuz",
    "F8_E5M2FNUZ": "float8_e5m2fnuz",
}

# Element bits (mirror of DTypeBits in C++).
BITS = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8,
    "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8,
    "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64,
    "U64": 64,
}

_NUMPY_NAMES = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16",
    "U16": "uint16", "I32": "int32", "U32": "uint32", "I64": "int64",
    "U64": "uint64", "F16": "float16", "F32": "float32", "F64": "float64",
    "C64": "complex64",
}
# What safetensors.numpy.load(bytes) knows (its own table: numpy's types).
NUMPY_OWN_TYPES = frozenset(_NUMPY_NAMES)
# Types numpy lacks, named as safetensors 0.8 looks them up on the numpy
# module (never there, ml_dtypes or not): F4 and the F8 types always raise.
_NUMPY_MISSING = {
    "F4": "float4_e2m1fn_x2", "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2", "F8_E4M3FNUZ": "float8_e4m3fnuz",
    "F8_E5M2FNUZ": "float8_e5m2fnuz", "F8_E8M0": "float8_e8m0fnu",
}


def numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def nbytes(dtype: str, shape: Sequence[int]) -> int:
    return numel(shape) * BITS[dtype] // 8


def _packed_shape(dtype: str, shape: Tuple[int, ...]):
    """(shape, packed_x2) for sub-byte dtypes; see the module docstring."""
    if dtype == "F4" and len(shape) >= 1 and shape[-1] % 2 == 0:
        return tuple(shape[:-1]) + (shape[-1] // 2,), True
    return (nbytes(dtype, shape),), False


def _where(name) -> str:
    return f"tensor {name!r}: " if name is not None else ""


def _not_understood(dtype: str, name) -> UnsupportedDtypeError:
    # safetensors' text ("Dtype not understood: F6_E2M3"), then why.
    return UnsupportedDtypeError(
        f"Dtype not understood: {dtype} ({_where(name)}torch and numpy "
        f"have no {dtype} type; safetensors refuses it too)",
        code="Unsupported")


def torch_layout(dtype: str, shape: Sequence[int], name=None):
    """(torch dtype, shape) of the tensor weightlift returns; NAME (the
    tensor's) only goes into the error."""
    import torch

    shape = tuple(int(d) for d in shape)
    if dtype in ("F6_E2M3", "F6_E3M2"):
        raise _not_understood(dtype, name)
    if dtype == "F4":
        pshape, x2 = _packed_shape(dtype, shape)
        f4 = getattr(torch, "float4_e2m1fn_x2", None)
        if x2 and f4 is not None:
            return f4, pshape
        return torch.uint8, pshape
    if dtype == "F8_E8M0":
        return getattr(torch, "float8_e8m0fnu", torch.uint8), shape
    attr = _TORCH_NAMES.get(dtype)
    if attr is None:
        raise UnsupportedError(f"{_where(name)}unknown dtype {dtype!r}",
                               code="Unsupported")
    tdt = getattr(torch, attr, None)
    if tdt is None:
        raise UnsupportedDtypeError(
            f"{_where(name)}dtype {dtype} needs torch.{attr}, which torch "
            f"{torch.__version__} does not have", code="Unsupported")
    return tdt, shape


def numpy_layout(dtype: str, shape: Sequence[int], name=None):
    """(numpy dtype, shape) of the array weightlift returns; NAME (the
    tensor's) only goes into the error."""
    import numpy as np

    shape = tuple(int(d) for d in shape)
    if dtype in ("F6_E2M3", "F6_E3M2"):
        raise _not_understood(dtype, name)
    missing = _NUMPY_MISSING.get(dtype)
    if missing is not None:
        raise UnsupportedDtypeError(
            f"module 'numpy' has no attribute '{missing}' ({_where(name)}"
            f"dtype {dtype}; safetensors.numpy refuses it too, with or "
            f"without ml_dtypes; use framework='pt')", code="Unsupported")
    np_name = _NUMPY_NAMES.get(dtype)
    if np_name is not None:
        return np.dtype(np_name), shape
    if dtype == "BF16":
        try:  # registered by ml_dtypes once imported, as safetensors needs
            return np.dtype("bfloat16"), shape
        except TypeError:
            raise UnsupportedDtypeError(
                f"data type 'bfloat16' not understood ({_where(name)}dtype "
                f"BF16: numpy has no bfloat16 until ml_dtypes is imported, "
                f"as with safetensors; or use framework='pt')",
                code="Unsupported") from None
    raise UnsupportedError(f"{_where(name)}unknown dtype {dtype!r}",
                           code="Unsupported")


def to_torch(dtype: str, shape: Sequence[int], data: Any, device: str,
             name=None):
    """Zero-copy torch view of DATA (1-D uint8 DLPack capsule, or None for
    an empty tensor) as DTYPE with SHAPE."""
    import torch

    tdt, tshape = torch_layout(dtype, shape, name)
    if data is None:
        return torch.empty(tshape, dtype=tdt, device=device)
    t = torch.utils.dlpack.from_dlpack(data)
    if tdt != torch.uint8:
        t = t.view(tdt)
    return t.reshape(tshape)


def to_numpy(dtype: str, shape: Sequence[int], data: Any, name=None):
    import numpy as np

    ndt, nshape = numpy_layout(dtype, shape, name)
    if data is None:
        return np.empty(nshape, dtype=ndt)
    a = np.frombuffer(data, dtype=np.uint8)  # zero-copy, keeps DATA alive
    if ndt != np.uint8:
        a = a.view(ndt)
    return a.reshape(nshape)


# converter()'s results by (dtype, shape, numpy): a loop that opens a new
# handle per pass asks again for the same tensors. Bounded (cleared when
# full); only successes are kept (numpy's bfloat16 may come later, with
# ml_dtypes).
_CONVERTERS: dict = {}
_MAX_CONVERTERS = 4096


def converter(dtype: str, shape: Sequence[int], numpy: bool, name=None):
    """A function from a host tensor's bytes (1-D uint8 DLPack capsule, or a
    memoryview for NUMPY; None when empty) to the cpu tensor / array
    weightlift returns for DTYPE and SHAPE: to_torch / to_numpy with the
    layout worked out once (safe_open's per-call path calls it per tensor).
    Raises the layout's UnsupportedDtypeError now."""
    key = (dtype, tuple(shape), numpy)
    made = _CONVERTERS.get(key)
    if made is None:
        made = _make_converter(dtype, shape, numpy, name)
        if len(_CONVERTERS) >= _MAX_CONVERTERS:
            _CONVERTERS.clear()
        _CONVERTERS[key] = made
    return made


def _make_converter(dtype: str, shape: Sequence[int], numpy: bool, name):
    if numpy:
        import numpy as np

        ndt, nshape = numpy_layout(dtype, shape, name)
        flat = len(nshape) == 1  # frombuffer's shape already

        def to_array(data):
            if data is None:
                return np.empty(nshape, dtype=ndt)
            a = np.frombuffer(data, dtype=ndt)
            return a if flat else a.reshape(nshape)
        return to_array

    import torch

    tdt, tshape = torch_layout(dtype, shape, name)
    from_dlpack = torch.utils.dlpack.from_dlpack
    cast = tdt != torch.uint8

    def to_tensor(data):
        if data is None:
            return torch.empty(tshape, dtype=tdt)
        t = from_dlpack(data)
        return (t.view(tdt) if cast else t).reshape(tshape)
    return to_tensor


def check_framework_types(tensors, numpy: bool) -> None:
    """Raises the layout error of the first of TENSORS (ckpt.tensors() rows:
    name, dtype, shape, ...) that FRAMEWORK cannot hold, before anything is
    read."""
    layout = numpy_layout if numpy else torch_layout
    for name, dtype, shape, *_ in tensors:
        layout(dtype, shape, name)


def torch_dtype_to_safetensors(tdt) -> str:
    """Reverse mapping for error messages and checks."""
    import torch

    for k, name in _TORCH_NAMES.items():
        if getattr(torch, name, None) == tdt:
            return k
    return str(tdt)


def view_torch(buf, dtype: str, shape: Sequence[int]):
    """View a 1-D uint8 torch buffer (or None) as the returned layout."""
    import torch

    tdt, tshape = torch_layout(dtype, shape)
    if buf is None:
        return torch.empty(tshape, dtype=tdt)
    return (buf if tdt == torch.uint8 else buf.view(tdt)).reshape(tshape)


def view_numpy(buf, dtype: str, shape: Sequence[int]):
    import numpy as np

    ndt, nshape = numpy_layout(dtype, shape)
    if buf is None:
        return np.empty(nshape, dtype=ndt)
    return (buf if ndt == np.uint8 else buf.view(ndt)).reshape(nshape)
