"""``sanitas reproduce NAME --out DIR``: a registered paper reproduction, run and tabulated beside the
paper (logic in :mod:`simulations.drivers.reproduce`, specs in ``simulations/experiments/reproductions``)."""

from __future__ import annotations

import argparse
from typing import Any

from simulations.cli.items import add_set_option
from simulations.cli.options import add_timeout_option, add_track_options, numbers, out_dir

NAME = "reproduce"


def add_parser(sub: Any) -> None:
    from simulations.drivers.reproductions import REPRODUCTIONS

    p = sub.add_parser(
        NAME,
        help="run a registered paper reproduction (seeded sweep) and tabulate it beside the paper",
        description="Run the seeded sweep of a registered reproduction into OUT/NAME (resumable) and "
        "write reproduction.csv, reproduction.md and reproduction.png there, with the paper's numbers. "
        f"Known: {', '.join(sorted(REPRODUCTIONS))}.",
    )
    p.add_argument("name", help="the reproduction's name")
    p.add_argument(
        "--seeds",
        type=numbers(int, "whole number"),
        default=None,
        help="seeds, comma-separated (default: the reproduction's, 1,2,3)",
    )
    add_set_option(p, "override a config key in every run (repeatable); values parse as TOML")
    p.add_argument("--out", type=out_dir, required=True, help="parent folder; the runs go to OUT/NAME")
    p.add_argument("--docs", type=out_dir, default=None, help="also copy the small tables and plot to DOCS/NAME/")
    p.add_argument("--quick", action="store_true", help="the tiny CI version (checks the pipeline, measures nothing)")
    add_timeout_option(p)
    add_track_options(p)


def handle(args: argparse.Namespace) -> int:
    from simulations.drivers.reproduce import reproduce

    return reproduce(
        args.name,
        args.out,
        args.seeds,
        args.sets,
        docs=args.docs,
        quick=args.quick,
        timeout=args.timeout,
        jobs=args.jobs,
        track=args.track,
        tracking_uri=args.tracking_uri,
    )
