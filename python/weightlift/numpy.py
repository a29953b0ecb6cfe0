"""Drop-in for ``safetensors.numpy``: ``load_file`` and ``load``.

Arrays are zero-copy views of host memory the loader allocated. BF16 and
the F8 types need the ``ml_dtypes`` package (numpy has no such types);
F4 and F6 raise UnsupportedDtypeError, as safetensors.numpy raises.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

from . import _core, _dtypes
from ._errors import InvalidArgumentError


def load_file(filename: Any, *, progress: bool = False,
              **options) -> Dict[str, "numpy.ndarray"]:  # noqa: F821
    """Loads every tensor of FILENAME into host memory as numpy arrays."""
    if options.get("device", "cpu") not in ("cpu", None):
        raise InvalidArgumentError(
            f"Device {options['device']} is not supported for framework "
            f"numpy (weightlift.numpy loads into host memory only)",
            code="InvalidArgument")
    options.pop("device", None)
    _core.check_options(options)  # before the file, as safetensors does
    ckpt = _core.open_checkpoint(filename)
    _dtypes.check_framework_types(ckpt.tensors(), numpy=True)
    items, _, _ = _core.load_raw(ckpt, progress=progress, numpy=True,
                                 **options)
    return {name: _dtypes.to_numpy(dt, shape, data, name)
            for name, dt, shape, data in items}


def load(data: bytes, **options) -> Dict[str, "numpy.ndarray"]:  # noqa: F821
    """Loads a safetensors file held in memory."""
    from ._memfile import bytes_path
    with bytes_path(data) as path:
        return load_file(path, **options)


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
