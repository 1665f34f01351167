"""Mahalanobis mechanism (Xu, Aggarwal, Feyisetan & Teissier 2020; docs/SPEC.md §5.2).

Sigma is the sample covariance of the public vocabulary vectors (never of a
private batch: bug (i) of the TrLap code), scaled to trace n
(docs/SPEC.md §5.2, [unverified] against the paper: inferred from two
reimplementations), and Sigma_lambda = lambda * Sigma + (1 - lambda) * I. Per
word w: y = phi(w) + l * Sigma_lambda^(1/2) u with l ~ Gamma(n, 1/epsilon),
u uniform on S^(n-1) (the square root, not Sigma_lambda itself: bug (ii)),
then the exact *Euclidean* nearest vocabulary word of y, as in the paper
(docs/SPEC.md §5.2).

The noise density is proportional to exp(-epsilon sqrt(z^T Sigma_lambda^-1 z)),
so the release is epsilon * d_Sigma_lambda metric LDP per word with
d_Sigma_lambda(a, b) = sqrt((a - b)^T Sigma_lambda^-1 (a - b)); on the
vocabulary it is pure (epsilon * D_Sigma)-LDP, D_Sigma the exact Mahalanobis
diameter of the vocabulary (the Euclidean diameter of the whitened vectors).
In Euclidean terms it is (epsilon / sqrt(lambda_min(Sigma_lambda))) * d_2-LDP
(:attr:`Mahalanobis.euclidean_epsilon`), at most epsilon / sqrt(1 - lambda).

docs/SPEC.md §5.2 gives no default lambda; Sanitas uses 0.5 (halfway between
CMP, lambda = 0, and the pure vocabulary covariance, lambda = 1).
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch

from ..guarantee import Guarantee
from ..noise import gamma_radius_noise
from .nearest import diameter
from .perturb import PerturbProject
from .vocab import WordSpace


@lru_cache(maxsize=8)
def vocabulary_covariance(space: WordSpace) -> torch.Tensor:
    """Sample covariance (float64) of the real words' vectors, scaled to trace n."""
    cov = torch.cov(space.vectors[: space.num_words].to(torch.float64).T)
    cov = cov.reshape(space.dim, space.dim)
    return cov * (space.dim / torch.trace(cov))


@lru_cache(maxsize=16)
def regularized_geometry(space: WordSpace, lam: float) -> tuple[torch.Tensor, torch.Tensor, float]:
    """(Sigma_lambda^(1/2), Sigma_lambda^(-1/2), lambda_min(Sigma_lambda)) in float64."""
    sigma = lam * vocabulary_covariance(space) + (1.0 - lam) * torch.eye(space.dim, dtype=torch.float64)
    evals, evecs = torch.linalg.eigh(sigma)
    lam_min = float(evals.min())
    if not lam_min > 1e-12 * float(evals.max()):
        raise ValueError(f"Sigma_lambda is singular at lam = {lam} (smallest eigenvalue {lam_min:.3g}); use lam < 1")
    root = (evecs * evals.sqrt()) @ evecs.T
    inv_root = (evecs / evals.sqrt()) @ evecs.T
    return root, inv_root, lam_min


@lru_cache(maxsize=16)
def mahalanobis_diameter(space: WordSpace, lam: float) -> float:
    """max over word pairs of d_Sigma_lambda (``<unk>`` included), exact."""
    _, inv_root, _ = regularized_geometry(space, lam)
    return diameter(space.vectors.to(torch.float64) @ inv_root)


class Mahalanobis(PerturbProject):
    """Mahalanobis mechanism: epsilon * d_Sigma_lambda metric LDP per word.

    Parameters
    ----------
    epsilon : float
        Metric privacy parameter per word, 0 < epsilon < inf.
    lam : float
        Regularization lambda in [0, 1] (default 0.5): Sigma_lambda =
        lam * Sigma + (1 - lam) * I; lam = 0 is CMP's noise.
    space : WordSpace or str
        ``"glove"`` (default), ``"minilm"`` or a :class:`~mechanisms.words.WordSpace`.
    vocab_size : int or None
        Keep only the first ``vocab_size`` words of the space.
    """

    name = "mahalanobis"

    def __init__(
        self, epsilon: float, lam: float = 0.5, space: WordSpace | str = "glove", vocab_size: int | None = None
    ) -> None:
        try:
            lam_f = float(lam)
        except (TypeError, ValueError):
            raise ValueError(f"lam must be a number in [0, 1], got {lam!r}") from None
        if not 0.0 <= lam_f <= 1.0:  # also rejects NaN
            raise ValueError(f"lam must lie in [0, 1], got {lam!r}")
        self.lam = lam_f
        self._roots: dict[str, torch.Tensor] = {}
        super().__init__(epsilon, space=space, vocab_size=vocab_size)

    @property
    def sigma_lambda(self) -> torch.Tensor:
        """Sigma_lambda (float64 [n, n])."""
        root, _, _ = regularized_geometry(self.space, self.lam)
        return root @ root

    @property
    def whitening(self) -> torch.Tensor:
        """Sigma_lambda^(-1/2) (float64, symmetric): whitened noise is CMP noise."""
        return regularized_geometry(self.space, self.lam)[1]

    @property
    def euclidean_epsilon(self) -> float:
        """epsilon / sqrt(lambda_min(Sigma_lambda)): the same release as a metric guarantee in d_2."""
        return self.epsilon / math.sqrt(regularized_geometry(self.space, self.lam)[2])

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(
            notion="metric",
            epsilon=self.epsilon,
            metric="mahalanobis",
            diameter=mahalanobis_diameter(self.space, self.lam),
            granularity="word",
        )

    def noise(self, num: int, generator: torch.Generator | None, device: torch.device) -> torch.Tensor:
        key = str(device)
        if key not in self._roots:
            self._roots[key] = regularized_geometry(self.space, self.lam)[0].to(device)
        # rows z^T Sigma^(1/2) = (Sigma^(1/2) z)^T, Sigma^(1/2) symmetric
        return gamma_radius_noise(num, self.space.dim, 1.0 / self.epsilon, generator, device) @ self._roots[key]


__all__ = ["Mahalanobis", "mahalanobis_diameter", "regularized_geometry", "vocabulary_covariance"]
