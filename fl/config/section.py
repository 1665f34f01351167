"""The base of the run config's sections (:mod:`fl.config.keys`): how a key is declared, and the checks
every section shares.

A section is a frozen dataclass of keys declared with :func:`key`; its ``check`` refuses the first bad
value among its own keys with a one-line :class:`~fl.config.errors.ConfigError`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import field, fields, replace
from typing import Any, ClassVar, TypeVar

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


def coerce(key: str, default: Any, value: Any) -> Any:
    """``value`` for the key ``key`` as the type of its ``default``: a bool (or "true"/"false"), an exact
    integer (an integral float too), a number as a float, or a string; anything else is the one-line
    :class:`ConfigError` naming the key."""
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


_S = TypeVar("_S", bound="Section")


class Section:
    """What every section shares: its keys as a flat mapping, and the check of the keys that take a fixed
    set of values. Each section's ``check`` adds the rules that read its own keys only; rules that read
    keys of two sections are in :mod:`fl.config.rules`."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    def flat(self) -> dict[str, Any]:
        """The section's keys and values, kebab-case (``{"sentence-epsilon": 10.0, ...}``)."""
        return {kebab(f.name): getattr(self, f.name) for f in fields(self)}

    def with_keys(self: _S, changes: Mapping[str, Any]) -> _S:
        """A copy with these of its keys (kebab-case) set, each value coerced as :func:`fl.config.resolve`
        coerces it (:func:`coerce`), then checked by the section's own ``check``; ``self`` when nothing
        changes. The rules across sections (:mod:`fl.config.rules`) are not applied: they need the others."""
        if not changes:
            return self
        declared = {f.name: f.default for f in fields(self)}
        out = replace(self, **{attribute(k): coerce(k, declared[attribute(k)], v) for k, v in changes.items()})
        out.check()
        return out

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


#: ``strategy``: a Flower built-in's class name (``FedAdam``), ``package.module:Class``, ``path/to/file.py:Class``,
#: or ``python:Name#n`` (an object handed to ``simulations.run`` in this process). Whether it loads, its options
#: and its mode are checked before any work by ``strategies.loading.check_strategy``.
STRATEGY_FORM = re.compile(
    r"[A-Za-z_]\w*|[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*|.+\.py:[A-Za-z_]\w*|python:\w+#\d+"
)
