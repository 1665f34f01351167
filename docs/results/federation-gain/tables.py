"""The tables and the figure of docs/results/federation-gain/README.md, from the comparisons ``run.sh`` wrote.

    python docs/results/federation-gain/tables.py [RESULTS]   # RESULTS: the folder run.sh wrote into (results)

For each comparison of ``run.sh`` that has finished in RESULTS, copies its compare.csv, compare.json and
compare.png here under the comparison's name; a comparison RESULTS lacks is read from its copy here (the
committed one). Then writes ``tables.md`` (per point: the test inputs, accuracy, the model fitted on the
public data alone on the same inputs, the gain over it paired per seed, and whether it beats public-only
beyond seed noise; the noise-free ceiling where the comparison recorded one) and ``gain_over_public.png``
(the gain against the per-user epsilon, one panel per comparison, error bars the sd of the paired gains over
the seeds). A comparison found in neither place stops it, in one line, before anything is written.

Comparisons run before ``sanitas compare`` wrote the ``local-shuffled-on-device`` series get it here from
their own rows: the epsilon and delta of ``local-shuffled`` (the shuffled whole-record figure, at the runs'
``accounting-delta`` of 1e-6, below the central side's delta: a smaller delta, so a stronger statement than one
at the central delta) with the accuracy and the paired gains of ``local-ldp-on-device`` (the same runs).
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import sys
from pathlib import Path

from simulations.outputs.gain_tables import plot, table, with_shuffled_on_device

HERE = Path(__file__).resolve().parent
#: (folder name, what it is), in the order of the README.
COMPARISONS = (
    ("sst2-public200", "SST-2, 200 public texts (whole source groups)"),
    ("sst2-public200-sentences", "SST-2, 200 public texts, one user per review sentence (user-unit = source)"),
    ("sst2-public2000", "SST-2, 2,000 public texts"),
    ("sst2-public25pct", "SST-2, 25% of the training split public (by source)"),
    ("sst2-imdb-public", "SST-2, IMDB sentences as public data"),
    ("agnews-public200", "AG News, 200 public items"),
    ("agnews-public25pct", "AG News, 25% public"),
    ("sst2-public200-lora", "SST-2, 200 public texts, LoRA encoder trained centrally"),
    ("sst2-public200-cohorts", "SST-2, 200 public texts, two disjoint cohorts"),
)


def sources(results: Path) -> dict[str, Path]:
    """Each comparison's folder: the one in ``results`` where it has finished, else its committed copy here. Exits,
    in one line and before anything is written, when a comparison is in neither (so a partial results folder never
    replaces a committed table by nothing)."""
    out, missing = {}, []
    for name, _ in COMPARISONS:
        for folder in (results / name, HERE / name):
            if (folder / "compare.csv").is_file() and (folder / "compare.json").is_file():
                out[name] = folder
                break
        else:
            missing.append(name)
    if missing:
        where = f"in {results} nor in {HERE}: nothing written (run them with run.sh)"
        sys.exit(f"tables.py: no compare.csv and compare.json for {', '.join(missing)} {where}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="The federation-gain tables and figure from run.sh's comparisons.")
    parser.add_argument("results", nargs="?", default="results", help="the folder run.sh wrote into (results)")
    parser.add_argument(
        "--out",
        default="",
        help="where to write tables.md, gain_over_public.png and the comparisons' copies (default: "
        "RESULTS/federation-gain-tables; the committed copies: --out docs/results/federation-gain)",
    )
    args = parser.parse_args()
    results = Path(args.results)
    out = Path(args.out) if args.out else results / "federation-gain-tables"
    folders = sources(results)
    out.mkdir(parents=True, exist_ok=True)
    parts = ["Written by `python docs/results/federation-gain/tables.py` from the comparisons of `run.sh`.\n"]
    found = []
    for name, title in COMPARISONS:
        folder, target = folders[name], out / name
        if folder.resolve() != target.resolve():
            target.mkdir(exist_ok=True)
            for file in ("compare.csv", "compare.json", "compare.png"):
                if (folder / file).is_file():
                    shutil.copyfile(folder / file, target / file)
        print(f"{name}: {'copied from ' + str(folder) if folder.resolve() != target.resolve() else 'the copy here'}")
        rows = with_shuffled_on_device(list(csv.DictReader((target / "compare.csv").open())))
        doc = json.loads((target / "compare.json").read_text())
        parts.append(table(name, title, rows, doc))
        found.append((name, title, rows))
    (out / "tables.md").write_text("\n".join(parts))
    plot(found, out / "gain_over_public.png")
    print(f"wrote {out / 'tables.md'} and {out / 'gain_over_public.png'}")


if __name__ == "__main__":
    main()
