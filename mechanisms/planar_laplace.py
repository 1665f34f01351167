"""Generalised planar Laplace on the unit sphere (Du et al. 2023 §3.2.2;
Andres et al. 2013; Wu et al. 2017).

Guarantee: noise Z with density proportional to exp(-epsilon ||z||_2) gives
epsilon * d_2-LDP on R^m (triangle inequality). Inputs are normalised to the
unit sphere (Euclidean diameter 2), so one release is pure 2*epsilon-LDP, tight
(y on the ray through x and x'). Re-normalising the output (the paper's
"normalised PL", default) is post-processing. The Sentence-LDP code returns
x + Z un-normalised: ``normalize_output=False`` reproduces that
(docs/SPEC.md §2.3).
"""

from __future__ import annotations

import torch

from .base import SentenceMechanism, add_unit_rows_, check_embeddings, check_epsilon, normalize_rows_, sample_device
from .guarantee import Guarantee
from .noise import gamma_radius_noise, row_blocks


class PlanarLaplace(SentenceMechanism):
    """Planar Laplace: epsilon * d_2-LDP on the unit sphere, pure 2*epsilon-LDP per row.

    Parameters
    ----------
    epsilon : float
        Metric privacy parameter, 0 < epsilon < inf.
    normalize_output : bool
        Re-normalise x + Z to the sphere (default, as the paper says).
    """

    name = "planar_laplace"

    def __init__(self, epsilon: float, normalize_output: bool = True) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.normalize_output = bool(normalize_output)

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(
            notion="metric", epsilon=self.epsilon, metric="euclidean", diameter=2.0, granularity="sentence"
        )

    @torch.no_grad()
    def sanitize(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        x = check_embeddings(x)
        n, m = x.shape
        device = sample_device(x.device, generator)
        out = torch.empty((n, m), dtype=x.dtype, device=device)
        # Float64 (at m = 768, eps = 0.01 the noise norm is ~7.7e4 and float32 would swallow x), in
        # blocks of rows on the CPU so that the float64 temporaries stay small; one rounding at the end.
        for rows in row_blocks(n, m, device, elements=2**18):
            y = gamma_radius_noise(rows.stop - rows.start, m, 1.0 / self.epsilon, generator, device)
            add_unit_rows_(y, x[rows])  # x / |x| + Z
            out[rows] = normalize_rows_(y) if self.normalize_output else y
        return out.to(x.device)
