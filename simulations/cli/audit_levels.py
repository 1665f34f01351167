"""``sanitas audit-levels``: the end-to-end audit at every level, as one table (logic in
:mod:`simulations.analyses.audit_levels`)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from simulations.cli.options import command_line, nonnegative_int, out_dir

NAME = "audit-levels"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        NAME,
        help="the end-to-end audit of every level (honest and power-check rows) as one table",
        description="Run the end-to-end audit on a small config of each level, honest and with each power "
        "check, and write audit_levels.csv and audit_levels.md (reads SST-2 and AG News from "
        "SANITAS_DATA_DIR).",
    )
    p.add_argument("--out", type=out_dir, default="docs/results/audits-and-accounting", help="folder for the table")
    p.add_argument("--quick", action="store_true", help="a tenth of the trials (smoke run)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="seed of the audits (default 0)")


def handle(args: argparse.Namespace) -> int:
    from simulations.analyses.audit_levels import run_rows, write

    if not os.environ.get("SANITAS_DATA_DIR"):
        raise ValueError("set SANITAS_DATA_DIR (e.g. ../shared/data): the configs read SST-2 and AG News")
    command = "SANITAS_DATA_DIR=../shared/data " + command_line(args)
    csv_path, md_path = write(run_rows(args.quick, args.seed), Path(args.out), command)
    print(f"wrote {csv_path} and {md_path}")
    return 0
