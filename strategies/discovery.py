"""What both modes' server strategies share: finding the nodes and refusing failed replies."""

from __future__ import annotations

import time
from collections.abc import Iterable

from flwr.app import ConfigRecord, Message, MessageType, RecordDict
from flwr.serverapp import Grid

from fl import messages as wire


def raise_on_errors(replies: Iterable[Message], stage: str) -> None:
    """Stop the run on any failed reply: a missing release would silently change the accounting."""
    errors = [r.error.reason for r in replies if r.has_error()]
    if errors:
        raise RuntimeError(f"{len(errors)} node(s) failed during {stage}: {errors[0]}")


def covers_everyone(nodes: dict[int, wire.CohortInfo]) -> bool:
    """True when the nodes seen so far hold every training and every test user."""
    if not nodes:
        return False
    first = next(iter(nodes.values()))
    train = sum(v.train_users_hi - v.train_users_lo for v in nodes.values())
    test = sum(v.test_users_hi - v.test_users_lo for v in nodes.values())
    return train == first.num_train_users and test == first.num_test_users


def discover_nodes(
    grid: Grid, timeout: float = 3600.0, known: dict[int, wire.CohortInfo] | None = None
) -> dict[int, wire.CohortInfo]:
    """Ask every node which users it holds (QUERY messages), until the cohorts cover every user.

    Nodes may still be registering when the ServerApp starts, so new nodes are
    queried until the reported cohorts cover every training and test user, or
    ``timeout`` seconds pass (``RuntimeError``).
    """
    nodes = dict(known or {})
    deadline = time.time() + timeout
    while True:
        new = [n for n in grid.get_node_ids() if n not in nodes]
        queries = [
            Message(content=RecordDict({wire.CONFIG: ConfigRecord({})}), dst_node_id=n, message_type=MessageType.QUERY)
            for n in new
        ]
        replies = list(grid.send_and_receive(queries, timeout=timeout)) if queries else []
        raise_on_errors(replies, "query")
        for reply in replies:
            nodes[reply.metadata.src_node_id] = wire.CohortInfo.from_record(reply.content[wire.COHORT])
        if covers_everyone(nodes):
            return nodes
        if time.time() > deadline:
            raise RuntimeError(f"after {timeout:.0f}s the {len(nodes)} nodes do not hold every user")
        time.sleep(0.5)
