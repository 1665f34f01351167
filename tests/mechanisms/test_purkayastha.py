"""Statistical tests of the Purkayastha sampler (docs/SPEC.md §11.1, items 1-4 and 7).

Two oracles:

* ``oracle_cdf`` (KS and chi-square): composite Gauss-Legendre quadrature of
  ``purarc_log_density`` from the sampler module (no table, no interpolation).
  It shares that one-line log density with the sampler, so it is checked by
  code that shares nothing with the sampler: against the closed forms for
  m = 2 and m = 3, and, at every (m, eps) of GRID, its log density against
  ``_indep_log_f`` (written here) and, for m >= 4, its CDF against ``_indep_cdf``
  (scipy ``quad``).
* ``_indep_moments``: E[theta], sd[theta], E[cos theta], sd[cos theta] by scipy
  adaptive quadrature of the independently written law sin^(m-2)(t) e^(-eps t)
  (log space, shifted by its value at the mode atan2(m-2, eps), breakpoints
  around the mode); E[cos theta] also by the reduction formula of docs/SPEC.md §1.3.
  They are checked against the docs/SPEC.md §1.5 table and against sample means of the
  real sampler at every (m, eps) of GRID.

Every distribution test has a power check: a deliberately wrong sampler (or a
wrong density) must fail the same test.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
import torch
from scipy import integrate, stats

import mechanisms
from mechanisms.noise import uniform_directions
from mechanisms.purkayastha import (
    GUIDE_BUCKETS,
    Purkayastha,
    _cell_index,
    purarc_guide,
    purarc_log_density,
    sample_purarc,
    tangent_directions,
)

N_SAMPLES = 20_000
P_MIN = 1e-4  # family-wise threshold of docs/SPEC.md §11
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
    """The oracle itself is right: m = 2 (truncated exponential) and m = 3 (docs/SPEC.md §1.3)."""
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


def _theta_pvalues(theta: np.ndarray, m: int, eps: float) -> tuple[float, float]:
    """(KS p-value, 50-bin equal-probability chi-square p-value) of theta against PurArc(m, eps).

    Bins are equal-probability under the exact law: the probability integral
    transform u = F(theta) is binned into [i/50, (i+1)/50).
    """
    u = oracle_cdf(theta, m, eps)
    counts = np.bincount(np.minimum((u * 50).astype(int), 49), minlength=50)
    return stats.kstest(u, "uniform").pvalue, stats.chisquare(counts).pvalue


@pytest.mark.parametrize(("m", "eps"), GRID)
def test_theta_ks_and_chi_square(m: int, eps: float) -> None:
    """KS and 50-bin equal-probability chi-square of theta against the exact CDF.

    Catches a wrong exponent, a wrong window, a broken interpolation or an
    underflowing table anywhere in m 2..1024 x eps 0.01..1000.
    """
    ks_p, chi_p = _theta_pvalues(_draw(m, eps), m, eps)
    assert ks_p > P_MIN
    assert chi_p > P_MIN


@pytest.mark.parametrize(
    ("wrong", "m", "eps"),
    [
        ("exponent m-1", 16, 10.0),
        ("gamma proposal, no rejection", 16, 10.0),
        ("exponent m-1", 32, 100.0),
        ("half epsilon", 768, 1000.0),
        ("half epsilon", 1024, 1000.0),
        ("1.2 epsilon", 2, 1.0),
        ("exponent m-1", 3, 10.0),
    ],
)
def test_ks_and_chi_square_reject_wrong_samplers(wrong: str, m: int, eps: float) -> None:
    """Power check: the same KS test and the same 50-bin chi-square test (``_theta_pvalues``)
    both reject known-wrong samplers (exponent m-1, a Gamma proposal without its rejection
    step, a wrong epsilon), so neither test passes whatever it is given."""
    g = torch.Generator().manual_seed(1)
    if wrong == "exponent m-1":
        theta = sample_purarc(m + 1, eps, N_SAMPLES, generator=g).numpy()
    elif wrong == "half epsilon":
        theta = sample_purarc(m, eps / 2, N_SAMPLES, generator=g).numpy()
    elif wrong == "1.2 epsilon":
        theta = sample_purarc(m, 1.2 * eps, N_SAMPLES, generator=g).numpy()
    else:
        theta = np.random.default_rng(1).gamma(m - 1, 1 / eps, N_SAMPLES)
        theta = theta[theta < np.pi]
    ks_p, chi_p = _theta_pvalues(theta, m, eps)
    assert ks_p < 1e-6
    assert chi_p < 1e-6


# --------------------------------------------------------------------------- independent oracle
# Nothing below imports from mechanisms.purkayastha: the law is written again here
# (numpy), integrated by scipy's adaptive quadrature, and cross-checked against the
# reduction formula of docs/SPEC.md §1.3 and the table of docs/SPEC.md §1.5.
_QUAD = {"limit": 1000, "epsabs": 0.0, "epsrel": 1e-10}


def _indep_mode_sd(m: int, eps: float) -> tuple[float, float]:
    """Mode atan2(m-2, eps) of PurArc(m, eps) and its Laplace-approximation sd (1/eps for m = 2)."""
    mode = math.atan2(m - 2, eps)
    return mode, (math.sin(mode) / math.sqrt(m - 2) if m > 2 else 1.0 / eps)


def _indep_log_f(t: np.ndarray, m: int, eps: float) -> np.ndarray:
    """log[sin^(m-2)(t) exp(-eps t)] minus its value at the mode: <= 0, no underflow at eps = 1000."""
    mode, _ = _indep_mode_sd(m, eps)
    t = np.asarray(t, dtype=np.float64)
    if m == 2:
        return -eps * (t - mode)
    with np.errstate(divide="ignore"):
        return (m - 2) * (np.log(np.sin(t)) - math.log(math.sin(mode))) - eps * (t - mode)


def _indep_integral(g, a: float, b: float, m: int, eps: float) -> float:
    """int_a^b g(t) exp(_indep_log_f(t)) dt (scipy quad, breakpoints at the mode and mode +- 1, 3, 10, 30 sd)."""
    mode, sd = _indep_mode_sd(m, eps)
    points = [p for p in (mode + k * sd for k in (-30, -10, -3, -1, 0, 1, 3, 10, 30)) if a < p < b]
    value, _ = integrate.quad(
        lambda t: g(t) * math.exp(float(_indep_log_f(t, m, eps))), a, b, points=points or None, **_QUAD
    )
    return value


@functools.cache
def _indep_moments(m: int, eps: float) -> dict[str, float]:
    """mode, E[theta], sd[theta], E[cos theta], sd[cos theta] of PurArc(m, eps) by independent quadrature."""
    z = _indep_integral(lambda t: 1.0, 0.0, math.pi, m, eps)
    mean = _indep_integral(lambda t: t, 0.0, math.pi, m, eps) / z
    var = _indep_integral(lambda t: (t - mean) ** 2, 0.0, math.pi, m, eps) / z
    mean_cos = _indep_integral(math.cos, 0.0, math.pi, m, eps) / z
    var_cos = _indep_integral(lambda t: (math.cos(t) - mean_cos) ** 2, 0.0, math.pi, m, eps) / z
    return {
        "mode": _indep_mode_sd(m, eps)[0],
        "mean": mean,
        "sd": math.sqrt(var),
        "mean_cos": mean_cos,
        "sd_cos": math.sqrt(var_cos),
    }


def _reduction_log_i(n: int, eps: float) -> float:
    """log I_n(pi), I_n(pi) = int_0^pi e^(-eps t) sin^n t dt, by the reduction formula of docs/SPEC.md §1.3
    (its boundary term vanishes at pi): I_n(pi) = n (n-1) / (n^2 + eps^2) I_(n-2)(pi) for n >= 2,
    I_0 = (1 - e^(-eps pi)) / eps, I_1 = (1 + e^(-eps pi)) / (1 + eps^2)."""
    if n % 2 == 0:
        acc, start = math.log(-math.expm1(-eps * math.pi)) - math.log(eps), 2
    else:
        acc, start = math.log1p(math.exp(-eps * math.pi)) - math.log1p(eps * eps), 3
    for j in range(start, n + 1, 2):
        acc += math.log(j * (j - 1)) - math.log(j * j + eps * eps)
    return acc


def _reduction_mean_cos(m: int, eps: float) -> float:
    """E[cos theta] = eps I_(m-1)(pi) / ((m-1) I_(m-2)(pi)) (integration by parts; no quadrature)."""
    return eps / (m - 1) * math.exp(_reduction_log_i(m - 1, eps) - _reduction_log_i(m - 2, eps))


def _indep_cdf(theta: np.ndarray, m: int, eps: float) -> np.ndarray:
    """PurArc(m, eps) CDF at each theta by independent quadrature."""
    z = _indep_integral(lambda t: 1.0, 0.0, math.pi, m, eps)
    return np.array([_indep_integral(lambda t: 1.0, 0.0, float(t), m, eps) / z for t in theta])


def _log_density_gap(log_f: np.ndarray, t: np.ndarray, m: int, eps: float) -> float:
    """Spread of ``log_f - _indep_log_f`` over ``t``, relative to 1 + max |log_f|: ~1e-15 when
    ``log_f`` is the independent log density plus a constant."""
    diff = log_f - _indep_log_f(t, m, eps)
    return float((diff.max() - diff.min()) / (1.0 + np.abs(log_f).max()))


def _sample_moment_z(theta: np.ndarray, m: int, eps: float) -> tuple[float, float]:
    """(mean theta - E[theta], mean cos theta - E[cos theta]) in standard errors of the independent law."""
    ref, n = _indep_moments(m, eps), theta.size
    z_theta = (theta.mean() - ref["mean"]) / (ref["sd"] / math.sqrt(n))
    z_cos = (np.cos(theta).mean() - ref["mean_cos"]) / (ref["sd_cos"] / math.sqrt(n))
    return float(z_theta), float(z_cos)


# docs/SPEC.md §1.5 table: (m, eps, theta*, E[theta], sd[theta], E[cos theta]), 5 decimals.
SPEC_TABLE = [
    (2, 10, 0.0, 0.10000, 0.10000, 0.99010),
    (3, 10, 0.09967, 0.19802, 0.13932, 0.97115),
    (16, 1, 1.49949, 1.50433, 0.25744, 0.06435),
    (16, 8, 1.05165, 1.08132, 0.22781, 0.45853),
    (16, 10, 0.95055, 0.98327, 0.21486, 0.54204),
    (16, 12, 0.86217, 0.89650, 0.20167, 0.61212),
    (16, 1000, 0.01400, 0.01500, 0.00387, 0.99988),
    (32, 10, 1.24905, 1.25885, 0.17092, 0.30255),
    (128, 10, 1.49160, 1.49222, 0.08846, 0.07819),
    (768, 10, 1.55774, 1.55776, 0.03610, 0.01303),
    (768, 0.01, 1.57078, 1.57078, 0.03611, 0.00001),
    (768, 1000, 0.65366, 0.65429, 0.02198, 0.79329),
    (1024, 1000, 0.79628, 0.79677, 0.02236, 0.69885),
]
TABLE_TOL = 1e-5  # the table's rounding (5e-6) plus slack for a last digit rounded either way


def _table_misses(row: tuple, moments: dict[str, float]) -> float:
    """Largest |table - moments| over theta*, E[theta], sd[theta], E[cos theta] for one docs/SPEC.md §1.5 row."""
    _, _, mode, mean, sd, mean_cos = row
    return max(
        abs(mode - moments["mode"]),
        abs(mean - moments["mean"]),
        abs(sd - moments["sd"]),
        abs(mean_cos - moments["mean_cos"]),
    )


@pytest.mark.parametrize("row", SPEC_TABLE, ids=lambda r: f"{r[0]}-{r[1]}")
def test_independent_moments_match_spec_table(row: tuple) -> None:
    """The independent quadrature reproduces every row of the docs/SPEC.md §1.5 table (theta*, E[theta],
    sd[theta], E[cos theta]) to its 5 decimals, and E[cos theta] equals the reduction formula.
    Catches a wrong independent oracle (so the sampler checks below compare with the right law)."""
    m, eps = row[0], float(row[1])
    moments = _indep_moments(m, eps)
    assert _table_misses(row, moments) < TABLE_TOL, moments
    assert abs(moments["mean_cos"] - _reduction_mean_cos(m, eps)) < 1e-10


def test_moments_rows_are_spec_table_rows() -> None:
    """The MOMENTS used on full releases are rows of the (independently checked) docs/SPEC.md §1.5 table."""
    table = {(r[0], r[1]): (r[3], r[4], r[5]) for r in SPEC_TABLE}
    for m, eps, mean, sd, mean_cos in MOMENTS:
        assert table[(m, eps)] == (mean, sd, mean_cos)


@pytest.mark.parametrize(("m", "eps"), GRID)
def test_sampler_moments_match_independent_quadrature(m: int, eps: float) -> None:
    """At every (m, eps) of GRID, mean theta and mean cos(theta) of 20000 draws of the real
    sampler lie within 5 standard errors of the independent quadrature (which shares no code
    with the sampler), and the quadrature's E[cos theta] equals the reduction formula.
    Catches a wrong exponent, epsilon, window or table anywhere on the grid, even if
    ``purarc_log_density`` (shared by the KS oracle) were wrong."""
    assert abs(_indep_moments(m, eps)["mean_cos"] - _reduction_mean_cos(m, eps)) < 1e-10
    theta = sample_purarc(m, eps, N_SAMPLES, generator=torch.Generator().manual_seed(100 + GRID.index((m, eps))))
    z_theta, z_cos = _sample_moment_z(theta.numpy(), m, eps)
    assert abs(z_theta) < 5
    assert abs(z_cos) < 5


@pytest.mark.parametrize(("m", "eps"), GRID)
def test_ks_oracle_matches_independent_code(m: int, eps: float) -> None:
    """The KS oracle is validated by code that shares nothing with the sampler: on 2001 angles
    ``purarc_log_density`` equals the independent log density up to an additive constant, and
    (m >= 4; m = 2, 3 have closed forms above) ``oracle_cdf`` equals the independent quadrature
    CDF to 1e-9 at mean + (-2, -1, 0, 1, 2.5) sd. Catches a wrong exponent or epsilon in the
    log density the oracle shares with the sampler, and a wrong oracle quadrature."""
    t = np.linspace(0.0, math.pi, 2003)[1:-1]
    assert _log_density_gap(purarc_log_density(t, m, eps), t, m, eps) < 1e-12
    if m >= 4:
        ref = _indep_moments(m, eps)
        at = np.clip(ref["mean"] + ref["sd"] * np.array([-2.0, -1.0, 0.0, 1.0, 2.5]), 1e-9, math.pi - 1e-9)
        assert np.abs(oracle_cdf(at, m, eps) - _indep_cdf(at, m, eps)).max() < 1e-9


@pytest.mark.parametrize(
    ("m", "eps", "draw_m", "draw_eps"),
    [(16, 10.0, 16, 8.0), (1024, 1000.0, 1024, 900.0), (2, 1.0, 2, 1.2), (128, 100.0, 129, 100.0)],
)
def test_independent_sampler_moments_have_power(m: int, eps: float, draw_m: int, draw_eps: float) -> None:
    """Power: draws of a wrong sampler (wrong epsilon, exponent m-1) fail both moment checks of
    ``test_sampler_moments_match_independent_quadrature`` (same helper, same 5 SE)."""
    theta = sample_purarc(draw_m, draw_eps, N_SAMPLES, generator=torch.Generator().manual_seed(11))
    z_theta, z_cos = _sample_moment_z(theta.numpy(), m, eps)
    assert abs(z_theta) > 5
    assert abs(z_cos) > 5


@pytest.mark.parametrize(("m", "eps"), [(4, 1.0), (16, 10.0), (768, 0.01), (1024, 1000.0)])
def test_independent_oracle_checks_have_power(m: int, eps: float) -> None:
    """Power: the log-density comparison rejects the log density of exponent m-1 and of 1.01 eps,
    and the CDF comparison rejects ``oracle_cdf`` at 1.01 eps (same helpers, same tolerances)."""
    t = np.linspace(0.0, math.pi, 2003)[1:-1]
    assert _log_density_gap(purarc_log_density(t, m + 1, eps), t, m, eps) > 1e-12
    assert _log_density_gap(purarc_log_density(t, m, 1.01 * eps), t, m, eps) > 1e-12
    ref = _indep_moments(m, eps)
    at = np.clip(ref["mean"] + ref["sd"] * np.array([-2.0, -1.0, 0.0, 1.0, 2.5]), 1e-9, math.pi - 1e-9)
    assert np.abs(oracle_cdf(at, m, 1.01 * eps) - _indep_cdf(at, m, eps)).max() > 1e-9


@pytest.mark.parametrize("row", SPEC_TABLE, ids=lambda r: f"{r[0]}-{r[1]}")
def test_spec_table_check_has_power(row: tuple) -> None:
    """Power: the moments of a wrong law (exponent m-1) miss every docs/SPEC.md §1.5 row by more than the tolerance."""
    assert _table_misses(row, _indep_moments(row[0] + 1, float(row[1]))) > TABLE_TOL


@pytest.mark.parametrize(("m", "eps"), [(3, 0.01), (16, 10.0), (16, 1000.0), (768, 10.0), (1024, 1000.0)])
def test_indexed_search_equals_searchsorted(m: int, eps: float) -> None:
    """The CPU guide-table search returns exactly ``searchsorted(cdf, u, right=True)``,
    on random u and on the hard points: bucket edges, table entries and their neighbours."""
    cdf, first, narrow = purarc_guide(m, eps)
    g = torch.Generator().manual_seed(9)
    edges = torch.arange(GUIDE_BUCKETS, dtype=torch.float64) / GUIDE_BUCKETS
    inner = cdf[(cdf > 0) & (cdf < 1)]
    u = torch.cat(
        [
            torch.rand(200_000, generator=g, dtype=torch.float64),
            edges,
            torch.nextafter(edges[1:], torch.zeros(1, dtype=torch.float64)),
            inner,
            torch.nextafter(inner, torch.zeros(1, dtype=torch.float64)),
            torch.nextafter(inner, torch.ones(1, dtype=torch.float64)),
            torch.tensor([0.0, 1.0 - 2.0**-53], dtype=torch.float64),
        ]
    )
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


# (m, eps, E[theta], sd[theta], E[cos theta]) from docs/SPEC.md §1.5 (exact quadrature).
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


def _release_moments_ok(
    mech: mechanisms.Mechanism, m: int, mean: float, sd: float, mean_cos: float
) -> tuple[bool, bool]:
    """(mean theta within 5 sd/sqrt(N) of ``mean``, mean cos theta within 5 SE + 1e-5 of ``mean_cos``)
    for N full releases of one seeded random unit input (float64)."""
    g = torch.Generator().manual_seed(2)
    mu = torch.nn.functional.normalize(
        torch.randn(1, m, dtype=torch.float64, generator=torch.Generator().manual_seed(20 + m)), dim=1
    )
    y = mech.sanitize(mu.expand(N_SAMPLES, m).contiguous(), generator=g)
    cos = (y @ mu.T).squeeze(1).numpy()
    theta = np.arccos(np.clip(cos, -1, 1))
    theta_ok = abs(theta.mean() - mean) < 5 * sd / math.sqrt(N_SAMPLES)
    cos_ok = abs(cos.mean() - mean_cos) < 5 * np.std(cos) / math.sqrt(N_SAMPLES) + 1e-5
    return bool(theta_ok), bool(cos_ok)


@pytest.mark.parametrize(("m", "eps", "mean", "sd", "mean_cos"), MOMENTS)
def test_moments_match_reference_table(m: int, eps: float, mean: float, sd: float, mean_cos: float) -> None:
    """Mean theta and mean cos(theta) of full releases within 5 standard errors of docs/SPEC.md §1.5.
    Catches a wrong angle law and a wrong assembly of the release (tangent part, normalisation)."""
    theta_ok, cos_ok = _release_moments_ok(mechanisms.create("purkayastha", epsilon=eps), m, mean, sd, mean_cos)
    assert theta_ok
    assert cos_ok


def test_moment_check_has_power() -> None:
    """A mechanism run at the wrong epsilon fails the moment check at (16, 10)."""
    theta = _draw(16, 8.0)
    assert abs(theta.mean() - 0.98327) > 5 * 0.21486 / math.sqrt(N_SAMPLES)


@pytest.mark.parametrize(("wrong_eps", "row"), [(8.0, 3), (12.0, 0), (700.0, 4)])
def test_release_moment_checks_have_power(wrong_eps: float, row: int) -> None:
    """Power: full releases of a mechanism run at a wrong epsilon fail both the mean-theta
    and the mean-cos check of ``test_moments_match_reference_table`` (same helper) at
    (16, 10), (2, 10) and (16, 1000)."""
    m, eps, mean, sd, mean_cos = MOMENTS[row]
    assert wrong_eps != eps
    theta_ok, cos_ok = _release_moments_ok(Purkayastha(wrong_eps), m, mean, sd, mean_cos)
    assert not theta_ok
    assert not cos_ok


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


def _zero_row_checks(y: torch.Tensor) -> tuple[bool, bool]:
    """(every release on the sphere, mean first coordinate = E[cos theta] at (16, 10) within 0.02,
    i.e. the releases are centred on e1)."""
    return (float((y.norm(dim=1) - 1).abs().max()) < 1e-5, abs(float(y[:, 0].mean()) - 0.54204) < 0.02)


def test_zero_rows_map_to_public_vector_and_stay_on_sphere() -> None:
    """A zero input row is mapped to e1 (not to a zero vector off the sphere)."""
    x = torch.zeros(5000, 16)
    y = mechanisms.create("purkayastha", epsilon=10.0).sanitize(x, generator=torch.Generator().manual_seed(0))
    on_sphere, centred_on_e1 = _zero_row_checks(y)
    assert on_sphere
    assert centred_on_e1


def test_zero_row_checks_have_power() -> None:
    """Power: releases of a mechanism that maps zero rows to e2 instead of e1 fail the centring
    check, and the F.normalize bug of docs/SPEC.md §1.2 (mu = 0, release sin(theta) xi off the sphere)
    fails the sphere check."""
    gen = torch.Generator().manual_seed(0)
    e2 = torch.zeros(5000, 16)
    e2[:, 1] = 1.0
    y = mechanisms.create("purkayastha", epsilon=10.0).sanitize(e2, generator=gen)
    assert not _zero_row_checks(y)[1]
    theta = sample_purarc(16, 10.0, 5000, generator=gen)
    off = torch.sin(theta)[:, None] * uniform_directions(5000, 16, gen, torch.device("cpu"))
    assert not _zero_row_checks(off)[0]


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


def test_density_ratio_check_has_power() -> None:
    """Power: the density of a mechanism at 2 eps (half the noise) breaks the same bound eps * d."""
    eps, m = 7.0, 16
    wrong = Purkayastha(2 * eps)
    gen = torch.Generator().manual_seed(4)
    mu = torch.nn.functional.normalize(torch.randn(3000, m, generator=gen, dtype=torch.float64), dim=1)
    mu2 = torch.nn.functional.normalize(torch.randn(3000, m, generator=gen, dtype=torch.float64), dim=1)
    y = wrong.sanitize(mu, generator=gen)
    dist = torch.arccos((mu * mu2).sum(1).clamp(-1, 1))
    assert float((wrong.log_prob(y, mu) - wrong.log_prob(y, mu2) - eps * dist).max()) > 1e-9


def _s2_integral(log_density) -> float:
    """Monte Carlo integral over S^2 (400000 seeded uniform points) of exp(log_density(y, mu)), mu = e3."""
    gen = torch.Generator().manual_seed(5)
    y = torch.nn.functional.normalize(torch.randn(400_000, 3, generator=gen, dtype=torch.float64), dim=1)
    mu = torch.tensor([[0.0, 0.0, 1.0]], dtype=torch.float64).expand_as(y)
    return float(log_density(y, mu).exp().mean()) * 4 * math.pi


def test_log_prob_integrates_to_one_on_s2() -> None:
    """The stated density is normalised (Monte Carlo over uniform points of S^2)."""
    mech = mechanisms.create("purkayastha", epsilon=2.0)
    assert abs(_s2_integral(mech.log_prob) - 1.0) < 0.01


def test_normalisation_check_has_power() -> None:
    """Power: a density with the normaliser of 1.2 eps, or with the area of S^{m-1} in place of
    S^{m-2}, fails the same check (integral 1.35 and 0.5)."""
    eps = 2.0
    mech, other = Purkayastha(eps), Purkayastha(1.2 * eps)

    def wrong_normaliser(y: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
        return other.log_prob(y, mu) + 0.2 * eps * torch.arccos((y * mu).sum(1).clamp(-1, 1))

    def wrong_area(y: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:  # 4 pi (S^2) instead of 2 pi (S^1)
        return mech.log_prob(y, mu) - math.log(2.0)

    assert abs(_s2_integral(wrong_normaliser) - 1.0) > 0.01
    assert abs(_s2_integral(wrong_area) - 1.0) > 0.01


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


def _mean_pair_tangent_cosine(y: torch.Tensor, mu: torch.Tensor) -> float:
    """Mean cosine between the tangent parts of rows 2i and 2i+1 (~0 for independent rows)."""
    t = torch.nn.functional.normalize(y - (y * mu).sum(1, keepdim=True) * mu, dim=1)
    return float((t[::2] * t[1::2]).sum(1).mean())


def test_no_gradient_path_and_independent_rows() -> None:
    """Output carries no gradient to the input; identical rows get independent noise."""
    x = torch.randn(1, 16, generator=torch.Generator().manual_seed(16)).expand(4000, 16).clone().requires_grad_(True)
    y = mechanisms.create("purkayastha", epsilon=10.0).sanitize(x, generator=torch.Generator().manual_seed(6))
    assert not y.requires_grad
    # Independent rows: the mean pairwise cosine of tangent parts is ~0.
    mu = torch.nn.functional.normalize(x.detach(), dim=1)
    assert abs(_mean_pair_tangent_cosine(y, mu)) < 0.02


def test_independent_rows_check_has_power() -> None:
    """Power: one tangent direction broadcast to the whole batch (the bug of docs/SPEC.md §7.6), with
    independent angles, fails the same check."""
    gen = torch.Generator().manual_seed(6)
    mu = torch.nn.functional.normalize(torch.randn(1, 16, generator=gen, dtype=torch.float64), dim=1).expand(4000, 16)
    theta = sample_purarc(16, 10.0, 4000, generator=gen)[:, None]
    xi = tangent_directions(mu[:1].contiguous(), generator=gen).expand(4000, 16)
    y = torch.cos(theta) * mu + torch.sin(theta) * xi
    assert abs(_mean_pair_tangent_cosine(y, mu)) > 0.02


def test_guarantee() -> None:
    g = mechanisms.create("purkayastha", epsilon=2.0).guarantee
    assert (g.notion, g.metric, g.granularity) == ("metric", "angular", "sentence")
    assert g.as_ldp() == pytest.approx((2.0 * math.pi, 0.0))
