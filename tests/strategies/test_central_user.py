"""UserLevelDPFedAvg against a fake grid: what it sends, the noise it adds, the step it takes, what it
refuses, and the per-user figure it records (no simulation runs)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from flwr.app import Array, ArrayRecord, MetricRecord, RecordDict

from fl import config as config_mod
from fl import wire
from fl.accounting.user_level import user_level_epsilon
from fl.maps.pipeline import ServerModel
from strategies.central_user import UserLevelDPFedAvg, user_level_guarantee
from tests.support.grids import FakeGrid

M, D, H, K = 16, 64, 64, 2  # a small model (5378 parameters): M2 16 -> 64, classifier 64 -> 64 -> 2
USERS, PER_NODE = 400, 100


def _nodes() -> dict[int, wire.CohortInfo]:
    nodes = {}
    for i in range(USERS // PER_NODE):
        nodes[100 + i] = wire.CohortInfo(
            train_users_lo=i * PER_NODE,
            train_users_hi=(i + 1) * PER_NODE,
            num_train_users=USERS,
            num_train_docs=PER_NODE,
            test_users_lo=i * 10,
            test_users_hi=(i + 1) * 10,
            num_test_users=40,
            num_classes=K,
            encoder_dim=D,
            map_dim=M,
            release_dim=M,
        )
    return nodes


def _cfg(**extra: object) -> config_mod.RunConfig:
    base = {
        "mode": "central",
        "map-in": "random",
        "map-dim": M,
        "central-cohort-size": 50.0,
        "central-noise-multiplier": 2.0,
        "central-clip": 0.5,
        "server-optimizer": "sgd",
        "server-learning-rate": 1.0,
        "noise-seed": 3,
        "device": "cpu",
        "hidden-dim": H,
    }
    return config_mod.resolve({**base, **extra})


def _model() -> ServerModel:
    torch.manual_seed(0)
    return ServerModel(M, D, H, K)


def _sum_reply(value: float):
    """Nodes that reply with sums of ``value`` (shaped as the model they were sent, or last kept)."""
    shapes: dict[str, tuple[int, ...]] = {}

    def answer(msg):
        if wire.MODEL in msg.content:
            shapes.update({k: a.numpy().shape for k, a in msg.content[wire.MODEL].items()})
        if msg.metadata.message_type == "evaluate":
            conf = [7, 3, 2, 8]  # 15 of 20 right per node
            return RecordDict({wire.METRICS: MetricRecord({"confusion": conf})})
        sums = {k: Array(np.full(shape, value, dtype=np.float32)) for k, shape in shapes.items()}
        return RecordDict({wire.UPDATE_SUM: ArrayRecord(sums)})

    return answer


def _round(strategy: UserLevelDPFedAvg, grid: FakeGrid, server_round: int = 1) -> None:
    messages = list(strategy.configure_train(server_round, ArrayRecord(), None, grid))
    strategy.aggregate_train(server_round, grid.send_and_receive(messages))
    evals = list(strategy.configure_evaluate(server_round, ArrayRecord(), None, grid))
    strategy.aggregate_evaluate(server_round, grid.send_and_receive(evals))


def test_requests_carry_the_model_and_the_sampling_rate() -> None:
    grid = FakeGrid(_nodes(), _sum_reply(0.0))
    s = UserLevelDPFedAvg(_cfg(), grid.nodes, _model())
    messages = list(s.configure_train(1, ArrayRecord(), None, grid))
    assert sorted(m.metadata.dst_node_id for m in messages) == sorted(grid.nodes)
    for m in messages:
        assert m.content[wire.CONFIG]["sampling-rate"] == pytest.approx(50 / USERS)
        assert m.content[wire.CONFIG]["server-round"] == 1
        assert set(m.content[wire.MODEL].keys()) == set(dict(s.model.named_parameters()))


def test_each_round_sends_the_model_once_per_node() -> None:
    """The evaluate request of round t carries the model after step t; a node that answered it is
    sent round t + 1's train request with the model's content address instead of the arrays (the
    same model: no step in between). A node whose evaluate reply was lost gets the arrays again."""
    grid = FakeGrid(_nodes(), _sum_reply(0.0))
    s = UserLevelDPFedAvg(_cfg(), grid.nodes, _model())
    _round(s, grid, 1)
    first = list(s.configure_train(2, ArrayRecord(), None, grid))
    evaluated = list(s.configure_evaluate(1, ArrayRecord(), None, grid))[0].content[wire.MODEL]
    for m in first:
        assert wire.MODEL not in m.content
        assert m.content[wire.CONFIG][wire.MODEL_REF] == evaluated.object_id
    s.aggregate_train(2, grid.send_and_receive(first))
    evals = grid.send_and_receive(list(s.configure_evaluate(2, ArrayRecord(), None, grid)))
    lost = evals[0].metadata.src_node_id
    s.aggregate_evaluate(2, evals[1:])  # one node's evaluate reply never arrives
    third = {m.metadata.dst_node_id: m for m in s.configure_train(3, ArrayRecord(), None, grid)}
    assert wire.MODEL in third[lost].content and wire.MODEL_REF not in third[lost].content[wire.CONFIG]
    assert sum(wire.MODEL in m.content for m in third.values()) == 1
    # The model moved in round 2: the reference names the new model, not round 1's.
    assert third[next(n for n in third if n != lost)].content[wire.CONFIG][wire.MODEL_REF] != evaluated.object_id


def test_the_step_is_the_noisy_fixed_denominator_mean() -> None:
    """With SGD at lr 1 and zero sums, the model moves by exactly N(0, z^2 C^2) / (q N) per
    coordinate; with sums s the mean moves by (nodes * s) / (q N)."""
    grid = FakeGrid(_nodes(), _sum_reply(0.0))
    s = UserLevelDPFedAvg(_cfg(), grid.nodes, _model())
    before = torch.cat([p.detach().clone().reshape(-1) for p in s.model.parameters()])
    _round(s, grid)
    moved = torch.cat([p.detach().reshape(-1) for p in s.model.parameters()]) - before
    expected_sd = 2.0 * 0.5 / 50.0
    assert moved.numel() == 5378
    assert float(moved.std()) == pytest.approx(expected_sd, rel=0.06)
    assert abs(float(moved.mean())) < 5 * expected_sd / math.sqrt(moved.numel())
    assert abs(float(moved.std()) - 2.0 * 0.4 / 50.0) > 0.1 * expected_sd  # power: the wrong clip is told apart

    grid2 = FakeGrid(_nodes(), _sum_reply(0.25))
    s2 = UserLevelDPFedAvg(_cfg(), grid2.nodes, _model())
    before2 = torch.cat([p.detach().clone().reshape(-1) for p in s2.model.parameters()])
    _round(s2, grid2)
    moved2 = torch.cat([p.detach().reshape(-1) for p in s2.model.parameters()]) - before2
    # Same noise (same seed and round), shifted by 4 nodes * 0.25 / 50.
    torch.testing.assert_close(moved2 - moved, torch.full_like(moved, 4 * 0.25 / 50.0), atol=1e-6, rtol=0)


def test_arrival_order_does_not_change_the_model() -> None:
    grid = FakeGrid(_nodes(), _sum_reply(0.1))
    a = UserLevelDPFedAvg(_cfg(), grid.nodes, _model())
    b = UserLevelDPFedAvg(_cfg(), grid.nodes, _model())
    messages = list(a.configure_train(1, ArrayRecord(), None, grid))
    replies = grid.send_and_receive(messages)
    a.aggregate_train(1, replies)
    b.configure_train(1, ArrayRecord(), None, grid)
    b.aggregate_train(1, list(reversed(replies)))
    for (k, pa), (_, pb) in zip(a.model.named_parameters(), b.model.named_parameters(), strict=True):
        assert torch.equal(pa, pb), k


def test_a_missing_node_counts_as_zero_and_the_denominator_stays_q_n() -> None:
    """A node whose sum is lost contributes nothing; the mean is still divided by q N (not by the
    users that arrived), so the sensitivity and the per-user figure are those of a full round."""
    full, lossy = FakeGrid(_nodes(), _sum_reply(0.25)), FakeGrid(_nodes(), _sum_reply(0.25))
    a = UserLevelDPFedAvg(_cfg(), full.nodes, _model())
    b = UserLevelDPFedAvg(_cfg(**{"fault-rate": 0.2}), lossy.nodes, _model())
    before = torch.cat([p.detach().clone().reshape(-1) for p in a.model.parameters()])
    a.aggregate_train(1, full.send_and_receive(list(a.configure_train(1, ArrayRecord(), None, full))))
    replies = lossy.send_and_receive(list(b.configure_train(1, ArrayRecord(), None, lossy)))
    b.aggregate_train(1, replies[:-1])  # the last node's sum never arrives
    moved_a = torch.cat([p.detach().reshape(-1) for p in a.model.parameters()]) - before
    moved_b = torch.cat([p.detach().reshape(-1) for p in b.model.parameters()]) - before
    # Same noise (same secret and round); one node's 0.25 fewer, over the fixed q N = 50.
    torch.testing.assert_close(moved_a - moved_b, torch.full_like(moved_a, 0.25 / 50.0), atol=1e-6, rtol=0)
    assert b.released == 1 and b._faults["train"] == {"error": 0, "timeout": 1, "dropped": 0}
    evals = lossy.send_and_receive(list(b.configure_evaluate(1, ArrayRecord(), None, lossy)))
    b.aggregate_evaluate(1, evals[1:])
    record = b.records[-1]
    assert record["test_users"] == 60 and record["faults"]["evaluate"]["timeout"] == 1
    a_evals = full.send_and_receive(list(a.configure_evaluate(1, ArrayRecord(), None, full)))
    a.aggregate_evaluate(1, a_evals)
    assert record["privacy"]["epsilon"] == pytest.approx(a.records[-1]["privacy"]["epsilon"])


def test_a_reply_with_other_arrays_is_refused() -> None:
    def bad(msg):
        return RecordDict({wire.UPDATE_SUM: ArrayRecord({"per-user": Array(np.zeros(3, dtype=np.float32))})})

    grid = FakeGrid(_nodes(), bad)
    s = UserLevelDPFedAvg(_cfg(), grid.nodes, _model())
    replies = grid.send_and_receive(list(s.configure_train(1, ArrayRecord(), None, grid)))
    with pytest.raises(RuntimeError, match="update sum has arrays"):
        s.aggregate_train(1, replies)


def test_every_round_records_the_per_user_figure_of_the_accountant() -> None:
    grid = FakeGrid(_nodes(), _sum_reply(0.0))
    cfg = _cfg()
    s = UserLevelDPFedAvg(cfg, grid.nodes, _model())
    for r in (1, 2, 3):
        _round(s, grid, r)
    q = 50 / USERS
    for r, record in zip((1, 2, 3), s.records, strict=True):
        expected = user_level_epsilon(2.0, q, r, 1e-5)
        assert record["privacy"]["epsilon"] == expected["epsilon"]
        assert record["privacy"]["unit"] == "user" and record["privacy"]["rounds_accounted"] == r
        assert record["accuracy"] == pytest.approx(60 / 80)
    assert s.records[0]["privacy"]["epsilon"] < s.records[2]["privacy"]["epsilon"]
    statement = user_level_guarantee(cfg, s, "seeded")
    assert statement["central"]["epsilon"] == s.records[-1]["privacy"]["epsilon"]
    assert "per user" in statement["central"]["text"] and statement["ldp_guarantee_holds"] is False


def test_adam_takes_a_normalised_step() -> None:
    """FedAdam: the first step moves every coordinate by about lr (sign of the pseudo-gradient)."""
    grid = FakeGrid(_nodes(), _sum_reply(0.5))
    s = UserLevelDPFedAvg(_cfg(**{"server-optimizer": "adam", "server-learning-rate": 0.01}), grid.nodes, _model())
    before = torch.cat([p.detach().clone().reshape(-1) for p in s.model.parameters()])
    _round(s, grid)
    moved = torch.cat([p.detach().reshape(-1) for p in s.model.parameters()]) - before
    assert float(moved.abs().max()) == pytest.approx(0.01, rel=1e-3)
    # The sign is that of 0.04 + N(0, 0.02^2): positive with probability Phi(2) = 0.9772.
    assert float((moved > 0).float().mean()) == pytest.approx(0.9772, abs=0.008)


def test_a_checkpointed_strategy_resumes_sending_the_model() -> None:
    """A checkpoint (the strategy pickled) forgets which model each node held: a resumed run's nodes
    hold nothing, so its first train requests carry the arrays."""
    import pickle

    grid = FakeGrid(_nodes(), _sum_reply(0.0))
    s = UserLevelDPFedAvg(_cfg(), grid.nodes, _model())
    _round(s, grid, 1)
    assert all(wire.MODEL not in m.content for m in s.configure_train(2, ArrayRecord(), None, grid))
    s._grid = None  # as strategies.checkpoint detaches it
    resumed = pickle.loads(pickle.dumps(s))
    messages = list(resumed.configure_train(2, ArrayRecord(), None, grid))
    assert all(wire.MODEL in m.content for m in messages)
    resumed.aggregate_train(2, grid.send_and_receive(messages))
    resumed.aggregate_evaluate(2, grid.send_and_receive(list(resumed.configure_evaluate(2, ArrayRecord(), None, grid))))
    assert resumed.records[-1]["privacy"]["epsilon"] == user_level_epsilon(2.0, 50 / USERS, 2, 1e-5)["epsilon"]
