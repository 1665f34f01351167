"""Fake nodes and a config for the strategy tests that check the local-DP ledger."""

from __future__ import annotations

import numpy as np
from flwr.app import Message, MetricRecord, RecordDict

from fl import config, wire
from fl.release import NodeRelease
from strategies.local.release_training import ReleaseTraining

EPS, LABEL_EPS = 2.0, 1.0


NODES = {
    11: wire.CohortInfo(0, 4, 8, 4, 0, 2, 4, 2, 6, 4, 4),  # train users 0-3, test users 0-1
    12: wire.CohortInfo(4, 8, 8, 4, 2, 4, 4, 2, 6, 4, 4),  # train users 4-7, test users 2-3
}


def ledger_cfg(**kw: object) -> config.RunConfig:
    return config.resolve(
        {
            "map-in": "random",
            "map-dim": 4,
            "server-epochs": 1,
            "batch-size": 4,
            "device": "cpu",
            "sentence-epsilon": EPS,
            "label-mechanism": "rr",
            "label-epsilon": LABEL_EPS,
            "fraction-train": 0.5,
            **kw,
        }
    )


class Nodes:
    """Answers like the ClientApp: one document per user (doc id = user id); a user releases once
    (later requests re-send the cached row, not fresh) unless ``fresh_every_round``; test users
    release at evaluation."""

    def __init__(self, core: ReleaseTraining, fresh_every_round: bool = False) -> None:
        self.core, self.fresh_every_round = core, fresh_every_round
        self.released: set[tuple[str, int]] = set()
        self.rng = np.random.default_rng(0)

    def __call__(self, msg: Message) -> RecordDict:
        node = NODES[msg.metadata.dst_node_id]
        if msg.metadata.message_type == "train":
            users = np.asarray(msg.content[wire.CONFIG]["user-ids"], dtype=np.int64)
            purpose, labels = "train", self.rng.integers(0, 2, users.size)
        else:
            users = np.arange(node.test_users_lo, node.test_users_hi, dtype=np.int64)
            purpose, labels = "test", None
        fresh = np.array([self.fresh_every_round or (purpose, int(u)) not in self.released for u in users])
        self.released.update((purpose, int(u)) for u in users)
        emb = self.rng.normal(size=(users.size, node.release_dim)).astype(np.float32)
        rel = NodeRelease(rows=users, emb=emb, ids=None, labels=labels, fresh=fresh, refused=0, extras={})
        assert self.core.channels is not None
        content = rel.to_wire(self.core.channels, users, users if purpose == "train" else None).to_content()
        metrics = {"fresh-releases": int(fresh.sum()), "refused-releases": 0}
        if purpose == "test":
            metrics["confusion"] = [int(fresh.size), 0, 0, 0]
        return RecordDict({**content, wire.METRICS: MetricRecord(metrics)})
