"""``--label-share auto`` for a config whose server model is not ``class-means`` on the public projection
(``map-in = "projection"``, ``server-model = "mlp"``): the recipe is emulated through the projection the run
builds, so every emulated release has the config's map-dim, never the encoder's dimension
(simulations.drivers.compare_recipes, fl.maps.recipes)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch

from fl import config
from fl.maps import recipes
from fl.maps.public_model import fit_public_model, projection_map
from simulations.drivers import compare_recipes
from simulations.drivers.inputs import RunInputs

D, M_PRIME = 24, 8


def _public(n: int = 400, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Two Gaussian classes in D dimensions, separated along the first axis."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 2, (n,), generator=g)
    x = torch.randn(n, D, generator=g, dtype=torch.float64)
    x[:, 0] += 3.0 * (2 * y - 1)
    return x.float(), y


def _mlp_on_projection() -> config.RunConfig:
    """The quickstart's release (PrivUnit, unbiased, on the public projection) with the MLP server model."""
    return config.resolve(
        {
            "seed": 3,
            "public-fraction": 0.25,
            "map-in": "projection",
            "map-dim": M_PRIME,
            "sentence-mechanism": "privunit",
            "sentence-options": "unbiased = true",
            "label-mechanism": "rr",
            "server-model": "mlp",
            "server-epochs": 5,
            "hidden-dim": 16,
        }
    )


def _inputs(cfg: config.RunConfig) -> RunInputs:
    """A seed's inputs without loading a dataset: the public draw, its groups, the population, the classes."""
    inputs = RunInputs(cfg)
    x, y = _public()
    inputs.__dict__.update(
        public=(x, y), public_groups=np.arange(len(y)), train_users=300, dataset=SimpleNamespace(num_classes=2)
    )
    return inputs


def test_auto_label_share_chooses_a_recipe_for_an_mlp_server_on_the_public_projection() -> None:
    """Failed before the fix: the candidates keep map-in = "projection" with server-model = "mlp", and the
    emulation gave PrivUnit (set up for m' = 8) the raw 24-dimensional public embeddings ("input dimension 24
    does not match the 8 PrivUnit was set up for"). Now a share of the grid is chosen at the config's map-dim."""
    cfg = _mlp_on_projection()
    grid = compare_recipes.candidates(cfg)
    assert {c.keys["map-in"] for c in grid} == {"projection"} and {c.keys["server-model"] for c in grid} == {"mlp"}
    chosen = compare_recipes.choose(_inputs(cfg), [3.0], grid)
    assert chosen[3.0].map_dim == M_PRIME and chosen[3.0].label_share in recipes.LABEL_SHARES


def test_the_emulated_projection_is_the_runs_projection_of_the_fitting_rows() -> None:
    """The map an MLP candidate on the public projection is emulated through is M1 of map-in = "projection"
    built from the fitting rows alone (their public model, then its projection), [d + 1, m'] as the run's; with
    a large budget the emulated MLP reads the task through it (the first axis separates the classes)."""
    cfg = _mlp_on_projection()
    x, y = _public()
    fit = torch.arange(300)
    matrix = recipes._start_map(cfg.release, x[fit], y[fit], 2)
    assert matrix is not None and tuple(matrix.shape) == (D + 1, M_PRIME)
    expected = projection_map(x[fit], fit_public_model(x[fit], y[fit], 2), M_PRIME)
    torch.testing.assert_close(matrix, expected)
    candidate = recipes.Candidate(
        "mlp-projection", {"map-in": "projection", "map-dim": M_PRIME, "server-model": "mlp"}, 0.2
    )
    best, _ = recipes.choose(
        recipes.RecipeSpec.from_config(cfg), 40.0, x, y, 2, 2000, np.arange(len(y)), candidates=[candidate], repeats=1
    )
    assert best.values["map-dim"] == M_PRIME and best.accuracy > 0.9
    assert best.extra["test_inputs"] == "sanitized"
