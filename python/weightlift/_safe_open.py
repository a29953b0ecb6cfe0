"""``safe_open``: the safetensors context manager, backed by weightlift.

    with weightlift.safe_open("model.safetensors", framework="pt",
                              device="cuda:0") as f:
        for k in f.keys():
            t = f.get_tensor(k)

Opening validates every header (no tensor data is read) and the load
options (framework=, device=, backend=, ...: a SafetensorError where
safetensors raises one). ``get_tensor`` loads one tensor through the C++
loader onto DEVICE, ``get_tensors`` all of them in one load; results are
zero-copy views that outlive the handle. ``get_slice(name)[index]`` follows
safetensors' indexing rules (see weightlift._slice_index) and reads only the
rows of the first dimension the index touches: into host memory, then (for
a cuda handle) one copy of just the selected part to the device, as a
tensor-parallel rank that needs its shard of a weight wants. The result owns
exactly its own bytes. A slice keeps what it needs to read, so (as in
safetensors) it still works after its handle is closed.
"""

from __future__ import annotations

import collections
import os
from typing import Any, Dict, List, Optional, Tuple

from . import _core, _dtypes, _slice_index
from ._errors import (InvalidArgumentError, TensorNotFoundError,
                      WeightliftIOError)
from ._options import device_string

TensorInfo = collections.namedtuple(
    "TensorInfo", "name dtype shape file offset size")
TensorInfo.__doc__ = ("A tensor's place: FILE is the shard's path, OFFSET the "
                      "absolute byte offset in it, SIZE the byte count.")

_FRAMEWORKS = {"pt": "pt", "torch": "pt", "pytorch": "pt",
               "np": "np", "numpy": "np"}
# Frameworks safetensors has and weightlift does not.
_OTHER_FRAMEWORKS = ("tf", "tensorflow", "jax", "flax", "mlx", "paddle")


def _framework(framework: Any) -> str:
    fw = _FRAMEWORKS.get(framework) if isinstance(framework, str) else None
    if fw is not None:
        return fw
    why = ("is not supported by weightlift"
           if framework in _OTHER_FRAMEWORKS else "is invalid")
    raise InvalidArgumentError(
        f"framework {framework} {why} (weightlift loads 'pt' (torch) and "
        f"'np' (numpy))", code="InvalidArgument")


class _Source:
    """What reading a tensor needs: the open checkpoint, the framework and
    the load options. Shared by a handle and its slices; a slice keeps it
    alive after the handle is closed."""

    def __init__(self, ckpt, framework: str, options: Dict[str, Any]):
        self.ckpt = ckpt
        self.numpy = framework == "np"
        self.options = options
        self.device = options["device"]
        self.resolved = {f["path"]: f["resolved_path"] for f in ckpt.files()}

    def load(self, names: Optional[List[str]]):
        """[(name, tensor)] of NAMES (every tensor when None), in file
        order, through a pooled loader."""
        rows = self.ckpt.tensors()
        if names is not None:
            wanted = set(names)
            rows = [r for r in rows if r[0] in wanted]
        _dtypes.check_framework_types(rows, self.numpy)
        items, dev, _ = _core.load_raw(self.ckpt, names, numpy=self.numpy,
                                       **self.options)
        if self.numpy:
            return [(n, _dtypes.to_numpy(dt, shape, data, n))
                    for n, dt, shape, data in items]
        return [(n, _dtypes.to_torch(dt, shape, data, dev, n))
                for n, dt, shape, data in items]


class safe_open:  # noqa: N801 - safetensors' name
    """Opens a safetensors file (or index, or checkpoint directory).

    ``framework`` is "pt" (torch) or "np" (numpy); ``device`` as in
    safetensors ("cpu", "cuda:0", an int, a torch.device). Other keyword
    arguments are load options (backend, threads, ...).
    """

    def __init__(self, filename: Any, framework: str = "pt",
                 device: Any = "cpu", **options):
        fw = _framework(framework)
        dev = device_string(device)
        if fw == "np" and dev != "cpu":
            raise InvalidArgumentError(
                f"Device {dev} is not supported for framework numpy "
                f"(numpy arrays live in host memory)", code="InvalidArgument")
        options = dict(options, device=dev)
        # Checks every option first (an invalid backend or device raises
        # here, before the file is looked at, as in safetensors); the
        # loader goes back to the pool for this handle's loads.
        with _core.pooled_loader(options):
            pass
        ckpt = _core.open_checkpoint(filename)
        self._source: Optional[_Source] = _Source(ckpt, fw, options)
        files = ckpt.files()
        self._paths = [f["path"] for f in files]
        # safetensors: None when the key is absent, {} when it is empty.
        self._meta = (files[0]["metadata"]
                      if files and files[0]["has_metadata"] else None)
        self._info: Dict[str, TensorInfo] = {}
        for name, dt, shape, file, offset, size in ckpt.tensors():
            self._info[name] = TensorInfo(name, dt, list(shape),
                                          self._paths[file], offset, size)

    # -- context manager ---------------------------------------------------
    def __enter__(self) -> "safe_open":
        self._open_source()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Closes the handle (idempotent). Tensors already returned, and
        slices already taken, stay usable."""
        self._source = None

    # -- description -------------------------------------------------------
    def keys(self) -> List[str]:
        """Tensor names, sorted (as safetensors returns them)."""
        self._open_source()
        return sorted(self._info)

    def offset_keys(self) -> List[str]:
        """Tensor names in file order (by shard, then data offset)."""
        self._open_source()
        return list(self._info)

    def metadata(self) -> Optional[Dict[str, str]]:
        """``__metadata__`` of the (first) file: None when the header has no
        ``__metadata__`` key, {} when it is present but empty."""
        self._open_source()
        return None if self._meta is None else dict(self._meta)

    def offsets(self, name: str) -> Tuple[int, int]:
        """Absolute [begin, end) byte offsets of NAME in its file."""
        info = self.tensor_info(name)
        return info.offset, info.offset + info.size

    def tensor_info(self, name: str) -> TensorInfo:
        self._open_source()
        info = self._info.get(name)
        if info is None:
            raise TensorNotFoundError(f"File does not contain tensor {name}",
                                      code="NotFound")
        return info

    # -- data --------------------------------------------------------------
    def get_tensor(self, name: str):
        info = self.tensor_info(name)
        ((_, tensor),) = self._open_source().load([info.name])
        return tensor

    def get_tensors(self) -> Dict[str, Any]:
        """Every tensor, in one load, keyed in file order (as safetensors'
        offset_keys())."""
        return dict(self._open_source().load(None))

    def get_slice(self, name: str) -> "SafeSlice":
        info = self.tensor_info(name)
        return SafeSlice(self._open_source(), info)

    def _open_source(self) -> _Source:
        if self._source is None:
            raise InvalidArgumentError("File is closed",
                                       code="InvalidArgument")
        return self._source

    def __repr__(self) -> str:
        state = ("closed" if self._source is None
                 else f"{len(self._info)} tensors")
        return f"<weightlift.safe_open {self._paths[:1]} {state}>"


# Largest single read, far below the 2 GiB a Linux read returns at most.
_MAX_READ = 1 << 30


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
    """``get_slice(name)``: shape and dtype without loading; ``[index]``
    reads just the part the index selects (see the module docstring)."""

    def __init__(self, source: _Source, info: TensorInfo):
        self._source = source
        self._info = info
        self._full = None  # the whole tensor, for indices torch resolves

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
        src, info = self._source, self._info
        fw = "np" if src.numpy else "pt"
        sel = _slice_index.select(index, info.shape, fw)
        if sel is not None and _dtypes.BITS[info.dtype] % 8 == 0:
            return self._read(sel)
        # A torch index beyond basic indexing (None, lists, tensors, ...),
        # or a sub-byte dtype (rows need not be whole bytes): index the
        # whole tensor with torch, loaded once.
        if self._full is None:
            ((_, self._full),) = src.load([info.name])
        part = self._full[index]
        return part.clone() if hasattr(part, "clone") else part.copy()

    def _read(self, sel: "_slice_index.Selection"):
        """The selected part: the rows of dimension 0 it touches, read into
        a fresh host buffer, indexed, copied to a buffer of its own when it
        is not the whole read, then moved to the device."""
        src, info = self._source, self._info
        if src.numpy:
            import numpy as np
            _dtypes.numpy_layout(info.dtype, info.shape, info.name)
            new_buffer = lambda n: np.empty(n, dtype=np.uint8)  # noqa: E731
            view, as_bytes = _dtypes.view_numpy, (lambda b: b)
        else:
            import torch
            _dtypes.torch_layout(info.dtype, info.shape, info.name)
            # A cuda handle without a usable device fails as get_tensor
            # fails (the loader's check), not with torch's own error.
            if src.device != "cpu":
                with _core.pooled_loader(src.options):
                    pass
            new_buffer = lambda n: torch.empty(n, dtype=torch.uint8)  # noqa
            view, as_bytes = _dtypes.view_torch, (lambda b: b.numpy())
        bits = _dtypes.BITS[info.dtype]
        first, length = _slice_index.byte_span(sel, info.shape, bits)
        out_shape = _slice_index.result_shape(sel)
        if length == 0:
            part = view(None, info.dtype, out_shape)
        else:
            buf = new_buffer(length)
            _pread_exact(src.resolved[info.file], info.offset + first,
                         memoryview(as_bytes(buf)).cast("B"), info.name)
            rows = list(info.shape)
            if rows:
                rows[0] = length * 8 // bits // max(1, _numel(rows[1:]))
            block = view(buf, info.dtype, rows)
            part = block[_block_index(sel)]
            if _numel(out_shape) != _numel(rows):
                part = (part.copy() if src.numpy else
                        part.clone(memory_format=torch.contiguous_format))
        if not src.numpy and src.device != "cpu":
            part = part.to(src.device)
        return part


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _block_index(sel: "_slice_index.Selection") -> tuple:
    """SEL as an index of the block read for it (its rows of dimension 0
    start at the block's row 0). A trailing Ellipsis keeps numpy from
    turning an all-int index into a scalar: the result is a 0-d array, as
    safetensors returns."""
    idx = []
    for d, (start, stop, step) in enumerate(sel.ranges):
        if d == 0:
            start, stop = 0, stop - start
        idx.append(start if d in sel.squeeze else slice(start, stop, step))
    return tuple(idx) + (Ellipsis,)
