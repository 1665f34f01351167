"""Failing nodes at the strategy level: a fake grid loses replies on a fixed schedule and the ledger
is checked against a hand count of the releases each user may have made.

The rule under test (``LocalDPAccounting._charge_lost``): a user asked for a release by a node whose
reply failed is charged as if it had released, unless (cached releases) it already has a charged
release, which the node would only re-send. A later reply settles nothing: a re-sent row is free,
a fresh one (the node had not drawn after all) is charged again (conservative).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from flwr.app import ArrayRecord, ConfigRecord, Error, Message, MetricRecord, RecordDict

from fl import faults, wire
from strategies.grids.faults import FaultyGrid, split_replies
from strategies.local.accounting import LocalDPAccounting
from strategies.local.release_training import ReleaseTraining
from tests.support.grids import FakeGrid
from tests.support.ledger_nodes import EPS, LABEL_EPS, NODES, Nodes, ledger_cfg

# Users asked for in each round (node 11 holds train users 0-3 and test users 0-1, node 12 the rest).
ASKED = {1: [0, 1, 4, 5], 2: [0, 1, 2, 6], 3: [3, 6, 7]}
# (round, stage, node) -> how its reply fails: "error" (node raised before drawing), "drop" and
# "late" (node drew, cached, replied; the reply is lost or arrives after the timeout).
SCHEDULE = {
    (1, "train", 11): "error",
    (2, "train", 12): "drop",
    (3, "train", 11): "late",
    (1, "evaluate", 12): "error",
}


class Fixed(ReleaseTraining):
    def sample_users(self, server_round: int) -> np.ndarray:
        return np.asarray(ASKED[server_round])


class LossyGrid(FakeGrid):
    """FakeGrid whose replies fail as SCHEDULE says; ``dropped`` tells the accounting which were dropped."""

    def __init__(self, nodes, answer) -> None:  # type: ignore[no-untyped-def]
        super().__init__(nodes, answer)
        self.dropped: set[int] = set()

    def send_and_receive(self, messages, timeout=None):  # type: ignore[no-untyped-def]
        self.dropped = set()
        replies = []
        for m in messages:
            node, stage = m.metadata.dst_node_id, m.metadata.message_type
            kind = (
                SCHEDULE.get((int(m.content[wire.CONFIG]["server-round"]), stage, node)) if stage != "query" else None
            )
            if kind == "error":
                replies.append(Message(Error(code=0, reason="injected"), reply_to=m))
                continue
            reply = super().send_and_receive([m])[0]  # the node does its work (draws, caches)
            if kind == "drop":
                self.dropped.add(node)
            elif kind != "late":
                replies.append(reply)
        return replies


def _run(fresh_every_round: bool) -> tuple[LocalDPAccounting, list[dict]]:
    core = Fixed(ledger_cfg(**{"fresh-noise-per-round": fresh_every_round, "fault-rate": 0.2}))
    acc = LocalDPAccounting(core, core.cfg)
    grid = LossyGrid(NODES, Nodes(core, fresh_every_round))
    for r in ASKED:
        messages = list(acc.configure_train(r, ArrayRecord(), ConfigRecord(), grid))
        arrays, _ = acc.aggregate_train(r, grid.send_and_receive(messages))
        assert arrays is not None
        messages = list(acc.configure_evaluate(r, arrays, ConfigRecord(), grid))
        acc.aggregate_evaluate(r, grid.send_and_receive(messages))
    return acc, acc.records


@pytest.mark.parametrize(
    ("fresh_every_round", "train_counts", "test_counts"),
    [
        # Cached: users 0 and 1 are charged for the failed round 1 (the node may have drawn) and again
        # for their fresh release in round 2 (it had not); 6's release drawn in the dropped round 2 is
        # re-sent in round 3 for free; 3 is charged for the late round 3. Test users 2, 3: charged
        # at the failed evaluation of round 1, then fresh in round 2.
        (False, [2, 2, 1, 1, 1, 1, 1, 1], [1, 1, 2, 2]),
        # Fresh noise every round: every request is one charge, lost or not.
        (True, [2, 2, 1, 1, 1, 1, 2, 1], [3, 3, 3, 3]),
    ],
)
def test_lost_replies_are_charged_by_hand_count(
    fresh_every_round: bool, train_counts: list[int], test_counts: list[int]
) -> None:
    acc, records = _run(fresh_every_round)
    assert acc.ledger is not None
    per_release = math.pi * EPS  # Purkayastha's pure epsilon at metric epsilon EPS
    expected_train = np.asarray(train_counts) * (per_release + LABEL_EPS)
    assert acc.ledger.spent("train", np.arange(8)) == pytest.approx(expected_train)
    assert acc.ledger.spent("test", np.arange(4)) == pytest.approx(np.asarray(test_counts) * per_release)
    assert records[0]["faults"]["train"] == {"error": 1, "timeout": 0, "dropped": 0}
    assert records[0]["faults"]["evaluate"] == {"error": 1, "timeout": 0, "dropped": 0}
    assert records[1]["faults"]["train"] == {"error": 0, "timeout": 0, "dropped": 1}
    assert records[2]["faults"]["train"] == {"error": 0, "timeout": 1, "dropped": 0}
    # The strategy trained on what arrived: round 1 stored only node 12's two rows.
    assert records[0]["train_releases_total"] == 2 and records[0]["test_users"] == 2
    assert records[-1]["privacy"]["epsilon_ldp"] == pytest.approx(max(train_counts + test_counts) * per_release)


def test_every_node_failing_without_injection_stops_the_run() -> None:
    """With no fault injected, a round where every node failed is a bug: the run stops and says why."""
    core = ReleaseTraining(ledger_cfg())
    acc = LocalDPAccounting(core, core.cfg)
    grid = FakeGrid(NODES, Nodes(core, False))
    messages = list(acc.configure_train(1, ArrayRecord(), ConfigRecord(), grid))
    failed = Message(Error(code=0, reason="boom"), reply_to=messages[0])
    with pytest.raises(RuntimeError, match="every node failed during train and no fault was injected: boom"):
        acc.aggregate_train(1, [failed])


def test_split_replies_sorts_errors_timeouts_and_drops() -> None:
    grid = FakeGrid(NODES, lambda m: RecordDict({wire.METRICS: MetricRecord({"x": 1})}))
    core = ReleaseTraining(ledger_cfg())
    acc = LocalDPAccounting(core, core.cfg)
    messages = list(acc.configure_train(1, ArrayRecord(), ConfigRecord(), grid))
    ok = grid.send_and_receive(messages[:1])
    grid.dropped = {messages[1].metadata.dst_node_id}  # type: ignore[attr-defined]
    outcome = split_replies([m.metadata.dst_node_id for m in messages] + [99], ok, grid)
    assert len(outcome.ok) == 1
    assert outcome.counts() == {"error": 0, "timeout": 1, "dropped": 1}


def test_fault_schedule_is_seeded_and_has_the_configured_rate() -> None:
    """Both ends compute the same schedule; over many nodes its rate is the configured one."""
    keys = [faults.node_key(i * 100, i * 10) for i in range(20_000)]
    hits = np.array([faults.fails(3, 2, "train", k, 0.2) for k in keys])
    assert abs(hits.mean() - 0.2) < 4 * math.sqrt(0.2 * 0.8 / hits.size)  # 4 sd: fails by chance ~1e-4
    assert [faults.fails(3, 2, "train", k, 0.2) for k in keys[:50]] == list(hits[:50])
    assert hits[:200].tolist() != [faults.fails(4, 2, "train", k, 0.2) for k in keys[:200]]
    assert not any(faults.fails(3, 2, "train", k, 0.0) for k in keys[:100])


def test_faulty_grid_drops_exactly_the_scheduled_replies() -> None:
    """FaultyGrid learns each node's key from the query replies and drops its scheduled replies."""
    cfg = ledger_cfg(**{"fault-rate": 0.5, "fault-kind": "drop-reply", "seed": 7})
    inner = FakeGrid(NODES, lambda m: RecordDict({wire.METRICS: MetricRecord({"x": 1})}))
    grid = FaultyGrid(inner, cfg)
    core = ReleaseTraining(cfg)
    acc = LocalDPAccounting(core, core.cfg)
    dropped_any = False
    for r in range(1, 9):
        messages = list(acc.configure_train(r, ArrayRecord(), ConfigRecord(), grid))  # first call discovers
        replies = grid.send_and_receive(messages)
        expected = {
            m.metadata.dst_node_id
            for m in messages
            if faults.fails(
                7,
                r,
                "train",
                faults.node_key(
                    NODES[m.metadata.dst_node_id].train_users_lo, NODES[m.metadata.dst_node_id].test_users_lo
                ),
                0.5,
            )
        }
        assert grid.dropped == expected
        assert {x.metadata.src_node_id for x in replies} == {m.metadata.dst_node_id for m in messages} - expected
        dropped_any |= bool(expected)
    assert dropped_any


def test_node_level_average_keeps_its_denominator_when_a_node_is_missing() -> None:
    """Node-level DP-FedAvg: Flower's wrapper calibrates noise to an average over the k sampled nodes
    (sensitivity C / k). With r < k replies the aggregate must be current + sum(updates) / k, not the
    mean over r (sensitivity C / r, which the accounting would not cover)."""
    from flwr.app import Array

    from fl.accounting.central import UNIFORM_WEIGHT_KEY
    from strategies.central_node import CentralFedAvg

    nodes = {20 + i: NODES[11] for i in range(4)}
    strategy = CentralFedAvg(nodes, 4, 2)
    current = ArrayRecord({"w": Array(np.full(3, 1.0, dtype=np.float32))})
    grid = FakeGrid(nodes)
    messages = list(strategy.configure_train(1, current, ConfigRecord(), grid))  # type: ignore[arg-type]
    updates = [np.array([1.0, 2.0, 3.0]), np.array([0.5, 0.0, -1.0]), np.array([2.0, 2.0, 2.0])]
    replies = [
        Message(
            RecordDict(
                {
                    "arrays": ArrayRecord({"w": Array((1.0 + u).astype(np.float32))}),
                    "metrics": MetricRecord({UNIFORM_WEIGHT_KEY: 1.0}),
                }
            ),
            reply_to=m,
        )
        for m, u in zip(messages[:3], updates, strict=True)  # the fourth node's reply is lost
    ]
    arrays, _ = strategy.aggregate_train(1, replies)
    assert arrays is not None
    np.testing.assert_allclose(arrays["w"].numpy(), 1.0 + np.sum(updates, axis=0) / 4, rtol=1e-6)
    full, _ = strategy.aggregate_train(1, [*replies, Message(replies[0].content, reply_to=messages[3])])
    assert full is not None  # all k arrived: the plain mean, as before
    np.testing.assert_allclose(full["w"].numpy(), 1.0 + (np.sum(updates, axis=0) + updates[0]) / 4, rtol=1e-6)
