"""Privacy accounting: per-user ledgers of releases, composition, and shuffle amplification."""

from .composition import Composed, compose
from .ledger import PrivacyLedger
from .shuffle import ShuffleBound, compose_shuffled, shuffle_amplification, shuffle_bound

__all__ = [
    "Composed",
    "PrivacyLedger",
    "ShuffleBound",
    "compose",
    "compose_shuffled",
    "shuffle_amplification",
    "shuffle_bound",
]
