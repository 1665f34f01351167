"""``sanitas compare CONFIG --out DIR``: local DP vs central DP at the same per-user unit (logic in
:mod:`simulations.drivers.compare`). Every flag is checked while the arguments are parsed, by its type beside
its declaration, and the flags that must agree with each other in :func:`handle`, before anything is loaded."""

from __future__ import annotations

import argparse
from typing import Any

from simulations.cli.items import distinct_choices, epsilons, positive_numbers, seed_list, set_item, share_or_auto
from simulations.cli.options import (
    add_attacks_option,
    add_timeout_option,
    add_track_options,
    folder_name,
    out_dir,
    positive_float,
)

NAME = "compare"

#: The config keys compare sets in its runs itself, with what the user gives instead: refused in --set and
#: --central-set while the arguments are parsed.
OWNED = {
    "mode": "compare runs local and central points itself: remove it",
    "central-unit": "compare runs user-level central points (node-level ones with --node-multipliers): remove it",
    "central-noise-multiplier": "compare finds each central point's noise for its --central-epsilons target "
    "(node level: --node-multipliers): remove it",
    "sentence-epsilon": "compare splits each --epsilons budget between the sentence and label mechanisms "
    "(--label-share): remove it",
    "label-epsilon": "compare splits each --epsilons budget between the sentence and label mechanisms "
    "(--label-share): remove it",
    "word-epsilon": "compare sets the word level's epsilon from --epsilons: remove it",
    "document-epsilon": "compare sets the document level's epsilon from --epsilons: remove it",
    "accounting-delta": "compare accounts the local points at the central side's delta: remove it, or set "
    "central-delta",
    "seed": "compare sets seed and noise-seed of every run from --seeds: remove it and use --seeds",
    "noise-seed": "compare sets seed and noise-seed of every run from --seeds: remove it and use --seeds",
    "run-name": "compare names every run: remove it (--name names the comparison's folder)",
    "out-dir": "compare writes into --out: remove it and use --out",
}

#: The keys of the local class-means protocol (simulations.drivers.compare_plan.LOCAL_ONLY), which central runs
#: do not use: refused in --central-set.
LOCAL_ONLY_REASON = "{key} is a local class-means key that central runs do not use: give it with --set"


def _central_owned() -> dict[str, str]:
    from simulations.drivers.compare_plan import LOCAL_ONLY

    return {**OWNED, **{key: LOCAL_ONLY_REASON.format(key=key) for key in LOCAL_ONLY}}


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
        type=epsilons,
        default=[1.0, 3.14, 6.28],
        help="local points: whole-record pure epsilons per user (embedding + label) at the sentence level; the "
        "mechanism's own epsilons (word-, document- or label-epsilon) at the other levels, each with its per-user "
        "figure (simulations.drivers.compare_levels)",
    )
    p.add_argument(
        "--label-share",
        type=share_or_auto,
        default="auto",
        help="the label's share of each local budget: auto (chosen on the public data) or a number in (0, 1)",
    )
    p.add_argument(
        "--label-epsilon",
        type=positive_float,
        default=None,
        help="word and document levels: the labels' epsilon (randomized response unless the config names a label "
        "mechanism; default: the config's, else 2)",
    )
    p.add_argument(
        "--labels-clear",
        action="store_true",
        help="also spend each local budget on the embedding alone, labels in the clear (an embedding-only "
        "series, drawn apart from the whole-record axis)",
    )
    p.add_argument(
        "--central-trains",
        type=distinct_choices(("head", "encoder"), "head,encoder"),
        default=["head"],
        help="what the user-level central runs train: head, encoder, or both (head,encoder): one series each",
    )
    p.add_argument(
        "--central-epsilons",
        type=epsilons,
        default=[0.5, 1.0, 2.0, 4.0, 8.0],
        help="target per-user epsilons of the user-level central runs",
    )
    p.add_argument(
        "--seeds",
        type=seed_list,
        default=[1, 2, 3],
        help="seeds, comma-separated: every run once per seed, with seed AND noise-seed both set to it "
        "(compare.csv: mean and sample sd over seeds, n)",
    )
    p.add_argument(
        "--node-multipliers",
        type=positive_numbers,
        default=[],
        help="node-level central runs at these noise multipliers (optional)",
    )
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        type=set_item(OWNED),
        metavar="KEY=VALUE",
        help="override a config key in every run (repeatable)",
    )
    p.add_argument(
        "--central-set",
        dest="central_sets",
        action="append",
        default=[],
        type=set_item(_central_owned()),
        metavar="KEY=VALUE",
        help="override a config key in the central runs only (e.g. users-per-node=200)",
    )
    p.add_argument("--out", type=out_dir, required=True, help="parent folder; the comparison writes OUT/NAME")
    p.add_argument("--name", type=folder_name, default=None, help="folder name (default: <config stem>-compare)")
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
    add_track_options(p)


def handle(args: argparse.Namespace) -> int:
    """The flags that must agree with each other (before anything is loaded), then
    :func:`simulations.drivers.compare.compare`."""
    from fl.config import ConfigError
    from simulations.drivers.compare import compare
    from simulations.drivers.compare_plan import CompareRequest
    from simulations.runtime.overrides import override_key

    if args.central_trains != ["head"] and any(override_key(i) == "central-train" for i in args.central_sets):
        raise ConfigError("--central-set central-train and --central-trains both set what central runs train: keep one")
    return compare(
        CompareRequest(
            config=args.config,
            totals=args.epsilons,
            targets=sorted(set(args.central_epsilons)),
            seeds=args.seeds,
            out=args.out,
            sets=args.sets,
            central_sets=args.central_sets,
            name=args.name,
            node_multipliers=args.node_multipliers,
            central_trains=args.central_trains,
            label_share=args.label_share,
            labels_clear=args.labels_clear,
            central_check=args.central_check == "on",
            collect=args.collect,
            jobs=args.jobs,
            timeout=args.timeout,
            attacks=args.attacks,
            label_epsilon=args.label_epsilon,
            track=args.track,
            tracking_uri=args.tracking_uri,
        )
    )
