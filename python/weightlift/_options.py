"""Load options as keyword arguments.

Every option defaults to the C++ LoadOptions default (see
``weightlift.default_options()``); ``None`` also means "the default".

=================  =========================================================
device             "cpu" (default), "cuda", "cuda:N", an int N, or a
                   torch.device
backend            "auto" | "pread" | "direct" | "uring" | "mmap"
gds                "auto" | "on" | "off" (True/False also accepted)
host_register      "auto" | "on" | "off" (True/False): zero-copy from the
                   page cache for CUDA loads
threads            I/O threads; 0 = min(hardware threads, 8)
chunk              bytes per read request (int, or "8MiB", "16M", ...)
staging            bytes of bounce / pinned staging in total
queue_depth        io_uring reads in flight per thread
direct_min_bytes   tensors smaller than this go through the bounce buffer
copy_streams       CUDA streams; 0 = one per thread
resident_threshold auto: fraction of sampled pages resident to call a file
                   warm
zero_copy          cpu only, default False: tensors are views of a private
                   (copy-on-write) mapping of each file, as plain safetensors
                   gives on cpu; nothing is copied at load time, but the
                   tensors depend on the file (truncating it while they live
                   raises SIGBUS)
=================  =========================================================
"""

from __future__ import annotations

import re
from typing import Any, Dict

OPTION_NAMES = (
    "device", "backend", "gds", "host_register", "threads", "chunk",
    "staging", "queue_depth", "direct_min_bytes", "copy_streams",
    "resident_threshold", "zero_copy",
)

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(i?[bB])?\s*$")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(value: Any, name: str) -> int:
    """An int, or a string like "8MiB" / "8M" / "1.5G" (powers of 1024)."""
    if isinstance(value, bool):
        raise TypeError(f"{name}: expected a size, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        m = _SIZE_RE.match(value)
        if m:
            return int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    raise ValueError(f"{name}: expected bytes as an int or e.g. '8MiB', "
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


def normalize(options: Dict[str, Any]) -> Dict[str, Any]:
    """Checks names and converts values to what the native Loader takes.

    Raises TypeError for an unknown keyword, like a Python function would.
    Ranges are checked by the C++ LoadOptions::Validate (InvalidArgument).
    """
    out: Dict[str, Any] = {}
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
            out[key] = str(value).lower()
        elif key in ("chunk", "staging", "direct_min_bytes"):
            out[key] = parse_size(value, key)
        elif key == "resident_threshold":
            out[key] = float(value)
        elif key == "zero_copy":
            if not isinstance(value, bool):
                raise TypeError(f"zero_copy: expected a bool, got {value!r}")
            out[key] = value
        else:
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{key}: expected an int, got {value!r}")
            out[key] = value
    out.setdefault("device", "cpu")
    return out
