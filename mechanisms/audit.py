"""Empirical privacy audit of a mechanism on one pair of neighbouring inputs
(docs/SPEC.md §11.1 item 8; Jagielski et al. 2020, Nasr et al. 2021 "adversary
instantiation": a threshold distinguisher with Clopper-Pearson bounds).

What it computes
----------------
Draw N releases of M(x) and N of M(x') (fixed seeds, batched), reduce each
release to a real statistic T, and for every threshold t of a grid fixed in
advance consider the events O = {T > t} ("upper" tail) and O = {T <= t}
("lower" tail), with either input as the "positive" one. If M satisfies
(eps, delta)-LDP for the pair, then for every such event

    P[M(pos) in O] <= e^eps P[M(neg) in O] + delta,   i.e.
    eps >= log((TPR - delta) / FPR),

with TPR = P[M(pos) in O] and FPR = P[M(neg) in O]. Replacing TPR by a
Clopper-Pearson lower bound and FPR by an upper bound gives

    epsilon_lb = max over (t, tail, positive) of log((TPR_lo - delta) / FPR_hi),

skipping candidates whose numerator is <= 0 (and 0 when none is left: eps >= 0
always).

What it guarantees (and what it does not)
-----------------------------------------
* Statistical validity: the threshold grid and the projection direction come
  from a *pilot* sample drawn before, and independently of, the evaluation
  sample. Per threshold four one-sided Clopper-Pearson bounds are used (a lower
  and an upper bound for P[T > t] under x and under x'; the lower tail uses their
  complements, which are the same statements). Each is taken at level
  alpha / (4 * #thresholds) (Bonferroni), so all hold at once with probability
  >= 1 - alpha whatever the dependence between thresholds. Hence: **if the
  mechanism really is (eps, delta)-LDP on this pair, P[epsilon_lb > eps] <= alpha**
  over the evaluation sample, for every pilot outcome. "Independent" is meant in
  the pseudo-random sense of ``torch.Generator``; with a fixed seed the result
  is deterministic.
* It is a *sanity lower bound, not a proof of privacy*. ``epsilon_lb <= claimed``
  says only that this statistic, on this pair, with N samples, found no
  violation. Other pairs, other events or a bug visible only in rare outputs can
  still break the guarantee. ``epsilon_lb > claimed`` is strong evidence that the
  implementation does not meet its guarantee (false alarm rate <= alpha).
* Power is limited: with N samples per input no event of probability below
  ~ log(4 T / alpha) / N under the negative input can be certified, so
  epsilon_lb never exceeds about log(N / log(4 T / alpha)) (~ 11 at N = 1e6),
  and it stays well below a claimed eps when the loss only reaches eps on rare
  outputs (high dimension, additive noise spread over many coordinates).

The pair and the statistic
--------------------------
:func:`audit_mechanism` picks the pair and the statistic from the mechanism's
``level``:

* ``"sentence"``: x and x' = -x (unit vectors, or radius ``clip`` for the
  clipped additive mechanisms), x = (1, ..., 1) * r / sqrt(m). On the sphere
  x' = -x attains the diameter (angular pi, Euclidean 2), the tight pair of
  Purkayastha and planar Laplace (docs/SPEC.md §0.2). For the clipped Laplace
  the L1 distance ||x - x'||_1 = 2 C sqrt(m) equals the L1 diameter of the clip
  ball that calibrates its noise; for the Gaussian any antipodal pair attains
  the L2 diameter 2C. When the mechanism exposes a public projection ``phi``
  (PrivEmb) x is its top right singular vector, the direction it stretches most.
  T is the projection of the release onto a = mean(pilot M(x)) - mean(pilot M(x')),
  so the output may have any dimension.
* ``"label"``: labels 0 and 1 out of K (default 2); T = 1{output == 0}. A
  mechanism whose ``sanitize`` takes a ``prior`` (RR-with-prior) can be audited
  under a public prior: ``prior`` is a probability vector over the K labels,
  passed to every release as ``LabelPrior(prior repeated per row, "public")``.
  Without one it runs with its default (uniform prior: plain K-ary RR). With a
  non-uniform prior, put the pair inside the prior's top-k* set: there the
  log-ratio is eps exactly (the tight pair); a label outside the set is output
  uniformly over the set and reveals less.

The claimed epsilon for the pair is eps * d(x, x') for metric guarantees
(``"angular"``: arccos of the cosine, ``"euclidean"``: ||x - x'||_2; other
metrics fall back to the pure eps * diameter of :meth:`Guarantee.as_ldp`,
which bounds eps * d), and the guarantee's epsilon otherwise; delta is the
guarantee's delta.
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
    """Outcome of one audit (see the module docstring for what it guarantees).

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
        d(x, x') in the guarantee's metric (metric guarantees).
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
    """Worst-case-style sentence pair (x, -x) of shape [dim], float64 (see module docstring).

    PrivEmb-like mechanisms (a public ``phi`` [k, dim]; it is drawn by a warm-up
    call if needed) get x = the top right singular vector of phi; mechanisms with
    a finite public ``domain`` get the two domain points farthest apart (after
    phi when there is one).
    """
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


def _public_projection(mech: Mechanism, dim: int) -> torch.Tensor | None:
    try:
        phi = getattr(mech, "phi", None)
    except RuntimeError:  # drawn lazily at the first call: draw it now (public, seed-determined)
        mech.sanitize(
            torch.ones(1, dim, dtype=torch.float64) / math.sqrt(dim),  # type: ignore[attr-defined]
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
) -> AuditResult:
    """Audit ``mech`` on its worst-case-style pair (sentence or label level).

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
    """
    guarantee = mech.guarantee
    delta = float(guarantee.delta)
    sanitize = mech.sanitize  # type: ignore[attr-defined]
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

    if mech.level != "sentence":
        raise ValueError(f"audit_mechanism handles sentence and label mechanisms, not level {mech.level!r}")
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
    "pair_distance",
    "quantile_grid",
    "threshold_audit",
    "threshold_counts",
]
