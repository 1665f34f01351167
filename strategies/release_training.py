"""ReleaseTraining: the Sanitas server strategy (Flower Message API).

Each round: sample users (seeded), ask the nodes holding them for their
sanitized releases, add the releases to everything received so far, train the
downstream pipeline (M2 + classifier) on the server's device for
``server-epochs`` epochs, then have every node score the model on its test
users. The per-user privacy ledger is updated from the releases' guarantees and
``fresh`` flags, and a round record (metrics + privacy) is written.

The server never sees raw text, raw embeddings or the clients' noise: only
released rows, their guarantees, and aggregate confusion counts from evaluation
(simulation diagnostics, not covered by any DP guarantee).

Customise by subclassing (override :meth:`sample_users` or :meth:`fit`) or by
wrapping, as Flower's DP wrappers do (see ``strategies.wrappers``).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy
from tqdm.auto import tqdm

from fl import config as config_mod
from fl import datasets as data
from fl import maps
from fl import document_level
from fl import rewrite as rewrite_mod
from fl.document_level import DocumentSetup
from fl.accounting import PrivacyLedger
from fl.accounting.scope import scope_fields
from fl.encoder import best_device, embed_documents
from fl.pipeline import build_model, scores, train_epochs
from fl.results import RunWriter
from mechanisms.guarantee import Guarantee, compose_units

log = logging.getLogger(__name__)

LEAKY_WARNING = (
    "NOT LOCAL DP: map-in = 'leaky' trains M1 on clients' unsanitized gradients (computed from raw "
    "embeddings and true labels through the noise), which reveal the embeddings; the mechanism's "
    "epsilon does not bound what the server learns (spec §3.2)"
)


class ReleaseTraining(Strategy):
    """Train the downstream pipeline on local-DP releases.

    Parameters
    ----------
    cfg : Mapping[str, Any]
        Resolved run config (``fl.config.resolve``). Keys used here:
        ``seed``, ``fraction-train``, ``server-epochs``, ``batch-size``,
        ``learning-rate``, ``hidden-dim``, ``device``.
    writer : RunWriter or None
        Where round records go; ``None`` keeps them in memory only.
    timeout : float
        Seconds to wait for node replies in the discovery query.
    """

    def __init__(self, cfg: Mapping[str, Any], writer: RunWriter | None = None, timeout: float = 3600.0) -> None:
        self.cfg = dict(cfg)
        self.writer = writer
        self.timeout = timeout
        self.device = torch.device(best_device(self.cfg["device"]))
        self.records: list[dict[str, Any]] = []
        # Filled by discovery (first round).
        self.nodes: dict[int, dict[str, int]] = {}
        self.ledger: PrivacyLedger | None = None
        self.model: torch.nn.Module | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self._x: np.ndarray | None = None
        self._y: np.ndarray | None = None
        self._have: np.ndarray | None = None
        self.guarantees: dict[str, Guarantee] = {}
        self._round_started = 0.0
        self._train_info: dict[str, Any] = {}
        self.map_matrix: torch.Tensor | None = None  # M1 [d, m'] as the clients use it (None: identity)
        self.public_info: dict[str, Any] = {}
        self._map_param: torch.nn.Parameter | None = None  # leaky mode only
        self._map_optimizer: torch.optim.Optimizer | None = None

    # ------------------------------------------------------------------ discovery
    def discover(self, grid: Grid) -> None:
        """Ask every node which users it holds (QUERY messages).

        Nodes may still be registering when the ServerApp starts, so new nodes
        are queried until the reported cohorts cover every training and test
        user (or ``timeout`` passes).
        """
        deadline = time.time() + self.timeout
        while True:
            new = [n for n in grid.get_node_ids() if n not in self.nodes]
            queries = [
                Message(content=RecordDict({"config": ConfigRecord({})}), dst_node_id=n,
                        message_type=MessageType.QUERY)
                for n in new
            ]
            replies = list(grid.send_and_receive(queries, timeout=self.timeout)) if queries else []
            _raise_on_errors(replies, "query")
            for reply in replies:
                info = reply.content["cohort"]
                self.nodes[reply.metadata.src_node_id] = {k: int(v) for k, v in info.items()}
            if self.nodes and self._covered():
                break
            if time.time() > deadline:
                raise RuntimeError(f"after {self.timeout:.0f}s the {len(self.nodes)} nodes do not hold every user")
            time.sleep(0.5)
        first = next(iter(self.nodes.values()))
        self.num_classes = first["num-classes"]
        self.encoder_dim = first["encoder-dim"]
        self.map_dim = first["map-dim"]
        self.release_dim = first["release-dim"]
        self.num_train_users = first["num-train-users"]
        self.num_test_users = first["num-test-users"]
        self.ledger = PrivacyLedger({"train": self.num_train_users, "test": self.num_test_users},
                                    target_delta=self.cfg["accounting-delta"])
        self._words: list[np.ndarray] = []  # word level: word counts of the fresh releases
        self.word_delta_warning: str | None = None
        if rewrite_mod.enabled(self.cfg):
            self.word_delta_warning = rewrite_mod.delta_warning(
                rewrite_mod.word_mechanism(self.cfg).guarantee, self.num_train_users + self.num_test_users)
            if self.word_delta_warning:
                log.warning("WORD-LEVEL DELTA TOO LARGE: %s", self.word_delta_warning)
        self.shuffle_rounds: list[dict[str, Any]] = []
        self.refused_total = {"train": 0, "test": 0}
        self.model = build_model(self.cfg, self.release_dim, self.encoder_dim, self.num_classes).to(self.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=self.cfg["learning-rate"])
        self._gen = torch.Generator().manual_seed(int(self.cfg["seed"]))
        self._doc_index: dict[int, int] = {}
        self._x = np.zeros((0, self.release_dim), dtype=np.float32)
        self._y = np.zeros(0, dtype=np.int64)
        self.setup_map()
        self.document_setup: DocumentSetup | None = None
        self._setup_sent: set[int] = set()
        self._k_confusion: dict[str, np.ndarray] = {}
        self._sentences: list[np.ndarray] = []  # document level: k of the fresh releases
        if document_level.enabled(self.cfg):
            self.document_setup = document_level.build_setup(self.cfg, self.device)
            self.public_info = {**self.public_info, "document_setup": self.document_setup.info}
            log.info("document level: %s set up from public documents (%s)", self.cfg["document-mechanism"],
                     json.dumps({k: v for k, v in self.document_setup.info.items() if k != "recoder"}))
        log.info(
            "%d nodes hold %d training users and %d test users; releases are %d-dimensional",
            len(self.nodes), self.num_train_users, self.num_test_users, self.release_dim,
        )

    # ------------------------------------------------------------------ M1
    @property
    def leaky(self) -> bool:
        """True when M1 is trained on clients' unsanitized gradients: no LDP guarantee holds."""
        return self.cfg["map-in"] == "leaky"

    def setup_map(self) -> None:
        """Prepare M1: public seed (random), pretraining on the public split (public), or a leaky start."""
        kind = self.cfg["map-in"]
        self.map_matrix = maps.input_map(kind, self.encoder_dim, self.map_dim, self.cfg["map-seed"])
        if kind == "public":
            self.map_matrix = self.pretrain_public_map()
        elif kind == "leaky":
            log.warning("map-in = 'leaky': clients send unsanitized M1 gradients; the run is NOT local DP")
            assert self.map_matrix is not None
            self._map_param = torch.nn.Parameter(self.map_matrix.to(self.device, torch.float32).clone())
            self._map_optimizer = torch.optim.Adam([self._map_param], lr=self.cfg["learning-rate"])

    def pretrain_public_map(self) -> torch.Tensor:
        """Train M1, M2 and the classifier on the public split only; return the frozen M1.

        The server model keeps its public training as the starting point for
        training on releases.
        """
        cfg = self.cfg
        public = data.load(cfg).public
        assert public is not None and self.model is not None and self.map_matrix is not None
        emb = embed_documents(
            public["text"], cfg["doc-embedding"], cfg["encoder"], config_mod.cache_dir(cfg), str(self.device),
            cfg["encode-batch-size"], True,
        )
        x = torch.as_tensor(np.asarray(emb), dtype=torch.float32, device=self.device)
        y = torch.as_tensor(np.asarray(public["label"], dtype=np.int64), device=self.device)
        mech = config_mod.make_mechanism(cfg, "sentence", input_dim=self.map_dim)
        epochs = int(cfg["public-epochs"])
        with tqdm(total=epochs, desc=f"training M1 on {len(y)} public documents", leave=False) as bar:
            matrix, loss = maps.train_public_map(
                self.map_matrix, self.model, x, y, mech, epochs, int(cfg["batch-size"]),
                cfg["learning-rate"], self._gen, progress=lambda: bar.update(1),
            )
        self.public_info = {"public_documents": int(len(y)), "public_epochs": epochs, "public_loss": loss}
        log.info("M1 trained on %d public documents (loss %.4f), frozen", len(y), loss)
        return matrix

    def _map_record(self) -> dict[str, ArrayRecord]:
        """M1 for the clients in the modes where the server provides it."""
        if self.cfg["map-in"] not in maps.FROM_SERVER:
            return {}
        assert self.map_matrix is not None
        return {"map-in": ArrayRecord({"matrix": Array(self.map_matrix.numpy())})}

    def _document_record(self, node_id: int) -> dict[str, ArrayRecord]:
        """The document level's public material, sent to each node once."""
        if self.document_setup is None or node_id in self._setup_sent:
            return {}
        self._setup_sent.add(node_id)
        return {"document-setup": self.document_setup.to_record()}

    def _model_record(self) -> dict[str, ArrayRecord]:
        """The current server model, sent with training requests when clients need it."""
        needs = self.leaky or (self.cfg["label-mechanism"] == "rr_prior" and self.cfg["label-prior"] == "model")
        assert self.model is not None
        return {"arrays": ArrayRecord(self.model.state_dict())} if needs else {}

    def _covered(self) -> bool:
        """True when the nodes seen so far hold every training and every test user."""
        first = next(iter(self.nodes.values()))
        train = sum(v["train-users-hi"] - v["train-users-lo"] for v in self.nodes.values())
        test = sum(v["test-users-hi"] - v["test-users-lo"] for v in self.nodes.values())
        return train == first["num-train-users"] and test == first["num-test-users"]

    # ------------------------------------------------------------------ hooks
    def sample_users(self, server_round: int) -> np.ndarray:
        """Training users asked to release this round: a seeded sample without
        replacement of ``ceil(fraction-train * num_users)`` users."""
        k = max(1, math.ceil(self.cfg["fraction-train"] * self.num_train_users))
        rng = np.random.default_rng([int(self.cfg["seed"]), server_round])
        return np.sort(rng.choice(self.num_train_users, size=k, replace=False))

    def fit(self, server_round: int, x: np.ndarray, y: np.ndarray) -> float:
        """Train the server model on all releases received so far; returns the loss."""
        assert self.model is not None and self.optimizer is not None
        epochs = int(self.cfg["server-epochs"])
        xt = torch.as_tensor(x, device=self.device)
        yt = torch.as_tensor(y, device=self.device)
        with tqdm(total=epochs, desc=f"round {server_round}: training on {len(y)} releases", leave=False) as bar:
            return train_epochs(
                self.model, self.optimizer, xt, yt, epochs, int(self.cfg["batch-size"]), self._gen,
                progress=lambda: bar.update(1),
            )

    # ------------------------------------------------------------------ Flower Strategy API
    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        self._round_started = time.time()
        if not self.nodes:
            self.discover(grid)
        users = self.sample_users(server_round)
        messages = []
        for node_id, info in self.nodes.items():
            lo, hi = info["train-users-lo"], info["train-users-hi"]
            mine = users[(users >= lo) & (users < hi)]
            if mine.size == 0:
                continue
            cfg = ConfigRecord({"server-round": server_round, "user-ids": mine.tolist()})
            content = RecordDict({"config": cfg, **self._map_record(), **self._model_record(),
                                  **self._document_record(node_id)})
            messages.append(Message(content=content, dst_node_id=node_id, message_type=MessageType.TRAIN))
        self._train_info = {"sampled_users": int(users.size)}
        return messages

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        _raise_on_errors(replies, "train")
        assert self.ledger is not None
        fresh_total = refused = 0
        grads: list[np.ndarray] = []
        count = 0
        self._round_reports: list[tuple[Guarantee, Guarantee | None, int]] = []
        for reply in replies:
            refused += int(reply.content["metrics"].get("refused-releases", 0))
            if "map-in-grad" in reply.content:
                grads.append(reply.content["map-in-grad"]["grad"].numpy())
                count += int(reply.content["map-in-grad"]["count"].numpy()[0])
            rel = reply.content["release"]
            doc_ids = rel["doc-ids"].numpy()
            users = rel["user-ids"].numpy()
            fresh = rel["fresh"].numpy().astype(bool)
            self._store(doc_ids, self._embeddings(rel), rel["labels"].numpy())
            guarantees = _read_guarantees(reply.content["guarantees"])
            self.guarantees.update(guarantees)
            report = self._record_embedding("train", users[fresh], rel, fresh, guarantees)
            self.ledger.record("train", users[fresh], guarantees["label"], "label")
            self._round_reports.append((report, guarantees["label"], int(fresh.sum())))
            fresh_total += int(fresh.sum())
        if self.leaky and grads:
            self._step_leaky_map(np.sum(grads, axis=0) / max(count, 1))
        assert self._x is not None and self._y is not None
        # With every release refused (budgets spent) there may be nothing to train on yet.
        loss = self.fit(server_round, self._x, self._y) if len(self._y) else float("nan")
        self.refused_total["train"] += refused
        self._train_info.update({"train_releases_total": int(len(self._y)), "fresh_train_releases": fresh_total,
                                 "refused_train_releases": refused, "train_loss": loss})
        assert self.model is not None
        arrays = ArrayRecord(self.model.state_dict())
        return arrays, MetricRecord({"num-releases": int(len(self._y)), "train-loss": float(loss)})

    def _embeddings(self, rel: ArrayRecord) -> np.ndarray:
        """The released rows: sent as embeddings, or (DeepCandidate) as indices of public candidates."""
        if "candidate-ids" not in rel:
            return rel["embeddings"].numpy()
        assert self.document_setup is not None and self.document_setup.candidates is not None
        ids = torch.as_tensor(rel["candidate-ids"].numpy(), dtype=torch.int64)
        return self.document_setup.candidates[ids].numpy()

    def _record_embedding(self, population: str, users: np.ndarray, rel: ArrayRecord, fresh: np.ndarray,
                          guarantees: dict[str, Guarantee]) -> Guarantee:
        """Enter the fresh embedding releases of one reply in the ledger; returns the
        per-release guarantee of the reply's most exposed row (for shuffling estimates).

        At the word level (a ``"word"`` guarantee and per-row ``num-words``), a
        release composes the per-word guarantee over its document's words.
        """
        assert self.ledger is not None
        if self.document_setup is not None:  # the user's whole document: document_guarantee(k) per release
            mech = self.document_setup.mechanism(self.cfg)
            ks = rel["num-sentences"].numpy()[fresh]
            self._sentences.append(ks)
            for k in np.unique(ks):  # a handful of distinct k per reply
                self.ledger.record(population, users[ks == k], mech.document_guarantee(int(k)), "embedding")
            return mech.document_guarantee(int(ks.max()) if ks.size else 0)
        if "word" not in guarantees:
            self.ledger.record(population, users, guarantees["sentence"], "embedding")
            return guarantees["sentence"]
        words = rel["num-words"].numpy()[fresh]
        self.ledger.record(population, users, guarantees["word"], "embedding", units=words)
        self._words.append(words)
        return compose_units(guarantees["word"], int(words.max()) if words.size else 0, "document")

    def document_record(self) -> dict[str, Any]:
        """Document level: the per-sentence (SentDP) guarantee and the whole-document guarantee at the
        longest and the median released document (empty otherwise)."""
        if self.document_setup is None:
            return {}
        mech = self.document_setup.mechanism(self.cfg)
        ks = np.concatenate(self._sentences) if self._sentences else np.zeros(0, dtype=np.int64)
        longest, median = (int(ks.max()), int(np.median(ks))) if ks.size else (0, 0)

        def described(g: Guarantee) -> dict[str, Any]:
            return {**g.to_dict(), "pure_ldp": _finite(g.as_ldp()[0]), "text": g.describe()}

        return {
            "mechanism": mech.name,
            "per_sentence": {**described(mech.guarantee),
                             "text": f"{mech.guarantee.describe()} of a document (SentDP: neighbouring documents "
                                     "have the same number of sentences k and differ in one sentence; k is revealed)"},
            "max_sentences_per_document": longest,
            "median_sentences_per_document": median,
            "per_document_longest": described(mech.document_guarantee(longest)),
            "per_document_median": described(mech.document_guarantee(median)),
            "num_projections": self.document_setup.num_projections or None,
        }

    def word_record(self) -> dict[str, Any]:
        """Word level: the per-word guarantee, the document guarantee at the longest and the
        median released document, and the delta warning (empty otherwise)."""
        g = self.guarantees.get("word")
        if g is None:
            return {}
        words = np.concatenate(self._words) if self._words else np.zeros(0, dtype=np.int64)
        longest = int(words.max()) if words.size else 0
        median = int(np.median(words)) if words.size else 0
        # The mechanism's own composition over words (TrLaplace's is tighter than basic composition);
        # a "word" guarantee only comes back when the config names a word mechanism.
        document = rewrite_mod.word_mechanism(self.cfg).document_guarantee
        doc, doc_median = document(longest), document(median)
        return {
            "per_word": {**g.to_dict(), "pure_ldp": _finite(g.as_ldp()[0]), "text": g.describe()},
            "max_words_per_document": longest,
            "median_words_per_document": median,
            "per_document_longest": {**doc.to_dict(), "pure_ldp": _finite(doc.as_ldp()[0]), "text": doc.describe()},
            "per_document_median": {**doc_median.to_dict(), "pure_ldp": _finite(doc_median.as_ldp()[0]),
                                    "text": doc_median.describe()},
            "delta_warning": self.word_delta_warning,
        }

    def _step_leaky_map(self, grad: np.ndarray) -> None:
        """One Adam step on M1 from the clients' mean gradient (leaky mode: not private)."""
        assert self._map_param is not None and self._map_optimizer is not None
        self._map_optimizer.zero_grad(set_to_none=True)
        self._map_param.grad = torch.as_tensor(grad, dtype=torch.float32, device=self.device)
        self._map_optimizer.step()
        self.map_matrix = self._map_param.detach().to("cpu", torch.float64)

    def _store(self, doc_ids: np.ndarray, emb: np.ndarray, labels: np.ndarray) -> None:
        """Keep the latest release of each document (re-sent releases replace themselves)."""
        assert self._x is not None and self._y is not None
        new = [d for d in doc_ids.tolist() if d not in self._doc_index]
        for d in new:
            self._doc_index[d] = len(self._doc_index)
        if new:
            self._x = np.concatenate([self._x, np.zeros((len(new), self.release_dim), dtype=np.float32)])
            self._y = np.concatenate([self._y, np.zeros(len(new), dtype=np.int64)])
        idx = np.fromiter((self._doc_index[d] for d in doc_ids.tolist()), dtype=np.int64, count=len(doc_ids))
        self._x[idx] = emb
        self._y[idx] = labels

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        cfg = ConfigRecord({"server-round": server_round})
        return [
            Message(
                content=RecordDict({"arrays": arrays, "config": cfg, **self._map_record(),
                                    **self._document_record(node_id)}),
                dst_node_id=node_id, message_type=MessageType.EVALUATE,
            )
            for node_id, info in self.nodes.items()
            if info["test-users-hi"] > info["test-users-lo"]
        ]

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        replies = list(replies)
        _raise_on_errors(replies, "evaluate")
        assert self.ledger is not None
        k = self.num_classes
        conf = np.zeros((k, k), dtype=np.int64)
        clean = np.zeros((k, k), dtype=np.int64)
        by_k: dict[str, Any] = {}
        fresh_total = refused = 0
        for reply in replies:
            metrics = reply.content["metrics"]
            refused += int(metrics.get("refused-releases", 0))
            conf += np.asarray(metrics["confusion"], dtype=np.int64).reshape(k, k)
            if "clean-confusion" in metrics:  # absent when releases are not in M1's output space
                clean += np.asarray(metrics["clean-confusion"], dtype=np.int64).reshape(k, k)
            for name in ("confusion-by-k", "clean-confusion-by-k"):
                if name in metrics:
                    counts = np.asarray(metrics[name], dtype=np.int64).reshape(-1, k, k)
                    by_k[name] = by_k.get(name, 0) + counts
            rel = reply.content["release"]
            fresh = rel["fresh"].numpy().astype(bool)
            guarantees = _read_guarantees(reply.content["guarantees"])
            report = self._record_embedding("test", rel["user-ids"].numpy()[fresh], rel, fresh, guarantees)
            self._round_reports.append((report, None, int(fresh.sum())))
            fresh_total += int(fresh.sum())
        self.refused_total["test"] += refused
        sanitized, clean_scores = scores(conf), scores(clean)
        record = {
            "round": server_round,
            "accuracy": sanitized["accuracy"],
            "macro_f1": sanitized["macro_f1"],
            "clean_accuracy": clean_scores["accuracy"],
            "clean_macro_f1": clean_scores["macro_f1"],
            "test_users": int(conf.sum()),
            "random_guess_f1": _random_guess(conf),
            **self._train_info,
            "fresh_test_releases": fresh_total,
            "refused_test_releases": refused,
            "refused_releases_total": dict(self.refused_total),
            "ldp_guarantee_holds": not self.leaky,
            "privacy": self.privacy_record(),
            "seconds": round(time.time() - self._round_started, 3),
        }
        if "confusion-by-k" in by_k:
            record["by_sentences"] = _by_sentences(by_k["confusion-by-k"], by_k.get("clean-confusion-by-k"))
        if server_round == 1 and self.public_info:
            record["public_pretraining"] = self.public_info
        self.records.append(record)
        if self.writer is not None:
            self.writer.append_round(record)
        log.info(
            "round %d: accuracy %.4f, macro-F1 %.4f, clean accuracy %.4f, max eps_ldp %s",
            server_round, record["accuracy"], record["macro_f1"], record["clean_accuracy"],
            record["privacy"].get("epsilon_ldp", "none (leaky)"),
        )
        return MetricRecord({
            "accuracy": record["accuracy"], "macro-f1": record["macro_f1"],
            "clean-accuracy": record["clean_accuracy"],
        })

    def privacy_record(self) -> dict[str, Any]:
        """The ledger's snapshot, or, in the leaky mode, a statement that no guarantee holds."""
        assert self.ledger is not None
        snapshot = {**scope_fields("local"), **self.ledger.snapshot()}
        snapshot.update(self.shuffle_record())
        if self.guarantees.get("word") is not None:
            snapshot["word_level"] = self.word_record()
        if self.document_setup is not None:
            snapshot["document_level"] = self.document_record()
        if not self.leaky:
            return snapshot
        return {
            "ldp_guarantee_holds": False,
            "reason": LEAKY_WARNING,
            **scope_fields("local"),
            "nominal_mechanism_accounting_not_a_guarantee": snapshot,
        }

    def shuffle_record(self) -> dict[str, Any]:
        """What a trusted shuffler would turn this round's fresh releases into (an estimate).

        The round's n fresh reports (training and evaluation) are each pure
        eps0-LDP, eps0 being the largest per-report pure epsilon; Feldman,
        McMillan & Talwar (2021) bound the shuffled central epsilon at
        ``accounting-delta``. ``epsilon_shuffled`` covers the embeddings;
        ``epsilon_shuffled_joint`` the (embedding, label) reports when labels are
        protected. Over rounds: a user releasing once (cached releases) is covered
        by its round's bound, so the run's figure is the maximum; with repeated
        releases the rounds compose. Sanitas has no shuffler: these are what-if
        numbers, not the run's guarantee.
        """
        reports = [(s, lab) for s, lab, k in getattr(self, "_round_reports", []) if k > 0]
        n = sum(k for *_, k in getattr(self, "_round_reports", []))
        this = {"shuffled_reports": n}
        for name, with_label in (("", False), ("_joint", True)):
            guarantees = [[s] + ([lab] if with_label and lab is not None else []) for s, lab in reports]
            this.update(self._shuffle_one(name, n, guarantees))
        self.shuffle_rounds.append(this)
        self._round_reports = []
        return {**this, **self._shuffle_total("") , **self._shuffle_total("_joint")}

    def _shuffle_one(self, name: str, n: int, guarantees: list[list[Guarantee]]) -> dict[str, Any]:
        from fl.accounting import shuffle_bound

        if n == 0:
            return {f"epsilon_shuffled{name}": 0.0, f"delta_shuffled{name}": 0.0}
        eps0 = max(sum(g.as_ldp()[0] for g in gs) for gs in guarantees)
        if not math.isfinite(eps0) or any(g.as_ldp()[1] > 0 for gs in guarantees for g in gs):
            return {f"epsilon_shuffled{name}": None, f"delta_shuffled{name}": None,
                    f"shuffle_method{name}": "not computed: a report is not pure LDP (or is in the clear)"}
        bound = shuffle_bound(eps0, n, float(self.cfg["accounting-delta"]))
        return {f"epsilon_shuffled{name}": bound.epsilon, f"delta_shuffled{name}": bound.delta,
                f"shuffle_epsilon0{name}": eps0, f"shuffle_method{name}": bound.method}

    def _shuffle_total(self, name: str) -> dict[str, Any]:
        from fl.accounting import compose_shuffled

        done = [r for r in self.shuffle_rounds if r["shuffled_reports"]]
        key_e, key_d = f"epsilon_shuffled{name}", f"delta_shuffled{name}"
        if not done:
            return {f"{key_e}_total": 0.0, f"{key_d}_total": 0.0}
        if any(r[key_e] is None for r in done):
            return {f"{key_e}_total": None, f"{key_d}_total": None}
        assert self.ledger is not None
        if self.ledger.max_releases_per_user() <= 1:
            return {f"{key_e}_total": max(r[key_e] for r in done), f"{key_d}_total": max(r[key_d] for r in done)}
        eps, delta = compose_shuffled([r[key_e] for r in done], max(r[key_d] for r in done),
                                      float(self.cfg["accounting-delta"]))
        return {f"{key_e}_total": eps, f"{key_d}_total": delta}

    def summary(self) -> None:
        log.info(
            "ReleaseTraining: fraction-train %.3f, %d server epochs per round, batch %d, lr %g, device %s",
            self.cfg["fraction-train"], self.cfg["server-epochs"], self.cfg["batch-size"],
            self.cfg["learning-rate"], self.device,
        )


def _raise_on_errors(replies: list[Message], stage: str) -> None:
    errors = [r.error.reason for r in replies if r.has_error()]
    if errors:
        raise RuntimeError(f"{len(errors)} node(s) failed during {stage}: {errors[0]}")


def _random_guess(confusion: np.ndarray) -> float | None:
    """sum_i q_i^2 over the test label frequencies q: the score of guessing labels at random with
    those frequencies (the paper's random-guess line)."""
    total = confusion.sum()
    return float(((confusion.sum(axis=1) / total) ** 2).sum()) if total else None


def _by_sentences(conf: np.ndarray, clean: np.ndarray | None) -> list[dict[str, Any]]:
    """Scores per bucket of the number of sentences k (empty buckets left out)."""
    out = []
    for b in range(conf.shape[0]):
        if conf[b].sum() == 0:
            continue
        s = scores(conf[b])
        row = {"k": document_level.bucket_label(b), "k_min": document_level.K_EDGES[b], "documents": int(conf[b].sum()),
               "accuracy": s["accuracy"], "macro_f1": s["macro_f1"], "random_guess_f1": _random_guess(conf[b])}
        if clean is not None:
            row["clean_macro_f1"] = scores(clean[b])["macro_f1"]
        out.append(row)
    return out


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _read_guarantees(record: ConfigRecord) -> dict[str, Guarantee]:
    return {k: Guarantee.from_dict(json.loads(str(v))) for k, v in record.items()}
