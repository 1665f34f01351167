"""What both modes' server strategies share: finding the nodes and refusing failed replies."""

from __future__ import annotations

import re
import time
from collections.abc import Iterable

from flwr.app import ConfigRecord, Message, MessageType, RecordDict
from flwr.serverapp import Grid

from fl import wire


def raise_on_errors(replies: Iterable[Message], stage: str) -> None:
    """Stop the run on any failed reply: a missing release would silently change the accounting.
    The error names the node and its reason (a node's own check says what is wrong)."""
    errors = [f"node {r.metadata.src_node_id}: {error_reason(r.error.reason)}" for r in replies if r.has_error()]
    if errors:
        raise RuntimeError(f"{len(errors)} node(s) failed during {stage}: {errors[0]}")


def error_reason(reason: str | None) -> str:
    """A node's error as ``Type: message`` (Flower wraps a ClientApp's exception as ``<class 'T'>:<'m'>``)."""
    if reason is None:  # Flower's Error.reason is optional
        return "no reason given"
    wrapped = re.fullmatch(r"<class '(?:[\w.]*\.)?(\w+)'>:<'(.*)'>", reason, flags=re.DOTALL)
    return f"{wrapped.group(1)}: {wrapped.group(2)}" if wrapped else reason


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
    ``timeout`` seconds pass (``RuntimeError``). Nodes holding their own files are
    assigned their user ids once every partition has answered (:func:`assign_users`).
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
            nodes[reply.metadata.src_node_id] = wire.CohortInfo.from_record(
                wire.metric_record(reply.content, wire.COHORT)
            )
        if any(v.node_local and v.num_train_users == 0 for v in nodes.values()) and every_partition(nodes):
            nodes.update(assign_users(grid, nodes, timeout))
        if covers_everyone(nodes):
            return nodes
        if time.time() > deadline:
            raise RuntimeError(f"after {timeout:.0f}s the {len(nodes)} nodes do not hold every user")
        time.sleep(0.5)


def every_partition(nodes: dict[int, wire.CohortInfo]) -> bool:
    """True when the nodes seen are partitions 0..num-partitions-1 of one federation, each once
    (a ``RuntimeError`` for two nodes with one partition id or disagreeing partition counts)."""
    counts = {v.num_partitions for v in nodes.values()}
    if len(counts) > 1:
        raise RuntimeError(f"the nodes' configs disagree on num-partitions: {sorted(counts)}")
    seen: dict[int, int] = {}
    for node, v in nodes.items():
        if v.partition_id in seen:
            raise RuntimeError(f"nodes {seen[v.partition_id]} and {node} both have partition-id={v.partition_id}")
        seen[v.partition_id] = node
    return len(seen) == counts.pop()


def assign_users(grid: Grid, nodes: dict[int, wire.CohortInfo], timeout: float) -> dict[int, wire.CohortInfo]:
    """Give the users of nodes that hold their own files (node config ``data-path``) global ids:
    consecutive blocks in partition-id order, as a shared dataset's partition numbers them. Each node
    learns its block from a ``USERS`` query and answers with its cohort under those ids."""
    local = [n for n, v in nodes.items() if v.node_local]
    if len(local) != len(nodes):
        shared = sorted(set(nodes) - set(local))
        raise RuntimeError(
            f"nodes {sorted(local)} hold their own data files (data-path) and nodes {shared} a partition of the "
            "run's dataset: a federation uses one or the other"
        )
    order = sorted(local, key=lambda n: nodes[n].partition_id)
    sizes = [nodes[n].num_local_users for n in order]
    offsets = [sum(sizes[:i]) for i in range(len(sizes))]
    total = sum(sizes)
    queries = [
        Message(
            content=RecordDict(
                {
                    wire.CONFIG: ConfigRecord({}),
                    wire.USERS: ConfigRecord({"train-offset": offset, "num-train-users": total}),
                }
            ),
            dst_node_id=node,
            message_type=MessageType.QUERY,
        )
        for node, offset in zip(order, offsets, strict=True)
    ]
    replies = list(grid.send_and_receive(queries, timeout=timeout))
    raise_on_errors(replies, "query")
    assigned = {
        r.metadata.src_node_id: wire.CohortInfo.from_record(wire.metric_record(r.content, wire.COHORT)) for r in replies
    }
    missing = sorted(set(order) - set(assigned))
    if missing:
        raise RuntimeError(f"nodes {missing} did not answer the assignment of their user ids")
    return assigned
