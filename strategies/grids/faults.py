"""Server side of failing nodes: the reply-dropping grid and the per-round tally of failures.

A round's request goes to some nodes; what comes back is, per node, a reply,
an error reply (the node raised), or nothing (it timed out, or the reply was
lost). :func:`split_replies` sorts them so that the strategies train and
evaluate on what arrived and the accounting can charge what may have been
released without arriving (``strategies.local.accounting``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from flwr.app import Message

from fl import faults, wire
from fl.config import RunConfig
from strategies.grids.wrapper import GridWrapper

log = logging.getLogger(__name__)

#: Failure kinds counted in round records: error reply, no reply in ``node-timeout``, reply dropped.
KINDS = ("error", "timeout", "dropped")


class FaultyGrid(GridWrapper):
    """A Flower grid whose replies from scheduled nodes are lost (``fault-kind = "drop-reply"``).

    The node did its work and replied; the reply never reaches the strategy.
    Cohorts are learnt from the query replies that pass through (``fl.faults.node_key``).
    Every other call is the wrapped grid's.
    """

    def __init__(self, grid: Any, cfg: RunConfig) -> None:
        super().__init__(grid)
        self.seed = int(cfg.users.seed)
        self.rate = float(cfg.simulation.fault_rate) if cfg.simulation.fault_kind == "drop-reply" else 0.0
        self.keys: dict[int, str] = {}
        self.dropped: set[int] = set()  # nodes whose reply the last send_and_receive dropped

    def send_and_receive(self, messages: Iterable[Message], timeout: float | None = None) -> Iterable[Message]:
        messages = list(messages)
        requests = {m.metadata.dst_node_id: m for m in messages}  # one request per node per call
        replies = list(self._grid.send_and_receive(messages, timeout=timeout))
        self.dropped = set()
        kept = []
        for reply in replies:
            node = reply.metadata.src_node_id
            if not reply.has_error() and wire.COHORT in reply.content:
                info = wire.CohortInfo.from_record(reply.content[wire.COHORT])
                self.keys[node] = faults.node_key(info.train_users_lo, info.test_users_lo)
            stage = reply.metadata.message_type
            request = requests.get(node)
            if stage in faults.STAGES and node in self.keys and request is not None and self._drops(request, stage):
                self.dropped.add(node)
                continue
            kept.append(reply)
        return kept

    def _drops(self, request: Message, stage: str) -> bool:
        key = self.keys[request.metadata.dst_node_id]
        return faults.fails(self.seed, _server_round(request), stage, key, self.rate)


def _server_round(msg: Message) -> int:
    """The ``server-round`` a request carries (Sanitas' and Flower's strategies both put it in "config")."""
    for record in (msg.content.config_records.get(wire.CONFIG), *msg.content.config_records.values()):
        if record is not None and "server-round" in record:
            return wire.read_int(record, "server-round")
    return 0


@dataclass
class StageOutcome:
    """What came back for one stage of one round."""

    ok: list[Message]
    failed: dict[str, list[int]] = field(default_factory=lambda: {k: [] for k in KINDS})
    first_error: str = ""

    @property
    def lost_nodes(self) -> list[int]:
        """Nodes whose request produced no usable reply (whatever the kind)."""
        return [n for kind in KINDS for n in self.failed[kind]]

    def counts(self) -> dict[str, int]:
        return {k: len(v) for k, v in self.failed.items()}


def split_replies(sent: Iterable[int], replies: Iterable[Message], grid: Any = None) -> StageOutcome:
    """Sort the replies to requests sent to ``sent`` nodes into usable replies and failures.

    An error reply is an ``error``; a node that was sent a request and did not
    reply is ``dropped`` when the grid dropped its reply, else a ``timeout``.
    """
    replies = list(replies)
    outcome = StageOutcome(ok=[r for r in replies if not r.has_error()])
    errors = [r for r in replies if r.has_error()]
    outcome.failed["error"] = [r.metadata.src_node_id for r in errors]
    if errors:
        outcome.first_error = str(errors[0].error.reason)
    answered = {r.metadata.src_node_id for r in replies}
    dropped: set[int] = getattr(grid, "dropped", set())
    for node in sent:
        if node not in answered:
            outcome.failed["dropped" if node in dropped else "timeout"].append(node)
    return outcome


def check_not_all_failed(outcome: StageOutcome, stage: str, server_round: int, fault_rate: float) -> None:
    """Stop the run when every node failed a stage and no fault was injected: a bug, not bad luck.

    With failures injected (``fault-rate > 0``) a round where every node failed is
    a possible outcome, and the run goes on with what it has.
    """
    lost = outcome.lost_nodes
    if lost:
        log.warning(
            "round %d: %d node(s) failed during %s (%s)%s",
            server_round,
            len(lost),
            stage,
            ", ".join(f"{k} {v}" for k, v in outcome.counts().items() if v),
            f": {outcome.first_error}" if outcome.first_error else "",
        )
    if lost and not outcome.ok and fault_rate <= 0:
        raise RuntimeError(
            f"round {server_round}: every node failed during {stage} and no fault was injected"
            + (f": {outcome.first_error}" if outcome.first_error else "")
        )
