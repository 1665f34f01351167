"""Each seed's local recipe for ``sanitas compare``: per whole-record budget, the label's share of it (and for
a class-means config the map-dim; with ``cohorts`` > 1 also the earlier cohorts' map-dim and the discriminant's
covariance), chosen on **that seed's own** public draw (:mod:`fl.maps.recipes`), never on texts that are another
seed's private users or on the test split; kept in ``recipes.json`` so a resumed or collected comparison does not
choose again. A choice whose every candidate falls to or below the public-only model when emulated there is a
*fallback*: its point ships the public-only model (:mod:`simulations.drivers.compare_fallback`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fl import config as config_mod
from simulations.drivers.inputs import RunInputs
from simulations.outputs.writers import read_json


@dataclass(frozen=True)
class Recipe:
    """What a local point's recipe chose for one whole-record budget on one seed's public draw.

    ``label_share``: the label's share of the budget; ``map_dim``; ``cohort_map_dim`` and
    ``class_means_covariance``: the two-cohort protocol's options (``None``: the config's, not chosen);
    ``fallback``: no candidate beat the public-only model on the public hold-outs when emulated at this budget
    on the public draw (``fl.maps.recipes.FALLBACK_STANDARD_ERRORS``), so the point ships the public-only model
    (its users still release as the share and dims say, and are charged);
    ``emulated_accuracy`` / ``public_only_accuracy``: the chosen candidate's and the strongest public-only model's
    mean accuracy on the public hold-outs (``None``: not scored); ``holdout_lacks``: the classes of the public draw
    that some hold-out lacked (a class of one source group stays in the fitting part)."""

    label_share: float
    map_dim: int
    cohort_map_dim: int | None = None
    class_means_covariance: str | None = None
    fallback: bool = False
    emulated_accuracy: float | None = None
    public_only_accuracy: float | None = None
    holdout_lacks: tuple[int, ...] = field(default=())

    def keys(self, cfg: Mapping[str, Any]) -> dict[str, Any]:
        """The run-config keys this recipe sets beside the budget split and map-dim, where they differ from
        ``cfg``'s: ``cohort-map-dim``, ``class-means-covariance``, and for a fallback the server that ships the
        public-only model (``strategy``, :data:`simulations.drivers.compare_fallback.FALLBACK_STRATEGY`; a
        :class:`~fl.config.ConfigError` when ``cfg`` names a strategy of its own, which the fallback would replace)."""
        from simulations.drivers.compare_fallback import FALLBACK_STRATEGY

        out: dict[str, Any] = {}
        if self.cohort_map_dim is not None and self.cohort_map_dim != cfg["cohort-map-dim"]:
            out["cohort-map-dim"] = int(self.cohort_map_dim)
        if self.class_means_covariance is not None and self.class_means_covariance != cfg["class-means-covariance"]:
            out["class-means-covariance"] = self.class_means_covariance
        if self.fallback:
            if cfg["strategy"]:  # the fallback is a server of its own: it cannot run beside the user's strategy
                raise config_mod.ConfigError(
                    f"a recipe falls back to the public-only model, whose server replaces strategy = "
                    f"{str(cfg['strategy'])[:40]!r}: drop that strategy, or give --label-share to fix the recipe"
                )
            out["strategy"] = FALLBACK_STRATEGY
        return out

    def describe(self) -> str:
        """The recipe in a table cell: ``share / map-dim`` (with cohorts ``/ cohort-map-dim covariance``), or for a
        fallback ``share / map-dim [/ cohort-map-dim] public-only fallback`` (a fit of no release reads no
        covariance)."""
        text = f"{self.label_share:g} / {self.map_dim}"
        if self.cohort_map_dim is not None:
            text += f" / {self.cohort_map_dim}"
        if self.class_means_covariance is not None and not self.fallback:  # a fallback reads no covariance
            text += f" {self.class_means_covariance}"
        return text + (" public-only fallback" if self.fallback else "")


#: The file in the comparison folder keeping each seed's chosen recipes, so that a resumed or collected
#: comparison does not choose them again (a seed whose tuning config or grid changed chooses again).
RECIPES_FILE = "recipes.json"
#: What the choice is, in the digest of :data:`RECIPES_FILE`: a choice stored by another chooser is made again
#: (issue 65: hold-outs stratified by class, the cohorts' options chosen, the public-only fallback).
CHOOSER = "stratified hold-out, cohort options, public-only fallback unless a candidate beats it"


@dataclass(frozen=True)
class Choice:
    """Each seed's recipe per whole-record budget, and the :data:`RECIPES_FILE` document that keeps them
    (``changed``: it differs from the file on disk, which :meth:`save` then rewrites)."""

    by_seed: dict[int, dict[float, Recipe]]
    document: dict[str, Any]
    changed: bool

    def save(self, folder: Path) -> None:
        """Write :data:`RECIPES_FILE` into ``folder`` when something was chosen anew."""
        if self.changed:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / RECIPES_FILE).write_text(json.dumps(self.document, indent=2, sort_keys=True) + "\n")


def given_recipes(share: float, map_dim: int, seeds: Sequence[int], totals: Sequence[float]) -> Choice:
    """``--label-share`` given as a number: that share at the config's map-dim, for every seed and budget."""
    given = Recipe(float(share), int(map_dim))
    return Choice({s: dict.fromkeys(totals, given) for s in seeds}, {}, False)


def _stored(recipe: Recipe) -> dict[str, Any]:
    """A recipe as :data:`RECIPES_FILE` keeps it."""
    return {**asdict(recipe), "holdout_lacks": list(recipe.holdout_lacks)}


def _read(stored: Mapping[str, Any]) -> Recipe:
    """A recipe kept in :data:`RECIPES_FILE`."""
    return Recipe(**{**stored, "holdout_lacks": tuple(stored.get("holdout_lacks", ()))})


def choose_recipes(inputs: Mapping[int, RunInputs], totals: Sequence[float], folder: Path) -> Choice:
    """``--label-share auto``: each seed's recipe per budget, chosen on the seed's own public draw
    (``inputs[seed]``: the local config resolved at the seed, as its runs are); the choices kept in
    ``folder``'s :data:`RECIPES_FILE` are reused while a seed's tuning config, grid and :data:`CHOOSER` are
    unchanged. Nothing is written here (:meth:`Choice.save`)."""
    stored = read_json(folder / RECIPES_FILE) or {}
    out: dict[int, dict[float, Recipe]] = {}
    changed = False
    for seed, seed_inputs in inputs.items():
        grid = candidates(seed_inputs.cfg)
        tuning = {k: v for k, v in seed_inputs.cfg.items() if k not in ("run-name", "out-dir")}  # not read
        digest = hashlib.sha256(
            json.dumps(
                {"config": tuning, "grid": [c.name for c in grid], "chooser": CHOOSER}, sort_keys=True, default=str
            ).encode()
        ).hexdigest()
        kept = stored.get(str(seed)) or {}
        known = kept.get("recipes", {}) if kept.get("inputs") == digest else {}
        missing = [t for t in totals if f"{t:g}" not in known]
        chosen = choose(seed_inputs, missing, grid) if missing else {}
        recipes = {**known, **{f"{t:g}": _stored(r) for t, r in chosen.items()}}
        stored[str(seed)] = {"inputs": digest, "recipes": recipes}
        changed = changed or bool(missing)
        out[seed] = {t: _read(recipes[f"{t:g}"]) for t in totals}
        if len(missing) < len(totals):
            print(f"sanitas: seed {seed}: {len(totals) - len(missing)} recipe(s) as chosen before", flush=True)
    return Choice(out, stored, changed)


def print_recipes(chosen: Mapping[int, Mapping[float, Recipe]], totals: Sequence[float], map_dim: int) -> None:
    """The recipe table: per whole-record epsilon, each seed's label share and map-dim (with cohorts, the
    cohort-map-dim and covariance), and ``public-only fallback`` where the point ships the public-only model."""
    seeds = list(chosen)
    cells = {(s, t): chosen[s][t].describe() for s in seeds for t in totals}
    width = max(14, *(len(c) + 2 for c in cells.values()))
    cohorts = any(r.cohort_map_dim is not None for by in chosen.values() for r in by.values())
    what = "label share / map-dim" + (" / cohort-map-dim covariance" if cohorts else "")
    print(f"sanitas: recipes chosen on each seed's own public draw ({what}):", flush=True)
    print("  epsilon " + "".join(f"{'seed ' + str(s):>{width}}" for s in seeds), flush=True)
    for t in totals:
        print(f"  {t:<7g} " + "".join(f"{cells[(s, t)]:>{width}}" for s in seeds), flush=True)
    if any(r.map_dim != map_dim for by in chosen.values() for r in by.values()):
        print(f"  (the config's map-dim is {map_dim}; each point's noise-free ceiling runs at its own)", flush=True)
    fallbacks = sum(r.fallback for by in chosen.values() for r in by.values())
    if fallbacks:
        print(
            f"  ({fallbacks} point(s) fell back: no recipe beat the public-only model on the public hold-outs when "
            "emulated on the seed's public draw, so those runs ship the public-only class-means model; their users "
            "still release and are charged)",
            flush=True,
        )


def candidates(cfg: config_mod.RunConfig) -> list[Any]:
    """The candidates ``--label-share auto`` chooses among for ``cfg``: each share of
    ``fl.maps.recipes.LABEL_SHARES`` with the config's recipe, or for a class-means config on the public
    projection the class-means grid (:func:`fl.maps.recipes.class_means_grid`: map-dim with the share, and with
    ``cohorts`` > 1 the cohort-map-dim and the covariance too)."""
    from fl.maps import recipes

    if cfg["server-model"] == "class-means" and cfg["map-in"] == "projection":
        return recipes.class_means_grid(int(cfg["cohorts"]))  # the projection's dimension is chosen with the share
    keys = {k: cfg[k] for k in ("map-in", "map-dim", "map-scale", "map-seed", "sentence-mechanism", "sentence-options")}
    keys["label-mechanism"] = cfg["label-mechanism"] if cfg["label-mechanism"] != "none" else "rr"
    keys["server-model"] = cfg["server-model"]
    return [recipes.Candidate(f"label-share {s:g}", keys, s) for s in recipes.LABEL_SHARES]


def recipe_of(best: Any, cfg: config_mod.RunConfig) -> Recipe:
    """The :class:`Recipe` of ``fl.maps.recipes.choose``'s best candidate ``best`` for a config ``cfg``: its share
    and keys, or for a fallback the best candidate's share at the dims the public-only model ships at
    (``extra["fallback_keys"]``) and the config's covariance (a fit of no release reads none)."""
    extra, values = best.extra, best.values
    fallback = bool(extra.get("fallback"))
    dims = {**values, **extra.get("fallback_keys", {})} if fallback else values
    # A fallback fits no release, so it reads no covariance: its run keeps the config's (and a shorter name).
    covariance = cfg["class-means-covariance"] if fallback else values.get("class-means-covariance")
    cohorts = int(cfg["cohorts"]) > 1
    return Recipe(
        float(best.candidate.label_share),
        int(dims["map-dim"]),
        int(dims.get("cohort-map-dim", cfg["cohort-map-dim"])) if cohorts else None,
        str(covariance or cfg["class-means-covariance"]) if cohorts else None,
        fallback,
        float(best.accuracy),
        extra.get("public_only_accuracy"),
        tuple(int(c) for c in extra.get("holdout_lacks", ())),
    )


def choose(inputs: RunInputs, totals: Sequence[float], grid: Sequence[Any]) -> dict[float, Recipe]:
    """The recipe of ``grid`` each whole-record budget scores best with on ``inputs``' public data
    (:func:`fl.maps.recipes.choose`: the public draw, its hold-out and its emulated population are the seed's;
    the test split is never read)."""
    from fl.maps import recipes

    cfg = inputs.cfg
    x, y = inputs.public
    out = {}
    for total in totals:
        best, _ = recipes.choose(
            recipes.RecipeSpec.from_config(cfg),
            total,
            x,
            y,
            inputs.num_classes,
            inputs.train_users,
            inputs.public_groups,
            candidates=grid,
        )
        out[total] = recipe = recipe_of(best, cfg)
        print(f"sanitas: seed {cfg['seed']}: epsilon {total:g}: {_said(recipe, cfg)}", flush=True)
    return out


def _said(recipe: Recipe, cfg: config_mod.RunConfig) -> str:
    """What a seed's choice for one budget prints."""
    text = f"label share {recipe.label_share:g}"
    if recipe.map_dim != cfg["map-dim"]:
        text += f", map-dim {recipe.map_dim}"
    if recipe.cohort_map_dim is not None:
        text += f", cohort-map-dim {recipe.cohort_map_dim}, class-means-covariance {recipe.class_means_covariance!r}"
    text += ", chosen on the seed's public data"
    if recipe.emulated_accuracy is not None and recipe.public_only_accuracy is not None:
        text += f" (emulated {recipe.emulated_accuracy:.3f}, public-only {recipe.public_only_accuracy:.3f})"
    if recipe.fallback:
        text += (
            ": no recipe beats the public-only model there on the public hold-outs, so the "
            "run ships the public-only model (fallback)"
        )
    if recipe.holdout_lacks:
        text += (
            f"; a hold-out lacked class(es) {list(recipe.holdout_lacks)} of the public draw (too few source groups "
            "hold them to put one on each side: they stay in the fitting part, where the public model needs them)"
        )
    return text
