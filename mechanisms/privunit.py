"""PrivUnit2 on the unit sphere (Bhowmick, Duchi, Freudiger, Kapoor & Rogers 2018,
"Protection against reconstruction and its applications in private federated
learning", Algorithm 1; optimal among unbiased l2 mean estimators by Asi,
Feldman & Talwar 2022). Derivations: docs/SPEC.md §16.1-16.4.

Guarantee: pure epsilon-LDP per sentence embedding, tight. Rows are normalised
onto S^{d-1} (rows of norm < 1e-12 map to e1, a public vector). For the unit
input u and a threshold gamma >= 0, let cap(u) = {v : <v, u> >= gamma} and
q = P(<V, u> >= gamma) for V uniform on the sphere. With probability p the
release V is uniform on cap(u), otherwise uniform on its complement. Its
density w.r.t. the uniform law on the sphere is p / q on the cap and
(1 - p) / (1 - q) off it, so the privacy loss of any output between any two
inputs is at most

    log(p / (1 - p)) + log((1 - q) / q) = eps0 + eps1 = epsilon,

with p = e^eps0 / (1 + e^eps0) and q = 1 / (1 + e^eps1); it is attained for
u' = -u (the cap of u lies in the complement of the cap of -u when gamma >= 0).

T = <V, u> of a uniform V has density (1 - t^2)^((d-3)/2) / B(1/2, (d-1)/2) on
[-1, 1], i.e. (T + 1) / 2 ~ Beta((d-1)/2, (d-1)/2); gamma is its (1 - q)
quantile. The split (eps0, eps1) maximises m = E<V, u> = A (p/q - (1-p)/(1-q)),
A = E[T 1{T >= gamma}] = (1 - gamma^2)^((d-1)/2) / ((d - 1) B(1/2, (d-1)/2)), so
it depends on d: the mechanism takes d from ``input_dim`` or from its first
call and keeps it. ``unbiased=True`` releases V / m, an unbiased estimate of u
(post-processing).

Sampler: T by inversion of the Beta CDF in float64 (``scipy.special.betaincinv``,
vectorised; for cap rows T = 1 - 2 I^-1(U q), so a tiny q keeps its precision),
then V = T u + sqrt(1 - T^2) w with w uniform on the unit sphere orthogonal to u
(``purkayastha.tangent_directions``: a Gaussian with u projected out, normalised).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
from scipy import optimize, special

from mechanisms import random_source

from .base import SentenceMechanism, check_epsilon, unit_rows_for_sampling
from .guarantee import Guarantee
from .noise import row_blocks
from .purkayastha import tangent_directions

_SPLIT_GRID = 512  # grid points of the search over eps0 before the bounded Brent refinement


@dataclass(frozen=True)
class PrivUnitParameters:
    """The parameters of PrivUnit2 at one (d, eps0, eps1) (docs/SPEC.md §16.1-16.2).

    ``p``: probability of sampling from the cap; ``q``: its uniform measure;
    ``gamma``: its threshold on <V, u>; ``m``: E<V, u>; ``log_q``: log q.
    """

    dim: int
    eps0: float
    eps1: float
    p: float
    q: float
    log_q: float
    gamma: float
    m: float


def max_eps1(d: int) -> float:
    """The largest eps1 whose cap float64 resolves: q >= e^-700 (normal), and at d = 2, where
    (1 - gamma) / 2 = sin^2(pi q / 2), q >= e^-350 so that it stays a normal number (docs/SPEC.md §16.2)."""
    return 350.0 if d == 2 else 700.0


def _half_gap(d: int, q: np.ndarray) -> np.ndarray:
    """(1 - gamma) / 2 = I^-1(q; (d-1)/2, (d-1)/2), the lower q-quantile of Beta((d-1)/2, (d-1)/2)."""
    a = (d - 1) / 2
    return special.betaincinv(a, a, q)


def _mean_inner_product(d: int, eps0: np.ndarray, eps1: np.ndarray) -> tuple[np.ndarray, ...]:
    """(p, q, log q, gamma, m) of PrivUnit2 for arrays of splits (float64, vectorised; eps1 <= max_eps1(d)).

    m = p E[T | T >= gamma] - (1 - p) E[-T | T < gamma], both conditional means
    computed from log A (A = E[T 1{T >= gamma}]) minus log q or log(1 - q), so
    nothing overflows; 1 - gamma^2 = 4 s (1 - s), s = (1 - gamma) / 2, has no
    cancellation near gamma = 1.
    """
    a = (d - 1) / 2
    p = special.expit(eps0)
    log_q = -np.logaddexp(0.0, eps1)
    log_1mq = -np.logaddexp(0.0, -eps1)
    q = np.exp(log_q)
    s = _half_gap(d, q)
    gamma = 1.0 - 2.0 * s
    log_a = a * (math.log(4.0) + np.log(s) + np.log1p(-s)) - math.log(d - 1) - special.betaln(0.5, a)
    cap_mean = np.clip(np.exp(log_a - log_q), gamma, 1.0)  # E[T | T >= gamma], rounding kept in [gamma, 1]
    m = p * cap_mean - (1.0 - p) * np.exp(log_a - log_1mq)
    return p, q, log_q, gamma, m


def privunit_parameters(d: int, epsilon: float, eps0: float) -> PrivUnitParameters:
    """PrivUnit2's parameters for dimension d, total ``epsilon`` and cap-choice part ``eps0``."""
    eps1 = epsilon - eps0
    p, q, log_q, gamma, m = (float(v[0]) for v in _mean_inner_product(d, np.array([eps0]), np.array([eps1])))
    return PrivUnitParameters(dim=d, eps0=eps0, eps1=eps1, p=p, q=q, log_q=log_q, gamma=gamma, m=m)


@lru_cache(maxsize=256)
def optimal_split(d: int, epsilon: float) -> float:
    """The eps0 in (0, epsilon) that maximises m = E<V, u> (docs/SPEC.md §16.3).

    m is unimodal in eps0 (docs/SPEC.md §16.3): a grid of 512 interior points,
    then a bounded Brent search between the grid neighbours of the best point
    (absolute tolerance 1e-10 * epsilon). The search is limited to eps1 <=
    ``max_eps1(d)``, i.e. eps0 >= epsilon - max_eps1(d) (a constraint only above epsilon = 350).
    """
    floor = max(0.0, epsilon - max_eps1(d))
    grid = floor + (epsilon - floor) * (np.arange(_SPLIT_GRID) + 0.5) / _SPLIT_GRID
    m = _mean_inner_product(d, grid, epsilon - grid)[-1]
    i = int(np.argmax(m))
    lo = grid[i - 1] if i > 0 else floor
    hi = grid[i + 1] if i + 1 < _SPLIT_GRID else epsilon

    def negative_m(e0: float) -> float:
        return -float(_mean_inner_product(d, np.array([e0]), np.array([epsilon - e0]))[-1][0])

    res = optimize.minimize_scalar(negative_m, bounds=(lo, hi), method="bounded", options={"xatol": 1e-10 * epsilon})
    best = float(res.x) if -float(res.fun) >= float(m[i]) else float(grid[i])
    return min(max(best, floor, 1e-12 * epsilon), epsilon * (1 - 1e-12))


class PrivUnit(SentenceMechanism):
    """PrivUnit2: pure epsilon-LDP per row, tight (u' = -u).

    Parameters
    ----------
    epsilon : float
        Privacy parameter, 0 < epsilon < inf; the release is pure epsilon-LDP
        per sentence (notion "pure", delta 0, no metric, granularity "sentence").
    input_dim : int or None
        d >= 2. The split of epsilon depends on d: without ``input_dim`` it is
        taken from the first ``sanitize`` call and fixed (a later call with
        another d is a ``ValueError``).
    epsilon0 : float or None
        eps0 in (0, epsilon), the part spent on choosing the cap (p = e^eps0 /
        (1 + e^eps0)); the rest eps1 = epsilon - eps0 sets the cap (q = 1 /
        (1 + e^eps1)). ``None``: the split that maximises E<V, u>. eps1 must
        not exceed ``max_eps1(d)`` (700; 350 at d = 2), where the cap's measure
        leaves float64's normal range.
    unbiased : bool
        Release V / m (an unbiased estimate of the unit input, norm 1 / m)
        instead of the unit vector V. Post-processing: same guarantee.

    Notes
    -----
    Parameters of the d in use: :attr:`p`, :attr:`q`, :attr:`gamma`,
    :attr:`eps0`, :attr:`eps1`, :attr:`m` (a ``RuntimeError`` before d is
    known), all in :attr:`parameters`. T is drawn in float64; the release has
    the input's dtype and device (the generator's device when one is given)
    and no gradient path to the input.
    """

    name = "privunit"

    def __init__(
        self,
        epsilon: float,
        input_dim: int | None = None,
        epsilon0: float | None = None,
        unbiased: bool = False,
    ) -> None:
        self.epsilon = check_epsilon(epsilon)
        if epsilon0 is not None:
            e0 = check_epsilon(epsilon0, "epsilon0")
            if not e0 < self.epsilon:
                raise ValueError(
                    f"epsilon0 must lie in (0, epsilon) = (0, {self.epsilon:g}), got {epsilon0!r}: "
                    "the rest, epsilon - epsilon0, sets the cap and must be > 0"
                )
            epsilon0 = e0
        self._epsilon0 = epsilon0
        self.unbiased = bool(unbiased)
        self._params: PrivUnitParameters | None = None
        self.input_dim: int | None = None
        if input_dim is not None:
            self._fix_dim(input_dim)

    # ------------------------------------------------------------------ parameters
    def _fix_dim(self, d: int) -> None:
        if isinstance(d, bool) or not isinstance(d, int | np.integer) or d < 2:
            raise ValueError(f"input_dim must be an integer >= 2, got {d!r}")
        d = int(d)
        eps0 = self._epsilon0 if self._epsilon0 is not None else optimal_split(d, self.epsilon)
        if self.epsilon - eps0 > max_eps1(d) * (1 + 1e-12):
            raise ValueError(
                f"epsilon - epsilon0 = {self.epsilon - eps0:g} leaves a cap of measure "
                f"1 / (1 + e^{self.epsilon - eps0:g}) that float64 cannot resolve at d = {d}: use "
                f"epsilon0 >= epsilon - {max_eps1(d):g}"
            )
        self._params = privunit_parameters(d, self.epsilon, eps0)
        self.input_dim = d

    @property
    def parameters(self) -> PrivUnitParameters:
        """(d, eps0, eps1, p, q, log q, gamma, m) of the d in use."""
        if self._params is None:
            raise RuntimeError("PrivUnit's parameters depend on d: pass input_dim or call sanitize first")
        return self._params

    @property
    def eps0(self) -> float:
        """The part of epsilon spent on the cap choice: log(p / (1 - p))."""
        return self.parameters.eps0

    @property
    def eps1(self) -> float:
        """The part of epsilon that sets the cap: log((1 - q) / q)."""
        return self.parameters.eps1

    @property
    def p(self) -> float:
        """Probability of releasing from the cap, e^eps0 / (1 + e^eps0)."""
        return self.parameters.p

    @property
    def q(self) -> float:
        """Uniform measure of the cap, 1 / (1 + e^eps1)."""
        return self.parameters.q

    @property
    def gamma(self) -> float:
        """Threshold of the cap on <V, u>: the (1 - q) quantile of T, >= 0."""
        return self.parameters.gamma

    @property
    def m(self) -> float:
        """E<V, u>, the scale ``unbiased`` divides by."""
        return self.parameters.m

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(notion="pure", epsilon=self.epsilon, granularity="sentence")

    def _unbiased_at(self, d: int) -> bool:
        """Whether releases are unbiased; fixes the dimension to ``d`` on first use, refuses another one later."""
        if not self.unbiased:
            return False
        if self._params is None:
            self._fix_dim(int(d))
        elif d != self.input_dim:
            raise ValueError(f"PrivUnit was set up for dimension {self.input_dim}, asked about {d}")
        return True

    def unbiased_moments(self, d: int) -> float | None:
        """With ``unbiased``: E[V / m] = u and ||V / m||^2 = 1 / m^2 exactly (V is a unit vector), so the
        release's second moment is 1 / m^2 for the m of dimension ``d``; ``None`` without ``unbiased``
        (E[V] = m u)."""
        if not self._unbiased_at(d):
            return None
        return 1.0 / self.m**2

    def second_moment_law(self, d: int) -> tuple[float, float] | None:
        """With ``unbiased``: (a, b) with E[z z^T | u] = a u u^T + b I, exact (docs/SPEC.md §16.1's law).

        z = (T u + sqrt(1 - T^2) w) / m with w uniform on the unit sphere orthogonal to u and independent
        of T, so E[z z^T | u] = (E[T^2] u u^T + (1 - E[T^2]) (I - u u^T) / (d - 1)) / m^2. E[T^2] comes from
        the truncated moments of S = (1 + T) / 2 ~ Beta(h, h), h = (d - 1) / 2, in closed form: with
        c = (1 + gamma) / 2, E[S^k 1{S >= c}] = B(h + k, h) / B(h, h) * I_{1-c}(h, h + k) (the regularised
        incomplete beta function, no cancellation for a small cap). ``None`` without ``unbiased``."""
        if not self._unbiased_at(d):
            return None
        par = self.parameters
        h = (d - 1) / 2
        tail = (1.0 - par.gamma) / 2  # 1 - c
        s1 = 0.5 * float(special.betainc(h, h + 1, tail))  # E[S 1{cap}]: B(h+1, h) / B(h, h) = 1/2
        s2 = h * (h + 1) / (2 * h * (2 * h + 1)) * float(special.betainc(h, h + 2, tail))
        t2_cap = 4 * s2 - 4 * s1 + par.q  # E[T^2 1{cap}], T = 2S - 1
        t2 = par.p * t2_cap / par.q + (1 - par.p) * (1.0 / d - t2_cap) / (1 - par.q)  # E[T^2] = 1/d uniformly
        m2 = self.m**2
        return (t2 - (1 - t2) / (d - 1)) / m2, (1 - t2) / ((d - 1) * m2)

    # ------------------------------------------------------------------ sampling
    def sample_inner_products(
        self, n: int, generator: torch.Generator | None = None, device: torch.device | str = "cpu"
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(T, sqrt(1 - T^2))`` of n releases, float64 on ``device``: T = <V, u> (docs/SPEC.md §16.4).

        With probability p the row is a cap row, T = 1 - 2 I^-1(U q), else
        T = 2 I^-1(U (1 - q)) - 1, I^-1 the inverse regularised incomplete beta
        function with both parameters (d - 1) / 2 and U uniform on [0, 1);
        sqrt(1 - T^2) = 2 sqrt(s (1 - s)) with s = I^-1(.), exact near T = +-1.
        """
        par = self.parameters
        device = torch.device(device)
        cap = random_source.rand(n, generator=generator, dtype=torch.float64, device=device) < par.p
        u = random_source.rand(n, generator=generator, dtype=torch.float64, device=device)
        level = torch.where(cap, u * par.q, u * (1.0 - par.q)).cpu().numpy()
        s = torch.from_numpy(_half_gap(par.dim, level)).to(device)
        t = torch.where(cap, 1.0 - 2.0 * s, 2.0 * s - 1.0)
        return t, 2.0 * torch.sqrt(s * (1.0 - s))

    @torch.no_grad()
    def sanitize(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """One independent release per row of ``x`` ([n, d]): unit rows V (or V / m when ``unbiased``)."""
        x, mu, device = unit_rows_for_sampling(x, generator)
        n, d = x.shape
        if self._params is None:
            self._fix_dim(d)
        elif d != self.input_dim:
            raise ValueError(
                f"input dimension {d} does not match the {self.input_dim} PrivUnit was set up for "
                "(its split of epsilon depends on the dimension)"
            )
        t, sin = self.sample_inner_products(n, generator, device)
        scale = 1.0 / self.m if self.unbiased else 1.0
        out = torch.empty((n, d), dtype=x.dtype, device=device)
        for rows in row_blocks(n, d, device, elements=2**20):
            w = tangent_directions(mu[rows], generator)  # uniform on the great sphere orthogonal to u
            v = w.mul_((sin[rows] * scale).unsqueeze(1)).addcmul_(mu[rows], (t[rows] * scale).unsqueeze(1))
            out[rows] = v
        return out.to(x.device)
