"""Every shuffled what-if committed under docs/results counts the training reports only: each figure is the bound
at n = that seed's private users (each released once, in one round), within 1%, or is withdrawn with its reason;
a two-cohort run's figure is its own round's (marked as counting training reports) and the largest over its
cohorts, so it is at least the bound at all the private users."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from fl.accounting import shuffle_amplification

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
DOCS = sorted(RESULTS.glob("**/compare.json"))


@pytest.mark.parametrize("path", DOCS, ids=[str(p.relative_to(RESULTS)) for p in DOCS])
def test_each_shuffled_figure_is_the_bound_at_the_training_reports(path: Path) -> None:
    doc = json.loads(path.read_text())
    rows = doc.get("runs") or []
    ldp = {r["run_name"]: r for r in rows if r["series"] in ("local-ldp", "local-ldp-labels-clear")}
    cohorts = "cohorts" in str(doc.get("config", ""))
    checked: dict[tuple[float, int, float], float] = {}
    for row in rows:
        if not row["series"].startswith("local-shuffled") or row.get("epsilon") is None:
            if row["series"].startswith("local-shuffled"):
                assert row.get("epsilon_embedding_only") is None or row.get("shuffled_over") == "training"
            continue
        assert row.get("shuffled_over") == "training", f"{row['run_name']}: a shuffled figure of unknown reports"
        eps0 = ldp[row["run_name"]]["epsilon"]
        users = int((doc.get("users_by_seed") or {}).get(str(row["seed"]), doc.get("users")))
        key = (float(eps0), users, float(row["delta"]))
        if key not in checked:
            checked[key] = shuffle_amplification(*key).epsilon
        if cohorts:  # each cohort is half the users: less amplification than all of them together
            assert row["epsilon"] >= checked[key] * 0.99
        else:
            assert math.isclose(row["epsilon"], checked[key], rel_tol=0.01), (row["run_name"], row["epsilon"])
