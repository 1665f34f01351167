"""Experiment tracking: finished runs logged to MLflow, TensorBoard or Weights & Biases.

``--track mlflow|tensorboard|wandb`` (repeatable) on ``sanitas run``, ``sweep``, ``compare``, ``tune`` and
``reproduce``, or ``track = "mlflow, tensorboard"`` in the run config. A tracker reads each run's folder after
the run (:mod:`simulations.tracking.records`), so it sees exactly what the run wrote and can never change it;
a sweep, comparison or reproduction is one parent with a nested run per point and seed. Walk-through:
docs/tracking.md.
"""

from simulations.tracking.records import RunRecord
from simulations.tracking.tracker import (
    TRACKERS,
    Tracker,
    Tracking,
    for_command,
    names_of,
    requested,
    track_record,
    track_runs,
    unavailable,
)

__all__ = [
    "TRACKERS",
    "RunRecord",
    "Tracker",
    "Tracking",
    "for_command",
    "names_of",
    "requested",
    "track_record",
    "track_runs",
    "unavailable",
]
