"""PrivEmb: public random projection plus Gamma-norm noise (Feyisetan &
Kasiviswanathan 2021; docs/SPEC.md §6).

Release ``w = Phi x + kappa`` with ``Phi in R^{k x d}``, entries i.i.d. N(0, 1/k)
(variance 1/k, not std 1/k: the TrLap code's bug, docs/SPEC.md §6), drawn *once*
from a public seed and shared by every user, and ``kappa`` with density
proportional to ``exp(-||kappa|| / scale)`` (radius Gamma(k, scale) times a
uniform direction).

If ``||Phi (x - x')|| <= L ||x - x'||`` on the input domain, the release is
``(epsilon * d_2)``-LDP in the *original* space for ``scale = L / epsilon``
(triangle inequality on the noise density). Two calibrations:

* ``variant="exact"`` (default, docs/SPEC.md §6 "recommended"): measure the
  drawn Phi's Lipschitz constant L on the domain in use and set
  ``scale = L / epsilon``. The guarantee is pure metric, delta = 0. On the unit
  sphere (the default domain: inputs are normalised) differences of inputs point
  in every direction, so L is exactly the largest singular value of Phi. On a
  finite public domain (for example a vocabulary) L is the largest pairwise
  ratio, usually much smaller.
* ``variant="paper"``: ``scale = (1 + beta) / epsilon`` and k from the paper's
  formula ``k = C (omega + sqrt(ln 1/delta))^2 / beta^2`` with C = 1 and
  omega = sqrt(ln d). The paper claims (epsilon, delta) metric LDP, delta being the
  chance that a random Phi stretches some difference by more than 1 + beta. Phi is
  public and already drawn, so we check it: when its realised L exceeds
  1 + beta the metric epsilon actually attained, ``epsilon * L / (1 + beta)``, is
  reported instead of epsilon (together with the paper's delta, conservatively).
  The paper's width argument does not hold for normalised differences
  (docs/SPEC.md §6 caveat), so this variant exists to reproduce the paper, not
  to be trusted.
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch

from .base import SentenceMechanism, check_embeddings, check_epsilon, normalize_rows_, sample_device
from .guarantee import Guarantee
from .noise import gamma_radius_noise, row_blocks

VARIANTS = ("exact", "paper")


def paper_out_dim(d: int, beta: float, delta: float, c_omega: float = 1.0) -> int:
    """The paper's projection dimension ``int(C (sqrt(ln d) + sqrt(ln 1/delta))^2 / beta^2)``.

    docs/SPEC.md §6: 149 (beta=0.5), 76 (0.7), 46 (0.9) at d = 300, delta = 1e-6, C = 1.
    """
    omega = math.sqrt(math.log(d))
    return int(c_omega * (omega + math.sqrt(math.log(1.0 / delta))) ** 2 / beta**2)


@lru_cache(maxsize=16)
def projection(d: int, k: int, seed: int) -> torch.Tensor:
    """The public matrix Phi [k, d]: i.i.d. N(0, 1/k) entries from ``torch.Generator(seed)``, float64.

    Cached (read-only: never modify the returned tensor).
    """
    gen = torch.Generator().manual_seed(int(seed))
    return torch.randn(k, d, generator=gen, dtype=torch.float64) / math.sqrt(k)


def lipschitz_constant(phi: torch.Tensor, domain: torch.Tensor | None = None, chunk: int = 1024) -> float:
    """sup ||Phi (x - x')|| / ||x - x'|| over distinct x, x' of the domain.

    ``domain=None`` is the unit sphere: the supremum is the spectral norm of Phi.
    A finite domain [N, d] is searched exhaustively over all pairs, in row
    chunks, using ||Phi a - Phi b||^2 and ||a - b||^2 from Gram matrices (float64).
    """
    if domain is None:
        return float(torch.linalg.matrix_norm(phi, ord=2))
    pts = domain.to(torch.float64)
    proj = pts @ phi.T
    sq_in, sq_out = (pts * pts).sum(1), (proj * proj).sum(1)
    best = 0.0
    for start in range(0, pts.shape[0], chunk):
        a, pa = pts[start : start + chunk], proj[start : start + chunk]
        din = (sq_in[start : start + chunk, None] + sq_in[None, :] - 2 * a @ pts.T).clamp_min(0)
        dout = (sq_out[start : start + chunk, None] + sq_out[None, :] - 2 * pa @ proj.T).clamp_min(0)
        distinct = din > 1e-12 * (1 + sq_in.max())
        if bool(distinct.any()):
            best = max(best, float(torch.sqrt(dout[distinct] / din[distinct]).max()))
    return best


@lru_cache(maxsize=16)
def _sphere_lipschitz(d: int, k: int, seed: int) -> float:
    return lipschitz_constant(projection(d, k, seed))


class PrivEmb(SentenceMechanism):
    """PrivEmb random projection: epsilon * d_2-LDP per row in the input space.

    Parameters
    ----------
    epsilon : float
        Metric privacy parameter, 0 < epsilon < inf.
    out_dim : int or None
        k, the projection dimension. ``None``: the input dimension (exact
        variant) or the paper's formula (paper variant).
    variant : {"exact", "paper"}
        Calibration, see the module docstring.
    beta, delta : float
        Paper variant only: distortion bound and the paper's failure probability.
    projection_seed : int
        Public seed of Phi; every user must use the same one.
    input_dim : int or None
        d; Phi is drawn now, or else at the first call. The paper variant's
        guarantee depends on the drawn Phi, so it is unknown until then.
    domain : Tensor [N, d] or None
        A finite public input domain (inputs must be its points, checked);
        ``None`` means the unit sphere (inputs are normalised).
    map_back : bool
        Also apply Phi^T to the release (post-processing), returning d columns.
    """

    name = "privemb"

    def __init__(
        self,
        epsilon: float,
        out_dim: int | None = None,
        variant: str = "exact",
        beta: float = 0.5,
        delta: float = 1e-6,
        projection_seed: int = 0,
        input_dim: int | None = None,
        domain: torch.Tensor | None = None,
        map_back: bool = False,
    ) -> None:
        self.epsilon = check_epsilon(epsilon)
        if variant not in VARIANTS:
            raise ValueError(f"privemb variant must be one of {VARIANTS}, got {variant!r}")
        self.variant = variant
        self.beta, self.delta = float(beta), float(delta)
        if not (self.beta > 0 and math.isfinite(self.beta)):
            raise ValueError(f"beta must be > 0 and finite, got {beta!r}")
        if not 0 < self.delta < 1:
            raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
        if out_dim is not None and (not isinstance(out_dim, int) or out_dim < 1):
            raise ValueError(f"out_dim must be a positive integer, got {out_dim!r}")
        self._out_dim = out_dim
        self.projection_seed = int(projection_seed)
        self.map_back = bool(map_back)
        self.domain = None if domain is None else check_embeddings(domain, "domain").to(torch.float64)
        if input_dim is None and self.domain is not None:
            input_dim = self.domain.shape[1]
        self._phi: torch.Tensor | None = None
        self._lipschitz = math.nan
        self.input_dim: int | None = None
        if input_dim is not None:
            self._draw(int(input_dim))

    # ------------------------------------------------------------------ projection
    def out_dim_for(self, d: int) -> int:
        """k for inputs of dimension d."""
        if self._out_dim is not None:
            return self._out_dim
        return paper_out_dim(d, self.beta, self.delta) if self.variant == "paper" else d

    def output_dim(self, d: int) -> int:
        return d if self.map_back else self.out_dim_for(d)

    def _draw(self, d: int) -> None:
        if d < 2:
            raise ValueError(f"input dimension must be >= 2, got {d}")
        if self.domain is not None and self.domain.shape[1] != d:
            raise ValueError(f"input dimension {d} does not match the domain's {self.domain.shape[1]}")
        k = self.out_dim_for(d)
        if self.variant == "paper" and k < paper_out_dim(d, self.beta, self.delta):
            raise ValueError(
                f"out_dim {k} is below the paper's k = {paper_out_dim(d, self.beta, self.delta)} for "
                f"beta={self.beta:g}, delta={self.delta:g}, d={d}: its delta would not follow"
            )
        self.input_dim = d
        self._phi = projection(d, k, self.projection_seed)
        self._lipschitz = (
            _sphere_lipschitz(d, k, self.projection_seed)
            if self.domain is None
            else lipschitz_constant(self._phi, self.domain)
        )

    @property
    def phi(self) -> torch.Tensor:
        """The public projection Phi [k, d] (drawn at the first call if input_dim was not given)."""
        if self._phi is None:
            raise RuntimeError("Phi is drawn at the first sanitize call or from input_dim")
        return self._phi

    @property
    def lipschitz(self) -> float:
        """Realised Lipschitz constant of Phi on the domain (NaN before Phi is drawn)."""
        return self._lipschitz

    @property
    def noise_scale(self) -> float:
        """Scale of the Gamma-norm noise: L / epsilon (exact) or (1 + beta) / epsilon (paper)."""
        if self.variant == "paper":
            return (1.0 + self.beta) / self.epsilon
        if self._phi is None:
            raise RuntimeError("the exact variant's noise scale needs Phi: pass input_dim or call sanitize")
        return self._lipschitz / self.epsilon

    def clean(self, x: torch.Tensor) -> torch.Tensor:
        """Phi x (and Phi^T Phi x with ``map_back``), differentiable; not a release."""
        if self._phi is None:
            self._draw(x.shape[1])
        phi = self.phi.to(device=x.device, dtype=x.dtype)
        w = x @ phi.T
        return w @ phi if self.map_back else w

    # ------------------------------------------------------------------ guarantee
    def _diameter(self) -> float:
        if self.domain is None:
            return 2.0
        return float(torch.cdist(self.domain, self.domain).max())

    @property
    def guarantee(self) -> Guarantee:
        if self.variant == "exact":
            return Guarantee(
                notion="metric",
                epsilon=self.epsilon,
                metric="euclidean",
                diameter=self._diameter(),
                granularity="sentence",
            )
        if self._phi is None:
            raise RuntimeError("the paper variant's guarantee depends on Phi: pass input_dim or call sanitize")
        attained = self.epsilon * max(1.0, self._lipschitz / (1.0 + self.beta))
        return Guarantee(
            notion="metric",
            epsilon=attained,
            delta=self.delta,
            metric="euclidean",
            diameter=self._diameter(),
            granularity="sentence",
        )

    # ------------------------------------------------------------------ sampling
    def _check_in_domain(self, x: torch.Tensor, chunk: int = 4096) -> None:
        assert self.domain is not None
        for start in range(0, x.shape[0], chunk):
            gap = torch.cdist(x[start : start + chunk], self.domain).min(dim=1).values
            if bool((gap > 1e-6).any()):
                raise ValueError(
                    "privemb was calibrated on a finite domain; an input is not one of its points "
                    f"(distance {float(gap.max()):.3g}): its guarantee would not hold"
                )

    @torch.no_grad()
    def sanitize(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        x = check_embeddings(x)
        d = x.shape[1]
        if self._phi is None:
            self._draw(d)
        elif d != self.input_dim:
            raise ValueError(f"input dimension {d} does not match the projection's {self.input_dim}")
        device = sample_device(x.device, generator)
        if self.domain is not None:
            self._check_in_domain(x.to(torch.float64).cpu())
        phi = self.phi.to(device)
        k = phi.shape[0]
        out = torch.empty((x.shape[0], self.output_dim(d)), dtype=x.dtype, device=device)
        for rows in row_blocks(x.shape[0], max(d, k), device, elements=2**18):  # CPU: small float64 temporaries
            x64 = x[rows].to(device=device, dtype=torch.float64, copy=True)
            if self.domain is None:
                normalize_rows_(x64)
            w = gamma_radius_noise(x64.shape[0], k, self.noise_scale, generator, device)
            w = w.addmm_(x64, phi.T)  # Phi x + kappa
            out[rows] = w @ phi if self.map_back else w
        return out.to(x.device)
