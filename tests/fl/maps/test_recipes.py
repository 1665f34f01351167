"""Choosing a local recipe on public data only (``sanitas tune``): the budget split is exact, the
emulation reads only what it is given, and it ranks a recipe that keeps the task above one that does not."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from fl import config
from fl.maps import recipes
from tests.support.run_data import load_run, run_public_groups


def _public(n: int = 600, d: int = 24, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Two Gaussian classes, separated along the first axis (a public logistic regression finds it)."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 2, (n,), generator=g)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    x[:, 0] += 3.0 * (2 * y - 1)
    return x.float(), y


#: The task-aware release's keys: the public classifier's class through RR on the supervised map, RR labels.
TASK_AWARE = {
    "map-in": "supervised",
    "map-dim": 2,
    "map-scale": 1.0,
    "sentence-mechanism": "class_rr",
    "label-mechanism": "rr",
}


@pytest.mark.parametrize(
    ("mechanism", "per_unit"), [("purkayastha", math.pi), ("planar_laplace", 2.0), ("privunit", 1.0), ("class_rr", 1.0)]
)
def test_the_split_spends_exactly_the_whole_record_budget(mechanism: str, per_unit: float) -> None:
    cfg = config.resolve({"sentence-mechanism": mechanism, "label-mechanism": "rr", "map-dim": 2})
    assert recipes.pure_per_unit(cfg.release, 2, 2) == pytest.approx(per_unit, rel=1e-12)
    keys = recipes.split_budget(cfg.release, 6.28, 0.1, 2, 2)
    assert keys["label-epsilon"] == pytest.approx(0.628)
    assert keys["sentence-epsilon"] * per_unit + keys["label-epsilon"] == pytest.approx(6.28, rel=1e-12)
    clear = recipes.split_budget(cfg.replace(**{"label-mechanism": "none"}).release, 6.28, 0.1, 2, 2)
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
            TASK_AWARE,
            0.1,
        ),
        recipes.Candidate(
            "random-privunit",
            {"map-in": "random", "map-dim": 16, "sentence-mechanism": "privunit", "label-mechanism": "rr"},
            0.1,
        ),
    ]
    best, table = recipes.choose(
        recipes.RecipeSpec.from_config(cfg),
        3.0,
        x,
        y,
        2,
        num_users=2000,
        groups=np.arange(len(y)),
        candidates=grid,
        repeats=2,
    )
    scores = {s.candidate.name: s.accuracy for s in table}
    assert best.candidate.name == "task-aware"
    keep = math.exp(2.7) / (math.exp(2.7) + 1)
    assert scores["task-aware"] > 0.85 * keep
    assert scores["random-privunit"] < scores["task-aware"] - 0.1
    again, _ = recipes.choose(
        recipes.RecipeSpec.from_config(cfg),
        3.0,
        x,
        y,
        2,
        num_users=2000,
        groups=np.arange(len(y)),
        candidates=grid,
        repeats=2,
    )
    assert again.accuracy == best.accuracy and again.values == best.values


def test_the_default_grid_names_every_share_and_mechanism() -> None:
    grid = recipes.default_candidates(4)
    assert {c.keys["sentence-mechanism"] for c in grid} == {"class_rr", "privunit", "purkayastha"}
    assert {c.label_share for c in grid} == set(recipes.LABEL_SHARES)
    assert all(c.keys["map-dim"] == 4 for c in grid)  # K - 1 = 3 logit coordinates and the constant


#: Twenty public documents in eight source groups of 1 to 4 documents.
GROUPS = np.repeat(np.arange(8), [1, 2, 3, 4, 1, 2, 3, 4])


def test_the_hold_out_keeps_every_source_group_on_one_side() -> None:
    """Whole groups in a seeded order until the hold-out holds a fifth of the documents (4 of 20): seed 0
    draws groups 0, 4 and 7 (6 documents). Split by row, near-duplicates of one source sat on both sides."""
    fit, val = recipes._holdout(GROUPS, torch.Generator().manual_seed(0))
    assert val.tolist() == [0, 10, 16, 17, 18, 19]
    assert fit.tolist() == [i for i in range(20) if i not in val.tolist()]
    for seed in range(30):
        fit, val = recipes._holdout(GROUPS, torch.Generator().manual_seed(seed))
        assert not set(GROUPS[fit.numpy()]) & set(GROUPS[val.numpy()])
        assert sorted([*fit.tolist(), *val.tolist()]) == list(range(20))
        assert len(val) >= 4 and len(fit) >= 2
    with pytest.raises(ValueError, match="2 source group"):
        recipes._holdout(np.array([0, 0, 0, 1]), torch.Generator().manual_seed(0))


def test_choose_scores_every_candidate_on_hold_outs_by_source_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every split ``choose`` emulates on keeps each source group on one side; ``groups`` must name every
    public document."""
    x, y = _public(n=20)
    seen: list[tuple[torch.Tensor, torch.Tensor]] = []

    def record(spec: object, x: object, y: object, split: tuple[torch.Tensor, torch.Tensor], *rest: object) -> float:
        seen.append(split)
        return 0.5

    monkeypatch.setattr(recipes, "emulate", record)
    cfg = config.resolve({"seed": 3, "public-fraction": 0.25, "label-mechanism": "rr"})
    grid = recipes.default_candidates(2, shares=(0.1,))
    recipes.choose(
        recipes.RecipeSpec.from_config(cfg), 3.0, x, y, 2, num_users=100, groups=GROUPS, candidates=grid, repeats=3
    )
    assert len(seen) == 3 * len(grid)
    for fit, val in seen:
        assert not set(GROUPS[fit.numpy()]) & set(GROUPS[val.numpy()])
    with pytest.raises(ValueError, match="groups names 19 public documents, the embeddings 20"):
        recipes.choose(
            recipes.RecipeSpec.from_config(cfg), 3.0, x, y, 2, num_users=100, groups=GROUPS[:19], candidates=grid
        )


def test_tune_splits_its_hold_out_by_the_public_texts_source_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sanitas tune`` passes ``recipes.choose`` the containment groups of the public texts, in the order of
    the public embeddings (:func:`fl.data.datasets.public_groups`)."""
    from fl.data import datasets
    from fl.maps import public_start
    from simulations.drivers import tune
    from tests.fl.data.test_public_size_and_user_unit import LABELS, TEST_ROWS
    from tests.fl.data.test_sources import PHRASES

    (tmp_path / "train.csv").write_text("text,label\n" + "".join(f"{t},{y}\n" for t, y in zip(PHRASES, LABELS)))
    (tmp_path / "test.csv").write_text(TEST_ROWS)
    phrases = {"dataset": str(tmp_path / "train.csv"), "test-file": str(tmp_path / "test.csv")}
    cfg = {**phrases, "public-size": 6, "seed": 1}
    loaded = load_run(config.resolve(cfg))
    assert isinstance(loaded, datasets.TextDataset)
    public = loaded.public
    assert public is not None
    assert public["text"][:] == [PHRASES[i] for i in (2, 3, 4, 5, 6, 8, 9)]  # "the film" joins "i saw the film twice"
    assert run_public_groups(config.resolve(cfg)).tolist() == [4, 1, 1, 1, 4, 5, 5]
    seen = []

    def embeddings(run: object, device: object) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.zeros(len(public), 4), torch.tensor(public["label"][:])

    def choose(*args: object, **kw: object) -> tuple[recipes.Scored, list[recipes.Scored]]:
        seen.append(np.asarray(args[6]).tolist())
        scored = recipes.Scored(recipes.Candidate("c", {}), {}, 0.5)
        return scored, [scored]

    monkeypatch.setattr(public_start, "public_embeddings", embeddings)
    monkeypatch.setattr(recipes, "choose", choose)
    (tmp_path / "run.toml").write_text("".join(f'{k} = "{v}"\n' for k, v in phrases.items()))
    assert tune.tune(str(tmp_path / "run.toml"), [3.0], ["public-size=6", "seed=1"], str(tmp_path / "out")) == 0
    assert seen == [[4, 1, 1, 1, 4, 5, 5]]
    with pytest.raises(ValueError, match="no public documents"):
        run_public_groups(config.resolve(phrases))


def test_the_class_means_grid_is_scored_on_clean_hold_out_rows_and_never_mixed() -> None:
    """The class-means candidates (PrivUnit on the public projection, debiased class means) are emulated on
    public data and scored on the hold-out's clean rows: on two Gaussian classes separated along one axis the
    chosen recipe classifies the clean hold-out nearly as well as the public model (> 0.95), every row of its
    table says test_inputs = clean, the grid names each dimension and share, and a grid that mixes it with a
    sanitized-input candidate is refused."""
    x, y = _public()
    cfg = config.resolve({"seed": 3, "public-fraction": 0.25})
    grid = recipes.class_means_candidates(dims=(4, 8), shares=(0.2, 0.35))
    assert [c.name for c in grid] == [
        "class-means-projection-m4 label-share 0.2",
        "class-means-projection-m4 label-share 0.35",
        "class-means-projection-m8 label-share 0.2",
        "class-means-projection-m8 label-share 0.35",
    ]
    best, table = recipes.choose(
        recipes.RecipeSpec.from_config(cfg),
        3.0,
        x,
        y,
        2,
        num_users=5000,
        groups=np.arange(len(y)),
        candidates=grid,
        repeats=2,
    )
    assert best.accuracy > 0.95 and {s.extra["test_inputs"] for s in table} == {"clean"}
    assert best.values["server-model"] == "class-means" and best.values["sentence-options"] == "unbiased = true"
    assert best.values["sentence-epsilon"] + best.values["label-epsilon"] == pytest.approx(3.0)
    mixed = [
        *grid[:1],
        recipes.Candidate(
            "rr",
            TASK_AWARE,
            0.1,
        ),
    ]
    with pytest.raises(ValueError, match="mixes on-device"):
        recipes.choose(
            recipes.RecipeSpec.from_config(cfg),
            3.0,
            x,
            y,
            2,
            num_users=500,
            groups=np.arange(len(y)),
            candidates=mixed,
            repeats=1,
        )
