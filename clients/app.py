"""The Sanitas ClientApp: one app for both modes, dispatching each message by ``mode``.

``mode = "local"``: local-DP releases (``clients.ldp_client``);
``mode = "central"``: DP-FedAvg (``clients.central_client``): per-user clipped
updates summed on the node (``central-unit = "user"``) or a node's local
training (``central-unit = "node"``).
Queries are the same in both modes (``clients.node``). The run config is
resolved once per process (``clients.node.resolve_once``). With ``fault-rate > 0``
train and evaluate requests fail as scheduled (``clients.faults``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from clients.central_client import (
    central_clipping_mod,
    handle_central_evaluate,
    handle_central_train,
    handle_user_train,
)
from clients.faults import with_faults
from clients.ldp_client import handle_evaluate, handle_train
from clients.node import handle_query, resolve_once, with_published_encoder
from fl.config import RunConfig


def make_client_app(overrides: Mapping[str, Any] | None = None) -> ClientApp:
    """The ClientApp; ``overrides`` (from ``sanitas run``) take precedence over the run config."""
    app = ClientApp()

    def resolved(context: Context, msg: Message) -> RunConfig:
        return with_published_encoder(resolve_once(context.run_config, overrides), msg)

    @app.query()
    def query(msg: Message, context: Context) -> Message:
        return handle_query(msg, context, resolved(context, msg))

    @app.train(mods=[central_clipping_mod])  # fixedclipping_mod when the server sends a clipping norm
    def train(msg: Message, context: Context) -> Message:
        cfg = resolved(context, msg)
        if cfg.central.mode == "central":
            handler = handle_user_train if cfg.central.central_unit == "user" else handle_central_train
            return with_faults(handler, "train")(msg, context, cfg)
        return with_faults(handle_train, "train")(msg, context, cfg)

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        cfg = resolved(context, msg)
        handler = handle_central_evaluate if cfg.central.mode == "central" else handle_evaluate
        return with_faults(handler, "evaluate")(msg, context, cfg)

    return app


app = make_client_app()
