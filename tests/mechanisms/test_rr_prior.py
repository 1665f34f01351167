"""RR-with-prior (spec §11.3 item 4): k*, support, outcome probabilities, ratio bound, refusal of raw priors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

import mechanisms
from mechanisms import LabelPrior
from mechanisms.rr_prior import top_k_sets

N = 100_000


def _brute_k_star(p: np.ndarray, eps: float) -> int:
    order = np.argsort(-p, kind="stable")
    scores = [math.exp(eps) / (math.exp(eps) + k - 1) * p[order[:k]].sum() for k in range(1, len(p) + 1)]
    return int(np.argmax(scores)) + 1


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_k_star_matches_brute_force(eps: float) -> None:
    probs = torch.distributions.Dirichlet(torch.ones(6)).sample((500,)).double()
    _, k = top_k_sets(probs, eps)
    assert k.tolist() == [_brute_k_star(p, eps) for p in probs.numpy()]


def _draw(prior: list[float], y: int, eps: float, seed: int = 0) -> np.ndarray:
    p = torch.tensor([prior], dtype=torch.float64).expand(N, len(prior))
    mech = mechanisms.create("rr_prior", epsilon=eps)
    out = mech.sanitize(torch.full((N,), y), len(prior), torch.Generator().manual_seed(seed), LabelPrior(p, "public"))
    return out.numpy()


def test_outcome_probabilities_and_support() -> None:
    """Prior (0.4, 0.35, 0.15, 0.1), eps = 1: k* = 2. In-set y keeps with e/(e+1); others get 1/(e+1)."""
    prior, eps = [0.4, 0.35, 0.15, 0.1], 1.0
    assert _brute_k_star(np.array(prior), eps) == 2
    out = _draw(prior, 1, eps)
    assert set(np.unique(out)) <= {0, 1}
    keep = math.exp(eps) / (math.exp(eps) + 1)
    assert stats.binomtest(int((out == 1).sum()), N, keep).pvalue > 1e-4
    out = _draw(prior, 3, eps)  # y outside Y_k*: uniform on Y_k*
    assert set(np.unique(out)) <= {0, 1}
    assert stats.binomtest(int((out == 0).sum()), N, 0.5).pvalue > 1e-4


def test_outcome_test_has_power() -> None:
    """Plain RR over all K labels (ignoring the prior) fails the support check."""
    mech = mechanisms.create("rr", epsilon=1.0)
    out = mech.sanitize(torch.full((N,), 1), 4, torch.Generator().manual_seed(0)).numpy()
    assert not set(np.unique(out)) <= {0, 1}


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_uniform_prior_is_plain_rr(eps: float) -> None:
    out = mechanisms.create("rr_prior", epsilon=eps).sanitize(torch.zeros(N, dtype=torch.long), 3,
                                                              torch.Generator().manual_seed(1))
    keep = 1 / (1 + 2 * math.exp(-eps))
    assert stats.binomtest(int((out == 0).sum()), N, keep).pvalue > 1e-4


@pytest.mark.parametrize("eps", [0.1, 1.0, 5.0])
def test_analytic_ratio_bounded_for_random_priors(eps: float) -> None:
    """Every output probability ratio between two true labels is <= e^eps (exact, per prior)."""
    rng = np.random.default_rng(0)
    for _ in range(200):
        p = rng.dirichlet(np.ones(5))
        k = _brute_k_star(p, eps)
        top = set(np.argsort(-p, kind="stable")[:k].tolist())
        def prob(out: int, y: int) -> float:
            if out not in top:
                return 0.0
            if y in top:
                return math.exp(eps) / (math.exp(eps) + k - 1) if out == y else 1 / (math.exp(eps) + k - 1)
            return 1 / k
        for out in top:
            vals = [prob(out, y) for y in range(5)]
            assert max(vals) <= math.exp(eps) * min(vals) * (1 + 1e-12)


def test_raw_prior_is_refused() -> None:
    with pytest.raises(ValueError, match="refuses a prior from 'raw'"):
        LabelPrior(torch.ones(2, 2) / 2, "raw")
    with pytest.raises(TypeError):
        mechanisms.create("rr_prior", epsilon=1.0).sanitize(torch.zeros(2, dtype=torch.long), 2, None, torch.ones(2, 2))
