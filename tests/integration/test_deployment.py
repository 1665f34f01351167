"""The same apps under Flower's Deployment Runtime: a SuperLink and SuperNodes as separate processes
on loopback (``tests.support.deployment``), the run submitted with ``flwr run``.

A deployment and a simulation of the same config and seed are the same computation: their
``rounds.jsonl`` are identical, wall-clock fields aside, in local and in central mode.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import runs
from tests.support.deployment import Deployment
from tests.support.runs import MODES
from tests.support.runs import SMALL_RUN as BASE
from tests.support.simulation import run_in_process

NODES = 2  # SMALL_RUN's simulation has 2 nodes


# The other levels and the node-level central unit: slow tests (a deployment run each).
LEVELS: dict[str, dict[str, object]] = {
    **runs.LEVELS,
    # Not seed-reproducible, simulated or deployed: Flower's FedAvg samples nodes with Python's unseeded
    # random.sample and its server-side DP wrapper draws unseeded noise. Checked to run to the end only.
    "central-node": {"mode": "central", "central-unit": "node", "central-noise-multiplier": 0.5},
}


def simulate(config: dict[str, object], out: Path, data_dir: Path, cache_dir: Path) -> Path:
    """``sanitas run`` of the same config (local backend, in this process); the run's folder."""
    out.mkdir(parents=True)
    path = out / "run.toml"
    path.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in config.items()))
    env = {"SANITAS_DATA_DIR": str(data_dir), "SANITAS_CACHE_DIR": str(cache_dir)}
    proc = run_in_process(["run", str(path), "--out", str(out)], env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out / str(config["run-name"])


def node_configs(n: int) -> list[str]:
    return [f"partition-id={k} num-partitions={n}" for k in range(n)]


@pytest.fixture(scope="module")
def insecure(tmp_path_factory: pytest.TempPathFactory, data_dir: Path, cache_dir: Path) -> Iterator[Deployment]:
    env = {"SANITAS_DATA_DIR": str(data_dir), "SANITAS_CACHE_DIR": str(cache_dir)}
    with Deployment(tmp_path_factory.mktemp("deployment"), node_configs(NODES), env=env) as deployment:
        yield deployment


# Every deployment is slow-marked (local about 60 s, central-user about 65 s, the levels, TLS): .ci/run runs
# local, central-user and TLS after the default suite (about 9 minutes on 2 cores).
SLOW_HERE = {"local", "central-user", *LEVELS}


@pytest.mark.parametrize(
    "mode",
    [pytest.param(m, marks=pytest.mark.slow) if m in SLOW_HERE else m for m in [*sorted(MODES), *sorted(LEVELS)]],
)
def test_a_deployment_equals_the_simulation(
    mode: str, insecure: Deployment, tmp_path: Path, data_dir: Path, cache_dir: Path
) -> None:
    config = {**BASE, **MODES.get(mode, {}), **LEVELS.get(mode, {})}
    deployed = insecure.run(config, tmp_path / "deployed")
    assert deployed.status == "finished:completed", deployed.details + insecure.log("superlink.log")[-3000:]
    assert deployed.folder is not None
    rounds = runs.comparable(deployed.folder)
    assert len(rounds) == BASE["num-server-rounds"] and all(r["accuracy"] is not None for r in rounds)
    if mode == "central-node":  # see LEVELS: completes (it crashed on its checkpoint), not reproducible
        return
    simulated = simulate(config, tmp_path / "simulated", data_dir, cache_dir)
    assert rounds == runs.comparable(simulated)
    summaries = [json.loads((f / "summary.json").read_text()) for f in (deployed.folder, simulated)]
    assert summaries[0]["final"] == summaries[1]["final"]
    assert summaries[0]["users"] == summaries[1]["users"] and summaries[0]["users"]["nodes"] == NODES


@pytest.mark.slow  # about 75 s on 2 cores; .ci/run runs it after the default suite
def test_a_tls_deployment_of_authenticated_nodes_reading_their_own_files_equals_the_simulation(
    tmp_path: Path, data_dir: Path, cache_dir: Path
) -> None:
    """TLS on every connection (certificates made here), SuperNode authentication with registered
    keys, and each SuperNode's training documents in its own file (``--node-config data-path=...``)."""
    from fl import config as config_mod
    from tests.support.node_files import run_with_node_files, write_node_files

    config = {**BASE, **MODES["local"], "data-dir": str(data_dir), "cache-dir": str(cache_dir)}
    files = write_node_files(config_mod.resolve(config), tmp_path / "files", [".jsonl", ".csv"])
    nodes = [f"{c} data-path={json.dumps(str(p))}" for c, p in zip(node_configs(NODES), files, strict=True)]
    env = {"SANITAS_DATA_DIR": str(data_dir), "SANITAS_CACHE_DIR": str(cache_dir)}
    with Deployment(tmp_path / "deployment", nodes, tls=True, env=env) as deployment:
        deployed = deployment.run(config, tmp_path / "deployed")
        assert deployed.status == "finished:completed", deployed.details + deployment.log("superlink.log")[-3000:]
        # The power check: a SuperNode whose key was never registered is refused (Flower's exit code 305).
        assert deployment.unregistered_node_exit_code() not in (0, None)
        assert "Exit Code: 305" in deployment.log("unregistered.log")
        assert "No SuperNode found with the given public key" in deployment.log("superlink.log")
        assert "insecure" not in deployment.log("superlink.log").lower()
    assert deployed.folder is not None
    simulated = run_with_node_files(
        config_mod.resolve({**config, "out-dir": str(tmp_path / "simulated")}), [{"data-path": str(p)} for p in files]
    )
    assert runs.comparable(deployed.folder) == runs.comparable(simulated)
    summary = json.loads((deployed.folder / "summary.json").read_text())
    assert summary["users"]["nodes_hold_own_files"] is True and summary["users"]["train"] == 60


@pytest.mark.slow  # two rounds that each wait out a dead node (about 2 minutes)
def test_a_supernode_killed_during_a_round_is_counted_charged_and_the_run_completes(
    tmp_path: Path, data_dir: Path, cache_dir: Path
) -> None:
    """SIGKILL one SuperNode (and its ClientApp process) while it serves round 1's training request:
    its reply never comes, the round counts the failure and charges the users it was asked to release
    as if they had (``strategies.local.accounting``), and the run completes on the other node."""
    env = {"SANITAS_DATA_DIR": str(data_dir), "SANITAS_CACHE_DIR": str(cache_dir)}
    # noise-seed -1, as a deployment should run: each node's secret comes from its OS.
    config = {**BASE, **MODES["local"], "node-timeout": 20.0, "noise-seed": -1}
    with Deployment(tmp_path / "deployment", node_configs(NODES), env=env) as deployment:
        out = tmp_path / "deployed"
        out.mkdir()
        path = out / "run.toml"
        path.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in {**config, "out-dir": str(out)}.items()))
        run_id = deployment.submit(path)
        deployment.wait_for_log("node1.log", "Receiving: train message", timeout=300)
        deployment.kill_node(1)
        record = deployment.wait(run_id, timeout=600, done=out / "r" / "summary.json")
    assert record["status"] == "finished:completed", record
    rounds = runs.comparable(out / "r")
    assert len(rounds) == BASE["num-server-rounds"]
    first = rounds[0]["faults"]
    lost = first["train"]["error"] + first["train"]["timeout"]
    assert lost == 1, first  # the killed node, counted once in round 1's training
    # Its users' releases are charged (they may have left the node), and its test users'.
    assert first["lost_releases_charged"]["train"] > 0 and first["lost_releases_charged"]["test"] > 0
    assert all(r["faults"]["evaluate"]["error"] + r["faults"]["evaluate"]["timeout"] == 1 for r in rounds)
    assert all(r["accuracy"] is not None for r in rounds)  # evaluated on the surviving node's test users
