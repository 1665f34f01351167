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
import random
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from flwr.app import ArrayRecord, Context
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import Strategy

from fl import config as config_mod
from fl.accounting.central import check_central_config
from fl.accounting.scope import EVALUATION_NOT_COVERED, GUARANTEE_COVERS, scope_fields
from fl.attacks.state import AttackState
from fl.attacks.state import from_model as attack_from_model
from fl.config import RunConfig
from fl.data import datasets as data
from fl.data import sources
from fl.encoding.encoder import best_device
from fl.levels.channels import channel_class, run_label
from fl.maps import input_map as maps
from fl.maps.pipeline import ServerModel, build_model
from fl.reporting.outcome import outcome, outcome_text
from fl.reporting.results import RunWriter, run_folder
from fl.reporting.timing import PHASES
from fl.training.central_start import central_start
from strategies.central_node import CentralDPAccounting, central_guarantee, make_central_strategy
from strategies.central_user import UserLevelDPFedAvg, user_level_guarantee
from strategies.checkpoint import RoundCheckpoints, last_checkpoint, load_checkpoint, remap_nodes
from strategies.discovery import discover_nodes
from strategies.grids.encoder import EncoderGrid
from strategies.grids.faults import FaultyGrid
from strategies.grids.lost_nodes import LostNodeGrid
from strategies.grids.timed import TimedGrid
from strategies.loading import make_strategy
from strategies.local.accounting import LEAKY_WARNING, LocalDPAccounting
from strategies.local.release_training import ReleaseTraining

log = logging.getLogger(__name__)

SECURE_RNG_NOTE = (
    "secure-rng: every generator (nodes' noise, the server's sampling) is seeded from the OS CSPRNG; "
    "the noise streams are torch's (not cryptographic) and continuous noise is float64 without "
    "snapping (README, Reliability and safety)."
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


@dataclass
class ModeRun:
    """One mode's strategy (its accounting outermost) and how its summary and plot read."""

    strategy: LocalDPAccounting | CentralDPAccounting | UserLevelDPFedAvg
    initial_arrays: ArrayRecord
    start: str = ""  # where the model started (central mode)
    info: Any = None  # node-level central mode: a node's CohortInfo (the model's shape)

    @property
    def records(self) -> list[dict[str, Any]]:
        return self.strategy.records


def local_run(grid: Grid, cfg: RunConfig, writer: RunWriter) -> ModeRun:
    """The configured strategy (``ReleaseTraining``, a subclass, or a wrapper) inside the accounting."""
    strategy: Strategy = make_strategy(cfg)
    return ModeRun(LocalDPAccounting(strategy, cfg, writer), ArrayRecord())


def user_level_run(grid: Grid, cfg: RunConfig, writer: RunWriter, timeout: float) -> ModeRun:
    """User-level DP-FedAvg from a seeded start, or from a model trained on the public split."""
    nodes = discover_nodes(grid, timeout)
    first = next(iter(nodes.values()))
    begin = central_start(cfg, first.map_dim, first.encoder_dim, first.num_classes)
    model, matrix, start = begin.model, begin.matrix, begin.text
    trained: torch.nn.Module = model  # the head, or (central-train = "encoder") the encoder's top part and the head
    if cfg.central.central_train == "encoder":  # the encoder's top part trains next to the head (fl.training.encoder)
        from fl.training.encoder import build_encoder_classifier, trainable_state

        trained = build_encoder_classifier(cfg, model, matrix, best_device(cfg.server.device))
        encoder_part = sum(v.numel() for k, v in trainable_state(trained).items() if k.startswith("top."))
        start += (
            f"; the encoder's top {cfg.encoder.tuning_layers} layers ({cfg.central.central_tuning_part}: "
            f"{encoder_part} trainable parameters) train with the head under the same per-user clipping and noise"
        )
    strategy = UserLevelDPFedAvg(cfg, nodes, trained, matrix, writer)
    log.info(
        "%d nodes hold %d training users and %d test users; about %.0f users sampled per round; start: %s",
        len(nodes),
        first.num_train_users,
        first.num_test_users,
        strategy.q * strategy.num_users,
        start,
    )
    return ModeRun(strategy, strategy._arrays(), start)


def central_run(grid: Grid, cfg: RunConfig, writer: RunWriter, timeout: float) -> ModeRun:
    """User-level DP-FedAvg (``central-unit = "user"``), or node-level DP-FedAvg inside Flower's
    fixed-clipping wrapper inside the central accounting (``"node"``)."""
    check_central_config(cfg)
    if cfg.central.central_unit == "user":
        return user_level_run(grid, cfg, writer, timeout)
    nodes = discover_nodes(grid, timeout)
    first = next(iter(nodes.values()))
    if cfg.release.noise_seed >= 0 and not cfg.release.secure_rng:
        # Flower's DP-FedAvg samples the nodes with Python's global generator and draws the noise from
        # numpy's: seeded from noise-seed, a node-level run is reproducible as the other modes are.
        random.seed(int(cfg.release.noise_seed))
        np.random.seed(int(cfg.release.noise_seed) % 2**32)
    strategy = make_central_strategy(cfg, nodes, writer)
    model = build_model(cfg, first.map_dim, first.encoder_dim, first.num_classes)
    log.info(
        "%d nodes hold %d training users and %d test users; %d nodes sampled per round",
        len(nodes),
        first.num_train_users,
        first.num_test_users,
        strategy.num_sampled,
    )
    return ModeRun(strategy, ArrayRecord(model.state_dict()), "seeded random initialisation", first)


def _summary(cfg: RunConfig, run: ModeRun, writer: RunWriter) -> tuple[dict[str, Any], str, str]:
    """The mode's summary fields, plot title and test label."""
    records = run.records
    last = records[-1] if records else {}
    best = max(
        (r["accuracy"] for r in records if r["accuracy"] is not None and not math.isnan(r["accuracy"])), default=None
    )
    if isinstance(run.strategy, UserLevelDPFedAvg):
        u = run.strategy
        p = last.get("privacy") or {}
        fields = {
            "mode": "central",
            "central_unit": "user",
            "strategy": type(u).__name__,
            "rounds": len(records),
            "final": {k: last.get(k) for k in ("accuracy", "macro_f1", "clean_accuracy", "clean_macro_f1")},
            "best_accuracy": best,
            "privacy": p or None,
            "ldp_guarantee_holds": False,
            **scope_fields("central"),
            "start": run.start,
            "guarantee": user_level_guarantee(cfg, u, run.start),
            "users": {"train": u.num_users, "test": next(iter(u.nodes.values())).num_test_users, "nodes": len(u.nodes)},
            **_data_fields(cfg),
        }
        title = (
            f"{cfg.data.dataset} | user-level central DP z={cfg.central.central_noise_multiplier:g} "
            f"C={cfg.central.central_clip:g} | ~{u.q * u.num_users:.0f} users/round | "
            f"eps={p.get('epsilon', float('nan')):.3g}, delta={p.get('delta', float('nan')):.3g}"
        )
        return fields, title, "raw test"
    if isinstance(run.strategy, CentralDPAccounting):
        s = run.strategy
        fields = {
            "mode": "central",
            "central_unit": "node",
            "start": run.start,
            "strategy": f"{type(s.strategy).__name__}({type(s.fedavg).__name__})",
            "rounds": len(records),
            "final": {k: last.get(k) for k in ("accuracy", "macro_f1", "clean_accuracy", "clean_macro_f1")},
            "best_accuracy": best,
            "privacy": last.get("privacy"),
            "ldp_guarantee_holds": False,
            **scope_fields("central"),
            "guarantee": central_guarantee(cfg, s),
        }
        first = next(iter(s.fedavg.nodes.values()))
        fields["users"] = {"train": first.num_train_users, "test": first.num_test_users, "nodes": s.num_nodes}
        fields.update(_data_fields(cfg))
        p = last.get("privacy") or {}
        title = (
            f"{cfg.data.dataset} | central DP z={cfg.central.central_noise_multiplier:g} "
            f"C={cfg.central.central_clip:g} ({cfg.central.central_clipping}) | {s.num_sampled}/{s.num_nodes} nodes | "
            f"eps={p.get('epsilon', float('nan')):.3g}, delta={p.get('delta', float('nan')):.3g}"
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
        f"{cfg.data.dataset} | {run_label(cfg)} | M1={cfg.release.map_in} m'={core.info.map_dim} | "
        f"label={cfg.release.label_mechanism}{leak}"
    )
    return fields, title, "sanitized test"


def _warn_overlap(cfg: RunConfig) -> None:
    """Say on the console when the public documents are not independent of the private users' texts."""
    loaded = data.load(cfg)
    if not isinstance(loaded, data.TextDataset):  # synthetic data: no public documents
        return
    public = loaded.public_info
    if not public or public.get("negligible", True):
        return
    for name, who in (("overlap_private", "private users'"), ("overlap_test", "test")):
        o = public[name]
        if sources.negligible(o):  # only the side that overlaps is worth a warning
            continue
        share = o["contained_fraction"]
        log.warning(
            "PUBLIC DATA OVERLAPS THE %s TEXTS: %d exact duplicate(s); %s of %d sampled texts of %d+ words occur "
            "verbatim in a public text (%s). Public tuning and public maps then see these texts; use "
            'public-split = "source" or public-dataset (summary.json: data.public)',
            who.upper(),
            o["exact_duplicates"],
            "n/a" if share is None else f"{share:.1%}",
            o["sampled"],
            o["min_words"],
            public.get("source", ""),
        )


def _data_fields(cfg: RunConfig) -> dict[str, Any]:
    """The summary's ``data`` block (documents, public split and its overlap), where the dataset has text."""
    return {} if data.is_synthetic(cfg) else {"data": data.load(cfg).describe()}


def attack_state(cfg: RunConfig, run: ModeRun, final: ArrayRecord) -> AttackState | None:
    """What ``sanitas attack`` needs from the server (``fl.attacks.state``), or ``None`` when the run's
    strategy is not one whose model and inputs Sanitas knows (a user's own strategy)."""
    strategy = run.strategy
    if holds_own_files(run):
        log.info("no attack state: the training documents are the nodes' own files (data-path), not the server's")
        return None
    if isinstance(strategy, LocalDPAccounting):
        core = strategy.core
        if not isinstance(core, ReleaseTraining) or core.model is None:
            return None
        stored = np.flatnonzero(core._slot >= 0)
        return attack_from_model(core.model, core.map_matrix, stored, "documents whose releases the server stored")
    everyone = "every training document (central mode: any user may have been sampled)"
    if data.is_synthetic(cfg):
        log.info("no attack state: dataset = 'synthetic' has no documents to attack")
        return None
    if isinstance(strategy, UserLevelDPFedAvg):
        if cfg.central.central_train == "encoder":
            log.info("no attack state: the attacks read a head on fixed embeddings, this run trained the encoder too")
            return None
        users = np.arange(strategy.num_users, dtype=np.int64)
        assert isinstance(strategy.model, ServerModel)  # central-train = "head": the model is the head itself
        return attack_from_model(strategy.model, strategy.map_matrix, _user_documents(cfg, users), everyone)
    info = run.info
    if info is None:  # a checkpoint from before the shape was kept
        log.info("no attack state: the node-level run's model shape is not recorded")
        return None
    model = build_model(cfg, info.map_dim, info.encoder_dim, info.num_classes)
    model.load_state_dict(final.to_torch_state_dict())
    if cfg.release.map_in in maps.FROM_SERVER:
        return None
    matrix = maps.input_map(cfg.release.map_in, info.encoder_dim, info.map_dim, cfg.release.map_seed)
    users = np.arange(info.num_train_users, dtype=np.int64)
    return attack_from_model(model, matrix, _user_documents(cfg, users), everyone)


def holds_own_files(run: ModeRun) -> bool:
    """True when the run's nodes trained on their own files (node config ``data-path``)."""
    strategy = run.strategy
    core = strategy.core if isinstance(strategy, LocalDPAccounting) else strategy
    infos = list(getattr(core, "nodes", {}).values()) + ([run.info] if run.info is not None else [])
    return any(getattr(v, "node_local", 0) for v in infos)


def _user_documents(cfg: RunConfig, users: np.ndarray) -> np.ndarray:
    """The training-split rows of these users' documents."""
    from fl.cohort import user_partition

    rows = user_partition(cfg).rows(users.tolist())
    return np.concatenate(rows).astype(np.int64) if rows else np.zeros(0, dtype=np.int64)


def publish_encoder(cfg: RunConfig, grid: Grid) -> tuple[RunConfig, Grid, dict[str, Any]]:
    """The encoder of the run: as configured, or (``encoder-tuning = "public"``) fine-tuned on the
    public split and published by its digest, which every request then names (:class:`EncoderGrid`).
    Returns the config the server uses (``encoder`` = the published folder), the grid, and the
    encoder's record for the summary and the statement."""
    if cfg.encoder.encoder_tuning == "none":
        return cfg, grid, {"name": cfg.encoder.encoder, "tuning": "none"}
    from fl.encoding.public_tuning import tune_public

    tuned = tune_public(cfg, best_device(cfg.server.device))
    tuned_cfg = config_mod.resolve({**dict(cfg), "encoder": str(tuned.folder)})
    return tuned_cfg, EncoderGrid(grid, tuned.digest).as_grid(), {"name": cfg.encoder.encoder, **tuned.record()}


def encoder_note(encoder: Mapping[str, Any]) -> str:
    """The statement's sentence on the encoder G the nodes used."""
    if encoder.get("tuning") != "public":
        return f"Encoder: {encoder['name']} as published (not trained on any of the run's data)."
    return (
        f"Encoder: {encoder['name']} fine-tuned by the server on the {encoder['public_documents']} public "
        f"documents only ({encoder['part']}, epoch {encoder['epoch_kept']} kept on a public hold-out), published "
        f"as sha256 {encoder['digest'][:16]}...; no private document reached it, so the guarantee is unchanged."
    )


def run_timings(grid: Grid) -> dict[str, Any]:
    """The summary's ``timings``: seconds per phase of this process so far (``fl.reporting.timing``) and, on the
    local backend, the nodes' own seconds and what crossed the wire (``simulations.local_runtime``)."""
    timings: dict[str, Any] = {"phases": PHASES.snapshot()}
    points = getattr(grid, "shared_by_points", None)
    if points:  # strategies.points: the phases and the wire are the whole federation's, all points together
        timings["shared_by_points"] = int(points)
    stats = getattr(grid, "stats", None)
    if stats is not None and hasattr(stats, "to_dict"):
        timings["wire"] = stats.to_dict()
    return timings


def run_server(grid: Grid, cfg: RunConfig, timeout: float = 3600.0, resume: bool = False) -> dict[str, Any]:
    """Run one federated job (either mode) with a resolved config; returns the summary dict.

    ``timeout`` bounds node discovery; each round waits ``node-timeout`` seconds for its replies.
    Failed, late or lost replies are counted in the round records and charged conservatively.
    Nothing is written before the config and the data source have been checked. The server's
    state is saved after every round; ``resume`` continues the incomplete run in the config's
    results folder from its last saved round (``strategies.checkpoint``).
    """
    started = time.time()
    PHASES.end("backend start")  # from the launcher's call into the backend to here: its start-up
    grid = TimedGrid(LostNodeGrid(grid)).as_grid()
    if cfg.simulation.fault_rate > 0:
        grid = FaultyGrid(grid, cfg).as_grid()  # drops the scheduled replies when fault-kind = "drop-reply"
    source = data.check_source(cfg)
    folder = run_folder(cfg)
    configured = dict(cfg)
    with PHASES.measure("publish encoder"):
        cfg, grid, encoder = publish_encoder(cfg, grid)  # before any message: every request names the encoder
    if resume:
        writer = RunWriter.reopen(folder, last_checkpoint(folder))
        done, strategy, arrays, extra = load_checkpoint(folder, writer)
        if not isinstance(strategy, LocalDPAccounting | CentralDPAccounting | UserLevelDPFedAvg):
            raise TypeError(
                f"the checkpoint in {folder} holds a {type(strategy).__name__}, not a Sanitas mode's strategy"
            )
        run = ModeRun(strategy, arrays, extra.get("start", ""), extra.get("info"))
        remap_nodes(strategy, discover_nodes(grid, timeout))  # node ids are new in a new simulation
        diagnostics = extra.get("diagnostics")
        log.info("resuming %s after round %d", folder, done)
    else:
        done = 0
        writer = RunWriter(folder, int(cfg.server.num_server_rounds))
        writer.write_json("config.json", {"config": configured, "data_source": source})
        log.info("results go to %s", writer.folder)
        _warn_overlap(cfg)
        diagnostics = None
        with PHASES.measure("server setup"), failed_status(writer):  # central mode: discovery, public start
            run = (
                central_run(grid, cfg, writer, timeout)
                if cfg.central.mode == "central"
                else local_run(grid, cfg, writer)
            )
            diagnostics = channel_class(cfg).diagnostics(cfg)  # e.g. the word-level rewrite's quality
            if diagnostics is not None:
                name, data_ = diagnostics
                writer.write_json(f"{name}.json", data_)
                log.info("%s: %s", name, {k: v for k, v in data_.items() if isinstance(v, int | float)})
    extra = {"start": run.start, "diagnostics": diagnostics, "info": run.info}
    checkpoints = RoundCheckpoints(run.strategy, writer.folder, done, run.initial_arrays, extra=extra)
    with failed_status(writer):
        checkpoints.start(
            grid=grid,
            initial_arrays=run.initial_arrays,
            num_rounds=int(cfg.server.num_server_rounds),
            timeout=float(cfg.server.node_timeout),  # per round: a reply later than this is lost
        )
        with PHASES.measure("writing results"):
            state = attack_state(cfg, run, checkpoints.arrays)
            if state is not None:
                state.save(writer.folder)
            fields, title, test_label = _summary(cfg, run, writer)
        if "users" in fields:
            fields["users"]["nodes_hold_own_files"] = holds_own_files(run)
        fields["outcome"] = outcome(run.records, (fields.get("data") or {}).get("test_class_counts"))
        if fields["outcome"]["learned_nothing"]:
            mode = str(fields.get("mode", "local"))
            log.warning(
                "THIS RUN LEARNED NOTHING: %s", outcome_text(fields["outcome"], fields["final"]["accuracy"], mode)
            )
        fields["guarantee"]["encoder"] = encoder
        fields["guarantee"]["notes"].append(encoder_note(encoder))
        summary = {
            "results_folder": str(writer.folder),
            "dataset": cfg.data.dataset,
            **fields,
            "encoder": encoder,
            **({diagnostics[0]: diagnostics[1]} if diagnostics is not None else {}),
            "wall_seconds": round(time.time() - started, 2),
            "timings": run_timings(grid),
            **({"resumed_after_round": done} if resume else {}),
        }
        with PHASES.measure("writing results"):
            writer.write_json("summary.json", summary)
            writer.plot(title, test_label=test_label, reference=cfg.output.reference_accuracy or None)
    writer.finish()
    log.info("done in %.1fs: %s", summary["wall_seconds"], writer.folder)
    return summary


@contextmanager
def failed_status(writer: RunWriter) -> Iterator[None]:
    """Record a failure in the run's ``status.json`` (with its one-line reason; an interrupt as
    ``interrupted``), then re-raise."""
    try:
        yield
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (simulations.cli): resumable from its last checkpoint
        writer.set_status("interrupted", error="interrupted (SIGINT or SIGTERM)")
        raise
    except BaseException as err:
        writer.set_status("failed", error=f"{type(err).__name__}: {err}"[:500])
        raise


def make_server_app(overrides: Mapping[str, Any] | None = None, resume: bool = False) -> ServerApp:
    """The ServerApp; ``overrides`` (from ``sanitas run``) take precedence over the run config;
    ``resume`` continues the incomplete run in the config's results folder."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        cfg = config_mod.resolve({**dict(context.run_config), **dict(overrides or {})})
        run_server(grid, cfg, resume=resume)

    return app


def make_points_server_app(cfgs: Sequence[RunConfig]) -> ServerApp:
    """The ServerApp of several runs sharing one federation (``strategies.points``): each config's
    :func:`run_server` on the shared grid, each writing its own results folder."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        from strategies.points import run_points

        run_points(grid, cfgs, lambda point_grid, cfg: run_server(point_grid, cfg))

    return app


app = make_server_app()
