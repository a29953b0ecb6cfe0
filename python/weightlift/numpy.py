"""Drop-in for ``safetensors.numpy``: ``load_file`` and ``load``.

Arrays are zero-copy views of host memory the loader allocated. The dtypes
numpy lacks behave as in safetensors.numpy 0.8 (weightlift._dtypes): F4, F6
and the F8 types raise UnsupportedDtypeError, with or without ml_dtypes;
BF16 loads once ml_dtypes has been imported. ``load(bytes)`` knows only
numpy's own types, as safetensors.numpy.load: any other raises
UnsupportedDtypeKeyError (a KeyError, as there).
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

from . import _core, _dtypes
from ._errors import InvalidArgumentError, UnsupportedDtypeKeyError


def load_file(filename: Any, *, progress: bool = False,
              **options) -> Dict[str, "numpy.ndarray"]:  # noqa: F821
    """Loads every tensor of FILENAME into host memory as numpy arrays."""
    return _load(filename, progress, False, options)


def _load(filename: Any, progress: bool, own_types_only: bool,
          options: Dict[str, Any]) -> Dict[str, "numpy.ndarray"]:  # noqa: F821
    if options.get("device", "cpu") not in ("cpu", None):
        raise InvalidArgumentError(
            f"Device {options['device']} is not supported for framework "
            f"numpy (weightlift.numpy loads into host memory only)",
            code="InvalidArgument")
    options.pop("device", None)
    _core.check_options(options)  # before the file, as safetensors does
    ckpt = _core.open_checkpoint(filename)
    _check_dtypes(ckpt, own_types_only)
    items, _, _ = _core.load_raw(ckpt, progress=progress, numpy=True,
                                 **options)
    return {name: _dtypes.to_numpy(dt, shape, data, name)
            for name, dt, shape, data in items}


def _check_dtypes(ckpt, own_types_only: bool) -> None:
    """Raises, before anything is read, what safetensors.numpy raises for
    the first tensor numpy cannot hold. OWN_TYPES_ONLY: load(bytes)'s
    table of numpy's own types (KeyError for BF16 too)."""
    if own_types_only:
        for name, dtype, *_ in ckpt.tensors():
            if dtype not in _dtypes.NUMPY_OWN_TYPES:
                raise UnsupportedDtypeKeyError(
                    f"{dtype} (tensor {name!r}: numpy has no {dtype} type; "
                    f"safetensors.numpy.load raises KeyError for it too)",
                    code="Unsupported")
    _dtypes.check_framework_types(ckpt.tensors(), numpy=True)


def load(data: bytes, **options) -> Dict[str, "numpy.ndarray"]:  # noqa: F821
    """Loads a safetensors file held in memory. Only numpy's own dtypes (as
    safetensors.numpy.load): BF16, F8, F4 and F6 raise
    UnsupportedDtypeKeyError, a KeyError."""
    from ._memfile import bytes_path
    with bytes_path(data) as path:
        return _load(path, options.pop("progress", False), True, options)


def save_file(tensor_dict: Dict[str, Any], filename: Any,
              metadata: Optional[Dict[str, str]] = None) -> None:
    """Forwarded to safetensors.numpy.save_file."""
    import safetensors.numpy as sn
    sn.save_file(tensor_dict, os.fspath(filename), metadata=metadata)


def save(tensor_dict: Dict[str, Any],
         metadata: Optional[Dict[str, str]] = None) -> bytes:
    """Forwarded to safetensors.numpy.save."""
    import safetensors.numpy as sn
    return sn.save(tensor_dict, metadata=metadata)
