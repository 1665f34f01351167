"""N_w and S_w (Feyisetan et al. 2020; docs/SPEC.md §5.1 diagnostics)."""

from __future__ import annotations

import pytest
import torch

import mechanisms
from mechanisms.words import WordSpace, rewrite_statistics, support_sizes, unchanged_fraction, word_statistics


def test_support_sizes_and_unchanged_fraction() -> None:
    out = torch.tensor([[3, 3, 3, 3], [1, 2, 1, 4], [0, 1, 2, 3]])
    assert support_sizes(out).tolist() == [1, 3, 4]
    a, b = torch.tensor([1, 2, 3, 9]), torch.tensor([1, 5, 3, 9])
    assert unchanged_fraction(a, b) == 0.75 and unchanged_fraction(a, b, unk=9) == 0.5


def test_word_statistics_follow_epsilon(space16: WordSpace) -> None:
    """N_w -> 1 and S_w -> 1 as epsilon grows; N_w small and S_w large at small epsilon (1000 draws)."""
    words = ["w1", "w2", "w3"]
    g = torch.Generator().manual_seed(0)
    hi = word_statistics(mechanisms.create("cmp", epsilon=1e6, space=space16), words, 1000, g)
    assert hi["N_w"].tolist() == [1.0] * 3 and hi["S_w"].tolist() == [1] * 3
    lo = word_statistics(mechanisms.create("cmp", epsilon=0.5, space=space16), words, 1000, g)
    assert float(lo["N_w"].max()) < 0.2 and int(lo["S_w"].min()) > 100
    mid = word_statistics(mechanisms.create("cmp", epsilon=8.0, space=space16), words, 1000, g)
    assert (lo["N_w"] <= mid["N_w"]).all() and (mid["S_w"] <= lo["S_w"]).all()
    with pytest.raises(ValueError, match="num_draws"):
        word_statistics(mechanisms.create("cmp", epsilon=1.0, space=space16), words, 0)


def test_rewrite_statistics_count_oov_as_changed(space16: WordSpace) -> None:
    mech = mechanisms.create("cmp", epsilon=1e6, space=space16)
    stats = rewrite_statistics(mech, ["w1 w2, qqq", "w3"], torch.Generator().manual_seed(0))
    assert (stats["words"], stats["oov"]) == (4, 1)
    assert stats["N_w"] == 0.75 and stats["texts"][0].startswith("w1 w2, ")
