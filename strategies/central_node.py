"""Central-DP mode (``mode = "central"``): DP-FedAvg over nodes with fixed clipping.

Papers: McMahan et al. 2018, "Learning Differentially Private Recurrent
Language Models" (https://arxiv.org/abs/1710.06963); Wang, Balle &
Kasiviswanathan 2019 for the accounting (``fl.accounting.central``).

The strategy is Flower's, composed by wrapping::

    CentralDPAccounting(                      # strict checks, accounting, round records
        DifferentialPrivacyServerSideFixedClipping(   # or ...ClientSideFixedClipping
            CentralFedAvg(...),               # FedAvg: k of N nodes, uniform average,
            noise_multiplier, clipping_norm, k))      # evaluation on the test nodes

Each round FedAvg samples exactly ``k = max(1, ceil(fraction-train * N))`` of
the ``N`` nodes uniformly without replacement; the nodes train on their users'
raw embeddings (``clients.central_client``) and return their weights; the
updates are clipped to ``central-clip`` (server side, or on the node by
``fixedclipping_mod``), averaged with equal weights, and Gaussian noise of
std ``z * C / k`` is added. Then every node holding test users scores the new
global model on its test users' raw embeddings and returns confusion counts
(federated evaluation; simulation diagnostics, as in local mode).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import (
    DifferentialPrivacyClientSideFixedClipping,
    DifferentialPrivacyServerSideFixedClipping,
    FedAvg,
    Strategy,
)

from fl import wire
from fl.accounting.central import UNIFORM_WEIGHT_KEY, num_sampled_nodes, privacy_record
from fl.accounting.delta import delta_warning, population_delta
from fl.accounting.scope import EVALUATION_NOT_COVERED, GUARANTEE_COVERS
from fl.config import RunConfig, as_run_config
from fl.config.rules import check_central_config
from fl.reporting.results import RunWriter, keep_round
from fl.wire import CohortInfo
from strategies.evaluation import sum_confusions
from strategies.grids.faults import check_not_all_failed, split_replies
from strategies.mean_step import MeanStep

log = logging.getLogger(__name__)

CENTRAL_NOTE = (
    "Central DP: nodes send unsanitized model updates computed from their users' raw embeddings; the "
    "server is trusted to clip and add the noise. No local-DP guarantee holds."
)


class CentralFedAvg(FedAvg):
    """FedAvg sampling exactly ``num_sampled`` of the nodes, averaging uniformly, and
    evaluating on every node that holds test users.

    Parameters
    ----------
    nodes : dict[int, CohortInfo]
        Node id -> cohort description (``strategies.discovery.discover_nodes``).
    num_sampled : int
        Nodes per training round (``k``); FedAvg samples them uniformly without
        replacement from all ``len(nodes)`` nodes.
    num_classes : int
        Classes of the task (size of the confusion matrices).
    """

    def __init__(
        self, nodes: Mapping[int, CohortInfo], num_sampled: int, num_classes: int, secure_rng: bool = False
    ) -> None:
        if not 1 <= num_sampled <= len(nodes):
            raise ValueError(f"cannot sample {num_sampled} of {len(nodes)} nodes")
        # sample_size = max(int(N * fraction_train), min_train_nodes) = num_sampled, from all N nodes.
        super().__init__(
            fraction_train=num_sampled / len(nodes),
            min_train_nodes=num_sampled,
            min_available_nodes=len(nodes),
            min_evaluate_nodes=0,
            weighted_by_key=UNIFORM_WEIGHT_KEY,
        )
        self.nodes = dict(nodes)
        self.num_sampled = int(num_sampled)
        self.num_classes = int(num_classes)
        self._current: ArrayRecord | None = None
        self._secure = secrets.SystemRandom() if secure_rng else None

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        self._current = arrays  # the model the updates are relative to (for the fixed denominator)
        if self._secure is None:
            return super().configure_train(server_round, arrays, config, grid)
        # secure-rng: the k of N nodes (whose secrecy the subsampled accounting assumes) are drawn
        # from the OS CSPRNG, not from Python's Mersenne Twister as Flower's sample_nodes does.
        chosen = self._secure.sample(sorted(grid.get_node_ids()), self.num_sampled)
        config["server-round"] = server_round
        content = RecordDict({self.arrayrecord_key: arrays, self.configrecord_key: config})
        return self._construct_messages(content, chosen, MessageType.TRAIN)

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """The current model plus the sum of the r (clipped) updates that arrived, divided by the
        ``num_sampled`` = k nodes asked, not by r.

        The DP wrapper calibrates its noise to an average over k (sensitivity C / k);
        dividing by the r < k replies that arrived would raise the sensitivity to
        C / r and void the accounting. A missing node contributes a zero update.
        """
        replies = list(replies)
        arrays, metrics = super().aggregate_train(server_round, replies)
        r = len(replies)
        if arrays is None or r == self.num_sampled or self._current is None:
            return arrays, metrics
        scale = r / self.num_sampled
        current = self._current
        scaled = {
            name: Array(
                np.asarray(
                    current[name].numpy() + scale * (arrays[name].numpy() - current[name].numpy()),
                    dtype=arrays[name].numpy().dtype,
                )
            )
            for name in arrays
        }
        return ArrayRecord(scaled), metrics

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        config["server-round"] = server_round
        content = RecordDict({self.arrayrecord_key: arrays, self.configrecord_key: config})
        test_nodes = [n for n, v in self.nodes.items() if v.holds_test_users]
        return self._construct_messages(content, test_nodes, MessageType.EVALUATE)

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        s, conf = sum_confusions(replies, self.num_classes)
        return MetricRecord(
            {
                "accuracy": s["accuracy"],
                "macro_f1": s["macro_f1"],
                "test_users": int(conf.sum()),
                "confusion": conf.reshape(-1).tolist(),
            }
        )

    def summary(self) -> None:
        log.info("CentralFedAvg: %d of %d nodes per round, uniform average", self.num_sampled, len(self.nodes))
        super().summary()


class CentralDPAccounting(Strategy):
    """Wrap a Flower fixed-clipping DP strategy: check each round, account it, write its record.

    Every round must send exactly ``num_sampled`` training messages, get as many
    error-free replies with ``uniform-weight = 1`` (the noise calibration
    assumes an unweighted average), and release one noisy aggregate; anything
    else stops the run instead of printing a guarantee that does not hold.

    Parameters
    ----------
    strategy : Strategy
        A ``DifferentialPrivacy*FixedClipping`` wrapper around :class:`CentralFedAvg`.
    cfg : Mapping[str, Any]
        Resolved run config (``central-*`` keys).
    num_sampled, num_nodes : int
        ``k`` and ``N`` of the accounting.
    writer : RunWriter or None
        Where round records go.
    server_step : MeanStep or None
        A Flower strategy whose aggregate is a mean, stepping the model from the wrapper's noisy mean
        (``strategies.mean_step``); ``None``: the noisy mean is the new model (FedAvg).
    """

    def __init__(
        self,
        strategy: Strategy,
        cfg: Mapping[str, Any],
        num_sampled: int,
        num_nodes: int,
        writer: RunWriter | None = None,
        server_step: MeanStep | None = None,
    ) -> None:
        self.strategy = strategy
        self.server_step = server_step  # a Flower mean-family strategy stepping from the noisy mean
        self.cfg = as_run_config(cfg)
        self.num_sampled = int(num_sampled)
        self.num_nodes = int(num_nodes)
        warning = delta_warning(
            population_delta(self.cfg.central.central_delta, self.num_nodes), self.num_nodes, "node"
        )
        if warning:
            log.warning("DELTA TOO LARGE: %s", warning)
        self.writer = writer
        self.records: list[dict[str, Any]] = []
        self.released = 0
        self._round_started = 0.0
        self._grid: Grid | None = None
        self._sent: list[int] = []
        self._faults: dict[str, dict[str, int]] = {}
        self._current: ArrayRecord | None = None

    @property
    def fedavg(self) -> CentralFedAvg:
        """The :class:`CentralFedAvg` inside Flower's DP wrapper (the wrapper's ``strategy``)."""
        inner = getattr(self.strategy, "strategy", None)
        if not isinstance(inner, CentralFedAvg):
            raise TypeError(
                f"CentralDPAccounting expects a DP wrapper around CentralFedAvg, not {type(inner).__name__}"
            )
        return inner

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        self._round_started = time.time()
        available = len(list(grid.get_node_ids()))
        if available != self.num_nodes:
            raise RuntimeError(f"{available} nodes are connected, the accounting assumes {self.num_nodes}")
        if self.server_step is not None:  # its config (FedProx's proximal-mu) goes to the nodes with the model
            config = ConfigRecord({**dict(config), **self.server_step.request_config(server_round, arrays)})
        self._current = arrays
        messages = list(self.strategy.configure_train(server_round, arrays, config, grid))
        targets = {m.metadata.dst_node_id for m in messages}
        self._grid, self._sent, self._faults = grid, sorted(targets), {}
        if len(messages) != self.num_sampled or len(targets) != self.num_sampled:
            raise RuntimeError(
                f"round {server_round}: {len(messages)} training messages to {len(targets)} nodes, "
                f"the accounting assumes {self.num_sampled} distinct nodes"
            )
        return messages

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        outcome = split_replies(self._sent, replies, self._grid)
        check_not_all_failed(outcome, "train", server_round, float(self.cfg.simulation.fault_rate))
        self._faults["train"] = outcome.counts()
        # Missing or failed nodes are left out; CentralFedAvg divides by num_sampled all the same
        # (a missing node's update counts as zero), so the noise calibration and the accounting hold.
        replies = outcome.ok
        for reply in replies:
            weights = [m.get(UNIFORM_WEIGHT_KEY) for m in reply.content.metric_records.values()]
            if weights != [1.0]:
                raise RuntimeError(
                    f"a node replied without {UNIFORM_WEIGHT_KEY} = 1: the noise is calibrated "
                    "for an unweighted average of the clipped updates"
                )
        if not replies:
            # Nothing arrived: Flower's wrapper releases nothing, so nothing is charged this round.
            log.warning("round %d: no training reply arrived; the model is unchanged", server_round)
            return None, None
        arrays, _ = self.strategy.aggregate_train(server_round, replies)
        if arrays is None:
            raise RuntimeError(f"round {server_round}: no aggregate was released")
        if self.server_step is not None and self._current is not None:  # post-processing of the noisy mean
            current = self._current
            update = {k: arrays[k].numpy() - current[k].numpy() for k in current}
            arrays = self.server_step.step(server_round, current, update)
        self.released += 1
        # Training metrics (num-examples) are not part of the DP release: not returned, not recorded.
        return arrays, None

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        return self.strategy.configure_evaluate(server_round, arrays, config, grid)

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        sent = [n for n, v in self.fedavg.nodes.items() if v.holds_test_users]
        outcome = split_replies(sent, replies, self._grid)
        check_not_all_failed(outcome, "evaluate", server_round, float(self.cfg.simulation.fault_rate))
        self._faults["evaluate"] = outcome.counts()
        metrics = self.strategy.aggregate_evaluate(server_round, outcome.ok)
        assert metrics is not None
        record: dict[str, Any] = {
            "round": server_round,
            "accuracy": wire.read_float(metrics, "accuracy"),
            "macro_f1": wire.read_float(metrics, "macro_f1"),
            # Central mode evaluates on noise-free test embeddings: the clean scores are the scores.
            "clean_accuracy": wire.read_float(metrics, "accuracy"),
            "clean_macro_f1": wire.read_float(metrics, "macro_f1"),
            "test_users": wire.read_int(metrics, "test_users"),
            "mode": "central",
            "sampled_nodes": self.num_sampled,
            "faults": dict(self._faults),
            "ldp_guarantee_holds": False,
            "privacy": privacy_record(self.cfg.central, self.num_sampled, self.num_nodes, self.released),
            "seconds": round(time.time() - self._round_started, 3),
        }
        p = record["privacy"]
        keep_round(
            self.records,
            self.writer,
            record,
            log,
            f"central epsilon {p['epsilon']:.4g} (delta {p['delta']:g}, {p['accountant']})",
        )
        return MetricRecord({"accuracy": record["accuracy"], "macro_f1": record["macro_f1"]})

    def summary(self) -> None:
        log.info(
            "CentralDPAccounting: noise multiplier %g, clipping norm %g (%s side), %d of %d nodes, delta %.3g",
            self.cfg.central.central_noise_multiplier,
            self.cfg.central.central_clip,
            self.cfg.central.central_clipping,
            self.num_sampled,
            self.num_nodes,
            population_delta(self.cfg.central.central_delta, self.num_nodes),
        )
        self.strategy.summary()


def make_central_strategy(
    cfg: RunConfig,
    nodes: Mapping[int, CohortInfo],
    writer: RunWriter | None = None,
    server_step: MeanStep | None = None,
) -> CentralDPAccounting:
    """The wrapped strategy for a resolved config and the discovered nodes (``server_step``: the configured
    mean-family strategy stepping from the noisy mean, ``strategies.loading.central_step``)."""
    check_central_config(cfg)
    first = next(iter(nodes.values()))
    k = num_sampled_nodes(cfg.server.fraction_train, len(nodes))
    fedavg = CentralFedAvg(nodes, k, first.num_classes, secure_rng=bool(cfg.release.secure_rng))
    wrapper = (
        DifferentialPrivacyServerSideFixedClipping
        if cfg.central.central_clipping == "server"
        else DifferentialPrivacyClientSideFixedClipping
    )
    dp = wrapper(
        fedavg,
        noise_multiplier=float(cfg.central.central_noise_multiplier),
        clipping_norm=float(cfg.central.central_clip),
        num_sampled_clients=k,
    )
    return CentralDPAccounting(dp, cfg, k, len(nodes), writer, server_step=server_step)


def central_guarantee(cfg: RunConfig, strategy: CentralDPAccounting) -> dict[str, Any]:
    """What a central run guarantees, in numbers and in words."""
    p = privacy_record(cfg.central, strategy.num_sampled, strategy.num_nodes, strategy.released)
    how = (
        "RDP with amplification by sampling nodes without replacement"
        if p["accountant"] == "rdp"
        else "PLD of the full-batch Gaussian composition (no sampling amplification; tighter here)"
    )
    text = (
        f"({p['epsilon']:.4g}, {p['delta']:g})-DP for the {strategy.released} released global models and "
        f"everything computed from them, with respect to changing one user's data (replace-one); every user is "
        f"in exactly one node, so it also holds for changing one whole node's data. Each round "
        f"{p['sampled_nodes']} of {p['nodes']} nodes were sampled uniformly without replacement, each node's "
        f"update was clipped to L2 norm {p['clipping_norm']:g} on the {p['clipping']} side, and Gaussian noise of "
        f"std {p['noise_multiplier']:g} x {p['clipping_norm']:g} / {p['sampled_nodes']} was added to the "
        f"unweighted average; accounted with {how}."
    )
    notes = [CENTRAL_NOTE]
    if cfg.central.central_clipping == "server":
        notes.append("Server-side clipping: the server receives the nodes' unclipped updates.")
    notes += [
        "The guarantee assumes the set of sampled nodes is not published and the noise is drawn as specified "
        "(the simulation uses Flower's numpy floating-point Gaussian, not a hardened sampler).",
        f"The guarantee covers {GUARANTEE_COVERS['central']}; {EVALUATION_NOT_COVERED}. The nodes' training "
        "metrics are not used or reported.",
        "The sentence/label mechanism keys are ignored in central mode (no local sanitizer).",
    ]
    return {
        "central": {"notion": "(epsilon, delta)-DP", **p, "text": text},
        "ldp_guarantee_holds": False,
        "notes": notes,
    }
