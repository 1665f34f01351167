"""``sanitas sweep``: one ``sanitas run`` per point of a grid of config values.

::

    sanitas sweep CONFIG.toml --grid KEY=V1,V2,... [--grid KEY2=...] [--also --grid ...]
                  [--set key=value ...] --out DIR [--name NAME] [--timeout SECONDS]

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

Output
------
Each run is ``python -m simulations.cli run CONFIG --set ... --out <out>/<name>``
in its own process (a crash fails that run only) and writes
``<out>/<name>/<run-name>/``; the run name is ``key=value`` pairs joined by
``__`` (``sentence-mechanism=purkayastha__sentence-epsilon=2``). The process's
output goes to ``<out>/<name>/logs/<run-name>.log`` and its outcome to
``logs/<run-name>.status.json``. A run whose folder already holds
``summary.json`` is skipped (resume); a failed or interrupted run is run again
(a half-written folder is first moved to ``<out>/<name>/incomplete/``).
``sweep.csv`` and ``sweep.jsonl`` (one row per run, rebuilt from the folders
after every run) and ``accuracy_vs_epsilon.png`` go to ``<out>/<name>/``.
"""

from __future__ import annotations

import csv
import itertools
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fl import config as config_mod

from .api import resolve_config
from .overrides import load_with_overrides, override_key, split_override

#: Metric columns of ``sweep.csv`` / ``sweep.jsonl``, after the grid keys.
#: ``epsilon`` is the mechanism's own per-unit epsilon (per release, per word or per sentence in a
#: document); ``max_user_pure_epsilon_embedding`` the ledger's largest per-user pure-LDP total over
#: every embedding release a user made (re-draws, test releases and every word or sentence included),
#: ``max_user_pure_epsilon_total`` the same with the label channel added (empty when labels are
#: released in the clear). All three are empty when ``ldp_guarantee_holds`` is false: such a run has
#: no guarantee to report. ``evaluation_covered`` is false for every run (``fl.accounting.scope``).
METRIC_COLUMNS: tuple[str, ...] = (
    "status",
    "accuracy",
    "macro_f1",
    "best_accuracy",
    "clean_accuracy",
    "level",
    "epsilon",
    "sentence_epsilon",
    "max_user_pure_epsilon_embedding",
    "max_user_pure_epsilon_total",
    "label_protected",
    "random_guess_f1",
    "ldp_guarantee_holds",
    "evaluation_covered",
    "wall_seconds",
    "process_seconds",
    "run_name",
    "results_folder",
    "error",
)
EPSILON_KEYS = ("sentence-epsilon", "word-epsilon", "document-epsilon")  # the x axis of the plot, not a line label
# Word-level runs: the per-document guarantee (median-length document) and the rewrite's quality.
WORD_COLUMNS: tuple[str, ...] = (
    "pure_ldp_per_word",
    "words_median",
    "document_epsilon_median",
    "document_delta_median",
    "document_epsilon_longest",
    "document_delta_longest",
    "N_w",
    "S_w_median",
    "rouge1_f",
    "bleu",
)
_OPEN, _CLOSE = "[{", "]}"


@dataclass(frozen=True)
class GridAxis:
    """One ``--grid`` key and its values (``texts`` as typed, ``values`` parsed)."""

    key: str
    texts: tuple[str, ...]
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Run:
    """One point of the sweep: its folder name and its grid settings."""

    name: str
    texts: dict[str, str] = field(default_factory=dict)  # key -> value as typed (passed to --set)
    values: dict[str, Any] = field(default_factory=dict)  # key -> parsed value (names, tables)


@dataclass(frozen=True)
class Outcome:
    """What running one run's process gave."""

    returncode: int
    seconds: float
    error: str | None = None


def split_values(text: str) -> list[str]:
    """Split ``text`` on commas outside quotes and brackets; items are stripped.

    Raises ``ValueError`` on unbalanced quotes or brackets and on empty items.
    """
    items: list[str] = []
    current: list[str] = []
    quote: str | None = None
    depth = 0
    escaped = False
    for ch in text:
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\" and quote == '"':
                escaped = True
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced {ch!r} in grid values {text!r}")
        elif ch == "," and depth == 0:
            items.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    if quote or depth:
        raise ValueError(f"unclosed quote or bracket in grid values {text!r}")
    items.append("".join(current).strip())
    if any(not item for item in items):
        raise ValueError(f"empty value in grid values {text!r}")
    return items


def parse_grid(spec: str) -> GridAxis:
    """Parse one ``KEY=V1,V2,...`` argument (see the module docstring)."""
    key, rest = split_override(spec, "--grid", "KEY=V1,V2,...")
    if not key:
        raise config_mod.ConfigError(f"--grid expects KEY=V1,V2,..., got {spec!r}")
    if key not in config_mod.DEFAULTS:
        raise config_mod.ConfigError(f"--grid: unknown config key {key!r}")
    try:
        texts = split_values(rest)
    except ValueError as err:
        raise config_mod.ConfigError(f"--grid {key}: {err}") from None
    values = [config_mod.parse_value(t) for t in texts]
    if len({format_value(v) for v in values}) != len(values):
        raise config_mod.ConfigError(f"--grid {key}: repeated value in {rest!r}")
    return GridAxis(key, tuple(texts), tuple(values))


def format_value(value: Any) -> str:
    """Short readable form of a grid value for run names and labels (``2.0`` -> ``2``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


def run_name(values: Mapping[str, Any]) -> str:
    """Folder name of a run: ``key=value`` pairs joined by ``__``, path-safe."""
    parts = [f"{key}={format_value(value)}" for key, value in values.items()]
    name = re.sub(r"[^A-Za-z0-9._+=-]+", "-", "__".join(parts)).strip("-.")
    return name or "default"


def expand(blocks: Sequence[Sequence[GridAxis]]) -> list[Run]:
    """The runs: the Cartesian product of each block's axes, blocks one after another.

    Raises ``ConfigError`` on a key repeated in a block and on two runs with the same name.
    """
    runs: list[Run] = []
    for axes in blocks:
        keys = [a.key for a in axes]
        if len(set(keys)) != len(keys):
            raise config_mod.ConfigError(f"--grid: a key appears twice in one product: {keys}")
        for combo in itertools.product(*(zip(a.texts, a.values) for a in axes)):
            texts = {k: t for k, (t, _) in zip(keys, combo)}
            values = {k: v for k, (_, v) in zip(keys, combo)}
            runs.append(Run(run_name(values), texts, values))
    names = [r.name for r in runs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise config_mod.ConfigError(f"--grid: runs with the same name (repeated grid point?): {duplicates}")
    return runs


def grid_keys(runs: Iterable[Run]) -> list[str]:
    """All grid keys of the sweep, in first-seen order (the leading table columns)."""
    return list(dict.fromkeys(k for r in runs for k in r.values))


def run_sets(run: Run, sets: Sequence[str]) -> list[str]:
    """``--set`` items of one run: the sweep's own, then its grid values and its name."""
    return [*sets, *(f"{k}={t}" for k, t in run.texts.items()), f"run-name={json.dumps(run.name)}"]


def resolve_run(config: str, run: Run, sets: Sequence[str], sweep_dir: Path) -> Mapping[str, Any]:
    """The resolved config ``sanitas run`` will build for ``run``: the same functions as the CLI
    and :func:`simulations.api.run` (no simulation module is imported: those imports take seconds)."""
    return resolve_config(load_with_overrides(config, run_sets(run, sets)), out=str(sweep_dir))


def check_runs(config: str, runs: Sequence[Run], sets: Sequence[str], sweep_dir: Path) -> None:
    """Resolve every run's config in-process, so a bad grid value stops the sweep before any run.

    Raises ``ConfigError`` naming the run and the problem, or on a key in both ``--set`` and ``--grid``.
    """
    set_keys = {override_key(item) for item in sets}
    clash = sorted(set_keys & set(grid_keys(runs)))
    if clash:
        raise config_mod.ConfigError(f"keys both in --set and --grid: {clash}")
    for run in runs:
        try:
            resolve_run(config, run, sets, sweep_dir)
        except ValueError as err:
            raise config_mod.ConfigError(f"run {run.name}: {err}") from None


def run_command(config: str, run: Run, sets: Sequence[str], sweep_dir: Path) -> list[str]:
    """The ``python -m simulations.cli run ...`` command of one run (code from the working directory)."""
    command = [sys.executable, "-m", "simulations.cli", "run", str(config)]
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


def execute(command: Sequence[str], log_path: Path, timeout: float | None = None) -> Outcome:
    """Run ``command`` with stdout and stderr to ``log_path``; never raises for the command's failure."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.time()
    with log_path.open("w") as log:
        log.write("$ " + " ".join(command) + "\n")
        log.flush()
        try:
            rc = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = 124
        except OSError as err:
            log.write(f"sanitas: error: could not start the run: {err}\n")
            rc = 127
    seconds = round(time.time() - started, 2)
    if rc == 0:
        return Outcome(rc, seconds)
    error = f"timed out after {timeout:g} s" if rc == 124 else last_error(log_path.read_text(errors="replace"))
    return Outcome(rc, seconds, error)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def collect_row(run: Run, sweep_dir: Path, keys: Sequence[str]) -> dict[str, Any]:
    """One table row from ``<sweep_dir>/<run>/summary.json`` and ``logs/<run>.status.json``.

    ``status`` is ``ok`` (summary present), ``failed`` (the status file says so) or ``pending``.
    """
    row: dict[str, Any] = {k: run.values.get(k) for k in keys}
    row.update(dict.fromkeys(METRIC_COLUMNS))
    folder = sweep_dir / run.name
    status = _read_json(sweep_dir / "logs" / f"{run.name}.status.json") or {}
    summary = _read_json(folder / "summary.json")
    row.update(run_name=run.name, results_folder=str(folder), process_seconds=status.get("process_seconds"))
    if summary is None:
        row["status"] = "failed" if status.get("status") == "failed" else "pending"
        row["error"] = status.get("error")
        return row
    final = summary.get("final") or {}
    guarantee = summary.get("guarantee") or {}
    sentence = guarantee.get("sentence") or {}
    word = guarantee.get("word")
    document = guarantee.get("document")
    holds = summary.get("ldp_guarantee_holds") is True  # leaky and central runs have no local guarantee
    privacy = (summary.get("privacy") or {}) if holds else {}
    row.update(
        status="ok",
        accuracy=final.get("accuracy"),
        macro_f1=final.get("macro_f1"),
        best_accuracy=summary.get("best_accuracy"),
        clean_accuracy=final.get("clean_accuracy"),
        level="word" if word else "document" if document else "sentence",
        epsilon=(word or document or sentence).get("epsilon") if holds else None,
        sentence_epsilon=None if word or document or not holds else sentence.get("epsilon"),
        max_user_pure_epsilon_embedding=privacy.get("epsilon_ldp"),
        max_user_pure_epsilon_total=privacy.get("epsilon_total") if privacy.get("label_protected") else None,
        label_protected=(summary.get("privacy") or {}).get("label_protected"),
        random_guess_f1=final.get("random_guess_f1"),
        dataset=row.get("dataset") or summary.get("dataset"),
        ldp_guarantee_holds=summary.get("ldp_guarantee_holds"),
        evaluation_covered=summary.get("evaluation_covered", False),
        wall_seconds=summary.get("wall_seconds"),
        results_folder=summary.get("results_folder", str(folder)),
    )
    if word and holds:
        row.update(_word_columns(summary))
    if document and holds:
        level = ((summary.get("privacy") or {}).get("document_level")) or {}
        row.update(
            document_mechanism=level.get("mechanism"),
            num_projections=level.get("num_projections"),
            sentences_median=level.get("median_sentences_per_document"),
            document_epsilon_median=(level.get("per_document_median") or {}).get("epsilon"),
            document_epsilon_longest=(level.get("per_document_longest") or {}).get("epsilon"),
        )
    return row


def _word_columns(summary: Mapping[str, Any]) -> dict[str, Any]:
    level = ((summary.get("privacy") or {}).get("word_level")) or {}
    quality = summary.get("rewrite_quality") or {}
    median, longest = level.get("per_document_median") or {}, level.get("per_document_longest") or {}
    return {
        "pure_ldp_per_word": (level.get("per_word") or {}).get("pure_ldp"),
        "words_median": level.get("median_words_per_document"),
        "document_epsilon_median": median.get("pure_ldp"),
        "document_delta_median": median.get("delta"),
        "document_epsilon_longest": longest.get("pure_ldp"),
        "document_delta_longest": longest.get("delta"),
        "N_w": quality.get("N_w"),
        "S_w_median": (quality.get("support") or {}).get("S_w_median"),
        "rouge1_f": quality.get("rouge1_f"),
        "bleu": quality.get("bleu"),
    }


def write_tables(rows: Sequence[Mapping[str, Any]], sweep_dir: Path) -> tuple[Path, Path]:
    """Write ``sweep.csv`` and ``sweep.jsonl`` (``None`` is an empty cell / ``null``)."""
    fields = list(dict.fromkeys(k for r in rows for k in r)) or list(METRIC_COLUMNS)
    csv_path, jsonl_path = sweep_dir / "sweep.csv", sweep_dir / "sweep.jsonl"
    with csv_path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows({k: _cell(v) for k, v in r.items()} for r in rows)
    jsonl_path.write_text("".join(json.dumps(dict(r), allow_nan=False) + "\n" for r in rows))
    return csv_path, jsonl_path


def _cell(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        return json.dumps(value)
    return value


def plot_groups(
    rows: Sequence[Mapping[str, Any]], keys: Sequence[str]
) -> tuple[dict[str, list[Mapping[str, Any]]], list[Mapping[str, Any]]]:
    """Finished runs split for the plot: lines on the epsilon axis (one per combination of the
    grid keys other than the epsilons) and the runs whose LDP guarantee does not hold, which
    never enter the epsilon axis."""
    others = [k for k in keys if k not in EPSILON_KEYS]
    finished = [r for r in rows if r.get("status") == "ok" and r.get("accuracy") is not None]
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in finished:
        if row.get("ldp_guarantee_holds") is not False:
            label = ", ".join(f"{k}={format_value(row[k])}" for k in others if row.get(k) is not None) or "runs"
            groups.setdefault(label, []).append(row)
    return groups, [r for r in finished if r.get("ldp_guarantee_holds") is False]


def plot_accuracy(rows: Sequence[Mapping[str, Any]], keys: Sequence[str], path: Path, title: str = "") -> Path:
    """Final accuracy against epsilon (per release, or per word at the word level): one
    line per combination of the grid keys other than the epsilons; runs without a
    finite epsilon (mechanism ``none``) as horizontal dashed lines. Runs whose LDP
    guarantee does not hold (``map-in = "leaky"``) are never drawn on the epsilon axis:
    they go to a separate panel labelled "not LDP", against their mechanism setting."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups, not_ldp = plot_groups(rows, keys)
    done = [r for group in groups.values() for r in group]
    colors = plt.get_cmap("tab10").colors
    if not_ldp:
        fig, (ax, ax_leak) = plt.subplots(1, 2, figsize=(13, 6.0), gridspec_kw={"width_ratios": [2, 1]}, sharey=True)
        _plot_not_ldp(ax_leak, not_ldp, keys)
    else:
        fig, ax = plt.subplots(figsize=(10, 4.8))
    for i, (label, group) in enumerate(groups.items()):
        color = colors[i % len(colors)]
        private = sorted((r for r in group if r.get("epsilon") is not None), key=lambda r: r["epsilon"])
        if private:
            ax.plot([r["epsilon"] for r in private], [r["accuracy"] for r in private], "o-", color=color, label=label)
        for r in group:
            if r.get("epsilon") is None:
                ax.axhline(r["accuracy"], linestyle="--", color=color, label=f"{label} (no privacy)")
    if not done:
        ax.text(
            0.5,
            0.5,
            "no finished LDP runs" if not_ldp else "no finished runs",
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
    ax.set_xlabel("epsilon per release (sentence level) or per word (word level), mechanism's own metric")
    ax.set_ylabel("final accuracy (sanitized test)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    if groups:
        if not_ldp:  # below the axes: the "not LDP" panel sits on the right
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18))
        else:
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside: no line hidden
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _plot_not_ldp(ax: Any, rows: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> None:
    """Runs without an LDP guarantee, apart: x is the mechanism's epsilon *setting* (a config
    value, not a guarantee), each point labelled by its grid keys."""
    setting = [k for k in EPSILON_KEYS if k in keys]
    groups: dict[str, list[tuple[float, float]]] = {}
    for i, row in enumerate(rows):
        x = next((row[k] for k in setting if row.get(k) is not None), i)
        label = (
            ", ".join(f"{k}={format_value(row[k])}" for k in keys if k not in EPSILON_KEYS and row.get(k) is not None)
            or "runs"
        )
        groups.setdefault(label, []).append((x, row["accuracy"]))
    for marker, (label, points) in zip("xP*Dv^<>", groups.items(), strict=False):
        ax.plot(*zip(*sorted(points), strict=True), marker=marker, linestyle=":", markersize=8, label=label)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18))
    ax.set_title(
        "not LDP: no guarantee holds\n(e.g. leaky M1 trained on unsanitized gradients)", fontsize=8, color="crimson"
    )
    ax.set_xlabel("mechanism epsilon setting (not a guarantee)")
    ax.grid(alpha=0.3)


def write_outputs(runs: Sequence[Run], sweep_dir: Path, plot: bool = True) -> list[dict[str, Any]]:
    """Collect every run's row and write the tables (and the plot); returns the rows."""
    keys = grid_keys(runs)
    rows = [collect_row(r, sweep_dir, keys) for r in runs]
    write_tables(rows, sweep_dir)
    if plot:
        plot_accuracy(rows, keys, sweep_dir / "accuracy_vs_epsilon.png", title=f"sweep {sweep_dir.name}")
    return rows


def prepare_folder(folder: Path, sweep_dir: Path) -> None:
    """Move a half-written run folder (no ``summary.json``) out of the way before re-running it."""
    if folder.exists() and any(folder.iterdir()):
        target = sweep_dir / "incomplete" / f"{folder.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        target.parent.mkdir(parents=True, exist_ok=True)
        folder.rename(target)


Runner = Callable[[Run, Path], Outcome]


def run_sweep(runs: Sequence[Run], sweep_dir: Path, runner: Runner, progress: bool = True) -> list[dict[str, Any]]:
    """Run every run without ``summary.json`` through ``runner(run, log_path)``; record each
    outcome in ``logs/<run>.status.json``, rewrite the tables after each run and plot at the end.

    A failed run (non-zero exit, or no ``summary.json``) is recorded and the sweep goes on.
    Returns the final rows.
    """
    from tqdm import tqdm

    sweep_dir.mkdir(parents=True, exist_ok=True)
    logs = sweep_dir / "logs"
    bar = tqdm(runs, desc=sweep_dir.name, unit="run", disable=not progress, file=sys.stderr)
    try:
        for run in bar:
            folder = sweep_dir / run.name
            if (folder / "summary.json").is_file():
                bar.write(f"skip   {run.name} (summary.json exists)")
                continue
            bar.set_postfix_str(run.name, refresh=True)
            prepare_folder(folder, sweep_dir)
            outcome = runner(run, logs / f"{run.name}.log")
            error = outcome.error
            if outcome.returncode == 0 and not (folder / "summary.json").is_file():
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
            write_outputs(runs, sweep_dir, plot=False)
    finally:
        bar.close()
        rows = write_outputs(runs, sweep_dir)
    return rows


def sweep(
    config: str,
    blocks: Sequence[Sequence[str]],
    sets: Sequence[str],
    out: str,
    name: str | None = None,
    timeout: float | None = None,
    progress: bool = True,
) -> int:
    """The ``sanitas sweep`` command: parse, check every run's config, run, report.

    ``blocks`` are the ``--grid`` specs of each product (split at ``--also``).
    Returns 0 when every run has a summary, 1 otherwise.
    """
    blocks = [b for b in blocks if b]
    if not blocks:
        raise config_mod.ConfigError("sweep needs at least one --grid KEY=V1,V2,...")
    runs = expand([[parse_grid(spec) for spec in block] for block in blocks])
    sweep_dir = Path(out).expanduser().resolve() / (name or Path(config).stem)
    check_runs(config, runs, sets, sweep_dir)
    print(f"sanitas: sweep of {len(runs)} runs into {sweep_dir}", flush=True)

    def runner(run: Run, log_path: Path) -> Outcome:
        return execute(run_command(config, run, sets, sweep_dir), log_path, timeout)

    rows = run_sweep(runs, sweep_dir, runner, progress=progress)
    failed = [r["run_name"] for r in rows if r["status"] != "ok"]
    print(f"sanitas: {len(rows) - len(failed)}/{len(rows)} runs done; table {sweep_dir / 'sweep.csv'}", flush=True)
    if failed:
        print(f"sanitas: not done: {', '.join(failed)}", file=sys.stderr, flush=True)
    return 1 if failed else 0
