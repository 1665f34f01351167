"""Which trackers a command logs to, and the one object that logs to all of them.

A command (``sanitas run``, ``sweep``, ``compare``, ``tune``, ``reproduce``) names its trackers with ``--track``
(repeatable) and the run config's ``track`` key (comma-separated); :func:`requested` joins the two.
:class:`Tracker` logs finished run folders to every backend; a backend that fails (an unreachable URI, a
store it cannot write) is reported in one warning line and dropped for the rest of the command: the runs
and their own files never depend on it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fl.config.run_keys import TRACKER_NAMES
from simulations.tracking.records import RunRecord, group_files, read_run

#: The trackers, and the packages each needs (installed by ``pip install -e .[tracking]``, W&B's on its own).
TRACKERS: dict[str, tuple[str, ...]] = {
    "mlflow": ("mlflow", "sqlalchemy", "alembic"),
    "tensorboard": ("tensorboard",),
    "wandb": ("wandb",),
}
assert tuple(TRACKERS) == TRACKER_NAMES
INSTALL = {
    "mlflow": "pip install -e '.[tracking]'",
    "tensorboard": "pip install -e '.[tracking]'",
    "wandb": "pip install wandb",
}

#: The refusal of ``--tracking-uri`` when nothing logs to MLflow.
URI_WITHOUT_MLFLOW = '--tracking-uri names an MLflow store: add --track mlflow (or track = "mlflow" in the config)'

#: The warning a failing backend prints once (at most 200 characters).
WARNING = "sanitas: warning: {name} tracking stopped ({error}); the runs and their own files are unaffected"


def names_of(text: str) -> tuple[str, ...]:
    """The tracker names of a ``track`` value (``"mlflow, tensorboard"``), in order, each once."""
    return tuple(dict.fromkeys(n.strip() for n in str(text).split(",") if n.strip()))


def missing_package(name: str) -> str | None:
    """The first package tracker ``name`` needs that is not installed, or ``None``."""
    for package in TRACKERS[name]:
        if importlib.util.find_spec(package) is None:
            return package
    return None


def unavailable(names: Iterable[str]) -> str | None:
    """Why the trackers ``names`` cannot log here (an unknown name, a package missing), with the fix; else
    ``None``. Asked before any work, so a command never runs to find its tracker missing."""
    from mechanisms.suggest import did_you_mean

    for name in names:
        if name not in TRACKERS:
            hint = did_you_mean(name, tuple(TRACKERS))
            return f"unknown tracker {name!r}{hint} (known: {', '.join(TRACKERS)})"
        package = missing_package(name)
        if package is not None:
            return f"--track {name} needs the {package!r} package: {INSTALL[name]}"
    return None


@dataclass(frozen=True)
class Tracking:
    """What a command tracks: the trackers, the folder of the local stores (the command's ``--out``), the
    MLflow tracking URI (``""``: ``$MLFLOW_TRACKING_URI``, else ``<root>/mlflow.db``) and the experiment or
    project (``$MLFLOW_EXPERIMENT_NAME``, else ``sanitas``)."""

    names: tuple[str, ...]
    root: Path
    uri: str = ""
    experiment: str = ""

    @property
    def project(self) -> str:
        return self.experiment or os.environ.get("MLFLOW_EXPERIMENT_NAME", "") or "sanitas"


def for_command(
    cli_names: Sequence[str], cli_uri: str | None, cfg: Mapping[str, Any], root: str | Path
) -> Tracking | None:
    """The trackers of a command over a config (``sweep``, ``compare``, ``tune``, ``reproduce``): its
    ``--track`` and the config's ``track`` key (``cfg``: the file with ``--set`` applied); raises
    ``ConfigError`` (before any work) when one cannot log here."""
    from fl.config import ConfigError

    tracking = requested(cli_names, cli_uri, cfg, root)
    problem = None if tracking is None else unavailable(tracking.names)
    if cli_uri and (tracking is None or "mlflow" not in tracking.names):
        problem = URI_WITHOUT_MLFLOW
    if problem:
        raise ConfigError(problem)
    return tracking


def requested(
    cli_names: Sequence[str], cli_uri: str | None, cfg: Mapping[str, Any] | None, root: str | Path
) -> Tracking | None:
    """The trackers of a command: its ``--track`` names and its config's ``track`` key (``cfg``, raw or
    resolved), the URI of ``--tracking-uri`` or else the config's ``tracking-uri``; ``None`` when none."""
    cfg = cfg or {}
    names = tuple(dict.fromkeys([*names_of(cfg.get("track", "")), *cli_names]))
    if not names:
        return None
    uri = cli_uri or str(cfg.get("tracking-uri", "") or "")
    return Tracking(names, Path(root).expanduser(), uri)


class Tracker:
    """Logs finished runs (and a group's tables) to the requested backends; see the module docstring."""

    def __init__(self, tracking: Tracking) -> None:
        self.tracking = tracking
        self.backends: list[Any] = []
        for name in tracking.names:
            self._guard(name, lambda n=name: self.backends.append(_open(n, tracking)))

    def _guard(self, name: str, action: Any) -> None:
        try:
            action()
        except Exception as err:  # noqa: BLE001 - a tracker never stops a command: one warning, then it is dropped
            self.backends = [b for b in self.backends if b.name != name]
            error = " ".join(f"{type(err).__name__}: {err}".split())
            room = 200 - len(WARNING.format(name=name, error=""))
            text = error if len(error) <= room else error[: room - 3] + "..."
            print(WARNING.format(name=name, error=text), file=sys.stderr, flush=True)

    def _each(self, method: str, *args: Any) -> None:
        for backend in list(self.backends):
            self._guard(backend.name, lambda b=backend: getattr(b, method)(*args))

    def start_group(self, name: str, params: Mapping[str, Any], tags: Mapping[str, str]) -> None:
        """Open the parent of the runs logged next (a sweep, comparison or reproduction called ``name``)."""
        self._each("start_group", name, params, tags)

    def log_run(self, folder: Path) -> None:
        """Log the run in results folder ``folder`` (nested under the open group, if any)."""
        if not self.backends:
            return
        try:
            record = read_run(folder)
        except (OSError, ValueError, KeyError) as err:
            print(f"sanitas: warning: not tracked: {folder.name} ({type(err).__name__})"[:200], file=sys.stderr)
            return
        self.log_record(record)

    def log_record(self, record: RunRecord) -> None:
        """Log one record (a run folder's, or one that is no run folder: ``sanitas tune``'s choices)."""
        self._each("log_run", record)

    def end_group(self, folder: Path | None, ok: bool = True) -> None:
        """Close the open group, logging the tables and plots at the top of ``folder``."""
        files = group_files(folder) if folder is not None and folder.is_dir() else []
        self._each("end_group", files, ok)

    @property
    def where(self) -> list[str]:
        """Where each live backend wrote, for the command's last lines."""
        out = []
        for backend in self.backends:
            if backend.name == "mlflow":
                out.append(f"MLflow: mlflow ui --backend-store-uri {backend.uri}")
            elif backend.name == "tensorboard":
                out.append(f"TensorBoard: tensorboard --logdir {backend.root}")
            else:
                out.append(f"W&B: project {self.tracking.project}")
        return out


def track_record(tracking: Tracking | None, record: RunRecord) -> None:
    """Log one record that is no run folder (``sanitas tune``'s choices) to ``tracking``'s backends."""
    if tracking is None:
        return
    tracker = Tracker(tracking)
    tracker.log_record(record)
    for line in tracker.where:
        print(f"sanitas: tracked in {line}", flush=True)


def _open(name: str, tracking: Tracking) -> Any:
    root = tracking.root
    if name == "mlflow":
        from simulations.tracking.mlflow_store import MlflowBackend

        return MlflowBackend(root, tracking.uri, tracking.project)
    if name == "tensorboard":
        from simulations.tracking.tensorboard_events import TensorBoardBackend

        return TensorBoardBackend(root)
    from simulations.tracking.wandb_runs import WandbBackend

    return WandbBackend(root, tracking.project)


def track_runs(
    tracking: Tracking | None,
    folders: Iterable[Path],
    group: str | None = None,
    group_folder: Path | None = None,
    params: Mapping[str, Any] | None = None,
    tags: Mapping[str, str] | None = None,
) -> Tracker | None:
    """Log finished run ``folders`` (those holding ``config.json``) to ``tracking``'s backends, under a parent
    ``group`` when one is named (whose tables and plots are the files at the top of ``group_folder``);
    prints where to look. ``None`` (nothing done) without tracking."""
    if tracking is None:
        return None
    tracker = Tracker(tracking)
    if group is not None:
        tracker.start_group(group, params or {}, tags or {})
    ok = True
    for folder in folders:
        if (Path(folder) / "config.json").is_file():
            tracker.log_run(Path(folder))
            ok = ok and (Path(folder) / "summary.json").is_file()
    if group is not None:
        tracker.end_group(group_folder, ok)
    for line in tracker.where:
        print(f"sanitas: tracked in {line}", flush=True)
    return tracker
