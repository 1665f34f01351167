"""The wire schema: record keys and the small types both ends read and write.

A Flower ``Message`` carries a ``RecordDict``; these are its keys in Sanitas'
messages, and the typed views of the records that cross (a node's cohort
description, a release with its charges). The ClientApp writes them and the
ServerApp reads them with the same functions, so the two ends cannot drift.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord, RecordDict

from .accounting.charges import Charge

# RecordDict keys -------------------------------------------------------------------------------
COHORT = "cohort"  # query reply: MetricRecord (CohortInfo)
CONFIG = "config"  # requests: ConfigRecord (server-round, user-ids)
MAP_IN = "map-in"  # requests: ArrayRecord {"matrix"}: M1 when the server provides it
MODEL = "arrays"  # requests: ArrayRecord, the server model's state dict
DOCUMENT_SETUP = "document-setup"  # requests: ArrayRecord, the document level's public material (once per node)
RELEASE = "release"  # replies: ArrayRecord of released rows (see Release)
CHARGES = "charges"  # replies: ConfigRecord, the release's distinct charges per channel (JSON)
METRICS = "metrics"  # replies: MetricRecord (counts, confusion matrices)
UPDATE_SUM = "update-sum"  # user-level central replies: ArrayRecord, the sum of the sampled users' clipped updates
MAP_GRAD = "map-in-grad"  # leaky mode only: ArrayRecord {"grad", "count"}, an unsanitized gradient

#: Privacy channels of a release, as named on the wire and in the ledger.
CHANNELS = ("embedding", "label")


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

    def to_record(self) -> MetricRecord:
        return MetricRecord({f.name.replace("_", "-"): int(getattr(self, f.name)) for f in fields(self)})

    @classmethod
    def from_record(cls, record: MetricRecord) -> CohortInfo:
        return cls(**{f.name: int(record[f.name.replace("_", "-")]) for f in fields(cls)})

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
        record = content[RELEASE]
        known = {"user-ids", "fresh", "doc-ids", "labels", *(f"{c}-charge" for c in CHANNELS)}
        charges = {c: [Charge.from_dict(d) for d in json.loads(str(v))] for c, v in content[CHARGES].items()}
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


__all__ = [
    "CHANNELS",
    "CHARGES",
    "COHORT",
    "CONFIG",
    "DOCUMENT_SETUP",
    "MAP_GRAD",
    "MAP_IN",
    "METRICS",
    "MODEL",
    "RELEASE",
    "CohortInfo",
    "Release",
]
