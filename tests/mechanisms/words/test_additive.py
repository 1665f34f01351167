"""Word-level Laplace and Gaussian baselines (docs/SPEC.md §7.2, §7.3, §11.5 items 3, 4)."""

from __future__ import annotations

import math

import pytest
import torch
from scipy import stats

import mechanisms
from mechanisms.clipped_additive import analytic_gaussian_sigma
from tests.support.word_spaces import make_space

P_MIN = 1e-4


def _noise(mech, n: int = 4000) -> torch.Tensor:
    ids = torch.full((n,), 5, dtype=torch.int64)
    return mech.perturb(ids, torch.Generator().manual_seed(0)) - mech.input_vectors(torch.device("cpu"))[ids]


@pytest.mark.parametrize("dim", [16, 50])
@pytest.mark.parametrize("eps", [0.1, 1.0, 10.0])
def test_laplace_noise_law(dim: int, eps: float) -> None:
    """Coordinates ~ Lap(2C sqrt(n)/eps), C = 0.7; power: the scale without sqrt(n) fails."""
    mech = mechanisms.create("word_laplace", epsilon=eps, clip=0.7, space=make_space(100, dim))
    b = 2 * 0.7 * math.sqrt(dim) / eps
    assert mech.scale == pytest.approx(b)
    z = _noise(mech).ravel().numpy()[:100_000]
    assert stats.kstest(z, stats.laplace(scale=b).cdf).pvalue > P_MIN
    assert stats.kstest(z, stats.laplace(scale=2 * 0.7 / eps).cdf).pvalue < 1e-6


@pytest.mark.parametrize(("eps", "delta"), [(0.5, 1e-5), (10.0, 1e-6)])
def test_gaussian_noise_law(eps: float, delta: float) -> None:
    """Coordinates ~ N(0, sigma^2), sigma analytic for L2 sensitivity 2C; power: the TrLap code's
    sigma = 2C sqrt(n)/eps fails."""
    mech = mechanisms.create("word_gaussian", epsilon=eps, delta=delta, clip=0.7, space=make_space(100, 50))
    assert mech.sigma == analytic_gaussian_sigma(eps, delta, 1.4)
    z = _noise(mech).ravel().numpy()[:100_000]
    assert stats.kstest(z, stats.norm(scale=mech.sigma).cdf).pvalue > P_MIN
    assert stats.kstest(z, stats.norm(scale=1.4 * math.sqrt(50) / eps).cdf).pvalue < 1e-6


@pytest.mark.parametrize("name", ["word_laplace", "word_gaussian"])
def test_clip(name: str) -> None:
    """||clip(x)|| <= C(1 + 1e-12); x unchanged inside the ball; candidates clipped too."""
    space = make_space(400, 16, seed=4)
    mech = mechanisms.create(name, epsilon=1.0, clip=2.5, space=space)
    raw, clipped = space.vectors.double(), mech.input_vectors(torch.device("cpu"))
    assert float(clipped.norm(dim=1).max()) <= 2.5 * (1 + 1e-12)
    inside = raw.norm(dim=1) <= 2.5
    assert 0 < int(inside.sum()) < raw.shape[0] and torch.equal(clipped[inside], raw[inside])
    assert float(mech.index.vectors64.norm(dim=1).max()) <= 2.5 * (1 + 1e-12)


def test_guarantees_and_bad_parameters() -> None:
    space = make_space(50, 8)
    lap = mechanisms.create("word_laplace", epsilon=2.0, space=space)
    assert (lap.guarantee.notion, lap.guarantee.as_ldp(), lap.guarantee.granularity) == ("pure", (2.0, 0.0), "word")
    assert lap.document_guarantee(20).as_ldp() == (40.0, 0.0)
    gau = mechanisms.create("word_gaussian", epsilon=2.0, delta=1e-6, space=space)
    assert gau.guarantee.as_ldp() == (2.0, 1e-6)
    assert gau.document_guarantee(20).as_ldp() == pytest.approx((40.0, 2e-5))
    for clip in (0.0, -1.0, float("nan"), float("inf"), "x"):
        with pytest.raises(ValueError, match="clip"):
            mechanisms.create("word_laplace", epsilon=1.0, clip=clip, space=space)
    for delta in (0.0, 1.0, float("nan")):
        with pytest.raises(ValueError, match="delta"):
            mechanisms.create("word_gaussian", epsilon=1.0, delta=delta, space=space)
