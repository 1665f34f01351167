"""PLD composition of shuffled rounds: fl/accounting/analysis/shuffle_pld.py.

The pair is enumerated by brute force from its definition (tests/fl/accounting/analysis/test_variation_ratio.py's
``brute_vr_pair``) and its exact hockey-stick divergences, alone and composed, are compared with
the PLD's figures: the PLD must never be below them (it is pessimistic) and must be close.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fl.accounting.analysis.shuffle import compose_shuffled
from fl.accounting.analysis.shuffle_pld import ShuffledRound, compose_shuffled_pld, shuffled_round_pld
from fl.accounting.analysis.variation_ratio import general_ldp, shuffle_amplification, vr_delta
from tests.support.shuffle_pairs import brute_vr_pair

N_SST2 = 67_349
DELTA = 1e-6


def _pair_arrays(eps0: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    P, Q = brute_vr_pair(general_ldp(eps0), n)
    keys = sorted(set(P) | set(Q))
    return np.array([P[k] for k in keys]), np.array([Q[k] for k in keys])


def _exact_delta(p: np.ndarray, q: np.ndarray, eps: float) -> float:
    return float(np.maximum(0.0, p - math.exp(eps) * q).sum())


@pytest.mark.parametrize(("eps0", "n"), [(1.0, 8), (2.0, 12), (4.0, 20)])
def test_one_round_covers_and_matches_the_exact_divergence(eps0: float, n: int) -> None:
    p, q = _pair_arrays(eps0, n)
    pld = shuffled_round_pld(eps0, n)
    for eps in (0.0, 0.2, 0.5, 1.0, 0.9 * eps0):
        exact = _exact_delta(p, q, eps)
        got = float(pld.get_delta_for_epsilon(eps))
        assert got >= exact - 1e-12, (eps, got, exact)
        assert got <= exact * 1.02 + 2e-4, (eps, got, exact)
        # and the divergence the variation-ratio evaluator computes is the same quantity
        assert vr_delta(eps, general_ldp(eps0), n, exact=True) == pytest.approx(exact, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize(("eps0", "n", "k"), [(1.5, 6, 2), (3.0, 8, 3)])
def test_composition_covers_and_matches_the_exact_product(eps0: float, n: int, k: int) -> None:
    p, q = _pair_arrays(eps0, n)
    pk, qk = p, q
    for _ in range(k - 1):
        pk, qk = np.outer(pk, p).ravel(), np.outer(qk, q).ravel()
    composed = shuffled_round_pld(eps0, n).self_compose(k)
    for eps in (0.25, 0.5, 1.0, 2.0):
        exact = _exact_delta(pk, qk, eps)
        got = float(composed.get_delta_for_epsilon(eps))
        assert got >= exact - 1e-12, (eps, got, exact)
        assert got <= exact * 1.03 + 5e-4, (eps, got, exact)


def test_a_wrong_pair_is_caught() -> None:
    """Power: swapping the victim's weights (the pair of a different randomizer) breaks the match above."""
    eps0, n = 2.0, 12
    p, q = _pair_arrays(eps0, n)
    pld = shuffled_round_pld(eps0 / 2.0, n)  # the pair of a randomizer at half the epsilon
    assert float(pld.get_delta_for_epsilon(0.5)) < _exact_delta(p, q, 0.5) - 1e-3


def test_one_round_agrees_with_the_variation_ratio_figure_at_sst2_scale() -> None:
    for eps1 in (1.0, 2.0):
        eps0 = math.pi * eps1
        vr = shuffle_amplification(eps0, N_SST2, DELTA).epsilon
        got = compose_shuffled_pld([(eps0, N_SST2)], DELTA)
        assert vr - 1e-4 <= got <= vr + 5e-3, (eps1, got, vr)


def test_pld_composition_beats_advanced_composition_at_sst2_scale() -> None:
    """Three fresh-noise rounds at Purkayastha epsilon1 = 1 (pure pi): the before/after of issue 16."""
    eps0, k = math.pi, 3
    one = shuffle_amplification(eps0, N_SST2, DELTA / (2 * k)).epsilon
    before, _ = compose_shuffled([one] * k, DELTA / (2 * k), DELTA / 2)
    after = compose_shuffled_pld([ShuffledRound(eps0, N_SST2)] * k, DELTA)
    single = compose_shuffled_pld([(eps0, N_SST2)], DELTA)
    assert single < after < before
    assert after < 0.6 * before  # about 0.161 against 0.297


def test_heterogeneous_rounds_and_caps() -> None:
    mixed = compose_shuffled_pld([(1.0, 1000), (2.0, 500)], DELTA)
    assert compose_shuffled_pld([(1.0, 1000)], DELTA) < mixed < 3.0
    # no amplification possible at huge epsilon0: never above the basic sum
    assert compose_shuffled_pld([(40.0, 100)] * 2, DELTA) <= 80.0
    assert compose_shuffled_pld([], DELTA) == 0.0


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_bad_epsilon0_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="epsilon0"):
        shuffled_round_pld(bad, 100)


def test_bad_n_and_delta_are_refused() -> None:
    with pytest.raises(ValueError):
        shuffled_round_pld(1.0, 0)
    with pytest.raises(ValueError, match="delta"):
        compose_shuffled_pld([(1.0, 100)], 0.0)
