"""The ``sanitas`` CLI, run configs, sweeps, and :func:`run`: one simulation from Python."""

from simulations.api import RunResult, run

__all__ = ["RunResult", "run"]
