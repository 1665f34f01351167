"""ReleaseTraining: the Sanitas server strategy (Flower Message API).

Each round: sample users (seeded), ask the nodes holding them for their
releases, add the releases to everything received so far, train the
downstream pipeline (M2 + classifier) on the server's device for
``server-epochs`` epochs, then have every node score the model on its test
users.

This class holds no privacy accounting: the ServerApp always wraps it (or a
user's subclass or wrapper of it) in :class:`strategies.local.accounting.LocalDPAccounting`,
which reads each release's charges into the per-user ledger and writes the
round records, the way Flower's ``DifferentialPrivacy*FixedClipping`` wrap a
strategy.

The server never sees raw text, raw embeddings or the clients' noise: only
released rows, their charges, and aggregate confusion counts from evaluation
(simulation diagnostics, not covered by any DP guarantee).

Customise by subclassing (override :meth:`sample_users` or :meth:`fit`) or by
wrapping (a Flower ``Strategy`` whose constructor takes ``strategy``).

M1 (its start, the record that carries it, the cohorts' refits) and the public-only line are
:class:`strategies.local.server_map.ServerMap`'s, which this class mixes in; the evaluate replies are
summed into scores by :func:`strategies.local.evaluation.evaluation_scores`.
"""

from __future__ import annotations

import json
import logging
import math
import secrets
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy

from fl import config as config_mod
from fl import wire
from fl.config import as_run_config
from fl.encoding.encoder import best_device
from fl.levels.channels import Channels, channel_class, make_channels
from fl.levels.document.setup import DocumentSetup
from fl.levels.spec import LevelSpec
from fl.maps import class_means
from fl.maps import cohorts as cohort_maps
from fl.maps.minibatch import server_adam
from fl.maps.pipeline import build_model, train_epochs
from fl.maps.public_model import PublicModel
from fl.reporting.progress import bar as progress_bar
from strategies.discovery import discover_nodes, raise_on_errors
from strategies.local.evaluation import evaluation_scores
from strategies.local.server_map import ServerMap

log = logging.getLogger(__name__)


class ReleaseTraining(Strategy, ServerMap):
    """Train the downstream pipeline on local-DP releases (on the server: ``trained_on``).

    Parameters
    ----------
    cfg : Mapping[str, Any]
        Resolved run config (``fl.config.resolve``). Keys used here: ``seed``,
        ``fraction-train``, ``server-epochs``, ``batch-size``, ``learning-rate``,
        ``hidden-dim``, ``device``, ``map-in``, ``map-dim``, ``map-scale``,
        ``map-seed``, ``public-epochs``, ``label-mechanism`` and ``label-prior`` (whether
        nodes need the model), and the document level's keys for its public setup.
    timeout : float
        Seconds to wait for node replies in the discovery query.
    """

    #: Where the model is trained on the releases: here, on the server (``NodeTraining``: on the nodes).
    trained_on = "server"

    def __init__(self, cfg: Mapping[str, Any], timeout: float = 3600.0) -> None:
        self.cfg = as_run_config(cfg)
        self.timeout = timeout
        self.device = torch.device(best_device(self.cfg.server.device))
        # Filled by discovery (first round).
        self.nodes: dict[int, wire.CohortInfo] = {}
        self.info: wire.CohortInfo | None = None  # shapes shared by every node
        self.channels: Channels | None = None
        self.model: torch.nn.Module | None = None  # ServerModel, or class_means.LinearHead (server-model)
        self.optimizer: torch.optim.Optimizer | None = None
        # The model fitted on the public data alone (fl.maps.public_model), held against the run: the public
        # logistic regression (clean test inputs) and the server model fitted on public releases alone.
        self.public_model: PublicModel | None = None
        self.public_head: torch.nn.Module | None = None
        self.public_stats: class_means.PublicStatistics | None = None
        self.map_matrix: torch.Tensor | None = None  # M1 [d, m'] as the clients use it (None: identity)
        self.document_setup: DocumentSetup | None = None
        self.public_info: dict[str, Any] = {}
        # secure-rng: the server's sampling and training shuffles come from the OS CSPRNG too.
        self._secure_seed = secrets.randbits(63) if self.cfg.release.secure_rng else None
        self._gen = torch.Generator().manual_seed(
            self._secure_seed if self._secure_seed is not None else int(self.cfg.users.seed)
        )
        self._map_param: torch.nn.Parameter | None = None  # leaky mode only
        self._map_optimizer: torch.optim.Optimizer | None = None
        self._setup_sent: set[int] = set()
        # cohorts > 1 (fl.maps.cohorts): the last class-means fit and the round whose cohort the map is for.
        self._last_fit: class_means.Fit | None = None
        self._map_round = 1
        # Every document's latest release (re-sent releases replace themselves): document row ->
        # slot (-1: none yet), slots in first-seen order; _x / _y are views of the filled slots.
        self._slot = np.zeros(0, dtype=np.int64)
        self._x_buf = np.zeros((0, 0), dtype=np.float32)
        self._y_buf = np.zeros(0, dtype=np.int64)
        self._x = self._x_buf
        self._y = self._y_buf
        # What the last round did (read by the accounting wrapper for the round record).
        self.train_info: dict[str, Any] = {}
        self.evaluation: dict[str, Any] = {}

    # ------------------------------------------------------------------ discovery
    def discover(self, grid: Grid) -> None:
        """Find the nodes, then build the model, M1 and the document level's public material."""
        self.nodes = discover_nodes(grid, self.timeout, self.nodes)
        self.info = info = next(iter(self.nodes.values()))
        if self.class_means:
            self.model = class_means.LinearHead(info.release_dim, info.num_classes).to(self.device)
        else:
            self.model = build_model(
                info.release_dim,
                info.encoder_dim,
                info.num_classes,
                hidden_dim=self.cfg.server.hidden_dim,
                seed=self.cfg.users.seed,
            ).to(self.device)
            self.optimizer = server_adam(self.model.parameters(), self.cfg.server.learning_rate, self.device)
        self._x_buf = np.zeros((0, info.release_dim), dtype=np.float32)
        self._x = self._x_buf[:0]
        self.setup_map()
        if self.cohorts > 1 and self.stage_dim != info.release_dim:  # the earlier cohorts' cohort-map-dim
            self._start_stage()
        level = LevelSpec.from_config(self.cfg)
        self.document_setup = channel_class(level.level).public_setup(level, self.device)
        if self.document_setup is not None:
            self.public_info = {**self.public_info, "document_setup": self.document_setup.info}
            log.info(
                "document level: %s set up from public documents (%s)",
                self.cfg.release.document_mechanism,
                json.dumps({k: v for k, v in self.document_setup.info.items() if k != "recoder"}),
            )
        self.channels = make_channels(level, info.map_dim, self.document_setup, info.num_classes)
        self.setup_public_only()
        log.info(
            "%d nodes hold %d training users and %d test users; releases are %d-dimensional",
            len(self.nodes),
            info.num_train_users,
            info.num_test_users,
            info.release_dim,
        )

    @property
    def num_train_users(self) -> int:
        assert self.info is not None, "known after discovery"
        return self.info.num_train_users

    @property
    def num_test_users(self) -> int:
        assert self.info is not None, "known after discovery"
        return self.info.num_test_users

    def stored_documents(self) -> np.ndarray:
        """The training documents whose releases the server stores (sorted row ids): the members an
        attacker of the server's model targets (``fl.attacks``)."""
        return np.flatnonzero(self._slot >= 0)

    # ------------------------------------------------------------------ what requests carry
    def _document_record(self, node_id: int) -> dict[str, ArrayRecord]:
        """The document level's public material, sent to each node once."""
        if self.document_setup is None or node_id in self._setup_sent:
            return {}
        self._setup_sent.add(node_id)
        return {wire.DOCUMENT_SETUP: self.document_setup.to_record()}

    def _model_record(self) -> dict[str, ArrayRecord]:
        """The current server model, sent with training requests when clients need it."""
        needs = self.leaky or (
            self.cfg.release.label_mechanism == "rr_prior" and self.cfg.release.label_prior == "model"
        )
        assert self.model is not None
        return {wire.MODEL: ArrayRecord(self.model.state_dict())} if needs else {}

    # ------------------------------------------------------------------ hooks
    def sample_users(self, server_round: int) -> np.ndarray:
        """Training users asked to release this round: a seeded sample without
        replacement of ``ceil(fraction-train * num_users)`` users (seeded from the OS CSPRNG
        with ``secure-rng``); with ``cohorts`` > 1, the round's own disjoint cohort."""
        base = self._secure_seed if self._secure_seed is not None else int(self.cfg.users.seed)
        if self.cohorts > 1:  # one disjoint cohort a round: every user asked once (fl.maps.cohorts)
            return cohort_maps.cohort_users(self.num_train_users, self.cohorts, base)[server_round - 1]
        k = max(1, math.ceil(self.cfg.server.fraction_train * self.num_train_users))
        rng = np.random.default_rng([base, server_round])
        return np.sort(rng.choice(self.num_train_users, size=k, replace=False))

    def fit(self, server_round: int, x: np.ndarray, y: np.ndarray) -> float:
        """Train the server model on all releases received so far; returns the loss (NaN for
        ``class-means``, which fits in closed form: :meth:`fit_class_means`)."""
        if self.class_means:
            return self.fit_class_means(x, y)
        assert self.model is not None and self.optimizer is not None
        epochs = int(self.cfg.server.server_epochs)
        xt = torch.as_tensor(x, device=self.device)
        yt = torch.as_tensor(y, device=self.device)
        desc = f"round {server_round}: training on {len(y)} releases"
        with progress_bar(total=epochs, desc=desc, leave=False) as bar:
            return train_epochs(
                self.model,
                self.optimizer,
                xt,
                yt,
                epochs,
                int(self.cfg.server.batch_size),
                self._gen,
                progress=lambda: bar.update(1),
            )

    def fit_class_means(self, x: np.ndarray, y: np.ndarray) -> float:
        """``server-model = "class-means"``: the releases' class means, debiased by the sentence mechanism's
        and the label mechanism's known laws, combined with the public class means
        (:func:`fl.maps.class_means.fit`), loaded into the server's linear head. Returns NaN (no loss)."""
        assert self.channels is not None and self.model is not None and self.info is not None
        if self.public_stats is None:
            raise ValueError(
                'server-model = "class-means" needs public data (public-fraction, public-size or public-dataset)'
            )
        k = self.info.num_classes
        mechanism = self.channels.embedding.mechanism  # type: ignore[attr-defined]
        if self.stage_dim != self.info.map_dim:  # an earlier cohort's releases (cohort-map-dim): its own law
            mechanism = config_mod.make_mechanism(self.cfg, "sentence", input_dim=self.stage_dim, num_classes=k)
        second = mechanism.unbiased_moments(self.stage_dim)
        if second is None:
            raise ValueError('server-model = "class-means" needs a sentence mechanism whose releases are unbiased')
        label = self.channels.label.mechanism
        law = label.log_transition_matrix(k) if self.cfg.release.label_mechanism != "none" else None
        covariance_law = None
        # With cohorts the earlier cohorts' maps are wide (cohort-map-dim), where a debiased covariance is too
        # noisy: only the last cohort's fit reads its releases' covariance.
        if self.cfg.server.class_means_covariance == "releases" and self._map_round == self.cohorts:
            covariance_law = mechanism.second_moment_law(self.stage_dim)
        fitted = class_means.fit(
            x, y, class_means.label_transition(law, k), second, self.public_stats, covariance_law=covariance_law
        )
        self._last_fit = fitted
        self.model.load_state_dict(fitted.head().state_dict())
        self.train_info["class_means"] = fitted.describe()
        return float("nan")

    # ------------------------------------------------------------------ Flower Strategy API
    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        if not self.nodes:
            self.discover(grid)
        self.next_cohort_map(server_round)
        users = self.sample_users(server_round)
        messages = []
        for node_id, info in self.nodes.items():
            mine = users[(users >= info.train_users_lo) & (users < info.train_users_hi)]
            if mine.size == 0:
                continue
            request = ConfigRecord({"server-round": server_round, "user-ids": mine.tolist()})
            content = RecordDict(
                {wire.CONFIG: request, **self._map_record(), **self._model_record(), **self._document_record(node_id)}
            )
            messages.append(Message(content=content, dst_node_id=node_id, message_type=MessageType.TRAIN))
        self.train_info = {"sampled_users": int(users.size)}
        return messages

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        raise_on_errors(replies, "train")
        # Replies arrive in any order and node ids are random per run: sorted by the users a node
        # holds, the stored rows (hence the training batches) are the same in every run of a seed.
        replies.sort(key=lambda r: self.nodes[r.metadata.src_node_id].train_users_lo)
        assert self.channels is not None
        fresh_total = refused = count = 0
        grads: list[np.ndarray] = []
        for reply in replies:
            refused += wire.read_int(wire.metric_record(reply.content, wire.METRICS), "refused-releases", 0)
            if wire.MAP_GRAD in reply.content:
                leak = wire.array_record(reply.content, wire.MAP_GRAD)
                grads.append(leak["grad"].numpy())
                count += int(leak["count"].numpy()[0])
            rel = wire.Release.from_content(reply.content)
            assert rel.doc_ids is not None and rel.labels is not None, "a training release carries documents"
            self._store(rel.doc_ids, self.channels.embedding.from_record(rel.rows_record()).emb, rel.labels)
            fresh_total += int(rel.fresh.sum())
        if self.leaky and grads:
            self._step_leaky_map(np.sum(grads, axis=0) / max(count, 1))
        # With every release refused (budgets spent) there may be nothing to train on yet.
        loss = self.fit(server_round, self._x, self._y) if len(self._y) else float("nan")
        self.train_info.update(
            {
                "train_releases_total": int(len(self._y)),
                "fresh_train_releases": fresh_total,
                "refused_train_releases": refused,
                "train_loss": loss,
            }
        )
        assert self.model is not None
        return ArrayRecord(self.model.state_dict()), MetricRecord(
            {"num-releases": int(len(self._y)), "train-loss": float(loss)}
        )

    def _store(self, doc_ids: np.ndarray, emb: np.ndarray, labels: np.ndarray) -> None:
        """Keep the latest release of each document (re-sent releases replace themselves).

        A new document gets the next slot, in the order the replies list them; the buffers grow
        geometrically, so storing N releases costs O(N) whatever the number of replies.
        """
        doc_ids = np.asarray(doc_ids, dtype=np.int64)
        if doc_ids.size == 0:
            return
        if doc_ids.min() < 0:
            raise ValueError("document ids must be >= 0")
        top = int(doc_ids.max()) + 1
        if top > self._slot.size:
            grown = np.full(max(top, 2 * self._slot.size), -1, dtype=np.int64)
            grown[: self._slot.size] = self._slot
            self._slot = grown
        slots = self._slot[doc_ids]
        if (slots < 0).any():
            unseen, first = np.unique(doc_ids[slots < 0], return_index=True)
            unseen = unseen[np.argsort(first)]  # first-seen order
            count = self._y.size
            self._reserve(count + unseen.size)
            self._slot[unseen] = np.arange(count, count + unseen.size)
            self._x, self._y = self._x_buf[: count + unseen.size], self._y_buf[: count + unseen.size]
            slots = self._slot[doc_ids]
        self._x[slots] = emb
        self._y[slots] = labels

    def _reserve(self, rows: int) -> None:
        """Room for ``rows`` stored releases (at least doubling, so growth is amortised O(1) per row)."""
        if rows <= self._y_buf.size:
            return
        size = max(rows, 2 * self._y_buf.size)
        x_buf = np.zeros((size, self._x_buf.shape[1]), dtype=np.float32)
        y_buf = np.zeros(size, dtype=np.int64)
        x_buf[: self._y.size] = self._x
        y_buf[: self._y.size] = self._y
        self._x_buf, self._y_buf = x_buf, y_buf

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        if self.cohorts > 1 and server_round < self.cohorts:
            return []  # a cohort's model is a step: the test users release once, for the last cohort's model
        request = ConfigRecord({"server-round": server_round})
        return [
            Message(
                content=RecordDict(
                    {
                        wire.MODEL: arrays,
                        wire.CONFIG: request,
                        **self._map_record(),
                        **self._document_record(node_id),
                        **self._public_records(),
                    }
                ),
                dst_node_id=node_id,
                message_type=MessageType.EVALUATE,
            )
            for node_id, info in self.nodes.items()
            if info.holds_test_users
        ]

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        """Sum the nodes' confusion counts; the scores go to ``self.evaluation`` and the MetricRecord."""
        replies = list(replies)
        raise_on_errors(replies, "evaluate")
        assert self.info is not None
        self.evaluation = evaluation_scores(replies, self.info.num_classes)
        return MetricRecord({key: self.evaluation[key] for key in ("accuracy", "macro_f1", "clean_accuracy")})

    def summary(self) -> None:
        log.info(
            "ReleaseTraining: fraction-train %.3f, %d server epochs per round, batch %d, lr %g, device %s",
            self.cfg.server.fraction_train,
            self.cfg.server.server_epochs,
            self.cfg.server.batch_size,
            self.cfg.server.learning_rate,
            self.device,
        )
