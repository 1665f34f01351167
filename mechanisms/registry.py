"""Name -> mechanism class registry behind ``mechanisms.names()`` / ``create()``."""

from __future__ import annotations

from typing import Any

from .base import Mechanism
from .suggest import did_you_mean

_REGISTRY: dict[str, type[Mechanism]] = {}


def register(cls: type[Mechanism]) -> type[Mechanism]:
    """Register a mechanism class under its ``name`` (usable as a decorator)."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no registry name")
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"mechanism name {cls.name!r} is already registered")
    _REGISTRY[cls.name] = cls
    return cls


def names() -> list[str]:
    """Sorted registry names of every mechanism."""
    return sorted(_REGISTRY)


def mechanism_class(name: str) -> type[Mechanism]:
    """The class registered under ``name``; ``ValueError`` naming the known ones otherwise."""
    try:
        return _REGISTRY[name]
    except KeyError:
        hint = did_you_mean(name, names())
        raise ValueError(f"unknown mechanism {name!r}{hint} (known mechanisms: {', '.join(names())})") from None


def create(name: str, **params: Any) -> Mechanism:
    """Instantiate the mechanism ``name`` with ``params`` (validated by its constructor)."""
    cls = mechanism_class(name)
    try:
        return cls(**params)
    except TypeError as err:  # unexpected keyword: say which mechanism and what it takes
        raise ValueError(f"bad parameters for mechanism {name!r}: {err}") from None
