"""The wire schema: record keys and the small types both ends read and write.

A Flower ``Message`` carries a ``RecordDict``; these are its keys in Sanitas'
messages, and the typed views of the records that cross (a node's cohort
description, a release with its charges). The ClientApp writes them and the
ServerApp reads them with the same functions, so the two ends cannot drift.
Every name is read as ``fl.wire.NAME``; each lives in one module of this package:

* :mod:`fl.wire.keys`: the record keys, the release's channels, the points' prefixes;
* :mod:`fl.wire.reads`: typed reads of record entries (a ``TypeError`` naming the key otherwise);
* :mod:`fl.wire.arrays`: Flower's Arrays to and from their .npy bytes, decoded once per process;
* :mod:`fl.wire.records`: :class:`CohortInfo` and :class:`Release`;
* :mod:`fl.wire.declared`: the declaration.

:data:`DECLARED_FIELDS` declares every key a node may send to the server (per message type, mode
and level), with its kind (sanitizer output, candidate index, clipped central sum, charge metadata,
aggregate, ...) and why it may cross; :func:`undeclared_fields` lists what a reply carries beyond it
(the message audit, tests/integration/test_message_audit.py, runs it on every reply of real runs).
"""

from __future__ import annotations

from fl.wire.arrays import from_array, shared_numpy, to_array
from fl.wire.declared import (
    AGGREGATE,
    CANDIDATE_INDEX,
    CENTRAL_SCOPES,
    CHARGE_METADATA,
    CLIPPED_SUM,
    COHORT_SHAPE,
    CONSTANT,
    DECLARED_FIELDS,
    EVALUATE,
    KINDS,
    LOCAL_SCOPES,
    MODEL_PARAMETER,
    NODE_UPDATE,
    QUERY,
    REPLY_RECORD_TYPES,
    ROW_ID,
    SANITIZER_OUTPUT,
    SCOPES,
    TRAIN,
    UNSANITIZED,
    DeclaredField,
    declared_fields,
    undeclared_fields,
)
from fl.wire.keys import (
    CHANNELS,
    CHARGES,
    COHORT,
    CONFIG,
    DOCUMENT_SETUP,
    ENCODER,
    HELD_MODEL,
    MAP_GRAD,
    MAP_IN,
    METRICS,
    MODEL,
    MODEL_REF,
    POINT_ERROR,
    POINT_PREFIX,
    POINTS,
    PUBLIC_MODEL,
    PUBLIC_RELEASE_MODEL,
    RELEASE,
    TRAIN_ON_RELEASES,
    UPDATE_SUM,
    USERS,
    point_contents,
    point_prefix,
)
from fl.wire.reads import (
    array_record,
    config_record,
    metric_record,
    read_array,
    read_float,
    read_int,
    read_list,
    read_str,
)
from fl.wire.records import CohortInfo, Release

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
    "CohortInfo",
    "DECLARED_FIELDS",
    "DOCUMENT_SETUP",
    "DeclaredField",
    "ENCODER",
    "EVALUATE",
    "HELD_MODEL",
    "KINDS",
    "LOCAL_SCOPES",
    "MAP_GRAD",
    "MAP_IN",
    "METRICS",
    "MODEL",
    "MODEL_PARAMETER",
    "MODEL_REF",
    "TRAIN_ON_RELEASES",
    "NODE_UPDATE",
    "POINTS",
    "POINT_ERROR",
    "POINT_PREFIX",
    "PUBLIC_MODEL",
    "PUBLIC_RELEASE_MODEL",
    "QUERY",
    "RELEASE",
    "REPLY_RECORD_TYPES",
    "ROW_ID",
    "Release",
    "SANITIZER_OUTPUT",
    "SCOPES",
    "TRAIN",
    "UNSANITIZED",
    "UPDATE_SUM",
    "USERS",
    "array_record",
    "config_record",
    "declared_fields",
    "from_array",
    "metric_record",
    "point_contents",
    "point_prefix",
    "read_array",
    "read_float",
    "read_int",
    "read_list",
    "read_str",
    "shared_numpy",
    "to_array",
    "undeclared_fields",
]
