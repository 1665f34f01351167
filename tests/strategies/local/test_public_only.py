"""The public-only line of a local run, from the nodes' evaluation counts to the run's outcome: the server
model fitted on the public data alone is scored on the clean test inputs beside the public logistic regression,
and on-device inference is held against the stronger of the two (hand-made replies, no simulation)."""

from __future__ import annotations

import pytest
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict

from fl import wire
from fl.reporting.outcome import outcome
from strategies.local.accounting import LocalDPAccounting
from strategies.local.release_training import ReleaseTraining
from tests.support.grids import FakeGrid
from tests.support.ledger_nodes import NODES, Nodes, ledger_cfg

# Per node (two test users, one of each class; counts [true 0 as 0, true 0 as 1, true 1 as 0, true 1 as 1]):
# the run's model gets both right on the clean inputs, the public logistic regression one of the two on each
# node (0.5), the public server model both on node 11 and one on node 12 (0.75), and on the sanitized
# releases one of the two (0.5).
_LOGISTIC, _BOTH, _ONE = [1, 0, 1, 0], [1, 0, 0, 1], [1, 0, 1, 0]
PUBLIC_COUNTS = {
    11: {"public-confusion": _ONE, "public-clean-confusion": _LOGISTIC, "public-head-clean-confusion": _BOTH},
    12: {"public-confusion": _ONE, "public-clean-confusion": _LOGISTIC, "public-head-clean-confusion": _ONE},
}


def _round(acc: LocalDPAccounting, grid: FakeGrid, server_round: int) -> dict:
    messages = list(acc.configure_train(server_round, ArrayRecord(), ConfigRecord(), grid))
    arrays, _ = acc.aggregate_train(server_round, grid.send_and_receive(messages))
    assert arrays is not None
    messages = list(acc.configure_evaluate(server_round, arrays, ConfigRecord(), grid))
    acc.aggregate_evaluate(server_round, grid.send_and_receive(messages))
    return acc.records[-1]


class PublicNodes(Nodes):
    """The ledger tests' nodes, whose evaluate replies also carry the public-only models' counts."""

    def __call__(self, msg: Message) -> RecordDict:
        content = super().__call__(msg)
        if msg.metadata.message_type == "train":
            return content
        metrics = dict(wire.metric_record(content, wire.METRICS))
        metrics.update(confusion=[1, 0, 1, 0], **{"clean-confusion": [1, 0, 0, 1]})
        metrics.update(PUBLIC_COUNTS[msg.metadata.dst_node_id])
        content[wire.METRICS] = MetricRecord(metrics)
        return content


def test_on_device_inference_is_held_against_the_stronger_public_only_model() -> None:
    core = ReleaseTraining(ledger_cfg())
    acc = LocalDPAccounting(core, core.cfg)
    record = _round(acc, FakeGrid(NODES, PublicNodes(core)), 1)
    assert core.evaluation["public_only_head_clean_accuracy"] == pytest.approx(0.75)
    assert record["public_only_accuracy"] == pytest.approx(0.5)
    assert record["public_only_clean_accuracy"] == pytest.approx(0.5)
    assert record["public_only_head_clean_accuracy"] == pytest.approx(0.75)
    block = outcome(acc.records, [2, 2])
    device = block["on_device"]
    assert device["public_only_models"] == {"logistic_regression": 0.5, "server_model": 0.75}
    # the line is the public server model's 0.75, not the logistic regression's 0.5
    assert device["public_only_accuracy"] == 0.75 and device["gain_over_public"] == pytest.approx(0.25)
    assert block["public_only_models"] == {"server_model": 0.5} and block["gain_over_public"] == pytest.approx(0.0)


def test_a_model_the_nodes_did_not_score_has_no_accuracy() -> None:
    core = ReleaseTraining(ledger_cfg())
    acc = LocalDPAccounting(core, core.cfg)
    record = _round(acc, FakeGrid(NODES, Nodes(core)), 1)
    for key in ("public_only_accuracy", "public_only_clean_accuracy", "public_only_head_clean_accuracy"):
        assert record[key] is None
    assert outcome(acc.records, [2, 2])["public_only_models"] == {}
