"""Mean, sd and n over seeds: the one aggregation of ``sanitas sweep``, ``sanitas compare`` and
``sanitas report-documents``, and the one way they draw it (error bars; a hollow marker for a
point that only one seed reached).

Conventions, the same in every table: ``mean`` is the mean of the finite values; ``sd`` the
*sample* standard deviation (ddof = 1), ``None`` (an empty cell) when fewer than two values;
``n`` the number of finite values. Only :mod:`statistics` is imported here (matplotlib is
imported by the caller that draws).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

#: The label of the legend entry of one-seed points (hollow markers, no error bar).
ONE_SEED_LABEL = "hollow marker: one seed (n=1, no error bar)"


def finite(values: Iterable[Any]) -> list[float]:
    """The values that are finite numbers (``None``, NaN, inf and non-numbers dropped), as floats."""
    out = []
    for v in values:
        if isinstance(v, bool) or v is None:
            continue
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(f):
            out.append(f)
    return out


def mean_sd(values: Iterable[Any]) -> tuple[float | None, float | None, int]:
    """``(mean, sample sd, n)`` of the finite values; ``sd`` is ``None`` when ``n < 2``, ``mean``
    too when ``n == 0``."""
    vals = finite(values)
    if not vals:
        return None, None, 0
    return statistics.fmean(vals), (statistics.stdev(vals) if len(vals) > 1 else None), len(vals)


def group(rows: Iterable[Mapping[str, Any]], key: Callable[[Mapping[str, Any]], Hashable]) -> dict[Any, list[Any]]:
    """Rows grouped by ``key(row)``, groups in first-seen order, rows in their order."""
    groups: dict[Any, list[Any]] = {}
    for row in rows:
        groups.setdefault(key(row), []).append(row)
    return groups


def stat_columns(members: Sequence[Mapping[str, Any]], columns: Iterable[str]) -> dict[str, Any]:
    """``<column>_mean`` and ``<column>_sd`` of each column over ``members``."""
    out: dict[str, Any] = {}
    for column in columns:
        mean, sd, _ = mean_sd(m.get(column) for m in members)
        out[f"{column}_mean"], out[f"{column}_sd"] = mean, sd
    return out


def differing(members: Sequence[Mapping[str, Any]], columns: Iterable[str], rel: float = 1e-9) -> list[str]:
    """The columns whose values are not the same in every member (numbers compared to ``rel``)."""
    out = []
    for column in columns:
        values = [m.get(column) for m in members]
        first = values[0]
        for v in values[1:]:
            numbers = all(isinstance(x, int | float) and not isinstance(x, bool) for x in (first, v))
            same = math.isclose(first, v, rel_tol=rel, abs_tol=0.0) if numbers else v == first
            if not same:
                out.append(column)
                break
    return out


def draw_errorbars(
    ax: Any,
    x: Sequence[float],
    mean: Sequence[float],
    sd: Sequence[float | None],
    n: Sequence[int],
    marker: str = "o",
    linestyle: str = "-",
    **kwargs: Any,
) -> str:
    """Draw mean +- sd at ``x`` (one line, error bars with caps); points with ``n < 2`` get a
    hollow marker and no bar. Returns the line's color (for the caller's other marks)."""
    yerr = [s if s is not None else 0.0 for s in sd]
    drawn = ax.errorbar(x, mean, yerr=yerr, marker=marker, linestyle=linestyle, capsize=3, **kwargs)
    color = drawn.lines[0].get_color()
    single = [(xi, yi) for xi, yi, ni in zip(x, mean, n, strict=True) if ni < 2]
    if single:
        sx, sy = zip(*single, strict=True)
        ax.plot(sx, sy, marker, mfc="white", mec=color, ms=9, linestyle="none", zorder=3)
    return color


def n_label(n: Iterable[int]) -> str:
    """``n=3``, or ``n=1-3`` when the points of a line have different n."""
    values = sorted(set(n))
    if not values:
        return "n=0"
    return f"n={values[0]}" if len(values) == 1 else f"n={values[0]}-{values[-1]}"


def add_one_seed_note(ax: Any) -> None:
    """A legend entry (no data) explaining the hollow markers."""
    ax.plot([], [], "o", mfc="white", mec="black", linestyle="none", label=ONE_SEED_LABEL)


__all__ = [
    "ONE_SEED_LABEL",
    "add_one_seed_note",
    "differing",
    "draw_errorbars",
    "finite",
    "group",
    "mean_sd",
    "n_label",
    "stat_columns",
]
