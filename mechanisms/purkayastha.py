"""Purkayastha mechanism on the unit sphere (Weggenmann & Kerschbaum, CCS 2021;
used for sentence embeddings by Du et al., WWW 2023, §3.2.1).

Guarantee: epsilon * d_angular-LDP per sentence embedding, where
d_angular(mu, mu') = arccos(mu^T mu') on the sphere S^{m-1} (Du et al. Thm 1; the
proof is dimension-independent). The angular diameter of the sphere is pi, so one
release is pure (pi * epsilon)-LDP, and this is tight (mu' = -mu, Y = mu).

Output law: density C * exp(-epsilon * arccos(mu^T Y)) on S^{m-1}. Tangent-normal
decomposition Y = cos(theta) mu + sin(theta) xi, with xi uniform on the great
sphere orthogonal to mu and theta ~ PurArc(m, eps), density on [0, pi]

    sin^{m-2}(theta) * exp(-epsilon * theta) / F_{m-2, eps}(pi).

Sampler (spec §1.4): inverse CDF from a table built once per (m, epsilon) by a
log-space cumulative trapezoid on 2^14 points of a window around the mode that
holds all but e^-45 of the mass, then ``searchsorted`` + linear interpolation.
Written by hand because no maintained library samples PurArc; the reference
code's quadrature + bisection sampler is wrong for epsilon >~ 200 and crashes at
m >= 768, epsilon = 1000 (spec §1.6).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch

from .base import SentenceMechanism, check_embeddings, check_epsilon, normalize_rows, unit_rows_for_sampling
from .guarantee import Guarantee

GRID_POINTS = 2**14
_TAIL_LOG_MASS = 45.0  # the table window drops at most e^-45 of relative density


def purarc_log_density(theta: np.ndarray, m: int, epsilon: float) -> np.ndarray:
    """Unnormalised log-density (m-2) log sin(theta) - epsilon * theta (-inf at sin = 0)."""
    with np.errstate(divide="ignore"):
        return (m - 2) * np.log(np.sin(theta)) - epsilon * theta


@lru_cache(maxsize=256)
def purarc_table(m: int, epsilon: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Grid and CDF of PurArc(m, epsilon) for m >= 3, float64, cached per (m, eps).

    Returns ``(theta_grid, cdf, log_norm)`` with ``cdf[0] == 0``, ``cdf[-1] == 1``
    and ``log_norm = log F_{m-2,eps}(pi)`` (the log normaliser of PurArc); the
    grid is uniform on a window [lo, hi] of [0, pi] outside which the density is
    below e^-45 times its peak (the log-density is concave, so the mass outside
    is negligible at every (m, eps) in 3..1024 x 0.01..1000).
    """
    if m < 3:
        raise ValueError("purarc_table needs m >= 3 (m = 2 has a closed form)")
    n = m - 2
    mode = math.atan2(n, epsilon)
    spread = math.sin(mode) / math.sqrt(n)
    lo, hi = max(0.0, mode - 60 * spread), min(math.pi, mode + 60 * spread)
    peak = float(purarc_log_density(np.array([mode]), m, epsilon)[0])

    def above(t: float) -> bool:
        return float(purarc_log_density(np.array([t]), m, epsilon)[0]) > peak - _TAIL_LOG_MASS

    while lo > 0.0 and above(lo):
        lo = max(0.0, mode - 2 * (mode - lo))
    while hi < math.pi and above(hi):
        hi = min(math.pi, mode + 2 * (hi - mode))

    grid = np.linspace(lo, hi, GRID_POINTS + 1)
    log_f = purarc_log_density(grid, m, epsilon) - peak
    step = (hi - lo) / GRID_POINTS
    log_cells = np.logaddexp(log_f[:-1], log_f[1:]) + math.log(step / 2)
    log_cum = np.logaddexp.accumulate(log_cells)
    cdf = np.concatenate([[0.0], np.exp(log_cum - log_cum[-1])])
    cdf[-1] = 1.0
    return grid, cdf, float(log_cum[-1] + peak)


def sample_purarc(
    m: int,
    epsilon: float,
    n: int,
    generator: torch.Generator | None = None,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """Draw ``n`` i.i.d. angles theta ~ PurArc(m, epsilon) as float64 on ``device``."""
    device = torch.device(device)
    u = torch.rand(n, generator=generator, dtype=torch.float64, device=device)
    if m == 2:
        # Truncated exponential on [0, pi]: exact inverse CDF.
        return -torch.log1p(u * math.expm1(-epsilon * math.pi)) / epsilon
    grid_np, cdf_np, _ = purarc_table(m, float(epsilon))
    cdf = torch.as_tensor(cdf_np, device=device)
    idx = torch.searchsorted(cdf, u, right=True).clamp_(1, GRID_POINTS)
    c0, c1 = cdf[idx - 1], cdf[idx]
    width = c1 - c0
    frac = torch.where(width > 0, (u - c0) / width.clamp_min(1e-300), torch.full_like(u, 0.5))
    step = (grid_np[-1] - grid_np[0]) / GRID_POINTS
    return grid_np[0] + (idx - 1 + frac) * step


def tangent_directions(mu: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Uniform unit vectors xi with xi orthogonal to each row of ``mu`` (unit rows)."""
    r = torch.randn(mu.shape, generator=generator, dtype=mu.dtype, device=mu.device)
    r_perp = r - (r * mu).sum(dim=1, keepdim=True) * mu
    norms = r_perp.norm(dim=1)
    bad = norms < 1e-12 * r.norm(dim=1)
    while bool(bad.any()):  # probability ~0; resampling keeps the law exact
        rows = bad.nonzero().squeeze(1)
        rr = torch.randn((rows.numel(), mu.shape[1]), generator=generator, dtype=mu.dtype, device=mu.device)
        rr = rr - (rr * mu[rows]).sum(dim=1, keepdim=True) * mu[rows]
        r_perp[rows] = rr
        norms[rows] = rr.norm(dim=1)
        bad = norms < 1e-12
    return r_perp / norms.unsqueeze(1)


class Purkayastha(SentenceMechanism):
    """Purkayastha mechanism: epsilon * d_angular-LDP, pure pi*epsilon-LDP per row.

    Parameters
    ----------
    epsilon : float
        Metric privacy parameter, 0 < epsilon < inf.

    Notes
    -----
    Inputs are normalised to the unit sphere first (rows of norm < 1e-12 map to
    e1, a public vector). Sampling is in float64; the output has the input's
    dtype and device and no gradient path to the input.
    """

    name = "purkayastha"

    def __init__(self, epsilon: float) -> None:
        self.epsilon = check_epsilon(epsilon)

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(
            notion="metric",
            epsilon=self.epsilon,
            metric="angular",
            diameter=math.pi,
            granularity="sentence",
        )

    def log_prob(self, y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Exact log-density of releasing ``y`` (unit rows) given inputs ``x``, per row.

        log p = -eps * arccos(mu^T y) - log S_{m-2} - log F_{m-2,eps}(pi), w.r.t. the
        surface measure of S^{m-1} (spec §1.3). Used by tests and audits.
        """
        x = check_embeddings(x).to(torch.float64)
        y = check_embeddings(y, "y").to(torch.float64)
        if x.shape != y.shape:
            raise ValueError(f"x and y must have the same shape, got {tuple(x.shape)} and {tuple(y.shape)}")
        m = x.shape[1]
        mu, y = normalize_rows(x), normalize_rows(y)
        angle = torch.arccos((mu * y).sum(dim=1).clamp(-1.0, 1.0))
        log_area = math.log(2) + (m - 1) / 2 * math.log(math.pi) - math.lgamma((m - 1) / 2)
        if m == 2:
            log_norm = math.log(-math.expm1(-self.epsilon * math.pi) / self.epsilon)
        else:
            log_norm = purarc_table(m, self.epsilon)[2]
        return -self.epsilon * angle - log_area - log_norm

    @torch.no_grad()
    def sanitize(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        x, mu, device = unit_rows_for_sampling(x, generator)
        n, m = x.shape
        theta = sample_purarc(m, self.epsilon, n, generator, device).unsqueeze(1)
        xi = tangent_directions(mu, generator)
        y = torch.cos(theta) * mu + torch.sin(theta) * xi
        y = y / y.norm(dim=1, keepdim=True)
        return y.to(device=x.device, dtype=x.dtype)
