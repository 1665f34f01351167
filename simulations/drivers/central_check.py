"""``sanitas compare``'s check of its user-level central points on public data, before anything runs.

Each central point is emulated on the central runs' own public documents (:mod:`fl.training.public_central`;
never the private users or the test split). A point whose emulation does not beat the public hold-out's
majority-class rate is refused, with one message that names the point, what the emulation measured, and
what to change: the smallest ``server-learning-rate`` (from :data:`LR_FACTORS` times the configured one)
at which every point learns on public data when there is one, else the other keys. Without public data in
the central runs (``public-fraction = 0`` and no ``public-dataset``) nothing can be checked: compare says
so and its final table still flags any point that learned nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from fl import config as config_mod

#: Fewest public documents an emulation is run on (a fifth of them are its hold-out).
MIN_PUBLIC = 50
#: The noise multiplier of the noise-free emulation (the mean needs one > 0; this one adds nothing visible).
NO_NOISE = 1e-9
#: Server learning rates tried on public data, as multiples of the configured one.
LR_FACTORS = (1.0, 3.0, 10.0, 30.0, 100.0)


def _public_embeddings(cfg: config_mod.RunConfig) -> tuple[Any, Any, int] | None:
    """The central runs' public embeddings (their encoder), labels and number of classes, through the run's one
    door to its data (:class:`simulations.drivers.inputs.RunInputs`); None without public documents."""
    from simulations.drivers.inputs import RunInputs

    inputs = RunInputs(cfg)
    if getattr(inputs.dataset, "public", None) is None:
        return None
    x, y = inputs.public
    return x, y, inputs.num_classes


def check_central_points(central_cfg: Mapping[str, Any], noise: Mapping[float, float], seed: int) -> dict[str, Any]:
    """Emulate each user-level central point (target epsilon -> noise multiplier in ``noise``) on the
    public documents of ``central_cfg`` at ``seed``; returns what was checked (``emulations``) or why
    nothing was (``unchecked``). Raises :class:`fl.config.ConfigError` naming the points that learn
    nothing there and what to change."""
    from fl.maps.public_start import PublicSpec
    from fl.reporting.progress import bar
    from fl.training.central_start import central_start
    from fl.training.public_central import Emulation, emulate_user_level

    resolved = config_mod.as_run_config(central_cfg)
    cfg = replace(resolved, users=replace(resolved.users, seed=seed))  # the central runs at this seed
    if cfg.central.central_unit != "user" or cfg.central.central_train != "head":
        return {"unchecked": "only the head of user-level central points is emulated on public data"}
    public = _public_embeddings(cfg)
    if public is None:
        return {
            "unchecked": "the central runs have no public data (public-fraction = 0 and no public-dataset): "
            "their settings cannot be checked before they run"
        }
    x, y, num_classes = public
    if int(y.shape[0]) < MIN_PUBLIC:
        return {"unchecked": f"the central runs' public part has {int(y.shape[0])} documents (< {MIN_PUBLIC})"}
    configured = float(cfg.central.server_learning_rate)
    # the run's own start, built afresh for every emulation
    start = functools.partial(central_start, PublicSpec.from_config(cfg), cfg.central)

    def emulate(noise_multiplier: float, server_learning_rate: float) -> Emulation:
        return emulate_user_level(
            start,
            x,
            y,
            num_classes,
            noise_multiplier,
            server_learning_rate,
            central=cfg.central,
            release=cfg.release,
            seed=cfg.users.seed,
            rounds=cfg.server.num_server_rounds,
        )

    found: dict[float, list[Any]] = {}
    with bar(total=len(LR_FACTORS) * len(noise), desc="checking central points on public data", unit="runs") as shown:
        for factor in LR_FACTORS:
            lr = configured * factor
            found[lr] = []
            for z in noise.values():
                found[lr].append(emulate(z, lr))
                shown.update(1)
            if factor == 1.0 and all(e.learned for e in found[lr]):
                break
    first = found[configured]
    report = {"server_learning_rate": configured, "emulations": [e.to_dict() for e in first]}
    flat = [(t, e) for t, e in zip(noise, first, strict=True) if not e.learned]
    if not flat:
        return report
    raise config_mod.ConfigError(_why_flat(cfg, flat, found, emulate(NO_NOISE, configured)))


def _why_flat(cfg: Any, flat: list[tuple[float, Any]], found: Mapping[float, list[Any]], clean: Any) -> str:
    """The refusal of central points that learn nothing on public data: which, why (``clean``: the same settings
    without noise) and what to change (a server learning rate of ``found`` at which every point learns)."""
    configured = float(cfg.central.server_learning_rate)
    works = next((lr for lr, runs in found.items() if lr != configured and all(e.learned for e in runs)), None)
    sample = flat[0][1]
    # The same settings without noise: is it the noise (too small an epsilon for so few users) or the
    # settings (learning rates, rounds) that keep the model where it started?
    cause = (
        f"without noise the same settings reach {clean.accuracy[-1]:.3f}, so the noise is what these points cannot "
        "carry (fewer users, or a smaller epsilon, than this model needs)"
        if clean.learned
        else f"even without noise the same settings reach only {clean.accuracy[-1]:.3f}: the learning rates and "
        "rounds do not move this model"
    )
    points = ", ".join(
        f"epsilon {t:g} (noise multiplier {e.noise_multiplier:.3g}: hold-out accuracy {e.accuracy[-1]:.3f} after "
        f"round {e.rounds})"
        for t, e in flat
    )
    change = (
        f"on public data every point learns at server-learning-rate = {works:g}: add "
        f"--central-set server-learning-rate={works:g}"
        if works is not None
        else "no server-learning-rate up to 100x the configured one helps on public data: raise num-server-rounds, "
        "client-learning-rate or central-cohort-size, or drop these --central-epsilons"
    )
    return (
        f"central points learn nothing on public data with these settings: {points}, against the majority-class "
        f"rate {sample.majority_class_rate:.3f} of {sample.hold_out} public hold-out documents (user-level "
        f"DP-FedAvg emulated with {sample.users} public users, about {sample.cohort:.0f} per round, "
        f"{sample.rounds} rounds, server-learning-rate {configured:g}, client-learning-rate "
        f"{float(cfg.central.client_learning_rate):g}); {cause}; {change} (or --central-check off to run them "
        "anyway)"
    )
