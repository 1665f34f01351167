"""A node's release of the rows of its cohort, drawn from its state (:class:`~fl.release.state.NodeState`).

Guarantees, whoever calls it (the ClientApp, an audit, an attack):

* each user is sanitized independently: one row of a batched mechanism call per document, with fresh
  randomness per row, from a generator derived from the node's secret (never from data);
* a row is drawn once and re-sent from the state in later rounds (no new cost) unless
  ``fresh-noise-per-round`` is set; a new M1 (or document setup) makes every cached row stale, and the
  node's own ledger (:mod:`fl.release.ledger`) then refuses to draw again for a user who has released:
  one release per user, whatever the server asks (the leaky mode aside);
* a fresh draw that would take its user past ``max-epsilon`` is refused (re-sent from the cache if it
  has one, else left out and counted);
* every fresh draw is entered in the node's ledger before its noise is drawn, with its charge
  (``fl.accounting.charges``): the same object the row carries and the server's ledger reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord

from fl import wire
from fl.accounting.charges import Charge
from fl.cohort import Cohort
from fl.levels.base import EmbeddingChannel
from fl.levels.channels import Channels, ReleaseInputs
from fl.levels.spec import LevelSpec
from fl.levels.word import rewrite as rewrite_mod
from fl.maps import input_map as maps
from fl.release.ledger import charge_terms
from fl.release.state import NodeState, derived_seed


@dataclass
class NodeRelease:
    """What a node sends for one request: the rows it releases and what it refused."""

    rows: np.ndarray  # cohort rows sent (requested rows minus refused ones)
    emb: np.ndarray
    ids: np.ndarray | None  # public candidate indices (DeepCandidate), per sent row
    labels: np.ndarray | None
    fresh: np.ndarray  # per sent row: drawn now (costs privacy) or re-sent from the cache (free)
    refused: int  # fresh draws the node's ledger refused: a user's second release, or past its budget
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


def _rewrite(state: NodeState, spec: LevelSpec, purpose: str, c: Cohort, fresh: bool) -> rewrite_mod.RewrittenSplit:
    """The word-level rewrite in force for this split: draw 0, or a new draw per call with fresh noise.

    A row is released from one draw at most once (the release cache and the
    ``fresh-noise-per-round`` rule guarantee it), so every release of a row
    uses independent noise.
    """
    draw = state.next_rewrite_draw(purpose, fresh)
    texts = c.train_text if purpose == "train" else c.test_text
    seed = derived_seed(state.secret(spec.release.noise_seed), c.partition_id, f"word-{purpose}", draw)
    return rewrite_mod.rewritten_split(spec, texts, purpose, (c.partition_id, c.num_partitions), draw, seed)


def release(
    state: NodeState,
    spec: LevelSpec,
    purpose: str,
    c: Cohort,
    rows: np.ndarray,
    channels: Channels,
    matrix: torch.Tensor | None,
    model: torch.nn.Module | None = None,
    setup_version: str = "",
) -> NodeRelease:
    """Released embeddings (and, for training, labels) of the cohort ``rows``, drawn by ``channels``.

    Rows released before under the same M1 (and document setup) are re-sent from the state unless
    ``fresh-noise-per-round`` is set. Every fresh draw is first put to the node's ledger
    (:meth:`fl.release.ledger.NodeLedger.admit`), which refuses a second release of a user with cached
    releases (after a new M1 or document setup; not in the leaky mode) and a draw that would take its user
    past ``max-epsilon`` (the channel's cost, plus the label's for training): a refused row is re-sent
    from the cache if it has one, else left out and counted, and no noise is drawn for it. The M1
    gradient is only computed in the ``leaky`` mode (and is not private).

    Parameters
    ----------
    state : NodeState
        The node's own state: its noise secret and counters, spent budgets and cached releases (read and
        updated).
    spec : LevelSpec
        The run's level inputs: ``release`` (``fresh-noise-per-round``, ``max-epsilon``, ``map-in``,
        ``noise-seed``) and, at the word level, what the rewrite reads.
    purpose : str
        ``"train"`` (releases embeddings and labels) or ``"test"`` (embeddings only).
    c : Cohort
        The node's users.
    rows : np.ndarray
        The cohort rows to release.
    channels : Channels
        The run's channels.
    matrix : torch.Tensor or None
        M1 (``None``: the identity).
    model : torch.nn.Module, optional
        The server model (the leaky mode's gradient, RR-with-prior's model prior).
    setup_version : str, optional
        The document setup's version (a new one makes the cached rows stale).
    """
    cfg = spec.release
    key = f"sanitas.release.{purpose}"
    records = state.records
    if purpose == "train":
        y, row_user = c.train_y, c.train_doc_user
    else:
        y, row_user = None, np.arange(c.test_users.start, c.test_users.stop, dtype=np.int64)
    n, out_dim = row_user.size, c.release_dim
    version = maps.map_version(matrix) + (f"|{setup_version}" if setup_version else "")
    if key in records and wire.config_record(records, key + ".map")["version"] == version:
        rec = wire.array_record(records, key)
        emb_cache, lab_cache, done = rec["emb"].numpy(), rec["lab"].numpy(), rec["done"].numpy().astype(bool)
        cand_cache = rec["cand"].numpy()
    else:
        emb_cache = np.zeros((n, out_dim), dtype=np.float32)
        lab_cache = np.full(n, -1, dtype=np.int64)
        cand_cache = np.full(n, -1, dtype=np.int64)
        done = np.zeros(n, dtype=bool)
    fresh_noise = bool(cfg.fresh_noise_per_round)
    want = rows if fresh_noise else rows[~done[rows]]
    eps, delta = _row_terms(channels, c, purpose, want, with_label=y is not None)
    ok = state.ledger.admit(
        purpose,
        row_user[want],
        eps,
        delta,
        version,
        once=not fresh_noise,
        new_space_ok=cfg.map_in == "leaky",  # M1 moves every round there; no local-DP guarantee holds
        budget=float(cfg.max_epsilon),
    )
    need, denied = want[ok], want[~ok]
    grad = None
    if need.size:
        gen = state.next_generator(cfg.noise_seed, purpose, c.partition_id, bool(cfg.secure_rng))
        inputs = ReleaseInputs(
            c,
            purpose,
            matrix,
            model,
            leaky=cfg.map_in == "leaky",
            rewrite=lambda: _rewrite(state, spec, purpose, c, fresh_noise),
        )
        drawn = channels.embedding.release(inputs, need, gen)
        grad = drawn.grad
        emb_cache[need] = drawn.emb.numpy()
        if drawn.ids is not None:
            cand_cache[need] = drawn.ids
        if y is not None:
            lab_cache[need] = channels.label.release(y[need], drawn.emb, model, c.num_classes, gen)
        done[need] = True
        records[key] = ArrayRecord(
            {
                "emb": Array(emb_cache),
                "lab": Array(lab_cache),
                "cand": Array(cand_cache),
                "done": Array(done.astype(np.uint8)),
            }
        )
        records[key + ".map"] = ConfigRecord({"version": version})
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


def _row_terms(
    channels: Channels, c: Cohort, purpose: str, rows: np.ndarray, with_label: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Per-row (epsilon, delta) of releasing ``rows`` (the embedding channel's charge, plus the label's for
    training): from the charges the rows would carry (known before the draw)."""
    extras = channels.embedding.extras(c, purpose, rows)
    eps, delta = charge_terms(*charges_by_extras(channels.embedding, rows.size, extras))
    if with_label:
        label_eps, label_delta = charge_terms(*channels.label.charges(rows.size))
        eps, delta = eps + label_eps, delta + label_delta
    return eps, delta


def held_releases(state: NodeState) -> tuple[np.ndarray, np.ndarray]:
    """Every training row this node has released, and its released label, as :func:`release` keeps them: call it
    right after :func:`release` for the request's M1 (which resets the rows drawn under another map), so they are
    the rows of the current map (``fresh-noise-per-round``: each row's latest draw). Empty when it has released
    none. What a node trains on when the strategy trains on the nodes: a function of the releases only, so
    whatever it sends from them is post-processing."""
    key = "sanitas.release.train"
    if key not in state.records:
        return np.zeros((0, 0), dtype=np.float32), np.zeros(0, dtype=np.int64)
    rec = wire.array_record(state.records, key)
    done = rec["done"].numpy().astype(bool)
    return rec["emb"].numpy()[done], rec["lab"].numpy()[done]
