"""The in-process backend's grid: messages cross as Flower's wire bytes, nodes keep their own state,
a failing node answers with Flower's error reply, and a slow node's reply is lost on its own."""

from __future__ import annotations

import time

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import ServerApp

from simulations.runtime.local_runtime import LocalGrid, run_local, wire


def _app() -> ClientApp:
    app = ClientApp()

    @app.query()
    def query(msg: Message, context: Context) -> Message:
        seen = int(context.state["seen"]["n"]) + 1 if "seen" in context.state else 1
        context.state["seen"] = ConfigRecord({"n": seen})
        request = msg.content["config"]
        if request.get("fail"):
            raise RuntimeError("boom")
        time.sleep(float(request.get("sleep", 0.0)))
        arrays = msg.content["arrays"]
        doubled = ArrayRecord({"x": Array(arrays["x"].numpy() * 2)})
        reply = ConfigRecord({"partition": int(context.node_config["partition-id"]), "seen": seen})
        return Message(RecordDict({"arrays": doubled, "reply": reply}), reply_to=msg)

    return app


def _request(node: int, **config: object) -> Message:
    content = RecordDict({"arrays": ArrayRecord({"x": Array(np.arange(4.0))}), "config": ConfigRecord(dict(config))})
    return Message(content, dst_node_id=node, message_type="query")


def _identity() -> None:
    from flwr.supercore.task_identity import TaskIdentity

    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 7, 1


def test_a_message_crosses_as_bytes_and_shares_nothing_with_the_original() -> None:
    _identity()
    original = _request(5)
    original.metadata.__dict__["_message_id"] = "m-1"
    copy, size = wire(original)
    assert size > 4 * 8 and copy is not original and copy.metadata.message_id == "m-1"
    assert copy.metadata.dst_node_id == 5 and copy.metadata.message_type == "query"
    assert np.array_equal(copy.content["arrays"]["x"].numpy(), np.arange(4.0))
    original.content["arrays"]["x"] = Array(np.zeros(4))  # the sender changes its record afterwards
    assert np.array_equal(copy.content["arrays"]["x"].numpy(), np.arange(4.0))


def test_nodes_answer_with_their_own_partition_and_keep_their_state() -> None:
    _identity()
    grid = LocalGrid(_app(), num_nodes=3)
    nodes = list(grid.get_node_ids())
    assert len(set(nodes)) == 3
    for _ in range(2):
        replies = list(grid.send_and_receive([_request(n) for n in nodes]))
    by_node = {r.metadata.src_node_id: r.content["reply"] for r in replies}
    assert sorted(int(v["partition"]) for v in by_node.values()) == [0, 1, 2]
    assert all(int(v["seen"]) == 2 for v in by_node.values())  # context.state persisted per node
    assert all(np.array_equal(r.content["arrays"]["x"].numpy(), 2 * np.arange(4.0)) for r in replies)
    assert grid.stats.messages == 6 and grid.stats.bytes_sent > 0 and grid.stats.bytes_received > 0


def test_a_failing_node_answers_with_an_error_reply_and_a_slow_one_is_lost_alone() -> None:
    _identity()
    grid = LocalGrid(_app(), num_nodes=3)
    a, b, c = grid.get_node_ids()
    replies = list(grid.send_and_receive([_request(a, fail=True), _request(b, sleep=0.3), _request(c)], timeout=0.2))
    by_node = {r.metadata.src_node_id: r for r in replies}
    assert set(by_node) == {a, c}  # b's own work took longer than the timeout; c, after it, still counts
    assert by_node[a].has_error() and "boom" in by_node[a].error.reason
    assert not by_node[c].has_error()


def test_run_local_runs_a_server_app_to_completion() -> None:
    seen: list[int] = []
    server = ServerApp()

    @server.main()
    def main(grid, context: Context) -> None:
        replies = grid.send_and_receive([_request(n) for n in grid.get_node_ids()])
        seen.extend(int(r.content["reply"]["partition"]) for r in replies)

    grid = run_local(server, _app(), num_nodes=4)
    assert sorted(seen) == [0, 1, 2, 3] and grid.stats.messages == 4
