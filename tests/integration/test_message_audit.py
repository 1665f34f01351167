"""Message audit (issue 15, item 3): what crosses from the nodes to the server is declared, and is not raw.

Real small runs of the Sanitas ServerApp body (``strategies.server_app.run_server``) and the real
ClientApp (``clients.app.make_client_app``, its mods included) exchange every message through a grid
in this process: each node keeps its own ``Context`` (as in Flower's simulation, a node's state
persists across rounds) and every message and reply goes through Flower's protobuf serialisation
(``flwr.common.serde``), so the server reads exactly the bytes a deployment would carry. Ray is left
out only to keep the runs fast (a Ray run costs about a minute on 2 busy cores); the messages are the
same.

For each level of the local mode (sentence with an RR label channel, word, document with DeepCandidate
and with truncation) and both units of the central mode, every reply is checked:

1. every record and every key is declared in ``fl.wire.DECLARED_FIELDS`` for that message type and
   scope (a field added without a declaration fails here);
2. no raw content crosses: no row of any float array or float metric list is within ``TOL`` of a
   user's clean encoder embedding, of its clean mapped embedding n(M1 x), or (document level) of one
   of its sentence embeddings; no string and no array's bytes contain a user's raw text; no integer
   array equals the users' raw labels, except ``labels`` when the label channel is ``none`` (labels in
   the clear, a declared choice);
3. each field is what its kind says: sanitizer outputs have the release's shape (Purkayastha's angles
   to the clean rows follow its distribution at the configured epsilon; RR labels differ from the raw
   ones), candidate indices index the public pool the server sent, the user-level central reply is one
   array per model parameter whose norm is at most clip x (users in the sum), the node-level update
   is clipped, charge metadata matches the charges table and the users' public counts, row ids are
   the requested users and their documents, aggregates are counts that add up, cohort info matches
   the node's cohort.

Negative tests show the audit can fail: a client whose train handler is patched to add an undeclared
per-user array, to send the clean mapped embeddings as its release and its raw labels under RR is
caught on all three counts; raw text put into a declared string or into an array's bytes is found; a
leaky-mode run (map-in = "leaky") is flagged for its unsanitized gradient unless the audit is told
the run allows unaccounted leakage.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.common.serde import message_from_proto, message_to_proto
from flwr.serverapp import Grid

from clients.node import node_cohort
from fl import config as config_mod
from fl import wire
from fl.accounting.central import UNIFORM_WEIGHT_KEY
from fl.accounting.charges import Charge
from fl.cohort import Cohort, population_sizes, word_counts
from fl.data.partition import num_nodes
from fl.maps import input_map as maps
from fl.training.user_updates import poisson_sample
from mechanisms.privunit import PrivUnit
from tests.support.grids import task_identity  # noqa: F401  (autouse: messages need a task identity)
from tests.support.node_files import write_node_files

TOL = 1e-3  # a released row this close (L2) to a clean row counts as the clean row

BASE = {
    "dataset": "sst2",
    "train-size": 40,
    "test-size": 20,
    "users-per-node": 10,
    "num-server-rounds": 2,
    "fraction-train": 0.5,
    "server-epochs": 1,
    "hidden-dim": 32,
    "noise-seed": 0,
    "device": "cpu",
    "clean-evaluation": True,  # on-device inference too (off by default): the audit sees its clean-confusion
}
RUNS: dict[str, dict[str, Any]] = {
    # sentence level: Purkayastha on n(M1 x) (random M1, m' = 16) and RR labels at a low epsilon
    "sentence": {**BASE, "sentence-epsilon": 10.0, "label-mechanism": "rr", "label-epsilon": 0.5},
    # word level: CMP rewrites (GloVe, 5000 words) at 1 per word, labels in the clear
    "word": {
        **BASE,
        "sentence-mechanism": "none",
        "map-in": "identity",
        "word-mechanism": "cmp",
        "word-epsilon": 1.0,
        "word-options": "vocab_size = 5000",
        "word-quality-docs": 0,
        "word-support-words": 0,
        "train-size": 20,  # a rewrite is embedded by the encoder on the node: keep the documents few
        "test-size": 10,
        "num-server-rounds": 1,
    },
    # document level (SentDP): DeepCandidate sends public candidate indices; truncation sends vectors
    "document": {
        **BASE,
        "dataset": "agnews",  # short news items (few sentences to encode); those of one sentence are dropped
        "train-size": 100,  # 70 public documents (14 of 2+ sentences: recoder and candidates), 12 users
        "test-size": 30,  # 7 test users
        "public-fraction": 0.7,
        "sentence-mechanism": "none",
        "map-in": "identity",
        "document-mechanism": "deepcandidate",
        "document-epsilon": 10.0,
        "recoder-clusters": 2,
        "recoder-epochs": 1,
        "num-candidates": 10,
        "candidate-min-sentences": 2,
        "num-projections": 10,
        "num-server-rounds": 1,
        "fraction-train": 1.0,
    },
    "truncation": {},  # the document run with document-mechanism = "truncation" (filled in below)
    # central mode, user unit: the sum of Poisson-sampled users' clipped updates (q = 0.5)
    "central-user": {
        **BASE,
        "mode": "central",
        "central-unit": "user",
        "central-cohort-size": 20.0,
        "central-clip": 0.05,
        "client-learning-rate": 0.5,
        "num-server-rounds": 1,
    },
    # central mode, node unit, client-side clipping (fixedclipping_mod on the ClientApp)
    "central-node": {
        **BASE,
        "mode": "central",
        "central-unit": "node",
        "central-clipping": "client",
        "central-clip": 0.1,
        "batch-size": 8,
        "learning-rate": 0.01,
        "num-server-rounds": 1,
    },
}
RUNS["truncation"] = {**RUNS["document"], "document-mechanism": "truncation"}
# the task-aware release: the public classifier's class (supervised M1 from the public split) through
# 2-ary randomized response, one-hot, with RR labels; and PrivUnit on the sphere of a random M1
# (120 training texts: whole source groups since the subsample keeps groups whole, about 50 private users)
RUNS["sentence-class-rr"] = {
    **RUNS["sentence"],
    "train-size": 120,
    "public-fraction": 0.5,
    "map-in": "supervised",
    "map-dim": 2,
    "map-scale": 1.0,
    "sentence-mechanism": "class_rr",
    "sentence-epsilon": 2.0,
}
RUNS["sentence-privunit"] = {**RUNS["sentence"], "sentence-mechanism": "privunit", "sentence-epsilon": 3.0}
# the class-means server: PrivUnit (unbiased) on the public projection, RR labels; the server fits in closed
# form and sends the public-only models with every evaluate request (the nodes score them: public-confusion)
RUNS["sentence-class-means"] = {
    **RUNS["sentence"],
    "train-size": 120,
    "public-fraction": 0.5,
    "map-in": "projection",
    "map-dim": 4,
    "sentence-mechanism": "privunit",
    "sentence-options": "unbiased = true",
    "sentence-epsilon": 3.0,
    "server-model": "class-means",
}
# two disjoint cohorts (fl.maps.cohorts): the second releases along the map fitted on the first's releases, at another
# width; the last cohort's covariance from its releases
RUNS["sentence-class-means-cohorts"] = {
    **RUNS["sentence-class-means"],
    "cohorts": 2,
    "num-server-rounds": 2,
    "fraction-train": 1.0,
    "cohort-map-dim": 5,
    "map-dim": 3,
    "class-means-covariance": "releases",
}
# the sentence level again, each node reading its documents from its own file (node config data-path)
RUNS["sentence-own-files"] = RUNS["sentence"]
# local mode with a Flower strategy: the nodes train on their releases and send models and charges
# (clients.node_training), with FedProx's proximal term
RUNS["sentence-fedprox-on-nodes"] = {**RUNS["sentence"], "strategy": "FedProx", "strategy-options": "proximal_mu = 0.1"}
OWN_FILES = {"sentence-own-files"}
# central mode, user unit, the encoder's top layer (LoRA adapters) trained with the head: the sum covers both
RUNS["central-user-encoder"] = {
    **RUNS["central-user"],
    "central-train": "encoder",
    "central-tuning-part": "lora",
    "tuning-layers": 1,
    "tuning-lora-rank": 2,
    "map-in": "identity",
}
# the sentence level with a public-tuned encoder: the nodes embed with the published encoder
RUNS["sentence-tuned"] = {
    **RUNS["sentence"],
    "train-size": 120,
    "public-fraction": 0.5,
    "encoder-tuning": "public",
    "tuning-part": "top",
    "tuning-layers": 1,
    "tuning-batch-size": 8,
    "num-server-rounds": 1,
}


def scope_of(cfg: Mapping[str, Any]) -> str:
    if cfg["mode"] == "central":
        return f"central/{cfg['central-unit']}"
    level = "word" if cfg["word-mechanism"] != "none" else "document" if cfg["document-mechanism"] != "none" else ""
    return f"local/{level or 'sentence'}"


# ------------------------------------------------------------------------------------------ the grid
def _wire(message: Message) -> Message:
    """The message as the other end reads it: through Flower's protobuf form and back."""
    return message_from_proto(message_to_proto(message))


class InProcessGrid(Grid):
    """The nodes of a simulation in this process: each with its own Context (partition-id,
    num-partitions, a state that persists across rounds), answering with the real ClientApp.

    Every (request, reply) pair is recorded, both as serialised and read back.
    """

    def __init__(
        self, client_app: Callable[[Message, Context], Message], nodes: int, files: list[Path] | None = None
    ) -> None:
        self.app = client_app
        self.contexts = {
            1000 + i: Context(
                1,
                1000 + i,
                {"partition-id": i, "num-partitions": nodes, **({"data-path": str(files[i])} if files else {})},
                RecordDict(),
                {},
            )
            for i in range(nodes)
        }
        self.exchanges: list[tuple[Message, Message]] = []
        self._count = 0

    def set_run(self, run: Any) -> None:  # pragma: no cover - not called by run_server
        pass

    @property
    def run(self) -> Any:  # pragma: no cover
        raise NotImplementedError

    def create_message(self, *args: Any, **kwargs: Any) -> Message:  # pragma: no cover
        raise NotImplementedError

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:  # pragma: no cover
        raise NotImplementedError

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:  # pragma: no cover
        raise NotImplementedError

    def get_node_ids(self) -> list[int]:
        return list(self.contexts)

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> list[Message]:
        replies = []
        for message in messages:
            self._count += 1
            message.metadata.__dict__["_message_id"] = f"m{self._count}"  # what the SuperLink sets
            request = _wire(message)
            reply = _wire(self.app(request, self.contexts[request.metadata.dst_node_id]))
            self.exchanges.append((request, reply))
            replies.append(reply)
        return replies


@dataclass
class Captured:
    """One run's resolved config, its nodes' cohorts (clean data, by partition id) and every exchange."""

    name: str
    cfg: Mapping[str, Any]
    scope: str
    cohorts: dict[int, Cohort]  # node id -> its cohort
    exchanges: list[tuple[Message, Message]]
    summary: dict[str, Any]


def simulate(name: str, raw: Mapping[str, Any], data_dir: Path, cache_dir: Path, out: Path) -> Captured:
    from clients.app import make_client_app
    from strategies.server_app import run_server

    cfg = config_mod.resolve(
        {**raw, "data-dir": str(data_dir), "cache-dir": str(cache_dir), "out-dir": str(out), "run-name": "r"}
    )
    nodes = num_nodes(max(population_sizes(cfg.data, cfg.users, cfg.release.level)), cfg.users.users_per_node)
    files = write_node_files(cfg, out / "files", [".jsonl"] * nodes) if name in OWN_FILES else None
    grid = InProcessGrid(make_client_app(cfg), nodes, files)
    summary = run_server(grid, cfg, timeout=60.0)
    if cfg["encoder-tuning"] != "none":  # the nodes held the published encoder's embeddings
        cfg = config_mod.resolve({**dict(cfg), "encoder": summary["encoder"]["folder"]})
    cohorts = {node: node_cohort(ctx, cfg) for node, ctx in grid.contexts.items()}  # as each node built it
    return Captured(name, cfg, scope_of(cfg), cohorts, grid.exchanges, summary)


_CAPTURED: dict[str, Captured] = {}


@pytest.fixture
def run(request: pytest.FixtureRequest, data_dir: Path, cache_dir: Path, tmp_path_factory: Any) -> Captured:
    name = request.param
    if name not in _CAPTURED:
        _CAPTURED[name] = simulate(name, RUNS[name], data_dir, cache_dir, tmp_path_factory.mktemp(f"audit-{name}"))
    return _CAPTURED[name]


# ------------------------------------------------------------------------------------------ clean data
@dataclass
class Clean:
    """What the users hold, in the clear: the references the audit compares every reply against."""

    matrices: list[tuple[str, np.ndarray]]  # (name, rows) of clean vectors of several widths
    texts: list[str]  # probes: every user's raw document (its first 40 characters when longer)
    train_label: dict[int, int]  # train-split row -> raw label
    test_label: dict[int, int]  # test user -> raw label
    train_mapped: dict[int, np.ndarray]  # train-split row -> n(M1 x) (local sentence level)
    test_mapped: dict[int, np.ndarray]
    train_words: dict[int, int] = field(default_factory=dict)
    test_words: dict[int, int] = field(default_factory=dict)
    train_sentences: dict[int, int] = field(default_factory=dict)
    test_sentences: dict[int, int] = field(default_factory=dict)

    @classmethod
    def of(cls, run: Captured) -> Clean:
        cfg, cohorts = run.cfg, list(run.cohorts.values())
        first = cohorts[0]
        sent = [q.content[wire.MAP_IN]["matrix"].numpy() for q, _ in run.exchanges if wire.MAP_IN in q.content]
        matrix = (  # M1: the server's (its first, for a map it trains) or the public one the nodes derive
            torch.as_tensor(sent[0])
            if sent
            else maps.input_map(cfg["map-in"], first.encoder_dim, first.map_dim, cfg["map-seed"])
        )
        train_emb = torch.cat([c.train_emb for c in cohorts])
        test_emb = torch.cat([c.test_emb for c in cohorts])
        train_rows = np.concatenate([c.train_doc_rows for c in cohorts])
        test_users = np.concatenate([np.arange(c.test_users.start, c.test_users.stop) for c in cohorts])
        train_mapped = maps.apply_input_map(train_emb, matrix).numpy()
        test_mapped = maps.apply_input_map(test_emb, matrix).numpy()
        matrices = [
            ("clean embedding", torch.cat([train_emb, test_emb]).numpy()),
            ("clean normalised embedding", maps.apply_input_map(torch.cat([train_emb, test_emb]), None).numpy()),
            ("clean mapped embedding", np.concatenate([train_mapped, test_mapped])),
        ]
        for later in {m.tobytes(): m for m in sent[1:]}.values():  # cohorts: each later cohort's map too
            emb = torch.cat([train_emb, test_emb])
            matrices.append(("clean mapped embedding", maps.apply_input_map(emb, torch.as_tensor(later)).numpy()))
        docs = [d for c in cohorts for d in (c.train_docs, c.test_docs) if d is not None and len(d)]
        if docs:
            matrices.append(("clean sentence embedding", torch.cat([d.emb for d in docs]).numpy()))
        texts = [t for c in cohorts for t in (*c.train_text, *c.test_text)]
        clean = cls(
            matrices,
            [t[:40] for t in texts if len(t.strip()) >= 12],
            dict(zip(train_rows.tolist(), torch.cat([c.train_y for c in cohorts]).tolist(), strict=True)),
            dict(zip(test_users.tolist(), torch.cat([c.test_y for c in cohorts]).tolist(), strict=True)),
            dict(zip(train_rows.tolist(), train_mapped, strict=True)),
            dict(zip(test_users.tolist(), test_mapped, strict=True)),
        )
        for c in cohorts:
            test = range(c.test_users.start, c.test_users.stop)
            if c.train_words is not None and c.test_words is not None:
                clean.train_words.update(zip(c.train_doc_rows.tolist(), word_counts(c.train_text).tolist()))
                clean.test_words.update(zip(test, word_counts(c.test_text).tolist()))
            if c.train_docs is not None and c.test_docs is not None:
                clean.train_sentences.update(zip(c.train_doc_rows.tolist(), c.train_docs.num_sentences.tolist()))
                clean.test_sentences.update(zip(test, c.test_docs.num_sentences.tolist()))
        return clean


# ------------------------------------------------------------------------------------------ the audit
def _floats(value: Any) -> np.ndarray | None:
    a = np.asarray(value)
    return a.astype(np.float64) if a.dtype.kind == "f" and a.size else None


def raw_content(where: str, content: RecordDict, clean: Clean) -> list[str]:
    """Raw embeddings (as rows of any float array or float list) and raw text (in any string or any
    array's bytes) anywhere in a reply."""
    problems: list[str] = []
    for record_key, record in content.items():
        for key, value in record.items():
            name = f"{where} {record_key}/{key}"
            if isinstance(value, Array):
                data = value.numpy()
                blobs = [data.tobytes()]
                floats = _floats(data)
            else:
                items = value if isinstance(value, list) else [value]
                blobs = [v.encode() if isinstance(v, str) else v for v in items if isinstance(v, str | bytes)]
                floats = _floats([v for v in items if isinstance(v, float)])
            for blob in blobs:
                hit = next((t for t in clean.texts if t.encode() in blob), None)
                if hit is not None:
                    problems.append(f"{name}: contains a user's raw text {hit!r}")
            if floats is None:
                continue
            for label, ref in clean.matrices:
                width = ref.shape[1]
                if floats.size % width:
                    continue
                rows = floats.reshape(-1, width)
                dist = torch.cdist(torch.from_numpy(rows), torch.from_numpy(ref.astype(np.float64)))
                if rows.size and float(dist.min()) < TOL:
                    problems.append(f"{name}: a row is a user's {label} (distance {float(dist.min()):.2e})")
    return problems


@dataclass
class RunState:
    """What the run-level checks gather over all replies."""

    int_arrays: dict[str, list[np.ndarray]] = field(default_factory=dict)  # "type key" -> per-reply arrays
    raw_labels: dict[str, list[np.ndarray]] = field(default_factory=dict)  # type -> the same rows' raw labels
    released_labels: list[np.ndarray] = field(default_factory=list)  # train `labels`
    train_labels_raw: list[np.ndarray] = field(default_factory=list)  # their rows' raw labels
    fresh_flips: list[np.ndarray] = field(default_factory=list)  # fresh train rows: label != raw label
    cosines: list[np.ndarray] = field(default_factory=list)  # fresh Purkayastha rows: <release, n(M1 x)>
    released_before: set[tuple[str, int]] = field(default_factory=set)  # (message type, doc row / test user)
    sums: list[tuple[int, float]] = field(default_factory=list)  # central user unit: (users in the sum, norm)
    seen: set[tuple[str, str, str]] = field(default_factory=set)  # declared (message type, record, key) seen


def _check_release(
    where: str, mtype: str, run: Captured, request: Message, content: RecordDict, clean: Clean, state: RunState
) -> list[str]:
    """Kind checks of a local-mode release: row ids, charge metadata, sanitizer outputs, labels."""
    problems: list[str] = []
    cfg, rel = run.cfg, wire.Release.from_content(content)
    record = content[wire.RELEASE]
    n = rel.user_ids.size
    if mtype == wire.TRAIN:
        requested = set(np.asarray(request.content[wire.CONFIG]["user-ids"]).tolist())
        if not set(rel.user_ids.tolist()) <= requested:
            problems.append(f"{where}: user-ids the server did not ask for")
        owner = {
            d: u for c in run.cohorts.values() for d, u in zip(c.train_doc_rows.tolist(), c.train_doc_user.tolist())
        }
        if [owner.get(d) for d in rel.doc_ids.tolist()] != rel.user_ids.tolist():
            problems.append(f"{where}: doc-ids are not the documents of user-ids in the seeded partition")
        keys, labels, words, sentences, mapped = (
            rel.doc_ids.tolist(),
            clean.train_label,
            clean.train_words,
            clean.train_sentences,
            clean.train_mapped,
        )
    else:
        keys, labels, words, sentences, mapped = (
            rel.user_ids.tolist(),
            clean.test_label,
            clean.test_words,
            clean.test_sentences,
            clean.test_mapped,
        )
        if not set(keys) <= set(labels):
            problems.append(f"{where}: user-ids outside the test users")
            return problems
    raw_y = np.array([labels[k] for k in keys], dtype=np.int64)
    info = next(iter(run.cohorts.values()))
    if int(cfg.get("cohorts", 1)) > 1 and wire.MAP_IN in request.content:  # the round's map sets the width
        width = int(request.content[wire.MAP_IN]["matrix"].numpy().shape[1])
        info = replace(info, map_dim=width, release_dim=width)
    for key in record.keys():
        a = record[key].numpy()
        if a.dtype.kind in "iu" and a.shape == (n,):
            state.int_arrays.setdefault(f"{mtype} {key}", []).append(a)
    state.raw_labels.setdefault(mtype, []).append(raw_y)
    if not set(np.unique(rel.fresh.astype(np.int64)).tolist()) <= {0, 1}:
        problems.append(f"{where}: fresh is not a 0/1 flag")
    if not cfg["fresh-noise-per-round"] and cfg["map-in"] not in maps.FROM_SERVER:  # a release is drawn once
        first = np.array([(mtype, k) not in state.released_before for k in keys], dtype=bool)
        if not np.array_equal(first, rel.fresh):
            problems.append(f"{where}: fresh is not 'first release of this row' (cached rows are re-sent)")
        state.released_before |= {(mtype, k) for k in keys}
    for channel, index in rel.index.items():
        if index.shape != (n,) or (n and not (0 <= index.min() and index.max() < len(rel.charges[channel]))):
            problems.append(f"{where}: {channel}-charge does not index the charges table")
            continue
        counts = [
            words[k] if run.scope == "local/word" else sentences[k] if run.scope == "local/document" else None
            for k in keys
        ]
        wants = {c: expected_charge(cfg, run.scope, channel, c, info.map_dim, info.num_classes) for c in set(counts)}
        for i, count in enumerate(counts):
            got, want = rel.charges[channel][index[i]], wants[count]
            if got != want if isinstance(want, Charge) else not math.isclose(got.cost, want, rel_tol=1e-12):
                problems.append(f"{where}: row {i}'s {channel} charge {got} is not the release's guarantee {want}")
                break
    for key, counts in (("num-words", words), ("num-sentences", sentences)):
        if key in record and record[key].numpy().tolist() != [counts[k] for k in keys]:
            problems.append(f"{where}: {key} is not the users' {key}")
    if "embeddings" in record:
        emb = record["embeddings"].numpy()
        if emb.shape != (n, info.release_dim) or emb.dtype != np.float32 or not np.isfinite(emb).all():
            problems.append(f"{where}: embeddings are not [rows, release-dim] finite float32")
        elif cfg["sentence-mechanism"] == "class_rr":
            if not (np.isin(emb, (0.0, 1.0)).all() and (emb.sum(axis=1) == 1).all()):
                problems.append(f"{where}: class_rr releases are not one-hot rows over the classes")
        elif cfg["sentence-mechanism"] == "privunit":
            # unit rows V, or with unbiased = true V / m: every row of norm 1 / m (m = E<V, u> at this m')
            unbiased = "unbiased = true" in str(cfg["sentence-options"])
            radius = 1.0 / PrivUnit(cfg["sentence-epsilon"], input_dim=info.map_dim).m if unbiased else 1.0
            if not np.allclose(np.linalg.norm(emb, axis=1), radius, rtol=1e-4):
                problems.append(f"{where}: PrivUnit releases are not on the sphere of radius {radius:.4g}")
        elif cfg["sentence-mechanism"] == "purkayastha":
            if not np.allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-4):
                problems.append(f"{where}: Purkayastha releases are not on the unit sphere")
            clean_rows = np.stack([mapped[k] for k in keys]) if keys else np.zeros_like(emb)
            state.cosines.append(np.einsum("ij,ij->i", emb.astype(np.float64), clean_rows)[rel.fresh])
    if "candidate-ids" in record:
        ids = record["candidate-ids"].numpy()
        pool = _candidate_pool(run, request.metadata.dst_node_id)
        if ids.shape != (n,) or (n and not (0 <= ids.min() and ids.max() < pool)):
            problems.append(f"{where}: candidate-ids do not index the public pool of {pool} candidates")
    if rel.labels is not None:
        state.released_labels.append(rel.labels)
        state.train_labels_raw.append(raw_y)
        state.fresh_flips.append((rel.labels != raw_y)[rel.fresh])
        if n and not (0 <= rel.labels.min() and rel.labels.max() < info.num_classes):
            problems.append(f"{where}: labels outside the classes")
    return problems


def expected_charge(
    cfg: Mapping[str, Any], scope: str, channel: str, count: int | None, input_dim: int, num_classes: int
) -> Charge | float:
    """What a row must be charged, from the config and the row's public count (README's formulas): the
    label or sentence mechanism's guarantee, k words x the word guarantee, or the pure epsilon of a
    document of k sentences (DeepCandidate epsilon k / 2, truncation k epsilon)."""
    # A charge's guarantee carries its mechanism's accounting kind (its dp-accounting event in the ledger).
    if channel == "label":  # k-ary RR's account also needs the number of labels
        return Charge(config_mod.make_mechanism(cfg, "label").guarantee.over(num_classes))
    if scope == "local/sentence":
        mech = config_mod.make_mechanism(cfg, "sentence", input_dim=input_dim, num_classes=num_classes)
        return Charge(mech.guarantee)
    assert count is not None
    if scope == "local/word":
        return Charge(config_mod.make_mechanism(cfg, "word").guarantee, count)
    half = 0.5 if cfg["document-mechanism"] == "deepcandidate" else 1.0
    return cfg["document-epsilon"] * count * half


def _candidate_pool(run: Captured, node: int) -> int:
    """Size of the public candidate pool the server sent this node (its first document setup)."""
    for request, _ in run.exchanges:
        if request.metadata.dst_node_id == node and wire.DOCUMENT_SETUP in request.content:
            return int(request.content[wire.DOCUMENT_SETUP]["candidates"].numpy().shape[0])
    return 0


def _metric_ints(where: str, record: MetricRecord, keys: Iterable[str]) -> tuple[list[str], dict[str, np.ndarray]]:
    problems, values = [], {}
    for key in keys:
        if key not in record:
            continue
        v = np.asarray(record[key])
        if v.dtype.kind not in "iu" or (v < 0).any():
            problems.append(f"{where}: metrics/{key} is not a non-negative count")
        values[key] = v
    return problems, values


def _check_metrics(where: str, mtype: str, run: Captured, content: RecordDict) -> list[str]:
    """Aggregates are counts that add up; constants are constant."""
    if wire.METRICS not in content:
        return []
    metrics = content[wire.METRICS]
    keys = [k for k in metrics.keys() if k not in (UNIFORM_WEIGHT_KEY, "train_loss")]
    problems, v = _metric_ints(where, metrics, keys)
    if "train_loss" in metrics and not (isinstance(metrics["train_loss"], float) and metrics["train_loss"] >= 0):
        problems.append(f"{where}: metrics/train_loss is not a non-negative mean loss")
    if UNIFORM_WEIGHT_KEY in metrics and metrics[UNIFORM_WEIGHT_KEY] != 1.0:
        problems.append(f"{where}: {UNIFORM_WEIGHT_KEY} is not the constant 1.0")
    k = next(iter(run.cohorts.values())).num_classes
    for key in ("confusion", "clean-confusion"):
        if key in v and (v[key].size != k * k or int(v[key].sum()) != int(v["num-examples"])):
            problems.append(f"{where}: metrics/{key} is not a {k}x{k} count over the node's rows")
    for key in ("confusion-by-k", "clean-confusion-by-k"):
        if key in v and int(v[key].sum()) != int(v["num-examples"]):
            problems.append(f"{where}: metrics/{key} does not add up to the node's rows")
    if "fresh-releases" in v and wire.RELEASE in content:
        rel = wire.Release.from_content(content)
        # A node that trains (a Flower strategy) counts the releases it holds: at least this reply's.
        held = int(v["num-examples"]) >= rel.user_ids.size if wire.MODEL in content else None
        if int(v["fresh-releases"]) != int(rel.fresh.sum()) or not (
            held if held is not None else int(v["num-examples"]) == rel.user_ids.size
        ):
            problems.append(f"{where}: release counts do not match the release")
    return problems


def _norm(arrays: Mapping[str, np.ndarray]) -> float:
    return math.sqrt(sum(float(np.sum(np.asarray(a, dtype=np.float64) ** 2)) for a in arrays.values()))


def _check_central(
    where: str, run: Captured, node: int, request: Message, content: RecordDict, state: RunState
) -> list[str]:
    """User unit: one array per parameter, norm <= clip x users in the sum; node unit: a clipped update."""
    problems: list[str] = []
    cfg = run.cfg
    model = request.content[wire.MODEL]
    if run.scope == "central/user":
        arrays = {k: v.numpy() for k, v in content[wire.UPDATE_SUM].items()}
        shapes = {k: tuple(v.shape) for k, v in model.items()}
        if (
            list(content.keys()) != [wire.UPDATE_SUM]
            or not arrays
            or any(k not in shapes or a.shape != shapes[k] for k, a in arrays.items())
        ):
            problems.append(f"{where}: not one record of model-shaped arrays")
        c = run.cohorts[node]
        config = request.content[wire.CONFIG]
        users = torch.arange(c.train_users.start, c.train_users.stop)
        coins = poisson_sample(
            cfg["noise-seed"], int(config["server-round"]), users, c.num_train_users, float(config["sampling-rate"])
        )
        summed = int(coins.sum())
        norm = _norm(arrays)
        if norm > cfg["central-clip"] * summed * (1 + 1e-5) + 1e-7:
            problems.append(f"{where}: norm {norm:.4g} > clip x {summed} sampled users")
        state.sums.append((summed, norm))
    else:
        sent = {k: v.numpy() for k, v in model.items()}
        reply = {k: v.numpy() for k, v in content[wire.MODEL].items()}
        if list(reply) != list(sent):
            problems.append(f"{where}: the update's keys are not the model's")
        else:
            norm = _norm({k: reply[k] - sent[k] for k in sent})
            if norm > cfg["central-clip"] * (1 + 1e-5):
                problems.append(f"{where}: the node's update (norm {norm:.4g}) is not clipped to central-clip")
    return problems


def _check_node_trained(where: str, run: Captured, request: Message, content: RecordDict) -> list[str]:
    """Local mode, a Flower strategy: the model the request carried, trained (same keys and shapes, finite),
    and the release's charges without its rows (no vector, candidate index, document id or label)."""
    problems: list[str] = []
    sent = {k: v.numpy() for k, v in request.content[wire.MODEL].items()}
    model = {k: v.numpy() for k, v in content[wire.MODEL].items()}
    if list(model) != list(sent) or any(model[k].shape != sent[k].shape for k in sent):
        problems.append(f"{where}: the node's model is not the request's model")
    elif not all(np.isfinite(a).all() for a in model.values()):
        problems.append(f"{where}: the node's model is not finite")
    rel = wire.Release.from_content(content)
    requested = set(np.asarray(request.content[wire.CONFIG]["user-ids"]).tolist())
    if not set(rel.user_ids.tolist()) <= requested:
        problems.append(f"{where}: user-ids the server did not ask for")
    rows = set(content[wire.RELEASE].keys()) - {"user-ids", "fresh", "embedding-charge", "label-charge"}
    extras = {"num-words", "num-sentences"}
    if rows - extras:
        problems.append(f"{where}: a node that trains sent release rows {sorted(rows - extras)}")
    return problems


def _check_cohort(where: str, run: Captured, node: int, request: Message, content: RecordDict) -> list[str]:
    from dataclasses import asdict

    c = run.cohorts[node]
    info = wire.CohortInfo.from_record(content[wire.COHORT])
    expected = {
        "train_users_lo": c.train_users.start,
        "train_users_hi": c.train_users.stop,
        "num_train_users": c.num_train_users,
        "num_train_docs": int(c.train_doc_user.size),
        "test_users_lo": c.test_users.start,
        "test_users_hi": c.test_users.stop,
        "num_test_users": c.num_test_users,
        "num_classes": c.num_classes,
        "encoder_dim": c.encoder_dim,
        "map_dim": c.map_dim,
        "release_dim": c.release_dim,
        "partition_id": c.partition_id,
        "num_partitions": c.num_partitions,
        "node_local": int(c.node_local),
    }
    if c.node_local and wire.USERS not in request.content:  # before the server numbered its users
        expected.update(train_users_lo=0, train_users_hi=c.train_users.stop - c.train_users.start, num_train_users=0)
    return [] if asdict(info) == expected else [f"{where}: cohort info is not the node's cohort shape"]


def expected_cos_purkayastha(m: int, epsilon: float) -> tuple[float, float]:
    """Mean and standard deviation of cos(theta) under Purkayastha's angle density (scipy quadrature)."""
    from scipy.integrate import quad

    from mechanisms.purkayastha import purarc_log_density

    peak = max(purarc_log_density(np.linspace(1e-6, math.pi - 1e-6, 2001), m, epsilon))

    def moment(f: Callable[[float], float]) -> float:
        return quad(lambda t: f(t) * math.exp(float(purarc_log_density(np.array(t), m, epsilon)) - peak), 0, math.pi)[0]

    z = moment(lambda t: 1.0)
    mean = moment(math.cos) / z
    return mean, math.sqrt(moment(lambda t: math.cos(t) ** 2) / z - mean**2)


def audit(run: Captured, allow_unsanitized: bool = False) -> tuple[list[str], RunState]:
    """Every problem found in the run's replies (none: the audit passes), and what it gathered.

    ``allow_unsanitized``: accept the fields declared ``UNSANITIZED`` (the leaky mode's gradient)."""
    clean = Clean.of(run)
    state = RunState()
    problems: list[str] = []
    for i, (request, reply) in enumerate(run.exchanges):
        mtype, node = reply.metadata.message_type, reply.metadata.src_node_id
        where = f"{mtype} reply #{i} from node {node}"
        if reply.has_error():
            problems.append(f"{where}: error {reply.error.reason}")
            continue
        content = reply.content
        params = list(request.content[wire.MODEL].keys()) if wire.MODEL in request.content else None
        undeclared = wire.undeclared_fields(
            mtype, content, run.scope, model_parameters=params, allow_unsanitized=allow_unsanitized
        )
        for name in undeclared:
            problems.append(f"{where}: undeclared field {name}")
        declared = wire.declared_fields(mtype, run.scope)
        for r, rec in content.items():
            for k in rec.keys():
                key = wire.MODEL_PARAMETER if (r, wire.MODEL_PARAMETER) in declared else k
                if (r, key) in declared:
                    state.seen.add((mtype, r, key))
        problems += raw_content(where, content, clean)
        problems += _check_metrics(where, mtype, run, content)
        if mtype == wire.QUERY and wire.COHORT in content:
            problems += _check_cohort(where, run, node, request, content)
        elif run.scope.startswith("local/") and wire.MODEL in content:
            problems += _check_node_trained(where, run, request, content)
        elif run.scope.startswith("local/") and wire.RELEASE in content:
            problems += _check_release(where, mtype, run, request, content, clean, state)
        elif run.scope.startswith("central/") and mtype == wire.TRAIN:
            problems += _check_central(where, run, node, request, content, state)
    # Run level: raw labels cross only as `labels` of a run whose label channel is "none".
    for key, parts in state.int_arrays.items():
        raw = np.concatenate(state.raw_labels[key.split()[0]])
        values = np.concatenate(parts)
        if np.array_equal(values, raw) and len(np.unique(raw)) > 1:
            if key != f"{wire.TRAIN} labels" or run.cfg["label-mechanism"] != "none":
                problems.append(f"{key}: equals the users' raw labels")
    if state.released_labels and run.cfg["label-mechanism"] != "none":
        released, raw = np.concatenate(state.released_labels), np.concatenate(state.train_labels_raw)
        if np.array_equal(released, raw):
            problems.append(f"labels: RR labels equal the raw labels on all {raw.size} rows")
    if state.fresh_flips and run.cfg["label-mechanism"] == "rr":  # K-ary RR flips with (K - 1) / (e^eps + K - 1)
        from scipy.stats import binomtest

        flips, k = np.concatenate(state.fresh_flips), next(iter(run.cohorts.values())).num_classes
        p_flip = (k - 1) / (math.exp(run.cfg["label-epsilon"]) + k - 1)
        if flips.size and binomtest(int(flips.sum()), flips.size, p_flip).pvalue < 1e-6:
            problems.append(
                f"labels: {int(flips.sum())} of {flips.size} fresh labels differ from the raw ones; RR at "
                f"epsilon {run.cfg['label-epsilon']} flips each with probability {p_flip:.3f}"
            )
    if state.cosines and run.cfg["sentence-mechanism"] == "purkayastha":
        cos = np.concatenate(state.cosines)
        mean, sd = expected_cos_purkayastha(next(iter(run.cohorts.values())).map_dim, run.cfg["sentence-epsilon"])
        if abs(cos.mean() - mean) > 5 * sd / math.sqrt(cos.size):
            problems.append(
                f"embeddings: mean cos to the clean rows {cos.mean():.3f}, Purkayastha's is {mean:.3f} "
                f"(+- {5 * sd / math.sqrt(cos.size):.3f}): not the declared sanitizer's output"
            )
    return problems, state


# ------------------------------------------------------------------------------------------ the tests
#: Declared fields of a scope that a run legitimately never sends (the other document mechanism's array).
# Scores by k are sent for document tasks (doc-embedding = "sentence-mean") only.
_BY_K = {(wire.EVALUATE, wire.METRICS, key) for key in ("confusion-by-k", "clean-confusion-by-k")}
# The public-only line is scored only where the run has public data (the release-space one at the sentence level).
_PUBLIC = {
    (wire.EVALUATE, wire.METRICS, key)
    for key in ("public-confusion", "public-clean-confusion", "public-head-clean-confusion")
}
# The server model fitted on public data alone, scored on the sanitized releases and on the clean inputs.
_PUBLIC_RELEASE = {(wire.EVALUATE, wire.METRICS, key) for key in ("public-confusion", "public-head-clean-confusion")}
_PUBLIC_CENTRAL = {(wire.EVALUATE, wire.METRICS, "public-confusion")}  # the public logistic regression
# Sent only when the nodes train on their releases (a Flower strategy): their model and its loss.
_ON_NODES = {(wire.TRAIN, wire.MODEL, wire.MODEL_PARAMETER), (wire.TRAIN, wire.METRICS, "train_loss")}
# What a node that trains does not send: the rows themselves.
_ROWS = {(wire.TRAIN, wire.RELEASE, key) for key in ("embeddings", "doc-ids", "labels")}
ABSENT = {
    "sentence": _BY_K | _PUBLIC | _ON_NODES,
    "sentence-tuned": _BY_K | _ON_NODES,
    "sentence-own-files": _BY_K | _PUBLIC | _ON_NODES,
    "sentence-class-rr": _BY_K | _ON_NODES,
    "sentence-privunit": _BY_K | _PUBLIC | _ON_NODES,
    "sentence-class-means": _BY_K | _ON_NODES,
    # the last cohort's map is aimed by releases: no class-means head of it is scored as public-only
    "sentence-class-means-cohorts": _BY_K | _ON_NODES | _PUBLIC_RELEASE,
    "sentence-fedprox-on-nodes": _BY_K | _PUBLIC | _ROWS,
    "word": _BY_K | _PUBLIC | _ON_NODES,
    "document": {(t, wire.RELEASE, "embeddings") for t in (wire.TRAIN, wire.EVALUATE)} | _PUBLIC_RELEASE | _ON_NODES,
    "truncation": {(t, wire.RELEASE, "candidate-ids") for t in (wire.TRAIN, wire.EVALUATE)}
    | _PUBLIC_RELEASE
    | _ON_NODES,
    "central-user": _PUBLIC_CENTRAL,
    "central-user-encoder": _PUBLIC_CENTRAL,
    "central-node": _PUBLIC_CENTRAL,
}


def test_the_declaration_is_one_well_formed_table() -> None:
    seen: set[tuple[str, str, str, str]] = set()
    for f in wire.DECLARED_FIELDS:
        assert f.message_type in (wire.QUERY, wire.TRAIN, wire.EVALUATE), f
        assert f.kind in wire.KINDS and f.scopes and set(f.scopes) <= set(wire.SCOPES), f
        assert len(f.reason) >= 20, f"{f.record}/{f.key} needs a reason"
        for scope in f.scopes:
            assert (f.message_type, scope, f.record, f.key) not in seen, f"{f.record}/{f.key} declared twice"
            seen.add((f.message_type, scope, f.record, f.key))
    # Every kind the issue names declares something, in every scope where it applies.
    assert {f.kind for f in wire.DECLARED_FIELDS} == set(wire.KINDS)
    info = wire.CohortInfo(*range(11))
    for scope in wire.SCOPES:
        assert wire.undeclared_fields(wire.QUERY, RecordDict({wire.COHORT: info.to_record()}), scope) == []
    with pytest.raises(ValueError, match="unknown scope"):
        wire.declared_fields(wire.TRAIN, "local/paragraph")


def test_undeclared_fields_names_new_keys_records_and_record_types() -> None:
    emb = Array(np.zeros((2, 3), np.float32))
    ok = RecordDict({wire.RELEASE: ArrayRecord({"user-ids": Array(np.arange(2)), "embeddings": emb})})
    assert wire.undeclared_fields(wire.TRAIN, ok, "local/sentence") == []
    assert wire.undeclared_fields("train.custom", ok, "local/sentence") == []  # the action suffix is ignored
    bad = RecordDict(
        {
            wire.RELEASE: ArrayRecord({"embeddings": emb, "raw": emb}),
            "debug": ConfigRecord({"text": "x"}),
            wire.METRICS: ArrayRecord({"num-examples": emb}),  # metrics must be a MetricRecord
        }
    )
    assert wire.undeclared_fields(wire.TRAIN, bad, "local/sentence") == [
        "release/raw",
        "debug/*",
        "metrics/num-examples",
    ]
    # num-words is declared at the word level only; the leaky gradient only when allowed.
    words = RecordDict({wire.RELEASE: ArrayRecord({"num-words": Array(np.arange(2))})})
    assert wire.undeclared_fields(wire.TRAIN, words, "local/sentence") == ["release/num-words"]
    assert wire.undeclared_fields(wire.TRAIN, words, "local/word") == []
    grad = RecordDict({wire.MAP_GRAD: ArrayRecord({"grad": emb})})
    assert wire.undeclared_fields(wire.TRAIN, grad, "local/sentence") == ["map-in-grad/*"]
    assert wire.undeclared_fields(wire.TRAIN, grad, "local/sentence", allow_unsanitized=True) == []
    # Central replies: any model parameter, or exactly the request's when they are given.
    update = RecordDict({wire.UPDATE_SUM: ArrayRecord({"fc.weight": emb, "secret": emb})})
    assert wire.undeclared_fields(wire.TRAIN, update, "central/user") == []
    assert wire.undeclared_fields(wire.TRAIN, update, "central/user", model_parameters=["fc.weight"]) == [
        "update-sum/secret"
    ]
    assert wire.undeclared_fields(wire.TRAIN, update, "central/node") == ["update-sum/*"]


@pytest.mark.parametrize("run", list(RUNS), indirect=True)
def test_every_reply_is_declared_and_carries_nothing_raw(run: Captured) -> None:
    problems, state = audit(run)
    assert problems == []
    # The run exercised every declared field of its scope (but the leaky gradient): the audit saw it all.
    declared = {
        (t, r, k)
        for t in (wire.QUERY, wire.TRAIN, wire.EVALUATE)
        for (r, k), f in wire.declared_fields(t, run.scope).items()
        if f.kind != wire.UNSANITIZED
    }
    assert declared - state.seen == ABSENT.get(run.name, set())
    if run.name in OWN_FILES:  # the nodes' users were numbered by the server, and held files, not a partition
        assert any(wire.USERS in request.content for request, _ in run.exchanges)
        assert all(c.node_local for c in run.cohorts.values())
    replies = {reply.metadata.message_type for _, reply in run.exchanges}
    assert replies == {wire.QUERY, wire.TRAIN, wire.EVALUATE}
    if run.name in ("sentence", "sentence-own-files"):
        assert sum(c.size for c in state.cosines) >= 40  # Purkayastha's angle statistics on enough rows
        released, raw = np.concatenate(state.released_labels), np.concatenate(state.train_labels_raw)
        assert 0 < int((released != raw).sum()) < raw.size  # RR at 0.5 flips some labels, not all
    if run.name in ("word", "document", "truncation"):  # labels in the clear: the raw labels, declared
        assert np.array_equal(np.concatenate(state.released_labels), np.concatenate(state.train_labels_raw))
    if run.name in ("central-user", "central-user-encoder"):
        assert any(users >= 2 and norm > 0 for users, norm in state.sums)  # a real sum of several users
    if run.name == "central-user-encoder":  # the encoder's adapters are in every sum, never a frozen weight
        sums = [reply.content[wire.UPDATE_SUM] for _, reply in run.exchanges if wire.UPDATE_SUM in reply.content]
        assert sums and all(any("lora_" in k for k in s.keys()) for s in sums)
        assert not any(k.startswith("top.") and "lora_" not in k for s in sums for k in s.keys())


def test_the_audit_catches_an_undeclared_array_raw_embeddings_and_raw_labels(
    monkeypatch: pytest.MonkeyPatch, data_dir: Path, cache_dir: Path, tmp_path: Path
) -> None:
    """A client that adds a per-user clean quantity under a new key, sends n(M1 x) as its release and
    its raw labels under RR: the audit names all three."""
    from clients.modes import NODE_MODES, NodeMode

    local = NODE_MODES["local"]
    honest = local.train

    def dishonest(msg: Message, context: Context, cfg: Mapping[str, Any]) -> Message:
        reply = honest(msg, context, cfg)
        c = node_cohort(context, cfg)
        release = reply.content[wire.RELEASE]
        where = {int(d): i for i, d in enumerate(c.train_doc_rows)}
        rows = np.array([where[int(d)] for d in release["doc-ids"].numpy()], dtype=np.int64)
        matrix = maps.input_map(cfg["map-in"], c.encoder_dim, c.map_dim, cfg["map-seed"])
        clean = maps.apply_input_map(c.train_emb[rows], matrix).numpy().astype(np.float32)
        release["embeddings"] = Array(clean)
        release["labels"] = Array(c.train_y[rows].numpy().astype(np.int64))
        release["raw-norms"] = Array(c.train_emb[rows].norm(dim=1).numpy())
        return reply

    monkeypatch.setitem(NODE_MODES, "local", NodeMode("local", train=dishonest, evaluate=local.evaluate))
    cfg = {**RUNS["sentence"], "num-server-rounds": 1, "fraction-train": 1.0}
    problems, _ = audit(simulate("dishonest", cfg, data_dir, cache_dir, tmp_path))
    assert any(p.endswith("undeclared field release/raw-norms") for p in problems), problems
    assert any("release/embeddings: a row is a user's clean mapped embedding" in p for p in problems), problems
    assert "train labels: equals the users' raw labels" in problems
    assert any("labels: RR labels equal the raw labels" in p for p in problems)


@pytest.mark.parametrize("run", ["sentence"], indirect=True)
def test_the_audit_catches_raw_text_in_strings_and_arrays(run: Captured) -> None:
    """Raw text in a declared string (the charges JSON) or in an array's bytes is found."""
    request, reply = next((q, r) for q, r in run.exchanges if r.metadata.message_type == wire.TRAIN)
    text = next(t for c in run.cohorts.values() for t in c.train_text if len(t) > 40)
    content = RecordDict({k: v for k, v in reply.content.items() if k != wire.CHARGES})
    charges = json.loads(str(reply.content[wire.CHARGES]["embedding"]))
    charges[0]["guarantee"]["note"] = text
    content[wire.CHARGES] = ConfigRecord(
        {"embedding": json.dumps(charges), "label": reply.content[wire.CHARGES]["label"]}
    )
    clean = Clean.of(run)
    assert any("charges/embedding: contains a user's raw text" in p for p in raw_content("r", content, clean))
    smuggled = RecordDict({wire.RELEASE: ArrayRecord({"fresh": Array(np.frombuffer(text.encode(), np.uint8))})})
    assert any("release/fresh: contains a user's raw text" in p for p in raw_content("r", smuggled, clean))
    assert raw_content("r", reply.content, clean) == []


def test_the_leaky_gradient_is_flagged_unless_unaccounted_leakage_is_allowed(
    data_dir: Path, cache_dir: Path, tmp_path: Path
) -> None:
    """map-in = "leaky" sends dLoss/dM1 on raw embeddings with each training release: declared, but of
    kind UNSANITIZED, so the audit names it unless told that the run allows unaccounted leakage."""
    cfg = {**RUNS["sentence"], "map-in": "leaky", "allow-unaccounted-leakage": True, "num-server-rounds": 1}
    run = simulate("leaky", cfg, data_dir, cache_dir, tmp_path)
    problems, _ = audit(run)
    trains = [reply for _, reply in run.exchanges if reply.metadata.message_type == wire.TRAIN]
    assert trains and all(wire.MAP_GRAD in reply.content for reply in trains)
    assert len(problems) == len(trains) and all(p.endswith("undeclared field map-in-grad/*") for p in problems)
    assert audit(run, allow_unsanitized=True)[0] == []


def test_a_document_task_without_a_document_mechanism_is_scored_by_k(
    data_dir: Path, cache_dir: Path, tmp_path: Path
) -> None:
    """The non-private (and word-level) lines of Meehan et al.'s Figure 4 are broken down by sentences
    per document too: with doc-embedding = "sentence-mean" and no document mechanism, evaluate replies
    carry confusion-by-k over every scored row, and the summary the by-k scores."""
    cfg = {**RUNS["document"], "document-mechanism": "none", "doc-embedding": "sentence-mean"}
    captured = simulate("document-none", cfg, data_dir, cache_dir, tmp_path)
    replies = [r for _, r in captured.exchanges if r.metadata.message_type == wire.EVALUATE]
    assert replies
    for reply in replies:
        metrics = reply.content[wire.METRICS]
        by_k = np.asarray(metrics["confusion-by-k"])
        assert wire.undeclared_fields(wire.EVALUATE, reply.content, captured.scope) == []  # local/sentence
        assert int(by_k.sum()) == int(metrics["num-examples"]) > 0
    buckets = captured.summary["final"]["by_sentences"]
    assert sum(b["documents"] for b in buckets) == sum(c.test_y.numel() for c in captured.cohorts.values())
    assert any(b["k_min"] == 1 for b in buckets)  # one-sentence news items are kept (no SentDP here)
