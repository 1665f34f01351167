"""Variation-ratio shuffle amplification (Wang et al., VLDB 2024): fl/accounting/analysis/variation_ratio.py."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest
import torch

from fl.accounting import Amplification, mechanism_amplification, shuffle_amplification
from fl.accounting.analysis.shuffle import numerical_amplification, shuffle_delta
from fl.accounting.analysis.variation_ratio import (
    VRParameters,
    binary_rr,
    general_ldp,
    k_rr,
    metric_ldp,
    planar_laplace,
    planar_laplace_beta,
    purkayastha,
    purkayastha_beta,
    rr_with_prior,
    vr_delta,
    vr_epsilon,
)
from mechanisms.planar_laplace import PlanarLaplace
from mechanisms.purkayastha import Purkayastha
from tests.support.shuffle_pairs import brute_vr_pair, hockey_stick

DELTA = 1e-6
N_SST2 = 67_349


CASES = [
    general_ldp(0.5),
    general_ldp(2.0),
    general_ldp(5.0),
    k_rr(1.0, 3),
    k_rr(2.0, 4),
    k_rr(4.0, 10),
    metric_ldp(1.0, 1.0, 3.0),  # q > p: fewer clones than the worst case
    purkayastha(1.0, 3),
    purkayastha(0.5, 16),
    planar_laplace(1.0, 5),
    planar_laplace(1.0, 5, d01=0.5),
]


@pytest.mark.parametrize("n", [2, 7, 15, 30])
@pytest.mark.parametrize("params", CASES, ids=lambda p: f"{p.name}-{p.log_p:.3g}-{p.beta:.3g}")
def test_divergence_equals_brute_force(params: VRParameters, n: int) -> None:
    P, Q = brute_vr_pair(params, n)
    for eps in np.linspace(0.0, params.log_p * 1.02, 8):
        exact = hockey_stick(P, Q, float(eps))
        assert hockey_stick(Q, P, float(eps)) == pytest.approx(exact, abs=1e-12)  # mirror images
        fast = vr_delta(float(eps), params, n, exact=True)
        assert abs(fast - exact) < 1e-9, (params.name, n, eps, fast, exact)
        truncated = vr_delta(float(eps), params, n, tail_mass=1e-3)  # Bernstein range + charged tails
        assert exact - 1e-15 <= truncated <= exact + 2e-3


def test_power_wrong_pairs_are_detected() -> None:
    """Dropping the (1 - g) factor (g = 0 at the same p, q, beta) or merging the residual changes the divergence."""
    params, n = k_rr(1.0, 4), 20
    P, Q = brute_vr_pair(params, n)
    Pm, Qm = brute_vr_pair(params, n, reveal=False)
    wrong = VRParameters("wrong", params.log_p, math.tanh(params.log_p / 2), params.log_q, params.log_p, g=0.0)
    gaps_g = [abs(vr_delta(e, wrong, n, exact=True) - hockey_stick(P, Q, e)) for e in (0.0, 0.2, 0.5)]
    gaps_merged = [abs(hockey_stick(Pm, Qm, e) - hockey_stick(P, Q, e)) for e in (0.0, 0.2, 0.5)]
    assert max(gaps_g) > 1e-3 and max(gaps_merged) > 1e-3


def shuffled_krr_histogram(eps: float, k: int, n: int, victim: int, others: int) -> dict[tuple[int, ...], float]:
    """Exact law of the shuffled k-RR reports (a histogram) when n - 1 users hold ``others``."""
    e = math.exp(eps)
    row = lambda x: [e / (e + k - 1) if y == x else 1.0 / (e + k - 1) for y in range(k)]  # noqa: E731
    law: dict[tuple[int, ...], float] = {tuple([0] * k): 1.0}
    for x in [victim] + [others] * (n - 1):
        nxt: dict[tuple[int, ...], float] = defaultdict(float)
        probs = row(x)
        for h, w in law.items():
            for y in range(k):
                h2 = list(h)
                h2[y] += 1
                nxt[tuple(h2)] += w * probs[y]
        law = nxt
    return law


@pytest.mark.parametrize(
    "k,eps,n,others", [(3, 1.0, 6, 2), (3, 2.0, 5, 0), (4, 2.0, 8, 2), (4, 1.0, 8, 0), (4, 1.0, 8, 3), (2, 1.5, 10, 0)]
)
def test_bound_covers_the_real_shuffled_krr(k: int, eps: float, n: int, others: int) -> None:
    """The exact divergence of shuffled k-RR histograms (n - 1 users holding ``others``, the victim 0 vs 1)
    never exceeds the bound Sanitas computes."""
    P = shuffled_krr_histogram(eps, k, n, 0, others)
    Q = shuffled_krr_histogram(eps, k, n, 1, others)
    params = k_rr(eps, k)
    for t in np.linspace(0.0, eps, 6):
        real = max(hockey_stick(P, Q, float(t)), hockey_stick(Q, P, float(t)))
        assert real <= vr_delta(float(t), params, n, exact=True) + 1e-12


@pytest.mark.parametrize("k", [2, 3, 4, 6])
def test_general_bound_covers_every_real_shuffled_krr(k: int) -> None:
    """The general (g = 0) VR bound at eps0 = eps covers shuffled k-RR for every tried configuration of the
    others (on x0, x1 or another value), including k >= 3 where the pair's TV is below tanh(eps/2)."""
    for eps in (0.5, 2.0):
        for n in (2, 4, 7):
            for others in sorted({0, 1, k - 1}):
                P = shuffled_krr_histogram(eps, k, n, 0, others)
                Q = shuffled_krr_histogram(eps, k, n, 1, others)
                for t in np.linspace(0.0, eps, 5):
                    real = max(hockey_stick(P, Q, float(t)), hockey_stick(Q, P, float(t)))
                    assert real <= vr_delta(float(t), general_ldp(eps), n, exact=True) + 1e-12, (k, eps, n, others, t)


@pytest.mark.parametrize("k,eps,n,others,t", [(4, 2.0, 8, 2, 1.2), (3, 2.0, 5, 0, 1.6)])
def test_the_merged_three_component_pair_is_not_an_upper_bound(k: int, eps: float, n: int, others: int, t: float):
    """Why Sanitas reveals the victim's residual: the paper's merged pair is exceeded by real shuffled k-RR."""
    P = shuffled_krr_histogram(eps, k, n, 0, others)
    Q = shuffled_krr_histogram(eps, k, n, 1, others)
    real = max(hockey_stick(P, Q, t), hockey_stick(Q, P, t))
    Pm, Qm = brute_vr_pair(k_rr(eps, k), n, reveal=False)
    assert real > hockey_stick(Pm, Qm, t) + 1e-3
    assert real <= vr_delta(t, k_rr(eps, k), n, exact=True)


def test_merged_pair_is_exact_for_krr3_with_others_on_the_third_value() -> None:
    """Sanity of the enumeration: where Q* equals the others' residual (k = 3, others on value 2), the
    merged pair is exactly the real divergence (App. B)."""
    k, eps, n = 3, 1.0, 6
    P = shuffled_krr_histogram(eps, k, n, 0, 2)
    Q = shuffled_krr_histogram(eps, k, n, 1, 2)
    Pm, Qm = brute_vr_pair(k_rr(eps, k), n, reveal=False)
    for t in (0.0, 0.3, 0.7):
        assert hockey_stick(P, Q, t) == pytest.approx(hockey_stick(Pm, Qm, t), abs=1e-12)


# --------------------------------------------------------------------------- #
# Reference values (/tmp/vr notes §3: exact VR; the authors' amplificationUB agrees)
# --------------------------------------------------------------------------- #
GENERAL_REFERENCE = [
    (1.0, 10_000, 0.04320615924),
    (2.0, N_SST2, 0.04106661209),
    (4.0, 1_000, 1.85290655451),
    (6.28, 10_000, 1.91165495497),
    (8.0, N_SST2, 1.60207214078),
]


@pytest.mark.parametrize("eps0,n,want", GENERAL_REFERENCE)
def test_general_reference_values(eps0: float, n: int, want: float) -> None:
    got = shuffle_amplification(eps0, n, DELTA)
    assert isinstance(got, Amplification)
    assert got.method == "variation_ratio" and got.amplified
    assert got.epsilon == pytest.approx(want, rel=2e-5)
    # safe side: the exact divergence (every c summed) at the returned eps meets the target ...
    params = general_ldp(eps0)
    assert vr_delta(got.epsilon, params, n, exact=True) <= DELTA
    # ... and slightly less does not (tight)
    assert vr_delta(got.epsilon * (1 - 1e-4), params, n, exact=True) > DELTA


def test_general_no_amplification_at_31_4() -> None:
    got = shuffle_amplification(31.4, N_SST2, DELTA)
    # only the delta-relaxation of the randomizer itself (31.39999900003 in the reference notes)
    assert got.epsilon >= 31.399999 and got.epsilon <= 31.4
    assert "delta-relaxation" in got.note


@pytest.mark.parametrize(
    "m,eps,want", [(2, 1.0, 0.655794), (3, 1.0, 0.518616), (10, 2.0, 0.496575), (768, 1.0, 0.0288068)]
)
def test_purkayastha_beta_reference(m: int, eps: float, want: float) -> None:
    assert purkayastha_beta(eps, m) == pytest.approx(want, abs=2e-6)


def test_planar_laplace_beta_reference() -> None:
    assert planar_laplace_beta(1.0, 1) == pytest.approx(1 - math.exp(-1.0), rel=1e-12)  # Laplace on R
    # the README's 2-D double integral 2 ∫_0^1 ∫_R e^{-sqrt((x-1)^2+y^2)}/(2 pi) dy dx (d01 = eps * 2 = 2)
    assert planar_laplace_beta(1.0, 2) == pytest.approx(0.52297385502, abs=1e-8)
    assert planar_laplace_beta(1.0, 768) == pytest.approx(0.0287943, abs=2e-7)
    assert planar_laplace_beta(3.14, 768) == pytest.approx(0.0902401, abs=2e-7)


# --------------------------------------------------------------------------- #
# beta against Monte Carlo with the mechanisms' own samplers and densities
# --------------------------------------------------------------------------- #
def mc_tv(mech, x0: torch.Tensor, x1: torch.Tensor, log_ratio, samples: int, seed: int) -> tuple[float, float]:
    """TV(M(x0), M(x1)) = Pr_x0[f0 > f1] - Pr_x1[f0 > f1], with its standard error."""
    gen = torch.Generator().manual_seed(seed)
    y0 = mech.sanitize(x0.expand(samples, -1).contiguous(), generator=gen)
    y1 = mech.sanitize(x1.expand(samples, -1).contiguous(), generator=gen)
    a = (log_ratio(y0) > 0).double().mean().item()
    b = (log_ratio(y1) > 0).double().mean().item()
    return a - b, math.sqrt((a * (1 - a) + b * (1 - b)) / samples)


@pytest.mark.parametrize("m,eps", [(2, 1.0), (3, 2.0), (16, 1.0)])
def test_purkayastha_beta_monte_carlo(m: int, eps: float) -> None:
    mech = Purkayastha(eps)
    x0 = torch.zeros(1, m, dtype=torch.float64)
    x0[0, 0] = 1.0
    x1 = -x0

    def log_ratio(y: torch.Tensor) -> torch.Tensor:  # log f(y | x0) - log f(y | x1)
        return mech.log_prob(y, x0.expand_as(y)) - mech.log_prob(y, x1.expand_as(y))

    est, se = mc_tv(mech, x0, x1, log_ratio, 60_000, seed=1234 + m)
    beta = purkayastha_beta(eps, m)
    assert abs(est - beta) < 5 * se + 1e-3, (est, beta, se)
    assert beta < math.tanh(math.pi * eps / 2) - 0.05  # and it is well below the generic tanh bound


@pytest.mark.parametrize(
    "m,eps,dist",
    [
        (2, 1.0, 2.0),
        (5, 2.0, 0.7),
        pytest.param(16, 2.0, 2.0, marks=pytest.mark.slow),
        pytest.param(16, 2.0, 0.7, marks=pytest.mark.slow),
    ],
)
def test_planar_laplace_beta_monte_carlo(m: int, eps: float, dist: float) -> None:
    mech = PlanarLaplace(eps, normalize_output=False)
    x0 = torch.zeros(1, m, dtype=torch.float64)
    x0[0, 0] = 1.0
    x1 = torch.zeros(1, m, dtype=torch.float64)  # a unit vector at distance dist from x0
    x1[0, 0] = 1.0 - dist**2 / 2.0
    x1[0, 1] = math.sqrt(1.0 - x1[0, 0].item() ** 2)

    def log_ratio(y: torch.Tensor) -> torch.Tensor:  # -eps ||y - x0|| + eps ||y - x1||
        return -eps * torch.linalg.norm(y - x0, dim=1) + eps * torch.linalg.norm(y - x1, dim=1)

    est, se = mc_tv(mech, x0, x1, log_ratio, 60_000, seed=99 + m)
    beta = planar_laplace_beta(eps, m, dist)
    assert abs(est - beta) < 5 * se + 1e-3, (est, beta, se)


# --------------------------------------------------------------------------- #
# Comparisons and shapes
# --------------------------------------------------------------------------- #
def test_vr_never_above_fmt_on_a_grid() -> None:
    for eps0 in (0.25, 1.0, 2.0, 4.0, 6.0, 8.0):
        for n in (100, 1_000, 10_000, N_SST2):
            vr = vr_epsilon(general_ldp(eps0), n, DELTA)
            fmt = numerical_amplification(eps0, n, DELTA)
            assert vr <= fmt + 1e-12, (eps0, n, vr, fmt)
            both = shuffle_amplification(eps0, n, DELTA, both=True)
            assert both.epsilon == pytest.approx(min(vr, fmt, both.epsilon_fmt or math.inf))
            assert both.epsilon_fmt is not None and both.epsilon_vr == vr


def test_mechanism_parameters_never_worse_than_generic() -> None:
    """With a mechanism's own beta the figure is the smaller of the residual-revealed bound and the generic
    (g = 0) one at the same p and q: never above the generic figure at the same pure epsilon."""
    n = 10_000
    for params in (k_rr(2.0, 4), purkayastha(1.0, 16), planar_laplace(1.0, 16), purkayastha(0.5, 2)):
        generic = shuffle_amplification(params.epsilon_ldp, n, DELTA)
        got = mechanism_amplification(params, n, DELTA)
        assert got.epsilon <= generic.epsilon + 1e-12
        assert vr_epsilon(params, n, DELTA) >= got.epsilon_vr
        if not params.uniform_tv:
            assert "not used" in got.note  # the metric mechanisms' beta is reported as not used
    assert binary_rr(1.3) == VRParameters(**{**general_ldp(1.3).to_dict(), "name": "binary_rr"})


def test_metric_form_at_smaller_distance_is_smaller() -> None:
    n, eps = N_SST2, 2.0
    worst = mechanism_amplification(planar_laplace(eps, 16), n, DELTA)
    near = mechanism_amplification(planar_laplace(eps, 16, d01=0.5), n, DELTA)
    assert near.epsilon < worst.epsilon
    generic_near = mechanism_amplification(metric_ldp(eps, 0.5, 2.0), n, DELTA)
    assert near.epsilon <= generic_near.epsilon
    assert metric_ldp(eps, 2.0, 2.0).log_p == pytest.approx(general_ldp(2 * eps).log_p)


def test_rr_with_prior_is_not_applicable() -> None:
    got = mechanism_amplification(rr_with_prior(1.0), 1_000, DELTA)
    assert got.epsilon is None and got.method == "not_applicable" and not got.amplified
    assert "q-ratio" in got.note
    with pytest.raises(ValueError, match="not applicable"):
        vr_epsilon(rr_with_prior(1.0), 1_000, DELTA)


def test_n_equals_one_and_monotone_in_n() -> None:
    assert shuffle_amplification(2.0, 1, DELTA).method == "none"
    assert mechanism_amplification(k_rr(2.0, 5), 1, DELTA).epsilon == 2.0
    vals = [vr_epsilon(k_rr(2.0, 5), n, DELTA) for n in (10, 100, 1_000, 10_000, N_SST2)]
    assert all(b < a for a, b in zip(vals, vals[1:])), vals


@pytest.mark.parametrize(
    "bad",
    [
        VRParameters("x", 1.0, 0.9, 1.0, 1.0),  # beta > (p-1)/(p+1)
        VRParameters("x", 1.0, 0.0, 1.0, 1.0),  # beta = 0
        VRParameters("x", 1.0, 0.45, 0.001, 1.0),  # q too small: 2 r > 1
        VRParameters("x", math.nan, 0.2, 1.0, 1.0),
        VRParameters("x", 1.0, math.tanh(0.5), 1.0, 1.0, g=None),  # beta at the max without closed-form g
        VRParameters("x", 1.0, 0.2, 1.0, 1.0, g=1.5),
    ],
)
def test_invalid_parameters_are_refused(bad: VRParameters) -> None:
    with pytest.raises(ValueError):
        vr_epsilon(bad, 100, DELTA)


def test_large_ratios_stay_finite() -> None:
    for params in (general_ldp(800.0), purkayastha(300.0, 16), k_rr(50.0, 3)):
        got = mechanism_amplification(params, N_SST2, DELTA)
        assert got.epsilon is not None and math.isfinite(got.epsilon) and got.epsilon <= params.epsilon_ldp


def test_shuffle_delta_of_fmt_matches_when_clone_probabilities_agree() -> None:
    """The g = 0 path is FMT's evaluator with another clone probability: at q = 2 p / (e^-eps0 (p+1))... the
    metric form with q chosen so that 2 r = e^{-eps0} is FMT exactly."""
    eps0, n = 2.0, 500
    p = math.exp(eps0)
    log_q = math.log(2.0 * p / (p + 1.0)) + eps0  # 2 r = 2 p / ((p + 1) q) = e^{-eps0}
    params = VRParameters("fmt-like", eps0, math.tanh(eps0 / 2), log_q, eps0, g=0.0)
    for eps in (0.0, 0.5, 1.0):
        assert vr_delta(eps, params, n, exact=True) == pytest.approx(shuffle_delta(eps, eps0, n, exact=True), abs=1e-12)


def shuffled_histogram(rows: list[np.ndarray]) -> dict[tuple[int, ...], float]:
    """Exact law of the histogram of independent reports, report i drawn from rows[i]."""
    law: dict[tuple[int, ...], float] = {tuple([0] * len(rows[0])): 1.0}
    for probs in rows:
        nxt: dict[tuple[int, ...], float] = defaultdict(float)
        for h, w in law.items():
            for y, py in enumerate(probs):
                h2 = list(h)
                h2[y] += 1
                nxt[tuple(h2)] += w * float(py)
        law = nxt
    return law


def test_bounds_cover_random_randomizers() -> None:
    """Random randomizers on 2-4 outputs, the others all on one input (x0, x1 or a third): the exact shuffled
    divergence never exceeds the g = 0 bound with the pair's p and the others' q, nor the residual-revealed
    bound at the pair's exact TV."""
    rng = np.random.default_rng(2024)
    checked = 0
    for _ in range(80):
        k = int(rng.integers(2, 5))
        rows = rng.dirichlet(np.ones(k) * rng.uniform(0.3, 3.0), size=3)
        r0, r1 = rows[0], rows[1]
        log_p = float(np.max(np.abs(np.log(r0 / r1))))
        n, others = int(rng.integers(2, 7)), int(rng.integers(0, 3))
        log_q = float(np.max(np.log(np.maximum(r0, r1) / rows[others])))
        if log_p < 1e-3 or log_q < 1e-9:
            continue
        tv = float(np.maximum(r0 - r1, 0.0).sum())
        general = VRParameters("random", log_p, math.tanh(log_p / 2), log_q, log_p, g=0.0)
        own = VRParameters("random", log_p, min(tv, math.tanh(log_p / 2)), log_q, log_p)
        candidates = [general] if general.log_clone <= 0.0 else []
        if own.log_clone <= 0.0 and own.beta < math.tanh(log_p / 2) * (1 - 1e-9):
            candidates.append(own)  # g computed from beta: only clearly below the maximum
        P = shuffled_histogram([r0] + [rows[others]] * (n - 1))
        Q = shuffled_histogram([r1] + [rows[others]] * (n - 1))
        for t in np.linspace(0.0, log_p, 4):
            real = max(hockey_stick(P, Q, float(t)), hockey_stick(Q, P, float(t)))
            for params in candidates:
                assert real <= vr_delta(float(t), params, n, exact=True) + 1e-12, (params, n, others, t)
                checked += 1
    assert checked > 200
