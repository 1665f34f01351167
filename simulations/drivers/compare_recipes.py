"""Each seed's local recipe for ``sanitas compare``: per whole-record budget, the label's share of it (and for
a class-means config the map-dim), chosen on **that seed's own** public draw (:mod:`fl.maps.recipes`), never on
texts that are another seed's private users or on the test split; kept in ``recipes.json`` so a resumed or
collected comparison does not choose again."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fl import config as config_mod
from simulations.drivers.inputs import RunInputs
from simulations.outputs.writers import read_json


@dataclass(frozen=True)
class Recipe:
    """What a local point's recipe chose for one whole-record budget on one seed's public draw: the label's
    share of the budget and the map-dim (the config's when the recipe does not choose it)."""

    label_share: float
    map_dim: int


#: The file in the comparison folder keeping each seed's chosen recipes, so that a resumed or collected
#: comparison does not choose them again (a seed whose tuning config or grid changed chooses again).
RECIPES_FILE = "recipes.json"


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


def choose_recipes(inputs: Mapping[int, RunInputs], totals: Sequence[float], folder: Path) -> Choice:
    """``--label-share auto``: each seed's recipe per budget, chosen on the seed's own public draw
    (``inputs[seed]``: the local config resolved at the seed, as its runs are); the choices kept in
    ``folder``'s :data:`RECIPES_FILE` are reused while a seed's tuning config and grid are unchanged. Nothing is
    written here (:meth:`Choice.save`)."""
    stored = read_json(folder / RECIPES_FILE) or {}
    out: dict[int, dict[float, Recipe]] = {}
    changed = False
    for seed, seed_inputs in inputs.items():
        grid = candidates(seed_inputs.cfg)
        tuning = {k: v for k, v in seed_inputs.cfg.items() if k not in ("run-name", "out-dir")}  # not read
        digest = hashlib.sha256(
            json.dumps({"config": tuning, "grid": [c.name for c in grid]}, sort_keys=True, default=str).encode()
        ).hexdigest()
        kept = stored.get(str(seed)) or {}
        known = kept.get("recipes", {}) if kept.get("inputs") == digest else {}
        missing = [t for t in totals if f"{t:g}" not in known]
        chosen = choose(seed_inputs, missing, grid) if missing else {}
        recipes = {
            **known,
            **{f"{t:g}": {"label_share": r.label_share, "map_dim": r.map_dim} for t, r in chosen.items()},
        }
        stored[str(seed)] = {"inputs": digest, "recipes": recipes}
        changed = changed or bool(missing)
        out[seed] = {
            t: Recipe(float(recipes[f"{t:g}"]["label_share"]), int(recipes[f"{t:g}"]["map_dim"])) for t in totals
        }
        if len(missing) < len(totals):
            print(f"sanitas: seed {seed}: {len(totals) - len(missing)} recipe(s) as chosen before", flush=True)
    return Choice(out, stored, changed)


def print_recipes(chosen: Mapping[int, Mapping[float, Recipe]], totals: Sequence[float], map_dim: int) -> None:
    """The recipe table: per whole-record epsilon, each seed's label share and map-dim."""
    seeds = list(chosen)
    print("sanitas: recipes chosen on each seed's own public draw (label share / map-dim):", flush=True)
    print("  epsilon " + "".join(f"{'seed ' + str(s):>14}" for s in seeds), flush=True)
    for t in totals:
        cells = "".join(f"{f'{chosen[s][t].label_share:g} / {chosen[s][t].map_dim}':>14}" for s in seeds)
        print(f"  {t:<7g} {cells}", flush=True)
    if any(r.map_dim != map_dim for by in chosen.values() for r in by.values()):
        print(f"  (the config's map-dim is {map_dim}; each point's noise-free ceiling runs at its own)", flush=True)


def candidates(cfg: config_mod.RunConfig) -> list[Any]:
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


def choose(inputs: RunInputs, totals: Sequence[float], grid: Sequence[Any]) -> dict[float, Recipe]:
    """The recipe of ``grid`` each whole-record budget scores best with on ``inputs``' public data
    (:func:`fl.maps.recipes.choose`: the public draw, its hold-out and its emulated population are the seed's)."""
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
        out[total] = Recipe(float(best.candidate.label_share), int(best.values["map-dim"]))
        print(
            f"sanitas: seed {cfg['seed']}: label share {out[total].label_share:g} of epsilon {total:g}"
            + (f", map-dim {out[total].map_dim}" if out[total].map_dim != cfg["map-dim"] else "")
            + ", chosen on the seed's public data",
            flush=True,
        )
    return out
