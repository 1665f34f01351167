"""``sanitas attack RESULTS_DIR``: membership, attribute and inversion attacks on finished runs (logic
in :mod:`simulations.analyses.attack`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from simulations.cli.options import attack_names, existing_dir, nonnegative_int, positive_int

NAME = "attack"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        NAME,
        help="membership, attribute and inversion attacks on a results folder (one run, a sweep or a comparison)",
        description="Rebuild targets from each run's config and attack/state.pt and run the attacks "
        "(simulations.analyses.attack): attacks.json per run; for a folder of runs also attacks.csv and "
        "attacks_vs_epsilon.png. Every result records the attacker knowledge it assumes.",
    )
    p.add_argument("results_dir", type=existing_dir, help="a run folder, or a sweep / comparison folder of runs")
    p.add_argument(
        "--attacks", type=attack_names, default="all", metavar="A1,A2,...", help="mia, lira, attribute, inversion (all)"
    )
    p.add_argument("--targets", type=positive_int, default=1000, help="members and non-members (and victims) per run")
    p.add_argument("--shadows", type=positive_int, default=8, help="LiRA shadow models (default 8)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="seed of the attacks (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON line per run instead of the table")


def handle(args: argparse.Namespace) -> int:
    from simulations.analyses.attack import attack_folder

    if not args.attacks:
        raise ValueError("--attacks names no attack (give mia, lira, attribute, inversion or all)")
    rows = attack_folder(args.results_dir, args.attacks, seed=args.seed, targets=args.targets, shadows=args.shadows)
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    from rich.console import Console

    Console(width=max(120, Console().width)).print(attack_table(rows))
    folder = Path(args.results_dir)
    print(f"sanitas: {folder / 'attacks.csv'} and {folder / 'attacks.md'}; each run's attacks.json has the details")
    return 0


def attack_table(rows: list[dict[str, Any]]) -> Any:
    """The attacks' headline figures, one row per run, each attack beside its chance level."""
    from rich.table import Table

    from simulations.analyses.attack import MD_COLUMNS

    columns = ["run", *(c for c in MD_COLUMNS if any(r.get(c) is not None for r in rows))]
    table = Table(title="sanitas attack", title_justify="left")
    for column in columns:
        table.add_column(column)
    for row in rows:
        value = [row.get(c) for c in columns]
        table.add_row(*("-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v) for v in value))
    return table
