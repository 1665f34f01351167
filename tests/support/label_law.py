"""Shared statistics for the label mechanisms' tests: a sampler against an exact law, and the
e^eps bound on an exact law. Used by test_randomized_response.py and test_rr_prior.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy import stats

from mechanisms.audit import clopper_pearson

P_MIN = 1e-4  # family-wise threshold of docs/SPEC.md §11
ALPHA = 1e-4  # family-wise level of the Clopper-Pearson bounds (Bonferroni over all cells)


@dataclass(frozen=True)
class LawCheck:
    """Agreement of empirical release counts with an exact output law.

    ``outside_support``: releases where the exact law has probability 0.
    ``cp_misses``: cells whose two-sided Clopper-Pearson interval, at level
    ALPHA / (number of cells), does not contain the exact probability.
    ``chi2_p``: pooled chi-square p-value over the support of the rows whose
    expected counts are all >= 5 (1.0 when there is none; the CP bounds cover
    the others).
    """

    outside_support: int
    cp_misses: int
    chi2_p: float

    @property
    def passed(self) -> bool:
        return self.outside_support == 0 and self.cp_misses == 0 and self.chi2_p > P_MIN


def release_counts(releases: torch.Tensor, num_classes: int) -> np.ndarray:
    """[R, n] releases (R rows of n draws each) -> [R, K] counts."""
    out = releases.reshape(releases.shape[0], -1).numpy()
    return np.stack([np.bincount(row, minlength=num_classes) for row in out])


def check_law(counts: np.ndarray, probs: np.ndarray) -> LawCheck:
    """Compare ``counts`` [R, K] (each row n draws of one input) with exact ``probs`` [R, K]."""
    counts, probs = np.asarray(counts, dtype=np.int64), np.asarray(probs, dtype=np.float64)
    n = counts.sum(axis=1, keepdims=True)
    support = probs > 0
    outside = int(counts[~support].sum())
    lo, hi = clopper_pearson(counts, np.broadcast_to(n, counts.shape), alpha=ALPHA / counts.size)
    misses = int(((probs < lo) | (probs > hi)).sum())
    expected = n * probs
    usable = np.all(np.where(support, expected >= 5, True), axis=1)
    stat, df = 0.0, 0
    for r in np.flatnonzero(usable):
        s = support[r]
        stat += float((((counts[r, s] - expected[r, s]) ** 2) / expected[r, s]).sum())
        df += int(s.sum()) - 1
    chi2_p = float(stats.chi2.sf(stat, df)) if df > 0 else 1.0
    return LawCheck(outside_support=outside, cp_misses=misses, chi2_p=chi2_p)


@dataclass(frozen=True)
class RatioCheck:
    """The e^eps bound on an exact law ``log_p`` [..., Y, K] (Y inputs, K outputs, any batch dims).

    ``normalised``: every row's logsumexp is 0 within 1e-12. ``same_support``:
    the set of outputs of positive probability does not depend on the input
    (otherwise some ratio is infinite). ``max_log_ratio``: the largest
    log P[j | y] - log P[j | y'] over the batch, j in the support, y, y';
    ``per_batch``: that maximum per batch entry (shape of the batch dims).
    """

    normalised: bool
    same_support: bool
    finite_on_support: bool
    max_log_ratio: float
    per_batch: torch.Tensor

    def bounded_by(self, eps: float) -> bool:
        """Pure eps-LDP: supports agree and every log-ratio is <= eps (relative slack 1e-12)."""
        ok = self.normalised and self.same_support and self.finite_on_support
        return ok and self.max_log_ratio <= eps * (1 + 1e-12) + 1e-12


def check_ratio(log_p: torch.Tensor) -> RatioCheck:
    """See :class:`RatioCheck`; ``log_p`` is float64 with -inf outside the support."""
    normalised = bool((torch.logsumexp(log_p, dim=-1).abs() < 1e-12).all())
    support = log_p > -torch.inf
    same_support = bool((support == support[..., :1, :]).all())
    finite = bool(torch.isfinite(log_p[support]).all())
    hi = torch.where(support, log_p, -torch.inf).amax(dim=-2)
    lo = torch.where(support, log_p, torch.inf).amin(dim=-2)
    gap = torch.where(support.any(dim=-2), hi - lo, torch.zeros_like(hi))
    per_batch = gap.amax(dim=-1)
    return RatioCheck(normalised, same_support, finite, float(per_batch.max()), per_batch)
