"""What a comparison or a sweep found, on the console: one table of its points and which of them learned
nothing.

A point whose mean accuracy does not beat the majority-class rate of the test users (the accuracy of a
model that always answers the most frequent class) by more than :data:`fl.reporting.outcome.MARGIN` has
learned nothing; where that rate is unknown, a point some of whose runs scored the same after every round
did not move. Both are flagged in the table and named in one warning line, never shown as a result like
the others. (A point above the majority class whose scores stood still did learn: a class-RR pipeline
answers the same way from its first round.)
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

from fl.reporting.outcome import learned


def not_learned(points: Sequence[Mapping[str, Any]], majority: float | None) -> list[Mapping[str, Any]]:
    """The points at or below the majority-class rate, or whose training did not move."""
    return [p for p in points if verdict(p, majority) not in ("yes", "-")]


def verdict(point: Mapping[str, Any], majority: float | None) -> str:
    """``yes``, ``NO: learned nothing`` (not above the majority class), ``NO: training did not move``
    (the majority-class rate unknown, and the scores of some run stood still over its rounds), or ``-``."""
    beats = learned(point.get("accuracy_mean"), majority)
    if beats is False:
        return "NO: learned nothing"
    if beats is None and point.get("training_moved") is False:  # above the majority class, scores may stand
        return "NO: training did not move"
    return "-" if beats is None else "yes"


def _number(value: Any, digits: int = 3) -> str:
    return "-" if value is None or value != value else f"{value:.{digits}f}"


def findings_table(
    points: Sequence[Mapping[str, Any]], majority: float | None, title: str, label: str = "series"
) -> Any:
    """A rich table: the point's name (``label``: its series, or a sweep's grid values), its parameter
    value, the per-user epsilon, seeds, accuracy (mean +- sd), macro-F1 and :func:`verdict`."""
    from rich.table import Table

    rate = "" if majority is None else f" ({majority:.3f})"
    table = Table(title=title, title_justify="left")
    columns = (label, "value", "epsilon", "n", "accuracy", "macro-F1", f"beats the majority class{rate}")
    public = any(p.get("public_only_accuracy") is not None for p in points)
    for name in (*columns, *(("public-only", "gain over public", "adds over public") if public else ())):
        table.add_column(name)
    for p in points:
        sd = p.get("accuracy_sd")
        accuracy = _number(p.get("accuracy_mean")) + (f" +- {sd:.3f}" if sd is not None and sd == sd else "")
        cells = [
            str(p.get("series", "")),
            str(p.get("value", "")),
            _number(p.get("epsilon"), 3),
            str(p.get("n", "")),
            accuracy,
            _number(p.get("macro_f1_mean")),
            verdict(p, majority),
        ]
        if public:
            gain_sd = p.get("gain_over_public_sd")
            gain = _number(p.get("gain_over_public")) + (f" +- {gain_sd:.3f}" if gain_sd is not None else "")
            adds, p_value = p.get("adds_over_public"), p.get("gain_over_public_p")
            tested = f" (p = {p_value:.3f})" if p_value is not None else ""
            cells += [
                _number(p.get("public_only_accuracy")),
                gain,
                "-" if adds is None else ("yes" if adds else "NO: adds nothing over the public data") + tested,
            ]
        table.add_row(*cells)
    return table


def print_findings(
    points: Sequence[Mapping[str, Any]], majority: float | None, title: str, label: str = "series"
) -> list[Mapping[str, Any]]:
    """Print :func:`findings_table` to stdout and, when some point learned nothing, one warning line on
    stderr naming them; returns those points."""
    from rich.console import Console

    Console(width=max(170, Console().width)).print(findings_table(points, majority, title, label))
    flat = not_learned(points, majority)
    nothing = [p for p in points if p.get("adds_over_public") is False and p not in flat]
    if nothing:
        names = ", ".join(str(p.get("name") or f"{p.get('series')} {p.get('value')}".strip()) for p in nothing)
        print(
            f"sanitas: WARNING: {len(nothing)} point(s) do not beat the model fitted on the public data alone beyond "
            f"seed noise, so the private users added nothing there: {names}",
            file=sys.stderr,
            flush=True,
        )
    if flat:
        names = ", ".join(str(p.get("name") or f"{p.get('series')} {p.get('value')}".strip()) for p in flat)
        rate = "" if majority is None else f" {majority:.3f}"
        print(
            f"sanitas: WARNING: {len(flat)} point(s) did not beat the majority-class rate{rate} or did not move, so "
            f"their models learned nothing: {names} (their settings do not suit this data: for central points, "
            "the learning rates, rounds or cohort size; for local points, the epsilon or the recipe)",
            file=sys.stderr,
            flush=True,
        )
    return flat


def mark_not_learned(ax: Any, xs: Sequence[float], ys: Sequence[float]) -> None:
    """Cross out, on a plot, the points that learned nothing (one legend entry): they are drawn where they
    are, never as results like the others."""
    if xs:
        ax.scatter(
            xs, ys, marker="x", s=90, color="crimson", zorder=5, label="learned nothing (not above the majority class)"
        )
