"""Flower-style strategy tests: a fake grid answers the messages, no simulation runs."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import pytest
from flwr.app import Message, RecordDict
from flwr.supercore.task_identity import TaskIdentity

from fl import wire


@pytest.fixture(autouse=True)
def task_identity() -> Iterator[None]:
    """Messages take their run and node ids from the task identity (set by Flower in a real run)."""
    saved = (TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id)
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 0
    yield
    TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = saved


class FakeGrid:
    """A grid of nodes whose replies a test function writes (queries are answered with the cohorts)."""

    def __init__(self, nodes: dict[int, wire.CohortInfo], answer: Callable[[Message], RecordDict] | None = None):
        self.nodes, self.answer = nodes, answer

    def get_node_ids(self) -> list[int]:
        return list(self.nodes)

    def send_and_receive(self, messages: Iterable[Message], timeout: float | None = None) -> list[Message]:
        replies = []
        for m in messages:
            node = m.metadata.dst_node_id
            if m.metadata.message_type == "query":
                content = RecordDict({wire.COHORT: self.nodes[node].to_record()})
            else:
                assert self.answer is not None
                content = self.answer(m)
            replies.append(Message(content=content, reply_to=m))
        return replies
