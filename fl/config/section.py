"""The base of the run config's sections (:mod:`fl.config.keys`): how a key is declared, and the checks
every section shares.

A section is a frozen dataclass of keys declared with :func:`key`; its ``check`` refuses the first bad
value among its own keys with a one-line :class:`~fl.config.errors.ConfigError`.
"""

from __future__ import annotations

import re
from dataclasses import field, fields
from typing import Any, ClassVar

from fl.config.errors import ConfigError
from mechanisms.suggest import did_you_mean


def key(default: Any, doc: str, choices: tuple[str, ...] | None = None) -> Any:
    """One run-config key: its default, its documentation, and its allowed values (if a fixed set)."""
    return field(default=default, metadata={"doc": doc, "choices": choices})


def kebab(attribute: str) -> str:
    """The run-config key of a section field (``sentence_epsilon`` -> ``sentence-epsilon``)."""
    return attribute.replace("_", "-")


def attribute(name: str) -> str:
    """The section field of a run-config key (``sentence-epsilon`` -> ``sentence_epsilon``)."""
    return name.replace("-", "_")


class Section:
    """What every section shares: its keys as a flat mapping, and the check of the keys that take a fixed
    set of values. Each section's ``check`` adds the rules that read its own keys only; rules that read
    keys of two sections are in :mod:`fl.config.rules`."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    def flat(self) -> dict[str, Any]:
        """The section's keys and values, kebab-case (``{"sentence-epsilon": 10.0, ...}``)."""
        return {kebab(f.name): getattr(self, f.name) for f in fields(self)}

    def check(self) -> None:
        """Refuse the first value outside its key's choices (:class:`ConfigError` naming the key, with a
        did-you-mean); a section's own ``check`` calls this first, then checks its ranges and rules."""
        for f in fields(self):
            choices, value = f.metadata["choices"], getattr(self, f.name)
            if choices and value not in choices:
                raise ConfigError(
                    f"{kebab(f.name)} must be one of {choices}, got {value!r}{did_you_mean(value, choices)}"
                )


def at_least(section: Section, minimum: int, *names: str) -> None:
    """Refuse the first of the keys ``names`` of ``section`` below ``minimum``."""
    for name in names:
        value = getattr(section, attribute(name))
        if value < minimum:
            raise ConfigError(f"{name} must be >= {minimum}, got {value}")


def declared_default(section: Section, name: str) -> Any:
    """The declared default of the key ``name`` of ``section``."""
    return section.__dataclass_fields__[attribute(name)].default


#: ``strategy``: ``package.module:Class`` (whether the module imports is checked where the ServerApp starts).
STRATEGY_FORM = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")
