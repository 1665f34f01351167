"""Privacy accounting: per-user ledgers of releases, composition, and shuffle amplification."""

from fl.accounting.analysis.composition import Composed, compose
from fl.accounting.analysis.shuffle import ShuffleBound, compose_shuffled, shuffle_bound
from fl.accounting.analysis.shuffle_pld import ShuffledRound, compose_shuffled_pld
from fl.accounting.analysis.variation_ratio import (
    Amplification,
    VRParameters,
    mechanism_amplification,
    shuffle_amplification,
)
from fl.accounting.central import (
    UNIFORM_WEIGHT_KEY,
    central_epsilon,
    noise_for_epsilon,
    num_sampled_nodes,
    privacy_record,
)
from fl.accounting.ledger import PrivacyLedger

__all__ = [
    "UNIFORM_WEIGHT_KEY",
    "Amplification",
    "Composed",
    "PrivacyLedger",
    "ShuffleBound",
    "ShuffledRound",
    "VRParameters",
    "central_epsilon",
    "compose",
    "compose_shuffled",
    "compose_shuffled_pld",
    "mechanism_amplification",
    "noise_for_epsilon",
    "num_sampled_nodes",
    "privacy_record",
    "shuffle_amplification",
    "shuffle_bound",
]
