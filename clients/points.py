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
from typing import Any

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.common.constant import ErrorCode

from clients.app import batches, make_client_app
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


def _records(point: int, out: Message | None, err: Exception | None = None) -> dict[str, Any]:
    """Point ``point``'s part of a reply: its answer's records under its prefix, or its error."""
    prefix = wire.point_prefix(point)
    if out is None or out.has_error():
        code, reason = (
            (ErrorCode.CLIENT_APP_RAISED_EXCEPTION, f"{type(err)}:<'{err}'>")
            if out is None
            else (int(out.error.code), str(out.error.reason))
        )
        return {prefix + wire.POINT_ERROR: ConfigRecord({"code": code, "reason": reason})}
    return {prefix + key: record for key, record in out.content.items()}


def _points(msg: Message) -> list[int]:
    return [int(p) for p in wire.config_record(msg.content, wire.POINTS)["points"]]  # type: ignore[union-attr]


def points_client_app(cfgs: Sequence[RunConfig]) -> ClientApp:
    """The ClientApp of a federation shared by the points ``cfgs`` (point ``i`` runs with ``cfgs[i]``)."""
    apps = [make_client_app(cfg) for cfg in cfgs]
    app = ClientApp()

    def check(point: int) -> None:
        if not 0 <= point < len(apps):
            raise ValueError(f"a request for point {point} of a federation of {len(apps)} points")

    def one(point: int, msg: Message, context: Context) -> dict[str, Any]:
        own = _point_context(context, point)
        try:
            return _records(point, apps[point](_point_message(msg, point), own))
        except Exception as err:  # noqa: BLE001 - that point's failure is its answer, as Flower's engine does
            return _records(point, None, err)
        finally:
            _keep_state(context, point, own.state)

    def answer(msg: Message, context: Context) -> Message:
        reply = RecordDict()
        for point in _points(msg):
            check(point)
            for key, record in one(point, msg, context).items():
                reply[key] = record
        return Message(content=reply, reply_to=msg)

    def batch_handler(message_type: str, msgs: Sequence[Message], contexts: Sequence[Context]) -> list[Message] | None:
        """Requests to several nodes carrying the same points: each point's requests go to its own app's
        ``batch_handler`` together (``clients.app``), as that point alone would batch them; a point whose
        app declines answers node by node. ``None`` when the nodes' requests carry different points or
        no point's mode batches them."""
        points = _points(msgs[0])
        if any(_points(m) != points for m in msgs[1:]) or not any(batches(cfgs[p], message_type) for p in points):
            return None  # no point would batch (queries, evaluations, local mode): each node answers alone
        replies = [RecordDict() for _ in msgs]
        for point in points:
            check(point)
            subs = [_point_message(m, point) for m in msgs]
            owns = [_point_context(ctx, point) for ctx in contexts]
            try:
                outs = apps[point].batch_handler(message_type, subs, owns)  # type: ignore[attr-defined]
            except Exception:  # noqa: BLE001 - then each node answers this point alone
                outs = None
            for ctx, own in zip(contexts, owns, strict=True):
                _keep_state(ctx, point, own.state)
            parts = (
                [one(point, m, ctx) for m, ctx in zip(msgs, contexts, strict=True)]
                if outs is None
                else [_records(point, out) for out in outs]
            )
            for reply, part in zip(replies, parts, strict=True):
                for key, record in part.items():
                    reply[key] = record
        return [Message(content=reply, reply_to=m) for reply, m in zip(replies, msgs, strict=True)]

    app.batch_handler = batch_handler  # type: ignore[attr-defined]  # read by the local backend

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
