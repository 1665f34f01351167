"""The one module that writes tables and plots for every driver (sweep, compare, reproduce, tune) and
analysis (attacks, document reports, PrivEmb errors, the paper tables).

Tables: :func:`write_csv` (one header, rows as dicts, a cell rule per caller), :func:`read_csv`, :func:`read_json`,
:func:`read_jsonl`, :func:`write_jsonl`, :func:`markdown_table` and :func:`write_table` (a CSV with every column and
the same rows as Markdown, headed by the command that wrote them). Plots: :func:`pyplot` (matplotlib on the
file-only Agg backend, so a run on a machine without a display never opens a window) and
:func:`save_figure` (a PNG, the figure closed so a long sweep does not hold every figure in memory).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal


def text_cell(value: Any) -> Any:
    """A cell as a table file spells it: ``None`` empty, booleans ``true``/``false``, lists and dicts as JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        return json.dumps(value)
    return value


def columns_of(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every key of ``rows``, in the order first seen."""
    return list(dict.fromkeys(k for r in rows for k in r))


def write_csv(
    path: Path,
    rows: Iterable[Mapping[str, Any]],
    columns: Sequence[str],
    *,
    cell: Callable[[Any], Any] | None = None,
    extra: Literal["raise", "ignore"] = "raise",
    encoding: str | None = None,
) -> Path:
    """``path``: a header of ``columns`` and one line per row (``cell`` applied to each value; ``None`` is an
    empty cell). A key outside ``columns`` raises ``ValueError`` (``extra = "raise"``) or is left out
    (``"ignore"``); a missing key is an empty cell."""
    with Path(path).open("w", newline="", encoding=encoding) as fh:
        writer = csv.DictWriter(fh, fieldnames=list(columns), extrasaction=extra)
        writer.writeheader()
        writer.writerows(rows if cell is None else ({k: cell(v) for k, v in r.items()} for r in rows))
    return Path(path)


def read_csv(path: Path, encoding: str | None = None) -> list[dict[str, str]]:
    """The rows of a CSV file with a header, as text."""
    with Path(path).open(encoding=encoding) as fh:
        return list(csv.DictReader(fh))


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON document in ``path``, or ``None`` when it is missing or unreadable (a run still writing it)."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of ``path``, one per non-empty line; ``[]`` when the file is missing."""
    path = Path(path)
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> Path:
    """``path``: one JSON object per row (strict JSON: a NaN or infinity raises)."""
    Path(path).write_text("".join(json.dumps(dict(r), allow_nan=False) + "\n" for r in rows))
    return Path(path)


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
    csv_path = write_csv(out / f"{name}.csv", rows, columns, extra="ignore")
    md_path = out / f"{name}.md"
    lines = ([f"Command: `{command}`", ""] if command else []) + markdown_table(rows, md_columns or columns)
    md_path.write_text("\n".join([*lines, *notes]) + "\n")
    return csv_path, md_path


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (files only; imported here, on first use: it takes a second)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path, dpi: int = 120) -> Path:
    """Write ``fig`` to the PNG ``path`` and close it."""
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    return Path(path)
