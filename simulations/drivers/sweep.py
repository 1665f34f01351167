"""``sanitas sweep``: one ``sanitas run`` per point of a grid of config values, once per seed.

::

    sanitas sweep CONFIG.toml --grid KEY=V1,V2,... [--grid KEY2=...] [--also --grid ...]
                  [--seeds 1,2,3] [--set key=value ...] --out DIR [--name NAME] [--timeout SECONDS]

Grid syntax
-----------
``--grid KEY=V1,V2,...`` splits at the first ``=``; the value list is split on
commas that are *outside* quotes (``"..."``, ``'...'``) and brackets
(``[...]``, ``{...}``), and each item parses as TOML exactly like a ``--set``
value (:func:`fl.config.parse_value`): ``2`` is an integer, ``2.5`` a float,
``true`` a boolean, ``"purkayastha"`` a string. An item that is not valid TOML
is taken as a bare string (``random`` = ``"random"``), but quote strings that
contain commas or could read as TOML (``"true"``, ``"10"``)::

    --grid 'sentence-mechanism="purkayastha","planar_laplace"' --grid sentence-epsilon=2,6,10
    --grid "sentence-options='out_dim = 64, variant = \"paper\"','variant = \"exact\"'"

Runs are the Cartesian product of the ``--grid`` keys, in the order given (the
last key varies fastest). ``--also`` closes the current product and starts a
new one; the sweep runs the union of the products, in order (e.g. a private
grid ``--also`` non-private references that need no epsilon axis). A key may
not appear twice in one product, nor in both ``--set`` and ``--grid``.

Seeds
-----
``--seeds 1,2,3`` (distinct non-negative integers) runs every grid point once
per seed, the seeds of a point one after another; each run has ``seed`` *and*
``noise-seed`` set to its seed (paired, not crossed, as in ``sanitas compare``:
the data subsample and split, the users' partition, the model's initialisation
and the mechanisms' noise all change with it). The run name ends in
``__seed=<seed>``. ``seed`` or ``noise-seed`` in ``--grid`` or ``--set``
together with ``--seeds`` is an error (the config file's values are simply
overridden). Without ``--seeds`` every point runs once, at the config's own
``seed`` and ``noise-seed``.

The runs share the encoder's embedding cache (``cache-dir``): it is keyed by
(encoder, text), not by seed or epsilon, so a text is encoded once for the
whole sweep. A seed that draws other documents (``train-size``/``test-size``
subsamples, ``public-fraction`` and ``test-fraction`` splits are seeded)
encodes those new documents once, on its first run.

Output
------
Each run is ``sanitas run CONFIG --set ... --out <out>/<name>``, executed in a warm worker
process that serves one point after another (:mod:`simulations.runtime.warm`: imports, datasets and
caches load once; a failing point fails that run only, a point that kills its worker is retried
once in a fresh one; ``--jobs N`` runs N points at once) and writes
``<out>/<name>/<run-name>/``; the run name is ``key=value`` pairs joined by
``__`` (``sentence-mechanism=purkayastha__sentence-epsilon=2__seed=1``). The
process's output goes to ``<out>/<name>/logs/<run-name>.log`` and its outcome
to ``logs/<run-name>.status.json``. A run whose folder already holds
``summary.json`` is skipped (resume, seed by seed); a failed or interrupted run
is run again (a half-written folder is first moved to ``<out>/<name>/incomplete/``).

Tables, rebuilt from the folders after every run, in ``<out>/<name>/``:

* ``sweep.csv`` / ``sweep.jsonl``: one row per run (grid values, ``seed`` and
  ``noise-seed`` when seeded, ``point``: the run's grid point, metrics);
* ``sweep_summary.csv`` / ``sweep_summary.jsonl``: one row per grid point
  (:func:`summarize`): ``n`` finished runs of ``planned``, ``seeds``,
  ``<metric>_mean`` and ``<metric>_sd`` (sample sd, ddof = 1; empty when n < 2,
  and then ``one_seed`` is true) of accuracy, macro-F1, clean accuracy, best
  accuracy and wall time; the epsilon columns once (they do not depend on the
  seed; ``epsilons_differ`` flags a point whose seeds disagree, and the column
  then holds the largest value, the guarantee every seed's run meets);
* ``accuracy_vs_epsilon.png``: mean +- sd per point, n in the legend (and at the
  points when it varies along a line), a one-seed point as a hollow marker.
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
from simulations.drivers.grid import (  # noqa: F401 - the sweep's names, as they were before the split
    EPSILON_KEYS,
    SEED_KEYS,
    GridAxis,
    Run,
    expand,
    format_value,
    grid_keys,
    parse_grid,
    parse_seeds,
    point_keys,
    run_name,
    split_values,
    with_seeds,
)
from simulations.drivers.sweep_tables import (  # noqa: F401
    METRIC_COLUMNS,
    POINT_COLUMNS,
    SEED_FREE_COLUMNS,
    STAT_COLUMNS,
    WORD_COLUMNS,
    collect_row,
    findings_points,
    plot_accuracy,
    plot_groups,
    print_findings,
    summarize,
    write_outputs,
    write_tables,
)
from simulations.outputs.writers import read_json
from simulations.runtime.api import resolve_config
from simulations.runtime.overrides import load_with_overrides, override_key


@dataclass(frozen=True)
class Outcome:
    """What running one run's process gave."""

    returncode: int
    seconds: float
    error: str | None = None


def run_sets(run: Run, sets: Sequence[str]) -> list[str]:
    """``--set`` items of one run: the sweep's own, then its grid values and its name."""
    return [*sets, *(f"{k}={t}" for k, t in run.texts.items()), f"run-name={json.dumps(run.name)}"]


def resolve_run(config: str, run: Run, sets: Sequence[str], sweep_dir: Path) -> Mapping[str, Any]:
    """The resolved config ``sanitas run`` will build for ``run``: the same functions as the CLI
    and :func:`simulations.runtime.api.run` (no simulation module is imported: those imports take seconds)."""
    return resolve_config(load_with_overrides(config, run_sets(run, sets)), out=str(sweep_dir))


def check_runs(config: str, runs: Sequence[Run], sets: Sequence[str], sweep_dir: Path) -> None:
    """Resolve every run's config in-process, so a bad grid value stops the sweep before any run.

    Raises ``ConfigError`` naming the run and the problem, on a key in both ``--set`` and ``--grid``,
    or on ``seed``/``noise-seed`` in ``--set`` of a seeded sweep.
    """
    set_keys = {override_key(item) for item in sets}
    if any(r.seed is not None for r in runs):
        seeded = sorted(set_keys & set(SEED_KEYS))
        if seeded:
            raise config_mod.ConfigError(
                f"--seeds sets {' and '.join(SEED_KEYS)} of every run; remove {seeded} from --set"
            )
    clash = sorted(set_keys & set(grid_keys(runs)))
    if clash:
        raise config_mod.ConfigError(f"keys both in --set and --grid: {clash}")
    for run in runs:
        try:
            resolve_run(config, run, sets, sweep_dir)
        except ValueError as err:
            raise config_mod.ConfigError(f"run {run.name}: {err}") from None


def run_command(config: str, run: Run, sets: Sequence[str], sweep_dir: Path) -> list[str]:
    """The ``sanitas`` arguments of one run: ``run CONFIG --set ... --out SWEEP_DIR``."""
    command = ["run", str(config)]
    for item in run_sets(run, sets):
        command += ["--set", item]
    return command + ["--out", str(sweep_dir)]


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
    """How a sweep runs the points that can share a federation (``strategies.points``): ``key(run)``
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

    A failed run (non-zero exit, or no ``summary.json``) is recorded and the sweep goes on.
    Returns the final rows.
    """
    from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

    from tqdm import tqdm

    sweep_dir.mkdir(parents=True, exist_ok=True)
    logs = sweep_dir / "logs"
    bar = tqdm(total=len(runs), desc=sweep_dir.name, unit="run", disable=not progress, file=sys.stderr)
    todo = []
    for run in runs:
        if (sweep_dir / run.name / "summary.json").is_file():
            bar.write(f"skip   {run.name} (summary.json exists)")
            bar.update(1)
        else:
            todo.append(run)

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

    def start(unit: list[Run]) -> list[Outcome]:
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
                    unit = running.pop(future)
                    for run, outcome in zip(unit, future.result(), strict=True):
                        record(run, outcome)
    finally:
        bar.close()
        rows = write_outputs(runs, sweep_dir)
    return rows


def warm_runner(config: str, sets: Sequence[str], sweep_dir: Path, pool: Any, timeout: float | None) -> Runner:
    """A :data:`Runner` that runs each point as ``sanitas run`` in a warm worker of ``pool``
    (:class:`simulations.runtime.warm.WarmPool`)."""

    def runner(run: Run, log_path: Path) -> Outcome:
        command = run_command(config, run, sets, sweep_dir)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text("$ sanitas " + " ".join(command) + "\n")
        point = pool.run(command, log_path, timeout)
        if point.returncode == 0:
            return Outcome(0, point.seconds)
        if point.returncode == 124:
            return Outcome(124, point.seconds, f"timed out after {timeout:g} s")
        error = last_error(log_path.read_text(errors="replace"))
        if point.crashed:
            error = f"the worker died twice (exit code {point.returncode}): {error}"
        return Outcome(point.returncode, point.seconds, error)

    return runner


def shared_runner(config: str, sets: Sequence[str], sweep_dir: Path, pool: Any, timeout: float | None) -> Shared:
    """:class:`Shared` for ``sanitas run`` points in warm workers of ``pool``: points whose resolved
    configs agree on :func:`simulations.runtime.api.shared_federation`, on the local backend, simulating no
    faults (a fault's timing is a node's own), run in one federation in one worker. A group that fails
    as a whole (its worker died or it timed out) is run again one point at a time."""
    from simulations.runtime.api import shared_federation

    alone = warm_runner(config, sets, sweep_dir, pool, timeout)
    resolved: dict[str, Mapping[str, Any]] = {}  # each run's config, resolved once for its key and its worker

    def resolve(run: Run) -> Mapping[str, Any]:
        if run.name not in resolved:
            resolved[run.name] = resolve_run(config, run, sets, sweep_dir)
        return resolved[run.name]

    def key(run: Run) -> Any:
        cfg = resolve(run)
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
        # The worker gets the configs resolved here, as `sanitas run` resolves them (the log keeps the command lines)
        points = pool.run_points([resolve(r) for r in runs], log, None if timeout is None else timeout * len(runs))
        if all(p.crashed or p.returncode == 124 for p in points):  # the group as a whole failed: one by one
            return [alone(r, p) for r, p in zip(runs, log_paths, strict=True)]
        outcomes = []
        for r, p in zip(runs, points, strict=True):
            error = None if p.returncode == 0 else _point_error(sweep_dir / r.name, log)
            outcomes.append(Outcome(p.returncode, p.seconds / len(runs), error))
        return outcomes

    return Shared(key, run_group)


def _point_error(folder: Path, log: Path) -> str:
    """Why a point of a shared federation failed: its own status, else the group's log."""
    status = read_json(folder / "status.json") or {}
    return str(status.get("error") or last_error(log.read_text(errors="replace")))


def sweep(
    config: str,
    blocks: Sequence[Sequence[str]],
    sets: Sequence[str],
    out: str,
    name: str | None = None,
    timeout: float | None = None,
    progress: bool = True,
    seeds: str | Sequence[Any] | None = None,
    attacks: Sequence[str] = (),
    jobs: int = 1,
) -> int:
    """The ``sanitas sweep`` command: parse, check every run's config, run, report (and, with
    ``attacks``, attack every finished run: ``simulations.analyses.attack``).

    ``blocks`` are the ``--grid`` specs of each product (split at ``--also``); ``seeds`` (``"1,2,3"``
    or a list; ``None``: one run per point at the config's seeds) runs each point once per seed.
    Returns 0 when every run has a summary, 1 otherwise.
    """
    blocks = [b for b in blocks if b]
    if not blocks:
        raise config_mod.ConfigError("sweep needs at least one --grid KEY=V1,V2,...")
    seed_list = parse_seeds(seeds) if seeds is not None else None
    runs = expand([[parse_grid(spec) for spec in block] for block in blocks], seed_list)
    sweep_dir = Path(out).expanduser().resolve() / (name or Path(config).stem)
    check_runs(config, runs, sets, sweep_dir)
    per_seed = f" ({len(runs) // len(seed_list)} points x {len(seed_list)} seeds)" if seed_list else ""
    print(f"sanitas: sweep of {len(runs)} runs{per_seed} into {sweep_dir}", flush=True)

    from simulations.runtime.warm import WarmPool

    with WarmPool(jobs) as pool:
        runner, shared = (
            warm_runner(config, sets, sweep_dir, pool, timeout),
            shared_runner(config, sets, sweep_dir, pool, timeout),
        )
        rows = run_sweep(runs, sweep_dir, runner, progress, jobs, shared)
    failed = [r["run_name"] for r in rows if r["status"] != "ok"]
    print_findings(runs, sweep_dir)
    print(
        f"sanitas: {len(rows) - len(failed)}/{len(rows)} runs done; tables {sweep_dir / 'sweep.csv'} "
        f"(per run) and {sweep_dir / 'sweep_summary.csv'} (per point, mean +- sd over seeds)",
        flush=True,
    )
    if failed:
        print(f"sanitas: not done: {', '.join(failed)}", file=sys.stderr, flush=True)
    if attacks:
        from simulations.analyses.attack import attack_folder

        attack_folder(sweep_dir, attacks)
        print(f"sanitas: attacks in {sweep_dir / 'attacks.csv'}", flush=True)
    return 1 if failed else 0
