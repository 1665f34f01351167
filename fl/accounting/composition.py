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

What a reported figure guarantees (issue 15 item 6)
---------------------------------------------------
Basic composition is always reported (``epsilon_basic``, at ``delta_basic``).
Every other composed figure (``epsilon_advanced``, ``epsilon_pld``) is stated at
``delta_approx >= delta_basic``, so it is only worth a number when it is
**finite and strictly below** ``epsilon_basic``: otherwise basic composition,
already reported, gives a smaller-or-equal epsilon at a smaller-or-equal delta
and is the tight statement. Such a figure is reported as ``None`` and its
``*_note`` field says why (not applicable: not below basic composition, not
finite; or not computed, and why); a reported number always comes with
``*_note = None``. Hence a reported figure is never above ``epsilon_basic`` and
never astronomically large, and ``epsilon_best_approx`` (the smallest of basic
and the reported figures) is never above ``epsilon_basic``.

For advanced composition the rule has a closed form (``advanced_threshold``):
with L = ln(1/delta'), eps sqrt(2 r L) + r eps (e^eps - 1) < r eps holds iff
r > 2 L and eps < ln(2 - sqrt(2 L / r)) (< ln 2). A single release, or a few
releases, or any release above ln 2 = 0.693, never gains from it (a single
release at pure 31.4 would "compose" to 1.4e15). PLD is the optimal composition,
so mathematically it never exceeds basic; its pessimistic discretisation can
still put it a hair above (a single release at 9 gives 9.0045), and then it is
not reported either.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from functools import lru_cache

import numpy as np
from dp_accounting.pld import common, privacy_loss_distribution

# PLD cost grows with r * eps / interval; above this many releases the (cheap,
# looser) advanced bound is used alone.
MAX_PLD_RELEASES = 2000
# e^eps overflows a float above ~709.8; per-release epsilons above this are not
# fed to e^eps (advanced composition) nor to dp-accounting (PLD).
MAX_EXP_EPSILON = 700.0

NOTE_NO_RELEASES = "not applicable: no releases"
NOTE_CLEAR = "not applicable: a release in the clear (infinite epsilon); no finite composition exists"
NOTE_VACUOUS = "not applicable: the composed delta reaches 1"
NOTE_MIXED = (
    "not applicable: releases of several (eps, delta) kinds; advanced composition is computed for identical releases"
)
NOTE_PLD_MANY = f"not computed: more than {MAX_PLD_RELEASES} releases (PLD cost); see epsilon_advanced"
NOTE_PLD_HUGE = (
    f"not computed: a per-release epsilon above {MAX_EXP_EPSILON:g} overflows e^eps in dp-accounting "
    "(basic composition is tight there)"
)


@dataclass(frozen=True)
class Composed:
    """What r releases of per-release (eps, delta) add up to, by each method.

    ``epsilon_advanced`` and ``epsilon_pld`` are either finite numbers strictly
    below ``epsilon_basic`` (and their ``*_note`` is ``None``) or ``None`` with
    the reason in their ``*_note`` (module docstring).
    """

    releases: int
    epsilon_basic: float
    delta_basic: float
    target_delta: float
    epsilon_advanced: float | None
    epsilon_pld: float | None
    epsilon_best_approx: float | None  # min(basic, advanced, pld) at delta_approx
    delta_approx: float  # r * delta + target_delta
    method: str  # which method gave epsilon_best_approx
    epsilon_advanced_note: str | None = None  # why epsilon_advanced is None
    epsilon_pld_note: str | None = None  # why epsilon_pld is None

    def to_dict(self) -> dict[str, float | int | str | None]:
        return asdict(self)


def basic(parts: list[tuple[float, float, int]]) -> tuple[float, float]:
    """Sum of ``count * eps`` and ``count * delta`` over (eps, delta, count) parts."""
    return sum(e * c for e, _, c in parts), sum(d * c for _, d, c in parts)


def advanced(eps: float, delta: float, r: int, delta_slack: float) -> tuple[float, float]:
    """Advanced composition of r identical (eps, delta) mechanisms (Dwork, Rothblum & Vadhan 2010).

    The raw bound, whether or not it beats basic composition (``advanced_threshold``
    says when it does; ``compose`` reports it only then). ``inf`` when e^eps
    would overflow (eps > ``MAX_EXP_EPSILON``).
    """
    if r == 0:
        return 0.0, 0.0
    if eps > MAX_EXP_EPSILON:  # e^eps overflows a float; the bound is then useless anyway
        return math.inf, r * delta + delta_slack
    value = eps * math.sqrt(2 * r * math.log(1 / delta_slack)) + r * eps * math.expm1(eps)
    return value, r * delta + delta_slack


def advanced_threshold(r: int, delta_slack: float) -> float:
    """The per-release epsilon below which advanced composition of r identical releases beats basic.

    With L = ln(1/delta_slack): eps sqrt(2 r L) + r eps (e^eps - 1) < r eps
    <=> e^eps - 1 < 1 - sqrt(2 L / r) <=> eps < ln(2 - sqrt(2 L / r)), which
    needs r > 2 L. Returns 0.0 when r <= 2 L (advanced composition never helps).
    Always below ln 2.
    """
    if r <= 0:
        return 0.0
    ratio = math.sqrt(2 * math.log(1 / delta_slack) / r)
    return math.log(2 - ratio) if ratio < 1 else 0.0


def _advanced_why(r: int, delta_slack: float) -> str:
    two_l = 2 * math.log(1 / delta_slack)
    if r <= two_l:
        return f"advanced composition beats basic only for more than 2 ln(1/delta') = {two_l:.3g} releases (here {r})"
    return (
        f"with {r} releases advanced composition beats basic only below a per-release epsilon of "
        f"ln(2 - sqrt(2 ln(1/delta') / r)) = {advanced_threshold(r, delta_slack):.4g}"
    )


def _judge(name: str, value: float | None, epsilon_basic: float, note: str | None) -> tuple[float | None, str | None]:
    """The reporting rule: keep ``value`` only if it is finite and strictly below ``epsilon_basic``."""
    if value is None:
        return None, note
    if not math.isfinite(value):
        return None, f"not applicable: the {name} bound is not finite (overflow); basic composition is tight"
    if value >= epsilon_basic:
        return None, (
            f"not applicable: not below basic composition ({name} >= basic {epsilon_basic:.6g}), "
            "which is the tight figure" + (f"; {note}" if note else "")
        )
    return float(value), None


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
    """Epsilon at total ``delta`` of the composed (eps, delta) parts, by PLD (the raw figure).

    The parts' own deltas are inside the composed distribution, so ``delta``
    must exceed their sum for a finite answer (callers pass sum + slack).
    """
    interval = max(1e-4, max(e for e, _, _ in parts) / 2000)  # keep the grid small at large eps
    return _pld_epsilon(tuple(parts), float(delta), interval)


def _compose_raw(parts: list[tuple[float, float, int]], target_delta: float, delta_approx: float | None) -> Composed:
    """``compose`` before the reporting rule: advanced and PLD figures as computed (maybe >= basic, inf).

    Notes are set only for figures that were not computed; the advanced note,
    when set on a computed figure, is the ``advanced_threshold`` explanation.
    """
    r = sum(c for _, _, c in parts)
    eps_b, delta_b = basic(parts)
    if delta_approx is None:
        delta_approx = delta_b + target_delta
    elif delta_approx < delta_b + target_delta * (1 - 1e-12):
        raise ValueError(f"delta_approx {delta_approx} is below the summed deltas + target_delta")
    if r == 0 or not math.isfinite(eps_b):
        note = NOTE_NO_RELEASES if r == 0 else NOTE_CLEAR
        return Composed(r, eps_b, delta_b, target_delta, None, None, None, delta_approx, "basic", note, note)
    if delta_approx >= 1.0:  # e.g. many TrLaplace words at small epsilon: no (eps, delta < 1) statement
        method = "vacuous: the composed delta reaches 1"
        return Composed(
            r, eps_b, min(1.0, delta_b), target_delta, None, None, None, 1.0, method, NOTE_VACUOUS, NOTE_VACUOUS
        )
    nonzero = [p for p in parts if p[2] > 0]
    slack = delta_approx - delta_b  # >= target_delta
    adv, adv_note = None, NOTE_MIXED
    if len(nonzero) == 1:
        adv, adv_note = advanced(nonzero[0][0], nonzero[0][1], r, slack)[0], _advanced_why(r, slack)
    # dp-accounting computes e^eps: above ~700 it overflows (and basic composition is tight there).
    pld_eps, pld_note = None, None
    if r > MAX_PLD_RELEASES:
        pld_note = NOTE_PLD_MANY
    elif max(e for e, _, _ in nonzero) > MAX_EXP_EPSILON:
        pld_note = NOTE_PLD_HUGE
    else:
        pld_eps = pld(nonzero, delta_approx)
    # Basic composition's (eps_b, delta_b) also holds at the larger delta_approx.
    candidates = {k: v for k, v in (("basic", eps_b), ("advanced", adv), ("pld", pld_eps)) if v is not None}
    method, best = min(candidates.items(), key=lambda kv: kv[1])
    return Composed(r, eps_b, delta_b, target_delta, adv, pld_eps, best, delta_approx, method, adv_note, pld_note)


def compose(parts: list[tuple[float, float, int]], target_delta: float, delta_approx: float | None = None) -> Composed:
    """Compose per-release (eps, delta) parts ``[(eps, delta, count), ...]`` of one user.

    The approximate methods are evaluated at ``delta_approx`` (default: the
    summed deltas + ``target_delta``; a larger common value lets several users
    be stated at one delta). Infinite epsilons (a release in the clear) give an
    infinite ``epsilon_basic`` and no other figure. The advanced bound is only
    defined for a single kind of release; with several kinds only basic and PLD
    are computed.

    Guarantee: ``epsilon_advanced`` and ``epsilon_pld`` are reported only when
    finite and strictly below ``epsilon_basic`` (otherwise ``None``, with the
    reason in ``epsilon_advanced_note`` / ``epsilon_pld_note``; module
    docstring); ``epsilon_best_approx`` = min(basic, reported figures), the
    user is (epsilon_best_approx, delta_approx)-DP.
    """
    raw = _compose_raw(parts, target_delta, delta_approx)
    if raw.epsilon_best_approx is None:  # nothing computed: the notes already say why
        return raw
    adv, adv_note = _judge("advanced", raw.epsilon_advanced, raw.epsilon_basic, raw.epsilon_advanced_note)
    pld_eps, pld_note = _judge("PLD", raw.epsilon_pld, raw.epsilon_basic, raw.epsilon_pld_note)
    return replace(
        raw, epsilon_advanced=adv, epsilon_pld=pld_eps, epsilon_advanced_note=adv_note, epsilon_pld_note=pld_note
    )


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

    Reporting rule (module docstring), applied to the population's figures:
    ``epsilon_advanced`` (max over users) and ``epsilon_pld`` (max over the
    users composed) are reported only when finite and strictly below
    ``epsilon_basic`` (the max over users of basic composition); otherwise
    ``None`` with the reason in ``epsilon_advanced_note`` / ``epsilon_pld_note``.
    A user's own figure may exceed that user's basic total and still enter the
    maximum: it is a valid bound for that user.
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
        vacuous = delta_common >= 1.0
        note = NOTE_VACUOUS if vacuous else NOTE_CLEAR
        return {
            **out,
            "epsilon_advanced": None,
            "epsilon_advanced_note": note,
            "epsilon_pld": None,
            "epsilon_pld_note": note,
            "epsilon_best_approx": None,
            "delta_approx": min(1.0, delta_common),
            "method": "vacuous: the composed delta reaches 1" if vacuous else "basic",
            "users_composed": 0,
        }
    single = (profiles > 0).sum(axis=1) == 1
    adv = np.full(len(profiles), np.nan)
    for i in np.flatnonzero(single):
        j = int(np.flatnonzero(profiles[i])[0])
        adv[i] = advanced(eps[j], deltas[j], int(profiles[i, j]), delta_common - delta_b[i])[0]
    bound = np.where(np.isnan(adv), eps_b, np.minimum(eps_b, adv))  # >= each user's best figure
    best = pld_max = -math.inf
    method, evaluated, pld_note = "basic", 0, None
    for i in np.argsort(-bound, kind="stable"):
        if bound[i] <= best:
            break  # no remaining user can have a larger best figure
        parts = [(float(e), float(d), int(c)) for e, d, c in zip(eps, deltas, profiles[i], strict=True) if c > 0]
        c = _compose_raw(parts, target_delta, delta_common)  # raw: a user's PLD above its basic still bounds it
        evaluated += 1
        if c.epsilon_pld is None:
            pld_note = pld_note or c.epsilon_pld_note
        else:
            pld_max = max(pld_max, c.epsilon_pld)
        if c.epsilon_best_approx is not None and c.epsilon_best_approx > best:
            best, method = c.epsilon_best_approx, c.method
    if single.all():
        adv_max = float(adv.max())
        adv_why = "advanced composition beats basic only for many releases of small epsilon (below ln 2 each)"
        if len(profiles) == 1:
            j = int(np.flatnonzero(profiles[0])[0])
            adv_why = _advanced_why(int(profiles[0, j]), delta_common - float(delta_b[0]))
        epsilon_adv, adv_note = _judge("advanced", adv_max, out["epsilon_basic"], adv_why)
    else:
        epsilon_adv, adv_note = None, NOTE_MIXED
    if pld_note is None:
        epsilon_pld, pld_note = _judge("PLD", pld_max, out["epsilon_basic"], None)
    else:
        epsilon_pld = None
    return {
        **out,
        "epsilon_advanced": epsilon_adv,
        "epsilon_advanced_note": adv_note,
        "epsilon_pld": epsilon_pld,
        "epsilon_pld_note": pld_note,
        "epsilon_best_approx": float(best),
        "delta_approx": delta_common,
        "method": method,
        "users_composed": evaluated,
    }
