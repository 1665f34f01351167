"""``sanitas compare``: local DP vs central DP at the same per-user privacy unit, on one axis.

::

    sanitas compare CONFIG.toml [--epsilons 2,6,10] [--central-epsilons 0.5,1,2,4,8]
                    [--seeds 1,2,3] [--node-multipliers 1.0,2.0]
                    [--set key=value ...] [--central-set key=value ...] --out DIR [--name NAME]

Runs, all from the same config (same data, users, rounds), once per seed
(``seed`` and ``noise-seed`` both set to it):

* local DP: one run per ``sentence-epsilon``;
* central DP, user level (``central-unit = "user"``): one run per target
  per-user epsilon, at the noise multiplier the accountant finds for it
  (``fl.accounting.user_level.noise_for_user_epsilon`` for the run's ``q``,
  rounds and ``central-delta``; never typed by hand);
* central DP, node level (``--node-multipliers``, optional): DP-FedAvg over
  whole nodes at those noise multipliers (its figure holds per user too);
* a non-private reference (``sentence-mechanism = "none"``).

Every run is an ordinary ``sanitas run`` (through :mod:`simulations.sweep`, so
an interrupted comparison resumes). The x-axis is the privacy of **one user**:

* ``local-ldp``: the per-user pure-LDP epsilon0 of the whole record (embedding
  + label), with the metric epsilon per unit distance beside it
  (``metric_epsilon``);
* ``local-shuffled``: the shuffle-amplified central epsilon of the same run (a
  what-if: it needs a trusted shuffler);
* ``central-user`` / ``central-node``: the (epsilon, delta) the run's own
  accountant printed.

A local run whose labels are released in the clear has no whole-record
epsilon; its embedding-only figure is kept in ``epsilon_embedding_only`` and
drawn in a separate panel, never on the axis shared with central DP.

Outputs in the comparison folder: ``compare.csv`` (one row per point: mean and
sd over seeds, n), ``compare.json`` (the points, every run, the noise found per
target, the starts) and ``compare.png`` (accuracy vs per-user epsilon, log x,
error bars, the non-private and random-guess lines).
"""

from __future__ import annotations

import csv
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fl import config as config_mod
from simulations import aggregate as agg
from simulations import sweep as sw
from simulations.overrides import split_override

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
SEED_DEPENDENT = ("local-shuffled", "central-user", "central-user-encoder")


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
    :func:`simulations.sweep.with_seeds`, the names keeping both keys (``__seed=1__noise-seed=1``,
    the folders of comparisons already on disk)."""
    return sw.with_seeds(runs, seeds, name_keys=SEED_KEYS)


def plan(
    epsilons: Sequence[str],
    central_noise: Mapping[float, float],
    seeds: Sequence[int],
    central_sets: Sequence[str] = (),
    node_multipliers: Sequence[str] = (),
    central_trains: Sequence[str] = ("head",),
) -> list[sw.Run]:
    """The runs of a comparison, in this order: user-level central runs (one per target epsilon, at
    the noise ``central_noise[target]``, once per ``central_trains`` entry: ``"head"`` and/or
    ``"encoder"``), optional node-level runs, local epsilons, the reference; each once per seed.
    With the head only (the default) the run names carry no ``central-train``."""
    if not epsilons or not central_noise:
        raise config_mod.ConfigError("compare needs at least one local epsilon and one central epsilon")
    if not seeds or len(set(seeds)) != len(seeds):
        raise config_mod.ConfigError(f"compare needs distinct seeds, got {list(seeds)}")
    noise = [f"{central_noise[t]:.6g}" for t in sorted(central_noise)]
    trains = [] if list(central_trains) == ["head"] else [[_axis("central-train", [f'"{t}"'])] for t in central_trains]
    if trains and any(split_override(item, "--central-set")[0] == "central-train" for item in central_sets):
        raise config_mod.ConfigError("set central-train with --central-trains or with --central-set, not both")
    blocks = [
        [
            _axis("mode", ['"central"']),
            _axis("central-unit", ['"user"']),
            *train,
            *_fixed(central_sets),
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
    blocks.append([_axis("mode", ['"local"']), _axis("sentence-epsilon", epsilons)])
    blocks.append([_axis("mode", ['"local"']), _axis("sentence-mechanism", ['"none"'])])
    return _seeded(sw.expand(blocks), seeds)


def central_noise_table(
    targets: Sequence[float], sampling_rate: float, rounds: int, delta: float
) -> dict[float, float]:
    """Target per-user epsilon -> the noise multiplier the accountant finds for it (user level)."""
    from fl.accounting.user_level import noise_for_user_epsilon

    return {float(t): noise_for_user_epsilon(float(t), sampling_rate, int(rounds), float(delta)) for t in targets}


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
    if summary.get("ldp_guarantee_holds") is not True:  # e.g. a leaky M1: no local epsilon to report
        privacy = {}
    # Only a protected label makes the local figure a whole-record epsilon, comparable with central DP.
    ldp = privacy.get("epsilon_total") if labels else None
    shuffled = privacy.get("epsilon_shuffled_joint_total") if labels else None
    shuffled_delta = privacy.get("delta_shuffled_joint_total") if labels else None
    local = {**base, "parameter": "sentence-epsilon", "value": eps, "label_protected": labels}
    local["metric_epsilon"] = eps if privacy else None
    local["start"] = _local_start(summary)
    return [
        {
            **local,
            "series": "local-ldp",
            "epsilon": ldp,
            "delta": privacy.get("delta_total", 0.0) if labels else None,
            "epsilon_embedding_only": privacy.get("epsilon_ldp"),
        },
        {
            **local,
            "series": "local-shuffled",
            "epsilon": shuffled,
            "delta": shuffled_delta,
            "epsilon_embedding_only": privacy.get("epsilon_shuffled_total"),
        },
    ]


def _stats(values: Sequence[Any]) -> tuple[float | None, float | None]:
    mean, sd, _ = agg.mean_sd(values)
    return mean, sd


def aggregate(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One point per (series, value): mean and sample sd over seeds (:mod:`simulations.aggregate`) of
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
        f1, f1_sd = _stats([m.get("macro_f1") for m in members])
        wall, _ = _stats([m.get("wall_seconds") for m in members])
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
                        "start",
                        "ldp_guarantee_holds",
                        "evaluation_covered",
                    )
                },
                "accuracy_mean": acc,
                "accuracy_sd": acc_sd,
                "macro_f1_mean": f1,
                "macro_f1_sd": f1_sd,
                "wall_seconds_mean": wall,
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
    return csv_path, json_path, plot(points, sweep_dir / "compare.png", title, random_guess)


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


def plot(points: Sequence[Mapping[str, Any]], path: Path, title: str, random_guess: float | None = None) -> Path:
    """Accuracy (mean +- sd over seeds; hollow markers: one seed) against per-user epsilon (log x) for
    local DP (epsilon0 and shuffled) and central DP, with the non-private and random-guess lines.

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
    reference = [p for p in points if p["series"] == "non-private" and p.get("accuracy_mean") is not None]
    for p in reference:
        sd = f" +- {p['accuracy_sd']:.3f}" if p.get("accuracy_sd") is not None else ""
        ax.axhline(p["accuracy_mean"], color="gray", linestyle=":", label=f"non-private {p['accuracy_mean']:.3f}{sd}")
    if random_guess is not None:
        ax.axhline(random_guess, color="crimson", linestyle="-.", alpha=0.6, label=f"random guess {random_guess:.2f}")
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
) -> int:
    """The ``sanitas compare`` command; returns 0 when every run finished, 1 otherwise.

    ``collect``: run nothing; tabulate the plan's runs that already have a summary, name the
    missing ones on stderr, and return 0 (the table says n per point).

    ``attacks``: then run those attacks on every finished run (``simulations.attack``: attacks.csv and
    attacks_vs_epsilon.png in the comparison folder)."""
    from fl.accounting.delta import population_delta
    from fl.accounting.user_level import sampling_rate
    from fl.cohort import population_sizes
    from fl.data import datasets as data

    epsilon_list(epsilons, "--epsilons")  # checked before anything runs; the texts name the runs
    trains = [t.strip() for t in central_trains]
    allowed = config_mod.CHOICES["central-train"]
    if not trains or any(t not in allowed for t in trains) or len(set(trains)) != len(trains):
        raise config_mod.ConfigError(f"--central-trains takes distinct values of {allowed}, got {','.join(trains)!r}")
    targets = sorted(set(epsilon_list(central_epsilons, "--central-epsilons")))
    seed_list = sw.parse_seeds(list(seeds))
    sweep_dir = Path(out).expanduser().resolve() / (name or f"{Path(config).stem}-compare")
    central_cfg = sw.resolve_run(config, sw.Run("probe", {}, {}), [*sets, *central_sets], sweep_dir)
    # The population (hence q) depends on the seed (the public split is drawn per seed): the noise is
    # calibrated at the largest q over the seeds, so every seed's run meets each target.
    populations = {s: population_sizes(central_cfg.replace(seed=s))[0] for s in seed_list}
    num_users = min(populations.values())
    q = sampling_rate(float(central_cfg["central-cohort-size"]), num_users)
    rounds = int(central_cfg["num-server-rounds"])
    delta = population_delta(float(central_cfg["central-delta"]), num_users)  # 1 / (10 N) unless given
    print(
        f"sanitas: calibrating the noise for per-user epsilon {targets} (q = {q:.4g}, the largest over the seeds' "
        f"{sorted(set(populations.values()))} users; {rounds} rounds)",
        flush=True,
    )
    noise = central_noise_table(targets, q, rounds, delta)
    runs = plan(epsilons, noise, seed_list, central_sets, node_multipliers, trains)
    by_noise = {f"{z:.6g}": t for t, z in noise.items()}
    run_targets = {
        r.name: by_noise[f"{r.values['central-noise-multiplier']:.6g}"]
        for r in runs
        if r.values.get("mode") == "central" and r.values.get("central-unit") == "user"
    }
    sw.check_runs(config, runs, sets, sweep_dir)
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

        from simulations.warm import WarmPool

        with WarmPool(jobs) as pool:
            runner = sw.warm_runner(config, sets, sweep_dir, pool, timeout)
            finished = sw.run_sweep(runs, sweep_dir, runner, progress=progress, jobs=jobs)
    rows = [row for run in runs for row in rows_for(run, sweep_dir, run_targets)]
    points = aggregate(rows)
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
        "seeds": list(seeds),
    }
    guess = 1.0 / data.load(central_cfg).num_classes
    csv_path, json_path, png = write(
        points, sweep_dir, f"{Path(config).stem}: local vs central DP per user", guess, extra, rows
    )
    print(f"sanitas: {csv_path}, {json_path} and {png}", flush=True)
    if attacks:
        from simulations.attack import attack_folder

        attack_folder(sweep_dir, attacks)
        print(f"sanitas: attacks in {sweep_dir / 'attacks.csv'}", flush=True)
    return 0 if all(r["status"] == "ok" for r in finished) else 1
