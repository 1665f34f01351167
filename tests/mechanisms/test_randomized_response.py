"""Statistical tests of K-ary randomized response (docs/SPEC.md §11.3, items 1-3).

The mechanism states its own exact law (``log_transition_matrix`` /
``log_output_probabilities``); the tests check the sampler against that law
(Clopper-Pearson bounds on every cell of the empirical transition matrix and a
pooled chi-square), and the e^eps bound and its tightness on it. Each test has
a power check: a deliberately wrong RR (or a wrong law) must fail it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
import torch
from scipy import stats

import mechanisms
from mechanisms.randomized_response import RandomizedResponse, keep_probability
from tests.support.label_law import check_law, check_ratio, release_counts

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
def test_transition_law_is_normalised_and_exactly_e_eps(k: int, eps: float) -> None:
    """The mechanism's own law (``log_transition_matrix``): rows sum to 1, every entry is finite
    (eps = 1000 included), the diagonal is ``keep_probability`` (what the sampler uses), rows of
    ``log_output_probabilities`` are the matrix rows of their labels, and the largest column
    log-ratio is exactly eps (tight). Catches a law that is not normalised, overflows, or is
    looser or tighter than e^eps."""
    mech = RandomizedResponse(eps)
    log_p = mech.log_transition_matrix(k)
    assert log_p.shape == (k, k) and log_p.dtype == torch.float64
    ratio = check_ratio(log_p)
    assert ratio.normalised and ratio.same_support and ratio.finite_on_support
    assert ratio.bounded_by(eps)
    assert ratio.max_log_ratio == pytest.approx(eps, rel=1e-12)
    assert torch.allclose(
        log_p.diagonal().exp(), torch.full((k,), keep_probability(eps, k), dtype=torch.float64), rtol=1e-12, atol=0
    )
    y = torch.randint(0, k, (50,), generator=torch.Generator().manual_seed(k))
    assert torch.equal(mech.log_output_probabilities(y, k), log_p[y])
    assert torch.equal(mech.output_probabilities(y, k), log_p[y].exp())


@pytest.mark.parametrize(("k", "eps"), [(2, 1.0), (10, 2.0), (100, 10.0), (5, 1000.0)])
def test_transition_law_check_has_power(k: int, eps: float) -> None:
    """Power: the law of RR at 3 eps fails the e^eps bound of the same check (its ratio is 3 eps),
    and a law whose other labels get 1/(e^eps + K) instead of 1/(e^eps + K - 1) is not normalised
    (where float64 can see it: not at eps = 1000, where that mass is e^-1000)."""
    wrong = RandomizedResponse(3 * eps).log_transition_matrix(k)
    ratio = check_ratio(wrong)
    assert not ratio.bounded_by(eps)
    assert ratio.max_log_ratio == pytest.approx(3 * eps, rel=1e-12)
    off_by_one = RandomizedResponse(eps).log_transition_matrix(k)
    off_by_one = torch.where(
        torch.eye(k, dtype=torch.bool), off_by_one, torch.full_like(off_by_one, -eps - math.log1p(k * math.exp(-eps)))
    )
    assert eps > 30 or not check_ratio(off_by_one).normalised


def _transition_counts(sampler: Sampler, k: int, per_input: int, seed: int) -> np.ndarray:
    """[K, K] counts of releases (columns) for ``per_input`` draws of each input label (rows)."""
    y = torch.arange(k).repeat_interleave(per_input)
    return release_counts(sampler(y, k, torch.Generator().manual_seed(seed)).reshape(k, per_input), k)


# (K, eps, draws per input label)
LAW_CASES = [(2, 0.5, 20_000), (3, 1.0, 20_000), (10, 2.0, 10_000), (100, 3.0, 2_000), (5, 1000.0, 4_000)]


@pytest.mark.parametrize(("k", "eps", "per_input"), LAW_CASES)
def test_sampler_matches_transition_law(k: int, eps: float, per_input: int) -> None:
    """Empirical K x K transition matrix of the sampler against the mechanism's exact law: no
    release outside the support, every cell inside its Clopper-Pearson interval (Bonferroni,
    family-wise 1e-4), pooled chi-square p > 1e-4. Catches a sampler that does not draw from
    ``log_transition_matrix`` (keep rate, spread of the other labels, overflow at eps = 1000)."""
    counts = _transition_counts(_rr(eps), k, per_input, seed=k)
    result = check_law(counts, RandomizedResponse(eps).log_transition_matrix(k).exp().numpy())
    assert result.passed, result


@pytest.mark.parametrize("wrong", ["sampler at 3 eps", "never uniform sampler", "law at 3 eps"])
@pytest.mark.parametrize(("k", "eps", "per_input"), [(3, 1.0, 20_000), (10, 2.0, 10_000)])
def test_sampler_law_check_has_power(wrong: str, k: int, eps: float, per_input: int) -> None:
    """Power: the same check fails for RR sampling at 3 eps, for RR whose other label is always
    y + 1, and for the real sampler compared with the law of 3 eps."""
    sampler = {
        "sampler at 3 eps": _rr(3 * eps),
        "never uniform sampler": _wrong_never_uniform(eps),
        "law at 3 eps": _rr(eps),
    }[wrong]
    law_eps = 3 * eps if wrong == "law at 3 eps" else eps
    counts = _transition_counts(sampler, k, per_input, seed=k)
    result = check_law(counts, RandomizedResponse(law_eps).log_transition_matrix(k).exp().numpy())
    assert not result.passed
    assert result.cp_misses > 0 and result.chi2_p < 1e-6


def test_reference_keep_probabilities() -> None:
    """docs/SPEC.md §4.1: K = 2 gives 0.6225 / 0.7311 / 0.8808 / 0.9526 at eps 0.5 / 1 / 2 / 3."""
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
