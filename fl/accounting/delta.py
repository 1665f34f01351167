"""The delta of a central (epsilon, delta) account, tied to the population it protects.

An (epsilon, delta) guarantee with delta >= 1/N admits a mechanism that publishes one of the N
protected units in the clear with probability delta * N (Dwork & Roth 2014, §2.3: "values of delta
on the order of 1/N are very dangerous"), so delta must be well below 1/N. ``central-delta = 0``
(the default) resolves to 1 / (10 N) for the run's N units (users, or nodes in node-level DP), at
most 1e-5; a delta the user gives with delta * N > 0.1 (above the default's 1 / (10 N), not only
at or above 1/N) is kept (the user chose it) and flagged on the console (``strategies.central_user``
and ``strategies.central_node`` log :func:`delta_warning`) and in every privacy record
(:func:`delta_fields`: ``delta_warning``).
"""

from __future__ import annotations

from typing import Any

#: The largest default delta (the usual 1e-5 of a large population).
DELTA_CAP = 1e-5
#: The default delta is 1 / (DELTA_DIVISOR * N).
DELTA_DIVISOR = 10
#: A delta with delta * N above this is flagged: the default's 1 / (10 N) is the largest delta that passes.
DELTA_WARN_FRACTION = 1.0 / DELTA_DIVISOR


def population_delta(configured: float, population: int) -> float:
    """The delta of the account: ``configured`` when > 0, else ``min(1e-5, 1 / (10 N))``."""
    if population < 1:
        raise ValueError(f"the population of a central account must be >= 1, got {population}")
    if configured > 0:
        return float(configured)
    return min(DELTA_CAP, 1.0 / (DELTA_DIVISOR * population))


def delta_fields(configured: float, population: int, unit: str) -> dict[str, Any]:
    """What a privacy record says about its delta: the value, its rule and, when delta * N > 0.1, a flag."""
    delta = population_delta(configured, population)
    out: dict[str, Any] = {
        "delta": delta,
        "delta_rule": "given (central-delta)" if configured > 0 else f"min(1e-5, 1 / (10 N)), N = {population} {unit}s",
        "delta_times_population": delta * population,
    }
    warning = delta_warning(delta, population, unit)
    if warning:
        out["delta_warning"] = warning
    return out


def delta_warning(delta: float, population: int, unit: str) -> str | None:
    """A one-line warning when ``delta * N > 0.1`` (the default's 1 / (10 N) passes; at delta >= 1/N the
    account allows publishing a unit in the clear), else ``None``."""
    ratio = delta * population
    if ratio <= DELTA_WARN_FRACTION * (1 + 1e-9):  # 1 / (10 N) * N rounds to 0.1 give or take an ulp
        return None
    clear = (
        f"at delta >= 1/N an (epsilon, delta) account allows a mechanism that publishes a {unit}'s data in the clear"
    )
    return (
        f"central-delta = {delta:g} for N = {population} {unit}s gives delta * N = {ratio:.3g} (> 0.1): a delta "
        f"should be well below 1/N = {1.0 / population:.3g} ({clear}); use central-delta = 0 (1 / (10 N))"
    )
