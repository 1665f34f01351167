"""One simulation from Python: ``simulations.run(config, **overrides) -> RunResult``.

::

    import simulations

    result = simulations.run("simulations/experiments/quickstart.toml", sentence_epsilon=6.0, label_mechanism="rr",
                             out="results")
    result.summary["final"]["accuracy"], [r["accuracy"] for r in result.rounds], result.folder

``config`` is a flat TOML run config (a path) or a mapping of run-config keys (docs/configuration.md);
keyword arguments override keys, underscores standing for the hyphens of the kebab-case keys
(``sentence_epsilon=6.0`` sets ``sentence-epsilon``); ``out`` is the results parent folder
(``out-dir``). The run is the same as ``sanitas run`` (which calls this function): the config and
the data are checked before anything is written (a :class:`fl.config.ConfigError`, or another
``ValueError``, ``FileNotFoundError`` or ``FileExistsError``, with a one-line message), the
federation is sized (``ceil(users / users-per-node)`` nodes), and the ServerApp and ClientApp run
on the configured backend (``backend``, :func:`fl.config.simulation_backend`): in this process
(``"local"``, :mod:`simulations.runtime.local_runtime`; the default) or on Flower's Ray simulation
engine (``"ray"``: for a Ray cluster, GPUs shared across nodes, or heavy node work spread over
many cores). Both give the same results for a fixed seed. :class:`RunResult` is read back from the
results folder the run wrote.

Heavy imports (torch, datasets, Flower) happen inside the functions, so ``import simulations`` is
cheap.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fl import config as config_mod
from fl.config.plugins import anchor_specs
from fl.reporting.timing import PHASES, process_age


@dataclass(frozen=True)
class RunResult:
    """What one run wrote: its results folder, ``rounds.jsonl`` (one dict per round) and ``summary.json``."""

    folder: Path
    rounds: list[dict[str, Any]]
    summary: dict[str, Any]

    @classmethod
    def from_folder(cls, folder: str | Path) -> RunResult:
        """Read a finished run's results folder; ``FileNotFoundError`` when it has no ``summary.json``."""
        folder = Path(folder)
        summary_path = folder / "summary.json"
        if not summary_path.is_file():
            raise FileNotFoundError(f"no summary.json in results folder {folder}: the run did not finish")
        from simulations.outputs.writers import read_jsonl

        return cls(folder, read_jsonl(folder / "rounds.jsonl"), json.loads(summary_path.read_text()))


def config_key(name: str) -> str:
    """The run-config key of a keyword argument: ``sentence_epsilon`` -> ``sentence-epsilon``.

    Raises :class:`fl.config.ConfigError` naming the argument when no such key exists.
    """
    key = name.replace("_", "-")
    if key not in config_mod.DEFAULTS:
        raise config_mod.ConfigError(
            f"unknown config key {key!r} (keyword argument {name!r}); known keys: "
            f"{', '.join(k.replace('-', '_') for k in config_mod.DEFAULTS)}"
        )
    return key


def keyword_overrides(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Run-config keys and values of keyword arguments (paths become strings; a ``strategy`` given as a
    class or a factory becomes its name, ``strategies.loading.object_spec``)."""
    keys = {}
    for name, value in overrides.items():
        if name == "strategy" and callable(value):
            from strategies.loading import object_spec  # imports Flower: only when a strategy object is given

            value = object_spec(value)
        keys[config_key(name)] = os.fspath(value) if isinstance(value, os.PathLike) else value
    return keys


def resolve_config(
    config: str | Path | Mapping[str, Any], overrides: Mapping[str, Any] | None = None, out: str | Path | None = None
) -> Mapping[str, Any]:
    """The resolved, validated run config (:func:`fl.config.resolve`): ``config`` (a TOML path or a
    mapping of run-config keys), then ``overrides`` (run-config keys), then ``out`` as ``out-dir``
    when given.

    Raises :class:`fl.config.ConfigError` (a ``ValueError``) naming the first bad key.
    """
    raw = dict(config) if isinstance(config, Mapping) else config_mod.load_toml(config)
    raw.update(overrides or {})
    if not isinstance(config, Mapping):  # a user's file.py:Class beside the config file, then in the cwd
        anchor_specs(raw, config)
    if out:
        raw["out-dir"] = os.fspath(out)
    cfg = config_mod.resolve(raw)
    _check_trackers(cfg)
    return cfg


def _check_trackers(cfg: Mapping[str, Any]) -> None:
    """The config's trackers (``track``) can log here, else a ``ConfigError`` with the fix (before any work)."""
    if cfg["track"]:
        from simulations.tracking import names_of, unavailable

        problem = unavailable(names_of(cfg["track"]))
        if problem:
            raise config_mod.ConfigError(problem)


def _track(cfg: Mapping[str, Any], folder: Path) -> None:
    """Log the finished run in ``folder`` to the config's trackers (``track``): after the run, from its files."""
    if cfg["track"]:
        from simulations.tracking import requested, track_runs

        track_runs(requested((), None, cfg, cfg["out-dir"]), [folder])


def backend_config(cfg: Mapping[str, Any], verbose: bool = True) -> dict[str, Any]:
    """Flower's Ray backend config: the resources of each simulated node and where Ray runs.

    ``node-cpus`` CPUs and ``node-gpus`` GPUs per node (``node-gpus = -1``: 0.25 when the run
    uses CUDA, else 0). Flower's ``RayBackend.init_ray`` passes ``init_args`` to ``ray.init``, so
    ``ray-address`` becomes its ``address``: ``"auto"`` or ``"host:port"`` attaches to a running
    cluster; ``""`` starts a new local instance (``address="local"``, so a cluster that
    ``ray start`` left on this machine, or ``$RAY_ADDRESS``, is never picked up by accident).
    """
    gpus = cfg["node-gpus"]
    if gpus < 0:
        import torch

        gpus = 0.25 if cfg["device"] != "cpu" and torch.cuda.is_available() else 0.0
    return {
        "client_resources": {"num_cpus": cfg["node-cpus"], "num_gpus": gpus},
        "init_args": {
            "address": cfg["ray-address"] or "local",
            "include_dashboard": False,
            "logging_level": "ERROR",
            "log_to_driver": verbose,  # quiet: the actors' output stays in Ray's own log files
        },
    }


class Interrupted(KeyboardInterrupt):
    """A run stopped by Ctrl-C or SIGTERM; ``folder`` is its results folder (``status.json``:
    ``interrupted``), which ``sanitas run --resume`` continues from its last completed round."""

    def __init__(self, folder: Path) -> None:
        super().__init__(str(folder))
        self.folder = folder

    def advice(self) -> str:
        """One line: where the run is and how to go on."""
        from strategies.checkpoint import last_checkpoint

        done = last_checkpoint(self.folder)
        if done == 0:
            return f"interrupted before its first round completed: {self.folder} (start it again)"
        return f"interrupted after round {done}: {self.folder}; continue with: sanitas run --resume {self.folder}"


class RunFailed(RuntimeError):
    """A run that started but did not finish (the ServerApp or the backend failed); names its log."""


_launched = False  # whether this process has launched a run (the first pays the imports)

#: Above this many simulated nodes a round slows down sharply (see :func:`many_nodes_warning`).
MANY_NODES = 250


def many_nodes_warning(nodes: int) -> str:
    """Why a run with many nodes is slow: measured with benchmarks/bench_simulation.py, 10^4 users on
    1000 nodes took 170 s and on 10 nodes 22 s (2 cores)."""
    return (
        f"{nodes} simulated nodes: Flower's in-memory simulation scans every pending message for every "
        "node when it dispatches, so a round's message handling grows with the square of the number of "
        f"nodes; raise users-per-node to keep the nodes to a few hundred at most (<= {MANY_NODES})"
    )


@dataclass
class _Prepared:
    """A run checked and ready to start: its config (``run-name`` fixed), folder and federation."""

    cfg: Any  # a resolved fl.config.RunConfig
    folder: Path
    train_users: int
    test_users: int
    nodes: int
    backend: str
    loaded: Any = None  # the dataset the checks loaded (fl.data.datasets.load)


def _check_before_data(cfg: Any, resume: bool) -> None:
    """The checks of a resolved config that need no data and no encoder: the device on this machine, the
    ``strategy`` (its class, options and mode: ``strategies.loading.check_strategy``), a results folder that
    can be written and (with ``run-name``) is not taken. They
    come before :func:`_prepare` loads anything, so a bad value is refused in the time the config takes."""
    from fl.config.paths import write_problem

    if cfg.server.device.startswith("cuda"):  # here, where the run starts: a config may be written elsewhere
        import torch

        if not torch.cuda.is_available():
            raise config_mod.ConfigError(
                f'device = "{cfg.server.device}" but this machine has no CUDA: use device = "auto" or "cpu"'
            )
    if cfg["strategy"]:  # the class, its options and its mode, before the data or Ray
        from strategies.loading import check_strategy  # imports Flower (0.4 s): only when a strategy is named

        check_strategy(cfg)
    out_dir = cfg.output.out_dir
    problem = write_problem(out_dir)
    if problem is not None:
        where, reason = problem
        raise config_mod.ConfigError(
            f"out-dir = {out_dir!r}: cannot write into {str(where)!r} ({reason}): choose a writable folder"
        )
    if cfg.output.run_name and not resume:  # a named folder is known now (an unnamed one gets the time)
        folder = Path(out_dir).expanduser().resolve() / cfg.output.run_name
        if folder.is_dir() and any(folder.iterdir()):
            raise FileExistsError(f"results folder {folder} already exists and is not empty")
    from simulations.runtime.user_mechanisms import audit_user_mechanisms

    audit_user_mechanisms(cfg)  # a user's mechanism against its declared guarantee (the quick audit), last: seconds


def _check_public_span(cfg: Any, loaded: Any) -> None:
    """``map-in = "projection"``: ``map-dim`` and, with cohorts, ``cohort-map-dim`` within what the public
    documents span (:func:`fl.maps.public_model.check_projection_size`), naming the key that is too large."""
    from fl.maps.public_model import check_projection_size

    public, classes = len(loaded.public), int(loaded.num_classes)
    check_projection_size(int(cfg["map-dim"]), public, classes)
    cohort_dim = int(cfg["cohort-map-dim"]) if int(cfg["cohorts"]) > 1 else 0
    if cohort_dim:
        try:
            check_projection_size(cohort_dim, public, classes)
        except config_mod.ConfigError as err:  # its words are map-dim's: say which key it is
            why = str(err).partition(": ")[2] or str(err)
            raise config_mod.ConfigError(
                f"cohort-map-dim = {cohort_dim} (the earlier cohorts' projection): "
                + why.replace("lower map-dim", "lower cohort-map-dim")
            ) from None


def _prepare(cfg: Mapping[str, Any], resume: bool) -> _Prepared:
    """Every check a run makes before anything is written or a backend starts (see :func:`launch`): those
    that need only the config first (:func:`_check_before_data`), then the data's."""
    cfg = config_mod.as_run_config(cfg)
    _check_before_data(cfg, resume)

    from fl.cohort import population_sizes
    from fl.data import datasets as data
    from fl.data.partition import num_nodes

    data.check_source(cfg.data, cfg.users)
    # Fails early (empty documents, bad columns), before any output.
    loaded = data.load(cfg.data, cfg.users, cfg.release.level)
    if cfg["map-in"] == "projection" and getattr(loaded, "public", None) is not None:
        _check_public_span(cfg, loaded)
    from strategies.modes import run_folder  # after the data's checks: it imports Flower

    folder = run_folder(cfg)
    if not resume and folder.exists() and any(folder.iterdir()):
        raise FileExistsError(f"results folder {folder} already exists and is not empty")
    # The ServerApp writes to exactly this folder: its name set in the output section (nothing resolved again).
    cfg = replace(cfg, output=replace(cfg.output, run_name=folder.name))
    train_users, test_users = population_sizes(cfg.data, cfg.users, cfg.release.level)
    nodes = num_nodes(max(train_users, test_users), cfg["users-per-node"])
    return _Prepared(cfg, folder, train_users, test_users, nodes, config_mod.simulation_backend(cfg), loaded)


def _warn(cfg: Any, prepared: _Prepared) -> None:
    """The launcher's warnings on the console (a leaky map, many nodes, a level's own)."""
    from fl.levels.channels import channel_class
    from strategies.local.accounting import LEAKY_WARNING

    if cfg["map-in"] == "leaky":
        print(f"sanitas: WARNING: {LEAKY_WARNING}", file=sys.stderr, flush=True)
    if prepared.nodes > MANY_NODES and prepared.backend == "ray":
        print(f"sanitas: WARNING: {many_nodes_warning(prepared.nodes)}", file=sys.stderr, flush=True)
    release = prepared.cfg.release  # the resolved config
    warning = channel_class(release.level).early_warning(release, prepared.train_users + prepared.test_users)
    if warning:
        print(f"sanitas: WARNING: {warning}", file=sys.stderr, flush=True)


def _start(server_app: Any, client_app: Any, first: _Prepared, verbose: bool) -> None:
    """Run the apps on the run's backend (its failures end up in the runs' ``status.json``)."""
    if first.backend == "local":
        from simulations.runtime.local_runtime import run_local

        PHASES.mark("backend start")
        try:
            run_local(
                server_app,
                client_app,
                first.nodes,
                node_threads=max(1, int(first.cfg["node-cpus"])),
                wire_mode=str(first.cfg["local-wire"]),
            )
        except Exception as err:  # noqa: BLE001 - reported below from status.json, as on Ray
            import traceback

            # INFO: in run.log (and on a verbose console); the error's one line ends the command
            logging.getLogger("sanitas").info("the run failed: %s\n%s", err, traceback.format_exc())
    else:
        from flwr.simulation import run_simulation

        os.environ.setdefault("RAY_DEDUP_LOGS", "0")
        PHASES.mark("backend start")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run_simulation(
                server_app=server_app,
                client_app=client_app,
                num_supernodes=first.nodes,
                backend_config=backend_config(first.cfg, verbose),
            )


def _finished(folder: Path) -> Path:
    """``folder`` if its run wrote a summary; else :class:`RunFailed` with the run's one-line error."""
    if not (folder / "summary.json").is_file():
        from fl.reporting.results import read_status

        error = read_status(folder).get("error") if folder.is_dir() else None
        raise RunFailed(f"the run failed: {error or 'it wrote no summary'} (log: {folder / 'run.log'})")
    return folder


def _mark_launched() -> float:
    global _launched
    PHASES.reset()
    if not _launched:  # the first run of a process pays the interpreter's start and the CLI's imports
        PHASES.add("interpreter and imports", process_age())
        _launched = True
    return time.perf_counter()


def launch(cfg: Mapping[str, Any], resume: bool = False, verbose: bool = True) -> Path:
    """Run one simulation of a resolved config; returns its results folder.

    ``verbose = False`` keeps the console quiet (one progress display; Flower's and the libraries'
    output in ``<folder>/run.log`` only, :mod:`simulations.runtime.console`); the log is written either way.

    The data source and the data are checked, and an existing non-empty results folder is
    refused, before anything is written or Ray starts. ``resume``: the folder must hold an
    incomplete run of this config, which continues from its last completed round.
    """
    checks_started = _mark_launched()
    run = _prepare(cfg, resume)  # before the apps' imports: a refusal comes as soon as it can
    cfg = run.cfg
    from clients.app import make_client_app
    from strategies.server_app import make_server_app

    print(
        f"sanitas: {run.train_users} training users, {run.test_users} test users on {run.nodes} simulated nodes "
        f"({run.backend} backend)",
        flush=True,
    )
    _warn(cfg, run)
    from fl.encoding.prefill import prefill

    prefill(run.loaded, run.cfg.encoder, run.cfg["device"], run.cfg.release.level)  # a cold cache: every core, once
    server_app, client_app = make_server_app(cfg, resume=resume), make_client_app(cfg)
    PHASES.add("launcher (imports, config and data checks)", time.perf_counter() - checks_started)
    from simulations.runtime.console import run_console

    try:
        with run_console(run.folder, int(cfg["num-server-rounds"]), verbose):
            _start(server_app, client_app, run, verbose)
    except KeyboardInterrupt:
        raise Interrupted(run.folder) from None
    return _finished(run.folder)


#: The run-config keys runs must agree on to share one federation: the documents (with the level, which
#: the word and document mechanisms decide) and the seed, the users and their nodes, the backend.
FEDERATION_KEYS = (
    "dataset", "data-dir", "test-file", "text-column", "label-column", "label-names", "test-fraction",
    "train-size", "test-size", "public-fraction", "public-split", "group-column", "public-dataset",
    "public-size", "public-sentences", "public-labels", "user-unit", "empty-documents", "word-mechanism",
    "document-mechanism", "short-documents", "seed",
    "users-per-node", "num-users", "backend", "ray-address", "node-cpus", "node-gpus",
)  # fmt: skip


def shared_federation(cfg: Mapping[str, Any]) -> tuple[Any, ...]:
    """What runs must agree on to share one federation (``strategies.points``): the backend and its
    nodes (their number and resources) and the data that decides them (:data:`FEDERATION_KEYS`)."""
    return tuple((k, cfg[k]) for k in FEDERATION_KEYS)


def launch_points(cfgs: Sequence[Mapping[str, Any]], verbose: bool = True) -> list[Path | BaseException]:
    """Run several resolved configs in one federation (``strategies.points``): one discovery, one
    request per node and round, the server models trained side by side; each run writes its own results
    folder, identical (timings aside) to the run alone. Returns each run's folder or what failed it.

    The configs must agree on :func:`shared_federation`; each is checked as :func:`launch` checks one,
    before anything starts (a config that fails its checks is returned as its error, the others run)."""
    checks_started = _mark_launched()
    from clients.points import points_client_app
    from strategies.server_app import make_points_server_app

    if len({shared_federation(c) for c in cfgs}) != 1:
        raise ValueError("runs that share a federation must agree on the data, users-per-node and backend")
    outcomes: list[Path | BaseException] = []
    ready: list[_Prepared] = []
    for cfg in cfgs:
        try:
            run = _prepare(cfg, resume=False)
        except (ValueError, FileExistsError, FileNotFoundError, KeyError) as err:
            outcomes.append(err)
            continue
        outcomes.append(run.folder)
        ready.append(run)
    if not ready:
        return outcomes
    first = ready[0]
    print(
        f"sanitas: {len(ready)} runs in one federation: {first.train_users} training users, {first.test_users} "
        f"test users on {first.nodes} simulated nodes ({first.backend} backend)",
        flush=True,
    )
    _warn(first.cfg, first)
    configs = [r.cfg for r in ready]
    server_app, client_app = make_points_server_app(configs), points_client_app(configs)
    PHASES.add("launcher (imports, config and data checks)", time.perf_counter() - checks_started)
    from simulations.runtime.console import points_console

    rounds = max(int(c["num-server-rounds"]) for c in configs)
    with points_console([r.folder for r in ready], rounds, verbose):
        _start(server_app, client_app, first, verbose)
    for i, outcome in enumerate(outcomes):
        if isinstance(outcome, Path):
            try:
                _finished(outcome)
            except RunFailed as err:
                outcomes[i] = err
    return outcomes


def resume(folder: str | Path, verbose: bool = False) -> RunResult:
    """Continue the incomplete run in results folder ``folder`` from its last completed round, with the
    config it saved; returns what the finished run wrote (``sanitas run --resume DIR``).

    Raises ``FileNotFoundError`` when the folder is not a run folder or has no checkpoint yet, and
    ``ValueError`` when the run is already complete.
    """
    from fl.reporting.results import read_status
    from strategies.checkpoint import last_checkpoint

    folder = Path(folder).expanduser().resolve()
    saved = folder / "config.json"
    if not saved.is_file():
        raise FileNotFoundError(f"{folder} is not a Sanitas results folder (no config.json)")
    status = read_status(folder)
    if status.get("status") == "complete" or (folder / "summary.json").is_file():
        raise ValueError(f"results folder {folder} holds a complete run: nothing to resume")
    if last_checkpoint(folder) == 0:
        raise FileNotFoundError(
            f"results folder {folder} has no checkpoint: the run stopped before its first round completed "
            "(start it again instead)"
        )
    cfg = dict(json.loads(saved.read_text())["config"])
    cfg.update({"out-dir": str(folder.parent), "run-name": folder.name})
    resolved = resolve_config(cfg)
    done = launch(resolved, resume=True, verbose=verbose)
    _track(resolved, done)
    return RunResult.from_folder(done)


def run(
    config: str | Path | Mapping[str, Any], *, out: str | Path | None = None, verbose: bool = False, **overrides: Any
) -> RunResult:
    """Run one simulation and return what it wrote (see the module docstring).

    ``config``: a TOML run-config path or a mapping of run-config keys; ``overrides``: run-config
    keys as keyword arguments, ``_`` for ``-`` (``strategy`` may be a class or a factory: ``strategy=FedAdam``,
    with ``strategy_options="eta = 0.01"``); ``out``: the results parent folder (``out-dir``).
    The console is quiet, as ``sanitas run``'s: one progress display and the warnings, Flower's,
    absl's and tqdm's output in the run's ``run.log`` only; ``verbose = True`` shows everything
    (:mod:`simulations.runtime.console`).
    """
    cfg = resolve_config(config, keyword_overrides(overrides), out)
    folder = launch(cfg, verbose=verbose)
    _track(cfg, folder)
    return RunResult.from_folder(folder)
