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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fl import config as config_mod
from simulations.outputs.writers import write_csv


def tune(
    config: str,
    epsilons: Sequence[float],
    sets: Sequence[str],
    out: str,
    grid: str = "default",
    track: Sequence[str] = (),
    tracking_uri: str | None = None,
) -> int:
    """The ``sanitas tune`` command; returns 0. ``grid``: ``"default"`` (:func:`fl.maps.recipes.default_candidates`)
    or ``"class-means"`` (:func:`fl.maps.recipes.class_means_candidates`). Everything the config alone decides is
    checked before any data is read, and the output folder is made only when its files are written. ``track``
    (with the config's ``track`` key): the choices logged afterwards as one tracked run (:mod:`simulations.tracking`:
    each epsilon a step, the chosen candidate's public hold-out accuracy its metric)."""
    from fl.maps import recipes
    from simulations.drivers.inputs import RunInputs
    from simulations.runtime.api import resolve_config
    from simulations.runtime.overrides import load_with_overrides
    from simulations.tracking import for_command, track_record

    raw = load_with_overrides(config, list(sets))
    cfg = config_mod.as_run_config(resolve_config(raw))
    _check(cfg, grid)
    tracking = for_command(track, tracking_uri, raw, out)
    inputs = RunInputs(cfg)
    assert inputs.is_text
    x, y = inputs.public  # the public embeddings the run's nodes will compute (its public-tuned encoder, if any)
    print(
        f"sanitas: choosing recipes on {len(y)} public documents ({inputs.dataset.public_info.get('source', '')}) "
        f"for {inputs.train_users} users; the private users and the test split are not read",
        flush=True,
    )
    candidates = recipes.class_means_grid(int(cfg["cohorts"])) if grid == "class-means" else None
    spec = recipes.RecipeSpec.from_config(cfg)
    scored = {
        eps: recipes.choose(
            spec, float(eps), x, y, inputs.num_classes, inputs.train_users, inputs.public_groups, candidates
        )
        for eps in epsilons
    }
    folder = Path(out).expanduser().resolve()
    folder.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    chosen: dict[str, Any] = {}
    for eps, (best, table) in scored.items():
        rows += [_row(eps, s, s is best) for s in table]
        toml = folder / f"{Path(config).stem}-eps{eps:g}.toml"
        toml.write_text(_config_text(raw, best.values, eps, best.accuracy, best.extra))
        chosen[f"{eps:g}"] = {
            "candidate": best.candidate.name,
            "public_accuracy": best.accuracy,
            "values": best.values,
            "config": str(toml),
            **{k: best.extra.get(k) for k in _AGAINST_PUBLIC},
        }
        print(
            f"sanitas: epsilon {eps:g} per user (whole record): {best.candidate.name}, public hold-out "
            f"accuracy {best.accuracy:.4f} -> {toml}{_fallback_words(best.extra)}",
            flush=True,
        )
    write_csv(folder / "tune.csv", rows, ["epsilon", "candidate", "public_accuracy", "test_inputs", "chosen", *_KEYS])
    document = {
        "config": config,
        "sets": list(sets),
        "users": inputs.train_users,
        "public": inputs.dataset.public_info,
        "chosen": chosen,
        "rows": rows,
    }
    (folder / "tune.json").write_text(json.dumps(document, indent=2, default=str) + "\n")
    print(f"sanitas: {folder / 'tune.csv'} and {folder / 'tune.json'}", flush=True)
    track_record(tracking, _record(config, cfg, epsilons, chosen, folder))
    return 0


def _record(
    config: str, cfg: Mapping[str, Any], epsilons: Sequence[float], chosen: Mapping[str, Any], folder: Path
) -> Any:
    """``sanitas tune``'s choices as a tracked run: the config and the epsilons as params, each epsilon (in the
    order given) a step whose metrics are the chosen candidate's public hold-out figures."""
    from simulations.tracking import RunRecord
    from simulations.tracking.records import numbers

    steps = [
        (i, {**numbers({k: v for k, v in chosen[f"{eps:g}"].items() if k != "values"}), "epsilon": float(eps)})
        for i, eps in enumerate(epsilons)
    ]
    tags = {f"sanitas.choice.eps={eps}": str(c["candidate"]) for eps, c in chosen.items()}
    tags |= {"sanitas.command": "tune", "sanitas.dataset": str(cfg["dataset"]), "sanitas.folder": str(folder)}
    files = [folder / "tune.csv", folder / "tune.json", *sorted(folder.glob("*.toml"))]
    params = {**dict(cfg), "tune-epsilons": ",".join(f"{e:g}" for e in epsilons), "tune-config": config}
    return RunRecord(f"tune-{Path(config).stem}", folder, params, steps, {}, tags, files)


def _check(cfg: config_mod.RunConfig, grid: str) -> None:
    """What ``sanitas tune`` needs of the config, checked before any data is read (ConfigError naming the fix)."""
    if not config_mod.has_public(cfg):
        raise config_mod.ConfigError(
            "sanitas tune chooses on public data: set public-fraction > 0, public-size > 0 or public-dataset"
        )
    if cfg["mode"] != "local" or config_mod.level_of(cfg) != "sentence":
        raise config_mod.ConfigError(
            "sanitas tune chooses sentence-level local-DP recipes: mode = 'local', no word or document mechanism"
        )
    if grid == "default" and (cfg["server-model"] == "class-means" or cfg["cohorts"] > 1):
        raise config_mod.ConfigError(
            "--recipes default scores recipes on the supervised map, which a class-means config (server-model = "
            f"{cfg['server-model']!r}, cohorts = {cfg['cohorts']}) cannot run: give --recipes class-means"
        )


def _row(eps: float, scored: Any, chosen: bool) -> dict[str, Any]:
    """One row of tune.csv: a candidate's keys and its public hold-out accuracy at ``eps``."""
    return {
        "epsilon": eps,
        "candidate": scored.candidate.name,
        "public_accuracy": scored.accuracy,
        "test_inputs": scored.extra.get("test_inputs", "sanitized"),
        "chosen": chosen,
        **{k: scored.values.get(k, "") for k in _KEYS},
    }


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
    "cohort-map-dim",
    "class-means-covariance",
)

#: What tune.json says of each choice against the public-only models (fl.maps.recipes.choose's ``extra``).
_AGAINST_PUBLIC = (
    "fallback",
    "public_only_accuracy",
    "public_only_model",
    "public_only_models",
    "gain_over_public_only",
    "gain_standard_error",
    "fallback_keys",
    "holdout_lacks",
)


def _fallback_words(extra: dict[str, Any]) -> str:
    """What a choice that falls back to the public-only model (or whose hold-outs lack a class) adds to its line."""
    words = ""
    if extra.get("fallback"):
        words += (
            f"; no candidate beats the public-only model ({extra['public_only_model']}, "
            f"{extra['public_only_accuracy']:.4f}) on the public hold-outs (gain "
            f"{extra['gain_over_public_only']:+.4f}, standard error {extra['gain_standard_error']:.4f}): the "
            "public-only model is the fallback"
        )
    if extra.get("holdout_lacks"):
        words += f"; a hold-out lacked class(es) {extra['holdout_lacks']} (kept in the fitting part)"
    return words


def _config_text(
    raw: dict[str, Any], values: dict[str, Any], eps: float, accuracy: float, extra: dict[str, Any] | None = None
) -> str:
    """The flat TOML of ``raw`` with the chosen keys (run-config values are strings, numbers and booleans)."""
    merged = {**raw, **{k: v for k, v in values.items() if k in _KEYS}}
    lines = [
        f"# Chosen by sanitas tune on public data only: whole-record pure epsilon {eps:g} per user,",
        f"# emulated public hold-out accuracy {accuracy:.4f}.",
    ]
    if extra and extra.get("fallback"):
        lines.append(
            f"# No candidate beat the public-only model on the public hold-outs ({extra['public_only_model']}, "
            f"{extra['public_only_accuracy']:.4f}): this recipe is the best candidate, and the "
            "public-only model is the better choice."
        )
    lines += [f"{k} = {_toml_value(v)}" for k, v in merged.items()]
    return "\n".join(lines) + "\n"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(str(value))  # a TOML basic string is a JSON string
