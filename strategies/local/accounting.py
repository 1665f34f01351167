"""LocalDPAccounting: the per-user privacy account of a local-DP run, as a strategy wrapper.

In the shape of Flower's ``DifferentialPrivacy*FixedClipping`` wrappers (and
of ``strategies.central_node.CentralDPAccounting``): it takes the release-training
strategy, passes every call through, and around it

* reads every reply's charges (``fl.wire.Release``) into the per-user
  ledger (``fl.accounting.PrivacyLedger``): fresh training releases
  (embedding and label channels) and the test users' evaluation releases;
* estimates what a trusted shuffler would make of each round's fresh reports
  (``fl.accounting.analysis.shuffle``; what-if numbers, not the run's guarantee);
* asks the channel for its per-level report (words, sentences of documents);
* writes one round record per round (metrics, privacy, timings).

The ServerApp always puts this wrapper outermost, around whatever strategy the
run config names, so a custom strategy cannot skip the accounting.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy

from fl import wire
from fl.accounting import PrivacyLedger, ShuffledRound, compose_shuffled_pld, shuffle_amplification
from fl.accounting.charges import Charge
from fl.accounting.scope import scope_fields
from fl.config import as_run_config
from fl.levels.channels import Channels, concat_extras
from fl.reporting.results import RunWriter, keep_round
from mechanisms.guarantee import Guarantee
from strategies.grids.faults import StageOutcome, check_not_all_failed, split_replies

log = logging.getLogger(__name__)

LEAKY_WARNING = (
    "NOT LOCAL DP: map-in = 'leaky' trains M1 on clients' unsanitized gradients (computed from raw "
    "embeddings and true labels through the noise), which reveal the embeddings; the mechanism's "
    "epsilon does not bound what the server learns (docs/SPEC.md §3.2)"
)


#: What the shuffled what-if covers (every round record and the summary say so beside the figure).
SHUFFLED_COVERS = (
    "the round's fresh training releases (embedding, and label when protected) passed through a trusted "
    "shuffler; not the test users' sanitized inputs (their pure-LDP figure holds); a what-if: Sanitas has no shuffler"
)


class AccountedCore(Protocol):
    """What :class:`LocalDPAccounting` reads of the strategy it accounts (the innermost one), through its
    public attributes only, as Flower's DP wrappers read theirs: :class:`ReleaseTraining` has them, and
    so may a strategy of one's own."""

    leaky: bool  # M1 trained on unsanitized gradients: no local-DP guarantee, the figures are nominal
    channels: Channels | None  # the run's embedding and label channels (after discovery)
    nodes: Mapping[int, wire.CohortInfo]  # the discovered nodes
    info: wire.CohortInfo | None  # the shapes every node shares (M1's output, classes)
    num_train_users: int
    num_test_users: int
    public_info: dict[str, Any]  # what the public start did (the first round's record)
    train_info: dict[str, Any]  # this round's training facts (its record)
    evaluation: dict[str, Any]  # this round's federated evaluation (its record)


def innermost(strategy: Strategy) -> Strategy:
    """Follow ``.strategy`` attributes of wrappers down to the wrapped strategy."""
    seen = 0
    while hasattr(strategy, "strategy") and isinstance(strategy.strategy, Strategy) and seen < 16:
        strategy = strategy.strategy
        seen += 1
    return strategy


class LocalDPAccounting(Strategy):
    """Account a release-training strategy's rounds per user and write their records.

    Parameters
    ----------
    strategy : Strategy
        A :class:`ReleaseTraining`, a subclass, or wrappers around one (the
        innermost strategy must provide :class:`AccountedCore`: its channels and
        evaluation are read).
    cfg : Mapping[str, Any]
        Resolved run config (``accounting-delta``, ``map-in``).
    writer : RunWriter or None
        Where round records go; ``None`` keeps them in memory only.
    """

    def __init__(self, strategy: Strategy, cfg: Mapping[str, Any], writer: RunWriter | None = None) -> None:
        core = innermost(strategy)
        # Present as attributes or as properties (read only after discovery: not evaluated here).
        missing = [k for k in AccountedCore.__annotations__ if k not in vars(core) and not hasattr(type(core), k)]
        if missing:
            raise TypeError(
                f"the innermost strategy must be a ReleaseTraining or provide what the accounting reads "
                f"(AccountedCore): {type(core).__name__} lacks {missing}"
            )
        self.strategy = strategy
        self.core: AccountedCore = core  # type: ignore[assignment]
        self.cfg = as_run_config(cfg)
        self.writer = writer
        self.records: list[dict[str, Any]] = []
        self.ledger: PrivacyLedger | None = None  # sized at the first round (after discovery)
        self.level_warning: str | None = None
        self.shuffle_rounds: list[dict[str, Any]] = []
        self.refused_total = {"train": 0, "test": 0}
        self._seen: list[dict[str, np.ndarray]] = []  # extras of fresh embedding releases (level reports)
        self._round_reports: list[tuple[Guarantee, Guarantee | None, int]] = []
        self._round_started = 0.0
        # Failing nodes: what each stage's request asked of which node, and what may have been
        # released without arriving (see _charge_lost).
        self._grid: Grid | None = None
        self._requested: dict[str, dict[int, np.ndarray]] = {"train": {}, "test": {}}
        self._faults: dict[str, dict[str, int]] = {}
        self._lost = {"train": 0, "test": 0}
        self._charged: dict[str, np.ndarray] = {}  # per population: user charged an embedding release
        self._charge_table: dict[Charge, int] = {}  # distinct embedding charges seen, in order
        self._known: dict[str, np.ndarray] = {}  # per population: index of each user's last seen charge
        self._pending: dict[str, np.ndarray] = {}  # per population: lost releases of unknown charge

    @property
    def leaky(self) -> bool:
        return self.core.leaky

    def _open_ledger(self) -> None:
        core = self.core
        sizes = {"train": core.num_train_users, "test": core.num_test_users}
        self.ledger = PrivacyLedger(sizes, target_delta=self.cfg.release.accounting_delta)
        self._charged = {p: np.zeros(n, dtype=bool) for p, n in sizes.items()}
        self._known = {p: np.full(n, -1, dtype=np.int64) for p, n in sizes.items()}
        self._pending = {p: np.zeros(n, dtype=np.int64) for p, n in sizes.items()}
        assert core.channels is not None
        self.level_warning = type(core.channels.embedding).early_warning(
            self.cfg.release, core.num_train_users + core.num_test_users
        )
        if self.level_warning:
            log.warning("WORD-LEVEL DELTA TOO LARGE: %s", self.level_warning)

    # ------------------------------------------------------------------ Flower Strategy API
    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        self._round_started = time.time()
        self._grid = grid
        self._faults = {}
        messages = list(self.strategy.configure_train(server_round, arrays, config, grid))
        if self.ledger is None:
            self._open_ledger()
        self._requested["train"] = {
            m.metadata.dst_node_id: np.asarray(m.content[wire.CONFIG]["user-ids"], dtype=np.int64) for m in messages
        }
        return messages

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        outcome = self._outcome("train", server_round, replies)
        replies = outcome.ok
        for reply in replies:
            rel = wire.Release.from_content(reply.content)
            self.refused_total["train"] += wire.read_int(
                wire.metric_record(reply.content, wire.METRICS), "refused-releases", 0
            )
            report = self._charge("train", rel)
            label = rel.charges["label"][0].guarantee if rel.charges.get("label") else None
            self._round_reports.append((report, label, int(rel.fresh.sum())))
        return self.strategy.aggregate_train(server_round, replies)

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        messages = list(self.strategy.configure_evaluate(server_round, arrays, config, grid))
        nodes = self.core.nodes
        self._requested["test"] = {
            m.metadata.dst_node_id: np.arange(
                nodes[m.metadata.dst_node_id].test_users_lo, nodes[m.metadata.dst_node_id].test_users_hi
            )
            for m in messages
        }
        return messages

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        outcome = self._outcome("test", server_round, replies)
        replies = outcome.ok
        for reply in replies:
            rel = wire.Release.from_content(reply.content)
            self.refused_total["test"] += wire.read_int(
                wire.metric_record(reply.content, wire.METRICS), "refused-releases", 0
            )
            # charged, but not shuffled: a test user's sanitized input goes to the model, not into the
            # training reports a shuffler would carry (its own pure-LDP figure covers it)
            self._charge("test", rel)
        metrics = self.strategy.aggregate_evaluate(server_round, replies)
        self._write_record(server_round)
        return metrics

    def summary(self) -> None:
        self.strategy.summary()

    # ------------------------------------------------------------------ the ledger
    def _charge(self, population: str, rel: wire.Release) -> Guarantee:
        """Enter a release's fresh rows in the ledger; returns the guarantee of its most exposed
        embedding row (for the shuffling estimate).

        Every fresh row is charged what its charge says (the node's budget check
        used the same object); re-sent rows cost nothing.
        """
        assert self.ledger is not None and self.core.channels is not None
        embedding = self.core.channels.embedding
        self._learn_charges(population, rel)
        worst: Charge | None = None
        for channel in wire.CHANNELS:
            for users, charge in rel.fresh_charges(channel):
                self._record(population, users, charge, channel)
                if channel == "embedding" and (worst is None or charge.cost > worst.cost):
                    worst = charge
        if embedding.extra_keys:
            self._seen.append({k: rel.rows[k].numpy()[rel.fresh] for k in embedding.extra_keys})
        self._charged[population][rel.user_ids[rel.fresh]] = True
        return worst.release_guarantee() if worst is not None else embedding.guarantee

    # ------------------------------------------------------------------ failing nodes
    def _outcome(self, population: str, server_round: int, replies: Iterable[Message]) -> StageOutcome:
        """Sort a stage's replies, count its failures and charge what the failed nodes may have released."""
        stage = "train" if population == "train" else "evaluate"
        requested = self._requested[population]
        outcome = split_replies(requested, replies, self._grid)
        check_not_all_failed(outcome, stage, server_round, float(self.cfg.simulation.fault_rate))
        self._faults[stage] = outcome.counts()
        for node in outcome.lost_nodes:
            self._charge_lost(population, requested[node])
        return outcome

    def _learn_charges(self, population: str, rel: wire.Release) -> None:
        """Remember each user's embedding charge (a function of its document, the same at every
        release), and settle the lost releases of these users whose charge was unknown."""
        table = rel.charges.get("embedding", [])
        if not table:
            return
        local = np.array([self._charge_table.setdefault(c, len(self._charge_table)) for c in table], dtype=np.int64)
        known = local[np.asarray(rel.index["embedding"], dtype=np.int64)]
        self._known[population][rel.user_ids] = known
        pending = self._pending[population][rel.user_ids]
        if pending.any():
            assert self.ledger is not None
            charges = list(self._charge_table)
            owed = pending > 0
            for i in np.unique(known[owed]):
                users = rel.user_ids[owed & (known == i)]
                self._record(population, np.repeat(users, self._pending[population][users]), charges[i], "embedding")
            self._pending[population][rel.user_ids] = 0

    def _charge_lost(self, population: str, users: np.ndarray) -> None:
        """Charge the releases a failed node may have drawn for ``users`` (conservative).

        The server cannot tell whether a node that failed drew its noise: it may
        have released, and the reply been lost or late. So a user is charged as if
        it had released: with fresh noise every round, always; with cached
        releases, when it has no charged release yet (otherwise the node would
        re-send the cached one, which costs nothing). The charge is the channel's
        fixed one, or the user's own when it has been seen before; a user whose
        charge depends on its document (words, sentences) and who has never been
        seen is owed the release until one of its rows arrives (``pending``).
        """
        assert self.ledger is not None and self.core.channels is not None
        channels = self.core.channels
        if not self.cfg.release.fresh_noise_per_round:
            users = users[~self._charged[population][users]]
        if users.size == 0:
            return
        self._lost[population] += int(users.size)
        self._charged[population][users] = True
        embedding = channels.embedding
        if not embedding.extra_keys:
            table, index = embedding.charges(users.size, {})
            for i, charge in enumerate(table):
                self._record(population, users[np.asarray(index) == i], charge, "embedding")
        else:
            known = self._known[population][users]
            charges = list(self._charge_table)
            for i in np.unique(known[known >= 0]):
                self._record(population, users[known == i], charges[i], "embedding")
            np.add.at(self._pending[population], users[known < 0], 1)
        if population == "train":
            table, index = channels.label.charges(users.size)
            for i, charge in enumerate(table):
                self._record(population, users[np.asarray(index) == i], charge, "label")

    def _record(self, population: str, users: np.ndarray, charge: Charge, channel: str) -> None:
        """One release of ``charge`` per entry of ``users`` (repeats = several) in the ledger."""
        assert self.ledger is not None
        if users.size == 0:
            return
        units = None if charge.units is None else np.full(users.size, charge.units, dtype=np.int64)
        self.ledger.record(population, users, charge.guarantee, channel, units=units)

    def fault_record(self) -> dict[str, Any]:
        """This round's failures by stage and kind, and the lost releases charged so far."""
        pending = int(sum(int(p.sum()) for p in self._pending.values()))
        return {
            **{stage: counts for stage, counts in self._faults.items()},
            "lost_releases_charged": dict(self._lost),
            "lost_releases_unknown_charge": pending,
        }

    def privacy_record(self) -> dict[str, Any]:
        """The ledger's snapshot, or, in the leaky mode, a statement that no guarantee holds."""
        assert self.ledger is not None and self.core.channels is not None
        snapshot = {**scope_fields("local"), **self.ledger.snapshot()}
        pending = int(sum(int(p.sum()) for p in self._pending.values()))
        if pending:
            # A lost release whose charge depends on the document is owed, not entered: the
            # per-user totals would understate it, so they are withheld (the per-unit guarantee holds).
            for key in ("epsilon_ldp", "epsilon_total"):
                if key in snapshot:
                    snapshot[f"{key}_of_charged_releases"] = snapshot[key]
                    snapshot[key] = None
            snapshot["not_bounded_reason"] = (
                f"{pending} release(s) of failed nodes may have been drawn for users never seen, whose "
                "per-document charge (number of words or sentences) is unknown to the server"
            )
        snapshot.update(self.shuffle_record())
        seen = concat_extras(self._seen) if self._seen else {}
        level = self.core.channels.embedding.report(seen, self.level_warning)
        if level is not None:
            key, block = level
            snapshot[key] = block
        if not self.leaky:
            return snapshot
        return {
            "ldp_guarantee_holds": False,
            "reason": LEAKY_WARNING,
            **scope_fields("local"),
            "nominal_mechanism_accounting_not_a_guarantee": snapshot,
        }

    # ------------------------------------------------------------------ shuffling (what-if)
    def shuffle_record(self) -> dict[str, Any]:
        """What a trusted shuffler would turn this round's fresh releases into (an estimate).

        The round's n fresh *training* reports (the releases a shuffler would carry to the
        server; the test users' sanitized inputs are not among them and keep their own pure-LDP
        figure) are each pure eps0-LDP, eps0 being the largest per-report pure epsilon; the tighter
        valid bound of the variation-ratio analysis (Wang et al., VLDB 2024) and
        Feldman, McMillan & Talwar (2021) bounds the shuffled central epsilon at
        ``accounting-delta`` (``shuffle_method`` names it). ``epsilon_shuffled`` covers the embeddings;
        ``epsilon_shuffled_joint`` the (embedding, label) reports when labels are
        protected. Over rounds: a user releasing once (cached releases) is covered
        by its round's bound, so the run's figure is the maximum; with repeated
        releases the rounds compose by PLD (``_shuffle_total``). Sanitas has no shuffler: these are what-if
        numbers, not the run's guarantee.
        """
        reports = [(s, lab) for s, lab, k in self._round_reports if k > 0]
        n = sum(k for *_, k in self._round_reports)
        this: dict[str, Any] = {"shuffled_reports": n, "shuffled_covers": SHUFFLED_COVERS}
        for name, with_label in (("", False), ("_joint", True)):
            guarantees = [[s] + ([lab] if with_label and lab is not None else []) for s, lab in reports]
            this.update(self._shuffle_one(name, n, guarantees))
        self.shuffle_rounds.append(this)
        self._round_reports = []
        return {**this, **self._shuffle_total(""), **self._shuffle_total("_joint")}

    def _shuffle_one(self, name: str, n: int, guarantees: list[list[Guarantee]]) -> dict[str, Any]:
        if n == 0:
            return {f"epsilon_shuffled{name}": 0.0, f"delta_shuffled{name}": 0.0}
        eps0 = max(sum(g.as_ldp()[0] for g in gs) for gs in guarantees)
        if not math.isfinite(eps0) or any(g.as_ldp()[1] > 0 for gs in guarantees for g in gs):
            return {
                f"epsilon_shuffled{name}": None,
                f"delta_shuffled{name}": None,
                f"shuffle_method{name}": "not computed: a report is not pure LDP (or is in the clear)",
            }
        # the tighter valid bound for a generic pure eps0-LDP report: variation ratio (Wang et al. 2024)
        # or Feldman-McMillan-Talwar; shuffle_method says which ("variation_ratio", "fmt_numerical", ...)
        bound = shuffle_amplification(eps0, n, float(self.cfg.release.accounting_delta))
        return {
            f"epsilon_shuffled{name}": bound.epsilon,
            f"delta_shuffled{name}": bound.delta,
            f"shuffle_epsilon0{name}": eps0,
            f"shuffle_method{name}": bound.method,
        }

    def _shuffle_total(self, name: str) -> dict[str, Any]:
        """The shuffled what-if over rounds, and which accountant produced it.

        Every user released at most once: the rounds are disjoint sets of users,
        so the run's figure is the largest round's. Otherwise the rounds compose:
        by the PLD of each round's shuffled pair (``fl.accounting.analysis.shuffle_pld``,
        dp-accounting's composition), at ``accounting-delta``.
        """
        done = [r for r in self.shuffle_rounds if r["shuffled_reports"]]
        key_e, key_d, key_how = f"epsilon_shuffled{name}", f"delta_shuffled{name}", f"shuffle_composition{name}"
        if not done:
            return {f"{key_e}_total": 0.0, f"{key_d}_total": 0.0}
        if any(r[key_e] is None for r in done):
            return {f"{key_e}_total": None, f"{key_d}_total": None}
        assert self.ledger is not None
        if self.ledger.max_releases_per_user() <= 1:
            return {
                f"{key_e}_total": max(r[key_e] for r in done),
                f"{key_d}_total": max(r[key_d] for r in done),
                key_how: "max over rounds (each user released at most once)",
            }
        delta = float(self.cfg.release.accounting_delta)
        rounds = [ShuffledRound(r[f"shuffle_epsilon0{name}"], r["shuffled_reports"]) for r in done]
        return {
            f"{key_e}_total": compose_shuffled_pld(rounds, delta),
            f"{key_d}_total": delta,
            key_how: "pld of the shuffled pairs (dp-accounting)",
        }

    # ------------------------------------------------------------------ round records
    def _write_record(self, server_round: int) -> None:
        core = self.core
        ev = dict(core.evaluation)
        record = {
            "round": server_round,
            **{
                k: ev.get(k)
                for k in (
                    "accuracy",
                    "macro_f1",
                    "clean_accuracy",
                    "clean_macro_f1",
                    "public_only_accuracy",
                    "public_only_clean_accuracy",
                    "public_only_head_clean_accuracy",
                    "test_users",
                    "random_guess_f1",
                )
            },
            **core.train_info,
            "fresh_test_releases": ev.get("fresh_test_releases", 0),
            "refused_test_releases": ev.get("refused_test_releases", 0),
            "refused_releases_total": dict(self.refused_total),
            "faults": self.fault_record(),
            "ldp_guarantee_holds": not self.leaky,
            "privacy": self.privacy_record(),
            "seconds": round(time.time() - self._round_started, 3),
        }
        if "by_sentences" in ev:
            record["by_sentences"] = ev["by_sentences"]
        if server_round == 1 and core.public_info:
            record["public_pretraining"] = core.public_info
        privacy = f"clean accuracy {record['clean_accuracy']:.4f}, max eps_ldp "
        keep_round(
            self.records, self.writer, record, log, privacy + str(record["privacy"].get("epsilon_ldp", "none (leaky)"))
        )
