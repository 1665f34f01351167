"""The run-config keys, declared once: name, default, section, doc and allowed values.

Each section is a frozen dataclass; each field is one key (``sentence_epsilon`` is the key
``sentence-epsilon``) declared with :func:`key`: its default, one line of documentation and, for the
keys that take a fixed set of values, ``choices``. Everything else is generated from these classes:
``DEFAULTS``, ``SECTIONS``, ``CHOICES`` and ``DOCS`` below, the ``[tool.flwr.app.config]`` block of
``pyproject.toml`` and the tables of ``docs/configuration.md`` (:mod:`fl.config.reference`; tests check
both files against it). Each section checks its own keys (``check``); rules that read keys of two sections
are in :mod:`fl.config.rules`. The sections live beside their checks: :mod:`fl.config.data_keys` (data,
users), :mod:`fl.config.release_keys` (release), :mod:`fl.config.model_keys` (encoder, central, server) and
:mod:`fl.config.run_keys` (simulation, output). A new key is one field in its section's class plus its check
in that section's ``check`` (or a rule in :mod:`fl.config.rules`).
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any

from fl.config.data_keys import DataConfig, UsersConfig
from fl.config.model_keys import DEVICE_FORM, CentralConfig, EncoderConfig, ServerConfig
from fl.config.release_keys import ReleaseConfig
from fl.config.run_keys import OutputConfig, SimulationConfig
from fl.config.section import Section, kebab

__all__ = [
    "CHOICES",
    "DECLARED",
    "DEFAULTS",
    "DEVICE_FORM",
    "DOCS",
    "SECTIONS",
    "SECTION_CLASSES",
    "CentralConfig",
    "DataConfig",
    "EncoderConfig",
    "OutputConfig",
    "ReleaseConfig",
    "ServerConfig",
    "SimulationConfig",
    "UsersConfig",
]

#: Section name -> its dataclass, in the order of the documentation and of ``DEFAULTS``.
SECTION_CLASSES: dict[str, type[Section]] = {
    "data": DataConfig,
    "users": UsersConfig,
    "encoder": EncoderConfig,
    "release": ReleaseConfig,
    "central": CentralConfig,
    "server": ServerConfig,
    "simulation": SimulationConfig,
    "output": OutputConfig,
}


def _declared() -> list[tuple[str, str, Any, str, tuple[str, ...] | None]]:
    """(section, key, default, doc, choices) of every key, in declaration order."""
    out = []
    for section, cls in SECTION_CLASSES.items():
        for f in fields(cls):
            if f.default is MISSING or not f.metadata.get("doc"):
                raise TypeError(f"{cls.__name__}.{f.name}: declare it with key(default, doc)")
            out.append((section, kebab(f.name), f.default, f.metadata["doc"], f.metadata["choices"]))
    return out


DECLARED = _declared()
#: Every key and its default (the flat form: ``sanitas run`` TOML files and Flower's run config).
DEFAULTS: dict[str, Any] = {name: default for _, name, default, _, _ in DECLARED}
#: Section name -> its keys; every key is in exactly one section.
SECTIONS: dict[str, tuple[str, ...]] = {
    section: tuple(name for s, name, _, _, _ in DECLARED if s == section) for section in SECTION_CLASSES
}
#: The keys that take one of a fixed set of values.
CHOICES: dict[str, tuple[str, ...]] = {name: choices for _, name, _, _, choices in DECLARED if choices}
#: One line of documentation per key.
DOCS: dict[str, str] = {name: doc for _, name, _, doc, _ in DECLARED}
