"""weightlift._slice_index: the Selection each index makes (the contract the
loader's slice reads rely on: per dimension (start, stop, step) with
start <= stop <= dim and step >= 1, plus the dimensions an int drops).
Which indices raise what is compared with safetensors in
test_dropin_slice.py; here, the numbers."""

import numpy as np
import pytest

from weightlift._slice_index import (Selection, byte_span, count,
                                     result_shape, select)

E = Ellipsis

CASES = [
    # (index, shape, framework, ranges, squeeze)
    ((), [3, 4], "np", [(0, 3, 1), (0, 4, 1)], ()),
    (E, [3, 4], "pt", [(0, 3, 1), (0, 4, 1)], ()),
    (1, [3, 4], "np", [(1, 2, 1), (0, 4, 1)], (0,)),
    (-1, [3, 4], "np", [(2, 3, 1), (0, 4, 1)], (0,)),
    ((E, -1), [2, 3, 4], "pt", [(0, 2, 1), (0, 3, 1), (3, 4, 1)], (2,)),
    ((slice(1, None, 2), 0), [5, 2], "np", [(1, 5, 2), (0, 1, 1)], (1,)),
    (slice(-2, None), [5], "pt", [(3, 5, 1)], ()),
    (slice(3, 1), [5], "pt", [(3, 3, 1)], ()),       # clamped: empty
    (slice(0, 100), [5], "pt", [(0, 5, 1)], ()),     # clamped
    ((), [], "np", [], ()),
    ([], [3, 4], "np", [(0, 0, 1), (0, 4, 1)], ()),  # safetensors: [0:0]
    ((0, 1, slice(None)), [2, 3, 4], "np",
     [(0, 1, 1), (1, 2, 1), (0, 4, 1)], (0, 1)),
]


@pytest.mark.parametrize("index,shape,framework,ranges,squeeze", CASES,
                         ids=lambda v: repr(v).replace(" ", ""))
def test_selection(index, shape, framework, ranges, squeeze):
    sel = select(index, shape, framework)
    assert sel == Selection(ranges, squeeze)
    for (start, stop, step), n in zip(sel.ranges, shape):
        assert 0 <= start <= stop <= n and step >= 1
    # The shape is numpy's for the same index (basic indexing agrees).
    want = np.empty(shape)[index if index != [] else slice(0, 0)]
    assert result_shape(sel) == list(np.shape(want))


@pytest.mark.parametrize("index", [None, [0, 1], True, np.int64(1),
                                   (E, E), 5, (0, 0, 0),
                                   slice(None, None, -1)],
                         ids=repr)
def test_torch_leaves_the_rest_to_torch(index):
    assert select(index, [3, 4], "pt") is None


def test_count():
    assert [count(0, 5, 2), count(1, 5, 3), count(3, 3, 1),
            count(0, 1, 1 << 40)] == [3, 2, 0, 1]


def test_byte_span_covers_the_touched_rows():
    shape = [5, 4, 3]  # F32: a row of dimension 0 is 48 bytes
    sel = select((slice(1, 5, 2), 2), shape, "np")
    assert byte_span(sel, shape, 32) == (48, 3 * 48)  # rows 1..3
    assert byte_span(select(4, shape, "np"), shape, 32) == (4 * 48, 48)
    assert byte_span(select(slice(2, 2), shape, "pt"), shape, 32) == (0, 0)
    assert byte_span(select((), [], "np"), [], 64) == (0, 8)  # 0-d F64
