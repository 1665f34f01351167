"""Local-DP release ClientApp.

A node holds a cohort of users. On a *query* it reports which users it holds.
On a *train* message it releases, for the requested users, their sanitized
document embeddings (M1 -> normalise -> sentence mechanism) and sanitized labels
(label mechanism). On an *evaluate* message it scores the server's model on its
test users' sanitized embeddings (and, as a diagnostic, on the clean ones) and
returns only confusion counts.

Privacy bookkeeping on the node:

* Each user is sanitized independently: one row of a batched mechanism call
  per document, with fresh randomness per row.
* By default a release is drawn once, kept in the node's ``context.state`` and
  re-sent in later rounds (no new cost). With ``fresh-noise-per-round`` it is
  drawn again, and the reply marks it ``fresh`` so the server accounts it.
* Noise seeds: with ``noise-seed = -1`` each node draws a secret seed from the
  OS and keeps it in its state; the server never sees it. A fixed
  ``noise-seed >= 0`` makes simulations reproducible; a server that knows it
  could remove the noise, so it is for simulation only.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from fl import config as config_mod
from fl.cohort import Cohort, build_cohort
from fl.pipeline import ServerModel, confusion_matrix, predict

NOISE_KEY = "sanitas.noise"


def node_partition(context: Context) -> tuple[int, int]:
    """(partition id, number of partitions) of this node, from Flower's node config."""
    try:
        return int(context.node_config["partition-id"]), int(context.node_config["num-partitions"])
    except KeyError:
        raise ValueError("node_config must define partition-id and num-partitions (simulation nodes do)") from None


def _generator(context: Context, cfg: Mapping[str, Any], purpose: str, partition_id: int) -> torch.Generator:
    """A fresh generator for the next draw of this node (never seeded from data)."""
    state = context.state
    if NOISE_KEY in state:
        noise = state[NOISE_KEY]
    else:
        secret = cfg["noise-seed"] if cfg["noise-seed"] >= 0 else secrets.randbits(62)
        noise = ConfigRecord({"secret": int(secret), "draws": 0})
    draw = int(noise["draws"])
    noise["draws"] = draw + 1
    state[NOISE_KEY] = noise
    material = f"{noise['secret']}|{partition_id}|{purpose}|{draw}".encode()
    seed = int.from_bytes(hashlib.sha256(material).digest()[:8], "little") >> 1
    return torch.Generator().manual_seed(seed)


def release(
    context: Context,
    cfg: Mapping[str, Any],
    purpose: str,
    x: torch.Tensor,
    y: torch.Tensor | None,
    rows: np.ndarray,
    num_classes: int,
    partition_id: int,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Sanitized embeddings (and labels) of ``rows``; returns (emb, labels, fresh mask).

    Rows released before are re-sent from the node's state unless
    ``fresh-noise-per-round`` is set. ``x`` holds all of the cohort's rows.
    """
    key = f"sanitas.release.{purpose}"
    n, m_prime = x.shape
    if key in context.state:
        rec = context.state[key]
        emb_cache, lab_cache, done = rec["emb"].numpy(), rec["lab"].numpy(), rec["done"].numpy().astype(bool)
    else:
        emb_cache = np.zeros((n, m_prime), dtype=np.float32)
        lab_cache = np.full(n, -1, dtype=np.int64)
        done = np.zeros(n, dtype=bool)
    need = rows if cfg["fresh-noise-per-round"] else rows[~done[rows]]
    if need.size:
        gen = _generator(context, cfg, purpose, partition_id)
        sentence = config_mod.make_mechanism(cfg, "sentence")
        emb_cache[need] = sentence.sanitize(x[need], generator=gen).to(torch.float32).numpy()
        if y is not None:
            labeler = config_mod.make_mechanism(cfg, "label")
            lab_cache[need] = labeler.sanitize(y[need], num_classes, generator=gen).numpy()
        done[need] = True
        context.state[key] = ArrayRecord(
            {"emb": Array(emb_cache), "lab": Array(lab_cache), "done": Array(done.astype(np.uint8))}
        )
    fresh = np.isin(rows, need)
    return emb_cache[rows], (lab_cache[rows] if y is not None else None), fresh


def _guarantees(cfg: Mapping[str, Any]) -> ConfigRecord:
    return ConfigRecord({
        channel: json.dumps(config_mod.make_mechanism(cfg, channel).guarantee.to_dict())
        for channel in ("sentence", "label")
    })


def _cohort(context: Context, cfg: Mapping[str, Any]) -> Cohort:
    pid, num = node_partition(context)
    return build_cohort(cfg, pid, num)


def handle_query(msg: Message, context: Context, cfg: Mapping[str, Any]) -> Message:
    """Report the users this node holds and the shapes the server model needs."""
    c = _cohort(context, cfg)
    info = MetricRecord({
        "train-users-lo": c.train_users.start, "train-users-hi": c.train_users.stop,
        "num-train-users": c.num_train_users, "num-train-docs": int(c.train_doc_user.size),
        "test-users-lo": c.test_users.start, "test-users-hi": c.test_users.stop,
        "num-test-users": c.num_test_users, "num-classes": c.num_classes,
        "encoder-dim": c.encoder_dim, "release-dim": c.release_dim,
    })
    return Message(content=RecordDict({"cohort": info}), reply_to=msg)


def handle_train(msg: Message, context: Context, cfg: Mapping[str, Any]) -> Message:
    """Release sanitized embeddings and labels of the requested users."""
    c = _cohort(context, cfg)
    requested = np.asarray(msg.content["config"]["user-ids"], dtype=np.int64)
    rows = np.flatnonzero(np.isin(c.train_doc_user, requested))
    emb, labels, fresh = release(context, cfg, "train", c.train_x, c.train_y, rows, c.num_classes, c.partition_id)
    content = RecordDict({
        "release": ArrayRecord({
            "user-ids": Array(c.train_doc_user[rows]),
            "doc-ids": Array(c.train_doc_rows[rows]),
            "embeddings": Array(emb),
            "labels": Array(labels),
            "fresh": Array(fresh.astype(np.uint8)),
        }),
        "metrics": MetricRecord({"num-examples": int(rows.size), "fresh-releases": int(fresh.sum())}),
        "guarantees": _guarantees(cfg),
    })
    return Message(content=content, reply_to=msg)


def handle_evaluate(msg: Message, context: Context, cfg: Mapping[str, Any]) -> Message:
    """Score the model on sanitized (released) and clean test embeddings; return counts only."""
    c = _cohort(context, cfg)
    k = c.num_classes
    rows = np.arange(c.test_x.shape[0])
    emb, _, fresh = release(context, cfg, "test", c.test_x, None, rows, k, c.partition_id)
    model = ServerModel(c.release_dim, c.encoder_dim, int(cfg["hidden-dim"]), k)
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    truth = c.test_y.numpy()
    sanitized = predict(model, torch.as_tensor(emb, dtype=torch.float32)).numpy()
    clean = predict(model, c.test_x.to(torch.float32)).numpy()
    content = RecordDict({
        "metrics": MetricRecord({
            "num-examples": int(rows.size),
            "fresh-releases": int(fresh.sum()),
            "confusion": confusion_matrix(truth, sanitized, k).reshape(-1).tolist(),
            "clean-confusion": confusion_matrix(truth, clean, k).reshape(-1).tolist(),
        }),
        "release": ArrayRecord({
            "user-ids": Array(np.arange(c.test_users.start, c.test_users.stop, dtype=np.int64)),
            "fresh": Array(fresh.astype(np.uint8)),
        }),
        "guarantees": _guarantees(cfg),
    })
    return Message(content=content, reply_to=msg)


def make_client_app(overrides: Mapping[str, Any] | None = None) -> ClientApp:
    """The ClientApp; ``overrides`` (from ``sanitas run``) take precedence over the run config."""
    app = ClientApp()

    def resolved(context: Context) -> dict[str, Any]:
        return config_mod.resolve({**dict(context.run_config), **dict(overrides or {})})

    @app.query()
    def query(msg: Message, context: Context) -> Message:
        return handle_query(msg, context, resolved(context))

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        return handle_train(msg, context, resolved(context))

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        return handle_evaluate(msg, context, resolved(context))

    return app


app = make_client_app()
