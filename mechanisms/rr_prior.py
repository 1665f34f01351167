"""Randomized response with a prior (Ghazi et al., NeurIPS 2021, "Deep learning
with label differential privacy", RRWithPrior; docs/SPEC.md §4.2).

Guarantee: pure epsilon-LDP per label, provided the prior does not depend on
the true label. Given a prior p over K labels, let Y_k be the k most likely
labels and k* = argmax_k e^eps/(e^eps + k - 1) * p(Y_k). If y is in Y_k*, output
y with probability e^eps/(e^eps + k* - 1), else a uniform other label of Y_k*; if
y is not in Y_k*, output a uniform label of Y_k*. The three output
probabilities e^eps/(e^eps+k-1), 1/(e^eps+k-1) and 1/k are within e^eps.
:meth:`RRWithPrior.log_output_probabilities` returns this exact law per row
(tests check the sampler against it, and the e^eps bound on it).

The prior must come from public information or from a model applied to the
user's *sanitized* embedding (post-processing). A prior computed from the raw
embedding would carry the label's signal outside the mechanism: it is refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from mechanisms import random_source

from .base import check_labels, sample_device
from .guarantee import Guarantee
from .randomized_response import RandomizedResponse, keep_probability, log_keep_probability

ALLOWED_SOURCES = ("public", "sanitized")


@dataclass(frozen=True)
class LabelPrior:
    """Per-example prior probabilities ``probs`` [n, K] and where they came from."""

    probs: torch.Tensor
    source: str

    def __post_init__(self) -> None:
        if self.source not in ALLOWED_SOURCES:
            raise ValueError(
                f"RR-with-prior refuses a prior from {self.source!r}: it must come from public data or "
                "from a model applied to the sanitized embedding (docs/SPEC.md §4.2)"
            )


def top_k_sets(probs: torch.Tensor, epsilon: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(labels sorted by prior, descending) and k* per row (1-based size of the chosen set).

    Ties in the prior keep the lower label first (stable sort); k* is the first
    maximiser of e^eps/(e^eps + k - 1) * p(Y_k), computed in log space.
    """
    order = torch.argsort(probs, dim=1, descending=True, stable=True)
    mass = torch.gather(probs, 1, order).cumsum(dim=1)
    k = torch.arange(1, probs.shape[1] + 1, dtype=probs.dtype, device=probs.device)
    # log of e^eps/(e^eps + k - 1) = -log1p((k - 1) e^-eps): no overflow at large eps.
    log_keep = -torch.log1p((k - 1) * math.exp(-epsilon))
    score = log_keep + torch.log(mass.clamp_min(1e-300))
    return order, score.argmax(dim=1) + 1


class RRWithPrior(RandomizedResponse):
    """RR-with-prior: pure epsilon-LDP per label for a label-independent prior.

    ``sanitize(y, num_classes, generator, prior=LabelPrior(...))``; without a
    prior it falls back to a uniform prior, which is exactly K-ary RR (whose
    constructor and guarantee it shares).
    """

    name = "rr_prior"

    @property
    def guarantee(self) -> Guarantee:
        """K-ary RR's pure epsilon per label. Its law (RR among the prior's top classes) is not K-ary RR's,
        so it declares no exact accounting kind: the generic pair is composed."""
        return replace(super().guarantee, accounting=None)

    @staticmethod
    def _prior_probs(prior: LabelPrior | None, n: int, num_classes: int, device: torch.device) -> torch.Tensor:
        """The [n, K] float64 prior on ``device`` (uniform when ``prior`` is None), checked."""
        if prior is None:
            return torch.full((n, num_classes), 1.0 / num_classes, dtype=torch.float64, device=device)
        if not isinstance(prior, LabelPrior):
            raise TypeError("prior must be a LabelPrior (probabilities plus their source)")
        probs = prior.probs.detach().to(device=device, dtype=torch.float64)
        if probs.shape != (n, num_classes) or not bool(torch.isfinite(probs).all()) or bool((probs < 0).any()):
            raise ValueError(f"prior must be finite, non-negative, of shape {(n, num_classes)}")
        return probs

    @torch.no_grad()
    def log_output_probabilities(
        self, y: torch.Tensor, num_classes: int, prior: LabelPrior | None = None
    ) -> torch.Tensor:
        """Exact log-law of ``sanitize(y, num_classes, prior=prior)``: [n, K] float64.

        Entry (i, j) is log P[release_i = j | label y_i, prior row i]. With k* and
        Y_k* from :func:`top_k_sets` (the same call the sampler makes): if y_i is
        in Y_k*, ``-log1p((k*-1) e^-eps)`` at j = y_i and that minus eps at the
        other labels of Y_k*; if not, ``-log k*`` on Y_k*; -inf outside Y_k*.
        Guarantees: it is the law :meth:`sanitize` draws from; rows sum to 1 up to
        rounding; finite on the support for every 0 < eps < inf (no e^eps is
        formed); the support Y_k* does not depend on y, and for a fixed prior row
        max_j |log P[j | y] - log P[j | y']| <= eps, with equality when k* >= 2
        and y, y' are both in Y_k*. ``prior=None`` is the uniform prior (K-ary RR).
        """
        y = check_labels(y, num_classes)
        n = y.numel()
        probs = self._prior_probs(prior, n, num_classes, y.device)
        order, k_star = top_k_sets(probs, self.epsilon)
        positions = torch.arange(num_classes, device=y.device).expand(n, num_classes)
        rank = torch.empty_like(order).scatter_(1, order, positions)  # rank[i, label] in the sorted order
        in_set = rank < k_star[:, None]
        y_in_set = in_set.gather(1, y[:, None])  # [n, 1]
        log_keep = log_keep_probability(self.epsilon, k_star)[:, None]
        log_uniform = -torch.log(k_star.to(torch.float64))[:, None]
        is_y = positions == y[:, None]
        inside = torch.where(y_in_set, torch.where(is_y, log_keep, log_keep - self.epsilon), log_uniform)
        return torch.where(in_set, inside, torch.full_like(inside, -math.inf))

    def output_probabilities(self, y: torch.Tensor, num_classes: int, prior: LabelPrior | None = None) -> torch.Tensor:
        """``exp(log_output_probabilities(y, num_classes, prior))``, [n, K] (0 outside Y_k*).

        Probabilities below ~1e-308 underflow to 0 (large eps): use the log
        version for ratios.
        """
        return self.log_output_probabilities(y, num_classes, prior).exp()

    @torch.no_grad()
    def sanitize(
        self,
        y: torch.Tensor,
        num_classes: int,
        generator: torch.Generator | None = None,
        prior: LabelPrior | None = None,
    ) -> torch.Tensor:
        """One independent release per label, drawn from :meth:`log_output_probabilities`."""
        y = check_labels(y, num_classes)
        device = sample_device(y.device, generator)
        n = y.numel()
        probs = self._prior_probs(prior, n, num_classes, device)
        order, k_star = top_k_sets(probs, self.epsilon)
        y_dev = y.to(device)
        rank = (order == y_dev[:, None]).int().argmax(dim=1)
        in_set = rank < k_star
        kf = k_star.to(torch.float64)
        p_keep = keep_probability(self.epsilon, kf)
        u_keep = random_source.rand(n, generator=generator, dtype=torch.float64, device=device)
        u_pick = random_source.rand(n, generator=generator, dtype=torch.float64, device=device)
        # Uniform position among the k* - 1 others (skipping y's position), or among all k*.
        others = torch.clamp((u_pick * (kf - 1)).long(), max=(k_star - 2).clamp_min(0))
        others = others + (others >= rank).long()
        anyone = torch.clamp((u_pick * kf).long(), max=k_star - 1)
        position = torch.where(in_set, others, anyone)
        picked = torch.gather(order, 1, position.clamp(max=num_classes - 1)[:, None]).squeeze(1)
        keep = in_set & (u_keep < p_keep)
        return torch.where(keep, y_dev, picked).to(y.device)
