"""The wire schema: record keys and the small types both ends read and write.

A Flower ``Message`` carries a ``RecordDict``; these are its keys in Sanitas'
messages, and the typed views of the records that cross (a node's cohort
description, a release with its charges). The ClientApp writes them and the
ServerApp reads them with the same functions, so the two ends cannot drift.

:data:`DECLARED_FIELDS` declares every key a node may send to the server (per message type, mode
and level), with its kind (sanitizer output, candidate index, clipped central sum, charge metadata,
aggregate, ...) and why it may cross; :func:`undeclared_fields` lists what a reply carries beyond it
(the message audit, tests/integration/test_message_audit.py, runs it on every reply of real runs).
"""

from __future__ import annotations

import io
import json
from collections.abc import Collection, Mapping
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord, RecordDict
from flwr.common.constant import SType

from fl.accounting.charges import Charge

# RecordDict keys -------------------------------------------------------------------------------
COHORT = "cohort"  # query reply: MetricRecord (CohortInfo)
CONFIG = "config"  # requests: ConfigRecord (server-round, user-ids)
MAP_IN = "map-in"  # requests: ArrayRecord {"matrix"}: M1 when the server provides it
ENCODER = "encoder"  # requests: ConfigRecord {"digest"}: the published encoder to use (encoder-tuning = "public")
USERS = "users"  # query requests to node-local nodes: ConfigRecord {"train-offset", "num-train-users"}
MODEL = "arrays"  # requests: ArrayRecord, the server model's state dict
MODEL_REF = "model-ref"  # user-level train requests (CONFIG): the object id of a model the node already holds
HELD_MODEL = "sanitas.held-model"  # a node's context.state: the model of its last evaluate request
# Points sharing a federation (strategies.points, clients.points): one message carries several points'
# requests (or replies), each point's records under "p<point>/"; POINTS lists the points it carries.
POINTS = "sanitas.points"
POINT_PREFIX = "p"
POINT_ERROR = "sanitas.point-error"  # a reply's ConfigRecord {"code", "reason"}: that point's request failed
DOCUMENT_SETUP = "document-setup"  # requests: ArrayRecord, the document level's public material (once per node)
RELEASE = "release"  # replies: ArrayRecord of released rows (see Release)
CHARGES = "charges"  # replies: ConfigRecord, the release's distinct charges per channel (JSON)
METRICS = "metrics"  # replies: MetricRecord (counts, confusion matrices)
UPDATE_SUM = "update-sum"  # user-level central replies: ArrayRecord, the sum of the sampled users' clipped updates
MAP_GRAD = "map-in-grad"  # leaky mode only: ArrayRecord {"grad", "count"}, an unsanitized gradient
# Evaluate requests: the model fitted on the public data alone (fl.maps.public_model), held against the run.
PUBLIC_MODEL = "public-model"  # ArrayRecord {"matrix"}: the public logistic regression, [d + 1, K] (clean inputs)
PUBLIC_RELEASE_MODEL = "public-release-model"  # ArrayRecord: the server model fitted on public releases alone

#: Privacy channels of a release, as named on the wire and in the ledger.
CHANNELS = ("embedding", "label")


# Typed reads ----------------------------------------------------------------------------------
# A RecordDict's value is any record type, and a record's value any of its value types: these read one
# entry as the type the schema declares, and raise a TypeError naming the key when it is something else
# (a malformed or foreign message). ``record`` may be any mapping (a record, Flower's node config, {}).
def _wrong(key: str, expected: str, value: object) -> TypeError:
    return TypeError(f"record key {key!r}: expected {expected}, got {type(value).__name__} {value!r:.80}")


def array_record(content: RecordDict, key: str) -> ArrayRecord:
    """``content[key]``, an ``ArrayRecord`` (``KeyError`` when absent, ``TypeError`` when another record type)."""
    record = content[key]
    if not isinstance(record, ArrayRecord):
        raise _wrong(key, "an ArrayRecord", record)
    return record


def config_record(content: RecordDict, key: str) -> ConfigRecord:
    """``content[key]``, a ``ConfigRecord`` (``KeyError`` when absent, ``TypeError`` when another record type)."""
    record = content[key]
    if not isinstance(record, ConfigRecord):
        raise _wrong(key, "a ConfigRecord", record)
    return record


def metric_record(content: RecordDict, key: str) -> MetricRecord:
    """``content[key]``, a ``MetricRecord`` (``KeyError`` when absent, ``TypeError`` when another record type)."""
    record = content[key]
    if not isinstance(record, MetricRecord):
        raise _wrong(key, "a MetricRecord", record)
    return record


def _value(record: Mapping[str, object], key: str, default: object) -> object:
    return record[key] if default is None else record.get(key, default)


def read_int(record: Mapping[str, object], key: str, default: int | None = None) -> int:
    """``int(record[key])`` of a number (``default`` when absent, if given; else ``KeyError``)."""
    value = _value(record, key, default)
    if not isinstance(value, int | float):
        raise _wrong(key, "a number", value)
    return int(value)


def read_float(record: Mapping[str, object], key: str, default: float | None = None) -> float:
    """``float(record[key])`` of a number (``default`` when absent, if given; else ``KeyError``)."""
    value = _value(record, key, default)
    if not isinstance(value, int | float):
        raise _wrong(key, "a number", value)
    return float(value)


def read_str(record: Mapping[str, object], key: str, default: str | None = None) -> str:
    """``record[key]``, a string (``default`` when absent, if given; else ``KeyError``)."""
    value = _value(record, key, default)
    if not isinstance(value, str):
        raise _wrong(key, "a string", value)
    return value


def read_list(record: Mapping[str, object], key: str) -> list[Any]:
    """``record[key]``, a list (of a record's scalar type: ints, floats, strings, ...)."""
    value = record[key]
    if not isinstance(value, list):
        raise _wrong(key, "a list", value)
    return value


def read_array(record: Mapping[str, object], key: str) -> Array:
    """``record[key]``, an ``Array``."""
    value = record[key]
    if not isinstance(value, Array):
        raise _wrong(key, "an Array", value)
    return value


# Arrays to and from Flower's .npy bytes ------------------------------------------------------------
# Flower's Array(ndarray) runs np.save and Array.numpy() np.load per array: most of their cost is the
# .npy header (written, then parsed with ast.literal_eval, every time), not the data. These give the
# same Array (the same bytes: np.save's header from numpy's own format functions, tested) with each
# distinct header written or parsed once per process, and decode to a read-only view of the bytes.
_HEADERS: dict[tuple[str, tuple[int, ...]], bytes] = {}
_PARSED: dict[bytes, tuple[np.dtype, tuple[int, ...], bool]] = {}
_NPY_PREFIX = 10  # magic (6), version (2), header length (2) of a format 1.0 file


def to_array(x: np.ndarray) -> Array:
    """``Array(x)``, the same object Flower builds (``np.save``'s bytes), faster for a C-ordered array."""
    if not (isinstance(x, np.ndarray) and x.flags.c_contiguous and not x.dtype.hasobject):
        return Array(x)
    key = (x.dtype.str, tuple(x.shape))
    header = _HEADERS.get(key)
    if header is None:
        buffer = io.BytesIO()
        np.lib.format.write_array_header_1_0(buffer, np.lib.format.header_data_from_array_1_0(x))
        header = _HEADERS[key] = buffer.getvalue()
    data = b"".join((header, x.reshape(-1).view(np.uint8).data))  # one copy (tobytes + concatenation: two)
    return Array(dtype=str(x.dtype), shape=tuple(x.shape), stype=SType.NUMPY, data=data)


def from_array(array: Array) -> np.ndarray:
    """``array.numpy()`` as a read-only view of its bytes (no copy); copy it to write to it."""
    data = array.data
    if array.stype != SType.NUMPY or data[:8] != b"\x93NUMPY\x01\x00":
        return array.numpy()
    end = _NPY_PREFIX + int.from_bytes(data[8:10], "little")
    header = data[:end]
    parsed = _PARSED.get(header)
    if parsed is None:
        buffer = io.BytesIO(header)
        np.lib.format.read_magic(buffer)
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(buffer)
        parsed = _PARSED[header] = (dtype, tuple(shape), bool(fortran))
    dtype, shape, fortran = parsed
    if dtype.hasobject:
        return array.numpy()
    count = int(np.prod(shape, dtype=np.int64))
    flat = np.frombuffer(data, dtype=dtype, count=count, offset=end)
    return flat.reshape(shape[::-1]).T if fortran else flat.reshape(shape)


# Decoded arrays, shared by the nodes of one process ------------------------------------------------
# With local-wire = "handoff" every node of the process receives the round's model as Arrays over the
# same bytes object; decoding it (numpy's .npy parse) once instead of once per node was 8.5 s of a
# 60-round user-level run. Keyed by the bytes object's id, which the entry pins so the id cannot be reused.
_DECODED: dict[int, tuple[bytes, np.ndarray]] = {}
_DECODED_MAX = 64


def shared_numpy(array: Array) -> np.ndarray:
    """``array.numpy()``, decoded once per bytes object in this process: callers that receive copies
    of one ``Array`` (the handoff's copies share its bytes) get the same ``ndarray``.

    The result is shared: callers must not write to it (copy it, or load it into a module, which
    copies). Arrays over different bytes objects are decoded apart, whatever their content."""
    data = array.data
    hit = _DECODED.get(id(data))
    if hit is not None and hit[0] is data:
        return hit[1]
    decoded = from_array(array).copy()  # writable: torch.from_numpy takes it without a warning
    if len(_DECODED) >= _DECODED_MAX:
        del _DECODED[next(iter(_DECODED))]  # the oldest
    _DECODED[id(data)] = (data, decoded)
    return decoded


@dataclass(frozen=True)
class CohortInfo:
    """What a node reports about the users it holds and the shapes of its releases."""

    train_users_lo: int
    train_users_hi: int
    num_train_users: int
    num_train_docs: int
    test_users_lo: int
    test_users_hi: int
    num_test_users: int
    num_classes: int
    encoder_dim: int
    map_dim: int
    release_dim: int
    partition_id: int = 0  # the node's place in the federation (node config), the order of its users
    num_partitions: int = 1
    # 1: the node's training documents are its own file (node config ``data-path``); until the server
    # assigns its user ids (``USERS``), ``train_users_*`` count from 0 and ``num_train_users`` is 0.
    node_local: int = 0

    def to_record(self) -> MetricRecord:
        return MetricRecord({f.name.replace("_", "-"): int(getattr(self, f.name)) for f in fields(self)})

    @classmethod
    def from_record(cls, record: MetricRecord) -> CohortInfo:
        values: dict[str, int] = {}
        missing: list[str] = []
        for f in fields(cls):
            key = f.name.replace("_", "-")
            if key in record:
                values[f.name] = read_int(record, key)
            elif f.default is MISSING:
                missing.append(f.name)
        if missing:
            raise KeyError(f"cohort record lacks {', '.join(missing)}")
        return cls(**values)  # absent optional keys take the field's default

    @property
    def num_local_users(self) -> int:
        return self.train_users_hi - self.train_users_lo

    @property
    def holds_test_users(self) -> bool:
        return self.test_users_hi > self.test_users_lo

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass
class Release:
    """Rows a node releases in one reply, and what each costs.

    ``rows`` holds the channel's wire arrays (vectors or candidate indices, and
    per-row extras such as ``num-words``); ``charges[channel]`` is the list of
    distinct charges of that channel and ``index[channel]`` each row's entry in
    it. Re-sent rows carry their charge too; only ``fresh`` rows are new spend.
    """

    user_ids: np.ndarray
    fresh: np.ndarray  # bool per row
    rows: dict[str, Array]
    charges: dict[str, list[Charge]]
    index: dict[str, np.ndarray]
    doc_ids: np.ndarray | None = None  # training releases: the document's row in the train split
    labels: np.ndarray | None = None  # training releases: sanitized labels

    def to_content(self) -> dict[str, ArrayRecord | ConfigRecord]:
        arrays = {
            "user-ids": Array(np.asarray(self.user_ids, dtype=np.int64)),
            "fresh": Array(np.asarray(self.fresh, dtype=np.uint8)),
            **self.rows,
        }
        if self.doc_ids is not None:
            arrays["doc-ids"] = Array(np.asarray(self.doc_ids, dtype=np.int64))
        if self.labels is not None:
            arrays["labels"] = Array(np.asarray(self.labels, dtype=np.int64))
        for channel, index in self.index.items():
            arrays[f"{channel}-charge"] = Array(np.asarray(index, dtype=np.int64))
        charges = ConfigRecord({c: json.dumps([x.to_dict() for x in table]) for c, table in self.charges.items()})
        return {RELEASE: ArrayRecord(arrays), CHARGES: charges}

    @classmethod
    def from_content(cls, content: RecordDict) -> Release:
        record = array_record(content, RELEASE)
        known = {"user-ids", "fresh", "doc-ids", "labels", *(f"{c}-charge" for c in CHANNELS)}
        table = config_record(content, CHARGES)
        charges = {c: [Charge.from_dict(d) for d in json.loads(str(v))] for c, v in table.items()}
        return cls(
            user_ids=record["user-ids"].numpy(),
            fresh=record["fresh"].numpy().astype(bool),
            rows={k: record[k] for k in record if k not in known},
            charges=charges,
            index={c: record[f"{c}-charge"].numpy() for c in charges},
            doc_ids=record["doc-ids"].numpy() if "doc-ids" in record else None,
            labels=record["labels"].numpy() if "labels" in record else None,
        )

    def rows_record(self) -> ArrayRecord:
        """The channel's wire arrays, for ``EmbeddingChannel.from_record``."""
        return ArrayRecord(dict(self.rows))

    def fresh_charges(self, channel: str) -> list[tuple[np.ndarray, Charge]]:
        """(user ids, charge) groups of the fresh rows of ``channel`` (no group for an absent channel)."""
        if channel not in self.index:
            return []
        idx, users = self.index[channel][self.fresh], self.user_ids[self.fresh]
        return [(users[idx == i], charge) for i, charge in enumerate(self.charges[channel]) if (idx == i).any()]


# ------------------------------------------------------------------------------ the declaration
# Every record key and every array / metric / config key a node may send to the server, per message
# type and scope, with its kind and why it may cross. tests/integration/test_message_audit.py captures
# every node -> server message of real small runs (each level, both modes) and fails on any key that is
# not declared here, so a new field must be added to this table, with its reason, before it can ship.

#: Kinds of declared fields (what a field is, and so what the audit checks it against).
SANITIZER_OUTPUT = "sanitizer output"  # a local-DP mechanism's output: charged by the ledger
CANDIDATE_INDEX = "candidate index"  # DeepCandidate's output: the index of a public candidate
CLIPPED_SUM = "clipped central sum"  # user-level DP-FedAvg: a node's sum of per-user clipped updates
NODE_UPDATE = "central node update"  # node-level DP-FedAvg: a node's model after local training
CHARGE_METADATA = "per-row charge metadata"  # which charge a row pays, fresh or re-sent, its unit count
ROW_ID = "row identifier"  # who a row belongs to: ids the server asked for, or knows from the seeded partition
AGGREGATE = "aggregate"  # counts over a node's rows (confusion counts, numbers of releases)
COHORT_SHAPE = "cohort shape info"  # the node's user ranges and the release's dimensions
CONSTANT = "constant"  # the same value from every node (a weighting convention)
UNSANITIZED = "unsanitized (leaky mode only)"  # no local-DP guarantee; only with allow-unaccounted-leakage

KINDS = (
    SANITIZER_OUTPUT,
    CANDIDATE_INDEX,
    CLIPPED_SUM,
    NODE_UPDATE,
    CHARGE_METADATA,
    ROW_ID,
    AGGREGATE,
    COHORT_SHAPE,
    CONSTANT,
    UNSANITIZED,
)

#: Scopes: the local mode at each level, and the two units of the central mode.
LOCAL_SCOPES = ("local/sentence", "local/word", "local/document")
CENTRAL_SCOPES = ("central/user", "central/node")
SCOPES = (*LOCAL_SCOPES, *CENTRAL_SCOPES)

#: Stands for "every parameter name of the model the request carried" (central replies' arrays).
MODEL_PARAMETER = "<model parameter>"

QUERY, TRAIN, EVALUATE = "query", "train", "evaluate"  # Flower's message types (MessageType.*)


@dataclass(frozen=True)
class DeclaredField:
    """One key a node may send: in reply to ``message_type``, in ``scopes``, inside record ``record``."""

    message_type: str
    scopes: tuple[str, ...]
    record: str
    key: str
    kind: str
    reason: str


#: The record type of each reply record a node may send.
REPLY_RECORD_TYPES: dict[str, type] = {
    COHORT: MetricRecord,
    RELEASE: ArrayRecord,
    CHARGES: ConfigRecord,
    METRICS: MetricRecord,
    MAP_GRAD: ArrayRecord,
    UPDATE_SUM: ArrayRecord,
    MODEL: ArrayRecord,
}


def _fields(
    message_type: str, scopes: tuple[str, ...], record: str, kind: str, rows: dict[str, str]
) -> tuple[DeclaredField, ...]:
    return tuple(DeclaredField(message_type, scopes, record, k, kind, why) for k, why in rows.items())


_COHORT_KEYS = {
    "train-users-lo": "first global id of the node's training users (a contiguous, seeded block)",
    "train-users-hi": "one past the last training user id of the node",
    "num-train-users": "number of training users of the whole run (public run size)",
    "num-train-docs": "number of training documents the node holds (users may hold several)",
    "test-users-lo": "first global id of the node's test users",
    "test-users-hi": "one past the last test user id of the node",
    "num-test-users": "number of test users of the whole run",
    "num-classes": "number of classes of the public task",
    "encoder-dim": "d, the public encoder's output dimension",
    "map-dim": "m', M1's output dimension (config)",
    "release-dim": "columns of a release (the mechanism's output dimension)",
    "partition-id": "the node's place in the federation, from its node config (orders the user ids)",
    "num-partitions": "the number of nodes of the federation, from the node config",
    "node-local": "1 when the node's training documents are its own file (their count is in train-users-*)",
}
_RELEASE_COMMON = {
    "user-ids": (ROW_ID, "the users the server asked for (train) or the node's test users: whose budget pays"),
    "fresh": (CHARGE_METADATA, "1 = drawn now (charged), 0 = the cached release re-sent at no cost"),
    "embedding-charge": (CHARGE_METADATA, "each row's index into the 'charges' table of the embedding channel"),
}
_LEVEL_ROWS = {  # scope -> the embedding channel's wire arrays (fl.levels.channels: to_record)
    "local/sentence": {
        "embeddings": (SANITIZER_OUTPUT, "the sentence mechanism's output on n(M1 G(doc)), float32 [n, r]"),
    },
    "local/word": {
        "embeddings": (SANITIZER_OUTPUT, "G(word-level rewrite): post-processing of the word mechanism's output"),
        "num-words": (CHARGE_METADATA, "words per document: the charge's unit count (the length is not hidden)"),
    },
    "local/document": {
        "embeddings": (SANITIZER_OUTPUT, "truncation's output (clipped mean + Laplace noise), float32 [n, d]"),
        "candidate-ids": (CANDIDATE_INDEX, "DeepCandidate's output, sent instead of a vector: a public candidate"),
        "num-sentences": (CHARGE_METADATA, "k, sentences per document: the charge's input (SentDP reveals k)"),
    },
}
_TRAIN_ONLY = {
    "doc-ids": (
        ROW_ID,
        "the document's row in the train split (the server's own seeded partition; no content), or with a "
        "node's own file (data-path) its user's id",
    ),
    "labels": (
        SANITIZER_OUTPUT,
        "the label channel's output (rr, rr_prior), or the raw label when label-mechanism = 'none' "
        "(labels in the clear: a declared choice, reported as no finite epsilon)",
    ),
    "label-charge": (CHARGE_METADATA, "each row's index into the 'charges' table of the label channel"),
}
_CHARGES = {
    "embedding": "the embedding channel's distinct charges (JSON guarantees: public, from config and row counts)",
    "label": "the label channel's distinct charges (JSON guarantee of the label mechanism)",
}
_RELEASE_COUNTS = {
    "num-examples": "rows in this reply's release",
    "fresh-releases": "rows drawn now (the ledger charges them)",
    "refused-releases": "fresh draws the node refused because of the users' max-epsilon budget",
}
_LOCAL_EVAL_COUNTS = {
    "confusion": "confusion counts of the server model on the node's sanitized test releases (README: "
    "evaluation counts use true labels and are not covered by the guarantee)",
    "clean-confusion": "confusion counts of the server model on the clean test inputs (on-device inference, "
    "clean-evaluation = true; a measurement outside the guarantee)",
    "public-confusion": "confusion counts of the server model fitted on the public data alone on the same "
    "sanitized test releases (the public-only line of server-side inference)",
    "public-clean-confusion": "confusion counts of the public logistic regression on the clean test inputs "
    "(clean-evaluation = true: a public-only model of on-device inference)",
    "public-head-clean-confusion": "confusion counts of the server model fitted on the public data alone on the "
    "same clean test inputs in M1's space as the run's model (clean-evaluation = true: a public-only model of "
    "on-device inference)",
}
_BY_K_COUNTS = {
    "confusion-by-k": "confusion counts by sentences per document (document tasks: doc-embedding = sentence-mean)",
    "clean-confusion-by-k": "clean confusion counts by sentences per document (clean-evaluation diagnostic)",
}


def _release_fields(message_type: str) -> tuple[DeclaredField, ...]:
    rows: list[DeclaredField] = []
    extra = _TRAIN_ONLY if message_type == TRAIN else {}
    for key, (kind, why) in {**_RELEASE_COMMON, **extra}.items():
        rows.append(DeclaredField(message_type, LOCAL_SCOPES, RELEASE, key, kind, why))
    for scope, arrays in _LEVEL_ROWS.items():
        rows += [DeclaredField(message_type, (scope,), RELEASE, k, kind, why) for k, (kind, why) in arrays.items()]
    charges = _CHARGES if message_type == TRAIN else {"embedding": _CHARGES["embedding"]}
    rows += _fields(message_type, LOCAL_SCOPES, CHARGES, CHARGE_METADATA, charges)
    rows += _fields(message_type, LOCAL_SCOPES, METRICS, AGGREGATE, _RELEASE_COUNTS)
    return tuple(rows)


#: The table: every key a node may send to the server, with its kind and why it is allowed.
DECLARED_FIELDS: tuple[DeclaredField, ...] = (
    # query (both modes, clients.node.handle_query): the cohort's shape, no data.
    *_fields(QUERY, SCOPES, COHORT, COHORT_SHAPE, _COHORT_KEYS),
    # local mode, train (clients.ldp_client.handle_train): releases and their charges.
    *_release_fields(TRAIN),
    DeclaredField(
        TRAIN,
        ("local/sentence",),
        MAP_GRAD,
        "grad",
        UNSANITIZED,
        "map-in = 'leaky' only (allow-unaccounted-leakage = true): dLoss/dM1 on raw embeddings; the run "
        "then reports NOT LOCAL DP",
    ),
    DeclaredField(
        TRAIN, ("local/sentence",), MAP_GRAD, "count", UNSANITIZED, "map-in = 'leaky' only: rows in that gradient"
    ),
    # local mode, evaluate (clients.ldp_client.handle_evaluate): test releases and confusion counts.
    *_release_fields(EVALUATE),
    *_fields(EVALUATE, LOCAL_SCOPES, METRICS, AGGREGATE, _LOCAL_EVAL_COUNTS),
    *_fields(EVALUATE, LOCAL_SCOPES, METRICS, AGGREGATE, _BY_K_COUNTS),  # document tasks of any level
    # central mode, user unit (clients.central_client.handle_user_train): the clipped sum, nothing else.
    DeclaredField(
        TRAIN,
        ("central/user",),
        UPDATE_SUM,
        MODEL_PARAMETER,
        CLIPPED_SUM,
        "one array per model parameter: the sum of the Poisson-sampled users' updates, each clipped to "
        "central-clip; no count, no per-user value (the server adds the Gaussian noise)",
    ),
    # central mode, node unit (clients.central_client.handle_central_train): Flower's FedAvg reply.
    DeclaredField(
        TRAIN,
        ("central/node",),
        MODEL,
        MODEL_PARAMETER,
        NODE_UPDATE,
        "the node's model after local training on raw embeddings: DP-FedAvg over nodes, clipped by "
        "fixedclipping_mod (central-clipping = 'client') or by the server, which adds the noise",
    ),
    *_fields(
        TRAIN,
        ("central/node",),
        METRICS,
        AGGREGATE,
        {"num-examples": "training documents of the node (FedAvg's count; not recorded by the server)"},
    ),
    # central mode, evaluate (clients.central_client.handle_central_evaluate): confusion counts only.
    *_fields(
        EVALUATE,
        CENTRAL_SCOPES,
        METRICS,
        AGGREGATE,
        {
            "num-examples": "test users of the node",
            "confusion": "confusion counts of the global model on the node's raw test embeddings (README: "
            "evaluation is not covered by the guarantee)",
        },
    ),
    *_fields(
        TRAIN,
        ("central/node",),
        METRICS,
        CONSTANT,
        {"uniform-weight": "always 1.0: the server's FedAvg weights every node equally (noise calibration)"},
    ),
    *_fields(
        EVALUATE, CENTRAL_SCOPES, METRICS, CONSTANT, {"uniform-weight": "always 1.0 (equal weights, as in training)"}
    ),
    *_fields(
        EVALUATE,
        CENTRAL_SCOPES,
        METRICS,
        AGGREGATE,
        {
            "public-confusion": "confusion counts of the public logistic regression (fitted on the public data "
            "alone) on the same clean test inputs: the public-only line"
        },
    ),
)


def point_prefix(point: int) -> str:
    """Where point ``point``'s records sit in a message carrying several points' (``p<point>/``)."""
    return f"{POINT_PREFIX}{point}/"


def point_contents(content: RecordDict) -> dict[int, RecordDict]:
    """Each point's records of a reply carrying several points' (``strategies.points``): ``p<i>/<record>``
    becomes point ``i``'s ``<record>``. A record under no point prefix raises ``ValueError``."""
    out: dict[int, RecordDict] = {}
    for key, record in content.items():
        head, sep, rest = key.partition("/")
        if not (sep and head.startswith(POINT_PREFIX) and head[len(POINT_PREFIX) :].isdigit()):
            raise ValueError(f"record {key!r} belongs to no point")
        out.setdefault(int(head[len(POINT_PREFIX) :]), RecordDict())[rest] = record
    return out


def declared_fields(message_type: str, scope: str | None = None) -> dict[tuple[str, str], DeclaredField]:
    """The declared ``(record, key)`` pairs of replies to ``message_type`` (in ``scope``; ``None``: any scope)."""
    if scope is not None and scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}; scopes: {', '.join(SCOPES)}")
    return {
        (f.record, f.key): f
        for f in DECLARED_FIELDS
        if f.message_type == message_type and (scope is None or scope in f.scopes)
    }


def undeclared_fields(
    message_type: str,
    content: RecordDict,
    scope: str | None = None,
    *,
    model_parameters: Collection[str] | None = None,
    allow_unsanitized: bool = False,
) -> list[str]:
    """``record/key`` of every entry of a reply's ``content`` that :data:`DECLARED_FIELDS` does not declare.

    ``message_type`` is the reply's Flower message type (``"train"``, ``"evaluate"``, ``"query"``;
    an action suffix such as ``"train.x"`` is ignored); ``scope`` one of :data:`SCOPES` (``None``:
    declared in any scope). A record with no declared key is reported as ``record/*``, and a record of
    another type than declared (an ``ArrayRecord`` where metrics are declared) by each of its keys.
    Keys of a ``MODEL_PARAMETER`` record must be in ``model_parameters`` when it is given (the
    request's model). Fields of kind ``UNSANITIZED`` count as undeclared unless ``allow_unsanitized``.
    """
    declared = declared_fields(message_type.split(".")[0], scope)
    found: list[str] = []
    for record_key, record in content.items():
        keys = {k for (r, k), f in declared.items() if r == record_key and (allow_unsanitized or f.kind != UNSANITIZED)}
        if not keys:
            found.append(f"{record_key}/*")
            continue
        if not isinstance(record, REPLY_RECORD_TYPES[record_key]):
            found += [f"{record_key}/{k}" for k in record.keys()] or [f"{record_key}/*"]
            continue
        for key in record.keys():
            if MODEL_PARAMETER in keys:
                if model_parameters is not None and key not in model_parameters:
                    found.append(f"{record_key}/{key}")
            elif key not in keys:
                found.append(f"{record_key}/{key}")
    return found


__all__ = [
    "AGGREGATE",
    "CANDIDATE_INDEX",
    "CENTRAL_SCOPES",
    "CHANNELS",
    "CHARGES",
    "CHARGE_METADATA",
    "CLIPPED_SUM",
    "COHORT",
    "COHORT_SHAPE",
    "CONFIG",
    "CONSTANT",
    "DECLARED_FIELDS",
    "point_contents",
    "point_prefix",
    "DOCUMENT_SETUP",
    "ENCODER",
    "EVALUATE",
    "KINDS",
    "LOCAL_SCOPES",
    "MAP_GRAD",
    "MAP_IN",
    "METRICS",
    "MODEL",
    "MODEL_PARAMETER",
    "NODE_UPDATE",
    "PUBLIC_MODEL",
    "PUBLIC_RELEASE_MODEL",
    "QUERY",
    "RELEASE",
    "REPLY_RECORD_TYPES",
    "ROW_ID",
    "SANITIZER_OUTPUT",
    "SCOPES",
    "TRAIN",
    "UNSANITIZED",
    "UPDATE_SUM",
    "USERS",
    "CohortInfo",
    "DeclaredField",
    "Release",
    "declared_fields",
    "undeclared_fields",
]
