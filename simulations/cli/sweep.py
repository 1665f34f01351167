"""``sanitas sweep CONFIG --grid KEY=V1,V2 ... --out DIR``: one run per grid point and seed (logic in
:mod:`simulations.drivers.sweep`)."""

from __future__ import annotations

import argparse
from typing import Any

from simulations.cli.items import add_set_option, grid_spec, seed_list
from simulations.cli.options import add_attacks_option, add_timeout_option, add_track_options, folder_name, out_dir

NAME = "sweep"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        NAME,
        help="one run per point of a grid of config values (and per seed), then tables and a plot",
        description="Run the Cartesian product of --grid values, once per --seeds seed, one 'sanitas run' "
        "process each, into OUT/NAME/<run-name>; write sweep.csv/.jsonl (one row per run), "
        "sweep_summary.csv/.jsonl (one row per grid point: n, mean and sample sd over seeds; "
        "one_seed marks n = 1) and accuracy_vs_epsilon.png (mean +- sd, hollow marker: one seed) "
        "there. Runs with a summary.json are skipped (resume); the runs share the embedding cache.",
    )
    p.add_argument("config", help="flat TOML file of run-config keys shared by every run")
    p.add_argument(
        "--grid",
        dest="grid",
        action="append",
        default=[],
        type=grid_spec,
        metavar="KEY=V1,V2,...",
        help="values of one key (repeatable): split on commas outside quotes and brackets, each "
        'parsed as TOML like --set (quote strings: \'sentence-mechanism="purkayastha","none"\')',
    )
    p.add_argument(
        "--also",
        dest="grid",
        action="append_const",
        const=None,
        help="close the current product of --grid keys and start another; the sweep runs the union",
    )
    p.add_argument(
        "--seeds",
        type=seed_list,
        default=None,
        metavar="S1,S2,...",
        help="run every grid point once per seed, with seed AND noise-seed both set to it (as in 'sanitas "
        "compare'; the run name ends in __seed=S); seed or noise-seed in --grid or --set is then an error. "
        "Default: one run per point at the config's own seed and noise-seed",
    )
    add_set_option(p, "override a config key in every run (repeatable); values parse as TOML")
    p.add_argument("--out", type=out_dir, required=True, help="parent folder; the sweep writes OUT/NAME")
    p.add_argument("--name", type=folder_name, default=None, help="sweep folder name (default: the config file's stem)")
    add_attacks_option(p)
    add_timeout_option(p)
    add_track_options(p)


def handle(args: argparse.Namespace) -> int:
    """``--grid`` specs split into products at each ``--also``, then :func:`simulations.drivers.sweep.sweep`."""
    from simulations.drivers.sweep import sweep

    blocks: list[list[str]] = [[]]
    for spec in args.grid:
        if spec is None:
            blocks.append([])
        else:
            blocks[-1].append(spec)
    return sweep(
        args.config,
        blocks,
        args.sets,
        args.out,
        name=args.name,
        timeout=args.timeout,
        seeds=args.seeds,
        attacks=args.attacks,
        jobs=args.jobs,
        track=args.track,
        tracking_uri=args.tracking_uri,
    )
