"""``sanitas tune CONFIG --epsilons E,... --out DIR``: the local-DP recipe for each whole-record budget,
chosen on public data only (logic in :mod:`simulations.drivers.tune` and :mod:`fl.maps.recipes`)."""

from __future__ import annotations

import argparse
from typing import Any

from simulations.cli.items import add_set_option
from simulations.cli.options import add_track_options, epsilon_list, out_dir

NAME = "tune"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        NAME,
        help="choose mechanism, map and label/embedding budget split per epsilon on PUBLIC data only",
        description="For each whole-record pure epsilon per user, score the candidate recipes (M1, sentence "
        "mechanism, the label's share of the budget) by emulating the run on the public documents only "
        "(never the private users or the test split), and write tune.csv, tune.json and one config per "
        "epsilon into OUT.",
    )
    p.add_argument(
        "config", help="flat TOML file of run-config keys (needs public-size, public-fraction or public-dataset)"
    )
    p.add_argument(
        "--epsilons",
        "--epsilon",
        dest="epsilons",
        type=epsilon_list,
        required=True,
        help="whole-record pure epsilons per user, like 3.14,6.28 (--epsilon E for one)",
    )
    p.add_argument(
        "--recipes",
        choices=("default", "class-means"),
        default="default",
        help="the grid: 'default' (the public-class release, PrivUnit and Purkayastha on the supervised map, scored "
        "on sanitized hold-out inputs) or 'class-means' (PrivUnit on the public projection of m' = 8..64, the "
        "server's debiased class means, scored on clean hold-out inputs: on-device inference)",
    )
    add_set_option(p, "override a config key (repeatable)")
    p.add_argument("--out", type=out_dir, required=True, help="folder for tune.csv, tune.json and the configs")
    add_track_options(p)


def handle(args: argparse.Namespace) -> int:
    from simulations.drivers.tune import tune

    return tune(args.config, args.epsilons, args.sets, args.out, args.recipes, args.track, args.tracking_uri)
