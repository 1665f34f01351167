"""Statistical tests of K-ary randomized response (spec §11.3, items 1-3).

Each test has a power check: a deliberately wrong RR must fail it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
import torch
from scipy import stats

import mechanisms
from mechanisms.randomized_response import keep_probability

N = 100_000
P_MIN = 1e-4

Sampler = Callable[[torch.Tensor, int, torch.Generator], torch.Tensor]


def _rr(eps: float) -> Sampler:
    mech = mechanisms.create("rr", epsilon=eps)
    return lambda y, k, g: mech.sanitize(y, k, generator=g)


def _wrong_keep_rate(eps: float) -> Sampler:
    """RR that keeps with e^(2 eps)/(e^(2 eps)+K-1): twice the claimed epsilon."""
    return _rr(2 * eps)


def _wrong_never_uniform(eps: float) -> Sampler:
    """RR whose 'other' label is always y + 1: right keep rate, wrong spread."""

    def sample(y: torch.Tensor, k: int, g: torch.Generator) -> torch.Tensor:
        keep = torch.rand(y.numel(), generator=g, dtype=torch.float64) < keep_probability(eps, k)
        return torch.where(keep, y, (y + 1) % k)

    return sample


def _keep_rate_p(sampler: Sampler, k: int, eps: float, seed: int = 0) -> float:
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, k, (N,), generator=g)
    out = sampler(y, k, g)
    kept = int((out == y).sum())
    return stats.binomtest(kept, N, keep_probability(eps, k)).pvalue


@pytest.mark.parametrize("k", [2, 3, 10, 100])
@pytest.mark.parametrize("eps", [0.01, 0.5, 1.0, 2.0, 3.0, 10.0, 1000.0])
def test_keep_rate_exact_binomial(k: int, eps: float) -> None:
    """The keep rate equals e^eps/(e^eps+K-1) (exact binomial test, 10^5 draws)."""
    assert _keep_rate_p(_rr(eps), k, eps) > P_MIN


@pytest.mark.parametrize(("k", "eps"), [(2, 1.0), (10, 2.0), (100, 3.0)])
def test_keep_rate_test_has_power(k: int, eps: float) -> None:
    assert _keep_rate_p(_wrong_keep_rate(eps), k, eps) < 1e-6


def _other_labels_p(sampler: Sampler, k: int, seed: int = 0) -> float:
    g = torch.Generator().manual_seed(seed)
    y = torch.zeros(N, dtype=torch.int64)
    out = sampler(y, k, g)
    others = out[out != 0].numpy()
    counts = np.bincount(others, minlength=k)[1:]
    return stats.chisquare(counts).pvalue


@pytest.mark.parametrize("k", [3, 10, 100])
def test_non_kept_outputs_uniform(k: int) -> None:
    """The K-1 non-kept outputs are uniform (chi-square)."""
    assert _other_labels_p(_rr(0.5), k) > P_MIN


@pytest.mark.parametrize("k", [3, 10])
def test_uniformity_test_has_power(k: int) -> None:
    assert _other_labels_p(_wrong_never_uniform(0.5), k) < 1e-6


def _transition_ratio_lower_bound(sampler: Sampler, k: int, per_input: int, seed: int = 0) -> float:
    """Clopper-Pearson lower bound on max_j max_i,i' P(j|i)/P(j|i') from samples."""
    g = torch.Generator().manual_seed(seed)
    counts = np.zeros((k, k), dtype=np.int64)
    for i in range(k):
        out = sampler(torch.full((per_input,), i, dtype=torch.int64), k, g)
        counts[i] = np.bincount(out.numpy(), minlength=k)
    worst = 0.0
    for j in range(k):
        col = counts[:, j]
        hi_row, lo_row = int(col.argmax()), int(col.argmin())
        lo_of_max = stats.binomtest(int(col[hi_row]), per_input).proportion_ci(1 - 1e-4, "exact").low
        hi_of_min = stats.binomtest(int(col[lo_row]), per_input).proportion_ci(1 - 1e-4, "exact").high
        worst = max(worst, lo_of_max / hi_of_min)
    return worst


@pytest.mark.parametrize(("k", "eps"), [(2, 1.0), (3, 2.0), (10, 0.5)])
def test_transition_matrix_ratio_within_e_eps(k: int, eps: float) -> None:
    """Estimated K x K transition matrix: every column ratio <= e^eps within the CI."""
    assert _transition_ratio_lower_bound(_rr(eps), k, 50_000) <= math.exp(eps)


def test_transition_matrix_check_has_power() -> None:
    """RR run at twice the stated epsilon is caught by the same check."""
    assert _transition_ratio_lower_bound(_wrong_keep_rate(1.0), 3, 50_000) > math.exp(1.0)


@pytest.mark.parametrize("k", [2, 3, 10, 100])
@pytest.mark.parametrize("eps", [0.01, 1.0, 10.0, 1000.0])
def test_analytic_matrix_ratio_is_exactly_e_eps(k: int, eps: float) -> None:
    """The analytic transition matrix has max column ratio e^eps (tight), computed in logs."""
    log_keep = -math.log1p((k - 1) * math.exp(-eps))
    log_other = log_keep - eps  # 1/(e^eps + K - 1) = p_keep * e^-eps
    assert math.isclose(log_keep - log_other, eps, rel_tol=1e-12)
    assert math.isclose(math.exp(log_keep) + (k - 1) * math.exp(log_other), 1.0, rel_tol=1e-12)


def test_reference_keep_probabilities() -> None:
    """Spec §4.1: K = 2 gives 0.6225 / 0.7311 / 0.8808 / 0.9526 at eps 0.5 / 1 / 2 / 3."""
    got = [round(keep_probability(e, 2), 4) for e in (0.5, 1, 2, 3)]
    assert got == [0.6225, 0.7311, 0.8808, 0.9526]


@pytest.mark.parametrize("bad", [0.0, -2.0, float("nan"), float("inf")])
def test_invalid_epsilon_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="epsilon"):
        mechanisms.create("rr", epsilon=bad)


def test_bad_labels_are_refused() -> None:
    mech = mechanisms.create("rr", epsilon=1.0)
    with pytest.raises(ValueError, match="labels must lie"):
        mech.sanitize(torch.tensor([0, 3]), num_classes=3)
    with pytest.raises(ValueError, match="num_classes"):
        mech.sanitize(torch.tensor([0, 1]), num_classes=1)


def test_registry_contract() -> None:
    assert {"none", "purkayastha", "rr"} <= set(mechanisms.names())
    with pytest.raises(ValueError, match="unknown mechanism 'nope'"):
        mechanisms.create("nope")
    assert mechanisms.create("rr", epsilon=1.0).level == "label"
    assert mechanisms.create("purkayastha", epsilon=1.0).level == "sentence"
    none = mechanisms.create("none", level="label")
    assert none.level == "label" and not none.guarantee.is_private
    y = torch.tensor([0, 1, 1])
    assert torch.equal(none.sanitize(y, num_classes=2), y)
