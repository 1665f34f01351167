"""Clopper-Pearson bounds, the audit's result and the threshold test: the statistics of an audit.

Part of :mod:`mechanisms.audit` (its docstring states the audit's guarantee)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from scipy import stats

Sampler = Callable[[int, torch.Generator], torch.Tensor]
"""``sampler(n, generator)`` returns n independent releases, first dimension n."""
Statistic = Callable[[torch.Tensor], torch.Tensor]
"""Maps releases [n, ...] to a real statistic [n]."""

DEFAULT_ALPHA = 0.05
DEFAULT_THRESHOLDS = 64
DEFAULT_CHUNK = 1 << 17


# --------------------------------------------------------------------------- Clopper-Pearson
def cp_lower(k: Any, n: Any, alpha: float) -> np.ndarray:
    """One-sided (1 - alpha) Clopper-Pearson lower bound on a binomial proportion (0 when k = 0)."""
    k, n = np.asarray(k, dtype=np.float64), np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        lo = stats.beta.ppf(alpha, k, n - k + 1)
    return np.where(k <= 0, 0.0, lo)


def cp_upper(k: Any, n: Any, alpha: float) -> np.ndarray:
    """One-sided (1 - alpha) Clopper-Pearson upper bound on a binomial proportion (1 when k = n)."""
    k, n = np.asarray(k, dtype=np.float64), np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        hi = stats.beta.ppf(1.0 - alpha, k + 1, n - k)
    return np.where(k >= n, 1.0, hi)


def clopper_pearson(k: Any, n: Any, alpha: float = DEFAULT_ALPHA) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided equal-tailed (1 - alpha) Clopper-Pearson interval ("exact" binomial CI).

    Equals ``scipy.stats.binomtest(k, n).proportion_ci(1 - alpha, method="exact")``;
    vectorised over ``k`` (and ``n``).
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    return cp_lower(k, n, alpha / 2), cp_upper(k, n, alpha / 2)


# --------------------------------------------------------------------------- result
@dataclass(frozen=True)
class AuditResult:
    """Outcome of one audit (the module docstring and docs/SPEC.md §15.6 say what it guarantees).

    Attributes
    ----------
    epsilon_lb : float
        (1 - alpha) lower bound on the epsilon the pair needs (0 when no event
        gave a positive numerator).
    claimed_epsilon : float or None
        What the mechanism's guarantee claims for this pair (None: not given).
    delta : float
        The delta subtracted from TPR_lo.
    alpha : float
        Family-wise error level of all the confidence bounds together.
    threshold, tail, positive :
        The maximising event: ``T > threshold`` (tail "upper") or
        ``T <= threshold`` (tail "lower"); ``positive`` is the input ("x" or
        "x_prime") whose probability is the numerator.
    count_positive, count_negative : int
        Evaluation samples in the event under the positive / negative input
        (true and false positives), out of ``num_samples`` each.
    tpr_lo, fpr_hi : float
        Their Clopper-Pearson bounds at the Bonferroni level.
    epsilon_hat : float
        Point estimate log((TP/N - delta) / (FP/N)) at that event (may be inf or nan).
    num_samples, pilot_samples, num_thresholds : int
        Evaluation samples per input, pilot samples per input, grid size.
    seed : int or None
        Seed of the generator that drew every sample.
    mechanism, level : str or None
        Registry name and level of the audited mechanism (audit_mechanism only).
    guarantee : dict or None
        ``Guarantee.to_dict()`` of the audited mechanism.
    input_dim, output_dim : int or None
        Embedding dimension in and out (sentence level).
    num_classes : int or None
        K (label level).
    prior : list of float or None
        The public label prior every release was drawn under (label level).
    pair_distance : float or None
        d(x, x') in the guarantee's metric (metric guarantees; word level also
        "mahalanobis").
    words : (str, str) or None
        The audited word pair (word level).
    num_sentences : int or None
        k, the length of both documents (document level).
    """

    epsilon_lb: float
    claimed_epsilon: float | None
    delta: float
    alpha: float
    threshold: float | None
    tail: str | None
    positive: str | None
    count_positive: int
    count_negative: int
    tpr_lo: float
    fpr_hi: float
    epsilon_hat: float
    num_samples: int
    pilot_samples: int
    num_thresholds: int
    seed: int | None = None
    mechanism: str | None = None
    level: str | None = None
    guarantee: dict[str, Any] | None = None
    input_dim: int | None = None
    output_dim: int | None = None
    num_classes: int | None = None
    prior: list[float] | None = None
    pair_distance: float | None = None
    words: tuple[str, str] | None = None
    num_sentences: int | None = None

    @property
    def consistent(self) -> bool:
        """True unless the audit refutes the claim (epsilon_lb > claimed epsilon)."""
        if self.claimed_epsilon is None:
            return True
        return self.epsilon_lb <= self.claimed_epsilon * (1 + 1e-12)

    def with_info(self, **info: Any) -> AuditResult:
        """A copy with metadata fields set."""
        data = asdict(self)
        data.update(info)
        return AuditResult(**data)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: non-finite floats become None; adds ``consistent``."""
        out: dict[str, Any] = {}
        for key, value in asdict(self).items():
            if isinstance(value, float) and not math.isfinite(value):
                value = None
            out[key] = value
        out["consistent"] = self.consistent
        return out


# --------------------------------------------------------------------------- the threshold test
def threshold_counts(stat: torch.Tensor | np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Number of entries of ``stat`` strictly above each threshold."""
    values = np.sort(np.asarray(stat.cpu() if isinstance(stat, torch.Tensor) else stat, dtype=np.float64).ravel())
    return values.size - np.searchsorted(values, thresholds, side="right")


def threshold_audit(
    counts_x: np.ndarray,
    counts_x_prime: np.ndarray,
    num_samples: int,
    thresholds: np.ndarray,
    delta: float = 0.0,
    alpha: float = DEFAULT_ALPHA,
) -> AuditResult:
    """epsilon_lb from exceedance counts #{T > t} under x and x' (N samples each).

    ``thresholds`` must have been fixed without looking at the samples that gave
    the counts. Bonferroni: every one-sided bound at alpha / (4 * len(thresholds)).
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    if not 0 <= delta < 1:
        raise ValueError(f"delta must lie in [0, 1), got {delta!r}")
    thresholds = np.asarray(thresholds, dtype=np.float64).ravel()
    kx = np.asarray(counts_x, dtype=np.int64).ravel()
    kp = np.asarray(counts_x_prime, dtype=np.int64).ravel()
    if not (kx.shape == kp.shape == thresholds.shape) or thresholds.size == 0:
        raise ValueError("need one count per threshold for each input, and at least one threshold")
    n = int(num_samples)
    level = alpha / (4 * thresholds.size)
    lo_x, hi_x = cp_lower(kx, n, level), cp_upper(kx, n, level)
    lo_p, hi_p = cp_lower(kp, n, level), cp_upper(kp, n, level)
    # (tail, positive, TP count, FP count, TPR_lo, FPR_hi); lower tail = complements.
    candidates = [
        ("upper", "x", kx, kp, lo_x, hi_p),
        ("upper", "x_prime", kp, kx, lo_p, hi_x),
        ("lower", "x", n - kx, n - kp, 1.0 - hi_x, 1.0 - lo_p),
        ("lower", "x_prime", n - kp, n - kx, 1.0 - hi_p, 1.0 - lo_x),
    ]
    best: AuditResult | None = None
    for tail, positive, tp, fp, tpr_lo, fpr_hi in candidates:
        num = tpr_lo - delta
        with np.errstate(divide="ignore", invalid="ignore"):
            eps = np.where(
                (num > 0) & (fpr_hi > 0), np.log(np.maximum(num, 1e-300) / np.maximum(fpr_hi, 1e-300)), -np.inf
            )
        i = int(np.argmax(eps))
        if not np.isfinite(eps[i]):
            continue
        if best is None or eps[i] > best.epsilon_lb:
            with np.errstate(divide="ignore", invalid="ignore"):
                hat = float(np.log((tp[i] / n - delta) / (fp[i] / n))) if tp[i] / n > delta else float("nan")
            best = AuditResult(
                epsilon_lb=float(eps[i]),
                claimed_epsilon=None,
                delta=float(delta),
                alpha=float(alpha),
                threshold=float(thresholds[i]),
                tail=tail,
                positive=positive,
                count_positive=int(tp[i]),
                count_negative=int(fp[i]),
                tpr_lo=float(tpr_lo[i]),
                fpr_hi=float(fpr_hi[i]),
                epsilon_hat=hat,
                num_samples=n,
                pilot_samples=0,
                num_thresholds=int(thresholds.size),
            )
    if best is None or best.epsilon_lb < 0:
        return AuditResult(
            epsilon_lb=0.0,
            claimed_epsilon=None,
            delta=float(delta),
            alpha=float(alpha),
            threshold=None,
            tail=None,
            positive=None,
            count_positive=0,
            count_negative=0,
            tpr_lo=0.0,
            fpr_hi=1.0,
            epsilon_hat=float("nan"),
            num_samples=n,
            pilot_samples=0,
            num_thresholds=int(thresholds.size),
        )
    return best
