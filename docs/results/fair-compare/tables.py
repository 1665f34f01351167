"""The tables of docs/results/fair-compare/README.md, from the comparisons ``run.sh`` wrote.

    python docs/results/fair-compare/tables.py [RESULTS] [--out DIR]   # RESULTS: the --out folder of run.sh (results)

Writes into DIR (default RESULTS/fair-compare-tables); ``--out docs/results/fair-compare`` updates the
committed copies. The committed copies here are read where RESULTS lacks a comparison.

For each comparison (fair-sst2, fair-agnews, fair-sst2-imdb-public) found under RESULTS, copies compare.csv and
compare.json here under the comparison's name and draws compare.png from them; where RESULTS lacks it, reads the
copy already committed here (and leaves its compare.png as it is). Writes tables.md: per local point its
whole-record epsilon, the label's share, accuracy (mean +- sd over seeds), the gap to the non-private
same pipeline and the ceilings; per central point its per-user (epsilon, delta) and accuracy; and per point,
the non-private reference included, the model fitted on the public data alone on the same test inputs
("public-only": the public class + RR on the sanitized inputs of a local point, the public classifier on
the clean inputs of a central one), the gain over it paired per seed and whether the point beats it beyond
seed noise (computed by ``docs/results/public-only-columns.py`` from compare.json).
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

from simulations.drivers.compare_outputs import plot

HERE = Path(__file__).resolve().parent
NAMES = ("fair-sst2", "fair-sst2-imdb-public", "fair-agnews")


def _public_only_module() -> Any:
    """``docs/results/public-only-columns.py`` (its name is not an importable one)."""
    spec = importlib.util.spec_from_file_location("public_only_columns", HERE.parent / "public-only-columns.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


PUBLIC = _public_only_module()


def _f(value: str, digits: int = 3) -> str:
    return "" if value in ("", None) else f"{float(value):.{digits}f}"


def _acc(row: dict[str, str], majority: float | None = None) -> str:
    """Mean +- sd; a point that did not beat the majority-class rate by 0.005 is flagged (it learned nothing)."""
    sd = f" +- {float(row['accuracy_sd']):.3f}" if row["accuracy_sd"] else ""
    flag = " (majority class: did not learn)" if majority and float(row["accuracy_mean"]) <= majority + 0.005 else ""
    return f"{float(row['accuracy_mean']):.3f}{sd}{flag}"


def _public(points: dict[tuple[str, str], dict[str, Any]], row: dict[str, str]) -> str:
    """The public-only, paired gain and flag cells of a compare.csv row."""
    value = row["value"] if row["series"] == "non-private" else str(float(row["value"]))
    point = points.get((row["series"], value))
    cells = PUBLIC.public_cells(point) if point else ("", "", "")
    return " | ".join(cells)


def table(name: str, folder: Path) -> str:
    rows = list(csv.DictReader((folder / "compare.csv").open()))
    doc = json.loads((folder / "compare.json").read_text())
    points = PUBLIC.points(doc)
    ref = next(r for r in rows if r["series"] == "non-private")
    base = float(ref["accuracy_mean"])
    shares = doc.get("label_share", {})
    majority = max(doc["test_class_priors"])
    out = [
        f"### {name}\n",
        f"Non-private same pipeline: {_acc(ref)} (n = {ref['n']}); majority class "
        f"{max(doc['test_class_priors']):.3f}; public classifier's test accuracy per seed "
        f"{', '.join(f'{v:.3f}' for v in doc['public_model_accuracy'].values())}; central delta "
        f"{doc['central_delta']:.3g} for {doc['users']} users.\n",
        "Public-only: the model fitted on the public data alone, on the point's own test inputs (local: the public "
        "class + RR at the test-release epsilon, its expectation over the RR draw; central and non-private: the "
        "public classifier on the clean inputs of the same seed). Gain: mean +- sd over the seeds of the paired "
        "per-seed gains. Beats public-only: a one-sided paired t-test over the seeds' gains (H0: mean gain <= 0) "
        "gives p < 0.05 (and, for a local point, the mean gain is > the RR draw's sd on the test users).\n",
    ]
    out.append(
        "| series | whole-record epsilon per user | label share | accuracy (mean +- sd) | n | gap to non-private "
        "| test release epsilon | ceiling (bound) | public-only: public class + RR | gain over public-only (paired) "
        "| beats public-only beyond seed noise |"
    )
    out.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in sorted(
        (r for r in rows if r["series"].startswith("local-ldp")), key=lambda r: (r["series"], float(r["value"]))
    ):
        share = shares.get(f"{float(r['value']):g}", "") if r["series"] == "local-ldp" else "labels in the clear"
        out.append(
            f"| {r['series']} | {float(r['value']):g} | {share} | {_acc(r, majority)} | {r['n']} | "
            f"{float(r['accuracy_mean']) - base:+.3f} | {_f(r['test_release_epsilon'])} | {_f(r['ceiling_bound'])} | "
            f"{_public(points, r)} |"
        )
    out.append(
        "\n| central | target epsilon | per-user epsilon (delta) | accuracy (mean +- sd) | n | gap to non-private "
        "| public-only: public classifier, clean inputs | gain over public-only (paired) "
        "| beats public-only beyond seed noise |"
    )
    out.append("|---|---|---|---|---|---|---|---|---|")
    for r in sorted((r for r in rows if r["series"].startswith("central")), key=lambda r: float(r["value"])):
        out.append(
            f"| {r['series']} | {float(r['value']):g} | {float(r['epsilon']):.3f} ({float(r['delta']):.3g}) | "
            f"{_acc(r, majority)} | {r['n']} | {float(r['accuracy_mean']) - base:+.3f} | {_public(points, r)} |"
        )
    out.append(
        f"| non-private (same local pipeline, no noise) | none | none | {_acc(ref)} | {ref['n']} | +0.000 | "
        f"{_public(points, ref)} |"
    )
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description="The fair-compare tables from run.sh's comparisons.")
    parser.add_argument("results", nargs="?", default="results", help="the --out folder of run.sh (results)")
    parser.add_argument("--out", default="", help="where to write (default RESULTS/fair-compare-tables)")
    args = parser.parse_args()
    results = Path(args.results)
    out = Path(args.out) if args.out else results / "fair-compare-tables"
    out.mkdir(parents=True, exist_ok=True)
    parts = [
        "Written by `python docs/results/fair-compare/tables.py` from the comparisons of `run.sh` "
        "(from the copies committed here where the results folder lacks them).\n"
    ]
    for name in NAMES:
        folder = results / name
        target = out / name
        if (folder / "compare.csv").is_file():
            target.mkdir(exist_ok=True)
            for file in ("compare.csv", "compare.json"):
                shutil.copy(folder / file, target / file)
            doc = json.loads((folder / "compare.json").read_text())  # the plot, drawn again by today's code
            title = f"{Path(doc['config']).stem}: local vs central DP per user (whole record)"
            plot(doc["points"], target / "compare.png", title, max(doc["test_class_priors"]), "majority class")
        elif (HERE / name / "compare.csv").is_file():
            target = HERE / name  # the committed copy, read where it is
        else:
            parts.append(f"### {name}\n\nnot run.\n")
            continue
        parts.append(table(name, target))
    (out / "tables.md").write_text("\n".join(parts))
    print(f"wrote {out / 'tables.md'}")


if __name__ == "__main__":
    main()
