"""``flwr run .`` as docs/running.md documents it: Flower's managed local SuperLink (simulation), which
``flwr run`` starts on first use, with Flower's runtime dependency installation off
(``FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1``: its ``uv sync`` would fetch torch from PyTorch's
index, unreachable offline, and the run would fail with Flower's exit code 608).

A run on a tiny config finishes and writes its results folder; a failed run is told apart the way
the docs say: ``flwr run --stream`` still exits 0, ``flwr ls --run-id ID --format json`` says
``finished:failed`` with the reason, and a run that failed after it started has ``"failed"`` in its
folder's ``status.json``.

The local SuperLink lives in a Flower home of its own (``FLWR_HOME``) on free ports
(``FLWR_LOCAL_SUPERLINK_HTTP_API_PORT``, ``FLWR_LOCAL_CONTROL_API_PORT``), so a user's own local
SuperLink is neither reused nor stopped; the module stops it (and with it its SuperExec) at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.deployment import BIN, REPO, free_port


def _tool(name: str) -> str | None:
    """The Flower executable next to this interpreter, else on PATH; None when Flower's CLI is missing."""
    local = BIN / name
    return str(local) if local.exists() else shutil.which(name)


FLWR = _tool("flwr")
if FLWR is None or _tool("flower-superlink") is None:
    pytest.skip("Flower's CLI (flwr, flower-superlink) is not installed", allow_module_level=True)

#: A tiny run: one round on 100 SST-2 training sentences, 40 test sentences.
TINY = "train-size=100 test-size=40 num-server-rounds=1 server-epochs=3 noise-seed=0"


def _command_lines() -> Iterator[tuple[int, str]]:
    """(pid, command line) of every process this user can see (Linux /proc)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        yield int(entry.name), raw.replace(b"\0", b" ").decode(errors="replace")


@dataclass
class LocalSuperLink:
    """``flwr`` commands against the local SuperLink of one Flower home (started by the first ``flwr run``)."""

    home: Path
    env: dict[str, str]

    def flwr(self, *args: str, timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(FLWR), *args], cwd=REPO, env=self.env, capture_output=True, text=True, timeout=timeout
        )

    def record(self, run_id: int) -> dict:
        """``flwr ls --run-id ID --format json``: Flower's record of the run (its ``status``, ``status-details``)."""
        proc = self.flwr("ls", "--run-id", str(run_id), "--format", "json", timeout=60)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return json.loads(proc.stdout[proc.stdout.index("{") :])["runs"][0]

    def finished(self, run_id: int, timeout: float = 120.0) -> dict:
        """The record once Flower has marked the run finished (the log stream can end moments before)."""
        for _ in range(int(timeout / 2)):  # polls, not a clock: the tests read no wall clock
            record = self.record(run_id)
            if str(record["status"]).startswith("finished"):
                return record
            time.sleep(2)
        raise TimeoutError(f"run {run_id} still {record['status']}")

    def processes(self) -> list[int]:
        """This home's SuperLink, and its SuperExec and app processes (they name its runtime port)."""
        port = f"127.0.0.1:{self.env['FLWR_LOCAL_SUPERLINK_HTTP_API_PORT']} "
        mine = (str(self.home / "local-superlink"), port)
        return [pid for pid, cmd in _command_lines() if pid != os.getpid() and any(m in cmd + " " for m in mine)]

    def stop(self) -> None:
        """SIGTERM the SuperLink (its SuperExec and app processes watch their parent and follow), then
        SIGKILL whatever is left of this home's processes."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            pids = self.processes()
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            for _ in range(50):
                if not self.processes():
                    return
                time.sleep(0.2)


@pytest.fixture(scope="module")
def link(tmp_path_factory: pytest.TempPathFactory, data_dir: Path, cache_dir: Path) -> Iterator[LocalSuperLink]:
    home = tmp_path_factory.mktemp("flwr-home")
    env = {
        **os.environ,
        # Flower's processes start each other by name (flwr -> flower-superlink -> flower-superexec ->
        # flwr-simulation): the interpreter's own folder first, so a venv works without activating it.
        "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")]),
        "FLWR_HOME": str(home),
        "FLWR_LOCAL_SUPERLINK_HTTP_API_PORT": str(free_port()),
        "FLWR_LOCAL_CONTROL_API_PORT": str(free_port()),
        "FLWR_DISABLE_UPDATE_CHECK": "1",
        "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",  # the documented offline setting
        "SANITAS_DATA_DIR": str(data_dir),
        "SANITAS_CACHE_DIR": str(cache_dir),
        # The failing strategy of test_a_failed_run_... lives in tests/, which the FAB does not ship.
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
    }
    superlink = LocalSuperLink(home, env)
    try:
        yield superlink
    finally:
        superlink.stop()
        left = superlink.processes()
        assert not left, f"Flower processes left running: {left}"


def _run_id(output: str) -> int:
    line = next(line for line in output.splitlines() if "Successfully started run" in line)
    return int(line.split("Successfully started run")[1].split()[0])


@pytest.mark.slow  # about 30 s on 2 cores, SuperLink start included: .ci/run runs this file's slow tests
def test_flwr_run_offline_finishes_and_writes_results(link: LocalSuperLink, tmp_path: Path, data_dir: Path) -> None:
    config = f"data-dir='{data_dir}' out-dir='{tmp_path}' run-name='ok' {TINY}"
    proc = link.flwr("run", ".", "--stream", "--run-config", config)
    shown = proc.stdout + proc.stderr
    assert proc.returncode == 0, shown[-3000:]
    assert (link.home / "local-superlink" / "superlink.log").is_file()  # this home's SuperLink, started by `flwr run`
    assert "Installing application dependencies" not in shown and "Exit Code" not in shown, shown[-3000:]
    record = link.finished(_run_id(proc.stdout))
    assert record["status"] == "finished:completed", record
    status = json.loads((tmp_path / "ok" / "status.json").read_text())
    assert status["status"] == "complete" and status["completed_rounds"] == 1, status
    rounds = (tmp_path / "ok" / "rounds.jsonl").read_text().splitlines()
    assert len(rounds) == 1 and json.loads(rounds[0])["accuracy"] is not None
    assert (tmp_path / "ok" / "summary.json").is_file()
    # The SuperLink keeps running after `flwr run` returns (docs/running.md: how to stop it).
    assert link.processes()


@pytest.mark.slow  # two runs: about 50 s on 2 cores (the run above: about 30 s, SuperLink start included)
def test_a_failed_run_exits_0_and_is_told_by_flwr_ls_and_status_json(
    link: LocalSuperLink, tmp_path: Path, data_dir: Path
) -> None:
    # 1. Bad input: the ServerApp raises before it writes anything.
    bad = f"data-dir='{data_dir}' out-dir='{tmp_path / 'bad'}' {TINY} sentence-epsilon=-1.0"
    proc = link.flwr("run", ".", "--stream", "--run-config", bad)
    shown = proc.stdout + proc.stderr
    # docs/running.md says so: `flwr run` (1.42) exits 0 whatever the run's outcome.
    assert proc.returncode == 0, f"flwr run exited {proc.returncode}: update docs/running.md\n{shown[-3000:]}"
    assert "sentence-epsilon must be > 0" in shown and "Exit Code: 700" in shown, shown[-3000:]
    record = link.finished(_run_id(proc.stdout))
    assert record["status"] == "finished:failed", record
    assert "sentence-epsilon must be > 0" in record["status-details"]
    assert not (tmp_path / "bad").exists()  # nothing written: Flower's record is the only trace

    # 2. A run that breaks in round 1, after its results folder exists: submitted as the docs' check
    # does (`--format json` for the run id, `flwr log ID --stream` to follow it).
    strategy = "strategy='tests.integration.failing_strategy:FailsInRoundOne'"
    broken = f"data-dir='{data_dir}' out-dir='{tmp_path}' run-name='broken' {TINY} {strategy}"
    proc = link.flwr("run", ".", "--format", "json", "--run-config", broken)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_id = int(json.loads(proc.stdout[proc.stdout.index("{") :])["run-id"])
    log = link.flwr("log", str(run_id), "--stream")
    assert log.returncode == 0 and "the strategy broke in round 1" in log.stdout, log.stdout[-3000:]
    record = link.finished(run_id)
    assert record["status"] == "finished:failed", record
    assert "the strategy broke in round 1" in record["status-details"]
    status = json.loads((tmp_path / "broken" / "status.json").read_text())
    assert status["status"] == "failed" and "the strategy broke in round 1" in status["error"], status
    assert not (tmp_path / "broken" / "summary.json").exists()
