"""``sanitas report-documents SWEEP_DIR``: the document level's macro-F1 against epsilon and against the
number of sentences (Meehan et al. 2022, Figure 4; logic in :mod:`simulations.analyses.doc_report`)."""

from __future__ import annotations

import argparse
from typing import Any

from simulations.cli.options import existing_dir, positive_float

NAME = "report-documents"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        NAME,
        help="document level: macro-F1 vs epsilon and vs k (plots + CSV)",
        description="From a sweep folder of document-level runs, write f1_vs_epsilon.png/.csv "
        "and f1_vs_sentences.png/.csv (Meehan et al. Fig. 4), with the random-guess line.",
    )
    p.add_argument("sweep_dir", type=existing_dir, help="a folder written by 'sanitas sweep'")
    p.add_argument("--epsilon", type=positive_float, default=10.0, help="epsilon of the k breakdown (default 10)")


def handle(args: argparse.Namespace) -> int:
    from simulations.analyses.doc_report import report

    return report(args.sweep_dir, args.epsilon)
