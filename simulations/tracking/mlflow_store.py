"""MLflow: each run a tracked run (params, per-round metrics, final metrics, tags, artifacts); a sweep,
comparison or reproduction a parent run with one nested child per run.

The store is the tracking URI the user names (``tracking-uri``, else ``$MLFLOW_TRACKING_URI``), else an
embedded SQLite database in the output folder (``<out>/mlflow.db``, artifacts in ``<out>/mlartifacts``):
no server to start. Written through ``mlflow.MlflowClient`` (no fluent API, so nothing global changes in the
process) and ``log_batch`` in MLflow's batch limits.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from simulations.tracking.records import RunRecord

#: MLflow's limits of one ``log_batch`` call, and of a param's value (MLflow 3).
PARAMS_PER_BATCH, METRICS_PER_BATCH, PARAM_CHARS, TAG_CHARS = 100, 1000, 6000, 5000


def store_uri(root: Path, uri: str = "") -> str:
    """The tracking URI a command writes to: ``uri``, else ``$MLFLOW_TRACKING_URI``, else the SQLite store in
    ``root``."""
    return uri or os.environ.get("MLFLOW_TRACKING_URI", "") or f"sqlite:///{(Path(root) / 'mlflow.db').resolve()}"


class MlflowBackend:
    """One command's MLflow writer (see the module docstring)."""

    name = "mlflow"

    def __init__(self, root: Path, uri: str, experiment: str) -> None:
        # A server that does not answer fails in seconds, not after MLflow's minutes of retries (unless the
        # user set these).
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
        from mlflow import MlflowClient

        for logger in ("mlflow", "alembic"):  # the store's set-up lines ("Creating initial MLflow database tables")
            logging.getLogger(logger).setLevel(logging.WARNING)

        self.uri = store_uri(root, uri)
        self.client = MlflowClient(tracking_uri=self.uri)
        found = self.client.get_experiment_by_name(experiment)
        if found is not None:
            self.experiment_id = found.experiment_id
        else:
            local = self.uri.startswith("sqlite:///") and not uri and not os.environ.get("MLFLOW_TRACKING_URI")
            location = (Path(root).resolve() / "mlartifacts").as_uri() if local else None
            self.experiment_id = self.client.create_experiment(experiment, artifact_location=location)
        self.parent: str | None = None

    def start_group(self, name: str, params: Mapping[str, Any], tags: Mapping[str, str]) -> None:
        """Open the parent run of a sweep, comparison or reproduction."""
        run = self.client.create_run(self.experiment_id, run_name=name, tags=_tags(tags))
        self.parent = run.info.run_id
        self._log(self.parent, params=params)

    def log_run(self, record: RunRecord) -> None:
        """One finished run, nested under the open parent if there is one."""
        tags = _tags(record.tags)
        tags["mlflow.note.content"] = record.tags.get("sanitas.guarantee_statement", "")[:TAG_CHARS]
        if self.parent is not None:
            tags["mlflow.parentRunId"] = self.parent
        run_id = self.client.create_run(self.experiment_id, run_name=record.name, tags=tags).info.run_id
        steps = [(step, values) for step, values in record.rounds]
        if record.final:
            steps.append((record.last_round, record.final))
        self._log(run_id, params=record.params, steps=steps)
        for path in record.files:
            self.client.log_artifact(run_id, str(path))
        self.client.set_terminated(run_id, "FAILED" if record.failed else "FINISHED")

    def end_group(self, files: Sequence[Path], ok: bool) -> None:
        """Log the group's tables and plot on the parent run and close it."""
        if self.parent is None:
            return
        for path in files:
            self.client.log_artifact(self.parent, str(path))
        self.client.set_terminated(self.parent, "FINISHED" if ok else "FAILED")
        self.parent = None

    def _log(
        self,
        run_id: str,
        params: Mapping[str, Any] = {},  # noqa: B006 - read only
        steps: Sequence[tuple[int, Mapping[str, float]]] = (),
    ) -> None:
        from mlflow.entities import Metric, Param

        items = [Param(str(k), _text(v)[:PARAM_CHARS]) for k, v in params.items()]
        for start in range(0, len(items), PARAMS_PER_BATCH):
            self.client.log_batch(run_id, params=items[start : start + PARAMS_PER_BATCH])
        now = int(time.time() * 1000)
        metrics = [Metric(k, v, now, step) for step, values in steps for k, v in values.items()]
        for start in range(0, len(metrics), METRICS_PER_BATCH):
            self.client.log_batch(run_id, metrics=metrics[start : start + METRICS_PER_BATCH])


def _text(value: Any) -> str:
    """A param's value as MLflow stores it (text; booleans as TOML spells them)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _tags(tags: Mapping[str, str]) -> dict[str, str]:
    return {k: str(v)[:TAG_CHARS] for k, v in tags.items()}
