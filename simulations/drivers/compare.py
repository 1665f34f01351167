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

Every run is an ordinary ``sanitas run`` (through :mod:`simulations.drivers.sweep`, so an interrupted
comparison resumes). The x-axis is the privacy of **one user**:

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

Outputs in the comparison folder: ``compare.csv`` (one row per point: mean and sd over seeds, n),
``compare.json`` (the points, every run, the noise found per target, each seed's recipe, the starts)
and ``compare.png`` (accuracy vs per-user epsilon, log x, error bars, the ceilings, the non-private
lines and the majority-class rate).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fl import config as config_mod
from simulations.drivers import sweep as sw
from simulations.drivers.compare_outputs import (  # noqa: F401 - the comparison's names, as before the split
    COLUMNS,
    SEED_DEPENDENT,
    STYLES,
    _ceiling_inputs,
    _local_start,
    add_ceilings,
    add_noise_free_ceilings,
    aggregate,
    plot,
    rows_for,
    write,
)
from simulations.outputs.writers import read_json
from simulations.runtime.overrides import override_key, split_override

SEED_KEYS = sw.SEED_KEYS


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
    epsilons: Sequence[str] | Sequence[Mapping[str, Any]] | Mapping[int, Sequence[Mapping[str, Any]]],
    central_noise: Mapping[float, float],
    seeds: Sequence[int],
    central_sets: Sequence[str] = (),
    node_multipliers: Sequence[str] = (),
    central_trains: Sequence[str] = ("head",),
    central_delta: float | None = None,
    clear_options: bool = False,
    local_delta: float | None = None,
) -> list[sw.Run]:
    """The runs of a comparison, in this order: user-level central runs (one per target epsilon, at
    the noise ``central_noise[target]``, once per ``central_trains`` entry: ``"head"`` and/or
    ``"encoder"``), optional node-level runs, local points, the non-private references; each once per seed.
    With the head only (the default) the run names carry no ``central-train``.

    ``epsilons``: sentence epsilons (texts), or one mapping of run-config keys per local point (the
    keys that spend a whole-record budget: :func:`local_points`), the same for every seed, or per seed (a
    mapping seed -> its points' keys, as many for every seed: the recipe chosen on that seed's own public
    draw). ``central_delta``: the delta every central run accounts at (the one its noise was calibrated
    for), set in the runs when given; ``local_delta``: the ``accounting-delta`` of the local points (their
    shuffled figures' delta), set in them when given.

    The non-private references (``sentence-mechanism = "none"``, labels in the clear: the same pipeline
    without noise) are one per seed and distinct ``map-dim`` of that seed's points: each local point's
    noise-free ceiling (:func:`simulations.drivers.compare_outputs.add_noise_free_ceilings`)."""
    if not epsilons or not central_noise:
        raise config_mod.ConfigError("compare needs at least one local epsilon and one central epsilon")
    if not seeds or len(set(seeds)) != len(seeds):
        raise config_mod.ConfigError(f"compare needs distinct seeds, got {list(seeds)}")
    by_seed = epsilons if isinstance(epsilons, Mapping) else dict.fromkeys(seeds, epsilons)
    if set(by_seed) != set(seeds) or len({len(by_seed[s]) for s in seeds}) != 1 or not by_seed[seeds[0]]:
        raise ValueError(f"local points for seeds {sorted(by_seed)}, as many each, are needed for seeds {seeds}")
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
    central = _seeded(sw.expand(blocks), seeds)
    # Each seed's local points with that seed's keys; listed point by point, seeds fastest (the order of old).
    local = {s: _seeded(sw.expand(_local_blocks(by_seed[s], local_delta)), [s]) for s in seeds}
    points = [local[s][i] for i in range(len(local[seeds[0]])) for s in seeds]
    dims = {s: list(dict.fromkeys(_point_map_dim(keys) for keys in by_seed[s])) for s in seeds}
    references = [
        run
        for dim in dict.fromkeys(d for s in seeds for d in dims[s])
        for s in seeds
        if dim in dims[s]
        for run in _seeded(sw.expand([_reference(dim, clear_options)]), [s])
    ]
    return [*central, *points, *references]


def _local_blocks(
    points: Sequence[str] | Sequence[Mapping[str, Any]], local_delta: float | None
) -> list[list[sw.GridAxis]]:
    """The grid blocks of one seed's local points (sentence epsilons, or each point's keys), each at
    ``accounting-delta`` ``local_delta`` when given."""
    delta = [] if local_delta is None else [_axis("accounting-delta", [f"{local_delta:.6g}"])]
    if all(isinstance(e, str) for e in points):
        return [[_axis("mode", ['"local"']), _axis("sentence-epsilon", [str(e) for e in points]), *delta]]
    blocks = []
    for keys in points:
        assert isinstance(keys, Mapping)
        blocks.append([_axis("mode", ['"local"']), *(_axis(k, [_text(v)]) for k, v in keys.items()), *delta])
    return blocks


def _point_map_dim(keys: str | Mapping[str, Any]) -> int | None:
    """The ``map-dim`` a local point's keys set (None: the config's)."""
    return int(keys["map-dim"]) if isinstance(keys, Mapping) and "map-dim" in keys else None


def _reference(map_dim: int | None, clear_options: bool) -> list[sw.GridAxis]:
    """The non-private reference at ``map_dim`` (None: the config's): the same local pipeline, no noise."""
    reference = [
        _axis("mode", ['"local"']),
        _axis("sentence-mechanism", ['"none"']),
        _axis("label-mechanism", ['"none"']),
    ]
    if clear_options:  # the config's sentence-options belong to its mechanism, not to "none"
        reference.append(_axis("sentence-options", ['""']))
    if map_dim is not None:
        reference.append(_axis("map-dim", [str(map_dim)]))
    return reference


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
    map_dims: Mapping[float, int] | None = None,
) -> list[tuple[dict[str, Any], float]]:
    """The local runs' keys for whole-record pure epsilons ``totals`` per user: labels through the config's
    label mechanism (randomized response when it has none) at ``label_share`` of each total (one share,
    or one per total), the rest to the embedding (:func:`fl.maps.recipes.split_budget`); with
    ``labels_clear`` also each total spent on the embedding alone, labels in the clear (an
    embedding-only figure); ``map_dims``: the map-dim of the totals whose recipe chose another than the
    config's. Returns each point's keys with its whole-record epsilon."""
    from fl.maps import recipes

    protected = cfg["label-mechanism"] if cfg["label-mechanism"] != "none" else "rr"
    points: list[tuple[dict[str, Any], float]] = []
    for total in totals:
        share = label_share[total] if isinstance(label_share, Mapping) else float(label_share)
        m_prime = int(map_dims[total]) if map_dims and total in map_dims else input_dim
        trial = replace(cfg.release, label_mechanism=protected)
        keys = {
            "label-mechanism": protected,
            **recipes.split_budget(trial, total, share, m_prime, num_classes),
        }
        variants = [keys]
        if labels_clear:
            clear = replace(cfg.release, label_mechanism="none")
            variants.append(
                {"label-mechanism": "none", **recipes.split_budget(clear, total, share, m_prime, num_classes)}
            )
        for keys in variants:
            ordered: dict[str, Any] = {
                k: keys[k] for k in ("sentence-epsilon", "label-mechanism", "label-epsilon") if k in keys
            }
            if map_dims and total in map_dims:
                ordered["map-dim"] = int(map_dims[total])
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
    totals = epsilon_list(epsilons, "--epsilons")
    trains = _central_trains(central_trains)
    targets = sorted(set(epsilon_list(central_epsilons, "--central-epsilons")))
    seed_list = sw.parse_seeds(list(seeds))
    _check_seed_sets(sets, central_sets)
    sweep_dir = Path(out).expanduser().resolve() / (name or f"{Path(config).stem}-compare")
    given = config_mod.as_run_config(sw.resolve_run(config, sw.Run("probe", {}, {}), sets, sweep_dir))
    sets = like_for_like(sets, public=config_mod.has_public(given))
    _check_accounting_delta(sets)
    local_cfg = config_mod.as_run_config(sw.resolve_run(config, sw.Run("probe", {}, {}), sets, sweep_dir))
    _check_label_share(local_cfg, label_share)  # one line, before any work
    _check_local_side(local_cfg, label_share)
    if not config_mod.has_public(local_cfg) and local_cfg["central-start"] == "seeded":
        print("sanitas: the config has no public data: central runs start from a seeded head", file=sys.stderr)
    central_sets = [*central_sets, *local_only_resets(local_cfg, central_sets)]
    central_cfg = config_mod.as_run_config(
        sw.resolve_run(config, sw.Run("probe", {}, {}), [*sets, *central_sets], sweep_dir)
    )
    cal = _calibrate(central_cfg, targets, seed_list)
    num_classes, dim = _local_context(local_cfg, seed_list[0])
    chosen = _recipes(config, sets, sweep_dir, local_cfg, seed_list, totals, label_share, num_classes)
    points = {
        s: local_points(
            local_cfg,
            totals,
            {t: r.label_share for t, r in chosen[s].items()},
            _map_dim(local_cfg, dim),
            num_classes,
            labels_clear,
            {t: r.map_dim for t, r in chosen[s].items() if r.map_dim != local_cfg["map-dim"]},
        )
        for s in seed_list
    }
    runs = plan(
        {s: [keys for keys, _ in points[s]] for s in seed_list},
        cal.noise,
        seed_list,
        central_sets,
        node_multipliers,
        trains,
        cal.delta,
        clear_options=bool(local_cfg["sentence-options"]),
        local_delta=cal.delta,
    )
    run_targets = _run_targets(runs, cal.noise, points)
    sw.check_runs(config, runs, sets, sweep_dir)
    checked: dict[str, Any] = {"unchecked": "--central-check off"}
    if central_check and not collect and any(r.values.get("central-unit") == "user" for r in runs):
        checked = _check_central(central_cfg, cal.noise, seed_list[0])  # refuses before anything runs
    if collect:
        finished = _collect(runs, sweep_dir)
    else:
        finished = _run_all(config, runs, sets, sweep_dir, jobs, timeout, progress)
    rows = [row for run in runs for row in rows_for(run, sweep_dir, run_targets, int(local_cfg["map-dim"]))]
    priors, public_accuracy = _ceiling_inputs(local_cfg, seed_list, rows)
    add_ceilings(rows, priors, public_accuracy)
    add_noise_free_ceilings(rows)
    extra = {
        "config": str(config),
        "sets": list(sets),
        "central_sets": list(central_sets),
        "users": cal.num_users,
        "users_by_seed": {str(k): v for k, v in cal.populations.items()},
        "sampling_rate": cal.q,
        "rounds": cal.rounds,
        "central_delta": cal.delta,
        "local_accounting_delta": float(f"{cal.delta:.6g}"),
        "noise_for_target_epsilon": {str(t): z for t, z in cal.noise.items()},
        "recipe_by_seed": {
            str(s): {f"{t:g}": {"label_share": r.label_share, "map_dim": r.map_dim} for t, r in chosen[s].items()}
            for s in seed_list
        },
        "label_share_chosen_on": "each seed's own public draw (fl.maps.recipes)"
        if label_share == "auto"
        else "given (--label-share)",
        "public_model_accuracy": {str(k): v for k, v in public_accuracy.items()},
        "test_class_priors": priors,
        "seeds": list(seeds),
        "central_check": checked,
    }
    _write_outputs(config, sweep_dir, rows, priors, extra)
    if attacks:
        from simulations.analyses.attack import attack_folder

        attack_folder(sweep_dir, attacks)
        print(f"sanitas: attacks in {sweep_dir / 'attacks.csv'}", flush=True)
    return 0 if all(r["status"] == "ok" for r in finished) else 1


#: What every comparison sets unless its command line says otherwise, so that the two sides differ in the privacy
#: model alone: local runs also score on-device inference (the model applied to the clean test input, as the
#: central model is scored), and central runs start from the public data the local side fits on.
LIKE_FOR_LIKE = ("clean-evaluation=true", 'central-start="public"')


#: Keys of the local class-means protocol that a central run has no use for (fl.maps.cohorts): compare sets them
#: back to their defaults on the central side, so a local config that sets them compares as it is.
LOCAL_ONLY = ("cohorts", "cohort-map-dim", "class-means-covariance")


def local_only_resets(local_cfg: Any, central_sets: Sequence[str]) -> list[str]:
    """``--central-set`` items that put :data:`LOCAL_ONLY` keys the local config changed back to their defaults,
    and give the central side the identity map where the local config's map is one central mode cannot take
    (``map-in = "projection"``, the class-means recipe's: fl.config.rules.CENTRAL_MAPS), for the keys
    ``central_sets`` does not set itself. So no shipped local config needs a ``--central-set`` to be compared."""
    from fl.config.rules import CENTRAL_MAPS

    given = {split_override(item, "--central-set")[0] for item in central_sets}
    out = []
    if "map-in" not in given and local_cfg["map-in"] not in CENTRAL_MAPS:
        out.append('map-in="identity"')
    for key in LOCAL_ONLY:
        default = config_mod.DEFAULTS[key]
        if key not in given and local_cfg[key] != default:
            out.append(f'{key}="{default}"' if isinstance(default, str) else f"{key}={default}")
    return out


def like_for_like(sets: Sequence[str], public: bool = True) -> list[str]:
    """``sets`` with :data:`LIKE_FOR_LIKE` added for the keys it does not set itself; without ``public`` data
    the central runs keep their seeded start (there is no public data to start from), and compare says so."""
    given = {split_override(item, "--set")[0] for item in sets}
    wanted = [item for item in LIKE_FOR_LIKE if split_override(item, "--set")[0] not in given]
    if not public and 'central-start="public"' in wanted:
        wanted.remove('central-start="public"')
    return [*wanted, *sets]


def _central_trains(central_trains: Sequence[str]) -> list[str]:
    """``--central-trains`` as a list: distinct values of the ``central-train`` choices (ConfigError otherwise)."""
    trains = [t.strip() for t in central_trains]
    allowed = config_mod.CHOICES["central-train"]
    if not trains or any(t not in allowed for t in trains) or len(set(trains)) != len(trains):
        raise config_mod.ConfigError(f"--central-trains takes distinct values of {allowed}, got {','.join(trains)!r}")
    return trains


@dataclass(frozen=True)
class Calibration:
    """The central runs' accounting inputs and the noise multiplier found for each target epsilon."""

    populations: dict[int, int]  # training users per seed
    num_users: int
    q: float
    rounds: int
    delta: float
    noise: dict[float, float]


def _calibrate(central_cfg: config_mod.RunConfig, targets: Sequence[float], seed_list: Sequence[int]) -> Calibration:
    """The noise per target per-user epsilon, at the largest ``q`` over the seeds and the smallest delta.

    The population (hence q) depends on the seed (the public split is drawn per seed): the noise is
    calibrated at the largest q over the seeds, so every seed's run meets each target, and at the
    delta of the largest population (the smallest delta, so delta < 1/N for every seed)."""
    from fl.accounting.delta import population_delta
    from fl.accounting.user_level import sampling_rate
    from fl.cohort import population_sizes

    populations = {
        s: population_sizes(central_cfg.data, replace(central_cfg.users, seed=s), central_cfg.release.level)[0]
        for s in seed_list
    }
    num_users = min(populations.values())
    q = sampling_rate(float(central_cfg["central-cohort-size"]), num_users)
    rounds = int(central_cfg["num-server-rounds"])
    delta = population_delta(float(central_cfg["central-delta"]), max(populations.values()))
    print(
        f"sanitas: calibrating the noise for per-user epsilon {list(targets)} (q = {q:.4g}, the largest over the "
        f"seeds' {sorted(set(populations.values()))} users; {rounds} rounds; delta {delta:.3g})",
        flush=True,
    )
    noise = central_noise_table(targets, q, rounds, delta)
    return Calibration(populations, num_users, q, rounds, delta, noise)


def _run_targets(
    runs: Sequence[sw.Run],
    noise: Mapping[float, float],
    points: Mapping[int, Sequence[tuple[Mapping[str, Any], float]]],
) -> dict[str, float]:
    """Each run's intended per-user epsilon: a user-level central run's target, a local run's whole-record
    total (among its seed's points, ``points[seed]``)."""
    by_noise = {f"{z:.6g}": t for t, z in noise.items()}
    run_targets = {
        r.name: by_noise[f"{r.values['central-noise-multiplier']:.6g}"]
        for r in runs
        if r.values.get("mode") == "central" and r.values.get("central-unit") == "user"
    }
    for r in runs:
        total = point_total(r, points.get(r.seed, ())) if r.values.get("mode") == "local" else None
        if total is not None:
            run_targets[r.name] = total
    return run_targets


def _check_central(central_cfg: config_mod.RunConfig, noise: Mapping[float, float], seed: int) -> dict[str, Any]:
    """Emulate the user-level central points on public data (:mod:`simulations.drivers.central_check`);
    raises, naming what to change, when one learns nothing there."""
    from simulations.drivers.central_check import check_central_points

    checked = check_central_points(central_cfg, dict(noise), seed)
    note = checked.get("unchecked") or (
        f"learn on public data ({len(checked['emulations'])} emulated, server-learning-rate "
        f"{checked['server_learning_rate']:g})"
    )
    print(f"sanitas: central points: {note}", flush=True)
    return checked


def _collect(runs: Sequence[sw.Run], sweep_dir: Path) -> list[dict[str, Any]]:
    """``--collect``: run nothing; name the runs without a summary (ConfigError when none has one)."""
    missing = [r.name for r in runs if read_json(sweep_dir / r.name / "summary.json") is None]
    print(f"sanitas: collecting {len(runs) - len(missing)} of {len(runs)} runs from {sweep_dir}", flush=True)
    for run_name in missing:
        print(f"sanitas: not run yet: {run_name}", file=sys.stderr)
    if len(missing) == len(runs):
        raise config_mod.ConfigError(f"--collect: none of the {len(runs)} runs has finished in {sweep_dir}")
    return [{"status": "ok"}]


def _run_all(
    config: str,
    runs: Sequence[sw.Run],
    sets: Sequence[str],
    sweep_dir: Path,
    jobs: int,
    timeout: float | None,
    progress: bool,
) -> list[dict[str, Any]]:
    """Every run of the plan through the sweep (warm workers; an interrupted comparison resumes)."""
    from simulations.runtime.warm import WarmPool

    print(f"sanitas: comparison of {len(runs)} runs into {sweep_dir}", flush=True)
    with WarmPool(jobs) as pool:
        runner = sw.warm_runner(config, sets, sweep_dir, pool, timeout)
        shared = sw.shared_runner(config, sets, sweep_dir, pool, timeout)
        return sw.run_sweep(list(runs), sweep_dir, runner, progress=progress, jobs=jobs, shared=shared)


def _write_outputs(
    config: str, sweep_dir: Path, rows: list[dict[str, Any]], priors: Sequence[float], extra: dict[str, Any]
) -> None:
    """compare.csv, compare.json and compare.png, and the findings table against the majority-class rate."""
    from simulations.drivers.findings import print_findings

    points_out = aggregate(rows)
    majority = max(priors) if priors else None  # the rate a model that learned nothing reaches
    title = f"{Path(config).stem}: local vs central DP per user"
    csv_path, json_path, png = write(
        points_out, sweep_dir, f"{title} (whole record)", majority, extra, rows, "majority class"
    )
    print_findings(points_out, majority, title)
    gain_md, gain_png = _write_gain_tables(Path(config).stem, csv_path, json_path, sweep_dir)
    print(f"sanitas: {csv_path}, {json_path}, {png}, {gain_md} and {gain_png}", flush=True)


def _write_gain_tables(name: str, csv_path: Path, json_path: Path, sweep_dir: Path) -> tuple[Path, Path]:
    """gain_over_public.md and gain_over_public.png: the comparison's points against the public-only line, the
    table and figure of docs/results/federation-gain (:mod:`simulations.outputs.gain_tables`), from compare.csv."""
    import csv

    from simulations.outputs import gain_tables

    with csv_path.open() as f:
        rows = list(csv.DictReader(f))
    doc = json.loads(json_path.read_text())
    title = f"{name}: what the private users add over the public data"
    md, png = sweep_dir / "gain_over_public.md", sweep_dir / "gain_over_public.png"
    md.write_text(gain_tables.table(name, title, rows, doc))
    gain_tables.plot([(name, title, rows)], png)
    return md, png


def _map_dim(cfg: config_mod.RunConfig, d: int) -> int:
    from fl.maps.input_map import map_dim

    return map_dim(cfg.release, d)


def _local_context(cfg: config_mod.RunConfig, seed: int) -> tuple[int, int]:
    """(number of classes, the encoder's dimension d) of the run at ``seed``."""
    from fl.data import datasets as data

    loaded = data.load(cfg.data, replace(cfg.users, seed=seed), cfg.release.level)
    dim = int(getattr(loaded, "dim", 0)) or config_mod.ENCODER_DIMS.get(str(cfg["encoder"]), 0)
    if not dim:
        from fl.encoding.encoder import encoder_dimension

        dim = int(encoder_dimension(str(cfg["encoder"])))
    return int(loaded.num_classes), dim


def _check_label_share(cfg: config_mod.RunConfig, label_share: str) -> None:
    """``--label-share``: ``auto`` (needs public data) or a number in (0, 1)."""
    if label_share != "auto":
        value = config_mod.parse_value(label_share)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
            raise config_mod.ConfigError(f"--label-share must be 'auto' or a number in (0, 1), got {label_share!r}")
    elif not config_mod.has_public(cfg):
        raise config_mod.ConfigError(
            "--label-share auto chooses the label's share of the budget on public data, and the config has none "
            "(no public-size, public-fraction or public-dataset): give --label-share, like 0.1"
        )


#: The maps whose recipe ``--label-share auto`` can choose on public data (fl.maps.recipes emulates them).
EMULATED_MAPS = ("supervised", "projection", "random", "identity")


def _check_local_side(cfg: config_mod.RunConfig, label_share: str) -> None:
    """What the local side must be for compare to split a whole-record budget, checked before any data is
    loaded: a sentence-level config, a sentence mechanism whose pure cost is linear in its epsilon, and (with
    ``--label-share auto``) a map the recipe choice can emulate."""
    from fl.maps.recipes import CostNotLinear, pure_per_unit

    level = config_mod.level_of(cfg)
    if level != "sentence":
        raise config_mod.ConfigError(
            f"compare splits each whole-record budget between the sentence and label mechanisms; this config "
            f"releases at the {level} level ({level}-mechanism = {cfg[f'{level}-mechanism']!r}): use sanitas sweep"
        )
    try:
        pure_per_unit(cfg.release, max(2, int(cfg["map-dim"])), 4)
    except CostNotLinear:
        raise config_mod.ConfigError(
            f"sentence-mechanism = {cfg['sentence-mechanism']!r} has no pure epsilon linear in sentence-epsilon, "
            "so compare cannot split a whole-record budget for it: use a pure sentence mechanism (privunit, ...)"
        ) from None
    except ValueError:
        pass  # another problem of the mechanism (4 classes is a guess here): the run's own check words it
    if label_share == "auto" and cfg["map-in"] not in EMULATED_MAPS:
        raise config_mod.ConfigError(
            f"--label-share auto chooses the recipe on public data, which cannot emulate map-in = {cfg['map-in']!r}: "
            "give --label-share (like 0.1) or use map-in = 'supervised'"
        )


def _check_seed_sets(sets: Sequence[str], central_sets: Sequence[str]) -> None:
    """``seed`` or ``noise-seed`` in ``--set`` / ``--central-set``: refused before any tuning (``--seeds`` sets
    both of every run)."""
    for flag, items in (("--set", sets), ("--central-set", central_sets)):
        for item in items:
            key = override_key(item)
            if key in SEED_KEYS:
                raise config_mod.ConfigError(
                    f"{flag} {item}: compare sets seed and noise-seed of every run from --seeds; "
                    f"remove it and use --seeds (e.g. --seeds {item.split('=', 1)[-1].strip() or '1'})"
                )


def _check_accounting_delta(sets: Sequence[str]) -> None:
    """``accounting-delta`` is compare's to set: the local points account at the central side's delta."""
    if any(split_override(item, "--set")[0] == "accounting-delta" for item in sets):
        raise config_mod.ConfigError(
            "compare sets accounting-delta of the local points to the central side's delta (their shuffled "
            "figures then share it); set central-delta instead"
        )


@dataclass(frozen=True)
class Recipe:
    """What a local point's recipe chose for one whole-record budget on one seed's public draw: the label's
    share of the budget and the map-dim (the config's when the recipe does not choose it)."""

    label_share: float
    map_dim: int


#: The file in the comparison folder keeping each seed's chosen recipes, so that a resumed or collected
#: comparison does not choose them again (a seed whose tuning config or grid changed chooses again).
RECIPES_FILE = "recipes.json"


def _seed_config(config: str, sets: Sequence[str], sweep_dir: Path, seed: int) -> config_mod.RunConfig:
    """The config resolved at ``seed`` (``seed`` and ``noise-seed``), as the seed's runs resolve it."""
    run = sw.Run("probe", dict.fromkeys(SEED_KEYS, str(seed)), dict.fromkeys(SEED_KEYS, seed))
    return config_mod.as_run_config(sw.resolve_run(config, run, sets, sweep_dir))


def _recipes(
    config: str,
    sets: Sequence[str],
    sweep_dir: Path,
    cfg: config_mod.RunConfig,
    seeds: Sequence[int],
    totals: Sequence[float],
    label_share: str,
    num_classes: int,
) -> dict[int, dict[float, Recipe]]:
    """Each seed's recipe per whole-record budget: the given ``--label-share`` at the config's map-dim, or
    (``auto``) the recipe chosen on **that seed's** public draw (the config resolved at the seed, as its
    runs are: :func:`_choose`), so that no seed's recipe is chosen on texts that are another seed's private
    users. Kept in :data:`RECIPES_FILE`, reused while a seed's tuning config and grid are unchanged."""
    if label_share != "auto":  # checked by _check_label_share where compare starts
        given = Recipe(float(config_mod.parse_value(label_share)), int(cfg["map-dim"]))
        return {s: dict.fromkeys(totals, given) for s in seeds}
    import hashlib

    path = sweep_dir / RECIPES_FILE
    stored = read_json(path) or {}
    out: dict[int, dict[float, Recipe]] = {}
    for seed in seeds:
        seed_cfg = _seed_config(config, sets, sweep_dir, seed)
        grid = _grid(seed_cfg)
        tuning = {k: v for k, v in seed_cfg.items() if k not in ("run-name", "out-dir")}  # not what tuning reads
        inputs = json.dumps({"config": tuning, "grid": [c.name for c in grid]}, sort_keys=True, default=str)
        digest = hashlib.sha256(inputs.encode()).hexdigest()
        kept = stored.get(str(seed)) or {}
        known = kept.get("recipes", {}) if kept.get("inputs") == digest else {}
        missing = [t for t in totals if f"{t:g}" not in known]
        chosen = _choose(seed_cfg, missing, num_classes, grid) if missing else {}
        recipes = {f"{t:g}": {"label_share": r.label_share, "map_dim": r.map_dim} for t, r in chosen.items()}
        stored[str(seed)] = {"inputs": digest, "recipes": {**known, **recipes}}
        kept_recipes = stored[str(seed)]["recipes"]
        out[seed] = {
            t: Recipe(float(kept_recipes[f"{t:g}"]["label_share"]), int(kept_recipes[f"{t:g}"]["map_dim"]))
            for t in totals
        }
        if missing:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(stored, indent=2, sort_keys=True) + "\n")
        if len(missing) < len(totals):
            print(f"sanitas: seed {seed}: {len(totals) - len(missing)} recipe(s) as chosen before ({path})", flush=True)
    _print_recipes(out, totals, int(cfg["map-dim"]))
    return out


def _print_recipes(chosen: Mapping[int, Mapping[float, Recipe]], totals: Sequence[float], map_dim: int) -> None:
    """The recipe table: per whole-record epsilon, each seed's label share and map-dim."""
    seeds = list(chosen)
    print("sanitas: recipes chosen on each seed's own public draw (label share / map-dim):", flush=True)
    print("  epsilon " + "".join(f"{'seed ' + str(s):>14}" for s in seeds), flush=True)
    for t in totals:
        cells = "".join(f"{f'{chosen[s][t].label_share:g} / {chosen[s][t].map_dim}':>14}" for s in seeds)
        print(f"  {t:<7g} {cells}", flush=True)
    if any(r.map_dim != map_dim for by in chosen.values() for r in by.values()):
        print(f"  (the config's map-dim is {map_dim}; each point's noise-free ceiling runs at its own)", flush=True)


def _grid(cfg: config_mod.RunConfig) -> list[Any]:
    """The candidates ``--label-share auto`` chooses among for ``cfg``: each share of
    ``fl.maps.recipes.LABEL_SHARES`` with the config's recipe, or for a class-means config on the public
    projection the class-means grid (:func:`fl.maps.recipes.class_means_candidates`: map-dim with the share)."""
    from fl.maps import recipes

    if cfg["server-model"] == "class-means" and cfg["map-in"] == "projection":
        return recipes.class_means_candidates()  # the projection's dimension is chosen with the share
    keys = {k: cfg[k] for k in ("map-in", "map-dim", "map-scale", "map-seed", "sentence-mechanism", "sentence-options")}
    keys["label-mechanism"] = cfg["label-mechanism"] if cfg["label-mechanism"] != "none" else "rr"
    keys["server-model"] = cfg["server-model"]
    return [recipes.Candidate(f"label-share {s:g}", keys, s) for s in recipes.LABEL_SHARES]


def _choose(
    cfg: config_mod.RunConfig, totals: Sequence[float], num_classes: int, grid: Sequence[Any]
) -> dict[float, Recipe]:
    """The recipe of ``grid`` each whole-record budget scores best with on ``cfg``'s public data
    (:func:`fl.maps.recipes.choose`: the public draw, its hold-out and its emulated population are the
    seed's of ``cfg``)."""
    import torch

    from fl.cohort import population_sizes
    from fl.data import datasets as data
    from fl.encoding.encoder import best_device
    from fl.encoding.public_tuning import TuningSpec, tuned_encoder
    from fl.maps import recipes
    from fl.maps.public_start import PublicSpec, public_embeddings

    encoder = tuned_encoder(TuningSpec.from_config(cfg), best_device(cfg.server.device))
    x, y = public_embeddings(replace(PublicSpec.from_config(cfg), encoder=encoder), torch.device("cpu"))
    # the hold-out keeps each source group on one side
    groups = data.public_groups(cfg.data, cfg.users, cfg.release.level)
    users = population_sizes(cfg.data, cfg.users, cfg.release.level)[0]
    out = {}
    for total in totals:
        best, _ = recipes.choose(
            recipes.RecipeSpec.from_config(cfg), total, x, y, num_classes, users, groups, candidates=grid
        )
        out[total] = Recipe(float(best.candidate.label_share), int(best.values["map-dim"]))
        print(
            f"sanitas: seed {cfg['seed']}: label share {out[total].label_share:g} of epsilon {total:g}"
            + (f", map-dim {out[total].map_dim}" if out[total].map_dim != cfg["map-dim"] else "")
            + ", chosen on the seed's public data",
            flush=True,
        )
    return out
