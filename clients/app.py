"""The Sanitas ClientApp: one app for every mode, dispatching each train and evaluate message through the
node-side mode registry (``clients.modes``, keyed by ``fl.config.mode_name``):

``"local"``: local-DP releases (``clients.ldp_client``);
``"central/user"`` and ``"central/node"``: DP-FedAvg (``clients.central_client``): per-user clipped
updates summed on the node, or a node's local training.
Queries are the same in every mode (``clients.node``). The run config is
resolved once per process (``clients.node.resolve_once``). With ``fault-rate > 0``
train and evaluate requests fail as scheduled (``clients.faults``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from clients.central_client import central_clipping_mod
from clients.faults import with_faults
from clients.modes import node_mode
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
        return with_faults(node_mode(cfg).train, "train")(msg, context, cfg)

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        cfg = resolved(context, msg)
        return with_faults(node_mode(cfg).evaluate, "evaluate")(msg, context, cfg)

    return app


app = make_client_app()
