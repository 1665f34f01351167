"""The privacy units' modes, server side: one registered extension point (:mod:`strategies.modes.base`).

A new mode is one module here (a class with the :class:`~strategies.modes.base.ServerMode` members), one in
``clients.modes`` (its node handlers), and one :func:`~strategies.modes.base.register` line each.
"""

from __future__ import annotations

from strategies.modes.base import (
    MODES,
    ModeRun,
    ServerMode,
    declared_fields,
    mode_of,
    register,
    run_folder,
    server_mode,
)
from strategies.modes.local import LocalMode
from strategies.modes.node_level import NodeLevelMode
from strategies.modes.user_level import UserLevelMode

register(LocalMode())
register(UserLevelMode())
register(NodeLevelMode())

__all__ = ["MODES", "ModeRun", "ServerMode", "declared_fields", "mode_of", "register", "run_folder", "server_mode"]
