"""Composition of one user's releases (docs/SPEC.md §0.3, §10) and the ledger's totals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting import ComposedDpEvent, NeighboringRelation, RandomizedResponseDpEvent
from dp_accounting.pld import PLDAccountant

from fl.accounting import PrivacyLedger
from fl.accounting.composition import advanced, basic, compose
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
    assert ours.method == "pld" and ours.epsilon_best_approx < min(ours.epsilon_advanced, ours.epsilon_basic)


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
    The advanced bound is then infinite, and basic composition (exact for pure releases) wins."""
    from fl.accounting.composition import compose

    out = compose([(1150.0, 0.0, 2)], 1e-6)
    assert out.epsilon_advanced == float("inf") and out.epsilon_best_approx == pytest.approx(2300.0)
    assert out.epsilon_basic == pytest.approx(2300.0)


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
    from fl.accounting.composition import compose_worst

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
    from fl.accounting.composition import compose_worst

    out = compose_worst([(6.0, 0.0), (4.0, 0.0), (2.0, 0.0)], np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1]]), 1e-6)
    assert out["users_composed"] == 1 and out["epsilon_best_approx"] == pytest.approx(6.0, abs=1e-2)
    assert out["epsilon_basic"] == 6.0 and out["epsilon_advanced"] is not None
    # An unprotected channel for some user: no finite figure at all.
    clear = compose_worst([(1.0, 0.0), (math.inf, 0.0)], np.array([[2, 0], [1, 1]]), 1e-6)
    assert clear["epsilon_basic"] == math.inf and clear["epsilon_best_approx"] is None
