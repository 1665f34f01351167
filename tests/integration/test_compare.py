"""``sanitas compare``: the run plan, the rows read from results folders, the CSV and the plot
(fake results folders; the runs themselves are ordinary ``sanitas run`` jobs tested elsewhere)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from fl.config import ConfigError
from simulations import compare as cmp


def _fake(folder: Path, accuracy: float, privacy: dict, holds: bool = True) -> None:
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(
        json.dumps(
            {
                "final": {"accuracy": accuracy, "macro_f1": accuracy - 0.01},
                "privacy": privacy,
                "ldp_guarantee_holds": holds,
                "evaluation_covered": False,
            }
        )
    )


def test_plan_has_local_central_and_reference_runs() -> None:
    runs = cmp.plan(["2", "6"], ["1.0"], ["users-per-node=50"])
    modes = [
        (
            r.values.get("mode"),
            r.values.get("sentence-epsilon"),
            r.values.get("central-noise-multiplier"),
            r.values.get("sentence-mechanism"),
            r.values.get("users-per-node"),
        )
        for r in runs
    ]
    assert modes == [
        ("local", 2, None, None, None),
        ("local", 6, None, None, None),
        ("central", None, 1.0, None, 50),
        ("local", None, None, "none", None),
    ]
    with pytest.raises(ConfigError):
        cmp.plan([], ["1.0"], [])
    with pytest.raises(ConfigError, match="key=value"):
        cmp.plan(["2"], ["1.0"], ["users-per-node"])


def test_rows_csv_and_plot(tmp_path: Path) -> None:
    """Issue 11 item 1: with labels in the clear the local figure covers the embedding only, so it
    is not a whole-record epsilon: ``epsilon`` is empty (kept off the axis shared with central DP,
    which covers the whole record), ``label_protected`` is false and the embedding-only figure
    stays in its own column. Every row says evaluation is not covered."""
    runs = cmp.plan(["2"], ["1.0"], [])
    local, central, reference = runs
    _fake(
        tmp_path / local.name,
        0.6,
        {
            "epsilon_ldp": 2 * math.pi,
            "label_protected": False,
            "delta_total": 0.0,
            "epsilon_total": None,
            "epsilon_shuffled_total": 0.8,
            "delta_shuffled_total": 1e-6,
        },
    )
    _fake(tmp_path / central.name, 0.7, {"mode": "central", "epsilon": 20.1, "delta": 1e-5}, holds=False)
    rows = [row for run in runs for row in cmp.rows_for(run, tmp_path)]
    assert [r["series"] for r in rows] == ["local-ldp", "local-shuffled", "central"]  # reference not run yet
    assert rows[0]["epsilon"] is None and rows[1]["epsilon"] is None
    assert rows[0]["label_protected"] is False and rows[0]["epsilon_embedding_only"] == pytest.approx(2 * math.pi)
    assert rows[1]["epsilon_embedding_only"] == 0.8
    assert rows[2]["epsilon"] == 20.1 and rows[2]["delta"] == 1e-5 and rows[2]["label_protected"] is True
    assert cmp._points(rows, "local-ldp", "epsilon") == [] and cmp._points(rows, "central", "epsilon") == [(20.1, 0.7)]
    _fake(tmp_path / reference.name, 0.8, {})
    rows = [row for run in runs for row in cmp.rows_for(run, tmp_path)]
    csv_path, png = cmp.write(rows, tmp_path, "t")
    table = list(csv.DictReader(csv_path.open()))
    assert [r["series"] for r in table] == ["local-ldp", "local-shuffled", "central", "non-private"]
    assert table[3]["epsilon"] == "" and png.stat().st_size > 1000
    assert [r["label_protected"] for r in table[:3]] == ["false", "false", "true"]
    assert table[0]["epsilon"] == "" and float(table[0]["epsilon_embedding_only"]) == pytest.approx(2 * math.pi)
    assert {r["evaluation_covered"] for r in table} == {"false"}


def test_a_run_without_ldp_gets_no_local_epsilon(tmp_path: Path) -> None:
    """A local run whose guarantee does not hold (leaky M1) reports no epsilon in any column."""
    local = cmp.plan(["2"], ["1.0"], [])[0]
    _fake(tmp_path / local.name, 0.9, {"ldp_guarantee_holds": False, "label_protected": True}, holds=False)
    ldp, shuffled = cmp.rows_for(local, tmp_path)
    assert ldp["epsilon"] is None and ldp["epsilon_embedding_only"] is None and shuffled["epsilon"] is None


def test_joint_figures_when_labels_are_protected(tmp_path: Path) -> None:
    local = cmp.plan(["2"], ["1.0"], [])[0]
    _fake(
        tmp_path / local.name,
        0.6,
        {
            "epsilon_ldp": 6.28,
            "epsilon_total": 7.28,
            "label_protected": True,
            "epsilon_shuffled_total": 0.8,
            "epsilon_shuffled_joint_total": 0.9,
            "delta_shuffled_joint_total": 1e-6,
        },
    )
    ldp, shuffled = cmp.rows_for(local, tmp_path)
    assert ldp["epsilon"] == 7.28 and shuffled["epsilon"] == 0.9
