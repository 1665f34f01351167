"""Accounting v1: basic composition per user, re-sent releases free, unprotected channels never finite."""

from __future__ import annotations

import math

import pytest

import mechanisms
from fl.accounting import PrivacyLedger


def test_basic_composition_per_user() -> None:
    """Spec §10: E fresh draws of PurMech eps1 + one test pass, labels RR eps2 once."""
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
