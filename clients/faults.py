"""Node-side fault injection (``fault-rate``, ``fault-kind``; schedule in ``fl.faults``).

``raise`` fails before the handler runs (no noise is drawn, nothing is kept);
``timeout`` runs the handler, so the node draws and caches its releases as usual,
then sleeps past the server's ``node-timeout`` before replying. ``drop-reply``
happens on the server side (``strategies.grids.faults.FaultyGrid``): the node itself
behaves normally.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from flwr.app import Context, Message

from clients import node_state
from clients.node import node_cohort, node_partition
from fl import faults, wire
from fl.config import RunConfig

#: Seconds a ``timeout`` fault sleeps beyond ``node-timeout`` (the server has stopped waiting by then).
LATE_BY = 1.0


class InjectedFault(RuntimeError):
    """A failure injected on purpose by ``fault-rate`` (not a bug)."""


def _scheduled(msg: Message, context: Context, cfg: RunConfig, stage: str) -> bool:
    if cfg.simulation.fault_rate <= 0 or cfg.simulation.fault_kind == "drop-reply":
        return False
    request: Mapping[str, object] = wire.config_record(msg.content, wire.CONFIG) if wire.CONFIG in msg.content else {}
    server_round = wire.read_int(request, "server-round", 0)
    c = node_cohort(context, cfg)
    key = faults.node_key(c.train_users.start, c.test_users.start)
    return faults.fails(int(cfg.users.seed), server_round, stage, key, float(cfg.simulation.fault_rate))


def with_faults(
    handler: Callable[[Message, Context, RunConfig], Message], stage: str
) -> Callable[[Message, Context, RunConfig], Message]:
    """``handler`` with this node's scheduled ``raise`` / ``timeout`` faults injected at ``stage``,
    its state restored in a resumed run and saved after each answer (``clients.node_state``)."""

    def run(msg: Message, context: Context, cfg: RunConfig) -> Message:
        pid = node_partition(context)[0]
        node_state.restore(msg, context, cfg, pid)  # a resumed run: this node's state at the checkpoint
        scheduled = _scheduled(msg, context, cfg, stage)
        if scheduled and cfg.simulation.fault_kind == "raise":
            raise InjectedFault(f"injected fault (fault-kind = 'raise') at {stage}")
        reply = handler(msg, context, cfg)
        node_state.save(msg, context, cfg, pid, stage)  # before a late reply, as a real node would
        if scheduled and cfg.simulation.fault_kind == "timeout":
            time.sleep(float(cfg.server.node_timeout) + LATE_BY)
        return reply

    return run
