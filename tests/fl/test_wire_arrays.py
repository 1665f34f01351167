"""fl.wire's fast path for Flower's Arrays: the same bytes as ``Array(ndarray)`` (np.save's format), and
the same values as ``Array.numpy()``, for every layout and dtype the runs send."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.app import Array

from fl.wire import from_array, to_array

ARRAYS = [
    np.random.default_rng(0).random((384, 256)).astype(np.float32),
    np.arange(5),
    np.zeros((0, 3)),
    np.array(3.5),
    np.random.default_rng(1).random((3, 4, 5)),
    np.asfortranarray(np.random.default_rng(2).random((3, 4))),
    np.array([True, False]),
    np.random.default_rng(3).random(7).astype(">f8"),
    np.arange(6, dtype=np.int8).reshape(2, 3),
    np.arange(12, dtype=np.uint64)[::2],
]


@pytest.mark.parametrize("x", ARRAYS, ids=lambda x: f"{x.dtype.str}{x.shape}")
def test_an_array_is_the_one_flower_builds_and_reads_back(x: np.ndarray) -> None:
    flower, fast = Array(x), to_array(x)
    assert fast.data == flower.data and fast.dtype == flower.dtype and fast.stype == flower.stype
    assert tuple(fast.shape) == tuple(flower.shape)
    back = from_array(flower)
    assert back.dtype == flower.numpy().dtype and back.shape == x.shape and np.array_equal(back, x)
    assert not back.flags.writeable  # a view of the bytes, never a copy to write to


def test_a_decoded_array_is_a_view_that_cannot_be_written() -> None:
    array = to_array(np.arange(4.0))
    view = from_array(array)
    with pytest.raises(ValueError, match="read-only"):
        view[0] = 7.0
    assert array.numpy()[0] == 0.0
