"""Whether a run learned anything: its final accuracy against the majority-class rate, and whether its
scores moved over the rounds.

The majority-class rate is the accuracy of a model that always answers the test split's most frequent
class. On imbalanced data (87% of one class) it is far above "random guess" (1 / classes), so a run at
0.87 has learned nothing even though 0.87 looks like a result. A run whose accuracy and macro-F1 are
the same after every round did not move either: its model answers the same way from the first round on.
Every run's ``summary.json`` carries both verdicts (``outcome``) and ``sweep`` and ``compare`` flag their
points from them; they are diagnostics on the test split, never used to choose anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: How far above the majority-class rate an accuracy must be to count as learned.
MARGIN = 0.005


def majority_rate(class_counts: Sequence[int]) -> float | None:
    """The share of the most frequent class (None when there are no documents)."""
    total = sum(int(c) for c in class_counts)
    return max(int(c) for c in class_counts) / total if total else None


def learned(accuracy: float | None, majority: float | None) -> bool | None:
    """Whether ``accuracy`` beats the majority-class rate by more than :data:`MARGIN` (None: unknown)."""
    if accuracy is None or majority is None or accuracy != accuracy:
        return None
    return accuracy > majority + MARGIN


def moved(records: Sequence[Mapping[str, Any]]) -> bool | None:
    """Whether the test scores changed over the rounds (None for fewer than two scored rounds): a model
    whose accuracy and macro-F1 are identical after every round answers the same way throughout."""
    scored = [
        (r.get("accuracy"), r.get("macro_f1"))
        for r in records
        if r.get("accuracy") is not None and r.get("accuracy") == r.get("accuracy")
    ]
    return None if len(scored) < 2 else len(set(scored)) > 1


def outcome(records: Sequence[Mapping[str, Any]], class_counts: Sequence[int] | None) -> dict[str, Any]:
    """A run's ``outcome`` block: the test split's majority-class rate, whether the final accuracy beats
    it (:func:`learned`), whether the scores moved (:func:`moved`), and ``learned_nothing``: true when the
    final accuracy does not beat the majority class, or, where that rate is unknown, the scores never moved
    (a run above the majority class whose scores stood still after its first round did learn)."""
    majority = majority_rate(class_counts) if class_counts else None
    final = records[-1].get("accuracy") if records else None
    beats, changed = learned(final, majority), moved(records)
    return {
        "majority_class_rate": majority,
        "beats_majority_class": beats,
        "training_moved": changed,
        "learned_nothing": beats is False or (beats is None and changed is False),
    }


#: What to change when a run learned nothing, by mode: the keys that decide whether its model moves.
ADVICE = {
    "central": "for central DP, raise server-learning-rate or client-learning-rate, num-server-rounds or "
    "central-cohort-size (choose them on public data, docs/own-data.md)",
    "local": "for local DP, a larger epsilon or a recipe chosen on public data (sanitas tune)",
}


def outcome_text(block: Mapping[str, Any], accuracy: float | None, mode: str = "local") -> str:
    """One line saying why ``block`` (:func:`outcome`) counts as having learned nothing, and what to change."""
    reasons = []
    majority = block.get("majority_class_rate")
    if block.get("beats_majority_class") is False and majority is not None:
        final = "nan" if accuracy is None else f"{accuracy:.4f}"
        reasons.append(
            f"final accuracy {final} does not beat the majority-class rate {majority:.4f} (always answering the "
            "most frequent test class)"
        )
    if block.get("training_moved") is False:
        reasons.append("accuracy and macro-F1 are the same after every round")
    return "; ".join(reasons) + f". Change its settings: {ADVICE.get(mode, ADVICE['local'])}"
