"""weightlift: fast, strict safetensors loading into GPU or host memory.

Drop-in for safetensors (same names, same results):

    from weightlift import safe_open
    from weightlift.torch import load_file      # safetensors.torch
    from weightlift.numpy import load_file      # safetensors.numpy

Beyond it:

    load_checkpoint(path, device=..., **options) -> dict (with .report)
    iter_tensors(path, device=..., **options)    -> (name, tensor) as each lands
    stream_tensors(path, device=..., window=...) -> (name, tensor) in file
                                                    order, bounded memory
    load_into(module_or_state_dict, path, strict=True) -> LoadReport
    prepare(device, **options)  the loader made ahead of the first load
    weightlift.transformers.from_pretrained(model_dir, device="cuda:0")

Options are keyword arguments (see ``default_options()``); errors are
WeightliftError subclasses (see weightlift._errors). Returned tensors are
zero-copy views of the loader's memory and free it when the last one dies;
on a CUDA device that memory is one block of torch's caching allocator
(weightlift._load_torch), as safetensors' tensors are.
"""

from __future__ import annotations

import time
from typing import Any, Dict

from . import _core
# load_checkpoint's and load_file's path to a CUDA device (and _dtypes with
# it): small, torch-free modules, imported here rather than inside a user's
# first call.
from . import _load_torch  # noqa: F401
from ._errors import (CancelledError, CudaError, FormatError,
                      InternalError, InvalidArgumentError, NotFoundError,
                      ResourceExhaustedError, SafetensorError,
                      TensorNotFoundError, UnsupportedDtypeError,
                      UnsupportedDtypeKeyError, UnsupportedError, WeightliftError, WeightliftIOError)
from .report import FileReport, LoadReport

# Imported on first use (PEP 562), so that `import weightlift`, and
# weightlift.transformers on the way to a first token, pay only for the
# modules they use (bench/e2e_ttft.py; python -X importtime).
_LAZY = {
    "TensorIterator": "_iter", "iter_tensors": "_iter",
    "load_into": "_load_into",
    "SafeSlice": "_safe_open", "TensorInfo": "_safe_open",
    "safe_open": "_safe_open",
    "TensorStream": "_stream", "stream_tensors": "_stream",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'weightlift' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module("." + module, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))

__version__ = "0.1.0"

# The keywords that make a load tensor-parallel (weightlift._tp.TP_KEYWORDS;
# a test checks the two agree).
_TP_KEYWORDS = ("tp_rank", "tp_size", "tp_plan", "process_group",
                "group_timeout")

last_report = _core.last_report
# Loaders are cached per options (staging allocated once); this frees them.
release_cached_loaders = _core.release_cached_loaders


def prepare(device: Any, checkpoint: Any = None, **options) -> float:
    """Makes, now, the loader that later loads with these options use: its
    threads, its CUDA streams and its staging ring, which its workers go on
    pinning in the background for a few milliseconds. A server calls it
    before it builds its model (the vLLM plugin does), so that its first
    load starts as a later one does instead of paying for the loader's
    creation, and its first copies do not wait for the ring's registrations
    (which hold up every CUDA copy of the process while they run).

    Give the device with its index (``"cuda:3"``, ``torch.device``): a
    bare ``"cuda"`` is the device current when ``prepare`` runs, which in a
    rank that calls ``torch.cuda.set_device`` later is not its own.

    Takes the keywords of ``load_checkpoint``; those that do not change the
    loader (``tp_*``, ``process_group``, ``progress``) are not used for it,
    but a tensor-parallel keyword imports the tensor-parallel code now (and
    ``process_group`` group mode's), which the first such load would
    otherwise import on its clock (~0.5 ms on the development VM). Raises
    what that load would raise for a bad ``framework``, an unknown or bad
    option or an unusable device. The loader is cached with the others,
    and taken by ``load_checkpoint``, ``weightlift.torch.load_file``,
    ``load_into``, ``iter_tensors``, ``stream_tensors`` and ``safe_open``
    with the same options (a second call costs nothing;
    ``release_cached_loaders()`` frees it).

    With ``checkpoint`` (a local path, as the load will be given it), the
    checkpoint is opened now too, its headers read and checked (raising
    what the load would raise for a missing or malformed one), and kept for
    the next load of that path, which takes it while none of its files has
    changed; one is kept at a time, holding its files open until another
    ``prepare(checkpoint=)`` or ``release_cached_loaders()``. With
    ``checkpoint`` and a rank's ``tp_rank``, ``tp_size`` and ``tp_plan``
    (no ``process_group``), the rank's request is made now too, for that
    load to take, and a thread starts filling the page tables of the rank's
    row runs (the short runs of its row-parallel parts, which the load
    copies out of a mapping of each resident file) while the caller goes
    on: that load then copies them without a page fault each. They stay
    mapped until that load ends (or the next ``prepare(checkpoint=)``).
    On a CUDA device, a thread also registers with CUDA the pages of the
    rank's parts in each resident file (read-only, about 21 ms per GB on
    an H200, while every CUDA copy of the process waits), and that load
    copies each registered part straight from the page cache, with no
    reads and no staging copy, while it stages the rest in the same run;
    the pages are unregistered in the background after it. A part whose
    pages would be more than 1.5 times its bytes (a row-parallel part, whose
    pages are its tensor's whole rows) is left to staging, and the load's
    report says how much was; ``host_register="on"`` registers every part,
    ``"off"`` none. On a CUDA device prepare also takes the rank's device
    memory now (one block from torch's caching allocator, which the load's
    tensors are views of, as always): a fresh process's first block is a
    cudaMalloc of up to a few GB, no longer on the load's clock. Torch
    counts it as allocated from here. The load it was made for takes it;
    a load of another rank or device leaves it, as it leaves the pages;
    ``iter_tensors`` and ``stream_tensors`` of that rank (which load into
    memory of their own), the next ``prepare(checkpoint=)`` and
    ``release_cached_loaders()`` let it go.

    Returns the setup this call takes off the loader's first load: the
    seconds of its creation, or 0.0 when a load already paid for it or an
    earlier call took it. That first load's report then counts no setup,
    since the load did not wait for it."""
    from ._options import device_string
    dev = device_string(device)
    _numpy_framework(options.pop("framework", "pt"), dev)
    opts = {k: v for k, v in options.items()
            if k not in _TP_KEYWORDS and k != "progress"}
    setup = _core.check_options(dict(opts, device=dev), take_setup=True)
    if checkpoint is not None:
        _core.prepare_checkpoint(checkpoint)
    if any(options.get(k) is not None for k in _TP_KEYWORDS):
        from . import _tp  # imported ahead of the first load
        if options.get("process_group") is not None:
            from . import _group  # noqa: F401
        elif checkpoint is not None:
            _tp.prepare_rank(checkpoint, {k: options[k] for k in _TP_KEYWORDS
                                          if k in options}, opts, dev)
    return setup


def _numpy_framework(framework: str, dev: str) -> bool:
    """Whether FRAMEWORK (load_checkpoint's and prepare's keyword) means
    numpy arrays; raises for an unknown one, or numpy on a device."""
    np = framework in ("np", "numpy")
    if not np and framework not in ("pt", "torch"):
        raise ValueError(f"framework must be 'pt' or 'np', got {framework!r}")
    if np and dev != "cpu":
        raise ValueError("framework 'np' loads into host memory only")
    return np


def default_options() -> Dict[str, Any]:
    """The C++ LoadOptions defaults, by keyword name."""
    from . import _native
    return dict(_native.default_options())


class StateDict(dict):
    """A plain dict of name -> tensor, plus ``.report`` (the LoadReport)."""

    report: LoadReport


def load_checkpoint(path: Any, device: Any = "cpu", *, framework: str = "pt",
                    progress: bool = False, **options) -> StateDict:
    """Loads a whole checkpoint: one .safetensors file, a
    model.safetensors.index.json, or a directory of shards. Returns every
    tensor (file order) in a dict with ``.report`` attached."""
    t0 = time.perf_counter()
    from . import _dtypes
    from ._options import device_string

    dev = device_string(device)
    np = _numpy_framework(framework, dev)
    # _tp only when a TP keyword is there: a plain first call does not pay
    # for importing it (~7 ms on the 2-core box, inside the clock).
    tp = None
    if any(k in options for k in _TP_KEYWORDS):
        from . import _tp
        tp = _tp.take_tp(options, path)  # tp_rank/tp_size/tp_plan/...
    if tp is not None:
        items, report = _tp.load(path, dev, tp, options, progress, np)
        out = StateDict(items)
        out.report = report
        return out
    from . import _load_torch
    if _load_torch.applies(dev, np):
        # The checkpoint opens, and its device memory is taken, while the
        # loader is made (first call) and its workers start pinning their
        # staging.
        ckpt, open_s, prepared = _load_torch.open_beside_loader(
            path, dict(options, device=dev), _load_torch.whole_block(dev))
        items, report = _load_torch.load(ckpt, dev, options, progress,
                                         t_start=t0, open_s=open_s,
                                         prepared=prepared)
        out = StateDict(items)
        out.report = report
        return out
    items, dev, report = _core.load_raw(
        path, progress=progress, numpy=np, device=dev, **options)
    out = StateDict()
    for name, dt, shape, data in items:
        out[name] = (_dtypes.to_numpy(dt, shape, data) if np
                     else _dtypes.to_torch(dt, shape, data, dev))
    out.report = report
    return out


__all__ = [
    "release_cached_loaders",
    "CancelledError", "CudaError", "FileReport", "FormatError",
    "InternalError", "InvalidArgumentError", "LoadReport", "NotFoundError",
    "ResourceExhaustedError", "SafeSlice", "SafetensorError", "StateDict",
    "TensorInfo",
    "TensorIterator", "TensorNotFoundError", "TensorStream",
    "UnsupportedDtypeError", "UnsupportedDtypeKeyError", "UnsupportedError",
    "WeightliftError", "WeightliftIOError", "default_options",
    "iter_tensors", "last_report", "load_checkpoint", "load_into",
    "prepare", "safe_open", "stream_tensors",
]
