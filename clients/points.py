"""A node of a federation shared by several points of a sweep (``strategies.points``).

A request may carry several points' requests at once (``fl.wire.POINTS``; each point's records
under ``p<point>/``). :func:`points_client_app` splits it and answers each point with that point's
own ClientApp (``clients.app.make_client_app`` with the point's config), as if the point ran alone:
each point has its own node state (``context.state`` keys under ``p<point>/``), so its noise
secret, draw counters, cached releases and budgets are those of its own run. The answers go back
in one reply, each point's records under its prefix; a point whose handler failed answers with
its error (``fl.wire.POINT_ERROR``) and the others are unaffected. What each point's records
hold is exactly what the point alone would send (the message audit's declarations apply to each).
"""

from __future__ import annotations

from collections.abc import Sequence

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.common.constant import ErrorCode

from clients.app import make_client_app
from fl import wire
from fl.config import RunConfig


def _point_message(msg: Message, point: int) -> Message:
    """Point ``point``'s request, as the node would receive it alone (same metadata)."""
    prefix = wire.point_prefix(point)
    content = RecordDict({k[len(prefix) :]: v for k, v in msg.content.items() if k.startswith(prefix)})
    sub = Message(content=content, dst_node_id=msg.metadata.dst_node_id, message_type=msg.metadata.message_type)
    for name in ("_message_id", "_src_node_id", "_run_id", "_group_id", "_created_at", "_ttl", "_delivered_at"):
        if name in msg.metadata.__dict__:
            sub.metadata.__dict__[name] = msg.metadata.__dict__[name]
    return sub


def _point_context(context: Context, point: int) -> Context:
    prefix = wire.point_prefix(point)
    state = RecordDict({k[len(prefix) :]: v for k, v in context.state.items() if k.startswith(prefix)})
    return Context(context.run_id, context.node_id, dict(context.node_config), state, dict(context.run_config))


def _keep_state(context: Context, point: int, state: RecordDict) -> None:
    prefix = wire.point_prefix(point)
    for key in [k for k in context.state.keys() if k.startswith(prefix)]:
        del context.state[key]
    for key, record in state.items():
        context.state[prefix + key] = record


def points_client_app(cfgs: Sequence[RunConfig]) -> ClientApp:
    """The ClientApp of a federation shared by the points ``cfgs`` (point ``i`` runs with ``cfgs[i]``)."""
    apps = [make_client_app(cfg) for cfg in cfgs]
    app = ClientApp()

    def answer(msg: Message, context: Context) -> Message:
        points = [int(p) for p in wire.config_record(msg.content, wire.POINTS)["points"]]  # type: ignore[union-attr]
        reply = RecordDict()
        for point in points:
            if not 0 <= point < len(apps):
                raise ValueError(f"a request for point {point} of a federation of {len(apps)} points")
            own = _point_context(context, point)
            try:
                out = apps[point](_point_message(msg, point), own)
            except Exception as err:  # noqa: BLE001 - that point's failure is its answer, as Flower's engine does
                out = None
                failure = ConfigRecord(
                    {"code": ErrorCode.CLIENT_APP_RAISED_EXCEPTION, "reason": f"{type(err)}:<'{err}'>"}
                )
                reply[wire.point_prefix(point) + wire.POINT_ERROR] = failure
            finally:
                _keep_state(context, point, own.state)
            if out is not None:
                if out.has_error():
                    error = out.error
                    reply[wire.point_prefix(point) + wire.POINT_ERROR] = ConfigRecord(
                        {"code": int(error.code), "reason": str(error.reason)}
                    )
                else:
                    for key, record in out.content.items():
                        reply[wire.point_prefix(point) + key] = record
        return Message(content=reply, reply_to=msg)

    @app.query()
    def query(msg: Message, context: Context) -> Message:
        return answer(msg, context)

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        return answer(msg, context)

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        return answer(msg, context)

    return app
