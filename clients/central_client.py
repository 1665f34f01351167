"""Central-DP (DP-FedAvg) ClientApp handlers (``mode = "central"``).

A node holds the same cohort of users as in local mode (``fl.cohort``). On a
*train* message it trains the downstream model on its users' **raw**
(unsanitized) embeddings: M1 from public values (``random`` or ``identity``),
normalise, then ``ServerModel`` (M2 + tanh + MLP), for ``local-epochs``
epochs of Adam at ``learning-rate``, starting from the global weights, and
returns the updated weights with ``num-examples``: a standard Flower
Message-API FedAvg client. There is no local sanitizer: privacy comes from the
server's clipping and Gaussian noise (``strategies.central``), or from the
client-side clipping mod plus the server's noise.

Every reply carries ``uniform-weight = 1.0``, the key the server's FedAvg
weights by, because the noise ``z * C / k`` is calibrated for an unweighted
average (``fl.accounting.central``). The server uses no other training metric.

On an *evaluate* message the node scores the global model on its test users'
raw embeddings and returns confusion counts only (simulation diagnostics, not
covered by the DP guarantee, as in local mode).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import torch
from flwr.app import ArrayRecord, Context, Message, MessageType, MetricRecord, RecordDict
from flwr.clientapp.mod import fixedclipping_mod
from flwr.clientapp.typing import ClientAppCallable
from flwr.supercore.differential_privacy import KEY_CLIPPING_NORM

from fl import maps
from fl.accounting.central import UNIFORM_WEIGHT_KEY, check_central_config
from fl.cohort import Cohort
from fl.pipeline import ServerModel, confusion_matrix, predict, train_epochs

from .node import node_cohort


def _cohort(context: Context, cfg: Mapping[str, Any]) -> Cohort:
    return node_cohort(context, cfg)  # the same node -> cohort mapping as local mode


@lru_cache(maxsize=8)
def _map(kind: str, d: int, m_prime: int, seed: int) -> torch.Tensor | None:
    return maps.input_map(kind, d, m_prime, seed)


def central_features(cfg: Mapping[str, Any], c: Cohort, emb: torch.Tensor) -> torch.Tensor:
    """n(M1 x) of raw embeddings, float32 (M1 from the public seed, or none)."""
    check_central_config(cfg)
    matrix = _map(cfg["map-in"], c.encoder_dim, c.map_dim, cfg["map-seed"])
    return maps.apply_input_map(emb, matrix).to(torch.float32)


def global_model(msg: Message, cfg: Mapping[str, Any], c: Cohort) -> ServerModel:
    """The server's current model (input dimension m' = M1's output: no sanitizer in between)."""
    if "arrays" not in msg.content:
        raise ValueError("the central-mode message carries no model arrays")
    model = ServerModel(c.map_dim, c.encoder_dim, int(cfg["hidden-dim"]), c.num_classes)
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    return model


def handle_central_train(msg: Message, context: Context, cfg: Mapping[str, Any]) -> Message:
    """Local training from the global weights on the node's raw embeddings; reply with the new weights."""
    c = _cohort(context, cfg)
    model = global_model(msg, cfg, c)
    x = central_features(cfg, c, c.train_emb)
    y = c.train_y
    server_round = int(msg.content["config"].get("server-round", 0)) if "config" in msg.content else 0
    # Batch order only (public seed): the privacy comes from the server's clipping and noise.
    gen = torch.Generator().manual_seed(int(cfg["seed"]) * 1_000_003 + c.partition_id * 1009 + server_round)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg["learning-rate"])
    if x.shape[0]:
        train_epochs(model, optimizer, x, y, int(cfg["local-epochs"]), int(cfg["batch-size"]), gen)
    content = RecordDict(
        {
            "arrays": ArrayRecord(model.state_dict()),
            "metrics": MetricRecord({"num-examples": int(x.shape[0]), UNIFORM_WEIGHT_KEY: 1.0}),
        }
    )
    return Message(content=content, reply_to=msg)


def handle_central_evaluate(msg: Message, context: Context, cfg: Mapping[str, Any]) -> Message:
    """Score the global model on the node's test users' raw embeddings; return confusion counts."""
    c = _cohort(context, cfg)
    model = global_model(msg, cfg, c).eval()
    truth = c.test_y.numpy()
    pred = predict(model, central_features(cfg, c, c.test_emb)).numpy()
    metrics = MetricRecord(
        {
            "num-examples": int(truth.size),
            UNIFORM_WEIGHT_KEY: 1.0,
            "confusion": confusion_matrix(truth, pred, c.num_classes).reshape(-1).tolist(),
        }
    )
    return Message(content=RecordDict({"metrics": metrics}), reply_to=msg)


def central_clipping_mod(msg: Message, context: Context, call_next: ClientAppCallable) -> Message:
    """Flower's ``fixedclipping_mod`` on training messages that carry a clipping norm.

    ``DifferentialPrivacyClientSideFixedClipping`` puts the norm in the train
    config (``central-clipping = "client"``); other messages (local mode,
    server-side clipping) pass through unchanged.
    """
    if msg.metadata.message_type.split(".")[0] == MessageType.TRAIN:
        configs = list(msg.content.config_records.values())
        if len(configs) == 1 and KEY_CLIPPING_NORM in configs[0]:
            return fixedclipping_mod(msg, context, call_next)
    return call_next(msg, context)
