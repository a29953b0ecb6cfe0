"""``get_slice(name)[index]``: the index, normalized by safetensors' rules.

``select(index, shape, framework)`` turns a Python index into a Selection:
one ``(start, stop, step)`` per dimension of the stored tensor (``step`` > 0,
``range(start, stop, step)`` the elements taken) plus the dimensions an int
index drops. The data path reads exactly that; this module reads nothing.

The rules are safetensors 0.8's, which differ by framework:

* ``"pt"``: safetensors indexes the whole tensor with torch, so the rules are
  torch's. Basic indices (ints, slices with a positive step, one ``...``)
  become a Selection; anything else (``None``, bools, lists, tensors, numpy
  ints, a second ``...``, out-of-range ints, too many indices) gives None,
  and the caller indexes the loaded tensor with torch, which raises torch's
  own errors where torch raises.
* ``"np"``: safetensors slices in Rust. Ints (anything with ``__index__``
  that fits in 32 bits, bools included), slices and one ``...``; an empty
  list is ``[0:0]``. Slice bounds are unsigned (a negative bound raises
  OverflowError), a negative int counts from the end, and an out-of-range
  int or bound raises SafetensorError instead of clamping. Never None.

One deliberate difference: a ``np`` slice whose stop is before its start
(``[1:0]``) is a SafetensorError here; safetensors 0.8 fails there with a
SystemError or ValueError from an unsigned underflow.
"""

from __future__ import annotations

import collections
import math
import operator
from typing import Any, List, Optional, Sequence, Tuple

from ._errors import InvalidArgumentError

Selection = collections.namedtuple("Selection", "ranges squeeze")
Selection.__doc__ = (
    "RANGES: one (start, stop, step) per stored dimension, step > 0 and "
    "start <= stop; SQUEEZE: the dimensions (ascending) an int index drops.")

_I32 = (-(1 << 31), (1 << 31) - 1)


def count(start: int, stop: int, step: int) -> int:
    """Elements in range(start, stop, step) for step > 0."""
    return max(0, -(-(stop - start) // step))


def result_shape(sel: Selection) -> List[int]:
    """The shape of the selected part (squeezed dimensions dropped)."""
    return [count(*r) for d, r in enumerate(sel.ranges)
            if d not in sel.squeeze]


def select(index: Any, shape: Sequence[int],
           framework: str) -> Optional[Selection]:
    """The Selection INDEX makes of a tensor of SHAPE under FRAMEWORK's
    rules ("pt" or "np"); None where "pt" leaves it to torch."""
    if framework == "np":
        return _select_np(index, list(shape))
    return _select_pt(index, list(shape))


# -- torch rules (basic indexing only) ----------------------------------------

def _select_pt(index: Any, shape: List[int]) -> Optional[Selection]:
    parts = index if type(index) is tuple else (index,)
    if sum(1 for p in parts if p is Ellipsis) > 1:
        return None
    fixed = [p for p in parts if p is not Ellipsis]
    if len(fixed) > len(shape):
        return None
    full = slice(None)
    expanded: List[Any] = []
    for p in parts:
        if p is Ellipsis:
            expanded += [full] * (len(shape) - len(fixed))
        else:
            expanded.append(p)
    expanded += [full] * (len(shape) - len(expanded))
    ranges, squeeze = [], []
    for d, (p, n) in enumerate(zip(expanded, shape)):
        if type(p) is int:  # exactly int: bool and numpy ints are torch's
            i = p + n if p < 0 else p
            if not 0 <= i < n:
                return None  # torch raises IndexError
            ranges.append((i, i + 1, 1))
            squeeze.append(d)
        elif type(p) is slice and all(
                v is None or type(v) is int
                for v in (p.start, p.stop, p.step)):
            if p.step is not None and p.step <= 0:
                return None  # torch raises ValueError
            start, stop, step = p.indices(n)  # clamps as torch does
            ranges.append((start, max(start, stop), step))
        else:
            return None
    return Selection(ranges, tuple(squeeze))


# -- safetensors' own rules (framework "np") ----------------------------------

def _error(message: str) -> InvalidArgumentError:
    # InvalidArgumentError is a SafetensorError, the class safetensors
    # raises for every index it refuses.
    return InvalidArgumentError(message, code="InvalidArgument")


def _unsupported(position: int) -> InvalidArgumentError:
    return _error(f"Unsupported slice index at position {position}: "
                  f"expected slice, int, or ellipsis")


def _as_i32(p: Any) -> Optional[int]:
    """P as safetensors reads an int index (pyo3 i32: __index__, bools
    included); None where it is no such int."""
    if isinstance(p, (slice, list, tuple, float, str, bytes)) or p is None:
        return None
    try:
        i = operator.index(p)
    except TypeError:
        return None
    return i if _I32[0] <= i <= _I32[1] else None


def _unsigned(v: Any) -> Optional[int]:
    """A slice bound as safetensors reads it (pyo3 usize)."""
    if v is None:
        return None
    i = operator.index(v)  # TypeError for floats, as safetensors raises
    if i < 0:
        raise OverflowError("can't convert negative int to unsigned")
    return i


def _show(items: List[Tuple[str, Any]]) -> str:
    """The index as safetensors prints it: [:20], [1:3, 0], [0:4:2]."""
    out = []
    for kind, v in items:
        if kind == "int":
            out.append(str(v))
        else:
            start, stop, step = v
            text = (f"{'' if start is None else start}:"
                    f"{'' if stop is None else stop}")
            if step != 1:
                text += f":{step}"
            out.append(text)
    return "[" + ", ".join(out) + "]"


def _select_np(index: Any, shape: List[int]) -> Selection:
    if isinstance(index, list):
        if index:
            raise _error("Non empty lists are not implemented")
        parts: Tuple[Any, ...] = (slice(0, 0),)
    else:
        parts = index if type(index) is tuple else (index,)
    if sum(1 for p in parts if p is Ellipsis) > 1:
        raise _error("Only one ellipsis (...) is allowed in slice index")
    expanded: List[Any] = []
    for p in parts:
        if p is Ellipsis:
            expanded += [slice(None)] * max(0, len(shape) - len(parts) + 1)
        else:
            expanded.append(p)

    items: List[Tuple[str, Any]] = []  # ("int", i) or ("slice", bounds)
    for pos, p in enumerate(expanded):
        if type(p) is slice:
            start, stop = _unsigned(p.start), _unsigned(p.stop)
            step = 1 if p.step is None else operator.index(p.step)
            if step <= 0:
                raise _error(
                    f"Slice step must be a positive integer, got {step}")
            items.append(("slice", (start, stop, step)))
            continue
        i = _as_i32(p)
        if i is None:
            raise _unsupported(pos)
        if i < 0 and pos < len(shape):  # past the last dimension: the
            if i + shape[pos] < 0:         # count check below raises
                raise _error(f"Invalid index {i} for dimension {pos} of "
                             f"size {shape[pos]}")
            i += shape[pos]
        items.append(("int", i))

    def fail(why: str) -> InvalidArgumentError:
        return _error(f"Error during slicing {_show(items)} with shape "
                      f"{shape}: {why}")

    if len(items) > len(shape):
        raise fail("more slicing indexes than dimensions in tensor")
    ranges, squeeze = [], []
    for d, n in enumerate(shape):
        if d >= len(items):
            ranges.append((0, n, 1))
            continue
        kind, v = items[d]
        if kind == "int":
            start, stop, step = v, v + 1, 1
            squeeze.append(d)
        else:
            start, stop, step = v
            start = 0 if start is None else start
            stop = n if stop is None else stop
        if start >= n or stop > n:
            asked = start if start >= n else stop - 1
            raise fail(f"index {asked} out of bounds for tensor dimension "
                       f"#{d} of size {n}")
        if stop < start:
            raise fail(f"stop {stop} is before start {start} in dimension "
                       f"#{d}")
        ranges.append((start, stop, step))
    return Selection(ranges, tuple(squeeze))


def byte_span(sel: Selection, shape: Sequence[int],
              element_bits: int) -> Tuple[int, int]:
    """(first byte, byte count) of the rows of dimension 0 that SEL touches,
    relative to the tensor's start: the one contiguous read that holds every
    selected element. (0, 0) when nothing is selected."""
    if not sel.ranges:  # a 0-d tensor: its one element
        return 0, element_bits // 8
    if any(count(*r) == 0 for r in sel.ranges):
        return 0, 0
    start, stop, step = sel.ranges[0]
    last = start + (count(start, stop, step) - 1) * step
    row_bytes = math.prod(shape[1:]) * element_bits // 8
    return start * row_bytes, (last + 1 - start) * row_bytes
