"""Failing nodes in real simulations (Ray backend, real encoder, SST-2 subset) at fault-rate 0.2.

Local mode, ``drop-reply``: nodes draw and cache their releases and the replies of scheduled nodes
are lost. Hand count: with cached releases every user ever asked for a release is charged exactly
once, whether its reply arrived, was lost, or its cached row was re-sent later; users never asked
are not charged. Without the conservative charge of lost replies, a user whose only release was
lost (or re-sent later, unmarked as fresh) would be missing from the ledger.

Central mode (user unit), ``raise``: the run completes, the missing sums count as zero, and the
per-user figure is the accountant's for (z, q, rounds), exactly as without faults.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fl import config as config_mod
from fl.accounting.user_level import user_level_epsilon
from tests.support.simulation import BASE, rounds_of, run_cli

TRAIN, TEST = 60, 40  # test_simulation's BASE: 10 nodes of 6 users, 2 rounds, half the users per round


def test_local_mode_at_20_percent_dropped_replies(tmp_path: Path, data_dir: Path, cache_dir: Path) -> None:
    proc = run_cli(tmp_path, data_dir, cache_dir, {"fault-rate": "0.2", "fault-kind": '"drop-reply"'})
    assert proc.returncode == 0, proc.stderr[-3000:]
    rounds = rounds_of(tmp_path / "out" / "r")
    assert [r["round"] for r in rounds] == [1, 2]
    dropped = sum(r["faults"][stage]["dropped"] for r in rounds for stage in ("train", "evaluate"))
    assert dropped > 0  # seed 42 at rate 0.2 drops some of the 2 x (10 + 7) replies
    for r in rounds:
        assert r["faults"]["train"]["error"] == r["faults"]["train"]["timeout"] == 0
        assert (r["test_users"] == TEST) == (r["faults"]["evaluate"]["dropped"] == 0)  # scored on what arrived
    # Hand count of the ledger: the users asked in rounds 1 and 2 (ReleaseTraining.sample_users).
    seed, k = int(config_mod.DEFAULTS["seed"]), int(np.ceil(float(BASE["fraction-train"]) * TRAIN))
    asked = set()
    for server_round in (1, 2):
        rng = np.random.default_rng([seed, server_round])
        asked |= set(rng.choice(TRAIN, size=k, replace=False).tolist())
    p = rounds[-1]["privacy"]
    assert p["users_released"] == len(asked) + TEST  # every test user is asked every round
    assert p["max_releases_per_user"] == 1 and p["releases"] == len(asked) + TEST
    assert p["epsilon_ldp"] == pytest.approx(np.pi * 10.0)
    lost = rounds[-1]["faults"]["lost_releases_charged"]
    assert lost["train"] + lost["test"] > 0


def test_central_user_level_at_20_percent_raising_nodes(tmp_path: Path, data_dir: Path, cache_dir: Path) -> None:
    extra = {
        "mode": '"central"',
        "central-unit": '"user"',
        "central-cohort-size": "20.0",
        "central-noise-multiplier": "1.0",
        "central-delta": "1e-5",
        "fault-rate": "0.2",
        "fault-kind": '"raise"',
    }
    proc = run_cli(tmp_path, data_dir, cache_dir, extra)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rounds = rounds_of(tmp_path / "out" / "r")
    assert [r["round"] for r in rounds] == [1, 2]
    assert sum(r["faults"][s]["error"] for r in rounds for s in ("train", "evaluate")) > 0
    q = 20.0 / TRAIN
    for r in rounds:
        expected = user_level_epsilon(1.0, q, r["round"], 1e-5)
        assert r["privacy"]["epsilon"] == pytest.approx(expected["epsilon"], rel=1e-9)
        assert 0 <= r["test_users"] <= TEST
    assert config_mod.DEFAULTS["fault-rate"] == 0.0  # faults are opt-in
