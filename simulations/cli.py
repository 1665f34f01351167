"""The ``sanitas`` command line.

``sanitas run CONFIG.toml [--set key=value ...] [--out DIR]`` resolves the config
(file, then ``--set`` overrides), checks it and the data before anything is
written, sizes the simulated federation (``users-per-node``) and runs the same
ServerApp and ClientApp as ``flwr run .`` on the configured simulation backend (``backend``:
in this process by default, or Flower's Ray engine), with a quiet console (``--verbose`` for
everything; the whole log is in the run's ``run.log``) and a final summary table.

This module parses arguments and prints; a run goes through
:func:`simulations.api.run` (the Python API), ``key=value`` arguments through
:mod:`simulations.overrides`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from simulations import api
from simulations.overrides import load_with_overrides


def _run(args: argparse.Namespace) -> int:
    """Run ``sanitas run``: the TOML file with ``--set`` applied, through :func:`simulations.api.run`;
    or, with ``--resume DIR``, continue that incomplete run (:func:`simulations.api.resume`)."""
    from simulations.console import print_summary

    if args.resume:
        if args.config or args.sets or args.out:
            raise ValueError("--resume DIR continues a run with its own saved config: give no CONFIG, --set or --out")
        print_summary(api.resume(args.resume, verbose=args.verbose).summary)
        return 0
    if not args.config:
        raise ValueError("sanitas run needs a CONFIG file (or --resume DIR)")
    print_summary(api.run(load_with_overrides(args.config, args.sets), out=args.out, verbose=args.verbose).summary)
    return 0


def _audit(args: argparse.Namespace) -> int:
    """``sanitas audit``: print eps_LB next to the printed per-user epsilon; exit 1 when eps_LB exceeds it."""

    from simulations.audit_run import audit_run
    from simulations.overrides import parse_overrides

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


def _setup_logging() -> None:
    """INFO logs of Sanitas' own packages (Flower configures its own logger)."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s sanitas.%(name)s: %(message)s"))
    for name in ("fl", "clients", "strategies", "simulations", "sanitas"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.INFO)
        for old in [h for h in logger.handlers if getattr(h, "sanitas_cli", False)]:
            logger.removeHandler(old)  # a warm worker calls main() once per point
        handler.sanitas_cli = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
        logger.propagate = False


def _add_set_option(p: argparse.ArgumentParser, help_text: str) -> None:
    """``--set KEY=VALUE`` (repeatable, collected in ``args.sets``): one spelling for every subcommand."""
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE", help=help_text)


def _jobs(text: str) -> int:
    """``--jobs``: a positive number of warm workers."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of workers >= 1, got {text!r}")
    return value


def _add_timeout_option(p: argparse.ArgumentParser) -> None:
    """``--timeout SECONDS`` and ``--jobs N`` of the subcommands that run many points (warm workers,
    :mod:`simulations.warm`)."""
    p.add_argument("--timeout", type=float, default=None, help="seconds before a run is killed and marked failed")
    p.add_argument(
        "--jobs",
        type=_jobs,
        default=1,
        help="points run at once, each in its own warm worker (default 1; more where cores allow)",
    )


def _add_attacks_option(p: argparse.ArgumentParser) -> None:
    """``--attacks mia,lira,...``: attack every finished run afterwards (``simulations.attack``)."""
    p.add_argument(
        "--attacks",
        default="",
        metavar="A1,A2,...",
        help="after the runs, attack each (mia, lira, attribute, inversion; 'all'): attacks.csv and "
        "attacks_vs_epsilon.png next to the accuracy table",
    )


def _attack_list(text: str) -> list[str]:
    from simulations.attack import ATTACKS

    names = [a.strip() for a in text.split(",") if a.strip()]
    return list(ATTACKS) if names == ["all"] else names


def _add_sweep_parser(sub: Any) -> None:
    """The ``sweep`` subcommand (logic in :mod:`simulations.sweep`)."""
    p = sub.add_parser(
        "sweep",
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
        default=None,
        metavar="S1,S2,...",
        help="run every grid point once per seed, with seed AND noise-seed both set to it (as in 'sanitas "
        "compare'; the run name ends in __seed=S); seed or noise-seed in --grid or --set is then an error. "
        "Default: one run per point at the config's own seed and noise-seed",
    )
    _add_set_option(p, "override a config key in every run (repeatable); values parse as TOML")
    p.add_argument("--out", required=True, help="parent folder; the sweep writes OUT/NAME")
    p.add_argument("--name", default=None, help="sweep folder name (default: the config file's stem)")
    _add_attacks_option(p)
    _add_timeout_option(p)


def _sweep(args: argparse.Namespace) -> int:
    """Run ``sanitas sweep``: ``--grid`` specs split into products at each ``--also``."""
    from simulations.sweep import sweep

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
        attacks=_attack_list(args.attacks),
        jobs=args.jobs,
    )


def _add_compare_parser(sub: Any) -> None:
    """The ``compare`` subcommand (logic in :mod:`simulations.compare`)."""
    p = sub.add_parser(
        "compare",
        help="local DP vs central DP at the same per-user unit, on one epsilon axis (plot + CSV + JSON)",
        description="Run local-DP runs (one per sentence epsilon), user-level central-DP runs (one per "
        "target per-user epsilon, noise found by the accountant), optional node-level runs and a "
        "non-private reference from one config, once per seed; write compare.csv, compare.json "
        "and compare.png into OUT/NAME.",
    )
    p.add_argument("config", help="flat TOML file of run-config keys shared by every run")
    p.add_argument("--epsilons", default="2,6,10", help="local sentence epsilons, comma-separated")
    p.add_argument(
        "--central-trains",
        default="head",
        help="what the user-level central runs train: head, encoder, or both (head,encoder): one series each",
    )
    p.add_argument(
        "--central-epsilons", default="0.5,1,2,4,8", help="target per-user epsilons of the user-level central runs"
    )
    p.add_argument(
        "--seeds",
        default="1,2,3",
        help="seeds, comma-separated: every run once per seed, with seed AND noise-seed both set to it "
        "(compare.csv: mean and sample sd over seeds, n)",
    )
    p.add_argument(
        "--node-multipliers", default="", help="node-level central runs at these noise multipliers (optional)"
    )
    _add_set_option(p, "override a config key in every run (repeatable)")
    p.add_argument(
        "--central-set",
        dest="central_sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key in the central runs only (e.g. users-per-node=200)",
    )
    p.add_argument("--out", required=True, help="parent folder; the comparison writes OUT/NAME")
    p.add_argument("--name", default=None, help="folder name (default: <config stem>-compare)")
    p.add_argument(
        "--collect",
        action="store_true",
        help="run nothing: tabulate and plot the runs of this plan already finished in OUT/NAME, "
        "and list the ones missing (a partial comparison, or a peek while one runs)",
    )
    _add_attacks_option(p)
    _add_timeout_option(p)


def _add_reproduce_parser(sub: Any) -> None:
    """The ``reproduce`` subcommand (logic in :mod:`simulations.reproduce`)."""
    from simulations.reproductions import REPRODUCTIONS

    p = sub.add_parser(
        "reproduce",
        help="run a registered paper reproduction (seeded sweep) and tabulate it beside the paper",
        description="Run the seeded sweep of a registered reproduction into OUT/NAME (resumable) and "
        "write reproduction.csv, reproduction.md and reproduction.png there, with the paper's numbers. "
        f"Known: {', '.join(sorted(REPRODUCTIONS))}.",
    )
    p.add_argument("name", help="the reproduction's name")
    p.add_argument("--seeds", default=None, help="seeds, comma-separated (default: the reproduction's, 1,2,3)")
    _add_set_option(p, "override a config key in every run (repeatable); values parse as TOML")
    p.add_argument("--out", required=True, help="parent folder; the runs go to OUT/NAME")
    p.add_argument("--docs", default=None, help="also copy the small tables and plot to DOCS/NAME/")
    p.add_argument("--quick", action="store_true", help="the tiny CI version (checks the pipeline, measures nothing)")
    _add_timeout_option(p)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sanitas", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="run one federated simulation from a TOML config")
    p_run.add_argument("config", nargs="?", default=None, help="flat TOML file of run-config keys (see fl/config.py)")
    _add_set_option(p_run, "override a config key (repeatable); values parse as TOML")
    p_run.add_argument("--out", default=None, help="results parent folder (config key out-dir)")
    p_run.add_argument(
        "--resume",
        default=None,
        metavar="DIR",
        help="continue the incomplete run in results folder DIR from its last completed round",
    )
    p_run.add_argument(
        "--verbose",
        action="store_true",
        help="show Flower's and the libraries' output and every log line on the console (always in run.log)",
    )
    _add_sweep_parser(sub)
    _add_compare_parser(sub)
    _add_reproduce_parser(sub)
    p_audit = sub.add_parser(
        "audit",
        help="end-to-end audit of the per-user epsilon a run of CONFIG prints (eps_LB vs printed)",
        description="Run the client's real release code for a canary user many times (fresh node secrets, "
        "every round of the config) and report a Clopper-Pearson lower bound eps_LB on the epsilon the flow "
        "needs, next to the per-user epsilon the run's ledger prints (simulations.audit_run).",
    )
    p_audit.add_argument("config", help="flat TOML run config (local mode)")
    _add_set_option(p_audit, "override a config key (repeatable); values parse as TOML")
    p_audit.add_argument(
        "--level",
        choices=("sentence", "label", "word", "document"),
        default="sentence",
        help="what differs: the whole text, the label, one word, one sentence (default: sentence; word and "
        "document need a run at that level)",
    )
    p_audit.add_argument("--trials", type=int, default=200_000, help="trials per input (default 200000)")
    p_audit.add_argument("--seed", type=int, default=0, help="seed of the audit (default 0)")
    p_audit.add_argument("--alpha", type=float, default=0.05, help="1 - confidence (default 0.05)")
    p_audit.add_argument(
        "--tamper",
        choices=("epsilon-3x", "redraw-uncharged", "leaky-map", "unsanitized"),
        default="",
        help="power check: break the flow on purpose (caught when eps_LB > printed; unsanitized: the node "
        "forgets its word or document mechanism)",
    )
    p_audit.add_argument("--out", default=None, help="also write the result as JSON to this file")
    p_att = sub.add_parser(
        "attack",
        help="membership, attribute and inversion attacks on a results folder (one run, a sweep or a comparison)",
        description="Rebuild targets from each run's config and attack/state.pt and run the attacks "
        "(simulations.attack): attacks.json per run; for a folder of runs also attacks.csv and "
        "attacks_vs_epsilon.png. Every result records the attacker knowledge it assumes.",
    )
    p_att.add_argument("results_dir", help="a run folder, or a sweep / comparison folder of runs")
    p_att.add_argument("--attacks", default="all", metavar="A1,A2,...", help="mia, lira, attribute, inversion (all)")
    p_att.add_argument("--targets", type=int, default=1000, help="members and non-members (and victims) per run")
    p_att.add_argument("--shadows", type=int, default=8, help="LiRA shadow models (default 8)")
    p_att.add_argument("--seed", type=int, default=0, help="seed of the attacks (default 0)")
    p_doc = sub.add_parser(
        "report-documents",
        help="document level: macro-F1 vs epsilon and vs k (plots + CSV)",
        description="From a sweep folder of document-level runs, write f1_vs_epsilon.png/.csv "
        "and f1_vs_sentences.png/.csv (Meehan et al. Fig. 4), with the "
        "random-guess line.",
    )
    p_doc.add_argument("sweep_dir", help="a folder written by 'sanitas sweep'")
    p_doc.add_argument("--epsilon", type=float, default=10.0, help="epsilon of the k breakdown (default 10)")
    args = parser.parse_args(argv)
    _setup_logging()
    try:
        if args.command == "sweep":
            return _sweep(args)
        if args.command == "report-documents":
            from simulations.doc_report import report

            return report(args.sweep_dir, args.epsilon)
        if args.command == "compare":
            from simulations.compare import compare

            split = lambda text: [v for v in text.split(",") if v.strip()]  # noqa: E731
            return compare(
                args.config,
                split(args.epsilons),
                split(args.central_epsilons),
                split(args.seeds),
                args.sets,
                args.central_sets,
                args.out,
                name=args.name,
                node_multipliers=split(args.node_multipliers),
                central_trains=args.central_trains.split(","),
                timeout=args.timeout,
                collect=args.collect,
                jobs=args.jobs,
                attacks=_attack_list(args.attacks),
            )
        if args.command == "reproduce":
            from simulations.reproduce import reproduce

            return reproduce(
                args.name,
                args.out,
                args.seeds,
                args.sets,
                docs=args.docs,
                quick=args.quick,
                timeout=args.timeout,
                jobs=args.jobs,
            )
        if args.command == "run":
            return _run(args)
        if args.command == "audit":
            return _audit(args)
        if args.command == "attack":
            from simulations.attack import attack_folder

            rows = attack_folder(
                args.results_dir, _attack_list(args.attacks), seed=args.seed, targets=args.targets, shadows=args.shadows
            )
            for row in rows:
                print(json.dumps(row))
            return 0
    except api.RunFailed as err:
        print(f"sanitas: error: {err}", file=sys.stderr)
        return 1
    except (ValueError, FileNotFoundError, FileExistsError) as err:
        message = " ".join(line.strip() for line in str(err).splitlines() if line.strip())  # always one line
        print(f"sanitas: error: {message or type(err).__name__}", file=sys.stderr)
        return 2
    return 0


def entry() -> None:
    """The ``sanitas`` command: :func:`main`, then leave without Python's interpreter teardown.

    Tearing down torch, its compiler stack, datasets and Flower takes about 1.5 s on 2 cores (a
    fifth of the quickstart) and does nothing a finished command needs: every result file is
    written, fsynced and closed by then, warm workers are stopped by their pool, and Ray (when
    used) was shut down by Flower. The streams and the log handlers are flushed first.
    :func:`main` itself returns normally (tests, warm workers and the Python API call it).
    """
    try:
        code = main()
    except SystemExit as exit_:  # argparse's errors (exit code 2) and --help
        code = exit_.code if isinstance(exit_.code, int) else 1
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    entry()
