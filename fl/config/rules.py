"""Config rules that span sections, in one place: what central mode can run (the map of its inputs, no
custom local strategy). ``fl.config.run_config.validate`` applies them to every run config; the modes'
checks (``strategies.modes``) and the central node handlers apply :func:`check_central_config` too."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The map-in modes central mode supports (M1 from public values only).
CENTRAL_MAPS = ("random", "identity")
#: Maps the server builds from the public split only and sends with every user-level request.
USER_LEVEL_MAPS = ("public", "supervised")


def check_central_config(cfg: Mapping[str, Any]) -> None:
    """Refuse configurations central mode cannot run (ValueError naming the key).

    Reads ``map-in``, ``central-unit`` and ``strategy``; missing keys count as their defaults.
    """
    map_in = cfg.get("map-in", "random")
    unit = cfg.get("central-unit", "user")
    allowed = (*CENTRAL_MAPS, *USER_LEVEL_MAPS) if unit == "user" else CENTRAL_MAPS
    if map_in not in allowed:
        raise ValueError(
            f"mode = 'central' with central-unit = {unit!r} trains on raw embeddings through a public M1: map-in "
            f"must be one of {allowed}, got {map_in!r} ('leaky' is a local-mode option"
            + (
                f"; the M1 of map-in = {map_in!r} is built by the server from the public split and sent with "
                "each request, which needs central-unit = 'user')"
                if map_in in USER_LEVEL_MAPS
                else ")"
            )
        )
    if cfg.get("strategy", ""):
        raise ValueError(
            "strategy names a custom local-mode strategy; mode = 'central' runs Flower's FedAvg inside "
            "a DifferentialPrivacy*FixedClipping wrapper (leave strategy empty)"
        )
