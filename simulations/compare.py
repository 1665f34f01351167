"""``sanitas compare``: local DP vs central DP on one epsilon axis.

::

    sanitas compare CONFIG.toml [--epsilons 2,6,10] [--noise-multipliers 0.5,1,2]
                    [--set key=value ...] [--central-set key=value ...] --out DIR [--name NAME]

Runs, all from the same config (same data, users, seeds):

* local DP: one run per ``sentence-epsilon``;
* central DP: ``mode = "central"``, one run per ``central-noise-multiplier``
  (``--central-set`` adds keys for these runs only, e.g. ``users-per-node=50``:
  in central mode a node is the party whose clipped update is noised);
* a non-private reference (``sentence-mechanism = "none"``).

Every run is an ordinary ``sanitas run`` (through :mod:`simulations.sweep`, so
an interrupted comparison resumes). ``compare.csv`` has one row per point:

* ``local-ldp``: x = the per-user pure-LDP epsilon0 of the whole record
  (embedding + label), the guarantee every user has against the server;
* ``local-shuffled``: x = the shuffle-amplified central epsilon of the same run
  (Feldman et al. 2021; what a trusted shuffler would give, an estimate);
* ``central``: x = the central (epsilon, delta) of DP-FedAvg (dp-accounting),
  which covers the whole record;
* ``non-private``: no epsilon (a horizontal line).

A local run whose labels are released in the clear (``label-mechanism =
"none"``) has no whole-record epsilon: its ``epsilon`` is empty,
``label_protected`` is false, and the embedding-only figure is kept in
``epsilon_embedding_only``. Such points are never drawn on the epsilon axis
with central DP; ``compare.png`` shows them in a separate panel labelled
"labels in the clear". A run without an LDP guarantee (``ldp_guarantee_holds``
false) gets no local epsilon at all. ``evaluation_covered`` is false for every
row (``fl.accounting.scope``).

``compare.png`` plots accuracy against epsilon (log scale) for the three.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fl import config as config_mod

from . import sweep as sw
from .overrides import split_override

COLUMNS = (
    "series",
    "parameter",
    "value",
    "epsilon",
    "delta",
    "label_protected",
    "epsilon_embedding_only",
    "accuracy",
    "macro_f1",
    "ldp_guarantee_holds",
    "evaluation_covered",
    "run_name",
    "results_folder",
)


def _axis(key: str, values: Sequence[str]) -> sw.GridAxis:
    texts = tuple(v.strip() for v in values)
    return sw.GridAxis(key, texts, tuple(config_mod.parse_value(t) for t in texts))


def _fixed(items: Sequence[str]) -> list[sw.GridAxis]:
    return [_axis(key, [value]) for key, value in (split_override(item, "--central-set") for item in items)]


def plan(epsilons: Sequence[str], multipliers: Sequence[str], central_sets: Sequence[str]) -> list[sw.Run]:
    """The runs of a comparison: local epsilons, central noise multipliers, the reference."""
    if not epsilons or not multipliers:
        raise config_mod.ConfigError("compare needs at least one epsilon and one noise multiplier")
    blocks = [
        [_axis("mode", ['"local"']), _axis("sentence-epsilon", epsilons)],
        [_axis("mode", ['"central"']), *_fixed(central_sets), _axis("central-noise-multiplier", multipliers)],
        [_axis("mode", ['"local"']), _axis("sentence-mechanism", ['"none"'])],
    ]
    return sw.expand(blocks)


def _summary(folder: Path) -> dict[str, Any] | None:
    try:
        return json.loads((folder / "summary.json").read_text())
    except (OSError, ValueError):
        return None


def rows_for(run: sw.Run, sweep_dir: Path) -> list[dict[str, Any]]:
    """The comparison rows of one finished run (none while it has no summary)."""
    folder = sweep_dir / run.name
    summary = _summary(folder)
    if summary is None:
        return []
    final, privacy = summary.get("final") or {}, summary.get("privacy") or {}
    base = {
        "accuracy": final.get("accuracy"),
        "macro_f1": final.get("macro_f1"),
        "run_name": run.name,
        "results_folder": str(folder),
        "ldp_guarantee_holds": summary.get("ldp_guarantee_holds"),
        "evaluation_covered": summary.get("evaluation_covered", False),
    }
    if run.values.get("mode") == "central":
        z = run.values["central-noise-multiplier"]
        return [
            {
                **base,
                "series": "central",
                "parameter": "central-noise-multiplier",
                "value": z,
                "epsilon": privacy.get("epsilon"),
                "delta": privacy.get("delta"),
                "label_protected": True,
            }
        ]
    labels = bool(privacy.get("label_protected"))
    if run.values.get("sentence-mechanism") == "none":
        return [
            {
                **base,
                "series": "non-private",
                "parameter": "sentence-mechanism",
                "value": "none",
                "epsilon": None,
                "delta": None,
                "label_protected": labels,
            }
        ]
    eps = run.values["sentence-epsilon"]
    if summary.get("ldp_guarantee_holds") is not True:  # e.g. a leaky M1: no local epsilon to report
        privacy = {}
    # Only a protected label makes the local figure a whole-record epsilon, comparable with central DP.
    ldp = privacy.get("epsilon_total") if labels else None
    shuffled = privacy.get("epsilon_shuffled_joint_total") if labels else None
    shuffled_delta = privacy.get("delta_shuffled_joint_total") if labels else None
    return [
        {
            **base,
            "series": "local-ldp",
            "parameter": "sentence-epsilon",
            "value": eps,
            "epsilon": ldp,
            "delta": privacy.get("delta_total", 0.0) if labels else None,
            "label_protected": labels,
            "epsilon_embedding_only": privacy.get("epsilon_ldp"),
        },
        {
            **base,
            "series": "local-shuffled",
            "parameter": "sentence-epsilon",
            "value": eps,
            "epsilon": shuffled,
            "delta": shuffled_delta,
            "label_protected": labels,
            "epsilon_embedding_only": privacy.get("epsilon_shuffled_total"),
        },
    ]


def write(rows: Sequence[Mapping[str, Any]], sweep_dir: Path, title: str) -> tuple[Path, Path]:
    """``compare.csv`` and ``compare.png`` in ``sweep_dir``."""
    csv_path = sweep_dir / "compare.csv"
    with csv_path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows({k: _cell(r.get(k)) for k in COLUMNS} for r in rows)
    return csv_path, plot(rows, sweep_dir / "compare.png", title)


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def _points(rows: Sequence[Mapping[str, Any]], series: str, key: str) -> list[tuple[float, float]]:
    return sorted(
        (r[key], r["accuracy"])
        for r in rows
        if r["series"] == series
        and r.get(key) is not None
        and r.get("accuracy") is not None
        and math.isfinite(r[key])
        and r[key] > 0
    )


def plot(rows: Sequence[Mapping[str, Any]], path: Path, title: str) -> Path:
    """Accuracy against epsilon (log x) for local (by epsilon0 and shuffled) and central DP.

    Only whole-record epsilons share the axis. Local runs with labels in the clear
    (``epsilon`` empty, ``epsilon_embedding_only`` set) go to a second panel labelled
    "labels in the clear": their figure protects the embedding only.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    styles = {
        "local-ldp": ("o-", "local DP: per-user epsilon0 (pure, embedding + label)"),
        "local-shuffled": ("s--", "local DP: shuffled central epsilon (estimate)"),
        "central": ("^-", "central DP (DP-FedAvg)"),
    }
    clear = any(r.get("label_protected") is False and r.get("epsilon_embedding_only") is not None for r in rows)
    if clear:
        fig, (ax, ax_clear) = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
        for series, (style, label) in styles.items():
            points = _points([r for r in rows if r.get("label_protected") is False], series, "epsilon_embedding_only")
            if points:
                ax_clear.plot(*zip(*points, strict=True), style, color="gray", label=label.split(" (")[0])
        ax_clear.set_xscale("log")
        ax_clear.set_title(
            "labels in the clear: embedding-only epsilon,\nnot a whole-record guarantee", fontsize=8, color="crimson"
        )
        ax_clear.set_xlabel("epsilon of the embedding alone (log scale)")
        ax_clear.grid(alpha=0.3, which="both")
        ax_clear.legend(fontsize=7, loc="best")
    else:
        fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for series, (style, label) in styles.items():
        points = _points(rows, series, "epsilon")
        if points:
            ax.plot(*zip(*points, strict=True), style, label=label)
    for r in rows:
        if r["series"] == "non-private" and r.get("accuracy") is not None:
            ax.axhline(r["accuracy"], color="gray", linestyle=":", label="no privacy")
    ax.set_xscale("log")
    ax.set_xlabel("whole-record epsilon (log scale; delta in compare.csv)")
    ax.set_ylabel("final test accuracy")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def compare(
    config: str,
    epsilons: Sequence[str],
    multipliers: Sequence[str],
    sets: Sequence[str],
    central_sets: Sequence[str],
    out: str,
    name: str | None = None,
    timeout: float | None = None,
    progress: bool = True,
) -> int:
    """The ``sanitas compare`` command; returns 0 when every run finished, 1 otherwise."""
    runs = plan(epsilons, multipliers, central_sets)
    sweep_dir = Path(out).expanduser().resolve() / (name or f"{Path(config).stem}-compare")
    sw.check_runs(config, runs, sets, sweep_dir)
    print(f"sanitas: comparison of {len(runs)} runs into {sweep_dir}", flush=True)

    def runner(run: sw.Run, log_path: Path) -> sw.Outcome:
        return sw.execute(sw.run_command(config, run, sets, sweep_dir), log_path, timeout)

    finished = sw.run_sweep(runs, sweep_dir, runner, progress=progress)
    rows = [row for run in runs for row in rows_for(run, sweep_dir)]
    csv_path, png = write(rows, sweep_dir, f"{Path(config).stem}: local vs central DP")
    print(f"sanitas: {csv_path} and {png}", flush=True)
    return 0 if all(r["status"] == "ok" for r in finished) else 1
