"""What a comparison found, on the console: one table of its points and which of them learned nothing.

A point whose accuracy does not beat the majority-class rate of the test users (the accuracy of a model
that always answers the most frequent class) by more than :data:`MARGIN` has learned nothing: it is
flagged in the table and named in one warning line, never shown as a result like the others.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

#: How far above the majority-class rate a point's mean accuracy must be to count as learned.
MARGIN = 0.005


def learned(accuracy: float | None, majority: float | None) -> bool | None:
    """Whether ``accuracy`` beats the majority-class rate by more than :data:`MARGIN` (None: unknown)."""
    if accuracy is None or majority is None or accuracy != accuracy:
        return None
    return accuracy > majority + MARGIN


def not_learned(points: Sequence[Mapping[str, Any]], majority: float | None) -> list[Mapping[str, Any]]:
    """The points at or below the majority-class rate."""
    return [p for p in points if learned(p.get("accuracy_mean"), majority) is False]


def _number(value: Any, digits: int = 3) -> str:
    return "-" if value is None or value != value else f"{value:.{digits}f}"


def findings_table(points: Sequence[Mapping[str, Any]], majority: float | None, title: str) -> Any:
    """A rich table: series, its parameter value, the per-user epsilon, seeds, accuracy (mean +- sd),
    macro-F1 and whether the point learned (beats the majority-class rate)."""
    from rich.table import Table

    rate = "" if majority is None else f" ({majority:.3f})"
    table = Table(title=title, title_justify="left")
    for name in ("series", "value", "epsilon", "n", "accuracy", "macro-F1", f"beats the majority class{rate}"):
        table.add_column(name)
    for p in points:
        sd = p.get("accuracy_sd")
        accuracy = _number(p.get("accuracy_mean")) + (f" +- {sd:.3f}" if sd is not None and sd == sd else "")
        verdict = {True: "yes", False: "NO: learned nothing", None: "-"}[learned(p.get("accuracy_mean"), majority)]
        table.add_row(
            str(p.get("series", "")),
            str(p.get("value", "")),
            _number(p.get("epsilon"), 3),
            str(p.get("n", "")),
            accuracy,
            _number(p.get("macro_f1_mean")),
            verdict,
        )
    return table


def print_findings(points: Sequence[Mapping[str, Any]], majority: float | None, title: str) -> list[Mapping[str, Any]]:
    """Print :func:`findings_table` to stdout and, when some point learned nothing, one warning line on
    stderr naming them; returns those points."""
    from rich.console import Console

    Console(width=max(120, Console().width)).print(findings_table(points, majority, title))
    flat = not_learned(points, majority)
    if flat:
        names = ", ".join(f"{p.get('series')} {p.get('value')}" for p in flat)
        print(
            f"sanitas: WARNING: {len(flat)} point(s) did not beat the majority-class rate {majority:.3f}, so their "
            f"models learned nothing: {names} (their settings do not suit this data: for central points, the "
            "learning rates, rounds or cohort size)",
            file=sys.stderr,
            flush=True,
        )
    return flat
