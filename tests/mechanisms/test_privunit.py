"""Statistical tests of PrivUnit2 (``mechanisms/privunit.py``; docs/SPEC.md §16.1-16.4).

The oracle is written again here from the definitions, without the module's
formulas: p = e^eps0 / (1 + e^eps0), q = 1 / (1 + e^eps1), gamma the (1 - q)
quantile of T = <V, u> from ``scipy.stats.beta.ppf`` ((T + 1) / 2 ~
Beta((d-1)/2, (d-1)/2)), the law of T as the mixture p (T | T >= gamma) +
(1 - p) (T | T < gamma) of truncated Beta laws, and m = E<V, u> by adaptive
quadrature of t times the density of T (not the closed form of A). Every
distribution test has a power check: a deliberately wrong sampler must fail it
at the same sample size.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import integrate, special, stats

import mechanisms
from mechanisms import PrivUnit
from mechanisms.audit import audit_mechanism
from mechanisms.guarantee import Guarantee
from mechanisms.privunit import optimal_split, privunit_parameters

N = 20_000
P_MIN = 1e-4  # family-wise threshold of docs/SPEC.md §11
P_POWER = 1e-6  # a wrong sampler must be rejected this clearly


# --------------------------------------------------------------------------- independent oracle
def _oracle(d: int, eps: float, eps0: float) -> dict[str, float]:
    """p, q, gamma of PrivUnit2 from the definitions (scipy.stats.beta, not the module).

    gamma is the (1 - q) quantile of T, computed as 1 - 2 (the q quantile of the Beta law) by its
    symmetry, so that q ~ 1e-20 does not round 1 - q to 1.
    """
    eps1 = eps - eps0
    a = (d - 1) / 2
    q = 1.0 / (1.0 + math.exp(eps1))
    return {"p": math.exp(eps0) / (1 + math.exp(eps0)), "q": q, "gamma": 1 - 2 * stats.beta.ppf(q, a, a)}


def _oracle_m(d: int, eps: float, eps0: float) -> float:
    """E<V, u> = p E[T | T >= gamma] + (1 - p) E[T | T < gamma], with E[T 1{T >= gamma}] by quadrature of
    t f(t), f(t) = (1 - t)^c (1 + t)^c / B(1/2, (d-1)/2), c = (d-3)/2 (QUADPACK's algebraic weight takes
    the (1 - t)^c factor, singular at t = 1 for d = 2, exactly)."""
    o = _oracle(d, eps, eps0)
    c = (d - 3) / 2
    norm = special.beta(0.5, (d - 1) / 2)
    cap, _ = integrate.quad(
        lambda t: t * (1 + t) ** c / norm, o["gamma"], 1.0, weight="alg", wvar=(0, c), epsabs=0, epsrel=1e-12
    )
    # E[T] = 0, so E[T 1{T < gamma}] = -E[T 1{T >= gamma}].
    return o["p"] * cap / o["q"] - (1 - o["p"]) * cap / (1 - o["q"])


def _mixture_cdf(t: np.ndarray, d: int, p: float, q: float) -> np.ndarray:
    """Exact CDF of T under PrivUnit2: p F(t | cap) + (1 - p) F(t | complement), F the Beta CDF of (t + 1) / 2."""
    a = (d - 1) / 2
    f = stats.beta.cdf((np.asarray(t) + 1) / 2, a, a)
    return p * np.clip(f - (1 - q), 0, None) / q + (1 - p) * np.minimum(f, 1 - q) / (1 - q)


def _unit_rows(n: int, d: int, seed: int) -> torch.Tensor:
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return x / x.norm(dim=1, keepdim=True)


# --------------------------------------------------------------------------- (a) parameters
CASES = [(0.5, 2), (2.0, 2), (1.0, 3), (2.0, 8), (4.0, 16), (8.0, 64), (1.0, 768), (16.0, 768)]


@pytest.mark.parametrize(("eps", "d"), CASES)
def test_parameters_match_independent_closed_forms(eps: float, d: int) -> None:
    """eps0 + eps1 = epsilon; log(p/(1-p)) + log((1-q)/q) = epsilon to 1e-9 (the exact privacy loss); p, q
    and gamma equal the oracle's (gamma from scipy.stats.beta.ppf, >= 0); m equals E<V, u> by quadrature.
    Catches a wrong Beta parameter, a cap on the wrong side, a mis-split epsilon or a wrong closed form of A."""
    mech = PrivUnit(eps, input_dim=d)
    par = mech.parameters
    assert 0 < mech.eps0 < eps and mech.eps0 + mech.eps1 == pytest.approx(eps, abs=1e-12)
    loss = math.log(mech.p / (1 - mech.p)) + math.log((1 - mech.q) / mech.q)
    assert loss == pytest.approx(eps, abs=1e-9)
    o = _oracle(d, eps, mech.eps0)
    assert mech.p == pytest.approx(o["p"], rel=1e-12)
    assert mech.q == pytest.approx(o["q"], rel=1e-12)
    assert par.log_q == pytest.approx(math.log(o["q"]), rel=1e-12)
    assert mech.gamma >= 0.0
    assert mech.gamma == pytest.approx(o["gamma"], abs=1e-10)
    assert mech.m == pytest.approx(_oracle_m(d, eps, mech.eps0), rel=1e-9)
    assert mech.guarantee == Guarantee(notion="pure", epsilon=eps, granularity="sentence")


@pytest.mark.parametrize(("eps", "d"), [(0.5, 2), (2.0, 8), (8.0, 64), (16.0, 768)])
def test_optimal_split_maximises_m(eps: float, d: int) -> None:
    """The default eps0 maximises the oracle's m over 200 other splits of epsilon, and satisfies the
    first-order condition m = gamma (docs/SPEC.md §16.3). Catches a search that stops at a grid point or
    maximises the wrong function (e.g. p alone)."""
    best = optimal_split(d, eps)
    m_best = _oracle_m(d, eps, best)
    for e0 in np.linspace(eps / 400, eps * (1 - 1 / 400), 200):
        assert _oracle_m(d, eps, float(e0)) <= m_best * (1 + 1e-10)
    par = privunit_parameters(d, eps, best)
    assert par.m == pytest.approx(par.gamma, rel=1e-6)
    # Power: a split off the optimum violates the condition.
    off = privunit_parameters(d, eps, 0.5 * best)
    assert abs(off.m - off.gamma) > 1e-3 * off.m


def test_explicit_epsilon0_is_used() -> None:
    """epsilon0 overrides the search: p = e^eps0 / (1 + e^eps0), q = 1 / (1 + e^(eps - eps0))."""
    mech = PrivUnit(3.0, input_dim=5, epsilon0=0.5)
    o = _oracle(5, 3.0, 0.5)
    assert (mech.eps0, mech.eps1) == (0.5, 2.5)
    assert mech.p == pytest.approx(o["p"], rel=1e-12) and mech.gamma == pytest.approx(o["gamma"], abs=1e-12)


# --------------------------------------------------------------------------- (b) the law of T
def _t_of_release(mech: PrivUnit, d: int, seed: int, n: int = N) -> np.ndarray:
    """T_i = <V_i, u_i> for releases of n different random unit inputs u_i."""
    u = _unit_rows(n, d, seed)
    v = mech.sanitize(u, generator=torch.Generator().manual_seed(seed + 1))
    return (v * u).sum(dim=1).numpy()


def _law_pvalues(t: np.ndarray, d: int, p: float, q: float, gamma: float) -> tuple[float, float]:
    """(KS p-value of t against the exact mixture CDF, exact binomial p-value of #{t >= gamma} against p)."""
    ks = stats.kstest(t, lambda s: _mixture_cdf(s, d, p, q)).pvalue
    binom = stats.binomtest(int((t >= gamma).sum()), t.size, p).pvalue
    return ks, binom


LAW_CASES = [(2.0, 2), (1.0, 3), (2.0, 8), (4.0, 16), (0.5, 32)]


@pytest.mark.parametrize(("eps", "d"), LAW_CASES)
def test_inner_product_law(eps: float, d: int) -> None:
    """T = <V, u> of real releases (one random unit input per row, d = 2 the circle) has the exact mixture
    law (KS) and falls in the cap with probability p (binomial). Catches a wrong gamma, p or Beta parameter,
    a cap sampled on the wrong side, or rows mixed up between inputs."""
    mech = PrivUnit(eps, input_dim=d)
    o = _oracle(d, eps, mech.eps0)
    ks, binom = _law_pvalues(_t_of_release(mech, d, seed=d), d, o["p"], o["q"], o["gamma"])
    assert ks > P_MIN and binom > P_MIN


@pytest.mark.parametrize(("eps", "d"), [(0.01, 768), (50.0, 768), (30.0, 2), (2.0, 1024)])
def test_inner_product_law_extreme(eps: float, d: int) -> None:
    """The same law from ``sample_inner_products`` (T alone, no d-dimensional release) at large d and
    extreme epsilon, where q is ~1e-20 (eps 50, d = 768: inversion of U q keeps its precision) or 1/2.
    The KS statistic is computed on the Beta scale (1 - T) / 2, which keeps the cap's digits."""
    mech = PrivUnit(eps, input_dim=d)
    o = _oracle(d, eps, mech.eps0)
    t, sin = mech.sample_inner_products(N, torch.Generator().manual_seed(3))
    assert torch.allclose(t.square() + sin.square(), torch.ones_like(t), atol=1e-12)
    a = (d - 1) / 2
    s = (1 - t.numpy()) / 2  # ~ the upper tail of the Beta law, exact near T = 1
    p, q = o["p"], o["q"]

    def cdf_of_s(x: np.ndarray) -> np.ndarray:
        # P(s <= x) = P(T >= 1 - 2x) = p min(I_x, q) / q + (1 - p) max(I_x - q, 0) / (1 - q), I_x = P(s_unif <= x).
        i = stats.beta.cdf(x, a, a)
        return p * np.minimum(i, q) / q + (1 - p) * np.clip(i - q, 0, None) / (1 - q)

    assert stats.kstest(s, cdf_of_s).pvalue > P_MIN
    assert stats.binomtest(int((t.numpy() >= o["gamma"]).sum()), N, p).pvalue > P_MIN


@pytest.mark.parametrize("wrong", ["eps1 10% low", "eps1 10% high", "eps0 10% high"])
@pytest.mark.parametrize(("eps", "d"), [(2.0, 8), (2.0, 2)])
def test_inner_product_law_tests_have_power(wrong: str, eps: float, d: int) -> None:
    """Power: a sampler whose cap (eps1) or cap probability (eps0) is 10% off is rejected at the same
    sample size: the KS test rejects all three (p < 1e-6; seed-fixed p-values 1e-76 to 3e-9), and the
    binomial test, which measures p, rejects the wrong eps0 (4e-11 at d = 8)."""
    true = PrivUnit(eps, input_dim=d)
    e0, e1 = true.eps0, true.eps1
    e0w, e1w = {"eps1 10% low": (e0, 0.9 * e1), "eps1 10% high": (e0, 1.1 * e1), "eps0 10% high": (1.1 * e0, e1)}[wrong]
    bad = PrivUnit(e0w + e1w, input_dim=d, epsilon0=e0w)
    o = _oracle(d, eps, e0)
    ks, binom = _law_pvalues(_t_of_release(bad, d, seed=d), d, o["p"], o["q"], o["gamma"])
    assert ks < P_POWER
    if wrong.startswith("eps0"):
        assert binom < P_POWER


# --------------------------------------------------------------------------- (c) the tangent direction
def _tangent_component(v: torch.Tensor, u: torch.Tensor, e: torch.Tensor) -> np.ndarray:
    """<V, e> / sqrt(1 - <V, u>^2) for unit rows u and unit e orthogonal to them."""
    t = (v * u).sum(dim=1)
    return ((v * e).sum(dim=1) / torch.sqrt((1 - t * t).clamp_min(1e-300))).numpy()


def _biased_release(mech: PrivUnit, u: torch.Tensor, e: torch.Tensor, bias: float, gen: torch.Generator):
    """The right T with a tangent direction tilted towards e: normalise(proj_u(g + bias e)), g Gaussian."""
    t, sin = mech.sample_inner_products(u.shape[0], gen)
    r = torch.randn(u.shape, generator=gen, dtype=torch.float64) + bias * e
    r = r - (r * u).sum(dim=1, keepdim=True) * u
    w = r / r.norm(dim=1, keepdim=True)
    return t.unsqueeze(1) * u + sin.unsqueeze(1) * w


def _tangent_setup(d: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs u_i = (cos a_i) e1 + (sin a_i) e2 (random angles), and e = e3, orthogonal to every u_i."""
    a = torch.rand(N, generator=torch.Generator().manual_seed(5), dtype=torch.float64) * 2 * math.pi
    u = torch.zeros(N, d, dtype=torch.float64)
    u[:, 0], u[:, 1] = torch.cos(a), torch.sin(a)
    e = torch.zeros(d, dtype=torch.float64)
    e[2] = 1.0
    return u, e


@pytest.mark.parametrize("d", [3, 4, 8, 32])
def test_tangent_direction_is_uniform(d: int) -> None:
    """W = <V, e> / sqrt(1 - T^2) for a fixed unit e orthogonal to u is the coordinate of a uniform point
    of S^{d-2}: (W + 1) / 2 ~ Beta((d-2)/2, (d-2)/2) (KS). Power: a direction tilted towards e by adding
    0.1 e to the Gaussian (d = 8: E[W] ~ 0.03) is rejected at the same sample size."""
    u, e = _tangent_setup(d)
    mech = PrivUnit(2.0, input_dim=d)
    w = _tangent_component(mech.sanitize(u, generator=torch.Generator().manual_seed(6)), u, e)
    b = (d - 2) / 2
    assert stats.kstest((w + 1) / 2, stats.beta(b, b).cdf).pvalue > P_MIN
    bad = _tangent_component(_biased_release(mech, u, e, 0.1, torch.Generator().manual_seed(6)), u, e)
    assert stats.kstest((bad + 1) / 2, stats.beta(b, b).cdf).pvalue < P_POWER


def test_tangent_direction_on_the_circle() -> None:
    """d = 2: the tangent part is +-u_perp with probability 1/2 each (binomial), and V is on the circle.
    Power: the direction tilted by 0.3 u_perp (P(+) = Phi(0.3) = 0.62) is rejected."""
    u = torch.tensor([[0.6, 0.8]], dtype=torch.float64).expand(N, 2).contiguous()
    perp = torch.tensor([-0.8, 0.6], dtype=torch.float64)
    mech = PrivUnit(1.0, input_dim=2)
    v = mech.sanitize(u, generator=torch.Generator().manual_seed(8))
    assert torch.allclose(v.norm(dim=1), torch.ones(N, dtype=torch.float64), atol=1e-12)
    assert stats.binomtest(int((v @ perp > 0).sum()), N, 0.5).pvalue > P_MIN
    tilted = _biased_release(mech, u, perp, 0.3, torch.Generator().manual_seed(8))
    assert stats.binomtest(int((tilted @ perp > 0).sum()), N, 0.5).pvalue < P_POWER


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_releases_are_unit_vectors_with_the_input_dtype(dtype: torch.dtype) -> None:
    """Releases are unit rows of the input's dtype and shape; inputs of any norm are normalised first,
    and a zero row is treated as e1 (its releases fall in e1's cap with probability p)."""
    mech = PrivUnit(2.0, input_dim=6)
    x = (_unit_rows(2000, 6, 10) * torch.linspace(1e-3, 1e3, 2000, dtype=torch.float64).unsqueeze(1)).to(dtype)
    v = mech.sanitize(x, generator=torch.Generator().manual_seed(11))
    assert v.shape == x.shape and v.dtype == dtype and not v.requires_grad
    tol = 1e-12 if dtype == torch.float64 else 1e-6
    assert torch.allclose(v.double().norm(dim=1), torch.ones(2000, dtype=torch.float64), atol=tol)
    zeros = torch.zeros(N, 6, dtype=dtype)
    t = mech.sanitize(zeros, generator=torch.Generator().manual_seed(12))[:, 0].double()
    assert stats.binomtest(int((t >= mech.gamma).sum()), N, mech.p).pvalue > P_MIN
    assert torch.equal(mech.clean(x), x)


# --------------------------------------------------------------------------- (d) the mean
N_MEAN = 100_000


@pytest.mark.parametrize(("eps", "d", "wrong"), [(2.0, 8, "d + 1"), (4.0, 16, "eps1 halved"), (1.0, 2, "d + 1")])
def test_mean_inner_product_and_unbiased_release(eps: float, d: int, wrong: str) -> None:
    """E<V, u> is the oracle's m (quadrature), within 5 standard errors of 1e5 releases of one input; with
    ``unbiased=True`` the mean release is u (every coordinate within 5 SE) and its norm is 1 / m.
    Power: the same sample rejects the m of a plausible bug (the Beta law of dimension d + 1, or a cap
    twice as large: eps1 halved), and the mean of the plain release V (m u, no 1 / m) is not u."""
    u = _unit_rows(1, d, 13)
    x = u.expand(N_MEAN, d).contiguous()
    e0 = optimal_split(d, eps)
    plain = PrivUnit(eps, input_dim=d).sanitize(x, generator=torch.Generator().manual_seed(14))
    t = (plain * u).sum(dim=1)
    se = float(t.std()) / math.sqrt(N_MEAN)
    assert abs(float(t.mean()) - _oracle_m(d, eps, e0)) < 5 * se
    m_wrong = _oracle_m(d + 1, eps, e0) if wrong == "d + 1" else _oracle_m(d, e0 + (eps - e0) / 2, e0)
    assert abs(float(t.mean()) - m_wrong) > 5 * se
    mech = PrivUnit(eps, input_dim=d, unbiased=True)
    v = mech.sanitize(x, generator=torch.Generator().manual_seed(15))
    assert torch.allclose(v.norm(dim=1), torch.full((N_MEAN,), 1 / mech.m, dtype=torch.float64), rtol=1e-12)
    z = (v.mean(dim=0) - u[0]) / (v.std(dim=0) / math.sqrt(N_MEAN))
    assert float(z.abs().max()) < 5
    z_plain = (plain.mean(dim=0) - u[0]) / (plain.std(dim=0) / math.sqrt(N_MEAN))
    assert float(z_plain.abs().max()) > 5


# --------------------------------------------------------------------------- (e) bad inputs
@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf, "two"])
def test_bad_epsilon_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="epsilon"):
        mechanisms.create("privunit", epsilon=bad)


@pytest.mark.parametrize("bad", [0.0, -0.5, 2.0, 3.0, math.nan])
def test_bad_epsilon0_is_refused(bad: float) -> None:
    """epsilon0 must lie in (0, epsilon): at epsilon0 = epsilon the cap would be the whole sphere."""
    with pytest.raises(ValueError, match="epsilon0"):
        PrivUnit(2.0, input_dim=4, epsilon0=bad)


@pytest.mark.parametrize("bad", [1, 0, -3, 2.5, True])
def test_bad_input_dim_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="input_dim"):
        PrivUnit(1.0, input_dim=bad)  # type: ignore[arg-type]


def test_dimension_is_fixed_by_the_first_call() -> None:
    """Without input_dim the first call fixes d (the parameters are unknown before); another d later, or
    a d other than input_dim, is refused with a message naming both."""
    mech = PrivUnit(2.0)
    with pytest.raises(RuntimeError, match="input_dim"):
        _ = mech.gamma
    mech.sanitize(torch.ones(3, 5), generator=torch.Generator().manual_seed(0))
    assert mech.input_dim == 5 and mech.parameters == PrivUnit(2.0, input_dim=5).parameters
    with pytest.raises(ValueError, match="input dimension 6 does not match the 5"):
        mech.sanitize(torch.ones(3, 6))
    with pytest.raises(ValueError, match="input dimension 4 does not match the 8"):
        PrivUnit(2.0, input_dim=8).sanitize(torch.ones(3, 4))


def test_bad_embeddings_are_refused() -> None:
    mech = PrivUnit(1.0)
    with pytest.raises(ValueError, match="NaN or infinite"):
        mech.sanitize(torch.tensor([[1.0, math.nan, 0.0]]))
    with pytest.raises(ValueError, match="shape"):
        mech.sanitize(torch.ones(4))
    with pytest.raises(ValueError, match="m >= 2"):
        mech.sanitize(torch.ones(4, 1))


# --------------------------------------------------------------------------- (f) reproducibility
def test_reproducible_with_a_seeded_generator() -> None:
    """The same seed gives the same releases; another seed, or the next call, gives others."""
    mech = PrivUnit(2.0, input_dim=8)
    x = _unit_rows(100, 8, 16)
    a = mech.sanitize(x, generator=torch.Generator().manual_seed(1))
    b = mech.sanitize(x, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, b)
    gen = torch.Generator().manual_seed(1)
    first, second = mech.sanitize(x, generator=gen), mech.sanitize(x, generator=gen)
    assert torch.equal(first, a) and not torch.equal(first, second)
    assert not torch.equal(a, mech.sanitize(x, generator=torch.Generator().manual_seed(2)))


@pytest.mark.parametrize(("eps", "d"), [(1000.0, 2), (1000.0, 768), (1e-3, 2), (1e-3, 768)])
def test_extreme_epsilon_stays_finite(eps: float, d: int) -> None:
    """At epsilon = 1000 the automatic split keeps eps1 <= 700 (350 at d = 2), where q is a normal float64,
    and at 1e-3: parameters and releases are finite, 0 < m <= 1, gamma is the oracle's, and releases
    have norm 1 / m (unbiased). (At d = 2, eps = 1000 the split has q ~ 1e-111 and gamma = cos(pi q)
    rounds to 1; the sampler keeps the cap's width through s = (1 - T) / 2, see sample_inner_products.)"""
    mech = PrivUnit(eps, input_dim=d, unbiased=True)
    par = mech.parameters
    assert all(math.isfinite(v) for v in (par.p, par.q, par.log_q, par.gamma, par.m)) and 0 < par.m <= 1
    assert 0 < par.q and par.eps1 <= (350.0 if d == 2 else 700.0)
    assert par.gamma == pytest.approx(_oracle(d, eps, par.eps0)["gamma"], abs=1e-12)
    v = mech.sanitize(_unit_rows(50, d, 17), generator=torch.Generator().manual_seed(0))
    assert bool(torch.isfinite(v).all())
    assert torch.allclose(v.norm(dim=1) * mech.m, torch.ones(50, dtype=torch.float64), atol=1e-9)


@pytest.mark.parametrize(("d", "eps1"), [(2, 351.0), (3, 701.0)])
def test_cap_beyond_float64_resolution_is_refused(d: int, eps1: float) -> None:
    """An explicit epsilon0 leaving eps1 beyond the representable cap (700; 350 at d = 2) is refused
    instead of silently releasing u itself."""
    with pytest.raises(ValueError, match="float64 cannot resolve"):
        PrivUnit(1.0 + eps1, input_dim=d, epsilon0=1.0)
    PrivUnit(1.0 + eps1 - 2.0, input_dim=d, epsilon0=1.0)  # within the limit


# --------------------------------------------------------------------------- (g) audit
class TooLittlePrivUnit(PrivUnit):
    """Claims epsilon, samples PrivUnit2 at 3 * epsilon (test double for the power check)."""

    def sanitize(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        return PrivUnit(3 * self.epsilon).sanitize(x, generator)


def test_audit_lower_bound_respects_epsilon_and_is_tight() -> None:
    """The empirical audit (mechanisms.audit on the pair (x, -x), d = 8, N = 5e4) gives a lower bound
    <= epsilon = 2 and above 0.8 epsilon (1.93-1.94 over seeds 0..3): the pair is tight, the event
    T >= gamma has likelihood ratio exactly e^eps. Power: the sampler at 3 epsilon is refuted against the
    1x claim (5.67-5.79)."""
    mech = PrivUnit(2.0)
    result = audit_mechanism(mech, 50_000, seed=1, dim=8)
    assert result.claimed_epsilon == 2.0 and mech.input_dim == 8
    assert 0.8 * 2.0 < result.epsilon_lb <= 2.0, result.to_dict()
    broken = audit_mechanism(TooLittlePrivUnit(2.0), 50_000, seed=1, dim=8)
    assert broken.epsilon_lb > 1.3 * 2.0, broken.to_dict()


def test_registry() -> None:
    mech = mechanisms.create("privunit", epsilon=1.0, input_dim=3)
    assert isinstance(mech, PrivUnit) and mech.level == "sentence" and mech.output_dim(3) == 3
    assert "privunit" in mechanisms.names() and "pure" in repr(mech)


# --------------------------------------------------------------------------- (d') the second moment
@pytest.mark.parametrize(("eps", "d"), [(2.0, 8), (4.082, 16), (8.19, 4)])
def test_second_moment_law_matches_the_releases(eps: float, d: int) -> None:
    """E[z z^T | u] = a u u^T + b I (``second_moment_law``, closed form): on 1e5 unbiased releases of one
    input, <z, u>^2 averages a + b and the squared coordinates along a direction orthogonal to u average b,
    each within 5 standard errors; its trace is E||z||^2 = 1 / m^2 exactly. Power: the law of the plain
    release (V, not V / m: a and b times m^2) and an off-by-one spread (b = (1 / m^2 - a) / (d - 1), the trace
    split over d - 1 directions) are both rejected by the same sample."""
    u = _unit_rows(1, d, 21)[0]
    mech = PrivUnit(eps, input_dim=d, unbiased=True)
    a, b = mech.second_moment_law(d)
    assert a + b * d == pytest.approx(1 / mech.m**2, rel=1e-9)
    z = mech.sanitize(u.expand(N_MEAN, d).contiguous(), generator=torch.Generator().manual_seed(22))
    orth = torch.linalg.qr(torch.stack([u, _unit_rows(1, d, 23)[0]], dim=1))[0][:, 1]
    along, across = (z @ u) ** 2, (z @ orth) ** 2
    se_along, se_across = float(along.std()) / math.sqrt(N_MEAN), float(across.std()) / math.sqrt(N_MEAN)
    assert abs(float(along.mean()) - (a + b)) < 5 * se_along
    assert abs(float(across.mean()) - b) < 5 * se_across
    plain = (a * mech.m**2, b * mech.m**2)
    off_by_one = (a, (1 / mech.m**2 - a) / (d - 1))
    for wa, wb in (plain, off_by_one):
        assert abs(float(along.mean()) - (wa + wb)) > 5 * se_along or abs(float(across.mean()) - wb) > 5 * se_across


def test_second_moment_law_needs_unbiased_releases() -> None:
    """Without ``unbiased`` the releases are not unbiased: no law is declared."""
    assert PrivUnit(2.0, input_dim=8).second_moment_law(8) is None
