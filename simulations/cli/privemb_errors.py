"""``sanitas privemb-errors --out DIR``: distance and inner-product errors of PrivEmb against
full-dimensional noise (Feyisetan & Kasiviswanathan 2021, §5.1-5.2; logic in
:mod:`simulations.analyses.privemb_errors`)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from simulations.cli.options import choices_list, command_line, nonnegative_int, numbers, out_dir, positive_int

NAME = "privemb-errors"


def add_parser(sub: Any) -> None:
    from simulations.analyses.privemb_grid import BETAS, EPSILONS, SOURCES

    p = sub.add_parser(
        NAME,
        help="PrivEmb vs full-dimensional noise: distance and inner-product errors (errors.csv/.md/.png)",
        description="PrivEmb vs full-dimensional noise: distance and inner-product errors (Feyisetan & "
        "Kasiviswanathan 2021, §5.1-5.2).",
    )
    p.add_argument("--out", type=out_dir, required=True, help="output folder (errors.csv, errors.md, errors.png)")
    p.add_argument(
        "--seeds",
        type=numbers(int, "whole number"),
        default="1,2,3",
        help="comma-separated seeds (Phi and noise), at least 2 for an sd",
    )
    p.add_argument("--quick", action="store_true", help="tiny run for tests: 20 x 20 pairs, a 1000-word domain")
    p.add_argument(
        "--sources",
        type=choices_list(tuple(SOURCES), "source"),
        default="glove,sentences",
        help=f"comma-separated, from {', '.join(SOURCES)}",
    )
    p.add_argument("--epsilons", type=numbers(float, "number"), default=",".join(f"{e:g}" for e in EPSILONS))
    p.add_argument("--betas", type=numbers(float, "number"), default=",".join(f"{b:g}" for b in BETAS))
    p.add_argument(
        "--n-side", type=positive_int, default=None, help="points per side of the pair grid (default 100; quick 20)"
    )
    p.add_argument("--pair-seed", type=nonnegative_int, default=0, help="seed of the fixed point sample")
    p.add_argument(
        "--vocab", type=positive_int, default=None, help="glove: most frequent words used (default 5000; quick 1000)"
    )
    p.add_argument("--dataset", default="sst2", help="sentences: staged dataset (its test split)")
    p.add_argument("--data-dir", default="/work/shared/data", help="sentences: folder of staged datasets")
    p.add_argument("--synthetic-dim", type=positive_int, default=300, help="synthetic: dimension d")


def handle(args: argparse.Namespace) -> int:
    from simulations.analyses import privemb_errors as pe
    from simulations.analyses import privemb_report as pr

    t_start = time.perf_counter()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    epsilons, betas = pe.parse_floats(args.epsilons), pe.parse_floats(args.betas)
    if not args.sources:
        raise ValueError(f"--sources names no source; choose from {', '.join(pe.SOURCES)}")
    n = args.n_side or (20 if args.quick else 100)
    vocab = args.vocab or (1000 if args.quick else 5000)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def log(msg: str) -> None:
        print(msg, flush=True)

    sources = []
    for name in args.sources:
        t0 = time.perf_counter()
        if name == "glove":
            src = pe.glove_source(n, vocab, args.pair_seed)
        elif name == "sentences":
            src = pe.sentence_source(n, args.dataset, args.data_dir, args.pair_seed)
        else:
            src = pe.synthetic_source(n, args.synthetic_dim, args.pair_seed)
        log(f"{name}: {src.description} ({time.perf_counter() - t0:.1f} s)")
        sources.append(src)

    rows = [r for src in sources for r in pe.run_source(src, epsilons, betas, seeds, log)]
    aggs = pe.aggregate(rows)
    claims = pe.evaluate_claims(aggs, args.sources, epsilons, betas)
    meta = {
        "command": command_line(args),
        "seeds": ",".join(map(str, seeds)),
        "pair_seed": args.pair_seed,
        "epsilons": epsilons,
        "betas": betas,
        "quick": args.quick,
        "wall_s": time.perf_counter() - t_start,
        "notes": pr.table_notes(aggs, sources, betas),
    }
    pr.write_csv(aggs, out / "errors.csv")
    pr.write_markdown(aggs, claims, sources, meta, out / "errors.md")
    pr.plot(aggs, args.sources, epsilons, out / "errors.png")
    for c in claims:
        log(f"{c['verdict']:>14}  {c['source']:<9} {c['mechanism']:<13} {c['claim']}  [{c['test']}]")
    log(f"wrote {out / 'errors.csv'}, errors.md, errors.png ({time.perf_counter() - t_start:.0f} s)")
    return 0
