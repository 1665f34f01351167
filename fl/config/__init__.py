"""Run configuration: the keys (declared once in :mod:`fl.config.keys`), a resolved config's typed
sections (:mod:`fl.config.run_config`), and the reference generated from the declaration
(:mod:`fl.config.reference`: the pyproject block and the documentation table).

The same flat, kebab-case keys are Flower run-config keys (``[tool.flwr.app.config]`` in
``pyproject.toml``, overridden with ``flwr run . --run-config 'key=value'``) and the keys of a
``sanitas run`` TOML file.
"""

from fl.config.keys import (
    CHOICES,
    DEFAULTS,
    DOCS,
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
from fl.config.run_config import (
    EMBEDDING_LEVELS,
    ENCODER_DIMS,
    ConfigError,
    RunConfig,
    as_run_config,
    cache_dir,
    data_dir,
    has_public,
    level_of,
    load_toml,
    make_mechanism,
    mechanism_options,
    mode_name,
    parse_value,
    resolve,
    simulation_backend,
    validate,
)

__all__ = [
    "CHOICES",
    "DEFAULTS",
    "DOCS",
    "ENCODER_DIMS",
    "EMBEDDING_LEVELS",
    "SECTIONS",
    "SECTION_CLASSES",
    "CentralConfig",
    "ConfigError",
    "DataConfig",
    "EncoderConfig",
    "OutputConfig",
    "ReleaseConfig",
    "RunConfig",
    "ServerConfig",
    "SimulationConfig",
    "UsersConfig",
    "as_run_config",
    "cache_dir",
    "data_dir",
    "has_public",
    "level_of",
    "mode_name",
    "load_toml",
    "make_mechanism",
    "mechanism_options",
    "parse_value",
    "resolve",
    "simulation_backend",
    "validate",
]
