"""``sanitas shuffle-table CONFIG ...``: a sentence-level run's shuffled figures by every bound Sanitas
has (logic in :mod:`simulations.analyses.shuffle_table`). What-if figures: Sanitas has no shuffler."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from simulations.cli.options import command_line, numbers, open_unit_interval, out_dir, positive_int

NAME = "shuffle-table"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        NAME,
        help="shuffled central epsilons of a sentence-level run, by every bound (what-if figures)",
        description="For each sentence epsilon1 (Purkayastha) and n shuffled reports: FMT's and the "
        "variation-ratio bounds, the metric bound at the median distance of the config's users, and the "
        "rounds composed; writes NAME.csv and NAME.md.",
    )
    p.add_argument("configs", nargs="+", help="run configs (TOML) whose M1 sets the median distance")
    p.add_argument(
        "--epsilons", type=numbers(float, "number"), default="1,2,6,10", help="sentence epsilon1 values (Purkayastha)"
    )
    p.add_argument("--n", type=positive_int, default=67_349, help="reports shuffled together (SST-2 training set)")
    p.add_argument("--delta", type=open_unit_interval, default=1e-6, help="target delta (default 1e-6)")
    p.add_argument("--rounds", type=positive_int, default=3, help="fresh-noise rounds composed")
    p.add_argument("--pool", type=positive_int, default=2000, help="users of node 0 whose pairs give the median")
    p.add_argument("--out", type=out_dir, default="docs/results/audits-and-accounting", help="folder for the table")
    p.add_argument("--name", default="shuffle_sst2", help="file name of the table (NAME.csv, NAME.md)")


def handle(args: argparse.Namespace) -> int:
    from simulations.analyses.shuffle_table import median_angle, rows_for, write

    epsilons = [float(e) for e in args.epsilons.split(",") if e.strip()]
    rows: list[dict[str, Any]] = []
    for config in args.configs:
        start = time.perf_counter()
        d01, map_name, pairs = median_angle(config, args.pool)
        rows += rows_for(config, epsilons, args.n, args.delta, args.rounds, d01, map_name)
        took = time.perf_counter() - start
        print(f"{config}: {map_name}, median angle {d01:.4f} rad over {pairs} pairs ({took:.1f}s)")
    command = command_line(args)
    if os.environ.get("SANITAS_DATA_DIR"):
        command = "SANITAS_DATA_DIR=../shared/data " + command
    csv_path, md_path = write(rows, Path(args.out), args.name, command)
    print(md_path.read_text())
    print(f"wrote {csv_path} and {md_path}")
    return 0
