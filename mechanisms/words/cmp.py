"""CMP, "calibrated multivariate perturbations" (Feyisetan, Balle, Drake &
Diethe, WSDM 2020; docs/SPEC.md §5.1).

Per word w: y = phi(w) + Z with density of Z proportional to exp(-epsilon ||z||_2)
(radius Gamma(n, 1/epsilon) times a uniform direction, n the space's
dimension), then the exact Euclidean nearest vocabulary word of y.

Guarantee: epsilon * d_2-LDP per word with d_2(w, w') = ||phi(w) - phi(w')||_2
(the density ratio of y under w and w' is at most exp(epsilon ||phi(w) -
phi(w')||) by the triangle inequality; the projection is post-processing). On
the vocabulary (``<unk>`` included) of Euclidean diameter D_V this is pure
(epsilon * D_V)-LDP per word, tight for the noisy vector (docs/SPEC.md §0.2).
D_V is the exact maximum pairwise distance (:func:`mechanisms.words.nearest.diameter`),
21.10 for GloVe 6B 50d. A document of l words costs epsilon * sum_i d_2(w_i, w'_i)
against a document of the same length (:meth:`document_guarantee`).
"""

from __future__ import annotations

import torch

from ..guarantee import Guarantee
from ..noise import gamma_radius_noise
from .perturb import PerturbProject


class CMP(PerturbProject):
    """CMP: epsilon * d_2 metric LDP per word in a public word space.

    Parameters
    ----------
    epsilon : float
        Metric privacy parameter per word, 0 < epsilon < inf.
    space : WordSpace or str
        ``"glove"`` (default), ``"minilm"`` or a :class:`~mechanisms.words.WordSpace`.
    vocab_size : int or None
        Keep only the first ``vocab_size`` words of the space.
    """

    name = "cmp"

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(
            notion="metric", epsilon=self.epsilon, metric="euclidean", diameter=self.space.diameter, granularity="word"
        )

    def noise(self, num: int, generator: torch.Generator | None, device: torch.device) -> torch.Tensor:
        return gamma_radius_noise(num, self.space.dim, 1.0 / self.epsilon, generator, device)


__all__ = ["CMP"]
