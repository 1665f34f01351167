"""Several resolved ``sanitas run`` configs in one federation (``strategies.points``): what a warm worker
runs for the points of a sweep that share their nodes (``simulations.drivers.sweep``).

The sweep driver resolves each point's config exactly as ``sanitas run`` does
(``simulations.drivers.sweep.resolve_run``) and hands the configs over; all run together
(:func:`simulations.runtime.api.launch_points`) and each writes its own results folder, identical to its
run alone. Which points may share is :func:`simulations.runtime.api.shared_federation`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def run_together(cfgs: Sequence[Mapping[str, Any]]) -> list[int]:
    """Run the resolved configs in one federation; each one's exit code (0: its summary was written)."""
    from simulations.runtime.api import launch_points

    outcomes = launch_points(list(cfgs), verbose=False)
    codes = []
    for cfg, outcome in zip(cfgs, outcomes, strict=True):
        if isinstance(outcome, Path):
            codes.append(0)
        else:
            print(f"sanitas: error: run {cfg['run-name']!r}: {outcome}", flush=True)
            codes.append(1)
    return codes
