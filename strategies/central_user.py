"""User-level central DP (``mode = "central"``, ``central-unit = "user"``): DP-FedAvg over users.

Paper: McMahan et al. 2018, "Learning Differentially Private Recurrent Language
Models" (https://arxiv.org/abs/1710.06963), Alg. 1 with the fixed-denominator
estimator; accounting in ``fl.accounting.user_level``.

One round:

1. The server sends the global model and the Poisson sampling rate
   ``q = min(1, central-cohort-size / N)`` to every node holding training users.
2. Each node flips one coin per user (probability ``q``, from the node's secret,
   the round and the user id), computes each sampled user's update from the
   global model on that user's own documents, clips it to ``C`` and replies
   with the sum over its sampled users (``clients.central_client``), vectorized
   over users.
3. The server adds N(0, z^2 C^2 I) to the sum over nodes, divides by the fixed
   denominator ``q N`` and hands the result to the server optimizer as a
   pseudo-gradient: a FedAvg step (``server-optimizer = "sgd"``, step size
   ``server-learning-rate``) or FedAdam (``"adam"``, Reddi et al. 2021).
4. Nodes holding test users score the new model (confusion counts,
   diagnostics not covered by the guarantee).

Every user is its own privacy unit whatever node it sits on: a node only
batches the work, and the server sees one sum per node, never a user's update.
The per-user guarantee is the Poisson-subsampled Gaussian composed over the
rounds released.
"""

from __future__ import annotations

import logging
import math
import secrets
import time
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy
from torch import nn

from fl import wire
from fl.accounting.delta import delta_warning, population_delta
from fl.accounting.user_level import account_ahead, sampling_rate, user_privacy_record
from fl.config import RunConfig, as_run_config
from fl.encoding.encoder import best_device
from fl.encoding.public_tuning import part_learning_rate
from fl.maps.public_model import PublicModel
from fl.reporting.results import RunWriter, keep_round
from fl.training.encoder import trainable_state
from fl.training.server_optimizer import ServerOptimizer
from fl.training.user_updates import hash_seed, noisy_mean
from fl.wire import CohortInfo
from mechanisms.keystream import SecureGenerator
from strategies.evaluation import sum_confusions
from strategies.grids.faults import check_not_all_failed, split_replies
from strategies.mean_step import MeanStep

log = logging.getLogger(__name__)

OPTIMIZERS = ("adam", "sgd")


class UserLevelDPFedAvg(Strategy):
    """DP-FedAvg with Poisson-sampled users, per-user clipping on the nodes and Gaussian noise on the
    server; accounts every round per user and writes the round records.

    Parameters
    ----------
    cfg : Mapping[str, Any]
        Resolved run config (``central-*``, ``client-learning-rate``, ``server-optimizer``,
        ``server-learning-rate``, ``noise-seed``, ``device``).
    nodes : dict[int, CohortInfo]
        Node id -> cohort description (``strategies.discovery.discover_nodes``).
    model : ServerModel or EncoderClassifier
        The global model (its initial weights are the start: seeded, or public-trained); with
        ``central-train = "encoder"`` the encoder's top part and the head (``fl.training.encoder``).
    map_matrix : torch.Tensor or None
        M1 when the server provides it (``map-in = "public"``), sent with every request.
    writer : RunWriter or None
        Where round records go.
    server_step : MeanStep or None
        A Flower strategy whose aggregate is a mean (``strategy = "FedAdam"``, ...), stepping the model from
        the noisy mean in place of ``server-optimizer`` (``strategies.mean_step``).
    """

    def __init__(
        self,
        cfg: Mapping[str, Any],
        nodes: Mapping[int, CohortInfo],
        model: nn.Module,
        map_matrix: torch.Tensor | None = None,
        writer: RunWriter | None = None,
        server_step: MeanStep | None = None,
    ) -> None:
        self.cfg = as_run_config(cfg)
        self.server_step = server_step  # a Flower mean-family strategy in place of server-optimizer
        cfg = self.cfg
        if cfg.central.server_optimizer not in OPTIMIZERS:
            raise ValueError(f"server-optimizer must be one of {OPTIMIZERS}, got {cfg.central.server_optimizer!r}")
        self.nodes = dict(nodes)
        first = next(iter(self.nodes.values()))
        self.num_users = first.num_train_users
        self.num_classes = first.num_classes
        self.q = sampling_rate(float(cfg.central.central_cohort_size), self.num_users)
        warning = delta_warning(population_delta(cfg.central.central_delta, self.num_users), self.num_users, "user")
        if warning:
            log.warning("DELTA TOO LARGE: %s", warning)
        # Sorted by the users they hold, so the float sum over nodes has one order whatever Ray does.
        self.train_nodes = sorted(
            (n for n, v in self.nodes.items() if v.train_users_hi > v.train_users_lo),
            key=lambda n: self.nodes[n].train_users_lo,
        )
        self.test_nodes = sorted(
            (n for n, v in self.nodes.items() if v.holds_test_users), key=lambda n: self.nodes[n].test_users_lo
        )
        self.device = torch.device(best_device(cfg.server.device))
        self.model = model.to(self.device)
        lr = float(cfg.central.server_learning_rate)
        # The trainable parameters (central-train = "encoder": the encoder part and the head; the frozen
        # encoder weights never move) in two groups: the encoder part at its own step size.
        trainable = [(k, p) for k, p in self.model.named_parameters() if p.requires_grad]
        head = [p for k, p in trainable if not k.startswith("top.")]
        groups: list[dict[str, Any]] = [{"params": head, "lr": lr}]
        encoder = [p for k, p in trainable if k.startswith("top.")]
        if encoder:
            groups.append({"params": encoder, "lr": part_learning_rate(cfg.encoder, cfg.central.central_tuning_part)})
        # torch's Adam or SGD step, without building a torch Optimizer (1.5 s of torch.compile imports)
        self.optimizer = ServerOptimizer(groups, lr, cfg.central.server_optimizer)
        self.map_matrix = map_matrix
        rounds = int(cfg.server.num_server_rounds)
        self.evaluate_every = int(cfg.central.evaluate_every) or math.ceil(rounds / 10)
        self.writer = writer
        self.records: list[dict[str, Any]] = []
        self.released = 0
        self.timing: dict[str, float] = {}
        self._grid: Grid | None = None
        self._faults: dict[str, dict[str, int]] = {}
        self._started = 0.0
        self._sent: ArrayRecord | None = None  # the current model's record (None: rebuild after a step)
        # Node -> the object id of the model it kept from its last evaluate request (clients.central_client
        # .requested_model): its next train request names the model instead of carrying it again.
        self._held: dict[int, str] = {}
        self._noise_secret = int(cfg.release.noise_seed) if cfg.release.noise_seed >= 0 else secrets.randbits(62)
        # The model fitted on the public data alone (fl.maps.public_model), scored by the nodes beside the run's.
        self.public_model: PublicModel | None = None

    # ------------------------------------------------------------------ requests
    def _extras(self) -> dict[str, ArrayRecord]:
        if self.map_matrix is None:
            return {}
        return {wire.MAP_IN: ArrayRecord({"matrix": Array(self.map_matrix.numpy())})}

    def _arrays(self) -> ArrayRecord:
        """The trainable parameters only (the head; and the encoder part the nodes do not hold), built
        once per model version (one record shared by every request of the round)."""
        if self._sent is None:
            self._sent = ArrayRecord(trainable_state(self.model))
            # Its content address now, once: the evaluate requests' copies (local-wire = "handoff") inherit
            # it, so each node that keeps the model does not hash the same bytes again (requested_model).
            _ = self._sent.object_id
        return self._sent

    # ------------------------------------------------------------------ checkpoints
    _TRANSIENT = ("_sent", "_held")

    def __getstate__(self) -> dict[str, Any]:
        """What a checkpoint keeps: not which model each node holds (a resumed run's nodes hold none:
        the first requests carry the model again)."""
        return {k: v for k, v in self.__dict__.items() if k not in self._TRANSIENT}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._sent, self._held = None, {}

    def evaluates(self, server_round: int) -> bool:
        """Whether round ``server_round`` scores the model (every ``evaluate-every`` rounds, and the last)."""
        return server_round % self.evaluate_every == 0 or server_round >= int(self.cfg.server.num_server_rounds)

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        self._started = time.time()
        # This round's account, computed while the nodes work (fl.accounting.user_level.account_ahead).
        account_ahead(self.cfg.central, self.q, self.num_users, self.released + 1)
        self.timing = {}
        available = set(grid.get_node_ids())
        missing = [n for n in self.train_nodes if n not in available]
        if missing:
            raise RuntimeError(f"{len(missing)} node(s) holding training users are not connected")
        self._grid = grid
        self._faults = {}
        model = self._arrays()
        # The strategy's config (FedProx's proximal-mu) for the nodes' local steps.
        theirs = self.server_step.request_config(server_round, model) if self.server_step is not None else {}
        request = ConfigRecord({**theirs, "server-round": server_round, "sampling-rate": self.q})
        full = RecordDict({wire.MODEL: model, wire.CONFIG: request, **self._extras()})
        by_ref = RecordDict(
            {
                wire.CONFIG: ConfigRecord({**request, wire.MODEL_REF: model.object_id}),
                **self._extras(),
            }
        )
        return [
            Message(
                content=by_ref if self._held.get(n) == model.object_id else full,
                dst_node_id=n,
                message_type=MessageType.TRAIN,
            )
            for n in self.train_nodes
        ]

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Noise the sum of the nodes' clipped sums, divide by ``q N``, take one server-optimizer step."""
        replies = list(replies)
        self.timing["train_round_trip"] = time.time() - self._started
        started = time.time()
        outcome = split_replies(self.train_nodes, replies, self._grid)
        check_not_all_failed(outcome, "train", server_round, float(self.cfg.simulation.fault_rate))
        self._faults["train"] = outcome.counts()
        # A node whose sum is missing contributes nothing; the denominator stays q N (fixed), so the
        # sensitivity of the noisy mean, hence the accounting, is unchanged (the users it sampled
        # are charged by the accountant anyway: every user is, at rate q, every round).
        by_node = {r.metadata.src_node_id: r for r in outcome.ok}
        for node in self.train_nodes:
            if node not in by_node:  # whatever went wrong, the next request carries the model again
                self._held.pop(node, None)
        trainable = [(k, p) for k, p in self.model.named_parameters() if p.requires_grad]
        names = [k for k, _ in trainable]
        sums = {k: np.zeros(tuple(p.shape), dtype=np.float64) for k, p in trainable}
        for node in self.train_nodes:  # a fixed order: the same float sum whatever the arrival order
            if node not in by_node:
                continue
            record = wire.array_record(by_node[node].content, wire.UPDATE_SUM)
            if sorted(record.keys()) != sorted(names):
                raise RuntimeError(f"a node's update sum has arrays {sorted(record.keys())}, expected {names}")
            for k in names:
                # float64 += float32 read in place from the reply's bytes (exact widening; no array-sized copy)
                np.add(sums[k], wire.from_array(record[k]), out=sums[k])
        total = {k: torch.from_numpy(v) for k, v in sums.items()}
        gen = (
            SecureGenerator()
            if self.cfg.release.secure_rng
            else torch.Generator().manual_seed(hash_seed(self._noise_secret, server_round, 0x5E1))
        )
        z, clip = float(self.cfg.central.central_noise_multiplier), float(self.cfg.central.central_clip)
        mean = noisy_mean(total, z, clip, self.q * self.num_users, gen)
        if self.server_step is not None:  # the Flower strategy's step from the noisy mean (post-processing)
            stepped = self.server_step.step(server_round, self._arrays(), {k: v.cpu().numpy() for k, v in mean.items()})
            with torch.no_grad():
                for k, p in trainable:
                    p.copy_(torch.from_numpy(stepped[k].numpy()).to(device=p.device, dtype=p.dtype))
        else:
            self.optimizer.zero_grad(set_to_none=True)
            for k, p in trainable:
                p.grad = -mean[k].to(device=p.device, dtype=p.dtype)  # the mean update points downhill
            self.optimizer.step()
        self._sent = None
        self.released += 1
        self.timing["server_step"] = time.time() - started
        return self._arrays(), None

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        self._eval_started = time.time()
        if not self.evaluates(server_round):
            return []
        request = ConfigRecord({"server-round": server_round})
        public = (
            {}
            if self.public_model is None
            else {wire.PUBLIC_MODEL: ArrayRecord({"matrix": Array(self.public_model.as_matrix().numpy())})}
        )
        content = RecordDict({wire.MODEL: self._arrays(), wire.CONFIG: request, **self._extras(), **public})
        return [Message(content=content, dst_node_id=n, message_type=MessageType.EVALUATE) for n in self.test_nodes]

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        replies = list(replies)
        if not self.evaluates(server_round):
            return self._keep_record(server_round, None, None)
        self.timing["evaluate_round_trip"] = time.time() - self._eval_started
        outcome = split_replies(self.test_nodes, replies, self._grid)
        check_not_all_failed(outcome, "evaluate", server_round, float(self.cfg.simulation.fault_rate))
        self._faults["evaluate"] = outcome.counts()
        model_id = self._arrays().object_id  # the model these requests carried (no step since)
        answered = {r.metadata.src_node_id for r in outcome.ok}
        for node in self.test_nodes:
            if node in answered:
                self._held[node] = model_id
            else:
                self._held.pop(node, None)
        s, conf = sum_confusions(outcome.ok, self.num_classes)
        public_only = sum_confusions(outcome.ok, self.num_classes, "public-confusion")[0]["accuracy"]
        return self._keep_record(server_round, s, None if public_only != public_only else public_only, int(conf.sum()))

    def _keep_record(
        self, server_round: int, s: dict[str, Any] | None, public_only: float | None, test_users: int = 0
    ) -> MetricRecord | None:
        """Round ``server_round``'s record (scores ``s``, or none in a round not evaluated) with its account."""
        started = time.time()
        privacy = user_privacy_record(self.cfg.central, self.q, self.num_users, self.released)
        self.timing["accounting"] = time.time() - started
        score = {"accuracy": None, "macro_f1": None} if s is None else s
        record: dict[str, Any] = {
            "round": server_round,
            "accuracy": score["accuracy"],
            "macro_f1": score["macro_f1"],
            # Central mode evaluates on noise-free test embeddings: the clean scores are the scores.
            "clean_accuracy": score["accuracy"],
            "clean_macro_f1": score["macro_f1"],
            "public_only_accuracy": public_only,
            "test_users": test_users,
            "evaluated": s is not None,
            "mode": "central",
            "central_unit": "user",
            "ldp_guarantee_holds": False,
            "privacy": privacy,
            "faults": dict(self._faults),
            "timing": {k: round(v, 4) for k, v in self.timing.items()},
            "seconds": round(time.time() - self._started, 3),
        }
        text = f"per-user epsilon {privacy['epsilon']:.4g} (delta {privacy['delta']:g}, {privacy['accountant']})"
        keep_round(self.records, self.writer, record, log, text)
        if s is None:
            return None
        return MetricRecord({"accuracy": record["accuracy"], "macro_f1": record["macro_f1"]})

    def summary(self) -> None:
        log.info(
            "UserLevelDPFedAvg: %d users, q = %.4g (about %.0f per round), clip %g, noise multiplier %g, "
            "server %s at lr %g, %d training nodes",
            self.num_users,
            self.q,
            self.q * self.num_users,
            self.cfg.central.central_clip,
            self.cfg.central.central_noise_multiplier,
            self.cfg.central.server_optimizer,
            self.cfg.central.server_learning_rate,
            len(self.train_nodes),
        )


def user_level_guarantee(cfg: RunConfig, strategy: UserLevelDPFedAvg, start: str) -> dict[str, Any]:
    """What a user-level central run guarantees, in numbers and in words."""
    p = user_privacy_record(cfg.central, strategy.q, strategy.num_users, strategy.released)
    text = (
        f"({p['epsilon']:.4g}, {p['delta']:g})-DP per user (add or remove one user's data) for the "
        f"{strategy.released} released global models and everything computed from them. Each round every one "
        f"of the {strategy.num_users} training users was included independently with probability "
        f"q = {strategy.q:.4g}; each included user's model update (from their own documents only) was clipped "
        f"to L2 norm {p['clipping_norm']:g} on their node; the server added Gaussian noise of std "
        f"{p['noise_multiplier']:g} x {p['clipping_norm']:g} to the sum and divided by q N = "
        f"{strategy.q * strategy.num_users:.6g}. Accounted with dp-accounting ({p['accountant'].upper()}: "
        f"RDP {p['epsilon_rdp']:.4g}, PLD {p['epsilon_pld']:.4g}; the smaller is reported)."
    )
    notes = [
        "Central DP: the nodes compute model updates from their users' raw embeddings; the server is trusted "
        "to add the noise (it sees each node's sum of clipped updates). No local-DP guarantee holds.",
        "The guarantee assumes the sampled set stays secret (each node draws its users' coins from its own "
        "secret, or from noise-seed in a reproducible simulation) and the noise is drawn as specified (a float64 "
        + (
            "Gaussian from a ChaCha20 keystream, secure-rng"
            if cfg.release.secure_rng
            else "Gaussian from torch's Mersenne Twister, not a cryptographic generator: secure-rng = true draws "
            "from ChaCha20"
        )
        + "; no snapping against floating-point attacks).",
        f"Start: {start}.",
        "Nodes reply with the sum of their sampled users' clipped updates only: no count of sampled users, no "
        "per-user value, no training metric.",
        "The evaluation confusion counts are diagnostics computed from raw test data, not covered by the guarantee.",
    ]
    if cfg.release.noise_seed >= 0:
        notes.append("noise-seed is fixed for reproducibility; whoever knew it could remove the noise.")
    central = {"notion": "(epsilon, delta)-DP, user level", **p, "text": text}
    return {"central": central, "ldp_guarantee_holds": False, "notes": notes}
