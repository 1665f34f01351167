"""Several ``sanitas run`` command lines in one federation (``strategies.points``): what a warm worker
runs for the points of a sweep that share their nodes (``simulations.drivers.sweep``).

Each command line is parsed and resolved exactly as ``sanitas run`` does it, then all run together
(:func:`simulations.runtime.api.launch_points`); each writes its own results folder, identical to its run
alone. Which points may share is :func:`simulations.runtime.api.shared_federation`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


def resolve_command(argv: Sequence[str]) -> Any:
    """The resolved config of ``sanitas run CONFIG [--set K=V ...] [--out DIR]`` (``argv`` without ``sanitas``)."""
    from simulations.cli import parser
    from simulations.runtime.api import resolve_config
    from simulations.runtime.overrides import load_with_overrides

    args = parser().parse_args(list(argv))
    if args.command != "run" or getattr(args, "resume", None):
        raise ValueError(f"only new 'sanitas run' commands share a federation, got {' '.join(argv)!r}")
    return resolve_config(load_with_overrides(args.config, args.sets), out=args.out)


def run_together(argvs: Sequence[Sequence[str]]) -> list[int]:
    """Run the command lines in one federation; each one's exit code (0: its summary was written)."""
    from simulations.runtime.api import launch_points

    outcomes = launch_points([resolve_command(a) for a in argvs], verbose=False)
    codes = []
    for argv, outcome in zip(argvs, outcomes, strict=True):
        if isinstance(outcome, Path):
            codes.append(0)
        else:
            print(f"sanitas: error: {' '.join(argv[:2])} ...: {outcome}", flush=True)
            codes.append(1)
    return codes
