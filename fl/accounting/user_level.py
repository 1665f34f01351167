"""User-level central-DP accounting for DP-FedAvg with Poisson-sampled users.

The mechanism (McMahan et al. 2018, "Learning Differentially Private Recurrent
Language Models", Alg. 1 with the fixed-denominator estimator): each round,
every one of the N training users is included independently with probability
``q``; each included user computes an update from the global model on their
own documents only and clips it to L2 norm ``C``; the server adds Gaussian
noise N(0, z^2 C^2 I) to the sum of the clipped updates and divides by the
fixed denominator ``q N`` (post-processing).

Privacy unit and neighbouring relation: one **user**, added or removed (the
relation under which Poisson subsampling amplifies). The sum moves by at most
``C``, so one round is ``PoissonSampledDpEvent(q, GaussianDpEvent(z))``; the
rounds compose. Two accountants from dp-accounting (maintained by Google; the
same library Flower's ``RdpAccountant`` wraps) bound the same mechanism:

* ``rdp``: ``RdpAccountant(ADD_OR_REMOVE_ONE)`` (Mironov et al. 2019's
  sampled-Gaussian RDP), the accountant Flower ships;
* ``pld``: ``PLDAccountant(ADD_OR_REMOVE_ONE)``, the numerically tight privacy
  loss distribution (pessimistic discretisation).

The reported epsilon is the smaller (both are valid upper bounds), at
``delta``; ``accountant`` names the one it came from. The noise multiplier for
a target epsilon is found by dp-accounting's ``calibrate_dp_mechanism``
against the PLD accountant, so the reported figure never exceeds the target.

Assumptions the guarantee needs (and the simulation only approximates): the
set of sampled users is secret, the noise is drawn as specified (the
simulation uses torch's floating-point Gaussian, not a hardened sampler), and
the sampling coin of each user is independent of the data.
"""

from __future__ import annotations

import logging
import math
from concurrent.futures import Future, ThreadPoolExecutor
from functools import lru_cache
from typing import Any

import dp_accounting
import numpy as np
from dp_accounting import dp_event
from dp_accounting.pld import privacy_loss_distribution
from dp_accounting.rdp import RdpAccountant, rdp_privacy_accountant

from fl.accounting.delta import delta_fields
from fl.accounting.scope import scope_fields
from fl.config import CentralConfig

RELATION = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
# PLDAccountant's default grid; _round_pld must use the accountant's own settings.
PLD_DISCRETIZATION = 1e-4


class _NonConvergedOrders(logging.Filter):
    """Demotes dp_accounting's warning that an RDP order's series did not converge (at small noise,
    for fractional orders near 1) to INFO. The accountant leaves that order out, and the epsilon over
    the orders that remain is still a valid bound. So the warning tells the user nothing (a sweep
    printed it dozens of times): it stays in a run's log (``run.log``, whose handler a run attaches to
    the ``absl`` logger) and off the console; outside a run (``sanitas compare`` finding its noise) it
    is dropped, since Python's root handler would print it at any level."""

    def filter(self, record: logging.LogRecord) -> bool:
        if "failed to converge" in record.getMessage():
            record.levelno, record.levelname = logging.INFO, "INFO"
            return bool(logging.getLogger("absl").handlers)
        return True


logging.getLogger("absl").addFilter(_NonConvergedOrders())


def _check(noise_multiplier: float, sampling_rate: float, rounds: int, delta: float) -> None:
    if not (noise_multiplier > 0 and math.isfinite(noise_multiplier)):
        raise ValueError(f"the noise multiplier must be > 0 and finite, got {noise_multiplier!r}")
    if not 0.0 < sampling_rate <= 1.0:
        raise ValueError(f"the sampling rate q must lie in (0, 1], got {sampling_rate!r}")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 0:
        raise ValueError(f"rounds must be an integer >= 0, got {rounds!r}")
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")


def round_event(noise_multiplier: float, sampling_rate: float) -> dp_event.DpEvent:
    """One round: Poisson-sampled users, Gaussian noise of std ``z C`` on the sum of updates clipped to ``C``."""
    return dp_event.PoissonSampledDpEvent(sampling_rate, dp_event.GaussianDpEvent(noise_multiplier))


def run_event(noise_multiplier: float, sampling_rate: float, rounds: int) -> dp_event.DpEvent:
    """``rounds`` independent rounds (adaptive composition of the same event)."""
    return dp_event.SelfComposedDpEvent(round_event(noise_multiplier, sampling_rate), rounds)


@lru_cache(maxsize=64)
def _round_pld(noise_multiplier: float, sampling_rate: float) -> privacy_loss_distribution.PrivacyLossDistribution:
    """One round's privacy-loss distribution, built once per (z, q).

    It is what ``PLDAccountant`` builds for ``round_event`` (same constructor and grid; a test checks
    the epsilons are equal). Building it is ~90% of an account's cost (0.5 s) and a run asks for the
    same (z, q) every round, while self-composing it over t rounds takes milliseconds.
    """
    return privacy_loss_distribution.from_gaussian_mechanism(
        standard_deviation=noise_multiplier,
        value_discretization_interval=PLD_DISCRETIZATION,
        sampling_prob=sampling_rate,
        neighboring_relation=RELATION,
    )


@lru_cache(maxsize=64)
def _round_rdp(noise_multiplier: float, sampling_rate: float) -> tuple[np.ndarray, np.ndarray]:
    """One round's RDP curve (orders, values), as ``RdpAccountant`` computes it for ``round_event``."""
    accountant = RdpAccountant(neighboring_relation=RELATION)
    accountant.compose(round_event(noise_multiplier, sampling_rate))
    # dp-accounting keeps the curve in private fields and has no public getter for it.
    return np.asarray(accountant._orders, dtype=np.float64), np.array(accountant._rdp, dtype=np.float64)


@lru_cache(maxsize=4096)
def user_level_epsilon(noise_multiplier: float, sampling_rate: float, rounds: int, delta: float) -> dict[str, Any]:
    """Per-user (epsilon, delta) after ``rounds`` rounds, by RDP and by PLD; ``epsilon`` is the smaller.

    Zero rounds release nothing: epsilon 0.
    """
    _check(noise_multiplier, sampling_rate, rounds, delta)
    base = {
        "delta": delta,
        "noise_multiplier": noise_multiplier,
        "sampling_rate": sampling_rate,
        "rounds_accounted": rounds,
        "unit": "user",
        "neighbouring": "add or remove one user",
    }
    if rounds == 0:
        return {**base, "epsilon": 0.0, "accountant": "none", "epsilon_rdp": 0.0, "rdp_order": None, "epsilon_pld": 0.0}
    orders, one_round = _round_rdp(noise_multiplier, sampling_rate)
    # What RdpAccountant.compose(run_event(...)) computes (rounds x one round's RDP, the same floats),
    # without recomputing one round's RDP at every order each round.
    eps_rdp, order = rdp_privacy_accountant.compute_epsilon(orders, rounds * one_round, delta)
    eps_pld = float(_round_pld(noise_multiplier, sampling_rate).self_compose(rounds).get_epsilon_for_delta(delta))
    best, name = (eps_pld, "pld") if eps_pld <= eps_rdp else (float(eps_rdp), "rdp")
    return {
        **base,
        "epsilon": best,
        "accountant": name,
        "epsilon_rdp": float(eps_rdp),
        "rdp_order": float(order),
        "epsilon_pld": eps_pld,
    }


# One background thread computes the next round's account while the nodes work (the local backend runs
# them on one core; the PLD composition is numpy and FFT work that releases the GIL): 7.7 s of a 60-round
# run's server time before. The figures are user_level_epsilon's own, whichever thread computed them.
_ahead: dict[tuple[float, float, int, float], Future[dict[str, Any]]] = {}
_executor: ThreadPoolExecutor | None = None


def account_ahead(central: CentralConfig, sampling_rate_: float, num_users: int, rounds: int) -> None:
    """Start computing :func:`user_privacy_record`'s account after ``rounds`` rounds on a background thread
    (the next call for it waits for that result instead of computing it again)."""
    global _executor
    key = _account_key(central, sampling_rate_, num_users, rounds)
    if key in _ahead or rounds < 1:
        return
    if _executor is None:
        _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sanitas-accounting")
    while len(_ahead) >= 16:  # results not asked for (a run that ended early)
        del _ahead[next(iter(_ahead))]
    _ahead[key] = _executor.submit(user_level_epsilon, *key)


def _account_key(
    central: CentralConfig, sampling_rate_: float, num_users: int, rounds: int
) -> tuple[float, float, int, float]:
    delta = delta_fields(float(central.central_delta), int(num_users), "user")["delta"]
    return float(central.central_noise_multiplier), float(sampling_rate_), int(rounds), delta


@lru_cache(maxsize=256)
def noise_for_user_epsilon(target_epsilon: float, sampling_rate: float, rounds: int, delta: float) -> float:
    """A noise multiplier whose reported epsilon after ``rounds`` rounds is <= ``target_epsilon``, within
    0.5% of the smallest such.

    dp-accounting's ``calibrate_dp_mechanism`` finds the RDP noise (cheap, robust at any noise level);
    the tighter PLD account then needs less noise, found by bisection between half of it and it (PLD
    grids at very small noise are large, so the search never goes below half the RDP noise).
    """
    if not (target_epsilon > 0 and math.isfinite(target_epsilon)):
        raise ValueError(f"the target epsilon must be > 0 and finite, got {target_epsilon!r}")
    _check(1.0, sampling_rate, rounds, delta)
    if rounds == 0:
        raise ValueError("a run of 0 rounds needs no noise")
    z_rdp = float(
        dp_accounting.calibrate_dp_mechanism(
            lambda: RdpAccountant(neighboring_relation=RELATION),
            lambda z: run_event(z, sampling_rate, rounds),
            target_epsilon,
            delta,
            bracket_interval=dp_accounting.LowerEndpointAndGuess(0.05, 1.0),
        )
    )

    def fits(z: float) -> bool:
        return user_level_epsilon(z, sampling_rate, rounds, delta)["epsilon"] <= target_epsilon

    hi = z_rdp
    while not fits(hi):  # Brent's tolerance may land a hair below the RDP root
        hi *= 1.001
    lo = hi / 2
    if fits(lo):
        return lo
    while hi / lo > 1.005:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return hi


def sampling_rate(cohort_size: float, num_users: int) -> float:
    """Poisson sampling rate ``q = min(1, cohort_size / N)``: the expected number of users per round
    is ``cohort_size`` (all users when there are fewer)."""
    if num_users < 1:
        raise ValueError(f"the number of training users must be >= 1, got {num_users}")
    if not (cohort_size > 0 and math.isfinite(cohort_size)):
        raise ValueError(f"central-cohort-size must be > 0 and finite, got {cohort_size!r}")
    return min(1.0, float(cohort_size) / num_users)


def user_privacy_record(central: CentralConfig, sampling_rate_: float, num_users: int, rounds: int) -> dict[str, Any]:
    """The ``privacy`` block of a user-level central round record (the figure is per user)."""
    delta = delta_fields(float(central.central_delta), int(num_users), "user")
    key = _account_key(central, sampling_rate_, num_users, rounds)
    ahead = _ahead.pop(key, None)
    acc = ahead.result() if ahead is not None else user_level_epsilon(*key)
    return {
        "mode": "central",
        "central_unit": "user",
        **scope_fields("central"),
        **acc,
        **delta,
        "clipping_norm": float(central.central_clip),
        "clipping": "client (each user's update, on its node)",
        "expected_users_per_round": float(sampling_rate_) * num_users,
        "users": int(num_users),
    }
