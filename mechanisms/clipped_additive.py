"""Clipped additive-noise baselines: ``"laplace"`` and ``"gaussian"``.

Inputs are clipped to the L2 ball of radius C (diameter 2C), so two inputs differ
by at most 2C in L2 and by at most 2C*sqrt(d) in L1.

* ``laplace``: i.i.d. Lap(b) per coordinate with b = 2C*sqrt(d)/epsilon, the L1
  diameter over epsilon (Dwork & Roth, Thm 3.6): pure epsilon-LDP per row.
* ``gaussian``: N(0, sigma^2 I) with sigma from the analytic Gaussian mechanism
  (Balle & Wang, ICML 2018, Thm 8) for L2 sensitivity 2C: (epsilon, delta)-LDP
  per row at any epsilon > 0. Not the TrLaplace code's sigma = 2C*sqrt(d)/epsilon
  (docs/SPEC.md §7.3). The calibration is exact (bisection on the privacy
  profile); tests check it against dp-accounting's PLD accountant.

Both clip and add the noise in float64 (53-bit uniforms, ``mechanisms.noise``)
and round the release to the input's dtype once, at the end.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

import torch
from scipy import optimize, special

from .base import SentenceMechanism, check_embeddings, check_epsilon, sample_device
from .guarantee import Guarantee
from .noise import clip_l2, row_blocks, standard_laplace_, standard_normal_


def _release(
    x: torch.Tensor,
    generator: torch.Generator | None,
    clip: float,
    scale: float,
    fill_noise: Callable[[torch.Tensor, torch.Generator | None], torch.Tensor],
) -> torch.Tensor:
    """``clip_l2(x, clip) + scale * noise`` in float64, rounded once to x's dtype.

    ``fill_noise(buffer, generator)`` fills a float64 buffer with standard noise. On the CPU
    the rows go in blocks, so that the float64 temporaries are reused.
    """
    device = sample_device(x.device, generator)
    out = torch.empty(x.shape, dtype=x.dtype, device=device)
    noise = None
    for rows in row_blocks(x.shape[0], x.shape[1], device):
        clipped = clip_l2(x[rows].to(device=device, dtype=torch.float64), clip)
        if noise is None:  # the first block is the largest
            noise = torch.empty(clipped.shape, dtype=torch.float64, device=device)
        buf = fill_noise(noise[: clipped.shape[0]], generator)
        out[rows] = torch.add(clipped, buf, alpha=scale, out=buf)  # never written into x
    return out.to(x.device)


def _check_clip(clip: float) -> float:
    c = float(clip)
    if not (c > 0 and math.isfinite(c)):
        raise ValueError(f"clip must be > 0 and finite, got {clip!r}")
    return c


def gaussian_delta(sigma: float, epsilon: float, sensitivity: float) -> float:
    """Exact delta(epsilon) of the Gaussian mechanism (Balle & Wang 2018, Thm 8), in log space."""
    a = sensitivity / (2 * sigma)
    b = epsilon * sigma / sensitivity
    first = special.ndtr(a - b)
    second = math.exp(epsilon + special.log_ndtr(-a - b))
    return float(first - second)


@lru_cache(maxsize=256)
def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """Smallest sigma with delta(epsilon) <= delta for the given L2 sensitivity."""
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")

    def gap(log_sigma: float) -> float:
        return gaussian_delta(math.exp(log_sigma), epsilon, sensitivity) - delta

    lo, hi = math.log(sensitivity) - 20.0, math.log(sensitivity) + 20.0
    root = optimize.brentq(gap, lo, hi, xtol=1e-13, rtol=1e-13, maxiter=500)
    sigma = math.exp(root)
    while gaussian_delta(sigma, epsilon, sensitivity) > delta:  # land on the safe side of the root
        sigma *= 1 + 1e-12
    return sigma


class ClippedLaplace(SentenceMechanism):
    """Clip to the L2 ball of radius ``clip``, add Lap(2C sqrt(d)/epsilon) per coordinate.

    Parameters
    ----------
    epsilon : float
        Pure LDP parameter per row.
    clip : float
        Radius C of the L2 ball (default 1.0: unit-normalised embeddings pass unchanged).
    """

    name = "laplace"

    def __init__(self, epsilon: float, clip: float = 1.0) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.clip = _check_clip(clip)

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(notion="pure", epsilon=self.epsilon, granularity="sentence", accounting="laplace")

    def scale(self, dim: int) -> float:
        return 2 * self.clip * math.sqrt(dim) / self.epsilon

    @torch.no_grad()
    def sanitize(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        x = check_embeddings(x)
        return _release(x, generator, self.clip, self.scale(x.shape[1]), standard_laplace_)


class ClippedGaussian(SentenceMechanism):
    """Clip to the L2 ball of radius ``clip``, add analytic-Gaussian noise: (epsilon, delta)-LDP.

    Parameters
    ----------
    epsilon : float
        Privacy parameter, any value > 0 (the analytic calibration has no epsilon < 1 limit).
    delta : float
        Failure probability in (0, 1), default 1e-5.
    clip : float
        Radius C of the L2 ball; the L2 sensitivity is 2C.
    """

    name = "gaussian"

    def __init__(self, epsilon: float, delta: float = 1e-5, clip: float = 1.0) -> None:
        self.epsilon = check_epsilon(epsilon)
        if not 0 < float(delta) < 1:
            raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
        self.delta = float(delta)
        self.clip = _check_clip(clip)
        self.sigma = analytic_gaussian_sigma(self.epsilon, self.delta, 2 * self.clip)

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(
            notion="approx", epsilon=self.epsilon, delta=self.delta, granularity="sentence", accounting="gaussian"
        )

    @torch.no_grad()
    def sanitize(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        x = check_embeddings(x)
        return _release(x, generator, self.clip, self.sigma, standard_normal_)


__all__ = ["ClippedGaussian", "ClippedLaplace", "analytic_gaussian_sigma", "gaussian_delta"]
