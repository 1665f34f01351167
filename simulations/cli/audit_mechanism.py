"""``sanitas audit-mechanism SPEC``: the full audit of one mechanism against its declared guarantee (logic in
:func:`mechanisms.audit.quick.audit_declared`, the audit a run's check runs in its quick form on every user
mechanism it names); exit 0 when no audit refutes the guarantee, 1 when one does, 2 on bad input."""

from __future__ import annotations

import argparse
from typing import Any

from simulations.cli.options import nonnegative_int, open_unit_interval, positive_float, positive_int

NAME = "audit-mechanism"
#: ``--alpha``'s default: ``mechanisms.audit.quick.QUICK_ALPHA``, the run's check's (written here: the parser
#: imports no torch; tests/simulations/cli/test_audit_mechanism.py checks they agree).
DEFAULT_ALPHA = 1e-3


def option_table(text: str) -> str:
    """``--options``: a TOML inline-table body (``'out_dim = 64, variant = "paper"'``), as ``*-options`` takes."""
    from fl.config.errors import ConfigError
    from fl.config.values import mechanism_options

    try:
        mechanism_options(text, "--options")
    except ConfigError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("--options = ")) from None
    return text


def dimension(text: str) -> int:
    """``--dim``: a whole number >= 2 (a sentence embedding has at least two coordinates)."""
    value = positive_int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 2, got {text!r}")
    return int(value)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        NAME,
        help="audit a mechanism (a user's 'file.py:Class' or 'package.module:Class', or a built-in name) "
        "against its declared epsilon",
        description="Build the mechanism as a run would (--epsilon, --options), draw N releases of each input of "
        "its level's audit pair and print a Clopper-Pearson lower bound on the epsilon the pair needs next to the "
        "epsilon its guarantee declares (mechanisms.audit.quick). Exit 0: no violation found; 1: the bound "
        "exceeds the declared epsilon; 2: bad input.",
    )
    p.add_argument("spec", help="'path/to/file.py:Class', 'package.module:Class' or a registry name")
    p.add_argument("--epsilon", type=positive_float, default=1.0, help="the mechanism's epsilon (default 1)")
    p.add_argument(
        "--options", type=option_table, default="", help="constructor options, TOML: 'out_dim = 64, clip = 2.0'"
    )
    p.add_argument(
        "--level",
        choices=("sentence", "label", "word", "document"),
        default=None,
        help="the level it must work at (default: the class's own)",
    )
    p.add_argument(
        "--samples", type=positive_int, default=10**6, help="releases per input of each audit (default 1000000)"
    )
    p.add_argument("--dim", type=dimension, default=16, help="sentence level: audited besides dimension 2 (default 16)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="seed of the audit (default 0)")
    p.add_argument(
        "--alpha",
        type=open_unit_interval,
        default=DEFAULT_ALPHA,
        help=f"false-refusal rate of the whole audit (default {DEFAULT_ALPHA:g}, as a run's check)",
    )


def handle(args: argparse.Namespace) -> int:
    """Print each audit's lower bound next to the declared epsilon and the verdict; exit 0 pass, 1 fail."""
    import mechanisms
    from fl.config.values import make_mechanism
    from mechanisms.audit.quick import audit_declared, measurable
    from mechanisms.registry import shown

    what = f"{NAME} {shown(args.spec)!r}"
    cls = mechanisms.mechanism_class(args.spec, key=NAME)  # a bad spec: one line, exit 2, before any work
    level = args.level or cls.level or "sentence"  # "none" states its level per instance
    if cls.level and cls.level != level:
        raise ValueError(f"{what} is a {cls.level}-level mechanism, not a {level}-level one: drop --level")
    cfg = {f"{level}-mechanism": args.spec, f"{level}-epsilon": args.epsilon, f"{level}-options": args.options}
    try:
        mech = make_mechanism(cfg, level, input_dim=args.dim if level == "sentence" else None)
        verdict = audit_declared(
            mech, dims=(2, args.dim), samples=(args.samples,), seconds=None, alpha=args.alpha, seed=args.seed
        )
    except ValueError as err:  # its constructor or its sampler refused: say so once, naming it
        text = str(err).replace(f"{level}-options", "--options")  # the option as typed here
        raise ValueError(text if shown(args.spec) in text else f"{what}: {text}") from None
    if verdict.status == "untested":
        raise ValueError(verdict.line(what))
    print(f"{what}: {mech.guarantee.describe()}, audited at confidence {1 - verdict.alpha:.1%} (seed {args.seed})")
    for result in verdict.results:
        at = f"dimension {result.input_dim}" if result.level == "sentence" else f"{result.level} pair"
        ceiling = measurable(result)
        beyond = (
            f"; beyond the {ceiling:.3g} it can measure: try a smaller --epsilon"
            if result.claimed_epsilon is not None and result.claimed_epsilon >= ceiling
            else ""
        )
        print(
            f"  {at}: measured lower bound {result.epsilon_lb:.4g} vs declared epsilon {result.claimed_epsilon:.4g} "
            f"({result.num_samples} releases per input; point estimate {result.epsilon_hat:.4g}{beyond})"
        )
    print(verdict.line(what))
    return 0 if verdict.passed else 1
