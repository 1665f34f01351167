"""High-dimensional truncated Laplace, "TrLaplace" (Huang et al., EMNLP 2024, §4-5;
docs/SPEC.md §7.4-7.7, [reconstructed] from the author's code and the proof outline).

Per word: the vector clipped to the L2 ball of radius C, i.i.d. truncated Laplace noise per
coordinate with the parameters of the dimension d' (dummy dimensions computed, not hard-coded:
d' = n when 4 epsilon^2 < n, else ceil(4 epsilon^2) + 100), drawn by exact inverse CDF (no
rejection), then the exact Euclidean nearest clipped vocabulary word. Epsilon is limited to 1e6.

**Guarantee: (epsilon, delta)-LDP per word, delta from :func:`trlaplace_delta`**, the exact
supremum over the clip ball (it does not depend on C, and it is large: 0.979 at epsilon = 1,
d = 300; 0.727 at epsilon = 1 on GloVe 50d). With dummy dimensions the same release is also
(epsilon sqrt(n/d'), delta)-LDP (:attr:`TrLaplace.loss_bound`); the guarantee states the
requested epsilon. The parameters, the sampler and the proof of the supremum: docs/SPEC.md §7.7.
"""

from __future__ import annotations

import math
import warnings

import torch

from mechanisms import random_source

from ..guarantee import Guarantee
from .perturb import ClippedPerturbProject
from .vocab import WordSpace

MAX_EPSILON = 1e6  # beyond, d' = 4 eps^2 + 100 is past float64's exact integers
WARN_DELTA = 0.01  # without max_delta, warn (once per instance) above this delta
DUMMY_MARGIN = 100  # d' = ceil(4 eps^2) + 100 reproduces the paper's 500 (eps 10) and 1700 (eps 20)


def trlaplace_param_dim(epsilon: float, dim: int) -> int:
    """d' for the parameters: ``dim`` when epsilon < sqrt(dim)/2, else ceil(4 epsilon^2) + 100."""
    if 4.0 * epsilon * epsilon < dim:
        return int(dim)
    return int(math.ceil(4.0 * epsilon * epsilon)) + DUMMY_MARGIN


def _tail(epsilon: float, d_params: int) -> float:
    """e^(-A/lambda) = 1 - 2 epsilon/sqrt(d'), computed without cancellation."""
    root = math.sqrt(d_params)
    return (d_params - 4.0 * epsilon * epsilon) / (root * (root + 2.0 * epsilon))


def trlaplace_params(epsilon: float, d_params: int, clip: float = 1.0) -> tuple[float, float, float]:
    """(lambda, A, B) of the per-coordinate truncated Laplace (docs/SPEC.md §7.4)."""
    if not 0.0 < epsilon <= MAX_EPSILON:
        raise ValueError(f"TrLaplace needs 0 < epsilon <= {MAX_EPSILON:g}, got {epsilon!r}")
    if not 4.0 * epsilon * epsilon < d_params:
        raise ValueError(
            f"TrLaplace needs epsilon < sqrt(d')/2 = {math.sqrt(d_params) / 2:.4g}, got epsilon = {epsilon!r} "
            f"with d' = {d_params}"
        )
    tail = _tail(epsilon, d_params)
    lam = 2.0 * clip * math.sqrt(d_params) / epsilon
    a = -lam * math.log(tail)
    b = 1.0 / (2.0 * lam * (1.0 - tail))  # = 1/(8C)
    return lam, a, b


def trlaplace_variance(epsilon: float, d_params: int, clip: float = 1.0) -> float:
    """Per-coordinate variance (docs/SPEC.md §7.4):

    [2 lam^2 - e^(-A/lam)(A^2 + 2 A lam + 2 lam^2)] / (1 - e^(-A/lam)).
    """
    lam, a, _ = trlaplace_params(epsilon, d_params, clip)
    tail = _tail(epsilon, d_params)  # e^(-A/lambda)
    return (2 * lam * lam - tail * (a * a + 2 * a * lam + 2 * lam * lam)) / (1.0 - tail)


def trlaplace_cdf(t: torch.Tensor | float, epsilon: float, d_params: int, clip: float = 1.0) -> torch.Tensor:
    """CDF of one noise coordinate (float64; 0 below -A, 1 above A)."""
    lam, a, b = trlaplace_params(epsilon, d_params, clip)
    t = torch.as_tensor(t, dtype=torch.float64).clamp(-a, a)
    bl = b * lam
    neg = bl * (torch.exp(t / lam) - _tail(epsilon, d_params))
    pos = 0.5 - bl * torch.expm1(-t / lam)
    return torch.where(t < 0, neg, pos).clamp(0.0, 1.0)


def sample_truncated_laplace(
    shape: tuple[int, ...], lam: float, a: float, generator: torch.Generator | None, device: torch.device
) -> torch.Tensor:
    """i.i.d. draws of density proportional to e^(-|t|/lam) on [-a, a], by exact inversion (float64).

    v ~ U(-1/2, 1/2): sign(v) is the sign, U = 2|v| the magnitude's uniform,
    |t| = -lam log1p(U expm1(-a/lam)) <= a.
    """
    v = random_source.rand(shape, generator=generator, dtype=torch.float64, device=device) - 0.5
    mag = -lam * torch.log1p(2.0 * v.abs() * math.expm1(-a / lam))
    return torch.sign(v) * mag.clamp(max=a)


def trlaplace_support_leak(v: torch.Tensor, epsilon: float, d_params: int, clip: float = 1.0) -> float:
    """P_x[y outside supp(x')] = 1 - prod_i (1 - F(|v_i| - A)) for the shift v = x' - x (docs/SPEC.md §7.5)."""
    _, a, _ = trlaplace_params(epsilon, d_params, clip)
    p = trlaplace_cdf(v.to(torch.float64).abs() - a, epsilon, d_params, clip)
    return float(-torch.expm1(torch.log1p(-p).sum()))


def trlaplace_delta(epsilon: float, d_params: int, d_real: int, clip: float = 1.0) -> float:
    """The delta TrLaplace attains at epsilon on the L2 ball of radius ``clip`` in R^d_real (docs/SPEC.md §7.5).

    1 - (1 - q(2C/sqrt(d_real)))^d_real, the exact supremum over pairs of the
    ball (see the module docstring; the concavity condition is checked here).
    Independent of ``clip``.
    """
    if d_real > d_params:
        raise ValueError(f"d_params ({d_params}) must be >= d_real ({d_real})")
    lam, a, b = trlaplace_params(epsilon, d_params, clip)
    tail = _tail(epsilon, d_params)

    def q(t: float) -> float:
        return b * lam * tail * math.expm1(t / lam)

    t_max = 2.0 * clip  # the largest |v_i| in the ball; the condition grows with t
    dq = b * tail * math.exp(t_max / lam)
    if not t_max / lam + t_max * dq / (1.0 - q(t_max)) < 1.0:  # pragma: no cover - never for valid parameters
        raise ArithmeticError("concavity condition of the worst-case argument fails")
    return float(-math.expm1(d_real * math.log1p(-q(2.0 * clip / math.sqrt(d_real)))))


class TrLaplace(ClippedPerturbProject):
    """TrLaplace: (epsilon, delta)-LDP per word with the delta it attains (docs/SPEC.md §7.5).

    Parameters
    ----------
    epsilon : float
        Privacy parameter per word, 0 < epsilon < inf (dummy dimensions above sqrt(n)/2).
    clip : float or None
        Radius C of the L2 clip of word vectors (inputs and candidates); ``None``:
        the median word norm of the space. The guarantee does not depend on C.
    d_params : int or None
        Parameter dimension d' (>= n and > 4 epsilon^2); default
        :func:`trlaplace_param_dim`.
    max_delta : float or None
        Refuse (``ValueError``) when the attained delta exceeds it (docs/SPEC.md §7.5:
        refuse when delta > 1/N_users); ``None``: warn once when delta > 0.01.
    space : WordSpace or str
        ``"glove"`` (default), ``"minilm"`` or a :class:`~mechanisms.words.WordSpace`.
    vocab_size : int or None
        Keep only the first ``vocab_size`` words of the space.
    """

    name = "trlaplace"

    def __init__(
        self,
        epsilon: float,
        clip: float | None = None,
        d_params: int | None = None,
        max_delta: float | None = None,
        space: WordSpace | str = "glove",
        vocab_size: int | None = None,
    ) -> None:
        super().__init__(epsilon, clip=clip, space=space, vocab_size=vocab_size)
        if self.epsilon > MAX_EPSILON:
            raise ValueError(f"trlaplace needs epsilon <= {MAX_EPSILON:g}, got {epsilon!r}")
        if d_params is not None and (isinstance(d_params, bool) or int(d_params) != d_params):
            raise ValueError(f"d_params must be an integer, got {d_params!r}")
        self._d_params = None if d_params is None else int(d_params)
        if max_delta is not None and not 0.0 <= float(max_delta) <= 1.0:
            raise ValueError(f"max_delta must lie in [0, 1], got {max_delta!r}")
        self.max_delta = None if max_delta is None else float(max_delta)
        self._warned = False
        if self._d_params is not None and 4 * self.epsilon**2 >= self._d_params:
            raise ValueError(f"d_params must exceed 4 epsilon^2 = {4 * self.epsilon**2:g}, got {self._d_params}")
        if self.max_delta is not None:
            self._check_delta()

    @property
    def d_params(self) -> int:
        """d' the noise parameters are computed for (> n means dummy dimensions)."""
        if self._d_params is not None:
            if self._d_params < self.space.dim:
                raise ValueError(f"d_params must be >= the space dimension {self.space.dim}, got {self._d_params}")
            return self._d_params
        return trlaplace_param_dim(self.epsilon, self.space.dim)

    @property
    def params(self) -> tuple[float, float, float]:
        """(lambda, A, B) for the clip radius and d'."""
        return trlaplace_params(self.epsilon, self.d_params, self.clip_radius)

    @property
    def delta(self) -> float:
        """The delta attained at epsilon (:func:`trlaplace_delta`)."""
        return trlaplace_delta(self.epsilon, self.d_params, self.space.dim, self.clip_radius)

    @property
    def loss_bound(self) -> float:
        """sup of the finite privacy loss, epsilon sqrt(n/d') (< epsilon with dummy dimensions)."""
        return self.epsilon * math.sqrt(self.space.dim / self.d_params)

    def _check_delta(self) -> float:
        delta = self.delta
        if self.max_delta is not None and delta > self.max_delta:
            raise ValueError(
                f"trlaplace at epsilon = {self.epsilon:g} attains delta = {delta:.4g} per word "
                f"(n = {self.space.dim}, d' = {self.d_params}), above max_delta = {self.max_delta:g}"
            )
        return delta

    @property
    def guarantee(self) -> Guarantee:
        delta = self._check_delta()
        if self.max_delta is None and delta > WARN_DELTA and not self._warned:
            self._warned = True
            warnings.warn(
                f"trlaplace at epsilon = {self.epsilon:g} attains delta = {delta:.3g} per word: "
                "the support of the noise leaks the word with that probability (docs/SPEC.md §7.5); "
                "pass max_delta (e.g. 1/number of users) to refuse such settings",
                UserWarning,
                stacklevel=2,
            )
        return Guarantee(notion="approx", epsilon=self.epsilon, delta=delta, granularity="word")

    def document_guarantee(self, num_words: int) -> Guarantee:
        """(l epsilon, 1 - (1 - delta)^l): the document leaves the product support with
        probability at most 1 - (1 - delta)^l, and the loss on it is at most l epsilon."""
        g = super().document_guarantee(num_words)
        delta = float(-math.expm1(num_words * math.log1p(-self.delta))) if self.delta < 1 else 1.0
        return Guarantee(notion="approx", epsilon=g.epsilon, delta=delta, granularity="document")

    def noise(self, num: int, generator: torch.Generator | None, device: torch.device) -> torch.Tensor:
        lam, a, _ = self.params
        return sample_truncated_laplace((num, self.space.dim), lam, a, generator, device)


__all__ = [
    "TrLaplace",
    "sample_truncated_laplace",
    "trlaplace_cdf",
    "trlaplace_delta",
    "trlaplace_param_dim",
    "trlaplace_params",
    "trlaplace_support_leak",
    "trlaplace_variance",
]
