"""User-level central-DP accounting (Poisson-sampled users, Gaussian noise on the clipped sum):
cross-checked against Flower's own RDP accountant and against the closed form of the Gaussian
mechanism, with power checks."""

from __future__ import annotations

import logging
import math

import pytest
from dp_accounting.pld import PLDAccountant
from scipy import optimize, stats

from fl.accounting import user_level as ul
from fl.accounting.user_level import noise_for_user_epsilon, user_level_epsilon

N, SAMPLED, DELTA = 67_349, 1_000, 1e-5
Q = SAMPLED / N


def _flower_rdp(z: float, rounds: int) -> float:
    from flwr.serverapp import RdpAccountant
    from flwr.supercore.privacy_accounting import (
        GaussianPrivacyEvent,
        NeighboringRelation,
        PrivacyConfig,
        SamplingMethod,
    )

    acc = RdpAccountant(
        PrivacyConfig(
            target_delta=DELTA,
            population_size=N,
            neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE,
            sampling_method=SamplingMethod.POISSON,
        )
    )
    acc.compose(GaussianPrivacyEvent(noise_multiplier=z, sample_size=SAMPLED, population_size=N), rounds)
    return acc.get_epsilon(DELTA)


@pytest.mark.parametrize(("z", "rounds"), [(1.0, 100), (0.8, 20), (2.0, 5)])
def test_rdp_equals_flowers_poisson_accountant(z: float, rounds: int) -> None:
    """Our RDP figure is Flower's RdpAccountant with Poisson sampling (add/remove one user), and the
    reported epsilon is the tighter of RDP and PLD. Issue 13's reference point: z = 1, ~1,000 of 67k
    users, 100 rounds gives RDP epsilon 1.51."""
    out = user_level_epsilon(z, Q, rounds, DELTA)
    assert out["epsilon_rdp"] == pytest.approx(_flower_rdp(z, rounds), rel=1e-9)
    assert out["epsilon"] == min(out["epsilon_rdp"], out["epsilon_pld"])
    assert out["epsilon_pld"] <= out["epsilon_rdp"]
    if (z, rounds) == (1.0, 100):
        assert out["epsilon_rdp"] == pytest.approx(1.5075, abs=1e-4)


def test_rdp_check_has_power() -> None:
    """The same comparison fails for the wrong sampling rate or the wrong round count."""
    out = user_level_epsilon(1.0, Q, 20, DELTA)
    assert out["epsilon_rdp"] != pytest.approx(_flower_rdp(1.0, 21), rel=1e-3)
    assert user_level_epsilon(1.0, 2 * Q, 20, DELTA)["epsilon_rdp"] > 1.3 * out["epsilon_rdp"]


def _gaussian_epsilon(z: float, delta: float) -> float:
    """Exact epsilon of one Gaussian mechanism, sensitivity 1, noise z (Balle & Wang 2018, Thm 8):
    delta(eps) = Phi(1/(2z) - eps z) - e^eps Phi(-1/(2z) - eps z)."""

    def gap(eps: float) -> float:
        return stats.norm.cdf(1 / (2 * z) - eps * z) - math.exp(eps) * stats.norm.cdf(-1 / (2 * z) - eps * z) - delta

    return optimize.brentq(gap, 0.0, 100.0)


@pytest.mark.parametrize("z", [0.8, 1.5, 4.0])
def test_pld_of_one_unsampled_round_is_the_gaussian_closed_form(z: float) -> None:
    """q = 1, one round: the PLD figure is the Gaussian mechanism's exact epsilon (an oracle that shares
    no code with dp-accounting), to its pessimistic discretisation; RDP is looser."""
    out = user_level_epsilon(z, 1.0, 1, DELTA)
    exact = _gaussian_epsilon(z, DELTA)
    assert exact <= out["epsilon_pld"] <= exact * 1.01 + 1e-3
    assert out["epsilon_rdp"] > exact
    assert abs(user_level_epsilon(1.1 * z, 1.0, 1, DELTA)["epsilon_pld"] - exact) > 0.02 * exact  # power


@pytest.mark.parametrize(("z", "q", "rounds"), [(1.0, 0.015, 1), (1.0, 0.015, 50), (0.7, 0.1, 7), (2.0, 1.0, 3)])
def test_cached_round_pld_equals_the_pld_accountant(z: float, q: float, rounds: int) -> None:
    """The run's account self-composes one cached round PLD; it must be PLDAccountant's figure."""

    def by_accountant(t: int) -> float:
        pld = PLDAccountant(neighboring_relation=ul.RELATION, value_discretization_interval=ul.PLD_DISCRETIZATION)
        pld.compose(ul.run_event(z, q, t))
        return float(pld.get_epsilon(DELTA))

    ours = user_level_epsilon(z, q, rounds, DELTA)["epsilon_pld"]
    assert ours == pytest.approx(by_accountant(rounds), rel=1e-9)
    assert ours != pytest.approx(by_accountant(rounds + 1), rel=1e-3)  # power


def test_epsilon_grows_with_rounds_and_shrinks_with_noise() -> None:
    eps = [user_level_epsilon(1.0, Q, r, DELTA)["epsilon"] for r in (0, 1, 10, 50)]
    assert eps[0] == 0.0 and eps == sorted(eps) and len(set(eps)) == 4
    assert user_level_epsilon(2.0, Q, 10, DELTA)["epsilon"] < eps[2]


def test_noise_is_calibrated_to_the_target() -> None:
    """The calibrated noise meets the target and is within 0.5% of the smallest noise that does."""
    target = 1.0
    z = noise_for_user_epsilon(target, Q, 10, DELTA)
    assert user_level_epsilon(z, Q, 10, DELTA)["epsilon"] <= target
    assert user_level_epsilon(z / 1.006, Q, 10, DELTA)["epsilon"] > target


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0.0, Q, 1, DELTA), "noise multiplier"),
        ((1.0, 0.0, 1, DELTA), "sampling rate"),
        ((1.0, Q, -1, DELTA), "rounds"),
        ((1.0, Q, 1, 0.0), "delta"),
    ],
)
def test_bad_parameters_are_refused(args: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        user_level_epsilon(*args)
    with pytest.raises(ValueError, match="target epsilon"):
        noise_for_user_epsilon(-1.0, Q, 10, DELTA)


def test_small_noise_accounting_is_quiet(caplog: pytest.LogCaptureFixture) -> None:
    """At sigma ~ 0.5 dp_accounting's RDP series does not converge for orders 1.1-1.3 and it warns
    once per order; the bound without those orders is still valid, and the warning becomes INFO, kept
    where a run logs ``absl`` (its run.log) and dropped elsewhere (Python's root handler would print it)."""
    from absl import logging as absl_logging

    absl = logging.getLogger("absl")
    with caplog.at_level(logging.INFO):
        absl_logging.warning("_compute_log_a_frac failed to converge after 1000 iterations (a probe)")
        assert caplog.records == []  # no run's log on the absl logger: dropped
        absl.addHandler(caplog.handler)  # as a run's console attaches run.log
        try:
            absl_logging.warning("_compute_log_a_frac failed to converge after 1000 iterations (a probe)")
            assert [r.levelno for r in caplog.records if r.name == "absl"][-1:] == [logging.INFO]  # demoted ...
            absl_logging.warning("another dp_accounting warning")
            assert [r.levelno for r in caplog.records][-1] == logging.WARNING  # ... and nothing else
            caplog.clear()
            eps = user_level_epsilon(0.4963, 0.019842, 50, 1e-5)["epsilon"]
        finally:
            absl.removeHandler(caplog.handler)
    assert 7.9 < eps < 8.1 and all(r.levelno <= logging.INFO for r in caplog.records)
