"""``benchmarks/bench_simulation.py --smoke``: the script runs end to end and its JSON has every field.

Nothing here is timed or asserts on a timing (the smoke run is tiny and its figures are not
measurements); the script runs in a subprocess, as a user runs it, Ray included.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def test_smoke_run_writes_the_fields_and_finite_ratios(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "benchmarks/bench_simulation.py", "--smoke", "--out", str(out)],
        cwd=REPO,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert json.loads(proc.stdout) == result  # printed and written
    assert result["smoke"] is True
    assert {"torch", "cpu_count", "load_average_at_start", "load_average_at_end", "config", "cases"} <= set(result)
    (case,) = result["cases"]
    assert (case["users"], case["users_per_node"]) == (200, 100)
    fed, floor = case["federated"], case["floor"]
    for side in (fed, floor):
        assert {"wall_seconds", "users_per_second", "phases", "peak_rss_mib", "peak_pss_mib", "accuracy"} <= set(side)
        assert side["wall_seconds"] > 0 and side["users_per_second"] > 0
        assert side["peak_rss_mib"] > 0 and side["peak_pss_mib"] > 0
        assert all(math.isfinite(v) for v in side["phases"].values())
        assert 0.0 <= side["accuracy"] <= 1.0
    assert set(fed["phases"]) == {
        "discovery",
        "train_round_trip",
        "store",
        "fit",
        "aggregate_train_other",
        "evaluate_round_trip",
        "ray_start_and_other",
    }
    assert set(floor["phases"]) == {"generate", "map_and_sanitize", "fit", "evaluate", "other"}
    assert (fed["nodes"], fed["releases"], fed["test_users"]) == (2, 200, 40)
    assert fed["peak_processes"] > floor["peak_processes"] == 1  # the federated tree holds Ray's processes
    for ratio in ("overhead_ratio", "overhead_ratio_after_discovery"):
        assert isinstance(case[ratio], float) and math.isfinite(case[ratio]) and case[ratio] > 0
