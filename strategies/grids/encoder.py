"""The grid of a run whose encoder the server published (``encoder-tuning = "public"``).

Every request the strategies send (queries, train and evaluate messages, whatever the mode)
carries the digest of the encoder the nodes must use (``fl.wire.ENCODER``); a node loads
the published folder of that digest and checks its files (weights, tokenizer, pooling and model config) against it
(``clients.node.with_published_encoder``). One wrapper instead of a field in every strategy:
a user's own strategy gets it too.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from flwr.app import ConfigRecord, Message

from fl import wire
from strategies.grids.wrapper import GridWrapper


class EncoderGrid(GridWrapper):
    """A Flower grid that stamps ``digest`` on every outgoing message; every other call is the wrapped grid's."""

    def __init__(self, grid: Any, digest: str) -> None:
        super().__init__(grid)
        self.digest = digest

    def _stamp(self, messages: Iterable[Message]) -> list[Message]:
        out = list(messages)
        for message in out:
            message.content[wire.ENCODER] = ConfigRecord({"digest": self.digest})
        return out

    def send_and_receive(self, messages: Iterable[Message], timeout: float | None = None) -> Iterable[Message]:
        return self._grid.send_and_receive(self._stamp(messages), timeout=timeout)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        return self._grid.push_messages(self._stamp(messages))
