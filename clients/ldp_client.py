"""Local-DP release ClientApp.

A node holds a cohort of users. On a *query* it reports which users it holds.
On a *train* message it releases, for the requested users, their sanitized
document embeddings (M1 -> normalise -> sentence mechanism; or, with a
``word-mechanism``, the embedding of the word-level rewrite of the text,
``fl.rewrite``) and sanitized labels
(label mechanism; RR-with-prior takes its prior from public class frequencies
or from the server's model applied to the *sanitized* embedding). M1 is derived
locally from public values (``identity``, ``random``) or sent by the server
(``public``; ``leaky``, where the reply also carries the unsanitized M1
gradient and no local-DP guarantee holds). On an *evaluate* message it scores the server's model on its
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
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from fl import config as config_mod
from fl import datasets as data
from fl import maps
from fl import document_level
from fl import rewrite as rewrite_mod
from fl.document_level import DocumentSetup
from fl.cohort import Cohort, build_cohort
from fl.pipeline import ServerModel, confusion_matrix, predict
from mechanisms.rr_prior import LabelPrior

NOISE_KEY = "sanitas.noise"


def node_partition(context: Context) -> tuple[int, int]:
    """(partition id, number of partitions) of this node, from Flower's node config."""
    try:
        return int(context.node_config["partition-id"]), int(context.node_config["num-partitions"])
    except KeyError:
        raise ValueError("node_config must define partition-id and num-partitions (simulation nodes do)") from None


def _noise_secret(context: Context, cfg: Mapping[str, Any]) -> ConfigRecord:
    """This node's noise state: its secret (from the OS, or ``noise-seed``) and draw counter."""
    state = context.state
    if NOISE_KEY in state:
        return state[NOISE_KEY]
    secret = cfg["noise-seed"] if cfg["noise-seed"] >= 0 else secrets.randbits(62)
    noise = ConfigRecord({"secret": int(secret), "draws": 0})
    state[NOISE_KEY] = noise
    return noise


def _derived_seed(secret: int, partition_id: int, purpose: str, draw: int) -> int:
    material = f"{secret}|{partition_id}|{purpose}|{draw}".encode()
    return int.from_bytes(hashlib.sha256(material).digest()[:8], "little") >> 1


def _generator(context: Context, cfg: Mapping[str, Any], purpose: str, partition_id: int) -> torch.Generator:
    """A fresh generator for the next draw of this node (never seeded from data)."""
    noise = _noise_secret(context, cfg)
    draw = int(noise["draws"])
    noise["draws"] = draw + 1
    context.state[NOISE_KEY] = noise
    return torch.Generator().manual_seed(_derived_seed(int(noise["secret"]), partition_id, purpose, draw))


def _rewrite(context: Context, cfg: Mapping[str, Any], purpose: str, c: Cohort, fresh: bool
             ) -> rewrite_mod.RewrittenSplit:
    """The word-level rewrite in force for this split: draw 0, or a new draw per call with fresh noise.

    A row is released from one draw at most once (the release cache and the
    ``fresh-noise-per-round`` rule guarantee it), so every release of a row
    uses independent noise.
    """
    key = f"sanitas.word.{purpose}"
    done = int(context.state[key]["draws"]) if key in context.state else 0
    draw = done if fresh else 0
    context.state[key] = ConfigRecord({"draws": draw + 1 if fresh else 1})
    secret = int(_noise_secret(context, cfg)["secret"])
    texts = c.train_text if purpose == "train" else c.test_text
    seed = _derived_seed(secret, c.partition_id, f"word-{purpose}", draw)
    return rewrite_mod.rewritten_split(cfg, texts, purpose, (c.partition_id, c.num_partitions), draw, seed)


def node_map(msg: Message, cfg: Mapping[str, Any], c: Cohort) -> torch.Tensor | None:
    """This round's M1: derived locally from public values, or sent by the server (public/leaky)."""
    if cfg["map-in"] not in maps.FROM_SERVER:
        return _local_map(cfg["map-in"], c.encoder_dim, c.map_dim, cfg["map-seed"])
    if "map-in" not in msg.content:
        raise ValueError(f"map-in = {cfg['map-in']!r} but the server sent no input map")
    matrix = torch.as_tensor(msg.content["map-in"]["matrix"].numpy(), dtype=torch.float64)
    if tuple(matrix.shape) != (c.encoder_dim, c.map_dim):
        raise ValueError(f"the server's input map has shape {tuple(matrix.shape)}, expected "
                         f"{(c.encoder_dim, c.map_dim)}")
    return matrix


@lru_cache(maxsize=8)
def _local_map(kind: str, d: int, m_prime: int, seed: int) -> torch.Tensor | None:
    return maps.input_map(kind, d, m_prime, seed)


def _server_model(msg: Message, cfg: Mapping[str, Any], c: Cohort) -> ServerModel | None:
    if "arrays" not in msg.content:
        return None
    model = ServerModel(c.release_dim, c.encoder_dim, int(cfg["hidden-dim"]), c.num_classes)
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    return model.eval()


def label_prior(cfg: Mapping[str, Any], released: torch.Tensor, model: ServerModel | None,
                num_classes: int) -> LabelPrior | None:
    """The prior of RR-with-prior, from public data or the server model on the *sanitized* rows."""
    if cfg["label-mechanism"] != "rr_prior":
        return None
    if cfg["label-prior"] == "public":
        public = data.load(cfg).public
        counts = np.bincount(np.asarray(public["label"], dtype=np.int64), minlength=num_classes)
        probs = torch.as_tensor(counts / counts.sum(), dtype=torch.float64).expand(released.shape[0], -1)
        return LabelPrior(probs, source="public")
    if model is None:
        raise ValueError("label-prior = 'model' but the server sent no model")
    with torch.no_grad():
        probs = torch.softmax(model(released.to(torch.float32)).to(torch.float64), dim=1)
    return LabelPrior(probs, source="sanitized")


@dataclass
class Release:
    """What a node sends for one request: the rows it releases and what it refused."""

    rows: np.ndarray  # cohort rows sent (requested rows minus refused ones)
    emb: np.ndarray
    labels: np.ndarray | None
    fresh: np.ndarray  # per sent row: drawn now (costs privacy) or re-sent from the cache (free)
    refused: int  # fresh draws refused because the user's budget would be exceeded (re-sent if cached)
    grad: torch.Tensor | None = None  # leaky mode only: unsanitized dLoss/dM1
    num_words: np.ndarray | None = None  # word level: per sent row, the words its guarantee composes
    num_sentences: np.ndarray | None = None  # document level: per sent row, its k (revealed)
    candidate_ids: np.ndarray | None = None  # deepcandidate: per sent row, the chosen public candidate


def release_costs(cfg: Mapping[str, Any], c: Cohort, with_label: bool, num_words: np.ndarray,
                  num_sentences: np.ndarray | None = None, setup: DocumentSetup | None = None) -> np.ndarray:
    """Pure-LDP epsilon of one release per row (embedding, plus the label for training releases).

    At the word level a row's embedding costs its number of words times the
    per-word pure epsilon (basic composition); at the document level the whole
    document's guarantee for its number of sentences (``document_guarantee(k)``:
    the budget protects the user's entire document, not one sentence).
    """
    if setup is not None:
        assert num_sentences is not None
        mech = setup.mechanism(cfg)
        per_k = {int(k): mech.document_guarantee(int(k)).as_ldp()[0] for k in np.unique(num_sentences)}
        cost = np.array([per_k[int(k)] for k in num_sentences], dtype=np.float64)
    elif rewrite_mod.enabled(cfg):
        per_word = rewrite_mod.word_mechanism(cfg).guarantee.as_ldp()[0]
        # 0 words cost nothing (0 * inf would be nan)
        cost = np.where(num_words > 0, num_words * per_word, 0.0).astype(np.float64)
    else:
        cost = np.full(num_words.shape, config_mod.make_mechanism(cfg, "sentence", input_dim=c.map_dim)
                       .guarantee.as_ldp()[0])
    if with_label:
        cost = cost + config_mod.make_mechanism(cfg, "label").guarantee.as_ldp()[0]
    return cost


def within_budget(context: Context, cfg: Mapping[str, Any], purpose: str, users: np.ndarray,
                  costs: np.ndarray) -> np.ndarray:
    """Which of these prospective releases (one per entry of ``users``, in order, costing
    ``costs``) fit the users' lifetime budget ``max-epsilon``; records the spend of the allowed ones.

    The node keeps each of its users' spend in its own state: the budget is
    enforced by the client, whatever the server asks.
    """
    budget = cfg["max-epsilon"]
    if budget <= 0 or users.size == 0:
        return np.ones(users.size, dtype=bool)
    key = f"sanitas.spent.{purpose}"
    spent = dict(zip(*(context.state[key][k].numpy().tolist() for k in ("user", "eps")), strict=True)) \
        if key in context.state else {}
    allowed = np.zeros(users.size, dtype=bool)
    for i, (u, cost) in enumerate(zip(users.tolist(), costs.tolist(), strict=True)):  # not a hot path
        if spent.get(u, 0.0) + cost <= budget * (1 + 1e-12):
            spent[u] = spent.get(u, 0.0) + cost
            allowed[i] = True
    context.state[key] = ArrayRecord({
        "user": Array(np.fromiter(spent.keys(), dtype=np.int64, count=len(spent))),
        "eps": Array(np.fromiter(spent.values(), dtype=np.float64, count=len(spent))),
    })
    return allowed


def release(
    context: Context,
    cfg: Mapping[str, Any],
    purpose: str,
    c: Cohort,
    rows: np.ndarray,
    matrix: torch.Tensor | None,
    model: ServerModel | None = None,
    setup: DocumentSetup | None = None,
) -> Release:
    """Sanitized embeddings (and, for training, labels) of ``rows``.

    Rows released before under the same M1 are re-sent from the node's state
    unless ``fresh-noise-per-round`` is set; a new M1 makes every cached row
    stale. A fresh draw that would take its user past ``max-epsilon`` is refused:
    the row is re-sent from the cache if it has one, else left out and counted.
    The M1 gradient is only computed in the ``leaky`` mode (and is not private).
    At the document level ``setup`` (the server's public material) defines the
    mechanism, which sees each document's sentence embeddings.
    """
    key = f"sanitas.release.{purpose}"
    if purpose == "train":
        emb, y, row_user = c.train_emb, c.train_y, c.train_doc_user
    else:
        emb, y, row_user = c.test_emb, None, np.arange(c.test_users.start, c.test_users.stop, dtype=np.int64)
    n, out_dim = emb.shape[0], c.release_dim
    version = maps.map_version(matrix) + ("" if setup is None else f"|{setup.version()}")
    if key in context.state and context.state[key + ".map"]["version"] == version:
        rec = context.state[key]
        emb_cache, lab_cache, done = rec["emb"].numpy(), rec["lab"].numpy(), rec["done"].numpy().astype(bool)
        cand_cache = rec["cand"].numpy()
    else:
        emb_cache = np.zeros((n, out_dim), dtype=np.float32)
        lab_cache = np.full(n, -1, dtype=np.int64)
        cand_cache = np.full(n, -1, dtype=np.int64)
        done = np.zeros(n, dtype=bool)
    want = rows if cfg["fresh-noise-per-round"] else rows[~done[rows]]
    word_level = rewrite_mod.enabled(cfg)
    num_words = (c.train_words if purpose == "train" else c.test_words) if word_level \
        else np.zeros(n, dtype=np.int64)
    docs = (c.train_docs if purpose == "train" else c.test_docs) if setup is not None else None
    num_sentences = docs.num_sentences if docs is not None else None
    costs = release_costs(cfg, c, y is not None, num_words[want],
                          None if num_sentences is None else num_sentences[want], setup)
    ok = within_budget(context, cfg, purpose, row_user[want], costs)
    need, denied = want[ok], want[~ok]
    grad = None
    if need.size:
        gen = _generator(context, cfg, purpose, c.partition_id)
        if setup is not None:  # document level: one release per document from its sentences
            assert docs is not None
            released, chosen = setup.release(cfg, docs.select(need), gen)
            if chosen is not None:
                cand_cache[need] = chosen.numpy()
        else:
            mech = config_mod.make_mechanism(cfg, "sentence", input_dim=c.map_dim)
            # Word level: the embedding of the rewritten text (sentence-mechanism is then "none").
            source = _rewrite(context, cfg, purpose, c, cfg["fresh-noise-per-round"]).emb[need] if word_level \
                else emb[need]
            if cfg["map-in"] == "leaky" and purpose == "train":
                assert matrix is not None and model is not None, "the leaky mode needs M1 and the model"
                released, grad = maps.leaky_map_gradient(matrix, model, source, y[need], mech, gen)
            else:
                released = mech.sanitize(maps.apply_input_map(source, matrix), generator=gen)
        emb_cache[need] = released.to(torch.float32).numpy()
        if y is not None:
            labeler = config_mod.make_mechanism(cfg, "label")
            prior = label_prior(cfg, released, model, c.num_classes)
            extra = {"prior": prior} if prior is not None else {}
            lab_cache[need] = labeler.sanitize(y[need], c.num_classes, generator=gen, **extra).numpy()
        done[need] = True
        context.state[key] = ArrayRecord({"emb": Array(emb_cache), "lab": Array(lab_cache),
                                          "cand": Array(cand_cache), "done": Array(done.astype(np.uint8))})
        context.state[key + ".map"] = ConfigRecord({"version": version})
    sent = rows[done[rows]]  # refused rows with an earlier release are re-sent, at no cost
    return Release(
        rows=sent,
        emb=emb_cache[sent],
        labels=lab_cache[sent] if y is not None else None,
        fresh=np.isin(sent, need),
        refused=int(denied.size),
        grad=grad,
        num_words=num_words[sent] if word_level else None,
        num_sentences=None if num_sentences is None else num_sentences[sent],
        candidate_ids=cand_cache[sent] if setup is not None and setup.kind == "deepcandidate" else None,
    )


def _guarantees(cfg: Mapping[str, Any], c: Cohort) -> ConfigRecord:
    """Per-release guarantees by channel; at the word level also ``"word"``, per word
    (a release then composes it over its ``num-words``)."""
    record = {
        channel: json.dumps(config_mod.make_mechanism(cfg, channel, input_dim=c.map_dim).guarantee.to_dict())
        for channel in ("sentence", "label")
    }
    if rewrite_mod.enabled(cfg):
        record["word"] = json.dumps(rewrite_mod.word_mechanism(cfg).guarantee.to_dict())
    return ConfigRecord(record)


def _release_arrays(rel: Release, arrays: dict[str, Array]) -> ArrayRecord:
    """The reply's release record, with the per-row word counts at the word level, the per-row
    sentence counts at the document level, and DeepCandidate's candidate indices *instead of*
    embeddings (the server looks the public candidates up)."""
    if rel.num_words is not None:
        arrays["num-words"] = Array(rel.num_words.astype(np.int64))
    if rel.num_sentences is not None:
        arrays["num-sentences"] = Array(rel.num_sentences.astype(np.int64))
    if rel.candidate_ids is not None:
        arrays.pop("embeddings", None)
        arrays["candidate-ids"] = Array(rel.candidate_ids.astype(np.int64))
    return ArrayRecord(arrays)


SETUP_KEY = "sanitas.document-setup"


def node_document_setup(msg: Message, context: Context, cfg: Mapping[str, Any]) -> DocumentSetup | None:
    """The document level's public material: sent by the server once, then kept in the node's state."""
    if not document_level.enabled(cfg):
        return None
    if "document-setup" in msg.content:
        context.state[SETUP_KEY] = msg.content["document-setup"]
    if SETUP_KEY not in context.state:
        raise ValueError("document-mechanism is set but the server sent no document setup to this node")
    return _parse_setup(context.state[SETUP_KEY], cfg)


def _parse_setup(record: ArrayRecord, cfg: Mapping[str, Any]) -> DocumentSetup:
    return DocumentSetup.from_record(record, cfg)


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
        "encoder-dim": c.encoder_dim, "map-dim": c.map_dim, "release-dim": c.release_dim,
    })
    return Message(content=RecordDict({"cohort": info}), reply_to=msg)


def handle_train(msg: Message, context: Context, cfg: Mapping[str, Any]) -> Message:
    """Release sanitized embeddings and labels of the requested users."""
    c = _cohort(context, cfg)
    requested = np.asarray(msg.content["config"]["user-ids"], dtype=np.int64)
    rows = np.flatnonzero(np.isin(c.train_doc_user, requested))
    matrix, model = node_map(msg, cfg, c), _server_model(msg, cfg, c)
    rel = release(context, cfg, "train", c, rows, matrix, model, node_document_setup(msg, context, cfg))
    content = RecordDict({
        "release": _release_arrays(rel, {
            "user-ids": Array(c.train_doc_user[rel.rows]),
            "doc-ids": Array(c.train_doc_rows[rel.rows]),
            "embeddings": Array(rel.emb),
            "labels": Array(rel.labels),
            "fresh": Array(rel.fresh.astype(np.uint8)),
        }),
        "metrics": MetricRecord({"num-examples": int(rel.rows.size), "fresh-releases": int(rel.fresh.sum()),
                                 "refused-releases": rel.refused}),
        "guarantees": _guarantees(cfg, c),
    })
    if rel.grad is not None:  # map-in = "leaky" only: an unsanitized function of raw data
        count = Array(np.array([int(rel.fresh.sum())]))
        content["map-in-grad"] = ArrayRecord({"grad": Array(rel.grad.numpy()), "count": count})
    return Message(content=content, reply_to=msg)


def handle_evaluate(msg: Message, context: Context, cfg: Mapping[str, Any]) -> Message:
    """Score the model on sanitized (released) and, unless ``clean-evaluation`` is false, clean test
    embeddings; return aggregate counts only (computed from true labels: not covered by any guarantee)."""
    c = _cohort(context, cfg)
    k = c.num_classes
    rows = np.arange(c.test_emb.shape[0])
    matrix, model = node_map(msg, cfg, c), _server_model(msg, cfg, c)
    if model is None:
        raise ValueError("the evaluate message carries no model")
    setup = node_document_setup(msg, context, cfg)
    rel = release(context, cfg, "test", c, rows, matrix, setup=setup)
    truth = c.test_y.numpy()[rel.rows]
    sanitized = predict(model, torch.as_tensor(rel.emb, dtype=torch.float32)).numpy()
    metrics = {
        "num-examples": int(rel.rows.size),
        "fresh-releases": int(rel.fresh.sum()),
        "refused-releases": rel.refused,
        "confusion": confusion_matrix(truth, sanitized, k).reshape(-1).tolist(),
    }
    clean_evaluation = bool(cfg["clean-evaluation"])  # diagnostics from raw embeddings, off on request
    if setup is not None:  # the model on the clean document embedding (diagnostic); scores by k
        assert c.test_docs is not None and rel.num_sentences is not None
        metrics["confusion-by-k"] = document_level.confusion_by_k(truth, sanitized, rel.num_sentences, k) \
            .reshape(-1).tolist()
        if clean_evaluation:
            clean = predict(model, setup.clean(c.test_docs.select(rel.rows))).numpy()
            metrics["clean-confusion"] = confusion_matrix(truth, clean, k).reshape(-1).tolist()
            metrics["clean-confusion-by-k"] = document_level.confusion_by_k(truth, clean, rel.num_sentences, k) \
                .reshape(-1).tolist()
    elif clean_evaluation and c.release_dim == c.map_dim:  # diagnostic: the model on n(M1 x) without noise
        clean = predict(model, maps.apply_input_map(c.test_emb[rel.rows], matrix).to(torch.float32)).numpy()
        metrics["clean-confusion"] = confusion_matrix(truth, clean, k).reshape(-1).tolist()
    content = RecordDict({
        "metrics": MetricRecord(metrics),
        "release": _release_arrays(rel, {
            "user-ids": Array(np.arange(c.test_users.start, c.test_users.stop, dtype=np.int64)[rel.rows]),
            "fresh": Array(rel.fresh.astype(np.uint8)),
        }),
        "guarantees": _guarantees(cfg, c),
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

    from .central_client import central_clipping_mod, handle_central_evaluate, handle_central_train

    @app.train(mods=[central_clipping_mod])  # fixedclipping_mod when the server sends a clipping norm
    def train(msg: Message, context: Context) -> Message:
        cfg = resolved(context)
        return (handle_central_train if cfg["mode"] == "central" else handle_train)(msg, context, cfg)

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        cfg = resolved(context)
        return (handle_central_evaluate if cfg["mode"] == "central" else handle_evaluate)(msg, context, cfg)

    return app


app = make_client_app()
