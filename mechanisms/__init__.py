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
from .registry import create, mechanism_class, names, register
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

register(CMP)
register(ClassRR)
register(ClippedGaussian)
register(ClippedLaplace)
register(DeepCandidate)
register(NoPrivacy)
register(PlanarLaplace)
register(PrivEmb)
register(PrivUnit)
register(Purkayastha)
register(RandomizedResponse)
register(RRWithPrior)
register(Mahalanobis)
register(TrLaplace)
register(Truncation)
register(WordGaussian)
register(WordLaplace)
