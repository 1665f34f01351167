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

from collections.abc import Mapping, Sequence
from typing import Any

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from clients import node_state
from clients.central_client import central_clipping_mod
from clients.faults import with_faults
from clients.modes import node_mode
from clients.node import handle_query, node_partition, resolve_once, with_published_encoder
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

    def batch_handler(message_type: str, msgs: Sequence[Message], contexts: Sequence[Context]) -> list[Message] | None:
        """Several nodes' requests of one type at once, for a backend that runs them in one process
        (``simulations.runtime.local_runtime``): their replies, or ``None`` where the mode has no batch
        for them or faults are injected (then the backend gives each node its own request)."""
        cfg = resolved(contexts[0], msgs[0])
        handler = node_mode(cfg).batch(message_type) if batches(cfg, message_type) else None
        if handler is None or any(resolved(ctx, m) is not cfg for m, ctx in zip(msgs, contexts, strict=True)):
            return None
        partitions = [node_partition(ctx)[0] for ctx in contexts]
        for msg, ctx, pid in zip(msgs, contexts, partitions, strict=True):
            node_state.restore(msg, ctx, cfg, pid)  # a resumed run: each node's state at the checkpoint
        replies = handler(msgs, contexts, cfg)
        if replies is not None:
            stage = message_type.split(".")[0]  # as clients.faults.with_faults saves after each answer
            for msg, ctx, pid in zip(msgs, contexts, partitions, strict=True):
                node_state.save(msg, ctx, cfg, pid, stage)
        return replies

    app.batch_handler = batch_handler  # type: ignore[attr-defined]  # read by the local backend
    return app


def batches(cfg: RunConfig, message_type: str) -> bool:
    """Whether requests of ``message_type`` under ``cfg`` may go to a mode's batch (``batch_handler``):
    train or evaluate requests of a mode that has a batch for them, with no faults injected (a fault is a
    node's own)."""
    return node_mode(cfg).batch(message_type) is not None and cfg.simulation.fault_rate <= 0


app = make_client_app()
