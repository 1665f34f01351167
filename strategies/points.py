"""The points of a sweep that share a federation run in it together: one ServerApp, one set of nodes.

Points that differ only in what the nodes' sanitizers or the server do with the same users
(epsilon, mechanism parameters, label epsilon, noise seeds, the server's training or central
noise) need the same node layout. :func:`run_points` runs each point's whole server
(:func:`strategies.server_app.run_server`: its strategy, accounting, checkpoints, results folder)
in a greenlet of its own, on a :class:`PointGrid` instead of the federation's grid. The points take
turns in one OS thread (a point hands over only where it waits for the federation; greenlets, not
threads: torch's CPU work slowed down 2x with idle threads that had used torch), so no two points
ever run server code at once: each point runs the code it would run alone, in the same order, with
its own global generators and autograd mode.

When every live point waits, the group serves them together:

* every point's server training (``fl.maps.pipeline.train_epochs``) trains beside the others, one
  model per core (``fl.maps.parallel``), each exactly as alone;
* every point's requests to a node go in one message per node and message type
  (:func:`merge`), which the node splits and answers point by point (``clients.points``): one
  discovery, one request per node and round, the cohorts built once (``fl.cohort``).

So each point's ``rounds.jsonl`` and ``summary.json`` are those of the point run alone, timings
aside (``tests/integration/test_points.py``). Written by hand: Flower runs one ServerApp per run.
"""

from __future__ import annotations

import contextvars
import logging
import random
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from flwr.app import ConfigRecord, Error, Message, RecordDict
from greenlet import greenlet

from fl import wire
from fl.config import RunConfig
from fl.maps.minibatch import TrainJob
from fl.maps.parallel import runs_beside_others, train_parallel
from fl.maps.pipeline import POINT_TRAINING

log = logging.getLogger(__name__)

#: The point whose server is running (``None`` outside a group): run logs are filed by it.
CURRENT_POINT: contextvars.ContextVar[int | None] = contextvars.ContextVar("current_point", default=None)


@dataclass(frozen=True)
class _PointState:
    """What a point's code may change that the others must not see, saved and restored as the points
    take turns: the process's global generators (Python's ``random``, numpy's, torch's CPU generator:
    Flower samples nodes with ``random`` and noises with ``np.random``, so each point draws the numbers
    it would draw alone) and torch's autograd mode."""

    generators: tuple[Any, Any, torch.Tensor]
    grad_enabled: bool

    @staticmethod
    def capture() -> _PointState:
        return _PointState((random.getstate(), np.random.get_state(), torch.get_rng_state()), torch.is_grad_enabled())

    def restore(self) -> None:
        random.setstate(self.generators[0])
        np.random.set_state(self.generators[1])
        torch.set_rng_state(self.generators[2])
        torch.set_grad_enabled(self.grad_enabled)


@dataclass
class _Wait:
    """What a point waits for: its requests' replies, or its model trained."""

    kind: str  # "send" or "train"
    payload: Any
    timeout: float | None = None
    result: Any = None
    error: BaseException | None = None
    done: bool = False


@dataclass
class PointGroup:
    """The coordinator of the points sharing ``grid`` (see the module docstring)."""

    grid: Any
    points: int
    scheduler: Any = None  # the greenlet that runs the points and serves them
    served: dict[str, float] = field(
        default_factory=lambda: {"parallel": 0, "alone": 0, "batches": 0, "train_seconds": 0.0, "send_seconds": 0.0}
    )

    # ------------------------------------------------------------------ called from a point's greenlet
    def wait(self, point: int, request: _Wait) -> Any:
        """Hand ``request`` to the scheduler; return its result once every live point waits and it is
        served (or raise what failed it)."""
        self.scheduler.switch(request)
        if request.error is not None:
            raise request.error
        return request.result

    # ------------------------------------------------------------------ serving
    def serve(self, waiting: dict[int, _Wait]) -> None:
        """Serve every waiting point: training first (a point that trains sends nothing meanwhile),
        then one batch of messages for all of them. Runs outside any point's training hook."""
        trains = {p: w for p, w in waiting.items() if w.kind == "train"}
        sends = {p: w for p, w in waiting.items() if w.kind == "send"}
        started = time.perf_counter()
        if trains:
            self._train(trains)
        trained = time.perf_counter()
        if sends:
            self._send(sends)
        self.served["train_seconds"] += trained - started
        self.served["send_seconds"] += time.perf_counter() - trained

    def _train(self, trains: dict[int, _Wait]) -> None:
        points = sorted(trains)
        jobs = [trains[p].payload for p in points]
        together = sum(runs_beside_others(j) for j in jobs) if len(jobs) > 1 else 0
        for p, outcome in zip(points, train_parallel(jobs), strict=True):
            if isinstance(outcome, BaseException):
                trains[p].error, trains[p].done = outcome, True
            else:
                trains[p].result, trains[p].done = outcome, True
        self.served["parallel"] += together
        self.served["alone"] += len(jobs) - together

    def _send(self, sends: dict[int, _Wait]) -> None:
        try:
            merged, parts = merge({p: w.payload for p, w in sends.items()})
            timeouts = [w.timeout for w in sends.values()]
            timeout = None if any(t is None for t in timeouts) else sum(t for t in timeouts if t is not None)
            replies = list(self.grid.send_and_receive(merged, timeout=timeout)) if merged else []
            self.served["batches"] += 1
            by_point = split(replies, parts)
            for p, w in sends.items():
                w.result, w.done = by_point.get(p, []), True
        except BaseException as err:  # noqa: BLE001 - every point of the batch sees the failure
            for w in sends.values():
                w.error, w.done = err, True


# ---------------------------------------------------------------------- messages


def merge(
    requests: dict[int, list[Message]],
) -> tuple[list[Message], dict[str, list[tuple[int, Message]]]]:
    """One message per (node, message type) carrying every point's request to it, each point's records
    under ``p<point>/``; returns the merged messages and, by merged message id, the (point, request)
    pairs each one answers for."""
    groups: dict[tuple[int, str], list[tuple[int, Message]]] = defaultdict(list)
    for point in sorted(requests):
        for message in requests[point]:
            md = message.metadata.__dict__
            md["_message_id"] = md["_message_id"] or str(uuid.uuid4())  # so that its reply can name it
            groups[(message.metadata.dst_node_id, message.metadata.message_type)].append((point, message))
    merged, parts = [], {}
    for (node, kind), members in groups.items():
        content = RecordDict({wire.POINTS: ConfigRecord({"points": [p for p, _ in members]})})
        for point, message in members:
            for key, record in message.content.items():
                content[wire.point_prefix(point) + key] = record
        first = members[0][1].metadata
        out = Message(content=content, dst_node_id=node, message_type=kind, group_id=first.group_id)
        out.metadata.__dict__["_message_id"] = str(uuid.uuid4())
        merged.append(out)
        parts[out.metadata.message_id] = members
    return merged, parts


def split(replies: Iterable[Message], parts: dict[str, list[tuple[int, Message]]]) -> dict[int, list[Message]]:
    """Each point's replies from the merged replies: a node's answer for a point (or its error for that
    point, or the whole node's error) as a reply to that point's own request. A merged request with no
    reply (lost) has none for any of its points."""
    out: dict[int, list[Message]] = defaultdict(list)
    for reply in replies:
        members = parts.get(reply.metadata.reply_to_message_id, [])
        contents = {} if reply.has_error() else wire.point_contents(reply.content)
        for point, request in members:
            if reply.has_error():
                answer = Message(reply.error, reply_to=request)
            else:
                content = contents.get(point, RecordDict())
                failure = content.config_records.get(wire.POINT_ERROR)
                if failure is not None:
                    answer = Message(
                        Error(code=wire.read_int(failure, "code"), reason=str(failure["reason"])), reply_to=request
                    )
                else:
                    answer = Message(content=content, reply_to=request)
            answer.metadata.__dict__["_src_node_id"] = reply.metadata.src_node_id
            out[point].append(answer)
    return out


# ---------------------------------------------------------------------- a point's grid
class PointGrid:
    """The grid a point's server sees: the federation's, except that sending waits for the group."""

    def __init__(self, group: PointGroup, point: int) -> None:
        self._group, self._point = group, point
        self.shared_by_points = group.points  # read by the run's timings (strategies.server_app.run_timings)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._group.grid, name)

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        return self._group.wait(self._point, _Wait("send", list(messages), timeout))


# ---------------------------------------------------------------------- running the points
def run_points(
    grid: Any,
    cfgs: Sequence[RunConfig],
    run_one: Callable[[Any, RunConfig], dict[str, Any]],
) -> list[dict[str, Any] | BaseException]:
    """Run ``run_one(point_grid, cfg)`` (a whole server run) for every config on the shared ``grid``;
    each point's summary, or the exception that ended it (the other points go on)."""
    group = PointGroup(grid, len(cfgs), scheduler=greenlet.getcurrent())
    outcomes: list[dict[str, Any] | BaseException] = [RuntimeError("not run")] * len(cfgs)

    def body(point: int) -> None:
        CURRENT_POINT.set(point)

        def train(job: TrainJob) -> float:
            return float(group.wait(point, _Wait("train", job)))

        POINT_TRAINING.set(train)
        try:
            outcomes[point] = run_one(PointGrid(group, point), cfgs[point])
        except BaseException as err:  # noqa: BLE001 - recorded; the other points go on
            log.info("point %d failed: %s", point, err)
            outcomes[point] = err

    start = _PointState.capture()  # every point starts from the same generators
    federation = start
    states: dict[int, _PointState] = {}
    runners = [greenlet(body) for _ in cfgs]
    waiting: dict[int, _Wait] = {}

    def resume(point: int, *args: Any) -> None:
        states.get(point, start).restore()
        request = runners[point].switch(*args)
        states[point] = _PointState.capture()
        if not runners[point].dead:
            waiting[point] = request

    for point in range(len(cfgs)):
        resume(point, point)
    while waiting:
        served, waiting = waiting, {}
        federation.restore()  # the nodes' and the training's own draws, apart from every point's
        contextvars.Context().run(group.serve, served)
        federation = _PointState.capture()
        for point in sorted(served):
            resume(point)
    log.info(
        "%d points shared one federation: %d message batches (%.1f s); %d trainings side by side, %d alone (%.1f s)",
        len(cfgs),
        group.served["batches"],
        group.served["send_seconds"],
        group.served["parallel"],
        group.served["alone"],
        group.served["train_seconds"],
    )
    return outcomes
