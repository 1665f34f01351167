"""Central-DP mode end to end: real encoder, SST-2 subset, Flower simulation on Ray.

Runs the ``sanitas`` CLI in a subprocess (as test_simulation.py does) with
``mode = "central"`` and checks the results folder and that every round's
epsilon is the one ``fl.accounting.central`` gives for the same parameters.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from fl.accounting.central import central_epsilon
from tests.integration.test_simulation import _run as run_cli

CENTRAL = {  # on top of test_simulation's BASE (same users, nodes and rounds)
    "mode": '"central"',
    "central-noise-multiplier": "1.0",
    "central-clip": "1.0",
    "central-delta": "1e-5",
    "local-epochs": "2",
    "batch-size": "4",
    "learning-rate": "0.01",
}
NODES, SAMPLED = 10, 5  # ceil(60 / 6) nodes; ceil(0.5 * 10) sampled per round


def _run(tmp_path: Path, data_dir: Path, cache_dir: Path, extra: dict[str, str]) -> subprocess.CompletedProcess:
    return run_cli(tmp_path, data_dir, cache_dir, {**CENTRAL, **extra})


def _check_run(folder: Path, clipping: str) -> list[dict]:
    for name in ("config.json", "rounds.jsonl", "rounds.csv", "summary.json", "accuracy_vs_round.png"):
        assert (folder / name).is_file(), name
    rounds = [json.loads(line) for line in (folder / "rounds.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rounds] == [1, 2]
    for r in rounds:
        assert 0.0 <= r["accuracy"] <= 1.0 and 0.0 <= r["macro_f1"] <= 1.0
        assert r["test_users"] == 40 and r["mode"] == "central" and r["ldp_guarantee_holds"] is False
        p = r["privacy"]
        expected = central_epsilon(1.0, SAMPLED, NODES, r["round"], 1e-5)
        assert p["epsilon"] == pytest.approx(expected["epsilon"], rel=1e-9)
        assert p["accountant"] == expected["accountant"] and p["delta"] == 1e-5
        assert p["mode"] == "central" and p["sampled_nodes"] == SAMPLED and p["nodes"] == NODES
        assert p["noise_multiplier"] == 1.0 and p["clipping_norm"] == 1.0 and p["clipping"] == clipping
        assert p["unit"] == "user (each user in one node; node-level too)"
        assert p["evaluation_covered"] is False and p["guarantee_covers"].startswith("the noised global models")
    assert 0 < rounds[0]["privacy"]["epsilon"] < rounds[1]["privacy"]["epsilon"]
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["mode"] == "central" and summary["rounds"] == 2
    assert summary["users"] == {"train": 60, "test": 40, "nodes": NODES}
    assert summary["privacy"] == rounds[-1]["privacy"]
    central = summary["guarantee"]["central"]
    assert central["epsilon"] == pytest.approx(rounds[-1]["privacy"]["epsilon"])
    assert "one user's data" in central["text"] and "whole node" in central["text"]
    assert summary["ldp_guarantee_holds"] is False and summary["evaluation_covered"] is False
    assert json.loads((folder / "config.json").read_text())["config"]["mode"] == "central"
    assert "privacy.epsilon" in (folder / "rounds.csv").read_text().splitlines()[0]
    return rounds


def test_central_server_side_clipping_end_to_end(tmp_path: Path, data_dir: Path, cache_dir: Path) -> None:
    proc = _run(tmp_path, data_dir, cache_dir, {"central-clipping": '"server"'})
    assert proc.returncode == 0, proc.stderr[-3000:]
    rounds = _check_run(tmp_path / "out" / "r", "server")
    summary = json.loads((tmp_path / "out" / "r" / "summary.json").read_text())
    assert summary["strategy"] == "DifferentialPrivacyServerSideFixedClipping(CentralFedAvg)"
    assert any("unclipped" in note for note in summary["guarantee"]["notes"])
    assert rounds[-1]["clean_accuracy"] == rounds[-1]["accuracy"]  # test inputs are noise-free in central mode


@pytest.mark.slow
def test_central_client_side_clipping_end_to_end(tmp_path: Path, data_dir: Path, cache_dir: Path) -> None:
    """Client-side clipping: fixedclipping_mod on the ClientApp, the norm sent by the wrapper."""
    proc = _run(tmp_path, data_dir, cache_dir, {"central-clipping": '"client"', "map-in": '"identity"'})
    assert proc.returncode == 0, proc.stderr[-3000:]
    _check_run(tmp_path / "out" / "r", "client")
    assert "fixedclipping_mod: parameters are clipped" in proc.stdout + proc.stderr


def test_central_refuses_a_trained_map_before_writing(tmp_path: Path, data_dir: Path, cache_dir: Path) -> None:
    """map-in = public is a local-mode option: refused with one error line before Ray starts or anything is
    written (custom strategies are refused the same way, see tests/fl/test_central_accounting.py)."""
    proc = _run(tmp_path, data_dir, cache_dir, {"map-in": '"public"', "public-fraction": "0.3"})
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("sanitas: error:") and "map-in must be one of" in last
    assert "Ray" not in proc.stderr and not (tmp_path / "out").exists()
