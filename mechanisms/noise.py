"""Shared noise samplers and the L2 clip, all driven by an explicit generator.

``torch.distributions`` cannot take a ``torch.Generator``, so these are
written by hand on top of ``torch.rand``/``torch.randn``: every sample of a
mechanism is reproducible from its generator and independent across rows.
"""

from __future__ import annotations

import torch


def gamma_integer_shape(n: int, shape: int, generator: torch.Generator | None, device: torch.device) -> torch.Tensor:
    """n draws of Gamma(shape, 1) for an integer shape, exactly: -sum of ``shape`` log-uniforms."""
    u = torch.rand((n, shape), generator=generator, dtype=torch.float64, device=device)
    return -torch.log1p(-u).sum(dim=1)  # log1p(-u) is finite: u < 1


def uniform_directions(n: int, m: int, generator: torch.Generator | None, device: torch.device) -> torch.Tensor:
    """n unit vectors uniform on S^{m-1} (normalised Gaussians), float64."""
    r = torch.randn((n, m), generator=generator, dtype=torch.float64, device=device)
    norms = r.norm(dim=1, keepdim=True)
    while bool((norms == 0).any()):  # probability 0; keep the law exact anyway
        bad = (norms == 0).squeeze(1)
        r[bad] = torch.randn((int(bad.sum()), m), generator=generator, dtype=torch.float64, device=device)
        norms = r.norm(dim=1, keepdim=True)
    return r / norms


def gamma_radius_noise(
    n: int, m: int, scale: float, generator: torch.Generator | None, device: torch.device
) -> torch.Tensor:
    """Noise with density proportional to exp(-||z||_2 / scale) on R^m.

    Radius ~ Gamma(m, scale) (the r^{m-1} Jacobian makes it Gamma, not
    exponential), times a uniform direction (docs/SPEC.md §2.2).
    """
    radius = gamma_integer_shape(n, m, generator, device) * scale
    return radius.unsqueeze(1) * uniform_directions(n, m, generator, device)


def laplace(
    shape: tuple[int, ...], scale: float, generator: torch.Generator | None, device: torch.device
) -> torch.Tensor:
    """i.i.d. Laplace(0, scale) by inversion: -scale * sign(v) * log(1 - 2|v|), v ~ U(-1/2, 1/2)."""
    v = torch.rand(shape, generator=generator, dtype=torch.float64, device=device) - 0.5
    return -scale * torch.sign(v) * torch.log1p(-2 * v.abs())


def clip_l2(x: torch.Tensor, radius: float) -> torch.Tensor:
    """x * min(1, radius / ||x||) per row: the projection onto the L2 ball of ``radius``."""
    norms = x.norm(dim=1, keepdim=True)
    return x * torch.clamp(radius / norms.clamp_min(1e-300), max=1.0)
