"""``sanitas word-survival CONFIG --out DIR``: how large a per-word epsilon keeps words (logic in
:mod:`simulations.analyses.word_survival`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from simulations.cli.options import choices_list, command_line, nonnegative_int, numbers, out_dir, positive_int

NAME = "word-survival"


def add_parser(sub: Any) -> None:
    from simulations.analyses.word_survival import EPSILONS, MECHANISMS

    p = sub.add_parser(
        NAME,
        help="word level: the fraction of words a rewrite keeps (N_w) and ROUGE-1 against per-word epsilon",
        description="Rewrite --docs test documents of CONFIG's dataset once per word mechanism and per-word "
        "epsilon (no model is trained) and write word_survival.csv and word_survival.md.",
    )
    p.add_argument(
        "config", help="a word-level run config (TOML), e.g. simulations/experiments/reproductions/huang2024_sst2.toml"
    )
    p.add_argument("--out", type=out_dir, required=True, help="folder for word_survival.csv / .md")
    p.add_argument("--mechanisms", type=choices_list(MECHANISMS, "word mechanism"), default=",".join(MECHANISMS))
    p.add_argument("--epsilons", type=numbers(float, "number"), default=",".join(f"{e:g}" for e in EPSILONS))
    p.add_argument("--docs", type=positive_int, default=200, help="test documents rewritten per setting")
    p.add_argument("--seed", type=nonnegative_int, default=1)


def handle(args: argparse.Namespace) -> int:
    from fl import config
    from simulations.analyses.word_survival import COLUMNS, NOTES, rows
    from simulations.outputs.writers import write_table

    out = Path(args.out)
    table = rows(
        config.load_toml(args.config),
        args.mechanisms,
        [float(e) for e in args.epsilons.split(",") if e.strip()],
        args.docs,
        args.seed,
    )
    write_table(table, out, "word_survival", COLUMNS, command_line(args), notes=list(NOTES))
    print(f"wrote {out / 'word_survival.csv'} and {out / 'word_survival.md'}")
    return 0
