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
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from flwr.app import ArrayRecord, Context
from flwr.serverapp import Grid, ServerApp

from fl import config as config_mod
from fl.accounting.scope import summary_scope
from fl.attacks.state import AttackState
from fl.config import RunConfig
from fl.data import datasets as data
from fl.data import sources
from fl.encoding.encoder import best_device
from fl.levels.channels import channel_class
from fl.levels.spec import LevelSpec
from fl.reporting.outcome import outcome, outcome_text
from fl.reporting.results import RunWriter
from fl.reporting.timing import PHASES
from strategies import discovery
from strategies.checkpoint import RoundCheckpoints, last_checkpoint, load_checkpoint, remap_nodes
from strategies.grids.encoder import EncoderGrid
from strategies.grids.faults import FaultyGrid
from strategies.grids.lost_nodes import LostNodeGrid
from strategies.grids.timed import TimedGrid
from strategies.loading import check_strategy
from strategies.modes import ModeRun, ServerMode, mode_of, run_folder, server_mode

log = logging.getLogger(__name__)


def mode_name_of(scored: Mapping[str, Any]) -> str:
    """The test mode a scored block is: on-device inference (clean inputs) or server-side inference (sanitized)."""
    return "ON-DEVICE INFERENCE" if scored.get("test_inputs") == "clean" else "SERVER-SIDE INFERENCE"


def _warn_overlap(cfg: RunConfig) -> None:
    """Say on the console when the public documents are not independent of the private users' texts."""
    loaded = data.load(cfg.data, cfg.users, cfg.release.level)
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


def attack_state(cfg: RunConfig, mode: ServerMode, run: ModeRun, final: ArrayRecord) -> AttackState | None:
    """What ``sanitas attack`` needs from the server (``fl.attacks.state``), or ``None`` (the reason logged)
    when the nodes trained on their own files or the mode's strategy is not one whose model and inputs
    Sanitas knows (a user's own strategy)."""
    if mode.holds_own_files(run):
        log.info("no attack state: the training documents are the nodes' own files (data-path), not the server's")
        return None
    return mode.attack_state(cfg, run, final)


def publish_encoder(cfg: RunConfig, grid: Grid) -> tuple[RunConfig, Grid, dict[str, Any]]:
    """The encoder of the run: as configured, or (``encoder-tuning = "public"``) fine-tuned on the
    public split and published by its digest, which every request then names (:class:`EncoderGrid`).
    Returns the config the server uses (``encoder`` = the published folder), the grid, and the
    encoder's record for the summary and the statement."""
    if cfg.encoder.encoder_tuning == "none":
        return cfg, grid, {"name": cfg.encoder.encoder, "tuning": "none"}
    from fl.encoding.public_tuning import TuningSpec, tune_public

    tuned = tune_public(TuningSpec.from_config(cfg), best_device(cfg.server.device))
    # The published folder in the encoder section (a typed swap of one section; nothing is resolved again).
    published = replace(cfg, encoder=replace(cfg.encoder, encoder=str(tuned.folder)))
    return published, EncoderGrid(grid, tuned.digest).as_grid(), {"name": cfg.encoder.encoder, **tuned.record()}


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
    local backend, the nodes' own seconds and what crossed the wire (``simulations.runtime.local_runtime``)."""
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
    source = data.check_source(cfg.data, cfg.users)
    folder = run_folder(cfg)
    configured = dict(cfg)
    with PHASES.measure("publish encoder"):
        cfg, grid, encoder = publish_encoder(cfg, grid)  # before any message: every request names the encoder
    if resume:
        writer = RunWriter.reopen(folder, last_checkpoint(folder))
        check_strategy(cfg)  # imports a strategy from a file under its module name, which the checkpoint names
        done, strategy, arrays, extra = load_checkpoint(folder, writer)
        try:
            mode = mode_of(strategy)
        except TypeError as err:
            raise TypeError(f"the checkpoint in {folder}: {err}") from None
        run = ModeRun(strategy, arrays, extra.get("start", ""), extra.get("info"))
        remap_nodes(strategy, discovery.discover_nodes(grid, timeout))  # node ids are new in a new simulation
        diagnostics = extra.get("diagnostics")
        log.info("resuming %s after round %d", folder, done)
    else:
        done = 0
        writer = RunWriter(folder, int(cfg.server.num_server_rounds))
        writer.write_json("config.json", {"config": configured, "data_source": source})
        log.info("results go to %s", writer.folder)
        _warn_overlap(cfg)
        diagnostics = None
        mode = server_mode(cfg)
        with PHASES.measure("server setup"), failed_status(writer):  # central mode: discovery, public start
            mode.check(cfg)
            run = mode.start(grid, cfg, writer, timeout)
            # e.g. the word-level rewrite's quality
            diagnostics = channel_class(cfg.release.level).diagnostics(LevelSpec.from_config(cfg))
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
            state = attack_state(cfg, mode, run, checkpoints.arrays)
            if state is not None:
                state.save(writer.folder)
            fields, title, test_label = mode.summary(cfg, run)
        if "users" in fields:
            fields["users"]["nodes_hold_own_files"] = mode.holds_own_files(run)
        test_inputs = "clean" if mode.scope == "central" else "sanitized"
        fields["outcome"] = outcome(run.records, (fields.get("data") or {}).get("test_class_counts"), test_inputs)
        if fields["outcome"]["learned_nothing"]:
            log.warning(
                "THIS RUN LEARNED NOTHING: %s",
                outcome_text(fields["outcome"], fields["final"]["accuracy"], mode.scope),
            )
        scored_modes = [m for m in (fields["outcome"].get("on_device") or {}, fields["outcome"]) if m]
        nothing = [m for m in scored_modes if m.get("adds_over_public") is False]
        everything = len(nothing) == len(scored_modes)
        for scored in nothing:  # each test mode its own line; a warning only when no mode adds anything
            (log.warning if everything else log.info)(
                "%s ADDS NOTHING OVER THE PUBLIC DATA (%s): accuracy %.4f, public-only %.4f",
                "THIS RUN" if everything else mode_name_of(scored),
                f"{scored['test_inputs']} test inputs",
                scored["public_only_accuracy"] + scored["gain_over_public"],
                scored["public_only_accuracy"],
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
        summary.update(
            summary_scope(summary, cfg.release, user_unit=cfg.data.user_unit)
        )  # noise: secret or seeded; the guarantee in words
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
