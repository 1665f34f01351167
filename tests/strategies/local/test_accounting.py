"""ReleaseTraining and its LocalDPAccounting wrapper, driven by hand-made replies (as Flower's own
strategy tests drive theirs): storage, re-sent releases, the ledger's entries and the round record,
without a simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from flwr.app import ArrayRecord, ConfigRecord, RecordDict

from fl import wire
from fl.accounting.charges import Charge
from mechanisms.guarantee import Guarantee
from strategies.local.accounting import LocalDPAccounting
from strategies.local.release_training import ReleaseTraining
from tests.support.grids import FakeGrid
from tests.support.ledger_nodes import EPS, LABEL_EPS, NODES, Nodes, ledger_cfg


def _round(acc: LocalDPAccounting, grid: FakeGrid, server_round: int) -> dict:
    messages = list(acc.configure_train(server_round, ArrayRecord(), ConfigRecord(), grid))
    arrays, _ = acc.aggregate_train(server_round, grid.send_and_receive(messages))
    assert arrays is not None
    messages = list(acc.configure_evaluate(server_round, arrays, ConfigRecord(), grid))
    acc.aggregate_evaluate(server_round, grid.send_and_receive(messages))
    return acc.records[-1]


def test_fresh_releases_are_charged_once_and_resent_ones_are_free() -> None:
    """Round 1 samples 4 of 8 users: each is charged pi * eps (Purkayastha) + the label's eps; test
    users pi * eps once. Round 2 samples 4 users again: the already-released ones re-send for free."""
    core = ReleaseTraining(ledger_cfg())
    acc = LocalDPAccounting(core, core.cfg)
    grid = FakeGrid(NODES, Nodes(core))
    record = _round(acc, grid, 1)
    assert acc.ledger is not None
    first = core.sample_users(1)
    spent = acc.ledger.spent("train", np.arange(8))
    assert spent[first] == pytest.approx(np.full(4, math.pi * EPS + LABEL_EPS))
    assert spent[np.setdiff1d(np.arange(8), first)] == pytest.approx(np.zeros(4))
    assert acc.ledger.spent("test", np.arange(4)) == pytest.approx(np.full(4, math.pi * EPS))
    assert record["fresh_train_releases"] == 4 and record["fresh_test_releases"] == 4
    assert record["train_releases_total"] == 4 and len(core._y) == 4
    assert record["privacy"]["epsilon_ldp"] == pytest.approx(math.pi * EPS)
    assert record["privacy"]["evaluation_covered"] is False and record["ldp_guarantee_holds"] is True
    # the shuffled what-if counts the 4 training releases only: the 4 test inputs are charged, not shuffled
    assert record["privacy"]["shuffled_reports"] == 4
    assert "not the test users" in record["privacy"]["shuffled_covers"]
    from fl.accounting import shuffle_amplification

    bound = shuffle_amplification(math.pi * EPS + LABEL_EPS, 4, 1e-6)
    assert record["privacy"]["epsilon_shuffled_joint"] == pytest.approx(bound.epsilon)

    record = _round(acc, grid, 2)
    second = core.sample_users(2)
    spent = acc.ledger.spent("train", np.arange(8))
    assert spent[np.union1d(first, second)] == pytest.approx(
        np.full(np.union1d(first, second).size, math.pi * EPS + LABEL_EPS)
    )
    assert record["fresh_train_releases"] == np.setdiff1d(second, first).size
    assert record["train_releases_total"] == np.union1d(first, second).size  # re-sent rows replace themselves
    assert record["privacy"]["max_releases_per_user"] == 1


def test_shuffled_figures_say_how_rounds_were_combined() -> None:
    """Cached releases: the run's shuffled figure is the largest round's. Fresh noise every round:
    the rounds compose by the PLD of the shuffled pairs, recomputed here from the records."""
    from fl.accounting.analysis.shuffle_pld import compose_shuffled_pld

    for fresh in (False, True):
        core = ReleaseTraining(ledger_cfg(**{"label-mechanism": "none"}))
        acc = LocalDPAccounting(core, core.cfg)
        grid = FakeGrid(NODES, Nodes(core, fresh_every_round=fresh))
        records = [_round(acc, grid, r)["privacy"] for r in (1, 2, 3)]
        last = records[-1]
        per_round = [(r["shuffle_epsilon0"], r["shuffled_reports"]) for r in records if r["shuffled_reports"]]
        assert all(e0 == pytest.approx(math.pi * EPS) for e0, _ in per_round)
        if not fresh:
            assert last["shuffle_composition"].startswith("max over rounds")
            largest = max(r["epsilon_shuffled"] for r in records if r["shuffled_reports"])
            assert last["epsilon_shuffled_total"] == largest
        else:
            assert last["shuffle_composition"].startswith("pld")
            assert len(per_round) == 3
            assert last["epsilon_shuffled_total"] == pytest.approx(compose_shuffled_pld(per_round, 1e-6))
            assert max(r["epsilon_shuffled"] for r in records) < last["epsilon_shuffled_total"] <= 3 * math.pi * EPS
            assert last["delta_shuffled_total"] == 1e-6


def test_charges_travel_with_the_release_and_units_compose() -> None:
    """The ledger charges what the reply's charges say: a word-level row of k words costs k per-word
    epsilons (one release, k composition units); a re-sent row costs nothing."""
    core = ReleaseTraining(ledger_cfg())
    acc = LocalDPAccounting(core, core.cfg)
    grid = FakeGrid(NODES, Nodes(core))
    list(acc.configure_train(1, ArrayRecord(), ConfigRecord(), grid))  # discovery opens the ledger
    per_word = Guarantee("pure", 0.5, granularity="word")
    rel = wire.Release(
        user_ids=np.array([0, 1, 2]),
        fresh=np.array([True, True, False]),
        rows={},
        charges={"embedding": [Charge(per_word, 3), Charge(per_word, 5)]},
        index={"embedding": np.array([0, 1, 1])},
    )
    again = wire.Release.from_content(RecordDict(rel.to_content()))
    assert again.charges == rel.charges and np.array_equal(again.index["embedding"], rel.index["embedding"])
    acc._charge("train", again)
    assert acc.ledger is not None
    assert acc.ledger.spent("train", np.array([0, 1, 2])) == pytest.approx([1.5, 2.5, 0.0])
    assert acc.ledger.snapshot()["composition_embedding"]["releases"] == 5


def test_leaky_mode_records_no_guarantee() -> None:
    """With map-in = leaky the wrapper still writes every round, but the privacy block says no LDP."""
    core = ReleaseTraining(ledger_cfg(**{"map-in": "leaky", "allow-unaccounted-leakage": True}))
    acc = LocalDPAccounting(core, core.cfg)
    record = _round(acc, FakeGrid(NODES, Nodes(core)), 1)
    assert record["ldp_guarantee_holds"] is False
    assert record["privacy"]["ldp_guarantee_holds"] is False and "epsilon_ldp" not in record["privacy"]
    assert record["privacy"]["evaluation_covered"] is False


def test_the_accounting_is_always_outermost() -> None:
    """The ServerApp wraps whatever strategy the config names (a subclass, or a Flower-style
    wrapper) in LocalDPAccounting; the innermost strategy must be a ReleaseTraining."""
    from strategies.modes import MODES

    cfg = ledger_cfg(strategy="tests.strategies.local.test_accounting:Halves")
    run = MODES["local"].start(None, cfg, None, 0.0)  # type: ignore[arg-type]
    assert isinstance(run.strategy, LocalDPAccounting) and isinstance(run.strategy.strategy, Halves)
    with pytest.raises(
        TypeError, match="innermost strategy must be a ReleaseTraining or provide .* lacks .*'channels'"
    ):
        LocalDPAccounting(NotReleaseTraining(), ledger_cfg())


class Halves(ReleaseTraining):
    def sample_users(self, server_round: int) -> np.ndarray:
        return np.arange(self.num_train_users // 2)


class NotReleaseTraining(ReleaseTraining.__mro__[1]):  # a bare flwr Strategy
    def configure_train(self, *a): ...
    def aggregate_train(self, *a): ...
    def configure_evaluate(self, *a): ...
    def aggregate_evaluate(self, *a): ...
    def summary(self): ...


def test_reply_order_does_not_change_training() -> None:
    """Replies arrive in any order (and node ids are random per run): the stored rows, hence the
    training batches and the model, are the same for a seed whatever the order."""
    models = []
    for reverse in (False, True):
        core = ReleaseTraining(ledger_cfg())
        acc = LocalDPAccounting(core, core.cfg)
        grid = FakeGrid(NODES, Nodes(core))
        messages = list(acc.configure_train(1, ArrayRecord(), ConfigRecord(), grid))
        replies = grid.send_and_receive(messages)
        acc.aggregate_train(1, replies[::-1] if reverse else replies)
        models.append((core._x.copy(), core._y.copy(), core.model.state_dict()))  # type: ignore[union-attr]
    (x0, y0, m0), (x1, y1, m1) = models
    assert np.array_equal(x0, x1) and np.array_equal(y0, y1)
    assert all(np.array_equal(m0[k].numpy(), m1[k].numpy()) for k in m0)


class OwnCore(NotReleaseTraining):
    """A strategy of one's own, not a ReleaseTraining, with what the accounting reads (AccountedCore)."""

    leaky = False
    channels = None
    nodes: dict = {}
    info = None
    num_train_users = 0
    num_test_users = 0
    public_info: dict = {}
    train_info: dict = {}
    evaluation: dict = {}


def test_a_strategy_of_one_s_own_is_accounted_through_the_public_protocol_alone() -> None:
    from strategies.local.accounting import AccountedCore

    accounted = LocalDPAccounting(OwnCore(), ledger_cfg())
    assert accounted.core.__class__ is OwnCore and not isinstance(accounted.core, ReleaseTraining)
    assert set(AccountedCore.__annotations__) == {
        "leaky", "channels", "nodes", "info", "num_train_users", "num_test_users", "public_info", "train_info",
        "evaluation",
    }  # fmt: skip
