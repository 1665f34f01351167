"""A split's rows read from its cached columns equal what ``select(rows)`` holds."""

from __future__ import annotations

import datasets
import numpy as np

from fl.data import columns as cols


def _split() -> datasets.Dataset:
    rng = np.random.default_rng(0)
    texts = [f"text {i} " + "w" * int(k) for i, k in enumerate(rng.integers(0, 9, 300))]
    base = datasets.Dataset.from_dict({"text": texts, "label": rng.integers(0, 3, 300).tolist(), "x": list(range(300))})
    return base.shuffle(seed=3).select(np.arange(10, 250))  # under an index mapping, as after a seeded draw


def test_rows_equal_select() -> None:
    split = _split()
    rows = np.random.default_rng(1).permutation(len(split))[:57]
    texts, labels = cols.rows_of(split, rows)
    sub = split.select(rows)
    assert texts == list(sub["text"][:])
    assert labels.dtype == np.int64 and labels.tolist() == list(sub["label"][:])
    # power: the rows are not the split's first ones, so reading them in order would differ
    assert texts != list(split["text"][:57])


def test_read_once_and_dropped_with_split() -> None:
    split = _split()
    first = cols.columns(split)
    assert cols.columns(split) is first  # cached
    assert split in cols._COLUMNS
    del split, first
    import gc

    gc.collect()
    assert not any(len(t) == 240 and t[0].startswith("text") for t, _ in cols._COLUMNS.values())


def test_empty_rows() -> None:
    texts, labels = cols.rows_of(_split(), np.zeros(0, dtype=np.int64))
    assert texts == [] and labels.shape == (0,)
