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

import csv
import itertools
import json
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fl import config as config_mod
from simulations.drivers import aggregate as agg
from simulations.runtime.api import resolve_config
from simulations.runtime.overrides import load_with_overrides, override_key, split_override

#: Metric columns of ``sweep.csv`` / ``sweep.jsonl``, after the grid keys.
#: ``epsilon`` is the mechanism's own per-unit epsilon (per release, per word or per sentence in a
#: document); ``max_user_pure_epsilon_embedding`` the ledger's largest per-user pure-LDP total over
#: every embedding release a user made (re-draws, test releases and every word or sentence included),
#: ``max_user_pure_epsilon_total`` the same with the label channel added (empty when labels are
#: released in the clear), ``delta_total`` the ledger's composed per-user delta beside them (0 for
#: pure mechanisms; 1 means the (epsilon, delta) figure is vacuous). All are empty when
#: ``ldp_guarantee_holds`` is false: such a run has no guarantee to report. ``evaluation_covered``
#: is false for every run (``fl.accounting.scope``).
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
    "delta_total",
    "label_protected",
    "random_guess_f1",
    "ldp_guarantee_holds",
    "evaluation_covered",
    "majority_class_rate",
    "training_moved",
    "wall_seconds",
    "process_seconds",
    "point",
    "run_name",
    "results_folder",
    "error",
)
EPSILON_KEYS = ("sentence-epsilon", "word-epsilon", "document-epsilon")  # the x axis of the plot, not a line label
# Word-level runs: the per-document guarantee (median-length document) and the rewrite's quality.
WORD_COLUMNS: tuple[str, ...] = (
    "pure_ldp_per_word",
    "word_delta",
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
#: The keys ``--seeds`` sets in every run, both to the run's seed.
SEED_KEYS = ("seed", "noise-seed")
#: Columns of ``sweep_summary.csv`` averaged over seeds (``<column>_mean``, ``<column>_sd``).
STAT_COLUMNS = ("accuracy", "macro_f1", "clean_accuracy", "best_accuracy", "N_w")
#: Privacy columns, the same for every seed of a point: recorded once (the largest when seeds disagree).
SEED_FREE_COLUMNS = (
    "epsilon",
    "sentence_epsilon",
    "max_user_pure_epsilon_embedding",
    "max_user_pure_epsilon_total",
    "delta_total",
    "pure_ldp_per_word",
    "word_delta",
    "document_epsilon_median",
    "document_delta_median",
    "document_epsilon_longest",
    "document_delta_longest",
)
#: Descriptive columns of a point, from its first finished run (checked equal across seeds).
POINT_COLUMNS = ("level", "label_protected", "ldp_guarantee_holds", "evaluation_covered")
_OPEN, _CLOSE = "[{", "]}"


@dataclass(frozen=True)
class GridAxis:
    """One ``--grid`` key and its values (``texts`` as typed, ``values`` parsed)."""

    key: str
    texts: tuple[str, ...]
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Run:
    """One run of the sweep: its folder name, its settings and, when seeded, its seed."""

    name: str
    texts: dict[str, str] = field(default_factory=dict)  # key -> value as typed (passed to --set)
    values: dict[str, Any] = field(default_factory=dict)  # key -> parsed value (names, tables)
    seed: int | None = None  # set by --seeds (then values hold seed and noise-seed too)

    @property
    def point_values(self) -> dict[str, Any]:
        """The grid point's settings: ``values`` less the seed keys of a seeded run."""
        if self.seed is None:
            return dict(self.values)
        return {k: v for k, v in self.values.items() if k not in SEED_KEYS}

    @property
    def point(self) -> str:
        """The grid point's name (the run name without its seed); the run name when unseeded."""
        return self.name if self.seed is None else run_name(self.point_values)


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


def expand(blocks: Sequence[Sequence[GridAxis]], seeds: Sequence[int] | None = None) -> list[Run]:
    """The runs: the Cartesian product of each block's axes, blocks one after another; with
    ``seeds``, each point once per seed (:func:`with_seeds`, seeds fastest).

    Raises ``ConfigError`` on a key repeated in a block, on two runs with the same name and on a
    seed key in the grid of a seeded sweep.
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
    return with_seeds(runs, seeds) if seeds else runs


def parse_seeds(text: str | Sequence[Any]) -> list[int]:
    """``--seeds 1,2,3`` (or a list): distinct non-negative integers, in order.

    Raises ``ConfigError`` on an empty list, a non-integer, a negative or a repeated seed.
    """
    items = [t.strip() for t in text.split(",")] if isinstance(text, str) else [str(t).strip() for t in text]
    if not items or any(not t for t in items):
        raise config_mod.ConfigError(f"--seeds expects distinct integers like 1,2,3, got {text!r}")
    try:
        seeds = [int(t) for t in items]
    except ValueError:
        raise config_mod.ConfigError(f"--seeds expects integers like 1,2,3, got {text!r}") from None
    if any(s < 0 for s in seeds):
        raise config_mod.ConfigError(f"--seeds must be >= 0 (noise-seed -1 means a secret OS seed), got {seeds}")
    if len(set(seeds)) != len(seeds):
        raise config_mod.ConfigError(f"--seeds must be distinct, got {seeds}")
    return seeds


def with_seeds(runs: Sequence[Run], seeds: Sequence[int], name_keys: Sequence[str] = ("seed",)) -> list[Run]:
    """Each run once per seed (seeds fastest), with ``seed`` and ``noise-seed`` both set to it
    (paired, not crossed); the run name gets ``name_keys`` (``__seed=2``).

    Raises ``ConfigError`` when a run already sets a seed key (e.g. ``--grid seed=...``).
    """
    clash = sorted({k for r in runs for k in r.values if k in SEED_KEYS})
    if clash:
        raise config_mod.ConfigError(f"--seeds sets {' and '.join(SEED_KEYS)} of every run; remove {clash} from --grid")
    out = []
    for run in runs:
        for seed in seeds:
            s = int(seed)
            values = {**run.values, **dict.fromkeys(SEED_KEYS, s)}
            texts = {**run.texts, **dict.fromkeys(SEED_KEYS, str(s))}
            out.append(Run(run_name({**run.values, **dict.fromkeys(name_keys, s)}), texts, values, seed=s))
    return out


def grid_keys(runs: Iterable[Run]) -> list[str]:
    """All grid keys of the sweep, in first-seen order (the leading table columns); with seeds,
    ``seed`` and ``noise-seed`` too."""
    return list(dict.fromkeys(k for r in runs for k in r.values))


def point_keys(runs: Iterable[Run]) -> list[str]:
    """The grid keys of the points (:func:`grid_keys` less the seed keys that ``--seeds`` set)."""
    return list(dict.fromkeys(k for r in runs for k in r.point_values))


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
    row.update(
        point=run.point, run_name=run.name, results_folder=str(folder), process_seconds=status.get("process_seconds")
    )
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
        delta_total=privacy.get("delta_total"),
        label_protected=(summary.get("privacy") or {}).get("label_protected"),
        random_guess_f1=final.get("random_guess_f1"),
        dataset=row.get("dataset") or summary.get("dataset"),
        ldp_guarantee_holds=summary.get("ldp_guarantee_holds"),
        evaluation_covered=summary.get("evaluation_covered", False),
        majority_class_rate=(summary.get("outcome") or {}).get("majority_class_rate"),
        training_moved=(summary.get("outcome") or {}).get("training_moved"),
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
        "word_delta": (level.get("per_word") or {}).get("delta"),
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


def write_tables(rows: Sequence[Mapping[str, Any]], sweep_dir: Path, stem: str = "sweep") -> tuple[Path, Path]:
    """Write ``<stem>.csv`` and ``<stem>.jsonl`` (``None`` is an empty cell / ``null``)."""
    fields = list(dict.fromkeys(k for r in rows for k in r)) or list(METRIC_COLUMNS)
    csv_path, jsonl_path = sweep_dir / f"{stem}.csv", sweep_dir / f"{stem}.jsonl"
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


def summarize(rows: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> list[dict[str, Any]]:
    """One row per grid point (the rows' ``point``, else their run name), in first-seen order.

    ``keys`` are the point's grid keys (:func:`point_keys`). Over the point's finished runs
    (status ``ok``): ``n``, ``seeds``, ``one_seed`` (n == 1), ``<column>_mean`` and ``<column>_sd``
    (sample sd, ddof = 1; ``None`` when n < 2) of :data:`STAT_COLUMNS` and of ``wall_seconds``;
    :data:`SEED_FREE_COLUMNS` and :data:`POINT_COLUMNS` once, from the first finished run. When
    the seeds disagree on a privacy column (e.g. a seeded subsample with longer documents), the
    point gets ``epsilons_differ`` true and that column the largest value (the guarantee every
    seed's run meets); ``differs_across_seeds`` names the columns that disagree. ``status``: ``ok``
    (every planned run finished), ``partial``, ``failed`` (none finished, one failed) or ``pending``.
    """
    points = []
    for point, members in agg.group(rows, lambda r: r.get("point") or r.get("run_name")).items():
        done = [m for m in members if m.get("status") == "ok"]
        first = (done or members)[0]
        failed = any(m.get("status") == "failed" for m in members)
        status = "ok" if len(done) == len(members) else "partial" if done else "failed" if failed else "pending"
        present = [c for c in SEED_FREE_COLUMNS if any(m.get(c) is not None for m in done)]
        differ = agg.differing(done, [*present, *POINT_COLUMNS]) if done else []
        privacy = {c: first.get(c) for c in SEED_FREE_COLUMNS if c in present or c in METRIC_COLUMNS}
        majorities = agg.finite(m.get("majority_class_rate") for m in done)
        moved = [m.get("training_moved") for m in done if m.get("training_moved") is not None]
        for c in differ:
            if c in privacy:
                values = agg.finite(m.get(c) for m in done)
                privacy[c] = max(values) if values else None
        points.append(
            {
                **{k: first.get(k) for k in keys},
                "point": point,
                "status": status,
                "n": len(done),
                "planned": len(members),
                "one_seed": len(done) == 1,
                "seeds": " ".join(str(m["seed"]) for m in done if m.get("seed") is not None),
                **agg.stat_columns(done, STAT_COLUMNS),
                **privacy,
                "epsilons_differ": any(c in SEED_FREE_COLUMNS for c in differ),
                "differs_across_seeds": " ".join(differ),
                **{c: first.get(c) for c in POINT_COLUMNS},
                # The test split's majority-class rate (the largest over the seeds' splits) and whether
                # every run's scores moved over its rounds: what "learned nothing" is judged by.
                "majority_class_rate": max(majorities) if majorities else None,
                "training_moved": all(moved) if moved else None,
                **agg.stat_columns(done, ["wall_seconds"]),
                "runs": " ".join(str(m.get("run_name")) for m in members),
            }
        )
    return points


def plot_groups(
    points: Sequence[Mapping[str, Any]], keys: Sequence[str]
) -> tuple[dict[str, list[Mapping[str, Any]]], list[Mapping[str, Any]]]:
    """Points (:func:`summarize`) with a finished run, split for the plot: lines on the epsilon
    axis (one per combination of the grid keys other than the epsilons) and the points whose LDP
    guarantee does not hold, which never enter the epsilon axis."""
    others = [k for k in keys if k not in EPSILON_KEYS and k not in SEED_KEYS]
    finished = [p for p in points if p.get("n") and p.get("accuracy_mean") is not None]
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for point in finished:
        if point.get("ldp_guarantee_holds") is not False:
            label = ", ".join(f"{k}={format_value(point[k])}" for k in others if point.get(k) is not None) or "runs"
            groups.setdefault(label, []).append(point)
    return groups, [p for p in finished if p.get("ldp_guarantee_holds") is False]


def _annotate_n(ax: Any, xs: Sequence[float], points: Sequence[Mapping[str, Any]]) -> None:
    """``n=k`` beside each point, when the points of one line have different n."""
    if len({p["n"] for p in points}) > 1:
        for x, p in zip(xs, points, strict=True):
            ax.annotate(f"n={p['n']}", (x, p["accuracy_mean"]), xytext=(4, 4), textcoords="offset points", fontsize=6)


def plot_accuracy(points: Sequence[Mapping[str, Any]], keys: Sequence[str], path: Path, title: str = "") -> Path:
    """Final accuracy (mean +- sd over seeds, :func:`summarize`'s points) against epsilon (per
    release, or per word at the word level): one line per combination of the grid keys other than
    the epsilons, n in its legend entry (and beside each point when it varies along the line);
    a point that only one seed reached has a hollow marker and no error bar. Points without a
    finite epsilon (mechanism ``none``) are horizontal dashed lines with a shaded sd band. Points
    whose LDP guarantee does not hold (``map-in = "leaky"``) are never drawn on the epsilon axis:
    they go to a separate panel labelled "not LDP", against their mechanism setting."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups, not_ldp = plot_groups(points, keys)
    done = [p for group in groups.values() for p in group]
    colors = plt.get_cmap("tab10").colors
    if not_ldp:
        fig, (ax, ax_leak) = plt.subplots(1, 2, figsize=(13, 6.0), gridspec_kw={"width_ratios": [2, 1]}, sharey=True)
        _plot_not_ldp(ax_leak, not_ldp, keys)
    else:
        fig, ax = plt.subplots(figsize=(10, 4.8))
    for i, (label, group) in enumerate(groups.items()):
        color = colors[i % len(colors)]
        private = sorted((p for p in group if p.get("epsilon") is not None), key=lambda p: p["epsilon"])
        if private:
            xs = [p["epsilon"] for p in private]
            agg.draw_errorbars(
                ax,
                xs,
                [p["accuracy_mean"] for p in private],
                [p.get("accuracy_sd") for p in private],
                [p["n"] for p in private],
                color=color,
                label=f"{label} ({agg.n_label(p['n'] for p in private)})",
            )
            _annotate_n(ax, xs, private)
        for p in group:
            if p.get("epsilon") is None:
                mean, sd = p["accuracy_mean"], p.get("accuracy_sd")
                spread = f" +- {sd:.3f}" if sd is not None else ", one seed"
                ax.axhline(
                    mean, linestyle="--", color=color, label=f"{label} (no privacy: {mean:.3f}{spread}, n={p['n']})"
                )
                if sd is not None:
                    ax.axhspan(mean - sd, mean + sd, color=color, alpha=0.12, linewidth=0)
    majority = agg.finite(p.get("majority_class_rate") for p in done)
    if majority:  # what a model that learned nothing scores (above 1 / classes where classes are imbalanced)
        from simulations.drivers.findings import mark_not_learned, not_learned

        flat = [p for p in not_learned(done, max(majority)) if p.get("epsilon") is not None]
        mark_not_learned(ax, [p["epsilon"] for p in flat], [p["accuracy_mean"] for p in flat])
        ax.axhline(
            max(majority), color="crimson", linestyle="-.", alpha=0.6, label=f"majority class {max(majority):.3f}"
        )
    if any(p["n"] == 1 for p in done if p.get("epsilon") is not None) or any(p["n"] == 1 for p in not_ldp):
        agg.add_one_seed_note(ax)
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
    ax.set_ylabel("final accuracy (sanitized test), mean +- sd over seeds")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        if not_ldp:  # below the axes: the "not LDP" panel sits on the right
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18))
        else:
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside: no line hidden
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _plot_not_ldp(ax: Any, points: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> None:
    """Points without an LDP guarantee, apart: x is the mechanism's epsilon *setting* (a config
    value, not a guarantee), each line labelled by its grid keys; mean +- sd, hollow for one seed."""
    setting = [k for k in EPSILON_KEYS if k in keys]
    groups: dict[str, list[tuple[float, Mapping[str, Any]]]] = {}
    for i, point in enumerate(points):
        x = next((point[k] for k in setting if point.get(k) is not None), i)
        label = (
            ", ".join(
                f"{k}={format_value(point[k])}"
                for k in keys
                if k not in EPSILON_KEYS and k not in SEED_KEYS and point.get(k) is not None
            )
            or "runs"
        )
        groups.setdefault(label, []).append((x, point))
    for marker, (label, members) in zip("xP*Dv^<>", groups.items(), strict=False):
        members.sort(key=lambda m: m[0])
        xs = [x for x, _ in members]
        ps = [p for _, p in members]
        agg.draw_errorbars(
            ax,
            xs,
            [p["accuracy_mean"] for p in ps],
            [p.get("accuracy_sd") for p in ps],
            [p["n"] for p in ps],
            marker=marker,
            linestyle=":",
            markersize=8,
            label=f"{label} ({agg.n_label(p['n'] for p in ps)})",
        )
        _annotate_n(ax, xs, ps)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18))
    ax.set_title(
        "not LDP: no guarantee holds\n(e.g. leaky M1 trained on unsanitized gradients)", fontsize=8, color="crimson"
    )
    ax.set_xlabel("mechanism epsilon setting (not a guarantee)")
    ax.grid(alpha=0.3)


def findings_points(points: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> list[dict[str, Any]]:
    """:func:`summarize`'s finished points as :mod:`simulations.drivers.findings` rows: ``series`` the grid values
    other than the epsilons, ``value`` the epsilon setting (or the mechanism when there is none)."""
    out = []
    for p in points:
        if not p.get("n"):
            continue
        series = ", ".join(
            f"{k}={format_value(p[k])}"
            for k in keys
            if k not in EPSILON_KEYS and k not in SEED_KEYS and p.get(k) is not None
        )
        value = next((format_value(p[k]) for k in EPSILON_KEYS if p.get(k) is not None), "")
        out.append({**p, "series": series, "value": value, "name": p.get("point", "")})
    return out


def print_findings(runs: Sequence[Run], sweep_dir: Path) -> None:
    """The sweep's final table (:mod:`simulations.drivers.findings`), from ``sweep_summary.jsonl``'s points."""
    from simulations.drivers.findings import print_findings as show

    keys = point_keys(runs)
    points = findings_points(summarize([collect_row(r, sweep_dir, grid_keys(runs)) for r in runs], keys), keys)
    majority = agg.finite(p.get("majority_class_rate") for p in points)
    show(points, max(majority) if majority else None, f"sweep {sweep_dir.name}", label="point")


def write_outputs(runs: Sequence[Run], sweep_dir: Path, plot: bool = True) -> list[dict[str, Any]]:
    """Collect every run's row; write ``sweep.csv``/``.jsonl``, the per-point summary
    ``sweep_summary.csv``/``.jsonl`` (and the plot); returns the run rows."""
    keys = grid_keys(runs)
    rows = [collect_row(r, sweep_dir, keys) for r in runs]
    write_tables(rows, sweep_dir)
    points = summarize(rows, point_keys(runs))
    write_tables(points, sweep_dir, stem="sweep_summary")
    if plot:
        plot_accuracy(points, point_keys(runs), sweep_dir / "accuracy_vs_epsilon.png", title=f"sweep {sweep_dir.name}")
    return rows


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

    def key(run: Run) -> Any:
        cfg = resolve_run(config, run, sets, sweep_dir)
        if cfg["fault-rate"] > 0 or config_mod.simulation_backend(cfg) != "local":
            return None  # simulated faults time each node on its own; Ray sweeps keep a run per point
        return shared_federation(cfg)

    def run_group(runs: Sequence[Run], log_paths: Sequence[Path]) -> list[Outcome]:
        commands = [run_command(config, r, sets, sweep_dir) for r in runs]
        log = log_paths[0]
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("".join("$ sanitas " + " ".join(c) + "\n" for c in commands))
        for other, r in zip(log_paths[1:], runs[1:], strict=True):
            other.write_text(f"$ sanitas {' '.join(run_command(config, r, sets, sweep_dir))}\n"
                             f"(run in one federation with {runs[0].name}: its log is {log.name})\n")  # fmt: skip
        points = pool.run_points(commands, log, None if timeout is None else timeout * len(runs))
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
    status = _read_json(folder / "status.json") or {}
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
