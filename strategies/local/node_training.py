"""NodeTraining: local DP with any Flower strategy that aggregates models (``strategy = "FedAvg"``,
``"FedAdam"``, ``"FedTrimmedAvg"``, ``"Krum"``, ``"QFedAvg"``, a user's own).

Everything a node may send in local mode is computed from its users' releases, so the training can move to
the nodes without changing the guarantee. Each round:

1. Sanitas samples the users asked to release (:meth:`ReleaseTraining.sample_users`, as when the server
   trains); the Flower strategy picks the nodes to train among those holding training users
   (its ``configure_train``, on a grid that lists only them) and the global model they start from.
2. Each picked node releases for its sampled users (once per user: the release is held on the node and
   re-sent at no cost), trains the model on every release it holds, and replies with its model and the
   releases' charges, not the rows (``clients.node_training``).
3. The accounting wrapper (``LocalDPAccounting``, outermost) enters the charges in the per-user ledger
   exactly as when the rows cross; then the strategy aggregates the nodes' models (its ``aggregate_train``).
4. Sanitas' evaluation scores the aggregate on every test user (``ReleaseTraining.configure_evaluate``), with
   the public-only line beside it; the Flower strategy's own evaluation is not used.

The discovery, M1, the document level's public material and the public-only line are ``ReleaseTraining``'s,
so the run's epsilon, ledger and guarantee line are those of the same run trained on the server.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy

from fl import wire
from strategies.discovery import raise_on_errors
from strategies.grids.subset import NodeSubset
from strategies.local.release_training import ReleaseTraining
from strategies.mean_step import like

log = logging.getLogger(__name__)


def model_reply(reply: Message) -> Message:
    """``reply`` as the strategy is given it: its model and its metrics only (the charges are the ledger's,
    read already by the accounting wrapper), in a copy: the reply itself is left as it arrived."""
    seen = copy.copy(reply)
    seen.content = RecordDict({k: v for k, v in reply.content.items() if k not in (wire.RELEASE, wire.CHARGES)})
    return seen


class NodeTraining(ReleaseTraining):
    """Train on the nodes over their own users' releases; a Flower strategy aggregates the nodes' models.

    Parameters
    ----------
    cfg : Mapping[str, Any]
        Resolved run config (as :class:`ReleaseTraining`; ``server-epochs``, ``batch-size`` and
        ``learning-rate`` are the nodes' training per round).
    name : str
        The Flower strategy's name (summaries, tables).
    make_aggregator : Callable[[], Strategy]
        Builds the Flower strategy with its options (``strategies.loading.build``), called at discovery.
    """

    trained_on = "nodes"

    def __init__(self, cfg: Any, name: str, make_aggregator: Callable[[], Strategy], timeout: float = 3600.0) -> None:
        super().__init__(cfg, timeout)
        self.name = name
        self.make_aggregator = make_aggregator
        self.aggregator: Strategy | None = None
        self._current: ArrayRecord | None = None

    @property
    def strategy_name(self) -> str:
        """The Flower strategy's name (summaries, tables)."""
        return self.name

    def discover(self, grid: Grid) -> None:
        """ReleaseTraining's discovery, then the Flower strategy (its node minimums filled for this federation)."""
        super().discover(grid)
        self.aggregator = self.make_aggregator()
        needed = max(int(getattr(self.aggregator, k, 1)) for k in ("min_available_nodes", "min_train_nodes"))
        if needed > len(self.training_nodes()):  # Flower's sample_nodes would wait for them forever
            raise ValueError(
                f"strategy-options: {self.name} waits for {needed} nodes, and {len(self.training_nodes())} hold "
                "training users: lower min_available_nodes / min_train_nodes"
            )

    def training_nodes(self) -> list[int]:
        """The nodes holding training users, in the order of the users they hold."""
        held = [n for n, info in self.nodes.items() if info.num_local_users > 0]
        return sorted(held, key=lambda n: self.nodes[n].train_users_lo)

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        if not self.nodes:
            self.discover(grid)
        assert self.aggregator is not None and self.model is not None
        if not len(arrays):  # round 1: the seeded model ReleaseTraining built at discovery
            arrays = ArrayRecord(self.model.state_dict())
        self._current = arrays
        users = self.sample_users(server_round)
        picked = list(
            self.aggregator.configure_train(
                server_round, arrays, config, NodeSubset(grid, self.training_nodes()).as_grid()
            )
        )
        messages, asked = [], 0
        config_key = getattr(self.aggregator, "configrecord_key", wire.CONFIG)
        array_key = getattr(self.aggregator, "arrayrecord_key", wire.MODEL)
        for m in picked:
            node = m.metadata.dst_node_id
            info = self.nodes[node]
            mine = users[(users >= info.train_users_lo) & (users < info.train_users_hi)]
            asked += int(mine.size)
            theirs: dict[str, Any] = dict(m.content[config_key]) if config_key in m.content else {}
            request = ConfigRecord(
                {**theirs, "server-round": server_round, "user-ids": mine.tolist(), wire.TRAIN_ON_RELEASES: 1}
            )
            content = RecordDict(
                {
                    wire.CONFIG: request,
                    wire.MODEL: m.content[array_key],
                    **self._map_record(),
                    **self._document_record(node),
                }
            )
            messages.append(Message(content=content, dst_node_id=node, message_type=MessageType.TRAIN))
        self.train_info = {"sampled_users": asked, "training_nodes": len(messages), "trained_on": "nodes"}
        return messages

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """The strategy's aggregate of the nodes' models (the charges were read by the accounting wrapper; the
        strategy sees each reply's one ArrayRecord and one MetricRecord, as in Flower: :func:`model_reply`).
        A node holding no release yet is left out; with none left, the model is unchanged."""
        replies = sorted(replies, key=lambda r: self.nodes[r.metadata.src_node_id].train_users_lo)
        raise_on_errors(replies, "train")
        assert self.aggregator is not None and self.model is not None
        counts = {"fresh-releases": 0, "refused-releases": 0, "num-examples": 0}
        losses, weights, kept = [], [], []
        for reply in replies:
            metrics = wire.metric_record(reply.content, wire.METRICS)
            for key in counts:
                counts[key] += wire.read_int(metrics, key, 0)
            n = wire.read_int(metrics, "num-examples", 0)
            if n > 0:
                kept.append(model_reply(reply))
                losses.append(wire.read_float(metrics, "train_loss"))
                weights.append(n)
        arrays = self.aggregator.aggregate_train(server_round, kept)[0] if kept else None
        if arrays is None:
            arrays = self._current
        else:
            assert self._current is not None
            arrays = like(arrays, self._current)  # FedAdam & co. answer in float64: the model's width again
            self.model.load_state_dict(arrays.to_torch_state_dict())
        loss = float(np.average(losses, weights=weights)) if kept else float("nan")
        self.train_info.update(
            {
                # The releases held by the nodes that replied (the server stores none; when it trains, this is
                # every release stored), and the global model's loss on them before this round's training.
                "train_releases_total": counts["num-examples"],
                "fresh_train_releases": counts["fresh-releases"],
                "refused_train_releases": counts["refused-releases"],
                "train_loss": loss,
                "nodes_aggregated": len(kept),
            }
        )
        return arrays, MetricRecord({"num-releases": counts["num-examples"], "train-loss": loss})

    def stored_documents(self) -> np.ndarray:
        """None: the releases stay on the nodes (the server holds models, not rows)."""
        return np.zeros(0, dtype=np.int64)

    def summary(self) -> None:
        log.info(
            "NodeTraining: %s aggregates the nodes' models; each node trains %d epochs per round on its users' "
            "releases (batch %d, Adam lr %g)",
            self.name,
            self.cfg.server.server_epochs,
            self.cfg.server.batch_size,
            self.cfg.server.learning_rate,
        )
        if self.aggregator is not None:
            self.aggregator.summary()
