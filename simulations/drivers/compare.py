"""``sanitas compare``: local DP vs central DP at the same per-user privacy unit, on one axis.

::

    sanitas compare CONFIG.toml [--epsilons 1,3.14,6.28] [--central-epsilons 0.5,1,2,4,8]
                    [--label-share auto|0.1] [--labels-clear] [--seeds 1,2,3] [--node-multipliers 1.0,2.0]
                    [--set key=value ...] [--central-set key=value ...] --out DIR [--name NAME]

Runs, all from the same config (same data, users, rounds), once per seed
(``seed`` and ``noise-seed`` both set to it):

* local DP: one run per whole-record pure epsilon ``E`` per user (``--epsilons``): the label goes
  through the config's label mechanism (randomized response when the config has none) at
  ``--label-share`` of ``E`` (``auto``: the share the config's recipe scores best with on the
  public data, :mod:`fl.maps.recipes`), the rest through the sentence mechanism
  (``sentence-epsilon`` = the rest over its pure cost per unit). Every local point is thus a
  whole-record guarantee on the axis it shares with central DP;
* with ``--labels-clear``, the same budgets spent on the embedding alone, labels in the clear: an
  embedding-only figure, drawn in a panel of its own, never on the shared axis;
* central DP, user level (``central-unit = "user"``): one run per target per-user epsilon, at the
  noise multiplier the accountant finds for it (``fl.accounting.user_level.noise_for_user_epsilon``
  for the run's ``q``, rounds and delta; never typed by hand). The delta is ``central-delta``, or
  by default 1 / (10 N) for the largest population over the seeds (at most 1e-5), written into
  every central run so that its account uses the delta its noise was calibrated for;
* central DP, node level (``--node-multipliers``, optional): DP-FedAvg over whole nodes at those
  noise multipliers (its figure holds per user too);
* a non-private reference (``sentence-mechanism = "none"``, labels in the clear): the same pipeline.

Every run is an ordinary ``sanitas run`` (through :mod:`simulations.drivers.sweep`, so an interrupted
comparison resumes). The x-axis is the privacy of **one user**:

* ``local-ldp``: the per-user pure-LDP epsilon0 of the whole record (embedding + label), with the
  metric epsilon per unit distance beside it (``metric_epsilon``);
* ``local-shuffled``: the shuffle-amplified central epsilon of the same run (a what-if: it needs a
  trusted shuffler);
* ``central-user`` / ``central-node``: the (epsilon, delta) the run's own accountant printed.

Every local point carries its ceiling (:mod:`fl.accounting.analysis.ceiling`), at the pure epsilon
its test release spends (``test_release_epsilon``): ``ceiling_bound``, the most any classifier of
a sanitized input can reach, and ``ceiling_public_rr``, the public classifier's class sent with
K-ary randomized response (the public classifier's test accuracy per seed is in compare.json).

Outputs in the comparison folder: ``compare.csv`` (one row per point: mean and sd over seeds, n),
``compare.json`` (the points, every run, the noise found per target, the label shares, the starts)
and ``compare.png`` (accuracy vs per-user epsilon, log x, error bars, the ceilings, the non-private
line and the majority-class rate).
"""

from __future__ import annotations

import csv
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fl import config as config_mod
from simulations.drivers import aggregate as agg
from simulations.drivers import sweep as sw
from simulations.runtime.overrides import split_override

#: Columns of compare.csv: one row per point (series, value), aggregated over seeds.
COLUMNS = (
    "series",
    "parameter",
    "value",
    "n",
    "seeds",
    "epsilon",
    "delta",
    "metric_epsilon",
    "noise_multiplier",
    "label_protected",
    "epsilon_embedding_only",
    "test_release_epsilon",
    "ceiling_bound",
    "ceiling_public_rr",
    "accuracy_mean",
    "accuracy_sd",
    "macro_f1_mean",
    "macro_f1_sd",
    "wall_seconds_mean",
    "start",
    "ldp_guarantee_holds",
    "evaluation_covered",
    "runs",
)
SEED_KEYS = sw.SEED_KEYS
#: Series whose privacy figure depends on the seed (the point reports the largest over the seeds).
SEED_DEPENDENT = ("local-shuffled", "local-shuffled-labels-clear", "central-user", "central-user-encoder")


def epsilon_list(values: Sequence[str], option: str) -> list[float]:
    """``--epsilons`` / ``--central-epsilons`` values as numbers: at least one, each > 0 and finite.

    Raises ``ConfigError`` naming the option and the value the user typed."""
    if not values:
        raise config_mod.ConfigError(f"{option} needs at least one epsilon, like 1,2,4")
    out = []
    for text in values:
        value = config_mod.parse_value(text.strip())
        if isinstance(value, bool) or not isinstance(value, int | float) or not (math.isfinite(value) and value > 0):
            raise config_mod.ConfigError(f"{option}: {text.strip()!r} is not an epsilon (a number > 0 and finite)")
        out.append(float(value))
    return out


def _axis(key: str, values: Sequence[str]) -> sw.GridAxis:
    texts = tuple(v.strip() for v in values)
    return sw.GridAxis(key, texts, tuple(config_mod.parse_value(t) for t in texts))


def _fixed(items: Sequence[str]) -> list[sw.GridAxis]:
    return [_axis(key, [value]) for key, value in (split_override(item, "--central-set") for item in items)]


def _seeded(runs: Sequence[sw.Run], seeds: Sequence[int]) -> list[sw.Run]:
    """Each run once per seed, with ``seed`` and ``noise-seed`` both set to it (paired, not crossed):
    :func:`simulations.drivers.sweep.with_seeds`, the names keeping both keys (``__seed=1__noise-seed=1``,
    the folders of comparisons already on disk)."""
    return sw.with_seeds(runs, seeds, name_keys=SEED_KEYS)


def plan(
    epsilons: Sequence[str] | Sequence[Mapping[str, Any]],
    central_noise: Mapping[float, float],
    seeds: Sequence[int],
    central_sets: Sequence[str] = (),
    node_multipliers: Sequence[str] = (),
    central_trains: Sequence[str] = ("head",),
    central_delta: float | None = None,
) -> list[sw.Run]:
    """The runs of a comparison, in this order: user-level central runs (one per target epsilon, at
    the noise ``central_noise[target]``, once per ``central_trains`` entry: ``"head"`` and/or
    ``"encoder"``), optional node-level runs, local points, the reference; each once per seed.
    With the head only (the default) the run names carry no ``central-train``.

    ``epsilons``: sentence epsilons (texts), or one mapping of run-config keys per local point (the
    keys that spend a whole-record budget: :func:`local_points`). ``central_delta``: the delta every
    central run accounts at (the one its noise was calibrated for), set in the runs when given."""
    if not epsilons or not central_noise:
        raise config_mod.ConfigError("compare needs at least one local epsilon and one central epsilon")
    if not seeds or len(set(seeds)) != len(seeds):
        raise config_mod.ConfigError(f"compare needs distinct seeds, got {list(seeds)}")
    noise = [f"{central_noise[t]:.6g}" for t in sorted(central_noise)]
    trains = [] if list(central_trains) == ["head"] else [[_axis("central-train", [f'"{t}"'])] for t in central_trains]
    if trains and any(split_override(item, "--central-set")[0] == "central-train" for item in central_sets):
        raise config_mod.ConfigError("set central-train with --central-trains or with --central-set, not both")
    delta = [] if central_delta is None else [_axis("central-delta", [f"{central_delta:.6g}"])]
    blocks = [
        [
            _axis("mode", ['"central"']),
            _axis("central-unit", ['"user"']),
            *train,
            *_fixed(central_sets),
            *delta,
            _axis("central-noise-multiplier", noise),
        ]
        for train in (trains or [[]])
    ]
    if node_multipliers:
        blocks.append(
            [
                _axis("mode", ['"central"']),
                _axis("central-unit", ['"node"']),
                *_fixed(central_sets),
                _axis("central-noise-multiplier", node_multipliers),
            ]
        )
    if all(isinstance(e, str) for e in epsilons):
        blocks.append([_axis("mode", ['"local"']), _axis("sentence-epsilon", [str(e) for e in epsilons])])
    else:
        for keys in epsilons:
            assert isinstance(keys, Mapping)
            blocks.append([_axis("mode", ['"local"']), *(_axis(k, [_text(v)]) for k, v in keys.items())])
    blocks.append(
        [_axis("mode", ['"local"']), _axis("sentence-mechanism", ['"none"']), _axis("label-mechanism", ['"none"'])]
    )
    return _seeded(sw.expand(blocks), seeds)


def _text(value: Any) -> str:
    """A run-config value as the TOML text of a grid axis."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, int):
        return str(value)
    return json.dumps(str(value))


def local_points(
    cfg: Mapping[str, Any],
    totals: Sequence[float],
    label_share: float | Mapping[float, float],
    input_dim: int,
    num_classes: int,
    labels_clear: bool = False,
) -> list[tuple[dict[str, Any], float]]:
    """The local runs' keys for whole-record pure epsilons ``totals`` per user: labels through the config's
    label mechanism (randomized response when it has none) at ``label_share`` of each total (one share,
    or one per total), the rest to the embedding (:func:`fl.maps.recipes.split_budget`); with
    ``labels_clear`` also each total spent on the embedding alone, labels in the clear (an
    embedding-only figure). Returns each point's keys with its whole-record epsilon."""
    from fl.maps import recipes

    protected = cfg["label-mechanism"] if cfg["label-mechanism"] != "none" else "rr"
    points: list[tuple[dict[str, Any], float]] = []
    for total in totals:
        share = label_share[total] if isinstance(label_share, Mapping) else float(label_share)
        trial = config_mod.as_run_config({**dict(cfg), "label-mechanism": protected})
        keys = {"label-mechanism": protected, **recipes.split_budget(trial, total, share, input_dim, num_classes)}
        variants = [keys]
        if labels_clear:
            clear = config_mod.as_run_config({**dict(cfg), "label-mechanism": "none"})
            variants.append(
                {"label-mechanism": "none", **recipes.split_budget(clear, total, share, input_dim, num_classes)}
            )
        for keys in variants:
            ordered = {k: keys[k] for k in ("sentence-epsilon", "label-mechanism", "label-epsilon") if k in keys}
            points.append((ordered, float(total)))
    return points


def point_total(run: sw.Run, points: Sequence[tuple[Mapping[str, Any], float]]) -> float | None:
    """The whole-record epsilon of the local point ``run`` is a run of (its keys as the grid wrote them)."""
    for keys, total in points:
        if all(k in run.values and _text(run.values[k]) == _text(v) for k, v in keys.items()):
            return total
    return None


def central_noise_table(
    targets: Sequence[float], sampling_rate: float, rounds: int, delta: float
) -> dict[float, float]:
    """Target per-user epsilon -> the noise multiplier the accountant finds for it (user level)."""
    import logging

    from fl.accounting.user_level import noise_for_user_epsilon

    absl = logging.getLogger("absl")  # dp-accounting's RDP search logs every order it skips, at INFO
    level = absl.level
    absl.setLevel(logging.WARNING)
    try:
        return {float(t): noise_for_user_epsilon(float(t), sampling_rate, int(rounds), float(delta)) for t in targets}
    finally:
        absl.setLevel(level)


def _summary(folder: Path) -> dict[str, Any] | None:
    try:
        return json.loads((folder / "summary.json").read_text())
    except (OSError, ValueError):
        return None


def _local_start(summary: Mapping[str, Any]) -> str:
    """Where a local run's server model started: from the public split's training, or seeded."""
    text = (summary.get("guarantee") or {}).get("sentence", {}).get("text", "")
    return "public-trained M1, M2 and classifier" if "trained on the public split" in text else "seeded start"


def rows_for(run: sw.Run, sweep_dir: Path, targets: Mapping[str, float] | None = None) -> list[dict[str, Any]]:
    """The comparison rows of one finished run (none while it has no summary). ``targets`` maps a
    user-level central run's name to the per-user epsilon its noise was calibrated for."""
    folder = sweep_dir / run.name
    summary = _summary(folder)
    if summary is None:
        return []
    final, privacy = summary.get("final") or {}, summary.get("privacy") or {}
    base = {
        "accuracy": final.get("accuracy"),
        "macro_f1": final.get("macro_f1"),
        "seed": run.values.get("seed"),
        "wall_seconds": summary.get("wall_seconds"),
        "run_name": run.name,
        "results_folder": str(folder),
        "ldp_guarantee_holds": summary.get("ldp_guarantee_holds"),
        "evaluation_covered": summary.get("evaluation_covered", False),
        "training_moved": (summary.get("outcome") or {}).get("training_moved"),
    }
    if run.values.get("mode") == "central":
        unit = run.values.get("central-unit", "user")
        z = run.values["central-noise-multiplier"]
        encoder = "-encoder" if run.values.get("central-train") == "encoder" else ""
        return [
            {
                **base,
                "series": f"central-{unit}{encoder}",
                "parameter": "target-epsilon" if unit == "user" else "central-noise-multiplier",
                "value": (targets or {}).get(run.name, z) if unit == "user" else z,
                "noise_multiplier": z,
                "epsilon": privacy.get("epsilon"),
                "delta": privacy.get("delta"),
                "label_protected": True,
                "start": summary.get("start", ""),
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
                "start": _local_start(summary),
            }
        ]
    eps = run.values["sentence-epsilon"]
    total = (targets or {}).get(run.name)  # the whole-record budget the point was planned for
    release = ((summary.get("guarantee") or {}).get("sentence") or {}).get("pure_ldp_per_release")
    if summary.get("ldp_guarantee_holds") is not True:  # e.g. a leaky M1: no local epsilon to report
        privacy = {}
    # Only a protected label makes the local figure a whole-record epsilon, comparable with central DP.
    ldp = privacy.get("epsilon_total") if labels else None
    shuffled = privacy.get("epsilon_shuffled_joint_total") if labels else None
    shuffled_delta = privacy.get("delta_shuffled_joint_total") if labels else None
    local = {
        **base,
        "parameter": "sentence-epsilon" if total is None else "whole-record-epsilon",
        "value": eps if total is None else total,
        "label_protected": labels,
        "test_release_epsilon": release,  # what a test user's sanitized input spends: the ceiling's epsilon
    }
    local["metric_epsilon"] = eps if privacy else None
    local["start"] = _local_start(summary)
    clear = "" if labels else "-labels-clear"
    return [
        {
            **local,
            "series": f"local-ldp{clear}",
            "epsilon": ldp,
            "delta": privacy.get("delta_total", 0.0) if labels else None,
            "epsilon_embedding_only": privacy.get("epsilon_ldp"),
        },
        {
            **local,
            "series": f"local-shuffled{clear}",
            "epsilon": shuffled,
            "delta": shuffled_delta,
            "epsilon_embedding_only": privacy.get("epsilon_shuffled_total"),
        },
    ]


def _stats(values: Sequence[Any]) -> tuple[float | None, float | None]:
    mean, sd, _ = agg.mean_sd(values)
    return mean, sd


def aggregate(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One point per (series, value): mean and sample sd over seeds (:mod:`simulations.drivers.aggregate`) of
    accuracy, macro-F1 and wall time; the privacy figures, which do not depend on the seed, from
    the first run (checked equal; a shuffled figure, which depends on how many users the seed
    sampled, is the largest over the seeds)."""
    points = []
    for (series, value), members in agg.group(rows, lambda r: (r["series"], r["value"])).items():
        first = dict(members[0])
        eps = agg.finite(m.get("epsilon") for m in members)
        if series in SEED_DEPENDENT and eps:
            # The number of shuffled reports depends on the seeded user sampling, and a user-level
            # central run's q on the seed's population (the public split is drawn per seed), so the
            # seeds' figures differ slightly: the point gets the largest, the bound every seed's run meets.
            first["epsilon"] = max(eps)
        elif agg.differing(members, ["epsilon"]):
            raise ValueError(f"{series} at {value}: the seeds' runs report different epsilons {sorted(eps)}")
        acc, acc_sd = _stats([m.get("accuracy") for m in members])
        ceiling_rr, _ = _stats([m.get("ceiling_public_rr") for m in members])
        f1, f1_sd = _stats([m.get("macro_f1") for m in members])
        wall, _ = _stats([m.get("wall_seconds") for m in members])
        moved = [m.get("training_moved") for m in members if m.get("training_moved") is not None]
        points.append(
            {
                "series": series,
                "parameter": first["parameter"],
                "value": value,
                "n": len(members),
                "seeds": " ".join(str(m.get("seed")) for m in members),
                **{
                    k: first.get(k)
                    for k in (
                        "epsilon",
                        "delta",
                        "metric_epsilon",
                        "noise_multiplier",
                        "label_protected",
                        "epsilon_embedding_only",
                        "test_release_epsilon",
                        "ceiling_bound",
                        "start",
                        "ldp_guarantee_holds",
                        "evaluation_covered",
                    )
                },
                "ceiling_public_rr": ceiling_rr,
                "accuracy_mean": acc,
                "accuracy_sd": acc_sd,
                "macro_f1_mean": f1,
                "macro_f1_sd": f1_sd,
                "wall_seconds_mean": wall,
                "training_moved": all(moved) if moved else None,  # False: some seed's scores never moved
                "runs": " ".join(m["run_name"] for m in members),
            }
        )
    return points


def write(
    points: Sequence[Mapping[str, Any]],
    sweep_dir: Path,
    title: str,
    random_guess: float | None = None,
    extra: Mapping[str, Any] | None = None,
    rows: Sequence[Mapping[str, Any]] = (),
    baseline: str = "random guess",
) -> tuple[Path, Path, Path]:
    """``compare.csv``, ``compare.json`` and ``compare.png`` in ``sweep_dir``."""
    csv_path = sweep_dir / "compare.csv"
    with csv_path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows({k: _cell(p.get(k)) for k in COLUMNS} for p in points)
    json_path = sweep_dir / "compare.json"
    document = {**dict(extra or {}), "random_guess_accuracy": random_guess, "points": list(points), "runs": list(rows)}
    json_path.write_text(json.dumps(document, indent=2, default=str) + "\n")
    return csv_path, json_path, plot(points, sweep_dir / "compare.png", title, random_guess, baseline)


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def _points(points: Sequence[Mapping[str, Any]], series: str, key: str) -> list[tuple[float, float, float, int]]:
    """(x, mean accuracy, sd or 0, n) of one series, sorted by x; only finite positive x."""
    return sorted(
        (p[key], p["accuracy_mean"], p.get("accuracy_sd") or 0.0, int(p.get("n") or 1))
        for p in points
        if p["series"] == series
        and p.get(key) is not None
        and p.get("accuracy_mean") is not None
        and math.isfinite(p[key])
        and p[key] > 0
    )


STYLES = {
    "local-ldp": ("o", "-", "local DP: per-user pure epsilon0 (embedding + label)"),
    "local-shuffled": ("s", "--", "local DP, shuffled: central epsilon (what-if, needs a shuffler)"),
    "local-ldp-labels-clear": ("o", "-", "local DP, labels in the clear: embedding-only epsilon"),
    "local-shuffled-labels-clear": ("s", "--", "local DP, labels in the clear, shuffled (embedding only)"),
    "central-user": ("^", "-", "central DP, user level (DP-FedAvg, Poisson users)"),
    "central-user-encoder": ("D", "-", "central DP, user level, encoder trained too (LoRA + head)"),
    "central-node": ("v", ":", "central DP, node level (DP-FedAvg over nodes)"),
}


def _draw(ax: Any, points: Sequence[Mapping[str, Any]], key: str, gray: bool = False) -> None:
    for series, (marker, line, label) in STYLES.items():
        pts = _points(points, series, key)
        if not pts:
            continue
        x, y, sd, n = zip(*pts, strict=True)
        kwargs = {"color": "gray"} if gray else {}
        # a one-seed point: hollow marker, no error bar
        agg.draw_errorbars(ax, x, y, sd, n, marker=marker, linestyle=line, label=label, **kwargs)


def _draw_ceiling(ax: Any, points: Sequence[Mapping[str, Any]], series: str, key: str) -> None:
    """The ceiling beside a local series: the pure-LDP bound of its test release and the achievable public
    class + K-RR point, at the series' x."""
    rows = sorted(
        (p[key], p.get("ceiling_bound"), p.get("ceiling_public_rr"))
        for p in points
        if p["series"] == series and p.get(key) is not None and p.get("ceiling_bound") is not None
    )
    if not rows:
        return
    x, bound, public_rr = zip(*rows, strict=True)
    ax.plot(
        x,
        bound,
        color="black",
        linestyle=(0, (4, 2)),
        marker="_",
        linewidth=1,
        label="ceiling: best classifier of a sanitized input (pure-LDP bound)",
    )
    if all(v is not None for v in public_rr):
        ax.plot(
            x,
            public_rr,
            color="darkgreen",
            linestyle=":",
            marker="x",
            linewidth=1,
            label="achievable: public model's class + K-ary RR",
        )


def plot(
    points: Sequence[Mapping[str, Any]],
    path: Path,
    title: str,
    random_guess: float | None = None,
    baseline: str = "random guess",
) -> Path:
    """Accuracy (mean +- sd over seeds; hollow markers: one seed) against per-user epsilon (log x) for
    local DP (epsilon0 and shuffled) and central DP, with the non-private and baseline lines (the
    majority-class rate) and each local point's ceiling.

    Only whole-record epsilons share the axis; local runs with labels in the clear go to a second
    panel labelled "labels in the clear" (their figure protects the embedding only).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    clear = [p for p in points if p.get("label_protected") is False and p.get("epsilon_embedding_only") is not None]
    if clear:
        fig, (ax, ax_clear) = plt.subplots(1, 2, figsize=(13, 5), sharey=True)
        _draw(ax_clear, clear, "epsilon_embedding_only", gray=True)
        ax_clear.set_xscale("log")
        ax_clear.set_title(
            "labels in the clear: embedding-only epsilon,\nnot a whole-record guarantee", fontsize=8, color="crimson"
        )
        ax_clear.set_xlabel("epsilon of the embedding alone (log scale)")
        ax_clear.grid(alpha=0.3, which="both")
    else:
        fig, ax = plt.subplots(figsize=(8, 5))
    _draw(ax, points, "epsilon")
    _draw_ceiling(ax, points, "local-ldp", "epsilon")
    if clear:
        _draw_ceiling(ax_clear, points, "local-ldp-labels-clear", "epsilon_embedding_only")
    reference = [p for p in points if p["series"] == "non-private" and p.get("accuracy_mean") is not None]
    for p in reference:
        sd = f" +- {p['accuracy_sd']:.3f}" if p.get("accuracy_sd") is not None else ""
        ax.axhline(p["accuracy_mean"], color="gray", linestyle=":", label=f"non-private {p['accuracy_mean']:.3f}{sd}")
    if random_guess is not None:
        ax.axhline(random_guess, color="crimson", linestyle="-.", alpha=0.6, label=f"{baseline} {random_guess:.3f}")
        if baseline == "majority class":
            from simulations.drivers.findings import mark_not_learned, not_learned

            flat = [p for p in not_learned(points, random_guess) if p.get("epsilon") is not None]
            mark_not_learned(ax, [p["epsilon"] for p in flat], [p["accuracy_mean"] for p in flat])
    ax.set_xscale("log")
    ax.set_xlabel("per-user epsilon (log scale; delta in compare.csv)")
    ax.set_ylabel("final test accuracy (mean +- sd over seeds)")
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
    central_epsilons: Sequence[str],
    seeds: Sequence[str],
    sets: Sequence[str],
    central_sets: Sequence[str],
    out: str,
    name: str | None = None,
    node_multipliers: Sequence[str] = (),
    central_trains: Sequence[str] = ("head",),
    timeout: float | None = None,
    progress: bool = True,
    attacks: Sequence[str] = (),
    collect: bool = False,
    jobs: int = 1,
    label_share: str = "auto",
    labels_clear: bool = False,
    central_check: bool = True,
) -> int:
    """The ``sanitas compare`` command; returns 0 when every run finished, 1 otherwise.

    ``epsilons`` are whole-record pure epsilons per user (embedding + label): each local point
    protects its label (the config's label mechanism, or randomized response) at ``label_share`` of
    the budget (``"auto"``: chosen on the public data by :mod:`fl.maps.recipes`, never on private or
    test data), so it sits on the central axis. ``labels_clear`` adds the same budgets spent on the
    embedding alone, labels in the clear, drawn apart (an embedding-only figure). Every local point
    gets its ceiling (:mod:`fl.accounting.analysis.ceiling`).

    ``collect``: run nothing; tabulate the plan's runs that already have a summary, name the
    missing ones on stderr, and return 0 (the table says n per point).

    ``central_check``: before anything runs, emulate each user-level central point on the central runs'
    public data (:mod:`simulations.drivers.central_check`) and refuse points that learn nothing there, naming
    what to change.

    ``attacks``: then run those attacks on every finished run (``simulations.analyses.attack``: attacks.csv and
    attacks_vs_epsilon.png in the comparison folder)."""
    from fl.accounting.delta import population_delta
    from fl.accounting.user_level import sampling_rate
    from fl.cohort import population_sizes

    totals = epsilon_list(epsilons, "--epsilons")
    trains = [t.strip() for t in central_trains]
    allowed = config_mod.CHOICES["central-train"]
    if not trains or any(t not in allowed for t in trains) or len(set(trains)) != len(trains):
        raise config_mod.ConfigError(f"--central-trains takes distinct values of {allowed}, got {','.join(trains)!r}")
    targets = sorted(set(epsilon_list(central_epsilons, "--central-epsilons")))
    seed_list = sw.parse_seeds(list(seeds))
    sweep_dir = Path(out).expanduser().resolve() / (name or f"{Path(config).stem}-compare")
    local_cfg = config_mod.as_run_config(sw.resolve_run(config, sw.Run("probe", {}, {}), sets, sweep_dir))
    _check_label_share(local_cfg, label_share)  # one line, before any work
    central_cfg = sw.resolve_run(config, sw.Run("probe", {}, {}), [*sets, *central_sets], sweep_dir)
    # The population (hence q) depends on the seed (the public split is drawn per seed): the noise is
    # calibrated at the largest q over the seeds, so every seed's run meets each target, and at the
    # delta of the largest population (the smallest delta, so delta < 1/N for every seed).
    populations = {s: population_sizes(central_cfg.replace(seed=s))[0] for s in seed_list}
    num_users = min(populations.values())
    q = sampling_rate(float(central_cfg["central-cohort-size"]), num_users)
    rounds = int(central_cfg["num-server-rounds"])
    delta = population_delta(float(central_cfg["central-delta"]), max(populations.values()))
    print(
        f"sanitas: calibrating the noise for per-user epsilon {targets} (q = {q:.4g}, the largest over the seeds' "
        f"{sorted(set(populations.values()))} users; {rounds} rounds; delta {delta:.3g})",
        flush=True,
    )
    noise = central_noise_table(targets, q, rounds, delta)
    num_classes, dim, public = _local_context(local_cfg, seed_list[0])
    shares = _label_shares(local_cfg, totals, label_share, public, num_classes)
    points = local_points(local_cfg, totals, shares, _map_dim(local_cfg, dim), num_classes, labels_clear)
    runs = plan([keys for keys, _ in points], noise, seed_list, central_sets, node_multipliers, trains, delta)
    by_noise = {f"{z:.6g}": t for t, z in noise.items()}
    run_targets = {
        r.name: by_noise[f"{r.values['central-noise-multiplier']:.6g}"]
        for r in runs
        if r.values.get("mode") == "central" and r.values.get("central-unit") == "user"
    }
    for r in runs:
        total = point_total(r, points) if r.values.get("mode") == "local" else None
        if total is not None:
            run_targets[r.name] = total
    sw.check_runs(config, runs, sets, sweep_dir)
    checked: dict[str, Any] = {"unchecked": "--central-check off"}
    if central_check and not collect and any(r.values.get("central-unit") == "user" for r in runs):
        from simulations.drivers.central_check import check_central_points

        checked = check_central_points(central_cfg, noise, seed_list[0])  # refuses before anything runs
        note = checked.get("unchecked") or (
            f"learn on public data ({len(checked['emulations'])} emulated, server-learning-rate "
            f"{checked['server_learning_rate']:g})"
        )
        print(f"sanitas: central points: {note}", flush=True)
    if collect:
        missing = [r.name for r in runs if _summary(sweep_dir / r.name) is None]
        print(f"sanitas: collecting {len(runs) - len(missing)} of {len(runs)} runs from {sweep_dir}", flush=True)
        for run_name in missing:
            print(f"sanitas: not run yet: {run_name}", file=sys.stderr)
        finished = [{"status": "ok"}]
        if len(missing) == len(runs):
            raise config_mod.ConfigError(f"--collect: none of the {len(runs)} runs has finished in {sweep_dir}")
    else:
        print(f"sanitas: comparison of {len(runs)} runs into {sweep_dir}", flush=True)

        from simulations.runtime.warm import WarmPool

        with WarmPool(jobs) as pool:
            runner = sw.warm_runner(config, sets, sweep_dir, pool, timeout)
            shared = sw.shared_runner(config, sets, sweep_dir, pool, timeout)
            finished = sw.run_sweep(runs, sweep_dir, runner, progress=progress, jobs=jobs, shared=shared)
    rows = [row for run in runs for row in rows_for(run, sweep_dir, run_targets)]
    priors, public_accuracy = _ceiling_inputs(local_cfg, seed_list, rows)
    add_ceilings(rows, priors, public_accuracy)
    points_out = aggregate(rows)
    extra = {
        "config": str(config),
        "sets": list(sets),
        "central_sets": list(central_sets),
        "users": num_users,
        "users_by_seed": {str(k): v for k, v in populations.items()},
        "sampling_rate": q,
        "rounds": rounds,
        "central_delta": delta,
        "noise_for_target_epsilon": {str(t): z for t, z in noise.items()},
        "label_share": {f"{t:g}": shares[t] for t in totals},
        "label_share_chosen_on": "public data (fl.maps.recipes)" if label_share == "auto" else "given (--label-share)",
        "public_model_accuracy": {str(k): v for k, v in public_accuracy.items()},
        "test_class_priors": priors,
        "seeds": list(seeds),
        "central_check": checked,
    }
    majority = max(priors) if priors else None  # the rate a model that learned nothing reaches
    csv_path, json_path, png = write(
        points_out,
        sweep_dir,
        f"{Path(config).stem}: local vs central DP per user (whole record)",
        majority,
        extra,
        rows,
        "majority class",
    )
    from simulations.drivers.findings import print_findings

    print_findings(points_out, majority, f"{Path(config).stem}: local vs central DP per user")
    print(f"sanitas: {csv_path}, {json_path} and {png}", flush=True)
    if attacks:
        from simulations.analyses.attack import attack_folder

        attack_folder(sweep_dir, attacks)
        print(f"sanitas: attacks in {sweep_dir / 'attacks.csv'}", flush=True)
    return 0 if all(r["status"] == "ok" for r in finished) else 1


def _map_dim(cfg: config_mod.RunConfig, d: int) -> int:
    from fl.maps.input_map import map_dim

    return map_dim(cfg.release, d)


def _local_context(cfg: config_mod.RunConfig, seed: int) -> tuple[int, int, Any]:
    """(number of classes, the encoder's dimension d, the public documents or None) of the run at ``seed``."""
    from fl.data import datasets as data

    seeded = cfg.replace(seed=seed)
    loaded = data.load(seeded)
    dim = int(getattr(loaded, "dim", 0)) or config_mod.ENCODER_DIMS.get(str(cfg["encoder"]), 0)
    if not dim:
        from fl.encoding.encoder import encoder_dimension

        dim = int(encoder_dimension(str(cfg["encoder"])))
    return int(loaded.num_classes), dim, getattr(loaded, "public", None)


def _check_label_share(cfg: config_mod.RunConfig, label_share: str) -> None:
    """``--label-share``: ``auto`` (needs public data) or a number in (0, 1)."""
    if label_share != "auto":
        value = config_mod.parse_value(label_share)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
            raise config_mod.ConfigError(f"--label-share must be 'auto' or a number in (0, 1), got {label_share!r}")
    elif not config_mod.has_public(cfg):
        raise config_mod.ConfigError(
            "--label-share auto chooses the label's share of the budget on public data, and the config has none "
            "(public-fraction = 0, no public-dataset): give --label-share, like 0.1"
        )


def _label_shares(
    cfg: config_mod.RunConfig, totals: Sequence[float], label_share: str, public: Any, num_classes: int
) -> dict[float, float]:
    """The label's share of each whole-record budget: the given number, or (``auto``) the share of
    ``fl.maps.recipes.LABEL_SHARES`` the config's own recipe scores best with on the public data."""
    if label_share != "auto":  # checked by _check_label_share where compare starts
        return {t: float(config_mod.parse_value(label_share)) for t in totals}
    import torch

    from fl.encoding.public_tuning import with_tuned_encoder
    from fl.maps import recipes
    from fl.maps.public_start import public_embeddings

    tuned = with_tuned_encoder(cfg)
    x, y = public_embeddings(tuned, torch.device("cpu"))
    from fl.cohort import population_sizes

    users = population_sizes(tuned)[0]
    keys = {k: cfg[k] for k in ("map-in", "map-dim", "map-scale", "map-seed", "sentence-mechanism", "sentence-options")}
    keys["label-mechanism"] = cfg["label-mechanism"] if cfg["label-mechanism"] != "none" else "rr"
    grid = [recipes.Candidate(f"label-share {s:g}", keys, s) for s in recipes.LABEL_SHARES]
    out = {}
    for total in totals:
        best, _ = recipes.choose(tuned, total, x, y, num_classes, users, candidates=grid)
        out[total] = best.candidate.label_share
        print(f"sanitas: label share {out[total]:g} of epsilon {total:g}, chosen on public data", flush=True)
    return out


def _ceiling_inputs(
    cfg: config_mod.RunConfig, seeds: Sequence[int], rows: Sequence[Mapping[str, Any]]
) -> tuple[list[float], dict[int, float]]:
    """The test split's class frequencies and, per seed, the public classifier's test accuracy (the
    logistic regression the supervised map is made of, on the run's encoder): what the ceiling needs.
    The accuracy is a reference figure scored like every run's accuracy, never used to choose anything."""
    from fl.data import datasets as data

    loaded = data.load(cfg.replace(seed=seeds[0]))
    if not isinstance(loaded, data.TextDataset):
        return [], {}
    counts = np.bincount(np.asarray(loaded.test["label"][:], dtype=np.int64), minlength=loaded.num_classes)
    priors = (counts / counts.sum()).tolist()
    if loaded.public is None or not any(r["series"].startswith("local-ldp") for r in rows):
        return priors, {}
    import torch

    from fl.encoding.encoder import embed_texts
    from fl.encoding.public_tuning import with_tuned_encoder
    from fl.maps.input_map import logistic_directions
    from mechanisms.class_rr import logit_class

    accuracy = {}
    for seed in seeds:
        seeded = with_tuned_encoder(cfg.replace(seed=seed))
        ds = data.load(seeded)
        assert isinstance(ds, data.TextDataset) and ds.public is not None
        xp = np.asarray(embed_texts(ds.public["text"][:], seeded, "cpu", progress=False))
        xt = np.asarray(embed_texts(ds.test["text"][:], seeded, "cpu", progress=False))
        a, b = logistic_directions(xp, np.asarray(ds.public["label"][:]), ds.num_classes)
        pred = logit_class(torch.as_tensor(xt @ a + b), ds.num_classes).numpy()
        accuracy[seed] = float((pred == np.asarray(ds.test["label"][:])).mean())
    return priors, accuracy


def add_ceilings(rows: Sequence[dict[str, Any]], priors: Sequence[float], public_accuracy: Mapping[int, float]) -> None:
    """Each local row's ceiling at its test release's pure epsilon: the bound on any classifier of a
    sanitized input (``ceiling_bound``) and the public class + K-ary RR point (``ceiling_public_rr``)."""
    from fl.accounting.analysis.ceiling import accuracy_ceiling, public_rr_accuracy

    for row in rows:
        eps = row.get("test_release_epsilon")
        if not row["series"].startswith("local-") or eps is None or not priors or not math.isfinite(eps):
            continue
        row["ceiling_bound"] = accuracy_ceiling(float(eps), priors)
        acc = public_accuracy.get(row.get("seed"))  # type: ignore[arg-type]
        if acc is not None:
            row["ceiling_public_rr"] = public_rr_accuracy(float(eps), len(priors), acc)
