"""A split's text and label columns as numpy arrays, read once per process.

Reading some rows of an Arrow-backed ``datasets.Dataset`` as ``split.select(rows)["text"][:]`` gathers
them through an index mapping, row by row in Python (datasets' ``fast_gather``); a simulation does it
for every node, about 1 s for SST-2's 68 nodes. :func:`rows_of` reads each split's two columns once,
as whole Arrow columns, and a node takes its rows with numpy: the same texts and labels in the same
order (``tests/fl/data/test_columns.py``).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import datasets

# Split -> (texts as an object array of str, labels as int64); an entry goes with its split.
_COLUMNS: weakref.WeakKeyDictionary[datasets.Dataset, tuple[np.ndarray, np.ndarray]] = weakref.WeakKeyDictionary()


def columns(split: datasets.Dataset) -> tuple[np.ndarray, np.ndarray]:
    """The ``text`` column (object array of ``str``) and the ``label`` column (int64) of ``split``."""
    found = _COLUMNS.get(split)
    if found is None:
        table = split.select_columns(["text", "label"]).with_format("arrow")[:]  # one read, index mapping applied
        texts = table.column("text").to_numpy(zero_copy_only=False)
        labels = np.asarray(table.column("label").to_numpy(zero_copy_only=False), dtype=np.int64)
        found = (texts, labels)
        _COLUMNS[split] = found
    return found


def rows_of(split: datasets.Dataset, rows: np.ndarray) -> tuple[list[str], np.ndarray]:
    """The texts and labels at ``rows`` of ``split``, in that order (what ``split.select(rows)`` holds)."""
    texts, labels = columns(split)
    return texts[rows].tolist(), labels[rows]
