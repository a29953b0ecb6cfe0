"""``safe_open``: the safetensors context manager, backed by weightlift.

    with weightlift.safe_open("model.safetensors", framework="pt",
                              device="cuda:0") as f:
        for k in f.keys():
            t = f.get_tensor(k)

Opening validates every header (no tensor data is read). ``get_tensor``
loads one tensor through the C++ loader onto DEVICE; the result is a
zero-copy view that outlives the handle. ``get_slice(name)[...]`` reads
only the selected rows when the index picks a contiguous range of the first
dimension (``[a:b]``, ``[a:b, :]``, ``[i]``, ``[a:b, ...]``): into host
memory, then (for a cuda handle) one copy of just those rows to the device,
as a tensor-parallel rank that needs its shard of a weight wants. Any other
index loads the whole tensor once (cached on the slice object) and returns a
copy of the requested part. Either way the result owns exactly its own
bytes and never pins the full tensor's memory.
"""

from __future__ import annotations

import collections
import os
from typing import Any, Dict, List, Optional, Tuple

from . import _core, _dtypes
from ._errors import (InvalidArgumentError, TensorNotFoundError,
                      WeightliftIOError)
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


# Largest single read, far below the 2 GiB a Linux read returns at most.
_MAX_READ = 1 << 30


def _is_int(x) -> bool:
    # bool is an int subclass but indexes as a new axis (torch and numpy).
    return type(x) is int  # noqa: E721 - exactly int, not bool/np.integer


def _is_full(x) -> bool:
    """``:`` (or ``::1``): all of one dimension."""
    return (type(x) is slice and x.start is None and x.stop is None
            and (x.step is None or (_is_int(x.step) and x.step == 1)))


def _row_range(index, shape):
    """(start, stop, squeeze) when INDEX selects rows [start, stop) of the
    first dimension and all of every other one (squeeze: an int index that
    drops the first dimension); None for any other index, which then goes
    the general (load everything, index with torch/numpy) way. Where this
    returns a range, it is the one torch and numpy indexing select, clamped
    the same way (stop < start gives zero rows)."""
    if not shape:
        return None
    n = shape[0]
    parts = index if isinstance(index, tuple) else (index,)
    if sum(1 for p in parts if p is Ellipsis) > 1:
        return None
    if len([p for p in parts if p is not Ellipsis]) > len(shape):
        return None  # too many indices: let torch/numpy raise
    if not parts:
        return 0, n, False
    first, rest = parts[0], parts[1:]
    if not all(p is Ellipsis or _is_full(p) for p in rest):
        return None
    if first is Ellipsis or _is_full(first):
        return 0, n, False
    if _is_int(first):
        i = first + n if first < 0 else first
        if not 0 <= i < n:
            return None  # out of range: let torch/numpy raise
        return i, i + 1, True
    if type(first) is slice and all(v is None or _is_int(v) for v in
                                    (first.start, first.stop, first.step)):
        start, stop, step = first.indices(n)
        if step != 1:
            return None
        return start, max(start, stop), False
    return None


def _pread_exact(path: str, offset: int, out: memoryview, name: str) -> None:
    """Fills OUT with the bytes of PATH at OFFSET; loops over short reads
    (os.preadv retries EINTR itself) in pieces of at most _MAX_READ."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        raise WeightliftIOError(
            f"{path}: tensor '{name}': open failed: "
            f"{os.strerror(e.errno)} ({e.errno})", code="IoError") from None
    try:
        done, total = 0, len(out)
        while done < total:
            piece = out[done:done + _MAX_READ]
            try:
                got = os.preadv(fd, [piece], offset + done)
            except OSError as e:
                raise WeightliftIOError(
                    f"{path}: tensor '{name}': read of {len(piece)} bytes at "
                    f"offset {offset + done} failed: "
                    f"{os.strerror(e.errno)} ({e.errno})",
                    code="IoError") from None
            if got == 0:
                raise WeightliftIOError(
                    f"{path}: tensor '{name}': unexpected end of file at "
                    f"offset {offset + done} ({total - done} of {total} bytes "
                    f"at offset {offset} missing; the file shrank after it "
                    f"was opened)", code="IoError")
            done += got
    finally:
        os.close(fd)


class SafeSlice:
    """``get_slice(name)``: shape and dtype without loading. Indexing a
    contiguous row range reads just those rows (on any device); any other
    index loads the tensor (once) and returns a copy of the selected part."""

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
        part = self._read_rows(index)
        if part is not None:
            return part
        if self._full is None:
            self._full = self._handle.get_tensor(self._info.name)
        part = self._full[index]
        return part.clone() if hasattr(part, "clone") else part.copy()

    def _read_rows(self, index):
        """The fast path: INDEX as rows read straight from the file (then
        copied to the handle's device), or None where it does not apply
        (sub-byte dtypes, other indices, or the whole tensor already
        loaded)."""
        h, info = self._handle, self._info
        h._check_open()
        if self._full is not None:
            return None
        if h._device != "cpu" and h._loader is None:
            # The device is checked as get_tensor checks it (a cuda handle
            # without CUDA is UnsupportedError, not torch's own error).
            h._loader = _core.make_loader(h._options)
        if _dtypes.BITS.get(info.dtype, 0) % 8 != 0:
            return None  # F4 / F6: rows need not be whole bytes
        rows = _row_range(index, info.shape)
        if rows is None:
            return None
        start, stop, squeeze = rows
        inner = list(info.shape[1:])
        row_bytes = _dtypes.nbytes(info.dtype, inner)
        shape = inner if squeeze else [stop - start] + inner
        length = (stop - start) * row_bytes
        if h._framework == "np":
            import numpy as np
            _dtypes.numpy_layout(info.dtype, shape)  # raises if unsupported
            buf = np.empty(length, dtype=np.uint8) if length else None
            mem = buf
            view = _dtypes.view_numpy
        else:
            import torch
            _dtypes.torch_layout(info.dtype, shape)  # raises if unsupported
            buf = torch.empty(length, dtype=torch.uint8) if length else None
            mem = buf.numpy() if length else None  # shares buf's memory
            view = _dtypes.view_torch
        if length:
            _pread_exact(h._resolved[info.file],
                         info.offset + start * row_bytes,
                         memoryview(mem).cast("B"), info.name)
        part = view(buf, info.dtype, shape)
        if h._device != "cpu":  # framework "pt": np handles are cpu only
            part = part.to(h._device)
        return part
