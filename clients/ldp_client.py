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

Privacy bookkeeping on the node:

* Each user is sanitized independently: one row of a batched mechanism call
  per document, with fresh randomness per row.
* By default a release is drawn once, kept in the node's ``context.state`` and
  re-sent in later rounds (no new cost). With ``fresh-noise-per-round`` it is
  drawn again, and the reply marks it ``fresh`` so the server accounts it.
* Every row travels with its charge (``fl.accounting.charges``): the same
  object the node's budget check used.
* Noise seeds come from the node's secret (``clients.node``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict

from clients.node import derived_seed, next_generator, node_cohort, noise_secret, public_model_predictions
from fl import config as config_mod
from fl import wire
from fl.accounting.charges import Charge
from fl.accounting.charges import costs as charge_costs
from fl.cohort import Cohort
from fl.config import RunConfig
from fl.data.sentences import split_sentences
from fl.levels.base import EmbeddingChannel
from fl.levels.channels import Channels, ReleaseInputs, channel_class, make_channels
from fl.levels.document import setup as document_level
from fl.levels.document.setup import DocumentSetup
from fl.levels.word import rewrite as rewrite_mod
from fl.maps import input_map as maps
from fl.maps.pipeline import confusion_matrix, empty_head, predict


def _rewrite(context: Context, cfg: RunConfig, purpose: str, c: Cohort, fresh: bool) -> rewrite_mod.RewrittenSplit:
    """The word-level rewrite in force for this split: draw 0, or a new draw per call with fresh noise.

    A row is released from one draw at most once (the release cache and the
    ``fresh-noise-per-round`` rule guarantee it), so every release of a row
    uses independent noise.
    """
    key = f"sanitas.word.{purpose}"
    done = wire.read_int(wire.config_record(context.state, key), "draws") if key in context.state else 0
    draw = done if fresh else 0
    context.state[key] = ConfigRecord({"draws": draw + 1 if fresh else 1})
    secret = wire.read_int(noise_secret(context, cfg.release), "secret")
    texts = c.train_text if purpose == "train" else c.test_text
    seed = derived_seed(secret, c.partition_id, f"word-{purpose}", draw)
    return rewrite_mod.rewritten_split(
        rewrite_mod.RewriteSpec.from_config(cfg), texts, purpose, (c.partition_id, c.num_partitions), draw, seed
    )


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
    model.load_state_dict(wire.array_record(msg.content, key).to_torch_state_dict())
    return model.eval()


_CHANNELS: dict[tuple[Any, int, int, str | None], Channels] = {}


def node_channels(cfg: RunConfig, c: Cohort, setup: DocumentSetup | None) -> Channels:
    """The run's channels, built once per process (and per document setup)."""
    key = (
        cfg if isinstance(cfg, config_mod.RunConfig) else id(cfg),
        c.map_dim,
        c.num_classes,
        None if setup is None else setup.version(),
    )
    if key not in _CHANNELS:
        _CHANNELS[key] = make_channels(cfg, c.map_dim, setup, c.num_classes)
    return _CHANNELS[key]


@dataclass
class NodeRelease:
    """What a node sends for one request: the rows it releases and what it refused."""

    rows: np.ndarray  # cohort rows sent (requested rows minus refused ones)
    emb: np.ndarray
    ids: np.ndarray | None  # public candidate indices (DeepCandidate), per sent row
    labels: np.ndarray | None
    fresh: np.ndarray  # per sent row: drawn now (costs privacy) or re-sent from the cache (free)
    refused: int  # fresh draws refused because the user's budget would be exceeded (re-sent if cached)
    extras: dict[str, np.ndarray]  # the channel's per-row extras of the sent rows
    grad: torch.Tensor | None = None  # leaky mode only: unsanitized dLoss/dM1

    def to_wire(self, channels: Channels, user_ids: np.ndarray, doc_ids: np.ndarray | None) -> wire.Release:
        """The release as it crosses: the channel's arrays and every row's charges."""
        n = self.rows.size
        emb_charges, emb_index = charges_by_extras(channels.embedding, n, self.extras)
        charges, index = {"embedding": emb_charges}, {"embedding": emb_index}
        if self.labels is not None:
            charges["label"], index["label"] = channels.label.charges(n)
        return wire.Release(
            user_ids=user_ids,
            fresh=self.fresh,
            rows=channels.embedding.to_record(self.emb, self.ids, self.extras),
            charges=charges,
            index=index,
            doc_ids=doc_ids,
            labels=self.labels,
        )


def charges_by_extras(
    channel: EmbeddingChannel, n: int, extras: Mapping[str, np.ndarray]
) -> tuple[list[Charge], np.ndarray]:
    """``channel.charges(n, extras)``, computed once per distinct row of extras.

    A row's charge is a function of its extras (``EmbeddingChannel.row_charges``), so
    rows with equal extras (every row, when the level has none) share one; the table
    and the index are exactly those of ``channel.charges(n, extras)``, without a
    Python step per row.
    """
    if n == 0:
        return channel.charges(0, extras)
    keys = sorted(extras)
    if not keys:
        table, index = channel.charges(1, extras)
        return table, np.full(n, index[0], dtype=np.int64)
    stacked = np.stack([np.asarray(extras[k]).reshape(n) for k in keys], axis=1)
    distinct, first, inverse = np.unique(stacked, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first)  # distinct rows in first-seen order, so the table's order is the same
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    table, index = channel.charges(order.size, {k: distinct[order, i] for i, k in enumerate(keys)})
    return table, np.asarray(index, dtype=np.int64)[rank[np.asarray(inverse).reshape(n)]]


def within_budget(context: Context, budget: float, purpose: str, users: np.ndarray, costs: np.ndarray) -> np.ndarray:
    """Which of these prospective releases (one per entry of ``users``, in order, costing
    ``costs``) fit the users' lifetime ``budget`` (``max-epsilon``; 0 = none); records the spend of
    the allowed ones.

    The node keeps each of its users' spend in its own state: the budget is
    enforced by the client, whatever the server asks.
    """
    if budget <= 0 or users.size == 0:
        return np.ones(users.size, dtype=bool)
    key = f"sanitas.spent.{purpose}"
    spent: dict[int, float] = {}
    if key in context.state:
        record = wire.array_record(context.state, key)
        spent = dict(zip(record["user"].numpy().tolist(), record["eps"].numpy().tolist(), strict=True))
    allowed = np.zeros(users.size, dtype=bool)
    for i, (u, cost) in enumerate(zip(users.tolist(), costs.tolist(), strict=True)):  # not a hot path
        if spent.get(u, 0.0) + cost <= budget * (1 + 1e-12):
            spent[u] = spent.get(u, 0.0) + cost
            allowed[i] = True
    context.state[key] = ArrayRecord(
        {
            "user": Array(np.fromiter(spent.keys(), dtype=np.int64, count=len(spent))),
            "eps": Array(np.fromiter(spent.values(), dtype=np.float64, count=len(spent))),
        }
    )
    return allowed


def release(
    context: Context,
    cfg: RunConfig,
    purpose: str,
    c: Cohort,
    rows: np.ndarray,
    channels: Channels,
    matrix: torch.Tensor | None,
    model: torch.nn.Module | None = None,
    setup_version: str = "",
) -> NodeRelease:
    """Released embeddings (and, for training, labels) of ``rows``, drawn by ``channels``.

    Rows released before under the same M1 (and document setup) are re-sent
    from the node's state unless ``fresh-noise-per-round`` is set; a new M1
    makes every cached row stale. A fresh draw that would take its user past
    ``max-epsilon`` (the channel's cost, plus the label's for training) is
    refused: the row is re-sent from the cache if it has one, else left out and
    counted. The M1 gradient is only computed in the ``leaky`` mode (and is not
    private).
    """
    key = f"sanitas.release.{purpose}"
    if purpose == "train":
        y, row_user = c.train_y, c.train_doc_user
    else:
        y, row_user = None, np.arange(c.test_users.start, c.test_users.stop, dtype=np.int64)
    n, out_dim = row_user.size, c.release_dim
    version = maps.map_version(matrix) + (f"|{setup_version}" if setup_version else "")
    if key in context.state and wire.config_record(context.state, key + ".map")["version"] == version:
        rec = wire.array_record(context.state, key)
        emb_cache, lab_cache, done = rec["emb"].numpy(), rec["lab"].numpy(), rec["done"].numpy().astype(bool)
        cand_cache = rec["cand"].numpy()
    else:
        emb_cache = np.zeros((n, out_dim), dtype=np.float32)
        lab_cache = np.full(n, -1, dtype=np.int64)
        cand_cache = np.full(n, -1, dtype=np.int64)
        done = np.zeros(n, dtype=bool)
    fresh_noise = bool(cfg.release.fresh_noise_per_round)
    want = rows if fresh_noise else rows[~done[rows]]
    budget = float(cfg.release.max_epsilon)
    if budget > 0:  # the per-row costs are only read by a budget
        extras = channels.embedding.extras(c, purpose, want)
        costs = charge_costs(*charges_by_extras(channels.embedding, want.size, extras))
        if y is not None:
            costs = costs + channels.label.costs(want.size)
        ok = within_budget(context, budget, purpose, row_user[want], costs)
    else:
        ok = np.ones(want.size, dtype=bool)
    need, denied = want[ok], want[~ok]
    grad = None
    if need.size:
        gen = next_generator(context, cfg, purpose, c.partition_id)
        inputs = ReleaseInputs(
            c,
            purpose,
            matrix,
            model,
            leaky=cfg.release.map_in == "leaky",
            rewrite=lambda: _rewrite(context, cfg, purpose, c, fresh_noise),
        )
        drawn = channels.embedding.release(inputs, need, gen)
        grad = drawn.grad
        emb_cache[need] = drawn.emb.numpy()
        if drawn.ids is not None:
            cand_cache[need] = drawn.ids
        if y is not None:
            lab_cache[need] = channels.label.release(y[need], drawn.emb, model, c.num_classes, gen)
        done[need] = True
        context.state[key] = ArrayRecord(
            {
                "emb": Array(emb_cache),
                "lab": Array(lab_cache),
                "cand": Array(cand_cache),
                "done": Array(done.astype(np.uint8)),
            }
        )
        context.state[key + ".map"] = ConfigRecord({"version": version})
    sent = rows[done[rows]]  # refused rows with an earlier release are re-sent, at no cost
    return NodeRelease(
        rows=sent,
        emb=emb_cache[sent],
        ids=cand_cache[sent],
        labels=lab_cache[sent] if y is not None else None,
        fresh=np.isin(sent, need),
        refused=int(denied.size),
        extras=channels.embedding.extras(c, purpose, sent),
        grad=grad,
    )


SETUP_KEY = "sanitas.document-setup"


def node_document_setup(msg: Message, context: Context, cfg: RunConfig) -> DocumentSetup | None:
    """The document level's public material: sent by the server once, then kept in the node's state."""
    if not channel_class(cfg).needs_public_setup:
        return None
    if wire.DOCUMENT_SETUP in msg.content:
        context.state[SETUP_KEY] = msg.content[wire.DOCUMENT_SETUP]
    if SETUP_KEY not in context.state:
        raise ValueError("document-mechanism is set but the server sent no document setup to this node")
    return DocumentSetup.from_record(wire.array_record(context.state, SETUP_KEY), cfg.release)


def handle_train(msg: Message, context: Context, cfg: RunConfig) -> Message:
    """Release sanitized embeddings and labels of the requested users."""
    c = node_cohort(context, cfg)
    requested = np.asarray(msg.content[wire.CONFIG]["user-ids"], dtype=np.int64)
    rows = np.flatnonzero(np.isin(c.train_doc_user, requested))
    matrix = node_map(msg, cfg.release.map_in, cfg.release.map_seed, c)
    model = _server_model(msg, cfg, c)
    setup = node_document_setup(msg, context, cfg)
    channels = node_channels(cfg, c, setup)
    rel = release(context, cfg, "train", c, rows, channels, matrix, model, setup.version() if setup else "")
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
    embeddings; return aggregate counts only (computed from true labels: not covered by any guarantee)."""
    c = node_cohort(context, cfg)
    k = c.num_classes
    rows = np.arange(c.test_emb.shape[0])
    matrix = node_map(msg, cfg.release.map_in, cfg.release.map_seed, c)
    model = _server_model(msg, cfg, c)
    if model is None:
        raise ValueError("the evaluate message carries no model")
    setup = node_document_setup(msg, context, cfg)
    channels = node_channels(cfg, c, setup)
    rel = release(context, cfg, "test", c, rows, channels, matrix, setup_version=setup.version() if setup else "")
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
    if cfg.release.clean_evaluation and wire.PUBLIC_MODEL in msg.content:  # public-only, same clean inputs
        public_clean = public_model_predictions(msg.content, c.test_emb[rel.rows])
        metrics["public-clean-confusion"] = confusion_matrix(truth, public_clean, k).reshape(-1).tolist()
    user_ids = np.arange(c.test_users.start, c.test_users.stop, dtype=np.int64)[rel.rows]
    out = rel.to_wire(channels, user_ids, None)
    content = RecordDict({wire.METRICS: MetricRecord(metrics), **out.to_content()})
    return Message(content=content, reply_to=msg)
