"""The user-level central round's cost cuts change no result: the local backend's handoff (the nodes'
training as one batch) gives the rounds the byte wire (one node after another) gives, a round not
evaluated (``evaluate-every``) still writes its account and trains the same model, and the account
computed ahead on a background thread is the accountant's own figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import simulations
from fl.accounting.user_level import user_level_epsilon
from tests.support.runs import SYNTHETIC_USER_CENTRAL

SYNTHETIC: dict[str, Any] = {**SYNTHETIC_USER_CENTRAL, "num-server-rounds": 5, "seed": 3}  # a run takes ~1 s
VOLATILE = {"timing", "seconds"}


def _run(tmp_path: Path, name: str, **keys: Any) -> Any:
    return simulations.run({**SYNTHETIC, **keys}, out=tmp_path, run_name=name)


def _stable(rounds: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in VOLATILE} for r in rounds]


def test_the_handoff_gives_the_rounds_the_byte_wire_gives(tmp_path: Path) -> None:
    handed = _run(tmp_path, "handoff")
    wired = _run(tmp_path, "bytes", **{"local-wire": "bytes"})
    assert _stable(handed.rounds) == _stable(wired.rounds)
    assert handed.summary["final"]["accuracy"] == wired.summary["final"]["accuracy"]
    wire_h, wire_b = handed.summary["timings"]["wire"], wired.summary["timings"]["wire"]
    assert (wire_h["mode"], wire_b["mode"]) == ("handoff", "bytes") and wire_h["messages"] == wire_b["messages"]
    # the 3 nodes' train requests and their evaluate requests, each round as one batch of each
    assert wire_h["batched"] == 2 * 3 * 5 and wire_b["batched"] == 0
    # The payload, without Flower's object headers (11% of these small messages; 0.3% of SST-2's 1 MB models).
    assert 0.8 * wire_b["bytes_sent"] <= wire_h["bytes_sent"] <= wire_b["bytes_sent"]


def test_rounds_not_evaluated_keep_their_account_and_train_the_same_model(tmp_path: Path) -> None:
    every = _run(tmp_path, "every", **{"evaluate-every": 1})
    sparse = _run(tmp_path, "sparse", **{"evaluate-every": 2})
    assert [r["evaluated"] for r in sparse.rounds] == [False, True, False, True, True]  # and always the last
    for dense, thin in zip(every.rounds, sparse.rounds, strict=True):
        expected = user_level_epsilon(1.0, 50 / 300, dense["round"], dense["privacy"]["delta"])["epsilon"]
        assert thin["privacy"] == dense["privacy"] and thin["privacy"]["epsilon"] == expected
        if thin["evaluated"]:
            assert thin["accuracy"] == dense["accuracy"]  # the same model: evaluation changes nothing
        else:
            assert thin["accuracy"] is None and thin["macro_f1"] is None and thin["test_users"] == 0
    assert sparse.summary["final"]["accuracy"] == every.summary["final"]["accuracy"]
    assert (sparse.folder / "accuracy_vs_round.png").is_file()
    wire_e, wire_s = every.summary["timings"]["wire"], sparse.summary["timings"]["wire"]
    assert wire_s["messages"] < wire_e["messages"]


@pytest.mark.parametrize(("rounds", "every", "evaluated"), [(5, 0, 5), (30, 0, 10), (100, 0, 10), (30, 7, 5)])
def test_the_default_scores_about_ten_times_a_run(rounds: int, every: int, evaluated: int) -> None:
    import torch
    from torch import nn

    from fl.config import as_run_config
    from fl.wire import CohortInfo
    from strategies.central_user import UserLevelDPFedAvg

    cfg = as_run_config({**SYNTHETIC, "num-server-rounds": rounds, "evaluate-every": every})
    node = CohortInfo(0, 300, 300, 300, 0, 60, 60, 2, 16, 16, 16)
    torch.manual_seed(0)
    strategy = UserLevelDPFedAvg(cfg, {1: node}, nn.Linear(16, 2))
    assert sum(strategy.evaluates(t) for t in range(1, rounds + 1)) == evaluated and strategy.evaluates(rounds)


def test_an_account_computed_ahead_is_the_accountants_figure() -> None:
    from fl.accounting import user_level
    from fl.config import as_run_config

    central = as_run_config({**SYNTHETIC, "central-noise-multiplier": 1.3}).central
    direct = user_level.user_privacy_record(central, 0.05, 1000, 7)
    user_level.account_ahead(central, 0.05, 1000, 7)
    assert user_level._ahead  # pending (or done) on the background thread
    assert user_level.user_privacy_record(central, 0.05, 1000, 7) == direct and not user_level._ahead
