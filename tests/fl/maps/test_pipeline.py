"""Public input map, grad isolation of releases, and the scores."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mechanisms
from fl.maps.input_map import apply_input_map, input_map
from fl.maps.pipeline import ServerModel, confusion_matrix, scores, train_epochs


def _model(*dims: int, seed: int = 0) -> ServerModel:
    """ServerModel(*dims) with a seeded initialisation (the global torch RNG is restored afterwards)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return ServerModel(*dims)


def test_random_map_is_a_function_of_the_public_seed_only() -> None:
    a, b = input_map("random", 384, 16, seed=5), input_map("random", 384, 16, seed=5)
    assert torch.equal(a, b) and not torch.equal(a, input_map("random", 384, 16, seed=6))
    assert abs(float(a.var()) - 1 / 16) < 0.005
    assert input_map("identity", 384, 16, 0) is None


def test_input_map_output_is_normalised_and_checks_dimension() -> None:
    x = np.random.default_rng(0).normal(size=(10, 384))
    out = apply_input_map(x, input_map("random", 384, 16, 0))
    assert out.shape == (10, 16) and torch.allclose(out.norm(dim=1), torch.ones(10, dtype=torch.float64))
    with pytest.raises(ValueError, match="does not match"):
        apply_input_map(np.ones((2, 300)), input_map("random", 384, 16, 0))


def test_releases_carry_no_gradient_path_to_raw_embeddings() -> None:
    """docs/SPEC.md §11.6: one training step on releases leaves raw inputs without gradient."""
    gen = torch.Generator().manual_seed(0)
    raw = torch.randn(64, 384, generator=gen).requires_grad_(True)
    mapped = apply_input_map(raw, input_map("random", 384, 16, 0))
    assert not mapped.requires_grad
    released = mechanisms.create("purkayastha", epsilon=5.0).sanitize(mapped, torch.Generator().manual_seed(0))
    model = _model(16, 384, 32, 2)
    opt = torch.optim.Adam(model.parameters())
    train_epochs(
        model, opt, released.float(), torch.randint(0, 2, (64,), generator=gen), 1, 16, torch.Generator().manual_seed(0)
    )
    assert raw.grad is None


def test_scores_from_confusion() -> None:
    conf = confusion_matrix(np.array([0, 0, 1, 1, 2]), np.array([0, 1, 1, 1, 0]), 3)
    assert conf.tolist() == [[1, 1, 0], [0, 2, 0], [1, 0, 0]]
    s = scores(conf)
    assert s["accuracy"] == pytest.approx(3 / 5)
    assert s["macro_f1"] == pytest.approx(np.mean([0.5, 0.8, 0.0]))


def test_training_learns_a_separable_problem() -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(512, 16, generator=gen)
    y = (x[:, 0] > 0).long()
    model = _model(16, 32, 32, 2)
    train_epochs(model, torch.optim.Adam(model.parameters(), lr=1e-2), x, y, 30, 64, gen)
    assert (model(x).argmax(1) == y).float().mean() > 0.95


def test_release_dim_for_every_sentence_mechanism() -> None:
    """Every mechanism a run can name at sentence level (the "none" baseline included) tells
    the pipeline its release dimension."""
    import mechanisms
    from fl.config import resolve
    from fl.maps.input_map import release_dim

    for name in mechanisms.names():
        if mechanisms.mechanism_class(name).level not in ("sentence", ""):
            continue
        if name != "none" and mechanisms.mechanism_class(name).level != "sentence":
            continue
        if name == "class_rr":  # the task-aware release is one row over the run's classes
            assert release_dim(resolve({"sentence-mechanism": name}).release, 384, num_classes=4) == 4
            assert (
                release_dim(resolve({"sentence-mechanism": name, "map-in": "identity"}).release, 384, num_classes=3)
                == 3
            )
            continue
        assert release_dim(resolve({"sentence-mechanism": name}).release, 384) == 16, name
        assert release_dim(resolve({"sentence-mechanism": name, "map-in": "identity"}).release, 384) == 384, name
