"""Issue 13 item 4: a run attached to a running Ray cluster (``ray-address``).

A Ray head is started with ``ray start --head --block`` in its own session, the tiny
end-to-end config of ``test_simulation`` runs on it through the ``sanitas`` CLI, and its
results must equal those of the same config on a local Ray instance: with a fixed
``noise-seed`` a run does not depend on how Ray schedules the nodes.

The head is stopped by signalling the process this test started (``ray start --block``
shuts its node down on SIGTERM), then its process group, never with ``ray stop``: that
kills every Ray process on the machine, other users' runs included.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fl import config
from simulations.runtime.api import backend_config
from tests.conftest import REPO
from tests.support.simulation import rounds_of, run_cli

POLL_S = 0.25
HEAD_START_POLLS = 360  # 90 s for `ray start --head` (counted polls: tests read no wall clock)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _stop_head(head: subprocess.Popen) -> None:
    """SIGTERM the ``ray start --block`` process (it kills its node's processes), then SIGKILL
    whatever is left in the process group it leads (the group this test created)."""
    if head.poll() is None:
        head.send_signal(signal.SIGTERM)
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait(timeout=10)
    for _ in range(60):  # 15 s for its processes to exit
        if not _group_alive(head.pid):
            break
        time.sleep(POLL_S)
    if _group_alive(head.pid):
        os.killpg(head.pid, signal.SIGKILL)


@pytest.fixture
def ray_head(data_dir: Path, cache_dir: Path) -> Iterator[tuple[str, Path]]:
    """A one-node Ray cluster (2 CPUs) on this machine: yields its address and its temp folder.

    Its own short ``--temp-dir`` (Unix socket paths are limited to 107 characters) keeps it
    out of ``/tmp/ray``, so no other ``ray.init()`` on the machine finds it. Ray workers read
    ``$SANITAS_DATA_DIR`` / ``$SANITAS_CACHE_DIR`` from the head's environment, as they would
    on a real cluster.
    """
    temp = Path(tempfile.mkdtemp(prefix="sanitas-ray-"))
    port = _free_port()
    env = {**os.environ, "SANITAS_DATA_DIR": str(data_dir), "SANITAS_CACHE_DIR": str(cache_dir)}
    env.pop("RAY_ADDRESS", None)
    log = (temp / "head.log").open("w")
    head = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ray.scripts.scripts",
            "start",
            "--head",
            "--block",
            "--node-ip-address=127.0.0.1",
            f"--port={port}",
            "--num-cpus=2",
            "--num-gpus=0",
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--ray-client-server-port={_free_port()}",
            f"--dashboard-agent-listen-port={_free_port()}",
            f"--temp-dir={temp}",
        ],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: the teardown signals exactly it
    )
    try:
        for _ in range(HEAD_START_POLLS):
            if (temp / "ray_current_cluster").is_file() or head.poll() is not None:  # the file: the head is up
                break
            time.sleep(POLL_S)
        if not (temp / "ray_current_cluster").is_file():
            log.flush()
            pytest.fail(f"ray start --head did not come up:\n{(temp / 'head.log').read_text()[-3000:]}")
        yield f"127.0.0.1:{port}", temp
    finally:
        _stop_head(head)
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


def _figures(folder: Path) -> list[dict]:
    """Every figure of ``rounds.jsonl`` but the wall time (accuracy, train loss, the privacy ledger)."""
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rounds_of(folder)]


@pytest.mark.slow  # a second Ray cluster start (60 s): kept out of the 15-minute default run
def test_run_attached_to_a_ray_cluster_equals_a_local_run(
    tmp_path: Path, data_dir: Path, cache_dir: Path, ray_head: tuple[str, Path]
) -> None:
    address, temp = ray_head
    attached, local = tmp_path / "attached", tmp_path / "local"
    attached.mkdir()
    local.mkdir()

    # Both runs at once (the embedding cache is written atomically): most of a tiny run is
    # Ray and Flower waiting, so this halves the test's time.
    with ThreadPoolExecutor(2) as pool:
        on_cluster = pool.submit(run_cli, attached, data_dir, cache_dir, {"ray-address": f'"{address}"'})
        on_local = pool.submit(run_cli, local, data_dir, cache_dir, {})
        for proc in (on_cluster.result(), on_local.result()):
            assert proc.returncode == 0, proc.stderr[-3000:]
    folder = attached / "out" / "r"
    for name in ("config.json", "rounds.jsonl", "rounds.csv", "summary.json"):
        assert (folder / name).is_file(), name
    # The ClientApps ran in workers of the head's raylet (their logs are in its session folder).
    assert list((temp / "session_latest" / "logs").glob("worker-*")), "no Ray worker ran on the head"

    rounds, local_rounds = _figures(folder), _figures(local / "out" / "r")
    assert [r["round"] for r in rounds] == [1, 2]
    # The train loss is the sensitive figure here (on 40 test users the accuracy is the majority class).
    for r, expected in zip(rounds, local_rounds, strict=True):
        assert (r["accuracy"], r["train_loss"], r["privacy"]["epsilon_ldp"]) == (
            expected["accuracy"],
            expected["train_loss"],
            expected["privacy"]["epsilon_ldp"],
        )
    assert rounds == local_rounds


def test_backend_config_passes_node_resources_and_the_ray_address() -> None:
    cfg = config.resolve({"device": "cpu"})
    assert backend_config(cfg)["client_resources"] == {"num_cpus": 1.0, "num_gpus": 0.0}
    assert backend_config(cfg)["init_args"]["address"] == "local"  # never a cluster found by accident
    cfg = config.resolve({"node-cpus": 0.5, "node-gpus": 0.5, "ray-address": "10.0.0.5:6379"})
    backend = backend_config(cfg)
    assert backend["client_resources"] == {"num_cpus": 0.5, "num_gpus": 0.5}
    assert backend["init_args"]["address"] == "10.0.0.5:6379"
    assert backend_config(config.resolve({"ray-address": "auto"}))["init_args"]["address"] == "auto"
