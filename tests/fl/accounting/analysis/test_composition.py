"""Composition of one user's releases (docs/SPEC.md §0.3, §10) and the ledger's totals."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from dp_accounting import ComposedDpEvent, NeighboringRelation, RandomizedResponseDpEvent
from dp_accounting.pld import PLDAccountant

from fl.accounting import PrivacyLedger, compose_shuffled
from fl.accounting.analysis.composition import advanced, advanced_threshold, basic, compose, compose_worst
from mechanisms.guarantee import Guarantee

PUR = Guarantee("metric", 2.0, metric="angular", diameter=math.pi)  # Purkayastha eps1 = 2
LAP = Guarantee("metric", 2.0, metric="euclidean", diameter=2.0)  # planar Laplace eps1 = 2
RR = Guarantee("pure", 1.0, granularity="label")


@pytest.mark.parametrize(("guarantee", "per_release"), [(PUR, 2 * math.pi), (LAP, 4.0)])
def test_spec_table_epochs_plus_test(guarantee: Guarantee, per_release: float) -> None:
    """docs/SPEC.md §10: E fresh epochs + 1 test pass of the same user give (E+1) * pure eps1 + eps2."""
    epochs = 5
    ledger = PrivacyLedger({"train": 4})
    for _ in range(epochs + 1):
        ledger.record("train", [2], guarantee, "embedding")
    ledger.record("train", [2], RR, "label")
    snap = ledger.snapshot()
    assert snap["epsilon_ldp"] == pytest.approx((epochs + 1) * per_release)
    assert snap["epsilon_metric"] == pytest.approx((epochs + 1) * 2.0)
    assert snap["epsilon_total"] == pytest.approx((epochs + 1) * per_release + 1.0)
    assert snap["max_releases_per_user"] == epochs + 1
    total = snap["composition_total"]
    assert total["releases"] == epochs + 2 and total["epsilon_basic"] == pytest.approx(snap["epsilon_total"])
    assert total["epsilon_best_approx"] <= total["epsilon_basic"] + 1e-12


def test_basic_and_advanced_formulas() -> None:
    assert basic([(1.0, 1e-6, 3), (0.5, 0.0, 2)]) == pytest.approx((4.0, 3e-6))
    eps, delta = advanced(0.1, 1e-7, 100, 1e-6)
    assert eps == pytest.approx(0.1 * math.sqrt(200 * math.log(1e6)) + 100 * 0.1 * math.expm1(0.1))
    assert delta == pytest.approx(100 * 1e-7 + 1e-6)


def test_pld_matches_dp_accounting_randomized_response() -> None:
    """Any pure eps mechanism is dominated by binary RR(eps): our PLD composition equals
    dp-accounting's own RandomizedResponseDpEvent composition (to its discretisation)."""
    eps, r, delta = 0.5, 200, 1e-6
    ours = compose([(eps, 0.0, r)], delta)
    acc = PLDAccountant(neighboring_relation=NeighboringRelation.REPLACE_ONE)  # LDP: replace one input
    # An explicit ComposedDpEvent: dp-accounting 0.6's PLDAccountant returns the one-event epsilon for
    # SelfComposedDpEvent(RandomizedResponseDpEvent, r) (the count is lost), so it is not used here.
    acc.compose(ComposedDpEvent([RandomizedResponseDpEvent(2 / (1 + math.exp(eps)), 2)] * r))
    theirs = acc.get_epsilon(delta)
    assert ours.epsilon_pld == pytest.approx(theirs, rel=2e-3)
    assert ours.method == "pld" and ours.epsilon_best_approx < ours.epsilon_basic
    # 200 releases at 0.5 > advanced_threshold(200, 1e-6) = 0.49: the advanced bound (102) is above basic (100).
    assert ours.epsilon_advanced is None and ours.epsilon_advanced_note.startswith("not applicable: not below basic")


def test_approx_parts_keep_their_delta_and_small_counts_fall_back_to_basic() -> None:
    c = compose([(2.0, 1e-5, 10)], 1e-6)
    assert c.delta_basic == pytest.approx(1e-4) and c.delta_approx == pytest.approx(1e-4 + 1e-6)
    assert c.epsilon_best_approx <= 20.0 + 1e-9
    one = compose([(31.4, 0.0, 1)], 1e-6)
    assert one.epsilon_best_approx == pytest.approx(31.4, abs=1e-3) and one.epsilon_basic == 31.4


def test_clear_channel_is_infinite_not_a_number() -> None:
    ledger = PrivacyLedger({"train": 2})
    ledger.record("train", [0], PUR, "embedding")
    ledger.record("train", [0], Guarantee("pure", math.inf, granularity="label"), "label")
    snap = ledger.snapshot()
    assert snap["epsilon_total"] is None and snap["composition_total"]["epsilon_basic"] is None
    assert snap["composition_embedding"]["epsilon_basic"] == pytest.approx(2 * math.pi)


def test_huge_per_release_epsilons_do_not_overflow() -> None:
    """A long document under DeepCandidate at eps = 23 costs eps k / 2 > 700: e^eps overflows a float.
    The advanced bound is then infinite (reported as not applicable), PLD is not computed, and basic
    composition (exact for pure releases) wins; shuffled composition falls back to basic, no OverflowError."""
    out = compose([(1150.0, 0.0, 2)], 1e-6)
    assert advanced(1150.0, 0.0, 2, 1e-6)[0] == math.inf
    assert out.epsilon_advanced is None and "not finite" in out.epsilon_advanced_note
    assert out.epsilon_pld is None and out.epsilon_pld_note.startswith("not computed")
    assert out.epsilon_best_approx == pytest.approx(2300.0) and out.epsilon_basic == pytest.approx(2300.0)
    assert compose_shuffled([1150.0, 1150.0], 1e-6, 1e-6) == (pytest.approx(2300.0), pytest.approx(2e-6))


def test_worst_case_is_the_maximum_over_users_not_the_largest_basic_total() -> None:
    """Issue 11 item 4. User 0 makes 100 releases at eps 0.1 (basic 10, PLD 4.77 at 1e-6); user 1
    makes one release at eps 9 (basic 9, every method 9). The user with the largest basic total
    is user 0, but user 1 has the larger tight epsilon: the ledger must report ~9, not 4.77
    (composing only the largest basic total reported user 0's figure)."""
    small = Guarantee("pure", 0.1, granularity="sentence")
    big = Guarantee("pure", 9.0, granularity="sentence")
    ledger = PrivacyLedger({"train": 3})
    for _ in range(100):
        ledger.record("train", [0], small, "embedding")
    ledger.record("train", [1], big, "embedding")
    alone = compose([(0.1, 0.0, 100)], 1e-6)
    assert alone.epsilon_best_approx < 5.0  # user 0's own tight figure (4.77)
    comp = ledger.snapshot()["composition_embedding"]
    assert comp["epsilon_basic"] == pytest.approx(10.0)
    assert comp["epsilon_best_approx"] == pytest.approx(9.0, abs=1e-2)
    assert comp["epsilon_pld"] == pytest.approx(9.0, abs=1e-2)
    assert comp["over"] == "every user" and comp["users_composed"] == 1  # user 0's advanced bound 6.3 < 9


def test_worst_case_uses_one_delta_for_every_user() -> None:
    """Users with different summed deltas are all stated at the largest summed delta + target."""
    out = compose_worst([(1.0, 1e-5), (0.5, 0.0)], np.array([[3, 0], [0, 40], [1, 10]]), 1e-6)
    assert out["delta_approx"] == pytest.approx(3e-5 + 1e-6)
    each = [
        compose(parts, 1e-6, 3e-5 + 1e-6)
        for parts in ([(1.0, 1e-5, 3)], [(0.5, 0.0, 40)], [(1.0, 1e-5, 1), (0.5, 0.0, 10)])
    ]
    assert out["epsilon_best_approx"] == pytest.approx(max(c.epsilon_best_approx for c in each))
    assert out["epsilon_advanced"] is None  # the mixed user has no advanced bound
    assert out["epsilon_basic"] == pytest.approx(20.0) and out["releases"] == 40


def test_pld_stops_once_no_user_can_exceed_the_worst_found() -> None:
    """Users are composed by PLD in decreasing order of their closed-form bound and the loop
    stops when the next bound is below the worst figure found; users 1 and 2 (one release each,
    bounds 4 and 2) cannot exceed user 0's 6, so only one user is composed by PLD."""
    out = compose_worst([(6.0, 0.0), (4.0, 0.0), (2.0, 0.0)], np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1]]), 1e-6)
    assert out["users_composed"] == 1 and out["epsilon_best_approx"] == pytest.approx(6.0, abs=1e-2)
    assert out["epsilon_basic"] == 6.0 and out["epsilon_advanced"] is None  # one release each: never below basic
    assert out["epsilon_advanced_note"].startswith("not applicable: not below basic composition")
    # An unprotected channel for some user: no finite figure at all.
    clear = compose_worst([(1.0, 0.0), (math.inf, 0.0)], np.array([[2, 0], [1, 1]]), 1e-6)
    assert clear["epsilon_basic"] == math.inf and clear["epsilon_best_approx"] is None


# ----------------------------------------------------------------------------- issue 15 item 6
# Reported figures stay meaningful: a composed figure that is not below basic composition, or is
# not finite, is None with the reason; a figure that beats basic composition is kept.


def test_single_pure_release_reports_no_advanced_figure() -> None:
    """One release at pure 31.4: the advanced bound would be 31.4 (e^31.4 - 1) + ... = 1.4e15.
    It is reported as not applicable, with the reason; basic composition stays 31.4."""
    assert advanced(31.4, 0.0, 1, 1e-6)[0] > 1e15  # what used to be printed
    one = compose([(31.4, 0.0, 1)], 1e-6)
    assert one.epsilon_basic == 31.4 and one.epsilon_advanced is None
    assert one.epsilon_advanced_note.startswith("not applicable: not below basic composition")
    assert "more than 2 ln(1/delta') = 27.6 releases (here 1)" in one.epsilon_advanced_note
    assert one.epsilon_best_approx is not None and one.epsilon_best_approx <= 31.4
    # Through the ledger, as a run reports it: the whole snapshot is plain JSON (no Infinity, no 1e15).
    ledger = PrivacyLedger({"train": 3})
    ledger.record("train", [1], Guarantee("pure", 31.4, granularity="sentence"), "embedding")
    snap = ledger.snapshot()
    assert snap["epsilon_ldp"] == pytest.approx(31.4)
    for key in ("composition_embedding", "composition_total"):
        comp = snap[key]
        assert comp["epsilon_basic"] == pytest.approx(31.4) and comp["epsilon_advanced"] is None
        assert comp["epsilon_advanced_note"].startswith("not applicable: not below basic composition")
        assert comp["epsilon_best_approx"] <= 31.4
    text = json.dumps(snap, allow_nan=False)
    assert "e+15" not in text and "e+14" not in text


def test_many_small_releases_keep_the_advanced_figure() -> None:
    """k = 1000 releases at eps0 = 0.1 (below advanced_threshold(1000, 1e-6) = 0.606): advanced composition
    gives 0.1 sqrt(2000 ln 1e6) + 100 (e^0.1 - 1) = 27.1 < k eps0 = 100, and it is reported; PLD is tighter."""
    c = compose([(0.1, 0.0, 1000)], 1e-6)
    expected = 0.1 * math.sqrt(2000 * math.log(1e6)) + 1000 * 0.1 * math.expm1(0.1)
    assert c.epsilon_basic == pytest.approx(100.0)
    assert c.epsilon_advanced == pytest.approx(expected) and c.epsilon_advanced == pytest.approx(27.14, abs=0.01)
    assert c.epsilon_advanced < c.epsilon_basic and c.epsilon_advanced_note is None
    assert c.epsilon_pld is not None and c.epsilon_pld < c.epsilon_advanced and c.epsilon_pld_note is None
    # The same over a population (compose_worst): the maximum over users is kept, below the basic maximum.
    out = compose_worst([(0.1, 0.0)], np.array([[1000], [10]]), 1e-6)
    assert out["epsilon_advanced"] == pytest.approx(expected) and out["epsilon_advanced_note"] is None
    assert out["epsilon_pld"] == pytest.approx(c.epsilon_pld) and out["epsilon_pld_note"] is None


def test_advanced_threshold_is_the_boundary() -> None:
    """eps sqrt(2 r L) + r eps (e^eps - 1) < r eps iff r > 2 L and eps < ln(2 - sqrt(2 L / r)), L = ln(1/delta')."""
    delta = 1e-6
    two_l = 2 * math.log(1 / delta)  # 27.63
    t = advanced_threshold(1000, delta)
    assert t == pytest.approx(math.log(2 - math.sqrt(two_l / 1000))) and 0.6 < t < math.log(2)
    assert advanced(t, 0.0, 1000, delta)[0] == pytest.approx(1000 * t, rel=1e-12)  # equal at the boundary
    below, above = compose([(t * (1 - 1e-6), 0.0, 1000)], delta), compose([(t * (1 + 1e-6), 0.0, 1000)], delta)
    assert below.epsilon_advanced is not None and below.epsilon_advanced < below.epsilon_basic
    assert above.epsilon_advanced is None and above.epsilon_advanced_note.startswith("not applicable")
    assert f"{t:.4g}" in above.epsilon_advanced_note  # the reason names the threshold
    # In r: 27 releases are never enough at delta' = 1e-6 (27 <= 27.63), 28 are at a tiny epsilon.
    assert advanced_threshold(27, delta) == 0.0 and compose([(0.001, 0.0, 27)], delta).epsilon_advanced is None
    t28 = advanced_threshold(28, delta)
    assert 0.006 < t28 < 0.007
    assert compose([(0.005, 0.0, 28)], delta).epsilon_advanced is not None
    assert compose([(0.008, 0.0, 28)], delta).epsilon_advanced is None


@pytest.mark.parametrize("r", [1, 2, 10, 27, 28, 100, 1000, 5000])
def test_every_reported_figure_is_finite_and_below_basic(r: int) -> None:
    """Over a grid of per-release epsilons (including above e^eps overflow): a reported advanced or PLD figure
    is finite and strictly below basic; otherwise it is None with a note. Advanced is kept exactly below
    advanced_threshold (away from float ties)."""
    delta = 1e-6
    t = advanced_threshold(r, delta)
    for eps in (1e-3, 5e-3, 0.05, 0.1, 0.3, 0.5, 0.69, 1.0, 2.0, 9.0, 31.4, 800.0):
        c = compose([(eps, 0.0, r)], delta)
        for value, note in ((c.epsilon_advanced, c.epsilon_advanced_note), (c.epsilon_pld, c.epsilon_pld_note)):
            if value is None:
                assert note and note.startswith(("not applicable", "not computed"))
            else:
                assert math.isfinite(value) and value < c.epsilon_basic and note is None
        if abs(eps / t - 1) > 1e-9 if t > 0 else True:
            assert (c.epsilon_advanced is not None) == (eps < t), (r, eps)
        assert c.epsilon_best_approx <= c.epsilon_basic


def test_pld_a_hair_above_basic_is_not_reported() -> None:
    """PLD is the optimal composition but its pessimistic grid can land above basic: one release at 9 gives
    9.0045. Not reported (basic is the tight figure), and epsilon_best_approx is basic's 9."""
    c = compose([(9.0, 0.0, 1)], 1e-6)
    assert c.epsilon_pld is None and c.epsilon_pld_note.startswith("not applicable: not below basic composition")
    assert c.epsilon_best_approx == 9.0 and c.method == "basic"


def test_figures_not_computed_say_why() -> None:
    mixed = compose([(1.0, 0.0, 3), (0.5, 0.0, 2)], 1e-6)
    assert mixed.epsilon_advanced is None and "several (eps, delta) kinds" in mixed.epsilon_advanced_note
    many = compose([(0.1, 0.0, 3000)], 1e-6)
    assert many.epsilon_pld is None and many.epsilon_pld_note.startswith("not computed: more than 2000")
    assert many.epsilon_advanced is not None and many.method == "advanced"
    clear = compose([(math.inf, 0.0, 1)], 1e-6)
    assert clear.epsilon_advanced is None and "in the clear" in clear.epsilon_advanced_note
    none = compose([], 1e-6)
    assert none.epsilon_pld is None and none.epsilon_pld_note == "not applicable: no releases"
    vac = compose_worst([(1.0, 0.3)], np.array([[4]]), 1e-6)
    assert vac["epsilon_advanced"] is None and vac["epsilon_pld_note"] == "not applicable: the composed delta reaches 1"
