"""Local-DP release ClientApp handlers.

A node holds a cohort of users. On a *train* message it releases, for the
requested users, what the run's channel draws (``fl.levels.channels``): the sanitized
document embedding (sentence level), the embedding of a word-level rewrite
(word level) or a SentDP document release (document level), and the sanitized
label (label channel). M1 is derived locally from public values (``identity``,
``random``) or sent by the server (``public``, ``supervised``; ``leaky``, where the reply also
carries the unsanitized M1 gradient and no local-DP guarantee holds). On an
*evaluate* message it releases its test users' embeddings the same way, scores
the server's model on them (and, with ``clean-evaluation``, on the clean
ones: on-device inference), with the models fitted on the public data alone beside it
(the public-only line), and returns only confusion counts.

The release itself is the library's (:func:`fl.release.release`, over the node's state kept in
``context.state``: :class:`fl.release.NodeState`); the audits and attacks call the same function. Its
bookkeeping on the node:

* Each user is sanitized independently: one row of a batched mechanism call
  per document, with fresh randomness per row.
* By default a release is drawn once, kept in the node's ``context.state`` and
  re-sent in later rounds (no new cost). With ``fresh-noise-per-round`` it is
  drawn again, and the reply marks it ``fresh`` so the server accounts it.
* The node keeps its own ledger of each user's releases (``fl.release.ledger``, in
  ``context.state`` beside the cache), whatever the server asks: with cached releases a
  user releases once (a request after a new M1 or document setup is refused for the users
  who released, and allowed for those who never did; the leaky mode, which has no
  guarantee, releases again under each new M1); a draw past ``max-epsilon`` is
  refused (0 = no budget). A refusal draws no noise and is counted in the reply's
  ``refused-releases``. The same holds for test users (evaluate) and for a node that trains
  on its releases (``clients.node_training``), which release through the same function.
* Every row travels with its charge (``fl.accounting.charges``): the same
  object the node's budget check used.
* Noise seeds come from the node's secret (:class:`fl.release.NodeState`).
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Any

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, Context, Message, MetricRecord, RecordDict

from clients.node import node_cohort, public_model_predictions, torch_state
from clients.node_training import train_on_releases, trains_on_node
from fl import wire
from fl.cohort import Cohort
from fl.config import RunConfig
from fl.data.sentences import split_sentences
from fl.levels.channels import Channels, ReleaseInputs, channel_class, make_channels
from fl.levels.document import setup as document_level
from fl.levels.document.setup import DocumentSetup
from fl.levels.spec import LevelSpec
from fl.maps import input_map as maps
from fl.maps.pipeline import confusion_matrix, empty_head, predict
from fl.release import NodeState, release


def cohort_for_request(msg: Message, cfg: RunConfig, c: Cohort) -> Cohort:
    """The cohort as this request's M1 shapes it: with ``cohorts`` > 1 the server's map sets the release dimension
    of the round (``cohort-map-dim`` for the earlier cohorts, ``map-dim`` for the last: fl.maps.cohorts); any other
    width is refused. Otherwise the cohort as configured."""
    if int(cfg.server.cohorts) == 1 or wire.MAP_IN not in msg.content:
        return c
    width = int(wire.array_record(msg.content, wire.MAP_IN)["matrix"].shape[1])
    allowed = {int(cfg.release.map_dim), int(cfg.server.cohort_map_dim) or int(cfg.release.map_dim)}
    if width not in allowed:
        raise ValueError(f"cohorts: the server's map has {width} columns, expected one of {sorted(allowed)}")
    return c if width == c.map_dim else replace(c, map_dim=width, release_dim=width)


def node_map(msg: Message, map_in: str, map_seed: int, c: Cohort) -> torch.Tensor | None:
    """This round's M1: derived locally from public values, or sent by the server (public, supervised,
    leaky; a supervised M1 is affine, [d + 1, m'])."""
    if map_in not in maps.FROM_SERVER:
        return _local_map(map_in, c.encoder_dim, c.map_dim, map_seed)
    if wire.MAP_IN not in msg.content:
        raise ValueError(f"map-in = {map_in!r} but the server sent no input map")
    matrix = torch.as_tensor(wire.array_record(msg.content, wire.MAP_IN)["matrix"].numpy(), dtype=torch.float64)
    maps.check_map_shape(matrix, c.encoder_dim, c.map_dim)  # linear [d, m'] or affine [d + 1, m']
    return matrix


@lru_cache(maxsize=8)
def _local_map(kind: str, d: int, m_prime: int, seed: int) -> torch.Tensor | None:
    return maps.input_map(kind, d, m_prime, seed)


def _server_model(msg: Message, cfg: RunConfig, c: Cohort, key: str = wire.MODEL) -> torch.nn.Module | None:
    """The model the request carries under ``key`` (the run's, or the public-only one), of the kind
    ``server-model`` names; ``None`` when it carries none."""
    if key not in msg.content:
        return None
    model = empty_head(cfg.server.server_model, c.release_dim, c.encoder_dim, int(cfg.server.hidden_dim), c.num_classes)
    model.load_state_dict(torch_state(wire.array_record(msg.content, key)))
    return model.eval()


_CHANNELS: dict[tuple[Any, int, int, str | None], Channels] = {}


def node_channels(spec: LevelSpec, c: Cohort, setup: DocumentSetup | None) -> Channels:
    """The run's channels, built once per process (and per document setup)."""
    key = (spec, c.map_dim, c.num_classes, None if setup is None else setup.version())
    if key not in _CHANNELS:
        _CHANNELS[key] = make_channels(spec, c.map_dim, setup, c.num_classes)
    return _CHANNELS[key]


SETUP_KEY = "sanitas.document-setup"


def node_document_setup(msg: Message, context: Context, cfg: RunConfig) -> DocumentSetup | None:
    """The document level's public material: sent by the server once, then kept in the node's state."""
    if not channel_class(cfg.release.level).needs_public_setup:
        return None
    if wire.DOCUMENT_SETUP in msg.content:
        context.state[SETUP_KEY] = msg.content[wire.DOCUMENT_SETUP]
    if SETUP_KEY not in context.state:
        raise ValueError("document-mechanism is set but the server sent no document setup to this node")
    return DocumentSetup.from_record(wire.array_record(context.state, SETUP_KEY), cfg.release)


def handle_train(msg: Message, context: Context, cfg: RunConfig) -> Message:
    """Release sanitized embeddings and labels of the requested users."""
    c = cohort_for_request(msg, cfg, node_cohort(context, cfg))
    requested = np.asarray(msg.content[wire.CONFIG]["user-ids"], dtype=np.int64)
    rows = np.flatnonzero(np.isin(c.train_doc_user, requested))
    matrix = node_map(msg, cfg.release.map_in, cfg.release.map_seed, c)
    model = _server_model(msg, cfg, c)
    setup = node_document_setup(msg, context, cfg)
    spec = LevelSpec.from_config(cfg)
    channels = node_channels(spec, c, setup)
    state = NodeState(context.state)
    rel = release(state, spec, "train", c, rows, channels, matrix, model, setup.version() if setup else "")
    if trains_on_node(msg):  # a Flower strategy: train on the held releases, send the model (clients.node_training)
        if model is None:
            raise ValueError("train-on-releases is set but the request carries no global model")
        return train_on_releases(msg, cfg, c, state, rel, channels, model)
    out = rel.to_wire(channels, c.train_doc_user[rel.rows], c.train_doc_rows[rel.rows])
    content = RecordDict(
        {
            **out.to_content(),
            wire.METRICS: MetricRecord(
                {
                    "num-examples": int(rel.rows.size),
                    "fresh-releases": int(rel.fresh.sum()),
                    "refused-releases": rel.refused,
                }
            ),
        }
    )
    if rel.grad is not None:  # map-in = "leaky" only: an unsanitized function of raw data
        count = Array(np.array([int(rel.fresh.sum())]))
        content[wire.MAP_GRAD] = ArrayRecord({"grad": Array(rel.grad.numpy()), "count": count})
    return Message(content=content, reply_to=msg)


def handle_evaluate(msg: Message, context: Context, cfg: RunConfig) -> Message:
    """Score the model on sanitized (released) and, unless ``clean-evaluation`` is false, clean test
    embeddings; return aggregate counts only (computed from true labels: not covered by any guarantee).

    Beside it, the public-only models the request carries, on the same inputs: the server model fitted on
    the public data alone (``wire.PUBLIC_RELEASE_MODEL``) on the sanitized releases and on the clean rows in
    M1's space, and the public logistic regression (``wire.PUBLIC_MODEL``) on the clean embeddings."""
    c = cohort_for_request(msg, cfg, node_cohort(context, cfg))
    k = c.num_classes
    rows = np.arange(c.test_emb.shape[0])
    matrix = node_map(msg, cfg.release.map_in, cfg.release.map_seed, c)
    model = _server_model(msg, cfg, c)
    if model is None:
        raise ValueError("the evaluate message carries no model")
    setup = node_document_setup(msg, context, cfg)
    spec = LevelSpec.from_config(cfg)
    channels = node_channels(spec, c, setup)
    state = NodeState(context.state)
    rel = release(state, spec, "test", c, rows, channels, matrix, setup_version=setup.version() if setup else "")
    truth = c.test_y.numpy()[rel.rows]
    sanitized = predict(model, torch.as_tensor(rel.emb, dtype=torch.float32)).numpy()
    metrics: dict[str, int | float | list[int] | list[float]] = {
        "num-examples": int(rel.rows.size),
        "fresh-releases": int(rel.fresh.sum()),
        "refused-releases": rel.refused,
        "confusion": confusion_matrix(truth, sanitized, k).reshape(-1).tolist(),
    }
    public_model = _server_model(msg, cfg, c, wire.PUBLIC_RELEASE_MODEL)  # fitted on public data alone
    if public_model is not None:
        public = predict(public_model, torch.as_tensor(rel.emb, dtype=torch.float32)).numpy()
        metrics["public-confusion"] = confusion_matrix(truth, public, k).reshape(-1).tolist()
    sizes = channels.embedding.breakdown(rel.extras)  # scores by sentences per document (document level)
    if sizes is None and cfg.encoder.doc_embedding == "sentence-mean":
        # A document task run without a document mechanism (non-private, word level): the same
        # breakdown, from each test document's own sentence count, so that the lines of Meehan et
        # al.'s Figure 4 compare per k. Evaluation only, aggregate counts (not covered, as above).
        sizes = np.array([len(split_sentences(c.test_text[i])) for i in rel.rows], dtype=np.int64)
    if sizes is not None:
        metrics["confusion-by-k"] = document_level.confusion_by_k(truth, sanitized, sizes, k).reshape(-1).tolist()
    # Diagnostic from raw embeddings (off with clean-evaluation = false): the model on noise-free rows.
    rows_clean = (
        channels.embedding.clean(ReleaseInputs(c, "test", matrix), rel.rows) if cfg.release.clean_evaluation else None
    )
    if rows_clean is not None:
        clean = predict(model, rows_clean).numpy()
        metrics["clean-confusion"] = confusion_matrix(truth, clean, k).reshape(-1).tolist()
        if sizes is not None:
            metrics["clean-confusion-by-k"] = document_level.confusion_by_k(truth, clean, sizes, k).reshape(-1).tolist()
        if public_model is not None:  # public-only: the server model fitted on public data, same clean inputs
            public_head_clean = predict(public_model, rows_clean).numpy()
            metrics["public-head-clean-confusion"] = confusion_matrix(truth, public_head_clean, k).reshape(-1).tolist()
    if cfg.release.clean_evaluation and wire.PUBLIC_MODEL in msg.content:  # public-only, same clean inputs
        public_clean = public_model_predictions(msg.content, c.test_emb[rel.rows])
        metrics["public-clean-confusion"] = confusion_matrix(truth, public_clean, k).reshape(-1).tolist()
    user_ids = np.arange(c.test_users.start, c.test_users.stop, dtype=np.int64)[rel.rows]
    out = rel.to_wire(channels, user_ids, None)
    content = RecordDict({wire.METRICS: MetricRecord(metrics), **out.to_content()})
    return Message(content=content, reply_to=msg)
