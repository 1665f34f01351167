"""``sanitas tune CONFIG --epsilons E,...``: the local-DP recipe for each whole-record budget, chosen on
public data only (:mod:`fl.maps.recipes`).

For each pure epsilon ``E`` per user (embedding + label), every candidate of the grid (M1, mechanism,
the label's share of ``E``) is scored by emulating the run on the public documents (the private users
and the test split are never read), and the best is written as a config beside its table:

* ``tune.csv``: one row per (epsilon, candidate): its keys and its public hold-out accuracy;
* ``tune.json``: the same with the run's public data description and population;
* ``<config stem>-eps<E>.toml``: the config with the chosen keys, ready for ``sanitas run``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from fl import config as config_mod
from simulations.outputs.writers import write_csv


def tune(config: str, epsilons: Sequence[float], sets: Sequence[str], out: str, grid: str = "default") -> int:
    """The ``sanitas tune`` command; returns 0. ``grid``: ``"default"`` (:func:`fl.maps.recipes.default_candidates`)
    or ``"class-means"`` (:func:`fl.maps.recipes.class_means_candidates`)."""
    import torch

    from fl.cohort import population_sizes
    from fl.data import datasets as data
    from fl.encoding.encoder import best_device
    from fl.encoding.public_tuning import TuningSpec, tuned_encoder
    from fl.maps import recipes
    from fl.maps.public_start import PublicSpec, public_embeddings
    from simulations.runtime.api import resolve_config
    from simulations.runtime.overrides import load_with_overrides

    raw = load_with_overrides(config, list(sets))
    cfg = config_mod.as_run_config(resolve_config(raw))
    if not config_mod.has_public(cfg):
        raise config_mod.ConfigError(
            "sanitas tune chooses on public data: set public-fraction > 0, public-size > 0 or public-dataset"
        )
    if cfg["mode"] != "local" or config_mod.level_of(cfg) != "sentence":
        raise config_mod.ConfigError(
            "sanitas tune chooses sentence-level local-DP recipes: mode = 'local', no word or document mechanism"
        )
    loaded = data.load(cfg.data, cfg.users, cfg.release.level)
    assert isinstance(loaded, data.TextDataset)
    # the public embeddings the run's nodes will compute (with its public-tuned encoder, if any)
    encoder = tuned_encoder(TuningSpec.from_config(cfg), best_device(cfg.server.device))
    x, y = public_embeddings(replace(PublicSpec.from_config(cfg), encoder=encoder), torch.device("cpu"))
    groups = data.public_groups(
        cfg.data, cfg.users, cfg.release.level
    )  # the hold-out keeps each source group on one side
    num_users = population_sizes(cfg.data, cfg.users, cfg.release.level)[0]
    folder = Path(out).expanduser().resolve()
    folder.mkdir(parents=True, exist_ok=True)
    print(
        f"sanitas: choosing recipes on {len(y)} public documents ({loaded.public_info.get('source', '')}) "
        f"for {num_users} users; the private users and the test split are not read",
        flush=True,
    )
    rows: list[dict[str, Any]] = []
    chosen: dict[str, Any] = {}
    for eps in epsilons:
        candidates = recipes.class_means_candidates() if grid == "class-means" else None
        best, table = recipes.choose(
            recipes.RecipeSpec.from_config(cfg), float(eps), x, y, loaded.num_classes, num_users, groups, candidates
        )
        for s in table:
            rows.append(
                {
                    "epsilon": eps,
                    "candidate": s.candidate.name,
                    "public_accuracy": s.accuracy,
                    "test_inputs": s.extra.get("test_inputs", "sanitized"),
                    "chosen": s is best,
                    **{k: s.values.get(k, "") for k in _KEYS},
                }
            )
        toml = folder / f"{Path(config).stem}-eps{eps:g}.toml"
        toml.write_text(_config_text(raw, best.values, eps, best.accuracy))
        chosen[f"{eps:g}"] = {
            "candidate": best.candidate.name,
            "public_accuracy": best.accuracy,
            "values": best.values,
            "config": str(toml),
        }
        print(
            f"sanitas: epsilon {eps:g} per user (whole record): {best.candidate.name}, public hold-out "
            f"accuracy {best.accuracy:.4f} -> {toml}",
            flush=True,
        )
    write_csv(folder / "tune.csv", rows, ["epsilon", "candidate", "public_accuracy", "test_inputs", "chosen", *_KEYS])
    document = {
        "config": config,
        "sets": list(sets),
        "users": num_users,
        "public": loaded.public_info,
        "chosen": chosen,
        "rows": rows,
    }
    (folder / "tune.json").write_text(json.dumps(document, indent=2, default=str) + "\n")
    print(f"sanitas: {folder / 'tune.csv'} and {folder / 'tune.json'}", flush=True)
    return 0


_KEYS = (
    "map-in",
    "map-dim",
    "map-scale",
    "sentence-mechanism",
    "sentence-options",
    "sentence-epsilon",
    "label-mechanism",
    "label-epsilon",
    "server-model",
)


def _config_text(raw: dict[str, Any], values: dict[str, Any], eps: float, accuracy: float) -> str:
    """The flat TOML of ``raw`` with the chosen keys (run-config values are strings, numbers and booleans)."""
    merged = {**raw, **{k: v for k, v in values.items() if k in _KEYS}}
    lines = [
        f"# Chosen by sanitas tune on public data only: whole-record pure epsilon {eps:g} per user,",
        f"# emulated public hold-out accuracy {accuracy:.4f}.",
    ]
    lines += [f"{k} = {_toml_value(v)}" for k, v in merged.items()]
    return "\n".join(lines) + "\n"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(str(value))  # a TOML basic string is a JSON string
