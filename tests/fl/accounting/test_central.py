"""Central-DP accounting (fl.accounting.central) against dp-accounting and closed forms.

Each test says what it would catch: a wrong event, a wrong sensitivity
convention for replace-one (the factor 2), a bound that does not amplify, or a
reported epsilon that is not the smaller valid bound.
"""

from __future__ import annotations

import math

import dp_accounting
import pytest
from dp_accounting import dp_event
from dp_accounting.gaussian_mechanism import get_epsilon_gaussian
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant

from fl.accounting.central import central_epsilon, noise_for_epsilon, num_sampled_nodes, privacy_record
from fl.config import resolve
from fl.config.rules import check_central_config

REPLACE_ONE = dp_accounting.NeighboringRelation.REPLACE_ONE


def _rdp_wor_reference(z: float, k: int, n: int, rounds: int, delta: float) -> float:
    """dp-accounting's own computation, written out from its public API.

    The clipped sum of k updates of norm <= C moves by <= 2C when one node's update is
    replaced, and dp-accounting's without-replacement RDP takes sigma relative to that
    sensitivity: sigma = (z C) / (2 C) = z / 2.
    """
    acc = RdpAccountant(neighboring_relation=REPLACE_ONE)
    one_round = dp_event.SampledWithoutReplacementDpEvent(n, k, dp_event.GaussianDpEvent(z / 2))
    acc.compose(dp_event.ComposedDpEvent([one_round] * rounds))  # composed event by event, not SelfComposed
    return acc.get_epsilon(delta)


def test_rdp_matches_dp_accounting_for_a_known_setting() -> None:
    """Catches a wrong event (Poisson instead of WOR, wrong q, z instead of z/2) or a wrong composition."""
    z, k, n, rounds, delta = 1.0, 5, 10, 2, 1e-5
    got = central_epsilon(z, k, n, rounds, delta)
    assert got["epsilon_rdp"] == pytest.approx(_rdp_wor_reference(z, k, n, rounds, delta), rel=1e-9)
    assert got["delta"] == delta and got["rounds"] == rounds and got["sampling_rate"] == 0.5
    assert got["epsilon"] == min(got["epsilon_rdp"], got["epsilon_pld_no_amplification"])
    assert got["accountant"] == ("rdp" if got["epsilon_rdp"] <= got["epsilon_pld_no_amplification"] else "pld")
    assert "node-level" in got["unit"] and "replace-one" in got["neighbouring"]


def test_pld_bound_is_the_exact_full_batch_gaussian_composition() -> None:
    """The no-amplification bound equals the closed form: T replace-one Gaussians with noise z C and
    shift 2C compose to one Gaussian with sigma / sensitivity = z / (2 sqrt(T)) (Balle & Wang 2018).
    Catches PLD run with add/remove (sensitivity C instead of 2C) or an optimistic rounding."""
    for z, rounds in ((0.8, 1), (1.0, 3), (2.0, 5)):
        exact = get_epsilon_gaussian(z / (2 * math.sqrt(rounds)), 1e-5)
        got = central_epsilon(z, 3, 7, rounds, 1e-5)["epsilon_pld_no_amplification"]
        assert exact <= got <= exact + 2e-3, (z, rounds, exact, got)


def test_sampling_without_replacement_amplifies_below_the_full_batch_composition() -> None:
    """Sanity: with k < N the WOR epsilon is below the full-batch Gaussian composition (RDP with q = 1,
    same accountant, and the exact closed form), and far below it for small q. Catches a bound that
    ignores the sampling or samples the wrong population."""
    z, rounds, delta = 1.0, 10, 1e-5
    full = RdpAccountant(neighboring_relation=REPLACE_ONE)
    full.compose(dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(z / 2), rounds))
    exact_full = get_epsilon_gaussian(z / (2 * math.sqrt(rounds)), delta)
    small_q = central_epsilon(z, 10, 1000, rounds, delta)
    assert small_q["accountant"] == "rdp"
    assert small_q["epsilon"] < 0.2 * exact_full < full.get_epsilon(delta)
    half = central_epsilon(z, 50, 100, rounds, delta)
    assert half["epsilon_rdp"] < full.get_epsilon(delta)
    assert half["epsilon"] <= exact_full + 2e-3


def test_rdp_at_full_participation_is_not_below_the_exact_gaussian() -> None:
    """k = N is the plain Gaussian: RDP is an upper bound on the exact epsilon. With sigma = z (the
    add/remove convention, sensitivity C instead of 2C) it would fall below the exact value."""
    z, rounds, delta = 1.5, 4, 1e-5
    got = central_epsilon(z, 8, 8, rounds, delta)
    exact = get_epsilon_gaussian(z / (2 * math.sqrt(rounds)), delta)
    assert got["epsilon_rdp"] >= exact
    assert got["accountant"] == "pld" and got["epsilon"] == pytest.approx(exact, abs=2e-3)


def test_epsilon_grows_with_rounds_and_sampling_and_shrinks_with_noise() -> None:
    eps = [central_epsilon(1.0, 5, 10, t, 1e-5)["epsilon"] for t in range(4)]
    assert eps[0] == 0.0 and eps[1] < eps[2] < eps[3]
    assert central_epsilon(1.0, 2, 10, 3, 1e-5)["epsilon"] < central_epsilon(1.0, 5, 10, 3, 1e-5)["epsilon"]
    assert central_epsilon(2.0, 5, 10, 3, 1e-5)["epsilon"] < central_epsilon(1.0, 5, 10, 3, 1e-5)["epsilon"]


def test_noise_for_epsilon_inverts_central_epsilon() -> None:
    z = noise_for_epsilon(5.0, 10, 100, 3, 1e-5, tol=2e-2)
    assert central_epsilon(z, 10, 100, 3, 1e-5)["epsilon"] <= 5.0
    assert central_epsilon(z * 0.98, 10, 100, 3, 1e-5)["epsilon"] > 5.0


def test_num_sampled_nodes_and_bad_input() -> None:
    assert num_sampled_nodes(0.5, 68) == 34 and num_sampled_nodes(0.5, 10) == 5
    assert num_sampled_nodes(0.01, 10) == 1 and num_sampled_nodes(1.0, 3) == 3 and num_sampled_nodes(0.3, 10) == 3
    for args in ((0.0, 5, 10, 1, 1e-5), (1.0, 11, 10, 1, 1e-5), (1.0, 5, 10, 1, 0.0), (math.inf, 5, 10, 1, 1e-5)):
        with pytest.raises(ValueError):
            central_epsilon(*args)
    for map_in in ("public", "supervised"):  # maps the server builds from the public split
        with pytest.raises(ValueError, match="needs central-unit = 'user'"):
            check_central_config({"map-in": map_in, "central-unit": "node"})
        check_central_config({"map-in": map_in, "central-unit": "user"})  # user level accepts every public map
    for unit in ("user", "node"):
        with pytest.raises(ValueError, match="map-in"):
            check_central_config({"map-in": "leaky", "central-unit": unit})
    # Which strategies central mode runs (the mean family) is strategies.loading's check, not this one's.
    check_central_config({"map-in": "identity", "strategy": "FedAdam"})


def test_privacy_record_schema() -> None:
    cfg = resolve(
        {"central-noise-multiplier": 1.0, "central-clip": 0.5, "central-clipping": "server", "central-delta": 1e-5}
    )
    rec = privacy_record(cfg.central, 5, 10, 2)
    assert rec["mode"] == "central" and rec["sampled_nodes"] == 5 and rec["nodes"] == 10
    assert rec["noise_multiplier"] == 1.0 and rec["clipping_norm"] == 0.5 and rec["delta"] == 1e-5
    assert rec["accountant"] in ("rdp", "pld") and rec["unit"] == "user (each user in one node; node-level too)"
    assert rec["epsilon"] == pytest.approx(central_epsilon(1.0, 5, 10, 2, 1e-5)["epsilon"])


def test_pld_accountant_refuses_sampling_without_replacement() -> None:
    """Documents why the PLD bound is the no-amplification one: dp-accounting 0.6's PLD accountant
    does not support SampledWithoutReplacementDpEvent (if a release adds it, use it)."""
    event = dp_event.SampledWithoutReplacementDpEvent(10, 5, dp_event.GaussianDpEvent(1.0))
    assert not PLDAccountant(neighboring_relation=REPLACE_ONE).supports(event)
