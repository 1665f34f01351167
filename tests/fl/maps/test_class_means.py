"""The class-means server model (fl.maps.class_means): the debiased class sums are unbiased under PrivUnit's
and randomized response's laws, the variance the combination weighs by is the releases' variance, and the
discriminant is the closed form.

The statistical tests draw real releases (PrivUnit with ``unbiased = true``, K-ary randomized response) and
check the estimate against the truth within 4 standard errors, with a power check: the same data debiased
with a wrong law (the identity for randomized-response labels) is many standard errors away.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fl.maps import class_means as cm
from mechanisms.privunit import PrivUnit
from mechanisms.randomized_response import RandomizedResponse, keep_probability


def _population(n: int, k: int, dim: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    centres = torch.nn.functional.normalize(torch.randn(k, dim, generator=gen, dtype=torch.float64), dim=1)
    y = torch.randint(k, (n,), generator=gen)
    u = torch.nn.functional.normalize(centres[y] + 0.7 * torch.randn(n, dim, generator=gen, dtype=torch.float64), dim=1)
    return u, y


def _releases(u: torch.Tensor, y: torch.Tensor, k: int, eps_x: float, eps_y: float, seed: int):
    gen = torch.Generator().manual_seed(seed)
    mech = PrivUnit(eps_x, input_dim=u.shape[1], unbiased=True)
    z = mech.sanitize(u, gen).numpy()
    rr = RandomizedResponse(eps_y)
    released = rr.sanitize(y, k, gen).numpy()
    return z, released, cm.label_transition(rr.log_transition_matrix(k), k), mech.unbiased_moments(u.shape[1])


def test_label_transition_is_randomized_response_s_law() -> None:
    r = cm.label_transition(RandomizedResponse(1.0).log_transition_matrix(3), 3)
    keep = keep_probability(1.0, 3)
    np.testing.assert_allclose(np.diag(r), keep, rtol=1e-12)
    np.testing.assert_allclose(r[0, 1], (1 - keep) / 2, rtol=1e-12)
    np.testing.assert_allclose(r.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(cm.label_transition(None, 4), np.eye(4))


def test_debiased_class_sums_are_unbiased_and_a_wrong_label_law_is_detected() -> None:
    """Catches: a transposed or missing inverse of the label law, a biased embedding release. 40,000 users,
    K = 3, m' = 8, PrivUnit at 3 and RR at 1: every debiased class count and sum coordinate within 4 of its
    standard errors (from the variance formula), while a class sum debiased with the identity is > 6 off."""
    k, dim, n = 3, 8, 40_000
    u, y = _population(n, k, dim, seed=1)
    z, released, transition, second = _releases(u, y, k, 3.0, 1.0, seed=2)
    sums, counts = cm.debiased_sums(z, released, transition)
    true_counts = np.bincount(y.numpy(), minlength=k)
    true_sums = np.stack([u.numpy()[y.numpy() == j].sum(0) for j in range(k)])
    inverse = np.linalg.inv(transition.T)
    c = np.bincount(released, minlength=k)
    count_se = np.sqrt((inverse**2) @ c)  # each released-label count is a sum of Bernoullis: var <= its mean
    sum_se = np.sqrt((inverse**2) @ c * second / dim)
    assert np.all(np.abs(counts - true_counts) < 4 * count_se)
    assert np.all(np.abs(sums - true_sums) < 4 * sum_se[:, None])
    wrong_sums, wrong_counts = cm.debiased_sums(z, released, np.eye(k))
    assert np.max(np.abs(wrong_sums - true_sums) / sum_se[:, None]) > 6  # power: the wrong law is far off


def test_the_private_mean_variance_is_the_releases_variance() -> None:
    """Catches a variance formula off by a factor (m', the inverse's square, the counts): over 200 repeated
    releases of one population, the empirical variance of each debiased class mean's coordinates matches the
    formula within 25% (the formula leaves out the counts' own noise, second order here)."""
    k, dim, n = 2, 6, 5_000
    u, y = _population(n, k, dim, seed=3)
    means = []
    for rep in range(200):
        z, released, transition, second = _releases(u, y, k, 2.0, 1.5, seed=100 + rep)
        sums, counts = cm.debiased_sums(z, released, transition)
        means.append(sums / counts[:, None])
    empirical = np.stack(means).var(axis=0).mean(axis=1)
    c = np.bincount(released, minlength=k)
    formula = cm.private_mean_variance(c, transition, second, np.bincount(y.numpy(), minlength=k), dim)
    np.testing.assert_allclose(empirical, formula, rtol=0.25)
    assert not np.allclose(empirical, formula * dim, rtol=0.25)  # power: a factor m' off is caught


def test_combine_weighs_by_inverse_variance() -> None:
    public = cm.PublicStatistics(
        means=np.array([[1.0, 0.0], [0.0, 1.0]]),
        mean_variance=np.array([0.01, 0.04]),
        covariance=np.eye(2),
        priors=np.array([0.5, 0.5]),
    )
    private = np.array([[0.0, 0.0], [0.0, 0.0]])
    means, weight = cm.combine(private, np.array([0.03, np.inf]), public)
    np.testing.assert_allclose(weight, [0.25, 0.0])
    np.testing.assert_allclose(means, [[0.75, 0.0], [0.0, 1.0]])


def test_discriminant_is_the_closed_form() -> None:
    means = np.array([[1.0, 0.0], [-1.0, 0.5]])
    cov = np.array([[2.0, 0.3], [0.3, 1.0]])
    w, b = cm.discriminant(means, cov, np.array([0.25, 0.75]))
    inv = np.linalg.inv(cov)
    np.testing.assert_allclose(w, means @ inv, rtol=1e-12)
    np.testing.assert_allclose(b, [-0.5 * means[j] @ inv @ means[j] + np.log(p) for j, p in enumerate([0.25, 0.75])])


def test_fit_without_releases_is_the_public_model_and_many_releases_reach_the_private_means() -> None:
    """With no private releases the model is the public means' discriminant (every weight 0); with 40,000
    users whose classes sit elsewhere than the public means, the combined means move to the private ones."""
    k, dim = 2, 4
    u, y = _population(40_000, k, dim, seed=5)
    public = cm.public_statistics(-u[:200].numpy(), y[:200].numpy(), k)  # public means far from the private
    empty = cm.fit(np.zeros((0, dim)), np.zeros(0, np.int64), np.eye(k), 1.0, public)
    np.testing.assert_array_equal(empty.private_weight, [0.0, 0.0])
    np.testing.assert_allclose(empty.means, public.means)
    z, released, transition, second = _releases(u, y, k, 6.0, 2.0, seed=6)
    fitted = cm.fit(z, released, transition, second, public)
    truth = np.stack([u.numpy()[y.numpy() == j].mean(0) for j in range(k)])
    assert np.all(fitted.private_weight > 0.9)
    assert np.max(np.abs(fitted.means - truth)) < 0.05
    assert np.max(np.abs(public.means - truth)) > 0.5
    head = fitted.head()
    x = torch.as_tensor(u[:5].numpy(), dtype=torch.float32)
    np.testing.assert_allclose(
        head(x).detach().numpy(), u[:5].numpy() @ fitted.weight.T + fitted.bias, rtol=1e-4, atol=1e-5
    )


def test_public_statistics_need_every_class() -> None:
    with pytest.raises(ValueError, match="every class"):
        cm.public_statistics(np.ones((3, 2)), np.array([0, 0, 0]), 2)


def test_release_covariance_is_debiased_and_shrinks_toward_the_public_one_by_its_noise() -> None:
    """The within-class covariance debiased from PrivUnit releases of 40,000 rows of two classes is close to
    the rows' own within-class covariance (relative Frobenius error < 0.15), where the raw second moment of the
    releases is not (> 1: the noise's b I dominates); with few releases (200) its known noise pulls it toward a
    public target, and the shrunk estimate is nearer the truth than the unshrunk one, on each of 20 draws."""
    from mechanisms.privunit import PrivUnit

    rng = np.random.default_rng(3)
    d, n = 6, 40_000
    scales = np.linspace(0.3, 1.5, d)
    y = rng.integers(0, 2, n)
    centres = np.stack([np.full(d, -0.4), np.full(d, 0.4)])
    raw = centres[y] + rng.standard_normal((n, d)) * scales
    u = raw / np.linalg.norm(raw, axis=1, keepdims=True)
    means = np.stack([u[y == j].mean(axis=0) for j in (0, 1)])
    truth = np.cov((u - means[y]).T, bias=True)
    mech = PrivUnit(3.0, input_dim=d, unbiased=True)
    z = mech.sanitize(torch.as_tensor(u), generator=torch.Generator().manual_seed(4)).numpy()
    law = mech.second_moment_law(d)
    counts = np.bincount(y, minlength=2).astype(float)
    estimate = cm.release_covariance(z, law, counts, means)
    assert np.linalg.norm(estimate - truth) / np.linalg.norm(truth) < 0.15
    assert np.linalg.norm(z.T @ z / n - truth) / np.linalg.norm(truth) > 1
    target = np.diag(np.diag(truth)) * 1.2
    for draw in range(20):
        rows = np.random.default_rng(draw).choice(n, 200, replace=False)
        few = counts * 200 / n
        shrunk = cm.release_covariance(z[rows], law, few, means, target, 1 / mech.m**2)
        plain = cm.release_covariance(z[rows], law, few, means)
        assert np.linalg.norm(shrunk - truth) < np.linalg.norm(plain - truth)
