"""simulations.analyses.composition_table: mechanism-specific events never loosen a composed figure, and say so."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulations.analyses.composition_table import rows
from simulations.cli import main


def test_specific_events_are_never_looser_and_name_their_accountant(tmp_path: Path) -> None:
    table = rows()
    for r in table:
        assert r["after_epsilon"] <= r["before_epsilon"] + 1e-9, r["row"]
        assert r["before_accountant"].startswith("pld-generic") or r["before_accountant"] == "basic"
        assert "DpEvent" in r["after_accountant"], r["row"]
    by_row = {r["row"].split(",")[0]: r for r in table}
    # the Gaussian gains most: 20 releases of (1, 1e-5) compose to about 4.5, not 20
    assert by_row["word_gaussian (1"]["after_epsilon"] == pytest.approx(4.4986, abs=2e-3)
    assert by_row["word_laplace eps 1 per word"]["after_epsilon"] == pytest.approx(19.671, abs=2e-3)
    assert main(["composition-table", "--out", str(tmp_path)]) == 0 and (tmp_path / "composition.csv").is_file()
