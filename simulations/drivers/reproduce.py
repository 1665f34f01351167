"""``sanitas reproduce NAME``: run a registered paper reproduction and tabulate it beside the paper.

::

    sanitas reproduce NAME [--seeds 1,2,3] [--set key=value ...] --out DIR [--docs docs/results]
                      [--quick] [--timeout SECONDS]

The reproduction (:mod:`simulations.drivers.reproductions`) is a seeded ``sanitas sweep`` of its config
file under ``simulations/experiments/reproductions/`` over its grid, into ``DIR/NAME`` (resumable: finished
runs are skipped). From the sweep's per-point summary it writes, into the same folder:

* ``reproduction.csv``: one row per point: the series and x values, n, seeds, accuracy and
  macro-F1 mean and sample sd over seeds, the per-user pure epsilon the runs' ledgers printed,
  and the paper's number with our difference where the paper reports that point;
* ``reproduction.md``: the same as a Markdown table, with the citation, the exact command, and
  why our numbers are not expected to equal the paper's;
* ``reproduction.png``: ours (mean +- sd, hollow markers for one-seed points) and the paper's
  numbers (crosses) against the x key; points without an x value (e.g. the non-private
  reference of an epsilon axis) are horizontal lines;
* document-level reproductions (Meehan et al. Figure 4) also get ``sanitas report-documents``'
  ``f1_vs_epsilon.png/.csv`` (macro-F1, with the random-guess line) and ``f1_vs_sentences.png/.csv``
  (macro-F1 by number of sentences at the reproduction's ``by_sentences_at`` epsilon).

``--docs DIR`` also copies these files and ``sweep_summary.csv`` to ``DIR/NAME/``, the
small committed record under ``docs/results``. ``--quick`` runs the tiny grid and sizes the
reproduction declares for CI: it checks the pipeline end to end and measures nothing (its
folder is ``NAME-quick`` and ``--docs`` is refused).
"""

from __future__ import annotations

import json
import math
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from simulations.analyses.doc_report import report as report_documents
from simulations.drivers.grid import parse_seeds
from simulations.drivers.reproductions import Reproduction, get
from simulations.drivers.sweep import sweep
from simulations.outputs import aggregate as agg
from simulations.outputs.writers import pyplot, save_figure, write_csv

COLUMNS: tuple[str, ...] = (
    "series",
    "x",
    "status",
    "n",
    "seeds",
    "accuracy_mean",
    "accuracy_sd",
    "macro_f1_mean",
    "macro_f1_sd",
    "clean_accuracy_mean",
    "public_only_accuracy",
    "gain_over_public",
    "adds_over_public",
    "gain_over_public_p",
    "epsilon",
    "max_user_pure_epsilon_embedding",
    "max_user_pure_epsilon_total",
    "delta_total",
    "word_delta",
    "document_delta_median",
    "N_w_mean",
    "ldp_guarantee_holds",
    "paper",
    "ours_minus_paper",
    "point",
)


def _number(value: Any) -> float | None:
    vals = agg.finite([value])
    return vals[0] if vals else None


def point_x(rep: Reproduction, point: Mapping[str, Any]) -> float | None:
    """The point's x value: the first of ``rep.x_keys`` that it sets to a number."""
    for key in rep.x_keys:
        value = _number(point.get(key))
        if value is not None:
            return value
    return None


def point_series(rep: Reproduction, point: Mapping[str, Any]) -> str:
    """The point's line: the first of ``rep.series_keys`` set to something other than "none";
    "none" when each is "none"; "" when the point sets none of them."""
    values = [str(point[k]) for k in rep.series_keys if point.get(k) is not None]
    return next((v for v in values if v != "none"), values[0] if values else "")


def table(rep: Reproduction, points: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per sweep point (:func:`simulations.drivers.sweep_tables.summarize`), with the paper's number
    for (series, x) when the paper reports it."""
    rows = []
    for p in points:
        series = point_series(rep, p)
        x = point_x(rep, p)
        paper = rep.paper.get((series, x)) if x is not None else None
        mean = p.get(f"{rep.metric}_mean")
        rows.append(
            {
                "series": series,
                "x": x,
                "status": p.get("status"),
                "n": p.get("n"),
                "seeds": p.get("seeds"),
                "accuracy_mean": p.get("accuracy_mean"),
                "accuracy_sd": p.get("accuracy_sd"),
                "macro_f1_mean": p.get("macro_f1_mean"),
                "macro_f1_sd": p.get("macro_f1_sd"),
                "clean_accuracy_mean": p.get("clean_accuracy_mean"),
                # the model fitted on the run's public data alone, on the same test inputs (None: no public data)
                "public_only_accuracy": p.get("public_only_accuracy_mean"),
                "gain_over_public": p.get("gain_over_public_mean"),
                "adds_over_public": p.get("adds_over_public"),
                "gain_over_public_p": p.get("gain_over_public_p"),
                "epsilon": p.get("epsilon"),
                "max_user_pure_epsilon_embedding": p.get("max_user_pure_epsilon_embedding"),
                "max_user_pure_epsilon_total": p.get("max_user_pure_epsilon_total"),
                "delta_total": p.get("delta_total"),
                "word_delta": p.get("word_delta"),
                "document_delta_median": p.get("document_delta_median"),
                "N_w_mean": p.get("N_w_mean"),
                "ldp_guarantee_holds": p.get("ldp_guarantee_holds"),
                "paper": paper,
                "ours_minus_paper": (mean - paper) if paper is not None and mean is not None else None,
                "point": p.get("point"),
            }
        )
    return rows


def _fmt(value: Any, spec: str = ".3f") -> str:
    """A float in format ``spec`` (empty when missing or non-finite); other values as ``str``."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    if isinstance(value, float):
        return format(value, spec)
    return str(value)


def _epsilon_text(r: Mapping[str, Any]) -> str:
    """The per-user figure the runs' ledgers printed: pure epsilon, or (epsilon, delta) when the
    mechanism's guarantee is approximate (delta = 1 is said to be vacuous)."""
    if r["ldp_guarantee_holds"] is False:
        return "not LDP"
    eps = r["max_user_pure_epsilon_total"] or r["max_user_pure_epsilon_embedding"]
    if eps is None:
        return "none"
    delta = r.get("delta_total")
    if not delta:
        return f"{_fmt(eps, '.2f')} (pure)"
    return f"({_fmt(eps, '.2f')}, {delta:.3g})" + (": vacuous" if delta >= 1 else "")


def markdown(rep: Reproduction, rows: Sequence[Mapping[str, Any]], command: str) -> str:
    """The Markdown record: citation, command, the table, the reasons for differences. Word-level
    rows add the per-word delta and N_w (the rate at which a word is left unchanged)."""
    words = any(r.get("word_delta") is not None or r.get("N_w_mean") is not None for r in rows)
    public = any(r.get("public_only_accuracy") is not None for r in rows)
    extra_head = (" per-word delta | N_w |" if words else "") + (" public-only | gain over public |" if public else "")
    lines = [
        f"# {rep.title}",
        "",
        f"Paper: {rep.citation}.",
        "",
        f"Command: `{command}`",
        "",
        f"| {' / '.join(rep.series_keys)} | {' / '.join(rep.x_keys)} | n | {rep.metric} (mean +- sd) | macro-F1 "
        f"| per-user epsilon (delta) |{extra_head} paper | ours - paper |",
        "|---|---|---|---|---|---|" + ("---|---|" if words else "") + ("---|---|" if public else "") + "---|---|",
    ]
    for r in rows:
        sd = f" +- {_fmt(r['accuracy_sd'])}" if r["accuracy_sd"] is not None else " (one seed)"
        acc = f"{_fmt(r['accuracy_mean'])}{sd}" if r["accuracy_mean"] is not None else r["status"]
        # 3 significant digits: a Gaussian's 1e-05 and a near-zero N_w must not print as 0.0000
        extra = f" {_fmt(r.get('word_delta'), '.3g')} | {_fmt(r.get('N_w_mean'), '.3g')} |" if words else ""
        if public:
            flag = " (adds nothing over the public data)" if r.get("adds_over_public") is False else ""
            extra += f" {_fmt(r.get('public_only_accuracy'))} | {_fmt(r.get('gain_over_public'), '+.3f')}{flag} |"
        lines.append(
            f"| {r['series']} | {format(r['x'], 'g') if r['x'] is not None else '-'} | {r['n']} | {acc} "
            f"| {_fmt(r['macro_f1_mean'])} | {_epsilon_text(r)} |{extra} {_fmt(r['paper'], '.4f')} "
            f"| {_fmt(r['ours_minus_paper'])} |"
        )
    if rep.paper_note:
        lines += ["", f"The paper's setting or claim: {rep.paper_note}."]
    if rep.differences:
        lines += ["", "Why ours differs:", "", *(f"- {d}" for d in rep.differences)]
    return "\n".join(lines) + "\n"


def y_range(rep: Reproduction, rows: Sequence[Mapping[str, Any]]) -> tuple[float, float]:
    """The plot's accuracy axis: [0.4, 1] unless a point (mean - sd) or a paper value lies lower.

    0.4 suits binary tasks; a multi-class task's points (AG News, TREC, SST-5 near 0.2-0.3) must stay visible.
    """
    low = min([r["accuracy_mean"] - (r["accuracy_sd"] or 0.0) for r in rows] + list(rep.paper.values()), default=1.0)
    return (0.4 if low >= 0.4 else max(0.0, low - 0.05), 1.0)


def plot(rep: Reproduction, rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Ours (mean +- sd per series) and the paper's numbers against the x key."""
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(8.5, 4.8))
    colors = plt.get_cmap("tab10").colors
    done = [r for r in rows if r["n"] and r["accuracy_mean"] is not None]
    series = list(dict.fromkeys(r["series"] for r in done))
    for i, name in enumerate(series):
        color = colors[i % len(colors)]
        members = sorted((r for r in done if r["series"] == name and r["x"] is not None), key=lambda r: r["x"])
        if members:
            agg.draw_errorbars(
                ax,
                [r["x"] for r in members],
                [r["accuracy_mean"] for r in members],
                [r["accuracy_sd"] for r in members],
                [r["n"] for r in members],
                color=color,
                label=f"ours: {name} ({agg.n_label(r['n'] for r in members)})",
            )
        for r in done:
            if r["series"] == name and r["x"] is None:
                ax.axhline(r["accuracy_mean"], ls="--", color=color, label=f"ours: {name} (n={r['n']})")
        public = sorted(
            (r["x"], r["public_only_accuracy"])
            for r in done
            if r["series"] == name and r["x"] is not None and r.get("public_only_accuracy") is not None
        )
        if public:
            ax.plot(
                [x for x, _ in public],
                [v for _, v in public],
                ".:",
                color=color,
                alpha=0.6,
                label=f"public-only, same test inputs: {name}",
            )
        paper = sorted((x, v) for (s, x), v in rep.paper.items() if s == name)
        if paper:
            ax.plot([x for x, _ in paper], [v for _, v in paper], "x:", color=color, label=f"paper: {name}")
    if any(r["n"] == 1 for r in done):
        agg.add_one_seed_note(ax)
    if rep.log_x:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(" / ".join(rep.x_keys))
    ax.set_ylabel(f"{rep.metric} (sanitized test)")
    ax.set_ylim(*y_range(rep, done))
    ax.set_title(rep.title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    save_figure(fig, path)
    return path


def write_report(rep: Reproduction, sweep_dir: Path, command: str) -> list[Path]:
    """reproduction.csv / .md / .png from ``sweep_dir/sweep_summary.jsonl``."""
    summary = sweep_dir / "sweep_summary.jsonl"
    if not summary.is_file():
        raise FileNotFoundError(f"{summary} not found: the sweep wrote no summary")
    points = [json.loads(line) for line in summary.read_text().splitlines() if line.strip()]
    rows = table(rep, points)
    csv_path = sweep_dir / "reproduction.csv"
    write_csv(csv_path, ({k: r[k] for k in COLUMNS} for r in rows), COLUMNS)  # None: an empty cell
    md_path = sweep_dir / "reproduction.md"
    md_path.write_text(markdown(rep, rows, command))
    paths = [csv_path, md_path, plot(rep, rows, sweep_dir / "reproduction.png")]
    if rep.by_sentences_at is not None:  # document level: macro-F1 by epsilon and by sentences
        report_documents(sweep_dir, rep.by_sentences_at)
        stems = ("f1_vs_epsilon", "f1_vs_sentences")
        paths += [sweep_dir / f"{stem}.{ext}" for stem in stems for ext in ("csv", "png")]
    return paths


def reproduce(
    name: str,
    out: str,
    seeds: str | Sequence[Any] | None = None,
    sets: Sequence[str] = (),
    docs: str | None = None,
    quick: bool = False,
    timeout: float | None = None,
    jobs: int = 1,
    track: Sequence[str] = (),
    tracking_uri: str | None = None,
) -> int:
    """The ``sanitas reproduce`` command; returns 0 when every run finished, 1 otherwise. ``track``: the runs
    and the report logged as one parent with a nested run each (:mod:`simulations.tracking`)."""
    from simulations.runtime.overrides import load_with_overrides
    from simulations.tracking import for_command, track_runs

    rep = get(name)
    if quick and docs:
        raise ValueError("--quick measures nothing: it cannot write to --docs")
    seed_list = parse_seeds(seeds) if seeds is not None else list(rep.seeds)
    blocks = [list(b) for b in (rep.quick_blocks if quick else rep.blocks)]
    all_sets = [*(rep.quick_sets if quick else ()), *sets]
    folder = f"{name}-quick" if quick else name
    tracking = for_command(track, tracking_uri, load_with_overrides(rep.config_path, all_sets), out)
    status = sweep(
        str(rep.config_path),
        blocks,
        all_sets,
        out,
        name=folder,
        timeout=timeout,
        seeds=seed_list,
        jobs=jobs,
        tracked=False,
    )
    invocation = [
        "sanitas reproduce",
        name,
        f"--seeds {','.join(str(s) for s in seed_list)}",
        *(f"--set {s}" for s in sets),
        *(["--quick"] if quick else []),
    ]
    command = " ".join([*invocation, "--out", out])
    sweep_dir = Path(out).expanduser().resolve() / folder
    paths = write_report(rep, sweep_dir, command)
    print(f"sanitas: reproduction tables {', '.join(str(p) for p in paths)}", flush=True)
    if docs:
        target = Path(docs).expanduser() / name
        target.mkdir(parents=True, exist_ok=True)
        # The committed copy names a machine-independent command (the --out folder is arbitrary).
        recipe = " ".join([*invocation, "--out results --docs", docs])
        for path in [*paths, sweep_dir / "sweep_summary.csv"]:
            if path.suffix == ".md":
                (target / path.name).write_text(path.read_text().replace(f"`{command}`", f"`{recipe}`"))
            else:
                shutil.copy2(path, target / path.name)
        print(f"sanitas: copied to {target}", flush=True)
    if tracking is not None:
        folders = sorted(p.parent for p in sweep_dir.glob("*/config.json"))
        track_runs(
            tracking,
            folders,
            folder,
            sweep_dir,
            {"reproduction": name, "command": command},
            {"sanitas.command": "reproduce"},
        )
    if status:
        print("sanitas: some runs did not finish; the tables show what did", file=sys.stderr, flush=True)
    return status
