"""Local-DP sanitizers and their guarantees (pure torch; no Flower here).

The contract later issues and outside checks rely on::

    import mechanisms
    mechanisms.names()                       # -> ["none", "purkayastha", "rr", ...]
    m = mechanisms.create("purkayastha", epsilon=10.0)
    m.level                                  # "word" | "sentence" | "document" | "label"
    m.guarantee.as_ldp()                     # (epsilon0, delta0)
    y = m.sanitize(x, generator=g)           # sentence: x [n, m] -> [n, m]
    w = mechanisms.create("cmp", epsilon=10.0).sanitize_text(["some text"], generator=g)  # word
    r = mechanisms.create("rr", epsilon=2.0).sanitize(labels, num_classes=2)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .registry import create, mechanism_class, names, register

if TYPE_CHECKING:
    from .base import DocumentMechanism, LabelMechanism, Mechanism, SentenceMechanism, WordMechanism, check_epsilon
    from .class_rr import ClassRR
    from .clipped_additive import ClippedGaussian, ClippedLaplace
    from .deepcandidate import DeepCandidate
    from .guarantee import Guarantee, no_privacy
    from .identity import NoPrivacy
    from .planar_laplace import PlanarLaplace
    from .privemb import PrivEmb
    from .privunit import PrivUnit
    from .purkayastha import Purkayastha
    from .randomized_response import RandomizedResponse
    from .rr_prior import LabelPrior, RRWithPrior
    from .truncation import Truncation
    from .words import CMP, Mahalanobis, TrLaplace, WordGaussian, WordLaplace, WordSpace

__all__ = [
    "CMP",
    "ClassRR",
    "ClippedGaussian",
    "ClippedLaplace",
    "DeepCandidate",
    "DocumentMechanism",
    "Guarantee",
    "LabelMechanism",
    "Mahalanobis",
    "Mechanism",
    "NoPrivacy",
    "PlanarLaplace",
    "PrivEmb",
    "PrivUnit",
    "Purkayastha",
    "LabelPrior",
    "RRWithPrior",
    "RandomizedResponse",
    "SentenceMechanism",
    "TrLaplace",
    "Truncation",
    "WordGaussian",
    "WordLaplace",
    "WordMechanism",
    "WordSpace",
    "check_epsilon",
    "create",
    "mechanism_class",
    "names",
    "no_privacy",
    "register",
]

#: Every public name but the registry's, and the module that defines it: imported on first use (PEP 562), so
#: that ``import mechanisms`` (the config's checks, ``sanitas --help``) does not import torch. The registry
#: imports the built-in mechanisms when it is first asked for one (:func:`mechanisms.registry.names`).
_LAZY = {
    "CMP": "words",
    "ClassRR": "class_rr",
    "ClippedGaussian": "clipped_additive",
    "ClippedLaplace": "clipped_additive",
    "DeepCandidate": "deepcandidate",
    "DocumentMechanism": "base",
    "Guarantee": "guarantee",
    "LabelMechanism": "base",
    "LabelPrior": "rr_prior",
    "Mahalanobis": "words",
    "Mechanism": "base",
    "NoPrivacy": "identity",
    "PlanarLaplace": "planar_laplace",
    "PrivEmb": "privemb",
    "PrivUnit": "privunit",
    "Purkayastha": "purkayastha",
    "RRWithPrior": "rr_prior",
    "RandomizedResponse": "randomized_response",
    "SentenceMechanism": "base",
    "TrLaplace": "words",
    "Truncation": "truncation",
    "WordGaussian": "words",
    "WordLaplace": "words",
    "WordMechanism": "base",
    "WordSpace": "words",
    "check_epsilon": "base",
    "no_privacy": "guarantee",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mechanisms' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
