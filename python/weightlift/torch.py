"""Drop-in for ``safetensors.torch``: same names, same results.

    from weightlift.torch import load_file   # was: from safetensors.torch

Tensors are zero-copy views of memory the C++ loader allocated on the host,
or of one block of torch's caching allocator on a CUDA device (as
safetensors' tensors are, see weightlift._load_torch); they stay valid for
as long as any of them lives.
Load options (backend, threads, ...) may be passed as keyword arguments; see
``weightlift._options``. ``save_file``/``save``/``save_model`` are forwarded
to the safetensors package when it is installed (weightlift only reads).
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict, Optional

from . import _core, _dtypes
from ._options import device_string


def load_file(filename: Any, device: Any = "cpu", *, progress: bool = False,
              **options) -> Dict[str, "torch.Tensor"]:  # noqa: F821
    """Loads every tensor of FILENAME (a .safetensors file, an index or a
    checkpoint directory) onto DEVICE. Keys are in file order, as
    safetensors returns them. tp_rank / tp_size / tp_plan / process_group
    load this rank's parts (docs/tensor-parallel.md)."""
    t0 = time.perf_counter()
    # _tp only when a TP keyword is there (as load_checkpoint): a plain
    # first call does not pay for importing it.
    from . import _TP_KEYWORDS
    if any(k in options for k in _TP_KEYWORDS):
        from . import _tp
        tp = _tp.take_tp(options, filename)
        if tp is not None:
            return dict(_tp.load(filename, device_string(device), tp,
                                 options, progress)[0])
    options = dict(options, device=device_string(device))
    from . import _load_torch
    if _load_torch.applies(options["device"], False):
        # Options before the file, as safetensors; the file opens while the
        # loader is made (a first call).
        ckpt, open_s, prepared = _load_torch.open_beside_loader(
            filename, options, _load_torch.whole_block(options["device"]))
        return dict(_load_torch.load(ckpt, options["device"], options,
                                     progress, t_start=t0, open_s=open_s,
                                     prepared=prepared)[0])
    _core.check_options(options)  # before the file, as safetensors does
    ckpt = _core.open_checkpoint(filename)
    _dtypes.check_framework_types(ckpt.tensors(), numpy=False)
    items, dev, _ = _core.load_raw(ckpt, progress=progress, **options)
    return {name: _dtypes.to_torch(dt, shape, data, dev, name)
            for name, dt, shape, data in items}


def load(data: bytes, **options) -> Dict[str, "torch.Tensor"]:  # noqa: F821
    """Loads a safetensors file held in memory (CPU tensors)."""
    from ._memfile import bytes_path
    with bytes_path(data) as path:
        return load_file(path, device="cpu", **options)


def load_model(model, filename: Any, strict: bool = True,
               device: Any = "cpu", **options):
    """safetensors.torch.load_model: fills MODEL from FILENAME in place and
    returns (missing: set, unexpected: list) as safetensors does; see
    weightlift._load_model for what it checks before writing anything."""
    from ._load_model import load_model as _load_model
    return _load_model(model, filename, strict=strict, device=device,
                       **options)


def _safetensors_torch():
    try:
        import safetensors.torch as st
    except ImportError as e:  # pragma: no cover - depends on install
        raise ImportError("weightlift only reads checkpoints; saving needs "
                          "the safetensors package") from e
    return st


def save_file(tensors: Dict[str, Any], filename: Any,
              metadata: Optional[Dict[str, str]] = None) -> None:
    """Forwarded to safetensors.torch.save_file."""
    _safetensors_torch().save_file(tensors, os.fspath(filename),
                                   metadata=metadata)


def save(tensors: Dict[str, Any],
         metadata: Optional[Dict[str, str]] = None) -> bytes:
    """Forwarded to safetensors.torch.save."""
    return _safetensors_torch().save(tensors, metadata=metadata)


def save_model(model, filename: str, metadata: Optional[Dict[str, str]] = None,
               force_contiguous: bool = True) -> None:
    """Forwarded to safetensors.torch.save_model."""
    _safetensors_torch().save_model(model, os.fspath(filename),
                                    metadata=metadata,
                                    force_contiguous=force_contiguous)
