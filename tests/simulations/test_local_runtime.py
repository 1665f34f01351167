"""The in-process backend's grid: messages cross handed off (new records over the same immutable bytes) or as
Flower's wire bytes, nodes keep their own state, a failing node answers with Flower's error reply, and a slow
node's reply is lost on its own."""

from __future__ import annotations

import time

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import ServerApp

from simulations.runtime.local_runtime import LocalGrid, handoff, run_local, wire


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


def test_a_handed_off_message_shares_only_immutable_bytes() -> None:
    """local-wire = "handoff": the copy has its own message, records and Arrays (over the same bytes);
    changing either side's records leaves the other's alone, and the payload bytes are counted."""
    _identity()
    original = _request(5, note="x")
    original.metadata.__dict__["_message_id"] = "m-2"
    copy, size = handoff(original)
    assert copy is not original and copy.metadata is not original.metadata and copy.metadata.message_id == "m-2"
    assert copy.content is not original.content and copy.content["arrays"] is not original.content["arrays"]
    assert copy.content["arrays"]["x"] is not original.content["arrays"]["x"]
    assert copy.content["arrays"]["x"].data is original.content["arrays"]["x"].data  # bytes shared, not copied
    assert size == sum(len(k) + r.count_bytes() for k, r in original.content.items()) and size > 4 * 8
    copy.content["arrays"]["x"] = Array(np.zeros(4))  # the receiver changes its records
    copy.content["config"]["note"] = "y"
    assert np.array_equal(original.content["arrays"]["x"].numpy(), np.arange(4.0))
    assert original.content["config"]["note"] == "x"
    other, _ = handoff(original)
    original.content["arrays"]["x"].data = Array(np.ones(4)).data  # the sender changes an Array afterwards
    assert np.array_equal(other.content["arrays"]["x"].numpy(), np.arange(4.0))


def test_both_wires_give_the_same_replies_and_count_alike() -> None:
    """The handoff and the byte wire deliver the same content; the handoff's byte count is the payload,
    within Flower's object headers of the wire's."""
    _identity()
    grids = {mode: LocalGrid(_app(), num_nodes=3, wire_mode=mode) for mode in ("handoff", "bytes")}
    out = {}
    for mode, grid in grids.items():
        replies = list(grid.send_and_receive([_request(n) for n in grid.get_node_ids()]))
        out[mode] = sorted(
            (int(r.content["reply"]["partition"]), r.content["arrays"]["x"].numpy().tolist()) for r in replies
        )
        assert grid.stats.to_dict()["mode"] == mode
    assert out["handoff"] == out["bytes"]
    handoff_bytes, wire_bytes = grids["handoff"].stats.bytes_sent, grids["bytes"].stats.bytes_sent
    assert 0 < handoff_bytes <= wire_bytes


def test_an_error_reply_is_handed_off_too() -> None:
    _identity()
    grid = LocalGrid(_app(), num_nodes=1)
    (node,) = grid.get_node_ids()
    (reply,) = grid.send_and_receive([_request(node, fail=True)])
    assert reply.has_error() and "boom" in reply.error.reason


def test_a_process_decodes_shared_bytes_once() -> None:
    """fl.wire.shared_numpy: the handoff's copies of one Array decode to one ndarray; other bytes apart."""
    from fl import wire as schema

    _identity()
    original = _request(3)
    a, _ = handoff(original)
    b, _ = handoff(original)
    x_a, x_b = (schema.shared_numpy(m.content["arrays"]["x"]) for m in (a, b))
    assert x_a is x_b and np.array_equal(x_a, np.arange(4.0))
    other = schema.shared_numpy(Array(np.arange(4.0)))
    assert other is not x_a and np.array_equal(other, x_a)


def test_an_array_held_by_two_records_is_counted_once() -> None:
    _identity()
    shared = Array(np.arange(100.0))
    message = Message(
        RecordDict({"a": ArrayRecord({"x": shared}), "b": ArrayRecord({"y": shared})}),
        dst_node_id=1,
        message_type="query",
    )
    _, size = handoff(message)
    assert size == len(shared.data) + len("ax") + len("by")
