"""A resolved run config: coercion, validation, the typed sections, and what is derived from a config.

:func:`resolve` turns flat kebab-case keys (a ``sanitas run`` TOML file, Flower's run config) into a
frozen :class:`RunConfig` of typed sections (``cfg.release.sentence_epsilon``), refusing the first bad
key with a one-line :class:`ConfigError`. The keys themselves are declared in :mod:`fl.config.keys`.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fl.config.errors import ConfigError
from fl.config.keys import (
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
from fl.config.plugins import anchor_specs
from fl.config.rules import ENCODER_DIMS, check_across_sections
from fl.config.section import attribute, coerce
from fl.config.toml_file import load_toml
from fl.config.values import (
    USER_FILE_SUFFIXES,
    has_public,
    is_user_file,
    label_name_list,
    level_of,
    make_mechanism,
    mechanism_options,
    public_label_pairs,
)
from mechanisms.levels import LEVELS
from mechanisms.suggest import did_you_mean

#: Names defined in the modules above and kept importable from here, as before they moved.
__all__ = [
    "ConfigError",
    "ENCODER_DIMS",
    "EMBEDDING_LEVELS",
    "USER_FILE_SUFFIXES",
    "RunConfig",
    "as_run_config",
    "cache_dir",
    "data_dir",
    "has_public",
    "is_user_file",
    "label_name_list",
    "level_of",
    "load_toml",
    "make_mechanism",
    "mechanism_options",
    "mode_name",
    "parse_value",
    "public_label_pairs",
    "resolve",
    "simulation_backend",
    "validate",
]


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
        """The sections of a flat mapping holding every key (already coerced; not checked)."""
        sections = {
            name: section(**{attribute(k): flat[k] for k in SECTIONS[name]})
            for name, section in SECTION_CLASSES.items()
        }
        return cls(**sections)  # type: ignore[arg-type]

    def check(self) -> None:
        """Every section's own check, in the order of the sections, then the rules across sections
        (:mod:`fl.config.rules`); the first problem found raises the one line the user sees."""
        for name in SECTION_CLASSES:
            getattr(self, name).check()
        check_across_sections(self)

    def __getitem__(self, key: str) -> Any:
        try:
            section = _SECTION_OF[key]
        except KeyError:
            raise KeyError(key) from None
        return getattr(getattr(self, section), attribute(key))

    def __iter__(self) -> Iterator[str]:
        return iter(DEFAULTS)

    def __len__(self) -> int:
        return len(DEFAULTS)

    def replace(self, **changes: Any) -> RunConfig:
        """A copy with kebab-case keys changed (``cfg.replace(**{"run-name": "r"})``), validated again."""
        return resolve({**dict(self), **changes})


def resolve(overrides: Mapping[str, Any] | None = None) -> RunConfig:
    """Defaults updated with ``overrides``, type-checked and validated, as a frozen :class:`RunConfig`.

    Raises :class:`ConfigError` (a ``ValueError``) naming the first bad key.
    Nothing is read from disk except the existence of configured paths.
    """
    cfg = dict(DEFAULTS)
    overrides = anchor_specs(dict(overrides or {}))  # a relative user-code file: from the working directory
    for key, value in overrides.items():
        if key not in DEFAULTS:
            hint = did_you_mean(key, DEFAULTS) or "; `sanitas config-reference` lists every key"
            raise ConfigError(f"unknown config key {key!r}{hint}")
        cfg[key] = coerce(key, DEFAULTS[key], value)
    config = RunConfig.from_flat(cfg)
    config.check()
    return config


#: The levels a run can release its embedding at (the label channel rides along at any of them): every
#: level of ``mechanisms.base.LEVELS`` but the label's.
EMBEDDING_LEVELS = tuple(level for level in LEVELS if level != "label")


def as_run_config(cfg: Mapping[str, Any]) -> RunConfig:
    """``cfg`` itself when it is a resolved :class:`RunConfig`, else the mapping resolved (and validated):
    what a public constructor that accepts any mapping of run-config keys stores."""
    return cfg if isinstance(cfg, RunConfig) else resolve(cfg)


def mode_name(cfg: Mapping[str, Any]) -> str:
    """The privacy unit's mode a run is in, decided here and nowhere else: ``"local"``, or
    ``"central/user"`` / ``"central/node"`` by ``central-unit``. The server's and the node's mode
    registries (``strategies.modes``, ``clients.modes``) are keyed by it."""
    return "local" if cfg["mode"] == "local" else f"central/{cfg['central-unit']}"


def validate(cfg: Mapping[str, Any]) -> None:
    """Check a flat mapping of every key (already coerced) as :func:`resolve` does: each section's own
    ``check`` (:mod:`fl.config.keys`), then the rules across sections (:mod:`fl.config.rules`)."""
    RunConfig.from_flat(cfg).check()


def simulation_backend(cfg: Mapping[str, Any]) -> str:
    """The backend a simulation runs on: ``backend``, where ``"auto"`` is ``"ray"`` when
    ``ray-address`` names a cluster and ``"local"`` (in this process) otherwise."""
    if cfg["backend"] != "auto":
        return str(cfg["backend"])
    return "ray" if cfg["ray-address"] else "local"


def data_dir(cfg: RunConfig) -> Path | None:
    """The local data folder (config key, then ``$SANITAS_DATA_DIR``), or None for the hub
    (:attr:`DataConfig.folder`)."""
    return cfg.data.folder


def cache_dir(cfg: RunConfig) -> Path:
    """Embedding cache folder (config key, ``$SANITAS_CACHE_DIR``, ``~/.cache/sanitas``;
    :attr:`EncoderConfig.cache_folder`)."""
    return cfg.encoder.cache_folder


def parse_value(text: str) -> Any:
    """Parse a ``--set key=value`` value as TOML (numbers, booleans, quoted strings),
    falling back to the bare string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text
