"""Interaction across disjoint cohorts (fl.maps.cohorts): the split of the users, the next cohort's map, and the
class-means emulation that follows the same protocol for ``sanitas tune``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fl.maps import cohorts
from fl.maps.class_means_emulation import CohortPlan, emulate
from fl.maps.public_model import fit_public_model
from mechanisms.privunit import PrivUnit


def test_cohorts_are_disjoint_cover_every_user_and_are_seeded() -> None:
    parts = cohorts.cohort_users(1001, 3, seed=5)
    joined = np.concatenate(parts)
    assert sorted(joined.tolist()) == list(range(1001))  # every user in exactly one cohort
    assert {len(p) for p in parts} <= {333, 334}
    assert all((np.diff(p) > 0).all() for p in parts)
    again = cohorts.cohort_users(1001, 3, seed=5)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again, strict=True))
    assert not np.array_equal(parts[0], cohorts.cohort_users(1001, 3, seed=6)[0])


def test_the_next_map_leads_with_the_fitted_direction_and_is_centred_on_the_public_mean() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((60, 10)) + 3.0
    direction = rng.standard_normal((10, 1))
    public_weight = np.hstack([np.zeros((10, 1)), rng.standard_normal((10, 1))])
    matrix = cohorts.next_projection(direction, x, public_weight, 4).numpy()
    basis, offset = matrix[:-1], matrix[-1]
    assert basis.shape == (10, 4)
    assert np.allclose(basis.T @ basis, np.eye(4), atol=1e-10)  # orthonormal
    assert abs(float(basis[:, 0] @ direction[:, 0])) == pytest.approx(float(np.linalg.norm(direction)), rel=1e-10)
    logit = public_weight[:, 1] / np.linalg.norm(public_weight[:, 1])
    assert np.linalg.norm(basis[:, :2] @ (basis[:, :2].T @ logit) - logit) < 1e-10  # the public direction next
    assert np.allclose((x @ basis + offset).mean(axis=0), 0.0, atol=1e-10)
    with pytest.raises(ValueError, match="fewer than map-dim"):
        cohorts.next_projection(direction, x[:2], public_weight, 9)


def test_discriminant_directions_carry_the_weights_back_through_the_map() -> None:
    rng = np.random.default_rng(1)
    matrix = rng.standard_normal((7, 3))  # affine [d + 1, m']
    weight = rng.standard_normal((3, 3))  # K = 3
    got = cohorts.discriminant_directions(torch.as_tensor(matrix), weight)
    assert got.shape == (6, 2)
    assert np.allclose(got, matrix[:-1] @ (weight[1:] - weight[:1]).T)


def test_the_emulation_follows_the_cohort_protocol() -> None:
    """Two cohorts with the covariance from the releases: a different fit from one cohort, deterministic for
    its generator, an accuracy on the held-out rows; with no noise and two well-separated classes, near 1."""
    rng = np.random.default_rng(2)
    d, k = 12, 2
    centres = rng.standard_normal((k, d)) * 2
    y = rng.integers(0, k, 900)
    x = centres[y] + rng.standard_normal((900, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    pub, priv, held = slice(0, 200), slice(200, 700), slice(700, 900)
    model = fit_public_model(x[pub], y[pub], k)

    def run(plan: CohortPlan | None, eps: float | None) -> float:
        mech = PrivUnit(eps or 1.0, input_dim=3, unbiased=True)
        sanitize = (lambda r, g: r) if eps is None else (lambda r, g: mech.sanitize(r, generator=g))
        second = 1.0 if eps is None else 1 / mech.m**2

        def moments(dim: int):  # type: ignore[no-untyped-def]
            other = PrivUnit(eps or 1.0, input_dim=dim, unbiased=True)
            if eps is None:
                return (lambda r, g: r), 1.0
            return (lambda r, g: other.sanitize(r, generator=g)), 1 / other.m**2

        def law(dim: int) -> tuple[float, float] | None:
            return (1.0, 0.0) if eps is None else PrivUnit(eps, input_dim=dim, unbiased=True).second_moment_law(dim)

        if plan is not None:
            plan = CohortPlan(plan.cohorts, plan.first_dim, law, moments)
        return emulate(
            model,
            (x[pub], y[pub]),
            (x[priv], y[priv]),
            (x[held], y[held]),
            k,
            3,
            sanitize,
            second,
            None,
            None,
            2000,
            torch.Generator().manual_seed(3),
            plan,
        )

    two = CohortPlan(2, 6)
    assert run(two, None) > 0.95
    noisy = run(two, 4.0)
    assert 0.5 < noisy <= 1.0 and noisy == run(two, 4.0)
