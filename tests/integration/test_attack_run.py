"""``sanitas attack`` on a results folder: the attack state a run leaves, read back and attacked from the CLI.

The folder is made in process (no Ray: the Flower runs that write ``attack/state.pt`` are checked in
tests/integration/test_simulation.py): a non-private SST-2 "run" (identity M1, no sanitizer) whose model
is trained on its members' clean embeddings.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from fl.attacks.state import AttackState, from_model
from fl.data import datasets as data
from fl.maps.pipeline import build_model, train_epochs
from simulations.analyses.attack import Pipeline
from simulations.cli import main
from simulations.runtime.api import resolve_config

RUN = {
    "dataset": "sst2",
    "train-size": 120,
    "test-size": 40,
    "public-fraction": 0.5,
    "users-per-node": 20,
    "map-in": "identity",
    "sentence-mechanism": "none",
    "label-mechanism": "none",
    "server-epochs": 30,
    "num-server-rounds": 1,
}


@pytest.fixture
def folder(tmp_path: Path, offline_env: None) -> Path:
    cfg = resolve_config(RUN, {})
    ds = data.load(cfg.data, cfg.users, cfg.release.level)
    members = np.arange(len(ds.train))
    texts = [ds.train[int(i)]["text"] for i in members]
    y = torch.as_tensor(np.asarray([ds.train[int(i)]["label"] for i in members]))
    model = build_model(384, 384, 2, hidden_dim=cfg.server.hidden_dim, seed=cfg.users.seed)
    pipe = Pipeline(cfg, from_model(model, None, members, "every training document"))
    x = pipe.clean(texts)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    train_epochs(model, opt, x, y, 30, 32, torch.Generator().manual_seed(0))
    run = tmp_path / "run"
    from_model(model, None, members, "documents whose releases the server stored").save(run)
    (run / "config.json").write_text(json.dumps({"config": dict(cfg)}))
    (run / "summary.json").write_text(json.dumps({"final": {"accuracy": 0.5}, "privacy": {"epsilon_ldp": None}}))
    return run


def test_attack_cli_on_a_non_private_run(folder: Path) -> None:
    state = AttackState.load(folder)
    assert state.m_prime == 384 and state.num_classes == 2 and 40 <= state.members.size <= 80  # the private half
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


def test_attack_cli_errors(tmp_path: Path) -> None:
    assert main(["attack", str(tmp_path)]) == 2  # no run there: one clear error line
    with pytest.raises(FileNotFoundError, match="no attack state"):
        AttackState.load(tmp_path)
