"""The public-only line of a comparison (``sanitas compare``): one line per seed for every clean-input point, local
and central, the strongest model fitted on the seed's public data alone that any of its runs scored, every model
named; and what compare.json says of it. Part of :mod:`simulations.drivers.compare`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from simulations.outputs import aggregate as agg


def _model_names(row: Mapping[str, Any], models: Mapping[str, float]) -> dict[str, float]:
    """A row's public-only models under names that say which: a local run's ``server_model`` (its server model
    fitted on the public data alone, at the row's map-dim) is named with that map-dim, since two recipes of one
    seed may fit it in different projections."""
    dim = row.get("map_dim")
    return {f"{n} (map-dim {dim})" if n == "server_model" and dim is not None else n: v for n, v in models.items()}


def share_public_line(
    rows: Sequence[dict[str, Any]], more: Mapping[str, Mapping[str, float]] | None = None
) -> dict[str, dict[str, Any]]:
    """One public-only line per seed for every clean-input row of a comparison, both sides: the strongest model
    fitted on the seed's public data alone that any of its runs scored on the clean test inputs (the central
    runs' public logistic regression, each local recipe's server model with no private release, ...).

    Each clean row's ``public_only_models`` becomes every model tried on its seed (by name,
    :func:`_model_names`), ``public_only_accuracy`` the largest and ``gain_over_public`` its accuracy minus
    that; a ``non-private`` row's on-device figures likewise (the noise-free ceilings' gains). Rows on
    sanitized test inputs keep their own line: a model of a sanitized input is held against the public-only
    model given the same sanitized input. Returns the line by seed (``accuracy``, ``model``, ``models``) for
    compare.json. The line is chosen by test accuracy on purpose: of the public-only models it is the one a
    gain is hardest to show against, never a weaker one. ``more``: public-only models of the same public draws
    scored by another comparison's runs on the same test users (by seed as text, then name), pooled in."""
    models: dict[Any, dict[str, float]] = {}
    seeds = {str(r.get("seed")): r.get("seed") for r in rows}
    for seed, named in (more or {}).items():
        if seed in seeds:
            models[seeds[seed]] = dict(named)

    def clean_models(row: Mapping[str, Any]) -> dict[str, float]:
        if row["series"] == "non-private":
            return _model_names(row, row.get("on_device_public_only_models") or {})
        return _model_names(row, row.get("public_only_models") or {}) if row.get("test_inputs") == "clean" else {}

    for row in rows:
        found = clean_models(row)
        if found:
            seed_models = models.setdefault(row.get("seed"), {})
            for name, value in found.items():
                seed_models[name] = max(value, seed_models.get(name, value))
    for row in rows:
        tried = models.get(row.get("seed"))
        if not tried or not clean_models(row):
            continue
        line = max(tried.values())
        if row["series"] == "non-private":
            row["on_device_public_only_models"] = dict(tried)
            row["on_device_public_only_accuracy"] = line
            acc = row.get("on_device_accuracy")
            row["on_device_gain_over_public"] = float(acc) - line if agg.finite([acc]) else None
        else:
            row["public_only_models"] = dict(tried)
            row["public_only_accuracy"] = line
            acc = row.get("accuracy")
            row["gain_over_public"] = float(acc) - line if agg.finite([acc]) else None
    return {
        str(seed): {"accuracy": max(tried.values()), "model": max(tried, key=lambda n: tried[n]), "models": tried}
        for seed, tried in models.items()
    }


def public_line_fields(line: Mapping[str, Any]) -> dict[str, Any]:
    """What compare.json says of the public-only lines: the shared clean-input line by seed
    (:func:`share_public_line`) and what ``public_model_accuracy`` is, which is not that line."""
    return {
        "public_only_line_by_seed": dict(line),
        "public_only_line": (
            "the gains of every clean-input point, local and central, are over public_only_line_by_seed: per seed, "
            "the strongest model fitted on that seed's public data alone among every one its runs scored on the "
            "clean test inputs (named in each point's public_only_models); points on sanitized test inputs are "
            "held against the public-only model given the same sanitized inputs"
        ),
        "public_model_accuracy_is": (
            "the public logistic regression's test accuracy per seed: the input of the ceilings' public class + "
            "K-ary RR point (ceiling_public_rr), not the line the gains are taken over"
        ),
    }
