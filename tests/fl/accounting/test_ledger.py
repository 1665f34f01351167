"""Accounting v1: basic composition per user, re-sent releases free, unprotected channels never finite."""

from __future__ import annotations

import json
import math

import pytest

import mechanisms
from fl.accounting import PrivacyLedger


def test_basic_composition_per_user() -> None:
    """docs/SPEC.md §10: E fresh draws of PurMech eps1 + one test pass, labels RR eps2 once."""
    eps1, eps2, epochs = 10.0, 2.0, 3
    ledger = PrivacyLedger({"train": 4, "test": 2})
    pur = mechanisms.create("purkayastha", epsilon=eps1).guarantee
    rr = mechanisms.create("rr", epsilon=eps2).guarantee
    for _ in range(epochs):
        ledger.record("train", [0, 1, 2, 3], pur, "embedding")
    ledger.record("train", [0, 1, 2, 3], rr, "label")
    snap = ledger.snapshot()
    assert snap["epsilon_metric"] == pytest.approx(epochs * eps1)
    assert snap["epsilon_ldp"] == pytest.approx(epochs * math.pi * eps1)
    assert snap["epsilon_label"] == pytest.approx(eps2)
    assert snap["epsilon_total"] == pytest.approx(epochs * math.pi * eps1 + eps2)
    assert snap["releases"] == 12 and snap["max_releases_per_user"] == 3
    # The same user evaluated once more (it is the same person: counts in its own row).
    ledger.record("train", [0], pur, "embedding")
    assert ledger.snapshot()["epsilon_ldp"] == pytest.approx((epochs + 1) * math.pi * eps1)
    assert ledger.snapshot()["epsilon_ldp_median"] == pytest.approx(epochs * math.pi * eps1)


def test_different_users_compose_in_parallel() -> None:
    ledger = PrivacyLedger({"train": 3, "test": 3})
    g = mechanisms.create("purkayastha", epsilon=1.0).guarantee
    ledger.record("train", [0, 1, 2], g, "embedding")
    ledger.record("test", [0, 1, 2], g, "embedding")
    assert ledger.snapshot()["epsilon_metric"] == pytest.approx(1.0)


def test_clear_channels_report_none_and_unprotected() -> None:
    ledger = PrivacyLedger({"train": 2})
    ledger.record("train", [0, 1], mechanisms.create("none", level="sentence").guarantee, "embedding")
    ledger.record("train", [0, 1], mechanisms.create("none", level="label").guarantee, "label")
    snap = ledger.snapshot()
    assert snap["epsilon_ldp"] is None and snap["epsilon_label"] is None and snap["epsilon_total"] is None
    assert snap["embedding_protected"] is False and snap["label_protected"] is False


def test_word_level_releases_compose_over_their_words() -> None:
    """A release of k words costs k per-word epsilons; it is one release, and k composition units."""
    ledger = PrivacyLedger({"train": 3})
    per_word = mechanisms.Guarantee(notion="pure", epsilon=2.0, granularity="word")
    ledger.record("train", [0, 1, 2], per_word, "embedding", units=[5, 3, 0])
    snap = ledger.snapshot()
    assert snap["epsilon_ldp"] == pytest.approx(10.0) and snap["epsilon_ldp_median"] == pytest.approx(6.0)
    assert snap["releases"] == 3 and snap["max_releases_per_user"] == 1
    comp = snap["composition_embedding"]
    assert comp["releases"] == 5 and comp["epsilon_basic"] == pytest.approx(10.0)
    with pytest.raises(ValueError, match="one count >= 0 per release"):
        ledger.record("train", [0, 1], per_word, "embedding", units=[1])


def test_word_level_metric_and_approximate_guarantees() -> None:
    ledger = PrivacyLedger({"train": 2})
    cmp = mechanisms.Guarantee(notion="metric", epsilon=3.0, metric="euclidean", diameter=2.0, granularity="word")
    ledger.record("train", [0, 1], cmp, "embedding", units=[4, 1])
    snap = ledger.snapshot()
    # eps * sum_i d(w_i, w'_i): the metric epsilon is per unit of summed distance, not multiplied by k.
    assert snap["metric"] == "euclidean_sum" and snap["epsilon_metric"] == pytest.approx(3.0)
    assert snap["epsilon_ldp"] == pytest.approx(4 * 3.0 * 2.0)
    # TrLaplace-like deltas add per word and saturate at 1: no approximate statement is left.
    ledger = PrivacyLedger({"train": 1})
    approx = mechanisms.Guarantee(notion="approx", epsilon=1.0, delta=0.3, granularity="word")
    ledger.record("train", [0], approx, "embedding", units=[4])
    snap = ledger.snapshot()
    assert snap["delta_total"] == 1.0 and snap["epsilon_ldp"] == pytest.approx(4.0)
    assert snap["composition_embedding"]["method"].startswith("vacuous")
    assert snap["composition_embedding"]["epsilon_best_approx"] is None
    # A zero-word document under a clear-text per-word guarantee costs nothing (no nan).
    ledger = PrivacyLedger({"train": 1})
    ledger.record("train", [0], mechanisms.no_privacy("word"), "embedding", units=[0])
    assert ledger.snapshot()["epsilon_ldp"] == 0.0


def test_composed_figures_are_numbers_only_when_they_beat_basic() -> None:
    """Issue 15 item 6: the composition blocks of a snapshot carry epsilon_advanced / epsilon_pld only when
    finite and below epsilon_basic, else None with a *_note; the snapshot is plain JSON."""
    small = mechanisms.Guarantee(notion="pure", epsilon=0.1, granularity="sentence")
    ledger = PrivacyLedger({"train": 2, "test": 1})
    for _ in range(1000):
        ledger.record("train", [0], small, "embedding")
    comp = ledger.snapshot()["composition_embedding"]
    assert comp["epsilon_basic"] == pytest.approx(100.0)
    assert comp["epsilon_advanced"] == pytest.approx(27.14, abs=0.01) and comp["epsilon_advanced_note"] is None
    assert comp["epsilon_pld"] < comp["epsilon_advanced"] and comp["epsilon_pld_note"] is None
    # One test user releasing once at pure 31.4 besides: every user is still covered, the maxima change.
    ledger.record("test", [0], mechanisms.Guarantee(notion="pure", epsilon=31.4, granularity="sentence"), "embedding")
    snap = ledger.snapshot()
    comp = snap["composition_embedding"]
    assert comp["epsilon_basic"] == pytest.approx(100.0)  # the train user's basic total is still the maximum
    assert comp["epsilon_advanced"] is None  # the test user's advanced bound (1.4e15) is not below 100
    assert comp["epsilon_advanced_note"].startswith("not applicable: not below basic composition")
    assert comp["epsilon_best_approx"] == pytest.approx(31.4, abs=1e-3)  # the test user's best figure
    json.dumps(snap, allow_nan=False)
    # A channel in the clear: no number, every figure says why.
    ledger.record("train", [1], mechanisms.create("none", level="sentence").guarantee, "embedding")
    comp = ledger.snapshot()["composition_embedding"]
    assert comp["epsilon_basic"] is None and comp["epsilon_advanced"] is None and comp["epsilon_pld"] is None
    assert "in the clear" in comp["epsilon_advanced_note"] and "in the clear" in comp["epsilon_pld_note"]


def test_composition_names_its_accountants_in_plain_json() -> None:
    """Issue 16 item 4: the snapshot's composed figures say which accountant produced them."""
    ledger = PrivacyLedger({"train": 2})
    rr = mechanisms.create("rr", epsilon=1.0).guarantee
    for _ in range(3):
        ledger.record("train", [0], rr, "label")  # K unknown: the generic pair
    out = ledger.snapshot()["composition_total"]
    assert out["epsilon_pld_accountant"] == "pld-generic (eps, delta) pair"
    assert out["accountant"] in ("basic", "advanced", out["epsilon_pld_accountant"])
    ledger.record("train", [1, 1, 1], rr.over(2), "label")
    out = ledger.snapshot()["composition_total"]
    assert (
        set(out["epsilon_pld_accountant"].split("; "))
        == {
            "pld-generic (eps, delta) pair",
            "pld-mechanism-specific (RandomizedResponseDpEvent)",
        }
        or out["users_composed"] == 1
    )
    json.dumps(ledger.snapshot())
