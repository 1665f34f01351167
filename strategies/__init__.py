"""Flower server side, one module or package per unit of privacy.

- ``server_app``: the ServerApp, one driver for every mode.
- ``local``: local DP, the strategy that trains on sanitized releases (the base of a custom
  strategy) and its per-user account.
- ``central_user``: user-level central DP (DP-FedAvg over users).
- ``central_node``: node-level central DP (DP-FedAvg over nodes, Flower's DP wrapper).
- ``grids``: the grid wrappers; ``discovery``, ``checkpoint``, ``loading``: what every mode shares.
- ``loading``: the strategy a run config names (a Flower built-in, a user's class), its options and its mode;
  ``mean_step``: central mode's mean-family strategies stepping from the noisy mean.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from strategies.local.release_training import ReleaseTraining

__all__ = ["ReleaseTraining"]


def __getattr__(name: str) -> Any:
    """``strategies.ReleaseTraining`` on first use (PEP 562): naming a strategy in a config is checked without
    importing torch (``strategies.loading``)."""
    if name == "ReleaseTraining":
        from strategies.local.release_training import ReleaseTraining

        return ReleaseTraining
    raise AttributeError(f"module 'strategies' has no attribute {name!r}")
