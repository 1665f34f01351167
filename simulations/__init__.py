"""The ``sanitas`` CLI, run configs, sweeps, and :func:`run`: one simulation from Python."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simulations.runtime.api import RunResult, run

__all__ = ["RunResult", "run"]


def __getattr__(name: str) -> Any:
    """``simulations.run`` and ``simulations.RunResult``, imported on first use (PEP 562): ``sanitas --help``
    and every subcommand that runs nothing do not import the run's stack."""
    if name in __all__:
        from simulations.runtime import api

        return getattr(api, name)
    raise AttributeError(f"module 'simulations' has no attribute {name!r}")
