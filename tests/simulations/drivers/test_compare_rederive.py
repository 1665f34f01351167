"""compare_rederive: a committed comparison's shuffled what-ifs re-derived at n = the training reports where the
recorded figure proves it counted private + test users, withdrawn where it does not; the line of another
comparison of the same draws pooled in, refused for another draw."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fl.accounting import shuffle_amplification
from simulations.drivers.compare_rederive import main

DELTA = 1e-6


def _doc(shuffled: float, seed_lr: float = 0.70) -> dict:
    run = "mode=local__seed=1"
    base = {"seed": 1, "run_name": run, "value": 6.0, "test_users": 500, "map_dim": 16, "label_protected": True,
            "parameter": "whole-record-epsilon", "delta": DELTA}  # fmt: skip
    rows = [
        {**base, "series": "local-ldp", "epsilon": 6.0, "epsilon_embedding_only": 5.0, "accuracy": 0.6,
         "test_inputs": "sanitized", "public_only_models": {"server_model": 0.55}},
        {**base, "series": "local-ldp-on-device", "epsilon": 6.0, "accuracy": 0.74, "test_inputs": "clean",
         "public_only_models": {"logistic_regression": seed_lr, "server_model": 0.72}},
        {**base, "series": "local-shuffled-on-device", "epsilon": shuffled, "accuracy": 0.74, "test_inputs": "clean",
         "public_only_models": {"logistic_regression": seed_lr, "server_model": 0.72}},
        {**base, "series": "central-user", "run_name": "central__seed=1", "epsilon": 1.0, "accuracy": 0.8,
         "test_inputs": "clean", "public_only_models": {"logistic_regression": seed_lr}},
    ]  # fmt: skip
    return {"config": "x.toml", "users_by_seed": {"1": 20000}, "test_class_priors": [0.5, 0.5], "runs": rows}


def _write(folder: Path, doc: dict) -> Path:
    folder.mkdir()
    (folder / "compare.json").write_text(json.dumps(doc))
    return folder


def test_shuffled_figures_recomputed_only_where_the_old_one_counted_the_test_users(tmp_path: Path) -> None:
    old = shuffle_amplification(6.0, 20000 + 500, DELTA).epsilon
    good = _write(tmp_path / "good", _doc(old))
    bad = _write(tmp_path / "bad", _doc(old * 1.5))  # not the bound at private + test users: withdrawn
    assert main([str(good), str(bad)]) == 0
    rows = json.loads((good / "compare.json").read_text())["runs"]
    shuffled = next(r for r in rows if r["series"] == "local-shuffled-on-device")
    assert shuffled["epsilon"] == pytest.approx(shuffle_amplification(6.0, 20000, DELTA).epsilon)
    assert shuffled["epsilon"] > old and shuffled["shuffled_over"] == "training"
    central = next(r for r in rows if r["series"] == "central-user")
    assert central["public_only_accuracy"] == 0.72 and central["gain_over_public"] == pytest.approx(0.08)
    withdrawn = next(r for r in json.loads((bad / "compare.json").read_text())["runs"] if "shuffled" in r["series"])
    assert withdrawn["epsilon"] is None and "rerun" in withdrawn["shuffled_withdrawn"]
    before = (good / "compare.json").read_text()
    assert (
        main([str(good)]) == 0 and json.loads((good / "compare.json").read_text())["runs"] == json.loads(before)["runs"]
    )


def test_a_line_from_another_comparison_of_the_same_draw_joins_and_another_draw_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = shuffle_amplification(6.0, 20500, DELTA).epsilon
    other = _write(tmp_path / "other", _doc(old))
    assert main([str(other)]) == 0
    doc = json.loads((other / "compare.json").read_text())
    doc["public_only_line_by_seed"]["1"]["models"]["server_model (map-dim 32)"] = 0.76
    (other / "compare.json").write_text(json.dumps(doc))
    ours = _write(tmp_path / "ours", _doc(old))
    assert main([str(ours), "--line-from", str(other)]) == 0
    central = next(r for r in json.loads((ours / "compare.json").read_text())["runs"] if r["series"] == "central-user")
    assert central["public_only_accuracy"] == 0.76
    another = _write(tmp_path / "another", _doc(old, seed_lr=0.69))
    assert main([str(another), "--line-from", str(other)]) == 2
    assert "another draw" in capsys.readouterr().err
    assert main([str(tmp_path / "missing")]) == 2
    assert main([str(ours), "--line-from"]) == 2 and "--line-from needs a folder" in capsys.readouterr().err
