"""``sanitas run`` as a user sees it: a quiet console with the final table (Flower's banners in run.log
only), everything with --verbose, and a run that fails after it started ends with one line naming its
log and exit code 1."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO
from tests.support.simulation import BASE


def _cli(tmp_path: Path, data_dir: Path, cache_dir: Path, *extra: str, **keys: str) -> subprocess.CompletedProcess:
    tmp_path.mkdir(parents=True, exist_ok=True)
    cfg = tmp_path / "run.toml"
    cfg.write_text("".join(f"{k} = {v}\n" for k, v in {**BASE, **keys}.items()))
    env = {**os.environ, "SANITAS_DATA_DIR": str(data_dir), "SANITAS_CACHE_DIR": str(cache_dir)}
    command = [sys.executable, "-m", "simulations.cli", "run", str(cfg), "--out", str(tmp_path / "out"), *extra]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def test_the_console_is_quiet_and_the_log_has_everything(tmp_path: Path, data_dir: Path, cache_dir: Path) -> None:
    proc = _cli(tmp_path / "quiet", data_dir, cache_dir, "--set", 'run-name="r"')
    assert proc.returncode == 0, proc.stderr[-3000:]
    shown = proc.stdout + proc.stderr
    for row in ("accuracy", "macro-F1", "privacy", "phrase", "wall time", "results"):  # an SST-2 row: a phrase
        assert row in proc.stdout, row
    assert "reproducible" in proc.stdout  # BASE pins noise-seed = 0: the privacy row says so
    assert "[ROUND" not in shown and "Starting RoundCheckpoints" not in shown and "training on" not in shown
    log = (tmp_path / "quiet" / "out" / "r" / "run.log").read_text()
    assert "[ROUND 1/2]" in log and "Starting RoundCheckpoints" in log
    verbose = _cli(tmp_path / "verbose", data_dir, cache_dir, "--set", 'run-name="r"', "--verbose")
    assert verbose.returncode == 0 and "[ROUND 1/2]" in verbose.stdout + verbose.stderr


def test_a_run_that_fails_after_it_started_names_its_log(tmp_path: Path, data_dir: Path, cache_dir: Path) -> None:
    strategy = {"strategy": '"tests.integration.failing_strategy:FailsInRoundOne"'}
    proc = _cli(tmp_path, data_dir, cache_dir, "--set", 'run-name="r"', **strategy)
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("sanitas: error:")]
    assert len(lines) == 1 and "run.log" in lines[0] and "Traceback" not in proc.stderr
    assert "the strategy broke in round 1" in lines[0]
    assert "Traceback" in (tmp_path / "out" / "r" / "run.log").read_text()  # the details are in the log
    assert "failed" in (tmp_path / "out" / "r" / "status.json").read_text()
