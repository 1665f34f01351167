"""Ctrl-C (SIGINT) or SIGTERM on a running ``sanitas run``: one line naming the folder and the command that
continues it, exit code 130, ``status.json`` ``interrupted``, no traceback; the command it names finishes
the run."""

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
from tests.integration.test_resume import CONFIG


def _terminal_signals() -> None:
    """The run starts with SIGINT's default disposition, as from a terminal. A child inherits an ignored
    SIGINT, and Python then never raises KeyboardInterrupt: a shell without job control starts its
    background jobs with SIGINT ignored (POSIX), and a test suite started so saw the run finish its 30
    rounds (exit 0) instead of stopping; with this reset the test passes from such a process too."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_run_says_how_to_go_on(signum: int, tmp_path: Path, data_dir: Path, cache_dir: Path) -> None:
    cfg = tmp_path / "run.toml"
    cfg.write_text("".join(f"{k} = {v}\n" for k, v in {**CONFIG, "num-server-rounds": "30"}.items()))
    env = {**os.environ, "SANITAS_DATA_DIR": str(data_dir), "SANITAS_CACHE_DIR": str(cache_dir)}
    folder = tmp_path / "out" / "r"
    command = [sys.executable, "-m", "simulations.cli", "run", str(cfg), "--out", str(tmp_path / "out")]
    proc = subprocess.Popen(
        [*command, "--set", 'run-name="r"'],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_terminal_signals,
    )
    polls = 0
    while not (folder / "checkpoints" / "round-00001.pt").is_file():
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        polls += 1
        assert polls < 12_000, "round 1 never completed (10 minutes)"
        time.sleep(0.05)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err[-2000:]
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and len([x for x in lines if x.startswith("sanitas: ")]) == 1
    assert lines[-1].startswith("sanitas: interrupted after round ")
    assert lines[-1].endswith(f"continue with: sanitas run --resume {folder}")
    status = json.loads((folder / "status.json").read_text())
    assert status["status"] == "interrupted" and status["completed_rounds"] >= 1
    if signum == signal.SIGINT:  # the command it names continues the run to the end
        done = subprocess.run(
            [sys.executable, "-m", "simulations.cli", "run", "--resume", str(folder)],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        assert json.loads((folder / "status.json").read_text())["status"] == "complete"
