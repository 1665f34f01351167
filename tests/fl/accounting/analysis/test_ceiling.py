"""The ceiling of a local point: the pure-LDP bound on any classifier of a sanitized input, and the
public-class-plus-randomized-response point."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fl.accounting.analysis.ceiling import accuracy_ceiling, public_rr_accuracy


@pytest.mark.parametrize(
    ("epsilon", "k", "expected"),
    [
        (math.pi, 2, 0.9585761678336372),  # the figures: 0.96 on SST-2 ...
        (math.pi, 4, 0.8852363997334128),  # ... and 0.88 on AG News at pure 3.14
        (0.0, 4, 0.25),
        (2 * math.pi, 2, 0.998136038110375),
    ],
)
def test_balanced_classes_give_e_eps_over_e_eps_plus_k_minus_1(epsilon: float, k: int, expected: float) -> None:
    assert accuracy_ceiling(epsilon, [1.0] * k) == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(math.exp(epsilon) / (math.exp(epsilon) + k - 1), rel=1e-12)


def test_the_bound_is_reached_by_randomized_response_of_a_perfect_classifier_and_never_beaten() -> None:
    """Brute force over every classifier of K-ary RR's output and of a random epsilon-LDP channel: the best
    accuracy never exceeds the bound, and RR of the true class reaches it (so the bound is tight)."""
    rng = np.random.default_rng(0)
    for k in (2, 3, 4):
        for eps in (0.5, 1.0, 3.0):
            priors = rng.dirichlet(np.ones(k))
            bound = accuracy_ceiling(eps, priors)
            # K-RR of the true class, best receiver: argmax_y pi_y P(z | y) per output z
            keep = math.exp(eps) / (math.exp(eps) + k - 1)
            channel = np.full((k, k), (1 - keep) / (k - 1))
            np.fill_diagonal(channel, keep)
            best_rr = sum(max(priors[y] * channel[y, z] for y in range(k)) for z in range(k))
            assert best_rr <= bound + 1e-12
            # a random channel whose ratios are within e^eps: rows of P(z | y) with bounded ratios
            for _ in range(50):
                base = rng.random(6)
                tilt = np.exp(rng.uniform(0, eps, size=(k, 6)))
                p = base * tilt
                p /= p.sum(axis=1, keepdims=True)
                ratios = p[:, None, :] / p[None, :, :]
                if ratios.max() > math.exp(eps) + 1e-12:
                    continue
                best = sum(max(priors[y] * p[y, z] for y in range(k)) for z in range(6))
                assert best <= bound + 1e-12
        # balanced priors: RR of the true class meets the bound exactly
        keep = math.exp(1.0) / (math.exp(1.0) + k - 1)
        assert accuracy_ceiling(1.0, [1] * k) == pytest.approx(keep, rel=1e-12)


def test_public_class_with_rr_matches_a_simulation() -> None:
    rng = np.random.default_rng(1)
    k, eps, acc, n = 4, 2.0, 0.85, 400_000
    truth = rng.integers(0, k, n)
    right = rng.random(n) < acc
    public = np.where(right, truth, (truth + rng.integers(1, k, n)) % k)
    keep = rng.random(n) < math.exp(eps) / (math.exp(eps) + k - 1)
    report = np.where(keep, public, (public + rng.integers(1, k, n)) % k)
    assert (report == truth).mean() == pytest.approx(public_rr_accuracy(eps, k, acc), abs=3e-3)
    assert public_rr_accuracy(eps, k, acc) < accuracy_ceiling(eps, [1] * k)


def test_bad_arguments_are_refused() -> None:
    for call in (
        lambda: accuracy_ceiling(-1.0, [1, 1]),
        lambda: accuracy_ceiling(1.0, [1]),
        lambda: accuracy_ceiling(float("inf"), [1, 1]),
        lambda: public_rr_accuracy(1.0, 1, 0.5),
        lambda: public_rr_accuracy(1.0, 2, 1.5),
    ):
        with pytest.raises(ValueError):
            call()
