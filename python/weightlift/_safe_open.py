"""``safe_open``: the safetensors context manager, backed by weightlift.

    with weightlift.safe_open("model.safetensors", framework="pt",
                              device="cuda:0") as f:
        for k in f.keys():
            t = f.get_tensor(k)

Opening validates every header (no tensor data is read). ``get_tensor``
loads one tensor through the C++ loader onto DEVICE; the result is a
zero-copy view that outlives the handle. ``get_slice(name)[...]`` with basic
indexing (ints, slices with a positive step, Ellipsis) goes through the same
loader as a slice request (_slices.py): only the selected bytes are read (or
a covering range placed with strided copies where that moves fewer), with
the handle's staging, O_DIRECT and report, straight onto DEVICE, as a
tensor-parallel rank that needs its shard of a weight wants. Any other index
loads the whole tensor once (cached on the slice object) and returns a copy
of the requested part. Either way the result owns exactly its own bytes and
never pins the full tensor's memory.
"""

from __future__ import annotations

import collections
from typing import Any, Dict, List, Optional, Tuple

from . import _core, _dtypes, _slices
from ._errors import InvalidArgumentError, TensorNotFoundError
from ._options import device_string

TensorInfo = collections.namedtuple(
    "TensorInfo", "name dtype shape file offset size")
TensorInfo.__doc__ = ("A tensor's place: FILE is the shard's path, OFFSET the "
                      "absolute byte offset in it, SIZE the byte count.")

_FRAMEWORKS = {"pt": "pt", "torch": "pt", "pytorch": "pt",
               "np": "np", "numpy": "np"}


class safe_open:  # noqa: N801 - safetensors' name
    """Opens a safetensors file (or index, or checkpoint directory).

    ``framework`` is "pt" (torch) or "np" (numpy); ``device`` as in
    safetensors ("cpu", "cuda:0", an int, a torch.device). Other keyword
    arguments are load options (backend, threads, ...).
    """

    def __init__(self, filename: Any, framework: str = "pt",
                 device: Any = "cpu", **options):
        fw = _FRAMEWORKS.get(str(framework).lower())
        if fw is None:
            raise InvalidArgumentError(
                f"framework {framework!r} is not supported by weightlift "
                f"(use 'pt' or 'np')", code="InvalidArgument")
        self._framework = fw
        self._device = device_string(device)
        if fw == "np" and self._device != "cpu":
            raise InvalidArgumentError(
                "framework 'np' loads into host memory only (device='cpu')",
                code="InvalidArgument")
        self._options = dict(options, device=self._device)
        self._ckpt = _core.open_checkpoint(filename)
        files = self._ckpt.files()
        self._paths = [f["path"] for f in files]
        # Where the loader reads: the header was validated there.
        self._resolved = {f["path"]: f["resolved_path"] for f in files}
        # safetensors: None when the key is absent, {} when it is empty.
        self._meta = (files[0]["metadata"]
                      if files and files[0]["has_metadata"] else None)
        self._info: Dict[str, TensorInfo] = {}
        for name, dt, shape, file, offset, size in self._ckpt.tensors():
            self._info[name] = TensorInfo(name, dt, list(shape),
                                          self._paths[file], offset, size)
        self._loader = None  # created on the first get_tensor
        self._closed = False

    # -- context manager ---------------------------------------------------
    def __enter__(self) -> "safe_open":
        self._check_open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Releases the loader and its staging memory. Idempotent; tensors
        already returned stay valid."""
        self._closed = True
        self._loader = None
        self._ckpt = None

    # -- description -------------------------------------------------------
    def keys(self) -> List[str]:
        """Tensor names, sorted (as safetensors returns them)."""
        self._check_open()
        return sorted(self._info)

    def offset_keys(self) -> List[str]:
        """Tensor names in file order (by shard, then data offset)."""
        self._check_open()
        return list(self._info)

    def metadata(self) -> Optional[Dict[str, str]]:
        """``__metadata__`` of the (first) file: None when the header has no
        ``__metadata__`` key, {} when it is present but empty."""
        self._check_open()
        return None if self._meta is None else dict(self._meta)

    def offsets(self, name: str) -> Tuple[int, int]:
        """Absolute [begin, end) byte offsets of NAME in its file."""
        info = self.tensor_info(name)
        return info.offset, info.offset + info.size

    def tensor_info(self, name: str) -> TensorInfo:
        self._check_open()
        info = self._info.get(name)
        if info is None:
            raise TensorNotFoundError(f"File does not contain tensor {name}",
                                      code="NotFound")
        return info

    # -- data --------------------------------------------------------------
    def get_tensor(self, name: str):
        info = self.tensor_info(name)
        if info.size == 0:  # nothing to read
            if self._framework == "np":
                return _dtypes.to_numpy(info.dtype, info.shape, None)
            return _dtypes.to_torch(info.dtype, info.shape, None, self._device)
        if self._loader is None:
            self._loader = _core.make_loader(self._options)
        job = self._loader.start_load(self._ckpt, [name])
        _core.wait(job, False, info.size)
        ((_, dt, shape, data),) = job.take_tensors(self._framework == "np")
        if self._framework == "np":
            return _dtypes.to_numpy(dt, shape, data)
        return _dtypes.to_torch(dt, shape, data, self._device)

    def get_slice(self, name: str) -> "SafeSlice":
        return SafeSlice(self, self.tensor_info(name))

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidArgumentError("File is closed",
                                       code="InvalidArgument")

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._info)} tensors"
        return f"<weightlift.safe_open {self._paths[:1]} {state}>"


class SafeSlice:
    """``get_slice(name)``: shape and dtype without loading. Basic indexing
    reads just the selected bytes through the loader (on any device); any
    other index loads the tensor (once) and returns a copy of the selected
    part."""

    def __init__(self, handle: safe_open, info: TensorInfo):
        self._handle = handle
        self._info = info
        self._full = None

    def get_shape(self) -> List[int]:
        return list(self._info.shape)

    def get_dtype(self) -> str:
        """The safetensors dtype string, e.g. "BF16"."""
        return self._info.dtype

    def __len__(self) -> int:
        if not self._info.shape:
            raise TypeError("len() of a 0-d tensor")
        return self._info.shape[0]

    def __getitem__(self, index):
        h, info = self._handle, self._info
        h._check_open()
        part = self._read_slice(index)
        if part is not None:
            return part
        if self._full is None:
            self._full = self._handle.get_tensor(self._info.name)
        part = self._full[index]
        return part.clone() if hasattr(part, "clone") else part.copy()

    def _read_slice(self, index):
        """INDEX read through the loader (only the selected bytes, straight
        onto the handle's device, see _slices), or None where the index is
        not basic indexing or the dtype has sub-byte elements: then the
        whole tensor is loaded once and indexed."""
        h, info = self._handle, self._info
        if h._loader is None:
            # Also checks the device as get_tensor does (a cuda handle
            # without CUDA is UnsupportedError, not torch's own error).
            h._loader = _core.make_loader(h._options)
        if _dtypes.BITS.get(info.dtype, 0) % 8 != 0:
            return None  # F4 / F6: slices need not be whole bytes
        norm = _slices.normalize_basic_index(index, info.shape)
        if norm is None:
            return None
        dims, squeeze = norm
        shape = _slices.slice_shape(dims, squeeze)
        if h._framework == "np":
            _dtypes.numpy_layout(info.dtype, shape)  # raises if unsupported
        else:
            _dtypes.torch_layout(info.dtype, shape)  # raises if unsupported
        (part,) = _slices.load_slices(h._loader, h._ckpt,
                                      [(info.name, dims, squeeze)],
                                      h._framework, h._device)
        return part
