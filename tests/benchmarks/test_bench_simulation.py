"""``benchmarks/bench_simulation.py --smoke``: the script runs end to end in both modes (local DP and
user-level central DP) and its JSON has every field.

Nothing here is timed or asserts on a timing (the smoke run is tiny and its figures are not
measurements); the script runs in a subprocess, as a user runs it, on the default local backend.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

SIDE_FIELDS = {"wall_seconds", "users_per_second", "phases", "peak_rss_mib", "peak_pss_mib", "accuracy"}
LOCAL_PHASES = {
    "discovery",
    "train_round_trip",
    "store",
    "fit",
    "aggregate_train_other",
    "evaluate_round_trip",
    "ray_start_and_other",
}
CENTRAL_PHASES = {
    "discovery",
    "train_round_trip",
    "server_step",
    "evaluate_round_trip",
    "accounting",
    "ray_start_and_other",
}
CENTRAL_FLOOR_PHASES = {"setup", "generate", "sample", "update_sum", "server_step", "accounting", "evaluate", "other"}


def check_case(case: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The fields both modes share; returns (federated, floor)."""
    assert (case["users"], case["users_per_node"]) == (200, 100)
    fed, floor = case["federated"], case["floor"]
    for side in (fed, floor):
        assert SIDE_FIELDS <= set(side), side
        assert side["wall_seconds"] > 0 and side["users_per_second"] > 0
        assert side["peak_rss_mib"] > 0 and side["peak_pss_mib"] > 0
        assert all(math.isfinite(v) for v in side["phases"].values())
        assert 0.0 <= side["accuracy"] <= 1.0
    # The federated side runs on the default local backend, in its child's one process (Ray: --backend ray).
    assert fed["peak_processes"] >= floor["peak_processes"] == 1
    for ratio in ("overhead_ratio", "overhead_ratio_after_discovery"):
        assert isinstance(case[ratio], float) and math.isfinite(case[ratio]) and case[ratio] > 0
    return fed, floor


@pytest.mark.slow  # two simulations per mode (66 s): kept out of the 15-minute default run
def test_smoke_run_writes_the_fields_and_finite_ratios_in_both_modes(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "benchmarks/bench_simulation.py", "--smoke", "--out", str(out)],
        cwd=REPO,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert json.loads(proc.stdout) == result  # printed and written
    assert result["smoke"] is True
    assert {"torch", "cpu_count", "load_average_at_start", "load_average_at_end", "modes"} <= set(result)
    assert list(result["modes"]) == ["local", "central"]  # the default --modes
    for mode in result["modes"].values():
        assert {"benchmark", "config", "cases", "marginal"} <= set(mode)
        assert mode["marginal"] == []  # one size

    local = result["modes"]["local"]
    (case,) = local["cases"]
    fed, floor = check_case(case)
    assert set(fed["phases"]) == LOCAL_PHASES
    assert set(floor["phases"]) == {"generate", "map_and_sanitize", "fit", "evaluate", "other"}
    assert (fed["nodes"], fed["releases"], fed["test_users"]) == (2, 200, 40)

    central = result["modes"]["central"]
    assert {
        ("mode", "central"),
        ("central-unit", "user"),
        ("central-cohort-size", 50.0),
        ("local-epochs", 1),
        ("central-noise-multiplier", 1.0),
        ("noise-seed", 0),
    } <= set(central["config"].items())
    (case,) = central["cases"]
    fed, floor = check_case(case)
    assert set(fed["phases"]) == CENTRAL_PHASES
    assert set(floor["phases"]) == CENTRAL_FLOOR_PHASES
    assert fed["nodes"] == floor["nodes"] == 2
    assert fed["test_users"] == floor["test_users"] == 40
    assert fed["expected_sampled_users"] == floor["expected_sampled_users"] == 50.0  # q = 50 / 200
    assert 0 < floor["sampled_users"] < 200  # Poisson sampling, not everyone
    assert fed["epsilon"] == floor["epsilon"] > 0
    # The floor reproduces the federated round's model (same coins, sums, noise and step).
    assert case["same_accuracy"] is True
