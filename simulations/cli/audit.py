"""``sanitas audit CONFIG``: the end-to-end audit of the per-user epsilon a run prints (logic in
:mod:`simulations.analyses.audit_run`); exit 1 when the lower bound eps_LB exceeds it."""

from __future__ import annotations

import argparse
import json
from typing import Any

from simulations.cli.items import add_set_option
from simulations.cli.options import nonnegative_int, open_unit_interval, out_file, positive_int

NAME = "audit"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        NAME,
        help="end-to-end audit of the per-user epsilon a run of CONFIG prints (eps_LB vs printed)",
        description="Run the client's real release code for a canary user many times (fresh node secrets, "
        "every round of the config) and report a Clopper-Pearson lower bound eps_LB on the epsilon the flow "
        "needs, next to the per-user epsilon the run's ledger prints (simulations.analyses.audit_run).",
    )
    p.add_argument("config", help="flat TOML run config (local mode)")
    add_set_option(p, "override a config key (repeatable); values parse as TOML")
    p.add_argument(
        "--level",
        choices=("sentence", "label", "word", "document"),
        default="sentence",
        help="what differs: the whole text, the label, one word, one sentence (default: sentence; word and "
        "document need a run at that level)",
    )
    p.add_argument("--trials", type=positive_int, default=200_000, help="trials per input (default 200000)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="seed of the audit (default 0)")
    p.add_argument("--alpha", type=open_unit_interval, default=0.05, help="1 - confidence (default 0.05)")
    p.add_argument(
        "--tamper",
        choices=("epsilon-3x", "redraw-uncharged", "leaky-map", "unsanitized"),
        default="",
        help="power check: break the flow on purpose (caught when eps_LB > printed; unsanitized: the node "
        "forgets its word or document mechanism)",
    )
    p.add_argument("--out", type=out_file, default=None, help="also write the result as JSON to this file")


def handle(args: argparse.Namespace) -> int:
    """Print eps_LB next to the printed per-user epsilon; exit 1 when eps_LB exceeds it."""
    from simulations.analyses.audit_run import audit_run
    from simulations.runtime.overrides import parse_overrides

    result = audit_run(
        args.config,
        level=args.level,
        trials=args.trials,
        seed=args.seed,
        alpha=args.alpha,
        tamper=args.tamper,
        overrides=parse_overrides(args.sets),
    )
    verdict = "no violation found" if result.passed else "VIOLATION: eps_LB exceeds the printed figure"
    print(
        f"sanitas audit ({result.level} level, {result.rounds} rounds, {result.trials} trials per input"
        f"{', tamper ' + result.tamper if result.tamper else ''}): printed per-user epsilon "
        f"{result.printed_epsilon:.4g}, eps_LB {result.epsilon_lb:.4g} at confidence {1 - result.alpha:.0%}: {verdict}"
    )
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(result.to_dict(), fh, indent=2)
    return 0 if result.passed else 1
