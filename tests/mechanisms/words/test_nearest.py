"""Exact nearest neighbour and exact diameter (docs/SPEC.md §11.2 item 6, §5.1, §0.2)."""

from __future__ import annotations

import pytest
import torch

from mechanisms.words.nearest import NearestWords, brute_force_nearest, diameter
from tests.support.word_spaces import make_space


def _queries(vectors: torch.Tensor, n: int, seed: int) -> torch.Tensor:
    """Queries at every scale: near words (large epsilon), mid-range, far away (small epsilon), and midpoints."""
    gen = torch.Generator().manual_seed(seed)
    v = vectors.to(torch.float64)
    pick = torch.randint(0, v.shape[0], (n,), generator=gen)
    other = torch.randint(0, v.shape[0], (n,), generator=gen)
    scale = torch.logspace(-3, 3, n, dtype=torch.float64)[torch.randperm(n, generator=gen)].unsqueeze(1)
    q = v[pick] + scale * torch.randn(n, v.shape[1], generator=gen, dtype=torch.float64)
    q[: n // 10] = 0.5 * (v[pick[: n // 10]] + v[other[: n // 10]])  # equidistant from two words
    return q


@pytest.fixture(scope="module")
def case() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(vocabulary [2000, 50], 1000 queries, their float64 brute-force nearest rows)."""
    space = make_space(2000, 50, seed=3)
    vectors = space.vectors[: space.num_words]
    q = _queries(vectors, 1000, seed=0)
    return vectors, q, brute_force_nearest(q, vectors)


def test_exact_nn_equals_brute_force_on_1000_queries(case) -> None:
    """docs/SPEC.md §11.2 item 6: the chunked float32 search with its float64 fallback equals float64 brute force."""
    vectors, q, reference = case
    index = NearestWords(vectors, max_elements=2**14)  # many small chunks: exercises the merge across chunks
    assert torch.equal(index(q), reference)
    assert torch.equal(NearestWords(vectors)(q), reference)


def test_exact_nn_has_power(case) -> None:
    """The cosine nearest neighbour (dp_prompt's gensim/Annoy search) and a pure float32 argmin differ from it."""
    vectors, q, reference = case
    v = vectors.to(torch.float64)
    cosine = (torch.nn.functional.normalize(q, dim=1) @ torch.nn.functional.normalize(v, dim=1).T).argmax(1)
    assert (cosine != reference).float().mean() > 0.05
    f32 = torch.cdist(q.float(), vectors.float()).argmin(1)  # no tie handling: equidistant queries go astray
    assert not torch.equal(f32, reference)


def test_ties_go_to_the_first_index() -> None:
    """Duplicate vectors and exact ties: deterministic first-index tie breaking (fallback path)."""
    base = torch.randn(300, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    vectors = torch.cat([base, base[:50]])  # rows 300..349 duplicate rows 0..49
    index = NearestWords(vectors, max_elements=2**12)
    q = base[:50] + 1e-9
    assert torch.equal(index(q), torch.arange(50))
    assert torch.equal(index(vectors[300:]), torch.arange(50))
    a, b = torch.zeros(1, 2, dtype=torch.float64), torch.tensor([[2.0, 0.0]], dtype=torch.float64)
    two = NearestWords(torch.cat([b, a]))
    assert int(two(torch.tensor([[1.0, 0.0]], dtype=torch.float64))) == 0  # equidistant: first index


def test_nn_rejects_bad_queries() -> None:
    gen = torch.Generator().manual_seed(0)
    index = NearestWords(torch.randn(10, 4, generator=gen))
    for bad in (torch.randn(3, 5, generator=gen), torch.full((2, 4), float("nan"))):
        try:
            index(bad)
        except ValueError:
            continue
        raise AssertionError("bad queries accepted")
    assert index(torch.empty(0, 4)).shape == (0,)


def test_diameter_is_exact() -> None:
    """The pruned scan equals the full pairwise maximum (random sets, with outliers and in 2-D)."""
    gen = torch.Generator().manual_seed(0)
    for n, d in [(1500, 50), (3000, 2), (800, 300)]:
        v = torch.randn(n, d, generator=gen, dtype=torch.float64)
        v[:5] *= 4  # outliers: the pruning's favourable case
        v[5:40] *= torch.rand(35, 1, generator=gen, dtype=torch.float64) * 3
        full = float(torch.cdist(v, v).max())
        got = diameter(v, block=256)
        assert full <= got <= full * (1 + 2e-12)
    assert diameter(torch.randn(1, 3, generator=gen)) == 0.0


def test_diameter_has_power() -> None:
    """Twice the largest norm around the centroid (a common safe bound) is not the diameter."""
    v = torch.randn(1000, 50, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    c = v - v.mean(0)
    assert 2 * float(c.norm(dim=1).max()) > 1.05 * diameter(v)
