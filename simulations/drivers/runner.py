"""The runner: executes planned runs, each resolved once, in warm workers. ``sweep``, ``compare`` and
``reproduce`` all hand their runs to it.

A driver plans its runs (:class:`simulations.drivers.grid.Run`: a folder name and the keys that make the
run), then :func:`resolve_runs` resolves every run's config **once**, in this process and before anything
runs (a bad value stops the whole plan, naming the run). :func:`execute` runs the resolved configs:

* each run in a warm worker (:mod:`simulations.runtime.warm`), which receives the resolved config itself
  (nothing is resolved again there); the run's log starts with the ``sanitas run`` command line that
  reproduces it;
* runs whose configs agree on :func:`simulations.runtime.api.shared_federation` (the local backend, no
  simulated faults) in one federation in one worker (``strategies.points``);
* ``jobs`` units at a time; a run whose folder holds ``summary.json`` is skipped (resume), a half-written
  folder is moved to ``incomplete/`` first;
* each outcome in ``logs/<run>.status.json``, the tables rewritten after each run
  (:func:`simulations.drivers.sweep_tables.write_outputs`) and plotted at the end.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fl import config as config_mod
from simulations.drivers.grid import Run
from simulations.drivers.sweep_tables import write_outputs
from simulations.outputs.writers import read_json
from simulations.runtime.api import resolve_config
from simulations.runtime.overrides import load_with_overrides
from simulations.runtime.user_mechanisms import audit_user_mechanisms

#: Each run's resolved config, by run name.
Resolved = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True)
class Outcome:
    """What running one run's process gave."""

    returncode: int
    seconds: float
    error: str | None = None


def run_sets(run: Run, sets: Sequence[str]) -> list[str]:
    """``--set`` items of one run: the driver's own, then its grid values and its name."""
    return [*sets, *(f"{k}={t}" for k, t in run.texts.items()), f"run-name={json.dumps(run.name)}"]


def resolve_run(config: str, run: Run, sets: Sequence[str], folder: Path) -> Mapping[str, Any]:
    """The resolved config ``sanitas run`` would build for ``run``: the same functions as the CLI and
    :func:`simulations.runtime.api.run` (no simulation module is imported: those imports take seconds)."""
    return resolve_config(load_with_overrides(config, run_sets(run, sets)), out=str(folder))


def resolve_runs(config: str, runs: Sequence[Run], sets: Sequence[str], folder: Path) -> dict[str, Mapping[str, Any]]:
    """Every run's config, resolved once (the configs :func:`execute` runs). Raises ``ConfigError`` naming the
    first run whose config is refused and why."""
    resolved = {}
    strategies_checked: set[tuple[Any, ...]] = set()
    for run in runs:
        try:
            resolved[run.name] = cfg = resolve_run(config, run, sets, folder)
            check_run_strategy(cfg, strategies_checked)
            audit_user_mechanisms(cfg)  # a user's mechanism audited before any run starts (cached per mechanism)
        except ValueError as err:
            raise config_mod.ConfigError(f"run {run.name}: {err}") from None
    return resolved


#: The keys a strategy's check reads (``strategies.loading.check_strategy``): runs alike in them are checked once.
STRATEGY_KEYS = ("strategy", "strategy-options", "mode", "central-unit", "server-model", "cohorts", "map-in")


def check_run_strategy(cfg: Mapping[str, Any], checked: set[tuple[Any, ...]]) -> None:
    """A run's ``strategy`` loaded, its options checked and its mode allowed (before any run starts), once
    per distinct combination of :data:`STRATEGY_KEYS` in ``checked``."""
    if not cfg["strategy"]:
        return
    key = tuple(cfg[k] for k in STRATEGY_KEYS)
    if key in checked:
        return
    from strategies.loading import check_strategy  # imports Flower: only when a run names a strategy

    check_strategy(config_mod.as_run_config(cfg))
    checked.add(key)


def run_command(config: str, run: Run, sets: Sequence[str], folder: Path) -> list[str]:
    """The ``sanitas`` arguments that reproduce one run: ``run CONFIG --set ... --out FOLDER``."""
    command = ["run", str(config)]
    for item in run_sets(run, sets):
        command += ["--set", item]
    return command + ["--out", str(folder)]


def last_error(log_text: str) -> str:
    """The most telling line of a failed run's output: ``sanitas: error: ...``,
    else the last line naming an error or exception, else the last line."""
    lines = [line.strip() for line in log_text.splitlines() if line.strip()]
    for pattern in (r"^sanitas: error:", r"(Error|Exception)\b"):
        found = [line for line in lines if re.search(pattern, line)]
        if found:
            return found[-1][:500]
    return lines[-1][:500] if lines else "no output"


def prepare_folder(folder: Path, sweep_dir: Path) -> None:
    """Move a half-written run folder (no ``summary.json``) out of the way before re-running it."""
    if folder.exists() and any(folder.iterdir()):
        target = sweep_dir / "incomplete" / f"{folder.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        target.parent.mkdir(parents=True, exist_ok=True)
        folder.rename(target)


Runner = Callable[[Run, Path], Outcome]


@dataclass(frozen=True)
class Shared:
    """How the runner runs the points that can share a federation (``strategies.points``): ``key(run)``
    (``None``: the run goes alone) groups them, at most ``most`` per federation, and
    ``run(runs, log_paths)`` runs a group, one outcome per run."""

    key: Callable[[Run], Any]
    run: Callable[[Sequence[Run], Sequence[Path]], list[Outcome]]
    most: int = 16


def units(runs: Sequence[Run], shared: Shared | None) -> list[list[Run]]:
    """The runs in the order given, grouped: runs with one ``shared.key`` together (in chunks of at most
    ``shared.most``, at the place of their first run), the others alone."""
    if shared is None:
        return [[r] for r in runs]
    groups: dict[Any, list[Run]] = {}
    out: list[list[Run]] = []
    for run in runs:
        key = shared.key(run)
        if key is None:
            out.append([run])
            continue
        if key not in groups or len(groups[key]) >= shared.most:
            groups[key] = []
            out.append(groups[key])
        groups[key].append(run)
    return out


def run_sweep(
    runs: Sequence[Run],
    sweep_dir: Path,
    runner: Runner,
    progress: bool = True,
    jobs: int = 1,
    shared: Shared | None = None,
) -> list[dict[str, Any]]:
    """Run every run without ``summary.json`` through ``runner(run, log_path)`` (``jobs`` at a time,
    from as many threads), or, with ``shared``, the runs that can share a federation together through
    ``shared.run``; record each outcome in ``logs/<run>.status.json``, rewrite the tables after each
    run and plot at the end.

    A failed run (non-zero exit, or no ``summary.json``) is recorded and the others go on.
    Returns the final rows.
    """
    from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

    from tqdm import tqdm

    sweep_dir.mkdir(parents=True, exist_ok=True)
    bar = tqdm(total=len(runs), desc=sweep_dir.name, unit="run", disable=not progress, file=sys.stderr)
    todo = _not_done(runs, sweep_dir, bar)
    record = _recorder(runs, sweep_dir, bar)

    def start(unit: list[Run]) -> list[Outcome]:
        logs = sweep_dir / "logs"
        if len(unit) == 1:
            return [runner(unit[0], logs / f"{unit[0].name}.log")]
        assert shared is not None
        return shared.run(unit, [logs / f"{r.name}.log" for r in unit])

    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            running: dict[Future[list[Outcome]], list[Run]] = {}
            queued = units(todo, shared)
            while queued or running:
                while queued and len(running) < max(1, jobs):
                    unit = queued.pop(0)
                    for run in unit:
                        prepare_folder(sweep_dir / run.name, sweep_dir)
                    names = unit[0].name if len(unit) == 1 else f"{unit[0].name} and {len(unit) - 1} more"
                    bar.set_postfix_str(names, refresh=True)
                    running[pool.submit(start, unit)] = unit
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    for run, outcome in zip(running.pop(future), future.result(), strict=True):
                        record(run, outcome)
    finally:
        bar.close()
        rows = write_outputs(runs, sweep_dir)
    return rows


def _not_done(runs: Sequence[Run], sweep_dir: Path, bar: Any) -> list[Run]:
    """The runs without ``summary.json`` (the others are counted as done on ``bar``)."""
    todo = []
    for run in runs:
        if (sweep_dir / run.name / "summary.json").is_file():
            bar.write(f"skip   {run.name} (summary.json exists)")
            bar.update(1)
        else:
            todo.append(run)
    return todo


def _recorder(runs: Sequence[Run], sweep_dir: Path, bar: Any) -> Callable[[Run, Outcome], None]:
    """``record(run, outcome)``: the run's status file, a line on ``bar`` and the tables rewritten."""
    logs = sweep_dir / "logs"

    def record(run: Run, outcome: Outcome) -> None:
        error = outcome.error
        if outcome.returncode == 0 and not (sweep_dir / run.name / "summary.json").is_file():
            error = "the run exited 0 but wrote no summary.json"
        status = {
            "status": "failed" if error else "ok",
            "returncode": outcome.returncode,
            "error": error,
            "process_seconds": outcome.seconds,
            "log": str(logs / f"{run.name}.log"),
        }
        logs.mkdir(parents=True, exist_ok=True)
        (logs / f"{run.name}.status.json").write_text(json.dumps(status, indent=2) + "\n")
        bar.write(f"{status['status']:<6} {run.name} ({outcome.seconds:.0f} s){': ' + error if error else ''}")
        bar.update(1)
        write_outputs(runs, sweep_dir, plot=False)

    return record


def warm_runner(
    config: str, sets: Sequence[str], sweep_dir: Path, pool: Any, timeout: float | None, resolved: Resolved
) -> Runner:
    """A :data:`Runner` that runs each run's resolved config (``resolved[run.name]``) in a warm worker of
    ``pool`` (:class:`simulations.runtime.warm.WarmPool`); the log's first line is the reproducing command."""

    def runner(run: Run, log_path: Path) -> Outcome:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text("$ sanitas " + " ".join(run_command(config, run, sets, sweep_dir)) + "\n")
        point = pool.run_config(resolved[run.name], log_path, timeout)
        if point.returncode == 0:
            return Outcome(0, point.seconds)
        if point.returncode == 124:
            return Outcome(124, point.seconds, f"timed out after {timeout:g} s")
        error = last_error(log_path.read_text(errors="replace"))
        if point.crashed:
            error = f"the worker died twice (exit code {point.returncode}): {error}"
        return Outcome(point.returncode, point.seconds, error)

    return runner


def shared_runner(
    config: str, sets: Sequence[str], sweep_dir: Path, pool: Any, timeout: float | None, resolved: Resolved
) -> Shared:
    """:class:`Shared` for resolved runs in warm workers of ``pool``: runs whose configs agree on
    :func:`simulations.runtime.api.shared_federation`, on the local backend, simulating no faults (a fault's
    timing is a node's own), run in one federation in one worker. A group that fails as a whole (its worker
    died or it timed out) is run again one run at a time."""
    from simulations.runtime.api import shared_federation

    alone = warm_runner(config, sets, sweep_dir, pool, timeout, resolved)

    def key(run: Run) -> Any:
        cfg = resolved[run.name]
        if cfg["fault-rate"] > 0 or config_mod.simulation_backend(cfg) != "local":
            return None  # simulated faults time each node on its own; Ray sweeps keep a run per point
        return shared_federation(cfg)

    def run_group(runs: Sequence[Run], log_paths: Sequence[Path]) -> list[Outcome]:
        commands = [run_command(config, r, sets, sweep_dir) for r in runs]
        log = log_paths[0]
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("".join("$ sanitas " + " ".join(c) + "\n" for c in commands))
        for other, command in zip(log_paths[1:], commands[1:], strict=True):
            other.write_text(f"$ sanitas {' '.join(command)}\n"
                             f"(run in one federation with {runs[0].name}: its log is {log.name})\n")  # fmt: skip
        configs = [resolved[r.name] for r in runs]
        points = pool.run_points(configs, log, None if timeout is None else timeout * len(runs))
        if all(p.crashed or p.returncode == 124 for p in points):  # the group as a whole failed: one by one
            return [alone(r, p) for r, p in zip(runs, log_paths, strict=True)]
        outcomes = []
        for r, p in zip(runs, points, strict=True):
            error = None if p.returncode == 0 else _point_error(sweep_dir / r.name, log)
            outcomes.append(Outcome(p.returncode, p.seconds / len(runs), error))
        return outcomes

    return Shared(key, run_group)


def _point_error(folder: Path, log: Path) -> str:
    """Why a run of a shared federation failed: its own status, else the group's log."""
    status = read_json(folder / "status.json") or {}
    return str(status.get("error") or last_error(log.read_text(errors="replace")))


def execute(
    config: str,
    runs: Sequence[Run],
    sets: Sequence[str],
    sweep_dir: Path,
    resolved: Resolved,
    jobs: int = 1,
    timeout: float | None = None,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Run ``runs`` (their configs ``resolved`` by :func:`resolve_runs`) in ``jobs`` warm workers, the runs that
    can share a federation together; returns the final rows of ``sweep_dir``'s tables."""
    from simulations.runtime.warm import WarmPool

    with WarmPool(jobs) as pool:
        runner = warm_runner(config, sets, sweep_dir, pool, timeout, resolved)
        shared = shared_runner(config, sets, sweep_dir, pool, timeout, resolved)
        return run_sweep(runs, sweep_dir, runner, progress=progress, jobs=jobs, shared=shared)
