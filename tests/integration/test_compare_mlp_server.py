"""``sanitas compare`` of the quickstart with ``server-model = "mlp"`` and ``--label-share auto``: the recipe is
chosen through the public projection at the config's map-dim, so the plan is built (it was refused with "input
dimension 384 does not match the 32 PrivUnit was set up for" unless ``--label-share`` was given)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fl.maps import recipes
from simulations.drivers import compare_calibration as calibration
from simulations.drivers.compare_plan import CompareRequest, build_plan

QUICKSTART = Path(__file__).resolve().parents[2] / "simulations" / "experiments" / "quickstart.toml"


def test_auto_label_share_plans_an_mlp_server_on_the_quickstarts_public_projection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data_dir: Path
) -> None:
    """The quickstart (PrivUnit on the 32-dimensional public projection of 384-dimensional embeddings) with the
    MLP server model: each seed's recipe is chosen on its public draw at map-dim 32, and the plan holds the
    central point, the local point at that recipe (the MLP on the projection) and its noise-free reference. The
    emulated population is cut and the central noise stubbed, to keep the test short; neither touches the map."""
    monkeypatch.setenv("SANITAS_DATA_DIR", str(data_dir))
    monkeypatch.setattr(recipes, "MAX_EMULATED_USERS", 500)
    monkeypatch.setattr(
        calibration, "central_noise_table", lambda targets, q, rounds, delta: dict.fromkeys(targets, 1.0)
    )
    request = CompareRequest(
        str(QUICKSTART), [3.0], [3.0], [1], str(tmp_path), sets=['server-model="mlp"'], central_check=False
    )
    plan = build_plan(request)
    recipe = plan.recipes.by_seed[1][3.0]
    assert recipe.map_dim == 32 and recipe.label_share in recipes.LABEL_SHARES
    local = [r for r in plan.runs if r.values.get("mode") == "local" and "sentence-epsilon" in r.values]
    assert len(plan.runs) == 3 and len(local) == 1, [r.name for r in plan.runs]
    cfg = plan.resolved[local[0].name]
    assert (cfg["server-model"], cfg["map-in"], cfg["map-dim"]) == ("mlp", "projection", 32)
    assert cfg["label-epsilon"] == pytest.approx(recipe.label_share * 3.0)
    assert not any(tmp_path.iterdir())  # a plan writes nothing
