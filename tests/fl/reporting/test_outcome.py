"""A run's outcome: the majority-class rate, whether the final accuracy beats it, whether the scores moved."""

from __future__ import annotations

import pytest

from fl.reporting.outcome import (
    MARGIN,
    adds_over_public,
    against_public,
    gain_over_public_p,
    learned,
    majority_rate,
    moved,
    outcome,
    outcome_text,
    standard_error,
)


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
        "test_inputs": "sanitized",
        "public_only_accuracy": None,
        "public_only_models": {},
        "gain_over_public": None,
        "adds_over_public": None,
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


def test_the_public_only_line_is_the_gain_against_one_binomial_standard_error() -> None:
    """872 test users at 0.80: one standard error is sqrt(0.8 * 0.2 / 872) = 0.01355; a gain of 0.013 adds
    nothing, 0.014 does."""
    assert standard_error(0.8, 872) == pytest.approx(0.013546, abs=1e-6)
    assert against_public(0.80, {"server_model": 0.787}, 872) == {
        "public_only_accuracy": 0.787,
        "public_only_models": {"server_model": 0.787},
        "gain_over_public": pytest.approx(0.013),
        "adds_over_public": False,
    }
    assert against_public(0.80, {"server_model": 0.786}, 872)["adds_over_public"] is True
    assert against_public(0.80, {"server_model": None}, 872)["adds_over_public"] is None


def test_the_public_only_line_is_the_strongest_public_only_model() -> None:
    """Two public-only models on the same inputs: the line is the better one, and the gain is over it (a gain
    over the weaker one, 0.80 - 0.70, would pass as adding; over the stronger, 0.80 - 0.79, it does not)."""
    block = against_public(0.80, {"logistic_regression": 0.70, "server_model": 0.79, "unscored": None}, 872)
    assert block["public_only_models"] == {"logistic_regression": 0.70, "server_model": 0.79}
    assert block["public_only_accuracy"] == 0.79
    assert block["gain_over_public"] == pytest.approx(0.01) and block["adds_over_public"] is False
    # whichever of the two is the stronger
    flipped = against_public(0.80, {"logistic_regression": 0.79, "server_model": 0.70}, 872)
    assert flipped["public_only_accuracy"] == 0.79 and flipped["adds_over_public"] is False


def test_a_point_adds_over_public_by_a_one_sided_paired_t_test_over_the_seeds() -> None:
    """H0: mean paired gain <= 0; adds at p < 0.05 (t-test over the seeds' gains, two degrees of freedom here)."""
    adds, p = adds_over_public([0.005, 0.006, -0.001], 0.75, 872)
    assert adds is False and p == pytest.approx(0.1336, abs=1e-3)  # t = 1.52
    adds, p = adds_over_public([0.04, 0.042, 0.041], 0.75, 872)
    assert adds is True and p is not None and p < 1e-3
    # mean 0.02 above the sample sd 0.015 (the old rule's "adds"), but t = 2.31, p = 0.074: not at 0.05
    adds, p = adds_over_public([0.02, 0.005, 0.035], 0.75, 872)
    assert adds is False and p == pytest.approx(0.0735, abs=1e-3)
    assert adds_over_public([-0.01, -0.011, -0.012], 0.75, 872)[0] is False
    # no spread: all equal and positive adds (p = 0), all equal and not positive does not
    assert adds_over_public([0.02, 0.02, 0.02], 0.75, 872) == (True, 0.0)
    assert adds_over_public([0.0, 0.0], 0.75, 872) == (False, 1.0)
    # one seed: no test, one binomial standard error (0.0147 at 0.75 on 872 users); no p-value
    assert adds_over_public([0.02], 0.75, 872) == (True, None)
    assert adds_over_public([0.01, None], 0.75, 872) == (False, None)
    assert adds_over_public([None], None, None) == (None, None)
    assert gain_over_public_p([0.005, 0.006, -0.001]) == pytest.approx(0.1336, abs=1e-3)
    assert gain_over_public_p([0.01]) is None


def test_the_outcome_holds_both_test_inputs_against_public_only() -> None:
    """A local run with on-device inference: the sanitized accuracy against the public model's on the same
    sanitized inputs, and the clean one against the public logistic regression on the clean inputs."""
    record = {
        "accuracy": 0.58,
        "macro_f1": 0.58,
        "clean_accuracy": 0.755,
        "public_only_accuracy": 0.565,
        "public_only_clean_accuracy": 0.721,
        "test_users": 872,
    }
    block = outcome([record], [428, 444])
    assert block["test_inputs"] == "sanitized"
    # 0.015 over public-only is within one standard error at 0.58 (0.0167): it adds nothing
    assert block["public_only_accuracy"] == 0.565 and block["adds_over_public"] is False
    assert block["public_only_models"] == {"server_model": 0.565}
    assert block["on_device"] == {
        "test_inputs": "clean",
        "accuracy": 0.755,
        "beats_majority_class": True,
        "public_only_accuracy": 0.721,
        "public_only_models": {"logistic_regression": 0.721},
        "gain_over_public": pytest.approx(0.034),
        "adds_over_public": True,
    }
    central = outcome([{**record, "clean_accuracy": 0.58}], [428, 444], "clean")
    assert "on_device" not in central and central["test_inputs"] == "clean"
    assert central["public_only_models"] == {"logistic_regression": 0.565}
    flat = outcome([{**record, "accuracy": 0.57}], [428, 444])
    assert "adds nothing over the public data" in outcome_text(flat, 0.57)


def test_on_device_the_line_is_the_better_of_the_logistic_regression_and_the_public_server_model() -> None:
    """The run's own server model fitted on the public data alone beats the public logistic regression on the
    clean inputs: on-device inference is held against it (0.755 - 0.745 = 0.010, within one standard error),
    not against the weaker logistic regression (0.755 - 0.721 = 0.034 would count as adding)."""
    record = {
        "accuracy": 0.58,
        "macro_f1": 0.58,
        "clean_accuracy": 0.755,
        "public_only_accuracy": 0.565,
        "public_only_clean_accuracy": 0.721,
        "public_only_head_clean_accuracy": 0.745,
        "test_users": 872,
    }
    device = outcome([record], [428, 444])["on_device"]
    assert device["public_only_models"] == {"logistic_regression": 0.721, "server_model": 0.745}
    assert device["public_only_accuracy"] == 0.745
    assert device["gain_over_public"] == pytest.approx(0.010) and device["adds_over_public"] is False
    weaker = outcome([{**record, "public_only_head_clean_accuracy": 0.70}], [428, 444])["on_device"]
    assert weaker["public_only_accuracy"] == 0.721 and weaker["adds_over_public"] is True
