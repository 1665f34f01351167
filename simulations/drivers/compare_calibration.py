"""The central side's noise: for each target per-user epsilon of ``sanitas compare``, the noise multiplier the
accountant finds for the user-level central runs (never typed by hand), with the sampling rate, rounds and delta
it was found for."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Calibration:
    """The central runs' accounting inputs and the noise multiplier found for each target epsilon."""

    populations: dict[int, int]  # training users per seed
    num_users: int
    q: float
    rounds: int
    delta: float
    noise: dict[float, float]


def central_noise_table(
    targets: Sequence[float], sampling_rate: float, rounds: int, delta: float
) -> dict[float, float]:
    """Target per-user epsilon -> the noise multiplier the accountant finds for it (user level)."""
    import logging

    from fl.accounting.user_level import noise_for_user_epsilon

    absl = logging.getLogger("absl")  # dp-accounting's RDP search logs every order it skips, at INFO
    level = absl.level
    absl.setLevel(logging.WARNING)
    try:
        return {float(t): noise_for_user_epsilon(float(t), sampling_rate, int(rounds), float(delta)) for t in targets}
    finally:
        absl.setLevel(level)


def calibrate(
    populations: Mapping[int, int], cohort_size: float, rounds: int, delta: float, targets: Sequence[float]
) -> Calibration:
    """The noise per target per-user epsilon, at the largest ``q`` over the seeds and the smallest delta.

    ``populations``: each seed's training users. The population (hence q) depends on the seed (the public split
    is drawn per seed): the noise is calibrated at the largest q over the seeds, so every seed's run meets each
    target, and at the delta of the largest population (the smallest delta, so delta < 1/N for every seed);
    ``delta`` is the config's ``central-delta`` (0: 1 / (10 N), :func:`fl.accounting.delta.population_delta`)."""
    from fl.accounting.delta import population_delta
    from fl.accounting.user_level import sampling_rate

    num_users = min(populations.values())
    q = sampling_rate(float(cohort_size), num_users)
    delta = population_delta(float(delta), max(populations.values()))
    print(
        f"sanitas: calibrating the noise for per-user epsilon {list(targets)} (q = {q:.4g}, the largest over the "
        f"seeds' {sorted(set(populations.values()))} users; {rounds} rounds; delta {delta:.3g})",
        flush=True,
    )
    noise = central_noise_table(targets, q, int(rounds), delta)
    return Calibration(dict(populations), num_users, q, int(rounds), delta, noise)
