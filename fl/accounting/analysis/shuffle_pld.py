"""Composition of shuffled rounds by the privacy-loss distribution of the shuffled pair.

One shuffled round of n pure-LDP reports is dominated by an explicit discrete pair (P, Q) (the
clones pair of Feldman-McMillan-Talwar with the variation-ratio clone probability); its PLD is
built here, pessimistically rounded, and handed to dp-accounting, whose FFT composition does the
rest (Zhu, Dong & Wang, AISTATS 2022, Theorem 10). This is tighter than composing the rounds'
(epsilon, delta) figures (``compose_shuffled``).

Guarantee: ``compose_shuffled_pld`` returns epsilon such that the composition of the given
rounds (each one shuffle by a trusted shuffler of n reports from n distinct users, pure
epsilon0-LDP randomizers, substitution of one user's input, the same user possibly reporting in
every round) is (epsilon, delta)-DP. The pair and what is rounded pessimistically:
docs/SPEC.md §15.4.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from scipy import stats

from fl.accounting.analysis.shuffle import _check_delta, _check_epsilon0, _check_n, _ShuffleProfile

__all__ = ["ShuffledRound", "compose_shuffled_pld", "shuffled_round_pld"]

DISCRETIZATION = 1e-3  # privacy-loss grid; the loss is rounded up to it
_X_TAIL = 1e-15  # Bin(c, 1/2) mass left outside each x window (charged infinite loss)
_C_TAIL = 1e-15  # Bin(n - 1, rho) mass below the Bernstein range (charged the pair at c = 0)
_MAX_BLOCKS = 4000  # c blocks: beyond this the block grid is coarsened
_CHUNK = 2_000_000  # (c, x) cells evaluated at once


@dataclass(frozen=True)
class ShuffledRound:
    """One shuffled round: ``n`` pure ``epsilon0``-LDP reports from distinct users."""

    epsilon0: float
    n: int


def _log_clone(epsilon0: float) -> float:
    """log rho, rho = 2/(e^eps0 + 1): the variation-ratio clone probability (general pure LDP)."""
    return math.log(2.0) - np.logaddexp(epsilon0, 0.0)


def _block_grid(epsilon0: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Left ends and exact masses of the blocks of C (``_ShuffleProfile``), at most ~``_MAX_BLOCKS``."""
    rel = 0.0
    while True:
        prof = _ShuffleProfile(epsilon0, n, _C_TAIL, exact=False, rel_block=rel, log_clone=_log_clone(epsilon0))
        if len(prof.starts) <= _MAX_BLOCKS:
            return prof.starts.astype(np.int64), prof.masses
        rel = 1e-4 if rel == 0.0 else rel * 4.0


def shuffled_round_pld(
    epsilon0: float, n: int, value_discretization_interval: float = DISCRETIZATION
) -> pld_lib.PrivacyLossDistribution:
    """Pessimistic PLD of the shuffled pair of one round (docs/SPEC.md §15.4).

    ``n == 1`` gives binary randomized response at epsilon0 (no other users).
    """
    eps0 = _check_epsilon0(epsilon0)
    n = _check_n(n)
    dx = float(value_discretization_interval)
    if not (math.isfinite(dx) and dx > 0.0):
        raise ValueError(f"value_discretization_interval must be finite and > 0, got {value_discretization_interval!r}")
    w = 1.0 / (1.0 + math.exp(-eps0))  # p/(p + 1)
    w_bar = 1.0 / (1.0 + math.exp(eps0))  # 1 - w without cancellation (e^eps0 may be huge)
    log_w, log_w_bar = math.log(w), -float(np.logaddexp(0.0, eps0))
    starts, masses = _block_grid(eps0, n)
    # Hoeffding: Pr[|Bin(c, 1/2) - c/2| >= t] <= 2 exp(-2 t^2 / c) = _X_TAIL  =>  t = sqrt(c ln(2/_X_TAIL) / 2)
    half_width = np.ceil(np.sqrt(starts * math.log(2.0 / _X_TAIL) / 2.0)) + 2
    x_lo = np.maximum(0, np.floor(starts / 2.0) - half_width).astype(np.int64)
    x_hi = np.minimum(starts + 1, np.ceil(starts / 2.0) + 1 + half_width).astype(np.int64)
    counts = x_hi - x_lo + 1
    kept_index: list[np.ndarray] = []
    kept_mass: list[np.ndarray] = []
    covered = 0.0
    # chunks of blocks so that the (c, x) cells of one chunk fit in memory
    group = np.cumsum(counts) // _CHUNK
    for g in np.unique(group):
        members = np.flatnonzero(group == g)
        sel = slice(int(members[0]), int(members[-1]) + 1)
        c = np.repeat(starts[sel], counts[sel]).astype(np.float64)
        offsets = np.arange(counts[sel].sum()) - np.repeat(np.cumsum(counts[sel]) - counts[sel], counts[sel])
        x = np.repeat(x_lo[sel], counts[sel]).astype(np.float64) + offsets
        mass_c = np.repeat(masses[sel], counts[sel])
        p_x = mass_c * (w * stats.binom.pmf(x - 1.0, c, 0.5) + w_bar * stats.binom.pmf(x, c, 0.5))
        with np.errstate(divide="ignore"):  # log 0 = -inf at x = 0 or x = c + 1; logaddexp handles it
            log_x, log_rest = np.log(x), np.log(c + 1.0 - x)
        # log of w x + (1 - w)(c + 1 - x) over (1 - w) x + w (c + 1 - x), in [-eps0, eps0]
        loss = np.logaddexp(log_w + log_x, log_w_bar + log_rest) - np.logaddexp(log_w_bar + log_x, log_w + log_rest)
        index = np.ceil(loss / dx).astype(np.int64)  # round the loss up to the grid
        index = np.where(index * dx < loss, index + 1, index)  # guard against ceil's float error
        keep = p_x > 0.0
        kept_index.append(index[keep])
        kept_mass.append(p_x[keep])
        covered += float(np.sum(p_x[keep]))
    index = np.concatenate(kept_index)
    mass = np.concatenate(kept_mass)
    lo = int(index.min())
    pmf = np.bincount(index - lo, weights=mass)
    rounded = {lo + i: float(v) for i, v in enumerate(pmf) if v > 0.0}
    infinity_mass = max(0.0, 1.0 - covered) + 1e-15  # window tails + fp shortfall, charged infinite loss
    return pld_lib.PrivacyLossDistribution.create_from_rounded_probability(
        rounded, infinity_mass, dx, pessimistic_estimate=True, symmetric=True
    )


def compose_shuffled_pld(
    rounds: Sequence[ShuffledRound | tuple[float, int]],
    delta: float,
    value_discretization_interval: float = DISCRETIZATION,
) -> float:
    """Epsilon at ``delta`` of the composition of shuffled rounds (PLD of each round's dominating pair).

    Each round is (epsilon0, n). Identical rounds are self-composed. Returns 0.0
    for no rounds. Never above the basic sum of the epsilon0's (pure LDP composes
    to that without shuffling): the smaller figure is returned.
    """
    delta = _check_delta(delta)
    items = [r if isinstance(r, ShuffledRound) else ShuffledRound(float(r[0]), int(r[1])) for r in rounds]
    if not items:
        return 0.0
    groups: dict[tuple[float, int], int] = {}
    for r in items:
        groups[(r.epsilon0, r.n)] = groups.get((r.epsilon0, r.n), 0) + 1
    total: pld_lib.PrivacyLossDistribution | None = None
    for (eps0, n), k in groups.items():
        one = shuffled_round_pld(eps0, n, value_discretization_interval)
        part = one.self_compose(k) if k > 1 else one
        total = part if total is None else total.compose(part)
    assert total is not None
    eps = float(total.get_epsilon_for_delta(delta))
    return min(max(0.0, eps), math.fsum(r.epsilon0 for r in items))
