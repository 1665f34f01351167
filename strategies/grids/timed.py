"""The grid that times every round trip (``fl.reporting.timing.PHASES``: ``round trip <message type>``).

A round trip is everything between the server's send and the last reply: the messages'
serialisation, the transport, queueing on the backend and the nodes' own work. The local
backend reports the nodes' own work and the serialisation apart (``simulations.runtime.local_runtime``).
"""

from __future__ import annotations

from collections.abc import Iterable

from flwr.app import Message

from fl.reporting.timing import PHASES
from strategies.grids.wrapper import GridWrapper


class TimedGrid(GridWrapper):
    """A Flower grid whose ``send_and_receive`` adds its seconds to ``round trip <type>``; every
    other call is the wrapped grid's."""

    def send_and_receive(self, messages: Iterable[Message], timeout: float | None = None) -> Iterable[Message]:
        messages = list(messages)
        if not messages:  # a round that sends nothing (a central round not evaluated)
            return list(self._grid.send_and_receive(messages, timeout=timeout))
        with PHASES.measure(f"round trip {messages[0].metadata.message_type.split('.')[0]}"):
            return list(self._grid.send_and_receive(messages, timeout=timeout))
