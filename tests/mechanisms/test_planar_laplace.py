"""Statistical tests of the planar Laplace mechanism (docs/SPEC.md §11.2 items 1, 2, 4; §2.2 reference values).

Each statistical test has a power check: the "exponential norm" bug (radius
~ Exp(eps) instead of Gamma(m, 1/eps)), a non-uniform direction, a radius
correlated with the direction, noise shared between rows, a wrong epsilon.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

import mechanisms
from mechanisms.noise import gamma_integer_shape, uniform_directions

N = 20_000
P_MIN = 1e-4


def _noise(m: int, eps: float, seed: int = 0, n: int = N) -> np.ndarray:
    """Z = Y - mu from the un-normalised mechanism, for one fixed input."""
    mech = mechanisms.create("planar_laplace", epsilon=eps, normalize_output=False)
    gen = torch.Generator().manual_seed(99)
    mu = torch.nn.functional.normalize(torch.randn(1, m, dtype=torch.float64, generator=gen), dim=1)
    y = mech.sanitize(mu.expand(n, m).contiguous(), generator=torch.Generator().manual_seed(seed))
    return (y - mu).numpy()


@pytest.mark.parametrize("m", [2, 16, 300, 768, 1024])
@pytest.mark.parametrize("eps", [0.01, 1.0, 10.0, 1000.0])
def test_noise_norm_is_gamma(m: int, eps: float) -> None:
    """||Z|| ~ Gamma(m, scale 1/eps) (KS)."""
    norms = np.linalg.norm(_noise(m, eps, n=5000 if m >= 768 else N), axis=1)
    assert stats.kstest(norms, stats.gamma(a=m, scale=1 / eps).cdf).pvalue > P_MIN


def test_norm_test_rejects_exponential_norm() -> None:
    """Power: the 'exponential norm' sampler fails the same KS test."""
    m, eps = 16, 10.0
    wrong = np.random.default_rng(0).exponential(1 / eps, N)
    assert stats.kstest(wrong, stats.gamma(a=m, scale=1 / eps).cdf).pvalue < 1e-6


def _direction_checks(z: np.ndarray) -> tuple[float, float]:
    """(KS p-value of the squared first coordinate of Z/||Z|| against Beta(1/2, (m-1)/2),
    |Pearson correlation| between ||Z|| and that coordinate)."""
    m = z.shape[1]
    norms = np.linalg.norm(z, axis=1)
    u = z / norms[:, None]
    return (
        stats.kstest(u[:, 0] ** 2, stats.beta(0.5, (m - 1) / 2).cdf).pvalue,
        abs(stats.pearsonr(norms, u[:, 0]).statistic),
    )


@pytest.mark.parametrize("m", [2, 16, 300])
def test_direction_is_uniform(m: int) -> None:
    """Squared coordinates of Z/||Z|| ~ Beta(1/2, (m-1)/2); radius uncorrelated with direction."""
    ks_p, corr = _direction_checks(_noise(m, 1.0))
    assert ks_p > P_MIN
    assert corr < 4 / math.sqrt(N)


def test_direction_test_has_power() -> None:
    """A direction drawn uniformly in the cube (not the sphere) fails the Beta test."""
    cube = np.random.default_rng(1).uniform(-1, 1, (N, 16))
    u = cube / np.linalg.norm(cube, axis=1, keepdims=True)
    assert stats.kstest(u[:, 0] ** 2, stats.beta(0.5, 7.5).cdf).pvalue < 1e-6


def test_radius_direction_correlation_check_has_power() -> None:
    """Power: noise whose radius grows with the first direction coordinate (Gamma radius times
    1 + u_0 / 2, uniform direction) fails the correlation check of ``test_direction_is_uniform``."""
    gen = torch.Generator().manual_seed(2)
    u = uniform_directions(N, 16, gen, torch.device("cpu"))
    radius = gamma_integer_shape(N, 16, gen, torch.device("cpu")) * (1 + u[:, 0] / 2)
    _, corr = _direction_checks((radius[:, None] * u).numpy())
    assert corr > 4 / math.sqrt(N)


def _row_correlation(z: np.ndarray) -> float:
    """|correlation| of the first noise coordinate between consecutive rows."""
    return abs(np.corrcoef(z[:-1, 0], z[1:, 0])[0, 1])


def test_noise_independent_across_rows() -> None:
    """Catches the broadcast-one-noise-vector-per-batch bug (docs/SPEC.md §7.6)."""
    z = _noise(16, 1.0)
    assert _row_correlation(z) < 4 / math.sqrt(N)
    assert not np.allclose(z[0], z[1])


def test_row_independence_check_has_power() -> None:
    """Power: one noise vector shared by each pair of consecutive rows (a partial broadcast) fails
    the correlation check; the same vector for every row fails the allclose check."""
    z = _noise(16, 1.0)
    shared = np.repeat(z[::2], 2, axis=0)
    assert _row_correlation(shared) > 4 / math.sqrt(N)
    broadcast = np.repeat(z[:1], N, axis=0)
    assert np.allclose(broadcast[0], broadcast[1])


def _mean_cosine_checks(mech: mechanisms.Mechanism, m: int, expected: float) -> tuple[bool, bool]:
    """(mean of cos(x, release) within max(5 SE, 0.004) of ``expected``, releases on the sphere),
    for N releases of one seeded random unit x."""
    x = torch.nn.functional.normalize(
        torch.randn(1, m, dtype=torch.float64, generator=torch.Generator().manual_seed(30 + m)), dim=1
    )
    y = mech.sanitize(x.expand(N, m).contiguous(), generator=torch.Generator().manual_seed(3))
    cos = (y @ x.T).squeeze(1).numpy()
    mean_ok = abs(cos.mean() - expected) < max(5 * cos.std() / math.sqrt(N), 0.004)
    return bool(mean_ok), bool(np.allclose(np.linalg.norm(y.numpy(), axis=1), 1.0))


@pytest.mark.parametrize(
    ("m", "eps", "expected"),
    [(16, 8.0, 0.446), (16, 10.0, 0.530), (16, 12.0, 0.599), (768, 10.0, 0.0125), (2, 10.0, 0.984)],
)
def test_reference_mean_cosine(m: int, eps: float, expected: float) -> None:
    """E[cos(x, n(x + Z))] matches docs/SPEC.md §2.2 (MC reference, 3 decimals)."""
    mean_ok, on_sphere = _mean_cosine_checks(mechanisms.create("planar_laplace", epsilon=eps), m, expected)
    assert mean_ok
    assert on_sphere


def _exponential_norm_noise(
    n: int, m: int, scale: float, generator: torch.Generator | None, device: torch.device
) -> torch.Tensor:
    """The "exponential norm" bug: radius ~ Exp(scale) instead of Gamma(m, scale)."""
    radius = gamma_integer_shape(n, 1, generator, device) * scale
    return radius.unsqueeze(1) * uniform_directions(n, m, generator, device)


@pytest.mark.parametrize(
    ("wrong", "m", "eps", "expected"),
    [
        ("epsilon 8", 16, 10.0, 0.530),
        ("epsilon 12", 2, 10.0, 0.984),
        ("exponential norm", 16, 10.0, 0.530),
        ("not normalised", 16, 10.0, 0.530),
    ],
)
def test_mean_cosine_check_has_power(
    wrong: str, m: int, eps: float, expected: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Power: the same mean-cosine check rejects a mechanism run at the wrong epsilon and one with
    the "exponential norm" noise; the sphere check rejects the un-normalised release."""
    if wrong.startswith("epsilon"):
        mech = mechanisms.create("planar_laplace", epsilon=float(wrong.split()[1]))
    elif wrong == "exponential norm":
        monkeypatch.setattr("mechanisms.planar_laplace.gamma_radius_noise", _exponential_norm_noise)
        mech = mechanisms.create("planar_laplace", epsilon=eps)
    else:
        mech = mechanisms.create("planar_laplace", epsilon=eps, normalize_output=False)
    mean_ok, on_sphere = _mean_cosine_checks(mech, m, expected)
    if wrong == "not normalised":
        assert not on_sphere
    else:
        assert not mean_ok


def test_guarantee_and_bad_input() -> None:
    g = mechanisms.create("planar_laplace", epsilon=3.0).guarantee
    assert (g.notion, g.metric, g.diameter) == ("metric", "euclidean", 2.0)
    assert g.as_ldp() == (6.0, 0.0)
    with pytest.raises(ValueError, match="epsilon"):
        mechanisms.create("planar_laplace", epsilon=0)
    with pytest.raises(ValueError, match="NaN"):
        mechanisms.create("planar_laplace", epsilon=1).sanitize(torch.tensor([[float("nan"), 1.0]]))


def test_uniform_directions_helper_on_sphere() -> None:
    d = uniform_directions(1000, 5, torch.Generator().manual_seed(0), torch.device("cpu"))
    assert torch.allclose(d.norm(dim=1), torch.ones(1000, dtype=torch.float64))
