"""The privacy units' modes, node side (:mod:`clients.modes.base`): local DP answers with sanitized releases
(``clients.ldp_client``), user-level central DP with the sum of its sampled users' clipped updates and
node-level central DP with its local training (``clients.central_client``). A new mode is one
:func:`~clients.modes.base.register` line here, with its handlers in a module of their own."""

from __future__ import annotations

from clients.central_client import (
    handle_central_evaluate,
    handle_central_evaluate_batch,
    handle_central_train,
    handle_user_train,
    handle_user_train_batch,
)
from clients.ldp_client import handle_evaluate, handle_train
from clients.modes.base import NODE_MODES, NodeMode, node_mode, register

register(NodeMode("local", train=handle_train, evaluate=handle_evaluate))
register(
    NodeMode(
        "central/user",
        train=handle_user_train,
        evaluate=handle_central_evaluate,
        train_batch=handle_user_train_batch,
        evaluate_batch=handle_central_evaluate_batch,
    )
)
register(NodeMode("central/node", train=handle_central_train, evaluate=handle_central_evaluate))

__all__ = ["NODE_MODES", "NodeMode", "node_mode", "register"]
