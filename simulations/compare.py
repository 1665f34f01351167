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

* ``local-ldp``: x = the per-user pure-LDP epsilon0 of the run (embedding, plus
  label when labels are protected), the guarantee every user has against the server;
* ``local-shuffled``: x = the shuffle-amplified central epsilon of the same run
  (Feldman et al. 2021; what a trusted shuffler would give, an estimate);
* ``central``: x = the central (epsilon, delta) of DP-FedAvg (dp-accounting);
* ``non-private``: no epsilon (a horizontal line).

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

COLUMNS = ("series", "parameter", "value", "epsilon", "delta", "accuracy", "macro_f1", "run_name", "results_folder")


def _axis(key: str, values: Sequence[str]) -> sw.GridAxis:
    texts = tuple(v.strip() for v in values)
    return sw.GridAxis(key, texts, tuple(config_mod.parse_value(t) for t in texts))


def _fixed(items: Sequence[str]) -> list[sw.GridAxis]:
    axes = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise config_mod.ConfigError(f"--central-set expects key=value, got {item!r}")
        axes.append(_axis(key.strip(), [value]))
    return axes


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
    base = {"accuracy": final.get("accuracy"), "macro_f1": final.get("macro_f1"), "run_name": run.name,
            "results_folder": str(folder)}
    if run.values.get("mode") == "central":
        z = run.values["central-noise-multiplier"]
        return [{**base, "series": "central", "parameter": "central-noise-multiplier", "value": z,
                 "epsilon": privacy.get("epsilon"), "delta": privacy.get("delta")}]
    if run.values.get("sentence-mechanism") == "none":
        return [{**base, "series": "non-private", "parameter": "sentence-mechanism", "value": "none",
                 "epsilon": None, "delta": None}]
    eps = run.values["sentence-epsilon"]
    joint = privacy.get("label_protected") and privacy.get("epsilon_shuffled_joint_total") is not None
    ldp = privacy.get("epsilon_total") if privacy.get("label_protected") else privacy.get("epsilon_ldp")
    shuffled = privacy.get("epsilon_shuffled_joint_total" if joint else "epsilon_shuffled_total")
    shuffled_delta = privacy.get("delta_shuffled_joint_total" if joint else "delta_shuffled_total")
    return [
        {**base, "series": "local-ldp", "parameter": "sentence-epsilon", "value": eps, "epsilon": ldp,
         "delta": privacy.get("delta_total", 0.0)},
        {**base, "series": "local-shuffled", "parameter": "sentence-epsilon", "value": eps, "epsilon": shuffled,
         "delta": shuffled_delta},
    ]


def write(rows: Sequence[Mapping[str, Any]], sweep_dir: Path, title: str) -> tuple[Path, Path]:
    """``compare.csv`` and ``compare.png`` in ``sweep_dir``."""
    csv_path = sweep_dir / "compare.csv"
    with csv_path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows({k: ("" if r.get(k) is None else r.get(k)) for k in COLUMNS} for r in rows)
    return csv_path, plot(rows, sweep_dir / "compare.png", title)


def plot(rows: Sequence[Mapping[str, Any]], path: Path, title: str) -> Path:
    """Accuracy against epsilon (log x) for local (by epsilon0 and shuffled) and central DP."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    styles = {
        "local-ldp": ("o-", "local DP: per-user epsilon0 (pure)"),
        "local-shuffled": ("s--", "local DP: shuffled central epsilon (estimate)"),
        "central": ("^-", "central DP (DP-FedAvg, user-level)"),
    }
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for series, (style, label) in styles.items():
        points = sorted(
            (r["epsilon"], r["accuracy"]) for r in rows
            if r["series"] == series and r.get("epsilon") is not None and r.get("accuracy") is not None
            and math.isfinite(r["epsilon"]) and r["epsilon"] > 0
        )
        if points:
            ax.plot(*zip(*points, strict=True), style, label=label)
    for r in rows:
        if r["series"] == "non-private" and r.get("accuracy") is not None:
            ax.axhline(r["accuracy"], color="gray", linestyle=":", label="no privacy")
    ax.set_xscale("log")
    ax.set_xlabel("epsilon (log scale; delta in compare.csv)")
    ax.set_ylabel("final test accuracy")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def compare(config: str, epsilons: Sequence[str], multipliers: Sequence[str], sets: Sequence[str],
            central_sets: Sequence[str], out: str, name: str | None = None, timeout: float | None = None,
            progress: bool = True) -> int:
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
