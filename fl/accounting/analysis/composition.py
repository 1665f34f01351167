"""Composition of r releases of one user (docs/SPEC.md §0.3, §15.1).

* Basic: (sum eps, sum delta), always reported (``epsilon_basic`` at ``delta_basic``).
* Advanced (Dwork, Rothblum & Vadhan 2010) for r identical (eps, delta) releases.
* PLD through ``dp-accounting``: the generic "(eps, delta) privacy-parameters" pair, or a
  mechanism's own dp-accounting event (``mechanism_event``: Laplace, Gaussian, randomized
  response) where its privacy loss is known exactly.

Metric guarantees enter through their pure-LDP equivalent (``Guarantee.as_ldp``).

Guarantee: every figure is an upper bound for replace-one neighbours and names its accountant.
A figure other than basic composition is stated at ``delta_approx >= delta_basic`` and is
reported only when finite and strictly below ``epsilon_basic`` (otherwise ``None``, with the
reason in its ``*_note``), so ``epsilon_best_approx`` is never above ``epsilon_basic``.
The rules, the dp-accounting events and the neighbouring relations: docs/SPEC.md §15.1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from typing import Any

import numpy as np
from dp_accounting import NeighboringRelation, dp_event
from dp_accounting.pld import common, privacy_loss_distribution

from mechanisms.clipped_additive import analytic_gaussian_sigma
from mechanisms.guarantee import Guarantee

# PLD cost grows with r * eps / interval; above this many releases (Gaussian-event
# releases not counted) the (cheap, looser) advanced bound is used alone.
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


ACCOUNTANT_BASIC = "basic"
ACCOUNTANT_ADVANCED = "advanced"
ACCOUNTANT_PLD_GENERIC = "pld-generic (eps, delta) pair"
# One part: (eps, delta, count) or (eps, delta, count, event); event None = the generic pair.
Part = tuple[float, float, int] | tuple[float, float, int, dp_event.DpEvent | None]


def mechanism_event(guarantee: Guarantee) -> dp_event.DpEvent | None:
    """The dp-accounting event that describes one release exactly, from the kind its mechanism declares
    (``Guarantee.accounting``), or ``None``.

    ``None`` (the generic (eps, delta) pair) when the guarantee declares no kind, when its notion is
    not the kind's own (a metric or composed guarantee), when epsilon is not finite and positive, and
    for randomized response whose number of values (``buckets``) is unknown. Laplace and Gaussian
    events are in units of the replace-one shift (the diameter; docs/SPEC.md §15.1).
    """
    eps, kind = float(guarantee.epsilon), guarantee.accounting
    if kind is None or not (0.0 < eps <= MAX_EXP_EPSILON) or guarantee.is_vacuous:
        return None
    if kind == "laplace" and guarantee.notion == "pure":
        return dp_event.LaplaceDpEvent(1.0 / eps)
    if kind == "gaussian" and guarantee.notion == "approx" and 0.0 < guarantee.delta < 1.0:
        # sigma is calibrated per sensitivity to ~1e-13: rounding the multiplier down by 1e-9 keeps it
        # at or below the mechanism's sigma / Delta2 (less noise: a pessimistic account).
        return dp_event.GaussianDpEvent(analytic_gaussian_sigma(eps, float(guarantee.delta), 1.0) * (1 - 1e-9))
    if kind == "randomized_response" and guarantee.notion == "pure" and guarantee.buckets is not None:
        k = int(guarantee.buckets)
        return dp_event.RandomizedResponseDpEvent(k / (math.exp(eps) + k - 1), k)
    return None


def _event_name(event: dp_event.DpEvent | None) -> str | None:
    return None if event is None else type(event).__name__


def pld_accountant(events: list[dp_event.DpEvent | None]) -> str:
    """The name of the PLD accountant for parts with these events (``None``: the generic pair)."""
    names = sorted({n for n in map(_event_name, events) if n is not None})
    specific = f"pld-mechanism-specific ({', '.join(names)})" if names else None
    if specific is None:
        return ACCOUNTANT_PLD_GENERIC
    return specific if all(e is not None for e in events) else f"{specific} + {ACCOUNTANT_PLD_GENERIC}"


def _parts4(parts: Sequence[Part]) -> list[tuple[float, float, int, dp_event.DpEvent | None]]:
    return [(float(p[0]), float(p[1]), int(p[2]), p[3] if len(p) > 3 else None) for p in parts]


@dataclass(frozen=True)
class Composed:
    """What r releases of per-release (eps, delta) add up to, by each method.

    ``epsilon_advanced`` and ``epsilon_pld`` are either finite numbers strictly
    below ``epsilon_basic`` (and their ``*_note`` is ``None``) or ``None`` with
    the reason in their ``*_note`` (docs/SPEC.md §15.1).
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
    accountant: str = ACCOUNTANT_BASIC  # which accountant gave epsilon_best_approx
    epsilon_pld_accountant: str | None = None  # the PLD accountant (None: PLD not computed)

    def to_dict(self) -> dict[str, float | int | str | None]:
        return asdict(self)


def basic(parts: Sequence[Part]) -> tuple[float, float]:
    """Sum of ``count * eps`` and ``count * delta`` over (eps, delta, count[, event]) parts."""
    return sum(p[0] * p[2] for p in parts), sum(p[1] * p[2] for p in parts)


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


def event_pld(
    event: dp_event.DpEvent, count: int, interval: float
) -> privacy_loss_distribution.PrivacyLossDistribution:
    """The PLD of ``count`` releases described by ``event`` (pessimistic rounding; docs/SPEC.md §15.1)."""
    if isinstance(event, dp_event.LaplaceDpEvent):
        one = privacy_loss_distribution.from_laplace_mechanism(
            event.noise_multiplier, sensitivity=1.0, value_discretization_interval=interval
        )
        return one.self_compose(count)
    if isinstance(event, dp_event.GaussianDpEvent):  # count Gaussians = one with sigma / sqrt(count)
        return privacy_loss_distribution.from_gaussian_mechanism(
            event.noise_multiplier / math.sqrt(count),
            sensitivity=1.0,
            value_discretization_interval=interval,
            neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE,
        )
    if isinstance(event, dp_event.RandomizedResponseDpEvent):
        one = privacy_loss_distribution.from_randomized_response(
            event.noise_parameter,
            event.num_buckets,
            value_discretization_interval=interval,
            neighboring_relation=NeighboringRelation.REPLACE_ONE,
        )
        return one.self_compose(count)
    raise ValueError(f"no mechanism-specific PLD for {event!r}")


@lru_cache(maxsize=512)
def _pld_epsilon(
    parts: tuple[tuple[float, float, int, dp_event.DpEvent | None], ...], target_delta: float, interval: float
) -> float:
    pld = None
    for eps, delta, count, event in parts:
        if count == 0:
            continue
        if event is None:
            one = privacy_loss_distribution.from_privacy_parameters(
                common.DifferentialPrivacyParameters(eps, delta), value_discretization_interval=interval
            )
            composed = one.self_compose(count)
        else:
            composed = event_pld(event, count, interval)
        pld = composed if pld is None else pld.compose(composed)
    if pld is None:
        return 0.0
    return float(pld.get_epsilon_for_delta(target_delta))


def pld(parts: Sequence[Part], delta: float) -> float:
    """Epsilon at total ``delta`` of the composed parts, by PLD (the raw figure).

    A part with an event is composed by its mechanism-specific PLD, one without
    by the generic (eps, delta) pair, whose delta is inside the composed
    distribution: ``delta`` must exceed the generic parts' summed deltas for a
    finite answer (callers pass sum + slack).
    """
    full = _parts4(parts)
    interval = max(1e-4, max(p[0] for p in full) / 2000)  # keep the grid small at large eps
    return _pld_epsilon(tuple(full), float(delta), interval)


def _compose_raw(raw_parts: Sequence[Part], target_delta: float, delta_approx: float | None) -> Composed:
    """``compose`` before the reporting rule: advanced and PLD figures as computed (maybe >= basic, inf).

    Notes are set only for figures that were not computed; the advanced note,
    when set on a computed figure, is the ``advanced_threshold`` explanation.
    """
    parts = _parts4(raw_parts)
    r = sum(p[2] for p in parts)
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
            r, eps_b, min(1.0, delta_b), target_delta, None, None, None, 1.0, method, NOTE_VACUOUS, NOTE_VACUOUS, method
        )
    nonzero = [p for p in parts if p[2] > 0]
    slack = delta_approx - delta_b  # >= target_delta
    adv, adv_note = None, NOTE_MIXED
    if len(nonzero) == 1:
        adv, adv_note = advanced(nonzero[0][0], nonzero[0][1], r, slack)[0], _advanced_why(r, slack)
    # dp-accounting computes e^eps: above ~700 it overflows (and basic composition is tight there).
    pld_eps, pld_note, pld_name = None, None, None
    # Gaussian parts compose in closed form (one Gaussian of sigma / sqrt(count)): they cost no PLD size.
    if sum(p[2] for p in nonzero if not isinstance(p[3], dp_event.GaussianDpEvent)) > MAX_PLD_RELEASES:
        pld_note = NOTE_PLD_MANY
    elif max(p[0] for p in nonzero) > MAX_EXP_EPSILON:
        pld_note = NOTE_PLD_HUGE
    else:
        pld_eps, pld_name = pld(nonzero, delta_approx), pld_accountant([p[3] for p in nonzero])
    # Basic composition's (eps_b, delta_b) also holds at the larger delta_approx.
    candidates = {k: v for k, v in (("basic", eps_b), ("advanced", adv), ("pld", pld_eps)) if v is not None}
    method, best = min(candidates.items(), key=lambda kv: kv[1])
    accountant = pld_name if method == "pld" and pld_name is not None else method
    return Composed(
        r,
        eps_b,
        delta_b,
        target_delta,
        adv,
        pld_eps,
        best,
        delta_approx,
        method,
        adv_note,
        pld_note,
        accountant,
        pld_name,
    )


def compose(parts: list[Part], target_delta: float, delta_approx: float | None = None) -> Composed:
    """Compose per-release (eps, delta) parts ``[(eps, delta, count[, event]), ...]`` of one user.

    A part's optional dp-accounting ``event`` (``mechanism_event``) makes PLD use
    that mechanism's own privacy loss distribution; ``epsilon_pld_accountant``
    and ``accountant`` name what produced the figures.

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


def compose_worst(kinds: list[tuple], counts: np.ndarray, target_delta: float) -> dict[str, object]:
    """A composition statement that holds for **every** user, not only the one with the
    largest basic total.

    ``counts[u, j]`` is how many releases of kind ``kinds[j] = (eps, delta)``
    or ``(eps, delta, event)`` user ``u`` made (``event``: ``mechanism_event``,
    ``None`` for the generic pair). Every user is stated at one common
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

    Reporting rule (docs/SPEC.md §15.1), applied to the population's figures:
    ``epsilon_advanced`` (max over users) and ``epsilon_pld`` (max over the
    users composed) are reported only when finite and strictly below
    ``epsilon_basic`` (the max over users of basic composition); otherwise
    ``None`` with the reason in ``epsilon_advanced_note`` / ``epsilon_pld_note``.
    A user's own figure may exceed that user's basic total and still enter the
    maximum: it is a valid bound for that user.

    ``accountant`` names the accountant of ``epsilon_best_approx`` (that of the
    user attaining it) and ``epsilon_pld_accountant`` the PLD accountants of the
    users composed (joined by "; " when they differ).
    """
    events = [k[2] if len(k) > 2 else None for k in kinds]
    kinds = [(float(k[0]), float(k[1])) for k in kinds]
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
    epsilon_basic = float(eps_b.max())
    out: dict[str, Any] = {
        "releases": int(profiles.sum(axis=1).max()),
        "epsilon_basic": epsilon_basic,
        "delta_basic": float(delta_b.max()),
        "target_delta": target_delta,
        "over": "every user",
    }
    if not np.isfinite(eps_b).all() or delta_common >= 1.0:
        return {**out, **_no_approx(delta_common)}
    single = (profiles > 0).sum(axis=1) == 1
    adv = np.full(len(profiles), np.nan)
    for i in np.flatnonzero(single):
        j = int(np.flatnonzero(profiles[i])[0])
        adv[i] = advanced(eps[j], deltas[j], int(profiles[i, j]), delta_common - delta_b[i])[0]
    bound = np.where(np.isnan(adv), eps_b, np.minimum(eps_b, adv))  # >= each user's best figure
    worst = _worst_user(profiles, eps, deltas, events, bound, target_delta, delta_common)
    if single.all():
        adv_max = float(adv.max())
        adv_why = "advanced composition beats basic only for many releases of small epsilon (below ln 2 each)"
        if len(profiles) == 1:
            j = int(np.flatnonzero(profiles[0])[0])
            adv_why = _advanced_why(int(profiles[0, j]), delta_common - float(delta_b[0]))
        epsilon_adv, adv_note = _judge("advanced", adv_max, epsilon_basic, adv_why)
    else:
        epsilon_adv, adv_note = None, NOTE_MIXED
    if worst.pld_note is None:
        epsilon_pld, pld_note = _judge("PLD", worst.pld_max, epsilon_basic, None)
    else:
        epsilon_pld, pld_note = None, worst.pld_note
    return {
        **out,
        "epsilon_advanced": epsilon_adv,
        "epsilon_advanced_note": adv_note,
        "epsilon_pld": epsilon_pld,
        "epsilon_pld_note": pld_note,
        "epsilon_best_approx": float(worst.best),
        "delta_approx": delta_common,
        "method": worst.method,
        "accountant": worst.accountant,
        "epsilon_pld_accountant": "; ".join(worst.pld_names) if worst.pld_names else None,
        "users_composed": worst.evaluated,
    }


def _no_approx(delta_common: float) -> dict[str, Any]:
    """The approximate figures of a population with a release in the clear (infinite basic epsilon) or a
    composed delta of 1 or more: none, with the reason."""
    vacuous = delta_common >= 1.0
    note = NOTE_VACUOUS if vacuous else NOTE_CLEAR
    return {
        "epsilon_advanced": None,
        "epsilon_advanced_note": note,
        "epsilon_pld": None,
        "epsilon_pld_note": note,
        "epsilon_best_approx": None,
        "delta_approx": min(1.0, delta_common),
        "method": "vacuous: the composed delta reaches 1" if vacuous else "basic",
        "accountant": "vacuous: the composed delta reaches 1" if vacuous else ACCOUNTANT_BASIC,
        "epsilon_pld_accountant": None,
        "users_composed": 0,
    }


@dataclass
class _Worst:
    """What composing the users in decreasing order of their bound found."""

    best: float = -math.inf  # the largest best figure over the users composed
    method: str = "basic"
    accountant: str = ACCOUNTANT_BASIC
    pld_max: float = -math.inf
    pld_note: str | None = None
    pld_names: list[str] = field(default_factory=list)
    evaluated: int = 0


def _worst_user(
    profiles: np.ndarray,
    eps: np.ndarray,
    deltas: np.ndarray,
    events: list[Any],
    bound: np.ndarray,
    target_delta: float,
    delta_common: float,
) -> _Worst:
    """Compose each release profile at ``delta_common`` in decreasing order of ``bound`` (>= its best figure),
    stopping once the bound falls below the largest best figure found: no remaining user can exceed it."""
    worst = _Worst()
    for i in np.argsort(-bound, kind="stable"):
        if bound[i] <= worst.best:
            break  # no remaining user can have a larger best figure
        row = zip(eps, deltas, profiles[i], events, strict=True)
        parts = [(float(e), float(d), int(c), ev) for e, d, c, ev in row if c > 0]
        c = _compose_raw(parts, target_delta, delta_common)  # raw: a user's PLD above its basic still bounds it
        worst.evaluated += 1
        if c.epsilon_pld is None:
            worst.pld_note = worst.pld_note or c.epsilon_pld_note
        else:
            worst.pld_max = max(worst.pld_max, c.epsilon_pld)
        if c.epsilon_pld_accountant is not None and c.epsilon_pld_accountant not in worst.pld_names:
            worst.pld_names.append(c.epsilon_pld_accountant)
        if c.epsilon_best_approx is not None and c.epsilon_best_approx > worst.best:
            worst.best, worst.method, worst.accountant = c.epsilon_best_approx, c.method, c.accountant
    return worst
