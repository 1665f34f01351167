"""What a privacy unit's mode is on a node: its handlers for the server's train and evaluate requests,
registered under the mode's name (``fl.config.mode_name``; the server side is ``strategies.modes``).
Queries are the same in every mode (``clients.node``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from flwr.app import Context, Message, MessageType

from fl.config import RunConfig, mode_name

#: A node's handler of one message type: the request, the node's context, the resolved run config.
Handler = Callable[[Message, Context, RunConfig], Message]
#: The same for several nodes of one process at once (their requests and contexts, in order): their replies,
#: or None where the batch does not apply (then each node answers its own request).
BatchHandler = Callable[[Sequence[Message], Sequence[Context], RunConfig], "list[Message] | None"]


@dataclass(frozen=True)
class NodeMode:
    """A mode's node side: what answers a train request and what answers an evaluate request."""

    name: str
    train: Handler
    evaluate: Handler
    train_batch: BatchHandler | None = None  # train requests of several nodes of one process, as one batch
    evaluate_batch: BatchHandler | None = None  # the same for evaluate requests

    def batch(self, message_type: str) -> BatchHandler | None:
        """The batch handler of requests of ``message_type`` (``None``: each node answers alone)."""
        kind = message_type.split(".")[0]
        return {MessageType.TRAIN: self.train_batch, MessageType.EVALUATE: self.evaluate_batch}.get(kind)


#: The registered node sides by mode name, in registration order.
NODE_MODES: dict[str, NodeMode] = {}


def register(mode: NodeMode) -> NodeMode:
    """Add ``mode`` to :data:`NODE_MODES` under its name (a name registered twice is an error)."""
    if mode.name in NODE_MODES:
        raise ValueError(f"a node mode named {mode.name!r} is registered already")
    NODE_MODES[mode.name] = mode
    return mode


def node_mode(cfg: RunConfig) -> NodeMode:
    """The registered node side a resolved config selects."""
    name = mode_name(cfg)
    if name not in NODE_MODES:
        raise ValueError(f"no registered node mode {name!r} (registered: {sorted(NODE_MODES)})")
    return NODE_MODES[name]
