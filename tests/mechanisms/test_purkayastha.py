"""Statistical tests of the Purkayastha sampler (spec §11.1, items 1-4 and 7).

The oracle is independent of the sampler: composite Gauss-Legendre quadrature of
the PurArc density (no table, no interpolation), checked itself against the
closed forms for m = 2 and m = 3. Every distribution test has a power check: a
deliberately wrong sampler must fail the same test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

import mechanisms
from mechanisms.purkayastha import (
    GUIDE_BUCKETS,
    _cell_index,
    purarc_guide,
    purarc_log_density,
    sample_purarc,
    tangent_directions,
)

N_SAMPLES = 20_000
P_MIN = 1e-4  # family-wise threshold of spec §11
_GL_X, _GL_W = np.polynomial.legendre.leggauss(10)


def _integrate(a: np.ndarray, b: np.ndarray, m: int, eps: float, peak: float) -> np.ndarray:
    """Gauss-Legendre integral of exp(logf - peak) over each [a_i, b_i]."""
    mid, half = (a + b) / 2, (b - a) / 2
    t = mid[:, None] + half[:, None] * _GL_X[None, :]
    return half * (np.exp(purarc_log_density(t, m, eps) - peak) @ _GL_W)


def oracle_cdf(theta: np.ndarray, m: int, eps: float) -> np.ndarray:
    """Exact PurArc(m, eps) CDF at ``theta`` by composite quadrature (independent of the table)."""
    mode = math.atan2(m - 2, eps)
    peak = float(purarc_log_density(np.array([mode]), m, eps)[0]) if m > 2 else 0.0
    order = np.argsort(theta)
    ts = theta[order]
    # Fine panels for the normaliser and for [0, first sample].
    panels = np.linspace(0.0, math.pi, 200_001)
    total = _integrate(panels[:-1], panels[1:], m, eps, peak).sum()
    head = np.linspace(0.0, ts[0], 2001)
    first = _integrate(head[:-1], head[1:], m, eps, peak).sum()
    # Each gap between consecutive sorted samples, split into 4 sub-panels.
    edges = np.linspace(ts[:-1], ts[1:], 5)
    gaps = sum(_integrate(edges[i], edges[i + 1], m, eps, peak) for i in range(4))
    cdf_sorted = np.concatenate([[first], first + np.cumsum(gaps)]) / total
    out = np.empty_like(cdf_sorted)
    out[order] = cdf_sorted
    return np.clip(out, 0.0, 1.0)


def test_oracle_matches_closed_forms() -> None:
    """The oracle itself is right: m = 2 (truncated exponential) and m = 3 (spec §1.3)."""
    t = np.linspace(0.01, 3.1, 50)
    eps = 2.5
    cdf2 = -np.expm1(-eps * t) / -np.expm1(-eps * np.pi)
    np.testing.assert_allclose(oracle_cdf(t, 2, eps), cdf2, rtol=1e-9, atol=1e-12)
    cdf3 = (1 - np.exp(-eps * t) * (eps * np.sin(t) + np.cos(t))) / (1 + np.exp(-eps * np.pi))
    np.testing.assert_allclose(oracle_cdf(t, 3, eps), cdf3, rtol=1e-9, atol=1e-12)


def _draw(m: int, eps: float, seed: int = 0, n: int = N_SAMPLES) -> np.ndarray:
    g = torch.Generator().manual_seed(seed)
    return sample_purarc(m, eps, n, generator=g).numpy()


GRID = [(m, e) for m in (2, 3, 4, 16, 32, 128, 768, 1024) for e in (0.01, 1.0, 10.0, 100.0, 1000.0)]


@pytest.mark.parametrize(("m", "eps"), GRID)
def test_theta_ks_and_chi_square(m: int, eps: float) -> None:
    """KS and 50-bin equal-probability chi-square of theta against the exact CDF.

    Catches a wrong exponent, a wrong window, a broken interpolation or an
    underflowing table anywhere in m 2..1024 x eps 0.01..1000.
    """
    theta = _draw(m, eps)
    u = oracle_cdf(theta, m, eps)
    assert stats.kstest(u, "uniform").pvalue > P_MIN
    counts = np.bincount(np.minimum((u * 50).astype(int), 49), minlength=50)
    assert stats.chisquare(counts).pvalue > P_MIN


@pytest.mark.parametrize(
    ("wrong", "m", "eps"),
    [
        ("exponent m-1", 16, 10.0),
        ("gamma proposal, no rejection", 16, 10.0),
        ("exponent m-1", 32, 100.0),
        ("half epsilon", 768, 1000.0),
        ("half epsilon", 1024, 1000.0),
    ],
)
def test_ks_rejects_wrong_samplers(wrong: str, m: int, eps: float) -> None:
    """Power check: the same KS test rejects known-wrong samplers."""
    g = torch.Generator().manual_seed(1)
    if wrong == "exponent m-1":
        theta = sample_purarc(m + 1, eps, N_SAMPLES, generator=g).numpy()
    elif wrong == "half epsilon":
        theta = sample_purarc(m, eps / 2, N_SAMPLES, generator=g).numpy()
    else:
        theta = np.random.default_rng(1).gamma(m - 1, 1 / eps, N_SAMPLES)
        theta = theta[theta < np.pi]
    assert stats.kstest(oracle_cdf(theta, m, eps), "uniform").pvalue < 1e-6


@pytest.mark.parametrize(("m", "eps"), [(3, 0.01), (16, 10.0), (16, 1000.0), (768, 10.0), (1024, 1000.0)])
def test_indexed_search_equals_searchsorted(m: int, eps: float) -> None:
    """The CPU guide-table search returns exactly ``searchsorted(cdf, u, right=True)``,
    on random u and on the hard points: bucket edges, table entries and their neighbours."""
    cdf, first, narrow = purarc_guide(m, eps)
    g = torch.Generator().manual_seed(9)
    edges = torch.arange(GUIDE_BUCKETS, dtype=torch.float64) / GUIDE_BUCKETS
    inner = cdf[(cdf > 0) & (cdf < 1)]
    u = torch.cat([
        torch.rand(200_000, generator=g, dtype=torch.float64),
        edges, torch.nextafter(edges[1:], torch.zeros(1, dtype=torch.float64)),
        inner, torch.nextafter(inner, torch.zeros(1, dtype=torch.float64)),
        torch.nextafter(inner, torch.ones(1, dtype=torch.float64)),
        torch.tensor([0.0, 1.0 - 2.0**-53], dtype=torch.float64),
    ])
    u = u[u < 1]
    expected = torch.searchsorted(cdf, u, right=True)
    assert torch.equal(_cell_index(u, cdf, first, narrow).long(), expected)


def test_float32_release_law() -> None:
    """float32 inputs (Gaussians drawn in float32, arithmetic in float64): theta and
    the tangent direction keep their laws at (16, 10); the direction test has power."""
    m, eps = 16, 10.0
    g = torch.Generator().manual_seed(8)
    x = (3 * torch.randn(1, m, generator=g)).expand(N_SAMPLES, m).contiguous()
    y = mechanisms.create("purkayastha", epsilon=eps).sanitize(x, generator=g)
    assert y.dtype == torch.float32
    mu = torch.nn.functional.normalize(x[:1].double(), dim=1)
    cos = (y.double() @ mu.T).squeeze(1)
    tangent = y.double() - cos[:, None] * mu
    sin = tangent.norm(dim=1)
    theta = torch.atan2(sin, cos).numpy()
    assert stats.kstest(oracle_cdf(theta, m, eps), "uniform").pvalue > P_MIN
    # xi uniform on the unit sphere of mu^perp: (1 + xi . e) / 2 ~ Beta((m-2)/2, (m-2)/2) for a unit e _|_ mu.
    e = torch.randn(m, generator=g, dtype=torch.float64)
    e = e - (e @ mu[0]) * mu[0]
    e = e / e.norm()
    law = stats.beta((m - 2) / 2, (m - 2) / 2).cdf
    assert stats.kstest(((1 + tangent @ e / sin) / 2).numpy(), law).pvalue > P_MIN
    # Power: a direction whose Gaussian has 1.2x the spread along e is refuted.
    r = torch.randn(N_SAMPLES, m, generator=g, dtype=torch.float64)
    r = r + 0.2 * (r @ e)[:, None] * e
    r = r - (r @ mu[0])[:, None] * mu
    assert stats.kstest(((1 + r @ e / r.norm(dim=1)) / 2).numpy(), law).pvalue < 1e-6


# (m, eps, E[theta], sd[theta], E[cos theta]) from spec §1.5 (exact quadrature).
MOMENTS = [
    (2, 10, 0.10000, 0.10000, 0.99010),
    (3, 10, 0.19802, 0.13932, 0.97115),
    (16, 1, 1.50433, 0.25744, 0.06435),
    (16, 10, 0.98327, 0.21486, 0.54204),
    (16, 1000, 0.01500, 0.00387, 0.99988),
    (128, 10, 1.49222, 0.08846, 0.07819),
    (768, 10, 1.55776, 0.03610, 0.01303),
    (1024, 1000, 0.79677, 0.02236, 0.69885),
]


@pytest.mark.parametrize(("m", "eps", "mean", "sd", "mean_cos"), MOMENTS)
def test_moments_match_reference_table(m: int, eps: float, mean: float, sd: float, mean_cos: float) -> None:
    """Mean theta and mean cos(theta) of full releases within 5 standard errors of §1.5."""
    mech = mechanisms.create("purkayastha", epsilon=eps)
    g = torch.Generator().manual_seed(2)
    mu = torch.nn.functional.normalize(torch.randn(1, m, dtype=torch.float64), dim=1)
    y = mech.sanitize(mu.expand(N_SAMPLES, m).contiguous(), generator=g)
    cos = (y @ mu.T).squeeze(1).numpy()
    theta = np.arccos(np.clip(cos, -1, 1))
    assert abs(theta.mean() - mean) < 5 * sd / math.sqrt(N_SAMPLES)
    assert abs(cos.mean() - mean_cos) < 5 * np.std(cos) / math.sqrt(N_SAMPLES) + 1e-5


def test_moment_check_has_power() -> None:
    """A mechanism run at the wrong epsilon fails the moment check at (16, 10)."""
    theta = _draw(16, 8.0)
    assert abs(theta.mean() - 0.98327) > 5 * 0.21486 / math.sqrt(N_SAMPLES)


@pytest.mark.parametrize("m", [2, 3, 16, 384])
def test_geometry(m: int) -> None:
    """Outputs lie on the sphere; xi is a unit vector orthogonal to mu; mu^T Y = cos(theta)."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2000, m, dtype=torch.float64, generator=torch.Generator().manual_seed(4)) * 5
    mu = x / x.norm(dim=1, keepdim=True)
    xi = tangent_directions(mu, generator=g)
    assert torch.allclose(xi.norm(dim=1), torch.ones(2000, dtype=torch.float64), atol=1e-12)
    # One Gram-Schmidt pass leaves xi . mu ~ u |r| / |r_perp| (u = 2^-53): tiny unless r is nearly
    # parallel to mu, which happens in 2-D (|r_perp| / |r| = |sin| ~ 1e-4 over 2000 draws).
    assert float((xi * mu).sum(dim=1).abs().max()) < 1e-9
    y = mechanisms.create("purkayastha", epsilon=3.0).sanitize(x, generator=g)
    assert float((y.norm(dim=1) - 1).abs().max()) < 1e-6
    cos = (y * mu).sum(dim=1)
    tangent = y - cos[:, None] * mu
    # The tangent part has length sin(theta): |Y|^2 = cos^2 + sin^2.
    assert torch.allclose(tangent.norm(dim=1) ** 2 + cos**2, torch.ones(2000, dtype=torch.float64), atol=1e-6)


def test_zero_rows_map_to_public_vector_and_stay_on_sphere() -> None:
    """A zero input row is mapped to e1 (not to a zero vector off the sphere)."""
    x = torch.zeros(5000, 16)
    y = mechanisms.create("purkayastha", epsilon=10.0).sanitize(x, generator=torch.Generator().manual_seed(0))
    assert float((y.norm(dim=1) - 1).abs().max()) < 1e-5
    assert abs(float(y[:, 0].mean()) - 0.54204) < 0.02


@pytest.mark.parametrize("m", [2, 3, 16, 768])
def test_density_ratio_bounded_by_metric(m: int) -> None:
    """log p(Y|mu) - log p(Y|mu') <= eps * d_angle(mu, mu'), with equality at mu' = -mu, Y = mu."""
    eps = 7.0
    mech = mechanisms.create("purkayastha", epsilon=eps)
    gen = torch.Generator().manual_seed(4)
    mu = torch.nn.functional.normalize(torch.randn(3000, m, generator=gen, dtype=torch.float64), dim=1)
    mu2 = torch.nn.functional.normalize(torch.randn(3000, m, generator=gen, dtype=torch.float64), dim=1)
    y = mech.sanitize(mu, generator=gen)
    dist = torch.arccos((mu * mu2).sum(1).clamp(-1, 1))
    gap = mech.log_prob(y, mu) - mech.log_prob(y, mu2)
    assert float((gap - eps * dist).max()) <= 1e-9
    tight = mech.log_prob(mu, mu) - mech.log_prob(mu, -mu)
    assert torch.allclose(tight, torch.full_like(tight, eps * math.pi), atol=1e-6)


def test_log_prob_integrates_to_one_on_s2() -> None:
    """The stated density is normalised (Monte Carlo over uniform points of S^2)."""
    mech = mechanisms.create("purkayastha", epsilon=2.0)
    gen = torch.Generator().manual_seed(5)
    y = torch.nn.functional.normalize(torch.randn(400_000, 3, generator=gen, dtype=torch.float64), dim=1)
    mu = torch.tensor([[0.0, 0.0, 1.0]], dtype=torch.float64).expand_as(y)
    integral = float(mech.log_prob(y, mu).exp().mean()) * 4 * math.pi
    assert abs(integral - 1.0) < 0.01


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf"), "ten"])
def test_invalid_epsilon_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="epsilon"):
        mechanisms.create("purkayastha", epsilon=bad)


def test_bad_inputs_are_refused() -> None:
    mech = mechanisms.create("purkayastha", epsilon=1.0)
    with pytest.raises(ValueError, match="NaN"):
        mech.sanitize(torch.tensor([[1.0, float("nan")]]))
    with pytest.raises(ValueError, match="shape"):
        mech.sanitize(torch.ones(4))
    with pytest.raises(ValueError, match="m >= 2"):
        mech.sanitize(torch.ones(4, 1))


def test_no_gradient_path_and_independent_rows() -> None:
    """Output carries no gradient to the input; identical rows get independent noise."""
    x = torch.randn(1, 16).expand(4000, 16).clone().requires_grad_(True)
    y = mechanisms.create("purkayastha", epsilon=10.0).sanitize(x, generator=torch.Generator().manual_seed(6))
    assert not y.requires_grad
    # Independent rows: the mean pairwise cosine of tangent parts is ~0.
    mu = torch.nn.functional.normalize(x.detach(), dim=1)
    t = torch.nn.functional.normalize(y - (y * mu).sum(1, keepdim=True) * mu, dim=1)
    assert abs(float((t[::2] * t[1::2]).sum(1).mean())) < 0.02


def test_guarantee() -> None:
    g = mechanisms.create("purkayastha", epsilon=2.0).guarantee
    assert (g.notion, g.metric, g.granularity) == ("metric", "angular", "sentence")
    assert g.as_ldp() == pytest.approx((2.0 * math.pi, 0.0))
