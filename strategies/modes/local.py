"""Local DP (``mode = "local"``): every user sanitizes what it releases on its node; the server trains on
the releases (``strategies.local``). The mode's server side: its strategy inside the local accounting,
its guarantee statement, its summary and its attack state."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from flwr.app import ArrayRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy

from fl import config as config_mod
from fl import wire
from fl.accounting.scope import EVALUATION_NOT_COVERED, GUARANTEE_COVERS, scope_fields
from fl.attacks.state import AttackState
from fl.attacks.state import from_model as attack_from_model
from fl.config import RunConfig
from fl.data import datasets as data
from fl.levels.channels import run_label
from fl.reporting.results import RunWriter
from strategies.loading import make_strategy
from strategies.local.accounting import LEAKY_WARNING, LocalDPAccounting, innermost
from strategies.local.release_training import ReleaseTraining
from strategies.modes.base import ModeRun, any_node_local, final_fields

log = logging.getLogger(__name__)

SECURE_RNG_NOTE = (
    "secure-rng: every node draws its noise (sentence, label, word and document mechanisms) from a ChaCha20 "
    "keystream under a fresh key from its OS CSPRNG, and the server's sampling is keyed from the OS too; "
    "continuous noise is float64 without snapping (README, Reliability and safety)."
)


def guarantee_statement(cfg: RunConfig, accounting: LocalDPAccounting) -> dict[str, Any]:
    """What the run's releases guarantee, in numbers and in words (from the run's channels)."""
    core = accounting.core
    assert core.channels is not None and core.info is not None
    channels = core.channels
    statement: dict[str, Any] = {}
    sentence = config_mod.make_mechanism(
        cfg, "sentence", input_dim=core.info.map_dim, num_classes=core.info.num_classes
    ).guarantee
    for channel, g in (("sentence", sentence), ("label", channels.label.guarantee)):
        statement[channel] = {**g.to_dict(), "pure_ldp_per_release": g.as_ldp()[0], "text": g.describe()}
    pulled_back = {
        "random": "the public random map M1",
        "public": "M1 trained on the public split only, then frozen",
        "supervised": "the affine map computed from the public split only, then frozen",
    }
    if cfg.release.map_in in pulled_back:
        offset = " + b" if cfg.release.map_in == "supervised" else ""
        statement["sentence"]["text"] += (
            f" (metric pulled back through {pulled_back[cfg.release.map_in]}: d(n(M1 x{offset}), n(M1 x'{offset})))"
        )
    statement.update(channels.embedding.statement())
    statement["sentence"]["text"] = channels.embedding.sentence_text(statement["sentence"]["text"])
    statement["ldp_guarantee_holds"] = not core.leaky
    if core.leaky:
        for channel in ("sentence", "label"):
            statement[channel]["text"] = f"{LEAKY_WARNING}. Nominal mechanism: {statement[channel]['text']}"
    notes = [LEAKY_WARNING] if core.leaky else []
    notes += [
        "Each user is its own privacy unit; cohorts on a node only batch the work.",
        f"The guarantee covers {GUARANTEE_COVERS['local']}; {EVALUATION_NOT_COVERED}.",
    ]
    if not channels.label.guarantee.is_private:
        notes.append("Labels are released in the clear: the (embedding, label) pair has no finite epsilon.")
    if accounting.level_warning:
        notes.append(f"WARNING: {accounting.level_warning}")
    if cfg.release.noise_seed >= 0:
        notes.append("noise-seed is fixed for reproducibility; a server that knew it could remove the noise.")
    if cfg.release.secure_rng:
        notes.append(SECURE_RNG_NOTE)
    statement["notes"] = notes
    return statement


def trained_on(core: object) -> str:
    """``"server"`` or ``"nodes"``: where the accounted strategy trains (a user's own core: the server)."""
    return str(getattr(core, "trained_on", "server"))


def strategy_name(strategy: Strategy) -> str:
    """The name of the strategy that ran: the Flower strategy the nodes trained under, or the class."""
    core = innermost(strategy)
    named = getattr(core, "strategy_name", None)
    return str(named) if named else type(strategy).__name__


class LocalMode:
    """Local DP: the configured strategy (``ReleaseTraining``, a subclass, or a wrapper) inside the local
    accounting."""

    name = "local"
    scope = "local"
    wire_scopes: tuple[str, ...] = wire.LOCAL_SCOPES
    releases_embeddings = True

    def check(self, cfg: RunConfig) -> None:
        """Nothing beyond :func:`fl.config.validate` (the level's rules are the channels')."""

    def start(self, grid: Grid, cfg: RunConfig, writer: RunWriter, timeout: float) -> ModeRun:
        strategy: Strategy = make_strategy(cfg)
        return ModeRun(LocalDPAccounting(strategy, cfg, writer), ArrayRecord())

    def owns(self, strategy: Strategy) -> bool:
        return isinstance(strategy, LocalDPAccounting)

    def summary(self, cfg: RunConfig, run: ModeRun) -> tuple[dict[str, Any], str, str]:
        acc = run.strategy
        assert isinstance(acc, LocalDPAccounting)
        core = acc.core
        keys = ("accuracy", "macro_f1", "clean_accuracy", "clean_macro_f1", "random_guess_f1", "by_sentences")
        fields = {
            "strategy": strategy_name(acc.strategy),
            "trained_on": trained_on(core),
            **final_fields(run.records, keys),
            "privacy": (run.records[-1] if run.records else {}).get("privacy"),
            "ldp_guarantee_holds": not core.leaky,
            **scope_fields("local"),
            "guarantee": guarantee_statement(cfg, acc),
            "users": {"train": core.num_train_users, "test": core.num_test_users, "nodes": len(core.nodes)},
            "data": data.load(
                cfg.data, cfg.users, cfg.release.level
            ).describe(),  # includes documents dropped as empty or (document level) short
        }
        assert core.info is not None
        leak = " | NOT LDP (leaky M1)" if core.leaky else ""
        trained = trained_on(core) == "nodes"
        on_nodes = f" | {fields['strategy']} on the nodes" if trained else ""
        title = (
            f"{cfg.data.dataset} | {run_label(cfg.release)} | M1={cfg.release.map_in} m'={core.info.map_dim} | "
            f"label={cfg.release.label_mechanism}{leak}{on_nodes}"
        )
        return fields, title, "sanitized test"

    def attack_state(self, cfg: RunConfig, run: ModeRun, final: ArrayRecord) -> AttackState | None:
        assert isinstance(run.strategy, LocalDPAccounting)
        core = run.strategy.core
        if not isinstance(core, ReleaseTraining) or core.model is None:
            log.info("no attack state: the strategy is not Sanitas' release training (a user's own strategy)")
            return None
        if trained_on(core) == "nodes":
            log.info("no attack state: the nodes trained on their own releases; the server stored none")
            return None
        stored = core.stored_documents()
        return attack_from_model(core.model, core.map_matrix, stored, "documents whose releases the server stored")

    def holds_own_files(self, run: ModeRun) -> bool:
        assert isinstance(run.strategy, LocalDPAccounting)
        return any_node_local(getattr(run.strategy.core, "nodes", {}).values())

    def run_name(self, cfg: RunConfig) -> str:
        """The dataset and the level's mechanism and epsilon."""
        return f"{Path(cfg.data.dataset).stem}-{run_label(cfg.release)}"
