"""Experiment tracking (``--track``, ``track =``): what MLflow's and TensorBoard's own readers find after a run,
a sweep-like group of nested runs, and a failing tracker that leaves the run and its files alone.

One real ``sanitas run`` (2 rounds, 60 users) runs in a subprocess, tracked by both backends; the group and
failure tests log copies of its folder. Nothing is mocked: the readers are ``mlflow.MlflowClient`` and
TensorBoard's ``EventAccumulator``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fl.config import ConfigError
from simulations.runtime.api import resolve_config
from simulations.tracking import Tracking, track_runs, unavailable
from simulations.tracking.records import numbers, read_run
from simulations.tracking.tracker import URI_WITHOUT_MLFLOW
from tests.conftest import REPO
from tests.support.runs import SMALL_RUN

mlflow = pytest.importorskip("mlflow")
pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402


def _client(root: Path) -> Any:
    return mlflow.MlflowClient(tracking_uri=f"sqlite:///{root.resolve() / 'mlflow.db'}")


def _runs(root: Path) -> list[Any]:
    client = _client(root)
    experiment = client.get_experiment_by_name("sanitas")
    return client.search_runs([experiment.experiment_id]) if experiment else []


def _events(folder: Path) -> EventAccumulator:
    (event,) = folder.glob("events.out.tfevents.*")  # one event file per run
    acc = EventAccumulator(str(folder))
    acc.Reload()
    return acc


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture(scope="module")
def tracked_run(tmp_path_factory: pytest.TempPathFactory, data_dir: Path, cache_dir: Path) -> Path:
    """``sanitas run SMALL --track mlflow --track tensorboard --out OUT``; returns OUT."""
    out = tmp_path_factory.mktemp("tracked")
    config = out / "small.toml"
    config.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in {**SMALL_RUN, "label-mechanism": "rr"}.items()))
    env = {**os.environ, "SANITAS_DATA_DIR": str(data_dir)}
    env.pop("MLFLOW_TRACKING_URI", None)
    command = [sys.executable, "-m", "simulations.cli", "run", str(config), "--set", f'cache-dir="{cache_dir}"']
    command += ["--track", "mlflow", "--track", "tensorboard", "--out", str(out / "results")]
    proc = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "tracking stopped" not in proc.stderr and "mlflow" not in proc.stderr, proc.stderr[-2000:]
    assert f"sanitas: tracked in TensorBoard: tensorboard --logdir {out / 'results' / 'tensorboard'}" in proc.stdout
    return out / "results"


def test_mlflow_holds_the_runs_config_rounds_summary_tags_and_files(tracked_run: Path) -> None:
    folder = tracked_run / "r"
    rounds = [json.loads(line) for line in (folder / "rounds.jsonl").read_text().splitlines()]
    summary = json.loads((folder / "summary.json").read_text())
    config = json.loads((folder / "config.json").read_text())["config"]
    (run,) = _runs(tracked_run)
    client = _client(tracked_run)
    assert run.info.run_name == "r" and run.info.status == "FINISHED"
    assert run.data.params["train-size"] == "60" and run.data.params["dataset"] == "sst2"
    assert set(run.data.params) == set(config)  # every resolved key
    history = client.get_metric_history(run.info.run_id, "accuracy")
    assert [(m.step, m.value) for m in history] == [(r["round"], r["accuracy"]) for r in rounds]
    spent = client.get_metric_history(run.info.run_id, "privacy/epsilon_total")
    assert [m.value for m in spent] == [r["privacy"]["epsilon_total"] for r in rounds]
    assert run.data.metrics["final/accuracy"] == summary["final"]["accuracy"]
    assert run.data.tags["sanitas.mode"] == "local" and run.data.tags["sanitas.level"] == "sentence"
    assert run.data.tags["sanitas.guarantee_statement"] == summary["guarantee_statement"]
    assert run.data.tags["mlflow.note.content"] == summary["guarantee_statement"]
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"summary.json", "config.json", "rounds.jsonl", "accuracy_vs_round.png"} <= artifacts
    assert (tracked_run / "mlartifacts").is_dir()  # the local store keeps artifacts beside the database


def test_tensorboard_reads_one_event_file_of_the_per_round_scalars_and_the_hparams(tracked_run: Path) -> None:
    folder = tracked_run / "r"
    rounds = [json.loads(line) for line in (folder / "rounds.jsonl").read_text().splitlines()]
    events = _events(tracked_run / "tensorboard" / "r")
    scalars = events.Scalars("accuracy")
    assert [e.step for e in scalars] == [1, 2]
    assert [e.value for e in scalars] == pytest.approx([r["accuracy"] for r in rounds], rel=1e-6)
    assert "privacy/epsilon_total" in events.Tags()["scalars"] and "final/final/accuracy" in events.Tags()["scalars"]
    assert set(events.PluginTagToContent("hparams")) == {
        "_hparams_/experiment",
        "_hparams_/session_start_info",
        "_hparams_/session_end_info",
    }
    from tensorboard.plugins.hparams import plugin_data_pb2

    start = plugin_data_pb2.HParamsPluginData.FromString(
        events.PluginTagToContent("hparams")["_hparams_/session_start_info"]
    ).session_start_info
    assert start.hparams["train-size"].number_value == 60 and start.hparams["dataset"].string_value == "sst2"


def test_a_group_is_a_parent_with_one_nested_run_per_point_and_its_tables(tracked_run: Path, tmp_path: Path) -> None:
    sweep = tmp_path / "out" / "my-sweep"
    for name in ("eps=1__seed=1", "eps=1__seed=2", "eps=2__seed=1"):
        shutil.copytree(tracked_run / "r", sweep / name)
    (sweep / "sweep.csv").write_text("run_name,accuracy\n")
    shutil.copy(tracked_run / "r" / "accuracy_vs_round.png", sweep / "accuracy_vs_epsilon.png")
    tracking = Tracking(("mlflow", "tensorboard"), tmp_path / "out")
    track_runs(tracking, sorted(sweep.iterdir()), "my-sweep", sweep, {"grid": "eps=1,2"}, {"sanitas.command": "sweep"})
    runs = {r.info.run_name: r for r in _runs(tmp_path / "out")}
    parent = runs.pop("my-sweep")
    assert parent.data.params == {"grid": "eps=1,2"} and parent.data.tags["sanitas.command"] == "sweep"
    assert set(runs) == {"eps=1__seed=1", "eps=1__seed=2", "eps=2__seed=1"}
    assert {r.data.tags["mlflow.parentRunId"] for r in runs.values()} == {parent.info.run_id}
    files = {a.path for a in _client(tmp_path / "out").list_artifacts(parent.info.run_id)}
    assert files == {"sweep.csv", "accuracy_vs_epsilon.png"}
    board = tmp_path / "out" / "tensorboard" / "my-sweep"
    assert sorted(p.name for p in board.iterdir()) == sorted(runs)  # each point a TensorBoard run
    assert [e.step for e in _events(board / "eps=2__seed=1").Scalars("accuracy")] == [1, 2]


@pytest.mark.parametrize("store", ["unreachable", "not-a-database"])
def test_a_failing_tracker_warns_once_and_leaves_the_run_and_the_other_tracker_alone(
    tracked_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], store: str
) -> None:
    folder = tmp_path / "out" / "r"
    shutil.copytree(tracked_run / "r", folder)
    before = _digest(folder)
    if store == "unreachable":
        uri = "http://127.0.0.1:9"  # the discard port: nothing listens
    else:
        (tmp_path / "broken.db").write_text("not a database\n" * 100)
        uri = f"sqlite:///{tmp_path / 'broken.db'}"
    track_runs(Tracking(("mlflow", "tensorboard"), tmp_path / "out", uri), [folder, folder], "g", folder.parent)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("sanitas: warning: mlflow tracking stopped (") and len(err[0]) <= 200
    assert _digest(folder) == before  # the run's own files are unchanged
    assert [e.step for e in _events(tmp_path / "out" / "tensorboard" / "g" / "r").Scalars("accuracy")] == [1, 2]


def test_a_tracker_that_cannot_write_its_folder_warns_once(tracked_run: Path, tmp_path: Path, capsys: Any) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "tensorboard").write_text("a file where the event folders would go\n")
    track_runs(Tracking(("tensorboard",), tmp_path / "out"), [tracked_run / "r"])
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("sanitas: warning: tensorboard tracking stopped (") and len(line) <= 200


def test_records_keep_the_finite_numbers_of_a_run_and_flag_its_outcome(tracked_run: Path) -> None:
    assert numbers({"a": 1, "b": {"c": 2.5, "d": None, "e": True, "f": float("nan"), "g": "x"}}) == {"a": 1, "b/c": 2.5}
    record = read_run(tracked_run / "r")
    assert [step for step, _ in record.rounds] == [1, 2] and not record.failed
    summary = json.loads((tracked_run / "r" / "summary.json").read_text())
    flagged = summary["outcome"].get("beats_majority_class") is False
    assert ("at the majority-class rate" in record.tags.get("sanitas.flag", "")) == flagged


def test_unknown_or_missing_trackers_are_refused_before_any_work(tmp_path: Path) -> None:
    known = "(known: mlflow, tensorboard, wandb)"
    assert unavailable(["mlfow"]) == f"unknown tracker 'mlfow'; did you mean 'mlflow'? {known}"
    with pytest.raises(ConfigError, match="unknown tracker 'tensorbord'; did you mean 'tensorboard'"):
        resolve_config({"dataset": "sst2", "track": "mlflow, tensorbord"})
    try:
        import wandb  # noqa: F401
    except ImportError:
        assert unavailable(["wandb"]) == "--track wandb needs the 'wandb' package: pip install wandb"


def test_wandb_offline_logs_a_run_where_installed(tracked_run: Path, tmp_path: Path, monkeypatch: Any) -> None:
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    track_runs(Tracking(("wandb",), tmp_path), [tracked_run / "r"])
    (run_dir,) = (tmp_path / "wandb").glob("offline-run-*")
    assert any(run_dir.glob("*.wandb"))  # W&B's own offline record of the run, synced later with `wandb sync`


def test_a_tracking_uri_without_mlflow_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from simulations.cli import main

    config = REPO / "simulations" / "experiments" / "quickstart.toml"
    for command in (["run", str(config)], ["sweep", str(config), "--grid", "sentence-epsilon=1", "--out", "x"]):
        assert main([*command, "--track", "tensorboard", "--tracking-uri", "sqlite:///m.db"]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line == f"sanitas: error: {URI_WITHOUT_MLFLOW}" and "add --track mlflow" in line
