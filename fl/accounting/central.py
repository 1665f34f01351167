"""Central-DP accounting for DP-FedAvg over nodes (``mode = "central"``, ``central-unit = "node"``).

Each round the server samples exactly ``k`` of the ``N`` nodes without replacement, clips each
sampled node's update to L2 norm ``C``, averages the ``k`` clipped updates with equal weights and
adds Gaussian noise of standard deviation ``z * C / k`` (Flower's ``DifferentialPrivacy*FixedClipping``
wrappers, McMahan et al. 2018). Accountants (dp-accounting 0.6): ``rdp`` (sampling without
replacement, replace-one) and ``pld`` (full batch, no amplification); the reported epsilon is the
smaller and ``accountant`` says which.

Guarantee: the figure holds for one user and for one whole node (replace-one neighbours at the
node level; the clipped sum moves by at most 2C). Not covered: the training metrics a node
returns and the test users' evaluation confusion counts; it assumes the set of sampled nodes stays
secret and the noise is drawn as specified. The neighbouring relation and the noise multipliers
given to each accountant: docs/SPEC.md §15.5.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import dp_accounting
from dp_accounting import dp_event
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant

from fl.accounting.delta import delta_fields
from fl.accounting.scope import scope_fields
from fl.config import CentralConfig

#: The MetricRecord key every central-mode node sets to 1.0 and FedAvg weights by:
#: the noise calibration ``z * C / k`` assumes a uniform average of the k updates
#: (a num-examples weighting would let one node move the average by more than C / k).
UNIFORM_WEIGHT_KEY = "uniform-weight"


UNIT = "user (each user in one node; node-level too)"
NEIGHBOURING = "replace-one (one user's data, or one whole node's data, changed; N nodes fixed)"
PLD_DISCRETIZATION = 1e-3  # pessimistic PLD rounding: a valid upper bound, ~10x faster than 1e-4


def num_sampled_nodes(fraction: float, num_nodes: int) -> int:
    """Nodes sampled per round: ``ceil(fraction * num_nodes)``, at least 1 (as the local mode's users)."""
    if num_nodes < 1:
        raise ValueError(f"num_nodes must be >= 1, got {num_nodes}")
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must lie in (0, 1], got {fraction}")
    return min(num_nodes, max(1, math.ceil(fraction * num_nodes - 1e-9)))


def _check(noise_multiplier: float, num_sampled: int, num_nodes: int, rounds: int, delta: float) -> None:
    if not (noise_multiplier > 0 and math.isfinite(noise_multiplier)):
        raise ValueError(f"noise_multiplier must be > 0 and finite, got {noise_multiplier}")
    if not 1 <= num_sampled <= num_nodes:
        raise ValueError(f"need 1 <= num_sampled <= num_nodes, got {num_sampled} of {num_nodes}")
    if rounds < 0:
        raise ValueError(f"rounds must be >= 0, got {rounds}")
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must lie in (0, 1), got {delta}")


def round_event(noise_multiplier: float, num_sampled: int, num_nodes: int) -> dp_event.DpEvent:
    """One round for the RDP accountant: k of N nodes without replacement, Gaussian on the sum.

    The Gaussian's noise multiplier is ``z / 2``: relative to the replace-one sensitivity ``2C``.
    """
    return dp_event.SampledWithoutReplacementDpEvent(
        source_dataset_size=int(num_nodes),
        sample_size=int(num_sampled),
        event=dp_event.GaussianDpEvent(noise_multiplier / 2.0),
    )


@lru_cache(maxsize=256)
def _epsilons(
    noise_multiplier: float, num_sampled: int, num_nodes: int, rounds: int, delta: float
) -> tuple[float, float, float]:
    rdp = RdpAccountant(neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
    rdp.compose(dp_event.SelfComposedDpEvent(round_event(noise_multiplier, num_sampled, num_nodes), rounds))
    eps_rdp, order = rdp.get_epsilon_and_optimal_order(delta)
    pld = PLDAccountant(
        neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE,
        value_discretization_interval=PLD_DISCRETIZATION,
    )
    pld.compose(dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(noise_multiplier), rounds))
    return float(eps_rdp), float(order), float(pld.get_epsilon(delta))


def central_epsilon(
    noise_multiplier: float, num_sampled: int, num_nodes: int, rounds: int, delta: float
) -> dict[str, Any]:
    """(epsilon, delta) of ``rounds`` rounds of DP-FedAvg with fixed clipping.

    Parameters
    ----------
    noise_multiplier : float
        ``z``: the noise std on the sum of clipped updates over the clipping norm
        (Flower adds ``z * C / k`` to the average).
    num_sampled : int
        ``k``, nodes sampled per round (uniformly, without replacement).
    num_nodes : int
        ``N``, nodes in the federation.
    rounds : int
        Noisy aggregates released so far.
    delta : float
        Target delta.

    Returns
    -------
    dict
        ``epsilon`` (the smaller valid bound), ``delta``, ``accountant``
        (``"rdp"`` with sampling amplification or ``"pld"`` without),
        ``epsilon_rdp``, ``rdp_order``, ``epsilon_pld_no_amplification``,
        ``sampling_rate``, ``rounds``, ``neighbouring``, ``unit``.
    """
    _check(noise_multiplier, num_sampled, num_nodes, rounds, delta)
    if rounds == 0:
        eps_rdp, order, eps_pld = 0.0, float("nan"), 0.0
    else:
        eps_rdp, order, eps_pld = _epsilons(
            float(noise_multiplier), int(num_sampled), int(num_nodes), int(rounds), float(delta)
        )
    accountant = "rdp" if eps_rdp <= eps_pld else "pld"
    return {
        "epsilon": min(eps_rdp, eps_pld),
        "delta": float(delta),
        "accountant": accountant,
        "epsilon_rdp": eps_rdp,
        "rdp_order": order,
        "epsilon_pld_no_amplification": eps_pld,
        "sampling_rate": num_sampled / num_nodes,
        "rounds": int(rounds),
        "neighbouring": NEIGHBOURING,
        "unit": UNIT,
    }


def noise_for_epsilon(
    target_epsilon: float, num_sampled: int, num_nodes: int, rounds: int, delta: float, tol: float = 1e-3
) -> float:
    """Smallest noise multiplier ``z`` (to ``tol``, relative) with ``central_epsilon(...)["epsilon"] <= target``."""
    if not (target_epsilon > 0 and math.isfinite(target_epsilon)):
        raise ValueError(f"target_epsilon must be > 0 and finite, got {target_epsilon}")

    def eps(z: float) -> float:
        return central_epsilon(z, num_sampled, num_nodes, rounds, delta)["epsilon"]

    hi = 1.0
    while eps(hi) > target_epsilon:
        hi *= 2
        if hi > 1e4:
            raise ValueError(f"no noise multiplier below 1e4 reaches epsilon {target_epsilon}")
    lo = hi / 2
    while eps(lo) <= target_epsilon and lo > 1e-3:
        lo, hi = lo / 2, lo
    while hi - lo > tol * hi:  # eps(lo) > target >= eps(hi)
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if eps(mid) > target_epsilon else (lo, mid)
    return hi


def privacy_record(central: CentralConfig, num_sampled: int, num_nodes: int, rounds: int) -> dict[str, Any]:
    """The ``privacy`` block of a central-mode round record."""
    delta = delta_fields(float(central.central_delta), int(num_nodes), "node")
    acc = central_epsilon(central.central_noise_multiplier, num_sampled, num_nodes, rounds, delta["delta"])
    return {
        "mode": "central",
        **scope_fields("central"),
        "epsilon": acc["epsilon"],
        **delta,
        "accountant": acc["accountant"],
        "noise_multiplier": float(central.central_noise_multiplier),
        "clipping_norm": float(central.central_clip),
        "clipping": central.central_clipping,
        "sampled_nodes": int(num_sampled),
        "nodes": int(num_nodes),
        "rounds_accounted": int(rounds),
        "epsilon_rdp": acc["epsilon_rdp"],
        "rdp_order": acc["rdp_order"],
        "epsilon_pld_no_amplification": acc["epsilon_pld_no_amplification"],
        "neighbouring": acc["neighbouring"],
        "unit": acc["unit"],
    }
