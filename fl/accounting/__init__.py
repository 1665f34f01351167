"""Privacy accounting: per-user ledgers of releases, composition, and shuffle amplification.

The names below are imported on first use (PEP 562): ``fl.accounting.scope`` (the guarantee's wording, read by
the console and the refusals) does not import dp-accounting, scipy or torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_LAZY = {
    "Amplification": "fl.accounting.analysis.variation_ratio",
    "Composed": "fl.accounting.analysis.composition",
    "PrivacyLedger": "fl.accounting.ledger",
    "ShuffleBound": "fl.accounting.analysis.shuffle",
    "ShuffledRound": "fl.accounting.analysis.shuffle_pld",
    "UNIFORM_WEIGHT_KEY": "fl.accounting.central",
    "VRParameters": "fl.accounting.analysis.variation_ratio",
    "central_epsilon": "fl.accounting.central",
    "compose": "fl.accounting.analysis.composition",
    "compose_shuffled": "fl.accounting.analysis.shuffle",
    "compose_shuffled_pld": "fl.accounting.analysis.shuffle_pld",
    "mechanism_amplification": "fl.accounting.analysis.variation_ratio",
    "noise_for_epsilon": "fl.accounting.central",
    "num_sampled_nodes": "fl.accounting.central",
    "privacy_record": "fl.accounting.central",
    "shuffle_amplification": "fl.accounting.analysis.variation_ratio",
    "shuffle_bound": "fl.accounting.analysis.shuffle",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fl.accounting' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
