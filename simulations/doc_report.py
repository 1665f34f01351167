"""Evaluation helpers for the document level, as in Meehan et al. (2022), Figure 4.

``sanitas report-documents SWEEP_DIR`` reads a sweep's ``sweep.jsonl`` (and the
runs' ``summary.json``) and writes into SWEEP_DIR:

* ``f1_vs_epsilon.png`` / ``f1_vs_epsilon.csv``: final test macro-F1 against
  the per-sentence epsilon, one line per (dataset, document mechanism); the
  non-private runs of the sweep as dashed lines; the random-guess line
  sum_i q_i^2 (q: test label frequencies) dotted.
* ``f1_vs_sentences.png`` / ``f1_vs_sentences.csv``: macro-F1 per bucket of
  the number of sentences k at one epsilon (``--epsilon``, default 10), from
  the runs' final-round ``by_sentences`` scores, with the random-guess line.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def _rows(sweep_dir: Path) -> list[dict[str, Any]]:
    path = sweep_dir / "sweep.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: run 'sanitas sweep' first")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _summary(row: Mapping[str, Any]) -> dict[str, Any]:
    path = Path(str(row.get("results_folder", ""))) / "summary.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def _label(row: Mapping[str, Any]) -> str:
    return f"{row.get('dataset') or ''} {row.get('document_mechanism') or 'none'}".strip()


def _write_csv(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    fields = list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def _finish(fig: Any, ax: Any, stem: Path, table: Sequence[Mapping[str, Any]]) -> None:
    """Grid, legend outside the axes, ``<stem>.png`` and ``<stem>.csv``."""
    import matplotlib.pyplot as plt

    ax.grid(alpha=0.3)
    if table:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(stem.with_suffix(".png"), dpi=120)
    plt.close(fig)
    _write_csv(stem.with_suffix(".csv"), table)


def f1_vs_epsilon(rows: Sequence[Mapping[str, Any]], out: Path) -> list[dict[str, Any]]:
    """Plot and tabulate macro-F1 against the per-sentence epsilon; returns the table rows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = [r for r in rows if r.get("status") == "ok" and r.get("macro_f1") is not None]
    table = [
        {
            "dataset": r.get("dataset"),
            "mechanism": r.get("document_mechanism") or "none",
            "epsilon": r.get("epsilon") if r.get("level") == "document" else None,
            "macro_f1": r["macro_f1"],
            "accuracy": r.get("accuracy"),
            "random_guess_f1": r.get("random_guess_f1"),
            "num_projections": r.get("num_projections"),
            "wall_seconds": r.get("wall_seconds"),
            "run_name": r.get("run_name"),
        }
        for r in done
    ]
    fig, ax = plt.subplots(figsize=(9, 4.8))
    colors = plt.get_cmap("tab10").colors
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in table:
        groups.setdefault(f"{r['dataset'] or ''} {r['mechanism']}".strip(), []).append(r)
    for i, (label, group) in enumerate(sorted(groups.items())):
        private = sorted((r for r in group if r["epsilon"] is not None), key=lambda r: r["epsilon"])
        if private:
            ax.plot(
                [r["epsilon"] for r in private],
                [r["macro_f1"] for r in private],
                "o-",
                color=colors[i % 10],
                label=label,
            )
        for r in group:
            if r["epsilon"] is None:
                ax.axhline(r["macro_f1"], linestyle="--", color=colors[i % 10], label=f"{label} (non-private)")
    guesses = {r["dataset"]: r["random_guess_f1"] for r in table if r["random_guess_f1"] is not None}
    for dataset, value in guesses.items():
        ax.axhline(value, linestyle=":", color="gray", label=f"{dataset or ''} random guess".strip())
    ax.set_xlabel("epsilon per sentence (SentDP)")
    ax.set_ylabel("test macro-F1 (sanitized test documents)")
    _finish(fig, ax, out / "f1_vs_epsilon", table)
    return table


def f1_vs_sentences(rows: Sequence[Mapping[str, Any]], out: Path, epsilon: float = 10.0) -> list[dict[str, Any]]:
    """Plot and tabulate macro-F1 per k bucket at ``epsilon`` (and of the non-private runs)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chosen = [
        r
        for r in rows
        if r.get("status") == "ok"
        and (r.get("level") != "document" or abs(float(r.get("epsilon") or 0) - epsilon) < 1e-9)
    ]
    table = []
    for r in chosen:
        name = _label(r) + ("" if r.get("level") == "document" else " (non-private)")
        for b in (_summary(r).get("final") or {}).get("by_sentences") or []:
            table.append(
                {
                    "run": name,
                    "epsilon": r.get("epsilon") if r.get("level") == "document" else None,
                    **{
                        k: b.get(k)
                        for k in ("k", "k_min", "documents", "macro_f1", "clean_macro_f1", "random_guess_f1")
                    },
                }
            )
    fig, ax = plt.subplots(figsize=(9, 4.8))
    for name in dict.fromkeys(t["run"] for t in table):
        pts = [t for t in table if t["run"] == name]
        ax.plot([t["k"] for t in pts], [t["macro_f1"] for t in pts], "o-", label=name)
        ax.plot([t["k"] for t in pts], [t["random_guess_f1"] for t in pts], ":", color="gray")
    ax.set_xlabel("number of sentences k (bucket)")
    ax.set_ylabel("test macro-F1")
    ax.set_title(f"macro-F1 by document length at epsilon = {epsilon:g} (dotted: random guess per bucket)", fontsize=9)
    _finish(fig, ax, out / "f1_vs_sentences", table)
    return table


def report(sweep_dir: str | Path, epsilon: float = 10.0) -> int:
    """Write both plots and tables for a sweep folder; returns 0."""
    folder = Path(sweep_dir)
    rows = _rows(folder)
    by_eps = f1_vs_epsilon(rows, folder)
    by_k = f1_vs_sentences(rows, folder, epsilon)
    print(
        f"sanitas: {len(by_eps)} runs -> {folder / 'f1_vs_epsilon.png'}; "
        f"{len(by_k)} (run, k) points -> {folder / 'f1_vs_sentences.png'}"
    )
    return 0


__all__ = ["f1_vs_epsilon", "f1_vs_sentences", "report"]
