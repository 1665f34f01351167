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


def _number(value: Any) -> float | None:
    return None if value is None or value != value else float(value)


def standard_error(accuracy: float | None, n: int | None) -> float | None:
    """The binomial standard error sqrt(p (1 - p) / n) of an accuracy ``p`` on ``n`` test users."""
    if accuracy is None or not n:
        return None
    return (max(accuracy * (1 - accuracy), 0.0) / n) ** 0.5


#: The models fitted on the public data alone that a run is held against, by the test inputs of the block
#: (:func:`outcome`): the name each is recorded under in ``public_only_models`` and the round record's key of its
#: accuracy. Server-side inference (local mode, sanitized test releases): the run's own server model fitted on
#: the public data with no private release. On-device inference (local mode, clean test inputs in M1's space):
#: the public logistic regression on the encoder's embeddings and that same server model on the clean inputs.
#: Central mode (clean test inputs): the public logistic regression (fitted on the public split, as the
#: public start's data).
PUBLIC_ONLY_MODELS: dict[str, tuple[tuple[str, str], ...]] = {
    "sanitized": (("server_model", "public_only_accuracy"),),
    "clean": (("logistic_regression", "public_only_accuracy"),),
    "on_device": (
        ("logistic_regression", "public_only_clean_accuracy"),
        ("server_model", "public_only_head_clean_accuracy"),
    ),
}

#: The one-sided p-value below which a point's paired gains over the seeds count as adding over the public data.
ADDS_P = 0.05


def public_only_models(record: Mapping[str, Any], block: str) -> dict[str, float]:
    """The public-only models' accuracies a round ``record`` holds for a ``block`` of :data:`PUBLIC_ONLY_MODELS`,
    by name (only those measured)."""
    out = {}
    for name, key in PUBLIC_ONLY_MODELS.get(block, ()):
        value = _number(record.get(key))
        if value is not None:
            out[name] = value
    return out


def against_public(accuracy: float | None, models: Mapping[str, float | None], n: int | None) -> dict[str, Any]:
    """The run's accuracy against the models fitted on its public data alone, on the same test inputs.

    ``models`` maps each public-only model's name to its accuracy (None: not measured). The public-only line
    is the strongest of them: ``public_only_accuracy`` is the largest accuracy, ``gain_over_public`` the
    run's accuracy minus it, and ``adds_over_public`` whether that gain exceeds one binomial standard error
    of the accuracy on the ``n`` test users (None: not measured); ``public_only_models`` records every
    measured model's accuracy by name. A run whose gain does not is flagged "adds nothing over the public
    data" like one at the majority class."""
    measured = {name: value for name, value in ((n, _number(v)) for n, v in models.items()) if value is not None}
    public_only = max(measured.values()) if measured else None
    gain = None if accuracy is None or public_only is None else accuracy - public_only
    se = standard_error(accuracy, n)
    return {
        "public_only_accuracy": public_only,
        "public_only_models": measured,
        "gain_over_public": gain,
        "adds_over_public": None if gain is None or se is None else bool(gain > se),
    }


def gain_over_public_p(gains: Sequence[float | None]) -> float | None:
    """The one-sided p-value of a point's paired gains over the seeds (per seed: accuracy minus the public-only
    line, on the same test inputs), under H0: mean gain <= 0 (a one-sample t-test, ``alternative="greater"``).
    ``None`` with fewer than two finite gains; with gains all equal (no spread), 0 when they are positive and
    1 otherwise."""
    values = [g for g in map(_number, gains) if g is not None]
    if len(values) < 2:
        return None
    if max(values) == min(values):
        return 0.0 if values[0] > 0 else 1.0
    from scipy.stats import ttest_1samp

    return float(ttest_1samp(values, 0.0, alternative="greater").pvalue)


def adds_over_public(
    gains: Sequence[float | None], accuracy: float | None, test_users: int | None
) -> tuple[bool | None, float | None]:
    """Whether a point beats the model fitted on its public data alone beyond seed noise, and the p-value
    that says so: a one-sided paired t-test over the seeds (:func:`gain_over_public_p`; the gains are paired
    per seed, on the same test inputs; H0: mean gain <= 0) at p < :data:`ADDS_P`. With one seed, no test:
    the gain must exceed one binomial standard error of the accuracy on the test users (872 SST-2 test
    users: about 0.013), and the p-value is ``None``. ``(None, None)`` where the public-only accuracy was
    not measured."""
    values = [g for g in map(_number, gains) if g is not None]
    if not values:
        return None, None
    if len(values) >= 2:
        p = gain_over_public_p(values)
        assert p is not None
        return bool(p < ADDS_P), p
    se = standard_error(accuracy, test_users or 872)
    return bool(values[0] > (se or 0.0)), None


def outcome(
    records: Sequence[Mapping[str, Any]], class_counts: Sequence[int] | None, test_inputs: str = "sanitized"
) -> dict[str, Any]:
    """A run's ``outcome`` block: the test split's majority-class rate, whether the final accuracy beats
    it (:func:`learned`), whether the scores moved (:func:`moved`), and ``learned_nothing``: true when the
    final accuracy does not beat the majority class, or, where that rate is unknown, the scores never moved
    (a run above the majority class whose scores stood still after its first round did learn).

    Beside it, the models fitted on the public data alone on the same test inputs (:func:`against_public`,
    the strongest of them is the line; ``test_inputs``: what ``accuracy`` scored, ``"sanitized"`` releases in
    local mode, ``"clean"`` inputs in central mode; :data:`PUBLIC_ONLY_MODELS`) and, where the nodes also
    scored clean test inputs (local mode with clean-evaluation), ``on_device``: on-device inference (the
    model applied to the clean test input) against the better of the public logistic regression and the
    run's server model fitted on the public data alone, on the same clean inputs."""
    majority = majority_rate(class_counts) if class_counts else None
    last = records[-1] if records else {}
    final = last.get("accuracy") if records else None
    beats, changed = learned(final, majority), moved(records)
    n = last.get("test_users")
    block: dict[str, Any] = {
        "majority_class_rate": majority,
        "beats_majority_class": beats,
        "training_moved": changed,
        "learned_nothing": beats is False or (beats is None and changed is False),
        "test_inputs": test_inputs,
        **against_public(_number(final), public_only_models(last, test_inputs), n),
    }
    clean = _number(last.get("clean_accuracy"))
    if test_inputs == "sanitized" and clean is not None:
        block["on_device"] = {
            "test_inputs": "clean",
            "accuracy": clean,
            "beats_majority_class": learned(clean, majority),
            **against_public(clean, public_only_models(last, "on_device"), n),
        }
    return block


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
    if not reasons and block.get("adds_over_public") is False:
        reasons.append(
            f"it adds nothing over the public data: {block['public_only_accuracy']:.4f} for the model fitted on the "
            "public data alone, on the same test inputs"
        )
    return "; ".join(reasons) + f". Change its settings: {ADVICE.get(mode, ADVICE['local'])}"
