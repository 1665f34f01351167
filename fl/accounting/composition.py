"""Composition of r releases of one user (docs/SPEC.md §0.3).

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


def compose(parts: list[tuple[float, float, int]], target_delta: float, delta_approx: float | None = None) -> Composed:
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
        return Composed(
            r, eps_b, min(1.0, delta_b), target_delta, None, None, None, 1.0, "vacuous: the composed delta reaches 1"
        )
    nonzero = [p for p in parts if p[2] > 0]
    slack = delta_approx - delta_b  # >= target_delta
    adv = advanced(nonzero[0][0], nonzero[0][1], r, slack)[0] if len(nonzero) == 1 else None
    # dp-accounting computes e^eps: above ~700 it overflows (and basic composition is tight there).
    pld_eps = pld(nonzero, delta_approx) if r <= MAX_PLD_RELEASES and max(e for e, _, _ in nonzero) <= 700 else None
    # Basic composition's (eps_b, delta_b) also holds at the larger delta_approx.
    candidates = {k: v for k, v in (("basic", eps_b), ("advanced", adv), ("pld", pld_eps)) if v is not None}
    method, best = min(candidates.items(), key=lambda kv: kv[1])
    return Composed(r, eps_b, delta_b, target_delta, adv, pld_eps, best, delta_approx, method)


def compose_worst(kinds: list[tuple[float, float]], counts: np.ndarray, target_delta: float) -> dict[str, object]:
    """A composition statement that holds for **every** user, not only the one with the
    largest basic total.

    ``counts[u, j]`` is how many releases of kind ``kinds[j] = (eps, delta)``
    user ``u`` made. Every user is stated at one common
    ``delta_approx = max_u summed delta_u + target_delta`` and each reported
    epsilon is the maximum over users at that delta; ``epsilon_best_approx``
    is the maximum over users of that user's best method (a user with many
    small releases can have a larger PLD epsilon than the user with the
    largest basic total). Basic and advanced composition are closed forms,
    computed for every distinct release profile; PLD is computed in
    decreasing order of min(basic, advanced) and stops once that bound falls
    below the largest best figure found, since no remaining user can exceed
    it (nor, to PLD's pessimistic discretisation, have a larger PLD epsilon).
    Written by hand: dp-accounting composes one event sequence, not a
    population's worst case.
    """
    counts = np.asarray(counts, dtype=np.int64)
    if counts.ndim != 2 or counts.shape[1] != len(kinds):
        raise ValueError(f"counts must be [users, {len(kinds)}], got shape {counts.shape}")
    used = counts[(counts > 0).any(axis=1)] if counts.size else counts
    if used.shape[0] == 0:
        return {**compose([], target_delta).to_dict(), "users_composed": 0, "over": "every user"}
    profiles = np.unique(used, axis=0)
    eps = np.array([e for e, _ in kinds], dtype=np.float64)
    deltas = np.array([d for _, d in kinds], dtype=np.float64)
    with np.errstate(invalid="ignore"):  # 0 * inf: a kind the profile does not use
        eps_b = np.where(profiles > 0, profiles * eps, 0.0).sum(axis=1)
    delta_b = profiles @ deltas
    delta_common = float(delta_b.max()) + target_delta
    out = {
        "releases": int(profiles.sum(axis=1).max()),
        "epsilon_basic": float(eps_b.max()),
        "delta_basic": float(delta_b.max()),
        "target_delta": target_delta,
        "over": "every user",
    }
    if not np.isfinite(eps_b).all() or delta_common >= 1.0:
        method = "basic" if delta_common < 1.0 else "vacuous: the composed delta reaches 1"
        return {
            **out,
            "epsilon_advanced": None,
            "epsilon_pld": None,
            "epsilon_best_approx": None,
            "delta_approx": min(1.0, delta_common),
            "method": method,
            "users_composed": 0,
        }
    single = (profiles > 0).sum(axis=1) == 1
    adv = np.full(len(profiles), np.nan)
    for i in np.flatnonzero(single):
        j = int(np.flatnonzero(profiles[i])[0])
        adv[i] = advanced(eps[j], deltas[j], int(profiles[i, j]), delta_common - delta_b[i])[0]
    bound = np.where(np.isnan(adv), eps_b, np.minimum(eps_b, adv))  # >= each user's best figure
    best = pld_max = -math.inf
    method, evaluated, pld_missing = "basic", 0, False
    for i in np.argsort(-bound, kind="stable"):
        if bound[i] <= best:
            break  # no remaining user can have a larger best figure
        parts = [(float(e), float(d), int(c)) for e, d, c in zip(eps, deltas, profiles[i], strict=True) if c > 0]
        c = compose(parts, target_delta, delta_common)
        evaluated += 1
        pld_missing |= c.epsilon_pld is None
        pld_max = max(pld_max, c.epsilon_pld if c.epsilon_pld is not None else -math.inf)
        if c.epsilon_best_approx is not None and c.epsilon_best_approx > best:
            best, method = c.epsilon_best_approx, c.method
    return {
        **out,
        "epsilon_advanced": None if not single.all() else float(adv.max()),
        "epsilon_pld": None if pld_missing else float(pld_max),
        "epsilon_best_approx": float(best),
        "delta_approx": delta_common,
        "method": method,
        "users_composed": evaluated,
    }
