"""K-ary randomized response for labels (Warner 1965; Du et al. 2023 §3.3.1).

Guarantee: pure epsilon-LDP per label. The true label is kept with probability
``e^eps / (e^eps + K - 1)``; otherwise one of the other K - 1 labels is output
uniformly, each with probability ``1 / (e^eps + K - 1)``. Every ratio of output
probabilities between two inputs is at most e^eps, with equality (tight).
"""

from __future__ import annotations

import math

import torch

from .base import LabelMechanism, check_epsilon, check_labels, sample_device
from .guarantee import Guarantee


def keep_probability(epsilon: float, num_classes: int) -> float:
    """``e^eps / (e^eps + K - 1)``, written so that it does not overflow for eps >= 710."""
    return 1.0 / (1.0 + (num_classes - 1) * math.exp(-epsilon))


class RandomizedResponse(LabelMechanism):
    """K-ary randomized response: pure epsilon-LDP per label.

    Parameters
    ----------
    epsilon : float
        Privacy parameter, 0 < epsilon < inf.
    """

    name = "rr"

    def __init__(self, epsilon: float) -> None:
        self.epsilon = check_epsilon(epsilon)

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(notion="pure", epsilon=self.epsilon, granularity="label")

    @torch.no_grad()
    def sanitize(
        self, y: torch.Tensor, num_classes: int, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        y = check_labels(y, num_classes)
        device = sample_device(y.device, generator)
        n = y.numel()
        keep = torch.rand(n, generator=generator, dtype=torch.float64, device=device) < keep_probability(
            self.epsilon, num_classes
        )
        # (y + 1 + U{0..K-2}) mod K is uniform over the K - 1 other labels.
        shift = torch.randint(0, num_classes - 1, (n,), generator=generator, device=device)
        y_dev = y.to(device)
        other = (y_dev + 1 + shift) % num_classes
        return torch.where(keep, y_dev, other).to(y.device)
