"""Empirical privacy audit of a mechanism on one pair of neighbouring inputs
(docs/SPEC.md §11.1 item 8, §15.6; Jagielski et al. 2020, Nasr et al. 2021 "adversary
instantiation": a threshold distinguisher with Clopper-Pearson bounds).

:func:`audit_mechanism` picks a worst-case-style pair and a statistic from the mechanism's
``level`` (sentence, label, word, document); :func:`audit_pair` turns N releases of each input
into ``epsilon_lb``, a Clopper-Pearson lower bound (Bonferroni over thresholds chosen on an
independent pilot sample) on the epsilon the pair needs.

Guarantee: if the mechanism really is (eps, delta)-LDP on the pair, P[epsilon_lb > eps] <= alpha.
It is a sanity lower bound, not a proof of privacy: ``epsilon_lb <= claimed`` says only that this
statistic, on this pair, with N samples, found no violation, and its power is limited (it stays
well below a claimed eps when the loss reaches eps only on rare outputs). The derivation, the
pairs and statistics per level, and the claimed epsilon of a pair: docs/SPEC.md §15.6.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from scipy import stats

from .base import Mechanism
from .guarantee import Guarantee
from .rr_prior import LabelPrior

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


# --------------------------------------------------------------------------- sampling an audit
def _chunks(total: int, chunk: int) -> list[int]:
    return [min(chunk, total - start) for start in range(0, total, chunk)]


def _flat(out: torch.Tensor) -> torch.Tensor:
    return out.reshape(out.shape[0], -1).to(torch.float64)


def _mean_output(sampler: Sampler, n: int, gen: torch.Generator, chunk: int) -> torch.Tensor:
    total: torch.Tensor | None = None
    for size in _chunks(n, chunk):
        s = _flat(sampler(size, gen)).sum(dim=0)
        total = s if total is None else total + s
    assert total is not None
    return total / n


def _statistic_values(sampler: Sampler, statistic: Statistic, n: int, gen: torch.Generator, chunk: int) -> np.ndarray:
    parts = [statistic(sampler(size, gen)).reshape(-1).to(torch.float64).cpu().numpy() for size in _chunks(n, chunk)]
    return np.concatenate(parts)


def _exceedances(
    sampler: Sampler, statistic: Statistic, n: int, gen: torch.Generator, chunk: int, thresholds: np.ndarray
) -> np.ndarray:
    counts = np.zeros(thresholds.size, dtype=np.int64)
    for size in _chunks(n, chunk):
        counts += threshold_counts(statistic(sampler(size, gen)), thresholds)
    return counts


def quantile_grid(pooled: np.ndarray, num_thresholds: int) -> np.ndarray:
    """Thresholds at pooled quantiles, log-spaced towards both tails.

    Levels q and 1 - q for q geometric from ~3 / len(pooled) to 1/2: the
    extreme thresholds are where a tight mechanism's likelihood ratio peaks.
    """
    pooled = np.sort(np.asarray(pooled, dtype=np.float64).ravel())
    if pooled.size == 0:
        raise ValueError("the pilot sample is empty: cannot choose thresholds")
    half = max(1, num_thresholds // 2)
    q_min = min(0.5, 3.0 / pooled.size)
    q = np.geomspace(q_min, 0.5, half)
    levels = np.concatenate([q, 1.0 - q])
    return np.unique(np.quantile(pooled, levels))


def audit_pair(
    sample_x: Sampler,
    sample_x_prime: Sampler,
    num_samples: int,
    seed: int = 0,
    *,
    statistic: Statistic | None = None,
    thresholds: Any = None,
    pilot_samples: int | None = None,
    num_thresholds: int = DEFAULT_THRESHOLDS,
    delta: float = 0.0,
    alpha: float = DEFAULT_ALPHA,
    claimed_epsilon: float | None = None,
    chunk_size: int = DEFAULT_CHUNK,
    device: torch.device | str = "cpu",
    extra_thresholds: Any = None,
) -> AuditResult:
    """Audit one pair of output distributions with a threshold distinguisher.

    Parameters
    ----------
    sample_x, sample_x_prime : callable
        ``sampler(n, generator)`` -> n releases of M(x) / M(x') (first dim n).
    num_samples : int
        N, evaluation samples per input.
    seed : int
        Seed of the single ``torch.Generator`` that draws, in order, the pilot
        and then the evaluation samples (so they are independent).
    statistic : callable or None
        Releases -> real [n]. ``None``: projection of the flattened release onto
        a = mean(pilot M(x)) - mean(pilot M(x')), estimated from the first half
        of the pilot (any output dimension).
    thresholds : array or None
        Fixed grid; ``None``: :func:`quantile_grid` of the pooled statistic of
        the (rest of the) pilot.
    pilot_samples : int or None
        Pilot samples per input (default N/4; 0 when both ``statistic`` and
        ``thresholds`` are given).
    num_thresholds : int
        Grid size when the grid comes from the pilot.
    delta, alpha : float
        The guarantee's delta; the family-wise error level.
    claimed_epsilon : float or None
        Stored in the result (``result.consistent`` compares against it).
    chunk_size : int
        Rows per sampler call (bounds memory; N = 1e6 at m = 16 takes seconds).
    device : torch device
        Device of the generator (the samplers must draw there).
    extra_thresholds : array or None
        Thresholds fixed in advance added to the grid (e.g. the +-inf markers of
        a support leak), counted in the Bonferroni correction like the others.
    """
    n = int(num_samples)
    if n < 1:
        raise ValueError(f"num_samples must be >= 1, got {num_samples!r}")
    gen = torch.Generator(device=device).manual_seed(int(seed))
    need_direction = statistic is None
    need_grid = thresholds is None
    if pilot_samples is None:
        pilot = max(n // 4, 2) if (need_direction or need_grid) else 0
    else:
        pilot = int(pilot_samples)
    if (need_direction or need_grid) and pilot < 2:
        raise ValueError("a pilot sample (>= 2 per input) is needed to choose the direction or the thresholds")

    direction_n = grid_n = pilot
    if need_direction and need_grid:
        direction_n, grid_n = pilot // 2, pilot - pilot // 2
    if need_direction:
        mean_x = _mean_output(sample_x, direction_n, gen, chunk_size)
        mean_p = _mean_output(sample_x_prime, direction_n, gen, chunk_size)
        a = mean_x - mean_p
        norm = float(a.norm())
        a = a / norm if norm > 0 else torch.zeros_like(a).index_fill_(0, torch.tensor([0], device=a.device), 1.0)

        def statistic(out: torch.Tensor, a: torch.Tensor = a) -> torch.Tensor:
            return _flat(out) @ a.to(out.device)

    assert statistic is not None
    if need_grid:
        pooled = np.concatenate(
            [
                _statistic_values(sample_x, statistic, grid_n, gen, chunk_size),
                _statistic_values(sample_x_prime, statistic, grid_n, gen, chunk_size),
            ]
        )
        grid = quantile_grid(pooled, num_thresholds)
    else:
        grid = np.unique(np.asarray(thresholds, dtype=np.float64).ravel())
    if extra_thresholds is not None:
        grid = np.unique(np.concatenate([grid, np.asarray(extra_thresholds, dtype=np.float64).ravel()]))

    counts_x = _exceedances(sample_x, statistic, n, gen, chunk_size, grid)
    counts_p = _exceedances(sample_x_prime, statistic, n, gen, chunk_size, grid)
    result = threshold_audit(counts_x, counts_p, n, grid, delta=delta, alpha=alpha)
    return result.with_info(
        claimed_epsilon=None if claimed_epsilon is None else float(claimed_epsilon),
        pilot_samples=pilot,
        seed=int(seed),
    )


# --------------------------------------------------------------------------- mechanisms
def pair_distance(guarantee: Guarantee, x: torch.Tensor, x_prime: torch.Tensor) -> float | None:
    """d(x, x') in the guarantee's metric ("angular" or "euclidean"); None otherwise."""
    x, x_prime = x.reshape(-1).to(torch.float64), x_prime.reshape(-1).to(torch.float64)
    if guarantee.metric == "angular":
        cos = float(x @ x_prime) / (float(x.norm()) * float(x_prime.norm()))
        return math.acos(max(-1.0, min(1.0, cos)))
    if guarantee.metric == "euclidean":
        return float((x - x_prime).norm())
    return None


def claimed_epsilon(guarantee: Guarantee, x: torch.Tensor | None = None, x_prime: torch.Tensor | None = None) -> float:
    """The epsilon the guarantee claims for the pair (x, x').

    Metric: eps * d(x, x') for the angular and Euclidean metrics, else the pure
    eps * diameter of ``as_ldp`` (an upper bound on eps * d). Pure / approx: eps.
    """
    if guarantee.notion == "metric" and x is not None and x_prime is not None:
        d = pair_distance(guarantee, x, x_prime)
        if d is not None:
            return float(guarantee.epsilon) * d
    return guarantee.as_ldp()[0]


def default_pair(mech: Mechanism, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Worst-case-style sentence pair (x, -x) of shape [dim], float64 (docs/SPEC.md §15.6).

    PrivEmb-like mechanisms (a public ``phi`` [k, dim]; it is drawn by a warm-up
    call if needed) get x = the top right singular vector of phi; mechanisms with
    a finite public ``domain`` get the two domain points farthest apart (after
    phi when there is one). A mechanism that knows its tight pair states it as
    ``mech.default_audit_pair(dim)`` (class_rr: two inputs of different public
    classes; for K > 2 the constant x and -x both have class 0, argmax ties).
    """
    stated = getattr(mech, "default_audit_pair", None)
    if callable(stated):
        x, x_prime = stated(dim)
        return x.to(torch.float64).reshape(-1), x_prime.to(torch.float64).reshape(-1)
    phi = _public_projection(mech, dim)
    domain = getattr(mech, "domain", None)
    if isinstance(domain, torch.Tensor):
        pts = domain.to(torch.float64)
        emb = pts @ phi.T if phi is not None else pts
        far = torch.cdist(emb, emb)
        i, j = divmod(int(far.argmax()), far.shape[1])
        return pts[i].clone(), pts[j].clone()
    if phi is not None:
        x = torch.linalg.svd(phi, full_matrices=False).Vh[0]
    else:
        radius = float(getattr(mech, "clip", 1.0))
        x = torch.full((dim,), radius / math.sqrt(dim), dtype=torch.float64)
    return x, -x


def _no_sanitize(*args: object, **kwargs: object) -> torch.Tensor:
    raise TypeError("this mechanism has no sanitize(): audit it at its own level")


def _public_projection(mech: Mechanism, dim: int) -> torch.Tensor | None:
    try:
        phi = getattr(mech, "phi", None)
    except RuntimeError:  # drawn lazily at the first call: draw it now (public, seed-determined)
        mech.sanitize(  # type: ignore[attr-defined]  # sentence mechanisms that project (PrivEmb) have phi
            torch.ones(1, dim, dtype=torch.float64) / math.sqrt(dim),
            generator=torch.Generator().manual_seed(0),
        )
        phi = getattr(mech, "phi", None)
    if isinstance(phi, torch.Tensor) and phi.dim() == 2 and phi.shape[1] == dim:
        return phi.to(torch.float64)
    return None


def _check_prior(mech: Mechanism, prior: Any, num_classes: int) -> torch.Tensor:
    """The prior as a normalised float64 [K] tensor, after checking it and that ``mech`` takes one."""
    try:
        takes_prior = "prior" in inspect.signature(mech.sanitize).parameters  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        takes_prior = False
    if not takes_prior:
        raise ValueError(f"mechanism {mech.name!r} does not take a label prior (its sanitize has no 'prior')")
    row = torch.as_tensor(prior, dtype=torch.float64).reshape(-1).clone()
    if row.numel() != num_classes or not bool(torch.isfinite(row).all()) or bool((row < 0).any()):
        raise ValueError(f"prior must be {num_classes} finite, non-negative numbers, got {prior!r}")
    total = float(row.sum())
    if not total > 0:
        raise ValueError("prior must have a positive sum")
    return row / total


# --------------------------------------------------------------------------- word level
WORD_PAIR_SEARCH = 4096
"""The default word pair is searched among the first this many words (GloVe: the most frequent)."""


def _word_geometry(mech: Any) -> tuple[str, torch.Tensor | None]:
    """("l1" | "l2" | "mahalanobis" | "projection", whitening or None): the norm whose difference
    ||y - x'|| - ||y - x|| orders the privacy loss of ``mech``'s noisy vector (see :func:`word_statistic`)."""
    from .words import CMP, Mahalanobis, TrLaplace, WordLaplace

    if isinstance(mech, Mahalanobis):
        return "mahalanobis", mech.whitening
    if isinstance(mech, CMP):
        return "l2", None
    if isinstance(mech, (WordLaplace, TrLaplace)):
        return "l1", None
    return "projection", None  # WordGaussian (exact likelihood ratio) and any other noise


def word_pair(mech: Any, search: int = WORD_PAIR_SEARCH, *, alphabetic: bool = False) -> tuple[int, int]:
    """The two words (ids) whose perturbed vectors lie farthest apart in the mechanism's own geometry.

    Among the first ``search`` real words of ``mech.space`` (the whole vocabulary
    when smaller): L1 for the Laplace-type noise (word_laplace, trlaplace: the
    loss bound ||x - x'||_1 / b), the Mahalanobis distance for ``mahalanobis``, L2
    otherwise, on the vectors the mechanism perturbs (clipped when it clips).
    For the pure / approximate guarantees this is the pair closest to the
    calibration point; for the metric ones it maximises eps * d(w, w').
    ``alphabetic``: only words of letters (a one-word document the tokenizer
    counts as one word, as the end-to-end audit needs).
    """
    count = min(int(search), mech.space.num_words)
    vectors = mech.input_vectors(torch.device("cpu"))[:count]
    ids = torch.arange(count)
    if alphabetic:
        ids = torch.tensor([i for i in range(count) if mech.space.words[i].isalpha()], dtype=torch.int64)
        vectors = vectors[ids]
    kind, whitening = _word_geometry(mech)
    if whitening is not None:
        vectors = vectors @ whitening
    far = torch.cdist(vectors, vectors, p=1.0 if kind == "l1" else 2.0)
    i, j = divmod(int(far.argmax()), far.shape[1])
    return int(ids[i]), int(ids[j])


def word_pair_claim(mech: Any, guarantee: Guarantee, w: int, w_prime: int) -> tuple[float | None, float]:
    """(distance, claimed epsilon) of one word's guarantee for the pair of word ids (w, w').

    Metric guarantees: eps * d(phi(w), phi(w')) in the guarantee's metric (the
    Mahalanobis one after whitening), phi being the unclipped public vectors;
    pure and approximate ones: eps.
    """
    table = mech.space.vectors.to(torch.float64)
    x, x_prime = table[w], table[w_prime]
    if guarantee.notion == "metric" and guarantee.metric == "mahalanobis" and hasattr(mech, "whitening"):
        distance = float(((x - x_prime) @ mech.whitening).norm())
        return distance, float(guarantee.epsilon) * distance
    return pair_distance(guarantee, x, x_prime), claimed_epsilon(guarantee, x, x_prime)


def word_statistic(mech: Any, x: torch.Tensor, x_prime: torch.Tensor) -> Statistic:
    """The likelihood-ratio statistic of the noisy vector y for the pair (x, x') (fixed before sampling).

    * cmp: ||y - x'||_2 - ||y - x||_2 (the loss is eps times it);
    * mahalanobis: the same after whitening by Sigma_lambda^(-1/2);
    * word_laplace: ||y - x'||_1 - ||y - x||_1 (loss: it over the Laplace scale);
    * trlaplace: the same over lambda on the common support, and +-(2 ||x - x'||_1 /
      lambda + 1) when y lies outside the support of x' (resp. x), i.e. the privacy
      loss with +-inf replaced by finite markers;
    * otherwise (word_gaussian, where it is exactly the likelihood ratio): the
      projection onto (x - x') / ||x - x'||.

    The norm differences are rounded to 1e-9 of the pair's distance. The L1
    difference has atoms at +-||x - x'||_1 (y beyond x or x' in every
    coordinate), where float64 rounding of x + z and x' + z differs between the
    two inputs; a threshold just off the atom then separates them on rounding
    bits alone (Mironov 2012), e.g. epsilon_lb 1.10 > 1 for word_laplace on an
    antipodal pair in R^2. The word release is the decoded word, not these bits,
    so the audit measures the mathematical mechanism.
    """
    from .words import TrLaplace

    kind, whitening = _word_geometry(mech)
    x, x_prime = x.reshape(1, -1).to(torch.float64), x_prime.reshape(1, -1).to(torch.float64)
    if kind == "projection":
        a = (x - x_prime).reshape(-1)
        a = a / a.norm().clamp_min(1e-300)
        return lambda y: _flat(y) @ a.to(y.device)
    if whitening is not None:
        x, x_prime = x @ whitening, x_prime @ whitening
    order = 1.0 if kind == "l1" else 2.0
    support = mech.params[:2] if isinstance(mech, TrLaplace) else None
    quantum = 1e-9 * max(float(torch.linalg.vector_norm(x - x_prime, order)), 1e-300)

    def statistic(y: torch.Tensor) -> torch.Tensor:
        y = _flat(y)
        if whitening is not None:
            y = y @ whitening.to(y.device)
        xd, pd = x.to(y.device), x_prime.to(y.device)
        diff = torch.linalg.vector_norm(y - pd, order, dim=1) - torch.linalg.vector_norm(y - xd, order, dim=1)
        diff = torch.round(diff / quantum) * quantum
        if support is None:
            return diff
        lam, a = support
        loss = diff / lam
        marker = 2.0 * float((xd - pd).abs().sum()) / lam + 1.0
        loss = torch.where(((y - pd).abs() > a).any(dim=1), marker, loss)
        return torch.where(((y - xd).abs() > a).any(dim=1), -marker, loss)

    return statistic


def _support_markers(mech: Any, x: torch.Tensor, x_prime: torch.Tensor) -> list[float] | None:
    """TrLaplace: thresholds that isolate the +-marker values of :func:`word_statistic` (the support leaks)."""
    from .words import TrLaplace

    if not isinstance(mech, TrLaplace):
        return None
    lam = mech.params[0]
    marker = 2.0 * float((x - x_prime).abs().sum()) / lam + 1.0
    return [marker - 0.5, -marker + 0.5]


def _audit_word(
    mech: Any, guarantee: Guarantee, num_samples: int, seed: int, pair: Any, common: dict[str, Any]
) -> AuditResult:
    if not (hasattr(mech, "space") and (hasattr(mech, "perturb") or hasattr(mech, "sanitize_ids"))):
        raise ValueError(f"word mechanism {mech.name!r} exposes neither perturb nor sanitize_ids: cannot audit it")
    w, w_prime = word_pair(mech) if pair is None else (int(pair[0]), int(pair[1]))
    if w == w_prime:
        raise ValueError("the two words of the pair must differ")
    space = mech.space
    distance, claimed = word_pair_claim(mech, guarantee, w, w_prime)  # phi(w) unclipped: the metric space

    if hasattr(mech, "perturb"):  # the noisy vector: the decoding to a word is post-processing
        inputs = mech.input_vectors(torch.device("cpu"))
        xi, xpi = inputs[w], inputs[w_prime]

        def sampler(word: int) -> Sampler:
            def draw(n: int, gen: torch.Generator) -> torch.Tensor:
                return mech.perturb(torch.full((n,), word, dtype=torch.int64, device=gen.device), gen)

            return draw

        result = audit_pair(
            sampler(w),
            sampler(w_prime),
            num_samples,
            seed,
            statistic=word_statistic(mech, xi, xpi),
            extra_thresholds=_support_markers(mech, xi, xpi),
            delta=float(guarantee.delta),
            claimed_epsilon=claimed,
            **common,
        )
    else:  # only the output word is exposed: T = 1{output == w}

        def id_sampler(word: int) -> Sampler:
            def draw(n: int, gen: torch.Generator) -> torch.Tensor:
                return mech.sanitize_ids(torch.full((n,), word, dtype=torch.int64, device=gen.device), gen)

            return draw

        common = {**common, "pilot_samples": common.get("pilot_samples") or 0}
        common.pop("num_thresholds", None)
        result = audit_pair(
            id_sampler(w),
            id_sampler(w_prime),
            num_samples,
            seed,
            statistic=lambda out: (out == w).to(torch.float64),
            thresholds=[0.5],
            delta=float(guarantee.delta),
            claimed_epsilon=claimed,
            **common,
        )
    return result.with_info(
        input_dim=space.dim,
        output_dim=space.dim if hasattr(mech, "perturb") else 1,
        pair_distance=distance,
        words=(space.words[w], space.words[w_prime]),
    )


# --------------------------------------------------------------------------- document level
def document_pair(mech: Any, num_sentences: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """Two documents of ``num_sentences`` sentences that differ in their first sentence, float64 [k, d].

    * With a public box (``lo``, ``hi``: truncation): the other sentences sit at
      the box centre and the changed one is ``lo`` in x and ``hi`` in x': opposite
      corners, every coordinate of the clipped mean moves by w_d / k, the loss
      the noise is calibrated to (epsilon exactly).
    * With public candidates (deepcandidate): the other sentences are the mean
      candidate and the changed one is one of the two candidates farthest apart.
      This is a generic choice, not a tight one (the loss of the exponential
      mechanism reaches epsilon only when one candidate gains a unit of utility
      while all the others lose one); pass ``pair`` for a constructed tight pair.
    """
    k = int(num_sentences)
    if k < 2:
        raise ValueError(f"num_sentences must be >= 2 (SentDP), got {num_sentences!r}")
    if isinstance(getattr(mech, "lo", None), torch.Tensor) and isinstance(getattr(mech, "hi", None), torch.Tensor):
        lo, hi = mech.lo.to(torch.float64), mech.hi.to(torch.float64)
        a, b = lo, hi
        centre = (lo + hi) / 2
    elif isinstance(getattr(mech, "candidates", None), torch.Tensor):
        cand = mech.candidates.to(torch.float64)
        far = torch.cdist(cand, cand)
        i, j = divmod(int(far.argmax()), far.shape[1])
        a, b, centre = cand[i], cand[j], cand.mean(dim=0)
    else:
        raise ValueError(f"no default document pair for {mech.name!r}: pass pair=(doc, doc_prime)")
    rest = centre.unsqueeze(0).expand(k - 1, -1)
    return torch.cat([a.unsqueeze(0), rest]), torch.cat([b.unsqueeze(0), rest])


def _audit_document(
    mech: Any,
    guarantee: Guarantee,
    num_samples: int,
    seed: int,
    pair: Any,
    num_sentences: int,
    common: dict[str, Any],
) -> AuditResult:
    if pair is None:
        doc, doc_prime = document_pair(mech, num_sentences)
    else:
        doc, doc_prime = (torch.as_tensor(p, dtype=torch.float64) for p in pair)
        if doc.dim() != 2 or doc.shape != doc_prime.shape:
            raise ValueError("the two documents of the pair must be [k, d] tensors of the same shape")
        changed = int((doc != doc_prime).any(dim=1).sum())
        if changed != 1:
            raise ValueError(f"the two documents must differ in exactly one sentence (SentDP), got {changed}")
    k = int(doc.shape[0])

    def sampler(d: torch.Tensor) -> Sampler:
        def draw(n: int, gen: torch.Generator) -> torch.Tensor:
            return mech.sanitize([d.to(gen.device)] * n, generator=gen)

        return draw

    delta = float(guarantee.delta)
    claimed = claimed_epsilon(guarantee)
    if hasattr(mech, "log_probs"):  # a candidate index with a public exact law: T = log P_x(i) - log P_x'(i)
        score = (mech.log_probs(doc) - mech.log_probs(doc_prime)).to(torch.float64)
        values = np.unique(score.numpy())
        cuts = (values[1:] + values[:-1]) / 2 if values.size > 1 else values

        def statistic(out: torch.Tensor) -> torch.Tensor:
            return score.to(out.device)[out.long()]

        common = {**common, "pilot_samples": common.get("pilot_samples") or 0}
        common.pop("num_thresholds", None)
        result = audit_pair(
            sampler(doc),
            sampler(doc_prime),
            num_samples,
            seed,
            statistic=statistic,
            thresholds=cuts,
            delta=delta,
            claimed_epsilon=claimed,
            **common,
        )
        return result.with_info(num_sentences=k, input_dim=int(doc.shape[1]), output_dim=1)
    statistic_d: Statistic | None = None
    if hasattr(mech, "log_density"):  # exact log-density of the release: the likelihood ratio
        # Rounded to 1e-9 of the claim, as in word_statistic: the log-ratio has atoms at
        # +-epsilon whose float64 rounding differs between the two documents (the release is
        # c + noise, with c differing), and a threshold just off an atom then separates them on
        # rounding bits (Mironov 2012: unrounded, truncation at eps = 1, d = 2, N = 1e5 gave
        # epsilon_lb 1.07). This audits the mathematical mechanism, not its float encoding.
        quantum = 1e-9 * max(1.0, claimed if math.isfinite(claimed) else 1.0)

        def statistic_d(y: torch.Tensor) -> torch.Tensor:
            ratio = mech.log_density(doc, y) - mech.log_density(doc_prime, y)
            return torch.round(ratio / quantum) * quantum

    result = audit_pair(
        sampler(doc),
        sampler(doc_prime),
        num_samples,
        seed,
        statistic=statistic_d,
        delta=delta,
        claimed_epsilon=claimed,
        **common,
    )
    out_dim = int(sampler(doc)(1, torch.Generator(device=common["device"]).manual_seed(0)).reshape(1, -1).shape[1])
    return result.with_info(num_sentences=k, input_dim=int(doc.shape[1]), output_dim=out_dim)


def audit_mechanism(
    mech: Mechanism,
    num_samples: int = 10**6,
    seed: int = 0,
    *,
    dim: int = 16,
    num_classes: int = 2,
    pair: tuple[Any, Any] | None = None,
    prior: Any = None,
    alpha: float = DEFAULT_ALPHA,
    pilot_samples: int | None = None,
    num_thresholds: int = DEFAULT_THRESHOLDS,
    chunk_size: int = DEFAULT_CHUNK,
    device: torch.device | str = "cpu",
    claim: Guarantee | None = None,
    num_sentences: int = 2,
) -> AuditResult:
    """Audit ``mech`` on its worst-case-style pair (sentence, label, word or document level).

    Parameters
    ----------
    mech : Mechanism
        Any registered mechanism of level "sentence" or "label" (including
        "none", whose claimed epsilon is inf).
    num_samples, seed :
        N releases per input; seed of the generator (deterministic result).
    dim : int
        Sentence level: input dimension m (the output dimension may differ).
    num_classes : int
        Label level: K.
    pair : (x, x') or None
        Override the pair: two [dim] tensors (sentence; inputs must already lie
        in the mechanism's domain for the claimed epsilon to mean anything), or
        two ints (label). Default: :func:`default_pair` / labels (0, 1).
    prior : sequence of K floats or None
        Label level only: a public prior over the K labels (finite,
        non-negative, positive sum; normalised here), given to every release as
        ``mechanisms.rr_prior.LabelPrior(prior per row, "public")``. The
        mechanism's ``sanitize`` must accept a ``prior`` argument (ValueError
        otherwise). ``None``: the mechanism's default (no prior).
    alpha, pilot_samples, num_thresholds, chunk_size, device :
        As in :func:`audit_pair`.
    claim : Guarantee or None
        Audit against this guarantee instead of ``mech.guarantee`` (power checks:
        a mechanism built at 3x its epsilon against the 1x claim). Its epsilon
        (times d(x, x') for a metric claim) and delta are what the audit tests.
    num_sentences : int
        Document level: k, the length of the default pair's documents.

    Notes
    -----
    Word level: ``pair`` is two word ids (default :func:`word_pair`); the release
    audited is the noisy vector (``perturb``), the decoding to a word being
    post-processing; the statistic is :func:`word_statistic`. Only a mechanism
    without ``perturb`` is audited on its output word (T = 1{output == w}).
    Document level: ``pair`` is two [k, d] documents that differ in exactly one
    sentence (default :func:`document_pair`); a mechanism with an exact public
    output law (``log_probs``: deepcandidate) is audited on the released index
    with T = log P_x(i) - log P_x'(i) and thresholds between its distinct
    values (no pilot); one with ``log_density`` (truncation) with the exact
    log-likelihood ratio of the release.
    """
    guarantee = mech.guarantee if claim is None else claim
    delta = float(guarantee.delta)
    # Label and sentence mechanisms release through ``sanitize``; word and document mechanisms are
    # audited through their own entry points below and never call it.
    sanitize: Callable[..., torch.Tensor] = getattr(mech, "sanitize", _no_sanitize)
    if prior is not None and mech.level != "label":
        raise ValueError("a label prior only applies to label mechanisms")
    if mech.level == "label":
        k = int(num_classes)
        y0, y1 = (0, 1) if pair is None else (int(pair[0]), int(pair[1]))
        if y0 == y1:
            raise ValueError("the two labels of the pair must differ")
        prior_row = None if prior is None else _check_prior(mech, prior, k)

        def label_sampler(label: int) -> Sampler:
            def draw(n: int, gen: torch.Generator) -> torch.Tensor:
                y = torch.full((n,), label, dtype=torch.int64, device=gen.device)
                if prior_row is None:
                    return sanitize(y, num_classes=k, generator=gen)
                probs = prior_row.to(gen.device).unsqueeze(0).expand(n, k)
                return sanitize(y, num_classes=k, generator=gen, prior=LabelPrior(probs, "public"))

            return draw

        def is_first(out: torch.Tensor) -> torch.Tensor:
            return (out == y0).to(torch.float64)

        result = audit_pair(
            label_sampler(y0),
            label_sampler(y1),
            num_samples,
            seed,
            statistic=is_first,
            thresholds=[0.5],
            pilot_samples=pilot_samples or 0,
            delta=delta,
            alpha=alpha,
            claimed_epsilon=claimed_epsilon(guarantee),
            chunk_size=chunk_size,
            device=device,
        )
        return result.with_info(
            mechanism=mech.name,
            level=mech.level,
            guarantee=guarantee.to_dict(),
            num_classes=k,
            prior=None if prior_row is None else prior_row.tolist(),
        )

    if mech.level in ("word", "document"):
        common: dict[str, Any] = {
            "alpha": alpha,
            "pilot_samples": pilot_samples,
            "num_thresholds": num_thresholds,
            "chunk_size": chunk_size,
            "device": device,
        }
        if mech.level == "word":
            result = _audit_word(mech, guarantee, num_samples, seed, pair, common)
        else:
            result = _audit_document(mech, guarantee, num_samples, seed, pair, num_sentences, common)
        return result.with_info(mechanism=mech.name, level=mech.level, guarantee=guarantee.to_dict())
    if mech.level != "sentence":
        raise ValueError(f"audit_mechanism handles sentence, label, word and document mechanisms, not {mech.level!r}")
    if pair is None:
        x, x_prime = default_pair(mech, dim)
    else:
        x, x_prime = (torch.as_tensor(p, dtype=torch.float64).reshape(-1) for p in pair)
        if x.shape != x_prime.shape:
            raise ValueError("the two inputs of the pair must have the same shape")
    m = int(x.numel())

    def sentence_sampler(v: torch.Tensor) -> Sampler:
        def draw(n: int, gen: torch.Generator) -> torch.Tensor:
            rows = v.to(gen.device).unsqueeze(0).expand(n, m).contiguous()
            return sanitize(rows, generator=gen)

        return draw

    out_dim = int(sentence_sampler(x)(1, torch.Generator(device=device).manual_seed(0)).reshape(1, -1).shape[1])
    result = audit_pair(
        sentence_sampler(x),
        sentence_sampler(x_prime),
        num_samples,
        seed,
        pilot_samples=pilot_samples,
        num_thresholds=num_thresholds,
        delta=delta,
        alpha=alpha,
        claimed_epsilon=claimed_epsilon(guarantee, x, x_prime),
        chunk_size=chunk_size,
        device=device,
    )
    return result.with_info(
        mechanism=mech.name,
        level=mech.level,
        guarantee=guarantee.to_dict(),
        input_dim=m,
        output_dim=out_dim,
        pair_distance=pair_distance(guarantee, x, x_prime),
    )


__all__ = [
    "AuditResult",
    "audit_mechanism",
    "audit_pair",
    "claimed_epsilon",
    "clopper_pearson",
    "cp_lower",
    "cp_upper",
    "default_pair",
    "document_pair",
    "pair_distance",
    "quantile_grid",
    "threshold_audit",
    "threshold_counts",
    "word_pair",
    "word_statistic",
]
