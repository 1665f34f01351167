"""The grid that files the SuperLink's answers for lost nodes under the node they concern.

When a node is gone (killed, disconnected, its heartbeat expired) Flower's SuperLink answers a
message to it with an error reply of its own (``NODE_UNAVAILABLE`` or ``REPLY_MESSAGE_UNAVAILABLE``)
whose ``src_node_id`` is the SuperLink's id (1), not the node's. Sanitas' strategies file every reply
by the node that sent it (cohorts, fault tallies, lost-release charges), so this grid gives such a
reply the id of the node its request went to (matched by ``reply_to_message_id``). Simulation
backends answer for their nodes themselves; for them it changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from flwr.app import Message
from flwr.common.constant import SUPERLINK_NODE_ID

from strategies.grids.wrapper import GridWrapper

log = logging.getLogger(__name__)


class LostNodeGrid(GridWrapper):
    """A Flower grid whose replies always name the node of their request; every other call is the
    wrapped grid's."""

    def send_and_receive(self, messages: Iterable[Message], timeout: float | None = None) -> Iterable[Message]:
        messages = list(messages)
        replies = list(self._grid.send_and_receive(messages, timeout=timeout))
        # The grid set each request's id when it pushed it (Flower's Grid.push_messages).
        destination = {m.metadata.message_id: m.metadata.dst_node_id for m in messages if m.metadata.message_id}
        for reply in replies:
            meta = reply.metadata
            if meta.src_node_id == SUPERLINK_NODE_ID and meta.reply_to_message_id in destination:
                node = destination[meta.reply_to_message_id]
                reason = reply.error.reason if reply.has_error() else "no reason"
                log.warning("node %d is unavailable (the SuperLink answered for it: %s)", node, reason)
                meta.__dict__["_src_node_id"] = node
        return replies
