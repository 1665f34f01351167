"""Mahalanobis mechanism (docs/SPEC.md §5.2, §11.2 item 3).

Power checks: noise multiplied by Sigma_lambda instead of its square root (bug
(ii) of the TrLap code) fails the whitened test; a covariance from a private
batch instead of the public vocabulary changes Sigma.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

import mechanisms
from mechanisms.noise import gamma_radius_noise
from mechanisms.words import WordSpace
from mechanisms.words.mahalanobis import vocabulary_covariance
from mechanisms.words.nearest import diameter
from tests.support.word_spaces import make_space

N = 20_000
P_MIN = 1e-4


@pytest.fixture(scope="module")
def space() -> WordSpace:
    """Anisotropic vocabulary (coordinate scales 0.2 .. 3), where Sigma differs from I."""
    base = make_space(1500, 16, seed=5)
    scales = torch.linspace(0.2, 3.0, 16)
    return WordSpace.from_vectors("aniso", base.words[:-1], base.vectors[:-1] * scales)


def test_covariance_is_public_and_scaled_to_trace_n(space: WordSpace) -> None:
    cov = vocabulary_covariance(space)
    raw = np.cov(space.vectors[:-1].double().numpy().T)
    assert float(torch.trace(cov)) == pytest.approx(16.0)
    assert np.allclose(cov.numpy(), raw * 16 / np.trace(raw))
    mech = mechanisms.create("mahalanobis", epsilon=1.0, lam=0.3, space=space)
    assert torch.allclose(mech.sigma_lambda, 0.3 * cov + 0.7 * torch.eye(16, dtype=torch.float64))


@pytest.mark.parametrize("lam", [0.0, 0.5, 0.9])
@pytest.mark.parametrize("eps", [0.01, 1.0, 10.0, 1000.0])
def test_whitened_noise_is_cmp_noise(space: WordSpace, lam: float, eps: float) -> None:
    """Sigma_lambda^(-1/2) Z has norm Gamma(n, 1/eps) (KS) and a uniform direction."""
    mech = mechanisms.create("mahalanobis", epsilon=eps, lam=lam, space=space)
    ids = torch.full((N,), 3, dtype=torch.int64)
    z = mech.perturb(ids, torch.Generator().manual_seed(1)) - mech.input_vectors(torch.device("cpu"))[ids]
    w = (z @ mech.whitening).numpy()
    norms = np.linalg.norm(w, axis=1)
    assert stats.kstest(norms, stats.gamma(a=16, scale=1 / eps).cdf).pvalue > P_MIN
    assert stats.kstest((w[:, 0] / norms) ** 2, stats.beta(0.5, 7.5).cdf).pvalue > P_MIN
    assert abs(np.corrcoef(w[:-1, 0], w[1:, 0])[0, 1]) < 4 / math.sqrt(N)  # independent across tokens


def test_whitened_test_has_power(space: WordSpace) -> None:
    """Noise through Sigma_lambda (not its square root) fails the whitened norm test."""
    mech = mechanisms.create("mahalanobis", epsilon=1.0, lam=0.9, space=space)
    plain = gamma_radius_noise(N, 16, 1.0, torch.Generator().manual_seed(2), torch.device("cpu"))
    wrong = plain @ mech.sigma_lambda
    norms = np.linalg.norm((wrong @ mech.whitening).numpy(), axis=1)
    assert stats.kstest(norms, stats.gamma(a=16, scale=1.0).cdf).pvalue < 1e-6


def test_guarantee(space: WordSpace) -> None:
    mech = mechanisms.create("mahalanobis", epsilon=2.0, lam=0.5, space=space)
    g = mech.guarantee
    white = space.vectors.double() @ mech.whitening
    brute = float(torch.cdist(white, white).max())
    assert (g.notion, g.metric, g.granularity) == ("metric", "mahalanobis", "word")
    assert brute <= g.diameter <= brute * (1 + 1e-11)
    lam_min = float(torch.linalg.eigvalsh(mech.sigma_lambda).min())
    assert mech.euclidean_epsilon == pytest.approx(2.0 / math.sqrt(lam_min))
    assert mech.euclidean_epsilon <= 2.0 / math.sqrt(0.5) + 1e-12
    assert diameter(white) == pytest.approx(g.diameter)
    assert mech.document_guarantee(20).as_ldp()[0] == pytest.approx(20 * 2.0 * g.diameter)


def test_lambda_zero_is_cmp(space: WordSpace) -> None:
    """lam = 0: Sigma_lambda = I, the same noise (same generator) and outputs as CMP."""
    ids = torch.randint(0, space.unk + 1, (3000,), generator=torch.Generator().manual_seed(0))
    a = mechanisms.create("mahalanobis", epsilon=2.0, lam=0.0, space=space)
    b = mechanisms.create("cmp", epsilon=2.0, space=space)
    assert torch.equal(
        a.sanitize_ids(ids, torch.Generator().manual_seed(4)), b.sanitize_ids(ids, torch.Generator().manual_seed(4))
    )


def test_bad_lambda(space: WordSpace) -> None:
    for lam in (-0.1, 1.5, float("nan"), "x"):
        with pytest.raises(ValueError, match="lam"):
            mechanisms.create("mahalanobis", epsilon=1.0, lam=lam, space=space)
    flat = WordSpace.from_vectors("flat", ["a", "b", "c"], torch.tensor([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0]]))
    with pytest.raises(ValueError, match="singular"):
        mechanisms.create("mahalanobis", epsilon=1.0, lam=1.0, space=flat).guarantee
