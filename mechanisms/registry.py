"""Name -> mechanism class registry behind ``mechanisms.names()`` / ``create()``.

The built-in mechanisms are imported and registered on the first question to the registry
(:func:`_registry`), not when ``mechanisms`` is imported: the config's checks and the command line's help
need no torch.

:func:`mechanism_class` and :func:`create` also take a user's class, ``"path/to/file.py:Class"`` or
``"package.module:Class"`` (:mod:`mechanisms.user_code`): loaded once per spec and process, checked
(:func:`user_class`), and kept apart from the name registry, so that ``names()`` lists the built-ins and
what was registered on purpose only, and a user's ``name`` may repeat a built-in's without replacing it.
"""

from __future__ import annotations

import importlib
import inspect
from typing import TYPE_CHECKING, Any

from . import user_code
from .levels import LEVELS
from .suggest import did_you_mean
from .user_code import shown

if TYPE_CHECKING:
    from .base import Mechanism

_REGISTRY: dict[str, type[Mechanism]] = {}
#: A user's classes by the spec that named them (one import and one check per spec and process).
_USER_CLASSES: dict[str, type[Mechanism]] = {}

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


def mechanism_class(name: str, level: str | None = None, key: str = "mechanism") -> type[Mechanism]:
    """The class registered under ``name``, or the user's class ``name`` names (``"file.py:Class"``,
    ``"package.module:Class"``: :func:`user_class`, of ``level`` when given, errors naming ``key``);
    ``ValueError`` in one line otherwise (an unknown name: the known ones)."""
    if user_code.is_spec(name):
        return user_class(name, level, key)
    try:
        return _registry()[name]
    except KeyError:
        hint = did_you_mean(name, names())
        raise ValueError(f"unknown mechanism {name!r}{hint} (known mechanisms: {', '.join(names())})") from None


def user_class(spec: str, level: str | None = None, key: str = "mechanism") -> type[Mechanism]:
    """The class ``spec`` names, imported once per process, after checking that it is a concrete subclass
    of :class:`mechanisms.base.Mechanism` with a ``name`` and a ``level`` of :data:`LEVELS` (``level``
    itself when given). Never put in the name registry (see the module docstring).

    Raises ``ValueError`` in one line naming ``key``, the class and the fix.
    """
    cls = _USER_CLASSES.get(spec)
    if cls is None:
        obj = user_code.load(spec, key)
        cls = _checked(obj, f"{key} = {shown(spec)!r}")
        _USER_CLASSES[spec] = cls
    if level is not None and cls.level != level:
        raise ValueError(
            f"{key} = {shown(spec)!r}: {cls.__name__} is a {cls.level}-level mechanism (level = {cls.level!r}): "
            f"name it in {cls.level}-mechanism, or subclass the {level} level's base class"
        )
    return cls


def _checked(obj: Any, where: str) -> type[Mechanism]:
    """``obj`` if it is a usable mechanism class; else ``ValueError``, one line starting with ``where``."""
    from .base import Mechanism  # torch: only once a user's class is named

    if not (isinstance(obj, type) and issubclass(obj, Mechanism)):
        what = obj.__name__ if isinstance(obj, type) else type(obj).__name__ + " object"
        raise ValueError(
            f"{where}: {what} is not a mechanism: subclass mechanisms.base.SentenceMechanism, LabelMechanism, "
            "WordMechanism or DocumentMechanism"
        )
    if not isinstance(obj.name, str) or not obj.name:
        raise ValueError(f'{where}: {obj.__name__} has no name: set name = "..." on the class (shown in results)')
    if obj.level not in LEVELS:
        raise ValueError(
            f"{where}: {obj.__name__} has level {obj.level!r}: subclass the base class of one of {', '.join(LEVELS)}"
        )
    if inspect.isabstract(obj):
        missing = ", ".join(sorted(getattr(obj, "__abstractmethods__", ())))
        raise ValueError(f"{where}: {obj.__name__} does not implement {missing}")
    return obj


def create(name: str, **params: Any) -> Mechanism:
    """Instantiate the mechanism ``name`` (a registry name or a user's class, :func:`mechanism_class`) with
    ``params`` (validated by its constructor)."""
    cls = mechanism_class(name)
    try:
        return cls(**params)
    except TypeError as err:  # unexpected keyword: say which mechanism and what it takes
        raise ValueError(f"bad parameters for mechanism {shown(name)!r}: {err}") from None
