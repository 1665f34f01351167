"""Flower server side, one module or package per unit of privacy.

- ``server_app``: the ServerApp, one driver for every mode.
- ``local``: local DP, the strategy that trains on sanitized releases (the base of a custom
  strategy) and its per-user account.
- ``central_user``: user-level central DP (DP-FedAvg over users).
- ``central_node``: node-level central DP (DP-FedAvg over nodes, Flower's DP wrapper).
- ``grids``: the grid wrappers; ``discovery``, ``checkpoint``, ``loading``: what every mode shares.
"""

from strategies.local.release_training import ReleaseTraining

__all__ = ["ReleaseTraining"]
