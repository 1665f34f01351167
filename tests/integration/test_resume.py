"""Crash and resume end to end: a run killed after round 1 (SIGKILL to its whole process group, Ray
included) leaves a folder that says it is incomplete; ``sanitas run --resume DIR`` finishes it, and
its round records equal those of an uninterrupted run of the same config and seeds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO

CONFIG = {
    "dataset": '"sst2"',
    "train-size": "36",
    "test-size": "24",
    "users-per-node": "6",
    "num-server-rounds": "3",
    "fraction-train": "0.5",
    "sentence-epsilon": "10.0",
    "label-mechanism": '"rr"',
    "label-epsilon": "2.0",
    "server-epochs": "40",  # rounds long enough for the test to kill between them
    "noise-seed": "0",
}
#: Fields that measure time, not results.
TIMING = {"seconds", "timing"}


def _cli(args: list[str], env: dict[str, str], **kw) -> subprocess.Popen:  # type: ignore[no-untyped-def]
    return subprocess.Popen(
        [sys.executable, "-m", "simulations.cli", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kw,
    )


def _records(folder: Path) -> list[dict]:
    rows = [json.loads(line) for line in (folder / "rounds.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


def test_a_killed_run_resumes_to_the_uninterrupted_result(tmp_path: Path, data_dir: Path, cache_dir: Path) -> None:
    cfg = tmp_path / "run.toml"
    cfg.write_text("".join(f"{k} = {v}\n" for k, v in CONFIG.items()))
    env = {**os.environ, "SANITAS_DATA_DIR": str(data_dir), "SANITAS_CACHE_DIR": str(cache_dir)}
    out = tmp_path / "out"
    run = ["run", str(cfg), "--out", str(out), "--set"]
    full = _cli([*run, 'run-name="full"'], env)
    victim = _cli([*run, 'run-name="killed"'], env, start_new_session=True)
    killed = out / "killed"
    polls = 0
    while not (killed / "checkpoints" / "round-00001.pt").is_file():
        assert victim.poll() is None, f"the run ended before round 1 was saved: {victim.stdout.read()[-2000:]}"  # type: ignore[union-attr]
        polls += 1
        assert polls < 12_000, "round 1 never completed (10 minutes)"
        time.sleep(0.05)
    os.killpg(victim.pid, signal.SIGKILL)  # the driver, its Ray processes and actors
    victim.wait()

    status = json.loads((killed / "status.json").read_text())
    assert status["status"] == "running" and 1 <= status["completed_rounds"] < 3
    assert not (killed / "summary.json").exists()  # nothing looks complete

    resumed = _cli(["run", "--resume", str(killed)], env)
    log, _ = resumed.communicate(timeout=900)
    assert resumed.returncode == 0, log[-3000:]
    full_log, _ = full.communicate(timeout=900)
    assert full.returncode == 0, full_log[-3000:]

    assert json.loads((killed / "status.json").read_text())["status"] == "complete"
    assert not (killed / "checkpoints").exists() and not (killed / "nodes").exists()  # secrets removed
    a, b = _records(out / "full"), _records(killed)
    assert [r["round"] for r in b] == [1, 2, 3]
    assert a == b  # same accuracy, losses, ledger, shuffled figures, faults: the same run
    summary = json.loads((killed / "summary.json").read_text())
    assert (
        summary["resumed_after_round"] >= 1
        and summary["final"] == json.loads((out / "full" / "summary.json").read_text())["final"]
    )


def test_resume_refuses_complete_and_foreign_folders(tmp_path: Path) -> None:
    from simulations.runtime import api

    (tmp_path / "done").mkdir()
    (tmp_path / "done" / "config.json").write_text(json.dumps({"config": {}}))
    (tmp_path / "done" / "status.json").write_text(json.dumps({"status": "complete"}))
    proc = subprocess.run(
        [sys.executable, "-m", "simulations.cli", "run", "--resume", str(tmp_path / "done")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "holds a complete run: nothing to resume" in proc.stderr
    assert "Traceback" not in proc.stderr
    with pytest.raises(FileNotFoundError, match="not a Sanitas results folder"):
        api.resume(tmp_path)
    (tmp_path / "young").mkdir()
    (tmp_path / "young" / "config.json").write_text(json.dumps({"config": {}}))
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        api.resume(tmp_path / "young")
