"""``--label-share auto`` for a config whose server model is not ``class-means`` on the public projection
(``map-in = "projection"``, ``server-model = "mlp"``): the recipe is emulated through the projection the run
builds, so every emulated release has the config's map-dim, never the encoder's dimension
(simulations.drivers.compare_recipes, fl.maps.recipes)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from fl import config
from fl.maps import recipes
from fl.maps.public_model import fit_public_model, projection_map
from simulations.drivers import compare_recipes
from simulations.drivers.inputs import RunInputs

D, M_PRIME = 24, 8


#: The two-cohort class-means protocol of the configs below (their data keys aside).
TWO_COHORT_KEYS = {
    "seed": 1,
    "cohorts": 2,
    "num-server-rounds": 2,
    "cohort-map-dim": 6,
    "map-in": "projection",
    "map-dim": 4,
    "sentence-mechanism": "privunit",
    "sentence-options": "unbiased = true",
    "label-mechanism": "rr",
    "server-model": "class-means",
    "class-means-covariance": "releases",
}


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


class _Untouchable:
    """A test split whose users must not be read: its size is known (a count, like the population's), any
    document, label or column of it raises."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, key: object) -> object:
        raise AssertionError(f"the recipe choice read a test user ({key!r})")

    def __iter__(self) -> object:
        raise AssertionError("the recipe choice read a test user (iterated the test split)")

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"the recipe choice read a test user (.{name})")


def _two_cohort_csv(tmp_path: Path) -> config.RunConfig:
    """A two-cohort class-means config on a small file of three classes of questions, with its own test file."""
    rng = np.random.default_rng(0)
    words = ("alpha", "beta", "gamma")
    rows = [(f"{words[c]} question number {i} about {words[c]}", int(c)) for i, c in enumerate(rng.integers(0, 3, 270))]
    (tmp_path / "train.csv").write_text("text,label\n" + "".join(f"{t},{c}\n" for t, c in rows[:240]))
    (tmp_path / "test.csv").write_text("text,label\n" + "".join(f"{t},{c}\n" for t, c in rows[240:]))
    return config.resolve(
        {
            "dataset": str(tmp_path / "train.csv"),
            "test-file": str(tmp_path / "test.csv"),
            "public-size": 90,
            **TWO_COHORT_KEYS,
        }
    )


def test_the_choice_never_reads_a_test_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 65: every recipe and option of a comparison, the two-cohort ones included, is chosen on public data
    only. With the test split poisoned (any document, label or column of it raises; its size stays a count) the
    seed's choice of share, map-dim, cohort-map-dim and covariance runs to the end and is the choice made without
    the poison. Power: the same poison stops a read of the test labels (``RunInputs.test_priors``)."""
    from fl.data import datasets
    from fl.maps import public_start

    cfg = _two_cohort_csv(tmp_path)
    real_load = datasets.load

    def embeddings(spec: object, device: object) -> tuple[torch.Tensor, torch.Tensor]:
        public = real_load(cfg.data, cfg.users, cfg.release.level).public
        y = torch.tensor(public["label"][:])
        x = torch.randn(len(y), 12, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
        x[torch.arange(len(y)), y] += 2.5
        return x.float(), y

    monkeypatch.setattr(public_start, "public_embeddings", embeddings)
    grid = recipes.class_means_candidates(
        dims=(4,), shares=(0.35,), cohort_dims=(4, 6), covariances=("public", "releases")
    )
    clean = compare_recipes.choose(RunInputs(cfg), [3.0], grid)
    assert clean[3.0].cohort_map_dim in (4, 6) and clean[3.0].class_means_covariance in ("public", "releases")

    def poisoned(data: object, users: object, level: str) -> object:
        loaded = real_load(data, users, level)
        return replace(loaded, test=_Untouchable(len(loaded.test)))

    monkeypatch.setattr(datasets, "load", poisoned)
    with pytest.raises(AssertionError, match="read a test user"):
        _ = RunInputs(cfg).test_priors
    assert compare_recipes.choose(RunInputs(cfg), [3.0], grid) == clean


def test_a_recipe_sets_its_cohort_options_and_a_fallback_its_server_in_the_points_keys() -> None:
    """The keys a seed's recipe adds to its local points: the cohort-map-dim and covariance it chose where they
    differ from the config's, and for a public-only fallback the server that ships the public-only model; each
    point's keys then name the run, and its whole-record epsilon is found back from them."""
    from simulations.drivers import compare_fallback, compare_plan

    cfg = _two_cohort_csv_config()
    chosen = compare_recipes.Recipe(0.35, 8, 16, "public", emulated_accuracy=0.7, public_only_accuracy=0.6)
    fallback = compare_recipes.Recipe(0.5, 4, 6, "releases", fallback=True, holdout_lacks=(0,))
    assert chosen.keys(cfg) == {"cohort-map-dim": 16, "class-means-covariance": "public"}
    assert fallback.keys(cfg) == {"strategy": compare_fallback.FALLBACK_STRATEGY}  # the config's dims
    assert compare_recipes.Recipe(0.1, 4).keys(cfg) == {}
    assert fallback.describe() == "0.5 / 4 / 6 public-only fallback" and chosen.describe() == "0.35 / 8 / 16 public"
    points = compare_plan.local_points(
        cfg,
        [3.0, 6.0],
        {3.0: 0.35, 6.0: 0.5},
        4,
        3,
        map_dims={3.0: 8},
        recipe_keys={3.0: chosen.keys(cfg), 6.0: fallback.keys(cfg)},
    )
    assert points[0][0]["cohort-map-dim"] == 16 and points[0][0]["class-means-covariance"] == "public"
    assert points[1][0]["strategy"] == compare_fallback.FALLBACK_STRATEGY
    runs = compare_plan.plan({1: [keys for keys, _ in points]}, {1.0: 1.0}, [1])
    local = [r for r in runs if r.values.get("mode") == "local" and "sentence-epsilon" in r.values]
    assert sorted(compare_plan.point_total(r, points) for r in local) == [3.0, 6.0]
    assert all(len(r.name) < 200 for r in local)  # a run's name is a file name
    assert any("strategy=simulations.drivers.compare_fallback-PublicOnly" in r.name for r in local)
    # The noise-free reference of each map-dim runs with the cohort options of the recipe it is the ceiling of.
    references = {r.values.get("map-dim"): r.values for r in runs if r.values.get("sentence-mechanism") == "none"}
    assert references[8]["cohort-map-dim"] == 16 and references[8]["class-means-covariance"] == "public"
    assert "cohort-map-dim" not in references[None] and "strategy" not in references[None]


def test_recipes_json_keeps_the_new_fields_and_a_choice_of_the_old_chooser_is_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cohort options, the fallback and the hold-out's lacking classes are kept in recipes.json and read back
    as they were chosen; a choice stored by the chooser before issue 65 (its digest without the chooser) is not
    reused; the printed table says ``public-only fallback``."""
    import hashlib
    import json

    cfg = _two_cohort_csv_config()
    inputs = RunInputs(cfg)
    made = compare_recipes.Recipe(0.5, 4, 6, "releases", True, 0.61, 0.64, (0,))
    calls: list[list[float]] = []

    def fake(inputs: object, totals: list[float], grid: object) -> dict:
        calls.append(list(totals))
        return dict.fromkeys(totals, made)

    monkeypatch.setattr(compare_recipes, "choose", fake)
    tuning = {k: v for k, v in cfg.items() if k not in ("run-name", "out-dir")}
    old = hashlib.sha256(
        json.dumps(
            {"config": tuning, "grid": [c.name for c in compare_recipes.candidates(cfg)]}, sort_keys=True, default=str
        ).encode()
    ).hexdigest()
    stale = {"inputs": old, "recipes": {"3": {"label_share": 0.1, "map_dim": 64}}}
    (tmp_path / compare_recipes.RECIPES_FILE).write_text(json.dumps({str(cfg["seed"]): stale}))
    first = compare_recipes.choose_recipes({1: inputs}, [3.0], tmp_path)
    assert calls == [[3.0]] and first.by_seed[1][3.0] == made
    first.save(tmp_path)
    again = compare_recipes.choose_recipes({1: inputs}, [3.0], tmp_path)
    assert calls == [[3.0]] and again.by_seed[1][3.0] == made and not again.changed
    kept = json.loads((tmp_path / compare_recipes.RECIPES_FILE).read_text())["1"]["recipes"]["3"]
    assert kept["fallback"] is True and kept["cohort_map_dim"] == 6 and kept["holdout_lacks"] == [0]
    compare_recipes.print_recipes(again.by_seed, [3.0], 4)
    assert "public-only fallback" in capsys.readouterr().out


def _two_cohort_csv_config() -> config.RunConfig:
    """The keys of :func:`_two_cohort_csv`'s config without its files (nothing here loads data)."""
    return config.resolve(
        {
            "public-fraction": 0.25,
            **TWO_COHORT_KEYS,
        }
    )
