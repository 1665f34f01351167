"""The plan of ``sanitas compare``: every run of a comparison, built once before anything runs.

:func:`build_plan` turns the command's flags (:class:`CompareRequest`, checked while the arguments were parsed)
into a :class:`ComparisonPlan`: the two sides' configs (like for like, :data:`LIKE_FOR_LIKE`), each seed's
inputs (:class:`simulations.drivers.inputs.RunInputs`, the one door to its data), the central noise per target
(:mod:`simulations.drivers.compare_calibration`), each seed's local recipe
(:mod:`simulations.drivers.compare_recipes`), the runs (:func:`plan`: central, local points, noise-free
references, once per seed) and each run's config, resolved once (:func:`simulations.drivers.runner.resolve_runs`).
Nothing is written while a plan is built: a refused plan leaves no file behind. The runner executes it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fl import config as config_mod
from simulations.drivers.compare_calibration import Calibration, calibrate
from simulations.drivers.compare_recipes import Choice, choose_recipes, given_recipes, print_recipes
from simulations.drivers.grid import SEED_KEYS, GridAxis, Run, expand, with_seeds
from simulations.drivers.inputs import RunInputs
from simulations.drivers.runner import resolve_run, resolve_runs
from simulations.runtime.overrides import split_override

if TYPE_CHECKING:  # numpy: compare_levels loads only when a plan is built (``sanitas --help`` imports this module)
    from simulations.drivers.compare_levels import LevelPlan


@dataclass(frozen=True)
class CompareRequest:
    """The flags of ``sanitas compare``, parsed and checked (:mod:`simulations.cli.compare`)."""

    config: str
    totals: list[float]  # --epsilons: whole-record pure epsilons per user of the local points
    targets: list[float]  # --central-epsilons: target per-user epsilons of the user-level central points
    seeds: list[int]
    out: str
    sets: list[str] = field(default_factory=list)
    central_sets: list[str] = field(default_factory=list)
    name: str | None = None
    node_multipliers: list[str] = field(default_factory=list)
    central_trains: list[str] = field(default_factory=lambda: ["head"])
    label_share: float | str = "auto"
    labels_clear: bool = False
    central_check: bool = True
    collect: bool = False
    jobs: int = 1
    timeout: float | None = None
    progress: bool = True
    attacks: list[str] = field(default_factory=list)
    label_epsilon: float | None = None  # --label-epsilon: the labels' epsilon at the word and document levels
    track: list[str] = field(default_factory=list)  # --track: trackers the runs are logged to afterwards
    tracking_uri: str | None = None

    @property
    def folder(self) -> Path:
        """The comparison's folder, ``OUT/NAME``."""
        return Path(self.out).expanduser().resolve() / (self.name or f"{Path(self.config).stem}-compare")


@dataclass(frozen=True)
class ComparisonPlan:
    """Every run of a comparison and what it was built from."""

    request: CompareRequest
    sets: list[str]  # --set with the like-for-like keys
    central_sets: list[str]  # --central-set with the local-only keys put back
    local_cfg: config_mod.RunConfig  # the local side at the config's seed
    central_cfg: config_mod.RunConfig  # the central side at the config's seed
    local_inputs: dict[int, RunInputs]  # each seed's local side
    calibration: Calibration
    recipes: Choice
    points: dict[int, list[tuple[dict[str, Any], float]]]  # each seed's local points: keys, whole-record epsilon
    runs: list[Run]
    resolved: dict[str, Mapping[str, Any]]  # each run's config, resolved once
    run_targets: dict[str, float]  # each run's intended per-user epsilon
    levels: LevelPlan | None = None  # at the word, document and label levels: each point's two units


#: What every comparison sets unless its command line says otherwise, so that the two sides differ in the privacy
#: model alone: local runs also score on-device inference (the model applied to the clean test input, as the
#: central model is scored), and central runs start from the public data the local side fits on.
LIKE_FOR_LIKE = ("clean-evaluation=true", 'central-start="public"')

#: Keys of the local class-means protocol that a central run has no use for (fl.maps.cohorts): compare sets them
#: back to their defaults on the central side, so a local config that sets them compares as it is.
LOCAL_ONLY = ("cohorts", "cohort-map-dim", "class-means-covariance")

#: The maps whose recipe ``--label-share auto`` can choose on public data (fl.maps.recipes emulates them).
EMULATED_MAPS = ("supervised", "projection", "random", "identity")


def build_plan(request: CompareRequest) -> ComparisonPlan:
    """The comparison's plan (see the module docstring); raises ``ConfigError`` naming what to change, and
    writes nothing."""
    config, folder, seeds = request.config, request.folder, request.seeds
    resolve_run(config, Run("probe", {}, {}), [], folder)  # the file's own problems name the file's keys
    given = _resolved(config, request.sets, folder, "--set")
    sets = like_for_like(request.sets, public=config_mod.has_public(given))
    local_cfg = _resolved(config, sets, folder, "--set")
    from simulations.drivers.compare_levels import release_level

    level = release_level(local_cfg)
    if level != "sentence":
        return _build_level_plan(request, level, sets, local_cfg)
    if request.label_epsilon is not None:
        raise config_mod.ConfigError(
            "--label-epsilon sets the labels' epsilon at the word and document levels; this config releases at the "
            "sentence level, where --label-share splits each whole-record budget: remove it"
        )
    check_local_side(local_cfg, request.label_share)
    if not config_mod.has_public(local_cfg) and local_cfg["central-start"] == "seeded":
        print("sanitas: the config has no public data: central runs start from a seeded head", file=sys.stderr)
    central_sets = [*request.central_sets, *local_only_resets(local_cfg, request.central_sets)]
    central_cfg = _resolved(config, [*sets, *central_sets], folder, "--central-set")
    check_strategy_both_sides(local_cfg, central_cfg)  # before any data: a strategy one side cannot run
    local_inputs = {s: RunInputs(resolve_run(config, _seed_probe(s), sets, folder)) for s in seeds}
    cal = _calibrated(central_cfg, seeds, request.targets)
    first = local_inputs[seeds[0]]
    if request.label_share == "auto":
        recipes = choose_recipes(local_inputs, request.totals, folder)
    else:
        recipes = given_recipes(float(request.label_share), local_cfg["map-dim"], seeds, request.totals)
    print_recipes(recipes.by_seed, request.totals, int(local_cfg["map-dim"]))
    points = {s: _seed_points(request, local_cfg, recipes, s, first) for s in seeds}
    runs = _planned(request, points, cal, central_sets, clear_options=bool(local_cfg["sentence-options"]))
    resolved = resolve_runs(config, runs, sets, folder)
    targets = run_targets(runs, cal.noise, points)
    return ComparisonPlan(
        request, sets, central_sets, local_cfg, central_cfg, local_inputs, cal, recipes, points, runs, resolved, targets
    )


def _build_level_plan(
    request: CompareRequest, level: str, sets: list[str], local_cfg: config_mod.RunConfig
) -> ComparisonPlan:
    """The plan at the word, document or label level (:mod:`simulations.drivers.compare_levels`): ``--epsilons``
    are the level's epsilons, each point carries its guarantee per unit and per user, central runs are added at
    the per-user figures at most the cap, and the noise-free references turn the level's mechanism off. At the
    document level every run drops the documents the level drops (``short-documents = "drop-every-level"``), so
    that central runs and references see the same users. Writes nothing."""
    from simulations.drivers.compare_levels import (
        build_level_plan,
        check_level_side,
        print_level_plan,
        reference_resets,
    )
    from simulations.drivers.compare_recipes import Choice

    config, folder, seeds = request.config, request.folder, request.seeds
    check_level_side(local_cfg, level, request.label_share, request.label_epsilon, request.central_trains)
    if level == "document":
        sets = [*sets, 'short-documents="drop-every-level"']
        local_cfg = _resolved(config, sets, folder, "--set")
    given = {split_override(item, "--central-set")[0] for item in request.central_sets}
    resets = [f"{k}={v}" for k, v in reference_resets(local_cfg, level) if k not in given]
    central_sets = [*request.central_sets, *local_only_resets(local_cfg, request.central_sets), *resets]
    central_cfg = _resolved(config, [*sets, *central_sets], folder, "--central-set")
    check_strategy_both_sides(local_cfg, central_cfg)
    local_inputs = {s: RunInputs(resolve_run(config, _seed_probe(s), sets, folder)) for s in seeds}
    first = local_inputs[seeds[0]]
    levels = build_level_plan(
        local_cfg,
        level,
        request.totals,
        request.label_epsilon,
        request.labels_clear,
        {s: inputs.dataset for s, inputs in local_inputs.items()},
        first.num_classes,
    )
    print_level_plan(levels)
    cal = _calibrated(central_cfg, seeds, sorted({*request.targets, *levels.central_targets}))
    points = {s: [(keys, float(keys[f"{level}-epsilon"])) for keys in levels.points] for s in seeds}
    runs = _planned(request, points, cal, central_sets, reference_resets=reference_resets(local_cfg, level))
    resolved = resolve_runs(config, runs, sets, folder)
    # the local points are not whole-record budgets here: their rows are named by the level's epsilon
    run_targets_ = run_targets(runs, cal.noise, {})
    recipes = Choice({s: {} for s in seeds}, {}, False)
    return ComparisonPlan(
        request,
        sets,
        central_sets,
        local_cfg,
        central_cfg,
        local_inputs,
        cal,
        recipes,
        points,
        runs,
        resolved,
        run_targets_,
        levels,
    )


def _calibrated(central_cfg: config_mod.RunConfig, seeds: Sequence[int], targets: Sequence[float]) -> Calibration:
    """The central noise for ``targets`` over the seeds' populations of the central side (both levels' plans)."""
    populations = {s: RunInputs.at_seed(central_cfg, s).train_users for s in seeds}
    return calibrate(
        populations,
        central_cfg["central-cohort-size"],
        central_cfg["num-server-rounds"],
        central_cfg["central-delta"],
        list(targets),
    )


def _planned(
    request: CompareRequest,
    points: Mapping[int, Sequence[tuple[dict[str, Any], float]]],
    cal: Calibration,
    central_sets: Sequence[str],
    **extra: Any,
) -> list[Run]:
    """:func:`plan` with the request's seeds and central options, each seed's points and the calibrated noise,
    the local points at the central delta (both levels' plans; ``extra``: what one level adds)."""
    return plan(
        {s: [keys for keys, _ in points[s]] for s in request.seeds},
        cal.noise,
        request.seeds,
        central_sets,
        request.node_multipliers,
        request.central_trains,
        cal.delta,
        local_delta=cal.delta,
        **extra,
    )


def check_strategy_both_sides(local_cfg: config_mod.RunConfig, central_cfg: config_mod.RunConfig) -> None:
    """A ``strategy`` (``--set strategy=...``) is run on both sides: loaded, its options checked and allowed in
    each mode (``strategies.loading.check_strategy``), or refused in one line naming the side that cannot."""
    if not local_cfg["strategy"] and not central_cfg["strategy"]:
        return
    from strategies.loading import check_strategy  # imports Flower: only when a strategy is named

    for side, cfg in (("local", local_cfg), ("central", central_cfg)):
        try:
            check_strategy(cfg, mode=side)
        except ValueError as err:
            raise config_mod.ConfigError(f"--set strategy, {side} side: {err}") from None


def strategy_label(cfg: Mapping[str, Any]) -> str:
    """How tables and plots name the configured strategy (empty: Sanitas' own)."""
    spec = str(cfg["strategy"])
    return spec.rpartition(":")[2] if spec else ""


def _resolved(config: str, sets: Sequence[str], folder: Path, flag: str) -> config_mod.RunConfig:
    """The config with ``sets`` applied; a refusal names ``flag``, the option whose items made it bad (the file
    alone resolves)."""
    try:
        return config_mod.as_run_config(resolve_run(config, Run("probe", {}, {}), sets, folder))
    except config_mod.ConfigError as err:
        raise config_mod.ConfigError(f"{flag}: {err}") from None


def _seed_probe(seed: int) -> Run:
    """A run that only sets ``seed`` and ``noise-seed`` (the config resolved at a seed, as its runs are)."""
    return Run("probe", dict.fromkeys(SEED_KEYS, str(seed)), dict.fromkeys(SEED_KEYS, seed))


def _seed_points(
    request: CompareRequest, local_cfg: config_mod.RunConfig, recipes: Choice, seed: int, first: RunInputs
) -> list[tuple[dict[str, Any], float]]:
    """The local points of ``seed``: its recipe's share and map-dim for each whole-record budget, and the keys the
    recipe sets beside them (:meth:`simulations.drivers.compare_recipes.Recipe.keys`: with cohorts the
    cohort-map-dim and covariance it chose, for a public-only fallback the server that ships that model)."""
    from fl.maps.input_map import map_dim

    chosen = recipes.by_seed[seed]
    return local_points(
        local_cfg,
        request.totals,
        {t: r.label_share for t, r in chosen.items()},
        map_dim(local_cfg.release, first.dim),
        first.num_classes,
        request.labels_clear,
        {t: r.map_dim for t, r in chosen.items() if r.map_dim != local_cfg["map-dim"]},
        {t: r.keys(local_cfg) for t, r in chosen.items()},
    )


def _axis(key: str, values: Sequence[str]) -> GridAxis:
    texts = tuple(v.strip() for v in values)
    return GridAxis(key, texts, tuple(config_mod.parse_value(t) for t in texts))


def _fixed(items: Sequence[str]) -> list[GridAxis]:
    return [_axis(key, [value]) for key, value in (split_override(item, "--central-set") for item in items)]


def _seeded(runs: Sequence[Run], seeds: Sequence[int]) -> list[Run]:
    """Each run once per seed, with ``seed`` and ``noise-seed`` both set to it (paired, not crossed):
    :func:`simulations.drivers.grid.with_seeds`, the names keeping both keys (``__seed=1__noise-seed=1``,
    the folders of comparisons already on disk)."""
    return with_seeds(runs, seeds, name_keys=SEED_KEYS)


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
    reference_resets: Sequence[tuple[str, str]] = (),
) -> list[Run]:
    """The runs of a comparison, in this order: user-level central runs (one per target epsilon, at
    the noise ``central_noise[target]``, once per ``central_trains`` entry: ``"head"`` and/or
    ``"encoder"``), optional node-level runs, local points, the non-private references; each once per seed.
    With the head only (the default) the run names carry no ``central-train``.

    ``epsilons``: sentence epsilons (texts), or one mapping of run-config keys per local point (the
    keys that spend a whole-record budget: :func:`local_points`), the same for every seed, or per seed (a
    mapping seed -> its points' keys, as many for every seed: the recipe chosen on that seed's own public
    draw). ``central_delta``: the delta every central run accounts at (the one its noise was calibrated
    for), set in the runs when given; ``local_delta``: the ``accounting-delta`` of the local points (their
    shuffled figures' delta), set in them when given; ``reference_resets``: (key, TOML value) pairs the references
    set too (the word or document mechanism turned off, :func:`simulations.drivers.compare_levels.reference_resets`).

    The non-private references (``sentence-mechanism = "none"``, labels in the clear: the same pipeline
    without noise) are one per seed and distinct ``map-dim`` of that seed's points, each with the cohort-map-dim
    and covariance the first of those points sets (:func:`_cohort_keys`): each local point's noise-free ceiling
    (:func:`simulations.drivers.compare_outputs.add_noise_free_ceilings`)."""
    if not epsilons or not central_noise:
        raise config_mod.ConfigError("compare needs at least one local epsilon and one central epsilon")
    if not seeds or len(set(seeds)) != len(seeds):
        raise config_mod.ConfigError(f"compare needs distinct seeds, got {list(seeds)}")
    by_seed = epsilons if isinstance(epsilons, Mapping) else dict.fromkeys(seeds, epsilons)
    if set(by_seed) != set(seeds) or len({len(by_seed[s]) for s in seeds}) != 1 or not by_seed[seeds[0]]:
        raise ValueError(f"local points for seeds {sorted(by_seed)}, as many each, are needed for seeds {seeds}")
    central = _seeded(
        expand(_central_blocks(central_noise, central_sets, node_multipliers, central_trains, central_delta)), seeds
    )
    # Each seed's local points with that seed's keys; listed point by point, seeds fastest (the order of old).
    local = {s: _seeded(expand(_local_blocks(by_seed[s], local_delta)), [s]) for s in seeds}
    points = [local[s][i] for i in range(len(local[seeds[0]])) for s in seeds]
    dims = {s: list(dict.fromkeys(_point_map_dim(keys) for keys in by_seed[s])) for s in seeds}
    references = [
        run
        for dim in dict.fromkeys(d for s in seeds for d in dims[s])
        for s in seeds
        if dim in dims[s]
        for run in _seeded(
            expand([_reference(dim, clear_options, _cohort_keys(by_seed[s], dim), reference_resets)]), [s]
        )
    ]
    return [*central, *points, *references]


def _central_blocks(
    central_noise: Mapping[float, float],
    central_sets: Sequence[str],
    node_multipliers: Sequence[str],
    central_trains: Sequence[str],
    central_delta: float | None,
) -> list[list[GridAxis]]:
    """The grid blocks of the central runs: user level at each target's noise (per ``central_trains`` entry),
    then node level at ``node_multipliers``."""
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
    return blocks


def _local_blocks(
    points: Sequence[str] | Sequence[Mapping[str, Any]], local_delta: float | None
) -> list[list[GridAxis]]:
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


#: The keys of a recipe's two-cohort protocol that its noise-free reference runs with too (the recipe, no noise).
COHORT_KEYS = ("cohort-map-dim", "class-means-covariance")


def _cohort_keys(points: Sequence[str] | Sequence[Mapping[str, Any]], map_dim: int | None) -> dict[str, Any]:
    """The :data:`COHORT_KEYS` that the first of a seed's local points at ``map_dim`` sets (its recipe's choice):
    the noise-free reference at that map-dim runs with them, so that it is that recipe without noise and its
    public-only model is the point's. (A seed's points at one map-dim with other cohort keys share it.)"""
    for keys in points:
        if isinstance(keys, Mapping) and _point_map_dim(keys) == map_dim:
            return {k: keys[k] for k in COHORT_KEYS if k in keys}
    return {}


def _reference(
    map_dim: int | None,
    clear_options: bool,
    cohort_keys: Mapping[str, Any] | None = None,
    resets: Sequence[tuple[str, str]] = (),
) -> list[GridAxis]:
    """The non-private reference at ``map_dim`` (None: the config's): the same local pipeline, no noise, with the
    recipe's ``cohort_keys`` (cohort-map-dim, class-means-covariance) where it chose them."""
    reference = [
        _axis("mode", ['"local"']),
        _axis("sentence-mechanism", ['"none"']),
        _axis("label-mechanism", ['"none"']),
    ]
    if clear_options:  # the config's sentence-options belong to its mechanism, not to "none"
        reference.append(_axis("sentence-options", ['""']))
    if map_dim is not None:
        reference.append(_axis("map-dim", [str(map_dim)]))
    reference += [_axis(k, [_text(v)]) for k, v in (cohort_keys or {}).items()]
    reference += [_axis(k, [v]) for k, v in resets]  # the word or document mechanism off (compare_levels)
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
    recipe_keys: Mapping[float, Mapping[str, Any]] | None = None,
) -> list[tuple[dict[str, Any], float]]:
    """The local runs' keys for whole-record pure epsilons ``totals`` per user: labels through the config's
    label mechanism (randomized response when it has none) at ``label_share`` of each total (one share,
    or one per total), the rest to the embedding (:func:`fl.maps.recipes.split_budget`); with
    ``labels_clear`` also each total spent on the embedding alone, labels in the clear (an
    embedding-only figure); ``map_dims``: the map-dim of the totals whose recipe chose another than the
    config's; ``recipe_keys``: further keys of each total's recipe (cohort-map-dim, class-means-covariance, a
    fallback's strategy), set in its points after map-dim. Returns each point's keys with its whole-record
    epsilon."""
    from fl.maps import recipes

    protected = cfg["label-mechanism"] if cfg["label-mechanism"] != "none" else "rr"
    points: list[tuple[dict[str, Any], float]] = []
    for total in totals:
        share = label_share[total] if isinstance(label_share, Mapping) else float(label_share)
        m_prime = int(map_dims[total]) if map_dims and total in map_dims else input_dim
        variants = [
            {
                "label-mechanism": protected,
                **recipes.split_budget(
                    replace(cfg.release, label_mechanism=protected), total, share, m_prime, num_classes
                ),
            }
        ]
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
            ordered.update((recipe_keys or {}).get(total, {}))
            points.append((ordered, float(total)))
    return points


def point_total(run: Run, points: Sequence[tuple[Mapping[str, Any], float]]) -> float | None:
    """The whole-record epsilon of the local point ``run`` is a run of (its keys as the grid wrote them)."""
    for keys, total in points:
        if all(k in run.values and _text(run.values[k]) == _text(v) for k, v in keys.items()):
            return total
    return None


def run_targets(
    runs: Sequence[Run],
    noise: Mapping[float, float],
    points: Mapping[int, Sequence[tuple[Mapping[str, Any], float]]],
) -> dict[str, float]:
    """Each run's intended per-user epsilon: a user-level central run's target, a local run's whole-record
    total (among its seed's points, ``points[seed]``)."""
    by_noise = {f"{z:.6g}": t for t, z in noise.items()}
    targets = {
        r.name: by_noise[f"{r.values['central-noise-multiplier']:.6g}"]
        for r in runs
        if r.values.get("mode") == "central" and r.values.get("central-unit") == "user"
    }
    for r in runs:
        total = point_total(r, points.get(r.seed, ())) if r.values.get("mode") == "local" else None
        if total is not None:
            targets[r.name] = total
    return targets


def check_local_side(cfg: config_mod.RunConfig, label_share: float | str) -> None:
    """What the local side must be for compare to split a whole-record budget, checked before any data is
    loaded: ``--label-share auto`` needs public data and a map the recipe choice can emulate; the config (at the
    sentence level: the other levels are :mod:`simulations.drivers.compare_levels`) releases through a mechanism
    whose pure cost is linear in its epsilon."""
    from fl.maps.recipes import CostNotLinear, pure_per_unit

    if label_share == "auto" and not config_mod.has_public(cfg):
        raise config_mod.ConfigError(
            "--label-share auto chooses the label's share of the budget on public data, and the config has none "
            "(no public-size, public-fraction or public-dataset): give --label-share, like 0.1"
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
