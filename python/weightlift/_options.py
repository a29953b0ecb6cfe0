"""Load options as keyword arguments.

Every option defaults to the C++ LoadOptions default (see
``weightlift.default_options()``); ``None`` also means "the default". The
names, their values and the size syntax are the C++ ``SetLoadOption``'s
(include/weightlift/options.h), the same as the ``weightlift`` command's
flags: this module only turns Python values into that text.

===================  =======================================================
device               "cpu" (default), "cuda", "cuda:N", an int N, or a
                     torch.device
backend              "auto" | "pread" | "direct" | "uring" | "mmap"
gds                  "auto" | "on" | "off" (True/False also accepted)
host_register        "auto" | "on" | "off" (True/False): zero-copy from the
                     page cache for CUDA loads
threads              I/O threads; 0 = automatic (by the kind of reads)
chunk                bytes per read request, and for CUDA loads per staging
                     slot (int, or "8MiB", "16M", ...: see sizes below)
cuda_chunk           the CUDA staging slot alone; 0 = the tuned default
staging              bytes of bounce / pinned staging in total
queue_depth          io_uring reads in flight per thread
direct_min_bytes     tensors smaller than this go through the bounce buffer
copy_streams         CUDA streams; 0 = one per thread, or one when
                     local_world_size > 1
resident_threshold   auto: fraction of sampled pages resident to call a
                     file warm
zero_copy            cpu only, default False: tensors are views of a private
                     (copy-on-write) mapping of each file, as plain
                     safetensors gives on cpu; nothing is copied at load
                     time, but the tensors depend on the file (truncating it
                     while they live raises SIGBUS)
host_register_piece  bytes per cudaHostRegister piece; 0 = default
host_buffer_cache    bytes of freed host destinations kept for reuse
uring_register_min   loads and files from this size register their ring
local_world_size     processes loading at once on this host (tensor-parallel
                     ranks sharing it): the automatic thread count divides
                     the cores among them, a CUDA staging ring is this
                     process's share of staging and it copies on one
                     stream (copy_streams=0); default: the
                     LOCAL_WORLD_SIZE environment variable (torchrun sets
                     it), else 1
===================  =======================================================

Sizes: an int is bytes; a string is bytes or a number with a unit. K, M, G,
T and KiB, MiB, GiB, TiB are powers of 1024 ("8M" == "8MiB" == 8388608);
KB, MB, GB, TB are powers of 1000 ("8MB" == 8000000). ``parse_size`` is the
C++ parser itself.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Dict

from . import _errors, _native

OPTION_NAMES = tuple(_native.option_names())
_SIZE_OPTIONS = ("chunk", "cuda_chunk", "staging", "direct_min_bytes",
                 "host_register_piece", "host_buffer_cache",
                 "uring_register_min")
_INT_OPTIONS = ("threads", "queue_depth", "copy_streams", "local_world_size")


def parse_size(value: Any, name: str = "size") -> int:
    """Bytes in VALUE: an int, or text by the C++ ParseByteSize rules."""
    if isinstance(value, bool):
        raise TypeError(f"{name}: expected a size, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return _native.parse_size(value)
        except _errors.InvalidArgumentError as e:
            # Name the argument, as the C++ names the knob.
            raise _errors.InvalidArgumentError(f"{name}: {e.message}",
                                               code=e.code) from None
    raise TypeError(f"{name}: expected bytes as an int or e.g. '8MiB', "
                    f"got {value!r}")


def device_string(device: Any) -> str:
    """Canonical "cpu" / "cuda:N" for anything torch-like callers pass."""
    if device is None:
        return "cpu"
    if isinstance(device, bool):
        raise TypeError(f"device: expected a device, got {device!r}")
    if isinstance(device, int):
        return f"cuda:{device}"
    text = str(device)  # torch.device prints as "cuda:0" / "cpu"
    if text == "cuda":
        index = 0
        try:
            import torch
            if torch.cuda.is_available():
                index = torch.cuda.current_device()
        except ImportError:
            pass
        return f"cuda:{index}"
    return text


def _mode(value: Any, name: str) -> str:
    if value is True:
        return "on"
    if value is False:
        return "off"
    if isinstance(value, str):
        return value.lower()
    raise TypeError(f"{name}: expected 'auto', 'on', 'off' or a bool, "
                    f"got {value!r}")


def normalize(options: Dict[str, Any]) -> Dict[str, str]:
    """Checks names and Python types; returns each knob as SetLoadOption's
    text (what the native Loader takes).

    Raises TypeError for an unknown keyword or a value of the wrong type,
    like a Python function would; InvalidArgumentError (a ValueError) for a
    size that does not parse. Other values are parsed and every range is
    checked in C++ when the Loader is made (SetLoadOption, Validate).
    """
    out: Dict[str, str] = {}
    for key, value in options.items():
        if key not in OPTION_NAMES:
            raise TypeError(f"unexpected keyword argument {key!r} (load "
                            f"options are: {', '.join(OPTION_NAMES)})")
        if value is None:
            continue
        if key == "device":
            out[key] = device_string(value)
        elif key in ("gds", "host_register"):
            out[key] = _mode(value, key)
        elif key == "backend":
            if not isinstance(value, str):
                raise TypeError(f"backend: expected a name, got {value!r}")
            out[key] = value.lower()
        elif key in _SIZE_OPTIONS:
            if isinstance(value, bool) or not isinstance(value, (int, str)):
                raise TypeError(f"{key}: expected bytes as an int or e.g. "
                                f"'8MiB', got {value!r}")
            # Parsed now (by the C++ parser) so a bad size fails where it
            # is given, naming the keyword.
            out[key] = str(parse_size(value, key))
        elif key == "resident_threshold":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{key}: expected a number, got {value!r}")
            out[key] = repr(float(value))
        elif key == "zero_copy":
            if not isinstance(value, bool):
                raise TypeError(f"zero_copy: expected a bool, got {value!r}")
            out[key] = "true" if value else "false"
        else:  # _INT_OPTIONS
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{key}: expected an int, got {value!r}")
            out[key] = str(value)
    out.setdefault("device", "cpu")
    if "local_world_size" not in out:
        # torchrun's count of processes on this host: ranks that load at
        # once share its cores (the C++ LoadOptions::local_world_size).
        # A value the option would refuse (not 1 to 1024 in ASCII digits) is
        # left out with a warning: the caller never named the option, so
        # its load must not fail on it.
        env = os.environ.get("LOCAL_WORLD_SIZE", "").strip()
        if env.isascii() and env.isdigit() and 1 <= int(env) <= 1024:
            out["local_world_size"] = str(int(env))
        elif env:
            warnings.warn(f"weightlift: LOCAL_WORLD_SIZE={env!r} ignored (not "
                          "a process count from 1 to 1024)", RuntimeWarning,
                          stacklevel=3)
    return out
