"""RR-with-prior (docs/SPEC.md §11.3 item 4): k*, support, outcome probabilities, ratio bound, refusal of raw priors.

The mechanism states its own exact law (``RRWithPrior.log_output_probabilities``);
the tests check it against a brute-force reading of docs/SPEC.md §4.2, the sampler
against it (Clopper-Pearson on every cell, pooled chi-square), and the e^eps
bound and its tightness on it for random priors. Each statistical or analytic
check has a power check: a wrong sampler, a wrong k* or a wrong law fails it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

import mechanisms
from mechanisms import LabelPrior, RRWithPrior
from mechanisms.randomized_response import keep_probability
from mechanisms.rr_prior import top_k_sets
from tests.support.label_law import check_law, check_ratio, release_counts

N = 100_000


def _brute_k_star(p: np.ndarray, eps: float) -> int:
    order = np.argsort(-p, kind="stable")
    scores = [math.exp(eps) / (math.exp(eps) + k - 1) * p[order[:k]].sum() for k in range(1, len(p) + 1)]
    return int(np.argmax(scores)) + 1


def _dirichlet(num: int, k: int, seed: int, concentration: float = 1.0) -> torch.Tensor:
    """``num`` seeded Dirichlet(concentration) priors over k labels, float64 [num, k]."""
    return torch.from_numpy(np.random.default_rng(seed).dirichlet(np.full(k, concentration), num))


def _priors(k: int, seed: int) -> torch.Tensor:
    """Seeded test priors over k labels: Dirichlet(1) and Dirichlet(0.3) (peaked), the uniform
    prior, a one-hot prior (k* = 1), a prior with ties, and near-uniform Dirichlet(1000)."""
    ties = torch.tensor([3.0, 3.0] + [1.0] * (k - 2), dtype=torch.float64)
    fixed = torch.stack(
        [torch.full((k,), 1.0 / k, dtype=torch.float64), torch.eye(k, dtype=torch.float64)[k - 1], ties / ties.sum()]
    )
    return torch.cat(
        [_dirichlet(100, k, seed), _dirichlet(100, k, seed + 1, 0.3), fixed, _dirichlet(50, k, seed + 2, 1000.0)]
    )


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_k_star_matches_brute_force(eps: float) -> None:
    probs = _dirichlet(500, 6, seed=int(10 * eps))
    _, k = top_k_sets(probs, eps)
    assert k.tolist() == [_brute_k_star(p, eps) for p in probs.numpy()]


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_k_star_check_has_power(eps: float) -> None:
    """Power: k* computed at 3 eps, or as the argmax of the prior mass alone (no keep factor),
    differs from the brute force of docs/SPEC.md §4.2 on some of the same priors."""
    probs = _dirichlet(500, 6, seed=int(10 * eps))
    brute = [_brute_k_star(p, eps) for p in probs.numpy()]
    assert top_k_sets(probs, 3 * eps)[1].tolist() != brute
    assert top_k_sets(probs, 1e6)[1].tolist() != brute  # keep factor ~1: k* = argmax of the mass


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


def test_outcome_test_has_power(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain RR over all K labels (ignoring the prior) fails the support check; RR-with-prior
    keeping with the probability of 3 eps fails the keep-rate binomial test; a k* one too small
    (k* = 1: y outside the set always gets label 0) fails the uniform-on-set binomial test."""
    mech = mechanisms.create("rr", epsilon=1.0)
    out = mech.sanitize(torch.full((N,), 1), 4, torch.Generator().manual_seed(0)).numpy()
    assert not set(np.unique(out)) <= {0, 1}
    prior, eps = [0.4, 0.35, 0.15, 0.1], 1.0
    keep = math.exp(eps) / (math.exp(eps) + 1)
    with monkeypatch.context() as patch:
        patch.setattr("mechanisms.rr_prior.keep_probability", lambda e, k: keep_probability(3 * e, k))
        out = _draw(prior, 1, eps)
    assert stats.binomtest(int((out == 1).sum()), N, keep).pvalue < 1e-6
    with monkeypatch.context() as patch:
        patch.setattr("mechanisms.rr_prior.top_k_sets", _shifted_k_star(-1))
        out = _draw(prior, 3, eps)
    assert stats.binomtest(int((out == 0).sum()), N, 0.5).pvalue < 1e-6


def _uniform_prior_p(eps: float, sample_eps: float) -> float:
    """Binomial p-value of the keep rate of rr_prior(sample_eps) without a prior (K = 3)
    against the K-ary RR keep rate at eps."""
    out = mechanisms.create("rr_prior", epsilon=sample_eps).sanitize(
        torch.zeros(N, dtype=torch.long), 3, torch.Generator().manual_seed(1)
    )
    keep = 1 / (1 + 2 * math.exp(-eps))
    return stats.binomtest(int((out == 0).sum()), N, keep).pvalue


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_uniform_prior_is_plain_rr(eps: float) -> None:
    assert _uniform_prior_p(eps, eps) > 1e-4


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_uniform_prior_check_has_power(eps: float) -> None:
    """Power: rr_prior sampling at 3 eps fails the same binomial test."""
    assert _uniform_prior_p(eps, 3 * eps) < 1e-6


# --------------------------------------------------------------------------- the mechanism's own law
def _brute_log_law(p: np.ndarray, y: int, eps: float) -> np.ndarray:
    """docs/SPEC.md §4.2 read literally for one prior and one label, as log-probabilities over the K outputs."""
    k = _brute_k_star(p, eps)
    top = np.argsort(-p, kind="stable")[:k]
    out = np.full(p.size, -math.inf)
    if y in top:
        log_keep = -math.log1p((k - 1) * math.exp(-eps))
        out[top] = log_keep - eps
        out[y] = log_keep
    else:
        out[top] = -math.log(k)
    return out


@pytest.mark.parametrize("eps", [0.1, 1.0, 5.0])
def test_output_law_matches_brute_force_rule(eps: float) -> None:
    """``log_output_probabilities`` equals docs/SPEC.md §4.2 read literally, row by row (200 seeded priors,
    every label). Catches a wrong set Y_k*, a wrong keep probability, a wrong uniform branch."""
    k = 5
    priors = _priors(k, seed=7)[::2]
    y = torch.arange(k).repeat(priors.shape[0])
    rows = priors.repeat_interleave(k, dim=0)
    got = RRWithPrior(eps).log_output_probabilities(y, k, LabelPrior(rows, "public")).numpy()
    want = np.stack([_brute_log_law(p, int(label), eps) for p, label in zip(rows.numpy(), y.tolist(), strict=True)])
    assert np.array_equal(np.isinf(got), np.isinf(want))
    np.testing.assert_allclose(got[np.isfinite(want)], want[np.isfinite(want)], rtol=1e-12, atol=1e-13)


def _law_per_prior(mech: RRWithPrior, priors: torch.Tensor, k: int, label_prior=None) -> torch.Tensor:
    """[R, K (true label), K (output)] log-law of ``mech`` for each prior row and every true label.

    ``label_prior(prior_rows, y)`` may replace the prior given for label y (power checks)."""
    r = priors.shape[0]
    y = torch.arange(k).repeat(r)
    rows = priors.repeat_interleave(k, dim=0)
    if label_prior is not None:
        rows = label_prior(rows, y)
    return mech.log_output_probabilities(y, k, LabelPrior(rows, "public")).reshape(r, k, k)


@pytest.mark.parametrize("k", [2, 5, 10])
@pytest.mark.parametrize("eps", [0.01, 0.1, 1.0, 5.0, 50.0, 1000.0])
def test_output_law_bounded_and_tight_for_random_priors(k: int, eps: float) -> None:
    """On the mechanism's own law, for 253 seeded priors (random, peaked, uniform, one-hot, tied):
    rows sum to 1, the support Y_k* does not depend on the true label, every entry there is finite
    (eps = 1000 included), every log-ratio between two true labels is <= eps, and the maximum is
    exactly eps whenever k* >= 2 (tight) and 0 when k* = 1. Catches a law that breaks the
    guarantee, is not tight, overflows, or has a label-dependent support."""
    priors = _priors(k, seed=k)
    ratio = check_ratio(_law_per_prior(RRWithPrior(eps), priors, k))
    assert ratio.bounded_by(eps), ratio
    _, k_star = top_k_sets(priors, eps)
    several = k_star >= 2
    assert bool(several.any())  # the tightness check below is not vacuous
    assert torch.allclose(
        ratio.per_batch[several], torch.full((int(several.sum()),), eps, dtype=torch.float64), rtol=1e-9, atol=0
    )
    assert bool((ratio.per_batch[~several] == 0).all())


def _boost_true_label(rows: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """A prior that depends on the true label (the raw-embedding prior the mechanism refuses)."""
    boosted = rows + torch.nn.functional.one_hot(y, rows.shape[1]).to(rows.dtype)
    return boosted / boosted.sum(dim=1, keepdim=True)


@pytest.mark.parametrize("eps", [0.1, 1.0, 5.0])
def test_output_law_check_has_power(eps: float) -> None:
    """Power: the same check rejects the law of RR-with-prior at 3 eps (ratio 3 eps) and the law
    under a prior that depends on the true label (supports differ or the ratio exceeds eps)."""
    k = 5
    priors = _priors(k, seed=k)
    assert not check_ratio(_law_per_prior(RRWithPrior(3 * eps), priors, k)).bounded_by(eps)
    assert not check_ratio(_law_per_prior(RRWithPrior(eps), priors, k, _boost_true_label)).bounded_by(eps)


# --------------------------------------------------------------------------- the sampler against the law
PER_INPUT = 4000


def _sampler_priors(k: int) -> torch.Tensor:
    """16 seeded priors over k labels: 10 Dirichlet(1), 4 Dirichlet(0.3), the uniform and a tied one."""
    ties = torch.tensor([3.0, 3.0] + [1.0] * (k - 2), dtype=torch.float64)
    return torch.cat(
        [
            _dirichlet(10, k, 3),
            _dirichlet(4, k, 4, 0.3),
            torch.full((1, k), 1.0 / k, dtype=torch.float64),
            (ties / ties.sum())[None],
        ]
    )


def _law_counts(eps: float, k: int, priors: torch.Tensor, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(counts [R*K, K] of PER_INPUT releases per (prior, true label), exact law [R*K, K])."""
    y = torch.arange(k).repeat(priors.shape[0])
    rows = priors.repeat_interleave(k, dim=0)
    law = RRWithPrior(eps).output_probabilities(y, k, LabelPrior(rows, "public")).numpy()
    big = LabelPrior(rows.repeat_interleave(PER_INPUT, dim=0), "public")
    out = RRWithPrior(eps).sanitize(y.repeat_interleave(PER_INPUT), k, torch.Generator().manual_seed(seed), big)
    return release_counts(out.reshape(-1, PER_INPUT), k), law


@pytest.mark.parametrize("eps", [0.5, 2.0, 1000.0])
def test_sampler_matches_output_law(eps: float) -> None:
    """Releases of 16 seeded priors x 5 true labels (4000 each) against the mechanism's exact law:
    none outside Y_k*, every cell inside its Clopper-Pearson interval (Bonferroni, family-wise
    1e-4), pooled chi-square p > 1e-4; the cases cover k* = 1, 1 < k* < K and k* = K, with y inside
    and outside Y_k*. Catches a sampler that does not draw from ``log_output_probabilities``."""
    k = 5
    priors = _sampler_priors(k)
    counts, law = _law_counts(eps, k, priors)
    result = check_law(counts, law)
    assert result.passed, result
    k_star = top_k_sets(priors, eps)[1]
    if eps == 2.0:
        assert {1, k} <= set(k_star.tolist()) and bool(((k_star > 1) & (k_star < k)).any())


def _shifted_k_star(shift: int):
    """A wrong top_k_sets: k* + shift, clamped to [1, K]."""
    real = top_k_sets

    def wrong(probs: torch.Tensor, epsilon: float) -> tuple[torch.Tensor, torch.Tensor]:
        order, k_star = real(probs, epsilon)
        return order, (k_star + shift).clamp(1, probs.shape[1])

    return wrong


@pytest.mark.parametrize("wrong", ["keep at 3 eps", "k* + 1", "k* - 1", "law at 3 eps"])
def test_sampler_law_check_has_power(wrong: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Power: the same check (eps = 2) fails for a sampler keeping with the probability of 3 eps,
    for samplers with a wrong k* (one more, one less), and for the real sampler compared with the
    law of 3 eps. The exact law is computed before the sampler is patched."""
    eps, k = 2.0, 5
    priors = _sampler_priors(k)
    _, law = _law_counts(eps, k, priors)
    if wrong == "keep at 3 eps":
        monkeypatch.setattr("mechanisms.rr_prior.keep_probability", lambda e, kk: keep_probability(3 * e, kk))
    elif wrong.startswith("k*"):
        monkeypatch.setattr("mechanisms.rr_prior.top_k_sets", _shifted_k_star(1 if "+" in wrong else -1))
    elif wrong == "law at 3 eps":
        _, law = _law_counts(3 * eps, k, priors)
    counts, _ = _law_counts(eps, k, priors)
    assert not check_law(counts, law).passed


def test_raw_prior_is_refused() -> None:
    with pytest.raises(ValueError, match="refuses a prior from 'raw'"):
        LabelPrior(torch.ones(2, 2) / 2, "raw")
    with pytest.raises(TypeError):
        mechanisms.create("rr_prior", epsilon=1.0).sanitize(torch.zeros(2, dtype=torch.long), 2, None, torch.ones(2, 2))
    with pytest.raises(TypeError):
        RRWithPrior(1.0).log_output_probabilities(torch.zeros(2, dtype=torch.long), 2, torch.ones(2, 2))
    with pytest.raises(ValueError, match="shape"):
        RRWithPrior(1.0).log_output_probabilities(
            torch.zeros(2, dtype=torch.long), 2, LabelPrior(torch.ones(3, 2) / 2, "public")
        )
