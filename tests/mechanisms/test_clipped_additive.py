"""Clipped Laplace and analytic Gaussian baselines (docs/SPEC.md §7.2, §7.3, §11.5 items 3-4).

Each statistical test has a power check: a mis-scaled noise law, noise shared
between rows, a mechanism that does not clip.
"""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
import torch
from scipy import stats

import mechanisms
from mechanisms.clipped_additive import analytic_gaussian_sigma, gaussian_delta

N = 4000
P_MIN = 1e-4


def _noise(name: str, d: int, seed: int = 0, **params: float) -> tuple[np.ndarray, object]:
    mech = mechanisms.create(name, **params)
    x = torch.zeros(N, d, dtype=torch.float64)
    return mech.sanitize(x, generator=torch.Generator().manual_seed(seed)).numpy(), mech


def _row_correlation(z: np.ndarray) -> float:
    """|correlation| of the first noise coordinate between consecutive rows."""
    return abs(np.corrcoef(z[:-1, 0], z[1:, 0])[0, 1])


@pytest.mark.parametrize("d", [16, 300])
@pytest.mark.parametrize("eps", [0.1, 1.0, 10.0])
def test_laplace_noise_law(d: int, eps: float) -> None:
    """Coordinates ~ Lap(2C sqrt(d)/eps) (KS on all N*d values, rows independent)."""
    z, mech = _noise("laplace", d, epsilon=eps, clip=0.5)
    b = 2 * 0.5 * math.sqrt(d) / eps
    assert mech.scale(d) == pytest.approx(b)
    assert stats.kstest(z.ravel()[:200_000], stats.laplace(scale=b).cdf).pvalue > P_MIN
    assert _row_correlation(z) < 5 / math.sqrt(N)


def test_row_independence_check_has_power() -> None:
    """Power: noise shared by each pair of consecutive rows (a partial broadcast, docs/SPEC.md §7.6) fails
    the row-correlation check of ``test_laplace_noise_law``."""
    z, _ = _noise("laplace", 16, epsilon=1.0, clip=0.5)
    assert _row_correlation(np.repeat(z[::2], 2, axis=0)) > 5 / math.sqrt(N)


def test_laplace_law_test_has_power() -> None:
    """A mis-scaled noise (10% too little, as a sqrt(d)-less or rounded scale would be) fails the same test."""
    z, _ = _noise("laplace", 16, epsilon=1.0, clip=0.5)
    wrong_b = 2 * 0.5 * math.sqrt(16) / 1.0 * 0.9
    assert stats.kstest(z.ravel(), stats.laplace(scale=wrong_b).cdf).pvalue < 1e-6


@pytest.mark.parametrize(("eps", "delta"), [(0.5, 1e-5), (1.0, 1e-5), (10.0, 1e-6), (50.0, 1e-6)])
def test_gaussian_calibration_matches_dp_accounting(eps: float, delta: float) -> None:
    """Analytic-Gaussian sigma attains exactly (eps, delta) per dp-accounting's PLD accountant."""
    sigma = analytic_gaussian_sigma(eps, delta, 2.0)
    acc = dp_accounting.pld.PLDAccountant()
    acc.compose(dp_accounting.GaussianDpEvent(sigma / 2.0))
    assert acc.get_epsilon(delta) == pytest.approx(eps, rel=1e-6)
    assert gaussian_delta(sigma, eps, 2.0) <= delta
    assert gaussian_delta(0.99 * sigma, eps, 2.0) > delta  # tight: less noise breaks it


def test_gaussian_is_not_the_seed_codes_sigma() -> None:
    """docs/SPEC.md §7.3: 2C sqrt(d)/eps over-noises by ~3.6x at delta = 1e-5, d = 300, eps = 1."""
    sigma = analytic_gaussian_sigma(1.0, 1e-5, 2.0)
    assert 2 * math.sqrt(300) / 1.0 / sigma > 3.0


@pytest.mark.parametrize("d", [16, 300])
def test_gaussian_noise_law(d: int) -> None:
    z, mech = _noise("gaussian", d, epsilon=2.0, delta=1e-5)
    assert stats.kstest(z.ravel()[:200_000], stats.norm(scale=mech.sigma).cdf).pvalue > P_MIN
    assert stats.kstest(z.ravel()[:200_000], stats.norm(scale=0.9 * mech.sigma).cdf).pvalue < 1e-6


def _clip_inputs() -> torch.Tensor:
    """1000 seeded Gaussian rows of dimension 32 with norms spread over 1e-3..1e3 * sqrt(32)."""
    x = torch.randn(1000, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(13))
    return x * torch.logspace(-3, 3, 1000, dtype=torch.float64)[:, None]


def _release_near_clip(name: str) -> bool:
    """A release at huge epsilon stays within a few noise scales of clip_l2(x, 2) in every entry."""
    from mechanisms.noise import clip_l2

    x = _clip_inputs()
    mech = mechanisms.create(name, epsilon=1e6, clip=2.0)
    y = mech.sanitize(x, generator=torch.Generator().manual_seed(0))
    bound = 8 * mech.sigma if name == "gaussian" else 20 * mech.scale(32)
    return float((y - clip_l2(x, 2.0)).abs().max()) < bound


@pytest.mark.parametrize("name", ["laplace", "gaussian"])
def test_clip(name: str) -> None:
    """||clip(x)|| <= C(1 + 1e-12), and x is unchanged inside the ball (checked with huge epsilon)."""
    from mechanisms.noise import clip_l2

    x = _clip_inputs()
    c = clip_l2(x, 2.0)
    assert float(c.norm(dim=1).max()) <= 2.0 * (1 + 1e-12)
    inside = x.norm(dim=1) <= 2.0
    assert torch.equal(c[inside], x[inside])
    assert _release_near_clip(name)


@pytest.mark.parametrize("name", ["laplace", "gaussian"])
def test_clip_check_has_power(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Power: the same mechanism with its clip removed (patched to the identity) fails the check."""
    monkeypatch.setattr("mechanisms.clipped_additive.clip_l2", lambda x, radius: x)
    assert not _release_near_clip(name)


def test_guarantees_and_bad_parameters() -> None:
    assert mechanisms.create("laplace", epsilon=2.0).guarantee.as_ldp() == (2.0, 0.0)
    g = mechanisms.create("gaussian", epsilon=2.0, delta=1e-6).guarantee
    assert (g.notion, g.as_ldp()) == ("approx", (2.0, 1e-6))
    with pytest.raises(ValueError, match="clip"):
        mechanisms.create("laplace", epsilon=1.0, clip=0.0)
    with pytest.raises(ValueError, match="delta"):
        mechanisms.create("gaussian", epsilon=1.0, delta=0.0)
