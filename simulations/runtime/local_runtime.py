"""The in-process simulation backend (``backend = "local"``): the same ServerApp and ClientApp as
on Ray or on real devices, run in this process.

:class:`LocalGrid` is a ``flwr.serverapp.Grid``: the ServerApp sends and receives through it
exactly as through Flower's simulation or deployment grids. How a message reaches the other
end (``local-wire``), request and reply alike:

* ``"handoff"`` (the default): no process boundary is crossed, so nothing is serialised. The other
  end gets a new ``Message`` with new records whose ``Array`` objects are new too but share the
  sender's immutable array bytes (:func:`handoff`). Neither end holds a reference into the
  other's records, so a change to one is never seen by the other; the model a round sends to
  every node is stored once, and decoded once per process (``fl.wire.shared_numpy``). The byte
  counts are the records' payload (Flower's ``count_bytes``: the arrays' bytes and the records'
  values), without Flower's object headers. Requests of one type to several nodes go to the
  ClientApp's ``batch_handler`` when it takes them (``clients.app``: user-level central training,
  one forward and backward pass for every node's sampled users, each node replying with its own
  users' sum); otherwise each node answers its own request.
* ``"bytes"``: each message is deflated into Flower's inflatable objects (the bytes the
  Deployment Runtime pushes to a SuperLink, ``flwr.supercore.inflatable``) and inflated again on
  the other side (:func:`wire`), so a node only ever sees what bytes carried; the byte counts are
  those bytes.

Each simulated node has Flower simulation's
node config (``partition-id``, ``num-partitions``) and its own ``Context`` whose ``state``
persists across the run, as the simulation engine keeps it.

The nodes run one after another in this process, but a round is judged as if they ran
concurrently: a reply is lost when *its own* node took longer than the round's timeout (as
when Flower's grid stops waiting), never because earlier nodes of the round were slow. A
ClientApp that raises answers with Flower's error reply (``CLIENT_APP_RAISED_EXCEPTION``),
as in Flower's simulation engine. A node computes with as many torch threads as a Ray actor of
``node-cpus`` CPUs gets (Ray sets ``OMP_NUM_THREADS`` to its whole CPUs, at least 1), because a
matrix product's float result depends on the thread count: so both backends give the same bits.
The nodes' resume snapshots (``clients.node_state``) are flushed to disk with one ``os.sync()``
per batch of requests, before the server sees a reply, instead of one fsync per node.

Written by hand because Flower has no in-process backend without Ray (its simulation engine's
only backend is ``RayBackend``); start-up is an import, not a cluster.
"""

from __future__ import annotations

import copy
import logging
import os
import secrets
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast
from uuid import uuid4

import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Error, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.common.constant import ErrorCode
from flwr.serverapp import Grid, ServerApp
from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects, no_object_id_recompute
from flwr.supercore.inflatable.inflatable_utils import inflate_object_from_contents
from flwr.supercore.run import Run
from flwr.supercore.task_identity import TaskIdentity

from clients import node_state

log = logging.getLogger(__name__)

SERVER_NODE_ID = 1  # flwr.common.constant.SUPERLINK_NODE_ID: the source of every request
WIRE_MODES = ("handoff", "bytes")  # local-wire (see the module docstring)


def deflate(message: Message, deflated: dict[str, bytes] | None = None) -> dict[str, bytes]:
    """The bytes of ``message``'s objects by object id, as Flower's grid pushes them. Call it inside
    Flower's ``no_object_id_recompute()`` (as its grids do), where each object's id is computed once.

    ``deflated`` maps object ids to bytes already deflated: an object id is the SHA-256 of the
    object's bytes (Flower's content addressing), so the model a round sends to every node is
    deflated once; each node still inflates its own copy."""
    contents = {}
    for object_id, obj in get_all_nested_objects(message).items():
        data = deflated.get(object_id) if deflated is not None else None
        if data is None:
            data = obj.deflate()
            if deflated is not None:
                deflated[object_id] = data
        contents[object_id] = data
    return contents


def inflate(message: Message, contents: dict[str, bytes]) -> Message:
    """The receiving end's ``message``, built from ``contents`` (its objects' bytes) alone; the
    ``message_id`` is restored as the receiving end knows it."""
    copy = cast(Message, inflate_object_from_contents(message.object_id, dict(contents)))
    copy.metadata.__dict__["_message_id"] = message.metadata.message_id
    return copy


def wire(message: Message, deflated: dict[str, bytes] | None = None) -> tuple[Message, int]:
    """``message`` after a trip over Flower's wire (:func:`deflate`, then :func:`inflate`): the copy
    and the bytes sent."""
    with no_object_id_recompute():
        contents = deflate(message, deflated)
        copy = inflate(message, contents)
    return copy, sum(len(b) for b in contents.values())


def _copy_array(array: Array) -> Array:
    """A new ``Array`` over the same bytes (``bytes`` are immutable): its own attributes, so setting
    one on either copy leaves the other alone; its cached object id and chunks come along."""
    copy = Array.__new__(Array)
    copy.__dict__.update(array.__dict__)
    return copy


def _copy_record(record: Any) -> Any:
    if isinstance(record, ArrayRecord):
        out = ArrayRecord()
        for key, array in record.items():
            out[key] = _copy_array(array)
        return out
    values = {k: list(v) if isinstance(v, list) else v for k, v in record.items()}
    return ConfigRecord(values) if isinstance(record, ConfigRecord) else MetricRecord(values)


def handoff(message: Message) -> tuple[Message, int]:
    """``message`` as the other end of this process receives it without serialisation: a new
    ``Message``, metadata and records (lists copied; every ``Array`` a new object over the same
    immutable bytes), and its payload bytes: the records' ``count_bytes``, an array's bytes counted
    once per message however many records hold it. Equal arrays over different bytes objects count
    apart, where Flower's content-addressed wire sends them once (the points of a shared federation
    each send their own copy of a public model): the count is an upper bound there."""
    metadata = copy.copy(message.metadata)
    if message.has_error():
        return Message(error=copy.copy(message.error), metadata=metadata), 0
    content = RecordDict()
    size = 0
    seen: set[int] = set()
    for name, record in message.content.items():
        content[name] = _copy_record(record)
        if isinstance(record, ArrayRecord):
            for key, array in record.items():
                size += len(key) + (0 if id(array.data) in seen else len(array.data))
                seen.add(id(array.data))
            size += len(name)
        else:
            size += len(name) + record.count_bytes()
    return Message(content=content, metadata=metadata), size


@dataclass
class WireStats:
    """What crossed the wire and how long the nodes worked (for the run's timing breakdown)."""

    mode: str = "handoff"  # local-wire: "handoff" (payload bytes, nothing serialised) or "bytes"
    messages: int = 0
    bytes_sent: int = 0  # server -> nodes
    bytes_received: int = 0  # nodes -> server
    serialise_seconds: float = 0.0  # "handoff": the copies and the byte counts
    batched: int = 0  # requests answered through the ClientApp's batch_handler (clients.app, clients.points)
    node_seconds: dict[str, float] = field(default_factory=dict)  # by message type

    def to_dict(self) -> dict[str, float | int]:
        return {
            "mode": self.mode,
            "messages": self.messages,
            "bytes_sent": self.bytes_sent,
            "bytes_received": self.bytes_received,
            "serialise_seconds": round(self.serialise_seconds, 3),
            "batched": self.batched,
            **{f"node_seconds_{k}": round(v, 3) for k, v in sorted(self.node_seconds.items())},
        }


class LocalGrid(Grid):
    """A Grid whose ``num_nodes`` nodes run ``client_app`` in this process (see the module docstring).

    ``run_config`` is every node's ``context.run_config``; ``wire_mode`` is how messages cross
    (``"handoff"`` or ``"bytes"``, see the module docstring); node ids are random 63-bit integers,
    as Flower's link state draws them, so nothing may depend on their values. Node ``k``'s node
    config is ``partition-id = k``, ``num-partitions = num_nodes`` and ``node_configs[k]`` (e.g. a
    ``data-path``, as ``flower-supernode --node-config`` gives it).
    """

    def __init__(
        self,
        client_app: ClientApp,
        num_nodes: int,
        run_config: dict | None = None,
        run_id: int | None = None,
        node_threads: int = 1,
        node_configs: Sequence[Mapping[str, Any]] | None = None,
        wire_mode: str = "handoff",
    ) -> None:
        if wire_mode not in WIRE_MODES:
            raise ValueError(f"local-wire must be one of {WIRE_MODES}, got {wire_mode!r}")
        if num_nodes < 1:
            raise ValueError(f"a federation needs at least one node, got {num_nodes}")
        if node_configs is not None and len(node_configs) != num_nodes:
            raise ValueError(f"{len(node_configs)} node configs for {num_nodes} nodes")
        self.client_app = client_app
        self._run = Run.create_empty(run_id if run_id is not None else secrets.randbits(63))
        self._run.override_config = dict(run_config or {})
        ids: set[int] = set()
        while len(ids) < num_nodes:
            node_id = secrets.randbits(63)
            if node_id not in (0, SERVER_NODE_ID):
                ids.add(node_id)
        self.contexts = {
            node_id: Context(
                run_id=self._run.run_id,
                node_id=node_id,
                node_config={
                    "partition-id": partition,
                    "num-partitions": num_nodes,
                    **(dict(node_configs[partition]) if node_configs else {}),
                },
                state=RecordDict(),
                run_config=dict(self._run.override_config),
            )
            for partition, node_id in enumerate(sorted(ids))
        }
        self._replies: dict[str, Message] = {}
        self.wire_mode = wire_mode
        self.stats = WireStats(mode=wire_mode)
        self.node_threads = max(1, int(node_threads))

    # ------------------------------------------------------------------ the Grid interface
    def set_run(self, run: Run) -> None:
        self._run = run

    @property
    def run(self) -> Run:
        return self._run

    def create_message(
        self, content: RecordDict, message_type: str, dst_node_id: int, group_id: str, ttl: float | None = None
    ) -> Message:
        return Message(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

    def get_node_ids(self) -> Iterable[int]:
        return list(self.contexts)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        """Deliver each message and keep its reply for :meth:`pull_messages` (no deadline)."""
        ids = []
        for message, reply, _ in self._deliver_all(self._send(messages)):
            self._replies[message.metadata.message_id] = reply
            ids.append(message.metadata.message_id)
        if ids:
            os.sync()  # the nodes' state snapshots (clients.node_state), before the server sees a reply
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return [self._replies.pop(i) for i in message_ids if i in self._replies]

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        """Deliver every message; return the replies whose node answered within ``timeout`` seconds
        of its own work (the nodes of a round count as concurrent)."""
        replies = []
        sent = self._send(messages)
        for message, reply, seconds in self._deliver_all(sent):
            if timeout is not None and seconds > timeout:
                node = message.metadata.dst_node_id
                log.info("node %d replied after %.1f s, past the timeout (%.1f s): lost", node, seconds, timeout)
                continue
            replies.append(reply)
        if sent:
            os.sync()  # the nodes' state snapshots (clients.node_state), before the server sees a reply
        return replies

    # ------------------------------------------------------------------ delivery
    def _send(self, messages: Iterable[Message]) -> list[tuple[Message, dict[str, bytes] | None]]:
        """Address a batch of requests; with ``local-wire = "bytes"`` deflate them as Flower's grid
        pushes one (object ids computed once, within ``no_object_id_recompute``; objects shared by
        the requests deflated once)."""
        started = time.perf_counter()
        out: list[tuple[Message, dict[str, bytes] | None]] = []
        deflated: dict[str, bytes] = {}
        with no_object_id_recompute():
            for message in messages:
                if message.metadata.dst_node_id not in self.contexts:
                    raise ValueError(f"no node {message.metadata.dst_node_id} in this federation")
                md = message.metadata.__dict__
                md["_message_id"] = md["_message_id"] or str(uuid4())
                md["_run_id"] = self._run.run_id
                md["_src_node_id"] = SERVER_NODE_ID
                if self.wire_mode == "bytes":
                    contents = deflate(message, deflated)
                    self.stats.bytes_sent += sum(len(b) for b in contents.values())
                    out.append((message, contents))
                else:
                    out.append((message, None))
        self.stats.serialise_seconds += time.perf_counter() - started
        return out

    def _receive(self, message: Message, contents: dict[str, bytes] | None) -> tuple[Message, int]:
        """The node's copy of a request, inflated from its bytes (counted when sent) or handed off,
        and the bytes it adds to the count."""
        if contents is not None:
            with no_object_id_recompute():
                received, size = inflate(message, contents), 0
        else:
            received, size = handoff(message)
        received.metadata.__dict__["_delivered_at"] = str(time.time())
        return received, size

    def _reply(self, reply: Message) -> tuple[Message, int]:
        """``reply`` (given a message id) as the server receives it, and its bytes."""
        reply.metadata.__dict__["_message_id"] = str(uuid4())
        return wire(reply) if self.wire_mode == "bytes" else handoff(reply)

    def _deliver_all(self, sent: list[tuple[Message, dict[str, bytes] | None]]) -> list[tuple[Message, Message, float]]:
        """Each request with its reply and its node's seconds: as one batch where the ClientApp takes it
        (:meth:`_deliver_batch`), else one node after another. Each node receives its request once."""
        started = time.perf_counter()
        received = [self._receive(message, contents) for message, contents in sent]
        self.stats.serialise_seconds += time.perf_counter() - started
        batched = self._deliver_batch([m for m, _ in sent], received)
        if batched is not None:
            return batched
        return [(message, *self._deliver(message, *copy)) for (message, _), copy in zip(sent, received, strict=True)]

    def _deliver_batch(
        self, messages: list[Message], received: list[tuple[Message, int]]
    ) -> list[tuple[Message, Message, float]] | None:
        """With ``local-wire = "handoff"``, requests of one type to several nodes go to the ClientApp's
        ``batch_handler(message_type, messages, contexts)`` when it has one (``clients.app``): one
        computation for the nodes of this process, each node still answering its own request from its
        own context. ``None`` (then each node gets its request alone) where the app declines the batch
        or it raises (the nodes then answer, or fail, one by one, from requests received afresh). Each
        node's seconds are the batch's share: the nodes of a round count as concurrent."""
        handler = getattr(self.client_app, "batch_handler", None)
        kinds = {message.metadata.message_type for message in messages}
        if handler is None or self.wire_mode != "handoff" or len(messages) < 2 or len(kinds) != 1:
            return None
        contexts = [self.contexts[message.metadata.dst_node_id] for message in messages]
        t1 = time.perf_counter()
        server_threads = torch.get_num_threads()
        torch.set_num_threads(self.node_threads)  # as a Ray actor of node-cpus CPUs: same float results
        try:
            replies = handler(kinds.pop(), [m for m, _ in received], contexts)
        except Exception as err:  # noqa: BLE001 - each node then answers (or fails) alone
            log.debug("the batch of %d requests raised (%s): each node answers alone", len(messages), err)
            received[:] = [self._receive(message, None) for message in messages]  # what the batch may have touched
            replies = None
        finally:
            torch.set_num_threads(server_threads)
        if replies is None:
            return None
        t2 = time.perf_counter()
        backs = [self._reply(reply) for reply in replies]
        t3 = time.perf_counter()
        kind = messages[0].metadata.message_type.split(".")[0]
        self.stats.messages += len(messages)
        self.stats.bytes_sent += sum(size for _, size in received)
        self.stats.bytes_received += sum(size for _, size in backs)
        self.stats.serialise_seconds += t3 - t2
        self.stats.node_seconds[kind] = self.stats.node_seconds.get(kind, 0.0) + (t2 - t1)
        self.stats.batched += len(messages)
        share = (t2 - t1) / len(messages)
        return [(message, back, share) for message, (back, _) in zip(messages, backs, strict=True)]

    def _deliver(self, message: Message, received: Message, sent_bytes: int) -> tuple[Message, float]:
        """Run the ClientApp on ``received`` (``message`` as its node received it, ``sent_bytes`` on
        the wire), bring the reply back the same way; returns the reply and the node's own seconds."""
        node_id = message.metadata.dst_node_id
        context = self.contexts[node_id]
        t1 = time.perf_counter()
        server_threads = torch.get_num_threads()
        torch.set_num_threads(self.node_threads)  # as a Ray actor of node-cpus CPUs: same float results
        try:
            reply = self.client_app(received, context)
        except Exception as err:  # noqa: BLE001 - a node's failure is its reply, as in Flower's engine
            log.info("node %d raised while handling %s: %s", node_id, message.metadata.message_type, err)
            log.debug(traceback.format_exc())
            reason = f"{type(err)}:<'{err}'>"
            reply = Message(Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=reason), reply_to=received)
        finally:
            torch.set_num_threads(server_threads)
        t2 = time.perf_counter()
        back, received_bytes = self._reply(reply)
        t3 = time.perf_counter()
        kind = message.metadata.message_type.split(".")[0]
        self.stats.messages += 1
        self.stats.bytes_sent += sent_bytes
        self.stats.bytes_received += received_bytes
        self.stats.serialise_seconds += t3 - t2
        self.stats.node_seconds[kind] = self.stats.node_seconds.get(kind, 0.0) + (t2 - t1)
        return back, t2 - t1


def run_local(
    server_app: ServerApp,
    client_app: ClientApp,
    num_nodes: int,
    run_config: dict | None = None,
    on_grid: Callable[[LocalGrid], None] | None = None,
    node_threads: int = 1,
    node_configs: Sequence[Mapping[str, Any]] | None = None,
    wire_mode: str = "handoff",
) -> LocalGrid:
    """Run ``server_app`` to completion on a :class:`LocalGrid` of ``num_nodes`` nodes running
    ``client_app`` with ``node_threads`` torch threads each (and ``node_configs``, ``wire_mode``,
    see the grid); returns the grid (its ``stats``). Exceptions of the ServerApp propagate."""
    grid = LocalGrid(
        client_app, num_nodes, run_config, node_threads=node_threads, node_configs=node_configs, wire_mode=wire_mode
    )
    # The identity Message() reads for the sender of new messages (as Flower's run_simulation sets it).
    TaskIdentity.task_id = 1
    TaskIdentity.run_id = grid.run.run_id
    TaskIdentity.node_id = SERVER_NODE_ID
    if on_grid is not None:
        on_grid(grid)
    context = Context(
        run_id=grid.run.run_id,
        node_id=0,
        node_config={},
        state=RecordDict(),
        run_config=dict(grid.run.override_config),
    )
    synced = node_state.SYNC_EACH_SNAPSHOT
    node_state.SYNC_EACH_SNAPSHOT = False  # the grid flushes each batch with one os.sync() instead
    try:
        server_app(grid, context)
    finally:
        node_state.SYNC_EACH_SNAPSHOT = synced
    return grid
