"""A run's outcome: the majority-class rate, whether the final accuracy beats it, whether the scores moved."""

from __future__ import annotations

import pytest

from fl.reporting.outcome import MARGIN, learned, majority_rate, moved, outcome, outcome_text


def _rounds(*scores: tuple[float, float]) -> list[dict[str, float]]:
    return [{"round": i + 1, "accuracy": a, "macro_f1": f} for i, (a, f) in enumerate(scores)]


def test_the_majority_rate_is_the_most_frequent_class_share() -> None:
    assert majority_rate([87, 13]) == pytest.approx(0.87)
    assert majority_rate([5, 20, 25]) == pytest.approx(0.5)
    assert majority_rate([0, 0]) is None


def test_learning_means_beating_the_majority_rate_by_more_than_the_margin() -> None:
    assert learned(0.87 + 2 * MARGIN, 0.87) is True
    assert learned(0.87 + MARGIN / 2, 0.87) is False  # within the margin: not a result
    assert learned(0.856, 0.866) is False
    assert learned(None, 0.87) is None and learned(0.9, None) is None and learned(float("nan"), 0.5) is None


def test_scores_that_never_change_did_not_move() -> None:
    assert moved(_rounds((0.856, 0.461), (0.856, 0.461), (0.856, 0.461))) is False
    assert moved(_rounds((0.856, 0.461), (0.857, 0.470))) is True
    assert moved(_rounds((0.856, 0.461), (0.856, 0.470))) is True  # macro-F1 moved: predictions changed
    assert moved(_rounds((0.9, 0.9))) is None  # one round: cannot tell


def test_the_issue_s_flat_central_run_learned_nothing_and_the_line_says_what_to_change() -> None:
    """The SMS case: 87% ham, accuracy 0.856 / macro-F1 0.461 after each of 10 rounds."""
    block = outcome(_rounds(*[(0.856, 0.461)] * 10), [866, 134])
    assert block == {
        "majority_class_rate": pytest.approx(0.866),
        "beats_majority_class": False,
        "training_moved": False,
        "learned_nothing": True,
    }
    text = outcome_text(block, 0.856, "central")
    assert "0.8560 does not beat the majority-class rate 0.8660" in text
    assert "the same after every round" in text and "server-learning-rate" in text


def test_a_run_above_the_majority_rate_learned_even_if_its_scores_stood_still() -> None:
    block = outcome(_rounds((0.93, 0.85), (0.93, 0.85)), [866, 134])
    assert block["beats_majority_class"] is True and block["training_moved"] is False
    assert block["learned_nothing"] is False
    # Without test counts (synthetic data), scores that never moved are the only evidence.
    assert outcome(_rounds((0.5, 0.3), (0.5, 0.3)), None)["learned_nothing"] is True
    assert outcome(_rounds((0.5, 0.3), (0.6, 0.4)), None)["learned_nothing"] is False
