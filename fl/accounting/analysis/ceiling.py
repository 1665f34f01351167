"""What a local-DP budget allows a classifier of a sanitized input: the ceiling of a local point.

With the test input released through a pure epsilon-LDP mechanism M, no classifier f of M(x) can be
right more often than

    sum_z max_y pi_y P(M(x_y) = z)  <=  pi* e^eps / (pi* e^eps + 1 - pi*),   pi* = max_y pi_y,

because for every output z the ratios P(M(x_y) = z) / P(M(x_y') = z) are at most e^eps, so the
posterior of any class given z is at most pi* e^eps / (pi* e^eps + 1 - pi*) (it is reached when the
largest class is e^eps times likelier than every other). For K balanced classes this is
e^eps / (e^eps + K - 1). It holds whatever the model was trained on: it is a property of the
test input's release.

An achievable point is the public classifier's class sent with K-ary randomized response at the same
epsilon: with public accuracy a, the receiver's majority vote of one report is right with probability
a p + (1 - a)(1 - p) / (K - 1), p = e^eps / (e^eps + K - 1) (the report is the public class with
probability p, each other class with probability (1 - p) / (K - 1)).

Hand-written: the bound is a two-line consequence of the definition of pure LDP, which no library
states for a classifier.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def accuracy_ceiling(epsilon: float, priors: Sequence[float]) -> float:
    """The largest accuracy any classifier of a pure ``epsilon``-LDP release of the input can reach
    when the classes have probabilities ``priors`` (they need not sum to 1 exactly: they are normalised)."""
    if not (epsilon >= 0 and math.isfinite(epsilon)):
        raise ValueError(f"epsilon must be >= 0 and finite, got {epsilon}")
    total = float(sum(priors))
    if len(priors) < 2 or total <= 0 or min(priors) < 0:
        raise ValueError(f"priors must be >= 2 non-negative class weights, got {list(priors)}")
    top = max(priors) / total
    return 1.0 / (1.0 + (1.0 - top) / top * math.exp(-epsilon))


def public_rr_accuracy(epsilon: float, num_classes: int, public_accuracy: float) -> float:
    """Accuracy of the public classifier's class released with K-ary randomized response at ``epsilon``
    (the receiver predicts the reported class)."""
    if num_classes < 2:
        raise ValueError(f"num_classes must be >= 2, got {num_classes}")
    if not 0.0 <= public_accuracy <= 1.0:
        raise ValueError(f"public_accuracy must lie in [0, 1], got {public_accuracy}")
    keep = 1.0 / (1.0 + (num_classes - 1) * math.exp(-epsilon))
    return public_accuracy * keep + (1.0 - public_accuracy) * (1.0 - keep) / (num_classes - 1)
