"""Choosing a local recipe on public data only (``sanitas tune``): the budget split is exact, the
emulation reads only what it is given, and it ranks a recipe that keeps the task above one that does not."""

from __future__ import annotations

import math

import pytest
import torch

from fl import config
from fl.maps import recipes


def _public(n: int = 600, d: int = 24, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Two Gaussian classes, separated along the first axis (a public logistic regression finds it)."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 2, (n,), generator=g)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    x[:, 0] += 3.0 * (2 * y - 1)
    return x.float(), y


@pytest.mark.parametrize(
    ("mechanism", "per_unit"), [("purkayastha", math.pi), ("planar_laplace", 2.0), ("privunit", 1.0), ("class_rr", 1.0)]
)
def test_the_split_spends_exactly_the_whole_record_budget(mechanism: str, per_unit: float) -> None:
    cfg = config.resolve({"sentence-mechanism": mechanism, "label-mechanism": "rr", "map-dim": 2})
    assert recipes.pure_per_unit(cfg, 2, 2) == pytest.approx(per_unit, rel=1e-12)
    keys = recipes.split_budget(cfg, 6.28, 0.1, 2, 2)
    assert keys["label-epsilon"] == pytest.approx(0.628)
    assert keys["sentence-epsilon"] * per_unit + keys["label-epsilon"] == pytest.approx(6.28, rel=1e-12)
    clear = recipes.split_budget(cfg.replace(**{"label-mechanism": "none"}), 6.28, 0.1, 2, 2)
    assert "label-epsilon" not in clear and clear["sentence-epsilon"] * per_unit == pytest.approx(6.28)


def test_the_emulation_prefers_the_task_aware_release_to_a_random_projection() -> None:
    """At pure 3 per user on a public set with one informative axis, the public class through RR keeps the
    task (accuracy near e^eps / (e^eps + 1) times the public model's), a 16-dimensional random projection
    through PrivUnit does not; the choice is deterministic for the seed."""
    x, y = _public()
    cfg = config.resolve({"seed": 3, "server-epochs": 3, "hidden-dim": 32, "public-fraction": 0.25})
    grid = [
        recipes.Candidate(
            "task-aware",
            {
                "map-in": "supervised",
                "map-dim": 2,
                "map-scale": 1.0,
                "sentence-mechanism": "class_rr",
                "label-mechanism": "rr",
            },
            0.1,
        ),
        recipes.Candidate(
            "random-privunit",
            {"map-in": "random", "map-dim": 16, "sentence-mechanism": "privunit", "label-mechanism": "rr"},
            0.1,
        ),
    ]
    best, table = recipes.choose(cfg, 3.0, x, y, 2, num_users=2000, candidates=grid, repeats=2)
    scores = {s.candidate.name: s.accuracy for s in table}
    assert best.candidate.name == "task-aware"
    keep = math.exp(2.7) / (math.exp(2.7) + 1)
    assert scores["task-aware"] > 0.85 * keep
    assert scores["random-privunit"] < scores["task-aware"] - 0.1
    again, _ = recipes.choose(cfg, 3.0, x, y, 2, num_users=2000, candidates=grid, repeats=2)
    assert again.accuracy == best.accuracy and again.values == best.values


def test_the_default_grid_names_every_share_and_mechanism() -> None:
    grid = recipes.default_candidates(4)
    assert {c.keys["sentence-mechanism"] for c in grid} == {"class_rr", "privunit", "purkayastha"}
    assert {c.label_share for c in grid} == set(recipes.LABEL_SHARES)
    assert all(c.keys["map-dim"] == 4 for c in grid)  # K - 1 = 3 logit coordinates and the constant
