"""The SuperLink's answers for lost nodes are filed under the node their request went to."""

from __future__ import annotations

from flwr.app import ConfigRecord, Error, Message, RecordDict
from flwr.common.constant import SUPERLINK_NODE_ID, ErrorCode

from strategies.grids.lost_nodes import LostNodeGrid


class _Link:
    """A grid whose node 7 answers and whose node 9 is gone: the SuperLink answers for it."""

    def send_and_receive(self, messages: list[Message], timeout: float | None = None) -> list[Message]:
        replies = []
        for i, m in enumerate(messages):
            m.metadata.__dict__["_message_id"] = f"m{i}"  # as Grid.push_messages sets it
            if m.metadata.dst_node_id == 7:
                reply = Message(RecordDict({"c": ConfigRecord({"ok": 1})}), reply_to=m)
                reply.metadata.__dict__["_src_node_id"] = 7
            else:
                reply = Message(Error(ErrorCode.NODE_UNAVAILABLE, "Node unavailable"), reply_to=m)
                reply.metadata.__dict__["_src_node_id"] = SUPERLINK_NODE_ID
            replies.append(reply)
        return replies

    def get_node_ids(self) -> list[int]:
        return [7, 9]


def _request(node: int) -> Message:
    return Message(RecordDict({"c": ConfigRecord({})}), dst_node_id=node, message_type="train")


def test_a_superlink_error_reply_names_the_lost_node() -> None:
    from flwr.supercore.task_identity import TaskIdentity

    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 3, SUPERLINK_NODE_ID
    raw = _Link().send_and_receive([_request(7), _request(9)])
    assert [r.metadata.src_node_id for r in raw] == [7, SUPERLINK_NODE_ID]  # what Flower hands the strategy
    replies = LostNodeGrid(_Link()).send_and_receive([_request(7), _request(9)])
    assert [r.metadata.src_node_id for r in replies] == [7, 9]
    assert replies[1].has_error() and replies[1].error.code == ErrorCode.NODE_UNAVAILABLE
    assert LostNodeGrid(_Link()).get_node_ids() == [7, 9]
