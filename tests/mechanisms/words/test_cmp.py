"""CMP noise law, independence and guarantee (docs/SPEC.md §11.2 items 1, 2, 4; §5.1).

The noise is read off the real code path: ``perturb(ids) - phi(ids)``. Power
checks: the "exponential norm" bug (radius Exp(eps) instead of Gamma(n, 1/eps))
and the broadcast-one-noise-vector bug of the TrLap code (docs/SPEC.md §7.6).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

import mechanisms
from mechanisms.words import WordSpace
from tests.support.word_spaces import make_space

N = 20_000
P_MIN = 1e-4


def _noise(mech, space: WordSpace, n: int = N, seed: int = 0, word: int = 7) -> np.ndarray:
    ids = torch.full((n,), word, dtype=torch.int64)
    y = mech.perturb(ids, torch.Generator().manual_seed(seed))
    return (y - mech.input_vectors(torch.device("cpu"))[ids]).numpy()


@pytest.mark.parametrize("dim", [2, 16, 50, 300])
@pytest.mark.parametrize("eps", [0.01, 1.0, 10.0, 1000.0])
def test_noise_norm_is_gamma(dim: int, eps: float) -> None:
    """||Z|| ~ Gamma(n, scale 1/eps) (KS), for every n and epsilon of the docs/SPEC.md §11.2 grid
    that a word space has."""
    space = make_space(50, dim, seed=dim)
    mech = mechanisms.create("cmp", epsilon=eps, space=space)
    n = 5000 if dim == 300 else N
    norms = np.linalg.norm(_noise(mech, space, n=n), axis=1)
    assert stats.kstest(norms, stats.gamma(a=dim, scale=1 / eps).cdf).pvalue > P_MIN


def test_norm_test_rejects_exponential_norm() -> None:
    wrong = np.random.default_rng(0).exponential(1 / 10.0, N)
    assert stats.kstest(wrong, stats.gamma(a=50, scale=1 / 10.0).cdf).pvalue < 1e-6


def test_direction_is_uniform(space50: WordSpace) -> None:
    """Squared coordinates of Z/||Z|| ~ Beta(1/2, (n-1)/2); radius uncorrelated with direction."""
    z = _noise(mechanisms.create("cmp", epsilon=1.0, space=space50), space50)
    norms = np.linalg.norm(z, axis=1)
    u = z / norms[:, None]
    for j in (0, 49):
        assert stats.kstest(u[:, j] ** 2, stats.beta(0.5, 49 / 2).cdf).pvalue > P_MIN
    assert abs(stats.pearsonr(norms, u[:, 0]).statistic) < 4 / math.sqrt(N)
    cube = np.random.default_rng(1).uniform(-1, 1, (N, 50))  # power: not uniform on the sphere
    cube /= np.linalg.norm(cube, axis=1, keepdims=True)
    assert stats.kstest(cube[:, 0] ** 2, stats.beta(0.5, 49 / 2).cdf).pvalue < 1e-6


def test_noise_independent_across_tokens(space16: WordSpace) -> None:
    """Noise of consecutive tokens uncorrelated, and spread across tokens as the law says
    (catches one noise vector per batch, the TrLap bug of docs/SPEC.md §7.6)."""
    eps = 1.0
    z = _noise(mechanisms.create("cmp", epsilon=eps, space=space16), space16)
    expected_sd = math.sqrt(17 / eps**2)  # E||Z||^2 = n(n+1)/eps^2, spread over n = 16 coordinates
    assert abs(np.corrcoef(z[:-1, 0], z[1:, 0])[0, 1]) < 4 / math.sqrt(N)
    assert abs(z[:, 0].std() / expected_sd - 1) < 0.05
    pairs = np.repeat(z[::2], 2, axis=0)  # power: one noise vector per batch of two tokens
    assert abs(np.corrcoef(pairs[:-1, 0], pairs[1:, 0])[0, 1]) > 0.3
    broadcast = np.repeat(z[:1], N, axis=0)  # power: one noise vector for the whole batch
    assert broadcast[:, 0].std() < 0.05 * expected_sd


def test_guarantee_uses_the_exact_diameter(space16: WordSpace) -> None:
    mech = mechanisms.create("cmp", epsilon=3.0, space=space16)
    g = mech.guarantee
    brute = float(torch.cdist(space16.vectors.double(), space16.vectors.double()).max())
    assert (g.notion, g.metric, g.granularity) == ("metric", "euclidean", "word")
    assert brute <= g.diameter <= brute * (1 + 1e-11)
    assert g.as_ldp() == pytest.approx((3.0 * brute, 0.0))
    doc = mech.document_guarantee(20)
    assert (doc.granularity, doc.metric, doc.epsilon) == ("document", "euclidean_sum", 3.0)
    assert doc.as_ldp()[0] == pytest.approx(20 * 3.0 * brute)


def test_outputs_are_words_and_follow_epsilon(space16: WordSpace) -> None:
    """Huge epsilon: every word maps to itself; small epsilon: outputs spread over the vocabulary, never <unk>."""
    ids = torch.arange(space16.unk + 1)
    g = torch.Generator().manual_seed(0)
    out = mechanisms.create("cmp", epsilon=1e7, space=space16).sanitize_ids(ids, g)
    assert torch.equal(out[:-1], ids[:-1])
    assert int(out[-1]) != space16.unk  # <unk> goes to the word nearest the mean
    noisy = mechanisms.create("cmp", epsilon=0.1, space=space16).sanitize_ids(torch.zeros(5000, dtype=torch.int64), g)
    assert int(noisy.max()) < space16.unk and len(torch.unique(noisy)) > 100
