"""``sanitas compare``: local DP vs central DP at the same per-user privacy unit, on one axis.

::

    sanitas compare CONFIG.toml [--epsilons 1,3.14,6.28] [--central-epsilons 0.5,1,2,4,8]
                    [--label-share auto|0.1] [--labels-clear] [--seeds 1,2,3] [--node-multipliers 1.0,2.0]
                    [--set key=value ...] [--central-set key=value ...] --out DIR [--name NAME]

Runs, all from the same config (same data, users, rounds), once per seed
(``seed`` and ``noise-seed`` both set to it):

* local DP: one run per whole-record pure epsilon ``E`` per user (``--epsilons``): the label goes
  through the config's label mechanism (randomized response when the config has none) at
  ``--label-share`` of ``E`` (``auto``: the share, and for a class-means config the map-dim, the
  config's recipe scores best with on **the seed's own** public draw, :mod:`fl.maps.recipes`; each seed's
  runs take its own, kept in ``recipes.json``), the rest through the sentence mechanism
  (``sentence-epsilon`` = the rest over its pure cost per unit), at ``accounting-delta`` = the central
  runs' delta. Every local point is thus a whole-record guarantee on the axis it shares with central DP;
* with ``--labels-clear``, the same budgets spent on the embedding alone, labels in the clear: an
  embedding-only figure, drawn in a panel of its own, never on the shared axis;
* central DP, user level (``central-unit = "user"``): one run per target per-user epsilon, at the
  noise multiplier the accountant finds for it (``fl.accounting.user_level.noise_for_user_epsilon``
  for the run's ``q``, rounds and delta; never typed by hand). The delta is ``central-delta``, or
  by default 1 / (10 N) for the largest population over the seeds (at most 1e-5), written into
  every central run so that its account uses the delta its noise was calibrated for;
* central DP, node level (``--node-multipliers``, optional): DP-FedAvg over whole nodes at those
  noise multipliers (its figure holds per user too);
* the non-private references (``sentence-mechanism = "none"``, labels in the clear): the same pipeline,
  one per seed and distinct map-dim of its local points, each local point's noise-free ceiling.

The comparison is a plan built once (:mod:`simulations.drivers.compare_plan`: the points, seeds, sides and
recipes, every run's config resolved once, nothing written) and executed by the runner that ``sweep`` shares
(:mod:`simulations.drivers.runner`: warm workers, shared federations, an interrupted comparison resumes). Every
run is an ordinary ``sanitas run``. The x-axis is the privacy of **one user**:

* ``local-ldp``: the per-user pure-LDP epsilon0 of the whole record (embedding + label), with the
  metric epsilon per unit distance beside it (``metric_epsilon``);
* ``local-shuffled``: the shuffle-amplified central (epsilon, delta) of the same run (a what-if: it needs
  a trusted shuffler), at the central runs' delta; ``local-shuffled-on-device`` the same figure with the
  on-device accuracy (local DP and a shuffler, scored as central DP is);
* ``central-user`` / ``central-node``: the (epsilon, delta) the run's own accountant printed.

Every local point carries its ceiling (:mod:`fl.accounting.analysis.ceiling`), at the pure epsilon
its test release spends (``test_release_epsilon``): ``ceiling_bound``, the most any classifier of
a sanitized input can reach, and ``ceiling_public_rr``, the public classifier's class sent with
K-ary randomized response (the public classifier's test accuracy per seed is in compare.json); and its
noise-free ceiling (:func:`simulations.drivers.compare_outputs.add_noise_free_ceilings`):
``noise_free_ceiling_accuracy`` and ``noise_free_ceiling_gain_over_public``, the non-private run of its seed
at its map-dim on the same test inputs.

At the word, document and label levels (:mod:`simulations.drivers.compare_levels`) ``--epsilons`` are the level's
mechanism's own epsilons, and every local point carries its guarantee per unit and the per-user whole-record figure
it implies (group privacy over each user's units, at the maximum over the users), checked against each run's
ledger; central points are added at the per-user figures at most 64.

Outputs in the comparison folder: ``compare.csv`` (one row per point: mean and sd over seeds, n),
``compare.json`` (the points, every run, the noise found per target, each seed's recipe, the starts)
and ``compare.png`` (accuracy vs per-user epsilon, log x, error bars, the ceilings, the non-private
lines and the majority-class rate).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fl import config as config_mod
from simulations.drivers.compare_levels import LevelPlan
from simulations.drivers.compare_lines import public_line_fields, share_public_line
from simulations.drivers.compare_outputs import (
    add_ceilings,
    add_noise_free_ceilings,
    aggregate,
    rows_for,
    write,
)
from simulations.drivers.compare_plan import CompareRequest, ComparisonPlan, build_plan, strategy_label
from simulations.drivers.grid import Run
from simulations.drivers.runner import execute
from simulations.outputs.writers import read_json
from simulations.runtime.overrides import load_with_overrides
from simulations.tracking.tracker import for_command


def compare(request: CompareRequest) -> int:
    """The ``sanitas compare`` command; returns 0 when every run finished, 1 otherwise.

    The plan is built and checked (:func:`simulations.drivers.compare_plan.build_plan`) and, unless
    ``--central-check off``, each user-level central point is emulated on the central runs' public data
    (:mod:`simulations.drivers.central_check`), all before anything is written; then the runner runs the plan
    (``--collect``: runs nothing and tabulates the runs already finished, naming the missing ones), and
    compare.csv, compare.json, compare.png and the gain tables are written. ``--attacks``: then those attacks
    on every finished run (``simulations.analyses.attack``)."""
    plan = build_plan(request)
    tracking = for_command(
        request.track, request.tracking_uri, load_with_overrides(request.config, request.sets), request.out
    )
    checked = _central_check(plan)  # refuses before anything runs
    folder = request.folder
    plan.recipes.save(folder)
    if request.collect:
        finished = _collect(plan.runs, folder)
    else:
        print(f"sanitas: comparison of {len(plan.runs)} runs into {folder}", flush=True)
        finished = execute(
            request.config, plan.runs, plan.sets, folder, plan.resolved, request.jobs, request.timeout, request.progress
        )
    rows = [row for run in plan.runs for row in rows_for(run, folder, plan.run_targets, int(plan.local_cfg["map-dim"]))]
    if plan.levels is not None:  # each local row's per-user figure from the unit counts, checked against the run's
        from simulations.drivers.compare_levels import annotate_rows

        annotate_rows(rows, {r.name: r for r in plan.runs}, plan.levels)
    priors, public_accuracy = _ceiling_inputs(plan, rows)
    add_ceilings(rows, priors, public_accuracy)
    line = share_public_line(rows)  # one public-only line per seed, both sides
    add_noise_free_ceilings(rows)
    doc = {**_document(plan, checked, public_accuracy, priors), **public_line_fields(line)}
    if plan.levels is not None:
        doc["level"] = plan.levels.document()
    _write_outputs(request.config, folder, rows, priors, doc, strategy_label(plan.local_cfg), plan.levels)
    if request.attacks:
        from simulations.analyses.attack import attack_folder

        attack_folder(folder, request.attacks)
        print(f"sanitas: attacks in {folder / 'attacks.csv'}", flush=True)
    if tracking is not None:
        from simulations.tracking import track_runs

        group = {"config": request.config, "epsilons": request.totals, "central-epsilons": request.targets}
        group |= {
            "seeds": request.seeds,
            "sets": " ".join(request.sets),
            "central-sets": " ".join(request.central_sets),
        }
        tags = {"sanitas.command": "compare"}
        track_runs(tracking, [folder / r.name for r in plan.runs], folder.name, folder, group, tags)
    return 0 if all(r["status"] == "ok" for r in finished) else 1


def _central_check(plan: ComparisonPlan) -> dict[str, Any]:
    """Emulate the user-level central points on public data (:mod:`simulations.drivers.central_check`);
    raises, naming what to change, when one learns nothing there."""
    request = plan.request
    user_level = any(r.values.get("central-unit") == "user" for r in plan.runs)
    if not request.central_check or request.collect or not user_level:
        return {"unchecked": "--central-check off"}  # what compare.json said of these cases before
    from simulations.drivers.central_check import check_central_points

    checked = check_central_points(plan.central_cfg, dict(plan.calibration.noise), request.seeds[0])
    note = checked.get("unchecked") or (
        f"learn on public data ({len(checked['emulations'])} emulated, server-learning-rate "
        f"{checked['server_learning_rate']:g})"
    )
    print(f"sanitas: central points: {note}", flush=True)
    return checked


def _ceiling_inputs(plan: ComparisonPlan, rows: Sequence[dict[str, Any]]) -> tuple[list[float], dict[int, float]]:
    """The test split's class frequencies and, per seed, the public classifier's test accuracy: what the ceilings
    need (:class:`simulations.drivers.inputs.RunInputs`); the accuracy only where there are local rows."""
    first = plan.local_inputs[plan.request.seeds[0]]
    priors = first.test_priors
    if not priors or not any(r["series"].startswith("local-ldp") for r in rows):
        return priors, {}
    accuracy = {s: inputs.public_model_accuracy for s, inputs in plan.local_inputs.items()}
    return priors, {s: a for s, a in accuracy.items() if a is not None}


def _document(
    plan: ComparisonPlan, checked: dict[str, Any], public_accuracy: dict[int, float], priors: list[float]
) -> dict[str, Any]:
    """What compare.json records beside the points: the plan's inputs, the noise found, each seed's recipe."""
    cal, request = plan.calibration, plan.request
    return {
        "config": str(request.config),
        # The strategy both sides ran ("": Sanitas' own; local: on the nodes, central: from the noisy mean).
        "strategy": strategy_label(plan.local_cfg),
        "sets": list(plan.sets),
        "central_sets": list(plan.central_sets),
        "users": cal.num_users,
        "users_by_seed": {str(k): v for k, v in cal.populations.items()},
        "sampling_rate": cal.q,
        "rounds": cal.rounds,
        "central_delta": cal.delta,
        "local_accounting_delta": float(f"{cal.delta:.6g}"),
        "noise_for_target_epsilon": {str(t): z for t, z in cal.noise.items()},
        # every option each seed's recipe chose on its public draw, and whether it fell back to the public-only model
        "recipe_by_seed": {
            str(s): {f"{t:g}": dataclasses.asdict(r) for t, r in chosen.items()}
            for s, chosen in plan.recipes.by_seed.items()
        },
        "label_share_chosen_on": "each seed's own public draw (fl.maps.recipes)"
        if request.label_share == "auto"
        else "given (--label-share)",
        "public_model_accuracy": {str(k): v for k, v in public_accuracy.items()},
        "test_class_priors": priors,
        "seeds": [str(s) for s in request.seeds],
        "central_check": checked,
    }


def _collect(runs: Sequence[Run], folder: Path) -> list[dict[str, Any]]:
    """``--collect``: run nothing; name the runs without a summary (ConfigError when none has one)."""
    missing = [r.name for r in runs if read_json(folder / r.name / "summary.json") is None]
    print(f"sanitas: collecting {len(runs) - len(missing)} of {len(runs)} runs from {folder}", flush=True)
    for run_name in missing:
        print(f"sanitas: not run yet: {run_name}", file=sys.stderr)
    if len(missing) == len(runs):
        raise config_mod.ConfigError(f"--collect: none of the {len(runs)} runs has finished in {folder}")
    return [{"status": "ok"}]


def _write_outputs(
    config: str,
    folder: Path,
    rows: list[dict[str, Any]],
    priors: Sequence[float],
    extra: dict[str, Any],
    strategy: str = "",
    levels: LevelPlan | None = None,
) -> None:
    """compare.csv, compare.json and compare.png, and the findings table against the majority-class rate; at the
    word, document and label levels (``levels``) every local point's two units too."""
    from simulations.drivers.compare_outputs import COLUMNS
    from simulations.drivers.findings import print_findings

    points_out = aggregate(rows)
    majority = max(priors) if priors else None  # the rate a model that learned nothing reaches
    under = f" under {strategy}" if strategy else ""  # the Flower strategy both sides ran
    title = f"{Path(config).stem}: local vs central DP per user{under}"
    columns: tuple[str, ...] = COLUMNS
    whole = "(whole record)"
    if levels is not None:
        from simulations.drivers.compare_levels import LEVEL_COLUMNS, UNIT, annotate_points

        annotate_points(points_out, rows, levels)
        columns = (*COLUMNS, *LEVEL_COLUMNS)
        whole = f"({levels.level} level: local points at their per-user figure, per {UNIT[levels.level]} in the CSV)"
    csv_path, json_path, png = write(
        points_out, folder, f"{title} {whole}", majority, extra, rows, "majority class", columns
    )
    print_findings(points_out, majority, title)
    gain_md, gain_png = _write_gain_tables(Path(config).stem + under, csv_path, json_path, folder)
    print(f"sanitas: {csv_path}, {json_path}, {png}, {gain_md} and {gain_png}", flush=True)


def _write_gain_tables(name: str, csv_path: Path, json_path: Path, folder: Path) -> tuple[Path, Path]:
    """gain_over_public.md and gain_over_public.png: the comparison's points against the public-only line, the
    table and figure of docs/results/federation-gain (:mod:`simulations.outputs.gain_tables`), from compare.csv."""
    import csv

    from simulations.outputs import gain_tables

    with csv_path.open() as f:
        rows = list(csv.DictReader(f))
    doc = json.loads(json_path.read_text())
    title = f"{name}: what the private users add over the public data"
    md, png = folder / "gain_over_public.md", folder / "gain_over_public.png"
    if doc.get("level"):  # both units of every local point (simulations.outputs.level_tables)
        from simulations.outputs import level_tables

        md.write_text(level_tables.table(name, title, rows, doc))
    else:
        md.write_text(gain_tables.table(name, title, rows, doc))
    gain_tables.plot([(name, title, rows)], png)
    return md, png
