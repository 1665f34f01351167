"""The node's own ledger (issue 65, item 4): one release per user and ``max-epsilon`` are enforced by the
node, whatever the server asks (``fl.release.ledger``, applied by ``fl.release.draw.release``).

A real local-mode node (partition 0 of 2 of a synthetic federation: training users 0-19, test users 0-9)
is driven through its handlers (``clients.ldp_client``, ``clients.node_training``, the ClientApp) with
the messages the server builds (``strategies.local.release_training.ReleaseTraining.configure_train`` and
``configure_evaluate``: ``server-round``, ``user-ids``, M1 when the server provides it, the model), sent
again, out of order and under a new M1. Every noise draw of the embedding channel is counted
(``drawn``), so a test fails if the node draws for a user it must refuse.

Costs: Purkayastha at epsilon 1 on the sphere is pure pi per embedding release, RR labels 0.5 per label,
so a training release costs pi + 0.5 = 3.64 and a test release pi = 3.14.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MessageType, RecordDict

from clients.ldp_client import handle_evaluate, handle_train
from clients.node import node_cohort
from fl import config as config_mod
from fl import wire
from fl.accounting import PrivacyLedger
from fl.accounting.charges import Charge
from fl.config import RunConfig
from fl.levels.channels import CHANNELS
from fl.maps.pipeline import empty_head
from fl.release import NodeLedger, NodeState
from fl.release.ledger import charge_terms
from mechanisms.guarantee import Guarantee
from tests.support.grids import FakeGrid, task_identity  # noqa: F401  (the fixture, by name)

NODE = 5
TRAIN_COST = math.pi + 0.5
TEST_COST = math.pi
BASE: dict[str, Any] = {
    "dataset": "synthetic",
    "num-users": 40,
    "synthetic-test-users": 20,
    "synthetic-dim": 16,
    "users-per-node": 20,
    "map-in": "random",
    "map-dim": 8,
    "sentence-epsilon": 1.0,
    "label-mechanism": "rr",
    "label-epsilon": 0.5,
    "hidden-dim": 8,
    "server-epochs": 1,
    "noise-seed": 0,
    "device": "cpu",
}


def _cfg(**keys: Any) -> RunConfig:
    return config_mod.resolve({**BASE, **keys})


def _served(cfg: RunConfig) -> RunConfig:
    """``cfg`` with M1 sent by the server in every request (as ``map-in = "supervised"`` or ``"projection"``
    do; a synthetic run has no public data to build one, so the tests send their own)."""
    return replace(cfg, release=replace(cfg.release, map_in="supervised"))


def _context() -> Context:
    return Context(1, NODE, {"partition-id": 0, "num-partitions": 2}, RecordDict(), {})


def _map(seed: int) -> np.ndarray:
    """An M1 [d = 16, m' = 8] the server could send (linear)."""
    return np.random.default_rng(seed).standard_normal((16, 8))


def _train(server_round: int, users: list[int], matrix: np.ndarray | None = None, **extra: Any) -> Message:
    """A train request as ``ReleaseTraining.configure_train`` builds it."""
    content: dict[str, Any] = {wire.CONFIG: ConfigRecord({"server-round": server_round, "user-ids": users})}
    if matrix is not None:
        content[wire.MAP_IN] = ArrayRecord({"matrix": Array(matrix)})
    content.update(extra)
    return Message(content=RecordDict(content), dst_node_id=NODE, message_type=MessageType.TRAIN)


def _model(cfg: RunConfig, context: Context) -> ArrayRecord:
    c = node_cohort(context, cfg)
    model = empty_head(cfg.server.server_model, c.release_dim, c.encoder_dim, int(cfg.server.hidden_dim), c.num_classes)
    return ArrayRecord(model.state_dict())


def _evaluate(server_round: int, model: ArrayRecord, matrix: np.ndarray | None = None) -> Message:
    """An evaluate request as ``ReleaseTraining.configure_evaluate`` builds it."""
    content: dict[str, Any] = {wire.MODEL: model, wire.CONFIG: ConfigRecord({"server-round": server_round})}
    if matrix is not None:
        content[wire.MAP_IN] = ArrayRecord({"matrix": Array(matrix)})
    return Message(content=RecordDict(content), dst_node_id=NODE, message_type=MessageType.EVALUATE)


def _metrics(reply: Message) -> dict[str, Any]:
    return dict(wire.metric_record(reply.content, wire.METRICS))


def _released(reply: Message) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(user ids, fresh flags, embeddings) of the rows a reply releases."""
    rel = wire.Release.from_content(reply.content)
    return rel.user_ids, rel.fresh, rel.rows["embeddings"].numpy()


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The number of rows of every noise draw of the sentence channel, in order."""
    sizes: list[int] = []
    cls = CHANNELS["sentence"]
    real = cls.release

    def counting(self: Any, inputs: Any, rows: np.ndarray, generator: torch.Generator) -> Any:
        sizes.append(int(np.asarray(rows).size))
        return real(self, inputs, rows, generator)

    monkeypatch.setattr(cls, "release", counting)
    yield sizes


# ------------------------------------------------------------------ the same request again
def test_the_same_train_request_twice_resends_the_same_bytes_and_charges_once(drawn: list[int]) -> None:
    cfg, context = _cfg(), _context()
    first = handle_train(_train(1, [0, 1, 2]), context, cfg)
    users, fresh, emb = _released(first)
    assert users.tolist() == [0, 1, 2] and fresh.all() and drawn == [3]
    spent = NodeLedger(context.state).spent("train", users)[0]
    np.testing.assert_allclose(spent, TRAIN_COST)

    again = handle_train(_train(1, [0, 1, 2]), context, cfg)
    users2, fresh2, emb2 = _released(again)
    assert users2.tolist() == [0, 1, 2] and not fresh2.any()
    np.testing.assert_array_equal(emb2, emb)  # the cached bytes
    rel1, rel2 = (wire.Release.from_content(r.content) for r in (first, again))
    np.testing.assert_array_equal(rel2.labels, rel1.labels)
    assert drawn == [3]  # no new noise
    assert _metrics(again)["refused-releases"] == 0 and _metrics(again)["fresh-releases"] == 0
    np.testing.assert_allclose(NodeLedger(context.state).spent("train", users)[0], TRAIN_COST)  # charged once
    assert NodeLedger(context.state).draws("train", users).tolist() == [1, 1, 1]


def test_requests_out_of_order_draw_each_user_once(drawn: list[int]) -> None:
    """Round 2's request before round 1's, round 2's again, then round 1's again: each user is drawn once
    whatever the order, and the re-sent rows are the first ones."""
    cfg, context = _cfg(), _context()
    r2 = handle_train(_train(2, [3, 4, 5]), context, cfg)
    r1 = handle_train(_train(1, [0, 1, 3]), context, cfg)  # user 3 overlaps: re-sent, not drawn
    u1, f1, e1 = _released(r1)
    assert u1.tolist() == [0, 1, 3] and f1.tolist() == [True, True, False]
    _, _, e2 = _released(r2)
    np.testing.assert_array_equal(e1[2], e2[0])
    for msg in (_train(2, [3, 4, 5]), _train(1, [0, 1, 3])):
        users, fresh, _ = _released(handle_train(msg, context, cfg))
        assert not fresh.any()
    assert drawn == [3, 2]
    ledger = NodeLedger(context.state)
    assert ledger.draws("train", np.arange(20)).tolist() == [1, 1, 0, 1, 1, 1] + [0] * 14


def test_evaluate_before_train_keeps_the_populations_apart(drawn: list[int]) -> None:
    """An evaluate request first releases every test user once; a train request then releases training
    user 0 (another person than test user 0); a second evaluate re-sends the test releases."""
    cfg, context = _cfg(), _context()
    model = _model(cfg, context)
    ev1 = handle_evaluate(_evaluate(1, model), context, cfg)
    users, fresh, emb = _released(ev1)
    assert users.tolist() == list(range(10)) and fresh.all()
    tr = handle_train(_train(1, [0]), context, cfg)
    assert _released(tr)[1].tolist() == [True]
    ev2 = handle_evaluate(_evaluate(2, model), context, cfg)
    users2, fresh2, emb2 = _released(ev2)
    assert users2.tolist() == list(range(10)) and not fresh2.any()
    np.testing.assert_array_equal(emb2, emb)
    assert drawn == [10, 1]
    ledger = NodeLedger(context.state)
    np.testing.assert_allclose(ledger.spent("test", np.arange(10))[0], TEST_COST)
    np.testing.assert_allclose(ledger.spent("train", np.array([0, 1]))[0], [TRAIN_COST, 0.0])


# ------------------------------------------------------------------ a new map
def test_a_new_map_is_refused_for_released_users_and_allowed_for_new_ones(drawn: list[int]) -> None:
    """Cached releases (the default) and no budget (max-epsilon = 0): after a release under M1 = A, a request
    under B is refused for the users who released (no noise, no row, counted) and allowed for users who never
    released (the cohorts' case: later cohorts are other users); back to A, the cache is B's, and the users
    of A are still refused."""
    cfg, context = _served(_cfg()), _context()
    a, b = _map(1), _map(2)
    first = handle_train(_train(1, [0, 1, 2], a), context, cfg)
    assert _released(first)[1].all() and drawn == [3]

    second = handle_train(_train(2, [0, 1, 2, 3, 4], b), context, cfg)
    users, fresh, _ = _released(second)
    assert users.tolist() == [3, 4] and fresh.all()
    assert _metrics(second)["refused-releases"] == 3 and _metrics(second)["num-examples"] == 2
    assert drawn == [3, 2]

    third = handle_train(_train(3, [0, 1, 2, 3, 4], b), context, cfg)  # the same request again
    assert _released(third)[0].tolist() == [3, 4] and not _released(third)[1].any()
    assert _metrics(third)["refused-releases"] == 3

    back = handle_train(_train(4, [0, 1, 2], a), context, cfg)
    assert _released(back)[0].size == 0 and _metrics(back)["refused-releases"] == 3
    assert drawn == [3, 2]  # never drawn again
    ledger = NodeLedger(context.state)
    assert ledger.draws("train", np.arange(6)).tolist() == [1, 1, 1, 1, 1, 0]
    np.testing.assert_allclose(ledger.spent("train", np.arange(5))[0], TRAIN_COST)
    spaces = ledger.release_space("train", np.array([0, 3, 5]))
    assert spaces[0] != spaces[1] and spaces[2] is None  # each user's own map


def test_test_users_are_not_released_again_under_a_new_map(drawn: list[int]) -> None:
    cfg, context = _served(_cfg()), _context()
    model = _model(cfg, context)
    first = handle_evaluate(_evaluate(1, model, _map(1)), context, cfg)
    assert _released(first)[1].sum() == 10
    second = handle_evaluate(_evaluate(2, model, _map(2)), context, cfg)
    assert _released(second)[0].size == 0
    assert _metrics(second)["refused-releases"] == 10 and _metrics(second)["num-examples"] == 0
    assert drawn == [10]


def test_a_node_training_on_its_releases_refuses_the_same(drawn: list[int]) -> None:
    """A Flower strategy's request (``train-on-releases``, clients.node_training): the same release path,
    the same refusals, and it trains on the rows of the current map only."""
    cfg, context = _served(_cfg()), _context()
    model = _model(cfg, context)

    def request(server_round: int, users: list[int], matrix: np.ndarray) -> Message:
        msg = _train(server_round, users, matrix, **{wire.MODEL: model})
        msg.content[wire.CONFIG][wire.TRAIN_ON_RELEASES] = 1  # type: ignore[index]
        return msg

    first = handle_train(request(1, [0, 1, 2], _map(1)), context, cfg)
    assert _metrics(first)["fresh-releases"] == 3 and _metrics(first)["num-examples"] == 3
    again = handle_train(request(2, [0, 1, 2], _map(1)), context, cfg)
    assert _metrics(again)["fresh-releases"] == 0 and _metrics(again)["refused-releases"] == 0
    moved = handle_train(request(3, [0, 1, 2, 7], _map(2)), context, cfg)
    assert _metrics(moved)["refused-releases"] == 3 and _metrics(moved)["fresh-releases"] == 1
    assert _metrics(moved)["num-examples"] == 1  # user 7's release, under the new map
    assert wire.Release.from_content(moved.content).user_ids.tolist() == [7]
    assert drawn == [3, 1]


# ------------------------------------------------------------------ budgets
def test_a_request_over_max_epsilon_is_refused_before_any_noise(drawn: list[int]) -> None:
    """max-epsilon = 3: a training release (3.64) is over it: refused, counted, no noise drawn, no row sent;
    a test release (3.14) is over it too."""
    cfg, context = _cfg(**{"max-epsilon": 3.0}), _context()
    reply = handle_train(_train(1, [0, 1]), context, cfg)
    assert _released(reply)[0].size == 0 and _metrics(reply)["refused-releases"] == 2
    ev = handle_evaluate(_evaluate(1, _model(cfg, context)), context, cfg)
    assert _metrics(ev)["refused-releases"] == 10 and _released(ev)[0].size == 0
    assert drawn == []
    assert NodeState(context.state).noise(0)["draws"] == 0
    np.testing.assert_array_equal(NodeLedger(context.state).draws("train", np.array([0, 1])), 0)


def test_fresh_noise_per_round_composes_until_max_epsilon(drawn: list[int]) -> None:
    """fresh-noise-per-round with max-epsilon = 8: rounds 1 and 2 are drawn afresh and composed
    (2 x 3.64 = 7.28), round 3 would reach 10.9: refused, and the round-2 rows are re-sent at no cost.
    The node's spend is the server's ledger's for the same replies."""
    cfg, context = _cfg(**{"fresh-noise-per-round": True, "max-epsilon": 8.0}), _context()
    server = PrivacyLedger({"train": 40})
    replies = [handle_train(_train(r, [0, 1]), context, cfg) for r in (1, 2, 3)]
    fresh = [_released(r)[1].tolist() for r in replies]
    assert fresh == [[True, True], [True, True], [False, False]]
    assert [_metrics(r)["refused-releases"] for r in replies] == [0, 0, 2]
    np.testing.assert_array_equal(_released(replies[2])[2], _released(replies[1])[2])
    assert not np.array_equal(_released(replies[1])[2], _released(replies[0])[2])  # fresh noise in round 2
    assert drawn == [2, 2]
    for reply in replies:
        rel = wire.Release.from_content(reply.content)
        for channel in wire.CHANNELS:
            for users, charge in rel.fresh_charges(channel):
                server.record("train", users, charge.guarantee, channel, units=None)
    node_eps = NodeLedger(context.state).spent("train", np.array([0, 1]))[0]
    np.testing.assert_allclose(node_eps, 2 * TRAIN_COST)
    np.testing.assert_allclose(node_eps, server.spent("train", np.array([0, 1])))


def test_fresh_noise_without_a_budget_composes_every_round(drawn: list[int]) -> None:
    """max-epsilon = 0 is "no budget" (fl.config.release_keys): fresh draws are never refused for their
    cost, and the ledger still composes them."""
    cfg, context = _cfg(**{"fresh-noise-per-round": True}), _context()
    for r in (1, 2, 3):
        reply = handle_train(_train(r, [4]), context, cfg)
        assert _released(reply)[1].tolist() == [True] and _metrics(reply)["refused-releases"] == 0
    assert drawn == [1, 1, 1]
    np.testing.assert_allclose(NodeLedger(context.state).spent("train", np.array([4]))[0], 3 * TRAIN_COST)


# ------------------------------------------------------------------ the run's state
def test_the_ledger_lives_in_the_client_apps_state_across_requests(drawn: list[int]) -> None:
    """Through the ClientApp (``clients.app``), with the requests the server's strategy builds: the node's
    ``Context`` carries the ledger from one request to the next (as Flower's simulation and a SuperNode keep
    a node's context for the run)."""
    from clients.app import make_client_app
    from clients.node import cohort_info
    from strategies.local.release_training import ReleaseTraining

    keys = {**BASE, "fraction-train": 0.5}
    cfg, context = config_mod.resolve(keys), _context()
    other = Context(1, NODE + 1, {"partition-id": 1, "num-partitions": 2}, RecordDict(), {})
    grid = FakeGrid({NODE: cohort_info(node_cohort(context, cfg)), NODE + 1: cohort_info(node_cohort(other, cfg))})
    (msg,) = [
        m
        for m in ReleaseTraining(cfg).configure_train(1, ArrayRecord(), ConfigRecord(), grid)
        if m.metadata.dst_node_id == NODE
    ]
    app = make_client_app(keys)
    first = app(msg, context)
    again = app(msg, context)  # the server sends round 1 again
    assert _released(first)[1].all() and not _released(again)[1].any()
    np.testing.assert_array_equal(_released(again)[2], _released(first)[2])
    assert drawn == [_released(first)[0].size]


def test_a_restored_node_keeps_its_ledger(tmp_path: Path, drawn: list[int]) -> None:
    """The ledger is in the node's snapshot (clients.node_state): a node restored from it still refuses a
    released user under a new map."""
    from clients import node_state

    cfg, context = _served(_cfg()), _context()
    saving = replace(cfg, output=replace(cfg.output, run_name="r", out_dir=str(tmp_path)))
    msg = _train(1, [0, 1], _map(1))
    handle_train(msg, context, cfg)
    node_state.save(msg, context, saving, 0, "train")
    restored = _context()
    resumed = _train(2, [0, 1, 2], _map(2))
    resumed.content[wire.CONFIG][node_state.RESUMED_FROM] = 1  # type: ignore[index]
    node_state.restore(resumed, restored, saving, 0)
    reply = handle_train(resumed, restored, cfg)
    assert _released(reply)[0].tolist() == [2] and _metrics(reply)["refused-releases"] == 2
    assert drawn == [2, 1]


# ------------------------------------------------------------------ the ledger's rules, directly
def test_a_new_document_setup_is_a_new_release_space() -> None:
    """The release space is M1 and the document setup together (fl.release.draw): a user who released under
    one setup is refused under another, through the library's release itself."""
    from fl.levels.channels import make_channels
    from fl.levels.spec import LevelSpec
    from fl.maps import input_map as maps
    from fl.release import release

    cfg, context = _cfg(), _context()
    c = node_cohort(context, cfg)
    spec = LevelSpec.from_config(cfg)
    channels = make_channels(spec, c.map_dim, None, c.num_classes)
    matrix = maps.input_map("random", c.encoder_dim, c.map_dim, cfg.release.map_seed)
    state = NodeState()
    rows = np.array([0, 1])
    first = release(state, spec, "train", c, rows, channels, matrix, setup_version="setup-1")
    again = release(state, spec, "train", c, rows, channels, matrix, setup_version="setup-2")
    assert first.fresh.all() and again.rows.size == 0 and again.refused == 2


def test_word_level_charges_compose_as_the_servers_ledger() -> None:
    """A word-level release charges units x the per-word guarantee (and delta); the node's ledger adds them
    as the server's does, and refuses the release that would pass the budget."""
    per_word = Guarantee("approx", 0.5, 1e-7, granularity="word")
    table = [Charge(per_word, units=3), Charge(per_word, units=10)]
    eps, delta = charge_terms(table, np.array([0, 1, 0]))
    np.testing.assert_allclose(eps, [1.5, 5.0, 1.5])
    np.testing.assert_allclose(delta, [3e-7, 1e-6, 3e-7])
    ledger = NodeLedger(RecordDict())
    users = np.array([7, 8, 7])
    assert ledger.admit("train", users, eps, delta, "m", once=False, budget=6.0).all()
    server = PrivacyLedger({"train": 10})
    for user, i in zip(users.tolist(), [0, 1, 0], strict=True):
        server.record("train", [user], table[i].guarantee, "embedding", units=[table[i].units])
    spent = ledger.spent("train", np.array([7, 8]))
    np.testing.assert_allclose(spent[0], server.spent("train", np.array([7, 8])))
    np.testing.assert_allclose(spent[1], [6e-7, 1e-6])
    # user 7: 3 + 1.5 and 4.5 + 1.5 = 6 fit the budget; user 8: 5 + 5 does not
    again = ledger.admit("train", users, eps, delta, "m", once=False, budget=6.0)
    assert again.tolist() == [True, False, True]
    assert not ledger.admit("train", users, eps, delta, "m", once=False, budget=6.0).any()
    np.testing.assert_allclose(ledger.spent("train", np.array([7, 8]))[0], [6.0, 5.0])


def test_the_leaky_mode_admits_a_new_map_but_not_the_same_one_twice() -> None:
    ledger = NodeLedger(RecordDict())
    one = np.ones(1)
    assert ledger.admit("train", np.array([1]), one, 0 * one, "A", once=True, new_space_ok=True).all()
    assert not ledger.admit("train", np.array([1]), one, 0 * one, "A", once=True, new_space_ok=True).any()
    assert ledger.admit("train", np.array([1]), one, 0 * one, "B", once=True, new_space_ok=True).all()
    assert not ledger.admit("train", np.array([1]), one, 0 * one, "C", once=True).any()  # not leaky: never again
    np.testing.assert_allclose(ledger.spent("train", np.array([1]))[0], 2.0)
