"""Drop-in for ``safetensors.numpy``: ``load_file`` and ``load``.

Arrays are zero-copy views of host memory the loader allocated. BF16 and
the F8 types need the ``ml_dtypes`` package (numpy has no such types);
F4/F6 come back as packed uint8 (see weightlift._dtypes).
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

from . import _core, _dtypes


def load_file(filename: Any, *, progress: bool = False,
              **options) -> Dict[str, "numpy.ndarray"]:  # noqa: F821
    """Loads every tensor of FILENAME into host memory as numpy arrays."""
    if options.get("device", "cpu") not in ("cpu", None):
        raise ValueError("weightlift.numpy loads into host memory only")
    options.pop("device", None)
    items, _, _ = _core.load_raw(filename, progress=progress, numpy=True,
                                 **options)
    return {name: _dtypes.to_numpy(dt, shape, data)
            for name, dt, shape, data in items}


def load(data: bytes, **options) -> Dict[str, "numpy.ndarray"]:  # noqa: F821
    """Loads a safetensors file held in memory."""
    from ._memfile import bytes_path
    with bytes_path(data) as path:
        return load_file(path, **options)


def save_file(tensors: Dict[str, Any], filename: Any,
              metadata: Optional[Dict[str, str]] = None) -> None:
    """Forwarded to safetensors.numpy.save_file."""
    import safetensors.numpy as sn
    sn.save_file(tensors, os.fspath(filename), metadata=metadata)


def save(tensors: Dict[str, Any],
         metadata: Optional[Dict[str, str]] = None) -> bytes:
    """Forwarded to safetensors.numpy.save."""
    import safetensors.numpy as sn
    return sn.save(tensors, metadata=metadata)
