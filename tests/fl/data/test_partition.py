"""Users get documents through flwr-datasets partitioners; nodes hold contiguous cohorts."""

from __future__ import annotations

import datasets as hf
import numpy as np
import pytest
from flwr_datasets.partitioner import IidPartitioner

from fl.data.partition import UserPartition, cohort, num_nodes


def _toy(n: int = 300, classes: int = 3) -> hf.Dataset:
    return hf.Dataset.from_dict({"label": [i % classes for i in range(n)], "row": list(range(n))})


@pytest.mark.parametrize(("n", "seed"), [(120, 7), (97, 0), (300, 12345)])
def test_one_document_per_user_equals_iid_partitioner(n: int, seed: int) -> None:
    """The fast path gives exactly what IidPartitioner(num_partitions=n) gives on datasets' seeded shuffle,
    reading the row column (here not the position: row = 3 * position + 1)."""
    ds = hf.Dataset.from_dict({"label": [i % 3 for i in range(n)], "row": [3 * i + 1 for i in range(n)]})
    fast = UserPartition(ds, 0, "iid", 0.5, seed=seed)
    ref = IidPartitioner(num_partitions=n)
    ref.dataset = ds.shuffle(seed=seed)
    got = [fast.rows([user])[0].tolist() for user in range(n)]
    assert got == [ref.load_partition(user)["row"] for user in range(n)]
    assert got != [[3 * i + 1] for i in range(n)]  # power: shuffled


@pytest.mark.parametrize("scheme", ["iid", "dirichlet"])
def test_every_document_belongs_to_exactly_one_user(scheme: str) -> None:
    parts = UserPartition(_toy(), 20, scheme, 0.3, seed=1)
    rows = np.concatenate(parts.rows(range(20)))
    assert sorted(rows.tolist()) == list(range(300))


def test_dirichlet_skews_labels_and_is_seeded() -> None:
    a = UserPartition(_toy(), 10, "dirichlet", 0.1, seed=2).rows(range(10))
    b = UserPartition(_toy(), 10, "dirichlet", 0.1, seed=2).rows(range(10))
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    majority = [np.bincount(r % 3, minlength=3).max() / max(len(r), 1) for r in a if len(r)]
    assert np.mean(majority) > 0.6  # IID would give ~1/3


def test_too_many_users_refused() -> None:
    with pytest.raises(ValueError, match="num-users"):
        UserPartition(_toy(10), 11, "iid", 0.5, 0)


def test_cohorts_cover_users_once() -> None:
    blocks = [cohort(p, 7, 100) for p in range(7)]
    assert [u for b in blocks for u in b] == list(range(100))
    assert max(len(b) for b in blocks) - min(len(b) for b in blocks) <= 1
    assert num_nodes(67_349, 1000) == 68
