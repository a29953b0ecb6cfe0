"""The plugin's options: ``--model-loader-extra-config`` JSON, checked.

vLLM hands the JSON object over as ``LoadConfig.model_loader_extra_config``
(a dict). This module knows nothing of vLLM, so it is tested without it.

==============  ==============================================================
backend         weightlift's I/O backend: auto | pread | direct | uring | mmap
threads         I/O threads (0: weightlift's default)
staging         bytes of weightlift's pinned (or bounce) staging, e.g. "256MiB"
gds             auto | on | off (GPUDirect Storage)
host_register   auto | on | off (zero-copy from the page cache to the GPU)
chunk           bytes per read request
queue_depth     io_uring reads in flight per thread
copy_streams    CUDA streams (0: one per thread)
window          the most tensor memory the stream holds on the device beyond
                the model's parameters (default 512MiB); see stream_tensors
progress        true: a progress bar (on the first rank only)
tp_mode         how tensor-parallel ranks get their weights: "group" (the
                ranks of vLLM's TP group split the reading and deliver the
                rest to each other; vLLM's weight loaders narrow as usual),
                or "full" (every rank reads every tensor, as vLLM's default
                loader does)
tp_slices       true (default): under TP, a tensor that maps one-to-one to a
                plain column- or row-parallel parameter is read as this
                rank's slice only; false: whole, narrowed by vLLM
==============  ==============================================================
"""

from __future__ import annotations

import json
from typing import Any, Dict, Tuple

from .._options import parse_size
# The plugin streams with stream_tensors: its window, its bounds.
from .._stream import DEFAULT_WINDOW, MIN_WINDOW

# Keys passed straight to weightlift's loading calls.
LOAD_OPTION_KEYS = ("backend", "threads", "staging", "gds", "host_register",
                    "chunk", "queue_depth", "copy_streams")
PLUGIN_KEYS = ("window", "progress", "tp_mode", "tp_slices")
ALL_KEYS = LOAD_OPTION_KEYS + PLUGIN_KEYS
TP_MODES = ("group", "full")


class PluginOptions:
    """Parsed extra config: ``load`` (kwargs for weightlift), ``window``
    (bytes), ``progress`` (bool), ``tp_mode``."""

    def __init__(self, load: Dict[str, Any], window: int, progress: bool,
                 tp_mode: str, tp_slices: bool = True):
        self.load = load
        self.window = window
        self.progress = progress
        self.tp_mode = tp_mode
        self.tp_slices = tp_slices

    def __repr__(self) -> str:
        return (f"PluginOptions(load={self.load!r}, window={self.window}, "
                f"progress={self.progress}, tp_mode={self.tp_mode!r}, "
                f"tp_slices={self.tp_slices})")


def parse(extra: Any) -> PluginOptions:
    """EXTRA: None, a dict, or its JSON text. Unknown keys and bad values
    are a ValueError that names the key and the accepted ones, before any
    file is opened."""
    if extra is None or extra == "":
        extra = {}
    if isinstance(extra, str):
        try:
            extra = json.loads(extra)
        except json.JSONDecodeError as e:
            raise ValueError(f"weightlift: --model-loader-extra-config is "
                             f"not JSON: {e}") from e
    if not isinstance(extra, dict):
        raise ValueError(f"weightlift: --model-loader-extra-config must be "
                         f"a JSON object, got {type(extra).__name__}")
    unknown = sorted(set(extra) - set(ALL_KEYS))
    if unknown:
        raise ValueError(f"weightlift: unknown --model-loader-extra-config "
                         f"key(s) {unknown}; accepted: {', '.join(ALL_KEYS)}")
    load = {k: extra[k] for k in LOAD_OPTION_KEYS
            if extra.get(k) is not None}
    # Check values now (names and types), not in the middle of a load.
    from .. import _native
    from .._options import normalize
    try:
        # Names and types in Python, then values (ranges, backend words)
        # as the Loader would check them: all before vLLM builds the model.
        _native.check_options(normalize(dict(load, device="cpu")))
    except (TypeError, ValueError) as e:
        raise ValueError(f"weightlift: --model-loader-extra-config: {e}") \
            from e
    window = extra.get("window")
    try:
        window = DEFAULT_WINDOW if window is None else parse_size(window,
                                                                  "window")
    except (TypeError, ValueError) as e:
        raise ValueError(f"weightlift: --model-loader-extra-config: {e}") \
            from e
    if window < MIN_WINDOW:
        raise ValueError(f"weightlift: window must be at least {MIN_WINDOW} "
                         f"bytes, got {window}")
    progress = extra.get("progress", False)
    if not isinstance(progress, bool):
        raise ValueError(f"weightlift: progress must be true or false, got "
                         f"{progress!r}")
    tp_mode = extra.get("tp_mode", "group")
    if tp_mode not in TP_MODES:
        raise ValueError(f"weightlift: tp_mode must be one of {TP_MODES}, "
                         f"got {tp_mode!r}")
    tp_slices = extra.get("tp_slices", True)
    if not isinstance(tp_slices, bool):
        raise ValueError(f"weightlift: tp_slices must be true or false, got "
                         f"{tp_slices!r}")
    return PluginOptions(load, window, progress, tp_mode, tp_slices)


def split_for_log(opts: PluginOptions) -> Tuple[str, ...]:
    """The options as short 'key=value' strings for the load report."""
    items = dict(opts.load, window=opts.window, tp_mode=opts.tp_mode,
                 tp_slices=opts.tp_slices)
    return tuple(f"{k}={v}" for k, v in sorted(items.items()))
