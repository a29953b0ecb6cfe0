"""``safe_open``: the safetensors context manager, backed by weightlift.

    with weightlift.safe_open("model.safetensors", framework="pt",
                              device="cuda:0") as f:
        for k in f.keys():
            t = f.get_tensor(k)

Opening validates every header (no tensor data is read) and the load
options (framework=, device=, backend=, ...: a SafetensorError where
safetensors raises one). ``get_tensor`` loads one tensor through the C++
loader onto DEVICE, ``get_tensors`` all of them in one load; results are
zero-copy views that outlive the handle. On cpu (no ``backend=`` named)
``get_tensor`` / ``get_tensors`` are served on the calling thread straight
from the file the checkpoint holds open (``_native.HostReads``: no loader
job, microseconds a call): with ``framework="pt"`` as views of the handle's
private mapping of the file, as safetensors returns them (``zero_copy=False``
for copies), with ``framework="np"`` as copies, as safetensors
(``zero_copy=True`` for views). ``get_slice(name)[index]`` follows
safetensors' indexing rules (see weightlift._slice_index) and is loaded as a
slice request (_slices.py; on cpu copied out of the handle's mapping on
the calling thread instead): only the selected bytes are read (or a covering
range placed with strided copies where that moves fewer), with the loader's
staging, O_DIRECT and report, straight onto the device, as a tensor-parallel
rank that needs its shard of a weight wants. The result owns
exactly its own bytes. A slice keeps what it needs to read, so (as in
safetensors) it still works after its handle is closed.
"""

from __future__ import annotations

import collections
import time
from typing import Any, Dict, List, Optional, Tuple

from . import _core, _dtypes, _native, _slice_index, _slices
from ._errors import InvalidArgumentError, TensorNotFoundError
from ._options import device_string, normalize

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
    """What reading a tensor needs: the open checkpoint (and its tensor
    rows, listed once), the framework and the load options. Shared by a
    handle and its slices; a slice keeps it alive after the handle is
    closed."""

    def __init__(self, ckpt, framework: str, options: Dict[str, Any],
                 rows: List[tuple]):
        self.ckpt = ckpt
        self.numpy = framework == "np"
        self.options = options
        self.device = options["device"]
        self.rows = {r[0]: r for r in rows}
        self.host = _host_reads(ckpt, self.numpy, options)
        self._converters: Dict[str, Any] = {}  # name -> bytes -> tensor
        # name -> the framework's dtype of its slices (slice_dtype)
        self.slice_dtypes: Dict[str, Any] = {}
        # numpy or torch (the module, for frombuffer and empty), once a
        # slice asks for it
        self.framework = None

    def slice_dtype(self, name: str):
        """The torch / numpy dtype of tensor NAME's slices, remembered;
        raises the layout's error for a dtype the framework lacks."""
        _, dt, shape, *_ = self.rows[name]
        layout = _dtypes.numpy_layout if self.numpy else _dtypes.torch_layout
        dtype = self.slice_dtypes[name] = layout(dt, shape, name)[0]
        if self.framework is None:
            import importlib
            self.framework = importlib.import_module(
                "numpy" if self.numpy else "torch")
        return dtype

    def _convert(self, name, dt, shape, data, device):
        if self.numpy:
            return _dtypes.to_numpy(dt, shape, data, name)
        return _dtypes.to_torch(dt, shape, data, device, name)

    def _from_host(self, names: List[str]):
        """[tensor] of NAMES read by the per-call path, or None where it
        does not apply (then never again for this handle: the loader).
        REQUIRES: every name's dtype checked for the framework."""
        got = self.host.get(names, self.numpy)
        if got is None:
            self.host = None
            return None
        datas, report = got
        _core.set_last_report(report)
        out = []
        for name, data in zip(names, datas):
            convert = self._converters.get(name)
            if convert is None:
                _, dt, shape, *_ = self.rows[name]
                convert = self._converters[name] = _dtypes.converter(
                    dt, shape, self.numpy, name)
            out.append(convert(data))
        return out

    def load_one(self, name: str):
        """Tensor NAME: on the calling thread from the held file (cpu), else
        loaded through a pooled loader."""
        host = self.host
        if host is not None:  # the per-call path: kept short
            convert = self._converters.get(name)
            if convert is None:  # dtype checked, layout worked out, once
                _, dt, shape, *_ = self.rows[name]
                convert = self._converters[name] = _dtypes.converter(
                    dt, shape, self.numpy, name)
            got = host.get_one(name, self.numpy)
            if got is not None:
                _core._last.report = got[1]  # see set_last_report
                return convert(got[0])
            self.host = None  # not for this file: the loader from now on
        _, dt, shape, _, _, size = self.rows[name]
        _dtypes.check_framework_types([self.rows[name]], self.numpy)
        if size == 0:  # nothing to read
            return self._convert(name, dt, shape, None, self.device)
        with _core.pooled_loader(self.options) as loader:
            job = loader.start_load(self.ckpt, [name])
            _core.wait(job, False, size)
            ((_, dt, shape, data),) = job.take_tensors(self.numpy)
        return self._convert(name, dt, shape, data, self.device)

    def load_all(self):
        """[(name, tensor)] of every tensor in file order, in one load."""
        _dtypes.check_framework_types(self.rows.values(), self.numpy)
        if self.host is not None:
            names = list(self.rows)  # file order
            got = self._from_host(names)
            if got is not None:
                return list(zip(names, got))
        items, dev, _ = _core.load_raw(self.ckpt, None, numpy=self.numpy,
                                       **self.options)
        return [(n, self._convert(n, dt, shape, data, dev))
                for n, dt, shape, data in items]


def _host_reads(ckpt, numpy: bool, options: Dict[str, Any]):
    """The per-call path of a cpu handle (see the module docstring), or
    None: a cuda device, or a backend named (the loader serves it as
    asked). Views by default for torch and copies for numpy, as
    safetensors; zero_copy= chooses."""
    if options["device"] != "cpu" or options.get("backend") not in (
            None, "auto"):
        return None
    view = options.get("zero_copy")
    if view is None:
        view = not numpy
    return _native.HostReads(ckpt, normalize(dict(options, zero_copy=view)),
                             view)


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
        # Every option first (an invalid backend or device raises here,
        # before the file is looked at, as in safetensors). The loader made
        # here is the handle's: its first get_tensor does not wait for it.
        _core.check_options(options, take_setup=True)
        ckpt = _core.open_checkpoint(filename)
        rows = ckpt.tensors()
        self._source: Optional[_Source] = _Source(ckpt, fw, options, rows)
        files = ckpt.files()
        self._paths = [f["path"] for f in files]
        # safetensors: None when the key is absent, {} when it is empty.
        self._meta = (files[0]["metadata"]
                      if files and files[0]["has_metadata"] else None)
        # name -> its row, in file order; TensorInfo made when asked for.
        self._info: Dict[str, tuple] = self._source.rows

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
        row = self._info.get(name)
        if row is None:
            raise TensorNotFoundError(f"File does not contain tensor {name}",
                                      code="NotFound")
        _, dt, shape, file, offset, size = row
        return TensorInfo(name, dt, list(shape), self._paths[file], offset,
                          size)

    # -- data --------------------------------------------------------------
    def get_tensor(self, name: str):
        src = self._source
        if src is None:
            self._open_source()  # raises "File is closed"
        # The per-call path inline (a tensor asked for before: its layout
        # is known); everything else through load_one.
        convert = src._converters.get(name)
        if convert is not None and src.host is not None:
            got = src.host.get_one(name, src.numpy)
            if got is not None:
                _core._last.report = got[1]  # see set_last_report
                return convert(got[0])
        if name not in self._info:
            raise TensorNotFoundError(f"File does not contain tensor {name}",
                                      code="NotFound")
        return src.load_one(name)

    def get_tensors(self) -> Dict[str, Any]:
        """Every tensor, in one load, keyed in file order (as safetensors'
        offset_keys())."""
        return dict(self._open_source().load_all())

    def get_slice(self, name: str) -> "SafeSlice":
        src = self._source
        if src is None:
            self._open_source()  # raises "File is closed"
        row = self._info.get(name)
        if row is None:
            raise TensorNotFoundError(f"File does not contain tensor {name}",
                                      code="NotFound")
        return SafeSlice(src, row, self._paths)

    def _open_source(self) -> _Source:
        if self._source is None:
            raise InvalidArgumentError("File is closed",
                                       code="InvalidArgument")
        return self._source

    def __repr__(self) -> str:
        state = ("closed" if self._source is None
                 else f"{len(self._info)} tensors")
        return f"<weightlift.safe_open {self._paths[:1]} {state}>"


class SafeSlice:
    """``get_slice(name)``: shape and dtype without loading; ``[index]``
    reads just the part the index selects (see the module docstring)."""

    # A slice is made per get_slice call: slots keep that cheap.
    __slots__ = ("_source", "_row", "_paths", "_full", "_layout")

    def __init__(self, source: _Source, row: tuple, paths: List[str]):
        self._source = source
        self._row = row  # the checkpoint's (name, dtype, shape, file, ...)
        self._paths = paths
        self._full = None  # the whole tensor, for indices torch resolves
        self._layout = None  # (dtype, shape) in the framework, once known

    @property
    def _info(self) -> TensorInfo:
        name, dt, shape, file, offset, size = self._row
        return TensorInfo(name, dt, list(shape), self._paths[file], offset,
                          size)

    def get_shape(self) -> List[int]:
        return list(self._row[2])

    def get_dtype(self) -> str:
        """The safetensors dtype string, e.g. "BF16"."""
        return self._row[1]

    def __len__(self) -> int:
        if not self._row[2]:
            raise TypeError("len() of a 0-d tensor")
        return self._row[2][0]

    def __getitem__(self, index):
        src = self._source
        host = src.host
        if host is not None:  # cpu: the per-call path, kept short
            name = self._row[0]
            dtype = src.slice_dtypes.get(name)
            if dtype is None:  # raises for a dtype the framework lacks
                dtype = src.slice_dtype(name)
            got = host.slice(name, index, src.numpy)
            if got is not None:
                data, shape, report = got
                _core._last.report = report  # see set_last_report
                if data is None:  # nothing selected
                    return src.framework.empty(shape, dtype=dtype)
                part = src.framework.frombuffer(data, dtype=dtype)
                return part if len(shape) == 1 else part.reshape(shape)
        info = self._info
        fw = "np" if src.numpy else "pt"
        sel = _slice_index.select(index, info.shape, fw)
        if sel is not None and _dtypes.BITS[info.dtype] % 8 == 0:
            return self._read(sel)
        # A torch index beyond basic indexing (None, lists, tensors, ...),
        # or a sub-byte dtype (rows need not be whole bytes): index the
        # whole tensor with torch, loaded once.
        if self._full is None:
            self._full = src.load_one(info.name)
        part = self._full[index]
        return part.clone() if hasattr(part, "clone") else part.copy()

    def _read(self, sel: "_slice_index.Selection"):
        """The selected part: on cpu copied out of the handle's mapping on
        the calling thread (_from_mapping), else read by the loader as a
        slice request (only the selected bytes, or a covering range placed
        with strided copies where that moves fewer; staging, O_DIRECT and
        the report as for any load) straight onto the handle's device (see
        _slices.py)."""
        src, info = self._source, self._info
        layout = self._layout
        if layout is None:  # raises for a dtype the framework lacks
            layout = self._layout = (
                _dtypes.numpy_layout if src.numpy else _dtypes.torch_layout)(
                    info.dtype, info.shape, info.name)
        if src.host is not None:
            part = self._from_mapping(sel, *layout)
            if part is not None:
                return part
        elif not src.numpy and src.device != "cpu":
            part = self._to_device(sel, *layout)
            if part is not None:
                return part
        with _core.pooled_loader(src.options) as loader:
            (part,) = _slices.load_slices(
                loader, src.ckpt, [(info.name, sel.ranges, sel.squeeze)],
                "np" if src.numpy else "pt", src.device)
        return part

    def _to_device(self, sel: "_slice_index.Selection", dtype, shape):
        """get_slice's path to a CUDA device: the selection read by the
        loader (as _slices.load_slices reads it) on the calling thread
        (_native.load_slices_into: no job thread, the report built only if
        asked for) into a tensor from torch's caching allocator (no
        cudaMalloc / cudaFree per call); None for an empty selection (the
        loader's own path makes those)."""
        import torch

        src, info = self._source, self._info
        out = torch.empty([_slice_index.count(*r) for r in sel.ranges],
                          dtype=dtype, device=src.device)
        nbytes = out.numel() * out.element_size()
        if nbytes == 0:
            return None
        # The caching allocator may hand out memory that work still queued
        # on the current stream reads (freed by the caller, reused in that
        # stream's order); the loader copies on streams of its own, so that
        # work must be done first. .to(device) from pageable memory (what
        # safetensors' get_slice is followed by) waits for it too.
        torch.cuda.current_stream(out.device).synchronize()
        with _core.pooled_loader(src.options) as loader:
            report = _native.load_slices_into(
                loader, src.ckpt,
                [(info.name, sel.ranges, out.data_ptr(), nbytes)])
        _core.set_last_report(report)
        if sel.squeeze:
            out = out.reshape(_slice_index.result_shape(sel))
        return out

    def _from_mapping(self, sel: "_slice_index.Selection", dtype, shape):
        """get_slice's per-call path on cpu: the elements SEL selects,
        copied on the calling thread out of the handle's mapping of the
        file (only their pages are touched) into memory of their own, as
        the loader's slice would give them; None where the per-call path
        does not serve this tensor (then the loader reads it)."""
        src, info = self._source, self._info
        got = src.host.peek(info.name, src.numpy)
        if got is None:
            return None
        data, report = got
        t0 = time.perf_counter()
        index = tuple(slice(a, b, c) for a, b, c in sel.ranges)
        drop = set(sel.squeeze)
        out_shape = [_slice_index.count(*r) for d, r in enumerate(sel.ranges)
                     if d not in drop]
        if src.numpy:
            import numpy as np
            full = np.frombuffer(data, dtype=dtype).reshape(shape)
            # np.array: a 0-d selection stays an array (not a scalar).
            part = np.array(full[index], order="C").reshape(out_shape)
        else:
            import torch
            full = torch.utils.dlpack.from_dlpack(data)
            if dtype != torch.uint8:
                full = full.view(dtype)
            part = full.reshape(shape)[index].clone(
                memory_format=torch.contiguous_format).reshape(out_shape)
        del full  # the mapping's view: never returned, never written
        report.sliced(part.nbytes if src.numpy else
                      part.numel() * part.element_size(),
                      time.perf_counter() - t0)
        _core._last.report = report
        return part
