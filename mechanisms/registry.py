"""Name -> mechanism class registry behind ``mechanisms.names()`` / ``create()``.

The built-in mechanisms are imported and registered on the first question to the registry
(:func:`_registry`), not when ``mechanisms`` is imported: the config's checks and the command line's help
need no torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .suggest import did_you_mean

if TYPE_CHECKING:
    from .base import Mechanism

_REGISTRY: dict[str, type[Mechanism]] = {}

#: The built-in mechanisms: module and class, registered by :func:`_registry` on first use.
BUILTIN = (
    ("words", "CMP"),
    ("class_rr", "ClassRR"),
    ("clipped_additive", "ClippedGaussian"),
    ("clipped_additive", "ClippedLaplace"),
    ("deepcandidate", "DeepCandidate"),
    ("identity", "NoPrivacy"),
    ("planar_laplace", "PlanarLaplace"),
    ("privemb", "PrivEmb"),
    ("privunit", "PrivUnit"),
    ("purkayastha", "Purkayastha"),
    ("randomized_response", "RandomizedResponse"),
    ("rr_prior", "RRWithPrior"),
    ("words", "Mahalanobis"),
    ("words", "TrLaplace"),
    ("truncation", "Truncation"),
    ("words", "WordGaussian"),
    ("words", "WordLaplace"),
)
_builtins_loaded = False


def _registry() -> dict[str, type[Mechanism]]:
    """The registry, with the built-in mechanisms registered (imported here, once)."""
    global _builtins_loaded
    if not _builtins_loaded:
        _builtins_loaded = True
        for module, name in BUILTIN:
            register(getattr(importlib.import_module(f"mechanisms.{module}"), name))
    return _REGISTRY


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
    return sorted(_registry())


def mechanism_class(name: str) -> type[Mechanism]:
    """The class registered under ``name``; ``ValueError`` naming the known ones otherwise."""
    try:
        return _registry()[name]
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
