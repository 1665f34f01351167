"""Sampling an audit: N releases of each input of a pair, a statistic and thresholds chosen on a
pilot sample, and the threshold test (:func:`audit_pair`).

Part of :mod:`mechanisms.audit` (its docstring states the audit's guarantee)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from mechanisms.audit.statistics import (
    DEFAULT_ALPHA,
    DEFAULT_CHUNK,
    DEFAULT_THRESHOLDS,
    AuditResult,
    Sampler,
    Statistic,
    threshold_audit,
    threshold_counts,
)
from mechanisms.keystream import SecureGenerator


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


def fixed_threshold_options(common: dict[str, Any]) -> dict[str, Any]:
    """The level audits' shared :func:`audit_pair` options for a statistic tested at thresholds given in
    advance (a discrete release): no pilot sample unless one is asked for, no threshold count."""
    out = {**common, "pilot_samples": common.get("pilot_samples") or 0}
    out.pop("num_thresholds", None)
    return out


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
    secure: bool = False,
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
    secure : bool
        Draw from a :class:`~mechanisms.keystream.SecureGenerator` keyed by
        ``seed`` (``secure-rng``'s ChaCha20 keystream; CPU) instead of torch's.
    """
    n = int(num_samples)
    if n < 1:
        raise ValueError(f"num_samples must be >= 1, got {num_samples!r}")
    gen = (
        SecureGenerator.from_material("audit", int(seed))
        if secure
        else torch.Generator(device=device).manual_seed(int(seed))
    )
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
