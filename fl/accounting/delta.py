"""The delta of a central (epsilon, delta) account, tied to the population it protects.

An (epsilon, delta) guarantee with delta >= 1/N admits a mechanism that publishes one of the N
protected units in the clear with probability delta * N (Dwork & Roth 2014, §2.3: "values of delta
on the order of 1/N are very dangerous"), so delta must be well below 1/N. ``central-delta = 0``
(the default) resolves to 1 / (10 N) for the run's N units (users, or nodes in node-level DP), at
most 1e-5; a delta the user gives that is >= 1/N is kept (the user chose it) and flagged on the
console and in every privacy record.
"""

from __future__ import annotations

from typing import Any

#: The largest default delta (the usual 1e-5 of a large population).
DELTA_CAP = 1e-5
#: The default delta is 1 / (DELTA_DIVISOR * N).
DELTA_DIVISOR = 10


def population_delta(configured: float, population: int) -> float:
    """The delta of the account: ``configured`` when > 0, else ``min(1e-5, 1 / (10 N))``."""
    if population < 1:
        raise ValueError(f"the population of a central account must be >= 1, got {population}")
    if configured > 0:
        return float(configured)
    return min(DELTA_CAP, 1.0 / (DELTA_DIVISOR * population))


def delta_fields(configured: float, population: int, unit: str) -> dict[str, Any]:
    """What a privacy record says about its delta: the value, its rule and, when delta >= 1/N, a flag."""
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
    """A one-line warning when ``delta >= 1/N`` (the account then allows publishing a unit in the clear)."""
    if delta * population < 1.0:
        return None
    return (
        f"central-delta = {delta:g} is >= 1/N for N = {population} {unit}s (delta * N = {delta * population:.3g}): "
        f"such an (epsilon, delta) account allows a mechanism that publishes a {unit}'s data in the clear; "
        "use central-delta = 0 (1 / (10 N))"
    )
