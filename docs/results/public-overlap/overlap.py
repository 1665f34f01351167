"""The overlap between public and private texts under each public split (docs/public-data.md).

    SANITAS_DATA_DIR=../shared/data python docs/results/public-overlap/overlap.py [--out DIR]

Loads each configuration through fl.data (the same code a run uses), reads the overlap every run
reports in summary.json (data.public), and writes overlap.csv and overlap.md into DIR (default
results/public-overlap; ``--out docs/results/public-overlap`` updates the committed copies).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from fl import config
from fl.data import datasets

CASES = [
    ("sst2", "row split, 25% (the former default)", {"public-fraction": 0.25, "public-split": "row"}),
    ("sst2", "source split, 25%", {"public-fraction": 0.25, "public-split": "source"}),
    (
        "sst2",
        "IMDB, 3,000 reviews split into sentences",
        {"public-dataset": "imdb", "public-sentences": True, "public-size": 3000},
    ),
    ("agnews", "row split, 25%", {"public-fraction": 0.25, "public-split": "row"}),
    ("agnews", "source split, 25%", {"public-fraction": 0.25, "public-split": "source"}),
]


def main() -> None:
    parser = argparse.ArgumentParser(description="The overlap between public and private texts per public split.")
    parser.add_argument("--out", default="results/public-overlap")
    out = Path(parser.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for dataset, what, keys in CASES:
        for seed in (1, 2, 3):
            run = config.resolve({"dataset": dataset, "seed": seed, **keys})
            ds = datasets.load(run.data, run.users, run.release.level)
            info = ds.public_info
            private, test = info["overlap_private"], info["overlap_test"]
            rows.append(
                {
                    "dataset": dataset,
                    "public data": what,
                    "seed": seed,
                    "public texts": private["public_texts"],
                    "private texts": private["private_texts"],
                    "exact duplicates": private["exact_duplicates"],
                    "sampled (3+ words)": private["sampled"],
                    "contained": private["contained"],
                    "contained share": round(private["contained_fraction"], 4),
                    "95% interval": " - ".join(f"{v:.4f}" for v in private["contained_interval"]),
                    "contained share, 8+ words": round(private["contained_fraction_8_words"] or 0.0, 4),
                    "test duplicates": test["exact_duplicates"],
                    "test contained share": round(test["contained_fraction"], 4),
                }
            )
    with (out / "overlap.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    head = "| " + " | ".join(rows[0]) + " |\n|" + "---|" * len(rows[0]) + "\n"
    body = "".join("| " + " | ".join(str(v) for v in r.values()) + " |\n" for r in rows)
    command = "SANITAS_DATA_DIR=../shared/data python docs/results/public-overlap/overlap.py --out " + str(out)
    (out / "overlap.md").write_text(f"Written by `{command}`.\n\n{head}{body}")


if __name__ == "__main__":
    main()
