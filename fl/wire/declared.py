"""The declaration: every key a node may send to the server, its kind, and why it may cross.

:data:`DECLARED_FIELDS` declares every key a node may send to the server (per message type, mode
and level), with its kind (sanitizer output, candidate index, clipped central sum, charge metadata,
aggregate, ...) and why it may cross; :func:`undeclared_fields` lists what a reply carries beyond it
(the message audit, tests/integration/test_message_audit.py, runs it on every reply of real runs).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from flwr.app import ArrayRecord, ConfigRecord, MetricRecord, RecordDict

from fl.wire.keys import CHARGES, COHORT, MAP_GRAD, METRICS, MODEL, RELEASE, UPDATE_SUM

# Every record key and every array / metric / config key a node may send to the server, per message
# type and scope, with its kind and why it may cross. tests/integration/test_message_audit.py captures
# every node -> server message of real small runs (each level, both modes) and fails on any key that is
# not declared here, so a new field must be added to this table, with its reason, before it can ship.

#: Kinds of declared fields (what a field is, and so what the audit checks it against).
SANITIZER_OUTPUT = "sanitizer output"  # a local-DP mechanism's output: charged by the ledger
CANDIDATE_INDEX = "candidate index"  # DeepCandidate's output: the index of a public candidate
CLIPPED_SUM = "clipped central sum"  # user-level DP-FedAvg: a node's sum of per-user clipped updates
NODE_UPDATE = "central node update"  # node-level DP-FedAvg: a node's model after local training
RELEASE_MODEL = "model trained on releases"  # local mode, a Flower strategy: a node's model fitted on its releases
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
    RELEASE_MODEL,
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
    "num-examples": "rows in this reply's release (training on the nodes: the releases the node holds and trained "
    "on, the strategy's weight)",
    "fresh-releases": "rows drawn now (the ledger charges them)",
    "refused-releases": (
        "fresh draws the node's own ledger refused: a user who already released (a second request, or a new map), "
        "or one over its max-epsilon budget"
    ),
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
    # local mode, a Flower strategy (clients.node_training): the node trains on its users' releases and
    # sends its model and the releases' charges instead of the rows.
    DeclaredField(
        TRAIN,
        LOCAL_SCOPES,
        MODEL,
        MODEL_PARAMETER,
        RELEASE_MODEL,
        "strategy = a Flower strategy: the node's model after training from the global model on its users' "
        "released rows and labels only (post-processing of the sanitizer outputs; no raw text or embedding)",
    ),
    *_fields(
        TRAIN,
        LOCAL_SCOPES,
        METRICS,
        AGGREGATE,
        {
            "train_loss": "the global model's mean loss on the node's released rows before it trains (a function "
            "of releases only; QFedAvg's input)"
        },
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
