"""``sanitas run CONFIG.toml [--set key=value ...] [--out DIR]``, or ``sanitas run --resume DIR``.

Resolves the config (file, then ``--set`` overrides), checks it and the data before anything is
written, and runs one simulation through :func:`simulations.runtime.api.run` (the Python API) with a quiet
console and a final summary table.
"""

from __future__ import annotations

import argparse
from typing import Any

from simulations.cli.items import add_set_option
from simulations.cli.options import add_track_options, existing_dir, out_dir

NAME = "run"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(NAME, help="run one federated simulation from a TOML config")
    p.add_argument("config", nargs="?", default=None, help="flat TOML file of run-config keys (docs: configuration)")
    add_set_option(p, "override a config key (repeatable); values parse as TOML")
    p.add_argument("--out", type=out_dir, default=None, help="results parent folder (config key out-dir)")
    p.add_argument(
        "--resume",
        type=existing_dir,
        default=None,
        metavar="DIR",
        help="continue the incomplete run in results folder DIR from its last completed round",
    )
    p.add_argument(
        "--verbose",
        action="store_true",
        help="show Flower's and the libraries' output and every log line on the console (always in run.log)",
    )
    add_track_options(p)


def handle(args: argparse.Namespace) -> int:
    """The TOML file with ``--set`` applied, through :func:`simulations.runtime.api.run`; or, with ``--resume
    DIR``, continue that incomplete run (:func:`simulations.runtime.api.resume`)."""
    from simulations.runtime import api
    from simulations.runtime.console import print_summary
    from simulations.runtime.overrides import load_with_overrides

    if args.resume:
        if args.config or args.sets or args.out or args.track or args.tracking_uri:
            raise ValueError(
                "--resume DIR continues a run with its own saved config: give no CONFIG, --set, --out or --track"
            )
        print_summary(api.resume(args.resume, verbose=args.verbose).summary)
        return 0
    if not args.config:
        raise ValueError("sanitas run needs a CONFIG file (or --resume DIR)")
    raw = load_with_overrides(args.config, args.sets)
    if args.track:  # --track adds to the config's own trackers
        from simulations.tracking import names_of

        raw["track"] = ",".join(dict.fromkeys([*names_of(raw.get("track", "")), *args.track]))
    if args.tracking_uri:
        from simulations.tracking.tracker import URI_WITHOUT_MLFLOW, names_of

        if "mlflow" not in names_of(raw.get("track", "")):
            raise ValueError(URI_WITHOUT_MLFLOW)
        raw["tracking-uri"] = args.tracking_uri
    print_summary(api.run(raw, out=args.out, verbose=args.verbose).summary)
    return 0
