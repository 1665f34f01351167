"""Evaluation helpers for the document level, as in Meehan et al. (2022), Figure 4.

``sanitas report-documents SWEEP_DIR`` reads a sweep's ``sweep.jsonl`` (and the
runs' ``summary.json``) and writes into SWEEP_DIR:

* ``f1_vs_epsilon.png`` / ``f1_vs_epsilon.csv``: final test macro-F1 against
  the per-sentence epsilon, one line per (dataset, document mechanism); a
  word-level line (the paper's MDP baseline, ``word-mechanism``) against its
  per-word epsilon, labelled "per word"; the non-private runs of the sweep as
  dashed lines; the random-guess line
  sum_i q_i^2 (q: test label frequencies) dotted.
* ``f1_vs_sentences.png`` / ``f1_vs_sentences.csv``: macro-F1 per bucket of
  the number of sentences k at one epsilon (``--epsilon``, default 10), from
  the runs' final-round ``by_sentences`` scores, with the random-guess line.

A sweep run with ``--seeds`` has several runs per grid point (the rows'
``point``); both tables then hold one row per point (per point and k bucket),
the metrics averaged over its finished seeds: ``macro_f1`` (and the other
scores) is the mean, ``macro_f1_sd`` the sample sd (empty for one seed, then
``one_seed`` is true), ``n`` the number of seeds; the plots draw mean +- sd, a
one-seed point hollow. A sweep without seeds gives n = 1 everywhere.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from simulations.outputs import aggregate as agg
from simulations.outputs.writers import columns_of, pyplot, save_figure, write_csv


def _rows(sweep_dir: Path) -> list[dict[str, Any]]:
    path = sweep_dir / "sweep.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: run 'sanitas sweep' first")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _summary(row: Mapping[str, Any]) -> dict[str, Any]:
    path = Path(str(row.get("results_folder", ""))) / "summary.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def _point(row: Mapping[str, Any]) -> Any:
    """The grid point of a sweep row (its run name in sweeps written before seeds)."""
    return row.get("point") or row.get("run_name") or row.get("results_folder")


def _mean(members: Sequence[Mapping[str, Any]], column: str) -> Any:
    """Mean of a column over a point's runs; the value itself for one run (ints stay ints)."""
    if len(members) == 1:
        return members[0].get(column)
    return agg.mean_sd(m.get(column) for m in members)[0]


def _private(row: Mapping[str, Any]) -> bool:
    """A run with an epsilon on the x axis: document level (per sentence) or word level (per word)."""
    return row.get("level") in ("document", "word") and row.get("epsilon") is not None


def _mechanism(row: Mapping[str, Any]) -> str:
    """The line a run belongs to: its document mechanism, its word mechanism (marked "per word", the
    unit of its epsilon, as the paper's MDP line), or "none" (non-private)."""
    if row.get("level") == "word":
        return f"{row.get('word-mechanism') or row.get('word_mechanism') or 'word'} (per word)"
    if row.get("level") == "document":
        return str(row.get("document_mechanism") or row.get("document-mechanism") or "none")
    return "none"


def _label(row: Mapping[str, Any]) -> str:
    return f"{row.get('dataset') or ''} {_mechanism(row)}".strip()


def _finish(fig: Any, ax: Any, stem: Path, table: Sequence[Mapping[str, Any]]) -> None:
    """Grid, legend outside the axes, ``<stem>.png`` and ``<stem>.csv``."""
    ax.grid(alpha=0.3)
    if table:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    save_figure(fig, stem.with_suffix(".png"))
    write_csv(stem.with_suffix(".csv"), table, columns_of(table), cell=_bool_text)


def _bool_text(value: Any) -> Any:
    """Booleans as ``true``/``false``; every other value as it is."""
    return ("true" if value else "false") if isinstance(value, bool) else value


def f1_vs_epsilon(rows: Sequence[Mapping[str, Any]], out: Path) -> list[dict[str, Any]]:
    """Plot and tabulate macro-F1 (mean +- sd over seeds) against the per-sentence epsilon;
    returns the table rows (one per grid point)."""
    plt = pyplot()

    done = [r for r in rows if r.get("status") == "ok" and r.get("macro_f1") is not None]
    table = []
    for members in agg.group(done, _point).values():
        r = members[0]
        _, f1_sd, n = agg.mean_sd(m["macro_f1"] for m in members)
        table.append(
            {
                "dataset": r.get("dataset"),
                "mechanism": _mechanism(r),
                "epsilon": r.get("epsilon") if _private(r) else None,
                "macro_f1": _mean(members, "macro_f1"),
                "macro_f1_sd": f1_sd,
                "n": n,
                "one_seed": n == 1,
                "seeds": " ".join(str(m["seed"]) for m in members if m.get("seed") is not None),
                "accuracy": _mean(members, "accuracy"),
                "random_guess_f1": _mean(members, "random_guess_f1"),
                "num_projections": r.get("num_projections"),
                "wall_seconds": _mean(members, "wall_seconds"),
                "run_name": " ".join(str(m.get("run_name")) for m in members),
            }
        )
    fig, ax = plt.subplots(figsize=(9, 4.8))
    colors = plt.get_cmap("tab10").colors
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in table:
        groups.setdefault(f"{r['dataset'] or ''} {r['mechanism']}".strip(), []).append(r)
    for i, (label, group) in enumerate(sorted(groups.items())):
        private = sorted((r for r in group if r["epsilon"] is not None), key=lambda r: r["epsilon"])
        if private:
            agg.draw_errorbars(
                ax,
                [r["epsilon"] for r in private],
                [r["macro_f1"] for r in private],
                [r["macro_f1_sd"] for r in private],
                [r["n"] for r in private],
                color=colors[i % 10],
                label=f"{label} ({agg.n_label(r['n'] for r in private)})",
            )
        for r in group:
            if r["epsilon"] is None:
                ax.axhline(
                    r["macro_f1"], linestyle="--", color=colors[i % 10], label=f"{label} (non-private, n={r['n']})"
                )
    if any(r["n"] == 1 for r in table if r["epsilon"] is not None):
        agg.add_one_seed_note(ax)
    guesses = {r["dataset"]: r["random_guess_f1"] for r in table if r["random_guess_f1"] is not None}
    for dataset, value in guesses.items():
        ax.axhline(value, linestyle=":", color="gray", label=f"{dataset or ''} random guess".strip())
    ax.set_xlabel("epsilon per sentence (SentDP); per word for a word-level line")
    ax.set_ylabel("test macro-F1 (sanitized test documents)\nmean +- sd over seeds")
    _finish(fig, ax, out / "f1_vs_epsilon", table)
    return table


BUCKET_SCORES = ("documents", "macro_f1", "clean_macro_f1", "random_guess_f1")


def f1_vs_sentences(rows: Sequence[Mapping[str, Any]], out: Path, epsilon: float = 10.0) -> list[dict[str, Any]]:
    """Plot and tabulate macro-F1 per k bucket at ``epsilon`` (per sentence for document runs, per word
    for word runs; and the non-private runs), the scores of a bucket averaged over the seeds of a grid
    point (``macro_f1_sd``, ``n``)."""
    plt = pyplot()

    chosen = [
        r
        for r in rows
        if r.get("status") == "ok" and (not _private(r) or abs(float(r.get("epsilon") or 0) - epsilon) < 1e-9)
    ]
    table = []
    for members in agg.group(chosen, _point).values():
        r = members[0]
        name = _label(r) + ("" if _private(r) else " (non-private)")
        buckets = [b for m in members for b in (_summary(m).get("final") or {}).get("by_sentences") or []]
        for k, same_k in agg.group(buckets, lambda b: b.get("k")).items():
            _, f1_sd, n = agg.mean_sd(b.get("macro_f1") for b in same_k)
            table.append(
                {
                    "run": name,
                    "epsilon": r.get("epsilon") if _private(r) else None,
                    "k": k,
                    "k_min": same_k[0].get("k_min"),
                    **{c: _mean(same_k, c) for c in BUCKET_SCORES},
                    "macro_f1_sd": f1_sd,
                    "n": n,
                }
            )
    # Buckets in k order on the axis (a run's buckets arrive in its own order; k = 1 exists only for
    # the runs without SentDP, which keep one-sentence documents).
    runs = list(dict.fromkeys(t["run"] for t in table))
    table.sort(key=lambda t: (runs.index(t["run"]), t["k_min"]))
    order = {k: i for i, k in enumerate(dict.fromkeys(t["k"] for t in sorted(table, key=lambda t: t["k_min"])))}
    fig, ax = plt.subplots(figsize=(9, 4.8))
    for name in dict.fromkeys(t["run"] for t in table):
        pts = [t for t in table if t["run"] == name]
        agg.draw_errorbars(
            ax,
            [order[t["k"]] for t in pts],
            [t["macro_f1"] for t in pts],
            [t["macro_f1_sd"] for t in pts],
            [t["n"] for t in pts],
            label=f"{name} ({agg.n_label(t['n'] for t in pts)})",
        )
        ax.plot([order[t["k"]] for t in pts], [t["random_guess_f1"] for t in pts], ":", color="gray")
    ax.set_xticks(list(order.values()), list(order))
    ax.set_xlabel("number of sentences k (bucket)")
    ax.set_ylabel("test macro-F1, mean +- sd over seeds")
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
