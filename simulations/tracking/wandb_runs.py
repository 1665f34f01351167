"""Weights & Biases, where ``wandb`` is installed (optional, not a dependency): each run a W&B run (config,
per-round history, summary, files), a sweep's or comparison's runs in one W&B group, and the group's
tables and plot in a run of its own. ``WANDB_MODE=offline`` (and W&B's other settings) are W&B's own."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from simulations.tracking.records import RunRecord


class WandbBackend:
    """One command's W&B writer (see the module docstring)."""

    name = "wandb"

    def __init__(self, root: Path, experiment: str) -> None:
        import wandb

        self.wandb = wandb
        self.root = Path(root)
        self.project = experiment
        self.group: str | None = None
        self.group_params: dict[str, Any] = {}

    def start_group(self, name: str, params: Mapping[str, Any], tags: Mapping[str, str]) -> None:
        """Runs logged from now on go in the W&B group ``name``."""
        self.group, self.group_params = name, dict(params)

    def log_run(self, record: RunRecord) -> None:
        """One W&B run: config, history by round, summary, files."""
        run = self.wandb.init(
            project=self.project,
            group=self.group,
            name=record.name,
            config=record.params,
            dir=str(self.root),
            reinit="create_new",
        )
        try:
            for step, values in record.rounds:
                run.log(dict(values), step=step)
            run.summary.update({f"final/{k}": v for k, v in record.final.items()})
            run.summary.update({k: v for k, v in record.tags.items()})
            for path in record.files:
                run.save(str(path), base_path=str(record.folder), policy="now")
        finally:
            run.finish(exit_code=1 if record.failed else 0)

    def end_group(self, files: Sequence[Path], ok: bool) -> None:
        """The group's tables and plot, in a run named after the group."""
        if self.group is None:
            return
        run = self.wandb.init(
            project=self.project,
            group=self.group,
            name=self.group,
            job_type="summary",
            config=self.group_params,
            dir=str(self.root),
            reinit="create_new",
        )
        try:
            for path in files:
                run.save(str(path), base_path=str(path.parent), policy="now")
        finally:
            run.finish(exit_code=0 if ok else 1)
        self.group = None
