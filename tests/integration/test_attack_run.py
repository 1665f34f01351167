"""``sanitas attack`` on a real results folder: a tiny non-private run (identity M1, no sanitizer) leaves
its attack state, and the attacks run on it from the CLI and write attacks.json / attacks.csv."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from simulations.cli import main
from tests.integration.test_simulation import _run


@pytest.fixture
def _env(monkeypatch: pytest.MonkeyPatch, data_dir: Path, cache_dir: Path) -> None:
    monkeypatch.setenv("SANITAS_DATA_DIR", str(data_dir))
    monkeypatch.setenv("SANITAS_CACHE_DIR", str(cache_dir))


@pytest.mark.usefixtures("_env")
def test_attack_cli_on_a_non_private_run(tmp_path: Path, data_dir: Path, cache_dir: Path) -> None:
    extra = {
        "sentence-mechanism": '"none"',
        "map-in": '"identity"',
        "public-fraction": "0.5",
        "train-size": "80",
        "users-per-node": "20",
    }
    proc = _run(tmp_path, data_dir, cache_dir, extra)
    assert proc.returncode == 0, proc.stderr[-3000:]
    folder = tmp_path / "out" / "r"
    assert (folder / "attack" / "state.pt").is_file()
    argv = ["attack", str(folder), "--attacks", "mia,lira,inversion", "--targets", "20", "--shadows", "2"]
    assert main(argv) == 0
    result = json.loads((folder / "attacks.json").read_text())
    attacks = result["attacks"]
    assert {r["attack"] for r in attacks["mia"]} == {"confidence", "loss", "entropy", "modified_entropy"}
    assert result["nonmembers_are"].startswith("training-split documents outside the run's subsample")
    assert 0.0 <= attacks["lira"]["success"] <= 1.0 and attacks["lira"]["shadows"] == 2
    # no sanitizer: a release IS the clean embedding, so nearest neighbour finds every victim's own text
    assert attacks["inversion"]["exact_recovery"] == 1.0
    for r in [*attacks["mia"], attacks["lira"], attacks["inversion"]]:
        assert r["knowledge"]  # every result says what the attacker is assumed to know
    with (folder / "attacks.csv").open() as fh:
        (row,) = list(csv.DictReader(fh))
    assert row["mechanism"] == "none" and float(row["inversion_exact"]) == 1.0
    assert main(["attack", str(tmp_path), "--attacks", "nonsense"]) == 2  # no run there: a clear error
