"""Composition of r releases of one user (spec §0.3).

* Basic: (sum eps, sum delta). Exact for the worst case of pure releases when no
  delta is allowed.
* Advanced (Dwork, Rothblum & Vadhan 2010) for r identical (eps, delta)
  releases: eps sqrt(2 r ln(1/delta')) + r eps (e^eps - 1), with r delta + delta'.
* PLD through ``dp-accounting``: every (eps, delta)-DP mechanism is dominated by
  the "(eps, delta) privacy-parameters" pair (Kairouz, Oh & Viswanath 2015), and
  ``privacy_loss_distribution.from_privacy_parameters`` builds its privacy loss
  distribution; composing it r times is the optimal composition of r
  (eps, delta) mechanisms, computed numerically with pessimistic rounding.

Metric guarantees enter through their pure-LDP equivalent (``Guarantee.as_ldp``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import lru_cache

import numpy as np

from dp_accounting.pld import common, privacy_loss_distribution

# PLD cost grows with r * eps / interval; above this many releases the (cheap,
# looser) advanced bound is used alone.
MAX_PLD_RELEASES = 2000


@dataclass(frozen=True)
class Composed:
    """What r releases of per-release (eps, delta) add up to, by each method."""

    releases: int
    epsilon_basic: float
    delta_basic: float
    target_delta: float
    epsilon_advanced: float | None
    epsilon_pld: float | None
    epsilon_best_approx: float | None  # min(advanced, pld) at delta_approx
    delta_approx: float  # r * delta + target_delta
    method: str  # which approximate method gave epsilon_best_approx

    def to_dict(self) -> dict[str, float | int | str | None]:
        return asdict(self)


def basic(parts: list[tuple[float, float, int]]) -> tuple[float, float]:
    """Sum of ``count * eps`` and ``count * delta`` over (eps, delta, count) parts."""
    return sum(e * c for e, _, c in parts), sum(d * c for _, d, c in parts)


def advanced(eps: float, delta: float, r: int, delta_slack: float) -> tuple[float, float]:
    """Advanced composition of r identical (eps, delta) mechanisms (Dwork, Rothblum & Vadhan 2010)."""
    if r == 0:
        return 0.0, 0.0
    if eps > 700.0:  # e^eps overflows a float; the bound is then useless anyway
        return math.inf, r * delta + delta_slack
    value = eps * math.sqrt(2 * r * math.log(1 / delta_slack)) + r * eps * math.expm1(eps)
    return value, r * delta + delta_slack


@lru_cache(maxsize=512)
def _pld_epsilon(parts: tuple[tuple[float, float, int], ...], target_delta: float, interval: float) -> float:
    pld = None
    for eps, delta, count in parts:
        if count == 0:
            continue
        one = privacy_loss_distribution.from_privacy_parameters(
            common.DifferentialPrivacyParameters(eps, delta), value_discretization_interval=interval
        )
        composed = one.self_compose(count)
        pld = composed if pld is None else pld.compose(composed)
    if pld is None:
        return 0.0
    return float(pld.get_epsilon_for_delta(target_delta))


def pld(parts: list[tuple[float, float, int]], delta: float) -> float:
    """Epsilon at total ``delta`` of the composed (eps, delta) parts, by PLD.

    The parts' own deltas are inside the composed distribution, so ``delta``
    must exceed their sum for a finite answer (callers pass sum + slack).
    """
    interval = max(1e-4, max(e for e, _, _ in parts) / 2000)  # keep the grid small at large eps
    return _pld_epsilon(tuple(parts), float(delta), interval)


def compose(parts: list[tuple[float, float, int]], target_delta: float,
            delta_approx: float | None = None) -> Composed:
    """Compose per-release (eps, delta) parts ``[(eps, delta, count), ...]`` of one user.

    The approximate methods are evaluated at ``delta_approx`` (default: the
    summed deltas + ``target_delta``; a larger common value lets several users
    be stated at one delta). Infinite epsilons (a release in the clear) give
    infinite results. The advanced bound is only defined for a single kind of
    release; with several kinds only basic and PLD are computed.
    """
    r = sum(c for _, _, c in parts)
    eps_b, delta_b = basic(parts)
    if delta_approx is None:
        delta_approx = delta_b + target_delta
    elif delta_approx < delta_b + target_delta * (1 - 1e-12):
        raise ValueError(f"delta_approx {delta_approx} is below the summed deltas + target_delta")
    if r == 0 or not math.isfinite(eps_b):
        return Composed(r, eps_b, delta_b, target_delta, None, None, None, delta_approx, "basic")
    if delta_approx >= 1.0:  # e.g. many TrLaplace words at small epsilon: no (eps, delta < 1) statement
        return Composed(r, eps_b, min(1.0, delta_b), target_delta, None, None, None, 1.0,
                        "vacuous: the composed delta reaches 1")
    nonzero = [p for p in parts if p[2] > 0]
    slack = delta_approx - delta_b  # >= target_delta
    adv = advanced(nonzero[0][0], nonzero[0][1], r, slack)[0] if len(nonzero) == 1 else None
    # dp-accounting computes e^eps: above ~700 it overflows (and basic composition is tight there).
    pld_eps = pld(nonzero, delta_approx) if r <= MAX_PLD_RELEASES and max(e for e, _, _ in nonzero) <= 700 \
        else None
    # Basic composition's (eps_b, delta_b) also holds at the larger delta_approx.
    candidates = {k: v for k, v in (("basic", eps_b), ("advanced", adv), ("pld", pld_eps)) if v is not None}
    method, best = min(candidates.items(), key=lambda kv: kv[1])
    return Composed(r, eps_b, delta_b, target_delta, adv, pld_eps, best, delta_approx, method)


# Above this many distinct non-dominated release profiles, the worst case is
# bounded through their envelope (a cheaper, looser, still valid bound).
MAX_PROFILES = 256


def _pareto_maximal(profiles: np.ndarray) -> np.ndarray:
    """Rows of ``profiles`` (distinct, non-negative counts) not dominated elementwise by another row."""
    keep = np.ones(len(profiles), dtype=bool)
    for i, row in enumerate(profiles):
        dominated = (profiles >= row).all(axis=1) & (profiles != row).any(axis=1)
        keep[i] = not dominated.any()
    return profiles[keep]


def compose_worst(kinds: list[tuple[float, float]], counts: np.ndarray, target_delta: float) -> dict[str, object]:
    """A composition statement that holds for **every** user, not only the one with the
    largest basic total.

    ``counts[u, j]`` is how many releases of kind ``kinds[j] = (eps, delta)``
    user ``u`` made. Users with the same counts share one computation; a user
    whose counts are elementwise below another's is dominated (every method's
    epsilon grows with extra releases), so only the Pareto-maximal profiles
    are composed. All of them are evaluated at one common
    ``delta_approx = max_u summed delta_u + target_delta``, so each reported
    epsilon is the maximum over users at that delta: ``epsilon_best_approx`` is
    max over users of that user's best method (a user with many small releases
    can have a larger PLD epsilon than the user with the largest basic total).
    With more than ``MAX_PROFILES`` maximal profiles the elementwise maximum of
    the counts (a fictitious user that dominates every real one) is composed
    instead, which is looser but still a valid bound (``over`` says which).
    Written by hand: dp-accounting composes one event sequence, not a
    population's worst case.
    """
    counts = np.asarray(counts, dtype=np.int64)
    if counts.ndim != 2 or counts.shape[1] != len(kinds):
        raise ValueError(f"counts must be [users, {len(kinds)}], got shape {counts.shape}")
    used = counts[(counts > 0).any(axis=1)] if counts.size else counts
    if used.shape[0] == 0:
        return {**compose([], target_delta).to_dict(), "users_composed": 0, "over": "every user"}
    profiles = _pareto_maximal(np.unique(used, axis=0))
    over = "every user (max over users of each figure)"
    if len(profiles) > MAX_PROFILES:
        profiles = used.max(axis=0, keepdims=True)
        over = "every user (bounded by the elementwise maximum of the users' release counts)"
    parts_of = [[(e, d, int(c)) for (e, d), c in zip(kinds, row, strict=True) if c > 0] for row in profiles]
    delta_common = max(basic(parts)[1] for parts in parts_of) + target_delta
    results = [compose(parts, target_delta, delta_common if delta_common < 1.0 else None) for parts in parts_of]

    def worst(values: list[float | None]) -> float | None:
        return None if any(v is None for v in values) else max(values)  # type: ignore[type-var]

    binding = max(results, key=lambda c: (c.epsilon_best_approx is None, c.epsilon_best_approx or 0.0,
                                          c.epsilon_basic))
    vacuous = any(c.method.startswith("vacuous") for c in results)
    return {
        "releases": max(c.releases for c in results),
        "epsilon_basic": max(c.epsilon_basic for c in results),
        "delta_basic": max(c.delta_basic for c in results),
        "target_delta": target_delta,
        "epsilon_advanced": worst([c.epsilon_advanced for c in results]),
        "epsilon_pld": worst([c.epsilon_pld for c in results]),
        "epsilon_best_approx": None if vacuous else worst([c.epsilon_best_approx for c in results]),
        "delta_approx": 1.0 if vacuous else min(1.0, delta_common),
        "method": binding.method,
        "users_composed": len(profiles),
        "over": over,
    }
