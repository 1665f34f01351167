"""The shuffled-figures table (``sanitas shuffle-table``): each bound in its place."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from fl.accounting import compose_shuffled_pld, shuffle_amplification
from simulations.analyses.shuffle_table import median_angle, rows_for
from simulations.cli import main

SMALL = {
    "dataset": "sst2",
    "train-size": 300,
    "test-size": 50,
    "users-per-node": 300,
    "map-in": "random",
    "map-dim": 8,
    "sentence-mechanism": "purkayastha",
    "sentence-epsilon": 1.0,
}


pytestmark = pytest.mark.usefixtures("offline_env")


def test_rows_order_the_bounds() -> None:
    rows = rows_for("c", [1.0, 2.0, 10.0], 10_000, 1e-6, 3, 1.0, "random M1, m' = 16")
    for r in rows:
        eps0 = math.pi * r["epsilon1"]
        assert r["vr_worst"] <= r["fmt_worst"] <= round(eps0, 4) + 1e-4
        assert r["vr_worst"] == pytest.approx(shuffle_amplification(eps0, 10_000, 1e-6).epsilon, abs=1e-4)
        # a pair at distance 1 < pi is never worse off than the worst case; locally at most eps1 * d01
        assert r["vr_metric_at_d01"] <= min(r["vr_worst"], r["epsilon1"] * 1.0) + 1e-4
        assert r["composed_pld"] <= r["composed_advanced"] + 1e-4
        assert r["composed_pld"] == pytest.approx(compose_shuffled_pld([(eps0, 10_000)] * 3, 1e-6), abs=1e-4)
    assert rows[-1]["vr_worst"] == pytest.approx(math.pi * 10.0, abs=1e-4)  # nothing provable at eps0 = 31.4


def test_median_angle_and_files(tmp_path: Path) -> None:
    toml = tmp_path / "small.toml"
    toml.write_text("\n".join(f"{k} = {v!r}".replace("'", '"') for k, v in SMALL.items()) + "\n")
    d01, map_name, pairs = median_angle(toml, pool=200)
    assert 0.3 < d01 < math.pi - 0.3 and map_name == "random M1, m' = 8" and pairs == 200 * 199 // 2
    assert (
        main(["shuffle-table", str(toml), "--epsilons", "1", "--n", "5000", "--pool", "200", "--out", str(tmp_path)])
        == 0
    )
    with (tmp_path / "shuffle_sst2.csv").open() as fh:
        (row,) = list(csv.DictReader(fh))
    assert float(row["median_angle_d01"]) == pytest.approx(d01, abs=1e-4)
    first = (tmp_path / "shuffle_sst2.md").read_text().splitlines()[0]
    assert first.startswith("Command: `") and "sanitas shuffle-table " in first
