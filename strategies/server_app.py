"""The Sanitas ServerApp: one driver for both modes.

Validate, open the results folder, build the mode's strategy (always wrapped
by its accounting: ``LocalDPAccounting`` or ``CentralDPAccounting``), run it,
write the summary and the plot.

Used by ``flwr run .`` (``[tool.flwr.app.components] serverapp``) and by
``sanitas run`` / ``simulations.run`` (which pass their resolved config as
overrides).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flwr.app import ArrayRecord, Context
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import Strategy

from fl import config as config_mod
from fl import datasets as data
from fl.accounting.central import check_central_config
from fl.accounting.scope import EVALUATION_NOT_COVERED, GUARANTEE_COVERS, scope_fields
from fl.channels import channel_class, run_label
from fl.pipeline import build_model
from fl.results import RunWriter, run_folder

from .central import CentralDPAccounting, central_guarantee, make_central_strategy
from .discovery import discover_nodes
from .loading import make_strategy
from .local_accounting import LEAKY_WARNING, LocalDPAccounting

log = logging.getLogger(__name__)


def guarantee_statement(cfg: Mapping[str, Any], accounting: LocalDPAccounting) -> dict[str, Any]:
    """What the run's releases guarantee, in numbers and in words (from the run's channels)."""
    core = accounting.core
    assert core.channels is not None and core.info is not None
    channels = core.channels
    statement: dict[str, Any] = {}
    sentence = config_mod.make_mechanism(cfg, "sentence", input_dim=core.info.map_dim).guarantee
    for channel, g in (("sentence", sentence), ("label", channels.label.guarantee)):
        statement[channel] = {**g.to_dict(), "pure_ldp_per_release": g.as_ldp()[0], "text": g.describe()}
    pulled_back = {
        "random": "the public random map M1",
        "public": "M1 trained on the public split only, then frozen",
    }
    if cfg["map-in"] in pulled_back:
        statement["sentence"]["text"] += (
            f" (metric pulled back through {pulled_back[cfg['map-in']]}: d(n(M1 x), n(M1 x')))"
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
    if cfg["noise-seed"] >= 0:
        notes.append("noise-seed is fixed for reproducibility; a server that knew it could remove the noise.")
    statement["notes"] = notes
    return statement


@dataclass
class ModeRun:
    """One mode's strategy (its accounting outermost) and how its summary and plot read."""

    strategy: LocalDPAccounting | CentralDPAccounting
    initial_arrays: ArrayRecord

    @property
    def records(self) -> list[dict[str, Any]]:
        return self.strategy.records


def local_run(grid: Grid, cfg: Mapping[str, Any], writer: RunWriter) -> ModeRun:
    """The configured strategy (``ReleaseTraining``, a subclass, or a wrapper) inside the accounting."""
    strategy: Strategy = make_strategy(cfg)
    return ModeRun(LocalDPAccounting(strategy, cfg, writer), ArrayRecord())


def central_run(grid: Grid, cfg: Mapping[str, Any], writer: RunWriter, timeout: float) -> ModeRun:
    """DP-FedAvg inside Flower's fixed-clipping wrapper, inside the central accounting."""
    check_central_config(cfg)
    nodes = discover_nodes(grid, timeout)
    first = next(iter(nodes.values()))
    strategy = make_central_strategy(cfg, nodes, writer)
    model = build_model(cfg, first.map_dim, first.encoder_dim, first.num_classes)
    log.info(
        "%d nodes hold %d training users and %d test users; %d nodes sampled per round",
        len(nodes),
        first.num_train_users,
        first.num_test_users,
        strategy.num_sampled,
    )
    return ModeRun(strategy, ArrayRecord(model.state_dict()))


def _summary(cfg: Mapping[str, Any], run: ModeRun, writer: RunWriter) -> tuple[dict[str, Any], str, str]:
    """The mode's summary fields, plot title and test label."""
    records = run.records
    last = records[-1] if records else {}
    best = max(
        (r["accuracy"] for r in records if r["accuracy"] is not None and not math.isnan(r["accuracy"])), default=None
    )
    if isinstance(run.strategy, CentralDPAccounting):
        s = run.strategy
        fields = {
            "mode": "central",
            "strategy": f"{type(s.strategy).__name__}({type(s.strategy.strategy).__name__})",
            "rounds": len(records),
            "final": {k: last.get(k) for k in ("accuracy", "macro_f1", "clean_accuracy", "clean_macro_f1")},
            "best_accuracy": best,
            "privacy": last.get("privacy"),
            "ldp_guarantee_holds": False,
            **scope_fields("central"),
            "guarantee": central_guarantee(cfg, s),
        }
        first = next(iter(s.strategy.strategy.nodes.values()))
        fields["users"] = {"train": first.num_train_users, "test": first.num_test_users, "nodes": s.num_nodes}
        p = last.get("privacy") or {}
        title = (
            f"{cfg['dataset']} | central DP z={cfg['central-noise-multiplier']:g} C={cfg['central-clip']:g} "
            f"({cfg['central-clipping']}) | {s.num_sampled}/{s.num_nodes} nodes | "
            f"eps={p.get('epsilon', float('nan')):.3g}, delta={cfg['central-delta']:g}"
        )
        return fields, title, "raw test"
    acc = run.strategy
    core = acc.core
    fields = {
        "strategy": type(acc.strategy).__name__,
        "rounds": len(records),
        "final": {
            k: last.get(k)
            for k in ("accuracy", "macro_f1", "clean_accuracy", "clean_macro_f1", "random_guess_f1", "by_sentences")
        },
        "best_accuracy": best,
        "privacy": last.get("privacy"),
        "ldp_guarantee_holds": not core.leaky,
        **scope_fields("local"),
        "guarantee": guarantee_statement(cfg, acc),
        "users": {"train": core.num_train_users, "test": core.num_test_users, "nodes": len(core.nodes)},
        "data": data.load(cfg).describe(),  # includes documents dropped as empty or (document level) short
    }
    assert core.info is not None
    leak = " | NOT LDP (leaky M1)" if core.leaky else ""
    title = (
        f"{cfg['dataset']} | {run_label(cfg)} | M1={cfg['map-in']} m'={core.info.map_dim} | "
        f"label={cfg['label-mechanism']}{leak}"
    )
    return fields, title, "sanitized test"


def run_server(grid: Grid, cfg: Mapping[str, Any], timeout: float = 3600.0) -> dict[str, Any]:
    """Run one federated job (either mode) with a resolved config; returns the summary dict.

    Nothing is written before the config and the data source have been checked.
    """
    started = time.time()
    source = data.check_source(cfg)
    writer = RunWriter(run_folder(cfg))
    writer.write_json("config.json", {"config": dict(cfg), "data_source": source})
    log.info("results go to %s", writer.folder)
    diagnostics = None
    if cfg["mode"] == "central":
        run = central_run(grid, cfg, writer, timeout)
    else:
        run = local_run(grid, cfg, writer)
        diagnostics = channel_class(cfg).diagnostics(cfg)  # e.g. the word-level rewrite's quality
        if diagnostics is not None:
            name, data_ = diagnostics
            writer.write_json(f"{name}.json", data_)
            log.info("%s: %s", name, {k: v for k, v in data_.items() if isinstance(v, int | float)})
    run.strategy.start(
        grid=grid, initial_arrays=run.initial_arrays, num_rounds=int(cfg["num-server-rounds"]), timeout=timeout
    )
    fields, title, test_label = _summary(cfg, run, writer)
    summary = {
        "results_folder": str(writer.folder),
        "dataset": cfg["dataset"],
        **fields,
        **({diagnostics[0]: diagnostics[1]} if diagnostics is not None else {}),
        "wall_seconds": round(time.time() - started, 2),
    }
    writer.write_json("summary.json", summary)
    writer.plot(title, test_label=test_label)
    log.info("done in %.1fs: %s", summary["wall_seconds"], writer.folder)
    return summary


def make_server_app(overrides: Mapping[str, Any] | None = None) -> ServerApp:
    """The ServerApp; ``overrides`` (from ``sanitas run``) take precedence over the run config."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        cfg = config_mod.resolve({**dict(context.run_config), **dict(overrides or {})})
        run_server(grid, cfg)

    return app


app = make_server_app()
