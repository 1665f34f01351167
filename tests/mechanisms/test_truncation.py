"""Truncation baseline (docs/SPEC.md §9): exact worst-case privacy loss, Laplace law, the median box, clipping.

Each statistical test has a power check: a deliberately wrong implementation
(half the noise, a sum instead of a mean, no clipping, a mis-scaled law, an
equal-tailed box) fails the same assertion.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

import mechanisms
from mechanisms.noise import laplace
from mechanisms.truncation import Truncation, median_box

P_MIN = 1e-3


def _box(d: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    lo = torch.randn(d, generator=g, dtype=torch.float64) - 0.5
    return lo, lo + 0.2 + torch.rand(d, generator=g, dtype=torch.float64)


# Deliberately wrong versions, sharing the real code except for one step.
class HalfNoise(Truncation):
    def scale(self, num_sentences):
        return super().scale(num_sentences) / 2


class SumNotMean(Truncation):  # the 1/k of the mean is missing; the noise still assumes it
    def _clipped_means(self, docs, device):
        means, counts = super()._clipped_means(docs, device)
        return means * counts.unsqueeze(1), counts


class NoClip(Truncation):
    def __init__(self, epsilon, lo, hi):
        super().__init__(epsilon, lo, hi)
        self.lo, self.hi = torch.full_like(lo, -math.inf), torch.full_like(hi, math.inf)  # clamp does nothing
        self.width = hi - lo  # the noise still assumes the box


def _loss(mech: Truncation, x: torch.Tensor, x2: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Privacy loss log p(y | x) - log p(y | x') at each row of y."""
    return mech.log_density(x, y) - mech.log_density(x2, y)


def _favourable(mech: Truncation, x: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
    """A release on x's side of both centres in every coordinate: the loss there is sum_d |c_d - c'_d| / b_d."""
    c, c2 = mech.clipped_means([x, x2])
    return c - torch.sign(c2 - c) * 3 * mech.scale(x.shape[0])


def _max_loss(mech: Truncation, d: int, k: int, pairs: int = 60, seed: int = 1) -> float:
    """Max |loss| over random neighbour pairs (one sentence replaced by anything) and many releases y."""
    g = torch.Generator().manual_seed(seed)
    lo, hi = _box(d)  # the box every mechanism under audit was built with
    worst = 0.0
    for p in range(pairs):
        x = lo + (hi - lo) * (2.5 * torch.rand(k, d, generator=g, dtype=torch.float64) - 0.75)
        x2 = x.clone()
        j = p % k
        kind = p % 4
        if kind == 0:  # far outside the box
            x2[j] = 1e3 * torch.randn(d, generator=g, dtype=torch.float64)
        elif kind == 1:  # a random corner of the box and the opposite one: the worst case
            x[j] = torch.where(torch.rand(d, generator=g) < 0.5, lo, hi)
            x2[j] = lo + hi - x[j]
        elif kind == 2:  # a copy of another sentence
            x2[j] = x[(j + 1) % k]
        else:
            x2[j] = lo + (hi - lo) * torch.rand(d, generator=g, dtype=torch.float64)
        c = mech.clipped_means([x])[0]
        b = mech.scale(k)
        ys = torch.cat(
            [
                c + b * laplace((200, d), 1.0, g, torch.device("cpu")),  # typical releases
                c + 50 * b * (2 * torch.rand(100, d, generator=g, dtype=torch.float64) - 1),  # far ones
                _favourable(mech, x, x2).unsqueeze(0),
                _favourable(mech, x2, x).unsqueeze(0),
            ]
        )
        worst = max(worst, float(_loss(mech, x, x2, ys).abs().max()))
    return worst


@pytest.mark.parametrize(("d", "k", "eps"), [(3, 2, 0.5), (16, 5, 2.0), (384, 10, 8.0)])
def test_worst_case_neighbour_loss_is_exactly_epsilon(d: int, k: int, eps: float) -> None:
    """docs/SPEC.md §9: one sentence moved between opposite box corners gives loss exactly epsilon,
    and no neighbour pair (replacement anywhere, far outside the box included) exceeds it."""
    mech = Truncation(eps, *_box(d))
    g = torch.Generator().manual_seed(0)
    x = mech.lo + (mech.hi - mech.lo) * torch.rand(k, d, generator=g, dtype=torch.float64)
    x[0] = mech.lo
    x2 = x.clone()
    x2[0] = mech.hi
    y = _favourable(mech, x, x2)
    assert float(_loss(mech, x, x2, y)) == pytest.approx(eps, abs=1e-9)
    assert float(_loss(mech, x2, x, _favourable(mech, x2, x))) == pytest.approx(eps, abs=1e-9)
    # the same corner pair with the moved sentence pushed far outside the box: clipping keeps it at epsilon
    x[0], x2[0] = mech.lo - 1e6, mech.hi + 1e6
    assert float(_loss(mech, x, x2, y)) == pytest.approx(eps, abs=1e-9)
    assert _max_loss(mech, d, k, pairs=60 if d < 100 else 12) <= eps + 1e-9


@pytest.mark.parametrize(("wrong", "factor"), [(HalfNoise, 2.0), (SumNotMean, 4.0), (NoClip, 100.0)])
def test_worst_case_audit_has_power(wrong: type[Truncation], factor: float) -> None:
    """Half the noise (2 eps), a sum instead of a mean (k eps), no clipping (unbounded) all exceed epsilon."""
    d, k, eps = 16, 5, 2.0
    mech = wrong(eps, *_box(d))
    assert _max_loss(mech, d, k) > factor * eps * 0.99


def test_whole_document_loss_is_k_epsilon() -> None:
    """document_guarantee(k) = k * eps is attained: every sentence at lo versus every sentence at hi."""
    d, k, eps = 8, 6, 1.5
    mech = Truncation(eps, *_box(d))
    x, x2 = mech.lo.expand(k, d).clone(), mech.hi.expand(k, d).clone()
    assert float(_loss(mech, x, x2, _favourable(mech, x, x2))) == pytest.approx(k * eps, abs=1e-9)
    g = mech.document_guarantee(k)
    assert (g.notion, g.epsilon, g.granularity) == ("pure", k * eps, "document")
    assert (mech.guarantee.notion, mech.guarantee.epsilon, mech.guarantee.granularity) == ("pure", eps, "sentence")


def _noise_draws(n: int = 20_000) -> tuple[Truncation, np.ndarray, torch.Tensor]:
    d, k = 6, 4
    mech = Truncation(1.5, *_box(d))
    doc = mech.lo + (mech.hi - mech.lo) * (
        2 * torch.rand(k, d, generator=torch.Generator().manual_seed(3), dtype=torch.float64) - 0.5
    )
    y = mech.sanitize([doc] * n, generator=torch.Generator().manual_seed(4))
    z = (y - mech.clipped_means([doc])).numpy()
    return mech, z, mech.scale(k)


def _correlations(u: np.ndarray) -> tuple[float, float]:
    """(largest |correlation| between two coordinates, |correlation| of coordinate 0 between
    consecutive rows) of standardised noise u [n, d]."""
    corr = np.corrcoef(u.T)
    return float(np.abs(corr[np.triu_indices(u.shape[1], 1)]).max()), float(abs(np.corrcoef(u[:-1, 0], u[1:, 0])[0, 1]))


def test_noise_is_laplace_with_scale_d_w_over_k_eps() -> None:
    """Release minus clipped mean ~ Lap(d w_d / (k eps)) per coordinate; independent across rows and coordinates."""
    mech, z, b = _noise_draws()
    n = z.shape[0]
    assert float(b[2]) == pytest.approx(6 * float(mech.width[2]) / (4 * 1.5))
    for j in (0, 5):
        assert stats.kstest(z[:, j], stats.laplace(scale=float(b[j])).cdf).pvalue > P_MIN
    across_coords, across_rows = _correlations(z / b.numpy())
    assert across_coords < 5 / math.sqrt(n)
    assert across_rows < 5 / math.sqrt(n)


def test_noise_correlation_checks_have_power() -> None:
    """Power: one Laplace draw shared by two coordinates fails the across-coordinates check, and
    noise shared by consecutive documents fails the across-rows check."""
    _, z, b = _noise_draws()
    u = z / b.numpy()
    n = u.shape[0]
    shared_coord = u.copy()
    shared_coord[:, 3] = shared_coord[:, 1]
    assert _correlations(shared_coord)[0] > 5 / math.sqrt(n)
    assert _correlations(np.repeat(u[::2], 2, axis=0))[1] > 5 / math.sqrt(n)


def test_noise_law_test_has_power() -> None:
    """The same KS test rejects a 0.8x scale and the scale without the 1/k."""
    _, z, b = _noise_draws()
    assert stats.kstest(z[:, 0], stats.laplace(scale=0.8 * float(b[0])).cdf).pvalue < 1e-6
    assert stats.kstest(z[:, 0], stats.laplace(scale=4 * float(b[0])).cdf).pvalue < 1e-6


def test_noise_scale_follows_each_documents_k() -> None:
    """In a batch mixing k = 2 and k = 7, each row's noise has its own scale d w / (k eps)."""
    d = 5
    mech = Truncation(2.0, *_box(d))
    g = torch.Generator().manual_seed(5)
    docs = [torch.randn(2 if i % 2 else 7, d, generator=g, dtype=torch.float64) for i in range(8000)]
    ks = torch.tensor([doc.shape[0] for doc in docs])
    u = ((mech.sanitize(docs, generator=g) - mech.clipped_means(docs)) / mech.scale(ks)).numpy()
    assert stats.kstest(u.ravel(), stats.laplace.cdf).pvalue > P_MIN
    # power: scaling every row by the first document's k (7) leaves the k = 2 rows 2/7 as wide
    assert stats.kstest(np.concatenate([u[::2].ravel(), u[1::2].ravel() * 2 / 7]), stats.laplace.cdf).pvalue < 1e-6


def test_median_box_exact_on_symmetric_data() -> None:
    """n = 2001 evenly spaced values: m = ceil(0.75 n) = 1501 kept, box = median +- 750 steps, centred."""
    n, d = 2001, 3
    g = torch.Generator().manual_seed(0)
    med, step = (
        torch.tensor([0.3, -2.0, 10.0], dtype=torch.float64),
        torch.tensor([0.01, 1.0, 0.5], dtype=torch.float64),
    )
    grid = torch.arange(-1000, 1001, dtype=torch.float64)
    x = torch.stack([med[j] + step[j] * grid[torch.randperm(n, generator=g)] for j in range(d)], dim=1)
    lo, hi = median_box(x)
    torch.testing.assert_close(lo, med - 750 * step, rtol=0, atol=1e-12)
    torch.testing.assert_close(hi, med + 750 * step, rtol=0, atol=1e-12)
    inside = ((x >= lo) & (x <= hi)).sum(dim=0)
    assert inside.tolist() == [math.ceil(0.75 * n)] * d


def test_median_box_rounding_and_ties() -> None:
    """Rounding up: 7.5 of 10 values keeps 8 ([2, 9]); 0.7 * 10 keeps 7, not 8 (the float product is
    7.000000000000001); a tie at the edge goes to the lower value; an even n uses the mid-point median."""
    v = torch.arange(1, 11, dtype=torch.float64)
    x = torch.stack([v, -v], dim=1)
    lo, hi = median_box(x)
    assert lo.tolist() == [2.0, -9.0] and hi.tolist() == [9.0, -2.0]
    lo, hi = median_box(x, fraction=0.7)  # 7 values: 3..8, then the tie {2, 9} goes to the lower value
    assert lo.tolist() == [2.0, -9.0] and hi.tolist() == [8.0, -3.0]
    x8 = torch.arange(1, 9, dtype=torch.float64).unsqueeze(1).expand(8, 2)
    lo, hi = median_box(x8, fraction=6 / 8)
    assert lo.tolist() == [2.0, 2.0] and hi.tolist() == [7.0, 7.0]  # centred on 4.5
    lo, hi = median_box(x8, fraction=5 / 8)
    assert lo.tolist() == [2.0, 2.0] and hi.tolist() == [6.0, 6.0]


def test_median_box_is_the_median_interval_not_the_quantile_interval() -> None:
    """Exp(1): the 75% of values nearest the median ln 2 is [ln 2 - r, ln 2 + r] with sinh(r) = 3/4,
    i.e. [0, 2 ln 2], with exactly m values inside. Power: the equal-tailed box
    [q_0.125, q_0.875] = [0.134, ln 8] is far from it."""
    n = 20_001
    x = torch.empty(n, 2, dtype=torch.float64).exponential_(generator=torch.Generator().manual_seed(2))
    lo, hi = median_box(x)
    assert torch.allclose(lo, torch.zeros(2, dtype=torch.float64), atol=0.03)
    assert torch.allclose(hi, torch.full((2,), 2 * math.log(2), dtype=torch.float64), atol=0.05)
    assert ((x >= lo) & (x <= hi)).sum(dim=0).tolist() == [math.ceil(0.75 * n)] * 2
    q_hi = torch.quantile(x, 0.875, dim=0)
    assert bool(((q_hi - hi).abs() > 0.5).all())


def test_median_box_refuses_bad_public_data() -> None:
    g = torch.Generator().manual_seed(14)
    x = torch.randn(100, 4, dtype=torch.float64, generator=g)
    x[3, 2] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        median_box(x)
    for f in (0.0, -0.5, 1.5, float("nan")):
        with pytest.raises(ValueError, match="fraction"):
            median_box(torch.randn(100, 4, generator=g), fraction=f)
    with pytest.raises(ValueError, match="at least 2"):
        median_box(torch.randn(1, 4, generator=g))
    with pytest.raises(ValueError, match="lo < hi"):  # a constant column gives a zero-width box
        Truncation.from_public(1.0, torch.cat([torch.randn(50, 3, generator=g), torch.ones(50, 1)], dim=1))
    mech = Truncation.from_public(1.0, torch.randn(400, 4, generator=torch.Generator().manual_seed(0)))
    assert mech.dim == 4 and bool((mech.lo < 0).all() and (mech.hi > 0).all())


def test_clipping_bounds_one_huge_sentence() -> None:
    """A sentence with a huge coordinate contributes hi_d / k, not its value (eps huge: noise ~ 1e-9)."""
    d, k = 4, 5
    lo, hi = -torch.ones(d, dtype=torch.float64), torch.tensor([1.0, 2.0, 0.5, 3.0], dtype=torch.float64)
    mech = Truncation(1e9, lo, hi)
    doc = torch.zeros(k, d, dtype=torch.float64)
    doc[2] = torch.tensor([1e12, -1e12, 1e12, 0.5])
    expected = torch.tensor([1.0, -1.0, 0.5, 0.5], dtype=torch.float64) / k
    torch.testing.assert_close(mech.clipped_means([doc])[0], expected, rtol=0, atol=0)
    y = mech.sanitize([doc], generator=torch.Generator().manual_seed(0))[0]
    assert float((y - expected).abs().max()) < 1e-6


def test_input_validation() -> None:
    lo, hi = _box(4)
    mech = Truncation(1.0, lo, hi)
    g = torch.Generator().manual_seed(15)
    with pytest.raises(ValueError, match="sentence"):
        mech.sanitize([torch.randn(3, 4, generator=g), torch.randn(1, 4, generator=g)])
    with pytest.raises(ValueError, match="dimension"):
        mech.sanitize([torch.randn(3, 5, generator=g)])
    bad = torch.randn(3, 4, generator=g)
    bad[1, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        mech.sanitize([bad])
    with pytest.raises(TypeError):
        mech.sanitize(torch.randn(3, 4, generator=g))
    for eps in (0.0, -1.0, float("nan"), float("inf"), "x"):
        with pytest.raises(ValueError, match="epsilon"):
            Truncation(eps, lo, hi)
    with pytest.raises(ValueError, match="lo < hi"):
        Truncation(1.0, lo, lo.clone())
    with pytest.raises(ValueError, match="lo < hi"):
        Truncation(1.0, hi, lo)
    with pytest.raises(ValueError, match="same shape"):
        Truncation(1.0, lo, hi[:3])
    with pytest.raises(ValueError, match="NaN"):
        Truncation(1.0, lo, torch.full((4,), float("nan")))
    with pytest.raises(ValueError, match="y must be"):
        mech.log_density(torch.randn(3, 4, generator=g), torch.randn(5, generator=g))
    with pytest.raises(ValueError, match="num_sentences"):
        mech.scale(0)
    assert mech.sanitize([]).shape == (0, 4)


def test_reproducible_and_fresh_noise() -> None:
    mech = mechanisms.create("truncation", epsilon=2.0, lo=-torch.ones(8), hi=torch.ones(8))
    g0 = torch.Generator().manual_seed(16)
    docs = [torch.randn(3, 8, generator=g0), torch.randn(5, 8, generator=g0)]
    a = mech.sanitize(docs, generator=torch.Generator().manual_seed(7))
    b = mech.sanitize(docs, generator=torch.Generator().manual_seed(7))
    assert torch.equal(a, b) and a.dtype == torch.float32
    g = torch.Generator().manual_seed(7)
    assert not torch.equal(mech.sanitize(docs, generator=g), mech.sanitize(docs, generator=g))


def test_vectorized_equals_per_document_loop() -> None:
    """Grouped segment means and per-row scales match a plain loop over documents and sentences."""
    d = 6
    mech = Truncation(3.0, *_box(d))
    g = torch.Generator().manual_seed(11)
    docs = [3 * torch.randn(int(k), d, generator=g) for k in torch.randint(2, 9, (50,), generator=g)]
    y = mech.sanitize(docs, generator=torch.Generator().manual_seed(12))
    std = laplace((50, d), 1.0, torch.Generator().manual_seed(12), torch.device("cpu"))
    ref = []
    for i, doc in enumerate(docs):
        total = torch.zeros(d, dtype=torch.float64)
        for s in doc:
            total += torch.minimum(torch.maximum(s.double(), mech.lo), mech.hi)
        k = doc.shape[0]
        ref.append(total / k + std[i] * d * (mech.hi - mech.lo) / (k * 3.0))
    torch.testing.assert_close(y, torch.stack(ref).float())


def test_registry_and_describe() -> None:
    mech = mechanisms.create("truncation", epsilon=4.0, lo=torch.zeros(3), hi=torch.ones(3))
    assert isinstance(mech, mechanisms.DocumentMechanism) and mech.level == "document"
    assert mech.guarantee.as_ldp() == (4.0, 0.0)
    assert "per sentence" in repr(mech)
    assert mech.document_guarantee(10).as_ldp() == (40.0, 0.0)
