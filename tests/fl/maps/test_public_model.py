"""The model fitted on the public data alone and the public projection M1 (fl.maps.public_model)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression

from fl.maps import public_model as pm
from fl.maps.input_map import apply_input_map


def _data(n: int = 300, d: int = 12, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    x = rng.normal(size=(n, d))
    x[:, 0] += 1.5 * (2 * y - 1)
    return x, y


def test_the_public_model_is_scikit_learn_s_logistic_regression_at_the_cross_validated_c() -> None:
    x, y = _data()
    model = pm.fit_public_model(x, y, 2)
    assert model.l2 in pm.C_GRID and model.cv_accuracy is not None and model.cv_accuracy > 0.8
    ref = LogisticRegression(C=model.l2, max_iter=5000).fit(x, y)
    np.testing.assert_allclose(model.weight[:, 1] - model.weight[:, 0], ref.coef_[0], rtol=1e-10)
    np.testing.assert_array_equal(model.predict(x), ref.predict(x))
    m = model.as_matrix().numpy()
    np.testing.assert_allclose(x @ m[:-1] + m[-1], x @ model.weight + model.bias)


def test_grouped_folds_keep_a_group_together() -> None:
    """Catches row folds on near-duplicates: each group of 5 identical rows with random labels is learnable
    only by memorising a duplicate, so row folds score far above grouped folds (about chance)."""
    rng = np.random.default_rng(1)
    base = rng.normal(size=(60, 80))
    x = np.repeat(base, 5, axis=0) + 1e-6 * rng.normal(size=(300, 80))
    y = np.repeat(rng.integers(0, 2, 60), 5)
    groups = np.repeat(np.arange(60), 5)
    grouped = pm.fit_public_model(x, y, 2, groups).cv_accuracy
    by_row = pm.fit_public_model(x, y, 2).cv_accuracy
    assert grouped is not None and by_row is not None
    assert by_row > 0.9 and grouped < 0.7


def test_the_projection_starts_with_the_logit_direction_and_is_centred_and_orthonormal() -> None:
    x, y = _data()
    model = pm.fit_public_model(x, y, 2)
    m1 = pm.projection_map(x, model, 5).numpy()
    p, offset = m1[:-1], m1[-1]
    np.testing.assert_allclose(p.T @ p, np.eye(5), atol=1e-10)
    direction = model.weight[:, 1] - model.weight[:, 0]
    np.testing.assert_allclose(np.abs(p[:, 0] @ direction), np.linalg.norm(direction), rtol=1e-10)
    np.testing.assert_allclose(offset, -(x.mean(axis=0) @ p), atol=1e-12)
    u = apply_input_map(torch.as_tensor(x), torch.as_tensor(m1)).numpy()
    np.testing.assert_allclose(np.linalg.norm(u, axis=1), 1.0, rtol=1e-12)
    centred = (x - x.mean(axis=0)) @ p
    np.testing.assert_allclose(u, centred / np.linalg.norm(centred, axis=1, keepdims=True), rtol=1e-10)


def test_the_projection_of_k_classes_spans_the_logit_differences() -> None:
    rng = np.random.default_rng(2)
    y = rng.integers(0, 4, 400)
    x = rng.normal(size=(400, 10))
    x[np.arange(400), y] += 3.0
    model = pm.fit_public_model(x, y, 4)
    p = pm.projection_map(x, model, 6).numpy()[:-1]
    diffs = model.weight[:, 1:] - model.weight[:, :1]
    inside = p[:, :3] @ (p[:, :3].T @ diffs)
    np.testing.assert_allclose(inside, diffs, atol=1e-9)


def test_a_projection_larger_than_the_data_spans_is_refused() -> None:
    x, y = _data(n=6, d=12)
    model = pm.fit_public_model(x, y, 2)
    with pytest.raises(ValueError, match="exceeds what 6 public documents span"):
        pm.projection_map(x, model, 10)
    with pytest.raises(ValueError, match="needs 1 < map-dim"):
        pm.projection_map(x, model, 1)
