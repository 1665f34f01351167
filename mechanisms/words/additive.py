"""Word-level Laplace and Gaussian baselines of Huang et al. (EMNLP 2024; docs/SPEC.md §7.2, §7.3).

Per word w: x = phi(w) clipped to the L2 ball of radius C (docs/SPEC.md §7.1),
y = x + z, then the exact Euclidean nearest clipped vocabulary word of y. Two
words' clipped vectors differ by at most 2C in L2 and 2C sqrt(n) in L1 (the
diameters of the ball in R^n).

* ``word_laplace``: z_i i.i.d. Lap(2C sqrt(n)/epsilon): pure epsilon-LDP per word
  (Laplace mechanism, L1 sensitivity 2C sqrt(n); Huang et al. 2024, §4 Thm 1;
  docs/SPEC.md §7.2).
* ``word_gaussian``: z ~ N(0, sigma^2 I), sigma the analytic Gaussian
  calibration (Balle & Wang 2018) for L2 sensitivity 2C: (epsilon, delta)-LDP
  per word at any epsilon > 0 (docs/SPEC.md §7.3), not the TrLap code's
  sigma = 2C sqrt(n)/epsilon, which matches no calibration.

Both guarantees hold on the whole ball, hence for any vocabulary, and do not
depend on C.
"""

from __future__ import annotations

import math

import torch

from mechanisms import random_source

from ..clipped_additive import analytic_gaussian_sigma
from ..guarantee import Guarantee
from ..noise import laplace
from .perturb import ClippedPerturbProject
from .vocab import WordSpace


class WordLaplace(ClippedPerturbProject):
    """Clipped Laplace per word: pure epsilon-LDP per word.

    Parameters
    ----------
    epsilon : float
        Pure LDP parameter per word.
    clip : float or None
        Radius C of the L2 clip (inputs and candidates); ``None``: the median word norm.
    space : WordSpace or str
        ``"glove"`` (default), ``"minilm"`` or a :class:`~mechanisms.words.WordSpace`.
    vocab_size : int or None
        Keep only the first ``vocab_size`` words of the space.
    """

    name = "word_laplace"

    @property
    def scale(self) -> float:
        """Laplace scale b = 2C sqrt(n) / epsilon."""
        return 2.0 * self.clip_radius * math.sqrt(self.space.dim) / self.epsilon

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(notion="pure", epsilon=self.epsilon, granularity="word", accounting="laplace")

    def noise(self, num: int, generator: torch.Generator | None, device: torch.device) -> torch.Tensor:
        return laplace((num, self.space.dim), self.scale, generator, device)


class WordGaussian(ClippedPerturbProject):
    """Clipped analytic Gaussian per word: (epsilon, delta)-LDP per word.

    Parameters
    ----------
    epsilon : float
        Privacy parameter per word, any value > 0.
    delta : float
        Failure probability in (0, 1), default 1e-5.
    clip : float or None
        Radius C of the L2 clip; the L2 sensitivity is 2C. ``None``: the median word norm.
    space : WordSpace or str
        ``"glove"`` (default), ``"minilm"`` or a :class:`~mechanisms.words.WordSpace`.
    vocab_size : int or None
        Keep only the first ``vocab_size`` words of the space.
    """

    name = "word_gaussian"

    def __init__(
        self,
        epsilon: float,
        delta: float = 1e-5,
        clip: float | None = None,
        space: WordSpace | str = "glove",
        vocab_size: int | None = None,
    ) -> None:
        super().__init__(epsilon, clip=clip, space=space, vocab_size=vocab_size)
        try:
            d = float(delta)
        except (TypeError, ValueError):
            raise ValueError(f"delta must be a number in (0, 1), got {delta!r}") from None
        if not 0.0 < d < 1.0:
            raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
        self.delta = d

    @property
    def sigma(self) -> float:
        """Noise standard deviation (analytic Gaussian for L2 sensitivity 2C)."""
        return analytic_gaussian_sigma(self.epsilon, self.delta, 2.0 * self.clip_radius)

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(
            notion="approx", epsilon=self.epsilon, delta=self.delta, granularity="word", accounting="gaussian"
        )

    def noise(self, num: int, generator: torch.Generator | None, device: torch.device) -> torch.Tensor:
        return (
            random_source.randn((num, self.space.dim), generator=generator, dtype=torch.float64, device=device)
            * self.sigma
        )


__all__ = ["WordGaussian", "WordLaplace"]
