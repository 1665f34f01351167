"""What a warm worker runs for a driver's points, given their resolved configs (``simulations.drivers.runner``).

The runner resolves each point's config once, exactly as ``sanitas run`` does
(``simulations.drivers.runner.resolve_runs``), and hands the configs over: one point alone
(:func:`run_resolved`: ``sanitas run`` of that config), or several in one federation (:func:`run_together`,
:func:`simulations.runtime.api.launch_points`), each writing its own results folder, identical to its run
alone. Which points may share is :func:`simulations.runtime.api.shared_federation`.
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


def run_resolved(cfg: Mapping[str, Any]) -> int:
    """``sanitas run`` of one resolved config (its console, its summary table, its exit code: 0 done, 1 the run
    failed, 2 refused, 130 interrupted), without resolving it again."""
    from simulations.runtime.api import Interrupted, RunFailed, RunResult, launch
    from simulations.runtime.console import print_summary
    from simulations.runtime.logs import setup_logging

    setup_logging()
    try:
        print_summary(RunResult.from_folder(launch(cfg, verbose=False)).summary)
    except Interrupted as err:
        print(f"sanitas: {err.advice()}", flush=True)
        return 130
    except RunFailed as err:
        print(f"sanitas: error: {err}", flush=True)
        return 1
    except (ValueError, FileNotFoundError, FileExistsError, NotADirectoryError) as err:
        print(f"sanitas: error: {' '.join(str(err).split()) or type(err).__name__}", flush=True)
        return 2
    return 0
