"""K-ary randomized response for labels (Warner 1965; Du et al. 2023 §3.3.1).

Guarantee: pure epsilon-LDP per label. The true label is kept with probability
``e^eps / (e^eps + K - 1)``; otherwise one of the other K - 1 labels is output
uniformly, each with probability ``1 / (e^eps + K - 1)``. Every ratio of output
probabilities between two inputs is at most e^eps, with equality (tight).

The exact output law is exposed as :meth:`RandomizedResponse.log_output_probabilities`
(and :meth:`~RandomizedResponse.log_transition_matrix`), so that tests and audits
can check the sampler against it and the e^eps bound on it, instead of on a copy
of the formula.
"""

from __future__ import annotations

import math
from typing import overload

import torch

from mechanisms import random_source

from .base import LabelMechanism, check_epsilon, check_labels, sample_device
from .guarantee import Guarantee


@overload
def keep_probability(epsilon: float, num_classes: int) -> float: ...
@overload
def keep_probability(epsilon: float, num_classes: torch.Tensor) -> torch.Tensor: ...
def keep_probability(epsilon: float, num_classes: int | torch.Tensor) -> float | torch.Tensor:
    """``e^eps / (e^eps + K - 1)``, written so that it does not overflow for eps >= 710."""
    return 1.0 / (1.0 + (num_classes - 1) * math.exp(-epsilon))


def log_keep_probability(epsilon: float, num_classes: torch.Tensor) -> torch.Tensor:
    """``log(e^eps / (e^eps + k - 1)) = -log1p((k - 1) e^-eps)`` per entry of ``num_classes`` (float64).

    The log of :func:`keep_probability`, finite and exact to rounding for every
    0 < eps < inf (no e^eps is formed). The log-probability of each of the
    other k - 1 labels is this minus eps.
    """
    k = num_classes.to(torch.float64)
    return -torch.log1p((k - 1) * math.exp(-epsilon))


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
        return Guarantee(notion="pure", epsilon=self.epsilon, granularity="label", accounting="randomized_response")

    @torch.no_grad()
    def log_output_probabilities(self, y: torch.Tensor, num_classes: int) -> torch.Tensor:
        """Exact log-law of ``sanitize(y, num_classes)``: [n, K] float64 on ``y``'s device.

        Entry (i, j) is log P[release_i = j | label y_i]: ``-log1p((K-1) e^-eps)``
        at j = y_i and that minus eps at the K - 1 other labels. Guarantees: it is
        the law :meth:`sanitize` draws from (same keep probability, the others
        equal); every row sums to 1 up to rounding (``logsumexp`` = 0); every entry
        is finite for 0 < eps < inf (no overflow at eps = 1000, where the linear
        probabilities of the other labels underflow to 0); and
        max_j |log P[j | y] - log P[j | y']| = eps exactly for y != y'.
        """
        y = check_labels(y, num_classes)
        k = torch.full((y.numel(),), num_classes, dtype=torch.float64, device=y.device)
        log_keep = log_keep_probability(self.epsilon, k)
        out = (log_keep - self.epsilon)[:, None].expand(y.numel(), num_classes).clone()
        out.scatter_(1, y[:, None], log_keep[:, None])
        return out

    def output_probabilities(self, y: torch.Tensor, num_classes: int) -> torch.Tensor:
        """``exp(log_output_probabilities(y, num_classes))``: the [n, K] law of the release.

        Probabilities below ~1e-308 underflow to 0 (large eps): use the log
        version for ratios.
        """
        return self.log_output_probabilities(y, num_classes).exp()

    def log_transition_matrix(self, num_classes: int) -> torch.Tensor:
        """[K, K] float64 matrix of log P[release = j | label = i] (row i = input i).

        ``log_output_probabilities(arange(K), K)``: the exact law of :meth:`sanitize`.
        """
        return self.log_output_probabilities(torch.arange(num_classes), num_classes)

    @torch.no_grad()
    def sanitize(self, y: torch.Tensor, num_classes: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """One independent release per label: y with probability
        ``keep_probability(eps, K)``, else a uniform other label (the law of
        :meth:`log_output_probabilities`)."""
        y = check_labels(y, num_classes)
        device = sample_device(y.device, generator)
        n = y.numel()
        keep = random_source.rand(n, generator=generator, dtype=torch.float64, device=device) < keep_probability(
            self.epsilon, num_classes
        )
        # (y + 1 + U{0..K-2}) mod K is uniform over the K - 1 other labels.
        shift = random_source.randint(0, num_classes - 1, (n,), generator=generator, device=device)
        y_dev = y.to(device)
        other = (y_dev + 1 + shift) % num_classes
        return torch.where(keep, y_dev, other).to(y.device)
