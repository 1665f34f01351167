"""Small result tables: one CSV with every column and the same rows as Markdown, headed by the command."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def markdown_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> list[str]:
    """The rows as Markdown table lines (``None`` as an empty cell)."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    return lines + ["| " + " | ".join("" if r.get(c) is None else str(r[c]) for c in columns) + " |" for r in rows]


def write_table(
    rows: Sequence[Mapping[str, Any]],
    out: Path,
    name: str,
    columns: Sequence[str],
    command: str,
    md_columns: Sequence[str] | None = None,
    notes: Sequence[str] = (),
) -> tuple[Path, Path]:
    """``out/NAME.csv`` (``columns``) and ``out/NAME.md`` (the command, the table of ``md_columns``, ``notes``)."""
    out.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out / f"{name}.csv", out / f"{name}.md"
    with csv_path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(columns), extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    lines = ([f"Command: `{command}`", ""] if command else []) + markdown_table(rows, md_columns or columns)
    md_path.write_text("\n".join([*lines, *notes]) + "\n")
    return csv_path, md_path
