"""Local mode with a Flower strategy (``strategy = "FedAvg"``, ``"FedAdam"``, ``"Krum"``, a user's own):
the node trains the downstream model on its users' releases and replies with the model.

The train request is the local one (the users to release, M1, the document setup) plus the global model
and ``train-on-releases = 1``. The node releases for the requested users exactly as when the server trains
(:func:`fl.release.release`: drawn once, re-sent from its state; the node's own ledger refuses a user's second
release after a new M1 and a release past ``max-epsilon``), then fits the
global model on every row it has released so far (:func:`fl.release.held_releases`: the released vectors
and the released labels, nothing else) for ``server-epochs`` epochs of Adam at ``learning-rate`` (with
FedProx's proximal term when the request carries ``proximal-mu``). Its reply:

* the model it trained (one ``ArrayRecord``) and one ``MetricRecord``: ``num-examples`` (the held releases,
  the strategy's weight), ``train_loss`` (the global model's loss on them before training, QFedAvg's input)
  and the release counts;
* the release's per-row charges (``fl.wire.Release`` without its rows), which the server's ledger reads as
  it reads them when the rows cross.

Everything sent is computed from the releases only, so it is post-processing of what the node would
otherwise send: the guarantee and the ledger are those of the same run trained on the server.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from flwr.app import ArrayRecord, Message, MetricRecord, RecordDict

from clients.node import batch_seed
from fl import wire
from fl.cohort import Cohort
from fl.config import RunConfig
from fl.levels.channels import Channels
from fl.maps.minibatch import server_adam
from fl.maps.pipeline import train_epochs
from fl.release import NodeRelease, NodeState, held_releases
from fl.training.proximal import proximal_mu, with_proximal_term


def trains_on_node(msg: Message) -> bool:
    """Whether a local train request asks the node to train on its releases (a Flower strategy)."""
    request = wire.config_record(msg.content, wire.CONFIG)
    return bool(wire.read_int(request, wire.TRAIN_ON_RELEASES, 0))


def charges_only(release: wire.Release, channels: Channels) -> wire.Release:
    """``release`` without its rows: the user ids, fresh flags, charges and the per-row extras the charges
    are computed from (word or sentence counts: what the ledger and the level's report read). No vector,
    candidate index or label."""
    extras = set(channels.embedding.extra_keys)
    return wire.Release(
        user_ids=release.user_ids,
        fresh=release.fresh,
        rows={k: v for k, v in release.rows.items() if k in extras},
        charges=release.charges,
        index=release.index,
    )


def train_on_releases(
    msg: Message,
    cfg: RunConfig,
    c: Cohort,
    state: NodeState,
    rel: NodeRelease,
    channels: Channels,
    model: torch.nn.Module,
) -> Message:
    """The reply of a node that trains ``model`` (the global model of the request) on its held releases."""
    x_np, y_np = held_releases(state)
    x = torch.as_tensor(x_np, dtype=torch.float32)
    y = torch.as_tensor(y_np, dtype=torch.int64)
    request = wire.config_record(msg.content, wire.CONFIG)
    server_round = wire.read_int(request, "server-round", 0)
    loss_before = float("nan")
    if y.numel():
        with torch.no_grad():
            loss_before = float(torch.nn.functional.cross_entropy(model(x), y))
        model.train()
        # Batch order only (public seed): the releases are already private.
        gen = torch.Generator().manual_seed(batch_seed(cfg, c.partition_id, server_round))
        adam = server_adam(model.parameters(), float(cfg.server.learning_rate), "cpu")
        optimizer = with_proximal_term(adam, model.parameters(), proximal_mu(request))
        train_epochs(model, optimizer, x, y, int(cfg.server.server_epochs), int(cfg.server.batch_size), gen)
    out = rel.to_wire(channels, c.train_doc_user[rel.rows], None)
    metrics = MetricRecord(
        {
            "num-examples": int(y.numel()),
            # NaN has no JSON form and breaks Flower's weighted metric mean: 0 for a node holding nothing.
            "train_loss": loss_before if math.isfinite(loss_before) else 0.0,
            "fresh-releases": int(np.asarray(rel.fresh).sum()),
            "refused-releases": int(rel.refused),
        }
    )
    content = RecordDict(
        {
            wire.MODEL: ArrayRecord(model.state_dict()),
            wire.METRICS: metrics,
            **charges_only(out, channels).to_content(),
        }
    )
    return Message(content=content, reply_to=msg)
