"""What ``sanitas compare`` reads and writes: each run's rows from its results folder, the points (mean and sd
over seeds), ``compare.csv`` / ``compare.json`` and ``compare.png``. Part of :mod:`simulations.drivers.compare`."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fl.reporting.outcome import adds_over_public
from simulations.drivers.compare_plot import plot
from simulations.drivers.grid import Run
from simulations.outputs import aggregate as agg
from simulations.outputs.writers import read_json, text_cell, write_csv

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
    "map_dims",
    "noise_free_ceiling_accuracy",
    "noise_free_ceiling_gain_over_public",
    "test_inputs",
    "accuracy_mean",
    "accuracy_sd",
    "public_only_accuracy",
    "public_only_models",
    "public_only_line_models",
    "gain_over_public",
    "gain_over_public_sd",
    "gain_over_public_p",
    "adds_over_public",
    "public_documents",
    "macro_f1_mean",
    "macro_f1_sd",
    "wall_seconds_mean",
    "start",
    "ldp_guarantee_holds",
    "evaluation_covered",
    "runs",
)

#: The keys a local point's own epsilon is set by, by level (the sentence level's first: its points set the label's
#: epsilon too); a point that sets none of the first three releases the labels alone.
EPSILON_KEYS = ("sentence-epsilon", "word-epsilon", "document-epsilon", "label-epsilon")

#: Series whose privacy figure depends on the seed (the point reports the largest over the seeds).
SEED_DEPENDENT = (
    "local-shuffled",
    "local-shuffled-on-device",
    "local-shuffled-labels-clear",
    "local-shuffled-labels-clear-on-device",
    "central-user",
    "central-user-encoder",
)
#: Local figures that depend on the recipe, which each seed chooses on its own public draw (the label's share
#: of the budget splits it between the embedding and the label): the point reports the largest over the seeds.
RECIPE_DEPENDENT = ("metric_epsilon", "epsilon_embedding_only", "test_release_epsilon", "ceiling_bound")


def _local_start(summary: Mapping[str, Any]) -> str:
    """Where a local run's server model started: from the public split's training, or seeded."""
    text = (summary.get("guarantee") or {}).get("sentence", {}).get("text", "")
    return "public-trained M1, M2 and classifier" if "trained on the public split" in text else "seeded start"


def public_line(scored: Mapping[str, Any], accuracy: Any) -> dict[str, Any]:
    """A run's public-only line on one test mode of its ``outcome`` (``scored``): ``public_only_models``
    (each public-only model's accuracy by name), ``public_only_accuracy`` the largest of them and
    ``gain_over_public`` the run's ``accuracy`` minus it, the per-seed gain the point's test pairs. A summary
    that names no models (written before they were recorded) gives its own two figures."""
    models = {name: float(v) for name, v in (scored.get("public_only_models") or {}).items() if agg.finite([v])}
    if not models:
        return {
            "public_only_models": None,
            "public_only_accuracy": scored.get("public_only_accuracy"),
            "gain_over_public": scored.get("gain_over_public"),
        }
    public = max(models.values())
    gain = float(accuracy) - public if agg.finite([accuracy]) else None
    return {"public_only_models": models, "public_only_accuracy": public, "gain_over_public": gain}


def rows_for(
    run: Run, sweep_dir: Path, targets: Mapping[str, float] | None = None, map_dim: int | None = None
) -> list[dict[str, Any]]:
    """The comparison rows of one finished run (none while it has no summary). ``targets`` maps a
    user-level central run's name to the per-user epsilon its noise was calibrated for; ``map_dim`` is the
    config's ``map-dim``, a local run's unless it sets its own (each row's ``map_dim``: a local point and its
    noise-free ceiling share it)."""
    folder = sweep_dir / run.name
    summary = read_json(folder / "summary.json")
    if summary is None:
        return []
    final = summary.get("final") or {}
    scored = summary.get("outcome") or {}
    base = {
        "accuracy": final.get("accuracy"),
        "test_inputs": scored.get("test_inputs", "sanitized"),
        **public_line(scored, final.get("accuracy")),
        "public_documents": ((summary.get("data") or {}).get("public") or {}).get("documents"),
        "macro_f1": final.get("macro_f1"),
        "seed": run.values.get("seed"),
        "wall_seconds": summary.get("wall_seconds"),
        "run_name": run.name,
        "results_folder": str(folder),
        "ldp_guarantee_holds": summary.get("ldp_guarantee_holds"),
        "evaluation_covered": summary.get("evaluation_covered", False),
        "training_moved": (summary.get("outcome") or {}).get("training_moved"),
        "test_users": (summary.get("users") or {}).get("test"),
    }
    if run.values.get("mode") == "central":
        return _central_rows(run, summary, base, targets)
    base["map_dim"] = run.values.get("map-dim", map_dim)
    if run.values.get("sentence-mechanism") == "none":
        return _reference_rows(summary, base)
    return _local_rows(run, summary, base, targets)


def _central_rows(
    run: Run, summary: Mapping[str, Any], base: dict[str, Any], targets: Mapping[str, float] | None
) -> list[dict[str, Any]]:
    """The row of a central run: at its target per-user epsilon (user level) or its noise multiplier (node level),
    with the (epsilon, delta) its own accountant printed."""
    privacy = summary.get("privacy") or {}
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


def _reference_rows(summary: Mapping[str, Any], base: dict[str, Any]) -> list[dict[str, Any]]:
    """The row of a non-private reference: the noise-free ceiling of the local points at its map-dim."""
    labels = bool((summary.get("privacy") or {}).get("label_protected"))
    on_device = (summary.get("outcome") or {}).get("on_device") or {}
    # The same pipeline without noise, at its map-dim: the noise-free ceiling of the local points there,
    # on both test modes (on_device_*: the model applied to the clean input).
    device = public_line(on_device, on_device.get("accuracy"))
    return [
        {
            **base,
            "series": "non-private",
            "parameter": "sentence-mechanism" if base["map_dim"] is None else "map-dim",
            "value": "none" if base["map_dim"] is None else base["map_dim"],
            "epsilon": None,
            "delta": None,
            "label_protected": labels,
            "start": _local_start(summary),
            "on_device_accuracy": on_device.get("accuracy"),
            "on_device_public_only_models": device["public_only_models"],
            "on_device_public_only_accuracy": device["public_only_accuracy"],
            "on_device_gain_over_public": device["gain_over_public"],
        }
    ]


def _local_rows(
    run: Run, summary: Mapping[str, Any], base: dict[str, Any], targets: Mapping[str, float] | None
) -> list[dict[str, Any]]:
    """The rows of a local point: its pure-LDP and its shuffled figure, each on the sanitized test inputs and, with
    on-device inference, on the clean ones."""
    privacy = summary.get("privacy") or {}
    labels = bool(privacy.get("label_protected"))
    on_device = (summary.get("outcome") or {}).get("on_device") or {}
    key = next(k for k in EPSILON_KEYS if k in run.values)  # the mechanism's own epsilon (compare_levels)
    eps = run.values[key]
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
        "parameter": key if total is None else "whole-record-epsilon",
        "value": eps if total is None else total,
        "label_protected": labels,
        "test_release_epsilon": release,  # what a test user's sanitized input spends: the ceiling's epsilon
    }
    local["metric_epsilon"] = eps if privacy else None
    local["start"] = _local_start(summary)
    clear = "" if labels else "-labels-clear"
    ldp_figures = {
        "epsilon": ldp,
        "delta": privacy.get("delta_total", 0.0) if labels else None,
        "epsilon_embedding_only": privacy.get("epsilon_ldp"),
    }
    # the shuffle-amplified central figure, at the run's accounting-delta (compare: the central side's delta)
    shuffled_figures = {
        "epsilon": shuffled,
        "delta": shuffled_delta,
        "epsilon_embedding_only": privacy.get("epsilon_shuffled_total"),
        # what the figure shuffles (the run's ``shuffled_reports`` is how many): its training releases only, in
        # runs that say so; older runs also counted the test users' inputs (simulations.drivers.compare_rederive)
        "shuffled_over": "training" if privacy.get("shuffled_covers") else None,
    }
    device = {
        "accuracy": on_device.get("accuracy"),
        "macro_f1": (summary.get("final") or {}).get("clean_macro_f1"),
        "test_inputs": "clean",
        **public_line(on_device, on_device.get("accuracy")),
        "test_release_epsilon": None,  # no test release: the ceiling of a sanitized input does not apply
    }
    device_rows = (
        [
            {**local, "series": f"local-ldp{clear}-on-device", **ldp_figures, **device},
            {**local, "series": f"local-shuffled{clear}-on-device", **shuffled_figures, **device},
        ]
        if on_device.get("accuracy") is not None
        else []
    )
    return [
        {**local, "series": f"local-ldp{clear}", **ldp_figures},
        *device_rows,
        {**local, "series": f"local-shuffled{clear}", **shuffled_figures},
    ]


def _stats(values: Sequence[Any]) -> tuple[float | None, float | None]:
    mean, sd, _ = agg.mean_sd(values)
    return mean, sd


def _models_mean(members: Sequence[Mapping[str, Any]]) -> dict[str, float] | None:
    """Each public-only model's mean accuracy over the seeds, by name, for the models every seed scored (a
    model only some seeds tried, such as a recipe's map-dim, is named per seed in ``public_only_line_models``
    and in the runs' rows); None: none named."""
    named = [m.get("public_only_models") or {} for m in members]
    names = [n for n in dict.fromkeys(n for models in named for n in models) if all(n in m for m in named)]
    out = {}
    for name in names:
        mean, _, _ = agg.mean_sd(models[name] for models in named)
        if mean is not None:
            out[name] = mean
    return out or None


def _line_models(members: Sequence[Mapping[str, Any]]) -> str | None:
    """Which public-only model each seed's line is (``seed: name``), where the runs named their models."""
    cells = []
    for m in members:
        models = m.get("public_only_models") or {}
        if models:
            cells.append(f"{m.get('seed')}: {max(models, key=lambda n: models[n])}")
    return "; ".join(cells) or None


def _privacy_figures(series: str, value: Any, members: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The first run's row with the point's privacy figures: the epsilon every seed reports (checked equal), or
    for :data:`SEED_DEPENDENT` series the largest over the seeds, and the largest of each :data:`RECIPE_DEPENDENT`
    figure."""
    first = dict(members[0])
    eps = agg.finite(m.get("epsilon") for m in members)
    # a level's local figure is the maximum over the seed's users (compare_levels): it depends on the seed's draw
    per_user = any(m.get("per_user_planned") is not None for m in members)
    if (series in SEED_DEPENDENT or per_user) and eps:
        # The number of shuffled reports depends on the seeded user sampling, and a user-level
        # central run's q on the seed's population (the public split is drawn per seed), so the
        # seeds' figures differ slightly: the point gets the largest, the bound every seed's run meets.
        first["epsilon"] = max(eps)
    elif agg.differing(members, ["epsilon"]):
        raise ValueError(f"{series} at {value}: the seeds' runs report different epsilons {sorted(eps)}")
    for key in RECIPE_DEPENDENT:
        figures = agg.finite(m.get(key) for m in members)
        if figures:
            first[key] = max(figures)
    return first


def aggregate(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One point per (series, value): mean and sample sd over seeds (:mod:`simulations.outputs.aggregate`) of
    accuracy, macro-F1 and wall time; the privacy figures, which do not depend on the seed, from
    the first run (checked equal; a shuffled figure, which depends on how many users the seed
    sampled, is the largest over the seeds, and so are the figures of :data:`RECIPE_DEPENDENT`, which
    depend on the recipe each seed chose). A local point's noise-free ceiling (:func:`add_noise_free_ceilings`)
    is the mean over the seeds that have one, each seed's paired with its own run; ``map_dims`` lists each
    seed's map-dim in the order of ``seeds``."""
    points = []
    for (series, value), members in agg.group(rows, lambda r: (r["series"], r["value"])).items():
        first = _privacy_figures(series, value, members)
        noise_free, _ = _stats([m.get("noise_free_ceiling_accuracy") for m in members])
        noise_free_gain, _ = _stats([m.get("noise_free_ceiling_gain_over_public") for m in members])
        dims = [m.get("map_dim") for m in members]
        acc, acc_sd = _stats([m.get("accuracy") for m in members])
        public_only, _ = _stats([m.get("public_only_accuracy") for m in members])
        gains = [m.get("gain_over_public") for m in members]  # paired per seed, over its strongest public-only
        gain, gain_sd, _ = agg.mean_sd(gains)
        adds, gain_p = adds_over_public(gains, acc, first.get("test_users"))
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
                "map_dims": " ".join(str(d) for d in dims) if any(d is not None for d in dims) else None,
                "noise_free_ceiling_accuracy": noise_free,
                "noise_free_ceiling_gain_over_public": noise_free_gain,
                "test_inputs": first.get("test_inputs"),
                "accuracy_mean": acc,
                "accuracy_sd": acc_sd,
                "public_only_accuracy": public_only,
                "public_only_models": _models_mean(members),
                "public_only_line_models": _line_models(members),
                "gain_over_public": gain,
                "gain_over_public_sd": gain_sd,
                "gain_over_public_p": gain_p,
                "adds_over_public": adds,
                "public_documents": first.get("public_documents"),
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
    columns: Sequence[str] = COLUMNS,
) -> tuple[Path, Path, Path]:
    """``compare.csv`` (``columns``), ``compare.json`` and ``compare.png`` in ``sweep_dir``."""
    csv_path = sweep_dir / "compare.csv"
    write_csv(csv_path, ({k: p.get(k) for k in columns} for p in points), tuple(columns), cell=text_cell)
    json_path = sweep_dir / "compare.json"
    document = {**dict(extra or {}), "random_guess_accuracy": random_guess, "points": list(points), "runs": list(rows)}
    json_path.write_text(json.dumps(document, indent=2, default=str) + "\n")
    return csv_path, json_path, plot(points, sweep_dir / "compare.png", title, random_guess, baseline)


def add_noise_free_ceilings(rows: Sequence[dict[str, Any]]) -> None:
    """Each local row's noise-free ceiling: the same local pipeline without noise (the ``non-private`` run of
    the row's seed at the row's ``map_dim``, the map-dim its recipe was chosen with), scored on the row's test
    inputs (on-device rows: its on-device accuracy; server-side rows: its server-side accuracy, on inputs no
    noise touched). ``noise_free_ceiling_accuracy`` is that run's accuracy, ``noise_free_ceiling_gain_over_public``
    its gain over its own public-only line on the same test mode, ``noise_free_ceiling_run`` its name. Rows
    whose seed has no such run (not run yet) get none. Not to be confused with ``ceiling_bound``, the most any
    classifier of a sanitized test input can reach (:func:`add_ceilings`)."""
    references = {(r.get("seed"), r.get("map_dim")): r for r in rows if r["series"] == "non-private"}
    for row in rows:
        reference = references.get((row.get("seed"), row.get("map_dim")))
        if not row["series"].startswith("local-") or reference is None:
            continue
        clean = row.get("test_inputs") == "clean"
        row["noise_free_ceiling_accuracy"] = reference.get("on_device_accuracy" if clean else "accuracy")
        row["noise_free_ceiling_gain_over_public"] = reference.get(
            "on_device_gain_over_public" if clean else "gain_over_public"
        )
        row["noise_free_ceiling_run"] = reference["run_name"]


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
