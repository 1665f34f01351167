"""Privacy amplification by shuffling for pure epsilon0-LDP reports (Feldman, McMillan & Talwar).

Reference: V. Feldman, A. McMillan and K. Talwar, "Hiding among the clones: a simple and nearly
optimal analysis of privacy amplification by shuffling", FOCS 2021 (arXiv:2012.12803), and the
authors' script ``computeamplification.py`` in ``apple/ml-shuffling-amplification``. The tighter
figure Sanitas reports (``fl.accounting.shuffle_amplification``) is the smaller of this bound and
the variation-ratio bound (``fl.accounting.analysis.variation_ratio``), which reuses the evaluator
here with another clone probability.

Guarantee: every epsilon returned (numerical or closed form) is an upper bound such that the
shuffled output is (epsilon, delta)-DP with respect to changing one user's input, for any pure
epsilon0-LDP local randomizer, assuming a trusted shuffler and n reports from distinct users, for
ONE shuffle (one round). Composition over rounds is the caller's job: ``fl.accounting.analysis.shuffle_pld``
(what a run reports) or ``compose_shuffled`` here (basic or advanced, the looser reference).
Nothing here holds for an untrusted shuffler, several reports per user, or an approximate
(epsilon0, delta0)-LDP randomizer.

The clones reduction, why the blocked sum stays an upper bound, the root finding and the closed
form (their Theorem 3.1): docs/SPEC.md §15.2.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass
from typing import Protocol

import numpy as np
from scipy import optimize, stats

__all__ = [
    "ShuffleBound",
    "closed_form_amplification",
    "compose_shuffled",
    "local_epsilon",
    "numerical_amplification",
    "shuffle_bound",
    "shuffle_delta",
]

# Tail of C below its Bernstein range, as a fraction of the target delta: that
# mass is charged d_0 <= 1, so it costs at most this relative share of delta.
_TAIL_FRACTION = 1e-4
# Relative width of the blocks of c for large c (docs/SPEC.md §15.2).
_REL_BLOCK = 1e-4
# Floating-point safety: delta(eps) is inflated by this multiple of the
# magnitudes that were subtracted (boost's binomial cdf/pmf are accurate to a
# few ulp; this leaves a factor of ~1e3 of headroom).
_REL_FLOAT_SLACK = 1e-12
_ABS_FLOAT_SLACK = 1e-300


# --------------------------------------------------------------------------- #
# Validation
# --------------------------------------------------------------------------- #
def _check_epsilon0(epsilon0: float) -> float:
    if isinstance(epsilon0, bool) or not isinstance(epsilon0, numbers.Real):
        raise ValueError(f"epsilon0 must be a real number, got {epsilon0!r}")
    value = float(epsilon0)
    if not math.isfinite(value) or value <= 0.0:
        raise ValueError(f"epsilon0 must be finite and > 0, got {epsilon0!r}")
    return value


def _check_n(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise ValueError(f"n must be an integer number of users, got {n!r}")
    if int(n) < 1:
        raise ValueError(f"n must be >= 1, got {n!r}")
    return int(n)


def _check_delta(delta: float, name: str = "delta") -> float:
    if isinstance(delta, bool) or not isinstance(delta, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {delta!r}")
    value = float(delta)
    if not (0.0 < value < 1.0):
        raise ValueError(f"{name} must satisfy 0 < {name} < 1, got {delta!r}")
    return value


# --------------------------------------------------------------------------- #
# Small numerics
# --------------------------------------------------------------------------- #
def _log_expm1(x: float) -> float:
    """log(e^x - 1) for x > 0, without overflow for large x."""
    return x + math.log(-math.expm1(-x))


def local_epsilon(epsilon0: float, delta: float) -> float:
    """Smallest eps such that EVERY pure epsilon0-DP mechanism is (eps, delta)-DP.

    Randomized response dominates all epsilon0-DP mechanisms; its hockey-stick
    divergence at eps < epsilon0 is (e^eps0 - e^eps)/(e^eps0 + 1), so
    eps = epsilon0 + log(1 - delta (1 + e^-eps0)) (0 if that is negative).
    This is the baseline "no shuffling at all" guarantee at the same delta.
    """
    epsilon0 = _check_epsilon0(epsilon0)
    delta = _check_delta(delta)
    shrink = delta * (1.0 + math.exp(-epsilon0))
    if shrink >= 1.0:
        return 0.0
    return max(0.0, epsilon0 + math.log1p(-shrink))


class _ShuffleProfile:
    """delta(eps) = D_{e^eps}(P || Q) of the clones pair, evaluated on blocks of c.

    Set-up (the block grid and the exact binomial block masses of C) is done
    once; ``delta(eps)`` is then cheap and can be called by a root finder.
    """

    def __init__(
        self,
        epsilon0: float,
        n: int,
        tail_mass: float,
        *,
        exact: bool = False,
        rel_block: float = _REL_BLOCK,
        log_clone: float | None = None,
    ) -> None:
        self.epsilon0 = epsilon0
        self.n = n
        m = n - 1  # number of other users
        # Clone probability: e^{-epsilon0} for Feldman-McMillan-Talwar; the
        # variation-ratio bound (fl.accounting.analysis.variation_ratio) passes its own
        # (2/(e^eps0 + 1) for a general eps0-LDP randomizer). Nothing below
        # depends on its value: the conditional pair given c is the same.
        log_p = -epsilon0 if log_clone is None else min(0.0, float(log_clone))
        # Underflow to 0 only puts mass on c = 0: conservative. Below e^-700 (near the smallest normal
        # double) scipy's binomial pmf overflows inside Boost, so such a p is taken as 0 outright.
        p = math.exp(log_p) if log_p > -700.0 else 0.0
        # log(1 - alpha) = -log(1 + e^eps0); log(alpha) = -log(1 + e^-eps0)
        self._log_alpha = -math.log1p(math.exp(-epsilon0))
        self._log_eps0_expm1 = _log_expm1(epsilon0)

        if m == 0:
            lo, hi = 0, 0
        elif exact:
            lo, hi = 0, m
        else:
            mean = m * p
            var = m * p * (-math.expm1(log_p))
            # Bernstein: Pr[|C - mean| >= t] <= 2 exp(-t^2 / (2 (var + t/3))).
            big_l = math.log(2.0 / tail_mass)
            t = big_l / 3.0 + math.sqrt((big_l / 3.0) ** 2 + 2.0 * var * big_l)
            lo = max(0, int(math.floor(mean - t)))
            hi = min(m, int(math.ceil(mean + t)))
        starts = self._grid(lo, hi, 0.0 if exact else rel_block)

        # Exact masses of the blocks [starts[j], starts[j+1]) on [lo, hi], the
        # last block extended to m (upper tail), plus a lower-tail block [0, lo).
        binom_c = stats.binom(m, p)
        if m == 0:
            pmf = np.ones(1)
        else:
            pmf = binom_c.pmf(np.arange(lo, hi + 1))
        masses = np.add.reduceat(pmf, starts - lo)
        if hi < m:
            masses[-1] += float(binom_c.sf(hi))
        if lo > 0:
            lower = float(binom_c.cdf(lo - 1))
            starts = np.concatenate(([0], starts))
            masses = np.concatenate(([lower], masses))
        keep = masses > 0.0
        self.starts = starts[keep].astype(np.float64)
        self.masses = masses[keep]

    @staticmethod
    def _grid(lo: int, hi: int, rel_block: float) -> np.ndarray:
        if rel_block <= 0.0:
            return np.arange(lo, hi + 1, dtype=np.int64)
        switch = min(hi + 1, max(lo, int(math.ceil(1.0 / rel_block))))
        pts = list(range(lo, switch))
        c = max(lo, switch)
        while c <= hi:
            pts.append(c)
            c = max(c + 1, int(c * (1.0 + rel_block)))
        return np.asarray(pts, dtype=np.int64)

    def per_c(self, eps: float, cs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """d_c(eps) at the given c's, and the magnitude subtracted (for the slack)."""
        cs = np.asarray(cs, dtype=np.float64)
        if eps >= self.epsilon0:
            return np.zeros_like(cs), np.zeros_like(cs)
        e0 = self.epsilon0
        # coefA = alpha - e^eps (1 - alpha) = (1 - e^{eps - eps0}) * alpha
        log_coef_a = math.log(-math.expm1(eps - e0)) + self._log_alpha
        log_coef_b = _log_expm1(eps) if eps > 0 else -math.inf  # log(e^eps - 1)
        # threshold fraction beta = (e^{eps+eps0} - 1) / ((e^eps + 1)(e^eps0 - 1)) in (0, 1)
        log_beta = _log_expm1(eps + e0) - np.logaddexp(eps, 0.0) - self._log_eps0_expm1
        t = (cs + 1.0) * math.exp(log_beta)
        k0 = np.floor(t) + 1.0
        best = np.zeros_like(cs)
        mag = np.zeros_like(cs)
        # The maximiser is k0; its neighbours are tried too so that a rounding
        # error in t can never make us miss the true maximum.
        for k in (k0 - 1.0, k0, k0 + 1.0):
            k = np.clip(k, 0.0, cs + 2.0)
            b = stats.binom.pmf(k - 1.0, cs, 0.5)  # b_c(k-1)
            s = stats.binom.sf(k - 1.0, cs, 0.5)  # Pr[A >= k]
            with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
                term_a = np.exp(np.log(b) + log_coef_a)
                term_b = np.exp(np.log(s) + log_coef_b)
                g = term_a - term_b
            g = np.where(np.isfinite(g), g, 0.0)  # term_b overflow: g is very negative
            take = g > best
            best = np.where(take, g, best)
            mag = np.maximum(mag, term_a)
        return best, mag

    def delta(self, eps: float, *, with_slack: bool = True) -> float:
        """Upper bound on D_{e^eps}(P || Q) (exact divergence when exact=True, slack off)."""
        d, mag = self.per_c(eps, self.starts)
        value = float(np.dot(self.masses, d))
        if with_slack:
            value += _REL_FLOAT_SLACK * float(np.dot(self.masses, mag)) + _ABS_FLOAT_SLACK
        return min(1.0, value)


def shuffle_delta(epsilon: float, epsilon0: float, n: int, *, exact: bool = False, tail_mass: float = 1e-14) -> float:
    """Upper bound on delta(epsilon) = D_{e^epsilon}(P || Q) for the clones pair.

    With ``exact=True`` all n values of C are summed one by one (cost O(n));
    otherwise c's are grouped into blocks and the lower tail of C below a
    Bernstein range (mass ~ ``tail_mass``) is charged the c = 0 value; both only
    increase the result. Includes a tiny floating-point slack.
    """
    epsilon0 = _check_epsilon0(epsilon0)
    n = _check_n(n)
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise ValueError(f"epsilon must be finite and >= 0, got {epsilon!r}")
    return _ShuffleProfile(epsilon0, n, tail_mass, exact=exact).delta(float(epsilon))


class _Profile(Protocol):
    """What the root finder needs of a pair's profile: delta(eps), with delta(epsilon0) = 0."""

    epsilon0: float

    def delta(self, eps: float, *, with_slack: bool = True) -> float: ...


def _smallest_epsilon(profile: _Profile, delta: float) -> float:
    """Smallest eps (up to a tiny step, always on the safe side) with delta(eps) <= delta."""
    e0 = profile.epsilon0
    if profile.delta(0.0) <= delta:
        return 0.0
    # delta(e0) = 0 exactly (coefA = 0), so [0, e0] brackets the crossing.
    xtol = 1e-12 * max(1.0, e0)

    def f(eps: float) -> float:
        return profile.delta(eps) - delta

    root = optimize.brentq(f, 0.0, e0, xtol=xtol, rtol=4 * np.finfo(float).eps, maxiter=200)
    # Step to the safe side and verify; widen the step until verified.
    step = xtol
    eps = min(e0, root + step)
    while eps < e0 and profile.delta(eps) > delta:
        step *= 4.0
        eps = min(e0, root + step)
    return eps


def numerical_amplification(epsilon0: float, n: int, delta: float) -> float:
    """Numerical clones bound: smallest eps (safe side) with D_{e^eps}(P||Q) <= delta.

    Valid for every epsilon0 > 0 and n >= 1; never above epsilon0. Guarantee:
    (eps, delta)-DP of the shuffled output with respect to changing one user's
    input, for any pure epsilon0-LDP local randomizer, assuming a trusted
    shuffler and that the n reports are from distinct users; one round only.
    Note that for n = 1 this is just the (eps, delta) relaxation of the local
    randomizer itself (``local_epsilon``), not an amplification.
    """
    epsilon0 = _check_epsilon0(epsilon0)
    n = _check_n(n)
    delta = _check_delta(delta)
    profile = _ShuffleProfile(epsilon0, n, _TAIL_FRACTION * delta)
    return min(epsilon0, _smallest_epsilon(profile, delta))


def closed_form_valid(epsilon0: float, n: int, delta: float) -> bool:
    """Whether the closed form applies: epsilon0 <= log(n / (16 log(4/delta))).

    The paper states the condition with log(2/delta); the authors' script checks
    log(4/delta), which is stricter. We require the stricter one.
    """
    epsilon0 = _check_epsilon0(epsilon0)
    n = _check_n(n)
    delta = _check_delta(delta)
    return epsilon0 <= math.log(n / (16.0 * math.log(4.0 / delta)))


def closed_form_amplification(epsilon0: float, n: int, delta: float) -> float | None:
    """Closed-form bound (Feldman-McMillan-Talwar Thm 3.1), or None outside its regime.

    eps = log(1 + (e^eps0 - 1)/(e^eps0 + 1) * (8 sqrt(e^eps0 log(4/delta)) / sqrt(n)
    + 8 e^eps0 / n)), valid when epsilon0 <= log(n / (16 log(4/delta))) (see
    ``closed_form_valid``). Same guarantee as ``numerical_amplification``; it is
    looser, and only meant as a cheap cross-check / fallback.
    """
    if not closed_form_valid(epsilon0, n, delta):
        return None
    e = math.exp(epsilon0)
    inner = 8.0 * math.sqrt(e * math.log(4.0 / delta)) / math.sqrt(n) + 8.0 * e / n
    return math.log1p((e - 1.0) / (e + 1.0) * inner)


@dataclass(frozen=True)
class ShuffleBound:
    """Central (epsilon, delta) of one shuffled round of n pure epsilon0-LDP reports.

    ``epsilon`` guarantees (epsilon, delta)-DP of the shuffled output with
    respect to changing one user's input, for any pure epsilon0-LDP local
    randomizer, assuming a trusted shuffler and that the n reports are from
    distinct users. One round only: composing rounds is the caller's job.

    method: "numerical" (clones-pair divergence), "closed_form" (Thm 3.1), or
    "none" (epsilon == epsilon0: no amplification claimed).
    amplified: epsilon < epsilon0.
    epsilon_local: what the local randomizer alone gives at the same delta
    (``local_epsilon``); the part of epsilon0 - epsilon below epsilon0 -
    epsilon_local is NOT due to shuffling.
    """

    epsilon: float
    delta: float
    method: str
    amplified: bool
    note: str
    epsilon0: float
    n: int
    epsilon_numerical: float | None
    epsilon_closed_form: float | None
    epsilon_local: float

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def shuffle_bound(epsilon0: float, n: int, delta: float, method: str = "best") -> ShuffleBound:
    """Upper bound on the central epsilon of shuffling n pure epsilon0-LDP reports.

    Returns a :class:`ShuffleBound`: (epsilon, delta)-DP of the shuffled output
    with respect to changing one user's input, for any pure epsilon0-LDP local
    randomizer, assuming a trusted shuffler and that the n reports are from
    distinct users. One round; composition over rounds is the caller's job.

    method: "best" (min of the numerical bound and, where valid, the closed
    form), "numerical", or "closed_form" (falls back to epsilon0 outside its
    regime). The result is never above epsilon0 and always finite.
    """
    epsilon0 = _check_epsilon0(epsilon0)
    n = _check_n(n)
    delta = _check_delta(delta)
    if method not in ("best", "numerical", "closed_form"):
        raise ValueError(f"method must be 'best', 'numerical' or 'closed_form', got {method!r}")
    eps_local = local_epsilon(epsilon0, delta)

    def none(note: str, num: float | None = None, cf: float | None = None) -> ShuffleBound:
        return ShuffleBound(epsilon0, delta, "none", False, note, epsilon0, n, num, cf, eps_local)

    if n == 1:
        return none("n = 1: a single report gains nothing from shuffling; epsilon0 returned")

    notes: list[str] = []
    cf = closed_form_amplification(epsilon0, n, delta)
    if cf is None:
        notes.append(
            f"closed form not valid (needs epsilon0 <= log(n/(16 log(4/delta))) = "
            f"{math.log(n / (16.0 * math.log(4.0 / delta))):.4g})"
        )
    num: float | None = None
    if method in ("best", "numerical"):
        try:
            num = numerical_amplification(epsilon0, n, delta)
        except (ArithmeticError, ValueError, RuntimeError) as exc:  # pragma: no cover - defensive
            if method == "numerical":
                raise
            notes.append(f"numerical bound failed ({exc!r}); closed form used if valid")

    candidates: list[tuple[float, str]] = []
    if num is not None:
        candidates.append((num, "numerical"))
    if cf is not None and method in ("best", "closed_form"):
        candidates.append((cf, "closed_form"))
    if not candidates:
        return none("; ".join(notes + ["no amplification provable; epsilon0 returned"]), num, cf)
    eps, how = min(candidates, key=lambda item: item[0])  # ties keep "numerical"
    if not (math.isfinite(eps) and eps < epsilon0):
        return none("; ".join(notes + ["bound not below epsilon0; epsilon0 returned"]), num, cf)
    eps = max(0.0, eps)
    if eps_local - eps < epsilon0 - eps_local:
        notes.append(
            f"most of the gap epsilon0 - epsilon = {epsilon0 - eps:.3g} is the delta-relaxation of "
            f"the local randomizer alone (epsilon_local = {eps_local:.10g}); shuffling gains only "
            f"{max(0.0, eps_local - eps):.3g}"
        )
    return ShuffleBound(eps, delta, how, True, "; ".join(notes), epsilon0, n, num, cf, eps_local)


def compose_shuffled(epsilons: list[float], delta_each: float, delta_slack: float) -> tuple[float, float]:
    """Compose k rounds, round i being (epsilons[i], delta_each)-DP; returns (eps, delta).

    The better (smaller epsilon) of
    * basic composition: (sum eps_i, k delta_each);
    * advanced composition, heterogeneous form of Dwork, Rothblum & Vadhan
      (2010) (Dwork & Roth, Thm 3.20; the Azuma step allows per-round eps_i):
      eps = sqrt(2 ln(1/delta_slack) sum eps_i^2) + sum eps_i (e^{eps_i} - 1),
      delta = k delta_each + delta_slack. For k identical rounds this is the
      textbook eps sqrt(2k ln(1/delta')) + k eps (e^eps - 1).
    Both hold under adaptive composition. ``delta_slack = 0`` means basic only.
    (Kairouz, Oh & Viswanath 2015 give slightly tighter heterogeneous bounds;
    they are not used here.) This composes the per-round (eps, delta) numbers
    only; ``shuffle_pld.compose_shuffled_pld`` (what runs report) composes the
    rounds' dominating pairs instead and is tighter.

    Guarantee: the advanced figure is returned only when finite and strictly
    below the basic sum (the rule of ``composition.py``: advanced composition
    helps only for many rounds of small epsilon, below ln 2 each), so the
    result is never above basic composition and always finite. A round above
    epsilon 700 (where e^eps overflows a float) gives basic composition.
    """
    eps_list = [float(e) for e in epsilons]
    for e in eps_list:
        if not (math.isfinite(e) and e >= 0.0):
            raise ValueError(f"every epsilon must be finite and >= 0, got {e!r}")
    if not (0.0 <= float(delta_each) < 1.0):
        raise ValueError(f"delta_each must be in [0, 1), got {delta_each!r}")
    if not (0.0 <= float(delta_slack) < 1.0):
        raise ValueError(f"delta_slack must be in [0, 1), got {delta_slack!r}")
    k = len(eps_list)
    if k == 0:
        return 0.0, 0.0
    basic = (math.fsum(eps_list), min(1.0, k * float(delta_each)))
    if delta_slack == 0.0 or max(eps_list) > 700.0:  # e^eps overflows above ~709.8; basic is tight there
        return basic
    sq = math.fsum(e * e for e in eps_list)
    adv_eps = math.sqrt(2.0 * math.log(1.0 / delta_slack) * sq) + math.fsum(e * math.expm1(e) for e in eps_list)
    adv = (adv_eps, min(1.0, k * float(delta_each) + float(delta_slack)))
    return adv if math.isfinite(adv[0]) and adv[0] < basic[0] else basic
