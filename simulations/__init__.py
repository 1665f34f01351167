"""The ``sanitas`` CLI, run configs, sweeps, and :func:`run`: one simulation from Python."""

from simulations.runtime.api import RunResult, run

__all__ = ["RunResult", "run"]
