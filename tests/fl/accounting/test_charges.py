"""Mechanism-specific composition (issue 16 item 4): dp-accounting events for Laplace, Gaussian and
randomized response releases, checked against closed forms and dp-accounting's own fine PLDs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import privacy_loss_distribution
from scipy import optimize, special

import mechanisms
from fl.accounting import PrivacyLedger
from fl.accounting.analysis.composition import (
    ACCOUNTANT_PLD_GENERIC,
    compose,
    compose_worst,
    mechanism_event,
    pld,
    pld_accountant,
)
from fl.accounting.charges import Charge
from mechanisms.clipped_additive import analytic_gaussian_sigma
from mechanisms.guarantee import Guarantee
from mechanisms.randomized_response import keep_probability

LAPLACE = "pld-mechanism-specific (LaplaceDpEvent)"
GAUSSIAN = "pld-mechanism-specific (GaussianDpEvent)"
RR_EVENT = "pld-mechanism-specific (RandomizedResponseDpEvent)"


def _epsilon_for_delta(delta_of, delta: float, hi: float) -> float:
    """The smallest eps >= 0 with delta_of(eps) <= delta (delta_of decreasing), by bisection."""
    if delta_of(0.0) <= delta:
        return 0.0
    return optimize.brentq(lambda e: delta_of(e) - delta, 0.0, hi, xtol=1e-12)


def _rr_composed_delta(eps: float, k_buckets: int, k: int, eps_prime: float) -> float:
    """Exact privacy profile of k-RR on K buckets composed k times (replace-one), in closed form.

    Per release under the input x: loss +eps when the output is x (prob e^eps / (e^eps + K - 1)),
    -eps when it is x' (prob 1 / (e^eps + K - 1)), 0 otherwise. After k releases with a outputs
    x and b outputs x' the loss is eps (a - b); delta(eps') = E[(1 - e^(eps' - L))_+].
    """
    norm = math.exp(eps) + k_buckets - 1
    p_plus, p_minus = math.exp(eps) / norm, 1.0 / norm
    p_zero = 1.0 - p_plus - p_minus
    total = 0.0
    for a in range(k + 1):
        for b in range(k - a + 1):
            loss = eps * (a - b)
            if loss <= eps_prime:
                continue
            c = math.factorial(k) / (math.factorial(a) * math.factorial(b) * math.factorial(k - a - b))
            total += c * p_plus**a * p_minus**b * p_zero ** (k - a - b) * -math.expm1(eps_prime - loss)
    return total


def _rr(eps: float, buckets: int) -> Guarantee:
    return Guarantee("pure", eps, granularity="label", accounting="randomized_response", buckets=buckets)


def _gaussian_delta(mu: float, eps: float) -> float:
    """Exact delta(eps) of N(0, 1) vs N(mu, 1) (Balle & Wang 2018, Thm 8)."""
    return float(special.ndtr(mu / 2 - eps / mu) - math.exp(eps) * special.ndtr(-mu / 2 - eps / mu))


# --- the mapping ---------------------------------------------------------------------------------


@pytest.mark.parametrize("k_buckets", [2, 3, 10])
@pytest.mark.parametrize("eps", [0.1, 1.0, 5.0])
def test_rr_event_is_the_mechanisms_law(eps: float, k_buckets: int) -> None:
    """dp-accounting's RR keeps the input w.p. 1 - p + p/K and outputs each other bucket w.p. p/K:
    the event's p reproduces rr's keep probability and its probability of each other label."""
    g = mechanisms.create("rr", epsilon=eps).guarantee
    event = mechanism_event(g.over(k_buckets))
    assert isinstance(event, dp_event.RandomizedResponseDpEvent) and event.num_buckets == k_buckets
    p = event.noise_parameter
    assert 1 - p + p / k_buckets == pytest.approx(keep_probability(eps, k_buckets), rel=1e-12)
    assert p / k_buckets == pytest.approx((1 - keep_probability(eps, k_buckets)) / (k_buckets - 1), rel=1e-12)


def test_laplace_and_gaussian_events_match_the_mechanisms_noise() -> None:
    """Laplace: scale / L1 diameter = 1 / eps. Gaussian: sigma / L2 diameter of the clipped Gaussian."""
    lap = mechanisms.create("laplace", epsilon=2.0).guarantee
    assert mechanism_event(lap) == dp_event.LaplaceDpEvent(0.5)
    assert mechanism_event(
        Guarantee("pure", 0.25, granularity="word", accounting="laplace")
    ) == dp_event.LaplaceDpEvent(4.0)
    for clip in (0.3, 1.0, 7.0):
        mech = mechanisms.create("gaussian", epsilon=1.5, delta=1e-5, clip=clip)
        event = mechanism_event(mech.guarantee)
        assert isinstance(event, dp_event.GaussianDpEvent)
        assert event.noise_multiplier == pytest.approx(mech.sigma / (2 * clip), rel=2e-9)
        assert event.noise_multiplier <= mech.sigma / (2 * clip)  # never more noise than the mechanism adds
    word = Guarantee("approx", 1.0, 1e-5, granularity="word", accounting="gaussian")
    assert mechanism_event(word).noise_multiplier == pytest.approx(
        analytic_gaussian_sigma(1.0, 1e-5, 2.0) / 2.0, rel=2e-9
    )


@pytest.mark.parametrize(
    "guarantee",
    [
        Guarantee("pure", 1.0, granularity="label"),  # no kind declared
        Guarantee("pure", 1.0, granularity="label", accounting="randomized_response"),  # K unknown
        Guarantee("pure", 1.0, granularity="label").over(5),  # no kind: over() adds nothing (rr_prior)
        Guarantee("approx", 1.0, 1e-6, granularity="word"),  # trlaplace
        Guarantee("metric", 1.0, metric="euclidean", diameter=2.0),  # planar_laplace
        Guarantee("approx", 1.0, 1e-5, accounting="laplace"),  # not the kind's own notion
        Guarantee("pure", 1.0, accounting="gaussian"),
        Guarantee("pure", math.inf, accounting="laplace"),  # in the clear
    ],
)
def test_no_event_where_none_describes_the_release_exactly(guarantee: Guarantee) -> None:
    assert mechanism_event(guarantee) is None


def test_rr_needs_two_buckets() -> None:
    with pytest.raises(ValueError, match="buckets >= 2"):
        _rr(1.0, 1)
    with pytest.raises(ValueError, match="buckets >= 2"):
        Guarantee("pure", 1.0, granularity="label", accounting="randomized_response").over(1)
    with pytest.raises(ValueError, match="accounting kind"):
        Guarantee("pure", 1.0, accounting="rr")


def test_each_mechanism_with_an_exact_event_declares_its_kind() -> None:
    """The kinds the accountant reads are the mechanisms' own declarations (no name tests): Laplace,
    Gaussian and randomized response declare theirs, class_rr its K-ary RR only for one class per
    release, and a mechanism without an exact event declares none."""
    assert mechanisms.create("laplace", epsilon=1.0).guarantee.accounting == "laplace"
    assert mechanisms.create("gaussian", epsilon=1.0, delta=1e-5).guarantee.accounting == "gaussian"
    assert mechanisms.create("rr", epsilon=1.0).guarantee.accounting == "randomized_response"
    one = mechanisms.create("class_rr", epsilon=1.0, num_classes=4).guarantee
    assert (one.accounting, one.buckets) == ("randomized_response", 4)
    assert mechanisms.create("class_rr", epsilon=1.0, num_classes=4, subset_size=2).guarantee.accounting is None
    assert mechanisms.create("purkayastha", epsilon=1.0).guarantee.accounting is None
    assert mechanisms.create("rr_prior", epsilon=1.0).guarantee.accounting is None  # not K-ary RR's law


def test_multidimensional_laplace_is_dominated_by_the_event() -> None:
    """LaplaceDpEvent is dp-accounting's coordinate-wise Laplace with ||v||_1 <= sensitivity: a shift
    spread over coordinates (word_laplace's worst case in R^n) has a smaller privacy profile than
    the whole L1 shift on one coordinate, which the event composes."""
    one = privacy_loss_distribution.from_laplace_mechanism(1.0, sensitivity=1.0)
    for split in [(0.5, 0.5), (0.3, 0.7), (0.1, 0.2, 0.3, 0.4)]:
        spread = None
        for s in split:
            part = privacy_loss_distribution.from_laplace_mechanism(1.0, sensitivity=s)
            spread = part if spread is None else spread.compose(part)
        for eps in (0.0, 0.2, 0.5, 0.8, 0.95):
            assert spread.get_delta_for_epsilon(eps) <= one.get_delta_for_epsilon(eps) + 1e-9


# --- composition -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("eps", "k"), [(1.0, 20), (0.5, 10), (2.0, 5)])
@pytest.mark.parametrize("delta", [1e-6, 1e-3])
def test_laplace_specific_is_tighter_than_generic_and_above_the_exact_value(eps: float, k: int, delta: float) -> None:
    """k pure-eps Laplace releases: mechanism-specific PLD <= generic-pair PLD, and both >= an optimistic
    (lower) fine-grid PLD of the exact Laplace composition, the specific one within 1e-2 of it."""
    event = mechanism_event(Guarantee("pure", eps, granularity="word", accounting="laplace"))
    specific = pld([(eps, 0.0, k, event)], delta)
    generic = pld([(eps, 0.0, k)], delta)
    lower = privacy_loss_distribution.from_laplace_mechanism(
        1.0 / eps, pessimistic_estimate=False, value_discretization_interval=1e-5
    )
    reference = float(lower.self_compose(k).get_epsilon_for_delta(delta))
    assert reference <= specific <= generic + 1e-12
    assert specific - reference < 1e-2
    c = compose([(eps, 0.0, k, event)], delta)
    assert c.epsilon_pld_accountant == LAPLACE
    if c.epsilon_pld is not None:
        assert c.epsilon_pld == pytest.approx(specific) and c.accountant == LAPLACE


@pytest.mark.parametrize(("eps", "k"), [(1.0, 3), (0.5, 5), (1.0, 10), (2.0, 4)])
@pytest.mark.parametrize("delta", [1e-6, 1e-3, 5e-2])
def test_binary_rr_equals_its_exact_composition(eps: float, k: int, delta: float) -> None:
    """RR on 2 labels: the event's figure equals the closed-form privacy profile of k releases inverted
    at delta (to the discretisation, from above), and equals the generic pure pair (binary RR)."""
    g = mechanisms.create("rr", epsilon=eps).guarantee
    event = mechanism_event(g.over(2))
    exact = _epsilon_for_delta(lambda e: _rr_composed_delta(eps, 2, k, e), delta, k * eps)
    specific = pld([(eps, 0.0, k, event)], delta)
    assert exact - 1e-9 <= specific <= exact + 2e-3
    assert specific == pytest.approx(pld([(eps, 0.0, k)], delta), abs=2e-3)


@pytest.mark.parametrize("k_buckets", [3, 5, 10])
def test_k_rr_equals_its_exact_composition_and_beats_the_generic_pair(k_buckets: int) -> None:
    eps, k, delta = 1.0, 5, 1e-3
    event = mechanism_event(_rr(eps, k_buckets))
    exact = _epsilon_for_delta(lambda e: _rr_composed_delta(eps, k_buckets, k, e), delta, k * eps)
    specific = pld([(eps, 0.0, k, event)], delta)
    assert exact - 1e-9 <= specific <= exact + 2e-3
    assert specific < pld([(eps, 0.0, k)], delta) - 5e-3


@pytest.mark.parametrize(("eps", "delta0", "k"), [(1.0, 1e-5, 20), (1.0, 1e-5, 3), (4.0, 1e-6, 7)])
def test_gaussian_matches_the_analytic_gaussian_composition(eps: float, delta0: float, k: int) -> None:
    """k Gaussians of noise multiplier z compose to one of mu = sqrt(k) / z: the figure equals the
    analytic Gaussian privacy profile (Balle & Wang) inverted at delta_approx, from above."""
    g = Guarantee("approx", eps, delta0, granularity="word", accounting="gaussian")
    event = mechanism_event(g)
    c = compose([(eps, delta0, k, event)], 1e-6)
    mu = math.sqrt(k) / event.noise_multiplier
    exact = _epsilon_for_delta(lambda e: _gaussian_delta(mu, e), c.delta_approx, k * eps)
    assert c.epsilon_pld_accountant == GAUSSIAN and c.epsilon_pld is not None
    assert exact - 1e-9 <= c.epsilon_pld <= exact + 2e-3
    assert c.epsilon_best_approx == c.epsilon_pld and c.accountant == GAUSSIAN
    generic = compose([(eps, delta0, k)], 1e-6)
    assert generic.epsilon_pld_accountant == ACCOUNTANT_PLD_GENERIC
    assert c.epsilon_best_approx < generic.epsilon_best_approx


def test_every_figure_names_its_accountant() -> None:
    lap = dp_event.LaplaceDpEvent(1.0)
    assert pld_accountant([None]) == ACCOUNTANT_PLD_GENERIC
    assert pld_accountant([lap, lap]) == LAPLACE
    assert pld_accountant([lap, None]) == f"{LAPLACE} + {ACCOUNTANT_PLD_GENERIC}"
    one = compose([(9.0, 0.0, 1)], 1e-6)  # one release: basic is the tight figure
    assert one.accountant == "basic" and one.method == "basic" and one.epsilon_pld is None
    assert one.epsilon_pld_accountant == ACCOUNTANT_PLD_GENERIC  # computed, not reported (see the note)
    lap_one = compose([(1.0, 0.0, 1, lap)], 1e-6)  # one Laplace release: a hair below 1 at delta 1e-6
    assert lap_one.accountant == LAPLACE and lap_one.epsilon_pld < 1.0
    mixed = compose([(1.0, 0.0, 20, lap), (0.5, 0.0, 4)], 1e-6)
    assert mixed.epsilon_pld_accountant == f"{LAPLACE} + {ACCOUNTANT_PLD_GENERIC}"
    assert mixed.accountant == mixed.epsilon_pld_accountant
    assert compose([], 1e-6).accountant == "basic" and compose([], 1e-6).epsilon_pld_accountant is None
    vacuous = compose([(1.0, 0.6, 2)], 1e-6)
    assert vacuous.accountant == vacuous.method == "vacuous: the composed delta reaches 1"


def test_compose_worst_with_events() -> None:
    """Kinds may carry events; the worst user's figure and its accountant are reported."""
    lap = dp_event.LaplaceDpEvent(1.0)
    kinds = [(1.0, 0.0, lap), (1.0, 0.0)]
    counts = np.array([[20, 0], [0, 20], [5, 0]])
    out = compose_worst(kinds, counts, 1e-6)
    generic = compose([(1.0, 0.0, 20)], 1e-6)
    assert out["epsilon_best_approx"] == pytest.approx(generic.epsilon_best_approx)  # the generic user is worst
    assert out["accountant"] == ACCOUNTANT_PLD_GENERIC
    assert set(out["epsilon_pld_accountant"].split("; ")) <= {LAPLACE, ACCOUNTANT_PLD_GENERIC}
    only_lap = compose_worst([(1.0, 0.0, lap)], np.array([[20], [3]]), 1e-6)
    assert only_lap["accountant"] == only_lap["epsilon_pld_accountant"] == LAPLACE
    assert only_lap["epsilon_best_approx"] == pytest.approx(compose([(1.0, 0.0, 20, lap)], 1e-6).epsilon_pld)
    legacy = compose_worst([(1.0, 0.0)], np.array([[20]]), 1e-6)  # (eps, delta) kinds still work
    assert legacy["epsilon_pld_accountant"] == ACCOUNTANT_PLD_GENERIC


def test_ledger_composes_declared_kinds_by_their_event() -> None:
    """A guarantee with its mechanism's kind counts its releases under the kind's event; without one
    the generic pair is composed; the basic sums do not change."""
    plain = Guarantee("pure", 1.0, granularity="word")
    per_word = Guarantee("pure", 1.0, granularity="word", accounting="laplace")
    named, unnamed = PrivacyLedger({"train": 3}), PrivacyLedger({"train": 3})
    named.record("train", [0, 1], per_word, "embedding", units=[20, 5])
    unnamed.record("train", [0, 1], plain, "embedding", units=[20, 5])
    a, b = named.snapshot(), unnamed.snapshot()
    assert a["epsilon_ldp"] == b["epsilon_ldp"] == pytest.approx(20.0)
    ca, cb = a["composition_embedding"], b["composition_embedding"]
    assert ca["epsilon_pld_accountant"] == LAPLACE and cb["epsilon_pld_accountant"] == ACCOUNTANT_PLD_GENERIC
    assert ca["epsilon_best_approx"] < cb["epsilon_best_approx"] - 0.2
    rr = mechanisms.create("rr", epsilon=1.0).guarantee
    named.record("train", [0, 0, 0], rr.over(5), "label")
    total = named.snapshot()["composition_total"]
    assert total["epsilon_pld_accountant"] == "pld-mechanism-specific (LaplaceDpEvent, RandomizedResponseDpEvent)"


def test_a_charge_carries_the_kind_on_the_wire_and_the_statement_leaves_it_out() -> None:
    g = Guarantee("pure", 1.0, granularity="label")
    old = Charge(g)
    assert old.event is None and old.to_dict() == {"guarantee": g.to_dict(), "units": None}
    assert Charge.from_dict({"guarantee": g.to_dict(), "units": None}) == old  # a guarantee without a kind
    rr = Guarantee("pure", 1.0, granularity="label", accounting="randomized_response").over(4)
    new = Charge(rr)
    assert new.event == mechanism_event(rr) and new.num_buckets == 4 and new.cost == old.cost
    assert rr.to_dict() == g.to_dict()  # what the guarantee states (reports) is unchanged
    assert new.to_dict() == {"guarantee": g.to_dict(), "units": None, "accounting": "randomized_response", "buckets": 4}
    assert Charge.from_dict(new.to_dict()) == new
    word = Charge(Guarantee("pure", 1.0, granularity="word", accounting="laplace"), 7)
    assert Charge.from_dict(word.to_dict()) == word and word.event == dp_event.LaplaceDpEvent(1.0)
