"""``sanitas init-config FILE [--out CONFIG.toml] [--text-column C] [--label-column C] [--force]``: a
starting run config for your own data file (logic in :mod:`simulations.drivers.init_config`)."""

from __future__ import annotations

import argparse
from typing import Any

from simulations.cli.options import out_file

NAME = "init-config"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        NAME,
        help="write a starting run config for your own CSV, JSON Lines or Parquet file",
        description="Read FILE's columns and label counts, guess its text and label columns (or take "
        "--text-column and --label-column), and write a commented run config: the columns, the class names "
        "in class-id order, a seeded test and public split, a local-DP recipe sized to the data, the "
        "majority-class rate a result must beat, and the next commands (docs/own-data.md).",
    )
    p.add_argument("file", help="your data file: .csv, .jsonl (.json) or .parquet, optionally .csv.gz / .jsonl.gz")
    p.add_argument(
        "--out",
        type=out_file,
        default=None,
        metavar="CONFIG.toml",
        help="the config to write (default: <FILE stem>.toml)",
    )
    p.add_argument("--text-column", default=None, help="the text column (comma-separated: joined); default: guessed")
    p.add_argument("--label-column", default=None, help="the label column; default: guessed")
    p.add_argument("--force", action="store_true", help="overwrite --out when it exists")


def handle(args: argparse.Namespace) -> int:
    """Write the config and say what was found; bad input is one line ``sanitas: error: init-config: ...``
    (exit 2, from :func:`simulations.cli.main`)."""
    from simulations.drivers.init_config import InitConfigError, init_config

    try:
        target, summary = init_config(args.file, args.out, args.text_column, args.label_column, args.force)
    except InitConfigError as err:
        raise InitConfigError(f"{NAME}: {err}") from None
    name, rate = summary.majority
    classes = ", ".join(f"{n} {summary.counts[n]:,}" for n in summary.names)
    print(f"wrote {target}: {summary.rows:,} rows, text-column {summary.text_column!r}, label-column", end=" ")
    print(repr(summary.label_column))
    print(f"classes: {classes}; always answering {name!r} scores {rate:.3f}: a result must beat that")
    print(f"next: sanitas run {target}")
    return 0
