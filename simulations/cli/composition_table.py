"""``sanitas composition-table``: composed per-user figures before and after mechanism-specific
dp-accounting events (logic in :mod:`simulations.analyses.composition_table`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from simulations.cli.options import command_line, out_dir

NAME = "composition-table"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        NAME,
        help="composed per-user epsilons: generic (epsilon, delta) pairs against the mechanisms' own events",
        description="Compose a few users' releases twice (generic dominating pairs; each mechanism's "
        "dp-accounting event) at the same delta, and write composition.csv and composition.md.",
    )
    p.add_argument("--out", type=out_dir, default="docs/results/audits-and-accounting", help="folder for the table")


def handle(args: argparse.Namespace) -> int:
    from simulations.analyses.composition_table import rows, write

    _, md_path = write(rows(), Path(args.out), command_line(args))
    print(md_path.read_text())
    return 0
