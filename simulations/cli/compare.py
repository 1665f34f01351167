"""``sanitas compare CONFIG --out DIR``: local DP vs central DP at the same per-user unit (logic in
:mod:`simulations.drivers.compare`)."""

from __future__ import annotations

import argparse
from typing import Any

from simulations.cli.options import (
    add_attacks_option,
    add_set_option,
    add_timeout_option,
    numbers,
    out_dir,
)

NAME = "compare"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        NAME,
        help="local DP vs central DP at the same per-user unit, on one epsilon axis (plot + CSV + JSON)",
        description="Run local-DP runs (one per whole-record epsilon, labels protected), user-level "
        "central-DP runs (one per target per-user epsilon, noise found by the accountant), optional "
        "node-level runs and the non-private references from one config, once per seed; write compare.csv, "
        "compare.json and compare.png into OUT/NAME.",
    )
    p.add_argument("config", help="flat TOML file of run-config keys shared by every run")
    p.add_argument(
        "--epsilons",
        default="1,3.14,6.28",
        help="local points: whole-record pure epsilons per user (embedding + label; simulations.drivers.compare)",
    )
    p.add_argument(
        "--label-share",
        default="auto",
        help="the label's share of each local budget: auto (chosen on the public data) or a number in (0, 1)",
    )
    p.add_argument(
        "--labels-clear",
        action="store_true",
        help="also spend each local budget on the embedding alone, labels in the clear (an embedding-only "
        "series, drawn apart from the whole-record axis)",
    )
    p.add_argument(
        "--central-trains",
        default="head",
        help="what the user-level central runs train: head, encoder, or both (head,encoder): one series each",
    )
    p.add_argument(
        "--central-epsilons",
        default="0.5,1,2,4,8",
        help="target per-user epsilons of the user-level central runs",
    )
    p.add_argument(
        "--seeds",
        default="1,2,3",
        help="seeds, comma-separated: every run once per seed, with seed AND noise-seed both set to it "
        "(compare.csv: mean and sample sd over seeds, n)",
    )
    p.add_argument(
        "--node-multipliers",
        type=numbers(float, "number", allow_empty=True),
        default="",
        help="node-level central runs at these noise multipliers (optional)",
    )
    add_set_option(p, "override a config key in every run (repeatable)")
    p.add_argument(
        "--central-set",
        dest="central_sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key in the central runs only (e.g. users-per-node=200)",
    )
    p.add_argument("--out", type=out_dir, required=True, help="parent folder; the comparison writes OUT/NAME")
    p.add_argument("--name", default=None, help="folder name (default: <config stem>-compare)")
    p.add_argument(
        "--collect",
        action="store_true",
        help="run nothing: tabulate and plot the runs of this plan already finished in OUT/NAME, "
        "and list the ones missing (a partial comparison, or a peek while one runs)",
    )
    p.add_argument(
        "--central-check",
        choices=("on", "off"),
        default="on",
        help="on (default): before anything runs, emulate each user-level central point on the central runs' "
        "public data and refuse the points that learn nothing there, naming what to change",
    )
    add_attacks_option(p)
    add_timeout_option(p)


def handle(args: argparse.Namespace) -> int:
    from simulations.drivers.compare import compare
    from simulations.drivers.grid import list_items as items

    return compare(
        args.config,
        items(args.epsilons, "--epsilons"),
        items(args.central_epsilons, "--central-epsilons"),
        items(args.seeds, "--seeds"),
        args.sets,
        args.central_sets,
        args.out,
        name=args.name,
        node_multipliers=items(args.node_multipliers, "--node-multipliers"),
        central_trains=args.central_trains.split(","),
        timeout=args.timeout,
        collect=args.collect,
        jobs=args.jobs,
        attacks=args.attacks,
        label_share=args.label_share,
        labels_clear=args.labels_clear,
        central_check=args.central_check == "on",
    )
