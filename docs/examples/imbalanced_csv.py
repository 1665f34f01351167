"""Write an SMS-like CSV for trying Sanitas on "your own" small, imbalanced data (header ``message,category``,
labels ``ham``/``spam``, 87% ham by default), made of real sentences from the offline SST-2 training split:
positive sentences become ``ham``, negative ones ``spam``. Nothing is copied into the repository: the file
goes where ``--out`` says.

Usage: python docs/examples/imbalanced_csv.py --data-dir ../shared/data --out /tmp/sms_like.csv
       [--rows 5574] [--ham 0.87] [--seed 7]
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import sys
from pathlib import Path

import numpy as np


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--out", required=True)
    parser.add_argument("--rows", type=int, default=5574)  # the size of the UCI SMS Spam Collection
    parser.add_argument("--ham", type=float, default=0.87)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    source = Path(args.data_dir) / "sst2" / "train.jsonl.gz"
    if not source.is_file():
        print(f"imbalanced_csv: {source} not found (--data-dir)", file=sys.stderr)
        return 2
    with gzip.open(source, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    rows = [r for r in rows if len(r["text"].split()) >= 6]  # sentences, not the treebank's phrases
    rng = np.random.default_rng(args.seed)
    n_ham = round(args.rows * args.ham)
    ham = rng.choice([r["text"] for r in rows if r["label"] == 1], n_ham, replace=False)
    spam = rng.choice([r["text"] for r in rows if r["label"] == 0], args.rows - n_ham, replace=False)
    chosen = [(t, "ham") for t in ham] + [(t, "spam") for t in spam]
    with open(args.out, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["message", "category"])
        writer.writerows(chosen[i] for i in rng.permutation(len(chosen)))
    print(f"{args.out}: {len(chosen)} rows, {n_ham} ham ({n_ham / len(chosen):.1%}), {len(chosen) - n_ham} spam")
    return 0


if __name__ == "__main__":
    sys.exit(main())
