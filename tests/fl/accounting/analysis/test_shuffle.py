"""Privacy amplification by shuffling (Feldman, McMillan & Talwar 2021; variation ratio).

The bounds of fl/accounting/analysis/shuffle.py.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest

from fl.accounting.analysis.shuffle import (
    ShuffleBound,
    _ShuffleProfile,
    closed_form_amplification,
    closed_form_valid,
    compose_shuffled,
    local_epsilon,
    numerical_amplification,
    shuffle_bound,
    shuffle_delta,
)
from fl.accounting.analysis.variation_ratio import shuffle_amplification

N_PURKAYASTHA = 67_349
DELTA = 1e-6


# --------------------------------------------------------------------------- #
# Brute force: enumerate the clones pair (P, Q) outcome by outcome.
# --------------------------------------------------------------------------- #
def brute_pair(n: int, eps0: float, *, trials: int | None = None, clone_p: float | None = None):
    """Exact P, Q over pairs (x, y): C ~ Bin(trials, clone_p), A ~ Bin(C, 1/2), Delta ~ Bern(alpha).

    Defaults are the correct model (trials = n - 1, clone_p = e^-eps0); other
    values give deliberately wrong models for the power checks.
    """
    trials = n - 1 if trials is None else trials
    p = math.exp(-eps0) if clone_p is None else clone_p
    alpha, one_minus_alpha = 1.0 / (1.0 + math.exp(-eps0)), 1.0 / (1.0 + math.exp(eps0))
    P: dict[tuple[int, int], float] = defaultdict(float)
    Q: dict[tuple[int, int], float] = defaultdict(float)
    for c in range(trials + 1):
        wc = math.comb(trials, c) * p**c * (1.0 - p) ** (trials - c)
        for a in range(c + 1):
            wa = wc * math.comb(c, a) / 2.0**c
            for d, wd in ((1, alpha), (0, one_minus_alpha)):
                P[(a + d, c - a + 1 - d)] += wa * wd
                Q[(a + 1 - d, c - a + d)] += wa * wd
    return P, Q


def hockey_stick(P, Q, eps: float) -> float:
    e = math.exp(eps)
    return math.fsum(max(0.0, P[o] - e * Q.get(o, 0.0)) for o in P)


def brute_delta(n: int, eps0: float, eps: float, **wrong) -> float:
    P, Q = brute_pair(n, eps0, **wrong)
    return hockey_stick(P, Q, eps)


def brute_epsilon(n: int, eps0: float, delta: float, **wrong) -> float:
    P, Q = brute_pair(n, eps0, **wrong)
    lo, hi = 0.0, eps0
    if hockey_stick(P, Q, 0.0) <= delta:
        return 0.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if hockey_stick(P, Q, mid) <= delta else (mid, hi)
    return hi


# --------------------------------------------------------------------------- #
# Published check values
# --------------------------------------------------------------------------- #
def test_published_check_values() -> None:
    num = numerical_amplification(4.0, 100_000, 1e-6)
    closed = closed_form_amplification(4.0, 100_000, 1e-6)
    assert abs(num - 0.17) < 0.01, num  # ~0.1698
    assert closed is not None and abs(closed - 0.54) < 0.01, closed  # ~0.5346
    b = shuffle_bound(4.0, 100_000, 1e-6)
    assert b.method == "numerical" and b.amplified and b.epsilon == pytest.approx(num)
    tight = shuffle_amplification(4.0, 100_000, 1e-6)
    assert tight.method == "variation_ratio" and tight.epsilon < num


def test_closed_form_matches_formula_and_regime() -> None:
    for eps0, n, delta in [(4.0, 100_000, 1e-6), (1.0, 10_000, 1e-5), (0.3, 5_000, 1e-8), (2.5, 10**6, 1e-9)]:
        e = math.exp(eps0)
        want = math.log(1 + (e - 1) / (e + 1) * (8 * math.sqrt(e * math.log(4 / delta)) / math.sqrt(n) + 8 * e / n))
        assert closed_form_valid(eps0, n, delta)
        assert closed_form_amplification(eps0, n, delta) == pytest.approx(want, rel=1e-12)
        # the numerical bound is at least as good as the closed form
        assert numerical_amplification(eps0, n, delta) <= want
    # regime: eps0 <= log(n / (16 log(4/delta)))
    n, delta = N_PURKAYASTHA, DELTA
    edge = math.log(n / (16 * math.log(4 / delta)))
    assert closed_form_amplification(edge * 0.999, n, delta) is not None
    assert closed_form_amplification(edge * 1.001, n, delta) is None
    assert closed_form_amplification(2 * math.pi, n, delta) is None  # 2 pi > edge ~ 5.62
    assert shuffle_bound(edge * 1.001, n, delta, method="closed_form").method == "none"


# --------------------------------------------------------------------------- #
# Brute-force agreement of the fast sum, and its power
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("n", [2, 5, 9, 14, 20])
@pytest.mark.parametrize("eps0", [0.3, 1.0, 2.5, 6.0])
def test_fast_sum_equals_brute_force(n: int, eps0: float) -> None:
    P, Q = brute_pair(n, eps0)
    for eps in np.linspace(0.0, eps0 * 1.05, 9):
        exact = hockey_stick(P, Q, float(eps))
        assert hockey_stick(Q, P, float(eps)) == pytest.approx(exact, abs=1e-12)  # symmetric pair
        fast = shuffle_delta(float(eps), eps0, n, exact=True)
        assert abs(fast - exact) < 1e-9, (n, eps0, eps, fast, exact)
        # blocked + Bernstein-truncated evaluation is an upper bound, and close
        blocked = shuffle_delta(float(eps), eps0, n, tail_mass=1e-3)
        assert blocked >= exact - 1e-15
        assert blocked <= exact + 2e-3


@pytest.mark.parametrize("n,eps0", [(10, 1.0), (20, 2.0), (16, 0.5)])
def test_epsilon_agrees_with_brute_force(n: int, eps0: float) -> None:
    delta = 1e-3
    want = brute_epsilon(n, eps0, delta)
    got = numerical_amplification(eps0, n, delta)
    assert got >= want - 1e-9  # never below the exact answer
    assert got - want < 1e-3 * eps0  # and tight
    # safe side: the returned eps satisfies the target; a bit less does not
    assert shuffle_delta(got, eps0, n, exact=True) <= delta
    assert brute_delta(n, eps0, max(0.0, got - 1e-6)) > delta


def test_power_wrong_clone_model_is_detected() -> None:
    """A wrong clone model (C ~ Bin(n, e^-eps0 / 2)) disagrees with the fast sum far beyond 1e-9."""
    worst = 0.0
    for n in (5, 12, 20):
        for eps0 in (0.5, 1.0, 3.0):
            for eps in (0.0, 0.25 * eps0, 0.5 * eps0):
                fast = shuffle_delta(eps, eps0, n, exact=True)
                wrong = brute_delta(n, eps0, eps, trials=n, clone_p=math.exp(-eps0) / 2)
                worst = max(worst, abs(fast - wrong))
    assert worst > 1e-3
    # and it changes the final epsilon
    right = numerical_amplification(1.0, 20, 1e-3)
    assert abs(brute_epsilon(20, 1.0, 1e-3, trials=20, clone_p=math.exp(-1.0) / 2) - right) > 1e-2


def test_power_dropping_the_tail_breaks_the_upper_bound() -> None:
    """With a deliberately coarse truncation, the charged lower tail is what keeps delta an upper bound."""
    n, eps0 = 20, 0.5  # mean of C ~ 11.5; tail_mass 0.3 cuts off c < lo > 0
    prof = _ShuffleProfile(eps0, n, tail_mass=0.3, rel_block=0.0)
    assert prof.starts[0] == 0 and prof.starts[1] > 1, prof.starts  # first block = the lower tail [0, lo)
    for eps in (0.0, 0.1, 0.2):
        exact = brute_delta(n, eps0, eps)
        d, _ = prof.per_c(eps, prof.starts)
        with_tail = float(np.dot(prof.masses, d))
        without_tail = float(np.dot(prof.masses[1:], d[1:]))
        assert with_tail >= exact - 1e-15
        assert without_tail < exact - 1e-6  # the wrong version is below the true divergence
        assert abs(without_tail - exact) > 1e-9  # i.e. it would fail the brute-force agreement


def test_power_dropping_delta_mixing_differs() -> None:
    """Replacing Delta ~ Bern(alpha) by Delta = 1 (a looser pair) changes the divergence."""
    n, eps0 = 12, 1.0
    for eps in (0.0, 0.3):
        fast = shuffle_delta(eps, eps0, n, exact=True)
        P, Q = brute_pair(n, eps0)
        # Delta = 1: P = (A + 1, C - A), Q = (A, C - A + 1)
        Pw: dict = defaultdict(float)
        Qw: dict = defaultdict(float)
        p = math.exp(-eps0)
        for c in range(n):
            wc = math.comb(n - 1, c) * p**c * (1 - p) ** (n - 1 - c)
            for a in range(c + 1):
                w = wc * math.comb(c, a) / 2.0**c
                Pw[(a + 1, c - a)] += w
                Qw[(a, c - a + 1)] += w
        assert hockey_stick(Pw, Qw, eps) - fast > 1e-3


# --------------------------------------------------------------------------- #
# Monotonicity, range, edge cases
# --------------------------------------------------------------------------- #
def test_monotone_in_n_and_eps0_and_never_above_eps0() -> None:
    ns = [100, 1_000, 10_000, 100_000, 1_000_000]
    eps0s = [0.25, 1.0, 2.0, 4.0, 8.0]
    grid = np.array([[numerical_amplification(e, n, DELTA) for n in ns] for e in eps0s])
    assert np.all(np.isfinite(grid))
    assert np.all(grid <= np.array(eps0s)[:, None])
    assert np.all(np.diff(grid, axis=1) < 0), grid  # decreasing in n
    assert np.all(np.diff(grid, axis=0) > 0), grid  # increasing in eps0
    for e, row in zip(eps0s, grid):
        for n, v in zip(ns, row):
            assert shuffle_amplification(e, n, DELTA).epsilon <= e
            assert v < e


def test_n_equals_one_is_no_amplification() -> None:
    for eps0 in (0.1, 1.0, 10.0):
        b = shuffle_bound(eps0, 1, DELTA)
        assert isinstance(b, ShuffleBound)
        assert b.epsilon == eps0 and b.method == "none" and not b.amplified
        assert "no" in b.note.lower() and "shuffl" in b.note.lower()
        assert shuffle_amplification(eps0, 1, DELTA).epsilon == eps0


@pytest.mark.parametrize("eps1", [2, 6, 10])
def test_purkayastha_regime_finite_and_below_eps0(eps1: int) -> None:
    """n = 67,349, eps0 = pi * eps1: beyond the closed form's regime, where the script returns eps0."""
    eps0 = math.pi * eps1
    b = shuffle_bound(eps0, N_PURKAYASTHA, DELTA)
    print(f"n={N_PURKAYASTHA} eps0={eps0:.6f}: eps={b.epsilon!r} ({b.method}) local={b.epsilon_local!r}")
    assert b.epsilon_closed_form is None
    assert math.isfinite(b.epsilon) and 0.0 < b.epsilon < eps0
    assert b.method == "numerical" and b.amplified
    assert shuffle_delta(b.epsilon, eps0, N_PURKAYASTHA) <= DELTA
    if eps1 == 2:
        assert b.epsilon < 1.0  # real amplification: ~0.78
    else:
        # ~1e-4 expected clones or fewer: the gain is the delta-relaxation of the local randomizer
        assert eps0 - b.epsilon < 1e-5
        assert "delta-relaxation" in b.note


# 708-709: a clone probability e^-eps0 near the smallest normal double overflowed scipy's binomial pmf
@pytest.mark.parametrize("eps0", [50.0, 200.0, 708.0, 709.0, 745.0, 1000.0])
@pytest.mark.parametrize("n", [2, 67_349, 10**8])
def test_extreme_inputs_stay_finite(eps0: float, n: int) -> None:
    v = shuffle_amplification(eps0, n, 1e-6).epsilon
    assert math.isfinite(v) and 0.0 <= v <= eps0


def test_tiny_eps0_large_n() -> None:
    v = shuffle_amplification(1e-3, 10**6, 1e-6).epsilon
    assert math.isfinite(v) and 0.0 <= v < 1e-3


def test_large_n() -> None:
    """n = 1e7 gives a finite, strongly amplified bound. (How long it takes is measured by
    benchmarks/bench_shuffle.py, not asserted here: a unit test does not read the clock.)"""
    v = shuffle_amplification(1.0, 10**7, 1e-6).epsilon
    assert 0.0 < v < 0.01


def test_local_epsilon_baseline() -> None:
    # randomized response at eps0: (e^eps0 - e^eps) / (e^eps0 + 1) = delta
    eps0, delta = 3.0, 1e-4
    eps = local_epsilon(eps0, delta)
    assert (math.exp(eps0) - math.exp(eps)) / (math.exp(eps0) + 1) == pytest.approx(delta, rel=1e-9)
    # n = 2 shuffling is (slightly) better than the local randomizer alone
    assert numerical_amplification(eps0, 2, delta) < eps


# --------------------------------------------------------------------------- #
# Validation
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("eps0", [0.0, -1.0, math.inf, math.nan, True, "1.0", None])
def test_bad_epsilon0(eps0) -> None:
    with pytest.raises(ValueError, match="epsilon0"):
        shuffle_amplification(eps0, 100, DELTA)


@pytest.mark.parametrize("n", [0, -5, 2.5, 1e5, True, "10", None])
def test_bad_n(n) -> None:
    with pytest.raises(ValueError, match="n must"):
        shuffle_amplification(1.0, n, DELTA)


@pytest.mark.parametrize("delta", [0.0, 1.0, -0.1, 1.5, math.nan, None])
def test_bad_delta(delta) -> None:
    with pytest.raises(ValueError, match="delta"):
        shuffle_amplification(1.0, 100, delta)


def test_bad_method() -> None:
    with pytest.raises(ValueError, match="method"):
        shuffle_bound(1.0, 100, DELTA, method="magic")


def test_numpy_integer_n_accepted() -> None:
    assert shuffle_amplification(1.0, np.int64(1000), DELTA).epsilon == shuffle_amplification(1.0, 1000, DELTA).epsilon


# --------------------------------------------------------------------------- #
# Composition over rounds
# --------------------------------------------------------------------------- #
def test_compose_basic_sums() -> None:
    assert compose_shuffled([1.0, 1.0, 1.0], 1e-6, 0.0) == (pytest.approx(3.0), pytest.approx(3e-6))
    assert compose_shuffled([0.5, 0.25], 1e-7, 0.0) == (pytest.approx(0.75), pytest.approx(2e-7))
    # few rounds: basic beats advanced even with slack, and keeps the smaller delta
    assert compose_shuffled([1.0, 1.0], 1e-6, 1e-6) == (pytest.approx(2.0), pytest.approx(2e-6))
    assert compose_shuffled([], 1e-6, 1e-6) == (0.0, 0.0)


def test_compose_advanced_homogeneous() -> None:
    k, eps, d, slack = 100, 0.1, 1e-8, 1e-6
    want = eps * math.sqrt(2 * k * math.log(1 / slack)) + k * eps * math.expm1(eps)
    got_eps, got_delta = compose_shuffled([eps] * k, d, slack)
    assert want < k * eps
    assert got_eps == pytest.approx(want, rel=1e-12)
    assert got_delta == pytest.approx(k * d + slack)


def test_compose_advanced_heterogeneous() -> None:
    epsilons = [0.05] * 60 + [0.2] * 40
    d, slack = 1e-9, 1e-5
    want = math.sqrt(2 * math.log(1 / slack) * sum(e * e for e in epsilons)) + sum(e * math.expm1(e) for e in epsilons)
    got_eps, got_delta = compose_shuffled(epsilons, d, slack)
    assert want < sum(epsilons)
    assert got_eps == pytest.approx(want, rel=1e-12)
    assert got_delta == pytest.approx(100 * d + slack)
    # no worse than advanced composition with every round at the max epsilon
    assert got_eps <= compose_shuffled([0.2] * 100, d, slack)[0]


def test_compose_validation() -> None:
    with pytest.raises(ValueError):
        compose_shuffled([1.0, -0.1], 1e-6, 1e-6)
    with pytest.raises(ValueError):
        compose_shuffled([1.0, math.inf], 1e-6, 1e-6)
    with pytest.raises(ValueError):
        compose_shuffled([1.0], 1.0, 1e-6)
    with pytest.raises(ValueError):
        compose_shuffled([1.0], 1e-6, -1e-6)
